//! The real-GPU path of the core without a GPU: a [`GpuProvider`] whose devices keep their
//! tensors "in device memory" ([`Tensor::Device`], here a host buffer behind the
//! [`DeviceBuffer`] trait, as tinygrad tests placement with a device that only records).
//! It checks what `oxiflow-cuda` relies on: sessions take the provider's GPUs when no
//! emulated GPU is asked for, device-resident tensors leave their device only through
//! `DeviceBuffer::to_host` (fetches, copies to the CPU), and results equal the CPU's.
//! Oracle: Rust's f64 math and finite differences' known derivatives (cos, -sin).
//!
//! The provider is process-wide, so this file is its own test binary.

#[path = "common/gpu_loop.rs"]
mod gpu_loop;

use oxiflow_core::autodiff::gradients;
use oxiflow_core::device::provider::{gpu_provider, gpu_source, set_gpu_provider, GpuProvider, GpuSource, PhysicalGpu};
use oxiflow_core::device::{Device, DeviceAttributes, DeviceKind, KernelTime};
use oxiflow_core::graph::{DeviceScope, NodeDef};
use oxiflow_core::ops::{KernelCtx, Outputs};
use oxiflow_core::tensor::{DeviceBuffer, DeviceTensor};
use oxiflow_core::{DType, DeviceSpec, Graph, Output, Result, Session, SessionOptions, Tensor};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

const CPU0: &str = "/job:localhost/replica:0/task:0/device:CPU:0";
const GPU0: &str = "/job:localhost/replica:0/task:0/device:GPU:0";

static DOWNLOADS: AtomicUsize = AtomicUsize::new(0);
/// Names of the nodes the fake GPU computed, in order.
static COMPUTED: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// Held by the tests that read [`COMPUTED`], so that another's nodes do not mix in.
static SERIAL: Mutex<()> = Mutex::new(());
static UPLOADS: AtomicUsize = AtomicUsize::new(0);

/// "Device memory": a host tensor only its device reads directly.
#[derive(Debug)]
struct FakeBuffer {
    device: String,
    host: Tensor,
}

