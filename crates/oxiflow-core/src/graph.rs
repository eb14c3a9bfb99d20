//! The dataflow graph: nodes with TF-style names, inputs, attrs, requested devices,
//! colocation lists and collections; the device, colocation, name and control-dependency
//! scope stacks that TF's Python `Graph` keeps (`ops.py`).

use crate::device::spec::DeviceSpec;
use crate::dtype::DType;
use crate::error::{OxiflowError, Result};
use crate::ops::{self, Attrs, InferCtx, OpDef};
use crate::shape::Shape;
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// Index of a node in its graph. Nodes only take inputs from earlier nodes, so id order is
/// a topological order.
pub type NodeId = usize;

/// One output of a node: TF's tensor `name:index`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Output {
    pub node: NodeId,
    pub index: usize,
}

impl Output {
    /// Output `index` of `node`.
    pub fn new(node: NodeId, index: usize) -> Output {
        Output { node, index }
    }
}

/// Static type of one output: dtype and shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorType {
    pub dtype: DType,
    pub shape: Shape,
}

impl TensorType {
    /// The type of an output with `dtype` and static `shape`.
    pub fn new(dtype: DType, shape: Shape) -> TensorType {
        TensorType { dtype, shape }
    }
}

/// A graph node (TF's `NodeDef` plus what the graph knows about it).
#[derive(Clone, Debug)]
pub struct Node {
    pub id: NodeId,
    /// Unique name, e.g. `Sin`, `Sin_1`, `gradients/Cos_grad/Sin`.
    pub name: String,
    /// Op definition (type, kernel, shape function, gradient).
    pub op: &'static OpDef,
    pub inputs: Vec<Output>,
    pub control_inputs: Vec<NodeId>,
    pub attrs: Attrs,
    /// The device the scopes asked for (`NodeDef.device`), canonical; may be partial or empty.
    pub requested_device: DeviceSpec,
    /// Colocation constraints, TF's `_class` attr: `loc:@<node name>` entries, sorted.
    pub colocation: Vec<String>,
    pub outputs: Vec<TensorType>,
    /// Some input or output static shape has an unknown dimension: the node runs as its
    /// specialisation to the fed shapes (`ops::dynamic_shape::specialize`), which also
    /// checks inputs whose sizes only the run knows (an `AddN` of `[?,3]` and `[5,3]`).
    pub partial: bool,
}

impl Node {
    /// TF's `colocation_groups()`: the `_class` entries, or `loc:@<own name>`.
    pub fn colocation_groups(&self) -> Vec<String> {
        if self.colocation.is_empty() {
            vec![concat(&["loc:@", &self.name])]
        } else {
            self.colocation.clone()
        }
    }

    /// TF tensor name of output `i` (`Sin:0`).
    pub fn tensor_name(&self, i: usize) -> String {
        format!("{}:{}", self.name, i)
    }
}

/// The read-only view of a node that device functions receive (TF's `NodeDef`): name, op
/// type, the device set so far by inner scopes, input tensor names, attrs as text.
#[derive(Clone, Debug)]
pub struct NodeDef {
    pub name: String,
    pub op: String,
    pub device: String,
    pub input: Vec<String>,
    pub attr: BTreeMap<String, String>,
}

/// A user device function: receives the node being created, returns a device string
/// (which replaces the node's device wholesale, as in TF) or an error message.
pub trait DeviceFunction: Send + Sync {
    /// The device string for `node` (`NodeDef` with the device merged so far), or an error
    /// message that becomes `OxiflowError::DeviceFunction` naming the node and op.
    fn call(&self, node: &NodeDef) -> std::result::Result<String, String>;
}

impl<F: Fn(&NodeDef) -> std::result::Result<String, String> + Send + Sync> DeviceFunction for F {
    fn call(&self, node: &NodeDef) -> std::result::Result<String, String> {
        self(node)
    }
}

