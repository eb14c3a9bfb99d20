//! Sparse ops against dense oracles written here (plain loops, Gaussian elimination) and
//! gradients against central finite differences: `SparseTensorDenseMatMul` with every
//! adjoint combination, `SparseRemap` (merging, dropping, the slot output), `SparseReorder`,
//! `SparseSparseMatMul`, and `SparseSolve` by LU, Cholesky and least squares, with its
//! errors and the session's factorization cache.

mod common;
use common::*;
use oxiflow_core::ops::AttrValue;
use oxiflow_core::variable_store::ResourceCache;
use oxiflow_core::{DType, Graph, Layout, NodeSpec, Output, Session, SessionOptions, Tensor};
use std::sync::{Arc, RwLock};

/// A random pattern of `nnz` entries in an `m x n` matrix, repeats included.
fn pattern(m: usize, n: usize, nnz: usize, seed: u64) -> Vec<(usize, usize)> {
    let r = rand_vec(2 * nnz, seed, 0.0, 1.0);
    (0..nnz).map(|e| (((r[2 * e] * m as f64) as usize).min(m - 1), ((r[2 * e + 1] * n as f64) as usize).min(n - 1))).collect()
}

fn idx_tensor(ix: &[(usize, usize)]) -> Tensor {
    Tensor::from_vec(&[ix.len(), 2], ix.iter().flat_map(|&(r, c)| [r as i64, c as i64]).collect(), Layout::RowMajor).unwrap()
}

/// The dense `m x n` matrix (row-major) of a sparse one, repeats summed.
fn dense(ix: &[(usize, usize)], v: &[f64], m: usize, n: usize) -> Vec<f64> {
    let mut a = vec![0.0; m * n];
    for (&(r, c), &x) in ix.iter().zip(v) {
        a[r * n + c] += x;
    }
    a
}

fn matmul(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    (0..m * n).map(|p| (0..k).map(|q| a[(p / n) * k + q] * b[q * n + p % n]).sum()).collect()
}

fn transpose(a: &[f64], m: usize, n: usize) -> Vec<f64> {
    (0..m * n).map(|p| a[(p % m) * n + p / m]).collect()
}

/// `x` with `A x = b` by Gaussian elimination with partial pivoting (`A` `n x n`, `b` `n x k`).
fn gauss(a: &[f64], b: &[f64], n: usize, k: usize) -> Vec<f64> {
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    for c in 0..n {
        let p = (c..n).max_by(|&i, &j| a[i * n + c].abs().total_cmp(&a[j * n + c].abs())).unwrap();
        for j in 0..n {
            a.swap(c * n + j, p * n + j);
        }
        for j in 0..k {
            b.swap(c * k + j, p * k + j);
        }
        for i in c + 1..n {
            let f = a[i * n + c] / a[c * n + c];
            for j in c..n {
                a[i * n + j] -= f * a[c * n + j];
            }
            for j in 0..k {
                b[i * k + j] -= f * b[c * k + j];
            }
        }
    }
    let mut x = vec![0.0; n * k];
    for i in (0..n).rev() {
        for j in 0..k {
            let s: f64 = (i + 1..n).map(|q| a[i * n + q] * x[q * k + j]).sum();
            x[i * k + j] = (b[i * k + j] - s) / a[i * n + i];
        }
    }
    x
}

fn spmm(g: &mut Graph, ix: Output, v: Output, b: Output, shape: [usize; 2], adj: (bool, bool)) -> oxiflow_core::Result<Output> {
    g.op_spec(
        NodeSpec::new("SparseTensorDenseMatMul", &[ix, v, b])
            .attr("dense_shape", AttrValue::Shape(shape.to_vec()))
            .attr("adjoint_a", adj.0)
            .attr("adjoint_b", adj.1),
    )
}

fn solve(g: &mut Graph, ix: Output, v: Output, b: Output, shape: [usize; 2], method: &str) -> oxiflow_core::Result<Output> {
    g.op_spec(NodeSpec::new("SparseSolve", &[ix, v, b]).attr("dense_shape", AttrValue::Shape(shape.to_vec())).attr("method", method))
}

