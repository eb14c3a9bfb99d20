//! Reverse-mode automatic differentiation on the graph: [`gradients`], TF's
//! `tf.gradients` (`gradients_util._GradientsHelper`), which ADCME's `gradients(ys, xs;
//! colocate)` calls.
//!
//! Gradient nodes are ordinary graph nodes built by each op's gradient function
//! ([`crate::ops::OpDef::grad`]) inside a `gradients` name scope, so they get TF's names
//! (`gradients/Cos_grad/Sin`, `gradients_1/AddN`) and TF's placement: with `colocate`,
//! each gradient op is colocated with its forward op (`colocate_gradients_with_ops`).

use crate::error::{OxiflowError, Result};
use crate::graph::{Graph, Node, NodeSpec, Output};
use crate::ops::Gradient;
use rustc_hash::FxHashMap;

/// Symbolic partial derivatives of `sum(ys)` with respect to each of `xs`
/// (TF's `tf.gradients(ys, xs, grad_ys, colocate_gradients_with_ops=colocate)`).
///
/// * `ys`, `xs`: outputs of this graph. A variable may be given as its `VariableV2`
///   output (what `Graph::variable` returns): the gradient reaching it through its
///   `<name>/read` snapshot is returned.
/// * `grad_ys`: the initial gradient of each `y` (same dtype and shape as the `y`);
///   by default ones named `gradients/grad_ys_<i>`: a `Const` for a scalar `y`, else
///   `OnesLike(y)`.
/// * `colocate`: build each gradient op (and the `AddN` summing gradients of one forward
///   op's outputs) inside `colocate_with(forward op)`, giving it the forward op's
///   colocation group (`loc:@<forward name>`) and requested device. Otherwise gradient ops
///   take whatever device scope is active.
///
/// Returns one entry per `x`: its summed gradient (same dtype and shape as `x`), or `None`
/// when no `y` depends on `x` through float tensors (ADCME returns `nothing`).
///
/// Only ops on a path from some `x` to some `y` are differentiated. Ops without a gradient
/// function, non-float tensors and reference inputs (`Assign`'s variable) pass no
/// gradient (TF's `NotDifferentiable`). Several gradients reaching one tensor are summed
/// with one `AddN` in the `gradients` scope.
///
/// Errors: unknown outputs, `grad_ys` of the wrong length, dtype or shape, a failing
/// gradient function (`ShapeMismatch`, ...), or a float path through an op that has no
/// gradient and is not marked not-differentiable (TF's `LookupError: No gradient defined for
/// operation '<name>' (op type: <Op>)`, here `NotFound`). On error the graph is as it was:
/// the nodes built so far are removed, and the name and colocation scopes are restored.
pub fn gradients(g: &mut Graph, ys: &[Output], xs: &[Output], grad_ys: Option<&[Output]>, colocate: bool) -> Result<Vec<Option<Output>>> {
    for &o in ys.iter().chain(xs) {
        g.output_type(o)?;
    }
    if let Some(gy) = grad_ys {
        check_grad_ys(g, ys, gy)?;
    }
    let len = g.len();
    g.push_name_scope("gradients");
    let result = Backprop { colocate, grads: FxHashMap::default() }.run(g, ys, xs, grad_ys);
    g.pop_name_scope();
    if result.is_err() {
        g.truncate(len);
    }
    result
}

fn check_grad_ys(g: &Graph, ys: &[Output], grad_ys: &[Output]) -> Result<()> {
    if grad_ys.len() != ys.len() {
        return Err(OxiflowError::InvalidArgument(format!("gradients: passed {} grad_ys for {} ys", grad_ys.len(), ys.len())));
    }
    for (&y, &gy) in ys.iter().zip(grad_ys) {
        let (ty, tg) = (g.output_type(y)?, g.output_type(gy)?);
        if ty != tg {
            return Err(OxiflowError::InvalidArgument(format!(
                "gradients: grad_ys {} has dtype {} and shape {}, but ys {} has dtype {} and shape {}",
                g.tensor_name(gy),
                tg.dtype,
                tg.shape,
                g.tensor_name(y),
                ty.dtype,
                ty.shape
            )));
        }
    }
    Ok(())
}

