//! The placer: assigns every node a device, as TensorFlow's graph `Placer` does
//! (`placer.cc`, `colocation_graph.cc`):
//!
//! 1. colocation groups by union-find: a variable with every op taking it by reference
//!    (`Assign`), where the consumer's conflicting request is overridden by the variable's;
//!    then each `loc:@name` entry (`colocate_with`, the variable's `read` snapshot,
//!    gradient ops with `colocate=true`), where a conflict is an error unless soft placement
//!    is on, which drops that one request;
//! 2. per group, the candidate devices: those matching the merged request and having a
//!    kernel for every member (by op and dtypes); GPU before CPU, then lowest index;
//!    soft placement drops the type and id of an impossible request;
//! 3. nodes in id order take their group's first candidate; "generators" (no inputs, one
//!    output: `Const`, `Placeholder`) are placed last, on their consumers' device when all
//!    consumers agree (TF's heuristic A).
//!
//! Differences from TF, on purpose: device ids order numerically (`GPU:2` before `GPU:10`).

use crate::device::spec::DeviceSpec;
use crate::device::{DeviceSet, DeviceType};
use crate::dtype::DType;
use crate::error::{OxiflowError, Result};
use crate::graph::{Graph, Node, NodeId};
use std::borrow::Cow;
use std::collections::HashMap;

/// Result of placing a set of nodes: node → index into the [`DeviceSet`].
pub type Assignment = HashMap<NodeId, usize>;

/// A colocation group (meaningful at its union-find root). The request is borrowed from
/// the node until a merge makes a new one: most groups are single nodes.
#[derive(Clone)]
struct Group<'a> {
    request: Cow<'a, DeviceSpec>,
    pinned: Option<usize>,
    types: u32,
}

/// Member index of a node that is not being placed.
const NOT_MEMBER: u32 = u32::MAX;

struct Placer<'a> {
    graph: &'a Graph,
    devices: &'a DeviceSet,
    soft: bool,
    /// device types in priority order (GPU, CPU, ...)
    types: Vec<DeviceType>,
    /// device indices in preference order
    order: Vec<usize>,
    /// index into `types` of each device's type
    device_type_index: Vec<usize>,
    /// member index of each graph node ([`NOT_MEMBER`] for nodes not being placed)
    local: Vec<u32>,
    nodes: Vec<NodeId>,
    parent: Vec<usize>,
    rank: Vec<u8>,
    groups: Vec<Group<'a>>,
}

/// TF's device-type priorities (`DEVICE_GPU` 210 before `DEVICE_CPU` 60).
fn type_priority(t: DeviceType) -> i32 {
    match t {
        DeviceType::Gpu => 210,
        DeviceType::Cpu => 60,
    }
}

