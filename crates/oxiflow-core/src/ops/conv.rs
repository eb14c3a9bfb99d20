//! 2-D convolution: `Conv2D`, `Conv2DBackpropInput`, `Conv2DBackpropFilter` (TF's
//! `nn_ops.conv2d` and its gradient kernels; gradients as `nn_grad.py`'s `_Conv2DGrad`,
//! `_Conv2DBackpropInputGrad`, `_Conv2DBackpropFilterGrad`, so second derivatives work).
//!
//! Layouts are TF's defaults: input `[batch, height, width, channels]` (NHWC), filter
//! `[height, width, in_channels, out_channels]` (HWIO). Attrs: `strides` (4 ints, `[1, sh,
//! sw, 1]`), `padding` (`"SAME"` or `"VALID"`), and optionally `data_format` (only `"NHWC"`)
//! and `dilations` (only ones). `SAME` pads `max((out - 1) s + k - in, 0)` in total, the
//! smaller half before (TF's `GetWindowedOutputSize`).
//!
//! CPU kernels, f32 and f64: the input's patches as the rows of a matrix (im2col), times the
//! filter as a `[kh kw c, oc]` matrix with the MatMul kernel's GEMM (system BLAS or the
//! `gemm` crate); the input gradient scatters the product with the filter's transpose back
//! (col2im), the filter gradient is the patches' transpose times the output gradient. The
//! batch dimension may be unknown until the graph runs. No GPU kernels: on a GPU the ops
//! need soft placement, which puts them on the CPU.
//!
//! The backprop ops take the tensor whose shape TF passes as `input_sizes` or
//! `filter_sizes` itself (input 0 of `Conv2DBackpropInput`, input 1 of
//! `Conv2DBackpropFilter`), as the run-time shape ops of this engine do; its values are not
//! read.

use super::matmul::gemm_product;
use super::*;
use crate::graph::NodeSpec;
use crate::shape::UNKNOWN;
use crate::strided::row_major;
use crate::tensor::Element;
use ndarray::{Array2, ArrayView2, ArrayView4, IxDyn};

/// Strides and padding of a convolution node, checked.
#[derive(Clone, Copy)]
struct ConvAttrs {
    sh: usize,
    sw: usize,
    same: bool,
}

fn conv_attrs(op: &str, attrs: &Attrs) -> Result<ConvAttrs> {
    let bad = |m: String| OxiflowError::InvalidArgument(format!("{op}: {m}"));
    let s = attrs.get_ints(op, "strides")?;
    if s.len() != 4 || s.iter().any(|&v| v < 1) {
        return Err(bad(format!("strides must be 4 positive ints [1, sh, sw, 1], got {s:?}")));
    }
    if s[0] != 1 || s[3] != 1 {
        return Err(OxiflowError::Unimplemented(format!("{op}: strides in the batch and depth dimensions are not supported, got {s:?}")));
    }
    let same = match attrs.get_str_opt(op, "padding")? {
        Some("SAME") => true,
        Some("VALID") => false,
        other => return Err(bad(format!("padding must be \"SAME\" or \"VALID\", got {other:?}"))),
    };
    if let Some(f) = attrs.get_str_opt(op, "data_format")? {
        if f != "NHWC" {
            return Err(OxiflowError::Unimplemented(format!("{op}: data_format {f} is not supported (only NHWC, TF's default)")));
        }
    }
    if attrs.contains_key("dilations") && attrs.get_ints(op, "dilations")?.iter().any(|&d| d != 1) {
        return Err(OxiflowError::Unimplemented(format!("{op}: dilations other than 1 are not supported")));
    }
    Ok(ConvAttrs { sh: s[1] as usize, sw: s[2] as usize, same })
}

