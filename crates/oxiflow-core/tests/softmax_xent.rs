//! `SoftmaxCrossEntropyWithLogits` (ops/loss.rs): its two outputs against the definition
//! computed naively in f64, its shape errors, unknown dimensions, and its gradients against
//! central finite differences (first and second order, through both outputs).

mod common;
use common::*;
use oxiflow_core::autodiff::gradients;
use oxiflow_core::shape::UNKNOWN;
use oxiflow_core::{DType, Graph, Layout, Output, Result, Tensor};

const OP: &str = "SoftmaxCrossEntropyWithLogits";

/// Per row of `c` classes: `-sum(l * log(softmax(x)))` and `softmax(x) - l`, in f64 with
/// log-sum-exp, from the definition.
fn naive(x: &[f64], l: &[f64], c: usize) -> (Vec<f64>, Vec<f64>) {
    let (mut loss, mut bp) = (Vec::new(), Vec::new());
    for (xr, lr) in x.chunks(c).zip(l.chunks(c)) {
        let m = xr.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let z: f64 = xr.iter().map(|v| (v - m).exp()).sum();
        let lse = m + z.ln();
        loss.push(xr.iter().zip(lr).map(|(v, w)| -w * (v - lse)).sum());
        bp.extend(xr.iter().zip(lr).map(|(v, w)| (v - lse).exp() - w));
    }
    (loss, bp)
}

/// Both outputs of the op on constants `x`, `l`.
fn run_xent(x: Tensor, l: Tensor) -> (Tensor, Tensor) {
    let mut g = Graph::new();
    let (cx, cl) = (g.constant(x).unwrap(), g.constant(l).unwrap());
    let loss = g.op(OP, &[cx, cl]).unwrap();
    let mut out = eval(&g, &[], &[loss, Output::new(loss.node, 1)]).unwrap();
    let bp = out.pop().unwrap();
    (out.pop().unwrap(), bp)
}

/// `n` random distributions over `c` classes (rows summing to 1), flattened.
fn distributions(n: usize, c: usize, seed: u64) -> Vec<f64> {
    let raw = rand_vec(n * c, seed, 0.0, 1.0);
    raw.chunks(c).flat_map(|r| r.iter().map(move |v| v / r.iter().sum::<f64>())).collect()
}

#[test]
fn loss_and_backprop_match_the_definition_in_both_float_types() {
    // rank 1, the MLP's 256 x 10, rank 3, and 300 x 100 (30,000 elements: sharded over the
    // intra-op threads where the machine has several)
    for dims in [&[7usize][..], &[256, 10], &[2, 3, 5], &[300, 100]] {
        let n: usize = dims.iter().product();
        let c = *dims.last().unwrap();
        let x = rand_vec(n, 31, -30.0, 30.0);
        let l = distributions(n / c, c, 32);
        let (want_loss, want_bp) = naive(&x, &l, c);
        let (loss, bp) = run_xent(t64(dims, x.clone()), t64(dims, l.clone()));
        assert_eq!((loss.dtype(), loss.dims(), bp.dims()), (DType::Float64, &dims[..dims.len() - 1], dims));
        assert_close(&loss.to_f64_vec(), &want_loss, 1e-13, "loss f64");
        assert_close(&bp.to_f64_vec(), &want_bp, 1e-13, "backprop f64");
        let (loss32, bp32) = run_xent(t32(dims, x), t32(dims, l));
        assert_eq!(loss32.dtype(), DType::Float32);
        // |loss| up to ~60 here: f32 rounding of the shifted logits and of the sum
        assert_close(&loss32.to_f64_vec(), &want_loss, 1e-5, "loss f32");
        let err = bp32.to_f64_vec().iter().zip(&want_bp).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        assert!(err < 1e-6, "backprop f32 off by {err}");
    }
}

#[test]
fn huge_logits_stay_finite_and_column_major_inputs_read_by_element() {
    let x = vec![1000.0, -2000.0, 3000.0, 0.0, 2999.0, 1.0];
    let l = vec![0.0, 0.5, 0.5, 1.0, 0.0, 0.0];
    // a 2 x 3 matrix given column-major: element [i, j] at i + 2j
    let col = |v: &[f64]| Tensor::from_vec(&[2, 3], (0..3).flat_map(|j| (0..2).map(move |i| v[i * 3 + j])).collect::<Vec<f64>>(), Layout::ColumnMajor).unwrap();
    let (loss, bp) = run_xent(col(&x), col(&l));
    let (want_loss, want_bp) = naive(&x, &l, 3);
    assert!(loss.to_f64_vec().iter().all(|v| v.is_finite()));
    assert_close(&loss.to_f64_vec(), &want_loss, 1e-13, "loss");
    assert_close(&bp.to_f64_vec(), &want_bp, 1e-13, "backprop");
}

#[test]
fn rows_of_no_classes_give_zero_loss() {
    let (loss, bp) = run_xent(t64(&[3, 0], vec![]), t64(&[3, 0], vec![]));
    assert_eq!((loss.dims(), loss.to_f64_vec()), (&[3usize][..], vec![0.0; 3]));
    assert_eq!(bp.dims(), &[3, 0]);
}

