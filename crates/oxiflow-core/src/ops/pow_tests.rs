//! The forms of `Pow` by special exponents against libm's `pow` (an independent oracle,
//! within 0.52 ulp): in f64 within 1 ulp of it, in f32 correctly rounded (against libm's
//! f64 `pow` of the same operands, plus its error); C99's values at zeros, infinities and
//! NaN; the one-exponent loops against the element function.

use super::*;
use crate::ops::vmath::tests::{sweep, ulps32, ulps64};

const FORMS: [(f64, PowBy); 7] =
    [(0.0, PowBy::Zero), (1.0, PowBy::One), (2.0, PowBy::Square), (3.0, PowBy::Cube), (0.5, PowBy::Sqrt), (-0.5, PowBy::Rsqrt), (-1.0, PowBy::Recip)];

/// Bases of both signs up to 1e100 in magnitude (linear, then log-spaced from 1e-100), with
/// the special values.
fn bases() -> Vec<f64> {
    let mut v = vec![0.0, -0.0, 1.0, -1.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, f64::MAX, f64::MIN_POSITIVE, 5e-324, 1e-200, 1e200];
    v.extend(sweep(-1e100, 1e100, 1e-100, 20_000));
    v
}

/// Whether `got` is NaN where `want` is, and otherwise has its sign (zeros, infinities).
fn same_class(got: f64, want: f64) -> bool {
    got.is_nan() == want.is_nan() && (want.is_nan() || got.is_sign_negative() == want.is_sign_negative())
}

#[test]
fn each_form_is_in_the_exponent_table() {
    for (e, k) in FORMS {
        assert_eq!(PowBy::of(e), Some(k), "exponent {e}");
    }
    assert_eq!(PowBy::of(-0.0), Some(PowBy::Zero));
    for e in [2.5, -2.0, 4.0, 1.5, 0.25, f64::NAN, f64::INFINITY] {
        assert_eq!(PowBy::of(e), None, "exponent {e}");
    }
}

#[test]
fn f64_forms_match_libm() {
    for (e, _) in FORMS {
        for x in bases() {
            let (got, want) = (pow_float(x, e), x.powf(e));
            let ulps = ulps64(got, want);
            // libm's pow is itself within 0.52 ulp (not always the correctly rounded value)
            let ok = same_class(got, want) && ulps <= 1.0;
            assert!(ok, "{x:e}^{e}: {got:e}, libm {want:e} ({ulps} ulp)");
        }
    }
}

#[test]
fn f32_forms_match_libm() {
    for (e, _) in FORMS {
        let e = e as f32;
        for x in bases().into_iter().map(|x| x as f32) {
            let (got, want) = (pow_float(x, e), x.powf(e));
            // against the exact value (libm's f64 pow of the same operands)
            let exact = (x as f64).powf(e as f64);
            let err = ulps32(got, exact);
            let ok = same_class(got as f64, want as f64) && err <= 0.5 + 1e-6;
            assert!(ok, "{x:e}^{e}: {got:e}, libm {want:e} ({err} ulp of the exact value)");
        }
    }
}

#[test]
fn one_exponent_loops_give_the_element_functions_bits() {
    struct Collect<'a>(&'a [f64]);
    impl MapBase<f64> for Collect<'_> {
        type Out = Vec<f64>;
        fn map(self, f: impl Fn(f64) -> f64 + Copy + Sync) -> Vec<f64> {
            self.0.iter().map(|&x| f(x)).collect()
        }
    }
    let xs = bases();
    for (e, k) in FORMS {
        let got = with_pow_by(k, Collect(&xs));
        for (&x, &g) in xs.iter().zip(&got) {
            let want = pow_float(x, e);
            assert!(g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()), "{x:e}^{e}: loop {g:e}, element {want:e}");
        }
    }
}
