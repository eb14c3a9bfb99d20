//! Every registered op built and run with hostile operands: random dtypes, ranks, sizes
//! (empty and unknown dimensions included), memory orders, values (NaN, infinities,
//! negative and huge integers) and attributes of the op's declared kinds with odd values,
//! then its gradient (and at times its second derivatives) built and run. Each case must
//! end in a value or an error, one that names the op when the node is refused; a panic,
//! anywhere (a kernel on a pool thread included), fails the test with every case that
//! panicked, so that one run lists them all. Under Julia 1.5 a panic inside the library
//! aborts the user's session, so none may be reachable from a graph.
//!
//! The cases come from a fixed seed (the same cases every run); `OXIFLOW_OP_FUZZ_CASES` and
//! `OXIFLOW_FUZZ_SEED` run more or other ones.

mod common;
#[path = "common/fuzz.rs"]
mod fuzz;
use common::Rng;
use fuzz::{attr, dims, dtype, fuzz, tensor, tensor_with, Reached, INTS, SERIAL};
use oxiflow_core::autodiff::gradients;
use oxiflow_core::graph::DeviceScope;
use oxiflow_core::ops::{lookup, registered, Arity, AttrKind, AttrValue};
use oxiflow_core::shape::UNKNOWN;
use oxiflow_core::{DType, DeviceSpec, Graph, Layout, NodeSpec, Output, Session, SessionOptions, Tensor};
use std::sync::{Arc, RwLock};

/// Ops that wait for a peer (MPI ranks, a `Send`'s `Recv`), sleep (for as long as a drawn
/// number says), print (to the test's output), or take a function attribute: other tests
/// cover them with the peers, durations or functions they need.
fn excluded(op: &str) -> bool {
    op.starts_with("Mpi")
        || op.starts_with("Nccl")
        || op.starts_with("Collective")
        || op.contains("Recv")
        || op.contains("Send")
        || matches!(op, "SleepFor" | "Print" | "If" | "While" | "WhileGrad" | "WhileGradGrad")
        || lookup(op).is_ok_and(|d| d.attrs.iter().any(|a| a.kind == AttrKind::Func))
}

/// Starts the description of a template's case as written: its operands are `Const`s.
const AS_WRITTEN: &str = "as written: ";

/// `t` as an operand: a `Const`, or a `Placeholder` with some dimensions unknown, fed `t`.
fn operand(r: &mut Rng, g: &mut Graph, feeds: &mut Vec<(Output, Tensor)>, t: Tensor, what: &mut String) -> Output {
    let (dt, d) = (t.dtype(), t.dims().to_vec());
    let head: Vec<f64> = t.to_f64_vec().into_iter().take(6).collect();
    if r.chance(0.6) || what.starts_with(AS_WRITTEN) {
        *what += &format!("Const {dt:?} {d:?} {head:?}, ");
        g.constant(t).unwrap()
    } else {
        let declared: Vec<usize> = d.iter().map(|&k| if r.chance(0.5) { UNKNOWN } else { k }).collect();
        // now and then the feed does not fit the placeholder (a run's error)
        let (declared, ddt) = match r.below(40) {
            0 => (dims(r), dt),
            1 => (declared, dtype(r)),
            _ => (declared, dt),
        };
        *what += &format!("Placeholder {ddt:?} {declared:?} fed {dt:?} {d:?} {head:?}, ");
        let p = g.placeholder(ddt, &declared, None).unwrap();
        feeds.push((p, t));
        p
    }
}

/// One case: the op, its operands (a `Const`, or a `Placeholder` with some dimensions
/// unknown, fed at run time) and attributes, described in `what` as it is built.
fn case(r: &mut Rng, op: &'static str, what: &mut String) -> Reached {
    let def = lookup(op).unwrap();
    let n_in = match def.arity {
        Arity::Fixed(n) => {
            if r.chance(0.05) {
                n + 1
            } else {
                n
            }
        }
        Arity::AtLeast(n) => n + r.below(3),
    };
    let mut g = Graph::new();
    let mut feeds = Vec::new();
    let mut inputs = Vec::new();
    *what = format!("{op}(");
    let mut prev: Option<(DType, Vec<usize>)> = None;
    for _ in 0..n_in {
        // operands often share the previous one's dtype and shape, as most ops want
        let (dt, d) = match &prev {
            Some(p) if r.chance(0.5) => p.clone(),
            Some((pdt, _)) if r.chance(0.3) => (*pdt, dims(r)),
            _ => (dtype(r), dims(r)),
        };
        prev = Some((dt, d.clone()));
        let t = tensor(r, dt, &d);
        let o = operand(r, &mut g, &mut feeds, t, what);
        inputs.push(o);
    }
    let mut spec = NodeSpec::new(op, &inputs);
    for a in def.attrs {
        if r.chance(0.8) {
            let v = attr(r, a.kind);
            *what += &format!("{}={v:?}, ", a.name);
            spec = spec.attr(a.name, v);
        }
    }
    *what += ")";
    execute(r, g, feeds, spec, what, &mut String::new())
}

