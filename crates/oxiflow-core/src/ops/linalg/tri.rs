//! `Cholesky` and `MatrixTriangularSolve` (TF's `tf.linalg.cholesky` and
//! `tf.linalg.triangular_solve`; ADCME's `triangular_solve`), with TF 1.15's gradients
//! (`linalg_grad.py`: `_CholeskyGrad`, `_MatrixTriangularSolveGrad`).
//!
//! Both take `Float32`/`Float64` matrices in their last two axes (leading axes are a batch,
//! equal for both inputs of `MatrixTriangularSolve`, as in TF 1.15) and compute in `f64`
//! with `faer` (its LLᵀ factorization and triangular solves), rounding back for `Float32`.
//! CPU only, like the other factorizations.

use super::*;

/// `Cholesky(a [..., n, n]) -> l [..., n, n]`.
fn infer_cholesky(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    square_dims(ctx, &ctx.inputs[0], "Input")?;
    Ok(vec![ctx.inputs[0].clone()])
}

/// `MatrixTriangularSolve(a [..., n, n], b [..., n, k]) -> [..., n, k]`, attributes `lower`
/// (default true) and `adjoint` (default false).
fn infer_triangular_solve(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    lower(ctx.op, ctx.attrs)?;
    infer_solve(ctx)
}

fn lower(op: &str, attrs: &Attrs) -> Result<bool> {
    attrs.get_bool_or(op, "lower", true)
}

/// The lower factor `L` of each `A = L Lᵀ`, reading only `A`'s lower triangle (as TF's
/// Eigen `LLT` does); zeros above the diagonal. A matrix that is not positive definite
/// is TF's `InvalidArgument` "Cholesky decomposition was not successful. The input might
/// not be valid.", with the node and the shape.
fn kernel_cholesky(ctx: &KernelCtx) -> Result<Outputs> {
    let a = as_f64(ctx, 0)?;
    let mut out = Vec::new();
    for (i, m) in matrices(&a).iter().enumerate() {
        let llt = m.llt(faer::Side::Lower).map_err(|_| {
            ctx.error(format!(
                "Cholesky decomposition was not successful. The input might not be valid. (matrix {i} of the batch, input shape {})",
                ctx.inputs[0].shape()
            ))
        })?;
        out.push(llt.L().to_owned());
    }
    Ok(smallvec![from_f64(ctx, stack(a.shape(), &out)?)])
}

/// `op(A) X = B` with `op(A)` = `A` or `Aᵀ` (`adjoint`), reading only the triangle of `A`
/// that `lower` names. A zero on the diagonal is TF's "Input matrix is not invertible.".
fn kernel_triangular_solve(ctx: &KernelCtx) -> Result<Outputs> {
    let (a, b) = (as_f64(ctx, 0)?, as_f64(ctx, 1)?);
    let op = ctx.node.op.name;
    let (lower, adjoint) = (lower(op, &ctx.node.attrs)?, adj(op, &ctx.node.attrs, "adjoint")?);
    let par = faer::get_global_parallelism();
    let mut out = Vec::new();
    for (m, mut x) in matrices(&a).iter().zip(matrices(&b)) {
        let n = m.nrows();
        if (0..n).any(|i| m[(i, i)] == 0.0) {
            return Err(singular(ctx, 0));
        }
        // the named triangle, zeros elsewhere: the other one may hold anything
        let t = Mat::from_fn(n, n, |i, j| if (lower && i >= j) || (!lower && i <= j) { m[(i, j)] } else { 0.0 });
        use faer::linalg::triangular_solve::{solve_lower_triangular_in_place as solve_l, solve_upper_triangular_in_place as solve_u};
        match (lower, adjoint) {
            (true, false) => solve_l(t.as_ref(), x.as_mut(), par),
            (true, true) => solve_u(t.transpose(), x.as_mut(), par),
            (false, false) => solve_u(t.as_ref(), x.as_mut(), par),
            (false, true) => solve_l(t.transpose(), x.as_mut(), par),
        }
        out.push(x);
    }
    Ok(smallvec![from_f64(ctx, stack(ctx.node.outputs[0].shape.dims(), &out)?)])
}

