//! `MatMul` (TF's `tf.matmul` / `gen_math_ops.mat_mul`, gradient `_MatMulGrad`).
//!
//! `MatMul(a, b)` with bool attrs `transpose_a`, `transpose_b` (default false): rank-2
//! `Float32`/`Float64` operands of one dtype, `op(a)` is `[m, k]` and `op(b)` is `[k, n]`,
//! the output `[m, n]`. Other ranks or mismatched inner dimensions are a `ShapeMismatch`
//! naming both shapes. The CPU kernel is the system's OpenBLAS when one is installed
//! (`blas.rs`: single-threaded calls, one block of rows or columns per intra-op thread), else
//! the `gemm` crate (Rayon-parallel for large products, on the session's intra-op threads);
//! transposes and strided inputs are passed as strides, never copied, except inputs with
//! negative strides, which are first made standard-layout. The output is row-major as TF's,
//! except that the product of two column-major operands is column-major (Julia's arrays keep
//! their memory order through a chain of products, and a fetch needs no transposing copy).

use super::blas::BlasFloat;
use super::math::def;
use super::vmath::{self, VFloat};
use super::*;
use crate::graph::NodeSpec;
use crate::tensor::Element;
use ndarray::{ArcArray, Array2, ArrayView2, ArrayViewMut2, Ix2, IxDyn, ShapeBuilder};

/// Products with `m*n*k` below this run single-threaded (thread start-up would dominate).
const PARALLEL_THRESHOLD: usize = 64 * 64 * 64;

fn transposes(attrs: &Attrs) -> Result<(bool, bool)> {
    Ok((attrs.get_bool_or("MatMul", "transpose_a", false)?, attrs.get_bool_or("MatMul", "transpose_b", false)?))
}

fn infer_matmul(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let (a, b) = (&ctx.inputs[0], &ctx.inputs[1]);
    if a.dtype != b.dtype {
        return Err(ctx.dtype_error(a.dtype, b.dtype, " (both MatMul operands must have the same dtype)"));
    }
    ctx.require_float(a.dtype)?;
    let (ta, tb) = transposes(ctx.attrs)?;
    if a.shape.rank() != 2 || b.shape.rank() != 2 {
        return Err(ctx.shape_error(&a.shape, &b.shape, " (MatMul needs two rank-2 matrices)"));
    }
    let (ad, bd) = (a.shape.dims(), b.shape.dims());
    let (m, k1) = if ta { (ad[1], ad[0]) } else { (ad[0], ad[1]) };
    let (k2, n) = if tb { (bd[1], bd[0]) } else { (bd[0], bd[1]) };
    if k1 != k2 && k1 != crate::shape::UNKNOWN && k2 != crate::shape::UNKNOWN {
        return Err(ctx.shape_error(&a.shape, &b.shape, format!(" (MatMul inner dimensions differ: {k1} vs {k2}; transpose_a={ta}, transpose_b={tb})")));
    }
    Ok(vec![TensorType::new(a.dtype, Shape(vec![m, n]))])
}

/// Whether `a @ b` is written column-major: both operands are column-major (Julia's
/// arrays, fed or held by variables, and products of them), so the product keeps their
/// memory order and a fetch hands it to Julia without a transposing copy. Operands that
/// are both row- and column-major (one row or column) count for either order; mixed
/// orders give the row-major output TF's kernels always produce.
fn column_major_output<T>(a: &ArrayView2<T>, b: &ArrayView2<T>) -> bool {
    let f = |v: &ArrayView2<T>| v.t().is_standard_layout();
    let c = |v: &ArrayView2<T>| v.is_standard_layout();
    f(a) && f(b) && !(c(a) && c(b))
}

/// What `_FusedMatMul` applies to its product, element by element and in this order: a
/// bias along the output's columns (`bias[j]` added to every element of column `j`, as
/// TF's `BiasAdd` on the last axis), then an optional activation from [`vmath`] (the
/// functions the unfused `Tanh`, `Sigmoid` and `Relu` kernels use, so the same bits).
pub(crate) struct BiasActivation<'a, T> {
    /// `[n]`, one value per output column.
    pub bias: &'a [T],
    pub activation: Option<vmath::Fun>,
}

