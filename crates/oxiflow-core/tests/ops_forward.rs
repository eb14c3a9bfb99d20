//! Forward results of every math and array op, checked against direct Rust computations,
//! and the build-time errors of bad operands.

mod common;
use common::*;
use ndarray::{s, Array2};
use oxiflow_core::ops::AttrValue;
use oxiflow_core::{DType, Graph, Layout, NodeSpec, Output, OxiflowError, Shape, Tensor};
use proptest::prelude::*;

type Unary = fn(f64) -> f64;
type Binary = fn(f64, f64) -> f64;

fn unary_f64(op: &str, x: &Tensor) -> Tensor {
    let mut g = Graph::new();
    let c = g.constant(x.clone()).unwrap();
    let y = g.op(op, &[c]).unwrap();
    eval1(&g, &[], y)
}

fn binary(op: &str, a: &Tensor, b: &Tensor) -> Tensor {
    let mut g = Graph::new();
    let (ca, cb) = (g.constant(a.clone()).unwrap(), g.constant(b.clone()).unwrap());
    let y = g.op(op, &[ca, cb]).unwrap();
    assert_eq!(g.shape_of(y).unwrap().0, eval1(&g, &[], y).dims(), "{op}: static and run-time shapes differ");
    eval1(&g, &[], y)
}

fn with_attrs(spec: NodeSpec, inputs: &[Tensor]) -> (Graph, Output) {
    let mut g = Graph::new();
    let ins: Vec<Output> = inputs.iter().map(|t| g.constant(t.clone()).unwrap()).collect();
    let spec = NodeSpec { inputs: ins, ..spec };
    let y = g.op_spec(spec).unwrap();
    (g, y)
}

#[test]
fn unary_float_ops_match_std() {
    let x = rand_t(&[2, 3], 1, 0.1, 2.0);
    let xv = x.to_f64_vec();
    let cases: [(&str, Unary); 8] = [
        ("Sin", f64::sin),
        ("Cos", f64::cos),
        ("Exp", f64::exp),
        ("Log", f64::ln),
        ("Tanh", f64::tanh),
        ("Sqrt", f64::sqrt),
        ("Neg", |v| -v),
        ("Square", |v| v * v),
    ];
    for (op, f) in cases {
        let want: Vec<f64> = xv.iter().map(|&v| f(v)).collect();
        let got = unary_f64(op, &x);
        assert_eq!(got.dtype(), DType::Float64);
        assert_eq!(got.dims(), &[2, 3]);
        assert_close(&got.to_f64_vec(), &want, 1e-15, op);
        let got32 = unary_f64(op, &t32(&[2, 3], xv.clone()));
        assert_eq!(got32.dtype(), DType::Float32);
        let want32: Vec<f64> = xv.iter().map(|&v| f(v as f32 as f64)).collect();
        assert_close(&got32.to_f64_vec(), &want32, 1e-6, op);
    }
}

#[test]
fn default_names_follow_tf_python() {
    let mut g = Graph::new();
    let x = g.constant(rand_t(&[2, 2], 2, 0.5, 1.0)).unwrap();
    let b = g.constant(Tensor::scalar(true)).unwrap();
    let names = [("Add", "add"), ("Sub", "sub"), ("Mul", "mul"), ("RealDiv", "truediv"), ("Pow", "pow"), ("MatMul", "MatMul"), ("Greater", "Greater")];
    for (op, name) in names {
        let y = g.op(op, &[x, x]).unwrap();
        assert_eq!(g.node(y.node).unwrap().name, name);
    }
    for op in ["Neg", "Square", "Sin", "Cos", "Exp", "Log", "Tanh", "Sqrt", "AddN", "OnesLike", "ZerosLike"] {
        let y = g.op(op, &[x]).unwrap();
        assert_eq!(g.node(y.node).unwrap().name, op);
    }
    let y = g.op("SelectV2", &[b, x, x]).unwrap();
    assert_eq!(g.node(y.node).unwrap().name, "SelectV2");
    for (spec, name) in [
        (NodeSpec::new("Reshape", &[x]).attr("shape", AttrValue::Shape(vec![4])), "Reshape"),
        (NodeSpec::new("BroadcastTo", &[x]).attr("shape", AttrValue::Shape(vec![3, 2, 2])), "BroadcastTo"),
        (NodeSpec::new("Sum", &[x]), "Sum"),
        (NodeSpec::new("Cast", &[x]).attr("DstT", DType::Float32), "Cast"),
    ] {
        let y = g.op_spec(spec).unwrap();
        assert_eq!(g.node(y.node).unwrap().name, name);
    }
    let y = g.op("Add", &[x, x]).unwrap();
    assert_eq!(g.node(y.node).unwrap().name, "add_1");
}

