//! Elementwise fusion, the graph optimization a session applies to a placed step before
//! executing it (as Grappler's remapper and XLA's auto-clustering do in TF): connected
//! elementwise float ops of one shape on one CPU device become one `_FusedElementwise` step
//! ([`crate::ops::fused`]), which computes them tile by tile without materializing the
//! tensors between them and pays the executor's per-step cost once.
//!
//! Only plans change: the graph, gradients, placement and `log_device_placement` see the
//! original nodes, and a traced step lists the ops it replaced. GPU devices (real or
//! emulated) keep their ops unfused, since the fused ops have no GPU kernel.
//!
//! Before the elementwise clusters are grown, a dense layer's `MatMul`, bias `Add` and
//! activation become one `_FusedMatMul` cluster ([`crate::fusion_matmul`]); its nodes
//! then join no elementwise cluster.
//!
//! Clustering walks the needed nodes in graph (topological) order and gives every unit
//! (a node left alone, or a cluster) a key `(level, position)`: a source has level 0, any
//! other unit one more than the highest level among the units it reads, and a cluster takes
//! the key of its first node. A node joins the cluster of one of its inputs only when every
//! other unit it reads has a smaller key than that cluster; so every edge between units goes
//! to a larger key, and fusing never makes a cycle (a cluster never both feeds and reads
//! another unit).
//!
//! A node that reads several clusters of its shape joins the one with the largest key and
//! brings the others in with it when nothing outside them has read them yet (`2 .* y .*
//! x .^ 1`: the power and the scaled seed are two clusters until their product joins them).
//! A node that can join none (it also reads a unit with a larger key, as a `SelectV2` reads
//! its condition) starts a cluster with its own key and brings in the same way the input
//! clusters nothing else has read. That keeps the rule: each merged cluster's inputs have
//! smaller keys than its own, so smaller than the key it joins, and its outputs are read
//! only by the joining node or by nodes not yet walked, which get larger keys.
//!
//! A node may join when its op is fusable ([`crate::ops::fused::fusable`]), it has one
//! Float32 or Float64 output, no control inputs, runs on a CPU device, and each input has
//! its dtype and either its shape, a single element (a scalar operand broadcast), or, next
//! to an operand of its shape, is a row `[1, n]` or column `[m, 1]` of its matrix shape
//! (a bias row, a softmax's row sums: [`crate::ops::fused_broadcast`]).
//!
//! Comparisons (`Greater`, `GreaterEqual`, `Less`, `LessEqual`, `Equal`) of such operands
//! join too, though their output is Bool: the cluster keeps each as a mask of 1s and 0s in
//! its float type, which a `SelectV2` of the cluster reads as its condition (so a `max`,
//! `relu`-style or `if_else` gradient runs as one step). A `SelectV2`'s condition may also
//! be a Bool input of the cluster's shape or one element, and a mask read outside the
//! cluster leaves it as a Bool output. A comparison reading a `Transpose` of a matrix stays
//! out: in Julia's programs that view is in the other memory order than the operand it is
//! compared with (`x >= x'` in `max(x, x')`'s gradient); the unfused kernel pairs the two in
//! transposing tiles and writes a one-byte mask, which was faster than the cluster's own
//! transposed reads and float mask (that gradient, f32 1024²: 2.6 ms fused against 2.2 when
//! the cluster copied the view first; 1.8-1.9 against 1.5-1.7 with its tile-by-tile
//! transposes).

use crate::dtype::DType;
use crate::graph::{Graph, Node, NodeId, Output};
use crate::ops::fused::{fusable, InputKind, Program, ProgramBuilder, Value};
use crate::ops::fused_broadcast::Vector;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

/// What a fused cluster computes.
#[derive(Debug)]
pub(crate) enum ClusterOp {
    /// A `_FusedElementwise` program.
    Elementwise(Program),
    /// A `_FusedMatMul` ([`crate::ops::matmul::FUSED_MATMUL`]): the `MatMul`'s transposes
    /// and the activation's op name, if one was fused.
    MatMul { transpose_a: bool, transpose_b: bool, activation: Option<&'static str> },
}

/// One fused cluster of a plan.
#[derive(Debug)]
pub(crate) struct Cluster {
    /// The nodes it replaces, in graph order.
    pub members: Vec<NodeId>,
    /// Its external inputs (the step's inputs, in order).
    pub inputs: Vec<Output>,
    /// Member outputs read outside the cluster or fetched (the step's outputs, in order).
    pub outputs: Vec<Output>,
    pub op: ClusterOp,
}

/// A unit of a fused plan: a node on its own, or a cluster (index into [`Fusion::clusters`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unit {
    Node(NodeId),
    Cluster(usize),
}

