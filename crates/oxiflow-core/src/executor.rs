//! The executor: runs a placed, partitioned step ([`Plan`]) on a thread pool.
//!
//! A plan is a DAG of steps: one per node to run, plus one copy step per (tensor,
//! destination device) pair on every edge that crosses devices (TF's `_Send`/`_Recv` pair,
//! here one `_Recv` step on the destination). Each step has a pending count; a worker that
//! finishes a step decrements its successors' counts, runs the first that becomes ready
//! itself (no hand-off: a chain runs on one thread, like TF's inline-ready optimisation)
//! and spawns the others on the pool.

use crate::device::DeviceSet;
use crate::error::{OxiflowError, Result};
use crate::graph::Node;
use crate::ops::{KernelCtx, StateAccess};
use crate::tensor::Tensor;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// What a step does.
#[derive(Debug)]
pub enum StepKind {
    /// Run a node's kernel.
    Op(Arc<Node>),
    /// Copy the tensor in `inputs[0]` from device `from` to the step's device.
    Copy { from: usize, tensor: String },
}

/// One unit of work on one device.
#[derive(Debug)]
pub struct Step {
    pub kind: StepKind,
    pub device: usize,
    /// Slots read (data inputs, in order; reference inputs excluded).
    pub inputs: Vec<usize>,
    /// First slot written; outputs go to `outputs..outputs + num_outputs`.
    pub outputs: usize,
    pub num_outputs: usize,
    pub successors: Vec<usize>,
    pub pending: u32,
}

/// A placed, partitioned step, ready to run many times.
#[derive(Debug, Default)]
pub struct Plan {
    pub steps: Vec<Step>,
    pub num_slots: usize,
    /// Slots filled from feeds, with the device each feed is placed on.
    pub feed_slots: Vec<(usize, usize)>,
    /// Slot and device of each fetch.
    pub fetch_slots: Vec<(usize, usize)>,
}

/// Timing of one step, recorded when tracing (nanoseconds since the run started).
#[derive(Clone, Debug)]
pub struct StepTiming {
    pub step: usize,
    pub thread: usize,
    pub start_ns: u64,
    pub end_ns: u64,
    pub bytes: usize,
}

struct RunCtx<'a> {
    plan: &'a Plan,
    devices: &'a DeviceSet,
    state: &'a dyn StateAccess,
    slots: Vec<OnceLock<Tensor>>,
    pending: Vec<AtomicU32>,
    failed: AtomicBool,
    error: Mutex<Option<OxiflowError>>,
    t0: Instant,
    timings: Option<Mutex<Vec<StepTiming>>>,
}

