//! Graph construction: adding the `x -> Sin -> Cos -> ...` scalar chain node by node with
//! `Graph::op` (shape inference, naming, scopes), with TF default names (`Sin`, `Sin_1`,
//! ..., what the Julia overloads produce) and with explicit unique names (`Sin_0`,
//! `Cos_1`, ...). The gap between the two is the cost of resolving name clashes in
//! `Graph::unique_name`; it must stay linear (it was quadratic before commit 1f0ec9f:
//! 2.5 s for 10k default-named nodes). Throughput is in nodes.
//!
//! Run: `cargo bench -p oxiflow-core --bench graph_build`.

#[path = "common/mod.rs"]
mod common;

use common::{config, scalar_chain_named};
use criterion::{black_box, criterion_group, criterion_main, Criterion, SamplingMode, Throughput};

fn bench_graph_build(c: &mut Criterion) {
    let mut group = c.benchmark_group("graph_build");
    group.sampling_mode(SamplingMode::Flat);
    for &(label, unique) in &[("default_names", false), ("unique_names", true)] {
        for &n in &[1_000usize, 10_000] {
            group.throughput(Throughput::Elements(n as u64));
            group.bench_function(format!("{label}/{n}"), |b| b.iter(|| black_box(scalar_chain_named(n, unique))));
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_graph_build
}
criterion_main!(benches);
