//! The kernels' compile check (CI, no GPU needed): every file of `kernels/` compiles with
//! NVRTC for sm_80 and sm_90, every entry the op registry calls for
//! ([`required_entries`]) is a `.entry` of the PTX, and every op with a GPU kernel flag
//! has a launcher unless the device handles it itself.
//!
//! The NVRTC tests pass `common/nvrtc_gate.rs`: they run where NVRTC loads (`make test`
//! installs it into `.deps/nvrtc` and points `LD_LIBRARY_PATH` there); without NVRTC they
//! skip, saying so, only on a machine without a GPU and without `OXIFLOW_REQUIRE_GPU=1`,
//! and otherwise FAIL with the reason and how to get NVRTC.

#[path = "common/nvrtc_gate.rs"]
mod nvrtc_gate;

use oxiflow_core::ops::GpuLaunch;
use oxiflow_cuda::kernels::{cached_ptx_in, compile_ptx, ops_needing_launchers, ptx_entries, required_entries, RequiredEntry, KERNEL_FILES};
use oxiflow_cuda::launch;
use oxiflow_cuda::launch::meta::{BcastMeta, Ptrs8, RedMeta};
use oxiflow_cuda::probe::{nvrtc_status, LibStatus};
use oxiflow_cuda::testing::{driver_gpu_count, REQUIRE_GPU};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::OnceLock;

const ARCHS: &[&str] = &["compute_80", "compute_90"];

/// Each kernel file's name and its PTX, or the compile error.
type Compiled = &'static [(&'static str, Result<String, String>)];

