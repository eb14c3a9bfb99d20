//! Unknown dimensions (TF1's partial shapes): a `Placeholder` of shape `[?, k]` fed batches
//! of any size through one graph and one session, static shapes carried through the ops
//! that accept them, run-time shape errors naming the op, and gradients equal to finite
//! differences for every fed size (the oracle: plain Rust loops and central differences).

mod common;
use common::*;
use oxiflow_core::autodiff::gradients;
use oxiflow_core::shape::UNKNOWN as U;
use oxiflow_core::{DType, Graph, NodeSpec, Output, Session, SessionOptions, Shape, Tensor};
use std::sync::{Arc, RwLock};

fn session(g: Graph) -> Session {
    Session::new(Arc::new(RwLock::new(g)), SessionOptions { emulated_gpus: Some(0), ..Default::default() }).unwrap()
}

fn run(s: &Session, feeds: &[(Output, Tensor)], fetches: &[Output]) -> Vec<Tensor> {
    s.run(feeds, fetches, &[], false).unwrap().values
}

/// `tanh(x W + b)` summed, for a batch `x` of `n` rows of 3: the oracle of the MLP layer.
fn layer_loss(x: &[f64], n: usize, w: &[f64], b: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..n {
        for j in 0..2 {
            let z: f64 = (0..3).map(|k| x[i * 3 + k] * w[k * 2 + j]).sum::<f64>() + b[j];
            s += z.tanh();
        }
    }
    s
}

#[test]
fn static_shapes_carry_unknown_dimensions() {
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[U, 3], Some("x")).unwrap();
    assert_eq!(g.shape_of(x).unwrap().to_string(), "[?,3]");
    let w = g.placeholder(DType::Float64, &[3, 2], Some("w")).unwrap();
    let z = g.op("MatMul", &[x, w]).unwrap();
    assert_eq!(g.shape_of(z).unwrap(), Shape(vec![U, 2]));
    let b = g.placeholder(DType::Float64, &[2], Some("b")).unwrap();
    let y = g.op("Add", &[z, b]).unwrap();
    assert_eq!(g.shape_of(y).unwrap(), Shape(vec![U, 2]));
    let col = g.op_spec(NodeSpec::new("Sum", &[y]).attr("axis", vec![1i64])).unwrap();
    assert_eq!(g.shape_of(col).unwrap(), Shape(vec![U]));
    let rows = g.op_spec(NodeSpec::new("Mean", &[y]).attr("axis", vec![0i64])).unwrap();
    assert_eq!(g.shape_of(rows).unwrap(), Shape(vec![2]));
    let flat = g.op_spec(NodeSpec::new("Reshape", &[y]).attr("shape", oxiflow_core::ops::AttrValue::Shape(vec![U]))).unwrap();
    assert_eq!(g.shape_of(flat).unwrap(), Shape(vec![U]));
    // a known inner dimension that differs is still caught when the node is added
    let w4 = g.placeholder(DType::Float64, &[4, 2], None).unwrap();
    let e = g.op("MatMul", &[x, w4]).unwrap_err().to_string();
    assert!(e.contains("MatMul") && e.contains("[?,3]") && e.contains("[4,2]"), "{e}");
}

