//! The executor's tensor lifetimes and reuse of per-run arrays (docs/performance/engine.md):
//! tensors read by several steps, read twice by one step, fetched and also consumed, fed
//! and fetched; runs repeated, overlapping, and after a failed run of the same plan; with
//! and without cross-device copies; chains whose steps hand their outputs straight to the
//! next step, with fetched, shared and multi-output steps among them and a step that fails.
//! Oracle: the same arithmetic in Rust f64 (bitwise, or within a few ulp where a kernel is
//! vectorized math rather than libm).

use oxiflow_core::graph::DeviceScope;
use oxiflow_core::{DType, DeviceSpec, Graph, Layout, NodeSpec, Output, Session, SessionOptions, Tensor};
use std::sync::{Arc, RwLock};

/// `x` fed; `s = sin x`, `m = s*s`, `a = m + s`, `n = AddN(a, s, x)`.
fn diamond(g: &mut Graph) -> (Output, [Output; 4]) {
    let x = g.placeholder(DType::Float64, &[], Some("x")).unwrap();
    let s = g.op("Sin", &[x]).unwrap();
    let m = g.op("Mul", &[s, s]).unwrap();
    let a = g.op("Add", &[m, s]).unwrap();
    let n = g.op_spec(NodeSpec::new("AddN", &[a, s, x])).unwrap();
    (x, [s, m, a, n])
}

fn expected(x: f64) -> [f64; 5] {
    let s = x.sin();
    let m = s * s;
    let a = m + s;
    [s, m, a, a + s + x, x]
}

fn values(out: &[Tensor]) -> Vec<f64> {
    out.iter().map(|t| t.to_f64_vec()[0]).collect()
}

/// `got` equals `want` within a few ulp: `Sin`, `Cos`, `Tanh` and `Exp` are vectorized
/// kernels, within 2 to 4 ulp of the libm oracle; a wrong or reused tensor is off by far more.
fn close(got: &[f64], want: &[f64]) -> bool {
    got.len() == want.len() && got.iter().zip(want).all(|(g, w)| (g - w).abs() <= 8.0 * f64::EPSILON * w.abs().max(f64::MIN_POSITIVE))
}

fn session(g: Graph, gpus: usize) -> (Arc<RwLock<Graph>>, Session) {
    let g = Arc::new(RwLock::new(g));
    let s = Session::new(g.clone(), SessionOptions { emulated_gpus: Some(gpus), ..Default::default() }).unwrap();
    (g, s)
}

#[test]
fn shared_and_repeated_inputs_fetches_and_feeds_survive_repeated_runs() {
    for gpus in [0, 1] {
        let mut g = Graph::new();
        let (x, [s, m, a, n]) = diamond(&mut g);
        let (_, sess) = session(g, gpus);
        for (k, xv) in [0.3, -1.7, 0.3, 2.5].into_iter().enumerate() {
            // s is fetched twice and consumed by three steps; x is fed, consumed and fetched
            let out = sess.run(&[(x, Tensor::scalar(xv))], &[s, m, a, n, x, s], &[], k % 2 == 1).unwrap();
            let e = expected(xv);
            let (got, want) = (values(&out.values), [e[0], e[1], e[2], e[3], e[4], e[0]]);
            assert!(close(&got, &want), "gpus={gpus} run {k}: {got:?} vs {want:?}");
        }
    }
}

#[test]
fn overlapping_runs_of_one_plan_do_not_share_tensors() {
    let mut g = Graph::new();
    let (x, [s, m, a, n]) = diamond(&mut g);
    let (_, sess) = session(g, 1);
    let sess = &sess;
    std::thread::scope(|sc| {
        for t in 0..4 {
            sc.spawn(move || {
                for i in 0..50 {
                    let xv = t as f64 + i as f64 / 50.0;
                    let out = sess.run(&[(x, Tensor::scalar(xv))], &[s, m, a, n], &[], false).unwrap();
                    let (got, want) = (values(&out.values), expected(xv));
                    assert!(close(&got, &want[..4]), "thread {t} run {i}: {got:?} vs {want:?}");
                }
            });
        }
    });
}

