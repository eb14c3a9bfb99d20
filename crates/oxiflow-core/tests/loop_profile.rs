//! A traced run shows every iteration of a `While` loop: each node its `cond` and `body`
//! ran, per iteration, as a step named `<loop>/<attr>/<node>` with the iteration, inside
//! the loop's own step (TF1's step stats list each iteration's ops the same way). Oracles:
//! the loop's semantics (n iterations run `body` n times and `cond` n + 1 times; the
//! gradient's `body_grad` runs from the last iteration to the first) and the timeline's
//! own intervals.

use oxiflow_core::autodiff::gradients;
use oxiflow_core::function::Function;
use oxiflow_core::ops::AttrValue;
use oxiflow_core::profile::StepStats;
use oxiflow_core::timeline::ProfileSummary;
use oxiflow_core::{DType, Graph, NodeSpec, Output, Session, SessionOptions, Tensor};
use std::sync::{Arc, RwLock};

/// `While(i, x)`: while `i < n`, `(i + 1, sin(x) * 2)`; named `loop`.
fn loop_graph(n: i64) -> (Graph, Output, Output) {
    let vars = |f: &mut Graph| (f.placeholder(DType::Int64, &[], Some("i")).unwrap(), f.placeholder(DType::Float64, &[3], Some("x")).unwrap());
    let mut c = Graph::new();
    let (i, x) = vars(&mut c);
    let nn = c.constant(Tensor::scalar(n)).unwrap();
    let less = c.op("Less", &[i, nn]).unwrap();
    let cond = Arc::new(Function::new(c, vec![i, x], vec![less]).unwrap());
    let mut b = Graph::new();
    let (i, x) = vars(&mut b);
    let one = b.constant(Tensor::scalar(1i64)).unwrap();
    let i1 = b.op("Add", &[i, one]).unwrap();
    let s = b.op("Sin", &[x]).unwrap();
    let two = b.constant(Tensor::scalar(2.0f64)).unwrap();
    let x1 = b.op("Mul", &[s, two]).unwrap();
    let body = Arc::new(Function::new(b, vec![i, x], vec![i1, x1]).unwrap());
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[3], Some("x")).unwrap();
    let i0 = g.constant(Tensor::scalar(0i64)).unwrap();
    let w = g.add_node(NodeSpec::new("While", &[i0, x]).name("loop").attr("cond", AttrValue::Func(cond)).attr("body", AttrValue::Func(body))).unwrap();
    (g, x, Output::new(w, 1))
}

fn run_traced(g: Graph, x: Output, fetch: Output) -> (Vec<f64>, StepStats) {
    let sess = Session::new(Arc::new(RwLock::new(g)), SessionOptions::default()).unwrap();
    let xv = Tensor::from_vec(&[3], vec![0.1, 0.2, 0.3], oxiflow_core::Layout::RowMajor).unwrap();
    let out = sess.run(&[(x, xv.clone())], &[fetch], &[], true).unwrap();
    // an untraced run gives the same values
    let plain = sess.run(&[(x, xv)], &[fetch], &[], false).unwrap();
    assert_eq!(plain.values[0].to_f64_vec(), out.values[0].to_f64_vec());
    (out.values[0].to_f64_vec(), out.step_stats.unwrap())
}

/// `(name, op, frame, iteration, start, end)` of each step run inside a function.
fn inner_steps(st: &StepStats) -> Vec<(String, String, String, Option<u64>, u64, u64)> {
    let mut v: Vec<_> = st
        .nodes
        .iter()
        .filter_map(|n| {
            let l = st.label(n);
            l.frame.as_ref().map(|(f, i)| (l.node_name.clone(), l.op.clone(), f.clone(), *i, n.start_ns, n.end_ns))
        })
        .collect();
    v.sort_by_key(|s| s.4);
    v
}

