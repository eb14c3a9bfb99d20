//! Checks of the movement family that need no GPU:
//! - NVRTC 13 compiles `kernels/shape.cu` and `kernels/index.cu` for `compute_80` and
//!   `compute_90`, every `{op}_{dtype}` entry the core's registry asks for is in the PTX,
//!   and each entry's metadata parameter has the size of its Rust mirror (NVRTC found as
//!   the library finds it, `OXIFLOW_NVRTC_LIB` included; without NVRTC the check skips,
//!   saying so, only on a machine without a GPU and without `OXIFLOW_REQUIRE_GPU=1`, and
//!   fails otherwise: `tests/common/nvrtc_gate.rs`);
//! - every case of `tests/common/movement_cases.rs` gives the CPU kernel's bytes when its
//!   launch plan is run by a host emulation of the kernels (a line-for-line mirror of the
//!   `.cu` bodies), including the bad-index word and TF's zeros for bad indices.

use super::index::{bad_index_error, bad_index_row, DiagMeta, GatherMeta, NdMeta, NO_BAD_INDEX};
use super::*;
use crate::launch::{entry_name, MAX_RANK};
use oxiflow_core::ops::{lookup, GpuLaunch, GpuSupport};
use oxiflow_core::Tensor;

#[path = "../../../tests/common/movement_cases.rs"]
mod cases;
use cases::{bad_index_cases, cases, tensor_bytes, Case};

#[path = "../../../tests/common/nvrtc_gate.rs"]
mod nvrtc_gate;

#[test]
fn metadata_structs_have_the_cuda_layout() {
    assert_eq!(std::mem::size_of::<MapMeta>(), 5 * 8 * MAX_RANK + 2 * 8 + 2 * 4);
    assert_eq!(std::mem::size_of::<PiecesMeta>(), 8 * MAX_PIECES + 8 * (MAX_PIECES + 1) + 3 * 8 + 2 * 4);
    assert_eq!(std::mem::size_of::<GatherMeta>(), 5 * 8 + 2 * 4);
    assert_eq!(std::mem::size_of::<NdMeta>(), 8 * MAX_RANK + 3 * 8 + 4 * 4);
    assert_eq!(std::mem::size_of::<DiagMeta>(), 4 * 8 + 2 * 4);
    assert_eq!(std::mem::size_of::<SwapMeta>(), 5 * 8 + 2 * 4);
}

/// Every `{op}_{dtype}` entry the registry's GPU flags require of this family.
fn required_entries() -> Vec<String> {
    let mut v = Vec::new();
    for op in &crate::kernels::ops_launched_as(GpuLaunch::Movement) {
        let def = lookup(op).expect("registered op");
        let dtypes: &[DType] = match def.gpu {
            GpuSupport::Any => ALL_DTYPES,
            GpuSupport::Types(ts) => ts,
            GpuSupport::None => panic!("{op} has no GPU kernel flag"),
        };
        for &d in dtypes {
            v.push(entry_name(op, d));
            if *op == "Transpose" {
                v.push(format!("{}_tiled", entry_name(op, d)));
            }
        }
    }
    v
}

#[test]
fn every_op_has_a_launcher_and_a_planner() {
    let ops = crate::kernels::ops_launched_as(GpuLaunch::Movement);
    assert_eq!(ops.len(), 18, "{ops:?}");
    for op in &ops {
        assert!(crate::launch::launcher(lookup(op).unwrap()).is_some(), "{op} has no launcher");
        assert!(planner(op).is_some(), "{op} has no planner");
    }
    assert_eq!(required_entries().len(), 10 * 5 + 5 + 6 * 4 + 2 * 2);
}

/// Bytes of the metadata parameter of `entry` in `ptx` (`.param .align 8 .b8 NAME_param_0[N]`).
fn param0_size(ptx: &str, entry: &str) -> Option<usize> {
    let key = format!("{entry}_param_0[");
    let at = ptx.find(&key)? + key.len();
    ptx[at..].split(']').next()?.parse().ok()
}

fn meta_size(entry: &str) -> usize {
    if entry.ends_with("_tiled") {
        return std::mem::size_of::<SwapMeta>();
    }
    let op = entry.rsplit_once('_').map(|(op, _)| op).unwrap_or(entry);
    match op {
        "concat_v2" | "pack" | "split_v" | "unpack" => std::mem::size_of::<PiecesMeta>(),
        "gather_v2" => std::mem::size_of::<GatherMeta>(),
        "gather_nd" | "scatter_nd" | "tensor_scatter_update" | "tensor_scatter_add" | "tensor_scatter_sub" => std::mem::size_of::<NdMeta>(),
        "matrix_diag" | "matrix_diag_part" => std::mem::size_of::<DiagMeta>(),
        _ => std::mem::size_of::<MapMeta>(),
    }
}

