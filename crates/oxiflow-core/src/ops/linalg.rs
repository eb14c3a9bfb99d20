//! Dense linear algebra: `MatrixInverse`, `MatrixDeterminant`, `MatrixSolve`,
//! `MatrixSolveLs`, `MatrixDiagPart`, `MatrixDiag`, `BatchMatMulV2`, `Svd`, and in
//! [`tri`] `Cholesky` and `MatrixTriangularSolve` (TF's `tf.linalg.*`, gradients as
//! `linalg_grad.py` / `math_grad.py`).
//!
//! Every op takes `Float32`/`Float64` tensors whose last two axes are the matrix (leading
//! axes are a batch). Factorizations are the `faer` crate's (partial-pivoting LU for
//! inverse, determinant and solve; Householder QR for least squares; the thin SVD; LLᵀ and
//! triangular solves in [`tri`]), computed in `f64` and rounded back for `Float32`. A
//! singular matrix is an `InvalidArgument` error naming the op, the node and the shape (TF's text: "Input matrix is not invertible."). The ops
//! have no GPU kernel except `BatchMatMulV2`, `MatrixDiagPart`, `MatrixDiag` (TF 1.15's
//! GPU linear solvers need cuSOLVER; Oxiflow keeps factorizations on the CPU).

use super::dynamic_shape::sum_to_like;
use super::grad_util::{need_dy, y0};
use super::math::def;
use super::*;
use crate::graph::NodeSpec;
use crate::shape::{merge_dim, UNKNOWN};
use faer::linalg::solvers::DenseSolveCore;
use faer::prelude::*;
use faer::Mat;
use ndarray::{ArcArray, ArrayD, IxDyn};

// ---------------------------------------------------------------- data movement

/// A float input as f64 (batch of matrices), with its original dtype.
fn as_f64(ctx: &KernelCtx, i: usize) -> Result<ArcArray<f64, IxDyn>> {
    match &ctx.inputs[i] {
        Tensor::F64(a) => Ok(a.clone()),
        Tensor::F32(a) => Ok(a.mapv(|x| x as f64).into_shared()),
        t => Err(ctx.error(format!("no kernel for dtype {}", t.dtype()))),
    }
}

/// `out` converted to the node's output dtype.
fn from_f64(ctx: &KernelCtx, out: ArrayD<f64>) -> Tensor {
    match ctx.node.outputs[0].dtype {
        DType::Float32 => Tensor::F32(out.mapv(|x| x as f32).into_shared()),
        _ => Tensor::F64(out.into_shared()),
    }
}

/// The matrices of a `[..., m, n]` array, in row-major batch order.
fn matrices(a: &ArcArray<f64, IxDyn>) -> Vec<Mat<f64>> {
    let nd = a.ndim();
    let (m, n) = (a.shape()[nd - 2], a.shape()[nd - 1]);
    let flat: Vec<f64> = a.iter().copied().collect();
    let per = m * n;
    let count = flat.len().checked_div(per).unwrap_or_else(|| a.shape()[..nd - 2].iter().product());
    (0..count).map(|b| Mat::from_fn(m, n, |i, j| flat[b * per + i * n + j])).collect()
}

/// Stacks matrices back into an array of shape `dims` (`[..., m, n]`).
fn stack(dims: &[usize], mats: &[Mat<f64>]) -> Result<ArrayD<f64>> {
    let mut v = Vec::with_capacity(dims.iter().product());
    for m in mats {
        for i in 0..m.nrows() {
            for j in 0..m.ncols() {
                v.push(m[(i, j)]);
            }
        }
    }
    ArrayD::from_shape_vec(IxDyn(dims), v).map_err(|e| OxiflowError::Internal(format!("linalg: {e}")))
}

fn singular(ctx: &KernelCtx, i: usize) -> OxiflowError {
    ctx.error(format!("Input matrix is not invertible. (input shape {})", ctx.inputs[i].shape()))
}

/// LU of a square matrix; `None` when a pivot is exactly zero or not finite (singular).
fn lu_checked(a: &Mat<f64>) -> Option<faer::linalg::solvers::PartialPivLu<f64>> {
    let lu = a.partial_piv_lu();
    let u = lu.U();
    let ok = (0..u.nrows().min(u.ncols())).all(|i| u[(i, i)] != 0.0 && u[(i, i)].is_finite());
    ok.then_some(lu)
}

// ---------------------------------------------------------------- shape functions

