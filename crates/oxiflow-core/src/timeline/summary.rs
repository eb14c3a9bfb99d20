//! `profile_summary`: per-device busy and idle time, top ops, copies and peak memory of one
//! traced step, computed from its timeline JSON.

use super::{short_device, Trace};
use crate::error::Result;
use serde::Serialize;
use serde_json::Value;
use std::fmt::Write;

/// One device's share of a step. Times in µs.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceSummary {
    /// Full device name.
    pub device: String,
    /// Kernels run (copies excluded).
    pub ops: usize,
    /// Time at least one kernel was running on the device (union of the kernels' intervals,
    /// so two overlapping kernels on two lanes count once).
    pub busy_us: f64,
    /// The step's span minus `busy_us`.
    pub idle_us: f64,
    /// Copies into this device (`_Recv` steps on it).
    pub copies_in: usize,
    /// Bytes of those copies.
    pub copy_bytes_in: u64,
    /// Time copies into this device took (union of their intervals).
    pub copy_us: f64,
    /// Largest bytes-in-use sample of the device's memory counter; `None` when the trace
    /// has no memory counter for it.
    pub peak_bytes: Option<u64>,
}

/// One kernel, for the "top ops by time" list.
#[derive(Clone, Debug, Serialize)]
pub struct OpTime {
    /// Node name.
    pub name: String,
    /// Op type.
    pub op: String,
    /// Full device name.
    pub device: String,
    /// Duration, µs.
    pub dur_us: f64,
}

/// Summary of a traced step (what `profile_summary` prints).
#[derive(Clone, Debug, Serialize)]
pub struct ProfileSummary {
    /// From the first event's start to the last event's end, µs.
    pub span_us: f64,
    /// One entry per device of the trace, in trace order.
    pub devices: Vec<DeviceSummary>,
    /// The 10 longest kernels, longest first (ties: by name).
    pub top_ops: Vec<OpTime>,
    /// All cross-device copies of the step and their bytes.
    pub copies: usize,
    /// Bytes of those copies.
    pub copy_bytes: u64,
}

/// Length of the union of intervals `(start, end)`.
fn union_len(mut iv: Vec<(f64, f64)>) -> f64 {
    iv.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let mut cur: Option<(f64, f64)> = None;
    for (s, e) in iv {
        match cur {
            Some((cs, ce)) if s <= ce => cur = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                cur = Some((s, e));
            }
            None => cur = Some((s, e)),
        }
    }
    if let Some((cs, ce)) = cur {
        total += ce - cs;
    }
    total
}

impl ProfileSummary {
    /// Summarizes a timeline (`{"traceEvents": [...]}`, TF's layout). Errors
    /// (`InvalidArgument`) when the value is not a trace.
    pub fn from_trace(trace: &Value) -> Result<ProfileSummary> {
        let t = Trace::parse(trace)?;
        let (start, end) = t.span();
        let span_us = end - start;
        let devices = (0..t.devices.len())
            .map(|d| {
                let ops: Vec<_> = t.events.iter().filter(|e| e.device == d && e.copy.is_none()).collect();
                let copies: Vec<_> = t.events.iter().filter(|e| e.copy.map(|(_, to)| to) == Some(d)).collect();
                let busy_us = union_len(ops.iter().map(|e| (e.ts, e.ts + e.dur)).collect());
                DeviceSummary {
                    device: t.devices[d].clone(),
                    ops: ops.len(),
                    busy_us,
                    idle_us: (span_us - busy_us).max(0.0),
                    copies_in: copies.len(),
                    copy_bytes_in: copies.iter().map(|e| e.bytes).sum(),
                    copy_us: union_len(copies.iter().map(|e| (e.ts, e.ts + e.dur)).collect()),
                    peak_bytes: t.memory[d].iter().map(|&(_, b)| b).max(),
                }
            })
            .collect();
        let mut top: Vec<OpTime> = t
            .events
            .iter()
            .filter(|e| e.copy.is_none())
            .map(|e| OpTime { name: e.name.clone(), op: e.op.clone(), device: t.devices[e.device].clone(), dur_us: e.dur })
            .collect();
        top.sort_by(|a, b| b.dur_us.total_cmp(&a.dur_us).then_with(|| a.name.cmp(&b.name)));
        top.truncate(10);
        let copies: Vec<_> = t.events.iter().filter(|e| e.copy.is_some()).collect();
        Ok(ProfileSummary { span_us, devices, top_ops: top, copies: copies.len(), copy_bytes: copies.iter().map(|e| e.bytes).sum() })
    }

