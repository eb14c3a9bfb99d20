//! `MatMul` + bias + activation fusion, part of the session's fusion pass ([`crate::fusion`]),
//! as Grappler's remapper rewrites `MatMul` + `BiasAdd` (or an `Add` whose other operand is
//! a bias: TF's `IsBiasSemanticAdd`) + an activation into one `_FusedMatMul`
//! ([`crate::ops::matmul::FUSED_MATMUL`]).
//!
//! A cluster is a `MatMul` node `M`, the `Add` node `A` that is the only reader of `M`'s
//! product, and, when `A`'s sum has a single reader that is a `Tanh`, `Relu` or `Sigmoid`
//! node `T`, that node too. The other operand of `A` is the bias: a rank-1 tensor of `M`'s
//! dtype with one value per column of the product. Every member runs on one CPU device,
//! has no control inputs, and no member's output except the last is fetched, fed or read by
//! any other node of the step (so nothing needs the tensors the fused kernel never makes).
//! The readers are counted per edge: `Add(M, M)` has two.
//!
//! No cycle can come of it: `M` and `A` have no reader outside the cluster but its next
//! member, and `T` reads only `A`, so every path out of the cluster leaves from its last
//! member, and none can come back into it (that would be a cycle through `A` in the graph).

use crate::dtype::DType;
use crate::fusion::{Cluster, ClusterOp};
use crate::graph::{Graph, Node, NodeId, Output};
use crate::ops::matmul::FUSED_ACTIVATIONS;
use crate::ops::AttrValue;
use std::collections::{HashMap, HashSet};

/// The `_FusedMatMul` clusters of the step that runs `needed` (sorted node ids), placed by
/// `device_of`, with `fed` outputs fed and `fetches` fetched; `cpu(d)` tells whether device
/// `d` is a CPU. Members are in graph order; the inputs are `M`'s two operands and the bias,
/// the one output the last member's.
pub(crate) fn matmul_clusters(
    graph: &Graph,
    needed: &[NodeId],
    device_of: &dyn Fn(NodeId) -> usize,
    cpu: &dyn Fn(usize) -> bool,
    fed: &HashSet<Output>,
    fetches: &[Output],
) -> Vec<Cluster> {
    let nodes = graph.nodes();
    // who reads each node's outputs in this step: one entry per edge, fetches as `None`
    let mut readers: HashMap<NodeId, Vec<Option<NodeId>>> = HashMap::new();
    for &id in needed {
        let n = &nodes[id];
        for r in n.inputs.iter().map(|o| o.node).chain(n.control_inputs.iter().copied()) {
            readers.entry(r).or_default().push(Some(id));
        }
    }
    for f in fetches {
        readers.entry(f.node).or_default().push(None);
    }
    // the only reader of `id`'s output, when `id` may be a non-last member on `dev`
    let sole_reader = |id: NodeId, dev: usize| -> Option<&Node> {
        match readers.get(&id).map(Vec::as_slice) {
            Some([Some(r)]) if !fed.contains(&Output::new(id, 0)) && device_of(*r) == dev && nodes[*r].control_inputs.is_empty() => Some(&nodes[*r]),
            _ => None,
        }
    };
    let float = |o: Output| graph.output_type(o).ok().filter(|t| matches!(t.dtype, DType::Float32 | DType::Float64));
    let mut clusters = Vec::new();
    for &id in needed {
        let m = &nodes[id];
        let dev = device_of(id);
        if m.op.name != "MatMul" || !cpu(dev) || !m.control_inputs.is_empty() {
            continue;
        }
        let (Some(mt), Some(a)) = (float(Output::new(id, 0)), sole_reader(id, dev)) else { continue };
        if a.op.name != "Add" || fed.contains(&Output::new(a.id, 0)) {
            continue;
        }
        // the bias: A's other operand, [n] for M's [m, n] product
        let bias = match a.inputs[..] {
            [x, b] if x == Output::new(id, 0) => b,
            [b, x] if x == Output::new(id, 0) => b,
            _ => continue,
        };
        let Some(&n) = mt.shape.dims().get(1) else { continue };
        if n == crate::shape::UNKNOWN || !graph.output_type(bias).is_ok_and(|t| t.dtype == mt.dtype && t.shape.dims() == [n]) {
            continue;
        }
        let t = sole_reader(a.id, dev).filter(|t| FUSED_ACTIVATIONS.iter().any(|(op, _)| *op == t.op.name) && !fed.contains(&Output::new(t.id, 0)));
        let bool_attr = |k: &str| matches!(m.attrs.get(k), Some(AttrValue::Bool(true)));
        let last = t.map_or(a.id, |t| t.id);
        let mut members = vec![id, a.id];
        members.extend(t.map(|t| t.id));
        clusters.push(Cluster {
            inputs: vec![m.inputs[0], m.inputs[1], bias],
            outputs: vec![Output::new(last, 0)],
            members,
            op: ClusterOp::MatMul { transpose_a: bool_attr("transpose_a"), transpose_b: bool_attr("transpose_b"), activation: t.map(|t| t.op.name) },
        });
    }
    clusters
}