/// A sparse matrix `(indices, values)` made dense by `ScatterNd` (repeats add up).
fn to_dense(g: &mut Graph, ix: Output, v: Output, shape: [usize; 2]) -> oxiflow_core::Result<Output> {
    g.op_spec(NodeSpec::new("ScatterNd", &[ix, v]).attr("shape", AttrValue::Shape(shape.to_vec())))
}

#[test]
fn sparse_dense_matmul_matches_dense_for_every_adjoint() {
    let (m, k, n) = (5, 4, 3);
    let ix = pattern(m, k, 9, 1);
    let v = rand_vec(ix.len(), 2, -1.0, 1.0);
    let a = dense(&ix, &v, m, k);
    for adj in [(false, false), (true, false), (false, true), (true, true)] {
        let (rows, inner) = if adj.0 { (k, m) } else { (m, k) };
        let bdims = if adj.1 { [n, inner] } else { [inner, n] };
        let b = rand_vec(inner * n, 3, -1.0, 1.0);
        let opa = if adj.0 { transpose(&a, m, k) } else { a.clone() };
        let opb = if adj.1 { transpose(&b, n, inner) } else { b.clone() };
        let want = matmul(&opa, &opb, rows, inner, n);
        for dt in [DType::Float64, DType::Float32] {
            let mut g = Graph::new();
            let i = g.constant(idx_tensor(&ix)).unwrap();
            let mk = |d: &[usize], x: Vec<f64>| if dt == DType::Float64 { t64(d, x) } else { t32(d, x) };
            let vv = g.constant(mk(&[ix.len()], v.clone())).unwrap();
            let bb = g.constant(mk(&bdims, b.clone())).unwrap();
            let y = spmm(&mut g, i, vv, bb, [m, k], adj).unwrap();
            let got = eval1(&g, &[], y);
            assert_eq!(got.dims(), &[rows, n]);
            assert_close(&got.to_f64_vec(), &want, if dt == DType::Float64 { 1e-12 } else { 1e-5 }, &format!("{adj:?} {dt}"));
        }
        let ixc = ix.clone();
        check_grads(&[t64(&[ix.len()], v.clone()), t64(&bdims, b.clone())], move |g, xs| {
            let i = g.constant(idx_tensor(&ixc))?;
            spmm(g, i, xs[0], xs[1], [m, k], adj)
        });
    }
    // second derivatives (the gradient is built from differentiable ops)
    let ixc = ix.clone();
    check_second_grads(&[t64(&[ix.len()], v.clone()), t64(&[k, 2], rand_vec(k * 2, 5, -1.0, 1.0))], 1e-5, move |g, xs| {
        let i = g.constant(idx_tensor(&ixc))?;
        let y = spmm(g, i, xs[0], xs[1], [m, k], (false, false))?;
        g.op("Square", &[y])
    });
}

#[test]
fn sparse_dense_matmul_rejects_bad_operands() {
    let mut g = Graph::new();
    let i = g.constant(idx_tensor(&[(0, 0), (3, 1)])).unwrap();
    let v = g.constant(t64(&[2], vec![1.0, 2.0])).unwrap();
    let b = g.constant(t64(&[3, 2], vec![0.0; 6])).unwrap();
    let e = spmm(&mut g, i, v, b, [4, 2], (false, false)).unwrap_err().to_string();
    assert!(e.contains("SparseTensorDenseMatMul") && e.contains("inner dimensions"), "{e}");
    let b = g.constant(t64(&[2, 2], vec![0.0; 4])).unwrap();
    let y = spmm(&mut g, i, v, b, [3, 2], (false, false)).unwrap();
    let e = eval(&g, &[], &[y]).unwrap_err().to_string();
    assert!(e.contains("indices[1] = [3, 1] is out of bounds") && e.contains("[3, 2]"), "{e}");
}

