//! Launchers of the data-movement kernels in `kernels/shape.cu`: `Transpose`, `ConcatV2`,
//! `Pack`, `Unpack`, `SplitV`, `Tile`, `ReverseV2`, `Pad`, `StridedSlice`,
//! `StridedSliceGrad` (every dtype: `f32 f64 i32 i64 bool`), and, through [`index`], the
//! indexing kernels of `kernels/index.cu` (`GatherV2`, `GatherNd`, `ScatterNd`,
//! `TensorScatterUpdate`/`Add`/`Sub`, `MatrixDiag`, `MatrixDiagPart`).
//!
//! Each launcher reads its parameters exactly as the op's CPU kernel does
//! (`crates/oxiflow-core/src/ops/shape_ops.rs`, `ops/index.rs`): in Oxiflow `perm`, `axis`,
//! `multiples`, `paddings`, `size_splits` and `begin`/`end`/`strides` are node attributes
//! (shapes are static), so no launcher needs the value of a device tensor on the host and
//! none synchronizes the stream. Output shapes come from `node.outputs`, as on the CPU.
//!
//! Shape metadata travels by value in `#[repr(C)]` structs mirrored field for field in the
//! `.cu` files (the compile test checks each struct's size against the PTX parameter
//! list). Launches use [`BLOCK`]-thread blocks and at most [`MAX_GRID`] blocks; the kernels
//! loop over the rest (grid-stride loops). Nothing is launched for an empty output.
//! Transpose, ReverseV2 and StridedSlice drop size-1 axes and merge axes that stay
//! contiguous ([`gather_meta`]); a tensor whose remaining rank is above
//! [`MAX_RANK`](crate::launch::MAX_RANK) is refused with
//! [`CudaError::Unsupported`](crate::CudaError::Unsupported) (the placer does not know
//! this limit).
//!
//! Launching is split in two: a [`Planner`] turns the node and its tensors into [`Step`]s
//! (pure host code, checked without a GPU by emulating the kernels on the host in the unit
//! tests), and [`execute`] enqueues them.

use super::{entry_name, DevArg, LaunchCtx, Launcher};
use crate::error::CudaResult;
use oxiflow_core::graph::Node;
use oxiflow_core::DType;

pub mod index;
pub mod plan;
pub use plan::*;

#[cfg(test)]
mod tests;

/// Threads per block of every movement kernel.
pub const BLOCK: u32 = 256;
/// Most blocks in a launch; grid-stride loops cover larger tensors.
pub const MAX_GRID: u32 = 65535;
/// Most tensors joined or cut by one launch ([`PiecesMeta`]); more take several launches.
pub const MAX_PIECES: usize = 32;
/// The dtypes of the `GpuSupport::Any` layout ops.
pub const ALL_DTYPES: &[DType] = &[DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool];

/// Computes the launches of one node without touching the device: `(node, inputs,
/// outputs, bad)` -> the [`Step`]s to enqueue in order. `bad` is the bad-index word of
/// [`index`]'s checked launches (ignored by every other op; `0`: none).
pub type Planner = fn(&Node, &[DevArg], &[DevArg], u64) -> CudaResult<Vec<Step>>;

macro_rules! family {
    ($($op:literal => $plan:path),* $(,)?) => {
        /// The planner of `op`, if it is one of this family's (here or in [`index`]).
        pub fn planner(op: &str) -> Option<Planner> {
            match op {
                $($op => Some($plan),)*
                _ => None,
            }
        }

        /// The launcher of `op`, if it is one of this family's (here or in [`index`]): its
        /// [`Planner`] (no bad-index word) followed by [`execute`].
        pub fn launcher(op: &str) -> Option<Launcher> {
            match op {
                $($op => {
                    fn run(ctx: &LaunchCtx, node: &Node, inputs: &[DevArg], outputs: &[DevArg]) -> CudaResult<()> {
                        execute(ctx, node, &$plan(node, inputs, outputs, 0)?)
                    }
                    Some(run as Launcher)
                })*
                _ => None,
            }
        }
    };
}

