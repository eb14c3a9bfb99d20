//! Sessions on a real GPU: seed 000's program (variable on the CPU, `sin` on GPU:0, `cos`
//! on the CPU, colocated gradients) and a training step of a small MLP, both with soft
//! placement off, so an op without a GPU kernel fails instead of quietly running on the
//! CPU; each checks where every op ran and that the traced step's GPU ops carry times from
//! CUDA events. Oracle: the same graph run on the CPU only (tolerance 1e-12 in Float64).
//! Then memory: out-of-memory under a virtual device's limit and under
//! `per_process_gpu_memory_fraction` fails cleanly and leaves the session usable; two live
//! sessions share the GPU's allocator (TF's per-process allocator) and a session with other
//! options is told what holds the memory; and `CUDA_VISIBLE_DEVICES` shows or hides the
//! GPU (checked in child processes, since the driver reads it once per process). A graph
//! with an unknown batch dimension runs on the GPU for two fed sizes, its gradient's
//! run-time shape ops included.
//!
//! Every test starts at [`oxiflow_cuda::testing::gpu_or_skip`]: it skips only where no
//! driver or GPU exists, and fails under `OXIFLOW_REQUIRE_GPU=1`. The tests share one GPU
//! and take a lock, so they run one at a time whatever `--test-threads` says.

use oxiflow_core::autodiff::gradients;
use oxiflow_core::device::config::GpuOptions;
use oxiflow_core::device::DeviceKind;
use oxiflow_core::graph::{DeviceScope, NodeDef};
use oxiflow_core::ops::{lookup, GpuLaunch};
use oxiflow_core::{DeviceSpec, Graph, Layout, NodeId, Output, Session, SessionOptions, Tensor};
use oxiflow_cuda::testing::gpu_or_skip;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

const GPU0: &str = "/job:localhost/replica:0/task:0/device:GPU:0";
const CPU0: &str = "/job:localhost/replica:0/task:0/device:CPU:0";

