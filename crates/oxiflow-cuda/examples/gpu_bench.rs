//! `make bench-gpu` (through `scripts/gpu-check.sh run` on a GPU machine): the GPU figures
//! of docs/performance/gpu.md, each timed with CUDA events (kernels, copies) or the wall clock (whole session
//! runs), after warm-up, median of the repetitions.
//!
//! 1. Device-to-device copy bandwidth (the reference for elementwise kernels), counting
//!    bytes read and written; host<->device copies from pinned memory.
//! 2. Elementwise Float32 throughput: `Mul` (two inputs, one output) and `Sin` on 2^26
//!    elements, through Oxiflow's launchers, in GB/s and as a share of the copy bandwidth.
//! 3. `MatMul` Float32/Float64 GFLOP/s through the launcher against a bare cuBLAS call on
//!    the same buffers.
//! 4. Per-op overhead: 10k scalar `Sin` launches through the launcher alone, then a 10k-op
//!    scalar `Sin`/`Cos` chain fed by a placeholder, run in a
//!    session on GPU:0 (what the CPU executor's 0.1 µs/op target measures on the host).
//! 5. An MLP training step (784-512-512-10, batch 256, Float32, gradient descent) in a
//!    session on GPU:0; `scripts/torch_bench.py` times the same chain and step in PyTorch.
//!
//! Without a GPU it says so and exits 0.

use cudarc::cublas::{Gemm, GemmConfig};
use cudarc::driver::{sys, CudaContext, CudaSlice, CudaStream, DevicePtr};
use oxiflow_core::autodiff::gradients;
use oxiflow_core::graph::DeviceScope;
use oxiflow_core::{DType, DeviceSpec, Graph, Layout, Output, Session, SessionOptions, Tensor};
use oxiflow_cuda::kernels::KernelLibrary;
use oxiflow_cuda::launch::{launcher, DevArg, LaunchCtx, Scratch};
use std::sync::{Arc, RwLock};
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Median milliseconds of `reps` runs of `f` on `stream`, timed by CUDA events, after 3
/// warm-up runs.
fn time_ms(stream: &Arc<CudaStream>, reps: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..3 {
        f();
    }
    let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
    let mut v = Vec::new();
    for _ in 0..reps {
        let a = stream.record_event(flags).unwrap();
        f();
        let b = stream.record_event(flags).unwrap();
        v.push(a.elapsed_ms(&b).unwrap() as f64);
    }
    median(v)
}

struct Buf {
    _s: CudaSlice<u8>,
    arg: DevArg,
}

fn buf(stream: &Arc<CudaStream>, dtype: DType, dims: &[usize]) -> Buf {
    let n = dims.iter().product::<usize>() * dtype.size_of();
    let s = stream.alloc_zeros::<u8>(n.max(1)).unwrap();
    let (ptr, _) = s.device_ptr(stream);
    Buf { arg: DevArg { ptr, dtype, dims: dims.to_vec() }, _s: s }
}

/// `C = A B` for `m x m` column-major matrices.
fn square_gemm<T>(m: usize, one: T, zero: T) -> GemmConfig<T> {
    let op = cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_N;
    let m = m as i32;
    GemmConfig { transa: op, transb: op, m, n: m, k: m, alpha: one, lda: m, ldb: m, beta: zero, ldc: m }
}

struct NoScratch {
    _buf: CudaSlice<u8>,
    ptr: u64,
}
impl Scratch for NoScratch {
    fn ptr(&self) -> u64 {
        self.ptr
    }
}

/// Times `op` on fresh buffers of the node's shapes through its launcher: the median of
/// `reps` launches by CUDA events in ms, or, with `host_us`, host microseconds per launch
/// over `reps` launches in a row followed by one synchronize (the launch path's cost).
fn time_op(stream: &Arc<CudaStream>, lib: &KernelLibrary, blas: Option<&cudarc::cublas::CudaBlas>, g: &Graph, out: Output, reps: usize) -> f64 {
    launch_op(stream, lib, blas, g, out, reps, false)
}

