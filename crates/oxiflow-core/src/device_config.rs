//! Which GPUs a session sees and how much memory each may use: `CUDA_VISIBLE_DEVICES`,
//! `GPUOptions` (`visible_device_list`, `allow_growth`, `per_process_gpu_memory_fraction`),
//! virtual (logical) GPUs with memory limits, and the per-device memory account that
//! enforces the limit (TF's BFC allocator limit, `gpu_device.cc`, `config.proto`;
//! `shared/reference/tf-placement.md` §6). Emulated GPUs count as physical GPUs here, so
//! all of it works, and is tested, without a GPU.

use crate::error::{OxiflowError, Result};
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable CUDA reads to select and order GPUs.
pub const CUDA_VISIBLE_DEVICES: &str = "CUDA_VISIBLE_DEVICES";

/// `GPUOptions` of TF's `ConfigProto`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GpuOptions {
    /// Start small and grow on demand (`allow_growth`); otherwise the whole limit is reserved
    /// on the device's first allocation, as TF's BFC allocator does.
    pub allow_growth: bool,
    /// Fraction of each GPU's total memory this process may use (`0 < f`, `None`: TF's
    /// default, total memory minus a system reserve).
    pub per_process_gpu_memory_fraction: Option<f64>,
    /// `"5,3"`: visible GPUs 5 and 3 become `GPU:0` and `GPU:1`.
    pub visible_device_list: Option<String>,
    /// Virtual GPUs per visible GPU: one memory limit in MiB per virtual device
    /// (`Experimental.virtual_devices.memory_limit_mb`); empty for "one device per GPU".
    pub virtual_devices_mb: Vec<Vec<u64>>,
}

fn parse_ids(list: &str, what: &str, count: usize, quote: &dyn Fn(&str) -> String) -> Result<Vec<usize>> {
    let mut ids = Vec::new();
    for entry in list.split(',').map(str::trim) {
        let id: usize = entry.parse().map_err(|_| OxiflowError::InvalidArgument(format!("Could not parse entry in '{what}': '{entry}'. {}", quote(list))))?;
        if id >= count {
            return Err(OxiflowError::InvalidArgument(format!(
                "'{what}' listed an invalid GPU id '{id}' but visible device count is {count}. {}",
                quote(list)
            )));
        }
        if ids.contains(&id) {
            return Err(OxiflowError::InvalidArgument(format!("{what} contained a duplicate entry: {}", quote(list))));
        }
        ids.push(id);
    }
    Ok(ids)
}

/// Physical GPU indices visible to the process, in the order `CUDA_VISIBLE_DEVICES` gives
/// (`None` or unset: all, in order; `""`: none). Unlike CUDA, which silently stops at the
/// first invalid entry, an entry that is not an index of an existing GPU, or a repeated one,
/// is an `InvalidArgument` error naming the variable and the entry.
pub fn cuda_visible_devices(value: Option<&str>, physical: usize) -> Result<Vec<usize>> {
    match value.map(str::trim) {
        None => Ok((0..physical).collect()),
        Some("") => Ok(Vec::new()),
        Some(v) => parse_ids(v, CUDA_VISIBLE_DEVICES, physical, &|l| format!("{CUDA_VISIBLE_DEVICES}={l}")),
    }
}

/// Applies `visible_device_list` to the CUDA-visible GPUs: the physical index of each
/// session GPU, `GPU:0` first. TF's errors (`ParseVisibleDeviceList`).
pub fn session_gpus(cuda_visible: &[usize], visible_device_list: Option<&str>) -> Result<Vec<usize>> {
    match visible_device_list.map(str::trim) {
        None | Some("") => Ok(cuda_visible.to_vec()),
        Some(l) => Ok(parse_ids(l, "visible_device_list", cuda_visible.len(), &|l| format!("visible_device_list = {l}"))?
            .into_iter()
            .map(|i| cuda_visible[i])
            .collect()),
    }
}

