//! `autodiff::gradients`: TF's names and scopes, colocation, variables, summed paths,
//! unreachable inputs, grad_ys, and scope restoration on errors.

mod common;
use common::*;
use oxiflow_core::autodiff::gradients;
use oxiflow_core::eval::{evaluate, HostState};
use oxiflow_core::graph::DeviceScope;
use oxiflow_core::{DType, DeviceSpec, Graph, Output};
use std::sync::Arc;

fn names(g: &Graph) -> Vec<String> {
    g.nodes().iter().map(|n| n.name.clone()).collect()
}

#[test]
fn gradient_nodes_get_tf_names() {
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[3], Some("x")).unwrap();
    let s = g.op("Sin", &[x]).unwrap();
    let c = g.op("Cos", &[s]).unwrap();
    let dx = gradients(&mut g, &[c], &[x], None, false).unwrap()[0].unwrap();
    for name in [
        "gradients/grad_ys_0",
        "gradients/Cos_grad/Neg",
        "gradients/Cos_grad/Sin",
        "gradients/Cos_grad/mul",
        "gradients/Sin_grad/Cos",
        "gradients/Sin_grad/mul",
    ] {
        assert!(g.node_by_name(name).is_some(), "{name} missing from {:?}", names(&g));
    }
    assert_eq!(g.node(dx.node).unwrap().name, "gradients/Sin_grad/mul");
    assert_eq!(g.node(g.node_by_name("gradients/grad_ys_0").unwrap()).unwrap().op.name, "OnesLike");
    let xv = rand_t(&[3], 1, -1.0, 1.0);
    let want: Vec<f64> = xv.to_f64_vec().iter().map(|&v| -v.sin().sin() * v.cos()).collect();
    assert_close(&eval1(&g, &[(x, xv)], dx).to_f64_vec(), &want, 1e-15, "d cos(sin x)");
    // A second call opens gradients_1.
    gradients(&mut g, &[c], &[x], None, false).unwrap();
    assert!(g.node_by_name("gradients_1/Cos_grad/Sin").is_some());
    assert!(g.node_by_name("gradients_1/grad_ys_0").is_some());
    // The scope is closed afterwards.
    let after = g.op("Exp", &[x]).unwrap();
    assert_eq!(g.node(after.node).unwrap().name, "Exp");
}

#[test]
fn several_paths_are_summed_with_one_addn() {
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[2, 2], Some("x")).unwrap();
    let s = g.op("Sin", &[x]).unwrap();
    let m = g.op("Mul", &[s, x]).unwrap();
    let y = g.op("Add", &[m, x]).unwrap();
    let dx = gradients(&mut g, &[y], &[x], None, false).unwrap()[0].unwrap();
    let addn = g.node(dx.node).unwrap();
    assert_eq!(addn.op.name, "AddN");
    assert_eq!(addn.name, "gradients/AddN");
    assert_eq!(addn.inputs.len(), 3);
    let xv = rand_t(&[2, 2], 2, -1.0, 1.0);
    let want: Vec<f64> = xv.to_f64_vec().iter().map(|&v| v.cos() * v + v.sin() + 1.0).collect();
    assert_close(&eval1(&g, &[(x, xv)], dx).to_f64_vec(), &want, 1e-15, "three paths");
}

