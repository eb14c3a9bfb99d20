//! `Session`: places what a run needs, partitions it across devices with copy steps,
//! executes it, keeps variables between runs (TF1's `DirectSession`, with
//! `place_pruned_graph`: only the nodes a run needs are placed, so a node that cannot be
//! placed fails only the runs that need it).

use crate::device::config::{GpuOptions, MemoryStats, CUDA_VISIBLE_DEVICES};
use crate::device::{emulated_gpus_from_env, DeviceKind, DeviceSet};
use crate::error::{OxiflowError, Result};
use crate::eval::needed_nodes;
use crate::executor::{execute, Plan, Step, StepKind};
use crate::function::InnerStep;
use crate::fusion::{fuse, fusion_default, Cluster, ClusterOp, Fusion, Unit, DEFAULT_MAX_FUSED_ELEMENTS};
use crate::graph::TensorType;
use crate::graph::{Graph, Node, NodeId, Output};
use crate::ops::fused::{program_attr, FUSED_ELEMENTWISE};
use crate::ops::matmul::FUSED_MATMUL;
use crate::ops::{AttrValue, Attrs, OpDef};
use crate::placer::{place_explained, placement_closure, Assignment, Decision};
use crate::profile::{CopyLabel, MemorySample, NodeExecStats, StepLabel, StepStats};
use crate::tensor::Tensor;
use crate::variable_store::VariableStore;
use rustc_hash::FxHashMap;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

/// Session configuration (TF's `ConfigProto` subset; ADCME's `Session(; soft, CPU, GPU)`).
#[derive(Clone, Debug, Default)]
pub struct SessionOptions {
    /// `allow_soft_placement`: an impossible device request falls back to a supported device.
    pub allow_soft_placement: bool,
    /// `log_device_placement`: placement lines `name: (Op): device` go to the session log.
    pub log_device_placement: bool,
    /// `device_count["CPU"]` (default 1).
    pub cpu_count: Option<usize>,
    /// `device_count["GPU"]`: at most this many GPUs (default: all present).
    pub gpu_count: Option<usize>,
    /// Worker threads, the ops that may run at once (`inter_op_parallelism_threads`;
    /// `None` or 0: number of cores).
    pub inter_op_threads: Option<usize>,
    /// `intra_op_parallelism_threads`: threads one kernel may use (`MatMul`'s `gemm`, the
    /// `faer` linear algebra; see [`crate::intra_op`]); `None` or 0: every core (TF's default).
    pub intra_op_threads: Option<usize>,
    /// Emulated GPUs; `None` reads `OXIFLOW_EMULATED_GPUS`.
    pub emulated_gpus: Option<usize>,
    /// `GPUOptions`: `allow_growth`, `per_process_gpu_memory_fraction`,
    /// `visible_device_list`, virtual devices.
    pub gpu_options: GpuOptions,
    /// The value of `CUDA_VISIBLE_DEVICES` to use; `None` reads the environment.
    pub cuda_visible_devices: Option<String>,
    /// Elementwise fusion of CPU ops before execution ([`crate::fusion`]); `None`: on unless
    /// the environment sets `OXIFLOW_FUSION=0`.
    pub fusion: Option<bool>,
    /// Largest tensor (elements) whose ops are fused; `None`:
    /// [`crate::fusion::DEFAULT_MAX_FUSED_ELEMENTS`].
    pub fusion_max_elements: Option<usize>,
}

/// Most threads a session's `inter_op_threads` or `intra_op_threads` may ask for.
pub const MAX_SESSION_THREADS: usize = 1024;
/// Most CPU devices (`device_count["CPU"]`) a session may have.
pub const MAX_CPU_DEVICES: usize = 256;
/// Most emulated GPUs (as `OXIFLOW_EMULATED_GPUS` allows).
pub const MAX_EMULATED_GPUS: usize = 64;