#[test]
fn one_session_runs_every_batch_size_and_the_gradients_match_finite_differences() {
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[U, 3], Some("x")).unwrap();
    let w = g.placeholder(DType::Float64, &[3, 2], Some("w")).unwrap();
    let b = g.placeholder(DType::Float64, &[2], Some("b")).unwrap();
    let z = g.op("MatMul", &[x, w]).unwrap();
    let zb = g.op("Add", &[z, b]).unwrap();
    let t = g.op("Tanh", &[zb]).unwrap();
    let loss = g.op("Sum", &[t]).unwrap();
    let d = gradients(&mut g, &[loss], &[x, w, b], None, false).unwrap();
    let (dx, dw, db) = (d[0].unwrap(), d[1].unwrap(), d[2].unwrap());
    assert_eq!(g.shape_of(dx).unwrap(), Shape(vec![U, 3]));
    assert_eq!(g.shape_of(dw).unwrap(), Shape(vec![3, 2]));
    assert_eq!(g.shape_of(db).unwrap(), Shape(vec![2]));
    let s = session(g);
    let wv = rand_vec(6, 7, -1.0, 1.0);
    let bv = rand_vec(2, 8, -0.5, 0.5);
    for n in [1usize, 4, 9] {
        let xv = rand_vec(n * 3, n as u64, -1.0, 1.0);
        let feeds = [(x, t64(&[n, 3], xv.clone())), (w, t64(&[3, 2], wv.clone())), (b, t64(&[2], bv.clone()))];
        let out = run(&s, &feeds, &[loss, dx, dw, db]);
        assert_close(&out[0].to_f64_vec(), &[layer_loss(&xv, n, &wv, &bv)], 1e-12, "loss");
        assert_eq!(out[1].dims(), &[n, 3]);
        let eps = 1e-6;
        let fd = |f: &dyn Fn(f64) -> f64| (f(eps) - f(-eps)) / (2.0 * eps);
        let ndx: Vec<f64> = (0..n * 3)
            .map(|j| {
                fd(&|e| {
                    let mut v = xv.clone();
                    v[j] += e;
                    layer_loss(&v, n, &wv, &bv)
                })
            })
            .collect();
        let ndw: Vec<f64> = (0..6)
            .map(|j| {
                fd(&|e| {
                    let mut v = wv.clone();
                    v[j] += e;
                    layer_loss(&xv, n, &v, &bv)
                })
            })
            .collect();
        let ndb: Vec<f64> = (0..2)
            .map(|j| {
                fd(&|e| {
                    let mut v = bv.clone();
                    v[j] += e;
                    layer_loss(&xv, n, &wv, &v)
                })
            })
            .collect();
        assert_close(&out[1].to_f64_vec(), &ndx, 1e-6, &format!("dL/dx, batch {n}"));
        assert_close(&out[2].to_f64_vec(), &ndw, 1e-6, &format!("dL/dW, batch {n}"));
        assert_close(&out[3].to_f64_vec(), &ndb, 1e-6, &format!("dL/db, batch {n}"));
        // the gradient of the [?, 2] + [2] sum is dy itself (nothing can broadcast the
        // product), so nothing reads the product but the Add: product, bias and tanh run
        // as one _FusedMatMul, whose values the finite differences above checked
        let st = s.run(&feeds, &[loss, dx, dw, db], &[], true).unwrap().step_stats.unwrap();
        let fused: Vec<_> = st.labels.iter().filter(|l| l.op == "_FusedMatMul").map(|l| l.fused.len()).collect();
        assert_eq!(fused, vec![3], "batch {n}: {:?}", st.labels.iter().map(|l| &l.op).collect::<Vec<_>>());
    }
}

#[test]
fn reductions_reshape_and_softmax_take_any_fed_size() {
    matches_the_known_shape_graph(|g, x| {
        let m = g.op_spec(NodeSpec::new("Mean", &[x]).attr("axis", vec![0i64]).attr("keep_dims", true)).unwrap();
        let c = g.op("Sub", &[x, m]).unwrap();
        let sm = g.op("Softmax", &[c]).unwrap();
        let mx = g.op_spec(NodeSpec::new("Max", &[sm]).attr("axis", vec![1i64])).unwrap();
        let flat = g.op_spec(NodeSpec::new("Reshape", &[sm]).attr("shape", oxiflow_core::ops::AttrValue::Shape(vec![U, 2]))).unwrap();
        let sq = g.op("Square", &[flat]).unwrap();
        let a = g.op_spec(NodeSpec::new("Mean", &[sq])).unwrap();
        let bsum = g.op("Sum", &[mx]).unwrap();
        g.op("Add", &[a, bsum]).unwrap()
    });
}

#[test]
fn a_dimension_broadcast_only_at_run_time_gets_its_gradient_summed() {
    // x: [?] fed [1], y: [?] fed [4]: x broadcasts at run time, so dL/dx sums four terms
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[U], Some("x")).unwrap();
    let y = g.placeholder(DType::Float64, &[U], Some("y")).unwrap();
    let p = g.op("Mul", &[x, y]).unwrap();
    let l = g.op("Sum", &[p]).unwrap();
    let d = gradients(&mut g, &[l], &[x, y], None, false).unwrap();
    let s = session(g);
    let yv = vec![1.0, 2.0, 3.0, 4.5];
    let out = run(&s, &[(x, t64(&[1], vec![2.0])), (y, t64(&[4], yv.clone()))], &[l, d[0].unwrap(), d[1].unwrap()]);
    assert_close(&out[0].to_f64_vec(), &[21.0], 1e-15, "loss");
    assert_eq!(out[1].dims(), &[1]);
    assert_close(&out[1].to_f64_vec(), &[10.5], 1e-15, "dL/dx");
    assert_close(&out[2].to_f64_vec(), &[2.0; 4], 1e-15, "dL/dy");
    // and the other way round in the same session
    let out = run(&s, &[(x, t64(&[3], vec![1.0, 2.0, 3.0])), (y, t64(&[1], vec![5.0]))], &[d[0].unwrap(), d[1].unwrap()]);
    assert_close(&out[0].to_f64_vec(), &[5.0; 3], 1e-15, "dL/dx");
    assert_close(&out[1].to_f64_vec(), &[6.0], 1e-15, "dL/dy");
}

