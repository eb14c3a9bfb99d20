//! Functional control flow: `If` and `While` (TF2's ops, which `tf.cond` and
//! `tf.while_loop` build in TF2).
//!
//! `If` (ADCME's `cond`): `If(cond, input...)` runs `then_branch` on the inputs when the
//! Bool scalar `cond` is true and `else_branch` otherwise, and only that branch. Its outputs
//! are the branch's outputs; both branches take the inputs' dtypes and shapes and return the
//! same dtypes and shapes (checked when the node is built, naming the branch and position).
//!
//! Gradient (TF's `_IfGrad` in `cond_v2.py`): another `If` on the same `cond`, whose branches
//! are the gradients of the forward branches: each takes the forward inputs and the output
//! gradients and returns the inputs' gradients (zeros where a branch does not use an input),
//! so the backward pass also runs only the taken branch, and gradients of gradients follow.
//!
//! `While(input...)` (ADCME's `while_loop`): the loop variables start as the inputs; while
//! `cond` (a function of the loop variables returning a Bool scalar) is true and fewer than
//! `maximum_iterations` iterations ran (attr, -1: no limit), `body` (loop variables to loop
//! variables, same dtypes and shapes) replaces them; the outputs are their final values.
//! Tensors the loop only reads are loop variables that `body` passes through (TF2's
//! captures).
//!
//! Gradient: `WhileGrad(input..., output gradients...)`, which runs the loop again keeping
//! each iteration's loop variables, then runs `body`'s gradient function backwards over them
//! (TF2 stacks the intermediates in the forward loop instead; recomputing costs one more
//! forward loop and keeps the forward op's outputs as they are). A loop variable that
//! `body` only writes with scatters (a `TensorArray`) is not kept per iteration but rebuilt
//! backwards from its final value ([`Tape`]), so memory grows with the rows written, not
//! with iterations × its size. A loop variable that `body` passes through collects the
//! gradient of every iteration.
//!
//! Second derivatives: `WhileGrad`'s gradient is `WhileGradGrad(input..., output gradients...,
//! gradients of WhileGrad's outputs...)`, the reverse of WhileGrad's two sweeps (see
//! [`kernel_while_grad_grad`]); it has no gradient itself, so third derivatives through a
//! loop are an error naming it.
//!
//! The branch or body runs on the calling thread with the step's variable store
//! ([`Function::call`]). On a GPU the op is launched on the host ([`GpuLaunch::Host`], as
//! TF's `If` and `While` keep `cond` and loop control in host memory): each op a function
//! runs goes to the GPU when it has a GPU kernel for its dtypes, else to the host (Int32
//! loop counters; in `WhileGrad`, the scatters whose overwritten slices it keeps), so a
//! loop under `@gpu` needs no soft placement. A traced run records every node a branch,
//! `cond`, `body` or `body_grad` runs, per iteration, as `<node>/<attr>/<inner node>`
//! ([`crate::function::trace_calls`]).

use super::*;
use crate::autodiff::gradients;
use crate::function::Function;
use crate::graph::{NodeId, NodeSpec};
use crate::ops::scatter::UndoLog;
use std::sync::Arc;

/// The function in attr `k` of node `node` (op `op`); InvalidArgument naming both when the
/// attr is missing or not a function.
fn func_attr<'a>(op: &str, node: &str, attrs: &'a Attrs, k: &str) -> Result<&'a Arc<Function>> {
    match attrs.get(k) {
        Some(AttrValue::Func(f)) => Ok(f),
        _ => Err(OxiflowError::InvalidArgument(format!("{op} '{node}': attr '{k}' (a function) is missing"))),
    }
}

/// The branch functions of an `If` node's attrs.
fn branches<'a>(op: &str, node: &str, attrs: &'a Attrs) -> Result<[&'a Arc<Function>; 2]> {
    Ok([func_attr(op, node, attrs, "then_branch")?, func_attr(op, node, attrs, "else_branch")?])
}

