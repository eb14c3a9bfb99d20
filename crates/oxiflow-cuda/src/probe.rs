//! Is there a CUDA driver? Checked by loading the driver library ourselves with
//! `libloading` before the first cudarc call: cudarc 0.19's dynamic loader panics when
//! `libcuda` is absent (seen on a machine without a driver), and a panic must never reach
//! the user. The answer is computed once per process.

use std::sync::OnceLock;

/// Names the CUDA driver library goes by on Linux, in the order cudarc tries them.
pub const DRIVER_LIBRARIES: &[&str] = &["libcuda.so.1", "libcuda.so"];

/// What the probe found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriverStatus {
    /// The driver library loaded and exports `cuInit`; `version` is `cuDriverGetVersion`
    /// (e.g. `13000` for CUDA 13.0) and `library` the name that loaded.
    Present { library: String, version: i32 },
    /// No driver: the reason, naming each library tried and the loader's error, suitable
    /// for `list_physical_devices` and logs.
    Absent { reason: String },
}

impl DriverStatus {
    /// `true` when a driver library was found.
    pub fn is_present(&self) -> bool {
        matches!(self, DriverStatus::Present { .. })
    }
}

/// The driver status of this process (probed on first call, then cached).
///
/// Setting `OXIFLOW_DISABLE_CUDA=1` makes the probe report an absent driver, so a machine
/// with a GPU can run the emulated-GPU test suite unchanged.
pub fn driver_status() -> &'static DriverStatus {
    static STATUS: OnceLock<DriverStatus> = OnceLock::new();
    STATUS.get_or_init(|| {
        if std::env::var("OXIFLOW_DISABLE_CUDA").map(|v| v == "1").unwrap_or(false) {
            return DriverStatus::Absent { reason: "disabled by OXIFLOW_DISABLE_CUDA=1".into() };
        }
        probe_libraries(DRIVER_LIBRARIES)
    })
}

/// Tries each library name in turn; the first that loads and exports `cuInit` and
/// `cuDriverGetVersion` wins. Never panics.
pub fn probe_libraries(names: &[&str]) -> DriverStatus {
    let mut tried = Vec::new();
    for name in names {
        // SAFETY: loading the CUDA driver runs its initialisers, which is what any CUDA
        // program does; we call only `cuDriverGetVersion`, which needs no `cuInit`.
        match unsafe { libloading::Library::new(name) } {
            Err(e) => tried.push(format!("{name}: {e}")),
            Ok(lib) => {
                type GetVersion = unsafe extern "C" fn(*mut i32) -> i32;
                let has_init = unsafe { lib.get::<unsafe extern "C" fn(u32) -> i32>(b"cuInit\0") }.is_ok();
                let get = unsafe { lib.get::<GetVersion>(b"cuDriverGetVersion\0") };
                match (has_init, get) {
                    (true, Ok(get)) => {
                        let mut v = 0i32;
                        // SAFETY: the symbol has this signature in every CUDA driver.
                        let rc = unsafe { get(&mut v) };
                        if rc == 0 {
                            return DriverStatus::Present { library: (*name).to_string(), version: v };
                        }
                        tried.push(format!("{name}: cuDriverGetVersion returned CUresult {rc}"));
                    }
                    _ => tried.push(format!("{name}: loaded but does not export cuInit/cuDriverGetVersion")),
                }
            }
        }
    }
    DriverStatus::Absent { reason: format!("no CUDA driver library could be loaded ({})", tried.join("; ")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_library_is_reported_not_panicked() {
        let s = probe_libraries(&["liboxiflow-no-such-driver.so.1"]);
        match s {
            DriverStatus::Absent { reason } => assert!(reason.contains("liboxiflow-no-such-driver.so.1"), "{reason}"),
            other => panic!("expected Absent, got {other:?}"),
        }
    }

    #[test]
    fn a_library_without_cuda_symbols_is_not_a_driver() {
        // libm exists everywhere and exports no cuInit.
        let s = probe_libraries(&["libm.so.6"]);
        match s {
            DriverStatus::Absent { reason } => assert!(reason.contains("does not export cuInit"), "{reason}"),
            other => panic!("expected Absent, got {other:?}"),
        }
    }

    #[test]
    fn process_status_is_stable() {
        let a = driver_status().clone();
        let b = driver_status().clone();
        assert_eq!(a, b);
        match &a {
            DriverStatus::Present { version, .. } => println!("CUDA driver present, version {version}"),
            DriverStatus::Absent { reason } => println!("no CUDA driver here: {reason}"),
        }
    }
}
