//! The data-movement and indexing kernels on a real GPU: every case of
//! `tests/common/movement_cases.rs` (each op of the family, each GPU dtype, edge cases) runs
//! through its launcher (`oxiflow_cuda::launch::launcher`), and again through its plan with
//! the 64-bit index path forced and one block per launch, and must give exactly the CPU
//! kernel's bytes; the bad-index cases must give TF's GPU results (zeros, skipped scatter
//! rows) and record the first bad position for `launch_checked`.
//!
//! Buffers, streams and modules come from cudarc directly (not from the device), and the
//! kernels are compiled here with NVRTC for the GPU's compute capability, as the library
//! compiles them (`kernels::compile_ptx`). Output and scratch buffers start as 0xAB bytes,
//! so an element a launch never writes shows. Each test starts at
//! [`oxiflow_cuda::testing::gpu_or_skip`]: it skips only where no CUDA driver or GPU
//! exists, and fails where a GPU is present but cannot be used (NVRTC missing, say).

#[path = "common/movement_cases.rs"]
mod cases;

use cases::{bad_index_cases, cases, tensor_bytes, Case};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr};
use cudarc::nvrtc::Ptx;
use oxiflow_cuda::launch::movement::index::{bad_index_error, bad_index_row, launch_checked, NO_BAD_INDEX};
use oxiflow_cuda::launch::movement::{execute_with_grid, planner, Step};
use oxiflow_cuda::launch::{launcher, DevArg, LaunchCtx, Scratch};
use oxiflow_cuda::testing::gpu_or_skip;
use oxiflow_cuda::{CudaError, CudaResult};
use std::sync::Arc;

const DEVICE: &str = "/job:localhost/replica:0/task:0/device:GPU:0";

/// How [`Gpu::run`] launches a case.
#[derive(Clone, Copy)]
enum Mode<'a> {
    Launcher,
    WideOneBlock,
    Checked(&'a CudaSlice<u64>),
}

/// A CUDA context, its stream and the two kernel modules.
struct Gpu {
    stream: Arc<CudaStream>,
    modules: Vec<Arc<CudaModule>>,
}

fn driver(call: &str, e: cudarc::driver::DriverError) -> CudaError {
    CudaError::Driver { device: DEVICE.into(), call: call.into(), msg: e.to_string() }
}

/// `Some(gpu)`, or `None` where [`gpu_or_skip`] skips `test` (it has printed why); panics
/// where a GPU is present but cannot be used.
fn gpu(test: &str) -> Option<Gpu> {
    if !gpu_or_skip(test) {
        return None;
    }
    let ctx = CudaContext::new(0).expect("CUDA context on GPU 0");
    let (major, minor) = ctx.compute_capability().expect("compute capability");
    let arch = oxiflow_cuda::kernels::arch_for(major, minor);
    let modules = ["shape.cu", "index.cu"]
        .iter()
        .map(|file| {
            // the source and options the library compiles with (prelude included)
            let kf = oxiflow_cuda::kernels::KERNEL_FILES.iter().find(|f| f.name == *file).expect("kernel file");
            let ptx = oxiflow_cuda::kernels::compile_ptx(kf, &arch).unwrap_or_else(|e| panic!("{file} for {arch}: {e}"));
            ctx.load_module(Ptx::from_src(ptx)).unwrap_or_else(|e| panic!("loading {file}: {e}"))
        })
        .collect();
    println!("running on GPU 0 ({arch})");
    Some(Gpu { stream: ctx.default_stream(), modules })
}

/// Temporary memory for `LaunchCtx::scratch` (the movement launchers use none).
struct GpuScratch {
    buf: CudaSlice<u8>,
    stream: Arc<CudaStream>,
}

impl Scratch for GpuScratch {
    fn ptr(&self) -> u64 {
        self.buf.device_ptr(&self.stream).0
    }
}

impl Gpu {
    fn function(&self, name: &str) -> CudaResult<CudaFunction> {
        for m in &self.modules {
            if let Ok(f) = m.load_function(name) {
                return Ok(f);
            }
        }
        Err(CudaError::Unsupported(format!("no kernel entry {name} in shape.cu or index.cu")))
    }

    /// A device buffer holding `bytes` (at least one byte, so that empty tensors get a
    /// valid pointer).
    fn upload(&self, bytes: &[u8]) -> CudaSlice<u8> {
        let mut v = bytes.to_vec();
        if v.is_empty() {
            v.push(0);
        }
        self.stream.clone_htod(&v).expect("host-to-device copy")
    }

    fn ptr(&self, b: &CudaSlice<u8>) -> u64 {
        b.device_ptr(&self.stream).0
    }

