//! # oxiflow-cuda
//!
//! Oxiflow's CUDA device (docs/architecture.md): real GPUs behind the core's
//! [`oxiflow_core::device::Device`] trait.
//!
//! - [`probe`]: is a CUDA driver library present? Asked before any cudarc call, because
//!   cudarc's dynamic loader panics when `libcuda` is missing.
//! - [`allocator`]: best-fit, coalescing device memory within the session's limit (TF's BFC
//!   allocator's rules), tested against a fake driver.
//! - [`discovery`]: the GPUs the driver shows (name, memory, compute capability, PCI bus,
//!   UUID) and TF's device description.
//! - [`device`]: [`device::CudaDevice`], tensors resident in device memory, a compute and a
//!   copy stream, kernels launched by op.
//! - [`provider`]: registers the real GPUs with the core (`oxiflow_core::device::provider`).
//! - [`kernels`]: the `.cu` files of `kernels/`, compiled by NVRTC, cached on disk and loaded
//!   into a context; the entries the op registry calls for.
//! - [`launch`]: the contract between the device and the per-family kernel launchers.
//! - [`nccl`]: NCCL, loaded at run time, for the collective ops on GPU tensors.
//! - [`testing`]: the gate of every GPU test (skip only where no driver or GPU exists).
//!
//! Everything here builds and its tests run on machines without CUDA (cudarc with
//! `dynamic-loading`); tests that need a GPU print that they were skipped.

pub mod allocator;
pub mod device;
pub mod discovery;
pub mod error;
pub mod kernels;
pub mod launch;
pub mod nccl;
pub mod probe;
pub mod provider;
pub mod testing;

pub use error::{CudaError, CudaResult};
