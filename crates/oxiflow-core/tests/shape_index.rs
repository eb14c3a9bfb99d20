//! Layout and indexing ops (`Transpose`, `ConcatV2`, `Pack`, `Unpack`, `SplitV`, `Tile`,
//! `ReverseV2`, `Pad`, `Squeeze`, `ExpandDims`, `StridedSlice`, `GatherV2`, `GatherNd`,
//! `ScatterNd`, `TensorScatterUpdate`/`Add`/`Sub`). Oracles: naive index loops written here (row-major strides), central finite
//! differences for gradients, and the same graph on an emulated GPU.

mod common;
use common::*;
use oxiflow_core::ops::index::strided_slice;
use oxiflow_core::ops::AttrValue;
use oxiflow_core::{DType, Graph, Layout, NodeSpec, Output, Result, Session, SessionOptions, Tensor};
use std::sync::{Arc, RwLock};

const GPU0: &str = "/job:localhost/replica:0/task:0/device:GPU:0";

/// Multi-index of flat position `flat` in `dims` (row-major).
fn unflat(flat: usize, dims: &[usize]) -> Vec<usize> {
    let s = strides(dims);
    (0..dims.len()).map(|d| (flat / s[d]) % dims[d]).collect()
}
fn flat(ix: &[usize], dims: &[usize]) -> usize {
    ix.iter().zip(strides(dims)).map(|(i, s)| i * s).sum()
}

fn node(op: &str, xs: &[Output]) -> NodeSpec {
    NodeSpec::new(op, xs)
}
fn ints(v: &[i64]) -> Vec<i64> {
    v.to_vec()
}
fn i64t(dims: &[usize], v: Vec<i64>) -> Tensor {
    Tensor::from_vec(dims, v, Layout::RowMajor).unwrap()
}

/// Output 0 of a one-input op on a constant, evaluated.
fn run1(x: &Tensor, spec: impl Fn(Output) -> NodeSpec) -> Tensor {
    let mut g = Graph::new();
    let c = g.constant(x.clone()).unwrap();
    let o = g.op_spec(spec(c)).unwrap();
    eval1(&g, &[], o)
}

#[test]
fn transpose_permutes_axes() {
    let dims = [2, 3, 4];
    let x = rand_t(&dims, 1, -1.0, 1.0);
    let v = x.to_f64_vec();
    for perm in [[2, 0, 1], [1, 0, 2], [0, 2, 1]] {
        let out = run1(&x, |c| node("Transpose", &[c]).attr("perm", ints(&perm.map(|p| p as i64))));
        let od: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
        assert_eq!(out.dims(), &od[..]);
        let want: Vec<f64> = (0..24)
            .map(|f| {
                let o = unflat(f, &od);
                let mut ix = [0; 3];
                for (k, &p) in perm.iter().enumerate() {
                    ix[p] = o[k];
                }
                v[flat(&ix, &dims)]
            })
            .collect();
        assert_eq!(out.to_f64_vec(), want, "perm {perm:?}");
    }
    // Float32 and Int64 move the same way
    let x32 = t32(&[2, 3], (0..6).map(f64::from).collect());
    assert_eq!(run1(&x32, |c| node("Transpose", &[c]).attr("perm", ints(&[1, 0]))).to_f64_vec(), [0., 3., 1., 4., 2., 5.]);
    let xi = i64t(&[2, 3], (0..6).collect());
    let t = run1(&xi, |c| node("Transpose", &[c]).attr("perm", ints(&[1, 0])));
    assert_eq!((t.dtype(), t.to_f64_vec()), (DType::Int64, vec![0., 3., 1., 4., 2., 5.]));
}

#[test]
fn concat_pack_unpack_split() {
    let (a, b) = (rand_t(&[2, 3], 2, -1.0, 1.0), rand_t(&[2, 2], 3, -1.0, 1.0));
    let mut g = Graph::new();
    let (ca, cb) = (g.constant(a.clone()).unwrap(), g.constant(b.clone()).unwrap());
    let cat = g.op_spec(node("ConcatV2", &[ca, cb]).attr("axis", -1i64)).unwrap();
    let out = eval1(&g, &[], cat);
    assert_eq!(out.dims(), &[2, 5]);
    let (va, vb, vo) = (a.to_f64_vec(), b.to_f64_vec(), out.to_f64_vec());
    for i in 0..2 {
        for j in 0..5 {
            let want = if j < 3 { va[i * 3 + j] } else { vb[i * 2 + j - 3] };
            assert_eq!(vo[i * 5 + j], want);
        }
    }
    let parts = oxiflow_core::ops::shape_ops::split_v(&mut g, cat, &[1, -1, 2], 1).unwrap();
    let got: Vec<Tensor> = parts.iter().map(|&p| eval1(&g, &[], p)).collect();
    assert_eq!(got.iter().map(|t| t.dims()[1]).collect::<Vec<_>>(), [1, 2, 2]);
    assert_eq!(got[2].to_f64_vec(), vb);
    // Pack along axis 1 and Unpack back
    let c2 = g.constant(rand_t(&[2, 3], 4, -1.0, 1.0)).unwrap();
    let st = g.op_spec(node("Pack", &[ca, c2]).attr("axis", 1i64)).unwrap();
    let s = eval1(&g, &[], st);
    assert_eq!(s.dims(), &[2, 2, 3]);
    let v2 = eval1(&g, &[], c2).to_f64_vec();
    for f in 0..12 {
        let ix = unflat(f, &[2, 2, 3]);
        let src = if ix[1] == 0 { &va } else { &v2 };
        assert_eq!(s.to_f64_vec()[f], src[ix[0] * 3 + ix[2]]);
    }
    let un = oxiflow_core::ops::shape_ops::unpack(&mut g, st, 1).unwrap();
    assert_eq!(eval1(&g, &[], un[1]).to_f64_vec(), v2);
    // concat of mismatched shapes names op and shapes
    let e = g.op_spec(node("ConcatV2", &[ca, cb]).attr("axis", 0i64)).unwrap_err().to_string();
    assert!(e.contains("ConcatV2") && e.contains("[2,3]") && e.contains("[2,2]"), "{e}");
    let e = oxiflow_core::ops::shape_ops::split_v(&mut g, cat, &[2, 2], 1).unwrap_err().to_string();
    assert!(e.contains("SplitV") && e.contains("[2,5]"), "{e}");
    // sizes whose sum wraps around to the dimension are refused, not split
    let e = oxiflow_core::ops::shape_ops::split_v(&mut g, cat, &[i64::MAX, i64::MAX, 7], 1).unwrap_err().to_string();
    assert!(e.contains("do not add up"), "{e}");
    // unstacking a huge dimension is refused while building (it once aborted on allocating
    // 2^40 output types); the graph keeps working
    let n = g.len();
    let big = g.placeholder(DType::Float64, &[1 << 40], None).unwrap();
    let e = oxiflow_core::ops::shape_ops::unpack(&mut g, big, 0).unwrap_err().to_string();
    assert!(e.contains("Unpack") && e.contains("1099511627776 outputs"), "{e}");
    assert_eq!(g.len(), n + 1);
    let un = oxiflow_core::ops::shape_ops::unpack(&mut g, st, 1).unwrap();
    assert_eq!(eval1(&g, &[], un[0]).to_f64_vec(), va);
}

