//! Every compute op on a real GPU against its CPU kernel: each case builds a one-op graph
//! (placeholders, and variables for the training ops), runs the op's CPU kernel and its
//! CUDA launcher ([`oxiflow_cuda::launch::launcher`]) on the same small random inputs, and
//! compares: relative tolerance 1e-5 for Float32 and 1e-12 for Float64 (with a magnitude
//! floor of 1, i.e. `|gpu - cpu| <= tol * max(|cpu|, 1)`), exact for integers and Bool,
//! NaN equal to NaN. Float32 `Sum`, `Mean` and `Prod` are compared with the CPU kernel
//! run on the same values in Float64 and rounded: the CPU's sequential Float32 sum of 10^5
//! elements is itself off by about 1e-5, while the GPU's tree sum is within a few ulp of
//! the exact result. Random ops are checked by their moments instead (their GPU stream is
//! Philox, the CPU's ChaCha).
//!
//! Every op the registry launches on a GPU has cases here (the movement family's are in
//! `gpu_movement.rs`): the unary and broadcasting binary cases take their ops from the
//! registry's launch families, so a new op of those families is compared without an edit
//! here, and [`every_launched_op_matches_the_cpu`] runs every group and fails naming any
//! launched op no case checked.
//!
//! Buffers come from cudarc directly (`CudaContext`, `CudaStream::clone_htod`,
//! `alloc_zeros`); the kernels from [`KernelLibrary`] (NVRTC). Without a CUDA driver every
//! test prints `skipped: no CUDA driver (<reason>)` and passes after building each case's
//! graph and running its CPU kernel (so the cases themselves are checked on every machine).

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use oxiflow_core::graph::Node;
use oxiflow_core::ops::{AttrValue, GpuLaunch, KernelCtx, StateAccess};
use oxiflow_core::{DType, Graph, Layout, NodeId, NodeSpec, Output, Tensor};
use oxiflow_cuda::kernels::{ops_launched_as, KernelLibrary};
use oxiflow_cuda::launch::{launcher, DevArg, LaunchCtx, Scratch};
use oxiflow_cuda::probe::{cublas_status, driver_status, nvrtc_status, DriverStatus, LibStatus};
use oxiflow_cuda::{CudaError, CudaResult};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

// ------------------------------------------------------------------ the device

struct Gpu {
    stream: Arc<CudaStream>,
    lib: KernelLibrary,
    blas: Option<cudarc::cublas::CudaBlas>,
    device: String,
}

/// The shared GPU (None: skipped, with the reason printed) and a lock that runs the cases
/// one at a time on its one stream.
fn gpu() -> (Option<&'static Gpu>, Option<MutexGuard<'static, ()>>) {
    match gpu_inner() {
        Some((g, l)) => (Some(g), Some(l)),
        None => (None, None),
    }
}

