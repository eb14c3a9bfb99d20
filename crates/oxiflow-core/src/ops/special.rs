//! Special functions: TF's `Lgamma` (`tf.math.lgamma`, ADCME's `lgamma`), `Digamma` and
//! `Polygamma`, with TF's gradients (`math_grad.py`: `_LgammaGrad` is `Digamma`,
//! `_DigammaGrad` is `Polygamma(1, x)`, `_PolygammaGrad` is `Polygamma(a + 1, x)`), so
//! derivatives of any order exist.
//!
//! Values at the poles follow Eigen's functions, which TF's kernels call: `lgamma` of a
//! non-positive integer is `+inf`, `digamma` there is `+inf` too, and `polygamma(n, x)` is
//! `±inf` (the sign of `(-1)^(n+1)`); `polygamma` with a non-integer or negative order is
//! NaN. `Float32` is computed in `Float64` and rounded. CPU kernels only: on a GPU the ops
//! need soft placement.
//!
//! `lgamma` is `libm`'s (musl's port of FreeBSD's `lgamma_r`). `digamma` and
//! `polygamma(n, x) = (-1)^(n+1) n! ζ(n+1, x)` shift `x` up with the recurrences
//! `ψ(x) = ψ(x+1) - 1/x` and `ζ(s, x) = x^-s + ζ(s, x+1)` until the asymptotic
//! (Euler-Maclaurin) series with Bernoulli numbers `B2 .. B16` is exact to double
//! precision, and use the reflection `ψ(x) = ψ(1-x) - π cot(πx)` below zero
//! (Abramowitz & Stegun 6.3.7, 6.3.18, 6.4.11, 23.2.3).
//!
//! The error functions `Erf`, `Erfc` (`libm`'s, from FreeBSD's `s_erf.c`), `Erfinv` and the
//! normal quantile `Ndtri` (`Φ⁻¹(p) = √2 erfinv(2p - 1)`, taken through `erfc⁻¹`), with
//! TF's gradients (`_ErfGrad`: `2/√π e^{-x²}`; `_ErfcGrad`: its negative; `_ErfinvGrad`:
//! `√π/2 e^{erfinv(x)²}`). `erfinv` starts from Giles' single-precision approximation
//! ("Approximating the erfinv function", GPU Computing Gems, 2010) and takes Newton steps on
//! `erf(x) = y`, or on `erfc(x) = 1 - |y|` for `|y| > 0.5`, where `1 - |y|` is exact and
//! `erfc` keeps its relative accuracy in the tail; `erfinv(±1) = ±inf`, NaN outside
//! `[-1, 1]`.

use super::grad_util::{need_dy, to_input_shape};
use super::math::{def, infer_binary_float, map_float};
use super::zip::zip2;
use super::*;

/// `B_2j / (2j)!` for j = 1..8 (A&S table 23.2).
const BERNOULLI_OVER_FACTORIAL: [f64; 8] =
    [1.0 / 12.0, -1.0 / 720.0, 1.0 / 30240.0, -1.0 / 1209600.0, 1.0 / 47900160.0, -691.0 / 1307674368000.0, 1.0 / 74724249600.0, -3617.0 / 10670622842880000.0];

/// Where the asymptotic series takes over: its first omitted term is below 1e-17 there.
const ASYMPTOTIC_FROM: f64 = 12.0;