/// Output size and padding before along one dimension (TF's `GetWindowedOutputSize`).
fn window(op: &str, what: &str, input: usize, k: usize, s: usize, same: bool) -> Result<(usize, usize)> {
    if same {
        let out = input.div_ceil(s);
        let total = ((out.max(1) - 1) * s + k).saturating_sub(input);
        Ok((out, total / 2))
    } else if input < k {
        Err(OxiflowError::InvalidArgument(format!("{op}: the filter's {what} {k} exceeds the input's {what} {input} with VALID padding")))
    } else {
        Ok(((input - k) / s + 1, 0))
    }
}

/// The sizes of one convolution.
#[derive(Clone, Copy, Debug)]
struct Geometry {
    n: usize,
    h: usize,
    w: usize,
    c: usize,
    kh: usize,
    kw: usize,
    oc: usize,
    oh: usize,
    ow: usize,
    sh: usize,
    sw: usize,
    pt: usize,
    pl: usize,
}

/// The geometry of input shape `x` and filter shape `f`; the batch may be [`UNKNOWN`].
fn geometry(ctx_op: &str, node: &str, x: &TensorType, f: &TensorType, a: ConvAttrs) -> Result<Geometry> {
    let bad = |m: String| OxiflowError::InvalidArgument(format!("{ctx_op} '{node}': {m}"));
    if x.shape.rank() != 4 {
        return Err(bad(format!("the input must be 4-D [batch, height, width, channels], got shape {}", x.shape)));
    }
    if f.shape.rank() != 4 {
        return Err(bad(format!("the filter must be 4-D [height, width, in_channels, out_channels], got shape {}", f.shape)));
    }
    let (xd, fd) = (x.shape.dims(), f.shape.dims());
    if xd[1..].iter().chain(fd).any(|&d| d == UNKNOWN) {
        return Err(OxiflowError::Unimplemented(format!(
            "{ctx_op} '{node}': only the batch dimension may be unknown, got input {} and filter {}",
            x.shape, f.shape
        )));
    }
    if xd[3] != fd[2] {
        return Err(bad(format!("input depth {} does not match the filter's in_channels {} (input {}, filter {})", xd[3], fd[2], x.shape, f.shape)));
    }
    if fd[0] == 0 || fd[1] == 0 {
        return Err(bad(format!("the filter's height and width must be positive, got {}", f.shape)));
    }
    let (oh, pt) = window(ctx_op, "height", xd[1], fd[0], a.sh, a.same)?;
    let (ow, pl) = window(ctx_op, "width", xd[2], fd[1], a.sw, a.same)?;
    Ok(Geometry { n: xd[0], h: xd[1], w: xd[2], c: xd[3], kh: fd[0], kw: fd[1], oc: fd[3], oh, ow, sh: a.sh, sw: a.sw, pt, pl })
}

impl Geometry {
    fn out_shape(&self) -> Shape {
        Shape(vec![self.n, self.oh, self.ow, self.oc])
    }
    /// Rows and columns of the patch matrix.
    fn patches(&self) -> (usize, usize) {
        (self.n * self.oh * self.ow, self.kh * self.kw * self.c)
    }
    /// For output pixel `(oy, ox)` and filter tap `(ky, kx)`, the input pixel, if inside.
    fn tap(&self, oy: usize, ox: usize, ky: usize, kx: usize) -> Option<(usize, usize)> {
        let iy = (oy * self.sh + ky).checked_sub(self.pt).filter(|&v| v < self.h)?;
        let ix = (ox * self.sw + kx).checked_sub(self.pl).filter(|&v| v < self.w)?;
        Some((iy, ix))
    }
}

fn check_types(ctx: &InferCtx, ts: &[&TensorType]) -> Result<DType> {
    let d = ts[0].dtype;
    ctx.require_float(d)?;
    for t in &ts[1..] {
        if t.dtype != d {
            return Err(ctx.dtype_error(d, t.dtype, " (all operands of a convolution have one dtype)"));
        }
    }
    Ok(d)
}

fn infer_conv2d(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let (x, f) = (&ctx.inputs[0], &ctx.inputs[1]);
    let d = check_types(ctx, &[x, f])?;
    let g = geometry(ctx.op, ctx.node, x, f, conv_attrs(ctx.op, ctx.attrs)?)?;
    Ok(vec![TensorType::new(d, g.out_shape())])
}