fn gpu_inner() -> Option<(&'static Gpu, MutexGuard<'static, ()>)> {
    static GPU: OnceLock<Result<Gpu, String>> = OnceLock::new();
    static LOCK: Mutex<()> = Mutex::new(());
    let g = GPU.get_or_init(|| {
        if let DriverStatus::Absent { reason } = driver_status() {
            return Err(format!("skipped: no CUDA driver ({reason})"));
        }
        let ctx: Arc<CudaContext> = match CudaContext::new(0) {
            Ok(c) => c,
            Err(e) => return Err(format!("skipped: no CUDA device ({e:?})")),
        };
        if let LibStatus::Absent { reason } = nvrtc_status() {
            panic!("a CUDA driver is present but NVRTC is not, so the kernels cannot be built: {reason}");
        }
        let lib = KernelLibrary::load(&ctx).unwrap_or_else(|e| panic!("loading the kernel library: {e}"));
        let stream = ctx.default_stream();
        let blas = if cublas_status().is_present() {
            Some(cudarc::cublas::CudaBlas::new(stream.clone()).expect("cuBLAS handle"))
        } else {
            println!("cuBLAS not available ({:?}): MatMul cases will fail", cublas_status());
            None
        };
        let name = ctx.name().unwrap_or_default();
        println!("GPU 0: {name}, kernels for {}", lib.arch());
        Ok(Gpu { stream, lib, blas, device: "/job:localhost/replica:0/task:0/device:GPU:0".into() })
    });
    match g {
        Ok(g) => Some((g, LOCK.lock().unwrap_or_else(|e| e.into_inner()))),
        Err(msg) => {
            println!("{msg}");
            None
        }
    }
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

// ------------------------------------------------------------------ host <-> device

fn to_bytes(t: &Tensor) -> Vec<u8> {
    match t {
        Tensor::F32(a) => a.iter().flat_map(|v| v.to_ne_bytes()).collect(),
        Tensor::F64(a) => a.iter().flat_map(|v| v.to_ne_bytes()).collect(),
        Tensor::I32(a) => a.iter().flat_map(|v| v.to_ne_bytes()).collect(),
        Tensor::I64(a) => a.iter().flat_map(|v| v.to_ne_bytes()).collect(),
        Tensor::Bool(a) => a.iter().map(|&v| v as u8).collect(),
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

fn alloc(g: &Gpu, dtype: DType, dims: &[usize]) -> (CudaSlice<u8>, DevArg) {
    let n: usize = dims.iter().product::<usize>() * dtype.size_of();
    let buf = g.stream.alloc_zeros::<u8>(n.max(1)).expect("alloc");
    let arg = DevArg { ptr: dev_ptr(g, &buf), dtype, dims: dims.to_vec() };
    (buf, arg)
}

fn download(g: &Gpu, buf: &CudaSlice<u8>, a: &DevArg) -> Tensor {
    let bytes = g.stream.clone_dtoh(buf).expect("download");
    from_bytes(a.dtype, &a.dims, &bytes[..a.num_bytes()])
}

/// Runs `node`'s launcher on device copies of `inputs` (all node inputs, in order);
/// returns the outputs and the inputs as they are afterwards (training ops update them).
fn run_gpu(g: &Gpu, node: &Node, inputs: &[Tensor]) -> CudaResult<(Vec<Tensor>, Vec<Tensor>)> {
    let launch = launcher(node.op).ok_or_else(|| CudaError::Unsupported(format!("no launcher for {}", node.op.name)))?;
    let ins: Vec<(CudaSlice<u8>, DevArg)> = inputs.iter().map(|t| upload(g, t)).collect();
    let outs: Vec<(CudaSlice<u8>, DevArg)> = node.outputs.iter().map(|t| alloc(g, t.dtype, t.shape.dims())).collect();
    let function = |name: &str| g.lib.function(name);
    let scratch = |bytes: usize| -> CudaResult<Box<dyn Scratch + '_>> {
        let buf = g.stream.alloc_zeros::<u8>(bytes.max(1)).map_err(|e| driver_err("cuMemAlloc (scratch)", e))?;
        let ptr = dev_ptr(g, &buf);
        Ok(Box::new(TestScratch { _buf: buf, ptr }))
    };
    let ctx = LaunchCtx { device: &g.device, stream: &g.stream, function: &function, blas: g.blas.as_ref(), scratch: &scratch };
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
struct State(Mutex<HashMap<NodeId, Tensor>>);
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
fn run_cpu(node: &Node, inputs: &[Tensor], state: &State) -> Vec<Tensor> {
    let data: Vec<Tensor> = inputs.iter().enumerate().filter(|(i, _)| !node.op.ref_inputs.contains(i)).map(|(_, t)| t.clone()).collect();
    let out = (node.op.kernel)(&KernelCtx { node, inputs: &data, state }).unwrap_or_else(|e| panic!("CPU kernel of {}: {e}", node.name));
    out.into_iter().collect()
}

// ------------------------------------------------------------------ inputs and comparison

/// xorshift64*: small deterministic test data without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
    fn tensor(&mut self, dtype: DType, dims: &[usize], lo: f64, hi: f64) -> Tensor {
        let n: usize = dims.iter().product();
        let v: Vec<f64> = (0..n).map(|_| lo + (hi - lo) * self.next()).collect();
        let l = Layout::RowMajor;
        match dtype {
            DType::Float32 => Tensor::from_vec(dims, v.iter().map(|&x| x as f32).collect(), l),
            DType::Float64 => Tensor::from_vec(dims, v, l),
            DType::Int32 => Tensor::from_vec(dims, v.iter().map(|&x| x.floor() as i32).collect(), l),
            DType::Int64 => Tensor::from_vec(dims, v.iter().map(|&x| x.floor() as i64).collect(), l),
            DType::Bool => Tensor::from_vec(dims, v.iter().map(|&x| x > (lo + hi) / 2.0).collect::<Vec<bool>>(), l),
        }
        .unwrap()
    }
}

impl Rng {
    /// Values in {-1.5, -1, ..., 1.5}: equal elements are frequent.
    fn coarse(&mut self, dtype: DType, dims: &[usize]) -> Tensor {
        let n: usize = dims.iter().product();
        let v: Vec<f64> = (0..n).map(|_| (self.next() * 7.0).floor() / 2.0 - 1.5).collect();
        match dtype {
            DType::Float32 => Tensor::from_vec(dims, v.iter().map(|&x| x as f32).collect(), Layout::RowMajor),
            _ => Tensor::from_vec(dims, v, Layout::RowMajor),
        }
        .unwrap()
    }
}

fn values(t: &Tensor) -> Vec<f64> {
    match t {
        Tensor::Bool(a) => a.iter().map(|&b| b as u8 as f64).collect(),
        _ => t.to_f64_vec(),
    }
}

/// `None` when equal within the dtype's tolerance, else a description of the worst element.
fn mismatch(cpu: &Tensor, gpu: &Tensor) -> Option<String> {
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

/// The ops some case has checked in this process (see [`every_launched_op_matches_the_cpu`]).
static CHECKED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

fn record(op: &str) {
    CHECKED.lock().unwrap_or_else(|p| p.into_inner()).insert(op.to_string());
}

/// One case: `op` with `attrs` on placeholders fed `inputs`; CPU and GPU outputs compared.
fn check(g: Option<&Gpu>, failures: &mut Vec<String>, op: &str, attrs: &[(&str, AttrValue)], inputs: &[Tensor]) {
    record(op);
    let mut graph = Graph::new();
    let ins: Vec<Output> = inputs.iter().map(|t| graph.placeholder(t.dtype(), t.dims(), None).unwrap()).collect();
    let mut spec = NodeSpec::new(op, &ins);
    for (k, v) in attrs {
        spec = spec.attr(k, v.clone());
    }
    let what = format!(
        "{op}{:?} on {:?}",
        attrs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
        inputs.iter().map(|t| (t.dtype(), t.dims().to_vec())).collect::<Vec<_>>()
    );
    let out = match graph.op_spec(spec) {
        Ok(o) => o,
        Err(e) => return failures.push(format!("{what}: graph: {e}")),
    };
    let node = graph.node(out.node).unwrap();
    let f32_in = inputs.iter().any(|t| t.dtype() == DType::Float32);
    let cpu = if f32_in && matches!(op, "Sum" | "Mean" | "Prod") { cpu_in_f64(op, attrs, inputs) } else { run_cpu(node, inputs, &State::default()) };
    let Some(g) = g else { return };
    match run_gpu(g, node, inputs) {
        Err(e) => failures.push(format!("{what}: GPU: {e}")),
        Ok((gpu, _)) => {
            for (k, (c, d)) in cpu.iter().zip(&gpu).enumerate() {
                if let Some(m) = mismatch(c, d) {
                    failures.push(format!("{what} output {k}: {m}"));
                }
            }
        }
    }
}

/// The CPU kernel of `op` on Float64 copies of `inputs`, its outputs rounded to Float32.
fn cpu_in_f64(op: &str, attrs: &[(&str, AttrValue)], inputs: &[Tensor]) -> Vec<Tensor> {
    let wide: Vec<Tensor> = inputs.iter().map(|t| Tensor::from_vec(t.dims(), values(t), Layout::RowMajor).unwrap()).collect();
    let mut graph = Graph::new();
    let ins: Vec<Output> = wide.iter().map(|t| graph.placeholder(t.dtype(), t.dims(), None).unwrap()).collect();
    let mut spec = NodeSpec::new(op, &ins);
    for (k, v) in attrs {
        spec = spec.attr(k, v.clone());
    }
    let id = graph.op_spec(spec).unwrap().node;
    run_cpu(graph.node(id).unwrap(), &wide, &State::default())
        .into_iter()
        .map(|t| Tensor::from_vec(t.dims(), values(&t).iter().map(|&x| x as f32).collect(), Layout::RowMajor).unwrap())
        .collect()
}

fn finish(name: &str, failures: Vec<String>) {
    assert!(failures.is_empty(), "{name}: {} GPU/CPU mismatches:\n{}", failures.len(), failures.join("\n"));
}

const FLOATS: [DType; 2] = [DType::Float32, DType::Float64];

// ------------------------------------------------------------------ cases

fn unary_ops_match_the_cpu() {
    let (g, _lock) = gpu();
    let mut f = Vec::new();
    let mut rng = Rng(1);
    // every Unary op of the registry, on its domain (default -3..3), and the fills
    let domain = |op: &str| match op {
        "Exp" => (-10.0, 10.0),
        "Log" => (0.01, 100.0),
        "Relu6" => (-3.0, 9.0),
        "Sigmoid" | "Softplus" => (-50.0, 50.0),
        "Sqrt" => (0.0, 100.0),
        "Tan" => (-1.2, 1.2),
        "Tanh" => (-5.0, 5.0),
        "Floor" => (-30.0, 30.0),
        _ => (-3.0, 3.0),
    };
    let mut ops: Vec<(&str, f64, f64)> = ops_launched_as(GpuLaunch::Unary).into_iter().map(|op| (op, domain(op).0, domain(op).1)).collect();
    ops.extend([("OnesLike", -1.0, 1.0), ("ZerosLike", -1.0, 1.0)]);
    assert!(ops.len() >= 21, "the registry's unary family: {ops:?}");
    for &(op, lo, hi) in &ops {
        for d in FLOATS {
            for dims in [vec![], vec![7], vec![3, 50, 9]] {
                check(g, &mut f, op, &[], &[rng.tensor(d, &dims, lo, hi)]);
            }
        }
    }
    for d in FLOATS {
        check(g, &mut f, "LeakyRelu", &[], &[rng.tensor(d, &[100], -3.0, 3.0)]);
        check(g, &mut f, "LeakyRelu", &[("alpha", AttrValue::Float(0.05))], &[rng.tensor(d, &[100], -3.0, 3.0)]);
        // NaN, infinities and zeros through the ops whose CPU versions single them out
        let special = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0, 7.0, -7.0, 800.0, -800.0];
        let t = match d {
            DType::Float32 => Tensor::from_vec(&[9], special.iter().map(|&x| x as f32).collect(), Layout::RowMajor),
            _ => Tensor::from_vec(&[9], special.to_vec(), Layout::RowMajor),
        }
        .unwrap();
        for op in ["Relu", "Relu6", "Sign", "Sigmoid", "Softplus", "Abs", "Elu", "Selu", "Softsign", "Tanh", "Floor"] {
            check(g, &mut f, op, &[], std::slice::from_ref(&t));
        }
    }
    finish("unary", f);
}

fn casts_match_the_cpu() {
    let (g, _lock) = gpu();
    let mut f = Vec::new();
    let mut rng = Rng(2);
    let all = [DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool];
    for src in all {
        for dst in all {
            let x = rng.tensor(src, &[5, 40], -1000.0, 1000.0);
            check(g, &mut f, "Cast", &[("DstT", AttrValue::Type(dst))], &[x]);
        }
    }
    let special = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 3e9, -3e9, 1e20, -2.7, 2.7, -0.0, 0.5];
    for dst in all {
        let x = Tensor::from_vec(&[10], special.to_vec(), Layout::RowMajor).unwrap();
        check(g, &mut f, "Cast", &[("DstT", AttrValue::Type(dst))], &[x]);
        let x = Tensor::from_vec(&[10], special.iter().map(|&v| v as f32).collect(), Layout::RowMajor).unwrap();
        check(g, &mut f, "Cast", &[("DstT", AttrValue::Type(dst))], &[x]);
    }
    finish("cast", f);
}

const SHAPE_PAIRS: &[(&[usize], &[usize])] = &[
    (&[3, 4], &[3, 4]),
    (&[3, 4], &[4]),
    (&[3, 4], &[]),
    (&[], &[5]),
    (&[3, 1], &[1, 4]),
    (&[2, 3, 4], &[3, 1]),
    (&[2, 1, 3, 1], &[1, 4, 1, 5]),
    (&[1000], &[1000]),
    (&[64, 33], &[64, 1]),
];

fn broadcasting_binary_ops_and_comparisons_match_the_cpu() {
    let (g, _lock) = gpu();
    let mut f = Vec::new();
    let mut rng = Rng(3);
    // every broadcasting op of the registry's Binary family (the activation gradients,
    // which take operands of one shape, follow)
    let same_shape = ["TanhGrad", "SigmoidGrad"];
    let ops: Vec<&str> = ops_launched_as(GpuLaunch::Binary).into_iter().filter(|op| !same_shape.contains(op)).collect();
    assert!(ops.len() >= 14, "the registry's broadcasting binary family: {ops:?}");
    for op in ops {
        for d in FLOATS {
            for &(a, b) in SHAPE_PAIRS {
                let (lo, hi) = if op == "Pow" { (0.1, 3.0) } else { (-3.0, 3.0) };
                // Comparisons and extrema need ties: values on a coarse grid for them.
                let coarse = !matches!(op, "Add" | "Sub" | "Mul" | "RealDiv" | "Pow" | "FloorDiv" | "FloorMod");
                let (x, y) = if coarse { (rng.coarse(d, a), rng.coarse(d, b)) } else { (rng.tensor(d, a, lo, hi), rng.tensor(d, b, lo, hi)) };
                check(g, &mut f, op, &[], &[x, y]);
            }
            // NaN propagation of Maximum/Minimum and IEEE comparisons
            let nan = match d {
                DType::Float32 => Tensor::from_vec(&[4], vec![f32::NAN, 1.0, f32::NAN, -1.0], Layout::RowMajor),
                _ => Tensor::from_vec(&[4], vec![f64::NAN, 1.0, f64::NAN, -1.0], Layout::RowMajor),
            }
            .unwrap();
            let other = rng.tensor(d, &[4], -3.0, 3.0);
            check(g, &mut f, op, &[], &[nan.clone(), other.clone()]);
            check(g, &mut f, op, &[], &[other, nan]);
        }
    }
    // the activation gradients: (y, dy) of one shape
    for op in same_shape {
        for d in FLOATS {
            for dims in [&[][..], &[1000], &[64, 33]] {
                check(g, &mut f, op, &[], &[rng.tensor(d, dims, -1.0, 1.0), rng.tensor(d, dims, -3.0, 3.0)]);
            }
        }
    }
    for d in [DType::Float32, DType::Float64, DType::Bool] {
        for (c, x, y) in [(&[3, 4][..], &[3, 4][..], &[3, 4][..]), (&[4], &[3, 1], &[]), (&[2, 1, 5], &[1, 3, 1], &[3, 5])] {
            let (c, x, y) = (rng.tensor(DType::Bool, c, 0.0, 1.0), rng.tensor(d, x, -3.0, 3.0), rng.tensor(d, y, -3.0, 3.0));
            check(g, &mut f, "SelectV2", &[], &[c, x, y]);
        }
    }
    for d in FLOATS {
        for (from, to) in [(&[4][..], &[3, 4][..]), (&[3, 1], &[2, 3, 5]), (&[], &[6]), (&[2, 3], &[2, 3])] {
            check(g, &mut f, "BroadcastTo", &[("shape", AttrValue::Shape(to.to_vec()))], &[rng.tensor(d, from, -3.0, 3.0)]);
        }
        for n in [1, 3, 8, 9, 20] {
            let ins: Vec<Tensor> = (0..n).map(|_| rng.tensor(d, &[5, 7], -3.0, 3.0)).collect();
            check(g, &mut f, "AddN", &[], &ins);
        }
        // FloorDiv/FloorMod at mixed signs, exact multiples, zero divisors (inf, NaN) and -0
        let x = [-7.0, 7.0, -7.0, 7.0, 6.0, -6.0, 0.0, 5.5, 1.0, -1.0, -0.0, 1e30];
        let y = [3.0, -3.0, -3.0, 3.0, 3.0, 3.0, 4.0, -7.0, 0.0, 0.0, 2.0, 3.0];
        let mk = |v: &[f64]| {
            match d {
                DType::Float32 => Tensor::from_vec(&[v.len()], v.iter().map(|&x| x as f32).collect(), Layout::RowMajor),
                _ => Tensor::from_vec(&[v.len()], v.to_vec(), Layout::RowMajor),
            }
            .unwrap()
        };
        for op in ["FloorDiv", "FloorMod"] {
            check(g, &mut f, op, &[], &[mk(&x), mk(&y)]);
        }
    }
    finish("binary", f);
}

fn reductions_and_softmax_match_the_cpu() {
    let (g, _lock) = gpu();
    let mut f = Vec::new();
    let mut rng = Rng(4);
    let axis_sets: &[&[i64]] = &[&[], &[0], &[1], &[2], &[-1], &[0, 2], &[1, 2], &[0, 1], &[0, 1, 2]];
    for op in ["Sum", "Mean", "Max", "Min", "Prod"] {
        for d in FLOATS {
            let (lo, hi) = if op == "Prod" { (0.9, 1.1) } else { (0.5, 1.5) };
            for axes in axis_sets {
                for keep in [false, true] {
                    let attrs = [("axis", AttrValue::Ints(axes.to_vec())), ("keep_dims", AttrValue::Bool(keep))];
                    check(g, &mut f, op, &attrs, &[rng.tensor(d, &[3, 4, 5], lo, hi)]);
                }
            }
            // big groups: two-pass plans (rows, columns, everything), and a NaN for Max/Min
            let (lo, hi) = if op == "Prod" { (0.999, 1.001) } else { (0.5, 1.5) };
            for (dims, axes) in [(&[2000usize, 300][..], &[0i64][..]), (&[2000, 300], &[1]), (&[2000, 300], &[]), (&[100_000], &[0]), (&[7, 9000, 3], &[1])] {
                check(g, &mut f, op, &[("axis", AttrValue::Ints(axes.to_vec()))], &[rng.tensor(d, dims, lo, hi)]);
            }
            let mut v = values(&rng.tensor(DType::Float64, &[6, 50], 0.5, 1.5));
            v[77] = f64::NAN;
            let t = if d == DType::Float32 {
                Tensor::from_vec(&[6, 50], v.iter().map(|&x| x as f32).collect(), Layout::RowMajor)
            } else {
                Tensor::from_vec(&[6, 50], v, Layout::RowMajor)
            }
            .unwrap();
            for axes in [&[0i64][..], &[1], &[]] {
                check(g, &mut f, op, &[("axis", AttrValue::Ints(axes.to_vec()))], std::slice::from_ref(&t));
            }
        }
    }
    for op in ["ArgMax", "ArgMin"] {
        for d in [DType::Float32, DType::Float64, DType::Int32, DType::Int64] {
            // integers in a small range: ties, which must give the first index
            let (lo, hi) = if d.is_float() { (-3.0, 3.0) } else { (-5.0, 5.0) };
            for (dims, axis) in [(&[3usize, 4, 5][..], 0i64), (&[3, 4, 5], 1), (&[3, 4, 5], -1), (&[50_000], 0), (&[4000, 3], 0), (&[3, 4000], 1)] {
                for out_t in [DType::Int64, DType::Int32] {
                    let attrs = [("axis", AttrValue::Int(axis)), ("output_type", AttrValue::Type(out_t))];
                    check(g, &mut f, op, &attrs, &[rng.tensor(d, dims, lo, hi)]);
                }
            }
        }
        for d in FLOATS {
            // NaN first (kept by the CPU's scan), NaN later (never chosen)
            for lane in [[f64::NAN, 1.0, 5.0, 2.0], [1.0, f64::NAN, 5.0, -2.0], [f64::NEG_INFINITY; 4]] {
                let t = if d == DType::Float32 {
                    Tensor::from_vec(&[1, 4], lane.iter().map(|&x| x as f32).collect(), Layout::RowMajor)
                } else {
                    Tensor::from_vec(&[1, 4], lane.to_vec(), Layout::RowMajor)
                }
                .unwrap();
                check(g, &mut f, op, &[("axis", AttrValue::Int(1))], &[t]);
            }
        }
    }
    for d in FLOATS {
        for dims in [&[5usize][..], &[4, 7], &[3, 1000], &[2, 3, 300], &[1000, 2]] {
            check(g, &mut f, "Softmax", &[], &[rng.tensor(d, dims, -20.0, 20.0)]);
        }
    }
    finish("reductions", f);
}

fn products_match_the_cpu() {
    let (g, _lock) = gpu();
    let mut f = Vec::new();
    let mut rng = Rng(5);
    for d in FLOATS {
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let (m, k, n) = (17, 33, 9);
            let a = if ta { rng.tensor(d, &[k, m], -1.0, 1.0) } else { rng.tensor(d, &[m, k], -1.0, 1.0) };
            let b = if tb { rng.tensor(d, &[n, k], -1.0, 1.0) } else { rng.tensor(d, &[k, n], -1.0, 1.0) };
            let attrs = [("transpose_a", AttrValue::Bool(ta)), ("transpose_b", AttrValue::Bool(tb))];
            check(g, &mut f, "MatMul", &attrs, &[a.clone(), b.clone()]);
            // BatchMatMulV2: same batch, one side single, broadcast both ways
            for (bx, by) in [(&[3usize][..], &[3usize][..]), (&[], &[2, 3]), (&[2, 1], &[1, 4]), (&[4], &[])] {
                let mut dx = bx.to_vec();
                dx.extend(if ta { [k, m] } else { [m, k] });
                let mut dy = by.to_vec();
                dy.extend(if tb { [n, k] } else { [k, n] });
                let attrs = [("adj_x", AttrValue::Bool(ta)), ("adj_y", AttrValue::Bool(tb))];
                check(g, &mut f, "BatchMatMulV2", &attrs, &[rng.tensor(d, &dx, -1.0, 1.0), rng.tensor(d, &dy, -1.0, 1.0)]);
            }
        }
        // empty inner dimension: zeros
        check(g, &mut f, "MatMul", &[], &[rng.tensor(d, &[3, 0], -1.0, 1.0), rng.tensor(d, &[0, 4], -1.0, 1.0)]);
    }
    finish("products", f);
}

