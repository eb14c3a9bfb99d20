//! The collective ops on a CUDA GPU (`GpuLaunch::Collective`: `MpiAllreduce`,
//! `MpiGroupedAllreduce`, `MpiSum`, `MpiBcast`), Horovod's GPU path:
//!
//! - with NCCL ([`crate::nccl::status`]): the core's agreement check over MPI
//!   ([`negotiate`], transport `"nccl"`), then one NCCL call on the device's compute stream
//!   from the input's device memory into the output's, with no host copy; the process's
//!   NCCL communicator for this GPU is made at its first collective (rank 0's unique id sent
//!   by the core communicator's broadcast, then `ncclCommInitRankConfig`, non-blocking, on
//!   every rank; `ncclCommInitRank` before NCCL 2.14);
//! - without NCCL (not installed, or `OXIFLOW_NCCL=0`): the CPU kernel on host copies of
//!   the inputs, over MPI, and the outputs copied back (said once per process on stderr).
//!
//! Every wait on NCCL is bounded by the communicator's timeout (`OXIFLOW_MPI_TIMEOUT`):
//! joining the NCCL communicator, NCCL putting the call's work on the stream (a
//! non-blocking communicator's calls may answer `ncclInProgress` first), and the call's
//! completion, polled on an event and NCCL's asynchronous error. A peer that dies after the
//! agreement check gives DeadlineExceeded naming the op and what was waited for, and the
//! NCCL communicator is aborted (the next collective makes a new one on every rank), never
//! a hang. Profiles show the `negotiate` phase and a `transfer` phase typed by the NCCL
//! call (`ncclAllReduce`, `ncclReduce`, `ncclBroadcast`), with the bytes moved, timed by
//! the host from the enqueue to the call's completion. The op keeps host times too (no
//! CUDA events), so it contains its phases on the timeline's MPI process, as on the CPU.

use super::{driver_err, CudaDevice};
use crate::error::CudaError;
use crate::launch::DevArg;
use crate::nccl::{self, Buffers, Call, Comm};
use cudarc::driver::result;
use oxiflow_core::collective::HostBuf;
use oxiflow_core::ops::collective::{negotiate, Collective, Negotiated};
use oxiflow_core::ops::{KernelCtx, Outputs};
use oxiflow_core::{OxiflowError, Result, Tensor};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long an NCCL call is waited for when the communicator has no timeout of its own.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

impl CudaDevice {
    /// Runs collective node `ctx.node` (inputs resident here): through NCCL when it loads,
    /// else the CPU kernel on host copies.
    pub(super) fn collective(&self, ctx: &KernelCtx) -> Result<Outputs> {
        let api = match nccl::status() {
            Ok(api) => api,
            Err(reason) => return self.collective_on_host(ctx, &reason),
        };
        let ordinal = self.core.shared.ctx.ordinal();
        let what = format!("{} '{}'", ctx.node.op.name, ctx.node.name);
        let key = comm_key(&oxiflow_core::collective::communicator(&what)?);
        // whether this rank makes its NCCL communicator now is part of the agreement key
        let cached = nccl::cached(ordinal, key);
        let neg = negotiate(ctx, if cached.is_some() { "nccl" } else { "nccl, new communicator" })?;
        let timeout = neg.comm.timeout().unwrap_or(DEFAULT_TIMEOUT);
        let comm = match cached {
            Some(c) => c,
            None => self.join(api, &neg, ordinal, key, timeout)?,
        };
        // MpiSum: ncclReduce writes the root's output only; the other ranks' get zeros
        let (call, reduce_root) = match neg.collective {
            Collective::Allreduce { op, mean } => (Call::AllReduce { op, mean }, None),
            Collective::GroupedAllreduce { mean } => (Call::AllReduce { op: oxiflow_core::collective::ReduceOp::Sum, mean }, None),
            Collective::Reduce { root } => (Call::Reduce { root }, Some(root)),
            Collective::Broadcast { root } => (Call::Broadcast { root }, None),
        };
        let inputs: Vec<DevArg> = ctx.inputs.iter().map(Self::arg).collect();
        let mut outs = Outputs::new();
        for tt in &ctx.node.outputs {
            let dims = tt.shape.dims().to_vec();
            let bytes = dims.iter().product::<usize>() * tt.dtype.size_of();
            outs.push(self.wrap(self.core.allocator.allocate(bytes as u64)?, tt.dtype, dims));
        }
        let bufs: Vec<Buffers> = inputs.iter().zip(&outs).map(|(i, o)| Buffers { send: i.ptr, recv: Self::arg(o).ptr, count: i.len() }).collect();
        let bytes: usize = inputs.iter().map(DevArg::num_bytes).sum();
        let dtype = inputs[0].dtype;
        let device = self.attrs.name.as_str();
        let t0 = Instant::now();
        // the call's buffers may be in use by NCCL until the communicator is aborted: leak them
        let fail = |e: OxiflowError, outs: Outputs| {
            comm.abort(api);
            nccl::evict(ordinal, key);
            std::mem::forget(outs);
            ctx.inputs.iter().for_each(|t| std::mem::forget(t.clone()));
            Err(e)
        };
        let done = {
            let _g = self.core.launch_lock.lock().unwrap_or_else(|p| p.into_inner());
            self.core.shared.ctx.bind_to_thread().map_err(driver_err(device, "cuCtxSetCurrent"))?;
            let stream = &self.core.shared.compute;
            // SAFETY: the input and output blocks hold `count` elements of `dtype` on this GPU;
            // they live until the wait below (or are leaked when it fails).
            unsafe { comm.enqueue(api, device, call, dtype, &bufs, stream.cu_stream()) }?;
            // a non-blocking communicator may still be putting the work on the stream
            match comm.settle(api, device, call.name(), timeout) {
                Ok(true) => {}
                Ok(false) => return fail(deadline(&neg.what, &comm, device, &format!("NCCL did not put {} on the stream", call.name()), timeout), outs),
                Err(e) => return fail(e.into(), outs),
            }
            if reduce_root.is_some_and(|r| r != comm.rank) {
                for b in &bufs {
                    // SAFETY: the output block holds `count` elements; ordered after the reduce.
                    unsafe { result::memset_d8_async(b.recv, 0, b.count * dtype.size_of(), stream.cu_stream()) }
                        .map_err(driver_err(device, "cuMemsetD8Async"))?;
                }
            }
            stream.record_event(None).map_err(driver_err(device, "cuEventRecord"))?
        };
        if let Err(e) = wait(api, &comm, &done, timeout, &neg.what, device) {
            return fail(e, outs);
        }
        if oxiflow_core::function::recording() {
            oxiflow_core::function::record_phase("transfer", call.name(), t0, Instant::now(), bytes);
        }
        Ok(outs)
    }

