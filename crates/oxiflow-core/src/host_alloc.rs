//! Host memory for tensors: C's `malloc`, with freed large blocks kept for reuse.
//!
//! A training step allocates the same large buffers every step (activations, gradients,
//! MatMul outputs). Above glibc's `mmap` threshold each is fresh memory, and below it glibc
//! trims the heap's free top back to the system, so every step faulted its buffers in
//! again, 4 KiB at a time: in the MLP of `make bench-peers` (batch 256, f64) page faults and
//! zeroing took about a quarter of the step on the project's VM. TensorFlow keeps freed
//! device memory in its BFC allocator and PyTorch in its caching allocator for the same
//! reason; [`CachingMalloc`] does it for host tensors, with a bounded cache.
//!
//! - Blocks of at least [`MIN_CACHED_BYTES`] are allocated with their size rounded up to a
//!   multiple of 4 KiB and, when freed, kept in a table of [`SLOTS`] entries holding at most
//!   [`cache_limit`] bytes (default [`DEFAULT_CACHE_LIMIT`]; `OXIFLOW_HOST_CACHE_MB` sets it
//!   through [`set_cache_limit`], 0 turns the cache off). An allocation of the same rounded
//!   size and alignment takes a kept block; when the table is full the oldest entries are
//!   freed to make room.
//! - Every block, kept or not, comes from `malloc` or `posix_memalign` (Rust's
//!   `std::alloc::System` on Unix), so a buffer handed to a caller that releases it with C's
//!   `free` (the C ABI's fetch) stays valid, and a kept block is never handed out twice.
//! - Smaller blocks go straight to `System`: glibc's bins already reuse them.
//!
//! The allocator takes effect where a binary or library declares it `#[global_allocator]`
//! (the C ABI library does); elsewhere this module is inert.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Smallest block the cache keeps, in bytes (64 KiB: below it glibc's bins reuse memory
/// without faulting it in again).
pub const MIN_CACHED_BYTES: usize = 64 << 10;
/// Entries in the cache's table.
pub const SLOTS: usize = 64;
/// Bytes the cache may hold when `OXIFLOW_HOST_CACHE_MB` is not set: 1 GiB.
pub const DEFAULT_CACHE_LIMIT: usize = 1 << 30;
const PAGE: usize = 4096;

static LIMIT: AtomicUsize = AtomicUsize::new(DEFAULT_CACHE_LIMIT);

/// Bytes the cache may hold from now on; 0 turns it off. Blocks already kept beyond the new
/// limit are released as later blocks arrive.
pub fn set_cache_limit(bytes: usize) {
    LIMIT.store(bytes, Ordering::Relaxed);
}

/// Bytes the cache may hold.
pub fn cache_limit() -> usize {
    LIMIT.load(Ordering::Relaxed)
}

/// Bytes the cache holds now (freed blocks kept for reuse).
pub fn cached_bytes() -> usize {
    table().bytes
}

/// The environment variable that sets the cache's limit, in MiB (0 turns it off).
pub const HOST_CACHE_ENV: &str = "OXIFLOW_HOST_CACHE_MB";

/// Applies `OXIFLOW_HOST_CACHE_MB` (read once per process; sessions call this when they
/// are created). Errors: a value that is not a whole number of MiB, naming the variable.
pub fn configure_from_env() -> crate::Result<()> {
    static DONE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let r = DONE.get_or_init(|| match std::env::var(HOST_CACHE_ENV) {
        Err(_) => Ok(()),
        Ok(v) => parse_limit(&v).map(set_cache_limit),
    });
    r.clone().map_err(crate::OxiflowError::InvalidArgument)
}

/// The limit in bytes that an `OXIFLOW_HOST_CACHE_MB` value asks for.
fn parse_limit(v: &str) -> Result<usize, String> {
    match v.trim().parse::<usize>() {
        Ok(mb) => Ok(mb.saturating_mul(1 << 20)),
        Err(_) => Err(format!("{HOST_CACHE_ENV}={v:?}: expected a whole number of MiB (0 turns the host buffer cache off)")),
    }
}

#[derive(Clone, Copy)]
struct Slot {
    ptr: usize,
    size: usize,
    align: usize,
    /// Order of arrival; the smallest is the oldest.
    seq: u64,
}

