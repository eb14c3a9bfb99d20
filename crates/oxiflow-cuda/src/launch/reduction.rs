//! Launchers of `kernels/reduce.cu`: `Sum`, `Mean`, `Max`, `Min`, `Prod` over the axes of
//! attr `axis`, `ArgMax`/`ArgMin` over one axis, `Softmax` and `SoftmaxCrossEntropyWithLogits`
//! over the last axis.
//!
//! Axis conventions are the CPU kernels' (crates/oxiflow-core/src/ops/{array,reduce}.rs):
//! attr `axis` (ints, negatives from the end; absent or empty means every axis), `keep_dims`
//! only changes the output's shape, not its element order. `ArgMax`/`ArgMin` read one int
//! attr `axis` (default 0) and write the output's dtype (Int64 or Int32, attr
//! `output_type`). The plan (axes merged, one or two passes, block or thread per output)
//! is [`plan_reduction`]; a two-pass plan's partials live in [`LaunchCtx::scratch`].

use super::compute::{expect_io, launch, node_error};
use super::meta::{plan_reduction, RedPlan, RED_MAX_BLOCK};
use super::{entry_name, DevArg, LaunchCtx};
use crate::error::CudaResult;
use cudarc::driver::LaunchConfig;
use oxiflow_core::graph::Node;
use oxiflow_core::ops::AttrsExt;
use oxiflow_core::DType;

/// The reduced axes of `Sum`/`Mean`/`Max`/`Min`/`Prod` for an input of `rank` (array.rs
/// `reduce_axes`): sorted, distinct, negatives normalized, every axis when absent or empty.
pub fn reduce_axes(node: &Node, rank: usize) -> CudaResult<Vec<usize>> {
    let raw = match node.attrs.get("axis") {
        None => Vec::new(),
        Some(_) => node.attrs.get_ints(node.op.name, "axis").map_err(|e| node_error(node, e))?,
    };
    if raw.is_empty() {
        return Ok((0..rank).collect());
    }
    let r = rank as i64;
    let mut axes = Vec::with_capacity(raw.len());
    for a in raw {
        if !(-r..r).contains(&a) {
            return Err(node_error(node, format!("axis {a} is out of range for an input of rank {rank}")));
        }
        axes.push(((a + r) % r) as usize);
    }
    axes.sort_unstable();
    axes.dedup();
    Ok(axes)
}

/// The axis of `ArgMax`/`ArgMin` (reduce.rs `arg_axis`: attr `axis`, default 0).
pub fn arg_axis(node: &Node, rank: usize) -> CudaResult<usize> {
    let a = match node.attrs.get("axis") {
        None => 0,
        Some(_) => node.attrs.get_int(node.op.name, "axis").map_err(|e| node_error(node, e))?,
    };
    let r = rank as i64;
    if (-r..r).contains(&a) {
        Ok(((a + r) % r) as usize)
    } else {
        Err(node_error(node, format!("axis {a} is out of range for an input of rank {rank}")))
    }
}

/// Bytes of one partial of `prefix`'s accumulator (`ArgAcc<T>` of reduce.cu is a value and
/// an i64 index, 16 bytes).
fn acc_bytes(prefix: &str, dtype: DType) -> usize {
    if prefix.starts_with("arg_") {
        16
    } else {
        dtype.size_of()
    }
}

/// Runs a plan: `{prefix}` alone, or `{prefix}_partial` then `{prefix}_finish` through
/// scratch partials.
fn run_plan(ctx: &LaunchCtx, node: &Node, prefix: &str, x: &DevArg, out: &DevArg, plan: &RedPlan) -> CudaResult<()> {
    if plan.first.meta.num_out == 0 {
        return Ok(());
    }
    let Some(second) = plan.second else {
        let meta = plan.first.meta;
        return launch!(ctx, node, prefix, plan.first.config(); x.ptr, out.ptr, meta);
    };
    let bytes = plan.partials() * acc_bytes(prefix, x.dtype);
    let scratch = (ctx.scratch)(bytes)?;
    let part = scratch.ptr();
    let m1 = plan.first.meta;
    launch!(ctx, node, format!("{prefix}_partial"), plan.first.config(); x.ptr, part, m1)?;
    let m2 = second.meta;
    launch!(ctx, node, format!("{prefix}_finish"), second.config(); part, out.ptr, m2)?;
    // `scratch` is dropped here, after both launches are enqueued (stream-ordered free).
    drop(scratch);
    Ok(())
}

