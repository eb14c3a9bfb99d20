//! Everything below Julia on a real GPU, called only through the exported `oxf_*` functions
//! the way the Julia package's `ccall`s do: graphs built with device functions, device
//! scopes and colocated gradients; sessions from options JSON (`emulated_gpus: 0`, so the
//! GPU is the CUDA one, and `allow_soft_placement: false`, so an op without a GPU kernel
//! fails instead of quietly running on the CPU); runs, assigned devices, the session's
//! device list and a traced step's profile.
//!
//! - Seed 000's program: a Float64 variable `a` put on the CPU by a device function that
//!   sends every other op to GPU:0, `b = sin(a)` on GPU:0, `c = cos(b)` on `/CPU:0`, and
//!   `dc/da` from colocated gradients. Oracle: `sin(1)`, `cos(sin(1))`,
//!   `-sin(sin(1)) cos(1)` computed here in Rust, to 1e-12.
//! - A small MLP (`tanh(x W1 + b1) W2`, squared-error loss, `ApplyGradientDescent`) in
//!   Float64 and Float32, three training steps on GPU:0 and in a CPU-only session. Oracle:
//!   the same forward and backward pass written out here in Rust (Float64, from the same
//!   rounded start values); GPU and CPU agree to 1e-12 (Float64) or 1e-5 (Float32),
//!   relative, and both with the oracle.
//!
//! A traced GPU step must show GPU:0's kernels timed by CUDA events: their profile events
//! carry `args.clock = "device"` and their times lie inside the run.
//!
//! Every test starts at [`oxiflow_cuda::testing::gpu_or_skip`], which skips only where no
//! driver or GPU exists (and fails under `OXIFLOW_REQUIRE_GPU=1`). Without a GPU the graphs
//! are still built and run in a CPU-only session, so the ABI calls are checked on every
//! machine; the GPU sessions take a lock, so the tests use the GPU one at a time.

use oxiflow::*;
use oxiflow_cuda::testing::gpu_or_skip;
use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr::{null, null_mut};
use std::sync::{Mutex, MutexGuard};

const GPU0: &str = "/job:localhost/replica:0/task:0/device:GPU:0";
const CPU0: &str = "/job:localhost/replica:0/task:0/device:CPU:0";
/// The real GPUs only, no soft placement (Julia: `Session(emulated_gpus=0, soft=false)`).
const GPU_SESSION: &str = r#"{"emulated_gpus": 0, "allow_soft_placement": false}"#;
/// No GPU at all: the GPU requests fall back to the CPU.
const CPU_SESSION: &str = r#"{"emulated_gpus": 0, "GPU": 0, "allow_soft_placement": true}"#;
const F32: i32 = 1;
const F64: i32 = 2;

fn last_error() -> String {
    unsafe { CStr::from_ptr(oxf_last_error()) }.to_string_lossy().into_owned()
}

fn ok(status: i32, call: &str) {
    assert_eq!(status, 0, "{call}: {}", last_error());
}

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// Copies a returned string at once (it lives until the next `oxf_` call on this thread).
fn text(status: i32, p: *const c_char, call: &str) -> String {
    ok(status, call);
    unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_string()
}

/// The lock that keeps this file's GPU sessions apart.
fn gpu_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn unix_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// `data` as the bytes of a Float32 or Float64 array.
fn bytes_of(dtype: i32, data: &[f64]) -> Vec<u8> {
    match dtype {
        F32 => data.iter().flat_map(|&v| (v as f32).to_ne_bytes()).collect(),
        F64 => data.iter().flat_map(|&v| v.to_ne_bytes()).collect(),
        _ => panic!("dtype {dtype}"),
    }
}

/// A graph handle and the calls Julia's `Graph` makes on it.
struct Graph(*mut OxGraph);

impl Graph {
    fn new() -> Graph {
        Graph(oxf_graph_new())
    }

    fn constant(&self, dtype: i32, dims: &[i64], data: &[f64]) -> i64 {
        let b = bytes_of(dtype, data);
        let mut out = 0;
        ok(oxf_const(self.0, dtype, dims.len() as i32, dims.as_ptr(), b.as_ptr() as *const c_void, b.len(), 0, null(), &mut out), "oxf_const");
        out
    }

