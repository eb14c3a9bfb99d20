//! Reductions: `Sum`, `Mean`, `Prod`, `Max`, `Min` (TF's `tf.reduce_sum/mean/prod/max/min`)
//! and `ArgMax`, `ArgMin` (`tf.argmax/argmin`); gradients as `math_grad.py`.
//!
//! Axes are attributes, as for `Sum`: attr `axis` (0-based ints, negatives count from the
//! end; absent or empty means every axis, the convention `Sum` already has) and bool attr
//! `keep_dims` (reduced axes kept with size 1). `ArgMax`/`ArgMin` take one int attr `axis`
//! and attr `output_type` (`Int64` by default, or `Int32`), and return 0-based indices of
//! the first extremum.

use super::array::{reshape, reshape_array};
use super::grad_util::{need_dy, y0};
use super::math::{def, require_numeric, Arith};
use super::*;
use crate::graph::NodeSpec;
use crate::tensor::Complex;
use ndarray::{ArcArray, ArrayD, Axis, IxDyn, ShapeBuilder};

/// Adds `Sum(x)` over `axes` (0-based, negatives count from the end; empty = all axes),
/// keeping reduced axes as size 1 when `keep_dims` (TF's `tf.reduce_sum`). Numeric dtypes.
pub fn reduce_sum(g: &mut Graph, x: Output, axes: &[i64], keep_dims: bool) -> Result<Output> {
    g.op_spec(NodeSpec::new("Sum", &[x]).attr("axis", axes.to_vec()).attr("keep_dims", keep_dims))
}

/// The reduced axes of a reduction (`Sum`, `Mean`, `Max`, ...; `op` names it in errors) over
/// a rank-`rank` input: attr `axis` normalized (negatives from the end), sorted,
/// deduplicated; absent or empty means every axis.
pub(crate) fn reduce_axes(op: &str, attrs: &Attrs, rank: usize) -> std::result::Result<Vec<usize>, String> {
    let raw = match attrs.get("axis") {
        None => Vec::new(),
        Some(_) => attrs.get_ints(op, "axis").map_err(|e| e.to_string())?,
    };
    if raw.is_empty() {
        return Ok((0..rank).collect());
    }
    let r = rank as i64;
    let mut axes = raw
        .iter()
        .map(|&a| if (-r..r).contains(&a) { Ok(((a + r) % r) as usize) } else { Err(format!("axis {a} is out of range for an input of rank {rank}")) })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    axes.sort_unstable();
    axes.dedup();
    Ok(axes)
}

fn infer_sum(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let x = &ctx.inputs[0];
    super::complex::require_arith(ctx, x.dtype)?;
    let axes = reduce_axes("Sum", ctx.attrs, x.shape.rank()).map_err(|m| ctx.invalid(m))?;
    let keep = ctx.attrs.get_bool_or("Sum", "keep_dims", false)?;
    let dims = x
        .shape
        .dims()
        .iter()
        .enumerate()
        .filter_map(|(i, &d)| match (axes.contains(&i), keep) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect();
    Ok(vec![TensorType::new(x.dtype, Shape(dims))])
}

/// TF `_SumGrad`: `dy` reshaped to the input's rank (reduced axes of size 1), then
/// broadcast to the input's shape (`BroadcastTo` where TF uses `Tile`).
fn grad_sum(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None]) };
    let (in_shape, axes) = node_axes(g, node)?;
    Ok(vec![Some(broadcast_back(g, dy, node.inputs[0], &in_shape, &axes)?)])
}

/// The input's dims with the reduced axes set to 1 (`keep_dims` shape).
fn kept_shape(shape: &Shape, axes: &[usize]) -> Shape {
    Shape(shape.dims().iter().enumerate().map(|(i, &d)| if axes.contains(&i) { 1 } else { d }).collect())
}

fn infer_reduce(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let x = &ctx.inputs[0];
    require_numeric(ctx, x.dtype)?;
    if ctx.op == "Mean" {
        ctx.require_float(x.dtype)?;
    }
    let axes = reduce_axes(ctx.op, ctx.attrs, x.shape.rank()).map_err(|m| ctx.invalid(format!("{m} (input shape {})", x.shape)))?;
    let kept = kept_shape(&x.shape, &axes);
    let dims = if ctx.attrs.get_bool_or(ctx.op, "keep_dims", false)? {
        kept.0
    } else {
        x.shape.dims().iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d).collect()
    };
    Ok(vec![TensorType::new(x.dtype, Shape(dims))])
}

