//! `MatMul` (TF's `tf.matmul` / `gen_math_ops.mat_mul`, gradient `_MatMulGrad`).
//!
//! `MatMul(a, b)` with bool attrs `transpose_a`, `transpose_b` (default false): rank-2
//! `Float32`/`Float64` operands of one dtype, `op(a)` is `[m, k]` and `op(b)` is `[k, n]`,
//! the output `[m, n]`. Other ranks or mismatched inner dimensions are a `ShapeMismatch`
//! naming both shapes. The CPU kernel is the `gemm` crate (BLAS-grade, Rayon-parallel for
//! large products, on the session's intra-op threads), or the system's OpenBLAS when one is
//! installed (`blas.rs`: single-threaded calls, one block of rows or columns per intra-op
//! thread); transposes and strided inputs are passed as strides, never copied, except
//! inputs with negative strides, which are first made standard-layout.

use super::blas::BlasFloat;
use super::math::def;
use super::*;
use crate::graph::NodeSpec;
use crate::tensor::Element;
use ndarray::{Array2, ArrayView2, ArrayViewMut2, ArcArray, Ix2, IxDyn};

/// Products with `m*n*k` below this run single-threaded (thread start-up would dominate).
const PARALLEL_THRESHOLD: usize = 64 * 64 * 64;

fn transposes(attrs: &Attrs) -> (bool, bool) {
    (attrs.get_bool_or("transpose_a", false), attrs.get_bool_or("transpose_b", false))
}

fn infer_matmul(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let (a, b) = (&ctx.inputs[0], &ctx.inputs[1]);
    if a.dtype != b.dtype {
        return Err(ctx.dtype_error(a.dtype, b.dtype, " (both MatMul operands must have the same dtype)"));
    }
    ctx.require_float(a.dtype)?;
    let (ta, tb) = transposes(ctx.attrs);
    if a.shape.rank() != 2 || b.shape.rank() != 2 {
        return Err(ctx.shape_error(&a.shape, &b.shape, " (MatMul needs two rank-2 matrices)"));
    }
    let (ad, bd) = (a.shape.dims(), b.shape.dims());
    let (m, k1) = if ta { (ad[1], ad[0]) } else { (ad[0], ad[1]) };
    let (k2, n) = if tb { (bd[1], bd[0]) } else { (bd[0], bd[1]) };
    if k1 != k2 {
        return Err(ctx.shape_error(
            &a.shape,
            &b.shape,
            format!(" (MatMul inner dimensions differ: {k1} vs {k2}; transpose_a={ta}, transpose_b={tb})"),
        ));
    }
    Ok(vec![TensorType::new(a.dtype, Shape(vec![m, n]))])
}

/// `a @ b` with the `gemm` crate; `a` is `[m, k]`, `b` is `[k, n]`, any strides.
/// Views with a negative stride are copied to standard layout first.
fn gemm_product<T: Element + BlasFloat>(a: ArrayView2<T>, b: ArrayView2<T>, zero: T, one: T) -> Array2<T> {
    let (m, k) = a.dim();
    let n = b.dim().1;
    let mut dst = Array2::from_elem((m, n), zero);
    if m == 0 || n == 0 || k == 0 {
        return dst;
    }
    let negative = |v: &ArrayView2<T>| v.strides().iter().any(|&s| s < 0);
    let (a_owned, b_owned);
    let a = if negative(&a) {
        a_owned = a.as_standard_layout().into_owned();
        a_owned.view()
    } else {
        a.view()
    };
    let b = if negative(&b) {
        b_owned = b.as_standard_layout().into_owned();
        b_owned.view()
    } else {
        b.view()
    };
    if let Some(lib) = super::blas::blas().filter(|_| super::blas::prefer_blas(m, n, k)) {
        let op = |v: &ArrayView2<T>| {
            let (r, c) = v.dim();
            super::blas::Operand::new(v.as_ptr(), r, c, v.strides()[0], v.strides()[1])
        };
        if let (Some(oa), Some(ob)) = (op(&a), op(&b)) {
            let threads = match gemm_parallelism(m, n, k) {
                gemm::Parallelism::None => 1,
                gemm::Parallelism::Rayon(t) => t,
            };
            // SAFETY: oa and ob describe the live views a and b; dst is a fresh m x n
            // standard-layout buffer.
            if unsafe { super::blas::matmul(lib, m, n, k, oa, ob, dst.as_mut_ptr(), threads) } {
                return dst;
            }
        }
    }
    let par = gemm_parallelism(m, n, k);
    match par {
        gemm::Parallelism::None => gemm_into(dst.view_mut(), a, b, zero, one, par),
        _ => crate::intra_op::install(|| gemm_into(dst.view_mut(), a, b, zero, one, par)),
    }
    dst
}