/// One entry of the device scope stack (`tf.device(...)`).
#[derive(Clone)]
pub enum DeviceScope {
    /// A device string, merged per field (inner fields win).
    Spec(DeviceSpec),
    /// A device function; its result replaces the device.
    Function(Arc<dyn DeviceFunction>),
    /// `tf.device(None)`: outer scopes stop applying.
    Reset,
}

/// What `Variable(x)` created: the `VariableV2` node, its `read` snapshot, its `Assign`
/// initializer.
#[derive(Clone, Debug)]
pub struct VariableInfo {
    pub var: NodeId,
    pub read: NodeId,
    pub initializer: NodeId,
    pub trainable: bool,
}

/// Collection keys, TF's `GraphKeys`.
pub mod keys {
    /// Every variable (`tf.GraphKeys.GLOBAL_VARIABLES`).
    pub const GLOBAL_VARIABLES: &str = "variables";
    /// Variables created with `trainable=true` (`tf.GraphKeys.TRAINABLE_VARIABLES`).
    pub const TRAINABLE_VARIABLES: &str = "trainable_variables";
    /// Ops to run with each training step, e.g. batch-norm statistics (`tf.GraphKeys.UPDATE_OPS`).
    pub const UPDATE_OPS: &str = "update_ops";
}

/// What a new node needs besides what the scopes give it.
#[derive(Clone, Debug, Default)]
pub struct NodeSpec {
    pub op: String,
    pub inputs: Vec<Output>,
    pub attrs: Attrs,
    /// Node name within the current name scope; the op's default name when `None`.
    pub name: Option<String>,
    pub control_inputs: Vec<NodeId>,
}

impl NodeSpec {
    /// A node of TF op type `op` (e.g. `"MatMul"`) taking `inputs`, with no attrs and the
    /// op's default name.
    pub fn new(op: &str, inputs: &[Output]) -> NodeSpec {
        NodeSpec { op: op.to_string(), inputs: inputs.to_vec(), ..Default::default() }
    }
    /// Sets attribute `k` (e.g. `transpose_a`, `axis`, `DstT`).
    pub fn attr(mut self, k: &str, v: impl Into<ops::AttrValue>) -> NodeSpec {
        self.attrs.insert(k.to_string(), v.into());
        self
    }
    /// Names the node (within the current name scope; made unique with `_1`, `_2`, ...).
    pub fn name(mut self, n: impl Into<String>) -> NodeSpec {
        self.name = Some(n.into());
        self
    }
}

/// The scope stacks one thread has open on a graph (ops.py's thread-local name scope,
/// device function stack, colocation stack and control-dependencies controller).
#[derive(Default)]
struct Scopes {
    name_scopes: Vec<String>,
    device_stack: Vec<DeviceScope>,
    colocation_stack: Vec<Vec<NodeId>>,
    /// Per open `colocate_with`, the device-stack depth when it opened: only device scopes
    /// opened inside it apply to its nodes.
    colocation_device_depth: Vec<usize>,
    control_stack: Vec<Vec<NodeId>>,
}

impl Scopes {
    fn is_empty(&self) -> bool {
        self.name_scopes.is_empty() && self.device_stack.is_empty() && self.colocation_stack.is_empty() && self.control_stack.is_empty()
    }
}

/// A number for the calling thread, unique in the process (cheaper than `ThreadId`, which
/// `thread::current()` reaches through a reference-counted handle).
fn thread_key() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    thread_local!(static KEY: u64 = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    KEY.with(|k| *k)
}

/// No scope open (a thread that has not opened any).
static NO_SCOPES: Scopes =
    Scopes { name_scopes: Vec::new(), device_stack: Vec::new(), colocation_stack: Vec::new(), colocation_device_depth: Vec::new(), control_stack: Vec::new() };