/// The functional op's inputs followed by the gradient of each of its outputs (`ZerosLike`
/// of the output where none flows): the inputs of its gradient op.
fn inputs_and_output_grads(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Output>> {
    let mut inputs = node.inputs.clone();
    for (k, dy) in grads.iter().enumerate() {
        inputs.push(match dy {
            Some(d) => *d,
            None => g.op("ZerosLike", &[Output::new(node.id, k)])?,
        });
    }
    Ok(inputs)
}

/// `dtype of shape shape`, for messages.
fn describe(t: &TensorType) -> String {
    format!("{} of shape {}", t.dtype, t.shape)
}

/// Checks that two lists of types are equal, position by position: `count(a, b)` is the
/// error text when their lengths `a` and `b` differ, `item(k, a_k, b_k)` when entry `k`
/// does (both InvalidArgument naming the node).
fn check_same(
    ctx: &InferCtx,
    a: &[TensorType],
    b: &[TensorType],
    count: impl Fn(usize, usize) -> String,
    item: impl Fn(usize, &str, &str) -> String,
) -> Result<()> {
    if a.len() != b.len() {
        return Err(ctx.invalid(count(a.len(), b.len())));
    }
    // an unknown dimension on either side fits any size (TF's `is_compatible_with`)
    match a.iter().zip(b).position(|(x, y)| x.dtype != y.dtype || x.shape.merge(&y.shape).is_none()) {
        Some(k) => Err(ctx.invalid(item(k, &describe(&a[k]), &describe(&b[k])))),
        None => Ok(()),
    }
}

fn infer_if(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let cond = &ctx.inputs[0];
    if cond.dtype != DType::Bool || cond.shape.rank() != 0 {
        return Err(ctx.invalid(format!("cond must be a Bool scalar, got {}", describe(cond))));
    }
    let args = &ctx.inputs[1..];
    let [then_f, else_f] = branches(ctx.op, ctx.node, ctx.attrs)?;
    for (which, f) in [("then_branch", then_f), ("else_branch", else_f)] {
        check_same(
            ctx,
            &f.input_types()?,
            args,
            |a, b| format!("{which} takes {a} inputs, the node gives {b}"),
            |k, a, b| format!("input {k}: {which} takes {a}, the node gives {b}"),
        )?;
    }
    let outs = then_f.output_types()?;
    check_same(
        ctx,
        &outs,
        &else_f.output_types()?,
        |a, b| format!("then_branch returns {a} outputs, else_branch {b}"),
        |k, a, b| format!("output {k}: then_branch returns {a}, else_branch {b}"),
    )?;
    Ok(outs)
}

fn kernel_if(ctx: &KernelCtx) -> Result<Outputs> {
    // on a GPU, `cond` may be in device memory (TF's `If` reads it in host memory)
    let taken = match &ctx.inputs[0].to_host()? {
        Tensor::Bool(b) => b.iter().next().copied().unwrap_or(false),
        t => return Err(ctx.error(format!("cond must be a Bool scalar, got {}", t.dtype()))),
    };
    let [then_f, else_f] = branches(ctx.node.op.name, &ctx.node.name, &ctx.node.attrs)?;
    let (f, attr) = if taken { (then_f, "then_branch") } else { (else_f, "else_branch") };
    let outs = f.call(&ctx.inputs[1..], ctx.state, attr, None).map_err(|e| ctx.error(format!("in {attr}: {e}")))?;
    Ok(Outputs::from_vec(outs))
}

/// The gradient function of branch `f`: inputs `f`'s inputs then one gradient per output of
/// `f` (of its type), outputs the gradient of each input (`ZerosLike` where none flows).
///
/// The gradient function runs the forward ops of `f` again (`WhileGrad` also reruns the
/// loop), so a stateful op in `f` (a random op: `RandomStandardNormal`) would give the
/// gradient other values than the forward pass used: InvalidArgument naming the op, as a
/// silently wrong gradient is worse than none. MPI ops are stateful only so that they are
/// never folded or merged: run again on the same inputs they give the same values, and
/// every rank builds the same gradient function and runs its nodes in one order
/// ([`Function::call`]), so each rank's replayed collectives meet the others'.
fn branch_gradient(node: &Node, f: &Function) -> Result<Function> {
    let replays_differently = |n: &&Node| n.op.stateful && n.op.name != "Placeholder" && !crate::collective::is_collective(n.op.name);
    if let Some(n) = f.graph().nodes().iter().find(replays_differently) {
        return Err(OxiflowError::InvalidArgument(format!(
            "{} '{}': no gradient through a function holding the stateful op {} '{}' (the gradient reruns the function, which would draw other values)",
            node.op.name, node.name, n.op.name, n.name
        )));
    }
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
    let (then_g, else_g) = (Arc::new(branch_gradient(node, then_f)?), Arc::new(branch_gradient(node, else_f)?));
    let inputs = inputs_and_output_grads(g, node, grads)?;
    let spec = NodeSpec::new("If", &inputs).attr("then_branch", AttrValue::Func(then_g)).attr("else_branch", AttrValue::Func(else_g));
    let grad = g.add_node(spec)?;
    let mut out = vec![None];
    out.extend((0..node.inputs.len() - 1).map(|k| Some(Output::new(grad, k))));
    Ok(out)
}

// ---------------------------------------------------------------- While

/// The `cond` and `body` functions of a `While` or `WhileGrad` node, and its iteration limit
/// (`None`: none).
fn loop_fns<'a>(op: &str, node: &str, attrs: &'a Attrs) -> Result<(&'a Arc<Function>, &'a Arc<Function>, Option<u64>)> {
    let max = super::shape_ops::int_or(attrs, op, "maximum_iterations", -1)?;
    Ok((func_attr(op, node, attrs, "cond")?, func_attr(op, node, attrs, "body")?, u64::try_from(max).ok()))
}

