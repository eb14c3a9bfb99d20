//! `TanhGrad` and `SigmoidGrad`: the values against their formulas evaluated here in f64,
//! the gradients of `Tanh` and `Sigmoid` built from them (as TF's `math_grad.py` does), their
//! own gradients and second derivatives against finite differences, and errors that name the
//! op and both operands.

mod common;
use common::*;
use oxiflow_core::autodiff::gradients;
use oxiflow_core::{DType, Graph, Layout, Output, Tensor};

/// Values well inside the sharding threshold and above it (the parallel path).
const SIZES: [&[usize]; 3] = [&[2, 3], &[300, 257], &[]];

#[test]
fn values_follow_the_formulas_in_both_dtypes_and_layouts() {
    type F = fn(f64, f64) -> f64;
    let cases: [(&str, F); 2] = [("TanhGrad", |y, dy| dy * (1.0 - y * y)), ("SigmoidGrad", |y, dy| dy * y * (1.0 - y))];
    for (op, f) in cases {
        for dims in SIZES {
            let n: usize = dims.iter().product();
            let (yv, dyv) = (rand_vec(n, 1, -1.0, 1.0), rand_vec(n, 2, -3.0, 3.0));
            let want: Vec<f64> = yv.iter().zip(&dyv).map(|(&y, &dy)| f(y, dy)).collect();
            for layout in [Layout::RowMajor, Layout::ColumnMajor] {
                // column-major data holds the same logical values in the other memory order
                let mem = |v: &[f64]| -> Vec<f64> {
                    match (layout, dims) {
                        (Layout::ColumnMajor, &[r, c]) => (0..c).flat_map(|j| (0..r).map(move |i| v[i * c + j])).collect(),
                        _ => v.to_vec(),
                    }
                };
                let mut g = Graph::new();
                let y = g.placeholder(DType::Float64, dims, None).unwrap();
                let dy = g.placeholder(DType::Float64, dims, None).unwrap();
                let out = g.op(op, &[y, dy]).unwrap();
                let y32 = g.op_spec(oxiflow_core::NodeSpec::new("Cast", &[y]).attr("DstT", DType::Float32)).unwrap();
                let dy32 = g.op_spec(oxiflow_core::NodeSpec::new("Cast", &[dy]).attr("DstT", DType::Float32)).unwrap();
                let out32 = g.op(op, &[y32, dy32]).unwrap();
                let feeds = [(y, Tensor::from_vec(dims, mem(&yv), layout).unwrap()), (dy, Tensor::from_vec(dims, mem(&dyv), layout).unwrap())];
                let got = eval(&g, &feeds, &[out, out32]).unwrap();
                assert_eq!(got[0].dtype(), DType::Float64);
                assert_eq!(got[1].dtype(), DType::Float32);
                assert_close(&got[0].to_f64_vec(), &want, 1e-15, &format!("{op} f64 {dims:?} {layout:?}"));
                assert_close(&got[1].to_f64_vec(), &want, 1e-5, &format!("{op} f32 {dims:?} {layout:?}"));
            }
        }
    }
}

#[test]
fn tanh_and_sigmoid_gradients_are_built_from_them() {
    for (fwd, grad) in [("Tanh", "TanhGrad"), ("Sigmoid", "SigmoidGrad")] {
        let mut g = Graph::new();
        let x = g.placeholder(DType::Float64, &[4], None).unwrap();
        let y = g.op(fwd, &[x]).unwrap();
        let d = gradients(&mut g, &[y], &[x], None, false).unwrap()[0].unwrap();
        let node = g.node(d.node).unwrap();
        assert_eq!(node.op.name, grad, "the gradient of {fwd} is one {grad} op, as TF's");
        assert_eq!(node.inputs[0], y, "its first operand is {fwd}'s output");
    }
}

#[test]
fn their_gradients_and_second_derivatives_match_finite_differences() {
    let y = rand_t(&[2, 3], 3, -0.9, 0.9);
    let dy = rand_t(&[2, 3], 4, -2.0, 2.0);
    for op in ["TanhGrad", "SigmoidGrad"] {
        check_grads(&[y.clone(), dy.clone()], |g, xs| g.op(op, &[xs[0], xs[1]]));
        check_second_grads(&[y.clone(), dy.clone()], 1e-5, |g, xs| g.op(op, &[xs[0], xs[1]]));
    }
    // third derivatives of the activations go through the gradients of these ops
    let x = rand_t(&[5], 5, -1.5, 1.5);
    for op in ["Tanh", "Sigmoid"] {
        check_second_grads(std::slice::from_ref(&x), 1e-5, |g, xs| {
            let y = g.op(op, &[xs[0]])?;
            Ok(gradients(g, &[y], &[xs[0]], None, false)?[0].expect("first derivative"))
        });
    }
}

#[test]
fn mismatched_operands_are_refused_naming_the_op_and_the_graph_stays_usable() {
    let mut g = Graph::new();
    let a = g.placeholder(DType::Float64, &[2, 3], None).unwrap();
    let b = g.placeholder(DType::Float64, &[3], None).unwrap();
    let c = g.placeholder(DType::Float32, &[2, 3], None).unwrap();
    let i = g.placeholder(DType::Int64, &[2, 3], None).unwrap();
    let e = g.op("TanhGrad", &[a, b]).unwrap_err().to_string();
    assert!(e.contains("TanhGrad") && e.contains("[2,3]") && e.contains("[3]"), "{e}");
    let e = g.op("SigmoidGrad", &[a, c]).unwrap_err().to_string();
    assert!(e.contains("SigmoidGrad") && e.contains("Float64") && e.contains("Float32"), "{e}");
    let e = g.op("TanhGrad", &[i, i]).unwrap_err().to_string();
    assert!(e.contains("TanhGrad") && e.contains("Int64"), "{e}");
    let ok = g.op("TanhGrad", &[a, a]).unwrap();
    let v = rand_t(&[2, 3], 9, -1.0, 1.0);
    let got = eval1(&g, &[(a, v.clone())], ok).to_f64_vec();
    let want: Vec<f64> = v.to_f64_vec().iter().map(|&y| y * (1.0 - y * y)).collect();
    assert_close(&got, &want, 1e-15, "after the refusals");
    let _: Output = ok;
}