    fn variable(&self, dtype: i32, dims: &[i64], data: &[f64], name: Option<&str>) -> i64 {
        let b = bytes_of(dtype, data);
        let name = name.map(c);
        let mut out = 0;
        let np = name.as_ref().map_or(null(), |n| n.as_ptr());
        ok(oxf_variable(self.0, dtype, dims.len() as i32, dims.as_ptr(), b.as_ptr() as *const c_void, b.len(), 0, np, 1, &mut out), "oxf_variable");
        out
    }

    /// `op(inputs...)`, every input being output 0 of its node.
    fn op(&self, op: &str, inputs: &[i64]) -> i64 {
        let idx = vec![0i32; inputs.len()];
        let mut out = 0;
        ok(oxf_add_op(self.0, c(op).as_ptr(), inputs.as_ptr(), idx.as_ptr(), inputs.len() as i32, null(), null(), &mut out), op);
        out
    }

    fn push_device(&self, spec: &str) {
        ok(oxf_push_device(self.0, c(spec).as_ptr()), "oxf_push_device");
    }

    fn pop_device(&self) {
        ok(oxf_pop_device(self.0), "oxf_pop_device");
    }

    /// `gradients(y, xs; colocate=true)`: one node per x (its output 0).
    fn gradients(&self, y: i64, xs: &[i64]) -> Vec<i64> {
        let xi = vec![0i32; xs.len()];
        let (mut on, mut oi) = (vec![-1i64; xs.len()], vec![-1i32; xs.len()]);
        ok(oxf_gradients(self.0, &y, &0, 1, xs.as_ptr(), xi.as_ptr(), xs.len() as i32, null(), null(), 1, on.as_mut_ptr(), oi.as_mut_ptr()), "oxf_gradients");
        assert!(on.iter().all(|&n| n >= 0) && oi.iter().all(|&i| i == 0), "gradients {on:?} {oi:?}");
        on
    }

    fn init(&self) -> i64 {
        let mut out = 0;
        ok(oxf_global_variables_initializer(self.0, &mut out), "oxf_global_variables_initializer");
        out
    }

    fn name(&self, node: i64) -> String {
        let mut p = null();
        text(oxf_node_name(self.0, node, &mut p), p, "oxf_node_name")
    }

    /// The requested device (`op.device`).
    fn device(&self, node: i64) -> String {
        let mut p = null();
        text(oxf_node_device(self.0, node, &mut p), p, "oxf_node_device")
    }

    fn by_name(&self, name: &str) -> i64 {
        let mut out = 0;
        ok(oxf_node_by_name(self.0, c(name).as_ptr(), &mut out), name);
        out
    }

    fn num_nodes(&self) -> i64 {
        let mut n = 0;
        ok(oxf_graph_num_nodes(self.0, &mut n), "oxf_graph_num_nodes");
        n
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        let st = oxf_graph_free(self.0);
        if !std::thread::panicking() {
            ok(st, "oxf_graph_free");
        }
    }
}

/// A session handle and the calls Julia's `Session`, `run` and `run_profile` make on it.
struct Session(*mut OxSession);

/// What one step returned: the fetched values (as Float64) and, when traced, the profile
/// JSON and the event lines.
struct Step {
    values: Vec<Vec<f64>>,
    trace: Option<(String, String)>,
}

impl Session {
    fn new(g: &Graph, options: &str) -> Session {
        let mut s = null_mut();
        ok(oxf_session_new(g.0, c(options).as_ptr(), &mut s), options);
        Session(s)
    }