impl<T: VFloat + std::ops::Add<Output = T>> BiasActivation<'_, T> {
    /// Applies itself to `seg`, the elements `start..start + seg.len()` of line `line` of a
    /// product as stored (a row of the output, or a column of it when `columns`: a
    /// column-major output, whose memory holds its columns one after another), or, when
    /// `start` is 0 and `seg` is longer than a line of `line_len` elements, to the whole
    /// lines `line, line + 1, ...` that `seg` holds. The activation then runs once over all
    /// of `seg`: per line, a product with 20 columns called the vector loop 1024 times for
    /// 20 elements each (a 1024×20 `tanh` layer: 60 µs, against 20 µs for its `MatMul`).
    fn apply(&self, line: usize, start: usize, seg: &mut [T], columns: bool, line_len: usize) {
        if start == 0 && seg.len() > line_len && line_len > 0 {
            seg.chunks_mut(line_len).enumerate().for_each(|(i, l)| self.add_bias(line + i, 0, l, columns));
        } else {
            self.add_bias(line, start, seg, columns);
        }
        if let Some(f) = self.activation {
            vmath::run_in_place(f, seg);
        }
    }

    /// The bias of the elements `start..start + seg.len()` of line `line` (see [`Self::apply`]).
    fn add_bias(&self, line: usize, start: usize, seg: &mut [T], columns: bool) {
        if columns {
            let b = self.bias[line];
            seg.iter_mut().for_each(|v| *v = *v + b);
        } else {
            let len = seg.len();
            seg.iter_mut().zip(&self.bias[start..start + len]).for_each(|(v, &b)| *v = *v + b);
        }
    }

    /// Applies itself to every element of an `m x n` product `p` (contiguous, as this
    /// file makes them, all lines at once; any other one element by element).
    fn apply_all(&self, p: &mut Array2<T>) {
        let (m, n) = p.dim();
        let columns = crate::strided::is_column_major(p);
        let line = if columns { m } else { n };
        match p.as_slice_memory_order_mut() {
            Some(s) => self.apply(0, 0, s, columns, line),
            None => p.indexed_iter_mut().for_each(|((_, j), v)| self.apply(0, j, std::slice::from_mut(v), false, n)),
        }
    }
}

