//! Indexing ops: `StridedSlice` (and its gradient op `StridedSliceGrad`), `GatherV2`,
//! `GatherNd`, `ScatterNd` (TF's `array_ops`, gradients as in `array_grad.py`). The Julia
//! package builds `t[...]` from them.
//!
//! Shapes are static, so slice bounds (`begin`, `end`, `strides`), the gather `axis` and
//! the scatter `shape` are attributes where TF takes tensor inputs. Gather and scatter
//! indices are tensors (`Int32` or `Int64`) and are checked when the kernel runs: an
//! index out of range is an `InvalidArgument` error naming the node, TF's text
//! (`indices[1] = 7 is not in [0, 3)`).
//!
//! A slice of a column-major tensor (a Julia array) is column-major, and `StridedSliceGrad`
//! writes its output in `dy`'s order; other tensors give row-major results, as TF's kernels.

use super::math::{def, require_numeric, Arith};
use super::shape_ops::{int_or, norm_axis, transpose};
use super::*;
use crate::graph::NodeSpec;
use crate::shape::UNKNOWN;
use crate::strided::is_column_major;
use crate::tensor::Element;
use crate::with_array;
use ndarray::{ArcArray, ArrayViewD, IxDyn, ShapeBuilder, Slice};

/// A standard-layout copy of `a` with dimensions `dims` (same element count).
pub(crate) fn reshaped<T: Clone>(ctx: &KernelCtx, a: ArrayViewD<T>, dims: &[usize]) -> Result<ArcArray<T, IxDyn>> {
    let from = Shape(a.shape().to_vec());
    a.as_standard_layout()
        .into_owned()
        .into_shared()
        .into_shape_with_order(IxDyn(dims))
        .map_err(|e| ctx.error(format!("cannot reshape {from} to {}: {e}", Shape(dims.to_vec()))))
}

// ---------------------------------------------------------------- StridedSlice

/// One dimension of a strided slice, canonical: `len` elements `start, start + step, ...`;
/// `shrink` drops the dimension (an integer index).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DimSlice {
    pub start: i64,
    pub len: usize,
    pub step: i64,
    pub shrink: bool,
}

impl DimSlice {
    /// The same elements as an ndarray `Slice` (whose negative steps walk its range from
    /// the end, unlike NumPy's).
    fn to_slice(self) -> Slice {
        let (s, n) = (self.start as isize, self.len as isize);
        let step = self.step as isize;
        if n == 0 {
            Slice::new(0, Some(0), 1)
        } else if step > 0 {
            Slice::new(s, Some(s + (n - 1) * step + 1), step)
        } else {
            Slice::new(s - (n - 1) * -step, Some(s + 1), step)
        }
    }
}

/// TF's canonicalization of `begin`/`end`/`strides` with `begin_mask`, `end_mask` and
/// `shrink_axis_mask` over `shape` (`ellipsis_mask` and `new_axis_mask` are not supported:
/// every dimension is given). Errors name the dimension, index and shape.
/// TF's canonicalization (`ValidateStridedSliceOp`) of attrs `begin`/`end`/`strides` with
/// `begin_mask`, `end_mask` and `shrink_axis_mask` over `shape`, one [`DimSlice`] per
/// dimension; shared with the CUDA launcher. Errors (as text, the caller names the node): an
/// unsupported `ellipsis_mask`/`new_axis_mask`, lists of the wrong length, a zero stride, a
/// shrunk index out of bounds.
pub fn slice_spec(attrs: &Attrs, op: &str, shape: &Shape) -> std::result::Result<Vec<DimSlice>, String> {
    let get = |k| attrs.get_ints(op, k).map_err(|e| e.to_string());
    let (begin, end, strides) = (get("begin")?, get("end")?, get("strides")?);
    let mask = |k| int_or(attrs, op, k, 0).map_err(|e| e.to_string());
    let (bm, em, sm) = (mask("begin_mask")?, mask("end_mask")?, mask("shrink_axis_mask")?);
    if mask("ellipsis_mask")? != 0 || mask("new_axis_mask")? != 0 {
        return Err("ellipsis_mask and new_axis_mask are not supported; give begin/end/strides for every dimension".into());
    }
    let rank = shape.rank();
    if begin.len() != rank || end.len() != rank || strides.len() != rank {
        return Err(format!("begin {begin:?}, end {end:?} and strides {strides:?} must each have one entry per dimension of shape {shape}"));
    }
    (0..rank)
        .map(|i| {
            let Ok(d) = i64::try_from(shape.0[i]) else {
                return Err(format!("dimension {i} of shape {shape} is too large to slice (more than 2^63 - 1)"));
            };
            let norm = |x: i64| if x < 0 { x + d } else { x };
            if sm >> i & 1 == 1 {
                let idx = norm(begin[i]);
                if !(0..d).contains(&idx) {
                    return Err(format!("index {} is out of bounds for dimension {i} of size {d} (shape {shape})", begin[i]));
                }
                return Ok(DimSlice { start: idx, len: 1, step: 1, shrink: true });
            }
            let s = strides[i];
            if s == 0 {
                return Err(format!("stride of dimension {i} is 0"));
            }
            let (b, e) = if s > 0 {
                (if bm >> i & 1 == 1 { 0 } else { norm(begin[i]).clamp(0, d) }, if em >> i & 1 == 1 { d } else { norm(end[i]).clamp(0, d) })
            } else {
                (if bm >> i & 1 == 1 { d - 1 } else { norm(begin[i]).clamp(-1, d - 1) }, if em >> i & 1 == 1 { -1 } else { norm(end[i]).clamp(-1, d - 1) })
            };
            let span = if s > 0 { e - b } else { b - e };
            let len = if span > 0 { ((span + s.abs() - 1) / s.abs()) as usize } else { 0 };
            Ok(DimSlice { start: b, len, step: s, shrink: false })
        })
        .collect()
}

