//! Elementwise activations, comparisons and binary extrema: `Abs`, `Sign`, `Tan`, `Sigmoid`,
//! `Relu`, `Relu6`, `LeakyRelu`, `Elu`, `Selu`, `Softplus`, `Softsign`, `Softmax`, `Maximum`,
//! `Minimum`, `Greater`, `Less`, `LessEqual`, `GreaterEqual`, `Equal`, and the float tests
//! `IsNan`, `IsInf`, `IsFinite` (TF's `math_ops`, `nn_ops`; gradients as `math_grad.py` /
//! `nn_grad.py`).
//!
//! TF computes the gradients of the activations with fused kernels (`ReluGrad`,
//! `SigmoidGrad`, `EluGrad`, ...). `Relu`'s and `Sigmoid`'s (and `Tanh`'s) are those kernels
//! here too (`activation_grad.rs`); the others are the same formula built from
//! differentiable primitives (`SelectV2`, `Mul`, comparisons). Second derivatives work for
//! all.
//! Float ops take `Float32`/`Float64`; `Abs`, `Sign`, `Maximum`, `Minimum` and the
//! comparisons also take `Int32`/`Int64`.

use super::grad_util::{need_dy, scalar_of, to_input_shape, y0};
use super::math::{def, infer_binary_numeric, infer_unary_numeric, map_elems, map_float, map_vfun, zip2_par, Arith};
use super::reduce::reduce_sum;
use super::vmath;
use super::*;
use crate::graph::NodeSpec;
use crate::tensor::Element;
use ndarray::{ArcArray, IxDyn};

/// `SelectV2(cond, a, 0)`: `a` where `cond`, zero elsewhere.
fn where_else_zero(g: &mut Graph, cond: Output, a: Output) -> Result<Output> {
    let z = g.op("ZerosLike", &[a])?;
    g.op("SelectV2", &[cond, a, z])
}

/// `mul` of `dy` and a scalar constant.
fn scale(g: &mut Graph, dy: Output, v: f64) -> Result<Output> {
    let s = scalar_of(g, dy, v)?;
    g.op("Mul", &[dy, s])
}

// ---------------------------------------------------------------- shape functions

fn infer_compare(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let out = infer_binary_numeric(ctx)?;
    Ok(vec![TensorType::new(DType::Bool, out[0].shape.clone())])
}

/// `Softmax`: a float tensor of rank >= 1 (TF: "logits must have >= 1 dimension").
fn infer_softmax(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let x = &ctx.inputs[0];
    ctx.require_float(x.dtype)?;
    if x.shape.rank() == 0 {
        return Err(ctx.invalid(format!("logits must have >= 1 dimension, got shape {}", x.shape)));
    }
    Ok(vec![x.clone()])
}

// ---------------------------------------------------------------- kernels

/// Applies a generic numeric function to input 0 (floats and ints).
fn map_num<F32, F64, I32, I64>(ctx: &KernelCtx, f32f: F32, f64f: F64, i32f: I32, i64f: I64) -> Result<Outputs>
where
    F32: Fn(f32) -> f32 + Sync,
    F64: Fn(f64) -> f64 + Sync,
    I32: Fn(i32) -> i32 + Sync,
    I64: Fn(i64) -> i64 + Sync,
{
    Ok(smallvec![match &ctx.inputs[0] {
        Tensor::F32(a) => Tensor::F32(map_elems(a, f32f)),
        Tensor::F64(a) => Tensor::F64(map_elems(a, f64f)),
        Tensor::I32(a) => Tensor::I32(map_elems(a, i32f)),
        Tensor::I64(a) => Tensor::I64(map_elems(a, i64f)),
        t => return Err(ctx.error(format!("no kernel for dtype {}", t.dtype()))),
    }])
}

fn kernel_abs(ctx: &KernelCtx) -> Result<Outputs> {
    map_num(ctx, f32::abs, f64::abs, i32::wrapping_abs, i64::wrapping_abs)
}

/// TF's `Sign`: -1, 0 or 1 (0 for ±0; NaN stays NaN).
fn kernel_sign(ctx: &KernelCtx) -> Result<Outputs> {
    fn sf32(x: f32) -> f32 {
        sf64(x as f64) as f32
    }
    fn sf64(x: f64) -> f64 {
        if x.is_nan() {
            x
        } else if x == 0.0 {
            0.0
        } else {
            x.signum()
        }
    }
    map_num(ctx, sf32, sf64, i32::signum, i64::signum)
}

