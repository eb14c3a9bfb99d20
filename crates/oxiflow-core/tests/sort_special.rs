//! `TopKV2` (and the ops of its gradient), `Invert`, `_InterpInterval`, `Erf`, `Erfc`,
//! `Erfinv`, `BesselI0e`, `BesselI1e`, `Lgamma`, `Digamma` and `Polygamma`: values against
//! a reference sort, a linear scan and known values and identities of the error, Bessel and
//! gamma functions (Abramowitz & Stegun 6.1, 6.3, 6.4, 7.1, 9.8), gradients against finite
//! differences, and the errors.

mod common;
use common::*;
use oxiflow_core::shape::UNKNOWN;
use oxiflow_core::{DType, Graph, Layout, NodeSpec, Output, OxiflowError, Tensor};

fn top_k(g: &mut Graph, x: Output, k: i64) -> oxiflow_core::Result<(Output, Output)> {
    let v = g.op_spec(NodeSpec::new("TopKV2", &[x]).attr("k", k))?;
    Ok((v, Output::new(v.node, 1)))
}

/// The reference: each row's positions ordered by descending value, equal values by
/// position (a stable sort), NaNs last; the first `k`.
fn reference(x: &[f64], n: usize, k: usize) -> (Vec<f64>, Vec<f64>) {
    let (mut vals, mut idx) = (Vec::new(), Vec::new());
    for row in x.chunks(n) {
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&i, &j| match (row[i].is_nan(), row[j].is_nan()) {
            (false, false) => row[j].partial_cmp(&row[i]).unwrap(),
            (a, b) => a.cmp(&b),
        });
        vals.extend(order[..k].iter().map(|&i| row[i]));
        idx.extend(order[..k].iter().map(|&i| i as f64));
    }
    (vals, idx)
}

fn same_values(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!(a == b || (a.is_nan() && b.is_nan()), "{what}: element {i}: got {a}, want {b}");
    }
}

#[test]
fn top_k_matches_a_stable_reference_sort() {
    // small integers: many ties, which must come out by position
    let dims = [3, 4, 7];
    let v: Vec<f64> = rand_vec(84, 11, -4.0, 4.0).into_iter().map(f64::round).collect();
    for k in 0..=7 {
        let (wv, wi) = reference(&v, 7, k);
        let inputs = [
            t64(&dims, v.clone()),
            t32(&dims, v.clone()),
            Tensor::from_vec(&dims, v.iter().map(|&x| x as i32).collect(), Layout::RowMajor).unwrap(),
            Tensor::from_vec(&dims, v.iter().map(|&x| x as i64).collect(), Layout::RowMajor).unwrap(),
        ];
        for x in inputs {
            let what = format!("{} k = {k}", x.dtype());
            let mut g = Graph::new();
            let xo = g.constant(x.clone()).unwrap();
            let (vo, io) = top_k(&mut g, xo, k as i64).unwrap();
            let out = eval(&g, &[], &[vo, io]).unwrap();
            assert_eq!(out[0].dims(), &[3, 4, k][..], "{what}");
            assert_eq!(out[0].dtype(), x.dtype(), "{what}");
            assert_eq!(out[1].dtype(), DType::Int32, "{what}");
            assert_eq!(g.shape_of(io).unwrap().0, vec![3, 4, k], "static shape, {what}");
            same_values(&out[0].to_f64_vec(), &wv, &what);
            same_values(&out[1].to_f64_vec(), &wi, &what);
        }
    }
}

