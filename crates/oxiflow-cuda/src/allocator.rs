//! The GPU memory allocator: a best-fit allocator with coalescing over regions taken from
//! the driver, after TensorFlow's BFC allocator (`tensorflow/core/common_runtime/
//! bfc_allocator.cc`): 256-byte granularity, regions that start at 2 MiB and double when
//! memory may grow (`allow_growth`), the whole limit taken in one region on the first
//! allocation otherwise, and never more than the limit (`per_process_gpu_memory_fraction`
//! of the device's memory, or a virtual device's `memory_limit`). Over the limit, free
//! regions are given back to the driver and the request retried once, as the BFC
//! allocator's garbage collection does; if it still does not fit, the error is TF's
//! `OOM when allocating ...` naming the device, the request and the bytes in use, and the
//! allocator is unchanged.
//!
//! The driver is behind [`RawMemory`], so every rule here is tested with a fake driver on
//! machines without a GPU. Plain device allocations only (`cuMemAlloc`), no managed
//! memory.

use crate::error::{CudaError, CudaResult};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// Allocation granularity in bytes (TF's `kMinAllocationSize`).
pub const ALIGNMENT: u64 = 256;
/// First region size under `allow_growth` (TF starts at 2 MiB and doubles).
pub const FIRST_REGION: u64 = 2 << 20;

/// Where regions come from: the CUDA driver (`cuMemAlloc`/`cuMemFree`) or a test double.
pub trait RawMemory: Send + Sync {
    /// Allocates `bytes` of device memory; the error names the device and the call.
    fn alloc(&self, bytes: u64) -> CudaResult<u64>;
    /// Frees a region from [`RawMemory::alloc`].
    fn free(&self, ptr: u64);
}

/// Allocator figures, bytes (TF's `AllocatorStats`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct AllocatorStats {
    /// Bytes in live blocks (rounded to [`ALIGNMENT`]).
    pub bytes_in_use: u64,
    /// Largest `bytes_in_use` so far.
    pub peak_bytes_in_use: u64,
    /// The most this allocator may take from the device.
    pub bytes_limit: u64,
    /// Bytes taken from the driver in regions now.
    pub bytes_reserved: u64,
    /// Number of live blocks.
    pub num_allocs: u64,
}

#[derive(Clone, Copy, Debug)]
struct Chunk {
    size: u64,
    free: bool,
    region: u64,
}

#[derive(Default)]
struct State {
    /// region start -> size
    regions: BTreeMap<u64, u64>,
    /// chunk start -> chunk (every byte of every region is in exactly one chunk)
    chunks: BTreeMap<u64, Chunk>,
    /// free chunks by (size, start), for best fit
    free: BTreeSet<(u64, u64)>,
    in_use: u64,
    peak: u64,
    reserved: u64,
    allocs: u64,
    next_region: u64,
}

/// A best-fit, coalescing allocator for one device. Thread-safe.
pub struct Allocator {
    device: String,
    limit: u64,
    allow_growth: bool,
    raw: Box<dyn RawMemory>,
    state: Mutex<State>,
}

fn round_up(bytes: u64) -> u64 {
    bytes.max(1).div_ceil(ALIGNMENT) * ALIGNMENT
}

impl Allocator {
    /// An allocator for `device` (full name, used in errors) allowed `limit` bytes.
    pub fn new(device: impl Into<String>, limit: u64, allow_growth: bool, raw: Box<dyn RawMemory>) -> Arc<Allocator> {
        let limit = limit / ALIGNMENT * ALIGNMENT;
        Arc::new(Allocator {
            device: device.into(),
            limit,
            allow_growth,
            raw,
            state: Mutex::new(State { next_region: if allow_growth { FIRST_REGION } else { limit }, ..State::default() }),
        })
    }