fn remap(g: &mut Graph, ix: Output, v: Output, rows: &[i64], cols: &[i64], shape: [usize; 2]) -> oxiflow_core::Result<oxiflow_core::NodeId> {
    let r = g.constant(Tensor::from_vec(&[rows.len()], rows.to_vec(), Layout::RowMajor)?)?;
    let c = g.constant(Tensor::from_vec(&[cols.len()], cols.to_vec(), Layout::RowMajor)?)?;
    g.add_node(NodeSpec::new("SparseRemap", &[ix, v, r, c]).attr("dense_shape", AttrValue::Shape(shape.to_vec())))
}

#[test]
fn remap_merges_sorts_drops_and_reports_slots() {
    let ix = vec![(2, 1), (0, 2), (2, 1), (1, 0), (0, 0), (1, 2)];
    let v = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let mut g = Graph::new();
    let i = g.constant(idx_tensor(&ix)).unwrap();
    let vv = g.constant(t64(&[6], v.clone())).unwrap();
    // compress: identity maps
    let id = remap(&mut g, i, vv, &[0, 1, 2], &[0, 1, 2], [3, 3]).unwrap();
    let out = eval(&g, &[], &[Output::new(id, 0), Output::new(id, 1), Output::new(id, 2)]).unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![0.0, 0.0, 0.0, 2.0, 1.0, 0.0, 1.0, 2.0, 2.0, 1.0]);
    assert_eq!(out[1].to_f64_vec(), vec![5.0, 2.0, 4.0, 6.0, 4.0]);
    assert_eq!(out[2].to_f64_vec(), vec![4.0, 1.0, 4.0, 2.0, 0.0, 3.0]);
    // rows 2 and 0 (in that order), columns 1..=2: a slice; dropped entries get slot nnz_out
    let id = remap(&mut g, i, vv, &[1, -1, 0], &[-1, 0, 1], [2, 2]).unwrap();
    let out = eval(&g, &[], &[Output::new(id, 0), Output::new(id, 1), Output::new(id, 2)]).unwrap();
    assert_eq!(out[0].to_f64_vec(), vec![0.0, 0.0, 1.0, 1.0]);
    assert_eq!(out[1].to_f64_vec(), vec![4.0, 2.0]);
    assert_eq!(out[2].to_f64_vec(), vec![0.0, 1.0, 0.0, 2.0, 2.0, 2.0]);
    // gradient of the values through the merge and the drop
    let ixc = ix.clone();
    check_grads(&[t64(&[6], v)], move |g, xs| {
        let i = g.constant(idx_tensor(&ixc))?;
        let id = remap(g, i, xs[0], &[1, -1, 0], &[-1, 0, 1], [2, 2])?;
        let d = to_dense(g, Output::new(id, 0), Output::new(id, 1), [2, 2])?;
        g.op("Square", &[d])
    });
}

