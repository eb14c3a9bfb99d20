//! Sparse matrices: `SparseTensorDenseMatMul`, `SparseSparseMatMul` (with its gradient op
//! `SparseSparseMatMulGrad`, itself differentiable), `SparseRemap` and `SparseReorder`. `SparseSolve` is in `sparse_solve.rs`.
//!
//! A sparse matrix is TF's `SparseTensor` triple, held as ordinary tensors: `indices`
//! (`Int64`, shape `[nnz, 2]`, 0-based `(row, col)` pairs, in any order, repeats allowed and
//! summed), `values` (`Float32` or `Float64`, shape `[nnz]`) and a dense shape `[m, n]`. The
//! dense shape is a static attribute (`dense_shape`, or `a_shape`/`b_shape`) here, where TF
//! passes it as a tensor: Oxiflow's shapes are static, and a product's dense shape must be
//! known when the node is added. `nnz` may be unknown ([`crate::shape::UNKNOWN`]), as it is
//! for the outputs of `SparseRemap` and `SparseSparseMatMul`, whose count of stored entries
//! depends on the data.
//!
//! An index outside the dense shape is an `InvalidArgument` error naming the node, the entry
//! and the shape, raised when the kernel runs. CPU kernels only (TF's sparse ops outside
//! `SparseTensorDenseMatMul` have none either): pinned to a GPU without soft placement the
//! placer refuses them, with it they run on the CPU. Gradients flow to the values (and to a
//! dense operand), never to the indices.

use super::math::def;
use super::*;
use crate::graph::NodeSpec;
use crate::shape::UNKNOWN;
use crate::Layout;

// ---------------------------------------------------------------- shared helpers

/// A float input's elements as `f64`, row-major.
pub(crate) fn floats(ctx: &KernelCtx, i: usize) -> Result<Vec<f64>> {
    match &ctx.inputs[i] {
        Tensor::F64(a) => Ok(a.as_slice().map(<[f64]>::to_vec).unwrap_or_else(|| a.iter().copied().collect())),
        Tensor::F32(a) => Ok(a.iter().map(|&x| x as f64).collect()),
        t => Err(ctx.error(format!("no kernel for dtype {}", t.dtype()))),
    }
}

/// A tensor of `dtype` (`Float32` or `Float64`) and `dims` from row-major `f64` values.
pub(crate) fn float_tensor(dtype: DType, dims: &[usize], v: Vec<f64>) -> Result<Tensor> {
    match dtype {
        DType::Float32 => Tensor::from_vec(dims, v.into_iter().map(|x| x as f32).collect(), Layout::RowMajor),
        _ => Tensor::from_vec(dims, v, Layout::RowMajor),
    }
}

fn i64_tensor(dims: &[usize], v: Vec<i64>) -> Result<Tensor> {
    Tensor::from_vec(dims, v, Layout::RowMajor)
}

/// The `(row, col)` pairs of input `i` (`Int64 [nnz, 2]`), each checked against the dense
/// shape `[m, n]`.
pub(crate) fn entries(ctx: &KernelCtx, i: usize, m: usize, n: usize) -> Result<Vec<(usize, usize)>> {
    let Tensor::I64(a) = &ctx.inputs[i] else {
        return Err(ctx.error(format!("sparse indices must be Int64, got {}", ctx.inputs[i].dtype())));
    };
    let owned: Vec<i64>;
    let flat: &[i64] = match a.as_slice() {
        Some(s) => s,
        None => {
            owned = a.iter().copied().collect();
            &owned
        }
    };
    let mut out = Vec::with_capacity(flat.len() / 2);
    for (e, p) in flat.chunks_exact(2).enumerate() {
        let (r, c) = (p[0], p[1]);
        if r < 0 || c < 0 || r as usize >= m || c as usize >= n {
            return Err(ctx.error(format!("indices[{e}] = [{r}, {c}] is out of bounds for a sparse matrix of dense shape [{m}, {n}]")));
        }
        out.push((r as usize, c as usize));
    }
    Ok(out)
}