/// Bytes a process may use on a GPU with `total` bytes (gpu_device.cc
/// `SingleVirtualDeviceMemoryLimit`): `total * fraction` when a fraction is set, else total
/// minus TF's system reserve (225 MiB below 2 GiB, 1.5 GiB above; the reserve TF uses for
/// compute capability 8.x, the lent H100/H200s' class in spirit). A fraction must be in (0, 1];
/// TF's oversubscription with unified memory (> 1) is not offered.
pub fn memory_limit(total: u64, fraction: Option<f64>) -> Result<u64> {
    const MIB: u64 = 1 << 20;
    match fraction {
        Some(f) if !(f > 0.0 && f <= 1.0) => Err(OxiflowError::InvalidArgument(format!(
            "per_process_gpu_memory_fraction must be in (0, 1], got {f} (unified-memory oversubscription is not supported)"
        ))),
        Some(f) => Ok((total as f64 * f) as u64),
        None => {
            let reserve = if total < 2048 * MIB { 225 * MIB } else { 1536 * MIB };
            Ok(total.saturating_sub(reserve))
        }
    }
}

/// The memory a device's tensors use, against its limit (TF's allocator stats:
/// `bytes_in_use`, `peak_bytes_in_use`, `bytes_limit`, `bytes_reserved`). Thread-safe.
#[derive(Debug)]
pub struct MemoryAccount {
    device: String,
    limit: u64,
    allow_growth: bool,
    in_use: AtomicU64,
    peak: AtomicU64,
    reserved: AtomicU64,
}

/// A snapshot of a [`MemoryAccount`], bytes.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes of live tensors on the device now.
    pub bytes_in_use: u64,
    /// Largest `bytes_in_use` so far.
    pub peak_bytes_in_use: u64,
    /// Most the device may hold (fraction of total, or the virtual device's limit).
    pub bytes_limit: u64,
    /// Taken from the device so far: grows with use under `allow_growth` (in doubling
    /// regions from 2 MiB, as the BFC allocator does), the whole limit otherwise.
    pub bytes_reserved: u64,
}

impl MemoryAccount {
    /// An account for `device` (its full name, used in errors) with `limit` bytes.
    pub fn new(device: impl Into<String>, limit: u64, allow_growth: bool) -> MemoryAccount {
        MemoryAccount {
            device: device.into(),
            limit,
            allow_growth,
            in_use: AtomicU64::new(0),
            peak: AtomicU64::new(0),
            reserved: AtomicU64::new(0),
        }
    }

    /// Records an allocation of `bytes`. Over the limit: `ResourceExhausted` naming the
    /// device, the request and what is in use (TF's `OOM when allocating tensor ...`), and
    /// nothing is recorded.
    pub fn allocate(&self, bytes: u64) -> Result<()> {
        let mut cur = self.in_use.load(Ordering::Relaxed);
        loop {
            let next = cur.saturating_add(bytes);
            if next > self.limit {
                return Err(OxiflowError::ResourceExhausted {
                    device: self.device.clone(),
                    requested: bytes as usize,
                    in_use: cur as usize,
                    limit: self.limit as usize,
                });
            }
            match self.in_use.compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => {
                    self.peak.fetch_max(next, Ordering::Relaxed);
                    let want = if self.allow_growth { grown_region(next, self.limit) } else { self.limit };
                    self.reserved.fetch_max(want, Ordering::Relaxed);
                    return Ok(());
                }
                Err(now) => cur = now,
            }
        }
    }

    /// Records that `bytes` were freed.
    pub fn free(&self, bytes: u64) {
        let _ = self.in_use.fetch_update(Ordering::AcqRel, Ordering::Relaxed, |c| Some(c.saturating_sub(bytes)));
    }

    /// Current figures.
    pub fn stats(&self) -> MemoryStats {
        MemoryStats {
            bytes_in_use: self.in_use.load(Ordering::Relaxed),
            peak_bytes_in_use: self.peak.load(Ordering::Relaxed),
            bytes_limit: self.limit,
            bytes_reserved: self.reserved.load(Ordering::Relaxed),
        }
    }

    /// The device this account belongs to.
    pub fn device(&self) -> &str {
        &self.device
    }
}

