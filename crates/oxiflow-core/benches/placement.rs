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

use common::{config, strand_graph};
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use oxiflow_core::device::DeviceSet;
use oxiflow_core::placer::{place, Assignment};
use oxiflow_core::NodeId;

const NODES: usize = 100_000;

fn bench_placement(c: &mut Criterion) {
    let g = strand_graph(NODES);
    let devices = DeviceSet::new(1, 2);
    let nodes: Vec<NodeId> = (0..g.len()).collect();
    let fixed = Assignment::new();
    let placed = place(&g, &nodes, &devices, false, &fixed).expect("placement");
    assert_eq!(placed.len(), g.len());

    let mut group = c.benchmark_group("placement");
    group.throughput(Throughput::Elements(g.len() as u64));
    group
        .bench_function(format!("place_{}_nodes/1cpu_2gpu", g.len()), |b| b.iter(|| black_box(place(&g, &nodes, &devices, false, &fixed).expect("placement"))));
    group.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_placement
}
criterion_main!(benches);
