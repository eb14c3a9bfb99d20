//! `Cholesky` and `MatrixTriangularSolve`. Oracles: a textbook Cholesky-Banachiewicz loop
//! and substitution loops written here (Float64 and Float32), central finite differences
//! for first and second derivatives.

mod common;
use common::*;
use oxiflow_core::{Graph, NodeSpec, Output, Result};

/// `M Mᵀ + n I` for a random `n x n` `M`: symmetric positive definite.
fn spd(n: usize, seed: u64) -> Vec<f64> {
    let m = rand_vec(n * n, seed, -1.0, 1.0);
    (0..n * n).map(|f| (0..n).map(|k| m[(f / n) * n + k] * m[(f % n) * n + k]).sum::<f64>() + if f / n == f % n { n as f64 } else { 0.0 }).collect()
}

/// The lower factor by the Cholesky-Banachiewicz recurrence.
fn cholesky_naive(a: &[f64], n: usize) -> Vec<f64> {
    let mut l = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let s: f64 = (0..j).map(|k| l[i * n + k] * l[j * n + k]).sum();
            l[i * n + j] = if i == j { (a[i * n + i] - s).sqrt() } else { (a[i * n + j] - s) / l[j * n + j] };
        }
    }
    l
}

/// `op(T) x = b` for one column `b`, by substitution on the triangle of `a` that `lower`
/// names (`op` = transpose when `adjoint`), never reading the other triangle.
fn tri_solve_naive(a: &[f64], b: &[f64], n: usize, lower: bool, adjoint: bool) -> Vec<f64> {
    let t = |i: usize, j: usize| {
        let (r, c) = if adjoint { (j, i) } else { (i, j) };
        if (lower && r >= c) || (!lower && r <= c) {
            a[r * n + c]
        } else {
            0.0
        }
    };
    // op(T) is lower triangular when lower != adjoint: forward substitution, else backward
    let order: Vec<usize> = if lower != adjoint { (0..n).collect() } else { (0..n).rev().collect() };
    let mut x = vec![0.0; n];
    for &i in &order {
        let s: f64 = (0..n).filter(|&j| j != i).map(|j| t(i, j) * x[j]).sum();
        x[i] = (b[i] - s) / t(i, i);
    }
    x
}

fn column(v: &[f64], rows: usize, cols: usize, j: usize) -> Vec<f64> {
    (0..rows).map(|i| v[i * cols + j]).collect()
}

fn tri(g: &mut Graph, a: Output, b: Output, lower: bool, adjoint: bool) -> Result<Output> {
    g.op_spec(NodeSpec::new("MatrixTriangularSolve", &[a, b]).attr("lower", lower).attr("adjoint", adjoint))
}

#[test]
fn cholesky_matches_the_textbook_recurrence_and_reads_only_the_lower_triangle() {
    let n = 4;
    let (a0, a1) = (spd(n, 1), spd(n, 2));
    let want: Vec<f64> = [cholesky_naive(&a0, n), cholesky_naive(&a1, n)].concat();
    // the strict upper triangle holds garbage: TF's Cholesky reads the lower one only
    let mut batch = [a0, a1].concat();
    for (f, x) in batch.iter_mut().enumerate() {
        if (f % 16) / n < (f % 16) % n {
            *x = 100.0 + f as f64;
        }
    }
    let mut g = Graph::new();
    for (t, tol) in [(t64(&[2, n, n], batch.clone()), 1e-13), (t32(&[2, n, n], batch), 1e-5)] {
        let a = g.constant(t).unwrap();
        let l = g.op("Cholesky", &[a]).unwrap();
        assert_eq!(g.shape_of(l).unwrap().0, vec![2, n, n]);
        let got = eval1(&g, &[], l).to_f64_vec();
        assert_close(&got, &want, tol, "L");
        assert!(got.iter().enumerate().all(|(f, &x)| (f % 16) / n >= (f % 16) % n || x == 0.0), "zeros above the diagonal: {got:?}");
    }
}

