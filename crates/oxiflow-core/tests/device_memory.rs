//! Device configuration of sessions: GPU options, CUDA_VISIBLE_DEVICES, virtual
//! GPUs, memory accounting on emulated GPUs with TF's ResourceExhausted error, the memory
//! counter in the timeline, TF2's process-wide `tf.config` settings, `Executing op` lines,
//! thread counts, and `explain_placement`. Oracles: TF's documented behaviour
//! (the placer in `placer.cc`, `GPUOptions` in `config.proto`, `tf.config`) and byte
//! counts computed from the tensors' sizes.

use oxiflow_core::device::config::GpuOptions;
use oxiflow_core::device::process as pc;
use oxiflow_core::graph::{DeviceScope, NodeDef};
use oxiflow_core::timeline::ProfileSummary;
use oxiflow_core::{DeviceSpec, Graph, Output, OxiflowError, Session, SessionOptions, Tensor};
use std::sync::{Arc, Mutex, RwLock};

const CPU0: &str = "/job:localhost/replica:0/task:0/device:CPU:0";
const GPU0: &str = "/job:localhost/replica:0/task:0/device:GPU:0";
const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

/// `gpus` emulated GPUs, all visible whatever the machine's `CUDA_VISIBLE_DEVICES` says.
fn opts(gpus: usize) -> SessionOptions {
    SessionOptions { emulated_gpus: Some(gpus), ..Default::default() }.with_cuda(None)
}

trait WithCuda {
    fn with_cuda(self, v: Option<&str>) -> Self;
}
impl WithCuda for SessionOptions {
    /// `CUDA_VISIBLE_DEVICES` as given (`None`: unset), whatever the test machine's environment says.
    fn with_cuda(mut self, v: Option<&str>) -> Self {
        // an explicit list of every GPU stands for "unset"
        self.cuda_visible_devices = Some(match v {
            Some(v) => v.to_string(),
            None => (0..self.emulated_gpus.unwrap_or(0)).map(|i| i.to_string()).collect::<Vec<_>>().join(","),
        });
        self
    }
}

fn gpus_of(s: &Session) -> Vec<(String, String, u64)> {
    s.devices()
        .devices
        .iter()
        .filter(|d| d.attributes().device_type == oxiflow_core::device::DeviceType::Gpu)
        .map(|d| (d.attributes().name.clone(), d.attributes().description.clone(), d.memory().map(|m| m.stats().bytes_limit).unwrap_or(0)))
        .collect()
}

fn pinned(g: &mut Graph, dev: &str, f: impl FnOnce(&mut Graph) -> Output) -> Output {
    g.push_device(DeviceScope::Spec(DeviceSpec::parse(dev).unwrap()));
    let o = f(g);
    g.pop_device().unwrap();
    o
}

#[test]
fn memory_fraction_and_growth_set_the_limit_and_the_reserve() {
    let g = Arc::new(RwLock::new(Graph::new()));
    let total = 16 * GIB;
    let mut o = opts(1);
    o.gpu_options = GpuOptions { per_process_gpu_memory_fraction: Some(0.4), ..Default::default() };
    let s = Session::new(g.clone(), o).unwrap();
    assert_eq!(s.memory_stats("GPU:0").unwrap().bytes_limit, (total as f64 * 0.4) as u64);
    // TF's default without a fraction: all memory but a system reserve
    let s = Session::new(g.clone(), opts(1)).unwrap();
    assert_eq!(s.memory_stats("/device:GPU:0").unwrap().bytes_limit, total - 1536 * MIB);
    assert!(s.memory_stats("CPU:0").unwrap_err().to_string().contains("no memory account"));
    assert!(s.memory_stats("GPU:3").is_err());
    let mut o = opts(1);
    o.gpu_options.per_process_gpu_memory_fraction = Some(1.5);
    assert!(Session::new(g.clone(), o).is_err());

    // growth: the reserve follows use (2 MiB regions, doubling); otherwise all at once
    let x = g.write().unwrap().constant(Tensor::full(&[1000], 1.0f64)).unwrap();
    let y = g.write().unwrap().op("Sin", &[x]).unwrap();
    for growth in [true, false] {
        let mut o = opts(1);
        o.gpu_options.allow_growth = growth;
        let s = Session::new(g.clone(), o).unwrap();
        s.run(&[], &[y], &[], false).unwrap();
        let m = s.memory_stats("GPU:0").unwrap();
        assert_eq!(m.bytes_reserved, if growth { 2 * MIB } else { m.bytes_limit });
    }
}

