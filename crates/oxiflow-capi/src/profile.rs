//! Profiles read back from their timeline JSON: the HTML timeline and the summary table.

use crate::{guard, req_str, return_str};
use oxiflow_core::timeline::{merge_ranks, render_html, ProfileSummary};
use oxiflow_core::{OxiflowError, Result};
use std::ffi::c_char;

fn parse(json: *const c_char) -> Result<serde_json::Value> {
    let text = req_str(json, "timeline JSON")?;
    serde_json::from_str(text).map_err(|e| OxiflowError::InvalidArgument(format!("timeline JSON does not parse: {e}")))
}

/// The timeline `json` (as `oxf_result_trace_json` gives it, or a TF timeline) as one
/// self-contained HTML page. Status 3 when `json` is not a timeline.
#[no_mangle]
pub extern "C" fn oxf_timeline_html(json: *const c_char, out: *mut *const c_char) -> i32 {
    guard(|| return_str(render_html(&parse(json)?)?, out))
}

/// The timelines in `json`, a JSON array of traces (rank 0's first), as one timeline with
/// a group of processes per rank (`rank <r>: ...`; `save_profile(...; all_ranks=true)`).
/// Status 3 when `json` is not an array of timelines.
#[no_mangle]
pub extern "C" fn oxf_timeline_merge(json: *const c_char, out: *mut *const c_char) -> i32 {
    guard(|| {
        let all = parse(json)?;
        let traces = all.as_array().ok_or_else(|| OxiflowError::InvalidArgument("oxf_timeline_merge: expected a JSON array of timelines".into()))?;
        return_str(merge_ranks(traces)?.to_string(), out)
    })
}

/// The summary of the timeline `json`: per device busy and idle time, kernels, copies and
/// peak memory, then the 10 longest kernels, as aligned text tables (`profile_summary`).
#[no_mangle]
pub extern "C" fn oxf_timeline_summary(json: *const c_char, out: *mut *const c_char) -> i32 {
    guard(|| return_str(ProfileSummary::from_trace(&parse(json)?)?.table(), out))
}

/// The session's graph as Graphviz DOT: nodes clustered and coloured by the device the
/// session placed them on (grey and dashed: not placed yet), cross-device edges dashed.
#[no_mangle]
pub extern "C" fn oxf_session_graph_dot(s: *const crate::OxSession, out: *mut *const c_char) -> i32 {
    guard(|| {
        let sess = crate::session::session(s)?;
        let placed = sess.placed_devices();
        let g = sess.graph().read().map_err(|_| OxiflowError::Internal("graph lock poisoned".into()))?;
        return_str(oxiflow_core::graphviz::graph_dot(&g, &placed), out)
    })
}
