//! Step statistics of a traced run and their export in TensorFlow's timeline format
//! (`tensorflow/python/client/timeline.py`, Chrome trace event format: load the file in
//! `chrome://tracing` or Perfetto).

use crate::graph::TensorType;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// What a `_Recv` step copies: source and destination device (full names) and the tensor,
/// TF style (`Sin` for output 0, `Sin:1` otherwise).
#[derive(Clone, Debug)]
pub struct CopyLabel {
    pub from: String,
    pub to: String,
    pub tensor: String,
}

/// The names of one step of a cached plan: built once per plan and shared (through an
/// `Arc`) by every traced run of it, so tracing a step costs no string allocation.
#[derive(Clone, Debug)]
pub struct StepLabel {
    pub node_name: String,
    /// Op type (`Sin`, `MatMul`; `_Recv` for copies).
    pub op: String,
    /// Full name of the device that runs the step.
    pub device: String,
    /// Input tensor names, TF style.
    pub inputs: Vec<String>,
    /// Output tensor names, TF style.
    pub outputs: Vec<String>,
    /// Dtype and (static) shape of each output.
    pub output_types: Vec<TensorType>,
    /// `Some` for a cross-device copy.
    pub copy: Option<CopyLabel>,
    /// For a fused step (`_FusedElementwise`), the `(node name, op type)` of each op it
    /// replaced, in graph order; empty otherwise.
    pub fused: Vec<(String, String)>,
    /// For a node run inside a functional op's function (a `while_loop`'s body), the call it
    /// ran in (`while/body`) and the innermost loop's iteration; `None` for a plan's own
    /// steps. Its time lies inside its functional op's step.
    pub frame: Option<(String, Option<u64>)>,
}

/// One executed node or copy (TF's `NodeExecStats`), times in nanoseconds since the Unix
/// epoch. Its names are in [`StepStats::labels`]`[step]` (see [`StepStats::label`]).
#[derive(Copy, Clone, Debug)]
pub struct NodeExecStats {
    /// Index of the step in its plan, and of its label in [`StepStats::labels`].
    pub step: usize,
    /// Worker thread that ran it.
    pub thread: usize,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Bytes of all outputs (for a copy: the bytes copied).
    pub output_bytes: usize,
    /// `true` when `start_ns`/`end_ns` are the kernel's own times read from the device's
    /// timer (CUDA events around the launch, mapped onto the host clock, as TF's GPU
    /// tracer reports stream activity), `false` when they are the host's clock around the
    /// call (CPU kernels, emulated GPUs, copies, asynchronous launches without events).
    pub device_clock: bool,
}

/// A device's bytes in use after an allocation or free during a traced step (devices with
/// accounted memory: GPUs, real or emulated).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemorySample {
    /// Full device name.
    pub device: String,
    /// Nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    pub bytes_in_use: u64,
}

/// Everything recorded for one traced step (TF's `StepStats`).
#[derive(Clone, Debug, Default)]
pub struct StepStats {
    /// Devices that ran something, in the session's device order.
    pub devices: Vec<String>,
    /// Names of the plan's steps, shared with the plan (indexed by [`NodeExecStats::step`]).
    pub labels: Arc<[StepLabel]>,
    /// One entry per executed step.
    pub nodes: Vec<NodeExecStats>,
    /// Memory samples of the devices that account their memory, in time order per device.
    pub memory: Vec<MemorySample>,
}

/// Copies made in a step: count and bytes.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct CopySummary {
    pub count: usize,
    pub bytes: usize,
}

/// Direction of a copy between two devices (by their device type), as TF's GPU tracer
/// names its memcpy streams: `HtoD`, `DtoH`, `DtoD` (and `HtoH` between two CPUs).
pub fn copy_direction(from: &str, to: &str) -> &'static str {
    let gpu = |d: &str| !d.rsplit_once("/device:").map_or(d, |(_, s)| s).to_ascii_uppercase().starts_with("CPU");
    match (gpu(from), gpu(to)) {
        (false, true) => "HtoD",
        (true, false) => "DtoH",
        (true, true) => "DtoD",
        (false, false) => "HtoH",
    }
}

/// Lane (`tid`) of the `<device> Memcpy` process for each copy direction, and its name.
const COPY_LANES: [(&str, &str); 4] = [("HtoD", "host to device"), ("DtoH", "device to host"), ("DtoD", "device to device"), ("HtoH", "host to host")];

impl StepStats {
    /// The names of `n`'s step.
    ///
    /// # Panics
    /// When `n` is not one of this `StepStats`' nodes (its step has no label).
    pub fn label(&self, n: &NodeExecStats) -> &StepLabel {
        &self.labels[n.step]
    }

    /// Number and bytes of cross-device copies (`_Recv` steps).
    pub fn copies(&self) -> CopySummary {
        self.nodes
            .iter()
            .filter(|n| self.label(n).copy.is_some())
            .fold(CopySummary::default(), |s, n| CopySummary { count: s.count + 1, bytes: s.bytes + n.output_bytes })
    }

