//! Layout ops: `Transpose`, `ConcatV2`, `Pack`, `Unpack`, `SplitV`, `Tile`, `ReverseV2`,
//! `Pad`, `Squeeze`, `ExpandDims` (TF's `array_ops`, gradients as in `array_grad.py`).
//!
//! They move data without arithmetic, so they take every dtype and have a GPU kernel for
//! every dtype (`GpuSupport::Any`, as `Reshape`). Shapes are static: where TF takes a
//! parameter as a tensor input (`perm`, `axis`, `multiples`, `paddings`, `size_splits`,
//! `dim`), these take it as an attribute of the same name. Axes are 0-based; negative axes
//! count from the end, as in TF.

use super::index::{reshaped, strided_slice};
use super::math::def;
use super::*;
use crate::graph::NodeSpec;
use crate::shape::UNKNOWN;
use crate::tensor::Complex;
use crate::tensor::Element;
use crate::with_array;
use ndarray::{ArcArray, Axis, IxDyn, ShapeBuilder, Slice};

// ---------------------------------------------------------------- helpers

/// `axis` (negatives from the end) as an index into `0..rank`, or an error naming the op.
pub(crate) fn norm_axis(ctx: &InferCtx, axis: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    if (-r..r).contains(&axis) {
        Ok(((axis + r) % r) as usize)
    } else {
        Err(ctx.invalid(format!("axis {axis} is out of range for an input of rank {rank} (shape {})", ctx.inputs[0].shape)))
    }
}

/// An int attr, or `default` when absent.
pub(crate) fn int_or(attrs: &Attrs, op: &str, k: &str, default: i64) -> Result<i64> {
    if attrs.contains_key(k) {
        attrs.get_int(op, k)
    } else {
        Ok(default)
    }
}

/// `Reshape(x)` to `shape`.
fn reshape_to(g: &mut Graph, x: Output, shape: &Shape) -> Result<Output> {
    super::array::reshape(g, x, shape)
}

/// Output `i` of `node` or, when no gradient reached it, `ZerosLike` of it.
fn grad_or_zeros(g: &mut Graph, node: &Node, grads: &[Option<Output>], i: usize) -> Result<Output> {
    match grads[i] {
        Some(d) => Ok(d),
        None => g.op("ZerosLike", &[Output::new(node.id, i)]),
    }
}

// ---------------------------------------------------------------- Transpose

fn perm_of(ctx: &InferCtx) -> Result<Vec<usize>> {
    let x = &ctx.inputs[0];
    let perm = ctx.attrs.get_ints(ctx.op, "perm")?;
    let mut seen = vec![false; x.shape.rank()];
    let bad = || ctx.invalid(format!("perm {perm:?} is not a permutation of the axes of an input of shape {}", x.shape));
    if perm.len() != x.shape.rank() {
        return Err(bad());
    }
    for &p in &perm {
        let p = usize::try_from(p).map_err(|_| bad())?;
        if p >= seen.len() || std::mem::replace(&mut seen[p], true) {
            return Err(bad());
        }
    }
    Ok(perm.iter().map(|&p| p as usize).collect())
}

fn infer_transpose(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let perm = perm_of(ctx)?;
    let d = ctx.inputs[0].shape.dims();
    Ok(vec![TensorType::new(ctx.inputs[0].dtype, Shape(perm.iter().map(|&p| d[p]).collect()))])
}

/// CPU kernel of `Transpose`. When the permuted axes leave the elements in row-major or
/// column-major order (the transpose of a matrix in either order, the reversal of every
/// axis), the output shares the input's buffer with the axes permuted, as NumPy's
/// `transpose` view: tensors are immutable (a kernel that writes into a shared buffer copies
/// it first), and every kernel reads both orders. So the transposes around a row-major
/// `Reshape` that a Julia `reshape` of a Julia (column-major) array makes cost nothing where
/// each copied 8 MiB in 0.4 to 1.6 ms before. Other permutations are copied into a
/// row-major buffer (TF's `Transpose` always copies).
fn kernel_transpose(ctx: &KernelCtx) -> Result<Outputs> {
    let perm: Vec<usize> = ctx.node.attrs.get_ints("Transpose", "perm")?.iter().map(|&p| p as usize).collect();
    Ok(smallvec![with_array!(&ctx.inputs[0], a => {
        let view = a.clone().permuted_axes(IxDyn(&perm));
        if view.is_standard_layout() || view.t().is_standard_layout() {
            Element::wrap(view)
        } else {
            Element::wrap(crate::strided::standard_copy(&view.view()).into_shared())
        }
    })])
}

/// Adds `Transpose(x, perm)` (TF's `tf.transpose`, node name `transpose`).
pub fn transpose(g: &mut Graph, x: Output, perm: &[usize]) -> Result<Output> {
    let perm: Vec<i64> = perm.iter().map(|&p| p as i64).collect();
    g.op_spec(NodeSpec::new("Transpose", &[x]).attr("perm", perm))
}

/// TF `_TransposeGrad`: `Transpose(dy, invert_permutation(perm))`.
fn grad_transpose(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None]) };
    let perm = node.attrs.get_ints("Transpose", "perm")?;
    let mut inv = vec![0usize; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p as usize] = i;
    }
    Ok(vec![Some(transpose(g, dy, &inv)?)])
}

// ---------------------------------------------------------------- ConcatV2

