//! Scatter updates of dense tensors: `TensorScatterUpdate`, `TensorScatterAdd` and
//! `TensorScatterSub` (TF's `tf.tensor_scatter_nd_update`/`_add`/`_sub`, `array_ops`,
//! gradients as in `array_grad.py`). ADCME's `scatter_update`, `scatter_add` and
//! `scatter_sub` build them.
//!
//! Inputs: `tensor` (any numeric dtype, rank >= 1), `indices` (`Int32` or `Int64`, shape
//! `[d_0, ..., d_{q-2}, k]` with `1 <= k <= rank(tensor)`, 0-based) and `updates` (the
//! tensor's dtype, shape `[d_0, ..., d_{q-2}] ++ shape(tensor)[k..]`). The output is a copy
//! of `tensor` with the slice at each index row replaced by (`Update`), increased by
//! (`Add`) or decreased by (`Sub`) the matching slice of `updates`. Repeated indices add up
//! for `Add` and `Sub`; for `Update` the last one wins (TF leaves the order unspecified).
//! An index out of range is an `InvalidArgument` error naming the node and the index,
//! raised when the kernel runs.
//!
//! GPU kernels (`kernels/index.cu`) for Float32/Float64/Int32/Int64: the tensor copied,
//! then each row's slice written; of repeated rows `Update` keeps one write, unspecified
//! which, and an index out of range is skipped, as TF's GPU kernels do (the CPU kernel
//! keeps the last write and raises the error).

use super::math::{def, require_numeric, Arith};
use super::*;
use crate::graph::NodeSpec;
use ndarray::{ArcArray, IxDyn};

/// How a scatter combines the tensor's element with the update.
#[derive(Copy, Clone)]
enum Combine {
    Update,
    Add,
    Sub,
}

impl Combine {
    fn of(op: &str) -> Combine {
        match op {
            "TensorScatterAdd" => Combine::Add,
            "TensorScatterSub" => Combine::Sub,
            _ => Combine::Update,
        }
    }
}

fn infer_tensor_scatter(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let (t, idx, upd) = (&ctx.inputs[0], &ctx.inputs[1], &ctx.inputs[2]);
    require_numeric(ctx, t.dtype)?;
    super::index::require_index(ctx, idx, "indices")?;
    if upd.dtype != t.dtype {
        return Err(ctx.invalid(format!("updates must have the tensor's dtype {}, got {}", t.dtype, upd.dtype)));
    }
    let k = idx.shape.dims().last().copied().unwrap_or(0);
    if t.shape.rank() == 0 || idx.shape.rank() == 0 || k == 0 || k > t.shape.rank() {
        return Err(ctx.shape_error(&t.shape, &idx.shape, " (tensor must have rank >= 1, indices rank >= 1 and a last dimension in 1..=rank(tensor))"));
    }
    let want = Shape(idx.shape.0[..idx.shape.rank() - 1].iter().chain(&t.shape.0[k..]).copied().collect());
    if upd.shape != want {
        return Err(ctx.shape_error(&want, &upd.shape, format!(" (updates for indices of shape {} into a tensor of shape {})", idx.shape, t.shape)));
    }
    Ok(vec![t.clone()])
}

/// Combines each index row's slice of `src` (row-major updates) into `dst` (the row-major
/// tensor's elements), `inner` elements a slice, at the row offsets `offs`.
fn scatter_into<T: Arith>(dst: &mut [T], src: &[T], offs: &[usize], inner: usize, how: Combine) {
    if inner == 1 {
        // one element per index (a vector, or every index dimension given): indexed
        // updates, not one-element slices
        match how {
            Combine::Update => offs.iter().zip(src).for_each(|(&o, &s)| dst[o] = s),
            Combine::Add => offs.iter().zip(src).for_each(|(&o, &s)| dst[o] = T::add(dst[o], s)),
            Combine::Sub => offs.iter().zip(src).for_each(|(&o, &s)| dst[o] = T::sub(dst[o], s)),
        }
        return;
    }
    for (row, &o) in offs.iter().enumerate() {
        let (d, s) = (&mut dst[o * inner..(o + 1) * inner], &src[row * inner..(row + 1) * inner]);
        match how {
            Combine::Update => d.copy_from_slice(s),
            Combine::Add => d.iter_mut().zip(s).for_each(|(d, &s)| *d = T::add(*d, s)),
            Combine::Sub => d.iter_mut().zip(s).for_each(|(d, &s)| *d = T::sub(*d, s)),
        }
    }
}

