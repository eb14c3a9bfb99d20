//! Links a private copy of GCC's unwinder (`libgcc_eh.a`) into `liboxiflow.so`.
//!
//! Why: a panic inside the library is caught (`catch_unwind`) and returned as an error
//! status. Unwinding through the shared `libgcc_s.so.1` aborted the process under Julia
//! 1.5 (Debian's 1.5.3): `abort()` was called from inside libgcc's
//! `_Unwind_RaiseException`, in its search for unwind tables. libjulia registers the frames
//! of its JIT-compiled code with that same `libgcc_s` (`__register_frame`), and the search
//! goes through those registrations first; the same panic driven from Python's ctypes was
//! caught. With the unwinder's code linked in (its symbols stay local to the library: the
//! cdylib exports only `oxf_*`), the library's unwinder has no registrations of its own,
//! finds the library's tables through `dl_iterate_phdr`, and a panic becomes an
//! `InternalError` in Julia too (test/robustness.jl checks it in a child process).
//!
//! `libgcc_eh.a` comes before std's `-lgcc_s` on the link line (a crate's own native
//! libraries precede its dependencies'), so the static copy resolves the `_Unwind_*`
//! references. Only on Linux/glibc targets; where the C compiler has no `libgcc_eh.a`
//! (clang-only toolchains) the build goes on with the shared unwinder and says so.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os != "linux" || env != "gnu" {
        return;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let found = Command::new(&cc)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| PathBuf::from(s.trim()))
        .filter(|p| p.is_absolute() && p.is_file());
    match found {
        Some(path) => {
            let dir = path.parent().expect("an absolute file path has a parent");
            println!("cargo:rustc-link-search=native={}", dir.display());
            println!("cargo:rustc-link-lib=static=gcc_eh");
        }
        None => println!("cargo:warning={cc} has no libgcc_eh.a: liboxiflow.so uses libgcc_s's unwinder, and a panic inside it may abort a Julia 1.5 process"),
    }
}
