//! Functions: a graph with designated inputs and outputs, held by functional control-flow
//! ops (`If`) as attributes, as TF's `FunctionDef` is held in a `func` attr by TF2's `If`
//! and `While`.
//!
//! A function's inputs are `Placeholder` nodes of its own graph (TF's `_Arg`), its outputs
//! any outputs of that graph (TF's `_Retval`). Tensors of the enclosing graph that a branch
//! uses are passed in as extra inputs (the caller captures them: the Julia package does
//! when it builds a branch). Calling a function runs the nodes its outputs need, one after
//! another on the calling thread (as [`crate::eval::evaluate`] does, with the node order
//! found once), with the caller's variable store; inside it nothing is placed or fused: a
//! functional op runs on one device (the CPU) as one step.
//!
//! In a traced run the executor wraps a functional op's kernel in [`trace_calls`]: every
//! node its functions run (each iteration of a loop, nested functional ops' calls too) is
//! then recorded as an [`InnerStep`], which the session adds to the step's statistics (TF1's
//! step stats list each iteration's ops of a `while_loop` the same way).

use crate::device::{CpuDevice, Device, DeviceKind, DeviceType};
use crate::error::{OxiflowError, Result};
use crate::graph::{Graph, NodeId, Output, TensorType};
use crate::ops::scatter::UndoLog;
use crate::ops::{smallvec, KernelCtx, Outputs, StateAccess};
use crate::tensor::Tensor;
use smallvec::SmallVec;
use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

/// One node run by a function that a functional op called in a traced run.
#[derive(Clone, Debug)]
pub struct InnerStep {
    /// `<path>/<node>`, the path being the functional op's name and the function attr it
    /// called (`while/body/Sin`); a nested functional op adds its name and attr
    /// (`while/body/inner/body/Sin`).
    pub name: String,
    /// Op type.
    pub op: String,
    /// The call it ran in: `<path>` above (`while/body`).
    pub frame: String,
    /// Iteration of the innermost loop that called it (`None` in an `If` branch called
    /// outside any loop).
    pub iteration: Option<u64>,
    /// Input tensor names, TF style, with the path.
    pub inputs: Vec<String>,
    /// Dtype and static shape of each output.
    pub output_types: Vec<TensorType>,
    /// Start and end, nanoseconds since the origin given to [`trace_calls`].
    pub start_ns: u64,
    pub end_ns: u64,
    /// Bytes of all outputs.
    pub output_bytes: usize,
}

/// The recording of the functional op running on this thread.
struct InnerTrace {
    origin: Instant,
    /// Path segments: the op's name, then per call the function attr (and per nested
    /// functional op its name).
    path: Vec<String>,
    /// Iteration of each enclosing call (`None`: not a loop's).
    iterations: Vec<Option<u64>>,
    steps: Vec<InnerStep>,
}

thread_local! {
    static INNER: RefCell<Option<InnerTrace>> = const { RefCell::new(None) };
    /// The GPU whose functional op runs on this thread ([`run_host_launched`]).
    static CALL_DEVICE: RefCell<Option<Arc<dyn Device>>> = const { RefCell::new(None) };
}

/// Whether this thread is running the functions of a functional op placed on a GPU, whose
/// ops then go to that GPU one by one: a device that times its kernels by node name leaves
/// these out, as a function's node names may repeat the graph's.
pub fn in_device_call() -> bool {
    CALL_DEVICE.try_with(|d| d.borrow().is_some()).unwrap_or(false)
}

