//! The machinery of `tests/gpu_ops.rs`: the shared GPU behind the test gate, device
//! buffers, running a node's CPU kernel and its CUDA launcher, comparing their outputs, and
//! the record of which (op, kernel dtype) pairs the cases checked.
//!
//! Output and scratch buffers start filled with the byte [`SENTINEL`] (0xAB), not zeros:
//! the device's allocator hands out uninitialised memory, so a launcher must write every
//! output element itself, and an element it leaves alone shows up here as "never written"
//! instead of passing wherever the expected value is 0. (A float made of 0xAB bytes is
//! tiny, -3e-13 in Float32, and would pass the tolerance against 0 if only the values were
//! compared.)

#![allow(dead_code)]

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use oxiflow_core::graph::Node;
use oxiflow_core::ops::{GpuLaunch, KernelCtx, StateAccess};
use oxiflow_core::{DType, Layout, NodeId, Tensor};
use oxiflow_cuda::kernels::{entry_dtypes, ops_needing_launchers, KernelLibrary};
use oxiflow_cuda::launch::{launcher, DevArg, LaunchCtx, Scratch};
use oxiflow_cuda::testing::gpu_or_skip;
use oxiflow_cuda::CudaError;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

// ------------------------------------------------------------------ the device

/// The byte every output and scratch buffer is filled with before a launch.
pub const SENTINEL: u8 = 0xAB;

pub struct Gpu {
    stream: Arc<CudaStream>,
    lib: KernelLibrary,
    blas: cudarc::cublas::CudaBlas,
    device: String,
}

/// The shared GPU of the test `test`, or `None` where [`gpu_or_skip`] skips (no driver or
/// no GPU; it has printed why). Where a GPU exists but cannot be used, the gate panics and
/// the test fails; so does any failure to set the GPU up here.
pub fn gpu(test: &str) -> Option<&'static Gpu> {
    static GPU: OnceLock<Option<Gpu>> = OnceLock::new();
    GPU.get_or_init(|| {
        if !gpu_or_skip(test) {
            return None;
        }
        let ctx: Arc<CudaContext> = CudaContext::new(0).unwrap_or_else(|e| panic!("{test}: CUDA context on GPU 0: {e:?}"));
        let lib = KernelLibrary::load(&ctx).unwrap_or_else(|e| panic!("{test}: loading the kernel library: {e}"));
        let stream = ctx.default_stream();
        let blas = cudarc::cublas::CudaBlas::new(stream.clone()).unwrap_or_else(|e| panic!("{test}: cuBLAS handle: {e:?}"));
        println!("GPU 0: {}, kernels for {}", ctx.name().unwrap_or_default(), lib.arch());
        Some(Gpu { stream, lib, blas, device: "/job:localhost/replica:0/task:0/device:GPU:0".into() })
    })
    .as_ref()
}

/// Scratch memory for launchers: a cudarc allocation freed when dropped.
struct TestScratch {
    _buf: CudaSlice<u8>,
    ptr: u64,
}
impl Scratch for TestScratch {
    fn ptr(&self) -> u64 {
        self.ptr
    }
}

fn driver_err(call: &str, e: cudarc::driver::DriverError) -> CudaError {
    CudaError::Driver { device: "GPU:0".into(), call: call.into(), msg: format!("{e:?}") }
}

fn dev_ptr(g: &Gpu, buf: &CudaSlice<u8>) -> u64 {
    let (p, _sync) = buf.device_ptr(&g.stream);
    p
}

/// `bytes` (at least one) of device memory filled with [`SENTINEL`], as the allocator's
/// uninitialised memory stands in for.
fn alloc_sentinel(g: &Gpu, bytes: usize) -> Result<CudaSlice<u8>, CudaError> {
    let n = bytes.max(1);
    // SAFETY: the memory is written by the memset below before anything reads it.
    let mut buf = unsafe { g.stream.alloc::<u8>(n) }.map_err(|e| driver_err("cuMemAlloc", e))?;
    {
        let (ptr, _record) = buf.device_ptr_mut(&g.stream);
        // SAFETY: `ptr` is the live allocation of `n` bytes just made, on this stream.
        unsafe { cudarc::driver::result::memset_d8_async(ptr, SENTINEL, n, g.stream.cu_stream()) }.map_err(|e| driver_err("cuMemsetD8Async", e))?;
    }
    Ok(buf)
}

// ------------------------------------------------------------------ host <-> device

