//! A direct convolution for column-major batches (Julia's arrays): no patch matrix, the
//! batch in SIMD lanes.
//!
//! A column-major `[n, h, w, c]` array stores the batch innermost, so one output pixel's
//! value for `L` consecutive images is `L` consecutive elements, and so is each input pixel
//! under the filter. The kernel keeps an `L x OB` block of the output (images `b0 ..`,
//! output channels `o0 ..`) in vector registers and, for every filter tap inside the image
//! and every input channel, adds the `L` input values times the `OB` filter weights of that
//! tap and channel (one vector load, `OB` broadcasts, `OB` fused multiply-adds): the
//! reduction TF's and oneDNN's direct kernels do over channels in registers, with the batch
//! where they put the channels. `L` is one register (AVX-512: 16 f32 or 8 f64; AVX2: 8 or
//! 4) and `OB` is 8, so the inner loop is one load and eight multiply-adds whose weight is
//! broadcast from memory, with nine of the 16 or 32 vector registers in use. A batch that is
//! not a multiple of `L` ends with a block of masked loads and stores.
//!
//! Against im2col and a BLAS product (the tiled path of `conv_cpu.rs`), this skips writing
//! and rereading `kh kw` copies of the input. On the 2-vCPU AMD EPYC VM (AVX-512), for
//! a 32 × 28 × 28 batch and a 3 × 3 filter, 8 to 16 channels and back, copying patches
//! took a third of the gradients' time; the transposed convolution of the input gradient,
//! with 144-wide patches for an 8-channel output, was the slowest of the three products.
//! There the direct kernel takes the forward convolution from 0.98 to 0.55 ms and both
//! gradients from 3.5 to 2.1 ms on one thread (`docs/performance/peers.md`). The filter
//! gradient, a reduction over the batch and the pixels into a small `[kh kw c, oc]`
//! matrix, has its own kernel in `conv_direct_filter.rs` (a block of input and output
//! channels in registers, the batch in the lanes), which halved that op on one thread.
//!
//! Each output element is the sum over taps (row by row), then channels, in that order,
//! one fused multiply-add at a time, whatever the chunk, thread or vector width: the same
//! bits on every run and with AVX2 or AVX-512. It needs FMA (the `vmath` check, so
//! `OXIFLOW_NO_FMA=1` turns it off too); `OXIFLOW_CONV=im2col` forces the tiled path and
//! `OXIFLOW_CONV=avx2` the 256-bit build (for tests and comparisons).

use super::cpu::Mat;
use super::{ConvFloat, Geometry};
use crate::intra_op::{self, SharedOut};

#[path = "conv_direct_filter.rs"]
mod filter;
pub(super) use filter::backprop_filter_cols;

/// Which build of the direct kernel this process uses, decided once.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Build {
    /// Not available (no FMA, or `OXIFLOW_CONV=im2col`): the tiled im2col path runs.
    None,
    Avx2,
    Avx512,
}

fn build() -> Build {
    use std::sync::OnceLock;
    static BUILD: OnceLock<Build> = OnceLock::new();
    *BUILD.get_or_init(|| {
        let want = std::env::var("OXIFLOW_CONV").unwrap_or_default();
        #[cfg(target_arch = "x86_64")]
        {
            if want == "im2col" || !crate::ops::vmath::has_fma() {
                return Build::None;
            }
            if want != "avx2" && is_x86_feature_detected!("avx512f") {
                return Build::Avx512;
            }
            Build::Avx2
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = want;
            Build::None
        }
    })
}

/// Whether the direct kernels run with 512-bit vectors (else 256-bit); `None` where they
/// are not available.
fn wide() -> Option<bool> {
    match build() {
        Build::None => None,
        Build::Avx2 => Some(false),
        Build::Avx512 => Some(true),
    }
}

/// What a column-major convolution runs on in this process: `"direct AVX-512"`,
/// `"direct AVX2"` or `"im2col"` (see the module's documentation).
pub fn kernel_name() -> &'static str {
    match build() {
        Build::None => "im2col",
        Build::Avx2 => "direct AVX2",
        Build::Avx512 => "direct AVX-512",
    }
}

