//! Collectives across processes (MPI ranks): the [`Communicator`] trait, which the
//! collective ops (`ops/collective.rs`: `MpiAllreduce`, `MpiSum`, `MpiBcast`) and the
//! point-to-point ops (`ops/p2p.rs`: `MpiSend`, `MpiRecv`, `MpiSendRecv`, `MpiGather`,
//! `MpiHaloExchange`) call, and the process's one communicator, set by whoever initialises
//! the transport (the `oxiflow-mpi` crate on OpenMPI through rsmpi, from `mpi_init`). Core
//! knows collectives only through this trait, as it knows devices only through `Device`.
//!
//! Order: the collectives of one run are issued in the same order on every rank, the order
//! of their node ids (the order the program built them, the same on every rank of an SPMD
//! program): the session's plan chains them ([`is_collective`]), so the executor's
//! parallelism never reorders them (ADCME's documented deadlock, where TF's executor ran
//! two independent collectives in different orders on different ranks, cannot happen).
//! A rank that runs other collectives than its peers is caught by the check every
//! collective makes first ([`Communicator::agree`]).

use crate::error::{OxiflowError, Result};
use std::sync::{Arc, RwLock};

/// A reduction (MPI's `MPI_SUM`, `MPI_MAX`, `MPI_MIN`; Horovod's `Average` is a sum
/// divided by the number of ranks, done by the op).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    Max,
    Min,
}

