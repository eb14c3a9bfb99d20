//! [`CudaDevice`]: a real GPU behind the core's [`Device`] trait.
//!
//! - Tensors stay in device memory between ops ([`Tensor::Device`] holding a
//!   [`CudaBuffer`]): blocks of the device's [`Allocator`], returned when the last tensor
//!   sharing them is dropped.
//! - One compute stream per device, on which every kernel is enqueued in the executor's
//!   order; a second stream for host<->device copies through a pinned staging buffer,
//!   ordered against the compute stream with events, as TF's `GPUDevice` uses its
//!   `host_to_device` / `device_to_host` streams.
//! - Copies are synchronous for the caller (`copy_from` returns once the data is on the
//!   device; `to_host` once it is on the host), so a `_Send`/`_Recv` pair behaves as on
//!   the emulated GPU. Overlapping copies with compute is left for later (see docs/gpu.md).
//! - Ops launched as `GpuLaunch::DeviceHandled` run without a kernel (aliasing, state); the
//!   collectives (`GpuLaunch::Collective`) through NCCL ([`collective`]); every other op
//!   goes through its [`launch::launcher`].
//! - A traced run times kernels with CUDA events around each launch, mapped onto the host
//!   clock through an anchor event ([`Device::take_kernel_times`]), as TF's GPU tracer does.
//! - Training ops (`Apply*`) update copies of their variables and store the copies, so a
//!   value read earlier in the step is never changed under its reader: the CPU kernels'
//!   semantics, at the price of one device-to-device copy per variable and step.

use crate::allocator::{Allocator, Block, RawMemory};
use crate::error::{CudaError, CudaResult};
use crate::launch::{self, DevArg, LaunchCtx, Scratch};
use cudarc::driver::{result, sys, CudaContext, CudaEvent, CudaFunction, CudaStream};
use oxiflow_core::device::{Device, DeviceAttributes, DeviceKind, KernelTime, TensorMemory};
use oxiflow_core::graph::NodeId;
use oxiflow_core::ops::{GpuLaunch, KernelCtx, Outputs};
use oxiflow_core::tensor::{DeviceBuffer, DeviceTensor};
use oxiflow_core::{DType, DeviceSpec, Layout, OxiflowError, Result, Tensor};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

mod collective;

/// Finds compiled kernel entry points (the kernel library of `crate::kernels`).
pub trait KernelLookup: Send + Sync {
    /// The entry point `name` (`sin_f32`); the error names the entry.
    fn function(&self, name: &str) -> CudaResult<CudaFunction>;
}

/// Maps a driver error to [`CudaError::Driver`] naming the device and the call.
fn driver_err<'a>(device: &'a str, call: &'static str) -> impl Fn(cudarc::driver::DriverError) -> CudaError + 'a {
    move |e| CudaError::Driver { device: device.to_string(), call: call.to_string(), msg: e.to_string() }
}

/// `cuMemAlloc`/`cuMemFree` in one context: where the allocator's regions come from.
pub struct DriverMemory {
    ctx: Arc<CudaContext>,
    device: String,
}

impl RawMemory for DriverMemory {
    fn alloc(&self, bytes: u64) -> CudaResult<u64> {
        self.ctx.bind_to_thread().map_err(driver_err(&self.device, "cuCtxSetCurrent"))?;
        // SAFETY: plain device allocation in a bound context.
        unsafe { result::malloc_sync(bytes as usize) }.map_err(|e| {
            if e.0 == sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY {
                CudaError::DeviceFull { device: self.device.clone(), requested: bytes, msg: "CUDA_ERROR_OUT_OF_MEMORY".into() }
            } else {
                driver_err(&self.device, "cuMemAlloc")(e)
            }
        })
    }
    fn free(&self, ptr: u64) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `ptr` came from `alloc` and is freed once (the allocator's contract).
            let _ = unsafe { result::free_sync(ptr) };
        }
    }
}

/// A page-locked host buffer for copies, grown on demand (`cuMemHostAlloc`).
struct Staging {
    ptr: *mut u8,
    cap: usize,
}
// SAFETY: the pointer is only used under the device's staging mutex.
unsafe impl Send for Staging {}

