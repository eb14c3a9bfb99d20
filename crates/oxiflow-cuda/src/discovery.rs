//! Finding the real GPUs: `cuInit`, then name, memory, compute capability, PCI bus id and
//! UUID of each device the driver shows (it has applied `CUDA_VISIBLE_DEVICES` already),
//! as TF's `GPUDevice` creation log reports them (`gpu_device.cc`: `device: 0, name: ...,
//! pci bus id: ..., compute capability: 9.0`). Only called after [`crate::probe`] found a
//! driver library; cudarc calls are also guarded against panics, so a broken driver means
//! "no GPU, and why", never a crash.

use crate::probe::{driver_status, DriverStatus};
use cudarc::driver::{result, sys};
use oxiflow_core::device::provider::PhysicalGpu;

/// The GPUs the driver shows, or why there are none.
#[derive(Clone, Debug, PartialEq)]
pub struct Discovery {
    /// In CUDA ordinal order.
    pub gpus: Vec<PhysicalGpu>,
    /// Why `gpus` is empty (no driver, `cuInit` failed, no device), else `None`.
    pub reason: Option<String>,
}

/// Lists the GPUs (once per call: callers cache it, see [`crate::provider`]).
pub fn discover() -> Discovery {
    match driver_status() {
        DriverStatus::Absent { reason } => Discovery { gpus: Vec::new(), reason: Some(reason.clone()) },
        DriverStatus::Present { .. } => match std::panic::catch_unwind(enumerate) {
            Ok(Ok(gpus)) if gpus.is_empty() => Discovery { gpus, reason: Some("the CUDA driver reports no device (check CUDA_VISIBLE_DEVICES)".into()) },
            Ok(Ok(gpus)) => Discovery { gpus, reason: None },
            Ok(Err(e)) => Discovery { gpus: Vec::new(), reason: Some(e) },
            Err(_) => Discovery { gpus: Vec::new(), reason: Some("the CUDA driver library could not be used (cudarc failed to load a symbol)".into()) },
        },
    }
}

fn enumerate() -> Result<Vec<PhysicalGpu>, String> {
    result::init().map_err(|e| format!("cuInit failed: {e} (an invalid CUDA_VISIBLE_DEVICES hides every GPU)"))?;
    let n = result::device::get_count().map_err(|e| format!("cuDeviceGetCount failed: {e}"))?;
    let mut gpus = Vec::new();
    for ordinal in 0..n {
        let dev = result::device::get(ordinal).map_err(|e| format!("cuDeviceGet({ordinal}) failed: {e}"))?;
        let name = result::device::get_name(dev).map_err(|e| format!("cuDeviceGetName({ordinal}) failed: {e}"))?;
        // SAFETY: `dev` came from cuDeviceGet.
        let (total, attr) = unsafe {
            let total = result::device::total_mem(dev).map_err(|e| format!("cuDeviceTotalMem({ordinal}) failed: {e}"))?;
            let attr = |a: sys::CUdevice_attribute| result::device::get_attribute(dev, a).unwrap_or(-1);
            (total, attr)
        };
        use sys::CUdevice_attribute as A;
        let cc = (attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR), attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR));
        let pci = format!(
            "{:04x}:{:02x}:{:02x}.0",
            attr(A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID),
            attr(A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID),
            attr(A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)
        );
        let uuid = result::device::get_uuid(dev).map(|u| format_uuid(&u.bytes.map(|b| b as u8))).unwrap_or_default();
        gpus.push(PhysicalGpu { name, total_memory: total as u64, compute_capability: cc, pci_bus_id: pci, uuid });
    }
    Ok(gpus)
}

/// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, as `nvidia-smi -L` and
/// `CUDA_VISIBLE_DEVICES` write a GPU's UUID.
pub fn format_uuid(b: &[u8; 16]) -> String {
    let h: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("GPU-{}-{}-{}-{}-{}", h[0..4].concat(), h[4..6].concat(), h[6..8].concat(), h[8..10].concat(), h[10..16].concat())
}

/// TF's physical device description for `Device mapping:` and the creation log:
/// `device: 0, name: NVIDIA H100 80GB HBM3, pci bus id: 0000:19:00.0, compute capability: 9.0`.
pub fn describe(ordinal: usize, g: &PhysicalGpu) -> String {
    format!("device: {ordinal}, name: {}, pci bus id: {}, compute capability: {}.{}", g.name, g.pci_bus_id, g.compute_capability.0, g.compute_capability.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_and_description_follow_nvidia_and_tf() {
        let b: [u8; 16] = [0x1a, 0x2b, 0x3c, 0x4d, 0x5e, 0x6f, 0x70, 0x81, 0x92, 0xa3, 0xb4, 0xc5, 0xd6, 0xe7, 0xf8, 0x09];
        assert_eq!(format_uuid(&b), "GPU-1a2b3c4d-5e6f-7081-92a3-b4c5d6e7f809");
        let g = PhysicalGpu {
            name: "NVIDIA H100 80GB HBM3".into(),
            total_memory: 85_000_000_000,
            compute_capability: (9, 0),
            pci_bus_id: "0000:19:00.0".into(),
            uuid: String::new(),
        };
        assert_eq!(describe(0, &g), "device: 0, name: NVIDIA H100 80GB HBM3, pci bus id: 0000:19:00.0, compute capability: 9.0");
    }

    #[test]
    fn discovery_never_panics_and_explains_an_empty_list() {
        let d = discover();
        if d.gpus.is_empty() {
            let reason = d.reason.expect("a reason when there is no GPU");
            assert!(!reason.is_empty());
            println!("skipped the GPU listing: no GPU here ({reason})");
        } else {
            for (i, g) in d.gpus.iter().enumerate() {
                assert!(g.total_memory > 0 && g.compute_capability.0 >= 3, "{g:?}");
                assert!(g.uuid.starts_with("GPU-"), "{g:?}");
                println!("{}", describe(i, g));
            }
        }
    }
}