/// The convolution of `xs` (column-major `[n, h, w, c]`) with the filter matrix `f`
/// (`[kh kw c, oc]`): the column-major `[n, oh, ow, oc]` output, or `None` where the direct
/// kernel is not available (then the caller runs the tiled path).
pub(super) fn forward_cols<T: ConvFloat>(g: &Geometry, xs: &[T], f: Mat<T>) -> Option<Vec<T>> {
    let wide = wide()?;
    let (m, k) = g.patches();
    let len = m * g.oc;
    let fp = pack_filter(g, f);
    let pixels = g.oh * g.ow;
    // chunks of whole pixels, cut as the tiled path cuts its tiles
    let chunks = super::cpu::chunk_count(pixels, m.saturating_mul(k).saturating_mul(g.oc), 4);
    let mut y: Vec<T> = crate::strided::buffer_for(len);
    let out = SharedOut(y.as_mut_ptr());
    intra_op::parallel_for(chunks, |i| {
        // SAFETY: the build was detected on this CPU; xs holds the n h w c input and fp the
        // packed filter; this chunk writes only the outputs of its own pixels.
        unsafe { run_chunk(g, xs, &fp, out, super::cpu::chunk_tiles(i, chunks, pixels), wide) };
    });
    // SAFETY: the chunks cover every pixel, each writing all n oc values of its pixels.
    unsafe { y.set_len(len) };
    Some(y)
}

/// `f` (`[kh kw c, oc]`) as `ceil(oc / OB)` blocks of `[kh kw c, OB]` (row-major, zeros in
/// the columns past `oc`), so that one tap and channel's [`OB`] weights are adjacent.
fn pack_filter<T: ConvFloat>(g: &Geometry, f: Mat<T>) -> Vec<T> {
    let k = g.kh * g.kw * g.c;
    let blocks = g.oc.div_ceil(OB);
    let mut fp = vec![T::ZERO; blocks * k * OB];
    for (i, v) in fp.iter_mut().enumerate() {
        let (blk, kk, j) = (i / (k * OB), i / OB % k, i % OB);
        let o = blk * OB + j;
        if o < g.oc {
            // SAFETY: kk < k and o < oc index the k x oc matrix f describes.
            *v = unsafe { *f.ptr.offset(kk as isize * f.rs + o as isize * f.cs) };
        }
    }
    fp
}

