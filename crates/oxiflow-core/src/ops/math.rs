//! Elementwise math: `Add`, `Sub`, `Mul`, `RealDiv`, `Neg`, `Square`, `Pow`, `Sin`, `Cos`,
//! `Exp`, `Log`, `Tanh`, `Sqrt`, `AddN`, `SelectV2`, `Floor`, `FloorDiv`,
//! `FloorMod` (TF's `math_ops` / `gen_math_ops`, gradients as in `math_grad.py`). `MatMul`
//! lives in `matmul.rs`.
//!
//! Binary ops broadcast NumPy-style; their gradients are summed back to each operand's
//! static shape with [`sum_to_shape`]. Float ops take `Float32`/`Float64`; `Add`, `Sub`,
//! `Mul`, `Neg`, `Square`, `Pow`, `AddN`, `FloorDiv`, `FloorMod` also take
//! `Int32`/`Int64` (wrapping arithmetic, as TF's CPU kernels; an integer division by zero is
//! an error). Gradients are built only from differentiable ops.

use super::complex::{infer_binary_arith, infer_binary_div, infer_unary_arith, infer_unary_float_or_complex, map_complex, require_arith, zip_complex};
use super::grad_util::{need_dy, scalar_of, to_input_shape, y0};
use super::vmath;
pub(crate) use super::zip::{broadcast_view, zip2, zip2_par};
use super::*;
use crate::tensor::Element;
use ndarray::{ArcArray, IxDyn, ShapeBuilder, Zip};

/// Arithmetic of the numeric element types: IEEE for floats, two's-complement wrapping for
/// ints (TF's CPU kernels wrap too).
pub(crate) trait Arith: Element + PartialOrd {
    fn add(a: Self, b: Self) -> Self;
    fn sub(a: Self, b: Self) -> Self;
    fn mul(a: Self, b: Self) -> Self;
    fn neg(a: Self) -> Self;
    /// `a^b`; `None` for an int raised to a negative power.
    fn pow(a: Self, b: Self) -> Option<Self>;
}

macro_rules! arith_float {
    ($t:ty) => {
        impl Arith for $t {
            fn add(a: Self, b: Self) -> Self {
                a + b
            }
            fn sub(a: Self, b: Self) -> Self {
                a - b
            }
            fn mul(a: Self, b: Self) -> Self {
                a * b
            }
            fn neg(a: Self) -> Self {
                -a
            }
            /// [`super::pow::pow_float`]: `a^2` as `a * a`, `a^0.5` by `sqrt` and the other
            /// exponents Grappler rewrites (and 3) by their cheaper forms, with `pow`'s
            /// values (`a^0 = 1` for every `a`, NaN included: C99 F.9.4.4); other exponents
            /// by libm's `pow`.
            fn pow(a: Self, b: Self) -> Option<Self> {
                Some(super::pow::pow_float(a, b))
            }
        }
    };
}
macro_rules! arith_int {
    ($t:ty) => {
        impl Arith for $t {
            fn add(a: Self, b: Self) -> Self {
                a.wrapping_add(b)
            }
            fn sub(a: Self, b: Self) -> Self {
                a.wrapping_sub(b)
            }
            fn mul(a: Self, b: Self) -> Self {
                a.wrapping_mul(b)
            }
            fn neg(a: Self) -> Self {
                a.wrapping_neg()
            }
            fn pow(a: Self, b: Self) -> Option<Self> {
                if b < 0 {
                    None
                } else {
                    Some(a.wrapping_pow(u32::try_from(b).unwrap_or(u32::MAX)))
                }
            }
        }
    };
}
arith_float!(f32);
arith_float!(f64);
arith_int!(i32);
arith_int!(i64);

/// Division rounded toward negative infinity and its remainder (TF's `FloorDiv` and
/// `FloorMod` functors in `cwise_ops.h`: `google_floor_div`, `google_floor_div_real`,
/// `google_floor_mod`, `google_floor_fmod`). The remainder has the divisor's sign (Python's
/// `%`): `floor_mod(-7, 3) = 2`, `floor_mod(7, -3) = -2`. `None` for an integer divided by
/// zero; a float divided by zero follows IEEE (`inf`, `NaN`).
pub(crate) trait FloorArith: Arith {
    fn floor_div(a: Self, b: Self) -> Option<Self>;
    fn floor_mod(a: Self, b: Self) -> Option<Self>;
}

