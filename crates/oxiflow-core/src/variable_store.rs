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
use crate::error::Result;
use crate::graph::NodeId;
use crate::ops::StateAccess;
use crate::tensor::Tensor;
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

/// Variable values by `VariableV2` node, with the device each accounted variable lives on.
///
/// Other per-node state kernels keep here (a random op's stream counter) is host
/// bookkeeping and is never accounted: only nodes registered with
/// [`VariableStore::place`] are.
pub struct VariableStore {
    devices: DeviceSet,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    values: HashMap<NodeId, Tensor>,
    /// Device index (in `devices`) of each placed variable whose device accounts memory.
    homes: HashMap<NodeId, usize>,
}

impl VariableStore {
    /// An empty store for a session with these devices.
    pub fn new(devices: DeviceSet) -> VariableStore {
        VariableStore { devices, inner: Mutex::new(Inner::default()) }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
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
        self.lock().values.get(&var).cloned()
    }

    /// Stores `value` in `var`. On an accounted device the new value is counted first (a
    /// buffer the device already holds, such as the output of the kernel that computed it
    /// there, is not counted twice); over the limit this fails with `ResourceExhausted` and the
    /// old value stays. Then the old value is released.
    fn assign_variable(&self, var: NodeId, value: Tensor) -> Result<()> {
        let mut g = self.lock();
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
    /// tracks by identity); `None` for the others, and for unknown or repeated `vars`.
    fn update_variables(&self, vars: &[NodeId], f: &mut dyn FnMut(&mut [&mut Tensor]) -> Result<()>) -> Option<Result<Vec<Tensor>>> {
        let mut g = self.lock();
        let distinct = vars.iter().enumerate().all(|(i, v)| !vars[..i].contains(v));
        if !distinct || vars.iter().any(|v| g.homes.contains_key(v) || !g.values.contains_key(v)) {
            return None;
        }
        // Taken out of the map while `f` runs (the lock is held: no reader sees the gap) and
        // put back by the guard, also when `f` fails or panics.
        struct Back<'a> {
            values: &'a mut HashMap<NodeId, Tensor>,
            taken: Vec<(NodeId, Tensor)>,
        }
        impl Drop for Back<'_> {
            fn drop(&mut self) {
                self.values.extend(self.taken.drain(..));
            }
        }
        let values = &mut g.values;
        let taken = vars.iter().filter_map(|v| values.remove(v).map(|t| (*v, t))).collect();
        let mut back = Back { values, taken };
        let mut ts: Vec<&mut Tensor> = back.taken.iter_mut().map(|(_, t)| t).collect();
        let r = f(&mut ts);
        Some(r.map(|()| back.taken.iter().map(|(_, t)| t.clone()).collect()))
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
