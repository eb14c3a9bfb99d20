//! The point-to-point ops (`MpiSend`, `MpiRecv`, `MpiSendRecv`), gather and halo exchange
//! on one rank (an in-process communicator): ranks that are not peers fail naming the node;
//! a gather and a 1x1 halo exchange work on one rank, with their adjoints; the gradient of
//! each op is the adjoint op with the attrs it needs; a communicator that lacks the new
//! methods fails with Unimplemented naming the op. The halo exchange of width 1, 2 and 3
//! on grids of up to 6 ranks, one rank after another in this process ([`Grid`]): values
//! against the window of a padded global array, the gradient op against the sum of the
//! output gradients over every cell that copies a global cell, and their adjointness.
//! Multi-rank behaviour is tested under mpirun (julia/Oxiflow/test/mpi/p2p.jl,
//! `make test-mpi`).

use oxiflow_core::autodiff::gradients;
use oxiflow_core::collective::{set_communicator, Communicator, HostBuf, ReduceOp};
use oxiflow_core::{DType, Graph, Layout, NodeSpec, Result, Session, SessionOptions, Tensor};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

/// One rank, with gather and scatter (copies).
struct OneRank;

/// Rank 0 of `size` with only the trait's required methods: the new ones are its defaults.
struct Bare {
    size: usize,
}

impl Communicator for Bare {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        self.size
    }
    fn allreduce(&self, _what: &str, _buf: HostBuf, _op: ReduceOp) -> Result<()> {
        Ok(())
    }
    fn reduce(&self, _what: &str, _buf: HostBuf, _op: ReduceOp, _root: usize) -> Result<()> {
        Ok(())
    }
    fn broadcast(&self, _what: &str, _buf: HostBuf, _root: usize) -> Result<()> {
        Ok(())
    }
    fn barrier(&self, _what: &str) -> Result<()> {
        Ok(())
    }
}

impl Communicator for OneRank {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn allreduce(&self, _what: &str, _buf: HostBuf, _op: ReduceOp) -> Result<()> {
        Ok(())
    }
    fn reduce(&self, _what: &str, _buf: HostBuf, _op: ReduceOp, _root: usize) -> Result<()> {
        Ok(())
    }
    fn broadcast(&self, _what: &str, _buf: HostBuf, _root: usize) -> Result<()> {
        Ok(())
    }
    fn barrier(&self, _what: &str) -> Result<()> {
        Ok(())
    }
    fn exchange(&self, what: &str, sends: Vec<(HostBuf, usize)>, recvs: Vec<(HostBuf, usize)>, _tag: i32) -> Result<()> {
        // a one-rank job has no peer: the ops must refuse before they get here
        assert!(sends.is_empty() && recvs.is_empty(), "{what} posted messages on a one-rank job");
        Ok(())
    }
    fn gather(&self, what: &str, send: HostBuf, recv: HostBuf, root: usize) -> Result<()> {
        assert_eq!(root, 0, "{what}");
        copy(send, recv);
        Ok(())
    }
    fn scatter(&self, what: &str, send: HostBuf, recv: HostBuf, root: usize) -> Result<()> {
        assert_eq!(root, 0, "{what}");
        copy(send, recv);
        Ok(())
    }
}

/// Rank `rank` of `size`, for running every rank's graph in turn in this process: the first
/// round (`replay` false) records each message sent, keyed by sender, receiver and tag, and
/// receives zeros; the second delivers the recorded messages. Right for graphs whose
/// messages do not depend on what they receive (one halo exchange, or its gradient op).
struct Grid {
    rank: usize,
    size: usize,
    replay: bool,
    mail: Arc<Mutex<Mailbox>>,
}

/// The messages of a round, by sender, receiver and tag.
type Mailbox = HashMap<(usize, usize, i32), Vec<f64>>;