fn infer_concat(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let first = &ctx.inputs[0];
    if first.shape.rank() == 0 {
        return Err(ctx.invalid("cannot concatenate scalars (rank-0 inputs); use Pack (stack)"));
    }
    let axis = norm_axis(ctx, ctx.attrs.get_int(ctx.op, "axis")?, first.shape.rank())?;
    let mut dims = first.shape.0.clone();
    for (i, t) in ctx.inputs.iter().enumerate().skip(1) {
        if t.dtype != first.dtype {
            return Err(ctx.dtype_error(first.dtype, t.dtype, format!(" (input {i}; concatenated tensors must share a dtype)")));
        }
        // unknown dimensions merge with known ones; along the axis one unknown makes the
        // sum unknown
        let mut merged = Vec::with_capacity(dims.len());
        let same = t.shape.rank() == dims.len()
            && (0..dims.len()).all(|d| {
                let m = if d == axis { Some(dims[d]) } else { Shape(vec![dims[d]]).merge(&Shape(vec![t.shape.0[d]])).map(|s| s.0[0]) };
                m.map(|m| merged.push(m)).is_some()
            });
        if !same {
            return Err(ctx.shape_error(&first.shape, &t.shape, format!(" (input {i}: dimensions other than axis {axis} must match)")));
        }
        let (a, b) = (dims[axis], t.shape.0[axis]);
        dims = merged;
        dims[axis] = if a == crate::shape::UNKNOWN || b == crate::shape::UNKNOWN { crate::shape::UNKNOWN } else { a + b };
    }
    Ok(vec![TensorType::new(first.dtype, Shape(dims))])
}

/// Concatenation (or stacking, when `stack`) of every input of one dtype along `axis`.
///
/// Each input is copied into its place in the output by [`crate::strided::copy_strided`]
/// (`memcpy` of the runs contiguous on both sides, tiles otherwise). The output is
/// column-major when every input of rank 2 or more is (Julia arrays and what kernels keep
/// in their order: the copies are then whole columns, and a fetch hands the result over
/// without a transposing copy), else row-major. `ndarray::concatenate` built a row-major
/// output element by element: joining two column-major 1024 x 1024 f32 matrices along
/// axis 0 took 8.7 ms (NumPy: 0.23 ms).
///
/// Errors: inputs whose run-time shapes do not match (ranks, or dimensions other than
/// `axis`; every dimension for `stack`), naming both shapes.
fn join<T: Element>(ctx: &KernelCtx, axis: usize, stack: bool) -> Result<Tensor> {
    let views = ctx.inputs.iter().map(|t| t.array::<T>().map(|a| a.view())).collect::<Result<Vec<_>>>()?;
    let first = views[0].shape();
    let rank = first.len() + usize::from(stack);
    if axis >= rank {
        return Err(ctx.error(format!("axis {axis} is out of range for inputs of shape {first:?}")));
    }
    for (i, v) in views.iter().enumerate().skip(1) {
        let s = v.shape();
        let fits = s.len() == first.len() && (0..s.len()).all(|d| s[d] == first[d] || (!stack && d == axis));
        if !fits {
            let what = if stack { "stacked inputs must have one shape" } else { "dimensions other than the axis must match" };
            return Err(ctx.error(format!("cannot join input 0 of shape {first:?} and input {i} of shape {s:?} along axis {axis}: {what}")));
        }
    }
    // each input's dims and strides in the output's rank (a stacked input gains a length-1 axis)
    let lifted = |v: &ndarray::ArrayViewD<T>| -> (Vec<usize>, Vec<isize>) {
        let (mut d, mut s) = (v.shape().to_vec(), v.strides().to_vec());
        if stack {
            d.insert(axis, 1);
            s.insert(axis, 0);
        }
        (d, s)
    };
    let parts: Vec<(Vec<usize>, Vec<isize>)> = views.iter().map(lifted).collect();
    let mut dims = parts[0].0.clone();
    dims[axis] = parts.iter().map(|(d, _)| d[axis]).sum();
    let column_major = views.iter().all(|v| v.ndim() < 2 || crate::strided::is_column_major(v)) && views.iter().any(|v| v.ndim() >= 2);
    let n = crate::strided::element_count(&dims, std::mem::size_of::<T>()).map_err(|e| ctx.error(e.to_string()))?;
    let dst = crate::strided::dense_strides(&dims, column_major);
    let mut out: Vec<T> = crate::strided::try_buffer_for(n).ok_or_else(|| ctx.error(format!("out of host memory for an output of shape {dims:?}")))?;
    let mut at = 0usize;
    for (v, (d, s)) in views.iter().zip(&parts) {
        // (wrapping: with an empty output the position may lie past a zero-sized buffer,
        // where nothing is copied)
        let place = out.as_mut_ptr().wrapping_offset(at as isize * dst[axis]);
        // SAFETY: `v`'s strides address its own elements; the destination is the block of
        // `d` elements starting at position `at` along `axis` of the dense `dims` buffer of
        // `n` elements, disjoint from every other input's block and from the inputs.
        unsafe { crate::strided::copy_strided(d, v.as_ptr(), s, place, &dst) };
        at += d[axis];
    }
    // SAFETY: the blocks of all inputs cover the `n` elements of `dims` (their sizes along
    // `axis` add up to `dims[axis]`, the other dimensions are equal).
    unsafe { out.set_len(n) };
    let a = ArcArray::from_shape_vec(IxDyn(&dims).set_f(column_major), out).map_err(|e| ctx.error(format!("cannot join inputs: {e}")))?;
    Ok(T::wrap(a))
}