impl<'a> Placer<'a> {
    fn new(graph: &'a Graph, devices: &'a DeviceSet, soft: bool) -> Placer<'a> {
        let mut types: Vec<DeviceType> = Vec::new();
        for d in &devices.devices {
            let t = d.attributes().device_type;
            if !types.contains(&t) {
                types.push(t);
            }
        }
        types.sort_by_key(|&t| -type_priority(t));
        let mut order: Vec<usize> = (0..devices.devices.len()).collect();
        order.sort_by_key(|&i| {
            let a = devices.devices[i].attributes();
            (types.iter().position(|t| *t == a.device_type), a.spec.id)
        });
        let device_type_index = devices.devices.iter().map(|d| types.iter().position(|t| *t == d.attributes().device_type).unwrap_or(31)).collect();
        Placer {
            graph,
            devices,
            soft,
            types,
            order,
            device_type_index,
            local: vec![NOT_MEMBER; graph.len()],
            nodes: Vec::new(),
            parent: Vec::new(),
            rank: Vec::new(),
            groups: Vec::new(),
        }
    }

    fn supported_types(&self, n: &Node) -> u32 {
        // Dtypes gathered on the stack for the usual few inputs and outputs.
        const INLINE: usize = 16;
        let (mut ins_buf, mut outs_buf) = ([DType::Float32; INLINE], [DType::Float32; INLINE]);
        let (ins_vec, outs_vec): (Vec<DType>, Vec<DType>);
        let ins: &[DType] = if n.inputs.len() <= INLINE {
            let mut k = 0;
            for t in n.inputs.iter().filter_map(|o| self.graph.output_type(*o).ok()) {
                ins_buf[k] = t.dtype;
                k += 1;
            }
            &ins_buf[..k]
        } else {
            ins_vec = n.inputs.iter().filter_map(|o| self.graph.output_type(*o).ok().map(|t| t.dtype)).collect();
            &ins_vec
        };
        let outs: &[DType] = if n.outputs.len() <= INLINE {
            for (b, t) in outs_buf.iter_mut().zip(&n.outputs) {
                *b = t.dtype;
            }
            &outs_buf[..n.outputs.len()]
        } else {
            outs_vec = n.outputs.iter().map(|t| t.dtype).collect();
            &outs_vec
        };
        let mut mask = 0;
        for (i, t) in self.types.iter().enumerate() {
            if n.op.has_kernel(*t, ins, outs) {
                mask |= 1 << i;
            }
        }
        mask
    }

    fn add_member(&mut self, id: NodeId, fixed: Option<usize>) -> Result<()> {
        let graph: &'a Graph = self.graph;
        let n = graph.node(id)?;
        let g = Group { request: Cow::Borrowed(&n.requested_device), pinned: fixed, types: self.supported_types(n) };
        self.local[id] = self.nodes.len() as u32;
        self.nodes.push(id);
        self.parent.push(self.parent.len());
        self.rank.push(0);
        self.groups.push(g);
        Ok(())
    }

    /// Member index of graph node `id`, if it is being placed.
    fn member(&self, id: NodeId) -> Option<usize> {
        self.local.get(id).copied().filter(|&m| m != NOT_MEMBER).map(|m| m as usize)
    }

    fn find(&mut self, mut i: usize) -> usize {
        while self.parent[i] != i {
            self.parent[i] = self.parent[self.parent[i]];
            i = self.parent[i];
        }
        i
    }

    fn name(&self, i: usize) -> &str {
        &self.graph.nodes()[self.nodes[i]].name
    }

    /// Merges the groups of members `a` and `b` (`ColocationGraph::ColocateNodes`).
    fn union(&mut self, a: usize, b: usize, soft: bool) -> std::result::Result<(), String> {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra == rb {
            return Ok(());
        }
        let (ga, gb) = (&self.groups[ra], &self.groups[rb]);
        let prefix = || format!("Cannot colocate nodes {{{{colocation_node {}}}}} and {{{{colocation_node {}}}}}", self.name(a), self.name(b));
        let request = ga.request.merge_constraint(&gb.request, soft).map_err(|e| format!("{}: {e}", prefix()))?;
        let pinned = match (ga.pinned, gb.pinned) {
            (Some(x), Some(y)) if x != y => {
                return Err(format!(
                    "{}: they were assigned to incompatible devices {} and {}",
                    prefix(),
                    self.devices.devices[x].attributes().name,
                    self.devices.devices[y].attributes().name
                ))
            }
            (x, y) => x.or(y),
        };
        let types = ga.types & gb.types;
        if types == 0 {
            return Err(format!("{} because no device type supports both of those nodes and the other nodes colocated with them.", prefix()));
        }
        if let Some(d) = pinned.filter(|&d| types & (1 << self.device_type_index[d]) == 0) {
            return Err(format!(
                "{}: an earlier run of this session placed their group on {}, which has no kernel for every node of it (a node added since needs another device type; place the group with a device scope before the first run)",
                prefix(),
                self.devices.devices[d].attributes().name
            ));
        }
        let (root, child) = if self.rank[ra] >= self.rank[rb] { (ra, rb) } else { (rb, ra) };
        if self.rank[ra] == self.rank[rb] {
            self.rank[root] += 1;
        }
        self.parent[child] = root;
        self.groups[root] = Group { request: Cow::Owned(request), pinned, types };
        Ok(())
    }

    /// The group's candidate devices, best first (an iterator: placing a node needs only
    /// the first, a generator also asks whether its consumers' device is one).
    fn candidates<'s>(&'s self, g: &'s Group) -> impl Iterator<Item = usize> + 's {
        let fits = move |req: &DeviceSpec, i: usize| req.matches(&self.devices.devices[i].attributes().spec) && g.types & (1 << self.device_type_index[i]) != 0;
        let strict = self.strict(g);
        let relaxed = (g.pinned.is_none() && !strict && self.soft).then(|| g.request.without_type_and_id());
        let pinned = g.pinned.into_iter();
        let listed = self.order.iter().copied().filter(move |&i| if strict { fits(&g.request, i) } else { relaxed.as_ref().is_some_and(|r| fits(r, i)) });
        pinned.chain(listed.take_while(move |_| g.pinned.is_none()))
    }

    /// Whether some device matches the group's request as given and has a kernel for every
    /// member (else only soft placement finds candidates).
    fn strict(&self, g: &Group) -> bool {
        g.pinned.is_none()
            && self.order.iter().any(|&i| g.request.matches(&self.devices.devices[i].attributes().spec) && g.types & (1 << self.device_type_index[i]) != 0)
    }

    /// The error TF gives when a group has no candidate (`GetDevicesForNode`).
    fn no_device_error(&self, node: &Node, g: &Group) -> OxiflowError {
        let req = g.request.to_string();
        let any_match = self.devices.devices.iter().any(|d| g.request.matches(&d.attributes().spec));
        let msg = if !any_match {
            let mut m = format!(
                "{{{{node {}}}}} was explicitly assigned to {} but available devices are [ {} ]. Make sure the device specification refers to a valid device.",
                node.name,
                req,
                self.devices.sorted_names().join(", ")
            );
            if g.request.device_type.as_deref() == Some("GPU") && !self.devices.has_gpu() {
                m.push_str(" The requested device appears to be a GPU, but no GPU is present (set OXIFLOW_EMULATED_GPUS=1 for an emulated one, or create the session with soft placement).");
            }
            m
        } else {
            let t = g.request.device_type.clone().unwrap_or_default();
            let mut m = format!(
                "Could not satisfy explicit device specification '{}' because no supported kernel for {} devices is available.\nOp: {}\nColocation group members supported on: [{}]",
                req,
                t,
                node.op.name,
                self.types.iter().enumerate().filter(|(i, _)| g.types & (1 << i) != 0).map(|(_, t)| t.as_str()).collect::<Vec<_>>().join(", ")
            );
            if t == "GPU" {
                // what TF's text leaves to the reader: where Oxiflow lacks a GPU kernel TF
                // has (`Conv2D`, the special functions) the way out is soft placement
                m.push_str(
                    "\n(Oxiflow has no GPU kernel for this op, or an op colocated with it, with these dtypes; with soft placement, Session(soft=true) or allow_soft_placement=true, it runs on the CPU.)",
                );
            }
            m
        };
        OxiflowError::Placement { node: node.name.clone(), msg }
    }
}

