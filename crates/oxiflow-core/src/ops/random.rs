//! Random tensors: `RandomStandardNormal` and `RandomUniform` (TF's `tf.random.normal` /
//! `tf.random.uniform` primitives, `gen_random_ops`), and `RandomGamma` and `RandomPoissonV2`
//! (TF's `tf.random.gamma` and `tf.random.poisson` primitives), and `_RandomVonMises` (TF
//! Probability samples the von Mises distribution with a loop of graph ops; here it is a
//! kernel); each is described at its kernel.
//!
//! Both take no inputs; attrs `shape` (static), `dtype` (`Float32`/`Float64`, default
//! `Float64`), and TF's `seed`/`seed2` ints (default 0). They are stateful: each session
//! keeps a stream position per node, so successive runs give fresh values, while two
//! sessions (or two graphs built the same way) with the same nonzero `(seed, seed2)` give
//! the same sequence. `seed = seed2 = 0` draws a fresh seed from the OS on the node's first
//! run in a session, as TF does. The generator is ChaCha8 (`rand_chacha`), one stream per
//! run; normals come from `rand_distr::StandardNormal`, uniforms are in `[0, 1)`.
//! Not differentiable (TF registers no gradient).

use super::*;
use rand::distr::{Distribution, StandardUniform};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Binomial, Gamma, Poisson, StandardNormal};

fn out_dtype(attrs: &Attrs, op: &str) -> Result<DType> {
    match attrs.get("dtype") {
        None => Ok(DType::Float64),
        Some(_) => attrs.get_type(op, "dtype"),
    }
}

fn infer_random(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let shape = Shape(ctx.attrs.get_shape(ctx.op, "shape")?);
    let dtype = out_dtype(ctx.attrs, ctx.op)?;
    ctx.require_float(dtype)?;
    for k in ["seed", "seed2"] {
        if ctx.attrs.contains_key(k) {
            ctx.attrs.get_int(ctx.op, k)?;
        }
    }
    Ok(vec![TensorType::new(dtype, shape)])
}

