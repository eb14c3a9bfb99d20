//! Launchers of `kernels/training.cu` (`ApplyGradientDescent`, `ApplyMomentum`,
//! `ApplyAdam`, `ApplyRMSProp`, `ApplyAdagrad`, `ApplyAdadelta`, in place) and `kernels/random.cu` (`RandomStandardNormal`,
//! `RandomUniform`).
//!
//! Training ops: one launcher, [`apply`], for all of them, driven by each op's declaration
//! in crates/oxiflow-core/src/ops/training.rs (`OpDef::inputs`, `OpDef::attrs`). `inputs`
//! are all of the node's inputs in node order, the variable and its slots (reference
//! inputs) included as the device buffers to update in place, e.g. `ApplyAdam(var, m, v,
//! beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad)`; hyperparameters are rank-0
//! device tensors. When the device gives the op an output buffer other than the variable's
//! own, the new value is copied there after the update. Bool attrs (`use_nesterov`,
//! `update_slots`) follow as ints with their declared defaults. `ApplyAdagradDA` has no GPU
//! kernel (as in TF).
//!
//! Random ops: attrs `seed`/`seed2` (default 0) give the node's 64-bit base seed with the
//! CPU kernel's SplitMix mix (crates/oxiflow-core/src/ops/random.rs); both zero draws a
//! fresh seed from the OS once per node. Each run of the node uses the next Philox stream
//! number, so runs differ and equal seeds replay the same sequence.
//! LIMITATION: the launch contract has no per-session state, so the stream counter lives
//! in this process (keyed by device and node): a second session in the same process
//! continues the first one's sequence instead of restarting it as the CPU kernel does.

use super::compute::{expect_io, launch, node_error};
use super::meta::grid_1d;
use super::{entry_name, DevArg, LaunchCtx};
use crate::error::{CudaError, CudaResult};
use oxiflow_core::graph::Node;
use oxiflow_core::ops::{AttrDef, AttrKind, AttrsExt, InputRole, OpDef};
use std::collections::HashMap;
use std::sync::Mutex;

/// Checks the node's full input list and the variable's shape for every `full` input.
fn check_apply(node: &Node, inputs: &[DevArg], outputs: &[DevArg], n_in: usize, full: &[usize]) -> CudaResult<i64> {
    if inputs.len() != n_in {
        return Err(node_error(
            node,
            format!("the CUDA launcher expects all {n_in} inputs (variable and slots included, in node order), got {}", inputs.len()),
        ));
    }
    if outputs.len() > 1 {
        return Err(node_error(node, format!("expects at most one output, got {}", outputs.len())));
    }
    let var = &inputs[0];
    for (i, a) in inputs.iter().enumerate() {
        if a.dtype != var.dtype {
            return Err(node_error(node, format!("input {i} is {} but the variable is {}", a.dtype, var.dtype)));
        }
        let want_full = i == 0 || full.contains(&i);
        if want_full && a.dims != var.dims {
            return Err(node_error(node, format!("input {i} has shape {:?} but the variable has {:?}", a.dims, var.dims)));
        }
        if !want_full && a.len() != 1 {
            return Err(node_error(node, format!("hyperparameter input {i} must be a scalar, got shape {:?}", a.dims)));
        }
    }
    Ok(var.len() as i64)
}

/// Copies the updated variable into the op's output when that is a different buffer.
fn copy_out(ctx: &LaunchCtx, node: &Node, inputs: &[DevArg], outputs: &[DevArg]) -> CudaResult<()> {
    let Some(out) = outputs.first() else { return Ok(()) };
    let var = &inputs[0];
    if out.ptr == var.ptr || var.num_bytes() == 0 {
        return Ok(());
    }
    // SAFETY: both buffers hold `var.num_bytes()` bytes (same dtype and shape, checked by the
    // device from the node's output type); the copy is enqueued on the compute stream after
    // the update.
    unsafe { cudarc::driver::result::memcpy_dtod_async(out.ptr, var.ptr, var.num_bytes(), ctx.stream.cu_stream()) }.map_err(|e| CudaError::Driver {
        device: ctx.device.to_string(),
        call: format!("cuMemcpyDtoDAsync for {} '{}'", node.op.name, node.name),
        msg: format!("{e:?}"),
    })
}

/// The attributes a training kernel of op `def` takes after `n`, one `int` each, in the
/// op's declared order (`OpDef::attrs`): every bool attribute but `use_locking`
/// (`use_nesterov`, `update_slots`; TF's kernels take `use_locking` as a template choice).
pub fn kernel_flag_attrs(def: &OpDef) -> impl Iterator<Item = &'static AttrDef> {
    def.attrs.iter().filter(|a| a.kind == AttrKind::Bool && a.name != "use_locking")
}

