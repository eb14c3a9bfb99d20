//! Comparisons and `SelectV2` in fused clusters: masks kept as 1s and 0s, conditions fed
//! from outside, masks leaving a cluster as Bool; each against the unfused run's bits (the
//! random graphs of `fusion_tests.rs` mix them in too).

use super::tests::{bits, fused_steps, run, session, tensor, Rng};
use crate::dtype::DType;
use crate::graph::{Graph, NodeSpec};
use crate::ops::AttrValue;
use crate::tensor::{Layout, Tensor};
use std::sync::{Arc, RwLock};

/// A column-major `dims` tensor of random values in [-2, 2) (Julia's arrays are fed so).
pub(super) fn column_major(dtype: DType, dims: &[usize], seed: u64) -> Tensor {
    let t = tensor(DType::Float64, dims, &mut Rng(seed));
    let v = t.to_f64_vec();
    let (m, n) = (dims[0], dims[1]);
    let col: Vec<f64> = (0..m * n).map(|k| v[(k % m) * n + k / m]).collect();
    match dtype {
        DType::Float32 => Tensor::from_vec(dims, col.into_iter().map(|x| x as f32).collect(), Layout::ColumnMajor).unwrap(),
        _ => Tensor::from_vec(dims, col, Layout::ColumnMajor).unwrap(),
    }
}

/// `max(x, x')`'s gradient as `gradients` builds it: the comparison with the transposed
/// view stays unfused, and the seed's broadcast, the zeros and both selects become one
/// step with two outputs, whose values are the unfused bits.
#[test]
fn a_max_gradients_selects_fuse_around_its_comparison_with_a_transpose() {
    for dtype in [DType::Float32, DType::Float64] {
        let dims = [70usize, 70];
        let mut g = Graph::new();
        let x = g.placeholder(dtype, &dims, Some("x")).unwrap();
        let s = g.placeholder(dtype, &[], Some("s")).unwrap();
        let xt = g.op_spec(NodeSpec::new("Transpose", &[x]).attr("perm", vec![1i64, 0])).unwrap();
        let ge = g.op("GreaterEqual", &[x, xt]).unwrap();
        let dy = g.op_spec(NodeSpec::new("BroadcastTo", &[s]).attr("shape", AttrValue::Shape(dims.to_vec()))).unwrap();
        let zeros = g.op("ZerosLike", &[dy]).unwrap();
        let gx = g.op("SelectV2", &[ge, dy, zeros]).unwrap();
        let gy = g.op("SelectV2", &[ge, zeros, dy]).unwrap();
        let gyt = g.op_spec(NodeSpec::new("Transpose", &[gy]).attr("perm", vec![1i64, 0])).unwrap();
        let dx = g.op("AddN", &[gx, gyt]).unwrap();
        let feeds = vec![(x, column_major(dtype, &dims, 3)), (s, tensor(dtype, &[], &mut Rng(4)))];
        let g = Arc::new(RwLock::new(g));
        let (want, _) = run(&session(&g, false, 0), &feeds, &[dx, gx]);
        let (got, st) = run(&session(&g, true, 0), &feeds, &[dx, gx]);
        for (w, y) in want.iter().zip(&got) {
            assert!(bits(w) == bits(y), "{dtype:?}: fused and unfused differ");
        }
        assert_eq!(fused_steps(&st), 1);
        let l = st.labels.iter().find(|l| l.op == "_FusedElementwise").unwrap();
        let ops: Vec<&str> = l.fused.iter().map(|(_, o)| o.as_str()).collect();
        assert_eq!(ops, ["BroadcastTo", "ZerosLike", "SelectV2", "SelectV2"]);
        assert!(st.labels.iter().any(|l| l.op == "GreaterEqual"), "the comparison with x' stays unfused");
    }
}

/// A comparison read by a select in its cluster and also fetched leaves the cluster as a
/// Bool output; a fed Bool condition and a one-element one are read as masks; Equal holds
/// where an operand meets itself. Column-major inputs, several tiles over two threads.
#[test]
fn masks_leave_as_bool_and_fed_conditions_select() {
    for dtype in [DType::Float32, DType::Float64] {
        let dims = [300usize, 257];
        let mut g = Graph::new();
        let x = g.placeholder(dtype, &dims, Some("x")).unwrap();
        let y = g.placeholder(dtype, &dims, Some("y")).unwrap();
        let fed = g.placeholder(DType::Bool, &dims, Some("fed")).unwrap();
        let one = g.placeholder(DType::Bool, &[], Some("one")).unwrap();
        let t = g.op("Tanh", &[x]).unwrap();
        let c = g.op("Greater", &[t, y]).unwrap();
        let a = g.op("SelectV2", &[c, x, y]).unwrap();
        let r = g.op("Relu", &[a]).unwrap();
        let e = g.op("Equal", &[r, a]).unwrap();
        let b = g.op("SelectV2", &[e, t, r]).unwrap();
        let f = g.op("SelectV2", &[fed, b, x]).unwrap();
        let h = g.op("SelectV2", &[one, f, t]).unwrap();
        let bools: Vec<bool> = (0..dims[0] * dims[1]).map(|k| k % 3 == 0).collect();
        let feeds = vec![
            (x, column_major(dtype, &dims, 5)),
            (y, column_major(dtype, &dims, 6)),
            (fed, Tensor::from_vec(&dims, bools, Layout::RowMajor).unwrap()),
            (one, Tensor::from_vec(&[], vec![false], Layout::RowMajor).unwrap()),
        ];
        let g = Arc::new(RwLock::new(g));
        let fetches = [h, c, e];
        let (want, _) = run(&session(&g, false, 0), &feeds, &fetches);
        let (got, st) = run(&session(&g, true, 0), &feeds, &fetches);
        assert_eq!(fused_steps(&st), 1);
        assert_eq!(st.labels.len(), 1, "every op in the one fused step");
        for (k, (w, y)) in want.iter().zip(&got).enumerate() {
            assert_eq!(w.dtype(), y.dtype());
            assert_eq!(w.dims(), y.dims());
            assert!(bits(w) == bits(y), "{dtype:?}: fetch {k} differs");
        }
        // both outcomes occur, so the masks were tested both ways
        for m in &got[1..] {
            let v = m.to_f64_vec();
            assert!(v.contains(&0.0) && v.contains(&1.0), "{dtype:?}: a mask of one value");
        }
    }
}