#[test]
fn binary_ops_broadcast_like_numpy() {
    // The first kinds take the kernels' slice loops (equal, scalar, bias row, column, empty),
    // the others ndarray's general broadcast.
    let shapes: [(&[usize], &[usize]); 12] = [
        (&[2, 3], &[2, 3]),
        (&[2, 3], &[3]),
        (&[3], &[2, 3]),
        (&[2, 3], &[1, 3]),
        (&[2, 1], &[2, 3]),
        (&[2, 3, 4], &[2, 3, 1]),
        (&[1], &[2, 3]),
        (&[3, 0], &[3, 1]),
        (&[2, 1], &[1, 4]),
        (&[], &[2, 3]),
        (&[3, 1, 2], &[4, 1]),
        (&[2, 3, 4], &[2, 1, 4]),
    ];
    let cases: [(&str, Binary); 5] = [("Add", |a, b| a + b), ("Sub", |a, b| a - b), ("Mul", |a, b| a * b), ("RealDiv", |a, b| a / b), ("Pow", f64::powf)];
    for (k, (sa, sb)) in shapes.iter().enumerate() {
        let a = rand_t(sa, 10 + k as u64, 0.2, 2.0);
        let b = rand_t(sb, 20 + k as u64, -1.5, 1.5);
        for (op, f) in cases {
            let (dims, want) = naive_broadcast(&a.to_f64_vec(), sa, &b.to_f64_vec(), sb, f);
            let got = binary(op, &a, &b);
            assert_eq!(got.dims(), dims.as_slice(), "{op} {sa:?} {sb:?}");
            assert_close(&got.to_f64_vec(), &want, 1e-14, op);
        }
    }
}

#[test]
fn pow_to_the_second_power_is_the_correctly_rounded_square() {
    // x^2 is computed as x * x (one rounding); powf agrees to within an ulp, and on the
    // special values exactly (IEEE pow: (+-0)^2 = +0, (+-inf)^2 = +inf, NaN^2 = NaN).
    let mut xs = rand_vec(997, 80, -1e3, 1e3);
    xs.extend([0.0, -0.0, 1.0, -1.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 1e200, -1e-200, f64::MIN_POSITIVE]);
    let n = xs.len();
    for (x, two) in [(t64(&[n], xs.clone()), t64(&[], vec![2.0])), (t32(&[n], xs.clone()), t32(&[], vec![2.0]))] {
        let got = binary("Pow", &x, &two).to_f64_vec();
        let sq = unary_f64("Square", &x).to_f64_vec();
        for ((&g, &s), &v) in got.iter().zip(&sq).zip(&x.to_f64_vec()) {
            assert!(g.to_bits() == s.to_bits() || (g.is_nan() && s.is_nan()), "{v}^2: Pow {g}, Square {s}");
            let p = if x.dtype() == DType::Float32 { (v as f32).powf(2.0) as f64 } else { v.powf(2.0) };
            let ulp = if x.dtype() == DType::Float32 { f32::EPSILON as f64 } else { f64::EPSILON };
            assert!((g - p).abs() <= ulp * p.abs() || g == p || (g.is_nan() && p.is_nan()), "{v}^2: {g} against powf {p}");
        }
    }
}

#[test]
fn pow_to_the_first_and_zeroth_power_matches_libm_bit_for_bit() {
    // x^1 is x and x^0 is 1 without calling powf (the gradient of x^2 raises x to 1): the
    // same bits as libm's pow for every value, the special ones included (C99: pow(x, 1) = x
    // and pow(x, 0) = 1 even for NaN and infinities). As a tensor exponent, so that both the
    // scalar and the full-size paths of the kernel run.
    let mut xs = rand_vec(1001, 81, -1e3, 1e3);
    xs.extend([0.0, -0.0, 1.0, -1.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 1e300, -1e-310, f64::MIN_POSITIVE]);
    let n = xs.len();
    for e in [1.0, 0.0] {
        for (x, y, yfull) in
            [(t64(&[n], xs.clone()), t64(&[], vec![e]), t64(&[n], vec![e; n])), (t32(&[n], xs.clone()), t32(&[], vec![e]), t32(&[n], vec![e; n]))]
        {
            for (got, how) in [(binary("Pow", &x, &y), "scalar"), (binary("Pow", &x, &yfull), "full")] {
                for (&g, &v) in got.to_f64_vec().iter().zip(&x.to_f64_vec()) {
                    let want = if x.dtype() == DType::Float32 { (v as f32).powf(e as f32) as f64 } else { v.powf(e) };
                    assert!(g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()), "{v}^{e} ({how}, {:?}): {g}, libm {want}", x.dtype());
                }
            }
        }
    }
}

