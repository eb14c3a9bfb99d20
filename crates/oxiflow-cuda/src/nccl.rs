//! NCCL, the collective library of CUDA GPUs, loaded at run time: what the GPU path of the
//! collective ops (`MpiAllreduce`, `MpiGroupedAllreduce`, `MpiSum`, `MpiBcast`) calls when
//! their tensors live on a CUDA GPU (`crate::device`'s collective path), as Horovod's GPU
//! operations do. MPI (the core's communicator) only carries NCCL's unique id from rank 0 to
//! the others when a communicator is made.
//!
//! The types are cudarc's (`cudarc::nccl::sys`, bindgen of `nccl.h`); the functions are
//! looked up here with `libloading`, not through cudarc's loader, for two reasons: cudarc
//! asks for `libnccl.so` and versioned names that never include `libnccl.so.2`, the only
//! name the NCCL runtime packages install (Debian's `libnccl2`, PyPI's `nvidia-nccl-cu13`;
//! `libnccl.so` comes with the development package only); and its loader panics when the
//! library or a symbol is missing, which must never reach a user's session. Here a missing
//! library is a reason ([`status`]) and the collectives fall back to host copies over MPI.
//!
//! Communicators are made non-blocking where NCCL allows it (2.14 and newer:
//! `ncclCommInitRankConfig` with `blocking = 0`, as PyTorch's `ProcessGroupNCCL` does when
//! asked): then no NCCL call waits for a peer. A call may answer `ncclInProgress` before its
//! work is on the stream, and [`Comm::settle`] polls `ncclCommGetAsyncError` until it is,
//! for a bounded time, so a peer that never joins or never calls ends in a timeout and an
//! abort, not a hang. With NCCL 2.10 to 2.13 the communicator is blocking
//! (`ncclCommInitRank`).

use crate::error::{CudaError, CudaResult};
use cudarc::driver::sys::CUstream;
use cudarc::nccl::sys::{ncclComm_t, ncclDataType_t, ncclRedOp_t, ncclResult_t, ncclUniqueId};
use oxiflow_core::collective::ReduceOp;
use oxiflow_core::DType;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::{Arc, Mutex, OnceLock};

/// Names tried for the NCCL library, in order, unless `OXIFLOW_NCCL_LIB` names a file.
pub const NCCL_LIBRARIES: &[&str] = &["libnccl.so.2", "libnccl.so"];

/// Oldest NCCL used (2.10, the first with `ncclAvg`, which the `"mean"` reductions use), as
/// `ncclGetVersion` encodes it (`major * 10000 + minor * 100 + patch`).
pub const MIN_VERSION: i32 = 21000;

/// First NCCL with `ncclCommInitRankConfig` and non-blocking communicators (2.14).
pub const NONBLOCKING_VERSION: i32 = 21400;

/// `ncclConfig_t` as NCCL 2.14 laid it out (`size`, `magic`, `version`, `blocking`): NCCL
/// reads the first `size` bytes of the config it is given, checks `magic`, and gives every
/// field newer than `version` its default (`parseCommConfig` in NCCL's init.cc), so this
/// prefix means the same to every NCCL from 2.14 on, whatever its own header adds.
#[repr(C)]
struct ConfigV2_14 {
    size: usize,
    /// `NCCL_CONFIG_INITIALIZER`'s 0xcafebeef.
    magic: u32,
    /// `NCCL_VERSION(2, 14, 0)`.
    version: u32,
    /// 0: non-blocking.
    blocking: c_int,
    /// Padding up to the struct's alignment; NCCL 2.17's `cgaClusterSize`, reset to its
    /// default because `version` is older. Set to `NCCL_CONFIG_UNDEF_INT` all the same.
    undefined: c_int,
}

type Res = ncclResult_t;

