//! Asynchronous training over MPI: a parameter server on rank 0 (TensorFlow 1's
//! parameter-server pattern, `tf.train.replica_device_setter` with between-graph
//! replication, without a synchronizing optimizer).
//!
//! Rank 0 runs a background thread that holds one flat Float64 parameter vector
//! (initialised from rank 0's values by [`start`]) and serves requests from every rank,
//! rank 0's own training loop included (it sends messages to itself, which
//! `MPI_THREAD_MULTIPLE` allows), one request at a time in the order they arrive:
//!
//! - [`push`]: applies the gradient at once (`params -= lr * grad`, or TF's
//!   `MomentumOptimizer` update with `momentum > 0`: `accum = momentum * accum + grad;
//!   params -= lr * accum`, one accumulator on the server) and replies with the new
//!   parameters;
//! - [`pull`]: replies with the parameters;
//! - [`close`]: counts the ranks that finished; once all have, every rank gets the final
//!   parameters and the thread exits.
//!
//! Staleness: the server counts the updates it applied (the version, 0 at [`start`]) and
//! remembers, per rank, the version of the parameters it last sent that rank (by [`start`],
//! [`push`] or [`pull`]). A push's staleness is the number of updates other ranks made
//! between then and this push: the gradient was computed from parameters that many updates
//! old. One rank alone always has staleness 0; with `n` ranks taking turns it is `n - 1`;
//! the mean over all pushes of all ranks is at most `n - 1` (each update is counted at most
//! once by each other rank).
//!
//! Lifetime: [`start`] and [`close`] are collective (every rank calls them, in the same
//! order as other servers' and collectives); [`push`] and [`pull`] are not. Each server
//! talks on its own duplicate of `MPI_COMM_WORLD`, so its messages never meet the
//! collectives' or the point-to-point ops' (which use `MPI_COMM_WORLD`). A wait longer than
//! `OXIFLOW_MPI_TIMEOUT` seconds fails with DeadlineExceeded naming the call and the rank
//! (the server is then unusable on that rank). `finalize` stops and frees every server that
//! was not closed, so it never waits for one.

use oxiflow_core::error::Result;

/// What the server reported with a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reply {
    /// Updates applied so far (all ranks), this one included for a push.
    pub version: u64,
    /// For a push, the updates other ranks applied since the server last sent this rank
    /// its parameters; 0 otherwise.
    pub staleness: u64,
}

/// Starts a parameter server (collective: every rank calls it with its own `params`, of one
/// length on every rank, and the same `learning_rate` (finite, > 0) and `momentum` (in
/// `[0, 1)`)). Rank 0's `params` become the server's and are copied into every rank's
/// `params`. Returns the server's id for [`push`], [`pull`] and [`close`]. Errors, raised on
/// every rank alike: FailedPrecondition before `init` or in a build without MPI;
/// InvalidArgument for bad hyperparameters or ranks that disagree on the length or on
/// them; DeadlineExceeded when a rank does not call it in time.
pub fn start(params: &mut [f64], learning_rate: f64, momentum: f64) -> Result<u64> {
    imp::start(params, learning_rate, momentum)
}

/// Sends this rank's gradient `grad` (one element per parameter) to the server, which
/// applies it; `params` receives the updated parameters. Errors: InvalidArgument naming
/// the lengths when `grad` or `params` does not have the server's length (nothing is sent:
/// the server stays usable), FailedPrecondition for an unknown or closed id,
/// DeadlineExceeded when the server does not reply in time.
pub fn push(id: u64, grad: &[f64], params: &mut [f64]) -> Result<Reply> {
    imp::push(id, grad, params)
}

/// Copies the server's current parameters into `params` (its staleness baseline for this
/// rank becomes the current version). Errors as [`push`].
pub fn pull(id: u64, params: &mut [f64]) -> Result<Reply> {
    imp::pull(id, params)
}

/// Ends this rank's use of the server (collective: returns once every rank closed it, with
/// the final parameters in `params` and the total number of updates as the version). The
/// id is invalid afterwards, also on error. Errors as [`push`]; a rank that does not close
/// in time makes the others fail with DeadlineExceeded (rank 0's names it).
pub fn close(id: u64, params: &mut [f64]) -> Result<Reply> {
    imp::close(id, params)
}

/// The number of parameters of server `id`. FailedPrecondition for an unknown or closed id.
pub fn len(id: u64) -> Result<usize> {
    imp::len(id)
}

