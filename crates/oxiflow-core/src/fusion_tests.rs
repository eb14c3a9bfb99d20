//! Fused plans against unfused ones: the same bits for random elementwise graphs (with
//! non-fusable ops between fusable ones, the case that could make a cycle), an acyclic unit
//! order, large tensors split over tiles and threads, GPU ops left alone, and profiles that
//! name the replaced ops.

use super::*;
use crate::ops::fused::{Fn1, ProgramBuilder};
use crate::session::{Session, SessionOptions};
use crate::tensor::{Layout, Tensor};
use std::sync::{Arc, RwLock};

/// xorshift64*: deterministic choices.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() >> 33) as usize % n
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn tensor(dtype: DType, dims: &[usize], rng: &mut Rng) -> Tensor {
    let v: Vec<f64> = (0..dims.iter().product::<usize>()).map(|_| rng.unit() * 4.0 - 2.0).collect();
    match dtype {
        DType::Float32 => Tensor::from_vec(dims, v.into_iter().map(|x| x as f32).collect(), Layout::RowMajor).unwrap(),
        _ => Tensor::from_vec(dims, v, Layout::RowMajor).unwrap(),
    }
}

/// A session over `g` (shared: two sessions compare fused and unfused runs of one graph).
fn session(g: &Arc<RwLock<Graph>>, fusion: bool, gpus: usize) -> Session {
    // every size fused, so the tile and thread paths are tested too
    let o = SessionOptions {
        fusion: Some(fusion),
        fusion_max_elements: Some(usize::MAX),
        emulated_gpus: Some(gpus),
        intra_op_threads: Some(2),
        ..Default::default()
    };
    Session::new(g.clone(), o).unwrap()
}

/// Bits of a float tensor, every NaN as one value (IEEE leaves a NaN's sign and payload to
/// the hardware, and the compiler may swap the operands of a commutative op).
fn bits(t: &Tensor) -> Vec<u64> {
    match t {
        Tensor::F32(a) => a.iter().map(|x| if x.is_nan() { u64::MAX } else { x.to_bits() as u64 }).collect(),
        Tensor::F64(a) => a.iter().map(|x| if x.is_nan() { u64::MAX } else { x.to_bits() }).collect(),
        _ => panic!("float tensors only"),
    }
}

/// A random graph of elementwise ops over two `dims` placeholders and one scalar, with
/// `Sum`s (not fusable: a reduction) and scalar constants mixed in; returns the graph, its
/// feeds and a random set of fetches (the last node always among them).
fn random_graph(seed: u64, dtype: DType, dims: &[usize]) -> (Graph, Vec<(Output, Tensor)>, Vec<Output>) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut g = Graph::new();
    let mut full = Vec::new();
    let mut scalars = Vec::new();
    let mut feeds = Vec::new();
    for k in 0..2 {
        let p = g.placeholder(dtype, dims, Some(&format!("x{k}"))).unwrap();
        feeds.push((p, tensor(dtype, dims, &mut rng)));
        full.push(p);
    }
    let s = g.placeholder(dtype, &[], Some("s")).unwrap();
    feeds.push((s, tensor(dtype, &[], &mut rng)));
    scalars.push(s);
    const UNARY: [&str; 12] = ["Sin", "Cos", "Exp", "Tanh", "Sigmoid", "Relu", "Neg", "Square", "Abs", "Tan", "Floor", "OnesLike"];
    const BINARY: [&str; 7] = ["Add", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "Pow"];
    for _ in 0..30 {
        let pick = |rng: &mut Rng, v: &Vec<Output>| v[v.len() - 1 - rng.below(v.len().min(4))];
        let y = match rng.below(10) {
            0..=3 => {
                let x = pick(&mut rng, &full);
                let op = UNARY[rng.below(UNARY.len())];
                g.op(op, &[x]).unwrap()
            }
            4 => {
                let x = pick(&mut rng, &full);
                let sq = g.op("Square", &[x]).unwrap();
                let one = g.constant(Tensor::from_vec(&[], vec![1.0f64], Layout::RowMajor).unwrap()).unwrap();
                let one = if dtype == DType::Float32 { g.op_spec(crate::graph::NodeSpec::new("Cast", &[one]).attr("DstT", dtype)).unwrap() } else { one };
                let a = g.op("Add", &[sq, one]).unwrap();
                g.op(if rng.below(2) == 0 { "Log" } else { "Sqrt" }, &[a]).unwrap()
            }
            5..=7 => {
                let a = pick(&mut rng, &full);
                let b = if rng.below(3) == 0 { pick(&mut rng, &scalars) } else { pick(&mut rng, &full) };
                let (a, b) = if rng.below(2) == 0 { (a, b) } else { (b, a) };
                match BINARY[rng.below(BINARY.len())] {
                    // a base in (0, 1): no NaN from negative bases
                    "Pow" => {
                        let base = g.op("Sigmoid", &[a]).unwrap();
                        g.op("Pow", &[base, b]).unwrap()
                    }
                    op => g.op(op, &[a, b]).unwrap(),
                }
            }
            8 if rng.below(3) == 0 => {
                // the activation gradients take two operands of one shape
                let (y, dy) = (pick(&mut rng, &full), pick(&mut rng, &full));
                g.op(["TanhGrad", "SigmoidGrad", "ReluGrad"][rng.below(3)], &[y, dy]).unwrap()
            }
            8 => {
                let xs: Vec<Output> = (0..3).map(|_| pick(&mut rng, &full)).collect();
                g.op("AddN", &xs).unwrap()
            }
            _ => {
                // a reduction to a scalar, read back by elementwise ops
                let x = pick(&mut rng, &full);
                let r = g.op_spec(crate::graph::NodeSpec::new("Sum", &[x]).attr("axis", (0..dims.len() as i64).collect::<Vec<_>>())).unwrap();
                scalars.push(r);
                let b = pick(&mut rng, &full);
                g.op("Mul", &[b, r]).unwrap()
            }
        };
        full.push(y);
    }
    let mut fetches: Vec<Output> = full[3..].iter().copied().filter(|_| rng.below(4) == 0).collect();
    fetches.push(*full.last().unwrap());
    (g, feeds, fetches)
}