/// Identity elements of `Max`/`Min` and the conversion `Mean` needs.
pub(crate) trait Bounded: Arith {
    fn lowest() -> Self;
    fn highest() -> Self;
    fn one() -> Self;
    fn div_count(self, n: usize) -> Self;
}
macro_rules! bounded {
    ($t:ty, $lo:expr, $hi:expr) => {
        impl Bounded for $t {
            fn lowest() -> Self {
                $lo
            }
            fn highest() -> Self {
                $hi
            }
            fn one() -> Self {
                1 as $t
            }
            fn div_count(self, n: usize) -> Self {
                self / (n as $t)
            }
        }
    };
}
bounded!(f32, f32::NEG_INFINITY, f32::INFINITY);
bounded!(f64, f64::NEG_INFINITY, f64::INFINITY);
bounded!(i32, i32::MIN, i32::MAX);
bounded!(i64, i64::MIN, i64::MAX);

/// Folds `a` over the node's axes with `init`/`f`, shaped as the node's output: by
/// [`reduce_blocked`] where the layout allows a loop over memory, else axis by axis.
/// `f` is a generic function (not a `fn` pointer), so the loops are compiled for it.
fn fold<T: Element, F: Fn(T, T) -> T + Copy>(ctx: &KernelCtx, a: &ArcArray<T, IxDyn>, init: T, f: F) -> Result<ArcArray<T, IxDyn>> {
    let axes = reduce_axes(ctx.node.op.name, &ctx.node.attrs, a.ndim()).map_err(|m| ctx.error(m))?;
    let dims = ctx.node.outputs[0].shape.dims();
    if let Some((v, layout)) = reduce_blocked(a, &axes, init, f) {
        let shape = IxDyn(dims).set_f(layout == crate::Layout::ColumnMajor);
        return ArrayD::from_shape_vec(shape, v)
            .map(|o| o.into_shared())
            .map_err(|e| ctx.error(format!("cannot shape the result as {}: {e}", Shape(dims.to_vec()))));
    }
    if a.is_empty() {
        // every result is `init`; folding axis by axis would loop over the reduced axes'
        // length even though there are no elements (a `[0, 2^40]` gradient of a `Tile`)
        let kept: Vec<usize> = a.shape().iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d).collect();
        return reshape_array(ctx, &ArrayD::from_elem(IxDyn(&kept), init).into_shared(), dims);
    }
    let mut out: Option<ArrayD<T>> = None;
    for &ax in axes.iter().rev() {
        let step = |acc: &T, x: &T| f(*acc, *x);
        out = Some(match &out {
            Some(o) => o.fold_axis(Axis(ax), init, step),
            None => a.fold_axis(Axis(ax), init, step),
        });
    }
    reshape_array(ctx, &out.map_or_else(|| a.clone(), ArrayD::into_shared), dims)
}

/// A reduction (`f` from `init`: `+`, `*`, max, min) over `axes` as a loop over memory,
/// for the common case: a contiguous array whose reduced axes (ignoring axes of size 1) are
/// consecutive, so that its memory is an `[outer, reduced, inner]` block. Rows (`inner >
/// 1`) are combined one after another, element by element as the general path does; a
/// reduction to single values (`inner == 1`) keeps eight interleaved partial results (as
/// Eigen's packet reductions do): for sums more accurate than one running sum in floats,
/// and not bound by the adder's latency. The values come in the output's order for the
/// input's layout (a column-major input gives a column-major output). `None` for strided
/// arrays, other axis sets and empty arrays (the caller folds axis by axis).
pub(crate) fn reduce_blocked<T: Copy, F: Fn(T, T) -> T + Copy>(a: &ArcArray<T, IxDyn>, axes: &[usize], init: T, f: F) -> Option<(Vec<T>, crate::Layout)> {
    if let Some(s) = a.as_slice() {
        return reduce_block(s, a.shape(), axes, init, f).map(|v| (v, crate::Layout::RowMajor));
    }
    // Column-major: the same memory is the row-major array of the reversed shape.
    let r = a.view().reversed_axes();
    let dims: Vec<usize> = r.shape().to_vec();
    let axes: Vec<usize> = axes.iter().map(|&i| a.ndim() - 1 - i).collect();
    reduce_block(r.to_slice()?, &dims, &axes, init, f).map(|v| (v, crate::Layout::ColumnMajor))
}