fn launch_op(
    stream: &Arc<CudaStream>,
    lib: &KernelLibrary,
    blas: Option<&cudarc::cublas::CudaBlas>,
    g: &Graph,
    out: Output,
    reps: usize,
    host_us: bool,
) -> f64 {
    let node = g.node(out.node).unwrap();
    let ins: Vec<Buf> = node
        .inputs
        .iter()
        .map(|i| {
            let t = g.output_type(*i).unwrap();
            buf(stream, t.dtype, t.shape.dims())
        })
        .collect();
    let outs: Vec<Buf> = node.outputs.iter().map(|t| buf(stream, t.dtype, t.shape.dims())).collect();
    let f = launcher(node.op).expect("launcher");
    let function = |e: &str| lib.function(e);
    let scratch = |n: usize| -> oxiflow_cuda::CudaResult<Box<dyn Scratch>> {
        let s = stream.alloc_zeros::<u8>(n.max(1)).unwrap();
        let (p, _) = s.device_ptr(stream);
        Ok(Box::new(NoScratch { _buf: s, ptr: p }))
    };
    let ctx = LaunchCtx { device: "/device:GPU:0", stream, function: &function, blas, scratch: &scratch };
    let ia: Vec<DevArg> = ins.iter().map(|b| b.arg.clone()).collect();
    let oa: Vec<DevArg> = outs.iter().map(|b| b.arg.clone()).collect();
    if host_us {
        for _ in 0..100 {
            f(&ctx, node, &ia, &oa).unwrap();
        }
        stream.synchronize().unwrap();
        let t = Instant::now();
        for _ in 0..reps {
            f(&ctx, node, &ia, &oa).unwrap();
        }
        stream.synchronize().unwrap();
        return t.elapsed().as_secs_f64() * 1e6 / reps as f64;
    }
    time_ms(stream, reps, || f(&ctx, node, &ia, &oa).unwrap())
}

