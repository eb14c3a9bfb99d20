//! Handing a fetched value's buffer to the caller, who frees it with C's `free` (Julia's
//! `unsafe_wrap(Array, p, dims; own = true)`): a fetched tensor that nothing else holds
//! and whose memory is already in the caller's order changes owner without being copied.
//!
//! Why this is sound:
//! - Every Rust allocation in this library comes from C's `malloc`: the global allocator
//!   below is [`CachingMalloc`], which takes every block from `std::alloc::System` (on Unix
//!   `malloc`, or `posix_memalign` for alignments above 16, never needed by tensor
//!   elements), both released by `free`, and keeps freed large blocks for reuse; a kept
//!   block is handed out once, and one handed over is never kept again. A
//!   second `#[global_allocator]` anywhere in the library is a compile error, so this
//!   cannot change silently. Other platforms hand nothing over (the caller copies).
//! - A buffer is handed over only when the tensor holds the only reference to it
//!   (`try_into_owned_nocopy` succeeds only for a unique `Arc`, atomically): no variable,
//!   constant, feed or other fetch still shares it, so the caller may write to it and
//!   free it, and the library never touches it again (the `Vec` is forgotten).
//! - It must start at the allocation (offset 0) and hold exactly the tensor's elements
//!   in the requested order; otherwise the elements are copied into a new `malloc`ed
//!   buffer (tiled, [`oxiflow_core::strided`]) and that one is handed over.

#[cfg(unix)]
use oxiflow_core::host_alloc::CachingMalloc;
use oxiflow_core::strided::{buffer_for, copy_strided, dense_strides};
use oxiflow_core::tensor::{Element, Tensor};
use oxiflow_core::{OxiflowError, Result};
use std::ffi::c_void;

/// C's `malloc` with freed large blocks kept for reuse (the next step's tensors of the same
/// size take them instead of faulting fresh pages in); handed-over buffers can still be
/// released with `free`. See the module docs and [`oxiflow_core::host_alloc`].
#[cfg(unix)]
#[global_allocator]
static MALLOC: CachingMalloc = CachingMalloc;

/// `true` where handed-over buffers can be released with C's `free`.
pub(crate) const CAN_HAND_OVER: bool = cfg!(unix);

/// The elements of `t` in a buffer from C's `malloc`, in column-major order when
/// `column_major` (else row-major), now owned by the caller: `t`'s own buffer when `t`
/// holds its only reference and it is in that order already, else a new copy. Errors: a
/// device-resident or empty tensor (nothing to hand over).
pub(crate) fn into_malloc_buffer(t: Tensor, column_major: bool) -> Result<*mut c_void> {
    if t.is_empty() {
        return Err(OxiflowError::InvalidArgument("an empty tensor has no buffer to hand over".into()));
    }
    match t {
        Tensor::F32(a) => Ok(hand_over(a, column_major)),
        Tensor::F64(a) => Ok(hand_over(a, column_major)),
        Tensor::I32(a) => Ok(hand_over(a, column_major)),
        Tensor::I64(a) => Ok(hand_over(a, column_major)),
        Tensor::Bool(a) => Ok(hand_over(a, column_major)),
        Tensor::C64(a) => Ok(hand_over(a, column_major)),
        Tensor::C128(a) => Ok(hand_over(a, column_major)),
        Tensor::Device(_) => Err(OxiflowError::Internal("a fetched value is still on its device".into())),
    }
}

fn hand_over<T: Element>(a: ndarray::ArcArray<T, ndarray::IxDyn>, column_major: bool) -> *mut c_void {
    let n = a.len();
    let dims = a.shape().to_vec();
    let dst = dense_strides(&dims, column_major);
    let in_order = if column_major { a.t().is_standard_layout() } else { a.is_standard_layout() };
    let v = if in_order {
        match a.try_into_owned_nocopy() {
            Ok(owned) => {
                let strides = owned.strides().to_vec();
                let (v, offset) = owned.into_raw_vec_and_offset();
                let offset = offset.unwrap_or(0);
                if offset == 0 && v.len() == n {
                    v
                } else {
                    // a window of a larger buffer: copy the window out
                    // SAFETY: the window's strides address elements of `v` from `offset`.
                    unsafe { dense_copy(&dims, v.as_ptr().add(offset), &strides, &dst) }
                }
            }
            Err(shared) => unsafe { dense_copy(&dims, shared.as_ptr(), shared.strides(), &dst) },
        }
    } else {
        // SAFETY: `a`'s strides address its own elements.
        unsafe { dense_copy(&dims, a.as_ptr(), a.strides(), &dst) }
    };
    let mut v = std::mem::ManuallyDrop::new(v);
    v.as_mut_ptr() as *mut c_void
}

