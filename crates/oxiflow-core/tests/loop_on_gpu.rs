//! Functional control flow on a GPU (emulated here; `gpu_provider.rs` runs the same loop with
//! device-resident tensors): a `While` pinned to a GPU is placed there without soft
//! placement, as TF places a `tf.while_loop` under a GPU scope; its body's float ops run on
//! the GPU and its Int32 counter on the host; its gradient (`WhileGrad`, colocated) too; the
//! memory each iteration takes on the GPU is given back. Oracles: the loop's recurrence and
//! its derivative computed in Rust, byte counts of the tensors, TF's placer (an op with a
//! GPU kernel goes to the GPU by default).

#[path = "common/gpu_loop.rs"]
mod gpu_loop;

use gpu_loop::{close, oracle, rows_loop, sin_loop};
use oxiflow_core::autodiff::gradients;
use oxiflow_core::graph::DeviceScope;
use oxiflow_core::{DType, DeviceSpec, Graph, Layout, OxiflowError, Session, SessionOptions, Tensor};
use std::sync::{Arc, RwLock};

const GPU0: &str = "/job:localhost/replica:0/task:0/device:GPU:0";

/// `gpus` emulated GPUs of `mb` MiB each (`None`: the default size), all visible.
fn opts(gpus: usize, mb: Option<u64>) -> SessionOptions {
    let mut o = SessionOptions { emulated_gpus: Some(gpus), ..Default::default() };
    o.cuda_visible_devices = Some((0..gpus).map(|i| i.to_string()).collect::<Vec<_>>().join(","));
    if let Some(mb) = mb {
        o.gpu_options.virtual_devices_mb = vec![vec![mb]];
    }
    o
}

#[test]
fn a_loop_pinned_to_a_gpu_runs_there_with_its_gradient_and_no_soft_placement() {
    let x0 = [0.3, -1.2, 2.0];
    let mut g = Graph::new();
    g.push_device(DeviceScope::Spec(DeviceSpec::parse("/device:GPU:0").unwrap()));
    let x = g.constant(Tensor::from_vec(&[3], x0.to_vec(), Layout::RowMajor).unwrap()).unwrap();
    let v = sin_loop(&mut g, x, 3, 4);
    let s = g.op("Sum", &[v]).unwrap();
    g.pop_device().unwrap();
    let dx = gradients(&mut g, &[s], &[x], None, true).unwrap()[0].unwrap();
    let g = Arc::new(RwLock::new(g));
    let sess = Session::new(g.clone(), opts(1, None)).unwrap();
    let out = sess.run(&[], &[v, dx], &[], true).unwrap();
    let (want_v, want_d) = oracle(&x0, 4);
    assert!(close(&out.values[0].to_f64_vec(), &want_v), "{:?} vs {want_v:?}", out.values[0].to_f64_vec());
    assert!(close(&out.values[1].to_f64_vec(), &want_d), "{:?} vs {want_d:?}", out.values[1].to_f64_vec());
    let grad_op = g.read().unwrap().nodes().iter().find(|n| n.op.name == "WhileGrad").map(|n| n.id).expect("a WhileGrad");
    assert_eq!(sess.assigned_device(v.node).unwrap(), GPU0);
    assert_eq!(sess.assigned_device(grad_op).unwrap(), GPU0, "colocated with the loop");
    // the traced run lists every iteration's body ops under the loop
    let stats = out.step_stats.expect("traced run");
    let sins = |f: &dyn Fn(&str) -> bool| stats.nodes.iter().filter(|n| f(&stats.label(n).node_name)).count();
    assert_eq!(sins(&|n| n == "loop/body/body_sin"), 4);
    // four more in the gradient's rerun of the loop
    assert_eq!(sins(&|n| n.ends_with("/body/body_sin")), 8);
}

#[test]
fn a_loop_without_a_device_goes_to_the_gpu_as_tf_places_it() {
    let mut g = Graph::new();
    let x = g.constant(Tensor::from_vec(&[2], vec![0.5, 1.0], Layout::RowMajor).unwrap()).unwrap();
    let v = sin_loop(&mut g, x, 2, 3);
    let sess = Session::new(Arc::new(RwLock::new(g)), opts(1, None)).unwrap();
    let got = sess.run(&[], &[v], &[], false).unwrap().values;
    assert!(close(&got[0].to_f64_vec(), &oracle(&[0.5, 1.0], 3).0));
    assert_eq!(sess.assigned_device(v.node).unwrap(), GPU0);
}

