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
//! CPU kernels, f32 and f64 (`conv_cpu.rs`): im2col and GEMM a tile of output pixels at a
//! time, on the intra-op threads; the input gradient as the transposed convolution, by
//! col2im for a strided row-major one. They work in the input's memory order: a Julia
//! (column-major) batch of at least [`COLS_MIN_BATCH`] is read as it is stored and gives a
//! column-major output, which a fetch hands to Julia without a transpose; other layouts
//! are made row-major first. A column-major batch's forward convolution (and so its
//! input gradient) and its filter gradient run the direct kernels of
//! `conv_direct.rs` and `conv_direct_filter.rs` where the CPU has FMA: the batch in SIMD
//! lanes, no patch matrix ([`kernel_name`] says which). The batch dimension may be unknown
//! until the graph runs. No GPU kernels: on a GPU the ops need soft placement, which puts
//! them on the CPU.
//!
//! The backprop ops take the tensor whose shape TF passes as `input_sizes` or
//! `filter_sizes` itself (input 0 of `Conv2DBackpropInput`, input 1 of
//! `Conv2DBackpropFilter`), as the run-time shape ops of this engine do; its values are not
//! read.

use super::*;
use crate::graph::NodeSpec;
use crate::shape::UNKNOWN;
use crate::strided::row_major;
use crate::tensor::Element;
use ndarray::{ArrayView4, IxDyn};

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
    /// The input's dilation (XLA's `lhs_dilation`): its pixels sit `dh` rows and `dw`
    /// columns apart in the padded plane the filter slides over, zeros between them. One,
    /// except in the transposed convolution that computes a strided input gradient.
    dh: usize,
    dw: usize,
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
    Ok(Geometry { n: xd[0], h: xd[1], w: xd[2], c: xd[3], kh: fd[0], kw: fd[1], oc: fd[3], oh, ow, sh: a.sh, sw: a.sw, pt, pl, dh: 1, dw: 1 })
}

impl Geometry {
    fn out_shape(&self) -> Shape {
        Shape(vec![self.n, self.oh, self.ow, self.oc])
    }
    /// Rows and columns of the patch matrix.
    fn patches(&self) -> (usize, usize) {
        (self.n * self.oh * self.ow, self.kh * self.kw * self.c)
    }
    /// For output pixel `(oy, ox)` and filter tap `(ky, kx)`, the input pixel, if the tap
    /// falls on one (not in the padding, nor between the pixels of a dilated input).
    fn tap(&self, oy: usize, ox: usize, ky: usize, kx: usize) -> Option<(usize, usize)> {
        let py = (oy * self.sh + ky).checked_sub(self.pt)?;
        let px = (ox * self.sw + kx).checked_sub(self.pl)?;
        if py % self.dh != 0 || px % self.dw != 0 {
            return None;
        }
        let (iy, ix) = (py / self.dh, px / self.dw);
        (iy < self.h && ix < self.w).then_some((iy, ix))
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

fn view4<'a, T: ConvFloat>(ctx: &KernelCtx, t: &'a Tensor) -> Result<ArrayView4<'a, T>> {
    t.array::<T>()?.view().into_dimensionality().map_err(|e| ctx.error(e))
}

/// A 4-D tensor as the matrix `[d0 d1 d2, d3]`: a view when it is row-major, else a copy.
fn as_matrix<T: ConvFloat>(a: ArrayView4<'_, T>) -> ndarray::CowArray<'_, T, ndarray::Ix2> {
    let (d0, d1, d2, d3) = a.dim();
    row_major(a.into_dyn()).into_shape_with_order((d0 * d1 * d2, d3)).expect("standard layout")
}

/// The smallest batch the kernels take in Julia's column-major order: their patches are
/// copied in runs of one pixel's batch, too short below this (a smaller batch is made
/// row-major first).
const COLS_MIN_BATCH: usize = 8;

/// The order a kernel works in for a 4-D operand: Julia's column-major one when `a` is a
/// column-major array with a batch of at least [`COLS_MIN_BATCH`] (and `cols_ok`), else
/// row-major.
fn order_of<T>(a: &ArrayView4<'_, T>, cols_ok: bool) -> cpu::Order {
    if cols_ok && !a.is_standard_layout() && crate::strided::is_column_major(a) && a.dim().0 >= COLS_MIN_BATCH {
        cpu::Order::Cols
    } else {
        cpu::Order::Rows
    }
}

/// A 4-D operand's elements in `order`: a view when they are already, else a copy.
fn in_order<'a, T: ConvFloat>(a: ArrayView4<'a, T>, order: cpu::Order) -> ndarray::CowArray<'a, T, IxDyn> {
    match order {
        cpu::Order::Rows => row_major(a.into_dyn()),
        cpu::Order::Cols if a.t().is_standard_layout() => a.into_dyn().into(),
        cpu::Order::Cols => crate::strided::dense_copy(&a.into_dyn(), true).into(),
    }
}