/// `[m, n]` from a two-dimensional shape attribute.
pub(crate) fn dense_shape(attrs: &Attrs, op: &str, k: &str) -> Result<(usize, usize)> {
    match attrs.get_shape(op, k)?.as_slice() {
        &[m, n] => Ok((m, n)),
        d => Err(OxiflowError::InvalidArgument(format!("{op}: attribute '{k}' must be a matrix shape [m, n], got {d:?}"))),
    }
}

/// Checks a sparse operand (`indices` input `i`, `values` input `i + 1`): `Int64 [nnz, 2]`
/// and a float `[nnz]`; returns `nnz` (possibly unknown) and the values' dtype.
pub(crate) fn sparse_operand(ctx: &InferCtx, i: usize, what: &str) -> Result<(usize, DType)> {
    let (idx, val) = (&ctx.inputs[i], &ctx.inputs[i + 1]);
    if idx.dtype != DType::Int64 || idx.shape.rank() != 2 || !matches!(idx.shape.0[1], 2 | UNKNOWN) {
        return Err(ctx.invalid(format!("{what} indices must be Int64 of shape [nnz, 2], got {} {}", idx.dtype, idx.shape)));
    }
    ctx.require_float(val.dtype)?;
    let want = Shape(vec![idx.shape.0[0]]);
    let Some(nnz) = want.merge(&val.shape) else {
        return Err(ctx.shape_error(&want, &val.shape, format!(" ({what} values must have one element per index row)")));
    };
    Ok((nnz.0[0], val.dtype))
}

/// Row pointers and entry order of a CSR view of `(row, col)` pairs with `m` rows (a
/// counting sort by row; entries of a row keep their input order).
fn by_row(ctx: &KernelCtx, ix: &[(usize, usize)], m: usize) -> Result<(Vec<usize>, Vec<usize>)> {
    let mut ptr = buffer(ctx, m + 1, 0usize)?;
    for &(r, _) in ix {
        ptr[r + 1] += 1;
    }
    for r in 0..m {
        ptr[r + 1] += ptr[r];
    }
    let mut next = ptr.clone();
    let mut order = vec![0usize; ix.len()];
    for (e, &(r, _)) in ix.iter().enumerate() {
        order[next[r]] = e;
        next[r] += 1;
    }
    Ok((ptr, order))
}

// ---------------------------------------------------------------- SparseTensorDenseMatMul

/// TF's `SparseTensorDenseMatMul(a_indices, a_values, b)`: `op(A) · op(B)` for a sparse
/// `A` of dense shape `dense_shape = [m, k]`, `op` a transpose where `adjoint_a`/`adjoint_b`.
fn infer_spmm(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let (_, dt) = sparse_operand(ctx, 0, "a")?;
    let (m, k) = dense_shape(ctx.attrs, ctx.op, "dense_shape")?;
    let (adj_a, adj_b) = (ctx.attrs.get_bool_or(ctx.op, "adjoint_a", false)?, ctx.attrs.get_bool_or(ctx.op, "adjoint_b", false)?);
    let b = &ctx.inputs[2];
    if b.dtype != dt {
        return Err(ctx.dtype_error(dt, b.dtype, " (b must have a_values' dtype)"));
    }
    if b.shape.rank() != 2 {
        return Err(ctx.invalid(format!("b must be a matrix, got shape {}", b.shape)));
    }
    let (rows, inner) = if adj_a { (k, m) } else { (m, k) };
    let (b_inner, cols) = if adj_b { (b.shape.0[1], b.shape.0[0]) } else { (b.shape.0[0], b.shape.0[1]) };
    if b_inner != inner && b_inner != UNKNOWN {
        return Err(ctx.shape_error(&Shape(vec![rows, inner]), &b.shape, " (inner dimensions of the sparse and dense operands differ)"));
    }
    Ok(vec![TensorType::new(dt, Shape(vec![rows, cols]))])
}