impl Communicator for Grid {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn allreduce(&self, _what: &str, _buf: HostBuf, _op: ReduceOp) -> Result<()> {
        Ok(()) // the agreement check: every rank builds the same graph here
    }
    fn reduce(&self, _what: &str, _buf: HostBuf, _op: ReduceOp, _root: usize) -> Result<()> {
        unreachable!()
    }
    fn broadcast(&self, _what: &str, _buf: HostBuf, _root: usize) -> Result<()> {
        unreachable!()
    }
    fn barrier(&self, _what: &str) -> Result<()> {
        unreachable!()
    }
    fn exchange(&self, what: &str, sends: Vec<(HostBuf, usize)>, recvs: Vec<(HostBuf, usize)>, tag: i32) -> Result<()> {
        let mut mail = self.mail.lock().unwrap();
        for (buf, to) in sends {
            assert!(to < self.size && to != self.rank, "{what}: rank {} sends to {to}", self.rank);
            let HostBuf::F64(b) = buf else { panic!("{what}: not Float64") };
            let old = mail.insert((self.rank, to, tag), b.to_vec());
            assert!(self.replay || old.is_none(), "{what}: rank {} sends to {to} twice", self.rank);
        }
        for (buf, from) in recvs {
            let HostBuf::F64(b) = buf else { panic!("{what}: not Float64") };
            if self.replay {
                let m = &mail[&(from, self.rank, tag)];
                assert_eq!(m.len(), b.len(), "{what}: rank {from} sent rank {} another length", self.rank);
                b.copy_from_slice(m);
            }
        }
        Ok(())
    }
}

/// `run(q)` for every rank `q` of an `m`-by-`n` grid, twice ([`Grid`]): the second round's.
fn on_grid(m: usize, n: usize, run: impl Fn(usize) -> Vec<f64>) -> Vec<Vec<f64>> {
    let mail = Arc::new(Mutex::new(HashMap::new()));
    let mut outs = Vec::new();
    for replay in [false, true] {
        outs = (0..m * n)
            .map(|q| {
                set_communicator(Some(Arc::new(Grid { rank: q, size: m * n, replay, mail: mail.clone() })));
                run(q)
            })
            .collect();
    }
    outs
}

/// One `op` node (attrs `m`, `n`, `width`, `fill_value` 0 or `fill`) on rank `q`'s `x` of
/// `dims`, run.
fn halo_run(op: &str, (m, n, w): (usize, usize, usize), fill: Option<f64>, dims: &[usize], x: Vec<f64>) -> Vec<f64> {
    let mut g = Graph::new();
    let c = g.constant(t64(dims, x)).unwrap();
    let mut spec = NodeSpec::new(op, &[c]).attr("m", m as i64).attr("n", n as i64).attr("width", w as i64).attr("tag", 9i64);
    if let Some(f) = fill {
        spec = spec.attr("fill_value", f);
    }
    let h = g.op_spec(spec).unwrap();
    let sess = Session::new(Arc::new(RwLock::new(g)), SessionOptions::default()).unwrap();
    sess.run(&[], &[h], &[], false).unwrap().values[0].to_f64_vec()
}

