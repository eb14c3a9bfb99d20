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
use crate::graph::NodeSpec;
use crate::tensor::Element;
use crate::with_array;

/// Ops whose shape function, gradient and kernel handle unknown dimensions; a node of any
/// other op with an input of partial shape is refused when it is added
/// ([`check_unknown_dims`]). The unary and binary elementwise families (GPU launch kinds
/// `Unary` and `Binary`) are in by construction: their outputs follow their inputs and
/// their gradients reduce through [`sum_to_like`].
const PARTIAL_SHAPE_OPS: &[&str] = &[
    "Identity",
    "StopGradient",
    "OnesLike",
    "ZerosLike",
    "Cast",
    "Reshape",
    "ExpandDims",
    "Squeeze",
    "Transpose",
    "MatMul",
    "AddN",
    "SelectV2",
    "Sum",
    "Mean",
    "Max",
    "Min",
    "ArgMax",
    "ArgMin",
    "Softmax",
    "LeakyRelu",
    "_SumToShapeOf",
    "_BroadcastToShapeOf",
    "_ReshapeToShapeOf",
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

/// Whether a node's static output shapes are partial (it then runs through [`specialize`]).
pub fn is_partial(node: &Node) -> bool {
    node.outputs.iter().any(|t| !t.shape.is_fully_defined())
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
    Ok(Node { outputs, ..node.clone() })
}

/// Runs `node`'s kernel on `inputs` (its data inputs), as its [`specialize`]d node when its
/// static shapes are partial: the reference evaluator's and function bodies' call.
pub fn run_kernel(node: &Node, inputs: &[Tensor], state: &dyn StateAccess) -> Result<Outputs> {
    if is_partial(node) {
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

/// `x` broadcast to the shape of `like` (NumPy rules), divided by the broadcast factor
/// (`like`'s element count over `x`'s) when `mean` (the gradient of `Mean`):
/// `_BroadcastToShapeOf(x, like)`.
pub fn broadcast_to_like(g: &mut Graph, x: Output, like: Output, mean: bool) -> Result<Output> {
    g.op_spec(NodeSpec::new("_BroadcastToShapeOf", &[x, like]).attr("mean", mean))
}

// ---------------------------------------------------------------- the ops

fn like_type(ctx: &InferCtx, x: &TensorType) -> TensorType {
    TensorType::new(x.dtype, ctx.inputs[1].shape.clone())
}

fn infer_sum_to(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let (x, like) = (&ctx.inputs[0], &ctx.inputs[1]);
    ctx.require_float(x.dtype)?;
    if Shape::broadcast(&like.shape, &x.shape).and_then(|b| b.merge(&x.shape)).is_none() {
        return Err(ctx.shape_error(&x.shape, &like.shape, " (the gradient is not a broadcast of the operand)"));
    }
    Ok(vec![like_type(ctx, x)])
}

fn infer_broadcast_to(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let (x, like) = (&ctx.inputs[0], &ctx.inputs[1]);
    ctx.require_float(x.dtype)?;
    if Shape::broadcast(&x.shape, &like.shape).and_then(|b| b.merge(&like.shape)).is_none() {
        return Err(ctx.shape_error(&x.shape, &like.shape, " (the input cannot be broadcast to the target shape)"));
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

/// Runs `op`'s kernel as a node with `attrs` and the one output `out` on `inputs`.
fn run_as(ctx: &KernelCtx, op: &str, attrs: Attrs, out: Shape, inputs: &[Tensor]) -> Result<Tensor> {
    let op = lookup(op)?;
    let node = Node { op, attrs, outputs: vec![TensorType::new(inputs[0].dtype(), out)], ..ctx.node.clone() };
    let mut outs = (op.kernel)(&KernelCtx { node: &node, inputs, state: ctx.state })?;
    Ok(outs.swap_remove(0))
}

fn kernel_sum_to(ctx: &KernelCtx) -> Result<Outputs> {
    let (grad, target) = (&ctx.inputs[0], Shape(ctx.inputs[1].dims().to_vec()));
    let shape = Shape(grad.dims().to_vec());
    if shape == target {
        return Ok(smallvec![grad.clone()]);
    }
    if Shape::broadcast(&target, &shape).as_ref() != Some(&shape) {
        return Err(ctx.error(format!("a gradient of shape {shape} is not a broadcast of shape {target}")));
    }
    let axes: Vec<i64> = target.broadcast_axes(&shape).into_iter().map(|a| a as i64).collect();
    let kept = Shape(shape.dims().iter().enumerate().filter(|(i, _)| !axes.contains(&(*i as i64))).map(|(_, &d)| d).collect());
    let mut attrs = Attrs::new();
    attrs.insert("axis".into(), AttrValue::Ints(axes));
    let summed = run_as(ctx, "Sum", attrs, kept, std::slice::from_ref(grad))?;
    Ok(smallvec![with_array!(&summed, a => Element::wrap(reshape_array(ctx, a, target.dims())?))])
}

fn kernel_broadcast_to(ctx: &KernelCtx) -> Result<Outputs> {
    let (x, target) = (&ctx.inputs[0], Shape(ctx.inputs[1].dims().to_vec()));
    let mut attrs = Attrs::new();
    attrs.insert("shape".into(), AttrValue::Shape(target.0.clone()));
    let out = if x.dims() == target.dims() { x.clone() } else { run_as(ctx, "BroadcastTo", attrs, target.clone(), std::slice::from_ref(x))? };
    if !ctx.node.attrs.get_bool_or(ctx.node.op.name, "mean", false)? {
        return Ok(smallvec![out]);
    }
    let n = (target.num_elements() / Shape(x.dims().to_vec()).num_elements().max(1)).max(1);
    Ok(smallvec![match out {
        Tensor::F32(a) => Tensor::F32(a.mapv(|v| v / n as f32).into_shared()),
        Tensor::F64(a) => Tensor::F64(a.mapv(|v| v / n as f64).into_shared()),
        t => return Err(ctx.error(format!("no kernel for {}", t.dtype()))),
    }])
}

fn kernel_reshape_to(ctx: &KernelCtx) -> Result<Outputs> {
    let dims = ctx.inputs[1].dims();
    Ok(smallvec![with_array!(&ctx.inputs[0], a => Element::wrap(reshape_array(ctx, a, dims)?))])
}

fn grad_sum_to(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None, None]) };
    Ok(vec![Some(broadcast_to_like(g, dy, node.inputs[0], false)?), None])
}

fn grad_broadcast_to(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None, None]) };
    if node.attrs.get_bool_or(node.op.name, "mean", false)? {
        return Err(OxiflowError::Unimplemented("the second derivative of Mean with unknown dimensions".into()));
    }
    Ok(vec![Some(sum_to_like(g, dy, node.inputs[0])?), None])
}

fn grad_reshape_to(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None, None]) };
    Ok(vec![Some(reshape_to_like(g, dy, node.inputs[0])?), None])
}

pub(crate) fn register(r: &mut Registry) {
    let two = Arity::Fixed(2);
    r.add(def("_SumToShapeOf", "SumToShapeOf", two, infer_sum_to, kernel_sum_to, GpuSupport::None, Some(grad_sum_to)));
    r.add(
        def("_BroadcastToShapeOf", "BroadcastToShapeOf", two, infer_broadcast_to, kernel_broadcast_to, GpuSupport::None, Some(grad_broadcast_to))
            .with_attrs(attrs!["mean" => Bool]),
    );
    r.add(def("_ReshapeToShapeOf", "ReshapeToShapeOf", two, infer_reshape_to, kernel_reshape_to, GpuSupport::None, Some(grad_reshape_to)));
}