#[test]
fn reorder_sorts_row_major_keeps_repeats_in_order_and_permutes_gradients_back() {
    let ix = vec![(2, 1), (0, 2), (2, 1), (1, 0), (0, 0), (1, 2)];
    let v = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let reorder = |g: &mut Graph, i: Output, vv: Output| g.add_node(NodeSpec::new("SparseReorder", &[i, vv]).attr("dense_shape", AttrValue::Shape(vec![3, 3])));
    let mut g = Graph::new();
    let i = g.constant(idx_tensor(&ix)).unwrap();
    let vv = g.constant(t64(&[6], v.clone())).unwrap();
    let id = reorder(&mut g, i, vv).unwrap();
    let out = eval(&g, &[], &[Output::new(id, 0), Output::new(id, 1), Output::new(id, 2)]).unwrap();
    // (0,0) (0,2) (1,0) (1,2) (2,1) (2,1): the repeat of (2,1) stays, first the earlier one
    assert_eq!(out[0].to_f64_vec(), vec![0.0, 0.0, 0.0, 2.0, 1.0, 0.0, 1.0, 2.0, 2.0, 1.0, 2.0, 1.0]);
    assert_eq!(out[1].to_f64_vec(), vec![5.0, 2.0, 4.0, 6.0, 1.0, 3.0]);
    assert_eq!(out[2].to_f64_vec(), vec![4.0, 1.0, 5.0, 2.0, 0.0, 3.0]);
    // an index outside the dense shape is an error naming the node
    let bad = g.constant(idx_tensor(&[(3, 0), (0, 0), (0, 0), (0, 0), (0, 0), (0, 0)])).unwrap();
    let id = reorder(&mut g, bad, vv).unwrap();
    let e = eval(&g, &[], &[Output::new(id, 1)]).unwrap_err().to_string();
    assert!(e.contains("SparseReorder") && e.contains("[3, 0]"), "{e}");
    // gradient of the values: each output position weighted differently, so a gradient not
    // permuted back to the input order is caught
    let ixc = ix.clone();
    check_grads(&[t64(&[6], v)], move |g, xs| {
        let i = g.constant(idx_tensor(&ixc))?;
        let id = reorder(g, i, xs[0])?;
        let w = g.constant(t64(&[6], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]))?;
        g.op("Mul", &[Output::new(id, 1), w])
    });
}

#[test]
fn sparse_sparse_matmul_matches_dense_with_gradients() {
    let (m, k, n) = (4, 5, 3);
    let (ia, ib) = (pattern(m, k, 8, 11), pattern(k, n, 7, 12));
    let (va, vb) = (rand_vec(8, 13, -1.0, 1.0), rand_vec(7, 14, -1.0, 1.0));
    let prod = |g: &mut Graph, a: Output, b: Output| -> oxiflow_core::Result<Output> {
        let (i, j) = (g.constant(idx_tensor(&ia))?, g.constant(idx_tensor(&ib))?);
        let spec =
            NodeSpec::new("SparseSparseMatMul", &[i, a, j, b]).attr("a_shape", AttrValue::Shape(vec![m, k])).attr("b_shape", AttrValue::Shape(vec![k, n]));
        let id = g.add_node(spec)?;
        to_dense(g, Output::new(id, 0), Output::new(id, 1), [m, n])
    };
    let mut g = Graph::new();
    let (a, b) = (g.constant(t64(&[8], va.clone())).unwrap(), g.constant(t64(&[7], vb.clone())).unwrap());
    let c = prod(&mut g, a, b).unwrap();
    let want = matmul(&dense(&ia, &va, m, k), &dense(&ib, &vb, k, n), m, k, n);
    assert_close(&eval1(&g, &[], c).to_f64_vec(), &want, 1e-12, "A B");
    check_grads(&[t64(&[8], va.clone()), t64(&[7], vb.clone())], |g, xs| prod(g, xs[0], xs[1]));
    // second derivatives (SparseSparseMatMulGrad's gradient): the bilinear cross terms, and
    // through a square, which makes the product's gradient depend on both operands
    check_second_grads(&[t64(&[8], va.clone()), t64(&[7], vb.clone())], 1e-6, |g, xs| prod(g, xs[0], xs[1]));
    check_second_grads(&[t64(&[8], va), t64(&[7], vb)], 1e-6, |g, xs| {
        let c = prod(g, xs[0], xs[1])?;
        g.op("Square", &[c])
    });
}

/// A diagonally dominant `n x n` pattern (tridiagonal plus random entries) with values.
fn system(n: usize, seed: u64) -> (Vec<(usize, usize)>, Vec<f64>) {
    let mut ix: Vec<(usize, usize)> = (0..n).map(|i| (i, i)).collect();
    ix.extend((1..n).flat_map(|i| [(i, i - 1), (i - 1, i)]));
    ix.extend(pattern(n, n, n, seed));
    let mut v = rand_vec(ix.len(), seed + 1, -1.0, 1.0);
    for x in v.iter_mut().take(n) {
        *x += 2.0 * n as f64;
    }
    (ix, v)
}

