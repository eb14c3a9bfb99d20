//! `autodiff::GradientRun`: a backward pass that stops at custom-gradient nodes (`IdentityN`
//! with `_gradient_op_type`, as `tf.custom_gradient` makes) for the caller to build their
//! input gradients. Values against closed forms in Rust; the scopes left open while stopped;
//! rollback on every error.

mod common;
use common::*;
use oxiflow_core::autodiff::{gradients, GradientRun, GradientStep, CUSTOM_GRADIENT_ATTR};
use oxiflow_core::{DType, Graph, NodeSpec, Output};

/// `x` (Float64 [3]), `y = IdentityN(sin x, x)[0]` marked custom, `z = cos y`.
fn fixture(g: &mut Graph) -> (Output, Output, Output) {
    let x = g.placeholder(DType::Float64, &[3], Some("x")).unwrap();
    let s = g.op("Sin", &[x]).unwrap();
    let y = g.op_spec(NodeSpec::new("IdentityN", &[s, x]).attr(CUSTOM_GRADIENT_ATTR, "CustomGradient-1")).unwrap();
    let z = g.op("Cos", &[y]).unwrap();
    (x, y, z)
}

fn expect_custom(step: GradientStep) -> (usize, Vec<Option<Output>>) {
    match step {
        GradientStep::Custom { node, out_grads } => (node, out_grads),
        GradientStep::Done(_) => panic!("the pass did not stop at the custom node"),
    }
}

#[test]
fn the_pass_stops_at_the_custom_node_and_uses_the_callers_gradient() {
    let mut g = Graph::new();
    let (x, y, z) = fixture(&mut g);
    let mut run = GradientRun::start(&mut g, &[z], &[x], None, true).unwrap();
    let (node, out_grads) = expect_custom(run.resume(&mut g, None).unwrap());
    assert_eq!(node, y.node);
    assert_eq!(out_grads.len(), 2, "one entry per output of IdentityN");
    let dy = out_grads[0].expect("the gradient reaching y");
    assert!(out_grads[1].is_none(), "nothing consumes the pass-through of x");
    // the caller's nodes go into the open scopes: gradients/IdentityN_grad, colocated
    let three = g.scalar(DType::Float64, 3.0).unwrap();
    let dx = g.op("Mul", &[dy, three]).unwrap();
    let n = g.node(dx.node).unwrap();
    assert!(n.name.starts_with("gradients/IdentityN_grad/"), "{}", n.name);
    assert_eq!(n.colocation, vec!["loc:@IdentityN".to_string()]);
    let done = run.resume(&mut g, Some(&[None, Some(dx)])).unwrap();
    let GradientStep::Done(res) = done else { panic!("not done") };
    let grad = res[0].unwrap();
    // scopes closed again
    let after = g.op("Exp", &[x]).unwrap();
    let a = g.node(after.node).unwrap();
    assert_eq!(a.name, "Exp");
    assert!(a.colocation.is_empty());
    // d cos(y)/dx with dy/dx := 3 (the custom rule), not cos(x) (Sin's own gradient)
    let xv = rand_t(&[3], 7, -1.0, 1.0);
    let want: Vec<f64> = xv.to_f64_vec().iter().map(|&v| -v.sin().sin() * 3.0).collect();
    assert_close(&eval1(&g, &[(x, xv)], grad).to_f64_vec(), &want, 1e-15, "custom chain");
    assert!(run.resume(&mut g, None).unwrap_err().to_string().contains("already complete"));
}

#[test]
fn plain_gradients_refuse_a_custom_node_and_leave_the_graph_as_it_was() {
    let mut g = Graph::new();
    let (x, _, z) = fixture(&mut g);
    let len = g.len();
    let e = gradients(&mut g, &[z], &[x], None, false).unwrap_err();
    assert!(matches!(e, oxiflow_core::OxiflowError::Unimplemented(_)), "{e:?}");
    assert!(e.to_string().contains("IdentityN 'IdentityN' has a custom gradient"), "{e}");
    assert_eq!(g.len(), len);
    assert_eq!(g.op("Exp", &[x]).map(|o| g.node(o.node).unwrap().name.clone()).unwrap(), "Exp");
    // an unmarked IdentityN passes gradients through
    let s = g.op("Sin", &[x]).unwrap();
    let id = g.op("IdentityN", &[s, x]).unwrap();
    let d = gradients(&mut g, &[id], &[x], None, false).unwrap()[0].unwrap();
    let xv = rand_t(&[3], 8, -1.0, 1.0);
    let want: Vec<f64> = xv.to_f64_vec().iter().map(|v| v.cos()).collect();
    assert_close(&eval1(&g, &[(x, xv)], d).to_f64_vec(), &want, 1e-15, "IdentityN pass-through");
}

#[test]
fn bad_supplied_gradients_abort_the_pass_and_remove_the_callers_nodes() {
    type Supply = fn(Output, Output) -> Vec<Option<Output>>;
    let cases: [(Supply, &str); 3] = [
        (|dx, _| vec![Some(dx)], "got 1 gradients for its 2 inputs"),
        (|_, wrong| vec![None, Some(wrong)], "custom gradient of IdentityN 'IdentityN' for input 1 has dtype Float64 and shape [2], expected Float64 and [3]"),
        (|_, _| Vec::new(), "got 0 gradients"),
    ];
    for (supply, msg) in cases {
        let mut g = Graph::new();
        let (x, _, z) = fixture(&mut g);
        let len = g.len();
        let mut run = GradientRun::start(&mut g, &[z], &[x], None, true).unwrap();
        let (_, out_grads) = expect_custom(run.resume(&mut g, None).unwrap());
        let dx = g.op("Neg", &[out_grads[0].unwrap()]).unwrap();
        let wrong = g.constant(t64(&[2], vec![1.0, 2.0])).unwrap();
        let e = run.resume(&mut g, Some(&supply(dx, wrong))).unwrap_err().to_string();
        assert!(e.contains(msg), "{e}");
        assert_eq!(g.len(), len, "nodes left after {msg}");
        let after = g.op("Exp", &[x]).unwrap();
        let a = g.node(after.node).unwrap();
        assert_eq!(a.name, "Exp", "name scope left open after {msg}");
        assert!(a.colocation.is_empty(), "colocation left open after {msg}");
        assert!(run.resume(&mut g, None).is_err());
    }
    // resuming without gradients while stopped, and abandoning a stopped pass
    let mut g = Graph::new();
    let (x, _, z) = fixture(&mut g);
    let len = g.len();
    let mut run = GradientRun::start(&mut g, &[z], &[x], None, false).unwrap();
    expect_custom(run.resume(&mut g, None).unwrap());
    assert!(run.resume(&mut g, None).unwrap_err().to_string().contains("no gradients supplied"));
    assert_eq!(g.len(), len);
    let mut run = GradientRun::start(&mut g, &[z], &[x], None, false).unwrap();
    let (_, og) = expect_custom(run.resume(&mut g, None).unwrap());
    g.op("Neg", &[og[0].unwrap()]).unwrap();
    run.abort(&mut g);
    assert_eq!(g.len(), len);
    let e = g.op("Exp", &[x]).unwrap();
    assert_eq!(g.node(e.node).unwrap().name, "Exp", "name scope left open by abort");
}
