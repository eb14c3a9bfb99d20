//! `SparseSolve`: `x = A⁻¹ b` for a sparse `A` (ADCME's `A \ b` on a `SparseTensor`, its
//! `SparseSolver`/`sparse_least_square` ops), with the factorization from `faer` and kept
//! in the session's [`ResourceCache`](crate::variable_store::ResourceCache).
//!
//! Inputs: `a_indices` (`Int64 [nnz, 2]`), `a_values` (`Float32`/`Float64 [nnz]`; repeated
//! entries add up) and `rhs` (`[m]` or `[m, k]`, the values' dtype). Attributes:
//! `dense_shape = [m, n]`; `method`: `"lu"` (default; sparse LU with partial pivoting,
//! `m == n`), `"cholesky"` (sparse `LLᵀ`, `A` symmetric positive definite, checked) or
//! `"qr"` (least squares `argmin ‖A x - b‖₂` by sparse QR, `m >= n`, full column rank);
//! `adjoint`: solve `Aᵀ x = b` (`lu` and `cholesky`). The output is `[n]` or `[n, k]`,
//! computed in `f64` and rounded back for `Float32`.
//!
//! A factorization is keyed by the method and `A`'s indices and values, so every solve with
//! the same matrix in a run (ADCME's `factorize(A)` then `\`), the transposed solves of its
//! gradient, and later runs while `A` is unchanged, reuse one factorization.
//!
//! Errors (`InvalidArgument`, naming the node and the shape): a structurally or numerically
//! singular matrix, a matrix that is not symmetric or not positive definite for
//! `"cholesky"`, shapes that do not fit the method.
//!
//! Gradient (the adjoint method, as ADCME's `SparseSolverGrad`): with `λ = A⁻ᵀ ḡ`,
//! `∂b = λ` and `∂A_ij = -λ_i x_j` on the stored entries; for least squares,
//! `λ = (AᵀA)⁻¹ ḡ`, `∂b = A λ` and `∂A_ij = r_i λ_j - (A λ)_i x_j` with `r = b - A x`, where
//! `AᵀA` is a `SparseSparseMatMul` solved by Cholesky. Both are built from differentiable
//! ops.

use super::math::def;
use super::sparse::{dense_shape, entries, float_tensor, floats, sampled_dot, sparse_operand};
use super::*;
use crate::graph::NodeSpec;
use crate::Layout;
use faer::linalg::solvers::{SolveCore, SolveLstsqCore};
use faer::sparse::{SparseColMat, Triplet};
use faer::{Conj, Mat, Side};

/// The factorization methods `SparseSolve` offers.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
enum Method {
    Lu,
    Cholesky,
    Qr,
}

fn method(attrs: &Attrs, op: &str) -> Result<Method> {
    match attrs.get("method") {
        None => Ok(Method::Lu),
        Some(AttrValue::Str(s)) => match s.to_ascii_lowercase().as_str() {
            "lu" | "sparselu" => Ok(Method::Lu),
            "cholesky" | "llt" | "simplicialllt" => Ok(Method::Cholesky),
            "qr" | "sparseqr" | "lstsq" => Ok(Method::Qr),
            other => Err(OxiflowError::InvalidArgument(format!("{op}: unknown method \"{other}\" (expected \"lu\", \"cholesky\" or \"qr\")"))),
        },
        Some(v) => Err(OxiflowError::InvalidArgument(format!("{op}: attr 'method' must be a string, got {v:?}"))),
    }
}

/// `[m, n]` of the `dense_shape` attribute.
fn shape2(attrs: &Attrs, op: &str) -> Result<(usize, usize)> {
    dense_shape(attrs, op, "dense_shape")
}