/// Runs `f` inside `colocate_with(node)` when `on`, popping the scope on every path.
fn colocated<T>(g: &mut Graph, on: bool, node: usize, f: impl FnOnce(&mut Graph) -> Result<T>) -> Result<T> {
    if !on {
        return f(g);
    }
    g.push_colocation(node, false)?;
    let r = f(g);
    g.pop_colocation();
    r
}

/// The default seed of `ys[i]`, ones of its shape (TF's `_DefaultGradYs`, `fill(shape(y),
/// 1)` with the `1` named `grad_ys_<i>`): for a scalar `y` a `Const` 1 named `grad_ys_<i>`,
/// so a step that fetches only the gradient does not compute the loss for its shape
/// (Grappler folds TF's `Shape` of a known shape to a constant the same way); otherwise
/// `OnesLike(y)` of that name.
fn default_grad_y(g: &mut Graph, y: Output, i: usize) -> Result<Output> {
    let t = g.output_type(y)?;
    let spec = if t.shape.rank() == 0 {
        let one = crate::tensor::Tensor::filled(t.dtype, &[], 1.0);
        NodeSpec::new("Const", &[]).attr("value", one).attr("dtype", t.dtype)
    } else {
        NodeSpec::new("OnesLike", &[y])
    };
    g.op_spec(spec.name(format!("grad_ys_{i}")))
}

/// The state of one backward pass: gradients received so far by each forward tensor.
struct Backprop {
    colocate: bool,
    grads: FxHashMap<Output, Vec<Output>>,
}

impl Backprop {
    fn run(mut self, g: &mut Graph, ys: &[Output], xs: &[Output], grad_ys: Option<&[Output]>) -> Result<Vec<Option<Output>>> {
        for (i, &y) in ys.iter().enumerate() {
            let gy = match grad_ys {
                Some(gys) => gys[i],
                None => colocated(g, self.colocate, y.node, |g| default_grad_y(g, y, i))?,
            };
            self.grads.entry(y).or_default().push(gy);
        }
        let between = between_nodes(g, ys, xs);
        // Most gradient functions add two or three nodes per forward op.
        let n_between = between.iter().filter(|&&b| b).count();
        g.reserve(3 * n_between);
        self.grads.reserve(n_between);
        for id in (0..g.len()).rev().filter(|&id| between[id]) {
            let node = g.node(id)?.clone();
            self.backprop_node(g, &node, &between, xs)?;
        }
        xs.iter().map(|&x| self.aggregate(g, x)).collect()
    }

    /// Sums the gradients received by `o` (one `AddN` when there are several), records the
    /// sum as `o`'s only gradient and returns it.
    fn aggregate(&mut self, g: &mut Graph, o: Output) -> Result<Option<Output>> {
        let Some(list) = self.grads.get(&o) else { return Ok(None) };
        let sum = match list.as_slice() {
            [] => return Ok(None),
            [one] => *one,
            many => g.op("AddN", many)?,
        };
        self.grads.insert(o, vec![sum]);
        Ok(Some(sum))
    }

