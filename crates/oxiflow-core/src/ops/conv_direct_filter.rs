//! The direct kernel's filter gradient: `dF[(ky kw + kx) c + ci, co]`, the sum over output
//! pixels `q` and images `b` of `x[b, tap(q, ky, kx), ci] dy[b, q, co]`, for a column-major
//! batch, with the batch in SIMD lanes (see the parent module).
//!
//! For one tap, a block of `CI` input channels and `CO` output channels, the `CI x CO`
//! accumulators stay in vector registers while the loop runs over the pixels whose tap falls
//! inside the image and over the batch `V::LANES` images at a time: `CI` input loads, `CO`
//! output-gradient loads and `CI CO` fused multiply-adds per step (AVX-512: 2 x 8, so 10
//! loads for 16 multiply-adds; AVX2: 2 x 4, 16 registers only). A first layer of one input
//! channel runs with `CI = 1`. Pixels go by sub-tiles, sized for their input and output
//! gradient to stay in the core's L2 cache through all taps and blocks but at least
//! [`MIN_SUB`] pixels; each accumulator is a vector of per-lane partial sums, kept between
//! sub-tiles in a `[kh kw c, oc, LANES]` buffer of the chunk and summed over the lanes at
//! its end. A block whose channels run past `c` or `oc` reads the last channel again in
//! those places and discards those sums, so the inner loop has no bounds.
//!
//! Against im2col and BLAS (`conv_cpu.rs`'s tiles, `patches^T @ dy`), this reads the input
//! where it is instead of copying it `kh kw` times. Each chunk of pixels sums into its own
//! matrix, the matrices added in chunk order: for one thread count and vector width the
//! same bits on every run.

use super::super::cpu;
use super::super::{ConvFloat, Geometry};
use super::simd::Lanes;
use crate::intra_op;

/// The filter gradient (row-major `[kh kw c, oc]`) of the convolution of `xs` (column-major
/// `[n, h, w, c]`), `dys` its output gradient (column-major `[n, oh, ow, oc]`); `None` where
/// the direct kernel is not available (then the caller runs the tiled path).
pub(in crate::ops::conv) fn backprop_filter_cols<T: ConvFloat>(g: &Geometry, xs: &[T], dys: &[T]) -> Option<Vec<T>> {
    let wide = super::wide()?;
    let (m, k) = g.patches();
    let len = k * g.oc;
    assert!(xs.len() >= g.n * g.h * g.w * g.c && dys.len() >= m * g.oc, "conv filter gradient: operands smaller than the geometry");
    let pixels = g.oh * g.ow;
    let chunks = cpu::chunk_count(pixels, m.saturating_mul(len), 1);
    let mut parts: Vec<Vec<T>> = (0..chunks).map(|_| vec![T::ZERO; len]).collect();
    intra_op::parallel_for_each(parts.iter_mut().enumerate().collect(), |(i, part)| {
        // SAFETY: the build was detected on this CPU; the operands hold the geometry's
        // elements (checked above); part is this chunk's own k x oc matrix.
        unsafe { run_chunk(g, xs, dys, part, cpu::chunk_tiles(i, chunks, pixels), wide) };
    });
    Some(cpu::sum_parts(parts))
}