/// What a deferred generator's consumers agree on (pass 2 of [`place`]).
#[derive(Copy, Clone, PartialEq, Eq)]
enum Agree {
    /// Not a deferred generator (consumers are not tracked).
    NoConsumer,
    /// A deferred generator with no consumer seen yet.
    Pending,
    /// Every consumer seen is on this device.
    One(Option<usize>),
    /// Consumers on different devices.
    Many,
}

/// Places `nodes` (sorted ids; they must include every node they are colocated with or
/// take by reference) on `devices`. `fixed` holds assignments from earlier runs of the same
/// session, which stay. Returns the device of every node in `nodes`.
///
/// Errors (TF's texts): `Cannot assign a device for operation <n>: ... was explicitly
/// assigned to <req> but available devices are [ ... ]`, `Cannot colocate nodes ...`.
pub fn place(graph: &Graph, nodes: &[NodeId], devices: &DeviceSet, soft: bool, fixed: &Assignment) -> Result<Assignment> {
    place_impl(graph, nodes, devices, soft, fixed, None)
}

/// How a colocation group's device was chosen ([`place_explained`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Rule {
    /// A member was placed by an earlier run of the session and the group kept its device.
    EarlierRun,
    /// The first candidate for the group's request (GPU before CPU, lowest index, among
    /// the devices with a kernel for every member); the request may be empty.
    Request,
    /// No device matched the request with a kernel; soft placement dropped its type and id.
    SoftPlacement,
    /// A generator (no inputs, one output) went where all its consumers are (TF's heuristic A).
    Generator,
}

/// Why a node is on its device: the rule, the node whose placement pinned its colocation
/// group (`by`, the node itself when it decided), and the group (named by one member).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub rule: Rule,
    pub by: NodeId,
    pub group: NodeId,
}