    /// The device's full name.
    pub fn device(&self) -> &str {
        &self.device
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Allocates `bytes` (at least 1, rounded up to [`ALIGNMENT`]) and returns a block that
    /// frees itself when dropped. Errors: [`CudaError::OutOfMemory`] over the limit (nothing
    /// changed), or the driver's error when it refuses a region inside the limit.
    pub fn allocate(self: &Arc<Self>, bytes: u64) -> CudaResult<Block> {
        let size = round_up(bytes);
        let mut s = self.lock();
        let ptr = match Self::best_fit(&mut s, size) {
            Some(p) => p,
            None => {
                self.grow(&mut s, size, bytes)?;
                Self::best_fit(&mut s, size).ok_or_else(|| CudaError::Unsupported("allocator: new region has no room".into()))?
            }
        };
        s.in_use += size;
        s.peak = s.peak.max(s.in_use);
        s.allocs += 1;
        Ok(Block { ptr, size, requested: bytes, owner: self.clone() })
    }

    /// Takes the smallest free chunk that fits, splitting off the rest.
    fn best_fit(s: &mut State, size: u64) -> Option<u64> {
        let &(csize, ptr) = s.free.range((size, 0)..).next()?;
        s.free.remove(&(csize, ptr));
        let region = s.chunks[&ptr].region;
        if csize > size {
            let rest = ptr + size;
            s.chunks.insert(rest, Chunk { size: csize - size, free: true, region });
            s.free.insert((csize - size, rest));
        }
        s.chunks.insert(ptr, Chunk { size, free: false, region });
        Some(ptr)
    }

    /// Takes a new region big enough for `size` within the limit; gives back wholly free
    /// regions and retries before reporting OOM. When the device itself has no room
    /// ([`CudaError::DeviceFull`] from the driver), a growing allocator first tries a
    /// region of just `size` (TF's BFC allocator also backs off to the request), and the
    /// final error says what holds the memory.
    fn grow(&self, s: &mut State, size: u64, requested: u64) -> CudaResult<()> {
        for attempt in 0..2 {
            let room = self.limit - s.reserved;
            if size <= room {
                let want = if self.allow_growth { s.next_region.max(size).min(room) } else { room.max(size) };
                let got = match self.raw.alloc(want) {
                    Err(CudaError::DeviceFull { .. }) if want > size && self.allow_growth => self.raw.alloc(size).map(|p| (p, size)),
                    other => other.map(|p| (p, want)),
                };
                let (ptr, want) = match got {
                    Ok(g) => g,
                    Err(CudaError::DeviceFull { .. }) if attempt == 0 && self.release_free_regions(s) => continue,
                    Err(CudaError::DeviceFull { .. }) => {
                        return Err(CudaError::DeviceFull {
                            device: self.device.clone(),
                            requested,
                            msg: format!(
                                "the GPU has no room for a region of {want} bytes (this allocator holds {} bytes, {} in use, of its limit of {} bytes); \
                                 other sessions with other gpu_options, or other processes, hold the rest. Sessions with the same gpu_options share \
                                 one allocator per GPU; otherwise set allow_growth, lower per_process_gpu_memory_fraction, or close the other session",
                                s.reserved, s.in_use, self.limit
                            ),
                        })
                    }
                    Err(e) => return Err(e),
                };
                s.regions.insert(ptr, want);
                s.chunks.insert(ptr, Chunk { size: want, free: true, region: ptr });
                s.free.insert((want, ptr));
                s.reserved += want;
                if self.allow_growth {
                    s.next_region = s.next_region.saturating_mul(2);
                }
                return Ok(());
            }
            if attempt == 0 && !self.release_free_regions(s) {
                break;
            }
        }
        Err(CudaError::OutOfMemory { device: self.device.clone(), requested, in_use: s.in_use, limit: self.limit })
    }

    /// Gives every region with no live block back to the driver; `true` if any was.
    fn release_free_regions(&self, s: &mut State) -> bool {
        let empty: Vec<(u64, u64)> =
            s.regions.iter().filter(|(&p, &sz)| s.chunks.get(&p).is_some_and(|c| c.free && c.size == sz)).map(|(&p, &sz)| (p, sz)).collect();
        for &(p, sz) in &empty {
            s.chunks.remove(&p);
            s.free.remove(&(sz, p));
            s.regions.remove(&p);
            s.reserved -= sz;
            self.raw.free(p);
        }
        !empty.is_empty()
    }

    fn release(&self, ptr: u64) {
        let mut s = self.lock();
        let Some(mut c) = s.chunks.get(&ptr).copied() else { return };
        if c.free {
            return;
        }
        s.in_use -= c.size;
        s.allocs -= 1;
        let mut start = ptr;
        // merge with the next chunk of the same region
        if let Some(n) = s.chunks.get(&(ptr + c.size)).copied() {
            if n.free && n.region == c.region {
                s.free.remove(&(n.size, ptr + c.size));
                s.chunks.remove(&(ptr + c.size));
                c.size += n.size;
            }
        }
        // merge with the previous chunk of the same region
        if let Some((&pp, &p)) = s.chunks.range(..ptr).next_back() {
            if p.free && p.region == c.region && pp + p.size == ptr {
                s.free.remove(&(p.size, pp));
                s.chunks.remove(&ptr);
                c.size += p.size;
                start = pp;
            }
        }
        c.free = true;
        s.chunks.insert(start, c);
        s.free.insert((c.size, start));
    }

    /// Current figures.
    pub fn stats(&self) -> AllocatorStats {
        let s = self.lock();
        AllocatorStats { bytes_in_use: s.in_use, peak_bytes_in_use: s.peak, bytes_limit: self.limit, bytes_reserved: s.reserved, num_allocs: s.allocs }
    }
}

impl Drop for Allocator {
    fn drop(&mut self) {
        let s = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        for (&p, _) in s.regions.iter() {
            self.raw.free(p);
        }
    }
}

/// A live allocation; returns its memory to the allocator when dropped.
#[derive(Debug)]
pub struct Block {
    ptr: u64,
    size: u64,
    requested: u64,
    owner: Arc<Allocator>,
}

impl Block {
    /// Device address of the first byte.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }
    /// Bytes asked for.
    pub fn requested(&self) -> u64 {
        self.requested
    }
    /// Bytes held (rounded up to [`ALIGNMENT`]).
    pub fn size(&self) -> u64 {
        self.size
    }
    /// The allocator (and so the device) it belongs to.
    pub fn allocator(&self) -> &Arc<Allocator> {
        &self.owner
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        self.owner.release(self.ptr);
    }
}

impl std::fmt::Debug for Allocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Allocator({}, {:?})", self.device, self.stats())
    }
}

#[cfg(test)]
mod tests;