fn triangular_solve(g: &mut Graph, a: Output, b: Output, lower: bool, adjoint: bool) -> Result<Output> {
    g.op_spec(NodeSpec::new("MatrixTriangularSolve", &[a, b]).attr("lower", lower).attr("adjoint", adjoint))
}

/// `x` times a constant `n x n` mask of `x`'s dtype (broadcast over the batch axes): `diag`
/// on the diagonal, 1 in the triangle `lower` names, 0 in the other (TF's
/// `matrix_band_part`, and with `diag = 0.5` `_CholeskyGrad`'s `matrix_set_diag`).
/// `Unimplemented` naming `node` (whose gradient this is) when the order is unknown.
fn masked(g: &mut Graph, node: &Node, x: Output, lower: bool, diag: f64) -> Result<Output> {
    let d = g.shape_of(x)?.0;
    let n = d[d.len() - 1];
    if n == crate::shape::UNKNOWN {
        return Err(OxiflowError::Unimplemented(format!(
            "the gradient of {} '{}': a triangular matrix of unknown size (shape {}; a batch dimension may be unknown)",
            node.op.name,
            node.name,
            Shape(d)
        )));
    }
    let mask = const_matrix(g, x, n, n, |i, j| {
        if i == j {
            diag
        } else if (i > j) == lower {
            1.0
        } else {
            0.0
        }
    })?;
    g.op("Mul", &[x, mask])
}

/// TF `_MatrixTriangularSolveGrad`: `db = triangular_solve(A, dc, lower, !adjoint)`,
/// `dA = -db cᵀ` (`-c dbᵀ` when `adjoint`), kept to `A`'s triangle.
fn grad_triangular_solve(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 2);
    let (a, c) = (node.inputs[0], y0(node));
    let (lower, adjoint) = (lower(node.op.name, &node.attrs)?, adj(node.op.name, &node.attrs, "adjoint")?);
    let db = triangular_solve(g, a, dy, lower, !adjoint)?;
    let p = if adjoint { batch_matmul(g, c, db, false, true)? } else { batch_matmul(g, db, c, false, true)? };
    let p = masked(g, node, p, lower, 1.0)?;
    Ok(vec![Some(g.op("Neg", &[p])?), Some(db)])
}

/// TF `_CholeskyGrad` (Murray 2016, "Differentiation of the Cholesky decomposition"):
/// `dA = sym(L⁻ᵀ Φ(Lᵀ dL) L⁻¹)`, with `Φ` the lower triangle with the diagonal halved and
/// `sym(X) = (X + Xᵀ) / 2`. TF forms `L⁻¹` by a triangular solve against the identity;
/// here the two products with it are triangular solves, which is the same matrix.
fn grad_cholesky(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dl = need_dy!(grads, 1);
    let l = y0(node);
    let middle = batch_matmul(g, l, dl, true, false)?;
    let phi = masked(g, node, middle, true, 0.5)?;
    let y = triangular_solve(g, l, phi, true, true)?; // L⁻ᵀ Φ
    let yt = swap_last2(g, y)?;
    let z = triangular_solve(g, l, yt, true, true)?; // (L⁻ᵀ Φ L⁻¹)ᵀ
    let zt = swap_last2(g, z)?;
    let s = g.op("Add", &[z, zt])?;
    let half = crate::ops::grad_util::scalar_of(g, s, 0.5)?;
    Ok(vec![Some(g.op("Mul", &[s, half])?)])
}

on_intra_op_threads!(par_cholesky => kernel_cholesky, par_triangular_solve => kernel_triangular_solve);

pub(super) fn register(r: &mut Registry) {
    let cpu = GpuSupport::None;
    r.add(def("Cholesky", "Cholesky", Arity::Fixed(1), infer_cholesky, par_cholesky, cpu, Some(grad_cholesky)));
    r.add(
        def("MatrixTriangularSolve", "MatrixTriangularSolve", Arity::Fixed(2), infer_triangular_solve, par_triangular_solve, cpu, Some(grad_triangular_solve))
            .with_attrs(attrs!["lower" => Bool, "adjoint" => Bool]),
    );
}