/// The scatter of `ctx`'s node into `t` (input 0's value, owned): in `t`'s own buffer when
/// nothing else holds it and it is row-major (TF's `forward_input`), else into a row-major
/// copy. Errors: an index out of range, naming the node; `t` is then dropped unchanged.
fn scatter_owned<T: Arith>(ctx: &KernelCtx, mut t: ArcArray<T, IxDyn>, idx: &[i64], k: usize, how: Combine) -> Result<Tensor> {
    let upd = T::view(&ctx.inputs[2]).ok_or_else(|| ctx.error("updates must have the tensor's dtype"))?;
    let offs = super::index::nd_offsets(ctx, idx, k, t.shape())?;
    let inner: usize = t.shape()[k..].iter().product();
    if !t.is_standard_layout() {
        t = t.as_standard_layout().into_owned().into_shared();
    }
    let src_std = upd.as_standard_layout();
    let src = src_std.as_slice().expect("standard layout");
    // copies the elements only when another tensor shares them (ArcArray's copy on write)
    let dst = t.as_slice_mut().expect("standard layout");
    scatter_into(dst, src, &offs, inner, how);
    Ok(T::wrap(t))
}

fn kernel_tensor_scatter(ctx: &KernelCtx) -> Result<Outputs> {
    let k = *ctx.inputs[1].dims().last().unwrap_or(&0);
    let idx = super::index::index_values(&ctx.inputs[1]);
    let how = Combine::of(ctx.node.op.name);
    // a clone of input 0 shares its buffer, so the scatter writes into a copy
    Ok(smallvec![for_numeric!(ctx, &ctx.inputs[0], |a| scatter_owned(ctx, a.clone(), &idx, k, how)?)])
}

/// The scatter ops' kernel for a caller that owns the inputs and reads input 0 for the last
/// time (a `while_loop` body, [`crate::function::Function`]): input 0 is taken out of
/// `inputs`, so when nothing else holds its buffer the scatter updates it in place instead
/// of copying the whole tensor, as TF's kernels forward their input. A `TensorArray`
/// written once per iteration then costs O(element) per write, not O(array).
pub fn kernel_tensor_scatter_owned(node: &Node, inputs: &mut [Tensor], state: &dyn StateAccess) -> Result<Outputs> {
    let t = std::mem::replace(&mut inputs[0], Tensor::scalar(0i32));
    let ctx = KernelCtx { node, inputs, state };
    let k = *ctx.inputs[1].dims().last().unwrap_or(&0);
    let idx = super::index::index_values(&ctx.inputs[1]);
    let how = Combine::of(node.op.name);
    let out = match t {
        Tensor::F32(a) => scatter_owned(&ctx, a, &idx, k, how)?,
        Tensor::F64(a) => scatter_owned(&ctx, a, &idx, k, how)?,
        Tensor::I32(a) => scatter_owned(&ctx, a, &idx, k, how)?,
        Tensor::I64(a) => scatter_owned(&ctx, a, &idx, k, how)?,
        other => return Err(ctx.error(format!("tensor must be numeric and on the host, got {}", other.dtype()))),
    };
    Ok(smallvec![out])
}

/// [`kernel_tensor_scatter_owned`] for the scatter ops ([`super::owned_kernel`]).
pub(super) fn owned_kernel(op: &OpDef) -> Option<OwnedKernelFn> {
    is_scatter(op.name).then_some(kernel_tensor_scatter_owned as OwnedKernelFn)
}

/// Whether `op` is one of the scatter ops.
pub(crate) fn is_scatter(op: &str) -> bool {
    matches!(op, "TensorScatterUpdate" | "TensorScatterAdd" | "TensorScatterSub")
}

/// What a scatter overwrote: the old slices and where they were, to put back. The loop
/// gradient (`WhileGrad`, functional.rs) keeps one per write instead of a copy of the
/// written tensor per iteration, and rebuilds each iteration's tensor from the loop's final
/// one, last write first ([`scatter_restore`]).
#[derive(Debug)]
pub(crate) struct ScatterUndo {
    /// Row-major offset of each slice, in slices of `inner` elements.
    offs: Vec<usize>,
    inner: usize,
    /// The old slices, one after another (a vector of `offs.len() * inner` elements).
    pub(crate) old: Tensor,
}

/// What the scatters of one function call overwrote: per scatter node, in the order they
/// ran, its [`ScatterUndo`].
pub(crate) type UndoLog = Vec<(crate::graph::NodeId, ScatterUndo)>;

