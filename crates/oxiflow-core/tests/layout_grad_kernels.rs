//! The kernels a gradient of Julia's (column-major) arrays runs through, which keep the
//! memory order of their operands: `SelectV2`, `AddN`, `BroadcastTo`, `ZerosLike` and
//! `OnesLike`, `ScatterNd` and a `Reshape` to the same shape. Each runs on row-major,
//! column-major, mixed and broadcast operands of every dtype it takes, small and above
//! the size at which the kernels split work over threads, and is checked against a loop
//! over logical indices written here; the storage order may change the speed, never a
//! value.

mod common;
use common::*;
use ndarray::{ArrayD, IxDyn, ShapeBuilder};
use oxiflow_core::intra_op::with_intra_op_threads;
use oxiflow_core::ops::AttrValue;
use oxiflow_core::tensor::Element;
use oxiflow_core::{Graph, NodeSpec, Output, Tensor};

/// A tensor of `dims` with logical (row-major) values `v`, stored column-major when asked.
fn stored<T: Element>(dims: &[usize], v: Vec<T>, column_major: bool) -> Tensor {
    let a = ArrayD::from_shape_vec(IxDyn(dims), v).unwrap();
    if !column_major {
        return Tensor::from_array(a);
    }
    let mut c = ArrayD::from_elem(IxDyn(dims).f(), T::zero());
    c.assign(&a);
    Tensor::from_array(c)
}

/// The logical (row-major) values of a tensor.
fn logical<T: Element>(t: &Tensor) -> Vec<T> {
    t.array::<T>().unwrap().iter().copied().collect()
}

/// Whether a tensor of rank >= 2 is stored column-major (and not also row-major).
fn column_major<T: Element>(t: &Tensor) -> bool {
    let a = t.array::<T>().unwrap();
    a.ndim() >= 2 && !a.is_standard_layout() && a.t().is_standard_layout()
}

/// Whether a tensor of rank >= 2 is stored row-major (and not also column-major).
fn row_major<T: Element>(t: &Tensor) -> bool {
    let a = t.array::<T>().unwrap();
    a.ndim() >= 2 && a.is_standard_layout() && !a.t().is_standard_layout()
}

/// The element of an operand of shape `shape` (logical values `v`) that NumPy's
/// broadcasting pairs with output element `flat` of `dims`.
fn broadcast_at<T: Copy>(v: &[T], shape: &[usize], dims: &[usize], flat: usize) -> T {
    let (os, s) = (strides(dims), strides(shape));
    let lead = dims.len() - shape.len();
    let off: usize = (0..shape.len()).map(|k| if shape[k] == 1 { 0 } else { (flat / os[lead + k]) % dims[lead + k] * s[k] }).sum();
    v[off]
}

/// Runs one node on constant inputs.
fn run_op(inputs: &[Tensor], spec: impl Fn(&[Output]) -> NodeSpec) -> Tensor {
    let mut g = Graph::new();
    let cs: Vec<Output> = inputs.iter().map(|t| g.constant(t.clone()).unwrap()).collect();
    let o = g.op_spec(spec(&cs)).unwrap();
    eval1(&g, &[], o)
}

/// How an operand of an elementwise op is given.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Row,
    Col,
    Scalar,
    /// one element, with the output's rank
    One,
    /// the output's last axis only (a broadcast other than a single element)
    Last,
}

fn operand<T: Element>(kind: Kind, dims: &[usize], seed: u64, val: fn(f64) -> T) -> (Vec<usize>, Tensor, Vec<T>) {
    let shape = match kind {
        Kind::Row | Kind::Col => dims.to_vec(),
        Kind::Scalar => vec![],
        Kind::One => vec![1; dims.len()],
        Kind::Last => vec![*dims.last().unwrap()],
    };
    let v: Vec<T> = rand_vec(shape.iter().product(), seed, -4.0, 4.0).into_iter().map(val).collect();
    (shape.clone(), stored(&shape, v.clone(), kind == Kind::Col), v)
}