/// Output dims of a slice (shrunk dimensions dropped) and the dims before dropping.
fn slice_dims(spec: &[DimSlice]) -> (Vec<usize>, Vec<usize>) {
    let full: Vec<usize> = spec.iter().map(|s| s.len).collect();
    let out = spec.iter().filter(|s| !s.shrink).map(|s| s.len).collect();
    (out, full)
}

/// Output dims of a slice of `shape`, which may have unknown dimensions: a slice of an
/// unknown dimension is unknown (TF's `None`), an index into one drops it and is checked
/// at run time.
fn partial_slice_dims(attrs: &Attrs, op: &str, shape: &Shape) -> std::result::Result<Vec<usize>, String> {
    if shape.is_fully_defined() {
        return Ok(slice_dims(&slice_spec(attrs, op, shape)?).0);
    }
    // a stand-in size for the unknown dimensions that any index fits
    const STAND_IN: usize = 1 << 40;
    let known = Shape(shape.0.iter().map(|&d| if d == crate::shape::UNKNOWN { STAND_IN } else { d }).collect());
    // an error names the shape as the graph has it, `?` for the stand-ins
    let spec = slice_spec(attrs, op, &known).map_err(|m| m.replace(&known.to_string(), &shape.to_string()))?;
    Ok(spec.iter().zip(&shape.0).filter(|(s, _)| !s.shrink).map(|(s, &d)| if d == crate::shape::UNKNOWN { d } else { s.len }).collect())
}

fn infer_strided_slice(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let x = &ctx.inputs[0];
    let dims = partial_slice_dims(ctx.attrs, ctx.op, &x.shape).map_err(|m| ctx.invalid(m))?;
    Ok(vec![TensorType::new(x.dtype, Shape(dims))])
}

fn kernel_strided_slice(ctx: &KernelCtx) -> Result<Outputs> {
    let x = &ctx.inputs[0];
    let spec = slice_spec(&ctx.node.attrs, "StridedSlice", &x.shape()).map_err(|m| ctx.error(m))?;
    let dims = ctx.node.outputs[0].shape.dims();
    Ok(smallvec![with_array!(x, a => {
        let v = a.slice_each_axis(|ax| spec[ax.axis.index()].to_slice());
        Element::wrap(if is_column_major(a) { column_major_slice(v, &spec) } else { reshaped(ctx, v, dims)? })
    })])
}

/// The slice `v` (of a column-major tensor; `spec` says which of its axes are dropped) as a
/// column-major array: copied in that memory order, so a slice with row step 1 is one
/// contiguous run per column, and a fetch hands it to Julia without a transposing copy. A
/// row-major copy (TF's layout) walked the input across its columns: 1.0 to 1.4 ms for
/// `x[2:end-1, :]` of a 1000x1000 Float64 `x` from Julia.
fn column_major_slice<T: Element>(v: ArrayViewD<T>, spec: &[DimSlice]) -> ArcArray<T, IxDyn> {
    let mut out = crate::strided::standard_copy(&v.t()).reversed_axes();
    // a dropped axis has length 1, so removing it keeps the column-major order
    for ax in (0..spec.len()).rev().filter(|&ax| spec[ax].shrink) {
        out = out.index_axis_move(ndarray::Axis(ax), 0);
    }
    out.into_shared()
}

/// Adds `StridedSlice(x)` (TF's `tf.strided_slice`, node name `strided_slice`): 0-based
/// `begin`, exclusive `end`, `strides` (one entry per dimension, negatives count from the
/// end), and the bit masks `begin_mask`/`end_mask` (ignore that dimension's begin/end) and
/// `shrink_axis_mask` (take the single element `begin` and drop the dimension).
/// `InvalidArgument` (naming the index and shape) for a shrunk index out of bounds.
#[allow(clippy::too_many_arguments)]
pub fn strided_slice(
    g: &mut Graph,
    x: Output,
    begin: &[i64],
    end: &[i64],
    strides: &[i64],
    begin_mask: i64,
    end_mask: i64,
    shrink_axis_mask: i64,
) -> Result<Output> {
    g.op_spec(
        NodeSpec::new("StridedSlice", &[x])
            .attr("begin", begin.to_vec())
            .attr("end", end.to_vec())
            .attr("strides", strides.to_vec())
            .attr("begin_mask", begin_mask)
            .attr("end_mask", end_mask)
            .attr("shrink_axis_mask", shrink_axis_mask),
    )
}