    fn run(&self, fetches: &[i64], targets: &[i64], trace: bool) -> Step {
        let idx = vec![0i32; fetches.len()];
        let mut r = null_mut();
        let st = oxf_session_run(
            self.0,
            null(),
            null(),
            null(),
            0,
            fetches.as_ptr(),
            idx.as_ptr(),
            fetches.len() as i32,
            targets.as_ptr(),
            targets.len() as i32,
            trace as i32,
            &mut r,
        );
        ok(st, "oxf_session_run");
        let values = (0..fetches.len() as i32).map(|i| read_value(r, i)).collect();
        let trace = trace.then(|| {
            let mut p = null();
            let json = text(oxf_result_trace_json(r, &mut p), p, "oxf_result_trace_json");
            (json, text(oxf_result_trace_events(r, &mut p), p, "oxf_result_trace_events"))
        });
        ok(oxf_result_free(r), "oxf_result_free");
        Step { values, trace }
    }

    fn assigned(&self, node: i64) -> String {
        let mut p = null();
        text(oxf_session_assigned_device(self.0, node, &mut p), p, "oxf_session_assigned_device")
    }

    /// `name\ttype\tkind\tdescription\tmemory_limit` lines.
    fn devices(&self) -> Vec<Vec<String>> {
        let mut p = null();
        let t = text(oxf_session_devices(self.0, &mut p), p, "oxf_session_devices");
        t.lines().map(|l| l.split('\t').map(str::to_string).collect()).collect()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let st = oxf_session_free(self.0);
        if !std::thread::panicking() {
            ok(st, "oxf_session_free");
        }
    }
}

/// Fetched value `i` of `r` as Float64, read as Julia reads it (`oxf_result_type`, then
/// `oxf_result_copy`).
fn read_value(r: *const OxRunResult, i: i32) -> Vec<f64> {
    let (mut dtype, mut rank, mut dims) = (0, 0, [0i64; 4]);
    ok(oxf_result_type(r, i, &mut dtype, &mut rank, dims.as_mut_ptr(), 4), "oxf_result_type");
    let n: i64 = dims[..rank as usize].iter().product();
    let size = if dtype == F32 { 4 } else { 8 };
    let mut buf = vec![0u8; n as usize * size];
    ok(oxf_result_copy(r, i, buf.as_mut_ptr() as *mut c_void, buf.len(), 0), "oxf_result_copy");
    match dtype {
        F32 => buf.chunks_exact(4).map(|b| f32::from_ne_bytes(b.try_into().unwrap()) as f64).collect(),
        F64 => buf.chunks_exact(8).map(|b| f64::from_ne_bytes(b.try_into().unwrap())).collect(),
        _ => panic!("fetched value {i} has dtype {dtype}"),
    }
}

/// `|x - y| <= tol (1 + |y|)` elementwise.
fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: {got:?} vs {want:?}");
    for (k, (x, y)) in got.iter().zip(want).enumerate() {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()), "{what}[{k}]: {x} vs {y} (tolerance {tol})");
    }
}

/// The session's GPU:0 line shows a real CUDA GPU (kind `cuda`, TF's description with the
/// GPU's name and compute capability, as `oxf_cuda_status` reports it) and no emulated GPU
/// is listed. Returns the description.
fn assert_real_gpu(s: &Session) -> String {
    let devices = s.devices();
    assert!(devices.iter().all(|d| d[2] != "emulated"), "an emulated GPU in {devices:?}");
    let gpu = devices.iter().find(|d| d[0] == GPU0).unwrap_or_else(|| panic!("no GPU:0 in {devices:?}"));
    let (ty, kind, desc, limit) = (&gpu[1], &gpu[2], &gpu[3], gpu[4].parse::<u64>().unwrap());
    assert!(ty == "GPU" && kind == "cuda" && limit > 0, "{gpu:?}");
    assert!(desc.contains("name: ") && desc.contains("compute capability: "), "{desc}");
    let mut p = null();
    let status = text(oxf_cuda_status(&mut p), p, "oxf_cuda_status");
    assert!(status.starts_with("driver\tpresent\t"), "{status}");
    assert!(status.lines().any(|l| l.split('\t').nth(2).is_some_and(|d| desc.starts_with(d))), "{desc} is not a GPU oxf_cuda_status found:\n{status}");
    let mut mem = [0u64; 4];
    ok(oxf_session_memory_stats(s.0, c("/device:GPU:0").as_ptr(), mem.as_mut_ptr()), "oxf_session_memory_stats");
    assert!(mem[2] > 0 && mem[0] <= mem[2], "GPU:0 memory {mem:?}");
    desc.clone()
}

