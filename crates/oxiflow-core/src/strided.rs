//! Copies between strided buffers without a per-element walk in logical order: the axes
//! are ordered by the destination's strides and merged where both sides are contiguous,
//! so a buffer already in the destination's order is one `memcpy`, a buffer contiguous
//! along rows is copied a row at a time, and a transposition (a row-major tensor handed
//! to column-major Julia) is done in cache-sized tiles.

use crate::error::{OxiflowError, Result};

/// Side of a square tile of the blocked transpose, in elements: two tiles of 8-byte
/// elements (source and destination) take 16 KiB, within any L1 data cache.
const TILE: usize = 32;

/// One axis of a copy: its length and the source and destination strides in elements.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Axis {
    len: usize,
    src: isize,
    dst: isize,
}

/// Strides in elements of a dense buffer of `dims`: `[1, d0, d0*d1, ...]` when
/// `column_major`, else row-major (`[..., d2*d1, d2, 1]`). For the dims of an existing
/// buffer (see [`element_count`] for untrusted dims); axes of length 0 count as 1.
pub fn dense_strides(dims: &[usize], column_major: bool) -> Vec<isize> {
    let mut strides = vec![0isize; dims.len()];
    let mut acc: isize = 1;
    let mut set = |k: usize| {
        strides[k] = acc;
        acc = acc.wrapping_mul(dims[k].max(1) as isize);
    };
    if column_major {
        (0..dims.len()).for_each(&mut set);
    } else {
        (0..dims.len()).rev().for_each(&mut set);
    }
    strides
}

/// Number of elements of `dims` when a buffer of them, `elem_size` bytes each, fits in
/// the address space (TF's limit on a tensor is the same). Errors name the dims.
pub fn element_count(dims: &[usize], elem_size: usize) -> Result<usize> {
    let n = dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    n.filter(|&n| n.checked_mul(elem_size.max(1)).is_some_and(|b| b <= isize::MAX as usize))
        .ok_or_else(|| OxiflowError::InvalidArgument(format!("a tensor of shape {dims:?} is too large to address")))
}

/// Buffers of at least this many bytes are advised to use transparent huge pages.
const HUGE_PAGE_MIN_BYTES: usize = 4 << 20;

/// An empty vector with room for `n` elements, about to be filled by a copy. On Linux a
/// large one (≥ 4 MiB) is advised to use transparent huge pages (`MADV_HUGEPAGE`) before
/// its first write: a buffer above glibc's `mmap` threshold is fresh memory every time,
/// and faulting it in 4 KiB pages cost more than the copy itself (a 32 MiB feed: 26 ms
/// against 8 ms with the advice, on the project's VM). A hint only: nothing changes where
/// huge pages are off.
pub fn buffer_for<T>(n: usize) -> Vec<T> {
    advise_huge_pages(Vec::with_capacity(n))
}

/// [`buffer_for`] that returns `None` where the host cannot give `n` elements (the caller
/// reports it as an OOM error) instead of aborting the process.
pub fn try_buffer_for<T>(n: usize) -> Option<Vec<T>> {
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(n).ok()?;
    Some(advise_huge_pages(v))
}

/// Advises the empty vector `v`'s capacity to use transparent huge pages when it is large.
fn advise_huge_pages<T>(v: Vec<T>) -> Vec<T> {
    let n = v.capacity();
    #[cfg(target_os = "linux")]
    {
        let bytes = n.saturating_mul(std::mem::size_of::<T>());
        if bytes >= HUGE_PAGE_MIN_BYTES {
            extern "C" {
                fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: i32) -> i32;
            }
            const MADV_HUGEPAGE: i32 = 14;
            const HUGE: usize = 2 << 20;
            let start = (v.as_ptr() as usize).next_multiple_of(HUGE);
            let end = (v.as_ptr() as usize + bytes) & !(HUGE - 1);
            if end > start {
                // SAFETY: the range lies inside the vector's own allocation; the advice
                // changes how pages are backed, never their contents.
                unsafe { madvise(start as *mut std::ffi::c_void, end - start, MADV_HUGEPAGE) };
            }
        }
    }
    v
}

