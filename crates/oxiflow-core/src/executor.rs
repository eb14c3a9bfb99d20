//! The executor: runs a placed, partitioned step ([`Plan`]) on a thread pool.
//!
//! A plan is a DAG of steps: one per node to run, plus one copy step per (tensor,
//! destination device) pair on every edge that crosses devices (TF's `_Send`/`_Recv` pair,
//! here one `_Recv` step on the destination). Each step has a pending count; a worker that
//! finishes a step decrements its successors' counts, runs the first that becomes ready
//! itself (no hand-off: a chain runs on one thread, like TF's inline-ready optimisation)
//! and spawns the others on the pool.
//!
//! Per-step cost is kept low (docs/performance/engine.md): a tensor slot is freed as soon as its
//! last reader has run (as TF's executor does), so the allocator recycles the same blocks
//! from its thread cache; a single-input kernel borrows its input from the slot without a
//! clone, and multi-input steps reuse one buffer per worker; the per-run slot and counter
//! arrays are kept with the plan and reused by later runs; one `catch_unwind` covers a
//! worker's whole chain of steps. A step whose only successor is the only reader of its
//! outputs hands them over in the worker, without its cell (`Derived::direct`), and the
//! rank-0 tensors such a successor has consumed are offered to the next kernel as its
//! output buffer (`ops::offer_spare`), so a chain of scalar steps allocates nothing.

use crate::device::DeviceSet;
use crate::error::{OxiflowError, Result};
use crate::function::InnerStep;
use crate::graph::Node;
use crate::ops::{offer_spare, smallvec, KernelCtx, Outputs, StateAccess};
use crate::profile::NodeExecStats;
use crate::tensor::Tensor;
use std::cell::{Cell, UnsafeCell};
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
    /// An op step on a GPU that runs its CPU kernel on the host
    /// ([`crate::ops::OpDef::runs_on_host`], [`crate::function::run_host_launched`]): decided
    /// when the plan is built, from the op, the device type and the static dtypes.
    pub on_host: bool,
    /// Slots read (data inputs, in order; reference inputs excluded).
    pub inputs: Vec<usize>,
    /// First slot written; outputs go to `outputs..outputs + num_outputs`.
    pub outputs: usize,
    pub num_outputs: usize,
    pub successors: Vec<usize>,
    pub pending: u32,
}

/// A placed, partitioned step, ready to run many times.
///
/// Build it completely (steps, slots, feeds, fetches) before its first [`execute`]: the
/// first run derives per-slot reader counts and the ready list from it and caches them.
#[derive(Debug, Default)]
pub struct Plan {
    pub steps: Vec<Step>,
    pub num_slots: usize,
    /// Slots filled from feeds, with the device each feed is placed on.
    pub feed_slots: Vec<(usize, usize)>,
    /// Slot and device of each fetch.
    pub fetch_slots: Vec<(usize, usize)>,
    /// Derived from the fields above on the first run.
    derived: OnceLock<Derived>,
    /// Slot and counter arrays of finished runs, reused by the next ones.
    scratch: Mutex<Vec<Scratch>>,
}

impl Plan {
    /// `true` when the plan's steps can only run one after another (at most one step
    /// without predecessors, at most one successor per step: a chain, or nothing to run).
    /// A run of such a plan needs no worker thread: [`execute`] then runs it on
    /// the caller's thread, sparing the hand-off to the pool and back (most of a tiny
    /// run's time). The plan must be complete (see [`Plan`]).
    pub fn is_chain(&self) -> bool {
        self.derived.get_or_init(|| Derived::of(self)).chain
    }

    /// `true` when a run of the plan runs on the caller's thread: a chain
    /// ([`Plan::is_chain`]); a small plan, whose steps together cost less than handing
    /// them to the pool and back (about 20 µs on the project's VM, where a run of
    /// `constant(1.0) + 1`, two source steps, took 26 µs through the pool and 3 µs inline):
    /// at most [`INLINE_MAX_STEPS`] op steps whose outputs' static sizes add up to at most
    /// [`INLINE_MAX_BYTES`], and no copies between devices; or a plan with one expensive
    /// step among inexpensive ones ([`crate::ops::OpDef::inexpensive`]: variable reads,
    /// constants), where no two steps can usefully run at once (a 256³ `MatMul` of two
    /// variables from Julia: 134 GFLOP/s through the pool, 150 on the caller). The plan
    /// must be complete.
    pub fn runs_inline(&self) -> bool {
        self.derived.get_or_init(|| Derived::of(self)).inline
    }