impl DeviceBuffer for FakeBuffer {
    fn device(&self) -> &str {
        &self.device
    }
    fn ptr(&self) -> u64 {
        self as *const FakeBuffer as u64
    }
    fn num_bytes(&self) -> usize {
        self.host.num_bytes()
    }
    fn to_host(&self, dtype: DType, dims: &[usize]) -> Result<Tensor> {
        DOWNLOADS.fetch_add(1, Ordering::Relaxed);
        assert_eq!(dtype, self.host.dtype());
        assert_eq!(dims, self.host.dims());
        Ok(self.host.deep_copy())
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

struct FakeGpu {
    attrs: DeviceAttributes,
    /// Names of the nodes computed since timing started (`None`: not timing).
    timed: std::sync::Mutex<Option<Vec<String>>>,
}

/// The fake device's "event" clock: node `i` of a traced run ran at `T0 + i µs`.
const T0: u64 = 42_000_000_000;

impl FakeGpu {
    fn resident(&self, t: Tensor) -> Tensor {
        if t.is_device_resident() {
            return t;
        }
        Tensor::Device(DeviceTensor {
            dtype: t.dtype(),
            dims: t.dims().to_vec(),
            buffer: Arc::new(FakeBuffer { device: self.attrs.name.clone(), host: t.deep_copy() }),
        })
    }
}

impl Device for FakeGpu {
    fn attributes(&self) -> &DeviceAttributes {
        &self.attrs
    }
    fn compute(&self, ctx: &KernelCtx) -> Result<Outputs> {
        // A device kernel reads its inputs in device memory: every input must be resident.
        for (i, t) in ctx.inputs.iter().enumerate() {
            assert!(t.is_device_resident(), "input {i} of {} reached {} in host memory", ctx.node.name, self.attrs.name);
        }
        let host: Vec<Tensor> = ctx
            .inputs
            .iter()
            .map(|t| match t {
                Tensor::Device(d) => d.buffer.as_any().downcast_ref::<FakeBuffer>().unwrap().host.clone(),
                _ => unreachable!(),
            })
            .collect();
        let outs = (ctx.node.op.kernel)(&KernelCtx { node: ctx.node, inputs: &host, state: ctx.state })?;
        if let Some(t) = self.timed.lock().unwrap().as_mut() {
            t.push(ctx.node.name.clone());
        }
        COMPUTED.lock().unwrap().push(ctx.node.name.clone());
        Ok(outs.into_iter().map(|t| self.resident(t)).collect())
    }
    fn start_kernel_timing(&self) {
        *self.timed.lock().unwrap() = Some(Vec::new());
    }
    fn take_kernel_times(&self) -> Vec<KernelTime> {
        let names = self.timed.lock().unwrap().take().unwrap_or_default();
        names.into_iter().enumerate().map(|(i, node)| KernelTime { node, start_ns: T0 + 1000 * i as u64, end_ns: T0 + 1000 * i as u64 + 500 }).collect()
    }
    fn copy_from(&self, t: &Tensor, _src: &dyn Device) -> Result<Tensor> {
        UPLOADS.fetch_add(1, Ordering::Relaxed);
        let host = t.to_host()?;
        Ok(self.resident(host))
    }
}

struct FakeProvider {
    gpus: Vec<PhysicalGpu>,
}

impl GpuProvider for FakeProvider {
    fn gpus(&self) -> &[PhysicalGpu] {
        &self.gpus
    }
    fn unavailable_reason(&self) -> Option<String> {
        None
    }
    fn create(&self, id: u32, index: usize, limit: u64, _allow_growth: bool) -> Result<Arc<dyn Device>> {
        let spec = DeviceSpec::local("GPU", id);
        let g = &self.gpus[index];
        Ok(Arc::new(FakeGpu {
            attrs: DeviceAttributes {
                name: spec.to_string(),
                spec,
                device_type: oxiflow_core::device::DeviceType::Gpu,
                kind: DeviceKind::ProvidedGpu,
                description: format!("device: {index}, name: {}, pci bus id: {}, memory limit: {limit} bytes", g.name, g.pci_bus_id),
            },
            timed: std::sync::Mutex::new(None),
        }))
    }
}

fn install() {
    if gpu_provider().is_none() {
        set_gpu_provider(Box::new(FakeProvider {
            gpus: vec![PhysicalGpu {
                name: "Fake GPU".into(),
                total_memory: 1 << 30,
                compute_capability: (9, 0),
                pci_bus_id: "0000:01:00.0".into(),
                uuid: "GPU-00000000-0000-0000-0000-000000000001".into(),
            }],
        }));
    }
}

/// Seed 000's `assign_to_device("/device:GPU:0")`.
fn assign_to_device(node: &NodeDef) -> std::result::Result<String, String> {
    Ok(if node.op == "VariableV2" { "/device:CPU:0".into() } else { "/device:GPU:0".into() })
}

#[test]
fn sessions_take_the_providers_gpus_unless_emulated_ones_are_asked_for() {
    install();
    assert!(matches!(gpu_source(0), GpuSource::Real(_)));
    assert!(matches!(gpu_source(2), GpuSource::Emulated(2)));
    let g = Arc::new(RwLock::new(Graph::new()));
    let real = Session::new(g.clone(), SessionOptions { emulated_gpus: Some(0), ..Default::default() }).unwrap();
    let kinds: Vec<_> = real.devices().devices.iter().map(|d| (d.attributes().name.clone(), d.attributes().kind)).collect();
    assert_eq!(kinds, vec![(CPU0.to_string(), DeviceKind::Cpu), (GPU0.to_string(), DeviceKind::ProvidedGpu)]);
    assert!(real.devices().devices[1].attributes().description.contains("name: Fake GPU"));
    let emulated = Session::new(g, SessionOptions { emulated_gpus: Some(1), ..Default::default() }).unwrap();
    assert_eq!(emulated.devices().devices[1].attributes().kind, DeviceKind::EmulatedGpu);
}

#[test]
fn seed_000_runs_with_device_resident_tensors() {
    install();
    let mut g = Graph::new();
    g.push_device(DeviceScope::Function(Arc::new(assign_to_device)));
    let a = g.variable(Tensor::scalar(1.0f64), None, true).unwrap();
    let b = g.op("Sin", &[Output::new(a, 0)]).unwrap();
    g.pop_device().unwrap();
    g.push_device(DeviceScope::Spec(DeviceSpec::parse("/CPU:0").unwrap()));
    let c = g.op("Cos", &[b]).unwrap();
    g.pop_device().unwrap();
    let a = Output::new(a, 0);
    let grad = gradients(&mut g, &[c], &[a], None, true).unwrap()[0].unwrap();
    let init = g.global_variables_initializer().unwrap();
    let g = Arc::new(RwLock::new(g));
    let sess = Session::new(g.clone(), SessionOptions { emulated_gpus: Some(0), ..Default::default() }).unwrap();
    sess.run(&[], &[], &[init], false).unwrap();
    let before = (DOWNLOADS.load(Ordering::Relaxed), UPLOADS.load(Ordering::Relaxed));
    let out = sess.run(&[], &[b, c, grad], &[], true).unwrap();
    let v: Vec<f64> = out
        .values
        .iter()
        .map(|t| {
            assert!(!t.is_device_resident(), "fetches come back in host memory");
            t.to_f64_vec()[0]
        })
        .collect();
    let x = 1.0f64;
    assert!((v[0] - x.sin()).abs() < 1e-15);
    assert!((v[1] - x.sin().cos()).abs() < 1e-15);
    // d cos(sin x)/dx = -sin(sin x) cos x
    assert!((v[2] + x.sin().sin() * x.cos()).abs() < 1e-15);
    assert_eq!(sess.assigned_device(b.node).unwrap(), GPU0);
    assert_eq!(sess.assigned_device(c.node).unwrap(), CPU0);
    let sin_grad = g.read().unwrap().node_by_name("gradients/Sin_grad/Cos").unwrap();
    assert_eq!(sess.assigned_device(sin_grad).unwrap(), GPU0, "colocated with Sin");
    let (down, up) = (DOWNLOADS.load(Ordering::Relaxed) - before.0, UPLOADS.load(Ordering::Relaxed) - before.1);
    // tensors enter the GPU by copies and leave it only through to_host
    assert!(up >= 2 && down >= 2, "uploads {up}, downloads {down}");
    // the profile takes the GPU's own kernel times (CUDA events on a real GPU), the host's
    // for the CPU's nodes
    let stats = out.step_stats.expect("traced run");
    // (a node fused into a CPU step is found under that step)
    let times = |name: &str| {
        let is = |l: &oxiflow_core::profile::StepLabel| l.copy.is_none() && (l.node_name == name || l.fused.iter().any(|(n, _)| n == name));
        let n = stats.nodes.iter().find(|n| is(&stats.labels[n.step])).expect(name);
        (n.start_ns, n.end_ns)
    };
    let (s, e) = times("Sin");
    assert!((T0..T0 + 1_000_000).contains(&s) && e == s + 500, "Sin timed by the device: {s}..{e}");
    let (s, _) = times("Cos");
    assert!(s > T0 + 1_000_000_000, "Cos ran on the CPU and keeps the host's (wall-clock) time: {s}");
}

#[test]
fn a_loop_runs_its_float_ops_on_the_device_and_its_int32_counter_on_the_host() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    install();
    let x0 = [0.25, -0.75];
    let mut g = Graph::new();
    g.push_device(DeviceScope::Spec(DeviceSpec::parse("/device:GPU:0").unwrap()));
    let x = g.constant(Tensor::from_vec(&[2], x0.to_vec(), oxiflow_core::Layout::RowMajor).unwrap()).unwrap();
    let v = gpu_loop::sin_loop(&mut g, x, 2, 5);
    let s = g.op("Sum", &[v]).unwrap();
    // Int32 arithmetic outside the loop: TF's host-memory GPU kernel
    let i = g.constant(Tensor::scalar(20i32)).unwrap();
    let ii = Output::new(g.add_node(oxiflow_core::NodeSpec::new("Mul", &[i, i]).name("square_i")).unwrap(), 0);
    g.pop_device().unwrap();
    let dx = gradients(&mut g, &[s], &[x], None, true).unwrap()[0].unwrap();
    let sess = Session::new(Arc::new(RwLock::new(g)), SessionOptions { emulated_gpus: Some(0), ..Default::default() }).unwrap();
    COMPUTED.lock().unwrap().clear();
    // every kernel the device launches asserts that its inputs are resident; a host kernel
    // given a resident tensor would panic on reading it
    let out = sess.run(&[], &[v, dx, ii], &[], false).unwrap();
    let (want_v, want_d) = gpu_loop::oracle(&x0, 5);
    assert!(gpu_loop::close(&out.values[0].to_f64_vec(), &want_v));
    assert!(gpu_loop::close(&out.values[1].to_f64_vec(), &want_d));
    assert_eq!(out.values[2].to_f64_vec(), vec![400.0]);
    for n in [v.node, ii.node] {
        assert_eq!(sess.assigned_device(n).unwrap(), GPU0);
    }
    let computed = COMPUTED.lock().unwrap().clone();
    let count = |name: &str| computed.iter().filter(|c| *c == name).count();
    // the body's Sin went to the device every iteration, forward and in the gradient's
    // rerun; the Int32 counter's Add and Less and the outer Int32 Mul never did
    assert_eq!(count("body_sin"), 10, "{computed:?}");
    assert_eq!(count("gradients/body_sin_grad/Cos"), 5, "the body's gradient ran on the device: {computed:?}");
    for host in ["next_i", "Less", "square_i"] {
        assert_eq!(count(host), 0, "{host} ran on the device: {computed:?}");
    }
}

#[test]
fn a_loop_writes_its_rows_on_the_device_and_its_gradient_rebuilds_them_on_the_host() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    install();
    let n = 6;
    let mut g = Graph::new();
    g.push_device(DeviceScope::Spec(DeviceSpec::parse("/device:GPU:0").unwrap()));
    let rows0 = g.constant(Tensor::filled(DType::Float64, &[n, 3], 0.0)).unwrap();
    let x = g.constant(Tensor::from_vec(&[3], vec![1.0, -2.0, 0.5], oxiflow_core::Layout::RowMajor).unwrap()).unwrap();
    let rows = gpu_loop::rows_loop(&mut g, rows0, x, n);
    let s = g.op("Sum", &[rows]).unwrap();
    g.pop_device().unwrap();
    let dx = gradients(&mut g, &[s], &[x], None, true).unwrap()[0].unwrap();
    let sess = Session::new(Arc::new(RwLock::new(g)), SessionOptions { emulated_gpus: Some(0), ..Default::default() }).unwrap();
    COMPUTED.lock().unwrap().clear();
    let out = sess.run(&[], &[rows, dx], &[], false).unwrap();
    let want: Vec<f64> = (1..=n).flat_map(|k| [k as f64, -2.0 * k as f64, 0.5 * k as f64]).collect();
    assert_eq!(out.values[0].to_f64_vec(), want);
    // d sum(rows) / dx_j = 1 + 2 + ... + n
    assert_eq!(out.values[1].to_f64_vec(), vec![(n * (n + 1) / 2) as f64; 3]);
    let computed = COMPUTED.lock().unwrap().clone();
    // the forward loop's writes went to the device; the gradient's rerun keeps the slices
    // each write overwrites, so its writes ran on the host
    assert_eq!(computed.iter().filter(|c| *c == "write").count(), n, "{computed:?}");
}