fn check_select<T: Element>(val: fn(f64) -> T) {
    use Kind::*;
    let kinds = [Row, Col, Scalar, One, Last];
    for dims in [&[3usize, 5][..], &[300, 257]] {
        let n: usize = dims.iter().product();
        for (i, &kc) in kinds.iter().enumerate() {
            for (j, &kx) in kinds.iter().enumerate() {
                for (k, &ky) in kinds.iter().enumerate() {
                    if ![kc, kx, ky].iter().any(|k| matches!(k, Row | Col)) {
                        continue; // (the output would be smaller than dims)
                    }
                    let seed = (25 * i + 5 * j + k) as u64;
                    let (cs, c, cv) = operand(kc, dims, seed, |x| x > 0.0);
                    let (xs, x, xv) = operand(kx, dims, seed + 200, val);
                    let (ys, y, yv) = operand(ky, dims, seed + 400, val);
                    for threads in [1, 2] {
                        let got = with_intra_op_threads(threads, || run_op(&[c.clone(), x.clone(), y.clone()], |o| NodeSpec::new("SelectV2", o)));
                        let what = format!("SelectV2 {:?} of {kc:?}, {kx:?}, {ky:?} ({threads} threads)", T::DTYPE);
                        assert_eq!(got.dims(), dims, "{what}");
                        let gv = logical::<T>(&got);
                        assert_eq!(gv.len(), n);
                        for (f, &g) in gv.iter().enumerate() {
                            let want = if broadcast_at(&cv, &cs, dims, f) { broadcast_at(&xv, &xs, dims, f) } else { broadcast_at(&yv, &ys, dims, f) };
                            assert_eq!(g, want, "{what} at {f}");
                        }
                        // full operands in one order and the rest single elements: that order
                        let full: Vec<Kind> = [kc, kx, ky].into_iter().filter(|k| matches!(k, Row | Col)).collect();
                        if !full.is_empty() && ![kc, kx, ky].contains(&Last) {
                            if full.iter().all(|&k| k == Col) {
                                assert!(column_major::<T>(&got), "{what}: column-major operands, column-major result");
                            } else if full.iter().all(|&k| k == Row) {
                                assert!(row_major::<T>(&got), "{what}: row-major operands, row-major result");
                            }
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn select_picks_by_the_broadcasting_rule_in_every_layout_and_dtype() {
    check_select::<f64>(|x| x);
    check_select::<f32>(|x| x as f32);
    check_select::<i32>(|x| (x * 1000.0) as i32);
    check_select::<i64>(|x| (x * 1e6) as i64 - (1 << 40));
    check_select::<bool>(|x| x < 1.0);
    // NaN and signed zeros pass through as they are (a select moves bits, never compares)
    let c = stored(&[2, 2], vec![true, false, true, false], true);
    let x = stored(&[2, 2], vec![f64::NAN, 1.0, -0.0, 2.0], true);
    let got = run_op(&[c, x, Tensor::scalar(-0.0f64)], |o| NodeSpec::new("SelectV2", o));
    let gv = logical::<f64>(&got);
    assert!(
        gv[0].is_nan() && gv[1].to_bits() == (-0.0f64).to_bits() && gv[2].to_bits() == (-0.0f64).to_bits() && gv[3].to_bits() == (-0.0f64).to_bits(),
        "{gv:?}"
    );
}

fn check_addn<T: Element>(val: fn(f64) -> T, add: fn(T, T) -> T) {
    for dims in [&[4usize, 3][..], &[2, 3, 4], &[310, 250]] {
        let n: usize = dims.iter().product();
        for count in [2usize, 3, 5] {
            let vals: Vec<Vec<T>> = (0..count).map(|k| rand_vec(n, 70 + k as u64, -3.0, 3.0).into_iter().map(val).collect()).collect();
            // all row-major, all column-major, and mixed both ways
            for pattern in [0usize, (1 << count) - 1, 0b01, 0b10] {
                let ins: Vec<Tensor> = (0..count).map(|k| stored(dims, vals[k].clone(), pattern >> k & 1 == 1)).collect();
                for threads in [1, 2] {
                    let got = with_intra_op_threads(threads, || run_op(&ins, |o| NodeSpec::new("AddN", o)));
                    let what = format!("AddN {:?} of {count} {dims:?}, column-major inputs {pattern:b} ({threads} threads)", T::DTYPE);
                    let gv = logical::<T>(&got);
                    for f in 0..n {
                        // left to right, as the fused programs add
                        let want = (1..count).fold(vals[0][f], |acc, k| add(acc, vals[k][f]));
                        assert_eq!(gv[f], want, "{what} at {f}");
                    }
                    if pattern == (1 << count) - 1 {
                        assert!(column_major::<T>(&got), "{what}: column-major result");
                    } else if pattern == 0 {
                        assert!(row_major::<T>(&got), "{what}: row-major result");
                    }
                }
            }
        }
    }
}

#[test]
fn addn_sums_left_to_right_in_every_layout_and_dtype() {
    check_addn::<f64>(|x| x, |a, b| a + b);
    check_addn::<f32>(|x| x as f32, |a, b| a + b);
    check_addn::<i32>(|x| (x * 1e8) as i32, i32::wrapping_add);
    check_addn::<i64>(|x| (x * 1e17) as i64, i64::wrapping_add);
}

#[test]
fn broadcast_to_repeats_the_input_and_keeps_julias_order() {
    // (input shape, input column-major, target): the output is row-major only for a
    // row-major input of rank >= 2, column-major otherwise
    let cases: [(&[usize], bool, &[usize]); 9] = [
        (&[], false, &[4, 5]),
        (&[5], false, &[4, 5]),
        (&[1, 257], false, &[300, 257]),
        (&[3, 1], true, &[3, 5]),
        (&[3, 5], false, &[2, 3, 5]),
        (&[3, 5], true, &[2, 3, 5]),
        (&[2, 1, 5], false, &[2, 3, 5]),
        (&[2, 1, 5], true, &[2, 3, 5]),
        (&[257], false, &[300, 257]),
    ];
    for (shape, col, dims) in cases {
        let v = rand_vec(shape.iter().product(), 5, -1.0, 1.0);
        let x = stored(shape, v.clone(), col);
        let x_row_major = row_major::<f64>(&x);
        let got = run_op(&[x], |o| NodeSpec::new("BroadcastTo", o).attr("shape", AttrValue::Shape(dims.to_vec())));
        assert_eq!(got.dims(), dims);
        let gv = logical::<f64>(&got);
        for (f, &g) in gv.iter().enumerate() {
            assert_eq!(g, broadcast_at(&v, shape, dims, f), "BroadcastTo {shape:?} (column-major {col}) to {dims:?} at {f}");
        }
        assert_eq!(column_major::<f64>(&got), !x_row_major, "BroadcastTo {shape:?} (column-major {col}) to {dims:?}: output order");
    }
    // other dtypes: the same repetition
    let i = stored(&[2, 1], vec![7i32, -8], true);
    let got = run_op(&[i], |o| NodeSpec::new("BroadcastTo", o).attr("shape", AttrValue::Shape(vec![2, 3])));
    assert_eq!(logical::<i32>(&got), [7, 7, 7, -8, -8, -8]);
}

fn check_filled<T: Element>(val: fn(f64) -> T, zero: T, one: T) {
    for dims in [&[3usize, 5][..], &[300, 257], &[7]] {
        let n: usize = dims.iter().product();
        for col in [false, true] {
            let x = stored(dims, rand_vec(n, 9, -2.0, 2.0).into_iter().map(val).collect(), col);
            for (op, want) in [("ZerosLike", zero), ("OnesLike", one)] {
                let got = run_op(std::slice::from_ref(&x), |o| NodeSpec::new(op, o));
                assert_eq!((got.dtype(), got.dims()), (T::DTYPE, dims), "{op}");
                assert!(logical::<T>(&got).iter().all(|&g| g == want), "{op} {:?} {dims:?}: every element {want:?}", T::DTYPE);
                assert_eq!(column_major::<T>(&got), column_major::<T>(&x), "{op} {:?} {dims:?} (column-major {col}): the input's order", T::DTYPE);
            }
        }
    }
}

#[test]
fn zeros_like_and_ones_like_fill_in_the_inputs_order() {
    check_filled::<f64>(|x| x, 0.0, 1.0);
    check_filled::<f32>(|x| x as f32, 0.0, 1.0);
    check_filled::<i32>(|x| x as i32, 0, 1);
    check_filled::<i64>(|x| x as i64, 0, 1);
    check_filled::<bool>(|x| x > 0.0, false, true);
}

/// `ScatterNd` of row indices by its definition: zeros, then each update row added to the
/// output row its index names, in order (duplicates add up).
fn scatter_rows<T: Element>(rows: &[usize], upd: &[T], dims: &[usize], add: fn(T, T) -> T) -> Vec<T> {
    let inner: usize = dims[1..].iter().product();
    let mut out = vec![T::zero(); dims.iter().product()];
    for (r, &o) in rows.iter().enumerate() {
        for j in 0..inner {
            out[o * inner + j] = add(out[o * inner + j], upd[r * inner + j]);
        }
    }
    out
}

fn check_scatter<T: Element>(val: fn(f64) -> T, add: fn(T, T) -> T) {
    // repeated rows (a gather's gradient of a repeated index adds both)
    let rows = [2usize, 0, 2, 5, 2, 4, 0];
    for dims in [&[6usize][..], &[6, 3], &[6, 3, 2], &[6, 4000]] {
        let mut udims = dims.to_vec();
        udims[0] = rows.len();
        let u: Vec<T> = rand_vec(udims.iter().product(), 13, -3.0, 3.0).into_iter().map(val).collect();
        let want = scatter_rows(&rows, &u, dims, add);
        // (column-major [6, 4000] is enough work to be split by columns over 2 and 3 threads)
        for (col, threads) in [(false, 1), (true, 1), (true, 2), (true, 3)] {
            let idx = Tensor::from_vec(&[rows.len(), 1], rows.iter().map(|&r| r as i64).collect(), oxiflow_core::Layout::RowMajor).unwrap();
            let upd = stored(&udims, u.clone(), col);
            let got = with_intra_op_threads(threads, || run_op(&[idx, upd], |o| NodeSpec::new("ScatterNd", o).attr("shape", AttrValue::Shape(dims.to_vec()))));
            assert_eq!(got.dims(), dims);
            assert_eq!(logical::<T>(&got), want, "ScatterNd {:?} {dims:?}, column-major updates {col}, {threads} threads", T::DTYPE);
            if dims.len() >= 2 {
                assert_eq!(column_major::<T>(&got), col, "ScatterNd {dims:?}: the updates' order");
            }
        }
    }
}

#[test]
fn scatter_nd_adds_rows_in_either_order_of_the_updates() {
    check_scatter::<f64>(|x| x, |a, b| a + b);
    check_scatter::<f32>(|x| x as f32, |a, b| a + b);
    check_scatter::<i64>(|x| (x * 1e3) as i64, i64::wrapping_add);
    check_scatter::<i32>(|x| (x * 1e3) as i32, i32::wrapping_add);
    // an index out of range is still an error naming it, whatever the order
    let idx = Tensor::from_vec(&[2, 1], vec![1i64, 6], oxiflow_core::Layout::RowMajor).unwrap();
    let mut g = Graph::new();
    let (i, u) = (g.constant(idx).unwrap(), g.constant(stored(&[2, 3], vec![1.0f64; 6], true)).unwrap());
    let s = g.op_spec(NodeSpec::new("ScatterNd", &[i, u]).attr("shape", AttrValue::Shape(vec![6, 3]))).unwrap();
    let e = eval(&g, &[], &[s]).unwrap_err().to_string();
    assert!(e.contains("ScatterNd") && e.contains("indices[1,0] = 6"), "{e}");
}

#[test]
fn reshape_to_the_same_shape_keeps_the_values_and_the_order() {
    let v = rand_vec(24, 17, -1.0, 1.0);
    for col in [false, true] {
        let x = stored(&[4, 6], v.clone(), col);
        let same = run_op(std::slice::from_ref(&x), |o| NodeSpec::new("Reshape", o).attr("shape", AttrValue::Shape(vec![4, 6])));
        assert_eq!(logical::<f64>(&same), v);
        assert_eq!(column_major::<f64>(&same), col, "the same shape: the input's order");
        // another shape reads the logical (row-major) order, as TF's Reshape
        let other = run_op(std::slice::from_ref(&x), |o| NodeSpec::new("Reshape", o).attr("shape", AttrValue::Shape(vec![3, 8])));
        assert_eq!((other.dims(), logical::<f64>(&other)), (&[3usize, 8][..], v.clone()));
    }
}
