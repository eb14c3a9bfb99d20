//! Rank-0 outputs that reuse a spare buffer (`KernelCtx::scalar_output`, fed through
//! `ops::offer_spare` by the executor when a chain of scalar steps hands its tensors on): the values are those of a
//! freshly allocated tensor and of ndarray's general elementwise path, bit for bit, and a
//! buffer that anything else still shares (a fetch, a feed the caller holds, an
//! `Identity`) is never written (ndarray's copy-on-write guarantees it; these tests check
//! that nothing bypasses it).

use oxiflow_core::ops::{offer_spare, smallvec, KernelCtx, Outputs, StateAccess};
use oxiflow_core::{DType, Graph, Layout, NodeId, Output, Result, Session, SessionOptions, Tensor};
use std::sync::{Arc, RwLock};

struct NoState;

impl StateAccess for NoState {
    fn read_variable(&self, _: NodeId) -> Option<Tensor> {
        None
    }
    fn assign_variable(&self, _: NodeId, _: Tensor) -> Result<()> {
        Ok(())
    }
}

/// Address of a tensor's first element (buffer identity).
fn addr(t: &Tensor) -> usize {
    match t {
        Tensor::F64(a) => a.as_ptr() as usize,
        Tensor::F32(a) => a.as_ptr() as usize,
        _ => panic!("float tensors only"),
    }
}

#[test]
fn scalar_output_reuses_only_an_offered_rank0_spare_of_its_dtype() {
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[], Some("x")).unwrap();
    let y = g.op("Sin", &[x]).unwrap();
    let node = g.node(y.node).unwrap();
    let inputs = [Tensor::scalar(0.0f64)];
    let ctx = KernelCtx { node, inputs: &inputs, state: &NoState };

    // No spare on this thread: a new tensor.
    let out = ctx.scalar_output(2.5f64);
    assert!(out.len() == 1 && out[0].same_as(&Tensor::scalar(2.5f64)));

    // An offered rank-0 tensor of the right dtype: its buffer holds the result, once.
    let t = Tensor::scalar(1.0f64);
    let a = addr(&t);
    offer_spare(smallvec![t]);
    let out = ctx.scalar_output(2.5f64);
    assert!(out.len() == 1 && out[0].same_as(&Tensor::scalar(2.5f64)) && addr(&out[0]) == a);
    let again = ctx.scalar_output(3.5f64);
    assert!(again[0].same_as(&Tensor::scalar(3.5f64)) && addr(&again[0]) != a, "the spare was taken");
    let t = Tensor::scalar(1.0f32);
    let a = addr(&t);
    offer_spare(smallvec![t]);
    let out = ctx.scalar_output(-0.75f32);
    assert!(out.len() == 1 && out[0].same_as(&Tensor::scalar(-0.75f32)) && addr(&out[0]) == a);

    // Not reused: shared with another tensor (copied first), another dtype, rank 1 and two
    // tensors (neither is kept by offer_spare).
    let kept = Tensor::scalar(1.0f64);
    let cases: Vec<(&str, Outputs)> = vec![
        ("shared", smallvec![kept.clone()]),
        ("other dtype", smallvec![Tensor::scalar(1.0f32)]),
        ("rank 1", smallvec![Tensor::full(&[1], 1.0f64)]),
        ("two tensors", smallvec![Tensor::scalar(1.0f64), Tensor::scalar(1.0f64)]),
    ];
    for (what, o) in cases {
        offer_spare(o);
        let out = ctx.scalar_output(2.5f64);
        assert!(out.len() == 1 && out[0].same_as(&Tensor::scalar(2.5f64)), "{what}");
        if what == "shared" {
            // (The other spares are freed, so their addresses may come back.)
            assert_ne!(addr(&out[0]), addr(&kept), "a new buffer");
        }
    }
    assert!(kept.same_as(&Tensor::scalar(1.0f64)), "a shared spare is never written");
}

/// Ops of the float chains below (cycled; every value stays finite and in each op's domain).
const OPS: [&str; 6] = ["Sin", "Cos", "Sqrt", "Log", "Exp", "Tanh"];

fn apply64(op: &str, v: f64) -> f64 {
    match op {
        "Sin" => v.sin(),
        "Cos" => v.cos(),
        "Sqrt" => v.sqrt(),
        "Log" => v.ln(),
        "Exp" => v.exp(),
        _ => v.tanh(),
    }
}