#[test]
fn kernels_compile_with_nvrtc_and_export_every_entry() {
    // cudarc panics when libnvrtc is missing: the probe (which honours OXIFLOW_NVRTC_LIB)
    // decides first.
    let nvrtc = match crate::probe::nvrtc_status() {
        crate::probe::LibStatus::Present { library, version } => Ok(format!("{}.{} from {library}", version.0, version.1)),
        crate::probe::LibStatus::Absent { reason } => Err(reason.clone()),
    };
    if !nvrtc_gate::nvrtc_or_skip("kernels_compile_with_nvrtc_and_export_every_entry", nvrtc, crate::testing::driver_gpu_count, crate::testing::REQUIRE_GPU) {
        return;
    }
    let required = required_entries();
    for arch in ["compute_80", "compute_90"] {
        let mut found = Vec::new();
        for file in ["shape.cu", "index.cu"] {
            // the source and options the library compiles with (prelude included)
            let kf = crate::kernels::KERNEL_FILES.iter().find(|f| f.name == file).expect("kernel file");
            let ptx = crate::kernels::compile_ptx(kf, arch).unwrap_or_else(|e| panic!("{file} for {arch}: {e}"));
            for e in &required {
                if ptx.contains(&format!(".entry {e}(")) {
                    let size = param0_size(&ptx, e).unwrap_or_else(|| panic!("{e}: no metadata parameter in the PTX"));
                    assert_eq!(size, meta_size(e), "{e} ({file}, {arch}): metadata struct size differs from its Rust mirror");
                    found.push(e.clone());
                }
            }
        }
        let missing: Vec<_> = required.iter().filter(|e| !found.contains(e)).collect();
        assert!(missing.is_empty(), "{arch}: entries missing from the PTX: {missing:?}");
        println!("{arch}: {} entries compiled and checked", found.len());
    }
}

// ---------------------------------------------------------------- host emulation of the kernels

/// Element size and dtype suffix of an entry name.
fn entry_dtype(entry: &str) -> (&str, usize) {
    let (op, suf) = entry.trim_end_matches("_tiled").rsplit_once('_').expect("entry name");
    let size = match suf {
        "f32" | "i32" => 4,
        "f64" | "i64" => 8,
        "bool" => 1,
        _ => panic!("bad suffix in {entry}"),
    };
    (op, size)
}

/// # Safety
/// The plan's pointers are host addresses of buffers of the sizes the metadata describes.
unsafe fn copy(src: u64, si: i64, dst: u64, di: i64, es: usize) {
    std::ptr::copy_nonoverlapping((src as *const u8).offset(si as isize * es as isize), (dst as *mut u8).offset(di as isize * es as isize), es);
}

unsafe fn zero(dst: u64, di: i64, es: usize) {
    std::ptr::write_bytes((dst as *mut u8).offset(di as isize * es as isize), 0, es);
}

unsafe fn load_index(p: u64, i: i64, idx64: i32) -> i64 {
    if idx64 != 0 {
        *(p as *const i64).offset(i as isize)
    } else {
        *(p as *const i32).offset(i as isize) as i64
    }
}

unsafe fn flag_bad(bad: u64, pos: i64) {
    if bad != 0 {
        let w = bad as *mut u64;
        *w = (*w).min(pos as u64);
    }
}

/// The kernels' `atomic_add_elem` and `neg_elem`: float addition and negation, wrapping
/// integer ones.
trait AddElem: Copy {
    fn add(self, o: Self) -> Self;
    fn neg(self) -> Self;
}
impl AddElem for f32 {
    fn add(self, o: f32) -> f32 {
        self + o
    }
    fn neg(self) -> f32 {
        -self
    }
}
impl AddElem for f64 {
    fn add(self, o: f64) -> f64 {
        self + o
    }
    fn neg(self) -> f64 {
        -self
    }
}
impl AddElem for i32 {
    fn add(self, o: i32) -> i32 {
        self.wrapping_add(o)
    }
    fn neg(self) -> i32 {
        self.wrapping_neg()
    }
}
impl AddElem for i64 {
    fn add(self, o: i64) -> i64 {
        self.wrapping_add(o)
    }
    fn neg(self) -> i64 {
        self.wrapping_neg()
    }
}

unsafe fn add_at<T: AddElem>(dst: u64, di: i64, src: u64, si: i64, negate: bool) {
    let d = (dst as *mut T).offset(di as isize);
    let u = *(src as *const T).offset(si as isize);
    *d = (*d).add(if negate { u.neg() } else { u });
}

