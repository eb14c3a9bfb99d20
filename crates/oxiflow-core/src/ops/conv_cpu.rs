//! The CPU kernels of `Conv2D`, `Conv2DBackpropInput` and `Conv2DBackpropFilter`: im2col and
//! GEMM done a tile of output pixels at a time.
//!
//! A tile's patch matrix (its pixels' inputs under the filter, tap by tap, channels
//! innermost) is written into a scratch buffer of about [`TILE_BYTES`], which stays in the
//! core's L2 cache for the single-threaded BLAS product that reads it right after; the
//! product writes the tile's rows of the output directly. Tiles are spread over the intra-op
//! threads, the calling one included ([`crate::intra_op::parallel_for`]). So the patch
//! matrix of the whole batch (kh kw times the input: 7 MiB for a 32 × 28 × 28 × 8 batch and
//! a 3 × 3 filter) is never made, and neither its fresh pages nor its trip through memory
//! are paid for: that was about half of the forward convolution's time (the same layout
//! Caffe's and TF's `Im2ColConvFunctor` use, which also patches a chunk at a time).
//!
//! - Forward: `y[tile] = patches[tile] @ F`, `F` the filter as a `[kh kw c, oc]` matrix.
//! - Filter gradient: `dF = sum over tiles of patches[tile]^T @ dy[tile]`, each chunk of
//!   tiles summing into its own `[kh kw c, oc]` buffer, the buffers added in chunk order (the
//!   result does not depend on which thread ran a chunk). A column-major batch takes the
//!   direct kernel of `conv_direct_filter.rs` instead where the CPU has it.
//! - Input gradient: the convolution of `dy` with the filter turned by 180° and its channel
//!   axes swapped, padded `kh - 1 - pad_top` above and `kw - 1 - pad_left` on the left (the
//!   transposed convolution), through the forward kernel: no scatter. With strides `s > 1`
//!   the transposed convolution reads `dy` dilated by `s` (`s - 1` zeros between its pixels,
//!   [`Geometry`]'s `dh`, `dw`), which the column-major kernels do by skipping the taps that
//!   fall between pixels; in row-major order it is `dy[tile] @ F^T` instead, added back onto
//!   the input pixels each patch row came from (col2im), one image per chunk so that no two
//!   threads add onto the same pixel.

use super::{ConvFloat, Geometry};
use crate::intra_op::{self, SharedOut};
use crate::ops::blas::{self, Operand};

/// The size a tile's patch matrix aims at: below glibc's 128 KiB `mmap` threshold, so the
/// scratch buffer is reused heap memory, and within a core's L2 cache.
const TILE_BYTES: usize = 96 * 1024;

/// The fewest rows a tile has, whatever its patch width, so that each product stays large
/// enough for BLAS's kernels.
const MIN_TILE_ROWS: usize = 32;

/// Convolutions of fewer multiply-adds run on the calling thread alone.
const PARALLEL_MIN_MACS: usize = 1 << 18;

/// A read-only strided matrix: element `(i, j)` at `ptr + i rs + j cs`.
#[derive(Clone, Copy)]
pub(super) struct Mat<T> {
    pub ptr: *const T,
    pub rs: isize,
    pub cs: isize,
}
// SAFETY: a Mat only describes memory that the kernel keeps alive and does not write while
// the tiles read it from the intra-op threads.
unsafe impl<T> Send for Mat<T> {}
unsafe impl<T> Sync for Mat<T> {}

impl<T> Mat<T> {
    /// A row-major matrix of `cols` columns.
    pub fn rows(ptr: *const T, cols: usize) -> Self {
        Mat { ptr, rs: cols as isize, cs: 1 }
    }
    fn t(self) -> Self {
        Mat { ptr: self.ptr, rs: self.cs, cs: self.rs }
    }
    fn offset_rows(self, r: usize) -> Self {
        Mat { ptr: self.ptr.wrapping_offset(r as isize * self.rs), ..self }
    }
}