/// Region size the BFC allocator has grown to when `need` bytes are in use: 2 MiB doubled
/// until it covers `need`, capped at `limit` (bfc_allocator.cc `Extend`).
fn grown_region(need: u64, limit: u64) -> u64 {
    let mut r: u64 = 2 << 20;
    let mut total = r;
    while total < need {
        r = r.saturating_mul(2);
        total = total.saturating_add(r);
    }
    total.min(limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_visible_devices_selects_and_orders() {
        assert_eq!(cuda_visible_devices(None, 3).unwrap(), vec![0, 1, 2]);
        assert_eq!(cuda_visible_devices(Some(""), 3).unwrap(), Vec::<usize>::new());
        assert_eq!(cuda_visible_devices(Some("2,0"), 3).unwrap(), vec![2, 0]);
        assert_eq!(cuda_visible_devices(Some(" 1 "), 3).unwrap(), vec![1]);
        let e = cuda_visible_devices(Some("0,5"), 2).unwrap_err().to_string();
        assert!(e.contains("invalid GPU id '5'") && e.contains("CUDA_VISIBLE_DEVICES=0,5"), "{e}");
        let e = cuda_visible_devices(Some("0,x"), 2).unwrap_err().to_string();
        assert!(e.contains("'x'"), "{e}");
        let e = cuda_visible_devices(Some("1,1"), 2).unwrap_err().to_string();
        assert!(e.contains("duplicate"), "{e}");
    }

    #[test]
    fn visible_device_list_maps_visible_to_session_ids() {
        // CUDA shows physical 3 and 1 (in that order); the session takes visible 1 then 0
        assert_eq!(session_gpus(&[3, 1], Some("1,0")).unwrap(), vec![1, 3]);
        assert_eq!(session_gpus(&[3, 1], None).unwrap(), vec![3, 1]);
        let e = session_gpus(&[3, 1], Some("2")).unwrap_err().to_string();
        assert!(e.contains("'visible_device_list' listed an invalid GPU id '2' but visible device count is 2"), "{e}");
    }

    #[test]
    fn memory_limit_follows_the_fraction() {
        let gib = 1u64 << 30;
        assert_eq!(memory_limit(10 * gib, Some(0.4)).unwrap(), 4 * gib);
        assert_eq!(memory_limit(10 * gib, None).unwrap(), 10 * gib - 1536 * (1 << 20));
        assert!(memory_limit(gib, Some(1.5)).is_err());
        assert!(memory_limit(gib, Some(0.0)).is_err());
    }

    #[test]
    fn account_enforces_the_limit_and_tracks_peak_and_growth() {
        let a = MemoryAccount::new("/device:GPU:0", 10 << 20, true);
        a.allocate(1 << 20).unwrap();
        assert_eq!(a.stats().bytes_reserved, 2 << 20);
        a.allocate(3 << 20).unwrap();
        assert_eq!(a.stats().bytes_reserved, 6 << 20); // 2 + 4 MiB regions
        let e = a.allocate(7 << 20).unwrap_err();
        assert!(matches!(e, OxiflowError::ResourceExhausted { .. }));
        let msg = e.to_string();
        assert!(msg.contains("/device:GPU:0") && msg.contains(&format!("{} bytes", 7u64 << 20)) && msg.contains(&format!("{} bytes in use", 4u64 << 20)), "{msg}");
        a.free(3 << 20);
        assert_eq!(a.stats(), MemoryStats { bytes_in_use: 1 << 20, peak_bytes_in_use: 4 << 20, bytes_limit: 10 << 20, bytes_reserved: 6 << 20 });
        let b = MemoryAccount::new("/device:GPU:1", 10 << 20, false);
        b.allocate(1).unwrap();
        assert_eq!(b.stats().bytes_reserved, 10 << 20); // no growth: the whole limit at once
    }
}