fn kernel_spmm(ctx: &KernelCtx) -> Result<Outputs> {
    let (m, k) = dense_shape(&ctx.node.attrs, ctx.node.op.name, "dense_shape")?;
    let adj_a = ctx.node.attrs.get_bool_or(ctx.node.op.name, "adjoint_a", false)?;
    let adj_b = ctx.node.attrs.get_bool_or(ctx.node.op.name, "adjoint_b", false)?;
    let ix = entries(ctx, 0, m, k)?;
    let vals = floats(ctx, 1)?;
    let b = floats(ctx, 2)?;
    let bd = ctx.inputs[2].dims();
    let (b_inner, cols) = if adj_b { (bd[1], bd[0]) } else { (bd[0], bd[1]) };
    let (rows, inner) = if adj_a { (k, m) } else { (m, k) };
    if b_inner != inner || vals.len() != ix.len() {
        return Err(ctx.error(format!(
            "operands of shapes [{rows}, {inner}] (with {} values for {} indices) and {:?} do not multiply",
            vals.len(),
            ix.len(),
            bd
        )));
    }
    let mut out = vec![0.0; rows * cols];
    for (&(i, j), &v) in ix.iter().zip(&vals) {
        let (r, c) = if adj_a { (j, i) } else { (i, j) };
        let o = &mut out[r * cols..(r + 1) * cols];
        if adj_b {
            for (col, x) in o.iter_mut().enumerate() {
                *x += v * b[col * bd[1] + c];
            }
        } else {
            for (x, &y) in o.iter_mut().zip(&b[c * cols..(c + 1) * cols]) {
                *x += v * y;
            }
        }
    }
    Ok(smallvec![float_tensor(ctx.node.outputs[0].dtype, &[rows, cols], out)?])
}

/// Column `c` (0 or 1) of a `[nnz, 2]` index tensor, as `[nnz]`.
pub(crate) fn index_column(g: &mut Graph, indices: Output, c: i64) -> Result<Output> {
    let k = g.constant(Tensor::full(&[], c))?;
    g.op_spec(NodeSpec::new("GatherV2", &[indices, k]).attr("axis", 1i64))
}

/// `sum_k x[rows[e], k] * y[cols[e], k]` for each entry `e` (`x`, `y` vectors or matrices):
/// the gradient of a sparse operand's values in a product, built from differentiable ops.
pub(crate) fn sampled_dot(g: &mut Graph, indices: Output, x: Output, y: Output) -> Result<Output> {
    let (r, c) = (index_column(g, indices, 0)?, index_column(g, indices, 1)?);
    let xr = g.op("GatherV2", &[x, r])?;
    let yc = g.op("GatherV2", &[y, c])?;
    let p = g.op("Mul", &[xr, yc])?;
    if g.shape_of(x)?.rank() == 1 {
        return Ok(p);
    }
    g.op_spec(NodeSpec::new("Sum", &[p]).attr("axis", AttrValue::Ints(vec![1])))
}

/// TF's `_SparseTensorDenseMatMulGrad`: `∂b = op(A)ᵀ dy` (another product with `adjoint_a`
/// flipped), `∂values[e] = dy[i_e, :] · op(B)[j_e, :]` (with `adjoint_a`, rows and columns of
/// the entry swap).
fn grad_spmm(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None; 3]) };
    let (idx, vals, b) = (node.inputs[0], node.inputs[1], node.inputs[2]);
    let name = node.op.name;
    let adj_a = node.attrs.get_bool_or(name, "adjoint_a", false)?;
    let adj_b = node.attrs.get_bool_or(name, "adjoint_b", false)?;
    let shape = node.attrs.get("dense_shape").cloned().ok_or_else(|| OxiflowError::Internal(format!("{name}: no dense_shape")))?;
    let spec = NodeSpec::new(name, &[idx, vals, dy]).attr("dense_shape", shape).attr("adjoint_a", !adj_a);
    let mut db = g.op_spec(spec)?;
    if adj_b {
        db = super::shape_ops::transpose(g, db, &[1, 0])?;
    }
    let b_rows = if adj_b { super::shape_ops::transpose(g, b, &[1, 0])? } else { b };
    let dv = if adj_a { sampled_dot(g, idx, b_rows, dy)? } else { sampled_dot(g, idx, dy, b_rows)? };
    Ok(vec![None, Some(dv), Some(db)])
}

