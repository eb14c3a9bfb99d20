//! # oxiflow-cuda
//!
//! Oxiflow's CUDA device (DESIGN.md, "Layers"): real GPUs behind the core's
//! [`oxiflow_core::device::Device`] trait.
//!
//! - [`probe`]: is a CUDA driver library present? Asked before any cudarc call, because
//!   cudarc's dynamic loader panics when `libcuda` is missing.
//! - [`allocator`]: best-fit, coalescing device memory within the session's limit (TF's BFC
//!   allocator's rules), tested against a fake driver.
//! - [`launch`]: the contract between the device and the per-family kernel launchers.
//!
//! Everything here builds and its tests run on machines without CUDA (cudarc with
//! `dynamic-loading`); tests that need a GPU print that they were skipped.

pub mod allocator;
pub mod error;
pub mod launch;
pub mod probe;

pub use error::{CudaError, CudaResult};