/// SplitMix64 finalizer: spreads `(seed, seed2)` over a 64-bit generator seed.
fn mix(seed: i64, seed2: i64) -> u64 {
    let mut z = (seed as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (seed2 as u64).rotate_left(32);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The generator for this run of the node: the node's base seed (kept in the session
/// state, keyed by the node's id) on the stream numbered by how often it has run.
fn next_rng(ctx: &KernelCtx) -> Result<ChaCha8Rng> {
    let id = ctx.node.id;
    let (base, count) = match ctx.state.read_variable(id) {
        Some(Tensor::I64(s)) if s.len() == 2 => {
            let v: Vec<i64> = s.iter().copied().collect();
            (v[0] as u64, v[1] as u64)
        }
        _ => {
            let seed = ctx.node.attrs.get_int(ctx.node.op.name, "seed").unwrap_or(0);
            let seed2 = ctx.node.attrs.get_int(ctx.node.op.name, "seed2").unwrap_or(0);
            let base = if seed == 0 && seed2 == 0 { rand::random::<u64>() } else { mix(seed, seed2) };
            (base, 0)
        }
    };
    let next = Tensor::from_vec(&[2], vec![base as i64, (count + 1) as i64], crate::tensor::Layout::RowMajor)?;
    ctx.state.assign_variable(id, next)?;
    let mut rng = ChaCha8Rng::seed_from_u64(base);
    rng.set_stream(count);
    Ok(rng)
}

fn fill<D: Distribution<f64> + Distribution<f32>>(ctx: &KernelCtx, dist: D) -> Result<Outputs> {
    let t = &ctx.node.outputs[0];
    let dims = t.shape.dims().to_vec();
    let n: usize = dims.iter().product();
    let mut rng = next_rng(ctx)?;
    let layout = crate::tensor::Layout::RowMajor;
    Ok(smallvec![match t.dtype {
        DType::Float32 => Tensor::from_vec(&dims, (0..n).map(|_| Distribution::<f32>::sample(&dist, &mut rng)).collect::<Vec<f32>>(), layout)?,
        DType::Float64 => Tensor::from_vec(&dims, (0..n).map(|_| Distribution::<f64>::sample(&dist, &mut rng)).collect::<Vec<f64>>(), layout)?,
        d => return Err(ctx.error(format!("no kernel for dtype {d}"))),
    }])
}

fn kernel_normal(ctx: &KernelCtx) -> Result<Outputs> {
    fill(ctx, StandardNormal)
}

fn kernel_uniform(ctx: &KernelCtx) -> Result<Outputs> {
    fill(ctx, StandardUniform)
}

/// `RandomGamma(alpha)`: draws of Gamma(α, 1) (density `x^(α-1) e^(-x) / Γ(α)`, `x > 0`) of
/// shape `shape ++ alpha.shape`, one distribution per element of `alpha` (Float32/Float64, the
/// output's dtype): output `[s..., a...]` is a draw with `α = alpha[a...]`. TF's op takes
/// `shape` as an int tensor input; here it is the attr `shape`, as for the other random ops,
/// with the same `seed`/`seed2` behaviour. Draws by `rand_distr::Gamma` (Marsaglia and
/// Tsang's method, with the `α < 1` boost), in f64 (rounded for Float32). A non-positive or
/// NaN `α` is an `InvalidArgument` error naming the op and the value. CPU only and without a
/// gradient here, so a gradient asked through it is an error; TF has no GPU kernel either,
/// but defines `_RandomGammaGrad` (the implicit reparameterization gradient in `α`).
fn kernel_gamma(ctx: &KernelCtx) -> Result<Outputs> {
    draw_each(ctx, |a| {
        if a > 0.0 && a.is_finite() {
            Gamma::new(a, 1.0).map_err(|e| ctx.error(format!("alpha {a}: {e}")))
        } else {
            Err(ctx.error(format!("alpha must be positive and finite, got {a}")))
        }
    })
}

/// One rate's draws: `Poisson(λ)`, or zeros for `λ = 0` (which `rand_distr` refuses).
enum PoissonDraw {
    Zero,
    Rate(Poisson<f64>),
}

impl Distribution<f64> for PoissonDraw {
    fn sample<R: rand::Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        match self {
            PoissonDraw::Zero => 0.0,
            PoissonDraw::Rate(p) => p.sample(rng),
        }
    }
}

/// `RandomPoissonV2(rate)`: draws of Poisson(λ) (`P(k) = λ^k e^(-λ) / k!`) of shape
/// `shape ++ rate.shape`, one distribution per element of `rate`, as whole numbers in the
/// rate's float dtype (TF's op lets attr `dtype` choose; TF Probability's `Poisson` samples
/// in the rate's dtype, which is what this serves). Shape, seeds and layout as
/// `RandomGamma`. Draws by `rand_distr::Poisson` (inversion for small λ, Hörmann's
/// transformed rejection otherwise); `λ = 0` gives zeros. A negative, infinite or NaN
/// rate is an `InvalidArgument` error naming the op and the value. CPU only; no gradient
/// (the draws are integers).
fn kernel_poisson(ctx: &KernelCtx) -> Result<Outputs> {
    draw_each(ctx, |l| {
        if l == 0.0 {
            Ok(PoissonDraw::Zero)
        } else if l > 0.0 && l.is_finite() {
            Poisson::new(l).map(PoissonDraw::Rate).map_err(|e| ctx.error(format!("rate {l}: {e}")))
        } else {
            Err(ctx.error(format!("rate must be non-negative and finite, got {l}")))
        }
    })
}

/// One concentration's von Mises draws, centred on 0, by Best & Fisher's rejection sampler
/// ("Efficient simulation of the von Mises distribution", Applied Statistics 28, 1979), with
/// `r = (1 + ρ²) / (2ρ)`, `ρ = (τ - √(2τ)) / (2κ)`, `τ = 1 + √(1 + 4κ²)`. Below `κ = 1e-6`
/// the distribution is uniform on `(-π, π)` to within `1e-6`, and the sampler's `ρ` would lose
/// its digits, so the draw is uniform; `κ = ∞` gives 0. Above `κ = 1e6` the draw is the
/// normal approximation `N(0, 1/κ)` (as NumPy's `vonmises` does there): `r - 1` falls below
/// the precision of `f64` as `κ` grows, and the acceptance test, whose `c = κ(r - f)` then
/// rounds to 0, would never pass.
enum VonMisesDraw {
    Uniform,
    Point,
    Rejection { kappa: f64, r: f64 },
    Normal { sd: f64 },
}

impl VonMisesDraw {
    fn new(kappa: f64) -> Option<VonMisesDraw> {
        if kappa.is_nan() || kappa < 0.0 {
            return None;
        }
        Some(if kappa < 1e-6 {
            VonMisesDraw::Uniform
        } else if kappa.is_infinite() {
            VonMisesDraw::Point
        } else if kappa > 1e6 {
            VonMisesDraw::Normal { sd: kappa.sqrt().recip() }
        } else {
            let tau = 1.0 + (1.0 + 4.0 * kappa * kappa).sqrt();
            let rho = (tau - (2.0 * tau).sqrt()) / (2.0 * kappa);
            VonMisesDraw::Rejection { kappa, r: (1.0 + rho * rho) / (2.0 * rho) }
        })
    }
}

impl Distribution<f64> for VonMisesDraw {
    fn sample<R: rand::Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        use std::f64::consts::PI;
        let mut u = || -> f64 { Distribution::<f64>::sample(&StandardUniform, rng) };
        match *self {
            VonMisesDraw::Uniform => PI * (2.0 * u() - 1.0),
            VonMisesDraw::Point => 0.0,
            VonMisesDraw::Normal { sd } => (sd * Distribution::<f64>::sample(&StandardNormal, rng)).clamp(-PI, PI),
            VonMisesDraw::Rejection { kappa, r } => loop {
                let z = (PI * u()).cos();
                let f = (1.0 + r * z) / (r + z);
                let c = kappa * (r - f);
                let u2 = u();
                if c * (2.0 - c) > u2 || (u2 > 0.0 && (c / u2).ln() + 1.0 - c >= 0.0) {
                    let theta = f.clamp(-1.0, 1.0).acos();
                    return if u() < 0.5 { -theta } else { theta };
                }
            },
        }
    }
}