macro_rules! floor_float {
    ($t:ty) => {
        impl FloorArith for $t {
            /// `floor(a / b)`, as TF's `google_floor_div_real`.
            fn floor_div(a: Self, b: Self) -> Option<Self> {
                Some((a / b).floor())
            }
            /// The truncated remainder `fmod(a, b)` (Rust's `%` on floats), moved by `b`
            /// when it is nonzero and its sign differs from `b`'s (TF's `google_floor_fmod`).
            fn floor_mod(a: Self, b: Self) -> Option<Self> {
                let r = a % b;
                Some(if r != 0.0 && ((r < 0.0) != (b < 0.0)) { r + b } else { r })
            }
        }
    };
}
macro_rules! floor_int {
    ($t:ty) => {
        impl FloorArith for $t {
            /// Truncated quotient, one lower when the remainder is nonzero and the operands'
            /// signs differ. `MIN / -1` wraps to `MIN`.
            fn floor_div(a: Self, b: Self) -> Option<Self> {
                if b == 0 {
                    return None;
                }
                let (q, r) = (a.wrapping_div(b), a.wrapping_rem(b));
                Some(if r != 0 && ((r < 0) != (b < 0)) { q.wrapping_sub(1) } else { q })
            }
            /// Truncated remainder, plus `b` when nonzero and of the other sign than `b`.
            fn floor_mod(a: Self, b: Self) -> Option<Self> {
                if b == 0 {
                    return None;
                }
                let r = a.wrapping_rem(b);
                Some(if r != 0 && ((r < 0) != (b < 0)) { r.wrapping_add(b) } else { r })
            }
        }
    };
}
floor_float!(f32);
floor_float!(f64);
floor_int!(i32);
floor_int!(i64);

/// The error of a kernel given input dtypes it has no code for: the node (through
/// `KernelCtx::error`) and the dtypes, `no kernel for dtypes (ComplexF64, ComplexF64)`.
pub(crate) fn no_kernel(ctx: &KernelCtx) -> OxiflowError {
    let types: Vec<String> = ctx.inputs.iter().map(|t| t.dtype().to_string()).collect();
    ctx.error(format!("no kernel for dtypes ({})", types.join(", ")))
}

/// Applies one of the vectorized functions of [`vmath`] elementwise (SIMD, sharded over the
/// intra-op threads for large tensors), whatever the input's layout. `f32f` / `f64f` are
/// the scalar fallbacks for dtypes the fast path does not take.
pub(crate) fn map_vfun<F32: Fn(f32) -> f32 + Sync, F64: Fn(f64) -> f64 + Sync>(ctx: &KernelCtx, fun: vmath::Fun, f32f: F32, f64f: F64) -> Result<Outputs> {
    // Row-major and column-major (a feed from Julia) map in memory order and keep their
    // layout; other views are copied to row-major first, so the same
    // SIMD function computes every element whatever the layout.
    fn go<T: vmath::VFloat + Element>(a: &ArcArray<T, IxDyn>, fun: vmath::Fun) -> Option<Tensor> {
        if let Some(src) = a.as_slice() {
            return ArcArray::from_shape_vec(a.raw_dim(), vmath::map_vec(fun, src)).ok().map(T::wrap);
        }
        if let Some(src) = a.t().to_slice() {
            return ArcArray::from_shape_vec(a.raw_dim().f(), vmath::map_vec(fun, src)).ok().map(T::wrap);
        }
        let std = a.as_standard_layout();
        let v = vmath::map_vec(fun, std.as_slice()?);
        ArcArray::from_shape_vec(a.raw_dim(), v).ok().map(T::wrap)
    }
    // Scalars take the same vectorized function (a value's result never depends on the
    // shape it comes in) and the executor's spare buffer.
    fn one<T: vmath::VFloat>(fun: vmath::Fun, x: T) -> T {
        let mut y = [x];
        T::run(fun, &[x], &mut y);
        y[0]
    }
    match &ctx.inputs[0] {
        Tensor::F64(a) if a.ndim() == 0 => {
            if let Some(&x) = a.first() {
                return Ok(ctx.scalar_output(one(fun, x)));
            }
        }
        Tensor::F32(a) if a.ndim() == 0 => {
            if let Some(&x) = a.first() {
                return Ok(ctx.scalar_output(one(fun, x)));
            }
        }
        _ => {}
    }
    let fast = match &ctx.inputs[0] {
        Tensor::F32(a) => go(a, fun),
        Tensor::F64(a) => go(a, fun),
        _ => None,
    };
    match fast {
        Some(t) => Ok(smallvec![t]),
        None => map_float(ctx, f32f, f64f),
    }
}

/// Elements below which [`map_elems`] stays on its own thread: the hand-off to the pool
/// costs a few microseconds, what 32k elements of a cheap map (`Abs`, `Neg`) take.
const MAP_SHARD_MIN: usize = 1 << 15;

/// `f` of every element of `src`, in a new vector (written once, never zeroed first),
/// sharded over the intra-op threads, the calling one included, from [`MAP_SHARD_MIN`]
/// elements on.
fn map_slice<T: Copy + Sync, U: Send, F: Fn(T) -> U + Sync>(src: &[T], f: &F) -> Vec<U> {
    let n = src.len();
    let mut out: Vec<U> = crate::strided::buffer_for(n);
    crate::intra_op::shard_into(src, &mut out.spare_capacity_mut()[..n], MAP_SHARD_MIN, |s, d| {
        for (d, &x) in d.iter_mut().zip(s) {
            d.write(f(x));
        }
    });
    // SAFETY: every one of the first n elements was written above.
    unsafe { out.set_len(n) };
    out
}