/// `dst[di] += src[si]` (`-=` with `negate`) in the dtype of suffix `suf`.
unsafe fn add_elem(suf: &str, dst: u64, di: i64, src: u64, si: i64, negate: bool) {
    match suf {
        "f32" => add_at::<f32>(dst, di, src, si, negate),
        "f64" => add_at::<f64>(dst, di, src, si, negate),
        "i32" => add_at::<i32>(dst, di, src, si, negate),
        "i64" => add_at::<i64>(dst, di, src, si, negate),
        _ => panic!("no atomicAdd for {suf}"),
    }
}

fn nd_offset(m: &NdMeta, idx: u64, r: i64) -> i64 {
    let mut off = 0;
    for j in 0..m.k as usize {
        let v = unsafe { load_index(idx, r * m.k as i64 + j as i64, m.idx64) };
        let d = m.dims[j];
        if v < 0 || v >= d {
            return -1;
        }
        off = off * d + v;
    }
    off
}

/// Runs one kernel step on the host, mirroring `kernels/shape.cu` and `kernels/index.cu`.
unsafe fn emulate(entry: &str, total: usize, meta: &Meta, p: &[u64]) {
    let (op, es) = entry_dtype(entry);
    let suf = entry.trim_end_matches("_tiled").rsplit_once('_').unwrap().1;
    let total = total as i64;
    match meta {
        Meta::Map(m) => {
            for t in 0..total {
                let (mut r, mut off, mut ok) = (t, 0i64, true);
                if op == "transpose" || op == "reverse_v2" || op == "strided_slice" {
                    off = m.base;
                }
                for d in (0..m.rank as usize).rev() {
                    let n = m.out_dims[d];
                    let c = r % n;
                    r /= n;
                    match op {
                        "tile" => off += (c % m.in_dims[d]) * m.in_strides[d],
                        "pad" => {
                            let c = c - m.start[d];
                            ok = ok && c >= 0 && c < m.in_dims[d];
                            off += c * m.in_strides[d];
                        }
                        "strided_slice_grad" => {
                            let (mut q, mut s) = (c - m.start[d], m.step[d]);
                            if s < 0 {
                                q = -q;
                                s = -s;
                            }
                            let k = if q >= 0 { q / s } else { -1 };
                            ok = ok && q >= 0 && k * s == q && k < m.in_dims[d];
                            off += k * m.in_strides[d];
                        }
                        _ => off += c * m.in_strides[d],
                    }
                }
                if ok {
                    copy(p[0], off, p[1], t, es)
                } else {
                    zero(p[1], t, es)
                }
            }
        }
        Meta::Swap(m) => {
            assert_eq!(total, m.batch * m.tiles_r * m.tiles_c, "{entry}: tiles");
            assert_eq!((m.tiles_r, m.tiles_c), ((m.rows + 31) / 32, (m.cols + 31) / 32), "{entry}: tile counts");
            // Tile by tile as the kernel walks them: reads x[b, r, c], writes y[b, c, r].
            for k in 0..total {
                let (tc, tr, b) = (k % m.tiles_c, (k / m.tiles_c) % m.tiles_r, k / (m.tiles_c * m.tiles_r));
                for r in tr * 32..((tr + 1) * 32).min(m.rows) {
                    for c in tc * 32..((tc + 1) * 32).min(m.cols) {
                        copy(p[0], (b * m.rows + r) * m.cols + c, p[1], (b * m.cols + c) * m.rows + r, es);
                    }
                }
            }
        }
        Meta::Pieces(m) => {
            let w = m.offs[m.n as usize];
            assert_eq!(total, m.outer * w, "{entry}: launch size");
            for t in 0..total {
                let (o, c) = (t / w, t % w);
                let piece = (0..m.n as usize).rev().find(|&i| m.offs[i] <= c).unwrap();
                let pw = m.offs[piece + 1] - m.offs[piece];
                let (pi, wi) = (o * pw + c - m.offs[piece], o * m.row + m.col0 + c);
                match op {
                    "concat_v2" | "pack" => copy(m.ptrs[piece], pi, p[0], wi, es),
                    _ => copy(p[0], wi, m.ptrs[piece], pi, es),
                }
            }
        }
        Meta::Gather(m) => {
            for t in 0..total {
                let (j, r) = (t % m.inner, t / m.inner);
                let (q, o) = (r % m.nidx, r / m.nidx);
                let v = load_index(p[1], q, m.idx64);
                if v >= 0 && v < m.n {
                    copy(p[0], (o * m.n + v) * m.inner + j, p[2], t, es);
                } else {
                    zero(p[2], t, es);
                    if j == 0 {
                        flag_bad(p[3], q);
                    }
                }
            }
        }
        Meta::Nd(m) => {
            for t in 0..total {
                let (j, r) = (t % m.inner, t / m.inner);
                let off = nd_offset(m, if op == "gather_nd" { p[1] } else { p[0] }, r);
                match (op, off >= 0) {
                    ("gather_nd", true) => copy(p[0], off * m.inner + j, p[2], t, es),
                    ("gather_nd", false) => zero(p[2], t, es),
                    ("tensor_scatter_update", true) => copy(p[1], t, p[2], off * m.inner + j, es),
                    (_, true) => add_elem(suf, p[2], off * m.inner + j, p[1], t, op == "tensor_scatter_sub"),
                    (_, false) => {}
                }
                if off < 0 && j == 0 {
                    flag_bad(p[3], r);
                }
            }
        }
        Meta::Diag(m) => {
            for t in 0..total {
                if op == "matrix_diag" {
                    let (c, r, b) = (t % m.n, (t / m.n) % m.n, t / (m.n * m.n));
                    if r == c {
                        copy(p[0], b * m.n + r, p[1], t, es)
                    } else {
                        zero(p[1], t, es)
                    }
                } else {
                    let (i, b) = (t % m.n, t / m.n);
                    copy(p[0], b * m.rows * m.cols + i * m.cols + i, p[1], t, es);
                }
            }
        }
    }
}

