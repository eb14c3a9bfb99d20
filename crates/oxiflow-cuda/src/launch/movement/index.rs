//! Planners of the indexing kernels in `kernels/index.cu` (launched through
//! [`super::launcher`]): `GatherV2`, `GatherNd`, `ScatterNd`, `TensorScatterUpdate`,
//! `TensorScatterAdd`, `TensorScatterSub` (data `f32 f64 i32 i64`,
//! indices `Int32` or `Int64`) and `MatrixDiag`, `MatrixDiagPart` (`f32 f64`). A submodule
//! of [`super`] (`launch::movement::index`).
//!
//! # Out-of-range indices
//!
//! The CPU kernels (`crates/oxiflow-core/src/ops/index.rs`) check every index before they
//! copy and fail with `InvalidArgument` (`indices[1] = 7 is not in [0, 3)`). A launcher
//! cannot do that: the indices live on the device and the stream must not be synchronized.
//! The kernels therefore follow TensorFlow's documented GPU behaviour:
//! - `GatherV2`, `GatherNd`: the output slice of a bad index is zeros
//!   (`tf.gather`: "on GPU, if an out of bound index is found, a 0 is stored in the
//!   corresponding output value");
//! - `ScatterNd`, `TensorScatter*`: the update of a bad index is skipped ("on GPU ... the
//!   index is ignored").
//!
//! A device that wants the CPU's error as well uses [`launch_checked`], which takes the
//! device pointer of one 64-bit word that the device has set to [`NO_BAD_INDEX`]; the
//! kernel lowers it (`atomicMin`) to the position of the first bad
//! index (GatherV2: the element of `indices`; GatherNd/ScatterNd: the row of `indices`
//! viewed as `[rows, k]`). After the stream has run, a word other than [`NO_BAD_INDEX`]
//! names that position; the device reads the `k` index values at element
//! `position * k` of the indices ([`bad_index_row`]) and reports [`bad_index_error`],
//! whose text is the CPU kernel's. The plain launchers ([`super::launcher`]) pass a null
//! pointer (TF's GPU behaviour, nothing recorded).

use super::{arity, check_rank, dtype_in, execute, int_or, invalid, kernel, wide, DevArg, LaunchCtx, Meta, Step};
use crate::error::{CudaError, CudaResult};
use crate::launch::MAX_RANK;
use cudarc::driver::DeviceRepr;
use oxiflow_core::graph::Node;
use oxiflow_core::{DType, OxiflowError, Shape};

/// Data dtypes of the gather/scatter kernels (the core's `GPU_NUMERIC`).
pub const GATHER_DTYPES: &[DType] = &[DType::Float32, DType::Float64, DType::Int32, DType::Int64];
/// Data dtypes of the diagonal kernels (`GPU_FLOATS`).
pub const FLOAT_DTYPES: &[DType] = &[DType::Float32, DType::Float64];
/// Value of the bad-index word before a checked launch: no bad index seen.
pub const NO_BAD_INDEX: u64 = u64::MAX;

/// Enqueues `node` (`GatherV2`, `GatherNd`, `ScatterNd` or a `TensorScatter*`) recording
/// the position of its first bad index into the 64-bit device word at `bad`, which the
/// caller has set to [`NO_BAD_INDEX`] (module docs). Never synchronizes.
pub fn launch_checked(ctx: &LaunchCtx, node: &Node, inputs: &[DevArg], outputs: &[DevArg], bad: u64) -> CudaResult<()> {
    let plan = match node.op.name {
        "GatherV2" => gather_v2,
        "GatherNd" => gather_nd,
        "ScatterNd" => scatter_nd,
        "TensorScatterUpdate" | "TensorScatterAdd" | "TensorScatterSub" => tensor_scatter,
        op => return Err(CudaError::Unsupported(format!("{op} '{}' records no bad indices", node.name))),
    };
    execute(ctx, node, &plan(node, inputs, outputs, bad)?)
}

// ---------------------------------------------------------------- metadata (index.cu)

/// `GatherMeta` of `kernels/index.cu`: params `[outer, n, inner]`, `nidx` indices.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GatherMeta {
    pub outer: i64,
    pub n: i64,
    pub inner: i64,
    pub nidx: i64,
    pub total: i64,
    pub idx64: i32,
    pub wide: i32,
}
// SAFETY: plain `#[repr(C)]` integers, laid out as the CUDA struct.
unsafe impl DeviceRepr for GatherMeta {}