#[test]
fn a_scalar_loss_is_seeded_by_a_constant_and_its_gradient_step_skips_it() {
    // TF's `_DefaultGradYs` seeds with `fill(shape(y), 1)`, a constant once Grappler folds
    // the known shape: the step fetching the gradient need not compute the loss itself.
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float32, &[3], Some("x")).unwrap();
    let e = g.op("Exp", &[x]).unwrap();
    let loss = g.op_spec(oxiflow_core::graph::NodeSpec::new("Sum", &[e]).attr("axis", vec![0i64])).unwrap();
    let dx = gradients(&mut g, &[loss], &[x], None, false).unwrap()[0].unwrap();
    let seed = g.node(g.node_by_name("gradients/grad_ys_0").unwrap()).unwrap();
    assert_eq!(seed.op.name, "Const");
    assert_eq!(g.output_type(Output::new(seed.id, 0)).unwrap().dtype, DType::Float32);
    let fed = std::collections::HashSet::from([x]);
    let needed = oxiflow_core::eval::needed_nodes(&g, &[dx], &[], &fed).unwrap();
    assert!(needed.contains(&e.node) && !needed.contains(&loss.node), "{needed:?}");
    let xv = t32(&[3], vec![0.5, -1.0, 2.0]);
    let want: Vec<f64> = [0.5f32, -1.0, 2.0].iter().map(|&v| v.exp() as f64).collect();
    assert_close(&eval1(&g, &[(x, xv)], dx).to_f64_vec(), &want, 1e-6, "d sum(exp x)");
}

#[test]
fn several_ys_and_explicit_grad_ys() {
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[2], Some("x")).unwrap();
    let y1 = g.op("Square", &[x]).unwrap();
    let y2 = g.op("Exp", &[x]).unwrap();
    let xv = t64(&[2], vec![0.3, -0.7]);
    let d = gradients(&mut g, &[y1, y2], &[x], None, false).unwrap()[0].unwrap();
    let want: Vec<f64> = xv.to_f64_vec().iter().map(|&v| 2.0 * v + v.exp()).collect();
    assert_close(&eval1(&g, &[(x, xv.clone())], d).to_f64_vec(), &want, 1e-15, "sum over ys");
    let w = g.constant(t64(&[2], vec![3.0, -2.0])).unwrap();
    let d = gradients(&mut g, &[y1], &[x], Some(&[w]), false).unwrap()[0].unwrap();
    assert_close(&eval1(&g, &[(x, xv)], d).to_f64_vec(), &[3.0 * 0.6, -2.0 * -1.4], 1e-15, "grad_ys");
    // Wrong grad_ys: length, dtype or shape.
    let len = g.len();
    let w32 = g.constant(t32(&[2], vec![1.0, 1.0])).unwrap();
    let w3 = g.constant(t64(&[3], vec![1.0; 3])).unwrap();
    assert!(gradients(&mut g, &[y1], &[x], Some(&[w, w]), false).is_err());
    assert!(gradients(&mut g, &[y1], &[x], Some(&[w32]), false).is_err());
    assert!(gradients(&mut g, &[y1], &[x], Some(&[w3]), false).is_err());
    assert!(gradients(&mut g, &[Output::new(999, 0)], &[x], None, false).is_err());
    assert_eq!(g.len(), len + 2);
    // dy/dy is grad_ys.
    let d = gradients(&mut g, &[y1], &[y1], None, false).unwrap()[0].unwrap();
    assert_eq!(g.node(d.node).unwrap().op.name, "OnesLike");
}

#[test]
fn unreachable_x_gets_none() {
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[2], Some("x")).unwrap();
    let z = g.placeholder(DType::Float64, &[2], Some("z")).unwrap();
    let y = g.op("Sin", &[x]).unwrap();
    let later = g.op("Cos", &[y]).unwrap(); // depends on x but not an ancestor of y
    let r = gradients(&mut g, &[y], &[z, x, later], None, false).unwrap();
    assert_eq!(r[0], None);
    assert!(r[1].is_some());
    assert_eq!(r[2], None);
    // Nothing was differentiated for z or `later`.
    assert!(g.node_by_name("gradients/Cos_grad/Neg").is_none());
}