/// The digamma function ψ(x) = d/dx ln Γ(x); `+inf` at the poles (x = 0, -1, -2, ...).
pub fn digamma(x: f64) -> f64 {
    if x.is_nan() || x == f64::NEG_INFINITY {
        return f64::NAN;
    }
    if x <= 0.0 {
        if x == x.floor() {
            return f64::INFINITY;
        }
        // reflection, with cot(πx) from the fractional part so that π x does not lose digits
        let frac = x - x.floor();
        return digamma(1.0 - x) - std::f64::consts::PI / (std::f64::consts::PI * frac).tan();
    }
    let (mut x, mut acc) = (x, 0.0);
    while x < ASYMPTOTIC_FROM {
        acc -= 1.0 / x;
        x += 1.0;
    }
    // ψ(x) ~ ln x - 1/(2x) - Σ B_2j / (2j x^2j)
    let inv2 = 1.0 / (x * x);
    let mut series = 0.0;
    let mut p = inv2;
    for (j, c) in BERNOULLI_OVER_FACTORIAL.iter().enumerate() {
        // B_2j / (2j) = c (2j)! / (2j) = c (2j - 1)!
        let fact: f64 = (1..2 * j + 2).map(|i| i as f64).product();
        series += c * fact * p;
        p *= inv2;
    }
    acc + x.ln() - 0.5 / x - series
}

/// The Hurwitz zeta function ζ(s, q) = Σ_k (q + k)^-s for an integer `s >= 2` and any `q`
/// that is not a non-positive integer (there it is `+inf`).
fn hurwitz_zeta(s: u32, q: f64) -> f64 {
    if q <= 0.0 && q == q.floor() {
        return f64::INFINITY;
    }
    let sf = f64::from(s);
    let (mut q, mut acc) = (q, 0.0);
    // the series' terms grow like the rising factorial s (s+1) ... / q^2j: shift further for
    // high orders (at q = 2s + 4 the first omitted term is below 1e-16 of the sum)
    let from = ASYMPTOTIC_FROM.max(2.0 * sf + 4.0);
    while q < from {
        acc += q.powi(-(s as i32));
        q += 1.0;
    }
    // ζ(s, q) ~ q^(1-s)/(s-1) + q^-s/2 + Σ_j B_2j/(2j)! s(s+1)..(s+2j-2) q^(-s-2j+1)
    let mut tail = q.powf(1.0 - sf) / (sf - 1.0) + 0.5 * q.powf(-sf);
    let mut rising = sf; // s (s+1) ... (s + 2j - 2)
    let mut p = q.powf(-sf - 1.0);
    for (j, c) in BERNOULLI_OVER_FACTORIAL.iter().enumerate() {
        tail += c * rising * p;
        let k = (2 * j + 1) as f64;
        rising *= (sf + k) * (sf + k + 1.0);
        p /= q * q;
    }
    acc + tail
}

/// The polygamma function ψ⁽ⁿ⁾(x), the n-th derivative of ψ: ψ itself for `n = 0`,
/// `(-1)^(n+1) n! ζ(n+1, x)` above; NaN for a negative or non-integer `n` (TF and Eigen).
pub fn polygamma(n: f64, x: f64) -> f64 {
    if n.is_nan() || x.is_nan() || n < 0.0 || n != n.floor() {
        return f64::NAN;
    }
    if n == 0.0 {
        return digamma(x);
    }
    if n > 170.0 {
        return f64::NAN; // n! overflows
    }
    let m = n as u32;
    let fact: f64 = (1..=m).map(f64::from).product();
    let sign = if m % 2 == 1 { 1.0 } else { -1.0 };
    if x == f64::INFINITY {
        return 0.0;
    }
    sign * fact * hurwitz_zeta(m + 1, x)
}

/// `ln|Γ(x)|` (`libm`'s `lgamma`): `+inf` at the poles.
pub fn lgamma(x: f64) -> f64 {
    libm::lgamma(x)
}

fn kernel_lgamma(ctx: &KernelCtx) -> Result<Outputs> {
    map_float(ctx, |x| lgamma(f64::from(x)) as f32, lgamma)
}

/// Giles' approximation of `erfinv(y)` for `|y| < 1`, to about 1e-7 relative, given `w =
/// -ln((1 - y)(1 + y))` (computed by the caller from `1 - y` where that is what it knows).
fn erfinv_guess(y: f64, w: f64) -> f64 {
    let p = if w < 5.0 {
        let w = w - 2.5;
        [2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941]
            .iter()
            .fold(0.0, |p, &c| p * w + c)
    } else {
        let w = w.sqrt() - 3.0;
        [-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682]
            .iter()
            .fold(0.0, |p, &c| p * w + c)
    };
    p * y
}