/// `f` of every element of `a`, same shape. A row- or column-major `a` (a Julia array) is
/// mapped in memory order and the result keeps that order, so a fetch hands it over without
/// a transposing copy; other views are mapped in logical order into a row-major result.
/// `f` is a generic parameter, so each op's function is inlined into the loop (through a
/// `fn` pointer, `Abs` of 1M f32 took 1.7 ms; NumPy 0.1 ms).
pub(crate) fn map_elems<T: Element, U: Element, F: Fn(T) -> U + Sync>(a: &ArcArray<T, IxDyn>, f: F) -> ArcArray<U, IxDyn> {
    if let Some(src) = a.as_slice() {
        return ArcArray::from_shape_vec(a.raw_dim(), map_slice(src, &f)).expect("one output element per input");
    }
    if let Some(src) = a.t().to_slice() {
        return ArcArray::from_shape_vec(a.raw_dim().f(), map_slice(src, &f)).expect("one output element per input");
    }
    a.map(|&x| f(x)).into_shared()
}

/// Applies a float unary function elementwise ([`map_elems`]; a scalar reuses the
/// executor's spare buffer).
pub(crate) fn map_float<F32: Fn(f32) -> f32 + Sync, F64: Fn(f64) -> f64 + Sync>(ctx: &KernelCtx, f32f: F32, f64f: F64) -> Result<Outputs> {
    // Scalar fast path: no ndarray map, and the output reuses the executor's spare buffer.
    match &ctx.inputs[0] {
        Tensor::F64(a) if a.ndim() == 0 => {
            if let Some(&x) = a.first() {
                return Ok(ctx.scalar_output(f64f(x)));
            }
        }
        Tensor::F32(a) if a.ndim() == 0 => {
            if let Some(&x) = a.first() {
                return Ok(ctx.scalar_output(f32f(x)));
            }
        }
        _ => {}
    }
    Ok(smallvec![match &ctx.inputs[0] {
        Tensor::F32(a) => Tensor::F32(map_elems(a, f32f)),
        Tensor::F64(a) => Tensor::F64(map_elems(a, f64f)),
        _ => return Err(no_kernel(ctx)),
    }])
}

/// Applies the generic numeric function `$f::<T>` elementwise to input 0 ([`map_elems`]).
macro_rules! map_numeric {
    ($ctx:expr, $f:ident) => {
        Ok(smallvec![match &$ctx.inputs[0] {
            Tensor::F32(a) => Tensor::F32(map_elems(a, $f::<f32>)),
            Tensor::F64(a) => Tensor::F64(map_elems(a, $f::<f64>)),
            Tensor::I32(a) => Tensor::I32(map_elems(a, $f::<i32>)),
            Tensor::I64(a) => Tensor::I64(map_elems(a, $f::<i64>)),
            _ => return Err(no_kernel($ctx)),
        }])
    };
}

/// Broadcasting binary map of the generic numeric function `$f::<T>` over inputs 0 and 1;
/// `$wrap` selects which variants are accepted (`float` or `numeric`).
macro_rules! zip_numeric {
    ($ctx:expr, $f:ident, numeric) => {
        Ok(smallvec![match (&$ctx.inputs[0], &$ctx.inputs[1]) {
            (Tensor::F32(a), Tensor::F32(b)) => Tensor::F32(zip2_par($ctx, a, b, $f::<f32>)?),
            (Tensor::F64(a), Tensor::F64(b)) => Tensor::F64(zip2_par($ctx, a, b, $f::<f64>)?),
            (Tensor::I32(a), Tensor::I32(b)) => Tensor::I32(zip2_par($ctx, a, b, $f::<i32>)?),
            (Tensor::I64(a), Tensor::I64(b)) => Tensor::I64(zip2_par($ctx, a, b, $f::<i64>)?),
            _ => return Err(no_kernel($ctx)),
        }])
    };
    ($ctx:expr, $f:expr, float) => {
        Ok(smallvec![match (&$ctx.inputs[0], &$ctx.inputs[1]) {
            (Tensor::F32(a), Tensor::F32(b)) => Tensor::F32(zip2_par($ctx, a, b, $f)?),
            (Tensor::F64(a), Tensor::F64(b)) => Tensor::F64(zip2_par($ctx, a, b, $f)?),
            _ => return Err(no_kernel($ctx)),
        }])
    };
}

// ---------------------------------------------------------------- shape functions

/// Errors unless `d` is a real numeric dtype (not Bool, not complex).
pub(crate) fn require_numeric(ctx: &InferCtx, d: DType) -> Result<()> {
    if d == DType::Bool || d.is_complex() {
        Err(ctx.invalid(format!("needs a real numeric operand (Float32, Float64, Int32, Int64), got {d}")))
    } else {
        Ok(())
    }
}

