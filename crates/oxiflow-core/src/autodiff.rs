//! Reverse-mode automatic differentiation on the graph: [`gradients`], TF's
//! `tf.gradients` (`gradients_util._GradientsHelper`), which ADCME's `gradients(ys, xs;
//! colocate)` calls.
//!
//! Gradient nodes are ordinary graph nodes built by each op's gradient function
//! ([`crate::ops::OpDef::grad`]) inside a `gradients` name scope, so they get TF's names
//! (`gradients/Cos_grad/Sin`, `gradients_1/AddN`) and TF's placement: with `colocate`,
//! each gradient op is colocated with its forward op (`colocate_gradients_with_ops`).

use crate::checkpointing::{Checkpointing, Recompute};
use crate::error::{OxiflowError, Result};
use crate::graph::{Graph, Node, NodeId, NodeSpec, Output};
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
/// when no `y` depends on `x` through float or complex tensors (ADCME returns `nothing`).
///
/// Only ops on a path from some `x` to some `y` are differentiated. Ops without a gradient
/// function, integer and Bool tensors and reference inputs (`Assign`'s variable) pass no
/// gradient (TF's `NotDifferentiable`). Several gradients reaching one tensor are summed
/// with one `AddN` in the `gradients` scope.
///
/// Errors: unknown outputs, `grad_ys` of the wrong length, dtype or shape, a failing
/// gradient function (`ShapeMismatch`, ...), or a float path through an op that has no
/// gradient and is not marked not-differentiable (TF's `LookupError: No gradient defined for
/// operation '<name>' (op type: <Op>)`, here `NotFound`). On error the graph is as it was:
/// the nodes built so far are removed, and the name and colocation scopes are restored.
pub fn gradients(g: &mut Graph, ys: &[Output], xs: &[Output], grad_ys: Option<&[Output]>, colocate: bool) -> Result<Vec<Option<Output>>> {
    let mut run = GradientRun::start(g, ys, xs, grad_ys, colocate)?;
    match run.resume(g, None)? {
        GradientStep::Done(grads) => Ok(grads),
        GradientStep::Custom { node, .. } => {
            let name = g.node(node).map(|n| n.name.clone()).unwrap_or_default();
            run.abort(g);
            Err(OxiflowError::Unimplemented(format!(
                "IdentityN '{name}' has a custom gradient (ADCME's register, tf.custom_gradient), which only the caller that made it can build: \
                 differentiate it with Julia's gradients, not inside a function body's gradient (while_loop, cond)"
            )))
        }
    }
}

/// The attribute marking an `IdentityN` whose gradient the caller supplies (TF's
/// `tf.custom_gradient` sets it to `CustomGradient-<id>` and overrides the gradient of
/// `IdentityN` by that name); its value is for the caller, the engine only tests for it.
pub const CUSTOM_GRADIENT_ATTR: &str = "_gradient_op_type";

/// What [`GradientRun::resume`] reached.
#[derive(Debug)]
pub enum GradientStep {
    /// The backward pass is complete: one entry per x, as [`gradients`] returns.
    Done(Vec<Option<Output>>),
    /// `node` is an `IdentityN` marked [`CUSTOM_GRADIENT_ATTR`] that received gradients:
    /// `out_grads` holds one entry per output (`None`: no gradient reached it). The caller
    /// builds the gradients of the node's inputs (in the open `gradients/<node>_grad` name
    /// scope, colocated with the node when the run colocates) and passes them to the next
    /// [`GradientRun::resume`].
    Custom { node: usize, out_grads: Vec<Option<Output>> },
}

/// One backward pass that can stop at custom-gradient nodes for the caller to build their
/// gradients, then go on: [`gradients`] for callers that supply gradients (TF's
/// `_GradientsHelper` calling a Python gradient function registered by
/// `tf.custom_gradient`). The graph stays open to other builds between calls (the caller's
/// gradient code adds ordinary nodes, and may run its own nested passes); the run's name
/// scope (`gradients`) and, while stopped, the node's `<name>_grad` scope and colocation
/// stay open, so nested builds must close what they open before the next `resume`.
///
/// On any error from `resume` the run is aborted: the nodes built since
/// [`GradientRun::start`] are removed (those of the caller's code too) and its scopes closed.
/// A run dropped unfinished must be [`GradientRun::abort`]ed to close its scopes.
#[derive(Debug)]
pub struct GradientRun {
    colocate: bool,
    grads: FxHashMap<Output, Vec<Output>>,
    between: Vec<bool>,
    xs: Vec<Output>,
    start_len: usize,
    /// Nodes with smaller ids are still to visit, in descending order.
    next: usize,
    /// The custom node whose input gradients the caller owes.
    stopped: Option<Node>,
    finished: bool,
    /// Set for a checkpointed pass that found checkpoints ([`GradientRun::start_checkpointed`]).
    recompute: Option<Recompute>,
}

