//! Kernels that follow their inputs' memory order (row-major, or column-major as Julia
//! arrays are): `ConcatV2` and `Pack`, `Softmax`, and the elementwise unary maps. Each case
//! runs on row-major, column-major and mixed inputs and is checked against a naive loop
//! over logical indices written here (row-major strides), so the storage order can change
//! the speed but never a value.

mod common;
use common::*;
use oxiflow_core::shape::UNKNOWN;
use oxiflow_core::{DType, Graph, Layout, NodeSpec, Output, Tensor};

/// A Float64 tensor of `dims` with logical (row-major) values `v`, stored in `layout`.
fn stored(dims: &[usize], v: &[f64], layout: Layout) -> Tensor {
    let data = match layout {
        Layout::RowMajor => v.to_vec(),
        Layout::ColumnMajor => column_major_order(dims, v),
    };
    Tensor::from_vec(dims, data, layout).unwrap()
}

/// Whether a Float64 tensor is stored column-major (and not also row-major).
fn column_major(t: &Tensor) -> bool {
    let a = t.array::<f64>().unwrap();
    a.ndim() >= 2 && !a.is_standard_layout() && a.t().is_standard_layout()
}

/// Logical (row-major) multi-index of `flat` in `dims`.
fn unflat(flat: usize, dims: &[usize]) -> Vec<usize> {
    let s = strides(dims);
    (0..dims.len()).map(|d| (flat / s[d]) % dims[d]).collect()
}

fn at(v: &[f64], dims: &[usize], ix: &[usize]) -> f64 {
    v[ix.iter().zip(strides(dims)).map(|(i, s)| i * s).sum::<usize>()]
}

fn run_op(inputs: &[Tensor], spec: impl Fn(&[Output]) -> NodeSpec) -> oxiflow_core::Result<Tensor> {
    let mut g = Graph::new();
    let cs: Vec<Output> = inputs.iter().map(|t| g.constant(t.clone()).unwrap()).collect();
    let o = g.op_spec(spec(&cs))?;
    Ok(eval(&g, &[], &[o])?.remove(0))
}

#[test]
fn concat_and_pack_give_the_logical_join_in_every_layout() {
    use Layout::{ColumnMajor as C, RowMajor as R};
    let shapes: [&[usize]; 3] = [&[3, 4], &[2, 3, 4], &[5]];
    for (si, base) in shapes.iter().enumerate() {
        for axis in 0..base.len() {
            // three inputs, the second with another size along the axis (concat)
            let mut dims_b = base.to_vec();
            dims_b[axis] += 2;
            let dims = [base.to_vec(), dims_b, base.to_vec()];
            let vals: Vec<Vec<f64>> = dims.iter().enumerate().map(|(k, d)| rand_vec(d.iter().product(), 10 * si as u64 + k as u64, -1.0, 1.0)).collect();
            for layouts in [[R, R, R], [C, C, C], [C, R, C], [R, C, R]] {
                let ins: Vec<Tensor> = (0..3).map(|k| stored(&dims[k], &vals[k], layouts[k])).collect();
                let got = run_op(&ins, |xs| NodeSpec::new("ConcatV2", xs).attr("axis", axis as i64)).unwrap();
                let mut want_dims = base.to_vec();
                want_dims[axis] = dims.iter().map(|d| d[axis]).sum();
                assert_eq!(got.dims(), &want_dims[..]);
                let gv = got.to_f64_vec();
                for (f, &g) in gv.iter().enumerate() {
                    let mut ix = unflat(f, &want_dims);
                    let mut k = 0;
                    while ix[axis] >= dims[k][axis] {
                        ix[axis] -= dims[k][axis];
                        k += 1;
                    }
                    assert_eq!(g, at(&vals[k], &dims[k], &ix), "concat {base:?} axis {axis} {layouts:?} at {f}");
                }
                let all_col = layouts == [C, C, C] && base.len() >= 2;
                assert_eq!(column_major(&got), all_col, "concat {base:?} axis {axis} {layouts:?}: output order");
            }
        }
        // Pack: every axis of the output, equal shapes
        for axis in 0..=base.len() {
            let vals: Vec<Vec<f64>> = (0..3).map(|k| rand_vec(base.iter().product(), 50 + k, -1.0, 1.0)).collect();
            for layouts in [[R, R, R], [C, C, C], [R, C, R]] {
                let ins: Vec<Tensor> = (0..3).map(|k| stored(base, &vals[k], layouts[k])).collect();
                let got = run_op(&ins, |xs| NodeSpec::new("Pack", xs).attr("axis", axis as i64)).unwrap();
                let mut want_dims = base.to_vec();
                want_dims.insert(axis, 3);
                assert_eq!(got.dims(), &want_dims[..]);
                for (f, &g) in got.to_f64_vec().iter().enumerate() {
                    let mut ix = unflat(f, &want_dims);
                    let k = ix.remove(axis);
                    assert_eq!(g, at(&vals[k], base, &ix), "pack {base:?} axis {axis} {layouts:?} at {f}");
                }
            }
        }
    }
    // other dtypes move the same way; an empty input adds nothing
    let i = Tensor::from_vec(&[2, 2], vec![1i64, 2, 3, 4], C).unwrap();
    let e = Tensor::from_vec(&[0, 2], Vec::<i64>::new(), R).unwrap();
    let got = run_op(&[i.clone(), e, i], |xs| NodeSpec::new("ConcatV2", xs).attr("axis", 0i64)).unwrap();
    assert_eq!((got.dtype(), got.dims(), got.to_f64_vec()), (DType::Int64, &[4usize, 2][..], vec![1., 3., 2., 4., 1., 3., 2., 4.]));
    let b = Tensor::from_vec(&[2, 1], vec![true, false], C).unwrap();
    let got = run_op(&[b.clone(), b], |xs| NodeSpec::new("ConcatV2", xs).attr("axis", 1i64)).unwrap();
    assert_eq!(got.to_f64_vec(), [1., 1., 0., 0.]);
}