/// Shape function of unary ops on any numeric dtype (not Bool): output = input.
pub(crate) fn infer_unary_numeric(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    require_numeric(ctx, ctx.inputs[0].dtype)?;
    infer_same(ctx)
}

/// Shape function of broadcasting binary ops on a numeric dtype (not Bool).
pub(crate) fn infer_binary_numeric(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let out = infer_binary_broadcast(ctx)?;
    require_numeric(ctx, out[0].dtype)?;
    Ok(out)
}

/// Shape function of broadcasting binary ops on Float32/Float64 (`RealDiv`, `Polygamma`).
pub(crate) fn infer_binary_float(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let out = infer_binary_broadcast(ctx)?;
    ctx.require_float(out[0].dtype)?;
    Ok(out)
}

/// `SelectV2(cond, x, y)`: `cond` Bool, `x` and `y` one dtype, all three broadcast together.
fn infer_select(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let (c, x, y) = (&ctx.inputs[0], &ctx.inputs[1], &ctx.inputs[2]);
    if c.dtype != DType::Bool {
        return Err(ctx.dtype_error(DType::Bool, c.dtype, " (the condition of SelectV2)"));
    }
    if x.dtype != y.dtype {
        return Err(ctx.dtype_error(x.dtype, y.dtype, " (both branches must have the same dtype)"));
    }
    let xy = Shape::broadcast(&x.shape, &y.shape).ok_or_else(|| ctx.shape_error(&x.shape, &y.shape, " (branches not broadcastable)"))?;
    let shape = Shape::broadcast(&c.shape, &xy).ok_or_else(|| ctx.shape_error(&c.shape, &xy, " (condition not broadcastable with the branches)"))?;
    Ok(vec![TensorType::new(x.dtype, shape)])
}

/// `AddN(x_1, ..., x_n)`: every input of one numeric dtype and one shape.
fn infer_addn(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let first = &ctx.inputs[0];
    require_arith(ctx, first.dtype)?;
    let mut shape = first.shape.clone();
    for (i, t) in ctx.inputs.iter().enumerate().skip(1) {
        if t.dtype != first.dtype {
            return Err(ctx.dtype_error(first.dtype, t.dtype, format!(" (input {i}; AddN inputs must share a dtype)")));
        }
        // unknown dimensions merge with known ones (TF's `merge_with`)
        shape = shape.merge(&t.shape).ok_or_else(|| ctx.shape_error(&first.shape, &t.shape, format!(" (input {i}; AddN inputs must share a shape)")))?;
    }
    Ok(vec![TensorType::new(first.dtype, shape)])
}

// ---------------------------------------------------------------- kernels

fn add<T: Arith>(a: T, b: T) -> T {
    T::add(a, b)
}
fn sub<T: Arith>(a: T, b: T) -> T {
    T::sub(a, b)
}
fn mul<T: Arith>(a: T, b: T) -> T {
    T::mul(a, b)
}
fn neg<T: Arith>(a: T) -> T {
    T::neg(a)
}
fn square<T: Arith>(a: T) -> T {
    T::mul(a, a)
}

fn kernel_add(ctx: &KernelCtx) -> Result<Outputs> {
    if let Some(r) = zip_complex!(ctx, |x, y| x + y) {
        return r;
    }
    zip_numeric!(ctx, add, numeric)
}
fn kernel_sub(ctx: &KernelCtx) -> Result<Outputs> {
    if let Some(r) = zip_complex!(ctx, |x, y| x - y) {
        return r;
    }
    zip_numeric!(ctx, sub, numeric)
}
fn kernel_mul(ctx: &KernelCtx) -> Result<Outputs> {
    if let Some(r) = zip_complex!(ctx, |x, y| x * y) {
        return r;
    }
    zip_numeric!(ctx, mul, numeric)
}
fn kernel_realdiv(ctx: &KernelCtx) -> Result<Outputs> {
    if let Some(r) = zip_complex!(ctx, |x, y| x / y) {
        return r;
    }
    zip_numeric!(ctx, |a, b| a / b, float)
}
fn kernel_neg(ctx: &KernelCtx) -> Result<Outputs> {
    if let Some(r) = map_complex!(ctx, |x| -x) {
        return r;
    }
    map_numeric!(ctx, neg)
}
fn kernel_square(ctx: &KernelCtx) -> Result<Outputs> {
    map_numeric!(ctx, square)
}