#[test]
fn top_k_reads_column_major_inputs_and_puts_nans_last() {
    // a Julia (column-major) matrix: row r of the logical [2, 5] matrix
    let rows = [[1.0, f64::NAN, 3.0, f64::NAN, 2.0], [0.0, -1.0, f64::INFINITY, f64::NEG_INFINITY, 0.0]];
    let col_major: Vec<f64> = (0..5).flat_map(|j| rows.iter().map(move |r| r[j])).collect();
    let x = Tensor::from_vec(&[2, 5], col_major, Layout::ColumnMajor).unwrap();
    let mut g = Graph::new();
    let xo = g.constant(x).unwrap();
    let (vo, io) = top_k(&mut g, xo, 5).unwrap();
    let out = eval(&g, &[], &[vo, io]).unwrap();
    let flat: Vec<f64> = rows.iter().flatten().copied().collect();
    let (wv, wi) = reference(&flat, 5, 5);
    same_values(&out[0].to_f64_vec(), &wv, "values");
    same_values(&out[1].to_f64_vec(), &wi, "indices");
    assert_eq!(out[1].to_f64_vec(), vec![2.0, 4.0, 0.0, 1.0, 3.0, 2.0, 0.0, 4.0, 1.0, 3.0]);
}

#[test]
fn top_k_gradients_go_back_to_where_the_values_came_from() {
    let x = rand_t(&[3, 6], 5, -1.0, 1.0);
    check_grads(std::slice::from_ref(&x), |g, xs| Ok(top_k(g, xs[0], 4)?.0));
    // second derivatives: the gradient's scatter differentiates to a gather
    check_second_grads(&[x], 1e-6, |g, xs| {
        let v = top_k(g, xs[0], 4)?.0;
        g.op("Square", &[v])
    });
}

#[test]
fn gather_and_scatter_along_the_last_axis_are_adjoint() {
    let idx = Tensor::from_vec(&[2, 3], vec![4i32, 0, 4, 1, 2, 3], Layout::RowMajor).unwrap();
    let x = rand_t(&[2, 5], 8, -1.0, 1.0);
    let mut g = Graph::new();
    let (xo, io) = (g.constant(x.clone()).unwrap(), g.constant(idx.clone()).unwrap());
    let gathered = g.op("_GatherLastAxis", &[xo, io]).unwrap();
    let got = eval1(&g, &[], gathered);
    let xv = x.to_f64_vec();
    assert_eq!(got.to_f64_vec(), vec![xv[4], xv[0], xv[4], xv[6], xv[7], xv[8]]);
    // a repeated position accumulates in the scatter
    let dy = rand_t(&[2, 3], 9, -1.0, 1.0);
    let dyo = g.constant(dy.clone()).unwrap();
    let s = g.op("_ScatterLastAxis", &[dyo, io, xo]).unwrap();
    let d = dy.to_f64_vec();
    assert_eq!(eval1(&g, &[], s).to_f64_vec(), vec![d[1], 0.0, 0.0, 0.0, d[0] + d[2], 0.0, d[3], d[4], d[5], 0.0]);
    check_grads(std::slice::from_ref(&x), |g, xs| {
        let i = g.constant(idx.clone())?;
        g.op("_GatherLastAxis", &[xs[0], i])
    });
    check_grads(&[dy], |g, xs| {
        let (i, like) = (g.constant(idx.clone())?, g.constant(x.clone())?);
        g.op("_ScatterLastAxis", &[xs[0], i, like])
    });
    // an index out of range is an error naming the op
    let bad = g.constant(Tensor::from_vec(&[2, 3], vec![5i32, 0, 0, 0, 0, 0], Layout::RowMajor).unwrap()).unwrap();
    let o = g.op("_GatherLastAxis", &[xo, bad]).unwrap();
    let e = eval(&g, &[], &[o]).unwrap_err().to_string();
    assert!(e.contains("_GatherLastAxis") && e.contains("index 5 is out of range [0, 5)"), "{e}");
}

