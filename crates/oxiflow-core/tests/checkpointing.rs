//! Gradient checkpointing (`GradientRun::start_checkpointed`, ADCME's
//! `gradient_checkpointing`). Oracles: the ordinary backward pass of the same network,
//! built in its own graph; central finite differences; and the peak of an emulated GPU's
//! memory account, which counts each live tensor's bytes.

mod common;
use common::*;
use oxiflow_core::autodiff::{GradientRun, GradientStep};
use oxiflow_core::checkpointing::Checkpointing;
use oxiflow_core::graph::{DeviceScope, NodeSpec};
use oxiflow_core::ops::AttrValue;
use oxiflow_core::{DType, DeviceSpec, Graph, Output, Session, SessionOptions, Tensor};
use std::sync::{Arc, RwLock};

/// An MLP of `depth` layers `h = tanh(h W_i + b_i)` (the bias added by a broadcasting `Add`) on a `batch × width` input, and the loss
/// `sum(h .* h)`. Returns `(loss, [W_1, b_1, ..., W_depth, b_depth], tanh outputs)`; the
/// parameters are placeholders (fed by [`params`]).
fn mlp(g: &mut Graph, depth: usize, batch: usize, width: usize) -> (Output, Vec<Output>, Vec<Output>) {
    let x = g.constant(rand_t(&[batch, width], 1, -1.0, 1.0)).unwrap();
    let (mut h, mut ps, mut acts) = (x, Vec::new(), Vec::new());
    for i in 0..depth {
        let w = g.placeholder(DType::Float64, &[width, width], Some(&format!("W{i}"))).unwrap();
        let b = g.placeholder(DType::Float64, &[width], Some(&format!("b{i}"))).unwrap();
        let z = g.op("MatMul", &[h, w]).unwrap();
        let a = g.op("Add", &[z, b]).unwrap();
        h = g.op("Tanh", &[a]).unwrap();
        ps.extend([w, b]);
        acts.push(h);
    }
    let sq = g.op("Mul", &[h, h]).unwrap();
    (g.op("Sum", &[sq]).unwrap(), ps, acts)
}

/// Values for [`mlp`]'s parameters (scaled so the tanh layers stay out of saturation).
fn params(ps: &[Output], width: usize) -> Vec<(Output, Tensor)> {
    let scale = 1.5 / (width as f64).sqrt();
    ps.iter()
        .enumerate()
        .map(|(k, &p)| {
            let dims: &[usize] = if k % 2 == 0 { &[width, width] } else { &[width] };
            (p, rand_t(dims, 10 + k as u64, -scale, scale))
        })
        .collect()
}

fn grads(g: &mut Graph, loss: Output, xs: &[Output], mode: Option<Checkpointing>) -> Vec<Output> {
    let mut run = GradientRun::start_checkpointed(g, &[loss], xs, None, false, mode).unwrap();
    match run.resume(g, None).unwrap() {
        GradientStep::Done(d) => d.into_iter().map(Option::unwrap).collect(),
        GradientStep::Custom { .. } => unreachable!("no custom gradients here"),
    }
}

/// The forward nodes a pass recomputed: `(op, forward name)` of each `gradients*/recompute/` copy.
fn copies(g: &Graph) -> Vec<(&'static str, String)> {
    g.nodes().iter().filter_map(|n| n.name.split_once("/recompute/").map(|(_, fwd)| (n.op.name, fwd.to_string()))).collect()
}