fn run(s: &Session, feeds: &[(Output, Tensor)], fetches: &[Output]) -> (Vec<Tensor>, crate::profile::StepStats) {
    let r = s.run(feeds, fetches, &[], true).unwrap();
    (r.values, r.step_stats.unwrap())
}

fn fused_steps(st: &crate::profile::StepStats) -> usize {
    st.labels.iter().filter(|l| l.op == "_FusedElementwise").count()
}

#[test]
fn random_elementwise_graphs_give_the_unfused_bits() {
    let (mut fused_total, mut values, mut finite) = (0, 0, 0);
    for seed in 0..40u64 {
        let mut cases = vec![(DType::Float64, vec![3usize, 5]), (DType::Float32, vec![7]), (DType::Float64, vec![])];
        if seed < 8 {
            // several tiles, split over two threads
            cases.push((DType::Float32, vec![70, 300]));
        }
        for (dtype, dims) in cases {
            let (g, feeds, fetches) = random_graph(seed, dtype, &dims);
            let g = Arc::new(RwLock::new(g));
            let (a, _) = run(&session(&g, false, 0), &feeds, &fetches);
            let s = session(&g, true, 0);
            let (b, st) = run(&s, &feeds, &fetches);
            fused_total += fused_steps(&st);
            values += b.iter().map(|t| t.to_f64_vec().len()).sum::<usize>();
            finite += b.iter().map(|t| t.to_f64_vec().iter().filter(|x| x.is_finite()).count()).sum::<usize>();
            for (k, (x, y)) in a.iter().zip(&b).enumerate() {
                assert_eq!(x.dims(), y.dims());
                assert!(bits(x) == bits(y), "seed {seed}, {dtype:?} {dims:?}: fetch {k} differs fused ({:?}) and unfused ({:?})", y, x);
            }
            // a second run of the cached fused plan gives the same again
            let (c, _) = run(&s, &feeds, &fetches);
            assert!(b.iter().zip(&c).all(|(x, y)| bits(x) == bits(y)), "seed {seed}: second run differs");
        }
    }
    assert!(fused_total > 100, "the random graphs fused only {fused_total} clusters");
    assert!(finite * 10 > values * 7, "only {finite} of {values} values are finite: the comparison says little");
}