#[test]
fn joining_fed_values_of_mismatched_shapes_is_an_error_naming_them() {
    let mut g = Graph::new();
    let a = g.placeholder(DType::Float64, &[UNKNOWN, 3], None).unwrap();
    let b = g.placeholder(DType::Float64, &[UNKNOWN, UNKNOWN], None).unwrap();
    let cat = g.op_spec(NodeSpec::new("ConcatV2", &[a, b]).attr("axis", 0i64)).unwrap();
    let st = g.op_spec(NodeSpec::new("Pack", &[a, b])).unwrap();
    let x = rand_t(&[2, 3], 1, -1.0, 1.0);
    let e = eval(&g, &[(a, x.clone()), (b, rand_t(&[2, 4], 2, -1.0, 1.0))], &[cat]).unwrap_err().to_string().replace(' ', "");
    assert!(e.contains("ConcatV2") && e.contains("[2,3]") && e.contains("[2,4]"), "{e}");
    let e = eval(&g, &[(a, x.clone()), (b, rand_t(&[3, 3], 2, -1.0, 1.0))], &[st]).unwrap_err().to_string().replace(' ', "");
    assert!(e.contains("Pack") && e.contains("[2,3]") && e.contains("[3,3]"), "{e}");
    // the same graph still runs with matching values
    let got = eval(&g, &[(a, x.clone()), (b, x.clone())], &[cat]).unwrap().remove(0);
    assert_eq!(got.to_f64_vec(), [x.to_f64_vec(), x.to_f64_vec()].concat());
}

/// Softmax over the last axis by its definition, in f64, from logical values.
fn softmax_oracle(v: &[f64], c: usize) -> Vec<f64> {
    v.chunks(c)
        .flat_map(|row| {
            let m = row.iter().copied().filter(|x| !x.is_nan()).fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = row.iter().map(|&x| (x - m).exp()).collect();
            let s: f64 = e.iter().sum();
            e.into_iter().map(move |x| x / s)
        })
        .collect()
}