fn main() {
    let reason = oxiflow_cuda::provider::register();
    let Some(p) = oxiflow_core::device::provider::gpu_provider().filter(|p| !p.gpus().is_empty()) else {
        println!("gpu_bench: no GPU ({}); nothing measured", reason.unwrap_or_default());
        return;
    };
    let gpu = &p.gpus()[0];
    println!("device: {}", oxiflow_cuda::discovery::describe(0, gpu));
    let ctx = CudaContext::new(0).unwrap();
    let stream = ctx.new_stream().unwrap();
    let t0 = Instant::now();
    let lib = KernelLibrary::load(&ctx).expect("kernel library");
    println!("kernel library: {} entries for {} in {:.1} s (NVRTC or the disk cache)", lib.len(), lib.arch(), t0.elapsed().as_secs_f64());
    let blas = cudarc::cublas::CudaBlas::new(stream.clone()).ok();

    // 1. copies
    let bytes = 1usize << 30;
    let a = stream.alloc_zeros::<u8>(bytes).unwrap();
    let mut b = stream.alloc_zeros::<u8>(bytes).unwrap();
    let ms = time_ms(&stream, 10, || stream.memcpy_dtod(&a, &mut b).unwrap());
    let d2d = 2.0 * bytes as f64 / (ms * 1e-3) / 1e9;
    println!("copy device->device: {d2d:.0} GB/s (read + write, 1 GiB)");
    let host = unsafe { ctx.alloc_pinned::<u8>(256 << 20) }.unwrap();
    let mut dst = stream.alloc_zeros::<u8>(256 << 20).unwrap();
    let ms = time_ms(&stream, 10, || stream.memcpy_htod(&host, &mut dst).unwrap());
    println!("copy host->device (pinned): {:.1} GB/s (256 MiB)", (256u64 << 20) as f64 / (ms * 1e-3) / 1e9);
    let mut host2 = unsafe { ctx.alloc_pinned::<u8>(256 << 20) }.unwrap();
    let ms = time_ms(&stream, 10, || stream.memcpy_dtoh(&dst, &mut host2).unwrap());
    println!("copy device->host (pinned): {:.1} GB/s (256 MiB)", (256u64 << 20) as f64 / (ms * 1e-3) / 1e9);
    drop((a, b, dst));

    // 2. elementwise
    let n = 1usize << 26;
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float32, &[n], None).unwrap();
    let y = g.placeholder(DType::Float32, &[n], None).unwrap();
    let mul = g.op("Mul", &[x, y]).unwrap();
    let sin = g.op("Sin", &[x]).unwrap();
    for (name, out, moved) in [("Mul", mul, 12.0), ("Sin", sin, 8.0)] {
        let ms = time_op(&stream, &lib, blas.as_ref(), &g, out, 20);
        let gbs = moved * n as f64 / (ms * 1e-3) / 1e9;
        println!("elementwise {name} f32, 2^26 elements: {gbs:.0} GB/s = {:.0}% of the device copy", 100.0 * gbs / d2d);
    }

    // 3. MatMul against bare cuBLAS
    for &m in &[1024usize, 2048, 4096] {
        for dt in [DType::Float32, DType::Float64] {
            let mut g = Graph::new();
            let x = g.placeholder(dt, &[m, m], None).unwrap();
            let w = g.placeholder(dt, &[m, m], None).unwrap();
            let mm = g.op("MatMul", &[x, w]).unwrap();
            let ms = time_op(&stream, &lib, blas.as_ref(), &g, mm, 10);
            let flop = 2.0 * (m as f64).powi(3);
            let ours = flop / (ms * 1e-3) / 1e9;
            let bare = blas.as_ref().map(|bl| {
                let ms = if dt == DType::Float32 {
                    let (a, b) = (stream.alloc_zeros::<f32>(m * m).unwrap(), stream.alloc_zeros::<f32>(m * m).unwrap());
                    let mut c = stream.alloc_zeros::<f32>(m * m).unwrap();
                    time_ms(&stream, 10, || unsafe { bl.gemm(square_gemm(m, 1.0f32, 0.0f32), &a, &b, &mut c).unwrap() })
                } else {
                    let (a, b) = (stream.alloc_zeros::<f64>(m * m).unwrap(), stream.alloc_zeros::<f64>(m * m).unwrap());
                    let mut c = stream.alloc_zeros::<f64>(m * m).unwrap();
                    time_ms(&stream, 10, || unsafe { bl.gemm(square_gemm(m, 1.0f64, 0.0f64), &a, &b, &mut c).unwrap() })
                };
                flop / (ms * 1e-3) / 1e9
            });
            match bare {
                Some(bare) => println!("MatMul {dt} n={m}: {ours:.0} GFLOP/s, bare cuBLAS {bare:.0} GFLOP/s ({:.0}%)", 100.0 * ours / bare),
                None => println!("MatMul {dt} n={m}: {ours:.0} GFLOP/s (no cuBLAS handle for the bare call)"),
            }
        }
    }

    // 4. per-op cost: the launcher alone (kernel launch and its metadata), then the
    // 10k-op chain in a session on GPU:0 (executor, allocator, launch)
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float32, &[], None).unwrap();
    let sin = g.op("Sin", &[x]).unwrap();
    let us = launch_op(&stream, &lib, blas.as_ref(), &g, sin, 10_000, true);
    println!("launcher alone, scalar Sin f32: {us:.2} us/op (10k launches, host clock)");
    let mut g = Graph::new();
    g.push_device(DeviceScope::Spec(DeviceSpec::parse("/GPU:0").unwrap()));
    let x = g.placeholder(DType::Float32, &[], None).unwrap();
    let mut t = x;
    for i in 0..10_000 {
        t = g.op(if i % 2 == 0 { "Sin" } else { "Cos" }, &[t]).unwrap();
    }
    g.pop_device().unwrap();
    let g = Arc::new(RwLock::new(g));
    let sess = Session::new(g.clone(), SessionOptions { emulated_gpus: Some(0), ..Default::default() }).unwrap();
    let feed = vec![(x, Tensor::scalar(0.5f32))];
    sess.run(&feed, &[t], &[], false).unwrap();
    let mut v = Vec::new();
    for _ in 0..10 {
        let s = Instant::now();
        sess.run(&feed, &[t], &[], false).unwrap();
        v.push(s.elapsed().as_secs_f64());
    }
    println!("chain of 10k scalar Sin/Cos on GPU:0 in a session: {:.2} us/op (median of 10 runs)", median(v) * 1e6 / 10_000.0);

    // 5. an MLP training step: inputs fed from host memory each step, then held on the GPU
    // in variables as PyTorch's side holds them (scripts/torch_bench.py)
    mlp_step(false);
    mlp_step(true);
}

