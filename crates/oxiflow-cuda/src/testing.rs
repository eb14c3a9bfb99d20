//! The gate every GPU test passes first: run, or skip for a reason this machine proves.
//!
//! A GPU test may skip only where no CUDA driver or no GPU exists. Where a driver loads and
//! reports a GPU, a test that cannot use it (NVRTC or cuBLAS missing, the provider listing
//! no GPU, `OXIFLOW_DISABLE_CUDA=1` hiding it) fails with the reason instead of passing
//! as skipped. `OXIFLOW_REQUIRE_GPU=1` (set by `scripts/gpu-check.sh run`) turns even a
//! missing driver or GPU into a failure, so a run meant to exercise the GPU cannot pass
//! without one.
//!
//! The driver is probed here independently of [`crate::probe::driver_status`] (which
//! `OXIFLOW_DISABLE_CUDA` can switch off): the library is loaded with `libloading` and
//! asked `cuInit` and `cuDeviceGetCount`, which honour `CUDA_VISIBLE_DEVICES` (an empty or
//! invalid value shows no GPU, and a test then skips, as TF lists no GPU).

use crate::probe::{cublas_status, nvrtc_status, probe_libraries, DriverStatus, LibStatus, DRIVER_LIBRARIES};

/// The variable that turns every skip into a failure.
pub const REQUIRE_GPU: &str = "OXIFLOW_REQUIRE_GPU";

/// How many GPUs the CUDA driver shows this process, or why it shows none: `Ok(n)` with
/// `n >= 1`, else `Err(reason)` (no driver library, `cuInit` failed, zero devices).
/// Ignores `OXIFLOW_DISABLE_CUDA`. Never panics.
pub fn driver_gpu_count() -> Result<usize, String> {
    let library = match probe_libraries(DRIVER_LIBRARIES) {
        DriverStatus::Present { library, .. } => library,
        DriverStatus::Absent { reason } => return Err(reason),
    };
    // SAFETY: the same library the probe just loaded; cuInit(0) and cuDeviceGetCount(int*)
    // have these signatures in every CUDA driver.
    unsafe {
        let lib = libloading::Library::new(&library).map_err(|e| format!("{library}: {e}"))?;
        let init = lib.get::<unsafe extern "C" fn(u32) -> i32>(b"cuInit\0").map_err(|e| e.to_string())?;
        let count = lib.get::<unsafe extern "C" fn(*mut i32) -> i32>(b"cuDeviceGetCount\0").map_err(|e| e.to_string())?;
        let rc = init(0);
        if rc != 0 {
            return Err(format!("cuInit returned CUresult {rc} (CUDA_VISIBLE_DEVICES={:?})", std::env::var("CUDA_VISIBLE_DEVICES").ok()));
        }
        let mut n = 0i32;
        let rc = count(&mut n);
        if rc != 0 {
            return Err(format!("cuDeviceGetCount returned CUresult {rc}"));
        }
        if n < 1 {
            return Err("the CUDA driver reports no device (check CUDA_VISIBLE_DEVICES)".into());
        }
        // the driver stays loaded for the process, as cudarc loads it again anyway
        std::mem::forget(lib);
        Ok(n as usize)
    }
}

fn require_gpu() -> bool {
    std::env::var(REQUIRE_GPU).map(|v| v == "1").unwrap_or(false)
}

/// `true`: a GPU is here and usable, run the test. `false`: no driver or no GPU, and
/// `OXIFLOW_REQUIRE_GPU` is not `1`; prints `skipped: <test>: <reason>` first.
///
/// Panics (failing the test) when a GPU is present but cannot be used: `OXIFLOW_DISABLE_CUDA=1`,
/// NVRTC or cuBLAS missing (the kernels or `MatMul` could not run), or the registered
/// provider lists no GPU; and when `OXIFLOW_REQUIRE_GPU=1` and there is no GPU.
pub fn gpu_or_skip(test: &str) -> bool {
    match driver_gpu_count() {
        Err(reason) => {
            if require_gpu() {
                panic!("{test}: {REQUIRE_GPU}=1 but there is no usable GPU: {reason}");
            }
            println!("skipped: {test}: no CUDA GPU ({reason})");
            false
        }
        Ok(n) => {
            if crate::probe::cuda_disabled() {
                panic!("{test}: the driver shows {n} GPU(s) but OXIFLOW_DISABLE_CUDA=1 hides them; GPU tests do not skip on a GPU machine");
            }
            if let LibStatus::Absent { reason } = nvrtc_status() {
                panic!("{test}: {n} GPU(s) present but NVRTC, which builds the kernels, cannot be loaded: {reason}");
            }
            if let LibStatus::Absent { reason } = cublas_status() {
                panic!("{test}: {n} GPU(s) present but cuBLAS cannot be loaded: {reason}");
            }
            let unusable = crate::provider::register();
            let listed = oxiflow_core::device::provider::gpu_provider().map(|p| p.gpus().len()).unwrap_or(0);
            if listed == 0 {
                panic!("{test}: the driver shows {n} GPU(s) but the CUDA provider lists none: {}", unusable.unwrap_or_default());
            }
            true
        }
    }
}
