//! Sessions on a real GPU: seed 000's program (variable on the CPU, `sin` on GPU:0, `cos`
//! on the CPU, colocated gradients), a training step of a small MLP with Adam, and an
//! out-of-memory error that leaves the session usable. Oracle: the same graph run on the
//! CPU only (tolerance 1e-12 in Float64). Without a CUDA driver every test prints that it
//! was skipped and returns.

use oxiflow_core::autodiff::gradients;
use oxiflow_core::device::config::GpuOptions;
use oxiflow_core::device::DeviceKind;
use oxiflow_core::graph::{DeviceScope, NodeDef};
use oxiflow_core::{DeviceSpec, Graph, Layout, Output, Session, SessionOptions, Tensor};
use std::sync::{Arc, RwLock};

const GPU0: &str = "/job:localhost/replica:0/task:0/device:GPU:0";

/// `true` when a real GPU is present (the provider is registered either way).
fn gpu() -> bool {
    let reason = oxiflow_cuda::provider::register();
    match oxiflow_core::device::provider::gpu_provider() {
        Some(p) if !p.gpus().is_empty() => true,
        _ => {
            println!("skipped: no CUDA GPU ({})", reason.unwrap_or_default());
            false
        }
    }
}

fn real(gpu_options: GpuOptions) -> SessionOptions {
    SessionOptions { emulated_gpus: Some(0), gpu_options, ..Default::default() }
}

fn cpu_only() -> SessionOptions {
    SessionOptions { emulated_gpus: Some(0), gpu_count: Some(0), ..Default::default() }
}

fn assign_to_device(node: &NodeDef) -> Result<String, String> {
    Ok(if node.op == "VariableV2" { "/device:CPU:0".into() } else { "/device:GPU:0".into() })
}

/// Seed 000: returns the graph, the fetches (b, c, dc/da) and the initializer.
fn seed_000() -> (Arc<RwLock<Graph>>, Vec<Output>, oxiflow_core::NodeId) {
    let mut g = Graph::new();
    g.push_device(DeviceScope::Function(Arc::new(assign_to_device)));
    let a = g.variable(Tensor::scalar(1.0f64), None, true).unwrap();
    let b = g.op("Sin", &[Output::new(a, 0)]).unwrap();
    g.pop_device().unwrap();
    g.push_device(DeviceScope::Spec(DeviceSpec::parse("/CPU:0").unwrap()));
    let c = g.op("Cos", &[b]).unwrap();
    g.pop_device().unwrap();
    let d = gradients(&mut g, &[c], &[Output::new(a, 0)], None, true).unwrap()[0].unwrap();
    let init = g.global_variables_initializer().unwrap();
    (Arc::new(RwLock::new(g)), vec![b, c, d], init)
}

fn run(g: &Arc<RwLock<Graph>>, opts: SessionOptions, fetches: &[Output], init: oxiflow_core::NodeId) -> (Session, Vec<Vec<f64>>) {
    let s = Session::new(g.clone(), SessionOptions { allow_soft_placement: true, ..opts }).unwrap();
    s.run(&[], &[], &[init], false).unwrap();
    let out = s.run(&[], fetches, &[], true).unwrap();
    let v = out.values.iter().map(|t| t.to_f64_vec()).collect();
    (s, v)
}

#[test]
fn seed_000_runs_on_the_real_gpu_and_matches_the_cpu() {
    if !gpu() {
        return;
    }
    let (g, fetches, init) = seed_000();
    let (s, on_gpu) = run(&g, real(GpuOptions::default()), &fetches, init);
    let (_, on_cpu) = run(&g, cpu_only(), &fetches, init);
    for (x, y) in on_gpu.iter().zip(&on_cpu) {
        assert!((x[0] - y[0]).abs() < 1e-12, "gpu {x:?} cpu {y:?}");
    }
    assert_eq!(s.devices().devices[1].attributes().kind, DeviceKind::ProvidedGpu);
    assert_eq!(s.assigned_device(fetches[0].node).unwrap(), GPU0);
    let sin_grad = g.read().unwrap().node_by_name("gradients/Sin_grad/Cos").unwrap();
    assert_eq!(s.assigned_device(sin_grad).unwrap(), GPU0);
    println!("GPU: {}", s.devices().devices[1].attributes().description);
}