/// Runs `ctx`'s node, an op a GPU runs on the host ([`crate::ops::OpDef::runs_on_host`]:
/// launched as [`crate::ops::GpuLaunch::Host`], or Int32 arithmetic), for GPU `device` (TF's GPU
/// kernels whose arguments are all in host memory). A functional op (`If`,
/// `While`, ...) gets its inputs where they are, and each op its functions run goes to
/// `device` when the op has a GPU kernel for its dtypes, else to the host
/// ([`Function::call`]); any other op gets its inputs copied to the host and runs its CPU
/// kernel. The outputs count against `device`'s memory; on a real GPU those the host
/// produced are copied to it, as the device's other tensors are. Errors: the kernel's, the
/// copies', and `ResourceExhausted` when the outputs do not fit.
pub fn run_host_launched(device: &Arc<dyn Device>, ctx: &KernelCtx) -> Result<Outputs> {
    let outs = if calls_functions(ctx.node) {
        /// Puts the enclosing call's device back, also when the kernel panics.
        struct Restore(Option<Arc<dyn Device>>);
        impl Drop for Restore {
            fn drop(&mut self) {
                let prev = self.0.take();
                let _ = CALL_DEVICE.try_with(|d| *d.borrow_mut() = prev);
            }
        }
        let _restore = Restore(CALL_DEVICE.with(|d| d.borrow_mut().replace(device.clone())));
        (ctx.node.op.kernel)(ctx)?
    } else {
        let inputs: Vec<Tensor> = ctx.inputs.iter().map(Tensor::to_host).collect::<Result<_>>()?;
        crate::ops::dynamic_shape::run_kernel(ctx.node, &inputs, ctx.state)?
    };
    if device.attributes().kind == DeviceKind::ProvidedGpu {
        let host = host_device();
        let mut out = Outputs::new();
        for t in outs {
            out.push(if t.is_device_resident() {
                if let Some(m) = device.memory() {
                    m.allocate(std::slice::from_ref(&t))?;
                }
                t
            } else {
                device.copy_from(&t, host)?
            });
        }
        return Ok(out);
    }
    if let Some(m) = device.memory() {
        m.allocate(&outs)?;
    }
    Ok(outs)
}

/// The host CPU as a copy's source.
fn host_device() -> &'static CpuDevice {
    static HOST: std::sync::OnceLock<CpuDevice> = std::sync::OnceLock::new();
    HOST.get_or_init(|| CpuDevice::new(0))
}

/// Whether `n` (a node of a function graph) runs on a GPU that calls the function: it has
/// a GPU kernel for its dtypes that the device launches. `Const` stays on the host (a
/// device caches constants by node id, which a function's graph shares with the caller's),
/// as do ops a GPU runs on the host ([`crate::ops::OpDef::runs_on_host`]: a nested `If` or `While`,
/// Int32 arithmetic).
fn device_kernel(g: &Graph, n: &crate::graph::Node) -> Result<bool> {
    if n.op.name == "Const" {
        return Ok(false);
    }
    let ins = n.inputs.iter().map(|o| g.output_type(*o).map(|t| t.dtype)).collect::<Result<Vec<_>>>()?;
    let outs: Vec<_> = n.outputs.iter().map(|t| t.dtype).collect();
    Ok(n.op.has_kernel(DeviceType::Gpu, &ins, &outs) && !n.op.runs_on_host(ins.iter().chain(&outs).copied()))
}

/// Whether `node` calls functions (holds a function attr: `If`, `While`, `WhileGrad`).
pub fn calls_functions(node: &crate::graph::Node) -> bool {
    node.attrs.values().any(|a| matches!(a, crate::ops::AttrValue::Func(_)))
}

/// Whether a traced run records what `node`'s kernel does inside it: the nodes its
/// functions run ([`calls_functions`]) or, for a collective, its phases ([`record_phase`]).
pub fn records_inside(node: &crate::graph::Node) -> bool {
    calls_functions(node) || crate::collective::is_collective(node.op.name)
}