fn matrix_dims<'a>(ctx: &InferCtx, t: &'a TensorType, what: &str) -> Result<(&'a [usize], usize, usize)> {
    ctx.require_float(t.dtype)?;
    let d = t.shape.dims();
    if d.len() < 2 {
        return Err(ctx.invalid(format!("{what} must have rank >= 2 (a matrix or a batch of matrices), got shape {}", t.shape)));
    }
    Ok((&d[..d.len() - 2], d[d.len() - 2], d[d.len() - 1]))
}

/// The batch axes and the order `n` of `[..., n, n]` (one of the two may be unknown, and
/// then `n` is the known one).
fn square_dims<'a>(ctx: &InferCtx, t: &'a TensorType, what: &str) -> Result<(&'a [usize], usize)> {
    let (b, m, n) = matrix_dims(ctx, t, what)?;
    let n = merge_dim(m, n).ok_or_else(|| ctx.invalid(format!("{what} must be a square matrix (or a batch of them), got shape {}", t.shape)))?;
    Ok((b, n))
}

/// `batch ++ tail` typed `dtype`.
fn batch_type(dtype: DType, batch: &[usize], tail: &[usize]) -> TensorType {
    TensorType::new(dtype, Shape(batch.iter().chain(tail).copied().collect()))
}

fn same_dtype(ctx: &InferCtx) -> Result<()> {
    let (a, b) = (&ctx.inputs[0], &ctx.inputs[1]);
    if a.dtype != b.dtype {
        return Err(ctx.dtype_error(a.dtype, b.dtype, " (both operands must have the same dtype)"));
    }
    Ok(())
}

fn infer_inverse(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    adj(ctx.op, ctx.attrs, "adjoint")?;
    let (b, n) = square_dims(ctx, &ctx.inputs[0], "Input")?;
    Ok(vec![batch_type(ctx.inputs[0].dtype, b, &[n, n])])
}

fn infer_det(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let (b, _) = square_dims(ctx, &ctx.inputs[0], "Input")?;
    Ok(vec![TensorType::new(ctx.inputs[0].dtype, Shape(b.to_vec()))])
}

/// `MatrixSolve(a [..., n, n], b [..., n, k]) -> [..., n, k]`; equal batch axes.
fn infer_solve(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    adj(ctx.op, ctx.attrs, "adjoint")?;
    same_dtype(ctx)?;
    let (a, b) = (&ctx.inputs[0], &ctx.inputs[1]);
    let (ba, n) = square_dims(ctx, a, "The matrix")?;
    let (bb, m, k) = matrix_dims(ctx, b, "The right-hand side")?;
    let (Some(Shape(batch)), Some(n)) = (Shape(ba.to_vec()).merge(&Shape(bb.to_vec())), merge_dim(n, m)) else {
        return Err(ctx.shape_error(&a.shape, &b.shape, " (the matrix [..., n, n] and the right-hand side [..., n, k] must agree in n and in the batch axes)"));
    };
    Ok(vec![batch_type(b.dtype, &batch, &[n, k])])
}

/// `MatrixSolveLs(a [..., m, n], b [..., m, k]) -> [..., n, k]`.
fn infer_solve_ls(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    same_dtype(ctx)?;
    let (a, b) = (&ctx.inputs[0], &ctx.inputs[1]);
    let (ba, m, n) = matrix_dims(ctx, a, "The matrix")?;
    let (bb, mb, k) = matrix_dims(ctx, b, "The right-hand side")?;
    let (Some(Shape(batch)), Some(_)) = (Shape(ba.to_vec()).merge(&Shape(bb.to_vec())), merge_dim(m, mb)) else {
        return Err(ctx.shape_error(&a.shape, &b.shape, " (the matrix [..., m, n] and the right-hand side [..., m, k] must agree in m and in the batch axes)"));
    };
    Ok(vec![batch_type(a.dtype, &batch, &[n, k])])
}

/// `min(m, n)`, unknown unless both are known.
fn min_dim(m: usize, n: usize) -> usize {
    if m == UNKNOWN || n == UNKNOWN {
        UNKNOWN
    } else {
        m.min(n)
    }
}

fn infer_diag_part(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let (b, m, n) = matrix_dims(ctx, &ctx.inputs[0], "Input")?;
    let mut dims = b.to_vec();
    dims.push(min_dim(m, n));
    Ok(vec![TensorType::new(ctx.inputs[0].dtype, Shape(dims))])
}

fn infer_diag(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let x = &ctx.inputs[0];
    ctx.require_float(x.dtype)?;
    if x.shape.rank() < 1 {
        return Err(ctx.invalid(format!("input must be at least 1-dim, got shape {}", x.shape)));
    }
    let mut dims = x.shape.0.clone();
    dims.push(*dims.last().unwrap_or(&0));
    Ok(vec![TensorType::new(x.dtype, Shape(dims))])
}