/// The slicing attrs of a `StridedSlice`/`StridedSliceGrad` node, for building the other.
fn slice_attrs(node: &Node) -> NodeSpec {
    let mut spec = NodeSpec::default();
    for k in ["begin", "end", "strides", "begin_mask", "end_mask", "shrink_axis_mask"] {
        if let Some(v) = node.attrs.get(k) {
            spec.attrs.insert(k.to_string(), v.clone());
        }
    }
    spec
}

/// TF `_StridedSliceGrad`: a `StridedSliceGrad` that writes `dy` into zeros of the input's
/// shape at the sliced positions.
/// TF `_StridedSliceGrad`. Where the input's shape has unknown dimensions, the input itself
/// is a second operand whose run-time shape the gradient takes (TF passes `Shape(x)`).
fn grad_strided_slice(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None]) };
    let shape = g.shape_of(node.inputs[0])?;
    let mut spec = slice_attrs(node);
    spec.op = "StridedSliceGrad".into();
    if shape.is_fully_defined() {
        spec.inputs = vec![dy];
        spec.attrs.insert("shape".into(), AttrValue::Shape(shape.0));
    } else {
        spec.inputs = vec![dy, node.inputs[0]];
    }
    Ok(vec![Some(g.op_spec(spec)?)])
}

/// `StridedSliceGrad(dy)` with attr `shape`, or `StridedSliceGrad(dy, x)` taking the shape
/// of `x` (possibly partial when the node is built, full when it runs).
fn infer_strided_slice_grad(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let dy = &ctx.inputs[0];
    let shape = match ctx.inputs {
        [_] => Shape(ctx.attrs.get_shape(ctx.op, "shape")?),
        [_, like] => like.shape.clone(),
        _ => return Err(ctx.invalid(format!("takes dy and at most the sliced tensor, got {} inputs", ctx.inputs.len()))),
    };
    let want = Shape(partial_slice_dims(ctx.attrs, ctx.op, &shape).map_err(|m| ctx.invalid(m))?);
    if want.merge(&dy.shape).is_none() {
        return Err(ctx.shape_error(&want, &dy.shape, format!(" (the slice of shape {shape} and its gradient)")));
    }
    Ok(vec![TensorType::new(dy.dtype, shape)])
}

fn kernel_strided_slice_grad(ctx: &KernelCtx) -> Result<Outputs> {
    fn go<T: Element>(ctx: &KernelCtx, dy: &ArcArray<T, IxDyn>) -> Result<Tensor> {
        let shape = &ctx.node.outputs[0].shape;
        let spec = slice_spec(&ctx.node.attrs, "StridedSliceGrad", shape).map_err(|m| ctx.error(m))?;
        let kept = slice_dims(&spec).0;
        if dy.shape() != &kept[..] {
            return Err(ctx.error(format!("dy has shape {}, the slice of {shape} has {}", Shape(dy.shape().to_vec()), Shape(kept))));
        }
        // dy with its dropped axes back (length 1): a view, whatever its layout
        let mut src = dy.view();
        for ax in (0..spec.len()).filter(|&ax| spec[ax].shrink) {
            src = src.insert_axis(ndarray::Axis(ax));
        }
        // the output in dy's memory order, written with a strided copy (runs or tiles, not
        // `assign`'s walk, which took 3 ms for a 998x1000 column-major dy)
        let dims = IxDyn(shape.dims());
        let mut out = if is_column_major(dy) { ndarray::ArrayD::from_elem(dims.f(), T::zero()) } else { ndarray::ArrayD::from_elem(dims, T::zero()) };
        let mut dst = out.slice_each_axis_mut(|ax| spec[ax.axis.index()].to_slice());
        if dst.shape() != src.shape() {
            return Err(ctx.error(format!("the slice has shape {}, dy with its dropped axes {}", Shape(dst.shape().to_vec()), Shape(src.shape().to_vec()))));
        }
        let (src_strides, dst_strides) = (src.strides().to_vec(), dst.strides().to_vec());
        // SAFETY: `dst` is a slice of the new `out` (no step is 0, so its elements are
        // distinct, and none is in `dy`), `src` a view of `dy`; both have the same dims.
        unsafe { crate::strided::copy_strided(src.shape(), src.as_ptr(), &src_strides, dst.as_mut_ptr(), &dst_strides) };
        Ok(T::wrap(out.into_shared()))
    }
    Ok(smallvec![with_array!(&ctx.inputs[0], a => go(ctx, a)?)])
}

