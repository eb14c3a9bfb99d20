//! The dense-API ops of nn.rs, reduce.rs, linalg.rs and random.rs. Oracles: Rust's f64
//! math and naive loops for values (Float64 and Float32), central finite differences for
//! gradients (and second derivatives), a session with an emulated GPU for placement.

mod common;
use common::*;
use oxiflow_core::ops::AttrValue;
use oxiflow_core::{DType, Graph, NodeSpec, Output, Result, Session, SessionOptions, Tensor};
use std::sync::{Arc, RwLock};

const CPU0: &str = "/job:localhost/replica:0/task:0/device:CPU:0";
const GPU0: &str = "/job:localhost/replica:0/task:0/device:GPU:0";

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}
const SA: f64 = 1.6732632423543772848170429916717;
const SS: f64 = 1.0507009873554804934193349852946;

type Unary = (&'static str, fn(f64) -> f64);
type Binary = (&'static str, fn(f64, f64) -> f64);

/// Unary ops with their f64 oracles.
fn unary_cases() -> Vec<Unary> {
    vec![
        ("Abs", f64::abs),
        ("Sign", |x| if x == 0.0 { 0.0 } else { x.signum() }),
        ("Tan", f64::tan),
        ("Sigmoid", sigmoid),
        ("Relu", |x| x.max(0.0)),
        ("Relu6", |x| x.clamp(0.0, 6.0)),
        ("LeakyRelu", |x| if x > 0.0 { x } else { 0.2 * x }),
        ("Elu", |x| if x > 0.0 { x } else { x.exp() - 1.0 }),
        ("Selu", |x| if x > 0.0 { SS * x } else { SS * SA * (x.exp() - 1.0) }),
        ("Softplus", |x| (1.0 + x.exp()).ln()),
        ("Softsign", |x| x / (1.0 + x.abs())),
    ]
}

#[test]
fn unary_ops_match_f64_math_in_both_float_types() {
    let v = rand_vec(12, 1, -8.0, 8.0);
    for (op, f) in unary_cases() {
        let want: Vec<f64> = v.iter().map(|&x| f(x)).collect();
        for (t, tol) in [(t64(&[3, 4], v.clone()), 1e-14), (t32(&[3, 4], v.clone()), 1e-5)] {
            let mut g = Graph::new();
            let x = g.constant(t.clone()).unwrap();
            let y = g.op(op, &[x]).unwrap();
            let out = eval1(&g, &[], y);
            assert_eq!(out.dtype(), t.dtype(), "{op}");
            assert_close(&out.to_f64_vec(), &want, tol, op);
        }
    }
    // Abs and Sign on integers; LeakyRelu's alpha attr
    let mut g = Graph::new();
    let i = g.constant(Tensor::from_vec(&[3], vec![-3i64, 0, 5], oxiflow_core::Layout::RowMajor).unwrap()).unwrap();
    let a = g.op("Abs", &[i]).unwrap();
    let s = g.op("Sign", &[i]).unwrap();
    assert_eq!(eval1(&g, &[], a).to_f64_vec(), vec![3.0, 0.0, 5.0]);
    assert_eq!(eval1(&g, &[], s).to_f64_vec(), vec![-1.0, 0.0, 1.0]);
    let x = g.constant(t64(&[2], vec![-2.0, 3.0])).unwrap();
    let l = g.op_spec(NodeSpec::new("LeakyRelu", &[x]).attr("alpha", 0.5)).unwrap();
    assert_eq!(eval1(&g, &[], l).to_f64_vec(), vec![-1.0, 3.0]);
    // float-only activations reject ints at graph construction, naming op and node
    let e = g.op("Relu", &[i]).unwrap_err().to_string();
    assert!(e.contains("Relu") && e.contains("Int64"), "{e}");
}

#[test]
fn softmax_rows_sum_to_one_and_match_exp_ratio() {
    let v = rand_vec(6, 2, -30.0, 30.0);
    let mut g = Graph::new();
    let x = g.constant(t64(&[2, 3], v.clone())).unwrap();
    let y = g.op("Softmax", &[x]).unwrap();
    let out = eval1(&g, &[], y).to_f64_vec();
    for r in 0..2 {
        let row = &v[3 * r..3 * r + 3];
        let m = row.iter().cloned().fold(f64::MIN, f64::max);
        let z: f64 = row.iter().map(|&a| (a - m).exp()).sum();
        let want: Vec<f64> = row.iter().map(|&a| (a - m).exp() / z).collect();
        assert_close(&out[3 * r..3 * r + 3], &want, 1e-14, "softmax");
    }
    let s = g.constant(Tensor::scalar(1.0f64)).unwrap();
    let e = g.op("Softmax", &[s]).unwrap_err().to_string();
    assert!(e.contains("Softmax") && e.contains(">= 1 dimension"), "{e}");
}

#[test]
fn binary_extrema_and_comparisons_broadcast() {
    let (a, b) = (rand_vec(6, 3, -1.0, 1.0), rand_vec(3, 4, -1.0, 1.0));
    let cases: Vec<Binary> = vec![
        ("Maximum", f64::max),
        ("Minimum", f64::min),
        ("Less", |x, y| (x < y) as u8 as f64),
        ("LessEqual", |x, y| (x <= y) as u8 as f64),
        ("GreaterEqual", |x, y| (x >= y) as u8 as f64),
        ("Equal", |x, y| (x == y) as u8 as f64),
    ];
    for (op, f) in cases {
        let mut g = Graph::new();
        let x = g.constant(t64(&[2, 3], a.clone())).unwrap();
        let y = g.constant(t64(&[3], b.clone())).unwrap();
        let z = g.op(op, &[x, y]).unwrap();
        let (shape, want) = naive_broadcast(&a, &[2, 3], &b, &[3], f);
        let out = eval1(&g, &[], z);
        assert_eq!(out.dims(), &shape[..], "{op}");
        assert_close(&out.to_f64_vec(), &want, 0.0, op);
        let w = g.constant(t64(&[2], vec![1.0, 2.0])).unwrap();
        let e = g.op(op, &[x, w]).unwrap_err().to_string();
        assert!(e.contains(op) && e.contains("[2,3]") && e.contains("[2]"), "{e}");
    }
}

#[test]
fn float_tests_classify_nan_infinities_and_finite_values() {
    // 0, -0, 1.5, the largest finite, the smallest normal, a subnormal, +inf, -inf, NaN
    let v = [0.0, -0.0, 1.5, f64::MAX, f64::MIN_POSITIVE, 5e-324, f64::INFINITY, f64::NEG_INFINITY, f64::NAN];
    let want = [
        ("IsNan", [false, false, false, false, false, false, false, false, true]),
        ("IsInf", [false, false, false, false, false, false, true, true, false]),
        ("IsFinite", [true, true, true, true, true, true, false, false, false]),
    ];
    for (op, w) in want {
        let mut g = Graph::new();
        let x = g.constant(t64(&[3, 3], v.to_vec())).unwrap();
        // f32: f64::MAX becomes +inf and the subnormal 0
        let x32 = g.constant(Tensor::from_vec(&[9], v.iter().map(|&a| a as f32).collect::<Vec<f32>>(), oxiflow_core::Layout::RowMajor).unwrap()).unwrap();
        for (t, dims, w) in [(x, vec![3, 3], w), (x32, vec![9], if op == "IsNan" { w } else { [w[0], w[1], w[2], !w[3], w[4], w[5], w[6], w[7], w[8]] })] {
            let y = g.op(op, &[t]).unwrap();
            let out = eval1(&g, &[], y);
            assert_eq!(out.dtype(), DType::Bool, "{op}");
            assert_eq!(out.dims(), &dims[..], "{op}");
            assert_eq!(out.to_f64_vec(), w.iter().map(|&b| b as u8 as f64).collect::<Vec<_>>(), "{op} {dims:?}");
        }
        // integers are refused, naming the op
        let i = g.constant(Tensor::scalar(1i64)).unwrap();
        let e = g.op(op, &[i]).unwrap_err().to_string();
        assert!(e.contains(op) && e.contains("Int64"), "{e}");
    }
}

/// Naive reduction of a row-major `[2, 3, 4]` array over `axes` (kept dims dropped).
fn naive_reduce(v: &[f64], dims: &[usize], axes: &[usize], init: f64, f: impl Fn(f64, f64) -> f64) -> Vec<f64> {
    let out_dims: Vec<usize> = (0..dims.len()).filter(|i| !axes.contains(i)).map(|i| dims[i]).collect();
    let mut out = vec![init; out_dims.iter().product::<usize>().max(1)];
    let st = strides(dims);
    let ost = strides(&out_dims);
    for (flat, &x) in v.iter().enumerate() {
        let mut o = 0;
        let mut k = 0;
        for d in 0..dims.len() {
            if !axes.contains(&d) {
                o += ((flat / st[d]) % dims[d]) * ost[k];
                k += 1;
            }
        }
        out[o] = f(out[o], x);
    }
    out
}

#[test]
fn reductions_match_naive_loops() {
    let dims = [2, 3, 4];
    let v = rand_vec(24, 5, 0.5, 1.5);
    for axes in [vec![0usize], vec![1], vec![2], vec![0, 2], vec![0, 1, 2]] {
        let n: usize = axes.iter().map(|&a| dims[a]).product();
        let sum = naive_reduce(&v, &dims, &axes, 0.0, |a, b| a + b);
        let cases: Vec<(&str, Vec<f64>)> = vec![
            ("Mean", sum.iter().map(|s| s / n as f64).collect()),
            ("Prod", naive_reduce(&v, &dims, &axes, 1.0, |a, b| a * b)),
            ("Max", naive_reduce(&v, &dims, &axes, f64::MIN, f64::max)),
            ("Min", naive_reduce(&v, &dims, &axes, f64::MAX, f64::min)),
        ];
        for (op, want) in cases {
            for (t, tol) in [(t64(&dims, v.clone()), 1e-14), (t32(&dims, v.clone()), 1e-5)] {
                let mut g = Graph::new();
                let x = g.constant(t).unwrap();
                let ax: Vec<i64> = axes.iter().map(|&a| a as i64).collect();
                let y = g.op_spec(NodeSpec::new(op, &[x]).attr("axis", ax.clone()).attr("keep_dims", false)).unwrap();
                assert_close(&eval1(&g, &[], y).to_f64_vec(), &want, tol, &format!("{op} over {axes:?}"));
                let k = g.op_spec(NodeSpec::new(op, &[x]).attr("axis", ax).attr("keep_dims", true)).unwrap();
                let kd: Vec<usize> = (0..3).map(|i| if axes.contains(&i) { 1 } else { dims[i] }).collect();
                assert_eq!(g.shape_of(k).unwrap().0, kd);
            }
        }
    }
    let mut g = Graph::new();
    let x = g.constant(t64(&dims, v.clone())).unwrap();
    let e = g.op_spec(NodeSpec::new("Max", &[x]).attr("axis", vec![3i64])).unwrap_err().to_string();
    assert!(e.contains("Max") && e.contains("out of range") && e.contains("[2,3,4]"), "{e}");
}

#[test]
fn argmax_argmin_give_first_extremum_along_axis() {
    let v = vec![1.0, 5.0, 5.0, 0.0, -1.0, 2.0];
    let mut g = Graph::new();
    let x = g.constant(t64(&[2, 3], v)).unwrap();
    let a1 = g.op_spec(NodeSpec::new("ArgMax", &[x]).attr("axis", 1i64)).unwrap();
    let a0 = g.op_spec(NodeSpec::new("ArgMin", &[x]).attr("axis", 0i64)).unwrap();
    let out = eval1(&g, &[], a1);
    assert_eq!(out.dtype(), DType::Int64);
    assert_eq!(out.to_f64_vec(), vec![1.0, 2.0]);
    assert_eq!(eval1(&g, &[], a0).to_f64_vec(), vec![1.0, 1.0, 1.0]);
    let a32 = g.op_spec(NodeSpec::new("ArgMax", &[x]).attr("axis", -1i64).attr("output_type", DType::Int32)).unwrap();
    assert_eq!(eval1(&g, &[], a32).dtype(), DType::Int32);
}

// ---------------------------------------------------------------- linear algebra

fn matmul_naive(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|l| a[i * k + l] * b[l * n + j]).sum();
        }
    }
    c
}