#[test]
fn each_iteration_gives_back_the_gpu_memory_it_took() {
    // 4096 Float64 = 32 KiB per tensor; 300 iterations keep none of their ~3 tensors, so
    // the run fits a 1-MiB GPU, and afterwards the GPU holds what it held before
    let n = 4096;
    let x0: Vec<f64> = (0..n).map(|k| (k as f64 / n as f64) - 0.5).collect();
    let mut g = Graph::new();
    g.push_device(DeviceScope::Spec(DeviceSpec::parse("/device:GPU:0").unwrap()));
    let x = g.placeholder(DType::Float64, &[n], Some("x")).unwrap();
    let v = sin_loop(&mut g, x, n, 300);
    g.pop_device().unwrap();
    let sess = Session::new(Arc::new(RwLock::new(g)), opts(1, Some(1))).unwrap();
    let gpu = sess.devices().devices[1].clone();
    let before = gpu.memory().unwrap().stats().bytes_in_use;
    let feed = Tensor::from_vec(&[n], x0.clone(), Layout::RowMajor).unwrap();
    let got = sess.run(&[(x, feed.clone())], &[v], &[], false).unwrap().values;
    let want = oracle(&x0, 300).0;
    let rel = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    assert!(got[0].to_f64_vec().iter().zip(&want).all(|(a, b)| rel(*a, *b)));
    assert_eq!(gpu.memory().unwrap().stats().bytes_in_use, before);
    // a loop variable too large for the GPU is TF's ResourceExhausted, and the session stays usable
    let big = 1 << 18;
    let mut g2 = Graph::new();
    g2.push_device(DeviceScope::Spec(DeviceSpec::parse("/device:GPU:0").unwrap()));
    let y = g2.placeholder(DType::Float64, &[big], Some("y")).unwrap();
    let w = sin_loop(&mut g2, y, big, 2);
    g2.pop_device().unwrap();
    let sess2 = Session::new(Arc::new(RwLock::new(g2)), opts(1, Some(1))).unwrap();
    let e = sess2.run(&[(y, Tensor::filled(DType::Float64, &[big], 0.0))], &[w], &[], false).unwrap_err();
    assert!(matches!(e, OxiflowError::ResourceExhausted { .. }), "{e}");
    assert!(sess.run(&[(x, feed)], &[v], &[], false).is_ok());
}

#[test]
fn a_loop_writing_rows_on_a_gpu_gives_the_cpu_values_and_gradient() {
    let n = 5;
    let build = |dev: &str| {
        let mut g = Graph::new();
        g.push_device(DeviceScope::Spec(DeviceSpec::parse(dev).unwrap()));
        let rows0 = g.constant(Tensor::filled(DType::Float64, &[n, 3], 0.0)).unwrap();
        let x = g.constant(Tensor::from_vec(&[3], vec![0.5, 1.5, -1.0], Layout::RowMajor).unwrap()).unwrap();
        let rows = rows_loop(&mut g, rows0, x, n);
        let s = g.op("Sum", &[rows]).unwrap();
        g.pop_device().unwrap();
        let dx = gradients(&mut g, &[s], &[x], None, true).unwrap()[0].unwrap();
        let sess = Session::new(Arc::new(RwLock::new(g)), opts(1, None)).unwrap();
        let v = sess.run(&[], &[rows, dx], &[], false).unwrap().values;
        assert_eq!(
            sess.assigned_device(rows.node).unwrap(),
            format!("/job:localhost/replica:0/task:0{}", if dev.contains("GPU") { "/device:GPU:0" } else { "/device:CPU:0" })
        );
        (v[0].to_f64_vec(), v[1].to_f64_vec())
    };
    let want: Vec<f64> = (1..=n).flat_map(|k| [0.5 * k as f64, 1.5 * k as f64, -(k as f64)]).collect();
    let (rows, dx) = build("/device:GPU:0");
    assert_eq!(rows, want);
    assert_eq!(dx, vec![15.0; 3]);
    assert_eq!(build("/device:CPU:0"), (rows, dx));
}
