//! Accuracy of the vectorized math against libm in `f64` (an independent oracle): max ulp
//! error over sweeps (3 ulp in f32, about 3.6e-7 relative: TF's float tests of its Eigen
//! kernels allow 1e-6; 6.5 ulp, 7.7e-7 relative, for f32 `tanh`'s rational approximation;
//! 4 ulp of libm in f64) of each function's domain, special values, and the same results on the
//! baseline and FMA code paths and on the sharded path.

use super::*;

/// Distance in units in the last place of `want` (an f64 reference rounded to f32).
pub(crate) fn ulps32(got: f32, want: f64) -> f64 {
    let w = want as f32;
    if got == w || (got.is_nan() && w.is_nan()) {
        return 0.0;
    }
    if got.is_infinite() || w.is_infinite() || got.is_nan() || w.is_nan() {
        return f64::INFINITY;
    }
    let ulp = if w == 0.0 { f32::from_bits(1) as f64 } else { (f32::from_bits(w.abs().to_bits() + 1) - w.abs()) as f64 };
    (got as f64 - want).abs() / ulp
}

/// Distance in ulps between two f64 (by their ordered bit patterns).
pub(crate) fn ulps64(got: f64, want: f64) -> f64 {
    if got == want || (got.is_nan() && want.is_nan()) {
        return 0.0;
    }
    if !got.is_finite() || !want.is_finite() {
        return f64::INFINITY;
    }
    let key = |x: f64| {
        let b = x.to_bits() as i64;
        if b < 0 {
            i64::MIN - b
        } else {
            b
        }
    };
    (key(got) - key(want)).unsigned_abs() as f64
}

/// The largest `err(x, got)` over the pairs of `xs` and `got`, and the `x` where it occurs.
fn worst<T: Copy + Default>(xs: &[T], got: &[T], err: impl Fn(T, T) -> f64) -> (f64, T) {
    let (mut worst, mut at) = (0.0f64, T::default());
    for (&x, &g) in xs.iter().zip(got) {
        let e = err(x, g);
        if e > worst {
            (worst, at) = (e, x);
        }
    }
    (worst, at)
}

/// `n` points spread over `[lo, hi]` (linear) and the same number log-spaced over the
/// magnitudes `[tiny, hi.abs().max(lo.abs())]` of both signs inside the range.
pub(crate) fn sweep(lo: f64, hi: f64, tiny: f64, n: usize) -> Vec<f64> {
    let mut v: Vec<f64> = (0..=n).map(|i| lo + (hi - lo) * i as f64 / n as f64).collect();
    let big = hi.abs().max(lo.abs());
    for i in 0..=n {
        let m = tiny * (big / tiny).powf(i as f64 / n as f64);
        for x in [m, -m] {
            if x >= lo && x <= hi {
                v.push(x);
            }
        }
    }
    v
}

fn reference(fun: Fun, x: f64) -> f64 {
    match fun {
        Fun::Exp => x.exp(),
        Fun::Log => x.ln(),
        Fun::Tanh => x.tanh(),
        Fun::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        Fun::Sqrt => x.sqrt(),
        Fun::Relu => x.max(0.0),
        Fun::Sin => x.sin(),
        Fun::Cos => x.cos(),
        Fun::Tan => x.tan(),
    }
}

/// Runs both code paths (baseline and, where the CPU has it, FMA) on `xs`.
fn both_paths_f32(fun: Fun, xs: &[f32]) -> Vec<Vec<f32>> {
    // the baseline loop writes into a NaN-filled buffer (a skipped element would show)
    let mut base = vec![MaybeUninit::new(f32::NAN); xs.len()];
    run_f32::<false>(fun, xs, &mut base);
    let mut out = vec![base.iter().map(|v| unsafe { v.assume_init() }).collect::<Vec<f32>>()];
    #[cfg(target_arch = "x86_64")]
    if has_fma() {
        let mut d = vec![0.0; xs.len()];
        f32::run(fun, xs, &mut d);
        out.push(d);
    }
    out
}
fn both_paths_f64(fun: Fun, xs: &[f64]) -> Vec<Vec<f64>> {
    // the baseline loop writes into a NaN-filled buffer (a skipped element would show)
    let mut base = vec![MaybeUninit::new(f64::NAN); xs.len()];
    run_f64::<false>(fun, xs, &mut base);
    let mut out = vec![base.iter().map(|v| unsafe { v.assume_init() }).collect::<Vec<f64>>()];
    #[cfg(target_arch = "x86_64")]
    if has_fma() {
        let mut d = vec![0.0; xs.len()];
        f64::run(fun, xs, &mut d);
        out.push(d);
    }
    out
}