#[test]
fn mismatches_are_errors_naming_the_op_and_the_session_stays_usable() {
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[U, 3], Some("x")).unwrap();
    let v = g.placeholder(DType::Float64, &[U], Some("v")).unwrap();
    let w = g.placeholder(DType::Float64, &[U, 2], Some("w")).unwrap();
    let z = g.op("MatMul", &[x, w]).unwrap();
    let sum = g.op("Add", &[x, v]).unwrap();
    let k = g.placeholder(DType::Float64, &[2, 3], Some("k")).unwrap();
    let addn = g.op("AddN", &[x, k]).unwrap();
    assert_eq!(g.shape_of(addn).unwrap(), Shape(vec![2, 3]));
    // x^T w: both inner dimensions unknown, the [3, 2] product fully known
    let xtw = g.op_spec(NodeSpec::new("MatMul", &[x, w]).attr("transpose_a", true)).unwrap();
    assert_eq!(g.shape_of(xtw).unwrap(), Shape(vec![3, 2]));
    // an op that does not accept unknown dimensions says so when it is added
    let idx = g.constant(Tensor::from_vec(&[1, 1], vec![0i64], oxiflow_core::Layout::RowMajor).unwrap()).unwrap();
    let upd = g.placeholder(DType::Float64, &[1, 3], None).unwrap();
    let e = g.op("TensorScatterUpdate", &[x, idx, upd]).unwrap_err().to_string();
    assert!(e.contains("TensorScatterUpdate") && e.contains("[?,3]") && e.contains("unknown dimension"), "{e}");
    // Reshape of a partial shape to a full one: the element count is checked by the run
    let six = g.op_spec(NodeSpec::new("Reshape", &[x]).attr("shape", oxiflow_core::ops::AttrValue::Shape(vec![6]))).unwrap();
    assert_eq!(g.shape_of(six).unwrap(), Shape(vec![6]));
    let s = session(g);
    // a fed shape that contradicts the known dimension
    let e = s.run(&[(x, t64(&[2, 4], vec![0.0; 8]))], &[x], &[], false).unwrap_err().to_string();
    assert!(e.contains("x:0") && e.contains("[2,4]") && e.contains("[?,3]"), "{e}");
    // inner dimensions that only the run can compare
    let e = s.run(&[(x, t64(&[2, 3], vec![1.0; 6])), (w, t64(&[4, 2], vec![1.0; 8]))], &[z], &[], false).unwrap_err().to_string();
    assert!(e.contains("MatMul") && e.contains("[2,3]") && e.contains("[4,2]"), "{e}");
    // shapes that do not broadcast at run time
    let e = s.run(&[(x, t64(&[2, 3], vec![1.0; 6])), (v, t64(&[2], vec![1.0; 2]))], &[sum], &[], false).unwrap_err().to_string();
    assert!(e.contains("Add") && e.contains("[2,3]") && e.contains("[2]"), "{e}");
    // a node whose output is fully known still checks inputs only the run can size:
    // AddN of [?,3] and [2,3] is [2,3]; fed 4 rows, it is an error, not a crash
    let e = s.run(&[(x, t64(&[4, 3], vec![1.0; 12])), (k, t64(&[2, 3], vec![1.0; 6]))], &[addn], &[], false).unwrap_err().to_string();
    assert!(e.contains("AddN") && e.contains("[4,3]") && e.contains("[2,3]"), "{e}");
    let e = s.run(&[(x, t64(&[4, 3], vec![1.0; 12])), (w, t64(&[3, 2], vec![1.0; 6]))], &[xtw], &[], false).unwrap_err().to_string();
    assert!(e.contains("MatMul") && e.contains("[4,3]") && e.contains("[3,2]"), "{e}");
    let e = s.run(&[(x, t64(&[3, 3], vec![1.0; 9]))], &[six], &[], false).unwrap_err().to_string();
    assert!(e.contains("Reshape") && e.contains("[3,3]") && e.contains("[6]"), "{e}");
    assert_eq!(run(&s, &[(x, t64(&[2, 3], vec![1.0; 6]))], &[six])[0].dims(), &[6]);
    // the session still runs
    let out = run(&s, &[(x, t64(&[1, 3], vec![1.0, 2.0, 3.0])), (w, t64(&[3, 2], vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0]))], &[z]);
    assert_close(&out[0].to_f64_vec(), &[4.0, 5.0], 1e-15, "x w");
}