#[test]
fn top_k_errors_name_the_op_and_unknown_rows_work() {
    let mut g = Graph::new();
    let x = g.constant(rand_t(&[2, 3], 1, 0.0, 1.0)).unwrap();
    let e = top_k(&mut g, x, 4).unwrap_err().to_string();
    assert!(e.contains("TopKV2") && e.contains("at least k columns. Had 3, needed 4"), "{e}");
    let e = top_k(&mut g, x, -1).unwrap_err().to_string();
    assert!(e.contains("Need k >= 0, got -1"), "{e}");
    let s = g.constant(Tensor::scalar(1.0f64)).unwrap();
    assert!(matches!(top_k(&mut g, s, 1), Err(OxiflowError::InvalidArgument(m)) if m.contains("at least 1-D")));
    let b = g.constant(Tensor::from_vec(&[2], vec![true, false], Layout::RowMajor).unwrap()).unwrap();
    assert!(top_k(&mut g, b, 1).unwrap_err().to_string().contains("numeric"));
    // the graph is still usable
    let ok = top_k(&mut g, x, 3).unwrap().0;
    assert_eq!(eval1(&g, &[], ok).dims(), &[2, 3]);

    // unknown leading dimension: shapes at run time
    let p = g.placeholder(DType::Float64, &[UNKNOWN, 4], None).unwrap();
    let (v, i) = top_k(&mut g, p, 2).unwrap();
    assert_eq!(g.shape_of(v).unwrap().0, vec![UNKNOWN, 2]);
    let feed = rand_t(&[3, 4], 2, 0.0, 1.0);
    let (wv, wi) = reference(&feed.to_f64_vec(), 4, 2);
    let out = eval(&g, &[(p, feed)], &[v, i]).unwrap();
    assert_eq!(out[0].dims(), &[3, 2]);
    same_values(&out[0].to_f64_vec(), &wv, "values");
    same_values(&out[1].to_f64_vec(), &wi, "indices");
    // an unknown last dimension shorter than k fails when it runs
    let q = g.placeholder(DType::Float64, &[2, UNKNOWN], None).unwrap();
    let (v, _) = top_k(&mut g, q, 3).unwrap();
    let e = eval(&g, &[(q, rand_t(&[2, 2], 3, 0.0, 1.0))], &[v]).unwrap_err().to_string();
    assert!(e.contains("Had 2, needed 3"), "{e}");
}

#[test]
fn invert_is_the_bitwise_complement() {
    let v32 = vec![0i32, 1, -1, i32::MIN, i32::MAX, 12345];
    let v64 = vec![0i64, 7, -8, i64::MIN, i64::MAX];
    let mut g = Graph::new();
    let a = g.constant(Tensor::from_vec(&[6], v32.clone(), Layout::RowMajor).unwrap()).unwrap();
    let b = g.constant(Tensor::from_vec(&[5], v64.clone(), Layout::RowMajor).unwrap()).unwrap();
    let (ia, ib) = (g.op("Invert", &[a]).unwrap(), g.op("Invert", &[b]).unwrap());
    let out = eval(&g, &[], &[ia, ib]).unwrap();
    let want32: Vec<f64> = v32.iter().map(|&x| (-(i64::from(x)) - 1) as f64).collect();
    let want64: Vec<f64> = v64.iter().map(|&x| (-(i128::from(x)) - 1) as f64).collect();
    assert_eq!(out[0].to_f64_vec(), want32);
    assert_eq!(out[1].to_f64_vec(), want64);
    let f = g.constant(Tensor::scalar(1.0f64)).unwrap();
    assert!(g.op("Invert", &[f]).unwrap_err().to_string().contains("Int32 or Int64"));
}

// ---------------------------------------------------------------- the gamma family

/// Euler's constant γ.
const EULER: f64 = 0.577_215_664_901_532_9;

fn unary(op: &str, xs: &[f64]) -> Vec<f64> {
    let mut g = Graph::new();
    let x = g.constant(t64(&[xs.len()], xs.to_vec())).unwrap();
    let y = g.op(op, &[x]).unwrap();
    eval1(&g, &[], y).to_f64_vec()
}