/// `Svd(a [..., m, n]) -> s [..., p], u [..., m, p], v [..., n, p]`, `p = min(m, n)` (TF's
/// `tf.linalg.svd` with `compute_uv=True, full_matrices=False`, the only mode supported).
fn infer_svd(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let a = &ctx.inputs[0];
    let (b, m, n) = matrix_dims(ctx, a, "Input")?;
    if !ctx.attrs.get_bool_or(ctx.op, "compute_uv", true)? || ctx.attrs.get_bool_or(ctx.op, "full_matrices", false)? {
        return Err(ctx.invalid(format!("only compute_uv=true, full_matrices=false is supported (input shape {})", a.shape)));
    }
    let p = min_dim(m, n);
    let with = |tail: &[usize]| TensorType::new(a.dtype, Shape(b.iter().chain(tail).copied().collect()));
    Ok(vec![with(&[p]), with(&[m, p]), with(&[n, p])])
}

fn adj(op: &str, attrs: &Attrs, k: &str) -> Result<bool> {
    attrs.get_bool_or(op, k, false)
}

/// `BatchMatMulV2(x [..., m, k], y [..., k, n]) -> [..., m, n]`; batch axes broadcast.
fn infer_bmm(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    same_dtype(ctx)?;
    let (x, y) = (&ctx.inputs[0], &ctx.inputs[1]);
    let (bx, r0, c0) = matrix_dims(ctx, x, "In[0]")?;
    let (by, r1, c1) = matrix_dims(ctx, y, "In[1]")?;
    let (m, k1) = if adj(ctx.op, ctx.attrs, "adj_x")? { (c0, r0) } else { (r0, c0) };
    let (k2, n) = if adj(ctx.op, ctx.attrs, "adj_y")? { (c1, r1) } else { (r1, c1) };
    if merge_dim(k1, k2).is_none() {
        return Err(ctx.shape_error(&x.shape, &y.shape, format!(" (inner dimensions differ: {k1} vs {k2})")));
    }
    let batch = Shape::broadcast(&Shape(bx.to_vec()), &Shape(by.to_vec()))
        .ok_or_else(|| ctx.shape_error(&x.shape, &y.shape, " (batch dimensions are not broadcastable)"))?;
    let mut dims = batch.0;
    dims.extend([m, n]);
    Ok(vec![TensorType::new(x.dtype, Shape(dims))])
}

// ---------------------------------------------------------------- kernels

fn kernel_inverse(ctx: &KernelCtx) -> Result<Outputs> {
    let a = as_f64(ctx, 0)?;
    let adjoint = adj(ctx.node.op.name, &ctx.node.attrs, "adjoint")?;
    let mut out = Vec::new();
    for m in matrices(&a) {
        let inv = lu_checked(&m).ok_or_else(|| singular(ctx, 0))?.inverse();
        out.push(if adjoint { inv.transpose().to_owned() } else { inv });
    }
    Ok(smallvec![from_f64(ctx, stack(a.shape(), &out)?)])
}

fn kernel_det(ctx: &KernelCtx) -> Result<Outputs> {
    let a = as_f64(ctx, 0)?;
    // faer's determinant divides by a zero pivot (0/0 = NaN for a matrix with a zero
    // column); an exact zero pivot of the partially pivoted LU means the determinant is 0,
    // as LAPACK-based TF and Julia give it
    let det = |m: &Mat<f64>| {
        let lu = m.partial_piv_lu();
        let u = lu.U();
        let zero_pivot = (0..u.nrows().min(u.ncols())).any(|i| u[(i, i)] == 0.0);
        if zero_pivot {
            0.0
        } else {
            m.determinant()
        }
    };
    let dets: Vec<f64> = matrices(&a).iter().map(det).collect();
    let dims = ctx.node.outputs[0].shape.dims().to_vec();
    let out = ArrayD::from_shape_vec(IxDyn(&dims), dets).map_err(|e| ctx.error(e))?;
    Ok(smallvec![from_f64(ctx, out)])
}

fn kernel_solve(ctx: &KernelCtx) -> Result<Outputs> {
    let (a, b) = (as_f64(ctx, 0)?, as_f64(ctx, 1)?);
    let adjoint = adj(ctx.node.op.name, &ctx.node.attrs, "adjoint")?;
    let mut out = Vec::new();
    for (m, r) in matrices(&a).iter().zip(matrices(&b)) {
        let lu = lu_checked(m).ok_or_else(|| singular(ctx, 0))?;
        out.push(if adjoint { lu.solve_transpose(&r) } else { lu.solve(&r) });
    }
    Ok(smallvec![from_f64(ctx, stack(ctx.node.outputs[0].shape.dims(), &out)?)])
}

