//! Reading a traced step back from its TF timeline JSON ([`crate::profile::StepStats::chrome_trace`]):
//! a per-device summary ([`ProfileSummary`]: busy and idle time, top ops, copies, peak memory)
//! and a self-contained HTML timeline ([`render_html`]); the timelines of several MPI ranks
//! merged into one ([`merge_ranks`]).
//!
//! Both work from the JSON, not from the session's internal records, so that what they show
//! is exactly what the saved `.json` holds, and so that a timeline written by TensorFlow's
//! `timeline.py` can be summarized and drawn too.

mod html;
mod merge;
mod summary;

pub use html::render_html;
pub use merge::merge_ranks;
pub use summary::{DeviceSummary, OpTime, ProfileSummary};

use crate::error::{OxiflowError, Result};
use serde_json::Value;
use std::collections::HashMap;

/// One `X` (complete) event of the trace, times in µs.
#[derive(Clone, Debug)]
pub(crate) struct Event {
    /// Index into [`Trace::devices`].
    pub device: usize,
    pub lane: u64,
    pub ts: f64,
    pub dur: f64,
    /// Node name (`args.name`), or the event name when absent.
    pub name: String,
    /// Op type (`args.op`), or the event name when absent.
    pub op: String,
    pub inputs: Vec<String>,
    pub bytes: u64,
    /// `Some((from, to))` device indices for a cross-device copy (`cat: "Copy"`).
    pub copy: Option<(usize, usize)>,
    /// Other `args` entries (shape, dtype, ...) as `key: value` text, for hover text.
    pub extra: Vec<(String, String)>,
}

/// The parts of a chrome trace the summary and the HTML need.
#[derive(Clone, Debug, Default)]
pub(crate) struct Trace {
    /// Device names, in the order of their `Compute` processes.
    pub devices: Vec<String>,
    pub events: Vec<Event>,
    /// Per device, samples `(ts, bytes in use)` from `C` (counter) events, if any.
    pub memory: Vec<Vec<(f64, u64)>>,
}

fn bad(msg: impl Into<String>) -> OxiflowError {
    OxiflowError::InvalidArgument(format!("not a timeline trace: {}", msg.into()))
}

fn num(v: &Value, k: &str) -> Option<f64> {
    v.get(k).and_then(Value::as_f64)
}

impl Trace {
    /// Parses `{"traceEvents": [...]}` as TF's timeline writes it. Devices are the processes
    /// named `<device> Compute` (TF: `/job:.../device:GPU:0 Compute`); events of the
    /// `<device> Tensors` and `<device> Memcpy` (copies) processes belong to that device; a
    /// process with another name that holds `X` events counts as a device of that name.
    pub fn parse(v: &Value) -> Result<Trace> {
        let events = v.get("traceEvents").and_then(Value::as_array).ok_or_else(|| bad("no 'traceEvents' array"))?;
        let mut pid_name: HashMap<i64, String> = HashMap::new();
        for e in events {
            if e.get("ph").and_then(Value::as_str) == Some("M") && e.get("name").and_then(Value::as_str) == Some("process_name") {
                if let (Some(pid), Some(n)) = (e.get("pid").and_then(Value::as_i64), e.pointer("/args/name").and_then(Value::as_str)) {
                    pid_name.insert(pid, n.to_string());
                }
            }
        }
        let mut t = Trace::default();
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut device_of = |name: &str, t: &mut Trace| -> usize {
            let d = [" Compute", " Tensors", " Memcpy"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(name).to_string();
            *index.entry(d.clone()).or_insert_with(|| {
                t.devices.push(d);
                t.memory.push(Vec::new());
                t.devices.len() - 1
            })
        };
        let mut pids: Vec<(&i64, &String)> = pid_name.iter().filter(|(_, n)| n.ends_with(" Compute")).collect();
        pids.sort();
        for (_, n) in pids {
            device_of(n, &mut t);
        }
        for e in events {
            let ph = e.get("ph").and_then(Value::as_str).unwrap_or("");
            let pid = e.get("pid").and_then(Value::as_i64).unwrap_or(-1);
            let pname = pid_name.get(&pid).cloned().unwrap_or_else(|| format!("pid {pid}"));
            match ph {
                "X" => {
                    let (ts, dur) = (num(e, "ts").ok_or_else(|| bad("X event without 'ts'"))?, num(e, "dur").unwrap_or(0.0));
                    let device = device_of(&pname, &mut t);
                    let args = e.get("args").and_then(Value::as_object);
                    let arg = |k: &str| args.and_then(|a| a.get(k)).and_then(Value::as_str).map(str::to_string);
                    let ev_name = e.get("name").and_then(Value::as_str).unwrap_or("?").to_string();
                    let mut inputs = Vec::new();
                    while let Some(i) = arg(&format!("input{}", inputs.len())) {
                        inputs.push(i);
                    }
                    let copy = if e.get("cat").and_then(Value::as_str) == Some("Copy") {
                        let from = arg("from").map(|f| device_of(&f, &mut t)).unwrap_or(device);
                        let to = arg("to").map(|f| device_of(&f, &mut t)).unwrap_or(device);
                        Some((from, to))
                    } else {
                        None
                    };
                    let extra = args
                        .map(|a| {
                            a.iter()
                                .filter(|(k, _)| !(k.starts_with("input") || ["name", "op", "bytes", "from", "to"].contains(&k.as_str())))
                                .map(|(k, v)| (k.clone(), v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())))
                                .collect()
                        })
                        .unwrap_or_default();
                    t.events.push(Event {
                        device,
                        lane: e.get("tid").and_then(Value::as_u64).unwrap_or(0),
                        ts,
                        dur,
                        name: arg("name").unwrap_or_else(|| ev_name.clone()),
                        op: arg("op").unwrap_or(ev_name),
                        inputs,
                        bytes: args.and_then(|a| a.get("bytes")).and_then(Value::as_u64).unwrap_or(0),
                        copy,
                        extra,
                    });
                }
                // memory counters in a device's process (Oxiflow puts them in `<device> Tensors`);
                // TF's per-allocator counters in the `Allocators` process are not tied to a device
                "C" if pname.ends_with(" Compute") || pname.ends_with(" Tensors") => {
                    if let Some(ts) = num(e, "ts") {
                        let device = device_of(&pname, &mut t);
                        let bytes = e.get("args").and_then(Value::as_object).map(|a| a.values().filter_map(Value::as_u64).sum()).unwrap_or(0);
                        t.memory[device].push((ts, bytes));
                    }
                }
                _ => {}
            }
        }
        Ok(t)
    }

    /// First start and last end over all events (µs); `(0, 0)` when empty.
    pub fn span(&self) -> (f64, f64) {
        let start = self.events.iter().map(|e| e.ts).fold(f64::INFINITY, f64::min);
        let end = self.events.iter().map(|e| e.ts + e.dur).fold(f64::NEG_INFINITY, f64::max);
        if start.is_finite() {
            (start, end)
        } else {
            (0.0, 0.0)
        }
    }
}

/// Short device name: `GPU:0` for `/job:localhost/replica:0/task:0/device:GPU:0`.
pub(crate) fn short_device(d: &str) -> &str {
    d.rsplit_once("/device:").map(|(_, s)| s).unwrap_or(d)
}