impl SessionOptions {
    /// Bounds that keep a session from hanging or exhausting memory while it starts (TF
    /// takes any int32 and tries): at most [`MAX_SESSION_THREADS`] inter- or intra-op
    /// threads, [`MAX_CPU_DEVICES`] CPU devices and [`MAX_EMULATED_GPUS`] emulated GPUs.
    /// Errors: `InvalidArgument` naming the option, its value and the bound.
    pub fn check(&self) -> Result<()> {
        let bounds = [
            ("inter_op_parallelism_threads", self.inter_op_threads, MAX_SESSION_THREADS, "threads"),
            ("intra_op_parallelism_threads", self.intra_op_threads, MAX_SESSION_THREADS, "threads"),
            ("device_count['CPU']", self.cpu_count, MAX_CPU_DEVICES, "CPU devices"),
            ("emulated_gpus", self.emulated_gpus, MAX_EMULATED_GPUS, "emulated GPUs"),
        ];
        for (name, value, max, what) in bounds {
            if let Some(v) = value.filter(|&v| v > max) {
                return Err(OxiflowError::InvalidArgument(format!("{name} = {v}: a session may have at most {max} {what}")));
            }
        }
        Ok(())
    }
}

type PlanKey = (Vec<Output>, Vec<Output>, Vec<NodeId>);

/// A cached, placed step with what the profiler needs to name its steps: built once per
/// plan, shared by every traced run's [`StepStats`].
struct CachedPlan {
    plan: Plan,
    labels: Arc<[StepLabel]>,
    /// Devices the plan's steps run on, in the session's device order.
    devices_used: Vec<String>,
}

/// What [`Session::run`] returns.
#[derive(Debug)]
pub struct RunOutputs {
    /// One host tensor per fetch.
    pub values: Vec<Tensor>,
    /// Step statistics when the run was traced.
    pub step_stats: Option<StepStats>,
}

/// Why each placed node went where it did, and the colocations soft placement dropped
/// (the two nodes and the reason).
type Decisions = (HashMap<NodeId, Decision>, Vec<(NodeId, NodeId, String)>);

/// One unit of a plan before its step is built: its node (the graph's, or a fused one),
/// data inputs, outputs, and the graph nodes it stands for.
type UnitStep = (Arc<Node>, Vec<Output>, Vec<Output>, Vec<NodeId>);

/// A session over a shared graph. Safe to use from several threads; runs may overlap.
pub struct Session {
    graph: Arc<RwLock<Graph>>,
    options: SessionOptions,
    devices: DeviceSet,
    pool: rayon::ThreadPool,
    assignment: Mutex<Assignment>,
    /// Placed plans by (feeds, fetches, targets); FxHash: SipHash of the key was a visible
    /// part of a tiny run.
    plans: Mutex<FxHashMap<PlanKey, Arc<CachedPlan>>>,
    variables: VariableStore,
    log: Mutex<String>,
    /// Why each placed node went where it did, and colocations dropped by soft placement.
    decisions: Mutex<Decisions>,
}

/// The plan's step labels followed by one label per node run inside a functional op's
/// function (`inner`, times since the run's start), whose timings are added to `nodes`
/// (thread and device of their op's step, times shifted by `wall0`). The plan's labels are
/// shared as they are when there is none.
fn with_inner_steps(plan_labels: &Arc<[StepLabel]>, nodes: &mut Vec<NodeExecStats>, inner: &[(usize, InnerStep)], wall0: u64) -> Arc<[StepLabel]> {
    if inner.is_empty() {
        return plan_labels.clone();
    }
    let mut labels = plan_labels.to_vec();
    let thread: HashMap<usize, usize> = nodes.iter().map(|n| (n.step, n.thread)).collect();
    for (step, i) in inner {
        nodes.push(NodeExecStats {
            step: labels.len(),
            thread: thread.get(step).copied().unwrap_or(0),
            start_ns: wall0 + i.start_ns,
            end_ns: wall0 + i.end_ns,
            output_bytes: i.output_bytes,
            device_clock: false,
        });
        labels.push(StepLabel {
            node_name: i.name.clone(),
            op: i.op.clone(),
            device: plan_labels[*step].device.clone(),
            inputs: i.inputs.clone(),
            outputs: (0..i.output_types.len()).map(|k| if k == 0 { i.name.clone() } else { format!("{}:{k}", i.name) }).collect(),
            output_types: i.output_types.clone(),
            copy: None,
            fused: Vec::new(),
            frame: Some((i.frame.clone(), i.iteration)),
        });
    }
    labels.into()
}

