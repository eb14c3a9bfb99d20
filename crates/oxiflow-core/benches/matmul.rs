//! `MatMul` kernel speed: `Const a`, `Const b`, `MatMul(a, b)` evaluated with
//! `eval::evaluate` (the host reference evaluator, no session, placement or thread-pool
//! hand-off), square `n x n` operands, Float32 and Float64.
//!
//! Throughput is `Elements(2 n^3)`: here an "element" is one floating-point operation,
//! so criterion's `Melem/s` reads as MFLOP/s and `Gelem/s` as GFLOP/s. The figure includes
//! allocating the `n x n` result (as every real run does).
//!
//! Run: `cargo bench -p oxiflow-core --bench matmul`.

#[path = "common/mod.rs"]
mod common;

use common::config;
use criterion::{black_box, criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use oxiflow_core::eval::{evaluate, HostState};
use oxiflow_core::{Graph, Layout, Tensor};
use std::time::Duration;

/// Deterministic values in [-1, 1) (xorshift64*).
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

fn matrix(n: usize, seed: u64, f32: bool) -> Tensor {
    let v = values(n * n, seed);
    if f32 {
        Tensor::from_vec(&[n, n], v.into_iter().map(|x| x as f32).collect(), Layout::RowMajor).expect("f32 matrix")
    } else {
        Tensor::from_vec(&[n, n], v, Layout::RowMajor).expect("f64 matrix")
    }
}

fn bench_matmul(c: &mut Criterion) {
    let mut group = c.benchmark_group("matmul");
    group.sampling_mode(SamplingMode::Flat);
    for &(dtype, is_f32) in &[("f32", true), ("f64", false)] {
        for &n in &[256usize, 1024, 2048] {
            let mut g = Graph::new();
            let a = g.constant(matrix(n, 1, is_f32)).expect("a");
            let b = g.constant(matrix(n, 2, is_f32)).expect("b");
            let p = g.op("MatMul", &[a, b]).expect("matmul");
            let state = HostState::default();
            group.throughput(Throughput::Elements(2 * (n as u64).pow(3)));
            if n >= 2048 {
                group.measurement_time(Duration::from_secs(6));
            } else {
                group.measurement_time(Duration::from_secs(3));
            }
            group.bench_function(format!("{dtype}/{n}"), |bch| bch.iter(|| black_box(evaluate(&g, &[], &[p], &[], &state).expect("evaluate"))));
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_matmul
}
criterion_main!(benches);