/// The inverse error function: `erf(erfinv(y)) = y` for `y` in `[-1, 1]`.
pub fn erfinv(y: f64) -> f64 {
    if y.is_nan() || y.abs() > 1.0 {
        return f64::NAN;
    }
    if y.abs() == 1.0 {
        return y * f64::INFINITY;
    }
    let a = y.abs();
    if a > 0.5 {
        return erfc_inverse(1.0 - a).copysign(y);
    }
    let two_over_sqrt_pi = std::f64::consts::FRAC_2_SQRT_PI;
    let mut x = erfinv_guess(a, -((1.0 - a) * (1.0 + a)).ln());
    for _ in 0..3 {
        x -= (libm::erf(x) - a) / (two_over_sqrt_pi * (-x * x).exp());
    }
    x.copysign(y)
}

/// The `x ≥ 0` with `erfc(x) = c`, for `c` in `(0, 1]`: Newton on `ln erfc(x) = ln c`, nearly
/// quadratic in the tail (`ln erfc(x) ≈ -x² - ln(x√π)`), from Giles' guess, which it
/// corrects even where that guess is poor (`c` below single precision's range). `c` itself,
/// not `1 - c`, carries the digits, so tiny `c` (the far tail) keeps its precision.
fn erfc_inverse(c: f64) -> f64 {
    let two_over_sqrt_pi = std::f64::consts::FRAC_2_SQRT_PI;
    // Giles fitted his polynomial for single precision (w up to about 36); farther out it
    // can overshoot to where erfc underflows, so there the start is √(-ln c), just above the
    // root (erfc(x) < e^{-x²})
    let w = -(c * (2.0 - c)).ln();
    let mut x = if w < 30.0 { erfinv_guess(1.0 - c, w) } else { (-c.ln()).sqrt() };
    let lc = c.ln();
    for _ in 0..50 {
        let e = libm::erfc(x);
        let step = (e.ln() - lc) * e / (two_over_sqrt_pi * (-x * x).exp());
        x += step;
        if step.abs() <= 1e-16 * x.abs() {
            break;
        }
    }
    x
}

/// The standard normal quantile `Φ⁻¹(p)` (TF's `Ndtri`): `-√2 erfc⁻¹(2p)` below 1/2 and
/// `√2 erfc⁻¹(2(1 - p))` above, so that the lower tail keeps full relative precision down
/// to the smallest `p`; `∓inf` at 0 and 1, NaN outside `[0, 1]`.
pub fn ndtri(p: f64) -> f64 {
    if p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    let s2 = std::f64::consts::SQRT_2;
    if p == 0.0 {
        f64::NEG_INFINITY
    } else if p == 1.0 {
        f64::INFINITY
    } else if p == 0.5 {
        0.0
    } else if p < 0.5 {
        -s2 * erfc_inverse(2.0 * p)
    } else {
        s2 * erfc_inverse(2.0 * (1.0 - p))
    }
}

fn kernel_erf(ctx: &KernelCtx) -> Result<Outputs> {
    match ctx.node.op.name {
        "Erf" => map_float(ctx, |x| libm::erf(f64::from(x)) as f32, libm::erf),
        "Erfc" => map_float(ctx, |x| libm::erfc(f64::from(x)) as f32, libm::erfc),
        "Ndtri" => map_float(ctx, |x| ndtri(f64::from(x)) as f32, ndtri),
        _ => map_float(ctx, |x| erfinv(f64::from(x)) as f32, erfinv),
    }
}