fn infer_solve(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let (_, dt) = sparse_operand(ctx, 0, "a")?;
    let rhs = &ctx.inputs[2];
    if rhs.dtype != dt {
        return Err(ctx.dtype_error(dt, rhs.dtype, " (rhs must have a_values' dtype)"));
    }
    let (m, n) = shape2(ctx.attrs, ctx.op)?;
    let how = method(ctx.attrs, ctx.op)?;
    let adjoint = ctx.attrs.get_bool_or(ctx.op, "adjoint", false)?;
    match how {
        Method::Qr if adjoint => return Err(ctx.invalid("adjoint is not supported with method \"qr\"")),
        Method::Qr if m < n => return Err(ctx.invalid(format!("least squares needs at least as many rows as columns, got dense shape [{m}, {n}]"))),
        Method::Lu | Method::Cholesky if m != n => {
            return Err(ctx.invalid(format!("the matrix must be square for method {how:?} (use \"qr\" for least squares), got dense shape [{m}, {n}]")))
        }
        _ => {}
    }
    let rows = rhs.shape.0.first().copied();
    if !(1..=2).contains(&rhs.shape.rank()) || !matches!(rows, Some(r) if r == m || r == crate::shape::UNKNOWN) {
        return Err(ctx.shape_error(&Shape(vec![m, n]), &rhs.shape, " (rhs must be a vector or matrix with one row per row of the sparse matrix)"));
    }
    let mut out = rhs.shape.0.clone();
    out[0] = n;
    Ok(vec![TensorType::new(dt, Shape(out))])
}

/// A factorization with the matrix it was computed from (checked on every cache hit).
struct Factor {
    ix: Vec<(usize, usize)>,
    vals: Vec<f64>,
    kind: Kind,
}

enum Kind {
    Lu(Box<faer::sparse::linalg::solvers::Lu<usize, f64>>),
    Llt(faer::sparse::linalg::solvers::Llt<usize, f64>),
    Qr(faer::sparse::linalg::solvers::Qr<usize, f64>),
}

/// FxHash-style mixing of the method, shape, indices and value bits: cheap next to a
/// factorization; a hit is confirmed by comparing the stored matrix.
fn key(how: Method, m: usize, n: usize, ix: &[(usize, usize)], vals: &[f64]) -> u64 {
    let mut h: u64 = 0;
    let mut mix = |w: u64| h = (h.rotate_left(5) ^ w).wrapping_mul(0x517c_c1b7_2722_0a95);
    for w in [how as u64, m as u64, n as u64] {
        mix(w);
    }
    for &(r, c) in ix {
        mix(((r as u64) << 32) ^ c as u64);
    }
    for v in vals {
        mix(v.to_bits());
    }
    h
}

fn csc(ctx: &KernelCtx, m: usize, n: usize, ix: &[(usize, usize)], vals: &[f64], transpose: bool) -> Result<SparseColMat<usize, f64>> {
    let t: Vec<Triplet<usize, usize, f64>> =
        ix.iter().zip(vals).map(|(&(r, c), &v)| if transpose { Triplet::new(c, r, v) } else { Triplet::new(r, c, v) }).collect();
    let (rows, cols) = if transpose { (n, m) } else { (m, n) };
    SparseColMat::try_new_from_triplets(rows, cols, &t).map_err(|e| ctx.error(format!("cannot build the sparse matrix: {e:?}")))
}

/// Whether `a` equals its transpose within `tol` (relative), entry by entry.
fn symmetric(a: &SparseColMat<usize, f64>, at: &SparseColMat<usize, f64>, tol: f64) -> bool {
    let (a, at) = (a.as_ref(), at.as_ref());
    let (pa, pt) = (a.symbolic(), at.symbolic());
    if pa.col_ptr() != pt.col_ptr() || pa.row_idx() != pt.row_idx() {
        return false;
    }
    a.val().iter().zip(at.val()).all(|(&x, &y)| (x - y).abs() <= tol * x.abs().max(y.abs()))
}