/// The domains swept per function: (lo, hi, smallest magnitude).
fn domain32(fun: Fun) -> (f64, f64, f64) {
    match fun {
        Fun::Exp => (-103.0, 88.7, 1e-30),
        Fun::Log => (1e-44, 3e38, 1e-44),
        Fun::Tanh => (-12.0, 12.0, 1e-30),
        Fun::Sigmoid => (-80.0, 80.0, 1e-30),
        Fun::Sqrt => (0.0, 3e38, 1e-44),
        Fun::Relu => (-1e30, 1e30, 1e-30),
        // linear steps of about 20 near 0, and the magnitudes 1e-30 to 1e7 (libm's past 1e6)
        Fun::Sin | Fun::Cos | Fun::Tan => (-2e6, 2e6, 1e-30),
    }
}

const FUNS: [Fun; 9] = [Fun::Exp, Fun::Log, Fun::Tanh, Fun::Sigmoid, Fun::Sqrt, Fun::Relu, Fun::Sin, Fun::Cos, Fun::Tan];

/// The largest error allowed in f32, in ulps of the correctly rounded value.
fn bound32(fun: Fun) -> f64 {
    match fun {
        // every f32 checked once: 4.89 ulp with FMA, 6.30 without
        Fun::Tanh => 6.5,
        _ => 3.0,
    }
}

#[test]
fn f32_results_are_within_their_ulp_bounds_of_the_correctly_rounded_value() {
    for fun in FUNS {
        let (lo, hi, tiny) = domain32(fun);
        let xs: Vec<f32> = sweep(lo, hi, tiny, 200_000).into_iter().map(|x| x as f32).collect();
        for got in both_paths_f32(fun, &xs) {
            let (worst, at) = worst(&xs, &got, |x, g| ulps32(g, reference(fun, x as f64)));
            eprintln!("{fun:?} f32: at most {worst:.2} ulp (at x = {at:e})");
            assert!(worst <= bound32(fun), "{fun:?} f32: {worst} ulp at x = {at:e}");
        }
    }
}

#[test]
fn f64_results_are_within_4_ulp_of_libm() {
    for fun in FUNS {
        let (lo, hi, tiny) = match fun {
            Fun::Exp => (-745.0, 709.7, 1e-300),
            Fun::Log => (4.9e-324, 1.7e308, 4.9e-324),
            Fun::Tanh => (-25.0, 25.0, 1e-300),
            Fun::Sigmoid => (-700.0, 700.0, 1e-300),
            Fun::Sqrt => (0.0, 1.7e308, 4.9e-324),
            Fun::Relu => (-1e300, 1e300, 1e-300),
            Fun::Sin | Fun::Cos | Fun::Tan => (-2e6, 2e6, 1e-300),
        };
        let xs = sweep(lo, hi, tiny, 200_000);
        for got in both_paths_f64(fun, &xs) {
            let (worst, at) = worst(&xs, &got, |x, g| {
                let want = reference(fun, x);
                // Results that underflow to the subnormals are compared in absolute terms.
                if want != 0.0 && want.abs() < f64::MIN_POSITIVE {
                    (g - want).abs() / f64::from_bits(1)
                } else {
                    ulps64(g, want)
                }
            });
            eprintln!("{fun:?} f64: at most {worst:.2} ulp of libm (at x = {at:e})");
            assert!(worst <= 4.0, "{fun:?} f64: {worst} ulp at x = {at:e}");
        }
    }
}

#[test]
fn special_values_follow_ieee_and_libm() {
    let nan = f64::NAN;
    let cases: [(Fun, f64, f64); 18] = [
        (Fun::Exp, f64::INFINITY, f64::INFINITY),
        (Fun::Exp, f64::NEG_INFINITY, 0.0),
        (Fun::Exp, 1000.0, f64::INFINITY),
        (Fun::Exp, -1000.0, 0.0),
        (Fun::Exp, nan, nan),
        (Fun::Log, 0.0, f64::NEG_INFINITY),
        (Fun::Log, -1.0, nan),
        (Fun::Log, f64::INFINITY, f64::INFINITY),
        (Fun::Log, nan, nan),
        (Fun::Log, 1.0, 0.0),
        (Fun::Log, -0.0, f64::NEG_INFINITY),
        (Fun::Log, f64::NEG_INFINITY, nan),
        (Fun::Tanh, f64::INFINITY, 1.0),
        (Fun::Tanh, f64::NEG_INFINITY, -1.0),
        (Fun::Tanh, nan, nan),
        (Fun::Sigmoid, f64::INFINITY, 1.0),
        (Fun::Sigmoid, f64::NEG_INFINITY, 0.0),
        (Fun::Relu, nan, nan),
    ];
    for (fun, x, want) in cases {
        for got in both_paths_f64(fun, &[x]) {
            assert!(got[0] == want || (got[0].is_nan() && want.is_nan()), "{fun:?}({x}) f64 = {}, want {want}", got[0]);
        }
        for got in both_paths_f32(fun, &[x as f32]) {
            let w = want as f32;
            assert!(got[0] == w || (got[0].is_nan() && w.is_nan()), "{fun:?}({x}) f32 = {}, want {w}", got[0]);
        }
    }
    // Signed zeros: tanh(-0) = -0, exp(-0) = 1.
    for got in both_paths_f64(Fun::Tanh, &[-0.0]) {
        assert!(got[0] == 0.0 && got[0].is_sign_negative());
    }
    for got in both_paths_f32(Fun::Tanh, &[-0.0]) {
        assert!(got[0] == 0.0 && got[0].is_sign_negative());
    }
    // sin(-0) = tan(-0) = -0, cos(-0) = 1, as libm
    for fun in [Fun::Sin, Fun::Tan, Fun::Cos] {
        let want = reference(fun, -0.0);
        for got in both_paths_f64(fun, &[-0.0, 0.0]) {
            assert_eq!(got[0].to_bits(), want.to_bits(), "{fun:?}(-0) f64");
            assert_eq!(got[1].to_bits(), reference(fun, 0.0).to_bits(), "{fun:?}(0) f64");
        }
        for got in both_paths_f32(fun, &[-0.0, 0.0]) {
            assert_eq!(got[0].to_bits(), (want as f32).to_bits(), "{fun:?}(-0) f32");
            assert_eq!(got[1].to_bits(), (reference(fun, 0.0) as f32).to_bits(), "{fun:?}(0) f32");
        }
    }
}