/// `Sum`, `Mean`, `Max`, `Min`, `Prod` over attr `axis`: `{op}_{dtype}`.
pub(crate) fn reduce(ctx: &LaunchCtx, node: &Node, inputs: &[DevArg], outputs: &[DevArg]) -> CudaResult<()> {
    expect_io(node, inputs, outputs, 1, 1)?;
    let (x, out) = (&inputs[0], &outputs[0]);
    let axes = reduce_axes(node, x.dims.len())?;
    let plan = plan_reduction(&x.dims, &axes, false)
        .ok_or_else(|| node_error(node, format!("cannot reduce {:?} over {axes:?} in at most {} dims", x.dims, super::MAX_RANK)))?;
    run_plan(ctx, node, &entry_name(node.op.name, x.dtype), x, out, &plan)
}

/// `ArgMax` / `ArgMin` over attr `axis`: `arg_max_{dtype}` with the output's index dtype
/// passed in the metadata. An empty axis is an error, as on the CPU.
pub(crate) fn arg_reduce(ctx: &LaunchCtx, node: &Node, inputs: &[DevArg], outputs: &[DevArg]) -> CudaResult<()> {
    expect_io(node, inputs, outputs, 1, 1)?;
    let (x, out) = (&inputs[0], &outputs[0]);
    let ax = arg_axis(node, x.dims.len())?;
    if x.dims[ax] == 0 {
        return Err(node_error(node, format!("Reduction axis {ax} is empty in shape {:?}", x.dims)));
    }
    let out_i64 = match out.dtype {
        DType::Int64 => true,
        DType::Int32 => false,
        d => return Err(node_error(node, format!("output_type must be Int32 or Int64, got {d}"))),
    };
    let plan = plan_reduction(&x.dims, &[ax], out_i64)
        .ok_or_else(|| node_error(node, format!("cannot reduce {:?} over axis {ax} in at most {} dims", x.dims, super::MAX_RANK)))?;
    run_plan(ctx, node, &entry_name(node.op.name, x.dtype), x, out, &plan)
}

/// `Softmax` over the last axis: `softmax_{dtype}(x, y, rows, len)`, a block per row.
pub(crate) fn softmax(ctx: &LaunchCtx, node: &Node, inputs: &[DevArg], outputs: &[DevArg]) -> CudaResult<()> {
    expect_io(node, inputs, outputs, 1, 1)?;
    let (x, y) = (&inputs[0], &outputs[0]);
    let Some(&last) = x.dims.last() else {
        return Err(node_error(node, "logits must have >= 1 dimension"));
    };
    let n = x.len();
    if n == 0 {
        return Ok(());
    }
    let (rows, len) = ((n / last) as i64, last as i64);
    let block = (last.next_power_of_two() as u32).clamp(32, RED_MAX_BLOCK);
    let grid = (rows as u64).clamp(1, super::meta::MAX_GRID) as u32;
    let cfg = LaunchConfig { grid_dim: (grid, 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: 0 };
    launch!(ctx, node, entry_name("Softmax", x.dtype), cfg; x.ptr, y.ptr, rows, len)
}

/// `SoftmaxCrossEntropyWithLogits` over the last axis:
/// `softmax_cross_entropy_with_logits_{dtype}(x, labels, loss, backprop, rows, len)`, a
/// block per row. Rows of no classes still get their loss (0) written.
pub(crate) fn softmax_xent(ctx: &LaunchCtx, node: &Node, inputs: &[DevArg], outputs: &[DevArg]) -> CudaResult<()> {
    expect_io(node, inputs, outputs, 2, 2)?;
    let (x, labels, loss, bp) = (&inputs[0], &inputs[1], &outputs[0], &outputs[1]);
    let Some((&last, lead)) = x.dims.split_last() else {
        return Err(node_error(node, "logits must have >= 1 dimension"));
    };
    if labels.dims != x.dims {
        return Err(node_error(node, format!("logits of shape {:?} and labels of shape {:?} must have the same shape", x.dims, labels.dims)));
    }
    let rows = lead.iter().product::<usize>() as i64;
    if rows == 0 {
        return Ok(());
    }
    let len = last as i64;
    let block = (last.next_power_of_two() as u32).clamp(32, RED_MAX_BLOCK);
    let grid = (rows as u64).clamp(1, super::meta::MAX_GRID) as u32;
    let cfg = LaunchConfig { grid_dim: (grid, 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: 0 };
    launch!(ctx, node, entry_name("SoftmaxCrossEntropyWithLogits", x.dtype), cfg; x.ptr, labels.ptr, loss.ptr, bp.ptr, rows, len)
}