/// A well-conditioned `n x n` matrix: random entries plus `n` on the diagonal.
fn well_conditioned(n: usize, seed: u64) -> Vec<f64> {
    let mut v = rand_vec(n * n, seed, -1.0, 1.0);
    for i in 0..n {
        v[i * n + i] += n as f64;
    }
    v
}

fn eye(n: usize) -> Vec<f64> {
    (0..n * n).map(|f| if f / n == f % n { 1.0 } else { 0.0 }).collect()
}

#[test]
fn inverse_determinant_solve_satisfy_their_definitions() {
    let a = well_conditioned(4, 7);
    let b = rand_vec(8, 8, -1.0, 1.0);
    let mut g = Graph::new();
    let ta = g.constant(t64(&[4, 4], a.clone())).unwrap();
    let tb = g.constant(t64(&[4, 2], b.clone())).unwrap();
    let inv = g.op("MatrixInverse", &[ta]).unwrap();
    let x = g.op("MatrixSolve", &[ta, tb]).unwrap();
    let xt = g.op_spec(NodeSpec::new("MatrixSolve", &[ta, tb]).attr("adjoint", true)).unwrap();
    let inv_v = eval1(&g, &[], inv).to_f64_vec();
    assert_close(&matmul_naive(&a, &inv_v, 4, 4, 4), &eye(4), 1e-13, "A inv(A)");
    assert_close(&matmul_naive(&a, &eval1(&g, &[], x).to_f64_vec(), 4, 4, 2), &b, 1e-13, "A x = b");
    let at: Vec<f64> = (0..16).map(|f| a[(f % 4) * 4 + f / 4]).collect();
    assert_close(&matmul_naive(&at, &eval1(&g, &[], xt).to_f64_vec(), 4, 4, 2), &b, 1e-13, "A^T x = b");
    // determinant of a 3x3 by the rule of Sarrus, and of a batch
    let m = well_conditioned(3, 9);
    let sarrus = m[0] * m[4] * m[8] + m[1] * m[5] * m[6] + m[2] * m[3] * m[7] - m[2] * m[4] * m[6] - m[0] * m[5] * m[7] - m[1] * m[3] * m[8];
    let mut batch = m.clone();
    batch.extend(m.iter().map(|x| 2.0 * x));
    for (t, tol) in [(t64(&[2, 3, 3], batch.clone()), 1e-13), (t32(&[2, 3, 3], batch), 1e-5)] {
        let tm = g.constant(t).unwrap();
        let d = g.op("MatrixDeterminant", &[tm]).unwrap();
        assert_eq!(g.shape_of(d).unwrap().0, vec![2]);
        assert_close(&eval1(&g, &[], d).to_f64_vec(), &[sarrus, 8.0 * sarrus], tol, "det");
    }
}

