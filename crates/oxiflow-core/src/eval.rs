//! A plain sequential evaluator on the host: runs the nodes that `fetches` need, in id order,
//! with no placement and no threads. It is the reference the executor is tested against
//! and what op tests (finite differences) use.

use crate::error::{OxiflowError, Result};
use crate::graph::{Graph, NodeId, Output};
use crate::ops::StateAccess;
use crate::tensor::Tensor;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// A variable store for [`evaluate`]: a map from `VariableV2` node to value.
#[derive(Default)]
pub struct HostState(pub Mutex<HashMap<NodeId, Tensor>>);

impl StateAccess for HostState {
    fn read_variable(&self, var: NodeId) -> Option<Tensor> {
        self.0.lock().unwrap().get(&var).cloned()
    }
    fn assign_variable(&self, var: NodeId, value: Tensor) -> Result<()> {
        self.0.lock().unwrap().insert(var, value);
        Ok(())
    }
}

/// The nodes needed to compute `fetches` and run `targets`, stopping at fed outputs' nodes
/// (a node all of whose used outputs are fed is not run). Sorted by id.
pub fn needed_nodes(graph: &Graph, fetches: &[Output], targets: &[NodeId], fed: &HashSet<Output>) -> Result<Vec<NodeId>> {
    let mut seen = HashSet::new();
    let mut stack: Vec<NodeId> = Vec::new();
    for f in fetches {
        graph.output_type(*f)?;
        if !fed.contains(f) {
            stack.push(f.node);
        }
    }
    for &t in targets {
        graph.node(t)?;
        stack.push(t);
    }
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        let n = graph.node(id)?;
        for (i, inp) in n.inputs.iter().enumerate() {
            if !n.op.ref_inputs.contains(&i) && !fed.contains(inp) {
                stack.push(inp.node);
            }
        }
        stack.extend(n.control_inputs.iter().copied());
    }
    let mut v: Vec<_> = seen.into_iter().collect();
    v.sort_unstable();
    Ok(v)
}

/// Evaluates `fetches` after running `targets`, with `feeds` replacing outputs.
pub fn evaluate(graph: &Graph, feeds: &[(Output, Tensor)], fetches: &[Output], targets: &[NodeId], state: &dyn StateAccess) -> Result<Vec<Tensor>> {
    let mut values: HashMap<Output, Tensor> = feeds.iter().cloned().collect();
    let fed: HashSet<Output> = values.keys().copied().collect();
    for id in needed_nodes(graph, fetches, targets, &fed)? {
        let n = graph.node(id)?;
        let inputs: Vec<Tensor> = n
            .inputs
            .iter()
            .enumerate()
            .filter(|(i, _)| !n.op.ref_inputs.contains(i))
            .map(|(_, o)| values.get(o).cloned().ok_or_else(|| OxiflowError::Internal(format!("input {o:?} missing"))))
            .collect::<Result<_>>()?;
        let outs = crate::ops::dynamic_shape::run_kernel(n, &inputs, state)?;
        for (i, t) in outs.into_iter().enumerate() {
            values.entry(Output::new(id, i)).or_insert(t);
        }
    }
    fetches.iter().map(|f| values.get(f).cloned().ok_or_else(|| OxiflowError::Internal(format!("fetch {f:?} not computed")))).collect()
}