#[test]
fn tensors_are_counted_until_their_last_reader_and_aliases_once() {
    let mut g = Graph::new();
    let x = g.constant(Tensor::full(&[1000], 0.5f64)).unwrap();
    let y = g.op("Sin", &[x]).unwrap();
    let z = g.op("Sin", &[y]).unwrap();
    let w = g.op("Identity", &[z]).unwrap();
    let g = Arc::new(RwLock::new(g));
    let s = Session::new(g, opts(1)).unwrap();
    assert_eq!(s.assigned_device(z.node).unwrap(), GPU0);
    let out = s.run(&[], &[w], &[], false).unwrap();
    assert!((out.values[0].to_f64_vec()[0] - 0.5f64.sin().sin()).abs() < 1e-15);
    let m = s.memory_stats("GPU:0").unwrap();
    // x and y live together while Sin(x) runs, then y and z; w shares z's buffer
    assert_eq!(m.peak_bytes_in_use, 2 * 8000);
    assert_eq!(m.bytes_in_use, 0, "everything is freed after the run");
}

#[test]
fn over_the_limit_is_resource_exhausted_and_the_session_stays_usable() {
    let mut g = Graph::new();
    let big = g.constant(Tensor::full(&[200, 1000], 1.0f64)).unwrap(); // 1.6 MB > 1 MiB
    let big_sum = g.op("Sin", &[big]).unwrap();
    let small = g.constant(Tensor::full(&[10], 1.0f64)).unwrap();
    let small_sin = g.op("Sin", &[small]).unwrap();
    let ph = g.placeholder(oxiflow_core::DType::Float64, &[300, 1000], Some("p")).unwrap();
    let ph_sin = g.op("Sin", &[ph]).unwrap();
    let g = Arc::new(RwLock::new(g));
    let mut o = opts(1);
    o.gpu_options.virtual_devices_mb = vec![vec![1]];
    let s = Session::new(g, o).unwrap();
    assert_eq!(s.memory_stats("GPU:0").unwrap().bytes_limit, MIB);
    let e = s.run(&[], &[big_sum], &[], false).unwrap_err();
    assert!(matches!(e, OxiflowError::ResourceExhausted { .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.contains(GPU0) && msg.contains("1600000 bytes"), "{msg}");
    assert_eq!(s.memory_stats("GPU:0").unwrap().bytes_in_use, 0);
    // a feed copied to the GPU counts too
    let e = s.run(&[(ph, Tensor::full(&[300, 1000], 1.0f64))], &[ph_sin], &[], false).unwrap_err();
    assert!(matches!(e, OxiflowError::ResourceExhausted { .. }), "{e}");
    // the session still runs what fits, and everything is freed again
    let out = s.run(&[], &[small_sin], &[], false).unwrap();
    assert_eq!(out.values[0].to_f64_vec(), vec![1f64.sin(); 10]);
    assert_eq!(s.memory_stats("GPU:0").unwrap().bytes_in_use, 0);
    assert_eq!(s.memory_stats("GPU:0").unwrap().peak_bytes_in_use, 2 * 80);
}

/// `RandomStandardNormal` of `shape` (Float64), pinned to `dev`.
fn normal_on(g: &mut Graph, dev: &str, shape: Vec<usize>) -> Output {
    use oxiflow_core::{ops::AttrValue, NodeSpec};
    pinned(g, dev, |g| g.op_spec(NodeSpec::new("RandomStandardNormal", &[]).attr("shape", AttrValue::Shape(shape))).unwrap())
}

#[test]
fn outputs_that_cannot_be_allocated_fail_before_the_kernel_runs() {
    // Each kernel would allocate its output before any accounting could see it: 8 TiB on
    // the CPU (the host refuses it) and 512 MiB on a GPU limited to 1 MiB. Rust aborts the process when an allocation fails, so these
    // must be refused before the kernel runs: TF's OOM text naming the op, shape and device.
    let mut g = Graph::new();
    let huge = normal_on(&mut g, CPU0, vec![1 << 20, 1 << 20]);
    // A shape whose byte size overflows is refused when the node is built (TF's TensorShape).
    {
        use oxiflow_core::{ops::AttrValue, NodeSpec};
        let e = g.op_spec(NodeSpec::new("RandomStandardNormal", &[]).attr("shape", AttrValue::Shape(vec![1 << 32, 1 << 32]))).unwrap_err();
        assert!(matches!(e, OxiflowError::InvalidArgument(_)), "{e}");
        assert!(e.to_string().contains("RandomStandardNormal") && e.to_string().contains("[4294967296,4294967296]"), "{e}");
    }
    let on_gpu = normal_on(&mut g, GPU0, vec![1 << 13, 1 << 13]);
    let ok = normal_on(&mut g, CPU0, vec![3]);
    let g = Arc::new(RwLock::new(g));
    let mut o = opts(1);
    o.gpu_options.virtual_devices_mb = vec![vec![1]];
    let s = Session::new(g, o).unwrap();
    let e = s.run(&[], &[huge], &[], false).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, OxiflowError::OutOfMemory { bytes: Some(b), .. } if b == 8 << 40), "{msg}");
    assert_eq!(e.code(), 8);
    for part in ["OOM when allocating tensor with shape[1048576,1048576] and type Float64", CPU0, "RandomStandardNormal"] {
        assert!(msg.contains(part), "{part:?} missing from {msg}");
    }
    let e = s.run(&[], &[on_gpu], &[], false).unwrap_err();
    assert!(matches!(e, OxiflowError::ResourceExhausted { requested, limit, .. } if requested == 1 << 29 && limit == 1 << 20), "{e}");
    assert!(e.to_string().contains(GPU0), "{e}");
    assert_eq!(s.memory_stats("GPU:0").unwrap().peak_bytes_in_use, 0, "the GPU kernel never ran");
    // the session goes on
    assert_eq!(s.run(&[], &[ok], &[], false).unwrap().values[0].dims(), &[3]);
}

