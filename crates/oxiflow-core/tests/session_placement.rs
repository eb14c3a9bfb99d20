//! Session + placer on seed 000's program, with emulated GPUs. Oracles: Rust's f64 math for
//! values; TF's documented placement rules for devices.

use oxiflow_core::graph::{DeviceScope, NodeDef};
use oxiflow_core::{DType, DeviceSpec, Graph, NodeSpec, Output, Session, SessionOptions, Tensor};
use std::sync::{Arc, RwLock};

const CPU0: &str = "/job:localhost/replica:0/task:0/device:CPU:0";
const GPU0: &str = "/job:localhost/replica:0/task:0/device:GPU:0";

fn opts(gpus: usize) -> SessionOptions {
    SessionOptions { emulated_gpus: Some(gpus), log_device_placement: true, ..Default::default() }
}

/// Seed 000's `assign_to_device("/device:GPU:0")`.
fn assign_to_device(node: &NodeDef) -> Result<String, String> {
    Ok(if ["Variable", "VariableV2", "AutoReloadVariable"].contains(&node.op.as_str()) { "/device:CPU:0".into() } else { "/device:GPU:0".into() })
}

fn seed_graph() -> (Arc<RwLock<Graph>>, Output, Output, Output) {
    let mut g = Graph::new();
    g.push_device(DeviceScope::Function(Arc::new(assign_to_device)));
    let a = g.variable(Tensor::scalar(1.0f64), None, true).unwrap();
    let b = g.op("Sin", &[Output::new(a, 0)]).unwrap();
    g.pop_device().unwrap();
    g.push_device(DeviceScope::Spec(DeviceSpec::parse("/CPU:0").unwrap()));
    let c = g.op("Cos", &[b]).unwrap_or_else(|_| g.op("Sin", &[b]).unwrap());
    g.pop_device().unwrap();
    (Arc::new(RwLock::new(g)), Output::new(a, 0), b, c)
}

#[test]
fn device_function_requests_match_the_seed() {
    let (g, a, b, _) = seed_graph();
    let g = g.read().unwrap();
    assert_eq!(g.node(a.node).unwrap().requested_device.to_string(), "/device:CPU:0");
    assert_eq!(g.node(b.node).unwrap().requested_device.to_string(), "/device:GPU:0");
    // the read snapshot is colocated with the variable
    let read = g.node_by_name("Variable/read").unwrap();
    assert_eq!(g.node(read).unwrap().colocation, vec!["loc:@Variable".to_string()]);
}

#[test]
fn variable_on_cpu_sin_on_gpu_runs_with_copies() {
    let (g, a, b, c) = seed_graph();
    let sess = Session::new(g.clone(), opts(1)).unwrap();
    let init = g.write().unwrap().global_variables_initializer().unwrap();
    sess.run(&[], &[], &[init], false).unwrap();
    let out = sess.run(&[], &[a, b, c], &[], true).unwrap();
    let v: Vec<f64> = out.values.iter().map(|t| t.to_f64_vec()[0]).collect();
    assert_eq!(v[0], 1.0);
    assert!((v[1] - 1f64.sin()).abs() < 1e-15);
    let c_op = g.read().unwrap().node(c.node).unwrap().op.name;
    let expect_c = if c_op == "Cos" { 1f64.sin().cos() } else { 1f64.sin().sin() };
    assert!((v[2] - expect_c).abs() < 1e-15);
    assert_eq!(sess.assigned_device(a.node).unwrap(), CPU0);
    assert_eq!(sess.assigned_device(b.node).unwrap(), GPU0);
    assert_eq!(sess.assigned_device(c.node).unwrap(), CPU0);
    let stats = out.step_stats.unwrap();
    // read (CPU) -> Sin (GPU) and Sin (GPU) -> c (CPU): two cross-device edges
    assert_eq!(stats.copies().count, 2);
    assert_eq!(stats.copies().bytes, 16);
    let log = sess.take_log();
    assert!(log.contains(&format!("Variable: (VariableV2): {CPU0}")), "{log}");
    assert!(log.contains(&format!("Sin: (Sin): {GPU0}")), "{log}");
    // the initializer Assign follows the variable (reference edge) although the device
    // function asked for GPU:0
    assert!(log.contains(&format!("Variable/Assign: (Assign): {CPU0}")), "{log}");
    let trace = stats.chrome_trace();
    let ev = trace["traceEvents"].as_array().unwrap();
    assert!(ev.iter().any(|e| e["ph"] == "X" && e["name"] == "Sin" && e["args"]["name"] == "Sin"));
    assert!(ev.iter().any(|e| e["ph"] == "s" && e["cat"] == "DataFlow"));
}