/// A traced step's profile, checked as `run_profile` hands it to Julia: each of `launched`
/// ran on GPU:0 inside the run's window `[t0, t1]` (the event lines, in ns) and its profile
/// event is marked as timed by CUDA events (`args.clock = "device"`); no CPU event is.
/// Returns how many GPU:0 events the device's clock timed.
fn assert_cuda_event_times(trace: &(String, String), t0: u64, t1: u64, launched: &[String]) -> usize {
    let (json, events) = trace;
    let lines: HashMap<&str, Vec<&str>> = events.lines().map(|l| l.split('\t').collect::<Vec<_>>()).filter(|f| f[0] == "op").map(|f| (f[1], f)).collect();
    let v: serde_json::Value = serde_json::from_str(json).expect("the profile is JSON");
    let all = v["traceEvents"].as_array().expect("traceEvents");
    let compute: HashMap<u64, &str> = all
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .filter_map(|e| Some((e["pid"].as_u64()?, e["args"]["name"].as_str()?.strip_suffix(" Compute")?)))
        .collect();
    // node name -> (device, clock) of the kernel events
    let ops: HashMap<&str, (&str, Option<&str>)> = all
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "Op")
        .map(|e| {
            let dev = e["pid"].as_u64().and_then(|p| compute.get(&p).copied()).unwrap_or_else(|| panic!("{e}: no Compute process"));
            (e["args"]["name"].as_str().unwrap(), (dev, e["args"]["clock"].as_str()))
        })
        .collect();
    for name in launched {
        let f = lines.get(name.as_str()).unwrap_or_else(|| panic!("{name} is not in the traced step:\n{events}"));
        let (start, end) = (f[4].parse::<u64>().unwrap(), f[5].parse::<u64>().unwrap());
        assert_eq!(f[3], GPU0, "{name} ran on {}", f[3]);
        assert!(t0 <= start && start <= end && end <= t1 + 1_000_000, "{name}: [{start}, {end}] outside the run [{t0}, {t1}]");
        assert_eq!(ops.get(name.as_str()), Some(&(GPU0, Some("device"))), "{name}: not timed by CUDA events in the profile");
    }
    for (name, (dev, clock)) in &ops {
        assert!(*dev == GPU0 || clock.is_none(), "{name} on {dev} claims the device's clock");
    }
    let mut p = null();
    let summary = text(oxf_timeline_summary(c(json).as_ptr(), &mut p), p, "oxf_timeline_summary");
    assert!(summary.contains("GPU:0"), "{summary}");
    ops.values().filter(|(dev, clock)| *dev == GPU0 && *clock == Some("device")).count()
}

/// Seed 000's `assign_to_device("/device:GPU:0")`: variables on the CPU, the rest on GPU:0.
unsafe extern "C" fn assign_to_device(_userdata: *mut c_void, node: *const OxNodeDef, out: *mut *const c_char) -> i32 {
    unsafe {
        let op = CStr::from_ptr((*node).op);
        *out = if op.to_bytes() == b"VariableV2" { c"/device:CPU:0".as_ptr() } else { c"/device:GPU:0".as_ptr() };
    }
    0
}