/// TF `_StridedSliceGradGrad`: the same `StridedSlice` of the incoming gradient.
fn grad_strided_slice_grad(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(ddy) = grads[0] else { return Ok(vec![None]) };
    let mut spec = slice_attrs(node);
    spec.op = "StridedSlice".into();
    spec.inputs = vec![ddy];
    Ok(vec![Some(g.op_spec(spec)?)])
}

// ---------------------------------------------------------------- GatherV2

pub(super) fn require_index(ctx: &InferCtx, t: &TensorType, what: &str) -> Result<()> {
    if matches!(t.dtype, DType::Int32 | DType::Int64) {
        Ok(())
    } else {
        Err(ctx.invalid(format!("{what} must be Int32 or Int64, got {}", t.dtype)))
    }
}

/// Index values in row-major order.
pub(super) fn index_values(t: &Tensor) -> Vec<i64> {
    // a row-major buffer (every index tensor a graph builds) is read as a slice; `iter()` on
    // an `IxDyn` array steps a dynamic index per element (a third of a 100k-index gather)
    match t {
        Tensor::I32(a) => match a.as_slice() {
            Some(s) => s.iter().map(|&v| v as i64).collect(),
            None => a.iter().map(|&v| v as i64).collect(),
        },
        Tensor::I64(a) => match a.as_slice() {
            Some(s) => s.to_vec(),
            None => a.iter().copied().collect(),
        },
        _ => Vec::new(),
    }
}

fn infer_gather(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let (p, idx) = (&ctx.inputs[0], &ctx.inputs[1]);
    require_index(ctx, idx, "indices")?;
    if p.shape.rank() == 0 {
        return Err(ctx.invalid("params must have rank >= 1, got a scalar"));
    }
    if int_or(ctx.attrs, ctx.op, "batch_dims", 0)? != 0 {
        return Err(ctx.invalid("batch_dims other than 0 is not supported"));
    }
    let axis = norm_axis(ctx, int_or(ctx.attrs, ctx.op, "axis", 0)?, p.shape.rank())?;
    let d = p.shape.dims();
    let dims = d[..axis].iter().chain(idx.shape.dims()).chain(&d[axis + 1..]).copied().collect();
    Ok(vec![TensorType::new(p.dtype, Shape(dims))])
}

fn kernel_gather(ctx: &KernelCtx) -> Result<Outputs> {
    fn go<T: Element>(ctx: &KernelCtx, a: &ArcArray<T, IxDyn>, idx: &[i64]) -> Result<Tensor> {
        let rank = a.ndim() as i64;
        let axis = ((int_or(&ctx.node.attrs, "GatherV2", "axis", 0)? + rank) % rank) as usize;
        let d = a.shape();
        let (outer, n, inner): (usize, usize, usize) = (d[..axis].iter().product(), d[axis], d[axis + 1..].iter().product());
        for (j, &i) in idx.iter().enumerate() {
            if !(0..n as i64).contains(&i) {
                return Err(ctx.error(format!("indices[{j}] = {i} is not in [0, {n}) (params shape {})", Shape(d.to_vec()))));
            }
        }
        let dims = ctx.node.outputs[0].shape.dims();
        let internal = |e: ndarray::ShapeError| ctx.error(format!("internal shape error: {e}"));
        // A column-major params (a Julia array) with a vector or scalar of indices: the
        // gather along `axis` of its transpose, which is row-major, along the mirrored axis;
        // the result, transposed back, is column-major (a fetch then needs no transposing
        // copy). Gathering Julia columns copies whole columns.
        if ctx.inputs[1].shape().rank() <= 1 && is_column_major(a) {
            let at = a.t();
            let src = at.as_slice().expect("the transpose of a column-major array is row-major");
            let r = a.ndim() - 1 - axis;
            let rd = at.shape();
            let out = gather_runs(src, rd[..r].iter().product(), n, rd[r + 1..].iter().product(), idx);
            let rev: Vec<usize> = dims.iter().rev().copied().collect();
            let arr = ndarray::ArrayD::from_shape_vec(IxDyn(&rev), out).map_err(internal)?;
            return Ok(T::wrap(arr.reversed_axes().into_shared()));
        }
        let std = a.as_standard_layout();
        let src = std.as_slice().expect("standard layout");
        let arr = ndarray::ArrayD::from_shape_vec(IxDyn(dims), gather_runs(src, outer, n, inner, idx)).map_err(internal)?;
        Ok(T::wrap(arr.into_shared()))
    }
    let idx = index_values(&ctx.inputs[1]);
    Ok(smallvec![with_array!(&ctx.inputs[0], a => go(ctx, a, &idx)?)])
}

/// The gather of a row-major `[outer, n, inner]` buffer along its middle axis: for each
/// outer index, the `inner`-element runs at the (checked) indices `idx`, in order.
fn gather_runs<T: Copy>(src: &[T], outer: usize, n: usize, inner: usize, idx: &[i64]) -> Vec<T> {
    let mut out = Vec::with_capacity(outer * idx.len() * inner);
    if inner == 1 {
        // single elements (the rows of a Julia matrix: the last axis of its transpose):
        // one indexed load each, not a one-element copy
        for line in src.chunks_exact(n.max(1)).take(outer) {
            out.extend(idx.iter().map(|&i| line[i as usize]));
        }
        return out;
    }
    for o in 0..outer {
        for &i in idx {
            let at = (o * n + i as usize) * inner;
            out.extend_from_slice(&src[at..at + inner]);
        }
    }
    out
}