#[test]
fn gradients_reach_variables_through_their_read_snapshot() {
    let mut g = Graph::new();
    let init = rand_t(&[2, 3], 3, -1.0, 1.0);
    let var = g.variable(init.clone(), None, true).unwrap();
    let w = g.constant(rand_t(&[3, 2], 4, -1.0, 1.0)).unwrap();
    let v = Output::new(var, 0);
    let p = g.op("MatMul", &[v, w]).unwrap(); // reads Variable/read
    let t = g.op("Tanh", &[p]).unwrap();
    let sq = g.op("Square", &[v]).unwrap();
    let s1 = g.op("Sum", &[t]).unwrap();
    let s2 = g.op("Sum", &[sq]).unwrap();
    let loss = g.op("Add", &[s1, s2]).unwrap();
    let dv = gradients(&mut g, &[loss], &[v], None, false).unwrap()[0].expect("gradient of the variable");
    assert_eq!(g.shape_of(dv).unwrap().0, vec![2, 3]);
    assert!(g.node_by_name("gradients/Variable/read_grad").is_none(), "Identity's gradient adds no node");
    let state = HostState::default();
    let info = g.variable_info(var).unwrap().clone();
    evaluate(&g, &[], &[], &[info.initializer], &state).unwrap();
    let analytic = evaluate(&g, &[], &[dv], &[], &state).unwrap().remove(0).to_f64_vec();
    let base = init.to_f64_vec();
    let eps = 1e-6;
    for j in 0..base.len() {
        let at = |d: f64| {
            let mut vv = base.clone();
            vv[j] += d;
            state.0.lock().unwrap().insert(var, t64(&[2, 3], vv));
            evaluate(&g, &[], &[loss], &[], &state).unwrap()[0].to_f64_vec()[0]
        };
        let num = (at(eps) - at(-eps)) / (2.0 * eps);
        assert_close(&[analytic[j]], &[num], 1e-6, "variable gradient");
    }
}

#[test]
fn colocate_puts_gradient_ops_with_their_forward_ops() {
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[2], Some("x")).unwrap();
    g.push_device(DeviceScope::Spec(DeviceSpec::parse("/device:GPU:0").unwrap()));
    let s = g.op("Sin", &[x]).unwrap();
    let m = g.op("Mul", &[s, s]).unwrap();
    g.pop_device().unwrap();
    let gpu = g.node(s.node).unwrap().requested_device.clone();
    assert_eq!(gpu, DeviceSpec::parse("/device:GPU:0").unwrap());
    // An outer CPU scope does not apply inside colocate_with.
    g.push_device(DeviceScope::Spec(DeviceSpec::parse("/cpu:0").unwrap()));
    gradients(&mut g, &[m], &[x], None, true).unwrap();
    g.pop_device().unwrap();
    let mut checked = 0;
    for n in g.nodes() {
        let fwd = if n.name.starts_with("gradients/Sin_grad/") || n.name == "gradients/AddN" {
            "Sin"
        } else if n.name.starts_with("gradients/mul_grad/") || n.name == "gradients/grad_ys_0" {
            "mul"
        } else {
            continue;
        };
        assert_eq!(n.colocation, vec![format!("loc:@{fwd}")], "{}", n.name);
        assert_eq!(n.requested_device, gpu, "{}", n.name);
        checked += 1;
    }
    // grad_ys_0, mul_grad/{mul, mul_1}, AddN (two paths into Sin), Sin_grad/{Cos, mul}
    assert_eq!(checked, 6, "{:?}", names(&g));
    assert!(g.node_by_name("gradients/AddN").is_some());
}

#[test]
fn without_colocate_gradient_ops_take_the_active_scope() {
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[2], Some("x")).unwrap();
    g.push_device(DeviceScope::Spec(DeviceSpec::parse("/device:GPU:0").unwrap()));
    let s = g.op("Sin", &[x]).unwrap();
    g.pop_device().unwrap();
    g.push_device(DeviceScope::Spec(DeviceSpec::parse("/cpu:0").unwrap()));
    gradients(&mut g, &[s], &[x], None, false).unwrap();
    g.pop_device().unwrap();
    let cpu = DeviceSpec::parse("/cpu:0").unwrap();
    let grads: Vec<_> = g.nodes().iter().filter(|n| n.name.starts_with("gradients/")).collect();
    assert_eq!(grads.len(), 3);
    for n in grads {
        assert!(n.colocation.is_empty(), "{}", n.name);
        assert_eq!(n.requested_device, cpu, "{}", n.name);
    }
}

