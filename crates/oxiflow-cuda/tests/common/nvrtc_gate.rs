//! The gate of tests that need NVRTC but no GPU (the kernels' compile checks), shared by
//! `tests/kernels_compile.rs` and `src/launch/movement/tests.rs` (so it names no crate
//! path: callers pass what the probes found).
//!
//! Such a test runs where NVRTC loads. Without NVRTC it may skip only on a machine without
//! a GPU, and only when `OXIFLOW_REQUIRE_GPU` is not `1`: where a GPU is present the
//! kernels must build, so a missing NVRTC fails the test with the reason and the fix.

#![allow(dead_code)]

/// Set by `make test`, which installs NVRTC first: there a missing NVRTC is a broken setup,
/// and the compile checks fail instead of skipping.
pub const REQUIRE_NVRTC: &str = "OXIFLOW_REQUIRE_NVRTC";

/// How to get NVRTC, for failure messages.
pub const NVRTC_FIX: &str = "fix: `make nvrtc` (installs pip package nvidia-cuda-nvrtc into .deps/nvrtc), then run with \
     LD_LIBRARY_PATH=$PWD/.deps/nvrtc/nvidia/cu13/lib (as `make test` does) or \
     OXIFLOW_NVRTC_LIB=$PWD/.deps/nvrtc/nvidia/cu13/lib/libnvrtc.so.13";

/// `true`: NVRTC loaded (`nvrtc` is `Ok(what loaded)`), run the test. `false`: NVRTC is
/// missing, no GPU is here (`gpu_count()` is `Err(why)`) and neither `require_var` nor
/// [`REQUIRE_NVRTC`] is `1`; prints `skipped: <test>: <reason>` first. Panics when NVRTC is missing and
/// a GPU is present or `require_var` is `1`.
pub fn nvrtc_or_skip(test: &str, nvrtc: Result<String, String>, gpu_count: impl FnOnce() -> Result<usize, String>, require_var: &str) -> bool {
    let reason = match nvrtc {
        Ok(found) => {
            println!("{test}: NVRTC {found}");
            return true;
        }
        Err(reason) => reason,
    };
    for var in [require_var, REQUIRE_NVRTC] {
        if std::env::var(var).is_ok_and(|v| v == "1") {
            panic!("{test}: {var}=1 but NVRTC cannot be loaded: {reason}\n{NVRTC_FIX}");
        }
    }
    match gpu_count() {
        Ok(n) => panic!("{test}: {n} GPU(s) present but NVRTC, which builds the kernels, cannot be loaded: {reason}\n{NVRTC_FIX}"),
        Err(why) => {
            println!("skipped: {test}: NVRTC cannot be loaded ({reason}) and there is no CUDA GPU ({why})");
            false
        }
    }
}