#[test]
fn unbounded_options_are_refused_before_anything_starts() {
    // Each of these hung (2^31 threads, 10^7 GPUs) or exhausted memory (2^40 CPUs) before;
    // a virtual device of 2^50 MiB wrapped to 0 bytes.
    let g = Arc::new(RwLock::new(Graph::new()));
    let cases: Vec<(SessionOptions, &str)> = vec![
        (SessionOptions { inter_op_threads: Some(1 << 31), ..opts(0) }, "inter_op_parallelism_threads = 2147483648: a session may have at most 1024 threads"),
        (SessionOptions { intra_op_threads: Some(5000), ..opts(0) }, "intra_op_parallelism_threads = 5000"),
        (SessionOptions { cpu_count: Some(1 << 40), ..opts(0) }, "device_count['CPU'] = 1099511627776: a session may have at most 256 CPU devices"),
        (SessionOptions { emulated_gpus: Some(10_000_000), ..opts(0) }, "emulated_gpus = 10000000: a session may have at most 64 emulated GPUs"),
    ];
    for (o, want) in cases {
        let e = Session::new(g.clone(), o).err().expect("refused").to_string();
        assert!(e.contains(want), "{e}");
    }
    let mut o = opts(1);
    o.gpu_options.virtual_devices_mb = vec![vec![1 << 50]];
    let e = Session::new(g.clone(), o).err().expect("refused").to_string();
    assert!(e.contains("memory_limit_mb 1125899906842624 is too large"), "{e}");
    // the bounds themselves are fine
    let s = Session::new(g, SessionOptions { inter_op_threads: Some(4), intra_op_threads: Some(1024), cpu_count: Some(2), ..opts(1) }).unwrap();
    assert_eq!(s.devices().devices.len(), 3);
}