#[test]
fn a_partial_graph_and_its_gradient_run_on_a_gpu_without_soft_placement() {
    // every op, the run-time shape ops of the gradient included, has a GPU kernel: with
    // soft placement off, an emulated GPU runs the whole step and matches the CPU
    let build = |g: &mut Graph| -> (Output, Output, Output, Output, Output) {
        let x = g.placeholder(DType::Float64, &[U, 3], Some("x")).unwrap();
        let w = g.placeholder(DType::Float64, &[3, 2], Some("w")).unwrap();
        let z = g.op("MatMul", &[x, w]).unwrap();
        let t = g.op("Tanh", &[z]).unwrap();
        let m = g.op_spec(NodeSpec::new("Mean", &[t]).attr("axis", vec![1i64])).unwrap();
        let r = g.op_spec(NodeSpec::new("Reshape", &[m]).attr("shape", oxiflow_core::ops::AttrValue::Shape(vec![U, 1]))).unwrap();
        let p = g.op("Mul", &[r, x]).unwrap();
        let l = g.op("Sum", &[p]).unwrap();
        let d = gradients(g, &[l], &[x, w], None, true).unwrap();
        (x, w, l, d[0].unwrap(), d[1].unwrap())
    };
    let mut gc = Graph::new();
    let (xc, wc, lc, dxc, dwc) = build(&mut gc);
    let cpu = session(gc);
    let mut g = Graph::new();
    g.push_device(oxiflow_core::graph::DeviceScope::Spec(oxiflow_core::DeviceSpec::parse("/device:GPU:0").unwrap()));
    let (x, w, l, dx, dw) = build(&mut g);
    let ops: Vec<String> = g.nodes().iter().map(|n| n.op.name.to_string()).collect();
    assert!(
        ops.iter().any(|o| o == "_SumToShapeOf") && ops.iter().any(|o| o == "_BroadcastToShapeOf") && ops.iter().any(|o| o == "_ReshapeToShapeOf"),
        "{ops:?}"
    );
    let s = Session::new(Arc::new(RwLock::new(g)), SessionOptions { emulated_gpus: Some(1), allow_soft_placement: false, ..Default::default() }).unwrap();
    let wv = t64(&[3, 2], rand_vec(6, 3, -1.0, 1.0));
    for n in [2usize, 6] {
        let xv = rand_t(&[n, 3], 30 + n as u64, -1.0, 1.0);
        let got = run(&s, &[(x, xv.clone()), (w, wv.clone())], &[l, dx, dw]);
        let want = run(&cpu, &[(xc, xv), (wc, wv.clone())], &[lc, dxc, dwc]);
        assert_close(&got[0].to_f64_vec(), &want[0].to_f64_vec(), 1e-14, "loss");
        assert_eq!(got[1].dims(), &[n, 3]);
        assert_close(&got[1].to_f64_vec(), &want[1].to_f64_vec(), 1e-14, "dL/dx");
        assert_close(&got[2].to_f64_vec(), &want[2].to_f64_vec(), 1e-14, "dL/dW");
    }
    for (_, dev) in s.placed_devices() {
        assert!(dev.ends_with("GPU:0"), "placed on {dev}");
    }
}

/// Builds `build(x)` once with `x: [?, 4]` and, for each fed batch size, compares its value
/// and gradient with the same graph built for that size, and the gradient with central
/// finite differences.
fn matches_the_known_shape_graph(build: impl Fn(&mut Graph, Output) -> Output) {
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[U, 4], Some("x")).unwrap();
    let y = build(&mut g, x);
    let dx = gradients(&mut g, &[y], &[x], None, false).unwrap()[0].unwrap();
    let s = session(g);
    for n in [2usize, 5] {
        let xv = rand_t(&[n, 4], 50 + n as u64, -1.0, 1.0);
        let out = run(&s, &[(x, xv.clone())], &[y, dx]);
        let mut gk = Graph::new();
        let xk = gk.placeholder(DType::Float64, &[n, 4], None).unwrap();
        let yk = build(&mut gk, xk);
        let dk = gradients(&mut gk, &[yk], &[xk], None, false).unwrap()[0].unwrap();
        let want = eval(&gk, &[(xk, xv.clone())], &[yk, dk]).unwrap();
        assert_close(&out[0].to_f64_vec(), &want[0].to_f64_vec(), 1e-14, "value");
        assert_eq!(out[1].dims(), &[n, 4]);
        assert_close(&out[1].to_f64_vec(), &want[1].to_f64_vec(), 1e-13, "gradient");
        let base = xv.to_f64_vec();
        let at = |v: Vec<f64>| run(&s, &[(x, t64(&[n, 4], v))], &[y])[0].to_f64_vec()[0];
        let numeric: Vec<f64> = (0..base.len())
            .map(|j| {
                let (mut p, mut m) = (base.clone(), base.clone());
                p[j] += 1e-6;
                m[j] -= 1e-6;
                (at(p) - at(m)) / 2e-6
            })
            .collect();
        assert_close(&out[1].to_f64_vec(), &numeric, 1e-6, "finite differences");
    }
}