/// [`reduce_blocked`] of the row-major array `s` of shape `dims`.
fn reduce_block<T: Copy, F: Fn(T, T) -> T + Copy>(s: &[T], dims: &[usize], axes: &[usize], init: T, f: F) -> Option<Vec<T>> {
    if s.is_empty() {
        return None;
    }
    let big: Vec<usize> = axes.iter().copied().filter(|&i| dims[i] > 1).collect();
    let (p, q) = (*big.iter().min()?, *big.iter().max()? + 1);
    if (p..q).any(|i| dims[i] > 1 && !axes.contains(&i)) {
        return None;
    }
    let (outer, red, inner): (usize, usize, usize) = (dims[..p].iter().product(), dims[p..q].iter().product(), dims[q..].iter().product());
    let mut out = vec![init; outer * inner];
    for (o, dst) in out.chunks_mut(inner).enumerate() {
        let block = &s[o * red * inner..(o + 1) * red * inner];
        if inner == 1 {
            let mut lanes = [init; 8];
            let chunks = block.chunks_exact(8);
            let tail = chunks.remainder();
            for c in chunks {
                for (l, &x) in lanes.iter_mut().zip(c) {
                    *l = f(*l, x);
                }
            }
            let total = lanes.iter().fold(init, |acc, &l| f(acc, l));
            dst[0] = tail.iter().fold(total, |acc, &x| f(acc, x));
        } else {
            for row in block.chunks_exact(inner) {
                for (d, &x) in dst.iter_mut().zip(row) {
                    *d = f(*d, x);
                }
            }
        }
    }
    Some(out)
}

fn max_of<T: Bounded>(a: T, b: T) -> T {
    #[allow(clippy::eq_op)]
    let nan = b != b;
    if b > a || nan {
        b
    } else {
        a
    }
}
fn min_of<T: Bounded>(a: T, b: T) -> T {
    #[allow(clippy::eq_op)]
    let nan = b != b;
    if b < a || nan {
        b
    } else {
        a
    }
}

/// Runs a reduction kernel's `go::<T>` on the input for its numeric dtype.
macro_rules! reduce_kernel {
    ($ctx:expr, $go:ident) => {
        Ok(smallvec![for_numeric!($ctx, &$ctx.inputs[0], |a| Element::wrap($go($ctx, a)?))])
    };
}

fn kernel_sum(ctx: &KernelCtx) -> Result<Outputs> {
    fn go<T: Bounded>(ctx: &KernelCtx, a: &ArcArray<T, IxDyn>) -> Result<ArcArray<T, IxDyn>> {
        fold(ctx, a, T::zero(), T::add)
    }
    match &ctx.inputs[0] {
        Tensor::C64(a) => return Ok(smallvec![Tensor::C64(fold(ctx, a, Complex::new(0.0, 0.0), |x, y| x + y)?)]),
        Tensor::C128(a) => return Ok(smallvec![Tensor::C128(fold(ctx, a, Complex::new(0.0, 0.0), |x, y| x + y)?)]),
        _ => {}
    }
    reduce_kernel!(ctx, go)
}