/// Records a phase of the kernel running on this thread (a collective's negotiation with
/// the other ranks, then its transfer) as an inner step `<node>/<name>` of type `op`, from
/// `start` to `end`, moving `bytes`; nothing when no trace records this thread.
pub fn record_phase(name: &str, op: &str, start: Instant, end: Instant, bytes: usize) {
    let _ = INNER.try_with(|t| {
        if let Some(tr) = t.borrow_mut().as_mut() {
            let frame = tr.path.join("/");
            let ns = |i: Instant| i.saturating_duration_since(tr.origin).as_nanos() as u64;
            let step = InnerStep {
                name: format!("{frame}/{name}"),
                op: op.to_string(),
                iteration: tr.iterations.iter().rev().find_map(|i| *i),
                frame,
                inputs: Vec::new(),
                output_types: Vec::new(),
                start_ns: ns(start),
                end_ns: ns(end).max(ns(start) + 1),
                output_bytes: bytes,
            };
            tr.steps.push(step);
        }
    });
}

/// Runs `f`, the kernel of functional node `node_name`, on this thread, recording the nodes
/// its function calls run ([`InnerStep`]s, times since `origin`).
pub fn trace_calls<T>(node_name: &str, origin: Instant, f: impl FnOnce() -> T) -> (T, Vec<InnerStep>) {
    /// Puts the enclosing recording (if any) back, also when `f` panics (the executor
    /// catches a kernel's panic; the worker thread must not keep recording afterwards).
    struct Restore(Option<Option<InnerTrace>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(outer) = self.0.take() {
                let _ = INNER.try_with(|t| *t.borrow_mut() = outer);
            }
        }
    }
    let outer = INNER.with(|t| t.borrow_mut().replace(InnerTrace { origin, path: vec![node_name.to_string()], iterations: Vec::new(), steps: Vec::new() }));
    let mut restore = Restore(Some(outer));
    let r = f();
    let outer = restore.0.take().unwrap_or_default();
    let mine = INNER.with(|t| std::mem::replace(&mut *t.borrow_mut(), outer));
    (r, mine.map(|t| t.steps).unwrap_or_default())
}

/// Whether this thread is recording a functional op's calls (inside [`trace_calls`]).
pub fn recording() -> bool {
    INNER.try_with(|t| t.borrow().is_some()).unwrap_or(false)
}

/// Adds `segment` (and the call's iteration) to this thread's trace path, if one is being
/// recorded; `false` when none is.
fn enter(segment: &str, iteration: Option<Option<u64>>) -> bool {
    INNER.with(|t| match t.borrow_mut().as_mut() {
        Some(tr) => {
            tr.path.push(segment.to_string());
            if let Some(i) = iteration {
                tr.iterations.push(i);
            }
            true
        }
        None => false,
    })
}

/// Undoes [`enter`].
fn leave(call: bool) {
    INNER.with(|t| {
        if let Some(tr) = t.borrow_mut().as_mut() {
            tr.path.pop();
            if call {
                tr.iterations.pop();
            }
        }
    })
}

fn now_ns() -> Option<u64> {
    INNER.with(|t| t.borrow().as_ref().map(|tr| tr.origin.elapsed().as_nanos() as u64))
}

/// A graph with inputs (its `Placeholder`s, in order) and outputs.
pub struct Function {
    graph: Graph,
    inputs: Vec<Output>,
    outputs: Vec<Output>,
    /// The nodes a call runs (those the outputs need, inputs excluded), in id order: found
    /// once here, as a loop calls its body every iteration.
    order: Vec<NodeId>,
    /// For each node of `order`, its [`crate::ops::owned_kernel`] when its input 0 is a
    /// tensor that no later node of the call reads, that the node reads only there and that
    /// is not an output: the call then hands that tensor over, so the kernel may update it
    /// in place. Earlier readers have run; an output of theirs that still shares the buffer
    /// (a `Reshape`) makes the kernel copy.
    owned: Vec<Option<crate::ops::OwnedKernelFn>>,
    /// For each node of `order`, whether it runs on a GPU that calls the function
    /// ([`device_kernel`]); the others run on the host there.
    device: Vec<bool>,
}

impl fmt::Debug for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for Function {
    /// `<function (2 inputs, 1 outputs, 7 nodes)>`, as a node's attrs show it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<function ({} inputs, {} outputs, {} nodes)>", self.inputs.len(), self.outputs.len(), self.graph.len())
    }
}

