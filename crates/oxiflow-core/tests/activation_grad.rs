//! `TanhGrad`, `SigmoidGrad` and `ReluGrad`: the values against their formulas evaluated
//! here in f64 (and `ReluGrad`'s special values), the gradients of `Tanh`, `Sigmoid` and
//! `Relu` built from them (as TF's `math_grad.py` and `nn_grad.py` do), their own gradients
//! and second derivatives against finite differences, and errors that name the op and both
//! operands.

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

/// `ReluGrad(dy, y)`: `dy` where `y > 0`, else 0, in both dtypes, sizes on both sides of the
/// sharding threshold; special values: `y` NaN, zero or negative zero gives 0, and so does a
/// NaN or infinite `dy` where `y <= 0` (a select, not TF's `dy * (y > 0)`); where `y > 0` the
/// `dy` passes whatever it is.
#[test]
fn relu_grad_selects_the_gradient_where_the_output_is_positive() {
    let want = |dy: f64, y: f64| if y > 0.0 { dy } else { 0.0 };
    for dims in SIZES {
        let n: usize = dims.iter().product();
        let (dyv, yv) = (rand_vec(n, 6, -3.0, 3.0), rand_vec(n, 7, -1.0, 1.0));
        let mut g = Graph::new();
        let dy = g.placeholder(DType::Float64, dims, None).unwrap();
        let y = g.placeholder(DType::Float64, dims, None).unwrap();
        let out = g.op("ReluGrad", &[dy, y]).unwrap();
        let cast = |g: &mut Graph, x| g.op_spec(oxiflow_core::NodeSpec::new("Cast", &[x]).attr("DstT", DType::Float32)).unwrap();
        let (dy32, y32) = (cast(&mut g, dy), cast(&mut g, y));
        let out32 = g.op("ReluGrad", &[dy32, y32]).unwrap();
        let feeds = [(dy, Tensor::from_vec(dims, dyv.clone(), Layout::RowMajor).unwrap()), (y, Tensor::from_vec(dims, yv.clone(), Layout::RowMajor).unwrap())];
        let got = eval(&g, &feeds, &[out, out32]).unwrap();
        let w: Vec<f64> = dyv.iter().zip(&yv).map(|(&a, &b)| want(a, b)).collect();
        assert_close(&got[0].to_f64_vec(), &w, 0.0, &format!("ReluGrad f64 {dims:?}"));
        assert_close(&got[1].to_f64_vec(), &w, 1e-6, &format!("ReluGrad f32 {dims:?}"));
    }
    let special = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0, 2.5, -2.5];
    let (dyv, yv): (Vec<f64>, Vec<f64>) = special.iter().flat_map(|&a| special.iter().map(move |&b| (a, b))).unzip();
    let mut g = Graph::new();
    let dy = g.placeholder(DType::Float64, &[49], None).unwrap();
    let y = g.placeholder(DType::Float64, &[49], None).unwrap();
    let out = g.op("ReluGrad", &[dy, y]).unwrap();
    let got = eval1(
        &g,
        &[(dy, Tensor::from_vec(&[49], dyv.clone(), Layout::RowMajor).unwrap()), (y, Tensor::from_vec(&[49], yv.clone(), Layout::RowMajor).unwrap())],
        out,
    )
    .to_f64_vec();
    for k in 0..49 {
        let w = want(dyv[k], yv[k]);
        assert!(got[k] == w || (got[k].is_nan() && w.is_nan()), "ReluGrad(dy = {}, y = {}) = {}, want {w}", dyv[k], yv[k], got[k]);
    }
}

#[test]
fn relu_gradient_is_one_relu_grad_op_and_its_derivatives_match_finite_differences() {
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[4], None).unwrap();
    let y = g.op("Relu", &[x]).unwrap();
    let d = gradients(&mut g, &[y], &[x], None, false).unwrap()[0].unwrap();
    let node = g.node(d.node).unwrap();
    assert_eq!(node.op.name, "ReluGrad", "the gradient of Relu is one ReluGrad op, as TF's");
    assert_eq!(node.inputs[1], y, "its features operand is Relu's output");
    // points away from the kink at 0, so that the finite differences do not cross it
    let pts = |seed: u64| {
        let v: Vec<f64> = rand_vec(6, seed, 0.1, 1.0).iter().enumerate().map(|(i, &a)| if i % 2 == 0 { a } else { -a }).collect();
        Tensor::from_vec(&[2, 3], v, Layout::RowMajor).unwrap()
    };
    let (dy, feat) = (rand_t(&[2, 3], 8, -2.0, 2.0), pts(9));
    // (ReluGrad is linear in dy and piecewise constant in y: its own second derivatives are
    // identically zero, with no graph to check)
    check_grads(&[dy, feat], |g, xs| g.op("ReluGrad", &[xs[0], xs[1]]));
    // the second derivative of Relu(x)^2 (2 where x > 0, else 0) through the gradient of
    // ReluGrad in its first operand
    check_grads(&[pts(10)], |g, xs| {
        let y = g.op("Relu", &[xs[0]])?;
        let y2 = g.op("Mul", &[y, y])?;
        Ok(gradients(g, &[y2], &[xs[0]], None, false)?[0].expect("first derivative"))
    });
    let mut g = Graph::new();
    let a = g.placeholder(DType::Float64, &[2, 3], None).unwrap();
    let b = g.placeholder(DType::Float32, &[2, 3], None).unwrap();
    let e = g.op("ReluGrad", &[a, b]).unwrap_err().to_string();
    assert!(e.contains("ReluGrad") && e.contains("gradients and features") && e.contains("Float32"), "{e}");
}