    /// Runs `case` through its launcher (`Mode::Launcher`), through its plan with the
    /// 64-bit index path forced and one block per launch (`Mode::WideOneBlock`: every
    /// grid-stride loop runs many times), or through `launch_checked` with the bad-index
    /// word (`Mode::Checked`), and returns the output bytes.
    fn run(&self, case: &Case, mode: Mode) -> Vec<Vec<u8>> {
        let node = case.node();
        let ins: Vec<CudaSlice<u8>> = case.inputs.iter().map(|t| self.upload(&tensor_bytes(t))).collect();
        // Outputs start as 0xAB bytes, so an element the kernel fails to write shows.
        let sizes: Vec<usize> = node.outputs.iter().map(|t| t.shape.num_elements() * t.dtype.size_of()).collect();
        let outs: Vec<CudaSlice<u8>> = sizes.iter().map(|&n| self.upload(&vec![0xAB; n])).collect();
        let in_args: Vec<DevArg> = ins.iter().zip(&case.inputs).map(|(b, t)| DevArg { ptr: self.ptr(b), dtype: t.dtype(), dims: t.dims().to_vec() }).collect();
        let out_args: Vec<DevArg> = outs.iter().zip(&node.outputs).map(|(b, t)| DevArg { ptr: self.ptr(b), dtype: t.dtype, dims: t.shape.0.clone() }).collect();
        let function = |name: &str| self.function(name);
        let stream = self.stream.clone();
        let scratch = move |n: usize| -> CudaResult<Box<dyn Scratch>> {
            // 0xAB bytes, as the outputs: the device's allocator gives uninitialised memory
            let buf = stream.clone_htod(&vec![0xABu8; n.max(1)]).map_err(|e| driver("cuMemcpyHtoD (scratch)", e))?;
            Ok(Box::new(GpuScratch { buf, stream: stream.clone() }))
        };
        let ctx = LaunchCtx { device: DEVICE, stream: &self.stream, function: &function, blas: None, scratch: &scratch };
        let result = match mode {
            Mode::Launcher => launcher(node.op).expect("launcher")(&ctx, node, &in_args, &out_args),
            Mode::WideOneBlock => planner(node.op.name).expect("planner")(node, &in_args, &out_args, 0).and_then(|mut steps| {
                for s in &mut steps {
                    if let Step::Kernel { meta, .. } = s {
                        meta.force_wide();
                    }
                }
                execute_with_grid(&ctx, node, &steps, 1)
            }),
            Mode::Checked(word) => launch_checked(&ctx, node, &in_args, &out_args, word.device_ptr(&self.stream).0),
        };
        result.unwrap_or_else(|e| panic!("{}: launch failed: {e}", case.name));
        self.stream.synchronize().unwrap_or_else(|e| panic!("{}: kernel failed: {e}", case.name));
        outs.iter()
            .zip(&sizes)
            .map(|(b, &n)| {
                let mut v = self.stream.clone_dtoh(b).expect("device-to-host copy");
                v.truncate(n);
                v
            })
            .collect()
    }
}

#[test]
fn movement_kernels_match_the_cpu_kernels_on_the_gpu() {
    let Some(gpu) = gpu("movement_kernels_match_the_cpu_kernels_on_the_gpu") else { return };
    let all = cases();
    let mut failed = Vec::new();
    for case in &all {
        let want: Vec<Vec<u8>> = case.cpu_outputs().iter().map(tensor_bytes).collect();
        if gpu.run(case, Mode::Launcher) != want {
            failed.push(case.name.clone());
        }
        if gpu.run(case, Mode::WideOneBlock) != want {
            failed.push(format!("{} (64-bit path, one block)", case.name));
        }
    }
    assert!(failed.is_empty(), "{} of {} cases differ from the CPU kernels: {failed:#?}", failed.len(), all.len());
    println!("{} cases equal to the CPU kernels", all.len());
}

#[test]
fn bad_indices_on_the_gpu_follow_tf_and_are_recorded() {
    let Some(gpu) = gpu("bad_indices_on_the_gpu_follow_tf_and_are_recorded") else { return };
    for (case, pos, cpu_error) in bad_index_cases() {
        let word = gpu.stream.clone_htod(&[NO_BAD_INDEX]).expect("bad-index word");
        let outs = gpu.run(&case, Mode::Checked(&word));
        let got = gpu.stream.clone_dtoh(&word).expect("read the bad-index word")[0];
        assert_eq!(got, pos, "{}: recorded position", case.name);
        let node = case.node();
        let args: Vec<DevArg> = case.inputs.iter().map(|t| DevArg { ptr: 0, dtype: t.dtype(), dims: t.dims().to_vec() }).collect();
        let (first, k) = bad_index_row(node, &args, got);
        let idx = if node.op.name == "ScatterNd" { &case.inputs[0] } else { &case.inputs[1] };
        let vals: Vec<i64> = idx.to_f64_vec().iter().map(|&v| v as i64).collect();
        assert_eq!(bad_index_error(node, &args, got, &vals[first..first + k]).to_string(), cpu_error, "{}", case.name);
        let out: Vec<f32> = outs[0].chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        let want: &[f32] = match node.op.name {
            "GatherV2" => &[1.0, 2.5, 4.0, 0.0, 0.0, 0.0, -3.5, -2.0, -0.5, 0.0, 0.0, 0.0],
            "GatherNd" => &[-3.5, 0.0, 0.0],
            _ => &[-3.5, -2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        };
        assert_eq!(out, want, "{}: TF's GPU results for bad indices", case.name);
    }
}
