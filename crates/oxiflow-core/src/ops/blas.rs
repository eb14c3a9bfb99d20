//! The system's OpenBLAS for `MatMul`, loaded at run time (`cblas_sgemm` / `cblas_dgemm`, as
//! NumPy and TF's MKL builds call a vendor BLAS), with the `gemm` crate as the fallback
//! where no OpenBLAS is installed. Every product goes to OpenBLAS when it is loaded: since
//! kernels run their blocks on the session's own workers it was as fast or faster than the
//! `gemm` crate from n = 64 to 2048 on an AVX2 EPYC, and about 3x faster with AVX-512
//! (gemm 0.18 stops at AVX2 on stable Rust); docs/performance/peers-history.md has the figures.
//!
//! Which library: `OXIFLOW_BLAS_LIB` (a path or soname) if set, else `libopenblas.so.0`
//! (Debian's `libopenblas0-pthread`, installed by `make setup`), else `libopenblas.so`.
//! `OXIFLOW_BLAS=gemm` skips the search. Generic `libblas.so.3` is not tried: it may be the
//! unoptimized reference BLAS. A library may export the plain cblas names or the `scipy_`
//! prefixed ones of `scipy-openblas32`, the OpenBLAS build NumPy and SciPy ship, which
//! `make setup` unpacks into `.deps/openblas` and the Julia package names in
//! `OXIFLOW_BLAS_LIB` (OpenBLAS 0.3.34 against Debian bullseye's 0.3.21: 5-10 % faster on
//! 64- to 256-sized products here, and 1.5x on a 256x10 by 10x256 one).
//!
//! Threads: OpenBLAS is told to use one thread, and a product of at least
//! `PARALLEL_THRESHOLD` multiply-adds is split by output rows (or columns when there
//! are more of them) into one block per intra-op thread, each block one single-threaded
//! `gemm` call on the session's intra-op pool. So `intra_op_parallelism_threads` keeps its
//! meaning, and OpenBLAS's own pool never competes with the executor's threads.

use crate::intra_op::SharedOut;
use libloading::Library;
use std::ffi::c_int;
use std::sync::OnceLock;

const ROW_MAJOR: c_int = 101;
const NO_TRANS: c_int = 111;
const TRANS: c_int = 112;

/// `cblas_?gemm(layout, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)`.
type Gemm<T> = unsafe extern "C" fn(c_int, c_int, c_int, c_int, c_int, c_int, T, *const T, c_int, *const T, c_int, T, *mut T, c_int);

/// A loaded BLAS: the library (kept open) and its two entry points.
pub(crate) struct Blas {
    _lib: Library,
    sgemm: Gemm<f32>,
    dgemm: Gemm<f64>,
    /// What was loaded (`backend_name`).
    pub name: String,
}

/// Symbol prefixes tried, in order: none (the plain cblas names of an OpenBLAS build such
/// as Debian's `libopenblas.so.0`) and `scipy_`, which the `scipy-openblas32` build (the OpenBLAS that
/// NumPy and SciPy ship, with the same LP64 `cblas.h` interface) puts before every name.
const PREFIXES: [&str; 2] = ["", "scipy_"];

fn load(name: &str) -> Option<Blas> {
    // SAFETY: loading a shared library runs its initializers; OpenBLAS's only set up its
    // buffers. The symbols are read with the C signatures of cblas.h (32-bit ints: the
    // LP64 interface that `libopenblas.so.0` and `libscipy_openblas.so` export).
    unsafe {
        let lib = Library::new(name).ok()?;
        for prefix in PREFIXES {
            let sym = |s: &str| format!("{prefix}{s}\0").into_bytes();
            let (Ok(sgemm), Ok(dgemm)) = (lib.get::<Gemm<f32>>(&sym("cblas_sgemm")), lib.get::<Gemm<f64>>(&sym("cblas_dgemm"))) else {
                continue;
            };
            let (sgemm, dgemm) = (*sgemm, *dgemm);
            if let Ok(set) = lib.get::<unsafe extern "C" fn(c_int)>(&sym("openblas_set_num_threads")) {
                set(1);
            }
            return Some(Blas { _lib: lib, sgemm, dgemm, name: name.to_string() });
        }
        None
    }
}

/// The process's BLAS, loaded on first use; `None` when there is none (then MatMul uses the
/// `gemm` crate).
pub(crate) fn blas() -> Option<&'static Blas> {
    static BLAS: OnceLock<Option<Blas>> = OnceLock::new();
    BLAS.get_or_init(|| {
        if std::env::var("OXIFLOW_BLAS").is_ok_and(|v| v == "gemm") {
            return None;
        }
        match std::env::var("OXIFLOW_BLAS_LIB") {
            Ok(p) if !p.is_empty() => load(&p),
            _ => load("libopenblas.so.0").or_else(|| load("libopenblas.so")),
        }
    })
    .as_ref()
}

