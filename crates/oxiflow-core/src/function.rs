//! Functions: a graph with designated inputs and outputs, held by functional control-flow
//! ops (`If`) as attributes, as TF's `FunctionDef` is held in a `func` attr by TF2's `If`
//! and `While`.
//!
//! A function's inputs are `Placeholder` nodes of its own graph (TF's `_Arg`), its outputs
//! any outputs of that graph (TF's `_Retval`). Tensors of the enclosing graph that a branch
//! uses are passed in as extra inputs (the caller captures them: the Julia package does
//! when it builds a branch). Calling a function runs the nodes its outputs need, one after
//! another on the calling thread (as [`crate::eval::evaluate`] does, with the node order
//! found once), with the caller's variable store; inside it nothing is placed, fused or traced: a functional op runs on one device
//! (the CPU) as one step.

use crate::error::{OxiflowError, Result};
use crate::graph::{Graph, NodeId, Output, TensorType};
use crate::ops::{smallvec, Outputs, StateAccess};
use crate::tensor::Tensor;
use smallvec::SmallVec;
use std::fmt;

/// A graph with inputs (its `Placeholder`s, in order) and outputs.
pub struct Function {
    graph: Graph,
    inputs: Vec<Output>,
    outputs: Vec<Output>,
    /// The nodes a call runs (those the outputs need, inputs excluded), in id order: found
    /// once here, as a loop calls its body every iteration.
    order: Vec<NodeId>,
}

impl fmt::Debug for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for Function {
    /// `<function (2 inputs, 1 outputs, 7 nodes)>`, as a node's attrs show it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<function ({} inputs, {} outputs, {} nodes)>", self.inputs.len(), self.outputs.len(), self.graph.len())
    }
}

impl Function {
    /// A function of `graph` taking `inputs` and returning `outputs`. Errors
    /// (InvalidArgument): an input that is not output 0 of a `Placeholder` of `graph`, or
    /// appears twice; an output that `graph` does not have; a function whose outputs need a
    /// `Placeholder` that is not one of its inputs (it could never be fed); a function holding
    /// variables (a branch reads the caller's variables as captured inputs) or an op that
    /// assigns one (`Assign`, `ApplyAdam`, ...: any op with reference inputs).
    pub fn new(graph: Graph, inputs: Vec<Output>, outputs: Vec<Output>) -> Result<Function> {
        let bad = |m: String| Err(OxiflowError::InvalidArgument(format!("function: {m}")));
        for (k, i) in inputs.iter().enumerate() {
            let n = graph.node(i.node)?;
            if n.op.name != "Placeholder" || i.index != 0 {
                return bad(format!("input {k} ('{}') is not a Placeholder", n.tensor_name(i.index)));
            }
            if inputs[..k].contains(i) {
                return bad(format!("input {k} ('{}') is given twice", n.name));
            }
        }
        for o in &outputs {
            graph.output_type(*o)?;
        }
        // Variables live in the enclosing graph; a function only reads their values, passed
        // in as inputs. An op writing one (`Assign`, the `Apply*` updates: ops with reference
        // inputs) would write through such an input, not to the variable: refused, wherever
        // it is in the function (one nothing reads would not even run).
        for n in graph.nodes() {
            if n.op.name == "VariableV2" {
                return bad(format!("it holds variable '{}'; read variables of the enclosing graph instead", n.name));
            }
            if !n.op.ref_inputs.is_empty() {
                return bad(format!(
                    "it holds {} '{}', which assigns a variable: assign outside cond and while_loop (not supported inside them yet)",
                    n.op.name, n.name
                ));
            }
        }
        let needed = crate::eval::needed_nodes(&graph, &outputs, &[], &inputs.iter().copied().collect())?;
        for &id in &needed {
            let n = graph.node(id)?;
            if n.op.name == "Placeholder" {
                return bad(format!("its outputs need Placeholder '{}', which is not one of its inputs", n.name));
            }
        }
        Ok(Function { graph, inputs, outputs, order: needed })
    }

    /// The function's graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }
    /// Its inputs (`Placeholder` outputs of [`Function::graph`]).
    pub fn inputs(&self) -> &[Output] {
        &self.inputs
    }
    /// Its outputs.
    pub fn outputs(&self) -> &[Output] {
        &self.outputs
    }
    /// Dtype and shape of each input.
    pub fn input_types(&self) -> Result<Vec<TensorType>> {
        self.inputs.iter().map(|o| self.graph.output_type(*o).cloned()).collect()
    }
    /// Dtype and shape of each output.
    pub fn output_types(&self) -> Result<Vec<TensorType>> {
        self.outputs.iter().map(|o| self.graph.output_type(*o).cloned()).collect()
    }

    /// Runs the function on `args` (one per input, of its dtype and shape; checked by the op
    /// that calls it), reading and assigning variables through `state`. Errors: those of its
    /// kernels, which name their nodes.
    pub fn call(&self, args: &[Tensor], state: &dyn StateAccess) -> Result<Vec<Tensor>> {
        if args.len() != self.inputs.len() {
            return Err(OxiflowError::Internal(format!("function called with {} arguments, it takes {}", args.len(), self.inputs.len())));
        }
        // each node's outputs, by node id (a function's graph is small)
        let mut vals: Vec<Option<Outputs>> = vec![None; self.graph.len()];
        for (i, a) in self.inputs.iter().zip(args) {
            vals[i.node] = Some(smallvec![a.clone()]);
        }
        let get = |vals: &[Option<Outputs>], o: &Output| {
            vals[o.node].as_ref().and_then(|v| v.get(o.index)).cloned().ok_or_else(|| OxiflowError::Internal(format!("function: input {o:?} missing")))
        };
        for &id in &self.order {
            let n = self.graph.node(id)?;
            let ins: SmallVec<[Tensor; 4]> =
                n.inputs.iter().enumerate().filter(|(i, _)| !n.op.ref_inputs.contains(i)).map(|(_, o)| get(&vals, o)).collect::<Result<_>>()?;
            vals[id] = Some(crate::ops::dynamic_shape::run_kernel(n, &ins, state)?);
        }
        self.outputs.iter().map(|o| get(&vals, o)).collect()
    }
}