#[test]
fn a_traced_loop_shows_each_iteration_of_cond_and_body() {
    let n = 4;
    let (g, x, y) = loop_graph(n);
    let (vals, st) = run_traced(g, x, y);
    let mut want = vec![0.1f64, 0.2, 0.3];
    for _ in 0..n {
        want = want.iter().map(|v| v.sin() * 2.0).collect();
    }
    assert_eq!(vals, want);
    let inner = inner_steps(&st);
    let count = |name: &str, it: u64| inner.iter().filter(|s| s.0 == name && s.3 == Some(it)).count();
    for it in 0..n as u64 {
        for node in ["loop/body/Sin", "loop/body/mul", "loop/body/add"] {
            assert_eq!(count(node, it), 1, "{node} iteration {it}: {inner:?}");
        }
    }
    // cond runs once more than body: its last call ends the loop
    for it in 0..=n as u64 {
        assert_eq!(count("loop/cond/Less", it), 1, "cond iteration {it}");
    }
    assert_eq!(inner.iter().filter(|s| s.0 == "loop/body/Sin").count(), n as usize);
    let sin = inner.iter().find(|s| s.0 == "loop/body/Sin").unwrap();
    assert_eq!((sin.1.as_str(), sin.2.as_str()), ("Sin", "loop/body"));
    // every inner step lies inside the loop's step; iterations run one after another
    let outer = st.nodes.iter().find(|n| st.label(n).node_name == "loop").unwrap();
    assert!(inner.iter().all(|s| s.4 >= outer.start_ns && s.5 <= outer.end_ns), "{outer:?} {inner:?}");
    for it in 1..n as u64 {
        let end_prev = inner.iter().filter(|s| s.3 == Some(it - 1) && s.2 == "loop/body").map(|s| s.5).max().unwrap();
        let start = inner.iter().filter(|s| s.3 == Some(it) && s.2 == "loop/body").map(|s| s.4).min().unwrap();
        assert!(start >= end_prev, "iteration {it} starts before iteration {} ends", it - 1);
    }
    // the timeline: each iteration's Sin with its frame and iteration, and its input named in the frame
    let trace = st.chrome_trace();
    let ev = trace["traceEvents"].as_array().unwrap();
    let sins: Vec<_> = ev.iter().filter(|e| e["ph"] == "X" && e["args"]["name"] == "loop/body/Sin").collect();
    let mut iters: Vec<u64> = sins.iter().map(|e| e["args"]["iteration"].as_u64().unwrap()).collect();
    iters.sort_unstable();
    assert_eq!(iters, (0..n as u64).collect::<Vec<_>>());
    assert!(sins.iter().all(|e| e["args"]["frame"] == "loop/body" && e["args"]["input0"] == "loop/body/x" && e["args"]["shape"] == "[3]"), "{sins:?}");
    // the summary counts them as kernels run on the loop's device
    let summary = ProfileSummary::from_trace(&trace).unwrap();
    assert_eq!(summary.devices[0].ops, st.nodes.len());
}

#[test]
fn a_traced_loop_gradient_shows_body_grad_from_the_last_iteration_to_the_first() {
    let n = 3;
    let (mut g, x, y) = loop_graph(n);
    let s = g.op("Sum", &[y]).unwrap();
    let dx = gradients(&mut g, &[s], &[x], None, false).unwrap()[0].unwrap();
    let (vals, st) = run_traced(g, x, dx);
    // d/dx of sum(f^n(x)), f(x) = 2 sin x: the product of f'(x_k) = 2 cos x_k
    let want: Vec<f64> = [0.1f64, 0.2, 0.3]
        .iter()
        .map(|&x0| {
            let (mut x, mut d) = (x0, 1.0);
            for _ in 0..n {
                d *= 2.0 * x.cos();
                x = 2.0 * x.sin();
            }
            d
        })
        .collect();
    for (a, b) in vals.iter().zip(&want) {
        assert!((a - b).abs() < 1e-12, "{vals:?} {want:?}");
    }
    let inner = inner_steps(&st);
    let frames: Vec<&str> = inner.iter().map(|s| s.2.as_str()).collect();
    assert!(frames.iter().all(|f| f.ends_with("/cond") || f.ends_with("/body") || f.ends_with("/body_grad")), "{frames:?}");
    // body_grad's first node of each call, in time order: iterations n-1 down to 0
    let mut grad_iters: Vec<u64> = inner.iter().filter(|s| s.2.ends_with("/body_grad")).filter_map(|s| s.3).collect();
    grad_iters.dedup();
    assert_eq!(grad_iters, (0..n as u64).rev().collect::<Vec<_>>());
}

#[test]
fn a_panic_inside_a_traced_call_leaves_no_recording_behind() {
    use oxiflow_core::function::{recording, trace_calls};
    use std::time::Instant;
    let ((), steps) = trace_calls("outer", Instant::now(), || assert!(recording()));
    assert!(steps.is_empty() && !recording());
    // a kernel that panics inside trace_calls (the executor catches it): this thread must
    // not go on recording every function call it makes afterwards
    let caught = std::panic::catch_unwind(|| trace_calls("loop", Instant::now(), || panic!("kernel fails")));
    assert!(caught.is_err());
    assert!(!recording());
}