fn polygamma(n: f64, xs: &[f64]) -> Vec<f64> {
    let mut g = Graph::new();
    let a = g.constant(Tensor::scalar(n)).unwrap();
    let x = g.constant(t64(&[xs.len()], xs.to_vec())).unwrap();
    let y = g.op("Polygamma", &[a, x]).unwrap();
    eval1(&g, &[], y).to_f64_vec()
}

#[test]
fn lgamma_and_digamma_match_known_values() {
    let pi = std::f64::consts::PI;
    let ln2 = std::f64::consts::LN_2;
    // Γ(1/2) = √π, Γ(-1/2) = -2√π, Γ(n) = (n-1)!
    let xs = [0.5, -0.5, 1.0, 2.0, 5.0, 10.0];
    let want = [0.5 * pi.ln(), (2.0 * pi.sqrt()).ln(), 0.0, 0.0, 24f64.ln(), 362880f64.ln()];
    assert_close(&unary("Lgamma", &xs), &want, 1e-14, "lgamma");
    // ψ(1) = -γ, ψ(1/2) = -γ - 2 ln 2, ψ(n) = H(n-1) - γ, ψ(1/4) = -γ - π/2 - 3 ln 2
    let xs = [1.0, 0.5, 5.0, 0.25, 100.0];
    let h = |n: usize| (1..n).map(|k| 1.0 / k as f64).sum::<f64>();
    let want = [-EULER, -EULER - 2.0 * ln2, h(5) - EULER, -EULER - pi / 2.0 - 3.0 * ln2, h(100) - EULER];
    assert_close(&unary("Digamma", &xs), &want, 1e-14, "digamma");
    // poles
    let poles = [0.0, -1.0, -3.0];
    assert!(unary("Lgamma", &poles).iter().all(|&v| v == f64::INFINITY));
    assert!(unary("Digamma", &poles).iter().all(|&v| v == f64::INFINITY));
    assert!(unary("Digamma", &[f64::NAN])[0].is_nan());
}

#[test]
fn digamma_and_polygamma_satisfy_the_recurrence_everywhere() {
    // ψ⁽ⁿ⁾(x + 1) = ψ⁽ⁿ⁾(x) + (-1)^n n! / x^(n+1), across the reflection (x < 0) and the
    // switch to the asymptotic series (x near 12 and 2n + 4)
    let xs: Vec<f64> = rand_vec(200, 17, -6.0, 30.0).into_iter().filter(|x| (x - x.round()).abs() > 1e-3).collect();
    let up: Vec<f64> = xs.iter().map(|x| x + 1.0).collect();
    for n in 0..5u32 {
        let (a, b) = (polygamma(f64::from(n), &xs), polygamma(f64::from(n), &up));
        let fact: f64 = (1..=n).map(f64::from).product();
        let sign = if n % 2 == 0 { 1.0 } else { -1.0 };
        for (i, x) in xs.iter().enumerate() {
            let step = sign * fact / x.powi(n as i32 + 1);
            let scale = a[i].abs().max(b[i].abs()).max(step.abs());
            assert!((b[i] - a[i] - step).abs() <= 2e-13 * scale, "n = {n}, x = {x}: {} - {} vs {step}", b[i], a[i]);
        }
    }
}