/// Adds the node of `spec` to `g` (an error must name its op), builds the gradients of its float outputs with respect
/// to its float operands (and, now and then, their gradients), and runs the node, the
/// gradients, and the node again (a session must stay usable after an error), feeding
/// `feeds`.
fn execute(r: &mut Rng, g: Graph, feeds: Vec<(Output, Tensor)>, spec: NodeSpec, what: &str, why: &mut String) -> Reached {
    fuzz::timed(what, || execute_timed(r, g, feeds, spec, why))
}

fn execute_timed(r: &mut Rng, mut g: Graph, feeds: Vec<(Output, Tensor)>, spec: NodeSpec, why: &mut String) -> Reached {
    let (inputs, op) = (spec.inputs.clone(), spec.op.clone());
    // a quarter of the cases ask for an emulated GPU (soft placement moves CPU-only ops)
    let gpu = r.chance(0.25);
    if gpu {
        g.push_device(DeviceScope::Spec(DeviceSpec::parse("/GPU:0").unwrap()));
    }
    let y = g.op_spec(spec);
    if gpu {
        g.pop_device().unwrap();
    }
    let y = match y {
        Ok(y) => y,
        Err(e) => {
            *why = e.to_string();
            // a refused node's error names its op (the test fails here otherwise)
            assert!(why.contains(&op), "the error does not name the op {op}: {why}");
            return Reached::Nothing;
        }
    };
    let n_out = g.node(y.node).unwrap().outputs.len();
    let outs: Vec<Output> = (0..n_out).map(|i| Output::new(y.node, i)).collect();
    // outputs of ops added after the op, run on their own (their errors are not the op's)
    let mut after = Vec::new();
    // a tenth of the cases feed the output to another op of one or two operands, drawn
    // from all, with drawn attributes
    if r.chance(0.1) {
        let mut next: Vec<&'static str> =
            registered().into_iter().filter(|o| !excluded(o) && matches!(lookup(o).unwrap().arity, Arity::Fixed(1 | 2))).collect();
        next.sort();
        let op2 = r.pick(&next);
        let def = lookup(op2).unwrap();
        let ins = if matches!(def.arity, Arity::Fixed(1)) { vec![y] } else { vec![y, y] };
        let mut spec = NodeSpec::new(op2, &ins);
        for a in def.attrs {
            if r.chance(0.8) {
                spec = spec.attr(a.name, attr(r, a.kind));
            }
        }
        if let Ok(z) = g.op_spec(spec) {
            after.push(z);
        }
    }
    // a third of the cases put elementwise ops after the op, which the optimizer may fuse
    // with it (and the gradient with its gradient)
    if r.chance(0.3) && g.dtype_of(y).is_ok_and(|d| d.is_float()) {
        let a = g.op(r.pick(&["Tanh", "Neg", "Square", "Exp"]), &[y]);
        if let Ok(a) = a {
            if let Ok(b) = g.op(r.pick(&["Mul", "Add", "Maximum"]), &[a, y]) {
                after.push(b);
            }
        }
    }
    let is_float = |g: &Graph, o: &Output| g.dtype_of(*o).is_ok_and(|d| d.is_float());
    let ys: Vec<Output> = outs.iter().filter(|o| is_float(&g, o)).copied().collect();
    let xs: Vec<Output> = inputs.iter().filter(|o| is_float(&g, o)).copied().collect();
    let grads = if !ys.is_empty() && !xs.is_empty() { gradients(&mut g, &ys, &xs, None, r.chance(0.5)).ok() } else { None };
    let mut grads: Vec<Output> = grads.into_iter().flatten().flatten().collect();
    // a fifth of them differentiate the gradients again (the gradients' own gradients)
    let firsts: Vec<Output> = grads.iter().filter(|o| is_float(&g, o)).copied().collect();
    if !firsts.is_empty() && r.chance(0.2) {
        if let Ok(second) = gradients(&mut g, &firsts, &xs, None, false) {
            grads.extend(second.into_iter().flatten());
        }
    }
    // and the gradients through the ops after it, on their own
    let after_ys: Vec<Output> = after.iter().filter(|o| is_float(&g, o)).copied().collect();
    let after_grads: Vec<Output> = match after_ys.is_empty() || xs.is_empty() {
        true => Vec::new(),
        false => gradients(&mut g, &after_ys, &xs, None, false).map(|v| v.into_iter().flatten().collect()).unwrap_or_default(),
    };
    after.extend(after_grads);
    let init = if g.variables().is_empty() { None } else { g.global_variables_initializer().ok() };
    let opts = SessionOptions { fusion: Some(r.chance(0.5)), emulated_gpus: gpu.then_some(1), allow_soft_placement: true, ..Default::default() };
    let s = match Session::new(Arc::new(RwLock::new(g)), opts) {
        Ok(s) => s,
        Err(e) => {
            *why = e.to_string();
            return Reached::Built;
        }
    };
    if let Some(init) = init {
        let _ = s.run(&[], &[], &[init], false);
    }
    let first = s.run(&feeds, &outs, &[], false);
    if first.is_ok() && !after.is_empty() {
        let _ = s.run(&feeds, &after, &[], r.chance(0.3));
    }
    if let Err(e) = &first {
        *why = e.to_string();
    }
    let grad_ran = first.is_ok() && !grads.is_empty() && s.run(&feeds, &grads, &[], r.chance(0.3)).is_ok();
    let _ = s.run(&feeds, &outs, &[], false);
    match (first.is_ok(), grad_ran) {
        (false, _) => Reached::Built,
        (true, false) => Reached::Ran,
        (true, true) => Reached::Differentiated,
    }
}

