//! Complex tensors and the Fourier transforms. Oracles: the DFT summed term by term, the
//! complex arithmetic of `num_complex`, and central finite differences of real losses
//! built through complex ops (TF's convention: the gradient of a real loss in `z` is
//! `∂L/∂re + i ∂L/∂im`, so the finite differences of the real and imaginary parts check it).

mod common;
use common::*;
use oxiflow_core::graph::NodeSpec;
use oxiflow_core::tensor::{Complex, Layout};
use oxiflow_core::{DType, Graph, Output, Tensor};

type C = Complex<f64>;
type Unary = fn(C) -> C;
type Part = fn(C) -> f64;

fn ct(dims: &[usize], seed: u64) -> Vec<C> {
    let n: usize = dims.iter().product();
    let (re, im) = (rand_vec(n, seed, -1.0, 1.0), rand_vec(n, seed + 1, -1.0, 1.0));
    re.into_iter().zip(im).map(|(a, b)| C::new(a, b)).collect()
}

fn c128(dims: &[usize], v: Vec<C>) -> Tensor {
    Tensor::from_vec(dims, v, Layout::RowMajor).unwrap()
}

fn close(got: &[C], want: &[C], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (k, (a, b)) in got.iter().zip(want).enumerate() {
        assert!((a - b).norm() <= tol * (1.0 + b.norm()), "{what}: element {k}: got {a}, want {b}");
    }
}

/// The DFT of `x` (row-major, `dims`) over its innermost `k` axes, term by term.
fn dft(x: &[C], dims: &[usize], k: usize, inverse: bool) -> Vec<C> {
    let r = dims.len();
    let inner: Vec<usize> = dims[r - k..].to_vec();
    let m: usize = inner.iter().product();
    let sign = if inverse { 1.0 } else { -1.0 };
    let unravel = |mut i: usize| -> Vec<usize> {
        let mut idx = vec![0; k];
        for a in (0..k).rev() {
            idx[a] = i % inner[a];
            i /= inner[a];
        }
        idx
    };
    let mut out = vec![C::new(0.0, 0.0); x.len()];
    for b in 0..x.len() / m {
        for p in 0..m {
            let pi = unravel(p);
            let mut s = C::new(0.0, 0.0);
            for q in 0..m {
                let qi = unravel(q);
                let phase: f64 = (0..k).map(|a| (pi[a] * qi[a]) as f64 / inner[a] as f64).sum();
                s += x[b * m + q] * C::from_polar(1.0, sign * 2.0 * std::f64::consts::PI * phase);
            }
            out[b * m + p] = if inverse { s / m as f64 } else { s };
        }
    }
    out
}

#[test]
fn transforms_match_the_dft_summed_term_by_term() {
    for (op, k, dims) in [
        ("FFT", 1, vec![8]),
        ("FFT", 1, vec![3, 7]),
        ("IFFT", 1, vec![2, 5]),
        ("FFT2D", 2, vec![2, 3, 5]),
        ("IFFT2D", 2, vec![4, 6]),
        ("FFT3D", 3, vec![2, 3, 4]),
        ("IFFT3D", 3, vec![2, 2, 3, 2]),
    ] {
        let x = ct(&dims, 7);
        let mut g = Graph::new();
        let p = g.constant(c128(&dims, x.clone())).unwrap();
        let y = g.op(op, &[p]).unwrap();
        let want = dft(&x, &dims, k, op.starts_with('I'));
        close(&eval1(&g, &[], y).to_complex_vec(), &want, 1e-12, op);
        // ComplexF32 too, within its precision
        let p32 = g.op_spec(NodeSpec::new("Cast", &[p]).attr("DstT", DType::Complex64)).unwrap();
        let y32 = g.op(op, &[p32]).unwrap();
        assert_eq!(g.output_type(y32).unwrap().dtype, DType::Complex64);
        close(&eval1(&g, &[], y32).to_complex_vec(), &want, 1e-5, &format!("{op} (ComplexF32)"));
    }
    // a column-major input (what Julia feeds) has the same transform
    let x = ct(&[3, 4], 9);
    let col: Vec<C> = (0..12).map(|i| x[(i % 3) * 4 + i / 3]).collect();
    let mut g = Graph::new();
    let p = g.constant(Tensor::from_vec(&[3, 4], col, Layout::ColumnMajor).unwrap()).unwrap();
    for (op, k) in [("FFT", 1), ("FFT2D", 2)] {
        let y = g.op(op, &[p]).unwrap();
        close(&eval1(&g, &[], y).to_complex_vec(), &dft(&x, &[3, 4], k, false), 1e-12, &format!("{op} of a column-major input"));
    }
    // the inverse undoes the transform
    let x = ct(&[6, 4], 3);
    let mut g = Graph::new();
    let p = g.constant(c128(&[6, 4], x.clone())).unwrap();
    let f = g.op("FFT2D", &[p]).unwrap();
    let back = g.op("IFFT2D", &[f]).unwrap();
    close(&eval1(&g, &[], back).to_complex_vec(), &x, 1e-14, "IFFT2D(FFT2D(x))");
}