/// f32 `tanh` on every 8th float in `[0, 10.5]` (every float was checked once, when its
/// coefficients were fitted) and their negatives: within its bound, never above 1 in
/// magnitude (the rounding of the rational could give 1.0000001 near saturation without the
/// final clamp), exactly odd, and exactly 1 from the clamp at 9.9 on; subnormals exact.
#[test]
fn f32_tanh_on_a_dense_sweep() {
    let xs: Vec<f32> = (0..=10.5f32.to_bits()).step_by(8).map(f32::from_bits).collect();
    let neg: Vec<f32> = xs.iter().map(|x| -x).collect();
    for (got, got_neg) in both_paths_f32(Fun::Tanh, &xs).into_iter().zip(both_paths_f32(Fun::Tanh, &neg)) {
        let (mut worst, mut at) = (0.0f64, 0.0f32);
        for ((&x, &g), &gn) in xs.iter().zip(&got).zip(&got_neg) {
            assert!(g.abs() <= 1.0, "tanh({x:e}) = {g:e}, above 1");
            assert_eq!(gn.to_bits(), (-g).to_bits(), "tanh(-{x:e}) = {gn:e} is not -tanh({x:e}) = -{g:e}");
            if !(f32::MIN_POSITIVE..9.9).contains(&x) {
                assert_eq!(g, if x >= 9.9 { 1.0 } else { x }, "tanh({x:e})");
            }
            let e = ulps32(g, (x as f64).tanh());
            if e > worst {
                (worst, at) = (e, x);
            }
        }
        eprintln!("Tanh f32, {} values: at most {worst:.2} ulp (at x = {at:e})", xs.len());
        assert!(worst <= bound32(Fun::Tanh), "Tanh f32: {worst} ulp at x = {at:e}");
    }
}

#[test]
fn the_sharded_path_gives_the_same_elements_as_one_thread() {
    let xs: Vec<f32> = (0..100_003).map(|i| (i as f32 - 50_000.0) * 1e-3).collect();
    for fun in FUNS {
        let mut one = vec![0.0; xs.len()];
        f32::run(fun, &xs, &mut one);
        let sharded = std::thread::spawn({
            let xs = xs.clone();
            move || {
                crate::intra_op::set_intra_op_threads(3);
                map_vec(fun, &xs)
            }
        })
        .join()
        .unwrap();
        assert!(one.iter().zip(&sharded).all(|(a, b)| a.to_bits() == b.to_bits()), "{fun:?}");
    }
}

/// Zeros, negatives, infinities, NaNs and subnormals scattered among ordinary values give
/// what they give alone (`Log` computes ordinary values in a vector loop and fixes the
/// others up in a second pass).
#[test]
fn special_values_among_ordinary_ones_give_what_they_give_alone() {
    let specials = [0.0f32, -0.0, -1.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1e-40, f32::MIN_POSITIVE, f32::MAX];
    let xs: Vec<f32> = (0..1000).map(|i| if i % 7 == 3 { specials[i / 7 % specials.len()] } else { 0.5 + i as f32 * 0.01 }).collect();
    for fun in FUNS {
        for (path, got) in both_paths_f32(fun, &xs).into_iter().enumerate() {
            for (&x, &g) in xs.iter().zip(&got) {
                let alone = both_paths_f32(fun, &[x])[path][0];
                assert!(g.to_bits() == alone.to_bits() || (g.is_nan() && alone.is_nan()), "{fun:?}({x}) = {g} among others, {alone} alone");
            }
        }
    }
}