#[test]
fn every_op_survives_hostile_operands() {
    let mut ops: Vec<&'static str> = registered().into_iter().filter(|op| !excluded(op)).collect();
    ops.sort();
    let failures = fuzz(0x0f1f_2f3f, &ops, false, |k, _, r, desc, _| case(r, ops[k], desc));
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// An operand of a template: valid for the op as written; [`mutate`] spoils some.
#[derive(Clone, Debug)]
enum Arg {
    /// Floats of the case's dtype.
    F(Vec<usize>),
    /// Complex numbers of the case's precision.
    C(Vec<usize>),
    /// Integers of the dtype drawn from `0..hi`.
    Ix(DType, Vec<usize>, i64),
    /// These integers.
    Iv(DType, Vec<usize>, Vec<i64>),
    /// Booleans.
    B(Vec<usize>),
    /// A float variable (a training op's `Ref` operand).
    Var(Vec<usize>),
}

use Arg::*;
const I32: DType = DType::Int32;
const I64: DType = DType::Int64;
const F64: DType = DType::Float64;

fn ints(v: &[i64]) -> AttrValue {
    AttrValue::Ints(v.to_vec())
}
fn shape(v: &[usize]) -> AttrValue {
    AttrValue::Shape(v.to_vec())
}
fn text(v: &str) -> AttrValue {
    AttrValue::Str(v.to_string())
}

type Template = (&'static str, Vec<Arg>, Vec<(&'static str, AttrValue)>);