// ---------------------------------------------------------------- SparseRemap

/// One stored entry on its way through a sort: position, value and input position.
#[derive(Copy, Clone)]
struct Entry {
    r: usize,
    c: usize,
    v: f64,
    src: usize,
}

/// A zero-filled buffer of `len` elements, or an error naming the node where memory
/// cannot hold it (a huge dense shape), instead of an allocation that aborts the process.
pub(crate) fn buffer<T: Clone>(ctx: &KernelCtx, len: usize, fill: T) -> Result<Vec<T>> {
    let mut b = Vec::new();
    b.try_reserve_exact(len).map_err(|_| ctx.error(format!("cannot allocate a work array of {len} elements (the dense shape is too large)")))?;
    b.resize(len, fill);
    Ok(b)
}

/// A stable counting sort of `es` by `key` (values below `buckets`).
fn counting_sort(ctx: &KernelCtx, es: &[Entry], buckets: usize, key: impl Fn(&Entry) -> usize) -> Result<Vec<Entry>> {
    let mut start = buffer(ctx, buckets + 1, 0usize)?;
    for e in es {
        start[key(e) + 1] += 1;
    }
    for b in 0..buckets {
        start[b + 1] += start[b];
    }
    let mut out = es.to_vec();
    for e in es {
        let k = key(e);
        out[start[k]] = *e;
        start[k] += 1;
    }
    Ok(out)
}

/// `es` sorted by row, then column, then input position (so repeats sum in input order):
/// two counting sorts (columns, then rows; linear passes) when the dense shape is at most
/// a few times the entry count, a comparison sort otherwise.
fn row_major(ctx: &KernelCtx, mut es: Vec<Entry>, m: usize, n: usize) -> Result<Vec<Entry>> {
    let small = 4 * es.len() + (1 << 16);
    if m <= small && n <= small {
        let by_col = counting_sort(ctx, &es, n, |e| e.c)?;
        return counting_sort(ctx, &by_col, m, |e| e.r);
    }
    es.sort_unstable_by_key(|e| (e.r, e.c, e.src));
    Ok(es)
}

/// `SparseRemap(indices, values, row_map, col_map)`: moves each entry `(i, j)` to
/// `(row_map[i], col_map[j])`, drops it where either is negative, then sorts the entries
/// row-major and sums repeats. Outputs `indices [nnz_out, 2]`, `values [nnz_out]` and
/// `slot [nnz]`: where each input entry went (`nnz_out` for a dropped one), which the
/// gradient gathers through. It is ADCME's `compress` (identity maps) and the core of
/// slicing a sparse matrix by ranges, index vectors or masks. `dense_shape` is the output's.
fn infer_remap(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let (nnz, dt) = sparse_operand(ctx, 0, "")?;
    dense_shape(ctx.attrs, ctx.op, "dense_shape")?;
    for (i, what) in [(2, "row_map"), (3, "col_map")] {
        let t = &ctx.inputs[i];
        if t.dtype != DType::Int64 || t.shape.rank() != 1 {
            return Err(ctx.invalid(format!("{what} must be an Int64 vector, got {} {}", t.dtype, t.shape)));
        }
    }
    Ok(vec![TensorType::new(DType::Int64, Shape(vec![UNKNOWN, 2])), TensorType::new(dt, Shape(vec![UNKNOWN])), TensorType::new(DType::Int64, Shape(vec![nnz]))])
}