/// Whether `a` (any element type and rank) is stored column-major and not also row-major:
/// a Julia array of rank 2 or more, fed or held by a variable, and what kernels that keep
/// Julia's order make from one. False for rank 0 and 1 (both orders at once) and for
/// strided or broadcast views. Kernels that follow it keep their output in that order, so
/// a fetch hands it to Julia without a transposing copy (TF's kernels are row-major only).
pub fn is_column_major<S: ndarray::Data, D: ndarray::Dimension>(a: &ndarray::ArrayBase<S, D>) -> bool {
    a.ndim() >= 2 && !a.is_standard_layout() && a.t().is_standard_layout()
}

/// A copy of `a` in standard (row-major) layout, made with [`copy_strided`]: one `memcpy`
/// when `a` already is, contiguous runs or tiles otherwise (`ndarray`'s
/// `as_standard_layout` walks a non-standard array element by element in logical order).
pub fn standard_copy<T: Copy>(a: &ndarray::ArrayViewD<'_, T>) -> ndarray::ArrayD<T> {
    dense_copy(a, false)
}

/// `a` in standard (row-major) layout: `a` itself, borrowed, when it already is, else a
/// [`standard_copy`] (blocked transposes for Julia's column-major arrays). For kernels that
/// walk their input as one row-major slice.
pub fn row_major<'a, T: Copy>(a: ndarray::ArrayViewD<'a, T>) -> ndarray::CowArray<'a, T, ndarray::IxDyn> {
    if a.is_standard_layout() {
        a.into()
    } else {
        standard_copy(&a).into()
    }
}

/// A copy of `a` (any strides, broadcast ones of 0 included) in a new dense array,
/// column-major when `column_major`, else row-major, made with [`copy_strided`].
pub fn dense_copy<T: Copy>(a: &ndarray::ArrayViewD<'_, T>, column_major: bool) -> ndarray::ArrayD<T> {
    use ndarray::ShapeBuilder;
    let n = a.len();
    let mut v: Vec<T> = buffer_for(n);
    // SAFETY: `a`'s strides address its own elements; `v` has room for the `n` elements of
    // the dense destination, every one of which the copy writes.
    unsafe {
        copy_strided(a.shape(), a.as_ptr(), a.strides(), v.as_mut_ptr(), &dense_strides(a.shape(), column_major));
        v.set_len(n);
    }
    let dims = ndarray::IxDyn(a.shape());
    // SAFETY: `v` holds exactly the elements of `a.shape()` in the order asked for.
    unsafe {
        if column_major {
            ndarray::ArrayD::from_shape_vec_unchecked(dims.f(), v)
        } else {
            ndarray::ArrayD::from_shape_vec_unchecked(dims, v)
        }
    }
}

/// The axes of a copy in the order that makes it cheapest: axes of length 1 dropped, the
/// rest sorted by destination stride (fastest first), neighbours merged where both the
/// source and the destination step over the first with the second's stride.
fn plan(dims: &[usize], src: &[isize], dst: &[isize]) -> Vec<Axis> {
    let mut axes: Vec<Axis> = (0..dims.len()).filter(|&k| dims[k] != 1).map(|k| Axis { len: dims[k], src: src[k], dst: dst[k] }).collect();
    axes.sort_by_key(|a| (a.dst.unsigned_abs(), a.src.unsigned_abs()));
    let mut merged: Vec<Axis> = Vec::with_capacity(axes.len());
    for a in axes {
        match merged.last_mut() {
            Some(m) if a.src == m.src * m.len as isize && a.dst == m.dst * m.len as isize => m.len *= a.len,
            _ => merged.push(a),
        }
    }
    merged
}