family! {
    "Transpose" => transpose,
    "ConcatV2" => concat_v2,
    "Pack" => pack,
    "Unpack" => unpack,
    "SplitV" => split_v,
    "Tile" => tile,
    "ReverseV2" => reverse_v2,
    "Pad" => pad,
    "StridedSlice" => strided_slice,
    "StridedSliceGrad" => strided_slice_grad,
    "GatherV2" => index::gather_v2,
    "GatherNd" => index::gather_nd,
    "ScatterNd" => index::scatter_nd,
    "TensorScatterUpdate" => index::tensor_scatter,
    "TensorScatterAdd" => index::tensor_scatter,
    "TensorScatterSub" => index::tensor_scatter,
    "MatrixDiag" => index::matrix_diag,
    "MatrixDiagPart" => index::matrix_diag_part,
}

// ---------------------------------------------------------------- Transpose, ReverseV2

/// `Transpose(x, perm)`: `y[i_0..] = x[...]` with `y.dims[i] = x.dims[perm[i]]`; the CPU
/// kernel's `permuted_axes(perm)` (TF's `Transpose`). Attr `perm`. A transpose that (after
/// merging axes) swaps the last two axes of `[batch, rows, cols]` uses the tiled helper
/// entry `transpose_{dtype}_tiled` ([`as_swap`]); others the strided gather. For the tiled
/// step, `total` counts tiles.
pub fn transpose(node: &Node, inputs: &[DevArg], outputs: &[DevArg], _bad: u64) -> CudaResult<Vec<Step>> {
    arity(node, inputs, outputs, 1, 1)?;
    let (x, y) = (&inputs[0], &outputs[0]);
    let dtype = dtype_in(node, x, ALL_DTYPES)?;
    let perm = ints(node, "perm")?;
    if perm.len() != x.dims.len() || perm.iter().any(|&p| p < 0 || p as usize >= x.dims.len()) {
        return Err(invalid(node, format!("perm {perm:?} is not a permutation of the axes of shape {:?}", x.dims)));
    }
    let s = strides(&x.dims);
    let axes: Vec<(usize, i64)> = perm.iter().map(|&p| (x.dims[p as usize], s[p as usize])).collect();
    let m = gather_meta(node, &axes, 0, x.len())?;
    match as_swap(&m) {
        Some(sw) => {
            let tiles = (sw.batch * sw.tiles_r * sw.tiles_c) as usize;
            let entry = format!("{}_tiled", entry_name(node.op.name, dtype));
            Ok(vec![Step::Kernel { entry, total: tiles, meta: Meta::Swap(sw), ptrs: vec![x.ptr, y.ptr] }])
        }
        None => map_step(node, dtype, m, x, y),
    }
}

/// `ReverseV2(x)` along the axes of attr `axis` (negatives from the end): the CPU kernel's
/// `invert_axis` per listed axis (TF's `ReverseV2`). Read with negative strides.
pub fn reverse_v2(node: &Node, inputs: &[DevArg], outputs: &[DevArg], _bad: u64) -> CudaResult<Vec<Step>> {
    arity(node, inputs, outputs, 1, 1)?;
    let (x, y) = (&inputs[0], &outputs[0]);
    let dtype = dtype_in(node, x, ALL_DTYPES)?;
    let rank = x.dims.len();
    let mut flip = vec![false; rank];
    for a in ints(node, "axis")? {
        let ax = axis_mod(node, a, rank)?;
        flip[ax] = !flip[ax];
    }
    let s = strides(&x.dims);
    let mut base = 0i64;
    let mut axes = Vec::with_capacity(rank);
    for d in 0..rank {
        if flip[d] && x.dims[d] > 0 {
            axes.push((x.dims[d], -s[d]));
            base += (x.dims[d] as i64 - 1) * s[d];
        } else {
            axes.push((x.dims[d], s[d]));
        }
    }
    map_step(node, dtype, gather_meta(node, &axes, base, x.len())?, x, y)
}

// ---------------------------------------------------------------- Tile, Pad