const EMPTY: Slot = Slot { ptr: 0, size: 0, align: 0, seq: 0 };

struct Table {
    slots: [Slot; SLOTS],
    bytes: usize,
    next_seq: u64,
}

static TABLE: Mutex<Table> = Mutex::new(Table { slots: [EMPTY; SLOTS], bytes: 0, next_seq: 1 });

/// The table, whatever a panic elsewhere did to the lock (nothing inside it panics).
fn table() -> std::sync::MutexGuard<'static, Table> {
    TABLE.lock().unwrap_or_else(|e| e.into_inner())
}

/// `malloc`-backed global allocator that keeps freed large blocks for reuse; see the
/// module docs.
pub struct CachingMalloc;

fn rounded(layout: Layout) -> Option<Layout> {
    let size = layout.size().checked_next_multiple_of(PAGE)?;
    Layout::from_size_align(size, layout.align()).ok()
}

fn is_large(layout: &Layout) -> bool {
    layout.size() >= MIN_CACHED_BYTES
}

impl CachingMalloc {
    /// A kept block of exactly `layout`, if any.
    fn take(layout: Layout) -> *mut u8 {
        let mut t = table();
        // The most recently freed match: its lines are the likeliest to be in cache still.
        let found = (0..SLOTS)
            .filter(|&i| t.slots[i].ptr != 0 && t.slots[i].size == layout.size() && t.slots[i].align == layout.align())
            .max_by_key(|&i| t.slots[i].seq);
        match found {
            Some(i) => {
                let s = t.slots[i];
                t.slots[i] = EMPTY;
                t.bytes -= s.size;
                s.ptr as *mut u8
            }
            None => std::ptr::null_mut(),
        }
    }

    /// A block for `layout`, its first `layout.size()` bytes zeroed when `zeroed`: from
    /// `System` when small or when no kept block fits, else a kept one.
    unsafe fn allocate(layout: Layout, zeroed: bool) -> *mut u8 {
        let fresh = |l: Layout| if zeroed { System.alloc_zeroed(l) } else { System.alloc(l) };
        if !is_large(&layout) {
            return fresh(layout);
        }
        let Some(r) = rounded(layout) else { return std::ptr::null_mut() };
        let p = Self::take(r);
        if p.is_null() {
            return fresh(r);
        }
        if zeroed {
            std::ptr::write_bytes(p, 0, layout.size());
        }
        p
    }

    /// Keeps `ptr` (allocated with the rounded `layout`) or frees it; frees the oldest kept
    /// blocks when the table is full.
    unsafe fn give(ptr: *mut u8, layout: Layout) {
        let limit = cache_limit();
        let incoming = Slot { ptr: ptr as usize, size: layout.size(), align: layout.align(), seq: 0 };
        let keep = layout.size() <= limit;
        let mut freed = [EMPTY; SLOTS + 1];
        let mut n_freed = 0;
        {
            let mut t = table();
            let need = if keep { layout.size() } else { 0 };
            // Oldest first, until the newcomer fits (or everything is gone, when the limit
            // was lowered below what is kept).
            while t.bytes + need > limit || (keep && t.slots.iter().all(|s| s.ptr != 0)) {
                let Some(i) = (0..SLOTS).filter(|&i| t.slots[i].ptr != 0).min_by_key(|&i| t.slots[i].seq) else { break };
                freed[n_freed] = t.slots[i];
                n_freed += 1;
                t.bytes -= t.slots[i].size;
                t.slots[i] = EMPTY;
            }
            match t.slots.iter().position(|s| s.ptr == 0) {
                Some(i) if keep => {
                    let seq = t.next_seq;
                    t.next_seq += 1;
                    t.slots[i] = Slot { seq, ..incoming };
                    t.bytes += layout.size();
                }
                _ => {
                    freed[n_freed] = incoming;
                    n_freed += 1;
                }
            }
        }
        // Freed outside the lock: `free` may take a while (munmap).
        for s in &freed[..n_freed] {
            System.dealloc(s.ptr as *mut u8, Layout::from_size_align_unchecked(s.size, s.align));
        }
    }
}

