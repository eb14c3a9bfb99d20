//! Real GPUs: the CUDA provider is registered on the first call into the library (see
//! [`crate::guard`]), and [`oxf_cuda_status`] says what was found or why nothing was.

use crate::{guard, return_str};
use oxiflow_core::device::provider::gpu_provider;
use std::ffi::c_char;

/// Registers `oxiflow-cuda`'s GPU provider once per process; afterwards one atomic load
/// (every export calls this, so it must not allocate: `register` clones its reason).
pub(crate) fn register_gpus() {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    REGISTERED.call_once(|| {
        let _ = oxiflow_cuda::provider::register();
    });
}

/// What the CUDA layer found, one line per fact, tab-separated:
/// `driver\tpresent\t<CUDA driver version>` or `driver\tabsent\t<reason>`, then one
/// `gpu\t<ordinal>\t<TF's device description>\t<total memory bytes>\t<uuid>` line per real
/// GPU, or `reason\t<why there is none>`. Never fails for lack of a GPU.
#[no_mangle]
pub extern "C" fn oxf_cuda_status(out: *mut *const c_char) -> i32 {
    guard(|| {
        let mut lines = Vec::new();
        match oxiflow_cuda::probe::driver_status() {
            oxiflow_cuda::probe::DriverStatus::Present { version, .. } => lines.push(format!("driver\tpresent\t{version}")),
            oxiflow_cuda::probe::DriverStatus::Absent { reason } => lines.push(format!("driver\tabsent\t{reason}")),
        }
        if let Some(p) = gpu_provider() {
            for (i, g) in p.gpus().iter().enumerate() {
                lines.push(format!("gpu\t{i}\t{}\t{}\t{}", oxiflow_cuda::discovery::describe(i, g), g.total_memory, g.uuid));
            }
            if let Some(r) = p.unavailable_reason() {
                lines.push(format!("reason\t{r}"));
            }
        }
        return_str(lines.join("\n"), out)
    })
}