#[test]
fn int_arithmetic_wraps_and_int_pow_rejects_negative_powers() {
    let a = Tensor::from_vec(&[3], vec![i32::MAX, -4, 7], oxiflow_core::Layout::RowMajor).unwrap();
    let b = Tensor::from_vec(&[3], vec![1i32, 3, -2], oxiflow_core::Layout::RowMajor).unwrap();
    assert_eq!(binary("Add", &a, &b).to_f64_vec(), vec![i32::MIN as f64, -1.0, 5.0]);
    assert_eq!(binary("Sub", &a, &b).to_f64_vec(), vec![(i32::MAX - 1) as f64, -7.0, 9.0]);
    assert_eq!(binary("Mul", &a, &b).to_f64_vec(), vec![i32::MAX as f64, -12.0, -14.0]);
    assert_eq!(binary("Greater", &a, &b).to_f64_vec(), vec![1.0, 0.0, 1.0]);
    assert_eq!(unary_f64("Neg", &b).to_f64_vec(), vec![-1.0, -3.0, 2.0]);
    assert_eq!(unary_f64("Square", &b).to_f64_vec(), vec![1.0, 9.0, 4.0]);
    let e = Tensor::from_vec(&[3], vec![2i64, 3, 0], oxiflow_core::Layout::RowMajor).unwrap();
    let x = Tensor::from_vec(&[3], vec![3i64, -2, 5], oxiflow_core::Layout::RowMajor).unwrap();
    let p = binary("Pow", &x, &e);
    assert_eq!(p.dtype(), DType::Int64);
    assert_eq!(p.to_f64_vec(), vec![9.0, -8.0, 1.0]);
    let mut g = Graph::new();
    let (cx, cb) = (g.constant(a.clone()).unwrap(), g.constant(b).unwrap());
    let y = g.op("Pow", &[cx, cb]).unwrap();
    let err = eval(&g, &[], &[y]).unwrap_err().to_string();
    assert!(err.contains("negative integer powers"), "{err}");
    // Transcendental and division ops need floats.
    for op in ["Sin", "Exp", "Log", "Sqrt", "Tanh", "Cos"] {
        assert!(g.op(op, &[cx]).is_err(), "{op} accepted Int32");
    }
    assert!(g.op("RealDiv", &[cx, cx]).is_err());
}

/// `op(a) @ op(b)` by the definition.
fn naive_matmul(a: &Array2<f64>, b: &Array2<f64>, ta: bool, tb: bool) -> Array2<f64> {
    let a = if ta { a.t().to_owned() } else { a.clone() };
    let b = if tb { b.t().to_owned() } else { b.clone() };
    let (m, k, n) = (a.nrows(), a.ncols(), b.ncols());
    Array2::from_shape_fn((m, n), |(i, j)| (0..k).map(|p| a[[i, p]] * b[[p, j]]).sum())
}

fn rand_mat(r: usize, c: usize, seed: u64) -> Array2<f64> {
    Array2::from_shape_vec((r, c), rand_vec(r * c, seed, -1.0, 1.0)).unwrap()
}

fn matmul_run(a: Tensor, b: Tensor, ta: bool, tb: bool) -> Tensor {
    let (g, y) = with_attrs(NodeSpec::new("MatMul", &[]).attr("transpose_a", ta).attr("transpose_b", tb), &[a, b]);
    eval1(&g, &[], y)
}

#[test]
fn matmul_matches_the_definition_for_every_transpose() {
    for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
        let (m, k, n) = (3, 4, 5);
        let a = if ta { rand_mat(k, m, 1) } else { rand_mat(m, k, 1) };
        let b = if tb { rand_mat(n, k, 2) } else { rand_mat(k, n, 2) };
        let want = naive_matmul(&a, &b, ta, tb);
        let got = matmul_run(Tensor::from_array(a.clone().into_dyn()), Tensor::from_array(b.clone().into_dyn()), ta, tb);
        assert_eq!(got.dims(), &[m, n]);
        assert_close(&got.to_f64_vec(), &want.iter().copied().collect::<Vec<_>>(), 1e-14, "MatMul f64");
        let a32 = Tensor::from_array(a.mapv(|v| v as f32).into_dyn());
        let b32 = Tensor::from_array(b.mapv(|v| v as f32).into_dyn());
        let got32 = matmul_run(a32, b32, ta, tb);
        assert_eq!(got32.dtype(), DType::Float32);
        assert_close(&got32.to_f64_vec(), &want.iter().copied().collect::<Vec<_>>(), 1e-5, "MatMul f32");
    }
}