/// The result of the pass: the clusters and every unit in an order that runs each unit after
/// the units it reads.
#[derive(Debug, Default)]
pub(crate) struct Fusion {
    pub clusters: Vec<Cluster>,
    pub order: Vec<Unit>,
}

/// Whether fusion is on when the session options leave it unset: yes, unless the
/// environment sets `OXIFLOW_FUSION=0` (read once per process).
pub fn fusion_default() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("OXIFLOW_FUSION").map_or(true, |v| v.trim() != "0"))
}

/// Largest cluster shape (elements) fused by default: any. The fused loops run in memory
/// order with the AVX2 build of the same functions as the per-op kernels, sharded by
/// their cost, and write each output once, so a cluster of large tensors reads and writes
/// memory once instead of once per op: on 1024x1024 f64 operands `tanh(x) .* z .+ x`
/// took 1.7-2.3 ms against 2.9-5.2 unfused and the gradient of `sum(x .* x .* z)` 2.7-3.0
/// against 4.5-4.6. (Until the loops were built for AVX2 clusters were capped at 4096
/// elements; a session's `fusion_max_elements` still sets a cap.)
pub const DEFAULT_MAX_FUSED_ELEMENTS: usize = usize::MAX;

/// Elements of a static shape.
fn elements(dims: &[usize]) -> usize {
    dims.iter().product()
}

/// The comparisons a cluster computes as masks ([`crate::ops::fused::Fn2::Gt`] ...).
fn is_comparison(op: &str) -> bool {
    matches!(op, "Greater" | "GreaterEqual" | "Less" | "LessEqual" | "Equal")
}

/// The float type `n` (placed on device `dev`) computes in when it may be part of a
/// cluster, else `None`: its output's type, or for a comparison (a `Bool` output) its
/// operands'.
fn eligible(graph: &Graph, n: &Node, fed: &HashSet<Output>, cpu: &dyn Fn(usize) -> bool, dev: usize, max_len: usize) -> Option<DType> {
    let [out] = &n.outputs[..] else { return None };
    let dims = out.shape.dims();
    let compare = is_comparison(n.op.name);
    let float = match (compare, n.inputs.first()) {
        (true, Some(&a)) if out.dtype == DType::Bool => graph.output_type(a).ok()?.dtype,
        (true, _) => return None,
        (false, _) => out.dtype,
    };
    // a partial shape is only known at run time: never fused
    if !out.shape.is_fully_defined() || !fusable(n.op.name) || !n.control_inputs.is_empty() || !cpu(dev) || !matches!(float, DType::Float32 | DType::Float64) {
        return None;
    }
    if elements(dims) == 0 || elements(dims) > max_len || fed.contains(&Output::new(n.id, 0)) || n.inputs.is_empty() {
        return None;
    }
    // operands of its shape, single elements, and rows or columns of its matrices next to
    // an operand of its shape (whose memory order the unfused kernel's output takes); a
    // `SelectV2`'s condition is a Bool of its shape or one element
    let (mut full, mut vector) = (false, false);
    let ok = n.inputs.iter().enumerate().all(|(k, &i)| match graph.output_type(i) {
        Ok(t) if n.op.name == "SelectV2" && k == 0 => {
            t.dtype == DType::Bool && t.shape.is_fully_defined() && (t.shape.dims() == dims || elements(t.shape.dims()) == 1)
        }
        // a comparison with a transposed matrix (`x >= x'`): see the module docs
        _ if compare && graph.nodes()[i.node].op.name == "Transpose" && dims.iter().filter(|&&d| d > 1).count() >= 2 => false,
        Ok(t) if t.dtype == float && t.shape.is_fully_defined() => {
            full |= t.shape.dims() == dims;
            vector |= Vector::of(t.shape.dims(), dims).is_some();
            t.shape.dims() == dims || elements(t.shape.dims()) == 1 || Vector::of(t.shape.dims(), dims).is_some()
        }
        _ => false,
    });
    (ok && (full || !vector)).then_some(float)
}

