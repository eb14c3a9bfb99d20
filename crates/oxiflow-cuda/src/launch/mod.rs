//! Launching an op's CUDA kernel: the contract between the device ([`crate::device`]) and
//! the per-family launchers. The device owns memory, streams and the compiled kernel
//! library; a launcher only turns a node (op, attrs, static shapes) and device pointers
//! into kernel launches (or cuBLAS calls) on the given stream.
//!
//! Conventions every launcher follows:
//! - tensors are contiguous and row-major ([`DevArg`]); outputs are allocated by the
//!   device from the node's static output types before the launch;
//! - kernel entry points are named `{op}_{dtype}` in snake case (`real_div_f32`,
//!   `sum_f64`), dtype one of `f32 f64 i32 i64 bool`; a launcher may use further helper
//!   entries with that prefix (`sum_f32_partial`);
//! - shape and stride metadata travels by value in `#[repr(C)]` structs of at most
//!   [`MAX_RANK`] dimensions (no device allocation for it);
//! - work is only enqueued: the launcher never synchronizes the stream.
//!
//! Which launcher runs an op is declared by the op itself (`OpDef::launch`, a
//! [`GpuLaunch`] family): [`launcher`] maps each family to its launcher, so an op of a
//! shared family (unary, binary, reduction) needs only its `.cu` entries. Ops that move no
//! data and state ops are [`GpuLaunch::DeviceHandled`]: the device runs them itself.

use crate::error::CudaResult;
use cudarc::driver::{CudaFunction, CudaStream};
use oxiflow_core::graph::Node;
use oxiflow_core::ops::{GpuLaunch, OpDef};
use oxiflow_core::DType;
use std::sync::Arc;

mod blas;
pub mod compute;
pub mod meta;
pub mod movement;
mod reduction;
pub mod training;

/// Highest rank a kernel's shape metadata holds (TF's GPU kernels use 8 as well for
/// transposes and broadcasts).
pub const MAX_RANK: usize = 8;

/// A tensor in device memory as a kernel sees it: `ptr` is the `CUdeviceptr` of its first
/// element, elements contiguous in row-major order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DevArg {
    /// `CUdeviceptr` of the first element.
    pub ptr: u64,
    /// Element type (Bool: one byte per element).
    pub dtype: DType,
    /// Row-major dimensions, empty for a scalar.
    pub dims: Vec<usize>,
}

impl DevArg {
    /// Number of elements (1 for a scalar).
    pub fn len(&self) -> usize {
        self.dims.iter().product()
    }
    /// `true` when the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Bytes of element data.
    pub fn num_bytes(&self) -> usize {
        self.len() * self.dtype.size_of()
    }
}

/// Temporary device memory for one launch (reduction partials, index tables): returned to
/// the device's allocator when dropped. Frees are stream-ordered (one compute stream per
/// device), so dropping right after enqueueing the kernels that use it is safe.
pub trait Scratch {
    /// `CUdeviceptr` of the block.
    fn ptr(&self) -> u64;
}

/// What a launcher gets besides the node and its tensors.
pub struct LaunchCtx<'a> {
    /// Full device name (`/job:localhost/replica:0/task:0/device:GPU:0`), for errors.
    pub device: &'a str,
    /// The device's compute stream; launches are enqueued here.
    pub stream: &'a Arc<CudaStream>,
    /// Looks up a kernel entry point by name in the compiled kernel library; errors name the
    /// entry and the kernel file.
    pub function: &'a dyn Fn(&str) -> CudaResult<CudaFunction>,
    /// cuBLAS handle bound to `stream` (`None` when libcublas could not be loaded; a
    /// launcher that needs it returns [`crate::CudaError::Unsupported`]).
    pub blas: Option<&'a cudarc::cublas::CudaBlas>,
    /// Temporary device memory of the given size in bytes.
    pub scratch: &'a dyn Fn(usize) -> CudaResult<Box<dyn Scratch + 'a>>,
}

