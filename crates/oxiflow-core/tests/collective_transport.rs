//! The collectives as GPU ops (`GpuLaunch::Collective`): a device that moves their data
//! itself (NCCL on a CUDA GPU) first calls `ops::collective::negotiate`, whose agreement key
//! adds the transport to the CPU kernel's key, so a rank that would run a collective with
//! NCCL and one that would run it over MPI fail the agreement check, each naming the op,
//! instead of waiting for each other. Checked on an in-process communicator that plays the
//! other rank's part of the check. On an emulated GPU (no NCCL) the collectives are placed
//! on the GPU and run the CPU kernel, with the CPU's key.

use oxiflow_core::collective::{set_communicator, Communicator, HostBuf, ReduceOp};
use oxiflow_core::device::DeviceSet;
use oxiflow_core::ops::collective::{negotiate, Collective};
use oxiflow_core::ops::{GpuLaunch, KernelCtx};
use oxiflow_core::variable_store::VariableStore;
use oxiflow_core::{DType, DeviceSpec, Graph, Layout, NodeSpec, Output, Result, Session, SessionOptions, Tensor};
use std::sync::{Arc, Mutex, RwLock};

/// Rank 0 of 2 whose peer's agreement pair is `peer` (`None`: the peer agrees with
/// whatever this rank sends); records this rank's agreement keys. Data calls do nothing.
#[derive(Default)]
struct TwoRanks {
    peer: Mutex<Option<[i64; 2]>>,
    keys: Mutex<Vec<i64>>,
}

impl Communicator for TwoRanks {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        2
    }
    fn allreduce(&self, _what: &str, buf: HostBuf, op: ReduceOp) -> Result<()> {
        if let HostBuf::I64(b) = buf {
            if b.len() == 2 && op == ReduceOp::Max {
                self.keys.lock().unwrap().push(b[0]);
                if let Some(p) = *self.peer.lock().unwrap() {
                    b[0] = b[0].max(p[0]);
                    b[1] = b[1].max(p[1]);
                }
            }
        }
        Ok(())
    }
    fn reduce(&self, _: &str, _: HostBuf, _: ReduceOp, _: usize) -> Result<()> {
        Ok(())
    }
    fn broadcast(&self, _: &str, _: HostBuf, _: usize) -> Result<()> {
        Ok(())
    }
    fn barrier(&self, _: &str) -> Result<()> {
        Ok(())
    }
}

fn t64(dims: &[usize], v: Vec<f64>) -> Tensor {
    Tensor::from_vec(dims, v, Layout::RowMajor).unwrap()
}

