//! rsmpi's side: MPI's lifetime, the non-blocking collectives and point-to-point messages
//! with a timeout.

use crate::census::{self, Census};
use mpi::collective::SystemOperation;
use mpi::datatype::Equivalence;
use mpi::request::{Request, StaticScope};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use oxiflow_core::collective::{set_communicator, Communicator as Collectives, HostBuf, HostSlice, ReduceOp};
use oxiflow_core::error::{OxiflowError, Result};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// rsmpi's universe while MPI runs (dropping it calls `MPI_Finalize`), and whether MPI was
/// finalized.
struct State {
    universe: Option<mpi::environment::Universe>,
    finalized: bool,
    /// Rank and size within this host (`MPI_Comm_split_type` with `MPI_COMM_TYPE_SHARED`).
    local: (usize, usize),
    /// How long a wait polls before it fails (`OXIFLOW_MPI_TIMEOUT`, read by `init`).
    timeout: Duration,
}

static STATE: Mutex<State> = Mutex::new(State { universe: None, finalized: false, local: (0, 1), timeout: Duration::from_secs(60) });

fn state() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

/// See the crate's stub of the same name for the contract.
pub fn init() -> Result<bool> {
    let mut st = state();
    if st.finalized {
        return Err(OxiflowError::FailedPrecondition("mpi_init: MPI was finalized in this process and cannot start again".into()));
    }
    if st.universe.is_some() {
        return Ok(false);
    }
    let (universe, _threading) = mpi::initialize_with_threading(mpi::Threading::Multiple)
        .ok_or_else(|| OxiflowError::FailedPrecondition("mpi_init: MPI was initialized by someone else in this process".into()))?;
    let timeout = std::env::var("OXIFLOW_MPI_TIMEOUT").ok().and_then(|s| s.trim().parse::<f64>().ok()).filter(|t| *t > 0.0).unwrap_or(60.0);
    let world = universe.world();
    let host = world.split_shared(world.rank());
    st.local = (host.rank() as usize, host.size() as usize);
    let comm = MpiComm { rank: world.rank() as usize, size: world.size() as usize, timeout: Duration::from_secs_f64(timeout), census: Census::new(&world) };
    st.timeout = Duration::from_secs_f64(timeout);
    st.universe = Some(universe);
    set_communicator(Some(Arc::new(comm)));
    Ok(true)
}

/// See the crate's stub.
pub fn finalize() -> Result<()> {
    let mut st = state();
    let Some(u) = st.universe.take() else {
        return Err(OxiflowError::FailedPrecondition("mpi_finalize: MPI is not initialized".into()));
    };
    set_communicator(None);
    crate::ps::release_all();
    drop(u);
    st.finalized = true;
    Ok(())
}

/// See the crate's stub.
pub fn is_initialized() -> bool {
    state().universe.is_some()
}

/// See the crate's stub.
pub fn is_finalized() -> bool {
    state().finalized
}

fn running() -> Result<()> {
    if state().universe.is_none() {
        return Err(OxiflowError::FailedPrecondition("MPI is not initialized (call mpi_init() first) or was finalized".into()));
    }
    Ok(())
}

/// See the crate's stub.
pub fn rank() -> Result<usize> {
    running()?;
    Ok(SimpleCommunicator::world().rank() as usize)
}

/// See the crate's stub.
pub fn size() -> Result<usize> {
    running()?;
    Ok(SimpleCommunicator::world().size() as usize)
}

/// The timeout of every MPI wait (`OXIFLOW_MPI_TIMEOUT` seconds, default 60).
pub(crate) fn timeout() -> Duration {
    state().timeout
}

/// See the crate's stub.
pub fn local_rank_size() -> Result<(usize, usize)> {
    running()?;
    Ok(state().local)
}

/// How long a wait polls its request back to back (yielding the core between polls) before
/// it sleeps between polls: the ranks of a step usually meet within this time, and a sleep
/// of even a few microseconds costs tens of them (the timer's slack).
const BUSY_POLL: Duration = Duration::from_millis(50);