#[test]
fn polygamma_matches_known_values() {
    let pi = std::f64::consts::PI;
    let zeta3 = 1.202_056_903_159_594_2;
    // ψ'(1) = π²/6, ψ'(1/2) = π²/2, ψ'(-1/2) = π²/2 + 4, ψ''(1) = -2ζ(3), ψ'''(1/2) = π⁴
    assert_close(&polygamma(1.0, &[1.0, 0.5, -0.5]), &[pi * pi / 6.0, pi * pi / 2.0, pi * pi / 2.0 + 4.0], 1e-14, "trigamma");
    assert_close(&polygamma(2.0, &[1.0]), &[-2.0 * zeta3], 1e-14, "tetragamma");
    assert_close(&polygamma(3.0, &[0.5]), &[pi.powi(4)], 1e-14, "pentagamma");
    // order 0 is digamma; a high order still converges (ψ⁽¹⁰⁾(1) = -10! ζ(11))
    assert_close(&polygamma(0.0, &[0.5]), &[-EULER - 2.0 * std::f64::consts::LN_2], 1e-14, "order 0");
    assert_close(&polygamma(10.0, &[1.0]), &[-3628800.0 * 1.000_494_188_604_119_5], 1e-13, "order 10");
    // TF's (Eigen's) values at the poles and for orders that are not non-negative integers
    assert_eq!(polygamma(1.0, &[0.0, -2.0]), vec![f64::INFINITY; 2]);
    assert_eq!(polygamma(2.0, &[-1.0]), vec![f64::NEG_INFINITY]);
    assert!(polygamma(1.5, &[1.0])[0].is_nan() && polygamma(-1.0, &[1.0])[0].is_nan());
}

#[test]
fn gamma_family_gradients_match_finite_differences() {
    let x = rand_t(&[2, 3], 21, 0.3, 4.0);
    check_grads(std::slice::from_ref(&x), |g, xs| g.op("Lgamma", xs));
    check_second_grads(std::slice::from_ref(&x), 1e-5, |g, xs| g.op("Lgamma", xs));
    check_second_grads(std::slice::from_ref(&x), 1e-5, |g, xs| g.op("Digamma", xs));
    // Polygamma broadcasts its order; only x gets a gradient
    check_grads(&[x], |g, xs| {
        let a = g.constant(t64(&[3], vec![0.0, 1.0, 2.0]))?;
        g.op("Polygamma", &[a, xs[0]])
    });
    // Float32 is computed in Float64 and rounded
    let mut g = Graph::new();
    let x32 = g.constant(t32(&[3], vec![0.5, 3.0, 7.5])).unwrap();
    let (l, d) = (g.op("Lgamma", &[x32]).unwrap(), g.op("Digamma", &[x32]).unwrap());
    let out = eval(&g, &[], &[l, d]).unwrap();
    assert_eq!(out[0].dtype(), DType::Float32);
    assert_close(&out[0].to_f64_vec(), &unary("Lgamma", &[0.5, 3.0, 7.5]), 1e-7, "lgamma f32");
    assert_close(&out[1].to_f64_vec(), &unary("Digamma", &[0.5, 3.0, 7.5]), 1e-7, "digamma f32");
    // integer inputs are refused, naming the op
    let i = g.constant(Tensor::from_vec(&[1], vec![2i32], Layout::RowMajor).unwrap()).unwrap();
    assert!(g.op("Lgamma", &[i]).unwrap_err().to_string().contains("Lgamma"));
}