#[test]
fn split_pieces_share_a_contiguous_input_and_copy_others_in_its_order() {
    // a 4x6 input in both memory orders, split along each axis; oracle: the logical
    // (row-major) index loop
    let dims = [4usize, 6];
    let v: Vec<f64> = (0..24).map(|i| i as f64 * 0.5 - 3.0).collect();
    for layout in [Layout::RowMajor, Layout::ColumnMajor] {
        let data = match layout {
            Layout::RowMajor => v.clone(),
            Layout::ColumnMajor => (0..24).map(|k| v[(k % 4) * 6 + k / 4]).collect(),
        };
        let x = Tensor::from_vec(&dims, data, layout).unwrap();
        for (axis, sizes) in [(0usize, [1i64, 3]), (1, [2, 4])] {
            let mut g = Graph::new();
            let p = g.placeholder(DType::Float64, &dims, Some("x")).unwrap();
            let parts = oxiflow_core::ops::shape_ops::split_v(&mut g, p, &sizes, axis as i64).unwrap();
            let s = Session::new(Arc::new(RwLock::new(g)), SessionOptions::default()).unwrap();
            let got = s.run(&[(p, x.clone())], &parts, &[], false).unwrap().values;
            let mut at = 0;
            for (k, piece) in got.iter().enumerate() {
                let n = sizes[k] as usize;
                let mut pd = dims;
                pd[axis] = n;
                assert_eq!(piece.dims(), &pd);
                let want: Vec<f64> = (0..pd[0] * pd[1])
                    .map(|f| {
                        let (i, j) = (f / pd[1], f % pd[1]);
                        if axis == 0 {
                            v[(i + at) * 6 + j]
                        } else {
                            v[i * 6 + j + at]
                        }
                    })
                    .collect();
                assert_eq!(piece.to_f64_vec(), want, "{layout:?} axis {axis} piece {k}");
                // contiguous pieces (first axis of row-major, last of column-major) are
                // windows of the input's buffer; the others keep its memory order
                let (Tensor::F64(a), Tensor::F64(xa)) = (piece, &x) else { panic!("f64") };
                let contiguous = (axis == 0) == (layout == Layout::RowMajor);
                let inside = a.as_ptr() >= xa.as_ptr() && a.as_ptr() < xa.as_ptr().wrapping_add(24);
                assert_eq!(inside, contiguous, "{layout:?} axis {axis} piece {k}: shares the input's buffer");
                if !pd.contains(&1) {
                    let column = a.t().is_standard_layout() && !a.is_standard_layout();
                    assert_eq!(column, layout == Layout::ColumnMajor, "{layout:?} axis {axis} piece {k}: memory order");
                }
                at += n;
            }
        }
    }
}

#[test]
fn tile_reverse_pad_squeeze_expand() {
    let x = rand_t(&[2, 3], 5, -1.0, 1.0);
    let v = x.to_f64_vec();
    let t = run1(&x, |c| node("Tile", &[c]).attr("multiples", ints(&[2, 3])));
    assert_eq!(t.dims(), &[4, 9]);
    for f in 0..36 {
        let ix = unflat(f, &[4, 9]);
        assert_eq!(t.to_f64_vec()[f], v[(ix[0] % 2) * 3 + ix[1] % 3]);
    }
    let r = run1(&x, |c| node("ReverseV2", &[c]).attr("axis", ints(&[1])));
    for f in 0..6 {
        let ix = unflat(f, &[2, 3]);
        assert_eq!(r.to_f64_vec()[f], v[ix[0] * 3 + 2 - ix[1]]);
    }
    let r = run1(&x, |c| node("ReverseV2", &[c]).attr("axis", ints(&[0, -1])));
    assert_eq!(r.to_f64_vec(), v.iter().rev().copied().collect::<Vec<_>>());
    let p = run1(&x, |c| node("Pad", &[c]).attr("paddings", ints(&[1, 0, 2, 1])));
    assert_eq!(p.dims(), &[3, 6]);
    for f in 0..18 {
        let ix = unflat(f, &[3, 6]);
        let inside = ix[0] >= 1 && (2..5).contains(&ix[1]);
        let want = if inside { v[(ix[0] - 1) * 3 + ix[1] - 2] } else { 0.0 };
        assert_eq!(p.to_f64_vec()[f], want);
    }
    // Padding that makes a dimension overflow is refused when the node is built (it wrapped
    // around and the kernel panicked), and the graph is unchanged.
    let mut g = Graph::new();
    let c = g.constant(x.clone()).unwrap();
    let before = g.len();
    let e = g.op_spec(node("Pad", &[c]).attr("paddings", ints(&[0, 0, 0, i64::MAX]))).unwrap_err().to_string();
    assert!(e.contains("Pad") && e.contains("overflows"), "{e}");
    let e = g.op_spec(node("Pad", &[c]).attr("paddings", ints(&[0, 0, i64::MAX, i64::MAX]))).unwrap_err().to_string();
    assert!(e.contains("Pad") && e.contains("dimension 1") && e.contains("overflows"), "{e}");
    // past TF's int64 dimensions (the gradient's slice of it panicked)
    let e = g.op_spec(node("Pad", &[c]).attr("paddings", ints(&[0, i64::MAX - 1, 0, 0]))).unwrap_err().to_string();
    assert!(e.contains("Pad") && e.contains("dimension 0") && e.contains("overflows"), "{e}");
    assert_eq!(g.len(), before);
    let y = rand_t(&[1, 3, 1], 6, -1.0, 1.0);
    assert_eq!(run1(&y, |c| node("Squeeze", &[c])).dims(), &[3]);
    assert_eq!(run1(&y, |c| node("Squeeze", &[c]).attr("squeeze_dims", ints(&[2]))).dims(), &[1, 3]);
    let e = Graph::new().op_spec(node("Squeeze", &[])).unwrap_err().to_string();
    assert!(e.contains("Squeeze"), "{e}");
    let mut g = Graph::new();
    let c = g.constant(y.clone()).unwrap();
    let e = g.op_spec(node("Squeeze", &[c]).attr("squeeze_dims", ints(&[1]))).unwrap_err().to_string();
    assert!(e.contains("Squeeze") && e.contains("[1,3,1]"), "{e}");
    let ex = run1(&x, |c| node("ExpandDims", &[c]).attr("dim", -1i64));
    assert_eq!((ex.dims(), ex.to_f64_vec()), (&[2usize, 3, 1][..], v.clone()));
}

