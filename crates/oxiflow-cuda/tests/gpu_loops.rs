//! Functional control flow on a real GPU, soft placement off: a `while_loop` pinned to GPU:0
//! whose body's float ops launch CUDA kernels and whose Int32 counter runs on the host, a
//! loop writing rows with `TensorScatterUpdate` on the device, their gradients
//! (`WhileGrad`, colocated), and the GPU's memory account back where it started after the
//! run. Oracle: the same graphs run on the CPU only (tolerance 1e-12 in Float64) and the
//! recurrences computed in Rust.
//!
//! Every test starts at [`oxiflow_cuda::testing::gpu_or_skip`]: it skips only where no
//! driver or GPU exists, and fails under `OXIFLOW_REQUIRE_GPU=1`.

#[path = "../../oxiflow-core/tests/common/gpu_loop.rs"]
mod gpu_loop;

use oxiflow_core::autodiff::gradients;
use oxiflow_core::graph::DeviceScope;
use oxiflow_core::{DType, DeviceSpec, Graph, Layout, Output, Session, SessionOptions, Tensor};
use oxiflow_cuda::testing::gpu_or_skip;
use std::sync::{Arc, Mutex, RwLock};

const GPU0: &str = "/job:localhost/replica:0/task:0/device:GPU:0";

/// Keeps this file's tests off the GPU at the same time.
static LOCK: Mutex<()> = Mutex::new(());

/// Real GPUs only, soft placement off; or the CPU only (soft placement moves the pinned ops).
fn opts(gpu: bool) -> SessionOptions {
    if gpu {
        SessionOptions { emulated_gpus: Some(0), allow_soft_placement: false, ..Default::default() }
    } else {
        SessionOptions { emulated_gpus: Some(0), gpu_count: Some(0), allow_soft_placement: true, ..Default::default() }
    }
}

/// Both loops of `gpu_loop` under `/device:GPU:0`, with `sum` of each result and its
/// gradient: fetches `[v, dv/dx, rows, d sum(rows)/dx]`.
fn loops() -> (Arc<RwLock<Graph>>, Vec<Output>) {
    let n = 2048;
    let mut g = Graph::new();
    g.push_device(DeviceScope::Spec(DeviceSpec::parse("/device:GPU:0").unwrap()));
    let x = g.constant(Tensor::from_vec(&[n], (0..n).map(|k| (k as f64 / n as f64) - 0.5).collect(), Layout::RowMajor).unwrap()).unwrap();
    let v = gpu_loop::sin_loop(&mut g, x, n, 6);
    let sv = g.op("Sum", &[v]).unwrap();
    let rows0 = g.constant(Tensor::filled(DType::Float64, &[64, 3], 0.0)).unwrap();
    let y = g.constant(Tensor::from_vec(&[3], vec![0.5, -1.5, 2.0], Layout::RowMajor).unwrap()).unwrap();
    let rows = gpu_loop::rows_loop(&mut g, rows0, y, 64);
    let sr = g.op("Sum", &[rows]).unwrap();
    g.pop_device().unwrap();
    let dx = gradients(&mut g, &[sv], &[x], None, true).unwrap()[0].unwrap();
    let dy = gradients(&mut g, &[sr], &[y], None, true).unwrap()[0].unwrap();
    (Arc::new(RwLock::new(g)), vec![v, dx, rows, dy])
}

#[test]
fn while_loops_and_their_gradients_run_on_the_gpu_and_match_the_cpu() {
    if !gpu_or_skip("while_loops_and_their_gradients_run_on_the_gpu_and_match_the_cpu") {
        return;
    }
    let _lock = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let (g, fetches) = loops();
    let gpu = Session::new(g.clone(), opts(true)).unwrap();
    let dev = gpu.devices().devices[1].clone();
    let before = dev.memory().map(|m| m.stats().bytes_in_use);
    let on_gpu: Vec<Vec<f64>> = gpu.run(&[], &fetches, &[], false).unwrap().values.iter().map(Tensor::to_f64_vec).collect();
    // the run's tensors (the loops' intermediates included) are given back
    assert_eq!(dev.memory().map(|m| m.stats().bytes_in_use), before);
    {
        let gr = g.read().unwrap();
        for n in gr.nodes().iter().filter(|n| matches!(n.op.name, "While" | "WhileGrad")) {
            assert_eq!(gpu.assigned_device(n.id).unwrap(), GPU0, "{} '{}'", n.op.name, n.name);
        }
    }
    let cpu = Session::new(g, opts(false)).unwrap();
    let on_cpu: Vec<Vec<f64>> = cpu.run(&[], &fetches, &[], false).unwrap().values.iter().map(Tensor::to_f64_vec).collect();
    for (k, (a, b)) in on_gpu.iter().zip(&on_cpu).enumerate() {
        assert!(gpu_loop::close(a, b), "fetch {k}: the GPU's values differ from the CPU's");
    }
    // and both from the recurrences
    let x: Vec<f64> = (0..2048).map(|k| (k as f64 / 2048.0) - 0.5).collect();
    let (v, d) = gpu_loop::oracle(&x, 6);
    assert!(gpu_loop::close(&on_gpu[0], &v) && gpu_loop::close(&on_gpu[1], &d));
    assert_eq!(on_gpu[3], vec![(64 * 65 / 2) as f64; 3]);
}