/// Checks that `f` takes `types` (as `which` of a loop).
fn check_takes(ctx: &InferCtx, which: &str, f: &Function, types: &[TensorType]) -> Result<()> {
    check_same(
        ctx,
        &f.input_types()?,
        types,
        |a, b| format!("{which} takes {a} inputs, the loop has {b} loop variables"),
        |k, a, b| format!("loop variable {k}: {which} takes {a}, the loop gives {b}"),
    )
}

fn infer_while(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let vars = ctx.inputs;
    let (cond, body, _) = loop_fns(ctx.op, ctx.node, ctx.attrs)?;
    check_takes(ctx, "cond", cond, vars)?;
    check_takes(ctx, "body", body, vars)?;
    match &cond.output_types()?[..] {
        [t] if t.dtype == DType::Bool && t.shape.rank() == 0 => {}
        other => {
            let got: Vec<String> = other.iter().map(describe).collect();
            return Err(ctx.invalid(format!("cond must return one Bool scalar, returns [{}]", got.join(", "))));
        }
    }
    check_same(
        ctx,
        vars,
        &body.output_types()?,
        |a, b| format!("body returns {b} values for {a} loop variables"),
        |k, a, b| format!("loop variable {k} enters the loop as {a} and body returns {b} (its shape may not change)"),
    )?;
    Ok(vars.to_vec())
}

/// What `WhileGrad` keeps of each iteration of the forward loop to run `body`'s gradient
/// backwards over it. A loop variable that `body` returns as its input updated by scatters
/// only (a `TensorArray` it writes, state it `scatter_update`s; one it passes through, with
/// no scatter) is not kept: each iteration records what its scatters overwrote
/// ([`crate::ops::scatter::ScatterUndo`]) and the backward sweep rebuilds the variable from
/// the loop's final value, undoing the last write first. Memory is then O(iterations × slices written), not
/// O(iterations × tensor size), as TF2's `while_v2` accumulates only the values its gradient
/// reads; a copy per iteration of a `TensorArray` written over n steps is O(n²).
struct Tape {
    /// Per loop variable: whether it is rebuilt, not kept.
    rebuilt: Vec<bool>,
    /// The scatter nodes of `body` that the rebuilt variables go through, each with its
    /// variable.
    taps: Vec<NodeId>,
    tap_var: Vec<usize>,
    /// Per iteration: the loop variables `body` got (a rebuilt one as a placeholder scalar)
    /// and what the taps overwrote, in the order they ran.
    iterations: Vec<(Vec<Tensor>, UndoLog)>,
}