/// Polls `reqs` until all complete (`true`), or forgets the pending ones after `timeout`
/// (`false`: they and their buffers then belong to MPI, which cannot cancel them). OpenMPI
/// progresses a non-blocking call only inside `test`: it polls back to back for
/// [`BUSY_POLL`] (yielding the core, so ranks that share it run), then sleeps between polls,
/// at most 1 ms.
pub(crate) fn poll_all<D: ?Sized>(reqs: Vec<Request<'static, D, StaticScope>>, timeout: Duration) -> bool {
    let start = Instant::now();
    let mut pending = reqs;
    let mut pause = Duration::from_micros(1);
    loop {
        pending = pending.into_iter().filter_map(|r| r.test().err()).collect();
        if pending.is_empty() {
            return true;
        }
        if start.elapsed() > timeout {
            pending.into_iter().for_each(std::mem::forget);
            return false;
        }
        if start.elapsed() < BUSY_POLL {
            std::thread::yield_now();
        } else {
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(1));
        }
    }
}

/// A duplicate of `MPI_COMM_WORLD` used from several threads (the parameter server's
/// thread and rank 0's training loop; the stall census from whichever thread timed out).
pub(crate) struct SharedComm(pub SimpleCommunicator);
// SAFETY: MPI runs with MPI_THREAD_MULTIPLE (`init` asks for it), so one communicator may be
// used by several threads at once; rsmpi's handle is a plain MPI_Comm.
unsafe impl Send for SharedComm {}
// SAFETY: as above.
unsafe impl Sync for SharedComm {}

/// `MPI_Iallreduce` of `buf` in place over `comm`, polled for `timeout`: `false` when it
/// timed out (its leaked copies of `buf` then belong to MPI).
pub(crate) fn allreduce_on<T: Equivalence + Copy + 'static>(comm: &SimpleCommunicator, buf: &mut [T], op: SystemOperation, timeout: Duration) -> bool {
    let (send, recv) = (leak(buf), leak(buf));
    let (sp, rp) = (send as *mut [T], recv as *mut [T]);
    if !poll_all(vec![comm.immediate_all_reduce_into(StaticScope, &*send, recv, op)], timeout) {
        return false;
    }
    // SAFETY: the request completed; both buffers came from `leak`.
    unsafe {
        buf.copy_from_slice(&*rp);
        reclaim(sp);
        reclaim(rp);
    }
    true
}

/// `MPI_Ibcast` of `root`'s `buf` over `comm`, polled for `timeout`: `false` when it timed
/// out (its leaked copy of `buf` then belongs to MPI).
pub(crate) fn broadcast_on<T: Equivalence + Copy + 'static>(comm: &SimpleCommunicator, buf: &mut [T], root: usize, timeout: Duration) -> bool {
    let data = leak(buf);
    let dp = data as *mut [T];
    if !poll_all(vec![comm.process_at_rank(root as i32).immediate_broadcast_into(StaticScope, data)], timeout) {
        return false;
    }
    // SAFETY: the request completed; the buffer came from `leak`.
    unsafe {
        buf.copy_from_slice(&*dp);
        reclaim(dp);
    }
    true
}

/// `MPI_COMM_WORLD` as the collectives' communicator.
struct MpiComm {
    rank: usize,
    size: usize,
    timeout: Duration,
    /// Asked who is missing when a wait times out.
    census: Census,
}

fn system_op(op: ReduceOp) -> SystemOperation {
    match op {
        ReduceOp::Sum => SystemOperation::sum(),
        ReduceOp::Max => SystemOperation::max(),
        ReduceOp::Min => SystemOperation::min(),
    }
}

/// A `'static` copy of `v` for a non-blocking call (freed by [`reclaim`] once the call
/// completed; leaked when it did not, as MPI may still write it).
pub(crate) fn leak<T: Copy>(v: &[T]) -> &'static mut [T] {
    Box::leak(v.to_vec().into_boxed_slice())
}

/// Frees a buffer made by [`leak`].
///
/// # Safety
/// `b` came from [`leak`] and no request uses it any more.
pub(crate) unsafe fn reclaim<T>(b: *mut [T]) {
    drop(unsafe { Box::from_raw(b) });
}

impl MpiComm {
    /// Polls `req` until it completes, or fails after the timeout (the request and its
    /// buffers are then left to MPI).
    fn wait<D: ?Sized>(&self, what: &str, req: Request<'static, D, StaticScope>) -> Result<()> {
        if poll_all(vec![req], self.timeout) {
            return Ok(());
        }
        Err(self.timed_out(what, "the other ranks did not all join", "", "the collective"))
    }