fn kernel_mean(ctx: &KernelCtx) -> Result<Outputs> {
    fn go<T: Bounded>(ctx: &KernelCtx, a: &ArcArray<T, IxDyn>) -> Result<ArcArray<T, IxDyn>> {
        let s = fold(ctx, a, T::zero(), T::add)?;
        let n = a.len() / s.len().max(1);
        Ok(s.mapv(|x| x.div_count(n)).into_shared())
    }
    reduce_kernel!(ctx, go)
}
fn kernel_prod(ctx: &KernelCtx) -> Result<Outputs> {
    fn go<T: Bounded>(ctx: &KernelCtx, a: &ArcArray<T, IxDyn>) -> Result<ArcArray<T, IxDyn>> {
        fold(ctx, a, T::one(), T::mul)
    }
    reduce_kernel!(ctx, go)
}
fn kernel_max(ctx: &KernelCtx) -> Result<Outputs> {
    fn go<T: Bounded>(ctx: &KernelCtx, a: &ArcArray<T, IxDyn>) -> Result<ArcArray<T, IxDyn>> {
        fold(ctx, a, T::lowest(), max_of)
    }
    reduce_kernel!(ctx, go)
}
fn kernel_min(ctx: &KernelCtx) -> Result<Outputs> {
    fn go<T: Bounded>(ctx: &KernelCtx, a: &ArcArray<T, IxDyn>) -> Result<ArcArray<T, IxDyn>> {
        fold(ctx, a, T::highest(), min_of)
    }
    reduce_kernel!(ctx, go)
}

// ---------------------------------------------------------------- gradients

/// `t` (shaped like the reduction's output) with the reduced axes back as size-1 axes
/// (the `keep_dims` shape): a `Reshape` when that shape is fully defined, else one
/// `ExpandDims` per reduced axis, which needs no dimension (TF's
/// `reshape(grad, output_shape_kept_dims)` builds that shape at run time).
fn to_kept(g: &mut Graph, t: Output, in_shape: &Shape, axes: &[usize]) -> Result<Output> {
    let kept = kept_shape(in_shape, axes);
    let ts = g.shape_of(t)?;
    if ts == kept || (!kept.is_fully_defined() && ts.rank() == kept.rank()) {
        return Ok(t);
    }
    if kept.is_fully_defined() {
        return reshape(g, t, &kept);
    }
    let mut sorted = axes.to_vec();
    sorted.sort_unstable();
    let mut out = t;
    for a in sorted {
        out = g.op_spec(NodeSpec::new("ExpandDims", &[out]).attr("dim", a as i64))?;
    }
    Ok(out)
}

/// `t` (shaped like the reduction's output) reshaped to the kept shape and broadcast to
/// the shape of `x`, the reduction's input: TF's `reshape(grad, output_shape_kept_dims)` +
/// `tile`. Static (`BroadcastTo`) when `x`'s shape is fully defined, else decided at run
/// time (`_BroadcastToShapeOf`).
fn broadcast_back(g: &mut Graph, t: Output, x: Output, in_shape: &Shape, axes: &[usize]) -> Result<Output> {
    let out = to_kept(g, t, in_shape, axes)?;
    if !in_shape.is_fully_defined() {
        return super::dynamic_shape::broadcast_to_like(g, out, x);
    }
    if g.shape_of(out)? != *in_shape {
        return g.op_spec(NodeSpec::new("BroadcastTo", &[out]).attr("shape", AttrValue::Shape(in_shape.0.clone())));
    }
    Ok(out)
}

fn node_axes(g: &Graph, node: &Node) -> Result<(Shape, Vec<usize>)> {
    let in_shape = g.shape_of(node.inputs[0])?;
    let axes = reduce_axes(node.op.name, &node.attrs, in_shape.rank()).map_err(OxiflowError::InvalidArgument)?;
    Ok((in_shape, axes))
}

/// TF `_MeanGrad`: the `Sum` gradient divided by the number of reduced elements.
fn grad_mean(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let (in_shape, axes) = node_axes(g, node)?;
    if !in_shape.is_fully_defined() {
        // the count is known only at run time: the reduced sum of ones (kept shape)
        let x = node.inputs[0];
        let kept = to_kept(g, dy, &in_shape, &axes)?;
        let ones = g.op("OnesLike", &[x])?;
        let ax: Vec<i64> = axes.iter().map(|&a| a as i64).collect();
        let count = reduce_sum(g, ones, &ax, true)?;
        let share = g.op("RealDiv", &[kept, count])?;
        return Ok(vec![Some(super::dynamic_shape::broadcast_to_like(g, share, x)?)]);
    }
    let count: usize = axes.iter().map(|&a| in_shape.dims()[a]).product();
    let b = broadcast_back(g, dy, node.inputs[0], &in_shape, &axes)?;
    let f = super::grad_util::scalar_of(g, b, 1.0 / count.max(1) as f64)?;
    Ok(vec![Some(g.op("Mul", &[b, f])?)])
}