impl Staging {
    fn ensure(&mut self, bytes: usize, device: &str) -> CudaResult<*mut u8> {
        if bytes > self.cap {
            if !self.ptr.is_null() {
                // SAFETY: allocated by malloc_host below; no copy is in flight (callers sync).
                let _ = unsafe { result::free_host(self.ptr as *mut _) };
                self.ptr = std::ptr::null_mut();
                self.cap = 0;
            }
            let cap = bytes.next_power_of_two().max(1 << 20);
            // SAFETY: page-locked allocation of `cap` bytes.
            let p = unsafe { result::malloc_host(cap, 0) }.map_err(driver_err(device, "cuMemHostAlloc"))?;
            self.ptr = p as *mut u8;
            self.cap = cap;
        }
        Ok(self.ptr)
    }
}

/// What a device and its buffers share: context, streams, staging memory.
pub struct Shared {
    name: String,
    ctx: Arc<CudaContext>,
    compute: Arc<CudaStream>,
    copy: Arc<CudaStream>,
    staging: Mutex<Staging>,
}

impl Shared {
    /// Makes the copy stream wait for everything enqueued on the compute stream so far.
    fn copy_after_compute(&self) -> CudaResult<()> {
        let ev = self.compute.record_event(None).map_err(driver_err(&self.name, "cuEventRecord"))?;
        self.copy.wait(&ev).map_err(driver_err(&self.name, "cuStreamWaitEvent"))
    }

    /// Copies `dims` elements of `dtype` at `ptr` to a new host tensor, after the compute
    /// stream's pending work.
    fn download(&self, ptr: u64, dtype: DType, dims: &[usize]) -> CudaResult<Tensor> {
        let n: usize = dims.iter().product();
        let bytes = n * dtype.size_of();
        self.ctx.bind_to_thread().map_err(driver_err(&self.name, "cuCtxSetCurrent"))?;
        let mut st = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        let host = st.ensure(bytes.max(1), &self.name)?;
        if bytes > 0 {
            self.copy_after_compute()?;
            // SAFETY: `host` has room for `bytes`; the stream is synchronized before reuse.
            unsafe {
                let dst = std::slice::from_raw_parts_mut(host, bytes);
                result::memcpy_dtoh_async(dst, ptr, self.copy.cu_stream()).map_err(driver_err(&self.name, "cuMemcpyDtoHAsync"))?;
            }
            self.copy.synchronize().map_err(driver_err(&self.name, "cuStreamSynchronize"))?;
        }
        // SAFETY: the staging buffer is page-aligned and holds `n` elements of `dtype`.
        unsafe { Tensor::from_raw(dtype, dims, host, Layout::RowMajor) }.map_err(|e| CudaError::Unsupported(e.to_string()))
    }

    /// Copies a host tensor into `block`; the compute stream waits for the copy.
    fn upload(&self, host_t: &Tensor, block: &Block) -> CudaResult<()> {
        let bytes = host_t.num_bytes();
        if bytes == 0 {
            return Ok(());
        }
        self.ctx.bind_to_thread().map_err(driver_err(&self.name, "cuCtxSetCurrent"))?;
        let mut st = self.staging.lock().unwrap_or_else(|p| p.into_inner());
        let host = st.ensure(bytes, &self.name)?;
        // SAFETY: room for `len()` elements (Bool as one byte each), row-major.
        unsafe { host_t.write_raw(host, Layout::RowMajor) };
        // the block may have been freed by a kernel still queued on the compute stream
        self.copy_after_compute()?;
        // SAFETY: `block` holds at least `bytes`; staging stays alive until the sync below.
        unsafe {
            let src = std::slice::from_raw_parts(host as *const u8, bytes);
            result::memcpy_htod_async(block.ptr(), src, self.copy.cu_stream()).map_err(driver_err(&self.name, "cuMemcpyHtoDAsync"))?;
        }
        let done = self.copy.record_event(None).map_err(driver_err(&self.name, "cuEventRecord"))?;
        self.compute.wait(&done).map_err(driver_err(&self.name, "cuStreamWaitEvent"))?;
        self.copy.synchronize().map_err(driver_err(&self.name, "cuStreamSynchronize"))
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let st = self.staging.get_mut().unwrap_or_else(|p| p.into_inner());
        if !st.ptr.is_null() && self.ctx.bind_to_thread().is_ok() {
            // SAFETY: allocated by Staging::ensure; no copy in flight once the device is dropped.
            let _ = unsafe { result::free_host(st.ptr as *mut _) };
        }
    }
}

