//! Which GPUs a session sees and how much memory each may use: `CUDA_VISIBLE_DEVICES`,
//! `GPUOptions` (`visible_device_list`, `allow_growth`, `per_process_gpu_memory_fraction`),
//! virtual (logical) GPUs with memory limits, and the per-device memory account that
//! enforces the limit (TF's BFC allocator limit, `gpu_device.cc`, `config.proto`).
//! Emulated GPUs count as physical GPUs here, so
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

/// The ids of `list`, and the error of the first entry that names no GPU (unparseable, out
/// of range, an unknown or ambiguous UUID, a repeat) with the ids before it.
fn parse_ids(list: &str, what: &str, count: usize, quote: &dyn Fn(&str) -> String, uuids: Option<&[String]>) -> (Vec<usize>, Option<OxiflowError>) {
    let mut ids = Vec::new();
    for entry in list.split(',').map(str::trim) {
        let id = match uuids {
            Some(uuids) if entry.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("GPU-")) => gpu_by_uuid(entry, uuids, &quote(list)),
            _ => entry.parse().map_err(|_| OxiflowError::InvalidArgument(format!("Could not parse entry in '{what}': '{entry}'. {}", quote(list)))),
        };
        let checked = id.and_then(|id| {
            if id >= count {
                Err(OxiflowError::InvalidArgument(format!("'{what}' listed an invalid GPU id '{id}' but visible device count is {count}. {}", quote(list))))
            } else if ids.contains(&id) {
                Err(OxiflowError::InvalidArgument(format!("{what} contained a duplicate entry: {}", quote(list))))
            } else {
                Ok(id)
            }
        });
        match checked {
            Ok(id) => ids.push(id),
            Err(e) => return (ids, Some(e)),
        }
    }
    (ids, None)
}