/// Valid calls of the ops whose operands must agree in ways random draws rarely hit
/// (convolutions, gathers and scatters, slices, sparse matrices, training ops), as ADCME
/// and TF's Python layer make them.
fn templates() -> Vec<Template> {
    let conv = |s: i64, pad: &str| vec![("strides", ints(&[1, s, s, 1])), ("padding", text(pad))];
    let mut t: Vec<Template> = vec![
        ("Conv2D", vec![F(vec![2, 5, 5, 3]), F(vec![3, 3, 3, 4])], conv(1, "SAME")),
        ("Conv2D", vec![F(vec![9, 6, 6, 2]), F(vec![3, 3, 2, 3])], conv(2, "VALID")),
        ("Conv2D", vec![F(vec![8, 7, 5, 1]), F(vec![2, 3, 1, 9])], conv(1, "SAME")),
        ("Conv2DBackpropInput", vec![F(vec![2, 5, 5, 3]), F(vec![3, 3, 3, 4]), F(vec![2, 5, 5, 4])], conv(1, "SAME")),
        ("Conv2DBackpropInput", vec![F(vec![9, 6, 6, 2]), F(vec![3, 3, 2, 3]), F(vec![9, 2, 2, 3])], conv(2, "VALID")),
        ("Conv2DBackpropFilter", vec![F(vec![2, 5, 5, 3]), F(vec![3, 3, 3, 4]), F(vec![2, 5, 5, 4])], conv(1, "SAME")),
        ("Conv2DBackpropFilter", vec![F(vec![9, 6, 6, 2]), F(vec![3, 3, 2, 3]), F(vec![9, 2, 2, 3])], conv(2, "VALID")),
        ("MatMul", vec![F(vec![3, 4]), F(vec![4, 2])], vec![]),
        ("MatMul", vec![F(vec![4, 3]), F(vec![2, 4])], vec![("transpose_a", AttrValue::Bool(true)), ("transpose_b", AttrValue::Bool(true))]),
        ("BatchMatMulV2", vec![F(vec![2, 3, 4]), F(vec![1, 4, 5])], vec![]),
        ("GatherV2", vec![F(vec![4, 3]), Ix(I64, vec![5], 4)], vec![("axis", AttrValue::Int(0))]),
        ("GatherV2", vec![F(vec![4, 3]), Ix(I32, vec![2, 2], 3)], vec![("axis", AttrValue::Int(1))]),
        ("GatherNd", vec![F(vec![4, 3]), Ix(I64, vec![5, 2], 3)], vec![]),
        ("ScatterNd", vec![Ix(I64, vec![5, 1], 4), F(vec![5, 3])], vec![("shape", shape(&[4, 3]))]),
        ("_ScatterNdToShapeOf", vec![Ix(I64, vec![5, 1], 4), F(vec![5, 3]), F(vec![4, 3])], vec![]),
        ("_GatherLastAxis", vec![F(vec![3, 4]), Ix(I32, vec![3, 2], 4)], vec![]),
        ("_ScatterLastAxis", vec![F(vec![3, 2]), Ix(I32, vec![3, 2], 4), F(vec![3, 4])], vec![]),
        ("_InterpInterval", vec![Iv(F64, vec![4], vec![0, 1, 2, 3]), Iv(F64, vec![5], vec![0, 3, 1, 2, 1])], vec![]),
        ("StridedSlice", vec![F(vec![4, 5, 3])], vec![("begin", ints(&[1, 0, 0])), ("end", ints(&[3, 5, 3])), ("strides", ints(&[1, 2, 1]))]),
        (
            "StridedSlice",
            vec![F(vec![4, 5])],
            vec![("begin", ints(&[3, 1])), ("end", ints(&[0, 0])), ("strides", ints(&[-1, 1])), ("shrink_axis_mask", AttrValue::Int(2))],
        ),
        (
            "StridedSliceGrad",
            vec![F(vec![2, 3, 3])],
            vec![("begin", ints(&[1, 0, 0])), ("end", ints(&[3, 5, 3])), ("strides", ints(&[1, 2, 1])), ("shape", shape(&[4, 5, 3]))],
        ),
        ("Transpose", vec![F(vec![2, 3, 4])], vec![("perm", ints(&[2, 0, 1]))]),
        ("Tile", vec![F(vec![2, 3])], vec![("multiples", ints(&[2, 1]))]),
        ("Pad", vec![F(vec![2, 3])], vec![("paddings", ints(&[1, 0, 2, 1]))]),
        ("Reshape", vec![F(vec![2, 6])], vec![("shape", shape(&[3, 4]))]),
        ("ReverseV2", vec![F(vec![3, 4])], vec![("axis", ints(&[1]))]),
        ("Squeeze", vec![F(vec![1, 3, 1])], vec![("squeeze_dims", ints(&[0]))]),
        ("ExpandDims", vec![F(vec![2, 3])], vec![("dim", AttrValue::Int(1))]),
        ("BroadcastTo", vec![F(vec![3, 1])], vec![("shape", shape(&[2, 3, 4]))]),
        ("EnsureShape", vec![F(vec![2, 3])], vec![("shape", shape(&[2, 3]))]),
        ("SplitV", vec![F(vec![6, 2])], vec![("size_splits", ints(&[2, 4])), ("axis", AttrValue::Int(0))]),
        ("ConcatV2", vec![F(vec![2, 3]), F(vec![4, 3])], vec![("axis", AttrValue::Int(0))]),
        ("Pack", vec![F(vec![2, 3]), F(vec![2, 3])], vec![("axis", AttrValue::Int(1))]),
        ("Unpack", vec![F(vec![3, 2])], vec![("num", AttrValue::Int(3)), ("axis", AttrValue::Int(0))]),
        ("ArgMax", vec![F(vec![3, 4])], vec![("axis", AttrValue::Int(1))]),
        ("TopKV2", vec![F(vec![3, 5])], vec![("k", AttrValue::Int(2))]),
        ("SelectV2", vec![B(vec![3, 4]), F(vec![3, 4]), F(vec![1, 4])], vec![]),
        ("SoftmaxCrossEntropyWithLogits", vec![F(vec![4, 5]), F(vec![4, 5])], vec![]),
        ("MatrixSolve", vec![F(vec![3, 3]), F(vec![3, 2])], vec![]),
        ("MatrixSolveLs", vec![F(vec![4, 3]), F(vec![4, 2])], vec![]),
        ("MatrixTriangularSolve", vec![F(vec![3, 3]), F(vec![3, 2])], vec![("lower", AttrValue::Bool(true))]),
        ("SparseTensorDenseMatMul", vec![Ix(I64, vec![5, 2], 3), F(vec![5]), F(vec![3, 2])], vec![("dense_shape", shape(&[3, 3]))]),
        (
            "SparseSolve",
            vec![Iv(I64, vec![3, 2], vec![0, 0, 1, 1, 2, 2]), F(vec![3]), F(vec![3])],
            vec![("dense_shape", shape(&[3, 3])), ("method", text("lu"))],
        ),
        (
            "SparseRemap",
            vec![Ix(I64, vec![4, 2], 3), F(vec![4]), Iv(I64, vec![3], vec![0, 2, -1]), Iv(I64, vec![3], vec![1, 0, 2])],
            vec![("dense_shape", shape(&[3, 3]))],
        ),
        ("SparseReorder", vec![Ix(I64, vec![4, 2], 3), F(vec![4])], vec![("dense_shape", shape(&[3, 3]))]),
        (
            "SparseSparseMatMul",
            vec![Ix(I64, vec![4, 2], 3), F(vec![4]), Ix(I64, vec![3, 2], 3), F(vec![3])],
            vec![("a_shape", shape(&[3, 3])), ("b_shape", shape(&[3, 3]))],
        ),
        (
            "OtNetwork",
            vec![Iv(F64, vec![3], vec![1, 2, 1]), Iv(F64, vec![4], vec![1, 1, 1, 1]), Iv(F64, vec![3, 4], vec![1, 2, 3, 4, 2, 0, 1, 5, 3, 3, 0, 1])],
            vec![("max_iter", AttrValue::Int(100))],
        ),
        ("Dtw", vec![F(vec![5]), F(vec![4])], vec![]),
        ("FFT", vec![C(vec![3, 8])], vec![]),
        ("FFT2D", vec![C(vec![4, 4])], vec![]),
        ("RandomGamma", vec![Iv(F64, vec![2], vec![1, 2])], vec![("shape", shape(&[3]))]),
        ("RandomBinomial", vec![Iv(F64, vec![], vec![5]), Iv(F64, vec![], vec![1])], vec![("shape", shape(&[3]))]),
        ("Assign", vec![Var(vec![3]), F(vec![3])], vec![]),
    ];
    for op in ["Sum", "Max", "Mean", "Prod"] {
        t.push((op, vec![F(vec![3, 4, 2])], vec![("axis", ints(&[1])), ("keep_dims", AttrValue::Bool(true))]));
    }
    t.push(("Cholesky", vec![Iv(F64, vec![3, 3], vec![4, 1, 0, 1, 3, 0, 0, 0, 2])], vec![]));
    for op in ["MatrixInverse", "MatrixDeterminant", "Svd", "MatrixDiagPart"] {
        t.push((op, vec![F(vec![3, 3])], vec![]));
    }
    // training ops from their input roles
    for op in registered().into_iter().filter(|op| op.starts_with("Apply")) {
        let args = lookup(op).unwrap().inputs.iter().map(|i| match i.role {
            oxiflow_core::ops::InputRole::Ref => Var(vec![2, 3]),
            oxiflow_core::ops::InputRole::Scalar => F(vec![]),
            oxiflow_core::ops::InputRole::Int64Scalar => Iv(I64, vec![], vec![3]),
            _ => F(vec![2, 3]),
        });
        t.push((op, args.collect(), vec![]));
    }
    t
}

