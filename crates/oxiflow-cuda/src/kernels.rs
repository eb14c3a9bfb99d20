//! The kernel library (being written on the kernels branch; this placeholder lets the
//! device compile until it is merged).

use crate::device::KernelLookup;
use crate::error::{CudaError, CudaResult};
use cudarc::driver::CudaContext;
use std::sync::Arc;

/// Compiles (or reads from the cache) every kernel file for compute capability `cc` and
/// loads it into `ctx`.
pub fn load_library(_ctx: &Arc<CudaContext>, cc: (i32, i32)) -> CudaResult<Arc<dyn KernelLookup>> {
    Err(CudaError::Unsupported(format!("no kernel library for sm_{}{} yet", cc.0, cc.1)))
}