#[test]
fn triangular_solve_matches_substitution_for_each_triangle_and_transpose() {
    let (n, k) = (4, 2);
    // both triangles random (diagonal away from zero): each case must read only its own
    let mut a = rand_vec(2 * n * n, 3, -1.0, 1.0);
    for (f, x) in a.iter_mut().enumerate() {
        if (f % 16) / n == (f % 16) % n {
            *x += 3.0;
        }
    }
    let b = rand_vec(2 * n * k, 4, -1.0, 1.0);
    let mut g = Graph::new();
    for (lower, adjoint) in [(true, false), (true, true), (false, false), (false, true)] {
        let mut want = Vec::new();
        for m in 0..2 {
            let am = &a[m * n * n..(m + 1) * n * n];
            let bm = &b[m * n * k..(m + 1) * n * k];
            let cols: Vec<Vec<f64>> = (0..k).map(|j| tri_solve_naive(am, &column(bm, n, k, j), n, lower, adjoint)).collect();
            want.extend((0..n * k).map(|f| cols[f % k][f / k]));
        }
        for (ta, tb, tol) in [(t64(&[2, n, n], a.clone()), t64(&[2, n, k], b.clone()), 1e-13), (t32(&[2, n, n], a.clone()), t32(&[2, n, k], b.clone()), 1e-5)] {
            let (ta, tb) = (g.constant(ta).unwrap(), g.constant(tb).unwrap());
            let x = tri(&mut g, ta, tb, lower, adjoint).unwrap();
            assert_close(&eval1(&g, &[], x).to_f64_vec(), &want, tol, &format!("lower={lower} adjoint={adjoint}"));
        }
    }
    // TF's defaults: lower = true, adjoint = false
    let (ta, tb) = (g.constant(t64(&[2, n, n], a.clone())).unwrap(), g.constant(t64(&[2, n, k], b.clone())).unwrap());
    let d = g.op("MatrixTriangularSolve", &[ta, tb]).unwrap();
    let x = tri(&mut g, ta, tb, true, false).unwrap();
    assert_eq!(eval1(&g, &[], d).to_f64_vec(), eval1(&g, &[], x).to_f64_vec());
}

#[test]
fn bad_matrices_are_clear_errors_and_the_graph_stays_usable() {
    let mut g = Graph::new();
    let indefinite = g.constant(t64(&[2, 2], vec![1.0, 2.0, 2.0, 1.0])).unwrap();
    let l = g.op("Cholesky", &[indefinite]).unwrap();
    let e = eval(&g, &[], &[l]).unwrap_err().to_string();
    assert!(e.contains("Cholesky") && e.contains("Cholesky decomposition was not successful") && e.contains("[2,2]"), "{e}");
    let zero_diag = g.constant(t64(&[2, 2], vec![1.0, 0.0, 5.0, 0.0])).unwrap();
    let b = g.constant(t64(&[2, 1], vec![1.0, 1.0])).unwrap();
    let x = g.op("MatrixTriangularSolve", &[zero_diag, b]).unwrap();
    let e = eval(&g, &[], &[x]).unwrap_err().to_string();
    assert!(e.contains("MatrixTriangularSolve") && e.contains("Input matrix is not invertible.") && e.contains("[2,2]"), "{e}");
    // build-time shape errors name the op and the shapes
    let r = g.constant(t64(&[2, 3], vec![1.0; 6])).unwrap();
    let e = g.op("Cholesky", &[r]).unwrap_err().to_string();
    assert!(e.contains("Cholesky") && e.contains("square") && e.contains("[2,3]"), "{e}");
    let b3 = g.constant(t64(&[3, 1], vec![1.0; 3])).unwrap();
    let e = g.op("MatrixTriangularSolve", &[zero_diag, b3]).unwrap_err().to_string();
    assert!(e.contains("MatrixTriangularSolve") && e.contains("[2,2]") && e.contains("[3,1]"), "{e}");
    let v = g.constant(t64(&[3], vec![1.0; 3])).unwrap();
    let e = g.op("Cholesky", &[v]).unwrap_err().to_string();
    assert!(e.contains("Cholesky") && e.contains("rank >= 2") && e.contains("[3]"), "{e}");
    // after the errors, a good matrix still factors in the same graph
    let ok = g.constant(t64(&[2, 2], vec![4.0, 0.0, 2.0, 5.0])).unwrap();
    let l = g.op("Cholesky", &[ok]).unwrap();
    assert_close(&eval1(&g, &[], l).to_f64_vec(), &[2.0, 0.0, 1.0, 2.0], 1e-15, "L of [4 2; 2 5]");
}