/// The elements of an operand made by [`in_order`].
fn elements<'a, T>(a: &'a ndarray::CowArray<'_, T, IxDyn>) -> &'a [T] {
    a.as_slice_memory_order().expect("dense in one order")
}

fn output<T: ConvFloat>(ctx: &KernelCtx, v: Vec<T>, dims: &[usize], order: cpu::Order) -> Result<Outputs> {
    use ndarray::ShapeBuilder;
    let shape = IxDyn(dims).set_f(order == cpu::Order::Cols);
    let a = ndarray::ArcArray::from_shape_vec(shape, v).map_err(|e| ctx.error(e))?;
    Ok(smallvec![T::wrap(a)])
}

fn conv2d_typed<T: ConvFloat>(ctx: &KernelCtx) -> Result<Outputs> {
    let g = run_geometry(ctx)?;
    let x4 = view4::<T>(ctx, &ctx.inputs[0])?;
    let order = order_of(&x4, true);
    let x = in_order(x4, order);
    let f = as_matrix(view4::<T>(ctx, &ctx.inputs[1])?);
    let y = cpu::forward(&g, elements(&x), order, cpu::Mat::rows(f.as_ptr(), g.oc));
    output(ctx, y, &[g.n, g.oh, g.ow, g.oc], order)
}

fn backprop_input_typed<T: ConvFloat>(ctx: &KernelCtx) -> Result<Outputs> {
    let g = run_geometry(ctx)?;
    let f4 = view4::<T>(ctx, &ctx.inputs[1])?;
    let f = as_matrix(f4);
    let dy4 = view4::<T>(ctx, &ctx.inputs[2])?;
    let order = order_of(&dy4, true);
    let dy = in_order(dy4, order);
    let dx = cpu::backprop_input(&g, elements(&dy), order, |a, b, c, d| f4[[a, b, c, d]], cpu::Mat::rows(f.as_ptr(), g.oc));
    output(ctx, dx, &[g.n, g.h, g.w, g.c], order)
}

fn backprop_filter_typed<T: ConvFloat>(ctx: &KernelCtx) -> Result<Outputs> {
    let g = run_geometry(ctx)?;
    let x4 = view4::<T>(ctx, &ctx.inputs[0])?;
    let order = order_of(&x4, true);
    let x = in_order(x4, order);
    let dy = in_order(view4::<T>(ctx, &ctx.inputs[2])?, order);
    let df = cpu::backprop_filter(&g, elements(&x), order, elements(&dy));
    output(ctx, df, &[g.kh, g.kw, g.c, g.oc], cpu::Order::Rows)
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

#[path = "conv_cpu.rs"]
mod cpu;
#[path = "conv_direct.rs"]
mod direct;
pub use direct::kernel_name;

pub(crate) fn register(r: &mut Registry) {
    const CONV_ATTRS: &[AttrDef] = attrs!["strides" => Ints, "padding" => Str, "data_format" => Str, "dilations" => Ints, "use_cudnn_on_gpu" => Bool];
    let def = |name, arity, infer, kernel, grad| {
        super::math::def(name, name, Arity::Fixed(arity), infer, kernel, GpuSupport::None, Some(grad)).with_attrs(CONV_ATTRS)
    };
    r.add(def("Conv2D", 2, infer_conv2d, kernel_conv2d, grad_conv2d));
    r.add(def("Conv2DBackpropInput", 3, infer_backprop_input, kernel_backprop_input, grad_backprop_input));
    r.add(def("Conv2DBackpropFilter", 3, infer_backprop_filter, kernel_backprop_filter, grad_backprop_filter));
}