/// TF `_GatherV2Grad`: TF returns `IndexedSlices(dy, indices)`, which becomes dense through
/// `UnsortedSegmentSum`; here `ScatterNd` (which sums duplicate indices) does the same.
/// For `axis > 0` the index dimensions of `dy` are moved to the front first and the result
/// moved back, as TF's transposes do. Params may have unknown dimensions except along
/// `axis` (the scatter's row count); an unknown one there is `Unimplemented`.
fn grad_gather(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None, None]) };
    let (params, indices) = (node.inputs[0], node.inputs[1]);
    let p = g.shape_of(params)?;
    let rank = p.rank();
    let axis = ((int_or(&node.attrs, "GatherV2", "axis", 0)? + rank as i64) % rank as i64) as usize;
    let k = g.shape_of(indices)?.rank();
    // indices of unknown size (a batch of ids): the row count is the reshape's -1
    let is = g.shape_of(indices)?;
    let n: usize = if is.is_fully_defined() { is.num_elements() } else { crate::shape::UNKNOWN };
    // dy: p[..axis] + idx + p[axis+1..]  ->  idx + p[..axis] + p[axis+1..]
    let mut moved = dy;
    if axis > 0 && k > 0 {
        let perm: Vec<usize> = (axis..axis + k).chain(0..axis).chain(axis + k..axis + k + rank - 1 - axis).collect();
        moved = transpose(g, dy, &perm)?;
    }
    let rest: Vec<usize> = p.0[..axis].iter().chain(&p.0[axis + 1..]).copied().collect();
    let scat_shape: Vec<usize> = std::iter::once(p.0[axis]).chain(rest.iter().copied()).collect();
    if !p.is_fully_defined() {
        // params with an unknown dimension: the indices keep their shape (one index per row
        // of depth 1) and ScatterNd takes the unknown trailing sizes from the updates, so
        // nothing is reshaped to a size the graph does not know; an unknown `axis` itself
        // is params' size when the node runs (`_ScatterNdToShapeOf`)
        let idx = g.op_spec(NodeSpec::new("ExpandDims", &[indices]).attr("dim", k as i64))?;
        let mut dx = if p.0[axis] == UNKNOWN {
            g.op_spec(NodeSpec::new("_ScatterNdToShapeOf", &[idx, moved, params]).attr("axis", axis as i64))?
        } else {
            g.op_spec(NodeSpec::new("ScatterNd", &[idx, moved]).attr("shape", AttrValue::Shape(scat_shape)))?
        };
        if axis > 0 {
            let perm: Vec<usize> = (1..=axis).chain(std::iter::once(0)).chain(axis + 1..rank).collect();
            dx = transpose(g, dx, &perm)?;
        }
        return Ok(vec![Some(dx), None]);
    }
    let upd_shape = Shape(std::iter::once(n).chain(rest.iter().copied()).collect());
    let updates = super::array::reshape(g, moved, &upd_shape)?;
    let idx2 = super::array::reshape(g, indices, &Shape(vec![n, 1]))?;
    let mut dx = g.op_spec(NodeSpec::new("ScatterNd", &[idx2, updates]).attr("shape", AttrValue::Shape(scat_shape)))?;
    if axis > 0 {
        let perm: Vec<usize> = (1..=axis).chain(std::iter::once(0)).chain(axis + 1..rank).collect();
        dx = transpose(g, dx, &perm)?;
    }
    Ok(vec![Some(dx), None])
}

// ---------------------------------------------------------------- GatherNd, ScatterNd

/// Row-major offsets (in units of the trailing slice) of each index row into the leading
/// `k` dimensions of `dims`; an error naming the row for an index out of range.
pub(super) fn nd_offsets(ctx: &KernelCtx, idx: &[i64], k: usize, dims: &[usize]) -> Result<Vec<usize>> {
    if k == 0 {
        return Ok(vec![0; 0]);
    }
    idx.chunks(k)
        .enumerate()
        .map(|(row, c)| {
            let mut off = 0usize;
            for (j, (&v, &d)) in c.iter().zip(dims).enumerate() {
                if !(0..d as i64).contains(&v) {
                    return Err(ctx.error(format!("indices[{row},{j}] = {v} does not index into shape {} (dimension {j} has size {d})", Shape(dims.to_vec()))));
                }
                off = off * d + v as usize;
            }
            Ok(off)
        })
        .collect()
}