/// Every kernel file compiled for `arch` (one of [`ARCHS`]), once per test process (the
/// tests share it). The first call compiles for every arch of [`ARCHS`], one thread per
/// arch. No two threads share an NVRTC program (each `compile_ptx` call creates and
/// destroys its own), and NVRTC 13 compiles them side by side: on 2 cores the check takes
/// 26-30 s instead of 51 s, and the PTX was byte-identical to a serial compile's.
fn compiled(arch: &'static str) -> Compiled {
    static CACHE: OnceLock<HashMap<&'static str, Compiled>> = OnceLock::new();
    let map = CACHE.get_or_init(|| {
        std::thread::scope(|s| {
            let threads: Vec<_> = ARCHS
                .iter()
                .map(|&a| {
                    s.spawn(move || {
                        let v: Vec<_> = KERNEL_FILES.iter().map(|f| (f.name, compile_ptx(f, a).map_err(|e| e.to_string()))).collect();
                        (a, &*Box::leak(v.into_boxed_slice()))
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().expect("an NVRTC compile thread panicked")).collect()
        })
    });
    map.get(arch).copied().unwrap_or_else(|| panic!("compiled: {arch} is not one of {ARCHS:?}"))
}

/// [`nvrtc_gate::nvrtc_or_skip`] with this crate's probes: `false` to skip `test`.
fn nvrtc_or_skip(test: &str) -> bool {
    let nvrtc = match nvrtc_status() {
        LibStatus::Present { library, version } => Ok(format!("{}.{} from {library}", version.0, version.1)),
        LibStatus::Absent { reason } => Err(reason.clone()),
    };
    nvrtc_gate::nvrtc_or_skip(test, nvrtc, driver_gpu_count, REQUIRE_GPU)
}

#[test]
fn every_kernel_file_compiles_and_defines_every_required_entry() {
    if !nvrtc_or_skip("every_kernel_file_compiles_and_defines_every_required_entry") {
        return;
    }
    let required = required_entries();
    let mut problems = Vec::new();
    for arch in ARCHS {
        let mut defined = BTreeSet::new();
        for (name, res) in compiled(arch) {
            match res {
                Ok(ptx) => {
                    let entries = ptx_entries(ptx);
                    println!("{arch} kernels/{name}: {} entries", entries.len());
                    defined.extend(entries);
                }
                Err(e) => problems.push(format!("does not compile for {arch}: {e}")),
            }
        }
        let mut missing: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for r in &required {
            if !defined.contains(&r.entry) {
                missing.entry(r.op).or_default().push(&r.entry);
            }
        }
        if missing.is_empty() {
            println!("{arch}: all {} required entries defined ({} entries in all)", required.len(), defined.len());
        } else {
            problems.push(format!(
                "{} of {} required kernel entries are missing from the PTX for {arch}, by op:\n{}",
                missing.values().map(Vec::len).sum::<usize>(),
                required.len(),
                missing.iter().map(|(op, es)| format!("  {op}: {}", es.join(" "))).collect::<Vec<_>>().join("\n")
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_gpu_op_has_a_launcher() {
    let ops = ops_needing_launchers();
    let missing: Vec<String> = ops.iter().filter(|op| launch::launcher(op).is_none()).map(|op| format!("{} ({:?})", op.name, op.launch)).collect();
    assert!(
        missing.is_empty(),
        "{} of {} launched GPU ops have no launcher in the table of their launch family (launch::launcher): {}",
        missing.len(),
        ops.len(),
        missing.join(" ")
    );
}

#[test]
fn the_ptx_cache_stores_and_reuses_compiled_files() {
    if !nvrtc_or_skip("the_ptx_cache_stores_and_reuses_compiled_files") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("oxiflow-kernel-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let file = KERNEL_FILES.iter().find(|f| f.name == "training.cu").expect("training.cu");
    let first = cached_ptx_in(Some(&dir), file, "compute_90").expect("compile");
    let stored: Vec<_> = std::fs::read_dir(&dir).expect("cache dir created").filter_map(|e| e.ok()).collect();
    assert_eq!(stored.len(), 1, "one cache file: {stored:?}");
    let second = cached_ptx_in(Some(&dir), file, "compute_90").expect("cached");
    assert_eq!(first, second);
    // An unwritable cache only logs: a file in place of the directory.
    let blocker = dir.join("not-a-dir");
    std::fs::write(&blocker, "x").unwrap();
    assert!(cached_ptx_in(Some(&blocker), file, "compute_90").is_ok());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Byte sizes of an entry's parameters, read from its PTX declaration
/// (`.param .u64 x`, `.param .u32 x`, `.param .align 8 .b8 x[272]`).
fn entry_params(ptx: &str, entry: &str) -> Option<Vec<usize>> {
    let start = ptx.find(&format!(".entry {entry}("))?;
    let rest = &ptx[start..];
    let body = &rest[rest.find('(')? + 1..rest.find(')')?];
    let mut sizes = Vec::new();
    for decl in body.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        if let (Some(open), Some(close)) = (decl.rfind('['), decl.rfind(']')) {
            sizes.push(decl[open + 1..close].parse().ok()?);
        } else {
            let ty = decl.split_whitespace().nth(1)?; // `.u64`
            let bits: usize = ty.trim_start_matches('.').trim_start_matches(|c: char| c.is_ascii_alphabetic()).parse().ok()?;
            sizes.push(bits / 8);
        }
    }
    Some(sizes)
}

/// The argument sizes the launcher of `e`'s op passes to it (src/launch/{compute,reduction,
/// training}.rs): by launch family for the shared families (for training, from the op's
/// declared inputs and attributes), by op for the ops whose launchers are their own; `None` for the movement family, which
/// `launch::movement`'s own tests check.
fn launcher_args(e: &RequiredEntry) -> Option<Vec<usize>> {
    let bcast = std::mem::size_of::<BcastMeta>();
    let red = std::mem::size_of::<RedMeta>();
    let ptrs = std::mem::size_of::<Ptrs8>();
    Some(match (e.launch, e.op) {
        (GpuLaunch::Unary, _) => vec![8, 8, 8],
        (GpuLaunch::Binary, _) => vec![8, 8, 8, bcast],
        (GpuLaunch::Reduce | GpuLaunch::ArgReduce, _) => vec![8, 8, red],
        (GpuLaunch::Random, _) => vec![8; 4],
        (GpuLaunch::Movement, _) => return None,
        (GpuLaunch::Own, "LeakyRelu") => vec![8, 8, 8, 8],
        (GpuLaunch::Own, "OnesLike" | "ZerosLike") => vec![8, 8],
        (GpuLaunch::Own, "Cast") => vec![8, 8, 8],
        (GpuLaunch::Own, "SelectV2") => vec![8, 8, 8, 8, bcast],
        (GpuLaunch::Own, "BroadcastTo") => vec![8, 8, bcast],
        (GpuLaunch::Own, "AddN") => vec![ptrs, 4, 8, 8],
        (GpuLaunch::Own, "Softmax") => vec![8, 8, 8, 8],
        (GpuLaunch::Own, "SoftmaxCrossEntropyWithLogits") => vec![8; 6],
        // the shared training launcher: every input's pointer in declared order, n, then
        // one int per bool attribute but use_locking (launch::training::apply)
        (GpuLaunch::Training, op) => {
            let def = oxiflow_core::ops::lookup(op).expect("registered");
            [vec![8; def.inputs.len() + 1], vec![4; launch::training::kernel_flag_attrs(def).count()]].concat()
        }
        (launch, op) => panic!("{op} ({launch:?}): no argument list for its launcher here; add the launcher's arguments to launcher_args"),
    })
}

/// The C structs' sizes in the PTX equal the `#[repr(C)]` twins', and every compute entry
/// takes the arguments its launcher passes (a mismatch would only show on a GPU, as garbage).
#[test]
fn kernel_parameters_match_what_the_launchers_pass() {
    if !nvrtc_or_skip("kernel_parameters_match_what_the_launchers_pass") {
        return;
    }
    let mut checked = 0;
    let mut bad = Vec::new();
    let compiled = compiled("compute_90");
    for e in required_entries() {
        let Some(want) = launcher_args(&e) else { continue };
        let found = compiled.iter().find_map(|(name, res)| {
            let ptx = res.as_ref().unwrap_or_else(|err| panic!("{err}"));
            entry_params(ptx, &e.entry).map(|got| (*name, got))
        });
        match found {
            Some((name, got)) if got != want => bad.push(format!("{} (kernels/{name}): PTX parameters {got:?}, launcher passes {want:?}", e.entry)),
            Some(_) => {}
            None => bad.push(format!("{} ({}): no such entry in any kernel file", e.entry, e.op)),
        }
        checked += 1;
    }
    assert!(bad.is_empty(), "kernel/launcher parameter mismatches:\n{}", bad.join("\n"));
    // every required entry outside the movement family (123 when this was written: 44 ops
    // of the shared families and 14 with launchers of their own, in their dtypes); a floor so that a registry
    // read wrongly cannot pass by checking nothing
    assert!(checked >= 100, "only {checked} entries checked");
    println!("{checked} entries take the arguments their launchers pass");
}