/// The memory order of a convolution's input and output, which fixes the order of the
/// pixels in a tile.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Order {
    /// Row-major `[n, h, w, c]` (TF's NHWC): channels innermost; pixels `(b, y, x)` with `x`
    /// fastest; a tile's patches are a row-major `rows x k` matrix.
    Rows,
    /// Column-major `[n, h, w, c]` (a Julia array): the batch innermost; pixels `b + n (y +
    /// oh x)`, `b` fastest; a tile's patches are stored transposed (`k x rows`, row-major),
    /// each of their rows copied from the input in runs of up to `n` elements.
    Cols,
}

/// `c = a @ b` (or `c += a @ b` when `acc`), `a` `m x k`, `b` `k x n`, `c` row-major with
/// row stride `ldc`: one single-threaded product by the loaded BLAS, else by the `gemm` crate.
///
/// # Safety
/// The operands describe live memory of their shapes; `c` is valid for the writes and
/// aliases neither.
#[allow(clippy::too_many_arguments)] // a GEMM's own parameters
unsafe fn tile_gemm<T: ConvFloat>(m: usize, n: usize, k: usize, a: Mat<T>, b: Mat<T>, c: *mut T, ldc: usize, acc: bool) {
    if let Some(lib) = blas::blas() {
        if let (Some(oa), Some(ob)) = (Operand::new(a.ptr, m, k, a.rs, a.cs), Operand::new(b.ptr, k, n, b.rs, b.cs)) {
            T::gemm_beta(lib, m, n, k, oa, ob, c, ldc, if acc { T::ONE } else { T::ZERO });
            return;
        }
    }
    // dst = 1 dst + 1 a b when read_dst, else a b
    gemm::gemm(m, n, k, c, 1, ldc as isize, acc, a.ptr, a.cs, a.rs, b.ptr, b.cs, b.rs, T::ONE, T::ONE, false, false, false, gemm::Parallelism::None);
}

/// Rows per tile for a patch matrix `k` wide.
fn tile_rows<T>(k: usize) -> usize {
    (TILE_BYTES / std::mem::size_of::<T>() / k.max(1)).max(MIN_TILE_ROWS)
}

/// Rows `p0 .. p0 + buf.len() / k` of the patch matrix of `xs` (row-major `[n, h, w, c]`)
/// into `buf`: row `(b, oy, ox)` holds the pixels under the filter, tap by tap, channels
/// innermost, zeros where a tap falls in the padding.
fn fill_patches<T: ConvFloat>(g: &Geometry, xs: &[T], p0: usize, buf: &mut [T]) {
    debug_assert!(g.dh == 1 && g.dw == 1, "row-major patches of a dilated input");
    let k = g.kh * g.kw * g.c;
    let span = g.kw * g.c;
    let plane = g.oh * g.ow;
    for (r, row) in buf.chunks_exact_mut(k).enumerate() {
        let p = p0 + r;
        let (b, oy, ox) = (p / plane, p % plane / g.ow, p % g.ow);
        let x0 = (ox * g.sw) as isize - g.pl as isize;
        for (ky, dst) in row.chunks_exact_mut(span).enumerate() {
            let Some(iy) = (oy * g.sh + ky).checked_sub(g.pt).filter(|&v| v < g.h) else {
                dst.fill(T::ZERO);
                continue;
            };
            let base = (b * g.h + iy) * g.w;
            if x0 >= 0 && x0 as usize + g.kw <= g.w {
                let s = (base + x0 as usize) * g.c;
                dst.copy_from_slice(&xs[s..s + span]);
                continue;
            }
            for (kx, d) in dst.chunks_exact_mut(g.c).enumerate() {
                let ix = x0 + kx as isize;
                if ix >= 0 && (ix as usize) < g.w {
                    let s = (base + ix as usize) * g.c;
                    d.copy_from_slice(&xs[s..s + g.c]);
                } else {
                    d.fill(T::ZERO);
                }
            }
        }
    }
}