#[test]
fn checkpointed_gradients_equal_the_ordinary_ones_in_every_mode() {
    let (depth, batch, width) = (6, 8, 5);
    let mut g0 = Graph::new();
    let (loss0, ps0, _) = mlp(&mut g0, depth, batch, width);
    let d0 = grads(&mut g0, loss0, &ps0, None);
    let want = eval(&g0, &params(&ps0, width), &d0).unwrap();
    assert!(copies(&g0).is_empty(), "an ordinary pass recomputes nothing");
    for mode in [Checkpointing::Speed, Checkpointing::Memory, Checkpointing::Collection] {
        let mut g = Graph::new();
        let (loss, ps, acts) = mlp(&mut g, depth, batch, width);
        if mode == Checkpointing::Collection {
            g.add_to_collection("checkpoints", acts[2]);
        }
        let d = grads(&mut g, loss, &ps, Some(mode));
        let got = eval(&g, &params(&ps, width), &d).unwrap();
        for (k, (a, b)) in got.iter().zip(&want).enumerate() {
            assert_close(&a.to_f64_vec(), &b.to_f64_vec(), 1e-12, &format!("{mode:?}: gradient of parameter {k}"));
        }
        let made = copies(&g);
        assert!(!made.is_empty(), "{mode:?} recomputes something");
        let recomputed = |name: &str| made.iter().any(|(_, f)| f == name);
        match mode {
            // the products are kept, everything between them recomputed
            Checkpointing::Speed => {
                assert!(made.iter().all(|(op, _)| *op != "MatMul"), "{made:?}");
                assert!(recomputed("Tanh_3") && recomputed("add_3"), "{made:?}");
            }
            // the collected tanh output is kept, the layers above and below are recomputed
            Checkpointing::Collection => {
                assert!(!recomputed("Tanh_2"), "{made:?}");
                assert!(recomputed("Tanh_1") && recomputed("Tanh_4") && recomputed("MatMul_3"), "{made:?}");
            }
            // about √n of the n recomputable tensors are kept
            Checkpointing::Memory => {
                let n = 3 * depth + 1;
                let kept = n - made.len();
                assert!(kept >= 2 && kept <= (n as f64).sqrt().ceil() as usize, "{kept} kept of {n}: {made:?}");
            }
        }
        // the loss, the parameters and the input are never copied
        assert!(!recomputed("Sum") && made.iter().all(|(op, _)| *op != "Placeholder" && *op != "Const"), "{made:?}");
    }
}

#[test]
fn checkpointed_gradients_match_finite_differences() {
    let (depth, batch, width) = (4, 3, 2);
    let mut g = Graph::new();
    let (loss, ps, _) = mlp(&mut g, depth, batch, width);
    let d = grads(&mut g, loss, &ps, Some(Checkpointing::Memory));
    assert!(!copies(&g).is_empty());
    let base = params(&ps, width);
    let analytic = eval(&g, &base, &d).unwrap();
    let eps = 1e-6;
    for (k, (p, v)) in base.iter().enumerate() {
        let x = v.to_f64_vec();
        let numeric: Vec<f64> = (0..x.len())
            .map(|j| {
                let at = |delta: f64| {
                    let mut feeds = base.clone();
                    let mut y = x.clone();
                    y[j] += delta;
                    feeds[k] = (*p, t64(v.dims(), y));
                    eval1(&g, &feeds, loss).to_f64_vec()[0]
                };
                (at(eps) - at(-eps)) / (2.0 * eps)
            })
            .collect();
        assert_close(&analytic[k].to_f64_vec(), &numeric, 1e-6, &format!("parameter {k}"));
    }
}