#[test]
fn lu_solve_matches_gaussian_elimination_with_gradients() {
    let n = 6;
    let (ix, v) = system(n, 21);
    let a = dense(&ix, &v, n, n);
    for k in [None, Some(2)] {
        let bdims = k.map_or(vec![n], |k| vec![n, k]);
        let b = rand_vec(n * k.unwrap_or(1), 22, -1.0, 1.0);
        for adjoint in [false, true] {
            let mut g = Graph::new();
            let i = g.constant(idx_tensor(&ix)).unwrap();
            let vv = g.constant(t64(&[ix.len()], v.clone())).unwrap();
            let bb = g.constant(t64(&bdims, b.clone())).unwrap();
            let spec = NodeSpec::new("SparseSolve", &[i, vv, bb]).attr("dense_shape", AttrValue::Shape(vec![n, n])).attr("adjoint", adjoint);
            let x = g.op_spec(spec).unwrap();
            let op = if adjoint { transpose(&a, n, n) } else { a.clone() };
            assert_close(&eval1(&g, &[], x).to_f64_vec(), &gauss(&op, &b, n, k.unwrap_or(1)), 1e-10, "x");
            let ixc = ix.clone();
            check_grads(&[t64(&[ix.len()], v.clone()), t64(&bdims, b.clone())], move |g, xs| {
                let i = g.constant(idx_tensor(&ixc))?;
                g.op_spec(NodeSpec::new("SparseSolve", &[i, xs[0], xs[1]]).attr("dense_shape", AttrValue::Shape(vec![n, n])).attr("adjoint", adjoint))
            });
        }
    }
    let ixc = ix.clone();
    check_second_grads(&[t64(&[ix.len()], v), t64(&[n], rand_vec(n, 23, -1.0, 1.0))], 1e-4, move |g, xs| {
        let i = g.constant(idx_tensor(&ixc))?;
        solve(g, i, xs[0], xs[1], [n, n], "lu")
    });
}

#[test]
fn cholesky_solve_needs_a_symmetric_positive_definite_matrix() {
    let n = 5;
    // A = Bᵀ B + n I, stored with both triangles
    let (ib, vb) = system(n, 31);
    let bd = dense(&ib, &vb, n, n);
    let mut a = matmul(&transpose(&bd, n, n), &bd, n, n, n);
    for i in 0..n {
        a[i * n + i] += n as f64;
    }
    let ix: Vec<(usize, usize)> = (0..n * n).map(|p| (p / n, p % n)).collect();
    let b = rand_vec(n, 32, -1.0, 1.0);
    let mut g = Graph::new();
    let i = g.constant(idx_tensor(&ix)).unwrap();
    let vv = g.constant(t64(&[n * n], a.clone())).unwrap();
    let bb = g.constant(t64(&[n], b.clone())).unwrap();
    let x = solve(&mut g, i, vv, bb, [n, n], "cholesky").unwrap();
    assert_close(&eval1(&g, &[], x).to_f64_vec(), &gauss(&a, &b, n, 1), 1e-10, "cholesky x");
    // the gradient symmetrised by the values' source: A = S + Sᵀ from a parameter S
    let (ixc, a0) = (ix.clone(), a.clone());
    check_grads(&[t64(&[n * n], a0.iter().map(|x| x / 2.0).collect()), t64(&[n], b.clone())], move |g, xs| {
        let i = g.constant(idx_tensor(&ixc))?;
        let perm: Vec<i64> = (0..n * n).map(|p| ((p % n) * n + p / n) as i64).collect();
        let p = g.constant(Tensor::from_vec(&[n * n], perm, Layout::RowMajor)?)?;
        let st = g.op("GatherV2", &[xs[0], p])?;
        let sym = g.op("Add", &[xs[0], st])?;
        solve(g, i, sym, xs[1], [n, n], "cholesky")
    });
    // not symmetric
    let mut asym = a.clone();
    asym[1] += 1.0;
    let vs = g.constant(t64(&[n * n], asym)).unwrap();
    let x = solve(&mut g, i, vs, bb, [n, n], "cholesky").unwrap();
    let e = eval(&g, &[], &[x]).unwrap_err().to_string();
    assert!(e.contains("SparseSolve") && e.contains("symmetric"), "{e}");
    // symmetric, not positive definite
    let neg: Vec<f64> = a.iter().map(|x| -x).collect();
    let vn = g.constant(t64(&[n * n], neg)).unwrap();
    let x = solve(&mut g, i, vn, bb, [n, n], "cholesky").unwrap();
    let e = eval(&g, &[], &[x]).unwrap_err().to_string();
    assert!(e.contains("positive definite"), "{e}");
}