#[test]
fn indexing_and_slicing_along_an_unknown_dimension() {
    use oxiflow_core::ops::index::strided_slice;
    matches_the_known_shape_graph(|g, x| {
        // x[:, 1] (an index into the known axis), x[1:, 2:] (a slice of the unknown one),
        // x[end, :] (a negative index into the unknown one)
        let partial = !g.shape_of(x).unwrap().is_fully_defined();
        let col = strided_slice(g, x, &[0, 1], &[0, 2], &[1, 1], 1, 1, 2).unwrap();
        let tail = strided_slice(g, x, &[1, 2], &[0, 0], &[1, 1], 0, 3, 0).unwrap();
        let last = strided_slice(g, x, &[-1, 0], &[0, 0], &[1, 1], 2, 2, 1).unwrap();
        if partial {
            assert_eq!(g.shape_of(col).unwrap(), Shape(vec![U]));
            assert_eq!(g.shape_of(tail).unwrap(), Shape(vec![U, 2]));
            assert_eq!(g.shape_of(last).unwrap(), Shape(vec![4]));
        }
        let a = g.op("Sin", &[col]).unwrap();
        let b = g.op("Square", &[tail]).unwrap();
        let (a, b) = (g.op("Sum", &[a]).unwrap(), g.op("Sum", &[b]).unwrap());
        let c = g.op("Sum", &[last]).unwrap();
        let ab = g.op("Add", &[a, b]).unwrap();
        g.op("Mul", &[ab, c]).unwrap()
    });
}

#[test]
fn concatenation_and_stacking_with_an_unknown_dimension() {
    use oxiflow_core::ops::shape_ops::{concat, pack};
    matches_the_known_shape_graph(|g, x| {
        let partial = !g.shape_of(x).unwrap().is_fully_defined();
        let s = g.op("Sin", &[x]).unwrap();
        let c = concat(g, &[x, s], 1).unwrap();
        let p = pack(g, &[x, s], 2).unwrap();
        if partial {
            assert_eq!(g.shape_of(c).unwrap(), Shape(vec![U, 8]));
            assert_eq!(g.shape_of(p).unwrap(), Shape(vec![U, 4, 2]));
        }
        // along the unknown axis too: its gradient splits by the run-time sizes
        let rows = concat(g, &[x, s], 0).unwrap();
        if partial {
            assert_eq!(g.shape_of(rows).unwrap(), Shape(vec![U, 4]));
        }
        let (c2, p2, r2) = (g.op("Square", &[c]).unwrap(), g.op("Cos", &[p]).unwrap(), g.op("Exp", &[rows]).unwrap());
        let (a, b, r) = (g.op("Sum", &[c2]).unwrap(), g.op("Sum", &[p2]).unwrap(), g.op("Sum", &[r2]).unwrap());
        g.op("AddN", &[a, b, r]).unwrap()
    });
    // and its second derivative (the split's gradient is a concatenation)
    matches_the_known_shape_graph(|g, x| {
        let s = g.op("Sin", &[x]).unwrap();
        let rows = concat(g, &[x, s], 0).unwrap();
        let sq = g.op("Square", &[rows]).unwrap();
        let l = g.op("Sum", &[sq]).unwrap();
        let d = gradients(g, &[l], &[x], None, false).unwrap()[0].unwrap();
        let d3 = g.op("Mul", &[d, x]).unwrap();
        g.op("Sum", &[d3]).unwrap()
    });
}

#[test]
fn second_derivatives_through_the_run_time_shape_ops() {
    // the value is built from a first gradient, so the checked gradient is a second
    // derivative through _SumToShapeOf, _BroadcastToShapeOf and _ReshapeToShapeOf
    matches_the_known_shape_graph(|g, x| {
        let b = g.constant(t64(&[4], vec![0.5, -1.0, 2.0, 1.5])).unwrap();
        let xb = g.op("Mul", &[x, b]).unwrap();
        let sq = g.op("Mul", &[xb, x]).unwrap();
        let m = g.op_spec(NodeSpec::new("Mean", &[sq]).attr("axis", vec![1i64])).unwrap();
        let r = g.op_spec(NodeSpec::new("Reshape", &[m]).attr("shape", oxiflow_core::ops::AttrValue::Shape(vec![U, 1]))).unwrap();
        let t = g.op("Tanh", &[r]).unwrap();
        let l = g.op("Sum", &[t]).unwrap();
        let dx = gradients(g, &[l], &[x], None, false).unwrap()[0].unwrap();
        let s = g.op("Sin", &[x]).unwrap();
        let p = g.op("Mul", &[dx, s]).unwrap();
        g.op("Sum", &[p]).unwrap()
    });
}

