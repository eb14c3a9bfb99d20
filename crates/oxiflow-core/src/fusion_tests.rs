//! Fused plans against unfused ones: the same bits for random elementwise graphs (with
//! non-fusable ops between fusable ones, the case that could make a cycle), an acyclic unit
//! order, large tensors split over tiles and threads, GPU ops left alone, and profiles that
//! name the replaced ops.

use super::*;
use crate::graph::NodeSpec;
use crate::ops::fused::{Fn1, ProgramBuilder};
use crate::session::{Session, SessionOptions};
use crate::tensor::{Layout, Tensor};
use std::sync::{Arc, RwLock};

/// xorshift64*: deterministic choices.
pub(super) struct Rng(pub(super) u64);
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

pub(super) fn tensor(dtype: DType, dims: &[usize], rng: &mut Rng) -> Tensor {
    let v: Vec<f64> = (0..dims.iter().product::<usize>()).map(|_| rng.unit() * 4.0 - 2.0).collect();
    match dtype {
        DType::Float32 => Tensor::from_vec(dims, v.into_iter().map(|x| x as f32).collect(), Layout::RowMajor).unwrap(),
        _ => Tensor::from_vec(dims, v, Layout::RowMajor).unwrap(),
    }
}

/// A session over `g` (shared: two sessions compare fused and unfused runs of one graph).
pub(super) fn session(g: &Arc<RwLock<Graph>>, fusion: bool, gpus: usize) -> Session {
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
pub(super) fn bits(t: &Tensor) -> Vec<u64> {
    match t {
        Tensor::F32(a) => a.iter().map(|x| if x.is_nan() { u64::MAX } else { x.to_bits() as u64 }).collect(),
        Tensor::F64(a) => a.iter().map(|x| if x.is_nan() { u64::MAX } else { x.to_bits() }).collect(),
        Tensor::Bool(a) => a.iter().map(|&b| b as u64).collect(),
        _ => panic!("float and bool tensors only"),
    }
}

/// A random graph of elementwise ops over two `dims` placeholders and one scalar, with
/// `Sum`s (not fusable: a reduction), their `BroadcastTo` and scalar constants mixed in, and
/// comparisons read by `SelectV2`s (conditions also from a fed Bool array and scalar);
/// returns the graph, its feeds and a random set of fetches (the last node always among
/// them, masks among the others).
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
    let mut masks = Vec::new();
    for (k, md) in [dims, &[][..]].into_iter().enumerate() {
        let m = g.placeholder(DType::Bool, md, Some(&format!("m{k}"))).unwrap();
        let bools: Vec<bool> = (0..md.iter().product::<usize>()).map(|_| rng.below(2) == 0).collect();
        feeds.push((m, Tensor::from_vec(md, bools, Layout::RowMajor).unwrap()));
        masks.push(m);
    }
    let mut mask_fetches = Vec::new();
    // a row and a column of a matrix shape, the operands of bias adds and row sums
    let mut vectors = Vec::new();
    if let &[m, n] = dims {
        for (k, vd) in [[1, n], [m, 1]].into_iter().enumerate() {
            let p = g.placeholder(dtype, &vd, Some(&format!("v{k}"))).unwrap();
            feeds.push((p, tensor(dtype, &vd, &mut rng)));
            vectors.push(p);
        }
    }
    const UNARY: [&str; 12] = ["Sin", "Cos", "Exp", "Tanh", "Sigmoid", "Relu", "Neg", "Square", "Abs", "Tan", "Floor", "OnesLike"];
    const BINARY: [&str; 7] = ["Add", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "Pow"];
    for _ in 0..30 {
        let pick = |rng: &mut Rng, v: &Vec<Output>| v[v.len() - 1 - rng.below(v.len().min(4))];
        let y = match rng.below(12) {
            10 | 11 => {
                // a comparison (of operands that may be equal: Equal has cases both ways)
                // then a select by it or by an older mask
                let a = pick(&mut rng, &full);
                let b = [pick(&mut rng, &full), pick(&mut rng, &scalars), a][rng.below(3)];
                let (a, b) = if rng.below(2) == 0 { (a, b) } else { (b, a) };
                let op = ["Greater", "GreaterEqual", "Less", "LessEqual", "Equal"][rng.below(5)];
                masks.push(g.op(op, &[a, b]).unwrap());
                if rng.below(4) == 0 {
                    mask_fetches.push(*masks.last().unwrap());
                }
                let c = pick(&mut rng, &masks);
                let (x, y) = (pick(&mut rng, &full), [pick(&mut rng, &full), pick(&mut rng, &scalars)][rng.below(2)]);
                let (x, y) = if rng.below(2) == 0 { (x, y) } else { (y, x) };
                g.op("SelectV2", &[c, x, y]).unwrap()
            }
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
                let b = match rng.below(6) {
                    0 | 1 => pick(&mut rng, &scalars),
                    2 if !vectors.is_empty() => vectors[rng.below(2)],
                    _ => pick(&mut rng, &full),
                };
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
                if rng.below(2) == 0 {
                    // the scalar broadcast to the full shape first (a `sum`'s gradient)
                    let rb = g.op_spec(crate::graph::NodeSpec::new("BroadcastTo", &[r]).attr("shape", crate::ops::AttrValue::Shape(dims.to_vec()))).unwrap();
                    g.op("Mul", &[rb, b]).unwrap()
                } else {
                    g.op("Mul", &[b, r]).unwrap()
                }
            }
        };
        full.push(y);
    }
    let mut fetches: Vec<Output> = full[3..].iter().copied().filter(|_| rng.below(4) == 0).collect();
    fetches.extend(mask_fetches);
    fetches.push(*full.last().unwrap());
    (g, feeds, fetches)
}

