//! What unknown dimensions cost: one training-style step (forward and gradient of a
//! 64-256-256-10 tanh MLP, Float32, loss summed) with the batch `x` declared `[256, 64]`
//! and the same graph with `x` declared `[?, 64]`, both fed 256 rows; and the partial graph
//! fed a new batch size each run (sizes 200 to 256 in turn), which must cost no
//! re-placement, only the run. The ratio partial / known is the price of re-inferring the
//! partial nodes' shapes at run time (`dynamic_shape::specialize`) and of the gradient's
//! run-time shape ops.
//!
//! Run: `cargo bench -p oxiflow-core --bench unknown_dims`.

#[path = "common/mod.rs"]
mod common;

use common::config;
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use oxiflow_core::autodiff::gradients;
use oxiflow_core::shape::UNKNOWN;
use oxiflow_core::{DType, Graph, Layout, Output, Session, SessionOptions, Tensor};
use std::sync::{Arc, RwLock};

fn tensor(dims: &[usize], seed: u64) -> Tensor {
    let n: usize = dims.iter().product();
    let v: Vec<f32> = (0..n).map(|i| (((i as u64 * 2654435761 + seed) % 1000) as f32) / 1000.0 - 0.5).collect();
    Tensor::from_vec(dims, v, Layout::RowMajor).expect("tensor")
}

/// The MLP step with `x` declared `[batch, 64]` (`batch` may be UNKNOWN): the session, the
/// placeholder and the fetches (loss and the three weight gradients).
fn mlp(batch: usize) -> (Session, Output, Vec<Output>) {
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float32, &[batch, 64], Some("x")).expect("x");
    let mut h = x;
    let mut ws = Vec::new();
    for (k, (i, o)) in [(64, 256), (256, 256), (256, 10)].into_iter().enumerate() {
        let w = g.constant(tensor(&[i, o], k as u64)).expect("w");
        let b = g.constant(tensor(&[o], 10 + k as u64)).expect("b");
        let z = g.op("MatMul", &[h, w]).expect("matmul");
        let z = g.op("Add", &[z, b]).expect("add");
        h = if k < 2 { g.op("Tanh", &[z]).expect("tanh") } else { z };
        ws.extend([w, b]);
    }
    let sq = g.op("Square", &[h]).expect("square");
    let loss = g.op("Sum", &[sq]).expect("sum");
    let mut fetches = vec![loss];
    fetches.extend(gradients(&mut g, &[loss], &ws, None, false).expect("gradients").into_iter().map(|d| d.expect("gradient")));
    let s = Session::new(Arc::new(RwLock::new(g)), SessionOptions { emulated_gpus: Some(0), ..Default::default() }).expect("session");
    (s, x, fetches)
}

fn bench_unknown_dims(c: &mut Criterion) {
    let (known, xk, fk) = mlp(256);
    let (partial, xp, fp) = mlp(UNKNOWN);
    let feed = tensor(&[256, 64], 99);
    let sizes: Vec<Tensor> = (200..=256).step_by(8).map(|n| tensor(&[n, 64], n as u64)).collect();
    known.run(&[(xk, feed.clone())], &fk, &[], false).expect("first run");
    partial.run(&[(xp, feed.clone())], &fp, &[], false).expect("first run");
    let mut group = c.benchmark_group("unknown_dims");
    group.bench_function("mlp_step/known_batch_256", |b| b.iter(|| black_box(known.run(&[(xk, feed.clone())], &fk, &[], false).expect("run"))));
    group.bench_function("mlp_step/unknown_batch_fed_256", |b| b.iter(|| black_box(partial.run(&[(xp, feed.clone())], &fp, &[], false).expect("run"))));
    let mut k = 0;
    group.bench_function("mlp_step/unknown_batch_new_size_each_run", |b| {
        b.iter(|| {
            k = (k + 1) % sizes.len();
            black_box(partial.run(&[(xp, sizes[k].clone())], &fp, &[], false).expect("run"))
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_unknown_dims
}
criterion_main!(benches);
