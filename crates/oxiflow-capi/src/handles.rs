//! Handles that cannot dangle: `OxGraph*`, `OxSession*`, `OxRunResult*` and
//! `OxGradientRun*` are not addresses but numbers the library hands out once,
//! `(serial << 4) | kind`, looked up in a registry of live objects on every call.
//!
//! What this buys over a raw `Box` pointer (TF's C API hands out raw pointers, and a stale
//! one is undefined behaviour there):
//! - **use after free and double free are errors**: a freed handle's serial is never handed
//!   out again, so a later call with it finds nothing and says the handle was freed, instead
//!   of reading freed memory or, after the allocator reused the address, another object;
//! - **a handle of the wrong kind** (a graph passed as a session) is named as such;
//! - **any number is safe to pass**: an arbitrary value is rejected, never dereferenced,
//!   which lets the property tests (`tests/abi_props.rs`) pass random handles;
//! - **freeing during a call is safe**: a call holds a reference to the object (`Arc`), so
//!   a session freed by one thread while another runs a step is dropped when the step ends.
//!
//! The cost is one lock and one ordered-map lookup per call (tens of nanoseconds).

use oxiflow_core::{OxiflowError, Result};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The next serial number; shared by all kinds, so no two live handles are equal.
static NEXT_SERIAL: AtomicUsize = AtomicUsize::new(1);

/// Bits of a handle that hold its kind.
const KIND_BITS: u32 = 4;

/// The live objects of one handle kind.
pub(crate) struct Registry<T> {
    /// The kind tag in the handle's low bits (distinct per registry, non-zero); its name in
    /// error messages is `KIND_NAMES[kind]`.
    kind: usize,
    live: Mutex<BTreeMap<usize, Arc<T>>>,
}

/// The names of the handle kinds by tag, for "a graph handle was passed as a session".
const KIND_NAMES: [&str; 5] = ["", "OxGraph", "OxSession", "OxRunResult", "OxGradientRun"];

impl<T> Registry<T> {
    /// An empty registry for handles of kind `kind` ([`GRAPH_KIND`], [`SESSION_KIND`],
    /// [`RESULT_KIND`], [`GRADIENT_RUN_KIND`]).
    pub(crate) const fn new(kind: usize) -> Self {
        Registry { kind, live: Mutex::new(BTreeMap::new()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<usize, Arc<T>>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers `value` and returns its new handle.
    pub(crate) fn insert(&self, value: T) -> *mut T {
        let serial = NEXT_SERIAL.fetch_add(1, Ordering::Relaxed);
        let handle = (serial << KIND_BITS) | self.kind;
        self.lock().insert(handle, Arc::new(value));
        handle as *mut T
    }

    /// The object behind `handle`, kept alive for as long as the caller holds it.
    /// Errors (InvalidArgument): a null handle, one already freed, one of another kind,
    /// a number that was never a handle.
    pub(crate) fn get(&self, handle: *const T) -> Result<Arc<T>> {
        let h = handle as usize;
        if let Some(v) = self.lock().get(&h) {
            return Ok(v.clone());
        }
        Err(self.stale(h))
    }

    /// Unregisters `handle`; the object is dropped here unless a call still holds it (then
    /// when that call ends). Null is ignored; a freed or unknown handle is an error.
    pub(crate) fn remove(&self, handle: *mut T) -> Result<()> {
        let h = handle as usize;
        if h == 0 {
            return Ok(());
        }
        let removed = self.lock().remove(&h);
        match removed {
            // dropped outside the lock: a session's drop joins its threads
            Some(v) => {
                drop(v);
                Ok(())
            }
            None => Err(self.stale(h)),
        }
    }

    /// Why `h` names no live object of this kind.
    fn stale(&self, h: usize) -> OxiflowError {
        let (name, kind, serial) = (KIND_NAMES[self.kind], h & ((1 << KIND_BITS) - 1), h >> KIND_BITS);
        let issued = serial > 0 && serial < NEXT_SERIAL.load(Ordering::Relaxed);
        let msg = if h == 0 {
            format!("null {name} handle")
        } else if issued && kind == self.kind {
            format!("{name} handle {h:#x} was freed already (use after free or double free)")
        } else if issued && kind < KIND_NAMES.len() && kind != 0 {
            format!("{name} handle expected, got {} handle {h:#x}", KIND_NAMES[kind])
        } else {
            format!("{h:#x} is not an {name} handle")
        };
        OxiflowError::InvalidArgument(msg)
    }
}

/// Kind tags: the index of each handle type in the kind names.
pub(crate) const GRAPH_KIND: usize = 1;
pub(crate) const SESSION_KIND: usize = 2;
pub(crate) const RESULT_KIND: usize = 3;
pub(crate) const GRADIENT_RUN_KIND: usize = 4;

/// Frees through `registry`, recording a stale handle as the thread's last error: the
/// `*_free` exports return its status (0, or 3 for a freed or unknown handle).
pub(crate) fn free<T>(registry: &Registry<T>, handle: *mut T) -> i32 {
    crate::guard(|| registry.remove(handle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_handles_are_never_reissued_and_say_so() {
        static R: Registry<u32> = Registry::new(GRAPH_KIND);
        static S: Registry<u32> = Registry::new(SESSION_KIND);
        let a = R.insert(7);
        assert_eq!(*R.get(a).unwrap(), 7);
        R.remove(a).unwrap();
        let msg = R.get(a).unwrap_err().to_string();
        assert!(msg.contains("freed already"), "{msg}");
        assert!(R.remove(a).unwrap_err().to_string().contains("freed already"));
        let b = R.insert(8);
        assert_ne!(a, b);
        assert!(R.get(a).is_err());
        // a graph handle given where a session is expected
        let msg = S.get(b as *const u32).unwrap_err().to_string();
        assert!(msg.contains("OxSession handle expected, got OxGraph handle"), "{msg}");
        assert!(R.get(std::ptr::null()).unwrap_err().to_string().contains("null OxGraph handle"));
        let msg = R.get(usize::MAX as *const u32).unwrap_err().to_string();
        assert!(msg.contains("is not an OxGraph handle"), "{msg}");
        R.remove(b).unwrap();
        assert!(R.remove(std::ptr::null_mut()).is_ok());
    }

    #[test]
    fn an_object_outlives_its_handle_while_a_call_holds_it() {
        static R: Registry<Vec<u8>> = Registry::new(RESULT_KIND);
        let h = R.insert(vec![1, 2, 3]);
        let held = R.get(h).unwrap();
        R.remove(h).unwrap();
        assert_eq!(*held, vec![1, 2, 3]);
        assert_eq!(Arc::strong_count(&held), 1);
    }
}
