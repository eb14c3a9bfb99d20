//! Float `Pow` by the exponents that have a cheaper exact form, as TF's Grappler rewrites a
//! `Pow` by a constant (`ConvertPowStage` in `arithmetic_optimizer.cc`: 2 to `Square`, 1 to
//! `Identity`, 0 to ones, 0.5 to `Sqrt`, -0.5 to `Rsqrt`, -1 to `Reciprocal`), and 3 as
//! `x * x * x` (XLA's math simplification, and Julia's `x^3` for a literal 3 on f64). Every
//! other exponent takes libm's `pow`.
//!
//! The kernels check the exponent per element ([`pow_float`]) or, when it is one value for
//! the whole tensor, once, and then map the base with the form's own vector loop
//! ([`map_by_exponent`]): `x^0.5` runs at `sqrt`'s speed instead of `pow`'s (libm's `pow` costs
//! 5 to 10 ns an element here). Unlike Grappler's ops, the forms keep C99's values of `pow`
//! (F.9.4.4) at the special operands: `(-0)^0.5 = +0`, `(-inf)^0.5 = +inf`,
//! `(-0)^-0.5 = +inf`, `x^0 = 1` for every `x` (NaN included).
//!
//! Accuracy: `x^2`, `x^1`, `x^0`, `x^0.5` and `x^-1` are correctly rounded; in f64 `x^3`
//! (two products) and `x^-0.5` (a square root and a division) have two roundings, within
//! 1 ulp of libm's `pow` over the tests' sweeps; in f32 both are computed in f64 and rounded
//! once, so correctly rounded but for rare near-ties (tested in `pow_tests.rs`).

use super::math::Arith;

/// An exponent with a cheaper form than `pow`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PowBy {
    Zero,
    One,
    Square,
    Cube,
    Sqrt,
    Rsqrt,
    Recip,
}

impl PowBy {
    /// The form of exponent `e`, if it has one.
    #[inline(always)]
    pub(crate) fn of(e: f64) -> Option<PowBy> {
        if e == 2.0 {
            Some(PowBy::Square)
        } else if e == 1.0 {
            Some(PowBy::One)
        } else if e == 0.0 {
            Some(PowBy::Zero)
        } else if e == 0.5 {
            Some(PowBy::Sqrt)
        } else if e == -1.0 {
            Some(PowBy::Recip)
        } else if e == -0.5 {
            Some(PowBy::Rsqrt)
        } else if e == 3.0 {
            Some(PowBy::Cube)
        } else {
            None
        }
    }
}

/// The float element types of `Pow`.
pub(crate) trait PowFloat: Arith + Send + Sync + 'static {
    /// `1 / self`.
    fn recip(self) -> Self;
    /// `self^0.5` with C99's `pow` values: `sqrt`, but `+0` for `-0` and `+inf` for `-inf`.
    fn sqrt_pow(self) -> Self;
    /// `self^3`: `x * x * x` in f64; f32 in f64 (exact but for the last product) and
    /// rounded once, as two f32 products came to 1.12 ulp.
    fn cube(self) -> Self;
    /// `self^-0.5`: `1 / sqrt_pow(x)`; f32 in f64 and rounded once.
    fn rsqrt_pow(self) -> Self;
    fn one() -> Self;
    fn as_f64(self) -> f64;
    /// libm's `pow`.
    fn powf(self, e: Self) -> Self;
}

macro_rules! pow_float {
    ($t:ty, $wide:ty) => {
        impl PowFloat for $t {
            #[inline(always)]
            fn recip(self) -> Self {
                1.0 / self
            }
            #[inline(always)]
            fn sqrt_pow(self) -> Self {
                // sqrt(-0) = -0 and sqrt(-inf) = NaN, where pow gives +0 and +inf; adding
                // +0 turns -0 into +0 and leaves every other value as it is
                if self == <$t>::NEG_INFINITY {
                    <$t>::INFINITY
                } else {
                    self.sqrt() + 0.0
                }
            }
            #[inline(always)]
            fn cube(self) -> Self {
                let w = self as $wide;
                (w * w * w) as $t
            }
            #[inline(always)]
            fn rsqrt_pow(self) -> Self {
                (self as $wide).sqrt_pow().recip() as $t
            }
            #[inline(always)]
            fn one() -> Self {
                1.0
            }
            #[inline(always)]
            fn as_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn powf(self, e: Self) -> Self {
                <$t>::powf(self, e)
            }
        }
    };
}
pow_float!(f64, f64);
pow_float!(f32, f64);

/// `x^e` for the exponent `e` of form `k`.
#[inline(always)]
pub(crate) fn pow_by<T: PowFloat>(k: PowBy, x: T) -> T {
    match k {
        PowBy::Zero => T::one(),
        PowBy::One => x,
        PowBy::Square => T::mul(x, x),
        PowBy::Cube => x.cube(),
        PowBy::Sqrt => x.sqrt_pow(),
        PowBy::Rsqrt => x.rsqrt_pow(),
        PowBy::Recip => x.recip(),
    }
}

/// The float `a^b` of `Pow`'s kernels: [`pow_by`] for an exponent with a form, else
/// libm's `pow`.
#[inline(always)]
pub(crate) fn pow_float<T: PowFloat>(a: T, b: T) -> T {
    match PowBy::of(b.as_f64()) {
        Some(k) => pow_by(k, a),
        None => a.powf(b),
    }
}

/// A loop that maps a tensor or tile by an element function (the `Pow` kernel's sharded
/// map, a fused program's tile loop).
pub(crate) trait MapBase<T> {
    type Out;
    fn map(self, f: impl Fn(T) -> T + Copy + Sync) -> Self::Out;
}

/// `m` run with `x^e` for one exponent `e` of the whole map: by an exponent with a form,
/// that form's own loop ([`with_pow_by`]), else [`pow_float`] per element. The kernel's and
/// a fused program's one-exponent paths, so they give the same bits.
#[inline(always)]
pub(crate) fn map_by_exponent<T: PowFloat, M: MapBase<T>>(e: T, m: M) -> M::Out {
    match PowBy::of(e.as_f64()) {
        Some(k) => with_pow_by(k, m),
        None => m.map(move |x| pow_float(x, e)),
    }
}

/// `m` run with [`pow_by`]`(k, _)`, one instance of the loop per form, so that each is a
/// vector loop with no per-element dispatch.
#[inline(always)]
pub(crate) fn with_pow_by<T: PowFloat, M: MapBase<T>>(k: PowBy, m: M) -> M::Out {
    match k {
        PowBy::Zero => m.map(|_| T::one()),
        PowBy::One => m.map(|x| pow_by(PowBy::One, x)),
        PowBy::Square => m.map(|x| pow_by(PowBy::Square, x)),
        PowBy::Cube => m.map(|x| pow_by(PowBy::Cube, x)),
        PowBy::Sqrt => m.map(|x| pow_by(PowBy::Sqrt, x)),
        PowBy::Rsqrt => m.map(|x| pow_by(PowBy::Rsqrt, x)),
        PowBy::Recip => m.map(|x| pow_by(PowBy::Recip, x)),
    }
}

#[cfg(test)]
#[path = "pow_tests.rs"]
mod tests;