#[test]
fn least_squares_solves_the_normal_equations_with_gradients() {
    let (m, n) = (8, 4);
    let mut ix: Vec<(usize, usize)> = (0..n).map(|i| (i, i)).collect();
    ix.extend(pattern(m, n, 12, 41));
    let v = rand_vec(ix.len(), 42, 0.5, 1.5);
    let b = rand_vec(m, 43, -1.0, 1.0);
    let a = dense(&ix, &v, m, n);
    let at = transpose(&a, m, n);
    let want = gauss(&matmul(&at, &a, n, m, n), &matmul(&at, &b, n, m, 1), n, 1);
    let mut g = Graph::new();
    let i = g.constant(idx_tensor(&ix)).unwrap();
    let vv = g.constant(t64(&[ix.len()], v.clone())).unwrap();
    let bb = g.constant(t64(&[m], b.clone())).unwrap();
    let x = solve(&mut g, i, vv, bb, [m, n], "qr").unwrap();
    assert_close(&eval1(&g, &[], x).to_f64_vec(), &want, 1e-10, "least squares x");
    let ixc = ix.clone();
    check_grads_with(&[t64(&[ix.len()], v), t64(&[m], b)], 1e-6, 1e-5, move |g, xs| {
        let i = g.constant(idx_tensor(&ixc))?;
        solve(g, i, xs[0], xs[1], [m, n], "qr")
    });
}

#[test]
fn singular_and_misshapen_systems_are_errors_and_the_session_stays_usable() {
    let mut g = Graph::new();
    let ix = idx_tensor(&[(0, 0), (0, 1), (1, 0), (1, 1)]);
    let i = g.constant(ix).unwrap();
    let vals = g.placeholder(DType::Float64, &[4], Some("vals")).unwrap();
    let b = g.constant(t64(&[2], vec![1.0, 1.0])).unwrap();
    let x = solve(&mut g, i, vals, b, [2, 2], "lu").unwrap();
    // a zero column: structurally singular
    let i2 = g.constant(idx_tensor(&[(0, 0), (1, 0)])).unwrap();
    let v2 = g.constant(t64(&[2], vec![1.0, 2.0])).unwrap();
    let x2 = solve(&mut g, i2, v2, b, [2, 2], "lu").unwrap();
    let s = Session::new(Arc::new(RwLock::new(g)), SessionOptions { emulated_gpus: Some(0), ..Default::default() }).unwrap();
    let e = s.run(&[(vals, t64(&[4], vec![1.0, 2.0, 2.0, 4.0]))], &[x], &[], false).unwrap_err().to_string();
    assert!(e.contains("SparseSolve") && e.contains("singular"), "{e}");
    let e = s.run(&[], &[x2], &[], false).unwrap_err().to_string();
    assert!(e.contains("singular"), "{e}");
    let ok = s.run(&[(vals, t64(&[4], vec![2.0, 1.0, 1.0, 3.0]))], &[x], &[], false).unwrap().values;
    assert_close(&ok[0].to_f64_vec(), &[0.4, 0.2], 1e-12, "after errors");
    // shape errors when the node is added
    let mut g = Graph::new();
    let i = g.constant(idx_tensor(&[(0, 0)])).unwrap();
    let v = g.constant(t64(&[1], vec![1.0])).unwrap();
    let b = g.constant(t64(&[3], vec![1.0; 3])).unwrap();
    let e = solve(&mut g, i, v, b, [3, 2], "lu").unwrap_err().to_string();
    assert!(e.contains("square"), "{e}");
    let e = solve(&mut g, i, v, b, [2, 3], "qr").unwrap_err().to_string();
    assert!(e.contains("at least as many rows"), "{e}");
    let e = solve(&mut g, i, v, b, [2, 2], "lu").unwrap_err().to_string();
    assert!(e.contains("one row per row"), "{e}");
    let e = solve(&mut g, i, v, b, [3, 3], "magic").unwrap_err().to_string();
    assert!(e.contains("unknown method"), "{e}");
    // an empty system has an empty solution
    let i0 = g.constant(Tensor::from_vec(&[0, 2], Vec::<i64>::new(), Layout::RowMajor).unwrap()).unwrap();
    let v0 = g.constant(t64(&[0], vec![])).unwrap();
    let b0 = g.constant(t64(&[0], vec![])).unwrap();
    let x0 = solve(&mut g, i0, v0, b0, [0, 0], "lu").unwrap();
    assert_eq!(eval1(&g, &[], x0).dims(), &[0]);
}