impl Tape {
    /// A tape keeping every loop variable (`WhileGradGrad` reads them in both directions).
    fn keeping_all(n: usize) -> Tape {
        Tape { rebuilt: vec![false; n], taps: Vec::new(), tap_var: Vec::new(), iterations: Vec::new() }
    }

    /// A tape rebuilding each of `body`'s loop variables that [`scatter_chain`] finds.
    fn rebuilding(body: &Function) -> Tape {
        let mut t = Tape::keeping_all(body.inputs().len());
        for k in 0..t.rebuilt.len() {
            if let Some(chain) = scatter_chain(body, k) {
                t.rebuilt[k] = true;
                t.tap_var.extend(chain.iter().map(|_| k));
                t.taps.extend(chain);
            }
        }
        t
    }
}

/// The scatter nodes through which `body` returns loop variable `k` as its input updated
/// (output k is `TensorScatter*(... TensorScatter*(input k, ...) ..., ...)`, `Identity`s
/// between allowed), last first; None when output k is anything else.
fn scatter_chain(body: &Function, k: usize) -> Option<Vec<NodeId>> {
    let (g, input) = (body.graph(), *body.inputs().get(k)?);
    let mut o = *body.outputs().get(k)?;
    let mut chain = Vec::new();
    while o != input {
        let n = g.node(o.node).ok()?;
        match n.inputs.first() {
            Some(&i) if o.index == 0 && crate::ops::scatter::is_scatter(n.op.name) => {
                chain.push(o.node);
                o = i;
            }
            Some(&i) if o.index == 0 && n.op.name == "Identity" => o = i,
            _ => return None,
        }
    }
    Some(chain)
}

/// Runs the loop from `vars`; with `tape`, records what `WhileGrad` needs of each iteration.
fn run_loop(ctx: &KernelCtx, mut vars: Vec<Tensor>, mut tape: Option<&mut Tape>) -> Result<Vec<Tensor>> {
    let (cond, body, max) = loop_fns(ctx.node.op.name, &ctx.node.name, &ctx.node.attrs)?;
    let mut i = 0u64;
    // the loop variables' dimensions before each body call (they move into it), one buffer
    let mut dims: Vec<Vec<usize>> = vec![Vec::new(); vars.len()];
    while max.is_none_or(|m| i < m) {
        let c = cond.call(&vars, ctx.state, "cond", Some(i)).map_err(|e| ctx.error(format!("in cond, iteration {i}: {e}")))?;
        match c.first().map(Tensor::to_host).transpose()?.as_ref() {
            Some(Tensor::Bool(b)) if b.iter().next() == Some(&true) => {}
            Some(Tensor::Bool(_)) => break,
            _ => return Err(ctx.error("cond did not return a Bool scalar")),
        }
        for (d, t) in dims.iter_mut().zip(&vars) {
            d.clear();
            d.extend_from_slice(t.dims());
        }
        // the body owns the variables it is given (a TensorArray's buffer is then updated in
        // place, Function::call_owned); a tape keeps the others, shared
        let args = std::mem::take(&mut vars);
        let next = match tape.as_deref_mut() {
            None => body.call_owned(args, ctx.state, "body", Some(i)),
            Some(t) => {
                let kept = args.iter().zip(&t.rebuilt).map(|(v, &r)| if r { Tensor::scalar(0i32) } else { v.clone() }).collect();
                body.call_undoable(args, ctx.state, "body", Some(i), &t.taps).map(|(next, undo)| {
                    t.iterations.push((kept, undo));
                    next
                })
            }
        }
        .map_err(|e| ctx.error(format!("in body, iteration {i}: {e}")))?;
        // a loop variable of unknown static size may not change size either (TF's
        // shape invariants are the loop variables' shapes)
        if let Some(k) = (0..dims.len().min(next.len())).find(|&k| next[k].dims() != dims[k]) {
            return Err(ctx.error(format!(
                "loop variable {k} changed shape from {} to {} in iteration {i}; the body must keep each loop variable's shape",
                Shape(dims[k].clone()),
                Shape(next[k].dims().to_vec())
            )));
        }
        vars = next;
        i += 1;
    }
    Ok(vars)
}