#[test]
fn cuda_visible_devices_and_visible_device_list_select_and_order_gpus() {
    let g = Arc::new(RwLock::new(Graph::new()));
    let s = Session::new(g.clone(), opts(3).with_cuda(Some("2,0"))).unwrap();
    let gpus = gpus_of(&s);
    assert_eq!(gpus.len(), 2);
    assert!(gpus[0].0.ends_with("GPU:0") && gpus[0].1.contains("device: 0,") && gpus[0].1.contains("emulated:2"), "{gpus:?}");
    assert!(gpus[1].1.contains("emulated:0"), "{gpus:?}");
    // As CUDA does, an entry that names no GPU ends the list: the session keeps the GPUs
    // before it and its log says so; -1 hides every GPU and CPU work goes on.
    let s = Session::new(g.clone(), opts(2).with_cuda(Some("1,5,0"))).unwrap();
    let gpus = gpus_of(&s);
    assert!(gpus.len() == 1 && gpus[0].1.contains("emulated:1"), "{gpus:?}");
    let log = s.take_log();
    assert!(log.starts_with("W oxiflow: ") && log.contains("CUDA_VISIBLE_DEVICES") && log.contains("'5'"), "{log}");
    let mut h = Graph::new();
    let c = h.constant(Tensor::full(&[2], 0.5f64)).unwrap();
    let y = h.op("Sin", &[c]).unwrap();
    let s = Session::new(Arc::new(RwLock::new(h)), opts(2).with_cuda(Some("-1"))).unwrap();
    assert!(gpus_of(&s).is_empty());
    assert!(s.take_log().contains("no GPU is visible"));
    assert_eq!(s.run(&[], &[y], &[], false).unwrap().values[0].to_f64_vec(), vec![0.5f64.sin(); 2]);
    assert!(Session::new(g.clone(), opts(2).with_cuda(Some(""))).map(|s| gpus_of(&s).is_empty()).unwrap());
    // visible_device_list picks among the CUDA-visible GPUs: visible 1 of [2, 0] is physical 0
    let mut o = opts(3).with_cuda(Some("2,0"));
    o.gpu_options.visible_device_list = Some("1".into());
    let gpus = gpus_of(&Session::new(g.clone(), o).unwrap());
    assert_eq!(gpus.len(), 1);
    assert!(gpus[0].1.contains("device: 1,") && gpus[0].1.contains("emulated:0"), "{gpus:?}");
    let mut o = opts(1);
    o.gpu_options.visible_device_list = Some("1".into());
    let e = Session::new(g.clone(), o).err().unwrap().to_string();
    assert!(e.contains("'visible_device_list' listed an invalid GPU id '1' but visible device count is 1"), "{e}");
    // device_count GPU caps the list
    let mut o = opts(3);
    o.gpu_count = Some(1);
    assert_eq!(gpus_of(&Session::new(g, o).unwrap()).len(), 1);
}

#[test]
fn cuda_visible_devices_selects_gpus_by_uuid_and_descriptions_show_it() {
    use oxiflow_core::device::config::emulated_gpu_uuid;
    let g = Arc::new(RwLock::new(Graph::new()));
    // physical 2 by a UUID prefix, then physical 0 by index
    let s = Session::new(g.clone(), opts(3).with_cuda(Some(&format!("{},0", &emulated_gpu_uuid(2)[..13])))).unwrap();
    let gpus = gpus_of(&s);
    assert_eq!(gpus.len(), 2);
    assert!(gpus[0].1.contains("emulated:2") && gpus[0].1.contains(&format!("uuid: {},", emulated_gpu_uuid(2))), "{gpus:?}");
    assert!(gpus[1].1.contains("emulated:0") && gpus[1].1.contains(&emulated_gpu_uuid(0)), "{gpus:?}");
    let s = Session::new(g.clone(), opts(2).with_cuda(Some("GPU-ffffffff"))).unwrap();
    assert!(gpus_of(&s).is_empty());
    let log = s.take_log();
    assert!(log.contains("CUDA_VISIBLE_DEVICES entry 'GPU-ffffffff' is not the UUID"), "{log}");
    let s = Session::new(g, opts(2).with_cuda(Some("GPU-"))).unwrap();
    assert!(gpus_of(&s).is_empty() && s.take_log().contains("ambiguous"));
}

#[test]
fn virtual_gpus_and_logical_cpus() {
    let g = Arc::new(RwLock::new(Graph::new()));
    let mut o = opts(2);
    o.gpu_options.virtual_devices_mb = vec![vec![100, 200], vec![]];
    o.cpu_count = Some(2);
    let s = Session::new(g.clone(), o).unwrap();
    let gpus = gpus_of(&s);
    let limits: Vec<u64> = gpus.iter().map(|d| d.2).collect();
    assert_eq!(limits, vec![100 * MIB, 200 * MIB, 16 * GIB - 1536 * MIB]);
    assert!(gpus[1].1.contains("emulated:0") && gpus[2].1.contains("emulated:1"));
    assert_eq!(s.devices().devices.iter().filter(|d| d.attributes().device_type == oxiflow_core::device::DeviceType::Cpu).count(), 2);
    let mut o = opts(1);
    o.gpu_options.virtual_devices_mb = vec![vec![100]];
    o.gpu_options.per_process_gpu_memory_fraction = Some(0.5);
    assert!(Session::new(g.clone(), o).is_err());
    let mut o = opts(1);
    o.gpu_options.virtual_devices_mb = vec![vec![20_000]];
    assert!(Session::new(g, o).err().unwrap().to_string().contains("ask for 20000 MiB"));
}