/// The halo exchange of width `w` of `[k1, k2]` blocks on an `m`-by-`n` grid, and its
/// gradient op, against oracles on the global `[m*k1, n*k2]` array.
fn check_halo_grid((m, n): (usize, usize), (k1, k2): (usize, usize), w: usize) {
    let (gr, gc) = (m * k1, n * k2);
    let global = |i: usize, j: usize| 1.0 + i as f64 * 10.0 + j as f64 * 0.25;
    let block = |q: usize, f: &dyn Fn(usize, usize) -> f64| -> Vec<f64> {
        let (bi, bj) = (q / n * k1, q % n * k2);
        (0..k1 * k2).map(|e| f(bi + e / k2, bj + e % k2)).collect()
    };
    let (h1, h2) = (k1 + 2 * w, k2 + 2 * w);
    // output cell (a, b) of rank q: global cell (I*k1 + a - w, J*k2 + b - w), if any
    let cell = |q: usize, a: usize, b: usize| -> Option<(usize, usize)> {
        let (i, j) = ((q / n * k1 + a).checked_sub(w)?, (q % n * k2 + b).checked_sub(w)?);
        (i < gr && j < gc).then_some((i, j))
    };
    let corner = |a: usize, b: usize| (a < w || a >= k1 + w) && (b < w || b >= k2 + w);
    let case = format!("width {w}, {m} x {n} grid of {k1} x {k2} blocks");

    // values: the window of the global array padded with fill_value, corners 0
    let fill = -3.5;
    let got = on_grid(m, n, |q| halo_run("MpiHaloExchange", (m, n, w), Some(fill), &[k1, k2], block(q, &global)));
    for (q, out) in got.iter().enumerate() {
        let want: Vec<f64> = (0..h1 * h2)
            .map(|e| {
                let (a, b) = (e / h2, e % h2);
                if corner(a, b) {
                    0.0
                } else {
                    cell(q, a, b).map_or(fill, |(i, j)| global(i, j))
                }
            })
            .collect();
        assert_eq!(out, &want, "{case}, rank {q}");
    }

    // the gradient op on output gradients v (one per rank, corners too): each global
    // cell's gradient is the sum of v over every rank's output cell that copies it
    let v = |q: usize, e: usize| ((q * 31 + e * 7) % 13) as f64 - 6.0 + 0.5 * q as f64;
    let dus = on_grid(m, n, |q| halo_run("MpiHaloExchangeGrad", (m, n, w), None, &[h1, h2], (0..h1 * h2).map(|e| v(q, e)).collect()));
    let mut total = vec![0.0; gr * gc];
    for q in 0..m * n {
        for e in 0..h1 * h2 {
            if let (false, Some((i, j))) = (corner(e / h2, e % h2), cell(q, e / h2, e % h2)) {
                total[i * gc + j] += v(q, e);
            }
        }
    }
    for (q, du) in dus.iter().enumerate() {
        assert_eq!(du, &block(q, &|i, j| total[i * gc + j]), "{case}, gradient of rank {q}");
    }

    // adjointness with fill 0: the sum over ranks of <halo(u), v> == of <u, halo_grad(v)>
    let hs = on_grid(m, n, |q| halo_run("MpiHaloExchange", (m, n, w), None, &[k1, k2], block(q, &global)));
    let lhs: f64 = hs.iter().enumerate().map(|(q, h)| h.iter().enumerate().map(|(e, x)| x * v(q, e)).sum::<f64>()).sum();
    let rhs: f64 = dus.iter().enumerate().map(|(q, du)| du.iter().zip(block(q, &global)).map(|(a, b)| a * b).sum::<f64>()).sum();
    assert!((lhs - rhs).abs() <= 1e-9 * lhs.abs().max(1.0), "{case}: {lhs} != {rhs}");
}

fn copy(from: HostBuf, to: HostBuf) {
    match (from, to) {
        (HostBuf::F64(a), HostBuf::F64(b)) => b.copy_from_slice(a),
        (HostBuf::F32(a), HostBuf::F32(b)) => b.copy_from_slice(a),
        _ => panic!("unexpected dtypes"),
    }
}

fn t64(dims: &[usize], v: Vec<f64>) -> Tensor {
    Tensor::from_vec(dims, v, Layout::RowMajor).unwrap()
}

fn run_err(g: Graph, y: oxiflow_core::Output) -> String {
    let sess = Session::new(Arc::new(RwLock::new(g)), SessionOptions::default()).unwrap();
    sess.run(&[], &[y], &[], false).unwrap_err().to_string()
}