/// `Pow`: `powf` for floats; ints to a negative power are an error (TF's text).
fn kernel_pow(ctx: &KernelCtx) -> Result<Outputs> {
    fn go<T: Arith>(ctx: &KernelCtx, a: &ArcArray<T, IxDyn>, b: &ArcArray<T, IxDyn>) -> Result<ArcArray<T, IxDyn>> {
        let mut bad = false;
        let out = zip2(ctx, a, b, |x, y| {
            T::pow(x, y).unwrap_or_else(|| {
                bad = true;
                x
            })
        })?;
        if bad {
            return Err(ctx.error("Integers to negative integer powers are not allowed"));
        }
        Ok(out)
    }
    Ok(smallvec![match (&ctx.inputs[0], &ctx.inputs[1]) {
        // floats never fail
        (Tensor::F32(a), Tensor::F32(b)) => Tensor::F32(pow_floats(ctx, a, b)?),
        (Tensor::F64(a), Tensor::F64(b)) => Tensor::F64(pow_floats(ctx, a, b)?),
        (Tensor::I32(a), Tensor::I32(b)) => Tensor::I32(go(ctx, a, b)?),
        (Tensor::I64(a), Tensor::I64(b)) => Tensor::I64(go(ctx, a, b)?),
        _ => return Err(no_kernel(ctx)),
    }])
}

/// Float `a^b`, sharded over the intra-op threads with the element function of fused
/// programs ([`super::pow::pow_float`]); by one exponent, as a fused program maps it
/// ([`super::pow::map_by_exponent`]).
fn pow_floats<T: super::pow::PowFloat>(ctx: &KernelCtx, a: &ArcArray<T, IxDyn>, b: &ArcArray<T, IxDyn>) -> Result<ArcArray<T, IxDyn>> {
    use super::pow::{map_by_exponent, MapBase, PowFloat};
    struct Sharded<'a, T> {
        ctx: &'a KernelCtx<'a>,
        a: &'a ArcArray<T, IxDyn>,
        b: &'a ArcArray<T, IxDyn>,
    }
    impl<T: PowFloat> MapBase<T> for Sharded<'_, T> {
        type Out = Result<ArcArray<T, IxDyn>>;
        fn map(self, f: impl Fn(T) -> T + Copy + Sync) -> Self::Out {
            zip2_par(self.ctx, self.a, self.b, move |x, _| f(x))
        }
    }
    match b.iter().next() {
        Some(&e) if b.len() == 1 => map_by_exponent(e, Sharded { ctx, a, b }),
        _ => zip2_par(ctx, a, b, super::pow::pow_float::<T>),
    }
}

fn kernel_select(ctx: &KernelCtx) -> Result<Outputs> {
    fn go<T: Element>(ctx: &KernelCtx, c: &ArcArray<bool, IxDyn>, x: &ArcArray<T, IxDyn>, y: &ArcArray<T, IxDyn>) -> Result<Tensor> {
        let dims = ctx.node.outputs[0].shape.dims();
        if let Some(out) = super::zip::select_in_order(c, x, y, dims) {
            return Ok(T::wrap(out));
        }
        let (cv, xv, yv) = (broadcast_view(ctx, c, dims)?, broadcast_view(ctx, x, dims)?, broadcast_view(ctx, y, dims)?);
        Ok(T::wrap(Zip::from(&cv).and(&xv).and(&yv).map_collect(|&c, &x, &y| if c { x } else { y }).into_shared()))
    }
    let Tensor::Bool(c) = &ctx.inputs[0] else { return Err(no_kernel(ctx)) };
    Ok(smallvec![match (&ctx.inputs[1], &ctx.inputs[2]) {
        (Tensor::F32(x), Tensor::F32(y)) => go(ctx, c, x, y)?,
        (Tensor::F64(x), Tensor::F64(y)) => go(ctx, c, x, y)?,
        (Tensor::I32(x), Tensor::I32(y)) => go(ctx, c, x, y)?,
        (Tensor::I64(x), Tensor::I64(y)) => go(ctx, c, x, y)?,
        (Tensor::Bool(x), Tensor::Bool(y)) => go(ctx, c, x, y)?,
        _ => return Err(no_kernel(ctx)),
    }])
}

fn kernel_addn(ctx: &KernelCtx) -> Result<Outputs> {
    fn go<T: Element>(ctx: &KernelCtx, add: impl Fn(T, T) -> T + Sync + Copy) -> Result<Tensor> {
        let xs = ctx.inputs.iter().map(|t| t.array::<T>()).collect::<Result<Vec<_>>>()?;
        if xs.len() == 1 {
            return Ok(T::wrap(xs[0].to_owned().into_shared()));
        }
        let dims = ctx.node.outputs[0].shape.dims();
        if let Some(out) = super::zip::sum_in_order(&xs, dims, add) {
            return Ok(T::wrap(out));
        }
        // inputs in different memory orders: pairwise, left to right (the same sums)
        let mut acc = zip2_par(ctx, xs[0], xs[1], add)?;
        for x in &xs[2..] {
            acc = zip2_par(ctx, &acc, x, add)?;
        }
        Ok(T::wrap(acc))
    }
    use crate::tensor::Complex;
    Ok(smallvec![match ctx.inputs[0].dtype() {
        DType::Float32 => go::<f32>(ctx, <f32 as Arith>::add)?,
        DType::Float64 => go::<f64>(ctx, <f64 as Arith>::add)?,
        DType::Int32 => go::<i32>(ctx, <i32 as Arith>::add)?,
        DType::Int64 => go::<i64>(ctx, <i64 as Arith>::add)?,
        DType::Complex64 => go::<Complex<f32>>(ctx, |a, b| a + b)?,
        DType::Complex128 => go::<Complex<f64>>(ctx, |a, b| a + b)?,
        DType::Bool => return Err(no_kernel(ctx)),
    }])
}

