//! Vectorizable float math for the elementwise CPU kernels: `exp`, `log`, `tanh`, `sigmoid`,
//! `sin`, `cos`, `tan` in `f32` and `f64`, written branch-free so that the compiler turns
//! each slice loop into SIMD code, compiled twice (baseline x86-64 and AVX2+FMA, picked at
//! run time, as Eigen's packet math and SLEEF's dispatchers do), and sharded over the
//! intra-op threads, the calling one included, for large tensors (as TF's Eigen
//! `ThreadPoolDevice` shards a cwise op by its cost).
//!
//! The formulas are the textbook ones (Cody and Waite's range reduction):
//! - `exp(x) = 2^n e^r`, `n = round(x / ln 2)`, `r = x - n ln 2` (`ln 2` split in a high
//!   part with trailing zero bits and a low part, so `n ln2_hi` is exact), `e^r` by its
//!   Taylor polynomial on `|r| <= ln 2 / 2` (degree 7 in f32, 13 in f64), `2^n` applied as two
//!   exact powers of two so that results near overflow and in the subnormal range come out
//!   right;
//! - `log(x) = e ln 2 + log(m)`, `x = m 2^e` with `m` in `[sqrt(1/2), sqrt(2))`; in f64
//!   `log(m) = 2 atanh(s)`, `s = (m - 1)/(m + 1)`, by its odd series in `s` (`|s| < 0.172`);
//!   in f32 `log(1 + f) = f - f^2/2 + f^3 P(f)`, `f = m - 1`, with Cephes' degree-8 minimax
//!   `P` (no division), `e` and `m` split by integer operations, and zeros, negatives,
//!   infinities, NaNs and subnormals fixed up by a second vector loop of selects, run only
//!   where a slice holds one;
//! - `tanh(x)` in f64 `= sign(x) u / (u + 2)`, `u = expm1(2|x|)` computed as
//!   `2^n expm1(r) + (2^n - 1)` with the reduction of `exp` and the Taylor polynomial of
//!   `expm1(r)` (degree 13): one polynomial and one division for every `|x|`, no
//!   cancellation near 0; in f32 the rational `x P(x^2) / Q(x^2)` (degrees 5 and 4 in `x^2`,
//!   `P(0) = Q(0) = 1`), a minimax fit of relative error 4e-9 on `[0, 10]` made by
//!   `scripts/fit-tanh-f32.py`, with `|x|` clamped to 9.9 and the result to `[-1, 1]`: the
//!   form of Eigen's and XLA's f32 `tanh`, 2.4 times faster here than the `expm1` form, whose
//!   f32 version it replaced (0.9 G elements/s per core);
//! - `sigmoid(x) = 1 / (1 + e^{-x})`;
//! - `sin`, `cos`, `tan`: `x = n pi/2 + r`, `|r| <= pi/4`, with `pi/2` in fdlibm's parts
//!   of 33 bits (each product with `n` exact up to [`TRIG_MAX`]), then fdlibm's kernel
//!   polynomials for `sin r` and `cos r` in f64 (f32 inputs: the reduction and Taylor
//!   polynomials of degree 9 and 10 in f64, the result rounded once to f32; f32 `sin` and
//!   `cos` with FMA: in f32, pi/2 in three f32 parts and Cephes' `sinf`/`cosf` polynomials,
//!   up to `|x| = 16384`) and the quadrant `n mod 4` picking `+-sin r`, `+-cos r` or their
//!   quotient by selects; larger `|x|` take the next path in a second loop, run only where
//!   a slice holds one (f32 in f64 up to `TRIG_MAX`, then libm; infinities and NaN: libm).
//!
//! Accuracy (tested in this file's tests against `f64`/libm over sweeps of every binade
//! used): at most a few ulp, within the tolerances TF's own tests give its Eigen kernels
//! (1e-6 relative): 3 ulp, except f32 `tanh`, whose rounding of `P` and `Q` in f32 gives up
//! to 4.9 ulp with FMA and 6.3 without (every f32 checked; 7.5e-7 relative). f32 `sin` and
//! `cos` come out within 1.5 ulp of the exact value with FMA, 0.56 without (in f64: correctly
//! rounded but for rare ties), `tan` 0.84; f64 ones within 2 ulp of libm (`tan` 3): the
//! reduction's roundings are not carried as fdlibm's two-part `r` is.
//! NaN propagates; `exp` overflows to `inf` above `ln(MAX)` and underflows through the
//! subnormals to 0; `log` gives `-inf` at 0, NaN below 0; `tanh` and `sigmoid` saturate.

use crate::intra_op;
use std::mem::MaybeUninit;

