//! The placer on a 100,000-node graph: 1 CPU and 2 emulated GPUs (`DeviceSet::new(1, 2)`),
//! `placer::place` over every node, no soft placement, nothing fixed beforehand.
//!
//! The graph is 25,000 independent-ish strands of `Const -> Sin -> Add(prev) -> Mul`: the
//! `Add` joins each strand to the previous one, so colocation groups and the generator
//! heuristic (a `Const` goes where its consumers are) both get exercised. Every 1,000
//! strands the device scope changes among none, `/gpu:0`, `/gpu:1` and `/cpu:0`; one
//! strand in 10 also asks for `colocate_with` the previous strand's `Add`.
//!
//! Run: `cargo bench -p oxiflow-core --bench placement`.

#[path = "common/mod.rs"]
mod common;

use common::config;
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use oxiflow_core::device::DeviceSet;
use oxiflow_core::graph::DeviceScope;
use oxiflow_core::placer::{place, Assignment};
use oxiflow_core::{DType, DeviceSpec, Graph, NodeId, NodeSpec, Tensor};

const NODES: usize = 100_000;

fn build_graph() -> Graph {
    let mut g = Graph::new();
    let scopes = [None, Some("/gpu:0"), Some("/gpu:1"), Some("/cpu:0")];
    let strands = NODES / 4;
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

fn bench_placement(c: &mut Criterion) {
    let g = build_graph();
    let devices = DeviceSet::new(1, 2);
    let nodes: Vec<NodeId> = (0..g.len()).collect();
    let fixed = Assignment::new();
    let placed = place(&g, &nodes, &devices, false, &fixed).expect("placement");
    assert_eq!(placed.len(), g.len());

    let mut group = c.benchmark_group("placement");
    group.throughput(Throughput::Elements(g.len() as u64));
    group.bench_function(format!("place_{}_nodes/1cpu_2gpu", g.len()), |b| {
        b.iter(|| black_box(place(&g, &nodes, &devices, false, &fixed).expect("placement")))
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_placement
}
criterion_main!(benches);