/// The backprop ops: `dy` must have the forward's output shape; the result is shaped like
/// input `like` (0: the input, 1: the filter).
fn infer_backprop(ctx: &InferCtx, like: usize) -> Result<Vec<TensorType>> {
    let (x, f, dy) = (&ctx.inputs[0], &ctx.inputs[1], &ctx.inputs[2]);
    check_types(ctx, &[x, f, dy])?;
    let g = geometry(ctx.op, ctx.node, x, f, conv_attrs(ctx.op, ctx.attrs)?)?;
    if dy.shape.merge(&g.out_shape()).is_none() {
        return Err(ctx.shape_error(&g.out_shape(), &dy.shape, " (out_backprop must have the convolution's output shape)"));
    }
    Ok(vec![ctx.inputs[like].clone()])
}
fn infer_backprop_input(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    infer_backprop(ctx, 0)
}
fn infer_backprop_filter(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    infer_backprop(ctx, 1)
}

/// Float element types of the kernels.
trait ConvFloat: Element + Send + Sync + super::blas::BlasFloat + super::vmath::VFloat + std::ops::Add<Output = Self> + std::ops::AddAssign {
    const ZERO: Self;
    const ONE: Self;
}
impl ConvFloat for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
}
impl ConvFloat for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
}

/// The geometry of a running node from its inputs' actual shapes.
fn run_geometry(ctx: &KernelCtx) -> Result<Geometry> {
    let t = |i: usize| TensorType::new(ctx.inputs[i].dtype(), ctx.inputs[i].shape());
    geometry(ctx.node.op.name, &ctx.node.name, &t(0), &t(1), conv_attrs(ctx.node.op.name, &ctx.node.attrs)?)
}

/// Patch matrices below this many elements are built on the calling thread.
const PARALLEL_MIN: usize = 1 << 16;

/// `f(b, chunk)` for each batch item's chunk of `buf` (`per` elements each): over the
/// intra-op threads when `buf` is large, else on the calling thread.
fn per_batch<T: ConvFloat>(buf: &mut [T], per: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    if per == 0 {
        return;
    }
    if buf.len() >= PARALLEL_MIN {
        crate::intra_op::parallel_for_each(buf.chunks_mut(per).enumerate().collect(), |(b, c)| f(b, c));
    } else {
        buf.chunks_mut(per).enumerate().for_each(|(b, c)| f(b, c));
    }
}

/// The patch matrix: row `(b, oy, ox)` holds the input pixels under the filter, tap by tap,
/// channels innermost (zeros where the filter hangs over the padding).
fn im2col<T: ConvFloat>(g: &Geometry, x: ArrayView4<T>) -> Array2<T> {
    let (m, k) = g.patches();
    let x = row_major(x.into_dyn());
    let xs = x.as_slice().expect("standard layout");
    let mut cols = vec![T::ZERO; m * k];
    per_batch(&mut cols, g.oh * g.ow * k, |b, out| {
        for (r, row) in out.chunks_mut(k).enumerate() {
            let (oy, ox) = (r / g.ow, r % g.ow);
            for ky in 0..g.kh {
                for kx in 0..g.kw {
                    if let Some((iy, ix)) = g.tap(oy, ox, ky, kx) {
                        let src = ((b * g.h + iy) * g.w + ix) * g.c;
                        let dst = (ky * g.kw + kx) * g.c;
                        row[dst..dst + g.c].copy_from_slice(&xs[src..src + g.c]);
                    }
                }
            }
        }
    });
    Array2::from_shape_vec((m, k), cols).expect("m * k elements")
}

