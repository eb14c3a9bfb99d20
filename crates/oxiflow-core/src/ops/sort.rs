//! Sorting: TF's `TopKV2` (the `k` largest entries along the last axis and their
//! positions, `tf.math.top_k`), on which `tf.sort` and `tf.argsort` are built, TF's bitwise
//! `Invert` (the order-reversing key of an ascending sort of integers, as `tf.sort` uses
//! it), two internal ops for `TopKV2`'s gradient: `_ScatterLastAxis` and its adjoint
//! `_GatherLastAxis`, and `_InterpInterval`, the search in sorted sample points of ADCME's
//! `interp1`.
//!
//! `TopKV2` takes `k` as an attribute (TF passes it as a scalar `int32` input; this engine
//! passes static sizes as attributes, as `Reshape`'s shape) and returns the values in
//! descending order, equal values by ascending position (TF's documented tie rule), so an
//! ascending sort through the negated values is stable. A NaN counts as smaller than every
//! number, so that it comes last in a descending order and, through the negated values, in
//! an ascending one too (NumPy and Julia put NaNs last in ascending order), and `k` largest
//! values are numbers while there are `k` of them; TF's kernel leaves their place
//! unspecified. `sorted = false` is accepted and gives the sorted order, one of
//! the orders TF allows. CPU kernels only: on a GPU the ops need soft placement.

use super::grad_util::need_dy;
use super::math::def;
use super::*;
use crate::graph::NodeSpec;
use crate::strided::row_major;
use crate::tensor::Element;
use crate::Layout;
use ndarray::{ArcArray, IxDyn};
use std::cmp::Ordering;

/// TF's `TopKV2` attrs: `k` (TF's second input), `sorted` (default true).
const TOPK_ATTRS: &[AttrDef] = attrs!["k" => Int, "sorted" => Bool];

/// Elements `TopKV2` orders: a total order in which NaN is the smallest float.
trait Sortable: Element + PartialOrd {
    fn order(a: Self, b: Self) -> Ordering;
}
impl Sortable for f32 {
    fn order(a: f32, b: f32) -> Ordering {
        a.partial_cmp(&b).unwrap_or_else(|| b.is_nan().cmp(&a.is_nan()))
    }
}
impl Sortable for f64 {
    fn order(a: f64, b: f64) -> Ordering {
        a.partial_cmp(&b).unwrap_or_else(|| b.is_nan().cmp(&a.is_nan()))
    }
}
impl Sortable for i32 {
    fn order(a: i32, b: i32) -> Ordering {
        a.cmp(&b)
    }
}
impl Sortable for i64 {
    fn order(a: i64, b: i64) -> Ordering {
        a.cmp(&b)
    }
}

/// `k` of a `TopKV2` node: TF's `Need k >= 0, got ...` when negative.
fn topk_k(op: &str, node: &str, attrs: &Attrs) -> Result<usize> {
    let k = attrs.get_int(op, "k")?;
    usize::try_from(k).map_err(|_| OxiflowError::InvalidArgument(format!("{op} '{node}': Need k >= 0, got {k}")))
}

/// `TopKV2(x)`: `x` numeric of rank >= 1 with last dimension `n >= k` (TF: `input must have
/// at least k columns`); outputs `values` (x's dtype) and `indices` (`Int32`), both of shape
/// `x.shape[..-1] + [k]`. Leading dimensions may be unknown.
fn infer_topk(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let x = &ctx.inputs[0];
    if !matches!(x.dtype, DType::Float32 | DType::Float64 | DType::Int32 | DType::Int64) {
        return Err(ctx.invalid(format!("needs a numeric operand (Float32, Float64, Int32, Int64), got {}", x.dtype)));
    }
    let k = topk_k(ctx.op, ctx.node, ctx.attrs)?;
    let dims = x.shape.dims();
    let Some(&n) = dims.last() else {
        return Err(ctx.invalid(format!("input must be at least 1-D, got shape {}", x.shape)));
    };
    if n != crate::shape::UNKNOWN && n < k {
        return Err(ctx.invalid(format!("input must have at least k columns. Had {n}, needed {k} (input shape {})", x.shape)));
    }
    let mut out = dims.to_vec();
    *out.last_mut().expect("rank >= 1") = k;
    Ok(vec![TensorType::new(x.dtype, Shape(out.clone())), TensorType::new(DType::Int32, Shape(out))])
}