#[test]
fn unit_order_runs_every_unit_after_what_it_reads() {
    for seed in 0..60u64 {
        let (g, feeds, fetches) = random_graph(seed, DType::Float64, &[4]);
        let fed: HashSet<Output> = feeds.iter().map(|(o, _)| *o).collect();
        let needed = crate::eval::needed_nodes(&g, &fetches, &[], &fed).unwrap();
        let f = fuse(&g, &needed, &|_| 0, &|_| true, &fed, &fetches, usize::MAX);
        let mut pos: HashMap<NodeId, usize> = HashMap::new();
        for (i, u) in f.order.iter().enumerate() {
            match *u {
                Unit::Node(id) => pos.insert(id, i),
                Unit::Cluster(c) => f.clusters[c].members.iter().map(|&m| pos.insert(m, i)).last().flatten(),
            };
        }
        assert_eq!(pos.len(), needed.len(), "seed {seed}: every needed node is in exactly one unit");
        for (i, u) in f.order.iter().enumerate() {
            let reads: Vec<Output> = match *u {
                Unit::Node(id) => g.nodes()[id].inputs.clone(),
                Unit::Cluster(c) => f.clusters[c].inputs.clone(),
            };
            for o in reads.iter().filter(|o| !fed.contains(o)) {
                assert!(pos[&o.node] < i, "seed {seed}: unit {i} reads {o:?} from unit {}", pos[&o.node]);
            }
        }
        // a cluster's outputs are exactly its members read elsewhere or fetched
        for cl in &f.clusters {
            for &m in &cl.members {
                let o = Output::new(m, 0);
                let read_outside = needed.iter().any(|&n| pos[&n] != pos[&m] && g.nodes()[n].inputs.contains(&o));
                assert_eq!(cl.outputs.contains(&o), read_outside || fetches.contains(&o), "seed {seed}: output set of a cluster");
            }
        }
    }
}

#[test]
fn large_tensors_over_tiles_and_threads_and_a_strided_input() {
    for dtype in [DType::Float32, DType::Float64] {
        let mut g = Graph::new();
        let mut rng = Rng(7);
        let x = g.placeholder(dtype, &[1000, 301], Some("x")).unwrap();
        let s = g.placeholder(dtype, &[], Some("s")).unwrap();
        // a transposed operand (Transpose's output may be a strided view)
        let xt = g.op_spec(crate::graph::NodeSpec::new("Transpose", &[x]).attr("perm", vec![1i64, 0])).unwrap();
        let a = g.op("Tanh", &[xt]).unwrap();
        let b = g.op("Mul", &[a, s]).unwrap();
        let c = g.op("Exp", &[b]).unwrap();
        let d = g.op("Sub", &[c, xt]).unwrap();
        let e = g.op("Sigmoid", &[d]).unwrap();
        let f = g.op("AddN", &[e, a, d]).unwrap();
        let feeds = vec![(x, tensor(dtype, &[1000, 301], &mut rng)), (s, tensor(dtype, &[], &mut rng))];
        let fetches = [f, c, a];
        let g = Arc::new(RwLock::new(g));
        let (want, _) = run(&session(&g, false, 0), &feeds, &fetches);
        let (got, st) = run(&session(&g, true, 0), &feeds, &fetches);
        assert_eq!(fused_steps(&st), 1, "{dtype:?}: one fused step");
        for (k, (w, y)) in want.iter().zip(&got).enumerate() {
            assert_eq!(w.dims(), &[301, 1000]);
            assert!(bits(w) == bits(y), "{dtype:?}: fetch {k} differs");
        }
    }
}