/// The filter gradient's sums over pixels `qs` into `df`, with the build's vectors.
///
/// # Safety
/// See [`backprop_filter_cols`].
unsafe fn run_chunk<T: ConvFloat>(g: &Geometry, xs: &[T], dys: &[T], df: &mut [T], qs: std::ops::Range<usize>, wide: bool) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::any::TypeId;
        let f32s = TypeId::of::<T>() == TypeId::of::<f32>();
        let one = g.c == 1;
        // SAFETY (casts): T is the type the branch checked.
        let (xs, dys, df) = (xs.as_ptr(), dys.as_ptr(), df.as_mut_ptr());
        match (wide, f32s, one) {
            (true, true, false) => avx512_f32(g, xs.cast(), dys.cast(), df.cast(), qs),
            (true, true, true) => avx512_f32_1(g, xs.cast(), dys.cast(), df.cast(), qs),
            (true, false, false) => avx512_f64(g, xs.cast(), dys.cast(), df.cast(), qs),
            (true, false, true) => avx512_f64_1(g, xs.cast(), dys.cast(), df.cast(), qs),
            (false, true, false) => avx2_f32(g, xs.cast(), dys.cast(), df.cast(), qs),
            (false, true, true) => avx2_f32_1(g, xs.cast(), dys.cast(), df.cast(), qs),
            (false, false, false) => avx2_f64(g, xs.cast(), dys.cast(), df.cast(), qs),
            (false, false, true) => avx2_f64_1(g, xs.cast(), dys.cast(), df.cast(), qs),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (g, xs, dys, df, qs, wide);
}

/// The kernel's builds: `name(g, xs, dys, df, qs)` runs [`pixels`] with vectors `V` and
/// blocks of `CI x CO` channels, compiled for the CPU features `feat`.
#[cfg(target_arch = "x86_64")]
macro_rules! build_fns {
    ($(($name:ident, $t:ty, $v:ty, $ci:literal, $co:literal, $feat:literal)),* $(,)?) => {
        use super::simd::{F32x16, F32x8, F64x4, F64x8};
        $(
            #[target_feature(enable = $feat)]
            unsafe fn $name(g: &Geometry, xs: *const $t, dys: *const $t, df: *mut $t, qs: std::ops::Range<usize>) {
                pixels::<$v, $ci, $co>(g, xs, dys, df, qs)
            }
        )*
    };
}
#[cfg(target_arch = "x86_64")]
build_fns!(
    (avx512_f32, f32, F32x16, 2, 8, "avx512f,avx2,fma"),
    (avx512_f32_1, f32, F32x16, 1, 8, "avx512f,avx2,fma"),
    (avx512_f64, f64, F64x8, 2, 8, "avx512f,avx2,fma"),
    (avx512_f64_1, f64, F64x8, 1, 8, "avx512f,avx2,fma"),
    (avx2_f32, f32, F32x8, 2, 4, "avx2,fma"),
    (avx2_f32_1, f32, F32x8, 1, 4, "avx2,fma"),
    (avx2_f64, f64, F64x4, 2, 4, "avx2,fma"),
    (avx2_f64_1, f64, F64x4, 1, 4, "avx2,fma"),
);

/// Bytes of input and output gradient a sub-tile of pixels aims at (within a core's L2).
const SUB_BYTES: usize = 128 * 1024;

/// The fewest pixels of a sub-tile: each sub-tile loads and stores the chunk's whole
/// accumulator buffer (`kh kw c oc` vectors: 1.2 MB for 32 to 64 channels, 3 x 3, f32), so
/// with wide images or many channels a sub-tile sized by [`SUB_BYTES`] alone (10 pixels for
/// a batch of 32 and 96 channels in all) spent more time on the buffer than on the
/// multiply-adds, and ran slower than im2col.
const MIN_SUB: usize = 64;