fn kernel_remap(ctx: &KernelCtx) -> Result<Outputs> {
    let (m, n) = dense_shape(&ctx.node.attrs, ctx.node.op.name, "dense_shape")?;
    let (rmap, cmap) = (super::index::index_values(&ctx.inputs[2]), super::index::index_values(&ctx.inputs[3]));
    let ix = entries(ctx, 0, rmap.len(), cmap.len())?;
    let vals = floats(ctx, 1)?;
    if vals.len() != ix.len() {
        return Err(ctx.error(format!("{} values for {} indices", vals.len(), ix.len())));
    }
    let mut kept: Vec<Entry> = Vec::with_capacity(ix.len());
    for (e, (&(i, j), &v)) in ix.iter().zip(&vals).enumerate() {
        let (r, c) = (rmap[i], cmap[j]);
        if r < 0 || c < 0 {
            continue;
        }
        if r as usize >= m || c as usize >= n {
            return Err(ctx.error(format!("entry {e} maps to [{r}, {c}], outside the output's dense shape [{m}, {n}]")));
        }
        kept.push(Entry { r: r as usize, c: c as usize, v, src: e });
    }
    let kept = row_major(ctx, kept, m, n)?;
    let (mut out_ix, mut out_v) = (Vec::with_capacity(2 * kept.len()), Vec::with_capacity(kept.len()));
    let mut slot = vec![usize::MAX; ix.len()];
    let mut last = (usize::MAX, usize::MAX);
    for e in &kept {
        if (e.r, e.c) != last {
            out_ix.extend([e.r as i64, e.c as i64]);
            out_v.push(0.0);
            last = (e.r, e.c);
        }
        let s = out_v.len() - 1;
        out_v[s] += e.v;
        slot[e.src] = s;
    }
    let nnz = out_v.len();
    let slot: Vec<i64> = slot.into_iter().map(|s| if s == usize::MAX { nnz as i64 } else { s as i64 }).collect();
    let dt = ctx.node.outputs[1].dtype;
    Ok(Outputs::from_vec(vec![i64_tensor(&[nnz, 2], out_ix)?, float_tensor(dt, &[nnz], out_v)?, i64_tensor(&[ix.len()], slot)?]))
}

/// `SparseReorder(indices, values)` (TF's `tf.sparse.reorder`): the same entries sorted
/// row-major, repeats kept, in input order. Outputs `indices [nnz, 2]`, `values [nnz]` and
/// `slot [nnz]`, where each input entry went (the gradient gathers through it, as TF's
/// `_SparseReorderGrad` permutes back). `dense_shape` (attr) bounds the indices.
fn infer_reorder(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let (nnz, dt) = sparse_operand(ctx, 0, "")?;
    dense_shape(ctx.attrs, ctx.op, "dense_shape")?;
    Ok(vec![TensorType::new(DType::Int64, Shape(vec![nnz, 2])), TensorType::new(dt, Shape(vec![nnz])), TensorType::new(DType::Int64, Shape(vec![nnz]))])
}

fn kernel_reorder(ctx: &KernelCtx) -> Result<Outputs> {
    let (m, n) = dense_shape(&ctx.node.attrs, ctx.node.op.name, "dense_shape")?;
    let ix = entries(ctx, 0, m, n)?;
    let vals = floats(ctx, 1)?;
    if vals.len() != ix.len() {
        return Err(ctx.error(format!("{} values for {} indices", vals.len(), ix.len())));
    }
    let es = ix.iter().zip(&vals).enumerate().map(|(src, (&(r, c), &v))| Entry { r, c, v, src }).collect();
    let sorted = row_major(ctx, es, m, n)?;
    let (mut out_ix, mut out_v, mut slot) = (Vec::with_capacity(2 * sorted.len()), Vec::with_capacity(sorted.len()), vec![0i64; sorted.len()]);
    for (k, e) in sorted.iter().enumerate() {
        out_ix.extend([e.r as i64, e.c as i64]);
        out_v.push(e.v);
        slot[e.src] = k as i64;
    }
    let nnz = out_v.len();
    let dt = ctx.node.outputs[1].dtype;
    Ok(Outputs::from_vec(vec![i64_tensor(&[nnz, 2], out_ix)?, float_tensor(dt, &[nnz], out_v)?, i64_tensor(&[nnz], slot)?]))
}

