//! Devices: the [`Device`] trait through which the engine runs kernels and moves tensors,
//! the host CPU device, and emulated GPUs (docs/architecture.md, docs/gpu.md). Around them:
//! - [`spec`]: device names (TF's `DeviceNameUtils`, `DeviceSpec`);
//! - [`config`]: `CUDA_VISIBLE_DEVICES`, GPU memory options and per-device memory accounts;
//! - [`process`]: the process-wide `tf.config` settings;
//! - [`provider`]: the hook through which `oxiflow-cuda` supplies real GPUs.

pub mod config;
pub mod process;
pub mod provider;
pub mod spec;

use crate::error::{OxiflowError, Result};
use crate::ops::{GpuSupport, KernelCtx, Outputs};
use crate::tensor::Tensor;
use config::{MemoryAccount, MemoryStats};
use provider::GpuSource;
use spec::DeviceSpec;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The type of device kernels are registered for (TF's `DeviceType`, `DEVICE_CPU` and
/// `DEVICE_GPU`); printed as in device names (`CPU`, `GPU`). A device *string* may name any
/// type (`/device:TPU:0` parses, as in TF, and then matches no device); a device that
/// exists is one of these.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum DeviceType {
    /// The host CPU (`DEVICE_CPU`): every op has a kernel.
    Cpu,
    /// A GPU, real or emulated (`DEVICE_GPU`): ops whose `OpDef::gpu` covers the dtypes.
    Gpu,
}

impl DeviceType {
    /// `"CPU"` or `"GPU"`, as device names spell the type.
    pub const fn as_str(self) -> &'static str {
        match self {
            DeviceType::Cpu => "CPU",
            DeviceType::Gpu => "GPU",
        }
    }
}

impl std::fmt::Display for DeviceType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a device is, physically.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    /// The host CPU (`ThreadPoolDevice`).
    Cpu,
    /// A GPU emulated in host memory with CPU kernels but GPU placement rules: only ops with
    /// a GPU kernel may go there and data is copied in and out.
    EmulatedGpu,
    /// A real GPU supplied by the registered GPU provider ([`provider::GpuProvider`]; the
    /// C library registers `oxiflow-cuda`'s): the core knows no backend by name.
    ProvidedGpu,
}

/// Static description of a device (TF's `DeviceAttributes`).
#[derive(Clone, Debug)]
pub struct DeviceAttributes {
    /// Full name `/job:localhost/replica:0/task:0/device:GPU:0`.
    pub name: String,
    pub spec: DeviceSpec,
    /// `CPU` or `GPU` (what kernels are registered for).
    pub device_type: DeviceType,
    pub kind: DeviceKind,
    /// TF's `physical_device_desc` (`device: 0, name: emulated GPU (host memory), ...`).
    pub description: String,
}

/// A device the executor runs kernels on.
pub trait Device: Send + Sync {
    /// Name, type and description (TF's `DeviceAttributes`).
    fn attributes(&self) -> &DeviceAttributes;
    /// Runs the node's kernel on this device.
    fn compute(&self, ctx: &KernelCtx) -> Result<Outputs>;
    /// Makes a copy of `t` (which lives on `src`) on this device.
    fn copy_from(&self, t: &Tensor, src: &dyn Device) -> Result<Tensor>;
    /// Bytes this device currently holds in tensors it copied in (emulated/real GPUs).
    fn bytes_copied_in(&self) -> usize {
        0
    }
    /// The device's memory account, if its memory is limited and accounted (GPUs).
    fn memory(&self) -> Option<&TensorMemory> {
        None
    }
    /// A traced run starts: a device whose kernels run asynchronously (CUDA) starts timing
    /// them on the device itself (CUDA events), since host clocks only see the launch.
    fn start_kernel_timing(&self) {}
    /// The device-side times of the kernels run since [`Device::start_kernel_timing`]
    /// (waiting for them to finish), in nanoseconds since the Unix epoch; the session puts
    /// them in the step's statistics in place of the host's times for those nodes.
    fn take_kernel_times(&self) -> Vec<KernelTime> {
        Vec::new()
    }
}

