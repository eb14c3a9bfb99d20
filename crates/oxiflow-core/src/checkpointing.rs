//! Gradient checkpointing: a backward pass that recomputes forward activations instead of
//! keeping them, ADCME's `gradient_checkpointing(type)`, which swaps `tf.gradients` for the
//! `gradients_speed`, `gradients_memory` or `gradients_collection` of the gradient-checkpointing
//! package (Chen et al. 2016, "Training deep nets with sublinear memory cost").
//!
//! A gradient function reads forward tensors: `Tanh`'s reads its output, `MatMul`'s its
//! inputs. In an ordinary pass those tensors stay alive from the forward op until the
//! backward pass reaches it. Here, when the pass reaches a forward op, the forward tensors
//! its gradient reads are taken from *checkpoints* (kept tensors) or else recomputed from
//! the nearest checkpoints by copies of the forward ops, and the gradient function is given
//! the copies. The executor frees each forward tensor after its last reader, so a tensor
//! that is neither a checkpoint nor read by a kept op dies during the forward pass and is
//! computed again, later, when the backward pass needs it.
//!
//! - Copies are named `gradients/recompute/<forward name>`, colocated with their forward op
//!   (same device) and computed once per pass. A copy whose inputs are all kept tensors
//!   waits, by control dependency, for the gradients of the forward op whose gradient first
//!   asked for it: recomputation starts when the backward pass reaches its segment.
//! - Kept, never recomputed: checkpoints, the xs, ys, tensors that do not depend on the xs
//!   (feeds, constants, their transformations), and the outputs of ops that must not run
//!   twice: stateful ops (random numbers, variables, `Assign`, MPI collectives, `Print`),
//!   ops with reference inputs or reading a `VariableV2` directly (a variable's `read`),
//!   function calls (`While`, `If`) and custom-gradient `IdentityN`s.
//! - A pass whose mode finds no checkpoint between the xs and the ys builds ordinary
//!   gradients (recomputing everything from the xs would save nothing). The package raises
//!   "no checkpoints nodes found" instead; Oxiflow's result is the same gradient either way.
//!
//! Gradients are the ordinary pass's values: the copies run the same kernels on the same
//! inputs.

use crate::error::{OxiflowError, Result};
use crate::graph::{Graph, Node, NodeId, NodeSpec, Output};
use crate::ops::AttrValue;
use rustc_hash::FxHashMap;

/// Which forward tensors a checkpointed backward pass keeps (ADCME's
/// `gradient_checkpointing(type)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checkpointing {
    /// `"speed"`: the outputs of the matrix products and convolutions (`MatMul`,
    /// `BatchMatMul`, `BatchMatMulV2`, `Conv2D`, `Conv2DBackpropInput`,
    /// `SparseTensorDenseMatMul`), the expensive ops, so only cheap ops are recomputed.
    Speed,
    /// `"memory"`: about `√n` of the `n` recomputable tensors, chosen evenly among the
    /// bottlenecks of the forward graph (tensors every path from the xs to the ys passes
    /// through, with no other recomputable tensor crossing them). With `√n` checkpoints the
    /// pass keeps `O(√n)` activations and recomputes each at most once.
    Memory,
    /// `"collection"`: the tensors in the graph collection `"checkpoints"`
    /// (`add_to_collection("checkpoints", t)`).
    Collection,
}

/// The ops whose outputs [`Checkpointing::Speed`] keeps.
pub const SPEED_CHECKPOINT_OPS: &[&str] = &["MatMul", "BatchMatMul", "BatchMatMulV2", "Conv2D", "Conv2DBackpropInput", "SparseTensorDenseMatMul"];

/// The name of the collection [`Checkpointing::Collection`] reads.
pub const CHECKPOINTS_COLLECTION: &str = "checkpoints";

impl Checkpointing {
    /// Parses ADCME's type string: `"speed"`, `"memory"` or `"collection"`.
    /// Errors: any other string (`InvalidArgument`, ADCME's `"ADCME: <type> not defined"`).
    pub fn parse(s: &str) -> Result<Checkpointing> {
        match s {
            "speed" => Ok(Checkpointing::Speed),
            "memory" => Ok(Checkpointing::Memory),
            "collection" => Ok(Checkpointing::Collection),
            _ => Err(OxiflowError::InvalidArgument(format!("gradient_checkpointing: type '{s}' not defined; use \"speed\", \"memory\" or \"collection\""))),
        }
    }
}

/// The recomputation state of one checkpointed backward pass.
#[derive(Debug)]
pub(crate) struct Recompute {
    /// Per forward node: its outputs are recomputed by a copy (not kept).
    recomputable: Vec<bool>,
    /// Forward node → its copy.
    copies: FxHashMap<NodeId, NodeId>,
}

/// Whether running `n` a second time gives the same outputs and costs nothing else.
fn copyable(g: &Graph, n: &Node) -> bool {
    !n.op.stateful
        && n.op.ref_inputs.is_empty()
        && !n.attrs.contains_key(crate::autodiff::CUSTOM_GRADIENT_ATTR)
        && !n.attrs.values().any(|a| matches!(a, AttrValue::Func(_)))
        && !n.inputs.iter().any(|i| g.nodes()[i.node].op.name == "VariableV2")
}