    /// Aggregates the gradients of `node`'s outputs and, unless it is a stop node, runs its
    /// gradient function in `<name>_grad`, recording the gradients of its inputs.
    fn backprop_node(&mut self, g: &mut Graph, node: &Node, between: &[bool], xs: &[Output]) -> Result<()> {
        colocated(g, self.colocate, node.id, |g| {
            let out_grads: Vec<Option<Output>> = (0..node.outputs.len()).map(|i| self.aggregate(g, Output::new(node.id, i))).collect::<Result<_>>()?;
            let grad_fn = match node.op.grad {
                Gradient::Fn(f) => Some(f),
                Gradient::Undefined | Gradient::NotDifferentiable => None,
            };
            // an op with any float output is differentiable (TF's `_IsBackpropagatable` per
            // tensor): a loop's Int64 counter beside its float loop variables does not stop it
            let differentiable = grad_fn.is_some() && node.outputs.iter().any(|t| t.dtype.is_float());
            // TF's stop ops: an x whose inputs do not depend on any x gets no gradient fn call.
            let is_x = xs.iter().any(|x| x.node == node.id);
            let stop = is_x && !node.inputs.iter().any(|i| between[i.node]);
            if out_grads.iter().all(Option::is_none) || !differentiable || stop {
                let float_out = node.outputs.iter().any(|t| t.dtype.is_float());
                // TF: an op with no registered gradient on a float path is an error, one
                // marked ops.NotDifferentiable is not (Gradient::NotDifferentiable)
                let undefined = matches!(node.op.grad, Gradient::Undefined);
                if undefined && float_out && !stop && !node.inputs.is_empty() && out_grads.iter().any(Option::is_some) {
                    return Err(OxiflowError::NotFound(format!("No gradient defined for operation '{}' (op type: {})", node.name, node.op.name)));
                }
                return Ok(());
            }
            let grad_fn = grad_fn.expect("checked above");
            g.push_name_scope(&crate::graph::concat(&[&node.name, "_grad"]));
            let in_grads = grad_fn(g, node, &out_grads);
            g.pop_name_scope();
            let in_grads = in_grads?;
            if in_grads.len() != node.inputs.len() {
                return Err(OxiflowError::Internal(format!(
                    "gradient of {} '{}' returned {} gradients for {} inputs",
                    node.op.name,
                    node.name,
                    in_grads.len(),
                    node.inputs.len()
                )));
            }
            for (i, (&inp, dx)) in node.inputs.iter().zip(in_grads).enumerate() {
                let Some(dx) = dx else { continue };
                let want = g.output_type(inp)?;
                if node.op.ref_inputs.contains(&i) || !want.dtype.is_float() {
                    continue;
                }
                let got = g.output_type(dx)?;
                if got.dtype != want.dtype || got.shape.merge(&want.shape).is_none() {
                    return Err(OxiflowError::Internal(format!(
                        "gradient of {} '{}' for input {i} has dtype {} and shape {}, expected {} and {}",
                        node.op.name, node.name, got.dtype, got.shape, want.dtype, want.shape
                    )));
                }
                self.grads.entry(inp).or_default().push(dx);
            }
            Ok(())
        })
    }
}

/// Marks the nodes on a path from some `x` to some `y` (TF's `_PendingCount`
/// `between_ops`): reached forward from the xs' nodes through float tensors and
/// non-reference inputs, and reaching some y backwards through such nodes.
fn between_nodes(g: &Graph, ys: &[Output], xs: &[Output]) -> Vec<bool> {
    let nodes = g.nodes();
    let mut reached = vec![false; nodes.len()];
    for x in xs {
        reached[x.node] = true;
    }
    let start = xs.iter().map(|x| x.node).min().unwrap_or(nodes.len());
    for n in nodes.iter().skip(start) {
        if reached[n.id] {
            continue;
        }
        reached[n.id] = n
            .inputs
            .iter()
            .enumerate()
            .any(|(i, inp)| !n.op.ref_inputs.contains(&i) && reached[inp.node] && nodes[inp.node].outputs[inp.index].dtype.is_float());
    }
    let mut between = vec![false; nodes.len()];
    let mut stack: Vec<usize> = ys.iter().map(|y| y.node).filter(|&n| reached[n]).collect();
    while let Some(id) = stack.pop() {
        if std::mem::replace(&mut between[id], true) {
            continue;
        }
        let n = &nodes[id];
        for (i, inp) in n.inputs.iter().enumerate() {
            if !n.op.ref_inputs.contains(&i) && reached[inp.node] && !between[inp.node] {
                stack.push(inp.node);
            }
        }
    }
    between
}
