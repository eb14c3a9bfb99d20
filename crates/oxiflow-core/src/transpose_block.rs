//! Transposes of small rectangles of 4- and 8-byte elements through vector registers:
//! an 8x8 block of 4-byte elements (or a 4x4 block of 8-byte ones) is loaded as eight (four)
//! 256-bit rows and transposed with unpack, shuffle and lane-permute instructions, the
//! classic AVX transpose (Intel's optimization manual, "8x8 matrix transpose"; Eigen's
//! `ptranspose` for `Packet8f` does the same). Elements are moved as bits (no arithmetic),
//! so any 4- or 8-byte type, NaN payloads included, comes out unchanged.
//!
//! Used where a kernel pairs a matrix with one in the other memory order (a column-major
//! Julia array with its transpose `x'`, a row-major view): gathering a tile of the other
//! operand with scalar loads took about 0.8 ns per element on the project's VM, these
//! blocks about 0.2 ns.

/// `dst[c * ds + r] = src[r * ss + c]` for `r < rows`, `c < cols` (strides in elements):
/// the `rows x cols` rectangle at `src` (row stride `ss`) written transposed at `dst`
/// (row stride `ds`). Whole 8x8 (4-byte) or 4x4 (8-byte) blocks go through registers where
/// the CPU has AVX2; the ragged edges and other element sizes are copied one by one.
///
/// # Safety
/// `src` is readable at every `r * ss + c` and `dst` writable at every `c * ds + r` for the
/// rectangle, and the two do not overlap.
#[inline(always)]
pub(crate) unsafe fn transpose_rect<T: Copy>(src: *const T, ss: usize, rows: usize, cols: usize, dst: *mut T, ds: usize) {
    let (mut r_done, mut c_done) = (0, 0);
    #[cfg(target_arch = "x86_64")]
    if crate::ops::vmath::has_fma() {
        // the block side for the element size, if it has blocks
        let k = match std::mem::size_of::<T>() {
            4 => Some(8),
            8 => Some(4),
            _ => None,
        };
        if let Some(k) = k {
            (r_done, c_done) = (rows - rows % k, cols - cols % k);
            for r in (0..r_done).step_by(k) {
                for c in (0..c_done).step_by(k) {
                    let (s, d) = (src.add(r * ss + c), dst.add(c * ds + r));
                    if k == 8 {
                        x86::block8x8_32(s as *const f32, ss, d as *mut f32, ds);
                    } else {
                        x86::block4x4_64(s as *const f64, ss, d as *mut f64, ds);
                    }
                }
            }
        }
    }
    // the right strip (columns past the blocks) for the blocks' rows, then the bottom rows
    scalar(src, ss, (0, r_done), (c_done, cols), dst, ds);
    scalar(src, ss, (r_done, rows), (0, cols), dst, ds);
}

