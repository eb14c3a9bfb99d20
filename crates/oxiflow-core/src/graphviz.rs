//! The graph as Graphviz DOT (`save_graph`): one cluster per device with the nodes placed
//! there, nodes coloured by device, data edges solid, cross-device edges (where the session
//! inserts a `_Recv` copy) dashed red and labelled with the bytes copied, control edges dotted.

use crate::graph::{Graph, NodeId};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

/// Fill colour for a device: CPUs blue-grey, GPUs from a palette by index.
fn fill(device: &str) -> &'static str {
    const GPU: [&str; 6] = ["#b8e0b8", "#f6d58e", "#f3b6c8", "#c7b8ea", "#a8dadc", "#f4a582"];
    let short = device.rsplit_once("/device:").map(|(_, s)| s).unwrap_or(device);
    match short.split_once(':') {
        Some(("CPU", _)) => "#cfe0f3",
        Some((_, id)) => GPU[id.parse::<usize>().unwrap_or(0) % GPU.len()],
        None => "#dddddd",
    }
}

fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n"))
}

/// DOT text of `graph`. `placed` maps nodes to the full name of the device a session put
/// them on; nodes not in it are drawn grey and dashed, outside every cluster, with their
/// requested device in the label.
pub fn graph_dot(graph: &Graph, placed: &HashMap<NodeId, String>) -> String {
    let mut out = String::from("digraph oxiflow {\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=9];\n");
    let mut clusters: BTreeMap<&str, Vec<NodeId>> = BTreeMap::new();
    for n in graph.nodes() {
        if let Some(d) = placed.get(&n.id) {
            clusters.entry(d.as_str()).or_default().push(n.id);
        }
    }
    for (k, (device, ids)) in clusters.iter().enumerate() {
        let _ = writeln!(out, "  subgraph cluster_{k} {{\n    label={};\n    style=rounded; color=\"#888888\";", quote(device));
        for &id in ids {
            let n = &graph.nodes()[id];
            let _ = writeln!(out, "    {} [label={}, fillcolor=\"{}\"];", quote(&n.name), quote(&format!("{}\n{}", n.name, n.op.name)), fill(device));
        }
        out.push_str("  }\n");
    }
    for n in graph.nodes().iter().filter(|n| !placed.contains_key(&n.id)) {
        let req = n.requested_device.to_string();
        let label = if req.is_empty() { format!("{}\n{}", n.name, n.op.name) } else { format!("{}\n{}\n({req})", n.name, n.op.name) };
        let _ = writeln!(out, "  {} [label={}, fillcolor=\"#eeeeee\", style=\"rounded,filled,dashed\"];", quote(&n.name), quote(&label));
    }
    for n in graph.nodes() {
        for o in &n.inputs {
            let src = &graph.nodes()[o.node];
            let cross = matches!((placed.get(&src.id), placed.get(&n.id)), (Some(a), Some(b)) if a != b);
            // TF's input naming: `Sin` for output 0, `Sin:1` otherwise (as in the timeline)
            let tensor = if o.index == 0 { src.name.clone() } else { graph.tensor_name(*o) };
            if cross {
                let bytes = src.outputs.get(o.index).map(|t| t.shape.num_elements().saturating_mul(t.dtype.size_of())).unwrap_or(0);
                let _ = writeln!(
                    out,
                    "  {} -> {} [style=dashed, color=\"#c0392b\", penwidth=1.5, label={}];",
                    quote(&src.name),
                    quote(&n.name),
                    quote(&format!("copy {tensor}\n{bytes} B"))
                );
            } else {
                let _ = writeln!(out, "  {} -> {};", quote(&src.name), quote(&n.name));
            }
        }
        for &c in &n.control_inputs {
            let _ = writeln!(out, "  {} -> {} [style=dotted, arrowhead=odot];", quote(&graph.nodes()[c].name), quote(&n.name));
        }
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Tensor;
    use crate::Output;

    #[test]
    fn clusters_by_device_and_dashes_cross_device_edges() {
        let mut g = Graph::new();
        let x = g.constant(Tensor::scalar(1.0f64)).unwrap();
        let s = g.op("Sin", &[x]).unwrap();
        let c = g.op("Cos", &[s]).unwrap();
        let _unplaced = g.op("Exp", &[Output::new(c.node, 0)]).unwrap();
        let cpu = "/job:localhost/replica:0/task:0/device:CPU:0".to_string();
        let gpu = "/job:localhost/replica:0/task:0/device:GPU:0".to_string();
        let placed: HashMap<NodeId, String> = [(x.node, gpu.clone()), (s.node, gpu.clone()), (c.node, cpu.clone())].into_iter().collect();
        let dot = graph_dot(&g, &placed);
        assert_eq!(dot.matches("subgraph cluster_").count(), 2, "{dot}");
        assert!(dot.contains("\"Sin\" -> \"Cos\" [style=dashed"), "{dot}");
        assert!(dot.contains("copy Sin\\n8 B"), "{dot}");
        assert!(dot.contains("\"Const\" -> \"Sin\";"), "{dot}");
        assert!(dot.contains("\"Exp\" [label=\"Exp\\nExp\", fillcolor=\"#eeeeee\""), "{dot}");
    }
}