/// What MatMul's CPU kernel computes with: the BLAS library's name, or `"gemm crate"`.
pub fn backend_name() -> String {
    blas().map_or_else(|| "gemm crate".to_string(), |b| b.name.clone())
}

/// One operand as BLAS sees it: base pointer, whether it is transposed in row-major terms,
/// and its leading dimension.
#[derive(Clone, Copy)]
pub(crate) struct Operand<T> {
    pub ptr: *const T,
    pub trans: bool,
    pub ld: usize,
}

impl<T> Operand<T> {
    /// `rows x cols` with element strides `(s0, s1)`: row-major (`s1 == 1`) or column-major
    /// (`s0 == 1`) with a leading dimension BLAS accepts; `None` otherwise (the caller copies).
    pub fn new(ptr: *const T, rows: usize, cols: usize, s0: isize, s1: isize) -> Option<Self> {
        let fits = |ld: isize, min: usize| ld >= 0 && (ld as usize) >= min.max(1) && ld as usize <= c_int::MAX as usize;
        if (s1 == 1 || cols <= 1) && (fits(s0, cols) || rows <= 1) {
            Some(Operand { ptr, trans: false, ld: if rows <= 1 { cols.max(1) } else { s0 as usize } })
        } else if (s0 == 1 || rows <= 1) && (fits(s1, rows) || cols <= 1) {
            Some(Operand { ptr, trans: true, ld: if cols <= 1 { rows.max(1) } else { s1 as usize } })
        } else {
            None
        }
    }

    /// The block starting at logical element `(r, c)`.
    fn at(&self, r: usize, c: usize) -> *const T {
        let off = if self.trans { c * self.ld + r } else { r * self.ld + c };
        self.ptr.wrapping_add(off)
    }
}

/// Element types with a BLAS `gemm`.
pub(crate) trait BlasFloat: Copy + Send + Sync {
    /// `c = a @ b` for an `m x k` and a `k x n` operand, `c` row-major with `n` columns.
    ///
    /// # Safety
    /// The operands describe live memory of their shapes; `c` has `m * n` elements and
    /// aliases neither.
    #[allow(clippy::too_many_arguments)] // cblas_?gemm's own parameters
    unsafe fn gemm(blas: &Blas, m: usize, n: usize, k: usize, a: Operand<Self>, b: Operand<Self>, c: *mut Self, ldc: usize);

    /// `c = a @ b + beta c` (BLAS's `beta`; `c` is not read when `beta` is 0), as [`BlasFloat::gemm`].
    ///
    /// # Safety
    /// As [`BlasFloat::gemm`]; with a non-zero `beta`, `c`'s elements are initialized.
    #[allow(clippy::too_many_arguments)] // cblas_?gemm's own parameters
    unsafe fn gemm_beta(blas: &Blas, m: usize, n: usize, k: usize, a: Operand<Self>, b: Operand<Self>, c: *mut Self, ldc: usize, beta: Self);
}

macro_rules! blas_float {
    ($t:ty, $f:ident) => {
        impl BlasFloat for $t {
            unsafe fn gemm(blas: &Blas, m: usize, n: usize, k: usize, a: Operand<$t>, b: Operand<$t>, c: *mut $t, ldc: usize) {
                Self::gemm_beta(blas, m, n, k, a, b, c, ldc, 0.0)
            }
            unsafe fn gemm_beta(blas: &Blas, m: usize, n: usize, k: usize, a: Operand<$t>, b: Operand<$t>, c: *mut $t, ldc: usize, beta: $t) {
                let t = |x: bool| if x { TRANS } else { NO_TRANS };
                (blas.$f)(
                    ROW_MAJOR,
                    t(a.trans),
                    t(b.trans),
                    m as c_int,
                    n as c_int,
                    k as c_int,
                    1.0,
                    a.ptr,
                    a.ld as c_int,
                    b.ptr,
                    b.ld as c_int,
                    beta,
                    c,
                    ldc as c_int,
                );
            }
        }
    };
}
blas_float!(f32, sgemm);
blas_float!(f64, dgemm);

// SAFETY: an Operand only describes read-only memory that outlives the product; the
// blocks of one product read it from the pool's threads at the same time.
unsafe impl<T> Send for Operand<T> {}
unsafe impl<T> Sync for Operand<T> {}