impl Function {
    /// A function of `graph` taking `inputs` and returning `outputs`. Errors
    /// (InvalidArgument): an input that is not output 0 of a `Placeholder` of `graph`, or
    /// appears twice; an output that `graph` does not have; a function whose outputs need a
    /// `Placeholder` that is not one of its inputs (it could never be fed); a function holding
    /// variables (a branch reads the caller's variables as captured inputs) or an op that
    /// assigns one (`Assign`, `ApplyAdam`, ...: any op with reference inputs).
    pub fn new(graph: Graph, inputs: Vec<Output>, outputs: Vec<Output>) -> Result<Function> {
        let bad = |m: String| Err(OxiflowError::InvalidArgument(format!("function: {m}")));
        for (k, i) in inputs.iter().enumerate() {
            let n = graph.node(i.node)?;
            if n.op.name != "Placeholder" || i.index != 0 {
                return bad(format!("input {k} ('{}') is not a Placeholder", n.tensor_name(i.index)));
            }
            if inputs[..k].contains(i) {
                return bad(format!("input {k} ('{}') is given twice", n.name));
            }
        }
        for o in &outputs {
            graph.output_type(*o)?;
        }
        // Variables live in the enclosing graph; a function only reads their values, passed
        // in as inputs. An op writing one (`Assign`, the `Apply*` updates: ops with reference
        // inputs) would write through such an input, not to the variable: refused, wherever
        // it is in the function (one nothing reads would not even run).
        for n in graph.nodes() {
            if n.op.name == "VariableV2" {
                return bad(format!("it holds variable '{}'; read variables of the enclosing graph instead", n.name));
            }
            if !n.op.ref_inputs.is_empty() {
                return bad(format!(
                    "it holds {} '{}', which assigns a variable: assign outside cond and while_loop (not supported inside them yet)",
                    n.op.name, n.name
                ));
            }
        }
        let needed = crate::eval::needed_nodes(&graph, &outputs, &[], &inputs.iter().copied().collect())?;
        for &id in &needed {
            let n = graph.node(id)?;
            if n.op.name == "Placeholder" {
                return bad(format!("its outputs need Placeholder '{}', which is not one of its inputs", n.name));
            }
        }
        let owned = Self::owned_kernels(&graph, &needed, &outputs)?;
        let device = needed.iter().map(|&id| device_kernel(&graph, graph.node(id)?)).collect::<Result<_>>()?;
        Ok(Function { graph, inputs, outputs, order: needed, owned, device })
    }

    /// [`Function::owned`] of each node of `order`.
    fn owned_kernels(graph: &Graph, order: &[NodeId], outputs: &[Output]) -> Result<Vec<Option<crate::ops::OwnedKernelFn>>> {
        // the position in `order` of each tensor's last reader
        let mut last: std::collections::HashMap<Output, usize> = std::collections::HashMap::new();
        for (p, &id) in order.iter().enumerate() {
            for o in &graph.node(id)?.inputs {
                last.insert(*o, p);
            }
        }
        order
            .iter()
            .enumerate()
            .map(|(p, &id)| {
                let n = graph.node(id)?;
                let sole = |o: &Output| last.get(o) == Some(&p) && n.inputs.iter().filter(|i| *i == o).count() == 1 && !outputs.contains(o);
                Ok(crate::ops::owned_kernel(n.op).filter(|_| !n.partial && n.inputs.first().is_some_and(sole)))
            })
            .collect()
    }

    /// The function's graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }
    /// Its inputs (`Placeholder` outputs of [`Function::graph`]).
    pub fn inputs(&self) -> &[Output] {
        &self.inputs
    }
    /// Its outputs.
    pub fn outputs(&self) -> &[Output] {
        &self.outputs
    }
    /// Dtype and shape of each input.
    pub fn input_types(&self) -> Result<Vec<TensorType>> {
        self.inputs.iter().map(|o| self.graph.output_type(*o).cloned()).collect()
    }
    /// Dtype and shape of each output.
    pub fn output_types(&self) -> Result<Vec<TensorType>> {
        self.outputs.iter().map(|o| self.graph.output_type(*o).cloned()).collect()
    }