#[test]
fn matmul_reads_non_standard_layouts_and_large_products() {
    // Column-major (transposed view) and negative-stride inputs.
    let a = rand_mat(6, 4, 3);
    let b = rand_mat(5, 6, 4);
    let a_f = a.t().as_standard_layout().to_owned().reversed_axes(); // same values as a, column-major
    assert!(!a_f.is_standard_layout());
    let b_neg = b.slice(s![..;-1, ..]).to_owned(); // standard copy of the flipped rows
    let b_view_neg = b.clone().slice_move(s![..;-1, ..]); // negative row stride
    let want = naive_matmul(&a, &b_neg, true, true);
    let got = matmul_run(Tensor::from_array(a_f.into_dyn()), Tensor::from_array(b_view_neg.into_dyn()), true, true);
    assert_close(&got.to_f64_vec(), &want.iter().copied().collect::<Vec<_>>(), 1e-14, "strided MatMul");
    // Above the parallel threshold (Rayon path).
    let (m, k, n) = (70, 65, 80);
    let a = rand_mat(m, k, 5);
    let b = rand_mat(k, n, 6);
    let want = naive_matmul(&a, &b, false, false);
    let got = matmul_run(Tensor::from_array(a.into_dyn()), Tensor::from_array(b.into_dyn()), false, false);
    assert_close(&got.to_f64_vec(), &want.iter().copied().collect::<Vec<_>>(), 1e-12, "large MatMul");
    // Empty inner dimension: zeros.
    let got = matmul_run(Tensor::full(&[2, 0], 1.0f64), Tensor::full(&[0, 3], 1.0f64), false, false);
    assert_eq!(got.dims(), &[2, 3]);
    assert!(got.to_f64_vec().iter().all(|&v| v == 0.0));
}