fn kernel_tan(ctx: &KernelCtx) -> Result<Outputs> {
    map_vfun(ctx, vmath::Fun::Tan, f32::tan, f64::tan)
}

fn sigmoid64(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}
fn sigmoid32(x: f32) -> f32 {
    sigmoid64(x as f64) as f32
}
fn kernel_sigmoid(ctx: &KernelCtx) -> Result<Outputs> {
    map_vfun(ctx, vmath::Fun::Sigmoid, sigmoid32, sigmoid64)
}

/// `Relu`: `max(x, 0)`; NaN stays NaN.
fn kernel_relu(ctx: &KernelCtx) -> Result<Outputs> {
    fn r32(x: f32) -> f32 {
        if x > 0.0 || x.is_nan() {
            x
        } else {
            0.0
        }
    }
    fn r64(x: f64) -> f64 {
        if x > 0.0 || x.is_nan() {
            x
        } else {
            0.0
        }
    }
    map_vfun(ctx, vmath::Fun::Relu, r32, r64)
}
fn kernel_relu6(ctx: &KernelCtx) -> Result<Outputs> {
    map_float(ctx, |x| x.clamp(0.0, 6.0), |x| x.clamp(0.0, 6.0))
}

/// `LeakyRelu`: `x` where `x > 0`, else `alpha * x` (attr `alpha`, default 0.2 as TF).
fn kernel_leaky_relu(ctx: &KernelCtx) -> Result<Outputs> {
    let alpha = leaky_alpha(&ctx.node.attrs);
    Ok(smallvec![match &ctx.inputs[0] {
        Tensor::F32(a) => Tensor::F32(map_elems(a, |x| if x > 0.0 { x } else { alpha as f32 * x })),
        Tensor::F64(a) => Tensor::F64(map_elems(a, |x| if x > 0.0 { x } else { alpha * x })),
        t => return Err(ctx.error(format!("no kernel for dtype {}", t.dtype()))),
    }])
}
fn leaky_alpha(attrs: &Attrs) -> f64 {
    attrs.get_float("LeakyRelu", "alpha").unwrap_or(0.2)
}

fn kernel_elu(ctx: &KernelCtx) -> Result<Outputs> {
    map_float(ctx, |x| if x > 0.0 { x } else { x.exp_m1() }, |x| if x > 0.0 { x } else { x.exp_m1() })
}

/// SELU constants (TF's `selu` kernel, Klambauer et al. 2017).
const SELU_ALPHA: f64 = 1.6732632423543772848170429916717;
const SELU_SCALE: f64 = 1.0507009873554804934193349852946;
fn selu64(x: f64) -> f64 {
    if x > 0.0 {
        SELU_SCALE * x
    } else {
        SELU_SCALE * SELU_ALPHA * x.exp_m1()
    }
}
fn kernel_selu(ctx: &KernelCtx) -> Result<Outputs> {
    map_float(ctx, |x| selu64(x as f64) as f32, selu64)
}

/// `log(1 + exp(x))`, computed without overflow.
fn softplus64(x: f64) -> f64 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}
fn kernel_softplus(ctx: &KernelCtx) -> Result<Outputs> {
    map_float(ctx, |x| softplus64(x as f64) as f32, softplus64)
}
fn kernel_softsign(ctx: &KernelCtx) -> Result<Outputs> {
    map_float(ctx, |x| x / (1.0 + x.abs()), |x| x / (1.0 + x.abs()))
}

/// Broadcasting binary over any numeric dtype with a generic function.
macro_rules! zip_num {
    ($ctx:expr, $f:ident, $wrap:ident) => {
        Ok(smallvec![match (&$ctx.inputs[0], &$ctx.inputs[1]) {
            (Tensor::F32(a), Tensor::F32(b)) => $wrap(zip2_par($ctx, a, b, $f::<f32>)?),
            (Tensor::F64(a), Tensor::F64(b)) => $wrap(zip2_par($ctx, a, b, $f::<f64>)?),
            (Tensor::I32(a), Tensor::I32(b)) => $wrap(zip2_par($ctx, a, b, $f::<i32>)?),
            (Tensor::I64(a), Tensor::I64(b)) => $wrap(zip2_par($ctx, a, b, $f::<i64>)?),
            (a, b) => return Err($ctx.error(format!("no kernel for dtypes {} and {}", a.dtype(), b.dtype()))),
        }])
    };
}