/// The values of [`kernel_flag_attrs`] for `node`, as `i32`: the node's value or the
/// declared default.
pub fn kernel_flags(node: &Node) -> CudaResult<Vec<i32>> {
    let def = node.op;
    kernel_flag_attrs(def).map(|a| def.bool_attr(&node.attrs, a.name).map(i32::from).map_err(|e| node_error(node, e))).collect()
}

/// The training family's launcher (`GpuLaunch::Training`), for every `Apply*` op from its
/// declaration (`OpDef::inputs`, `OpDef::attrs`): `{op}_{dtype}(inputs..., n, flags...)`,
/// the inputs' device pointers in the op's input order (TF's), `n` the variable's
/// elements as `i64`, then [`kernel_flags`]. `kernels/training.cu` declares each entry's
/// parameters in that order; the kernel compile test checks their count and sizes.
pub(crate) fn apply(ctx: &LaunchCtx, node: &Node, inputs: &[DevArg], outputs: &[DevArg]) -> CudaResult<()> {
    let def = node.op;
    let like_var: Vec<usize> = (1..def.inputs.len()).filter(|&i| matches!(def.inputs[i].role, InputRole::Ref | InputRole::LikeFirst)).collect();
    let n = check_apply(node, inputs, outputs, def.inputs.len(), &like_var)?;
    if n > 0 {
        let ptrs: Vec<u64> = inputs.iter().map(|a| a.ptr).collect();
        let flags = kernel_flags(node)?;
        let entry = entry_name(def.name, inputs[0].dtype);
        let func = (ctx.function)(&entry)?;
        use cudarc::driver::PushKernelArg as _;
        let mut builder = ctx.stream.launch_builder(&func);
        for p in &ptrs {
            builder.arg(p);
        }
        builder.arg(&n);
        for f in &flags {
            builder.arg(f);
        }
        // SAFETY: the arguments are the entry's parameter list in kernels/training.cu (device
        // addresses as u64 in input order, n as i64, flags as int; the compile test checks
        // the count and sizes); the buffers are live and hold the shapes checked above.
        unsafe { builder.launch(grid_1d(n as usize)) }.map(|_| ()).map_err(|e| super::compute::launch_error(ctx, node, &entry, e))?;
    }
    copy_out(ctx, node, inputs, outputs)
}

// ------------------------------------------------------------------ random

/// SplitMix64 finalizer of `(seed, seed2)`: the CPU kernel's `mix` (random.rs).
pub fn mix_seed(seed: i64, seed2: i64) -> u64 {
    let mut z = (seed as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (seed2 as u64).rotate_left(32);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A seed from the OS (std's hasher keys are drawn from the OS's random source).
fn os_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0));
    h.finish()
}

/// A random node on a device: (device name, node id, node name).
type StreamKey = (String, usize, String);
/// Per random node: base seed and the number of runs so far.
static STREAMS: Mutex<Option<HashMap<StreamKey, (u64, u64)>>> = Mutex::new(None);

/// The base seed and stream number of this run of `node` on `device`.
pub fn next_stream(device: &str, node: &Node) -> (u64, u64) {
    let mut guard = STREAMS.lock().unwrap_or_else(|e| e.into_inner());
    let map = guard.get_or_insert_with(HashMap::new);
    let entry = map.entry((device.to_string(), node.id, node.name.clone())).or_insert_with(|| {
        let seed = node.attrs.get_int(node.op.name, "seed").unwrap_or(0);
        let seed2 = node.attrs.get_int(node.op.name, "seed2").unwrap_or(0);
        let base = if seed == 0 && seed2 == 0 { os_seed() } else { mix_seed(seed, seed2) };
        (base, 0)
    });
    let out = *entry;
    entry.1 += 1;
    out
}

/// `RandomStandardNormal` / `RandomUniform`: `{op}_{dtype}(y, n, seed, stream)`, a
/// thread per Philox block (4 values for f32, 2 for f64).
pub(crate) fn random(ctx: &LaunchCtx, node: &Node, inputs: &[DevArg], outputs: &[DevArg]) -> CudaResult<()> {
    expect_io(node, inputs, outputs, 0, 1)?;
    let y = &outputs[0];
    let n = y.len() as i64;
    let (seed, stream) = next_stream(ctx.device, node);
    if n == 0 {
        return Ok(());
    }
    let per_block = if y.dtype == oxiflow_core::DType::Float32 { 4 } else { 2 };
    let blocks = (n as usize).div_ceil(per_block);
    launch!(ctx, node, entry_name(node.op.name, y.dtype), grid_1d(blocks); y.ptr, n, seed, stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_mix_as_on_the_cpu() {
        // The CPU's mix of (1, 2), computed by hand from random.rs's formula.
        let z = 1u64.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 2u64.rotate_left(32);
        let z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        let z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        assert_eq!(mix_seed(1, 2), z ^ (z >> 31));
        assert_ne!(mix_seed(1, 2), mix_seed(2, 1));
    }
}