#[test]
fn a_batch_of_ids_of_unknown_size_gathers_and_its_gradient_scatters() {
    // embedding lookup: params [6, 3] known, ids [?]; the oracle sums by hand
    let mut g = Graph::new();
    let p = g.placeholder(DType::Float64, &[6, 3], Some("params")).unwrap();
    let ids = g.placeholder(DType::Int64, &[U], Some("ids")).unwrap();
    let y = g.op("GatherV2", &[p, ids]).unwrap();
    assert_eq!(g.shape_of(y).unwrap(), Shape(vec![U, 3]));
    let t = g.op("Tanh", &[y]).unwrap();
    let l = g.op("Sum", &[t]).unwrap();
    let dp = gradients(&mut g, &[l], &[p], None, false).unwrap()[0].unwrap();
    assert_eq!(g.shape_of(dp).unwrap(), Shape(vec![6, 3]));
    // GatherNd with indices of unknown count, and its gradient
    let idx = g.placeholder(DType::Int64, &[U, 2], Some("idx")).unwrap();
    let z = g.op("GatherNd", &[p, idx]).unwrap();
    assert_eq!(g.shape_of(z).unwrap(), Shape(vec![U]));
    let zs = g.op("Square", &[z]).unwrap();
    let lz = g.op("Sum", &[zs]).unwrap();
    let dz = gradients(&mut g, &[lz], &[p], None, false).unwrap()[0].unwrap();
    // params of unknown row count: the gradient scatters into the fed rows
    let q = g.placeholder(DType::Float64, &[U, 3], Some("q")).unwrap();
    let yq = g.op("GatherV2", &[q, ids]).unwrap();
    let lq = g.op("Sum", &[yq]).unwrap();
    let dq = gradients(&mut g, &[lq], &[q], None, false).unwrap()[0].unwrap();
    assert_eq!(g.shape_of(dq).unwrap(), Shape(vec![U, 3]));
    let s = session(g);
    let pv = rand_vec(18, 61, -1.0, 1.0);
    for idv in [vec![2i64, 0, 2], vec![5, 1, 1, 1, 4, 0, 3]] {
        let n = idv.len();
        let ids_t = Tensor::from_vec(&[n], idv.clone(), oxiflow_core::Layout::RowMajor).unwrap();
        let pairs: Vec<i64> = idv.iter().flat_map(|&r| [r, (r + 1) % 3]).collect();
        let idx_t = Tensor::from_vec(&[n, 2], pairs.clone(), oxiflow_core::Layout::RowMajor).unwrap();
        let out = run(&s, &[(p, t64(&[6, 3], pv.clone())), (ids, ids_t.clone()), (idx, idx_t)], &[l, dp, lz, dz]);
        // the sum's gradient counts each row's ids, for 6 fed rows and for 7
        for rows in [6usize, 7] {
            let dqv = run(&s, &[(q, t64(&[rows, 3], vec![0.5; rows * 3])), (ids, ids_t.clone())], &[dq]).remove(0);
            assert_eq!(dqv.dims(), &[rows, 3]);
            let want: Vec<f64> = (0..rows * 3).map(|i| idv.iter().filter(|&&r| r as usize == i / 3).count() as f64).collect();
            assert_close(&dqv.to_f64_vec(), &want, 0.0, "gradient into the fed rows");
        }
        let (mut want_l, mut want_d) = (0.0, vec![0.0; 18]);
        for &r in &idv {
            for c in 0..3 {
                let v = pv[r as usize * 3 + c];
                want_l += v.tanh();
                want_d[r as usize * 3 + c] += 1.0 - v.tanh().powi(2);
            }
        }
        assert_close(&out[0].to_f64_vec(), &[want_l], 1e-13, "gather loss");
        assert_close(&out[1].to_f64_vec(), &want_d, 1e-13, "gather gradient (duplicates summed)");
        let (mut want_lz, mut want_dz) = (0.0, vec![0.0; 18]);
        for pr in pairs.chunks(2) {
            let at = pr[0] as usize * 3 + pr[1] as usize;
            want_lz += pv[at] * pv[at];
            want_dz[at] += 2.0 * pv[at];
        }
        assert_close(&out[2].to_f64_vec(), &[want_lz], 1e-13, "GatherNd loss");
        assert_close(&out[3].to_f64_vec(), &want_dz, 1e-13, "GatherNd gradient");
    }
}

#[test]
fn a_while_loop_over_a_batch_of_unknown_size_and_its_gradient() {
    use oxiflow_core::function::Function;
    use oxiflow_core::ops::AttrValue;
    // i < 3; (i + 1, sin(x) * a + x); the loop variable x has x's static shape, [?, 4] or
    // the fed size
    matches_the_known_shape_graph(|g, x| {
        let shape = g.shape_of(x).unwrap().0;
        let vars = |f: &mut Graph| {
            let i = f.placeholder(DType::Int64, &[], Some("i")).unwrap();
            let v = f.placeholder(DType::Float64, &shape, Some("x")).unwrap();
            (i, v)
        };
        let mut c = Graph::new();
        let (i, v) = vars(&mut c);
        let n = c.constant(Tensor::scalar(3i64)).unwrap();
        let less = c.op("Less", &[i, n]).unwrap();
        let cond = Arc::new(Function::new(c, vec![i, v], vec![less]).unwrap());
        let mut b = Graph::new();
        let (i, v) = vars(&mut b);
        let one = b.constant(Tensor::scalar(1i64)).unwrap();
        let i1 = b.op("Add", &[i, one]).unwrap();
        let a = b.constant(t64(&[4], vec![0.5, 1.0, -0.75, 1.25])).unwrap();
        let s = b.op("Sin", &[v]).unwrap();
        let sa = b.op("Mul", &[s, a]).unwrap();
        let v1 = b.op("Add", &[sa, v]).unwrap();
        let body = Arc::new(Function::new(b, vec![i, v], vec![i1, v1]).unwrap());
        let i0 = g.constant(Tensor::scalar(0i64)).unwrap();
        let w = g.add_node(NodeSpec::new("While", &[i0, x]).attr("cond", AttrValue::Func(cond)).attr("body", AttrValue::Func(body))).unwrap();
        let out = Output::new(w, 1);
        assert_eq!(g.shape_of(out).unwrap().0, shape);
        let sq = g.op("Square", &[out]).unwrap();
        g.op("Sum", &[sq]).unwrap()
    });
}