/// Least squares: QR for `m >= n`; for `m < n` the minimum-norm solution
/// `A^T (A A^T)^{-1} b`. Rank deficiency is reported as a singular matrix.
fn kernel_solve_ls(ctx: &KernelCtx) -> Result<Outputs> {
    let (a, b) = (as_f64(ctx, 0)?, as_f64(ctx, 1)?);
    let mut out = Vec::new();
    for (m, r) in matrices(&a).iter().zip(matrices(&b)) {
        if m.nrows() >= m.ncols() {
            let qr = m.qr();
            let rr = qr.R();
            if (0..m.ncols()).any(|i| rr[(i, i)] == 0.0 || !rr[(i, i)].is_finite()) {
                return Err(singular(ctx, 0));
            }
            out.push(qr.solve_lstsq(&r));
        } else {
            let gram = m * m.transpose();
            let lu = lu_checked(&gram).ok_or_else(|| singular(ctx, 0))?;
            out.push(m.transpose() * lu.solve(&r));
        }
    }
    Ok(smallvec![from_f64(ctx, stack(ctx.node.outputs[0].shape.dims(), &out)?)])
}

fn kernel_diag_part(ctx: &KernelCtx) -> Result<Outputs> {
    let a = as_f64(ctx, 0)?;
    let v: Vec<f64> = matrices(&a).iter().flat_map(|m| (0..m.nrows().min(m.ncols())).map(|i| m[(i, i)]).collect::<Vec<_>>()).collect();
    let out = ArrayD::from_shape_vec(IxDyn(ctx.node.outputs[0].shape.dims()), v).map_err(|e| ctx.error(e))?;
    Ok(smallvec![from_f64(ctx, out)])
}

fn kernel_diag(ctx: &KernelCtx) -> Result<Outputs> {
    let a = as_f64(ctx, 0)?;
    let k = *a.shape().last().unwrap_or(&0);
    let flat: Vec<f64> = a.iter().copied().collect();
    let mats: Vec<Mat<f64>> =
        flat.chunks(k.max(1)).take(flat.len().checked_div(k).unwrap_or(0)).map(|c| Mat::from_fn(k, k, |i, j| if i == j { c[i] } else { 0.0 })).collect();
    Ok(smallvec![from_f64(ctx, stack(ctx.node.outputs[0].shape.dims(), &mats)?)])
}

fn kernel_bmm(ctx: &KernelCtx) -> Result<Outputs> {
    let (x, y) = (as_f64(ctx, 0)?, as_f64(ctx, 1)?);
    let (ax, ay) = (adj(ctx.node.op.name, &ctx.node.attrs, "adj_x")?, adj(ctx.node.op.name, &ctx.node.attrs, "adj_y")?);
    let out_dims = ctx.node.outputs[0].shape.dims();
    let batch = &out_dims[..out_dims.len() - 2];
    let full = |a: &ArcArray<f64, IxDyn>| -> Result<ArcArray<f64, IxDyn>> {
        let nd = a.ndim();
        let mut d = batch.to_vec();
        d.extend_from_slice(&a.shape()[nd - 2..]);
        Ok(super::math::broadcast_view(ctx, a, &d)?.to_owned().into_shared())
    };
    let (xs, ys) = (matrices(&full(&x)?), matrices(&full(&y)?));
    let out: Vec<Mat<f64>> = xs
        .iter()
        .zip(&ys)
        .map(|(p, q)| match (ax, ay) {
            (false, false) => p * q,
            (true, false) => p.transpose() * q,
            (false, true) => p * q.transpose(),
            (true, true) => p.transpose() * q.transpose(),
        })
        .collect();
    Ok(smallvec![from_f64(ctx, stack(out_dims, &out)?)])
}