fn axis_of_output(ctx: &KernelCtx, rank: usize) -> Result<usize> {
    let a = ctx.node.attrs.get_int(ctx.node.op.name, "axis")?;
    let r = rank as i64;
    Ok(((a + r) % r.max(1)) as usize)
}

fn kernel_concat(ctx: &KernelCtx) -> Result<Outputs> {
    let axis = axis_of_output(ctx, ctx.node.outputs[0].shape.rank())?;
    Ok(smallvec![match ctx.inputs[0] {
        Tensor::F32(_) => join::<f32>(ctx, axis, false)?,
        Tensor::F64(_) => join::<f64>(ctx, axis, false)?,
        Tensor::I32(_) => join::<i32>(ctx, axis, false)?,
        Tensor::I64(_) => join::<i64>(ctx, axis, false)?,
        Tensor::Bool(_) => join::<bool>(ctx, axis, false)?,
        Tensor::C64(_) => join::<Complex<f32>>(ctx, axis, false)?,
        Tensor::C128(_) => join::<Complex<f64>>(ctx, axis, false)?,
        Tensor::Device(ref d) => crate::tensor::device_resident(d),
    }])
}

/// TF `_ConcatGradV2`: `dy` cut back into the inputs' sizes along the axis (here one
/// `SplitV` where TF uses one `Slice` per input).
fn grad_concat(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let n = node.inputs.len();
    let Some(dy) = grads[0] else { return Ok(vec![None; n]) };
    let rank = node.outputs[0].shape.rank() as i64;
    let axis = (node.attrs.get_int("ConcatV2", "axis")? + rank) % rank;
    let sizes = node.inputs.iter().map(|&i| Ok(g.shape_of(i)?.0[axis as usize])).collect::<Result<Vec<_>>>()?;
    if sizes.contains(&crate::shape::UNKNOWN) {
        // split by the inputs' run-time sizes
        let ins: Vec<Output> = std::iter::once(dy).chain(node.inputs.iter().copied()).collect();
        let id = g.add_node(NodeSpec::new("_SplitToShapesOf", &ins).attr("axis", axis))?;
        return Ok((0..n).map(|k| Some(Output::new(id, k))).collect());
    }
    let sizes: Vec<i64> = sizes.iter().map(|&s| s as i64).collect();
    Ok(split_v(g, dy, &sizes, axis)?.into_iter().map(Some).collect())
}

/// Adds `ConcatV2(xs)` along `axis` (TF's `tf.concat`, node name `concat`).
pub fn concat(g: &mut Graph, xs: &[Output], axis: i64) -> Result<Output> {
    g.op_spec(NodeSpec::new("ConcatV2", xs).attr("axis", axis))
}

// ---------------------------------------------------------------- Pack, Unpack

fn infer_pack(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let first = &ctx.inputs[0];
    let mut shape = first.shape.clone();
    for (i, t) in ctx.inputs.iter().enumerate().skip(1) {
        if t.dtype != first.dtype {
            return Err(ctx.dtype_error(first.dtype, t.dtype, format!(" (input {i}; stacked tensors must share a dtype)")));
        }
        shape = shape.merge(&t.shape).ok_or_else(|| ctx.shape_error(&first.shape, &t.shape, format!(" (input {i}; stacked tensors must share a shape)")))?;
    }
    let rank = first.shape.rank() + 1;
    let a = int_or(ctx.attrs, ctx.op, "axis", 0)?;
    let axis = norm_axis(ctx, a, rank)?;
    let mut dims = shape.0;
    dims.insert(axis, ctx.inputs.len());
    Ok(vec![TensorType::new(first.dtype, Shape(dims))])
}

fn kernel_pack(ctx: &KernelCtx) -> Result<Outputs> {
    let rank = ctx.node.outputs[0].shape.rank() as i64;
    let axis = ((int_or(&ctx.node.attrs, "Pack", "axis", 0)? + rank) % rank) as usize;
    Ok(smallvec![match ctx.inputs[0] {
        Tensor::F32(_) => join::<f32>(ctx, axis, true)?,
        Tensor::F64(_) => join::<f64>(ctx, axis, true)?,
        Tensor::I32(_) => join::<i32>(ctx, axis, true)?,
        Tensor::I64(_) => join::<i64>(ctx, axis, true)?,
        Tensor::Bool(_) => join::<bool>(ctx, axis, true)?,
        Tensor::C64(_) => join::<Complex<f32>>(ctx, axis, true)?,
        Tensor::C128(_) => join::<Complex<f64>>(ctx, axis, true)?,
        Tensor::Device(ref d) => crate::tensor::device_resident(d),
    }])
}

/// TF `_PackGrad`: `Unpack(dy)` along the same axis.
fn grad_pack(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let n = node.inputs.len();
    let Some(dy) = grads[0] else { return Ok(vec![None; n]) };
    let axis = int_or(&node.attrs, "Pack", "axis", 0)?;
    Ok(unpack(g, dy, axis)?.into_iter().map(Some).collect())
}

/// Adds `Pack(xs)` along `axis` (TF's `tf.stack`, node name `stack`).
pub fn pack(g: &mut Graph, xs: &[Output], axis: i64) -> Result<Output> {
    g.op_spec(NodeSpec::new("Pack", xs).attr("axis", axis))
}