    /// The summary as aligned text tables (what `profile_summary()` prints in the REPL).
    /// Times in ms with 3 decimals, bytes as integers.
    pub fn table(&self) -> String {
        let ms = |us: f64| format!("{:.3}", us / 1000.0);
        let mut out = String::new();
        let _ =
            writeln!(out, "Step: {} ms on {} device(s); {} cross-device copies, {} bytes", ms(self.span_us), self.devices.len(), self.copies, self.copy_bytes);
        let header = ["device", "ops", "busy ms", "idle ms", "busy %", "copies in", "bytes in", "copy ms", "peak bytes"];
        let rows: Vec<Vec<String>> = self
            .devices
            .iter()
            .map(|d| {
                let pct = if self.span_us > 0.0 { 100.0 * d.busy_us / self.span_us } else { 0.0 };
                vec![
                    d.device.clone(),
                    d.ops.to_string(),
                    ms(d.busy_us),
                    ms(d.idle_us),
                    format!("{pct:.1}"),
                    d.copies_in.to_string(),
                    d.copy_bytes_in.to_string(),
                    ms(d.copy_us),
                    d.peak_bytes.map(|b| b.to_string()).unwrap_or_else(|| "-".into()),
                ]
            })
            .collect();
        write_table(&mut out, &header, &rows, 1);
        let _ = writeln!(out, "\nTop {} ops by time:", self.top_ops.len());
        let header = ["#", "name", "op", "device", "time ms"];
        let rows: Vec<Vec<String>> = self
            .top_ops
            .iter()
            .enumerate()
            .map(|(i, o)| vec![(i + 1).to_string(), o.name.clone(), o.op.clone(), short_device(&o.device).to_string(), ms(o.dur_us)])
            .collect();
        write_table(&mut out, &header, &rows, 4);
        out
    }
}

/// Writes a table, columns two spaces apart: columns `1..text_cols` (text) left-aligned,
/// the first column and the rest (numbers) right-aligned, except that a table whose first
/// column is text (`text_cols == 1`) left-aligns it.
fn write_table(out: &mut String, header: &[&str], rows: &[Vec<String>], text_cols: usize) {
    let mut w: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| -> String {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let left = if text_cols == 1 { i == 0 } else { i >= 1 && i < text_cols };
                if left {
                    format!("{c:<width$}", width = w[i])
                } else {
                    format!("{c:>width$}", width = w[i])
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let _ = writeln!(out, "{}", line(header.to_vec()));
    for r in rows {
        let _ = writeln!(out, "{}", line(r.iter().map(String::as_str).collect()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn trace() -> Value {
        json!({"traceEvents": [
            {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "Allocators"}},
            {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/device:CPU:0 Compute"}},
            {"ph": "M", "name": "process_name", "pid": 3, "args": {"name": "/device:GPU:0 Compute"}},
            {"ph": "X", "cat": "Op", "name": "Sin", "pid": 1, "tid": 0, "ts": 0.0, "dur": 10.0, "args": {"name": "a", "op": "Sin"}},
            {"ph": "X", "cat": "Op", "name": "Cos", "pid": 1, "tid": 1, "ts": 5.0, "dur": 10.0, "args": {"name": "b", "op": "Cos"}},
            {"ph": "X", "cat": "Copy", "name": "_Recv", "pid": 3, "tid": 0, "ts": 15.0, "dur": 5.0,
             "args": {"name": "b/_recv", "op": "_Recv", "bytes": 8, "from": "/device:CPU:0", "to": "/device:GPU:0"}},
            {"ph": "X", "cat": "Op", "name": "Exp", "pid": 3, "tid": 0, "ts": 20.0, "dur": 20.0, "args": {"name": "c", "op": "Exp"}},
            {"ph": "C", "name": "Memory", "pid": 4, "ts": 20.0, "args": {"bytes in use": 64}},
        ]})
    }

    #[test]
    fn busy_time_is_the_union_of_overlapping_kernels() {
        let s = ProfileSummary::from_trace(&trace()).unwrap();
        assert_eq!(s.span_us, 40.0);
        let cpu = &s.devices[0];
        assert_eq!((cpu.ops, cpu.busy_us, cpu.idle_us, cpu.copies_in), (2, 15.0, 25.0, 0));
        let gpu = &s.devices[1];
        assert_eq!((gpu.ops, gpu.busy_us, gpu.copies_in, gpu.copy_bytes_in, gpu.copy_us), (1, 20.0, 1, 8, 5.0));
        assert_eq!((s.copies, s.copy_bytes), (1, 8));
        assert_eq!(s.top_ops.iter().map(|o| o.name.as_str()).collect::<Vec<_>>(), ["c", "a", "b"]);
        // pid 4 is not named: its counter is not tied to a device
        assert_eq!(cpu.peak_bytes, None);
    }

    #[test]
    fn table_is_aligned() {
        let s = ProfileSummary::from_trace(&trace()).unwrap();
        let t = s.table();
        assert!(t.starts_with("Step: 0.040 ms on 2 device(s); 1 cross-device copies, 8 bytes"), "{t}");
        let lines: Vec<&str> = t.lines().skip(1).take(3).collect();
        assert!(lines[0].starts_with("device "), "{t}");
        // right-aligned columns end at the same place
        let ends: Vec<usize> = lines.iter().map(|l| l.find("  ").map(|_| l.len()).unwrap()).collect();
        assert!(ends.windows(2).all(|w| w[0] == w[1]), "{t}");
        assert!(lines[2].contains("/device:GPU:0") && lines[2].contains("0.020"), "{t}");
    }

    #[test]
    fn not_a_trace_is_an_error() {
        let e = ProfileSummary::from_trace(&json!({"events": []})).unwrap_err().to_string();
        assert!(e.contains("traceEvents"), "{e}");
    }
}