pub(super) fn run(s: &Session, feeds: &[(Output, Tensor)], fetches: &[Output]) -> (Vec<Tensor>, crate::profile::StepStats) {
    let r = s.run(feeds, fetches, &[], true).unwrap();
    (r.values, r.step_stats.unwrap())
}

pub(super) fn fused_steps(st: &crate::profile::StepStats) -> usize {
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
fn column_major_inputs_run_in_memory_order_and_outputs_keep_the_unfused_order() {
    // Tensors fed from Julia are column-major: a cluster whose full inputs all are runs over
    // their memory and gives column-major outputs; with mixed layouts the others are copied,
    // and each output has the order the unfused kernels give it (column-major once a
    // column-major operand meets a row-major one)
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
    // a second output that reads x alone: row-major when x is, whatever y is
    let w = g.op("Square", &[a]).unwrap();
    let g = Arc::new(RwLock::new(g));
    let (xr, yr) = (tensor(DType::Float64, &[m, n], &mut Rng(11)), tensor(DType::Float64, &[m, n], &mut Rng(12)));
    let s = session(&g, true, 0);
    let layout = |t: &Tensor| {
        let Tensor::F64(a) = t else { panic!("a Float64 output") };
        (a.t().is_standard_layout(), a.is_standard_layout())
    };
    // (x, y, z column-major, w column-major)
    for (fx, fy, zc, wc) in
        [(col(&xr), col(&yr), true, true), (col(&xr), yr.clone(), true, true), (xr.clone(), col(&yr), true, false), (xr.clone(), yr.clone(), false, false)]
    {
        let feeds = [(x, fx), (y, fy)];
        let (want, _) = run(&session(&g, false, 0), &feeds, &[z, w]);
        let (got, st) = run(&s, &feeds, &[z, w]);
        assert_eq!(fused_steps(&st), 1);
        for k in 0..2 {
            assert!(bits(&got[k]) == bits(&want[k]), "output {k}, column inputs {zc}/{wc}");
            assert_eq!(layout(&got[k]), layout(&want[k]), "output {k}: the unfused order");
        }
        assert_eq!(layout(&got[0]), (zc, !zc), "z's order");
        assert_eq!(layout(&got[1]), (wc, !wc), "w's order");
    }
}

#[test]
fn rows_and_columns_fuse_with_the_unfused_bits_and_order() {
    // `tanh(x .+ r) .* c`, `c .- _`, `r ./ x` with a bias row r [1, n] and a column c [m, 1]
    // (both in the tile's spread, not materialized), x in either order: one cluster, the
    // unfused bits, and each output in the order the unfused kernels give it
    let (m, n) = (300, 70);
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[m, n], Some("x")).unwrap();
    let r = g.placeholder(DType::Float64, &[1, n], Some("r")).unwrap();
    let c = g.placeholder(DType::Float64, &[m, 1], Some("c")).unwrap();
    let a = g.op("Add", &[x, r]).unwrap();
    let t = g.op("Tanh", &[a]).unwrap();
    let b = g.op("Mul", &[t, c]).unwrap();
    let z = g.op("Sub", &[c, b]).unwrap();
    let q = g.op("RealDiv", &[r, x]).unwrap();
    let w = g.op("Add", &[q, z]).unwrap();
    // a row next to a column alone (no operand of the output's shape) stays unfused
    let rc = g.op("Mul", &[r, c]).unwrap();
    let g = Arc::new(RwLock::new(g));
    let mut rng = Rng(23);
    let xr = tensor(DType::Float64, &[m, n], &mut rng);
    let xc = {
        let v = xr.to_f64_vec();
        Tensor::from_vec(&[m, n], (0..m * n).map(|k| v[(k % m) * n + k / m]).collect::<Vec<f64>>(), Layout::ColumnMajor).unwrap()
    };
    let (rv, cv) = (tensor(DType::Float64, &[1, n], &mut rng), tensor(DType::Float64, &[m, 1], &mut rng));
    let layout = |t: &Tensor| {
        let Tensor::F64(a) = t else { panic!("a Float64 output") };
        (a.t().is_standard_layout(), a.is_standard_layout())
    };
    for fx in [xr, xc] {
        let feeds = [(x, fx), (r, rv.clone()), (c, cv.clone())];
        let (want, _) = run(&session(&g, false, 0), &feeds, &[w, a, rc]);
        let (got, st) = run(&session(&g, true, 0), &feeds, &[w, a, rc]);
        let clusters: Vec<Vec<&str>> = st.labels.iter().filter(|l| !l.fused.is_empty()).map(|l| l.fused.iter().map(|(_, op)| op.as_str()).collect()).collect();
        assert_eq!(clusters, [vec!["Add", "Tanh", "Mul", "Sub", "RealDiv", "Add"]]);
        for k in 0..3 {
            assert!(bits(&got[k]) == bits(&want[k]), "output {k}");
            assert_eq!(layout(&got[k]), layout(&want[k]), "output {k}: the unfused order");
        }
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
fn sibling_clusters_merge_when_only_the_joining_op_reads_them() {
    // `x ^ (2 - 1) .* (2 .* broadcast(s))`, the gradient of `sum(x .^ 2)`: the power
    // (early, next to `x`) and the scaled seed (late, after the loss) are two clusters
    // until their product joins them. With `w` reading the power first, the power is read
    // outside its cluster and must stay out (`w` sits between the two clusters).
    for read_outside in [false, true] {
        let mut g = Graph::new();
        let x = g.placeholder(DType::Float64, &[6], Some("x")).unwrap();
        let s = g.placeholder(DType::Float64, &[], Some("s")).unwrap();
        let two = g.scalar(DType::Float64, 2.0).unwrap();
        let one = g.scalar(DType::Float64, 1.0).unwrap();
        let e = g.op("Sub", &[two, one]).unwrap();
        let p = g.op("Pow", &[x, e]).unwrap();
        let p = g.op("Neg", &[p]).unwrap();
        let w = if read_outside { g.op("Sum", &[p]).unwrap() } else { s };
        let b = g.op_spec(NodeSpec::new("BroadcastTo", &[w]).attr("shape", crate::ops::AttrValue::Shape(vec![6]))).unwrap();
        let m = g.op("Mul", &[b, two]).unwrap();
        let z = g.op("Mul", &[m, p]).unwrap();
        let g = Arc::new(RwLock::new(g));
        let mut rng = Rng(17);
        let feeds = vec![(x, tensor(DType::Float64, &[6], &mut rng)), (s, tensor(DType::Float64, &[], &mut rng))];
        let (want, _) = run(&session(&g, false, 0), &feeds, &[z]);
        let (got, st) = run(&session(&g, true, 0), &feeds, &[z]);
        assert!(bits(&got[0]) == bits(&want[0]), "read_outside {read_outside}");
        let clusters: Vec<Vec<&str>> = st.labels.iter().filter(|l| !l.fused.is_empty()).map(|l| l.fused.iter().map(|(_, op)| op.as_str()).collect()).collect();
        if read_outside {
            assert_eq!(clusters, [vec!["Pow", "Neg"], vec!["BroadcastTo", "Mul", "Mul"]], "the power's cluster is read by Sum");
        } else {
            assert_eq!(clusters, [vec!["Pow", "Neg", "BroadcastTo", "Mul", "Mul"]], "one cluster");
        }
    }
}

#[test]
fn powers_by_one_exponent_give_the_unfused_bits() {
    // a constant or fed one-element exponent takes one form of `pow` for the whole tile
    // (x^2 as x*x, x^1, x^0 = 1 even for NaN, x^0.5 by sqrt, x^-1, x^-0.5, x^3, else powf):
    // the same bits as the op's kernel
    let xs = vec![-2.5, -1.0, -0.0, 0.0, 0.3, 1.0, 7.25, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 1e-310, 3.0];
    for e in [2.0, 1.0, 0.0, -0.0, 0.5, -0.5, -1.0, -1.5, 3.0, f64::NAN] {
        for fed in [false, true] {
            let mut g = Graph::new();
            let x = g.placeholder(DType::Float64, &[xs.len()], Some("x")).unwrap();
            let ep = g.placeholder(DType::Float64, &[], Some("e")).unwrap();
            let ev = if fed { ep } else { g.scalar(DType::Float64, e).unwrap() };
            let n = g.op("Neg", &[x]).unwrap();
            let p = g.op("Pow", &[n, ev]).unwrap();
            let z = g.op("Neg", &[p]).unwrap();
            let g = Arc::new(RwLock::new(g));
            let feeds = vec![
                (x, Tensor::from_vec(&[xs.len()], xs.clone(), Layout::RowMajor).unwrap()),
                (ep, Tensor::from_vec(&[], vec![e], Layout::RowMajor).unwrap()),
            ];
            let (want, _) = run(&session(&g, false, 0), &feeds, &[z]);
            let (got, st) = run(&session(&g, true, 0), &feeds, &[z]);
            assert_eq!(fused_steps(&st), 1);
            assert!(bits(&got[0]) == bits(&want[0]), "exponent {e}, fed {fed}: {:?} against {:?}", got[0], want[0]);
        }
    }
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
    let mut v = b.input(crate::ops::fused::InputKind::Full);
    for i in 0..1000 {
        v = b.unary(Fn1::V(if i % 2 == 0 { crate::ops::vmath::Fun::Sin } else { crate::ops::vmath::Fun::Cos }), v);
    }
    b.output(v);
    let p = b.finish(1);
    assert_eq!(p.num_instrs(), 1000);
    assert!(p.num_regs() <= 2, "{} registers", p.num_regs());
}

#[test]
fn every_size_fuses_by_default_and_a_session_may_cap_it() {
    // (dims, cap, fused steps): no cap fuses a large cluster; a cap below it leaves it alone
    for (dims, cap, want) in [(vec![64usize, 64], None, 1), (vec![300, 300], None, 1), (vec![64, 64], Some(4096), 1), (vec![100, 100], Some(4096), 0)] {
        let mut g = Graph::new();
        let x = g.placeholder(DType::Float32, &dims, Some("x")).unwrap();
        let a = g.op("Tanh", &[x]).unwrap();
        let b = g.op("Square", &[a]).unwrap();
        let o = SessionOptions { emulated_gpus: Some(0), fusion: Some(true), fusion_max_elements: cap, ..Default::default() };
        let s = Session::new(Arc::new(RwLock::new(g)), o).unwrap();
        let xv = tensor(DType::Float32, &dims, &mut Rng(9));
        let (out, st) = run(&s, &[(x, xv.clone())], &[b]);
        assert_eq!(fused_steps(&st), want, "{dims:?} with cap {cap:?}");
        // the definition's values, fused or not (vector-math tanh: within a few f32 ulps)
        for (got, v) in out[0].to_f64_vec().into_iter().zip(xv.to_f64_vec()) {
            let want = v.tanh().powi(2);
            assert!((got - want).abs() <= 1e-6 * want.max(1e-3), "{dims:?} with cap {cap:?}: tanh({v})^2 = {got}, not {want}");
        }
    }
}

// ---------------------------------------------------------------- _FusedMatMul

/// `act(op(x) @ op(w) + bias)` computed from its definition in f64 (the independent oracle
/// of the fused kernel; the unfused kernels give the bits it is also compared with).
fn dense_layer_oracle(x: &[f64], w: &[f64], bias: &[f64], (m, k, n): (usize, usize, usize), act: Option<&str>) -> Vec<f64> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let v = (0..k).map(|p| x[i * k + p] * w[p * n + j]).sum::<f64>() + bias[j];
            out[i * n + j] = match act {
                Some("Tanh") => v.tanh(),
                Some("Relu") => v.max(0.0),
                Some("Sigmoid") => 1.0 / (1.0 + (-v).exp()),
                _ => v,
            };
        }
    }
    out
}