#[test]
fn traced_runs_carry_a_memory_counter_per_gpu() {
    let mut g = Graph::new();
    let x = g.constant(Tensor::full(&[100], 0.5f64)).unwrap();
    let y = g.op("Sin", &[x]).unwrap();
    let z = pinned(&mut g, "/cpu:0", |g| g.op("Cos", &[y]).unwrap());
    let s = Session::new(Arc::new(RwLock::new(g)), opts(1)).unwrap();
    let stats = s.run(&[], &[z], &[], true).unwrap().step_stats.unwrap();
    let gpu: Vec<u64> = stats.memory.iter().filter(|m| m.device == GPU0).map(|m| m.bytes_in_use).collect();
    assert_eq!(gpu.first(), Some(&0));
    assert_eq!(gpu.iter().max(), Some(&1600)); // x and y
    assert_eq!(gpu.last(), Some(&0));
    let trace = stats.chrome_trace();
    let events = trace["traceEvents"].as_array().unwrap();
    let tensors_pid = events.iter().find(|e| e["ph"] == "M" && e["args"]["name"] == format!("{GPU0} Tensors")).map(|e| e["pid"].clone()).unwrap();
    let counters: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "C").collect();
    assert!(!counters.is_empty() && counters.iter().all(|e| e["pid"] == tensors_pid && e["name"] == "Memory"));
    let summary = ProfileSummary::from_trace(&trace).unwrap();
    let peak = summary.devices.iter().find(|d| d.device == GPU0).and_then(|d| d.peak_bytes);
    assert_eq!(peak, Some(1600));
    assert_eq!(summary.devices.iter().find(|d| d.device == CPU0).and_then(|d| d.peak_bytes), None);
}

#[test]
fn executing_op_lines_and_thread_counts() {
    let mut g = Graph::new();
    let a = g.constant(Tensor::full(&[2, 2], 1.0f64)).unwrap();
    let m = g.op("MatMul", &[a, a]).unwrap();
    let mut o = opts(1);
    o.log_device_placement = true;
    o.inter_op_threads = Some(3);
    o.intra_op_threads = Some(2);
    let s = Session::new(Arc::new(RwLock::new(g)), o).unwrap();
    assert_eq!(s.threads(), (3, 2));
    s.run(&[], &[m], &[], false).unwrap();
    let log = s.take_log();
    assert!(log.starts_with("Device mapping:\n"), "{log}");
    assert!(log.contains(&format!("MatMul: (MatMul): {GPU0}")), "{log}");
    assert!(log.contains(&format!("Executing op MatMul in device {GPU0}")), "{log}");
    assert!(!log.contains("Executing op Const"), "{log}");
    s.run(&[], &[m], &[], false).unwrap();
    assert_eq!(s.take_log(), format!("Executing op MatMul in device {GPU0}\n"));
}

static PROCESS: Mutex<()> = Mutex::new(());

