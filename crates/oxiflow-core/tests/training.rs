//! Training ops (`ApplyGradientDescent`, `ApplyMomentum`, `ApplyAdam`, `ApplyRMSProp`) against
//! their update rules computed by hand, in Float64 and Float32; `StopGradient` passes values
//! and blocks gradients; bad operands fail at graph construction naming the op.

mod common;
use common::*;
use oxiflow_core::autodiff::gradients;
use oxiflow_core::eval::{evaluate, HostState};
use oxiflow_core::{DType, Graph, NodeSpec, Output, Tensor};

/// A graph with variables initialised from `inits`; returns their `VariableV2` outputs.
fn vars(g: &mut Graph, inits: &[Tensor]) -> Vec<Output> {
    inits.iter().map(|t| Output::new(g.variable(t.clone(), None, true).unwrap(), 0)).collect()
}

/// Runs the initializers, then `update` `steps` times; returns the variables' values.
fn run_steps(g: &mut Graph, vs: &[Output], update: Output, steps: usize) -> Vec<Vec<f64>> {
    let state = HostState::default();
    let init = g.global_variables_initializer().unwrap();
    evaluate(g, &[], &[], &[init], &state).unwrap();
    for _ in 0..steps {
        evaluate(g, &[], &[update], &[], &state).unwrap();
    }
    vs.iter().map(|v| state.0.lock().unwrap()[&v.node].to_f64_vec()).collect()
}

fn scalars(g: &mut Graph, d: DType, vals: &[f64]) -> Vec<Output> {
    vals.iter().map(|&v| g.scalar(d, v).unwrap()).collect()
}

#[test]
fn gradient_descent_and_momentum_match_their_rules() {
    let (x0, gr) = (rand_vec(4, 1, -1.0, 1.0), rand_vec(4, 2, -1.0, 1.0));
    let mut g = Graph::new();
    let v = vars(&mut g, &[t64(&[4], x0.clone())]);
    let grad = g.constant(t64(&[4], gr.clone())).unwrap();
    let lr = g.scalar(DType::Float64, 0.1).unwrap();
    let up = g.op("ApplyGradientDescent", &[v[0], lr, grad]).unwrap();
    let got = run_steps(&mut g, &v, up, 2);
    let want: Vec<f64> = x0.iter().zip(&gr).map(|(x, d)| x - 2.0 * 0.1 * d).collect();
    assert_close(&got[0], &want, 1e-15, "ApplyGradientDescent");

    for nesterov in [false, true] {
        let mut g = Graph::new();
        let v = vars(&mut g, &[t64(&[4], x0.clone()), t64(&[4], vec![0.0; 4])]);
        let grad = g.constant(t64(&[4], gr.clone())).unwrap();
        let h = scalars(&mut g, DType::Float64, &[0.1, 0.9]);
        let up = g.op_spec(NodeSpec::new("ApplyMomentum", &[v[0], v[1], h[0], grad, h[1]]).attr("use_nesterov", nesterov)).unwrap();
        let got = run_steps(&mut g, &v, up, 2);
        let (mut x, mut a) = (x0.clone(), vec![0.0; 4]);
        for _ in 0..2 {
            for i in 0..4 {
                a[i] = a[i] * 0.9 + gr[i];
                x[i] -= if nesterov { gr[i] * 0.1 + a[i] * 0.9 * 0.1 } else { 0.1 * a[i] };
            }
        }
        assert_close(&got[0], &x, 1e-15, "ApplyMomentum var");
        assert_close(&got[1], &a, 1e-15, "ApplyMomentum accum");
    }
}

#[test]
fn adam_and_rmsprop_match_their_rules_in_f64_and_f32() {
    let (x0, gr) = (rand_vec(6, 3, -1.0, 1.0), rand_vec(6, 4, -1.0, 1.0));
    for (d, mk, tol) in [(DType::Float64, t64 as fn(&[usize], Vec<f64>) -> Tensor, 1e-14), (DType::Float32, t32, 1e-6)] {
        let mut g = Graph::new();
        let v = vars(&mut g, &[mk(&[2, 3], x0.clone()), mk(&[2, 3], vec![0.0; 6]), mk(&[2, 3], vec![0.0; 6])]);
        let grad = g.constant(mk(&[2, 3], gr.clone())).unwrap();
        let h = scalars(&mut g, d, &[0.9, 0.999, 0.01, 0.9, 0.999, 1e-8]);
        let mut ins = vec![v[0], v[1], v[2]];
        ins.extend(&h);
        ins.push(grad);
        let up = g.op("ApplyAdam", &ins).unwrap();
        let got = run_steps(&mut g, &v, up, 1);
        let lr_t = 0.01 * (1.0f64 - 0.999).sqrt() / (1.0 - 0.9);
        let m: Vec<f64> = gr.iter().map(|g| 0.1 * g).collect();
        let vv: Vec<f64> = gr.iter().map(|g| 0.001 * g * g).collect();
        let x: Vec<f64> = (0..6).map(|i| x0[i] - lr_t * m[i] / (vv[i].sqrt() + 1e-8)).collect();
        assert_close(&got[0], &x, tol, "ApplyAdam var");
        assert_close(&got[1], &m, tol, "ApplyAdam m");
        assert_close(&got[2], &vv, tol, "ApplyAdam v");

        let mut g = Graph::new();
        let v = vars(&mut g, &[mk(&[2, 3], x0.clone()), mk(&[2, 3], vec![1.0; 6]), mk(&[2, 3], vec![0.0; 6])]);
        let grad = g.constant(mk(&[2, 3], gr.clone())).unwrap();
        let h = scalars(&mut g, d, &[0.01, 0.9, 0.5, 1e-10]);
        let up = g.op("ApplyRMSProp", &[v[0], v[1], v[2], h[0], h[1], h[2], h[3], grad]).unwrap();
        let got = run_steps(&mut g, &v, up, 2);
        let (mut x, mut ms, mut mom) = (x0.clone(), vec![1.0; 6], vec![0.0; 6]);
        for _ in 0..2 {
            for i in 0..6 {
                ms[i] += (gr[i] * gr[i] - ms[i]) * 0.1;
                mom[i] = mom[i] * 0.5 + 0.01 * gr[i] / (ms[i] + 1e-10).sqrt();
                x[i] -= mom[i];
            }
        }
        assert_close(&got[0], &x, tol, "ApplyRMSProp var");
        assert_close(&got[1], &ms, tol, "ApplyRMSProp ms");
        assert_close(&got[2], &mom, tol, "ApplyRMSProp mom");
    }
}