/// NumPy's `x[b:e:s]` along one dimension, written independently of the kernel: the
/// positions `i` in `0..d` reached from the clamped start in steps of `s` before the end.
fn numpy_range(d: i64, b: Option<i64>, e: Option<i64>, s: i64) -> Vec<usize> {
    let norm = |x: i64| if x < 0 { x + d } else { x };
    let (start, stop) = if s > 0 {
        (b.map_or(0, |b| norm(b).clamp(0, d)), e.map_or(d, |e| norm(e).clamp(0, d)))
    } else {
        (b.map_or(d - 1, |b| norm(b).clamp(-1, d - 1)), e.map_or(-1, |e| norm(e).clamp(-1, d - 1)))
    };
    let mut ix: Vec<usize> =
        (0..d).filter(|&i| (i - start) % s == 0 && if s > 0 { i >= start && i < stop } else { i <= start && i > stop }).map(|i| i as usize).collect();
    if s < 0 {
        ix.reverse();
    }
    ix
}

#[test]
fn strided_slice_follows_numpy() {
    let dims = [5, 4];
    let x = rand_t(&dims, 7, -1.0, 1.0);
    let v = x.to_f64_vec();
    type Spec = (Option<i64>, Option<i64>, i64);
    let cases: [(Spec, Spec); 6] = [
        ((Some(1), Some(4), 1), (None, None, 1)),
        ((Some(0), Some(5), 2), (Some(-1), None, -1)),
        ((Some(4), None, -2), (Some(1), Some(3), 1)),
        ((None, None, -1), (Some(3), Some(0), -1)),
        ((Some(-2), Some(100), 1), (Some(2), Some(2), 1)),
        ((Some(3), Some(1), 1), (Some(-3), Some(-1), 1)),
    ];
    for (r, c) in cases {
        let mut g = Graph::new();
        let cx = g.constant(x.clone()).unwrap();
        let (mut bm, mut em) = (0, 0);
        let mut begin = vec![0; 2];
        let mut end = vec![0; 2];
        for (i, (b, e, _)) in [r, c].iter().enumerate() {
            match b {
                Some(b) => begin[i] = *b,
                None => bm |= 1 << i,
            }
            match e {
                Some(e) => end[i] = *e,
                None => em |= 1 << i,
            }
        }
        let o = strided_slice(&mut g, cx, &begin, &end, &[r.2, c.2], bm, em, 0).unwrap();
        let (ri, ci) = (numpy_range(5, r.0, r.1, r.2), numpy_range(4, c.0, c.1, c.2));
        let out = eval1(&g, &[], o);
        assert_eq!(out.dims(), &[ri.len(), ci.len()], "{r:?} {c:?}");
        let v = &v;
        let want: Vec<f64> = ri.iter().flat_map(|&i| ci.iter().map(move |&j| v[i * 4 + j])).collect();
        assert_eq!(out.to_f64_vec(), want, "{r:?} {c:?}");
    }
    // shrink axis 0 (an integer index drops the dimension); -1 is the last row
    let mut g = Graph::new();
    let cx = g.constant(x.clone()).unwrap();
    let o = strided_slice(&mut g, cx, &[-1, 1], &[0, 3], &[1, 1], 0, 0, 1).unwrap();
    let out = eval1(&g, &[], o);
    assert_eq!((out.dims(), out.to_f64_vec()), (&[2usize][..], vec![v[17], v[18]]));
    let e = strided_slice(&mut g, cx, &[5, 0], &[6, 4], &[1, 1], 0, 0, 1).unwrap_err().to_string();
    assert!(e.contains("StridedSlice") && e.contains("index 5") && e.contains("[5,4]"), "{e}");
}