#[test]
fn error_functions_match_tables_and_invert() {
    // Abramowitz & Stegun table 7.1 and erfc(3) (NIST DLMF 7.8)
    let xs = [0.0, 0.5, 1.0, 2.0, -1.0];
    let want = [0.0, 0.520_499_877_813_046_5, 0.842_700_792_949_714_9, 0.995_322_265_018_952_7, -0.842_700_792_949_714_9];
    assert_close(&unary("Erf", &xs), &want, 1e-15, "erf");
    assert_close(&unary("Erfc", &[3.0, 0.5]), &[2.209_049_699_858_544e-5, 1.0 - 0.520_499_877_813_046_5], 1e-14, "erfc");
    // erf(erfinv(y)) = y across (-1, 1), and erfc(erfinv(y)) = 1 - y near 1, where erf cannot show it
    let ys: Vec<f64> = (-999..=999).map(|k| f64::from(k) / 1000.0).collect();
    let back = unary("Erf", &unary("Erfinv", &ys));
    for (y, b) in ys.iter().zip(&back) {
        assert!((y - b).abs() <= 4.0 * f64::EPSILON, "erf(erfinv({y})) = {b}");
    }
    let tail = [1.0 - 1e-3, 1.0 - 1e-8, 1.0 - 1e-15];
    let x = unary("Erfinv", &tail);
    for ((y, c), x) in tail.iter().zip(unary("Erfc", &x)).zip(&x) {
        assert!(((1.0 - y) - c).abs() <= 1e-12 * (1.0 - y), "erfc(erfinv({y})) = {c} at {x}");
    }
    // the normal quantile at tabulated Φ(x), down to the far lower tail
    let phi = [0.158_655_253_931_457_07, 0.001_349_898_031_630_094_6, 7.619_853_024_160_47e-24, 0.977_249_868_051_820_8];
    assert_close(&unary("Ndtri", &phi), &[-1.0, -3.0, -10.0, 2.0], 1e-10, "ndtri");
    let nd = unary("Ndtri", &[0.0, 1.0, 0.5, -0.1]);
    assert!(nd[0] == f64::NEG_INFINITY && nd[1] == f64::INFINITY && nd[2] == 0.0 && nd[3].is_nan());
    let edge = unary("Erfinv", &[1.0, -1.0, 1.5, f64::NAN, 0.0]);
    assert_eq!(&edge[..2], &[f64::INFINITY, f64::NEG_INFINITY]);
    assert!(edge[2].is_nan() && edge[3].is_nan() && edge[4] == 0.0);
}

#[test]
fn error_function_gradients_match_finite_differences() {
    let x = rand_t(&[2, 3], 31, -1.5, 1.5);
    check_grads(std::slice::from_ref(&x), |g, xs| g.op("Erf", xs));
    check_grads(std::slice::from_ref(&x), |g, xs| g.op("Erfc", xs));
    check_second_grads(std::slice::from_ref(&x), 1e-5, |g, xs| g.op("Erf", xs));
    let y = rand_t(&[2, 3], 32, -0.9, 0.9);
    check_grads(std::slice::from_ref(&y), |g, xs| g.op("Erfinv", xs));
    let p = rand_t(&[2, 3], 33, 0.05, 0.95);
    check_grads(&[p], |g, xs| g.op("Ndtri", xs));
}

#[test]
fn scaled_bessel_functions_match_tables_and_join_smoothly() {
    // Abramowitz & Stegun table 9.8: e^{-x} I₀(x), e^{-x} I₁(x)
    let xs = [0.0, 1.0, 2.0, 5.0, -1.0];
    let e = |x: f64| (-x.abs()).exp();
    let i0 = [1.0, 1.266_065_878 * e(1.0), 2.279_585_302 * e(2.0), 27.239_871_82 * e(5.0), 1.266_065_878 * e(1.0)];
    let i1 = [0.0, 0.565_159_104 * e(1.0), 1.590_636_855 * e(2.0), 24.335_642_14 * e(5.0), -0.565_159_104 * e(1.0)];
    assert_close(&unary("BesselI0e", &xs), &i0, 1e-9, "i0e");
    assert_close(&unary("BesselI1e", &xs), &i1, 1e-9, "i1e");
    // the series (below 20) and the asymptotic expansion (above) meet; √(2πx) e^{-x} I(x) → 1
    for op in ["BesselI0e", "BesselI1e"] {
        // 20 itself (the series) and the next double (the expansion)
        let v = unary(op, &[20.0, f64::from_bits(20.0f64.to_bits() + 1), 1e8]);
        assert!((v[0] - v[1]).abs() <= 1e-14 * v[0], "{op} at 20: {v:?}");
        assert!((v[2] * (2.0 * std::f64::consts::PI * 1e8).sqrt() - 1.0).abs() < 1e-8, "{op} at 1e8: {}", v[2]);
    }
    assert!(unary("BesselI0e", &[f64::NAN])[0].is_nan());
    assert_eq!(unary("BesselI0e", &[f64::INFINITY])[0], 0.0);
}

