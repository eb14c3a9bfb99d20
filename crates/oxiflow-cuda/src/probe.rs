//! Is there a CUDA driver? Checked by loading the driver library ourselves with
//! `libloading` before the first cudarc call: cudarc 0.19's dynamic loader panics when
//! `libcuda` is absent (seen on a machine without a driver), and a panic must never reach
//! the user. The answer is computed once per process. NVRTC ([`nvrtc_status`]) and cuBLAS
//! ([`cublas_status`]) are probed the same way before `cudarc::nvrtc` / `cudarc::cublas`
//! are first used.

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

/// `true` when `OXIFLOW_DISABLE_CUDA=1`: the probes report no driver, and tests on a machine
/// with a GPU refuse to skip ([`crate::testing::gpu_or_skip`]).
pub fn cuda_disabled() -> bool {
    std::env::var("OXIFLOW_DISABLE_CUDA").as_deref() == Ok("1")
}

/// The driver status of this process (probed on first call, then cached).
///
/// Setting `OXIFLOW_DISABLE_CUDA=1` makes the probe report an absent driver, so a machine
/// with a GPU can run the emulated-GPU test suite unchanged.
pub fn driver_status() -> &'static DriverStatus {
    static STATUS: OnceLock<DriverStatus> = OnceLock::new();
    STATUS.get_or_init(|| {
        if cuda_disabled() {
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

/// Names NVRTC's library goes by (CUDA 13, then an unversioned link), tried in order
/// unless `OXIFLOW_NVRTC_LIB` names a file.
pub const NVRTC_LIBRARIES: &[&str] = &["libnvrtc.so.13", "libnvrtc.so"];
/// Names of cuBLAS's library, tried in order unless `OXIFLOW_CUBLAS_LIB` names a file.
pub const CUBLAS_LIBRARIES: &[&str] = &["libcublas.so.13", "libcublas.so"];

/// What the NVRTC or cuBLAS probe found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LibStatus {
    /// The library loaded and exports the expected symbols. `library` is the name or path
    /// that loaded; `version` is `(major, minor)` (`nvrtcVersion`; cuBLAS: from
    /// `cublasGetProperty`, e.g. `(13, 0)`).
    Present { library: String, version: (i32, i32) },
    /// Not usable: the reason, naming each library tried and the loader's error.
    Absent { reason: String },
}

impl LibStatus {
    /// `true` when the library was found.
    pub fn is_present(&self) -> bool {
        matches!(self, LibStatus::Present { .. })
    }
}

/// Libraries loaded by the probes stay loaded for the life of the process: cudarc's own
/// loader opens libraries by name (`libnvrtc.so.13`), and the dynamic linker answers such
/// a request with an already-loaded library of that `SONAME`, so a library found through
/// `OXIFLOW_NVRTC_LIB` (a path) is the one cudarc uses.
static KEPT: std::sync::Mutex<Vec<libloading::Library>> = std::sync::Mutex::new(Vec::new());

fn keep(lib: libloading::Library) {
    KEPT.lock().unwrap_or_else(|e| e.into_inner()).push(lib);
}

/// Is NVRTC loadable? Probed once per process, before any call into `cudarc::nvrtc`
/// (cudarc panics when the library is absent). `OXIFLOW_NVRTC_LIB` may name the library
/// file (e.g. `.deps/nvrtc/nvidia/cu13/lib/libnvrtc.so.13`); its directory's
/// `libnvrtc-builtins.so.*` is loaded first, since NVRTC finds that one only through the
/// loader's search path. Otherwise the names in [`NVRTC_LIBRARIES`] are searched on
/// `LD_LIBRARY_PATH` and the system paths.
pub fn nvrtc_status() -> &'static LibStatus {
    static STATUS: OnceLock<LibStatus> = OnceLock::new();
    STATUS.get_or_init(|| {
        let explicit = std::env::var("OXIFLOW_NVRTC_LIB").ok().filter(|s| !s.is_empty());
        if let Some(path) = &explicit {
            preload_builtins(std::path::Path::new(path));
        }
        let names: Vec<String> = match explicit {
            Some(p) => vec![p],
            None => NVRTC_LIBRARIES.iter().map(|s| s.to_string()).collect(),
        };
        probe_lib(&names, "nvrtcCreateProgram", |lib| {
            type Version = unsafe extern "C" fn(*mut i32, *mut i32) -> i32;
            // SAFETY: `nvrtcVersion(int*, int*)` in every NVRTC.
            let f = unsafe { lib.get::<Version>(b"nvrtcVersion\0") }.map_err(|e| e.to_string())?;
            let (mut major, mut minor) = (0, 0);
            let rc = unsafe { f(&mut major, &mut minor) };
            if rc == 0 {
                Ok((major, minor))
            } else {
                Err(format!("nvrtcVersion returned {rc}"))
            }
        })
    })
}

/// Loads `libnvrtc-builtins.so*` from the directory of an explicitly named NVRTC.
fn preload_builtins(nvrtc: &std::path::Path) {
    let Some(dir) = nvrtc.parent() else { return };
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    let mut names: Vec<std::path::PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("libnvrtc-builtins.so")))
        .collect();
    names.sort();
    for p in names {
        // SAFETY: loading NVRTC's builtins library runs no user-visible initialisers.
        if let Ok(lib) = unsafe { libloading::Library::new(&p) } {
            keep(lib);
        }
    }
}