    /// Runs the function on `args` (one per input, of its dtype and shape; checked by the op
    /// that calls it), reading and assigning variables through `state`. `attr` is the
    /// caller's attr holding it (`body`) and `iteration` the loop's iteration (`None` for a
    /// branch): both name the nodes it runs in a traced run ([`trace_calls`]). Errors: those
    /// of its kernels, which name their nodes.
    pub fn call(&self, args: &[Tensor], state: &dyn StateAccess, attr: &str, iteration: Option<u64>) -> Result<Vec<Tensor>> {
        self.call_owned(args.to_vec(), state, attr, iteration)
    }

    /// [`Function::call`] on arguments the caller gives up: a tensor the function reads
    /// once, in an op that can update its input (`TensorScatterUpdate`: a `TensorArray`
    /// written in a loop body), is updated in place when nothing else holds it.
    pub fn call_owned(&self, args: Vec<Tensor>, state: &dyn StateAccess, attr: &str, iteration: Option<u64>) -> Result<Vec<Tensor>> {
        Ok(self.call_undoable(args, state, attr, iteration, &[])?.0)
    }

    /// [`Function::call_owned`] that also returns what each scatter node of `taps` (nodes
    /// of this function's graph) overwrote, in the order they ran: the loop gradient keeps
    /// these instead of a copy of the written tensor per iteration.
    pub(crate) fn call_undoable(
        &self,
        args: Vec<Tensor>,
        state: &dyn StateAccess,
        attr: &str,
        iteration: Option<u64>,
        taps: &[NodeId],
    ) -> Result<(Vec<Tensor>, UndoLog)> {
        let mut undo = Vec::new();
        if !enter(attr, Some(iteration)) {
            return Ok((self.run(args, state, false, taps, &mut undo)?, undo));
        }
        let r = self.run(args, state, true, taps, &mut undo);
        leave(true);
        Ok((r?, undo))
    }

    fn run(&self, args: Vec<Tensor>, state: &dyn StateAccess, traced: bool, taps: &[NodeId], undo: &mut UndoLog) -> Result<Vec<Tensor>> {
        if args.len() != self.inputs.len() {
            return Err(OxiflowError::Internal(format!("function called with {} arguments, it takes {}", args.len(), self.inputs.len())));
        }
        let device = CALL_DEVICE.with(|d| d.borrow().clone());
        // what the call put in the device's memory account, taken out again when it ends
        // (the caller accounts for the outputs it keeps)
        let mut held: Vec<Tensor> = Vec::new();
        let r = self.run_nodes(args, state, traced, taps, undo, device.as_ref(), &mut held);
        if let Some(m) = device.as_ref().and_then(|d| d.memory()) {
            m.free(&held);
        }
        r
    }