/// Copies the `dims` elements of a strided source into a strided destination, both given
/// by the address of their element `[0, 0, ...]` and their strides in elements (negative
/// strides allowed): element `[i, j, ...]` of the source lands at `[i, j, ...]` of the
/// destination. Runs contiguous on both sides are copied with `memcpy`.
///
/// # Safety
/// Every element the strides reach from `src` for `dims` must be readable and every one
/// they reach from `dst` writable; the destination elements must be distinct and must
/// not overlap the source.
pub unsafe fn copy_strided<T: Copy>(dims: &[usize], src: *const T, src_strides: &[isize], dst: *mut T, dst_strides: &[isize]) {
    copy_impl::<T, T, _, true>(dims, src, src_strides, dst, dst_strides, |x| x)
}

/// [`copy_strided`] with each element converted by `f` on the way (Bool bytes from C to
/// `bool`), visiting the elements in the same cache-friendly order.
///
/// # Safety
/// As for [`copy_strided`].
pub unsafe fn convert_strided<S: Copy, D: Copy>(
    dims: &[usize],
    src: *const S,
    src_strides: &[isize],
    dst: *mut D,
    dst_strides: &[isize],
    f: impl Fn(S) -> D + Copy,
) {
    copy_impl::<S, D, _, false>(dims, src, src_strides, dst, dst_strides, f)
}

/// The copy; `RAW` says `f` is the identity on one type, so contiguous runs may be copied
/// bytewise.
unsafe fn copy_impl<S: Copy, D: Copy, F: Fn(S) -> D + Copy, const RAW: bool>(
    dims: &[usize],
    src: *const S,
    src_strides: &[isize],
    dst: *mut D,
    dst_strides: &[isize],
    f: F,
) {
    if dims.contains(&0) {
        return;
    }
    let axes = plan(dims, src_strides, dst_strides);
    let Some((inner, outer)) = axes.split_first() else {
        *dst = f(*src);
        return;
    };
    // the source axis with the smallest step, when it is contiguous: the partner of the
    // destination's contiguous axis in a tiled transpose
    let partner = outer.iter().position(|a| a.src.unsigned_abs() == 1);
    let inner = *inner;
    match partner {
        Some(p) if inner.src.unsigned_abs() != 1 => {
            let pa = outer[p];
            let rest: Vec<Axis> = outer.iter().enumerate().filter(|&(k, _)| k != p).map(|(_, a)| *a).collect();
            for_each_offset(&rest, |so, d| transpose_tiles::<S, D, F, RAW>(inner, pa, src.offset(so), dst.offset(d), f));
        }
        _ => for_each_offset(outer, |so, d| run::<S, D, F, RAW>(inner, src.offset(so), dst.offset(d), f)),
    }
}

/// Calls `body(src_offset, dst_offset)` for every index of `axes` (the outer loops of a
/// copy), odometer style.
unsafe fn for_each_offset(axes: &[Axis], mut body: impl FnMut(isize, isize)) {
    let mut idx = vec![0usize; axes.len()];
    let (mut so, mut d) = (0isize, 0isize);
    loop {
        body(so, d);
        let mut k = 0;
        loop {
            if k == axes.len() {
                return;
            }
            idx[k] += 1;
            so += axes[k].src;
            d += axes[k].dst;
            if idx[k] < axes[k].len {
                break;
            }
            so -= axes[k].src * axes[k].len as isize;
            d -= axes[k].dst * axes[k].len as isize;
            idx[k] = 0;
            k += 1;
        }
    }
}

/// One run along an axis: a `memcpy` when both sides are contiguous and `RAW`, a fill when
/// the source stays on one element (a broadcast) and the destination is contiguous, else an
/// element loop (which the compiler vectorizes when both sides are contiguous).
#[inline]
unsafe fn run<S: Copy, D: Copy, F: Fn(S) -> D, const RAW: bool>(a: Axis, src: *const S, dst: *mut D, f: F) {
    if a.src == 1 && a.dst == 1 {
        if RAW {
            std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, a.len * std::mem::size_of::<S>());
        } else {
            let (s, d) = (std::slice::from_raw_parts(src, a.len), std::slice::from_raw_parts_mut(dst, a.len));
            for (d, &s) in d.iter_mut().zip(s) {
                *d = f(s);
            }
        }
        return;
    }
    if a.src == 0 && a.dst == 1 {
        // one source element along a contiguous run (a broadcast): a fill, which the
        // compiler turns into vector stores (the strided loop reloaded the element and
        // stored it one lane at a time; `BroadcastTo` of a scalar to 1024² f32, traced
        // minimum: 0.23-0.32 ms before, 0.15-0.20 after)
        let v = f(*src);
        for i in 0..a.len {
            dst.add(i).write(v);
        }
        return;
    }
    for i in 0..a.len as isize {
        *dst.offset(i * a.dst) = f(*src.offset(i * a.src));
    }
}