/// The index of the GPU whose UUID `entry` (`GPU-...`, any case) is, or is a unique prefix of,
/// as CUDA resolves UUID entries of `CUDA_VISIBLE_DEVICES`. Errors name the entry and the
/// UUIDs: none matches, or several do (an ambiguous prefix).
fn gpu_by_uuid(entry: &str, uuids: &[String], context: &str) -> Result<usize> {
    let want = entry.to_ascii_lowercase();
    let hits: Vec<usize> = (0..uuids.len()).filter(|&i| uuids[i].to_ascii_lowercase().starts_with(&want)).collect();
    let known = || if uuids.is_empty() { "there are no GPUs".to_string() } else { format!("GPU UUIDs: {}", uuids.join(", ")) };
    match hits[..] {
        [i] => Ok(i),
        [] => Err(OxiflowError::InvalidArgument(format!(
            "{CUDA_VISIBLE_DEVICES} entry '{entry}' is not the UUID (or a prefix of the UUID) of any GPU ({}). {context}",
            known()
        ))),
        _ => Err(OxiflowError::InvalidArgument(format!(
            "{CUDA_VISIBLE_DEVICES} entry '{entry}' is ambiguous: it is a prefix of the UUIDs of GPUs {} ({}); give enough digits to identify one GPU. {context}",
            hits.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(", "),
            hits.iter().map(|&i| uuids[i].as_str()).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// The UUID of emulated GPU `index`, in nvidia-smi's form
/// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` (lowercase hex, version-4 layout): a hash of the
/// index, so it is the same in every process and on every machine, and its leading digits
/// differ between GPUs as real UUIDs' do.
pub fn emulated_gpu_uuid(index: usize) -> String {
    fn splitmix(mut z: u64) -> u64 {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    // a fixed namespace ("oxiflow!") keeps these apart from other hashes of small numbers
    let seed = 0x6f78_6966_6c6f_7721u64 ^ index as u64;
    let (hi, lo) = (splitmix(seed), splitmix(seed ^ 0xA5A5_A5A5_A5A5_A5A5));
    let hi = (hi & !0xF000) | 0x4000; // version 4
    let lo = (lo & !(0xC << 60)) | (0x8 << 60); // RFC 4122 variant
    format!("GPU-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", hi >> 32, (hi >> 16) & 0xFFFF, hi & 0xFFFF, lo >> 48, lo & 0xFFFF_FFFF_FFFF)
}

/// The GPUs `CUDA_VISIBLE_DEVICES` shows: physical indices in its order, and a warning when
/// an entry ended the list early.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaVisible {
    /// Physical GPU indices, in the variable's order.
    pub ids: Vec<usize>,
    /// Names the first entry that names no GPU, and says the rest is hidden.
    pub warning: Option<String>,
}

/// Physical GPU indices visible to the process, in the order `CUDA_VISIBLE_DEVICES` gives
/// (`None` or unset: all, in order; `""`: none), for `physical` emulated GPUs with their
/// [`emulated_gpu_uuid`]s. See [`cuda_visible_devices_among`].
pub fn cuda_visible_devices(value: Option<&str>, physical: usize) -> CudaVisible {
    let uuids: Vec<String> = (0..physical).map(emulated_gpu_uuid).collect();
    cuda_visible_devices_among(value, &uuids)
}

/// Physical GPU indices visible to the process, in the order `CUDA_VISIBLE_DEVICES` gives,
/// for GPUs with these UUIDs (`uuids[i]` is GPU `i`'s). Entries are indices or, as CUDA
/// accepts, UUIDs `GPU-<uuid>` or unique prefixes of them (`GPU-8932f937`), any case, mixed
/// freely with indices. As CUDA does (CUDA C Programming Guide, "CUDA Environment
/// Variables": with `0,2,-1,1` GPUs 0 and 2 are visible), the first entry that names no GPU
/// (not a number, an index out of range, an unknown UUID or an ambiguous prefix, or a GPU
/// already listed) ends the list: the GPUs before it stay visible, so `-1` hides them all.
/// Never an error; the warning names the variable and the entry.
pub fn cuda_visible_devices_among(value: Option<&str>, uuids: &[String]) -> CudaVisible {
    match value.map(str::trim) {
        None => CudaVisible { ids: (0..uuids.len()).collect(), warning: None },
        Some("") => CudaVisible { ids: Vec::new(), warning: None },
        Some(v) => {
            let (ids, err) = parse_ids(v, CUDA_VISIBLE_DEVICES, uuids.len(), &|l| format!("{CUDA_VISIBLE_DEVICES}={l}"), Some(uuids));
            let warning = err.map(|e| {
                let shown =
                    if ids.is_empty() { "no GPU is visible".to_string() } else { format!("only the {} GPU(s) listed before it are visible", ids.len()) };
                format!("{e} As CUDA does, the list ends there: {shown}.")
            });
            CudaVisible { ids, warning }
        }
    }
}

/// Applies `visible_device_list` to the CUDA-visible GPUs: the physical index of each
/// session GPU, `GPU:0` first. TF's errors (`ParseVisibleDeviceList`).
pub fn session_gpus(cuda_visible: &[usize], visible_device_list: Option<&str>) -> Result<Vec<usize>> {
    match visible_device_list.map(str::trim) {
        None | Some("") => Ok(cuda_visible.to_vec()),
        Some(l) => match parse_ids(l, "visible_device_list", cuda_visible.len(), &|l| format!("visible_device_list = {l}"), None) {
            (_, Some(e)) => Err(e),
            (ids, None) => Ok(ids.into_iter().map(|i| cuda_visible[i]).collect()),
        },
    }
}

/// Bytes a process may use on a GPU with `total` bytes (gpu_device.cc
/// `SingleVirtualDeviceMemoryLimit`): `total * fraction` when a fraction is set, else total
/// minus TF's system reserve (225 MiB below 2 GiB, 1.5 GiB above; the reserve TF uses for
/// compute capability 8.x, the lent H100/H200s' class in spirit), or the whole total when it
/// is not above the reserve (as TF, which subtracts only a smaller reserve). A fraction must be in (0, 1];
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
            Ok(if reserve < total { total - reserve } else { total })
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
        MemoryAccount { device: device.into(), limit, allow_growth, in_use: AtomicU64::new(0), peak: AtomicU64::new(0), reserved: AtomicU64::new(0) }
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
                    what: String::new(),
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

    /// The ids of a list that is fully valid (no warning).
    fn ok(v: CudaVisible) -> Vec<usize> {
        assert_eq!(v.warning, None, "{v:?}");
        v.ids
    }

    /// The warning of a list that ended early (its ids are checked separately).
    fn warn(v: CudaVisible) -> String {
        v.warning.expect("a warning")
    }

    const PINNED_UUID0: &str = "GPU-76a8c442-7b2f-447a-9796-24ba41304767";

    #[test]
    fn cuda_visible_devices_selects_and_orders() {
        assert_eq!(ok(cuda_visible_devices(None, 3)), vec![0, 1, 2]);
        assert_eq!(ok(cuda_visible_devices(Some(""), 3)), Vec::<usize>::new());
        assert_eq!(ok(cuda_visible_devices(Some("2,0"), 3)), vec![2, 0]);
        assert_eq!(ok(cuda_visible_devices(Some(" 1 "), 3)), vec![1]);
        let e = warn(cuda_visible_devices(Some("0,5"), 2));
        assert!(e.contains("invalid GPU id '5'") && e.contains("CUDA_VISIBLE_DEVICES=0,5"), "{e}");
        let e = warn(cuda_visible_devices(Some("0,x"), 2));
        assert!(e.contains("'x'"), "{e}");
        let e = warn(cuda_visible_devices(Some("1,1"), 2));
        assert!(e.contains("duplicate"), "{e}");
        // CUDA's documented example: with 0,2,-1,1 GPUs 0 and 2 are visible, 1 is not
        let v = cuda_visible_devices(Some("0,2,-1,1"), 3);
        assert_eq!(v.ids, vec![0, 2]);
        let w = v.warning.unwrap();
        assert!(w.contains("'-1'") && w.contains("only the 2 GPU(s) listed before it are visible"), "{w}");
        // -1 (the usual way to hide GPUs), or any entry out of range, shows none
        for hide in ["-1", "5", "x", "GPU-ffffffff"] {
            let v = cuda_visible_devices(Some(hide), 2);
            assert!(v.ids.is_empty() && v.warning.as_deref().is_some_and(|w| w.contains("no GPU is visible")), "{hide}: {v:?}");
        }
        assert_eq!(cuda_visible_devices(Some("1,0,1"), 2).ids, vec![1, 0]);
    }

    #[test]
    fn emulated_gpus_have_stable_distinct_uuids_in_nvidia_smi_form() {
        let u: Vec<String> = (0..8).map(emulated_gpu_uuid).collect();
        for (i, x) in u.iter().enumerate() {
            assert_eq!(x, &emulated_gpu_uuid(i), "deterministic");
            let parts: Vec<&str> = x.strip_prefix("GPU-").unwrap().split('-').collect();
            assert_eq!(parts.iter().map(|p| p.len()).collect::<Vec<_>>(), [8, 4, 4, 4, 12], "{x}");
            assert!(parts.iter().all(|p| p.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())), "{x}");
            assert!(parts[2].starts_with('4'), "version 4: {x}");
        }
        let mut firsts: Vec<&str> = u.iter().map(|x| &x[..12]).collect();
        firsts.dedup();
        firsts.sort_unstable();
        firsts.dedup();
        assert_eq!(firsts.len(), 8, "the first 8 hex digits tell them apart: {u:?}");
        // pinned: a UUID must not change between versions (scripts put them in CUDA_VISIBLE_DEVICES)
        assert_eq!(emulated_gpu_uuid(0), PINNED_UUID0);
    }

    #[test]
    fn cuda_visible_devices_accepts_uuids_and_unique_prefixes() {
        let u: Vec<String> = (0..3).map(emulated_gpu_uuid).collect();
        assert_eq!(ok(cuda_visible_devices(Some(&u[2]), 3)), vec![2]);
        // mixed with indices, in the given order; upper case and a short prefix work too
        let v = format!("{},0,{}", u[2].to_uppercase(), &u[1][..10]);
        assert_eq!(ok(cuda_visible_devices(Some(&v), 3)), vec![2, 0, 1]);
        assert_eq!(ok(cuda_visible_devices_among(Some(" GPU-ab , 1"), &["GPU-abc".into(), "GPU-def".into()])), vec![0, 1]);
        // unknown UUID: named, with the known ones
        let e = warn(cuda_visible_devices(Some("0,GPU-00000000-0000-4000-8000-000000000000"), 3));
        assert!(
            e.contains("'GPU-00000000-0000-4000-8000-000000000000' is not the UUID") && e.contains(&u[1]) && e.contains("CUDA_VISIBLE_DEVICES=0,GPU-"),
            "{e}"
        );
        // ambiguous prefix: which GPUs it matches
        let e = warn(cuda_visible_devices_among(Some("GPU-ab"), &["GPU-abc".into(), "GPU-abd".into(), "GPU-x".into()]));
        assert!(e.contains("'GPU-ab' is ambiguous") && e.contains("GPUs 0, 1 (GPU-abc, GPU-abd)"), "{e}");
        let e = warn(cuda_visible_devices(Some("GPU-"), 3));
        assert!(e.contains("ambiguous") && e.contains("GPUs 0, 1, 2"), "{e}");
        // the same GPU by index and by UUID is a duplicate
        let e = warn(cuda_visible_devices(Some(&format!("1,{}", u[1])), 3));
        assert!(e.contains("duplicate"), "{e}");
        // no GPUs: a UUID names none; visible_device_list takes no UUIDs (TF's parser)
        assert!(warn(cuda_visible_devices(Some("GPU-1"), 0)).contains("there are no GPUs"));
        let e = session_gpus(&[0, 1], Some(&u[0])).unwrap_err().to_string();
        assert!(e.contains("Could not parse entry in 'visible_device_list'"), "{e}");
        let e = warn(cuda_visible_devices(Some("MIG-1/0/0"), 3));
        assert!(e.contains("Could not parse entry") && e.contains("'MIG-1/0/0'"), "{e}");
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
        // at or below the reserve the whole memory is the limit, never 0 (TF subtracts the
        // reserve only when it is smaller)
        assert_eq!(memory_limit(1 << 20, None).unwrap(), 1 << 20);
        assert_eq!(memory_limit(225 << 20, None).unwrap(), 225 << 20);
        assert_eq!(memory_limit(226 << 20, None).unwrap(), 1 << 20);
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
        assert!(
            msg.contains("/device:GPU:0") && msg.contains(&format!("{} bytes", 7u64 << 20)) && msg.contains(&format!("{} bytes in use", 4u64 << 20)),
            "{msg}"
        );
        a.free(3 << 20);
        assert_eq!(a.stats(), MemoryStats { bytes_in_use: 1 << 20, peak_bytes_in_use: 4 << 20, bytes_limit: 10 << 20, bytes_reserved: 6 << 20 });
        let b = MemoryAccount::new("/device:GPU:1", 10 << 20, false);
        b.allocate(1).unwrap();
        assert_eq!(b.stats().bytes_reserved, 10 << 20); // no growth: the whole limit at once
    }
}