#[test]
fn gpu_request_without_gpu_fails_then_session_still_runs() {
    let (g, _, b, _) = seed_graph();
    let sess = Session::new(g.clone(), opts(0)).unwrap();
    let e = sess.run(&[], &[b], &[], false).unwrap_err().to_string();
    assert!(e.starts_with("Cannot assign a device for operation Sin: {{node Sin}} was explicitly assigned to /device:GPU:0 but available devices are [ /job:localhost/replica:0/task:0/device:CPU:0 ]"), "{e}");
    // a correct fetch in the same session
    let x = g.write().unwrap().constant(Tensor::scalar(2.0f64)).unwrap();
    let y = g.write().unwrap().op("Sin", &[x]).unwrap();
    assert!((sess.run(&[], &[y], &[], false).unwrap().values[0].to_f64_vec()[0] - 2f64.sin()).abs() < 1e-15);
    // soft placement moves the GPU request to the CPU
    let soft = Session::new(g.clone(), SessionOptions { allow_soft_placement: true, emulated_gpus: Some(0), ..Default::default() }).unwrap();
    let init = g.write().unwrap().global_variables_initializer().unwrap();
    soft.run(&[], &[], &[init], false).unwrap();
    assert!((soft.run(&[], &[b], &[], false).unwrap().values[0].to_f64_vec()[0] - 1f64.sin()).abs() < 1e-15);
    assert_eq!(soft.assigned_device(b.node).unwrap(), CPU0);
}

#[test]
fn uninitialized_variable_and_bad_feeds_are_clear_errors() {
    let mut g = Graph::new();
    let v = g.variable(Tensor::full(&[2], 1.0f64), None, true).unwrap();
    let p = g.placeholder(DType::Float64, &[2], None).unwrap();
    let s = g.op("Add", &[Output::new(v, 0), p]).unwrap();
    let g = Arc::new(RwLock::new(g));
    let sess = Session::new(g.clone(), opts(1)).unwrap();
    let e = sess.run(&[(p, Tensor::full(&[2], 1.0f64))], &[s], &[], false).unwrap_err();
    assert!(e.to_string().starts_with("Attempting to use uninitialized value Variable"), "{e}");
    let e = sess.run(&[(p, Tensor::full(&[3], 1.0f64))], &[s], &[], false).unwrap_err().to_string();
    assert_eq!(e, "Cannot feed value of shape [3] for Tensor 'Placeholder:0', which has shape [2]");
    let e = sess.run(&[(p, Tensor::full(&[2], 1.0f32))], &[s], &[], false).unwrap_err().to_string();
    assert_eq!(e, "Cannot feed value of dtype Float32 for Tensor 'Placeholder:0', which has dtype Float64");
    let e = sess.run(&[], &[p], &[], false).unwrap_err().to_string();
    assert!(e.contains("You must feed a value for placeholder tensor 'Placeholder'"), "{e}");
    let init = g.write().unwrap().global_variables_initializer().unwrap();
    sess.run(&[], &[], &[init], false).unwrap();
    let out = sess.run(&[(p, Tensor::from_vec(&[2], vec![2.0f64, 3.0], oxiflow_core::Layout::RowMajor).unwrap())], &[s], &[], false).unwrap();
    assert_eq!(out.values[0].to_f64_vec(), vec![3.0, 4.0]);
}

#[test]
fn generators_follow_their_consumers_and_unconstrained_ops_prefer_gpu() {
    let mut g = Graph::new();
    let x = g.constant(Tensor::scalar(0.5f64)).unwrap();
    let y = g.op("Sin", &[x]).unwrap();
    g.push_device(DeviceScope::Spec(DeviceSpec::parse("/cpu:0").unwrap()));
    let k = g.constant(Tensor::scalar(0.25f64)).unwrap();
    g.pop_device().unwrap();
    let z = g.op_spec(NodeSpec::new("Add", &[y, k])).unwrap();
    let g = Arc::new(RwLock::new(g));
    let sess = Session::new(g, opts(2)).unwrap();
    let out = sess.run(&[], &[z], &[], false).unwrap();
    assert!((out.values[0].to_f64_vec()[0] - (0.5f64.sin() + 0.25)).abs() < 1e-15);
    assert_eq!(sess.assigned_device(y.node).unwrap(), GPU0);
    assert_eq!(sess.assigned_device(x.node).unwrap(), GPU0); // follows Sin
    assert_eq!(sess.assigned_device(k.node).unwrap(), CPU0); // explicit request
    assert_eq!(sess.assigned_device(z.node).unwrap(), GPU0);
}