#[test]
fn colocating_with_a_variable_read_uses_the_variable_group() {
    let mut g = Graph::new();
    let var = g.variable(t64(&[2], vec![1.0, 2.0]), Some("w"), true).unwrap();
    let y = g.op("Square", &[Output::new(var, 0)]).unwrap();
    let d = gradients(&mut g, &[y], &[Output::new(var, 0)], None, true).unwrap()[0].unwrap();
    let n = g.node(d.node).unwrap();
    assert_eq!(n.name, "gradients/Square_grad/mul_1");
    assert_eq!(n.colocation, vec!["loc:@Square".to_string()]);
}

#[test]
fn scopes_are_restored_when_a_gradient_fails() {
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[2], Some("x")).unwrap();
    let y = g.op("Exp", &[x]).unwrap();
    // A device function that refuses gradient ops makes the backward pass fail half-way.
    let refuse = |n: &oxiflow_core::graph::NodeDef| -> Result<String, String> {
        if n.name.contains("_grad/") {
            Err("no gradients here".into())
        } else {
            Ok(String::new())
        }
    };
    g.push_device(DeviceScope::Function(Arc::new(refuse)));
    let err = gradients(&mut g, &[y], &[x], None, false).unwrap_err();
    assert!(err.to_string().contains("no gradients here"), "{err}");
    g.pop_device().unwrap();
    let after = g.op("Sin", &[x]).unwrap();
    let n = g.node(after.node).unwrap();
    assert_eq!(n.name, "Sin", "name scope left open");
    assert!(n.colocation.is_empty(), "colocation scope left open");
    // The graph stays usable: a new call works and opens the next scope.
    let d = gradients(&mut g, &[y], &[x], None, true).unwrap()[0].unwrap();
    assert!(g.node(d.node).unwrap().name.starts_with("gradients_1/"));
    let xv = t64(&[2], vec![0.1, 0.2]);
    assert_close(&eval1(&g, &[(x, xv)], d).to_f64_vec(), &[0.1f64.exp(), 0.2f64.exp()], 1e-15, "exp'");
}

/// TF's `LookupError` for an op with no gradient that is not marked not-differentiable; the
/// graph is left exactly as it was, and a later `gradients` call works.
#[test]
fn no_gradient_defined_is_an_error_and_rolls_back() {
    let mut g = Graph::new();
    let v = g.variable(oxiflow_core::Tensor::scalar(1.0f64), Some("v"), true).unwrap();
    let lr = g.scalar(DType::Float64, 0.1).unwrap();
    let d = g.placeholder(DType::Float64, &[], Some("d")).unwrap();
    let up = g.op("ApplyGradientDescent", &[Output::new(v, 0), lr, d]).unwrap();
    let y = g.op("Sin", &[up]).unwrap();
    let before = names(&g);
    let e = gradients(&mut g, &[y], &[d], None, false).unwrap_err().to_string();
    assert!(e.contains("No gradient defined for operation 'ApplyGradientDescent' (op type: ApplyGradientDescent)"), "{e}");
    assert_eq!(names(&g), before);
    // not-differentiable ops pass no gradient silently (TF's NotDifferentiable)
    let c = g.op("Greater", &[d, lr]).unwrap();
    let s = g.op_spec(oxiflow_core::NodeSpec::new("SelectV2", &[c, d, lr])).unwrap();
    let dd = gradients(&mut g, &[s], &[d], None, false).unwrap();
    assert!(dd[0].is_some());
}

