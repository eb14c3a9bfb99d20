//! The values a session keeps in its variables between runs (TF1's `DirectSession` resource
//! manager holding each `VariableV2`'s tensor), and their place in GPU memory.
//!
//! A variable placed on a device that accounts its memory (a GPU, emulated or real; device.rs
//! [`TensorMemory`](crate::device::TensorMemory)) has its value counted in that device's
//! account from the assignment that stores it until the value is replaced (the old value is
//! then released, once no tensor of a run still shares its buffer) or the session is
//! dropped, as the value of a TF variable occupies GPU memory for the session's lifetime. An
//! assignment that does not fit fails with TF's `ResourceExhausted` (device, request, bytes
//! in use) and leaves the old value in place.

use crate::device::DeviceSet;
use crate::error::{OxiflowError, Result};
use crate::graph::NodeId;
use crate::ops::StateAccess;
use crate::tensor::Tensor;
use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

/// Variable values by `VariableV2` node, with the device each accounted variable lives on.
///
/// Other per-node state kernels keep here (a random op's stream counter) is host
/// bookkeeping and is never accounted: only nodes registered with
/// [`VariableStore::place`] are.
///
/// One mutex guards the maps, held only to look up, insert or take out a value. An
/// in-place update ([`StateAccess::update_variables`]) takes its variables out and marks
/// them busy, then computes without the mutex, so updates of different variables (a
/// step's optimizer ops) run at the same time, as TF's per-variable locks let them; a read,
/// assignment or update of a busy variable waits on `idle` until its update is done.
pub struct VariableStore {
    devices: DeviceSet,
    inner: Mutex<Inner>,
    idle: Condvar,
    cache: ResourceCache,
}

#[derive(Default)]
struct Inner {
    values: HashMap<NodeId, Tensor>,
    /// Device index (in `devices`) of each placed variable whose device accounts memory.
    homes: HashMap<NodeId, usize>,
    /// Variables taken out of `values` by an update in progress.
    busy: HashSet<NodeId>,
}

impl VariableStore {
    /// An empty store for a session with these devices.
    pub fn new(devices: DeviceSet) -> VariableStore {
        VariableStore { devices, inner: Mutex::new(Inner::default()), idle: Condvar::new(), cache: ResourceCache::default() }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The maps, once none of `vars` is busy (taken out by an update in progress).
    fn lock_idle(&self, vars: &[NodeId]) -> MutexGuard<'_, Inner> {
        let mut g = self.lock();
        while vars.iter().any(|v| g.busy.contains(v)) {
            g = self.idle.wait(g).unwrap_or_else(|p| p.into_inner());
        }
        g
    }

    /// Records that variable `var` was placed on device `device` (an index into the session's
    /// devices): from now on its values count in that device's memory account, if it has one.
    /// A variable keeps its first placement (a session never moves a placed node).
    pub fn place(&self, var: NodeId, device: usize) {
        if self.devices.devices.get(device).is_some_and(|d| d.memory().is_some()) {
            self.lock().homes.entry(var).or_insert(device);
        }
    }
}

impl StateAccess for VariableStore {
    fn read_variable(&self, var: NodeId) -> Option<Tensor> {
        self.lock_idle(&[var]).values.get(&var).cloned()
    }

    /// Stores `value` in `var`. On an accounted device the new value is counted first (a
    /// buffer the device already holds, such as the output of the kernel that computed it
    /// there, is not counted twice); over the limit this fails with `ResourceExhausted` and the
    /// old value stays. Then the old value is released.
    fn assign_variable(&self, var: NodeId, value: Tensor) -> Result<()> {
        let mut g = self.lock_idle(&[var]);
        let memory = g.homes.get(&var).and_then(|&d| self.devices.devices.get(d)).and_then(|d| d.memory());
        if let Some(m) = memory {
            m.allocate(std::slice::from_ref(&value))?;
        }
        let old = g.values.insert(var, value);
        if let (Some(m), Some(old)) = (memory, old) {
            m.free(std::slice::from_ref(&old));
        }
        Ok(())
    }

    /// In place for variables outside accounted device memory (whose buffers an account
    /// tracks by identity); `None` for the others, and for unknown or repeated `vars`. The
    /// values are taken out and marked busy while `f` runs without the store's mutex.
    fn update_variables(&self, vars: &[NodeId], f: &mut dyn FnMut(&mut [&mut Tensor]) -> Result<()>) -> Option<Result<Vec<Tensor>>> {
        let mut g = self.lock_idle(vars);
        let distinct = vars.iter().enumerate().all(|(i, v)| !vars[..i].contains(v));
        if !distinct || vars.iter().any(|v| g.homes.contains_key(v) || !g.values.contains_key(v)) {
            return None;
        }
        // Put back by the guard, also when `f` fails or panics; waiting readers wake then.
        struct Back<'a> {
            store: &'a VariableStore,
            taken: Vec<(NodeId, Tensor)>,
        }
        impl Drop for Back<'_> {
            fn drop(&mut self) {
                let mut g = self.store.lock();
                for (v, t) in self.taken.drain(..) {
                    g.busy.remove(&v);
                    g.values.insert(v, t);
                }
                drop(g);
                self.store.idle.notify_all();
            }
        }
        let taken: Vec<(NodeId, Tensor)> = vars.iter().filter_map(|v| g.values.remove(v).map(|t| (*v, t))).collect();
        g.busy.extend(vars.iter().copied());
        drop(g);
        let mut back = Back { store: self, taken };
        let mut ts: Vec<&mut Tensor> = back.taken.iter_mut().map(|(_, t)| t).collect();
        let r = f(&mut ts);
        Some(r.map(|()| back.taken.iter().map(|(_, t)| t.clone()).collect()))
    }

    fn resource_cache(&self) -> Option<&ResourceCache> {
        Some(&self.cache)
    }
}

