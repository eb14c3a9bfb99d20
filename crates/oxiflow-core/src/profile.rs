//! Step statistics of a traced run and their export in TensorFlow's timeline format
//! (`tensorflow/python/client/timeline.py`, Chrome trace event format: load the file in
//! `chrome://tracing` or Perfetto).

use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// A device-to-device copy made by a `_Recv` step.
#[derive(Clone, Debug)]
pub struct CopyStats {
    pub from: String,
    pub to: String,
    pub bytes: usize,
    /// The copied tensor, TF style (`Sin` for output 0, `Sin:1` otherwise).
    pub tensor: String,
}

/// One executed node or copy (TF's `NodeExecStats`), times in nanoseconds since the Unix epoch.
#[derive(Clone, Debug)]
pub struct NodeExecStats {
    pub node_name: String,
    /// Op type (`Sin`, `MatMul`; `_Recv` for copies).
    pub op: String,
    /// Full device name.
    pub device: String,
    /// Worker thread that ran it.
    pub thread: usize,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Input tensor names, TF style.
    pub inputs: Vec<String>,
    /// Output tensor names, TF style.
    pub outputs: Vec<String>,
    /// Bytes of all outputs.
    pub output_bytes: usize,
    pub copy: Option<CopyStats>,
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

impl StepStats {
    /// Number and bytes of cross-device copies (`_Recv` steps).
    pub fn copies(&self) -> CopySummary {
        self.nodes.iter().filter_map(|n| n.copy.as_ref()).fold(CopySummary::default(), |s, c| CopySummary {
            count: s.count + 1,
            bytes: s.bytes + c.bytes,
        })
    }

    /// The trace as TF's `Timeline.generate_chrome_trace_format(show_dataflow=True)` lays it
    /// out: pid 0 `Allocators`; per device k, pid 2k+1 `<device> Compute` and 2k+2
    /// `<device> Tensors`; `X` events (`cat: "Op"`, µs, `args.name/op/input<i>`) on greedy
    /// non-overlapping lanes (`tid`); `s`/`t` flow events (`cat: "DataFlow"`) for every input
    /// produced on another pid or lane. Copies are `X` events with `cat: "Copy"`, op `_Recv`
    /// and `args.bytes/from/to` on the destination device. Memory samples are counter
    /// events `{"ph": "C", "cat": "Memory", "name": "Memory", "args": {"bytes in use": n}}`
    /// in the device's `Tensors` process (TF puts its allocator counters in `Allocators`).
    pub fn chrome_trace(&self) -> Value {
        let mut events: Vec<Value> = vec![meta(0, "Allocators")];
        let pid_of: HashMap<&str, usize> = self.devices.iter().enumerate().map(|(k, d)| (d.as_str(), 2 * k + 1)).collect();
        for (k, d) in self.devices.iter().enumerate() {
            events.push(meta(2 * k + 1, &format!("{d} Compute")));
            events.push(meta(2 * k + 2, &format!("{d} Tensors")));
        }
        // lanes per device
        let mut order: Vec<usize> = (0..self.nodes.len()).collect();
        order.sort_by_key(|&i| (self.nodes[i].start_ns, self.nodes[i].end_ns));
        let mut lane_ends: HashMap<&str, Vec<u64>> = HashMap::new();
        let mut lane = vec![0usize; self.nodes.len()];
        for &i in &order {
            let n = &self.nodes[i];
            let ends = lane_ends.entry(n.device.as_str()).or_default();
            let l = ends.iter().position(|&e| e <= n.start_ns).unwrap_or(ends.len());
            if l == ends.len() {
                ends.push(n.end_ns);
            } else {
                ends[l] = n.end_ns;
            }
            lane[i] = l;
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        // producers: (tensor, device) -> (pid, tid, end)
        let mut producer: HashMap<(&str, &str), (usize, usize, u64)> = HashMap::new();
        for (i, n) in self.nodes.iter().enumerate() {
            let pid = pid_of[n.device.as_str()];
            for o in &n.outputs {
                producer.insert((o.as_str(), n.device.as_str()), (pid, lane[i], n.end_ns));
            }
        }
        let mut flows = Vec::new();
        let mut flow_id = 0u64;
        for &i in &order {
            let n = &self.nodes[i];
            let pid = pid_of[n.device.as_str()];
            let mut args = Map::new();
            args.insert("name".into(), json!(n.node_name));
            args.insert("op".into(), json!(n.op));
            for (k, inp) in n.inputs.iter().enumerate() {
                args.insert(format!("input{k}"), json!(inp));
            }
            let cat = if let Some(c) = &n.copy {
                args.insert("bytes".into(), json!(c.bytes));
                args.insert("from".into(), json!(c.from));
                args.insert("to".into(), json!(c.to));
                "Copy"
            } else {
                args.insert("bytes".into(), json!(n.output_bytes));
                "Op"
            };
            events.push(json!({
                "ph": "X", "cat": cat, "name": n.op, "pid": pid, "tid": lane[i],
                "ts": us(n.start_ns), "dur": us(n.end_ns.saturating_sub(n.start_ns)), "args": Value::Object(args)
            }));
            let src_dev = n.copy.as_ref().map(|c| c.from.as_str()).unwrap_or(n.device.as_str());
            for inp in &n.inputs {
                if let Some(&(ppid, ptid, pend)) = producer.get(&(inp.as_str(), src_dev)) {
                    if (ppid, ptid) != (pid, lane[i]) {
                        flows.push(json!({"ph": "s", "cat": "DataFlow", "name": inp, "pid": ppid, "tid": ptid, "ts": us(pend), "id": flow_id}));
                        flows.push(json!({"ph": "t", "cat": "DataFlow", "name": inp, "pid": pid, "tid": lane[i], "ts": us(n.start_ns), "id": flow_id}));
                        flow_id += 1;
                    }
                }
            }
        }
        events.extend(flows);
        for m in &self.memory {
            // a device with samples but no executed step still gets no process: skip it
            if let Some(&pid) = pid_of.get(m.device.as_str()) {
                events.push(json!({
                    "ph": "C", "cat": "Memory", "name": "Memory", "pid": pid + 1, "tid": 0,
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

fn meta(pid: usize, name: &str) -> Value {
    json!({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}})
}
