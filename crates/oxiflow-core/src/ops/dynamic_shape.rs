//! Unknown dimensions (TF1's partial shapes): which ops accept them, the run-time
//! specialisation of a node whose static shapes are partial, and the three internal ops the
//! gradients use where a shape is only known at run time.
//!
//! A `Placeholder` declared with an unknown dimension (`shape=[nothing, 10]` from Julia, `-1`
//! through the C ABI) gives its consumers partial static shapes; shape inference carries
//! them through the ops of [`accepts_unknown_dims`] and checks what it can when the node is
//! added. When such a node runs, [`specialize`] re-runs its shape function on the fed
//! shapes, so its kernel sees full shapes and a mismatch the build could not see is TF's
//! shape error naming the op and both shapes. Gradients that TF builds from `Shape`,
//! `BroadcastGradientArgs` and `Reshape` at run time use `_SumToShapeOf`,
//! `_BroadcastToShapeOf` and `_ReshapeToShapeOf` here: each takes the tensor whose run-time
//! shape it needs as a second input. A graph whose shapes are all known never meets them.

use super::array::{reshape, reshape_array, sum_to_shape};
use super::math::def;
use super::*;
use crate::tensor::Element;
use crate::with_array;

/// Ops whose shape function, gradient and kernel handle unknown dimensions; a node of any
/// other op with an input of partial shape is refused when it is added
/// ([`check_unknown_dims`]). The unary and binary elementwise families (GPU launch kinds
/// `Unary` and `Binary`) are in by construction: their outputs follow their inputs and
/// their gradients reduce through [`sum_to_like`].
const PARTIAL_SHAPE_OPS: &[&str] = &[
    "Identity",
    "IdentityN",
    "StopGradient",
    "OnesLike",
    "ZerosLike",
    "Cast",
    "Reshape",
    "ExpandDims",
    "Squeeze",
    "Transpose",
    "MatMul",
    "Conv2D",
    "Conv2DBackpropInput",
    "Conv2DBackpropFilter",
    "AddN",
    "SelectV2",
    "Sum",
    "Mean",
    "Max",
    "Min",
    "ArgMax",
    "ArgMin",
    "Softmax",
    "SoftmaxCrossEntropyWithLogits",
    "LeakyRelu",
    "StridedSlice",
    "StridedSliceGrad",
    "ConcatV2",
    "Pack",
    "Unpack",
    "SplitV",
    "GatherV2",
    "GatherNd",
    "ScatterNd",
    "_ScatterNdToShapeOf",
    "BroadcastTo",
    "Prod",
    "EnsureShape",
    "Where",
    "If",
    "While",
    "WhileGrad",
    "WhileGradGrad",
    "_SumToShapeOf",
    "_BroadcastToShapeOf",
    "_ReshapeToShapeOf",
    "_SplitToShapesOf",
    "SparseTensorDenseMatMul",
    "SparseRemap",
    "SparseReorder",
    "SparseSparseMatMul",
    "SparseSparseMatMulGrad",
    "SparseSolve",
    "TopKV2",
    "_ScatterLastAxis",
    "_GatherLastAxis",
    "_InterpInterval",
    "Invert",
    "IsNan",
    "IsInf",
    "IsFinite",
    "Lgamma",
    "Erf",
    "Erfc",
    "Erfinv",
    "Ndtri",
    "BesselI0e",
    "BesselI1e",
    "Digamma",
    "Polygamma",
    "Tile",
    "Pad",
    "ReverseV2",
    "Print",
    "BatchMatMulV2",
    "MatrixDiag",
    "MatrixDiagPart",
    "MatrixInverse",
    "MatrixDeterminant",
    "MatrixSolve",
    "MatrixSolveLs",
    "MatrixTriangularSolve",
    "Cholesky",
    "Svd",
    "Shape",
    "Dtw",
    "DtwGrad",
    "OtNetwork",
    "OtNetworkGrad",
];

/// Whether nodes of `op` may have inputs with unknown dimensions.
pub fn accepts_unknown_dims(op: &OpDef) -> bool {
    matches!(op.launch, GpuLaunch::Unary | GpuLaunch::Binary) || PARTIAL_SHAPE_OPS.contains(&op.name)
}

/// `Unimplemented` naming the op, node and shape when an input of a node of `op` has an
/// unknown dimension and `op` does not accept them ([`accepts_unknown_dims`]).
pub fn check_unknown_dims(op: &OpDef, node: &str, inputs: &[TensorType]) -> Result<()> {
    if accepts_unknown_dims(op) {
        return Ok(());
    }
    match inputs.iter().position(|t| !t.shape.is_fully_defined()) {
        None => Ok(()),
        Some(i) => Err(OxiflowError::Unimplemented(format!(
            "{} '{node}': input {i} has shape {} with an unknown dimension, which {} does not accept yet; give the placeholder's full shape",
            op.name, inputs[i].shape, op.name
        ))),
    }
}