// SAFETY: every block comes from `System` with the layout it is later released with
// (large layouts rounded the same way on both sides); a kept block is owned by the table
// alone until `take` gives it to exactly one caller.
unsafe impl GlobalAlloc for CachingMalloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::allocate(layout, false)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Self::allocate(layout, true)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !is_large(&layout) {
            return System.dealloc(ptr, layout);
        }
        match rounded(layout) {
            Some(r) => Self::give(ptr, r),
            None => System.dealloc(ptr, layout),
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = if is_large(&layout) { rounded(layout) } else { Some(layout) };
        let Some(old) = old else { return std::ptr::null_mut() };
        let new = Layout::from_size_align_unchecked(new_size, layout.align());
        let new = if is_large(&new) { rounded(new) } else { Some(new) };
        let Some(new) = new else { return std::ptr::null_mut() };
        if new.size() == old.size() {
            return ptr;
        }
        System.realloc(ptr, old, new.size())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_value_is_whole_mib() {
        assert_eq!(parse_limit(" 256 "), Ok(256 << 20));
        assert_eq!(parse_limit("0"), Ok(0));
        for bad in ["", "1.5", "-1", "1G"] {
            let e = parse_limit(bad).unwrap_err();
            assert!(e.starts_with("OXIFLOW_HOST_CACHE_MB=") && e.contains("whole number of MiB"), "{e}");
        }
    }

    /// One test: the table and its limit are process-wide, so its steps must not
    /// interleave with another test's.
    #[test]
    fn freed_large_blocks_are_reused_bounded_and_plain_malloc_blocks() {
        let a = CachingMalloc;
        let big = Layout::from_size_align(100_000, 8).unwrap();
        let kept = rounded(big).unwrap().size();
        assert_eq!(kept, 102_400, "rounded up to whole 4 KiB pages");
        unsafe {
            set_cache_limit(DEFAULT_CACHE_LIMIT);
            let before = cached_bytes();
            let p = a.alloc(big);
            std::ptr::write_bytes(p, 0x5a, big.size());
            a.dealloc(p, big);
            assert_eq!(cached_bytes(), before + kept, "a freed large block is kept");
            let q = a.alloc_zeroed(big);
            assert_eq!(q, p, "the same rounded size takes the kept block");
            assert_eq!(cached_bytes(), before);
            assert!(std::slice::from_raw_parts(q, big.size()).iter().all(|&b| b == 0), "zeroed on reuse");

            // realloc keeps the contents, both growing and shrinking below the threshold
            *q = 7;
            *q.add(99_999) = 9;
            let r = a.realloc(q, big, 300_000);
            assert_eq!((*r, *r.add(99_999)), (7, 9));
            let small = a.realloc(r, Layout::from_size_align(300_000, 8).unwrap(), 100);
            assert_eq!(*small, 7);
            a.dealloc(small, Layout::from_size_align(100, 8).unwrap());
            assert_eq!(cached_bytes(), before, "small blocks go straight back to malloc");

            // every kept block is a malloc block: C's free releases one taken from the cache
            let p = a.alloc(big);
            a.dealloc(p, big);
            let p = a.alloc(big);
            extern "C" {
                fn free(p: *mut u8);
            }
            free(p);

            // the table holds at most SLOTS blocks and `limit` bytes, dropping the oldest
            let blocks: Vec<*mut u8> = (0..SLOTS + 5).map(|_| a.alloc(big)).collect();
            for &b in &blocks {
                a.dealloc(b, big);
            }
            assert!(cached_bytes() <= SLOTS * kept);
            let newest = *blocks.last().unwrap();
            assert_eq!(a.alloc(big), newest, "the most recently freed block comes back first");
            a.dealloc(newest, big);
            set_cache_limit(3 * kept);
            a.dealloc(a.alloc(big), big);
            assert!(cached_bytes() <= 3 * kept, "a lower limit frees kept blocks as others arrive");
            set_cache_limit(0);
            a.dealloc(a.alloc(big), big);
            assert_eq!(cached_bytes(), 0, "limit 0: nothing kept");
            set_cache_limit(DEFAULT_CACHE_LIMIT);
        }
    }
}