#[test]
fn copies_wait_for_the_backward_pass_and_stateful_ops_are_not_copied() {
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[4, 4], Some("x")).unwrap();
    let w = g.placeholder(DType::Float64, &[4, 4], Some("w")).unwrap();
    let mask = g.op_spec(NodeSpec::new("RandomUniform", &[]).attr("shape", AttrValue::Shape(vec![4, 4])).attr("seed", 3i64).attr("seed2", 4i64)).unwrap();
    let z = g.op("MatMul", &[x, w]).unwrap();
    let dropped = g.op("Mul", &[z, mask]).unwrap();
    let t = g.op("Tanh", &[dropped]).unwrap();
    // a stateful op on the path (printing twice would show) is kept, not copied
    let printed = g.op_spec(NodeSpec::new("Print", &[t, t]).attr("template", "").attr("summarize", 0i64)).unwrap();
    let z2 = g.op("MatMul", &[printed, w]).unwrap();
    let s = g.op("Sin", &[z2]).unwrap();
    let loss = g.op("Sum", &[s]).unwrap();
    grads(&mut g, loss, &[w], Some(Checkpointing::Speed));
    let made = copies(&g);
    assert!(made.iter().any(|(op, _)| *op == "Mul"), "{made:?}");
    assert!(made.iter().all(|(op, _)| *op != "RandomUniform" && *op != "Print"), "{made:?}");
    let mul = g.node(g.node_by_name("gradients/recompute/mul").unwrap()).unwrap();
    assert_eq!(mul.inputs, vec![z, mask], "the copy reads the kept product and the one random draw");
    // a copy of kept tensors only starts once gradients reach its segment
    assert!(!mul.control_inputs.is_empty(), "a root copy waits for the backward pass");
    for c in &mul.control_inputs {
        assert!(g.node(*c).unwrap().name.starts_with("gradients/"), "{}", g.node(*c).unwrap().name);
    }
    let tanh = g.node(g.node_by_name("gradients/recompute/Tanh").unwrap()).unwrap();
    assert_eq!(tanh.inputs[0].node, mul.id, "copies read copies");
    assert!(tanh.control_inputs.is_empty(), "only root copies need a control edge");
}

#[test]
fn a_mode_without_checkpoints_builds_an_ordinary_pass() {
    // no product or convolution: "speed" finds nothing to keep; an empty collection neither
    for mode in [Checkpointing::Speed, Checkpointing::Collection] {
        let mut g = Graph::new();
        let x = g.placeholder(DType::Float64, &[3], Some("x")).unwrap();
        let s = g.op("Sin", &[x]).unwrap();
        let c = g.op("Cos", &[s]).unwrap();
        let loss = g.op("Sum", &[c]).unwrap();
        let d = grads(&mut g, loss, &[x], Some(mode))[0];
        assert!(copies(&g).is_empty(), "{mode:?}");
        let xv = rand_t(&[3], 5, -1.0, 1.0);
        let want: Vec<f64> = xv.to_f64_vec().iter().map(|&v| -v.sin().sin() * v.cos()).collect();
        assert_close(&eval1(&g, &[(x, xv)], d).to_f64_vec(), &want, 1e-15, "d cos(sin x)");
    }
    assert!(Checkpointing::parse("fast").unwrap_err().to_string().contains("'fast' not defined"));
    assert_eq!(Checkpointing::parse("memory").unwrap(), Checkpointing::Memory);
}

/// Peak bytes on an emulated GPU of one step fetching the first layer's weight gradient
/// of a deep MLP (the whole backward pass: the other weights' gradients are not computed).
fn peak_bytes(mode: Option<Checkpointing>) -> u64 {
    let (depth, batch, width) = (16, 512, 64);
    let g = Arc::new(RwLock::new(Graph::new()));
    let (ps, d) = {
        let mut gr = g.write().unwrap();
        gr.push_device(DeviceScope::Spec(DeviceSpec::parse("/device:GPU:0").unwrap()));
        let (loss, ps, _) = mlp(&mut gr, depth, batch, width);
        let d = grads(&mut gr, loss, &ps, mode);
        gr.pop_device().unwrap();
        (ps, d)
    };
    let mut opts = SessionOptions { emulated_gpus: Some(1), ..Default::default() };
    opts.cuda_visible_devices = Some("0".into());
    let s = Session::new(g, opts).unwrap();
    let feeds = params(&ps, width);
    s.run(&feeds, &d[..1], &[], false).unwrap();
    s.memory_stats("GPU:0").unwrap().peak_bytes_in_use
}

#[test]
fn memory_checkpointing_lowers_the_peak_of_a_deep_network() {
    // one activation is 512 × 64 × 8 bytes = 256 KiB; the ordinary pass keeps all 16
    let (plain, memory) = (peak_bytes(None), peak_bytes(Some(Checkpointing::Memory)));
    eprintln!("peak bytes: ordinary {plain}, checkpointed {memory}");
    assert!(plain > 16 * 256 * 1024, "{plain}");
    assert!((memory as f64) < 0.7 * plain as f64, "checkpointed peak {memory} B, ordinary {plain} B");
}