/// Adds each row of `cols` back onto the input pixels its patch came from (im2col's adjoint).
fn col2im<T: ConvFloat>(g: &Geometry, cols: ArrayView2<T>) -> Vec<T> {
    let k = g.patches().1;
    let cols = row_major(cols.into_dyn());
    let cs = cols.as_slice().expect("standard layout");
    let mut dx = vec![T::ZERO; g.n * g.h * g.w * g.c];
    per_batch(&mut dx, g.h * g.w * g.c, |b, dxb| {
        for r in 0..g.oh * g.ow {
            let (oy, ox) = (r / g.ow, r % g.ow);
            let row = &cs[(b * g.oh * g.ow + r) * k..][..k];
            for ky in 0..g.kh {
                for kx in 0..g.kw {
                    if let Some((iy, ix)) = g.tap(oy, ox, ky, kx) {
                        let dst = (iy * g.w + ix) * g.c;
                        let src = (ky * g.kw + kx) * g.c;
                        dxb[dst..dst + g.c].iter_mut().zip(&row[src..src + g.c]).for_each(|(d, &s)| *d += s);
                    }
                }
            }
        }
    });
    dx
}

fn view4<'a, T: ConvFloat>(ctx: &KernelCtx, t: &'a Tensor) -> Result<ArrayView4<'a, T>> {
    t.array::<T>()?.view().into_dimensionality().map_err(|e| ctx.error(e))
}

/// A 4-D tensor as the matrix `[d0 d1 d2, d3]`: a view when it is row-major, else a copy.
fn as_matrix<T: ConvFloat>(a: ArrayView4<'_, T>) -> ndarray::CowArray<'_, T, ndarray::Ix2> {
    let (d0, d1, d2, d3) = a.dim();
    row_major(a.into_dyn()).into_shape_with_order((d0 * d1 * d2, d3)).expect("standard layout")
}

fn wrap<T: ConvFloat>(ctx: &KernelCtx, p: Array2<T>, dims: &[usize]) -> Result<Outputs> {
    let p = if p.is_standard_layout() { p } else { crate::strided::standard_copy(&p.view().into_dyn()).into_dimensionality().map_err(|e| ctx.error(e))? };
    let a = p.into_shared().into_shape_with_order(IxDyn(dims)).map_err(|e| ctx.error(e))?;
    Ok(smallvec![T::wrap(a)])
}

fn conv2d_typed<T: ConvFloat>(ctx: &KernelCtx) -> Result<Outputs> {
    let g = run_geometry(ctx)?;
    let cols = im2col(&g, view4::<T>(ctx, &ctx.inputs[0])?);
    let f = as_matrix(view4::<T>(ctx, &ctx.inputs[1])?);
    let y = gemm_product(super::blas::blas(), cols.view(), f.view(), T::ZERO, T::ONE, None);
    wrap(ctx, y, &[g.n, g.oh, g.ow, g.oc])
}

fn backprop_input_typed<T: ConvFloat>(ctx: &KernelCtx) -> Result<Outputs> {
    let g = run_geometry(ctx)?;
    let f = as_matrix(view4::<T>(ctx, &ctx.inputs[1])?);
    let dy = as_matrix(view4::<T>(ctx, &ctx.inputs[2])?);
    let dcols = gemm_product(super::blas::blas(), dy.view(), f.t(), T::ZERO, T::ONE, None);
    let dx = col2im(&g, dcols.view());
    let a = ndarray::ArcArray::from_shape_vec(IxDyn(&[g.n, g.h, g.w, g.c]), dx).map_err(|e| ctx.error(e))?;
    Ok(smallvec![T::wrap(a)])
}

fn backprop_filter_typed<T: ConvFloat>(ctx: &KernelCtx) -> Result<Outputs> {
    let g = run_geometry(ctx)?;
    let cols = im2col(&g, view4::<T>(ctx, &ctx.inputs[0])?);
    let dy = as_matrix(view4::<T>(ctx, &ctx.inputs[2])?);
    let df = gemm_product(super::blas::blas(), cols.t(), dy.view(), T::ZERO, T::ONE, None);
    wrap(ctx, df, &[g.kh, g.kw, g.c, g.oc])
}

fn by_dtype(ctx: &KernelCtx, f32k: fn(&KernelCtx) -> Result<Outputs>, f64k: fn(&KernelCtx) -> Result<Outputs>) -> Result<Outputs> {
    match ctx.inputs[0].dtype() {
        DType::Float32 => f32k(ctx),
        DType::Float64 => f64k(ctx),
        d => Err(ctx.error(format!("unsupported dtype {d}"))),
    }
}
fn kernel_conv2d(ctx: &KernelCtx) -> Result<Outputs> {
    by_dtype(ctx, conv2d_typed::<f32>, conv2d_typed::<f64>)
}
fn kernel_backprop_input(ctx: &KernelCtx) -> Result<Outputs> {
    by_dtype(ctx, backprop_input_typed::<f32>, backprop_input_typed::<f64>)
}
fn kernel_backprop_filter(ctx: &KernelCtx) -> Result<Outputs> {
    by_dtype(ctx, backprop_filter_typed::<f32>, backprop_filter_typed::<f64>)
}

/// A convolution op of `node`'s geometry (its strides, padding and layout attrs).
fn conv_like(g: &mut Graph, node: &Node, op: &str, inputs: &[Output]) -> Result<Output> {
    let mut spec = NodeSpec::new(op, inputs);
    for (k, v) in &node.attrs {
        spec = spec.attr(k, v.clone());
    }
    g.op_spec(spec)
}

/// TF `_Conv2DGrad`: `Conv2DBackpropInput(x, f, dy)`, `Conv2DBackpropFilter(x, f, dy)`.
fn grad_conv2d(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None, None]) };
    let (x, f) = (node.inputs[0], node.inputs[1]);
    let dx = conv_like(g, node, "Conv2DBackpropInput", &[x, f, dy])?;
    let df = conv_like(g, node, "Conv2DBackpropFilter", &[x, f, dy])?;
    Ok(vec![Some(dx), Some(df)])
}