#[test]
fn bad_operands_fail_when_the_node_is_added() {
    let mut g = Graph::new();
    let x = g.constant(t64(&[2, 3], vec![0.0; 6])).unwrap();
    let wrong_shape = g.constant(t64(&[2, 4], vec![0.0; 8])).unwrap();
    let e = g.op(OP, &[x, wrong_shape]).unwrap_err().to_string();
    assert!(e.contains(OP) && e.contains("[2,3]") && e.contains("[2,4]"), "{e}");
    let l32 = g.constant(t32(&[2, 3], vec![0.0; 6])).unwrap();
    let e = g.op(OP, &[x, l32]).unwrap_err().to_string();
    assert!(e.contains(OP) && e.contains("Float32") && e.contains("Float64") && e.contains("labels"), "{e}");
    let s = g.constant(t64(&[], vec![1.0])).unwrap();
    let e = g.op(OP, &[s, s]).unwrap_err().to_string();
    assert!(e.contains(OP) && e.contains(">= 1 dimension"), "{e}");
    let i = g.constant(Tensor::from_vec(&[2, 3], vec![0i64; 6], Layout::RowMajor).unwrap()).unwrap();
    assert!(g.op(OP, &[i, i]).is_err(), "integer logits");
    // the graph is still usable
    let l = g.constant(t64(&[2, 3], vec![0.0, 1.0, 0.0, 1.0, 0.0, 0.0])).unwrap();
    let loss = g.op(OP, &[x, l]).unwrap();
    assert_close(&eval1(&g, &[], loss).to_f64_vec(), &[3f64.ln(); 2], 1e-15, "uniform logits");
}

#[test]
fn an_unknown_batch_dimension_runs_at_the_fed_size() -> Result<()> {
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[UNKNOWN, 4], None)?;
    let l = g.placeholder(DType::Float64, &[UNKNOWN, 4], None)?;
    let loss = g.op(OP, &[x, l])?;
    assert_eq!(g.shape_of(loss)?.0, vec![UNKNOWN]);
    let dx = gradients(&mut g, &[loss], &[x], None, false)?[0].expect("a gradient");
    let (xv, lv) = (rand_vec(12, 5, -2.0, 2.0), distributions(3, 4, 6));
    let out = eval(&g, &[(x, t64(&[3, 4], xv.clone())), (l, t64(&[3, 4], lv.clone()))], &[loss, dx])?;
    let (want_loss, want_bp) = naive(&xv, &lv, 4);
    assert_close(&out[0].to_f64_vec(), &want_loss, 1e-14, "loss");
    assert_close(&out[1].to_f64_vec(), &want_bp, 1e-14, "gradient: softmax - labels");
    Ok(())
}

fn xent_output(k: usize) -> impl Fn(&mut Graph, &[Output]) -> Result<Output> {
    move |g, xs| Ok(Output::new(g.op(OP, &[xs[0], xs[1]])?.node, k))
}

#[test]
fn gradients_of_both_outputs_match_finite_differences() {
    let x = rand_t(&[3, 4], 41, -2.0, 2.0);
    let l = t64(&[3, 4], distributions(3, 4, 42));
    // through the loss: logits and labels
    check_grads(&[x.clone(), l.clone()], xent_output(0));
    // through backprop (what a second derivative meets): logits and labels
    check_grads(&[x.clone(), l.clone()], xent_output(1));
    check_second_grads(&[x.clone(), l.clone()], 1e-5, xent_output(0));
    let r1 = rand_t(&[5], 43, -2.0, 2.0);
    check_grads(&[r1.clone(), t64(&[5], distributions(1, 5, 44))], xent_output(0));
}

#[test]
fn labels_through_stop_gradient_get_none_and_the_logits_gradient_is_softmax_minus_labels() -> Result<()> {
    let mut g = Graph::new();
    let (xv, lv) = (rand_vec(8, 51, -3.0, 3.0), distributions(2, 4, 52));
    let x = g.placeholder(DType::Float64, &[2, 4], None)?;
    let l = g.placeholder(DType::Float64, &[2, 4], None)?;
    let stopped = g.op("StopGradient", &[l])?;
    let loss = g.op(OP, &[x, stopped])?;
    let total = g.op("Sum", &[loss])?;
    let before = g.len();
    let d = gradients(&mut g, &[total], &[x, l], None, false)?;
    assert!(d[1].is_none(), "no gradient through StopGradient");
    // the loss's gradient: Sum's (Reshape, BroadcastTo) then ExpandDims and Mul, no
    // log-softmax for the stopped labels
    assert!(g.len() - before <= 6, "{} nodes added", g.len() - before);
    let got = eval1(&g, &[(x, t64(&[2, 4], xv.clone())), (l, t64(&[2, 4], lv.clone()))], d[0].unwrap());
    assert_close(&got.to_f64_vec(), &naive(&xv, &lv, 4).1, 1e-14, "softmax - labels");
    Ok(())
}