/// The NCCL entry points used, resolved once.
pub struct Api {
    _lib: libloading::Library,
    /// `ncclGetVersion`'s answer (e.g. 22703 for 2.27.3).
    pub version: i32,
    /// The library name or path that loaded.
    pub library: String,
    get_unique_id: unsafe extern "C" fn(*mut ncclUniqueId) -> Res,
    comm_init_rank: unsafe extern "C" fn(*mut ncclComm_t, c_int, ncclUniqueId, c_int) -> Res,
    /// NCCL 2.14 and newer.
    comm_init_rank_config: Option<unsafe extern "C" fn(*mut ncclComm_t, c_int, ncclUniqueId, c_int, *mut ConfigV2_14) -> Res>,
    comm_abort: unsafe extern "C" fn(ncclComm_t) -> Res,
    comm_get_async_error: unsafe extern "C" fn(ncclComm_t, *mut Res) -> Res,
    get_error_string: unsafe extern "C" fn(Res) -> *const c_char,
    all_reduce: unsafe extern "C" fn(*const c_void, *mut c_void, usize, ncclDataType_t, ncclRedOp_t, ncclComm_t, CUstream) -> Res,
    reduce: unsafe extern "C" fn(*const c_void, *mut c_void, usize, ncclDataType_t, ncclRedOp_t, c_int, ncclComm_t, CUstream) -> Res,
    broadcast: unsafe extern "C" fn(*const c_void, *mut c_void, usize, ncclDataType_t, c_int, ncclComm_t, CUstream) -> Res,
    group_start: unsafe extern "C" fn() -> Res,
    group_end: unsafe extern "C" fn() -> Res,
}

/// Resolves every entry point of [`Api`] in `lib`; the error names the missing symbol.
fn resolve(lib: libloading::Library, library: String) -> Result<Api, String> {
    macro_rules! sym {
        ($name:literal) => {
            // SAFETY: the field's type is the symbol's C signature in nccl.h (cudarc's
            // bindgen types), unchanged since NCCL 2.4.
            *unsafe { lib.get(concat!($name, "\0").as_bytes()) }.map_err(|e| format!("{library}: no {}: {e}", $name))?
        };
    }
    let get_version: unsafe extern "C" fn(*mut c_int) -> Res = sym!("ncclGetVersion");
    let mut version = 0;
    // SAFETY: ncclGetVersion writes one int.
    let rc = unsafe { get_version(&mut version) };
    if rc != ncclResult_t::ncclSuccess {
        return Err(format!("{library}: ncclGetVersion returned {rc:?}"));
    }
    if version < MIN_VERSION {
        return Err(format!("{library} is NCCL {}, older than 2.10 (the first with ncclAvg)", version_string(version)));
    }
    let comm_init_rank_config = if version >= NONBLOCKING_VERSION { Some(sym!("ncclCommInitRankConfig")) } else { None };
    Ok(Api {
        version,
        comm_init_rank_config,
        get_unique_id: sym!("ncclGetUniqueId"),
        comm_init_rank: sym!("ncclCommInitRank"),
        comm_abort: sym!("ncclCommAbort"),
        comm_get_async_error: sym!("ncclCommGetAsyncError"),
        get_error_string: sym!("ncclGetErrorString"),
        all_reduce: sym!("ncclAllReduce"),
        reduce: sym!("ncclReduce"),
        broadcast: sym!("ncclBroadcast"),
        group_start: sym!("ncclGroupStart"),
        group_end: sym!("ncclGroupEnd"),
        library,
        _lib: lib,
    })
}