/// The ops the registry marks not differentiable are TF's: its `ops.NotDifferentiable`
/// registrations for the ops Oxiflow has (`math_grad.py`: the comparisons, `ArgMax`,
/// `ArgMin`, `FloorDiv`; `array_grad.py`: `OnesLike`, `ZerosLike`, `StopGradient`,
/// `Placeholder`; `random_grad.py`:
/// `RandomStandardNormal`, `RandomUniform`; `state_grad.py`: `Assign`, `VariableV2`;
/// `control_flow_grad.py`: `NoOp`; `Const`), plus `Floor`, whose registered `_FloorGrad`
/// returns `None`. Every other op either has a gradient function or is an error to
/// differentiate through.
#[test]
fn the_ops_marked_not_differentiable_are_tfs() {
    use oxiflow_core::ops::{lookup, registered, Gradient};
    let tf: &[&str] = &[
        "Less",
        "LessEqual",
        "Greater",
        "GreaterEqual",
        "Equal",
        "ArgMax",
        "ArgMin",
        "FloorDiv",
        "OnesLike",
        "ZerosLike",
        "StopGradient",
        "Placeholder",
        "RandomStandardNormal",
        "RandomUniform",
        "Assign",
        "VariableV2",
        "NoOp",
        "Const",
        "Floor",
        // array_grad.py: ops.NotDifferentiable("Where")
        "Where",
        // bitwise_ops.py: ops.NotDifferentiable("Invert")
        "Invert",
        // array_grad.py: ops.NotDifferentiable("Shape")
        "Shape",
    ];
    let marked: Vec<&str> = registered().into_iter().filter(|n| matches!(lookup(n).unwrap().grad, Gradient::NotDifferentiable)).collect();
    let mut want = tf.to_vec();
    want.sort_unstable();
    assert_eq!(marked, want);
    assert!(matches!(lookup("PlaceholderWithDefault").unwrap().grad, Gradient::Fn(_)));
    assert!(matches!(lookup("ApplyAdam").unwrap().grad, Gradient::Undefined));
}

// ---------------------------------------------------------------- functional `If`

use oxiflow_core::function::Function;
use oxiflow_core::ops::AttrValue;
use oxiflow_core::{NodeSpec, Tensor};

/// then: `sin(x) * y`; else: `x * x + y` (two inputs of shape [3], one output).
fn branch(then: bool) -> Arc<Function> {
    let mut f = Graph::new();
    let x = f.placeholder(DType::Float64, &[3], Some("x")).unwrap();
    let y = f.placeholder(DType::Float64, &[3], Some("y")).unwrap();
    let out = if then {
        let s = f.op("Sin", &[x]).unwrap();
        f.op("Mul", &[s, y]).unwrap()
    } else {
        let sq = f.op("Mul", &[x, x]).unwrap();
        f.op("Add", &[sq, y]).unwrap()
    };
    Arc::new(Function::new(f, vec![x, y], vec![out]).unwrap())
}

fn if_node(g: &mut Graph, pred: Output, args: &[Output], then_f: Arc<Function>, else_f: Arc<Function>) -> oxiflow_core::Result<Output> {
    let mut inputs = vec![pred];
    inputs.extend_from_slice(args);
    g.op_spec(NodeSpec::new("If", &inputs).attr("then_branch", AttrValue::Func(then_f)).attr("else_branch", AttrValue::Func(else_f)))
}

#[test]
fn if_runs_the_branch_its_condition_picks() {
    let (xv, yv) = (rand_t(&[3], 31, -1.0, 1.0), rand_t(&[3], 32, -1.0, 1.0));
    let (xs, ys) = (xv.to_f64_vec(), yv.to_f64_vec());
    let mut g = Graph::new();
    let p = g.placeholder(DType::Bool, &[], Some("p")).unwrap();
    let (x, y) = (g.constant(xv.clone()).unwrap(), g.constant(yv.clone()).unwrap());
    let o = if_node(&mut g, p, &[x, y], branch(true), branch(false)).unwrap();
    let then_want: Vec<f64> = (0..3).map(|i| xs[i].sin() * ys[i]).collect();
    let else_want: Vec<f64> = (0..3).map(|i| xs[i] * xs[i] + ys[i]).collect();
    assert_eq!(eval1(&g, &[(p, Tensor::scalar(true))], o).to_f64_vec(), then_want);
    assert_eq!(eval1(&g, &[(p, Tensor::scalar(false))], o).to_f64_vec(), else_want);
}