    /// `true` when a run of the plan with a worker pool of `pool_threads` runs on
    /// the caller's thread: when it [`runs_inline`](Plan::runs_inline), and whatever its
    /// shape with a one-thread pool (`inter_op_parallelism_threads = 1`), where the pool
    /// would run the steps one after another too. Handing a run to a sleeping worker and
    /// waking the caller at its end cost about 100 µs on the project's VM (a 256³ f32
    /// `MatMul` from Julia: 505 µs a run through the pool, 405 µs on the caller).
    pub fn runs_on_caller(&self, pool_threads: usize) -> bool {
        pool_threads == 1 || self.runs_inline()
    }
}

/// Reader count of a cell that must survive the run (it holds a fetch).
const KEEP: u32 = u32::MAX;

/// Where a slot's tensor lives during a run: the output vector (cell) of the step that
/// produces it, or a feed's cell, and its index there.
#[derive(Copy, Clone, Debug)]
struct SlotSource {
    cell: u32,
    index: u32,
}

/// Source of a slot that nothing writes.
const NO_SOURCE: SlotSource = SlotSource { cell: u32::MAX, index: 0 };

/// What every run of a plan needs that depends only on the plan.
#[derive(Debug)]
struct Derived {
    /// Initial pending count of each step.
    pending: Vec<u32>,
    /// Cell and index of each slot. Step `s` writes cell `s`; feed `j` is cell `steps + j`.
    source: Vec<SlotSource>,
    /// Number of step inputs reading each cell's tensors ([`KEEP`] for cells with a fetch).
    readers: Vec<u32>,
    /// Steps with no predecessor.
    ready: Vec<usize>,
    /// Cells still holding tensors after a successful run: fetched or never read.
    leftover: Vec<usize>,
    /// At most one step without predecessors and at most one successor per step: the
    /// steps can only run one after another ([`Plan::is_chain`]).
    chain: bool,
    /// A run runs on the caller's thread ([`Plan::runs_inline`]).
    inline: bool,
    /// For each step, the step its outputs are handed to directly ([`NO_STEP`]: none).
    /// A step whose only successor has it as only predecessor and is the only reader of
    /// its outputs, through a single input, passes them on in the worker's hands: the
    /// cell is never written, and the successor runs next on the same worker.
    direct: Vec<u32>,
    /// For each step, whether its outputs' static shapes add up to at least
    /// [`CHECK_MIN_BYTES`] (or overflow): [`check_outputs_fit`] runs before its kernel.
    large: Vec<bool>,
}

/// Most op steps of a small plan that runs on the caller's thread ([`Plan::runs_inline`]).
pub const INLINE_MAX_STEPS: usize = 256;

/// Most bytes all outputs of a small plan add up to ([`Plan::runs_inline`]).
pub const INLINE_MAX_BYTES: usize = 64 << 10;

/// Outputs of at least this many bytes are checked before their kernel runs.
const CHECK_MIN_BYTES: usize = 1 << 28;

/// Bytes of a `dtype` tensor of `shape`, `None` when the size overflows `isize`
/// ([`crate::strided::element_count`]'s limit).
fn static_bytes(tt: &crate::graph::TensorType) -> Option<usize> {
    let size = tt.dtype.size_of();
    crate::strided::element_count(tt.shape.dims(), size).ok().map(|n| n * size)
}