    /// The trace as TF's `Timeline.generate_chrome_trace_format(show_dataflow=True)` lays it
    /// out: pid 0 `Allocators`; per device k (of n), pid 2k+1 `<device> Compute` and 2k+2
    /// `<device> Tensors`; `X` events (`cat: "Op"`, µs, `args.name/op/input<i>/bytes`, and
    /// `args.shape`/`args.dtype`: each output's static shape in TF notation and dtype,
    /// joined by `", "` for several outputs) on greedy non-overlapping lanes (`tid`). A fused
    /// step (`_FusedElementwise`) also has `args.fused_ops`: `"<node> (<op>)"` for each op
    /// it replaced. A node run inside a functional op's function (each iteration of a
    /// `while_loop`'s ops) has `args.frame` (`while/body`) and, in a loop, `args.iteration`;
    /// it lies inside its op's event, on a lane of its own. An op timed by the device's own timer (a real GPU's CUDA events) has
    /// `args.clock = "device"`.
    ///
    /// Copies go to the destination device's own process, pid 2n+1+k `<device> Memcpy`
    /// (as TF's GPU tracer puts memcpys on their own stream), one lane per direction
    /// (`thread_name` `host to device`, `device to host`, `device to device`; more lanes
    /// when copies of one direction overlap): `X` events with `cat: "Copy"`, name
    /// `Memcpy<HtoD|DtoH|DtoD>`, `args.op = "_Recv"`, `args.name/input0/bytes/from/to/
    /// direction`. `s`/`t` flow events (`cat: "DataFlow"`) link every input produced on
    /// another pid or lane to its consumer, so every cross-device tensor has its arrows.
    ///
    /// Collectives across MPI ranks (ops `Mpi*`) and their phases (`<node>/negotiate`, type
    /// `MpiNegotiate`: the wait for the other ranks; `<node>/transfer`, typed by the MPI
    /// call: `MPI_Allreduce`, `MPI_Reduce`, `MPI_Bcast`; `args.bytes` the bytes each moves)
    /// go to their own process, pid 3n+1 `MPI rank <r> of <size>` (Horovod's timeline has
    /// the same two phases per collective).
    ///
    /// Memory samples are counter events `{"ph": "C", "cat": "Memory", "name": "Memory",
    /// "args": {"bytes in use": n}}` in the device's `Tensors` process (TF puts its allocator
    /// counters in `Allocators`).
    pub fn chrome_trace(&self) -> Value {
        let n_dev = self.devices.len();
        let mut events: Vec<Value> = vec![meta(0, "Allocators")];
        let dev_index: HashMap<&str, usize> = self.devices.iter().enumerate().map(|(k, d)| (d.as_str(), k)).collect();
        for (k, d) in self.devices.iter().enumerate() {
            events.push(meta(2 * k + 1, &format!("{d} Compute")));
            events.push(meta(2 * k + 2, &format!("{d} Tensors")));
        }
        let labels: Vec<&StepLabel> = self.nodes.iter().map(|n| self.label(n)).collect();
        let dev_of = |i: usize| dev_index.get(labels[i].device.as_str()).copied().unwrap_or(0);
        let mut order: Vec<usize> = (0..self.nodes.len()).collect();
        order.sort_by_key(|&i| (self.nodes[i].start_ns, self.nodes[i].end_ns));
        // (pid, tid) of each event: greedy lanes per (process, copy direction)
        let mut lane_ends: HashMap<(usize, usize), Vec<(usize, u64)>> = HashMap::new();
        let mut next_tid: HashMap<usize, usize> = HashMap::new();
        let mut thread_names: Vec<Value> = Vec::new();
        let mut memcpy_pids: Vec<usize> = Vec::new();
        let mut place = vec![(0usize, 0usize); self.nodes.len()];
        let mpi_pid = 3 * n_dev + 1;
        for &i in &order {
            let n = &self.nodes[i];
            let k = dev_of(i);
            let (pid, group) = match &labels[i].copy {
                _ if is_mpi(labels[i]) => (mpi_pid, 0),
                Some(c) => {
                    let dir = copy_direction(&c.from, &c.to);
                    (2 * n_dev + 1 + k, 1 + COPY_LANES.iter().position(|(d, _)| *d == dir).unwrap_or(0))
                }
                None => (2 * k + 1, 0),
            };
            let ends = lane_ends.entry((pid, group)).or_default();
            let tid = match ends.iter_mut().find(|(_, e)| *e <= n.start_ns) {
                Some(slot) => {
                    slot.1 = n.end_ns;
                    slot.0
                }
                None => {
                    let t = next_tid.entry(pid).or_insert(0);
                    let tid = *t;
                    *t += 1;
                    if group > 0 {
                        if !memcpy_pids.contains(&pid) {
                            memcpy_pids.push(pid);
                        }
                        let base = COPY_LANES[group - 1].1;
                        let name = if ends.is_empty() { base.to_string() } else { format!("{base} ({})", ends.len() + 1) };
                        thread_names.push(json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}));
                    }
                    ends.push((tid, n.end_ns));
                    tid
                }
            };
            place[i] = (pid, tid);
        }
        memcpy_pids.sort_unstable();
        for &pid in &memcpy_pids {
            events.push(meta(pid, &format!("{} Memcpy", self.devices[pid - 2 * n_dev - 1])));
        }
        if labels.iter().any(|l| is_mpi(l)) {
            events.push(meta(mpi_pid, &mpi_process_name()));
        }
        events.extend(thread_names);
        let us = |ns: u64| ns as f64 / 1000.0;
        // producers: (tensor, device) -> (pid, tid, end)
        let mut producer: HashMap<(&str, &str), (usize, usize, u64)> = HashMap::new();
        for (i, n) in self.nodes.iter().enumerate() {
            let (pid, tid) = place[i];
            for o in &labels[i].outputs {
                producer.insert((o.as_str(), labels[i].device.as_str()), (pid, tid, n.end_ns));
            }
        }
        let mut flows = Vec::new();
        let mut flow_id = 0u64;
        for &i in &order {
            let (n, l) = (&self.nodes[i], labels[i]);
            let (pid, tid) = place[i];
            let mut args = Map::new();
            args.insert("name".into(), json!(l.node_name));
            args.insert("op".into(), json!(l.op));
            for (k, inp) in l.inputs.iter().enumerate() {
                args.insert(format!("input{k}"), json!(inp));
            }
            args.insert("bytes".into(), json!(n.output_bytes));
            if n.device_clock {
                args.insert("clock".into(), json!("device"));
            }
            if !l.output_types.is_empty() {
                let join = |f: &dyn Fn(&TensorType) -> String| l.output_types.iter().map(f).collect::<Vec<_>>().join(", ");
                args.insert("shape".into(), json!(join(&|t| t.shape.to_string())));
                args.insert("dtype".into(), json!(join(&|t| t.dtype.to_string())));
            }
            if let Some((frame, iteration)) = &l.frame {
                args.insert("frame".into(), json!(frame));
                if let Some(i) = iteration {
                    args.insert("iteration".into(), json!(i));
                }
            }
            if !l.fused.is_empty() {
                args.insert("fused_ops".into(), json!(l.fused.iter().map(|(name, op)| format!("{name} ({op})")).collect::<Vec<_>>()));
            }
            let (cat, name) = if let Some(c) = &l.copy {
                let dir = copy_direction(&c.from, &c.to);
                args.insert("from".into(), json!(c.from));
                args.insert("to".into(), json!(c.to));
                args.insert("direction".into(), json!(COPY_LANES.iter().find(|(d, _)| *d == dir).map_or(dir, |(_, t)| *t)));
                ("Copy", format!("Memcpy{dir}"))
            } else {
                ("Op", l.op.clone())
            };
            events.push(json!({
                "ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid,
                "ts": us(n.start_ns), "dur": us(n.end_ns.saturating_sub(n.start_ns)), "args": Value::Object(args)
            }));
            let src_dev = l.copy.as_ref().map(|c| c.from.as_str()).unwrap_or(l.device.as_str());
            for inp in &l.inputs {
                if let Some(&(ppid, ptid, pend)) = producer.get(&(inp.as_str(), src_dev)) {
                    if (ppid, ptid) != (pid, tid) {
                        flows.push(json!({"ph": "s", "cat": "DataFlow", "name": inp, "pid": ppid, "tid": ptid, "ts": us(pend), "id": flow_id}));
                        flows.push(json!({"ph": "t", "cat": "DataFlow", "name": inp, "pid": pid, "tid": tid, "ts": us(n.start_ns), "id": flow_id}));
                        flow_id += 1;
                    }
                }
            }
        }
        events.extend(flows);
        for m in &self.memory {
            // a device with samples but no executed step still gets no process: skip it
            if let Some(&k) = dev_index.get(m.device.as_str()) {
                events.push(json!({
                    "ph": "C", "cat": "Memory", "name": "Memory", "pid": 2 * k + 2, "tid": 0,
                    "ts": us(m.ts_ns), "args": {"bytes in use": m.bytes_in_use}
                }));
            }
        }
        json!({ "traceEvents": events })
    }

    /// [`StepStats::chrome_trace`] as text, indented by 4 spaces like TF's `json.dumps(indent=4)`.
    pub fn chrome_trace_json(&self) -> String {
        let mut buf = Vec::new();
        let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
        let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
        serde::Serialize::serialize(&self.chrome_trace(), &mut ser).expect("serializing a JSON value cannot fail");
        String::from_utf8(buf).expect("serde_json writes UTF-8")
    }
}

/// Whether a step is a collective across MPI ranks or one of its phases.
fn is_mpi(l: &StepLabel) -> bool {
    crate::collective::is_collective(&l.op) || l.op.starts_with("MPI_")
}

/// `MPI rank <r> of <n>` for the process's communicator (`MPI` when there is none any more).
fn mpi_process_name() -> String {
    match crate::collective::communicator("timeline") {
        Ok(c) => format!("MPI rank {} of {}", c.rank(), c.size()),
        Err(_) => "MPI".to_string(),
    }
}

fn meta(pid: usize, name: &str) -> Value {
    json!({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}})
}