    /// DeadlineExceeded for a wait in `what` that timed out: `why`, the timeout, `hint`, the
    /// stall census's finding, and that MPI cannot cancel `pending`.
    fn timed_out(&self, what: &str, why: &str, hint: &str, pending: &str) -> OxiflowError {
        OxiflowError::DeadlineExceeded(format!(
            "{what} on rank {} of {}: {why} within {:.0} s (OXIFLOW_MPI_TIMEOUT){hint}; {}; MPI cannot cancel {pending}, so end the job",
            self.rank,
            self.size,
            self.timeout.as_secs_f64(),
            self.stall_census(what)
        ))
    }

    /// The stall census's finding after a timed-out wait in `what` ([`census`]), as a
    /// clause of the error.
    fn stall_census(&self, what: &str) -> String {
        let grace = census::grace(self.timeout);
        match self.census.run(self.rank, self.size, what, grace) {
            Some(f) => format!("stall census: {}", census::describe(&f, grace)),
            None => "the stall census ran at this process's first timeout".to_string(),
        }
    }

    fn allreduce_t<T: Equivalence + Copy + 'static>(&self, what: &str, buf: &mut [T], op: ReduceOp) -> Result<()> {
        if allreduce_on(&SimpleCommunicator::world(), buf, system_op(op), self.timeout) {
            return Ok(());
        }
        Err(self.timed_out(what, "the other ranks did not all join", "", "the collective"))
    }

    /// `MPI_Iallreduce` from `send` into `recv`, the caller's own buffers (no copy).
    ///
    /// # Safety
    /// On `Err` the caller leaks both buffers ([`Collectives::allreduce_into`]'s contract):
    /// a timed-out request may still read `send` and write `recv`.
    unsafe fn allreduce_into_t<T: Equivalence + Copy + 'static>(&self, what: &str, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        if send.len() != recv.len() {
            return Err(OxiflowError::InvalidArgument(format!("{what}: send buffer has {} elements, receive buffer {}", send.len(), recv.len())));
        }
        // SAFETY: the request either completes inside `wait` or, on a timeout, is forgotten
        // with both buffers, which the caller then never frees (the contract above), so
        // they outlive every access MPI makes.
        let (send, recv): (&'static [T], &'static mut [T]) =
            unsafe { (std::slice::from_raw_parts(send.as_ptr(), send.len()), std::slice::from_raw_parts_mut(recv.as_mut_ptr(), recv.len())) };
        let req = SimpleCommunicator::world().immediate_all_reduce_into(StaticScope, send, recv, system_op(op));
        self.wait(what, req)
    }

    fn reduce_t<T: Equivalence + Copy + 'static>(&self, what: &str, buf: &mut [T], op: ReduceOp, root: usize) -> Result<()> {
        let world = SimpleCommunicator::world();
        let root_proc = world.process_at_rank(root as i32);
        let send = leak(buf);
        let sp = send as *mut [T];
        if self.rank == root {
            let recv = leak(buf);
            let rp = recv as *mut [T];
            let req = root_proc.immediate_reduce_into_root(StaticScope, &*send, recv, system_op(op));
            self.wait(what, req)?;
            // SAFETY: the request completed; the buffer came from `leak`.
            unsafe {
                buf.copy_from_slice(&*rp);
                reclaim(rp);
            }
        } else {
            let req = root_proc.immediate_reduce_into(StaticScope, &*send, system_op(op));
            self.wait(what, req)?;
        }
        // SAFETY: as above.
        unsafe { reclaim(sp) };
        Ok(())
    }

    fn broadcast_t<T: Equivalence + Copy + 'static>(&self, what: &str, buf: &mut [T], root: usize) -> Result<()> {
        if broadcast_on(&SimpleCommunicator::world(), buf, root, self.timeout) {
            return Ok(());
        }
        Err(self.timed_out(what, "the other ranks did not all join", "", "the collective"))
    }
}