#[test]
fn seed_000_through_the_c_abi_puts_sin_and_its_gradient_on_the_real_gpu() {
    let gpu = gpu_or_skip("seed_000_through_the_c_abi_puts_sin_and_its_gradient_on_the_real_gpu");
    let g = Graph::new();
    ok(oxf_push_device_fn(g.0, Some(assign_to_device), null_mut()), "oxf_push_device_fn");
    let a = g.variable(F64, &[], &[1.0], None);
    let b = g.op("Sin", &[a]);
    g.pop_device();
    g.push_device("/CPU:0");
    let cos = g.op("Cos", &[b]);
    g.pop_device();
    let d = g.gradients(cos, &[a])[0];
    let init = g.init();
    // the requests, as the seed asserts them (`a.device`, `b.device`, `g.device`, colocation)
    assert_eq!([g.device(a), g.device(b), g.device(cos)], ["/device:CPU:0", "/device:GPU:0", "/device:CPU:0"]);
    let sin_grad: Vec<i64> = ["gradients/Sin_grad/Cos", "gradients/Sin_grad/mul"].iter().map(|n| g.by_name(n)).collect();
    assert!(sin_grad.contains(&d), "dc/da is {}", g.name(d));
    assert_eq!(g.device(d), "/device:GPU:0");
    let mut p = null();
    assert_eq!(text(oxf_node_colocation(g.0, d, &mut p), p, "oxf_node_colocation"), "loc:@Sin");
    let x = 1f64;
    let oracle = [x.sin(), x.sin().cos(), -x.sin().sin() * x.cos()];
    let fetches = [b, cos, d];

    let cpu = Session::new(&g, CPU_SESSION);
    assert!(cpu.devices().iter().all(|dv| dv[1] == "CPU"), "{:?}", cpu.devices());
    cpu.run(&[], &[init], false);
    let values: Vec<f64> = cpu.run(&fetches, &[], false).values.concat();
    assert_close("CPU session (b, c, dc/da)", &values, &oracle, 1e-12);
    assert_eq!(cpu.assigned(b), CPU0, "the CPU-only session has no GPU");
    drop(cpu);
    if !gpu {
        return;
    }

    let _lock = gpu_lock();
    let s = Session::new(&g, GPU_SESSION);
    let desc = assert_real_gpu(&s);
    s.run(&[], &[init], false);
    let values: Vec<f64> = s.run(&fetches, &[], false).values.concat();
    assert_close("GPU session (b, c, dc/da)", &values, &oracle, 1e-12);
    assert_eq!(s.assigned(a), CPU0, "the variable");
    assert_eq!(s.assigned(b), GPU0, "Sin");
    assert_eq!(s.assigned(cos), CPU0, "Cos");
    for &n in &sin_grad {
        assert_eq!(s.assigned(n), GPU0, "{} is colocated with Sin", g.name(n));
    }
    let t0 = unix_ns();
    let step = s.run(&fetches, &[], true);
    let t1 = unix_ns();
    assert_close("traced GPU step (b, c, dc/da)", &step.values.concat(), &oracle, 1e-12);
    let launched: Vec<String> = [b].iter().chain(&sin_grad).map(|&n| g.name(n)).collect();
    let timed = assert_cuda_event_times(step.trace.as_ref().unwrap(), t0, t1, &launched);
    // scripts/gpu-check.sh counts these lines: a GPU run with none of them proves nothing
    println!("kernels timed by CUDA events on GPU:0: {timed}");
    println!("GPU: {desc}");
}

const N: usize = 8; // rows of x
const D: usize = 5; // inputs
const H: usize = 4; // hidden units
const O: usize = 3; // outputs
const LR: f64 = 0.05;
const STEPS: usize = 3;

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f64> {
    (0..n).map(|i| (((i as u64 * 2654435761 + seed) % 1000) as f64) / 500.0 - 1.0).collect()
}

/// The MLP's start: x, t, W1, b1, W2 (row-major), rounded to `dtype`.
fn mlp_data(dtype: i32) -> [Vec<f64>; 5] {
    let round = |v: Vec<f64>| if dtype == F32 { v.into_iter().map(|x| x as f32 as f64).collect() } else { v };
    [values(N * D, 1), values(N * O, 2), values(D * H, 3), values(H, 4), values(H * O, 5)].map(round)
}

