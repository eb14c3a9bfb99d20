//! A variable built inside `control_dependencies` takes none of them (TF builds variables under
//! `ops.init_scope()`): its initializer, initial value and `read` snapshot have no control
//! inputs, while an ordinary op built in the same block does. Without this, an optimizer's slot
//! variables created inside `control_dependencies(UPDATE_OPS)` make `init` wait for the update
//! ops, which read variables not yet initialised.
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
