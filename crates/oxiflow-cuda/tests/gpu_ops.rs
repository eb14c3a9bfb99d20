//! Every compute op on a real GPU against its CPU kernel: each case builds a one-op graph
//! (placeholders, and variables for the training ops), runs the op's CPU kernel and its
//! CUDA launcher ([`oxiflow_cuda::launch::launcher`]) on the same small random inputs, and
//! compares: relative tolerance 1e-5 for Float32 and 1e-12 for Float64 (with a magnitude
//! floor of 1, i.e. `|gpu - cpu| <= tol * max(|cpu|, 1)`), exact for integers and Bool,
//! NaN equal to NaN; an output element the launch never wrote fails whatever its expected
//! value (buffers start as 0xAB bytes, `common/gpu_harness.rs`). Float32 `Sum`, `Mean` and
//! `Prod` are compared with the CPU kernel run on the same values in Float64 and rounded:
//! the CPU's sequential Float32 sum of 10^5 elements is itself off by about 1e-5, while the
//! GPU's tree sum is within a few ulp of the exact result. Random ops are checked by their
//! moments instead (their GPU stream is Philox, the CPU's ChaCha).
//!
//! Every (op, kernel dtype) pair the registry launches on a GPU has cases here (the
//! movement family's are in `gpu_movement.rs`): the unary and broadcasting binary cases
//! take their ops from the registry's launch families, so a new op of those families is
//! compared without an edit here, and [`every_launched_op_matches_the_cpu`] runs every
//! group and fails naming any (op, dtype) pair the registry flags for a GPU kernel and no
//! case covered. That record is made as the cases are built, so it is checked on every
//! machine.
//!
//! The test starts at [`oxiflow_cuda::testing::gpu_or_skip`]: it skips only where no CUDA
//! driver or GPU exists, and then still builds each case's graph and runs its CPU kernel
//! (so the cases themselves are checked on every machine).

#[path = "common/gpu_harness.rs"]
mod harness;

use harness::{compare, first_unwritten, float_tensor, gpu, missing_pairs, record_case, run_cpu, run_gpu, values, Gpu, Rng, State};
use oxiflow_core::ops::{lookup, AttrValue, GpuLaunch, StateAccess};
use oxiflow_core::{DType, Graph, Layout, NodeId, NodeSpec, Output, Tensor};
use oxiflow_cuda::kernels::{entry_dtypes, ops_launched_as};

const TEST: &str = "every_launched_op_matches_the_cpu";