/// `∂values = dy[slot]`: each input entry gets the gradient of the entry it became.
fn grad_reorder(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[1] else { return Ok(vec![None; 2]) };
    Ok(vec![None, Some(g.op("GatherV2", &[dy, Output::new(node.id, 2)])?)])
}

/// `∂values = [dy; 0][slot]`: each input entry gets the gradient of the output entry it was
/// summed into, a dropped one (slot `nnz_out`) zero.
fn grad_remap(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[1] else { return Ok(vec![None; 4]) };
    let dt = g.dtype_of(dy)?;
    let zero = g.constant(Tensor::filled(dt, &[1], 0.0))?;
    let padded = super::shape_ops::concat(g, &[dy, zero], 0)?;
    let dv = g.op("GatherV2", &[padded, Output::new(node.id, 2)])?;
    Ok(vec![None, Some(dv), None, None])
}

// ---------------------------------------------------------------- SparseSparseMatMul

/// `SparseSparseMatMul(a_indices, a_values, b_indices, b_values)`: the sparse product of
/// `A` (`a_shape = [m, k]`) and `B` (`b_shape = [k, n]`), Gustavson's row-by-row algorithm;
/// outputs `indices [nnz_c, 2]` (sorted row-major) and `values [nnz_c]`. Every product of
/// stored entries makes a stored entry, zero or not (ADCME's `*` of two `SparseTensor`s).
fn infer_spspmm(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let (_, da) = sparse_operand(ctx, 0, "a")?;
    let (_, db) = sparse_operand(ctx, 2, "b")?;
    if da != db {
        return Err(ctx.dtype_error(da, db, " (both sparse operands must have the same dtype)"));
    }
    let (a, b) = (dense_shape(ctx.attrs, ctx.op, "a_shape")?, dense_shape(ctx.attrs, ctx.op, "b_shape")?);
    if a.1 != b.0 {
        return Err(ctx.shape_error(&Shape(vec![a.0, a.1]), &Shape(vec![b.0, b.1]), " (inner dimensions differ)"));
    }
    Ok(vec![TensorType::new(DType::Int64, Shape(vec![UNKNOWN, 2])), TensorType::new(da, Shape(vec![UNKNOWN]))])
}

/// The two operands of a sparse product: entries and values of `A` and `B`, with their
/// dense shapes, checked.
struct Operands {
    a: Vec<(usize, usize)>,
    av: Vec<f64>,
    b: Vec<(usize, usize)>,
    bv: Vec<f64>,
    m: usize,
    k: usize,
    n: usize,
}

fn operands(ctx: &KernelCtx) -> Result<Operands> {
    let name = ctx.node.op.name;
    let ((m, k), (_, n)) = (dense_shape(&ctx.node.attrs, name, "a_shape")?, dense_shape(&ctx.node.attrs, name, "b_shape")?);
    let (a, av) = (entries(ctx, 0, m, k)?, floats(ctx, 1)?);
    let (b, bv) = (entries(ctx, 2, k, n)?, floats(ctx, 3)?);
    if a.len() != av.len() || b.len() != bv.len() {
        return Err(ctx.error("each sparse operand needs one value per index row"));
    }
    Ok(Operands { a, av, b, bv, m, k, n })
}