#[test]
fn bad_operands_fail_at_construction_and_uninitialized_vars_at_run() {
    let mut g = Graph::new();
    let v = vars(&mut g, &[t64(&[3], vec![1.0; 3])]);
    let lr = g.scalar(DType::Float64, 0.1).unwrap();
    let wrong = g.constant(t64(&[2], vec![1.0; 2])).unwrap();
    let e = g.op("ApplyGradientDescent", &[v[0], lr, wrong]).unwrap_err().to_string();
    assert!(e.contains("ApplyGradientDescent") && e.contains("[3]") && e.contains("[2]"), "{e}");
    let lr32 = g.scalar(DType::Float32, 0.1).unwrap();
    let grad = g.constant(t64(&[3], vec![1.0; 3])).unwrap();
    let e = g.op("ApplyGradientDescent", &[v[0], lr32, grad]).unwrap_err().to_string();
    assert!(e.contains("ApplyGradientDescent") && e.contains("Float32"), "{e}");
    let vec_lr = g.constant(t64(&[3], vec![0.1; 3])).unwrap();
    assert!(g.op("ApplyGradientDescent", &[v[0], vec_lr, grad]).is_err());
    let up = g.op("ApplyGradientDescent", &[v[0], lr, grad]).unwrap();
    let e = evaluate(&g, &[], &[up], &[], &HostState::default()).unwrap_err().to_string();
    assert!(e.to_lowercase().contains("uninitialized"), "{e}");
}

#[test]
fn stop_gradient_passes_values_and_blocks_gradients() {
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[3], Some("x")).unwrap();
    let s = g.op("Sin", &[x]).unwrap();
    let stopped = g.op("StopGradient", &[s]).unwrap();
    assert_eq!(g.node(stopped.node).unwrap().name, "StopGradient");
    let y = g.op("Mul", &[stopped, x]).unwrap();
    let xv = rand_t(&[3], 5, -1.0, 1.0);
    let xs = xv.to_f64_vec();
    assert_close(&eval1(&g, &[(x, xv.clone())], stopped).to_f64_vec(), &xs.iter().map(|v| v.sin()).collect::<Vec<_>>(), 0.0, "value");
    let dx = gradients(&mut g, &[y], &[x], None, false).unwrap()[0].unwrap();
    // d/dx (stop(sin x) * x) = sin x, not sin x + x cos x
    assert_close(&eval1(&g, &[(x, xv)], dx).to_f64_vec(), &xs.iter().map(|v| v.sin()).collect::<Vec<_>>(), 1e-15, "grad");
    let only = gradients(&mut g, &[stopped], &[x], None, false).unwrap();
    assert!(only[0].is_none());
}

#[test]
fn exact_names_for_get_variable_and_tf_group_names() {
    let mut g = Graph::new();
    // a name ending in '/' is used exactly, inside a name scope too (get_variable's scope/name)
    g.push_name_scope("layer");
    let v = g.variable(t64(&[2], vec![1.0, 2.0]), Some("scope/W/"), true).unwrap();
    g.pop_name_scope();
    assert_eq!(g.node(v).unwrap().name, "scope/W");
    assert!(g.node_by_name("scope/W/read").is_some());
    assert!(g.variable(t64(&[1], vec![0.0]), Some("scope/W/"), true).is_err(), "an exact name that is taken");
    // a node may take a name that only a name scope reserved (TF's group(..., name="Adam/"))
    let scope = g.push_name_scope("Adam");
    let lr = g.scalar(DType::Float64, 0.1).unwrap();
    g.pop_name_scope();
    assert_eq!(g.node(lr.node).unwrap().name, "Adam/Const");
    let noop = g.add_node_full(NodeSpec::new("NoOp", &[]), scope.clone()).unwrap();
    assert_eq!(g.node(noop).unwrap().name, "Adam");
    assert!(g.add_node_full(NodeSpec::new("NoOp", &[]), scope).is_err(), "a node already has the name");
    assert_eq!(g.push_name_scope("Adam"), "Adam_1");
}
