//! Training ops (`ApplyGradientDescent`, `ApplyMomentum`, `ApplyAdam`, `ApplyRMSProp`,
//! `ApplyAdagrad`, `ApplyAdadelta`, `ApplyAdagradDA`) against their update rules computed by
//! hand in f64 (TF's `training_ops.cc` formulas), in Float64 and Float32, over several steps;
//! `StopGradient` passes values and blocks gradients; bad operands fail at graph
//! construction naming the op; the GPU flags place them on an emulated GPU or keep them off.

mod common;
use common::*;
use oxiflow_core::autodiff::gradients;
use oxiflow_core::eval::{evaluate, HostState};
use oxiflow_core::{DType, Graph, Layout, NodeSpec, Output, Session, SessionOptions, Tensor};
use std::sync::{Arc, RwLock};

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

type Mk = fn(&[usize], Vec<f64>) -> Tensor;
const KINDS: [(DType, Mk, f64); 2] = [(DType::Float64, t64 as Mk, 1e-14), (DType::Float32, t32 as Mk, 2e-6)];

#[test]
fn adagrad_matches_its_rule_with_and_without_updating_the_accumulator() {
    let (x0, a0, gr) = (rand_vec(6, 11, -1.0, 1.0), rand_vec(6, 12, 0.05, 0.5), rand_vec(6, 13, -1.0, 1.0));
    for (d, mk, tol) in KINDS {
        for update_slots in [true, false] {
            let mut g = Graph::new();
            let v = vars(&mut g, &[mk(&[2, 3], x0.clone()), mk(&[2, 3], a0.clone())]);
            let grad = g.constant(mk(&[2, 3], gr.clone())).unwrap();
            let lr = g.scalar(d, 0.1).unwrap();
            let spec = NodeSpec::new("ApplyAdagrad", &[v[0], v[1], lr, grad]).attr("update_slots", update_slots);
            let up = g.op_spec(spec).unwrap();
            assert_eq!(g.node(up.node).unwrap().name, "ApplyAdagrad");
            let got = run_steps(&mut g, &v, up, 3);
            let (mut x, mut a) = (x0.clone(), a0.clone());
            for _ in 0..3 {
                for i in 0..6 {
                    if update_slots {
                        a[i] += gr[i] * gr[i];
                    }
                    x[i] -= 0.1 * gr[i] / a[i].sqrt();
                }
            }
            assert_close(&got[0], &x, tol, &format!("ApplyAdagrad var {d} update_slots={update_slots}"));
            assert_close(&got[1], &a, tol, &format!("ApplyAdagrad accum {d} update_slots={update_slots}"));
        }
    }
}

#[test]
fn adadelta_matches_its_rule_in_f64_and_f32() {
    let (x0, gr) = (rand_vec(6, 14, -1.0, 1.0), rand_vec(6, 15, -1.0, 1.0));
    for (d, mk, tol) in KINDS {
        let mut g = Graph::new();
        let z = || mk(&[3, 2], vec![0.0; 6]);
        let v = vars(&mut g, &[mk(&[3, 2], x0.clone()), z(), z()]);
        let grad = g.constant(mk(&[3, 2], gr.clone())).unwrap();
        let h = scalars(&mut g, d, &[0.5, 0.9, 1e-4]);
        let up = g.op("ApplyAdadelta", &[v[0], v[1], v[2], h[0], h[1], h[2], grad]).unwrap();
        assert_eq!(g.node(up.node).unwrap().name, "ApplyAdadelta");
        let got = run_steps(&mut g, &v, up, 3);
        let (mut x, mut a, mut au) = (x0.clone(), vec![0.0; 6], vec![0.0; 6]);
        for _ in 0..3 {
            for i in 0..6 {
                a[i] = 0.9 * a[i] + 0.1 * gr[i] * gr[i];
                let update = ((au[i] + 1e-4) / (a[i] + 1e-4)).sqrt() * gr[i];
                au[i] = 0.9 * au[i] + 0.1 * update * update;
                x[i] -= 0.5 * update;
            }
        }
        assert_close(&got[0], &x, tol, &format!("ApplyAdadelta var {d}"));
        assert_close(&got[1], &a, tol, &format!("ApplyAdadelta accum {d}"));
        assert_close(&got[2], &au, tol, &format!("ApplyAdadelta accum_update {d}"));
    }
}