#[test]
fn a_session_reuses_one_factorization_per_matrix() {
    let n = 30;
    let (ix, v) = system(n, 51);
    let mut g = Graph::new();
    let i = g.constant(idx_tensor(&ix)).unwrap();
    let vals = g.placeholder(DType::Float64, &[ix.len()], Some("vals")).unwrap();
    let b1 = g.constant(t64(&[n], rand_vec(n, 52, -1.0, 1.0))).unwrap();
    let b2 = g.constant(t64(&[n, 3], rand_vec(3 * n, 53, -1.0, 1.0))).unwrap();
    let x1 = solve(&mut g, i, vals, b1, [n, n], "lu").unwrap();
    let x2 = solve(&mut g, i, vals, b2, [n, n], "lu").unwrap();
    let s = Session::new(Arc::new(RwLock::new(g)), SessionOptions { emulated_gpus: Some(0), ..Default::default() }).unwrap();
    let a = dense(&ix, &v, n, n);
    let out = s.run(&[(vals, t64(&[ix.len()], v.clone()))], &[x1, x2], &[], false).unwrap().values;
    // both solves are right whichever of them factorized
    assert_close(&matmul(&a, &out[0].to_f64_vec(), n, n, 1), &rand_vec(n, 52, -1.0, 1.0), 1e-10, "A x1");
    assert_close(&matmul(&a, &out[1].to_f64_vec(), n, n, 3), &rand_vec(3 * n, 53, -1.0, 1.0), 1e-10, "A x2");
    // new values: a new factorization, not the cached one
    let v2: Vec<f64> = v.iter().map(|x| x * 2.0).collect();
    let out2 = s.run(&[(vals, t64(&[ix.len()], v2))], &[x1], &[], false).unwrap().values;
    assert_close(&out2[0].to_f64_vec(), &out[0].to_f64_vec().iter().map(|x| x / 2.0).collect::<Vec<_>>(), 1e-10, "2A x = b");
}

#[test]
fn resource_cache_computes_once_keeps_few_and_forgets_failures() {
    let c = ResourceCache::default();
    let mut calls = 0;
    let a = c.get_or_try_insert(1, || Ok::<_, oxiflow_core::OxiflowError>(vec![1.0f64])).unwrap();
    let b = c
        .get_or_try_insert(1, || {
            calls += 1;
            Ok(vec![2.0f64])
        })
        .unwrap();
    assert!(Arc::ptr_eq(&a, &b) && calls == 0);
    let e = c.get_or_try_insert::<Vec<f64>>(2, || Err(oxiflow_core::OxiflowError::InvalidArgument("no".into()))).unwrap_err();
    assert!(e.to_string().contains("no"));
    assert_eq!(c.len(), 1, "a failure is not kept");
    for k in 10..20 {
        c.get_or_try_insert(k, || Ok(k)).unwrap();
    }
    assert_eq!(c.len(), ResourceCache::CAPACITY);
}