#[test]
fn a_branch_on_the_device_reads_its_condition_on_the_host() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    install();
    let x0 = [0.5f64, -1.0];
    let mut g = Graph::new();
    g.push_device(DeviceScope::Spec(DeviceSpec::parse("/device:GPU:0").unwrap()));
    let x = g.constant(Tensor::from_vec(&[2], x0.to_vec(), oxiflow_core::Layout::RowMajor).unwrap()).unwrap();
    let zero = g.constant(Tensor::scalar(0.0f64)).unwrap();
    // the condition is computed on the device (a Float64 comparison)
    let s = g.op("Sum", &[x]).unwrap();
    let c = g.op("Less", &[s, zero]).unwrap();
    let y = gpu_loop::sin_or_double(&mut g, c, x, 2);
    let total = g.op("Sum", &[y]).unwrap();
    g.pop_device().unwrap();
    let dx = gradients(&mut g, &[total], &[x], None, true).unwrap()[0].unwrap();
    let sess = Session::new(Arc::new(RwLock::new(g)), SessionOptions { emulated_gpus: Some(0), ..Default::default() }).unwrap();
    COMPUTED.lock().unwrap().clear();
    let out = sess.run(&[], &[y, dx], &[], false).unwrap();
    // sum(x) = -0.5 < 0: the then branch, sin(x), and its gradient cos(x)
    assert_eq!(out.values[0].to_f64_vec(), x0.iter().map(|v| v.sin()).collect::<Vec<_>>());
    assert_eq!(out.values[1].to_f64_vec(), x0.iter().map(|v| v.cos()).collect::<Vec<_>>());
    assert_eq!(sess.assigned_device(y.node).unwrap(), GPU0);
    let computed = COMPUTED.lock().unwrap().clone();
    assert!(computed.iter().any(|c| c == "Less") && computed.iter().any(|c| c == "then_sin"), "{computed:?}");
}
