//! A variable built inside `control_dependencies` takes none of them (TF builds variables under
//! `ops.init_scope()`): its initializer, initial value and `read` snapshot have no control
//! inputs, while an ordinary op built in the same block does. Without this, an optimizer's slot
//! variables created inside `control_dependencies(UPDATE_OPS)` make `init` wait for the update
//! ops, which read variables not yet initialised. Scopes are per thread, as TF1's.
use oxiflow_core::{DType, Graph, Tensor};

#[test]
fn variables_ignore_enclosing_control_dependencies() {
    let mut g = Graph::new();
    g.variable(Tensor::scalar(1.0f64), Some("a"), true).unwrap();
    let dep = g.scalar(DType::Float64, 2.0).unwrap();
    g.push_control_dependencies(&[dep.node]);
    let b = g.variable(Tensor::scalar(5.0f64), Some("b"), false).unwrap();
    let op = g.op("Neg", &[dep]).unwrap();
    g.pop_control_dependencies();
    let info = g.variables().iter().find(|v| v.var == b).unwrap().clone();
    for n in [info.var, info.read, info.initializer] {
        assert!(g.node(n).unwrap().control_inputs.is_empty(), "{} has control inputs", g.node(n).unwrap().name);
    }
    // the block still applies to ordinary ops, and is popped afterwards
    assert_eq!(g.node(op.node).unwrap().control_inputs, vec![dep.node]);
    let after = g.variable(Tensor::scalar(0.0f64), Some("c"), true).unwrap();
    assert!(g.node(after).unwrap().control_inputs.is_empty());
}

#[test]
fn scopes_belong_to_the_thread_that_opened_them() {
    use oxiflow_core::graph::DeviceScope;
    use oxiflow_core::DeviceSpec;
    use std::sync::{Arc, Mutex};
    let g = Arc::new(Mutex::new(Graph::new()));
    let x = g.lock().unwrap().scalar(DType::Float64, 1.0).unwrap();
    {
        let mut g = g.lock().unwrap();
        g.push_device(DeviceScope::Spec(DeviceSpec::parse("/device:GPU:1").unwrap()));
        g.push_name_scope("outer");
        g.push_control_dependencies(&[x.node]);
    }
    // another thread sees none of them
    let other = {
        let g = g.clone();
        std::thread::spawn(move || {
            let mut g = g.lock().unwrap();
            let y = g.op("Sin", &[x]).unwrap();
            let n = g.node(y.node).unwrap();
            (n.name.clone(), n.requested_device.to_string(), n.control_inputs.clone(), g.pop_device().is_err())
        })
        .join()
        .unwrap()
    };
    assert_eq!(other, ("Sin".to_string(), String::new(), vec![], true));
    // this thread still has all three
    let mut g = g.lock().unwrap();
    let z = g.op("Cos", &[x]).unwrap();
    let n = g.node(z.node).unwrap();
    assert_eq!((n.name.as_str(), n.control_inputs.clone()), ("outer/Cos", vec![x.node]));
    assert!(n.requested_device.to_string().contains("GPU:1"), "{}", n.requested_device);
    g.pop_control_dependencies();
    g.pop_name_scope();
    g.pop_device().unwrap();
    assert!(g.pop_device().is_err());
}