/// Finds the clusters of the step that runs `needed` (sorted node ids) placed by `device_of`,
/// with `fed` outputs fed and `fetches` fetched; `cpu(d)` tells whether device `d` is a CPU;
/// only ops of at most `max_len` elements are fused. Clusters of a single node are left as
/// that node.
pub(crate) fn fuse(
    graph: &Graph,
    needed: &[NodeId],
    device_of: &dyn Fn(NodeId) -> usize,
    cpu: &dyn Fn(usize) -> bool,
    fed: &HashSet<Output>,
    fetches: &[Output],
    max_len: usize,
) -> Fusion {
    let nodes = graph.nodes();
    // MatMul + bias (+ activation) first; their nodes stay out of elementwise clusters
    let matmuls = crate::fusion_matmul::matmul_clusters(graph, needed, device_of, cpu, fed, fetches);
    let in_matmul: HashSet<NodeId> = matmuls.iter().flat_map(|c| c.members.iter().copied()).collect();
    // key of each unit: (level, position); clusters keep their first member's
    let mut cluster_of: HashMap<NodeId, usize> = HashMap::new();
    let mut node_key: HashMap<NodeId, (u32, NodeId)> = HashMap::new();
    // per cluster: key, device, element count, dtype, members
    struct Draft {
        key: (u32, NodeId),
        dev: usize,
        dtype: DType,
        dims: Vec<usize>,
        members: Vec<NodeId>,
        /// whether a node outside the cluster has read one of its members
        read_outside: bool,
    }
    let mut drafts: Vec<Draft> = Vec::new();
    let unit_key = |id: NodeId, cluster_of: &HashMap<NodeId, usize>, node_key: &HashMap<NodeId, (u32, NodeId)>, drafts: &[Draft]| {
        match cluster_of.get(&id) {
            Some(&c) => drafts[c].key,
            // not needed (fed): a source
            None => node_key.get(&id).copied().unwrap_or((0, id)),
        }
    };
    for &id in needed {
        let n = &nodes[id];
        let reads = n.inputs.iter().enumerate().filter(|(i, o)| !n.op.ref_inputs.contains(i) && !fed.contains(o)).map(|(_, o)| o.node);
        let reads: Vec<NodeId> = reads.chain(n.control_inputs.iter().copied()).collect();
        let level = reads.iter().map(|&u| unit_key(u, &cluster_of, &node_key, &drafts).0 + 1).max().unwrap_or(0);
        let dev = device_of(id);
        let mut home = None;
        let float = if in_matmul.contains(&id) { None } else { eligible(graph, n, fed, cpu, dev, max_len) };
        if let Some(float) = float {
            let out = &n.outputs[0];
            // the input clusters it could join, largest key first: only that one can be
            // joined (every other unit read must have a smaller key)
            let mut near: Vec<usize> = reads.iter().filter_map(|u| cluster_of.get(u).copied()).collect();
            near.retain(|&c| drafts[c].dev == dev && drafts[c].dtype == float && drafts[c].dims == out.shape.dims());
            near.sort_unstable_by_key(|&c| Reverse(drafts[c].key));
            near.dedup();
            let joined = near.first().copied().filter(|&c| {
                let key = drafts[c].key;
                reads.iter().all(|&u| cluster_of.get(&u) == Some(&c) || unit_key(u, &cluster_of, &node_key, &drafts) < key)
            });
            let c = joined.unwrap_or_else(|| {
                let dims = out.shape.dims().to_vec();
                drafts.push(Draft { key: (level, id), dev, dtype: float, dims, members: Vec::new(), read_outside: false });
                drafts.len() - 1
            });
            // the other input clusters come along when only this node reads them
            for &b in &near {
                if b != c && !drafts[b].read_outside {
                    let moved = std::mem::take(&mut drafts[b].members);
                    for &m in &moved {
                        cluster_of.insert(m, c);
                    }
                    drafts[c].members.extend(moved);
                    drafts[c].members.sort_unstable();
                }
            }
            drafts[c].members.push(id);
            cluster_of.insert(id, c);
            home = Some(c);
        }
        for u in &reads {
            if let Some(&c) = cluster_of.get(u) {
                if home != Some(c) {
                    drafts[c].read_outside = true;
                }
            }
        }
        if home.is_none() {
            // A source (a constant, a variable: nothing it reads runs in this step) has no
            // predecessor, so no path leads from a cluster to it: it gets the smallest key
            // and never keeps a node out of a cluster (`1 - tanh(x)^2` builds its constants
            // after `tanh`).
            node_key.insert(id, if reads.is_empty() { (0, 0) } else { (level, id) });
        }
    }
    // single-node clusters stay nodes
    let mut index = vec![None; drafts.len()];
    let mut kept: Vec<&[NodeId]> = Vec::new();
    for (c, d) in drafts.iter().enumerate() {
        if d.members.len() >= 2 {
            index[c] = Some(kept.len());
            kept.push(&d.members);
        } else {
            for &m in &d.members {
                cluster_of.remove(&m);
            }
        }
    }
    if kept.is_empty() && matmuls.is_empty() {
        return unfused(needed);
    }
    // the MatMul clusters follow the elementwise ones
    let first_matmul = kept.len();
    let matmul_of: HashMap<NodeId, usize> = matmuls.iter().enumerate().flat_map(|(i, c)| c.members.iter().map(move |&m| (m, first_matmul + i))).collect();
    let final_cluster = |id: NodeId| cluster_of.get(&id).and_then(|&c| index[c]).or_else(|| matmul_of.get(&id).copied());
    // outputs read outside their cluster (by other units or as fetches)
    let mut leaves: HashSet<Output> = fetches.iter().copied().collect();
    for &id in needed {
        for o in &nodes[id].inputs {
            if final_cluster(o.node).is_some() && final_cluster(o.node) != final_cluster(id) {
                leaves.insert(*o);
            }
        }
    }
    let mut fusion = Fusion::default();
    for members in kept {
        // eligible() only admits ops `lower` knows; should one ever not lower, the step
        // runs unfused rather than failing
        match cluster(graph, members, &leaves) {
            Some(c) => fusion.clusters.push(c),
            None => return unfused(needed),
        }
    }
    fusion.clusters.extend(matmuls);
    // Order: graph order as far as the clusters allow (Kahn's algorithm taking the unit
    // with the smallest first node first), so the executor meets independent steps in the
    // order it would unfused. The keys guarantee there is no cycle.
    let k = fusion.clusters.len();
    let unit_index = |id: NodeId| final_cluster(id).unwrap_or_else(|| k + needed.binary_search(&id).unwrap_or(0));
    let mut first: Vec<NodeId> = fusion.clusters.iter().map(|c| c.members[0]).collect();
    first.extend(needed.iter().copied());
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); first.len()];
    let mut pending = vec![0usize; first.len()];
    let mut seen: HashSet<(usize, usize)> = HashSet::new();
    for &id in needed {
        let n = &nodes[id];
        let reads = n.inputs.iter().filter(|o| !fed.contains(o)).map(|o| o.node).chain(n.control_inputs.iter().copied());
        for r in reads.filter(|r| needed.binary_search(r).is_ok()) {
            let (from, to) = (unit_index(r), unit_index(id));
            if from != to && seen.insert((from, to)) {
                succ[from].push(to);
                pending[to] += 1;
            }
        }
    }
    let live = |u: usize| u < k || final_cluster(first[u]).is_none();
    let mut ready: BinaryHeap<Reverse<(NodeId, usize)>> = (0..first.len()).filter(|&u| live(u) && pending[u] == 0).map(|u| Reverse((first[u], u))).collect();
    while let Some(Reverse((_, u))) = ready.pop() {
        fusion.order.push(if u < k { Unit::Cluster(u) } else { Unit::Node(first[u]) });
        for &v in &succ[u] {
            pending[v] -= 1;
            if pending[v] == 0 {
                ready.push(Reverse((first[v], v)));
            }
        }
    }
    fusion
}