/// When a node's kernel ran on its device, as the device measured it (TF's GPU tracer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelTime {
    /// The node's name.
    pub node: String,
    /// When the kernel started, nanoseconds since the Unix epoch.
    pub start_ns: u64,
    /// When it ended, same clock.
    pub end_ns: u64,
}

/// The memory a device's tensors take, against the device's limit: a [`MemoryAccount`]
/// plus the live buffers by address, so an output that shares its input's buffer
/// (`Identity`, `Reshape`) is counted once, and, while a traced run records them, the
/// `(time, bytes in use)` samples of every change (the profile's memory counter).
///
/// A tensor is counted from the moment the device produces it (kernel output, copy in,
/// feed) until the executor drops it after its last reader (or at the end of the run for
/// fetched and unread ones). A variable's value kept by the session between runs counts from
/// the assignment that stores it until it is replaced or the session is dropped
/// ([`crate::variable_store`]).
pub struct TensorMemory {
    account: MemoryAccount,
    inner: Mutex<LiveBuffers>,
}

#[derive(Default)]
struct LiveBuffers {
    /// buffer address -> (bytes, number of live tensors sharing it)
    live: HashMap<usize, (u64, u32)>,
    samples: Option<Vec<(Instant, u64)>>,
}

/// Address of a tensor's buffer (host array or device memory): tensors sharing a buffer
/// (`Identity`, `Reshape`) have the same key while any of them lives.
pub fn buffer_key(t: &Tensor) -> usize {
    match t {
        Tensor::Device(d) => d.buffer.ptr() as usize,
        _ => crate::with_array!(t, a => a.as_ptr() as usize),
    }
}