/// Adds pixels `qs`' terms of the filter gradient to `df` (row-major `[kh kw c, oc]`).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn pixels<V: Lanes, const CI: usize, const CO: usize>(g: &Geometry, xs: *const V::T, dys: *const V::T, df: *mut V::T, qs: std::ops::Range<usize>)
where
    V::T: ConvFloat,
{
    let (k, l) = (g.kh * g.kw * g.c, V::LANES);
    let (plane, out_plane) = (g.n * g.h * g.w, g.n * g.oh * g.ow);
    // per (kk, co), one vector of per-lane partial sums
    let mut acc = vec![<V::T as ConvFloat>::ZERO; k * g.oc * l];
    let accp = acc.as_mut_ptr();
    let per_pixel = g.n * (g.c + g.oc) * std::mem::size_of::<V::T>();
    let sub = (SUB_BYTES / per_pixel.max(1)).max(MIN_SUB);
    // (offset of the tap's input pixel in xs, offset of the output pixel in dys)
    let mut list: Vec<(usize, usize)> = Vec::with_capacity(sub);
    let mut s0 = qs.start;
    while s0 < qs.end {
        let s1 = (s0 + sub).min(qs.end);
        for ky in 0..g.kh {
            for kx in 0..g.kw {
                list.clear();
                for q in s0..s1 {
                    if let Some((iy, ix)) = g.tap(q % g.oh, q / g.oh, ky, kx) {
                        list.push((g.n * (iy + g.h * ix), g.n * q));
                    }
                }
                if list.is_empty() {
                    continue;
                }
                let kk0 = (ky * g.kw + kx) * g.c;
                for ci0 in (0..g.c).step_by(CI) {
                    let xoff: [usize; CI] = std::array::from_fn(|i| (ci0 + i).min(g.c - 1) * plane);
                    for co0 in (0..g.oc).step_by(CO) {
                        let yoff: [usize; CO] = std::array::from_fn(|j| (co0 + j).min(g.oc - 1) * out_plane);
                        // the accumulators of (kk0 + ci0 + i, co0 + j) for the channels that exist
                        let slot = |i: usize, j: usize| (ci0 + i < g.c && co0 + j < g.oc).then(|| accp.add(((kk0 + ci0 + i) * g.oc + co0 + j) * l));
                        let slots: [[Option<*mut V::T>; CO]; CI] = std::array::from_fn(|i| std::array::from_fn(|j| slot(i, j)));
                        block::<V, CI, CO>(xs, dys, &list, xoff, yoff, g.n, &slots);
                    }
                }
            }
        }
        s0 = s1;
    }
    for (i, sums) in acc.chunks_exact(l).enumerate() {
        *df.add(i) += sums.iter().fold(<V::T as ConvFloat>::ZERO, |s, &v| s + v);
    }
}

/// Adds, for the `(input, output)` pixel offsets of `list` and all `n` images, the products
/// of the `CI` input channels at `xoff` and the `CO` output channels at `yoff` onto the
/// accumulators at `slots` (`None`: a repeated channel whose sums are discarded).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn block<V: Lanes, const CI: usize, const CO: usize>(
    xs: *const V::T,
    dys: *const V::T,
    list: &[(usize, usize)],
    xoff: [usize; CI],
    yoff: [usize; CO],
    n: usize,
    slots: &[[Option<*mut V::T>; CO]; CI],
) {
    let l = V::LANES;
    let mut acc: [[V; CO]; CI] = [[V::zero(); CO]; CI];
    for i in 0..CI {
        for j in 0..CO {
            if let Some(p) = slots[i][j] {
                acc[i][j] = V::load(p);
            }
        }
    }
    for &(xo, yo) in list {
        let (xp, yp) = (xs.add(xo), dys.add(yo));
        let mut b0 = 0;
        while b0 + l <= n {
            let xv: [V; CI] = std::array::from_fn(|i| V::load(xp.add(b0 + xoff[i])));
            for j in 0..CO {
                let d = V::load(yp.add(b0 + yoff[j]));
                for i in 0..CI {
                    acc[i][j] = V::fmadd(xv[i], d, acc[i][j]);
                }
            }
            b0 += l;
        }
        if b0 < n {
            // the last images: masked loads, zeros in the other lanes add nothing
            let rest = n - b0;
            let xv: [V; CI] = std::array::from_fn(|i| V::load_first(xp.add(b0 + xoff[i]), rest));
            for j in 0..CO {
                let d = V::load_first(yp.add(b0 + yoff[j]), rest);
                for i in 0..CI {
                    acc[i][j] = V::fmadd(xv[i], d, acc[i][j]);
                }
            }
        }
    }
    for i in 0..CI {
        for j in 0..CO {
            if let Some(p) = slots[i][j] {
                acc[i][j].store(p);
            }
        }
    }
}