/// Patches `p0 .. p0 + r` of `xs` (column-major `[n, h, w, c]`) into `buf` transposed
/// (`k x r`, row-major): row `(ky, kx, ci)` holds that tap's input channel for pixels `p0 ..`
/// (`p = b + n (oy + oh ox)`), zeros where the tap falls in the padding.
fn fill_patches_cols<T: ConvFloat>(g: &Geometry, xs: &[T], p0: usize, r: usize, buf: &mut [T]) {
    let k = g.kh * g.kw * g.c;
    for (kk, dst) in buf[..k * r].chunks_exact_mut(r).enumerate() {
        let (ky, kx, ci) = (kk / (g.kw * g.c), kk / g.c % g.kw, kk % g.c);
        let mut j = 0;
        while j < r {
            let p = p0 + j;
            let (b, q) = (p % g.n, p / g.n);
            let run = (g.n - b).min(r - j);
            let d = &mut dst[j..j + run];
            match g.tap(q % g.oh, q / g.oh, ky, kx) {
                Some((iy, ix)) => {
                    let s = b + g.n * (iy + g.h * (ix + g.w * ci));
                    d.copy_from_slice(&xs[s..s + run]);
                }
                None => d.fill(T::ZERO),
            }
            j += run;
        }
    }
}

/// One tile's patches in `order`'s layout: `buf`'s first `r k` elements, and the patch
/// matrix's transpose (`k x r`) as a [`Mat`] over them.
fn tile_patches<T: ConvFloat>(g: &Geometry, xs: &[T], order: Order, p0: usize, r: usize, buf: &mut [T]) -> Mat<T> {
    let k = g.kh * g.kw * g.c;
    match order {
        Order::Rows => {
            fill_patches(g, xs, p0, &mut buf[..r * k]);
            Mat::rows(buf.as_ptr(), k).t()
        }
        Order::Cols => {
            fill_patches_cols(g, xs, p0, r, buf);
            Mat::rows(buf.as_ptr(), r)
        }
    }
}

/// How many chunks `tiles` tiles of a convolution of `macs` multiply-adds are run in.
pub(super) fn chunk_count(tiles: usize, macs: usize, per_thread: usize) -> usize {
    if macs < PARALLEL_MIN_MACS {
        1
    } else {
        tiles.min(per_thread * intra_op::intra_op_threads()).max(1)
    }
}

/// The tiles of chunk `i` of `chunks` over `tiles` tiles.
pub(super) fn chunk_tiles(i: usize, chunks: usize, tiles: usize) -> std::ops::Range<usize> {
    let per = tiles.div_ceil(chunks);
    (i * per).min(tiles)..((i + 1) * per).min(tiles)
}

/// How a convolution's patch matrix is cut: tiles of `rows` pixels, run in `chunks` chunks.
#[derive(Clone, Copy)]
struct Tiling {
    rows: usize,
    tiles: usize,
    chunks: usize,
}

impl Tiling {
    /// The tiling of `g`'s patch matrix for a kernel of `macs` multiply-adds and up to
    /// `per_thread` chunks per intra-op thread.
    fn of<T>(g: &Geometry, macs: usize, per_thread: usize) -> Self {
        let (m, k) = g.patches();
        let rows = tile_rows::<T>(k).min(m).max(1);
        let tiles = m.div_ceil(rows);
        Tiling { rows, tiles, chunks: chunk_count(tiles, macs, per_thread) }
    }

    /// Runs `f(p0, r, patches)` for each tile of chunk `i` of `xs`'s patch matrix:
    /// `patches` is the tile's `k x r` transposed patch matrix in a scratch buffer the
    /// chunk reuses from tile to tile.
    fn each<T: ConvFloat>(self, g: &Geometry, xs: &[T], order: Order, i: usize, mut f: impl FnMut(usize, usize, Mat<T>)) {
        let (m, k) = g.patches();
        let mut buf = vec![T::ZERO; self.rows * k];
        for t in chunk_tiles(i, self.chunks, self.tiles) {
            let p0 = t * self.rows;
            let r = self.rows.min(m - p0);
            f(p0, r, tile_patches(g, xs, order, p0, r, &mut buf));
        }
    }
}