/// Fails before `node`'s kernel runs on `device` where one of its outputs cannot be
/// allocated, instead of letting the kernel's allocation abort the process (Rust aborts
/// when an infallible allocation fails): an output whose size overflows, one over the
/// device's memory limit where it has one (TF's `ResourceExhausted`), or, on devices whose
/// tensors live in host memory (the CPU and emulated GPUs), one the host allocator refuses
/// (the probe reserves the bytes and frees them at once; nothing is touched). Only steps
/// marked [`Derived::large`] come here, so small kernels pay nothing. An output whose size
/// depends on the data (an unknown dimension even after [`specialize`](crate::ops::dynamic_shape::specialize),
/// such as the stored entries of a `SparseRemap`) cannot be checked before its kernel runs.
fn check_outputs_fit(node: &Node, device: &dyn crate::device::Device) -> Result<()> {
    let attrs = device.attributes();
    for tt in node.outputs.iter().filter(|tt| tt.shape.is_fully_defined()) {
        let bytes = static_bytes(tt);
        let fits = match bytes {
            None => false,
            Some(b) if b < CHECK_MIN_BYTES => true,
            Some(b) => {
                if let Some(mem) = device.memory() {
                    let st = mem.stats();
                    if st.bytes_in_use.saturating_add(b as u64) > st.bytes_limit {
                        return Err(OxiflowError::ResourceExhausted {
                            device: attrs.name.clone(),
                            requested: b,
                            in_use: st.bytes_in_use as usize,
                            limit: st.bytes_limit as usize,
                            what: format!(" for {} '{}' (shape{} and type {})", node.op.name, node.name, tt.shape, tt.dtype),
                        });
                    }
                }
                attrs.kind == crate::device::DeviceKind::ProvidedGpu || Vec::<u8>::new().try_reserve_exact(b).is_ok()
            }
        };
        if !fits {
            return Err(OxiflowError::OutOfMemory {
                op: node.op.name.to_string(),
                node: node.name.clone(),
                shape: tt.shape.to_string(),
                dtype: tt.dtype.to_string(),
                device: attrs.name.clone(),
                bytes,
            });
        }
    }
    Ok(())
}

/// No step (in [`Derived::direct`]).
const NO_STEP: u32 = u32::MAX;

impl Derived {
    fn of(plan: &Plan) -> Derived {
        let cells = plan.steps.len() + plan.feed_slots.len();
        let mut source = vec![NO_SOURCE; plan.num_slots];
        for (s, step) in plan.steps.iter().enumerate() {
            for k in 0..step.num_outputs {
                if let Some(src) = source.get_mut(step.outputs + k) {
                    *src = SlotSource { cell: s as u32, index: k as u32 };
                }
            }
        }
        for (j, &(slot, _)) in plan.feed_slots.iter().enumerate() {
            if let Some(src) = source.get_mut(slot) {
                *src = SlotSource { cell: (plan.steps.len() + j) as u32, index: 0 };
            }
        }
        let mut readers = vec![0u32; cells];
        let cell_of = |slot: usize| source.get(slot).map(|s| s.cell as usize).filter(|&c| c < cells);
        for step in &plan.steps {
            for &i in &step.inputs {
                if let Some(c) = cell_of(i) {
                    readers[c] = readers[c].saturating_add(1).min(KEEP - 1);
                }
            }
        }
        for &(slot, _) in &plan.fetch_slots {
            if let Some(c) = cell_of(slot) {
                readers[c] = KEEP;
            }
        }
        let direct = plan
            .steps
            .iter()
            .enumerate()
            .map(|(s, step)| match step.successors[..] {
                [n] if readers[s] == 1 && plan.steps[n].pending == 1 && plan.steps[n].inputs.len() == 1 && cell_of(plan.steps[n].inputs[0]) == Some(s) => {
                    n as u32
                }
                _ => NO_STEP,
            })
            .collect();
        let large = plan
            .steps
            .iter()
            .map(|step| match &step.kind {
                // a node with partial shapes takes this path too (its specialisation)
                StepKind::Op(node) => {
                    node.partial
                        || node.outputs.iter().try_fold(0usize, |t, tt| static_bytes(tt).and_then(|b| t.checked_add(b))).is_none_or(|t| t >= CHECK_MIN_BYTES)
                }
                StepKind::Copy { .. } => false,
            })
            .collect();
        let chain = plan.steps.iter().filter(|s| s.pending == 0).count() <= 1 && plan.steps.iter().all(|s| s.successors.len() <= 1);
        let small = plan.steps.len() <= INLINE_MAX_STEPS
            && plan
                .steps
                .iter()
                .try_fold(0usize, |total, step| match &step.kind {
                    StepKind::Op(node) => node.outputs.iter().try_fold(total, |t, tt| static_bytes(tt).and_then(|b| t.checked_add(b))),
                    StepKind::Copy { .. } => None,
                })
                .is_some_and(|total| total <= INLINE_MAX_BYTES);
        // copies count as expensive: each moves a whole tensor
        let expensive = plan.steps.iter().filter(|s| !matches!(&s.kind, StepKind::Op(n) if n.op.inexpensive)).count();
        Derived {
            large,
            chain,
            inline: chain || small || expensive <= 1,
            direct,
            pending: plan.steps.iter().map(|s| s.pending).collect(),
            ready: (0..plan.steps.len()).filter(|&i| plan.steps[i].pending == 0).collect(),
            leftover: (0..cells).filter(|&i| readers[i] == 0 || readers[i] == KEEP).collect(),
            source,
            readers,
        }
    }
}