#[test]
fn process_wide_settings_are_session_defaults_and_freeze_at_initialization() {
    let _guard = PROCESS.lock().unwrap_or_else(|p| p.into_inner());
    pc::reset();
    assert!(!pc::soft_device_placement());
    pc::set_soft_device_placement(true);
    pc::set_log_device_placement(true);
    let o = SessionOptions::from_process_defaults().unwrap();
    assert!(o.allow_soft_placement && o.log_device_placement);
    // physical devices: CPU:0 and the GPUs OXIFLOW_EMULATED_GPUS / CUDA_VISIBLE_DEVICES give
    let phys = pc::physical_devices().unwrap();
    assert_eq!(phys[0].name, "/physical_device:CPU:0");
    assert!(pc::set_memory_growth("/physical_device:CPU:0", true).unwrap_err().to_string().contains("non-GPU"));
    assert!(pc::set_memory_growth("/physical_device:GPU:9", true).is_err());
    pc::set_memory_fraction(0.4).unwrap();
    assert!(pc::set_memory_fraction(0.0).is_err());
    pc::set_logical_device_configuration("/physical_device:CPU:0", &[pc::LogicalDeviceConfiguration::default(); 3]).unwrap();
    let e = pc::set_logical_device_configuration("CPU:0", &[pc::LogicalDeviceConfiguration { memory_limit_mb: Some(5) }]).unwrap_err();
    assert!(e.to_string().contains("not supported"), "{e}");
    let o = SessionOptions::from_process_defaults().unwrap();
    assert_eq!(o.gpu_options.per_process_gpu_memory_fraction, Some(0.4));
    assert_eq!(o.cpu_count, Some(3));
    assert_eq!(pc::logical_device_configuration("CPU:0").unwrap().len(), 3);
    pc::mark_initialized();
    let e = pc::set_memory_fraction(0.5).unwrap_err().to_string();
    assert!(e.contains("Physical devices cannot be modified after being initialized"), "{e}");
    let e = pc::set_logical_device_configuration("CPU:0", &[pc::LogicalDeviceConfiguration::default()]).unwrap_err().to_string();
    assert!(e.contains("Virtual devices cannot be modified after being initialized"), "{e}");
    pc::set_soft_device_placement(false); // the switches still change
    assert!(!SessionOptions::from_process_defaults().unwrap().allow_soft_placement);
    pc::reset();
    assert_eq!(SessionOptions::from_process_defaults().unwrap().cpu_count, None);

    // memory growth on two (emulated, physical) GPUs: it must be the same on both
    std::env::set_var("OXIFLOW_EMULATED_GPUS", "2");
    let r = std::panic::catch_unwind(|| {
        let gpus: Vec<String> =
            pc::physical_devices().unwrap().into_iter().filter(|d| d.device_type == oxiflow_core::device::DeviceType::Gpu).map(|d| d.name).collect();
        assert_eq!(gpus, ["/physical_device:GPU:0", "/physical_device:GPU:1"]);
        pc::set_memory_growth(&gpus[0], true).unwrap();
        assert!(pc::memory_growth(&gpus[0]).unwrap() && !pc::memory_growth(&gpus[1]).unwrap());
        let e = SessionOptions::from_process_defaults().unwrap_err().to_string();
        assert!(e.contains("Memory growth cannot differ between GPU devices"), "{e}");
        pc::set_memory_growth(&gpus[1], true).unwrap();
        assert!(SessionOptions::from_process_defaults().unwrap().gpu_options.allow_growth);
        let e = pc::set_logical_device_configuration(&gpus[0], &[pc::LogicalDeviceConfiguration { memory_limit_mb: Some(10) }]).unwrap_err();
        assert!(e.to_string().contains("Cannot set memory growth on device when virtual devices configured"), "{e}");
        let e = pc::set_logical_device_configuration(&gpus[1], &[pc::LogicalDeviceConfiguration::default()]).unwrap_err();
        assert!(e.to_string().contains("Setting memory limit is required for GPU virtual devices"), "{e}");
    });
    std::env::remove_var("OXIFLOW_EMULATED_GPUS");
    pc::reset();
    if let Err(p) = r {
        std::panic::resume_unwind(p);
    }
}

fn explain(s: &Session, o: Output) -> String {
    s.explain_placement(o.node).unwrap()
}