    /// [`Function::run`]'s node loop; on a GPU `device`, the tensors put in its memory
    /// account go to `held`.
    #[allow(clippy::too_many_arguments)]
    fn run_nodes(
        &self,
        args: Vec<Tensor>,
        state: &dyn StateAccess,
        traced: bool,
        taps: &[NodeId],
        undo: &mut UndoLog,
        device: Option<&Arc<dyn Device>>,
        held: &mut Vec<Tensor>,
    ) -> Result<Vec<Tensor>> {
        // each node's outputs, by node id (a function's graph is small)
        let mut vals: Vec<Option<Outputs>> = vec![None; self.graph.len()];
        for (i, a) in self.inputs.iter().zip(args) {
            vals[i.node] = Some(smallvec![a]);
        }
        let missing = |o: &Output| OxiflowError::Internal(format!("function: input {o:?} missing"));
        let get = |vals: &[Option<Outputs>], o: &Output| vals[o.node].as_ref().and_then(|v| v.get(o.index)).cloned().ok_or_else(|| missing(o));
        for ((&id, &owned), &gpu) in self.order.iter().zip(&self.owned).zip(&self.device) {
            let n = self.graph.node(id)?;
            // a scatter whose overwritten slices a loop gradient keeps runs on the host,
            // where they are read
            let tapped = taps.contains(&id);
            let on = device.filter(|_| gpu && !tapped);
            // a device kernel never updates an input in place
            let owned = if on.is_some() { None } else { owned };
            let mut ins: SmallVec<[Tensor; 4]> = SmallVec::new();
            for (i, o) in n.inputs.iter().enumerate().filter(|(i, _)| !n.op.ref_inputs.contains(i)) {
                if i == 0 && owned.is_some() {
                    // its only reader: taken, not cloned, so the kernel may own the buffer
                    let slot = vals[o.node].as_mut().and_then(|v| v.get_mut(o.index)).ok_or_else(|| missing(o))?;
                    ins.push(std::mem::replace(slot, Tensor::scalar(0i32)));
                } else {
                    ins.push(get(&vals, o)?);
                }
            }
            match (on, device) {
                // a real GPU's kernels read device memory: host tensors are copied in
                (Some(d), _) if d.attributes().kind == DeviceKind::ProvidedGpu => {
                    for t in ins.iter_mut().filter(|t| !t.is_device_resident()) {
                        *t = d.copy_from(t, host_device())?;
                        held.push(t.clone());
                    }
                }
                // a host kernel reads host memory; a nested functional op takes its
                // inputs where they are and sends its own functions' ops to the device
                (None, Some(_)) if !calls_functions(n) => {
                    for t in ins.iter_mut().filter(|t| t.is_device_resident()) {
                        *t = t.to_host()?;
                    }
                }
                _ => {}
            }
            if tapped {
                undo.push((id, crate::ops::scatter::scatter_undo(n, &ins, state)?));
            }
            let kernel = |ins: &mut [Tensor]| match (on, owned) {
                (Some(d), _) => {
                    let special;
                    let node = if n.partial {
                        special = crate::ops::dynamic_shape::specialize(n, ins)?;
                        &special
                    } else {
                        n
                    };
                    d.compute(&KernelCtx { node, inputs: ins, state })
                }
                (None, Some(k)) => k(n, ins, state),
                (None, None) => crate::ops::dynamic_shape::run_kernel(n, ins, state),
            };
            let outs = if traced {
                let nested = records_inside(n);
                if nested {
                    enter(&n.name, None);
                }
                let start = now_ns().unwrap_or(0);
                let outs = kernel(&mut ins);
                let end = now_ns().unwrap_or(0).max(start + 1);
                if nested {
                    leave(false);
                }
                let outs = outs?;
                self.record(n, &outs, start, end);
                outs
            } else {
                kernel(&mut ins)?
            };
            if on.is_some() {
                held.extend(outs.iter().cloned());
            }
            vals[id] = Some(outs);
        }
        self.outputs.iter().map(|o| get(&vals, o)).collect()
    }

    /// Records that node `n` of this function ran from `start` to `end` with outputs `outs`.
    fn record(&self, n: &crate::graph::Node, outs: &[Tensor], start_ns: u64, end_ns: u64) {
        INNER.with(|t| {
            if let Some(tr) = t.borrow_mut().as_mut() {
                let frame = tr.path.join("/");
                let input = |o: &Output| {
                    let p = &self.graph.nodes()[o.node];
                    if o.index == 0 {
                        format!("{frame}/{}", p.name)
                    } else {
                        format!("{frame}/{}", p.tensor_name(o.index))
                    }
                };
                let step = InnerStep {
                    name: format!("{frame}/{}", n.name),
                    op: n.op.name.to_string(),
                    inputs: n.inputs.iter().map(input).collect(),
                    iteration: tr.iterations.iter().rev().find_map(|i| *i),
                    frame,
                    output_types: n.outputs.clone(),
                    start_ns,
                    end_ns,
                    output_bytes: outs.iter().map(Tensor::num_bytes).sum(),
                };
                tr.steps.push(step);
            }
        })
    }
}