pub fn to_bytes(t: &Tensor) -> Vec<u8> {
    match t {
        Tensor::F32(a) => a.iter().flat_map(|v| v.to_ne_bytes()).collect(),
        Tensor::F64(a) => a.iter().flat_map(|v| v.to_ne_bytes()).collect(),
        Tensor::I32(a) => a.iter().flat_map(|v| v.to_ne_bytes()).collect(),
        Tensor::I64(a) => a.iter().flat_map(|v| v.to_ne_bytes()).collect(),
        Tensor::Bool(a) => a.iter().map(|&v| v as u8).collect(),
        Tensor::C64(_) | Tensor::C128(_) => panic!("no GPU kernel reads complex tensors"),
        Tensor::Device(_) => panic!("the test's tensors are host tensors"),
    }
}

fn from_bytes(dtype: DType, dims: &[usize], b: &[u8]) -> Tensor {
    let l = Layout::RowMajor;
    match dtype {
        DType::Float32 => Tensor::from_vec(dims, b.chunks_exact(4).map(|c| f32::from_ne_bytes(c.try_into().unwrap())).collect(), l),
        DType::Float64 => Tensor::from_vec(dims, b.chunks_exact(8).map(|c| f64::from_ne_bytes(c.try_into().unwrap())).collect(), l),
        DType::Int32 => Tensor::from_vec(dims, b.chunks_exact(4).map(|c| i32::from_ne_bytes(c.try_into().unwrap())).collect(), l),
        DType::Int64 => Tensor::from_vec(dims, b.chunks_exact(8).map(|c| i64::from_ne_bytes(c.try_into().unwrap())).collect(), l),
        DType::Bool => Tensor::from_vec(dims, b.iter().map(|&v| v != 0).collect::<Vec<bool>>(), l),
        DType::Complex64 | DType::Complex128 => panic!("no GPU kernel writes complex tensors"),
    }
    .expect("tensor from device bytes")
}

/// A device copy of `t` (at least one byte, so empty tensors get a valid address).
fn upload(g: &Gpu, t: &Tensor) -> (CudaSlice<u8>, DevArg) {
    let mut bytes = to_bytes(t);
    if bytes.is_empty() {
        bytes.push(0);
    }
    let buf = g.stream.clone_htod(&bytes).expect("upload");
    let arg = DevArg { ptr: dev_ptr(g, &buf), dtype: t.dtype(), dims: t.dims().to_vec() };
    (buf, arg)
}

/// An output buffer filled with [`SENTINEL`].
fn alloc(g: &Gpu, dtype: DType, dims: &[usize]) -> (CudaSlice<u8>, DevArg) {
    let n: usize = dims.iter().product::<usize>() * dtype.size_of();
    let buf = alloc_sentinel(g, n).expect("output buffer");
    let arg = DevArg { ptr: dev_ptr(g, &buf), dtype, dims: dims.to_vec() };
    (buf, arg)
}

/// A tensor read back from the device, with its raw bytes (to find unwritten elements).
pub struct Downloaded {
    pub tensor: Tensor,
    pub bytes: Vec<u8>,
}

fn download(g: &Gpu, buf: &CudaSlice<u8>, a: &DevArg) -> Downloaded {
    let mut bytes = g.stream.clone_dtoh(buf).expect("download");
    bytes.truncate(a.num_bytes());
    Downloaded { tensor: from_bytes(a.dtype, &a.dims, &bytes), bytes }
}

/// Runs `node`'s launcher on device copies of `inputs` (all node inputs, in order);
/// returns the outputs and the inputs as they are afterwards (training ops update them).
pub fn run_gpu(g: &Gpu, node: &Node, inputs: &[Tensor]) -> Result<(Vec<Downloaded>, Vec<Downloaded>), CudaError> {
    let launch = launcher(node.op).ok_or_else(|| CudaError::Unsupported(format!("no launcher for {}", node.op.name)))?;
    let ins: Vec<(CudaSlice<u8>, DevArg)> = inputs.iter().map(|t| upload(g, t)).collect();
    let outs: Vec<(CudaSlice<u8>, DevArg)> = node.outputs.iter().map(|t| alloc(g, t.dtype, t.shape.dims())).collect();
    let function = |name: &str| g.lib.function(name);
    let scratch = |bytes: usize| -> Result<Box<dyn Scratch + '_>, CudaError> {
        let buf = alloc_sentinel(g, bytes)?;
        let ptr = dev_ptr(g, &buf);
        Ok(Box::new(TestScratch { _buf: buf, ptr }))
    };
    let ctx = LaunchCtx { device: &g.device, stream: &g.stream, function: &function, blas: Some(&g.blas), scratch: &scratch };
    let in_args: Vec<DevArg> = ins.iter().map(|(_, a)| a.clone()).collect();
    let out_args: Vec<DevArg> = outs.iter().map(|(_, a)| a.clone()).collect();
    launch(&ctx, node, &in_args, &out_args)?;
    g.stream.synchronize().map_err(|e| driver_err("cuStreamSynchronize", e))?;
    let o = outs.iter().map(|(b, a)| download(g, b, a)).collect();
    let i = ins.iter().map(|(b, a)| download(g, b, a)).collect();
    Ok((o, i))
}