/// Times one gradient-descent step of an MLP 784-512-512-10 (Float32, batch 256, ReLU,
/// loss `sum((h - y)^2)`) in a session on GPU:0, median of 20 after 3 warm-up steps, the
/// loss fetched; `resident`: `x` and `y` are GPU variables read by the step, else
/// placeholders fed from host memory at every step. Then prints one traced step's
/// breakdown ([`print_step`]).
fn mlp_step(resident: bool) {
    let (bsz, dims) = (256usize, [784usize, 512, 512, 10]);
    let mut g = Graph::new();
    g.push_device(DeviceScope::Spec(DeviceSpec::parse("/GPU:0").unwrap()));
    let (xt, yt) = (Tensor::full(&[bsz, dims[0]], 0.1f32), Tensor::full(&[bsz, dims[3]], 1.0f32));
    let (xin, yin) = if resident {
        (Output::new(g.variable(xt.clone(), None, false).unwrap(), 0), Output::new(g.variable(yt.clone(), None, false).unwrap(), 0))
    } else {
        (g.placeholder(DType::Float32, &[bsz, dims[0]], None).unwrap(), g.placeholder(DType::Float32, &[bsz, dims[3]], None).unwrap())
    };
    let mut h = xin;
    let mut vars = Vec::new();
    for l in 0..3 {
        let w0: Vec<f32> = (0..dims[l] * dims[l + 1]).map(|i| ((i * 7919 % 1000) as f32 / 1000.0 - 0.5) * 0.05).collect();
        let w = g.variable(Tensor::from_vec(&[dims[l], dims[l + 1]], w0, Layout::RowMajor).unwrap(), None, true).unwrap();
        vars.push(Output::new(w, 0));
        h = g.op("MatMul", &[h, Output::new(w, 0)]).unwrap();
        if l < 2 {
            h = g.op("Relu", &[h]).unwrap();
        }
    }
    let r = g.op("Sub", &[h, yin]).unwrap();
    let r2 = g.op("Square", &[r]).unwrap();
    let loss = g.op("Sum", &[r2]).unwrap();
    let grads = gradients(&mut g, &[loss], &vars, None, true).unwrap();
    let lr = g.constant(Tensor::scalar(1e-4f32)).unwrap();
    let steps: Vec<_> = vars.iter().zip(&grads).map(|(v, d)| g.op("ApplyGradientDescent", &[*v, lr, d.unwrap()]).unwrap().node).collect();
    g.pop_device().unwrap();
    let init = g.global_variables_initializer().unwrap();
    let g = Arc::new(RwLock::new(g));
    let sess = Session::new(g, SessionOptions { emulated_gpus: Some(0), ..Default::default() }).unwrap();
    sess.run(&[], &[], &[init], false).unwrap();
    let feed = if resident { vec![] } else { vec![(xin, xt), (yin, yt)] };
    for _ in 0..3 {
        sess.run(&feed, &[loss], &steps, false).unwrap();
    }
    let mut v = Vec::new();
    for _ in 0..20 {
        let s = Instant::now();
        sess.run(&feed, &[loss], &steps, false).unwrap();
        v.push(s.elapsed().as_secs_f64());
    }
    let how = if resident { "inputs in GPU variables" } else { "inputs fed from host memory" };
    println!("MLP 784-512-512-10 f32 batch 256, one GD step in a session, {how}: {:.3} ms (median of 20, loss fetched)", median(v) * 1e3);
    let t = Instant::now();
    let out = sess.run(&feed, &[loss], &steps, true).unwrap();
    print_step(how, t.elapsed().as_secs_f64(), &out.step_stats.unwrap());
}

/// One traced step, in a few lines: its wall time; per device, the steps run and the sum of
/// their times, split into kernels timed by CUDA events and host-timed steps (launches
/// without a kernel, variables, copies); the copies; the longest steps.
fn print_step(how: &str, wall: f64, st: &oxiflow_core::profile::StepStats) {
    let ms = |n: &oxiflow_core::profile::NodeExecStats| (n.end_ns - n.start_ns) as f64 * 1e-6;
    println!("  traced step ({how}): {:.3} ms wall", wall * 1e3);
    for d in &st.devices {
        let on: Vec<_> = st.nodes.iter().filter(|n| &st.label(n).device == d && st.label(n).copy.is_none()).collect();
        let (dev, host): (Vec<_>, Vec<_>) = on.iter().partition(|n| n.device_clock);
        let sum = |v: &[&&oxiflow_core::profile::NodeExecStats]| v.iter().map(|n| ms(n)).sum::<f64>() + 0.0;
        println!("    {d}: {} steps, {} device-timed {:.3} ms, {} host-timed {:.3} ms", on.len(), dev.len(), sum(&dev), host.len(), sum(&host));
    }
    let c = st.copies();
    let copy_ms = st.nodes.iter().filter(|n| st.label(n).copy.is_some()).map(ms).sum::<f64>() + 0.0;
    println!("    copies: {} ({} bytes, {:.3} ms)", c.count, c.bytes, copy_ms);
    let mut top: Vec<_> = st.nodes.iter().collect();
    top.sort_by(|a, b| ms(b).total_cmp(&ms(a)));
    let list: Vec<String> = top.iter().take(6).map(|n| format!("{} {} {:.3}", st.label(n).op, if n.device_clock { "dev" } else { "host" }, ms(n))).collect();
    println!("    longest (op clock ms): {}", list.join(", "));
}
