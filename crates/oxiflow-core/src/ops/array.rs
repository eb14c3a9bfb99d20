//! Shape and type ops: `Reshape`, `BroadcastTo`, `Cast`, `OnesLike`, `ZerosLike`, `Where` (TF's
//! `array_ops` / `math_ops.cast`, gradients as in `array_grad.py` and `math_grad.py`), and
//! [`sum_to_shape`], which reduces a broadcast gradient back to an operand's shape with
//! `Sum` (in `reduce.rs`).
//!
//! Shapes are static: `Reshape` and `BroadcastTo` take the target shape as an attr
//! (`AttrValue::Shape`), not as a tensor input as TF does.

use super::math::def;
use super::reduce::reduce_sum;
use super::*;
use crate::graph::NodeSpec;
use crate::tensor::Complex;
use crate::tensor::Element;
use crate::with_array;
use ndarray::{ArcArray, Dimension, IxDyn};

// ---------------------------------------------------------------- graph-building helpers

/// Adds `Reshape(x)` to `shape` (TF's `tf.reshape`). Errors (`ShapeMismatch`, naming both
/// shapes) when the element counts differ; the graph is then unchanged.
pub fn reshape(g: &mut Graph, x: Output, shape: &Shape) -> Result<Output> {
    g.op_spec(NodeSpec::new("Reshape", &[x]).attr("shape", AttrValue::Shape(shape.0.clone())))
}

/// Sums `grad`, whose static shape must be a broadcast of `target` (NumPy rules), down to
/// `target`: a `Sum` over [`Shape::broadcast_axes`], then a `Reshape` where the rank or unit
/// dimensions still differ (TF's `reshape(reduce_sum(grad, rx), sx)` with
/// `BroadcastGradientArgs`). Returns `grad` itself when the shapes are equal. Shapes are
/// static, so this is decided when the graph is built. `InvalidArgument` when `target`
/// does not broadcast to `grad`'s shape.
pub fn sum_to_shape(g: &mut Graph, grad: Output, target: &Shape) -> Result<Output> {
    let shape = g.shape_of(grad)?;
    if &shape == target {
        return Ok(grad);
    }
    if Shape::broadcast(target, &shape).as_ref() != Some(&shape) {
        return Err(OxiflowError::InvalidArgument(format!("sum_to_shape: a gradient of shape {shape} is not a broadcast of shape {target}")));
    }
    let axes: Vec<i64> = target.broadcast_axes(&shape).into_iter().map(|a| a as i64).collect();
    let mut out = grad;
    if !axes.is_empty() {
        out = reduce_sum(g, grad, &axes, false)?;
    }
    if g.shape_of(out)? != *target {
        out = reshape(g, out, target)?;
    }
    Ok(out)
}

// ---------------------------------------------------------------- Reshape

/// `Reshape`'s shape function. One target dimension may be unknown (`-1`, TF's inferred
/// dimension): it is the input's element count over the others' product when the input's
/// shape is fully defined, else it stays unknown until the run. An input with an unknown
/// dimension and a full target is compared with the target when it runs (TF).
fn infer_reshape(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let x = &ctx.inputs[0];
    let mut target = Shape(ctx.attrs.get_partial_shape(ctx.op, "shape")?);
    let free: Vec<usize> = (0..target.rank()).filter(|&i| target.0[i] == crate::shape::UNKNOWN).collect();
    if free.len() > 1 {
        return Err(ctx.invalid(format!("only one input size may be -1, not both {} and {} (target shape {})", free[0], free[1], target)));
    }
    if let [f] = free[..] {
        let known: usize = target.0.iter().filter(|&&d| d != crate::shape::UNKNOWN).product();
        if !x.shape.is_fully_defined() {
            return Ok(vec![TensorType::new(x.dtype, target)]);
        }
        let n = x.shape.num_elements();
        if known == 0 || !n.is_multiple_of(known) {
            return Err(ctx.shape_error(
                &x.shape,
                &target,
                format!(" (Input to reshape is a tensor with {n} values, but the requested shape requires a multiple of {known})"),
            ));
        }
        target.0[f] = n / known;
    } else if !x.shape.is_fully_defined() {
        // as TF: the element counts are compared when the fed size is known
        return Ok(vec![TensorType::new(x.dtype, target)]);
    }
    if x.shape.num_elements() != target.num_elements() {
        return Err(ctx.shape_error(
            &x.shape,
            &target,
            format!(" (Cannot reshape a tensor with {} elements to shape {} ({} elements))", x.shape.num_elements(), target, target.num_elements()),
        ));
    }
    Ok(vec![TensorType::new(x.dtype, target)])
}

