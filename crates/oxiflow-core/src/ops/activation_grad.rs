//! The fused gradient kernels of `Tanh`, `Sigmoid` and `Relu`: `TanhGrad(y, dy) = dy * (1 -
//! y * y)` and `SigmoidGrad(y, dy) = dy * y * (1 - y)`, where `y` is the forward op's output
//! (TF's `gen_math_ops.tanh_grad` / `sigmoid_grad`, which `math_grad.py` emits for the
//! gradients of `Tanh` and `Sigmoid`; the element formulas are Eigen's
//! `scalar_tanh_gradient_op` and `scalar_sigmoid_gradient_op`), and
//! `ReluGrad(gradients, features)`: `gradients` where `features > 0`, else 0 (TF's
//! `gen_nn_ops.relu_grad`, which `nn_grad.py` emits with `Relu`'s output as `features`;
//! note TF's operand order, the gradient first). One pass over the two operands instead of
//! the three ops and two temporaries each formula takes when built from primitives
//! (`Square`, `Sub`, `Mul`; `Greater`, `ZerosLike`, `SelectV2`).
//!
//! `ReluGrad` selects rather than multiplies: TF's kernel computes `gradients *
//! (features > 0)`, which gives NaN where `features <= 0` and the gradient is NaN or
//! infinite; here that element is 0, the derivative of `Relu` there (as PyTorch's
//! `threshold_backward`, and as this gradient was when built from `SelectV2`).
//!
//! All take two `Float32` or `Float64` operands of one dtype and one shape (TF's shape
//! function merges the two shapes; no broadcasting) and are differentiable, so second
//! derivatives of `Tanh`, `Sigmoid` and `Relu` work (TF's `_TanhGradGrad`,
//! `_SigmoidGradGrad`, `_ReluGradGrad`).

use super::fused::FusedFloat;
use super::grad_util::{need_dy, scalar_of};
use super::math::{def, zip2_par};
use super::*;

/// Shape function of `TanhGrad` and `SigmoidGrad`: `y` and `dy` of one float dtype and one
/// shape; the output is the same. Errors name the op and both operands' dtypes or shapes.
fn infer_activation_grad(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    infer_same(ctx, "y", "dy")
}

/// Shape function of `ReluGrad`: as [`infer_activation_grad`], operands named as TF names
/// them.
fn infer_relu_grad(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    infer_same(ctx, "gradients", "features")
}

fn infer_same(ctx: &InferCtx, a_name: &str, b_name: &str) -> Result<Vec<TensorType>> {
    let [a, b] = ctx.inputs else {
        return Err(ctx.invalid(format!("takes 2 inputs ({a_name}, {b_name}), got {}", ctx.inputs.len())));
    };
    ctx.require_float(a.dtype)?;
    if a.dtype != b.dtype {
        return Err(ctx.invalid(format!("{a_name} and {b_name} must have one dtype, got {} and {}", a.dtype, b.dtype)));
    }
    let Some(shape) = a.shape.merge(&b.shape) else {
        return Err(ctx.shape_error(&a.shape, &b.shape, format!("{a_name} and {b_name} must have the same shape")));
    };
    Ok(vec![TensorType::new(a.dtype, shape)])
}

/// `TanhGrad`'s element function, `dy * (1 - y * y)`; the fused interpreter
/// (`fused.rs`) calls it too, so a fused and an unfused run give the same bits.
pub(crate) fn tanh_grad<T: FusedFloat>(y: T, dy: T) -> T {
    T::mul(dy, T::sub(T::from_f64(1.0), T::mul(y, y)))
}

/// `SigmoidGrad`'s element function, `dy * y * (1 - y)` (as [`tanh_grad`], shared with the
/// fused interpreter).
pub(crate) fn sigmoid_grad<T: FusedFloat>(y: T, dy: T) -> T {
    T::mul(T::mul(dy, y), T::sub(T::from_f64(1.0), y))
}

/// `ReluGrad`'s element function: `dy` where `y > 0`, else 0 (NaN `y`: 0). Shared with
/// the fused interpreter, as [`tanh_grad`].
pub(crate) fn relu_grad<T: FusedFloat>(dy: T, y: T) -> T {
    let zero = T::from_f64(0.0);
    if y > zero {
        dy
    } else {
        zero
    }
}