#[test]
fn matmul_shape_errors_name_both_shapes_and_leave_the_graph_unchanged() {
    let mut g = Graph::new();
    let a = g.constant(rand_t(&[2, 3], 1, 0.0, 1.0)).unwrap();
    let b = g.constant(rand_t(&[2, 3], 2, 0.0, 1.0)).unwrap();
    let len = g.len();
    let err = g.op("MatMul", &[a, b]).unwrap_err();
    assert!(matches!(err, OxiflowError::ShapeMismatch { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("[2,3] and [2,3]") && msg.contains("MatMul"), "{msg}");
    assert_eq!(g.len(), len);
    assert!(g.op_spec(NodeSpec::new("MatMul", &[a, b]).attr("transpose_b", true)).is_ok());
    let v = g.constant(rand_t(&[3], 3, 0.0, 1.0)).unwrap();
    let err = g.op("MatMul", &[a, v]).unwrap_err();
    assert!(matches!(err, OxiflowError::ShapeMismatch { .. }) && err.to_string().contains("[2,3] and [3]"), "{err}");
    let i = g.constant(Tensor::full(&[3, 3], 1i32)).unwrap();
    assert!(g.op("MatMul", &[i, i]).is_err(), "MatMul takes floats only");
    // A bool attr given another type is an error when the node is built (a string was read
    // as false, silently multiplying the untransposed operand).
    let len = g.len();
    for (op, spec) in [
        ("MatMul", NodeSpec::new("MatMul", &[a, b]).attr("transpose_b", AttrValue::Str("yes".into()))),
        ("Sum", NodeSpec::new("Sum", &[a]).attr("axis", vec![0i64]).attr("keep_dims", 1i64)),
        ("Mean", NodeSpec::new("Mean", &[a]).attr("axis", vec![0i64]).attr("keep_dims", AttrValue::Str("true".into()))),
    ] {
        let e = g.op_spec(spec).unwrap_err();
        assert!(matches!(e, OxiflowError::InvalidArgument(_)), "{e:?}");
        assert!(e.to_string().contains(op) && e.to_string().contains("must be a bool"), "{e}");
    }
    assert_eq!(g.len(), len);
}

#[test]
fn dtype_and_shape_errors_are_typed() {
    let mut g = Graph::new();
    let a = g.constant(t32(&[2], vec![1.0, 2.0])).unwrap();
    let b = g.constant(t64(&[2], vec![1.0, 2.0])).unwrap();
    let c = g.constant(t64(&[3], vec![1.0, 2.0, 3.0])).unwrap();
    let bo = g.constant(Tensor::full(&[2], true)).unwrap();
    let len = g.len();
    let err = g.op("Add", &[a, b]).unwrap_err();
    assert!(matches!(err, OxiflowError::DTypeMismatch { expected: DType::Float32, got: DType::Float64, .. }), "{err:?}");
    assert!(matches!(g.op("Mul", &[b, c]).unwrap_err(), OxiflowError::ShapeMismatch { .. }));
    assert!(g.op("Add", &[bo, bo]).is_err(), "Add of Bool");
    assert!(matches!(g.op("AddN", &[b, c]).unwrap_err(), OxiflowError::ShapeMismatch { .. }));
    assert!(matches!(g.op("AddN", &[a, b]).unwrap_err(), OxiflowError::DTypeMismatch { .. }));
    assert!(matches!(g.op("SelectV2", &[b, b, b]).unwrap_err(), OxiflowError::DTypeMismatch { expected: DType::Bool, .. }));
    let err = g.op_spec(NodeSpec::new("Reshape", &[c]).attr("shape", AttrValue::Shape(vec![2, 2]))).unwrap_err();
    assert!(matches!(err, OxiflowError::ShapeMismatch { .. }) && err.to_string().contains("3 elements"), "{err}");
    assert!(g.op_spec(NodeSpec::new("BroadcastTo", &[c]).attr("shape", AttrValue::Shape(vec![2, 2]))).is_err());
    assert!(g.op_spec(NodeSpec::new("Sum", &[c]).attr("axis", vec![1i64])).is_err());
    assert!(g.op_spec(NodeSpec::new("Sum", &[c]).attr("axis", vec![-2i64])).is_err());
    assert!(g.op_spec(NodeSpec::new("Cast", &[c])).is_err(), "Cast without DstT");
    assert_eq!(g.len(), len);
}

#[test]
fn addn_greater_select() {
    let xs: Vec<Tensor> = (0..3).map(|i| rand_t(&[2, 2], 30 + i, -1.0, 1.0)).collect();
    let mut g = Graph::new();
    let cs: Vec<Output> = xs.iter().map(|t| g.constant(t.clone()).unwrap()).collect();
    let s = g.op("AddN", &cs).unwrap();
    let want: Vec<f64> = (0..4).map(|j| xs.iter().map(|t| t.to_f64_vec()[j]).sum()).collect();
    assert_close(&eval1(&g, &[], s).to_f64_vec(), &want, 1e-15, "AddN");
    let one = g.op("AddN", &cs[..1]).unwrap();
    assert_eq!(eval1(&g, &[], one).to_f64_vec(), xs[0].to_f64_vec());
    let ints = g.constant(Tensor::full(&[2], 3i64)).unwrap();
    let si = g.op("AddN", &[ints, ints, ints]).unwrap();
    assert_eq!(eval1(&g, &[], si).to_f64_vec(), vec![9.0, 9.0]);

    let a = rand_t(&[2, 3], 40, -1.0, 1.0);
    let b = rand_t(&[3], 41, -1.0, 1.0);
    let gt = binary("Greater", &a, &b);
    assert_eq!(gt.dtype(), DType::Bool);
    let (_, want) = naive_broadcast(&a.to_f64_vec(), &[2, 3], &b.to_f64_vec(), &[3], |x, y| (x > y) as u8 as f64);
    assert_eq!(gt.to_f64_vec(), want);

    let cond = Tensor::from_vec(&[2, 1], vec![true, false], oxiflow_core::Layout::RowMajor).unwrap();
    let (g, y) = with_attrs(NodeSpec::new("SelectV2", &[]), &[cond, a.clone(), b.clone()]);
    let got = eval1(&g, &[], y);
    assert_eq!(got.dims(), &[2, 3]);
    let (av, bv) = (a.to_f64_vec(), b.to_f64_vec());
    let want: Vec<f64> = (0..6).map(|i| if i < 3 { av[i] } else { bv[i % 3] }).collect();
    assert_eq!(got.to_f64_vec(), want);
}

#[test]
fn reshape_broadcast_to_ones_zeros() {
    let x = rand_t(&[2, 3], 50, -1.0, 1.0);
    let (g, y) = with_attrs(NodeSpec::new("Reshape", &[]).attr("shape", AttrValue::Shape(vec![3, 1, 2])), std::slice::from_ref(&x));
    let got = eval1(&g, &[], y);
    assert_eq!(got.dims(), &[3, 1, 2]);
    assert_eq!(got.to_f64_vec(), x.to_f64_vec());
    // Reshape of a column-major tensor keeps row-major element order.
    let xf = Tensor::from_vec(&[2, 3], vec![1.0f64, 4.0, 2.0, 5.0, 3.0, 6.0], oxiflow_core::Layout::ColumnMajor).unwrap();
    let (g, y) = with_attrs(NodeSpec::new("Reshape", &[]).attr("shape", AttrValue::Shape(vec![6])), &[xf]);
    assert_eq!(eval1(&g, &[], y).to_f64_vec(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);

    let b = rand_t(&[3, 1], 51, -1.0, 1.0);
    let (g, y) = with_attrs(NodeSpec::new("BroadcastTo", &[]).attr("shape", AttrValue::Shape(vec![2, 3, 4])), std::slice::from_ref(&b));
    let got = eval1(&g, &[], y);
    let (dims, want) = naive_broadcast(&b.to_f64_vec(), &[3, 1], &[0.0; 24], &[2, 3, 4], |p, _| p);
    assert_eq!(got.dims(), dims.as_slice());
    assert_eq!(got.to_f64_vec(), want);

    for (op, v) in [("OnesLike", 1.0), ("ZerosLike", 0.0)] {
        for t in [x.clone(), Tensor::full(&[2], 5i32), Tensor::full(&[1, 2], true)] {
            let got = unary_f64(op, &t);
            assert_eq!((got.dtype(), got.dims()), (t.dtype(), t.dims()));
            assert!(got.to_f64_vec().iter().all(|&e| e == v), "{op}");
        }
    }
}

/// Sum over `axes` by the definition.
fn naive_sum(x: &[f64], dims: &[usize], axes: &[usize], keep: bool) -> (Vec<usize>, Vec<f64>) {
    naive_fold(x, dims, axes, keep, 0.0, |a, b| a + b)
}

/// The row-major array `x` of shape `dims` folded over `axes` element by element from
/// `init`: the oracle for the reductions.
fn naive_fold(x: &[f64], dims: &[usize], axes: &[usize], keep: bool, init: f64, f: impl Fn(f64, f64) -> f64) -> (Vec<usize>, Vec<f64>) {
    let out_dims: Vec<usize> = dims.iter().enumerate().map(|(i, &d)| if axes.contains(&i) { 1 } else { d }).collect();
    let mut out = vec![init; out_dims.iter().product()];
    let (si, so) = (strides(dims), strides(&out_dims));
    for (flat, &v) in x.iter().enumerate() {
        let o: usize = (0..dims.len()).map(|d| if axes.contains(&d) { 0 } else { (flat / si[d]) % dims[d] * so[d] }).sum();
        out[o] = f(out[o], v);
    }
    let dims = if keep { out_dims } else { out_dims.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d).collect() };
    (dims, out)
}

#[test]
fn sum_over_axes_with_and_without_keep_dims() {
    let dims = [2, 3, 4];
    let x = rand_t(&dims, 60, -1.0, 1.0);
    let cases: [(Option<Vec<i64>>, Vec<usize>); 7] = [
        (None, vec![0, 1, 2]),
        (Some(vec![]), vec![0, 1, 2]),
        (Some(vec![0]), vec![0]),
        (Some(vec![1]), vec![1]),
        (Some(vec![-1]), vec![2]),
        (Some(vec![0, 2]), vec![0, 2]),
        (Some(vec![2, -3, 0]), vec![0, 2]),
    ];
    for (axis, norm) in cases {
        for keep in [false, true] {
            let mut spec = NodeSpec::new("Sum", &[]).attr("keep_dims", keep);
            if let Some(a) = &axis {
                spec = spec.attr("axis", a.clone());
            }
            let (g, y) = with_attrs(spec, std::slice::from_ref(&x));
            let got = eval1(&g, &[], y);
            let (wd, want) = naive_sum(&x.to_f64_vec(), &dims, &norm, keep);
            assert_eq!(got.dims(), wd.as_slice(), "axis {axis:?} keep {keep}");
            assert_eq!(g.shape_of(y).unwrap(), Shape(wd));
            assert_close(&got.to_f64_vec(), &want, 1e-14, "Sum");
        }
    }
    let (g, y) = with_attrs(NodeSpec::new("Sum", &[]).attr("axis", vec![0i64]), &[Tensor::full(&[3, 2], 7i32)]);
    let got = eval1(&g, &[], y);
    assert_eq!((got.dtype(), got.to_f64_vec()), (DType::Int32, vec![21.0, 21.0]));
}

/// The same values as the row-major `values` of shape `dims`, stored column-major:
/// element (i0, i1, ...) at sum(i_d * prod(dims[..d])).
fn column_major_copy(values: &[f64], dims: &[usize]) -> Tensor {
    let mut cm = vec![0.0; values.len()];
    for (flat, &v) in values.iter().enumerate() {
        let (mut rest, mut at, mut stride) = (flat, 0, 1);
        let idx: Vec<usize> = dims
            .iter()
            .rev()
            .map(|&d| {
                let i = rest % d.max(1);
                rest /= d.max(1);
                i
            })
            .collect();
        for (d, &i) in dims.iter().zip(idx.iter().rev()) {
            at += i * stride;
            stride *= d;
        }
        cm[at] = v;
    }
    Tensor::from_vec(dims, cm, Layout::ColumnMajor).unwrap()
}

/// The five reductions and their element-by-element oracles: (op, init, step). `Mean` is
/// the `Sum` divided by the count afterwards.
type Reduction = (&'static str, f64, fn(f64, f64) -> f64);
const REDUCTIONS: [Reduction; 5] = [
    ("Sum", 0.0, |a, b| a + b),
    ("Mean", 0.0, |a, b| a + b),
    ("Prod", 1.0, |a, b| a * b),
    ("Max", f64::NEG_INFINITY, |a, b| if b > a || b.is_nan() { b } else { a }),
    ("Min", f64::INFINITY, |a, b| if b < a || b.is_nan() { b } else { a }),
];

/// Equal (infinities and NaN included) or within `tol` relative to `max(|want|, 1)`.
fn assert_same(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = g == w || (g.is_nan() && w.is_nan()) || (g - w).abs() <= tol * w.abs().max(1.0);
        assert!(ok, "{what}: element {i}: got {g}, want {w}");
    }
}

#[test]
fn reductions_over_every_axis_set_of_every_layout_and_size() {
    // Size-1 axes inside and around the reduced ones, lengths with and without a remainder
    // of 8 (the interleaved partial results), empty arrays, and column-major copies (a
    // loop over their memory where the reduced axes allow, else axis by axis). An empty
    // axis list (reduce all) is the test above.
    for (k, dims) in [vec![3, 1, 21, 5], vec![1, 37], vec![2, 0, 3], vec![16], vec![4, 1, 1, 2, 3]].into_iter().enumerate() {
        let x = rand_t(&dims, 70 + k as u64, -1.0, 1.0);
        let values = x.to_f64_vec();
        let column_major = column_major_copy(&values, &dims);
        for set in 1u32..(1 << dims.len()) {
            let axes: Vec<usize> = (0..dims.len()).filter(|i| set & (1 << i) != 0).collect();
            let count: usize = axes.iter().map(|&a| dims[a]).product();
            for (op, init, step) in REDUCTIONS {
                let (wd, mut want) = naive_fold(&values, &dims, &axes, false, init, step);
                if op == "Mean" {
                    want.iter_mut().for_each(|w| *w /= count as f64);
                }
                for input in [&x, &column_major] {
                    let spec = NodeSpec::new(op, &[]).attr("axis", axes.iter().map(|&a| a as i64).collect::<Vec<_>>());
                    let (g, y) = with_attrs(spec, std::slice::from_ref(input));
                    let got = eval1(&g, &[], y);
                    assert_eq!(got.dims(), wd.as_slice(), "{op} of {dims:?} over {axes:?}");
                    assert_same(&got.to_f64_vec(), &want, 1e-14, &format!("{op} of {dims:?} over {axes:?}"));
                }
            }
        }
    }
}

#[test]
fn max_and_min_return_nan_wherever_a_reduced_value_is_nan() {
    // One NaN in a [3, 19] array: reducing over the rows (eight interleaved partial results
    // per row) and over the columns (rows combined element by element), in both layouts.
    let dims = [3usize, 19];
    let mut values = rand_t(&dims, 90, -1.0, 1.0).to_f64_vec();
    values[19 + 11] = f64::NAN; // row 1, column 11
    let row_major = Tensor::from_vec(&dims, values.clone(), Layout::RowMajor).unwrap();
    let column_major = column_major_copy(&values, &dims);
    for op in ["Max", "Min"] {
        for input in [&row_major, &column_major] {
            for axis in [0i64, 1] {
                let (g, y) = with_attrs(NodeSpec::new(op, &[]).attr("axis", vec![axis]), std::slice::from_ref(input));
                let got = eval1(&g, &[], y).to_f64_vec();
                let nan_at: Vec<usize> = (0..got.len()).filter(|&i| got[i].is_nan()).collect();
                assert_eq!(nan_at, if axis == 0 { vec![11] } else { vec![1] }, "{op} over axis {axis}: {got:?}");
            }
        }
    }
}

#[test]
fn cast_between_all_dtypes() {
    let x = t64(&[5], vec![-2.7, -0.5, 0.0, 1.9, 3.0]);
    let cast = |t: &Tensor, d: DType| {
        let (g, y) = with_attrs(NodeSpec::new("Cast", &[]).attr("DstT", d), std::slice::from_ref(t));
        let out = eval1(&g, &[], y);
        assert_eq!(out.dtype(), d);
        out
    };
    assert_eq!(cast(&x, DType::Int32).to_f64_vec(), vec![-2.0, 0.0, 0.0, 1.0, 3.0]);
    assert_eq!(cast(&x, DType::Int64).to_f64_vec(), vec![-2.0, 0.0, 0.0, 1.0, 3.0]);
    assert_eq!(cast(&x, DType::Bool).to_f64_vec(), vec![1.0, 1.0, 0.0, 1.0, 1.0]);
    let f = cast(&x, DType::Float32).to_f64_vec();
    assert_eq!(f, x.to_f64_vec().iter().map(|&v| v as f32 as f64).collect::<Vec<_>>());
    let b = Tensor::from_vec(&[2], vec![true, false], oxiflow_core::Layout::RowMajor).unwrap();
    assert_eq!(cast(&b, DType::Float64).to_f64_vec(), vec![1.0, 0.0]);
    assert_eq!(cast(&b, DType::Int32).to_f64_vec(), vec![1.0, 0.0]);
    assert_eq!(cast(&x, DType::Float64).to_f64_vec(), x.to_f64_vec());
}

/// Shapes that broadcast together: an output shape and two operands derived from it by
/// setting some dimensions to 1 and dropping some leading ones.
fn broadcast_pair() -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
    (prop::collection::vec(1usize..4, 0..4), any::<u64>()).prop_map(|(out, bits)| {
        let derive = |shift: u32| -> Vec<usize> {
            let drop = ((bits >> shift) & 3) as usize % (out.len() + 1);
            out.iter().enumerate().skip(drop).map(|(i, &d)| if (bits >> (shift + 2 + i as u32)) & 1 == 1 { 1 } else { d }).collect()
        };
        (derive(0), derive(16))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn broadcasting_add_mul_match_the_naive_reference((sa, sb) in broadcast_pair(), seed in any::<u64>()) {
        let a = rand_t(&sa, seed, -2.0, 2.0);
        let b = rand_t(&sb, seed ^ 0xABCD, -2.0, 2.0);
        for (op, f) in [("Add", (|x, y| x + y) as Binary), ("Mul", |x, y| x * y)] {
            let (dims, want) = naive_broadcast(&a.to_f64_vec(), &sa, &b.to_f64_vec(), &sb, f);
            let got = binary(op, &a, &b);
            prop_assert_eq!(got.dims(), dims.as_slice());
            prop_assert_eq!(got.to_f64_vec(), want);
        }
    }
}

/// The SIMD functions give the same bits whatever the input's layout: a column-major tensor
/// (a Julia array fed as is) and its row-major copy, Float32 and Float64.
#[test]
fn vectorized_unary_ops_do_not_depend_on_the_layout() {
    let dims = [37, 29];
    let v = rand_vec(37 * 29, 11, -3.0, 3.0);
    for op in ["Tanh", "Exp", "Log", "Sigmoid", "Sqrt", "Relu"] {
        let arg = |v: &[f64]| -> Vec<f64> {
            if op == "Log" || op == "Sqrt" {
                v.iter().map(|x| x.abs() + 0.01).collect()
            } else {
                v.to_vec()
            }
        };
        let x = arg(&v);
        for f32s in [false, true] {
            // the same logical values: row-major data, and its column-major ordering
            let colmajor: Vec<f64> = (0..dims[1]).flat_map(|j| (0..dims[0]).map(move |i| (i, j))).map(|(i, j)| x[i * dims[1] + j]).collect();
            let make = |data: &Vec<f64>, layout| {
                if f32s {
                    Tensor::from_vec(&dims, data.iter().map(|&a| a as f32).collect(), layout).unwrap()
                } else {
                    Tensor::from_vec(&dims, data.clone(), layout).unwrap()
                }
            };
            let (row, col) = (make(&x, Layout::RowMajor), make(&colmajor, Layout::ColumnMajor));
            assert_eq!(row.to_f64_vec(), col.to_f64_vec(), "the two inputs hold the same values");
            let (a, b) = (unary_f64(op, &row), unary_f64(op, &col));
            assert_eq!(a.dims(), b.dims());
            let same = a.to_f64_vec().iter().zip(b.to_f64_vec()).all(|(p, q)| p.to_bits() == q.to_bits());
            assert!(same, "{op} (f32: {f32s}): results depend on the layout");
        }
    }
}

#[test]
fn node_names_follow_tfs_rule() {
    let mut g = Graph::new();
    let x = g.constant(Tensor::full(&[2], 1.0f64)).unwrap();
    let len = g.len();
    for bad in ["", "a:b", "x:0", "-a", "/a", "a b", "é", "a\n"] {
        let e = g.op_spec(NodeSpec::new("Sin", &[x]).name(bad)).unwrap_err();
        assert!(matches!(e, OxiflowError::InvalidArgument(_)) && e.to_string().contains("not a valid node name"), "{bad:?}: {e}");
        assert!(g.variable(Tensor::full(&[1], 0.0f64), Some(bad), true).is_err(), "variable {bad:?}");
    }
    assert_eq!(g.len(), len, "refused names leave the graph unchanged");
    for good in ["a", "a/b_c-1.x", "_helper", ".dot", "scope/name>1", "9lives"] {
        let o = g.op_spec(NodeSpec::new("Sin", &[x]).name(good)).unwrap();
        assert_eq!(g.node(o.node).unwrap().name, good);
    }
    assert!(g.variable(Tensor::full(&[1], 0.0f64), Some("layer/w/"), true).is_ok(), "a trailing / means the exact name");
}