/// The outputs of one step (as its kernel returned them) or one feed, for one run.
/// Written once by its step (or by `execute` before the run starts), read by the steps
/// that consume them, cleared by the last of those.
///
/// Safety: the plan orders every access. A consumer step runs only after its producer's
/// decrement of its pending count (`AcqRel`), so the write happens before every read; the
/// last reader clears the cell after its `AcqRel` decrement of the cell's reader count
/// observed every other reader's decrement, so every read happens before the clear.
/// Scratch arrays pass between runs through a `Mutex`.
#[derive(Default)]
struct OutCell(UnsafeCell<Option<Outputs>>);

// SAFETY: see the access protocol above; `Tensor` is `Send + Sync`.
unsafe impl Sync for OutCell {}

impl std::fmt::Debug for OutCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OutCell")
    }
}

/// Timing of one step when tracing (times in [`StepClock`] ticks until the run ends),
/// written only by the worker that runs the step and
/// read after the run (same protocol as [`OutCell`]).
struct TimeCell(UnsafeCell<NodeExecStats>);

// SAFETY: see above.
unsafe impl Sync for TimeCell {}

impl std::fmt::Debug for TimeCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TimeCell")
    }
}

const NO_TIME: NodeExecStats = NodeExecStats { step: 0, thread: 0, start_ns: 0, end_ns: 0, output_bytes: 0, device_clock: false };

/// The clock of traced steps. On x86_64 with an invariant TSC (the CPU flags `constant_tsc`
/// `nonstop_tsc`) it reads the time-stamp counter, about 11 ns on the project's VM against
/// 34 ns for `Instant::now()`, and the ticks are turned into nanoseconds once per run by
/// calibrating against `Instant` over the run; elsewhere its ticks are `Instant`'s
/// nanoseconds. One read per step is most of what tracing costs (docs/performance/engine.md).
struct StepClock {
    t0: Instant,
    tsc0: u64,
    tsc: bool,
}

impl StepClock {
    fn start() -> StepClock {
        let tsc = invariant_tsc();
        StepClock { t0: Instant::now(), tsc0: if tsc { rdtsc() } else { 0 }, tsc }
    }

    /// Ticks since the start.
    #[inline]
    fn now(&self) -> u64 {
        if self.tsc {
            rdtsc().wrapping_sub(self.tsc0)
        } else {
            self.t0.elapsed().as_nanos() as u64
        }
    }