impl GradientRun {
    /// Validates `ys`, `xs` and `grad_ys` (as [`gradients`] does), opens the `gradients`
    /// name scope and seeds the pass; nothing is differentiated until [`GradientRun::resume`].
    pub fn start(g: &mut Graph, ys: &[Output], xs: &[Output], grad_ys: Option<&[Output]>, colocate: bool) -> Result<GradientRun> {
        GradientRun::start_checkpointed(g, ys, xs, grad_ys, colocate, None)
    }

    /// [`GradientRun::start`] for a pass that recomputes forward tensors from checkpoints
    /// chosen by `checkpointing` instead of keeping them (ADCME's `gradient_checkpointing`;
    /// [`crate::checkpointing`] says what is kept and where copies run). `None`, or a mode
    /// that finds no checkpoint between the xs and the ys: an ordinary pass. The gradients
    /// have the ordinary pass's values.
    pub fn start_checkpointed(
        g: &mut Graph,
        ys: &[Output],
        xs: &[Output],
        grad_ys: Option<&[Output]>,
        colocate: bool,
        checkpointing: Option<Checkpointing>,
    ) -> Result<GradientRun> {
        for &o in ys.iter().chain(xs) {
            g.output_type(o)?;
        }
        if let Some(gy) = grad_ys {
            check_grad_ys(g, ys, gy)?;
        }
        let start_len = g.len();
        let between = between_nodes(g, ys, xs);
        let recompute = checkpointing.and_then(|mode| Recompute::plan(g, mode, &between, xs, ys));
        let mut run = GradientRun {
            colocate,
            grads: FxHashMap::default(),
            between,
            xs: xs.to_vec(),
            start_len,
            next: start_len,
            stopped: None,
            finished: false,
            recompute,
        };
        g.push_name_scope("gradients");
        for (i, &y) in ys.iter().enumerate() {
            let gy = match grad_ys {
                Some(gys) => Ok(gys[i]),
                None => colocated(g, colocate, y.node, |g| default_grad_y(g, y, i)),
            };
            match gy {
                Ok(gy) => run.grads.entry(y).or_default().push(gy),
                Err(e) => {
                    run.abort(g);
                    return Err(e);
                }
            }
        }
        // Most gradient functions add two or three nodes per forward op.
        let n_between = run.between.iter().filter(|&&b| b).count();
        g.reserve(3 * n_between);
        run.grads.reserve(n_between);
        Ok(run)
    }

    /// Goes on with the pass until it is complete or reaches a custom-gradient node.
    /// `supplied`: after a [`GradientStep::Custom`], the gradient of each of that node's
    /// inputs (`None` for none; integer and Bool inputs are ignored); `None` otherwise.
    ///
    /// Errors: `supplied` missing, of the wrong length, or a gradient whose dtype or shape
    /// differs from its input's (`InvalidArgument` naming the node and input); the errors
    /// of [`gradients`]; a run already complete or aborted (`FailedPrecondition`). The run
    /// is aborted on every error.
    pub fn resume(&mut self, g: &mut Graph, supplied: Option<&[Option<Output>]>) -> Result<GradientStep> {
        if self.finished {
            return Err(OxiflowError::FailedPrecondition("gradients: this backward pass is already complete or was aborted".into()));
        }
        let r = self.advance(g, supplied);
        if r.is_err() {
            self.abort(g);
        }
        r
    }

    fn advance(&mut self, g: &mut Graph, supplied: Option<&[Option<Output>]>) -> Result<GradientStep> {
        match (self.stopped.take(), supplied) {
            (Some(node), Some(dxs)) => {
                self.close_node_scopes(g);
                if dxs.len() != node.inputs.len() {
                    return Err(OxiflowError::InvalidArgument(format!(
                        "custom gradient of {} '{}': got {} gradients for its {} inputs",
                        node.op.name,
                        node.name,
                        dxs.len(),
                        node.inputs.len()
                    )));
                }
                self.record(g, &node, dxs.to_vec(), true)?;
            }
            (Some(node), None) => {
                self.close_node_scopes(g);
                return Err(OxiflowError::InvalidArgument(format!("custom gradient of {} '{}': no gradients supplied", node.op.name, node.name)));
            }
            (None, Some(_)) => {
                return Err(OxiflowError::InvalidArgument("gradients: gradients supplied, but the pass is not at a custom-gradient node".into()))
            }
            (None, None) => {}
        }
        while self.next > 0 {
            self.next -= 1;
            let id = self.next;
            if !self.between[id] {
                continue;
            }
            let node = g.node(id)?.clone();
            if let Some(out_grads) = self.backprop_node(g, &node)? {
                // stopped at a custom node: leave its scopes open for the caller's build
                if self.colocate {
                    g.push_colocation(node.id, false)?;
                }
                g.push_name_scope(&crate::graph::concat(&[&node.name, "_grad"]));
                self.stopped = Some(node.clone());
                return Ok(GradientStep::Custom { node: node.id, out_grads });
            }
        }
        let xs = std::mem::take(&mut self.xs);
        let res = xs.iter().map(|&x| self.aggregate(g, x)).collect::<Result<Vec<_>>>()?;
        self.finished = true;
        g.pop_name_scope();
        Ok(GradientStep::Done(res))
    }

