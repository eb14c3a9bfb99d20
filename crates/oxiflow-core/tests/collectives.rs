//! The collective ops on an in-process communicator of one rank that records its calls:
//! every rank must issue a run's collectives in one order, the order of their node ids,
//! whatever the executor's parallelism (the plan chains them); one rank's reductions are
//! the identity; the gradients are the adjoint collectives (ADCME's: `MpiSum` <->
//! `MpiBcast`). Without a communicator, a collective fails naming the op. Multi-rank
//! behaviour is tested under mpirun (julia/Oxiflow/test/mpi/, `make test-mpi`).

use oxiflow_core::autodiff::gradients;
use oxiflow_core::collective::{set_communicator, Communicator, HostBuf, ReduceOp};
use oxiflow_core::{DType, Graph, NodeSpec, Result, Session, SessionOptions, Tensor};
use std::sync::{Arc, Mutex, RwLock};

/// One rank; records the `what` of every data call (the agreement checks, on Int64
/// pairs, are left out).
#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<String>>,
}

impl Communicator for Recorder {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn allreduce(&self, what: &str, buf: HostBuf, _op: ReduceOp) -> Result<()> {
        if !matches!(buf, HostBuf::I64(ref b) if b.len() == 2) {
            self.calls.lock().unwrap().push(what.to_string());
        }
        Ok(())
    }
    fn reduce(&self, what: &str, _buf: HostBuf, _op: ReduceOp, _root: usize) -> Result<()> {
        self.calls.lock().unwrap().push(what.to_string());
        Ok(())
    }
    fn broadcast(&self, what: &str, _buf: HostBuf, _root: usize) -> Result<()> {
        self.calls.lock().unwrap().push(what.to_string());
        Ok(())
    }
    fn barrier(&self, _what: &str) -> Result<()> {
        Ok(())
    }
}

fn t64(dims: &[usize], v: Vec<f64>) -> Tensor {
    Tensor::from_vec(dims, v, oxiflow_core::Layout::RowMajor).unwrap()
}