    /// Nanoseconds per tick, measured from the start to now.
    fn ns_per_tick(&self) -> f64 {
        if !self.tsc {
            return 1.0;
        }
        let ticks = self.now();
        let ns = self.t0.elapsed().as_nanos() as f64;
        if ticks == 0 || ticks > (1 << 62) {
            1.0
        } else {
            ns / ticks as f64
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn rdtsc() -> u64 {
    // SAFETY: RDTSC exists on every x86_64 CPU.
    unsafe { std::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
fn rdtsc() -> u64 {
    0
}

/// Whether the CPU's time-stamp counter runs at a constant rate, also in sleep states
/// (CPUID 8000_0007h, EDX bit 8): then it is a clock.
fn invariant_tsc() -> bool {
    static INVARIANT: OnceLock<bool> = OnceLock::new();
    *INVARIANT.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            // Leaf 8000_0007h is read only when the CPU reports it.
            use std::arch::x86_64::__cpuid;
            __cpuid(0x8000_0000).eax >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

/// Per-run arrays, reused between runs of one plan.
#[derive(Debug, Default)]
struct Scratch {
    cells: Vec<OutCell>,
    pending: Vec<AtomicU32>,
    readers: Vec<AtomicU32>,
    /// One timing per step (tracing only; empty otherwise).
    times: Vec<TimeCell>,
}

impl Scratch {
    /// Ready for a run of a plan with `d` (every cell is empty when a scratch is stored).
    fn reset(&mut self, d: &Derived) {
        self.cells.resize_with(d.readers.len(), OutCell::default);
        self.pending.clear();
        self.pending.extend(d.pending.iter().map(|&p| AtomicU32::new(p)));
        self.readers.clear();
        self.readers.extend(d.readers.iter().map(|&r| AtomicU32::new(r)));
    }

    /// The tensor in `slot`.
    ///
    /// # Safety
    /// Its producer has finished and its last reader has not (cell access protocol).
    unsafe fn get(&self, d: &Derived, slot: usize) -> Result<&Tensor> {
        let src = d.source.get(slot).copied().unwrap_or(NO_SOURCE);
        self.cells
            .get(src.cell as usize)
            .and_then(|c| (*c.0.get()).as_ref())
            .and_then(|v| v.get(src.index as usize))
            .ok_or_else(|| OxiflowError::Internal(format!("slot {slot} read before it was written")))
    }
}

struct RunCtx<'a> {
    plan: &'a Plan,
    devices: &'a DeviceSet,
    state: &'a dyn StateAccess,
    scratch: &'a Scratch,
    derived: &'a Derived,
    failed: AtomicBool,
    error: Mutex<Option<OxiflowError>>,
    clock: StepClock,
    trace: bool,
    /// Devices whose steps may hand their outputs over directly ([`Derived::direct`]): bit
    /// `d` is set when device `d` keeps no memory account (an account is told when a
    /// cell's tensors are freed, which handed-over tensors skip).
    direct: u64,
    /// Traced runs: the nodes functional ops' function calls ran, with their op's step.
    inner: Mutex<Vec<(usize, InnerStep)>>,
}

/// What a worker keeps between the steps it runs.
struct Worker {
    /// Inputs of a multi-input step (cleared after each step, capacity kept).
    inputs: Vec<Tensor>,
    /// Pool thread index of this worker (recorded in timings).
    thread: usize,
    /// When tracing, the end of this worker's previous step (clock ticks), which is taken
    /// as the start of its next one (one clock read per step; the worker's bookkeeping
    /// between two steps counts towards the second).
    last_end: Option<u64>,
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
        // SAFETY: cell access protocol (see `OutCell`): the producer has finished.
        unsafe { self.scratch.get(self.derived, slot) }
    }

    /// Records that one reader of `slot` is done; the last reader of its cell frees the
    /// cell's tensors.
    fn release(&self, slot: usize) {
        let Some(slot) = self.derived.source.get(slot).map(|s| s.cell as usize).filter(|&c| c < self.derived.readers.len()) else {
            return;
        };
        let last = match self.derived.readers[slot] {
            KEEP => false,
            // The only reader: no other thread touches the slot any more.
            1 => true,
            _ => self.scratch.readers[slot].fetch_sub(1, Ordering::AcqRel) == 1,
        };
        if last {
            // The cell's tensors are released here, after their last reader (memory
            // accounting hooks in here).
            // SAFETY: every reader is done (slot access protocol).
            free_cell(self.plan, self.devices, slot, unsafe { (*self.scratch.cells[slot].0.get()).take() });
        }
    }

    /// Runs step `s` and returns its outputs. Its inputs come from their cells, which it
    /// releases afterwards, or, when its producer handed them over directly
    /// ([`Derived::direct`]), from `carried`, which it drops after the kernel.
    fn exec(&self, s: usize, w: &mut Worker, carried: &mut Option<Outputs>) -> Result<Outputs> {
        let step = &self.plan.steps[s];
        let start = self.trace.then(|| w.last_end.take().unwrap_or_else(|| self.clock.now()));
        let device = &self.devices.devices[step.device];
        let handed = match &*carried {
            Some(c) => Some(
                self.derived
                    .source
                    .get(step.inputs[0])
                    .and_then(|src| c.get(src.index as usize))
                    .ok_or_else(|| OxiflowError::Internal(format!("step {s}: handed-over input missing")))?,
            ),
            None => None,
        };
        let outs = match &step.kind {
            StepKind::Op(node) => {
                w.inputs.clear();
                let inputs: &[Tensor] = if let Some(t) = handed {
                    std::slice::from_ref(t)
                } else if let [i] = step.inputs[..] {
                    std::slice::from_ref(self.input(i)?)
                } else {
                    for &i in &step.inputs {
                        let t = self.input(i)?.clone();
                        w.inputs.push(t);
                    }
                    &w.inputs
                };
                // a node with unknown static dimensions (`large` is true for it) runs as its
                // specialisation to the fed shapes, so its kernel sees full shapes
                let special;
                let node: &Node = if self.derived.large[s] {
                    let node = if node.partial {
                        special = crate::ops::dynamic_shape::specialize(node, inputs)?;
                        &special
                    } else {
                        &**node
                    };
                    check_outputs_fit(node, device.as_ref())?;
                    node
                } else {
                    node
                };
                let ctx = KernelCtx { node, inputs, state: self.state };
                // an op a GPU runs on the host (`While`, Int32 `Add`)
                let compute = || if step.on_host { crate::function::run_host_launched(device, &ctx) } else { device.compute(&ctx) };
                let outs = if self.trace && crate::function::records_inside(node) {
                    let (outs, inner) = crate::function::trace_calls(&node.name, self.clock.t0, compute);
                    self.inner.lock().unwrap_or_else(|p| p.into_inner()).extend(inner.into_iter().map(|i| (s, i)));
                    outs?
                } else {
                    compute()?
                };
                if outs.len() != node.outputs.len() || outs.iter().zip(&node.outputs).any(|(t, tt)| t.dtype() != tt.dtype || !tt.shape.matches(t.dims())) {
                    return Err(OxiflowError::Internal(format!(
                        "kernel of {} '{}' returned {:?}, expected {:?}",
                        node.op.name,
                        node.name,
                        outs.iter().map(|t| (t.dtype(), t.shape())).collect::<Vec<_>>(),
                        node.outputs
                    )));
                }
                w.inputs.clear();
                outs
            }
            StepKind::Copy { from, .. } => {
                let t = match handed {
                    Some(t) => t,
                    None => self.input(step.inputs[0])?,
                };
                smallvec![device.copy_from(t, self.devices.devices[*from].as_ref())?]
            }
        };
        // The step's outputs are produced here (memory accounting hooks in here).
        match carried.take() {
            // No memory account to tell (`RunCtx::direct`); a scalar becomes the spare.
            Some(c) => offer_spare(c),
            None => step.inputs.iter().for_each(|&i| self.release(i)),
        }
        if let Some(start) = start {
            let output_bytes = outs.iter().map(Tensor::num_bytes).sum();
            let end = self.clock.now().max(start + 1);
            w.last_end = Some(end);
            let t = NodeExecStats { step: s, thread: w.thread, start_ns: start, end_ns: end, output_bytes, device_clock: false };
            // SAFETY: only this step writes its time cell; it is read after the run.
            unsafe { *self.scratch.times[s].0.get() = t };
        }
        Ok(outs)
    }

    /// Runs step `s` and then, inline, the first successor each step makes ready; spawns
    /// the others on `scope`, or, without one (a run on the caller's thread, see
    /// [`execute`]), runs them after the chain. A panic in a kernel becomes an error naming
    /// the node (TF reports a kernel's failure as the node's error; the run stops, the
    /// session stays usable).
    fn run_from<'s>(&'s self, s: usize, scope: Option<&rayon::Scope<'s>>) {
        let thread = if self.trace { rayon::current_thread_index().unwrap_or(0) } else { 0 };
        let mut w = Worker { inputs: Vec::new(), thread, last_end: None };
        let current = Cell::new(s);
        let mut deferred = Vec::new();
        let mut next = Some(s);
        while let Some(s) = next {
            let run = catch_unwind(AssertUnwindSafe(|| self.run_chain(s, scope, &mut w, &current, &mut deferred)));
            if let Err(p) = run {
                let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
                match &self.plan.steps[current.get()].kind {
                    StepKind::Op(node) => {
                        self.fail(OxiflowError::Internal(format!("kernel of {} '{}' panicked: {}", node.op.name, node.name, msg.unwrap_or_default())))
                    }
                    StepKind::Copy { tensor, .. } => self.fail(OxiflowError::Internal(format!("copy of '{tensor}' panicked: {}", msg.unwrap_or_default()))),
                }
                return;
            }
            next = deferred.pop();
        }
    }

    fn run_chain<'s>(&'s self, mut s: usize, scope: Option<&rayon::Scope<'s>>, w: &mut Worker, current: &Cell<usize>, deferred: &mut Vec<usize>) {
        // Outputs of the previous step, handed to `s` directly (`Derived::direct`).
        let mut carried = None;
        loop {
            if self.failed.load(Ordering::Acquire) {
                return;
            }
            current.set(s);
            let outs = match self.exec(s, w, &mut carried) {
                Ok(outs) => outs,
                Err(e) => {
                    self.fail(e);
                    return;
                }
            };
            let direct = self.derived.direct[s];
            let device = self.plan.steps[s].device;
            if direct != NO_STEP && device < 64 && self.direct & (1 << device) != 0 {
                carried = Some(outs);
                s = direct as usize;
                continue;
            }
            // SAFETY: this step is the cell's only writer and no reader runs before it ends.
            unsafe { *self.scratch.cells[s].0.get() = Some(outs) };
            let mut next = None;
            for &succ in &self.plan.steps[s].successors {
                // A step with one predecessor is ready now; no counter to update.
                if self.derived.pending[succ] == 1 || self.scratch.pending[succ].fetch_sub(1, Ordering::AcqRel) == 1 {
                    if next.is_none() {
                        next = Some(succ);
                    } else if let Some(scope) = scope {
                        scope.spawn(move |sc| self.run_from(succ, Some(sc)));
                    } else {
                        deferred.push(succ);
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

/// Memory hook: the tensors of cell `cell` (a step's outputs, or a feed) leave the run;
/// a device that accounts its memory (device.rs `TensorMemory`) is told before they drop.
fn free_cell(plan: &Plan, devices: &DeviceSet, cell: usize, outs: Option<Outputs>) {
    let Some(outs) = outs else { return };
    if devices.has_memory_accounts() {
        let dev = match plan.steps.get(cell) {
            Some(s) => Some(s.device),
            None => plan.feed_slots.get(cell - plan.steps.len()).map(|f| f.1),
        };
        if let Some(m) = dev.and_then(|d| devices.devices.get(d)).and_then(|d| d.memory()) {
            m.free(&outs);
        }
    }
}

/// Result of [`execute`]: the fetched tensors (still on their devices) and, when traced,
/// per-step timings (one per step, in step order; times in nanoseconds since `start`)
/// plus the run's start time.
pub struct Execution {
    pub fetched: Vec<Tensor>,
    pub timings: Option<Vec<NodeExecStats>>,
    /// Traced runs: each node that a functional op's function calls ran (times in
    /// nanoseconds since `start`), with the step of that op.
    pub inner: Vec<(usize, InnerStep)>,
    pub start: Instant,
}

/// Runs `plan` with `feeds` (one tensor per `plan.feed_slots`, already on its device).
/// The first error raised by any step stops the run and is returned. Runs of one plan may
/// overlap (each takes its own scratch arrays). A run of a chain or a small plan, or any
/// plan with a one-thread pool ([`Plan::runs_on_caller`]), runs on the calling thread,
/// traced or not (a traced run on the pool allocated its outputs on other threads than
/// the untraced one: a fetched `Relu` of 2^20 values faulted 126 pages a run in instead of
/// 6, and its profile showed it 3 to 17 times slower); others on `pool` (call it from one
/// of `pool`'s workers, or it hands the run over to one).
pub fn execute(plan: &Plan, devices: &DeviceSet, feeds: Vec<Tensor>, state: &dyn StateAccess, pool: &rayon::ThreadPool, trace: bool) -> Result<Execution> {
    let derived = plan.derived.get_or_init(|| Derived::of(plan));
    let mut scratch = plan.scratch.lock().unwrap_or_else(|p| p.into_inner()).pop().unwrap_or_default();
    scratch.reset(derived);
    if trace && scratch.times.len() != plan.steps.len() {
        scratch.times.resize_with(plan.steps.len(), || TimeCell(UnsafeCell::new(NO_TIME)));
    }
    for (j, t) in feeds.into_iter().take(plan.feed_slots.len()).enumerate() {
        *scratch.cells[plan.steps.len() + j].0.get_mut() = Some(smallvec![t]);
    }
    let ctx = RunCtx {
        plan,
        devices,
        state,
        scratch: &scratch,
        derived,
        failed: AtomicBool::new(false),
        error: Mutex::new(None),
        clock: StepClock::start(),
        trace,
        inner: Mutex::new(Vec::new()),
        direct: devices.devices.iter().take(64).enumerate().filter(|(_, d)| d.memory().is_none()).fold(0, |bits, (i, _)| bits | 1 << i),
    };
    if plan.runs_on_caller(pool.current_num_threads()) {
        // One step after another on the caller's thread: no hand-off to the pool and back
        // (each root's chain, then the steps it made ready, in turn)
        for &root in &derived.ready {
            ctx.run_from(root, None);
        }
    } else if let Some((&first, rest)) = derived.ready.split_first() {
        let c = &ctx;
        pool.scope(|scope| {
            for &r in rest {
                scope.spawn(move |sc| c.run_from(r, Some(sc)));
            }
            c.run_from(first, Some(scope));
        });
    }
    let RunCtx { error, clock, inner, .. } = ctx;
    let ns_per_tick = clock.ns_per_tick();
    let error = error.into_inner().unwrap_or_else(|p| p.into_inner());
    let fetched = match error {
        Some(e) => Err(e),
        None => plan
            .fetch_slots
            .iter()
            .map(|&(slot, _)| {
                // SAFETY: every step has finished (the scope has ended).
                unsafe { scratch.get(derived, slot) }.cloned().map_err(|_| OxiflowError::Internal(format!("fetch slot {slot} was not computed")))
            })
            .collect::<Result<Vec<_>>>(),
    };
    // Empty every slot before the scratch is reused: after a success only fetched and
    // unread slots still hold a tensor; after a failure any slot may.
    match fetched {
        Ok(_) => derived.leftover.iter().for_each(|&i| free_cell(plan, devices, i, scratch.cells[i].0.get_mut().take())),
        Err(_) => scratch.cells.iter_mut().enumerate().for_each(|(i, c)| free_cell(plan, devices, i, c.0.get_mut().take())),
    }
    let timings = (trace && fetched.is_ok()).then(|| {
        // Ticks to ns in 32.32 fixed point: one integer multiply per time instead of two
        // float conversions (a few % of a traced run of a 10k chain).
        let scale = (ns_per_tick.clamp(0.0, (1u64 << 20) as f64) * (1u64 << 32) as f64) as u128;
        let ns = |ticks: u64| ((ticks as u128 * scale) >> 32) as u64;
        let mut v: Vec<NodeExecStats> = Vec::with_capacity(scratch.times.len());
        v.extend(scratch.times.iter_mut().map(|c| {
            let t = *c.0.get_mut();
            let start_ns = ns(t.start_ns);
            NodeExecStats { start_ns, end_ns: ns(t.end_ns).max(start_ns + 1), ..t }
        }));
        v
    });
    plan.scratch.lock().unwrap_or_else(|p| p.into_inner()).push(scratch);
    let fetched = fetched?;
    let inner = if trace { inner.into_inner().unwrap_or_else(|p| p.into_inner()) } else { Vec::new() };
    Ok(Execution { fetched, timings, inner, start: clock.t0 })
}
