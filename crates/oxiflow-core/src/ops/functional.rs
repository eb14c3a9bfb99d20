//! Functional control flow: `If` (TF2's `If` op, which `tf.cond` builds in TF2 and which
//! ADCME's `cond` stands for): `If(cond, input...)` runs `then_branch` on the inputs when the
//! Bool scalar `cond` is true and `else_branch` otherwise, and only that branch. Its outputs
//! are the branch's outputs; both branches take the inputs' dtypes and shapes and return the
//! same dtypes and shapes (checked when the node is built, naming the branch and position).
//!
//! Gradient (TF's `_IfGrad` in `cond_v2.py`): another `If` on the same `cond`, whose branches
//! are the gradients of the forward branches: each takes the forward inputs and the output
//! gradients and returns the inputs' gradients (zeros where a branch does not use an input),
//! so the backward pass also runs only the taken branch, and gradients of gradients follow.
//!
//! CPU kernel only: the branch runs on the calling thread with the step's variable store
//! ([`Function::call`]); on a GPU without soft placement the placer refuses the op.

use super::*;
use crate::autodiff::gradients;
use crate::function::Function;
use crate::graph::NodeSpec;
use std::sync::Arc;

/// The branch functions of an `If` node's attrs.
fn branches<'a>(op: &str, node: &str, attrs: &'a Attrs) -> Result<[&'a Arc<Function>; 2]> {
    let get = |k: &str| match attrs.get(k) {
        Some(AttrValue::Func(f)) => Ok(f),
        _ => Err(OxiflowError::InvalidArgument(format!("{op} '{node}': attr '{k}' (a function) is missing"))),
    };
    Ok([get("then_branch")?, get("else_branch")?])
}

fn infer_if(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let cond = &ctx.inputs[0];
    if cond.dtype != DType::Bool || cond.shape.rank() != 0 {
        return Err(ctx.invalid(format!("cond must be a Bool scalar, got {} of shape {}", cond.dtype, cond.shape)));
    }
    let args = &ctx.inputs[1..];
    let [then_f, else_f] = branches(ctx.op, ctx.node, ctx.attrs)?;
    let mut outs: Option<Vec<TensorType>> = None;
    for (which, f) in [("then_branch", then_f), ("else_branch", else_f)] {
        let ins = f.input_types()?;
        if ins.len() != args.len() {
            return Err(ctx.invalid(format!("{which} takes {} inputs, the node gives {}", ins.len(), args.len())));
        }
        for (k, (want, got)) in ins.iter().zip(args).enumerate() {
            if want != got {
                return Err(ctx
                    .invalid(format!("input {k}: {which} takes {} of shape {}, the node gives {} of shape {}", want.dtype, want.shape, got.dtype, got.shape)));
            }
        }
        let o = f.output_types()?;
        match &outs {
            None => outs = Some(o),
            Some(first) if first.len() != o.len() => {
                return Err(ctx.invalid(format!("then_branch returns {} outputs, else_branch {}", first.len(), o.len())));
            }
            Some(first) => {
                for (k, (a, b)) in first.iter().zip(&o).enumerate() {
                    if a != b {
                        return Err(ctx.invalid(format!(
                            "output {k}: then_branch returns {} of shape {}, else_branch {} of shape {}",
                            a.dtype, a.shape, b.dtype, b.shape
                        )));
                    }
                }
            }
        }
    }
    Ok(outs.unwrap_or_default())
}

fn kernel_if(ctx: &KernelCtx) -> Result<Outputs> {
    let taken = match &ctx.inputs[0] {
        Tensor::Bool(b) => b.iter().next().copied().unwrap_or(false),
        t => return Err(ctx.error(format!("cond must be a Bool scalar, got {}", t.dtype()))),
    };
    let [then_f, else_f] = branches(ctx.node.op.name, &ctx.node.name, &ctx.node.attrs)?;
    let f = if taken { then_f } else { else_f };
    let outs = f.call(&ctx.inputs[1..], ctx.state).map_err(|e| ctx.error(format!("in {}: {e}", if taken { "then_branch" } else { "else_branch" })))?;
    Ok(Outputs::from_vec(outs))
}

/// The gradient function of branch `f`: inputs `f`'s inputs then one gradient per output of
/// `f` (of its type), outputs the gradient of each input (`ZerosLike` where none flows).
fn branch_gradient(f: &Function) -> Result<Function> {
    let mut g = f.graph().duplicate();
    let mut inputs = f.inputs().to_vec();
    let mut dys = Vec::new();
    for (k, t) in f.output_types()?.into_iter().enumerate() {
        let p = g.placeholder(t.dtype, t.shape.dims(), Some(&format!("grad_y_{k}")))?;
        dys.push(p);
        inputs.push(p);
    }
    let dx = gradients(&mut g, f.outputs(), f.inputs(), Some(&dys), false)?;
    let outputs = f.inputs().iter().zip(dx).map(|(&x, d)| d.map_or_else(|| g.op("ZerosLike", &[x]), Ok)).collect::<Result<Vec<_>>>()?;
    Function::new(g, inputs, outputs)
}

/// TF's `_IfGrad`: `If(cond, inputs ++ output gradients)` with the branches' gradient
/// functions; missing output gradients are zeros. No gradient for `cond`.
fn grad_if(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let [then_f, else_f] = branches(node.op.name, &node.name, &node.attrs)?;
    let (then_g, else_g) = (Arc::new(branch_gradient(then_f)?), Arc::new(branch_gradient(else_f)?));
    let mut inputs = node.inputs.clone();
    for (k, dy) in grads.iter().enumerate() {
        inputs.push(match dy {
            Some(d) => *d,
            None => g.op("ZerosLike", &[Output::new(node.id, k)])?,
        });
    }
    let spec = NodeSpec::new("If", &inputs).attr("then_branch", AttrValue::Func(then_g)).attr("else_branch", AttrValue::Func(else_g));
    let grad = g.add_node(spec)?;
    let mut out = vec![None];
    out.extend((0..node.inputs.len() - 1).map(|k| Some(Output::new(grad, k))));
    Ok(out)
}

pub(crate) fn register(r: &mut Registry) {
    r.add(
        super::math::def("If", "If", Arity::AtLeast(1), infer_if, kernel_if, GpuSupport::None, Some(grad_if))
            .with_attrs(attrs!["then_branch" => Func, "else_branch" => Func]),
    );
}