#[test]
fn least_squares_over_and_underdetermined() {
    let mut g = Graph::new();
    // overdetermined 5x3: the residual is orthogonal to A's columns
    let a = rand_vec(15, 10, -1.0, 1.0);
    let b = rand_vec(5, 11, -1.0, 1.0);
    let ta = g.constant(t64(&[5, 3], a.clone())).unwrap();
    let tb = g.constant(t64(&[5, 1], b.clone())).unwrap();
    let xo = g.op("MatrixSolveLs", &[ta, tb]).unwrap();
    let xv = eval1(&g, &[], xo).to_f64_vec();
    let r: Vec<f64> = matmul_naive(&a, &xv, 5, 3, 1).iter().zip(&b).map(|(p, q)| p - q).collect();
    let at: Vec<f64> = (0..15).map(|f| a[(f % 5) * 3 + f / 5]).collect();
    assert_close(&matmul_naive(&at, &r, 3, 5, 1), &[0.0; 3], 1e-13, "A^T (A x - b)");
    // underdetermined 2x3: A x = b exactly and x is orthogonal to the null space
    let a = rand_vec(6, 12, -1.0, 1.0);
    let b = rand_vec(2, 13, -1.0, 1.0);
    let ta = g.constant(t64(&[2, 3], a.clone())).unwrap();
    let tb = g.constant(t64(&[2, 1], b.clone())).unwrap();
    let xu = g.op("MatrixSolveLs", &[ta, tb]).unwrap();
    let xv = eval1(&g, &[], xu).to_f64_vec();
    assert_close(&matmul_naive(&a, &xv, 2, 3, 1), &b, 1e-13, "A x = b");
    let nul = [a[1] * a[5] - a[2] * a[4], a[2] * a[3] - a[0] * a[5], a[0] * a[4] - a[1] * a[3]];
    assert!((0..3).map(|i| nul[i] * xv[i]).sum::<f64>().abs() < 1e-13, "minimum-norm solution");
}

