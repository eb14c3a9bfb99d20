//! Graph builders and criterion settings shared by the benchmarks (each bench target is its
//! own crate and includes this file with `#[path]`).
#![allow(dead_code)]

use criterion::Criterion;
use oxiflow_core::{DType, Graph, NodeSpec, Output};
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

/// Small, bounded sampling so `make bench` finishes in minutes on a 2-core machine.
pub fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args()
}