fn apply32(op: &str, v: f32) -> f32 {
    match op {
        "Sin" => v.sin(),
        "Cos" => v.cos(),
        "Sqrt" => v.sqrt(),
        "Log" => v.ln(),
        "Exp" => v.exp(),
        _ => v.tanh(),
    }
}

fn session(g: Graph) -> Session {
    Session::new(Arc::new(RwLock::new(g)), SessionOptions { emulated_gpus: Some(0), ..Default::default() }).unwrap()
}

#[test]
fn scalar_chains_match_the_ndarray_path_bitwise_and_libm_closely() {
    const LEN: usize = 60;
    for dtype in [DType::Float64, DType::Float32] {
        // The same chain on a scalar (spare buffers) and on shape [3] (ndarray's `map`).
        let mut g = Graph::new();
        let xs = g.placeholder(dtype, &[], Some("xs")).unwrap();
        let xv = g.placeholder(dtype, &[3], Some("xv")).unwrap();
        let (mut ys, mut yv) = (xs, xv);
        for i in 0..LEN {
            ys = g.op(OPS[i % OPS.len()], &[ys]).unwrap();
            yv = g.op(OPS[i % OPS.len()], &[yv]).unwrap();
        }
        let sess = session(g);
        for (k, x0) in [0.3f64, 1.1, 0.3, 2.9].into_iter().enumerate() {
            let vec_in = [x0, x0 + 0.5, x0 * 0.25];
            let (fs, fv) = match dtype {
                DType::Float64 => (Tensor::scalar(x0), Tensor::from_vec(&[3], vec_in.to_vec(), Layout::RowMajor).unwrap()),
                _ => (Tensor::scalar(x0 as f32), Tensor::from_vec(&[3], vec_in.iter().map(|&v| v as f32).collect(), Layout::RowMajor).unwrap()),
            };
            let out = sess.run(&[(xs, fs), (xv, fv)], &[ys, yv], &[], k % 2 == 1).unwrap();
            let (s, v) = (out.values[0].to_f64_vec(), out.values[1].to_f64_vec());
            let (mut o64, mut o32) = (x0, x0 as f32);
            for i in 0..LEN {
                o64 = apply64(OPS[i % OPS.len()], o64);
                o32 = apply32(OPS[i % OPS.len()], o32);
            }
            let want = if dtype == DType::Float64 { o64 } else { o32 as f64 };
            // Log, Exp and Tanh are the engine's vectorized functions (a few ulp from libm, the
            // oracle here), so the 60-op chain agrees to a relative 1e-12 (f64) / 1e-5 (f32).
            let tol = if dtype == DType::Float64 { 1e-12 } else { 1e-5 };
            assert!(want.is_finite() && s.len() == 1 && (s[0] - want).abs() <= tol * want.abs(), "{dtype} run {k}: {s:?} vs {want}");
            assert_eq!(s[0].to_bits(), v[0].to_bits(), "{dtype} run {k}: scalar path = ndarray path");
        }
    }
}

#[test]
fn buffers_shared_with_a_fetch_a_feed_or_an_identity_are_never_written() {
    // x (the caller keeps the fed tensor) -> Identity -> Sin -> Cos -> Sin;
    // s = Sin(x), fetched -> Identity -> Cos -> Exp -> Tanh.
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[], Some("x")).unwrap();
    let mut a = g.op("Identity", &[x]).unwrap();
    for op in ["Sin", "Cos", "Sin"] {
        a = g.op(op, &[a]).unwrap();
    }
    let s = g.op("Sin", &[x]).unwrap();
    let mut b: Output = g.op("Identity", &[s]).unwrap();
    for op in ["Cos", "Exp", "Tanh"] {
        b = g.op(op, &[b]).unwrap();
    }
    let sess = session(g);
    let feed = Tensor::scalar(0.5f64);
    for k in 0..4 {
        let out = sess.run(&[(x, feed.clone())], &[a, s, b], &[], k % 2 == 1).unwrap();
        let v: Vec<f64> = out.values.iter().map(|t| t.to_f64_vec()[0]).collect();
        let sv = 0.5f64.sin();
        assert_eq!(v, vec![0.5f64.sin().cos().sin(), sv, sv.cos().exp().tanh()], "run {k}");
        assert_eq!(feed.to_f64_vec(), vec![0.5], "run {k}: the caller's feed is unchanged");
    }
}