/// A 2-D transpose: `i` runs along `a` (contiguous in the destination), `j` along `b`
/// (contiguous in the source). With unit steps on both (the usual case: a row-major
/// tensor fetched into a column-major array) it goes through square micro-tiles one cache
/// line wide ([`transpose_lines`]); otherwise (a reversed axis) in [`TILE`]-square tiles
/// of plain loops.
unsafe fn transpose_tiles<S: Copy, D: Copy, F: Fn(S) -> D + Copy, const RAW: bool>(a: Axis, b: Axis, src: *const S, dst: *mut D, f: F) {
    if a.dst == 1 && b.src == 1 {
        match std::mem::size_of::<D>() {
            8 => return transpose_lines::<S, D, F, 8, RAW>(a, b, src, dst, f),
            4 => return transpose_lines::<S, D, F, 16, RAW>(a, b, src, dst, f),
            1 => return transpose_lines::<S, D, F, 64, RAW>(a, b, src, dst, f),
            _ => {}
        }
    }
    transpose_plain(a, b, (0, a.len), (0, b.len), src, dst, f);
}

/// The transpose of the rectangle `i` in `is`, `j` in `js` with plain loops, in
/// [`TILE`]-square tiles.
unsafe fn transpose_plain<S: Copy, D: Copy>(a: Axis, b: Axis, is: (usize, usize), js: (usize, usize), src: *const S, dst: *mut D, f: impl Fn(S) -> D) {
    let mut j0 = js.0;
    while j0 < js.1 {
        let nj = TILE.min(js.1 - j0);
        let mut i0 = is.0;
        while i0 < is.1 {
            let ni = TILE.min(is.1 - i0);
            let s = src.offset(i0 as isize * a.src + j0 as isize * b.src);
            let d = dst.offset(i0 as isize * a.dst + j0 as isize * b.dst);
            for j in 0..nj as isize {
                let (sj, dj) = (s.offset(j * b.src), d.offset(j * b.dst));
                for i in 0..ni as isize {
                    *dj.offset(i * a.dst) = f(*sj.offset(i * a.src));
                }
            }
            i0 += ni;
        }
        j0 += nj;
    }
}

/// Side of the square blocks [`transpose_lines`] goes through one after another, in
/// elements (a block of 8-byte elements is 512 KiB, within L2 or L3 with its
/// destination).
const BLOCK: usize = 256;

