//! Intra-op parallelism: how many threads one kernel may use (TF's
//! `ConfigProto.intra_op_parallelism_threads`), as opposed to how many kernels run at once
//! (`inter_op_parallelism_threads`, the session's worker pool).
//!
//! A session tags each of its worker threads with its intra-op count
//! ([`set_intra_op_threads`], from the pool's start handler); a kernel asks
//! [`intra_op_threads`] and runs its parallel part in [`install`], on exactly that many
//! threads: the session's own workers when the worker pool has that size (the default),
//! else a Rayon pool of that size shared by all sessions with the same count (as TF shares
//! its intra-op pool process-wide), so a kernel's parallelism does not depend on the worker
//! pool's size. Kernels that split their own work into chunks use [`parallel_for`]
//! instead, where the calling thread runs chunks too. Today the parallel kernels are
//! `MatMul` (the `gemm` crate in `install`, or OpenBLAS in blocks with `parallel_for`), the
//! `faer`-based linear algebra (`MatrixInverse`, `MatrixDeterminant`, `MatrixSolve`,
//! `MatrixSolveLs`, `BatchMatMulV2`, `Svd`, `Cholesky`, `MatrixTriangularSolve`; `install`), the SIMD unary ops from 16k elements
//! (`ops/vmath.rs`) and large `_FusedElementwise` steps (`ops/fused.rs`; both
//! `parallel_for`).

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

thread_local! {
    /// Intra-op threads of the session whose worker this thread is; 0 on other threads.
    static INTRA: Cell<usize> = const { Cell::new(0) };
}

/// TF's default for `intra_op_parallelism_threads = 0`: every core the process may use,
/// determined once per process (`available_parallelism` reads the cgroup files on every
/// call, tens of µs: more than a whole small run).
pub fn default_intra_op_threads() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
}

/// The intra-op thread count a session with `intra_op_parallelism_threads = requested` gives
/// its kernels: `requested`, or [`default_intra_op_threads`] when it is `None` or 0 (TF: "0
/// means the system picks an appropriate number").
pub fn resolve(requested: Option<usize>) -> usize {
    match requested {
        Some(n) if n > 0 => n,
        _ => default_intra_op_threads(),
    }
}

/// Tags the current thread as a worker of a session whose kernels may use `n` threads each
/// (0: the default). Called by the session on each of its worker threads.
pub fn set_intra_op_threads(n: usize) {
    INTRA.with(|c| c.set(n));
}

