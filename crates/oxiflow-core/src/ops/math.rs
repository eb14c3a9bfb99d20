//! Elementwise and matrix math: `Add`, `Sub`, `Mul`, `RealDiv`, `Neg`, `Square`, `Pow`,
//! `Sin`, `Cos`, `Exp`, `Log`, `Tanh`, `Sqrt`, `MatMul`, `AddN`.

use super::*;
use ndarray::Zip;

/// Applies a float unary function elementwise.
pub(crate) fn map_float(ctx: &KernelCtx, f32f: fn(f32) -> f32, f64f: fn(f64) -> f64) -> Result<Vec<Tensor>> {
    Ok(vec![match &ctx.inputs[0] {
        Tensor::F32(a) => Tensor::F32(a.map(|&x| f32f(x)).into_shared()),
        Tensor::F64(a) => Tensor::F64(a.map(|&x| f64f(x)).into_shared()),
        t => return Err(ctx.error(format!("no kernel for dtype {}", t.dtype()))),
    }])
}

fn kernel_sin(ctx: &KernelCtx) -> Result<Vec<Tensor>> {
    map_float(ctx, f32::sin, f64::sin)
}
fn grad_sin(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None]) };
    let c = g.op("Cos", &[node.inputs[0]])?;
    Ok(vec![Some(g.op("Mul", &[dy, c])?)])
}

/// Broadcasting binary kernel over numeric dtypes.
pub(crate) fn zip_numeric(
    ctx: &KernelCtx,
    f32f: fn(f32, f32) -> f32,
    f64f: fn(f64, f64) -> f64,
    i32f: fn(i32, i32) -> i32,
    i64f: fn(i64, i64) -> i64,
) -> Result<Vec<Tensor>> {
    let out_shape = ndarray::IxDyn(ctx.node.outputs[0].shape.dims());
    macro_rules! go {
        ($a:expr, $b:expr, $f:expr, $v:ident) => {{
            let a = $a.broadcast(out_shape.clone()).ok_or_else(|| ctx.error("broadcast failed"))?;
            let b = $b.broadcast(out_shape.clone()).ok_or_else(|| ctx.error("broadcast failed"))?;
            Tensor::$v(Zip::from(&a).and(&b).map_collect(|&x, &y| $f(x, y)).into_shared())
        }};
    }
    Ok(vec![match (&ctx.inputs[0], &ctx.inputs[1]) {
        (Tensor::F32(a), Tensor::F32(b)) => go!(a, b, f32f, F32),
        (Tensor::F64(a), Tensor::F64(b)) => go!(a, b, f64f, F64),
        (Tensor::I32(a), Tensor::I32(b)) => go!(a, b, i32f, I32),
        (Tensor::I64(a), Tensor::I64(b)) => go!(a, b, i64f, I64),
        (a, b) => return Err(ctx.error(format!("no kernel for dtypes {} and {}", a.dtype(), b.dtype()))),
    }])
}

fn kernel_add(ctx: &KernelCtx) -> Result<Vec<Tensor>> {
    zip_numeric(ctx, |a, b| a + b, |a, b| a + b, i32::wrapping_add, i64::wrapping_add)
}

pub(crate) fn register(r: &mut Registry) {
    r.add(OpDef {
        name: "Sin",
        default_name: "Sin",
        arity: Arity::Fixed(1),
        ref_inputs: &[],
        infer: infer_unary_float,
        kernel: kernel_sin,
        gpu: GPU_FLOATS,
        grad: Some(grad_sin),
        stateful: false,
    });
    r.add(OpDef {
        name: "Add",
        default_name: "add",
        arity: Arity::Fixed(2),
        ref_inputs: &[],
        infer: infer_binary_broadcast,
        kernel: kernel_add,
        gpu: GPU_FLOATS,
        grad: None,
        stateful: false,
    });
}
