//! The allocator's rules against a fake driver (TF's `bfc_allocator_test.cc` checks the
//! same properties: no overlap, coalescing, limit, growth).

use super::*;
use proptest::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};

/// A driver that hands out disjoint address ranges and counts what it holds.
struct FakeMemory {
    next: AtomicU64,
    held: Arc<AtomicU64>,
    calls: Arc<AtomicU64>,
    fail: bool,
    /// What the fake device has left (`u64::MAX` unless a test fills it).
    free_on_device: AtomicU64,
}

impl Default for FakeMemory {
    fn default() -> Self {
        FakeMemory { next: AtomicU64::new(0), held: Arc::default(), calls: Arc::default(), fail: false, free_on_device: AtomicU64::new(u64::MAX) }
    }
}

impl RawMemory for FakeMemory {
    fn alloc(&self, bytes: u64) -> CudaResult<u64> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if self.fail {
            return Err(CudaError::Driver { device: "fake".into(), call: "cuMemAlloc".into(), msg: "CUDA_ERROR_INVALID_VALUE".into() });
        }
        if bytes > self.free_on_device.load(Ordering::Relaxed) {
            return Err(CudaError::DeviceFull { device: "fake".into(), requested: bytes, msg: String::new() });
        }
        self.held.fetch_add(bytes, Ordering::Relaxed);
        self.free_on_device.fetch_sub(bytes, Ordering::Relaxed);
        // leave a gap after every region so that regions are never adjacent
        Ok(0x1000_0000 + self.next.fetch_add(bytes + (1 << 20), Ordering::Relaxed))
    }
    fn free(&self, _ptr: u64) {}
}

const DEV: &str = "/job:localhost/replica:0/task:0/device:GPU:0";
const MB: u64 = 1 << 20;

fn fake(limit: u64, growth: bool) -> (Arc<Allocator>, Arc<AtomicU64>) {
    let m = FakeMemory::default();
    let calls = m.calls.clone();
    (Allocator::new(DEV, limit, growth, Box::new(m)), calls)
}

#[test]
fn growth_starts_at_2_mib_and_doubles() {
    let (a, calls) = fake(64 * MB, true);
    let x = a.allocate(1000).unwrap();
    assert_eq!(x.size(), 1024, "rounded to 256 bytes");
    assert_eq!(a.stats().bytes_reserved, 2 * MB);
    let y = a.allocate(MB).unwrap();
    assert_eq!(calls.load(Ordering::Relaxed), 1, "fits in the first region");
    let z = a.allocate(2 * MB).unwrap();
    assert_eq!(a.stats().bytes_reserved, 6 * MB, "second region doubles to 4 MiB");
    assert_eq!(a.stats().bytes_in_use, 1024 + 3 * MB);
    drop((x, y, z));
    assert_eq!(a.stats().bytes_in_use, 0);
    assert_eq!(a.stats().peak_bytes_in_use, 1024 + 3 * MB);
}

#[test]
fn without_growth_the_whole_limit_is_reserved_at_the_first_allocation() {
    let (a, calls) = fake(100 * MB, false);
    assert_eq!(a.stats().bytes_reserved, 0);
    let _x = a.allocate(8).unwrap();
    assert_eq!(a.stats().bytes_reserved, 100 * MB);
    let _y = a.allocate(50 * MB).unwrap();
    assert_eq!(calls.load(Ordering::Relaxed), 1);
}

#[test]
fn over_the_limit_is_tfs_oom_and_changes_nothing() {
    let (a, _) = fake(10 * MB, true);
    let _x = a.allocate(3 * MB).unwrap();
    let before = a.stats();
    let e = a.allocate(8 * MB).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains(&format!("OOM when allocating {} bytes on {DEV}", 8 * MB)), "{msg}");
    assert!(msg.contains(&format!("{} bytes in use", 3 * MB)), "{msg}");
    assert_eq!(a.stats(), before);
    let core: oxiflow_core::OxiflowError = e.into();
    assert_eq!(core.code(), 8, "ResourceExhausted");
    a.allocate(MB).expect("still usable");
}

#[test]
fn freed_neighbours_coalesce() {
    let (a, calls) = fake(4 * MB, false);
    let x = a.allocate(MB).unwrap();
    let y = a.allocate(MB).unwrap();
    let z = a.allocate(MB).unwrap();
    let (px, pz) = (x.ptr(), z.ptr());
    drop(y);
    drop(x);
    // x and y merged: a 2 MiB block fits at x's address
    let w = a.allocate(2 * MB).unwrap();
    assert_eq!(w.ptr(), px);
    drop(z);
    drop(w);
    let all = a.allocate(4 * MB).unwrap();
    assert_eq!(all.ptr(), px);
    assert!(pz > px);
    assert_eq!(calls.load(Ordering::Relaxed), 1);
}

