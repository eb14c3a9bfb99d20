//! `Floor`, `FloorDiv` and `FloorMod` (TF's `tf.floor`, `tf.math.floordiv`,
//! `tf.math.floormod`). Oracles: for floats `f64::floor` of the quotient and a remainder
//! built from `rem_euclid` (always in `[0, |y|)`, moved into `(y, 0]` for a negative
//! divisor), for integers the same rules on `i64::rem_euclid` / `div_euclid`, plus
//! hand-checked values (Python's `-7 // 3 == -3`, `-7 % 3 == 2`, `7 % -3 == -2`); central
//! finite differences for `FloorMod`'s gradient; an emulated GPU for the placement flags.

mod common;
use common::*;
use oxiflow_core::autodiff::gradients;
use oxiflow_core::{DType, Graph, Layout, Output, Session, SessionOptions, Tensor};
use std::sync::{Arc, RwLock};

const CPU0: &str = "/job:localhost/replica:0/task:0/device:CPU:0";
const GPU0: &str = "/job:localhost/replica:0/task:0/device:GPU:0";

fn binary(op: &str, a: Tensor, b: Tensor) -> oxiflow_core::Result<Tensor> {
    let mut g = Graph::new();
    let (ca, cb) = (g.constant(a).unwrap(), g.constant(b).unwrap());
    let y = g.op(op, &[ca, cb]).unwrap();
    Ok(eval(&g, &[], &[y])?.remove(0))
}

/// Python's float `x % y`: the sign of `y`, magnitude below `|y|`.
fn py_fmod(x: f64, y: f64) -> f64 {
    let r = x.rem_euclid(y.abs());
    if y < 0.0 && r != 0.0 {
        r - y.abs()
    } else {
        r
    }
}
/// Python's integer `x % y` and `x // y` (y != 0).
fn py_imod(x: i64, y: i64) -> i64 {
    let r = x.rem_euclid(y.abs());
    if y < 0 && r != 0 {
        r - y.abs()
    } else {
        r
    }
}
fn py_idiv(x: i64, y: i64) -> i64 {
    (x - py_imod(x, y)) / y
}

fn ints32(dims: &[usize], v: &[i64]) -> Tensor {
    Tensor::from_vec(dims, v.iter().map(|&x| x as i32).collect(), Layout::RowMajor).unwrap()
}
fn ints64(dims: &[usize], v: &[i64]) -> Tensor {
    Tensor::from_vec(dims, v.to_vec(), Layout::RowMajor).unwrap()
}

#[test]
fn python_signs_by_hand() {
    let x = [-7i64, 7, -7, 7, 6, -6, 0, 5];
    let y = [3i64, -3, -3, 3, 3, 3, 4, 7];
    let div = [-3.0, -3.0, 2.0, 2.0, 2.0, -2.0, 0.0, 0.0];
    let rem = [2.0, -2.0, -1.0, 1.0, 0.0, 0.0, 0.0, 5.0];
    for mk in [ints32 as fn(&[usize], &[i64]) -> Tensor, ints64] {
        assert_eq!(binary("FloorDiv", mk(&[8], &x), mk(&[8], &y)).unwrap().to_f64_vec(), div);
        assert_eq!(binary("FloorMod", mk(&[8], &x), mk(&[8], &y)).unwrap().to_f64_vec(), rem);
    }
    let xf: Vec<f64> = x.iter().map(|&v| v as f64 + 0.5).collect();
    let yf: Vec<f64> = y.iter().map(|&v| v as f64).collect();
    // -6.5 % 3 = 2.5, 7.5 % -3 = -1.5, -6.5 % -3 = -0.5, 7.5 % 3 = 1.5, ...
    let want_rem = [2.5, -1.5, -0.5, 1.5, 0.5, 0.5, 0.5, 5.5];
    let want_div = [-3.0, -3.0, 2.0, 2.0, 2.0, -2.0, 0.0, 0.0];
    for mk in [t64 as fn(&[usize], Vec<f64>) -> Tensor, t32] {
        assert_eq!(binary("FloorMod", mk(&[8], xf.clone()), mk(&[8], yf.clone())).unwrap().to_f64_vec(), want_rem);
        assert_eq!(binary("FloorDiv", mk(&[8], xf.clone()), mk(&[8], yf.clone())).unwrap().to_f64_vec(), want_div);
    }
    let fl = {
        let mut g = Graph::new();
        let c = g.constant(t64(&[6], vec![-2.5, -2.0, -0.1, 0.0, 0.9, 3.0])).unwrap();
        let y = g.op("Floor", &[c]).unwrap();
        eval1(&g, &[], y).to_f64_vec()
    };
    assert_eq!(fl, vec![-3.0, -2.0, -1.0, 0.0, 0.0, 3.0]);
}