#[test]
fn gather_scatter_match_naive_loops() {
    let dims = [3, 4];
    let x = rand_t(&dims, 8, -1.0, 1.0);
    let v = x.to_f64_vec();
    let mut g = Graph::new();
    let cx = g.constant(x.clone()).unwrap();
    let idx = g.constant(i64t(&[2, 2], vec![2, 0, 0, 1])).unwrap();
    let g0 = g.op("GatherV2", &[cx, idx]).unwrap();
    let out = eval1(&g, &[], g0);
    assert_eq!(out.dims(), &[2, 2, 4]);
    for f in 0..16 {
        let ix = unflat(f, &[2, 2, 4]);
        let row = [2, 0, 0, 1][ix[0] * 2 + ix[1]];
        assert_eq!(out.to_f64_vec()[f], v[row * 4 + ix[2]]);
    }
    let i32idx = g.constant(Tensor::from_vec(&[3], vec![3i32, 3, 0], Layout::RowMajor).unwrap()).unwrap();
    let g1 = g.op_spec(node("GatherV2", &[cx, i32idx]).attr("axis", 1i64)).unwrap();
    let out = eval1(&g, &[], g1);
    assert_eq!(out.dims(), &[3, 3]);
    for i in 0..3 {
        assert_eq!(&out.to_f64_vec()[i * 3..i * 3 + 3], &[v[i * 4 + 3], v[i * 4 + 3], v[i * 4]]);
    }
    let scalar = g.constant(Tensor::scalar(1i64)).unwrap();
    let g2 = g.op("GatherV2", &[cx, scalar]).unwrap();
    assert_eq!(eval1(&g, &[], g2).to_f64_vec(), v[4..8].to_vec());
    let nd = g.constant(i64t(&[3, 2], vec![0, 0, 2, 3, 1, 2])).unwrap();
    let gn = g.op("GatherNd", &[cx, nd]).unwrap();
    assert_eq!(eval1(&g, &[], gn).to_f64_vec(), vec![v[0], v[11], v[6]]);
    let upd = g.constant(t64(&[3], vec![1.0, 2.0, 4.0])).unwrap();
    let dup = g.constant(i64t(&[3, 1], vec![1, 3, 1])).unwrap();
    let sc = g.op_spec(node("ScatterNd", &[dup, upd]).attr("shape", AttrValue::Shape(vec![4]))).unwrap();
    assert_eq!(eval1(&g, &[], sc).to_f64_vec(), vec![0.0, 5.0, 0.0, 2.0]); // duplicates add up

    // a run-time index out of range names the node, index and range; the graph stays usable
    let p = g.placeholder(DType::Int64, &[2], Some("k")).unwrap();
    let gp = g.op("GatherV2", &[cx, p]).unwrap();
    let e = eval(&g, &[(p, i64t(&[2], vec![0, 3]))], &[gp]).unwrap_err().to_string();
    assert!(e.contains("GatherV2") && e.contains("indices[1] = 3 is not in [0, 3)"), "{e}");
    assert_eq!(eval1(&g, &[(p, i64t(&[2], vec![2, 1]))], gp).to_f64_vec()[..4], v[8..12]);
    let bad = g.constant(i64t(&[1, 2], vec![0, 4])).unwrap();
    let gb = g.op("GatherNd", &[cx, bad]).unwrap();
    let e = eval(&g, &[], &[gb]).unwrap_err().to_string();
    assert!(e.contains("GatherNd") && e.contains("[3,4]"), "{e}");
    let f = g.constant(t64(&[1], vec![0.5])).unwrap();
    let e = g.op("GatherV2", &[cx, f]).unwrap_err().to_string();
    assert!(e.contains("GatherV2") && e.contains("Int32 or Int64"), "{e}");
}

/// `TensorScatter{Update,Add,Sub}` of rows (k = 1) and of elements (k = 2) of a 3x4 matrix,
/// against a loop over the index rows applied to a copy (last update wins for `Update`).
#[test]
fn tensor_scatter_matches_a_loop_over_index_rows() {
    let dims = [3, 4];
    let x = rand_t(&dims, 21, -1.0, 1.0);
    let v = x.to_f64_vec();
    for (op, f) in [("TensorScatterUpdate", (|_, u| u) as fn(f64, f64) -> f64), ("TensorScatterAdd", |a, u| a + u), ("TensorScatterSub", |a, u| a - u)] {
        // k = 1: whole rows, row 2 twice
        let rows = [2usize, 0, 2];
        let u = rand_t(&[3, 4], 22, -1.0, 1.0);
        let mut g = Graph::new();
        let (cx, cu) = (g.constant(x.clone()).unwrap(), g.constant(u.clone()).unwrap());
        let i = g.constant(i64t(&[3, 1], rows.iter().map(|&r| r as i64).collect())).unwrap();
        let o = g.op(op, &[cx, i, cu]).unwrap();
        let mut want = v.clone();
        for (n, &r) in rows.iter().enumerate() {
            for j in 0..4 {
                want[r * 4 + j] = f(want[r * 4 + j], u.to_f64_vec()[n * 4 + j]);
            }
        }
        assert_eq!(eval1(&g, &[], o).to_f64_vec(), want, "{op}, rows");
        // k = 2: single elements, (1,3) twice, Int32 indices
        let at = [(1usize, 3usize), (0, 0), (1, 3)];
        let u = rand_t(&[3], 23, -1.0, 1.0);
        let cu = g.constant(u.clone()).unwrap();
        let i = g.constant(Tensor::from_vec(&[3, 2], at.iter().flat_map(|&(a, b)| [a as i32, b as i32]).collect(), Layout::RowMajor).unwrap()).unwrap();
        let o = g.op(op, &[cx, i, cu]).unwrap();
        let mut want = v.clone();
        for (n, &(a, b)) in at.iter().enumerate() {
            want[a * 4 + b] = f(want[a * 4 + b], u.to_f64_vec()[n]);
        }
        assert_eq!(eval1(&g, &[], o).to_f64_vec(), want, "{op}, elements");
        // the input constant is not changed by the scatter (a copy is updated)
        assert_eq!(eval1(&g, &[], cx).to_f64_vec(), v);

        // shapes checked when building, indices when running; the graph stays usable
        let bad_u = g.constant(rand_t(&[2], 24, 0.0, 1.0)).unwrap();
        let e = g.op(op, &[cx, i, bad_u]).unwrap_err().to_string();
        assert!(e.contains(op) && e.contains("[3]") && e.contains("[2]"), "{e}");
        let oob = g.constant(i64t(&[1, 2], vec![3, 0])).unwrap();
        let one = g.constant(t64(&[1], vec![1.0])).unwrap();
        let ob = g.op(op, &[cx, oob, one]).unwrap();
        let e = eval(&g, &[], &[ob]).unwrap_err().to_string();
        assert!(e.contains(op) && e.contains("[3,4]"), "{e}");
        assert_eq!(eval1(&g, &[], o).to_f64_vec(), want);
    }
}