fn kernel_floor(ctx: &KernelCtx) -> Result<Outputs> {
    map_float(ctx, f32::floor, f64::floor)
}

/// `FloorDiv` (`modulo == false`) or `FloorMod`, broadcasting; TF's error for an integer
/// division by zero ("Integer division by zero"), naming the op and the node.
fn floor_binary(ctx: &KernelCtx, modulo: bool) -> Result<Outputs> {
    fn go<T: FloorArith>(ctx: &KernelCtx, a: &ArcArray<T, IxDyn>, b: &ArcArray<T, IxDyn>, modulo: bool) -> Result<ArcArray<T, IxDyn>> {
        let mut by_zero = false;
        let out = zip2(ctx, a, b, |x, y| {
            let r = if modulo { T::floor_mod(x, y) } else { T::floor_div(x, y) };
            r.unwrap_or_else(|| {
                by_zero = true;
                x
            })
        })?;
        if by_zero {
            return Err(ctx.error(format!("Integer division by zero (operands of shapes {} and {})", Shape(a.shape().to_vec()), Shape(b.shape().to_vec()))));
        }
        Ok(out)
    }
    Ok(smallvec![match (&ctx.inputs[0], &ctx.inputs[1]) {
        (Tensor::F32(a), Tensor::F32(b)) => Tensor::F32(go(ctx, a, b, modulo)?),
        (Tensor::F64(a), Tensor::F64(b)) => Tensor::F64(go(ctx, a, b, modulo)?),
        (Tensor::I32(a), Tensor::I32(b)) => Tensor::I32(go(ctx, a, b, modulo)?),
        (Tensor::I64(a), Tensor::I64(b)) => Tensor::I64(go(ctx, a, b, modulo)?),
        _ => return Err(no_kernel(ctx)),
    }])
}
fn kernel_floor_div(ctx: &KernelCtx) -> Result<Outputs> {
    floor_binary(ctx, false)
}
fn kernel_floor_mod(ctx: &KernelCtx) -> Result<Outputs> {
    floor_binary(ctx, true)
}

fn kernel_sin(ctx: &KernelCtx) -> Result<Outputs> {
    map_vfun(ctx, vmath::Fun::Sin, f32::sin, f64::sin)
}
fn kernel_cos(ctx: &KernelCtx) -> Result<Outputs> {
    map_vfun(ctx, vmath::Fun::Cos, f32::cos, f64::cos)
}
fn kernel_exp(ctx: &KernelCtx) -> Result<Outputs> {
    if let Some(r) = map_complex!(ctx, |x| x.exp()) {
        return r;
    }
    map_vfun(ctx, vmath::Fun::Exp, f32::exp, f64::exp)
}
fn kernel_log(ctx: &KernelCtx) -> Result<Outputs> {
    map_vfun(ctx, vmath::Fun::Log, f32::ln, f64::ln)
}
fn kernel_tanh(ctx: &KernelCtx) -> Result<Outputs> {
    map_vfun(ctx, vmath::Fun::Tanh, f32::tanh, f64::tanh)
}
fn kernel_sqrt(ctx: &KernelCtx) -> Result<Outputs> {
    map_vfun(ctx, vmath::Fun::Sqrt, f32::sqrt, f64::sqrt)
}

// ---------------------------------------------------------------- gradients

/// TF `_AddGrad`: `dy` summed to each operand's shape.
fn grad_add(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 2);
    Ok(vec![Some(to_input_shape(g, node, dy, 0)?), Some(to_input_shape(g, node, dy, 1)?)])
}

/// TF `_SubGrad`: `dy` and `-dy`, summed to each operand's shape.
fn grad_sub(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 2);
    let gx = to_input_shape(g, node, dy, 0)?;
    let gy = to_input_shape(g, node, dy, 1)?;
    Ok(vec![Some(gx), Some(g.op("Neg", &[gy])?)])
}

/// TF `_MulGrad`: `dy*y` and `x*dy`.
fn grad_mul(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 2);
    let (x, y) = conj_inputs(g, node)?;
    let gx = g.op("Mul", &[dy, y])?;
    let gx = to_input_shape(g, node, gx, 0)?;
    let gy = g.op("Mul", &[x, dy])?;
    Ok(vec![Some(gx), Some(to_input_shape(g, node, gy, 1)?)])
}

/// The two inputs of a binary node, conjugated when complex (TF's `_MulGrad` and
/// `_RealDivGrad` take the conjugates: the gradient of a complex product is the adjoint).
fn conj_inputs(g: &mut Graph, node: &Node) -> Result<(Output, Output)> {
    let (x, y) = (node.inputs[0], node.inputs[1]);
    if !g.dtype_of(x)?.is_complex() {
        return Ok((x, y));
    }
    Ok((g.op("Conj", &[x])?, g.op("Conj", &[y])?))
}