    /// Makes this process's NCCL communicator for this GPU: rank 0's unique id goes to every
    /// rank over the core communicator, then every rank joins ([`nccl::Api::join`]) and
    /// waits for the others up to `timeout`; past it, or on NCCL's error, the communicator
    /// is aborted and the error names the op.
    fn join(&self, api: &nccl::Api, neg: &Negotiated, ordinal: usize, key: usize, timeout: Duration) -> Result<Arc<Comm>> {
        let device = self.attrs.name.as_str();
        let (rank, size) = (neg.comm.rank(), neg.comm.size());
        let mut id = [0u8; 128];
        if rank == 0 {
            id = api.unique_id(device)?;
        }
        let mut words: Vec<i64> = id.chunks(8).map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
        neg.comm.broadcast(&format!("{} (NCCL unique id)", neg.what), HostBuf::I64(&mut words), 0)?;
        for (c, w) in id.chunks_mut(8).zip(&words) {
            c.copy_from_slice(&w.to_le_bytes());
        }
        let comm = {
            let _g = self.core.launch_lock.lock().unwrap_or_else(|p| p.into_inner());
            self.core.shared.ctx.bind_to_thread().map_err(driver_err(device, "cuCtxSetCurrent"))?;
            Arc::new(api.join(device, &id, rank, size)?)
        };
        // not under the launch lock: other ops on this GPU go on while the peers join
        let joined = comm.settle(api, device, if comm.nonblocking { "ncclCommInitRankConfig" } else { "ncclCommInitRank" }, timeout);
        if !matches!(joined, Ok(true)) {
            comm.abort(api);
            return Err(match joined {
                Err(e) => e.into(),
                _ => deadline(&neg.what, &comm, device, "not every rank joined the NCCL communicator", timeout),
            });
        }
        nccl::keep(ordinal, key, comm.clone());
        Ok(comm)
    }

    /// The CPU kernel on host copies of the inputs, its outputs copied back here: the path
    /// without NCCL (`reason` says why, once per process on stderr).
    fn collective_on_host(&self, ctx: &KernelCtx, reason: &str) -> Result<Outputs> {
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| eprintln!("oxiflow: collectives on GPU tensors go through host memory and MPI: NCCL is not used ({reason})"));
        let host: Vec<Tensor> = ctx.inputs.iter().map(Tensor::to_host).collect::<Result<_>>()?;
        let outs = (ctx.node.op.kernel)(&KernelCtx { node: ctx.node, inputs: &host, state: ctx.state })?;
        outs.iter().map(|t| self.resident(t)).collect()
    }
}

/// Identifies the core communicator a cached NCCL communicator belongs to (its address).
fn comm_key(c: &Arc<dyn oxiflow_core::collective::Communicator>) -> usize {
    Arc::as_ptr(c) as *const () as usize
}

/// Waits for `done` (recorded after the NCCL call), polling it and NCCL's asynchronous
/// error ([`nccl::poll`]), for at most `timeout`: DeadlineExceeded naming `what` when it
/// does not complete in time, the NCCL error when NCCL reports one.
fn wait(api: &nccl::Api, comm: &Comm, done: &cudarc::driver::CudaEvent, timeout: Duration, what: &str, device: &str) -> Result<()> {
    let complete = nccl::poll(timeout, || -> Result<bool> {
        if done.try_is_complete().map_err(|e| CudaError::Driver { device: device.into(), call: "cuEventQuery".into(), msg: e.to_string() })? {
            return Ok(true);
        }
        match comm.async_error(api, device) {
            Some(e) => Err(e.into()),
            None => Ok(false),
        }
    })?;
    if complete {
        Ok(())
    } else {
        Err(deadline(what, comm, device, "the NCCL call did not complete", timeout))
    }
}

/// DeadlineExceeded for op `what` on `comm`'s rank: `waited` did not happen on `device`
/// within `timeout` because a peer stopped after agreeing to run the op; the caller has
/// aborted the NCCL communicator (or is about to).
fn deadline(what: &str, comm: &Comm, device: &str, waited: &str, timeout: Duration) -> OxiflowError {
    OxiflowError::DeadlineExceeded(format!(
        "{what} on rank {} of {}: {waited} on {device} within {:.0} s (OXIFLOW_MPI_TIMEOUT); a peer stopped after agreeing to run it; the NCCL communicator was aborted",
        comm.rank,
        comm.size,
        timeout.as_secs_f64()
    ))
}