/// The plan without fusion: every needed node on its own, in graph order.
fn unfused(needed: &[NodeId]) -> Fusion {
    Fusion { clusters: Vec::new(), order: needed.iter().map(|&id| Unit::Node(id)).collect() }
}

/// The cluster of `members` (graph order), its outputs those in `leaves`; `None` when an op
/// does not lower to the program's instructions.
fn cluster(graph: &Graph, members: &[NodeId], leaves: &HashSet<Output>) -> Option<Cluster> {
    let nodes = graph.nodes();
    let mut b = ProgramBuilder::default();
    let mut values: HashMap<Output, Value> = HashMap::new();
    let mut inputs = Vec::new();
    let shape = nodes[members[0]].outputs[0].shape.dims();
    let len = elements(shape);
    for &m in members {
        let n = &nodes[m];
        let mut args = Vec::with_capacity(n.inputs.len());
        for &o in &n.inputs {
            // a value not made in the cluster yet comes from outside it (members read only
            // their cluster and units with smaller keys)
            let v = *values.entry(o).or_insert_with(|| {
                inputs.push(o);
                let dims = graph.output_type(o).map(|t| t.shape.dims().to_vec()).unwrap_or_default();
                b.input(match Vector::of(&dims, shape) {
                    _ if elements(&dims) == len => InputKind::Full,
                    // (a [1, 1] beside [m, 1] is one element, not a row: Bool conditions
                    // have no rows)
                    _ if elements(&dims) == 1 => InputKind::One,
                    Some(v) => InputKind::Vector(v),
                    None => InputKind::One,
                })
            });
            args.push(v);
        }
        let v = b.lower(n.op.name, &args)?;
        b.replaces(&n.name, n.op.name);
        values.insert(Output::new(m, 0), v);
    }
    let outputs: Vec<Output> = members.iter().map(|&m| Output::new(m, 0)).filter(|o| leaves.contains(o)).collect();
    for o in &outputs {
        b.output(values[o]);
    }
    Some(Cluster { members: members.to_vec(), inputs, outputs, op: ClusterOp::Elementwise(b.finish(len)) })
}

#[cfg(test)]
#[path = "fusion_mask_tests.rs"]
mod mask_tests;
#[cfg(test)]
#[path = "fusion_order_tests.rs"]
mod order_tests;
#[cfg(test)]
#[path = "fusion_tests.rs"]
mod tests;