/// The op types of the nodes after `from`, with the named attrs, in node order.
fn ops_after(g: &Graph, from: usize, keys: &[&str]) -> Vec<String> {
    g.nodes()
        .iter()
        .skip(from + 1)
        .filter(|n| n.op.name.starts_with("Mpi"))
        .map(|n| {
            let attrs: Vec<String> = keys.iter().filter_map(|k| n.attrs.get(*k).map(|v| format!("{k}={v}"))).collect();
            format!("{} {}", n.op.name, attrs.join(" "))
        })
        .collect()
}

// One test function: the communicator is the process's, shared by every test of a binary.
#[test]
fn p2p_ops_on_one_rank() {
    // no communicator: the op fails when it runs, naming itself
    set_communicator(None);
    let mut g = Graph::new();
    let c = g.constant(t64(&[2], vec![1.0, 2.0])).unwrap();
    let y = g.op_spec(NodeSpec::new("MpiSend", &[c]).attr("dest", 1i64).name("s")).unwrap();
    let e = run_err(g, y);
    assert!(e.contains("MpiSend 's'") && e.contains("mpi_init"), "{e}");

    set_communicator(Some(Arc::new(OneRank)));
    // peers must be other ranks of the job
    for (op, k, r, want) in [
        ("MpiSend", "dest", 0i64, "dest 0 is this rank"),
        ("MpiSend", "dest", 1, "dest 1 is not a rank of this job (ranks 0 to 0)"),
        ("MpiRecv", "src", 0, "src 0 is this rank"),
        ("MpiRecv", "src", 5, "src 5 is not a rank"),
    ] {
        let mut g = Graph::new();
        let c = g.constant(t64(&[2], vec![1.0, 2.0])).unwrap();
        let y = g.op_spec(NodeSpec::new(op, &[c]).attr(k, r).name("p")).unwrap();
        let e = run_err(g, y);
        assert!(e.contains(&format!("{op} 'p'")) && e.contains(want), "{e}");
    }
    let mut g = Graph::new();
    let c = g.constant(t64(&[1], vec![1.0])).unwrap();
    let y = g.op_spec(NodeSpec::new("MpiSendRecv", &[c]).attr("dest", 0i64).attr("src", 0i64)).unwrap();
    assert!(run_err(g, y).contains("dest 0 is this rank"));
    // attrs checked when the node is built: a missing peer, a negative rank, a tag out of range
    let mut g = Graph::new();
    let c = g.constant(t64(&[1], vec![1.0])).unwrap();
    let e = g.op_spec(NodeSpec::new("MpiSendRecv", &[c]).attr("dest", 0i64)).unwrap_err().to_string();
    assert!(e.contains("needs the attr src"), "{e}");
    let e = g.op_spec(NodeSpec::new("MpiRecv", &[c]).attr("src", -1i64)).unwrap_err().to_string();
    assert!(e.contains("src must be a rank"), "{e}");
    let e = g.op_spec(NodeSpec::new("MpiSend", &[c]).attr("dest", 1i64).attr("tag", 32767i64)).unwrap_err().to_string();
    assert!(e.contains("tag must be an integer from 0 to 32766"), "{e}");

    // gradients are the adjoint messages: MpiSend's an MpiRecv from dest (plus the output
    // gradient), MpiRecv's an MpiSend to src (zeros), MpiSendRecv's the reverse direction
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[3], Some("x")).unwrap();
    let a = g.op_spec(NodeSpec::new("MpiSend", &[x]).attr("dest", 2i64).attr("tag", 4i64)).unwrap();
    let b = g.op_spec(NodeSpec::new("MpiRecv", &[a]).attr("src", 3i64).attr("tag", 4i64)).unwrap();
    let c = g.op_spec(NodeSpec::new("MpiSendRecv", &[b]).attr("dest", 1i64).attr("src", 2i64)).unwrap();
    let l = g.op("Sum", &[c]).unwrap();
    gradients(&mut g, &[l], &[x], None, false).unwrap();
    assert_eq!(ops_after(&g, l.node, &["dest", "src", "tag", "zeros"]), ["MpiSendRecv dest=2 src=1", "MpiSend dest=3 tag=4 zeros=true", "MpiRecv src=2 tag=4"]);

    // gather on one rank: the identity, shape [1 * d0, ...]; its gradient a scatter
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[2, 2], Some("x")).unwrap();
    let y = g.op_spec(NodeSpec::new("MpiGather", &[x])).unwrap();
    assert_eq!(g.output_type(y).unwrap().shape.dims(), [2, 2]);
    let w = g.constant(t64(&[2, 2], vec![1.0, 2.0, 3.0, 4.0])).unwrap();
    let yw = g.op("Mul", &[y, w]).unwrap();
    let l = g.op("Sum", &[yw]).unwrap();
    let dx = gradients(&mut g, &[l], &[x], None, false).unwrap()[0].unwrap();
    assert_eq!(ops_after(&g, l.node, &["root", "ranks"]), ["MpiScatter ranks=1"]);
    let sess = Session::new(Arc::new(RwLock::new(g)), SessionOptions::default()).unwrap();
    let out = sess.run(&[(x, t64(&[2, 2], vec![5.0, 6.0, 7.0, 8.0]))], &[y, dx], &[], false).unwrap();
    assert_eq!(out.values[0].to_f64_vec(), [5.0, 6.0, 7.0, 8.0]);
    assert_eq!(out.values[1].to_f64_vec(), [1.0, 2.0, 3.0, 4.0]);

    // a 1x1 grid: the block framed by fill_value, corners 0; the gradient is the interior
    // of the output gradient (no neighbour sends any back), and the gradient's gradient a
    // halo exchange with fill 0
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[2, 3], Some("x")).unwrap();
    let h = g.op_spec(NodeSpec::new("MpiHaloExchange", &[x]).attr("m", 1i64).attr("n", 1i64).attr("fill_value", 7.0)).unwrap();
    assert_eq!(g.output_type(h).unwrap().shape.dims(), [4, 5]);
    let w = g.constant(t64(&[4, 5], (0..20).map(f64::from).collect())).unwrap();
    let hw = g.op("Mul", &[h, w]).unwrap();
    let l = g.op("Sum", &[hw]).unwrap();
    let dx = gradients(&mut g, &[l], &[x], None, false).unwrap()[0].unwrap();
    assert_eq!(ops_after(&g, l.node, &["m", "n"]), ["MpiHaloExchangeGrad m=1 n=1"]);
    let sess = Session::new(Arc::new(RwLock::new(g)), SessionOptions::default()).unwrap();
    let out = sess.run(&[(x, t64(&[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]))], &[h, dx], &[], false).unwrap();
    #[rustfmt::skip]
    let want = [
        0.0, 7.0, 7.0, 7.0, 0.0,
        7.0, 1.0, 2.0, 3.0, 7.0,
        7.0, 4.0, 5.0, 6.0, 7.0,
        0.0, 7.0, 7.0, 7.0, 0.0,
    ];
    assert_eq!(out.values[0].to_f64_vec(), want);
    assert_eq!(out.values[1].to_f64_vec(), [6.0, 7.0, 8.0, 11.0, 12.0, 13.0]);
    let mut g = Graph::new();
    let d = g.placeholder(DType::Float64, &[4, 5], Some("d")).unwrap();
    let hg = g.op_spec(NodeSpec::new("MpiHaloExchangeGrad", &[d]).attr("m", 1i64).attr("n", 1i64)).unwrap();
    let l = g.op("Sum", &[hg]).unwrap();
    gradients(&mut g, &[l], &[d], None, false).unwrap();
    assert_eq!(ops_after(&g, l.node, &["fill_value"]), ["MpiHaloExchange fill_value=0"]);
    // the grid must hold exactly the job's ranks
    let mut g = Graph::new();
    let c = g.constant(t64(&[1, 1], vec![1.0])).unwrap();
    let h = g.op_spec(NodeSpec::new("MpiHaloExchange", &[c]).attr("m", 2i64).attr("n", 1i64).name("h")).unwrap();
    let e = run_err(g, h);
    assert!(e.contains("MpiHaloExchange 'h'") && e.contains("2 x 1 process grid needs m * n ranks, but this job has 1"), "{e}");

    // width 2 (ADCME's mpi_halo_exchange2), and 1 and 3, on grids of 1 to 6 ranks; the
    // smallest blocks (k = width) send their whole width to both sides
    for w in [1, 2, 3] {
        for grid in [(1, 1), (1, 2), (2, 1), (2, 2), (1, 3), (3, 1), (2, 3)] {
            for k in [(w + 1, w + 2), (w, w)] {
                check_halo_grid(grid, k, w);
            }
        }
    }
    set_communicator(Some(Arc::new(OneRank)));
    // width 2: shapes [k1 + 4, k2 + 4] and back; the gradient keeps the width, and its
    // gradient too; blocks smaller than 2 x 2 and widths under 1 are refused, naming the op
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[2, 3], Some("x")).unwrap();
    let h = g.op_spec(NodeSpec::new("MpiHaloExchange", &[x]).attr("m", 1i64).attr("n", 1i64).attr("width", 2i64)).unwrap();
    assert_eq!(g.output_type(h).unwrap().shape.dims(), [6, 7]);
    let l = g.op("Sum", &[h]).unwrap();
    // seeded by a placeholder, so that the gradient depends on something to differentiate
    let s = g.placeholder(DType::Float64, &[], Some("s")).unwrap();
    let dx = gradients(&mut g, &[l], &[x], Some(&[s]), false).unwrap()[0].unwrap();
    assert_eq!(ops_after(&g, l.node, &["m", "n", "width"]), ["MpiHaloExchangeGrad m=1 n=1 width=2"]);
    assert_eq!(g.output_type(dx).unwrap().shape.dims(), [2, 3]);
    let l2 = g.op("Sum", &[dx]).unwrap();
    gradients(&mut g, &[l2], &[s], None, false).unwrap();
    assert!(ops_after(&g, l2.node, &["width", "fill_value"]).contains(&"MpiHaloExchange width=2 fill_value=0".to_string()));
    for (op, dims, w, want) in [
        ("MpiHaloExchange", [1, 3], 2i64, "MpiHaloExchange 'h': needs a matrix of at least 2x2 (the local block; a halo of width 2 sends 2 rows and columns of it to each neighbour), got shape [1,3]"),
        ("MpiHaloExchange", [3, 3], 0, "MpiHaloExchange 'h': width (the halo's depth in cells) must be an integer of 1 or more, got 0"),
        ("MpiHaloExchangeGrad", [6, 5], 2, "MpiHaloExchangeGrad 'h': needs a matrix of at least 6x6 (the output gradient of a halo of width 2: a block of at least 2x2 framed by 2 on each side), got shape [6,5]"),
        ("MpiHaloExchangeGrad", [2, 3], 1, "needs a matrix of at least 3x3"),
    ] {
        let mut g = Graph::new();
        let c = g.constant(t64(&dims, vec![0.0; dims[0] * dims[1]])).unwrap();
        let e = g.op_spec(NodeSpec::new(op, &[c]).attr("m", 1i64).attr("n", 1i64).attr("width", w).name("h")).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }

    // a communicator without the new methods: Unimplemented, naming the op
    for (size, op, attr, want) in [(1, "MpiGather", "root", "has no gather"), (2, "MpiSend", "dest", "has no point-to-point messages")] {
        set_communicator(Some(Arc::new(Bare { size })));
        let mut g = Graph::new();
        let c = g.constant(t64(&[1], vec![1.0])).unwrap();
        let y = g.op_spec(NodeSpec::new(op, &[c]).attr(attr, (size - 1) as i64).name("u")).unwrap();
        let e = run_err(g, y);
        assert!(e.contains(&format!("{op} 'u'")) && e.contains(want), "{e}");
    }
    set_communicator(None);
}