#[test]
fn softmax_matches_its_definition_in_every_layout_and_dtype() {
    use Layout::{ColumnMajor as C, RowMajor as R};
    // small, one row, and large enough (>= 16k elements) to be split over threads
    let shapes: [&[usize]; 6] = [&[7], &[3, 5], &[1, 40], &[2, 3, 9], &[300, 70], &[70, 300]];
    for (si, dims) in shapes.iter().enumerate() {
        let c = *dims.last().unwrap();
        let mut v = rand_vec(dims.iter().product(), 100 + si as u64, -20.0, 20.0);
        if si == 1 {
            v[5] = f64::NAN; // row 1 becomes NaN
            v[10..15].fill(f64::NEG_INFINITY); // row 2 is NaN too (-inf - -inf)
        }
        let want = softmax_oracle(&v, c);
        for layout in [R, C] {
            for dtype in [DType::Float64, DType::Float32] {
                let x = stored(dims, &v, layout);
                let input_column_major = column_major(&x);
                let x = if dtype == DType::Float32 { Tensor::from_array(x.array::<f64>().unwrap().mapv(|x| x as f32).into_owned()) } else { x };
                let got = run_op(&[x], |xs| NodeSpec::new("Softmax", xs)).unwrap();
                assert_eq!((got.dtype(), got.dims()), (dtype, &dims[..]));
                // f32: the shift x - max (up to 40 here) is rounded to f32, which moves exp's
                // result by up to about 2e-6 relative
                let tol = if dtype == DType::Float32 { 1e-5 } else { 1e-14 };
                // f32 inputs are rounded first: compare with the definition on those values
                let want = if dtype == DType::Float32 { softmax_oracle(&v.iter().map(|&x| x as f32 as f64).collect::<Vec<_>>(), c) } else { want.clone() };
                for (i, (&g, &w)) in got.to_f64_vec().iter().zip(&want).enumerate() {
                    let ok = if w.is_nan() { g.is_nan() } else { (g - w).abs() <= tol * w.abs().max(1e-30) + 1e-300 };
                    assert!(ok, "softmax {dims:?} {layout:?} {dtype:?} at {i}: {g} against {w}");
                }
                if dtype == DType::Float64 {
                    assert_eq!(column_major(&got), input_column_major, "softmax {dims:?} {layout:?}: output order");
                }
            }
        }
    }
    // a strided view (every second column of a row-major matrix) is read through a copy
    let v = rand_vec(6 * 10, 7, -3.0, 3.0);
    let mut g = Graph::new();
    let x = g.constant(t64(&[6, 10], v.clone())).unwrap();
    let half = oxiflow_core::ops::index::strided_slice(&mut g, x, &[0, 0], &[6, 10], &[1, 2], 0, 0, 0).unwrap();
    let y = g.op("Softmax", &[half]).unwrap();
    let got = eval1(&g, &[], y).to_f64_vec();
    let picked: Vec<f64> = (0..6).flat_map(|r| (0..5).map(move |k| (r, 2 * k))).map(|(r, c)| v[r * 10 + c]).collect();
    assert_close(&got, &softmax_oracle(&picked, 5), 1e-14, "softmax of a strided view");
}