/// A tensor's memory on a [`CudaDevice`]: an allocator block plus what is needed to copy
/// it back.
pub struct CudaBuffer {
    block: Block,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for CudaBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaBuffer({} bytes at {:#x} on {})", self.block.requested(), self.block.ptr(), self.shared.name)
    }
}

impl DeviceBuffer for CudaBuffer {
    fn device(&self) -> &str {
        &self.shared.name
    }
    fn ptr(&self) -> u64 {
        self.block.ptr()
    }
    fn num_bytes(&self) -> usize {
        self.block.requested() as usize
    }
    fn to_host(&self, dtype: DType, dims: &[usize]) -> Result<Tensor> {
        Ok(self.shared.download(self.block.ptr(), dtype, dims)?)
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

struct ScratchBlock(Block);
impl Scratch for ScratchBlock {
    fn ptr(&self) -> u64 {
        self.0.ptr()
    }
}

/// What the session devices on one GPU share while any of them lives: the context, the
/// compute and copy streams, the staging buffer, the allocator, cuBLAS and the launch lock.
///
/// TF keeps one BFC allocator per GPU for the whole process (`GPUProcessState`) and one
/// stream group per GPU (`BaseGPUDevice::StreamGroupFactory`), whatever the number of
/// sessions: a second session neither takes the GPU's memory a second time nor frees
/// blocks that another stream may still be using. Here sessions on the same physical GPU
/// and session device id with the same memory limit and growth mode share one core (found
/// through [`GpuCore::shared_or_new`]); the core is dropped with its last session device
/// and tensor, so its memory goes back to the driver then (TF keeps it until the process
/// ends). A session with other `gpu_options` gets a core of its own, which must find room
/// on the device; if it cannot, its allocation fails naming what holds the memory.
pub struct GpuCore {
    shared: Arc<Shared>,
    allocator: Arc<Allocator>,
    kernels: Arc<dyn KernelLookup>,
    blas: Option<cudarc::cublas::CudaBlas>,
    /// One launch at a time: a stream is serial anyway, and cuBLAS handles are not
    /// thread-safe.
    launch_lock: Mutex<()>,
}

/// Physical ordinal, session device id, limit in bytes, `allow_growth`.
type CoreKey = (usize, u32, u64, bool);

impl GpuCore {
    /// The live core for GPU `id` on CUDA ordinal `ordinal` with this `limit` and growth
    /// mode, or a new one (context, two streams, cuBLAS when it loads, an allocator).
    /// `kernels` is asked for the kernel library only when a core is made. Errors: the
    /// driver's (context or stream creation), naming the device.
    pub fn shared_or_new(
        id: u32,
        ordinal: usize,
        limit: u64,
        allow_growth: bool,
        kernels: impl FnOnce(&Arc<CudaContext>) -> CudaResult<Arc<dyn KernelLookup>>,
    ) -> CudaResult<Arc<GpuCore>> {
        static CORES: Mutex<Vec<(CoreKey, std::sync::Weak<GpuCore>)>> = Mutex::new(Vec::new());
        let key = (ordinal, id, limit, allow_growth);
        // held while a core is made, so two sessions starting at once share one
        let mut cores = CORES.lock().unwrap_or_else(|p| p.into_inner());
        cores.retain(|(_, w)| w.strong_count() > 0);
        if let Some(core) = cores.iter().find(|(k, _)| *k == key).and_then(|(_, w)| w.upgrade()) {
            return Ok(core);
        }
        let name = DeviceSpec::local("GPU", id).to_string();
        let ctx = CudaContext::new(ordinal).map_err(driver_err(&name, "cuDevicePrimaryCtxRetain"))?;
        let kernels = kernels(&ctx)?;
        let compute = ctx.new_stream().map_err(driver_err(&name, "cuStreamCreate"))?;
        let copy = ctx.new_stream().map_err(driver_err(&name, "cuStreamCreate"))?;
        // cuBLAS is loaded on demand by cudarc, which panics when libcublas is missing: probe
        // first (MatMul then reports that cuBLAS is unavailable).
        let blas = if crate::probe::cublas_status().is_present() {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cudarc::cublas::CudaBlas::new(compute.clone()).ok())).ok().flatten()
        } else {
            None
        };
        let raw = DriverMemory { ctx: ctx.clone(), device: name.clone() };
        let allocator = Allocator::new(name.clone(), limit, allow_growth, Box::new(raw));
        let shared = Arc::new(Shared { name, ctx, compute, copy, staging: Mutex::new(Staging { ptr: std::ptr::null_mut(), cap: 0 }) });
        let core = Arc::new(GpuCore { shared, allocator, kernels, blas, launch_lock: Mutex::new(()) });
        cores.push((key, Arc::downgrade(&core)));
        Ok(core)
    }
}

/// A CUDA GPU as a session device (`/job:localhost/replica:0/task:0/device:GPU:<id>`).
pub struct CudaDevice {
    attrs: DeviceAttributes,
    /// Context, streams, allocator and cuBLAS, shared with other sessions' devices.
    core: Arc<GpuCore>,
    memory: TensorMemory,
    /// Bytes copied onto the device (feeds, `_Recv`), as the emulated GPU counts them.
    copied: AtomicUsize,
    /// `Const` values uploaded once per session device: node -> (the host value, whose
    /// buffer the entry keeps alive so its address identifies it, and the device copy).
    consts: Mutex<HashMap<NodeId, (Tensor, Tensor)>>,
    /// Kernel timing of a traced run (CUDA events), `None` otherwise.
    timing: Mutex<Option<Timing>>,
}

/// CUDA events around each kernel of a traced run, and an anchor event whose host time is
/// known, so event times map onto the host's clock.
struct Timing {
    anchor: CudaEvent,
    anchor_ns: u64,
    kernels: Vec<(String, CudaEvent, CudaEvent)>,
}

/// `true` when two host tensors share one buffer (same address, dtype and dims).
fn same_buffer(a: &Tensor, b: &Tensor) -> bool {
    use oxiflow_core::device::buffer_key;
    a.dtype() == b.dtype() && a.dims() == b.dims() && buffer_key(a) == buffer_key(b)
}

fn unix_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

impl CudaDevice {
    /// Session device `GPU:<id>` on CUDA ordinal `ordinal` (after `CUDA_VISIBLE_DEVICES`),
    /// allowed `limit` bytes, growing on demand or taking the whole limit at the first
    /// allocation (`allow_growth`); `description` is TF's physical device description.
    /// Its streams and allocator are those of a live session device with the same GPU,
    /// id, limit and growth mode, if there is one ([`GpuCore`]).
    /// Errors: the driver's (context or stream creation), naming the device.
    /// `kernels` gives the kernel library for the device's context (compiled or loaded
    /// from the disk cache by the caller).
    pub fn new(
        id: u32,
        ordinal: usize,
        limit: u64,
        allow_growth: bool,
        description: String,
        kernels: impl FnOnce(&Arc<CudaContext>) -> CudaResult<Arc<dyn KernelLookup>>,
    ) -> CudaResult<CudaDevice> {
        let spec = DeviceSpec::local("GPU", id);
        let name = spec.to_string();
        let core = GpuCore::shared_or_new(id, ordinal, limit, allow_growth, kernels)?;
        Ok(CudaDevice {
            memory: TensorMemory::new(&name, limit, allow_growth),
            attrs: DeviceAttributes {
                spec,
                device_type: oxiflow_core::device::DeviceType::Gpu,
                kind: DeviceKind::ProvidedGpu,
                description: format!("{description}, memory limit: {limit} bytes"),
                name: name.clone(),
            },
            core,
            copied: AtomicUsize::new(0),
            consts: Mutex::new(HashMap::new()),
            timing: Mutex::new(None),
        })
    }