/// TF `_RealDivGrad`: `dy/y` and `dy * ((-x)/y)/y` (`x`, `y` conjugated when complex).
fn grad_realdiv(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 2);
    let (x, y) = conj_inputs(g, node)?;
    let gx = g.op("RealDiv", &[dy, y])?;
    let gx = to_input_shape(g, node, gx, 0)?;
    let nx = g.op("Neg", &[x])?;
    let q = g.op("RealDiv", &[nx, y])?;
    let q = g.op("RealDiv", &[q, y])?;
    let gy = g.op("Mul", &[dy, q])?;
    Ok(vec![Some(gx), Some(to_input_shape(g, node, gy, 1)?)])
}

/// TF `_PowGrad`: `dy * y * x^(y-1)`, and `dy * z * log(x)` where `x > 0`, else 0.
fn grad_pow(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 2);
    let (x, y, z) = (node.inputs[0], node.inputs[1], y0(node));
    let one = scalar_of(g, y, 1.0)?;
    let ym1 = g.op("Sub", &[y, one])?;
    let p = g.op("Pow", &[x, ym1])?;
    let t = g.op("Mul", &[dy, y])?;
    let gx = g.op("Mul", &[t, p])?;
    let gx = to_input_shape(g, node, gx, 0)?;
    let zero = scalar_of(g, x, 0.0)?;
    let mask = g.op("Greater", &[x, zero])?;
    let ones = g.op("OnesLike", &[x])?;
    let safe_x = g.op("SelectV2", &[mask, x, ones])?;
    let log_x = g.op("Log", &[safe_x])?;
    let zeros = g.op("ZerosLike", &[x])?;
    let log_x = g.op("SelectV2", &[mask, log_x, zeros])?;
    let t = g.op("Mul", &[dy, z])?;
    let gy = g.op("Mul", &[t, log_x])?;
    Ok(vec![Some(gx), Some(to_input_shape(g, node, gy, 1)?)])
}

/// TF `_SelectGradV2`: `dy` where `cond`, else 0, for `x`; the converse for `y`; no
/// gradient for the condition.
fn grad_select(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 3);
    let c = node.inputs[0];
    let zeros = g.op("ZerosLike", &[dy])?;
    let gx = g.op("SelectV2", &[c, dy, zeros])?;
    let gx = to_input_shape(g, node, gx, 1)?;
    let gy = g.op("SelectV2", &[c, zeros, dy])?;
    Ok(vec![None, Some(gx), Some(to_input_shape(g, node, gy, 2)?)])
}

/// TF `_AddNGrad`: every input gets `dy`.
fn grad_addn(_: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    Ok(vec![grads[0]; node.inputs.len()])
}

/// TF `_NegGrad`: `-dy`.
fn grad_neg(g: &mut Graph, _: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    Ok(vec![Some(g.op("Neg", &[dy])?)])
}

/// TF `_SquareGrad`: `dy * (x * 2)`.
fn grad_square(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let x = node.inputs[0];
    let two = scalar_of(g, x, 2.0)?;
    let t = g.op("Mul", &[x, two])?;
    Ok(vec![Some(g.op("Mul", &[dy, t])?)])
}

/// TF `_SinGrad`: `dy * cos(x)`.
fn grad_sin(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let c = g.op("Cos", &[node.inputs[0]])?;
    Ok(vec![Some(g.op("Mul", &[dy, c])?)])
}

/// TF `_CosGrad`: `-dy * sin(x)`.
fn grad_cos(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let n = g.op("Neg", &[dy])?;
    let s = g.op("Sin", &[node.inputs[0]])?;
    Ok(vec![Some(g.op("Mul", &[n, s])?)])
}

/// TF `_ExpGrad`: `dy * y`.
fn grad_exp(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let y = y0(node);
    // TF's `_ExpGrad` multiplies by `conj(y)` (the adjoint, for a complex `x`)
    let y = if g.dtype_of(y)?.is_complex() { g.op("Conj", &[y])? } else { y };
    Ok(vec![Some(g.op("Mul", &[dy, y])?)])
}

/// TF `_LogGrad`: `dy / x`.
fn grad_log(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    Ok(vec![Some(g.op("RealDiv", &[dy, node.inputs[0]])?)])
}

/// TF `_TanhGrad`: `TanhGrad(y, dy) = dy * (1 - y^2)` ([`super::activation_grad`]).
fn grad_tanh(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    Ok(vec![Some(g.op("TanhGrad", &[y0(node), dy])?)])
}

/// TF `_SqrtGrad` (`SqrtGrad` kernel, built from primitives): `dy * 0.5 / y`.
fn grad_sqrt(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let y = y0(node);
    let half = scalar_of(g, y, 0.5)?;
    let t = g.op("Mul", &[dy, half])?;
    Ok(vec![Some(g.op("RealDiv", &[t, y])?)])
}