#[test]
fn column_major_inputs_run_in_memory_order_and_mixed_layouts_in_row_order() {
    // Tensors fed from Julia are column-major: a cluster whose full inputs all are runs over
    // their memory and gives column-major outputs; with mixed layouts the others are copied.
    let (m, n) = (40, 70);
    let col = |t: &Tensor| {
        let v = t.to_f64_vec();
        Tensor::from_vec(&[m, n], (0..m * n).map(|k| v[(k % m) * n + k / m]).collect::<Vec<f64>>(), Layout::ColumnMajor).unwrap()
    };
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[m, n], Some("x")).unwrap();
    let y = g.placeholder(DType::Float64, &[m, n], Some("y")).unwrap();
    let a = g.op("Tanh", &[x]).unwrap();
    let b = g.op("Mul", &[a, y]).unwrap();
    let e = g.op("Exp", &[b]).unwrap();
    let z = g.op("Sub", &[e, y]).unwrap();
    let g = Arc::new(RwLock::new(g));
    let (xr, yr) = (tensor(DType::Float64, &[m, n], &mut Rng(11)), tensor(DType::Float64, &[m, n], &mut Rng(12)));
    let (want, _) = run(&session(&g, false, 0), &[(x, xr.clone()), (y, yr.clone())], &[z]);
    let s = session(&g, true, 0);
    for (fx, fy, column) in [(col(&xr), col(&yr), true), (col(&xr), yr.clone(), false), (xr.clone(), col(&yr), false)] {
        let (got, st) = run(&s, &[(x, fx), (y, fy)], &[z]);
        assert_eq!(fused_steps(&st), 1);
        assert!(bits(&got[0]) == bits(&want[0]), "column inputs: {column}");
        let Tensor::F64(out) = &got[0] else { panic!("a Float64 output") };
        assert_eq!((out.t().is_standard_layout(), out.is_standard_layout()), (column, !column), "output layout");
    }
}

/// A `BroadcastTo` output (a view with a zero stride, as the softmax gradient's) and a
/// column-major tensor in one cluster: both are copied to row order first (row by row for a
/// matrix), with the unfused bits.
#[test]
fn a_broadcast_view_and_a_column_major_input_in_one_cluster() {
    let (m, n) = (256, 10);
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float32, &[m, n], Some("x")).unwrap();
    let w = g.placeholder(DType::Float32, &[m, 1], Some("w")).unwrap();
    let wb = g.op_spec(crate::graph::NodeSpec::new("BroadcastTo", &[w]).attr("shape", crate::ops::AttrValue::Shape(vec![m, n]))).unwrap();
    let e = g.op("Exp", &[x]).unwrap();
    let a = g.op("Mul", &[wb, e]).unwrap();
    let z = g.op("AddN", &[a, x]).unwrap();
    let g = Arc::new(RwLock::new(g));
    let xr = tensor(DType::Float32, &[m, n], &mut Rng(21));
    let v = xr.to_f64_vec();
    let xc = Tensor::from_vec(&[m, n], (0..m * n).map(|k| v[(k % m) * n + k / m] as f32).collect::<Vec<f32>>(), Layout::ColumnMajor).unwrap();
    let wr = tensor(DType::Float32, &[m, 1], &mut Rng(22));
    for xin in [xr.clone(), xc] {
        let feeds = [(x, xin), (w, wr.clone())];
        let (want, _) = run(&session(&g, false, 0), &feeds, &[z]);
        let (got, st) = run(&session(&g, true, 0), &feeds, &[z]);
        assert!(fused_steps(&st) >= 1);
        assert!(bits(&got[0]) == bits(&want[0]));
    }
}

#[test]
fn constants_built_after_a_clusters_first_op_join_it() {
    // Julia's `(1 .- tanh(x) .^ 2) .* y` builds each constant just before the op using it,
    // after `tanh`: a constant has no predecessor and must not split the cluster.
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[6], Some("x")).unwrap();
    let y = g.placeholder(DType::Float64, &[6], Some("y")).unwrap();
    let t = g.op("Tanh", &[x]).unwrap();
    let two = g.scalar(DType::Float64, 2.0).unwrap();
    let p = g.op("Pow", &[t, two]).unwrap();
    let one = g.scalar(DType::Float64, 1.0).unwrap();
    let d = g.op("Sub", &[one, p]).unwrap();
    let z = g.op("Mul", &[d, y]).unwrap();
    let g = Arc::new(RwLock::new(g));
    let mut rng = Rng(13);
    let feeds = vec![(x, tensor(DType::Float64, &[6], &mut rng)), (y, tensor(DType::Float64, &[6], &mut rng))];
    let (want, _) = run(&session(&g, false, 0), &feeds, &[z]);
    let (got, st) = run(&session(&g, true, 0), &feeds, &[z]);
    assert!(bits(&got[0]) == bits(&want[0]));
    let fused: Vec<&str> = st.labels.iter().flat_map(|l| l.fused.iter().map(|(_, op)| op.as_str())).collect();
    assert_eq!(fused, ["Tanh", "Pow", "Sub", "Mul"], "one cluster of the four ops");
}

