//! The point-to-point ops (`MpiSend`, `MpiRecv`, `MpiSendRecv`), gather and halo exchange
//! on one rank (an in-process communicator): ranks that are not peers fail naming the node;
//! a gather and a 1x1 halo exchange work on one rank, with their adjoints; the gradient of
//! each op is the adjoint op with the attrs it needs; a communicator that lacks the new
//! methods fails with Unimplemented naming the op. Multi-rank behaviour is tested under
//! mpirun (julia/Oxiflow/test/mpi/p2p.jl, `make test-mpi`).

use oxiflow_core::autodiff::gradients;
use oxiflow_core::collective::{set_communicator, Communicator, HostBuf, ReduceOp};
use oxiflow_core::{DType, Graph, Layout, NodeSpec, Result, Session, SessionOptions, Tensor};
use std::sync::{Arc, RwLock};

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