impl TensorMemory {
    /// Accounts for a device named `device` with `limit` bytes (`allow_growth`: the reserved
    /// region grows on demand, see [`MemoryStats::bytes_reserved`]).
    pub fn new(device: &str, limit: u64, allow_growth: bool) -> TensorMemory {
        TensorMemory { account: MemoryAccount::new(device, limit, allow_growth), inner: Mutex::new(LiveBuffers::default()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LiveBuffers> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts `tensors` as allocated on the device, all or none: over the limit, nothing is
    /// recorded and the error is TF's `ResourceExhausted` (device, request, bytes in use).
    pub fn allocate(&self, tensors: &[Tensor]) -> Result<()> {
        let mut g = self.lock();
        let mut done: Vec<usize> = Vec::new();
        for t in tensors {
            let bytes = t.num_bytes() as u64;
            if bytes == 0 {
                continue;
            }
            let key = buffer_key(t);
            if let Some(e) = g.live.get_mut(&key) {
                e.1 += 1;
                done.push(key);
                continue;
            }
            if let Err(e) = self.account.allocate(bytes) {
                for k in done {
                    Self::release(&self.account, &mut g, k);
                }
                return Err(e);
            }
            g.live.insert(key, (bytes, 1));
            done.push(key);
        }
        if !done.is_empty() {
            Self::sample(&self.account, &mut g);
        }
        Ok(())
    }

    fn release(account: &MemoryAccount, g: &mut LiveBuffers, key: usize) {
        if let Some(e) = g.live.get_mut(&key) {
            e.1 -= 1;
            if e.1 == 0 {
                account.free(e.0);
                g.live.remove(&key);
            }
        }
    }

    fn sample(account: &MemoryAccount, g: &mut LiveBuffers) {
        if let Some(s) = g.samples.as_mut() {
            s.push((Instant::now(), account.stats().bytes_in_use));
        }
    }

    /// Counts `tensors` (allocated earlier with [`TensorMemory::allocate`]) as freed. Call it
    /// before dropping them.
    pub fn free(&self, tensors: &[Tensor]) {
        let mut g = self.lock();
        let mut any = false;
        for t in tensors.iter().filter(|t| t.num_bytes() > 0) {
            Self::release(&self.account, &mut g, buffer_key(t));
            any = true;
        }
        if any {
            Self::sample(&self.account, &mut g);
        }
    }

    /// Current, peak, limit and reserved bytes.
    pub fn stats(&self) -> MemoryStats {
        self.account.stats()
    }

    /// Starts recording `(time, bytes in use)` samples (a traced run), with the current
    /// figure as the first sample.
    pub fn start_recording(&self) {
        let mut g = self.lock();
        g.samples = Some(vec![(Instant::now(), self.account.stats().bytes_in_use)]);
    }

    /// Stops recording and returns the samples.
    pub fn take_samples(&self) -> Vec<(Instant, u64)> {
        self.lock().samples.take().unwrap_or_default()
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
        CpuDevice { attrs: DeviceAttributes { name: spec.to_string(), spec, device_type: DeviceType::Cpu, kind: DeviceKind::Cpu, description: String::new() } }
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
        Ok(match (t, src.attributes().kind) {
            (Tensor::Device(d), _) => d.to_host()?,
            (_, DeviceKind::Cpu) => t.clone(),
            _ => t.deep_copy(),
        })
    }
}

/// A GPU emulated in host memory (`OXIFLOW_EMULATED_GPUS=N`). Kernels are the CPU kernels;
/// every tensor entering it is a real copy, counted in [`Device::bytes_copied_in`]. Its
/// memory is accounted against a limit ([`TensorMemory`]), so memory options and
/// out-of-memory errors behave as on a real GPU.
pub struct EmulatedGpu {
    attrs: DeviceAttributes,
    copied: AtomicUsize,
    memory: TensorMemory,
    physical: usize,
}

impl EmulatedGpu {
    /// `/job:localhost/replica:0/task:0/device:GPU:<id>` on physical emulated GPU `id`,
    /// with the default memory limit (see [`DeviceSet::configured`] for the options).
    pub fn new(id: u32) -> EmulatedGpu {
        let limit = crate::device::config::memory_limit(emulated_gpu_memory().unwrap_or(DEFAULT_EMULATED_GPU_MEMORY), None).unwrap_or(0);
        EmulatedGpu::with_memory(id, id as usize, id as usize, limit, false)
    }

    /// Session GPU `id` backed by physical emulated GPU `physical` (the `visible`-th GPU
    /// CUDA_VISIBLE_DEVICES shows), allowed `limit` bytes.
    pub fn with_memory(id: u32, physical: usize, visible: usize, limit: u64, allow_growth: bool) -> EmulatedGpu {
        let spec = DeviceSpec::local("GPU", id);
        let name = spec.to_string();
        EmulatedGpu {
            memory: TensorMemory::new(&name, limit, allow_growth),
            attrs: DeviceAttributes {
                name,
                spec,
                device_type: DeviceType::Gpu,
                kind: DeviceKind::EmulatedGpu,
                description: format!(
                    "device: {visible}, name: Oxiflow emulated GPU (host memory, CPU kernels), pci bus id: emulated:{physical}, uuid: {}, memory limit: {limit} bytes",
                    crate::device::config::emulated_gpu_uuid(physical)
                ),
            },
            copied: AtomicUsize::new(0),
            physical,
        }
    }

    /// Index of the physical (emulated) GPU behind this device.
    pub fn physical(&self) -> usize {
        self.physical
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
            GpuSupport::Types(ts) => ctx.inputs.iter().all(|t| ts.contains(&t.dtype())) && n.outputs.iter().all(|t| ts.contains(&t.dtype)),
        };
        if !ok {
            return Err(OxiflowError::Internal(format!("{} '{}' has no GPU kernel but was run on {}", n.op.name, n.name, self.attrs.name)));
        }
        let outs = (n.op.kernel)(ctx)?;
        self.memory.allocate(&outs)?;
        Ok(outs)
    }
    fn copy_from(&self, t: &Tensor, _src: &dyn Device) -> Result<Tensor> {
        let c = match t {
            Tensor::Device(d) => d.to_host()?,
            _ => t.deep_copy(),
        };
        self.memory.allocate(std::slice::from_ref(&c))?;
        self.copied.fetch_add(t.num_bytes(), Ordering::Relaxed);
        Ok(c)
    }
    fn bytes_copied_in(&self) -> usize {
        self.copied.load(Ordering::Relaxed)
    }
    fn memory(&self) -> Option<&TensorMemory> {
        Some(&self.memory)
    }
}

/// Total memory of each emulated GPU when `OXIFLOW_EMULATED_GPU_MEMORY_MB` is not set:
/// 16 GiB.
pub const DEFAULT_EMULATED_GPU_MEMORY: u64 = 16 << 30;

/// Environment variable giving each emulated GPU's total memory in MiB.
pub const EMULATED_GPU_MEMORY_ENV: &str = "OXIFLOW_EMULATED_GPU_MEMORY_MB";

/// Total memory of an emulated GPU in bytes: `OXIFLOW_EMULATED_GPU_MEMORY_MB` (MiB) or
/// [`DEFAULT_EMULATED_GPU_MEMORY`]; an error naming the variable when it is not a positive
/// integer.
pub fn emulated_gpu_memory() -> Result<u64> {
    match std::env::var(EMULATED_GPU_MEMORY_ENV) {
        Err(_) => Ok(DEFAULT_EMULATED_GPU_MEMORY),
        Ok(s) if s.trim().is_empty() => Ok(DEFAULT_EMULATED_GPU_MEMORY),
        Ok(s) => match s.trim().parse::<u64>() {
            Ok(n) if n > 0 && n < (1 << 30) => Ok(n << 20),
            _ => Err(OxiflowError::InvalidArgument(format!("{EMULATED_GPU_MEMORY_ENV}='{s}': expected a positive number of MiB"))),
        },
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
            _ => Err(OxiflowError::InvalidArgument(format!("{EMULATED_GPUS_ENV}='{s}': expected a number of GPUs between 0 and 64"))),
        },
    }
}

/// The devices of a session, in TF's listing order (CPUs, then GPUs).
#[derive(Clone)]
pub struct DeviceSet {
    pub devices: Vec<Arc<dyn Device>>,
    accounted: bool,
    /// What configuring the set noticed and went on from (a `CUDA_VISIBLE_DEVICES` entry
    /// that ended the list); the session logs it.
    pub warnings: Vec<String>,
}

impl DeviceSet {
    /// `cpus` CPU devices and `gpus` emulated GPUs (default memory limits).
    pub fn new(cpus: usize, gpus: usize) -> DeviceSet {
        let mut devices: Vec<Arc<dyn Device>> = Vec::new();
        for i in 0..cpus.max(1) {
            devices.push(Arc::new(CpuDevice::new(i as u32)));
        }
        for i in 0..gpus {
            devices.push(Arc::new(EmulatedGpu::new(i as u32)));
        }
        DeviceSet::from_devices(devices)
    }