#[test]
fn explain_placement_names_the_deciding_rule() {
    let mut g = Graph::new();
    let x = g.constant(Tensor::scalar(0.5f64)).unwrap();
    let own = pinned(&mut g, "/gpu:0", |g| g.op("Sin", &[x]).unwrap());
    let soft = pinned(&mut g, "/gpu:7", |g| g.op("Cos", &[x]).unwrap());
    // IsFinite has no GPU kernel in Oxiflow (TF has one)
    let i = g.constant(Tensor::full(&[2], 1.0f32)).unwrap();
    let cpu_only = g.op("IsFinite", &[i]).unwrap();
    g.push_device(DeviceScope::Function(Arc::new(|n: &NodeDef| Ok::<String, String>(if n.op == "Exp" { "/cpu:0".into() } else { String::new() }))));
    let by_fn = g.op("Exp", &[x]).unwrap();
    g.pop_device().unwrap();
    g.push_colocation(own.node, false).unwrap();
    let coloc = g.op("Tanh", &[x]).unwrap();
    g.pop_colocation();
    let default = g.op("Sqrt", &[x]).unwrap();
    let g = Arc::new(RwLock::new(g));
    let mut o = opts(1);
    o.allow_soft_placement = true;
    let s = Session::new(g, o).unwrap();
    s.run(&[], &[own, soft, cpu_only, by_fn, coloc, default], &[], false).unwrap();
    let e = explain(&s, own);
    assert!(e.starts_with(&format!("Sin (Sin) on {GPU0}")) && e.contains("rule: own request: a device scope asked for /device:GPU:0"), "{e}");
    let e = explain(&s, soft);
    assert!(e.contains("requested: /device:GPU:7 (device scope)") && e.contains("rule: soft placement"), "{e}");
    let e = explain(&s, cpu_only);
    assert!(e.contains(&format!("on {CPU0}")) && e.contains("rule: kernel availability") && e.contains("Float32"), "{e}");
    let e = explain(&s, i);
    assert!(e.contains("rule: generator") && e.contains(CPU0), "{e}");
    let e = explain(&s, by_fn);
    assert!(e.contains("rule: own request: a device function asked for /device:CPU:0"), "{e}");
    let e = explain(&s, coloc);
    assert!(e.contains("requested: /device:GPU:0 (colocate_with(Sin))") && e.contains("rule: colocation group: it shares a device with Sin"), "{e}");
    let e = explain(&s, default);
    assert!(e.contains("rule: default: nothing requested"), "{e}");
    // x feeds GPU and CPU consumers: not the generator rule
    assert!(explain(&s, x).contains("rule: default"), "{}", explain(&s, x));
    let report = s.placement_report().unwrap();
    assert_eq!(report.matches("\n  rule: ").count(), 8, "{report}"); // one per node
}

#[test]
fn explain_reports_dropped_colocations_and_variable_groups() {
    let mut g = Graph::new();
    let x = g.constant(Tensor::scalar(0.5f64)).unwrap();
    let a = pinned(&mut g, "/gpu:0", |g| g.op("Sin", &[x]).unwrap());
    let c = pinned(&mut g, "/cpu:0", |g| g.op("Cos", &[x]).unwrap());
    let v = g.variable(Tensor::scalar(1.0f64), None, true).unwrap();
    let init = g.global_variables_initializer().unwrap();
    let read = g.node_by_name("Variable/read").unwrap();
    let g = Arc::new(RwLock::new(g));
    let mut o = opts(1);
    o.allow_soft_placement = true;
    let s = Session::new(g.clone(), o).unwrap();
    s.run(&[], &[], &[init], false).unwrap();
    s.run(&[], &[a, c, Output::new(read, 0)], &[], false).unwrap();
    // b, created later, is colocated with a (placed on GPU:0) and c (placed on CPU:0): the
    // groups cannot merge; soft placement drops one request and says so
    let b = {
        let mut g = g.write().unwrap();
        g.push_colocation(a.node, false).unwrap();
        g.push_colocation(c.node, false).unwrap();
        let b = g.op("Exp", &[x]).unwrap();
        g.pop_colocation();
        g.pop_colocation();
        b
    };
    s.run(&[], &[b], &[], false).unwrap();
    let e = explain(&s, b);
    assert!(e.contains("note: the colocation of Exp with") && e.contains("was dropped under soft placement"), "{e}");
    let e = s.explain_placement(read).unwrap();
    assert!(e.contains("colocation group: it shares a device with Variable"), "{e}");
    assert!(!e.contains("earlier run"), "an earlier run's group is explained by how it was placed: {e}");
    let e = s.explain_placement(v).unwrap();
    assert!(e.starts_with("Variable (VariableV2) on "), "{e}");
}