#[test]
fn singular_and_mismatched_matrices_are_clear_errors() {
    let mut g = Graph::new();
    let s = g.constant(t64(&[2, 2], vec![1.0, 2.0, 2.0, 4.0])).unwrap();
    let b = g.constant(t64(&[2, 1], vec![1.0, 1.0])).unwrap();
    for y in [g.op("MatrixInverse", &[s]).unwrap(), g.op("MatrixSolve", &[s, b]).unwrap()] {
        let e = eval(&g, &[], &[y]).unwrap_err().to_string();
        let op = g.node(y.node).unwrap().op.name;
        assert!(e.contains(op) && e.contains("Input matrix is not invertible.") && e.contains("[2,2]"), "{e}");
    }
    // the graph stays usable
    let ok = g.constant(t64(&[2, 2], vec![2.0, 0.0, 0.0, 4.0])).unwrap();
    let i = g.op("MatrixInverse", &[ok]).unwrap();
    assert_eq!(eval1(&g, &[], i).to_f64_vec(), vec![0.5, 0.0, 0.0, 0.25]);
    let b3 = g.constant(t64(&[3, 1], vec![1.0; 3])).unwrap();
    let e = g.op("MatrixSolve", &[ok, b3]).unwrap_err().to_string();
    assert!(e.contains("MatrixSolve") && e.contains("[2,2]") && e.contains("[3,1]"), "{e}");
    let r = g.constant(t64(&[2, 3], vec![1.0; 6])).unwrap();
    let e = g.op("MatrixInverse", &[r]).unwrap_err().to_string();
    assert!(e.contains("MatrixInverse") && e.contains("square") && e.contains("[2,3]"), "{e}");
    let e = g.op("MatrixSolveLs", &[r, b3]).unwrap_err().to_string();
    assert!(e.contains("MatrixSolveLs") && e.contains("[2,3]") && e.contains("[3,1]"), "{e}");
}