#[test]
fn parts_and_arithmetic_follow_complex_algebra() {
    let (a, b) = (ct(&[2, 3], 11), ct(&[3], 21));
    let mut g = Graph::new();
    let pa = g.constant(c128(&[2, 3], a.clone())).unwrap();
    let pb = g.constant(c128(&[3], b.clone())).unwrap();
    let bcast = |f: fn(C, C) -> C| -> Vec<C> { (0..6).map(|i| f(a[i], b[i % 3])).collect() };
    for (op, f) in [("Add", (|x, y| x + y) as fn(C, C) -> C), ("Sub", |x, y| x - y), ("Mul", |x, y| x * y), ("RealDiv", |x, y| x / y)] {
        let y = g.op(op, &[pa, pb]).unwrap();
        close(&eval1(&g, &[], y).to_complex_vec(), &bcast(f), 1e-15, op);
    }
    let unary: [(&str, Unary); 3] = [("Neg", |x| -x), ("Conj", |x| x.conj()), ("Exp", |x| x.exp())];
    for (op, f) in unary {
        let y = g.op(op, &[pa]).unwrap();
        close(&eval1(&g, &[], y).to_complex_vec(), &a.iter().map(|&x| f(x)).collect::<Vec<_>>(), 1e-15, op);
    }
    let parts: [(&str, Part); 4] = [("Real", |x| x.re), ("Imag", |x| x.im), ("ComplexAbs", |x| x.norm()), ("Angle", |x| x.arg())];
    for (op, f) in parts {
        let y = g.op(op, &[pa]).unwrap();
        assert_eq!(g.output_type(y).unwrap().dtype, DType::Float64, "{op}");
        assert_close(&eval1(&g, &[], y).to_f64_vec(), &a.iter().map(|&x| f(x)).collect::<Vec<_>>(), 1e-15, op);
    }
    // Complex(re, im) of broadcast parts; AddN; Sum over an axis
    let re = g.constant(t64(&[2, 1], vec![1.0, -2.0])).unwrap();
    let im = g.constant(t64(&[3], vec![0.5, 0.0, -1.5])).unwrap();
    let z = g.op("Complex", &[re, im]).unwrap();
    let want: Vec<C> = (0..6).map(|i| C::new([1.0, -2.0][i / 3], [0.5, 0.0, -1.5][i % 3])).collect();
    close(&eval1(&g, &[], z).to_complex_vec(), &want, 0.0, "Complex");
    let n = g.op("AddN", &[pa, z, pa]).unwrap();
    close(&eval1(&g, &[], n).to_complex_vec(), &(0..6).map(|i| a[i] + want[i] + a[i]).collect::<Vec<_>>(), 1e-15, "AddN");
    let s = g.op_spec(NodeSpec::new("Sum", &[pa]).attr("axis", vec![0i64])).unwrap();
    close(&eval1(&g, &[], s).to_complex_vec(), &(0..3).map(|j| a[j] + a[3 + j]).collect::<Vec<_>>(), 1e-15, "Sum");
    // Cast: real to complex, complex to real (the real part, as TF) and to Bool
    let x = g.constant(t64(&[2], vec![1.5, -3.0])).unwrap();
    let xc = g.op_spec(NodeSpec::new("Cast", &[x]).attr("DstT", DType::Complex128)).unwrap();
    close(&eval1(&g, &[], xc).to_complex_vec(), &[C::new(1.5, 0.0), C::new(-3.0, 0.0)], 0.0, "Cast to complex");
    let ar = g.op_spec(NodeSpec::new("Cast", &[pa]).attr("DstT", DType::Float32)).unwrap();
    assert_close(&eval1(&g, &[], ar).to_f64_vec(), &a.iter().map(|x| x.re as f32 as f64).collect::<Vec<_>>(), 0.0, "Cast to Float32");
    let zb = g.constant(c128(&[3], vec![C::new(0.0, 0.0), C::new(0.0, 2.0), C::new(-1.0, 0.0)])).unwrap();
    let bools = g.op_spec(NodeSpec::new("Cast", &[zb]).attr("DstT", DType::Bool)).unwrap();
    assert_eq!(eval1(&g, &[], bools).to_f64_vec(), vec![0.0, 1.0, 1.0]);
}