/// `NdMeta` of `kernels/index.cu`: `rows` index rows of `k` entries into the leading `k`
/// dimensions `dims` of a tensor whose trailing slice has `inner` elements.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NdMeta {
    pub dims: [i64; MAX_RANK],
    pub rows: i64,
    pub inner: i64,
    pub total: i64,
    pub k: i32,
    pub idx64: i32,
    pub wide: i32,
    pub _pad: i32,
}
// SAFETY: plain `#[repr(C)]` integers, laid out as the CUDA struct.
unsafe impl DeviceRepr for NdMeta {}

/// `DiagMeta` of `kernels/index.cu`: matrices `rows x cols`, diagonal length `n`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiagMeta {
    pub rows: i64,
    pub cols: i64,
    pub n: i64,
    pub total: i64,
    pub wide: i32,
    pub _pad: i32,
}
// SAFETY: plain `#[repr(C)]` integers, laid out as the CUDA struct.
unsafe impl DeviceRepr for DiagMeta {}

/// `1` for Int64 indices, `0` for Int32, an error otherwise.
fn idx64(node: &Node, idx: &DevArg) -> CudaResult<i32> {
    match idx.dtype {
        DType::Int32 => Ok(0),
        DType::Int64 => Ok(1),
        d => Err(invalid(node, format!("indices must be Int32 or Int64, got {d}"))),
    }
}

/// `(rows, k)` of indices `[..., k]` for GatherNd/ScatterNd, checked against `MAX_RANK`
/// and the indexed tensor's rank.
fn nd_rows(node: &Node, idx: &DevArg, indexed_rank: usize) -> CudaResult<(usize, usize)> {
    let k = idx.dims.last().copied().unwrap_or(0);
    if idx.dims.is_empty() || k == 0 || k > indexed_rank {
        return Err(invalid(node, format!("indices of shape {:?} must have a last dimension in 1..={indexed_rank}", idx.dims)));
    }
    check_rank(node, k)?;
    Ok((idx.len() / k, k))
}

// ---------------------------------------------------------------- GatherV2

/// `GatherV2(params, indices)` along attr `axis` (default 0, modulo the params rank;
/// `batch_dims` 0): output `params.dims[..axis] + indices.dims + params.dims[axis+1..]`,
/// the CPU kernel's copy of `inner`-element runs (TF's `GatherV2`). Bad indices: zeros, and
/// their position recorded at `bad` when it is not 0 (module docs).
pub fn gather_v2(node: &Node, inputs: &[DevArg], outputs: &[DevArg], bad: u64) -> CudaResult<Vec<Step>> {
    arity(node, inputs, outputs, 2, 1)?;
    let (p, idx, y) = (&inputs[0], &inputs[1], &outputs[0]);
    let dtype = dtype_in(node, p, GATHER_DTYPES)?;
    let i64_idx = idx64(node, idx)?;
    let rank = p.dims.len();
    if rank == 0 {
        return Err(invalid(node, "params must have rank >= 1, got a scalar"));
    }
    let axis = super::axis_mod(node, int_or(node, "axis", 0)?, rank)?;
    let outer: usize = p.dims[..axis].iter().product();
    let inner: usize = p.dims[axis + 1..].iter().product();
    let total = outer * idx.len() * inner;
    if total != y.len() {
        return Err(invalid(node, format!("output of shape {:?} does not fit params {:?} gathered by indices {:?}", y.dims, p.dims, idx.dims)));
    }
    let m = GatherMeta {
        outer: outer as i64,
        n: p.dims[axis] as i64,
        inner: inner as i64,
        nidx: idx.len() as i64,
        total: total as i64,
        idx64: i64_idx,
        wide: wide(total.max(p.len()).max(idx.len())),
    };
    Ok(kernel(node, dtype, total, Meta::Gather(m), &[p.ptr, idx.ptr, y.ptr, bad]))
}

// ---------------------------------------------------------------- GatherNd, ScatterNd

/// `GatherNd(params, indices [..., k])`: output `indices.dims[..-1] + params.dims[k..]`,
/// slice `r` is `params[indices[r, 0], ..., indices[r, k-1], ...]` (the CPU kernel's
/// `nd_offsets`; TF's `GatherNd`). Bad rows: zeros, recorded at `bad` when not 0.
pub fn gather_nd(node: &Node, inputs: &[DevArg], outputs: &[DevArg], bad: u64) -> CudaResult<Vec<Step>> {
    arity(node, inputs, outputs, 2, 1)?;
    let (p, idx, y) = (&inputs[0], &inputs[1], &outputs[0]);
    let dtype = dtype_in(node, p, GATHER_DTYPES)?;
    let i64_idx = idx64(node, idx)?;
    let (rows, k) = nd_rows(node, idx, p.dims.len())?;
    let inner: usize = p.dims[k..].iter().product();
    let m = nd_meta(&p.dims[..k], rows, inner, i64_idx, p.len());
    if rows * inner != y.len() {
        return Err(invalid(node, format!("output of shape {:?} does not fit params {:?} gathered by indices {:?}", y.dims, p.dims, idx.dims)));
    }
    Ok(kernel(node, dtype, rows * inner, Meta::Nd(m), &[p.ptr, idx.ptr, y.ptr, bad]))
}

