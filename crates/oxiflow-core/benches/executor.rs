//! Executor overhead: a 10,000-op scalar chain (`x -> Sin -> Cos -> ...`, Float64, fed
//! through a placeholder) run with `Session::run`. Per-node kernel work is a single
//! `sin`/`cos` of a scalar, so the time is almost entirely the engine's per-op cost
//! (plan lookup, input gathering, kernel dispatch, output slots, scheduling).
//! Throughput is reported in elements = ops, so criterion prints ops/s; time per op is
//! the reciprocal. `traced` runs the same step with `trace = true` (step statistics for
//! the timeline) to show the profiler's overhead.
//!
//! Run: `cargo bench -p oxiflow-core --bench executor`.

#[path = "common/mod.rs"]
mod common;

use common::{config, scalar_chain, CHAIN_LEN};
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use oxiflow_core::{Graph, Session, SessionOptions, Tensor};
use std::sync::{Arc, RwLock};

fn session_over(g: Graph) -> Session {
    let opts = SessionOptions { emulated_gpus: Some(0), ..Default::default() };
    Session::new(Arc::new(RwLock::new(g)), opts).expect("session")
}

fn bench_executor(c: &mut Criterion) {
    let (g, x, y) = scalar_chain(CHAIN_LEN);
    let sess = session_over(g);
    let feed = Tensor::scalar(0.5f64);
    // First run places the graph and caches the plan; the benchmark measures steady state.
    sess.run(&[(x, feed.clone())], &[y], &[], false).expect("first run");

    let mut group = c.benchmark_group("executor");
    group.throughput(Throughput::Elements(CHAIN_LEN as u64));
    group.bench_function("chain_10k/untraced", |b| b.iter(|| black_box(sess.run(&[(x, feed.clone())], &[y], &[], false).expect("run"))));
    group.bench_function("chain_10k/traced", |b| b.iter(|| black_box(sess.run(&[(x, feed.clone())], &[y], &[], true).expect("traced run"))));
    group.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_executor
}
criterion_main!(benches);
