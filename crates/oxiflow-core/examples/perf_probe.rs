//! A/B timing probe for the executor, gradient-build and placement benchmarks on a shared
//! machine (docs/performance.md). Criterion's estimates move with other load; this prints,
//! over many repetitions, the minimum and median wall time *and* the CPU time of this
//! process's threads (from `/proc/self/task/*/schedstat`, Linux only), which moves much less.
//! Build it at two commits and run both binaries back to back.
//!
//! Run: `cargo run --release -p oxiflow-core --example perf_probe -- <what>` with `<what>`
//! one of `exec`, `traced` (10k Sin/Cos chain, µs per op; `N=<len>` changes the length),
//! `grad`, `gradc` (gradient of that chain, plain / `colocate=true`, ms) or `place`
//! (placement of the 100,001-node strand graph on 1 CPU + 2 emulated GPUs, ms);
//! `IT=<n>` sets the repetitions of `grad`/`gradc`/`place` (default 25).

#[path = "../benches/common/mod.rs"]
mod common;

use common::{scalar_chain, strand_graph};
use oxiflow_core::autodiff::gradients;
use oxiflow_core::device::DeviceSet;
use oxiflow_core::placer::{place, Assignment};
use oxiflow_core::{NodeId, Session, SessionOptions, Tensor};
use std::sync::{Arc, RwLock};
use std::time::Instant;

fn env_or(k: &str, default: usize) -> usize {
    std::env::var(k).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// CPU time of all this process's threads, in ns (0 where /proc has no schedstat).
fn cpu_ns() -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return 0.0 };
    dir.filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("schedstat")).ok()).filter_map(|s| s.split_whitespace().next()?.parse::<f64>().ok()).sum()
}

/// Times `f` `reps` times; each sample is divided by `per`.
fn measure(reps: usize, per: f64, mut f: impl FnMut() -> (f64, f64)) -> String {
    let (mut wall, mut cpu): (Vec<f64>, Vec<f64>) = (0..reps).map(|_| f()).map(|(w, c)| (w / per, c / per)).unzip();
    let stat = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        (v[0], v[v.len() / 2])
    };
    let ((wmin, wmed), (cmin, cmed)) = (stat(&mut wall), stat(&mut cpu));
    format!("wall min {wmin:.4} median {wmed:.4}; cpu min {cmin:.4} median {cmed:.4}")
}

/// Wall and CPU time of `f`, in ns.
fn timed<T>(f: impl FnOnce() -> T) -> (f64, f64) {
    let (c, t) = (cpu_ns(), Instant::now());
    std::hint::black_box(f());
    (t.elapsed().as_nanos() as f64, cpu_ns() - c)
}

fn main() {
    let what = std::env::args().nth(1).unwrap_or_else(|| "exec".into());
    let reps = env_or("IT", 25);
    match what.as_str() {
        "exec" | "traced" => {
            let trace = what == "traced";
            let n = env_or("N", 10_000);
            let (g, x, y) = scalar_chain(n);
            let opts = SessionOptions { emulated_gpus: Some(0), ..Default::default() };
            let sess = Session::new(Arc::new(RwLock::new(g)), opts).expect("session");
            let feed = Tensor::scalar(0.5f64);
            sess.run(&[(x, feed.clone())], &[y], &[], trace).expect("first run");
            let batch = 20;
            let r = measure(60, (batch * n) as f64 * 1e3, || {
                timed(|| {
                    for _ in 0..batch {
                        std::hint::black_box(sess.run(&[(x, feed.clone())], &[y], &[], trace).expect("run"));
                    }
                })
            });
            println!("{what} (us/op): {r}");
        }
        "grad" | "gradc" => {
            let colocate = what == "gradc";
            let r = measure(reps, 1e6, || {
                let (mut g, x, y) = scalar_chain(10_000);
                timed(|| gradients(&mut g, &[y], &[x], None, colocate).expect("gradients"))
            });
            println!("{what} (ms): {r}");
        }
        "place" => {
            let g = strand_graph(100_000);
            let devices = DeviceSet::new(1, 2);
            let nodes: Vec<NodeId> = (0..g.len()).collect();
            let fixed = Assignment::new();
            let r = measure(reps, 1e6, || timed(|| place(&g, &nodes, &devices, false, &fixed).expect("placement")));
            println!("place (ms): {r}");
        }
        other => eprintln!("unknown probe '{other}': exec, traced, grad, gradc or place"),
    }
}