#[test]
fn ops_without_complex_kernels_refuse_complex_tensors_when_built() {
    let mut g = Graph::new();
    let z = g.constant(c128(&[2], ct(&[2], 5))).unwrap();
    for op in ["Maximum", "FloorDiv", "Less"] {
        let e = g.op(op, &[z, z]).unwrap_err().to_string();
        assert!(e.contains(op) && e.contains("ComplexF64"), "{op}: {e}");
    }
    for op in ["Log", "Tanh", "Abs", "Sign"] {
        assert!(g.op(op, &[z]).is_err(), "{op} accepted a complex tensor");
    }
    let r = g.constant(t64(&[2], vec![1.0, 2.0])).unwrap();
    let e = g.op("FFT", &[r]).unwrap_err().to_string();
    assert!(e.contains("FFT") && e.contains("complex"), "{e}");
    let e = g.op("FFT2D", &[z]).unwrap_err().to_string();
    assert!(e.contains("rank at least 2"), "{e}");
    let i = g.constant(Tensor::from_vec(&[2], vec![1i32, 2], Layout::RowMajor).unwrap()).unwrap();
    assert!(g.op("Complex", &[i, i]).is_err());
}

/// `sum(w .* f(Complex(x, y)))` for real placeholders `x`, `y`: the real loss whose finite
/// differences check the complex gradients.
fn through_complex(f: impl Fn(&mut Graph, Output) -> Output) -> impl Fn(&mut Graph, &[Output]) -> oxiflow_core::Result<Output> {
    move |g: &mut Graph, xs: &[Output]| {
        let z = g.op("Complex", &[xs[0], xs[1]])?;
        Ok(f(g, z))
    }
}

#[test]
fn gradients_through_complex_ops_match_finite_differences() {
    let (x, y) = (rand_t(&[2, 4], 31, -1.0, 1.0), rand_t(&[2, 4], 32, -1.0, 1.0));
    let k = g_const(&[4], 41);
    // |FFT(z) * k|: Complex, FFT, Mul by a complex constant, ComplexAbs
    check_grads(
        &[x.clone(), y.clone()],
        through_complex(move |g, z| {
            let f = g.op("FFT", &[z]).unwrap();
            let kc = g.constant(k.clone()).unwrap();
            let m = g.op("Mul", &[f, kc]).unwrap();
            g.op("ComplexAbs", &[m]).unwrap()
        }),
    );
    // Real(IFFT2D(z / conj(z + 3))) + Imag(FFT3D-free parts): RealDiv, Conj, Add, Real, Imag, Sum
    check_grads(
        &[x.clone(), y.clone()],
        through_complex(|g, z| {
            let three = g.constant(c128(&[], vec![C::new(3.0, 0.5)])).unwrap();
            let s = g.op("Add", &[z, three]).unwrap();
            let c = g.op("Conj", &[s]).unwrap();
            let q = g.op("RealDiv", &[z, c]).unwrap();
            let t = g.op("IFFT2D", &[q]).unwrap();
            let (re, im) = (g.op("Real", &[t]).unwrap(), g.op("Imag", &[t]).unwrap());
            let p = g.op("Mul", &[re, im]).unwrap();
            g.op("Add", &[p, re]).unwrap()
        }),
    );
    // Angle, Exp, Neg, a complex Sum, a complex square
    check_grads(
        &[x, y],
        through_complex(|g, z| {
            let e = g.op("Exp", &[z]).unwrap();
            let n = g.op("Neg", &[e]).unwrap();
            let sq = g.op("Mul", &[n, z]).unwrap();
            let s = g.op_spec(NodeSpec::new("Sum", &[sq]).attr("axis", vec![1i64]).attr("keep_dims", true)).unwrap();
            let b = g.op("Add", &[sq, s]).unwrap();
            g.op("Angle", &[b]).unwrap()
        }),
    );
}

fn g_const(dims: &[usize], seed: u64) -> Tensor {
    c128(dims, ct(dims, seed))
}

#[test]
fn a_real_input_cast_to_complex_gets_the_real_part_of_the_gradient() {
    let x = rand_t(&[6], 51, -1.0, 1.0);
    check_grads(&[x], |g: &mut Graph, xs: &[Output]| {
        let z = g.op_spec(NodeSpec::new("Cast", &[xs[0]]).attr("DstT", DType::Complex128))?;
        let f = g.op("FFT", &[z])?;
        let f2 = g.op("Mul", &[f, f])?;
        g.op("Real", &[f2])
    });
}
