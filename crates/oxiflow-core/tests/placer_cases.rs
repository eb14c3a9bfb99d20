//! Placement cases modelled on TensorFlow's `placer_test.cc`, `device_name_utils_test.cc`
//! and `ops_test.py` (DeviceTest, ColocationGroupTest), with the rules of TF's placer
//! (`placer.cc`, `colocation_graph.cc`) as the oracle. Each case builds a small graph,
//! names the devices present (CPU:0.. plus emulated GPUs) and soft placement on or off, and
//! gives for named nodes the device the placer must choose or a substring of the error.

use oxiflow_core::autodiff::gradients;
use oxiflow_core::graph::{DeviceScope, NodeDef};
use oxiflow_core::{DType, DeviceSpec, Graph, NodeId, NodeSpec, Output, Session, SessionOptions, Tensor};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

const PREFIX: &str = "/job:localhost/replica:0/task:0/device:";

/// What a node must get.
#[derive(Clone, Copy)]
enum Want {
    /// Placed on this device (`"GPU:1"`).
    On(&'static str),
    /// Placing it fails with an error containing this text.
    Err(&'static str),
}
use Want::{Err as Fails, On};

/// Graph-building helpers that name nodes so the expectations can refer to them.
struct B {
    g: Graph,
    by: HashMap<&'static str, Output>,
}

impl B {
    fn new() -> B {
        B { g: Graph::new(), by: HashMap::new() }
    }
    fn get(&self, n: &str) -> Output {
        self.by[n]
    }
    fn c64(&mut self, name: &'static str, v: f64) -> Output {
        let o = self.g.op_spec(NodeSpec::new("Const", &[]).attr("value", Tensor::scalar(v)).attr("dtype", DType::Float64).name(name)).unwrap();
        self.by.insert(name, o);
        o
    }
    fn c32i(&mut self, name: &'static str, v: i32) -> Output {
        let o = self.g.op_spec(NodeSpec::new("Const", &[]).attr("value", Tensor::scalar(v)).attr("dtype", DType::Int32).name(name)).unwrap();
        self.by.insert(name, o);
        o
    }
    fn op(&mut self, name: &'static str, op: &str, inputs: &[&str]) -> Output {
        let ins: Vec<Output> = inputs.iter().map(|n| self.get(n)).collect();
        let o = self.g.op_spec(NodeSpec::new(op, &ins).name(name)).unwrap();
        self.by.insert(name, o);
        o
    }
    fn var(&mut self, name: &'static str, v: f64) -> Output {
        let id = self.g.variable(Tensor::scalar(v), Some(name), true).unwrap();
        self.by.insert(name, Output::new(id, 0));
        Output::new(id, 0)
    }
    fn dev(&mut self, spec: &str) {
        self.g.push_device(DeviceScope::Spec(DeviceSpec::parse(spec).unwrap()));
    }
    fn devfn(&mut self, f: fn(&NodeDef) -> Result<String, String>) {
        self.g.push_device(DeviceScope::Function(Arc::new(f)));
    }
    fn reset(&mut self) {
        self.g.push_device(DeviceScope::Reset);
    }
    fn pop(&mut self) {
        self.g.pop_device().unwrap();
    }
    fn coloc(&mut self, with: &str, ignore_existing: bool) {
        let n = self.get(with).node;
        self.g.push_colocation(n, ignore_existing).unwrap();
    }
    fn uncoloc(&mut self) {
        self.g.pop_colocation();
    }
    fn node(&self, name: &str) -> NodeId {
        match self.by.get(name) {
            Some(o) => o.node,
            None => self.g.node_by_name(name).unwrap_or_else(|| panic!("no node {name}")),
        }
    }
}

#[derive(Clone, Copy)]
struct Devices {
    cpus: usize,
    gpus: usize,
    soft: bool,
}
const G0: Devices = Devices { cpus: 1, gpus: 0, soft: false };
const G1: Devices = Devices { cpus: 1, gpus: 1, soft: false };
const G2: Devices = Devices { cpus: 1, gpus: 2, soft: false };
const G0S: Devices = Devices { cpus: 1, gpus: 0, soft: true };
const G1S: Devices = Devices { cpus: 1, gpus: 1, soft: true };
const G2S: Devices = Devices { cpus: 1, gpus: 2, soft: true };
const C2G1: Devices = Devices { cpus: 2, gpus: 1, soft: false };

fn check(case: &str, b: B, d: Devices, want: &[(&str, Want)]) {
    let ids: Vec<(String, NodeId)> = want.iter().map(|(n, _)| (n.to_string(), b.node(n))).collect();
    let opts = SessionOptions { emulated_gpus: Some(d.gpus), cpu_count: Some(d.cpus), allow_soft_placement: d.soft, ..Default::default() };
    let sess = Session::new(Arc::new(RwLock::new(b.g)), opts).unwrap();
    for ((name, id), (_, w)) in ids.iter().zip(want) {
        let got = sess.assigned_device(*id);
        match (w, got) {
            (On(dev), Ok(full)) => assert_eq!(full, format!("{PREFIX}{dev}"), "case '{case}': node {name}"),
            (On(dev), Err(e)) => panic!("case '{case}': node {name} should be on {dev}, placement failed: {e}"),
            (Fails(text), Ok(full)) => panic!("case '{case}': node {name} should fail ({text}) but was placed on {full}"),
            (Fails(text), Err(e)) => assert!(e.to_string().contains(text), "case '{case}': node {name}: error\n{e}\nlacks '{text}'"),
        }
    }
}

/// A graph `x = Const(0.5)`, `s = Sin(x)`, with `s` built under `spec` (no scope when empty).
fn sin_under(spec: &str) -> B {
    let mut b = B::new();
    b.c64("x", 0.5);
    if !spec.is_empty() {
        b.dev(spec);
    }
    b.op("s", "Sin", &["x"]);
    b
}

/// Requested device → chosen device, for one Float64 `Sin` (placer_test: TestAssignedDevicePreserved,
/// TestPartialSpec, TestNoGPUs..., TestUnknownDevice, soft-placement variants).
#[test]
fn requested_devices() {
    let cases: &[(&str, Devices, Want)] = &[
        ("", G1, On("GPU:0")),
        ("", G0, On("CPU:0")),
        ("", G2, On("GPU:0")),
        ("/cpu:0", G1, On("CPU:0")),
        ("/CPU:0", G2, On("CPU:0")),
        ("/gpu:1", G2, On("GPU:1")),
        ("/device:GPU:1", G2, On("GPU:1")),
        ("/job:localhost/replica:0/task:0/device:GPU:1", G2, On("GPU:1")),
        ("/gpu:1", G1, Fails("was explicitly assigned to /device:GPU:1 but available devices are [ /job:localhost/replica:0/task:0/device:CPU:0, /job:localhost/replica:0/task:0/device:GPU:0 ]")),
        ("/gpu:1", G1S, On("GPU:0")),
        ("/gpu:3", G2S, On("GPU:0")),
        ("/gpu:0", G0, Fails("Cannot assign a device for operation s")),
        ("/gpu:0", G0S, On("CPU:0")),
        ("/device:GPU:*", G2, On("GPU:0")),
        ("/device:CPU:*", G2, On("CPU:0")),
        ("/job:localhost", G1, On("GPU:0")),
        ("/job:localhost/replica:0/task:0", G0, On("CPU:0")),
        ("/task:0/device:GPU:0", G1, On("GPU:0")),
        ("/job:worker", G1, Fails("was explicitly assigned to /job:worker")),
        // soft placement never drops job/replica/task (cg.cc GetSoftDeviceCandidates)
        ("/job:worker/device:GPU:0", G1S, Fails("/job:worker")),
        ("/replica:1", G1S, Fails("/replica:1")),
        ("/device:TPU:0", G1, Fails("was explicitly assigned to /device:TPU:0")),
        ("/device:TPU:0", G1S, On("GPU:0")),
        ("/cpu:1", C2G1, On("CPU:1")),
        ("/cpu:2", C2G1, Fails("was explicitly assigned to /device:CPU:2")),
        ("/gpu:0", C2G1, On("GPU:0")),
    ];
    for (spec, d, w) in cases {
        check(&format!("Sin under '{spec}'"), sin_under(spec), *d, &[("s", *w)]);
    }
}

/// Kernel availability per dtype: Int32 `Pow` has no GPU kernel (TF registers none either;
/// docs/user-guide/devices.md lists the GPU kernels); such ops go to CPU unconstrained, fail
/// when pinned to a GPU, move to CPU with soft placement (placer_test
/// TestNoKernelsRegistered..., TestSoftPlacement...).
#[test]
fn kernel_availability() {
    let int_op = |op: &str, spec: &str| {
        let mut b = B::new();
        b.c32i("i", 2);
        b.c32i("j", 3);
        if !spec.is_empty() {
            b.dev(spec);
        }
        b.op("op", op, &["i", "j"]);
        b
    };
    check("int Pow unconstrained", int_op("Pow", ""), G1, &[("op", On("CPU:0")), ("i", On("CPU:0"))]);
    check(
        "int Pow on GPU",
        int_op("Pow", "/gpu:0"),
        G1,
        &[("op", Fails("Could not satisfy explicit device specification '/device:GPU:0' because no supported kernel for GPU devices is available"))],
    );
    check("int Pow on GPU, soft", int_op("Pow", "/gpu:0"), G1S, &[("op", On("CPU:0"))]);
    check("int Pow on CPU", int_op("Pow", "/cpu:0"), G1, &[("op", On("CPU:0"))]);
    // Int32 arithmetic and comparisons have GPU kernels that compute in host memory (TF's
    // int32 GPU kernels): placed on the GPU as TF places them, pinned or not; the
    // constants follow their only consumer (the generator rule)
    for (op, spec) in [("Add", ""), ("Add", "/gpu:0"), ("Less", "/gpu:0"), ("Maximum", "")] {
        check(&format!("int {op} under '{spec}'"), int_op(op, spec), G1, &[("op", On("GPU:0")), ("i", On("GPU:0"))]);
    }
    // Int64 arithmetic has GPU kernels (TF registers int64 GPU kernels of Add, Sub, Mul,
    // Maximum, Minimum and the comparisons): pinned to the GPU it stays there
    let int64_ops = || {
        let mut b = B::new();
        for name in ["i", "j"] {
            let o = b.g.op_spec(NodeSpec::new("Const", &[]).attr("value", Tensor::scalar(2i64)).attr("dtype", DType::Int64).name(name)).unwrap();
            b.by.insert(name, o);
        }
        b.dev("/gpu:0");
        b.op("add", "Add", &["i", "j"]);
        b.op("max", "Maximum", &["add", "j"]);
        b.op("lt", "Less", &["max", "i"]);
        b
    };
    check("Int64 Add, Maximum, Less on GPU", int64_ops(), G1, &[("add", On("GPU:0")), ("max", On("GPU:0")), ("lt", On("GPU:0"))]);

    let mut b = B::new();
    b.c32i("i", 2);
    let cast = b.g.op_spec(NodeSpec::new("Cast", &[b.get("i")]).attr("DstT", DType::Float64).name("cast")).unwrap();
    b.by.insert("cast", cast);
    b.op("s", "Sin", &["cast"]);
    check("Cast from Int32 stays on CPU, its consumer goes to GPU", b, G1, &[("cast", On("CPU:0")), ("s", On("GPU:0")), ("i", On("CPU:0"))]);

    let mut b = B::new();
    b.c64("x", 1.0);
    b.c64("y", 2.0);
    b.op("gt", "Greater", &["x", "y"]);
    b.op("sel", "SelectV2", &["gt", "x", "y"]);
    check("Bool Greater/SelectV2 have GPU kernels", b, G1, &[("gt", On("GPU:0")), ("sel", On("GPU:0"))]);

    let mut b = B::new();
    b.c64("x", 1.0);
    b.g.op_spec(NodeSpec::new("Sum", &[b.get("x")]).attr("axis", Vec::<i64>::new()).attr("keep_dims", false).name("sum")).unwrap();
    check("Float64 Sum on GPU", b, G2, &[("sum", On("GPU:0"))]);
}

/// Nested device scopes (ops_test.py DeviceTest): inner fields win, `""` is a no-op,
/// `None` (Reset) clears outer scopes, a device function replaces the whole string.
#[test]
fn scopes() {
    fn nested(outer: &str, inner: &str) -> B {
        let mut b = B::new();
        b.c64("x", 0.5);
        b.dev(outer);
        b.dev(inner);
        b.op("s", "Sin", &["x"]);
        b
    }
    check("/job:localhost then /gpu:1", nested("/job:localhost", "/gpu:1"), G2, &[("s", On("GPU:1"))]);
    check("/gpu:1 then /cpu:0", nested("/gpu:1", "/cpu:0"), G2, &[("s", On("CPU:0"))]);
    check("/gpu:1 then ''", nested("/gpu:1", ""), G2, &[("s", On("GPU:1"))]);
    check("/device:GPU:1 then /device:GPU:*", nested("/device:GPU:1", "/device:GPU:*"), G2, &[("s", On("GPU:1"))]);
    check("/device:CPU:* then /device:CPU:1", nested("/device:CPU:*", "/device:CPU:1"), C2G1, &[("s", On("CPU:1"))]);
    check("/job:localhost/device:CPU:1 then /device:GPU:0", nested("/job:localhost/device:CPU:1", "/device:GPU:0"), C2G1, &[("s", On("GPU:0"))]);

    let mut b = B::new();
    b.c64("x", 0.5);
    b.dev("/cpu:0");
    b.reset();
    b.op("s", "Sin", &["x"]);
    b.pop();
    b.op("t", "Cos", &["x"]);
    check("Reset clears the outer /cpu:0; popping restores it", b, G1, &[("s", On("GPU:0")), ("t", On("CPU:0"))]);

    fn var_on_cpu(n: &NodeDef) -> Result<String, String> {
        Ok(if n.op == "VariableV2" { "/cpu:0".into() } else { "/gpu:0".into() })
    }
    let mut b = B::new();
    b.devfn(var_on_cpu);
    b.var("v", 1.0);
    b.op("s", "Sin", &["v"]);
    check(
        "device function: variables on CPU, the rest on GPU",
        b,
        G1,
        &[("v", On("CPU:0")), ("v/read", On("CPU:0")), ("v/Assign", On("CPU:0")), ("s", On("GPU:0"))],
    );

    fn gpu1(_: &NodeDef) -> Result<String, String> {
        Ok("/gpu:1".into())
    }
    let mut b = B::new();
    b.c64("x", 0.5);
    b.dev("/cpu:0");
    b.devfn(gpu1);
    b.op("s", "Sin", &["x"]);
    check("a device function replaces the outer spec", b, G2, &[("s", On("GPU:1"))]);

    fn empty(_: &NodeDef) -> Result<String, String> {
        Ok(String::new())
    }
    let mut b = B::new();
    b.c64("x", 0.5);
    b.dev("/cpu:0");
    b.devfn(empty);
    b.op("s", "Sin", &["x"]);
    // TF applies scopes newest to oldest: the function's "" first, then the outer /cpu:0
    // fills the unset fields (ops.py _apply_device_functions)
    check("a device function returning '' under /cpu:0", b, G1, &[("s", On("CPU:0"))]);

    let mut b = B::new();
    b.c64("x", 0.5);
    b.devfn(gpu1);
    b.dev("/cpu:0");
    b.op("s", "Sin", &["x"]);
    // the outer function runs last and replaces the inner /cpu:0 (ops_test: "/job:overwrite")
    check("an outer device function overwrites an inner spec", b, G2, &[("s", On("GPU:1"))]);
}

/// Reference edges and colocation (placer_test TestReferenceConnection...,
/// TestColocationGroup..., ops_test ColocationGroupTest).
#[test]
fn colocation() {
    let mut b = B::new();
    b.dev("/cpu:0");
    b.var("v", 1.0);
    b.pop();
    b.op("s", "Sin", &["v"]);
    check("variable on CPU: read and Assign follow it", b, G1, &[("v", On("CPU:0")), ("v/read", On("CPU:0")), ("v/Assign", On("CPU:0")), ("s", On("GPU:0"))]);

    let mut b = B::new();
    b.var("v", 1.0);
    check("unconstrained variable goes to GPU", b, G1, &[("v", On("GPU:0")), ("v/read", On("GPU:0"))]);

    let mut b = B::new();
    b.dev("/cpu:0");
    b.var("v", 1.0);
    b.pop();
    b.c64("k", 3.0);
    b.dev("/gpu:0");
    let (v, k) = (b.get("v"), b.get("k"));
    let a = b.g.op_spec(NodeSpec::new("Assign", &[v, k]).name("assign_gpu")).unwrap();
    b.by.insert("assign_gpu", a);
    b.pop();
    check("Assign asking for GPU follows its CPU variable (ref edge), soft off", b, G1, &[("assign_gpu", On("CPU:0"))]);

    let mut b = B::new();
    b.c64("x", 0.5);
    b.dev("/gpu:1");
    b.op("s", "Sin", &["x"]);
    b.pop();
    b.coloc("s", false);
    b.op("t", "Cos", &["x"]);
    b.uncoloc();
    check("colocate_with a GPU:1 op", b, G2, &[("t", On("GPU:1")), ("s", On("GPU:1"))]);

    let mut b = B::new();
    b.c64("x", 0.5);
    b.dev("/cpu:0");
    b.op("s", "Sin", &["x"]);
    b.pop();
    b.dev("/gpu:0");
    b.coloc("s", false);
    b.op("t", "Cos", &["x"]);
    b.uncoloc();
    b.op("u", "Exp", &["x"]);
    check("colocate_with suspends the outer device scope", b, G1, &[("t", On("CPU:0")), ("u", On("GPU:0"))]);

    let mut b = B::new();
    b.c64("x", 0.5);
    b.dev("/gpu:0");
    b.op("s", "Sin", &["x"]);
    b.pop();
    b.coloc("s", false);
    b.op("t", "Cos", &["s"]);
    b.coloc("t", false);
    b.op("u", "Exp", &["t"]);
    b.uncoloc();
    b.uncoloc();
    check("nested colocate_with chains into one group", b, G2, &[("u", On("GPU:0")), ("t", On("GPU:0"))]);

    // colocate_with copies the op's device over an inner request (TF 2.18, ops.py:2787-2816)
    let mut b = B::new();
    b.c64("x", 0.5);
    b.dev("/cpu:0");
    b.op("s", "Sin", &["x"]);
    b.pop();
    b.coloc("s", false);
    b.dev("/gpu:0");
    b.op("t", "Cos", &["x"]);
    b.pop();
    b.uncoloc();
    check("inside colocate_with, the op's device wins over an inner request", b, G1, &[("t", On("CPU:0"))]);

    // two members of one colocation group asking for different devices
    let conflict = || {
        let mut b = B::new();
        b.c64("x", 0.5);
        b.op("s", "Sin", &["x"]);
        b.coloc("s", false);
        b.dev("/gpu:0");
        b.op("t", "Cos", &["x"]);
        b.pop();
        b.dev("/cpu:0");
        b.op("u", "Exp", &["x"]);
        b.pop();
        b.uncoloc();
        b.op("w", "Add", &["t", "u"]);
        b
    };
    check("colocation conflict without soft placement", conflict(), G1, &[("w", Fails("Cannot colocate nodes"))]);
    // with soft placement the merge of the two requests clears type and id and the group
    // stays together (dnu.cc MergeDevNames, soft): all on the best device
    check("colocation conflict with soft placement", conflict(), G1S, &[("w", On("GPU:0")), ("t", On("GPU:0")), ("u", On("GPU:0")), ("s", On("GPU:0"))]);

    // an Int32 op without a GPU kernel colocated with a GPU-pinned float op
    let types = || {
        let mut b = B::new();
        b.c64("x", 0.5);
        b.dev("/gpu:0");
        b.op("s", "Sin", &["x"]);
        b.pop();
        b.c32i("i", 1);
        b.c32i("j", 2);
        b.coloc("s", false);
        b.op("add", "Pow", &["i", "j"]);
        b.uncoloc();
        b
    };
    // the group's types are intersected (CPU only), then the GPU request cannot be met
    // (cg.cc MergeSupportedDevices, GetDevicesForNode)
    check(
        "colocating an int op with a GPU float op",
        types(),
        G1,
        &[("add", Fails("Could not satisfy explicit device specification '/device:GPU:0' because no supported kernel for GPU devices is available"))],
    );
    check("the same with soft placement: the whole group moves to CPU", types(), G1S, &[("add", On("CPU:0")), ("s", On("CPU:0"))]);

    // ignore_existing drops outer colocation requests
    let mut b = B::new();
    b.c64("x", 0.5);
    b.dev("/gpu:1");
    b.op("s", "Sin", &["x"]);
    b.pop();
    b.dev("/cpu:0");
    b.op("c", "Cos", &["x"]);
    b.pop();
    b.coloc("s", false);
    b.coloc("c", true);
    b.op("u", "Exp", &["x"]);
    b.uncoloc();
    b.uncoloc();
    check("colocate_with(ignore_existing=true) keeps only the inner op", b, G2, &[("u", On("CPU:0"))]);
}

/// Ops with no inputs and one output follow their consumers (placer.cc heuristic A).
#[test]
fn generators() {
    let mut b = B::new();
    b.c64("k", 0.5);
    b.dev("/gpu:1");
    b.op("s", "Sin", &["k"]);
    // the consumer is asked first: the session places what a request needs, so a generator
    // queried alone is placed alone (see docs/user-guide/devices.md, per-run placement)
    check("a constant follows its only consumer", b, G2, &[("s", On("GPU:1")), ("k", On("GPU:1"))]);

    let mut b = B::new();
    b.c64("k", 0.5);
    b.dev("/gpu:1");
    b.op("s", "Sin", &["k"]);
    b.pop();
    b.dev("/cpu:0");
    b.op("t", "Cos", &["k"]);
    b.pop();
    b.op("w", "Add", &["s", "t"]);
    // placing `w` places s, t and k together (one run would)
    check(
        "a constant with consumers on two devices takes the first candidate",
        b,
        G2,
        &[("w", On("GPU:0")), ("s", On("GPU:1")), ("t", On("CPU:0")), ("k", On("GPU:0"))],
    );

    let mut b = B::new();
    let p = b.g.placeholder(DType::Float64, &[], Some("p")).unwrap();
    b.by.insert("p", p);
    b.dev("/cpu:0");
    b.op("s", "Sin", &["p"]);
    check("a placeholder follows its CPU consumer", b, G1, &[("s", On("CPU:0")), ("p", On("CPU:0"))]);

    let mut b = B::new();
    b.dev("/cpu:0");
    b.c64("k", 0.5);
    b.pop();
    b.op("s", "Sin", &["k"]);
    check("an explicit request on a constant wins", b, G1, &[("k", On("CPU:0")), ("s", On("GPU:0"))]);

    let mut b = B::new();
    b.c64("k", 0.5);
    check("a constant with no consumer goes to the best device", b, G1, &[("k", On("GPU:0"))]);
}

/// Gradient ops with `colocate = true` take their forward op's device; without it the
/// placer decides (gradients_test.py testColocateGradients...).
#[test]
fn gradient_colocation() {
    for (colocate, fwd, want) in [(true, "/gpu:1", "GPU:1"), (true, "/cpu:0", "CPU:0"), (false, "/gpu:1", "GPU:0"), (false, "/cpu:0", "GPU:0")] {
        let mut b = B::new();
        let p = b.g.placeholder(DType::Float64, &[], Some("p")).unwrap();
        b.by.insert("p", p);
        b.dev(fwd);
        let s = b.op("s", "Sin", &["p"]);
        b.pop();
        let gr = gradients(&mut b.g, &[s], &[p], None, colocate).unwrap();
        assert!(gr[0].is_some());
        let grad_ops: Vec<String> =
            b.g.nodes().iter().filter(|n| n.name.starts_with("gradients/s_grad/") && n.op.name != "Const").map(|n| n.name.clone()).collect();
        assert!(!grad_ops.is_empty());
        let names: Vec<&'static str> = grad_ops.into_iter().map(|s| &*Box::leak(s.into_boxed_str())).collect();
        let want_all: Vec<(&str, Want)> = names.iter().map(|n| (*n, On(want))).collect();
        check(&format!("gradients colocate={colocate}, forward on {fwd}"), b, G2, &want_all);
    }
}

/// A placement error fails only what needs the node; the session keeps working.
#[test]
fn errors_leave_the_session_usable() {
    let mut b = B::new();
    b.c64("x", 0.5);
    b.dev("/gpu:3");
    let bad = b.op("bad", "Sin", &["x"]);
    b.pop();
    let good = b.op("good", "Cos", &["x"]);
    let sess = Session::new(Arc::new(RwLock::new(b.g)), SessionOptions { emulated_gpus: Some(1), ..Default::default() }).unwrap();
    let e = sess.run(&[], &[bad], &[], false).unwrap_err().to_string();
    assert!(e.contains("Cannot assign a device for operation bad"), "{e}");
    assert!(e.contains("/device:GPU:3"), "{e}");
    let v = sess.run(&[], &[good], &[], false).unwrap();
    assert_eq!(v.values[0].to_f64_vec(), vec![0.5f64.cos()]);
    assert_eq!(sess.assigned_device(good.node).unwrap(), format!("{PREFIX}GPU:0"));
    assert!(sess.assigned_device(bad.node).is_err());
}