/// Runs pixels `qs` with the build's vectors: 512-bit where `wide` (AVX-512), else 256-bit.
///
/// # Safety
/// The CPU has the build's features; see [`forward_cols`] for the buffers.
unsafe fn run_chunk<T: ConvFloat>(g: &Geometry, xs: &[T], fp: &[T], out: SharedOut<T>, qs: std::ops::Range<usize>, wide: bool) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::any::TypeId;
        let f32s = TypeId::of::<T>() == TypeId::of::<f32>();
        // SAFETY (casts): T is the type the branch checked.
        let (xs, fp, out) = (xs.as_ptr(), fp.as_ptr(), out.0);
        match (wide, f32s) {
            (true, true) => avx512_f32(g, xs.cast(), fp.cast(), out.cast(), qs),
            (true, false) => avx512_f64(g, xs.cast(), fp.cast(), out.cast(), qs),
            (false, true) => avx2_f32(g, xs.cast(), fp.cast(), out.cast(), qs),
            (false, false) => avx2_f64(g, xs.cast(), fp.cast(), out.cast(), qs),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (g, xs, fp, out, qs, wide);
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use std::arch::x86_64::*;

    /// One SIMD register of `LANES` values of `T`: the operations the kernel needs.
    pub(super) trait Lanes: Copy {
        type T: Copy;
        const LANES: usize;
        unsafe fn zero() -> Self;
        unsafe fn load(p: *const Self::T) -> Self;
        unsafe fn splat(p: *const Self::T) -> Self;
        /// `a * b + c`, rounded once per lane.
        unsafe fn fmadd(a: Self, b: Self, c: Self) -> Self;
        unsafe fn store(self, p: *mut Self::T);
        /// The first `n < LANES` values at `p`, zeros in the other lanes (nothing past
        /// `p + n` is read).
        unsafe fn load_first(p: *const Self::T, n: usize) -> Self;
        /// Writes the first `n < LANES` lanes to `p ..` (nothing past `p + n`).
        unsafe fn store_first(self, p: *mut Self::T, n: usize);
    }

    macro_rules! lanes {
        ($name:ident, $reg:ty, $t:ty, $n:expr, $feat:literal, $zero:ident, $load:ident, $splat:ident, $fma:ident, $store:ident,
         |$p:ident, $k:ident| $load_first:expr, |$sp:ident, $sv:ident, $sk:ident| $store_first:expr) => {
            #[derive(Clone, Copy)]
            pub(super) struct $name($reg);
            impl Lanes for $name {
                type T = $t;
                const LANES: usize = $n;
                #[inline]
                #[target_feature(enable = $feat)]
                unsafe fn zero() -> Self {
                    $name($zero())
                }
                #[inline]
                #[target_feature(enable = $feat)]
                unsafe fn load(p: *const $t) -> Self {
                    $name($load(p))
                }
                #[inline]
                #[target_feature(enable = $feat)]
                unsafe fn splat(p: *const $t) -> Self {
                    $name($splat(*p))
                }
                #[inline]
                #[target_feature(enable = $feat)]
                unsafe fn fmadd(a: Self, b: Self, c: Self) -> Self {
                    $name($fma(a.0, b.0, c.0))
                }
                #[inline]
                #[target_feature(enable = $feat)]
                unsafe fn store(self, p: *mut $t) {
                    $store(p, self.0)
                }
                #[inline]
                #[target_feature(enable = $feat)]
                unsafe fn load_first($p: *const $t, $k: usize) -> Self {
                    $name($load_first)
                }
                #[inline]
                #[target_feature(enable = $feat)]
                unsafe fn store_first(self, $sp: *mut $t, $sk: usize) {
                    let $sv = self.0;
                    $store_first
                }
            }
        };
    }
    /// AVX2's lane mask of the first `n` 32-bit lanes.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn first32(n: usize) -> __m256i {
        _mm256_cmpgt_epi32(_mm256_set1_epi32(n as i32), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
    }
    /// AVX2's lane mask of the first `n` 64-bit lanes.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn first64(n: usize) -> __m256i {
        _mm256_cmpgt_epi64(_mm256_set1_epi64x(n as i64), _mm256_setr_epi64x(0, 1, 2, 3))
    }
    lanes!(
        F32x16,
        __m512,
        f32,
        16,
        "avx512f",
        _mm512_setzero_ps,
        _mm512_loadu_ps,
        _mm512_set1_ps,
        _mm512_fmadd_ps,
        _mm512_storeu_ps,
        |p, n| _mm512_maskz_loadu_ps(((1u32 << n) - 1) as u16, p),
        |p, v, n| _mm512_mask_storeu_ps(p, ((1u32 << n) - 1) as u16, v)
    );
    lanes!(
        F64x8,
        __m512d,
        f64,
        8,
        "avx512f",
        _mm512_setzero_pd,
        _mm512_loadu_pd,
        _mm512_set1_pd,
        _mm512_fmadd_pd,
        _mm512_storeu_pd,
        |p, n| _mm512_maskz_loadu_pd(((1u32 << n) - 1) as u8, p),
        |p, v, n| _mm512_mask_storeu_pd(p, ((1u32 << n) - 1) as u8, v)
    );
    lanes!(
        F32x8,
        __m256,
        f32,
        8,
        "avx2,fma",
        _mm256_setzero_ps,
        _mm256_loadu_ps,
        _mm256_set1_ps,
        _mm256_fmadd_ps,
        _mm256_storeu_ps,
        |p, n| _mm256_maskload_ps(p, first32(n)),
        |p, v, n| _mm256_maskstore_ps(p, first32(n), v)
    );
    lanes!(
        F64x4,
        __m256d,
        f64,
        4,
        "avx2,fma",
        _mm256_setzero_pd,
        _mm256_loadu_pd,
        _mm256_set1_pd,
        _mm256_fmadd_pd,
        _mm256_storeu_pd,
        |p, n| _mm256_maskload_pd(p, first64(n)),
        |p, v, n| _mm256_maskstore_pd(p, first64(n), v)
    );
}