fn kernel_while(ctx: &KernelCtx) -> Result<Outputs> {
    Ok(Outputs::from_vec(run_loop(ctx, ctx.inputs.to_vec(), None)?))
}

fn infer_while_grad(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let n = ctx.inputs.len() / 2;
    let fits = |(a, b): (&TensorType, &TensorType)| a.dtype == b.dtype && a.shape.merge(&b.shape).is_some();
    if ctx.inputs.len() != 2 * n || !ctx.inputs[..n].iter().zip(&ctx.inputs[n..]).all(fits) {
        return Err(ctx.invalid("takes the loop's inputs, then one gradient of each loop variable's type"));
    }
    Ok(ctx.inputs[..n].to_vec())
}

/// The forward loop again, keeping each iteration's loop variables ([`Tape`]), then
/// `body_grad` (loop variables and the gradients of body's outputs to the gradients of its
/// inputs) from the last iteration to the first.
fn kernel_while_grad(ctx: &KernelCtx) -> Result<Outputs> {
    let n = ctx.inputs.len() / 2;
    let body_grad = func_attr(ctx.node.op.name, &ctx.node.name, &ctx.node.attrs, "body_grad")?;
    let (_, body, _) = loop_fns(ctx.node.op.name, &ctx.node.name, &ctx.node.attrs)?;
    let mut tape = Tape::rebuilding(body);
    // a rebuilt variable goes back from its final value, one iteration at a time
    let mut rebuilt = run_loop(ctx, ctx.inputs[..n].to_vec(), Some(&mut tape))?;
    let Tape { rebuilt: is_rebuilt, taps, tap_var, iterations } = tape;
    let mut d: Vec<Tensor> = ctx.inputs[n..].to_vec();
    for (i, (mut args, undo)) in iterations.into_iter().enumerate().rev() {
        for (id, u) in undo.iter().rev() {
            let k = taps.iter().position(|t| t == id).map(|p| tap_var[p]).ok_or_else(|| ctx.error("internal: an undo record of no loop variable"))?;
            let t = std::mem::replace(&mut rebuilt[k], Tensor::scalar(0i32));
            rebuilt[k] = crate::ops::scatter::scatter_restore(t, u).map_err(|e| ctx.error(format!("iteration {i}: {e}")))?;
        }
        for k in (0..n).filter(|&k| is_rebuilt[k]) {
            args[k] = rebuilt[k].clone();
        }
        args.extend(d);
        // owned: the gradient of a TensorArray is then updated in place too
        d = body_grad
            .call_owned(args, ctx.state, "body_grad", Some(i as u64))
            .map_err(|e| ctx.error(format!("in the gradient of body, iteration {i}: {e}")))?;
    }
    Ok(Outputs::from_vec(d))
}

fn infer_while_grad_grad(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let n = ctx.inputs.len() / 3;
    let fits = |(a, b): (&TensorType, &TensorType)| a.dtype == b.dtype && a.shape.merge(&b.shape).is_some();
    let ok = ctx.inputs.len() == 3 * n && (1..3).all(|k| ctx.inputs[..n].iter().zip(&ctx.inputs[k * n..(k + 1) * n]).all(fits));
    if !ok {
        return Err(
            ctx.invalid("takes the loop's inputs, the gradients of its outputs, then the gradients of WhileGrad's outputs, all of the loop variables' types")
        );
    }
    Ok(ctx.inputs[..2 * n].to_vec())
}