fn fused_matmul_steps(st: &crate::profile::StepStats) -> Vec<Vec<(String, String)>> {
    st.labels.iter().filter(|l| l.op == "_FusedMatMul").map(|l| l.fused.clone()).collect()
}

/// A tensor of `dims` (rank 1 or 2) holding `v` (row-major values) in the given memory order.
fn laid_out(dtype: DType, dims: &[usize], v: &[f64], layout: Layout) -> Tensor {
    let mem: Vec<f64> = match (layout, dims) {
        (Layout::ColumnMajor, &[r, c]) => (0..r * c).map(|q| v[(q % r) * c + q / r]).collect(),
        _ => v.to_vec(),
    };
    match dtype {
        DType::Float32 => Tensor::from_vec(dims, mem.iter().map(|&a| a as f32).collect(), layout),
        _ => Tensor::from_vec(dims, mem, layout),
    }
    .unwrap()
}

#[test]
fn a_dense_layer_becomes_one_fused_matmul_with_the_unfused_bits() {
    let mut rng = Rng(11);
    let mut checked = 0;
    // (m, k, n): small, one that the blocks split by rows over two threads, one by columns,
    // and an empty inner dimension (the product is zeros: the output is act(bias))
    let mut outputs_in_column_order = 0;
    for (si, (m, k, n)) in [(3, 5, 4), (130, 70, 90), (40, 80, 150), (4, 0, 3)].into_iter().enumerate() {
        for (ai, act) in [None, Some("Tanh"), Some("Relu"), Some("Sigmoid")].into_iter().enumerate() {
            for (di, dtype) in [DType::Float32, DType::Float64].into_iter().enumerate() {
                // every size meets the four variants: row-major inputs; column-major ones
                // (a column-major product, whose bias runs along its memory's lines);
                // row-major inputs both transposed (column-major views: a column-major
                // product too); a column-major x transposed (mixed: a row-major product)
                let variant = (si + ai + di) % 4;
                let (ta, tb) = (variant >= 2, variant == 2);
                let layout = if variant % 2 == 1 { Layout::ColumnMajor } else { Layout::RowMajor };
                let bias_first = variant % 2 == 1 || ai == 2;
                outputs_in_column_order += usize::from(variant == 1 || variant == 2);
                let mut g = Graph::new();
                let xs = if ta { [k, m] } else { [m, k] };
                let ws = if tb { [n, k] } else { [k, n] };
                let x = g.placeholder(dtype, &xs, Some("x")).unwrap();
                let w = g.placeholder(dtype, &ws, Some("w")).unwrap();
                let b = g.placeholder(dtype, &[n], Some("b")).unwrap();
                let p = g.op_spec(NodeSpec::new("MatMul", &[x, w]).attr("transpose_a", ta).attr("transpose_b", tb)).unwrap();
                let s = g.op("Add", &(if bias_first { [b, p] } else { [p, b] })).unwrap();
                let y = match act {
                    Some(op) => g.op(op, &[s]).unwrap(),
                    None => s,
                };
                let xv: Vec<f64> = (0..m * k).map(|_| rng.unit() * 2.0 - 1.0).collect();
                let wv: Vec<f64> = (0..k * n).map(|_| rng.unit() * 2.0 - 1.0).collect();
                let bv: Vec<f64> = (0..n).map(|_| rng.unit() * 2.0 - 1.0).collect();
                // fed transposed where the MatMul transposes them
                let tr = |v: &[f64], r: usize, c: usize| (0..r * c).map(|i| v[(i % r) * c + i / r]).collect::<Vec<f64>>();
                let xf = if ta { tr(&xv, m, k) } else { xv.clone() };
                let wf = if tb { tr(&wv, k, n) } else { wv.clone() };
                let feeds =
                    vec![(x, laid_out(dtype, &xs, &xf, layout)), (w, laid_out(dtype, &ws, &wf, layout)), (b, laid_out(dtype, &[n], &bv, Layout::RowMajor))];
                let g = Arc::new(RwLock::new(g));
                let (want, _) = run(&session(&g, false, 0), &feeds, &[y]);
                let (got, st) = run(&session(&g, true, 0), &feeds, &[y]);
                let what = format!("{m}x{k}x{n} {act:?} {dtype:?} ta={ta} tb={tb} {layout:?}");
                let mut names = vec![("MatMul".to_string(), "MatMul".to_string()), ("add".to_string(), "Add".to_string())];
                names.extend(act.map(|op| (op.to_string(), op.to_string())));
                assert_eq!(fused_matmul_steps(&st), vec![names], "{what}");
                assert_eq!(got[0].dims(), &[m, n], "{what}");
                assert!(bits(&got[0]) == bits(&want[0]), "{what}: fused {:?} against unfused {:?}", got[0], want[0]);
                // the oracle: the fed values as the f32 kernel sees them
                let round = |v: &[f64]| v.iter().map(|&a| if dtype == DType::Float32 { a as f32 as f64 } else { a }).collect::<Vec<f64>>();
                let oracle = dense_layer_oracle(&round(&xv), &round(&wv), &round(&bv), (m, k, n), act);
                let tol = if dtype == DType::Float32 { 1e-5 } else { 1e-12 } * (k as f64 + 1.0);
                for (i, (a, o)) in got[0].to_f64_vec().iter().zip(&oracle).enumerate() {
                    assert!((a - o).abs() <= tol, "{what}: element {i} is {a}, its definition {o}");
                }
                checked += 1;
            }
        }
    }
    assert_eq!((checked, outputs_in_column_order), (32, 16));
}