    /// A set of these devices (CPUs first, as TF lists them).
    pub fn from_devices(devices: Vec<Arc<dyn Device>>) -> DeviceSet {
        let accounted = devices.iter().any(|d| d.memory().is_some());
        DeviceSet { devices, accounted, warnings: Vec::new() }
    }

    /// `true` when some device accounts its tensors' memory (the executor then reports
    /// every tensor it drops).
    pub fn has_memory_accounts(&self) -> bool {
        self.accounted
    }

    /// The devices of a session: `cpus` logical CPUs, then the GPUs among `physical_gpus`
    /// emulated ones that `cuda_visible` (the value of `CUDA_VISIBLE_DEVICES`, `None`: unset)
    /// and `opts.visible_device_list` select, in their order, at most `max_gpus` of them;
    /// each is one `/device:GPU:k`, or several when `opts.virtual_devices_mb` splits it.
    /// A GPU's memory limit is `opts.per_process_gpu_memory_fraction` of
    /// [`emulated_gpu_memory`] (TF's default without a fraction: total minus a system
    /// reserve), or its virtual device's limit. `TF_FORCE_GPU_ALLOW_GROWTH=true|false`
    /// overrides `opts.allow_growth`, as in TF.
    ///
    /// Errors: TF's `CUDA_VISIBLE_DEVICES` / `visible_device_list` errors (an invalid or
    /// repeated entry), a fraction outside (0, 1], a fraction together with virtual devices,
    /// virtual devices asking more memory than the GPU has, a bad
    /// `OXIFLOW_EMULATED_GPU_MEMORY_MB`.
    pub fn configured(
        cpus: usize,
        physical_gpus: usize,
        max_gpus: Option<usize>,
        opts: &crate::device::config::GpuOptions,
        cuda_visible: Option<&str>,
    ) -> Result<DeviceSet> {
        DeviceSet::configured_from(cpus, GpuSource::Emulated(physical_gpus), max_gpus, opts, cuda_visible)
    }