// ------------------------------------------------------------------ CPU side

#[derive(Default)]
pub struct State(Mutex<HashMap<NodeId, Tensor>>);
impl StateAccess for State {
    fn read_variable(&self, var: NodeId) -> Option<Tensor> {
        self.0.lock().unwrap().get(&var).cloned()
    }
    fn assign_variable(&self, var: NodeId, value: Tensor) -> oxiflow_core::Result<()> {
        self.0.lock().unwrap().insert(var, value);
        Ok(())
    }
}

/// The CPU kernel's outputs; reference inputs are read from `state`.
pub fn run_cpu(node: &Node, inputs: &[Tensor], state: &State) -> Vec<Tensor> {
    let data: Vec<Tensor> = inputs.iter().enumerate().filter(|(i, _)| !node.op.ref_inputs.contains(i)).map(|(_, t)| t.clone()).collect();
    let out = (node.op.kernel)(&KernelCtx { node, inputs: &data, state }).unwrap_or_else(|e| panic!("CPU kernel of {}: {e}", node.name));
    out.into_iter().collect()
}

// ------------------------------------------------------------------ inputs and comparison

/// xorshift64*: small deterministic test data without a dependency.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn tensor(&mut self, dtype: DType, dims: &[usize], lo: f64, hi: f64) -> Tensor {
        let n: usize = dims.iter().product();
        let v: Vec<f64> = (0..n).map(|_| lo + (hi - lo) * self.next()).collect();
        let l = Layout::RowMajor;
        match dtype {
            DType::Float32 => Tensor::from_vec(dims, v.iter().map(|&x| x as f32).collect(), l),
            DType::Float64 => Tensor::from_vec(dims, v, l),
            DType::Int32 => Tensor::from_vec(dims, v.iter().map(|&x| x.floor() as i32).collect(), l),
            DType::Int64 => Tensor::from_vec(dims, v.iter().map(|&x| x.floor() as i64).collect(), l),
            DType::Bool => Tensor::from_vec(dims, v.iter().map(|&x| x > (lo + hi) / 2.0).collect::<Vec<bool>>(), l),
            DType::Complex64 | DType::Complex128 => panic!("no GPU kernel takes complex tensors"),
        }
        .unwrap()
    }

    /// Factors whose product is exact in any order and any float dtype: ±1, one in 2000
    /// ±2 or ±0.5, so a product (or partial product) of up to 10^6 of them stays far inside
    /// Float32's range while a factor left out or counted twice still shows (as a sign or
    /// a power of two).
    pub fn exact_factors(&mut self, dtype: DType, dims: &[usize]) -> Tensor {
        let n: usize = dims.iter().product();
        let v: Vec<f64> = (0..n)
            .map(|_| {
                let sign = if self.next() < 0.5 { -1.0 } else { 1.0 };
                let r = self.next();
                sign * if r < 0.00025 {
                    2.0
                } else if r < 0.0005 {
                    0.5
                } else {
                    1.0
                }
            })
            .collect();
        float_tensor(dtype, dims, &v)
    }

    /// Values in {-1.5, -1, ..., 1.5}: equal elements are frequent.
    pub fn coarse(&mut self, dtype: DType, dims: &[usize]) -> Tensor {
        let n: usize = dims.iter().product();
        let v: Vec<f64> = (0..n).map(|_| (self.next() * 7.0).floor() / 2.0 - 1.5).collect();
        float_tensor(dtype, dims, &v)
    }
}

/// A Float32 (values rounded) or Float64 tensor of shape `dims` holding `v`.
pub fn float_tensor(dtype: DType, dims: &[usize], v: &[f64]) -> Tensor {
    match dtype {
        DType::Float32 => Tensor::from_vec(dims, v.iter().map(|&x| x as f32).collect(), Layout::RowMajor),
        _ => Tensor::from_vec(dims, v.to_vec(), Layout::RowMajor),
    }
    .unwrap()
}

pub fn values(t: &Tensor) -> Vec<f64> {
    match t {
        Tensor::Bool(a) => a.iter().map(|&b| b as u8 as f64).collect(),
        _ => t.to_f64_vec(),
    }
}

