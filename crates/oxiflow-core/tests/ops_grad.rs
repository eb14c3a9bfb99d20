//! Every differentiable op's gradient against central finite differences in Float64
//! (eps 1e-6, relative tolerance 1e-6), including broadcasting operands, and second
//! derivatives of the nonlinear ops (their gradients are built from differentiable ops).

mod common;
use common::*;
use oxiflow_core::autodiff::gradients;
use oxiflow_core::ops::AttrValue;
use oxiflow_core::{DType, Graph, NodeSpec, Output, Result, Tensor};

fn op1(op: &'static str) -> impl Fn(&mut Graph, &[Output]) -> Result<Output> {
    move |g, xs| g.op(op, &[xs[0]])
}
fn op2(op: &'static str) -> impl Fn(&mut Graph, &[Output]) -> Result<Output> {
    move |g, xs| g.op(op, &[xs[0], xs[1]])
}

#[test]
fn unary_gradients() {
    let x = rand_t(&[2, 3], 1, -2.0, 2.0);
    for op in ["Neg", "Square", "Sin", "Cos", "Exp", "Tanh"] {
        check_grads(std::slice::from_ref(&x), op1(op));
    }
    let pos = rand_t(&[2, 3], 2, 0.3, 2.0);
    for op in ["Log", "Sqrt"] {
        check_grads(std::slice::from_ref(&pos), op1(op));
    }
}

#[test]
fn broadcasting_binary_gradients() {
    let shapes: [(&[usize], &[usize]); 6] = [(&[2, 3], &[2, 3]), (&[2, 3], &[3]), (&[3], &[2, 3]), (&[2, 1], &[1, 4]), (&[], &[2, 3]), (&[2, 3], &[])];
    for (k, (sa, sb)) in shapes.iter().enumerate() {
        let a = rand_t(sa, 10 + k as u64, 0.5, 2.0);
        let b = rand_t(sb, 20 + k as u64, 0.5, 2.0);
        for op in ["Add", "Sub", "Mul", "RealDiv", "Pow"] {
            check_grads(&[a.clone(), b.clone()], op2(op));
        }
    }
}

#[test]
fn pow_gradients_for_nonpositive_bases() {
    // d/dx x^y at negative x with integral y; TF's _PowGrad gives d/dy = 0 where x <= 0.
    let x = t64(&[4], vec![-1.5, -0.5, 0.7, 1.3]);
    check_grads(std::slice::from_ref(&x), |g, xs| {
        let y = g.constant(t64(&[4], vec![2.0, 3.0, 2.5, -1.0]))?;
        g.op("Pow", &[xs[0], y])
    });
    let mut g = Graph::new();
    let (cx, y) = (g.constant(x).unwrap(), g.placeholder(DType::Float64, &[], None).unwrap());
    let z = g.op("Pow", &[cx, y]).unwrap();
    let dy = gradients(&mut g, &[z], &[y], None, false).unwrap()[0].unwrap();
    let got = eval1(&g, &[(y, Tensor::scalar(2.0f64))], dy).to_f64_vec();
    let want: f64 = [0.7f64, 1.3].iter().map(|&v| v.powf(2.0) * v.ln()).sum();
    assert_close(&got, &[want], 1e-14, "d/dy with masked log");
}

#[test]
fn matmul_gradients_for_every_transpose() {
    for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
        let a = if ta { rand_t(&[4, 3], 31, -1.0, 1.0) } else { rand_t(&[3, 4], 31, -1.0, 1.0) };
        let b = if tb { rand_t(&[5, 4], 32, -1.0, 1.0) } else { rand_t(&[4, 5], 32, -1.0, 1.0) };
        check_grads(&[a, b], move |g, xs| g.op_spec(NodeSpec::new("MatMul", &[xs[0], xs[1]]).attr("transpose_a", ta).attr("transpose_b", tb)));
    }
}

#[test]
fn addn_and_select_gradients() {
    let xs: Vec<Tensor> = (0..3).map(|i| rand_t(&[2, 2], 40 + i, -1.0, 1.0)).collect();
    check_grads(&xs, |g, xs| g.op("AddN", xs));
    // The same tensor twice: its gradient is the sum of both.
    check_grads(&xs[..1], |g, xs| g.op("AddN", &[xs[0], xs[0], xs[0]]));
    let a = rand_t(&[2, 3], 43, -1.0, 1.0);
    let b = rand_t(&[3], 44, -1.0, 1.0);
    check_grads(&[a, b], |g, xs| {
        let c = g.constant(t64(&[2, 1], vec![1.0, -1.0]))?;
        let zero = g.scalar(DType::Float64, 0.0)?;
        let cond = g.op("Greater", &[c, zero])?;
        g.op("SelectV2", &[cond, xs[0], xs[1]])
    });
}