#[test]
fn tensor_scatter_gradients() {
    let x = rand_t(&[4, 3], 25, -1.0, 1.0);
    let u = rand_t(&[3, 3], 26, -1.0, 1.0);
    for op in ["TensorScatterUpdate", "TensorScatterAdd", "TensorScatterSub"] {
        // distinct rows: Update's gradient is defined (with a repeated row it depends on
        // which update wins, as in TF)
        check_grads(&[x.clone(), u.clone()], move |g, xs| {
            let i = g.constant(i64t(&[3, 1], vec![3, 0, 1]))?;
            let s = g.op(op, &[xs[0], i, xs[1]])?;
            g.op("Sin", &[s])
        });
    }
    // repeated elements add up in Add and Sub, so their gradients do too
    let e = rand_t(&[3], 27, -1.0, 1.0);
    for op in ["TensorScatterAdd", "TensorScatterSub"] {
        check_grads(&[x.clone(), e.clone()], move |g, xs| {
            let i = g.constant(i64t(&[3, 2], vec![2, 1, 0, 0, 2, 1]))?;
            let s = g.op(op, &[xs[0], i, xs[1]])?;
            g.op("Square", &[s])
        });
    }
}

#[test]
fn reshape_to_a_wrong_size_names_both_shapes() {
    let mut g = Graph::new();
    let c = g.constant(rand_t(&[2, 3], 9, 0.0, 1.0)).unwrap();
    let e = oxiflow_core::ops::array::reshape(&mut g, c, &vec![4, 2].into()).unwrap_err().to_string();
    assert!(e.contains("Reshape") && e.contains("[2,3]") && e.contains("[4,2]"), "{e}");
}

fn spec1(op: &'static str, k: &'static str, v: Vec<i64>) -> impl Fn(&mut Graph, &[Output]) -> Result<Output> {
    move |g, xs| g.op_spec(NodeSpec::new(op, &[xs[0]]).attr(k, v.clone()))
}

#[test]
fn layout_gradients() {
    let x = rand_t(&[2, 3, 2], 11, -1.0, 1.0);
    check_grads(std::slice::from_ref(&x), spec1("Transpose", "perm", vec![2, 0, 1]));
    check_grads(std::slice::from_ref(&x), spec1("Tile", "multiples", vec![2, 1, 3]));
    check_grads(std::slice::from_ref(&x), spec1("ReverseV2", "axis", vec![0, 2]));
    check_grads(std::slice::from_ref(&x), spec1("Pad", "paddings", vec![1, 0, 0, 2, 1, 1]));
    check_grads(std::slice::from_ref(&x), |g, xs| g.op_spec(NodeSpec::new("ExpandDims", &[xs[0]]).attr("dim", 1i64)));
    let y = rand_t(&[2, 1, 3], 12, -1.0, 1.0);
    check_grads(&[y], |g, xs| g.op("Squeeze", &[xs[0]]));
    let (a, b) = (rand_t(&[2, 3], 13, -1.0, 1.0), rand_t(&[2, 2], 14, -1.0, 1.0));
    check_grads(&[a.clone(), b], |g, xs| g.op_spec(NodeSpec::new("ConcatV2", xs).attr("axis", 1i64)));
    check_grads(&[a.clone(), a.clone()], |g, xs| g.op_spec(NodeSpec::new("Pack", xs).attr("axis", 2i64)));
    // only some outputs of Unpack / SplitV used: the others get zeros
    check_grads(std::slice::from_ref(&x), |g, xs| {
        let u = oxiflow_core::ops::shape_ops::unpack(g, xs[0], 1)?;
        g.op("Mul", &[u[0], u[2]])
    });
    check_grads(std::slice::from_ref(&x), |g, xs| {
        let s = oxiflow_core::ops::shape_ops::split_v(g, xs[0], &[1, 2], 1)?;
        g.op("Square", &[s[1]])
    });
}

#[test]
fn indexing_gradients_with_repeated_indices() {
    let x = rand_t(&[4, 3], 15, -1.0, 1.0);
    check_grads(std::slice::from_ref(&x), |g, xs| strided_slice(g, xs[0], &[3, 0], &[0, 3], &[-2, 2], 0, 0, 0));
    check_grads(std::slice::from_ref(&x), |g, xs| strided_slice(g, xs[0], &[1, -1], &[2, 0], &[1, 1], 0, 0, 3));
    for axis in [0i64, 1] {
        check_grads(std::slice::from_ref(&x), move |g, xs| {
            let i = g.constant(i64t(&[2, 2], vec![2, 0, 2, 1]))?;
            g.op_spec(NodeSpec::new("GatherV2", &[xs[0], i]).attr("axis", axis))
        });
    }
    check_grads(std::slice::from_ref(&x), |g, xs| {
        let i = g.constant(Tensor::scalar(2i32))?;
        g.op_spec(NodeSpec::new("GatherV2", &[xs[0], i]).attr("axis", 1i64))
    });
    check_grads(std::slice::from_ref(&x), |g, xs| {
        let i = g.constant(i64t(&[3, 2], vec![0, 1, 3, 2, 0, 1]))?;
        g.op("GatherNd", &[xs[0], i])
    });
    let u = rand_t(&[3, 2], 16, -1.0, 1.0);
    check_grads(&[u], |g, xs| {
        let i = g.constant(i64t(&[3, 1], vec![2, 0, 2]))?;
        g.op_spec(NodeSpec::new("ScatterNd", &[i, xs[0]]).attr("shape", AttrValue::Shape(vec![4, 2])))
    });
}