/// A dataflow graph under construction. Nodes are never removed; a failed `add_node`
/// leaves the graph as it was.
#[derive(Default)]
pub struct Graph {
    nodes: Vec<Node>,
    by_name: FxHashMap<String, NodeId>,
    /// Names reserved by name scopes (node names are the keys of `by_name`; a name is
    /// taken when it is in either).
    scope_names: FxHashSet<String>,
    /// Per full base name, the smallest suffix that may still be free (all below are taken):
    /// keeps [`Graph::unique_name`] O(1) amortized where probing from `_1` was quadratic.
    next_suffix: FxHashMap<String, usize>,
    /// The scopes each thread has open (TF1 keeps them per thread: a device or name scope
    /// open in one thread does not apply to the ops another thread builds).
    /// (thread key, scopes): a list, as it rarely holds more than one thread.
    scopes: Vec<(u64, Scopes)>,
    collections: BTreeMap<String, Vec<Output>>,
    variables: Vec<VariableInfo>,
    /// Nodes whose requested device a device function decided (for `explain_placement`).
    by_device_function: FxHashSet<NodeId>,
}

/// TF's rule for a node name a user gives (`ops.py`'s `_VALID_OP_NAME_REGEX`, with `_` also
/// allowed first, as Oxiflow's own helper nodes use it): not empty, first a letter, digit,
/// `.` or `_`, then letters, digits and `_ . - / >`. A `:` would make `name:0` ambiguous.
/// Errors: `InvalidArgument` quoting the name.
pub fn check_node_name(name: &str) -> Result<()> {
    let ok_first = |c: char| c.is_ascii_alphanumeric() || c == '.' || c == '_';
    let ok_rest = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/' | '>');
    let mut chars = name.chars();
    if chars.next().is_some_and(ok_first) && chars.all(ok_rest) {
        Ok(())
    } else {
        Err(OxiflowError::InvalidArgument(format!(
            "'{name}' is not a valid node name: it must start with a letter, digit, '.' or '_' and contain only letters, digits and '_', '.', '-', '/', '>'"
        )))
    }
}

impl Graph {
    /// An empty graph with no scopes open.
    pub fn new() -> Graph {
        Graph::default()
    }

    /// A copy of the graph: its nodes (same ids and names), collections and variables, with
    /// no scope open. The gradient of a functional op (`If`, `While`) builds the gradient of
    /// a branch or loop body in such a copy, leaving the function itself as it was.
    pub fn duplicate(&self) -> Graph {
        Graph {
            nodes: self.nodes.clone(),
            by_name: self.by_name.clone(),
            scope_names: self.scope_names.clone(),
            next_suffix: self.next_suffix.clone(),
            scopes: Vec::new(),
            collections: self.collections.clone(),
            variables: self.variables.clone(),
            by_device_function: self.by_device_function.clone(),
        }
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }
    /// `true` when the graph has no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The node with id `id`; `NotFound` when there is none.
    pub fn node(&self, id: NodeId) -> Result<&Node> {
        self.nodes.get(id).ok_or_else(|| OxiflowError::NotFound(format!("no node with id {id} in the graph")))
    }

    /// All nodes, in id (topological) order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Looks a node up by name.
    pub fn node_by_name(&self, name: &str) -> Option<NodeId> {
        self.by_name.get(name).copied()
    }

    /// Static type of an output; `NotFound` when the output does not exist.
    pub fn output_type(&self, o: Output) -> Result<&TensorType> {
        let n = self.node(o.node)?;
        n.outputs.get(o.index).ok_or_else(|| OxiflowError::NotFound(format!("node '{}' ({}) has no output {}", n.name, n.op.name, o.index)))
    }

    /// TF tensor name of an output (`Sin:0`).
    pub fn tensor_name(&self, o: Output) -> String {
        match self.nodes.get(o.node) {
            Some(n) => n.tensor_name(o.index),
            None => format!("<node {}>:{}", o.node, o.index),
        }
    }

    /// Whether a node or a name scope already has this full name.
    fn name_taken(&self, name: &str) -> bool {
        self.by_name.contains_key(name) || self.scope_names.contains(name)
    }