/// `a @ b` with the system BLAS or the `gemm` crate; `a` is `[m, k]`, `b` is `[k, n]`,
/// any strides, with `blas` when given, else the `gemm` crate, followed by `fused` (its
/// bias has `n` elements) when given. Views with a negative stride are copied to standard
/// layout first. The output is row-major, or column-major where [`column_major_output`]
/// says so.
pub(crate) fn gemm_product<T: Element + BlasFloat + VFloat + std::ops::Add<Output = T>>(
    blas: Option<&super::blas::Blas>,
    a: ArrayView2<T>,
    b: ArrayView2<T>,
    zero: T,
    one: T,
    fused: Option<&BiasActivation<T>>,
) -> Array2<T> {
    let (m, k) = a.dim();
    let n = b.dim().1;
    if m == 0 || n == 0 || k == 0 {
        let mut p = Array2::from_elem((m, n), zero);
        if let Some(f) = fused {
            f.apply_all(&mut p);
        }
        return p;
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
    let col = column_major_output(&a, &b);
    if let Some(lib) = blas {
        let op = |v: &ArrayView2<T>| {
            let (r, c) = v.dim();
            super::blas::Operand::new(v.as_ptr(), r, c, v.strides()[0], v.strides()[1])
        };
        // A column-major product is the row-major product b^T a^T.
        let (x, y, rows, cols) = if col { (b.t(), a.t(), n, m) } else { (a.view(), b.view(), m, n) };
        if let (Some(ox), Some(oy)) = (op(&x), op(&y)) {
            let threads = match gemm_parallelism(m, n, k) {
                gemm::Parallelism::None => 1,
                gemm::Parallelism::Rayon(t) => t,
            };
            let mut buf: Vec<T> = Vec::with_capacity(m * n);
            let epilogue = fused.map(|f| move |r: usize, c: usize, seg: &mut [T]| f.apply(r, c, seg, col, cols));
            let epilogue = epilogue.as_ref().map(|e| e as super::blas::Epilogue<T>);
            // SAFETY: ox and oy describe the live views x and y; buf has room for the
            // rows x cols product, which BLAS (beta = 0) writes in full before set_len.
            if unsafe { super::blas::matmul(lib, rows, cols, k, ox, oy, buf.as_mut_ptr(), threads, epilogue) } {
                unsafe { buf.set_len(m * n) };
                return Array2::from_shape_vec((m, n).set_f(col), buf).expect("m * n elements");
            }
        }
    }
    let mut dst = Array2::from_elem((m, n).set_f(col), zero);
    let par = gemm_parallelism(m, n, k);
    match par {
        gemm::Parallelism::None => gemm_into(dst.view_mut(), a, b, zero, one, par),
        _ => crate::intra_op::install(|| gemm_into(dst.view_mut(), a, b, zero, one, par)),
    }
    if let Some(f) = fused {
        f.apply_all(&mut dst);
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
        gemm::gemm(m, n, k, dst.as_mut_ptr(), ds[1], ds[0], false, a.as_ptr(), as_[1], as_[0], b.as_ptr(), bs[1], bs[0], zero, one, false, false, false, par);
    }
}

/// The product of a `MatMul` or `_FusedMatMul` kernel's first two inputs, by the node's
/// `transpose_a` / `transpose_b` (`one` is 1 in `T`), followed by the bias (`[n]`) and activation of a fused one.
fn product<T: Element + BlasFloat + VFloat + std::ops::Add<Output = T>>(
    ctx: &KernelCtx,
    a: &ArcArray<T, IxDyn>,
    b: &ArcArray<T, IxDyn>,
    one: T,
    fused: Option<(&ArcArray<T, IxDyn>, Option<vmath::Fun>)>,
) -> Result<ArcArray<T, IxDyn>> {
    let (ta, tb) = transposes(&ctx.node.attrs)?;
    fn rank2<'a, T>(ctx: &KernelCtx, x: &'a ArcArray<T, IxDyn>) -> Result<ArrayView2<'a, T>> {
        x.view().into_dimensionality::<Ix2>().map_err(|_| ctx.error(format!("needs rank-2 operands, got {}", Shape(x.shape().to_vec()))))
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
    let zero = T::zero();
    let Some((bias, activation)) = fused else {
        return Ok(gemm_product(super::blas::blas(), a2, b2, zero, one, None).into_dyn().into_shared());
    };
    let n = b2.dim().1;
    if bias.shape() != [n] {
        return Err(ctx.error(format!("bias of shape {} for a product with {n} columns (it needs [{n}])", Shape(bias.shape().to_vec()))));
    }
    let owned;
    let bias = match bias.as_slice_memory_order() {
        Some(s) => s,
        None => {
            owned = bias.iter().copied().collect::<Vec<T>>();
            &owned[..]
        }
    };
    let fused = BiasActivation { bias, activation };
    Ok(gemm_product(super::blas::blas(), a2, b2, zero, one, Some(&fused)).into_dyn().into_shared())
}

fn kernel_matmul(ctx: &KernelCtx) -> Result<Outputs> {
    Ok(smallvec![match (&ctx.inputs[0], &ctx.inputs[1]) {
        (Tensor::F32(a), Tensor::F32(b)) => Tensor::F32(product(ctx, a, b, 1.0, None)?),
        (Tensor::F64(a), Tensor::F64(b)) => Tensor::F64(product(ctx, a, b, 1.0, None)?),
        (a, b) => return Err(ctx.error(format!("no kernel for dtypes {} and {}", a.dtype(), b.dtype()))),
    }])
}

// ---------------------------------------------------------------- _FusedMatMul

/// The activations `_FusedMatMul` takes after its bias: the op names of the graph's nodes
/// it replaces, and their [`vmath`] functions.
pub(crate) const FUSED_ACTIVATIONS: [(&str, vmath::Fun); 3] = [("Tanh", vmath::Fun::Tanh), ("Relu", vmath::Fun::Relu), ("Sigmoid", vmath::Fun::Sigmoid)];