/// `_RandomVonMises(concentration)`: draws of the von Mises distribution with location 0
/// (density `e^{κ cos x} / (2π I₀(κ))` on `(-π, π]`), of shape `shape ++
/// concentration.shape`, one distribution per element of `concentration`, in its float dtype;
/// shape, seeds and layout as `RandomGamma`. A negative or NaN concentration is an
/// `InvalidArgument` error naming the op and the value. CPU only; no gradient (TF
/// Probability's implicit reparameterization gradient in `κ` is not implemented: asking for
/// it is an error, as for `RandomGamma`).
fn kernel_von_mises(ctx: &KernelCtx) -> Result<Outputs> {
    draw_each(ctx, |k| VonMisesDraw::new(k).ok_or_else(|| ctx.error(format!("concentration must be non-negative, got {k}"))))
}

/// The output of `RandomGamma`, `RandomPoissonV2` or `_RandomVonMises`: `make` turns each
/// element of input 0 (the parameter tensor, in order) into its distribution, or the error
/// naming a bad value; then, for each index of `shape`, one draw of each distribution.
fn draw_each<D: Distribution<f64>>(ctx: &KernelCtx, make: impl Fn(f64) -> Result<D>) -> Result<Outputs> {
    draw_from(ctx, ctx.inputs[0].to_f64_vec().into_iter().map(make).collect::<Result<Vec<_>>>()?)
}

/// The op's output: for every index of the sample shape, one draw of each of `dists` (the
/// parameter tensor's elements in row-major order), in the output's float dtype.
fn draw_from<D: Distribution<f64>>(ctx: &KernelCtx, dists: Vec<D>) -> Result<Outputs> {
    let t = &ctx.node.outputs[0];
    let dims = t.shape.dims().to_vec();
    let n: usize = dims.iter().product();
    let mut rng = next_rng(ctx)?;
    let mut draws = Vec::with_capacity(n);
    if !dists.is_empty() {
        for _ in 0..n / dists.len() {
            draws.extend(dists.iter().map(|g| g.sample(&mut rng)));
        }
    }
    let layout = crate::tensor::Layout::RowMajor;
    Ok(smallvec![match t.dtype {
        DType::Float32 => Tensor::from_vec(&dims, draws.into_iter().map(|x| x as f32).collect::<Vec<f32>>(), layout)?,
        DType::Float64 => Tensor::from_vec(&dims, draws, layout)?,
        d => return Err(ctx.error(format!("no kernel for dtype {d}"))),
    }])
}

/// One binomial draw as a float (`rand_distr::Binomial` counts in `u64`).
struct BinomialDraw(Binomial);

impl Distribution<f64> for BinomialDraw {
    fn sample<R: rand::Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        self.0.sample(rng) as f64
    }
}