#[test]
fn free_regions_are_given_back_before_oom() {
    let (a, calls) = fake(8 * MB, true);
    drop(a.allocate(MB).unwrap()); // 2 MiB region, now free
    let big = a.allocate(7 * MB).unwrap(); // room 6 MiB < 7 MiB: the free region goes back
    assert_eq!(a.stats().bytes_reserved, 7 * MB);
    assert_eq!(calls.load(Ordering::Relaxed), 2);
    drop(big);
}

#[test]
fn a_driver_failure_is_reported_and_changes_nothing() {
    let m = FakeMemory { fail: true, ..Default::default() };
    let a = Allocator::new(DEV, 8 * MB, true, Box::new(m));
    let e = a.allocate(10).unwrap_err();
    assert!(e.to_string().contains("cuMemAlloc"), "{e}");
    assert_eq!(a.stats(), AllocatorStats { bytes_limit: 8 * MB, ..Default::default() });
}

proptest! {
    /// Random allocate/free sequences: live blocks never overlap, usage never exceeds the
    /// reservation, the reservation never exceeds the limit, and freeing all leaves nothing
    /// in use.
    #[test]
    fn random_sequences_keep_the_invariants(ops in proptest::collection::vec((0u8..3, 1u64..3_000_000), 1..120), growth in any::<bool>()) {
        let limit = 16 * MB;
        let (a, _) = fake(limit, growth);
        let mut live: Vec<Block> = Vec::new();
        for (op, n) in ops {
            if op < 2 {
                let before = a.stats();
                match a.allocate(n) {
                    Ok(b) => live.push(b),
                    Err(CudaError::OutOfMemory { in_use, requested, .. }) => {
                        // an OOM reports the state it left unchanged
                        prop_assert_eq!(in_use, before.bytes_in_use);
                        prop_assert_eq!(requested, n);
                        prop_assert_eq!(a.stats().bytes_in_use, before.bytes_in_use);
                        prop_assert_eq!(a.stats().num_allocs, before.num_allocs);
                    }
                    Err(e) => prop_assert!(false, "unexpected {e}"),
                }
            } else if !live.is_empty() {
                let i = (n as usize) % live.len();
                live.swap_remove(i);
            }
            let s = a.stats();
            prop_assert!(s.bytes_reserved <= limit);
            prop_assert!(s.bytes_in_use <= s.bytes_reserved);
            prop_assert_eq!(s.bytes_in_use, live.iter().map(|b| b.size()).sum::<u64>());
            let mut spans: Vec<(u64, u64)> = live.iter().map(|b| (b.ptr(), b.ptr() + b.size())).collect();
            spans.sort();
            for w in spans.windows(2) {
                prop_assert!(w[0].1 <= w[1].0, "overlap {:?}", w);
            }
        }
        live.clear();
        prop_assert_eq!(a.stats().bytes_in_use, 0);
        prop_assert_eq!(a.stats().num_allocs, 0);
    }
}

#[test]
fn a_full_device_is_named_as_such_and_a_growing_allocator_backs_off_to_the_request() {
    // the device has 5 MiB left: a growing allocator's third region (8 MiB) does not fit,
    // but the 3 MiB request itself does
    let m = FakeMemory { free_on_device: AtomicU64::new(5 * MB), ..FakeMemory::default() };
    let a = Allocator::new(DEV, 64 * MB, true, Box::new(m));
    let _x = a.allocate(2 * MB).unwrap(); // 2 MiB region
    let _y = a.allocate(MB).unwrap(); // 4 MiB region wanted, 3 MiB left: backs off to 1 MiB
    assert_eq!(a.stats().bytes_reserved, 3 * MB);
    let e = a.allocate(3 * MB).unwrap_err();
    assert!(matches!(e, CudaError::DeviceFull { requested, .. } if requested == 3 * MB), "{e}");
    let msg = e.to_string();
    assert!(msg.starts_with(&format!("OOM when allocating {} bytes on {DEV}: the GPU has no room", 3 * MB)) && msg.contains("allow_growth"), "{msg}");
    assert_eq!(a.stats().bytes_in_use, 3 * MB, "a failed allocation changes nothing");
    // without growth the whole limit is asked for at once, and a full device says so
    let m = FakeMemory { free_on_device: AtomicU64::new(10 * MB), ..FakeMemory::default() };
    let a = Allocator::new(DEV, 64 * MB, false, Box::new(m));
    let e = oxiflow_core::OxiflowError::from(a.allocate(8).unwrap_err());
    assert_eq!(e.code(), 8, "ResourceExhausted, as TF's OOM: {e}");
    assert!(e.to_string().contains("region of 67108864 bytes"), "{e}");
}