#[test]
fn diag_ops_and_batch_matmul_match_naive_loops() {
    let mut g = Graph::new();
    let a = rand_vec(6, 14, -1.0, 1.0);
    let ta = g.constant(t64(&[2, 3], a.clone())).unwrap();
    let dp = g.op("MatrixDiagPart", &[ta]).unwrap();
    assert_eq!(eval1(&g, &[], dp).to_f64_vec(), vec![a[0], a[4]]);
    let v = g.constant(t64(&[3], vec![1.0, 2.0, 3.0])).unwrap();
    let d = g.op("MatrixDiag", &[v]).unwrap();
    assert_eq!(eval1(&g, &[], d).to_f64_vec(), vec![1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 3.0]);
    // [2, 2, 3] x [3, 4] (broadcast batch), with every adjoint combination
    let x = rand_vec(12, 15, -1.0, 1.0);
    let y = rand_vec(12, 16, -1.0, 1.0);
    let tr = |v: &[f64], r: usize, c: usize| -> Vec<f64> { (0..r * c).map(|f| v[(f % r) * c + f / r]).collect() };
    for (adj_x, adj_y) in [(false, false), (true, false), (false, true), (true, true)] {
        let (xd, yd) = (if adj_x { [2, 3, 2] } else { [2, 2, 3] }, if adj_y { [4, 3] } else { [3, 4] });
        let xv: Vec<f64> = if adj_x { x.chunks(6).flat_map(|c| tr(c, 2, 3)).collect() } else { x.clone() };
        let yv = if adj_y { tr(&y, 3, 4) } else { y.clone() };
        let tx = g.constant(t64(&xd, xv)).unwrap();
        let ty = g.constant(t64(&yd, yv)).unwrap();
        let z = g.op_spec(NodeSpec::new("BatchMatMulV2", &[tx, ty]).attr("adj_x", adj_x).attr("adj_y", adj_y)).unwrap();
        let want: Vec<f64> = x.chunks(6).flat_map(|c| matmul_naive(c, &y, 2, 3, 4)).collect();
        let out = eval1(&g, &[], z);
        assert_eq!(out.dims(), &[2, 2, 4]);
        assert_close(&out.to_f64_vec(), &want, 1e-14, &format!("BatchMatMulV2 adj=({adj_x},{adj_y})"));
    }
    let e = g.op("BatchMatMulV2", &[ta, ta]).unwrap_err().to_string();
    assert!(e.contains("BatchMatMulV2") && e.contains("[2,3]"), "{e}");
}

// ---------------------------------------------------------------- gradients

fn op1(op: &'static str) -> impl Fn(&mut Graph, &[Output]) -> Result<Output> {
    move |g, xs| g.op(op, &[xs[0]])
}
fn op2(op: &'static str) -> impl Fn(&mut Graph, &[Output]) -> Result<Output> {
    move |g, xs| g.op(op, &[xs[0], xs[1]])
}
fn reduce(op: &'static str, axes: Vec<i64>) -> impl Fn(&mut Graph, &[Output]) -> Result<Output> {
    move |g, xs| g.op_spec(NodeSpec::new(op, &[xs[0]]).attr("axis", axes.clone()).attr("keep_dims", false))
}

#[test]
fn elementwise_gradients_match_finite_differences() {
    // values away from the kinks at 0 (and 6 for Relu6)
    let v: Vec<f64> = rand_vec(12, 20, 0.2, 1.4).iter().enumerate().map(|(i, &x)| if i % 2 == 0 { -x } else { x * 5.0 }).collect();
    let x = t64(&[3, 4], v);
    for op in ["Abs", "Sign", "Sigmoid", "Relu", "Relu6", "LeakyRelu", "Elu", "Selu", "Softplus", "Softsign", "Softmax"] {
        check_grads(std::slice::from_ref(&x), op1(op));
    }
    check_grads(&[rand_t(&[3, 4], 21, -1.2, 1.2)], op1("Tan"));
    let a = rand_t(&[2, 3], 22, -1.0, 1.0);
    let b = rand_t(&[3], 23, -1.0, 1.0);
    for op in ["Maximum", "Minimum"] {
        check_grads(&[a.clone(), b.clone()], op2(op));
    }
}

