//! Launchers of the compute kernels: the unary family (`kernels/elementwise.cu`), the
//! broadcasting binary family (arithmetic and comparisons), and the ops with launchers of
//! their own (`GpuLaunch::Own`): `LeakyRelu`, `Cast`, `OnesLike`/`ZerosLike`
//! (`elementwise.cu`), `SelectV2`, `BroadcastTo`, `AddN` (`binary.cu`), `Softmax` and
//! `SoftmaxCrossEntropyWithLogits` ([`super::reduction`]).
//!
//! Attributes are read from `node.attrs` exactly as the CPU kernels in
//! `crates/oxiflow-core/src/ops/` read them; shapes come from the [`DevArg`]s (the
//! device's tensors) and the node's static output types.

use super::meta::{grid_1d, grid_unrolled, BcastMeta, Ptrs8};
use super::{entry_name, reduction, DevArg, LaunchCtx, Launcher};
use crate::error::{CudaError, CudaResult};
use oxiflow_core::graph::Node;
use oxiflow_core::ops::AttrsExt;

/// The launcher of an op launched as `GpuLaunch::Own`, by op type.
pub(crate) fn own_launcher(op: &str) -> Option<Launcher> {
    Some(match op {
        "LeakyRelu" => leaky_relu,
        "OnesLike" | "ZerosLike" => fill_like,
        "Cast" => cast,
        "SelectV2" => select_v2,
        "BroadcastTo" => broadcast_to,
        "AddN" => add_n,
        "Softmax" => reduction::softmax,
        "SoftmaxCrossEntropyWithLogits" => reduction::softmax_xent,
        _ => return None,
    })
}

// ------------------------------------------------------------------ shared helpers

/// [`CudaError::Unsupported`] naming the node: `Sin 'sin_1': <msg>`.
pub(crate) fn node_error(node: &Node, msg: impl std::fmt::Display) -> CudaError {
    CudaError::Unsupported(format!("{} '{}': {msg}", node.op.name, node.name))
}

/// Errors unless the launcher got `n_in` inputs and `n_out` outputs.
pub(crate) fn expect_io(node: &Node, inputs: &[DevArg], outputs: &[DevArg], n_in: usize, n_out: usize) -> CudaResult<()> {
    if inputs.len() != n_in || outputs.len() != n_out {
        return Err(node_error(node, format!("the CUDA launcher expects {n_in} inputs and {n_out} outputs, got {} and {}", inputs.len(), outputs.len())));
    }
    Ok(())
}

/// A failed `cuLaunchKernel`, naming the device, the entry and the node.
pub(crate) fn launch_error(ctx: &LaunchCtx, node: &Node, entry: &str, e: cudarc::driver::DriverError) -> CudaError {
    CudaError::Driver { device: ctx.device.to_string(), call: format!("cuLaunchKernel({entry}) for {} '{}'", node.op.name, node.name), msg: format!("{e:?}") }
}

/// Launches `entry` with `cfg` and the given kernel arguments (each a place expression
/// of a `DeviceRepr` type: a local, a field; never a temporary, whose address would not
/// outlive the statement). Evaluates to `CudaResult<()>`.
macro_rules! launch {
    ($ctx:expr, $node:expr, $entry:expr, $cfg:expr; $($arg:expr),* $(,)?) => {{
        let entry: &str = &$entry;
        let func = ($ctx.function)(entry)?;
        use cudarc::driver::PushKernelArg as _;
        let mut builder = $ctx.stream.launch_builder(&func);
        $( builder.arg(&$arg); )*
        // SAFETY: every argument matches the entry's parameter list in kernels/*.cu (device
        // addresses as u64, sizes as i64, metadata structs mirrored #[repr(C)]); the
        // device buffers are live and sized from the same shapes the kernel indexes with.
        unsafe { builder.launch($cfg) }
            .map(|_| ())
            .map_err(|e| $crate::launch::compute::launch_error($ctx, $node, entry, e))
    }};
}
pub(crate) use launch;

// ------------------------------------------------------------------ elementwise.cu

/// The unary family (`GpuLaunch::Unary`): `{op}_{dtype}(x, y, n)`; `y` has `x`'s shape.
pub(crate) fn unary(ctx: &LaunchCtx, node: &Node, inputs: &[DevArg], outputs: &[DevArg]) -> CudaResult<()> {
    expect_io(node, inputs, outputs, 1, 1)?;
    let (x, y) = (&inputs[0], &outputs[0]);
    let n = x.len() as i64;
    if n == 0 {
        return Ok(());
    }
    launch!(ctx, node, entry_name(node.op.name, x.dtype), grid_unrolled(n as usize); x.ptr, y.ptr, n)
}

/// `LeakyRelu`: attr `alpha` (default 0.2, as nn.rs `leaky_alpha`).
fn leaky_relu(ctx: &LaunchCtx, node: &Node, inputs: &[DevArg], outputs: &[DevArg]) -> CudaResult<()> {
    expect_io(node, inputs, outputs, 1, 1)?;
    let (x, y) = (&inputs[0], &outputs[0]);
    let n = x.len() as i64;
    let alpha: f64 = node.attrs.get_float("LeakyRelu", "alpha").unwrap_or(0.2);
    if n == 0 {
        return Ok(());
    }
    launch!(ctx, node, entry_name("LeakyRelu", x.dtype), grid_1d(n as usize); x.ptr, y.ptr, n, alpha)
}

/// `OnesLike` / `ZerosLike`: `{op}_{dtype}(y, n)`; the input is only a shape.
fn fill_like(ctx: &LaunchCtx, node: &Node, inputs: &[DevArg], outputs: &[DevArg]) -> CudaResult<()> {
    expect_io(node, inputs, outputs, 1, 1)?;
    let y = &outputs[0];
    let n = y.len() as i64;
    if n == 0 {
        return Ok(());
    }
    launch!(ctx, node, entry_name(node.op.name, y.dtype), grid_1d(n as usize); y.ptr, n)
}