/// TF `_ErfGrad` and `_ErfcGrad`: `±dy 2/√π e^{-x²}`; `_ErfinvGrad`: `dy √π/2 e^{y²}` and
/// `_NdtriGrad`: `dy √(2π) e^{y²/2}`, with `y` the op's output.
fn grad_erf(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let x = node.inputs[0];
    let (arg, sign, c) = match node.op.name {
        "Erf" => (x, -1.0, std::f64::consts::FRAC_2_SQRT_PI),
        "Erfc" => (x, -1.0, -std::f64::consts::FRAC_2_SQRT_PI),
        "Erfinv" => (Output::new(node.id, 0), 1.0, 1.0 / std::f64::consts::FRAC_2_SQRT_PI),
        _ => (Output::new(node.id, 0), 0.5, (2.0 * std::f64::consts::PI).sqrt()),
    };
    let sq = g.op("Square", &[arg])?;
    let k = super::grad_util::scalar_of(g, x, sign)?;
    let e = g.op("Mul", &[sq, k])?;
    let e = g.op("Exp", &[e])?;
    let c = super::grad_util::scalar_of(g, x, c)?;
    let d = g.op("Mul", &[e, c])?;
    Ok(vec![Some(g.op("Mul", &[dy, d])?)])
}

fn kernel_digamma(ctx: &KernelCtx) -> Result<Outputs> {
    map_float(ctx, |x| digamma(f64::from(x)) as f32, digamma)
}

fn kernel_polygamma(ctx: &KernelCtx) -> Result<Outputs> {
    Ok(smallvec![match (&ctx.inputs[0], &ctx.inputs[1]) {
        (Tensor::F64(a), Tensor::F64(x)) => Tensor::F64(zip2(ctx, a, x, polygamma)?),
        (Tensor::F32(a), Tensor::F32(x)) => Tensor::F32(zip2(ctx, a, x, |n, x| polygamma(f64::from(n), f64::from(x)) as f32)?),
        (a, x) => return Err(ctx.error(format!("no kernel for dtypes {} and {}", a.dtype(), x.dtype()))),
    }])
}

/// TF `_LgammaGrad`: `dy * digamma(x)`.
fn grad_lgamma(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let d = g.op("Digamma", &[node.inputs[0]])?;
    Ok(vec![Some(g.op("Mul", &[dy, d])?)])
}

/// TF `_DigammaGrad`: `dy * polygamma(1, x)`.
fn grad_digamma(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let x = node.inputs[0];
    let one = super::grad_util::scalar_of(g, x, 1.0)?;
    let d = g.op("Polygamma", &[one, x])?;
    Ok(vec![Some(g.op("Mul", &[dy, d])?)])
}

/// TF `_PolygammaGrad`: `dy * polygamma(a + 1, x)` for `x`, summed to its shape; none for
/// the order `a`.
fn grad_polygamma(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 2);
    let (a, x) = (node.inputs[0], node.inputs[1]);
    let one = super::grad_util::scalar_of(g, a, 1.0)?;
    let a1 = g.op("Add", &[a, one])?;
    let d = g.op("Polygamma", &[a1, x])?;
    let gx = g.op("Mul", &[dy, d])?;
    Ok(vec![None, Some(to_input_shape(g, node, gx, 1)?)])
}

pub(crate) fn register(r: &mut Registry) {
    let one = Arity::Fixed(1);
    r.add(def("Lgamma", "Lgamma", one, infer_unary_float, kernel_lgamma, GpuSupport::None, Some(grad_lgamma)));
    for name in ["Erf", "Erfc", "Erfinv", "Ndtri"] {
        r.add(def(name, name, one, infer_unary_float, kernel_erf, GpuSupport::None, Some(grad_erf)));
    }
    r.add(def("Digamma", "Digamma", one, infer_unary_float, kernel_digamma, GpuSupport::None, Some(grad_digamma)));
    // `Polygamma(a, x)`: the order `a` and `x` of one float dtype, broadcast (TF's cwise op)
    r.add(def("Polygamma", "Polygamma", Arity::Fixed(2), infer_binary_float, kernel_polygamma, GpuSupport::None, Some(grad_polygamma)));
}