fn factorize(ctx: &KernelCtx, how: Method, m: usize, n: usize, ix: Vec<(usize, usize)>, vals: Vec<f64>) -> Result<Factor> {
    let a = csc(ctx, m, n, &ix, &vals, false)?;
    let shape = format!("[{m}, {n}] with {} stored entries", ix.len());
    let kind = match how {
        Method::Lu => Kind::Lu(Box::new(a.sp_lu().map_err(|e| ctx.error(format!("the matrix of dense shape {shape} is singular ({e:?})")))?)),
        Method::Cholesky => {
            let tol = if ctx.inputs[1].dtype() == DType::Float32 { 1e-5 } else { 1e-10 };
            if !symmetric(&a, &csc(ctx, m, n, &ix, &vals, true)?, tol) {
                return Err(ctx.error(format!("method \"cholesky\" needs a symmetric matrix; the matrix of dense shape {shape} is not")));
            }
            Kind::Llt(a.sp_cholesky(Side::Lower).map_err(|e| ctx.error(format!("the matrix of dense shape {shape} is not positive definite ({e:?})")))?)
        }
        Method::Qr => Kind::Qr(a.sp_qr().map_err(|e| ctx.error(format!("sparse QR of the matrix of dense shape {shape} failed ({e:?})")))?),
    };
    Ok(Factor { ix, vals, kind })
}

fn kernel_solve(ctx: &KernelCtx) -> Result<Outputs> {
    let name = ctx.node.op.name;
    let (m, n) = shape2(&ctx.node.attrs, name)?;
    let how = method(&ctx.node.attrs, name)?;
    let adjoint = ctx.node.attrs.get_bool_or(name, "adjoint", false)?;
    let ix = entries(ctx, 0, m, n)?;
    let vals = floats(ctx, 1)?;
    if vals.len() != ix.len() {
        return Err(ctx.error(format!("{} values for {} indices", vals.len(), ix.len())));
    }
    let rhs = floats(ctx, 2)?;
    let rd = ctx.inputs[2].dims();
    let k = rd.get(1).copied().unwrap_or(1);
    if rd.first() != Some(&m) {
        return Err(ctx.error(format!("rhs of shape {:?} does not fit a sparse matrix of dense shape [{m}, {n}]", rd)));
    }
    let dims = if rd.len() == 1 { vec![n] } else { vec![n, k] };
    if n == 0 || k == 0 {
        return Ok(smallvec![float_tensor(ctx.node.outputs[0].dtype, &dims, Vec::new())?]);
    }
    let h = key(how, m, n, &ix, &vals);
    let f = match ctx.state.resource_cache() {
        Some(cache) => {
            let f = cache.get_or_try_insert(h, || factorize(ctx, how, m, n, ix.clone(), vals.clone()))?;
            if f.ix == ix && f.vals == vals {
                f
            } else {
                std::sync::Arc::new(factorize(ctx, how, m, n, ix, vals)?)
            }
        }
        None => std::sync::Arc::new(factorize(ctx, how, m, n, ix, vals)?),
    };
    let mut x = Mat::from_fn(m, k, |i, c| rhs[i * k + c]);
    let conj = Conj::No;
    match (&f.kind, adjoint) {
        (Kind::Lu(lu), false) => lu.solve_in_place_with_conj(conj, x.as_mut()),
        (Kind::Lu(lu), true) => lu.solve_transpose_in_place_with_conj(conj, x.as_mut()),
        (Kind::Llt(llt), _) => llt.solve_in_place_with_conj(conj, x.as_mut()),
        (Kind::Qr(qr), _) => qr.solve_lstsq_in_place_with_conj(conj, x.as_mut()),
    }
    let mut out = Vec::with_capacity(n * k);
    for i in 0..n {
        for c in 0..k {
            out.push(x[(i, c)]);
        }
    }
    if rhs.iter().all(|v| v.is_finite()) && !out.iter().all(|v| v.is_finite()) {
        let what = if how == Method::Qr { "rank deficient" } else { "singular" };
        return Err(ctx.error(format!("the matrix of dense shape [{m}, {n}] is {what} (the solution has non-finite entries)")));
    }
    Ok(smallvec![float_tensor(ctx.node.outputs[0].dtype, &dims, out)?])
}