/// The activation a `_FusedMatMul` node applies: its `activation` attribute (an op name of
/// [`FUSED_ACTIVATIONS`]), or none without one.
fn fused_activation(attrs: &Attrs, err: impl Fn(String) -> OxiflowError) -> Result<Option<vmath::Fun>> {
    match attrs.get("activation") {
        None => Ok(None),
        Some(AttrValue::Str(s)) => {
            FUSED_ACTIVATIONS.iter().find(|(n, _)| n == s).map(|&(_, f)| Some(f)).ok_or_else(|| err(format!("unknown activation '{s}'")))
        }
        Some(v) => Err(err(format!("activation must be a string, got {v:?}"))),
    }
}

/// The kernel of [`FUSED_MATMUL`].
fn kernel_fused_matmul(ctx: &KernelCtx) -> Result<Outputs> {
    let activation = fused_activation(&ctx.node.attrs, |m| ctx.error(m))?;
    Ok(smallvec![match (&ctx.inputs[0], &ctx.inputs[1], &ctx.inputs[2]) {
        (Tensor::F32(a), Tensor::F32(b), Tensor::F32(bias)) => Tensor::F32(product(ctx, a, b, 1.0, Some((bias, activation)))?),
        (Tensor::F64(a), Tensor::F64(b), Tensor::F64(bias)) => Tensor::F64(product(ctx, a, b, 1.0, Some((bias, activation)))?),
        (a, b, c) => return Err(ctx.error(format!("no kernel for dtypes {}, {} and {}", a.dtype(), b.dtype(), c.dtype()))),
    }])
}

/// `MatMul`'s shapes, and a `[n]` bias of the same dtype.
fn infer_fused_matmul(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let [_, _, bias] = ctx.inputs else {
        return Err(ctx.invalid(format!("takes a, b and bias, got {} inputs", ctx.inputs.len())));
    };
    fused_activation(ctx.attrs, |m| ctx.invalid(m))?;
    let out = infer_matmul(ctx)?;
    if bias.dtype != out[0].dtype {
        return Err(ctx.dtype_error(out[0].dtype, bias.dtype, " (the bias must have the product's dtype)"));
    }
    let (n, unknown) = (out[0].shape.dims()[1], crate::shape::UNKNOWN);
    if bias.shape.rank() != 1 || (n != unknown && bias.shape.dims()[0] != unknown && bias.shape.dims()[0] != n) {
        return Err(ctx.shape_error(&out[0].shape, &bias.shape, " (the bias needs one value per column of the product)"));
    }
    Ok(out)
}

/// `_FusedMatMul(a, b, bias)`: `activation(op(a) @ op(b) + bias)`, TF's `_FusedMatMul`
/// with `fused_ops = ["BiasAdd"]` or `["BiasAdd", activation]`, which Grappler's remapper
/// makes of `MatMul` + `BiasAdd` (or an `Add` of a bias-shaped operand) + `Relu`/`Tanh`/
/// `Sigmoid`. Made by the session's fusion pass ([`crate::fusion`]) for CPU plans only; a
/// graph never holds it. Shapes: as `MatMul` for `a` and `b` (`[m, n]` output), `bias`
/// `[n]`, one float dtype. Each block of the product gets its bias and activation on the
/// thread that computed it, while in cache; the result has the bits of the unfused ops
/// (the same product blocks, the same IEEE addition, the same [`vmath`] functions).
///
/// Attributes: `transpose_a`, `transpose_b` (bool, as `MatMul`'s) and `activation` (a
/// string of [`FUSED_ACTIVATIONS`]; none without it). Errors (`InvalidArgument` naming the
/// step): operands as `MatMul` refuses them, a bias that is not `[n]`, an unknown
/// activation. Not in the registry: graphs never hold it.
pub static FUSED_MATMUL: OpDef = OpDef {
    name: "_FusedMatMul",
    default_name: "_FusedMatMul",
    arity: Arity::Fixed(3),
    ref_inputs: &[],
    infer: infer_fused_matmul,
    kernel: kernel_fused_matmul,
    gpu: GpuSupport::None,
    inputs: &[],
    attrs: &[],
    launch: GpuLaunch::None,
    grad: Gradient::Undefined,
    stateful: false,
    inexpensive: false,
    host_memory: &[],
};