#[test]
fn floats_match_the_oracle_with_broadcasting_in_both_precisions() {
    let shapes: [(&[usize], &[usize]); 5] = [(&[3, 4], &[3, 4]), (&[3, 4], &[4]), (&[2, 1], &[1, 5]), (&[], &[6]), (&[6], &[])];
    for (k, (sa, sb)) in shapes.iter().enumerate() {
        let a = rand_vec(sa.iter().product(), 10 + k as u64, -20.0, 20.0);
        // divisors of both signs, |y| >= 0.5
        let b: Vec<f64> = rand_vec(sb.iter().product(), 20 + k as u64, 0.5, 6.0).iter().enumerate().map(|(i, &v)| if i % 2 == 0 { -v } else { v }).collect();
        let (dims, want_div) = naive_broadcast(&a, sa, &b, sb, |x, y| (x / y).floor());
        let (_, want_mod) = naive_broadcast(&a, sa, &b, sb, py_fmod);
        let got = binary("FloorDiv", t64(sa, a.clone()), t64(sb, b.clone())).unwrap();
        assert_eq!(got.dims(), &dims[..]);
        assert_eq!(got.to_f64_vec(), want_div, "FloorDiv f64 {sa:?} {sb:?}");
        let got = binary("FloorMod", t64(sa, a.clone()), t64(sb, b.clone())).unwrap();
        assert_eq!(got.dtype(), DType::Float64);
        assert_close(&got.to_f64_vec(), &want_mod, 1e-13, "FloorMod f64");
        for (i, (&r, &y)) in got.to_f64_vec().iter().zip(naive_broadcast(&a, sa, &b, sb, |_, y| y).1.iter()).enumerate() {
            assert!(r == 0.0 || (r < 0.0) == (y < 0.0), "element {i}: remainder {r} has not the sign of the divisor {y}");
            assert!(r.abs() < y.abs(), "element {i}: |{r}| >= |{y}|");
        }
        // Float32: the oracle on the rounded operands, computed in f64
        let (a32, b32): (Vec<f64>, Vec<f64>) = (a.iter().map(|&v| v as f32 as f64).collect(), b.iter().map(|&v| v as f32 as f64).collect());
        let got = binary("FloorMod", t32(sa, a.clone()), t32(sb, b.clone())).unwrap();
        assert_eq!(got.dtype(), DType::Float32);
        assert_close(&got.to_f64_vec(), &naive_broadcast(&a32, sa, &b32, sb, py_fmod).1, 1e-5, "FloorMod f32");
        let got = binary("FloorDiv", t32(sa, a), t32(sb, b)).unwrap();
        assert_eq!(got.to_f64_vec(), naive_broadcast(&a32, sa, &b32, sb, |x, y| ((x as f32) / (y as f32)).floor() as f64).1);
    }
    // IEEE division by zero for floats: inf and NaN, no error
    let q = binary("FloorDiv", t64(&[2], vec![1.0, -1.0]), t64(&[2], vec![0.0, 0.0])).unwrap().to_f64_vec();
    assert_eq!(q, vec![f64::INFINITY, f64::NEG_INFINITY]);
    assert!(binary("FloorMod", t64(&[1], vec![1.0]), t64(&[1], vec![0.0])).unwrap().to_f64_vec()[0].is_nan());
}