/// TF `_FloorModGrad`: `z = x - floor(x/y) * y`, so `dz/dx = 1` and `dz/dy = -floor_div(x, y)`
/// (the floor is piecewise constant); each summed to its operand's shape. `FloorDiv` itself
/// passes no gradient, so the second derivative is zero, as in TF.
fn grad_floor_mod(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 2);
    let (x, y) = (node.inputs[0], node.inputs[1]);
    let gx = to_input_shape(g, node, dy, 0)?;
    let q = g.op("FloorDiv", &[x, y])?;
    let nq = g.op("Neg", &[q])?;
    let gy = g.op("Mul", &[dy, nq])?;
    Ok(vec![Some(gx), Some(to_input_shape(g, node, gy, 1)?)])
}

// ---------------------------------------------------------------- registration

/// A stateless op with no reference inputs; with a GPU kernel flag it is launched as
/// [`GpuLaunch::Own`] unless [`OpDef::launched_as`] says otherwise.
pub(crate) fn def(
    name: &'static str,
    default_name: &'static str,
    arity: Arity,
    infer: InferFn,
    kernel: KernelFn,
    gpu: GpuSupport,
    grad: Option<GradFn>,
) -> OpDef {
    let launch = if matches!(gpu, GpuSupport::None) { GpuLaunch::None } else { GpuLaunch::Own };
    OpDef {
        name,
        default_name,
        arity,
        ref_inputs: &[],
        infer,
        kernel,
        gpu,
        inputs: &[],
        attrs: &[],
        launch,
        grad: grad.into(),
        stateful: false,
        inexpensive: false,
        host_memory: &[],
    }
}

pub(crate) fn register(r: &mut Registry) {
    let binary_on =
        |name, default_name, infer, kernel, gpu, grad| def(name, default_name, Arity::Fixed(2), infer, kernel, gpu, grad).launched_as(GpuLaunch::Binary);
    let binary = |name, default_name, infer, kernel, grad| binary_on(name, default_name, infer, kernel, GPU_FLOATS, grad);
    r.add(binary_on("Add", "add", infer_binary_arith, kernel_add, GPU_FLOATS_INT64, Some(grad_add)).host_memory_for(HOST_INT32));
    r.add(binary_on("Sub", "sub", infer_binary_arith, kernel_sub, GPU_FLOATS_INT64, Some(grad_sub)).host_memory_for(HOST_INT32));
    r.add(binary_on("Mul", "mul", infer_binary_arith, kernel_mul, GPU_FLOATS_INT64, Some(grad_mul)).host_memory_for(HOST_INT32));
    r.add(binary("RealDiv", "truediv", infer_binary_div, kernel_realdiv, Some(grad_realdiv)));
    r.add(binary("Pow", "pow", infer_binary_numeric, kernel_pow, Some(grad_pow)));

    let unary = |name, infer, kernel, grad| def(name, name, Arity::Fixed(1), infer, kernel, GPU_FLOATS, Some(grad)).launched_as(GpuLaunch::Unary);
    r.add(unary("Neg", infer_unary_arith, kernel_neg, grad_neg).host_memory_for(HOST_INT32));
    r.add(unary("Square", infer_unary_numeric, kernel_square, grad_square).host_memory_for(HOST_INT32));
    r.add(unary("Sin", infer_unary_float, kernel_sin, grad_sin));
    r.add(unary("Cos", infer_unary_float, kernel_cos, grad_cos));
    r.add(unary("Exp", infer_unary_float_or_complex, kernel_exp, grad_exp));
    r.add(unary("Log", infer_unary_float, kernel_log, grad_log));
    r.add(unary("Tanh", infer_unary_float, kernel_tanh, grad_tanh));
    r.add(unary("Sqrt", infer_unary_float, kernel_sqrt, grad_sqrt));

    // TF registers `Floor`'s gradient as None and `FloorDiv` as not differentiable: both are
    // Gradient::NotDifferentiable (no gradient flows, and none is an error). GPU kernels for
    // floats only, as TF's.
    r.add(def("Floor", "Floor", Arity::Fixed(1), infer_unary_float, kernel_floor, GPU_FLOATS, None).not_differentiable().launched_as(GpuLaunch::Unary));
    r.add(binary("FloorDiv", "floordiv", infer_binary_numeric, kernel_floor_div, None).not_differentiable().host_memory_for(HOST_INT32));
    r.add(binary("FloorMod", "FloorMod", infer_binary_numeric, kernel_floor_mod, Some(grad_floor_mod)).host_memory_for(HOST_INT32));

    r.add(def("AddN", "AddN", Arity::AtLeast(1), infer_addn, kernel_addn, GPU_FLOATS, Some(grad_addn)));
    r.add(def("SelectV2", "SelectV2", Arity::Fixed(3), infer_select, kernel_select, GPU_FLOATS_BOOL, Some(grad_select)));
}