    /// Room for `additional` more nodes without rehashing or reallocating (a gradient
    /// build adds a few nodes per forward node).
    pub(crate) fn reserve(&mut self, additional: usize) {
        self.nodes.reserve(additional);
        self.by_name.reserve(additional);
    }

    /// The calling thread's open scopes (no lookup while no thread has any open).
    fn sc(&self) -> &Scopes {
        if self.scopes.is_empty() {
            return &NO_SCOPES;
        }
        let key = thread_key();
        self.scopes.iter().find(|(k, _)| *k == key).map_or(&NO_SCOPES, |(_, s)| s)
    }

    /// The calling thread's open scopes, to change.
    fn sc_mut(&mut self) -> &mut Scopes {
        let key = thread_key();
        let i = match self.scopes.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                self.scopes.push((key, Scopes::default()));
                self.scopes.len() - 1
            }
        };
        &mut self.scopes[i].1
    }

    /// Forgets the calling thread's scopes once none is open (threads come and go).
    fn tidy_scopes(&mut self) {
        let key = thread_key();
        self.scopes.retain(|(k, s)| *k != key || !s.is_empty());
    }

    /// TF's `Graph.unique_name`: `base` inside the current name scope, suffixed `_1`, `_2`,
    /// ... when taken. Does not reserve the name.
    pub fn unique_name(&mut self, base: &str) -> String {
        let full = match self.sc().name_scopes.last() {
            Some(s) if !s.is_empty() => concat(&[s, "/", base]),
            _ => base.to_string(),
        };
        if !self.name_taken(&full) {
            return full;
        }
        let mut i = self.next_suffix.get(&full).copied().unwrap_or(1);
        let cand = loop {
            let mut cand = String::with_capacity(full.len() + 8);
            cand.push_str(&full);
            cand.push('_');
            let _ = fmt::Write::write_fmt(&mut cand, format_args!("{i}"));
            if !self.name_taken(&cand) {
                break cand;
            }
            i += 1;
        };
        self.next_suffix.insert(full, i);
        cand
    }

    /// Opens `tf.name_scope(name)`: a unique scope name (`gradients`, `gradients_1`) is
    /// reserved and returned; nodes created until [`Graph::pop_name_scope`] get it as prefix.
    pub fn push_name_scope(&mut self, name: &str) -> String {
        let full = self.unique_name(name);
        self.scope_names.insert(full.clone());
        self.sc_mut().name_scopes.push(full.clone());
        full
    }

    /// Closes the innermost name scope (no-op when none is open).
    pub fn pop_name_scope(&mut self) {
        self.sc_mut().name_scopes.pop();
        self.tidy_scopes();
    }

    /// Pushes a device scope (`tf.device(spec_or_function)`).
    pub fn push_device(&mut self, scope: DeviceScope) {
        self.sc_mut().device_stack.push(scope);
    }

    /// Pops the innermost device scope; an error when there is none.
    pub fn pop_device(&mut self) -> Result<()> {
        let popped = self.sc_mut().device_stack.pop();
        self.tidy_scopes();
        popped.map(|_| ()).ok_or_else(|| OxiflowError::InvalidArgument("Exiting device scope without proper scope nesting.".into()))
    }

    /// Opens `colocate_with(op)`: nodes created inside are colocated with `op` and outer
    /// device scopes are suspended (ops.py `colocate_with`). `ignore_existing` clears the
    /// outer colocation requests for the block.
    pub fn push_colocation(&mut self, node: NodeId, ignore_existing: bool) -> Result<()> {
        self.node(node)?;
        let sc = self.sc_mut();
        let mut frame = if ignore_existing { Vec::new() } else { sc.colocation_stack.last().cloned().unwrap_or_default() };
        frame.push(node);
        sc.colocation_stack.push(frame);
        let depth = sc.device_stack.len();
        sc.colocation_device_depth.push(depth);
        Ok(())
    }

    /// Closes the innermost `colocate_with` (no-op when none is open).
    pub fn pop_colocation(&mut self) {
        let sc = self.sc_mut();
        sc.colocation_stack.pop();
        sc.colocation_device_depth.pop();
        self.tidy_scopes();
    }

    /// Opens `control_dependencies(ops)`: nodes created inside run after `ops`.
    pub fn push_control_dependencies(&mut self, deps: &[NodeId]) {
        let sc = self.sc_mut();
        let mut frame = sc.control_stack.last().cloned().unwrap_or_default();
        frame.extend_from_slice(deps);
        sc.control_stack.push(frame);
    }

    /// Closes the innermost `control_dependencies` block (no-op when none is open).
    pub fn pop_control_dependencies(&mut self) {
        self.sc_mut().control_stack.pop();
        self.tidy_scopes();
    }

    /// Adds `output` to collection `key` (`tf.add_to_collection`).
    pub fn add_to_collection(&mut self, key: &str, output: Output) {
        self.collections.entry(key.to_string()).or_default().push(output);
    }

    /// The members of collection `key`, in insertion order.
    pub fn collection(&self, key: &str) -> &[Output] {
        self.collections.get(key).map(|v| v.as_slice()).unwrap_or(&[])
    }

    /// Variables created with [`Graph::variable`], in creation order.
    pub fn variables(&self) -> &[VariableInfo] {
        &self.variables
    }

    /// The variable whose `VariableV2` node is `node`.
    pub fn variable_info(&self, node: NodeId) -> Option<&VariableInfo> {
        self.variables.iter().find(|v| v.var == node)
    }

    /// Adds a node: resolves its op, dereferences variable inputs (a `VariableV2` output used
    /// where no reference is expected reads the variable's `read` snapshot, as TF's ref
    /// variables do), infers output types (shape/dtype errors name the op and node), names it,
    /// applies colocation or device scopes and control dependencies, and commits it. The
    /// name is [`Graph::requested_name`]'s for `spec.name` and the op's default name.
    /// On error the graph is unchanged.
    pub fn add_node(&mut self, spec: NodeSpec) -> Result<NodeId> {
        let op = ops::lookup(&spec.op)?;
        let name = self.requested_name(spec.name.as_deref(), op.default_name)?;
        self.add_node_op(op, spec, name)
    }

    /// The node name TF gives a node asked to be named `name` (`default` when `None`): a
    /// name ending in `/` is used exactly, without the `/` (no scope prefix, no suffix; an
    /// error later if a node has it), as `tf.group(..., name="Adam/")` and `get_variable`'s
    /// `scope/name` use it; any other name is prefixed with the current name scope and made
    /// unique (`_1`, `_2`, ...). Errors: a name TF would refuse (`check_node_name`).
    pub fn requested_name(&mut self, name: Option<&str>, default: &str) -> Result<String> {
        if let Some(n) = name {
            check_node_name(n.strip_suffix('/').unwrap_or(n))?;
        }
        Ok(match name.and_then(|n| n.strip_suffix('/')) {
            Some(exact) => exact.to_string(),
            None => self.unique_name(name.unwrap_or(default)),
        })
    }

    /// [`Graph::add_node`] with an exact, full node name (no scope prefix, no suffix);
    /// an error when a node has the name. A name reserved only by a name scope may be taken,
    /// as TF's `name="scope/"` does (`tf.group(..., name="Adam/")` makes the node `Adam`).
    pub fn add_node_full(&mut self, spec: NodeSpec, name: String) -> Result<NodeId> {
        let op = ops::lookup(&spec.op)?;
        self.add_node_op(op, spec, name)
    }

    /// [`Graph::add_node_full`] with the op already looked up.
    fn add_node_op(&mut self, op: &'static ops::OpDef, spec: NodeSpec, name: String) -> Result<NodeId> {
        // only an existing node blocks the name; one a name scope reserved may be taken (TF)
        if self.by_name.contains_key(&name) {
            return Err(OxiflowError::InvalidArgument(format!("a node named '{name}' already exists")));
        }
        let mut spec = spec;
        let mut inputs = std::mem::take(&mut spec.inputs);
        for (i, inp) in inputs.iter_mut().enumerate() {
            let src = self.node(inp.node)?;
            if inp.index >= src.outputs.len() {
                return Err(OxiflowError::InvalidArgument(format!("{} input {i}: node '{}' has no output {}", op.name, src.name, inp.index)));
            }
            if src.op.name == "VariableV2" && !op.ref_inputs.contains(&i) {
                if let Some(v) = self.variable_info(src.id) {
                    *inp = Output::new(v.read, 0);
                }
            }
        }
        op.check_arity(&name, inputs.len())?;
        op.check_attrs(&name, &spec.attrs)?;
        let input_types: Vec<TensorType> = inputs.iter().map(|o| self.output_type(*o).cloned()).collect::<Result<_>>()?;
        ops::dynamic_shape::check_unknown_dims(op, &name, &input_types)?;
        let outputs = (op.infer)(&InferCtx { op: op.name, node: &name, inputs: &input_types, attrs: &spec.attrs })?;
        // TF's TensorShape refuses a shape whose element count overflows; a byte size over
        // isize::MAX could not be allocated either.
        for (k, tt) in outputs.iter().enumerate() {
            if tt.shape.is_fully_defined() && crate::strided::element_count(tt.shape.dims(), tt.dtype.size_of()).is_err() {
                return Err(OxiflowError::InvalidArgument(format!(
                    "{} '{name}': output {k} would have shape {} of {}, whose size in bytes overflows",
                    op.name, tt.shape, tt.dtype
                )));
            }
        }
        let mut control_inputs = self.sc().control_stack.last().cloned().unwrap_or_default();
        control_inputs.extend_from_slice(&spec.control_inputs);
        control_inputs.sort_unstable();
        control_inputs.dedup();
        let partial = input_types.iter().chain(&outputs).any(|t| !t.shape.is_fully_defined());
        let mut node = Node {
            partial,
            id: self.nodes.len(),
            name,
            op,
            inputs,
            control_inputs,
            attrs: spec.attrs,
            requested_device: DeviceSpec::default(),
            colocation: Vec::new(),
            outputs,
        };
        let by_function = self.place_request(&mut node)?;
        let id = self.commit(node);
        if by_function {
            self.by_device_function.insert(id);
        }
        Ok(id)
    }

    /// Whether a device function decided the node's requested device (else device scopes
    /// or `colocate_with` did, or nothing).
    pub fn request_from_device_function(&self, id: NodeId) -> bool {
        self.by_device_function.contains(&id)
    }

    fn commit(&mut self, node: Node) -> NodeId {
        let id = node.id;
        self.by_name.insert(node.name.clone(), id);
        self.nodes.push(node);
        id
    }

    /// Sets `requested_device` and `colocation` from the scope stacks (ops.py
    /// `_apply_device_functions` and the colocation block of `_create_op_internal`). Inside
    /// `colocate_with`, device scopes opened before it are suspended, those opened inside it
    /// apply, and then the colocated op's device (if it has one) replaces the result.
    /// Returns whether a device function's result is (part of) the request.
    fn place_request(&self, node: &mut Node) -> Result<bool> {
        let mut by_function = false;
        let sc = self.sc();
        let frame = sc.colocation_stack.last().filter(|f| !f.is_empty());
        let first_scope = if frame.is_some() { sc.colocation_device_depth.last().copied().unwrap_or(0) } else { 0 };
        let mut device = DeviceSpec::default();
        for scope in sc.device_stack[first_scope.min(sc.device_stack.len())..].iter().rev() {
            match scope {
                DeviceScope::Spec(s) if s.is_empty() => continue,
                DeviceScope::Spec(s) => device = s.merged_with(&device),
                DeviceScope::Reset => break,
                DeviceScope::Function(f) => {
                    let def = self.node_def_of(node, &device);
                    let out = f.call(&def).map_err(|msg| OxiflowError::DeviceFunction { node: node.name.clone(), op: node.op.name.to_string(), msg })?;
                    device = DeviceSpec::parse(&out).map_err(|e| OxiflowError::DeviceFunction {
                        node: node.name.clone(),
                        op: node.op.name.to_string(),
                        msg: format!("returned an invalid device: {e}"),
                    })?;
                    by_function = true;
                }
            }
        }
        if let Some(frame) = frame {
            let mut groups: Vec<String> = frame.iter().flat_map(|&c| self.nodes[c].colocation_groups()).collect();
            groups.sort();
            groups.dedup();
            node.colocation = groups;
            if let Some(dev) = frame.iter().rev().map(|&c| &self.nodes[c].requested_device).find(|d| !d.is_empty()) {
                device = dev.clone();
                by_function = false;
            }
        }
        node.requested_device = device;
        Ok(by_function)
    }

    fn node_def_of(&self, node: &Node, device: &DeviceSpec) -> NodeDef {
        NodeDef {
            name: node.name.clone(),
            op: node.op.name.to_string(),
            device: device.to_string(),
            input: node
                .inputs
                .iter()
                .map(|o| {
                    let n = &self.nodes[o.node];
                    if o.index == 0 {
                        n.name.clone()
                    } else {
                        n.tensor_name(o.index)
                    }
                })
                .chain(node.control_inputs.iter().map(|&c| format!("^{}", self.nodes[c].name)))
                .collect(),
            attr: node.attrs.iter().map(|(k, v)| (k.clone(), v.to_string())).collect(),
        }
    }

    /// The [`NodeDef`] view of an existing node.
    pub fn node_def(&self, id: NodeId) -> Result<NodeDef> {
        let n = self.node(id)?;
        Ok(self.node_def_of(n, &n.requested_device))
    }

    /// `tf.Variable(initial_value)` (TF1 `RefVariable._init_from_args`): creates
    /// `<name>/initial_value` (a `Const` holding `value`), `<name>` (`VariableV2`),
    /// `<name>/Assign` and `<name>/read` (an `Identity` colocated with the variable), where
    /// `<name>` is `name` (default `Variable`) made unique in the current name scope, or
    /// `name` without its trailing `/` exactly when it ends in `/` (an error if taken).
    /// Registers it in `GLOBAL_VARIABLES` and, when `trainable`, in `TRAINABLE_VARIABLES`.
    /// Returns the `VariableV2` node. On error the graph is unchanged.
    pub fn variable(&mut self, value: crate::tensor::Tensor, name: Option<&str>, trainable: bool) -> Result<NodeId> {
        let base = self.requested_name(name, "Variable")?;
        let len = self.nodes.len();
        // TF builds a variable under `ops.init_scope()`: its initializer and `read` snapshot take
        // no control dependencies from enclosing blocks (else `init` would wait for them, e.g. for
        // update ops when an optimizer creates slots inside `control_dependencies(update_ops)`)
        let saved_control = std::mem::take(&mut self.sc_mut().control_stack);
        let built = (|| -> Result<VariableInfo> {
            let dtype = value.dtype();
            let shape = value.shape();
            let init = self.add_node_full(NodeSpec::new("Const", &[]).attr("value", value).attr("dtype", dtype), format!("{base}/initial_value"))?;
            let var = self.add_node_full(NodeSpec::new("VariableV2", &[]).attr("dtype", dtype).attr("shape", ops::AttrValue::Shape(shape.0)), base.clone())?;
            let initializer = self.add_node_full(NodeSpec::new("Assign", &[Output::new(var, 0), Output::new(init, 0)]), format!("{base}/Assign"))?;
            self.push_colocation(var, true)?;
            let read = self.add_node_full(NodeSpec::new("Identity", &[Output::new(var, 0)]), format!("{base}/read"));
            self.pop_colocation();
            Ok(VariableInfo { var, read: read?, initializer, trainable })
        })();
        self.sc_mut().control_stack = saved_control;
        self.tidy_scopes();
        match built {
            Ok(info) => {
                self.add_to_collection(keys::GLOBAL_VARIABLES, Output::new(info.var, 0));
                if trainable {
                    self.add_to_collection(keys::TRAINABLE_VARIABLES, Output::new(info.var, 0));
                }
                let var = info.var;
                self.variables.push(info);
                Ok(var)
            }
            Err(e) => {
                self.truncate(len);
                Err(e)
            }
        }
    }

    /// Removes nodes from `len` on (rollback of a composite build that failed half-way),
    /// with the collection entries, variables and device-function marks that name them (a
    /// custom gradient's Julia code may have made any of them before the build failed).
    pub(crate) fn truncate(&mut self, len: usize) {
        for n in self.nodes.drain(len..) {
            self.by_name.remove(&n.name);
        }
        for list in self.collections.values_mut() {
            list.retain(|o| o.node < len);
        }
        self.variables.retain(|v| v.var < len && v.read < len && v.initializer < len);
        self.by_device_function.retain(|&n| n < len);
    }

    /// TF's `global_variables_initializer()`: a `NoOp` named `init` with a control input on
    /// every variable's initializer. A new node each call (ADCME's `init` does the same).
    pub fn global_variables_initializer(&mut self) -> Result<NodeId> {
        let deps: Vec<NodeId> = self.variables.iter().map(|v| v.initializer).collect();
        let mut spec = NodeSpec::new("NoOp", &[]).name("init");
        spec.control_inputs = deps;
        self.add_node(spec)
    }
}