/// The elements of `buf` as bytes (point-to-point messages, gather and scatter travel as
/// `MPI_UINT8_T`; the ops check that both ends agree on dtype and length first).
fn bytes(buf: HostBuf<'_>) -> &mut [u8] {
    fn cast<T: Copy>(b: &mut [T]) -> &mut [u8] {
        // SAFETY: `T` is f32, f64, i32 or i64: no padding, and every byte pattern is a
        // valid value of `T` and of `u8`; the slice covers exactly `b`'s memory.
        unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(b)) }
    }
    match buf {
        HostBuf::F32(b) => cast(b),
        HostBuf::F64(b) => cast(b),
        HostBuf::I32(b) => cast(b),
        HostBuf::I64(b) => cast(b),
    }
}

impl MpiComm {
    /// Polls every request of `reqs` until all complete, or fails after the timeout naming
    /// the `peers` (the pending requests and their buffers are then left to MPI).
    fn wait_all(&self, what: &str, peers: &[usize], reqs: Vec<Request<'static, [u8], StaticScope>>) -> Result<()> {
        if poll_all(reqs, self.timeout) {
            return Ok(());
        }
        let mut peers = peers.to_vec();
        peers.sort_unstable();
        peers.dedup();
        let why = format!("the messages with rank(s) {peers:?} did not complete");
        Err(self.timed_out(what, &why, ": a peer runs other MPI ops, did not build the matching op (or its gradient), or hangs", "them"))
    }

    fn check_rank(&self, what: &str, r: usize) -> Result<()> {
        if r >= self.size {
            return Err(OxiflowError::InvalidArgument(format!("{what}: rank {r} is not a rank of this job (ranks 0 to {})", self.size - 1)));
        }
        Ok(())
    }

    fn gather_bytes(&self, what: &str, send: &[u8], recv: &mut [u8], root: usize) -> Result<()> {
        self.check_rank(what, root)?;
        if send.is_empty() {
            // nothing to move, and every rank knows it (the shapes are static and the same on
            // every rank): OpenMPI's root would see one dangling pointer as both buffers and
            // abort the job (MPI_ERR_ARG under MPI_ERRORS_ARE_FATAL)
            return Ok(());
        }
        let world = SimpleCommunicator::world();
        let root_proc = world.process_at_rank(root as i32);
        let s = leak(send);
        let sp = s as *mut [u8];
        if self.rank == root {
            if recv.len() != send.len() * self.size {
                return Err(OxiflowError::Internal(format!("{what}: gather into {} bytes of {} from each of {} ranks", recv.len(), send.len(), self.size)));
            }
            let r = leak(recv);
            let rp = r as *mut [u8];
            self.wait(what, root_proc.immediate_gather_into_root(StaticScope, &*s, r))?;
            // SAFETY: the request completed; the buffer came from `leak`.
            unsafe {
                recv.copy_from_slice(&*rp);
                reclaim(rp);
            }
        } else {
            self.wait(what, root_proc.immediate_gather_into(StaticScope, &*s))?;
        }
        // SAFETY: as above.
        unsafe { reclaim(sp) };
        Ok(())
    }

    fn scatter_bytes(&self, what: &str, send: &[u8], recv: &mut [u8], root: usize) -> Result<()> {
        self.check_rank(what, root)?;
        if recv.is_empty() {
            // as in `gather_bytes`: an empty scatter would abort the job in OpenMPI
            return Ok(());
        }
        let world = SimpleCommunicator::world();
        let root_proc = world.process_at_rank(root as i32);
        let r = leak(recv);
        let rp = r as *mut [u8];
        if self.rank == root {
            if send.len() != recv.len() * self.size {
                return Err(OxiflowError::Internal(format!("{what}: scatter of {} bytes into {} for each of {} ranks", send.len(), recv.len(), self.size)));
            }
            let s = leak(send);
            let sp = s as *mut [u8];
            self.wait(what, root_proc.immediate_scatter_into_root(StaticScope, &*s, r))?;
            // SAFETY: the request completed; the buffer came from `leak`.
            unsafe { reclaim(sp) };
        } else {
            self.wait(what, root_proc.immediate_scatter_into(StaticScope, r))?;
        }
        // SAFETY: as above.
        unsafe {
            recv.copy_from_slice(&*rp);
            reclaim(rp);
        }
        Ok(())
    }
}