    /// The device's allocator (its figures are the real reservation; [`Device::memory`]
    /// counts tensors as the emulated GPU does).
    pub fn allocator(&self) -> &Arc<Allocator> {
        &self.core.allocator
    }

    fn wrap(&self, block: Block, dtype: DType, dims: Vec<usize>) -> Tensor {
        Tensor::Device(DeviceTensor { dtype, dims, buffer: Arc::new(CudaBuffer { block, shared: self.core.shared.clone() }) })
    }

    /// A tensor resident here: itself when it already is, else uploaded (downloaded first
    /// when it lives on another device).
    fn resident(&self, t: &Tensor) -> Result<Tensor> {
        if let Tensor::Device(d) = t {
            if d.buffer.device() == self.attrs.name {
                return Ok(t.clone());
            }
        }
        let host = t.to_host()?;
        let block = self.core.allocator.allocate(host.num_bytes() as u64)?;
        self.core.shared.upload(&host, &block)?;
        self.copied.fetch_add(host.num_bytes(), Ordering::Relaxed);
        Ok(self.wrap(block, host.dtype(), host.dims().to_vec()))
    }

    fn arg(t: &Tensor) -> DevArg {
        match t {
            Tensor::Device(d) => DevArg { ptr: d.buffer.ptr(), dtype: d.dtype, dims: d.dims.clone() },
            _ => unreachable!("made resident first"),
        }
    }