fn nd_meta(lead: &[usize], rows: usize, inner: usize, idx64: i32, other_len: usize) -> NdMeta {
    let mut m = NdMeta {
        rows: rows as i64,
        inner: inner as i64,
        total: (rows * inner) as i64,
        k: lead.len() as i32,
        idx64,
        wide: wide((rows * inner).max(other_len).max(rows * lead.len())),
        ..Default::default()
    };
    for (i, &d) in lead.iter().enumerate() {
        m.dims[i] = d as i64;
    }
    m
}

/// `ScatterNd(indices [..., k], updates)` into zeros of attr `shape` (the node's output):
/// updates of equal index rows are summed (`atomicAdd`; for floats the order of the sum,
/// hence its rounding, is unspecified, as in TF's GPU kernel). The CPU kernel sums in row
/// order. The output is zero-filled with `cuMemsetD8Async` first. Bad rows are skipped and
/// recorded at `bad` when not 0.
pub fn scatter_nd(node: &Node, inputs: &[DevArg], outputs: &[DevArg], bad: u64) -> CudaResult<Vec<Step>> {
    arity(node, inputs, outputs, 2, 1)?;
    let (idx, upd, y) = (&inputs[0], &inputs[1], &outputs[0]);
    let dtype = dtype_in(node, upd, GATHER_DTYPES)?;
    let i64_idx = idx64(node, idx)?;
    let (rows, k) = nd_rows(node, idx, y.dims.len())?;
    let inner: usize = y.dims[k..].iter().product();
    if rows * inner != upd.len() {
        return Err(invalid(node, format!("updates of shape {:?} do not fit indices {:?} into shape {:?}", upd.dims, idx.dims, y.dims)));
    }
    let mut steps = Vec::new();
    if y.num_bytes() > 0 {
        steps.push(Step::Zero { ptr: y.ptr, bytes: y.num_bytes() });
    }
    let m = nd_meta(&y.dims[..k], rows, inner, i64_idx, y.len());
    steps.extend(kernel(node, dtype, rows * inner, Meta::Nd(m), &[idx.ptr, upd.ptr, y.ptr, bad]));
    Ok(steps)
}

/// `TensorScatterUpdate`, `TensorScatterAdd` or `TensorScatterSub(tensor, indices [..., k],
/// updates)`: `tensor` copied to the output (`cuMemcpyDtoDAsync`), then the slice at each
/// index row replaced by (`Update`), increased by (`Add`, `atomicAdd`) or decreased by
/// (`Sub`) the matching slice of `updates` (the CPU kernel's `scatter_into`; TF's
/// `tensor_scatter_nd_*`). Of repeated rows, `Update` keeps one write, unspecified which (TF
/// leaves the order unspecified; the CPU kernel keeps the last); `Add`/`Sub` sum them in an
/// unspecified order. Bad rows are skipped and recorded at `bad` when not 0.
pub fn tensor_scatter(node: &Node, inputs: &[DevArg], outputs: &[DevArg], bad: u64) -> CudaResult<Vec<Step>> {
    arity(node, inputs, outputs, 3, 1)?;
    let (t, idx, upd, y) = (&inputs[0], &inputs[1], &inputs[2], &outputs[0]);
    let dtype = dtype_in(node, t, GATHER_DTYPES)?;
    let i64_idx = idx64(node, idx)?;
    let (rows, k) = nd_rows(node, idx, t.dims.len())?;
    let inner: usize = t.dims[k..].iter().product();
    if rows * inner != upd.len() || y.dims != t.dims {
        return Err(invalid(node, format!("updates of shape {:?} and indices {:?} do not fit a tensor of shape {:?}", upd.dims, idx.dims, t.dims)));
    }
    let mut steps = Vec::new();
    if y.num_bytes() > 0 && y.ptr != t.ptr {
        steps.push(Step::Copy { src: t.ptr, dst: y.ptr, bytes: y.num_bytes() });
    }
    let m = nd_meta(&t.dims[..k], rows, inner, i64_idx, t.len());
    steps.extend(kernel(node, dtype, rows * inner, Meta::Nd(m), &[idx.ptr, upd.ptr, y.ptr, bad]));
    Ok(steps)
}

