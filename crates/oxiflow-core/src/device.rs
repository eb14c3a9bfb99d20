//! Devices: the [`Device`] trait through which the engine runs kernels and moves tensors,
//! the host CPU device, and emulated GPUs (DESIGN.md "GPUs without a GPU").

use crate::device_spec::DeviceSpec;
use crate::error::{OxiflowError, Result};
use crate::ops::{GpuSupport, KernelCtx, Outputs};
use crate::tensor::Tensor;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// What a device is, physically.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    /// The host CPU (`ThreadPoolDevice`).
    Cpu,
    /// A GPU emulated in host memory with CPU kernels but GPU placement rules: only ops with
    /// a GPU kernel may go there and data is copied in and out.
    EmulatedGpu,
    /// A real CUDA GPU (provided by `oxiflow-cuda`).
    CudaGpu,
}

/// Static description of a device (TF's `DeviceAttributes`).
#[derive(Clone, Debug)]
pub struct DeviceAttributes {
    /// Full name `/job:localhost/replica:0/task:0/device:GPU:0`.
    pub name: String,
    pub spec: DeviceSpec,
    /// `CPU` or `GPU` (what kernels are registered for).
    pub device_type: String,
    pub kind: DeviceKind,
    /// TF's `physical_device_desc` (`device: 0, name: emulated GPU (host memory), ...`).
    pub description: String,
}

/// A device the executor runs kernels on.
pub trait Device: Send + Sync {
    fn attributes(&self) -> &DeviceAttributes;
    /// Runs the node's kernel on this device.
    fn compute(&self, ctx: &KernelCtx) -> Result<Outputs>;
    /// Makes a copy of `t` (which lives on `src`) on this device.
    fn copy_from(&self, t: &Tensor, src: &dyn Device) -> Result<Tensor>;
    /// Bytes this device currently holds in tensors it copied in (emulated/real GPUs).
    fn bytes_copied_in(&self) -> usize {
        0
    }
}

/// The host CPU: runs the registered CPU kernels, shares host buffers with other CPU devices.
pub struct CpuDevice {
    attrs: DeviceAttributes,
}

impl CpuDevice {
    /// `/job:localhost/replica:0/task:0/device:CPU:<id>`.
    pub fn new(id: u32) -> CpuDevice {
        let spec = DeviceSpec::local("CPU", id);
        CpuDevice {
            attrs: DeviceAttributes {
                name: spec.to_string(),
                spec,
                device_type: "CPU".into(),
                kind: DeviceKind::Cpu,
                description: String::new(),
            },
        }
    }
}

impl Device for CpuDevice {
    fn attributes(&self) -> &DeviceAttributes {
        &self.attrs
    }
    fn compute(&self, ctx: &KernelCtx) -> Result<Outputs> {
        (ctx.node.op.kernel)(ctx)
    }
    fn copy_from(&self, t: &Tensor, src: &dyn Device) -> Result<Tensor> {
        Ok(match src.attributes().kind {
            DeviceKind::Cpu => t.clone(),
            _ => t.deep_copy(),
        })
    }
}

/// A GPU emulated in host memory (`OXIFLOW_EMULATED_GPUS=N`). Kernels are the CPU kernels;
/// every tensor entering it is a real copy, counted in [`Device::bytes_copied_in`].
pub struct EmulatedGpu {
    attrs: DeviceAttributes,
    copied: AtomicUsize,
}

impl EmulatedGpu {
    /// `/job:localhost/replica:0/task:0/device:GPU:<id>`.
    pub fn new(id: u32) -> EmulatedGpu {
        let spec = DeviceSpec::local("GPU", id);
        EmulatedGpu {
            attrs: DeviceAttributes {
                name: spec.to_string(),
                spec,
                device_type: "GPU".into(),
                kind: DeviceKind::EmulatedGpu,
                description: format!("device: {id}, name: Oxiflow emulated GPU (host memory, CPU kernels)"),
            },
            copied: AtomicUsize::new(0),
        }
    }
}

impl Device for EmulatedGpu {
    fn attributes(&self) -> &DeviceAttributes {
        &self.attrs
    }
    fn compute(&self, ctx: &KernelCtx) -> Result<Outputs> {
        let n = ctx.node;
        // The placer only puts ops with a GPU kernel here; this guards the executor's
        // invariant without allocating on the per-op path.
        let ok = match n.op.gpu {
            GpuSupport::Any => true,
            GpuSupport::None => false,
            GpuSupport::Types(ts) => {
                ctx.inputs.iter().all(|t| ts.contains(&t.dtype())) && n.outputs.iter().all(|t| ts.contains(&t.dtype))
            }
        };
        if !ok {
            return Err(OxiflowError::Internal(format!(
                "{} '{}' has no GPU kernel but was run on {}",
                n.op.name, n.name, self.attrs.name
            )));
        }
        (n.op.kernel)(ctx)
    }
    fn copy_from(&self, t: &Tensor, _src: &dyn Device) -> Result<Tensor> {
        self.copied.fetch_add(t.num_bytes(), Ordering::Relaxed);
        Ok(t.deep_copy())
    }
    fn bytes_copied_in(&self) -> usize {
        self.copied.load(Ordering::Relaxed)
    }
}

/// Environment variable giving the number of emulated GPUs.
pub const EMULATED_GPUS_ENV: &str = "OXIFLOW_EMULATED_GPUS";

/// Number of emulated GPUs requested by `OXIFLOW_EMULATED_GPUS` (0 when unset);
/// an error naming the variable when it is not a small non-negative integer.
pub fn emulated_gpus_from_env() -> Result<usize> {
    match std::env::var(EMULATED_GPUS_ENV) {
        Err(_) => Ok(0),
        Ok(s) if s.trim().is_empty() => Ok(0),
        Ok(s) => match s.trim().parse::<usize>() {
            Ok(n) if n <= 64 => Ok(n),
            _ => Err(OxiflowError::InvalidArgument(format!(
                "{EMULATED_GPUS_ENV}='{s}': expected a number of GPUs between 0 and 64"
            ))),
        },
    }
}

/// The devices of a session, in TF's listing order (CPUs, then GPUs).
#[derive(Clone)]
pub struct DeviceSet {
    pub devices: Vec<Arc<dyn Device>>,
}

impl DeviceSet {
    /// `cpus` CPU devices and `gpus` emulated GPUs.
    pub fn new(cpus: usize, gpus: usize) -> DeviceSet {
        let mut devices: Vec<Arc<dyn Device>> = Vec::new();
        for i in 0..cpus.max(1) {
            devices.push(Arc::new(CpuDevice::new(i as u32)));
        }
        for i in 0..gpus {
            devices.push(Arc::new(EmulatedGpu::new(i as u32)));
        }
        DeviceSet { devices }
    }

    /// Full names of all devices, sorted (as TF lists them in placement errors).
    pub fn sorted_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.devices.iter().map(|d| d.attributes().name.clone()).collect();
        v.sort();
        v
    }

    /// Index of the device with this full name.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.devices.iter().position(|d| d.attributes().name == name)
    }

    /// `true` when some device is a GPU (real or emulated).
    pub fn has_gpu(&self) -> bool {
        self.devices.iter().any(|d| d.attributes().device_type == "GPU")
    }
}