/// Is cuBLAS loadable? Probed once per process, before `cudarc::cublas` is used (cudarc
/// panics when the library is absent). `OXIFLOW_CUBLAS_LIB` may name the library file;
/// otherwise [`CUBLAS_LIBRARIES`] are searched as the loader does.
pub fn cublas_status() -> &'static LibStatus {
    static STATUS: OnceLock<LibStatus> = OnceLock::new();
    STATUS.get_or_init(|| {
        let names: Vec<String> = match std::env::var("OXIFLOW_CUBLAS_LIB").ok().filter(|s| !s.is_empty()) {
            Some(p) => vec![p],
            None => CUBLAS_LIBRARIES.iter().map(|s| s.to_string()).collect(),
        };
        probe_lib(&names, "cublasCreate_v2", |lib| {
            // cublasGetProperty(libraryPropertyType type, int* value): 0 major, 1 minor.
            type Prop = unsafe extern "C" fn(i32, *mut i32) -> i32;
            // SAFETY: the symbol has this signature in every cuBLAS since 6.0.
            let f = unsafe { lib.get::<Prop>(b"cublasGetProperty\0") }.map_err(|e| e.to_string())?;
            let (mut major, mut minor) = (0, 0);
            let (a, b) = unsafe { (f(0, &mut major), f(1, &mut minor)) };
            if a == 0 && b == 0 {
                Ok((major, minor))
            } else {
                Err(format!("cublasGetProperty returned {a}/{b}"))
            }
        })
    })
}

/// Tries each library in turn; the first that loads, exports `symbol` and answers
/// `version` wins and stays loaded. Never panics.
pub fn probe_lib(names: &[String], symbol: &str, version: impl Fn(&libloading::Library) -> Result<(i32, i32), String>) -> LibStatus {
    let mut tried = Vec::new();
    let sym = format!("{symbol}\0");
    for name in names {
        // SAFETY: loading a CUDA toolkit library runs its initialisers, as any CUDA program does.
        match unsafe { libloading::Library::new(name) } {
            Err(e) => tried.push(format!("{name}: {e}")),
            Ok(lib) => {
                if unsafe { lib.get::<unsafe extern "C" fn()>(sym.as_bytes()) }.is_err() {
                    tried.push(format!("{name}: loaded but does not export {symbol}"));
                    continue;
                }
                match version(&lib) {
                    Ok(v) => {
                        keep(lib);
                        return LibStatus::Present { library: name.clone(), version: v };
                    }
                    Err(e) => tried.push(format!("{name}: {e}")),
                }
            }
        }
    }
    LibStatus::Absent { reason: format!("could not load {} ({})", names.join(" or "), tried.join("; ")) }
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
    fn a_missing_toolkit_library_is_reported_not_panicked() {
        let s = probe_lib(&["liboxiflow-no-such-nvrtc.so.13".to_string()], "nvrtcCreateProgram", |_| Ok((0, 0)));
        match s {
            LibStatus::Absent { reason } => assert!(reason.contains("liboxiflow-no-such-nvrtc.so.13"), "{reason}"),
            other => panic!("expected Absent, got {other:?}"),
        }
        let s = probe_lib(&["libm.so.6".to_string()], "nvrtcCreateProgram", |_| Ok((0, 0)));
        assert!(matches!(&s, LibStatus::Absent { reason } if reason.contains("does not export nvrtcCreateProgram")), "{s:?}");
    }

    /// A present library reports a plausible version and names what loaded; an absent one
    /// names every library it tried (what a user reads to fix their setup).
    fn check_lib(what: &str, s: &LibStatus, names: &[&str], env: &str) {
        match s {
            LibStatus::Present { library, version } => {
                assert!(version.0 >= 9 && version.1 >= 0, "{what}: implausible version {version:?}");
                assert!(names.contains(&library.as_str()) || std::env::var(env).is_ok_and(|v| &v == library), "{what}: {library}");
            }
            LibStatus::Absent { reason } => {
                if std::env::var(env).map_or(true, |v| v.is_empty()) {
                    assert!(names.iter().all(|n| reason.contains(n)), "{what}: {reason}");
                }
            }
        }
    }

    #[test]
    fn toolkit_statuses_name_what_loaded_or_what_was_tried() {
        check_lib("NVRTC", nvrtc_status(), NVRTC_LIBRARIES, "OXIFLOW_NVRTC_LIB");
        check_lib("cuBLAS", cublas_status(), CUBLAS_LIBRARIES, "OXIFLOW_CUBLAS_LIB");
        println!("NVRTC: {:?}; cuBLAS: {:?}", nvrtc_status(), cublas_status());
    }

    #[test]
    fn the_cached_driver_status_is_what_probing_finds_now() {
        let cached = driver_status().clone();
        if cuda_disabled() {
            assert!(matches!(&cached, DriverStatus::Absent { reason } if reason.contains("OXIFLOW_DISABLE_CUDA")), "{cached:?}");
        } else {
            assert_eq!(cached, probe_libraries(DRIVER_LIBRARIES), "the cache must hold a fresh probe's answer");
        }
        match &cached {
            DriverStatus::Present { version, library } => {
                assert!(*version >= 9000 && DRIVER_LIBRARIES.contains(&library.as_str()), "{cached:?}");
                println!("CUDA driver present, version {version}");
            }
            DriverStatus::Absent { reason } => println!("no CUDA driver here: {reason}"),
        }
    }
}