    /// A fresh copy of a resident tensor, enqueued on the compute stream.
    fn device_copy(&self, t: &Tensor) -> Result<Tensor> {
        let a = Self::arg(t);
        let block = self.core.allocator.allocate(a.num_bytes() as u64)?;
        if a.num_bytes() > 0 {
            // SAFETY: both blocks hold `num_bytes`; ordered on the compute stream.
            unsafe { result::memcpy_dtod_async(block.ptr(), a.ptr, a.num_bytes(), self.core.shared.compute.cu_stream()) }
                .map_err(driver_err(&self.attrs.name, "cuMemcpyDtoDAsync"))?;
        }
        Ok(self.wrap(block, a.dtype, a.dims))
    }

    /// Errors keep their kind (a CPU kernel's, the variable store's, the allocator's
    /// ResourceExhausted): these functions return the core's error type.
    fn handled(&self, ctx: &KernelCtx) -> Result<Outputs> {
        let node = ctx.node;
        let outs: Outputs = match node.op.name {
            "Const" => {
                let host = (node.op.kernel)(ctx)?;
                let mut c = self.consts.lock().unwrap_or_else(|p| p.into_inner());
                // a node id can be reused after a failed `gradients` call removed nodes: the
                // entry counts only if it holds this very value buffer
                if let Some((h, t)) = c.get(&node.id) {
                    if same_buffer(h, &host[0]) {
                        return Ok(oxiflow_core::ops::smallvec![t.clone()]);
                    }
                }
                let t = self.resident(&host[0])?;
                c.insert(node.id, (host[0].clone(), t.clone()));
                oxiflow_core::ops::smallvec![t]
            }
            // input 0's buffer with the output's dimensions; the run-time shape ops of
            // gradients with unknown dimensions first launch the `Sum` or `BroadcastTo` they
            // stand for (`standard_node`)
            "Reshape" | "Squeeze" | "ExpandDims" | "_SumToShapeOf" | "_BroadcastToShapeOf" | "_ReshapeToShapeOf" => {
                let std = if node.op.name.starts_with('_') { oxiflow_core::ops::dynamic_shape::standard_node(node, ctx.inputs[0].dims())? } else { None };
                let out = match std {
                    None => ctx.inputs[0].clone(),
                    Some(n) => self.launched(&KernelCtx { node: &n, inputs: &ctx.inputs[..1], state: ctx.state })?.swap_remove(0),
                };
                let Tensor::Device(d) = &out else { unreachable!("made resident first") };
                oxiflow_core::ops::smallvec![Tensor::Device(DeviceTensor {
                    dtype: d.dtype,
                    dims: node.outputs[0].shape.dims().to_vec(),
                    buffer: d.buffer.clone()
                })]
            }
            // a gather's gradient into params' run-time shape: the ScatterNd it stands for,
            // on indices and updates (params, input 2, gives only its dimensions)
            "_ScatterNdToShapeOf" => {
                let n = oxiflow_core::ops::index::scatter_nd_node(node)?;
                self.launched(&KernelCtx { node: &n, inputs: &ctx.inputs[..2], state: ctx.state })?
            }
            // Placeholder, PlaceholderWithDefault, VariableV2, Assign, Identity, StopGradient,
            // NoOp: their CPU kernels only move tensors, never read the data.
            _ => {
                let outs = (node.op.kernel)(ctx)?;
                outs.iter().map(|t| self.resident(t)).collect::<Result<Outputs>>()?
            }
        };
        Ok(outs)
    }