fn tf_input_name(graph: &Graph, o: Output) -> String {
    let n = &graph.nodes()[o.node];
    if o.index == 0 {
        n.name.clone()
    } else {
        n.tensor_name(o.index)
    }
}

impl Session {
    /// Creates the session's devices (CPU:0.., then GPUs, see [`DeviceSet::configured`]) and
    /// worker pool. With `log_device_placement`, the log starts with TF's `Device mapping:`
    /// block.
    /// Errors: a bad `OXIFLOW_EMULATED_GPUS`, an invalid `CUDA_VISIBLE_DEVICES` or
    /// `visible_device_list` entry, bad memory options, a thread pool that cannot start, an
    /// `OXIFLOW_HOST_CACHE_MB` that is not a whole number ([`crate::host_alloc`]).
    pub fn new(graph: Arc<RwLock<Graph>>, options: SessionOptions) -> Result<Session> {
        options.check()?;
        crate::host_alloc::configure_from_env()?;
        let present = match options.emulated_gpus {
            Some(n) => n,
            None => emulated_gpus_from_env()?,
        };
        let env = match &options.cuda_visible_devices {
            Some(v) => Some(v.clone()),
            None => std::env::var(CUDA_VISIBLE_DEVICES).ok(),
        };
        let source = crate::device::provider::gpu_source(present);
        let devices = DeviceSet::configured_from(options.cpu_count.unwrap_or(1), source, options.gpu_count, &options.gpu_options, env.as_deref())?;
        // inter_op sizes the worker pool (0: one per core); intra_op tags its workers, so
        // their kernels get that many threads (crate::intra_op). ADCME passes intra for both.
        let threads = options.inter_op_threads.unwrap_or(0);
        let intra = crate::intra_op::resolve(options.intra_op_threads);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("oxiflow-worker-{i}"))
            .start_handler(move |_| crate::intra_op::set_intra_op_threads(intra))
            .build()
            .map_err(|e| OxiflowError::Internal(format!("cannot start worker threads: {e}")))?;
        // Warnings are logged whether or not log_device_placement is on (TF logs them too).
        let mut log: String = devices.warnings.iter().map(|w| format!("W oxiflow: {w}\n")).collect();
        if options.log_device_placement {
            log.push_str("Device mapping:\n");
            for d in &devices.devices {
                let a = d.attributes();
                if !a.description.is_empty() {
                    log.push_str(&format!("{} -> {}\n", a.name, a.description));
                }
            }
        }
        let variables = VariableStore::new(devices.clone());
        Ok(Session {
            graph,
            options,
            devices,
            pool,
            assignment: Mutex::new(Assignment::new()),
            plans: Mutex::new(FxHashMap::default()),
            variables,
            log: Mutex::new(log),
            decisions: Mutex::new((HashMap::new(), Vec::new())),
        })
    }

    /// The session's devices.
    pub fn devices(&self) -> &DeviceSet {
        &self.devices
    }

    /// `(inter_op, intra_op)` thread counts: the worker pool's size (ops running at once) and
    /// the threads one kernel may use (`intra_op_threads`; unset or 0: every core, TF's default).
    pub fn threads(&self) -> (usize, usize) {
        (self.pool.current_num_threads(), crate::intra_op::resolve(self.options.intra_op_threads))
    }

    /// Memory figures of the device with this name (full, or short as `/device:GPU:0` or
    /// `GPU:0`): bytes in use, peak, limit, reserved. CPUs have no accounted memory.
    /// Errors: an unknown device, a device without an account.
    pub fn memory_stats(&self, device: &str) -> Result<MemoryStats> {
        let spec =
            crate::device::spec::DeviceSpec::parse(device.trim()).or_else(|_| crate::device::spec::DeviceSpec::parse(&format!("/device:{}", device.trim())))?;
        let d =
            self.devices.devices.iter().find(|d| spec.matches(&d.attributes().spec) && spec.device_type.is_some() && spec.id.is_some()).ok_or_else(|| {
                OxiflowError::InvalidArgument(format!("unknown device '{device}': the session's devices are [ {} ]", self.devices.sorted_names().join(", ")))
            })?;
        d.memory()
            .map(|m| m.stats())
            .ok_or_else(|| OxiflowError::InvalidArgument(format!("{} has no memory account (only GPUs, real or emulated, have one)", d.attributes().name)))
    }

    /// The options the session was created with.
    pub fn options(&self) -> &SessionOptions {
        &self.options
    }

    /// Takes (and clears) the text logged since the last call: the device mapping and
    /// placement lines when `log_device_placement` is on.
    pub fn take_log(&self) -> String {
        std::mem::take(&mut *self.log.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Full name of the device `node` was placed on in this session, placing it (and what
    /// it needs) first if no run has used it yet.
    pub fn assigned_device(&self, node: NodeId) -> Result<String> {
        let graph = self.graph.read().map_err(|_| OxiflowError::Internal("graph lock poisoned".into()))?;
        graph.node(node)?;
        let needed = needed_nodes(&graph, &[], &[node], &HashSet::new())?;
        let asg = self.place_nodes(&graph, &needed)?;
        Ok(self.devices.devices[asg[&node]].attributes().name.clone())
    }

    /// Which placement rule put `node` on its device in this session (placing it first if
    /// no run has used it yet): its own request from a device scope, a device function or
    /// `colocate_with`; its colocation group (and with whom); kernel availability; soft
    /// placement; the generator rule; the default choice. See [`crate::explain`].
    pub fn explain_placement(&self, node: NodeId) -> Result<String> {
        self.assigned_device(node)?;
        let graph = self.graph.read().map_err(|_| OxiflowError::Internal("graph lock poisoned".into()))?;
        let d = self.decisions.lock().unwrap_or_else(|p| p.into_inner());
        crate::explain::explain_node(&graph, &self.devices, &self.placed_devices(), &d.0, &d.1, node)
    }

    /// [`Session::explain_placement`] for every node placed so far in this session, in id
    /// order, one paragraph each.
    pub fn placement_report(&self) -> Result<String> {
        let graph = self.graph.read().map_err(|_| OxiflowError::Internal("graph lock poisoned".into()))?;
        let placed = self.placed_devices();
        let d = self.decisions.lock().unwrap_or_else(|p| p.into_inner());
        let mut ids: Vec<NodeId> = placed.keys().copied().collect();
        ids.sort_unstable();
        let parts = ids.iter().map(|&id| crate::explain::explain_node(&graph, &self.devices, &placed, &d.0, &d.1, id)).collect::<Result<Vec<_>>>()?;
        Ok(parts.join("\n"))
    }

    /// The graph this session runs.
    pub fn graph(&self) -> &Arc<RwLock<Graph>> {
        &self.graph
    }

    /// Full device name of every node placed so far in this session (by runs or
    /// [`Session::assigned_device`]); nodes not yet needed by any run are absent.
    pub fn placed_devices(&self) -> HashMap<NodeId, String> {
        let fixed = self.assignment.lock().unwrap_or_else(|p| p.into_inner());
        fixed.iter().map(|(&n, &d)| (n, self.devices.devices[d].attributes().name.clone())).collect()
    }

    fn place_nodes(&self, graph: &Graph, needed: &[NodeId]) -> Result<Assignment> {
        let set = placement_closure(graph, needed);
        let mut fixed = self.assignment.lock().unwrap_or_else(|p| p.into_inner());
        let explained = place_explained(graph, &set, &self.devices, self.options.allow_soft_placement, &fixed)?;
        let new = explained.assignment;
        {
            let mut d = self.decisions.lock().unwrap_or_else(|p| p.into_inner());
            for (id, dec) in explained.decisions {
                d.0.entry(id).or_insert(dec);
            }
            d.1.extend(explained.dropped);
        }
        if self.options.log_device_placement {
            let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
            for &id in &set {
                if !fixed.contains_key(&id) {
                    let n = &graph.nodes()[id];
                    log.push_str(&format!("{}: ({}): {}\n", n.name, n.op.name, self.devices.devices[new[&id]].attributes().name));
                }
            }
        }
        for (&id, &dev) in &new {
            if graph.nodes()[id].op.name == "VariableV2" {
                self.variables.place(id, dev);
            }
        }
        fixed.extend(new.iter().map(|(&k, &v)| (k, v)));
        Ok(new)
    }

    fn build_plan(&self, graph: &Graph, feeds: &[Output], fetches: &[Output], targets: &[NodeId]) -> Result<CachedPlan> {
        let fed: HashSet<Output> = feeds.iter().copied().collect();
        let needed = needed_nodes(graph, fetches, targets, &fed)?;
        let mut to_place = needed.clone();
        to_place.extend(feeds.iter().map(|f| f.node));
        to_place.sort_unstable();
        to_place.dedup();
        let asg = self.place_nodes(graph, &to_place)?;

        let mut plan = Plan::default();
        let mut labels = Vec::new();
        let dev_name = |d: usize| self.devices.devices[d].attributes().name.clone();
        let mut home: HashMap<Output, (usize, usize)> = HashMap::new(); // output -> (slot, device)
        let mut producer: HashMap<usize, usize> = HashMap::new(); // slot -> step
        for f in feeds {
            let dev = asg[&f.node];
            home.insert(*f, (plan.num_slots, dev));
            plan.feed_slots.push((plan.num_slots, dev));
            plan.num_slots += 1;
        }
        let fusion = if self.options.fusion.unwrap_or_else(fusion_default) {
            let devices = &self.devices.devices;
            let max_len = self.options.fusion_max_elements.unwrap_or(DEFAULT_MAX_FUSED_ELEMENTS);
            fuse(graph, &needed, &|id| asg[&id], &|d| devices[d].attributes().kind == DeviceKind::Cpu, &fed, fetches, max_len)
        } else {
            Fusion { clusters: Vec::new(), order: needed.iter().map(|&id| Unit::Node(id)).collect() }
        };
        // each unit's step: its node (the graph's, or a fused one), data inputs, outputs
        let mut units: Vec<UnitStep> = Vec::with_capacity(fusion.order.len());
        let mut clusters: Vec<Option<Cluster>> = fusion.clusters.into_iter().map(Some).collect();
        for u in &fusion.order {
            match *u {
                Unit::Node(id) => {
                    let n = &graph.nodes()[id];
                    let inputs = n.inputs.iter().enumerate().filter(|(i, _)| !n.op.ref_inputs.contains(i)).map(|(_, o)| *o).collect();
                    let outputs = (0..n.outputs.len()).map(|i| Output::new(id, i)).collect();
                    units.push((Arc::new(n.clone()), inputs, outputs, Vec::new()));
                }
                Unit::Cluster(c) => {
                    let Some(cl) = clusters.get_mut(c).and_then(Option::take) else {
                        return Err(OxiflowError::Internal(format!("fused cluster {c} listed twice")));
                    };
                    let last = &graph.nodes()[cl.members[cl.members.len() - 1]];
                    let (op, attrs): (&'static OpDef, Attrs) = match cl.op {
                        ClusterOp::Elementwise(p) => (&FUSED_ELEMENTWISE, [("program".to_string(), program_attr(p))].into_iter().collect()),
                        ClusterOp::MatMul { transpose_a, transpose_b, activation } => {
                            let mut attrs: Attrs =
                                [("transpose_a".to_string(), AttrValue::Bool(transpose_a)), ("transpose_b".to_string(), AttrValue::Bool(transpose_b))]
                                    .into_iter()
                                    .collect();
                            attrs.extend(activation.map(|a| ("activation".to_string(), AttrValue::Str(a.to_string()))));
                            (&FUSED_MATMUL, attrs)
                        }
                    };
                    let outputs: Vec<TensorType> = cl.outputs.iter().map(|&o| graph.output_type(o).cloned()).collect::<Result<_>>()?;
                    let input_types = cl.inputs.iter().map(|&o| graph.output_type(o)).collect::<Result<Vec<_>>>()?;
                    let node = Node {
                        id: last.id,
                        name: last.name.clone(),
                        op,
                        inputs: cl.inputs.clone(),
                        control_inputs: Vec::new(),
                        attrs,
                        requested_device: last.requested_device.clone(),
                        colocation: Vec::new(),
                        // elementwise clusters take fully known nodes only; a _FusedMatMul's
                        // batch dimension may be unknown (it runs specialised, by its infer)
                        partial: input_types.into_iter().chain(&outputs).any(|t| !t.shape.is_fully_defined()),
                        outputs,
                    };
                    units.push((Arc::new(node), cl.inputs, cl.outputs, cl.members));
                }
            }
        }
        let mut step_of: HashMap<NodeId, usize> = HashMap::new();
        for (node, _, outputs, members) in &units {
            let dev = asg[&node.id];
            for (i, o) in outputs.iter().enumerate() {
                if !fed.contains(o) {
                    home.insert(*o, (plan.num_slots + i, dev));
                    producer.insert(plan.num_slots + i, plan.steps.len());
                }
            }
            step_of.insert(node.id, plan.steps.len());
            for &m in members.iter() {
                step_of.insert(m, plan.steps.len());
            }
            labels.push(StepLabel {
                node_name: node.name.clone(),
                op: node.op.name.to_string(),
                device: dev_name(dev),
                inputs: node.inputs.iter().map(|&o| tf_input_name(graph, o)).collect(),
                outputs: outputs.iter().map(|&o| tf_input_name(graph, o)).collect(),
                output_types: node.outputs.clone(),
                copy: None,
                fused: members.iter().map(|&m| (graph.nodes()[m].name.clone(), graph.nodes()[m].op.name.to_string())).collect(),
                frame: None,
            });
            let on_gpu = self.devices.devices[dev].attributes().device_type == crate::device::DeviceType::Gpu;
            let on_host = on_gpu && {
                let ins = node.inputs.iter().map(|&o| graph.output_type(o).map(|t| t.dtype)).collect::<Result<Vec<_>>>()?;
                node.op.runs_on_host(ins.into_iter().chain(node.outputs.iter().map(|t| t.dtype)))
            };
            plan.steps.push(Step {
                kind: StepKind::Op(node.clone()),
                device: dev,
                on_host,
                inputs: Vec::new(),
                outputs: plan.num_slots,
                num_outputs: outputs.len(),
                successors: Vec::new(),
                pending: 0,
            });
            plan.num_slots += outputs.len();
        }
        let mut edges: HashSet<(usize, usize)> = HashSet::new();
        let mut copies: HashMap<(Output, usize), usize> = HashMap::new();
        for (s, (node, inputs, _, _)) in units.iter().enumerate() {
            let dev = plan.steps[s].device;
            for inp in inputs {
                let (src_slot, src_dev) =
                    *home.get(inp).ok_or_else(|| OxiflowError::Internal(format!("plan: no producer of {}", tf_input_name(graph, *inp))))?;
                let slot = if src_dev == dev {
                    if let Some(&p) = producer.get(&src_slot) {
                        edges.insert((p, s));
                    }
                    src_slot
                } else {
                    let key = (*inp, dev);
                    let cs = match copies.get(&key) {
                        Some(&cs) => cs,
                        None => {
                            let cs = plan.steps.len();
                            let tensor = tf_input_name(graph, *inp);
                            labels.push(StepLabel {
                                node_name: format!("{tensor}/_Recv"),
                                op: "_Recv".into(),
                                device: dev_name(dev),
                                inputs: vec![tensor.clone()],
                                outputs: vec![tensor.clone()],
                                output_types: vec![graph.output_type(*inp)?.clone()],
                                copy: Some(CopyLabel { from: dev_name(src_dev), to: dev_name(dev), tensor: tensor.clone() }),
                                fused: Vec::new(),
                                frame: None,
                            });
                            plan.steps.push(Step {
                                kind: StepKind::Copy { from: src_dev, tensor },
                                device: dev,
                                on_host: false,
                                inputs: vec![src_slot],
                                outputs: plan.num_slots,
                                num_outputs: 1,
                                successors: Vec::new(),
                                pending: 0,
                            });
                            producer.insert(plan.num_slots, cs);
                            plan.num_slots += 1;
                            if let Some(&p) = producer.get(&src_slot) {
                                edges.insert((p, cs));
                            }
                            copies.insert(key, cs);
                            cs
                        }
                    };
                    edges.insert((cs, s));
                    plan.steps[cs].outputs
                };
                plan.steps[s].inputs.push(slot);
            }
            for c in &node.control_inputs {
                if let Some(&p) = step_of.get(c) {
                    edges.insert((p, s));
                }
            }
        }
        // Collectives run in node order, the same on every rank (crate::collective): each
        // waits for the previous one. Inputs have lower ids than their consumers, so the
        // chain never contradicts the data edges.
        let mut collectives: Vec<(NodeId, usize)> =
            units.iter().enumerate().filter(|(_, u)| crate::collective::is_collective(u.0.op.name)).map(|(s, u)| (u.0.id, s)).collect();
        collectives.sort_unstable();
        for w in collectives.windows(2) {
            edges.insert((w[0].1, w[1].1));
        }
        let mut edges: Vec<_> = edges.into_iter().collect();
        edges.sort_unstable();
        for (a, b) in edges {
            plan.steps[a].successors.push(b);
            plan.steps[b].pending += 1;
        }
        for f in fetches {
            let (slot, dev) = *home.get(f).ok_or_else(|| OxiflowError::Internal(format!("plan: no producer of {}", tf_input_name(graph, *f))))?;
            plan.fetch_slots.push((slot, dev));
        }
        let mut used: Vec<usize> = plan.steps.iter().map(|s| s.device).collect();
        used.sort_unstable();
        used.dedup();
        Ok(CachedPlan { plan, labels: labels.into(), devices_used: used.into_iter().map(dev_name).collect() })
    }

    /// TF2's `Executing op <Op> in device <device>` line for each op step of a run, in the
    /// plan's (topological) order; ops without inputs (constants, placeholders, variables)
    /// are values, not executions, as in TF2's eager mode.
    /// A fused step logs the ops it replaced.
    fn log_executions(&self, plan: &Plan, labels: &[StepLabel]) {
        let mut text = String::new();
        for (step, label) in plan.steps.iter().zip(labels) {
            if let StepKind::Op(node) = &step.kind {
                if !label.fused.is_empty() {
                    for (_, op) in &label.fused {
                        text.push_str(&format!("Executing op {op} in device {}\n", label.device));
                    }
                } else if !node.inputs.is_empty() {
                    text.push_str(&format!("Executing op {} in device {}\n", label.op, label.device));
                }
            }
        }
        self.log.lock().unwrap_or_else(|p| p.into_inner()).push_str(&text);
    }

    fn check_feed(graph: &Graph, o: Output, t: &Tensor) -> Result<()> {
        let tt = graph.output_type(o)?;
        // the tensor's name is only built for the error (a run would pay an allocation)
        if t.dtype() != tt.dtype {
            return Err(OxiflowError::Feed { tensor: graph.tensor_name(o), what: format!("dtype {}", t.dtype()), expected: format!("dtype {}", tt.dtype) });
        }
        if !tt.shape.matches(t.dims()) {
            return Err(OxiflowError::Feed { tensor: graph.tensor_name(o), what: format!("shape {}", t.shape()), expected: format!("shape {}", tt.shape) });
        }
        Ok(())
    }

    /// Runs one step: feeds replace outputs, `fetches` are computed and copied to the host,
    /// `targets` are run for their effects. `trace` records step statistics.
    ///
    /// Errors: a feed of the wrong dtype or shape (`Cannot feed value of shape [3] for
    /// Tensor 'Placeholder:0', which has shape [2]`), an unfed placeholder, an uninitialized
    /// variable, a placement failure, a kernel error. The session stays usable after any.
    pub fn run(&self, feeds: &[(Output, Tensor)], fetches: &[Output], targets: &[NodeId], trace: bool) -> Result<RunOutputs> {
        let mut feeds: Vec<(Output, Tensor)> = feeds.to_vec();
        feeds.sort_by_key(|(o, _)| *o);
        if feeds.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err(OxiflowError::InvalidArgument("the same tensor is fed twice".into()));
        }
        let key: PlanKey = (feeds.iter().map(|(o, _)| *o).collect(), fetches.to_vec(), targets.to_vec());
        let cached = {
            let graph = self.graph.read().map_err(|_| OxiflowError::Internal("graph lock poisoned".into()))?;
            for (o, t) in &feeds {
                Self::check_feed(&graph, *o, t)?;
            }
            let hit = self.plans.lock().unwrap_or_else(|p| p.into_inner()).get(&key).cloned();
            match hit {
                Some(p) => p,
                None => {
                    let p = Arc::new(self.build_plan(&graph, &key.0, fetches, targets)?);
                    self.plans.lock().unwrap_or_else(|p| p.into_inner()).insert(key.clone(), p.clone());
                    p
                }
            }
        };
        let plan = &cached.plan;
        let host = self.devices.devices[0].as_ref();
        let mut feed_values = Vec::with_capacity(feeds.len());
        for (&(_, dev), (_, t)) in plan.feed_slots.iter().zip(feeds) {
            match self.devices.devices[dev].copy_from(&t, host) {
                Ok(v) => feed_values.push(v),
                Err(e) => {
                    // the feeds already copied leave the device's memory again
                    for (&(_, d), v) in plan.feed_slots.iter().zip(&feed_values) {
                        if let Some(m) = self.devices.devices[d].memory() {
                            m.free(std::slice::from_ref(v));
                        }
                    }
                    return Err(e);
                }
            }
        }
        let recording: Vec<usize> =
            if trace { (0..self.devices.devices.len()).filter(|&d| self.devices.devices[d].memory().is_some()).collect() } else { Vec::new() };
        for &d in &recording {
            if let Some(m) = self.devices.devices[d].memory() {
                m.start_recording();
            }
        }
        if trace {
            for d in &self.devices.devices {
                d.start_kernel_timing();
            }
        }
        let wall0 = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
        let exec = if plan.runs_on_caller(self.pool.current_num_threads()) {
            // runs on this thread (executor::execute), as a worker would run it
            let intra = crate::intra_op::resolve(self.options.intra_op_threads);
            crate::intra_op::with_intra_op_threads(intra, || execute(plan, &self.devices, feed_values, &self.variables, &self.pool, trace))
        } else {
            self.pool.install(|| execute(plan, &self.devices, feed_values, &self.variables, &self.pool, trace))
        };
        let samples: Vec<(usize, Vec<(std::time::Instant, u64)>)> =
            recording.iter().map(|&d| (d, self.devices.devices[d].memory().map(|m| m.take_samples()).unwrap_or_default())).collect();
        let exec = exec?;
        if self.options.log_device_placement {
            self.log_executions(plan, &cached.labels);
        }
        let values = exec
            .fetched
            .iter()
            .zip(&plan.fetch_slots)
            .map(|(t, &(_, dev))| host.copy_from(t, self.devices.devices[dev].as_ref()))
            .collect::<Result<Vec<_>>>()?;
        // Tracing shares the plan's labels: no per-step string is built here.
        let kernel_times: HashMap<(&str, String), (u64, u64)> = if trace {
            self.devices
                .devices
                .iter()
                .flat_map(|d| {
                    let name = d.attributes().name.as_str();
                    d.take_kernel_times().into_iter().map(move |k| ((name, k.node), (k.start_ns, k.end_ns)))
                })
                .collect()
        } else {
            HashMap::new()
        };
        let step_stats = exec.timings.map(|mut nodes| {
            for n in &mut nodes {
                n.start_ns += wall0;
                n.end_ns += wall0;
                if !kernel_times.is_empty() {
                    let l = &cached.labels[n.step];
                    if l.copy.is_none() {
                        if let Some(&(s, e)) = kernel_times.get(&(l.device.as_str(), l.node_name.clone())) {
                            (n.start_ns, n.end_ns, n.device_clock) = (s, e, true);
                        }
                    }
                }
            }
            let memory = samples
                .iter()
                .flat_map(|(d, ss)| {
                    let device = self.devices.devices[*d].attributes().name.clone();
                    ss.iter().map(move |&(at, bytes)| MemorySample {
                        device: device.clone(),
                        ts_ns: wall0 + at.saturating_duration_since(exec.start).as_nanos() as u64,
                        bytes_in_use: bytes,
                    })
                })
                .collect();
            let labels = with_inner_steps(&cached.labels, &mut nodes, &exec.inner, wall0);
            StepStats { devices: cached.devices_used.clone(), labels, nodes, memory }
        });
        Ok(RunOutputs { values, step_stats })
    }
}