/// `node` with the output types its shape function gives for the run-time `inputs` (the
/// kernel's data inputs): the node its kernel runs as when its static shapes are partial.
/// Errors: the shape function's, naming the op and the fed shapes (TF's run-time shape
/// errors), or `Internal` when the result contradicts the static shapes.
pub fn specialize(node: &Node, inputs: &[Tensor]) -> Result<Node> {
    if !node.op.ref_inputs.is_empty() {
        return Err(OxiflowError::Internal(format!("{} '{}': an op with reference inputs cannot have partial shapes", node.op.name, node.name)));
    }
    let types: Vec<TensorType> = inputs.iter().map(|t| TensorType::new(t.dtype(), Shape(t.dims().to_vec()))).collect();
    let outputs = (node.op.infer)(&InferCtx { op: node.op.name, node: &node.name, inputs: &types, attrs: &node.attrs })?;
    if outputs.len() != node.outputs.len() || outputs.iter().zip(&node.outputs).any(|(o, s)| o.dtype != s.dtype || s.shape.merge(&o.shape).is_none()) {
        return Err(OxiflowError::Internal(format!(
            "{} '{}': the shapes {:?} inferred for the fed inputs contradict the static {:?}",
            node.op.name, node.name, outputs, node.outputs
        )));
    }
    Ok(Node { outputs, partial: false, ..node.clone() })
}

/// Runs `node`'s kernel on `inputs` (its data inputs), as its [`specialize`]d node when its
/// static shapes are partial ([`Node::partial`]): the reference evaluator's and function
/// bodies' call.
pub fn run_kernel(node: &Node, inputs: &[Tensor], state: &dyn StateAccess) -> Result<Outputs> {
    if node.partial {
        let special = specialize(node, inputs)?;
        return (node.op.kernel)(&KernelCtx { node: &special, inputs, state });
    }
    (node.op.kernel)(&KernelCtx { node, inputs, state })
}

// ---------------------------------------------------------------- graph-building helpers

/// `grad` summed to the shape of `like` (a broadcasting operand): the static
/// [`sum_to_shape`] when `like`'s shape is fully defined, else `_SumToShapeOf(grad, like)`,
/// which decides the axes at run time (TF's `BroadcastGradientArgs` + `Sum` + `Reshape`).
pub fn sum_to_like(g: &mut Graph, grad: Output, like: Output) -> Result<Output> {
    let target = g.shape_of(like)?;
    if target.is_fully_defined() {
        return sum_to_shape(g, grad, &target);
    }
    g.op("_SumToShapeOf", &[grad, like])
}

/// `x` reshaped to the shape of `like` (same element count at run time): a static
/// `Reshape` when `like`'s shape is fully defined, else `_ReshapeToShapeOf(x, like)`.
pub fn reshape_to_like(g: &mut Graph, x: Output, like: Output) -> Result<Output> {
    let target = g.shape_of(like)?;
    if target.is_fully_defined() {
        return if g.shape_of(x)? == target { Ok(x) } else { reshape(g, x, &target) };
    }
    g.op("_ReshapeToShapeOf", &[x, like])
}

/// `x` broadcast to the shape of `like` (NumPy rules): `_BroadcastToShapeOf(x, like)`.
pub fn broadcast_to_like(g: &mut Graph, x: Output, like: Output) -> Result<Output> {
    g.op("_BroadcastToShapeOf", &[x, like])
}

// ---------------------------------------------------------------- the ops

fn like_type(ctx: &InferCtx, x: &TensorType) -> TensorType {
    TensorType::new(x.dtype, ctx.inputs[1].shape.clone())
}

/// `_SumToShapeOf(x, like)` (`x` a broadcast of `like`) and `_BroadcastToShapeOf(x, like)`
/// (`like` a broadcast of `x`): float `x`, the output typed as `like`.
fn infer_broadcast_pair(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let (x, like) = (&ctx.inputs[0], &ctx.inputs[1]);
    ctx.require_float(x.dtype)?;
    let (small, big, why) = match ctx.op {
        "_SumToShapeOf" => (like, x, " (the gradient is not a broadcast of the operand)"),
        _ => (x, like, " (the input cannot be broadcast to the target shape)"),
    };
    if Shape::broadcast(&small.shape, &big.shape).and_then(|b| b.merge(&big.shape)).is_none() {
        return Err(ctx.shape_error(&x.shape, &like.shape, why));
    }
    Ok(vec![like_type(ctx, x)])
}