/// The most outputs an `Unpack` node may have (one per slice along its axis). TF sets no
/// limit, but a graph node with millions of outputs is a mistake (a wrong axis or a huge
/// placeholder dimension), and its output list would be allocated while building.
pub const MAX_UNPACK_OUTPUTS: usize = 1 << 20;

fn infer_unpack(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let x = &ctx.inputs[0];
    if x.shape.rank() == 0 {
        return Err(ctx.invalid("cannot unstack a scalar (rank-0 input)"));
    }
    let axis = norm_axis(ctx, int_or(ctx.attrs, ctx.op, "axis", 0)?, x.shape.rank())?;
    let n = x.shape.0[axis];
    if n == crate::shape::UNKNOWN {
        return Err(ctx.invalid(format!("cannot unstack along dimension {axis} of shape {}, whose size is unknown (one output per slice)", x.shape)));
    }
    if let Some(num) = ctx.attrs.get("num").map(|_| ctx.attrs.get_int(ctx.op, "num")).transpose()? {
        if num != n as i64 {
            return Err(ctx.invalid(format!("num {num} does not match dimension {axis} of shape {} ({n})", x.shape)));
        }
    }
    // one output per slice: a dimension of 2^40 would ask for 2^40 output types
    if n > MAX_UNPACK_OUTPUTS {
        return Err(
            ctx.invalid(format!("unstacking dimension {axis} of shape {} would make {n} outputs, more than the {MAX_UNPACK_OUTPUTS} a node may have", x.shape))
        );
    }
    let mut dims = x.shape.0.clone();
    dims.remove(axis);
    Ok(vec![TensorType::new(x.dtype, Shape(dims)); n])
}

fn kernel_unpack(ctx: &KernelCtx) -> Result<Outputs> {
    let x = &ctx.inputs[0];
    let rank = x.dims().len() as i64;
    let axis = ((int_or(&ctx.node.attrs, "Unpack", "axis", 0)? + rank) % rank) as usize;
    let n = x.dims()[axis];
    Ok((0..n).map(|i| with_array!(x, a => Element::wrap(a.index_axis(Axis(axis), i).to_owned().into_shared()))).collect())
}

/// TF `_UnpackGrad`: `Pack` of the outputs' gradients (zeros where none arrived).
fn grad_unpack(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    if grads.iter().all(Option::is_none) {
        return Ok(vec![None]);
    }
    let parts = (0..node.outputs.len()).map(|i| grad_or_zeros(g, node, grads, i)).collect::<Result<Vec<_>>>()?;
    let axis = int_or(&node.attrs, "Unpack", "axis", 0)?;
    Ok(vec![Some(pack(g, &parts, axis)?)])
}

/// Adds `Unpack(x)` along `axis` (TF's `tf.unstack`, node name `unstack`); one output per
/// slice.
pub fn unpack(g: &mut Graph, x: Output, axis: i64) -> Result<Vec<Output>> {
    let id = g.add_node(NodeSpec::new("Unpack", &[x]).attr("axis", axis))?;
    let n = g.node(id)?.outputs.len();
    Ok((0..n).map(|i| Output::new(id, i)).collect())
}

// ---------------------------------------------------------------- SplitV

/// The sizes of a `SplitV` along its axis (`-1` entry inferred), or an error.
fn split_sizes(ctx: &InferCtx, dim: usize) -> Result<Vec<usize>> {
    let sizes = ctx.attrs.get_ints(ctx.op, "size_splits")?;
    let unknown = sizes.iter().filter(|&&s| s == -1).count();
    let bad = |why: &str| ctx.invalid(format!("size_splits {sizes:?} {why} (the split dimension has size {dim}; input shape {})", ctx.inputs[0].shape));
    if sizes.is_empty() || unknown > 1 || sizes.iter().any(|&s| s < -1) {
        return Err(bad("must be non-negative sizes, at most one of them -1"));
    }
    // a wrapping sum could match the dimension by accident
    let known = sizes.iter().filter(|&&s| s != -1).try_fold(0i64, |t, &s| t.checked_add(s));
    let Some(known) = known else { return Err(bad("do not add up to the size of the split dimension")) };
    if (unknown == 0 && known != dim as i64) || (unknown == 1 && known > dim as i64) {
        return Err(bad("do not add up to the size of the split dimension"));
    }
    Ok(sizes.iter().map(|&s| if s == -1 { (dim as i64 - known) as usize } else { s as usize }).collect())
}

fn infer_split(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let x = &ctx.inputs[0];
    let axis = norm_axis(ctx, ctx.attrs.get_int(ctx.op, "axis")?, x.shape.rank())?;
    if x.shape.0[axis] == crate::shape::UNKNOWN {
        return Err(ctx.invalid(format!("cannot split dimension {axis} of shape {}, whose size is unknown", x.shape)));
    }
    let sizes = split_sizes(ctx, x.shape.0[axis])?;
    Ok(sizes
        .iter()
        .map(|&s| {
            let mut d = x.shape.0.clone();
            d[axis] = s;
            TensorType::new(x.dtype, Shape(d))
        })
        .collect())
}