/// Runs `f` with the current thread tagged as [`set_intra_op_threads`] does, restoring the
/// previous tag afterwards (also when `f` panics): a session running a step on the
/// caller's thread gives its kernels the same thread count as on its workers.
pub fn with_intra_op_threads<R>(n: usize, f: impl FnOnce() -> R) -> R {
    struct Restore(usize);
    impl Drop for Restore {
        fn drop(&mut self) {
            INTRA.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(INTRA.with(|c| c.replace(n)));
    f()
}

/// How many threads a kernel running on this thread may use: its session's
/// `intra_op_parallelism_threads`, or all cores outside a session worker or when the session
/// left it at 0. Always at least 1.
pub fn intra_op_threads() -> usize {
    let n = INTRA.with(Cell::get);
    if n == 0 {
        default_intra_op_threads()
    } else {
        n
    }
}

/// The shared Rayon pool with `n` threads (created on first use).
fn pool(n: usize) -> Arc<rayon::ThreadPool> {
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<rayon::ThreadPool>>>> = OnceLock::new();
    let mut pools = POOLS.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    pools
        .entry(n)
        .or_insert_with(|| {
            let built = rayon::ThreadPoolBuilder::new().num_threads(n).thread_name(move |i| format!("oxiflow-intra{n}-{i}")).build();
            // Threads that cannot start leave the kernel on a single thread rather than failing it.
            Arc::new(built.unwrap_or_else(|_| rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("a one-thread pool")))
        })
        .clone()
}

/// Runs `f` (a kernel's parallel part) on [`intra_op_threads`] threads, so Rayon-parallel
/// code inside it (`gemm`'s `Parallelism::Rayon(0)`, `faer`'s default `Par::rayon(0)`)
/// uses exactly that many threads. The calling worker waits for it; a panic in `f`
/// propagates to the caller.
///
/// Which threads: on a worker of a pool of exactly that size (a session's worker pool when
/// `inter_op_parallelism_threads` resolves to the intra-op count, the default where both
/// are 0), `f` runs right there and its parallel parts are stolen by the pool's idle
/// workers; elsewhere in the shared pool of that size. TF keeps two pools whose threads
/// block when idle; Rayon's idle threads spin and yield for a while first, so with two
/// pools a kernel's threads competed with the waiting worker and its idle neighbours for
/// the same cores (on 2 cores the MLP step ran 1.3-1.4x slower; docs/performance/peers-history.md).
pub fn install<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    let n = intra_op_threads();
    if on_pool_of(n) {
        return f();
    }
    pool(n).install(f)
}

/// Whether this thread is a worker of a Rayon pool of `n` threads (a kernel's parallel part
/// then runs in that pool rather than in the shared one).
fn on_pool_of(n: usize) -> bool {
    rayon::current_thread_index().is_some() && rayon::current_num_threads() == n
}

/// Runs `f(0)`, ..., `f(chunks - 1)`, each once, on up to [`intra_op_threads`] threads: the
/// calling thread and `threads - 1` helper jobs (on the calling worker's pool when it has
/// that size, as [`install`], else the shared pool of that size). Every thread claims the
/// next chunk from a shared counter until none is left, so the caller never waits for a
/// helper to wake up: a helper that starts late takes what is left, or nothing (it then
/// returns without touching `f`). The call returns when every chunk has run. This is
/// Eigen's `ThreadPoolDevice::parallelFor` pattern (the caller runs blocks too) that TF's
/// CPU kernels shard with; a Rayon `install` from a thread outside the pool handed all the
/// work to pool threads that first had to wake, which on this project's 2-core VM made a
/// 2-thread `Tanh` of 1M values slower than a 1-thread one (docs/performance/peers-history.md).
///
/// A panic in `f` (on any thread) propagates to the caller once every chunk has ended.
pub fn parallel_for(chunks: usize, f: impl Fn(usize) + Sync) {
    use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
    use std::sync::atomic::{AtomicUsize, Ordering};
    let n = intra_op_threads();
    let threads = n.min(chunks);
    if threads <= 1 {
        (0..chunks).for_each(f);
        return;
    }
    type Job = dyn Fn(usize) + Sync;
    struct Shared {
        next: AtomicUsize,
        done: AtomicUsize,
        chunks: usize,
        f: *const Job,
        panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
    }
    // SAFETY: `f` is Sync and is only called for a claimed chunk index below `chunks`; the
    // caller does not return (so `f` and what it borrows stay alive) until every claimed
    // chunk has counted itself done.
    unsafe impl Send for Shared {}
    unsafe impl Sync for Shared {}
    fn work(s: &Shared) {
        loop {
            let i = s.next.fetch_add(1, Ordering::Relaxed);
            if i >= s.chunks {
                return;
            }
            // SAFETY: see `Shared`: chunk i is claimed, so the caller is still waiting.
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| unsafe { (*s.f)(i) })) {
                s.panic.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(p);
            }
            s.done.fetch_add(1, Ordering::Release);
        }
    }
    let f: *const (dyn Fn(usize) + Sync + '_) = &f;
    // SAFETY: only the lifetime is erased; see `Shared`.
    let f = unsafe { std::mem::transmute::<*const (dyn Fn(usize) + Sync + '_), *const Job>(f) };
    let shared = Arc::new(Shared { next: AtomicUsize::new(0), done: AtomicUsize::new(0), chunks, f, panic: Mutex::new(None) });
    let shared_pool = if on_pool_of(n) { None } else { Some(pool(n)) };
    for _ in 1..threads {
        let s = shared.clone();
        let job = move || work(&s);
        match &shared_pool {
            Some(p) => p.spawn(job),
            None => rayon::spawn(job),
        }
    }
    work(&shared);
    // the helpers' chunks still running: at most one chunk's time each
    let mut spins = 0u32;
    while shared.done.load(Ordering::Acquire) < chunks {
        if spins < 128 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            std::thread::yield_now();
        }
    }
    let panic = shared.panic.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(p) = panic {
        resume_unwind(p);
    }
}

/// An output buffer's base pointer shared with the intra-op threads of one kernel, each
/// writing its own disjoint elements (a block of a product's rows, a range of softmax rows).
/// The kernel that makes it keeps the buffer alive until [`parallel_for`] returns.
#[derive(Clone, Copy)]
pub(crate) struct SharedOut<T>(pub *mut T);
// SAFETY: the chunks handed to different threads write disjoint elements of the buffer.
unsafe impl<T> Send for SharedOut<T> {}
unsafe impl<T> Sync for SharedOut<T> {}
impl<T> SharedOut<T> {
    /// The address of element `off` (not dereferenced here).
    pub fn at(self, off: usize) -> *mut T {
        self.0.wrapping_add(off)
    }
}

/// `f(src_chunk, dst_chunk)` over equal-length `src` and `dst` cut into matching chunks: on
/// the calling thread alone below `min` elements or with one intra-op thread, else in
/// chunks of [`shard_len`] elements rounded up to a multiple of 64 (whole cache lines)
/// with [`parallel_for_each`]. The elementwise maps use it (`vmath`'s SIMD functions and
/// the generic maps of `ops/math.rs`); which thread runs a chunk never changes a value.
pub(crate) fn shard_into<T: Sync, U: Send>(src: &[T], dst: &mut [U], min: usize, f: impl Fn(&[T], &mut [U]) + Sync) {
    debug_assert_eq!(src.len(), dst.len());
    let Some(chunk) = shard_len(src.len(), min) else {
        f(src, dst);
        return;
    };
    let chunk = chunk.next_multiple_of(64);
    parallel_for_each(dst.chunks_mut(chunk).zip(src.chunks(chunk)).collect(), |(d, s)| f(s, d));
}

/// How long the chunks of an `n`-element loop sharded over the intra-op threads should be:
/// `None` when it should stay on the calling thread (one intra-op thread, or fewer than
/// `min` elements, the size below which the hand-off costs more than it saves), else about
/// four chunks a thread, at least `min / 2` elements each, so that a helper that starts late
/// still gets a share. Callers round it up to a whole number of their own units and run
/// the chunks with [`parallel_for_each`].
pub fn shard_len(n: usize, min: usize) -> Option<usize> {
    let threads = intra_op_threads();
    (threads > 1 && n >= min).then(|| n.div_ceil(4 * threads).max(min / 2).max(1))
}

/// [`parallel_for`] over owned work items (for example disjoint `&mut` chunks of an output):
/// `f(item)` once for each, on up to [`intra_op_threads`] threads, the caller included.
pub fn parallel_for_each<I: Send>(items: Vec<I>, f: impl Fn(I) + Sync) {
    let items: Vec<Mutex<Option<I>>> = items.into_iter().map(|i| Mutex::new(Some(i))).collect();
    parallel_for(items.len(), |i| {
        let item = items[i].lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(item) = item {
            f(item)
        }
    });
}

/// Test-only op `_IntraOpProbe` (no inputs, CPU only): an Int64 `[4]` tensor with what a
/// kernel on its thread is given: [`intra_op_threads`], the `gemm` threads of a 512³
/// `MatMul`, the size of the pool [`install`] runs it in, and 1 when that is the session's
/// own worker pool (else 0).
#[cfg(test)]
pub(crate) fn register_probe(r: &mut crate::ops::Registry) {
    use crate::ops::*;
    fn infer(_: &InferCtx) -> crate::Result<Vec<crate::graph::TensorType>> {
        Ok(vec![crate::graph::TensorType::new(crate::DType::Int64, crate::Shape(vec![4]))])
    }
    fn kernel(_: &KernelCtx) -> crate::Result<Outputs> {
        let gemm = match crate::ops::matmul::gemm_parallelism(512, 512, 512) {
            gemm::Parallelism::None => 1,
            gemm::Parallelism::Rayon(n) => n,
        };
        let on_worker = || std::thread::current().name().is_some_and(|n| n.starts_with("oxiflow-worker-"));
        let (pool, own) = install(|| (rayon::current_num_threads(), on_worker()));
        let v = vec![intra_op_threads() as i64, gemm as i64, pool as i64, own as i64];
        Ok(smallvec![crate::Tensor::from_vec(&[4], v, crate::Layout::RowMajor)?])
    }
    r.add(OpDef {
        name: "_IntraOpProbe",
        default_name: "IntraOpProbe",
        arity: Arity::Fixed(0),
        ref_inputs: &[],
        infer,
        kernel,
        gpu: GpuSupport::None,
        inputs: &[],
        attrs: &[],
        launch: crate::ops::GpuLaunch::None,
        grad: crate::ops::Gradient::Undefined,
        stateful: true,
        inexpensive: false,
        host_memory: &[],
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Graph, Session, SessionOptions};
    use std::panic::AssertUnwindSafe;
    use std::sync::RwLock;

    #[test]
    fn a_session_gives_each_kernel_its_intra_op_threads_whatever_its_inter_op_pool() {
        let all = default_intra_op_threads() as f64;
        let mut g = Graph::new();
        let probe = g.op("_IntraOpProbe", &[]).unwrap();
        let g = Arc::new(RwLock::new(g));
        // (inter, intra) -> threads a kernel gets; inter never leaks into intra (ADCME's bug).
        // A one-step plan runs on the caller's thread, traced or not (a profile shows the
        // run as it happens untraced), tagged with the session's intra-op count.
        for (inter, intra, want) in [(1, Some(3), 3.0), (3, Some(1), 1.0), (2, Some(2), 2.0), (3, Some(3), 3.0), (1, Some(0), all), (1, None, all)] {
            let o = SessionOptions { inter_op_threads: Some(inter), intra_op_threads: intra, emulated_gpus: Some(0), ..Default::default() };
            let s = Session::new(g.clone(), o).unwrap();
            for trace in [false, true] {
                let got = s.run(&[], &[probe], &[], trace).unwrap().values[0].to_f64_vec();
                assert_eq!(got, vec![want, want, want, 0.0], "inter={inter} intra={intra:?} trace={trace}");
            }
            assert_eq!(s.threads(), (inter, want as usize));
        }
    }

    /// A plan too wide for the caller's thread runs on the session's workers, except with
    /// a one-thread worker pool: then on the caller's thread, which the pool's one worker
    /// would run it like (one step at a time), without the hand-off.
    #[test]
    fn a_one_thread_pool_runs_any_plan_on_the_callers_thread() {
        let mut g = Graph::new();
        let probes = [g.op("_IntraOpProbe", &[]).unwrap(), g.op("_IntraOpProbe", &[]).unwrap()];
        // two roots and 128 KiB of outputs: neither a chain nor a small plan
        let big = g.constant(crate::Tensor::from_vec(&[1 << 14], vec![1.0f64; 1 << 14], crate::Layout::RowMajor).unwrap()).unwrap();
        let neg = g.op("Neg", &[big]).unwrap();
        let g = Arc::new(RwLock::new(g));
        for (inter, want_own) in [(1, 0.0), (2, 1.0)] {
            let o = SessionOptions { inter_op_threads: Some(inter), intra_op_threads: Some(inter), emulated_gpus: Some(0), ..Default::default() };
            let s = Session::new(g.clone(), o).unwrap();
            let out = s.run(&[], &[probes[0], probes[1], neg], &[], false).unwrap();
            for v in &out.values[..2] {
                assert_eq!(v.to_f64_vec()[3], want_own, "inter={inter}: 1 = ran on a session worker");
            }
            assert_eq!(out.values[2].to_f64_vec(), vec![-1.0; 1 << 14]);
        }
    }

    /// One expensive step among inexpensive ones (constants, variable reads: nothing two
    /// threads could share) runs on the caller's thread whatever the pool; a second
    /// expensive step sends the run to the session's workers.
    #[test]
    fn one_expensive_step_among_variable_reads_runs_on_the_callers_thread() {
        let mut g = Graph::new();
        let probe = g.op("_IntraOpProbe", &[]).unwrap();
        let big = g.constant(crate::Tensor::from_vec(&[1 << 14], vec![2.0f64; 1 << 14], crate::Layout::RowMajor).unwrap()).unwrap();
        let read = g.op("Identity", &[big]).unwrap();
        let neg = g.op("Neg", &[big]).unwrap();
        let g = Arc::new(RwLock::new(g));
        let o = SessionOptions { inter_op_threads: Some(2), intra_op_threads: Some(2), emulated_gpus: Some(0), ..Default::default() };
        let s = Session::new(g, o).unwrap();
        // probe + Const + Identity (128 KiB each, two roots): neither a chain nor small
        let out = s.run(&[], &[probe, read], &[], false).unwrap();
        assert_eq!(out.values[0].to_f64_vec()[3], 0.0, "on the caller, not a session worker");
        assert_eq!(out.values[1].to_f64_vec(), vec![2.0; 1 << 14]);
        let out = s.run(&[], &[probe, read, neg], &[], false).unwrap();
        assert_eq!(out.values[0].to_f64_vec()[3], 1.0, "two expensive steps: on a session worker");
        assert_eq!(out.values[2].to_f64_vec(), vec![-2.0; 1 << 14]);
    }

    #[test]
    fn the_thread_tag_decides_and_zero_means_all_cores() {
        let all = default_intra_op_threads();
        std::thread::spawn(move || {
            assert_eq!(intra_op_threads(), all, "untagged: TF's default");
            set_intra_op_threads(3);
            assert_eq!(intra_op_threads(), 3);
            assert_eq!(install(rayon::current_num_threads), 3, "the kernel's pool has 3 threads");
            set_intra_op_threads(0);
            assert_eq!(intra_op_threads(), all);
        })
        .join()
        .unwrap();
        assert_eq!(resolve(Some(0)), all);
        assert_eq!(resolve(None), all);
        assert_eq!(resolve(Some(2)), 2);
    }

    #[test]
    fn a_parallel_matmul_computes_the_same_product_on_any_number_of_threads() {
        let (m, k, n) = (150, 120, 90); // above the parallel threshold
        let a: Vec<f64> = (0..m * k).map(|i| ((i * 7 % 13) as f64) - 6.0).collect();
        let b: Vec<f64> = (0..k * n).map(|i| ((i * 5 % 11) as f64) * 0.5).collect();
        let want: Vec<f64> = (0..m * n).map(|ij| (0..k).map(|p| a[ij / n * k + p] * b[p * n + ij % n]).sum()).collect();
        let mut g = Graph::new();
        let x = g.constant(crate::Tensor::from_vec(&[m, k], a, crate::Layout::RowMajor).unwrap()).unwrap();
        let y = g.constant(crate::Tensor::from_vec(&[k, n], b, crate::Layout::RowMajor).unwrap()).unwrap();
        let p = g.op("MatMul", &[x, y]).unwrap();
        let g = Arc::new(RwLock::new(g));
        for intra in [1, 2, 3] {
            let o = SessionOptions { inter_op_threads: Some(1), intra_op_threads: Some(intra), emulated_gpus: Some(0), ..Default::default() };
            let got = Session::new(g.clone(), o).unwrap().run(&[], &[p], &[], false).unwrap().values[0].to_f64_vec();
            assert_eq!(got, want, "intra={intra}"); // integer-valued: exact in any summation order
        }
    }

    /// Every chunk runs exactly once, on at most the intra-op count of threads, the calling
    /// thread among them, whether the caller is outside any pool or a worker of a pool of
    /// that size; a panic in a chunk reaches the caller after the others ran.
    #[test]
    fn parallel_for_runs_each_chunk_once_and_passes_panics_on() {
        use std::collections::HashSet;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let check = |threads: usize| {
            let counts: Vec<AtomicUsize> = (0..500).map(|_| AtomicUsize::new(0)).collect();
            let seen = Mutex::new(HashSet::new());
            parallel_for(counts.len(), |i| {
                counts[i].fetch_add(1, Ordering::Relaxed);
                seen.lock().unwrap().insert(std::thread::current().id());
                std::hint::black_box((0..2000).sum::<u64>());
            });
            assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 1), "a chunk ran twice or never");
            let seen = seen.into_inner().unwrap();
            assert!(seen.len() <= threads, "{} threads for intra {threads}", seen.len());
            seen.contains(&std::thread::current().id())
        };
        for threads in [1, 2, 3] {
            // outside any pool: the caller and helpers of the shared pool of that size
            let caller_ran = std::thread::spawn(move || with_intra_op_threads(threads, || check(threads))).join().unwrap();
            assert!(caller_ran || threads > 1, "one thread: the caller runs everything");
            // on a worker of a pool of that size
            pool(threads).install(|| with_intra_op_threads(threads, || check(threads)));
        }
        let ran = AtomicUsize::new(0);
        let r = std::thread::spawn(move || {
            with_intra_op_threads(2, || {
                std::panic::catch_unwind(AssertUnwindSafe(|| {
                    parallel_for(40, |i| {
                        ran.fetch_add(1, Ordering::Relaxed);
                        assert!(i != 17, "chunk 17 failed");
                    })
                }))
                .map_err(|p| p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_default())
                .map(|_| ran.load(Ordering::Relaxed))
                .map_err(|e| (e, ran.load(Ordering::Relaxed)))
            })
        })
        .join()
        .unwrap();
        let (msg, n) = r.expect_err("the panic of chunk 17 reaches the caller");
        assert!(msg.contains("chunk 17 failed"), "{msg}");
        assert_eq!(n, 40, "the other chunks still ran");
        // items: each handed to exactly one call
        let mut out = vec![0u32; 1000];
        with_intra_op_threads(2, || parallel_for_each(out.chunks_mut(64).enumerate().collect(), |(k, c)| c.fill(k as u32 + 1)));
        assert!(out.iter().enumerate().all(|(i, &v)| v == (i / 64) as u32 + 1));
    }
}
