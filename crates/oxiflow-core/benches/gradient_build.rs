//! Autodiff graph construction: `autodiff::gradients` of the 10,000-op scalar chain
//! (`x -> Sin -> Cos -> ...`) with respect to its placeholder. Each iteration gets a fresh
//! copy of the forward graph (`iter_batched`, building it is not timed). `colocate`
//! measures `colocate_gradients_with_ops = true`, what ADCME users pass.
//!
//! Run: `cargo bench -p oxiflow-core --bench gradient_build`.

#[path = "common/mod.rs"]
mod common;

use common::{config, scalar_chain, CHAIN_LEN};
use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use oxiflow_core::autodiff::gradients;

fn bench_gradient_build(c: &mut Criterion) {
    let mut group = c.benchmark_group("gradient_build");
    group.throughput(Throughput::Elements(CHAIN_LEN as u64));
    for colocate in [false, true] {
        let name = if colocate { "chain_10k/colocate" } else { "chain_10k/plain" };
        group.bench_function(name, |b| {
            b.iter_batched(
                || scalar_chain(CHAIN_LEN),
                |(mut g, x, y)| {
                    let dx = gradients(&mut g, &[y], &[x], None, colocate).expect("gradients");
                    assert!(dx[0].is_some());
                    black_box(g)
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_gradient_build
}
criterion_main!(benches);