impl RunCtx<'_> {
    fn fail(&self, e: OxiflowError) {
        self.failed.store(true, Ordering::Release);
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(e);
        }
    }

    fn input(&self, slot: usize) -> Result<&Tensor> {
        self.slots[slot].get().ok_or_else(|| OxiflowError::Internal(format!("slot {slot} read before it was written")))
    }

    fn exec(&self, s: usize) -> Result<()> {
        let step = &self.plan.steps[s];
        let start = self.timings.as_ref().map(|_| self.t0.elapsed().as_nanos() as u64);
        let device = &self.devices.devices[step.device];
        let outs = match &step.kind {
            StepKind::Op(node) => {
                let inputs: Vec<Tensor> = step.inputs.iter().map(|&i| self.input(i).cloned()).collect::<Result<_>>()?;
                let ctx = KernelCtx { node, inputs: &inputs, state: self.state };
                let outs = catch_unwind(AssertUnwindSafe(|| device.compute(&ctx))).unwrap_or_else(|p| {
                    let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
                    Err(OxiflowError::Internal(format!(
                        "kernel of {} '{}' panicked: {}",
                        node.op.name,
                        node.name,
                        msg.unwrap_or_default()
                    )))
                })?;
                if outs.len() != node.outputs.len() || outs.iter().zip(&node.outputs).any(|(t, tt)| t.dtype() != tt.dtype || t.dims() != tt.shape.dims()) {
                    return Err(OxiflowError::Internal(format!(
                        "kernel of {} '{}' returned {:?}, expected {:?}",
                        node.op.name,
                        node.name,
                        outs.iter().map(|t| (t.dtype(), t.shape())).collect::<Vec<_>>(),
                        node.outputs
                    )));
                }
                outs
            }
            StepKind::Copy { from, .. } => {
                let t = self.input(step.inputs[0])?;
                vec![device.copy_from(t, self.devices.devices[*from].as_ref())?]
            }
        };
        let bytes = if self.timings.is_some() { outs.iter().map(Tensor::num_bytes).sum() } else { 0 };
        for (i, t) in outs.into_iter().enumerate() {
            let _ = self.slots[step.outputs + i].set(t);
        }
        if let (Some(tm), Some(start)) = (&self.timings, start) {
            let end = self.t0.elapsed().as_nanos() as u64;
            let thread = rayon::current_thread_index().unwrap_or(0);
            tm.lock().unwrap().push(StepTiming { step: s, thread, start_ns: start, end_ns: end.max(start + 1), bytes });
        }
        Ok(())
    }

    fn run_from<'s>(&'s self, mut s: usize, scope: &rayon::Scope<'s>) {
        loop {
            if self.failed.load(Ordering::Acquire) {
                return;
            }
            if let Err(e) = self.exec(s) {
                self.fail(e);
                return;
            }
            let mut next = None;
            for &succ in &self.plan.steps[s].successors {
                if self.pending[succ].fetch_sub(1, Ordering::AcqRel) == 1 {
                    if next.is_none() {
                        next = Some(succ);
                    } else {
                        scope.spawn(move |sc| self.run_from(succ, sc));
                    }
                }
            }
            match next {
                Some(n) => s = n,
                None => return,
            }
        }
    }
}

/// Result of [`execute`]: the fetched tensors (still on their devices) and, when traced,
/// per-step timings plus the run's start time.
pub struct Execution {
    pub fetched: Vec<Tensor>,
    pub timings: Option<Vec<StepTiming>>,
    pub start: Instant,
}

/// Runs `plan` with `feeds` (one tensor per `plan.feed_slots`, already on its device).
/// The first error raised by any step stops the run and is returned.
pub fn execute(
    plan: &Plan,
    devices: &DeviceSet,
    feeds: Vec<Tensor>,
    state: &dyn StateAccess,
    pool: &rayon::ThreadPool,
    trace: bool,
) -> Result<Execution> {
    let ctx = RunCtx {
        plan,
        devices,
        state,
        slots: (0..plan.num_slots).map(|_| OnceLock::new()).collect(),
        pending: plan.steps.iter().map(|s| AtomicU32::new(s.pending)).collect(),
        failed: AtomicBool::new(false),
        error: Mutex::new(None),
        t0: Instant::now(),
        timings: if trace { Some(Mutex::new(Vec::with_capacity(plan.steps.len()))) } else { None },
    };
    for (&(slot, _), t) in plan.feed_slots.iter().zip(feeds) {
        let _ = ctx.slots[slot].set(t);
    }
    let ready: Vec<usize> = (0..plan.steps.len()).filter(|&i| plan.steps[i].pending == 0).collect();
    if let Some((&first, rest)) = ready.split_first() {
        let c = &ctx;
        pool.scope(|scope| {
            for &r in rest {
                scope.spawn(move |sc| c.run_from(r, sc));
            }
            c.run_from(first, scope);
        });
    }
    if let Some(e) = ctx.error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let fetched = plan
        .fetch_slots
        .iter()
        .map(|&(slot, _)| {
            ctx.slots[slot].get().cloned().ok_or_else(|| OxiflowError::Internal(format!("fetch slot {slot} was not computed")))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Execution { fetched, timings: ctx.timings.map(|m| m.into_inner().unwrap()), start: ctx.t0 })
}