/// One case: `op` with `attrs` on placeholders fed `inputs`; CPU and GPU outputs compared.
fn check(g: Option<&Gpu>, failures: &mut Vec<String>, op: &str, attrs: &[(&str, AttrValue)], inputs: &[Tensor]) {
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
    let in_types: Vec<DType> = inputs.iter().map(Tensor::dtype).collect();
    record_case(op, &in_types, &node.outputs.iter().map(|t| t.dtype).collect::<Vec<_>>());
    let f32_in = inputs.iter().any(|t| t.dtype() == DType::Float32);
    let cpu = if f32_in && matches!(op, "Sum" | "Mean" | "Prod") { cpu_in_f64(op, attrs, inputs) } else { run_cpu(node, inputs, &State::default()) };
    let Some(g) = g else { return };
    match run_gpu(g, node, inputs) {
        Err(e) => failures.push(format!("{what}: GPU: {e}")),
        Ok((gpu, _)) => {
            for (k, (c, d)) in cpu.iter().zip(&gpu).enumerate() {
                if let Some(m) = compare(c, d) {
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

/// A group's failures, each line prefixed by the group's name (the test reports every
/// group's at once, so one GPU run shows all of them).
fn finish(name: &str, failures: Vec<String>) -> Vec<String> {
    failures.into_iter().map(|m| format!("{name}: {m}")).collect()
}

const FLOATS: [DType; 2] = [DType::Float32, DType::Float64];

// ------------------------------------------------------------------ cases

fn unary_ops_match_the_cpu(g: Option<&Gpu>) -> Vec<String> {
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
        // NaN, infinities, signed zeros and overflowing magnitudes through every op of the
        // family (TF's Relu keeps NaN; clamps, selects and max-like steps are where a NaN is
        // easily lost), alone and tiled so the unrolled loops see them too
        let special = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0, 7.0, -7.0, 800.0, -800.0];
        let tiled: Vec<f64> = special.iter().copied().cycle().take(37 * 9).collect();
        for t in [float_tensor(d, &[9], &special), float_tensor(d, &[37, 9], &tiled)] {
            for &(op, _, _) in &ops {
                check(g, &mut f, op, &[], std::slice::from_ref(&t));
            }
            check(g, &mut f, "LeakyRelu", &[], std::slice::from_ref(&t));
        }
    }
    finish("unary", f)
}

fn casts_match_the_cpu(g: Option<&Gpu>) -> Vec<String> {
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
    finish("cast", f)
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

fn broadcasting_binary_ops_and_comparisons_match_the_cpu(g: Option<&Gpu>) -> Vec<String> {
    let mut f = Vec::new();
    let mut rng = Rng(3);
    // every broadcasting op of the registry's Binary family (the activation gradients,
    // which take operands of one shape, follow)
    let same_shape = ["TanhGrad", "SigmoidGrad", "ReluGrad"];
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
        }
    }
    // every pair of special values (NaN on either side and both, infinities, signed zeros,
    // overflow) through every op of the family: NaN propagation of Maximum/Minimum, IEEE
    // comparisons, Pow's and FloorMod's special cases; operands of one shape [9, 9]
    let special = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -0.0, 7.0, -7.0, 800.0, -800.0];
    let rows: Vec<f64> = special.iter().flat_map(|&a| [a; 9]).collect();
    let cols: Vec<f64> = special.iter().copied().cycle().take(81).collect();
    for op in ops_launched_as(GpuLaunch::Binary) {
        for d in FLOATS {
            check(g, &mut f, op, &[], &[float_tensor(d, &[9, 9], &rows), float_tensor(d, &[9, 9], &cols)]);
        }
    }
    // the ops with an Int64 kernel (TF's int64 GPU arithmetic and comparisons): small
    // values (ties for the comparisons and extrema) on every shape pair, then every pair of
    // edge values, where Add, Sub and Mul wrap around as the CPU kernels do
    let int64_ops: Vec<&str> = ops_launched_as(GpuLaunch::Binary).into_iter().filter(|op| entry_dtypes(lookup(op).unwrap()).contains(&DType::Int64)).collect();
    assert!(int64_ops.len() >= 10, "the binary ops with Int64 GPU kernels: {int64_ops:?}");
    let edges = [i64::MAX, i64::MIN, i64::MAX - 1, i64::MIN + 1, 1 << 40, -(1 << 40), 3_037_000_500, 7, -7, 1, -1, 0];
    let n = edges.len();
    let rows: Vec<i64> = edges.iter().flat_map(|&a| vec![a; n]).collect();
    let cols: Vec<i64> = edges.iter().copied().cycle().take(n * n).collect();
    let int_tensor = |v: Vec<i64>| Tensor::from_vec(&[n, n], v, Layout::RowMajor).unwrap();
    for op in int64_ops {
        for &(a, b) in SHAPE_PAIRS {
            check(g, &mut f, op, &[], &[rng.tensor(DType::Int64, a, -3.0, 4.0), rng.tensor(DType::Int64, b, -3.0, 4.0)]);
        }
        check(g, &mut f, op, &[], &[int_tensor(rows.clone()), int_tensor(cols.clone())]);
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
        let mk = |v: &[f64]| float_tensor(d, &[v.len()], v);
        for op in ["FloorDiv", "FloorMod"] {
            check(g, &mut f, op, &[], &[mk(&x), mk(&y)]);
        }
    }
    finish("binary", f)
}

fn reductions_and_softmax_match_the_cpu(g: Option<&Gpu>) -> Vec<String> {
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
            // (Prod: signed powers of two, mostly ±1, whose products are exact in any order;
            // a product of 10^5 values near 1 is off by ~1e-4 in Float32 from rounding alone)
            for (dims, axes) in [(&[2000usize, 300][..], &[0i64][..]), (&[2000, 300], &[1]), (&[2000, 300], &[]), (&[100_000], &[0]), (&[7, 9000, 3], &[1])] {
                let x = if op == "Prod" { rng.exact_factors(d, dims) } else { rng.tensor(d, dims, 0.5, 1.5) };
                check(g, &mut f, op, &[("axis", AttrValue::Ints(axes.to_vec()))], &[x]);
            }
            let mut v = values(&rng.tensor(DType::Float64, &[6, 50], 0.5, 1.5));
            v[77] = f64::NAN;
            let t = float_tensor(d, &[6, 50], &v);
            for axes in [&[0i64][..], &[1], &[]] {
                check(g, &mut f, op, &[("axis", AttrValue::Ints(axes.to_vec()))], std::slice::from_ref(&t));
            }
            // empty groups: every output element is the identity (Mean: 0/0), written by
            // the kernel, not left from a zeroed buffer
            for (dims, axes) in [(&[3usize, 0][..], &[1i64][..]), (&[0, 4], &[0]), (&[3, 0], &[])] {
                check(g, &mut f, op, &[("axis", AttrValue::Ints(axes.to_vec()))], &[rng.tensor(d, dims, lo, hi)]);
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
                check(g, &mut f, op, &[("axis", AttrValue::Int(1))], &[float_tensor(d, &[1, 4], &lane)]);
            }
        }
    }
    for d in FLOATS {
        for dims in [&[5usize][..], &[4, 7], &[3, 1000], &[2, 3, 300], &[1000, 2]] {
            check(g, &mut f, "Softmax", &[], &[rng.tensor(d, dims, -20.0, 20.0)]);
        }
        // rows holding a NaN, an infinity of either sign, only -inf, and no special value
        let inf = f64::INFINITY;
        let rows = [[1.0, f64::NAN, 2.0, 3.0], [1.0, inf, 2.0, 3.0], [1.0, -inf, 2.0, 3.0], [-inf; 4], [0.0, -0.0, 7.0, -7.0]];
        check(g, &mut f, "Softmax", &[], &[float_tensor(d, &[5, 4], rows.as_flattened())]);
        // the fused loss: labels as probability-like weights, the MLP's 256 x 10, a row wider
        // than a block, rank 1 and 3, no classes; then the special rows
        for dims in [&[5usize][..], &[256, 10], &[3, 1000], &[2, 3, 7], &[4, 0]] {
            let (x, l) = (rng.tensor(d, dims, -20.0, 20.0), rng.tensor(d, dims, 0.0, 1.0));
            check(g, &mut f, "SoftmaxCrossEntropyWithLogits", &[], &[x, l]);
        }
        let labels = float_tensor(d, &[5, 4], &[0.25; 20]);
        check(g, &mut f, "SoftmaxCrossEntropyWithLogits", &[], &[float_tensor(d, &[5, 4], rows.as_flattened()), labels]);
    }
    finish("reductions", f)
}