/// The `gemm` parallelism a MatMul kernel on this thread uses for an `m x k` by `k x n`
/// product: the session's intra-op thread count ([`crate::intra_op::intra_op_threads`],
/// TF's `intra_op_parallelism_threads`), or none for products under [`PARALLEL_THRESHOLD`]
/// multiply-adds or a session with one intra-op thread.
pub(crate) fn gemm_parallelism(m: usize, n: usize, k: usize) -> gemm::Parallelism {
    let threads = crate::intra_op::intra_op_threads();
    if threads <= 1 || m.saturating_mul(n).saturating_mul(k) < PARALLEL_THRESHOLD {
        gemm::Parallelism::None
    } else {
        gemm::Parallelism::Rayon(threads)
    }
}

/// `dst = a @ b` by `gemm` with parallelism `par`; shapes `[m, n]`, `[m, k]`, `[k, n]`, no
/// negative strides.
fn gemm_into<T: Element>(mut dst: ArrayViewMut2<T>, a: ArrayView2<T>, b: ArrayView2<T>, zero: T, one: T, par: gemm::Parallelism) {
    let (m, k) = a.dim();
    let n = b.dim().1;
    let (ds, as_, bs) = (dst.strides().to_vec(), a.strides(), b.strides());
    // SAFETY: the pointers and strides describe live arrays of exactly m x k, k x n and
    // m x n elements of T (f32 or f64, the only types the kernel dispatches); dst is a
    // uniquely borrowed buffer that aliases neither input. read_dst = false: dst is
    // only written (beta = 1: dst = a @ b).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            ds[1],
            ds[0],
            false,
            a.as_ptr(),
            as_[1],
            as_[0],
            b.as_ptr(),
            bs[1],
            bs[0],
            zero,
            one,
            false,
            false,
            false,
            par,
        );
    }
}

fn kernel_matmul(ctx: &KernelCtx) -> Result<Outputs> {
    fn go<T: Element + BlasFloat>(ctx: &KernelCtx, a: &ArcArray<T, IxDyn>, b: &ArcArray<T, IxDyn>, zero: T, one: T) -> Result<ArcArray<T, IxDyn>> {
        let (ta, tb) = transposes(&ctx.node.attrs);
        fn rank2<'a, T>(ctx: &KernelCtx, x: &'a ArcArray<T, IxDyn>) -> Result<ArrayView2<'a, T>> {
            x.view()
                .into_dimensionality::<Ix2>()
                .map_err(|_| ctx.error(format!("needs rank-2 operands, got {}", Shape(x.shape().to_vec()))))
        }
        let (mut a2, mut b2) = (rank2(ctx, a)?, rank2(ctx, b)?);
        if ta {
            a2 = a2.reversed_axes();
        }
        if tb {
            b2 = b2.reversed_axes();
        }
        if a2.dim().1 != b2.dim().0 {
            return Err(ctx.error(format!(
                "incompatible shapes {} and {} (transpose_a={ta}, transpose_b={tb})",
                Shape(a.shape().to_vec()),
                Shape(b.shape().to_vec())
            )));
        }
        Ok(gemm_product(a2, b2, zero, one).into_dyn().into_shared())
    }
    Ok(smallvec![match (&ctx.inputs[0], &ctx.inputs[1]) {
        (Tensor::F32(a), Tensor::F32(b)) => Tensor::F32(go(ctx, a, b, 0.0, 1.0)?),
        (Tensor::F64(a), Tensor::F64(b)) => Tensor::F64(go(ctx, a, b, 0.0, 1.0)?),
        (a, b) => return Err(ctx.error(format!("no kernel for dtypes {} and {}", a.dtype(), b.dtype()))),
    }])
}

fn matmul(g: &mut Graph, a: Output, b: Output, ta: bool, tb: bool) -> Result<Output> {
    g.op_spec(NodeSpec::new("MatMul", &[a, b]).attr("transpose_a", ta).attr("transpose_b", tb))
}

/// TF `_MatMulGrad`: for `C = op(A) op(B)`, products of `dC` with the other operand,
/// transposed so that no explicit transpose node is needed.
fn grad_matmul(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dc) = grads[0] else { return Ok(vec![None, None]) };
    let (a, b) = (node.inputs[0], node.inputs[1]);
    let (ga, gb) = match transposes(&node.attrs) {
        (false, false) => (matmul(g, dc, b, false, true)?, matmul(g, a, dc, true, false)?),
        (false, true) => (matmul(g, dc, b, false, false)?, matmul(g, dc, a, true, false)?),
        (true, false) => (matmul(g, b, dc, false, true)?, matmul(g, a, dc, false, false)?),
        (true, true) => (matmul(g, b, dc, true, true)?, matmul(g, dc, a, true, true)?),
    };
    Ok(vec![Some(ga), Some(gb)])
}

pub(crate) fn register(r: &mut Registry) {
    r.add(def("MatMul", "MatMul", Arity::Fixed(2), infer_matmul, kernel_matmul, GPU_FLOATS, Some(grad_matmul)));
}