fn infer_gather_nd(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let (p, idx) = (&ctx.inputs[0], &ctx.inputs[1]);
    require_index(ctx, idx, "indices")?;
    let k = idx.shape.dims().last().copied().unwrap_or(0);
    if idx.shape.rank() == 0 || k == 0 || k > p.shape.rank() {
        return Err(ctx.shape_error(&p.shape, &idx.shape, " (indices must have rank >= 1 and a last dimension in 1..=rank(params))"));
    }
    let dims = idx.shape.0[..idx.shape.rank() - 1].iter().chain(&p.shape.0[k..]).copied().collect();
    Ok(vec![TensorType::new(p.dtype, Shape(dims))])
}

fn kernel_gather_nd(ctx: &KernelCtx) -> Result<Outputs> {
    fn go<T: Element>(ctx: &KernelCtx, a: &ArcArray<T, IxDyn>, idx: &[i64], k: usize) -> Result<Tensor> {
        let offs = nd_offsets(ctx, idx, k, a.shape())?;
        let inner: usize = a.shape()[k..].iter().product();
        let std = a.as_standard_layout();
        let src = std.as_slice().expect("standard layout");
        let mut out = Vec::with_capacity(offs.len() * inner);
        for o in offs {
            out.extend_from_slice(&src[o * inner..(o + 1) * inner]);
        }
        let arr = ndarray::ArrayD::from_shape_vec(IxDyn(ctx.node.outputs[0].shape.dims()), out).map_err(|e| ctx.error(format!("internal shape error: {e}")))?;
        Ok(T::wrap(arr.into_shared()))
    }
    let k = *ctx.inputs[1].dims().last().unwrap_or(&0);
    let idx = index_values(&ctx.inputs[1]);
    Ok(smallvec![with_array!(&ctx.inputs[0], a => go(ctx, a, &idx, k)?)])
}

/// TF `_GatherNdGrad`: `ScatterNd(indices, dy, shape(params))`.
/// The gradient of a gather scatters into the params' shape, an attribute: refused, naming
/// the node, where that shape has an unknown dimension.
fn params_known(node: &Node, p: &Shape) -> Result<()> {
    if p.is_fully_defined() {
        return Ok(());
    }
    Err(OxiflowError::Unimplemented(format!(
        "the gradient of {} '{}' with respect to params of shape {p}, which has an unknown dimension",
        node.op.name, node.name
    )))
}

fn grad_gather_nd(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None, None]) };
    let shape = g.shape_of(node.inputs[0])?;
    // the dimensions the index rows address must be known; ScatterNd takes the others
    // from dy when the node runs
    let depth = g.shape_of(node.inputs[1])?.0.last().copied().unwrap_or(0);
    if depth == UNKNOWN {
        params_known(node, &shape)?;
    }
    // dimensions the index rows address that are unknown: params' sizes at run time
    let dx = if shape.0[..depth.min(shape.rank())].contains(&UNKNOWN) {
        g.op("_ScatterNdToShapeOf", &[node.inputs[1], dy, node.inputs[0]])?
    } else {
        g.op_spec(NodeSpec::new("ScatterNd", &[node.inputs[1], dy]).attr("shape", AttrValue::Shape(shape.0)))?
    };
    Ok(vec![Some(dx), None])
}

/// `ScatterNd(indices [..., k], updates [..., s_k, ...]) -> shape`. The dimensions of attr
/// `shape` after the first `k` (the slice each index row addresses) may be unknown (-1):
/// they are the updates' trailing dimensions, so the output takes them from the updates
/// (known when the node runs). The first `k` must be known (TF takes `shape` as a tensor).
fn infer_scatter_nd(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    scatter_nd_type(ctx, Shape(ctx.attrs.get_partial_shape(ctx.op, "shape")?), false)
}

/// The output of a scatter of `updates` (input 1) at `indices` (input 0) into `shape`;
/// `leading_unknown`: the dimensions the indices address may be unknown (a run-time shape).
fn scatter_nd_type(ctx: &InferCtx, shape: Shape, leading_unknown: bool) -> Result<Vec<TensorType>> {
    let (idx, upd) = (&ctx.inputs[0], &ctx.inputs[1]);
    require_index(ctx, idx, "indices")?;
    require_numeric(ctx, upd.dtype)?;
    let k = idx.shape.dims().last().copied().unwrap_or(0);
    if idx.shape.rank() == 0 || k == 0 || k == UNKNOWN || k > shape.rank() {
        return Err(ctx.shape_error(&shape, &idx.shape, " (indices must have rank >= 1 and a known last dimension in 1..=rank(shape))"));
    }
    if !leading_unknown && shape.0[..k].contains(&UNKNOWN) {
        return Err(ctx.invalid(format!("attribute shape {shape} has an unknown dimension among the first {k}, which the indices address")));
    }
    let want = Shape(idx.shape.0[..idx.shape.rank() - 1].iter().chain(&shape.0[k..]).copied().collect());
    let Some(merged) = want.merge(&upd.shape) else {
        return Err(ctx.shape_error(&want, &upd.shape, format!(" (updates for indices of shape {} into shape {shape})", idx.shape)));
    };
    let out = shape.0[..k].iter().chain(&merged.0[idx.shape.rank() - 1..]).copied().collect();
    Ok(vec![TensorType::new(upd.dtype, Shape(out))])
}