#[test]
fn if_runs_only_the_taken_branch() {
    // else_branch fails when it runs (an index out of range): a run taking then_branch never
    // sees it, one taking else_branch names the branch and the failing op
    let mut f = Graph::new();
    let x = f.placeholder(DType::Float64, &[3], Some("x")).unwrap();
    let bad_idx = f.constant(Tensor::from_vec(&[1], vec![7i64], oxiflow_core::Layout::RowMajor).unwrap()).unwrap();
    let gathered = f.op("GatherV2", &[x, bad_idx]).unwrap();
    // shape [1] tiled to [3], the other branch's shape
    let t = f.op_spec(NodeSpec::new("Tile", &[gathered]).attr("multiples", vec![3i64])).unwrap();
    let else_f = Arc::new(Function::new(f, vec![x], vec![t]).unwrap());
    let mut h = Graph::new();
    let hx = h.placeholder(DType::Float64, &[3], Some("x")).unwrap();
    let neg = h.op("Neg", &[hx]).unwrap();
    let then_f = Arc::new(Function::new(h, vec![hx], vec![neg]).unwrap());
    let mut g = Graph::new();
    let p = g.placeholder(DType::Bool, &[], Some("p")).unwrap();
    let c = g.constant(t64(&[3], vec![1.0, 2.0, 3.0])).unwrap();
    let o = if_node(&mut g, p, &[c], then_f, else_f).unwrap();
    assert_eq!(eval1(&g, &[(p, Tensor::scalar(true))], o).to_f64_vec(), vec![-1.0, -2.0, -3.0]);
    let e = eval(&g, &[(p, Tensor::scalar(false))], &[o]).unwrap_err().to_string();
    assert!(e.contains("If") && e.contains("else_branch") && e.contains("GatherV2"), "{e}");
}

#[test]
fn if_gradients_match_finite_differences() {
    for taken in [true, false] {
        let (a, b) = (rand_t(&[3], 33, -1.0, 1.0), rand_t(&[3], 34, -1.0, 1.0));
        check_grads(&[a.clone(), b.clone()], move |g, xs| {
            let p = g.constant(Tensor::scalar(taken))?;
            if_node(g, p, xs, branch(true), branch(false))
        });
        // gradients of gradients: the gradient of If is an If of the branches' gradients
        check_second_grads(&[a, b], 1e-5, move |g, xs| {
            let p = g.constant(Tensor::scalar(taken))?;
            if_node(g, p, xs, branch(true), branch(false))
        });
    }
}

#[test]
fn if_refuses_branches_that_disagree() {
    let mut g = Graph::new();
    let p = g.placeholder(DType::Bool, &[], Some("p")).unwrap();
    let x = g.constant(t64(&[3], vec![1.0, 2.0, 3.0])).unwrap();
    let y = g.constant(t64(&[2], vec![1.0, 2.0])).unwrap();
    // input shapes the branches do not take
    let e = if_node(&mut g, p, &[x, y], branch(true), branch(false)).unwrap_err().to_string();
    assert!(e.contains("If") && e.contains("input 1") && e.contains("[3]") && e.contains("[2]"), "{e}");
    // a branch returning another shape
    let mut f = Graph::new();
    let (fx, fy) = (f.placeholder(DType::Float64, &[3], Some("x")).unwrap(), f.placeholder(DType::Float64, &[3], Some("y")).unwrap());
    let s = f.op("Sum", &[fx]).unwrap();
    let sum_f = Arc::new(Function::new(f, vec![fx, fy], vec![s]).unwrap());
    let e = if_node(&mut g, p, &[x, x], branch(true), sum_f).unwrap_err().to_string();
    assert!(e.contains("output 0") && e.contains("[3]") && e.contains("[]"), "{e}");
    // a non-Bool condition
    let e = if_node(&mut g, x, &[x, x], branch(true), branch(false)).unwrap_err().to_string();
    assert!(e.contains("Bool scalar"), "{e}");
    // the graph is still usable
    let o = if_node(&mut g, p, &[x, x], branch(true), branch(false)).unwrap();
    assert_eq!(eval1(&g, &[(p, Tensor::scalar(false))], o).to_f64_vec(), vec![2.0, 6.0, 12.0]);
}

