//! Graph builders and criterion settings shared by the benchmarks (each bench target is its
//! own crate and includes this file with `#[path]`).
#![allow(dead_code)]

use criterion::Criterion;
use oxiflow_core::graph::DeviceScope;
use oxiflow_core::{DType, DeviceSpec, Graph, NodeSpec, Output, Tensor};
use std::time::Duration;

/// Length of the scalar chain used by the executor and gradient benchmarks.
pub const CHAIN_LEN: usize = 10_000;

/// `x -> Sin -> Cos -> Sin -> ...`: a Float64 scalar placeholder followed by `len`
/// alternating `Sin`/`Cos` nodes. Returns the graph, the placeholder and the last output.
///
/// Nodes get explicit, already-unique names (`Sin_0`, `Cos_1`, ...), so building the
/// chain never depends on how `Graph::unique_name` resolves clashes (before commit 1f0ec9f
/// it probed `_1`, `_2`, ... from 1 on every call: 2.5 s for this chain). The
/// `graph_build` bench compares default and explicit names.
pub fn scalar_chain(len: usize) -> (Graph, Output, Output) {
    scalar_chain_named(len, true)
}

/// [`scalar_chain`], with explicit unique names when `unique_names`, else TF default names.
pub fn scalar_chain_named(len: usize, unique_names: bool) -> (Graph, Output, Output) {
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[], Some("x")).expect("placeholder");
    let mut y = x;
    for i in 0..len {
        let op = if i % 2 == 0 { "Sin" } else { "Cos" };
        let mut spec = NodeSpec::new(op, &[y]);
        if unique_names {
            spec = spec.name(format!("{op}_{i}"));
        }
        y = g.op_spec(spec).expect("chain op");
    }
    (g, x, y)
}

/// The placement benchmark's graph: `nodes / 4` strands of `Const -> Sin -> Add(previous
/// strand) -> Mul`, the device scope changing every 1,000 strands among none, `/gpu:0`,
/// `/gpu:1` and `/cpu:0`, and one strand in 10 built inside `colocate_with` the previous
/// strand's `Add` (plus one leading `Const`).
pub fn strand_graph(nodes: usize) -> Graph {
    let mut g = Graph::new();
    let scopes = [None, Some("/gpu:0"), Some("/gpu:1"), Some("/cpu:0")];
    let strands = nodes / 4;
    let mut prev = g.constant(Tensor::scalar(0.0f64)).expect("const");
    let mut prev_add = prev.node;
    for s in 0..strands {
        let scope = scopes[(s / 1000) % scopes.len()];
        if let Some(dev) = scope {
            g.push_device(DeviceScope::Spec(DeviceSpec::parse(dev).expect("device spec")));
        }
        let colocate = s % 10 == 9;
        if colocate {
            g.push_colocation(prev_add, false).expect("colocate");
        }
        // Explicit unique names: building the graph stays cheap whatever unique_name costs.
        let value = Tensor::scalar(s as f64);
        let c = g.op_spec(NodeSpec::new("Const", &[]).attr("value", value).attr("dtype", DType::Float64).name(format!("c{s}"))).expect("const");
        let sin = g.op_spec(NodeSpec::new("Sin", &[c]).name(format!("sin{s}"))).expect("sin");
        let add = g.op_spec(NodeSpec::new("Add", &[sin, prev]).name(format!("add{s}"))).expect("add");
        prev = g.op_spec(NodeSpec::new("Mul", &[add, sin]).name(format!("mul{s}"))).expect("mul");
        prev_add = add.node;
        if colocate {
            g.pop_colocation();
        }
        if scope.is_some() {
            g.pop_device().expect("pop device");
        }
    }
    g
}

/// Small, bounded sampling so `make bench` finishes in minutes on a 2-core machine.
pub fn config() -> Criterion {
    Criterion::default().sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3)).configure_from_args()
}