#[test]
fn reduction_gradients_match_finite_differences() {
    let x = rand_t(&[2, 3, 4], 24, 0.5, 1.5);
    for op in ["Mean", "Prod", "Max", "Min", "Sum"] {
        for axes in [vec![1i64], vec![0, 2], vec![]] {
            check_grads(std::slice::from_ref(&x), reduce(op, axes));
        }
    }
    // Prod with zeros: one zero in a group, two zeros in another (TF's exact gradient)
    let mut v = rand_vec(12, 25, 0.5, 1.5);
    v[1] = 0.0;
    v[6] = 0.0;
    v[7] = 0.0;
    check_grads(&[t64(&[3, 4], v.clone())], reduce("Prod", vec![1]));
    check_grads(&[t64(&[3, 4], v)], reduce("Prod", vec![]));
}

#[test]
fn linalg_gradients_match_finite_differences() {
    let a = t64(&[3, 3], well_conditioned(3, 30));
    let b = rand_t(&[3, 2], 31, -1.0, 1.0);
    check_grads(std::slice::from_ref(&a), op1("MatrixInverse"));
    check_grads_with(std::slice::from_ref(&a), 1e-6, 1e-6, |g, xs| g.op_spec(NodeSpec::new("MatrixInverse", &[xs[0]]).attr("adjoint", true)));
    check_grads(std::slice::from_ref(&a), op1("MatrixDeterminant"));
    check_grads(&[a.clone(), b.clone()], op2("MatrixSolve"));
    check_grads(&[a.clone(), b.clone()], |g, xs| g.op_spec(NodeSpec::new("MatrixSolve", &[xs[0], xs[1]]).attr("adjoint", true)));
    check_grads(&[rand_t(&[5, 3], 32, -1.0, 1.0), rand_t(&[5, 2], 33, -1.0, 1.0)], op2("MatrixSolveLs"));
    check_grads(&[rand_t(&[2, 4], 34, -1.0, 1.0), rand_t(&[2, 2], 35, -1.0, 1.0)], op2("MatrixSolveLs"));
    for dims in [[3, 3], [2, 4], [4, 2]] {
        check_grads(&[rand_t(&dims, 36, -1.0, 1.0)], op1("MatrixDiagPart"));
    }
    check_grads(&[rand_t(&[2, 3], 37, -1.0, 1.0)], op1("MatrixDiag"));
    let batch = t64(&[2, 3, 3], [well_conditioned(3, 38), well_conditioned(3, 39)].concat());
    check_grads(std::slice::from_ref(&batch), op1("MatrixInverse"));
    check_grads(std::slice::from_ref(&batch), op1("MatrixDeterminant"));
    for (adj_x, adj_y) in [(false, false), (true, false), (false, true), (true, true)] {
        let x = rand_t(&[2, 3, 3], 40, -1.0, 1.0);
        let y = rand_t(&[3, 3], 41, -1.0, 1.0);
        check_grads(&[x, y], move |g, xs| g.op_spec(NodeSpec::new("BatchMatMulV2", &[xs[0], xs[1]]).attr("adj_x", adj_x).attr("adj_y", adj_y)));
    }
}

#[test]
fn second_derivatives_of_the_dense_ops() {
    let x = rand_t(&[2, 3], 50, -1.5, 1.5);
    for op in ["Sigmoid", "Softplus", "Softmax", "Tan", "Elu", "Selu"] {
        check_second_grads(std::slice::from_ref(&x), 1e-5, op1(op));
    }
    let pos = rand_t(&[2, 3], 51, 0.5, 1.5);
    // Relu and LeakyRelu are piecewise linear: their gradients do not depend on x (None)
    for op in ["Softsign", "Abs"] {
        check_second_grads(std::slice::from_ref(&pos), 1e-5, op1(op));
    }
    check_second_grads(&[rand_t(&[2, 3, 4], 52, 0.5, 1.5)], 1e-5, reduce("Prod", vec![1]));
    let a = t64(&[3, 3], well_conditioned(3, 54));
    check_second_grads(std::slice::from_ref(&a), 1e-4, op1("MatrixInverse"));
    check_second_grads(std::slice::from_ref(&a), 1e-4, op1("MatrixDeterminant"));
    check_second_grads(&[a.clone(), rand_t(&[3, 1], 55, -1.0, 1.0)], 1e-4, op2("MatrixSolve"));
    check_second_grads(&[rand_t(&[4, 2], 56, -1.0, 1.0), rand_t(&[4, 1], 57, -1.0, 1.0)], 1e-4, op2("MatrixSolveLs"));
}

// ---------------------------------------------------------------- random

fn random_graph(op: &str, seed: i64, seed2: i64, n: usize) -> (Arc<RwLock<Graph>>, Output) {
    let mut g = Graph::new();
    let r = g.op_spec(NodeSpec::new(op, &[]).attr("shape", AttrValue::Shape(vec![n])).attr("seed", seed).attr("seed2", seed2)).unwrap();
    (Arc::new(RwLock::new(g)), r)
}

fn run1(s: &Session, o: Output) -> Vec<f64> {
    s.run(&[], &[o], &[], false).unwrap().values[0].to_f64_vec()
}