fn kernel_scatter_nd(ctx: &KernelCtx) -> Result<Outputs> {
    fn go<T: Arith>(ctx: &KernelCtx, upd: &ArcArray<T, IxDyn>, idx: &[i64], k: usize) -> Result<Tensor> {
        let dims = ctx.node.outputs[0].shape.dims();
        let offs = nd_offsets(ctx, idx, k, dims)?;
        let inner: usize = dims[k..].iter().product();
        // (one index per row: updates [rows, dims[1..]...], so that a column of the
        // updates lists its rows in the order of `offs`)
        let by_column = k == 1 && is_column_major(upd) && upd.ndim() == dims.len() && upd.shape()[0] == offs.len();
        if let Some(src) = by_column.then(|| upd.as_slice_memory_order()).flatten() {
            // column-major updates (a gradient of Julia's arrays): a column-major output,
            // filled a column at a time, so the updates are read in order and the adds land
            // in one column of the output (the rows of a row-major output would read the
            // updates with a stride: 16 ms against 5 for a 1024-row gather's gradient)
            let out = scatter_columns(src, &offs, dims[0], inner);
            let arr = ndarray::ArrayD::from_shape_vec(IxDyn(dims).f(), out).map_err(|e| ctx.error(format!("internal shape error: {e}")))?;
            return Ok(T::wrap(arr.into_shared()));
        }
        let mut out = vec![T::zero(); dims.iter().product()];
        let std = upd.as_standard_layout();
        let src = std.as_slice().expect("standard layout");
        for (row, o) in offs.into_iter().enumerate() {
            for j in 0..inner {
                out[o * inner + j] = T::add(out[o * inner + j], src[row * inner + j]);
            }
        }
        let arr = ndarray::ArrayD::from_shape_vec(IxDyn(dims), out).map_err(|e| ctx.error(format!("internal shape error: {e}")))?;
        Ok(T::wrap(arr.into_shared()))
    }
    let k = *ctx.inputs[0].dims().last().unwrap_or(&0);
    let idx = index_values(&ctx.inputs[0]);
    Ok(smallvec![for_numeric!(ctx, &ctx.inputs[1], |a| go(ctx, a, &idx, k)?)])
}

/// Work (elements read and written) below which [`scatter_columns`] stays on one thread.
const SCATTER_SHARD_MIN: usize = 1 << 15;

/// The column-major `[d0, cols]` sum of column-major updates `src` (`[offs.len(), cols]`)
/// into rows `offs` (each below `d0`; repeats add up, in the order of `offs`): each output
/// column is zeroed and filled while it is in cache (no separate zeroing pass over fresh
/// memory), whole columns sharded over the intra-op threads above [`SCATTER_SHARD_MIN`]
/// elements of work (each thread writes its own columns, so the sums are the
/// single-threaded ones bit for bit).
fn scatter_columns<T: Arith>(src: &[T], offs: &[usize], d0: usize, cols: usize) -> Vec<T> {
    use std::mem::MaybeUninit;
    let rows = offs.len();
    let n = d0 * cols;
    let mut out = crate::strided::buffer_for::<T>(n);
    let fill = |first_col: usize, dst: &mut [MaybeUninit<T>]| {
        for (c, col) in dst.chunks_mut(d0).enumerate() {
            col.fill(MaybeUninit::new(T::zero()));
            // SAFETY: every element of `col` was just written.
            let col = unsafe { &mut *(col as *mut [MaybeUninit<T>] as *mut [T]) };
            let j = first_col + c;
            for (&o, &u) in offs.iter().zip(&src[j * rows..(j + 1) * rows]) {
                col[o] = T::add(col[o], u);
            }
        }
    };
    if n > 0 {
        let per_col = rows + d0;
        match crate::intra_op::shard_len(cols, (SCATTER_SHARD_MIN / per_col.max(1)).max(2)).filter(|_| cols * per_col >= SCATTER_SHARD_MIN) {
            None => fill(0, &mut out.spare_capacity_mut()[..n]),
            Some(chunk) => {
                let items: Vec<(usize, &mut [MaybeUninit<T>])> =
                    out.spare_capacity_mut()[..n].chunks_mut(chunk * d0).enumerate().map(|(i, d)| (i * chunk, d)).collect();
                crate::intra_op::parallel_for_each(items, |(first, d)| fill(first, d));
            }
        }
    }
    // SAFETY: the chunks cover the first n elements and `fill` writes every one.
    unsafe { out.set_len(n) };
    out
}

// ---------------------------------------------------------------- _ScatterNdToShapeOf