/// Work done on each block of a product right after BLAS wrote it, by the thread that
/// computed it, while the block is still in its cache (`_FusedMatMul`'s bias and
/// activation): called as `epilogue(row, col, seg)`, `seg` being the row's elements
/// `col..col + seg.len()` of the row-major `m x n` output, once per row of a block of
/// columns; a block of whole rows (`col` 0) comes in one call, `seg` holding the rows
/// `row, row + 1, ...` one after another.
pub(crate) type Epilogue<'a, T> = &'a (dyn Fn(usize, usize, &mut [T]) + Sync);

/// `c = a @ b` (`m x k` by `k x n` into a row-major `m x n` buffer) with the BLAS, split
/// into `threads` blocks run by the calling thread and the intra-op pool
/// ([`crate::intra_op::parallel_for`]) when `threads > 1`, each block followed by
/// `epilogue` when one is given. `false` when the shapes exceed BLAS's 32-bit sizes (the
/// caller uses another kernel).
///
/// # Safety
/// As [`BlasFloat::gemm`]; `c` is valid for `m * n` writes.
#[allow(clippy::too_many_arguments)] // gemm's parameters, the thread count and the epilogue
pub(crate) unsafe fn matmul<T: BlasFloat>(
    blas: &Blas,
    m: usize,
    n: usize,
    k: usize,
    a: Operand<T>,
    b: Operand<T>,
    c: *mut T,
    threads: usize,
    epilogue: Option<Epilogue<T>>,
) -> bool {
    let max = c_int::MAX as usize;
    if m > max || n > max || k > max || m.checked_mul(n).is_none_or(|mn| mn > isize::MAX as usize) {
        return false;
    }
    let by_rows = m >= n;
    let len = if by_rows { m } else { n };
    let blocks = threads.min(len).max(1);
    // SAFETY (for the callers below): rows lo..hi (or columns lo..hi) of c are written by
    // the block that calls this and by no other thread while it runs.
    let finish = |c: SharedOut<T>, rows: (usize, usize), cols: (usize, usize)| {
        if let Some(f) = epilogue {
            if cols == (0, n) {
                // SAFETY: see above; whole rows rows.0..rows.1 are (rows.1 - rows.0) * n
                // consecutive elements inside c's m * n.
                let seg = unsafe { std::slice::from_raw_parts_mut(c.at(rows.0 * n), (rows.1 - rows.0) * n) };
                f(rows.0, 0, seg);
                return;
            }
            for r in rows.0..rows.1 {
                // SAFETY: see above; the segment lies inside c's m * n elements.
                let seg = unsafe { std::slice::from_raw_parts_mut(c.at(r * n + cols.0), cols.1 - cols.0) };
                f(r, cols.0, seg);
            }
        }
    };
    if blocks == 1 {
        T::gemm(blas, m, n, k, a, b, c, n);
        finish(SharedOut(c), (0, m), (0, n));
        return true;
    }
    let step = len.div_ceil(blocks);
    let c = SharedOut(c);
    // the calling thread runs blocks too (intra_op::parallel_for)
    crate::intra_op::parallel_for(blocks, |i| {
        let (lo, hi) = (i * step, ((i + 1) * step).min(len));
        if lo >= hi {
            return;
        }
        // SAFETY: block i reads rows lo..hi of a (or columns lo..hi of b) and writes the
        // same rows (columns) of c, disjoint from every other block's.
        unsafe {
            if by_rows {
                T::gemm(blas, hi - lo, n, k, Operand { ptr: a.at(lo, 0), ..a }, b, c.at(lo * n), n);
            } else {
                T::gemm(blas, m, hi - lo, k, a, Operand { ptr: b.at(0, lo), ..b }, c.at(lo), n);
            }
        }
        if by_rows {
            finish(c, (lo, hi), (0, n));
        } else {
            finish(c, (0, m), (lo, hi));
        }
    });
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{s, Array2, ArrayView2};

    /// The product by its definition (integer-valued entries: exact in any order).
    fn naive(a: ArrayView2<f64>, b: ArrayView2<f64>) -> Array2<f64> {
        let (m, k) = a.dim();
        Array2::from_shape_fn((m, b.dim().1), |(i, j)| (0..k).map(|p| a[[i, p]] * b[[p, j]]).sum())
    }

    fn operand<T>(v: &ArrayView2<T>) -> Operand<T> {
        let (r, c) = v.dim();
        Operand::new(v.as_ptr(), r, c, v.strides()[0], v.strides()[1]).expect("a BLAS layout")
    }

    #[test]
    fn the_system_blas_multiplies_every_layout_and_block_split_exactly() {
        let Some(lib) = blas() else {
            // make setup installs libopenblas0-pthread; without it MatMul uses the gemm crate.
            println!("skipped: no OpenBLAS (libopenblas.so.0) on this machine");
            return;
        };
        multiplies_every_layout_exactly(lib);
    }

    #[test]
    fn the_scipy_openblas_build_loads_with_its_prefixed_names() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.deps/openblas/scipy_openblas32/lib/libscipy_openblas.so");
        if !std::path::Path::new(path).exists() {
            // make setup (scripts/install-openblas.sh) unpacks it
            println!("skipped: no {path}");
            return;
        }
        let lib = load(path).expect("libscipy_openblas.so exports scipy_cblas_sgemm and scipy_cblas_dgemm");
        multiplies_every_layout_exactly(&lib);
    }

    fn multiplies_every_layout_exactly(lib: &Blas) {
        let big = Array2::from_shape_fn((40, 33), |(i, j)| ((i * 7 + j * 3) % 11) as f64 - 5.0);
        let other = Array2::from_shape_fn((33, 40), |(i, j)| ((i * 5 + j) % 7) as f64 - 3.0);
        // (a, b): row-major, transposed, sliced (leading dimension > columns), one row, one column
        let cases: Vec<(ArrayView2<f64>, ArrayView2<f64>)> = vec![
            (big.view(), other.view()),
            (other.t(), big.t()),
            (big.slice(s![3..30, 2..20]), other.slice(s![5..23, 1..39])),
            (big.slice(s![..1, ..]), other.view()),
            (big.view(), other.slice(s![.., 4..5])),
            (big.slice(s![..9, ..]).reversed_axes(), big.slice(s![..9, 1..31])),
        ];
        for (case, (a, b)) in cases.into_iter().enumerate() {
            let (m, k) = a.dim();
            let n = b.dim().1;
            let want = naive(a, b);
            for threads in [1, 2, 3] {
                let mut c = vec![f64::NAN; m * n];
                assert!(unsafe { matmul(lib, m, n, k, operand(&a), operand(&b), c.as_mut_ptr(), threads, None) });
                assert_eq!(Array2::from_shape_vec((m, n), c).unwrap(), want, "case {case}, {threads} threads");
                // f32, same integers
                let (a32, b32) = (a.mapv(|x| x as f32), b.mapv(|x| x as f32));
                let mut c32 = vec![f32::NAN; m * n];
                assert!(unsafe { matmul(lib, m, n, k, operand(&a32.view()), operand(&b32.view()), c32.as_mut_ptr(), threads, None) });
                assert!(c32.iter().zip(want.iter()).all(|(&g, &w)| g as f64 == w), "case {case} f32, {threads} threads");
                // an epilogue sees every element once, at its own row and column, however
                // the blocks split the product (by rows, or by columns when n > m)
                let seen = std::sync::Mutex::new(vec![0u32; m * n]);
                // (a call may hold several whole rows: element j of seg is at r * n + c0 + j)
                let mark = |r: usize, c0: usize, seg: &mut [f64]| {
                    let mut seen = seen.lock().unwrap();
                    for (j, v) in seg.iter_mut().enumerate() {
                        let at = r * n + c0 + j;
                        seen[at] += 1;
                        *v += ((at / n) * 1000 + at % n) as f64;
                    }
                };
                let mut c = vec![f64::NAN; m * n];
                assert!(unsafe { matmul(lib, m, n, k, operand(&a), operand(&b), c.as_mut_ptr(), threads, Some(&mark)) });
                assert!(seen.into_inner().unwrap().iter().all(|&s| s == 1), "case {case}, {threads} threads: an element seen other than once");
                let want_plus = Array2::from_shape_fn((m, n), |(i, j)| want[[i, j]] + (i * 1000 + j) as f64);
                assert_eq!(Array2::from_shape_vec((m, n), c).unwrap(), want_plus, "case {case}, {threads} threads, with an epilogue");
            }
        }
    }

    #[test]
    fn layouts_blas_cannot_take_are_refused() {
        let x = Array2::<f64>::zeros((4, 6));
        let every_other = x.slice(s![.., ..;2]); // column stride 2
        assert!(Operand::new(every_other.as_ptr(), 4, 3, every_other.strides()[0], every_other.strides()[1]).is_none());
        assert!(Operand::new(x.as_ptr(), 4, 6, 0, 1).is_none(), "a broadcast (stride 0) row");
        let t = x.t();
        let o = Operand::new(t.as_ptr(), 6, 4, t.strides()[0], t.strides()[1]).unwrap();
        assert!(o.trans && o.ld == 6);
    }
}