/// The pieces of `SplitV` (and `_SplitToShapesOf`). A piece that is one contiguous run of
/// the input's memory (along the first axis of a row-major tensor, the last of a column-major
/// one, as Julia's `x[:, 1:k]`) shares the input's buffer, as TF's `Split` hands out slices of
/// its input for aligned first-axis pieces (the gradient of a concatenation copied 4 MiB per
/// piece of a 1024x2048 f32 array); any other piece is copied in the input's memory order.
fn kernel_split(ctx: &KernelCtx) -> Result<Outputs> {
    let x = &ctx.inputs[0];
    let rank = x.dims().len() as i64;
    let axis = ((ctx.node.attrs.get_int(ctx.node.op.name, "axis")? % rank + rank) % rank) as usize;
    let mut start = 0isize;
    let mut outs = Outputs::new();
    for t in &ctx.node.outputs {
        let n = t.shape.0[axis] as isize;
        let s = Slice::new(start, Some(start + n), 1);
        outs.push(with_array!(x, a => {
            let mut piece = a.clone();
            piece.slice_axis_inplace(Axis(axis), s);
            Element::wrap(if piece.is_standard_layout() || piece.t().is_standard_layout() {
                piece
            } else {
                crate::strided::dense_copy(&piece.view(), crate::strided::is_column_major(a)).into_shared()
            })
        }));
        start += n;
    }
    Ok(outs)
}

/// `_SplitToShapesOf(x, like_0, ..., like_{n-1})`: `x` split along `axis` into pieces of the
/// run-time sizes of the `like_k` (the gradient of a `ConcatV2` whose inputs have an unknown
/// size along the axis, where TF builds `Shape` and `ConcatOffset` nodes). Output `k` has
/// `like_k`'s shape, with `x`'s dtype. The kernel is `SplitV`'s, on the node specialised to
/// the fed shapes.
fn infer_split_to_shapes(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let x = &ctx.inputs[0];
    let rank = x.shape.rank() as i64;
    if rank == 0 {
        return Err(ctx.invalid("cannot split a scalar"));
    }
    let axis = ((ctx.attrs.get_int(ctx.op, "axis")? % rank + rank) % rank) as usize;
    let mut total = 0usize;
    let mut outs = Vec::new();
    for (k, like) in ctx.inputs[1..].iter().enumerate() {
        let mut want = x.shape.clone();
        want.0[axis] = UNKNOWN;
        let Some(shape) = (like.shape.rank() as i64 == rank).then(|| want.merge(&like.shape)).flatten() else {
            return Err(ctx.shape_error(&x.shape, &like.shape, format!(" (piece {k} must match the split tensor except along axis {axis})")));
        };
        total = if total == UNKNOWN || shape.0[axis] == UNKNOWN { UNKNOWN } else { total + shape.0[axis] };
        outs.push(TensorType::new(x.dtype, shape));
    }
    if total != UNKNOWN && x.shape.0[axis] != UNKNOWN && total != x.shape.0[axis] {
        return Err(
            ctx.invalid(format!("the pieces' sizes add up to {total} along axis {axis}, but the split tensor has {} (shape {})", x.shape.0[axis], x.shape))
        );
    }
    Ok(outs)
}

/// The gradient of `_SplitToShapesOf`: the pieces' gradients concatenated (zeros where none
/// arrived); none for the `like` operands.
fn grad_split_to_shapes(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let mut out = vec![None; node.inputs.len()];
    if grads.iter().all(Option::is_none) {
        return Ok(out);
    }
    let parts = (0..node.outputs.len()).map(|i| grad_or_zeros(g, node, grads, i)).collect::<Result<Vec<_>>>()?;
    out[0] = Some(if parts.len() == 1 { parts[0] } else { concat(g, &parts, node.attrs.get_int(node.op.name, "axis")?)? });
    Ok(out)
}

/// TF `_SplitVGrad`: `ConcatV2` of the outputs' gradients (zeros where none arrived).
fn grad_split(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    if grads.iter().all(Option::is_none) {
        return Ok(vec![None]);
    }
    let parts = (0..node.outputs.len()).map(|i| grad_or_zeros(g, node, grads, i)).collect::<Result<Vec<_>>>()?;
    let axis = node.attrs.get_int("SplitV", "axis")?;
    let out = if parts.len() == 1 { parts[0] } else { concat(g, &parts, axis)? };
    Ok(vec![Some(out)])
}

/// Adds `SplitV(x)` into pieces of `sizes` along `axis` (TF's `tf.split`, node name
/// `split`); one output per piece.
pub fn split_v(g: &mut Graph, x: Output, sizes: &[i64], axis: i64) -> Result<Vec<Output>> {
    let id = g.add_node(NodeSpec::new("SplitV", &[x]).attr("size_splits", sizes.to_vec()).attr("axis", axis))?;
    let n = g.node(id)?.outputs.len();
    Ok((0..n).map(|i| Output::new(id, i)).collect())
}

// ---------------------------------------------------------------- Tile

fn multiples_of(ctx: &InferCtx) -> Result<Vec<usize>> {
    let x = &ctx.inputs[0];
    let m = ctx.attrs.get_ints(ctx.op, "multiples")?;
    if m.len() != x.shape.rank() || m.iter().any(|&k| k < 0) {
        return Err(ctx.invalid(format!("multiples {m:?} must hold one non-negative count per dimension of shape {}", x.shape)));
    }
    Ok(m.iter().map(|&k| k as usize).collect())
}