fn wrap_same<T: Element>(a: ArcArray<T, IxDyn>) -> Tensor {
    T::wrap(a)
}
fn wrap_bool(a: ArcArray<bool, IxDyn>) -> Tensor {
    Tensor::Bool(a)
}

/// TF's `Maximum`/`Minimum` propagate NaN (`a > b || isnan(a)` picks `a`).
/// `Maximum`'s element function: `a` when it is NaN (NaN propagates from either side, as
/// TF's CPU kernel); also used by fused programs.
pub(crate) fn maximum<T: Arith>(a: T, b: T) -> T {
    #[allow(clippy::eq_op)]
    let a_nan = a != a;
    if a > b || a_nan {
        a
    } else {
        b
    }
}
/// `Minimum`'s element function (NaN as in [`maximum`]).
pub(crate) fn minimum<T: Arith>(a: T, b: T) -> T {
    #[allow(clippy::eq_op)]
    let a_nan = a != a;
    if a < b || a_nan {
        a
    } else {
        b
    }
}
fn less<T: Arith>(a: T, b: T) -> bool {
    a < b
}
fn greater<T: Arith>(a: T, b: T) -> bool {
    a > b
}
fn less_equal<T: Arith>(a: T, b: T) -> bool {
    a <= b
}
fn greater_equal<T: Arith>(a: T, b: T) -> bool {
    a >= b
}
fn equal<T: Arith>(a: T, b: T) -> bool {
    a == b
}

fn kernel_maximum(ctx: &KernelCtx) -> Result<Outputs> {
    zip_num!(ctx, maximum, wrap_same)
}
fn kernel_minimum(ctx: &KernelCtx) -> Result<Outputs> {
    zip_num!(ctx, minimum, wrap_same)
}
fn kernel_less(ctx: &KernelCtx) -> Result<Outputs> {
    zip_num!(ctx, less, wrap_bool)
}
fn kernel_greater(ctx: &KernelCtx) -> Result<Outputs> {
    zip_num!(ctx, greater, wrap_bool)
}
fn kernel_less_equal(ctx: &KernelCtx) -> Result<Outputs> {
    zip_num!(ctx, less_equal, wrap_bool)
}
fn kernel_greater_equal(ctx: &KernelCtx) -> Result<Outputs> {
    zip_num!(ctx, greater_equal, wrap_bool)
}
fn kernel_equal(ctx: &KernelCtx) -> Result<Outputs> {
    zip_num!(ctx, equal, wrap_bool)
}

/// `IsNan`, `IsInf`, `IsFinite`: a float tensor to the Bool tensor of its shape.
fn infer_float_test(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let x = &ctx.inputs[0];
    ctx.require_float(x.dtype)?;
    Ok(vec![TensorType::new(DType::Bool, x.shape.clone())])
}

/// TF's `IsNan`, `IsInf` (either sign) and `IsFinite` (neither NaN nor infinite), element by
/// element (`tf.math.is_nan`, `is_inf`, `is_finite`). No gradient: their outputs are Bool.
fn kernel_float_test(ctx: &KernelCtx) -> Result<Outputs> {
    let test: fn(f64) -> bool = match ctx.node.op.name {
        "IsNan" => f64::is_nan,
        "IsInf" => f64::is_infinite,
        _ => f64::is_finite,
    };
    // f32 to f64 keeps NaN, infinities and finiteness
    let out = match &ctx.inputs[0] {
        Tensor::F32(a) => a.mapv(|v| test(f64::from(v))),
        Tensor::F64(a) => a.mapv(test),
        t => return Err(ctx.error(format!("needs a float tensor, got {}", t.dtype()))),
    };
    Ok(smallvec![Tensor::Bool(out.into_shared())])
}

// ---------------------------------------------------------------- gradients

/// TF `_AbsGrad`: `dy * sign(x)`.
fn grad_abs(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let s = g.op("Sign", &[node.inputs[0]])?;
    Ok(vec![Some(g.op("Mul", &[dy, s])?)])
}

/// TF `_SignGrad`: zeros of the input's shape.
fn grad_sign(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let _ = need_dy!(grads, 1);
    Ok(vec![Some(g.op("ZerosLike", &[node.inputs[0]])?)])
}

/// TF `_TanGrad`: `dy * sec(x)^2`, i.e. `dy / cos(x)^2`.
fn grad_tan(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let c = g.op("Cos", &[node.inputs[0]])?;
    let c2 = g.op("Square", &[c])?;
    Ok(vec![Some(g.op("RealDiv", &[dy, c2])?)])
}