fn products_match_the_cpu(g: Option<&Gpu>) -> Vec<String> {
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
    finish("products", f)
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
    let in_types: Vec<DType> = inputs.iter().map(Tensor::dtype).collect();
    record_case(op, &in_types, &node.outputs.iter().map(|t| t.dtype).collect::<Vec<_>>());
    let state = State::default();
    for (id, t) in var_ids.iter().zip(vars) {
        state.assign_variable(*id, t.clone()).unwrap();
    }
    let cpu_out = run_cpu(node, &inputs, &state);
    let Some(g) = g else { return };
    match run_gpu(g, node, &inputs) {
        Err(e) => f.push(format!("{what}: GPU: {e}")),
        Ok((gpu_out, gpu_ins)) => {
            if let Some(m) = compare(&cpu_out[0], &gpu_out[0]) {
                f.push(format!("{what} output: {m}"));
            }
            for (k, o) in order.iter().enumerate() {
                if let Ok(i) = o {
                    let cpu_v = state.read_variable(var_ids[*i]).unwrap();
                    if let Some(m) = compare(&cpu_v, &gpu_ins[k]) {
                        f.push(format!("{what} variable/slot {i}: {m}"));
                    }
                }
            }
        }
    }
}

fn training_updates_match_the_cpu(g: Option<&Gpu>) -> Vec<String> {
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
    finish("training", f)
}

fn random_ops_have_the_right_moments_and_fresh_streams(g: Option<&Gpu>) -> Vec<String> {
    let mut f = Vec::new();
    for op in ["RandomUniform", "RandomStandardNormal"] {
        for d in FLOATS {
            let mut graph = Graph::new();
            let n = 200_001usize;
            let spec = NodeSpec::new(op, &[]).attr("shape", AttrValue::Shape(vec![n])).attr("dtype", d).attr("seed", 7i64).attr("seed2", 3i64);
            let id = graph.op_spec(spec).unwrap().node;
            let node = graph.node(id).unwrap();
            record_case(op, &[], &[node.outputs[0].dtype]);
            let Some(g) = g else { continue };
            let (ra, rb) = (run_gpu(g, node, &[]).unwrap().0.remove(0), run_gpu(g, node, &[]).unwrap().0.remove(0));
            if let Some(i) = first_unwritten(&ra, d.size_of()) {
                f.push(format!("{op} {d}: element {i} was never written"));
            }
            let (a, b) = (values(&ra.tensor), values(&rb.tensor));
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
    finish("random", f)
}

/// Every case group above, one after another (they share the one GPU stream), then the
/// coverage rule: each (op, kernel dtype) pair the registry flags for a GPU kernel, except
/// the movement family's (`gpu_movement.rs`), was covered by some case. The record is made
/// as each case's graph is built, so the rule is checked with or without a GPU.
#[test]
fn every_launched_op_matches_the_cpu() {
    let g = gpu(TEST);
    let failures = [
        unary_ops_match_the_cpu(g),
        casts_match_the_cpu(g),
        broadcasting_binary_ops_and_comparisons_match_the_cpu(g),
        reductions_and_softmax_match_the_cpu(g),
        products_match_the_cpu(g),
        training_updates_match_the_cpu(g),
        random_ops_have_the_right_moments_and_fresh_streams(g),
    ]
    .concat();
    let missing = missing_pairs();
    assert!(
        failures.is_empty() && missing.is_empty(),
        "{} GPU/CPU mismatches:\n{}\n(op, dtype) pairs the registry flags for a GPU kernel and no case in gpu_ops.rs covers: {missing:?}",
        failures.len(),
        failures.join("\n")
    );
    println!(
        "{} (op, dtype) pairs checked against their CPU kernels{}",
        harness::required_pairs().len(),
        if g.is_some() { "" } else { " (CPU side only: no GPU)" }
    );
}