/// The transpose with unit steps (`a.dst == 1`, `b.src == 1`) in [`BLOCK`]-square
/// blocks, in the source's order, each made of `K`×`K` micro-tiles: a tile reads `K`
/// source rows and writes `K` destination columns of `K` elements, one 64-byte cache
/// line each, through a tile on the stack (a fixed-size loop the compiler unrolls).
/// Plain 32×32 tiles took 3.7 ns per element for a 1024² f64 fetch (power-of-two row
/// lengths map a tile's rows onto the same L1 sets); these take about 1 ns (timed
/// against K from 4 to 32 and blocks from 32 to 512, column and row block orders). A
/// copy of one 4-byte type unchanged (`RAW`: `f32`, `i32`) moves each micro-tile through
/// vector registers instead ([`crate::transpose_block`]): 0.74 -> 0.55 ns per element at
/// 1024², 0.64 -> 0.25 at 1000². The ragged edges go through [`transpose_plain`].
unsafe fn transpose_lines<S: Copy, D: Copy, F: Fn(S) -> D + Copy, const K: usize, const RAW: bool>(a: Axis, b: Axis, src: *const S, dst: *mut D, f: F) {
    let (ni, nj) = (a.len / K * K, b.len / K * K);
    for i0 in (0..ni).step_by(BLOCK) {
        for j0 in (0..nj).step_by(BLOCK) {
            for i in (i0..(i0 + BLOCK).min(ni)).step_by(K) {
                for j in (j0..(j0 + BLOCK).min(nj)).step_by(K) {
                    let (s, d) = (src.offset(i as isize * a.src + j as isize), dst.offset(i as isize + j as isize * b.dst));
                    if RAW && std::mem::size_of::<D>() == 4 && a.src > 0 && b.dst > 0 {
                        // one 4-byte type unchanged: register blocks (8-byte ones were
                        // slower that way on 1024² and 2048² f64, 1.4 against 1.1 ns per
                        // element: the blocks' half-line stores to rows 8 KiB apart)
                        crate::transpose_block::transpose_rect(s as *const D, a.src as usize, K, K, d, b.dst as usize);
                    } else {
                        micro_tile::<S, D, F, K>(s, a.src, d, b.dst, f);
                    }
                }
            }
        }
    }
    transpose_plain(a, b, (ni, a.len), (0, b.len), src, dst, f);
    transpose_plain(a, b, (0, ni), (nj, b.len), src, dst, f);
}