/// Spoils a template in one way: a dimension off by one or zero, a rank added or dropped,
/// an index or size made hostile, a dtype changed, an attribute replaced by an odd value
/// of its kind, an operand dropped or repeated.
fn mutate(r: &mut Rng, op: &str, args: &mut Vec<Arg>, attrs: &mut Vec<(&'static str, AttrValue)>) -> String {
    let k = r.below(args.len().max(1));
    match r.below(7) {
        0 | 1 if !args.is_empty() => {
            let d = match &mut args[k] {
                F(d) | C(d) | Ix(_, d, _) | Iv(_, d, _) | B(d) | Var(d) => d,
            };
            let how = r.below(4);
            match how {
                0 if !d.is_empty() => {
                    let i = r.below(d.len());
                    d[i] = r.pick(&[0, d[i] + 1, d[i].saturating_sub(1)]);
                }
                1 => d.push(r.pick(&[1, 2])),
                2 if !d.is_empty() => {
                    d.remove(r.below(d.len()));
                }
                _ => d.iter_mut().for_each(|x| *x = 0),
            }
            // explicit values no longer fit: draw them
            if let Iv(dt, d, _) = &args[k] {
                args[k] = Ix(*dt, d.clone(), 4);
            }
            format!("dims of operand {k} changed")
        }
        2 if !args.is_empty() => {
            let v = r.pick(INTS);
            match &mut args[k] {
                Iv(_, _, vals) if !vals.is_empty() => {
                    let i = r.below(vals.len());
                    vals[i] = v;
                }
                Ix(_, _, hi) => *hi = v.max(1),
                _ => return String::new(),
            }
            format!("an integer of operand {k} made {v}")
        }
        3 if !args.is_empty() => {
            let dt = r.pick(&[I32, I64, DType::Bool, DType::Float32, DType::Complex128]);
            let d = match &args[k] {
                F(d) | C(d) | Ix(_, d, _) | Iv(_, d, _) | B(d) | Var(d) => d.clone(),
            };
            args[k] = match dt {
                DType::Bool => B(d),
                DType::Float32 | DType::Complex128 => C(d),
                _ => Ix(dt, d, 3),
            };
            format!("operand {k} made {dt:?}")
        }
        4 => {
            let defs = lookup(op).unwrap().attrs;
            if defs.is_empty() {
                return String::new();
            }
            let a = r.pick(defs);
            let v = attr(r, a.kind);
            attrs.retain(|(n, _)| *n != a.name);
            attrs.push((a.name, v.clone()));
            format!("attr {} = {v:?}", a.name)
        }
        5 if !args.is_empty() => {
            args.remove(k);
            format!("operand {k} dropped")
        }
        _ if !args.is_empty() => {
            args.insert(k, args[k].clone());
            format!("operand {k} repeated")
        }
        _ => String::new(),
    }
}

/// A template's operands made tensors of the case's float dtype and added to `g`; a float
/// is odd (NaN, an infinity, ...) with chance `odd`.
fn build_args(r: &mut Rng, g: &mut Graph, feeds: &mut Vec<(Output, Tensor)>, args: &[Arg], odd: f64, what: &mut String) -> Vec<Output> {
    let f = if r.chance(0.5) { DType::Float32 } else { DType::Float64 };
    let c = if f == DType::Float32 { DType::Complex64 } else { DType::Complex128 };
    args.iter()
        .map(|a| match a {
            F(d) => {
                let t = tensor_with(r, f, d, odd);
                operand(r, g, feeds, t, what)
            }
            C(d) => {
                let t = tensor_with(r, c, d, odd);
                operand(r, g, feeds, t, what)
            }
            B(d) => {
                let t = tensor(r, DType::Bool, d);
                operand(r, g, feeds, t, what)
            }
            Ix(dt, d, hi) => {
                let n: usize = d.iter().product();
                let v: Vec<i64> = (0..n).map(|_| (r.next_u64() % (*hi).max(1) as u64) as i64).collect();
                let t = ints_tensor(*dt, d, v);
                operand(r, g, feeds, t, what)
            }
            Iv(dt, d, v) => {
                let t = ints_tensor(*dt, d, v.clone());
                operand(r, g, feeds, t, what)
            }
            Var(d) => {
                let t = tensor_with(r, f, d, odd);
                *what += &format!("Variable {f:?} {d:?}, ");
                Output::new(g.variable(t, None, true).unwrap(), 0)
            }
        })
        .collect()
}

/// `v` as a row-major tensor of `dt` (an integer or float type).
fn ints_tensor(dt: DType, d: &[usize], v: Vec<i64>) -> Tensor {
    let layout = Layout::RowMajor;
    match dt {
        DType::Int32 => Tensor::from_vec(d, v.iter().map(|&x| x as i32).collect(), layout),
        DType::Int64 => Tensor::from_vec(d, v, layout),
        DType::Float32 => Tensor::from_vec(d, v.iter().map(|&x| x as f32).collect(), layout),
        _ => Tensor::from_vec(d, v.iter().map(|&x| x as f64).collect(), layout),
    }
    .unwrap()
}

#[test]
fn templates_survive_mutations() {
    let ts = templates();
    let names: Vec<&'static str> = ts.iter().map(|t| t.0).collect();
    let failures = fuzz(0x5eed_7e57, &names, true, |k, i, r, desc, why| {
        let (op, args, attrs) = &ts[k];
        let (mut args, mut attrs) = (args.clone(), attrs.clone());
        // the first case as written (`Const` operands, ordinary values), then one or two
        // spoilings each
        for _ in 0..if i == 0 { 0 } else { 1 + r.below(2) } {
            let how = mutate(r, op, &mut args, &mut attrs);
            if !how.is_empty() {
                *desc += &how;
                *desc += "; ";
            }
        }
        if i == 0 {
            *desc += AS_WRITTEN;
        }
        *desc += &format!("{op}(");
        let (mut g, mut feeds) = (Graph::new(), Vec::new());
        let inputs = build_args(r, &mut g, &mut feeds, &args, if i == 0 { 0.0 } else { 0.1 }, desc);
        let mut spec = NodeSpec::new(op, &inputs);
        for (n, v) in &attrs {
            *desc += &format!("{n}={v:?}, ");
            spec = spec.attr(n, v.clone());
        }
        *desc += ")";
        execute(r, g, feeds, spec, desc, why)
    });
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// The gradient kernels of `Dtw` and `OtNetwork`, built by hand (the C API can name any
/// op) with operands that do not fit, are refused when the node is built, naming the op:
/// their kernels used to index past the operands.
#[test]
fn hand_made_gradient_ops_check_their_operands() {
    // not while a fuzz test's panic hook would take this test's failure for its own
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut g = Graph::new();
    let v = |g: &mut Graph, d: &[usize]| g.constant(Tensor::filled(DType::Float64, d, 1.0)).unwrap();
    let (s, t, scalar, m) = (v(&mut g, &[4]), v(&mut g, &[3]), v(&mut g, &[]), v(&mut g, &[2, 3]));
    let path = g.constant(Tensor::from_vec(&[2, 2], vec![0i64, 0, 1, 1], Layout::RowMajor).unwrap()).unwrap();
    let wide = v(&mut g, &[2, 3]);
    for (op, inputs, what) in [
        ("DtwGrad", vec![m, s, t, path], "dcost must be a scalar"),
        ("DtwGrad", vec![scalar, s, t, wide], "path must be Int64 [k, 2]"),
        ("DtwGrad", vec![scalar, m, t, path], "s must be a vector"),
        ("OtNetworkGrad", vec![m, scalar, s, m, path], "M must be a matrix"),
        ("OtNetworkGrad", vec![s, scalar, m, m, path], "dP must have M's shape"),
        ("OtNetworkGrad", vec![m, m, m, m, path], "dloss must be a Float64 scalar"),
        ("OtNetworkGrad", vec![m, scalar, m, m, wide], "basis must be Int64 [k, 2]"),
    ] {
        let e = g.op_spec(NodeSpec::new(op, &inputs)).unwrap_err().to_string();
        assert!(e.contains(op) && e.contains(what), "{op}: {e}");
    }
    // fitting operands build
    g.op_spec(NodeSpec::new("DtwGrad", &[scalar, s, t, path])).unwrap();
    g.op_spec(NodeSpec::new("OtNetworkGrad", &[m, scalar, m, m, path])).unwrap();
}