#[test]
fn integers_match_the_oracle_and_divide_by_zero_with_an_error() {
    let a: Vec<i64> = rand_vec(40, 3, -1000.0, 1000.0).iter().map(|v| v.floor() as i64).collect();
    let b: Vec<i64> = rand_vec(40, 4, 1.0, 30.0).iter().enumerate().map(|(i, v)| if i % 3 == 0 { -(*v as i64) } else { *v as i64 }).collect();
    let want_div: Vec<f64> = a.iter().zip(&b).map(|(&x, &y)| py_idiv(x, y) as f64).collect();
    let want_mod: Vec<f64> = a.iter().zip(&b).map(|(&x, &y)| py_imod(x, y) as f64).collect();
    for mk in [ints32 as fn(&[usize], &[i64]) -> Tensor, ints64] {
        let got = binary("FloorDiv", mk(&[5, 8], &a), mk(&[5, 8], &b)).unwrap();
        assert_eq!(got.dtype(), mk(&[1], &[1]).dtype());
        assert_eq!(got.to_f64_vec(), want_div);
        assert_eq!(binary("FloorMod", mk(&[5, 8], &a), mk(&[5, 8], &b)).unwrap().to_f64_vec(), want_mod);
        // x == (x // y) * y + x % y
        for i in 0..40 {
            assert_eq!(want_div[i] as i64 * b[i] + want_mod[i] as i64, a[i]);
        }
    }
    // broadcasting an integer divisor row
    let got = binary("FloorMod", ints64(&[2, 3], &[-5, 5, -5, 9, -9, 0]), ints64(&[3], &[3, -3, 2])).unwrap();
    assert_eq!(got.to_f64_vec(), vec![1.0, -1.0, 1.0, 0.0, 0.0, 0.0]);
    // MIN / -1 wraps instead of panicking; MIN % -1 is 0
    let q = binary("FloorDiv", ints32(&[1], &[i32::MIN as i64]), ints32(&[1], &[-1])).unwrap().to_f64_vec();
    assert_eq!(q, vec![i32::MIN as f64]);
    assert_eq!(binary("FloorMod", ints64(&[1], &[i64::MIN]), ints64(&[1], &[-1])).unwrap().to_f64_vec(), vec![0.0]);
    // division by zero: TF's error, naming the op and the node; the graph stays usable
    for op in ["FloorDiv", "FloorMod"] {
        for mk in [ints32 as fn(&[usize], &[i64]) -> Tensor, ints64] {
            let mut g = Graph::new();
            let (x, z) = (g.constant(mk(&[3], &[1, 2, 3])).unwrap(), g.constant(mk(&[3], &[1, 0, 1])).unwrap());
            let y = g.op(op, &[x, z]).unwrap();
            let name = g.node(y.node).unwrap().name.clone();
            let e = eval(&g, &[], &[y]).unwrap_err().to_string();
            assert!(e.contains("Integer division by zero") && e.contains(op) && e.contains(&name), "{e}");
            let ok = g.op(op, &[x, x]).unwrap();
            assert_eq!(eval1(&g, &[], ok).to_f64_vec(), if op == "FloorDiv" { vec![1.0; 3] } else { vec![0.0; 3] });
        }
    }
}

#[test]
fn bad_operands_fail_at_construction_naming_the_op() {
    let mut g = Graph::new();
    let i = g.constant(ints32(&[2], &[1, 2])).unwrap();
    let e = g.op("Floor", &[i]).unwrap_err().to_string();
    assert!(e.contains("Floor") && e.contains("Int32"), "{e}");
    let b = g.constant(Tensor::from_vec(&[2], vec![true, false], Layout::RowMajor).unwrap()).unwrap();
    for op in ["FloorDiv", "FloorMod"] {
        let e = g.op(op, &[b, b]).unwrap_err().to_string();
        assert!(e.contains(op) && e.contains("Bool"), "{e}");
        let (x, y) = (g.constant(rand_t(&[2, 3], 1, 1.0, 2.0)).unwrap(), g.constant(rand_t(&[4], 2, 1.0, 2.0)).unwrap());
        let e = g.op(op, &[x, y]).unwrap_err().to_string();
        assert!(e.contains(op) && e.contains("[2,3]") && e.contains("[4]"), "{e}");
        let f32x = g.constant(t32(&[2], vec![1.0, 2.0])).unwrap();
        let e = g.op(op, &[f32x, i]).unwrap_err().to_string();
        assert!(e.contains(op) && e.contains("Int32"), "{e}");
    }
}