// ---------------------------------------------------------------- functional `While`

/// cond: `i < n`; body: `(i + 1, sin(x) * a, a)` (`a` passed through, as a capture is).
fn loop_fns(n: i64) -> (Arc<Function>, Arc<Function>) {
    let vars = |f: &mut Graph| {
        let i = f.placeholder(DType::Int64, &[], Some("i")).unwrap();
        let x = f.placeholder(DType::Float64, &[3], Some("x")).unwrap();
        let a = f.placeholder(DType::Float64, &[3], Some("a")).unwrap();
        (i, x, a)
    };
    let mut c = Graph::new();
    let (i, x, a) = vars(&mut c);
    let nn = c.constant(Tensor::scalar(n)).unwrap();
    let less = c.op("Less", &[i, nn]).unwrap();
    let cond = Arc::new(Function::new(c, vec![i, x, a], vec![less]).unwrap());
    let mut b = Graph::new();
    let (i, x, a) = vars(&mut b);
    let one = b.constant(Tensor::scalar(1i64)).unwrap();
    let i1 = b.op("Add", &[i, one]).unwrap();
    let s = b.op("Sin", &[x]).unwrap();
    let x1 = b.op("Mul", &[s, a]).unwrap();
    let body = Arc::new(Function::new(b, vec![i, x, a], vec![i1, x1, a]).unwrap());
    (cond, body)
}

fn while_node(g: &mut Graph, vars: &[Output], n: i64, max: Option<i64>) -> oxiflow_core::Result<oxiflow_core::NodeId> {
    let (cond, body) = loop_fns(n);
    let mut spec = NodeSpec::new("While", vars).attr("cond", AttrValue::Func(cond)).attr("body", AttrValue::Func(body));
    if let Some(m) = max {
        spec = spec.attr("maximum_iterations", m);
    }
    g.add_node(spec)
}

#[test]
fn while_runs_body_until_cond_is_false_or_the_limit() {
    let (xv, av) = (rand_t(&[3], 41, -1.0, 1.0), rand_t(&[3], 42, 0.5, 1.5));
    let (xs, a) = (xv.to_f64_vec(), av.to_f64_vec());
    let naive = |k: usize| {
        let mut x = xs.clone();
        for _ in 0..k {
            x = (0..3).map(|j| x[j].sin() * a[j]).collect();
        }
        x
    };
    for (n, max, iters) in [(5, None, 5usize), (5, Some(2), 2), (0, None, 0), (-3, Some(4), 0)] {
        let mut g = Graph::new();
        let i0 = g.constant(Tensor::scalar(0i64)).unwrap();
        let (x, a_) = (g.constant(xv.clone()).unwrap(), g.constant(av.clone()).unwrap());
        let w = while_node(&mut g, &[i0, x, a_], n, max).unwrap();
        let out = eval(&g, &[], &[Output::new(w, 0), Output::new(w, 1), Output::new(w, 2)]).unwrap();
        assert_eq!(out[0].to_f64_vec(), vec![iters as f64], "n {n}, max {max:?}");
        assert_eq!(out[1].to_f64_vec(), naive(iters), "n {n}, max {max:?}");
        assert_eq!(out[2].to_f64_vec(), a);
    }
}