/// [`place_explained`]'s result: the assignment, one [`Decision`] per placed node, and the
/// colocation requests soft placement dropped (`node`, `target`, the merge error).
#[derive(Debug, Default)]
pub struct Explained {
    pub assignment: Assignment,
    pub decisions: HashMap<NodeId, Decision>,
    pub dropped: Vec<(NodeId, NodeId, String)>,
}

#[derive(Default)]
struct ExplainLog {
    /// (group root, deciding member, rule), in pin order
    pins: Vec<(usize, usize, Rule)>,
    dropped: Vec<(NodeId, NodeId, String)>,
}

/// [`place`] that also records why each node went where it went (for
/// `explain_placement`). Same result and errors as [`place`].
pub fn place_explained(graph: &Graph, nodes: &[NodeId], devices: &DeviceSet, soft: bool, fixed: &Assignment) -> Result<Explained> {
    let mut log = ExplainLog::default();
    let (assignment, decisions) = {
        let mut out = None;
        let assignment = place_impl(graph, nodes, devices, soft, fixed, Some((&mut log, &mut out)))?;
        (assignment, out.unwrap_or_default())
    };
    Ok(Explained { assignment, decisions, dropped: log.dropped })
}

type ExplainOut<'x> = (&'x mut ExplainLog, &'x mut Option<HashMap<NodeId, Decision>>);

fn place_impl(graph: &Graph, nodes: &[NodeId], devices: &DeviceSet, soft: bool, fixed: &Assignment, mut explain: Option<ExplainOut<'_>>) -> Result<Assignment> {
    if devices.devices.is_empty() {
        return Err(OxiflowError::FailedPrecondition("No devices are registered".into()));
    }
    let mut p = Placer::new(graph, devices, soft);
    for &id in nodes {
        p.add_member(id, fixed.get(&id).copied())?;
    }
    // 1a. reference edges: the consumer follows the variable
    for &id in nodes {
        let n = graph.node(id)?;
        for &i in n.op.ref_inputs {
            let src = n.inputs[i].node;
            let (Some(a), Some(b)) = (p.member(src), p.member(id)) else { continue };
            let (ra, rb) = (p.find(a), p.find(b));
            if !p.groups[ra].request.compatible(&p.groups[rb].request) {
                p.groups[rb].request = Cow::Owned(p.groups[ra].request.clone().into_owned());
            }
            p.union(a, b, false).map_err(|msg| OxiflowError::Placement { node: n.name.clone(), msg })?;
        }
    }
    // 1b. colocation lists (loc:@name)
    for &id in nodes {
        let n = graph.node(id)?;
        for entry in &n.colocation {
            let Some(target) = entry.strip_prefix("loc:@").and_then(|t| graph.node_by_name(t)) else { continue };
            let (Some(a), Some(b)) = (p.member(target), p.member(id)) else { continue };
            if let Err(msg) = p.union(a, b, p.soft) {
                if !p.soft {
                    return Err(OxiflowError::InvalidArgument(msg));
                }
                if let Some((log, _)) = explain.as_mut() {
                    log.dropped.push((id, target, msg));
                }
            }
        }
    }
    // 2. pass 1: everything but generators, in id order
    let is_generator = |n: &Node| n.inputs.is_empty() && n.outputs.len() == 1 && !n.op.name.starts_with("Variable");
    let mut deferred = Vec::new();
    for (li, &id) in nodes.iter().enumerate() {
        let n = graph.node(id)?;
        let root = p.find(li);
        if p.groups[root].pinned.is_some() {
            continue;
        }
        if is_generator(n) {
            deferred.push(li);
            continue;
        }
        let Some(first) = p.candidates(&p.groups[root]).next() else { return Err(p.no_device_error(n, &p.groups[root])) };
        if let Some((log, _)) = explain.as_mut() {
            let rule = if p.strict(&p.groups[root]) { Rule::Request } else { Rule::SoftPlacement };
            log.pins.push((root, li, rule));
        }
        p.groups[root].pinned = Some(first);
    }
    // 3. pass 2: generators follow their consumers when those agree
    if !deferred.is_empty() {
        // The devices of each generator's consumers. Consumers have inputs, so none is a
        // generator and each one's group was pinned in pass 1 (or before): what pass 2
        // pins cannot change these.
        let mut agree = vec![Agree::NoConsumer; nodes.len()];
        for &li in &deferred {
            agree[li] = Agree::Pending;
        }
        for (li, &id) in nodes.iter().enumerate() {
            for inp in &graph.node(id)?.inputs {
                let Some(gi) = p.member(inp.node) else { continue };
                if agree[gi] == Agree::NoConsumer {
                    continue;
                }
                let r = p.find(li);
                let d = p.groups[r].pinned;
                agree[gi] = match agree[gi] {
                    Agree::Pending => Agree::One(d),
                    Agree::One(e) if e == d => Agree::One(d),
                    _ => Agree::Many,
                };
            }
        }
        for li in deferred {
            let n = graph.node(nodes[li])?;
            let root = p.find(li);
            if p.groups[root].pinned.is_some() {
                continue;
            }
            let g = &p.groups[root];
            let Some(first) = p.candidates(g).next() else { return Err(p.no_device_error(n, g)) };
            let (choice, followed) = match agree[li] {
                Agree::One(Some(d)) if p.candidates(g).any(|c| c == d) => (d, true),
                _ => (first, false),
            };
            if let Some((log, _)) = explain.as_mut() {
                let rule = if followed {
                    Rule::Generator
                } else if p.strict(g) {
                    Rule::Request
                } else {
                    Rule::SoftPlacement
                };
                log.pins.push((root, li, rule));
            }
            p.groups[root].pinned = Some(choice);
        }
    }
    let mut out = Assignment::with_capacity(nodes.len());
    for (li, &id) in nodes.iter().enumerate() {
        let r = p.find(li);
        let d = p.groups[r].pinned.ok_or_else(|| OxiflowError::Internal(format!("node {} left unplaced", p.name(li))))?;
        out.insert(id, d);
    }
    if let Some((log, decisions)) = explain {
        let mut by_root: HashMap<usize, (usize, Rule)> = log.pins.iter().map(|&(r, li, rule)| (r, (li, rule))).collect();
        // groups pinned before this call: decided by a member placed in an earlier run
        for (li, &id) in nodes.iter().enumerate() {
            if fixed.contains_key(&id) {
                let r = p.find(li);
                by_root.entry(r).or_insert((li, Rule::EarlierRun));
            }
        }
        let mut d = HashMap::with_capacity(nodes.len());
        for li in 0..nodes.len() {
            let r = p.find(li);
            let (by, rule) = by_root.get(&r).copied().unwrap_or((li, Rule::Request));
            d.insert(nodes[li], Decision { rule, by: nodes[by], group: nodes[r] });
        }
        *decisions = Some(d);
    }
    Ok(out)
}