/// One `K`×`K` tile: `dst[i + j * ds] = f(src[i * ss + j])`.
#[inline(always)]
unsafe fn micro_tile<S: Copy, D: Copy, F: Fn(S) -> D, const K: usize>(src: *const S, ss: isize, dst: *mut D, ds: isize, f: F) {
    let mut t = [[std::mem::MaybeUninit::<D>::uninit(); K]; K];
    for i in 0..K {
        let row = src.offset(i as isize * ss);
        for (j, col) in t.iter_mut().enumerate() {
            col[i] = std::mem::MaybeUninit::new(f(*row.add(j)));
        }
    }
    for (j, col) in t.iter().enumerate() {
        let out = dst.offset(j as isize * ds);
        for (i, v) in col.iter().enumerate() {
            // SAFETY: the loop above wrote all K×K entries.
            *out.add(i) = v.assume_init();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference: every element by its multi-index.
    fn naive(dims: &[usize], src: &[i64], s0: isize, ss: &[isize], ds: &[isize], out_len: usize) -> Vec<i64> {
        let mut out = vec![-1; out_len];
        let n: usize = dims.iter().product();
        for lin in 0..n {
            let (mut rem, mut so, mut d) = (lin, s0, 0isize);
            for k in 0..dims.len() {
                let i = (rem % dims[k]) as isize;
                rem /= dims[k];
                so += i * ss[k];
                d += i * ds[k];
            }
            out[d as usize] = src[so as usize];
        }
        out
    }

    fn check(dims: &[usize], s0: isize, ss: &[isize], src_len: usize, column_major: bool) {
        let src: Vec<i64> = (0..src_len as i64).collect();
        let ds = dense_strides(dims, column_major);
        let n: usize = dims.iter().product();
        let mut out = vec![-1i64; n];
        unsafe { copy_strided(dims, src.as_ptr().offset(s0), ss, out.as_mut_ptr(), &ds) };
        assert_eq!(out, naive(dims, &src, s0, ss, &ds, n), "dims {dims:?} strides {ss:?} column_major {column_major}");
    }

    #[test]
    fn dense_strides_of_both_orders() {
        assert_eq!(dense_strides(&[2, 3, 4], true), vec![1, 2, 6]);
        assert_eq!(dense_strides(&[2, 3, 4], false), vec![12, 4, 1]);
        assert_eq!(dense_strides(&[], false), Vec::<isize>::new());
        assert_eq!(element_count(&[2, 3, 4], 8).unwrap(), 24);
        assert_eq!(element_count(&[5, 0, 7], 8).unwrap(), 0);
        assert!(element_count(&[usize::MAX, 3], 1).is_err());
        assert!(element_count(&[1 << 62], 8).is_err());
    }

    #[test]
    fn every_layout_lands_at_the_same_indices() {
        for column_major in [true, false] {
            check(&[], 0, &[], 1, column_major);
            check(&[5], 0, &[1], 5, column_major);
            check(&[5], 8, &[-2], 9, column_major);
            // row-major source, both destinations (memcpy and tiled transpose)
            check(&[37, 70], 0, &[70, 1], 37 * 70, column_major);
            check(&[70, 37], 0, &[1, 70], 37 * 70, column_major);
            // micro-tiles of every width (8, 16 and 64 elements), ragged edges, several blocks
            check(&[300, 70], 0, &[70, 1], 300 * 70, column_major);
            check(&[70, 300], 0, &[1, 70], 300 * 70, column_major);
            check(&[64, 64], 0, &[64, 1], 64 * 64, column_major);
            // rank 3 and 4, permuted, with length-1 axes and a reversed axis
            check(&[3, 1, 45, 33], 0, &[45 * 33, 1, 33, 1], 3 * 45 * 33, column_major);
            check(&[4, 33, 5], 0, &[1, 20, 4], 4 * 33 * 5, column_major);
            check(&[4, 33, 5], 4 * 32 * 5, &[1, -20, 4], 4 * 33 * 5, column_major);
            // a strided window of a larger buffer (no axis contiguous)
            check(&[6, 7], 3, &[2, 20], 3 + 5 * 2 + 6 * 20 + 1, column_major);
            // broadcasts (zero strides): one element everywhere, a row or a column repeated
            check(&[40, 50], 7, &[0, 0], 8, column_major);
            check(&[40, 50], 0, &[0, 1], 50, column_major);
            check(&[40, 50], 0, &[1, 0], 40, column_major);
            check(&[3, 40, 5], 2, &[0, 1, 0], 42, column_major);
            // empty
            check(&[0, 3], 0, &[3, 1], 0, column_major);
        }
    }

    #[test]
    fn standard_copy_of_permuted_and_reversed_views() {
        let a = ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[3, 4, 5]), (0..60i64).collect()).unwrap();
        let mut v = a.view().permuted_axes(ndarray::IxDyn(&[2, 0, 1]));
        v.invert_axis(ndarray::Axis(1));
        let c = standard_copy(&v);
        assert!(c.is_standard_layout());
        assert_eq!(c, v.as_standard_layout().into_owned());
    }

    #[test]
    fn narrow_elements_take_their_own_micro_tiles() {
        for (r, c) in [(130usize, 67usize), (64, 128), (5, 3)] {
            let src32: Vec<f32> = (0..r * c).map(|x| x as f32).collect();
            let src8: Vec<u8> = (0..r * c).map(|x| (x % 251) as u8).collect();
            let mut out32 = vec![0f32; r * c];
            let mut out8 = vec![0u8; r * c];
            let (rs, cs) = (dense_strides(&[r, c], false), dense_strides(&[r, c], true));
            unsafe {
                copy_strided(&[r, c], src32.as_ptr(), &rs, out32.as_mut_ptr(), &cs);
                copy_strided(&[r, c], src8.as_ptr(), &rs, out8.as_mut_ptr(), &cs);
            }
            for i in 0..r {
                for j in 0..c {
                    assert_eq!(out32[i + r * j], src32[i * c + j]);
                    assert_eq!(out8[i + r * j], src8[i * c + j]);
                }
            }
        }
    }

    #[test]
    fn bool_conversion_applies_on_every_path() {
        let src = [0u8, 2, 1, 0, 7, 1];
        let mut out = [true; 6];
        unsafe { convert_strided(&[2, 3], src.as_ptr(), &[1, 2], out.as_mut_ptr(), &[3, 1], |b| b != 0) };
        assert_eq!(out, [false, true, true, true, false, true]);
    }
}