/// TF `_Conv2DBackpropInputGrad`: the input (shape only) gets none; the filter
/// `Conv2DBackpropFilter(grad, f, dy)`; `dy` the convolution `Conv2D(grad, f)`.
fn grad_backprop_input(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(gr) = grads[0] else { return Ok(vec![None, None, None]) };
    let (f, dy) = (node.inputs[1], node.inputs[2]);
    let df = conv_like(g, node, "Conv2DBackpropFilter", &[gr, f, dy])?;
    let ddy = conv_like(g, node, "Conv2D", &[gr, f])?;
    Ok(vec![None, Some(df), Some(ddy)])
}

/// TF `_Conv2DBackpropFilterGrad`: the input `Conv2DBackpropInput(x, grad, dy)`; the filter
/// (shape only) none; `dy` the convolution `Conv2D(x, grad)`.
fn grad_backprop_filter(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(gr) = grads[0] else { return Ok(vec![None, None, None]) };
    let (x, dy) = (node.inputs[0], node.inputs[2]);
    let dx = conv_like(g, node, "Conv2DBackpropInput", &[x, gr, dy])?;
    let ddy = conv_like(g, node, "Conv2D", &[x, gr])?;
    Ok(vec![Some(dx), None, Some(ddy)])
}

pub(crate) fn register(r: &mut Registry) {
    const CONV_ATTRS: &[AttrDef] = attrs!["strides" => Ints, "padding" => Str, "data_format" => Str, "dilations" => Ints, "use_cudnn_on_gpu" => Bool];
    let def = |name, arity, infer, kernel, grad| {
        super::math::def(name, name, Arity::Fixed(arity), infer, kernel, GpuSupport::None, Some(grad)).with_attrs(CONV_ATTRS)
    };
    r.add(def("Conv2D", 2, infer_conv2d, kernel_conv2d, grad_conv2d));
    r.add(def("Conv2DBackpropInput", 3, infer_backprop_input, kernel_backprop_input, grad_backprop_input));
    r.add(def("Conv2DBackpropFilter", 3, infer_backprop_filter, kernel_backprop_filter, grad_backprop_filter));
}