#[test]
fn seeded_random_ops_repeat_across_sessions_and_vary_across_runs() {
    for op in ["RandomStandardNormal", "RandomUniform"] {
        let (g, r) = random_graph(op, 7, 3, 20000);
        let s1 = Session::new(g.clone(), SessionOptions::default()).unwrap();
        let (a, b) = (run1(&s1, r), run1(&s1, r));
        assert_ne!(a, b, "{op}: successive runs give fresh values");
        let s2 = Session::new(g.clone(), SessionOptions::default()).unwrap();
        assert_eq!(run1(&s2, r), a, "{op}: same seeds, same first values");
        assert_eq!(run1(&s2, r), b, "{op}: ... and same second values");
        let (g3, r3) = random_graph(op, 7, 4, 20000);
        let s3 = Session::new(g3, SessionOptions::default()).unwrap();
        assert_ne!(run1(&s3, r3), a, "{op}: another seed2, other values");
        // moments of 20000 draws: mean and variance within ~6 standard errors
        let n = a.len() as f64;
        let mean = a.iter().sum::<f64>() / n;
        let var = a.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        let (m0, v0) = if op == "RandomUniform" { (0.5, 1.0 / 12.0) } else { (0.0, 1.0) };
        assert!((mean - m0).abs() < 6.0 * (v0 / n).sqrt(), "{op}: mean {mean}");
        assert!((var - v0).abs() < 0.05 * v0, "{op}: variance {var}");
        if op == "RandomUniform" {
            assert!(a.iter().all(|&x| (0.0..1.0).contains(&x)));
        }
    }
    // seed = seed2 = 0: a fresh seed per session
    let (g, r) = random_graph("RandomUniform", 0, 0, 8);
    let s1 = Session::new(g.clone(), SessionOptions::default()).unwrap();
    let s2 = Session::new(g, SessionOptions::default()).unwrap();
    assert_ne!(run1(&s1, r), run1(&s2, r));
    let mut g = Graph::new();
    let e = g.op_spec(NodeSpec::new("RandomUniform", &[]).attr("shape", AttrValue::Shape(vec![2])).attr("dtype", DType::Int64)).unwrap_err().to_string();
    assert!(e.contains("RandomUniform") && e.contains("Int64"), "{e}");
}

/// The largest distance between the empirical CDF of `xs` and `cdf` (Kolmogorov-Smirnov).
fn ks_distance(xs: &mut [f64], cdf: impl Fn(f64) -> f64) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = xs.len() as f64;
    xs.iter().enumerate().map(|(i, &x)| (cdf(x) - i as f64 / n).abs().max((cdf(x) - (i + 1) as f64 / n).abs())).fold(0.0, f64::max)
}

#[test]
fn random_gamma_draws_follow_the_gamma_distribution_of_each_alpha() {
    // output [n, 4]: column j draws Gamma(alpha[j], 1)
    let alphas = [0.3, 1.0, 3.0, 20.0];
    let n = 20000;
    let mut g = Graph::new();
    let a = g.constant(t64(&[4], alphas.to_vec())).unwrap();
    let r = g.op_spec(NodeSpec::new("RandomGamma", &[a]).attr("shape", AttrValue::Shape(vec![n])).attr("seed", 5).attr("seed2", 9)).unwrap();
    assert_eq!(g.shape_of(r).unwrap().0, vec![n, 4]);
    let g = Arc::new(RwLock::new(g));
    let s = Session::new(g.clone(), SessionOptions::default()).unwrap();
    let v = run1(&s, r);
    assert!(v.iter().all(|&x| x > 0.0 && x.is_finite()));
    for (j, &al) in alphas.iter().enumerate() {
        let mut col: Vec<f64> = v.iter().skip(j).step_by(4).copied().collect();
        let m = col.iter().sum::<f64>() / n as f64;
        let var = col.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n as f64;
        // Gamma(α, 1): mean α, variance α
        assert!((m - al).abs() < 6.0 * (al / n as f64).sqrt(), "alpha {al}: mean {m}");
        assert!((var - al).abs() < 0.1 * al, "alpha {al}: variance {var}");
        // the whole distribution where the CDF has a closed form (integer α: Erlang)
        let cdf: Option<Box<dyn Fn(f64) -> f64>> = if al == 1.0 {
            Some(Box::new(|x: f64| 1.0 - (-x).exp()))
        } else if al == 3.0 {
            Some(Box::new(|x: f64| 1.0 - (-x).exp() * (1.0 + x + x * x / 2.0)))
        } else {
            None
        };
        if let Some(cdf) = cdf {
            // 1.95 / sqrt(n): the KS test's 0.1 % critical value
            let d = ks_distance(&mut col, cdf);
            assert!(d < 1.95 / (n as f64).sqrt(), "alpha {al}: KS distance {d}");
        }
    }
    // fresh values per run, the same sequence in another session with the same seeds
    let b = run1(&s, r);
    assert_ne!(v, b);
    let s2 = Session::new(g, SessionOptions::default()).unwrap();
    assert_eq!(run1(&s2, r), v);
    // Float32 alpha: Float32 draws
    let mut g = Graph::new();
    let a = g.constant(t32(&[2, 1], vec![2.0, 0.5])).unwrap();
    let r = g.op_spec(NodeSpec::new("RandomGamma", &[a]).attr("shape", AttrValue::Shape(vec![3]))).unwrap();
    let out = eval1(&g, &[], r);
    assert_eq!((out.dtype(), out.dims().to_vec()), (DType::Float32, vec![3, 2, 1]));
    // errors: a non-positive alpha when it runs, an integer alpha when built
    for bad in [0.0, -1.0, f64::NAN] {
        let mut g = Graph::new();
        let a = g.constant(t64(&[2], vec![1.0, bad])).unwrap();
        let r = g.op_spec(NodeSpec::new("RandomGamma", &[a]).attr("shape", AttrValue::Shape(vec![2]))).unwrap();
        let e = eval(&g, &[], &[r]).unwrap_err().to_string();
        assert!(e.contains("RandomGamma") && e.contains("alpha must be positive"), "{e}");
    }
    let mut g = Graph::new();
    let a = g.constant(Tensor::from_vec(&[1], vec![2i64], oxiflow_core::Layout::RowMajor).unwrap()).unwrap();
    let e = g.op_spec(NodeSpec::new("RandomGamma", &[a]).attr("shape", AttrValue::Shape(vec![2]))).unwrap_err().to_string();
    assert!(e.contains("RandomGamma") && e.contains("Int64"), "{e}");
}