/// A training op on variables `vars` (reference inputs) and placeholders `hyper` (in the
/// op's input order given by `order`: `Ok(i)` variable i, `Err(j)` placeholder j).
fn check_training(g: Option<&Gpu>, f: &mut Vec<String>, op: &str, nesterov: Option<bool>, vars: &[Tensor], others: &[Tensor], order: &[Result<usize, usize>]) {
    let attr = nesterov.map(|n| ("use_nesterov", n));
    check_training_with(g, f, op, attr, vars, others, order)
}

/// [`check_training`] with one Bool attr (`ApplyAdagrad`'s `update_slots`).
fn check_training_attr(g: Option<&Gpu>, f: &mut Vec<String>, op: &str, attr: (&str, bool), vars: &[Tensor], others: &[Tensor], order: &[Result<usize, usize>]) {
    check_training_with(g, f, op, Some(attr), vars, others, order)
}

fn check_training_with(
    g: Option<&Gpu>,
    f: &mut Vec<String>,
    op: &str,
    attr: Option<(&str, bool)>,
    vars: &[Tensor],
    others: &[Tensor],
    order: &[Result<usize, usize>],
) {
    record(op);
    let mut graph = Graph::new();
    let var_ids: Vec<NodeId> = vars.iter().map(|t| graph.variable(t.clone(), None, true).unwrap()).collect();
    let phs: Vec<Output> = others.iter().map(|t| graph.placeholder(t.dtype(), t.dims(), None).unwrap()).collect();
    let ins: Vec<Output> = order
        .iter()
        .map(|o| match *o {
            Ok(i) => Output::new(var_ids[i], 0),
            Err(j) => phs[j],
        })
        .collect();
    let inputs: Vec<Tensor> = order
        .iter()
        .map(|o| match *o {
            Ok(i) => vars[i].clone(),
            Err(j) => others[j].clone(),
        })
        .collect();
    let mut spec = NodeSpec::new(op, &ins);
    if let Some((k, v)) = attr {
        spec = spec.attr(k, v);
    }
    let what = format!("{op} ({attr:?}) {}", vars[0].dtype());
    let node_id = match graph.op_spec(spec) {
        Ok(o) => o.node,
        Err(e) => return f.push(format!("{what}: graph: {e}")),
    };
    let node = graph.node(node_id).unwrap();
    let state = State::default();
    for (id, t) in var_ids.iter().zip(vars) {
        state.assign_variable(*id, t.clone()).unwrap();
    }
    let cpu_out = run_cpu(node, &inputs, &state);
    let Some(g) = g else { return };
    match run_gpu(g, node, &inputs) {
        Err(e) => f.push(format!("{what}: GPU: {e}")),
        Ok((gpu_out, gpu_ins)) => {
            if let Some(m) = mismatch(&cpu_out[0], &gpu_out[0]) {
                f.push(format!("{what} output: {m}"));
            }
            for (k, o) in order.iter().enumerate() {
                if let Ok(i) = o {
                    let cpu_v = state.read_variable(var_ids[*i]).unwrap();
                    if let Some(m) = mismatch(&cpu_v, &gpu_ins[k]) {
                        f.push(format!("{what} variable/slot {i}: {m}"));
                    }
                }
            }
        }
    }
}