/// A contiguous host buffer of one of the dtypes collectives carry.
pub enum HostBuf<'a> {
    F32(&'a mut [f32]),
    F64(&'a mut [f64]),
    I32(&'a mut [i32]),
    I64(&'a mut [i64]),
}

impl HostBuf<'_> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            HostBuf::F32(b) => b.len(),
            HostBuf::F64(b) => b.len(),
            HostBuf::I32(b) => b.len(),
            HostBuf::I64(b) => b.len(),
        }
    }

    /// `true` when it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A contiguous host buffer that a collective only reads (the send side of
/// [`Communicator::allreduce_into`]).
#[derive(Copy, Clone)]
pub enum HostSlice<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
    I32(&'a [i32]),
    I64(&'a [i64]),
}

/// A group of processes (ranks `0..size`) that run collectives together. Every call is
/// collective: all ranks make it, in the same order, with buffers of the same length and
/// dtype. `what` names the op and node for errors (`MpiAllreduce 'x'`). Errors:
/// `Unavailable` when a peer does not join within the implementation's timeout (it runs
/// other collectives, or died), naming `what` and this rank; `FailedPrecondition` when
/// the ranks disagree in [`Communicator::agree`].
pub trait Communicator: Send + Sync {
    /// This process's rank, 0-based.
    fn rank(&self) -> usize;
    /// Number of ranks.
    fn size(&self) -> usize;
    /// Reduces `buf` element-wise over all ranks with `op`; every rank gets the result in
    /// `buf` (`MPI_Allreduce`).
    fn allreduce(&self, what: &str, buf: HostBuf, op: ReduceOp) -> Result<()>;
    /// Reduces `send` element-wise over all ranks with `op` into `recv` on every rank
    /// (`MPI_Allreduce` with distinct buffers: the input tensor's own memory is sent and the
    /// output's is received into, with no copy). `send` and `recv` have the same dtype and
    /// length, else InvalidArgument. The default copies `send` into `recv` and calls
    /// [`Communicator::allreduce`].
    ///
    /// # Safety
    /// An implementation may hand both buffers to a transport that can still read `send` and
    /// write `recv` after it returned an error (MPI cannot cancel a collective that timed
    /// out). When this returns `Err`, the caller must neither free nor reuse the memory of
    /// either buffer (leak it).
    unsafe fn allreduce_into(&self, what: &str, send: HostSlice, mut recv: HostBuf, op: ReduceOp) -> Result<()> {
        copy_into(what, send, &mut recv)?;
        self.allreduce(what, recv, op)
    }
    /// Reduces `buf` over all ranks with `op` into `root`'s `buf` (`MPI_Reduce`); the other
    /// ranks' `buf` is left as it was.
    fn reduce(&self, what: &str, buf: HostBuf, op: ReduceOp, root: usize) -> Result<()>;
    /// Copies `root`'s `buf` into every rank's `buf` (`MPI_Bcast`).
    fn broadcast(&self, what: &str, buf: HostBuf, root: usize) -> Result<()>;
    /// Blocks until every rank has called it (`MPI_Barrier`).
    fn barrier(&self, what: &str) -> Result<()>;

    /// How long this communicator waits for its peers before a call fails
    /// (`OXIFLOW_MPI_TIMEOUT` for the MPI transport); a device that moves a collective's
    /// data itself (NCCL on a CUDA GPU) waits as long. `None` (this default): no limit of
    /// its own.
    fn timeout(&self) -> Option<std::time::Duration> {
        None
    }

    /// Checks that every rank is about to run the same collective: `key` (a hash of op,
    /// node name, dtype and length) is compared over all ranks with one small all-reduce
    /// of `[key, !key]` under `Max` (a rank whose key differs sees a maximum that is not
    /// its own in one of the two). FailedPrecondition naming `what` when they differ: on
    /// every rank, so no rank goes on to mix its data with another collective's.
    fn agree(&self, what: &str, key: u64) -> Result<()> {
        let mut v = [key as i64, !key as i64];
        self.allreduce(what, HostBuf::I64(&mut v), ReduceOp::Max)?;
        if v != [key as i64, !key as i64] {
            return Err(OxiflowError::FailedPrecondition(format!(
                "{what} on rank {} of {}: the ranks are not running the same collective here (another rank built a different graph, runs other fetches, or moves this collective's data another way: NCCL on a GPU against MPI on the host); collectives must be built, placed and run identically on every rank",
                self.rank(),
                self.size()
            )));
        }
        Ok(())
    }

    /// Point-to-point messages (MPI's `MPI_Isend`/`MPI_Irecv`, then a wait for all): sends
    /// each `(buf, dest)` of `sends` to rank `dest` and receives into each `(buf, src)` of
    /// `recvs` a message of exactly `buf`'s length and dtype from rank `src`, all with
    /// `tag`, posted together and returned when every one has completed (so two ranks that
    /// send to each other, or a ring, do not deadlock). Messages between two ranks with one
    /// tag arrive in the order they were posted. Only the ranks named take part (not a
    /// collective). The point-to-point ops (`ops/p2p.rs`) first exchange a key with each
    /// peer ([`Communicator::exchange`] of `I64` pairs on their own tag), so a receive
    /// never gets a message of another length. Errors: `DeadlineExceeded` naming `what`,
    /// this rank and the peers when they do not answer within the implementation's
    /// timeout; `Unimplemented` (this default) for a communicator without messages.
    fn exchange(&self, what: &str, sends: Vec<(HostBuf, usize)>, recvs: Vec<(HostBuf, usize)>, tag: i32) -> Result<()> {
        let _ = (sends, recvs, tag);
        Err(OxiflowError::Unimplemented(format!("{what}: this communicator has no point-to-point messages")))
    }

    /// Concatenates every rank's `send` (all of one length and dtype), in rank order, into
    /// `root`'s `recv` (`MPI_Gather`; `recv` holds `size()` times `send`'s length there and
    /// is not touched elsewhere). Collective. `Unimplemented` by default.
    fn gather(&self, what: &str, send: HostBuf, recv: HostBuf, root: usize) -> Result<()> {
        let _ = (send, recv, root);
        Err(OxiflowError::Unimplemented(format!("{what}: this communicator has no gather")))
    }

    /// The inverse of [`Communicator::gather`] (`MPI_Scatter`): rank `q` gets slice `q` of
    /// `root`'s `send` (`size()` slices of `recv`'s length) in its `recv`; `send` is read on
    /// `root` only. Collective. `Unimplemented` by default.
    fn scatter(&self, what: &str, send: HostBuf, recv: HostBuf, root: usize) -> Result<()> {
        let _ = (send, recv, root);
        Err(OxiflowError::Unimplemented(format!("{what}: this communicator has no scatter")))
    }
}

/// Copies `send` into `recv`; InvalidArgument naming `what` when their dtypes or lengths
/// differ.
pub fn copy_into(what: &str, send: HostSlice, recv: &mut HostBuf) -> Result<()> {
    fn copy<T: Copy>(what: &str, s: &[T], r: &mut [T]) -> Result<()> {
        if s.len() != r.len() {
            return Err(OxiflowError::InvalidArgument(format!("{what}: send buffer has {} elements, receive buffer {}", s.len(), r.len())));
        }
        r.copy_from_slice(s);
        Ok(())
    }
    match (send, recv) {
        (HostSlice::F32(s), HostBuf::F32(r)) => copy(what, s, r),
        (HostSlice::F64(s), HostBuf::F64(r)) => copy(what, s, r),
        (HostSlice::I32(s), HostBuf::I32(r)) => copy(what, s, r),
        (HostSlice::I64(s), HostBuf::I64(r)) => copy(what, s, r),
        _ => Err(OxiflowError::InvalidArgument(format!("{what}: send and receive buffers have different dtypes"))),
    }
}

static COMMUNICATOR: RwLock<Option<Arc<dyn Communicator>>> = RwLock::new(None);

/// Makes `c` the process's communicator (`None`: none, after `mpi_finalize`).
pub fn set_communicator(c: Option<Arc<dyn Communicator>>) {
    *COMMUNICATOR.write().unwrap_or_else(|p| p.into_inner()) = c;
}

/// The process's communicator; FailedPrecondition naming `what` when there is none (MPI
/// not initialised, or finalised).
pub fn communicator(what: &str) -> Result<Arc<dyn Communicator>> {
    COMMUNICATOR
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
        .ok_or_else(|| OxiflowError::FailedPrecondition(format!("{what}: MPI is not initialized (call mpi_init() first) or was finalized")))
}

/// Whether ops of type `op` are collectives, which every rank must run in the same order
/// (the session chains them in node order).
pub fn is_collective(op: &str) -> bool {
    op.starts_with("Mpi")
}