#[test]
fn a_failed_run_leaves_the_plan_reusable() {
    for gpus in [0, 1] {
        let mut g = Graph::new();
        let (x, [s, _, _, _]) = diamond(&mut g);
        let v = g.variable(Tensor::scalar(4.0f64), None, true).unwrap();
        let y = g.op("Add", &[s, Output::new(v, 0)]).unwrap();
        let (g, sess) = session(g, gpus);
        let feed = [(x, Tensor::scalar(0.5))];
        let e = sess.run(&feed, &[y, s], &[], false).unwrap_err().to_string();
        assert!(e.starts_with("Attempting to use uninitialized value Variable"), "{e}");
        let init = g.write().unwrap().global_variables_initializer().unwrap();
        sess.run(&[], &[], &[init], false).unwrap();
        for _ in 0..3 {
            let out = sess.run(&feed, &[y, s], &[], false).unwrap();
            let (got, want) = (values(&out.values), [0.5f64.sin() + 4.0, 0.5f64.sin()]);
            assert!(close(&got, &want), "gpus={gpus}: {got:?} vs {want:?}");
        }
    }
}

#[test]
fn traced_steps_have_ordered_non_empty_intervals() {
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[], Some("x")).unwrap();
    let mut y = x;
    let mut chain = Vec::new();
    for i in 0..50 {
        y = g.op(if i % 2 == 0 { "Sin" } else { "Cos" }, &[y]).unwrap();
        chain.push(g.node(y.node).unwrap().name.clone());
    }
    // one step per op: fusion (which would make the chain one step) is off
    let opts = SessionOptions { emulated_gpus: Some(0), fusion: Some(false), ..Default::default() };
    let sess = Session::new(Arc::new(RwLock::new(g)), opts).unwrap();
    let out = sess.run(&[(x, Tensor::scalar(0.5f64))], &[y], &[], true).unwrap();
    let stats = out.step_stats.unwrap();
    assert_eq!(stats.nodes.len(), 50);
    let mut by_thread: std::collections::BTreeMap<usize, Vec<(u64, u64)>> = Default::default();
    let mut span_of = std::collections::HashMap::new();
    for n in &stats.nodes {
        by_thread.entry(n.thread).or_default().push((n.start_ns, n.end_ns));
        span_of.insert(stats.label(n).node_name.to_string(), (n.start_ns, n.end_ns));
    }
    // the data dependencies: each op of the chain starts after the op it reads ended
    for w in chain.windows(2) {
        let (a, b) = (span_of[&w[0]], span_of[&w[1]]);
        assert!(a.1 <= b.0, "{} {a:?} must end before {} {b:?} starts", w[0], w[1]);
    }
    for spans in by_thread.values_mut() {
        spans.sort_unstable();
        assert!(spans.windows(2).all(|w| w[0].1 <= w[1].0), "steps of one worker overlap: {spans:?}");
    }
    let mut v = 0.5f64;
    for i in 0..50 {
        v = if i % 2 == 0 { v.sin() } else { v.cos() };
    }
    // 50 roundings of a few ulp each, none amplified (|sin'|, |cos'| <= 1)
    let got = out.values[0].to_f64_vec();
    assert!(got.len() == 1 && (got[0] - v).abs() <= 100.0 * f64::EPSILON * v.abs(), "{got:?} vs {v}");
}