/// The nodes a placement of `needed` must include: `needed` plus, transitively, every node
/// they name in a `loc:@` colocation entry or take by reference, and every node that takes
/// one of them by reference (a variable's `Assign` and `Apply*` ops). The last rule makes
/// the first run that needs a variable (usually its initializer) place it where all its
/// reference consumers have kernels, as TF does by placing the whole graph: a CPU-only
/// update op (`ApplyAdagradDA`) keeps its variable off a GPU. Sorted.
pub fn placement_closure(graph: &Graph, needed: &[NodeId]) -> Vec<NodeId> {
    let mut ref_users: HashMap<NodeId, Vec<NodeId>> = HashMap::new();
    for n in graph.nodes() {
        for &i in n.op.ref_inputs {
            if let Some(o) = n.inputs.get(i) {
                ref_users.entry(o.node).or_default().push(n.id);
            }
        }
    }
    let mut seen: std::collections::HashSet<NodeId> = needed.iter().copied().collect();
    let mut stack: Vec<NodeId> = needed.to_vec();
    while let Some(id) = stack.pop() {
        let Ok(n) = graph.node(id) else { continue };
        let refs = n.op.ref_inputs.iter().filter_map(|&i| n.inputs.get(i).map(|o| o.node));
        let locs = n.colocation.iter().filter_map(|e| e.strip_prefix("loc:@").and_then(|t| graph.node_by_name(t)));
        let users = ref_users.get(&id).into_iter().flatten().copied();
        for m in refs.chain(locs).chain(users).collect::<Vec<_>>() {
            if seen.insert(m) {
                stack.push(m);
            }
        }
    }
    let mut v: Vec<_> = seen.into_iter().collect();
    v.sort_unstable();
    v
}
