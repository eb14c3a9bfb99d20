//! Unary float kernels through a session: `Tanh`, `Exp`, `Log`, `Sigmoid`, `Sqrt`, `Relu`,
//! `Sin`, `Cos` of a Float32 (and Float64) constant of 2^20 values in [0.5, 2), as
//! `make bench-peers`' `unary_OP` workloads do, with 1 and 2 intra-op threads (`intra1`,
//! `intra2`): the goal is 1 G elements/s per core in f32. The figure includes allocating the
//! result; nothing is fetched to a host language.
//!
//! Throughput is `Elements(2^20)`, so criterion's `Gelem/s` is G elements/s.
//!
//! Run: `cargo bench -p oxiflow-core --bench unary`.

#[path = "common/mod.rs"]
mod common;

use common::config;
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use oxiflow_core::{Graph, Layout, Session, SessionOptions, Tensor};
use std::sync::{Arc, RwLock};

const N: usize = 1 << 20;
const OPS: [&str; 8] = ["Tanh", "Exp", "Log", "Sigmoid", "Sqrt", "Relu", "Sin", "Cos"];

fn bench_unary(c: &mut Criterion) {
    let mut group = c.benchmark_group("unary");
    group.throughput(Throughput::Elements(N as u64));
    // values in [0.5, 2): a fixed low-discrepancy sweep
    let v: Vec<f64> = (0..N).map(|i| 0.5 + 1.5 * ((i as f64 * 0.618_033_988_749_895) % 1.0)).collect();
    for (dtype, f32) in [("f32", true), ("f64", false)] {
        for intra in [1usize, 2] {
            let mut g = Graph::new();
            let t = if f32 {
                Tensor::from_vec(&[N], v.iter().map(|&x| x as f32).collect(), Layout::RowMajor)
            } else {
                Tensor::from_vec(&[N], v.clone(), Layout::RowMajor)
            }
            .expect("input");
            let x = g.constant(t).expect("constant");
            let ys: Vec<_> = OPS.iter().map(|op| g.op(op, &[x]).expect("op")).collect();
            let opts = SessionOptions { emulated_gpus: Some(0), intra_op_threads: Some(intra), inter_op_threads: Some(intra), ..Default::default() };
            let sess = Session::new(Arc::new(RwLock::new(g)), opts).expect("session");
            for (op, &y) in OPS.iter().zip(&ys) {
                sess.run(&[], &[y], &[], false).expect("first run");
                group.bench_function(format!("{op}/{dtype}/intra{intra}"), |b| b.iter(|| black_box(sess.run(&[], &[y], &[], false).expect("run"))));
            }
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_unary
}
criterion_main!(benches);