#[test]
fn set_visible_devices_builds_the_visible_device_list_and_freezes_at_initialization() {
    let _guard = PROCESS.lock().unwrap_or_else(|p| p.into_inner());
    pc::reset();
    let cuda = std::env::var("CUDA_VISIBLE_DEVICES").ok();
    std::env::remove_var("CUDA_VISIBLE_DEVICES");
    std::env::set_var("OXIFLOW_EMULATED_GPUS", "3");
    let names = |v: Vec<pc::PhysicalDevice>| v.into_iter().map(|d| d.name).collect::<Vec<_>>();
    let session_gpus = |o: SessionOptions| gpus_of(&Session::new(Arc::new(RwLock::new(Graph::new())), o).unwrap());
    let r = std::panic::catch_unwind(|| {
        let g = |k: usize| format!("/physical_device:GPU:{k}");
        assert_eq!(names(pc::visible_devices(None).unwrap()), ["/physical_device:CPU:0", &g(0), &g(1), &g(2)]);
        // TF keeps the list in the order given; the session's GPUs follow physical order
        pc::set_visible_devices(&[&g(2), &g(0)], Some("GPU")).unwrap();
        assert_eq!(names(pc::visible_devices(None).unwrap()), ["/physical_device:CPU:0", &g(2), &g(0)]);
        assert_eq!(names(pc::visible_devices(Some("gpu")).unwrap()), [g(2), g(0)]);
        let o = SessionOptions::from_process_defaults().unwrap();
        assert_eq!((o.gpu_options.visible_device_list.as_deref(), o.gpu_count), (Some("0,2"), None));
        let gpus = session_gpus(o);
        assert_eq!(gpus.len(), 2);
        assert!(gpus[0].1.contains("emulated:0") && gpus[1].1.contains("emulated:2"), "{gpus:?}");

        // TF's errors; a refused call changes nothing
        for (devs, ty, want) in [
            (vec!["/physical_device:CPU:0"], Some("GPU"), "Unrecognized device: /physical_device:CPU:0"),
            (vec!["/physical_device:GPU:7"], Some("GPU"), "Unrecognized device: /physical_device:GPU:7"),
            (vec!["/physical_device:GPU:0"], None, "No CPU devices are available in this process"),
            (vec![], Some("CPU"), "No CPU devices are available in this process"),
        ] {
            let e = pc::set_visible_devices(&devs, ty).unwrap_err().to_string();
            assert!(e.contains(want), "{devs:?} {ty:?}: {e}");
        }
        assert_eq!(names(pc::visible_devices(Some("GPU")).unwrap()), [g(2), g(0)]);

        // no GPU visible: TF's device_count {"GPU": 0}
        pc::set_visible_devices(&[], Some("GPU")).unwrap();
        let o = SessionOptions::from_process_defaults().unwrap();
        assert_eq!(o.gpu_count, Some(0));
        assert!(session_gpus(o).is_empty());

        // memory growth must agree over the visible GPUs only; virtual devices follow them
        pc::set_visible_devices(&["GPU:1"], Some("GPU")).unwrap();
        pc::set_memory_growth(&g(1), true).unwrap();
        let o = SessionOptions::from_process_defaults().unwrap();
        assert!(o.gpu_options.allow_growth && o.gpu_options.visible_device_list.as_deref() == Some("1"));
        pc::reset();
        pc::set_visible_devices(&[&g(0), "/physical_device:CPU:0", &g(2)], None).unwrap();
        pc::set_logical_device_configuration(&g(2), &[pc::LogicalDeviceConfiguration { memory_limit_mb: Some(10) }; 2]).unwrap();
        let o = SessionOptions::from_process_defaults().unwrap();
        assert_eq!(o.gpu_options.virtual_devices_mb, vec![vec![], vec![10, 10]]);
        let gpus = session_gpus(o);
        assert_eq!(gpus.iter().map(|d| d.2).collect::<Vec<_>>(), [16 * GIB - 1536 * MIB, 10 * MIB, 10 * MIB]);
        assert!(gpus[1].1.contains("emulated:2") && gpus[2].1.contains("emulated:2"), "{gpus:?}");

        // after initialization: the same list again is fine, a change is refused (as in TF,
        // a list in another order is a change: [CPU, GPU:0, GPU:2] is not [GPU:0, CPU, GPU:2])
        pc::mark_initialized();
        pc::set_visible_devices(&[&g(0), "/physical_device:CPU:0", &g(2)], None).unwrap();
        let e = pc::set_visible_devices(&[&g(0), &g(2)], Some("GPU")).unwrap_err();
        assert!(matches!(e, OxiflowError::FailedPrecondition(_)), "{e}");
        assert!(e.to_string().contains("Visible devices cannot be modified after being initialized"), "{e}");
        assert_eq!(names(pc::visible_devices(Some("GPU")).unwrap()), [g(0), g(2)]);
    });
    std::env::remove_var("OXIFLOW_EMULATED_GPUS");
    if let Some(v) = cuda {
        std::env::set_var("CUDA_VISIBLE_DEVICES", v);
    }
    pc::reset();
    if let Err(p) = r {
        std::panic::resume_unwind(p);
    }
}