#[test]
fn ensure_shape_refines_the_static_shape_and_checks_the_run() {
    use oxiflow_core::ops::AttrValue;
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[U, U], Some("x")).unwrap();
    let e = g.op_spec(NodeSpec::new("EnsureShape", &[x]).attr("shape", AttrValue::Shape(vec![U, 2]))).unwrap();
    assert_eq!(g.shape_of(e).unwrap(), Shape(vec![U, 2]));
    let w = g.placeholder(DType::Float64, &[2, 3], Some("w")).unwrap();
    // without the refinement the inner dimension was unknown; now a wrong one is caught
    let w4 = g.placeholder(DType::Float64, &[4, 3], None).unwrap();
    let err = g.op("MatMul", &[e, w4]).unwrap_err().to_string();
    assert!(err.contains("MatMul") && err.contains("[?,2]"), "{err}");
    let err = g.op_spec(NodeSpec::new("EnsureShape", &[e]).attr("shape", AttrValue::Shape(vec![U, 3]))).unwrap_err().to_string();
    assert!(err.contains("EnsureShape") && err.contains("[?,2]") && err.contains("[?,3]"), "{err}");
    let z = g.op("MatMul", &[e, w]).unwrap();
    let l = g.op("Sum", &[z]).unwrap();
    let dx = gradients(&mut g, &[l], &[x], None, false).unwrap()[0].unwrap();
    let s = session(g);
    let wv = t64(&[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let out = run(&s, &[(x, t64(&[1, 2], vec![1.0, -1.0])), (w, wv.clone())], &[l, dx]);
    assert_close(&out[0].to_f64_vec(), &[-9.0], 1e-15, "value");
    assert_close(&out[1].to_f64_vec(), &[6.0, 15.0], 1e-15, "gradient passes through");
    let err = s.run(&[(x, t64(&[1, 3], vec![0.0; 3])), (w, wv.clone())], &[l], &[], false).unwrap_err().to_string();
    assert!(err.contains("EnsureShape") && err.contains("[1,3]") && err.contains("[?,2]"), "{err}");
    // the session still runs
    assert_eq!(run(&s, &[(x, t64(&[2, 2], vec![0.0; 4])), (w, wv)], &[l])[0].to_f64_vec(), vec![0.0]);
}

#[test]
fn tile_pad_and_scatter_nd_carry_unknown_dimensions_in_their_static_shapes() {
    use oxiflow_core::ops::AttrValue;
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[U, 3], Some("x")).unwrap();
    let t = g.op_spec(NodeSpec::new("Tile", &[x]).attr("multiples", vec![2i64, 2])).unwrap();
    assert_eq!(g.shape_of(t).unwrap(), Shape(vec![U, 6]));
    let t0 = g.op_spec(NodeSpec::new("Tile", &[x]).attr("multiples", vec![0i64, 1])).unwrap();
    assert_eq!(g.shape_of(t0).unwrap(), Shape(vec![0, 3]));
    let e = g.op_spec(NodeSpec::new("Tile", &[x]).attr("multiples", vec![1i64, i64::MAX])).unwrap_err().to_string();
    assert!(e.contains("Tile") && e.contains("overflows"), "{e}");
    let p = g.op_spec(NodeSpec::new("Pad", &[x]).attr("paddings", vec![1i64, 2, 0, 1])).unwrap();
    assert_eq!(g.shape_of(p).unwrap(), Shape(vec![U, 4]));
    // ScatterNd: the slice dimensions of `shape` may be unknown (taken from the updates),
    // the dimensions the indices address may not
    let idx = g.constant(Tensor::from_vec(&[2, 1], vec![2i64, 0], oxiflow_core::Layout::RowMajor).unwrap()).unwrap();
    let upd = g.placeholder(DType::Float64, &[2, U], Some("upd")).unwrap();
    let s = g.op_spec(NodeSpec::new("ScatterNd", &[idx, upd]).attr("shape", AttrValue::Shape(vec![4, U]))).unwrap();
    assert_eq!(g.shape_of(s).unwrap(), Shape(vec![4, U]));
    let e = g.op_spec(NodeSpec::new("ScatterNd", &[idx, upd]).attr("shape", AttrValue::Shape(vec![U, 3]))).unwrap_err().to_string();
    assert!(e.contains("ScatterNd") && e.contains("unknown dimension among the first 1"), "{e}");
    let sess = session(g);
    let out = run(&sess, &[(upd, t64(&[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]))], &[s]);
    assert_eq!(out[0].dims(), &[4, 3]);
    assert_close(&out[0].to_f64_vec(), &[4.0, 5.0, 6.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 0.0, 0.0, 0.0], 0.0, "rows 2 and 0");
}