/// TF `_SigmoidGrad`: `SigmoidGrad(y, dy) = dy * y * (1 - y)` ([`super::activation_grad`]).
fn grad_sigmoid(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    Ok(vec![Some(g.op("SigmoidGrad", &[y0(node), dy])?)])
}

/// TF `_ReluGrad`: one `ReluGrad(dy, y)` op, `dy` where `y > 0`, else 0
/// ([`super::activation_grad`]).
fn grad_relu(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    Ok(vec![Some(g.op("ReluGrad", &[dy, y0(node)])?)])
}

/// TF `_Relu6Grad` (`Relu6Grad(dy, x)`): `dy` where `0 < x < 6`, else 0.
fn grad_relu6(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let x = node.inputs[0];
    let zero = scalar_of(g, x, 0.0)?;
    let six = scalar_of(g, x, 6.0)?;
    let pos = g.op("Greater", &[x, zero])?;
    let below = g.op("Less", &[x, six])?;
    let inner = where_else_zero(g, below, dy)?;
    Ok(vec![Some(where_else_zero(g, pos, inner)?)])
}

/// TF `_LeakyReluGrad` (`LeakyReluGrad(dy, x, alpha)`): `dy` where `x > 0`, else `alpha * dy`.
fn grad_leaky_relu(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let x = node.inputs[0];
    let zero = scalar_of(g, x, 0.0)?;
    let pos = g.op("Greater", &[x, zero])?;
    let ady = scale(g, dy, leaky_alpha(&node.attrs))?;
    Ok(vec![Some(g.op("SelectV2", &[pos, dy, ady])?)])
}

/// TF `_EluGrad` (`EluGrad(dy, y)`): `dy * (y + 1)` where `y < 0`, else `dy`.
fn grad_elu(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let y = y0(node);
    let zero = scalar_of(g, y, 0.0)?;
    let one = scalar_of(g, y, 1.0)?;
    let neg = g.op("Less", &[y, zero])?;
    let yp1 = g.op("Add", &[y, one])?;
    let t = g.op("Mul", &[dy, yp1])?;
    Ok(vec![Some(g.op("SelectV2", &[neg, t, dy])?)])
}

/// TF `_SeluGrad` (`SeluGrad(dy, y)`): `dy * (y + scale*alpha)` where `y < 0`, else
/// `dy * scale`.
fn grad_selu(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let y = y0(node);
    let zero = scalar_of(g, y, 0.0)?;
    let sa = scalar_of(g, y, SELU_SCALE * SELU_ALPHA)?;
    let neg = g.op("Less", &[y, zero])?;
    let ysa = g.op("Add", &[y, sa])?;
    let t = g.op("Mul", &[dy, ysa])?;
    let s = scale(g, dy, SELU_SCALE)?;
    Ok(vec![Some(g.op("SelectV2", &[neg, t, s])?)])
}

/// TF `_SoftplusGrad` (`SoftplusGrad(dy, x)`): `dy * sigmoid(x)`.
fn grad_softplus(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let s = g.op("Sigmoid", &[node.inputs[0]])?;
    Ok(vec![Some(g.op("Mul", &[dy, s])?)])
}

/// TF `_SoftsignGrad` (`SoftsignGrad(dy, x)`): `dy / (1 + |x|)^2`.
fn grad_softsign(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let x = node.inputs[0];
    let one = scalar_of(g, x, 1.0)?;
    let a = g.op("Abs", &[x])?;
    let d = g.op("Add", &[one, a])?;
    let d2 = g.op("Square", &[d])?;
    Ok(vec![Some(g.op("RealDiv", &[dy, d2])?)])
}

/// TF `_SoftmaxGrad`: `(dy - sum(dy * y, -1, keepdims)) * y`.
fn grad_softmax(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let y = y0(node);
    let p = g.op("Mul", &[dy, y])?;
    let s = reduce_sum(g, p, &[-1], true)?;
    let d = g.op("Sub", &[dy, s])?;
    Ok(vec![Some(g.op("Mul", &[d, y])?)])
}