/// `Cholesky((S + Sᵀ)/2 + n I)`: the gradient with respect to `S` checks TF's symmetric
/// convention for the gradient with respect to `A`.
fn cholesky_of_sym(g: &mut Graph, xs: &[Output]) -> Result<Output> {
    let n = g.shape_of(xs[0])?.0[0];
    let st = g.op_spec(NodeSpec::new("Transpose", &[xs[0]]).attr("perm", vec![1i64, 0]))?;
    let s = g.op("Add", &[xs[0], st])?;
    let eye: Vec<f64> = (0..n * n).map(|f| if f / n == f % n { n as f64 } else { 0.0 }).collect();
    let eye = g.constant(t64(&[n, n], eye))?;
    let half = g.constant(t64(&[], vec![0.5]))?;
    let s = g.op("Mul", &[s, half])?;
    let a = g.op("Add", &[s, eye])?;
    g.op("Cholesky", &[a])
}

#[test]
fn gradients_match_finite_differences() {
    let a = rand_t(&[3, 3], 10, -1.0, 1.0);
    let mut well = a.to_f64_vec();
    for i in 0..3 {
        well[i * 4] += 3.0;
    }
    let b = rand_t(&[3, 2], 11, -1.0, 1.0);
    for (lower, adjoint) in [(true, false), (true, true), (false, false), (false, true)] {
        check_grads(&[t64(&[3, 3], well.clone()), b.clone()], move |g, xs| tri(g, xs[0], xs[1], lower, adjoint));
    }
    let batch = t64(&[2, 3, 3], [well.clone(), well.iter().map(|x| x * 1.5).collect()].concat());
    check_grads(&[batch, rand_t(&[2, 3, 1], 12, -1.0, 1.0)], |g, xs| tri(g, xs[0], xs[1], true, true));
    check_grads_with(&[rand_t(&[3, 3], 13, -1.0, 1.0)], 1e-6, 1e-6, cholesky_of_sym);
    check_grads_with(&[rand_t(&[4, 4], 14, -1.0, 1.0)], 1e-6, 1e-6, cholesky_of_sym);
}

#[test]
fn second_derivatives_match_finite_differences() {
    let mut well = rand_vec(9, 20, -1.0, 1.0);
    for i in 0..3 {
        well[i * 4] += 3.0;
    }
    check_second_grads(&[t64(&[3, 3], well), rand_t(&[3, 1], 21, -1.0, 1.0)], 1e-4, |g, xs| tri(g, xs[0], xs[1], false, true));
    check_second_grads(&[rand_t(&[3, 3], 22, -1.0, 1.0)], 1e-4, cholesky_of_sym);
}

#[test]
fn default_names_follow_tf_python() {
    let mut g = Graph::new();
    let a = g.constant(t64(&[2, 2], vec![4.0, 0.0, 2.0, 5.0])).unwrap();
    let l = g.op("Cholesky", &[a]).unwrap();
    let x = g.op("MatrixTriangularSolve", &[l, a]).unwrap();
    assert_eq!(g.node(l.node).unwrap().name, "Cholesky");
    assert_eq!(g.node(x.node).unwrap().name, "MatrixTriangularSolve");
}