/// Objects that kernels compute once and reuse across nodes and runs of one session (TF's
/// resource manager, here for `SparseSolve`'s factorizations), keyed by a hash of what they
/// were computed from; the owner checks a hit against its full key. It keeps the
/// [`ResourceCache::CAPACITY`] most recently used entries and is dropped with the session.
/// Concurrent requests for one key compute it once: the others wait for that result.
#[derive(Default)]
pub struct ResourceCache {
    entries: Mutex<Vec<(u64, Slot)>>,
}

/// One cache entry: empty while its first caller computes it, then the object or the error.
type Slot = Arc<OnceLock<Result<Arc<dyn Any + Send + Sync>>>>;

impl ResourceCache {
    /// Entries kept (most recently used first).
    pub const CAPACITY: usize = 4;

    /// The object stored under `key`, computed by `make` when absent (the slot is reserved
    /// first, so concurrent callers with the same key wait for one computation). A `make`
    /// that fails stores nothing: its error goes to it and to those waiting on it.
    pub fn get_or_try_insert<T: Any + Send + Sync>(&self, key: u64, make: impl FnOnce() -> Result<T>) -> Result<Arc<T>> {
        let slot = {
            let mut e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            let cell = match e.iter().position(|(k, _)| *k == key) {
                Some(i) => e.remove(i).1,
                None => Arc::new(OnceLock::new()),
            };
            e.insert(0, (key, cell.clone()));
            e.truncate(Self::CAPACITY);
            cell
        };
        let v = slot.get_or_init(|| make().map(|v| Arc::new(v) as Arc<dyn Any + Send + Sync>)).clone();
        match v {
            Ok(v) => v.downcast::<T>().map_err(|_| OxiflowError::Internal(format!("resource cache entry {key:#x} holds another type"))),
            Err(err) => {
                self.forget(key);
                Err(err)
            }
        }
    }

    /// Drops the entry under `key`, if any.
    pub fn forget(&self, key: u64) {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).retain(|(k, _)| *k != key);
    }

    /// Number of entries held (tests).
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for VariableStore {
    /// The session is going away: its variables' values leave their devices' accounts.
    fn drop(&mut self) {
        let g = self.inner.get_mut().unwrap_or_else(|p| p.into_inner());
        for (var, value) in g.values.drain() {
            if let Some(m) = g.homes.get(&var).and_then(|&d| self.devices.devices.get(d)).and_then(|d| d.memory()) {
                m.free(std::slice::from_ref(&value));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Layout;
    use std::sync::mpsc::channel;
    use std::time::Duration;

    fn scalar(v: f64) -> Tensor {
        Tensor::from_vec(&[], vec![v], Layout::RowMajor).unwrap()
    }

    /// While an update of variable 1 is computing: variable 2 can be read, assigned and
    /// updated (the old store-wide lock blocked all three), and a read of variable 1 waits
    /// and then sees the updated value.
    #[test]
    fn an_update_holds_only_its_own_variables() {
        let store = VariableStore::new(DeviceSet::new(1, 0));
        store.assign_variable(1, scalar(1.0)).unwrap();
        store.assign_variable(2, scalar(2.0)).unwrap();
        let (started_tx, started) = channel();
        let (release, release_rx) = channel::<()>();
        let (read_tx, read) = channel();
        let store = &store;
        std::thread::scope(|s| {
            s.spawn(move || {
                let r = store.update_variables(&[1], &mut |ts| {
                    started_tx.send(()).unwrap();
                    release_rx.recv().unwrap();
                    *ts[0] = scalar(10.0);
                    Ok(())
                });
                assert_eq!(r.unwrap().unwrap()[0].to_f64_vec(), vec![10.0]);
            });
            started.recv_timeout(Duration::from_secs(10)).expect("the update started");
            s.spawn(move || read_tx.send(store.read_variable(1).unwrap().to_f64_vec()).unwrap());
            let (done_tx, done) = channel();
            s.spawn(move || {
                let v = store.read_variable(2).unwrap().to_f64_vec();
                store.assign_variable(2, scalar(3.0)).unwrap();
                let u = store.update_variables(&[2], &mut |ts| {
                    *ts[0] = scalar(4.0);
                    Ok(())
                });
                done_tx.send((v, u.unwrap().unwrap()[0].to_f64_vec())).unwrap();
            });
            let (v, u) = done.recv_timeout(Duration::from_secs(10)).expect("variable 2 is not held by the update of variable 1");
            assert_eq!((v, u), (vec![2.0], vec![4.0]));
            assert!(read.recv_timeout(Duration::from_millis(200)).is_err(), "a read of variable 1 during its update must wait");
            release.send(()).unwrap();
            assert_eq!(read.recv_timeout(Duration::from_secs(10)).expect("the read ends with the update"), vec![10.0]);
        });
    }

    /// A failed or panicking update puts its values back and frees its variables.
    #[test]
    fn a_failed_update_leaves_its_variables_readable() {
        let store = VariableStore::new(DeviceSet::new(1, 0));
        store.assign_variable(7, scalar(1.5)).unwrap();
        let r = store.update_variables(&[7], &mut |_| Err(OxiflowError::InvalidArgument("no".into())));
        assert!(r.unwrap().is_err());
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| store.update_variables(&[7], &mut |_| panic!("kernel bug"))));
        assert!(caught.is_err());
        assert_eq!(store.read_variable(7).unwrap().to_f64_vec(), vec![1.5]);
        assert!(store.update_variables(&[7, 7], &mut |_| Ok(())).is_none(), "repeated variables");
        assert!(store.update_variables(&[8], &mut |_| Ok(())).is_none(), "an uninitialized variable");
    }
}