/// A unary op and its Rust f64 oracle.
type UnaryCase = (&'static str, fn(f64) -> f64);
/// Unary ops of the chains below and their Rust f64 oracle.
const UNARY: [UnaryCase; 5] = [("Sin", f64::sin), ("Cos", f64::cos), ("Tanh", f64::tanh), ("Exp", f64::exp), ("Neg", |v| -v)];

#[test]
fn handed_over_chains_keep_fetched_shared_and_unread_outputs_right() {
    // x -> 12 unary steps; step 4 is fetched, step 7 is also read by a side `Neg`; then a
    // vector chain through a three-output `Unpack` of which only output 1 is read.
    for gpus in [0, 1] {
        let mut g = Graph::new();
        let x = g.placeholder(DType::Float64, &[], Some("x")).unwrap();
        let mut chain = vec![x];
        for i in 0..12 {
            chain.push(g.op(UNARY[i % UNARY.len()].0, &[chain[i]]).unwrap());
        }
        let side = g.op("Neg", &[chain[7]]).unwrap();
        let v = g.placeholder(DType::Float64, &[3], Some("v")).unwrap();
        let sv = g.op("Sin", &[v]).unwrap();
        let parts = g.op_spec(NodeSpec::new("Unpack", &[sv]).attr("num", 3i64)).unwrap();
        let mid = g.op("Cos", &[Output::new(parts.node, 1)]).unwrap();
        let end = g.op("Tanh", &[mid]).unwrap();
        let (_, sess) = session(g, gpus);
        for (k, xv) in [0.4, -0.9, 0.4, 1.3].into_iter().enumerate() {
            let vv = vec![xv, 2.0 * xv, 3.0 * xv];
            let feeds = [(x, Tensor::scalar(xv)), (v, Tensor::from_vec(&[3], vv.clone(), Layout::RowMajor).unwrap())];
            let out = sess.run(&feeds, &[chain[12], chain[4], side, end], &[], k % 2 == 1).unwrap();
            let mut c = vec![xv];
            for i in 0..12 {
                c.push(UNARY[i % UNARY.len()].1(c[i]));
            }
            let e = vec![c[12], c[4], -c[7], vv[1].sin().cos().tanh()];
            // Tanh and Exp are vectorized (a few ulp from the libm oracle).
            let got = values(&out.values);
            assert!(
                got.len() == e.len() && got.iter().zip(&e).all(|(g, w)| (g - w).abs() <= 1e-14 * w.abs().max(1.0)),
                "gpus={gpus} run {k}: {got:?} vs {e:?}"
            );
        }
    }
}

#[test]
fn a_failing_step_inside_a_handed_over_chain_leaves_the_plan_reusable() {
    // x -> Sin -> MatrixInverse -> Cos -> Exp: every step hands its output to the next one.
    for gpus in [0, 1] {
        let mut g = Graph::new();
        let x = g.placeholder(DType::Float64, &[2, 2], Some("x")).unwrap();
        let s = g.op("Sin", &[x]).unwrap();
        let inv = g.op("MatrixInverse", &[s]).unwrap();
        let c = g.op("Cos", &[inv]).unwrap();
        let y = g.op("Exp", &[c]).unwrap();
        let (_, sess) = session(g, gpus);
        let feed = |v: Vec<f64>| [(x, Tensor::from_vec(&[2, 2], v, Layout::RowMajor).unwrap())];
        for k in 0..3 {
            let e = sess.run(&feed(vec![0.0; 4]), &[y], &[], k == 1).unwrap_err().to_string();
            assert!(e.contains("MatrixInverse") && e.contains("not invertible"), "{e}");
            let xv = vec![0.5, 0.1, -0.2, 0.7];
            let out = sess.run(&feed(xv.clone()), &[y], &[], k == 2).unwrap();
            let [a, b, cc, d] = [xv[0].sin(), xv[1].sin(), xv[2].sin(), xv[3].sin()];
            let det = a * d - b * cc;
            let want: Vec<f64> = [d / det, -b / det, -cc / det, a / det].iter().map(|v| v.cos().exp()).collect();
            let got = out.values[0].to_f64_vec();
            assert!(got.iter().zip(&want).all(|(g, w)| (g - w).abs() <= 1e-12 * w.abs()), "gpus={gpus}: {got:?} vs {want:?}");
        }
    }
}

#[test]
fn cpu_steps_hand_over_in_a_gpu_session_and_gpu_memory_is_still_accounted() {
    // CPU: Sin -> Cos -> Sin (handed over); GPU:0: Sin -> Cos (accounted, cells);
    // CPU: Tanh -> Exp. The same on a scalar and on a 1000-vector.
    for dims in [vec![], vec![1000]] {
        let mut g = Graph::new();
        let x = g.placeholder(DType::Float64, &dims, Some("x")).unwrap();
        let mut y = x;
        let mut nodes = vec![];
        for (dev, ops) in [("/cpu:0", &["Sin", "Cos", "Sin"][..]), ("/gpu:0", &["Sin", "Cos"]), ("/cpu:0", &["Tanh", "Exp"])] {
            g.push_device(DeviceScope::Spec(DeviceSpec::parse(dev).unwrap()));
            for op in ops {
                y = g.op(op, &[y]).unwrap();
                nodes.push((y.node, dev));
            }
            g.pop_device().unwrap();
        }
        let (_, sess) = session(g, 1);
        for &(n, dev) in &nodes {
            assert!(sess.assigned_device(n).unwrap().to_lowercase().ends_with(&dev[1..]), "{dev}");
        }
        let n: usize = dims.iter().product();
        for (k, xv) in [0.5f64, -1.25, 0.5].into_iter().enumerate() {
            let feed = Tensor::full(&dims, xv);
            let out = sess.run(&[(x, feed)], &[y], &[], k == 1).unwrap();
            let want = xv.sin().cos().sin().sin().cos().tanh().exp();
            // Tanh and Exp are the vectorized kernels on the 1000-vector: within a few ulp of libm.
            let got = out.values[0].to_f64_vec();
            assert!(
                got.len() == n.max(1) && got.iter().all(|g| (g - want).abs() <= 4.0 * f64::EPSILON * want),
                "dims {dims:?} run {k}: {:?} vs {want}",
                &got[..1]
            );
            let m = sess.memory_stats("GPU:0").unwrap();
            assert_eq!(m.bytes_in_use, 0, "dims {dims:?}: everything on the GPU is freed");
            // the copied-in input and Sin's output, then Sin's and Cos's outputs
            assert_eq!(m.peak_bytes_in_use, 2 * 8 * n as u64, "dims {dims:?}");
        }
    }
}

#[test]
fn untraced_chains_run_on_the_callers_threads_concurrently_and_leave_no_thread_tag() {
    // x -> Sin -> Cos -> Exp is a chain: untraced runs execute on the calling thread
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[], Some("x")).unwrap();
    let s = g.op("Sin", &[x]).unwrap();
    let c = g.op("Cos", &[s]).unwrap();
    let y = g.op("Exp", &[c]).unwrap();
    let g = Arc::new(RwLock::new(g));
    let opts = SessionOptions { emulated_gpus: Some(0), intra_op_threads: Some(3), ..Default::default() };
    let sess = Session::new(g, opts).unwrap();
    let before = oxiflow_core::intra_op::intra_op_threads();
    std::thread::scope(|sc| {
        for t in 0..4 {
            let sess = &sess;
            sc.spawn(move || {
                for k in 0..200 {
                    let v = (t * 1000 + k) as f64 * 1e-3;
                    let out = sess.run(&[(x, Tensor::scalar(v))], &[y, s], &[], k % 50 == 0).unwrap();
                    // Exp is vectorized: a few ulp from libm's
                    let (got, want) = (values(&out.values), [v.sin().cos().exp(), v.sin()]);
                    assert!(
                        got.len() == 2 && got.iter().zip(&want).all(|(g, w)| (g - w).abs() <= 4.0 * f64::EPSILON * w.abs()),
                        "thread {t} run {k}: {got:?} vs {want:?}"
                    );
                }
            });
        }
    });
    assert_eq!(oxiflow_core::intra_op::intra_op_threads(), before, "the caller's intra-op tag is restored");
}