#[test]
fn an_mlp_training_step_on_the_gpu_equals_the_cpus() {
    if !gpu() {
        return;
    }
    // y = tanh(x W1 + b1) W2, loss = sum((y - t)^2), one GradientDescent step
    let mut g = Graph::new();
    let rand = |n: usize, seed: u64| -> Vec<f64> { (0..n).map(|i| (((i as u64 * 2654435761 + seed) % 1000) as f64) / 500.0 - 1.0).collect() };
    let x = g.constant(Tensor::from_vec(&[8, 5], rand(40, 1), Layout::RowMajor).unwrap()).unwrap();
    let t = g.constant(Tensor::from_vec(&[8, 3], rand(24, 2), Layout::RowMajor).unwrap()).unwrap();
    g.push_device(DeviceScope::Spec(DeviceSpec::parse("/GPU:0").unwrap()));
    let w1 = g.variable(Tensor::from_vec(&[5, 4], rand(20, 3), Layout::RowMajor).unwrap(), Some("w1"), true).unwrap();
    let b1 = g.variable(Tensor::from_vec(&[4], rand(4, 4), Layout::RowMajor).unwrap(), Some("b1"), true).unwrap();
    let w2 = g.variable(Tensor::from_vec(&[4, 3], rand(12, 5), Layout::RowMajor).unwrap(), Some("w2"), true).unwrap();
    let h = g.op("MatMul", &[x, Output::new(w1, 0)]).unwrap();
    let h = g.op("Add", &[h, Output::new(b1, 0)]).unwrap();
    let h = g.op("Tanh", &[h]).unwrap();
    let y = g.op("MatMul", &[h, Output::new(w2, 0)]).unwrap();
    let r = g.op("Sub", &[y, t]).unwrap();
    let r2 = g.op("Square", &[r]).unwrap();
    let loss = g.op("Sum", &[r2]).unwrap();
    let vars = [w1, b1, w2].map(|v| Output::new(v, 0));
    let grads = gradients(&mut g, &[loss], &vars, None, true).unwrap();
    let lr = g.constant(Tensor::scalar(0.05f64)).unwrap();
    let mut steps = Vec::new();
    for (v, d) in vars.iter().zip(&grads) {
        steps.push(g.op("ApplyGradientDescent", &[*v, lr, d.unwrap()]).unwrap().node);
    }
    g.pop_device().unwrap();
    let init = g.global_variables_initializer().unwrap();
    let g = Arc::new(RwLock::new(g));
    let mut results = Vec::new();
    for opts in [real(GpuOptions::default()), cpu_only()] {
        let s = Session::new(g.clone(), SessionOptions { allow_soft_placement: true, ..opts }).unwrap();
        s.run(&[], &[], &[init], false).unwrap();
        s.run(&[], &[], &steps, false).unwrap();
        let out = s.run(&[], &[loss, vars[0], vars[1], vars[2]], &[], false).unwrap();
        results.push(out.values.iter().map(|t| t.to_f64_vec()).collect::<Vec<_>>());
    }
    for (a, b) in results[0].iter().zip(&results[1]) {
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-12 * (1.0 + y.abs()), "gpu {x} cpu {y}");
        }
    }
}

#[test]
fn out_of_memory_names_the_device_and_the_session_survives() {
    if !gpu() {
        return;
    }
    // a 1 MiB virtual GPU: a 2 MiB constant cannot be placed in it
    let opts = GpuOptions { virtual_devices_mb: vec![vec![1]], ..Default::default() };
    let mut g = Graph::new();
    g.push_device(DeviceScope::Spec(DeviceSpec::parse("/GPU:0").unwrap()));
    let big = g.constant(Tensor::full(&[512, 512], 1.0f64)).unwrap();
    let s_big = g.op("Sin", &[big]).unwrap();
    let small = g.constant(Tensor::scalar(2.0f64)).unwrap();
    let s_small = g.op("Sin", &[small]).unwrap();
    g.pop_device().unwrap();
    let g = Arc::new(RwLock::new(g));
    let s = Session::new(g, real(opts)).unwrap();
    let e = s.run(&[], &[s_big], &[], false).unwrap_err().to_string();
    assert!(e.contains("OOM when allocating") && e.contains(GPU0), "{e}");
    let v = s.run(&[], &[s_small], &[], false).unwrap().values[0].to_f64_vec();
    assert!((v[0] - 2f64.sin()).abs() < 1e-15);
}