/// The plain transpose of rows `rs.0..rs.1`, columns `cs.0..cs.1` of the rectangle.
#[inline(always)]
unsafe fn scalar<T: Copy>(src: *const T, ss: usize, rs: (usize, usize), cs: (usize, usize), dst: *mut T, ds: usize) {
    for r in rs.0..rs.1 {
        for c in cs.0..cs.1 {
            *dst.add(c * ds + r) = *src.add(r * ss + c);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// One 8x8 block of 4-byte elements: `dst[c * ds + r] = src[r * ss + c]`.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(super) unsafe fn block8x8_32(src: *const f32, ss: usize, dst: *mut f32, ds: usize) {
        let row = |i: usize| _mm256_loadu_ps(src.add(i * ss));
        let (r0, r1, r2, r3, r4, r5, r6, r7) = (row(0), row(1), row(2), row(3), row(4), row(5), row(6), row(7));
        // pairs of rows interleaved: t0 = r0[0] r1[0] r0[1] r1[1] | r0[4] r1[4] r0[5] r1[5]
        let (t0, t1) = (_mm256_unpacklo_ps(r0, r1), _mm256_unpackhi_ps(r0, r1));
        let (t2, t3) = (_mm256_unpacklo_ps(r2, r3), _mm256_unpackhi_ps(r2, r3));
        let (t4, t5) = (_mm256_unpacklo_ps(r4, r5), _mm256_unpackhi_ps(r4, r5));
        let (t6, t7) = (_mm256_unpacklo_ps(r6, r7), _mm256_unpackhi_ps(r6, r7));
        // columns of four rows: u0 = r0[0] r1[0] r2[0] r3[0] | r0[4] r1[4] r2[4] r3[4]
        let (u0, u1) = (_mm256_shuffle_ps::<0x44>(t0, t2), _mm256_shuffle_ps::<0xEE>(t0, t2));
        let (u2, u3) = (_mm256_shuffle_ps::<0x44>(t1, t3), _mm256_shuffle_ps::<0xEE>(t1, t3));
        let (u4, u5) = (_mm256_shuffle_ps::<0x44>(t4, t6), _mm256_shuffle_ps::<0xEE>(t4, t6));
        let (u6, u7) = (_mm256_shuffle_ps::<0x44>(t5, t7), _mm256_shuffle_ps::<0xEE>(t5, t7));
        // the low lanes give columns 0..4, the high lanes columns 4..8
        let out = |i: usize, v: __m256| _mm256_storeu_ps(dst.add(i * ds), v);
        out(0, _mm256_permute2f128_ps::<0x20>(u0, u4));
        out(1, _mm256_permute2f128_ps::<0x20>(u1, u5));
        out(2, _mm256_permute2f128_ps::<0x20>(u2, u6));
        out(3, _mm256_permute2f128_ps::<0x20>(u3, u7));
        out(4, _mm256_permute2f128_ps::<0x31>(u0, u4));
        out(5, _mm256_permute2f128_ps::<0x31>(u1, u5));
        out(6, _mm256_permute2f128_ps::<0x31>(u2, u6));
        out(7, _mm256_permute2f128_ps::<0x31>(u3, u7));
    }

    /// One 4x4 block of 8-byte elements: `dst[c * ds + r] = src[r * ss + c]`.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(super) unsafe fn block4x4_64(src: *const f64, ss: usize, dst: *mut f64, ds: usize) {
        let row = |i: usize| _mm256_loadu_pd(src.add(i * ss));
        let (r0, r1, r2, r3) = (row(0), row(1), row(2), row(3));
        // t0 = r0[0] r1[0] | r0[2] r1[2], t1 = r0[1] r1[1] | r0[3] r1[3]
        let (t0, t1) = (_mm256_unpacklo_pd(r0, r1), _mm256_unpackhi_pd(r0, r1));
        let (t2, t3) = (_mm256_unpacklo_pd(r2, r3), _mm256_unpackhi_pd(r2, r3));
        let out = |i: usize, v: __m256d| _mm256_storeu_pd(dst.add(i * ds), v);
        out(0, _mm256_permute2f128_pd::<0x20>(t0, t2));
        out(1, _mm256_permute2f128_pd::<0x20>(t1, t3));
        out(2, _mm256_permute2f128_pd::<0x31>(t0, t2));
        out(3, _mm256_permute2f128_pd::<0x31>(t1, t3));
    }
}

#[cfg(test)]
mod tests {
    use super::transpose_rect;

    /// Every rectangle shape up to 19x19 (whole blocks, ragged edges, thin strips), with
    /// source and destination strides wider than the rectangle, against the index formula;
    /// elements outside the rectangle must stay untouched.
    fn check<T: Copy + PartialEq + std::fmt::Debug>(make: impl Fn(usize) -> T, fill: T) {
        for rows in 0..20 {
            for cols in 0..20 {
                let (ss, ds) = (cols + 3, rows + 5);
                let src: Vec<T> = (0..rows * ss).map(&make).collect();
                let mut dst = vec![fill; cols.max(1) * ds];
                // SAFETY: src holds rows * ss elements, dst cols * ds.
                unsafe { transpose_rect(src.as_ptr(), ss, rows, cols, dst.as_mut_ptr(), ds) };
                for c in 0..cols.max(1) {
                    for r in 0..ds {
                        let want = if r < rows && c < cols { src[r * ss + c] } else { fill };
                        assert_eq!(dst[c * ds + r], want, "{rows}x{cols} at dst row {c} col {r}");
                    }
                }
            }
        }
    }

    #[test]
    fn rectangles_of_every_size_match_the_index_formula() {
        check(|i| i as u32 * 2654435761, u32::MAX);
        check(|i| (i as u64) << 33 | i as u64, u64::MAX);
        check(|i| i as u16, u16::MAX);
        check(|i| i % 3 == 0, false);
    }

    /// One `k` x `k` block of `vals` repeated, transposed: every element's bits unchanged.
    fn check_bits<T: Copy + Default>(vals: &[T], k: usize, bits: impl Fn(T) -> u64) {
        let src: Vec<T> = (0..k * k).map(|i| vals[i % vals.len()]).collect();
        let mut dst = vec![T::default(); k * k];
        // SAFETY: k x k rectangles with stride k in k * k-element buffers.
        unsafe { transpose_rect(src.as_ptr(), k, k, k, dst.as_mut_ptr(), k) };
        for r in 0..k {
            for c in 0..k {
                assert_eq!(bits(dst[c * k + r]), bits(src[r * k + c]), "{k}x{k} at {r}, {c}");
            }
        }
    }

    #[test]
    fn nan_payloads_and_negative_zero_move_bit_for_bit() {
        check_bits(&[f32::from_bits(0x7fc0_1234), f32::from_bits(0xffa0_0001), -0.0, f32::INFINITY], 8, |x| x.to_bits() as u64);
        check_bits(&[f64::from_bits(0x7ff8_0000_dead_beef), -0.0, f64::NEG_INFINITY], 4, f64::to_bits);
    }
}