/// A new vector of the `dims` elements at `src` (with `strides`), laid out by `dst`.
///
/// # Safety
/// `src` and `strides` must address readable elements for every index of `dims`; `dst`
/// must be the dense strides of `dims` in some order.
unsafe fn dense_copy<T: Copy>(dims: &[usize], src: *const T, strides: &[isize], dst: &[isize]) -> Vec<T> {
    let n: usize = dims.iter().product();
    let mut v: Vec<T> = buffer_for(n);
    copy_strided(dims, src, strides, v.as_mut_ptr(), dst);
    v.set_len(n);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxiflow_core::Layout;

    /// Reads `n` elements from a handed-over buffer and frees it as the caller would.
    fn take_back<T: Copy>(p: *mut c_void, n: usize) -> Vec<T> {
        let v = unsafe { std::slice::from_raw_parts(p as *const T, n) }.to_vec();
        #[cfg(unix)]
        unsafe {
            extern "C" {
                fn free(p: *mut c_void);
            }
            free(p)
        };
        v
    }

    #[test]
    fn a_unique_buffer_in_order_changes_owner_without_a_copy() {
        let t = Tensor::from_vec(&[2, 3], vec![1.0f64, 4.0, 2.0, 5.0, 3.0, 6.0], Layout::ColumnMajor).unwrap();
        let data = t.array::<f64>().unwrap().as_ptr();
        let p = into_malloc_buffer(t, true).unwrap();
        assert_eq!(p as *const f64, data, "the tensor's own buffer");
        assert_eq!(take_back::<f64>(p, 6), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    }

    #[test]
    fn shared_or_transposed_buffers_are_copied() {
        let t = Tensor::from_vec(&[2, 3], vec![1i32, 2, 3, 4, 5, 6], Layout::RowMajor).unwrap();
        let keep = t.clone();
        let p = into_malloc_buffer(t, false).unwrap();
        assert_ne!(p as *const i32, keep.array::<i32>().unwrap().as_ptr(), "shared: copied");
        assert_eq!(take_back::<i32>(p, 6), vec![1, 2, 3, 4, 5, 6]);
        let p = into_malloc_buffer(keep, true).unwrap();
        assert_eq!(take_back::<i32>(p, 6), vec![1, 4, 2, 5, 3, 6], "row-major to column-major");
        let b = Tensor::from_vec(&[3], vec![true, false, true], Layout::RowMajor).unwrap();
        assert_eq!(take_back::<u8>(into_malloc_buffer(b, true).unwrap(), 3), vec![1, 0, 1]);
        assert!(into_malloc_buffer(Tensor::full(&[0, 2], 1.0f32), true).is_err());
    }

    #[test]
    fn large_buffers_from_the_reuse_cache_are_released_by_c_free() {
        // 512 KiB: above the cache's threshold, so freeing the first keeps its block and the
        // later tensors of that size may take it; glibc's free aborts on a foreign pointer.
        let n = 1 << 16;
        for k in 0..4 {
            drop(Tensor::from_vec(&[n], vec![1.0f64; n], Layout::RowMajor).unwrap());
            let t = Tensor::from_vec(&[n], vec![k as f64; n], Layout::RowMajor).unwrap();
            let data = t.array::<f64>().unwrap().as_ptr();
            let p = into_malloc_buffer(t, false).unwrap();
            assert_eq!(p as *const f64, data, "handed over without a copy");
            assert!(take_back::<f64>(p, n).iter().all(|&x| x == k as f64));
        }
    }
}