fn kernel_spspmm(ctx: &KernelCtx) -> Result<Outputs> {
    let Operands { a, av, b, bv, m, k, n } = operands(ctx)?;
    let (ap, ao) = by_row(ctx, &a, m)?;
    let (bp, bo) = by_row(ctx, &b, k)?;
    let (mut acc, mut mark) = (buffer(ctx, n, 0.0)?, buffer(ctx, n, usize::MAX)?);
    let (mut out_ix, mut out_v, mut cols) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..m {
        cols.clear();
        for &ea in &ao[ap[i]..ap[i + 1]] {
            let j = a[ea].1;
            for &eb in &bo[bp[j]..bp[j + 1]] {
                let c = b[eb].1;
                if mark[c] != i {
                    mark[c] = i;
                    acc[c] = 0.0;
                    cols.push(c);
                }
                acc[c] += av[ea] * bv[eb];
            }
        }
        cols.sort_unstable();
        for &c in &cols {
            out_ix.extend([i as i64, c as i64]);
            out_v.push(acc[c]);
        }
    }
    let nnz = out_v.len();
    Ok(Outputs::from_vec(vec![i64_tensor(&[nnz, 2], out_ix)?, float_tensor(ctx.node.outputs[1].dtype, &[nnz], out_v)?]))
}

/// The gradient of `SparseSparseMatMul`: a `SparseSparseMatMulGrad` node computing
/// `∂a[(i, j)] = Σ_n dC[i, n] B[j, n]` and `∂b[(j, n)] = Σ_i A[i, j] dC[i, n]` over the stored
/// entries (dC on C's pattern, its input 4 being the product's own indices). That op is
/// differentiable in turn ([`grad_spspmm_grad`]), so derivatives of any order follow.
fn grad_spspmm(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dc) = grads[1] else { return Ok(vec![None; 4]) };
    let mut ins = node.inputs.clone();
    ins.extend([Output::new(node.id, 0), dc]);
    let mut spec = NodeSpec::new("SparseSparseMatMulGrad", &ins);
    for k in ["a_shape", "b_shape"] {
        if let Some(v) = node.attrs.get(k) {
            spec = spec.attr(k, v.clone());
        }
    }
    let id = g.add_node(spec)?;
    Ok(vec![None, Some(Output::new(id, 0)), None, Some(Output::new(id, 1))])
}

/// The gradient of `SparseSparseMatMulGrad(a, av, b, bv, c, dc) = (da, db)`, which is
/// bilinear: given `g_da`, `g_db`,
/// - `∂av = SparseSparseMatMulGrad(a, av, b, g_db, c, dc).da` (`da` with `bv` replaced),
/// - `∂bv = SparseSparseMatMulGrad(a, g_da, b, bv, c, dc).db`,
/// - `∂dc = (A(g_da) B + A B(g_db))` on C's pattern: the values of two `SparseSparseMatMul`s,
///   whose patterns are C's own (a product's pattern depends on the indices only and is
///   sorted row-major), added entry by entry. This relies on `c` being the indices of
///   `SparseSparseMatMul(a, ·, b, ·)`, as [`grad_spspmm`] builds it.
fn grad_spspmm_grad(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let ins = node.inputs.clone();
    let with_shapes = |mut spec: NodeSpec| {
        for k in ["a_shape", "b_shape"] {
            if let Some(v) = node.attrs.get(k) {
                spec = spec.attr(k, v.clone());
            }
        }
        spec
    };
    let (mut d_av, mut d_bv, mut terms) = (None, None, Vec::new());
    if let Some(gdb) = grads[1] {
        let id = g.add_node(with_shapes(NodeSpec::new("SparseSparseMatMulGrad", &[ins[0], ins[1], ins[2], gdb, ins[4], ins[5]])))?;
        d_av = Some(Output::new(id, 0));
        let p = g.add_node(with_shapes(NodeSpec::new("SparseSparseMatMul", &[ins[0], ins[1], ins[2], gdb])))?;
        terms.push(Output::new(p, 1));
    }
    if let Some(gda) = grads[0] {
        let id = g.add_node(with_shapes(NodeSpec::new("SparseSparseMatMulGrad", &[ins[0], gda, ins[2], ins[3], ins[4], ins[5]])))?;
        d_bv = Some(Output::new(id, 1));
        let p = g.add_node(with_shapes(NodeSpec::new("SparseSparseMatMul", &[ins[0], gda, ins[2], ins[3]])))?;
        terms.push(Output::new(p, 1));
    }
    let d_dc = match terms[..] {
        [] => None,
        [t] => Some(t),
        [t, u] => Some(g.op("Add", &[t, u])?),
        _ => unreachable!("at most two terms"),
    };
    Ok(vec![None, d_av, None, d_bv, None, d_dc])
}