// One test function: the communicator is the process's, shared by every test of a binary.
#[test]
fn a_device_transport_is_part_of_the_agreement_and_emulated_gpus_run_the_cpu_kernels() {
    let comm = Arc::new(TwoRanks::default());
    set_communicator(Some(comm.clone()));

    let mut g = Graph::new();
    let x = g.placeholder(DType::Float64, &[3], Some("x")).unwrap();
    let mean = g.op_spec(NodeSpec::new("MpiAllreduce", &[x]).attr("reduction", "mean").name("grads")).unwrap();
    let max = g.op_spec(NodeSpec::new("MpiAllreduce", &[x]).attr("reduction", "max")).unwrap();
    let sum = g.op_spec(NodeSpec::new("MpiSum", &[x]).attr("root", 1i64)).unwrap();
    let far = g.op_spec(NodeSpec::new("MpiBcast", &[x]).attr("root", 2i64).name("far")).unwrap();
    let grouped = g.add_node(NodeSpec::new("MpiGroupedAllreduce", &[x, x])).unwrap();
    let sin = g.op("Sin", &[x]).unwrap();
    for o in [mean, max, sum, far] {
        assert_eq!(g.node(o.node).unwrap().op.launch, GpuLaunch::Collective);
    }
    let xv = t64(&[3], vec![1.0, -2.0, 0.5]);
    let inputs = [xv.clone()];
    let g = Arc::new(RwLock::new(g));
    let gr = g.read().unwrap();
    // the collectives read no variable: an empty store
    let store = VariableStore::new(DeviceSet::new(1, 0));
    let ctx = |o: Output| KernelCtx { node: gr.node(o.node).unwrap(), inputs: &inputs, state: &store };

    // what each node does, read from its attrs
    assert_eq!(negotiate(&ctx(mean), "nccl").unwrap().collective, Collective::Allreduce { op: ReduceOp::Sum, mean: true });
    assert_eq!(negotiate(&ctx(max), "nccl").unwrap().collective, Collective::Allreduce { op: ReduceOp::Max, mean: false });
    assert_eq!(negotiate(&ctx(sum), "nccl").unwrap().collective, Collective::Reduce { root: 1 });
    let g_ctx = KernelCtx { node: gr.node(grouped).unwrap(), inputs: &[xv.clone(), xv.clone()], state: &store };
    let n = negotiate(&g_ctx, "nccl").unwrap();
    assert_eq!((n.collective, n.what.as_str()), (Collective::GroupedAllreduce { mean: false }, "MpiGroupedAllreduce 'MpiGroupedAllreduce'"));
    let e = negotiate(&ctx(far), "nccl").err().unwrap().to_string();
    assert!(e.contains("MpiBcast 'far'") && e.contains("root 2 is not a rank"), "{e}");
    let e = negotiate(&ctx(sin), "nccl").err().unwrap().to_string();
    assert!(e.contains("Sin") && e.contains("not a collective"), "{e}");

    // the key: the CPU kernel's (what an emulated GPU or a GPU without NCCL runs) with the
    // transport added; negotiate with no transport is the CPU kernel's own check
    let sess = Session::new(g.clone(), SessionOptions::default()).unwrap();
    comm.keys.lock().unwrap().clear();
    sess.run(&[(x, xv.clone())], &[mean], &[], false).unwrap();
    let cpu_key = comm.keys.lock().unwrap()[0];
    comm.keys.lock().unwrap().clear();
    negotiate(&ctx(mean), "").unwrap();
    negotiate(&ctx(mean), "nccl").unwrap();
    negotiate(&ctx(mean), "nccl, new communicator").unwrap();
    let keys = comm.keys.lock().unwrap().clone();
    assert_eq!(keys[0], cpu_key);
    assert!(keys[1] != cpu_key && keys[2] != cpu_key && keys[1] != keys[2], "{keys:?}");

    // the peer runs the CPU kernel, this rank NCCL: both fail, naming the op and the cause
    *comm.peer.lock().unwrap() = Some([cpu_key, !cpu_key]);
    let e = negotiate(&ctx(mean), "nccl").err().unwrap().to_string();
    assert!(e.contains("MpiAllreduce 'grads' on rank 0 of 2") && e.contains("NCCL on a GPU against MPI on the host"), "{e}");
    let peer_nccl = keys[1];
    *comm.peer.lock().unwrap() = Some([peer_nccl, !peer_nccl]);
    let e = sess.run(&[(x, xv.clone())], &[mean], &[], false).unwrap_err().to_string();
    assert!(e.contains("MpiAllreduce 'grads'") && e.contains("not running the same collective"), "{e}");
    // the session is still usable once the ranks agree again
    *comm.peer.lock().unwrap() = None;
    assert_eq!(sess.run(&[(x, xv.clone())], &[mean], &[], false).unwrap().values[0].to_f64_vec(), vec![0.5, -1.0, 0.25]);

    // an emulated GPU (no NCCL): the collectives are placed there (GPU ops now) and run the
    // CPU kernel with the CPU's key; soft placement off, so nothing moves to the CPU quietly
    let mut g = Graph::new();
    g.push_device(oxiflow_core::graph::DeviceScope::Spec(DeviceSpec::parse("/GPU:0").unwrap()));
    let x = g.placeholder(DType::Float64, &[3], Some("x")).unwrap();
    let y = g.op_spec(NodeSpec::new("MpiAllreduce", &[x]).attr("reduction", "mean").name("grads")).unwrap();
    let b = g.op_spec(NodeSpec::new("MpiBcast", &[y])).unwrap();
    let i = g.constant(Tensor::from_vec(&[2], vec![3i64, 4], Layout::RowMajor).unwrap()).unwrap();
    let s = g.op_spec(NodeSpec::new("MpiSum", &[i])).unwrap();
    g.pop_device().unwrap();
    let opts = SessionOptions { emulated_gpus: Some(1), allow_soft_placement: false, ..Default::default() };
    let sess = Session::new(Arc::new(RwLock::new(g)), opts).unwrap();
    comm.keys.lock().unwrap().clear();
    let out = sess.run(&[(x, xv.clone())], &[y, b, s], &[], false).unwrap();
    for o in [y, b, s] {
        assert!(sess.assigned_device(o.node).unwrap().ends_with("/device:GPU:0"));
    }
    assert_eq!(comm.keys.lock().unwrap()[0], cpu_key);
    // rank 0 of a 2-rank job whose peer contributes nothing: mean halves; bcast from rank 0
    // and the reduce to rank 0 leave rank 0's values
    assert_eq!(out.values[0].to_f64_vec(), vec![0.5, -1.0, 0.25]);
    assert_eq!(out.values[1].to_f64_vec(), vec![0.5, -1.0, 0.25]);
    assert_eq!(out.values[2].to_f64_vec(), vec![3.0, 4.0]);
    set_communicator(None);
}