/// `22703` -> `"2.27.3"`.
pub fn version_string(v: i32) -> String {
    format!("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100)
}

/// NCCL for this process, or why the GPU collectives go through host memory instead:
/// `OXIFLOW_NCCL=0` turns NCCL off (read at every call, like Horovod's
/// `HOROVOD_GPU_OPERATIONS=MPI`; every rank must agree, else the collectives' agreement
/// check fails); otherwise the library is loaded once per process from `OXIFLOW_NCCL_LIB`
/// (a path) or [`NCCL_LIBRARIES`] on the loader's search path, and must be NCCL 2.10 or
/// newer. Never panics.
pub fn status() -> Result<&'static Api, String> {
    if std::env::var("OXIFLOW_NCCL").as_deref() == Ok("0") {
        return Err("turned off by OXIFLOW_NCCL=0".into());
    }
    static API: OnceLock<Result<Api, String>> = OnceLock::new();
    API.get_or_init(|| {
        let names: Vec<String> = match std::env::var("OXIFLOW_NCCL_LIB").ok().filter(|s| !s.is_empty()) {
            Some(p) => vec![p],
            None => NCCL_LIBRARIES.iter().map(|s| s.to_string()).collect(),
        };
        load(&names)
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// Loads the first of `names` that is NCCL 2.10 or newer with every entry point of [`Api`];
/// else the reason, naming each library tried and what failed, and what to install.
pub fn load(names: &[String]) -> Result<Api, String> {
    let mut tried = Vec::new();
    for name in names {
        // SAFETY: loading NCCL runs its initialisers, as any program linked with it does.
        match unsafe { libloading::Library::new(name) } {
            Err(e) => tried.push(format!("{name}: {e}")),
            Ok(lib) => match resolve(lib, name.clone()) {
                Ok(api) => return Ok(api),
                Err(e) => tried.push(e),
            },
        }
    }
    Err(format!(
        "could not load NCCL ({}); install NCCL 2.10 or newer (Debian: libnccl2; PyPI: nvidia-nccl-cu13) or name it with OXIFLOW_NCCL_LIB",
        tried.join("; ")
    ))
}

impl Api {
    fn check(&self, rc: Res, device: &str, call: &str) -> CudaResult<()> {
        if rc == ncclResult_t::ncclSuccess {
            return Ok(());
        }
        // SAFETY: ncclGetErrorString returns a static C string for every result code.
        let text = unsafe { CStr::from_ptr((self.get_error_string)(rc)) }.to_string_lossy().into_owned();
        Err(CudaError::Nccl { device: device.to_string(), call: call.to_string(), msg: format!("{rc:?}: {text}") })
    }

    /// A new unique id (`ncclGetUniqueId`), made on rank 0 and sent to the others.
    pub fn unique_id(&self, device: &str) -> CudaResult<[u8; 128]> {
        let mut id = ncclUniqueId { internal: [0; 128] };
        // SAFETY: writes the 128-byte id.
        self.check(unsafe { (self.get_unique_id)(&mut id) }, device, "ncclGetUniqueId")?;
        Ok(id.internal.map(|c| c as u8))
    }

    /// Starts joining the communicator of `size` ranks named by `id` as `rank`, on the GPU
    /// whose context is current on this thread. With NCCL 2.14 and newer the communicator
    /// is non-blocking (`ncclCommInitRankConfig`, `blocking = 0`) and this returns at once:
    /// [`Comm::settle`] then waits, boundedly, until every rank has joined. Older NCCL
    /// (`ncclCommInitRank`) blocks here until they have. Errors: NCCL's, naming the call; a
    /// communicator that failed after NCCL created it is aborted first.
    pub fn join(&self, device: &str, id: &[u8; 128], rank: usize, size: usize) -> CudaResult<Comm> {
        let id = ncclUniqueId { internal: id.map(|b| b as c_char) };
        let mut raw: ncclComm_t = std::ptr::null_mut();
        let (r, n) = (c_int::try_from(rank), c_int::try_from(size));
        let (Ok(r), Ok(n)) = (r, n) else { return Err(CudaError::Unsupported(format!("{device}: NCCL takes at most {} ranks", c_int::MAX))) };
        let (rc, call, nonblocking) = match self.comm_init_rank_config {
            Some(init) => {
                let mut config = ConfigV2_14 {
                    size: std::mem::size_of::<ConfigV2_14>(),
                    magic: 0xcafe_beef,
                    version: NONBLOCKING_VERSION as u32,
                    blocking: 0,
                    undefined: c_int::MIN,
                };
                // SAFETY: `raw` receives the new communicator; NCCL copies the config.
                (unsafe { init(&mut raw, n, id, r, &mut config) }, "ncclCommInitRankConfig", true)
            }
            // SAFETY: `raw` receives the new communicator.
            None => (unsafe { (self.comm_init_rank)(&mut raw, n, id, r) }, "ncclCommInitRank", false),
        };
        if rc != ncclResult_t::ncclInProgress || !nonblocking {
            if let Err(e) = self.check(rc, device, call) {
                if !raw.is_null() {
                    // SAFETY: the failed communicator is not used again.
                    let _ = unsafe { (self.comm_abort)(raw) };
                }
                return Err(e);
            }
        }
        Ok(Comm { raw, rank, size, nonblocking, lock: Mutex::new(()) })
    }
}

/// One NCCL communicator: this process's GPU as rank `rank` of `size`.
pub struct Comm {
    raw: ncclComm_t,
    /// This process's rank in it (the MPI rank).
    pub rank: usize,
    /// Number of ranks.
    pub size: usize,
    /// Made non-blocking (NCCL 2.14 and newer): its calls may answer `ncclInProgress`, and
    /// [`Comm::settle`] tells when their work is on the stream.
    pub nonblocking: bool,
    /// NCCL communicators must not be used by two threads at once.
    lock: Mutex<()>,
}

// SAFETY: the handle is only used under `lock` (or, for the error query and abort, which
// NCCL allows from any thread, without it).
unsafe impl Send for Comm {}
unsafe impl Sync for Comm {}

/// A tensor's device memory for one NCCL call: `CUdeviceptr`s and element count.
#[derive(Copy, Clone, Debug)]
pub struct Buffers {
    /// Input (`sendbuff`).
    pub send: u64,
    /// Output (`recvbuff`), as long as the input.
    pub recv: u64,
    /// Elements.
    pub count: usize,
}

/// One NCCL call of a collective.
#[derive(Copy, Clone, Debug)]
pub enum Call {
    /// `ncclAllReduce` with this reduction; `mean`: `ncclAvg` (floats).
    AllReduce { op: ReduceOp, mean: bool },
    /// `ncclReduce` (sum) to `root`.
    Reduce { root: usize },
    /// `ncclBroadcast` from `root`.
    Broadcast { root: usize },
}

impl Call {
    /// NCCL's name of the call, the type of the transfer phase in profiles.
    pub fn name(self) -> &'static str {
        match self {
            Call::AllReduce { .. } => "ncclAllReduce",
            Call::Reduce { .. } => "ncclReduce",
            Call::Broadcast { .. } => "ncclBroadcast",
        }
    }
}

fn nccl_type(d: DType) -> CudaResult<ncclDataType_t> {
    Ok(match d {
        DType::Float32 => ncclDataType_t::ncclFloat32,
        DType::Float64 => ncclDataType_t::ncclFloat64,
        DType::Int32 => ncclDataType_t::ncclInt32,
        DType::Int64 => ncclDataType_t::ncclInt64,
        DType::Bool | DType::Complex64 | DType::Complex128 => {
            return Err(CudaError::Unsupported(format!("NCCL collectives carry Float32, Float64, Int32 or Int64, not {d}")))
        }
    })
}

impl Comm {
    /// Enqueues `call` on `stream` for each of `bufs` (one NCCL group when there are several:
    /// `MpiGroupedAllreduce`'s inputs, which NCCL then runs as one launch), all of `dtype`.
    /// Only enqueues; on a non-blocking communicator the work may reach the stream later,
    /// when [`Comm::settle`] returns. [`Comm::async_error`] and the stream tell when it is
    /// done.
    ///
    /// # Safety
    /// `stream` is a live stream of this communicator's GPU, and every buffer's `send` and
    /// `recv` hold `count` elements of `dtype` in that GPU's memory and stay allocated (not
    /// reused) until the stream has run the call.
    pub unsafe fn enqueue(&self, api: &Api, device: &str, call: Call, dtype: DType, bufs: &[Buffers], stream: CUstream) -> CudaResult<()> {
        let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let t = nccl_type(dtype)?;
        let root = |r: usize| c_int::try_from(r).unwrap_or(c_int::MAX);
        let one = |b: &Buffers| -> CudaResult<()> {
            let (s, r) = (b.send as *const c_void, b.recv as *mut c_void);
            // SAFETY: the buffers and the stream are as the caller promised.
            let rc = unsafe {
                match call {
                    Call::AllReduce { op, mean } => {
                        let op = match (op, mean) {
                            (_, true) => ncclRedOp_t::ncclAvg,
                            (ReduceOp::Sum, _) => ncclRedOp_t::ncclSum,
                            (ReduceOp::Max, _) => ncclRedOp_t::ncclMax,
                            (ReduceOp::Min, _) => ncclRedOp_t::ncclMin,
                        };
                        (api.all_reduce)(s, r, b.count, t, op, self.raw, stream)
                    }
                    Call::Reduce { root: q } => (api.reduce)(s, r, b.count, t, ncclRedOp_t::ncclSum, root(q), self.raw, stream),
                    Call::Broadcast { root: q } => (api.broadcast)(s, r, b.count, t, root(q), self.raw, stream),
                }
            };
            self.check_call(api, rc, device, call.name())
        };
        if bufs.len() == 1 {
            return one(&bufs[0]);
        }
        // SAFETY: a group brackets the calls; it is always closed below.
        api.check(unsafe { (api.group_start)() }, device, "ncclGroupStart")?;
        let first_err = bufs.iter().map(one).find_map(Result::err);
        // SAFETY: closes the group opened above.
        let end = self.check_call(api, unsafe { (api.group_end)() }, device, "ncclGroupEnd");
        match first_err {
            Some(e) => Err(e),
            None => end,
        }
    }

    /// A call's result: `ncclInProgress` is success on a non-blocking communicator.
    fn check_call(&self, api: &Api, rc: Res, device: &str, call: &str) -> CudaResult<()> {
        if self.nonblocking && rc == ncclResult_t::ncclInProgress {
            return Ok(());
        }
        api.check(rc, device, call)
    }

    /// `ncclCommGetAsyncError`'s state of this communicator, or the query's own error.
    fn async_state(&self, api: &Api, device: &str) -> CudaResult<Res> {
        let mut e = ncclResult_t::ncclSuccess;
        // SAFETY: writes one result code; allowed from any thread.
        let rc = unsafe { (api.comm_get_async_error)(self.raw, &mut e) };
        api.check(rc, device, "ncclCommGetAsyncError").map(|()| e)
    }

    /// The error NCCL found while running this communicator's calls
    /// (`ncclCommGetAsyncError`: a peer that died, a network failure), if any
    /// (`ncclInProgress`, work still being queued, is none).
    pub fn async_error(&self, api: &Api, device: &str) -> Option<CudaError> {
        match self.async_state(api, device) {
            Err(e) => Some(e),
            Ok(ncclResult_t::ncclInProgress) => None,
            Ok(e) => api.check(e, device, "NCCL (asynchronous error)").err(),
        }
    }

    /// Waits until NCCL has finished this communicator's host-side work (joining the peers
    /// after [`Api::join`], or putting a call's work on its stream after
    /// [`Comm::enqueue`]): polls `ncclCommGetAsyncError` while it answers `ncclInProgress`,
    /// sleeping 20 µs at first and at most 1 ms between polls, for at most `timeout`.
    /// `Ok(true)`: done; `Ok(false)`: still in progress at the timeout (a peer that never
    /// came; the caller aborts); `Err`: NCCL's error, naming `call`. Returns at the first
    /// poll on a blocking communicator, whose calls return only when done.
    pub fn settle(&self, api: &Api, device: &str, call: &str, timeout: std::time::Duration) -> CudaResult<bool> {
        poll(timeout, || match self.async_state(api, device)? {
            ncclResult_t::ncclInProgress => Ok(false),
            e => api.check(e, device, call).map(|()| true),
        })
    }

    /// Ends the communicator's calls in flight and frees it (`ncclCommAbort`): after a
    /// timeout or an asynchronous error, since the peers' part of the call may never come.
    pub fn abort(&self, api: &Api) {
        // SAFETY: the handle is not used again (the caller drops it from the cache first).
        let _ = unsafe { (api.comm_abort)(self.raw) };
    }
}

/// Calls `done` until it answers `Ok(true)` (then `Ok(true)`) or an error (returned), for at
/// most `timeout` (then `Ok(false)`), sleeping 20 µs after the first call and twice as long
/// after each next one, up to 1 ms: how every wait on NCCL polls, since NCCL offers no
/// blocking wait with a timeout.
pub fn poll<E>(timeout: std::time::Duration, mut done: impl FnMut() -> Result<bool, E>) -> Result<bool, E> {
    let start = std::time::Instant::now();
    let mut pause = std::time::Duration::from_micros(20);
    loop {
        if done()? {
            return Ok(true);
        }
        if start.elapsed() >= timeout {
            return Ok(false);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(1));
    }
}

/// The live communicators: one per GPU (CUDA ordinal) and core communicator (its address),
/// made by the first collective that needs it and kept for the process. Every rank makes
/// its communicators at the same collectives: whether one is made is part of the
/// collectives' agreement key, so ranks that disagree fail the check instead of one
/// waiting in `ncclCommInitRank` for peers that never come.
static COMMS: Mutex<Vec<(CommKey, Arc<Comm>)>> = Mutex::new(Vec::new());

/// CUDA ordinal and core communicator address.
type CommKey = (usize, usize);

/// The communicator of GPU `ordinal` within core communicator `key`, if one was made.
pub fn cached(ordinal: usize, key: usize) -> Option<Arc<Comm>> {
    COMMS.lock().unwrap_or_else(|p| p.into_inner()).iter().find(|(k, _)| *k == (ordinal, key)).map(|(_, c)| c.clone())
}

/// Keeps `comm` as the communicator of GPU `ordinal` within core communicator `key`.
pub fn keep(ordinal: usize, key: usize, comm: Arc<Comm>) {
    COMMS.lock().unwrap_or_else(|p| p.into_inner()).push(((ordinal, key), comm));
}

/// Forgets the communicator of GPU `ordinal` within `key` (after [`Comm::abort`]); the next
/// collective there makes a new one (on every rank, which all failed the same call).
pub fn evict(ordinal: usize, key: usize) {
    COMMS.lock().unwrap_or_else(|p| p.into_inner()).retain(|(k, _)| *k != (ordinal, key));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_read_as_nccl_prints_them() {
        assert_eq!(version_string(22703), "2.27.3");
        assert_eq!(version_string(21000), "2.10.0");
    }

    #[test]
    fn a_library_that_is_not_nccl_is_a_reason_not_a_panic() {
        let e = load(&["liboxiflow-no-such-nccl.so.2".into()]).err().unwrap();
        assert!(e.contains("liboxiflow-no-such-nccl.so.2") && e.contains("install NCCL 2.10"), "{e}");
        // a library that loads but is not NCCL: the first symbol looked up is named
        let e = load(&["libm.so.6".into(), "liboxiflow-no-such-nccl.so".into()]).err().unwrap();
        assert!(e.contains("libm.so.6: no ncclGetVersion") && e.contains("liboxiflow-no-such-nccl.so:"), "{e}");
    }

    #[test]
    fn bool_is_refused_by_name() {
        let e = nccl_type(DType::Bool).unwrap_err().to_string();
        assert!(e.contains("Bool"), "{e}");
        assert_eq!(nccl_type(DType::Float64).unwrap(), ncclDataType_t::ncclFloat64);
    }
}
