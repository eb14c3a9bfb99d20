//! # oxiflow-capi
//!
//! The C ABI of Oxiflow, called from Julia with `ccall` (docs/architecture.md says why not jlrs).
//! Conventions, all exports alike:
//! - every function returns an `int32_t` status: `0` on success, otherwise a TensorFlow
//!   status code (`3` invalid argument, `5` not found, `8` resource exhausted, `9` failed
//!   precondition, `12` unimplemented, `13` internal); [`oxf_last_error`] then gives the
//!   message. A Rust panic is caught in every export and reported as `13`; it never
//!   crosses the ABI. The unwinder is linked into the library (`build.rs` says why: the
//!   shared one aborted under Julia 1.5).
//! - handles (`OxGraph*`, `OxSession*`, `OxRunResult*`) are opaque numbers, not addresses,
//!   checked on every call and freed by their `*_free` function: a freed, foreign or
//!   made-up handle is status 3 naming it, never a read of freed memory (`handles.rs`);
//! - arrays the library reads come with the size of the memory they lie in (`data_bytes`,
//!   `OxTensorView.buffer_bytes`), and dims or strides reaching outside it are refused;
//! - nodes are `int64_t` ids, tensors `(node, output index)`; dtypes are TF `DataType`
//!   codes (`1` Float32, `2` Float64, `3` Int32, `9` Int64, `10` Bool, one byte each);
//! - a `const char**` out-parameter receives a NUL-terminated string owned by the library,
//!   valid until the next `oxf_` call on the same thread: copy it at once;
//! - arrays cross with their layout given explicitly (`col_major = 1` for Julia arrays),
//!   so element `[i, j]` is the same on both sides and nothing is transposed by accident;
//!   feeds may also cross with their strides (`OxTensorView.strides`), and a fetched value
//!   may be handed over as a `malloc`ed buffer the caller frees (`oxf_result_take`; the
//!   library's global allocator is the system's, see `handover.rs`).

// The exports are safe `extern "C" fn`s by design: C and Julia cannot call an `unsafe fn`
// any differently, and each export checks its pointers (null, sizes given with them)
// before it reads them, as the conventions above say.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use oxiflow_core::{OxiflowError, Result};
use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

mod config;
mod cuda;
mod gradients;
mod graph;
mod handles;
mod handover;
mod mpi;
mod optim;
mod profile;
mod session;

pub use config::*;
pub use cuda::*;
pub use gradients::*;
pub use graph::*;
pub use optim::*;
pub use profile::*;
pub use session::*;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
    static RETURNED: RefCell<CString> = RefCell::new(CString::default());
}

fn to_cstring(s: String) -> CString {
    CString::new(s).unwrap_or_else(|e| {
        let mut v = e.into_vec();
        v.retain(|&b| b != 0);
        CString::new(v).expect("NULs removed")
    })
}

/// Runs `f`, turning its error or panic into a status code and the thread's last error.
/// The first call also registers the real GPUs (a cached no-op afterwards), so every
/// entry point that creates a session or lists devices sees them.
pub(crate) fn guard(f: impl FnOnce() -> Result<()>) -> i32 {
    match catch_unwind(AssertUnwindSafe(|| {
        cuda::register_gpus();
        f()
    })) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            set_error(&e);
            e.code()
        }
        Err(p) => {
            let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_else(|| "unknown panic".into());
            set_error(&OxiflowError::Internal(format!("Oxiflow panicked: {msg}")));
            13
        }
    }
}

fn set_error(e: &OxiflowError) {
    let text = to_cstring(e.to_string());
    LAST_ERROR.with(|l| *l.borrow_mut() = text);
}

/// Stores `s` in thread-local storage and writes a pointer to it into `out`.
pub(crate) fn return_str(s: String, out: *mut *const c_char) -> Result<()> {
    if out.is_null() {
        return Err(OxiflowError::InvalidArgument("null output pointer".into()));
    }
    let c = to_cstring(s);
    RETURNED.with(|r| {
        *r.borrow_mut() = c;
        unsafe { *out = r.borrow().as_ptr() };
    });
    Ok(())
}

/// Reads a NUL-terminated UTF-8 string argument; `None` for a null pointer.
pub(crate) fn opt_str<'a>(p: *const c_char, what: &str) -> Result<Option<&'a str>> {
    if p.is_null() {
        return Ok(None);
    }
    unsafe { CStr::from_ptr(p) }.to_str().map(Some).map_err(|_| OxiflowError::InvalidArgument(format!("{what} is not valid UTF-8")))
}

/// Reads a required string argument.
pub(crate) fn req_str<'a>(p: *const c_char, what: &str) -> Result<&'a str> {
    opt_str(p, what)?.ok_or_else(|| OxiflowError::InvalidArgument(format!("{what} is null")))
}

/// Writes `v` through `out`, erroring on a null pointer.
pub(crate) fn put<T>(out: *mut T, v: T) -> Result<()> {
    if out.is_null() {
        return Err(OxiflowError::InvalidArgument("null output pointer".into()));
    }
    unsafe { out.write(v) };
    Ok(())
}

/// Borrows `n` elements at `p` (an empty slice when `n == 0`).
pub(crate) fn slice<'a, T>(p: *const T, n: i64, what: &str) -> Result<&'a [T]> {
    if n < 0 {
        return Err(OxiflowError::InvalidArgument(format!("{what}: negative length {n}")));
    }
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(OxiflowError::InvalidArgument(format!("{what} is null")));
    }
    Ok(unsafe { std::slice::from_raw_parts(p, n as usize) })
}

/// The message of the last failed call on this thread (empty when none failed).
/// The pointer stays valid until the next failing call on this thread.
#[no_mangle]
pub extern "C" fn oxf_last_error() -> *const c_char {
    LAST_ERROR.with(|l| l.borrow().as_ptr())
}

/// The library version, `"0.1.0"`; a static string.
#[no_mangle]
pub extern "C" fn oxf_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr() as *const c_char
}

/// Panics on purpose inside the ABI's panic guard and returns what the guard made of it:
/// status `13` with `oxf_last_error()` = `"internal error: Oxiflow panicked: oxf_panic_check"`. A binding
/// calls it to check that a panic inside the library is caught in its process instead of
/// aborting it (under Julia 1.5 it aborted until the library carried its own unwinder,
/// `build.rs`); the Julia test suite does, in a child process.
#[no_mangle]
pub extern "C" fn oxf_panic_check() -> i32 {
    guard(|| panic!("oxf_panic_check"))
}

/// The input names of op type `op` in its input order, one per line (TF's
/// `OpDef.input_arg`: `var`, `m`, `v`, ... for `ApplyAdam`); empty when the op does not name
/// its inputs. Status 5 (NotFound, TF's `Op type not registered`) for an unknown op.
#[no_mangle]
pub extern "C" fn oxf_op_inputs(op: *const c_char, out: *mut *const c_char) -> i32 {
    guard(|| {
        let def = oxiflow_core::ops::lookup(req_str(op, "op type")?)?;
        return_str(def.inputs.iter().map(|i| i.name).collect::<Vec<_>>().join("\n"), out)
    })
}

/// Canonical form of a device string (`/cpu:0` -> `/device:CPU:0`); status 3 with a message
/// quoting the string when it is malformed.
#[no_mangle]
pub extern "C" fn oxf_canonical_device(spec: *const c_char, out: *mut *const c_char) -> i32 {
    guard(|| return_str(oxiflow_core::device::spec::canonicalize(req_str(spec, "device spec")?)?, out))
}