fn infer_spspmm_grad(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let (na, dt) = sparse_operand(ctx, 0, "a")?;
    let (nb, _) = sparse_operand(ctx, 2, "b")?;
    sparse_operand(ctx, 4, "c")?;
    Ok(vec![TensorType::new(dt, Shape(vec![na])), TensorType::new(dt, Shape(vec![nb]))])
}

fn kernel_spspmm_grad(ctx: &KernelCtx) -> Result<Outputs> {
    let Operands { a, av, b, bv, m, k, n } = operands(ctx)?;
    let c = entries(ctx, 4, m, n)?;
    let dc = floats(ctx, 5)?;
    if dc.len() != c.len() {
        return Err(ctx.error(format!("{} gradient values for {} entries of the product", dc.len(), c.len())));
    }
    let (ap, ao) = by_row(ctx, &a, m)?;
    let (bp, bo) = by_row(ctx, &b, k)?;
    let (cp, co) = by_row(ctx, &c, m)?;
    let (mut w, mut da, mut db) = (buffer(ctx, n, 0.0)?, vec![0.0; a.len()], vec![0.0; b.len()]);
    for i in 0..m {
        for &ec in &co[cp[i]..cp[i + 1]] {
            w[c[ec].1] += dc[ec];
        }
        for &ea in &ao[ap[i]..ap[i + 1]] {
            let j = a[ea].1;
            for &eb in &bo[bp[j]..bp[j + 1]] {
                let d = w[b[eb].1];
                da[ea] += d * bv[eb];
                db[eb] += av[ea] * d;
            }
        }
        for &ec in &co[cp[i]..cp[i + 1]] {
            w[c[ec].1] = 0.0;
        }
    }
    let dt = ctx.node.outputs[0].dtype;
    Ok(Outputs::from_vec(vec![float_tensor(dt, &[a.len()], da)?, float_tensor(dt, &[b.len()], db)?]))
}

// ---------------------------------------------------------------- registration

const MATMUL_ATTRS: &[AttrDef] = attrs!["dense_shape" => Shape, "adjoint_a" => Bool, "adjoint_b" => Bool];
const PRODUCT_ATTRS: &[AttrDef] = attrs!["a_shape" => Shape, "b_shape" => Shape];

pub(crate) fn register(r: &mut Registry) {
    let cpu = GpuSupport::None;
    r.add(def("SparseTensorDenseMatMul", "SparseTensorDenseMatMul", Arity::Fixed(3), infer_spmm, kernel_spmm, cpu, Some(grad_spmm)).with_attrs(MATMUL_ATTRS));
    r.add(def("SparseRemap", "SparseRemap", Arity::Fixed(4), infer_remap, kernel_remap, cpu, Some(grad_remap)).with_attrs(attrs!["dense_shape" => Shape]));
    r.add(
        def("SparseReorder", "SparseReorder", Arity::Fixed(2), infer_reorder, kernel_reorder, cpu, Some(grad_reorder))
            .with_attrs(attrs!["dense_shape" => Shape]),
    );
    r.add(def("SparseSparseMatMul", "SparseSparseMatMul", Arity::Fixed(4), infer_spspmm, kernel_spspmm, cpu, Some(grad_spspmm)).with_attrs(PRODUCT_ATTRS));
    r.add(
        def("SparseSparseMatMulGrad", "SparseSparseMatMulGrad", Arity::Fixed(6), infer_spspmm_grad, kernel_spspmm_grad, cpu, Some(grad_spspmm_grad))
            .with_attrs(PRODUCT_ATTRS),
    );
}