/// The convolution of `xs` (`[n, h, w, c]` in `order`) with the filter matrix `f`
/// (`[kh kw c, oc]`): the `[n, oh, ow, oc]` output's elements in the same order. In
/// [`Order::Cols`] the direct kernel (`conv_direct.rs`) computes it where the CPU has it,
/// else the tiles below.
pub(super) fn forward<T: ConvFloat>(g: &Geometry, xs: &[T], order: Order, f: Mat<T>) -> Vec<T> {
    let (m, k) = g.patches();
    let len = m * g.oc;
    if k == 0 || len == 0 {
        return vec![T::ZERO; len];
    }
    if order == Order::Cols {
        if let Some(y) = super::direct::forward_cols(g, xs, f) {
            return y;
        }
    }
    let tiling = Tiling::of::<T>(g, len.saturating_mul(k), 4);
    let mut y: Vec<T> = crate::strided::buffer_for(len);
    let out = SharedOut(y.as_mut_ptr());
    intra_op::parallel_for(tiling.chunks, |i| {
        tiling.each(g, xs, order, i, |p0, r, pt| {
            // SAFETY: pt is the tile's k x r transposed patches; pixels p0 .. p0 + r of y
            // (rows of the row-major m x oc matrix, or columns of the column-major one's
            // oc x m transpose) are written by this tile alone.
            unsafe {
                match order {
                    Order::Rows => tile_gemm(r, g.oc, k, pt.t(), f, out.at(p0 * g.oc), g.oc, false),
                    Order::Cols => tile_gemm(g.oc, r, k, f.t(), pt, out.at(p0), m, false),
                }
            }
        })
    });
    // SAFETY: the tiles cover rows 0 .. m, and each product (beta = 0) wrote its rows in full.
    unsafe { y.set_len(len) };
    y
}

/// The gradient of the convolution with respect to its filter: the row-major
/// `[kh kw c, oc]` matrix `patches^T @ dy`, `xs` the input and `dys` the `[n, oh, ow, oc]`
/// output gradient, both in `order`.
pub(super) fn backprop_filter<T: ConvFloat>(g: &Geometry, xs: &[T], order: Order, dys: &[T]) -> Vec<T> {
    let (m, k) = g.patches();
    let len = k * g.oc;
    if m == 0 || len == 0 {
        return vec![T::ZERO; len];
    }
    if order == Order::Cols {
        if let Some(df) = super::direct::backprop_filter_cols(g, xs, dys) {
            return df;
        }
    }
    // dy as the [n oh ow, oc] matrix, its pixels in order's order
    let dy = match order {
        Order::Rows => Mat::rows(dys.as_ptr(), g.oc),
        Order::Cols => Mat { ptr: dys.as_ptr(), rs: 1, cs: m as isize },
    };
    let tiling = Tiling::of::<T>(g, m.saturating_mul(len), 1);
    let mut parts: Vec<Vec<T>> = (0..tiling.chunks).map(|_| vec![T::ZERO; len]).collect();
    intra_op::parallel_for_each(parts.iter_mut().enumerate().collect(), |(i, part)| {
        tiling.each(g, xs, order, i, |p0, r, pt| {
            // SAFETY: pt is the tile's k x r transposed patches; dy's rows p0 .. p0 + r exist;
            // part is this chunk's own k x oc sum.
            unsafe { tile_gemm(k, g.oc, r, pt, dy.offset_rows(p0), part.as_mut_ptr(), g.oc, true) };
        })
    });
    sum_parts(parts)
}

/// The sum of the chunks' `parts` (at least one), added in chunk order.
pub(super) fn sum_parts<T: ConvFloat>(parts: Vec<Vec<T>>) -> Vec<T> {
    let mut parts = parts.into_iter();
    let mut sum = parts.next().expect("at least one chunk");
    for p in parts {
        sum.iter_mut().zip(&p).for_each(|(d, &v)| *d += v);
    }
    sum
}

