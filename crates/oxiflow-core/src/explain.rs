//! `explain_placement`: for a placed node, which rule decided its device, in words. TF only
//! prints where each op went (`log_device_placement`); the question users ask is *why*.
//!
//! The placer records, per colocation group, the member whose placement pinned the group
//! and the rule it used ([`Decision`]); this module turns that, the node's request and
//! where the request came from (device scope, device function, `colocate_with`) into text:
//!
//! ```text
//! MatMul (MatMul) on /job:localhost/replica:0/task:0/device:GPU:2
//!   requested: /device:GPU:2 (device scope)
//!   rule: own request: a device scope asked for /device:GPU:2, and it has a kernel for MatMul
//! ```
//!
//! Rules, in the words used on the `rule:` line: `own request` (from a device scope, a
//! device function or `colocate_with`), `colocation group` (with whom, and why the group
//! went where it did), `kernel availability` (no GPU kernel for the node's dtypes), `soft
//! placement` (an impossible request relaxed), `generator` (no inputs, one output: follows
//! its consumers), `default` (nothing requested: the best device), `earlier run` (kept
//! from a previous run of the session).

use crate::device::DeviceSet;
use crate::dtype::DType;
use crate::error::{OxiflowError, Result};
use crate::graph::{Graph, Node, NodeId};
use crate::placer::{Decision, Rule};
use std::collections::HashMap;

/// Where a node's requested device came from.
fn origin(graph: &Graph, n: &Node) -> String {
    if n.requested_device.is_empty() {
        return "nothing requested".into();
    }
    if graph.request_from_device_function(n.id) {
        return "device function".into();
    }
    for e in &n.colocation {
        if let Some(t) = e.strip_prefix("loc:@").and_then(|t| graph.node_by_name(t)) {
            if t != n.id && graph.nodes()[t].requested_device == n.requested_device {
                return format!("colocate_with({})", graph.nodes()[t].name);
            }
        }
    }
    "device scope".into()
}

fn has_gpu_kernel(graph: &Graph, n: &Node) -> bool {
    let ins: Vec<DType> = n.inputs.iter().filter_map(|o| graph.output_type(*o).ok().map(|t| t.dtype)).collect();
    let outs: Vec<DType> = n.outputs.iter().map(|t| t.dtype).collect();
    n.op.has_kernel(crate::device::DeviceType::Gpu, &ins, &outs)
}

fn dtypes(graph: &Graph, n: &Node) -> String {
    let mut v: Vec<String> = n.inputs.iter().filter_map(|o| graph.output_type(*o).ok().map(|t| t.dtype.to_string())).collect();
    v.extend(n.outputs.iter().map(|t| t.dtype.to_string()));
    v.dedup();
    v.join(", ")
}

/// Why the group of `by` (decided by `by` itself) is on `device`.
fn own_rule(graph: &Graph, devices: &DeviceSet, by: &Node, rule: Rule, device: &str, members: &[NodeId]) -> String {
    let req = by.requested_device.to_string();
    match rule {
        Rule::EarlierRun => format!("earlier run: {} was placed on {device} by an earlier run of this session, which keeps it", by.name),
        Rule::Generator => format!(
            "generator: {} has no inputs and one output, so it goes where all its consumers are ({device})",
            by.name
        ),
        Rule::SoftPlacement => format!(
            "soft placement: no device matches the request {} with a kernel for {} ({}); soft placement dropped the device type and id and took the best remaining device",
            if req.is_empty() { "(none)".to_string() } else { req },
            by.op.name,
            dtypes(graph, by)
        ),
        Rule::Request => {
            let typed = by.requested_device.device_type.is_some();
            if typed {
                return format!("own request: a {} asked for {req}, and it has a kernel for {}", origin(graph, by), by.op.name);
            }
            let no_gpu: Vec<&Node> = members.iter().map(|&m| &graph.nodes()[m]).filter(|m| !has_gpu_kernel(graph, m)).collect();
            if devices.has_gpu() && !no_gpu.is_empty() && !device.contains("GPU") {
                let who = no_gpu[0];
                format!(
                    "kernel availability: {} ({}) has no GPU kernel for {}, so the group goes to the best device that has one",
                    who.name,
                    who.op.name,
                    dtypes(graph, who)
                )
            } else if req.is_empty() {
                let mut t = "default: nothing requested; the best device with a kernel (GPU before CPU, then the lowest index)".to_string();
                if by.inputs.is_empty() && by.outputs.len() == 1 {
                    t.push_str("; the generator rule (follow the consumers) did not apply: its consumers placed with it are not all on one device it can use");
                }
                t
            } else {
                format!("own request: a {} asked for {req}; the best matching device with a kernel (GPU before CPU, then the lowest index)", origin(graph, by))
            }
        }
    }
}

/// The explanation of node `id` (see the module docs). `placed` maps nodes to full device
/// names, `decisions` and `dropped` are what the session's placements recorded. Errors: a
/// node not placed yet.
pub fn explain_node(
    graph: &Graph,
    devices: &DeviceSet,
    placed: &HashMap<NodeId, String>,
    decisions: &HashMap<NodeId, Decision>,
    dropped: &[(NodeId, NodeId, String)],
    id: NodeId,
) -> Result<String> {
    let n = graph.node(id)?;
    let (Some(device), Some(d)) = (placed.get(&id), decisions.get(&id)) else {
        return Err(OxiflowError::FailedPrecondition(format!("{} ({}) has not been placed in this session", n.name, n.op.name)));
    };
    let mut members: Vec<NodeId> = decisions.iter().filter(|(_, e)| e.group == d.group).map(|(&m, _)| m).collect();
    members.sort_unstable();
    let req = n.requested_device.to_string();
    let mut text = format!(
        "{} ({}) on {device}\n  requested: {}\n  rule: ",
        n.name,
        n.op.name,
        if req.is_empty() { "nothing".to_string() } else { format!("{req} ({})", origin(graph, n)) }
    );
    // a group kept from an earlier run: explain it by how that run placed it
    let (mut by_id, mut rule) = (d.by, d.rule);
    for _ in 0..4 {
        if rule != Rule::EarlierRun {
            break;
        }
        match decisions.get(&by_id) {
            Some(e) if e.rule != Rule::EarlierRun || e.by != by_id => (by_id, rule) = (e.by, e.rule),
            _ => break,
        }
    }
    let by = &graph.nodes()[by_id];
    if by_id == id {
        text.push_str(&own_rule(graph, devices, n, rule, device, &members));
    } else {
        let why = if n.op.ref_inputs.iter().any(|&i| n.inputs.get(i).is_some_and(|o| members.contains(&o.node))) {
            "it takes a variable of the group by reference"
        } else if !n.colocation.is_empty() {
            "of its colocate_with / loc:@ entries"
        } else {
            "others are colocated with it"
        };
        let names: Vec<&str> = members.iter().take(8).map(|&m| graph.nodes()[m].name.as_str()).collect();
        text.push_str(&format!(
            "colocation group: it shares a device with {} (group: {}{}) because {why}; the group's device was decided when placing {}, by {}",
            by.name,
            names.join(", "),
            if members.len() > 8 { format!(", ... {} members", members.len()) } else { String::new() },
            by.name,
            own_rule(graph, devices, by, rule, device, &members)
        ));
    }
    for (node, target, msg) in dropped {
        if *node == id || *target == id {
            let other = if *node == id { *target } else { *node };
            text.push_str(&format!("\n  note: the colocation of {} with {} was dropped under soft placement: {msg}", n.name, graph.nodes()[other].name));
        }
    }
    Ok(text)
}
