//! The loop `loop_on_gpu.rs` and `gpu_provider.rs` run on a GPU, and its oracle.
#![allow(dead_code)]

use oxiflow_core::function::Function;
use oxiflow_core::ops::AttrValue;
use oxiflow_core::{DType, Graph, NodeSpec, Output, Tensor};
use std::sync::Arc;

/// `While(i, v)` from `(0, x)`, `x` of `n` Float64: while `i < iters` (Int32), `i + 1` and
/// `v = sin(v) + 1.5 v`. Returns the final `v`.
pub fn sin_loop(g: &mut Graph, x: Output, n: usize, iters: i32) -> Output {
    let vars = |f: &mut Graph| vec![f.placeholder(DType::Int32, &[], Some("i")).unwrap(), f.placeholder(DType::Float64, &[n], Some("v")).unwrap()];
    let mut c = Graph::new();
    let cv = vars(&mut c);
    let limit = c.constant(Tensor::scalar(iters)).unwrap();
    let less = c.op("Less", &[cv[0], limit]).unwrap();
    let cond = Arc::new(Function::new(c, cv, vec![less]).unwrap());
    let mut b = Graph::new();
    let bv = vars(&mut b);
    let one = b.constant(Tensor::scalar(1i32)).unwrap();
    let next_i = Output::new(b.add_node(NodeSpec::new("Add", &[bv[0], one]).name("next_i")).unwrap(), 0);
    let sin = Output::new(b.add_node(NodeSpec::new("Sin", &[bv[1]]).name("body_sin")).unwrap(), 0);
    let k = b.constant(Tensor::scalar(1.5f64)).unwrap();
    let kv = b.op("Mul", &[bv[1], k]).unwrap();
    let next_v = b.op("Add", &[sin, kv]).unwrap();
    let body = Arc::new(Function::new(b, bv, vec![next_i, next_v]).unwrap());
    let zero = g.constant(Tensor::scalar(0i32)).unwrap();
    let w = g.add_node(NodeSpec::new("While", &[zero, x]).name("loop").attr("cond", AttrValue::Func(cond)).attr("body", AttrValue::Func(body))).unwrap();
    Output::new(w, 1)
}

/// The loop's result and `d sum(v) / d x`, by the recurrence.
pub fn oracle(x: &[f64], iters: i32) -> (Vec<f64>, Vec<f64>) {
    x.iter()
        .map(|&x0| {
            let (mut v, mut d) = (x0, 1.0);
            for _ in 0..iters {
                d *= v.cos() + 1.5;
                v = v.sin() + 1.5 * v;
            }
            (v, d)
        })
        .unzip()
}

pub fn close(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-12 * y.abs().max(1.0))
}

/// `While(i, rows, x)` from `(0, rows0, x)`, `rows0` of `[n, 3]` and `x` of `[3]` Float64:
/// while `i < n` (Int32), row `i` becomes `(i + 1) x` (a `TensorScatterUpdate` named
/// `write`, as a `TensorArray`'s write). Returns the final rows; with zeros for `rows0`,
/// `sum(rows)` is `n (n + 1) / 2 · sum(x)`.
pub fn rows_loop(g: &mut Graph, rows0: Output, x: Output, n: usize) -> Output {
    let vars = |f: &mut Graph| {
        vec![
            f.placeholder(DType::Int32, &[], Some("i")).unwrap(),
            f.placeholder(DType::Float64, &[n, 3], Some("rows")).unwrap(),
            f.placeholder(DType::Float64, &[3], Some("x")).unwrap(),
        ]
    };
    let mut c = Graph::new();
    let cv = vars(&mut c);
    let limit = c.constant(Tensor::scalar(n as i32)).unwrap();
    let less = c.op("Less", &[cv[0], limit]).unwrap();
    let cond = Arc::new(Function::new(c, cv, vec![less]).unwrap());
    let mut b = Graph::new();
    let bv = vars(&mut b);
    let one = b.constant(Tensor::scalar(1i32)).unwrap();
    let next_i = b.op("Add", &[bv[0], one]).unwrap();
    let idx = b.op_spec(NodeSpec::new("Reshape", &[bv[0]]).attr("shape", AttrValue::Shape(vec![1, 1]))).unwrap();
    let scale = b.op_spec(NodeSpec::new("Cast", &[next_i]).attr("DstT", DType::Float64)).unwrap();
    let row = b.op("Mul", &[bv[2], scale]).unwrap();
    let row = b.op_spec(NodeSpec::new("Reshape", &[row]).attr("shape", AttrValue::Shape(vec![1, 3]))).unwrap();
    let write = Output::new(b.add_node(NodeSpec::new("TensorScatterUpdate", &[bv[1], idx, row]).name("write")).unwrap(), 0);
    let body = Arc::new(Function::new(b, bv.clone(), vec![next_i, write, bv[2]]).unwrap());
    let zero = g.constant(Tensor::scalar(0i32)).unwrap();
    let w = g
        .add_node(NodeSpec::new("While", &[zero, rows0, x]).name("rows_loop").attr("cond", AttrValue::Func(cond)).attr("body", AttrValue::Func(body)))
        .unwrap();
    Output::new(w, 1)
}

/// `If(c, x)` for `x` of `n` Float64: `sin(x)` (node `then_sin`) when the Bool scalar `c`
/// is true, else `2 x`.
pub fn sin_or_double(g: &mut Graph, c: Output, x: Output, n: usize) -> Output {
    let branch = |then: bool| {
        let mut b = Graph::new();
        let v = b.placeholder(DType::Float64, &[n], Some("x")).unwrap();
        let out = if then {
            Output::new(b.add_node(NodeSpec::new("Sin", &[v]).name("then_sin")).unwrap(), 0)
        } else {
            let two = b.constant(Tensor::scalar(2.0f64)).unwrap();
            b.op("Mul", &[v, two]).unwrap()
        };
        Arc::new(Function::new(b, vec![v], vec![out]).unwrap())
    };
    let node = g
        .add_node(
            NodeSpec::new("If", &[c, x]).name("branch").attr("then_branch", AttrValue::Func(branch(true))).attr("else_branch", AttrValue::Func(branch(false))),
        )
        .unwrap();
    Output::new(node, 0)
}