impl Recompute {
    /// Chooses the checkpoints of `mode` among the `between` nodes (on a path from an x to
    /// a y) and marks the rest recomputable. `None` when the mode finds no checkpoint (the
    /// pass is then an ordinary one).
    pub(crate) fn plan(g: &Graph, mode: Checkpointing, between: &[bool], xs: &[Output], ys: &[Output]) -> Option<Recompute> {
        let nodes = g.nodes();
        let mut candidate: Vec<bool> = nodes.iter().map(|n| between[n.id] && copyable(g, n)).collect();
        for o in xs.iter().chain(ys) {
            candidate[o.node] = false;
        }
        let checkpoint: Vec<NodeId> = match mode {
            Checkpointing::Speed => (0..nodes.len()).filter(|&i| candidate[i] && SPEED_CHECKPOINT_OPS.contains(&nodes[i].op.name)).collect(),
            Checkpointing::Collection => g.collection(CHECKPOINTS_COLLECTION).iter().map(|o| o.node).filter(|&i| i < candidate.len() && candidate[i]).collect(),
            Checkpointing::Memory => memory_checkpoints(g, &candidate, between),
        };
        if checkpoint.is_empty() {
            return None;
        }
        for i in checkpoint {
            candidate[i] = false;
        }
        Some(Recompute { recomputable: candidate, copies: FxHashMap::default() })
    }

    /// `node` as its gradient function should see it: inputs (and, when `node` itself is
    /// recomputed, its outputs, through the copy's id) replaced by recomputed copies where
    /// they are not kept. New root copies wait for `after` (the nodes of `node`'s output
    /// gradients). Ops that are not copyable are returned as they are.
    pub(crate) fn substitute(&mut self, g: &mut Graph, node: &Node, after: &[NodeId]) -> Result<Node> {
        if !copyable(g, node) {
            return Ok(node.clone());
        }
        let mut out = node.clone();
        for inp in out.inputs.iter_mut() {
            *inp = self.recompute(g, *inp, after)?;
        }
        if self.recomputable[node.id] {
            out.id = self.recompute(g, Output::new(node.id, 0), after)?.node;
        }
        Ok(out)
    }

    /// The tensor `o`, or its recomputed copy when `o` is not kept. Copies the missing part
    /// of `o`'s forward subgraph, inputs first (an explicit stack: a chain of thousands of
    /// ops must not exhaust the thread's stack).
    fn recompute(&mut self, g: &mut Graph, o: Output, after: &[NodeId]) -> Result<Output> {
        let mut stack = vec![(o.node, false)];
        while let Some((id, expanded)) = stack.pop() {
            if !self.needs_copy(id) {
                continue;
            }
            let inputs = g.node(id)?.inputs.clone();
            if !expanded {
                stack.push((id, true));
                stack.extend(inputs.iter().filter(|i| self.needs_copy(i.node)).map(|i| (i.node, false)));
                continue;
            }
            let copied: Vec<Output> = inputs.iter().map(|&i| self.copy_of(i)).collect();
            let root = copied == inputs;
            let orig = g.node(id)?;
            let mut spec = NodeSpec::new(orig.op.name, &copied).name(crate::graph::concat(&["recompute/", &orig.name]));
            spec.attrs = orig.attrs.clone();
            if root {
                spec.control_inputs = after.to_vec();
            }
            g.push_colocation(id, true)?;
            let made = g.add_node(spec);
            g.pop_colocation();
            self.copies.insert(id, made?);
        }
        Ok(self.copy_of(o))
    }

    fn needs_copy(&self, id: NodeId) -> bool {
        self.recomputable.get(id).copied().unwrap_or(false) && !self.copies.contains_key(&id)
    }

    fn copy_of(&self, o: Output) -> Output {
        match self.copies.get(&o.node) {
            Some(&c) => Output::new(c, o.index),
            None => o,
        }
    }
}

/// [`Checkpointing::Memory`]'s choice. Node ids are a topological order; a candidate `n` is
/// a bottleneck when no candidate before it has a reader after it among the `between`
/// nodes (nothing crosses `n` but tensors kept anyway: xs, variables, feeds). Of `b` bottlenecks among `c` candidates
/// it keeps every `⌈b / ⌈√c⌉⌉`-th, at most `⌈√c⌉` of them.
fn memory_checkpoints(g: &Graph, candidate: &[bool], between: &[bool]) -> Vec<NodeId> {
    let nodes = g.nodes();
    let mut last_reader: Vec<usize> = vec![0; nodes.len()];
    for n in nodes.iter().filter(|n| between[n.id]) {
        for i in &n.inputs {
            last_reader[i.node] = last_reader[i.node].max(n.id);
        }
    }
    let mut crossing = 0usize;
    let mut bottlenecks = Vec::new();
    for n in nodes.iter().filter(|n| candidate[n.id]) {
        if crossing <= n.id && last_reader[n.id] > n.id {
            bottlenecks.push(n.id);
        }
        crossing = crossing.max(last_reader[n.id]);
    }
    let c = candidate.iter().filter(|&&b| b).count();
    let keep = (c as f64).sqrt().ceil().max(1.0) as usize;
    if bottlenecks.len() <= keep {
        return bottlenecks;
    }
    let step = bottlenecks.len().div_ceil(keep);
    bottlenecks.into_iter().skip(step - 1).step_by(step).collect()
}