/// `Tile(x, multiples)`: `y.dims[d] = x.dims[d] * multiples[d]`,
/// `y[c] = x[c mod x.dims]` (the CPU kernel's repeated concatenation; TF's `Tile`).
pub fn tile(node: &Node, inputs: &[DevArg], outputs: &[DevArg], _bad: u64) -> CudaResult<Vec<Step>> {
    arity(node, inputs, outputs, 1, 1)?;
    let (x, y) = (&inputs[0], &outputs[0]);
    let dtype = dtype_in(node, x, ALL_DTYPES)?;
    check_rank(node, x.dims.len())?;
    if y.dims.len() != x.dims.len() {
        return Err(invalid(node, format!("output shape {:?} does not have the rank of the input {:?}", y.dims, x.dims)));
    }
    let s = strides(&x.dims);
    let mut m = MapMeta::new(&y.dims, x.len());
    for (d, (&n, &st)) in x.dims.iter().zip(&s).enumerate() {
        m.in_dims[d] = n as i64;
        m.in_strides[d] = st;
    }
    map_step(node, dtype, m, x, y)
}

/// `Pad(x, paddings)` with zeros: attr `paddings` is flat `[b0, a0, b1, a1, ...]`;
/// `y.dims[d] = b_d + x.dims[d] + a_d` (the CPU kernel; TF's `Pad` with constant 0).
pub fn pad(node: &Node, inputs: &[DevArg], outputs: &[DevArg], _bad: u64) -> CudaResult<Vec<Step>> {
    arity(node, inputs, outputs, 1, 1)?;
    let (x, y) = (&inputs[0], &outputs[0]);
    let dtype = dtype_in(node, x, ALL_DTYPES)?;
    let rank = x.dims.len();
    check_rank(node, rank)?;
    let p = ints(node, "paddings")?;
    if p.len() != 2 * rank || p.iter().any(|&v| v < 0) || y.dims.len() != rank {
        return Err(invalid(node, format!("paddings {p:?} must hold non-negative (before, after) pairs, one per dimension of shape {:?}", x.dims)));
    }
    let s = strides(&x.dims);
    let mut m = MapMeta::new(&y.dims, x.len());
    for d in 0..rank {
        m.in_dims[d] = x.dims[d] as i64;
        m.in_strides[d] = s[d];
        m.start[d] = p[2 * d];
    }
    map_step(node, dtype, m, x, y)
}

// ---------------------------------------------------------------- StridedSlice

/// One canonical dimension of a strided slice: the CPU kernel's own type.
pub use oxiflow_core::ops::index::DimSlice;

/// TF's canonicalization of attrs `begin`/`end`/`strides` with `begin_mask`, `end_mask`
/// and `shrink_axis_mask` over `shape`: the CPU kernel's `slice_spec` itself, its errors
/// naming the node (`ellipsis_mask` and `new_axis_mask` unsupported there and here).
pub fn slice_spec(node: &Node, shape: &[usize]) -> CudaResult<Vec<DimSlice>> {
    oxiflow_core::ops::index::slice_spec(&node.attrs, node.op.name, &oxiflow_core::Shape(shape.to_vec())).map_err(|m| invalid(node, m))
}

/// `StridedSlice(x)`: `y` holds `x[start_d + k_d * step_d]` per dimension, shrunk
/// dimensions dropped (the CPU kernel's `slice_each_axis` + reshape; TF's `StridedSlice`).
/// Attrs as [`slice_spec`].
pub fn strided_slice(node: &Node, inputs: &[DevArg], outputs: &[DevArg], _bad: u64) -> CudaResult<Vec<Step>> {
    arity(node, inputs, outputs, 1, 1)?;
    let (x, y) = (&inputs[0], &outputs[0]);
    let dtype = dtype_in(node, x, ALL_DTYPES)?;
    let spec = slice_spec(node, &x.dims)?;
    let full: Vec<usize> = spec.iter().map(|s| s.len).collect();
    if full.iter().product::<usize>() != y.len() {
        return Err(invalid(node, format!("slice of {} elements does not fill the output of shape {:?}", full.iter().product::<usize>(), y.dims)));
    }
    let s = strides(&x.dims);
    let axes: Vec<(usize, i64)> = spec.iter().zip(&s).map(|(sl, &st)| (sl.len, st * sl.step)).collect();
    let base = if y.is_empty() { 0 } else { spec.iter().zip(&s).map(|(sl, &st)| sl.start * st).sum() };
    map_step(node, dtype, gather_meta(node, &axes, base, x.len())?, x, y)
}