fn infer_reshape_to(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let (x, like) = (&ctx.inputs[0], &ctx.inputs[1]);
    if x.shape.is_fully_defined() && like.shape.is_fully_defined() && x.shape.num_elements() != like.shape.num_elements() {
        return Err(ctx.shape_error(&x.shape, &like.shape, " (element counts differ)"));
    }
    Ok(vec![like_type(ctx, x)])
}

/// The standard node that computes the internal op `node` (`_SumToShapeOf`,
/// `_BroadcastToShapeOf` or `_ReshapeToShapeOf`, specialised: its output shape is the
/// run-time target) on its input 0, whose dimensions are `dims`: a `Sum` over the
/// broadcast axes, a `BroadcastTo`, or `None` where the result is input 0's buffer with the
/// target's dimensions (equal shapes, or a reshape). The caller gives the result the
/// target's dimensions. The CPU kernels below and the CUDA device both run through it, so
/// the two compute the same thing. `InvalidArgument` naming the op when the shapes do not
/// fit.
pub fn standard_node(node: &Node, dims: &[usize]) -> Result<Option<Node>> {
    let target = &node.outputs[0].shape;
    let shape = Shape(dims.to_vec());
    if node.op.name == "_ReshapeToShapeOf" || shape == *target {
        if shape.num_elements() != target.num_elements() {
            return Err(OxiflowError::InvalidArgument(format!("{} '{}': cannot reshape {shape} to {target}", node.op.name, node.name)));
        }
        return Ok(None);
    }
    let mut attrs = Attrs::new();
    let (op, out) = match node.op.name {
        "_SumToShapeOf" => {
            if Shape::broadcast(target, &shape).as_ref() != Some(&shape) {
                return Err(OxiflowError::InvalidArgument(format!(
                    "{} '{}': a gradient of shape {shape} is not a broadcast of shape {target}",
                    node.op.name, node.name
                )));
            }
            let axes = target.broadcast_axes(&shape);
            let kept = Shape(dims.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d).collect());
            attrs.insert("axis".into(), AttrValue::Ints(axes.iter().map(|&a| a as i64).collect()));
            ("Sum", kept)
        }
        "_BroadcastToShapeOf" => {
            if Shape::broadcast(&shape, target).as_ref() != Some(target) {
                return Err(OxiflowError::InvalidArgument(format!("{} '{}': cannot broadcast {shape} to {target}", node.op.name, node.name)));
            }
            attrs.insert("shape".into(), AttrValue::Shape(target.0.clone()));
            ("BroadcastTo", target.clone())
        }
        other => return Err(OxiflowError::Internal(format!("standard_node: {other} is not a run-time shape op"))),
    };
    let op = lookup(op)?;
    Ok(Some(Node { op, attrs, outputs: vec![TensorType::new(node.outputs[0].dtype, out)], partial: false, ..node.clone() }))
}

/// CPU kernel of the three ops: [`standard_node`]'s kernel, then the target's dimensions.
fn kernel_to_shape_of(ctx: &KernelCtx) -> Result<Outputs> {
    let x = &ctx.inputs[0];
    let out = match standard_node(ctx.node, x.dims())? {
        None => x.clone(),
        Some(n) => (n.op.kernel)(&KernelCtx { node: &n, inputs: std::slice::from_ref(x), state: ctx.state })?.swap_remove(0),
    };
    let dims = ctx.node.outputs[0].shape.dims();
    if out.dims() == dims {
        return Ok(smallvec![out]);
    }
    Ok(smallvec![with_array!(&out, a => Element::wrap(reshape_array(ctx, a, dims)?))])
}

fn grad_sum_to(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None, None]) };
    Ok(vec![Some(broadcast_to_like(g, dy, node.inputs[0])?), None])
}

fn grad_broadcast_to(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None, None]) };
    Ok(vec![Some(sum_to_like(g, dy, node.inputs[0])?), None])
}

fn grad_reshape_to(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None, None]) };
    Ok(vec![Some(reshape_to_like(g, dy, node.inputs[0])?), None])
}

// ---------------------------------------------------------------- Shape

/// `out_type` of `Shape`: `Int32` (TF's default) or `Int64`.
fn shape_out_type(op: &str, attrs: &Attrs) -> Result<DType> {
    match attrs.get("out_type") {
        None => Ok(DType::Int32),
        Some(_) => match attrs.get_type(op, "out_type")? {
            t @ (DType::Int32 | DType::Int64) => Ok(t),
            t => Err(OxiflowError::InvalidArgument(format!("{op}: out_type must be Int32 or Int64, got {t}"))),
        },
    }
}