/// The thin SVD of each matrix (faer's `thin_svd`: singular values non-negative, in
/// non-increasing order). A matrix with a NaN or an infinity gives NaN outputs (LAPACK's
/// and TF's behaviour) without calling the factorization; a factorization that does not
/// converge is an error naming the node and the shape.
fn kernel_svd(ctx: &KernelCtx) -> Result<Outputs> {
    let a = as_f64(ctx, 0)?;
    let (mut s_all, mut u_all, mut v_all) = (Vec::new(), Vec::new(), Vec::new());
    for mat in matrices(&a) {
        let (m, n) = (mat.nrows(), mat.ncols());
        let p = m.min(n);
        if p == 0 {
            continue;
        }
        let finite = (0..m).all(|i| (0..n).all(|j| mat[(i, j)].is_finite()));
        if !finite {
            s_all.extend(std::iter::repeat_n(f64::NAN, p));
            u_all.extend(std::iter::repeat_n(f64::NAN, m * p));
            v_all.extend(std::iter::repeat_n(f64::NAN, n * p));
            continue;
        }
        let svd = mat.thin_svd().map_err(|e| ctx.error(format!("the SVD did not converge ({e:?}; input shape {})", ctx.inputs[0].shape())))?;
        let (u, v, sv) = (svd.U(), svd.V(), svd.S().column_vector());
        s_all.extend((0..p).map(|i| sv[i]));
        u_all.extend((0..m).flat_map(|i| (0..p).map(move |j| u[(i, j)])));
        v_all.extend((0..n).flat_map(|i| (0..p).map(move |j| v[(i, j)])));
    }
    let mut out = Outputs::new();
    for (k, vals) in [s_all, u_all, v_all].into_iter().enumerate() {
        let t = &ctx.node.outputs[k];
        let arr = ArrayD::from_shape_vec(IxDyn(t.shape.dims()), vals).map_err(|e| ctx.error(e))?;
        out.push(from_f64(ctx, arr));
    }
    Ok(out)
}

// ---------------------------------------------------------------- gradients

/// Adds `BatchMatMulV2(x, y)` with `adj_x`/`adj_y` (TF's `tf.matmul` on batches).
pub fn batch_matmul(g: &mut Graph, x: Output, y: Output, adj_x: bool, adj_y: bool) -> Result<Output> {
    g.op_spec(NodeSpec::new("BatchMatMulV2", &[x, y]).attr("adj_x", adj_x).attr("adj_y", adj_y))
}

fn inverse(g: &mut Graph, a: Output, adjoint: bool) -> Result<Output> {
    g.op_spec(NodeSpec::new("MatrixInverse", &[a]).attr("adjoint", adjoint))
}

fn solve(g: &mut Graph, a: Output, b: Output, adjoint: bool) -> Result<Output> {
    g.op_spec(NodeSpec::new("MatrixSolve", &[a, b]).attr("adjoint", adjoint))
}

/// TF `_MatrixInverseGrad`: `-Y^T dY Y^T` for `Y = inv(A)`; with `adjoint` (`Y = inv(A)^T`)
/// its transpose, `-Y dY^T Y`.
fn grad_inverse(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let y = y0(node);
    let r = if adj(node.op.name, &node.attrs, "adjoint")? {
        let t = batch_matmul(g, dy, y, true, false)?;
        batch_matmul(g, y, t, false, false)?
    } else {
        let t = batch_matmul(g, dy, y, false, true)?;
        batch_matmul(g, y, t, true, false)?
    };
    Ok(vec![Some(g.op("Neg", &[r])?)])
}

/// TF `_MatrixDeterminantGrad`: `dy * det(A) * inv(A)^T`.
fn grad_det(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let a = node.inputs[0];
    let inv_t = inverse(g, a, true)?;
    let m = g.op("Mul", &[dy, y0(node)])?;
    let m = expand_last(g, m)?;
    let m = expand_last(g, m)?;
    Ok(vec![Some(g.op("Mul", &[m, inv_t])?)])
}

/// TF `_MatrixSolveGrad`: `db = solve(A, dc, !adjoint)`, `dA = -db c^T` (`-c db^T` when
/// `adjoint`).
fn grad_solve(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 2);
    let (a, c) = (node.inputs[0], y0(node));
    let adjoint = adj(node.op.name, &node.attrs, "adjoint")?;
    let db = solve(g, a, dy, !adjoint)?;
    let p = if adjoint { batch_matmul(g, c, db, false, true)? } else { batch_matmul(g, db, c, false, true)? };
    Ok(vec![Some(g.op("Neg", &[p])?), Some(db)])
}