fn training_updates_match_the_cpu() {
    let (g, _lock) = gpu();
    let mut f = Vec::new();
    let mut rng = Rng(6);
    for d in FLOATS {
        let dims = [7, 33];
        let s = |v: f64| Tensor::filled(d, &[], v);
        let var = rng.tensor(d, &dims, -1.0, 1.0);
        let grad = rng.tensor(d, &dims, -1.0, 1.0);
        check_training(g, &mut f, "ApplyGradientDescent", None, std::slice::from_ref(&var), &[s(0.1), grad.clone()], &[Ok(0), Err(0), Err(1)]);
        for nest in [false, true] {
            let accum = rng.tensor(d, &dims, 0.0, 1.0);
            check_training(
                g,
                &mut f,
                "ApplyMomentum",
                Some(nest),
                &[var.clone(), accum],
                &[s(0.1), grad.clone(), s(0.9)],
                &[Ok(0), Ok(1), Err(0), Err(1), Err(2)],
            );
            let (m, v) = (rng.tensor(d, &dims, -0.1, 0.1), rng.tensor(d, &dims, 0.0, 0.1));
            let hyper = [s(0.9f64.powi(3)), s(0.999f64.powi(3)), s(0.01), s(0.9), s(0.999), s(1e-8), grad.clone()];
            let order = [Ok(0), Ok(1), Ok(2), Err(0), Err(1), Err(2), Err(3), Err(4), Err(5), Err(6)];
            check_training(g, &mut f, "ApplyAdam", Some(nest), &[var.clone(), m, v], &hyper, &order);
        }
        let (ms, mom) = (rng.tensor(d, &dims, 0.0, 0.1), rng.tensor(d, &dims, -0.1, 0.1));
        let hyper = [s(0.01), s(0.9), s(0.5), s(1e-10), grad.clone()];
        let order = [Ok(0), Ok(1), Ok(2), Err(0), Err(1), Err(2), Err(3), Err(4)];
        check_training(g, &mut f, "ApplyRMSProp", None, &[var.clone(), ms, mom], &hyper, &order);
        for update_slots in [true, false] {
            let accum = rng.tensor(d, &dims, 0.1, 1.0);
            let (vars, hyper) = ([var.clone(), accum], [s(0.1), grad.clone()]);
            check_training_attr(g, &mut f, "ApplyAdagrad", ("update_slots", update_slots), &vars, &hyper, &[Ok(0), Ok(1), Err(0), Err(1)]);
        }
        let (acc, acc_up) = (rng.tensor(d, &dims, 0.0, 0.1), rng.tensor(d, &dims, 0.0, 0.1));
        let hyper = [s(1.0), s(0.95), s(1e-6), grad.clone()];
        let order = [Ok(0), Ok(1), Ok(2), Err(0), Err(1), Err(2), Err(3)];
        check_training(g, &mut f, "ApplyAdadelta", None, &[var.clone(), acc, acc_up], &hyper, &order);
    }
    finish("training", f);
}