fn par_solve(ctx: &KernelCtx) -> Result<Outputs> {
    crate::intra_op::install(|| kernel_solve(ctx))
}

/// `A x` (or `Aᵀ x`) for a vector or matrix `x`, as a `SparseTensorDenseMatMul`.
fn sparse_times(g: &mut Graph, idx: Output, vals: Output, shape: (usize, usize), x: Output, adjoint: bool) -> Result<Output> {
    let xs = g.shape_of(x)?;
    let col = if xs.rank() == 1 { super::array::reshape(g, x, &Shape(vec![xs.0[0], 1]))? } else { x };
    let spec =
        NodeSpec::new("SparseTensorDenseMatMul", &[idx, vals, col]).attr("dense_shape", AttrValue::Shape(vec![shape.0, shape.1])).attr("adjoint_a", adjoint);
    let y = g.op_spec(spec)?;
    if xs.rank() == 1 {
        let rows = if adjoint { shape.1 } else { shape.0 };
        return super::array::reshape(g, y, &Shape(vec![rows]));
    }
    Ok(y)
}

fn solve_node(g: &mut Graph, node: &Node, ins: [Output; 3], attrs: &[(&str, AttrValue)]) -> Result<Output> {
    let mut spec = NodeSpec::new(node.op.name, &ins);
    for (k, v) in &node.attrs {
        spec = spec.attr(k, v.clone());
    }
    for (k, v) in attrs {
        spec = spec.attr(k, v.clone());
    }
    g.op_spec(spec)
}

fn grad_solve(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None; 3]) };
    let name = node.op.name;
    let (idx, vals, rhs) = (node.inputs[0], node.inputs[1], node.inputs[2]);
    let (m, n) = shape2(&node.attrs, name)?;
    let x = Output::new(node.id, 0);
    if method(&node.attrs, name)? != Method::Qr {
        let adjoint = node.attrs.get_bool_or(name, "adjoint", false)?;
        let lambda = solve_node(g, node, [idx, vals, dy], &[("adjoint", AttrValue::Bool(!adjoint))])?;
        let d = if adjoint { sampled_dot(g, idx, x, lambda)? } else { sampled_dot(g, idx, lambda, x)? };
        let dv = g.op("Neg", &[d])?;
        return Ok(vec![None, Some(dv), Some(lambda)]);
    }
    // least squares: λ = (AᵀA)⁻¹ ḡ with AᵀA from a sparse product, solved by Cholesky
    let swap = g.constant(Tensor::from_vec(&[2], vec![1i64, 0], Layout::RowMajor)?)?;
    let idx_t = g.op_spec(NodeSpec::new("GatherV2", &[idx, swap]).attr("axis", 1i64))?;
    let prod = NodeSpec::new("SparseSparseMatMul", &[idx_t, vals, idx, vals])
        .attr("a_shape", AttrValue::Shape(vec![n, m]))
        .attr("b_shape", AttrValue::Shape(vec![m, n]));
    let ata = g.add_node(prod)?;
    let normal =
        NodeSpec::new(name, &[Output::new(ata, 0), Output::new(ata, 1), dy]).attr("dense_shape", AttrValue::Shape(vec![n, n])).attr("method", "cholesky");
    let lambda = g.op_spec(normal)?;
    let w = sparse_times(g, idx, vals, (m, n), lambda, false)?;
    let ax = sparse_times(g, idx, vals, (m, n), x, false)?;
    let r = g.op("Sub", &[rhs, ax])?;
    let rl = sampled_dot(g, idx, r, lambda)?;
    let wx = sampled_dot(g, idx, w, x)?;
    let dv = g.op("Sub", &[rl, wx])?;
    Ok(vec![None, Some(dv), Some(w)])
}

pub(crate) fn register(r: &mut Registry) {
    r.add(
        def("SparseSolve", "SparseSolve", Arity::Fixed(3), infer_solve, par_solve, GpuSupport::None, Some(grad_solve))
            .with_attrs(attrs!["dense_shape" => Shape, "method" => Str, "adjoint" => Bool]),
    );
}