/// The graph `act(x @ w + b)` with `x: [4, 3]`, `w: [3, 5]`, `b: bias_dims`, and its feeds.
fn dense_layer(bias_dims: &[usize], act: &str) -> (Graph, [Output; 5], Vec<(Output, Tensor)>) {
    let mut g = Graph::new();
    let mut rng = Rng(17);
    let x = g.placeholder(DType::Float64, &[4, 3], Some("x")).unwrap();
    let w = g.placeholder(DType::Float64, &[3, 5], Some("w")).unwrap();
    let b = g.placeholder(DType::Float64, bias_dims, Some("b")).unwrap();
    let p = g.op("MatMul", &[x, w]).unwrap();
    let s = g.op("Add", &[p, b]).unwrap();
    let y = g.op(act, &[s]).unwrap();
    let feeds =
        vec![(x, tensor(DType::Float64, &[4, 3], &mut rng)), (w, tensor(DType::Float64, &[3, 5], &mut rng)), (b, tensor(DType::Float64, bias_dims, &mut rng))];
    (g, [x, w, p, s, y], feeds)
}

#[test]
fn a_product_or_sum_read_elsewhere_is_not_fused_away() {
    let ops = |st: &crate::profile::StepStats| st.labels.iter().map(|l| l.op.clone()).collect::<Vec<_>>();
    // (bias shape, activation, fetched, fused members expected)
    let fused = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    type Case = (Vec<usize>, &'static str, fn([Output; 5]) -> Vec<Output>, Vec<String>);
    let cases: Vec<Case> = vec![
        (vec![5], "Tanh", |o| vec![o[4]], fused(&["MatMul", "add", "Tanh"])),
        // the product fetched: nothing fused
        (vec![5], "Tanh", |o| vec![o[4], o[2]], vec![]),
        // the sum fetched: the activation stays a node of its own
        (vec![5], "Relu", |o| vec![o[4], o[3]], fused(&["MatMul", "add"])),
        // not an activation the kernel applies
        (vec![5], "Exp", |o| vec![o[4]], fused(&["MatMul", "add"])),
        // not a bias: a full matrix, a [1, 5] row, a scalar
        (vec![4, 5], "Tanh", |o| vec![o[4]], vec![]),
        (vec![1, 5], "Tanh", |o| vec![o[4]], vec![]),
        (vec![], "Tanh", |o| vec![o[4]], vec![]),
    ];
    for (i, (bias, act, fetch, want)) in cases.into_iter().enumerate() {
        let (g, outs, feeds) = dense_layer(&bias, act);
        let fetches = fetch(outs);
        let g = Arc::new(RwLock::new(g));
        let (a, _) = run(&session(&g, false, 0), &feeds, &fetches);
        let (b, st) = run(&session(&g, true, 0), &feeds, &fetches);
        let got: Vec<String> = fused_matmul_steps(&st).concat().into_iter().map(|(n, _)| n).collect();
        assert_eq!(got, want, "case {i}: {:?}", ops(&st));
        assert!(a.iter().zip(&b).all(|(x, y)| bits(x) == bits(y)), "case {i}");
    }
    // a second reader of the sum (its Square) keeps it; a control input keeps a node out
    let (mut g, [_, _, _, s, y], feeds) = dense_layer(&[5], "Tanh");
    let sq = g.op("Square", &[s]).unwrap();
    let g = Arc::new(RwLock::new(g));
    let (_, st) = run(&session(&g, true, 0), &feeds, &[y, sq]);
    assert_eq!(fused_matmul_steps(&st).concat().into_iter().map(|(n, _)| n).collect::<Vec<_>>(), fused(&["MatMul", "add"]));
    let (mut g, [_, _, p, _, _], feeds) = dense_layer(&[5], "Tanh");
    let before = g.constant(Tensor::filled(DType::Float64, &[], 1.0)).unwrap();
    let mut spec = NodeSpec::new("Add", &[p, feeds[2].0]);
    spec.control_inputs = vec![before.node];
    let s2 = g.op_spec(spec).unwrap();
    let y2 = g.op("Tanh", &[s2]).unwrap();
    let g = Arc::new(RwLock::new(g));
    let (_, st) = run(&session(&g, true, 0), &feeds, &[y2]);
    assert!(fused_matmul_steps(&st).is_empty(), "{:?}", ops(&st));
}

#[test]
fn a_layer_on_a_gpu_stays_unfused() {
    let (mut g, _, feeds) = dense_layer(&[5], "Tanh");
    g.push_device(crate::graph::DeviceScope::Spec(crate::device::spec::DeviceSpec::parse("/gpu:0").unwrap()));
    let (x, w, b) = (feeds[0].0, feeds[1].0, feeds[2].0);
    let p = g.op("MatMul", &[x, w]).unwrap();
    let s = g.op("Add", &[p, b]).unwrap();
    let y = g.op("Tanh", &[s]).unwrap();
    g.pop_device().unwrap();
    let g = Arc::new(RwLock::new(g));
    let (got, st) = run(&session(&g, true, 1), &feeds, &[y]);
    assert!(fused_matmul_steps(&st).is_empty());
    assert!(st.labels.iter().any(|l| l.op == "MatMul" && l.device.contains("GPU")));
    let (want, _) = run(&session(&g, false, 1), &feeds, &[y]);
    assert!(bits(&got[0]) == bits(&want[0]));
}

#[test]
fn a_trained_layer_with_an_unknown_batch_gives_the_unfused_gradients() {
    use crate::shape::UNKNOWN;
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float32, &[UNKNOWN, 6], Some("x")).unwrap();
    let w = g.placeholder(DType::Float32, &[6, 4], Some("w")).unwrap();
    let b = g.placeholder(DType::Float32, &[4], Some("b")).unwrap();
    let p = g.op("MatMul", &[x, w]).unwrap();
    let s = g.op("Add", &[p, b]).unwrap();
    let y = g.op("Tanh", &[s]).unwrap();
    let sq = g.op("Square", &[y]).unwrap();
    let loss = g.op_spec(NodeSpec::new("Sum", &[sq]).attr("axis", crate::ops::AttrValue::Ints(vec![0, 1]))).unwrap();
    let grads = crate::autodiff::gradients(&mut g, &[loss], &[w, b], None, false).unwrap();
    let fetches: Vec<Output> = std::iter::once(y).chain(grads.into_iter().map(|d| d.unwrap())).collect();
    let g = Arc::new(RwLock::new(g));
    let (plain, fused) = (session(&g, false, 0), session(&g, true, 0));
    let mut rng = Rng(23);
    for batch in [5, 9, 5] {
        let feeds = vec![
            (x, tensor(DType::Float32, &[batch, 6], &mut rng)),
            (w, tensor(DType::Float32, &[6, 4], &mut rng)),
            (b, tensor(DType::Float32, &[4], &mut rng)),
        ];
        let (want, _) = run(&plain, &feeds, &fetches);
        let (got, st) = run(&fused, &feeds, &fetches);
        assert_eq!(fused_matmul_steps(&st).len(), 1, "batch {batch}");
        assert_eq!(got[0].dims(), &[batch, 4]);
        assert!(want.iter().zip(&got).all(|(a, c)| bits(a) == bits(c)), "batch {batch}");
    }
}