#[test]
fn while_gradients_match_finite_differences() {
    for (n, max) in [(4, None), (6, Some(3)), (0, None)] {
        let (x, a) = (rand_t(&[3], 43, -1.0, 1.0), rand_t(&[3], 44, 0.5, 1.5));
        check_grads(&[x, a], move |g, xs| {
            let i0 = g.constant(Tensor::scalar(0i64))?;
            let w = while_node(g, &[i0, xs[0], xs[1]], n, max)?;
            // both the loop's x and its pass-through a reach the loss
            g.op("Mul", &[Output::new(w, 1), Output::new(w, 2)])
        });
    }
}

#[test]
fn while_second_derivatives_match_finite_differences() {
    // through the loop variable x and the pass-through a; n = 0 and a limit included
    // (the squared output makes the loop's output gradient depend on x as well)
    for (n, max, square) in [(3, None, false), (5, Some(2), false), (0, None, false), (4, None, true)] {
        let (x, a) = (rand_t(&[3], 46, -1.0, 1.0), rand_t(&[3], 47, 0.5, 1.5));
        check_second_grads(&[x, a], 1e-5, move |g, xs| {
            let i0 = g.constant(Tensor::scalar(0i64))?;
            let w = while_node(g, &[i0, xs[0], xs[1]], n, max)?;
            let y = g.op("Mul", &[Output::new(w, 1), Output::new(w, 2)])?;
            if square {
                g.op("Mul", &[y, Output::new(w, 1)])
            } else {
                Ok(y)
            }
        });
    }
    // a third derivative is an error naming WhileGradGrad; the graph stays usable
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[3], Some("x")).unwrap();
    let a = g.constant(rand_t(&[3], 45, 0.5, 1.5)).unwrap();
    let i0 = g.constant(Tensor::scalar(0i64)).unwrap();
    let w = while_node(&mut g, &[i0, x, a], 3, None).unwrap();
    let s = g.op("Sum", &[Output::new(w, 1)]).unwrap();
    let dx = gradients(&mut g, &[s], &[x], None, false).unwrap()[0].unwrap();
    let mut d = g.op("Sum", &[dx]).unwrap();
    let dx2 = gradients(&mut g, &[d], &[x], None, false).unwrap()[0].unwrap();
    d = g.op("Sum", &[dx2]).unwrap();
    let e = gradients(&mut g, &[d], &[x], None, false).unwrap_err().to_string();
    assert!(e.contains("WhileGradGrad"), "{e}");
    assert_eq!(eval1(&g, &[(x, t64(&[3], vec![0.1, 0.2, 0.3]))], dx2).dims(), &[3]);
}

#[test]
fn while_refuses_loop_variables_that_change_shape() {
    let mut g = Graph::new();
    let i0 = g.constant(Tensor::scalar(0i64)).unwrap();
    let x = g.constant(t64(&[2], vec![1.0, 2.0])).unwrap();
    let a = g.constant(t64(&[3], vec![1.0, 2.0, 3.0])).unwrap();
    let e = while_node(&mut g, &[i0, x, a], 3, None).unwrap_err().to_string();
    assert!(e.contains("While") && e.contains("loop variable 1") && e.contains("[2]") && e.contains("[3]"), "{e}");
    // a body changing a shape
    let mut b = Graph::new();
    let bx = b.placeholder(DType::Float64, &[3], Some("x")).unwrap();
    let sum = b.op("Sum", &[bx]).unwrap();
    let body = Arc::new(Function::new(b, vec![bx], vec![sum]).unwrap());
    let mut c = Graph::new();
    let cx = c.placeholder(DType::Float64, &[3], Some("x")).unwrap();
    let t = c.constant(Tensor::scalar(false)).unwrap();
    let cond = Arc::new(Function::new(c, vec![cx], vec![t]).unwrap());
    let spec = NodeSpec::new("While", &[a]).attr("cond", AttrValue::Func(cond)).attr("body", AttrValue::Func(body));
    let e = g.add_node(spec).unwrap_err().to_string();
    assert!(e.contains("loop variable 0") && e.contains("its shape may not change"), "{e}");
}