/// TF `_MatrixSolveLsGrad` (l2_regularizer 0; the Cholesky solves of the Gram matrix are
/// `MatrixSolve`s): `_overdetermined` for `m >= n`, `_underdetermined` otherwise.
fn grad_solve_ls(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 2);
    let (a, b, x) = (node.inputs[0], node.inputs[1], y0(node));
    let (m, n) = known_matrix(g, node, a)?;
    if m >= n {
        let gram = batch_matmul(g, a, a, true, false)?;
        let z = solve(g, gram, dy, false)?;
        let xz = batch_matmul(g, x, z, false, true)?;
        let zx = batch_matmul(g, z, x, false, true)?;
        let sym = g.op("Add", &[xz, zx])?;
        let t1 = batch_matmul(g, a, sym, false, false)?;
        let t2 = batch_matmul(g, b, z, false, true)?;
        let ga = g.op("Sub", &[t2, t1])?;
        let gb = batch_matmul(g, a, z, false, false)?;
        Ok(vec![Some(ga), Some(gb)])
    } else {
        let gram = batch_matmul(g, a, a, false, true)?;
        let ag = batch_matmul(g, a, dy, false, false)?;
        let gb = solve(g, gram, ag, false)?;
        let tmp = solve(g, gram, b, false)?;
        let a1 = batch_matmul(g, tmp, a, true, false)?;
        let a1 = batch_matmul(g, gb, a1, false, false)?;
        let t = batch_matmul(g, a, gb, true, false)?;
        let a2 = g.op("Sub", &[dy, t])?;
        let a2 = batch_matmul(g, tmp, a2, false, true)?;
        let ga = g.op("Sub", &[a2, a1])?;
        Ok(vec![Some(ga), Some(gb)])
    }
}

/// A constant `rows x cols` matrix of `like`'s dtype with `f(i, j)` at row `i`, column `j`.
fn const_matrix(g: &mut Graph, like: Output, rows: usize, cols: usize, f: impl Fn(usize, usize) -> f64) -> Result<Output> {
    let v: Vec<f64> = (0..rows * cols).map(|k| f(k / cols, k % cols)).collect();
    let t = Tensor::from_vec(&[rows, cols], v, crate::tensor::Layout::RowMajor)?;
    let t = super::array::cast_tensor(&t, g.dtype_of(like)?);
    g.constant(t)
}

/// A constant `rows x cols` matrix with ones on the diagonal, of `like`'s dtype.
fn eye(g: &mut Graph, like: Output, rows: usize, cols: usize) -> Result<Output> {
    const_matrix(g, like, rows, cols, |i, j| if i == j { 1.0 } else { 0.0 })
}

/// TF `_MatrixDiagPartGrad`: `MatrixDiag(dy)` for square inputs; for `m x n` ones the
/// `k x k` diagonal matrix (`k = min(m, n)`) is padded to `m x n` by products with
/// constant `m x k` / `k x n` identity blocks (TF: `matrix_set_diag(zeros, dy)`).
fn grad_diag_part(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let (m, n) = known_matrix(g, node, node.inputs[0])?;
    let mut r = g.op("MatrixDiag", &[dy])?;
    let k = m.min(n);
    if m != k {
        let e = eye(g, dy, m, k)?;
        r = batch_matmul(g, e, r, false, false)?;
    }
    if n != k {
        let e = eye(g, dy, k, n)?;
        r = batch_matmul(g, r, e, false, false)?;
    }
    Ok(vec![Some(r)])
}

/// TF `_MatrixDiagGrad`: `MatrixDiagPart(dy)`.
fn grad_diag(g: &mut Graph, _: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    Ok(vec![Some(g.op("MatrixDiagPart", &[dy])?)])
}

/// TF `_BatchMatMulV2`: the `MatMul` rule with adjoints, each result summed over the
/// broadcast batch axes to its operand's shape.
fn grad_bmm(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dz = need_dy!(grads, 2);
    let (x, y) = (node.inputs[0], node.inputs[1]);
    let (gx, gy) = match (adj(node.op.name, &node.attrs, "adj_x")?, adj(node.op.name, &node.attrs, "adj_y")?) {
        (false, false) => (batch_matmul(g, dz, y, false, true)?, batch_matmul(g, x, dz, true, false)?),
        (false, true) => (batch_matmul(g, dz, y, false, false)?, batch_matmul(g, dz, x, true, false)?),
        (true, false) => (batch_matmul(g, y, dz, false, true)?, batch_matmul(g, x, dz, false, false)?),
        (true, true) => (batch_matmul(g, y, dz, true, true)?, batch_matmul(g, dz, x, true, true)?),
    };
    Ok(vec![Some(sum_to_like(g, gx, x)?), Some(sum_to_like(g, gy, y)?)])
}

/// `x / (x^2 + 1e-20)`: `1/x` away from 0, 0 at 0 (TF's `_SafeReciprocal` in
/// `linalg_grad.py`).
fn safe_reciprocal(g: &mut Graph, x: Output) -> Result<Output> {
    let x2 = g.op("Square", &[x])?;
    let eps = super::grad_util::scalar_of(g, x, 1e-20)?;
    let den = g.op("Add", &[x2, eps])?;
    g.op("RealDiv", &[x, den])
}