/// `StridedSliceGrad(dy[, x])`: zeros of the node's output shape with `dy` written at
/// the positions [`strided_slice`] reads (the CPU kernel's zero fill + `assign`; TF's
/// `StridedSliceGrad`). One pass over the output.
pub fn strided_slice_grad(node: &Node, inputs: &[DevArg], outputs: &[DevArg], _bad: u64) -> CudaResult<Vec<Step>> {
    // a second input (the sliced tensor, for its run-time shape) is not read
    arity(node, &inputs[..inputs.len().min(1)], outputs, 1, 1)?;
    let (dy, y) = (&inputs[0], &outputs[0]);
    let dtype = dtype_in(node, dy, ALL_DTYPES)?;
    check_rank(node, y.dims.len())?;
    let spec = slice_spec(node, &y.dims)?;
    let full: Vec<usize> = spec.iter().map(|s| s.len).collect();
    if full.iter().product::<usize>() != dy.len() {
        return Err(invalid(node, format!("gradient of shape {:?} does not match the slice {full:?}", dy.dims)));
    }
    let ds = strides(&full);
    let mut m = MapMeta::new(&y.dims, dy.len());
    for (d, sl) in spec.iter().enumerate() {
        m.in_dims[d] = sl.len as i64;
        m.in_strides[d] = ds[d];
        m.start[d] = sl.start;
        m.step[d] = sl.step;
    }
    map_step(node, dtype, m, dy, y)
}

// ---------------------------------------------------------------- joins and cuts

/// Steps joining `parts` (pointer, columns per row) into `whole` viewed as `[outer, row]`
/// (`concat_v2_*`, `pack_*`) or cutting them from it (`split_v_*`, `unpack_*`; the entry
/// decides the direction), [`MAX_PIECES`] parts per launch; empty parts are skipped.
fn pieces(node: &Node, dtype: DType, whole: &DevArg, outer: usize, row: usize, parts: &[(u64, usize)]) -> CudaResult<Vec<Step>> {
    if outer * row != whole.len() || parts.iter().map(|p| p.1).sum::<usize>() != row {
        return Err(invalid(node, format!("pieces of {row} columns in {outer} rows do not make the tensor of shape {:?}", whole.dims)));
    }
    let nonempty: Vec<(u64, usize)> = parts.iter().filter(|p| p.1 > 0).copied().collect();
    let mut steps = Vec::new();
    let mut col = 0usize;
    for chunk in nonempty.chunks(MAX_PIECES) {
        let mut m = PiecesMeta {
            ptrs: [0; MAX_PIECES],
            offs: [0; MAX_PIECES + 1],
            outer: outer as i64,
            row: row as i64,
            col0: col as i64,
            n: chunk.len() as i32,
            wide: wide(whole.len()),
        };
        let mut w = 0usize;
        for (i, &(p, cols)) in chunk.iter().enumerate() {
            m.ptrs[i] = p;
            m.offs[i] = w as i64;
            w += cols;
        }
        m.offs[chunk.len()] = w as i64;
        steps.extend(kernel(node, dtype, outer * w, Meta::Pieces(m), &[whole.ptr]));
        col += w;
    }
    Ok(steps)
}

/// Product of `dims[from..]` (1 past the end).
fn tail(dims: &[usize], from: usize) -> usize {
    dims.get(from..).map_or(1, |d| d.iter().product())
}