/// The oracle: `loss = sum((tanh(x W1 + b1) W2 - t)^2)` and its gradients with respect to
/// W1, b1, W2, by hand.
fn oracle_loss_and_grads(x: &[f64], t: &[f64], w: &[Vec<f64>; 3]) -> (f64, [Vec<f64>; 3]) {
    let (w1, b1, w2) = (&w[0], &w[1], &w[2]);
    let (mut dw1, mut db1, mut dw2) = (vec![0.0; D * H], vec![0.0; H], vec![0.0; H * O]);
    let mut loss = 0.0;
    for i in 0..N {
        let h: Vec<f64> = (0..H).map(|j| ((0..D).map(|k| x[i * D + k] * w1[k * H + j]).sum::<f64>() + b1[j]).tanh()).collect();
        let r: Vec<f64> = (0..O).map(|o| (0..H).map(|j| h[j] * w2[j * O + o]).sum::<f64>() - t[i * O + o]).collect();
        loss += r.iter().map(|v| v * v).sum::<f64>();
        for j in 0..H {
            let dh: f64 = (0..O).map(|o| 2.0 * r[o] * w2[j * O + o]).sum();
            let dz = dh * (1.0 - h[j] * h[j]);
            for o in 0..O {
                dw2[j * O + o] += h[j] * 2.0 * r[o];
            }
            for k in 0..D {
                dw1[k * H + j] += x[i * D + k] * dz;
            }
            db1[j] += dz;
        }
    }
    (loss, [dw1, db1, dw2])
}

/// The oracle's run: the loss before each of the `STEPS` steps, after them, and the final
/// W1, b1, W2.
fn oracle_training(dtype: i32) -> (Vec<f64>, [Vec<f64>; 3]) {
    let [x, t, w1, b1, w2] = mlp_data(dtype);
    let lr = if dtype == F32 { LR as f32 as f64 } else { LR };
    let mut w = [w1, b1, w2];
    let mut losses = Vec::new();
    for _ in 0..STEPS {
        let (loss, grads) = oracle_loss_and_grads(&x, &t, &w);
        losses.push(loss);
        for (v, gr) in w.iter_mut().zip(&grads) {
            v.iter_mut().zip(gr).for_each(|(a, b)| *a -= lr * b);
        }
    }
    losses.push(oracle_loss_and_grads(&x, &t, &w).0);
    (losses, w)
}

/// The MLP built as Julia builds it, all under `tf.device("/GPU:0")`.
struct Mlp {
    g: Graph,
    loss: i64,
    vars: [i64; 3],
    steps: Vec<i64>,
    matmuls: [i64; 2],
    init: i64,
}

fn build_mlp(dtype: i32) -> Mlp {
    let [xv, tv, w1v, b1v, w2v] = mlp_data(dtype);
    let g = Graph::new();
    g.push_device("/GPU:0");
    let x = g.constant(dtype, &[N as i64, D as i64], &xv);
    let t = g.constant(dtype, &[N as i64, O as i64], &tv);
    let w1 = g.variable(dtype, &[D as i64, H as i64], &w1v, Some("w1"));
    let b1 = g.variable(dtype, &[H as i64], &b1v, Some("b1"));
    let w2 = g.variable(dtype, &[H as i64, O as i64], &w2v, Some("w2"));
    let m1 = g.op("MatMul", &[x, w1]);
    let z = g.op("Add", &[m1, b1]);
    let h = g.op("Tanh", &[z]);
    let m2 = g.op("MatMul", &[h, w2]);
    let r = g.op("Sub", &[m2, t]);
    let r2 = g.op("Square", &[r]);
    let loss = g.op("Sum", &[r2]);
    let vars = [w1, b1, w2];
    let grads = g.gradients(loss, &vars);
    let lr = g.constant(dtype, &[], &[LR]);
    let steps = vars.iter().zip(&grads).map(|(&v, &d)| g.op("ApplyGradientDescent", &[v, lr, d])).collect();
    g.pop_device();
    let init = g.init();
    Mlp { g, loss, vars, steps, matmuls: [m1, m2], init }
}

/// What [`train`] saw: the loss before each step and after the last, the final W1, b1,
/// W2, and the traced step (if any) with the time window around it.
struct Training {
    losses: Vec<f64>,
    vars: Vec<Vec<f64>>,
    traced: Option<(Step, u64, u64)>,
}