/// The gradient of the convolution with respect to its input (`[n, h, w, c]` in `order`):
/// `dys` is the `[n, oh, ow, oc]` output gradient in `order`, `f` the filter as a
/// `[kh, kw, c, oc]` element function, `fm` as a `[kh kw c, oc]` matrix.
pub(super) fn backprop_input<T: ConvFloat>(g: &Geometry, dys: &[T], order: Order, f: impl Fn(usize, usize, usize, usize) -> T, fm: Mat<T>) -> Vec<T> {
    if order == Order::Cols || (g.sh == 1 && g.sw == 1) {
        // the transposed convolution: dy dilated by the strides, padded kh - 1 - pt above,
        // the filter turned (the row-major patches take undilated inputs only)
        let (dh, dw) = (g.sh, g.sw);
        let gt = Geometry { h: g.oh, w: g.ow, c: g.oc, oc: g.c, oh: g.h, ow: g.w, sh: 1, sw: 1, pt: g.kh - 1 - g.pt, pl: g.kw - 1 - g.pl, dh, dw, ..*g };
        let mut ft = Vec::with_capacity(g.kh * g.kw * g.oc * g.c);
        for ky in 0..g.kh {
            for kx in 0..g.kw {
                for co in 0..g.oc {
                    ft.extend((0..g.c).map(|ci| f(g.kh - 1 - ky, g.kw - 1 - kx, ci, co)));
                }
            }
        }
        return forward(&gt, dys, order, Mat::rows(ft.as_ptr(), g.c));
    }
    let (m, k) = g.patches();
    let image = g.h * g.w * g.c;
    let mut dx = vec![T::ZERO; g.n * image];
    if k == 0 || m == 0 || g.oc == 0 {
        return dx;
    }
    let plane = g.oh * g.ow;
    let rows = tile_rows::<T>(k).min(plane);
    let serial = m.saturating_mul(k).saturating_mul(g.oc) < PARALLEL_MIN_MACS;
    let per_image = |b: usize, dxb: &mut [T]| {
        let mut buf = vec![T::ZERO; rows * k];
        for r0 in (0..plane).step_by(rows) {
            let r = rows.min(plane - r0);
            let p0 = b * plane + r0;
            // SAFETY: dy's rows p0 .. p0 + r exist; buf has room for the r x k product.
            unsafe { tile_gemm(r, k, g.oc, Mat::rows(dys.as_ptr(), g.oc).offset_rows(p0), fm.t(), buf.as_mut_ptr(), k, false) };
            col2im_rows(g, &buf[..r * k], r0, dxb);
        }
    };
    if serial {
        dx.chunks_mut(image).enumerate().for_each(|(b, d)| per_image(b, d));
    } else {
        intra_op::parallel_for_each(dx.chunks_mut(image).enumerate().collect(), |(b, d)| per_image(b, d));
    }
    dx
}

/// Adds patch rows `r0 ..` of one image (`rows`, `k` wide) onto the pixels of that image's
/// input gradient `dxb` (row-major `[h, w, c]`) they came from.
fn col2im_rows<T: ConvFloat>(g: &Geometry, rows: &[T], r0: usize, dxb: &mut [T]) {
    let k = g.kh * g.kw * g.c;
    for (i, row) in rows.chunks_exact(k).enumerate() {
        let (oy, ox) = ((r0 + i) / g.ow, (r0 + i) % g.ow);
        for ky in 0..g.kh {
            for kx in 0..g.kw {
                if let Some((iy, ix)) = g.tap(oy, ox, ky, kx) {
                    let dst = (iy * g.w + ix) * g.c;
                    let src = (ky * g.kw + kx) * g.c;
                    dxb[dst..dst + g.c].iter_mut().zip(&row[src..src + g.c]).for_each(|(d, &s)| *d += s);
                }
            }
        }
    }
}