/// `f(y, dy)` elementwise for `Float32` and `Float64` operands (the functions are generic
/// parameters, not pointers, so the loops inline and vectorize them).
fn map_pair(ctx: &KernelCtx, f32f: impl Fn(f32, f32) -> f32 + Sync + Copy, f64f: impl Fn(f64, f64) -> f64 + Sync + Copy) -> Result<Outputs> {
    Ok(smallvec![match (&ctx.inputs[0], &ctx.inputs[1]) {
        (Tensor::F32(y), Tensor::F32(dy)) => Tensor::F32(zip2_par(ctx, y, dy, f32f)?),
        (Tensor::F64(y), Tensor::F64(dy)) => Tensor::F64(zip2_par(ctx, y, dy, f64f)?),
        (y, dy) => return Err(ctx.error(format!("no kernel for dtypes {} and {}", y.dtype(), dy.dtype()))),
    }])
}

fn kernel_tanh_grad(ctx: &KernelCtx) -> Result<Outputs> {
    map_pair(ctx, tanh_grad::<f32>, tanh_grad::<f64>)
}

fn kernel_sigmoid_grad(ctx: &KernelCtx) -> Result<Outputs> {
    map_pair(ctx, sigmoid_grad::<f32>, sigmoid_grad::<f64>)
}

fn kernel_relu_grad(ctx: &KernelCtx) -> Result<Outputs> {
    map_pair(ctx, relu_grad::<f32>, relu_grad::<f64>)
}

/// TF `_ReluGradGrad`: `ReluGrad(dy, y)` is linear in `dy` with the same mask, so
/// `d/d(dy) = ReluGrad(g, y)`; piecewise constant in `y`, so `d/dy = ZerosLike(y)`.
fn grad_relu_grad(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let gg = need_dy!(grads, 2);
    let y = node.inputs[1];
    Ok(vec![Some(g.op("ReluGrad", &[gg, y])?), Some(g.op("ZerosLike", &[y])?)])
}

/// TF `_TanhGradGrad`: for `out = dy (1 - y^2)` and incoming `g`: `d/dy = g * -2 * dy * y`,
/// `d/d(dy) = TanhGrad(y, g)`.
fn grad_tanh_grad(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let gg = need_dy!(grads, 2);
    let (y, dy) = (node.inputs[0], node.inputs[1]);
    let m2 = scalar_of(g, y, -2.0)?;
    let t = g.op("Mul", &[gg, m2])?;
    let t = g.op("Mul", &[t, dy])?;
    let d_y = g.op("Mul", &[t, y])?;
    let d_dy = g.op("TanhGrad", &[y, gg])?;
    Ok(vec![Some(d_y), Some(d_dy)])
}

/// TF `_SigmoidGradGrad`: for `out = dy y (1 - y)` and incoming `g`, with `gb = g * dy`:
/// `d/dy = gb - 2 * gb * y`, `d/d(dy) = SigmoidGrad(y, g)`.
fn grad_sigmoid_grad(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let gg = need_dy!(grads, 2);
    let (y, dy) = (node.inputs[0], node.inputs[1]);
    let gb = g.op("Mul", &[gg, dy])?;
    let two = scalar_of(g, y, 2.0)?;
    let t = g.op("Mul", &[two, gb])?;
    let t = g.op("Mul", &[t, y])?;
    let d_y = g.op("Sub", &[gb, t])?;
    let d_dy = g.op("SigmoidGrad", &[y, gg])?;
    Ok(vec![Some(d_y), Some(d_dy)])
}

pub(crate) fn register(r: &mut Registry) {
    let two = Arity::Fixed(2);
    r.add(def("TanhGrad", "TanhGrad", two, infer_activation_grad, kernel_tanh_grad, GPU_FLOATS, Some(grad_tanh_grad)).launched_as(GpuLaunch::Binary));
    r.add(
        def("SigmoidGrad", "SigmoidGrad", two, infer_activation_grad, kernel_sigmoid_grad, GPU_FLOATS, Some(grad_sigmoid_grad)).launched_as(GpuLaunch::Binary),
    );
    r.add(def("ReluGrad", "ReluGrad", two, infer_relu_grad, kernel_relu_grad, GPU_FLOATS, Some(grad_relu_grad)).launched_as(GpuLaunch::Binary));
}