#[test]
fn second_derivatives_through_slices_and_gathers() {
    let x = rand_t(&[4, 3], 17, -1.0, 1.0);
    check_second_grads(std::slice::from_ref(&x), 1e-5, |g, xs| {
        let s = strided_slice(g, xs[0], &[1, 0], &[4, 3], &[2, 1], 0, 0, 0)?;
        g.op("Square", &[s])
    });
    check_second_grads(std::slice::from_ref(&x), 1e-5, |g, xs| {
        let i = g.constant(i64t(&[3], vec![1, 1, 2]))?;
        let s = g.op_spec(NodeSpec::new("GatherV2", &[xs[0], i]).attr("axis", 1i64))?;
        g.op("Sin", &[s])
    });
    check_second_grads(std::slice::from_ref(&x), 1e-5, |g, xs| {
        let p = g.op_spec(NodeSpec::new("Pad", &[xs[0]]).attr("paddings", vec![1, 1, 0, 2]))?;
        let t = g.op_spec(NodeSpec::new("Transpose", &[p]).attr("perm", vec![1, 0]))?;
        g.op("Square", &[t])
    });
}

#[test]
fn default_names_follow_tf_python() {
    let mut g = Graph::new();
    let x = g.constant(rand_t(&[2, 2], 18, 0.0, 1.0)).unwrap();
    let i = g.constant(Tensor::scalar(0i64)).unwrap();
    let name = |g: &Graph, o: Output| g.node(o.node).unwrap().name.clone();
    let t = g.op_spec(node("Transpose", &[x]).attr("perm", ints(&[1, 0]))).unwrap();
    let c = g.op_spec(node("ConcatV2", &[x, x]).attr("axis", 0i64)).unwrap();
    let p = g.op_spec(node("Pack", &[x, x])).unwrap();
    let s = strided_slice(&mut g, x, &[0, 0], &[1, 2], &[1, 1], 0, 0, 1).unwrap();
    let ga = g.op("GatherV2", &[x, i]).unwrap();
    assert_eq!([name(&g, t), name(&g, c), name(&g, p), name(&g, s), name(&g, ga)], ["transpose", "concat", "stack", "strided_slice", "GatherV2"]);
}

/// The same layout and indexing graph on CPU and on an emulated GPU: the ops are placed on
/// the GPU and give the CPU's values.
#[test]
fn emulated_gpu_runs_them_with_the_same_values() {
    let x = rand_t(&[3, 4], 19, -1.0, 1.0);
    let mut g = Graph::new();
    let cx = g.constant(x.clone()).unwrap();
    let t = g.op_spec(node("Transpose", &[cx]).attr("perm", ints(&[1, 0]))).unwrap();
    let s = strided_slice(&mut g, t, &[3, 0], &[0, 3], &[-1, 2], 0, 0, 0).unwrap();
    let i = g.constant(i64t(&[2], vec![1, 0])).unwrap();
    let ga = g.op_spec(node("GatherV2", &[s, i]).attr("axis", 1i64)).unwrap();
    let tl = g.op_spec(node("Tile", &[ga]).attr("multiples", ints(&[1, 2]))).unwrap();
    let loss = g.op("Sum", &[tl]).unwrap();
    let dx = oxiflow_core::autodiff::gradients(&mut g, &[loss], &[cx], None, false).unwrap()[0].unwrap();
    let want: Vec<Vec<f64>> = eval(&g, &[], &[tl, dx]).unwrap().iter().map(Tensor::to_f64_vec).collect();
    let g = Arc::new(RwLock::new(g));
    let sess = Session::new(g.clone(), SessionOptions { emulated_gpus: Some(1), ..Default::default() }).unwrap();
    let out = sess.run(&[], &[tl, dx], &[], false).unwrap();
    let got: Vec<Vec<f64>> = out.values.iter().map(Tensor::to_f64_vec).collect();
    assert_eq!(got, want);
    for o in [t, s, ga, tl] {
        assert_eq!(sess.assigned_device(o.node).unwrap(), GPU0);
    }
    let grad_ops: Vec<String> = g.read().unwrap().nodes().iter().filter(|n| n.name.starts_with("gradients/")).map(|n| n.op.name.to_string()).collect();
    assert!(grad_ops.iter().any(|o| o == "ScatterNd") && grad_ops.iter().any(|o| o == "StridedSliceGrad"), "{grad_ops:?}");
}

/// `ExpandDims` and `Squeeze` of a row-major tensor share its buffer (as `Reshape` and TF's
/// kernels, which forward the input); a column-major one (a feed from Julia) is copied to
/// row-major with every element in place.
#[test]
fn expand_dims_and_squeeze_share_a_row_major_buffer() {
    let ptr = |t: &Tensor| match t {
        Tensor::F64(a) => a.as_ptr(),
        _ => panic!("Float64 expected"),
    };
    let mut g = Graph::new();
    let p = g.placeholder(DType::Float64, &[2, 3], None).unwrap();
    let e = g.op_spec(node("ExpandDims", &[p]).attr("dim", AttrValue::Int(0))).unwrap();
    let s = g.op_spec(node("Squeeze", &[e])).unwrap();
    let row = rand_t(&[2, 3], 9, -1.0, 1.0);
    let out = eval(&g, &[(p, row.clone())], &[e, s]).unwrap();
    assert_eq!((out[0].dims(), out[1].dims()), (&[1usize, 2, 3][..], &[2usize, 3][..]));
    assert_eq!((ptr(&out[0]), ptr(&out[1])), (ptr(&row), ptr(&row)), "no copy of a row-major input");
    let v = row.to_f64_vec();
    // the same values, stored column-major: element [i, j] at i + 2j
    let col = Tensor::from_vec(&[2, 3], (0..3).flat_map(|j| (0..2).map(move |i| (i, j))).map(|(i, j)| v[i * 3 + j]).collect::<Vec<f64>>(), Layout::ColumnMajor)
        .unwrap();
    let out = eval(&g, &[(p, col.clone())], &[e, s]).unwrap();
    assert_eq!((out[0].to_f64_vec(), out[1].to_f64_vec()), (v.clone(), v));
    assert_ne!(ptr(&out[0]), ptr(&col));
}

/// The same values as the row-major `t`, stored column-major.
fn column_major(t: &Tensor) -> Tensor {
    let (dims, v) = (t.dims().to_vec(), t.to_f64_vec());
    let n = v.len();
    // element at row-major position f goes to the column-major position of its index
    let mut col = vec![0.0; n];
    for (f, &x) in v.iter().enumerate() {
        let ix = unflat(f, &dims);
        let (mut pos, mut stride) = (0, 1);
        for (i, d) in ix.iter().zip(&dims) {
            pos += i * stride;
            stride *= d;
        }
        col[pos] = x;
    }
    Tensor::from_vec(&dims, col, Layout::ColumnMajor).unwrap()
}