/// `a` with new dimensions (same element count), sharing the buffer when `a` is
/// standard-layout.
pub(crate) fn reshape_array<T: Copy>(ctx: &KernelCtx, a: &ArcArray<T, IxDyn>, dims: &[usize]) -> Result<ArcArray<T, IxDyn>> {
    // the same shape (the gradient of a row gather reshapes to it): the input as it is,
    // in any memory order
    let r = if a.shape() == dims {
        Ok(a.clone())
    } else if a.is_standard_layout() {
        a.clone().into_shape_with_order(IxDyn(dims))
    } else {
        crate::strided::standard_copy(&a.view()).into_shared().into_shape_with_order(IxDyn(dims))
    };
    r.map_err(|e| ctx.error(format!("cannot reshape {} to {}: {e}", Shape(a.shape().to_vec()), Shape(dims.to_vec()))))
}

/// Kernel shared by `Reshape`: input 0 reshaped to the node's output shape.
fn kernel_reshape(ctx: &KernelCtx) -> Result<Outputs> {
    let dims = ctx.node.outputs[0].shape.dims();
    Ok(smallvec![with_array!(&ctx.inputs[0], a => Element::wrap(reshape_array(ctx, a, dims)?))])
}

/// TF `_ReshapeGrad`: `dy` reshaped to the input's shape.
fn grad_reshape(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None]) };
    Ok(vec![Some(super::dynamic_shape::reshape_to_like(g, dy, node.inputs[0])?)])
}

// ---------------------------------------------------------------- BroadcastTo

fn infer_broadcast_to(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let x = &ctx.inputs[0];
    let target = Shape(ctx.attrs.get_shape(ctx.op, "shape")?);
    if Shape::broadcast(&x.shape, &target).as_ref() != Some(&target) {
        return Err(ctx.shape_error(&x.shape, &target, " (the input cannot be broadcast to the target shape)"));
    }
    Ok(vec![TensorType::new(x.dtype, target)])
}

/// `BroadcastTo`'s kernel: the input repeated to the node's output shape, written with the
/// strided copy. The output is row-major when the input is a row-major matrix (or higher),
/// else column-major: a single element or a vector has no order of its own, and the
/// gradient of a `sum` or `mean` broadcasts one to the shape of Julia's (column-major)
/// operand, whose other gradients it then meets in `Mul`, `SelectV2` and `AddN`.
fn kernel_broadcast_to(ctx: &KernelCtx) -> Result<Outputs> {
    let dims = ctx.node.outputs[0].shape.dims();
    Ok(smallvec![with_array!(&ctx.inputs[0], a => {
        let v = super::math::broadcast_view(ctx, a, dims)?;
        let row_major_input = a.ndim() >= 2 && a.is_standard_layout() && !a.t().is_standard_layout();
        let column_major = dims.len() >= 2 && !row_major_input;
        Element::wrap(crate::strided::dense_copy(&v, column_major).into_shared())
    })])
}

/// TF `_BroadcastToGrad`: `dy` summed back to the input's shape.
fn grad_broadcast_to(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None]) };
    Ok(vec![Some(super::dynamic_shape::sum_to_like(g, dy, node.inputs[0])?)])
}

// ---------------------------------------------------------------- Cast