/// `None` when equal within the dtype's tolerance, else a description of the worst element.
pub fn mismatch(cpu: &Tensor, gpu: &Tensor) -> Option<String> {
    if cpu.dtype() != gpu.dtype() || cpu.dims() != gpu.dims() {
        return Some(format!("CPU {} {:?} vs GPU {} {:?}", cpu.dtype(), cpu.dims(), gpu.dtype(), gpu.dims()));
    }
    let tol = match cpu.dtype() {
        DType::Float32 => 1e-5,
        DType::Float64 => 1e-12,
        _ => 0.0,
    };
    for (i, (c, g)) in values(cpu).iter().zip(values(gpu)).enumerate() {
        let same = (c.is_nan() && g.is_nan()) || c == &g || (c - g).abs() <= tol * c.abs().max(1.0);
        if !same {
            return Some(format!("element {i}: CPU {c} vs GPU {g} (tolerance {tol})"));
        }
    }
    None
}

/// The first element of `size` bytes that is still the [`SENTINEL`] fill.
pub fn first_unwritten(gpu: &Downloaded, size: usize) -> Option<usize> {
    gpu.bytes.chunks_exact(size).position(|e| e.iter().all(|&b| b == SENTINEL))
}

/// The first element the GPU left as the [`SENTINEL`] fill (all its bytes 0xAB where the
/// CPU's are not), or a Bool byte other than 0 and 1.
fn unwritten(cpu: &Tensor, gpu: &Downloaded) -> Option<String> {
    let size = cpu.dtype().size_of();
    let want = to_bytes(cpu);
    if want.len() != gpu.bytes.len() {
        return None; // a shape mismatch, reported by `mismatch`
    }
    for (i, (w, g)) in want.chunks_exact(size).zip(gpu.bytes.chunks_exact(size)).enumerate() {
        if g.iter().all(|&b| b == SENTINEL) && w != g {
            return Some(format!("element {i} was never written (still the 0x{SENTINEL:X} fill; CPU {})", values(cpu)[i]));
        }
        if cpu.dtype() == DType::Bool && g[0] > 1 {
            return Some(format!("element {i}: Bool byte 0x{:X}", g[0]));
        }
    }
    None
}

/// [`unwritten`], then [`mismatch`].
pub fn compare(cpu: &Tensor, gpu: &Downloaded) -> Option<String> {
    unwritten(cpu, gpu).or_else(|| mismatch(cpu, &gpu.tensor))
}

// ------------------------------------------------------------------ coverage

/// The (op, kernel dtype) pairs the cases built so far covered, as [`pair`] names them.
static CHECKED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// `Op Dtype` (`Relu Float32`), or `Cast Src->Dst`.
fn pair(op: &str, dtype: DType, dst: Option<DType>) -> String {
    match dst {
        Some(d) => format!("{op} {dtype}->{d}"),
        None => format!("{op} {dtype}"),
    }
}

/// Records a case of `op` on inputs of `inputs` dtypes giving `outputs`, by the dtype its
/// GPU kernel runs in (the entry's suffix, `launch::entry_name`): the first input's (for
/// `SelectV2` the values', after the Bool condition), the output's for an op without
/// inputs (random ops), source and destination for `Cast`. Called as the case is built,
/// so the record is complete with or without a GPU.
pub fn record_case(op: &str, inputs: &[DType], outputs: &[DType]) {
    let first = if op == "SelectV2" { inputs.get(1) } else { inputs.first() };
    let Some(&d) = first.or(outputs.first()) else { return };
    let dst = (op == "Cast").then(|| outputs.first().copied()).flatten();
    CHECKED.lock().unwrap_or_else(|p| p.into_inner()).insert(pair(op, d, dst));
}

/// Every (op, kernel dtype) pair the registry flags for a GPU kernel with a launcher, the
/// movement family (`gpu_movement.rs`) aside: each op's kernel dtypes
/// (`kernels::entry_dtypes`: its GPU dtypes, where a comparison's Bool is only its result),
/// every (source, destination) pair of them for `Cast`.
pub fn required_pairs() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for def in ops_needing_launchers().into_iter().filter(|d| d.launch != GpuLaunch::Movement) {
        let dts = entry_dtypes(def);
        for &d in &dts {
            if def.name == "Cast" {
                out.extend(dts.iter().map(|&to| pair(def.name, d, Some(to))));
            } else {
                out.insert(pair(def.name, d, None));
            }
        }
    }
    out
}

/// The pairs of [`required_pairs`] no case covered.
pub fn missing_pairs() -> Vec<String> {
    let checked = CHECKED.lock().unwrap_or_else(|p| p.into_inner());
    required_pairs().into_iter().filter(|p| !checked.contains(p)).collect()
}