#[cfg(target_arch = "x86_64")]
macro_rules! build_fn {
    ($name:ident, $t:ty, $v:ty, $feat:literal) => {
        #[target_feature(enable = $feat)]
        unsafe fn $name(g: &Geometry, xs: *const $t, fp: *const $t, out: *mut $t, qs: std::ops::Range<usize>) {
            pixels::<$v>(g, xs, fp, out, qs)
        }
    };
}
#[cfg(target_arch = "x86_64")]
build_fn!(avx512_f32, f32, simd::F32x16, "avx512f,avx2,fma");
#[cfg(target_arch = "x86_64")]
build_fn!(avx512_f64, f64, simd::F64x8, "avx512f,avx2,fma");
#[cfg(target_arch = "x86_64")]
build_fn!(avx2_f32, f32, simd::F32x8, "avx2,fma");
#[cfg(target_arch = "x86_64")]
build_fn!(avx2_f64, f64, simd::F64x4, "avx2,fma");

/// Output channels per block: one accumulator register each.
const OB: usize = 8;

/// The outputs of pixels `qs` (`q = oy + oh ox`): for each, its taps inside the image,
/// then each block of [`OB`] output channels and `V::LANES` images.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn pixels<V: simd::Lanes>(g: &Geometry, xs: *const V::T, fp: *const V::T, out: *mut V::T, qs: std::ops::Range<usize>) {
    let k = g.kh * g.kw * g.c;
    let (plane, out_plane, l) = (g.n * g.h * g.w, g.n * g.oh * g.ow, V::LANES);
    // (offset of the tap's weights in a filter block, offset of its input pixel in xs)
    let mut taps: Vec<(usize, usize)> = Vec::with_capacity(g.kh * g.kw);
    for q in qs {
        let (oy, ox) = (q % g.oh, q / g.oh);
        taps.clear();
        for ky in 0..g.kh {
            for kx in 0..g.kw {
                if let Some((iy, ix)) = g.tap(oy, ox, ky, kx) {
                    taps.push(((ky * g.kw + kx) * g.c * OB, g.n * (iy + g.h * ix)));
                }
            }
        }
        for blk in 0..g.oc.div_ceil(OB) {
            let fb = fp.add(blk * k * OB);
            let outs = OB.min(g.oc - blk * OB);
            let mut b0 = 0;
            while b0 + l <= g.n {
                let acc = block::<V, true>(xs.add(b0), fb, &taps, g.c, plane, l);
                let y = out.add(b0 + g.n * q + blk * OB * out_plane);
                for (j, a) in acc.iter().enumerate().take(outs) {
                    a.store(y.add(j * out_plane));
                }
                b0 += l;
            }
            if b0 < g.n {
                // the last images: masked loads and stores of the first `rest` lanes
                let rest = g.n - b0;
                let acc = block::<V, false>(xs.add(b0), fb, &taps, g.c, plane, rest);
                let y = out.add(b0 + g.n * q + blk * OB * out_plane);
                for (j, a) in acc.iter().enumerate().take(outs) {
                    a.store_first(y.add(j * out_plane), rest);
                }
            }
        }
    }
}

/// The [`OB`] sums of one block of `V::LANES` images (the first `rest` of them, zeros in
/// the other lanes, unless `FULL`): for each tap, for each input channel, the images'
/// input times the channel's `OB` weights.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn block<V: simd::Lanes, const FULL: bool>(x: *const V::T, fb: *const V::T, taps: &[(usize, usize)], c: usize, plane: usize, rest: usize) -> [V; OB] {
    let mut acc = [V::zero(); OB];
    for &(fo, xo) in taps {
        let (mut xp, mut wp) = (x.add(xo), fb.add(fo));
        for _ in 0..c {
            let xv = if FULL { V::load(xp) } else { V::load_first(xp, rest) };
            for (j, a) in acc.iter_mut().enumerate() {
                *a = V::fmadd(xv, V::splat(wp.add(j)), *a);
            }
            xp = xp.add(plane);
            wp = wp.add(OB);
        }
    }
    acc
}