fn gather_slices<T: Arith>(a: &ArcArray<T, IxDyn>, offs: &[usize], inner: usize) -> Tensor {
    let std = a.as_standard_layout();
    let src = std.as_slice().expect("standard layout");
    let mut out = Vec::with_capacity(offs.len() * inner);
    for &o in offs {
        out.extend_from_slice(&src[o * inner..(o + 1) * inner]);
    }
    T::wrap(ndarray::Array1::from(out).into_dyn().into_shared())
}

/// The [`ScatterUndo`] of scatter node `node` about to run on `inputs` (tensor, indices,
/// updates). Errors: an index out of range, naming the node, as the scatter raises it; a
/// tensor that is not numeric or not on the host.
pub(crate) fn scatter_undo(node: &Node, inputs: &[Tensor], state: &dyn StateAccess) -> Result<ScatterUndo> {
    let ctx = KernelCtx { node, inputs, state };
    let (t, indices) = (&inputs[0], &inputs[1]);
    let k = *indices.dims().last().unwrap_or(&0);
    let offs = super::index::nd_offsets(&ctx, &super::index::index_values(indices), k, t.dims())?;
    let inner = t.dims()[k.min(t.dims().len())..].iter().product();
    let old = match t {
        Tensor::F32(a) => gather_slices(a, &offs, inner),
        Tensor::F64(a) => gather_slices(a, &offs, inner),
        Tensor::I32(a) => gather_slices(a, &offs, inner),
        Tensor::I64(a) => gather_slices(a, &offs, inner),
        other => return Err(ctx.error(format!("tensor must be numeric and on the host, got {}", other.dtype()))),
    };
    Ok(ScatterUndo { offs, inner, old })
}

/// `t` (a scatter's output) with the slices of `u` put back: the scatter's input. Updates
/// `t`'s buffer when nothing else holds it, else a copy. Errors (Internal): `t` of another
/// dtype than the slices.
pub(crate) fn scatter_restore(t: Tensor, u: &ScatterUndo) -> Result<Tensor> {
    fn go<T: Arith>(mut t: ArcArray<T, IxDyn>, u: &ScatterUndo) -> Result<Tensor> {
        let old = T::view(&u.old).ok_or_else(|| OxiflowError::Internal("scatter undo: dtype changed".into()))?;
        if !t.is_standard_layout() {
            t = t.as_standard_layout().into_owned().into_shared();
        }
        scatter_into(t.as_slice_mut().expect("standard layout"), old.as_slice().expect("a vector"), &u.offs, u.inner, Combine::Update);
        Ok(T::wrap(t))
    }
    match t {
        Tensor::F32(a) => go(a, u),
        Tensor::F64(a) => go(a, u),
        Tensor::I32(a) => go(a, u),
        Tensor::I64(a) => go(a, u),
        other => Err(OxiflowError::Internal(format!("scatter undo: a {} tensor", other.dtype()))),
    }
}

/// TF `_TensorScatterUpdateGrad`, `_TensorScatterAddGrad`, `_TensorScatterSubGrad`: the
/// updates get `GatherNd(dy, indices)` (negated for `Sub`); the tensor gets `dy`, with the
/// updated slices zeroed for `Update` (`TensorScatterUpdate(dy, indices, zeros)`), whose
/// old values did not reach the output. No gradient for the indices.
fn grad_tensor_scatter(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None, None, None]) };
    let (indices, updates) = (node.inputs[1], node.inputs[2]);
    let gathered = g.op("GatherNd", &[dy, indices])?;
    let (dt, du) = match Combine::of(node.op.name) {
        Combine::Update => {
            let zeros = g.op("ZerosLike", &[updates])?;
            (g.op_spec(NodeSpec::new("TensorScatterUpdate", &[dy, indices, zeros]))?, gathered)
        }
        Combine::Add => (dy, gathered),
        Combine::Sub => (dy, g.op("Neg", &[gathered])?),
    };
    Ok(vec![Some(dt), None, Some(du)])
}

pub(crate) fn register(r: &mut Registry) {
    let three = Arity::Fixed(3);
    for (name, default_name) in
        [("TensorScatterUpdate", "TensorScatterUpdate"), ("TensorScatterAdd", "TensorScatterAdd"), ("TensorScatterSub", "TensorScatterSub")]
    {
        r.add(
            def(name, default_name, three, infer_tensor_scatter, kernel_tensor_scatter, super::index::GPU_NUMERIC, Some(grad_tensor_scatter))
                .launched_as(GpuLaunch::Movement),
        );
    }
}