/// The gradient of `WhileGrad(x₀, ȳ) = x̄₀` for the loop `x_{i+1} = F(x_i)` (n iterations),
/// whose backward sweep is `x̄_n = ȳ`, `x̄_i = G(x_i, x̄_{i+1})` with `G(x, u) = J_F(x)ᵀ u`
/// (`body_grad`). Given the gradient `c` of `x̄₀`, reverse mode through both sweeps:
/// - forward over the backward sweep, `c₀ = c` and for i = 0..n−1
///   `(a_i, c_{i+1}) = ∇_{x,u} ⟨G(x_i, x̄_{i+1}), c_i⟩` (`body_grad_grad`, the gradient
///   function of `body_grad`): the gradient of `ȳ` is `c_n`;
/// - backward over the forward sweep, `x̃_n = 0`, `x̃_i = a_i + G(x_i, x̃_{i+1})` (the sum by
///   `accumulate`): the gradient of `x₀` is `x̃₀`.
///
/// Outputs: the gradients of x₀, then of ȳ.
fn kernel_while_grad_grad(ctx: &KernelCtx) -> Result<Outputs> {
    let n = ctx.inputs.len() / 3;
    let f = |k| func_attr(ctx.node.op.name, &ctx.node.name, &ctx.node.attrs, k);
    let (body_grad, body_grad_grad, accumulate) = (f("body_grad")?, f("body_grad_grad")?, f("accumulate")?);
    let mut tape = Tape::keeping_all(n);
    run_loop(ctx, ctx.inputs[..n].to_vec(), Some(&mut tape))?;
    let xs: Vec<Vec<Tensor>> = tape.iterations.into_iter().map(|(x, _)| x).collect();
    let iters = xs.len();
    // x̄_{i+1} for i = 0..iters−1
    let mut ubar: Vec<Vec<Tensor>> = vec![Vec::new(); iters];
    let mut u = ctx.inputs[n..2 * n].to_vec();
    for i in (0..iters).rev() {
        let mut args = xs[i].clone();
        args.extend(u.iter().cloned());
        let next =
            body_grad.call(&args, ctx.state, "body_grad", Some(i as u64)).map_err(|e| ctx.error(format!("in the gradient of body, iteration {i}: {e}")))?;
        ubar[i] = std::mem::replace(&mut u, next);
    }
    let mut c = ctx.inputs[2 * n..].to_vec();
    let mut a: Vec<Vec<Tensor>> = Vec::with_capacity(iters);
    for (i, (x, ub)) in xs.iter().zip(ubar).enumerate() {
        let mut args = x.clone();
        args.extend(ub);
        args.extend(c);
        let mut d = body_grad_grad
            .call(&args, ctx.state, "body_grad_grad", Some(i as u64))
            .map_err(|e| ctx.error(format!("in the second derivative of body, iteration {i}: {e}")))?;
        c = d.split_off(n);
        a.push(d);
    }
    let mut xt: Vec<Tensor> = ctx.inputs[..n].iter().map(|t| Tensor::filled(t.dtype(), t.dims(), 0.0)).collect();
    for (i, (x, ai)) in xs.into_iter().zip(a).enumerate().rev() {
        let mut args = x;
        args.extend(xt);
        let g = body_grad.call(&args, ctx.state, "body_grad", Some(i as u64)).map_err(|e| ctx.error(format!("in the gradient of body, iteration {i}: {e}")))?;
        let mut sum_args = g;
        sum_args.extend(ai);
        xt = accumulate.call(&sum_args, ctx.state, "accumulate", Some(i as u64))?;
    }
    xt.extend(c);
    Ok(Outputs::from_vec(xt))
}

/// A function adding two lists of tensors of `types`, entry by entry (`Add` for float
/// dtypes; the first operand as it is for the others, whose gradients are zeros).
fn sum_function(types: &[TensorType]) -> Result<Function> {
    let mut g = Graph::new();
    let mut inputs = Vec::new();
    for side in ["a", "b"] {
        for (k, t) in types.iter().enumerate() {
            inputs.push(g.placeholder(t.dtype, t.shape.dims(), Some(&format!("{side}_{k}")))?);
        }
    }
    let n = types.len();
    let outputs =
        (0..n).map(|k| if types[k].dtype.is_float() { g.op("Add", &[inputs[k], inputs[n + k]]) } else { Ok(inputs[k]) }).collect::<Result<Vec<_>>>()?;
    Function::new(g, inputs, outputs)
}