    /// [`DeviceSet::configured`] with GPUs from `source`: for real GPUs the driver has
    /// applied `CUDA_VISIBLE_DEVICES` already (so `cuda_visible` is not applied again), each
    /// GPU's total memory is its own, and the provider creates the devices.
    pub fn configured_from(
        cpus: usize,
        source: GpuSource,
        max_gpus: Option<usize>,
        opts: &crate::device::config::GpuOptions,
        cuda_visible: Option<&str>,
    ) -> Result<DeviceSet> {
        use crate::device::config::{cuda_visible_devices, memory_limit, session_gpus};
        let (visible, warnings) = match source {
            GpuSource::Emulated(n) => {
                let v = cuda_visible_devices(cuda_visible, n);
                (v.ids, v.warning.into_iter().collect::<Vec<_>>())
            }
            GpuSource::Real(p) => ((0..p.gpus().len()).collect(), Vec::new()),
        };
        let mut gpus = session_gpus(&visible, opts.visible_device_list.as_deref())?;
        if let Some(m) = max_gpus {
            gpus.truncate(m);
        }
        let mut devices: Vec<Arc<dyn Device>> = Vec::new();
        for i in 0..cpus.max(1) {
            devices.push(Arc::new(CpuDevice::new(i as u32)));
        }
        if gpus.is_empty() {
            return Ok(DeviceSet { warnings, ..DeviceSet::from_devices(devices) });
        }
        let emulated_total = match source {
            GpuSource::Emulated(_) => emulated_gpu_memory()?,
            GpuSource::Real(_) => 0,
        };
        let has_virtual = opts.virtual_devices_mb.iter().any(|v| !v.is_empty());
        if has_virtual && opts.per_process_gpu_memory_fraction.is_some() {
            return Err(OxiflowError::InvalidArgument("per_process_gpu_memory_fraction cannot be combined with virtual devices (memory_limit_mb)".into()));
        }
        let growth = match std::env::var("TF_FORCE_GPU_ALLOW_GROWTH").ok().as_deref() {
            Some("true") => true,
            Some("false") => false,
            _ => opts.allow_growth,
        };
        let mut id = 0u32;
        for (k, &phys) in gpus.iter().enumerate() {
            let vis = visible.iter().position(|&v| v == phys).unwrap_or(k);
            let total = match source {
                GpuSource::Emulated(_) => emulated_total,
                GpuSource::Real(p) => p.gpus()[phys].total_memory,
            };
            let limits: Vec<u64> = match opts.virtual_devices_mb.get(k).filter(|v| !v.is_empty()) {
                Some(mbs) => {
                    let limits = mbs
                        .iter()
                        .map(|&m| {
                            m.checked_mul(1 << 20)
                                .ok_or_else(|| OxiflowError::InvalidArgument(format!("virtual device memory_limit_mb {m} is too large (more than 2^44 MiB)")))
                        })
                        .collect::<Result<Vec<u64>>>()?;
                    let want = limits.iter().fold(0u64, |t, &b| t.saturating_add(b));
                    if want > total {
                        return Err(OxiflowError::InvalidArgument(format!(
                            "virtual devices of GPU {k} ask for {} MiB but the GPU has {} MiB",
                            want >> 20,
                            total >> 20
                        )));
                    }
                    limits
                }
                None => vec![memory_limit(total, opts.per_process_gpu_memory_fraction)?],
            };
            for limit in limits {
                devices.push(match source {
                    GpuSource::Emulated(_) => Arc::new(EmulatedGpu::with_memory(id, phys, vis, limit, growth)),
                    GpuSource::Real(p) => p.create(id, phys, limit, growth)?,
                });
                id += 1;
            }
        }
        Ok(DeviceSet { warnings, ..DeviceSet::from_devices(devices) })
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
        self.devices.iter().any(|d| d.attributes().device_type == DeviceType::Gpu)
    }
}