fn is_column_major(t: &Tensor) -> bool {
    match t {
        Tensor::F64(a) => a.t().is_standard_layout(),
        _ => panic!("Float64 expected"),
    }
}

/// A `StridedSlice` of a column-major tensor (a Julia array) gives the values of the same
/// slice of the row-major one, stored column-major (so a fetch needs no transposing copy);
/// its gradient from a column-major `dy` the values of that from a row-major one. Cases:
/// steps, negative steps, empty slices, shrunk axes (one, two, all but one), rank 2 and 3.
#[test]
fn strided_slice_of_a_column_major_tensor_keeps_its_order() {
    // (dims, begin, end, strides, begin_mask, end_mask, shrink_axis_mask)
    type Case = (&'static [usize], &'static [i64], &'static [i64], &'static [i64], i64, i64, i64);
    let cases: [Case; 8] = [
        (&[6, 5], &[1, 0], &[5, 0], &[1, 1], 0, 2, 0),
        (&[6, 5], &[0, 4], &[6, 0], &[2, -1], 0, 2, 0),
        (&[6, 5], &[5, 1], &[0, 4], &[-2, 2], 1, 0, 0),
        (&[6, 5], &[2, 0], &[2, 5], &[1, 1], 0, 0, 0),
        (&[6, 5], &[0, 3], &[6, 4], &[1, 1], 0, 0, 2),
        (&[6, 5], &[-1, 0], &[0, 5], &[1, 1], 0, 0, 1),
        (&[4, 3, 5], &[1, 2, 0], &[3, 0, 5], &[1, -1, 2], 0, 2, 0),
        (&[4, 3, 5], &[3, 0, 1], &[0, 3, 4], &[1, 1, 1], 0, 0, 5),
    ];
    for (k, (dims, begin, end, strides, bm, em, sm)) in cases.into_iter().enumerate() {
        let row = rand_t(dims, 40 + k as u64, -1.0, 1.0);
        let col = column_major(&row);
        assert_eq!(col.to_f64_vec(), row.to_f64_vec());
        let mut g = Graph::new();
        let p = g.placeholder(DType::Float64, dims, None).unwrap();
        let o = strided_slice(&mut g, p, begin, end, strides, bm, em, sm).unwrap();
        let want = eval(&g, &[(p, row.clone())], &[o]).unwrap().remove(0);
        let got = eval(&g, &[(p, col.clone())], &[o]).unwrap().remove(0);
        assert_eq!((got.dims(), got.to_f64_vec()), (want.dims(), want.to_f64_vec()), "case {k}");
        if got.dims().len() >= 2 && got.dims().iter().all(|&d| d > 1) {
            assert!(is_column_major(&got), "case {k}: the slice of a column-major tensor is column-major");
        }
        // the gradient op from dy in either order
        let dy = rand_t(want.dims(), 80 + k as u64, -1.0, 1.0);
        let d = g.placeholder(DType::Float64, want.dims(), None).unwrap();
        let mut spec = node("StridedSliceGrad", &[d]).attr("shape", AttrValue::Shape(dims.to_vec()));
        for (name, v) in [("begin", begin), ("end", end), ("strides", strides)] {
            spec = spec.attr(name, ints(v));
        }
        let spec = spec.attr("begin_mask", AttrValue::Int(bm)).attr("end_mask", AttrValue::Int(em)).attr("shrink_axis_mask", AttrValue::Int(sm));
        let gd = g.op_spec(spec).unwrap();
        let want_g = eval(&g, &[(d, dy.clone())], &[gd]).unwrap().remove(0);
        let got_g = eval(&g, &[(d, column_major(&dy))], &[gd]).unwrap().remove(0);
        assert_eq!(got_g.dims(), dims, "case {k}");
        assert_eq!(got_g.to_f64_vec(), want_g.to_f64_vec(), "case {k}: StridedSliceGrad");
        // and the row-major gradient puts dy where the slice took x from
        let total: f64 = want_g.to_f64_vec().iter().sum();
        assert!((total - dy.to_f64_vec().iter().sum::<f64>()).abs() < 1e-12, "case {k}");
    }
}