/// `_ScatterNdToShapeOf(indices, updates, like)`: `ScatterNd` into the run-time shape of
/// `like` with its dimension `axis` (attr, default 0) moved first; the gradients of
/// `GatherV2` (along `axis`) and `GatherNd` (`axis` 0) with respect to params whose indexed
/// dimension is unknown until the node runs. TF builds these from `Shape(params)` and a
/// `ScatterNd` (or `UnsortedSegmentSum`) taking the shape as a tensor; here `like` is params
/// itself, read only for its dimensions. Errors: as `ScatterNd`'s, at run time for what the
/// static shapes leave open.
fn infer_scatter_to_shape_of(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let like = &ctx.inputs[2].shape;
    let axis = int_or(ctx.attrs, ctx.op, "axis", 0)?;
    if axis < 0 || axis as usize >= like.rank() {
        return Err(ctx.invalid(format!("axis {axis} is not a dimension of like, of shape {like}")));
    }
    let a = axis as usize;
    scatter_nd_type(ctx, Shape(std::iter::once(like.0[a]).chain(like.0[..a].iter().copied()).chain(like.0[a + 1..].iter().copied()).collect()), true)
}

/// The `ScatterNd` node that a specialised `_ScatterNdToShapeOf` node (its output shape the
/// run-time target) computes on its first two inputs; the CPU kernel and the CUDA device
/// both run it.
pub fn scatter_nd_node(node: &Node) -> Result<Node> {
    let mut attrs = Attrs::new();
    attrs.insert("shape".into(), AttrValue::Shape(node.outputs[0].shape.0.clone()));
    Ok(Node { op: lookup("ScatterNd")?, attrs, inputs: node.inputs[..2].to_vec(), partial: false, ..node.clone() })
}

fn kernel_scatter_to_shape_of(ctx: &KernelCtx) -> Result<Outputs> {
    let n = scatter_nd_node(ctx.node)?;
    kernel_scatter_nd(&KernelCtx { node: &n, inputs: &ctx.inputs[..2], state: ctx.state })
}

/// As `ScatterNd`'s: `GatherNd(dy, indices)` for the updates; none for indices or `like`.
fn grad_scatter_to_shape_of(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None, None, None]) };
    Ok(vec![None, Some(g.op("GatherNd", &[dy, node.inputs[0]])?), None])
}

/// TF `_ScatterNdGrad`: `GatherNd(dy, indices)` for the updates; no gradient for indices.
fn grad_scatter_nd(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None, None]) };
    Ok(vec![None, Some(g.op("GatherNd", &[dy, node.inputs[0]])?)])
}

/// Gather/scatter kernels on GPUs: numeric data with Int32/Int64 indices.
pub(crate) const GPU_NUMERIC: GpuSupport = GpuSupport::Types(&[DType::Float32, DType::Float64, DType::Int32, DType::Int64]);

pub(crate) fn register(r: &mut Registry) {
    // TF's StridedSlice attrs; StridedSliceGrad adds the forward input's `shape`
    macro_rules! slice_attrs {
        ($($extra:tt)*) => {
            attrs![
                "begin" => Ints, "end" => Ints, "strides" => Ints, "begin_mask" => Int, "end_mask" => Int,
                "ellipsis_mask" => Int, "new_axis_mask" => Int, "shrink_axis_mask" => Int $($extra)*
            ]
        };
    }
    const SLICE: &[AttrDef] = slice_attrs!();
    const SLICE_GRAD: &[AttrDef] = slice_attrs!(, "shape" => Shape);
    let one = Arity::Fixed(1);
    let two = Arity::Fixed(2);
    let any = GpuSupport::Any;
    let def = |name, default_name, arity, infer, kernel, gpu, grad| def(name, default_name, arity, infer, kernel, gpu, grad).launched_as(GpuLaunch::Movement);
    r.add(def("StridedSlice", "strided_slice", one, infer_strided_slice, kernel_strided_slice, any, Some(grad_strided_slice)).with_attrs(SLICE));
    r.add(
        def("StridedSliceGrad", "StridedSliceGrad", Arity::AtLeast(1), infer_strided_slice_grad, kernel_strided_slice_grad, any, Some(grad_strided_slice_grad))
            .with_attrs(SLICE_GRAD),
    );
    r.add(def("GatherV2", "GatherV2", two, infer_gather, kernel_gather, GPU_NUMERIC, Some(grad_gather)).with_attrs(attrs!["axis" => Int, "batch_dims" => Int]));
    r.add(def("GatherNd", "GatherNd", two, infer_gather_nd, kernel_gather_nd, GPU_NUMERIC, Some(grad_gather_nd)));
    r.add(def("ScatterNd", "ScatterNd", two, infer_scatter_nd, kernel_scatter_nd, GPU_NUMERIC, Some(grad_scatter_nd)).with_attrs(attrs!["shape" => Shape]));
    // the CUDA device launches its `scatter_nd_node`
    r.add(
        def(
            "_ScatterNdToShapeOf",
            "ScatterNdToShapeOf",
            Arity::Fixed(3),
            infer_scatter_to_shape_of,
            kernel_scatter_to_shape_of,
            GPU_NUMERIC,
            Some(grad_scatter_to_shape_of),
        )
        .launched_as(GpuLaunch::DeviceHandled)
        .with_attrs(attrs!["axis" => Int]),
    );
}