fn matmul(g: &mut Graph, a: Output, b: Output, ta: bool, tb: bool) -> Result<Output> {
    g.op_spec(NodeSpec::new("MatMul", &[a, b]).attr("transpose_a", ta).attr("transpose_b", tb))
}

/// TF `_MatMulGrad`: for `C = op(A) op(B)`, products of `dC` with the other operand,
/// transposed so that no explicit transpose node is needed.
fn grad_matmul(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dc) = grads[0] else { return Ok(vec![None, None]) };
    let (a, b) = (node.inputs[0], node.inputs[1]);
    let (ga, gb) = match transposes(&node.attrs)? {
        (false, false) => (matmul(g, dc, b, false, true)?, matmul(g, a, dc, true, false)?),
        (false, true) => (matmul(g, dc, b, false, false)?, matmul(g, dc, a, true, false)?),
        (true, false) => (matmul(g, b, dc, false, true)?, matmul(g, a, dc, false, false)?),
        (true, true) => (matmul(g, b, dc, true, true)?, matmul(g, dc, a, true, true)?),
    };
    Ok(vec![Some(ga), Some(gb)])
}

pub(crate) fn register(r: &mut Registry) {
    r.add(
        def("MatMul", "MatMul", Arity::Fixed(2), infer_matmul, kernel_matmul, GPU_FLOATS, Some(grad_matmul))
            .launched_as(GpuLaunch::CuBlas)
            .with_attrs(attrs!["transpose_a" => Bool, "transpose_b" => Bool]),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The product by its definition (small integers: exact in any summation order).
    fn naive(a: &ArrayView2<f64>, b: &ArrayView2<f64>) -> Array2<f64> {
        Array2::from_shape_fn((a.nrows(), b.ncols()), |(i, j)| (0..a.ncols()).map(|p| a[[i, p]] * b[[p, j]]).sum())
    }

    #[test]
    fn products_keep_column_major_order_only_when_both_operands_have_it() {
        // The same values in column-major memory.
        let fortran = |x: &Array2<f64>| x.t().as_standard_layout().reversed_axes().to_owned();
        let rm = Array2::from_shape_fn((70, 90), |(i, j)| ((i * 7 + j * 3) % 11) as f64 - 5.0);
        let rm2 = Array2::from_shape_fn((90, 70), |(i, j)| ((i * 5 + j) % 7) as f64 - 3.0);
        let (cm, cm2) = (fortran(&rm), fortran(&rm2));
        assert!(cm.t().is_standard_layout() && !cm.is_standard_layout());
        let row = Array2::from_shape_fn((1, 90), |(_, j)| (j % 5) as f64);
        // (a, b, column-major output expected)
        let cases: Vec<(ArrayView2<f64>, ArrayView2<f64>, bool)> = vec![
            (rm.view(), rm2.view(), false),
            (cm.view(), cm2.view(), true),
            (cm.view(), rm2.view(), false),
            (rm.view(), cm2.view(), false),
            (row.view(), cm2.view(), true),
            (rm2.t(), rm.t(), true),
            (cm2.t(), cm.t(), false),
        ];
        let backends: Vec<Option<&super::super::blas::Blas>> = match super::super::blas::blas() {
            Some(lib) => vec![None, Some(lib)],
            None => {
                println!("OpenBLAS not installed: only the gemm crate's path is checked");
                vec![None]
            }
        };
        for (i, (a, b, col)) in cases.iter().enumerate() {
            assert_eq!(column_major_output(a, b), *col, "case {i}");
            let want = naive(a, b);
            for &lib in &backends {
                let got = gemm_product(lib, a.view(), b.view(), 0.0, 1.0, None);
                assert_eq!(got, want, "case {i}, blas {}", lib.is_some());
                let is_col = got.t().is_standard_layout() && !got.is_standard_layout();
                assert_eq!(is_col, *col && got.nrows() > 1, "case {i}: memory order, blas {}", lib.is_some());
                let got32 = gemm_product(lib, a.mapv(|v| v as f32).view(), b.mapv(|v| v as f32).view(), 0.0, 1.0, None);
                assert_eq!(got32.mapv(f64::from), want, "case {i} f32, blas {}", lib.is_some());
            }
        }
    }
}