fn kernel_topk(ctx: &KernelCtx) -> Result<Outputs> {
    fn go<T: Sortable>(ctx: &KernelCtx, a: &ArcArray<T, IxDyn>, k: usize) -> Result<Outputs> {
        let n = *a.shape().last().expect("rank checked when the node was added");
        if n < k {
            return Err(ctx.error(format!("input must have at least k columns. Had {n}, needed {k} (input shape {})", Shape(a.shape().to_vec()))));
        }
        let x = row_major(a.view());
        let x = x.as_slice().expect("row_major gives a standard-layout array");
        let rows = x.len().checked_div(n).unwrap_or(0);
        let (mut vals, mut idx) = (Vec::with_capacity(rows * k), Vec::with_capacity(rows * k));
        let mut order: Vec<usize> = Vec::with_capacity(n);
        for r in 0..rows {
            let row = &x[r * n..(r + 1) * n];
            order.clear();
            order.extend(0..n);
            // descending values, ties by ascending position: a total order on (value, index)
            let before = |&i: &usize, &j: &usize| T::order(row[j], row[i]).then(i.cmp(&j));
            if k < n && k > 0 {
                order.select_nth_unstable_by(k - 1, before);
            }
            order[..k].sort_unstable_by(before);
            vals.extend(order[..k].iter().map(|&i| row[i]));
            idx.extend(order[..k].iter().map(|&i| i as i32));
        }
        let mut dims = a.shape().to_vec();
        *dims.last_mut().expect("rank >= 1") = k;
        Ok(smallvec![Tensor::from_vec(&dims, vals, Layout::RowMajor)?, Tensor::from_vec(&dims, idx, Layout::RowMajor)?])
    }
    let k = topk_k(ctx.node.op.name, &ctx.node.name, &ctx.node.attrs)?;
    for_numeric!(ctx, &ctx.inputs[0], |a| go(ctx, a, k))
}

/// TF `_TopKGrad`: the values' gradient scattered to the positions they came from (zeros
/// elsewhere); none for `k` or through the indices.
fn grad_topk(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let idx = Output::new(node.id, 1);
    Ok(vec![Some(g.op("_ScatterLastAxis", &[dy, idx, node.inputs[0]])?)])
}

// ---------------------------------------------------------------- the gradient's ops

/// The `[rows, n]` and `[rows, k]` extents of a gather or scatter along the last axis of
/// `full` (shape `[..., n]`) at `idx` (shape `[..., k]`); an error naming the node unless the
/// leading dimensions agree.
fn last_axis_extents(ctx: &KernelCtx, full: &[usize], idx: &[usize]) -> Result<(usize, usize, usize)> {
    let (Some((&n, lead)), Some((&k, ilead))) = (full.split_last(), idx.split_last()) else {
        return Err(ctx.error("operands must be at least 1-D"));
    };
    if lead != ilead {
        return Err(ctx.error(format!("leading dimensions differ: {} and indices {}", Shape(full.to_vec()), Shape(idx.to_vec()))));
    }
    Ok((lead.iter().product(), n, k))
}

/// The indices of a gather or scatter as row-major `usize`s, each checked against `n`.
fn checked_indices(ctx: &KernelCtx, t: &Tensor, n: usize) -> Result<Vec<usize>> {
    let Tensor::I32(a) = t else {
        return Err(ctx.error(format!("indices must be Int32, got {}", t.dtype())));
    };
    let v = row_major(a.view());
    v.iter().map(|&i| usize::try_from(i).ok().filter(|&i| i < n).ok_or_else(|| ctx.error(format!("index {i} is out of range [0, {n})")))).collect()
}

/// `_ScatterLastAxis(dy, indices, like)`: a tensor of `like`'s shape and `dy`'s dtype, zero
/// but for `out[..., indices[..., j]] += dy[..., j]`. `dy` float, `indices` `Int32` of
/// `dy`'s shape, `like`'s leading dimensions those of `dy`; `like`'s values are not read.
fn infer_scatter_last(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let (dy, idx, like) = (&ctx.inputs[0], &ctx.inputs[1], &ctx.inputs[2]);
    ctx.require_float(dy.dtype)?;
    if idx.dtype != DType::Int32 {
        return Err(ctx.dtype_error(DType::Int32, idx.dtype, " (indices)"));
    }
    if dy.shape.merge(&idx.shape).is_none() || dy.shape.rank() != like.shape.rank() || dy.shape.rank() == 0 {
        return Err(ctx.shape_error(&dy.shape, &like.shape, " (updates, indices and the output must have one rank, the same leading dimensions)"));
    }
    Ok(vec![TensorType::new(dy.dtype, like.shape.clone())])
}