#[test]
fn array_op_gradients() {
    let x = rand_t(&[2, 3, 4], 50, -1.0, 1.0);
    check_grads(std::slice::from_ref(&x), |g, xs| g.op_spec(NodeSpec::new("Reshape", &[xs[0]]).attr("shape", AttrValue::Shape(vec![4, 6]))));
    let b = rand_t(&[3, 1], 51, -1.0, 1.0);
    check_grads(&[b], |g, xs| g.op_spec(NodeSpec::new("BroadcastTo", &[xs[0]]).attr("shape", AttrValue::Shape(vec![2, 3, 4]))));
    let axes: [Option<Vec<i64>>; 6] = [None, Some(vec![0]), Some(vec![1]), Some(vec![-1]), Some(vec![0, 2]), Some(vec![0, 1, 2])];
    for axis in axes {
        for keep in [false, true] {
            let axis = axis.clone();
            check_grads(std::slice::from_ref(&x), move |g, xs| {
                let mut spec = NodeSpec::new("Sum", &[xs[0]]).attr("keep_dims", keep);
                if let Some(a) = &axis {
                    spec = spec.attr("axis", a.clone());
                }
                g.op_spec(spec)
            });
        }
    }
    // Float64 -> Float32 -> Float64: linear, so a large eps is exact up to Float32 rounding.
    check_grads_with(&[rand_t(&[2, 2], 52, -1.0, 1.0)], 1e-2, 1e-4, |g, xs| {
        let c = g.op_spec(NodeSpec::new("Cast", &[xs[0]]).attr("DstT", DType::Float32))?;
        let s = g.op("Sin", &[c])?;
        g.op_spec(NodeSpec::new("Cast", &[s]).attr("DstT", DType::Float64))
    });
}

#[test]
fn no_gradient_through_ints_or_constants_like() {
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[3], None).unwrap();
    let i = g.op_spec(NodeSpec::new("Cast", &[x]).attr("DstT", DType::Int32)).unwrap();
    let f = g.op_spec(NodeSpec::new("Cast", &[i]).attr("DstT", DType::Float64)).unwrap();
    let ones = g.op("OnesLike", &[x]).unwrap();
    let y = g.op("Mul", &[f, ones]).unwrap();
    assert_eq!(gradients(&mut g, &[y], &[x], None, false).unwrap(), vec![None]);
}

#[test]
fn second_derivatives_of_nonlinear_ops() {
    let x = rand_t(&[2, 3], 60, -1.5, 1.5);
    for op in ["Square", "Sin", "Cos", "Exp", "Tanh"] {
        check_second_grads(std::slice::from_ref(&x), 1e-5, op1(op));
    }
    let pos = rand_t(&[2, 3], 61, 0.5, 2.0);
    for op in ["Log", "Sqrt"] {
        check_second_grads(std::slice::from_ref(&pos), 1e-5, op1(op));
    }
    let a = rand_t(&[2, 3], 62, 0.5, 2.0);
    let b = rand_t(&[3], 63, 0.5, 2.0);
    for op in ["Mul", "RealDiv", "Pow"] {
        check_second_grads(&[a.clone(), b.clone()], 1e-5, op2(op));
    }
    let m = rand_t(&[3, 4], 64, -1.0, 1.0);
    let n = rand_t(&[4, 2], 65, -1.0, 1.0);
    check_second_grads(&[m, n], 1e-5, op2("MatMul"));
    check_second_grads(&[rand_t(&[2, 3], 66, -1.0, 1.0)], 1e-5, |g, xs| {
        let s = g.op_spec(NodeSpec::new("Sum", &[xs[0]]).attr("axis", vec![1i64]).attr("keep_dims", true))?;
        let b = g.op_spec(NodeSpec::new("BroadcastTo", &[s]).attr("shape", AttrValue::Shape(vec![2, 3])))?;
        let r = g.op_spec(NodeSpec::new("Reshape", &[xs[0]]).attr("shape", AttrValue::Shape(vec![2, 3])))?;
        let p = g.op("Mul", &[b, r])?;
        let t = g.op("Tanh", &[p])?;
        g.op("AddN", &[t, p])
    });
}