#[test]
fn scaled_bessel_gradients_match_finite_differences() {
    // both sides of 0 and of the switch at 20
    let x = t64(&[2, 3], vec![-3.0, -0.4, 0.7, 2.5, 19.9, 24.0]);
    check_grads(std::slice::from_ref(&x), |g, xs| g.op("BesselI0e", xs));
    check_grads(std::slice::from_ref(&x), |g, xs| g.op("BesselI1e", xs));
}

#[test]
fn interp_interval_finds_the_interval_of_each_point_as_a_linear_scan_does() {
    let x = vec![-1.0, 0.0, 0.25, 2.0, 3.5];
    // random points, every sample point, and both ends
    let mut q = rand_vec(40, 90, -1.0, 3.5);
    q.extend(&x);
    let scan = |v: f64| (0..x.len() - 1).rev().find(|&i| x[i] <= v).unwrap() as f64;
    let want: Vec<f64> = q.iter().map(|&v| scan(v).min(3.0)).collect();
    let mut g = Graph::new();
    for (tx, tq) in [(t64(&[5], x.clone()), t64(&[5, 9], q.clone())), (t32(&[5], x.clone()), t32(&[5, 9], q.clone()))] {
        let (tx, tq) = (g.constant(tx).unwrap(), g.constant(tq).unwrap());
        let i = g.op("_InterpInterval", &[tx, tq]).unwrap();
        assert_eq!(g.dtype_of(i).unwrap(), DType::Int64);
        assert_eq!(g.shape_of(i).unwrap().0, vec![5, 9]);
        assert_eq!(eval1(&g, &[], i).to_f64_vec(), want);
    }
}

#[test]
fn interp_interval_errors_name_the_point_and_the_node() {
    let mut g = Graph::new();
    let x = g.constant(t64(&[3], vec![0.0, 1.0, 2.0])).unwrap();
    let run_err = |g: &mut Graph, xs: Output, q: Vec<f64>| {
        let n = q.len();
        let tq = g.constant(t64(&[n], q)).unwrap();
        let i = g.op("_InterpInterval", &[xs, tq]).unwrap();
        eval(g, &[], &[i]).unwrap_err().to_string()
    };
    let e = run_err(&mut g, x, vec![0.5, 2.5]);
    assert!(e.contains("_InterpInterval") && e.contains("interpolation point 2 is 2.5, not in the range [0, 2]"), "{e}");
    let e = run_err(&mut g, x, vec![-0.1]);
    assert!(e.contains("interpolation point 1 is -0.1"), "{e}");
    let e = run_err(&mut g, x, vec![f64::NAN]);
    assert!(e.contains("interpolation point 1 is NaN"), "{e}");
    let flat = g.constant(t64(&[3], vec![0.0, 1.0, 1.0])).unwrap();
    let e = run_err(&mut g, flat, vec![0.5]);
    assert!(e.contains("increase strictly: point 2 is 1 and point 3 is 1"), "{e}");
    // build-time: a matrix or a single sample point, mixed dtypes
    let m = g.constant(t64(&[2, 2], vec![0.0; 4])).unwrap();
    let one = g.constant(t64(&[1], vec![0.0])).unwrap();
    let q32 = g.constant(t32(&[1], vec![0.0])).unwrap();
    for (xs, q) in [(m, x), (one, x)] {
        let e = g.op("_InterpInterval", &[xs, q]).unwrap_err().to_string();
        assert!(e.contains("_InterpInterval") && e.contains("at least 2 points"), "{e}");
    }
    let e = g.op("_InterpInterval", &[x, q32]).unwrap_err().to_string();
    assert!(e.contains("_InterpInterval") && e.contains("Float64") && e.contains("Float32"), "{e}");
    // the graph stays usable
    let q = g.constant(t64(&[2], vec![1.0, 2.0])).unwrap();
    let i = g.op("_InterpInterval", &[x, q]).unwrap();
    assert_eq!(eval1(&g, &[], i).to_f64_vec(), vec![1.0, 1.0]);
}