/// Plans `case` over host buffers, runs the plan on the host and returns the output bytes.
fn run_on_host(case: &Case, bad: u64) -> Vec<Vec<u8>> {
    let node = case.node();
    let ins: Vec<Vec<u8>> = case.inputs.iter().map(tensor_bytes).collect();
    let mut outs: Vec<Vec<u8>> = node.outputs.iter().map(|t| vec![0xAB; t.shape.num_elements() * t.dtype.size_of()]).collect();
    let arg = |b: &[u8], t: &Tensor| DevArg { ptr: b.as_ptr() as u64, dtype: t.dtype(), dims: t.dims().to_vec() };
    let in_args: Vec<DevArg> = ins.iter().zip(&case.inputs).map(|(b, t)| arg(b, t)).collect();
    let out_args: Vec<DevArg> =
        outs.iter_mut().zip(&node.outputs).map(|(b, t)| DevArg { ptr: b.as_mut_ptr() as u64, dtype: t.dtype, dims: t.shape.0.clone() }).collect();
    let plan = planner(node.op.name).expect("planner")(node, &in_args, &out_args, bad).unwrap_or_else(|e| panic!("{}: {e}", case.name));
    for step in &plan {
        match step {
            Step::Zero { ptr, bytes } => unsafe { std::ptr::write_bytes(*ptr as *mut u8, 0, *bytes) },
            // SAFETY: the plan copies between two of the buffers of `ins`/`outs`.
            Step::Copy { src, dst, bytes } => unsafe { std::ptr::copy_nonoverlapping(*src as *const u8, *dst as *mut u8, *bytes) },
            Step::Kernel { entry, total, meta, ptrs } => {
                assert_eq!(entry.trim_end_matches("_tiled"), entry_name(node.op.name, node.outputs[0].dtype), "{}", case.name);
                // SAFETY: the plan points into `ins`/`outs`, alive here.
                unsafe { emulate(entry, *total, meta, ptrs) }
            }
        }
    }
    outs
}

#[test]
fn launch_plans_reproduce_the_cpu_kernels() {
    let all = cases();
    for case in &all {
        let want: Vec<Vec<u8>> = case.cpu_outputs().iter().map(tensor_bytes).collect();
        let got = run_on_host(case, 0);
        assert_eq!(got.len(), want.len(), "{}: number of outputs", case.name);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "{}: output {i} differs from the CPU kernel", case.name);
        }
    }
    println!("{} cases checked", all.len());
}