/// `Tile(x [d0, d1, ...]) -> [d0 m0, d1 m1, ...]`; an unknown `di` stays unknown (0 when
/// `mi` is 0).
fn infer_tile(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let m = multiples_of(ctx)?;
    let x = &ctx.inputs[0];
    let dims = x.shape.0.iter().zip(&m).enumerate().map(|(i, (&d, &k))| match (d, k) {
        (_, 0) => Ok(0),
        (UNKNOWN, _) => Ok(UNKNOWN),
        _ => d.checked_mul(k).filter(|&n| i64::try_from(n).is_ok()).ok_or_else(|| ctx.invalid(format!("multiple {k} of dimension {i} (size {d}) overflows"))),
    });
    Ok(vec![TensorType::new(x.dtype, Shape(dims.collect::<Result<_>>()?))])
}

/// `a` repeated `m[ax]` times along each axis, row-major: each input row (the last axis)
/// is copied `m[last]` times into the output row (by doubling the part written), and the
/// output rows of the other axes take their input row by the index modulo the input's
/// size (Eigen's broadcasting, which TF's `Tile` kernel uses). The output's size is checked and its buffer reserved before
/// anything is written: `None` when it overflows or cannot be allocated (an empty input
/// tiled 2^40 times is an empty output, and allocates nothing).
fn tile_array<T: Element>(a: &ArcArray<T, IxDyn>, m: &[usize]) -> Option<ArcArray<T, IxDyn>> {
    let in_dims = a.shape();
    let out_dims: Vec<usize> = in_dims.iter().zip(m).map(|(&d, &k)| d.checked_mul(k)).collect::<Option<_>>()?;
    let n = out_dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))?;
    let mut out: Vec<T> = crate::strided::try_buffer_for(n)?;
    if n > 0 {
        let src = a.as_standard_layout();
        let src = src.as_slice().expect("a standard-layout array is one slice");
        let rank = in_dims.len();
        let row = if rank == 0 { 1 } else { in_dims[rank - 1] };
        let reps = if rank == 0 { 1 } else { m[rank - 1] };
        // an odometer over the output's outer axes; `src_row` the input row it reads
        let outer = &out_dims[..rank.saturating_sub(1)];
        let mut ix = vec![0usize; outer.len()];
        loop {
            let src_row = ix.iter().zip(in_dims).fold(0, |acc, (&i, &d)| acc * d + i % d);
            // the row once, then the written part doubled: O(log reps) copies of a short row
            let start = out.len();
            out.extend_from_slice(&src[src_row * row..(src_row + 1) * row]);
            while out.len() - start < row * reps {
                let have = out.len() - start;
                out.extend_from_within(start..start + have.min(row * reps - have));
            }
            let Some(k) = (0..ix.len()).rev().find(|&k| ix[k] + 1 < outer[k]) else { break };
            ix[k] += 1;
            ix[k + 1..].iter_mut().for_each(|i| *i = 0);
        }
    }
    debug_assert_eq!(out.len(), n);
    ndarray::ArrayD::from_shape_vec(IxDyn(&out_dims), out).ok().map(|o| o.into_shared())
}

fn kernel_tile(ctx: &KernelCtx) -> Result<Outputs> {
    let m: Vec<usize> = ctx.node.attrs.get_ints("Tile", "multiples")?.iter().map(|&k| k as usize).collect();
    let dims = ctx.inputs[0].dims();
    if m.len() != dims.len() {
        return Err(ctx.error(format!("multiples {m:?} must hold one count per dimension of shape {dims:?}")));
    }
    let too_large = || OxiflowError::OutOfMemory {
        op: ctx.node.op.name.to_string(),
        node: ctx.node.name.clone(),
        shape: format!("{dims:?} tiled {m:?}"),
        dtype: ctx.inputs[0].dtype().to_string(),
        device: "/device:CPU:0".into(),
        bytes: dims.iter().zip(&m).try_fold(ctx.inputs[0].dtype().size_of(), |acc, (&d, &k)| acc.checked_mul(d)?.checked_mul(k)),
    };
    Ok(smallvec![with_array!(&ctx.inputs[0], a => Element::wrap(tile_array(a, &m).ok_or_else(too_large)?))])
}

/// TF `_TileGrad`: `dy` reshaped to `[m0, d0, m1, d1, ...]` and summed over the `m` axes.
fn grad_tile(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None]) };
    let in_shape = g.shape_of(node.inputs[0])?;
    let m = node.attrs.get_ints("Tile", "multiples")?;
    if m.iter().all(|&k| k == 1) {
        return Ok(vec![Some(dy)]);
    }
    if m.contains(&0) {
        // an empty tile: nothing flows back (and an empty dy cannot be reshaped by -1)
        return Ok(vec![Some(g.op("ZerosLike", &[node.inputs[0]])?)]);
    }
    let split: Vec<usize> = in_shape.0.iter().zip(&m).flat_map(|(&d, &k)| [k as usize, d]).collect();
    let r = match in_shape.0.iter().filter(|&&d| d == UNKNOWN).count() {
        // one unknown dimension: Reshape's -1 (the split shape's only unknown entry)
        0 | 1 => reshape_to(g, dy, &Shape(split))?,
        // several: the run-time shape of `x` tiled as [m0, d0, m1, d1, ...], built by
        // interleaving unit axes and tiling them (an extra tensor of dy's size, in this
        // case only, where TF would reshape to a computed shape tensor)
        _ => {
            let mut like = node.inputs[0];
            for i in 0..in_shape.rank() {
                like = g.op_spec(NodeSpec::new("ExpandDims", &[like]).attr("dim", 2 * i as i64))?;
            }
            let mm: Vec<i64> = m.iter().flat_map(|&k| [k, 1]).collect();
            like = g.op_spec(NodeSpec::new("Tile", &[like]).attr("multiples", mm))?;
            g.op("_ReshapeToShapeOf", &[dy, like])?
        }
    };
    let axes: Vec<i64> = (0..in_shape.rank() as i64).map(|i| 2 * i).collect();
    Ok(vec![Some(super::reduce::reduce_sum(g, r, &axes, false)?)])
}