/// Where the indices of a recorded bad position lie: `(first element, count)` in the
/// indices tensor (`inputs[0]` for `ScatterNd`, `inputs[1]` for the gathers and the
/// `TensorScatter*` ops).
pub fn bad_index_row(node: &Node, inputs: &[DevArg], pos: u64) -> (usize, usize) {
    let idx = if node.op.name == "ScatterNd" { &inputs[0] } else { &inputs[1] };
    let k = if node.op.name == "GatherV2" { 1 } else { idx.dims.last().copied().unwrap_or(1).max(1) };
    (pos as usize * k, k)
}

/// The CPU kernel's error for the bad index row `row` (values read from the device at
/// [`bad_index_row`]) at position `pos`: `InvalidArgument` naming the op and node.
pub fn bad_index_error(node: &Node, inputs: &[DevArg], pos: u64, row: &[i64]) -> OxiflowError {
    let head = format!("{} '{}'", node.op.name, node.name);
    if node.op.name == "GatherV2" {
        let p = &inputs[0].dims;
        let rank = p.len().max(1) as i64;
        let axis = ((int_or(node, "axis", 0).unwrap_or(0) + rank) % rank) as usize;
        let n = p.get(axis).copied().unwrap_or(0);
        let v = row.first().copied().unwrap_or(0);
        return OxiflowError::InvalidArgument(format!("{head}: indices[{pos}] = {v} is not in [0, {n}) (params shape {})", Shape(p.clone())));
    }
    let dims = if node.op.name == "ScatterNd" { node.outputs[0].shape.0.clone() } else { inputs[0].dims.clone() };
    for (j, (&v, &d)) in row.iter().zip(&dims).enumerate() {
        if !(0..d as i64).contains(&v) {
            return OxiflowError::InvalidArgument(format!(
                "{head}: indices[{pos},{j}] = {v} does not index into shape {} (dimension {j} has size {d})",
                Shape(dims.clone())
            ));
        }
    }
    OxiflowError::InvalidArgument(format!("{head}: index row {pos} ({row:?}) is out of range for shape {}", Shape(dims)))
}

// ---------------------------------------------------------------- MatrixDiag, MatrixDiagPart

/// `MatrixDiag(x [..., n]) -> [..., n, n]`: the vectors on the diagonals of zero matrices
/// (the CPU kernel's `Mat::from_fn`; TF's `MatrixDiag` with `k = 0`).
pub fn matrix_diag(node: &Node, inputs: &[DevArg], outputs: &[DevArg], _bad: u64) -> CudaResult<Vec<Step>> {
    arity(node, inputs, outputs, 1, 1)?;
    let (x, y) = (&inputs[0], &outputs[0]);
    let dtype = dtype_in(node, x, FLOAT_DTYPES)?;
    let n = *x.dims.last().ok_or_else(|| invalid(node, "input must be at least 1-dim"))?;
    let total = x.len() * n;
    if total != y.len() {
        return Err(invalid(node, format!("output of shape {:?} does not fit diagonals of shape {:?}", y.dims, x.dims)));
    }
    let m = DiagMeta { rows: n as i64, cols: n as i64, n: n as i64, total: total as i64, wide: wide(total), _pad: 0 };
    Ok(kernel(node, dtype, total, Meta::Diag(m), &[x.ptr, y.ptr]))
}

/// `MatrixDiagPart(x [..., m, n]) -> [..., min(m, n)]`: the main diagonals (the CPU
/// kernel's `m[(i, i)]`; TF's `MatrixDiagPart` with `k = 0`).
pub fn matrix_diag_part(node: &Node, inputs: &[DevArg], outputs: &[DevArg], _bad: u64) -> CudaResult<Vec<Step>> {
    arity(node, inputs, outputs, 1, 1)?;
    let (x, y) = (&inputs[0], &outputs[0]);
    let dtype = dtype_in(node, x, FLOAT_DTYPES)?;
    let r = x.dims.len();
    if r < 2 {
        return Err(invalid(node, format!("input must have rank >= 2, got shape {:?}", x.dims)));
    }
    let (rows, cols) = (x.dims[r - 2], x.dims[r - 1]);
    let n = rows.min(cols);
    let batch: usize = x.dims[..r - 2].iter().product();
    let total = batch * n;
    if total != y.len() {
        return Err(invalid(node, format!("output of shape {:?} does not fit the diagonals of shape {:?}", y.dims, x.dims)));
    }
    let m = DiagMeta { rows: rows as i64, cols: cols as i64, n: n as i64, total: total as i64, wide: wide(x.len().max(total)), _pad: 0 };
    Ok(kernel(node, dtype, total, Meta::Diag(m), &[x.ptr, y.ptr]))
}