/// `RandomBinomial(counts, probs)`: draws of Binomial(n, p) (the number of successes in `n`
/// independent trials of probability `p`) of shape `shape ++ counts.shape`, one
/// distribution per element pair of `counts` and `probs` (of one shape and float dtype, the
/// output's; whole numbers of that dtype). TF's op takes `shape` as an input and an output
/// dtype attr; here `shape` is an attr and seeds and layout are as `RandomGamma`. Draws by
/// `rand_distr::Binomial` (inversion for small `n·p`, Kachitvichyanukul and Schmeiser's BTPE
/// otherwise). A count that is not a whole number in `[0, 2^53]` or a probability outside
/// `[0, 1]` is an `InvalidArgument` error naming the op and the value. CPU only; no
/// gradient (the draws are integers).
fn kernel_binomial(ctx: &KernelCtx) -> Result<Outputs> {
    let (counts, probs) = (ctx.inputs[0].to_f64_vec(), ctx.inputs[1].to_f64_vec());
    let dists = counts
        .iter()
        .zip(&probs)
        .map(|(&n, &p)| {
            if !((0.0..=9_007_199_254_740_992.0).contains(&n) && n.fract() == 0.0) {
                return Err(ctx.error(format!("counts must be whole numbers >= 0, got {n}")));
            }
            if !(0.0..=1.0).contains(&p) {
                return Err(ctx.error(format!("probs must be in [0, 1], got {p}")));
            }
            Binomial::new(n as u64, p).map(BinomialDraw).map_err(|e| ctx.error(format!("counts {n}, probs {p}: {e}")))
        })
        .collect::<Result<Vec<_>>>()?;
    draw_from(ctx, dists)
}

fn infer_binomial(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let (n, p) = (&ctx.inputs[0], &ctx.inputs[1]);
    if n.dtype != p.dtype || n.shape != p.shape {
        return Err(ctx.invalid(format!("counts ({} {}) and probs ({} {}) must have one dtype and shape", n.dtype, n.shape, p.dtype, p.shape)));
    }
    infer_gamma(ctx)
}

fn infer_gamma(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let mut dims = ctx.attrs.get_shape(ctx.op, "shape")?;
    let alpha = &ctx.inputs[0];
    ctx.require_float(alpha.dtype)?;
    for k in ["seed", "seed2"] {
        if ctx.attrs.contains_key(k) {
            ctx.attrs.get_int(ctx.op, k)?;
        }
    }
    dims.extend_from_slice(alpha.shape.dims());
    Ok(vec![TensorType::new(alpha.dtype, Shape(dims))])
}

pub(crate) fn register(r: &mut Registry) {
    let random = |name, kernel| OpDef {
        name,
        default_name: name,
        arity: Arity::Fixed(0),
        ref_inputs: &[],
        infer: infer_random,
        kernel,
        gpu: GPU_FLOATS,
        inputs: &[],
        attrs: &[],
        launch: GpuLaunch::Random,
        // TF: ops.NotDifferentiable("RandomStandardNormal"), ("RandomUniform")
        grad: Gradient::NotDifferentiable,
        stateful: true,
        inexpensive: false,
        host_memory: &[],
    };
    const ATTRS: &[AttrDef] = attrs!["shape" => Shape, "dtype" => Type, "seed" => Int, "seed2" => Int];
    r.add(random("RandomStandardNormal", kernel_normal).with_attrs(ATTRS));
    r.add(random("RandomUniform", kernel_uniform).with_attrs(ATTRS));
    // one distribution per element of the parameter tensor: CPU only, no gradient
    let per_element = |name, kernel| {
        OpDef { arity: Arity::Fixed(1), infer: infer_gamma, gpu: GpuSupport::None, launch: GpuLaunch::None, grad: Gradient::Undefined, ..random(name, kernel) }
            .with_attrs(attrs!["shape" => Shape, "seed" => Int, "seed2" => Int])
    };
    r.add(per_element("RandomGamma", kernel_gamma));
    r.add(per_element("RandomPoissonV2", kernel_poisson));
    r.add(per_element("_RandomVonMises", kernel_von_mises));
    r.add(OpDef { arity: Arity::Fixed(2), infer: infer_binomial, ..per_element("RandomBinomial", kernel_binomial) });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// For large `κ` the von Mises distribution approaches `N(0, 1/κ)`: the variance of the
    /// draws is `1/κ` to first order, on both sides of the switch from Best & Fisher's
    /// sampler to the normal one, and a concentration so large that `4κ²` overflows draws
    /// (it looped forever before the normal branch).
    #[test]
    fn von_mises_draws_at_large_concentrations() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for kappa in [1e4, 9.9e5, 1.1e6, 1e12, 1e300] {
            let d = VonMisesDraw::new(kappa).unwrap();
            let n = 20_000;
            let x: Vec<f64> = (0..n).map(|_| d.sample(&mut rng)).collect();
            assert!(x.iter().all(|v| v.abs() <= std::f64::consts::PI), "κ = {kappa}");
            let var = x.iter().map(|v| v * v).sum::<f64>() / n as f64;
            assert!((var * kappa - 1.0).abs() < 0.05, "κ = {kappa}: variance {var}, 1/κ = {}", 1.0 / kappa);
        }
    }
}