/// `ConcatV2(xs)` along attr `axis` (taken modulo the output rank as the CPU kernel does):
/// `ndarray::concatenate` / TF's `ConcatV2`. All inputs share the dtype.
pub fn concat_v2(node: &Node, inputs: &[DevArg], outputs: &[DevArg], _bad: u64) -> CudaResult<Vec<Step>> {
    arity(node, inputs, outputs, inputs.len().max(1), 1)?;
    let y = &outputs[0];
    let dtype = dtype_in(node, &inputs[0], ALL_DTYPES)?;
    let axis = axis_mod(node, int(node, "axis")?, y.dims.len())?;
    let outer: usize = y.dims[..axis.min(y.dims.len())].iter().product();
    let parts = inputs
        .iter()
        .map(|x| {
            if x.dtype == dtype && x.dims.len() == y.dims.len() {
                Ok((x.ptr, tail(&x.dims, axis)))
            } else {
                Err(invalid(node, "inputs must share the output's dtype and rank"))
            }
        })
        .collect::<CudaResult<Vec<_>>>()?;
    pieces(node, dtype, y, outer, tail(&y.dims, axis), &parts)
}

/// `Pack(xs)` along attr `axis` (default 0, modulo the output rank): `ndarray::stack` /
/// TF's `Pack`; each input of shape `s` fills one index of the new axis.
pub fn pack(node: &Node, inputs: &[DevArg], outputs: &[DevArg], _bad: u64) -> CudaResult<Vec<Step>> {
    arity(node, inputs, outputs, inputs.len().max(1), 1)?;
    let y = &outputs[0];
    let dtype = dtype_in(node, &inputs[0], ALL_DTYPES)?;
    let axis = axis_mod(node, int_or(node, "axis", 0)?, y.dims.len())?;
    let s = &inputs[0].dims;
    let outer: usize = s[..axis.min(s.len())].iter().product();
    let inner = tail(s, axis);
    let parts = inputs
        .iter()
        .map(|x| if x.dtype == dtype && x.dims == *s { Ok((x.ptr, inner)) } else { Err(invalid(node, "stacked tensors must share dtype and shape")) })
        .collect::<CudaResult<Vec<_>>>()?;
    pieces(node, dtype, y, outer, inner * inputs.len(), &parts)
}

/// `Unpack(x)` along attr `axis` (default 0, modulo the input rank): one output per index
/// of the axis (`index_axis` / TF's `Unpack`).
pub fn unpack(node: &Node, inputs: &[DevArg], outputs: &[DevArg], _bad: u64) -> CudaResult<Vec<Step>> {
    arity(node, inputs, outputs, 1, outputs.len())?;
    let x = &inputs[0];
    let dtype = dtype_in(node, x, ALL_DTYPES)?;
    let axis = axis_mod(node, int_or(node, "axis", 0)?, x.dims.len())?;
    if x.dims.is_empty() || outputs.len() != x.dims[axis] {
        return Err(invalid(node, format!("{} outputs for unstacking shape {:?} along axis {axis}", outputs.len(), x.dims)));
    }
    let outer: usize = x.dims[..axis].iter().product();
    let inner = tail(&x.dims, axis + 1);
    let parts: Vec<(u64, usize)> = outputs.iter().map(|o| (o.ptr, inner)).collect();
    pieces(node, dtype, x, outer, inner * outputs.len(), &parts)
}

/// `SplitV(x)` along attr `axis` (modulo the input rank) into the node's outputs, whose
/// sizes along the axis come from `node.outputs` as on the CPU (TF's `SplitV`).
pub fn split_v(node: &Node, inputs: &[DevArg], outputs: &[DevArg], _bad: u64) -> CudaResult<Vec<Step>> {
    arity(node, inputs, outputs, 1, outputs.len())?;
    let x = &inputs[0];
    let dtype = dtype_in(node, x, ALL_DTYPES)?;
    let axis = axis_mod(node, int(node, "axis")?, x.dims.len())?;
    if x.dims.is_empty() {
        return Err(invalid(node, "cannot split a scalar"));
    }
    let outer: usize = x.dims[..axis].iter().product();
    let inner = tail(&x.dims, axis + 1);
    let parts: Vec<(u64, usize)> = outputs.iter().map(|o| (o.ptr, o.dims.get(axis).copied().unwrap_or(0) * inner)).collect();
    pieces(node, dtype, x, outer, tail(&x.dims, axis), &parts)
}