#[test]
fn adagrad_da_matches_its_closed_form_with_and_without_l1() {
    let x0 = rand_vec(6, 16, -1.0, 1.0);
    // per-step gradients, one element with a zero accumulated gradient (sign 0)
    let grads: Vec<Vec<f64>> = (0..3).map(|k| rand_vec(6, 17 + k, -1.0, 1.0)).collect();
    for (d, mk, tol) in KINDS {
        for (l1, l2) in [(0.0, 0.0), (0.0, 0.3), (0.25, 0.1)] {
            let mut g = Graph::new();
            let v = vars(&mut g, &[mk(&[6], x0.clone()), mk(&[6], vec![0.0; 6]), mk(&[6], vec![0.1; 6])]);
            let grad = g.placeholder(d, &[6], Some("grad")).unwrap();
            let step = g.placeholder(DType::Int64, &[], Some("global_step")).unwrap();
            let h = scalars(&mut g, d, &[0.2, l1, l2]);
            let up = g.op("ApplyAdagradDA", &[v[0], v[1], v[2], grad, h[0], h[1], h[2], step]).unwrap();
            assert_eq!(g.node(up.node).unwrap().name, "ApplyAdagradDA");
            let state = HostState::default();
            let init = g.global_variables_initializer().unwrap();
            evaluate(&g, &[], &[], &[init], &state).unwrap();
            let (mut x, mut ga, mut gg) = (x0.clone(), vec![0.0; 6], vec![0.1; 6]);
            for (k, gr) in grads.iter().enumerate() {
                let mut gr = gr.clone();
                gr[5] = if k == 0 {
                    0.5
                } else if k == 1 {
                    -0.5
                } else {
                    0.0
                };
                let t = (k + 1) as i64;
                let feeds = [(grad, mk(&[6], gr.clone())), (step, Tensor::scalar(t))];
                let out = evaluate(&g, &feeds, &[up], &[], &state).unwrap().remove(0).to_f64_vec();
                let t = t as f64;
                for i in 0..6 {
                    ga[i] += gr[i];
                    gg[i] += gr[i] * gr[i];
                    let den = l2 * t * 0.2 + gg[i].sqrt();
                    x[i] = if l1 > 0.0 {
                        let sign = if ga[i] > 0.0 {
                            1.0
                        } else if ga[i] < 0.0 {
                            -1.0
                        } else {
                            0.0
                        };
                        -0.2 * sign * (ga[i].abs() - t * l1).max(0.0) / den
                    } else {
                        -0.2 * ga[i] / den
                    };
                }
                assert_close(&out, &x, tol, &format!("ApplyAdagradDA output {d} l1={l1} l2={l2} step {t}"));
            }
            let store = state.0.lock().unwrap();
            assert_close(&store[&v[0].node].to_f64_vec(), &x, tol, "ApplyAdagradDA var");
            assert_close(&store[&v[1].node].to_f64_vec(), &ga, tol, "ApplyAdagradDA gradient_accumulator");
            assert_close(&store[&v[2].node].to_f64_vec(), &gg, tol, "ApplyAdagradDA gradient_squared_accumulator");
            assert_eq!(ga[5], 0.0);
            if l1 > 0.0 {
                assert!(x.contains(&0.0), "l1 shrinks some weights to exactly 0: {x:?}");
            }
        }
    }
}

#[test]
fn new_optimizer_ops_reject_bad_operands_naming_the_op() {
    let mut g = Graph::new();
    let v = vars(&mut g, &[t64(&[3], vec![1.0; 3]), t64(&[3], vec![0.1; 3]), t64(&[3], vec![0.1; 3])]);
    let lr = g.scalar(DType::Float64, 0.1).unwrap();
    let grad = g.constant(t64(&[3], vec![1.0; 3])).unwrap();
    let short = g.constant(t64(&[2], vec![1.0; 2])).unwrap();
    let e = g.op("ApplyAdagrad", &[v[0], v[1], lr, short]).unwrap_err().to_string();
    assert!(e.contains("ApplyAdagrad") && e.contains("[3]") && e.contains("[2]"), "{e}");
    let e = g.op("ApplyAdadelta", &[v[0], v[1], v[2], lr, grad, lr, grad]).unwrap_err().to_string();
    assert!(e.contains("ApplyAdadelta") && e.contains("scalar"), "{e}");
    let step_f = g.scalar(DType::Float64, 1.0).unwrap();
    let e = g.op("ApplyAdagradDA", &[v[0], v[1], v[2], grad, lr, lr, lr, step_f]).unwrap_err().to_string();
    assert!(e.contains("ApplyAdagradDA") && e.contains("Int64") && e.contains("Float64"), "{e}");
    let step = g.constant(Tensor::scalar(1i64)).unwrap();
    let e = g.op("ApplyAdagradDA", &[v[0], v[1], v[2], short, lr, lr, lr, step]).unwrap_err().to_string();
    assert!(e.contains("ApplyAdagradDA") && e.contains("[2]"), "{e}");
    let steps = g.constant(Tensor::from_vec(&[2], vec![1i64, 2], Layout::RowMajor).unwrap()).unwrap();
    assert!(g.op("ApplyAdagradDA", &[v[0], v[1], v[2], grad, lr, lr, lr, steps]).is_err());
    assert!(g.op("ApplyAdagrad", &[v[0], v[1], lr]).is_err(), "arity");
}