/// TF `_ProdGrad`: `dy` times the product of the *other* reduced elements. TF gets it from
/// exclusive cumprods; here it is built from the zero count of each reduced group, which is
/// exact with zeros too: no zero, `prod / x`; one zero, the product of the nonzeros at the
/// zero and 0 elsewhere; more zeros, 0.
fn grad_prod(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let (in_shape, axes) = node_axes(g, node)?;
    let x = node.inputs[0];
    let ax: Vec<i64> = axes.iter().map(|&a| a as i64).collect();
    let zero = super::grad_util::scalar_of(g, x, 0.0)?;
    let one = super::grad_util::scalar_of(g, x, 1.0)?;
    let is_zero = g.op("Equal", &[x, zero])?;
    let ones = g.op("OnesLike", &[x])?;
    let zeros = g.op("ZerosLike", &[x])?;
    let x_safe = g.op("SelectV2", &[is_zero, ones, x])?;
    let prod_nz = reduce(g, "Prod", x_safe, &ax, true)?;
    let dt = g.dtype_of(x)?;
    let zf = g.op_spec(NodeSpec::new("Cast", &[is_zero]).attr("DstT", dt))?;
    let zc = reduce_sum(g, zf, &ax, true)?;
    let no_zero = g.op("Equal", &[zc, zero])?;
    let one_zero = g.op("Equal", &[zc, one])?;
    let others_nz = g.op("RealDiv", &[prod_nz, x_safe])?;
    let at_zero = g.op("SelectV2", &[is_zero, prod_nz, zeros])?;
    let at_zero = g.op("SelectV2", &[one_zero, at_zero, zeros])?;
    let others = g.op("SelectV2", &[no_zero, others_nz, at_zero])?;
    let dyb = broadcast_back(g, dy, x, &in_shape, &axes)?;
    Ok(vec![Some(g.op("Mul", &[dyb, others])?)])
}

/// TF `_MinOrMaxGrad`: `dy` shared equally among the elements equal to the extremum.
fn grad_min_max(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let (in_shape, axes) = node_axes(g, node)?;
    let x = node.inputs[0];
    let y = to_kept(g, y0(node), &in_shape, &axes)?;
    let dyk = to_kept(g, dy, &in_shape, &axes)?;
    let eq = g.op("Equal", &[y, x])?;
    let dt = g.dtype_of(x)?;
    let ind = g.op_spec(NodeSpec::new("Cast", &[eq]).attr("DstT", dt))?;
    let ax: Vec<i64> = axes.iter().map(|&a| a as i64).collect();
    let num = reduce_sum(g, ind, &ax, true)?;
    let share = g.op("RealDiv", &[ind, num])?;
    Ok(vec![Some(g.op("Mul", &[share, dyk])?)])
}

// ---------------------------------------------------------------- ArgMax, ArgMin

fn arg_axis(op: &str, attrs: &Attrs, rank: usize) -> std::result::Result<usize, String> {
    let a = match attrs.get("axis") {
        None => 0,
        Some(_) => attrs.get_int(op, "axis").map_err(|e| e.to_string())?,
    };
    let r = rank as i64;
    if (-r..r).contains(&a) {
        Ok(((a + r) % r) as usize)
    } else {
        Err(format!("axis {a} is out of range for an input of rank {rank}"))
    }
}

fn infer_arg(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let x = &ctx.inputs[0];
    require_numeric(ctx, x.dtype)?;
    let ax = arg_axis(ctx.op, ctx.attrs, x.shape.rank()).map_err(|m| ctx.invalid(format!("{m} (input shape {})", x.shape)))?;
    let out_t = match ctx.attrs.get("output_type") {
        None => DType::Int64,
        Some(_) => ctx.attrs.get_type(ctx.op, "output_type")?,
    };
    if !matches!(out_t, DType::Int32 | DType::Int64) {
        return Err(ctx.invalid(format!("output_type must be Int32 or Int64, got {out_t}")));
    }
    let dims = x.shape.dims().iter().enumerate().filter(|&(i, _)| i != ax).map(|(_, &d)| d).collect();
    Ok(vec![TensorType::new(out_t, Shape(dims))])
}