fn random_ops_have_the_right_moments_and_fresh_streams() {
    let (g, _lock) = gpu();
    let mut f = Vec::new();
    for op in ["RandomUniform", "RandomStandardNormal"] {
        record(op);
        for d in FLOATS {
            let mut graph = Graph::new();
            let n = 200_001usize;
            let spec = NodeSpec::new(op, &[]).attr("shape", AttrValue::Shape(vec![n])).attr("dtype", d).attr("seed", 7i64).attr("seed2", 3i64);
            let id = graph.op_spec(spec).unwrap().node;
            let node = graph.node(id).unwrap();
            let Some(g) = g else { continue };
            let a = values(&run_gpu(g, node, &[]).unwrap().0[0]);
            let b = values(&run_gpu(g, node, &[]).unwrap().0[0]);
            let mean = a.iter().sum::<f64>() / n as f64;
            let var = a.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
            let (m0, v0) = if op == "RandomUniform" { (0.5, 1.0 / 12.0) } else { (0.0, 1.0) };
            if (mean - m0).abs() > 0.01 || (var - v0).abs() > 0.02 * v0 {
                f.push(format!("{op} {d}: mean {mean} (want {m0}), variance {var} (want {v0})"));
            }
            if op == "RandomUniform" && a.iter().any(|&x| !(0.0..1.0).contains(&x)) {
                f.push(format!("{op} {d}: a value outside [0, 1)"));
            }
            if a.iter().any(|x| !x.is_finite()) {
                f.push(format!("{op} {d}: a non-finite value"));
            }
            if a == b {
                f.push(format!("{op} {d}: two runs gave the same values"));
            }
        }
    }
    finish("random", f);
}

/// Every case group above, one after another (they share the one GPU stream), then the
/// coverage rule: each op the registry launches on a GPU, except the movement family
/// (`gpu_movement.rs`), was checked by some case. Without a GPU the cases still build each
/// graph and run its CPU kernel, so the rule holds on every machine.
#[test]
fn every_launched_op_matches_the_cpu() {
    unary_ops_match_the_cpu();
    casts_match_the_cpu();
    broadcasting_binary_ops_and_comparisons_match_the_cpu();
    reductions_and_softmax_match_the_cpu();
    products_match_the_cpu();
    training_updates_match_the_cpu();
    random_ops_have_the_right_moments_and_fresh_streams();
    let checked = CHECKED.lock().unwrap_or_else(|p| p.into_inner());
    let launched: Vec<&str> = oxiflow_cuda::kernels::ops_needing_launchers().into_iter().filter(|d| d.launch != GpuLaunch::Movement).map(|d| d.name).collect();
    let missing: Vec<&&str> = launched.iter().filter(|op| !checked.contains(**op)).collect();
    assert!(missing.is_empty(), "ops with a GPU launcher and no case in gpu_ops.rs: {missing:?}");
    println!("{} launched ops checked against their CPU kernels", launched.len());
}