#[test]
fn outputs_sized_by_the_data_run_in_a_session() {
    // the executor cannot size-check a [?, 2] output before the kernel runs; it must not try
    let mut g = Graph::new();
    let i = g.placeholder(DType::Int64, &[4, 2], Some("i")).unwrap();
    let v = g.placeholder(DType::Float64, &[4], Some("v")).unwrap();
    let id = remap(&mut g, i, v, &[0, 1], &[0, 1], [2, 2]).unwrap();
    let d = to_dense(&mut g, Output::new(id, 0), Output::new(id, 1), [2, 2]).unwrap();
    let s = Session::new(Arc::new(RwLock::new(g)), SessionOptions { emulated_gpus: Some(1), ..Default::default() }).unwrap();
    let feeds = [(i, idx_tensor(&[(1, 1), (0, 0), (1, 1), (0, 1)])), (v, t64(&[4], vec![1.0, 2.0, 3.0, 4.0]))];
    let out = s.run(&feeds, &[Output::new(id, 0), Output::new(id, 1), d], &[], false).unwrap().values;
    assert_eq!(out[0].dims(), &[3, 2]);
    assert_eq!(out[1].to_f64_vec(), vec![2.0, 4.0, 4.0]);
    assert_eq!(out[2].to_f64_vec(), vec![2.0, 4.0, 0.0, 4.0]);
}

#[test]
fn where_gives_the_coordinates_of_nonzero_elements_in_row_major_order() {
    // a float matrix with -0.0 (zero) and NaN (nonzero), read row by row
    let v = vec![0.0, 1.5, -0.0, f64::NAN, 0.0, -2.0];
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[2, 3], Some("x")).unwrap();
    let w = g.op("Where", &[x]).unwrap();
    assert_eq!(g.shape_of(w).unwrap().to_string(), "[?,2]");
    let out = eval1(&g, &[(x, Tensor::from_vec(&[2, 3], v.clone(), Layout::RowMajor).unwrap())], w);
    let want: Vec<f64> = (0..6).filter(|&p| v[p] != 0.0 || v[p].is_nan()).flat_map(|p| [(p / 3) as f64, (p % 3) as f64]).collect();
    assert_eq!(out.dims(), &[3, 2]);
    assert_eq!(out.to_f64_vec(), want);
    // a column-major input gives the same coordinates (its logical order, not its memory's)
    let cm = Tensor::from_vec(&[2, 3], vec![0.0, f64::NAN, 1.5, 0.0, -0.0, -2.0], Layout::ColumnMajor).unwrap();
    assert_eq!(eval1(&g, &[(x, cm)], w).to_f64_vec(), want);
    // Bool of rank 3, and an all-false input: [0, 3]
    let mut g = Graph::new();
    let b = g.placeholder(DType::Bool, &[2, 2, 2], Some("b")).unwrap();
    let w = g.op("Where", &[b]).unwrap();
    let bits = vec![false, true, false, false, true, true, false, false];
    let out = eval1(&g, &[(b, Tensor::from_vec(&[2, 2, 2], bits.clone(), Layout::RowMajor).unwrap())], w);
    let want: Vec<f64> = (0..8).filter(|&p| bits[p]).flat_map(|p| [(p / 4) as f64, (p / 2 % 2) as f64, (p % 2) as f64]).collect();
    assert_eq!((out.dims(), out.to_f64_vec()), (&[3usize, 3][..], want));
    let none = eval1(&g, &[(b, Tensor::from_vec(&[2, 2, 2], vec![false; 8], Layout::RowMajor).unwrap())], w);
    assert_eq!(none.dims(), &[0, 3]);
}