/// `x [..., p]` reshaped to `[..., 1, p]` (`row`) or `[..., p, 1]`: multiplying a
/// `[..., p, p]` matrix by it scales its columns (`X diag(x)`) or its rows (`diag(x) X`).
fn as_row_or_col(g: &mut Graph, x: Output, row: bool) -> Result<Output> {
    g.op_spec(NodeSpec::new("ExpandDims", &[x]).attr("dim", if row { -2i64 } else { -1 }))
}

/// `x [...]` as `[..., 1]` (`ExpandDims`, which keeps unknown batch dimensions).
fn expand_last(g: &mut Graph, x: Output) -> Result<Output> {
    g.op_spec(NodeSpec::new("ExpandDims", &[x]).attr("dim", -1i64))
}

/// The row and column counts of matrix `a` (an input of `node`), which the gradients that
/// choose a formula by them or build constants of their size need; `Unimplemented` naming
/// the op when one is unknown (a batch dimension may be).
fn known_matrix(g: &Graph, node: &Node, a: Output) -> Result<(usize, usize)> {
    let d = g.shape_of(a)?.0;
    let (m, n) = (d[d.len() - 2], d[d.len() - 1]);
    if m == UNKNOWN || n == UNKNOWN {
        return Err(OxiflowError::Unimplemented(format!(
            "the gradient of {} '{}' of a matrix of shape {}, whose row or column count is unknown (a batch dimension may be)",
            node.op.name,
            node.name,
            Shape(d)
        )));
    }
    Ok((m, n))
}

/// The last two axes of `x` swapped.
fn swap_last2(g: &mut Graph, x: Output) -> Result<Output> {
    let r = g.shape_of(x)?.rank();
    let mut perm: Vec<usize> = (0..r).collect();
    perm.swap(r - 2, r - 1);
    super::shape_ops::transpose(g, x, &perm)
}

/// `acc + t`, or `t` when nothing has been accumulated yet.
fn accumulate(g: &mut Graph, acc: Option<Output>, t: Output) -> Result<Output> {
    match acc {
        Some(a) => g.op("Add", &[a, t]),
        None => Ok(t),
    }
}

/// TF `_SvdGrad` (`compute_uv=True`, `full_matrices=False`; J. Townsend, "Differentiating
/// the singular value decomposition", 2016). For `m <= n`, with `A = U S V^T`, `U` square:
/// `dA = U [diag(ds) + (F o (U^T dU) + its transpose) S + S (F o (V^T dV) + its transpose)] V^T
///      + U S^-1 (dV^T - dV^T V V^T)` (the last term only when `m < n`),
/// `F_ij = 1/(s_j^2 - s_i^2)` off the diagonal (TF's `_SafeReciprocal`) and 0 on it. For
/// `m > n` the rule is applied to `A^T = V S U^T` (swapping `U`/`V` and `dU`/`dV`) and the
/// result transposed. Outputs without an incoming gradient contribute nothing (only `ds`:
/// `U diag(ds) V^T`). Built from `BatchMatMulV2`, `MatrixDiag`, `Transpose`,
/// `ExpandDims`, `Mul`, `Add`, `Sub`, `Square`, `RealDiv`, so it can be differentiated again; the
/// diagonal of `F` is masked by a constant, so its derivative stays finite.
fn grad_svd(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let (ds, mut du, mut dv) = (grads[0], grads[1], grads[2]);
    if ds.is_none() && du.is_none() && dv.is_none() {
        return Ok(vec![None]);
    }
    let (m, n) = known_matrix(g, node, node.inputs[0])?;
    let (p, wide) = (m.min(n), m.max(n));
    let s = y0(node);
    let (mut u, mut v) = (Output::new(node.id, 1), Output::new(node.id, 2));
    let transposed = m > n;
    if transposed {
        std::mem::swap(&mut u, &mut v);
        std::mem::swap(&mut du, &mut dv);
    }
    let s_row = as_row_or_col(g, s, true)?;
    let s_col = as_row_or_col(g, s, false)?;
    let mut inner = match ds {
        Some(ds) => Some(g.op("MatrixDiag", &[ds])?),
        None => None,
    };
    if du.is_some() || dv.is_some() {
        let s2 = g.op("Square", &[s])?;
        let (r2, c2) = (as_row_or_col(g, s2, true)?, as_row_or_col(g, s2, false)?);
        let diff = g.op("Sub", &[r2, c2])?;
        let recip = safe_reciprocal(g, diff)?;
        let mask: Vec<f64> = (0..p * p).map(|f| if f / p == f % p { 0.0 } else { 1.0 }).collect();
        let mask = Tensor::from_vec(&[p, p], mask, crate::tensor::Layout::RowMajor)?;
        let mask = g.constant(super::array::cast_tensor(&mask, g.dtype_of(s)?))?;
        let f = g.op("Mul", &[mask, recip])?;
        // (F o (X^T dX) + its transpose), then scaled by S on the side the rule says
        for (x, dx, s_side) in [(u, du, s_row), (v, dv, s_col)] {
            let Some(dx) = dx else { continue };
            let xdx = batch_matmul(g, x, dx, true, false)?;
            let fx = g.op("Mul", &[f, xdx])?;
            let fxt = swap_last2(g, fx)?;
            let sym = g.op("Add", &[fx, fxt])?;
            let t = g.op("Mul", &[sym, s_side])?;
            inner = Some(accumulate(g, inner, t)?);
        }
    }
    let mut ga = None;
    if let Some(inner) = inner {
        let t = batch_matmul(g, inner, v, false, true)?;
        ga = Some(batch_matmul(g, u, t, false, false)?);
    }
    if let (Some(dv), true) = (dv, p < wide) {
        let dvt_v = batch_matmul(g, dv, v, true, false)?;
        let proj = batch_matmul(g, dvt_v, v, false, true)?;
        let dvt = swap_last2(g, dv)?;
        let t2 = g.op("Sub", &[dvt, proj])?;
        let s_inv = safe_reciprocal(g, s)?;
        let s_inv = as_row_or_col(g, s_inv, false)?;
        let t2 = g.op("Mul", &[s_inv, t2])?;
        let t2 = batch_matmul(g, u, t2, false, false)?;
        ga = Some(accumulate(g, ga, t2)?);
    }
    let Some(mut ga) = ga else { return Ok(vec![None]) };
    if transposed {
        ga = swap_last2(g, ga)?;
    }
    Ok(vec![Some(ga)])
}