// One test function: the communicator is the process's, shared by every test of a binary.
#[test]
fn collectives_on_one_recording_rank() {
    // no communicator: the op fails when it runs, naming itself
    set_communicator(None);
    let mut g = Graph::new();
    let c = g.constant(t64(&[2], vec![1.0, 2.0])).unwrap();
    let y = g.op_spec(NodeSpec::new("MpiAllreduce", &[c]).name("grads")).unwrap();
    let sess = Session::new(Arc::new(RwLock::new(g)), SessionOptions::default()).unwrap();
    let e = sess.run(&[], &[y], &[], false).unwrap_err().to_string();
    assert!(e.contains("MpiAllreduce 'grads'") && e.contains("mpi_init"), "{e}");

    let rec = Arc::new(Recorder::default());
    set_communicator(Some(rec.clone()));
    // independent collectives, each after a chain of different length: without the plan's
    // chain, the shorter chains' collectives would often run first
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[64], Some("x")).unwrap();
    let mut outs = Vec::new();
    for k in 0..8 {
        let mut h = x;
        for _ in 0..(8 - k) * 3 {
            h = g.op("Sin", &[h]).unwrap();
        }
        let op = ["MpiAllreduce", "MpiSum", "MpiBcast"][k % 3];
        outs.push(g.op_spec(NodeSpec::new(op, &[h]).name(format!("c{k}"))).unwrap());
    }
    let want: Vec<String> = (0..8).map(|k| format!("{} 'c{k}'", ["MpiAllreduce", "MpiSum", "MpiBcast"][k % 3])).collect();
    let xv = t64(&[64], (0..64).map(|i| i as f64 / 64.0).collect());
    let sess = Session::new(Arc::new(RwLock::new(g)), SessionOptions { inter_op_threads: Some(4), ..Default::default() }).unwrap();
    for _ in 0..20 {
        rec.calls.lock().unwrap().clear();
        // traced: the run goes to the worker pool even where an untraced one would run
        // on this thread, one step after another
        let out = sess.run(&[(x, xv.clone())], &outs, &[], true).unwrap();
        assert_eq!(*rec.calls.lock().unwrap(), want);
        // one rank: every reduction and broadcast is the identity
        let mut h = xv.to_f64_vec();
        for _ in 0..3 * 8 {
            h = h.iter().map(|v| v.sin()).collect();
        }
        // Sin is vectorized math, within 2 ulp of libm's per step (|sin'| <= 1: no growth)
        let got = out.values[0].to_f64_vec();
        assert!(got.len() == h.len() && got.iter().zip(&h).all(|(g, w)| (g - w).abs() <= 64.0 * f64::EPSILON * w.abs()), "{got:?} vs {h:?}");
    }

    // gradients are the adjoint collectives: MpiSum's an MpiBcast, MpiBcast's an MpiSum,
    // MpiAllreduce's an MpiAllreduce; on one rank each is the identity
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[3], Some("x")).unwrap();
    let a = g.op_spec(NodeSpec::new("MpiSum", &[x]).attr("root", 0i64)).unwrap();
    let b = g.op_spec(NodeSpec::new("MpiBcast", &[a])).unwrap();
    let c = g.op_spec(NodeSpec::new("MpiAllreduce", &[b]).attr("reduction", "mean")).unwrap();
    let sq = g.op("Square", &[c]).unwrap();
    let l = g.op("Sum", &[sq]).unwrap();
    let dx = gradients(&mut g, &[l], &[x], None, false).unwrap()[0].unwrap();
    let ops: Vec<&str> = g.nodes().iter().skip(l.node + 1).map(|n| n.op.name).filter(|o| o.starts_with("Mpi")).collect();
    assert_eq!(ops, ["MpiAllreduce", "MpiSum", "MpiBcast"]);
    let sess = Session::new(Arc::new(RwLock::new(g)), SessionOptions::default()).unwrap();
    let out = sess.run(&[(x, t64(&[3], vec![0.5, -1.0, 2.0]))], &[dx], &[], false).unwrap();
    assert_eq!(out.values[0].to_f64_vec(), vec![1.0, -2.0, 4.0]);

    // a grouped all-reduce packs its inputs into one buffer: one data call for three
    // tensors of different shapes (one a transposed, not row-major, view); on one rank its
    // outputs equal its inputs, and its gradient is one grouped all-reduce of the gradients
    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[2, 3], Some("x")).unwrap();
    let xt = g.op_spec(NodeSpec::new("Transpose", &[x]).attr("perm", vec![1i64, 0])).unwrap();
    let s = g.op("Sin", &[x]).unwrap();
    let k = g.constant(t64(&[], vec![5.0])).unwrap();
    let fused = g.add_node(NodeSpec::new("MpiGroupedAllreduce", &[xt, s, k]).attr("reduction", "mean").name("fused")).unwrap();
    let outs: Vec<_> = (0..3).map(|i| oxiflow_core::Output::new(fused, i)).collect();
    let sq: Vec<_> = outs[..2].iter().map(|&o| g.op("Square", &[o]).unwrap()).collect();
    let sums: Vec<_> = sq.iter().map(|&q| g.op("Sum", &[q]).unwrap()).collect();
    let l = g.op("AddN", &sums).unwrap();
    let dx = gradients(&mut g, &[l], &[x], None, false).unwrap()[0].unwrap();
    let grouped = g.nodes().iter().filter(|n| n.op.name == "MpiGroupedAllreduce").count();
    assert_eq!(grouped, 2, "the forward op and its adjoint");
    let xv: Vec<f64> = vec![0.1, 0.2, 0.3, -0.4, 0.5, 0.6];
    let sess = Session::new(Arc::new(RwLock::new(g)), SessionOptions::default()).unwrap();
    rec.calls.lock().unwrap().clear();
    let out = sess.run(&[(x, t64(&[2, 3], xv.clone()))], &[outs[0], outs[1], outs[2]], &[], false).unwrap();
    assert_eq!(*rec.calls.lock().unwrap(), ["MpiGroupedAllreduce 'fused'"]);
    assert_eq!(out.values[0].dims(), &[3, 2]);
    assert_eq!(out.values[0].to_f64_vec(), vec![0.1, -0.4, 0.2, 0.5, 0.3, 0.6]);
    let (got, want) = (out.values[1].to_f64_vec(), xv.iter().map(|v| v.sin()).collect::<Vec<_>>());
    assert!(got.len() == 6 && got.iter().zip(&want).all(|(g, w)| (g - w).abs() <= 4.0 * f64::EPSILON * w.abs()), "{got:?} vs {want:?}");
    assert_eq!(out.values[2].to_f64_vec(), vec![5.0]);
    let d = sess.run(&[(x, t64(&[2, 3], xv.clone()))], &[dx], &[], false).unwrap().values[0].to_f64_vec();
    let want: Vec<f64> = xv.iter().map(|v| 2.0 * v + 2.0 * v.sin() * v.cos()).collect();
    assert!(d.iter().zip(&want).all(|(a, b)| (a - b).abs() < 1e-15), "{d:?} {want:?}");
    // traced: the collective, its negotiation and its transfer (bytes of the fusion buffer:
    // 6 + 6 + 1 doubles), in that order in time, on the timeline's own MPI process
    let stats = sess.run(&[(x, t64(&[2, 3], xv.clone()))], &[outs[0]], &[], true).unwrap().step_stats.unwrap();
    let find = |name: &str| stats.nodes.iter().find(|n| stats.label(n).node_name == name).unwrap_or_else(|| panic!("no step {name}"));
    let (op, neg, xfer) = (find("fused"), find("fused/negotiate"), find("fused/transfer"));
    assert_eq!((stats.label(neg).op.as_str(), stats.label(xfer).op.as_str()), ("MpiNegotiate", "MPI_Allreduce"));
    assert_eq!((neg.output_bytes, xfer.output_bytes), (16, 13 * 8));
    assert!(op.start_ns <= neg.start_ns && neg.end_ns <= xfer.start_ns && xfer.end_ns <= op.end_ns);
    let trace = stats.chrome_trace();
    let events = trace["traceEvents"].as_array().unwrap();
    let mpi_pid = events.iter().find(|e| e["ph"] == "M" && e["args"]["name"] == "MPI rank 0 of 1").expect("an MPI process")["pid"].clone();
    let mut on_mpi: Vec<&str> = events.iter().filter(|e| e["ph"] == "X" && e["pid"] == mpi_pid).map(|e| e["name"].as_str().unwrap()).collect();
    on_mpi.sort_unstable();
    assert_eq!(on_mpi, ["MPI_Allreduce", "MpiGroupedAllreduce", "MpiNegotiate"]);
    assert!(events.iter().filter(|e| e["ph"] == "X" && e["pid"] != mpi_pid).all(|e| !e["name"].as_str().unwrap().starts_with("Mpi")));

    // one fusion buffer, one dtype; only sum and mean
    let mut g = Graph::new();
    let a = g.constant(t64(&[1], vec![1.0])).unwrap();
    let b = g.constant(Tensor::from_vec(&[1], vec![1.0f32], oxiflow_core::Layout::RowMajor).unwrap()).unwrap();
    let e = g.add_node(NodeSpec::new("MpiGroupedAllreduce", &[a, b])).unwrap_err().to_string();
    assert!(e.contains("MpiGroupedAllreduce") && e.contains("input 1 is Float32"), "{e}");
    let e = g.add_node(NodeSpec::new("MpiGroupedAllreduce", &[a]).attr("reduction", "max")).unwrap_err().to_string();
    assert!(e.contains("\"sum\" or \"mean\""), "{e}");

    // root must be a rank of the job
    let mut g = Graph::new();
    let c = g.constant(t64(&[1], vec![1.0])).unwrap();
    let y = g.op_spec(NodeSpec::new("MpiSum", &[c]).attr("root", 1i64)).unwrap();
    let sess = Session::new(Arc::new(RwLock::new(g)), SessionOptions::default()).unwrap();
    let e = sess.run(&[], &[y], &[], false).unwrap_err().to_string();
    assert!(e.contains("MpiSum") && e.contains("root 1"), "{e}");
    set_communicator(None);
}