fn infer_cast(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let dst = ctx.attrs.get_type(ctx.op, "DstT")?;
    Ok(vec![TensorType::new(dst, ctx.inputs[0].shape.clone())])
}

/// `t` converted to `dst`: Rust `as` between numbers (float to int truncates toward zero,
/// saturating; NaN becomes 0), `x != 0` to Bool, 0/1 from Bool; a real number `x` becomes
/// `x + 0i`, and a complex one its real part (TF's `Cast`: "only the real part of x is
/// returned"), but `x != 0` to Bool (both parts) and the complex number itself between the
/// two complex types.
#[allow(clippy::unnecessary_cast)]
pub fn cast_tensor(t: &Tensor, dst: DType) -> Tensor {
    macro_rules! from_num {
        ($a:expr, $zero:expr) => {
            match dst {
                DType::Float32 => Tensor::F32($a.mapv(|x| x as f32).into_shared()),
                DType::Float64 => Tensor::F64($a.mapv(|x| x as f64).into_shared()),
                DType::Int32 => Tensor::I32($a.mapv(|x| x as i32).into_shared()),
                DType::Int64 => Tensor::I64($a.mapv(|x| x as i64).into_shared()),
                DType::Bool => Tensor::Bool($a.mapv(|x| x != $zero).into_shared()),
                DType::Complex64 => Tensor::C64($a.mapv(|x| Complex::new(x as f32, 0.0)).into_shared()),
                DType::Complex128 => Tensor::C128($a.mapv(|x| Complex::new(x as f64, 0.0)).into_shared()),
            }
        };
    }
    macro_rules! from_complex {
        ($a:expr) => {
            match dst {
                DType::Complex64 => Tensor::C64($a.mapv(|x| Complex::new(x.re as f32, x.im as f32)).into_shared()),
                DType::Complex128 => Tensor::C128($a.mapv(|x| Complex::new(x.re as f64, x.im as f64)).into_shared()),
                DType::Bool => Tensor::Bool($a.mapv(|x| x.re != 0.0 || x.im != 0.0).into_shared()),
                _ => {
                    let re = $a.mapv(|x| x.re);
                    from_num!(re, 0.0)
                }
            }
        };
    }
    match t {
        Tensor::Bool(a) if dst == DType::Bool => Tensor::Bool(a.clone()),
        Tensor::Bool(a) => {
            let u = a.mapv(u8::from);
            from_num!(u, 0u8)
        }
        Tensor::F32(a) => from_num!(a, 0.0f32),
        Tensor::F64(a) => from_num!(a, 0.0f64),
        Tensor::I32(a) => from_num!(a, 0i32),
        Tensor::I64(a) => from_num!(a, 0i64),
        Tensor::C64(a) => from_complex!(a),
        Tensor::C128(a) => from_complex!(a),
        Tensor::Device(d) => crate::tensor::device_resident(d),
    }
}

fn kernel_cast(ctx: &KernelCtx) -> Result<Outputs> {
    let t = &ctx.inputs[0];
    let dst = ctx.node.outputs[0].dtype;
    Ok(smallvec![if t.dtype() == dst { t.clone() } else { cast_tensor(t, dst) }])
}

/// TF `_CastGrad`: `dy` cast back to the source dtype when both dtypes are float or
/// complex (from a complex `dy` to a real source: its real part); no gradient otherwise.
fn grad_cast(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None]) };
    let src = g.dtype_of(node.inputs[0])?;
    if !(src.is_differentiable() && node.outputs[0].dtype.is_differentiable()) {
        return Ok(vec![None]);
    }
    Ok(vec![Some(g.op_spec(NodeSpec::new("Cast", &[dy]).attr("DstT", src))?)])
}

// ---------------------------------------------------------------- OnesLike, ZerosLike