#[test]
fn shape_gives_the_fed_dimensions() {
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float32, &[U, 2, U], Some("x")).unwrap();
    let s32 = g.op("Shape", &[x]).unwrap();
    assert_eq!((g.dtype_of(s32).unwrap(), g.shape_of(s32).unwrap()), (DType::Int32, Shape(vec![3])));
    let s64 = g.op_spec(NodeSpec::new("Shape", &[x]).attr("out_type", DType::Int64)).unwrap();
    assert_eq!(g.dtype_of(s64).unwrap(), DType::Int64);
    let e = g.op_spec(NodeSpec::new("Shape", &[x]).attr("out_type", DType::Float64)).unwrap_err().to_string();
    assert!(e.contains("Shape") && e.contains("out_type"), "{e}");
    let s = session(g);
    for (n, m) in [(1usize, 4usize), (5, 1)] {
        let xv = Tensor::from_vec(&[n, 2, m], vec![0f32; n * 2 * m], oxiflow_core::Layout::RowMajor).unwrap();
        let out = run(&s, &[(x, xv)], &[s32, s64]);
        assert_eq!(out[0].to_f64_vec(), vec![n as f64, 2.0, m as f64]);
        assert_eq!((out[0].dtype(), out[1].dtype()), (DType::Int32, DType::Int64));
        assert_eq!(out[1].to_f64_vec(), vec![n as f64, 2.0, m as f64]);
    }
}

#[test]
fn scatter_nd_to_shape_of_takes_the_indexed_dimension_from_like_at_run_time() {
    let mut g = Graph::new();
    // like [2, ?, 3] with axis 1 moved first: a scatter into [?, 2, 3]
    let like = g.placeholder(DType::Float64, &[2, U, 3], Some("like")).unwrap();
    let idx = g.constant(Tensor::from_vec(&[2, 1], vec![3i64, 0], oxiflow_core::Layout::RowMajor).unwrap()).unwrap();
    let upd = g.placeholder(DType::Float64, &[2, 2, 3], Some("upd")).unwrap();
    let s = g.op_spec(NodeSpec::new("_ScatterNdToShapeOf", &[idx, upd, like]).attr("axis", 1i64)).unwrap();
    assert_eq!(g.shape_of(s).unwrap(), Shape(vec![U, 2, 3]));
    let e = g.op_spec(NodeSpec::new("_ScatterNdToShapeOf", &[idx, upd, like]).attr("axis", 3i64)).unwrap_err().to_string();
    assert!(e.contains("_ScatterNdToShapeOf") && e.contains("axis 3"), "{e}");
    let bad = g.placeholder(DType::Float64, &[2, 4, 3], Some("bad")).unwrap();
    let e = g.op_spec(NodeSpec::new("_ScatterNdToShapeOf", &[idx, bad, like]).attr("axis", 1i64)).unwrap_err().to_string();
    assert!(e.contains("_ScatterNdToShapeOf") && e.contains("[2,4,3]"), "{e}");
    let sess = session(g);
    let u: Vec<f64> = (1..=12).map(f64::from).collect();
    for n in [4usize, 6] {
        let out = run(&sess, &[(upd, t64(&[2, 2, 3], u.clone())), (like, t64(&[2, n, 3], vec![0.0; 6 * n]))], &[s]);
        assert_eq!(out[0].dims(), &[n, 2, 3]);
        // the oracle: row 3 gets the first update slice, row 0 the second, the rest zeros
        let mut want = vec![0.0; n * 6];
        want[18..24].copy_from_slice(&u[..6]);
        want[..6].copy_from_slice(&u[6..]);
        assert_close(&out[0].to_f64_vec(), &want, 0.0, "scatter into the fed size");
    }
    // an index beyond the fed size is ScatterNd's error, naming the node; the session runs on
    let e = sess.run(&[(upd, t64(&[2, 2, 3], u.clone())), (like, t64(&[2, 3, 3], vec![0.0; 18]))], &[s], &[], false).unwrap_err().to_string();
    assert!(e.contains("ScatterNdToShapeOf") && e.contains("indices[0,0] = 3"), "{e}");
    assert_eq!(run(&sess, &[(upd, t64(&[2, 2, 3], u)), (like, t64(&[2, 5, 3], vec![0.0; 30]))], &[s])[0].dims(), &[5, 2, 3]);
}
