//! One timeline for a job of several MPI ranks: each rank's trace (as
//! [`crate::profile::StepStats::chrome_trace`] writes it) becomes its own group of processes,
//! `rank <r>: <process name>`, in rank order. The ranks' clocks are their hosts' wall
//! clocks (nanoseconds since the Unix epoch), so events of ranks on one host line up
//! exactly and those of other hosts within their clocks' offset.

use crate::error::{OxiflowError, Result};
use serde_json::{json, Value};

/// Merges `traces` (rank 0 first) into one Chrome trace: rank `r`'s pids are shifted by
/// `r * stride` (`stride` one more than the largest pid of any trace), its process names
/// prefixed `rank <r>: `, its flow ids shifted so no two ranks share one, and each rank's
/// processes sorted after the previous rank's (`process_sort_index`). InvalidArgument when
/// a trace has no `traceEvents` array.
pub fn merge_ranks(traces: &[Value]) -> Result<Value> {
    let events_of = |r: usize, t: &Value| -> Result<Vec<Value>> {
        t.get("traceEvents")
            .and_then(Value::as_array)
            .cloned()
            .ok_or_else(|| OxiflowError::InvalidArgument(format!("timeline of rank {r} has no traceEvents array")))
    };
    let all: Vec<Vec<Value>> = traces.iter().enumerate().map(|(r, t)| events_of(r, t)).collect::<Result<_>>()?;
    let max_of = |key: &str| all.iter().flatten().filter_map(|e| e.get(key).and_then(Value::as_u64)).max().unwrap_or(0);
    let stride = max_of("pid") + 1;
    let id_stride = max_of("id") + 1;
    let mut merged = Vec::new();
    for (r, events) in all.into_iter().enumerate() {
        let r64 = r as u64;
        let mut pids = Vec::new();
        for mut e in events {
            if let Some(pid) = e.get("pid").and_then(Value::as_u64) {
                e["pid"] = json!(pid + r64 * stride);
                if !pids.contains(&pid) {
                    pids.push(pid);
                }
            }
            if let Some(id) = e.get("id").and_then(Value::as_u64) {
                e["id"] = json!(id + r64 * id_stride);
            }
            if e.get("name").and_then(Value::as_str) == Some("process_name") {
                if let Some(name) = e.pointer("/args/name").and_then(Value::as_str) {
                    e["args"]["name"] = json!(format!("rank {r}: {name}"));
                }
            }
            merged.push(e);
        }
        for pid in pids {
            let p = pid + r64 * stride;
            merged.push(json!({"name": "process_sort_index", "ph": "M", "pid": p, "args": {"sort_index": p}}));
        }
    }
    Ok(json!({ "traceEvents": merged }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_get_their_own_processes_and_flow_ids() {
        let t = |name: &str| {
            json!({"traceEvents": [
                {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": name}},
                {"ph": "X", "name": "Sin", "pid": 1, "tid": 0, "ts": 1.0, "dur": 2.0},
                {"ph": "s", "name": "x", "pid": 1, "tid": 0, "ts": 3.0, "id": 0},
                {"ph": "X", "name": "MpiAllreduce", "pid": 4, "tid": 0, "ts": 3.0, "dur": 1.0},
            ]})
        };
        let m = merge_ranks(&[t("CPU:0 Compute"), t("CPU:0 Compute")]).unwrap();
        let ev = m["traceEvents"].as_array().unwrap();
        let names: Vec<_> =
            ev.iter().filter(|e| e["name"] == "process_name").map(|e| (e["pid"].as_u64().unwrap(), e["args"]["name"].as_str().unwrap())).collect();
        assert_eq!(names, [(1, "rank 0: CPU:0 Compute"), (6, "rank 1: CPU:0 Compute")]);
        let mpi: Vec<_> = ev.iter().filter(|e| e["name"] == "MpiAllreduce").map(|e| e["pid"].as_u64().unwrap()).collect();
        assert_eq!(mpi, [4, 9]);
        let ids: Vec<_> = ev.iter().filter(|e| e["ph"] == "s").map(|e| e["id"].as_u64().unwrap()).collect();
        assert_eq!(ids, [0, 1]);
        assert!(merge_ranks(&[json!({"events": []})]).unwrap_err().to_string().contains("rank 0"));
    }
}