/// The unary functions computed here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fun {
    Exp,
    Log,
    Tanh,
    Sigmoid,
    Sqrt,
    Relu,
    Sin,
    Cos,
    Tan,
}

/// Elements below which a kernel stays on its own thread (the pool's hand-off costs a few
/// microseconds, about what 16k elements of `tanh` take).
pub(crate) const SHARD_MIN: usize = 1 << 14;

/// `2^k` for an integer `k` in the normal range, built from its exponent bits.
#[inline(always)]
fn pow2_f32(k: i32) -> f32 {
    f32::from_bits(((k + 127) as u32) << 23)
}
#[inline(always)]
fn pow2_f64(k: i64) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// `a * b + c`, fused where the code is compiled for FMA (`F`), else two roundings.
#[inline(always)]
fn madd32<const F: bool>(a: f32, b: f32, c: f32) -> f32 {
    if F {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}
#[inline(always)]
fn madd64<const F: bool>(a: f64, b: f64, c: f64) -> f64 {
    if F {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// `1/k!` for k = 0..=13.
const INV_FACT: [f64; 14] = {
    let mut t = [1.0f64; 14];
    let mut k = 1;
    while k < 14 {
        t[k] = t[k - 1] / k as f64;
        k += 1;
    }
    t
};

#[inline(always)]
fn exp_f32<const F: bool>(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75; // 0x3f317200: ln 2 with its low 9 bits zero
    const LN2_LO: f32 = 1.428_606_8e-6; // ln 2 - LN2_HI
    const ROUND: f32 = 12_582_912.0; // 1.5 * 2^23: adding and subtracting rounds to an integer
    let xc = x.clamp(-104.0, 89.0); // NaN stays NaN
    let n = (xc * LOG2E + ROUND) - ROUND;
    let r = madd32::<F>(-n, LN2_LO, madd32::<F>(-n, LN2_HI, xc));
    let mut p = INV_FACT[7] as f32;
    p = madd32::<F>(p, r, INV_FACT[6] as f32);
    p = madd32::<F>(p, r, INV_FACT[5] as f32);
    p = madd32::<F>(p, r, INV_FACT[4] as f32);
    p = madd32::<F>(p, r, INV_FACT[3] as f32);
    p = madd32::<F>(p, r, 0.5);
    p = madd32::<F>(p, r, 1.0);
    p = madd32::<F>(p, r, 1.0);
    // 2^n as 2^h 2^(n-h), h = floor(n/2), both in the normal range. The integers are read
    // from the bits of `v + ROUND` (no float-to-int conversion, which would not vectorize).
    let h = (n * 0.5).floor();
    let int = |v: f32| ((v + ROUND).to_bits() as i32).wrapping_sub(ROUND.to_bits() as i32);
    p * pow2_f32(int(h)) * pow2_f32(int(n - h))
}

#[inline(always)]
fn exp_f64<const F: bool>(x: f64) -> f64 {
    const LOG2E: f64 = std::f64::consts::LOG2_E;
    const LN2_HI: f64 = 6.931_471_803_691_238e-1; // ln 2 with its low 32 bits zero
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    const ROUND: f64 = 6_755_399_441_055_744.0; // 1.5 * 2^52
    let xc = x.clamp(-746.0, 710.0);
    let n = (xc * LOG2E + ROUND) - ROUND;
    let r = madd64::<F>(-n, LN2_LO, madd64::<F>(-n, LN2_HI, xc));
    let mut p = INV_FACT[13];
    let mut k = 12;
    while k > 0 {
        p = madd64::<F>(p, r, INV_FACT[k]);
        k -= 1;
    }
    p = madd64::<F>(p, r, 1.0);
    // As in exp_f32 (AVX2 has no 64-bit float-to-int conversion or arithmetic shift).
    let h = (n * 0.5).floor();
    let int = |v: f64| ((v + ROUND).to_bits() as i64).wrapping_sub(ROUND.to_bits() as i64);
    p * pow2_f64(int(h)) * pow2_f64(int(n - h))
}

/// `log(x)` for a positive normal finite `x` times `2^e_off` (`e_off` is 0, or -23 for a
/// subnormal scaled up by [`log_f32_fixup`]); garbage for other `x`, which [`run_f32`]
/// sends to [`log_f32_fixup`] in a second pass.
#[inline(always)]
fn log_f32_normal<const F: bool>(x: f32, e_off: f32) -> f32 {
    #[allow(clippy::excessive_precision)] // exactly 355/512, as Cephes writes it
    const LN2_HI: f32 = 0.693_359_375;
    const LN2_LO: f32 = -2.121_944_4e-4; // ln 2 - LN2_HI

    // x = m 2^k with m in [sqrt(1/2), sqrt(2)), from the bits: subtracting the bits of
    // sqrt(1/2) makes the exponent field k (arithmetic shift), and taking k out of the
    // exponent leaves m. Integer operations only, no compare or select.
    const SQRT_HALF_BITS: u32 = 0x3f35_04f3;
    let bits = x.to_bits();
    let k = (bits.wrapping_sub(SQRT_HALF_BITS) as i32) >> 23;
    let m = f32::from_bits(bits.wrapping_sub((k as u32) << 23));
    // log(1 + f) = f - f^2/2 + f^3 P(f) for f in [sqrt(1/2) - 1, sqrt(2) - 1), P the
    // degree-8 minimax polynomial of Cephes' logf (Moshier): no division.
    let f = m - 1.0;
    let z = f * f;
    let mut p: f32 = 7.037_683_6e-2;
    for c in [-1.151_461e-1, 1.167_699_9e-1, -1.242_014_1e-1, 1.424_932_3e-1, -1.666_805_8e-1, 2.000_071_4e-1, -2.499_999_4e-1, 3.333_333e-1] {
        p = madd32::<F>(p, f, c);
    }
    // e ln 2 in two parts (LN2_HI = 0.693359375 has 9 significant bits: e LN2_HI is exact)
    let ef = k as f32 + e_off;
    let y = madd32::<F>(f * z, p, madd32::<F>(ef, LN2_LO, -0.5 * z));
    madd32::<F>(ef, LN2_HI, f + y)
}

/// Whether [`log_f32_normal`] applies to `x` (positive, normal, finite; false for NaN).
#[inline(always)]
fn log_f32_is_normal(x: f32) -> bool {
    (f32::MIN_POSITIVE..f32::INFINITY).contains(&x)
}

/// `log(x)` for every `x`, given `first = log_f32_normal(x, 0)`: `first` where
/// [`log_f32_is_normal`], else subnormals scaled into the normal range, `log(0) = -inf`,
/// `log(inf) = inf`, NaN below 0 and for NaN. Selects, no branches, so that the second pass
/// is a vector loop too: with a branch per element, a tensor half of whose values were
/// negative or zero ran at a tenth of the speed of positive ones.
#[inline(always)]
fn log_f32_fixup<const F: bool>(x: f32, first: f32) -> f32 {
    let scaled = log_f32_normal::<F>(x * 8_388_608.0, -23.0); // 2^23
    let r = if x < f32::MIN_POSITIVE { scaled } else { first };
    let r = if x == 0.0 { f32::NEG_INFINITY } else { r };
    let r = if x == f32::INFINITY { x } else { r };
    // negatives and NaN
    if x >= 0.0 {
        r
    } else {
        f32::NAN
    }
}

#[inline(always)]
fn log_f64<const F: bool>(x: f64) -> f64 {
    const LN2_HI: f64 = 6.931_471_803_691_238e-1;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    let sub = x < f64::MIN_POSITIVE;
    let xs = if sub { x * 4_503_599_627_370_496.0 } else { x }; // 2^52
    let bits = xs.to_bits();
    // The exponent as a float straight from its bits (2^52 + e, minus 2^52): AVX2 has no
    // 64-bit int-to-float conversion.
    let biased = f64::from_bits(0x4330_0000_0000_0000 | ((bits >> 52) & 0x7ff)) - 4_503_599_627_370_496.0;
    let mut m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    let big = m > std::f64::consts::SQRT_2;
    m = if big { m * 0.5 } else { m };
    let ef = biased - 1023.0 - if sub { 52.0 } else { 0.0 } + if big { 1.0 } else { 0.0 };
    let f = m - 1.0;
    let s = f / (m + 1.0);
    let z = s * s;
    let mut p = 2.0 / 23.0;
    let mut k = 21.0;
    while k >= 3.0 {
        p = madd64::<F>(p, z, 2.0 / k);
        k -= 2.0;
    }
    // 2s = f - s f; the series' tail s z p is added to it, then e ln 2 in two parts.
    let hfsq = s * f;
    let lm = madd64::<F>(s * z, p, -hfsq);
    let r = madd64::<F>(ef, LN2_HI, f + madd64::<F>(ef, LN2_LO, lm));
    let r = if x == f64::INFINITY { x } else { r };
    let r = if x == 0.0 { f64::NEG_INFINITY } else { r };
    if x >= 0.0 {
        r
    } else {
        f64::NAN
    }
}

// f64 tanh(x) = sign(x) u / (u + 2) with u = expm1(2|x|), one formula for every |x|: no
// cancellation near 0 (u ~ 2|x|), and near saturation u / (u + 2) rounds to 1 as tanh does.
// expm1(y) = 2^n (1 + e) - 1 = 2^n e + (2^n - 1), n = round(y / ln 2), e = expm1(r) for
// r = y - n ln 2 (|r| <= ln 2 / 2) by its Taylor polynomial: exact scaling, and 2^n - 1 is
// exact for the n used here (|x| is clamped where tanh rounds to 1: 20).

/// Where f32 `tanh` is clamped: both code paths evaluate the rational to 1.0 there, and
/// `tanh(x)` rounds to 1.0 in f32 from 9.02 on.
const TANH32_CLAMP: f32 = 9.9;
/// `P` and `Q` of f32 `tanh`, lowest degree first, in `s = x^2` (`scripts/fit-tanh-f32.py`).
const TANH32_P: [f32; 6] = [1.0, 0.136_324_12, 3.809_065_6e-3, 2.683_012_3e-5, 2.784_173e-8, -1.026_348_1e-11];
const TANH32_Q: [f32; 5] = [1.0, 0.469_657_42, 2.702_826e-2, 3.834_767_3e-4, 1.206_222e-6];

#[inline(always)]
fn tanh_f32<const F: bool>(x: f32) -> f32 {
    // Clamps written so that a NaN passes through (it compares false); tanh is odd and so
    // is every step, so no sign handling. x = +-0 and subnormals give x exactly (s rounds
    // to 0, P = Q = 1).
    let x = if x > TANH32_CLAMP { TANH32_CLAMP } else { x };
    let x = if x < -TANH32_CLAMP { -TANH32_CLAMP } else { x };
    let s = x * x;
    let mut p = TANH32_P[5];
    for c in TANH32_P[..5].iter().rev() {
        p = madd32::<F>(p, s, *c);
    }
    let mut q = TANH32_Q[4];
    for c in TANH32_Q[..4].iter().rev() {
        q = madd32::<F>(q, s, *c);
    }
    // The rounding of P and Q can put the quotient a few ulp above 1 near saturation.
    let t = (x * p) / q;
    let t = if t > 1.0 { 1.0 } else { t };
    if t < -1.0 {
        -1.0
    } else {
        t
    }
}

#[inline(always)]
fn tanh_f64<const F: bool>(x: f64) -> f64 {
    const ROUND: f64 = 6_755_399_441_055_744.0; // 1.5 * 2^52
    let a = x.abs();
    let y = 2.0 * a.min(20.0);
    let n = (y * std::f64::consts::LOG2_E + ROUND) - ROUND;
    let r = madd64::<F>(-n, 1.908_214_929_270_587_7e-10, madd64::<F>(-n, 6.931_471_803_691_238e-1, y));
    let mut q = INV_FACT[13];
    let mut k = 12;
    while k > 1 {
        q = madd64::<F>(q, r, INV_FACT[k]);
        k -= 1;
    }
    let e = madd64::<F>(r * r, q, r);
    let s = pow2_f64(((n + ROUND).to_bits() as i64).wrapping_sub(ROUND.to_bits() as i64));
    let u = madd64::<F>(s, e, s - 1.0);
    let t = u / (u + 2.0);
    let t = if a > 0.0 { t } else { a };
    t.copysign(x)
}

#[inline(always)]
fn sigmoid_f32<const F: bool>(x: f32) -> f32 {
    1.0 / (1.0 + exp_f32::<F>(-x))
}
#[inline(always)]
fn sigmoid_f64<const F: bool>(x: f64) -> f64 {
    1.0 / (1.0 + exp_f64::<F>(-x))
}

/// `pi/2` in four parts (the constants of fdlibm's `__ieee754_rem_pio2`): the first three
/// with 33 significant bits, so that `n` times each is exact for `|n| < 2^20`, the fourth
/// the rest, rounded.
/// (Bits `0x3ff921fb54400000`, `0x3dd0b4611a600000`, `0x3ba3198a2e000000`,
/// `0x397b839a252049c1`, checked by a test.)
const PIO2: [f64; 4] = [1.570_796_326_734_125_6, 6.077_100_506_303_966e-11, 2.022_266_248_711_166_5e-21, 8.478_427_660_368_9e-32];
/// `pi/2 - PIO2[0]`, rounded (bits `0x3dd0b4611a626331`): the second part of the shorter
/// reduction of f32 inputs.
const PIO2_0_TAIL: f64 = 6.077_100_506_506_192e-11;

/// Largest `|x|` reduced here (`n <= 636,620 < 2^20`); larger ones, infinities and NaN
/// take libm in a second pass ([`trig_loop`]).
const TRIG_MAX: f64 = 1.0e6;

/// `x = n pi/2 + r` with `|r|` at most `pi/4` (and a rounding), for `|x| <= TRIG_MAX`;
/// returns `r` and `n mod 4`. `x - n PIO2[0]` is exact (Sterbenz), and so is each later
/// step where `r` cancels: the error is a few ulp of `r` for every `r` (Cody and Waite's
/// reduction with fdlibm's split of `pi/2`). f32 inputs (24 bits) take two parts, f64 four.
#[inline(always)]
fn reduce_pio2(x: f64, parts: &[f64]) -> (f64, u64) {
    const ROUND: f64 = 6_755_399_441_055_744.0; // 1.5 * 2^52
    let n = (x * std::f64::consts::FRAC_2_PI + ROUND) - ROUND;
    let mut r = x;
    for &p in parts {
        r -= n * p;
    }
    // n + 2^51 in the low bits: its residue mod 4 is n's (2^51 is a multiple of 4)
    (r, (n + ROUND).to_bits() & 3)
}

/// `sin(r)` and `cos(r)` for `|r| <= pi/4` to f64 accuracy: fdlibm's `__kernel_sin` and
/// `__kernel_cos` polynomials (degree 13 and 14, minimax), the constant and `z/2` of the
/// cosine summed with their rounding error carried, as fdlibm does.
#[inline(always)]
fn sincos_kernel_f64<const F: bool>(r: f64) -> (f64, f64) {
    const S: [f64; 6] = [
        -1.666_666_666_666_663_2e-1,
        8.333_333_333_322_49e-3,
        -1.984_126_982_985_795e-4,
        2.755_731_370_707_006_8e-6,
        -2.505_076_025_340_686_3e-8,
        1.589_690_995_211_55e-10,
    ];
    const C: [f64; 6] = [
        4.166_666_666_666_66e-2,
        -1.388_888_888_887_411e-3,
        2.480_158_728_947_673e-5,
        -2.755_731_435_139_066_3e-7,
        2.087_572_321_298_175e-9,
        -1.135_964_755_778_819_5e-11,
    ];
    let z = r * r;
    let mut ps = S[5];
    let mut pc = C[5];
    for k in (0..5).rev() {
        ps = madd64::<F>(ps, z, S[k]);
        pc = madd64::<F>(pc, z, C[k]);
    }
    let s = madd64::<F>(r * z, ps, r);
    let hz = 0.5 * z;
    let w = 1.0 - hz;
    let c = w + (((1.0 - w) - hz) + z * z * pc);
    (s, c)
}

/// `sin(r)` and `cos(r)` for `|r| <= pi/4` to about 1e-10 relative, enough for an f32
/// result: the Taylor polynomials to degree 9 and 10 (remainders below 1.8e-9 and 1.2e-10).
#[inline(always)]
fn sincos_kernel_f32<const F: bool>(r: f64) -> (f64, f64) {
    // sin r = r + r z (-1/3! + z/5! - z^2/7! + z^3/9!), cos r = 1 + z (-1/2! + ... - z^4/10!)
    let z = r * r;
    let mut ps = INV_FACT[9];
    for c in [-INV_FACT[7], INV_FACT[5], -INV_FACT[3]] {
        ps = madd64::<F>(ps, z, c);
    }
    let mut pc = -INV_FACT[10];
    for c in [INV_FACT[8], -INV_FACT[6], INV_FACT[4], -INV_FACT[2]] {
        pc = madd64::<F>(pc, z, c);
    }
    (madd64::<F>(r * z, ps, r), madd64::<F>(z, pc, 1.0))
}

/// `sin`, `cos` or `tan` (`fun`) of `x = n pi/2 + r` from `sin(r)`, `cos(r)` and `n mod 4`:
/// `sin` is `sin r, cos r, -sin r, -cos r` by quadrant, `cos` the next quadrant's `sin`,
/// `tan` `sin r / cos r` or `-cos r / sin r`. Selects and a sign flip, no branches.
#[inline(always)]
fn trig_quadrant(fun: Fun, (s, c): (f64, f64), q: u64) -> f64 {
    if fun == Fun::Tan {
        return if q & 1 == 0 { s / c } else { -c / s };
    }
    let q = if fun == Fun::Cos { q + 1 } else { q };
    let v = if q & 1 == 0 { s } else { c };
    f64::from_bits(v.to_bits() ^ ((q & 2) << 62))
}

/// `sin`, `cos`, `tan` of an f32 in f64 (the reduction and the rounding of the polynomial
/// are then far below an f32 ulp; the result is rounded once, to f32), for `|x| <= TRIG_MAX`.
#[inline(always)]
fn trig_f32<const F: bool>(fun: Fun, x: f32) -> f32 {
    let (r, q) = reduce_pio2(x as f64, &[PIO2[0], PIO2_0_TAIL]);
    keep_zero(fun, x, trig_quadrant(fun, sincos_kernel_f32::<F>(r), q) as f32)
}

#[inline(always)]
fn trig_f64<const F: bool>(fun: Fun, x: f64) -> f64 {
    let (r, q) = reduce_pio2(x, &PIO2);
    keep_zero(fun, x, trig_quadrant(fun, sincos_kernel_f64::<F>(r), q))
}

/// `sin(-0) = tan(-0) = -0`: the polynomials' `r + r z P` gives `+0` for `r = -0` (a sum of
/// `-0` and `+0`), so a zero argument of the odd functions is its own result (a select).
#[inline(always)]
fn keep_zero<T: PartialEq + Default + Copy>(fun: Fun, x: T, v: T) -> T {
    if fun != Fun::Cos && x == T::default() {
        x
    } else {
        v
    }
}

/// Largest `|x|` of [`trig_f32_fma`]'s reduction in f32.
const TRIG32_FAST: f32 = 16384.0;

/// `sin` or `cos` (`fun`) of an f32 in f32 arithmetic, 8 lanes to [`trig_f32`]'s 4, for
/// `|x| <= TRIG32_FAST` on the FMA path: `pi/2` in three f32 parts (the nearest f32, then
/// the nearest to each remainder), `x - n P1` exact in an FMA (both multiples of 2^-24 at
/// most 24 bits long), the later steps rounded once each; the tail left out is 1.1e-23 per
/// unit of `n`. Cephes' `sinf`/`cosf` minimax polynomials on `|r| <= pi/4`, the cosine's
/// `1 - z/2` with its rounding error carried. Within 1.5 ulp of the exact value (tests).
#[inline(always)]
fn trig_f32_fma(fun: Fun, x: f32) -> f32 {
    const ROUND: f32 = 12_582_912.0; // 1.5 * 2^23
    const P: [f32; 3] = [1.570_796_4, -4.371_139e-8, -1.715_124_5e-15];
    let n = (x * std::f32::consts::FRAC_2_PI + ROUND) - ROUND;
    let r = (-n).mul_add(P[2], (-n).mul_add(P[1], (-n).mul_add(P[0], x)));
    let q = (n + ROUND).to_bits() & 3;
    let z = r * r;
    let ps = z.mul_add(z.mul_add(-1.951_529_6e-4, 8.332_161e-3), -1.666_665_5e-1);
    let s = (r * z).mul_add(ps, r);
    let pc = z.mul_add(z.mul_add(2.443_315_7e-5, -1.388_731_6e-3), 4.166_664_6e-2);
    let hz = 0.5 * z;
    let w = 1.0 - hz;
    let c = w + (((1.0 - w) - hz) + (z * z) * pc);
    let q = if fun == Fun::Cos { q + 1 } else { q };
    let v = if q & 1 == 0 { s } else { c };
    keep_zero(fun, x, f32::from_bits(v.to_bits() ^ ((q & 2) << 30)))
}

/// Whether `|x| <= limit` (false for NaN).
#[inline(always)]
fn within(x: f64, limit: f64) -> bool {
    x.abs() <= limit
}

/// The trigonometric loop of `fun` (`Sin`, `Cos` or `Tan`, a constant after inlining):
/// every element by `f` in the vector loop, then, where the slice holds an `|x|` above
/// `limit`, an infinity or a NaN, a second loop giving those `wide`'s value (the f32 path
/// on FMA: [`trig_f32`] up to [`TRIG_MAX`]; then libm: Payne and Hanek's reduction for
/// large arguments, NaN for infinities and NaN).
#[inline(always)]
fn trig_loop<T: Copy + Into<f64>>(src: &[T], dst: &mut [MaybeUninit<T>], f: impl Fn(T) -> T, limit: f64, wide: impl Fn(T) -> T) {
    let mut others = false;
    dst.iter_mut().zip(src).for_each(|(d, &x)| {
        *d = MaybeUninit::new(f(x));
        others |= !within(x.into(), limit);
    });
    if others {
        for (d, &x) in dst.iter_mut().zip(src) {
            if !within(x.into(), limit) {
                *d = MaybeUninit::new(wide(x));
            }
        }
    }
}

/// f32 `fun` (`Sin`, `Cos`, `Tan`) over a slice: [`trig_f32_fma`] on the FMA path for
/// `Sin` and `Cos`, else [`trig_f32`] (`Tan` always: its quotient of two f32 results came to
/// 2.8 ulp in f32, 0.84 in f64); both fall back as [`trig_loop`] says.
#[inline(always)]
fn trig_loop_f32<const F: bool>(fun: Fun, src: &[f32], dst: &mut [MaybeUninit<f32>], libm: fn(f32) -> f32) {
    let wide = |x: f32| if within(x as f64, TRIG_MAX) { trig_f32::<F>(fun, x) } else { libm(x) };
    if F && fun != Fun::Tan {
        trig_loop(src, dst, |x| trig_f32_fma(fun, x), TRIG32_FAST as f64, wide)
    } else {
        trig_loop(src, dst, |x| trig_f32::<F>(fun, x), TRIG_MAX, libm)
    }
}

/// One slice loop per (function, type), instantiated for baseline and FMA code.
#[inline(always)]
fn run_f32<const F: bool>(fun: Fun, src: &[f32], dst: &mut [MaybeUninit<f32>]) {
    let it = dst.iter_mut().zip(src);
    match fun {
        Fun::Exp => it.for_each(|(d, &x)| *d = MaybeUninit::new(exp_f32::<F>(x))),
        Fun::Log => {
            // the vector loop for positive normal numbers, then, where the slice holds any
            // other value, a second vector loop that fixes those up
            let mut others = false;
            it.for_each(|(d, &x)| {
                *d = MaybeUninit::new(log_f32_normal::<F>(x, 0.0));
                others |= !log_f32_is_normal(x);
            });
            if others {
                dst.iter_mut().zip(src).for_each(|(d, &x)| {
                    // SAFETY: the first loop wrote every element.
                    let first = unsafe { d.assume_init() };
                    *d = MaybeUninit::new(log_f32_fixup::<F>(x, first));
                });
            }
        }
        Fun::Tanh => it.for_each(|(d, &x)| *d = MaybeUninit::new(tanh_f32::<F>(x))),
        Fun::Sigmoid => it.for_each(|(d, &x)| *d = MaybeUninit::new(sigmoid_f32::<F>(x))),
        Fun::Sqrt => it.for_each(|(d, &x)| *d = MaybeUninit::new(x.sqrt())),
        Fun::Relu => it.for_each(|(d, &x)| *d = MaybeUninit::new(if x > 0.0 || x.is_nan() { x } else { 0.0 })),
        Fun::Sin => trig_loop_f32::<F>(Fun::Sin, src, dst, f32::sin),
        Fun::Cos => trig_loop_f32::<F>(Fun::Cos, src, dst, f32::cos),
        Fun::Tan => trig_loop_f32::<F>(Fun::Tan, src, dst, f32::tan),
    }
}
#[inline(always)]
fn run_f64<const F: bool>(fun: Fun, src: &[f64], dst: &mut [MaybeUninit<f64>]) {
    let it = dst.iter_mut().zip(src);
    match fun {
        Fun::Exp => it.for_each(|(d, &x)| *d = MaybeUninit::new(exp_f64::<F>(x))),
        Fun::Log => it.for_each(|(d, &x)| *d = MaybeUninit::new(log_f64::<F>(x))),
        Fun::Tanh => it.for_each(|(d, &x)| *d = MaybeUninit::new(tanh_f64::<F>(x))),
        Fun::Sigmoid => it.for_each(|(d, &x)| *d = MaybeUninit::new(sigmoid_f64::<F>(x))),
        Fun::Sqrt => it.for_each(|(d, &x)| *d = MaybeUninit::new(x.sqrt())),
        Fun::Relu => it.for_each(|(d, &x)| *d = MaybeUninit::new(if x > 0.0 || x.is_nan() { x } else { 0.0 })),
        Fun::Sin => trig_loop(src, dst, |x| trig_f64::<F>(Fun::Sin, x), TRIG_MAX, f64::sin),
        Fun::Cos => trig_loop(src, dst, |x| trig_f64::<F>(Fun::Cos, x), TRIG_MAX, f64::cos),
        Fun::Tan => trig_loop(src, dst, |x| trig_f64::<F>(Fun::Tan, x), TRIG_MAX, f64::tan),
    }
}

/// Defines `fn name[generics](args) -> R` that runs the `#[inline(always)]` function
/// `body` with the same arguments, built a second time for AVX2 and taken where the CPU has
/// it ([`has_fma`]), else the baseline build: the same operations in the same order, so the
/// same bits, in 256-bit vectors. (A macro, not a helper taking a closure, so that the body
/// is certain to be compiled inside the AVX2 function rather than left to the inliner.)
/// `unsafe fn` defines an unsafe function with `body`'s safety contract.
macro_rules! avx2_build {
    ($(#[$m:meta])* fn $name:ident [$($g:tt)*] ($($a:ident : $t:ty),* $(,)?) $(-> $r:ty)? => $body:ident) => {
        $(#[$m])*
        fn $name<$($g)*>($($a: $t),*) $(-> $r)? {
            #[cfg(target_arch = "x86_64")]
            if $crate::ops::vmath::has_fma() {
                #[target_feature(enable = "avx2")]
                unsafe fn fast<$($g)*>($($a: $t),*) $(-> $r)? {
                    $body($($a),*)
                }
                // SAFETY: the CPU has AVX2 (checked by has_fma).
                return unsafe { fast($($a),*) };
            }
            $body($($a),*)
        }
    };
    ($(#[$m:meta])* unsafe fn $name:ident [$($g:tt)*] ($($a:ident : $t:ty),* $(,)?) $(-> $r:ty)? => $body:ident) => {
        $(#[$m])*
        unsafe fn $name<$($g)*>($($a: $t),*) $(-> $r)? {
            #[cfg(target_arch = "x86_64")]
            if $crate::ops::vmath::has_fma() {
                #[target_feature(enable = "avx2")]
                unsafe fn fast<$($g)*>($($a: $t),*) $(-> $r)? {
                    $body($($a),*)
                }
                // SAFETY: the CPU has AVX2 (checked by has_fma); the caller keeps body's contract.
                return fast($($a),*);
            }
            $body($($a),*)
        }
    };
}
pub(crate) use avx2_build;

#[cfg(target_arch = "x86_64")]
pub(crate) fn has_fma() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| std::env::var_os("OXIFLOW_NO_FMA").is_none() && is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"))
}

/// Element types with a vectorized unary loop.
pub(crate) trait VFloat: Copy + Send + Sync + Default + 'static {
    /// `dst[i] = fun(src[i])` into memory that may be uninitialized (a new output).
    fn run_uninit(fun: Fun, src: &[Self], dst: &mut [MaybeUninit<Self>]);
    /// `dst[i] = fun(src[i])`.
    fn run(fun: Fun, src: &[Self], dst: &mut [Self]) {
        // SAFETY: run_uninit writes only initialized values, so dst stays initialized.
        Self::run_uninit(fun, src, unsafe { &mut *(dst as *mut [Self] as *mut [MaybeUninit<Self>]) })
    }
}

macro_rules! vfloat {
    ($t:ty, $run:ident) => {
        impl VFloat for $t {
            fn run_uninit(fun: Fun, src: &[$t], dst: &mut [MaybeUninit<$t>]) {
                #[cfg(target_arch = "x86_64")]
                if has_fma() {
                    #[target_feature(enable = "avx2,fma")]
                    unsafe fn fast(fun: Fun, src: &[$t], dst: &mut [MaybeUninit<$t>]) {
                        $run::<true>(fun, src, dst)
                    }
                    // SAFETY: the CPU has AVX2 and FMA (checked by has_fma).
                    return unsafe { fast(fun, src, dst) };
                }
                $run::<false>(fun, src, dst)
            }
        }
    };
}
vfloat!(f32, run_f32);
vfloat!(f64, run_f64);

/// `dst[i] = fun(src[i])` (equal lengths), sharded over the intra-op threads
/// ([`intra_op::parallel_for_each`], the calling thread included) when there are at least
/// [`SHARD_MIN`] elements and the kernel may use more than one thread, in chunks of
/// [`intra_op::shard_len`] elements.
pub(crate) fn apply<T: VFloat>(fun: Fun, src: &[T], dst: &mut [MaybeUninit<T>]) {
    intra_op::shard_into(src, dst, SHARD_MIN, |s, d| T::run_uninit(fun, s, d));
}

/// `x[i] = fun(x[i])` in place, on the calling thread: the epilogue of a fused kernel
/// that has just written `x` (`_FusedMatMul`'s activation). The same loops as [`apply`],
/// so the same bits, through a 256-element stack buffer (the loops read one slice and
/// write another; the copy stays in L1).
pub(crate) fn run_in_place<T: VFloat>(fun: Fun, x: &mut [T]) {
    const CHUNK: usize = 256;
    let mut buf = [T::default(); CHUNK];
    for c in x.chunks_mut(CHUNK) {
        let b = &mut buf[..c.len()];
        b.copy_from_slice(c);
        T::run(fun, b, c);
    }
}

/// `fun` of every element of `src`, in a new vector (written once: not zeroed first, which
/// took a sixth of a 1M-element `Tanh`'s time).
pub(crate) fn map_vec<T: VFloat>(fun: Fun, src: &[T]) -> Vec<T> {
    let mut out = crate::strided::buffer_for(src.len());
    apply(fun, src, &mut out.spare_capacity_mut()[..src.len()]);
    // SAFETY: apply wrote every one of the first src.len() elements.
    unsafe { out.set_len(src.len()) };
    out
}

#[cfg(test)]
#[path = "vmath_tests.rs"]
pub(crate) mod tests;