/// Initializes, then `STEPS` times fetches the loss while running the updates (Julia's
/// `run(sess, [loss, train_op])`), the first one traced when `trace_first`.
fn train(s: &Session, m: &Mlp, trace_first: bool) -> Training {
    s.run(&[], &[m.init], false);
    let mut losses = Vec::new();
    let mut traced = None;
    for k in 0..STEPS {
        let trace = trace_first && k == 0;
        let t0 = unix_ns();
        let step = s.run(&[m.loss], &m.steps, trace);
        let t1 = unix_ns();
        losses.push(step.values[0][0]);
        if trace {
            traced = Some((step, t0, t1));
        }
    }
    let out = s.run(&[m.loss, m.vars[0], m.vars[1], m.vars[2]], &[], false).values;
    losses.push(out[0][0]);
    Training { losses, vars: out[1..].to_vec(), traced }
}

#[test]
fn an_mlp_trained_through_the_c_abi_on_the_gpu_equals_the_cpu_and_the_oracle() {
    let gpu = gpu_or_skip("an_mlp_trained_through_the_c_abi_on_the_gpu_equals_the_cpu_and_the_oracle");
    for (dtype, tol, oracle_tol) in [(F64, 1e-12, 1e-12), (F32, 1e-5, 1e-4)] {
        let m = build_mlp(dtype);
        let (want_losses, want_vars) = oracle_training(dtype);
        assert!(want_losses.iter().all(|l| l.is_finite()) && want_losses[STEPS] < want_losses[0], "the oracle does not train: {want_losses:?}");

        let cpu = Session::new(&m.g, CPU_SESSION);
        let Training { losses: cpu_losses, vars: cpu_vars, .. } = train(&cpu, &m, false);
        assert_eq!(cpu.assigned(m.matmuls[0]), CPU0, "the CPU-only session has no GPU");
        drop(cpu);
        assert_close(&format!("dtype {dtype}: CPU losses vs oracle"), &cpu_losses, &want_losses, oracle_tol);
        for (k, (v, w)) in cpu_vars.iter().zip(&want_vars).enumerate() {
            assert_close(&format!("dtype {dtype}: CPU variable {k} vs oracle"), v, w, oracle_tol);
        }
        if !gpu {
            continue;
        }

        let _lock = gpu_lock();
        let s = Session::new(&m.g, GPU_SESSION);
        assert_real_gpu(&s);
        // everything under the scope is on GPU:0: no soft fallback to the CPU
        for n in 0..m.g.num_nodes() {
            let (name, dev) = (m.g.name(n), s.assigned(n));
            assert!(dev == GPU0 || name.starts_with("init"), "{name} was placed on {dev}");
        }
        for &n in m.matmuls.iter().chain(&m.steps) {
            assert_eq!(s.assigned(n), GPU0, "{}", m.g.name(n));
        }
        let Training { losses: gpu_losses, vars: gpu_vars, traced } = train(&s, &m, true);
        let (step, t0, t1) = traced.unwrap();
        let launched: Vec<String> = m.matmuls.iter().chain(&m.steps).map(|&n| m.g.name(n)).chain(["Tanh".to_string()]).collect();
        let timed = assert_cuda_event_times(step.trace.as_ref().unwrap(), t0, t1, &launched);
        println!("kernels timed by CUDA events on GPU:0: {timed}");
        let mut mem = [0u64; 4];
        ok(oxf_session_memory_stats(s.0, c("GPU:0").as_ptr(), mem.as_mut_ptr()), "oxf_session_memory_stats");
        assert!(mem[0] > 0, "the variables live in GPU:0's memory: {mem:?}");
        assert_close(&format!("dtype {dtype}: GPU losses vs CPU"), &gpu_losses, &cpu_losses, tol);
        assert_close(&format!("dtype {dtype}: GPU losses vs oracle"), &gpu_losses, &want_losses, oracle_tol);
        for (k, (v, w)) in gpu_vars.iter().zip(&cpu_vars).enumerate() {
            assert_close(&format!("dtype {dtype}: GPU variable {k} vs CPU"), v, w, tol);
        }
        println!("dtype {dtype}: losses on GPU:0 {gpu_losses:?}");
    }
}
