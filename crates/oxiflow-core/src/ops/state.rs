//! Ops that hold or move data without computing: `Const`, `Placeholder`,
//! `PlaceholderWithDefault`, `VariableV2`, `Assign`, `Identity`, `IdentityN`, `NoOp`.

use super::*;

/// `Const`: attr `value` (a tensor), attr `dtype`. TF's `constant_op.constant`.
fn infer_const(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let t = ctx.attrs.get_tensor(ctx.op, "value")?;
    Ok(vec![TensorType::new(t.dtype(), t.shape())])
}
fn kernel_const(ctx: &KernelCtx) -> Result<Outputs> {
    Ok(smallvec![ctx.node.attrs.get_tensor("Const", "value")?.clone()])
}

/// The type a node declares by attrs `dtype` and `shape` (scalar when absent); `partial`:
/// the shape may have unknown dimensions ([`crate::shape::UNKNOWN`]).
fn declared(ctx: &InferCtx, partial: bool) -> Result<Vec<TensorType>> {
    let dtype = ctx.attrs.get_type(ctx.op, "dtype")?;
    let shape = match (ctx.attrs.contains_key("shape"), partial) {
        (false, _) => Vec::new(),
        (true, true) => ctx.attrs.get_partial_shape(ctx.op, "shape")?,
        (true, false) => ctx.attrs.get_shape(ctx.op, "shape")?,
    };
    Ok(vec![TensorType::new(dtype, Shape(shape))])
}

/// `Placeholder`: attrs `dtype`, `shape` (dimensions may be unknown, TF's partial shape).
/// Must be fed.
fn infer_placeholder(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    declared(ctx, true)
}

/// `VariableV2`: attrs `dtype`, `shape` (fully defined).
fn infer_variable(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    declared(ctx, false)
}
fn kernel_placeholder(ctx: &KernelCtx) -> Result<Outputs> {
    let t = &ctx.node.outputs[0];
    Err(OxiflowError::InvalidArgument(format!(
        "You must feed a value for placeholder tensor '{}' with dtype {} and shape {}",
        ctx.node.name,
        t.dtype.tf_name(),
        t.shape
    )))
}

/// `VariableV2`: attrs `dtype`, `shape`; its output is the variable's current value.
fn kernel_variable(ctx: &KernelCtx) -> Result<Outputs> {
    ctx.state
        .read_variable(ctx.node.id)
        .map(|t| smallvec![t])
        .ok_or_else(|| OxiflowError::Uninitialized { variable: ctx.node.name.clone(), node: ctx.node.name.clone() })
}

/// `Assign(ref, value)`: stores `value` in the variable, outputs it. Shapes and dtypes must
/// match (TF `validate_shape=True`).
fn infer_assign(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let (v, x) = (&ctx.inputs[0], &ctx.inputs[1]);
    if v.dtype != x.dtype {
        return Err(ctx.dtype_error(v.dtype, x.dtype, " (value assigned to a variable)"));
    }
    if v.shape != x.shape {
        return Err(ctx.shape_error(&v.shape, &x.shape, " (variable and assigned value)"));
    }
    Ok(vec![v.clone()])
}
fn kernel_assign(ctx: &KernelCtx) -> Result<Outputs> {
    let var = ctx.node.inputs[0].node;
    let value = ctx.inputs[0].clone();
    ctx.state.assign_variable(var, value.clone())?;
    Ok(smallvec![value])
}

fn kernel_identity(ctx: &KernelCtx) -> Result<Outputs> {
    Ok(smallvec![ctx.inputs[0].clone()])
}
fn grad_identity(_: &mut Graph, _: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    Ok(vec![grads[0]])
}
/// `IdentityN`: any number of tensors of any dtypes, each output its input (TF's
/// `array_ops.identity_n`). Its gradient passes each output's gradient to its input, unless
/// the node has [`crate::autodiff::CUSTOM_GRADIENT_ATTR`], which `tf.custom_gradient` (and
/// ADCME's `register`) set: then the caller of the backward pass builds it
/// ([`crate::autodiff::GradientRun`]).
fn infer_identity_n(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    Ok(ctx.inputs.to_vec())
}
fn kernel_identity_n(ctx: &KernelCtx) -> Result<Outputs> {
    Ok(ctx.inputs.iter().cloned().collect())
}
fn grad_identity_n(_: &mut Graph, _: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    Ok(grads.to_vec())
}
fn grad_placeholder_with_default(_: &mut Graph, _: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    Ok(vec![grads[0]])
}

fn kernel_noop(_: &KernelCtx) -> Result<Outputs> {
    Ok(smallvec![])
}

pub(crate) fn register(r: &mut Registry) {
    // run by the device itself (no kernel launch), no gradient unless marked below
    let base = |name, default_name, arity, infer, kernel| {
        super::math::def(name, default_name, arity, infer, kernel, GpuSupport::Any, None).launched_as(GpuLaunch::DeviceHandled)
    };
    const TYPED: &[AttrDef] = attrs!["dtype" => Type, "shape" => Shape];
    r.add(
        OpDef { inexpensive: true, ..base("Const", "Const", Arity::Fixed(0), infer_const, kernel_const) }
            .not_differentiable()
            .with_attrs(attrs!["value" => Tensor, "dtype" => Type]),
    );
    r.add(
        OpDef { stateful: true, inexpensive: true, ..base("Placeholder", "Placeholder", Arity::Fixed(0), infer_placeholder, kernel_placeholder) }
            .not_differentiable()
            .with_attrs(TYPED),
    );
    r.add(
        OpDef {
            grad: Gradient::Fn(grad_placeholder_with_default),
            ..base("PlaceholderWithDefault", "PlaceholderWithDefault", Arity::Fixed(1), infer_same, kernel_identity)
        }
        .with_attrs(TYPED),
    );
    r.add(
        OpDef { stateful: true, inexpensive: true, ..base("VariableV2", "Variable", Arity::Fixed(0), infer_variable, kernel_variable) }
            .not_differentiable()
            .with_attrs(attrs!["dtype" => Type, "shape" => Shape, "container" => Str, "shared_name" => Str]),
    );
    r.add(
        OpDef { ref_inputs: &[0], stateful: true, ..base("Assign", "Assign", Arity::Fixed(2), infer_assign, kernel_assign) }
            .not_differentiable()
            .with_attrs(attrs!["validate_shape" => Bool, "use_locking" => Bool]),
    );
    r.add(OpDef { grad: Gradient::Fn(grad_identity), inexpensive: true, ..base("Identity", "Identity", Arity::Fixed(1), infer_same, kernel_identity) });
    r.add(
        OpDef {
            grad: Gradient::Fn(grad_identity_n),
            inexpensive: true,
            ..base("IdentityN", "IdentityN", Arity::AtLeast(1), infer_identity_n, kernel_identity_n)
        }
        .with_attrs(attrs!["_gradient_op_type" => Str]),
    );
    r.add(OpDef { inexpensive: true, ..base("NoOp", "NoOp", Arity::Fixed(0), infer_none, kernel_noop) }.not_differentiable());
}