    /// Abandons the pass: closes its scopes and removes every node built since it started.
    /// A no-op on a complete or aborted run.
    pub fn abort(&mut self, g: &mut Graph) {
        if self.finished {
            return;
        }
        if self.stopped.take().is_some() {
            self.close_node_scopes(g);
        }
        g.pop_name_scope();
        g.truncate(self.start_len);
        self.finished = true;
    }

    fn close_node_scopes(&self, g: &mut Graph) {
        g.pop_name_scope();
        if self.colocate {
            g.pop_colocation();
        }
    }
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

impl GradientRun {
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
    /// gradient function in `<name>_grad`, recording the gradients of its inputs. For a
    /// custom-gradient node that received gradients, returns them for the caller instead.
    fn backprop_node(&mut self, g: &mut Graph, node: &Node) -> Result<Option<Vec<Option<Output>>>> {
        colocated(g, self.colocate, node.id, |g| {
            let out_grads: Vec<Option<Output>> = (0..node.outputs.len()).map(|i| self.aggregate(g, Output::new(node.id, i))).collect::<Result<_>>()?;
            let grad_fn = match node.op.grad {
                Gradient::Fn(f) => Some(f),
                Gradient::Undefined | Gradient::NotDifferentiable => None,
            };
            // an op with any float or complex output is differentiable (TF's `_IsBackpropagatable` per
            // tensor): a loop's Int64 counter beside its float loop variables does not stop it
            let differentiable = grad_fn.is_some() && node.outputs.iter().any(|t| t.dtype.is_differentiable());
            // TF's stop ops: an x whose inputs do not depend on any x gets no gradient fn call.
            let is_x = self.xs.iter().any(|x| x.node == node.id);
            let stop = is_x && !node.inputs.iter().any(|i| self.between[i.node]);
            if out_grads.iter().all(Option::is_none) || !differentiable || stop {
                let float_out = node.outputs.iter().any(|t| t.dtype.is_differentiable());
                // TF: an op with no registered gradient on a float path is an error, one
                // marked ops.NotDifferentiable is not (Gradient::NotDifferentiable)
                let undefined = matches!(node.op.grad, Gradient::Undefined);
                if undefined && float_out && !stop && !node.inputs.is_empty() && out_grads.iter().any(Option::is_some) {
                    return Err(OxiflowError::NotFound(format!("No gradient defined for operation '{}' (op type: {})", node.name, node.op.name)));
                }
                return Ok(None);
            }
            if node.attrs.contains_key(CUSTOM_GRADIENT_ATTR) {
                return Ok(Some(out_grads));
            }
            let grad_fn = grad_fn.expect("checked above");
            // a checkpointed pass hands the gradient function recomputed forward tensors
            let substituted;
            let fwd = match self.recompute.as_mut() {
                Some(r) => {
                    let after: Vec<NodeId> = out_grads.iter().flatten().map(|o| o.node).collect();
                    substituted = r.substitute(g, node, &after)?;
                    &substituted
                }
                None => node,
            };
            g.push_name_scope(&crate::graph::concat(&[&node.name, "_grad"]));
            let in_grads = grad_fn(g, fwd, &out_grads);
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
            self.record(g, node, in_grads, false).map(|()| None)
        })
    }

    /// Records the gradient `in_grads[i]` of each float or complex, non-reference input of `node`,
    /// after checking its dtype and shape (a mismatch is the gradient function's bug,
    /// `Internal`, or the custom gradient's caller's, `InvalidArgument`).
    fn record(&mut self, g: &Graph, node: &Node, in_grads: Vec<Option<Output>>, custom: bool) -> Result<()> {
        for (i, (&inp, dx)) in node.inputs.iter().zip(in_grads).enumerate() {
            let Some(dx) = dx else { continue };
            let want = g.output_type(inp)?;
            if node.op.ref_inputs.contains(&i) || !want.dtype.is_differentiable() {
                continue;
            }
            let got = g.output_type(dx)?;
            if got.dtype != want.dtype || got.shape.merge(&want.shape).is_none() {
                let what = if custom { "custom gradient" } else { "gradient" };
                let msg = format!(
                    "{what} of {} '{}' for input {i} has dtype {} and shape {}, expected {} and {}",
                    node.op.name, node.name, got.dtype, got.shape, want.dtype, want.shape
                );
                return Err(if custom { OxiflowError::InvalidArgument(msg) } else { OxiflowError::Internal(msg) });
            }
            self.grads.entry(inp).or_default().push(dx);
        }
        Ok(())
    }
}

/// Marks the nodes on a path from some `x` to some `y` (TF's `_PendingCount`
/// `between_ops`): reached forward from the xs' nodes through float or complex tensors and
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
            .any(|(i, inp)| !n.op.ref_inputs.contains(&i) && reached[inp.node] && nodes[inp.node].outputs[inp.index].dtype.is_differentiable());
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