#[test]
fn unary_maps_and_pow_keep_the_layout_and_the_values() {
    use Layout::{ColumnMajor as C, RowMajor as R};
    type F = fn(f64) -> f64;
    let cases: [(&str, F); 7] = [
        ("Abs", f64::abs),
        ("Neg", |x| -x),
        ("Square", |x| x * x),
        ("Floor", f64::floor),
        ("Relu6", |x| x.clamp(0.0, 6.0)),
        ("Softsign", |x| x / (1.0 + x.abs())),
        ("Sin", f64::sin),
    ];
    // small, and large enough (>= 32k elements) to be split over threads
    for dims in [&[3usize, 4][..], &[200, 190]] {
        let n: usize = dims.iter().product();
        let v = rand_vec(n, 3, -8.0, 8.0);
        for layout in [R, C] {
            let x = stored(dims, &v, layout);
            for (op, f) in cases {
                let got = run_op(std::slice::from_ref(&x), |xs| NodeSpec::new(op, xs)).unwrap();
                let want: Vec<f64> = v.iter().map(|&x| f(x)).collect();
                if op == "Sin" {
                    // vectorized math: within 2 ulp of libm
                    assert_close(&got.to_f64_vec(), &want, 4.0 * f64::EPSILON, &format!("{op} {dims:?} {layout:?}"));
                } else {
                    assert_eq!(got.to_f64_vec(), want, "{op} {dims:?} {layout:?}");
                }
                assert_eq!(column_major(&got), column_major(&x), "{op} {dims:?} {layout:?}: output order");
            }
            // Pow by a scalar and by a tensor of the same layout (a and b > 0: real powers)
            let a = stored(dims, &v.iter().map(|x| x.abs() + 0.1).collect::<Vec<_>>(), layout);
            let e = rand_vec(n, 4, -3.0, 3.0);
            for (b, ev) in [(Tensor::scalar(2.5f64), vec![2.5; n]), (stored(dims, &e, layout), e.clone())] {
                let got = run_op(&[a.clone(), b], |xs| NodeSpec::new("Pow", xs)).unwrap();
                let want: Vec<f64> = a.to_f64_vec().iter().zip(&ev).map(|(&x, &y)| x.powf(y)).collect();
                assert_close(&got.to_f64_vec(), &want, 1e-15, &format!("Pow {dims:?} {layout:?}"));
                assert_eq!(column_major(&got), column_major(&a), "Pow {dims:?} {layout:?}: output order");
            }
        }
    }
    // integers take the same maps; a negative integer power is still an error
    let i = Tensor::from_vec(&[2, 2], vec![-3i64, 4, -5, 6], C).unwrap();
    assert_eq!(run_op(std::slice::from_ref(&i), |xs| NodeSpec::new("Abs", xs)).unwrap().to_f64_vec(), [3., 5., 4., 6.]);
    let e = run_op(&[i, Tensor::scalar(-1i64)], |xs| NodeSpec::new("Pow", xs)).unwrap_err().to_string();
    assert!(e.contains("Pow") && e.contains("negative integer powers"), "{e}");
}

#[test]
fn transpose_gives_the_permuted_values_and_writers_downstream_leave_its_input_alone() {
    use Layout::{ColumnMajor as C, RowMajor as R};
    // a matrix in both orders, and rank 3 with a reversal (a shared view) and a swap of
    // the two leading axes (a copy)
    for (dims, perm) in [(&[3usize, 5][..], &[1usize, 0][..]), (&[2, 3, 4], &[2, 1, 0]), (&[2, 3, 4], &[1, 0, 2]), (&[2, 3, 4], &[0, 1, 2])] {
        let v = rand_vec(dims.iter().product(), 9, -1.0, 1.0);
        let out_dims: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
        for layout in [R, C] {
            let x = stored(dims, &v, layout);
            let p: Vec<i64> = perm.iter().map(|&p| p as i64).collect();
            let got = run_op(&[x], |xs| NodeSpec::new("Transpose", xs).attr("perm", p.clone())).unwrap();
            assert_eq!(got.dims(), &out_dims[..]);
            for (f, &g) in got.to_f64_vec().iter().enumerate() {
                let o = unflat(f, &out_dims);
                let mut ix = vec![0; dims.len()];
                for (k, &pk) in perm.iter().enumerate() {
                    ix[pk] = o[k];
                }
                assert_eq!(g, at(&v, dims, &ix), "transpose {dims:?} by {perm:?}, {layout:?}, at {f}");
            }
        }
    }
    // an update of the transposed value is a new value: the input and the transpose keep theirs
    let v = rand_vec(6, 11, -1.0, 1.0);
    let mut g = Graph::new();
    let x = g.constant(stored(&[2, 3], &v, C)).unwrap();
    let t = g.op_spec(NodeSpec::new("Transpose", &[x]).attr("perm", vec![1i64, 0])).unwrap();
    let idx = g.constant(Tensor::from_vec(&[1, 2], vec![2i64, 1], R).unwrap()).unwrap();
    let u = g.constant(t64(&[1], vec![100.0])).unwrap();
    let w = g.op("TensorScatterUpdate", &[t, idx, u]).unwrap();
    let out = eval(&g, &[], &[x, t, w]).unwrap();
    assert_eq!(out[0].to_f64_vec(), v);
    let tv = vec![v[0], v[3], v[1], v[4], v[2], v[5]];
    assert_eq!(out[1].to_f64_vec(), tv);
    let mut wv = tv.clone();
    wv[5] = 100.0;
    assert_eq!(out[2].to_f64_vec(), wv);
}