#[test]
fn adagrad_and_adadelta_run_on_an_emulated_gpu_and_adagrad_da_stays_on_the_cpu() {
    let mut g = Graph::new();
    let mk = |seed| rand_t(&[4], seed, 0.1, 1.0);
    let v: Vec<Output> = (0..8).map(|k| Output::new(g.variable(mk(30 + k), None, true).unwrap(), 0)).collect();
    let grad = g.constant(mk(40)).unwrap();
    let h = scalars(&mut g, DType::Float64, &[0.1, 0.9, 1e-6]);
    let step = g.constant(Tensor::scalar(2i64)).unwrap();
    let ada = g.op("ApplyAdagrad", &[v[0], v[1], h[0], grad]).unwrap();
    let delta = g.op("ApplyAdadelta", &[v[2], v[3], v[4], h[0], h[1], h[2], grad]).unwrap();
    let da_var = Output::new(g.variable(mk(41), None, true).unwrap(), 0);
    let da = g.op("ApplyAdagradDA", &[da_var, v[5], v[6], grad, h[0], h[1], h[2], step]).unwrap();
    let init = g.global_variables_initializer().unwrap();
    let state = HostState::default();
    evaluate(&g, &[], &[], &[init], &state).unwrap();
    let want = evaluate(&g, &[], &[ada, delta, da], &[], &state).unwrap();
    let g = Arc::new(RwLock::new(g));
    let s = Session::new(g.clone(), SessionOptions { emulated_gpus: Some(1), ..Default::default() }).unwrap();
    s.run(&[], &[], &[init], false).unwrap();
    let got = s.run(&[], &[ada, delta, da], &[], false).unwrap();
    for (k, (g, w)) in got.values.iter().zip(&want).enumerate() {
        assert_eq!(g.to_f64_vec(), w.to_f64_vec(), "output {k}");
    }
    let gpu = "/job:localhost/replica:0/task:0/device:GPU:0";
    let cpu = "/job:localhost/replica:0/task:0/device:CPU:0";
    assert_eq!(s.assigned_device(ada.node).unwrap(), gpu);
    assert_eq!(s.assigned_device(delta.node).unwrap(), gpu);
    assert_eq!(s.assigned_device(da.node).unwrap(), cpu);
    assert_eq!(s.assigned_device(da_var.node).unwrap(), cpu, "the variable follows its CPU-only update op");

    // A CPU-only update op added after its variable went to the GPU: a placement error
    // naming both nodes, not a GPU run without a kernel.
    let (w, acc, acc2, step) = {
        let mut g = g.write().unwrap();
        let w = Output::new(g.variable(mk(50), Some("late"), true).unwrap(), 0);
        let acc = Output::new(g.variable(mk(51), None, true).unwrap(), 0);
        let acc2 = Output::new(g.variable(mk(52), None, true).unwrap(), 0);
        (w, acc, acc2, g.constant(Tensor::scalar(1i64)).unwrap())
    };
    let init2 = g.write().unwrap().global_variables_initializer().unwrap();
    s.run(&[], &[], &[init2], false).unwrap();
    assert_eq!(s.assigned_device(w.node).unwrap(), gpu);
    let late = g.write().unwrap().op("ApplyAdagradDA", &[w, acc, acc2, grad, h[0], h[1], h[2], step]).unwrap();
    let e = s.run(&[], &[late], &[], false).unwrap_err().to_string();
    assert!(e.contains("ApplyAdagradDA") && e.contains("late") && e.contains("GPU:0"), "{e}");
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
    // Sin is vectorized math: within 2 ulp of libm's
    assert_close(&eval1(&g, &[(x, xv.clone())], stopped).to_f64_vec(), &xs.iter().map(|v| v.sin()).collect::<Vec<_>>(), 1e-15, "value");
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

/// Address of a tensor's first element (which buffer it is).
fn buffer(t: &Tensor) -> usize {
    match t {
        Tensor::F64(a) => a.as_ptr() as usize,
        Tensor::F32(a) => a.as_ptr() as usize,
        other => panic!("not a float tensor: {:?}", other.dtype()),
    }
}

#[test]
fn a_session_updates_variables_in_place_and_a_tensor_read_before_keeps_its_value() {
    // ApplyAdam: three reference inputs updated together. The session's store updates in
    // place; the evaluator's (HostState) reads, computes and assigns: both give the same bits.
    let (x0, gr) = (rand_vec(6, 7, -1.0, 1.0), rand_vec(6, 8, -1.0, 1.0));
    let mut g = Graph::new();
    let v = vars(&mut g, &[t64(&[2, 3], x0.clone()), t64(&[2, 3], vec![0.0; 6]), t64(&[2, 3], vec![0.0; 6])]);
    let grad = g.constant(t64(&[2, 3], gr)).unwrap();
    let mut ins = vec![v[0], v[1], v[2]];
    ins.extend(scalars(&mut g, DType::Float64, &[0.9, 0.999, 0.01, 0.9, 0.999, 1e-8]));
    ins.push(grad);
    let up = g.op("ApplyAdam", &ins).unwrap();
    let want = run_steps(&mut g, &v, up, 3);
    let init = g.global_variables_initializer().unwrap();
    let s = Session::new(Arc::new(RwLock::new(g)), SessionOptions { emulated_gpus: Some(0), ..Default::default() }).unwrap();
    s.run(&[], &[], &[init], false).unwrap();

    // A fetched value shares the variable's buffer; the update copies it first.
    let before = s.run(&[], &[v[0]], &[], false).unwrap().values.remove(0);
    let out = s.run(&[], &[up], &[], false).unwrap().values.remove(0);
    assert_eq!(before.to_f64_vec(), x0, "the tensor read before the update kept its value");
    assert_ne!(buffer(&out), buffer(&before));
    drop((before, out));

    // Nobody else holds the buffer now: the next updates write it where it is.
    let at = buffer(&s.run(&[], &[v[0]], &[], false).unwrap().values[0]);
    s.run(&[], &[], &[up.node], false).unwrap();
    let out = s.run(&[], &[up], &[], false).unwrap().values.remove(0);
    assert_eq!(buffer(&out), at, "updated in place");
    drop(out);
    let got: Vec<Vec<f64>> = s.run(&[], &v, &[], false).unwrap().values.iter().map(Tensor::to_f64_vec).collect();
    assert_eq!(got, want, "in place and assigned updates give the same bits");
}

/// A session (CPU only, `intra` intra-op threads; `None`: the default) over a variable
/// initialised to `x` and `ApplyGradientDescent(var, lr, d)`, its initializer already run;
/// returns the session, the variable and the update's node.
fn gd_session(x: Tensor, d: Tensor, lr: f64, intra: Option<usize>) -> (Session, Output, oxiflow_core::NodeId) {
    let mut g = Graph::new();
    let v = vars(&mut g, &[x]);
    let delta = g.constant(d).unwrap();
    let lr = g.scalar(DType::Float64, lr).unwrap();
    let up = g.op("ApplyGradientDescent", &[v[0], lr, delta]).unwrap();
    let init = g.global_variables_initializer().unwrap();
    let o = SessionOptions { emulated_gpus: Some(0), intra_op_threads: intra, ..Default::default() };
    let s = Session::new(Arc::new(RwLock::new(g)), o).unwrap();
    s.run(&[], &[], &[init], false).unwrap();
    (s, v[0], up.node)
}

#[test]
fn a_large_gradient_descent_update_matches_its_rule_on_any_thread_count_and_layout() {
    // 300x257 = 77100 elements: the update is sharded over the intra-op threads
    let (x0, gr) = (rand_vec(300 * 257, 11, -1.0, 1.0), rand_vec(300 * 257, 12, -1.0, 1.0));
    let want: Vec<f64> = x0.iter().zip(&gr).map(|(x, d)| x - 0.25 * d).collect();
    let col = |v: &[f64]| Tensor::from_vec(&[300, 257], (0..v.len()).map(|k| v[(k % 300) * 257 + k / 300]).collect::<Vec<_>>(), Layout::ColumnMajor).unwrap();
    for intra in [1, 2, 3] {
        for (x, d) in [(t64(&[300, 257], x0.clone()), t64(&[300, 257], gr.clone())), (col(&x0), col(&gr)), (col(&x0), t64(&[300, 257], gr.clone()))] {
            let (s, v, up) = gd_session(x, d, 0.25, Some(intra));
            s.run(&[], &[], &[up], false).unwrap();
            let got = s.run(&[], &[v], &[], false).unwrap().values.remove(0);
            assert_eq!(got.to_f64_vec(), want, "{intra} intra-op threads");
        }
    }
}

#[test]
fn a_variable_takes_its_gradients_layout_once_and_then_updates_in_place() {
    // Variables from Julia arrays are column-major, MatMul gradients row-major (and the
    // other way round): the values follow the rule either way.
    let (x0, gr) = (rand_vec(12, 9, -1.0, 1.0), rand_vec(12, 10, -1.0, 1.0));
    let col = |v: &[f64]| Tensor::from_vec(&[3, 4], (0..12).map(|k| v[(k % 3) * 4 + k / 3]).collect::<Vec<_>>(), Layout::ColumnMajor).unwrap();
    for (x, d) in [(col(&x0), t64(&[3, 4], gr.clone())), (t64(&[3, 4], x0.clone()), col(&gr))] {
        assert_eq!((x.to_f64_vec(), d.to_f64_vec()), (x0.clone(), gr.clone()));
        let (s, v, up) = gd_session(x, d, 0.5, None);
        s.run(&[], &[], &[up], false).unwrap();
        let at = buffer(&s.run(&[], &[v], &[], false).unwrap().values[0]);
        s.run(&[], &[], &[up], false).unwrap();
        let got = s.run(&[], &[v], &[], false).unwrap().values.remove(0);
        assert_eq!(buffer(&got), at, "the second update is in place");
        let want: Vec<f64> = x0.iter().zip(&gr).map(|(x, d)| x - 0.5 * d - 0.5 * d).collect();
        assert_eq!(got.to_f64_vec(), want);
    }
}

#[test]
fn a_large_adam_update_matches_its_rule_on_any_thread_count_and_layout() {
    // 300x257 = 77100 elements (sharded over the intra-op threads), two steps so that the
    // slots' second values depend on their first. The oracle is the rule of TF's
    // `ApplyAdam` in plain loops, in the kernel's operation order: the same bits.
    let (n, dims) = (300 * 257, [300usize, 257]);
    let (x0, gr) = (rand_vec(n, 13, -1.0, 1.0), rand_vec(n, 14, -1.0, 1.0));
    let (b1, b2, lr, eps) = (0.9f64, 0.999f64, 0.01f64, 1e-8f64);
    let (mut x, mut m, mut v) = (x0.clone(), vec![0.0; n], vec![0.0; n]);
    for _ in 0..2 {
        // the powers stay at their fed values (the optimizer's own ops would update them)
        let lr_t = lr * (1.0 - b2).sqrt() / (1.0 - b1);
        for i in 0..n {
            m[i] += (gr[i] - m[i]) * (1.0 - b1);
            v[i] += (gr[i] * gr[i] - v[i]) * (1.0 - b2);
            x[i] -= lr_t * m[i] / (v[i].sqrt() + eps);
        }
    }
    let col = |v: &[f64]| Tensor::from_vec(&dims, (0..n).map(|k| v[(k % 300) * 257 + k / 300]).collect::<Vec<_>>(), Layout::ColumnMajor).unwrap();
    for intra in [1, 2, 3] {
        for (var, grad) in [(t64(&dims, x0.clone()), t64(&dims, gr.clone())), (col(&x0), col(&gr)), (col(&x0), t64(&dims, gr.clone()))] {
            let mut g = Graph::new();
            let vs = vars(&mut g, &[var, t64(&dims, vec![0.0; n]), t64(&dims, vec![0.0; n])]);
            let grad = g.constant(grad).unwrap();
            let mut ins = vec![vs[0], vs[1], vs[2]];
            ins.extend(scalars(&mut g, DType::Float64, &[b1, b2, lr, b1, b2, eps]));
            ins.push(grad);
            let up = g.op("ApplyAdam", &ins).unwrap();
            let init = g.global_variables_initializer().unwrap();
            let o = SessionOptions { emulated_gpus: Some(0), intra_op_threads: Some(intra), ..Default::default() };
            let s = Session::new(Arc::new(RwLock::new(g)), o).unwrap();
            s.run(&[], &[], &[init], false).unwrap();
            for _ in 0..2 {
                s.run(&[], &[], &[up.node], false).unwrap();
            }
            let got: Vec<Vec<f64>> = s.run(&[], &vs, &[], false).unwrap().values.iter().map(Tensor::to_f64_vec).collect();
            assert!(got[0] == x && got[1] == m && got[2] == v, "{intra} intra-op threads");
        }
    }
}