/// `Cast` (attr `DstT`, here the output's dtype): `cast_{src}_{dst}(x, y, n)`.
fn cast(ctx: &LaunchCtx, node: &Node, inputs: &[DevArg], outputs: &[DevArg]) -> CudaResult<()> {
    expect_io(node, inputs, outputs, 1, 1)?;
    let (x, y) = (&inputs[0], &outputs[0]);
    let n = x.len() as i64;
    if n == 0 {
        return Ok(());
    }
    let entry = format!("cast_{}_{}", super::dtype_suffix(x.dtype), super::dtype_suffix(y.dtype));
    launch!(ctx, node, entry, grid_unrolled(n as usize); x.ptr, y.ptr, n)
}

// ------------------------------------------------------------------ binary.cu

/// Broadcast metadata for `out` from `operands`, or an error naming the node and shapes.
pub(crate) fn bcast_meta(node: &Node, out: &DevArg, operands: &[&DevArg]) -> CudaResult<BcastMeta> {
    let dims: Vec<&[usize]> = operands.iter().map(|a| a.dims.as_slice()).collect();
    BcastMeta::new(&out.dims, &dims).ok_or_else(|| {
        let shapes: Vec<String> = dims.iter().map(|d| format!("{d:?}")).collect();
        node_error(node, format!("cannot broadcast {} to {:?} in at most {} dims", shapes.join(" and "), out.dims, super::MAX_RANK))
    })
}

/// The binary family (`GpuLaunch::Binary`), broadcasting arithmetic and comparisons:
/// `{op}_{dtype of a}(a, b, out, meta)`.
pub(crate) fn binary(ctx: &LaunchCtx, node: &Node, inputs: &[DevArg], outputs: &[DevArg]) -> CudaResult<()> {
    expect_io(node, inputs, outputs, 2, 1)?;
    let (a, b, out) = (&inputs[0], &inputs[1], &outputs[0]);
    if a.dtype != b.dtype {
        return Err(node_error(node, format!("operands of different dtypes {} and {}", a.dtype, b.dtype)));
    }
    let meta = bcast_meta(node, out, &[a, b])?;
    if meta.n == 0 {
        return Ok(());
    }
    launch!(ctx, node, entry_name(node.op.name, a.dtype), grid_unrolled(meta.n as usize); a.ptr, b.ptr, out.ptr, meta)
}

/// `SelectV2(cond, x, y)`: `select_v2_{dtype of x}(c, x, y, out, meta)`.
fn select_v2(ctx: &LaunchCtx, node: &Node, inputs: &[DevArg], outputs: &[DevArg]) -> CudaResult<()> {
    expect_io(node, inputs, outputs, 3, 1)?;
    let (c, x, y, out) = (&inputs[0], &inputs[1], &inputs[2], &outputs[0]);
    let meta = bcast_meta(node, out, &[c, x, y])?;
    if meta.n == 0 {
        return Ok(());
    }
    launch!(ctx, node, entry_name("SelectV2", x.dtype), grid_1d(meta.n as usize); c.ptr, x.ptr, y.ptr, out.ptr, meta)
}

/// Launches `broadcast_to_{dtype}` writing `out` (any shape `x` broadcasts to); also the
/// BatchMatMulV2 launcher's way to materialize a broadcast batch.
pub(crate) fn launch_broadcast(ctx: &LaunchCtx, node: &Node, x: &DevArg, out: &DevArg) -> CudaResult<()> {
    let meta = bcast_meta(node, out, &[x])?;
    if meta.n == 0 {
        return Ok(());
    }
    launch!(ctx, node, entry_name("BroadcastTo", x.dtype), grid_1d(meta.n as usize); x.ptr, out.ptr, meta)
}

/// `BroadcastTo` (attr `shape`, the output's shape).
fn broadcast_to(ctx: &LaunchCtx, node: &Node, inputs: &[DevArg], outputs: &[DevArg]) -> CudaResult<()> {
    expect_io(node, inputs, outputs, 1, 1)?;
    launch_broadcast(ctx, node, &inputs[0], &outputs[0])
}

/// `AddN`: inputs added left to right, 8 per launch; later launches start from the
/// partial sum in `out`.
fn add_n(ctx: &LaunchCtx, node: &Node, inputs: &[DevArg], outputs: &[DevArg]) -> CudaResult<()> {
    if inputs.is_empty() || outputs.len() != 1 {
        return Err(node_error(node, format!("AddN needs at least one input and one output, got {} and {}", inputs.len(), outputs.len())));
    }
    let out = &outputs[0];
    let n = out.len() as i64;
    if let Some(bad) = inputs.iter().find(|a| a.len() as i64 != n || a.dtype != out.dtype) {
        return Err(node_error(node, format!("input {:?} {} does not match the output {:?} {}", bad.dims, bad.dtype, out.dims, out.dtype)));
    }
    if n == 0 {
        return Ok(());
    }
    let entry = entry_name("AddN", out.dtype);
    let mut rest = inputs;
    let mut first = true;
    while first || !rest.is_empty() {
        let mut ptrs = Ptrs8::default();
        let mut count = 0usize;
        if !first {
            ptrs.p[0] = out.ptr;
            count = 1;
        }
        let take = rest.len().min(8 - count);
        for a in &rest[..take] {
            ptrs.p[count] = a.ptr;
            count += 1;
        }
        rest = &rest[take..];
        first = false;
        let count = count as i32;
        launch!(ctx, node, entry, grid_1d(n as usize); ptrs, count, out.ptr, n)?;
    }
    Ok(())
}