/// A tensor of `t`'s dtype and shape filled with `v`, in `t`'s memory order (column-major
/// when `t` is), so that the gradients it meets keep one order (`ZerosLike` of a Julia
/// array feeds the `SelectV2` of `Maximum`'s gradient next to that array's own gradient).
fn filled_like(t: &Tensor, v: f64) -> Tensor {
    // (a device-resident input never reaches a CPU kernel; its order would not matter)
    let column_major = !matches!(t, Tensor::Device(_)) && with_array!(t, a => crate::strided::is_column_major(a));
    Tensor::filled_in(t.dtype(), t.dims(), v, if column_major { crate::Layout::ColumnMajor } else { crate::Layout::RowMajor })
}

fn kernel_ones_like(ctx: &KernelCtx) -> Result<Outputs> {
    Ok(smallvec![filled_like(&ctx.inputs[0], 1.0)])
}

fn kernel_zeros_like(ctx: &KernelCtx) -> Result<Outputs> {
    Ok(smallvec![filled_like(&ctx.inputs[0], 0.0)])
}

/// `shape`: the output's static shape (TF passes it as a tensor input).
const SHAPE: &[AttrDef] = attrs!["shape" => Shape];
/// TF's `Cast` attrs (`SrcT` is the input's dtype; `Truncate` is accepted and has no effect).
const CAST_ATTRS: &[AttrDef] = attrs!["SrcT" => Type, "DstT" => Type, "Truncate" => Bool];

// ---------------------------------------------------------------- Where

/// `Where(x)` (TF's `tf.where(x)` with one argument, the op `Where`): the coordinates of
/// the nonzero (for Bool: true) elements of `x`, any dtype and rank r, as an `Int64
/// [k, r]` tensor in row-major order of the elements, k known only when it runs. A float
/// element is nonzero when it is not `0.0` or `-0.0` (a NaN is nonzero), as TF's kernel
/// decides.
fn infer_where(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    Ok(vec![TensorType::new(DType::Int64, Shape(vec![crate::shape::UNKNOWN, ctx.inputs[0].shape.rank()]))])
}

fn kernel_where(ctx: &KernelCtx) -> Result<Outputs> {
    fn coords<T: Element>(a: &ArcArray<T, IxDyn>) -> (Vec<i64>, usize) {
        let mut out = Vec::new();
        let mut k = 0;
        for (ix, v) in a.indexed_iter() {
            if *v != T::zero() {
                out.extend(ix.slice().iter().map(|&i| i as i64));
                k += 1;
            }
        }
        (out, k)
    }
    let x = &ctx.inputs[0];
    let (v, k) = with_array!(x, a => coords(a));
    Ok(smallvec![Tensor::from_vec(&[k, x.dims().len()], v, crate::tensor::Layout::RowMajor)?])
}

pub(crate) fn register(r: &mut Registry) {
    let one = Arity::Fixed(1);
    // TF: ops.NotDifferentiable("Where") (its output is integer coordinates)
    r.add(def("Where", "Where", one, infer_where, kernel_where, GpuSupport::None, None).not_differentiable());
    r.add(
        def("Reshape", "Reshape", one, infer_reshape, kernel_reshape, GpuSupport::Any, Some(grad_reshape))
            .launched_as(GpuLaunch::DeviceHandled)
            .with_attrs(SHAPE),
    );
    r.add(def("BroadcastTo", "BroadcastTo", one, infer_broadcast_to, kernel_broadcast_to, GPU_FLOATS, Some(grad_broadcast_to)).with_attrs(SHAPE));
    r.add(def("Cast", "Cast", one, infer_cast, kernel_cast, GPU_FLOATS, Some(grad_cast)).with_attrs(CAST_ATTRS));
    // TF: ops.NotDifferentiable("OnesLike"), ("ZerosLike").
    r.add(def("OnesLike", "OnesLike", one, infer_same, kernel_ones_like, GPU_FLOATS, None).not_differentiable().host_memory_for(HOST_INT32));
    r.add(def("ZerosLike", "ZerosLike", one, infer_same, kernel_zeros_like, GPU_FLOATS, None).not_differentiable().host_memory_for(HOST_INT32));
}
