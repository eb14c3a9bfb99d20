//! The fused gradient kernels of `Tanh` and `Sigmoid`: `TanhGrad(y, dy) = dy * (1 - y * y)`
//! and `SigmoidGrad(y, dy) = dy * y * (1 - y)`, where `y` is the forward op's output (TF's
//! `gen_math_ops.tanh_grad` / `sigmoid_grad`, which `math_grad.py` emits for the gradients of
//! `Tanh` and `Sigmoid`; the element formulas are Eigen's `scalar_tanh_gradient_op` and
//! `scalar_sigmoid_gradient_op`). One pass over the two operands instead of the three
//! ops and two temporaries the formula takes when built from `Square`, `Sub` and `Mul`.
//!
//! Both take two `Float32` or `Float64` operands of one dtype and one shape (TF's shape
//! function merges the two shapes; no broadcasting) and are differentiable in both
//! operands, so second derivatives of `Tanh` and `Sigmoid` work (TF's `_TanhGradGrad` and
//! `_SigmoidGradGrad`).

use super::fused::FusedFloat;
use super::grad_util::{need_dy, scalar_of};
use super::math::{def, zip2_par};
use super::*;

/// Shape function of both ops: `y` and `dy` of one float dtype and one shape; the output is
/// the same. Errors name the op and both operands' dtypes or shapes.
fn infer_activation_grad(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let [y, dy] = ctx.inputs else {
        return Err(ctx.invalid(format!("takes 2 inputs (y, dy), got {}", ctx.inputs.len())));
    };
    ctx.require_float(y.dtype)?;
    if y.dtype != dy.dtype {
        return Err(ctx.invalid(format!("y and dy must have one dtype, got {} and {}", y.dtype, dy.dtype)));
    }
    let Some(shape) = y.shape.merge(&dy.shape) else {
        return Err(ctx.shape_error(&y.shape, &dy.shape, "y and dy must have the same shape"));
    };
    Ok(vec![TensorType::new(y.dtype, shape)])
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
}