/// `GatherV2` of a column-major params (a Julia array) gives, for a vector or scalar of
/// indices along any axis, the values the naive loop gives (NumPy's `take`), stored
/// column-major; a matrix of indices goes through the row-major path with the same values;
/// an index out of range is still an error naming it.
#[test]
fn gather_of_a_column_major_params_keeps_its_order() {
    // (params dims, axis, indices dims, indices)
    type Case = (&'static [usize], i64, &'static [usize], &'static [i64]);
    let cases: [Case; 7] = [
        (&[5, 4], 0, &[3], &[4, 0, 4]),
        (&[5, 4], 1, &[5], &[3, 1, 1, 0, 2]),
        (&[5, 4], -1, &[], &[2]),
        (&[5, 4], 0, &[], &[3]),
        (&[3, 4, 6], 1, &[2], &[3, 0]),
        (&[3, 4, 6], 2, &[4], &[5, 5, 1, 0]),
        (&[5, 4], 1, &[2, 2], &[0, 3, 3, 1]),
    ];
    for (k, (dims, axis, idims, ivals)) in cases.into_iter().enumerate() {
        let row = rand_t(dims, 120 + k as u64, -1.0, 1.0);
        let v = row.to_f64_vec();
        let mut g = Graph::new();
        let p = g.placeholder(DType::Float64, dims, None).unwrap();
        let ix = g.constant(i64t(idims, ivals.to_vec())).unwrap();
        let o = g.op_spec(node("GatherV2", &[p, ix]).attr("axis", axis)).unwrap();
        let got = eval(&g, &[(p, column_major(&row))], &[o]).unwrap().remove(0);
        // the naive loop: output index = (params index before axis, index position, after)
        let ax = axis.rem_euclid(dims.len() as i64) as usize;
        let odims: Vec<usize> = dims[..ax].iter().chain(idims.iter()).chain(&dims[ax + 1..]).copied().collect();
        assert_eq!(got.dims(), &odims[..], "case {k}");
        let ni = idims.len();
        let want: Vec<f64> = (0..odims.iter().product())
            .map(|f| {
                let oi = unflat(f, &odims);
                let j = if ni == 0 { 0 } else { flat(&oi[ax..ax + ni], idims) };
                let mut pi: Vec<usize> = oi[..ax].to_vec();
                pi.push(ivals[j] as usize);
                pi.extend_from_slice(&oi[ax + ni..]);
                v[flat(&pi, dims)]
            })
            .collect();
        assert_eq!(got.to_f64_vec(), want, "case {k}");
        if ni <= 1 && got.dims().len() >= 2 && got.dims().iter().all(|&d| d > 1) {
            assert!(is_column_major(&got), "case {k}: column-major");
        }
    }
    let mut g = Graph::new();
    let p = g.placeholder(DType::Float64, &[5, 4], None).unwrap();
    let ix = g.constant(i64t(&[2], vec![1, 4])).unwrap();
    let o = g.op_spec(node("GatherV2", &[p, ix]).attr("axis", 1i64)).unwrap();
    let e = eval(&g, &[(p, column_major(&rand_t(&[5, 4], 7, -1.0, 1.0)))], &[o]).unwrap_err().to_string();
    assert!(e.contains("GatherV2") && e.contains("indices[1] = 4 is not in [0, 4)"), "{e}");
}

/// A slice whose lists do not match the rank of a partly known shape names that shape as
/// the graph has it (`[?,3]`), not with the stand-in size shape inference slices it with.
#[test]
fn strided_slice_error_names_the_unknown_dimensions() {
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[oxiflow_core::shape::UNKNOWN, 3], Some("x")).unwrap();
    let spec = NodeSpec::new("StridedSlice", &[x]).attr("begin", vec![0i64]).attr("end", vec![1i64]).attr("strides", vec![1i64]);
    let e = g.op_spec(spec).unwrap_err().to_string();
    assert!(e.contains("StridedSlice") && e.contains("[?,3]") && !e.contains(&(1usize << 40).to_string()), "{e}");
}

/// `Tile` of an empty tensor by a huge multiple is an empty tensor of the grown shape, and
/// the gradient through it (a `Sum` over the multiple's axis of an empty `dy`) returns at
/// once: the kernel used to build a list of 2^40 views (an aborting allocation), and the
/// reduction to loop 2^40 times over nothing.
#[test]
fn tile_of_an_empty_tensor_by_a_huge_multiple() {
    let mut g = Graph::new();
    let x = g.constant(Tensor::filled(DType::Float64, &[0, 3], 0.0)).unwrap();
    let y = g.op_spec(NodeSpec::new("Tile", &[x]).attr("multiples", vec![1i64 << 40, 2])).unwrap();
    let loss = g.op_spec(NodeSpec::new("Sum", &[y]).attr("axis", vec![0i64, 1])).unwrap();
    let dx = oxiflow_core::autodiff::gradients(&mut g, &[loss], &[x], None, false).unwrap()[0].unwrap();
    let s = Session::new(Arc::new(RwLock::new(g)), SessionOptions::default()).unwrap();
    let out = s.run(&[], &[y, loss, dx], &[], false).unwrap().values;
    assert_eq!(out[0].dims(), &[0, 6]);
    assert_eq!(out[1].to_f64_vec(), vec![0.0]);
    assert_eq!(out[2].dims(), &[0, 3]);
}

/// `Tile` against the definition `out[i] = x[i mod dims]`, for ranks 0 to 3, multiples of
/// 0, 1 and more on every axis, row- and column-major inputs, and an integer and a boolean
/// tensor.
#[test]
fn tile_matches_the_modulo_definition() {
    let cases: [(&[usize], &[i64]); 7] =
        [(&[], &[]), (&[3], &[4]), (&[1], &[7]), (&[2, 3], &[1, 5]), (&[2, 3], &[3, 1]), (&[2, 1, 3], &[2, 4, 2]), (&[2, 2, 3], &[1, 0, 2])];
    for (dims, m) in cases {
        for layout in [Layout::RowMajor, Layout::ColumnMajor] {
            let n: usize = dims.iter().product();
            let x = Tensor::from_vec(dims, (0..n).map(|i| i as f64 * 0.5 - 1.0).collect(), layout).unwrap();
            let v = x.to_f64_vec();
            let t = run1(&x, |c| node("Tile", &[c]).attr("multiples", ints(m)));
            let out: Vec<usize> = dims.iter().zip(m).map(|(&d, &k)| d * k as usize).collect();
            assert_eq!(t.dims(), &out[..], "{dims:?} x {m:?}");
            let got = t.to_f64_vec();
            for (f, &g) in got.iter().enumerate() {
                let ix = unflat(f, &out);
                let src: Vec<usize> = ix.iter().zip(dims).map(|(&i, &d)| i % d).collect();
                assert_eq!(g, v[flat(&src, dims)], "{dims:?} x {m:?} {layout:?} at {ix:?}");
            }
            for (dt, conv) in [(DType::Int32, 0), (DType::Bool, 1)] {
                let xi = match conv {
                    0 => Tensor::from_vec(dims, (0..n).map(|i| i as i32).collect(), layout).unwrap(),
                    _ => Tensor::from_vec(dims, (0..n).map(|i| i % 3 == 0).collect::<Vec<bool>>(), layout).unwrap(),
                };
                let ti = run1(&xi, |c| node("Tile", &[c]).attr("multiples", ints(m)));
                assert_eq!(ti.dtype(), dt);
                let (vi, gi) = (xi.to_f64_vec(), ti.to_f64_vec());
                for (f, &g) in gi.iter().enumerate() {
                    let src: Vec<usize> = unflat(f, &out).iter().zip(dims).map(|(&i, &d)| i % d).collect();
                    assert_eq!(g, vi[flat(&src, dims)], "{dt:?} {dims:?} x {m:?} {layout:?}");
                }
            }
        }
    }
}