/// `faer` parallelises with Rayon's current pool (its default `Par::rayon(0)`): these kernels
/// run in the session's intra-op pool ([`crate::intra_op::install`]), so they use
/// `intra_op_parallelism_threads` threads.
macro_rules! on_intra_op_threads {
    ($($wrapper:ident => $kernel:ident),*) => {$(
        fn $wrapper(ctx: &KernelCtx) -> Result<Outputs> {
            crate::intra_op::install(|| $kernel(ctx))
        }
    )*};
}
on_intra_op_threads!(par_inverse => kernel_inverse, par_det => kernel_det, par_solve => kernel_solve,
    par_solve_ls => kernel_solve_ls, par_bmm => kernel_bmm, par_svd => kernel_svd);

/// `adjoint`: use the matrices' (conjugate) transposes (TF's `MatrixInverse`, `MatrixSolve`).
const ADJOINT: &[AttrDef] = attrs!["adjoint" => Bool];

mod tri;

pub(crate) fn register(r: &mut Registry) {
    tri::register(r);
    let (one, two) = (Arity::Fixed(1), Arity::Fixed(2));
    let cpu = GpuSupport::None;
    r.add(def("MatrixInverse", "MatrixInverse", one, infer_inverse, par_inverse, cpu, Some(grad_inverse)).with_attrs(ADJOINT));
    r.add(def("MatrixDeterminant", "MatrixDeterminant", one, infer_det, par_det, cpu, Some(grad_det)));
    r.add(def("MatrixSolve", "MatrixSolve", two, infer_solve, par_solve, cpu, Some(grad_solve)).with_attrs(ADJOINT));
    r.add(def("MatrixSolveLs", "MatrixSolveLs", two, infer_solve_ls, par_solve_ls, cpu, Some(grad_solve_ls)));
    r.add(def("Svd", "Svd", one, infer_svd, par_svd, cpu, Some(grad_svd)).with_attrs(attrs!["compute_uv" => Bool, "full_matrices" => Bool]));
    r.add(def("MatrixDiagPart", "MatrixDiagPart", one, infer_diag_part, kernel_diag_part, GPU_FLOATS, Some(grad_diag_part)).launched_as(GpuLaunch::Movement));
    r.add(def("MatrixDiag", "MatrixDiag", one, infer_diag, kernel_diag, GPU_FLOATS, Some(grad_diag)).launched_as(GpuLaunch::Movement));
    r.add(
        def("BatchMatMulV2", "MatMul", two, infer_bmm, par_bmm, GPU_FLOATS, Some(grad_bmm))
            .launched_as(GpuLaunch::CuBlas)
            .with_attrs(attrs!["adj_x" => Bool, "adj_y" => Bool]),
    );
}