/// The gate, then the lock that keeps this file's tests off the GPU at the same time.
fn gpu(test: &str) -> Option<MutexGuard<'static, ()>> {
    static LOCK: Mutex<()> = Mutex::new(());
    if !gpu_or_skip(test) {
        return None;
    }
    Some(LOCK.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Real GPUs only (no emulated one), soft placement off.
fn real(gpu_options: GpuOptions) -> SessionOptions {
    SessionOptions { emulated_gpus: Some(0), gpu_options, allow_soft_placement: false, ..Default::default() }
}

fn cpu_only() -> SessionOptions {
    SessionOptions { emulated_gpus: Some(0), gpu_count: Some(0), allow_soft_placement: true, ..Default::default() }
}

fn unix_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// Runs one traced step and checks its GPU side: at least one kernel ran on GPU:0, and
/// every GPU step that launches a kernel was timed by CUDA events (`device_clock`) within
/// the run's wall-clock window, as the profile's `args.clock = "device"` then shows.
fn traced_step_has_cuda_event_times(s: &Session, feeds: &[(Output, Tensor)], fetches: &[Output], targets: &[NodeId]) {
    let t0 = unix_ns();
    let out = s.run(feeds, fetches, targets, true).unwrap();
    let t1 = unix_ns();
    let stats = out.step_stats.expect("a traced run has step stats");
    let mut launched = 0;
    for n in &stats.nodes {
        let l = &stats.labels[n.step];
        if l.device != GPU0 || l.copy.is_some() {
            continue;
        }
        let def = lookup(&l.op).unwrap_or_else(|e| panic!("{} ({}) ran on the GPU but is no registered op: {e}", l.node_name, l.op));
        // no launch: run by the device itself, or on the host for the GPU (`While`, and
        // Int32 arithmetic, which the host's clock times)
        if def.launch == GpuLaunch::DeviceHandled || def.launch == GpuLaunch::Host || (!def.host_memory.is_empty() && !n.device_clock) {
            continue;
        }
        launched += 1;
        assert!(n.device_clock, "{} ({}) on the GPU was timed by the host, not by CUDA events", l.node_name, l.op);
        assert!(
            t0 <= n.start_ns && n.start_ns <= n.end_ns && n.end_ns <= t1 + 1_000_000,
            "{} ({}): [{}, {}] outside the run [{t0}, {t1}]",
            l.node_name,
            l.op,
            n.start_ns,
            n.end_ns
        );
    }
    assert!(launched > 0, "no kernel ran on the GPU in the traced step");
    // scripts/gpu-check.sh counts these lines: a GPU run with none of them proves nothing
    println!("kernels timed by CUDA events on GPU:0: {launched}");
    assert!(stats.chrome_trace_json().replace(' ', "").contains(r#""clock":"device""#), "the profile marks no event as timed by the device");
}

fn assign_to_device(node: &NodeDef) -> Result<String, String> {
    Ok(if node.op == "VariableV2" { "/device:CPU:0".into() } else { "/device:GPU:0".into() })
}

/// Seed 000: returns the graph, the fetches (b, c, dc/da) and the initializer.
fn seed_000() -> (Arc<RwLock<Graph>>, Vec<Output>, NodeId) {
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

#[test]
fn seed_000_runs_on_the_real_gpu_and_matches_the_cpu() {
    let Some(_gpu) = gpu("seed_000_runs_on_the_real_gpu_and_matches_the_cpu") else { return };
    let (g, fetches, init) = seed_000();
    let mut values = Vec::new();
    for opts in [real(GpuOptions::default()), cpu_only()] {
        let s = Session::new(g.clone(), opts).unwrap();
        s.run(&[], &[], &[init], false).unwrap();
        values.push(s.run(&[], &fetches, &[], false).unwrap().values.iter().map(|t| t.to_f64_vec()[0]).collect::<Vec<_>>());
        if values.len() == 1 {
            assert_eq!(s.devices().devices[1].attributes().kind, DeviceKind::ProvidedGpu);
            let gr = g.read().unwrap();
            for (node, want) in [("Sin", GPU0), ("Cos", CPU0), ("gradients/Sin_grad/Cos", GPU0), ("gradients/Sin_grad/mul", GPU0)] {
                let id = gr.node_by_name(node).unwrap_or_else(|| panic!("no node {node}"));
                assert_eq!(s.assigned_device(id).unwrap(), want, "{node}");
            }
            drop(gr);
            traced_step_has_cuda_event_times(&s, &[], &fetches, &[]);
            println!("GPU: {}", s.devices().devices[1].attributes().description);
        }
    }
    let x = 1f64;
    let oracle = [x.sin(), x.sin().cos(), -x.sin().sin() * x.cos()];
    for ((gpu, cpu), want) in values[0].iter().zip(&values[1]).zip(oracle) {
        assert!((gpu - cpu).abs() < 1e-12 && (gpu - want).abs() < 1e-12, "gpu {gpu} cpu {cpu} exact {want}");
    }
}

#[test]
fn an_mlp_training_step_on_the_gpu_equals_the_cpus() {
    let Some(_gpu) = gpu("an_mlp_training_step_on_the_gpu_equals_the_cpus") else { return };
    // y = tanh(x W1 + b1) W2, loss = sum((y - t)^2), GradientDescent steps
    let mut g = Graph::new();
    let rand = |n: usize, seed: u64| -> Vec<f64> { (0..n).map(|i| (((i as u64 * 2654435761 + seed) % 1000) as f64) / 500.0 - 1.0).collect() };
    g.push_device(DeviceScope::Spec(DeviceSpec::parse("/GPU:0").unwrap()));
    let x = g.constant(Tensor::from_vec(&[8, 5], rand(40, 1), Layout::RowMajor).unwrap()).unwrap();
    let t = g.constant(Tensor::from_vec(&[8, 3], rand(24, 2), Layout::RowMajor).unwrap()).unwrap();
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
    let all: Vec<(NodeId, String)> = g.nodes().iter().map(|n| (n.id, n.name.clone())).collect();
    let g = Arc::new(RwLock::new(g));
    let mut results = Vec::new();
    for (k, opts) in [real(GpuOptions::default()), cpu_only()].into_iter().enumerate() {
        let s = Session::new(g.clone(), opts).unwrap();
        s.run(&[], &[], &[init], false).unwrap();
        if k == 0 {
            // everything in the scope ran on GPU:0: no soft fallback to the CPU
            for (id, name) in &all {
                if let Ok(d) = s.assigned_device(*id) {
                    assert!(d == GPU0 || name.starts_with("init"), "{name} was placed on {d}");
                }
            }
            traced_step_has_cuda_event_times(&s, &[], &[loss], &steps);
        } else {
            s.run(&[], &[], &steps, false).unwrap();
        }
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
fn a_graph_with_an_unknown_batch_dimension_runs_on_the_gpu_for_any_fed_size() {
    let Some(_gpu) = gpu("a_graph_with_an_unknown_batch_dimension_runs_on_the_gpu_for_any_fed_size") else { return };
    // x: [?, 5] fed 3 and 11 rows through one session; its gradient needs the run-time
    // shape ops (`_SumToShapeOf` launching a `Sum`, `_BroadcastToShapeOf` a `BroadcastTo`,
    // `_ReshapeToShapeOf`, a two-operand `StridedSliceGrad`, `EnsureShape`,
    // `_ScatterNdToShapeOf`), all on GPU:0
    // with soft placement off
    use oxiflow_core::ops::AttrValue;
    use oxiflow_core::shape::UNKNOWN;
    use oxiflow_core::NodeSpec;
    let mut g = Graph::new();
    let rand = |n: usize, seed: u64| -> Vec<f64> { (0..n).map(|i| (((i as u64 * 2654435761 + seed) % 1000) as f64) / 500.0 - 1.0).collect() };
    g.push_device(DeviceScope::Spec(DeviceSpec::parse("/GPU:0").unwrap()));
    let x = g.placeholder(oxiflow_core::DType::Float64, &[UNKNOWN, 5], Some("x")).unwrap();
    let w = g.variable(Tensor::from_vec(&[5, 4], rand(20, 3), Layout::RowMajor).unwrap(), Some("w"), true).unwrap();
    let b = g.variable(Tensor::from_vec(&[4], rand(4, 4), Layout::RowMajor).unwrap(), Some("b"), true).unwrap();
    let h = g.op("MatMul", &[x, Output::new(w, 0)]).unwrap();
    let h = g.op("Add", &[h, Output::new(b, 0)]).unwrap();
    let h = g.op("Tanh", &[h]).unwrap();
    let m = g.op_spec(NodeSpec::new("Mean", &[h]).attr("axis", vec![1i64])).unwrap();
    let col = g.op_spec(NodeSpec::new("Reshape", &[m]).attr("shape", AttrValue::Shape(vec![UNKNOWN, 1]))).unwrap();
    let p = g.op("Mul", &[col, h]).unwrap();
    let p = g.op_spec(NodeSpec::new("EnsureShape", &[p]).attr("shape", AttrValue::Shape(vec![UNKNOWN, 4]))).unwrap();
    let pl = g.op("Sum", &[p]).unwrap();
    // x[:, 1]: a StridedSlice whose gradient takes x's run-time shape as a second operand
    let x1 = oxiflow_core::ops::index::strided_slice(&mut g, x, &[0, 1], &[0, 2], &[1, 1], 1, 1, 2).unwrap();
    let x1 = g.op("Square", &[x1]).unwrap();
    let xl = g.op("Sum", &[x1]).unwrap();
    let loss = g.op("Add", &[pl, xl]).unwrap();
    // rows 2 and 0 (twice) of x: a GatherV2 whose gradient scatters into x's run-time row
    // count (`_ScatterNdToShapeOf` launching a `ScatterNd`)
    let ids = g.constant(Tensor::from_vec(&[3], vec![2i64, 0, 0], Layout::RowMajor).unwrap()).unwrap();
    let xg = g.op("GatherV2", &[x, ids]).unwrap();
    let xg = g.op("Square", &[xg]).unwrap();
    let xg = g.op("Sum", &[xg]).unwrap();
    let loss = g.op("Add", &[loss, xg]).unwrap();
    let grads = gradients(&mut g, &[loss], &[x, Output::new(w, 0), Output::new(b, 0)], None, true).unwrap();
    g.pop_device().unwrap();
    let init = g.global_variables_initializer().unwrap();
    let fetches = [loss, grads[0].unwrap(), grads[1].unwrap(), grads[2].unwrap()];
    let ops: Vec<&str> = g.nodes().iter().map(|n| n.op.name).collect();
    for op in ["_SumToShapeOf", "_BroadcastToShapeOf", "_ReshapeToShapeOf", "StridedSliceGrad", "EnsureShape", "_ScatterNdToShapeOf"] {
        assert!(ops.contains(&op), "{op} missing from the gradient: {ops:?}");
    }
    let all: Vec<(NodeId, String)> = g.nodes().iter().map(|n| (n.id, n.name.clone())).collect();
    let g = Arc::new(RwLock::new(g));
    let (gpu_s, cpu_s) = (Session::new(g.clone(), real(GpuOptions::default())).unwrap(), Session::new(g.clone(), cpu_only()).unwrap());
    for s in [&gpu_s, &cpu_s] {
        s.run(&[], &[], &[init], false).unwrap();
    }
    for (id, name) in &all {
        if let Ok(d) = gpu_s.assigned_device(*id) {
            assert!(d == GPU0 || name.starts_with("init"), "{name} was placed on {d}");
        }
    }
    for rows in [3usize, 11] {
        let feed = [(x, Tensor::from_vec(&[rows, 5], rand(rows * 5, rows as u64), Layout::RowMajor).unwrap())];
        traced_step_has_cuda_event_times(&gpu_s, &feed, &fetches, &[]);
        let got = gpu_s.run(&feed, &fetches, &[], false).unwrap().values;
        let want = cpu_s.run(&feed, &fetches, &[], false).unwrap().values;
        for (k, (a, b)) in got.iter().zip(&want).enumerate() {
            assert_eq!(a.dims(), b.dims(), "fetch {k}, {rows} rows");
            for (u, v) in a.to_f64_vec().iter().zip(b.to_f64_vec()) {
                assert!((u - v).abs() < 1e-12 * (1.0 + v.abs()), "fetch {k}, {rows} rows: gpu {u} cpu {v}");
            }
        }
    }
}

/// A graph with a `[rows, 1024]` Float64 constant and a scalar on GPU:0; returns the graph
/// and the `Sin` of each.
fn big_and_small(rows: usize) -> (Arc<RwLock<Graph>>, Output, Output) {
    let mut g = Graph::new();
    g.push_device(DeviceScope::Spec(DeviceSpec::parse("/GPU:0").unwrap()));
    let big = g.constant(Tensor::full(&[rows, 1024], 1.0f64)).unwrap();
    let s_big = g.op("Sin", &[big]).unwrap();
    let small = g.constant(Tensor::scalar(2.0f64)).unwrap();
    let s_small = g.op("Sin", &[small]).unwrap();
    g.pop_device().unwrap();
    (Arc::new(RwLock::new(g)), s_big, s_small)
}

/// The big op fails with TF's OOM naming GPU:0 and the small one still runs.
fn oom_then_usable(s: &Session, big: Output, small: Output) {
    let e = s.run(&[], &[big], &[], false).unwrap_err();
    assert_eq!(e.code(), 8, "ResourceExhausted: {e}");
    let msg = e.to_string();
    assert!(msg.contains("OOM when allocating") && msg.contains(GPU0), "{msg}");
    let v = s.run(&[], &[small], &[], false).unwrap().values[0].to_f64_vec();
    assert!((v[0] - 2f64.sin()).abs() < 1e-15);
}

#[test]
fn out_of_memory_names_the_device_and_the_session_survives() {
    let Some(_gpu) = gpu("out_of_memory_names_the_device_and_the_session_survives") else { return };
    // a 1 MiB virtual GPU: a 2 MiB constant cannot be placed in it
    let (g, big, small) = big_and_small(256);
    let s = Session::new(g, real(GpuOptions { virtual_devices_mb: vec![vec![1]], ..Default::default() })).unwrap();
    oom_then_usable(&s, big, small);
}

#[test]
fn out_of_memory_under_a_memory_fraction_fails_cleanly() {
    let Some(_gpu) = gpu("out_of_memory_under_a_memory_fraction_fails_cleanly") else { return };
    let total = oxiflow_core::device::provider::gpu_provider().unwrap().gpus()[0].total_memory as f64;
    // a limit of about 64 MiB; the 128 MiB constant does not fit, a 16 MiB one does
    let opts = GpuOptions { per_process_gpu_memory_fraction: Some(64.0 * 1048576.0 / total), ..Default::default() };
    let (g, big, small) = big_and_small(16384);
    let s = Session::new(g, real(opts.clone())).unwrap();
    oom_then_usable(&s, big, small);
    let (g2, fits, _) = big_and_small(2048);
    let s2 = Session::new(g2, real(opts)).unwrap();
    let v = s2.run(&[], &[fits], &[], false).unwrap().values[0].to_f64_vec();
    assert!(v.len() == 2048 * 1024 && v.iter().all(|&x| (x - 1f64.sin()).abs() < 1e-15));
}

#[test]
fn live_sessions_share_the_gpu_and_other_options_are_told_what_holds_it() {
    let Some(_gpu) = gpu("live_sessions_share_the_gpu_and_other_options_are_told_what_holds_it") else { return };
    // Without allow_growth the first session's allocator takes (nearly) the whole GPU;
    // a second session with the same options must use that allocator, not ask again.
    let (g, big, small) = big_and_small(64);
    let first = Session::new(g.clone(), real(GpuOptions::default())).unwrap();
    let kept = first.run(&[], &[big], &[], false).unwrap();
    let second = Session::new(g.clone(), real(GpuOptions::default())).unwrap();
    let v = second.run(&[], &[big, small], &[], false).unwrap();
    assert_eq!(v.values[0].to_f64_vec(), kept.values[0].to_f64_vec());
    // other options need an allocator of their own, and the GPU has no room for it
    let half = real(GpuOptions { per_process_gpu_memory_fraction: Some(0.5), ..Default::default() });
    let third = Session::new(g.clone(), half.clone()).unwrap();
    let e = third.run(&[], &[small], &[], false).unwrap_err();
    let msg = e.to_string();
    assert!(e.code() == 8 && msg.contains(GPU0) && msg.contains("other sessions") && msg.contains("allow_growth"), "{msg}");
    // once the other sessions are gone, their memory is back and the options apply
    drop((first, second, third));
    let fourth = Session::new(g, half).unwrap();
    let v = fourth.run(&[], &[small], &[], false).unwrap().values[0].to_f64_vec();
    assert!((v[0] - 2f64.sin()).abs() < 1e-15);
}

/// Runs this test binary's [`cuda_visible_devices_child`] with `CUDA_VISIBLE_DEVICES` set
/// to `value`, expecting `expect` GPUs (and the UUID `uuid` when one).
fn child(value: &str, expect: usize, uuid: &str) {
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args(["--exact", "cuda_visible_devices_child", "--nocapture", "--test-threads=1"])
        .env("CUDA_VISIBLE_DEVICES", value)
        .env("OXIFLOW_CHILD_EXPECT", format!("{expect} {uuid}"))
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("child checked"), "CUDA_VISIBLE_DEVICES={value:?}: {text}");
}

#[test]
fn cuda_visible_devices_selects_and_hides_the_gpu() {
    let Some(_gpu) = gpu("cuda_visible_devices_selects_and_hides_the_gpu") else { return };
    let p = oxiflow_core::device::provider::gpu_provider().unwrap();
    let (n, uuid) = (p.gpus().len(), p.gpus()[0].uuid.clone());
    child("", 0, "");
    child("0", 1, &uuid);
    child(&uuid, 1, &uuid);
    child(&n.to_string(), 0, ""); // no GPU has that ordinal
}

/// Not a test of its own: does its checks only when [`child`] starts it.
#[test]
fn cuda_visible_devices_child() {
    let Ok(expect) = std::env::var("OXIFLOW_CHILD_EXPECT") else { return };
    let (n, uuid) = expect.split_once(' ').unwrap();
    let n: usize = n.parse().unwrap();
    let reason = oxiflow_cuda::provider::register();
    let devs = oxiflow_core::device::process::physical_devices().unwrap();
    let gpus: Vec<_> = devs.iter().filter(|d| d.uuid.is_some()).collect();
    assert_eq!(gpus.len(), n, "physical devices {devs:?}, reason {reason:?}");
    let (g, _, small) = big_and_small(1);
    let run = Session::new(g, real(GpuOptions::default())).and_then(|s| s.run(&[], &[small], &[], false).map(|o| (s, o)));
    match run {
        Err(e) => {
            // soft placement is off: GPU:0 must be refused by name
            assert!(n == 0 && e.to_string().contains("GPU:0"), "{n} GPU(s) expected: {e}");
            println!("child checked: no GPU ({e})");
        }
        Ok((s, out)) => {
            assert_eq!(n, 1, "an op ran on GPU:0 with no GPU visible");
            assert_eq!(gpus[0].uuid.as_deref(), Some(uuid));
            assert_eq!(s.devices().devices[1].attributes().kind, DeviceKind::ProvidedGpu);
            assert!((out.values[0].to_f64_vec()[0] - 2f64.sin()).abs() < 1e-15);
            println!("child checked: {}", s.devices().devices[1].attributes().description);
        }
    }
}