/// `WhileGradGrad(WhileGrad's inputs ++ its output gradients)` ([`kernel_while_grad_grad`]).
fn grad_while_grad(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let body_grad = func_attr(node.op.name, &node.name, &node.attrs, "body_grad")?;
    let body_grad_grad = Arc::new(branch_gradient(node, body_grad)?);
    let accumulate = Arc::new(sum_function(&body_grad.output_types()?)?);
    let inputs = inputs_and_output_grads(g, node, grads)?;
    let mut spec =
        NodeSpec::new("WhileGradGrad", &inputs).attr("body_grad_grad", AttrValue::Func(body_grad_grad)).attr("accumulate", AttrValue::Func(accumulate));
    for k in ["cond", "body", "body_grad", "maximum_iterations"] {
        if let Some(v) = node.attrs.get(k) {
            spec = spec.attr(k, v.clone());
        }
    }
    let grad = g.add_node(spec)?;
    Ok((0..node.inputs.len()).map(|k| Some(Output::new(grad, k))).collect())
}

/// `WhileGrad(inputs ++ output gradients)` (missing gradients are zeros) with the body's
/// gradient function ([`branch_gradient`]: loop variables and output gradients to input
/// gradients).
fn grad_while(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let (cond, body, _) = loop_fns(node.op.name, &node.name, &node.attrs)?;
    let body_grad = Arc::new(branch_gradient(node, body)?);
    let inputs = inputs_and_output_grads(g, node, grads)?;
    let mut spec = NodeSpec::new("WhileGrad", &inputs)
        .attr("cond", AttrValue::Func(cond.clone()))
        .attr("body", AttrValue::Func(body.clone()))
        .attr("body_grad", AttrValue::Func(body_grad));
    if let Some(m) = node.attrs.get("maximum_iterations") {
        spec = spec.attr("maximum_iterations", m.clone());
    }
    let grad = g.add_node(spec)?;
    Ok((0..node.inputs.len()).map(|k| Some(Output::new(grad, k))).collect())
}

pub(crate) fn register(r: &mut Registry) {
    r.add(
        super::math::def("If", "If", Arity::AtLeast(1), infer_if, kernel_if, GpuSupport::Any, Some(grad_if))
            .launched_as(GpuLaunch::Host)
            .with_attrs(attrs!["then_branch" => Func, "else_branch" => Func]),
    );
    r.add(
        super::math::def("While", "while", Arity::AtLeast(1), infer_while, kernel_while, GpuSupport::Any, Some(grad_while))
            .launched_as(GpuLaunch::Host)
            .with_attrs(attrs!["cond" => Func, "body" => Func, "maximum_iterations" => Int]),
    );
    r.add(
        super::math::def("WhileGrad", "WhileGrad", Arity::AtLeast(2), infer_while_grad, kernel_while_grad, GpuSupport::Any, Some(grad_while_grad))
            .launched_as(GpuLaunch::Host)
            .with_attrs(attrs!["cond" => Func, "body" => Func, "body_grad" => Func, "maximum_iterations" => Int]),
    );
    r.add(
        super::math::def("WhileGradGrad", "WhileGradGrad", Arity::AtLeast(3), infer_while_grad_grad, kernel_while_grad_grad, GpuSupport::Any, None)
            .launched_as(GpuLaunch::Host)
            .with_attrs(attrs![
                "cond" => Func,
                "body" => Func,
                "body_grad" => Func,
                "body_grad_grad" => Func,
                "accumulate" => Func,
                "maximum_iterations" => Int
            ]),
    );
}

#[cfg(test)]
#[path = "functional_tests.rs"]
mod tests;