/// The hard cases of the range reduction: the floats nearest to multiples `k pi/2` for `k`
/// up to `TRIG_MAX` (every 7th), and their neighbours, where `sin`, `cos` or `tan` is
/// close to 0 or to a pole and the reduced argument keeps only the bits that cancel least.
/// f32 within its bound of the correctly rounded value; f64 within 4 ulp of libm.
#[test]
fn trig_near_multiples_of_half_pi() {
    let kmax = (TRIG_MAX * std::f64::consts::FRAC_2_PI) as u64;
    let mut x32 = Vec::new();
    let mut x64 = Vec::new();
    for k in (1..=kmax).step_by(7) {
        let kf = k as f64;
        let near = kf * PIO2[0] + kf * PIO2_0_TAIL;
        let n32 = near as f32;
        for d in -2i32..=2 {
            for sign in [1.0f64, -1.0] {
                x32.push(sign as f32 * f32::from_bits((n32.to_bits() as i32 + d) as u32));
                x64.push(sign * f64::from_bits((near.to_bits() as i64 + d as i64) as u64));
            }
        }
    }
    for fun in [Fun::Sin, Fun::Cos, Fun::Tan] {
        for got in both_paths_f32(fun, &x32) {
            let (worst, at) = worst(&x32, &got, |x, g| ulps32(g, reference(fun, x as f64)));
            eprintln!("{fun:?} f32 near k pi/2: at most {worst:.2} ulp (at x = {at:e})");
            assert!(worst <= bound32(fun), "{fun:?} f32: {worst} ulp at x = {at:e}");
        }
        for got in both_paths_f64(fun, &x64) {
            let (worst, at) = worst(&x64, &got, |x, g| ulps64(g, reference(fun, x)));
            eprintln!("{fun:?} f64 near k pi/2: at most {worst:.2} ulp of libm (at x = {at:e})");
            assert!(worst <= 4.0, "{fun:?} f64: {worst} ulp at x = {at:e}");
        }
    }
}

/// The parts of `pi/2` are fdlibm's bit patterns: the first three end in enough zero bits
/// that `n` times each is exact for `|n| < 2^20`; the first plus the f32 path's tail round
/// to the f64 nearest `pi/2`, and the last three to that tail.
#[test]
fn the_parts_of_half_pi_are_fdlibms() {
    let bits: Vec<u64> = PIO2.iter().map(|p| p.to_bits()).collect();
    assert_eq!(bits, [0x3ff9_21fb_5440_0000, 0x3dd0_b461_1a60_0000, 0x3ba3_198a_2e00_0000, 0x397b_839a_2520_49c1]);
    assert_eq!(PIO2_0_TAIL.to_bits(), 0x3dd0_b461_1a62_6331);
    for p in &PIO2[..3] {
        assert!(p.to_bits().trailing_zeros() >= 21, "{p:e}: fewer than 21 zero bits");
    }
    assert_eq!(PIO2[0] + PIO2_0_TAIL, std::f64::consts::FRAC_PI_2);
    assert_eq!(PIO2[1] + (PIO2[2] + PIO2[3]), PIO2_0_TAIL);
}

/// f32 `sin` and `cos` on every 127th float of `[0, 20000]` and their negatives, across the
/// FMA path's f32 reduction (to `TRIG32_FAST`) and the f64 one after it: within the f32
/// bound of the correctly rounded value, and odd (`sin`) or even (`cos`) exactly.
#[test]
fn f32_sin_cos_on_a_dense_sweep() {
    let xs: Vec<f32> = (0..=20_000f32.to_bits()).step_by(127).map(f32::from_bits).collect();
    let neg: Vec<f32> = xs.iter().map(|x| -x).collect();
    for fun in [Fun::Sin, Fun::Cos] {
        for (got, got_neg) in both_paths_f32(fun, &xs).into_iter().zip(both_paths_f32(fun, &neg)) {
            let (mut worst, mut at) = (0.0f64, 0.0f32);
            for ((&x, &g), &gn) in xs.iter().zip(&got).zip(&got_neg) {
                let mirrored = if fun == Fun::Sin { -g } else { g };
                assert_eq!(gn.to_bits(), mirrored.to_bits(), "{fun:?}(-{x:e}) = {gn:e}, {fun:?}({x:e}) = {g:e}");
                let e = ulps32(g, reference(fun, x as f64));
                if e > worst {
                    (worst, at) = (e, x);
                }
            }
            eprintln!("{fun:?} f32, {} values: at most {worst:.2} ulp (at x = {at:e})", xs.len());
            assert!(worst <= bound32(fun), "{fun:?} f32: {worst} ulp at x = {at:e}");
        }
    }
}