#[test]
fn bad_indices_give_zeros_and_are_recorded() {
    for (case, pos, cpu_error) in bad_index_cases() {
        let mut word = NO_BAD_INDEX;
        let outs = run_on_host(&case, &mut word as *mut u64 as u64);
        assert_eq!(word, pos, "{}: recorded position", case.name);
        // The device reads the bad row back and reports the CPU's error text.
        let node = case.node();
        let args: Vec<DevArg> = case.inputs.iter().map(|t| DevArg { ptr: 0, dtype: t.dtype(), dims: t.dims().to_vec() }).collect();
        let (first, k) = bad_index_row(node, &args, word);
        let idx = if node.op.name == "ScatterNd" { &case.inputs[0] } else { &case.inputs[1] };
        let vals: Vec<i64> = idx.to_f64_vec().iter().map(|&v| v as i64).collect();
        let err = bad_index_error(node, &args, word, &vals[first..first + k]);
        assert_eq!(err.to_string(), cpu_error, "{}: error text", case.name);
        // TF's GPU results: zeros for bad gathers, skipped scatter rows.
        let out: Vec<f32> = outs[0].chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        match node.op.name {
            "GatherV2" => assert_eq!(out, [1.0, 2.5, 4.0, 0.0, 0.0, 0.0, -3.5, -2.0, -0.5, 0.0, 0.0, 0.0], "{}", case.name),
            "GatherNd" => assert_eq!(out, [-3.5, 0.0, 0.0], "{}", case.name),
            // row 0 increased by updates' row 0, the rest of the tensor as it was
            "TensorScatterAdd" => assert_eq!(out, [-7.0, -4.0, -0.5, 1.0, 2.5, 4.0, 5.5, 7.0], "{}", case.name),
            _ => assert_eq!(out, [-3.5, -2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], "{}", case.name),
        }
    }
}

/// The `MapMeta` of the single kernel step of `case`'s plan (fake device pointers).
fn map_meta_of(case: &Case) -> MapMeta {
    let node = case.node();
    let args = |ts: Vec<(DType, Vec<usize>)>| ts.into_iter().map(|(dtype, dims)| DevArg { ptr: 0x1000, dtype, dims }).collect::<Vec<_>>();
    let ins = args(case.inputs.iter().map(|t| (t.dtype(), t.dims().to_vec())).collect());
    let outs = args(node.outputs.iter().map(|t| (t.dtype, t.shape.0.clone())).collect());
    match &planner(node.op.name).unwrap()(node, &ins, &outs, 0).unwrap()[..] {
        [Step::Kernel { meta: Meta::Map(m), .. }] => *m,
        other => panic!("{}: unexpected plan {other:?}", case.name),
    }
}

#[test]
fn transposes_of_the_last_two_axes_are_tiled() {
    use cases::{case, ramp};
    use oxiflow_core::ops::AttrValue;
    let plan = |dims: &[usize], perm: &[i64]| {
        let c = case("t", "Transpose", vec![ramp(DType::Float64, dims, 0)], vec![("perm", AttrValue::Ints(perm.to_vec()))]);
        let node = c.node();
        let ins = [DevArg { ptr: 1, dtype: DType::Float64, dims: dims.to_vec() }];
        let outs = [DevArg { ptr: 2, dtype: DType::Float64, dims: node.outputs[0].shape.0.clone() }];
        planner("Transpose").unwrap()(node, &ins, &outs, 0).unwrap()
    };
    let tiled = |steps: &[Step]| matches!(steps, [Step::Kernel { entry, meta: Meta::Swap(_), .. }] if entry == "transpose_f64_tiled");
    assert!(tiled(&plan(&[33, 65], &[1, 0])));
    assert!(tiled(&plan(&[3, 40, 17], &[0, 2, 1])));
    assert!(tiled(&plan(&[2, 3, 40, 17], &[0, 1, 3, 2])), "batch axes merge into one");
    assert!(!tiled(&plan(&[3, 40, 17], &[1, 0, 2])), "not a swap of the last two axes");
    assert!(!tiled(&plan(&[40, 4], &[1, 0])), "too thin for tiles");
}

#[test]
fn strided_gathers_merge_axes() {
    use cases::{case, ramp};
    use oxiflow_core::ops::AttrValue;
    let x = || ramp(DType::Float32, &[2, 3, 4], 0);
    let identity = map_meta_of(&case("identity", "Transpose", vec![x()], vec![("perm", AttrValue::Ints(vec![0, 1, 2]))]));
    assert_eq!((identity.rank, identity.out_dims[0], identity.in_strides[0], identity.base), (1, 24, 1, 0));
    let swap = map_meta_of(&case("swap", "Transpose", vec![x()], vec![("perm", AttrValue::Ints(vec![2, 0, 1]))]));
    assert_eq!((swap.rank, &swap.out_dims[..2], &swap.in_strides[..2]), (2, &[4, 6][..], &[1, 4][..]));
    let all = map_meta_of(&case("reverse all", "ReverseV2", vec![x()], vec![("axis", AttrValue::Ints(vec![0, 1, 2]))]));
    assert_eq!((all.rank, all.out_dims[0], all.in_strides[0], all.base), (1, 24, -1, 23));
}