fn kernel_arg(ctx: &KernelCtx) -> Result<Outputs> {
    fn go<T: Bounded>(ctx: &KernelCtx, a: &ArcArray<T, IxDyn>) -> Result<Tensor> {
        let ax = arg_axis(ctx.node.op.name, &ctx.node.attrs, a.ndim()).map_err(|m| ctx.error(m))?;
        if a.shape()[ax] == 0 {
            return Err(ctx.error(format!("Reduction axis {ax} is empty in shape {}", Shape(a.shape().to_vec()))));
        }
        let is_max = ctx.node.op.name == "ArgMax";
        let idx = a.map_axis(Axis(ax), |lane| {
            let mut best = 0usize;
            for (i, &v) in lane.iter().enumerate() {
                let b = lane[best];
                if (is_max && v > b) || (!is_max && v < b) {
                    best = i;
                }
            }
            best as i64
        });
        let dims = ctx.node.outputs[0].shape.dims();
        let idx = idx.into_shape_with_order(IxDyn(dims)).map_err(|e| ctx.error(e))?;
        Ok(match ctx.node.outputs[0].dtype {
            DType::Int32 => Tensor::I32(idx.mapv(|i| i as i32).into_shared()),
            _ => Tensor::I64(idx.into_shared()),
        })
    }
    Ok(smallvec![for_numeric!(ctx, &ctx.inputs[0], |a| go(ctx, a)?)])
}

/// Adds a reduction `op` (`Sum`, `Mean`, `Prod`, `Max`, `Min`) of `x` over `axes`.
pub fn reduce(g: &mut Graph, op: &str, x: Output, axes: &[i64], keep_dims: bool) -> Result<Output> {
    g.op_spec(NodeSpec::new(op, &[x]).attr("axis", axes.to_vec()).attr("keep_dims", keep_dims))
}

/// TF's `Sum`/`Mean`/...: `axis` (TF's `reduction_indices` input; empty: every axis), `keep_dims`.
const REDUCE_ATTRS: &[AttrDef] = attrs!["axis" => Ints, "keep_dims" => Bool];
/// TF's `ArgMax`/`ArgMin`: `axis` (TF's `dimension` input), `output_type` (Int64 by default).
const ARG_ATTRS: &[AttrDef] = attrs!["axis" => Int, "output_type" => Type];

pub(crate) fn register(r: &mut Registry) {
    let one = Arity::Fixed(1);
    r.add(def("Sum", "Sum", one, infer_sum, kernel_sum, GPU_FLOATS, Some(grad_sum)).launched_as(GpuLaunch::Reduce).with_attrs(REDUCE_ATTRS));
    r.add(def("Mean", "Mean", one, infer_reduce, kernel_mean, GPU_FLOATS, Some(grad_mean)).launched_as(GpuLaunch::Reduce).with_attrs(REDUCE_ATTRS));
    r.add(def("Prod", "Prod", one, infer_reduce, kernel_prod, GPU_FLOATS, Some(grad_prod)).launched_as(GpuLaunch::Reduce).with_attrs(REDUCE_ATTRS));
    r.add(def("Max", "Max", one, infer_reduce, kernel_max, GPU_FLOATS, Some(grad_min_max)).launched_as(GpuLaunch::Reduce).with_attrs(REDUCE_ATTRS));
    r.add(def("Min", "Min", one, infer_reduce, kernel_min, GPU_FLOATS, Some(grad_min_max)).launched_as(GpuLaunch::Reduce).with_attrs(REDUCE_ATTRS));
    // TF: ArgMax/ArgMin are not differentiable; GPU kernels exist for float inputs
    // (Int64/Int32 outputs are produced on the device).
    let gpu_arg = GpuSupport::Types(&[DType::Float32, DType::Float64, DType::Int32, DType::Int64]);
    r.add(def("ArgMax", "ArgMax", one, infer_arg, kernel_arg, gpu_arg, None).not_differentiable().launched_as(GpuLaunch::ArgReduce).with_attrs(ARG_ATTRS));
    r.add(def("ArgMin", "ArgMin", one, infer_arg, kernel_arg, gpu_arg, None).not_differentiable().launched_as(GpuLaunch::ArgReduce).with_attrs(ARG_ATTRS));
}