/// TF `_MaximumMinimumGrad`: `dy` goes to `x` where `x >= y` (Maximum) / `x <= y`
/// (Minimum), to `y` elsewhere; each summed to its operand's shape.
fn grad_max_min(g: &mut Graph, node: &Node, grads: &[Option<Output>], cmp: &str) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 2);
    let (x, y) = (node.inputs[0], node.inputs[1]);
    let xmask = g.op(cmp, &[x, y])?;
    let zeros = g.op("ZerosLike", &[dy])?;
    let gx = g.op("SelectV2", &[xmask, dy, zeros])?;
    let gy = g.op("SelectV2", &[xmask, zeros, dy])?;
    Ok(vec![Some(to_input_shape(g, node, gx, 0)?), Some(to_input_shape(g, node, gy, 1)?)])
}
fn grad_maximum(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    grad_max_min(g, node, grads, "GreaterEqual")
}
fn grad_minimum(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    grad_max_min(g, node, grads, "LessEqual")
}

// ---------------------------------------------------------------- registration

/// Adds `LeakyRelu(x)` with slope `alpha` for negative inputs (TF's `tf.nn.leaky_relu`).
pub fn leaky_relu(g: &mut Graph, x: Output, alpha: f64) -> Result<Output> {
    g.op_spec(NodeSpec::new("LeakyRelu", &[x]).attr("alpha", alpha))
}

pub(crate) fn register(r: &mut Registry) {
    let one = Arity::Fixed(1);
    let two = Arity::Fixed(2);
    let unary = |name, infer, kernel, grad| def(name, name, one, infer, kernel, GPU_FLOATS, Some(grad)).launched_as(GpuLaunch::Unary);
    r.add(unary("Abs", infer_unary_numeric, kernel_abs, grad_abs).host_memory_for(HOST_INT32));
    r.add(unary("Sign", infer_unary_numeric, kernel_sign, grad_sign).host_memory_for(HOST_INT32));
    r.add(unary("Tan", infer_unary_float, kernel_tan, grad_tan));
    r.add(unary("Sigmoid", infer_unary_float, kernel_sigmoid, grad_sigmoid));
    r.add(unary("Relu", infer_unary_float, kernel_relu, grad_relu));
    r.add(unary("Relu6", infer_unary_float, kernel_relu6, grad_relu6));
    r.add(unary("LeakyRelu", infer_unary_float, kernel_leaky_relu, grad_leaky_relu).launched_as(GpuLaunch::Own).with_attrs(attrs!["alpha" => Float]));
    r.add(unary("Elu", infer_unary_float, kernel_elu, grad_elu));
    r.add(unary("Selu", infer_unary_float, kernel_selu, grad_selu));
    r.add(unary("Softplus", infer_unary_float, kernel_softplus, grad_softplus));
    r.add(unary("Softsign", infer_unary_float, kernel_softsign, grad_softsign));
    r.add(unary("Softmax", infer_softmax, super::softmax::kernel_softmax, grad_softmax).launched_as(GpuLaunch::Own)); // a row reduction and a map

    let binary = |name, infer, kernel, gpu, grad| def(name, name, two, infer, kernel, gpu, grad).launched_as(GpuLaunch::Binary);
    r.add(binary("Maximum", infer_binary_numeric, kernel_maximum, GPU_FLOATS_INT64, Some(grad_maximum)).host_memory_for(HOST_INT32));
    r.add(binary("Minimum", infer_binary_numeric, kernel_minimum, GPU_FLOATS_INT64, Some(grad_minimum)).host_memory_for(HOST_INT32));
    // TF: comparisons are not differentiable (no registered gradient).
    r.add(binary("Greater", infer_compare, kernel_greater, GPU_COMPARE, None).not_differentiable().host_memory_for(HOST_INT32));
    r.add(binary("Less", infer_compare, kernel_less, GPU_COMPARE, None).not_differentiable().host_memory_for(HOST_INT32));
    r.add(binary("LessEqual", infer_compare, kernel_less_equal, GPU_COMPARE, None).not_differentiable().host_memory_for(HOST_INT32));
    r.add(binary("GreaterEqual", infer_compare, kernel_greater_equal, GPU_COMPARE, None).not_differentiable().host_memory_for(HOST_INT32));
    r.add(binary("Equal", infer_compare, kernel_equal, GPU_COMPARE, None).not_differentiable().host_memory_for(HOST_INT32));
    // Bool outputs: no gradient reaches them. CPU kernels only (soft placement moves them)
    for name in ["IsNan", "IsInf", "IsFinite"] {
        r.add(def(name, name, one, infer_float_test, kernel_float_test, GpuSupport::None, None));
    }
}
