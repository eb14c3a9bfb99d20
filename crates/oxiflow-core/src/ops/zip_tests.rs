//! [`zip2_par`] against an independent oracle: every output element computed from its own
//! multi-index with the broadcasting rule written out (NumPy's: sizes aligned from the
//! right, a size-1 axis repeats), over row- and column-major operands, every pairing, sizes
//! below and above the sharding threshold, and one to three intra-op threads.

use super::*;
use crate::graph::Graph;
use crate::intra_op::with_intra_op_threads;
use ndarray::{ArcArray, IxDyn, ShapeBuilder};

/// Runs `f` with a kernel context whose node's output has `dims` (all that zip2_par reads).
fn with_ctx<R>(dims: &[usize], f: impl FnOnce(&KernelCtx) -> R) -> R {
    let mut g = Graph::new();
    let x = g.placeholder(crate::DType::Float64, dims, None).unwrap();
    let state = crate::eval::HostState::default();
    let node = g.node(x.node).unwrap();
    f(&KernelCtx { node, inputs: &[], state: &state })
}

fn array(dims: &[usize], fortran: bool, seed: f64) -> ArcArray<f64, IxDyn> {
    let n: usize = dims.iter().product();
    let v: Vec<f64> = (0..n).map(|i| ((i as f64 * 0.37 + seed) * 1.7).sin()).collect();
    if fortran {
        ArcArray::from_shape_vec(IxDyn(dims).f(), v).unwrap()
    } else {
        ArcArray::from_shape_vec(IxDyn(dims), v).unwrap()
    }
}

/// `a[idx] - 2 b[idx']` by the broadcasting rule, element by element.
fn oracle(a: &ArcArray<f64, IxDyn>, b: &ArcArray<f64, IxDyn>, dims: &[usize]) -> Vec<f64> {
    let at = |x: &ArcArray<f64, IxDyn>, idx: &[usize]| {
        let off = dims.len() - x.ndim();
        let i: Vec<usize> = (0..x.ndim()).map(|k| if x.shape()[k] == 1 { 0 } else { idx[off + k] }).collect();
        x[IxDyn(&i)]
    };
    let n: usize = dims.iter().product();
    (0..n)
        .map(|flat| {
            let mut idx = vec![0; dims.len()];
            let mut r = flat;
            for k in (0..dims.len()).rev() {
                idx[k] = r % dims[k];
                r /= dims[k];
            }
            at(a, &idx) - 2.0 * at(b, &idx)
        })
        .collect()
}

#[test]
fn every_pairing_and_layout_gives_the_broadcasting_rule_on_any_thread_count() {
    // (full dims, small dims): same, scalar, bias row, column, and cases zip2 must take
    let cases: [(&[usize], &[usize]); 8] = [
        (&[300, 257], &[300, 257]),
        (&[300, 257], &[]),
        (&[300, 257], &[257]),
        (&[300, 257], &[300, 1]),
        (&[4, 90, 130], &[90, 130]),
        (&[4, 90, 130], &[4, 1, 1]),
        (&[7, 9], &[1, 9]),
        (&[6, 5, 4], &[6, 1, 4]), // neither rows nor columns: the ndarray path
    ];
    for (dims, small) in cases {
        // each operand in either memory order (mixed orders must not pair elements by memory)
        for (fortran, small_fortran) in [(false, false), (true, true), (true, false), (false, true)] {
            for threads in [1, 2, 3] {
                let a = array(dims, fortran, 0.5);
                let b = array(small, small_fortran, 1.5);
                let want = oracle(&a, &b, dims);
                let f = |x: f64, y: f64| x - 2.0 * y;
                let got = with_ctx(dims, |ctx| {
                    with_intra_op_threads(threads, || [zip2_par(ctx, &a, &b, f).unwrap(), zip2_par(ctx, &b, &a, move |y, x| f(x, y)).unwrap()])
                });
                for (swap, got) in [false, true].into_iter().zip(got) {
                    assert_eq!(got.shape(), dims);
                    let got_flat: Vec<f64> = got.as_standard_layout().iter().copied().collect();
                    let bad = got_flat.iter().zip(&want).position(|(g, w)| g != w);
                    assert!(
                        bad.is_none(),
                        "{dims:?} with {small:?}, column-major {fortran}/{small_fortran}, {threads} threads, swapped {swap}: element {bad:?} differs"
                    );
                }
            }
        }
    }
}

#[test]
fn column_major_operands_give_a_column_major_result() {
    let dims = [200, 300];
    let a = array(&dims, true, 0.1);
    let bias = array(&[300], false, 0.2);
    let got = with_ctx(&dims, |ctx| with_intra_op_threads(2, || zip2_par(ctx, &a, &bias, |x: f64, y: f64| x + y)).unwrap());
    assert!(got.t().is_standard_layout(), "kept Julia's order");
    assert_eq!(got.as_standard_layout().iter().copied().collect::<Vec<_>>(), oracle(&a, &array(&[300], false, 0.2).mapv(|v| -v / 2.0).into_shared(), &dims));
}

/// Two matrices of one shape in opposite orders give a column-major result whichever comes
/// first (a row-major gradient times a column-major activation stays in Julia's order), with
/// the broadcasting rule's values; two row-major ones stay row-major.
#[test]
fn opposite_orders_give_the_column_major_ones_order() {
    let dims = [130, 70];
    let (row, col) = (array(&dims, false, 0.3), array(&dims, true, 0.4));
    let sub2 = |x: f64, y: f64| x - 2.0 * y;
    for (a, b) in [(&row, &col), (&col, &row)] {
        for threads in [1, 2] {
            let par = with_ctx(&dims, |ctx| with_intra_op_threads(threads, || zip2_par(ctx, a, b, sub2)).unwrap());
            let serial = with_ctx(&dims, |ctx| zip2(ctx, a, b, sub2).unwrap());
            for got in [par, serial] {
                assert!(got.t().is_standard_layout() && !got.is_standard_layout(), "column-major");
                assert_eq!(got.iter().copied().collect::<Vec<_>>(), oracle(a, b, &dims));
            }
        }
    }
    let other = array(&dims, false, 0.5);
    let got = with_ctx(&dims, |ctx| zip2_par(ctx, &row, &other, sub2).unwrap());
    assert!(got.is_standard_layout());
    assert_eq!(got.iter().copied().collect::<Vec<_>>(), oracle(&row, &other, &dims));
}