// ---------------------------------------------------------------- ReverseV2

fn reverse_axes(ctx: &InferCtx) -> Result<Vec<usize>> {
    let x = &ctx.inputs[0];
    let mut axes = ctx.attrs.get_ints(ctx.op, "axis")?.iter().map(|&a| norm_axis(ctx, a, x.shape.rank())).collect::<Result<Vec<_>>>()?;
    let n = axes.len();
    axes.sort_unstable();
    axes.dedup();
    if axes.len() != n {
        return Err(ctx.invalid("axis lists a dimension twice"));
    }
    Ok(axes)
}

fn infer_reverse(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    reverse_axes(ctx)?;
    Ok(vec![ctx.inputs[0].clone()])
}

fn kernel_reverse(ctx: &KernelCtx) -> Result<Outputs> {
    let rank = ctx.inputs[0].dims().len() as i64;
    let axes: Vec<usize> = ctx.node.attrs.get_ints("ReverseV2", "axis")?.iter().map(|&a| ((a + rank) % rank) as usize).collect();
    Ok(smallvec![with_array!(&ctx.inputs[0], a => {
        let mut v = a.view();
        for &ax in &axes {
            v.invert_axis(Axis(ax));
        }
        Element::wrap(crate::strided::standard_copy(&v).into_shared())
    })])
}

/// TF `_ReverseV2Grad`: `ReverseV2(dy)` along the same axes.
fn grad_reverse(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None]) };
    let axes = node.attrs.get_ints("ReverseV2", "axis")?;
    Ok(vec![Some(g.op_spec(NodeSpec::new("ReverseV2", &[dy]).attr("axis", axes))?)])
}

// ---------------------------------------------------------------- Pad

/// `(before, after)` per dimension from the flat `paddings` attr `[b0, a0, b1, a1, ...]`.
fn paddings_of(attrs: &Attrs, op: &str, shape: &Shape) -> std::result::Result<Vec<(usize, usize)>, String> {
    let p = attrs.get_ints(op, "paddings").map_err(|e| e.to_string())?;
    if p.len() != 2 * shape.rank() || p.iter().any(|&v| v < 0) {
        return Err(format!("paddings {p:?} must hold non-negative (before, after) pairs, one per dimension of shape {shape}"));
    }
    Ok(p.chunks(2).map(|c| (c[0] as usize, c[1] as usize)).collect())
}

/// `Pad(x [d0, ...]) -> [b0 + d0 + a0, ...]`; an unknown `di` stays unknown.
fn infer_pad(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let x = &ctx.inputs[0];
    let p = paddings_of(ctx.attrs, ctx.op, &x.shape).map_err(|m| ctx.invalid(m))?;
    let dims = x.shape.0.iter().zip(&p).enumerate().map(|(k, (&d, &(b, a)))| match d {
        UNKNOWN => Ok(UNKNOWN),
        // TF's dimensions are int64: a padded size past its range overflows too
        _ => d
            .checked_add(b)
            .and_then(|n| n.checked_add(a))
            .filter(|&n| i64::try_from(n).is_ok())
            .ok_or_else(|| ctx.invalid(format!("padding ({b}, {a}) of dimension {k} (size {d}) overflows"))),
    });
    Ok(vec![TensorType::new(x.dtype, Shape(dims.collect::<Result<_>>()?))])
}

fn kernel_pad(ctx: &KernelCtx) -> Result<Outputs> {
    fn go<T: Element>(ctx: &KernelCtx, a: &ArcArray<T, IxDyn>) -> Result<Tensor> {
        let p = paddings_of(&ctx.node.attrs, "Pad", &Shape(a.shape().to_vec())).map_err(|m| ctx.error(m))?;
        let mut out = ndarray::ArrayD::from_elem(IxDyn(ctx.node.outputs[0].shape.dims()), T::zero());
        out.slice_each_axis_mut(|ax| {
            let (b, n) = (p[ax.axis.index()].0 as isize, a.shape()[ax.axis.index()] as isize);
            Slice::new(b, Some(b + n), 1)
        })
        .assign(a);
        Ok(T::wrap(out.into_shared()))
    }
    Ok(smallvec![with_array!(&ctx.inputs[0], a => go(ctx, a)?)])
}

/// TF `_PadGrad`: the slice of `dy` where the input sits (`StridedSlice`, TF uses `Slice`).
/// Along an unknown dimension the slice ends `after` elements before the end (a negative
/// end, or the end mask when `after` is 0), which needs no size.
fn grad_pad(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None]) };
    let shape = g.shape_of(node.inputs[0])?;
    let p = paddings_of(&node.attrs, "Pad", &shape).map_err(OxiflowError::InvalidArgument)?;
    let begin: Vec<i64> = p.iter().map(|&(b, _)| b as i64).collect();
    let mut end_mask = 0;
    let end: Vec<i64> = p
        .iter()
        .zip(shape.dims())
        .enumerate()
        .map(|(i, (&(b, a), &d))| match (d, a) {
            (UNKNOWN, 0) => {
                end_mask |= 1 << i;
                0
            }
            (UNKNOWN, _) => -(a as i64),
            _ => (b + d) as i64,
        })
        .collect();
    let strides = vec![1; shape.rank()];
    Ok(vec![Some(strided_slice(g, dy, &begin, &end, &strides, 0, end_mask, 0)?)])
}