// ---------------------------------------------------------------- placement and names

#[test]
fn gpu_flags_place_dense_ops_on_an_emulated_gpu_or_keep_them_on_cpu() {
    let mut g = Graph::new();
    let a = g.constant(t64(&[3, 3], well_conditioned(3, 60))).unwrap();
    let ops = ["Relu", "Softmax", "MatrixDiagPart", "MatrixInverse", "MatrixDeterminant"];
    let outs: Vec<Output> = ops.iter().map(|op| g.op(op, &[a]).unwrap()).collect();
    let m = g.op_spec(NodeSpec::new("Max", &[a]).attr("axis", vec![0i64])).unwrap();
    let cpu_vals: Vec<Vec<f64>> = eval(&g, &[], &outs).unwrap().iter().map(|t| t.to_f64_vec()).collect();
    let g = Arc::new(RwLock::new(g));
    let s = Session::new(g.clone(), SessionOptions { emulated_gpus: Some(1), ..Default::default() }).unwrap();
    let got = s.run(&[], &outs, &[], false).unwrap();
    for (k, op) in ops.iter().enumerate() {
        assert_eq!(got.values[k].to_f64_vec(), cpu_vals[k], "{op} on the emulated GPU");
        let want = if op.starts_with("MatrixInverse") || op.starts_with("MatrixDeterminant") { CPU0 } else { GPU0 };
        assert_eq!(s.assigned_device(outs[k].node).unwrap(), want, "{op}");
    }
    s.run(&[], &[m], &[], false).unwrap();
    assert_eq!(s.assigned_device(m.node).unwrap(), GPU0);
}

#[test]
fn default_names_follow_tf_python() {
    let mut g = Graph::new();
    let x = g.constant(rand_t(&[2, 2], 70, 0.5, 1.0)).unwrap();
    for op in ["Abs", "Sign", "Tan", "Sigmoid", "Relu", "Relu6", "LeakyRelu", "Elu", "Selu", "Softplus", "Softsign", "Softmax"] {
        let y = g.op(op, &[x]).unwrap();
        assert_eq!(g.node(y.node).unwrap().name, op);
    }
    for op in ["Maximum", "Minimum", "Less", "LessEqual", "GreaterEqual", "Equal", "MatrixSolve", "MatrixSolveLs"] {
        let y = g.op(op, &[x, x]).unwrap();
        assert_eq!(g.node(y.node).unwrap().name, op);
    }
    let y = g.op("BatchMatMulV2", &[x, x]).unwrap();
    assert_eq!(g.node(y.node).unwrap().name, "MatMul");
    for op in ["Mean", "Prod", "Max", "Min", "ArgMax", "ArgMin", "MatrixInverse", "MatrixDeterminant", "MatrixDiagPart", "MatrixDiag"] {
        let y = g.op(op, &[x]).unwrap();
        assert_eq!(g.node(y.node).unwrap().name, op);
    }
}