#[test]
fn gpu_ops_stay_unfused_and_cpu_ops_fuse() {
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[8], Some("x")).unwrap();
    let a = g.op("Sin", &[x]).unwrap();
    let b = g.op("Cos", &[a]).unwrap();
    g.push_device(crate::graph::DeviceScope::Spec(crate::device::spec::DeviceSpec::parse("/cpu:0").unwrap()));
    let c = g.op("Exp", &[b]).unwrap();
    let d = g.op("Neg", &[c]).unwrap();
    g.pop_device().unwrap();
    let feeds = vec![(x, tensor(DType::Float64, &[8], &mut Rng(3)))];
    let g = Arc::new(RwLock::new(g));
    let s = session(&g, true, 1);
    let (got, st) = run(&s, &feeds, &[d]);
    let ops: Vec<(&str, &str)> = st.labels.iter().map(|l| (l.op.as_str(), l.node_name.as_str())).collect();
    assert!(ops.contains(&("Sin", "Sin")) && ops.contains(&("Cos", "Cos")), "GPU ops unfused: {ops:?}");
    let fused: Vec<_> = st.labels.iter().filter(|l| l.op == "_FusedElementwise").collect();
    assert_eq!(fused.len(), 1, "{ops:?}");
    assert!(fused[0].device.ends_with("CPU:0"));
    let (want, _) = run(&session(&g, false, 1), &feeds, &[d]);
    assert!(bits(&want[0]) == bits(&got[0]));
}

#[test]
fn a_fused_step_lists_the_ops_it_replaced() {
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float32, &[2, 2], Some("x")).unwrap();
    let a = g.op("Sin", &[x]).unwrap();
    let b = g.op("Cos", &[a]).unwrap();
    let c = g.op("Exp", &[b]).unwrap();
    let s = session(&Arc::new(RwLock::new(g)), true, 0);
    let (_, st) = run(&s, &[(x, tensor(DType::Float32, &[2, 2], &mut Rng(5)))], &[c]);
    let l = st.labels.iter().find(|l| l.op == "_FusedElementwise").expect("a fused step");
    assert_eq!(l.node_name, "Exp");
    assert_eq!(l.outputs, vec!["Exp".to_string()]);
    let names: Vec<(&str, &str)> = l.fused.iter().map(|(n, o)| (n.as_str(), o.as_str())).collect();
    assert_eq!(names, vec![("Sin", "Sin"), ("Cos", "Cos"), ("Exp", "Exp")]);
    let trace = st.chrome_trace();
    let ev = trace["traceEvents"].as_array().unwrap().iter().find(|e| e["args"]["op"] == "_FusedElementwise").expect("the fused event");
    assert_eq!(ev["args"]["fused_ops"], serde_json::json!(["Sin (Sin)", "Cos (Cos)", "Exp (Exp)"]));
    // the placement log still names the graph's nodes; the execution log its ops
    assert!(!st.labels.iter().any(|l| l.op == "Sin"));
}

#[test]
fn a_long_chain_needs_few_registers() {
    let mut b = ProgramBuilder::default();
    let mut v = b.input(true);
    for i in 0..1000 {
        v = b.unary(if i % 2 == 0 { Fn1::Sin } else { Fn1::Cos }, v);
    }
    b.output(v);
    let p = b.finish(1);
    assert_eq!(p.num_instrs(), 1000);
    assert!(p.num_regs() <= 2, "{} registers", p.num_regs());
}

#[test]
fn by_default_only_small_tensors_fuse() {
    for (dims, want) in [(vec![64usize, 64], 1), (vec![100, 100], 0)] {
        let mut g = Graph::new();
        let x = g.placeholder(DType::Float32, &dims, Some("x")).unwrap();
        let a = g.op("Tanh", &[x]).unwrap();
        let b = g.op("Square", &[a]).unwrap();
        let o = SessionOptions { emulated_gpus: Some(0), fusion: Some(true), ..Default::default() };
        let s = Session::new(Arc::new(RwLock::new(g)), o).unwrap();
        let (_, st) = run(&s, &[(x, tensor(DType::Float32, &dims, &mut Rng(9)))], &[b]);
        assert_eq!(fused_steps(&st), want, "{dims:?}");
    }
}
