//! The NCCL binding (`oxiflow_cuda::nccl`) against a stand-in library that records its calls
//! (tests/fake_nccl/fake_nccl.c, compiled here with the C compiler that links Rust
//! programs): runs on machines without a GPU or NCCL. The oracle is nccl.h: the data type
//! and reduction constants (`ncclFloat32` = 7, `ncclAvg` = 4, ...), the order of each
//! call's arguments, the unique id passed by value, and groups around several calls. A real
//! NCCL on a GPU is tests/gpu_collective.rs.

use cudarc::driver::sys::CUstream;
use oxiflow_core::collective::ReduceOp;
use oxiflow_core::DType;
use oxiflow_cuda::nccl::{load, Buffers, Call};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Compiles the stand-in as `libnccl.so.2` in a fresh directory; panics with the
/// compiler's output when it fails.
fn fake_library() -> PathBuf {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fake_nccl/fake_nccl.c");
    let dir = std::env::temp_dir().join(format!("oxiflow-fake-nccl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lib = dir.join("libnccl.so.2");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = std::process::Command::new(&cc).args(["-shared", "-fPIC", "-o"]).arg(&lib).arg(&src).output().unwrap_or_else(|e| panic!("{cc}: {e}"));
    assert!(out.status.success(), "{cc} failed: {}", String::from_utf8_lossy(&out.stderr));
    lib
}

/// The stand-in's record of calls since the last `fake_clear`, then cleared.
fn take_log(lib: &libloading::Library) -> Vec<String> {
    // SAFETY: the stand-in's hooks have these signatures.
    unsafe {
        let log = lib.get::<unsafe extern "C" fn() -> *const std::ffi::c_char>(b"fake_log\0").unwrap();
        let clear = lib.get::<unsafe extern "C" fn()>(b"fake_clear\0").unwrap();
        let text = std::ffi::CStr::from_ptr(log()).to_string_lossy().into_owned();
        clear();
        text.lines().map(str::to_string).collect()
    }
}

const DEV: &str = "/job:localhost/replica:0/task:0/device:GPU:0";

/// Calls the stand-in's hook `name`, which takes one int.
fn hook(lib: &libloading::Library, name: &str, v: i32) {
    // SAFETY: the stand-in's `fake_set_*` hooks take one int.
    unsafe { lib.get::<unsafe extern "C" fn(i32)>(format!("{name}\0").as_bytes()).unwrap()(v) };
}

/// A non-blocking communicator: a join or a group that answers ncclInProgress is not an
/// error, `settle` polls until NCCL says the work is done, and gives up at the timeout when
/// it never is (a peer that never joins), after which the communicator is aborted.
fn nonblocking_waits_are_polled_and_bounded(api: &oxiflow_cuda::nccl::Api, hooks: &libloading::Library, id: &[u8; 128]) {
    let polls = |log: &[String]| log.iter().filter(|l| *l == "GetAsyncError in progress").count();
    hook(hooks, "fake_set_pending", 3);
    let comm = api.join(DEV, id, 0, 2).expect("ncclInProgress from a non-blocking init is not an error");
    assert!(comm.settle(api, DEV, "ncclCommInitRankConfig", Duration::from_secs(5)).unwrap());
    let log = take_log(hooks);
    assert_eq!(polls(&log), 3, "{log:?}");

    // a peer that never comes: in progress forever, so the timeout ends the wait
    hook(hooks, "fake_set_pending", -1);
    let comm = api.join(DEV, id, 0, 2).unwrap();
    let t = Instant::now();
    assert!(!comm.settle(api, DEV, "ncclCommInitRankConfig", Duration::from_millis(40)).unwrap());
    let waited = t.elapsed();
    assert!(waited >= Duration::from_millis(40) && waited < Duration::from_secs(5), "{waited:?}");
    comm.abort(api);
    let log = take_log(hooks);
    assert!(polls(&log) >= 2 && log.last().map(String::as_str) == Some("CommAbort comm=0x1234"), "{log:?}");

    // a group whose work NCCL queues after ncclGroupEnd returns
    hook(hooks, "fake_set_group_in_progress", 1);
    let three: Vec<Buffers> = (1..=3u64).map(|k| Buffers { send: 0x1000 * k, recv: 0x10000 * k, count: k as usize }).collect();
    // SAFETY: the stand-in never touches the pointers.
    unsafe { comm.enqueue(api, DEV, Call::AllReduce { op: ReduceOp::Sum, mean: false }, DType::Float64, &three, 0x99usize as CUstream) }.unwrap();
    assert!(comm.settle(api, DEV, "ncclAllReduce", Duration::from_secs(5)).unwrap());
    hook(hooks, "fake_set_group_in_progress", 0);
    let log = take_log(hooks);
    assert_eq!((log.first().map(String::as_str), polls(&log)), (Some("GroupStart"), 2), "{log:?}");
}

#[test]
fn the_binding_makes_the_calls_nccl_h_describes() {
    let path = fake_library();
    let name = path.to_string_lossy().into_owned();
    // SAFETY: the stand-in has no initialisers; the binding below opens the same file, so
    // both handles reach one copy of its state.
    let hooks = unsafe { libloading::Library::new(&path) }.unwrap();

    // too old: NCCL 2.9 has no ncclAvg
    std::env::set_var("FAKE_NCCL_VERSION", "20903");
    let e = load(std::slice::from_ref(&name)).err().expect("2.9 refused");
    assert!(e.contains("NCCL 2.9.3, older than 2.10"), "{e}");
    std::env::remove_var("FAKE_NCCL_VERSION");

    let api = load(std::slice::from_ref(&name)).unwrap();
    assert_eq!((api.version, api.library.as_str()), (22703, name.as_str()));

    // the unique id travels as 128 bytes and comes back whole into ncclCommInitRank
    let id = api.unique_id(DEV).unwrap();
    assert_eq!(id.to_vec(), (0..128u32).map(|i| (i * 3 + 1) as u8).collect::<Vec<_>>());
    let comm = api.join(DEV, &id, 2, 3).unwrap();
    assert_eq!((comm.rank, comm.size, comm.nonblocking), (2, 3, true));
    let sum = id.iter().fold(0u32, |h, &b| h.wrapping_mul(31).wrapping_add(b as u32));
    // NCCL 2.14's config: 24 bytes (8 + 4 + 4 + 4, padded to 8), NCCL_CONFIG_INITIALIZER's
    // magic, NCCL_VERSION(2, 14, 0), non-blocking
    let init = format!("CommInitRankConfig nranks=3 rank=2 id={sum} size=24 magic=cafebeef version=21400 blocking=0");
    assert_eq!(take_log(&hooks), ["GetUniqueId".to_string(), init.clone()]);
    assert!(comm.settle(&api, DEV, "ncclCommInitRankConfig", Duration::from_secs(5)).unwrap());
    assert!(take_log(&hooks).is_empty(), "a finished join settles at the first query");

    nonblocking_waits_are_polled_and_bounded(&api, &hooks, &id);

    let stream = 0x99usize as CUstream;
    let one = [Buffers { send: 0x1000, recv: 0x2000, count: 5 }];
    // SAFETY (every enqueue below): the stand-in never touches the pointers.
    let call = |c: Call, d: DType, b: &[Buffers]| unsafe { comm.enqueue(&api, DEV, c, d, b, stream) };
    let cases = [
        (Call::AllReduce { op: ReduceOp::Sum, mean: false }, DType::Float32, "AllReduce send=0x1000 recv=0x2000 count=5 type=7 op=0"),
        (Call::AllReduce { op: ReduceOp::Max, mean: false }, DType::Float64, "AllReduce send=0x1000 recv=0x2000 count=5 type=8 op=2"),
        (Call::AllReduce { op: ReduceOp::Min, mean: false }, DType::Int32, "AllReduce send=0x1000 recv=0x2000 count=5 type=2 op=3"),
        (Call::AllReduce { op: ReduceOp::Sum, mean: true }, DType::Float64, "AllReduce send=0x1000 recv=0x2000 count=5 type=8 op=4"),
        (Call::Reduce { root: 2 }, DType::Int64, "Reduce send=0x1000 recv=0x2000 count=5 type=4 op=0 root=2"),
        (Call::Broadcast { root: 1 }, DType::Float32, "Broadcast send=0x1000 recv=0x2000 count=5 type=7 root=1"),
    ];
    for (c, d, want) in cases {
        call(c, d, &one).unwrap();
        assert_eq!(take_log(&hooks), [format!("{want} comm=0x1234 stream=0x99")], "{c:?} {d}");
    }

    // several buffers: one group (MpiGroupedAllreduce)
    let three: Vec<Buffers> = (1..=3u64).map(|k| Buffers { send: 0x1000 * k, recv: 0x10000 * k, count: k as usize }).collect();
    call(Call::AllReduce { op: ReduceOp::Sum, mean: true }, DType::Float32, &three).unwrap();
    let log = take_log(&hooks);
    assert_eq!(log.len(), 5, "{log:?}");
    assert_eq!((log[0].as_str(), log[4].as_str()), ("GroupStart", "GroupEnd"));
    assert!(log[2].starts_with("AllReduce send=0x2000 recv=0x20000 count=2 type=7 op=4"), "{log:?}");

    // NCCL's error: named with the call and NCCL's text; a group is still closed
    let bad = [Buffers { send: 0x1000, recv: 0x2000, count: 13 }];
    let e = call(Call::AllReduce { op: ReduceOp::Sum, mean: false }, DType::Float32, &bad).unwrap_err().to_string();
    assert!(e.contains("NCCL error on") && e.contains("ncclAllReduce") && e.contains("ncclInvalidArgument") && e.contains("invalid argument (fake)"), "{e}");
    take_log(&hooks);
    let e = call(Call::AllReduce { op: ReduceOp::Sum, mean: false }, DType::Float32, &[one[0], bad[0]]).unwrap_err().to_string();
    assert!(e.contains("ncclAllReduce"), "{e}");
    assert_eq!(take_log(&hooks).last().map(String::as_str), Some("GroupEnd"));
    let e = call(Call::Broadcast { root: 0 }, DType::Bool, &one).unwrap_err().to_string();
    assert!(e.contains("not Bool"), "{e}");

    // the asynchronous error a dead peer leaves, then the abort
    assert!(comm.async_error(&api, DEV).is_none());
    hook(&hooks, "fake_set_async_error", 6);
    let e = comm.async_error(&api, DEV).expect("an asynchronous error").to_string();
    assert!(e.contains("NCCL (asynchronous error)") && e.contains("ncclRemoteError"), "{e}");
    let e = comm.settle(&api, DEV, "ncclAllReduce", Duration::from_secs(5)).unwrap_err().to_string();
    assert!(e.contains("ncclAllReduce") && e.contains("ncclRemoteError"), "settle reports it too: {e}");
    comm.abort(&api);
    assert_eq!(take_log(&hooks), ["CommAbort comm=0x1234"]);
    hook(&hooks, "fake_set_async_error", 0);

    // NCCL 2.10 to 2.13: no ncclCommInitRankConfig; a blocking communicator, on which
    // ncclInProgress is an error like any other
    std::env::set_var("FAKE_NCCL_VERSION", "21300");
    let old = load(std::slice::from_ref(&name)).unwrap();
    std::env::remove_var("FAKE_NCCL_VERSION");
    let comm = old.join(DEV, &id, 2, 3).unwrap();
    assert!(!comm.nonblocking);
    assert_eq!(take_log(&hooks), [format!("CommInitRank nranks=3 rank=2 id={sum}")]);
    hook(&hooks, "fake_set_group_in_progress", 1);
    // SAFETY: the stand-in never touches the pointers.
    let e = unsafe { comm.enqueue(&old, DEV, Call::AllReduce { op: ReduceOp::Sum, mean: false }, DType::Float32, &three, stream) }.unwrap_err().to_string();
    assert!(e.contains("ncclGroupEnd") && e.contains("ncclInProgress"), "{e}");
    hook(&hooks, "fake_set_group_in_progress", 0);
    hook(&hooks, "fake_set_pending", 0);
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}