fn kernel_scatter_last(ctx: &KernelCtx) -> Result<Outputs> {
    fn go<T: Element + std::ops::AddAssign>(ctx: &KernelCtx, dy: &ArcArray<T, IxDyn>, dims: &[usize]) -> Result<Outputs> {
        let (rows, n, k) = last_axis_extents(ctx, dims, dy.shape())?;
        let idx = checked_indices(ctx, &ctx.inputs[1], n)?;
        let d = row_major(dy.view());
        let d = d.as_slice().expect("standard layout");
        let mut out = vec![T::zero(); rows * n];
        for r in 0..rows {
            for j in 0..k {
                out[r * n + idx[r * k + j]] += d[r * k + j];
            }
        }
        Ok(smallvec![Tensor::from_vec(dims, out, Layout::RowMajor)?])
    }
    let dims = ctx.inputs[2].dims().to_vec();
    match &ctx.inputs[0] {
        Tensor::F32(a) => go(ctx, a, &dims),
        Tensor::F64(a) => go(ctx, a, &dims),
        t => Err(ctx.error(format!("no kernel for dtype {}", t.dtype()))),
    }
}

/// The adjoint of the scatter: `dy`'s gradient is the gather of the output's gradient at
/// the same positions; none for the indices or `like`.
fn grad_scatter_last(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let ddx = need_dy!(grads, 3);
    Ok(vec![Some(g.op("_GatherLastAxis", &[ddx, node.inputs[1]])?), None, None])
}

/// `_GatherLastAxis(x, indices)`: `out[..., j] = x[..., indices[..., j]]` (TF's
/// `tf.gather(x, indices, batch_dims=-1)`); `x` float, `indices` `Int32` with `x`'s leading
/// dimensions; the output has the indices' shape.
fn infer_gather_last(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let (x, idx) = (&ctx.inputs[0], &ctx.inputs[1]);
    ctx.require_float(x.dtype)?;
    if idx.dtype != DType::Int32 {
        return Err(ctx.dtype_error(DType::Int32, idx.dtype, " (indices)"));
    }
    if x.shape.rank() != idx.shape.rank() || x.shape.rank() == 0 {
        return Err(ctx.shape_error(&x.shape, &idx.shape, " (params and indices must have one rank, the same leading dimensions)"));
    }
    Ok(vec![TensorType::new(x.dtype, idx.shape.clone())])
}

fn kernel_gather_last(ctx: &KernelCtx) -> Result<Outputs> {
    fn go<T: Element>(ctx: &KernelCtx, x: &ArcArray<T, IxDyn>) -> Result<Outputs> {
        let idims = ctx.inputs[1].dims().to_vec();
        let (rows, n, k) = last_axis_extents(ctx, x.shape(), &idims)?;
        let idx = checked_indices(ctx, &ctx.inputs[1], n)?;
        let xv = row_major(x.view());
        let xs = xv.as_slice().expect("standard layout");
        let out: Vec<T> = (0..rows * k).map(|p| xs[(p / k.max(1)) * n + idx[p]]).collect();
        Ok(smallvec![Tensor::from_vec(&idims, out, Layout::RowMajor)?])
    }
    match &ctx.inputs[0] {
        Tensor::F32(a) => go(ctx, a),
        Tensor::F64(a) => go(ctx, a),
        t => Err(ctx.error(format!("no kernel for dtype {}", t.dtype()))),
    }
}

/// The gather's gradient scatters back (`_ScatterLastAxis`, shaped like `x`).
fn grad_gather_last(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 2);
    Ok(vec![Some(g.op("_ScatterLastAxis", &[dy, node.inputs[1], node.inputs[0]])?), None])
}

// ---------------------------------------------------------------- Invert

/// TF's `Invert` (`tf.bitwise.invert`): the bitwise complement `!x` of an `Int32` or `Int64`
/// tensor, `-x - 1` without overflow; it reverses the order of the integers, which is how
/// an ascending sort of integers runs as a descending one.
fn infer_invert(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let x = &ctx.inputs[0];
    if !matches!(x.dtype, DType::Int32 | DType::Int64) {
        return Err(ctx.invalid(format!("needs an Int32 or Int64 operand, got {}", x.dtype)));
    }
    Ok(vec![x.clone()])
}

fn kernel_invert(ctx: &KernelCtx) -> Result<Outputs> {
    Ok(smallvec![match &ctx.inputs[0] {
        Tensor::I32(a) => Tensor::I32(a.mapv(|v| !v).into_shared()),
        Tensor::I64(a) => Tensor::I64(a.mapv(|v| !v).into_shared()),
        t => return Err(ctx.error(format!("no kernel for dtype {}", t.dtype()))),
    }])
}

// ---------------------------------------------------------------- _InterpInterval

