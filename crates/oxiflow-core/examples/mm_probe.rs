//! MatMul GFLOP/s through a Session (constants n x n, n = 256, 1024, 2048, f64 and f32; median
//! and best of repeated runs), with the backend MatMul uses. Compare backends in one sitting:
//!
//!     cargo run --release -p oxiflow-core --example mm_probe
//!     OXIFLOW_BLAS=gemm ./target/release/examples/mm_probe

use oxiflow_core::{DType, Graph, Layout, Session, SessionOptions, Tensor};
use std::sync::{Arc, RwLock};
use std::time::Instant;
fn main() {
    println!("backend: {}", oxiflow_core::ops::blas::backend_name());
    for &n in &[256usize, 1024, 2048] {
        for dt in [DType::Float64, DType::Float32] {
            let mut g = Graph::new();
            let v: Vec<f64> = (0..n * n).map(|i| ((i * 7 % 13) as f64) - 6.0).collect();
            let t = |v: &Vec<f64>| {
                if dt == DType::Float64 {
                    Tensor::from_vec(&[n, n], v.clone(), Layout::RowMajor).unwrap()
                } else {
                    Tensor::from_vec(&[n, n], v.iter().map(|&x| x as f32).collect(), Layout::RowMajor).unwrap()
                }
            };
            let a = g.constant(t(&v)).unwrap();
            let b = g.constant(t(&v)).unwrap();
            let p = g.op("MatMul", &[a, b]).unwrap();
            let s = Session::new(Arc::new(RwLock::new(g)), SessionOptions { emulated_gpus: Some(0), ..Default::default() }).unwrap();
            let reps = if n <= 256 {
                300
            } else if n <= 1024 {
                12
            } else {
                4
            };
            s.run(&[], &[p], &[], false).unwrap();
            let mut ts = vec![];
            for _ in 0..reps {
                let t0 = Instant::now();
                s.run(&[], &[p], &[], false).unwrap();
                ts.push(t0.elapsed().as_secs_f64());
            }
            ts.sort_by(|a, b| a.partial_cmp(b).unwrap());
            println!(
                "n={n} {dt}: {:.1} GFLOP/s (median), {:.1} (best)",
                2.0 * (n as f64).powi(3) / ts[ts.len() / 2] / 1e9,
                2.0 * (n as f64).powi(3) / ts[0] / 1e9
            );
        }
    }
}
