//! TF's exponentially scaled modified Bessel functions `BesselI0e` and `BesselI1e`
//! (`tf.math.bessel_i0e`, `bessel_i1e`): `e^{-|x|} I₀(x)` and `e^{-|x|} I₁(x)`, which stay
//! finite where `I₀`, `I₁` overflow. The von Mises distribution's normalizer is `2π I₀(κ)`.
//!
//! For `|x| ≤ 20` the power series `I_ν(x) = Σ_k (x/2)^{2k+ν} / (k! (k+ν)!)` (all terms
//! positive, so no cancellation), scaled by `e^{-|x|}`; above, Hankel's asymptotic expansion
//! `e^{-x} I_ν(x) ~ (2πx)^{-1/2} Σ_k (-1)^k Π_{j≤k} (4ν² - (2j-1)²) / (k! (8x)^k)`, whose
//! smallest term there is about `e^{-2x}` (Abramowitz & Stegun 9.6.10, 9.7.1). `I₁` is odd,
//! `I₀` even. Gradients are TF's (`math_grad.py`): `I₀e' = I₁e - sign(x) I₀e` and
//! `I₁e' = I₀e - I₁e (sign(x) + 1/x)`, `1/2` at `x = 0`. `Float32` is computed in `Float64`
//! and rounded. CPU kernels only.

use super::grad_util::{need_dy, scalar_of};
use super::math::{def, map_float};
use super::*;

/// Where the power series hands over to the asymptotic expansion.
const SERIES_TO: f64 = 20.0;

/// `e^{-|x|} I_ν(x)` for `ν` 0 or 1.
pub fn bessel_ie(nu: u32, x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    let ax = x.abs();
    let v = if ax.is_infinite() {
        0.0
    } else if ax <= SERIES_TO {
        let q = 0.25 * ax * ax;
        let n = f64::from(nu);
        let mut term = if nu == 0 { 1.0 } else { 0.5 * ax };
        let mut sum = term;
        let mut k = 0.0;
        while term > sum * 1e-17 {
            k += 1.0;
            term *= q / (k * (k + n));
            sum += term;
        }
        sum * (-ax).exp()
    } else {
        let mu = 4.0 * f64::from(nu * nu);
        let (mut term, mut sum) = (1.0f64, 1.0f64);
        // an asymptotic series: stop at its smallest term (about e^{-2x}), before the terms
        // grow again
        for k in 1..200 {
            let j = f64::from(2 * k - 1);
            let next = term * -(mu - j * j) / (f64::from(k) * 8.0 * ax);
            if next.abs() >= term.abs() || next.abs() < 1e-17 * sum.abs() {
                break;
            }
            term = next;
            sum += term;
        }
        sum / (2.0 * std::f64::consts::PI * ax).sqrt()
    };
    if nu == 1 && x < 0.0 {
        -v
    } else {
        v
    }
}

fn kernel_bessel(ctx: &KernelCtx) -> Result<Outputs> {
    let nu = u32::from(ctx.node.op.name == "BesselI1e");
    map_float(ctx, move |x| bessel_ie(nu, f64::from(x)) as f32, move |x| bessel_ie(nu, x))
}

/// TF `_BesselI0eGrad`: `dy (I₁e(x) - sign(x) y)`; `_BesselI1eGrad`: `dy (I₀e(x) - y (sign(x)
/// + 1/x))`, `dy / 2` where `x = 0`.
fn grad_bessel(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let x = node.inputs[0];
    let y = Output::new(node.id, 0);
    let sign = g.op("Sign", &[x])?;
    let d = if node.op.name == "BesselI0e" {
        let i1 = g.op("BesselI1e", &[x])?;
        let sy = g.op("Mul", &[sign, y])?;
        g.op("Sub", &[i1, sy])?
    } else {
        let i0 = g.op("BesselI0e", &[x])?;
        let one = scalar_of(g, x, 1.0)?;
        let inv = g.op("RealDiv", &[one, x])?;
        let s = g.op("Add", &[sign, inv])?;
        let ys = g.op("Mul", &[y, s])?;
        let general = g.op("Sub", &[i0, ys])?;
        let zero = scalar_of(g, x, 0.0)?;
        let at_zero = g.op("Equal", &[x, zero])?;
        let half = scalar_of(g, x, 0.5)?;
        g.op("SelectV2", &[at_zero, half, general])?
    };
    Ok(vec![Some(g.op("Mul", &[dy, d])?)])
}

pub(crate) fn register(r: &mut Registry) {
    for name in ["BesselI0e", "BesselI1e"] {
        r.add(def(name, name, Arity::Fixed(1), infer_unary_float, kernel_bessel, GpuSupport::None, Some(grad_bessel)));
    }
}
