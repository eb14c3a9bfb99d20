//! Real GPUs behind the core's [`Device`] trait. The core cannot depend on `oxiflow-cuda`
//! (the layers of docs/architecture.md), so the CUDA crate registers a [`GpuProvider`] once per process
//! (the C ABI does it when the library is first used) and sessions ask it for devices.
//!
//! Which GPUs a session gets ([`gpu_source`]): emulated ones whenever
//! `OXIFLOW_EMULATED_GPUS` (or `use_emulated_gpus`) asks for any, so the test suites mean
//! the same on a machine with a GPU; otherwise the provider's real GPUs; otherwise none.

use crate::device::Device;
use crate::error::Result;
use std::sync::{Arc, OnceLock};

/// A physical GPU a provider found (TF's `PhysicalDevice` plus what `Device mapping:`
/// prints).
#[derive(Clone, Debug, PartialEq)]
pub struct PhysicalGpu {
    /// Product name, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// Total device memory in bytes.
    pub total_memory: u64,
    /// `(major, minor)` compute capability.
    pub compute_capability: (i32, i32),
    /// PCI bus id, `0000:19:00.0`.
    pub pci_bus_id: String,
    /// `GPU-<uuid>` as `nvidia-smi -L` prints it.
    pub uuid: String,
}

/// Real GPUs for sessions: implemented by `oxiflow-cuda`.
pub trait GpuProvider: Send + Sync {
    /// The GPUs the driver shows, in its order: `CUDA_VISIBLE_DEVICES` has already been
    /// applied by the driver. Empty when there is no driver or no GPU.
    fn gpus(&self) -> &[PhysicalGpu];
    /// Why there is no GPU (no driver library, `cuInit` failed, ...), when `gpus()` is empty.
    fn unavailable_reason(&self) -> Option<String>;
    /// Creates the session device `/device:GPU:<id>` on the provider's GPU `index` (an
    /// index into [`GpuProvider::gpus`]), `visible` its CUDA-visible index for the
    /// description, allowed `limit` bytes, growing on demand or reserving the whole limit
    /// at creation (`allow_growth`). Errors: the driver's, naming the device.
    fn create(&self, id: u32, index: usize, limit: u64, allow_growth: bool) -> Result<Arc<dyn Device>>;
}

static PROVIDER: OnceLock<Box<dyn GpuProvider>> = OnceLock::new();

/// Registers the process's GPU provider; `false` (and `p` dropped) when one is already
/// registered.
pub fn set_gpu_provider(p: Box<dyn GpuProvider>) -> bool {
    PROVIDER.set(p).is_ok()
}

/// The registered provider, if any.
pub fn gpu_provider() -> Option<&'static dyn GpuProvider> {
    PROVIDER.get().map(|b| b.as_ref())
}

/// Where a session's GPUs come from.
#[derive(Clone, Copy)]
pub enum GpuSource {
    /// This many emulated GPUs (host memory, CPU kernels, GPU placement rules); Oxiflow
    /// applies `CUDA_VISIBLE_DEVICES` to them.
    Emulated(usize),
    /// The provider's real GPUs.
    Real(&'static dyn GpuProvider),
}

impl GpuSource {
    /// Number of GPUs visible to the process (for emulated GPUs: before
    /// `CUDA_VISIBLE_DEVICES`).
    pub fn count(&self) -> usize {
        match self {
            GpuSource::Emulated(n) => *n,
            GpuSource::Real(p) => p.gpus().len(),
        }
    }
}

/// Emulated GPUs when `emulated > 0`, else the registered provider's real GPUs when it has
/// any, else no GPU (`Emulated(0)`).
pub fn gpu_source(emulated: usize) -> GpuSource {
    if emulated > 0 {
        return GpuSource::Emulated(emulated);
    }
    match gpu_provider() {
        Some(p) if !p.gpus().is_empty() => GpuSource::Real(p),
        _ => GpuSource::Emulated(0),
    }
}