/// Stops and frees every server not closed yet (called by `finalize` while MPI still runs).
#[cfg(feature = "mpi")]
pub(crate) fn release_all() {
    imp::release_all()
}

#[cfg(not(feature = "mpi"))]
mod imp {
    use super::Reply;
    use oxiflow_core::error::{OxiflowError, Result};

    fn not_built<T>() -> Result<T> {
        Err(OxiflowError::FailedPrecondition(format!("ParameterServer: {}", crate::NOT_BUILT)))
    }
    pub fn start(_: &mut [f64], _: f64, _: f64) -> Result<u64> {
        not_built()
    }
    pub fn push(_: u64, _: &[f64], _: &mut [f64]) -> Result<Reply> {
        not_built()
    }
    pub fn pull(_: u64, _: &mut [f64]) -> Result<Reply> {
        not_built()
    }
    pub fn close(_: u64, _: &mut [f64]) -> Result<Reply> {
        not_built()
    }
    pub fn len(_: u64) -> Result<usize> {
        not_built()
    }
}

#[cfg(feature = "mpi")]
mod imp {
    use super::Reply;
    use crate::transport::{self, leak, reclaim, SharedComm};
    use mpi::collective::SystemOperation;
    use mpi::datatype::Equivalence;
    use mpi::request::{Request, StaticScope};
    use mpi::topology::SimpleCommunicator;
    use mpi::traits::*;
    use oxiflow_core::error::{OxiflowError, Result};
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex, MutexGuard};
    use std::thread::JoinHandle;
    use std::time::{Duration, Instant};

    /// Requests to the server and its replies (on the server's own communicator).
    const TAG_REQUEST: i32 = 1;
    const TAG_REPLY: i32 = 2;
    /// A request is `[op, payload...]`.
    const OP_PUSH: f64 = 1.0;
    const OP_PULL: f64 = 2.0;
    const OP_DONE: f64 = 3.0;
    /// A reply is `[status, version, staleness or detail, params...]`.
    const HEADER: usize = 3;
    const OK: f64 = 0.0;
    const BAD_LENGTH: f64 = 1.0;
    const BAD_OP: f64 = 2.0;

    /// The server's own communicator, shared by its thread and rank 0's training loop.
    type Comm = SharedComm;

    /// What rank 0's training loop shares with its server thread.
    struct Shared {
        stop: AtomicBool,
        /// Ranks that closed the server.
        done: Mutex<Vec<bool>>,
    }

    /// One server as seen by one rank.
    struct Ps {
        rank: usize,
        size: usize,
        n: usize,
        timeout: Duration,
        comm: Arc<Comm>,
        /// Held during a request (one at a time per rank, so replies match); `true` once a
        /// request timed out (its buffers belong to MPI, the server is unusable here).
        broken: Mutex<bool>,
        /// Rank 0 only: the server thread (taken by `close` or `release_all`).
        server: Mutex<Option<(Arc<Shared>, JoinHandle<()>)>>,
    }

    struct Registry {
        next: u64,
        servers: BTreeMap<u64, Arc<Ps>>,
    }

    static REGISTRY: Mutex<Registry> = Mutex::new(Registry { next: 1, servers: BTreeMap::new() });

    fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn get(what: &str, id: u64) -> Result<Arc<Ps>> {
        lock(&REGISTRY).servers.get(&id).cloned().ok_or_else(|| closed(what, id))
    }

    fn closed(what: &str, id: u64) -> OxiflowError {
        OxiflowError::FailedPrecondition(format!("{what}: parameter server {id} is closed (or was never started, or MPI was finalized)"))
    }

    use crate::transport::poll_all as wait_all;

    fn deadline(what: &str, rank: usize, size: usize, timeout: Duration, why: &str) -> OxiflowError {
        OxiflowError::DeadlineExceeded(format!(
            "{what} on rank {rank} of {size}: {why} within {:.0} s (OXIFLOW_MPI_TIMEOUT); MPI cannot cancel the messages, so this parameter server is unusable on this rank",
            timeout.as_secs_f64()
        ))
    }

    /// A collective on `comm` over `buf` (`all_reduce` with max, or rank 0's broadcast),
    /// polled with the timeout.
    fn collective<T: Equivalence + Copy + 'static>(comm: &SimpleCommunicator, buf: &mut [T], max: bool, timeout: Duration) -> bool {
        if max {
            transport::allreduce_on(comm, buf, SystemOperation::max(), timeout)
        } else {
            transport::broadcast_on(comm, buf, 0, timeout)
        }
    }

    pub fn start(params: &mut [f64], lr: f64, momentum: f64) -> Result<u64> {
        const WHAT: &str = "ParameterServer";
        let (rank, size) = (transport::rank().map_err(|e| prefixed(WHAT, e))?, transport::size()?);
        let timeout = transport::timeout();
        let world = SimpleCommunicator::world();
        if !wait_all(vec![world.immediate_barrier()], timeout) {
            return Err(deadline(WHAT, rank, size, timeout, "the other ranks did not start the parameter server (a collective call)"));
        }
        let comm = Arc::new(SharedComm(world.duplicate()));
        // every rank checks its own arguments, then all agree on lengths and hyperparameters
        let lr_ok = lr.is_finite() && lr > 0.0;
        let m_ok = momentum.is_finite() && (0.0..1.0).contains(&momentum);
        let (l, m) = (if lr_ok { lr } else { 0.0 }, if m_ok { momentum } else { 0.0 });
        let n = params.len() as f64;
        let mut agreed = [f64::from(!(lr_ok && m_ok)), n, -n, l, -l, m, -m];
        if !collective(&comm.0, &mut agreed, true, timeout) {
            return Err(deadline(WHAT, rank, size, timeout, "the ranks did not agree on the parameters"));
        }
        if !lr_ok || !m_ok {
            return Err(OxiflowError::InvalidArgument(format!(
                "{WHAT}: learning_rate must be finite and > 0 and momentum in [0, 1), got learning_rate = {lr:?}, momentum = {momentum:?} on rank {rank}"
            )));
        }
        if agreed[0] > 0.0 {
            return Err(OxiflowError::InvalidArgument(format!("{WHAT}: another rank passed an invalid learning_rate or momentum (its error says which)")));
        }
        if agreed[1] != -agreed[2] {
            return Err(OxiflowError::InvalidArgument(format!(
                "{WHAT}: the ranks hold different numbers of parameters (from {} to {}; this rank, {rank}, {}): every rank must pass the same variables",
                -agreed[2],
                agreed[1],
                params.len()
            )));
        }
        if agreed[3] != -agreed[4] || agreed[5] != -agreed[6] {
            return Err(OxiflowError::InvalidArgument(format!(
                "{WHAT}: the ranks passed different hyperparameters (learning_rate from {} to {}, momentum from {} to {}): pass the same on every rank",
                -agreed[4], agreed[3], -agreed[6], agreed[5]
            )));
        }
        if !collective(&comm.0, params, false, timeout) {
            return Err(deadline(WHAT, rank, size, timeout, "rank 0's parameters did not arrive"));
        }
        let server = if rank == 0 {
            let shared = Arc::new(Shared { stop: AtomicBool::new(false), done: Mutex::new(vec![false; size]) });
            let (c, s, p) = (comm.clone(), shared.clone(), params.to_vec());
            let thread = std::thread::Builder::new()
                .name("oxiflow-ps".into())
                .spawn(move || Server::new(c, s, p, lr, momentum, size).serve())
                .map_err(|e| OxiflowError::Internal(format!("{WHAT}: cannot start the server thread: {e}")))?;
            Some((shared, thread))
        } else {
            None
        };
        let ps = Arc::new(Ps { rank, size, n: params.len(), timeout, comm, broken: Mutex::new(false), server: Mutex::new(server) });
        let mut reg = lock(&REGISTRY);
        let id = reg.next;
        reg.next += 1;
        reg.servers.insert(id, ps);
        Ok(id)
    }

    fn prefixed(what: &str, e: OxiflowError) -> OxiflowError {
        match e {
            OxiflowError::FailedPrecondition(m) => OxiflowError::FailedPrecondition(format!("{what}: {m}")),
            e => e,
        }
    }

    fn check_len(what: &str, name: &str, got: usize, n: usize) -> Result<()> {
        if got != n {
            return Err(OxiflowError::InvalidArgument(format!("{what}: {name} has {got} elements, but the parameter server holds {n} parameters")));
        }
        Ok(())
    }

    impl Ps {
        /// Sends `msg` to the server and waits for its reply, whose parameters go to `out`.
        fn request(&self, what: &str, msg: Vec<f64>, out: &mut [f64], why: &str) -> Result<Reply> {
            let mut broken = lock(&self.broken);
            if *broken {
                return Err(OxiflowError::FailedPrecondition(format!(
                    "{what}: an earlier call on rank {} timed out: this parameter server is unusable on it",
                    self.rank
                )));
            }
            let recv = leak(&vec![0.0f64; HEADER + self.n]);
            let rp = recv as *mut [f64];
            let send = Box::leak(msg.into_boxed_slice());
            let sp = send as *mut [f64];
            let root = self.comm.0.process_at_rank(0);
            let reqs = vec![root.immediate_receive_into_with_tag(StaticScope, recv, TAG_REPLY), root.immediate_send_with_tag(StaticScope, &*send, TAG_REQUEST)];
            if !wait_all(reqs, self.timeout) {
                *broken = true;
                return Err(deadline(what, self.rank, self.size, self.timeout, why));
            }
            // SAFETY: both requests completed; the buffers came from `leak`.
            let reply = unsafe {
                reclaim(sp);
                let r = (&*rp).to_vec();
                reclaim(rp);
                r
            };
            let detail = reply[2];
            if reply[0] == BAD_LENGTH {
                return Err(OxiflowError::InvalidArgument(format!("{what}: the server received {detail} gradient elements for {} parameters", self.n)));
            }
            if reply[0] != OK {
                return Err(OxiflowError::Internal(format!("{what}: the server refused the request (status {})", reply[0])));
            }
            out.copy_from_slice(&reply[HEADER..]);
            Ok(Reply { version: reply[1] as u64, staleness: detail as u64 })
        }
    }

    const NO_REPLY: &str = "the parameter server on rank 0 did not reply (rank 0 hangs, or left its training loop without closing the server)";

    pub fn push(id: u64, grad: &[f64], params: &mut [f64]) -> Result<Reply> {
        const WHAT: &str = "ps_push";
        let ps = get(WHAT, id)?;
        check_len(WHAT, "the gradient", grad.len(), ps.n)?;
        check_len(WHAT, "the output", params.len(), ps.n)?;
        let mut msg = Vec::with_capacity(grad.len() + 1);
        msg.push(OP_PUSH);
        msg.extend_from_slice(grad);
        ps.request(WHAT, msg, params, NO_REPLY)
    }

    pub fn pull(id: u64, params: &mut [f64]) -> Result<Reply> {
        const WHAT: &str = "ps_pull";
        let ps = get(WHAT, id)?;
        check_len(WHAT, "the output", params.len(), ps.n)?;
        ps.request(WHAT, vec![OP_PULL], params, NO_REPLY)
    }

    pub fn close(id: u64, params: &mut [f64]) -> Result<Reply> {
        const WHAT: &str = "close(ParameterServer)";
        let ps = get(WHAT, id)?;
        check_len(WHAT, "the output", params.len(), ps.n)?;
        lock(&REGISTRY).servers.remove(&id);
        let waiting = "not every rank closed the parameter server (a collective call)";
        let result = ps.request(WHAT, vec![OP_DONE], params, waiting);
        let Some((shared, thread)) = lock(&ps.server).take() else {
            return result;
        };
        // rank 0: the server exits once its last replies are delivered
        let start = Instant::now();
        while !thread.is_finished() && start.elapsed() < ps.timeout {
            std::thread::sleep(Duration::from_micros(200));
        }
        shared.stop.store(true, Ordering::SeqCst);
        let _ = thread.join();
        result.map_err(|e| match e {
            OxiflowError::DeadlineExceeded(m) => {
                let missing: Vec<usize> = lock(&shared.done).iter().enumerate().filter(|(_, d)| !**d).map(|(r, _)| r).collect();
                OxiflowError::DeadlineExceeded(format!("{m}; rank(s) {missing:?} did not close it"))
            }
            e => e,
        })
    }

    pub fn len(id: u64) -> Result<usize> {
        Ok(get("ps_len", id)?.n)
    }

    pub fn release_all() {
        let servers: Vec<Arc<Ps>> = std::mem::take(&mut lock(&REGISTRY).servers).into_values().collect();
        for ps in servers {
            if let Some((shared, thread)) = lock(&ps.server).take() {
                shared.stop.store(true, Ordering::SeqCst);
                let _ = thread.join();
            }
        }
    }

    /// A reply being sent, and its buffer (from `leak`).
    type InFlight = (Request<'static, [f64], StaticScope>, *mut [f64]);

    /// The server thread's state.
    struct Server {
        comm: Arc<Comm>,
        shared: Arc<Shared>,
        params: Vec<f64>,
        /// The momentum accumulator (empty without momentum).
        accum: Vec<f64>,
        lr: f64,
        momentum: f64,
        /// Updates applied.
        version: u64,
        /// Per rank, the version of the parameters last sent to it.
        sent: Vec<u64>,
        /// Replies in flight, with their buffers (from `leak`).
        sends: Vec<InFlight>,
        finished: bool,
    }

    impl Server {
        fn new(comm: Arc<Comm>, shared: Arc<Shared>, params: Vec<f64>, lr: f64, momentum: f64, size: usize) -> Self {
            let accum = if momentum > 0.0 { vec![0.0; params.len()] } else { Vec::new() };
            Server { comm, shared, params, accum, lr, momentum, version: 0, sent: vec![0; size], sends: Vec::new(), finished: false }
        }

        /// Serves requests until every rank closed the server and got its reply, or until
        /// told to stop.
        fn serve(mut self) {
            let mut idle = Instant::now();
            let mut pause = Duration::from_micros(1);
            loop {
                let mut pending = Vec::with_capacity(self.sends.len());
                for (req, buf) in self.sends.drain(..) {
                    match req.test() {
                        // SAFETY: the send completed; the buffer came from `leak`.
                        Ok(_) => unsafe { reclaim(buf) },
                        Err(req) => pending.push((req, buf)),
                    }
                }
                self.sends = pending;
                if self.shared.stop.load(Ordering::SeqCst) {
                    // replies nobody receives stay with MPI (freed with the communicator)
                    self.sends.drain(..).for_each(std::mem::forget);
                    return;
                }
                if self.finished && self.sends.is_empty() {
                    return;
                }
                match self.comm.0.any_process().immediate_matched_probe_with_tag(TAG_REQUEST) {
                    Some((message, status)) => {
                        let count = usize::try_from(status.count(f64::equivalent_datatype())).unwrap_or(0);
                        let mut msg = vec![0.0f64; count];
                        message.matched_receive_into(&mut msg[..]);
                        let src = usize::try_from(status.source_rank()).unwrap_or(usize::MAX);
                        self.handle(src, &msg);
                        idle = Instant::now();
                        pause = Duration::from_micros(1);
                    }
                    None if idle.elapsed() < Duration::from_millis(2) => std::thread::yield_now(),
                    None => {
                        std::thread::sleep(pause);
                        pause = (pause * 2).min(Duration::from_micros(200));
                    }
                }
            }
        }

        fn handle(&mut self, src: usize, msg: &[f64]) {
            if src >= self.sent.len() {
                return;
            }
            let mut status = OK;
            let mut detail = 0.0;
            let op = msg.first().copied().unwrap_or(0.0);
            let payload = msg.get(1..).unwrap_or(&[]);
            if op == OP_PUSH {
                if payload.len() != self.params.len() {
                    (status, detail) = (BAD_LENGTH, payload.len() as f64);
                } else {
                    detail = (self.version - self.sent[src]) as f64;
                    self.apply(payload);
                    self.version += 1;
                    self.sent[src] = self.version;
                }
            } else if op == OP_PULL {
                self.sent[src] = self.version;
            } else if op == OP_DONE {
                let mut done = lock(&self.shared.done);
                done[src] = true;
                if done.iter().all(|d| *d) {
                    drop(done);
                    for r in 0..self.sent.len() {
                        self.reply(r, OK, 0.0);
                    }
                    self.finished = true;
                }
                return;
            } else {
                status = BAD_OP;
            }
            self.reply(src, status, detail);
        }

        /// `params -= lr * grad`, or with momentum TF's `accum = momentum * accum + grad;
        /// params -= lr * accum`.
        fn apply(&mut self, grad: &[f64]) {
            if self.accum.is_empty() {
                for (p, g) in self.params.iter_mut().zip(grad) {
                    *p -= self.lr * g;
                }
            } else {
                for ((p, a), g) in self.params.iter_mut().zip(self.accum.iter_mut()).zip(grad) {
                    *a = self.momentum * *a + g;
                    *p -= self.lr * *a;
                }
            }
        }

        fn reply(&mut self, dest: usize, status: f64, detail: f64) {
            let mut r = Vec::with_capacity(HEADER + self.params.len());
            r.extend_from_slice(&[status, self.version as f64, detail]);
            r.extend_from_slice(&self.params);
            let buf = Box::leak(r.into_boxed_slice());
            let bp = buf as *mut [f64];
            let req = self.comm.0.process_at_rank(dest as i32).immediate_send_with_tag(StaticScope, &*buf, TAG_REPLY);
            self.sends.push((req, bp));
        }
    }
}