/// Inputs whose quotients all stay at least 0.05 away from an integer (FloorMod's jumps),
/// or `None` for this seed.
fn away_from_jumps(sa: &[usize], sb: &[usize], seed: u64) -> Option<(Tensor, Tensor)> {
    let a = rand_vec(sa.iter().product(), seed, -5.0, 5.0);
    let b: Vec<f64> = rand_vec(sb.iter().product(), seed + 1, 0.7, 2.0).iter().enumerate().map(|(i, &v)| if i % 2 == 1 { -v } else { v }).collect();
    let (_, q) = naive_broadcast(&a, sa, &b, sb, |x, y| x / y);
    q.iter().all(|v| (0.05..0.95).contains(&(v - v.floor()))).then(|| (t64(sa, a), t64(sb, b)))
}

#[test]
fn floor_mod_gradient_matches_finite_differences_with_broadcasting() {
    let shapes: [(&[usize], &[usize]); 5] = [(&[2, 3], &[2, 3]), (&[2, 3], &[3]), (&[3], &[2, 3]), (&[2, 1], &[1, 3]), (&[], &[3])];
    for (k, (sa, sb)) in shapes.iter().enumerate() {
        // the first seed (deterministic) whose quotients are all clear of a jump
        let (a, b) = (0..200).find_map(|j| away_from_jumps(sa, sb, 100 + 10 * k as u64 + 1000 * j)).expect("inputs clear of jumps");
        check_grads(&[a.clone(), b.clone()], |g, xs| g.op("FloorMod", &[xs[0], xs[1]]));
        // the gradient is itself differentiable (FloorDiv passes none): second derivative 0
        check_second_grads(&[a, b], 1e-6, |g, xs| {
            let m = g.op("FloorMod", &[xs[0], xs[1]])?;
            g.op("Mul", &[m, m])
        });
    }
}

#[test]
fn floor_and_floor_div_pass_no_gradient_without_an_error() {
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[3], Some("x")).unwrap();
    let y = g.placeholder(DType::Float64, &[3], Some("y")).unwrap();
    let f = g.op("Floor", &[x]).unwrap();
    let q = g.op("FloorDiv", &[x, y]).unwrap();
    assert!(gradients(&mut g, &[f], &[x], None, false).unwrap()[0].is_none());
    assert!(gradients(&mut g, &[q], &[x, y], None, false).unwrap().iter().all(Option::is_none));
    // d/dx (floor(x) * x) = floor(x): only the direct path carries a gradient
    let p = g.op("Mul", &[f, x]).unwrap();
    let d = gradients(&mut g, &[p], &[x], None, false).unwrap()[0].unwrap();
    let xv = t64(&[3], vec![-1.5, 0.25, 2.75]);
    assert_eq!(eval1(&g, &[(x, xv)], d).to_f64_vec(), vec![-2.0, 0.0, 2.0]);
}

#[test]
fn gpu_flags_cover_floats_only_and_default_names_follow_tf_python() {
    let mut g = Graph::new();
    let (a, b) = (g.constant(rand_t(&[2, 3], 5, -4.0, 4.0)).unwrap(), g.constant(rand_t(&[3], 6, 1.0, 2.0)).unwrap());
    let (ia, ib) = (g.constant(ints64(&[3], &[-7, 7, 9])).unwrap(), g.constant(ints64(&[3], &[3, -3, 4])).unwrap());
    let outs: Vec<Output> = vec![
        g.op("Floor", &[a]).unwrap(),
        g.op("FloorDiv", &[a, b]).unwrap(),
        g.op("FloorMod", &[a, b]).unwrap(),
        g.op("FloorDiv", &[ia, ib]).unwrap(),
        g.op("FloorMod", &[ia, ib]).unwrap(),
    ];
    let names: Vec<String> = outs.iter().map(|o| g.node(o.node).unwrap().name.clone()).collect();
    assert_eq!(names, ["Floor", "floordiv", "FloorMod", "floordiv_1", "FloorMod_1"]);
    let cpu_vals: Vec<Vec<f64>> = eval(&g, &[], &outs).unwrap().iter().map(|t| t.to_f64_vec()).collect();
    let g = Arc::new(RwLock::new(g));
    let s = Session::new(g.clone(), SessionOptions { emulated_gpus: Some(1), ..Default::default() }).unwrap();
    let got = s.run(&[], &outs, &[], false).unwrap();
    for (k, name) in names.iter().enumerate() {
        assert_eq!(got.values[k].to_f64_vec(), cpu_vals[k], "{name}");
        let want = if k >= 3 { CPU0 } else { GPU0 };
        assert_eq!(s.assigned_device(outs[k].node).unwrap(), want, "{name}");
    }
}