/// `_InterpInterval(x [n], xq [...]) -> Int64 [...]`: for each query `q`, the 0-based `i` of
/// the interval `x[i] <= q < x[i+1]` (`i = n-2` for `q = x[n-1]`), the one ADCME's `interp1`
/// (its `InterpDimOne` op) interpolates in, found by binary search (`std::upper_bound`
/// there). `x` and `xq` Float32 or Float64 of one dtype, `x` a vector of at least 2 points.
fn infer_interp_interval(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let (x, q) = (&ctx.inputs[0], &ctx.inputs[1]);
    ctx.require_float(x.dtype)?;
    if q.dtype != x.dtype {
        return Err(ctx.dtype_error(x.dtype, q.dtype, " (the query points must have the sample points' dtype)"));
    }
    if x.shape.rank() != 1 || x.shape.0[0] == 1 || x.shape.0[0] == 0 {
        return Err(ctx.invalid(format!("the sample points must be a vector of at least 2 points, got shape {}", x.shape)));
    }
    Ok(vec![TensorType::new(DType::Int64, q.shape.clone())])
}

/// Errors (InvalidArgument, naming the node): sample points that do not strictly increase
/// (ADCME requires sorted ones and divides by their differences), and a query outside
/// `[x[0], x[n-1]]` or NaN (ADCME's "k-th interpolation point q is not in the range").
/// Positions in the messages are 1-based, as ADCME's.
fn kernel_interp_interval(ctx: &KernelCtx) -> Result<Outputs> {
    fn go<T: Element + PartialOrd + std::fmt::Display>(ctx: &KernelCtx, x: &ArcArray<T, IxDyn>, q: &ArcArray<T, IxDyn>) -> Result<Outputs> {
        let x = row_major(x.view());
        let x = x.as_slice().expect("standard layout");
        let n = x.len();
        if n < 2 {
            return Err(ctx.error(format!("the sample points must be a vector of at least 2 points, got {n}")));
        }
        if let Some(k) = (0..n - 1).find(|&k| x[k].partial_cmp(&x[k + 1]) != Some(Ordering::Less)) {
            return Err(ctx.error(format!("the sample points must increase strictly: point {} is {} and point {} is {}", k + 1, x[k], k + 2, x[k + 1])));
        }
        let qv = row_major(q.view());
        let mut out = Vec::with_capacity(qv.len());
        for (j, &v) in qv.iter().enumerate() {
            if !(v >= x[0] && v <= x[n - 1]) {
                return Err(ctx.error(format!("interpolation point {} is {v}, not in the range [{}, {}] of the sample points", j + 1, x[0], x[n - 1])));
            }
            // the first point greater than v, less one, kept inside 0..n-1
            let above = x.partition_point(|p| *p <= v);
            out.push((above.clamp(1, n - 1) - 1) as i64);
        }
        Ok(smallvec![Tensor::from_vec(q.shape(), out, Layout::RowMajor)?])
    }
    match (&ctx.inputs[0], &ctx.inputs[1]) {
        (Tensor::F32(x), Tensor::F32(q)) => go(ctx, x, q),
        (Tensor::F64(x), Tensor::F64(q)) => go(ctx, x, q),
        (x, q) => Err(ctx.error(format!("no kernel for dtypes {} and {}", x.dtype(), q.dtype()))),
    }
}

/// Adds `TopKV2(x)` with `k` and returns its `(values, indices)` outputs (TF's
/// `tf.math.top_k`): `x` Float32/Float64/Int32/Int64 of shape `[..., n]`, both outputs
/// `[..., k]`, values in `x`'s dtype, indices Int32 (0-based). InvalidArgument naming
/// `TopKV2` for a scalar, a Bool `x` or a known `n < k`.
pub fn top_k(g: &mut Graph, x: Output, k: usize) -> Result<(Output, Output)> {
    let k = i64::try_from(k).map_err(|_| OxiflowError::InvalidArgument(format!("TopKV2: k = {k} is too large")))?;
    let t = g.op_spec(NodeSpec::new("TopKV2", &[x]).attr("k", k))?;
    Ok((t, Output::new(t.node, 1)))
}

pub(crate) fn register(r: &mut Registry) {
    r.add(def("TopKV2", "TopKV2", Arity::Fixed(1), infer_topk, kernel_topk, GpuSupport::None, Some(grad_topk)).with_attrs(TOPK_ATTRS));
    r.add(def("_ScatterLastAxis", "ScatterLastAxis", Arity::Fixed(3), infer_scatter_last, kernel_scatter_last, GpuSupport::None, Some(grad_scatter_last)));
    r.add(def("_GatherLastAxis", "GatherLastAxis", Arity::Fixed(2), infer_gather_last, kernel_gather_last, GpuSupport::None, Some(grad_gather_last)));
    r.add(def("_InterpInterval", "InterpInterval", Arity::Fixed(2), infer_interp_interval, kernel_interp_interval, GpuSupport::None, None));
    // TF: ops.NotDifferentiable("Invert") (integers)
    r.add(def("Invert", "Invert", Arity::Fixed(1), infer_invert, kernel_invert, GpuSupport::None, None).not_differentiable());
}