impl Collectives for MpiComm {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn allreduce(&self, what: &str, buf: HostBuf, op: ReduceOp) -> Result<()> {
        match buf {
            HostBuf::F32(b) => self.allreduce_t(what, b, op),
            HostBuf::F64(b) => self.allreduce_t(what, b, op),
            HostBuf::I32(b) => self.allreduce_t(what, b, op),
            HostBuf::I64(b) => self.allreduce_t(what, b, op),
        }
    }

    unsafe fn allreduce_into(&self, what: &str, send: HostSlice, recv: HostBuf, op: ReduceOp) -> Result<()> {
        // SAFETY: the caller keeps the contract of `allreduce_into` (leaks on `Err`).
        unsafe {
            match (send, recv) {
                (HostSlice::F32(s), HostBuf::F32(r)) => self.allreduce_into_t(what, s, r, op),
                (HostSlice::F64(s), HostBuf::F64(r)) => self.allreduce_into_t(what, s, r, op),
                (HostSlice::I32(s), HostBuf::I32(r)) => self.allreduce_into_t(what, s, r, op),
                (HostSlice::I64(s), HostBuf::I64(r)) => self.allreduce_into_t(what, s, r, op),
                _ => Err(OxiflowError::InvalidArgument(format!("{what}: send and receive buffers have different dtypes"))),
            }
        }
    }

    fn reduce(&self, what: &str, buf: HostBuf, op: ReduceOp, root: usize) -> Result<()> {
        match buf {
            HostBuf::F32(b) => self.reduce_t(what, b, op, root),
            HostBuf::F64(b) => self.reduce_t(what, b, op, root),
            HostBuf::I32(b) => self.reduce_t(what, b, op, root),
            HostBuf::I64(b) => self.reduce_t(what, b, op, root),
        }
    }

    fn broadcast(&self, what: &str, buf: HostBuf, root: usize) -> Result<()> {
        match buf {
            HostBuf::F32(b) => self.broadcast_t(what, b, root),
            HostBuf::F64(b) => self.broadcast_t(what, b, root),
            HostBuf::I32(b) => self.broadcast_t(what, b, root),
            HostBuf::I64(b) => self.broadcast_t(what, b, root),
        }
    }

    fn barrier(&self, what: &str) -> Result<()> {
        let req = SimpleCommunicator::world().immediate_barrier();
        self.wait(what, req)
    }

    fn timeout(&self) -> Option<Duration> {
        Some(self.timeout)
    }

    fn exchange(&self, what: &str, sends: Vec<(HostBuf, usize)>, recvs: Vec<(HostBuf, usize)>, tag: i32) -> Result<()> {
        for &(_, p) in sends.iter().chain(&recvs) {
            self.check_rank(what, p)?;
        }
        let world = SimpleCommunicator::world();
        let peers: Vec<usize> = sends.iter().chain(&recvs).map(|&(_, p)| p).collect();
        let mut reqs = Vec::with_capacity(peers.len());
        let mut sent = Vec::with_capacity(sends.len());
        for (buf, dest) in sends {
            let s = leak(bytes(buf));
            sent.push(s as *mut [u8]);
            reqs.push(world.process_at_rank(dest as i32).immediate_send_with_tag(StaticScope, &*s, tag));
        }
        let mut received = Vec::with_capacity(recvs.len());
        for (buf, src) in recvs {
            let buf = bytes(buf);
            let r = leak(buf);
            received.push((buf, r as *mut [u8]));
            reqs.push(world.process_at_rank(src as i32).immediate_receive_into_with_tag(StaticScope, r, tag));
        }
        self.wait_all(what, &peers, reqs)?;
        // SAFETY: every request completed; the buffers came from `leak`.
        unsafe {
            for (buf, rp) in received {
                buf.copy_from_slice(&*rp);
                reclaim(rp);
            }
            for sp in sent {
                reclaim(sp);
            }
        }
        Ok(())
    }

    fn gather(&self, what: &str, send: HostBuf, recv: HostBuf, root: usize) -> Result<()> {
        self.gather_bytes(what, bytes(send), bytes(recv), root)
    }

    fn scatter(&self, what: &str, send: HostBuf, recv: HostBuf, root: usize) -> Result<()> {
        self.scatter_bytes(what, bytes(send), bytes(recv), root)
    }
}