/// Enqueues `node`'s computation: reads `inputs` (the node's data inputs in order, as the
/// CPU kernel's `KernelCtx::inputs`), writes `outputs` (allocated by the device from
/// `node.outputs`). Training ops (`Apply*`) update their variable's buffer, given as
/// `inputs[0]`, in place.
pub type Launcher = fn(&LaunchCtx, &Node, &[DevArg], &[DevArg]) -> CudaResult<()>;

/// The launcher of `op`, from its launch family: one launcher for every op of the
/// unary, binary, reduction, random and training families; the op's own for cuBLAS
/// products, data movement and [`GpuLaunch::Own`]. `None` when the op has no GPU
/// kernel, is run by the device itself ([`GpuLaunch::DeviceHandled`], and the collectives,
/// [`GpuLaunch::Collective`]), is run on the host by the executor ([`GpuLaunch::Host`]), or
/// declares a family whose table lacks it (a test checks that every registered GPU op has one).
pub fn launcher(op: &OpDef) -> Option<Launcher> {
    match op.launch {
        GpuLaunch::None | GpuLaunch::DeviceHandled | GpuLaunch::Collective | GpuLaunch::Host => None,
        GpuLaunch::Unary => Some(compute::unary),
        GpuLaunch::Binary => Some(compute::binary),
        GpuLaunch::Reduce => Some(reduction::reduce),
        GpuLaunch::ArgReduce => Some(reduction::arg_reduce),
        GpuLaunch::Random => Some(training::random),
        GpuLaunch::Training => Some(training::apply),
        GpuLaunch::CuBlas => blas::launcher(op.name),
        GpuLaunch::Movement => movement::launcher(op.name),
        GpuLaunch::Own => compute::own_launcher(op.name),
    }
}

/// Snake-case kernel entry name `{op}_{dtype}` (`RealDiv`, Float32 -> `real_div_f32`;
/// `BatchMatMulV2` -> `batch_mat_mul_v2_f32`).
pub fn entry_name(op: &str, dtype: DType) -> String {
    let mut s = String::with_capacity(op.len() + 8);
    let chars: Vec<char> = op.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() {
            let prev_lower = i > 0 && (chars[i - 1].is_ascii_lowercase() || chars[i - 1].is_ascii_digit());
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            let prev_upper = i > 0 && chars[i - 1].is_ascii_uppercase();
            if i > 0 && (prev_lower || (prev_upper && next_lower)) {
                s.push('_');
            }
            s.push(c.to_ascii_lowercase());
        } else {
            // Lower-case letters and digits join what precedes them (`V2` -> `v2`).
            s.push(c);
        }
    }
    s.push('_');
    s.push_str(dtype_suffix(dtype));
    s
}

/// Kernel-name suffix of a dtype: `f32 f64 i32 i64 bool` (`c64 c128` for the complex
/// types, which have no kernels: the placer keeps them off GPUs).
pub fn dtype_suffix(d: DType) -> &'static str {
    match d {
        DType::Float32 => "f32",
        DType::Float64 => "f64",
        DType::Int32 => "i32",
        DType::Int64 => "i64",
        DType::Bool => "bool",
        DType::Complex64 => "c64",
        DType::Complex128 => "c128",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names_follow_the_design() {
        assert_eq!(entry_name("Sin", DType::Float64), "sin_f64");
        assert_eq!(entry_name("RealDiv", DType::Float32), "real_div_f32");
        assert_eq!(entry_name("AddN", DType::Float32), "add_n_f32");
        assert_eq!(entry_name("BatchMatMulV2", DType::Float64), "batch_mat_mul_v2_f64");
        assert_eq!(entry_name("ApplyRMSProp", DType::Float32), "apply_rms_prop_f32");
        assert_eq!(entry_name("Relu6", DType::Float32), "relu6_f32");
        assert_eq!(entry_name("SelectV2", DType::Bool), "select_v2_bool");
        assert_eq!(entry_name("GatherNd", DType::Int64), "gather_nd_i64");
    }
}