// ---------------------------------------------------------------- Squeeze, ExpandDims

fn infer_squeeze(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let x = &ctx.inputs[0];
    let listed = match ctx.attrs.get("squeeze_dims") {
        None => Vec::new(),
        Some(_) => ctx.attrs.get_ints(ctx.op, "squeeze_dims")?,
    };
    let axes = listed.iter().map(|&a| norm_axis(ctx, a, x.shape.rank())).collect::<Result<Vec<_>>>()?;
    if axes.is_empty() && !x.shape.is_fully_defined() {
        return Err(ctx.invalid(format!("cannot squeeze every dimension of size 1 of shape {}, whose dimensions are not all known; name the axes", x.shape)));
    }
    for &a in &axes {
        if x.shape.0[a] != 1 && x.shape.0[a] != crate::shape::UNKNOWN {
            return Err(ctx.invalid(format!("can not squeeze dim[{a}], expected a dimension of 1, got {} (shape {})", x.shape.0[a], x.shape)));
        }
    }
    let dims = x.shape.0.iter().enumerate().filter(|&(i, &d)| if axes.is_empty() { d != 1 } else { !axes.contains(&i) }).map(|(_, &d)| d).collect();
    Ok(vec![TensorType::new(x.dtype, Shape(dims))])
}

fn infer_expand_dims(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let x = &ctx.inputs[0];
    let axis = norm_axis(ctx, ctx.attrs.get_int(ctx.op, "dim")?, x.shape.rank() + 1)?;
    let mut dims = x.shape.0.clone();
    dims.insert(axis, 1);
    Ok(vec![TensorType::new(x.dtype, Shape(dims))])
}

/// Kernel of `Squeeze` and `ExpandDims`: the input with the node's output dimensions,
/// sharing its buffer when it is row-major (as `Reshape` does, and TF's kernels, which
/// forward the input's buffer), else a row-major copy.
fn kernel_reshape_like(ctx: &KernelCtx) -> Result<Outputs> {
    let dims = ctx.node.outputs[0].shape.dims();
    Ok(smallvec![with_array!(&ctx.inputs[0], a => Element::wrap(if a.is_standard_layout() {
        super::array::reshape_array(ctx, a, dims)?
    } else {
        reshaped(ctx, a.view(), dims)?
    }))])
}

/// TF `_SqueezeGrad` / `_ExpandDimsGrad`: `dy` reshaped to the input's shape.
fn grad_reshape_like(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None]) };
    Ok(vec![Some(super::dynamic_shape::reshape_to_like(g, dy, node.inputs[0])?)])
}

pub(crate) fn register(r: &mut Registry) {
    let one = Arity::Fixed(1);
    let any = GpuSupport::Any;
    let def = |name, default_name, arity, infer, kernel, gpu, grad| def(name, default_name, arity, infer, kernel, gpu, grad).launched_as(GpuLaunch::Movement);
    r.add(def("Transpose", "transpose", one, infer_transpose, kernel_transpose, any, Some(grad_transpose)).with_attrs(attrs!["perm" => Ints]));
    r.add(def("ConcatV2", "concat", Arity::AtLeast(1), infer_concat, kernel_concat, any, Some(grad_concat)).with_attrs(attrs!["axis" => Int]));
    r.add(def("Pack", "stack", Arity::AtLeast(1), infer_pack, kernel_pack, any, Some(grad_pack)).with_attrs(attrs!["axis" => Int]));
    r.add(def("Unpack", "unstack", one, infer_unpack, kernel_unpack, any, Some(grad_unpack)).with_attrs(attrs!["axis" => Int, "num" => Int]));
    r.add(def("SplitV", "split", one, infer_split, kernel_split, any, Some(grad_split)).with_attrs(attrs!["size_splits" => Ints, "axis" => Int]));
    let pieces = Arity::AtLeast(2);
    r.add(
        super::math::def("_SplitToShapesOf", "SplitToShapesOf", pieces, infer_split_to_shapes, kernel_split, GpuSupport::None, Some(grad_split_to_shapes))
            .with_attrs(attrs!["axis" => Int]),
    );
    r.add(def("Tile", "Tile", one, infer_tile, kernel_tile, any, Some(grad_tile)).with_attrs(attrs!["multiples" => Ints]));
    r.add(def("ReverseV2", "ReverseV2", one, infer_reverse, kernel_reverse, any, Some(grad_reverse)).with_attrs(attrs!["axis" => Ints]));
    r.add(def("Pad", "Pad", one, infer_pad, kernel_pad, any, Some(grad_pad)).with_attrs(attrs!["paddings" => Ints]));
    r.add(
        def("Squeeze", "Squeeze", one, infer_squeeze, kernel_reshape_like, any, Some(grad_reshape_like))
            .launched_as(GpuLaunch::DeviceHandled)
            .with_attrs(attrs!["squeeze_dims" => Ints]),
    );
    r.add(
        def("ExpandDims", "ExpandDims", one, infer_expand_dims, kernel_reshape_like, any, Some(grad_reshape_like))
            .launched_as(GpuLaunch::DeviceHandled)
            .with_attrs(attrs!["dim" => Int]),
    );
}
