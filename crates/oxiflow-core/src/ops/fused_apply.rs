//! The element loops of `_FusedElementwise`'s instructions ([`super::fused`]): each applies
//! the same scalar or slice function as the op's own kernel to a tile, so a fused run gives
//! the unfused bits.

use super::fused::{Fn1, Fn2};
use super::math::Arith;
use super::pow::{map_by_exponent, pow_float, MapBase, PowFloat};
use super::vmath::VFloat;
use crate::tensor::Element;

/// Float element types a program runs on, with the scalar functions the ops' own kernels
/// use.
pub(crate) trait FusedFloat: VFloat + Arith + PowFloat + Element {
    fn from_f64(v: f64) -> Self;
    fn abs(self) -> Self;
    fn floor(self) -> Self;
    fn div(self, b: Self) -> Self;
}

macro_rules! fused_float {
    ($t:ty) => {
        impl FusedFloat for $t {
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            fn floor(self) -> Self {
                <$t>::floor(self)
            }
            fn div(self, b: Self) -> Self {
                self / b
            }
        }
    };
}
fused_float!(f32);
fused_float!(f64);

#[inline(always)]
fn map1<T: Copy>(x: &[T], d: &mut [T], g: impl Fn(T) -> T) {
    d.iter_mut().zip(x).for_each(|(d, &x)| *d = g(x));
}

#[inline(always)]
fn map2<T: Copy>(a: &[T], b: &[T], d: &mut [T], g: impl Fn(T, T) -> T) {
    d.iter_mut().zip(a.iter().zip(b)).for_each(|(d, (&a, &b))| *d = g(a, b));
}

#[inline(always)]
pub(crate) fn apply1<T: FusedFloat>(f: Fn1, x: &[T], d: &mut [T]) {
    match f {
        Fn1::Identity | Fn1::Splat => d.copy_from_slice(x),
        Fn1::Neg => map1(x, d, T::neg),
        Fn1::Square => map1(x, d, |x| T::mul(x, x)),
        Fn1::Abs => map1(x, d, T::abs),
        Fn1::Floor => map1(x, d, T::floor),
        Fn1::V(fun) => T::run(fun, x, d),
    }
}

#[inline(always)]
pub(crate) fn apply2<T: FusedFloat>(f: Fn2, a: &[T], b: &[T], d: &mut [T]) {
    match f {
        Fn2::Add => map2(a, b, d, T::add),
        Fn2::Sub => map2(a, b, d, T::sub),
        Fn2::Mul => map2(a, b, d, T::mul),
        Fn2::Div => map2(a, b, d, T::div),
        Fn2::Max => map2(a, b, d, super::nn::maximum::<T>),
        Fn2::Min => map2(a, b, d, super::nn::minimum::<T>),
        Fn2::Pow => map2(a, b, d, pow_float),
        Fn2::TanhGrad => map2(a, b, d, super::activation_grad::tanh_grad::<T>),
        Fn2::SigmoidGrad => map2(a, b, d, super::activation_grad::sigmoid_grad::<T>),
        Fn2::ReluGrad => map2(a, b, d, super::activation_grad::relu_grad::<T>),
        // the comparisons of the unfused kernels (`nn.rs`), as masks of 1 and 0
        Fn2::Gt => map2(a, b, d, |a, b| mask(a > b)),
        Fn2::Ge => map2(a, b, d, |a, b| mask(a >= b)),
        Fn2::Lt => map2(a, b, d, |a, b| mask(a < b)),
        Fn2::Le => map2(a, b, d, |a, b| mask(a <= b)),
        Fn2::Eq => map2(a, b, d, |a, b| mask(a == b)),
    }
}

/// A comparison's result in a tile register: 1 for true, 0 for false.
#[inline(always)]
pub(crate) fn mask<T: FusedFloat>(b: bool) -> T {
    if b {
        T::from_f64(1.0)
    } else {
        T::from_f64(0.0)
    }
}

/// `SelectV2` over a tile: `x` where the mask `c` is nonzero, else `y` (the values
/// themselves, so the unfused bits).
#[inline(always)]
pub(crate) fn select<T: FusedFloat>(c: &[T], x: &[T], y: &[T], d: &mut [T]) {
    let zero = T::from_f64(0.0);
    d.iter_mut().zip(c.iter().zip(x.iter().zip(y))).for_each(|(d, (&c, (&x, &y)))| *d = if c != zero { x } else { y });
}

/// `Pow` of a tile by one exponent `e` (a constant or a one-element input), as `Pow`'s
/// kernel maps it ([`map_by_exponent`]: a cheaper form's own loop for `x^2`, `x^0.5`, ...,
/// else [`pow_float`] per element).
#[inline(always)]
pub(crate) fn pow_by<T: FusedFloat>(a: &[T], e: T, d: &mut [T]) {
    struct Tile<'a, T> {
        a: &'a [T],
        d: &'a mut [T],
    }
    impl<T: Copy> MapBase<T> for Tile<'_, T> {
        type Out = ();
        #[inline(always)]
        fn map(self, f: impl Fn(T) -> T + Copy + Sync) {
            map1(self.a, self.d, f)
        }
    }
    map_by_exponent(e, Tile { a, d })
}