/// The concatenation of `parts`, allocated once at its final size (`format!` grows its
/// buffer step by step; names are built for every node, so this shows in graph building).
pub(crate) fn concat(parts: &[&str]) -> String {
    let mut s = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for p in parts {
        s.push_str(p);
    }
    s
}

impl fmt::Debug for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Graph({} nodes)", self.nodes.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::Tensor;

    #[test]
    fn names_are_unique_tf_style_even_around_explicit_names() {
        let mut g = Graph::new();
        let x = g.constant(Tensor::scalar(1.0f64)).unwrap();
        let sin = |g: &mut Graph| {
            let o = g.op("Sin", &[x]).unwrap();
            g.nodes()[o.node].name.clone()
        };
        let names: Vec<String> = (0..3).map(|_| sin(&mut g)).collect();
        assert_eq!(names, ["Sin", "Sin_1", "Sin_2"]);
        g.add_node(NodeSpec::new("Sin", &[x]).name("Sin_3")).unwrap();
        assert_eq!(sin(&mut g), "Sin_4");
        let scope = g.push_name_scope("gradients");
        assert_eq!(scope, "gradients");
        assert_eq!(sin(&mut g), "gradients/Sin");
        g.pop_name_scope();
        assert_eq!(g.push_name_scope("gradients"), "gradients_1");
        g.pop_name_scope();
        assert!(g.add_node_full(NodeSpec::new("Sin", &[x]), "Sin".into()).is_err());
    }

    #[test]
    fn a_name_ending_in_a_slash_is_used_exactly_inside_any_scope() {
        // TF: tf.group(..., name="Adam/") inside name_scope("outer") makes the node "Adam"
        let mut g = Graph::new();
        let x = g.constant(Tensor::scalar(1.0f64)).unwrap();
        g.push_name_scope("outer");
        let id = g.add_node(NodeSpec::new("Sin", &[x]).name("Adam/")).unwrap();
        assert_eq!(g.nodes()[id].name, "Adam");
        let e = g.add_node(NodeSpec::new("Cos", &[x]).name("Adam/")).unwrap_err().to_string();
        assert!(e.contains("Adam"), "a taken exact name is an error: {e}");
        let id = g.add_node(NodeSpec::new("Cos", &[x]).name("Adam")).unwrap();
        assert_eq!(g.nodes()[id].name, "outer/Adam", "without the slash: scoped and unique");
        assert!(g.add_node(NodeSpec::new("Cos", &[x]).name("/")).is_err());
        g.pop_name_scope();
    }
}
