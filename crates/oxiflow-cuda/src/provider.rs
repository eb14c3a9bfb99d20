//! The process's [`GpuProvider`]: real GPUs for sessions, found once
//! ([`crate::discovery`]), each session device a [`CudaDevice`] with the kernel library of
//! its GPU (compiled by NVRTC for the GPU's compute capability, or read from the disk
//! cache, once per GPU and process).

use crate::device::{CudaDevice, KernelLookup};
use crate::discovery::{describe, discover, Discovery};
use crate::error::CudaResult;
use cudarc::driver::CudaContext;
use oxiflow_core::device::provider::{set_gpu_provider, GpuProvider, PhysicalGpu};
use oxiflow_core::device::Device;
use oxiflow_core::Result;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Real GPUs through the CUDA driver.
pub struct CudaProvider {
    found: Discovery,
    libraries: Mutex<HashMap<usize, Arc<dyn KernelLookup>>>,
}

impl CudaProvider {
    /// Discovers the GPUs (no driver: none, with the reason). GPUs are left out, with the
    /// reason, when NVRTC cannot be loaded: their kernels could not be built, and TF too
    /// skips GPUs whose libraries are missing rather than failing every session.
    pub fn new() -> CudaProvider {
        let mut found = discover();
        if !found.gpus.is_empty() {
            if let crate::probe::LibStatus::Absent { reason } = crate::probe::nvrtc_status() {
                found.reason = Some(format!("{} GPU(s) found but not used: NVRTC, which builds their kernels, is unavailable ({reason})", found.gpus.len()));
                found.gpus.clear();
            }
        }
        CudaProvider { found, libraries: Mutex::new(HashMap::new()) }
    }

    fn library(&self, ordinal: usize, ctx: &Arc<CudaContext>) -> CudaResult<Arc<dyn KernelLookup>> {
        let mut libs = self.libraries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(l) = libs.get(&ordinal) {
            return Ok(l.clone());
        }
        let cc = self.found.gpus[ordinal].compute_capability;
        let lib = crate::kernels::load_library(ctx, cc)?;
        libs.insert(ordinal, lib.clone());
        Ok(lib)
    }
}

impl Default for CudaProvider {
    fn default() -> Self {
        CudaProvider::new()
    }
}

impl GpuProvider for CudaProvider {
    fn gpus(&self) -> &[PhysicalGpu] {
        &self.found.gpus
    }
    fn unavailable_reason(&self) -> Option<String> {
        self.found.reason.clone()
    }
    fn create(&self, id: u32, index: usize, limit: u64, allow_growth: bool) -> Result<Arc<dyn Device>> {
        let desc = describe(index, &self.found.gpus[index]);
        let d = CudaDevice::new(id, index, limit, allow_growth, desc, |ctx| self.library(index, ctx))?;
        Ok(Arc::new(d))
    }
}

/// Registers the CUDA provider with the core, once per process (later calls do nothing).
/// Returns the reason there is no real GPU, if there is none. Never panics.
pub fn register() -> Option<String> {
    static DONE: OnceLock<Option<String>> = OnceLock::new();
    DONE.get_or_init(|| {
        let p = CudaProvider::new();
        let reason = p.unavailable_reason();
        set_gpu_provider(Box::new(p));
        reason
    })
    .clone()
}