/// TF's `Shape` (`tf.shape`): the run-time dimensions of any input as a `[rank]` vector of
/// `out_type`; its value is known only when the node runs where a dimension is unknown.
fn infer_shape(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    Ok(vec![TensorType::new(shape_out_type(ctx.op, ctx.attrs)?, Shape(vec![ctx.inputs[0].shape.rank()]))])
}

/// The input's dimensions; `InvalidArgument` naming the node when one does not fit `Int32`.
fn kernel_shape(ctx: &KernelCtx) -> Result<Outputs> {
    let dims = ctx.inputs[0].dims();
    let n = [dims.len()];
    let t = match shape_out_type(ctx.node.op.name, &ctx.node.attrs)? {
        DType::Int64 => Tensor::from_vec(&n, dims.iter().map(|&d| d as i64).collect(), crate::tensor::Layout::RowMajor)?,
        _ => {
            let v = dims.iter().map(|&d| i32::try_from(d)).collect::<std::result::Result<Vec<i32>, _>>();
            let v = v.map_err(|_| ctx.error(format!("a dimension of shape {:?} does not fit out_type Int32; use Int64", dims)))?;
            Tensor::from_vec(&n, v, crate::tensor::Layout::RowMajor)?
        }
    };
    Ok(smallvec![t])
}

// ---------------------------------------------------------------- EnsureShape

/// TF's `EnsureShape` (`tf.ensure_shape`, what `set_shape` needs at run time): the input,
/// with the static shape refined by attr `shape` (dimensions may be unknown). Adding it
/// fails when a known dimension differs; running it fails when the fed tensor does not fit.
fn infer_ensure_shape(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let x = &ctx.inputs[0];
    let want = Shape(ctx.attrs.get_partial_shape(ctx.op, "shape")?);
    let merged = x.shape.merge(&want).ok_or_else(|| ctx.shape_error(&x.shape, &want, " (the tensor's shape is not compatible with the expected shape)"))?;
    Ok(vec![TensorType::new(x.dtype, merged)])
}

fn kernel_ensure_shape(ctx: &KernelCtx) -> Result<Outputs> {
    let x = &ctx.inputs[0];
    let want = Shape(ctx.node.attrs.get_partial_shape(ctx.node.op.name, "shape")?);
    if !want.matches(x.dims()) {
        return Err(OxiflowError::InvalidArgument(format!(
            "{} '{}': Shape of tensor {} is not compatible with expected shape {want}",
            ctx.node.op.name,
            ctx.node.name,
            Shape(x.dims().to_vec())
        )));
    }
    Ok(smallvec![x.clone()])
}

/// TF's `_EnsureShapeGrad`: the gradient passes through.
fn grad_ensure_shape(_: &mut Graph, _: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    Ok(vec![grads[0]])
}

pub(crate) fn register(r: &mut Registry) {
    // TF: ops.NotDifferentiable("Shape"); the kernel reads only the dimensions, on the host
    r.add(
        def("Shape", "Shape", Arity::Fixed(1), infer_shape, kernel_shape, GpuSupport::None, None).not_differentiable().with_attrs(attrs!["out_type" => Type]),
    );
    r.add(
        OpDef {
            inexpensive: true,
            ..def("EnsureShape", "EnsureShape", Arity::Fixed(1), infer_ensure_shape, kernel_ensure_shape, GpuSupport::Any, Some(grad_ensure_shape))
        }
        .launched_as(GpuLaunch::DeviceHandled)
        .with_attrs(attrs!["shape" => Shape]),
    );
    let two = Arity::Fixed(2);
    // the CUDA device runs them through `standard_node` too (no kernel of their own)
    let gpu = |d: OpDef| d.launched_as(GpuLaunch::DeviceHandled);
    r.add(gpu(def("_SumToShapeOf", "SumToShapeOf", two, infer_broadcast_pair, kernel_to_shape_of, GPU_FLOATS, Some(grad_sum_to))));
    r.add(gpu(def("_BroadcastToShapeOf", "BroadcastToShapeOf", two, infer_broadcast_pair, kernel_to_shape_of, GPU_FLOATS, Some(grad_broadcast_to))));
    r.add(gpu(def("_ReshapeToShapeOf", "ReshapeToShapeOf", two, infer_reshape_to, kernel_to_shape_of, GPU_FLOATS, Some(grad_reshape_to))));
}