    fn launched(&self, ctx: &KernelCtx) -> Result<Outputs> {
        let node = ctx.node;
        let f = launch::launcher(node.op).ok_or_else(|| {
            CudaError::Unsupported(format!(
                "{} '{}' has no CUDA kernel on {} (docs/gpu.md lists the ops that have one)",
                node.op.name, node.name, self.attrs.name
            ))
        })?;
        // reference inputs (variables and slots of Apply* ops): updated on copies
        let mut refs = Vec::with_capacity(node.op.ref_inputs.len());
        for &r in node.op.ref_inputs {
            let var = node.inputs[r].node;
            // the CPU kernels' error (training.rs `read_ref`)
            let v = ctx
                .state
                .read_variable(var)
                .ok_or_else(|| OxiflowError::Uninitialized { variable: format!("node {var} (input {r} of {})", node.name), node: node.name.clone() })?;
            refs.push((var, self.device_copy(&self.resident(&v)?)?));
        }
        let mut args: Vec<DevArg> = refs.iter().map(|(_, t)| Self::arg(t)).collect();
        for t in ctx.inputs {
            args.push(Self::arg(t));
        }
        let mut outs: Outputs = Outputs::new();
        if refs.is_empty() {
            for tt in &node.outputs {
                let dims = tt.shape.dims().to_vec();
                let n: usize = dims.iter().product();
                let block = self.core.allocator.allocate((n * tt.dtype.size_of()) as u64)?;
                outs.push(self.wrap(block, tt.dtype, dims));
            }
        }
        let out_args: Vec<DevArg> = outs.iter().map(Self::arg).collect();
        {
            let _g = self.core.launch_lock.lock().unwrap_or_else(|p| p.into_inner());
            self.core.shared.ctx.bind_to_thread().map_err(driver_err(&self.attrs.name, "cuCtxSetCurrent"))?;
            let kernels = &self.core.kernels;
            let function = |e: &str| kernels.function(e);
            let alloc = &self.core.allocator;
            let scratch = |n: usize| -> CudaResult<Box<dyn Scratch>> { Ok(Box::new(ScratchBlock(alloc.allocate(n as u64)?))) };
            let lctx = LaunchCtx {
                device: &self.attrs.name,
                stream: &self.core.shared.compute,
                function: &function,
                blas: self.core.blas.as_ref(),
                scratch: &scratch,
            };
            let mut timing = self.timing.lock().unwrap_or_else(|p| p.into_inner());
            // an op a functional op's function runs is traced on the host (its name may
            // repeat one of the graph's, which the session matches these times by)
            let timed = timing.as_ref().filter(|_| !oxiflow_core::function::in_device_call());
            let start = timed.and_then(|_| self.core.shared.compute.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).ok());
            f(&lctx, node, &args, &out_args)?;
            if let (Some(t), Some(start)) = (timing.as_mut(), start) {
                if let Ok(end) = self.core.shared.compute.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)) {
                    t.kernels.push((node.name.clone(), start, end));
                }
            }
        }
        for (var, t) in &refs {
            ctx.state.assign_variable(*var, t.clone())?;
        }
        if let Some((_, t)) = refs.into_iter().next() {
            outs.push(t);
        }
        Ok(outs)
    }
}

impl Device for CudaDevice {
    fn attributes(&self) -> &DeviceAttributes {
        &self.attrs
    }

    fn compute(&self, ctx: &KernelCtx) -> Result<Outputs> {
        // Inputs arrive resident (the executor copies at device edges); make sure anyway.
        let inputs: Vec<Tensor> = ctx.inputs.iter().map(|t| self.resident(t)).collect::<Result<_>>()?;
        let rctx = KernelCtx { node: ctx.node, inputs: &inputs, state: ctx.state };
        let outs = match ctx.node.op.launch {
            GpuLaunch::DeviceHandled => self.handled(&rctx)?,
            GpuLaunch::Collective => self.collective(&rctx)?,
            _ => self.launched(&rctx)?,
        };
        self.memory.allocate(&outs)?;
        Ok(outs)
    }

    fn copy_from(&self, t: &Tensor, _src: &dyn Device) -> Result<Tensor> {
        let c = self.resident(t)?;
        self.memory.allocate(std::slice::from_ref(&c))?;
        Ok(c)
    }

    fn bytes_copied_in(&self) -> usize {
        self.copied.load(Ordering::Relaxed)
    }

    fn memory(&self) -> Option<&TensorMemory> {
        Some(&self.memory)
    }

    fn start_kernel_timing(&self) {
        // the anchor is waited for, so its device time is (about) the host time read next
        let anchor = self.core.shared.compute.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).and_then(|e| e.synchronize().map(|_| e));
        *self.timing.lock().unwrap_or_else(|p| p.into_inner()) = anchor.ok().map(|anchor| Timing { anchor, anchor_ns: unix_ns(), kernels: Vec::new() });
    }

    fn take_kernel_times(&self) -> Vec<KernelTime> {
        let Some(t) = self.timing.lock().unwrap_or_else(|p| p.into_inner()).take() else { return Vec::new() };
        let at = |e: &CudaEvent| t.anchor.elapsed_ms(e).ok().map(|ms| t.anchor_ns + (ms.max(0.0) as f64 * 1e6) as u64);
        t.kernels.iter().filter_map(|(node, s, e)| Some(KernelTime { node: node.clone(), start_ns: at(s)?, end_ns: at(e)? })).collect()
    }
}
