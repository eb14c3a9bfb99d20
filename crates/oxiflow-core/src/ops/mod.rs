//! The op registry. Each op is defined once, in its family's file (`math.rs`, `array.rs`,
//! `state.rs`, ...): signature, shape function, CPU kernel, which dtypes have a GPU kernel,
//! and gradient. `docs/adding-an-op.md` is the recipe.

use crate::device::DeviceType;
use crate::dtype::DType;
use crate::error::{OxiflowError, Result};
use crate::graph::{Graph, Node, NodeId, Output, TensorType};
use crate::shape::Shape;
use crate::tensor::{Element, Tensor};
use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::sync::LazyLock;

pub mod activation_grad;
pub mod array;
mod attr;
pub mod bessel;
pub mod blas;
pub mod collective;
pub mod complex;
pub mod conv;
pub mod dtw;
pub mod dynamic_shape;
pub mod emd;
pub mod functional;
pub mod fused;
pub(crate) mod fused_apply;
pub(crate) mod fused_broadcast;
pub(crate) mod grad_util;
pub mod index;
pub mod linalg;
pub mod loss;
pub mod math;
pub mod matmul;
pub mod nn;
pub mod p2p;
pub(crate) mod pow;
pub mod print;
pub mod random;
pub mod reduce;
pub mod scatter;
pub mod shape_ops;
mod softmax;
pub mod sort;
pub mod sparse;
pub mod sparse_solve;
pub mod special;
pub mod state;
pub mod timing;
pub mod training;
pub(crate) mod vmath;
pub(crate) mod zip;

pub(crate) use attr::{attr_default, attrs, inputs};
pub use attr::{AttrDef, AttrDefault, AttrKind, AttrValue, Attrs, AttrsExt, InputDef, InputRole};

/// What a shape function sees: the op, the (tentative) node name, input types, attrs.
pub struct InferCtx<'a> {
    pub op: &'a str,
    pub node: &'a str,
    pub inputs: &'a [TensorType],
    pub attrs: &'a Attrs,
}

impl InferCtx<'_> {
    /// A `ShapeMismatch` error for this node.
    pub fn shape_error(&self, lhs: &Shape, rhs: &Shape, detail: impl Into<String>) -> OxiflowError {
        OxiflowError::ShapeMismatch { op: self.op.to_string(), node: self.node.to_string(), lhs: lhs.clone(), rhs: rhs.clone(), detail: detail.into() }
    }
    /// A `DTypeMismatch` error for this node.
    pub fn dtype_error(&self, expected: DType, got: DType, detail: impl Into<String>) -> OxiflowError {
        OxiflowError::DTypeMismatch { op: self.op.to_string(), node: self.node.to_string(), expected, got, detail: detail.into() }
    }
    /// An `InvalidArgument` error naming this op and node.
    pub fn invalid(&self, msg: impl fmt::Display) -> OxiflowError {
        OxiflowError::InvalidArgument(format!("{} '{}': {msg}", self.op, self.node))
    }
    /// Errors unless the dtype is Float32 or Float64.
    pub fn require_float(&self, d: DType) -> Result<()> {
        if d.is_float() {
            Ok(())
        } else {
            Err(self.invalid(format!("needs a Float32 or Float64 operand, got {d}")))
        }
    }
}

/// Variables as kernels see them: the session's variable store.
pub trait StateAccess: Sync {
    /// Current value of the variable whose `VariableV2` node is `var`; `None` if uninitialized.
    fn read_variable(&self, var: NodeId) -> Option<Tensor>;
    /// Replaces the variable's value.
    fn assign_variable(&self, var: NodeId, value: Tensor) -> Result<()>;
    /// Updates the values of `vars` (distinct, all initialized) in place, as TF's training
    /// ops update a variable's buffer: `f` gets them in that order and changes them through
    /// [`Element::view_mut`](crate::tensor::Element::view_mut), which copies a buffer that a
    /// run still reads first (so a reader keeps the value it read). Returns the new values,
    /// or `None` where this store does not update in place (the default; a variable that is
    /// uninitialized, repeated or kept in accounted device memory), where the caller reads,
    /// computes and assigns instead. Other reads, assignments and updates of `vars` wait
    /// until `f` returns; `f` must not touch variables itself.
    fn update_variables(&self, _vars: &[NodeId], _f: &mut dyn FnMut(&mut [&mut Tensor]) -> Result<()>) -> Option<Result<Vec<Tensor>>> {
        None
    }
    /// The session's cache of objects kernels may reuse across nodes and runs (a sparse
    /// factorization), or `None` where there is no session (the reference evaluator): the
    /// kernel then computes afresh.
    fn resource_cache(&self) -> Option<&crate::variable_store::ResourceCache> {
        None
    }
}

/// What a kernel sees. `inputs` holds the data inputs in order, *excluding* reference
/// inputs (`OpDef::ref_inputs`, e.g. `Assign`'s variable), which the kernel finds as
/// `node.inputs[i].node`.
pub struct KernelCtx<'a> {
    pub node: &'a Node,
    pub inputs: &'a [Tensor],
    pub state: &'a dyn StateAccess,
}

thread_local! {
    /// Outputs (one rank-0 tensor) that the executor has finished with on this thread,
    /// for the next [`KernelCtx::scalar_output`] ([`offer_spare`]).
    static SPARE: Cell<Option<Outputs>> = const { Cell::new(None) };
}

/// Offers outputs that nothing will read any more to the next [`KernelCtx::scalar_output`]
/// on this thread, which writes its value into them instead of allocating. Kept only when
/// they are one rank-0 host tensor (at most one such set per thread; the previous one is
/// dropped); otherwise dropped now. The executor offers the outputs a step handed over to
/// its successor once the successor has run.
pub fn offer_spare(o: Outputs) {
    if let [t @ (Tensor::F32(_) | Tensor::F64(_) | Tensor::I32(_) | Tensor::I64(_) | Tensor::Bool(_))] = &o[..] {
        if t.dims().is_empty() {
            let _ = SPARE.try_with(|s| s.set(Some(o)));
        }
    }
}

impl KernelCtx<'_> {
    /// The outputs of a kernel whose one output is the rank-0 tensor `v`. They reuse the
    /// spare outputs of this thread ([`offer_spare`]) when those hold a rank-0 tensor of
    /// `T` (no allocation: a chain of scalar ops recycles two buffers, much as TF's
    /// executor reuses an input's buffer for an output); otherwise they are
    /// `smallvec![Tensor::scalar(v)]`. The result is the same either way, and a buffer
    /// that another tensor still shares is never written: ndarray's copy-on-write gives
    /// the spare a buffer of its own first.
    #[inline]
    pub fn scalar_output<T: Element>(&self, v: T) -> Outputs {
        if let Some(mut o) = SPARE.try_with(Cell::take).ok().flatten() {
            if let [t] = &mut o[..] {
                if let Some(x) = T::view_mut(t).filter(|a| a.ndim() == 0).and_then(|a| a.first_mut()) {
                    *x = v;
                    return o;
                }
            }
        }
        smallvec![Tensor::scalar(v)]
    }

    /// An `InvalidArgument` error naming this node and op.
    pub fn error(&self, msg: impl fmt::Display) -> OxiflowError {
        OxiflowError::InvalidArgument(format!("{} '{}': {msg}", self.node.op.name, self.node.name))
    }
}

/// `body` with `a` bound to the array of a numeric host tensor `t` (`Float32`, `Float64`,
/// `Int32`, `Int64`; `body` is typically a call of a generic function, instantiated for each
/// type); a `Bool` tensor makes the kernel return "no kernel for dtype Bool", a
/// device-resident one is passed to [`crate::tensor::device_resident`]. Use inside a kernel
/// returning `Result`.
macro_rules! for_numeric {
    ($ctx:expr, $t:expr, |$a:ident| $body:expr) => {
        match $t {
            Tensor::F32($a) => $body,
            Tensor::F64($a) => $body,
            Tensor::I32($a) => $body,
            Tensor::I64($a) => $body,
            Tensor::Bool(_) => return Err($ctx.error("no kernel for dtype Bool")),
            Tensor::C64(_) => return Err($ctx.error("no kernel for dtype ComplexF32")),
            Tensor::C128(_) => return Err($ctx.error("no kernel for dtype ComplexF64")),
            Tensor::Device(d) => crate::tensor::device_resident(d),
        }
    };
}
pub(crate) use for_numeric;

/// Shape function: output types from input types and attrs.
pub type InferFn = fn(&InferCtx) -> Result<Vec<TensorType>>;
/// A kernel's outputs, one tensor per node output, in order. One output (most ops) is
/// stored inline, so a kernel's result costs no allocation beyond its tensors' own; ops
/// with more outputs spill to the heap. Build it with `smallvec![t0, t1, ..]`
/// (re-exported here) or `Outputs::from_vec(v)`.
pub type Outputs = smallvec::SmallVec<[Tensor; 1]>;
pub use smallvec::smallvec;

/// CPU kernel (also what emulated GPUs run).
pub type KernelFn = fn(&KernelCtx) -> Result<Outputs>;
/// A CPU kernel given its inputs to keep: it may take input 0 out of the slice and write
/// its output into that buffer when nothing else holds it (TF's `forward_input`).
pub type OwnedKernelFn = fn(&Node, &mut [Tensor], &dyn StateAccess) -> Result<Outputs>;

/// The [`OwnedKernelFn`] of `op`, for a caller that owns the inputs and reads input 0 for
/// the last time ([`crate::function::Function`]); `None` for ops that only have a
/// [`KernelFn`]. Today: the `TensorScatter*` ops (a `TensorArray` write).
pub fn owned_kernel(op: &OpDef) -> Option<OwnedKernelFn> {
    scatter::owned_kernel(op)
}
/// Gradient function (TF's `@ops.RegisterGradient`): given the forward node and the
/// gradients of its outputs (`None` where no gradient flows), adds gradient nodes to the
/// graph and returns one gradient per input (`None`: no gradient).
pub type GradFn = fn(&mut Graph, &Node, &[Option<Output>]) -> Result<Vec<Option<Output>>>;

/// How gradients pass through an op.
#[derive(Copy, Clone, Debug)]
pub enum Gradient {
    /// No gradient function: a gradient asked through the op on a float path is an error
    /// (TF's `LookupError: No gradient defined for operation '...' (op type: ...)`).
    Undefined,
    /// No gradient flows, by design, and asking for one is not an error: TF's
    /// `ops.NotDifferentiable` registrations (comparisons, `ArgMax`, `OnesLike`, random
    /// ops, `StopGradient`, `Assign`, `Const`, `Placeholder`, ...) and `Floor`, whose
    /// registered `_FloorGrad` returns `None`.
    NotDifferentiable,
    /// TF's `@ops.RegisterGradient` function.
    Fn(GradFn),
}

impl From<Option<GradFn>> for Gradient {
    /// `Some(f)`: [`Gradient::Fn`]; `None`: [`Gradient::Undefined`].
    fn from(f: Option<GradFn>) -> Self {
        f.map_or(Gradient::Undefined, Gradient::Fn)
    }
}

/// Number of inputs an op takes.
#[derive(Copy, Clone, Debug)]
pub enum Arity {
    Fixed(usize),
    AtLeast(usize),
}

/// Which dtypes have a GPU kernel.
#[derive(Copy, Clone, Debug)]
pub enum GpuSupport {
    /// CPU only (the placer keeps the op off GPUs).
    None,
    /// A GPU kernel when every input and output dtype is in the list.
    Types(&'static [DType]),
    /// A GPU kernel for every dtype (ops that move no data or only hold it).
    Any,
}

/// How `oxiflow-cuda` runs an op's GPU kernel: the family of launcher that turns a node
/// into kernel launches. TF registers one GPU kernel class per op; here the op names its
/// family and the CUDA crate maps each family to one launcher (`oxiflow_cuda::launch::launcher`),
/// so an op of a shared family (a new unary function, a new broadcasting binary op) needs
/// no Rust code outside its `OpDef`, only its `.cu` entries. The families' kernel
/// signatures are in `kernels/README.md`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GpuLaunch {
    /// No GPU kernel ([`GpuSupport::None`]).
    None,
    /// Run by the device itself, no launch: ops that move no data (`Identity`, `Reshape`,
    /// `Squeeze`, `ExpandDims`, `StopGradient`: the buffer with a new shape) or hold session
    /// state (`Const`, `Placeholder`, `VariableV2`, `Assign`, `NoOp`).
    DeviceHandled,
    /// `{op}_{dtype}(x, y, n)` in `kernels/elementwise.cu`: `y[i] = f(x[i])`.
    Unary,
    /// `{op}_{dtype}(a, b, out, BcastMeta)` in `kernels/binary.cu`, named by the operands'
    /// dtype: broadcasting arithmetic and comparisons (whose `Bool` is the result's dtype).
    Binary,
    /// `{op}_{dtype}(x, y, RedMeta)` in `kernels/reduce.cu`: `Sum`, `Mean`, `Max`, ... over
    /// the `axis` attr.
    Reduce,
    /// `{op}_{dtype}(x, y, RedMeta)` in `kernels/reduce.cu` with an index result (`ArgMax`).
    ArgReduce,
    /// A training update in `kernels/training.cu`, in place on the variable and its slots:
    /// `{op}_{dtype}(inputs..., n, flags...)` from the op's declared inputs
    /// ([`OpDef::inputs`]) and bool attributes.
    Training,
    /// `{op}_{dtype}(y, n, seed, stream)` in `kernels/random.cu`.
    Random,
    /// A cuBLAS call (`MatMul`, `BatchMatMulV2`): one launcher per op, no entry of its own.
    CuBlas,
    /// Data movement in `kernels/shape.cu` and `kernels/index.cu`: one planner per op.
    Movement,
    /// A launcher of the op's own (`Cast`, `AddN`, `SelectV2`, `Softmax`, ...): the default
    /// of [`math::def`] for an op with a GPU kernel.
    Own,
    /// A collective across ranks (`MpiAllreduce`, ...): the device moves the data with its
    /// collective library (NCCL), after [`collective::negotiate`], or runs the CPU kernel.
    Collective,
    /// No device kernel: on a GPU the executor runs the op's CPU kernel on the host, its
    /// inputs and outputs in host memory (TF's GPU kernels whose arguments are all
    /// `HostMemory`). Functional control flow (`If`, `While`) is launched so: the loop or
    /// branch runs on the host thread, and each op its functions run goes to the GPU when
    /// it has a GPU kernel for its dtypes, else to the host ([`crate::function`]).
    Host,
}

/// One op: TF's `OpDef` + kernel registrations + gradient registration.
pub struct OpDef {
    /// TF op type (`MatMul`).
    pub name: &'static str,
    /// Node name used when none is given (TF Python's: `Sin`, `add`, `mul`, `MatMul`).
    pub default_name: &'static str,
    pub arity: Arity,
    /// Inputs that take a variable reference rather than a value (`Assign`: `[0]`).
    pub ref_inputs: &'static [usize],
    pub infer: InferFn,
    pub kernel: KernelFn,
    pub gpu: GpuSupport,
    /// The inputs by name and role, in order (TF's `OpDef.input_arg`); empty where the op
    /// does not name them (its inputs are then only positional).
    pub inputs: &'static [InputDef],
    /// The attributes a node of this op may carry, by name and type (TF's `OpDef.attr`);
    /// any other is refused when the node is built ([`OpDef::check_attrs`]).
    pub attrs: &'static [AttrDef],
    /// How the CUDA crate launches the GPU kernel ([`GpuLaunch::None`] exactly when `gpu`
    /// is [`GpuSupport::None`]).
    pub launch: GpuLaunch,
    /// The gradient function, or why there is none.
    pub grad: Gradient,
    /// Reads or writes session state (variables, feeds); never folded or deduplicated.
    pub stateful: bool,
    /// The kernel hands on a stored tensor or a reference, whatever its size (`Const`,
    /// `VariableV2`, `Identity`, `NoOp`, `Placeholder`): TF's `OpKernel::IsExpensive() ==
    /// false`. A plan in which at most one step is not inexpensive runs on the caller's
    /// thread ([`crate::executor::Plan::runs_inline`]).
    pub inexpensive: bool,
    /// Dtypes for which a GPU runs the op's CPU kernel on the host, its inputs and outputs
    /// in host memory (TF's int32 GPU kernels, registered with every argument in
    /// `HostMemory`): a node whose dtypes are all GPU-kernel (`gpu`) or host-memory ones
    /// may be placed on a GPU, and runs on the host there unless they are all `gpu` ones.
    pub host_memory: &'static [DType],
}

impl OpDef {
    /// The same op marked [`Gradient::NotDifferentiable`] (TF's `ops.NotDifferentiable`).
    pub const fn not_differentiable(self) -> Self {
        OpDef { grad: Gradient::NotDifferentiable, ..self }
    }

    /// The same op taking the attributes `attrs` (see [`OpDef::attrs`]).
    pub const fn with_attrs(self, attrs: &'static [AttrDef]) -> Self {
        OpDef { attrs, ..self }
    }

    /// The same op with the named inputs `inputs` (see [`OpDef::inputs`]).
    pub const fn with_inputs(self, inputs: &'static [InputDef]) -> Self {
        OpDef { inputs, ..self }
    }

    /// The position of the input named `name` among the node's inputs.
    pub fn input_index(&self, name: &str) -> Option<usize> {
        self.inputs.iter().position(|i| i.name == name)
    }

    /// The position of the input named `name` among the data inputs a kernel gets
    /// (`KernelCtx::inputs`: reference inputs left out); an error naming the op when it
    /// has no such data input.
    pub fn data_index(&self, name: &str) -> Result<usize> {
        match self.input_index(name) {
            Some(i) if !self.ref_inputs.contains(&i) => Ok(i - self.ref_inputs.iter().filter(|&&r| r < i).count()),
            _ => Err(OxiflowError::Internal(format!("{} has no data input named '{name}'", self.name))),
        }
    }

    /// Bool attribute `name` of a node's `attrs`, or its declared default (`false` when the
    /// declaration has none); InvalidArgument naming the op when it is not a bool.
    pub fn bool_attr(&self, attrs: &Attrs, name: &str) -> Result<bool> {
        let default = match self.attr_def(name).and_then(|a| a.default) {
            Some(AttrDefault::Bool(b)) => b,
            None => false,
        };
        attrs.get_bool_or(self.name, name, default)
    }

    /// The declared attribute `name`, if the op has one.
    pub fn attr_def(&self, name: &str) -> Option<&'static AttrDef> {
        self.attrs.iter().find(|a| a.name == name)
    }

    /// Errors (InvalidArgument) when node `node` carries an attribute the op does not
    /// declare (TF's `NodeDef mentions attr '...' not in Op<...>`, with the op's attributes
    /// and their types: a misspelt attribute is refused instead of silently ignored) or a
    /// value its type does not accept ([`AttrKind::accepts`], as TF's `ValidateNodeDef`:
    /// `attr 'keep_dims' must be a bool, got 1`), naming the op, node and attribute.
    pub fn check_attrs(&self, node: &str, attrs: &Attrs) -> Result<()> {
        for (k, v) in attrs {
            if let Some(a) = self.attr_def(k) {
                if !a.kind.accepts(v) {
                    return Err(OxiflowError::InvalidArgument(format!("{} '{node}': attr '{k}' must be a {}, got {v}", self.name, a.kind.tf_name())));
                }
            } else {
                let declared: Vec<String> = self.attrs.iter().map(|a| format!("{}:{}", a.name, a.kind.tf_name())).collect();
                let declared = if declared.is_empty() { "none".to_string() } else { declared.join(", ") };
                return Err(OxiflowError::InvalidArgument(format!(
                    "NodeDef mentions attr '{k}' not in Op<name={}; attr={declared}>; NodeDef: {node}",
                    self.name
                )));
            }
        }
        Ok(())
    }

    /// The same op launched on GPUs as `launch` (see [`GpuLaunch`]).
    pub const fn launched_as(self, launch: GpuLaunch) -> Self {
        OpDef { launch, ..self }
    }

    /// Errors (naming op and node) when `n` inputs do not fit the op's arity.
    pub fn check_arity(&self, node: &str, n: usize) -> Result<()> {
        let ok = match self.arity {
            Arity::Fixed(k) => n == k,
            Arity::AtLeast(k) => n >= k,
        };
        if ok {
            Ok(())
        } else {
            let want = match self.arity {
                Arity::Fixed(k) => format!("{k}"),
                Arity::AtLeast(k) => format!("at least {k}"),
            };
            Err(OxiflowError::InvalidArgument(format!("{} '{node}' takes {want} inputs, got {n}", self.name)))
        }
    }

    /// Whether a kernel exists for `device_type` given the node's input and output dtypes:
    /// a device kernel or, on a GPU, one run on the host ([`OpDef::host_memory`],
    /// [`GpuLaunch::Host`]). CPU has every kernel.
    pub fn has_kernel(&self, device_type: DeviceType, input_dtypes: &[DType], output_dtypes: &[DType]) -> bool {
        match device_type {
            DeviceType::Cpu => true,
            // complex tensors have no GPU kernels, not even the data movers'
            DeviceType::Gpu if input_dtypes.iter().chain(output_dtypes).any(|d| d.is_complex()) => false,
            DeviceType::Gpu => match self.gpu {
                GpuSupport::None => false,
                GpuSupport::Any => true,
                GpuSupport::Types(ts) => input_dtypes.iter().chain(output_dtypes).all(|d| ts.contains(d) || self.host_memory.contains(d)),
            },
        }
    }

    /// Whether a GPU runs a node of this op whose inputs and outputs have `dtypes` on the
    /// host rather than launching a device kernel: ops launched as [`GpuLaunch::Host`], and
    /// the [`OpDef::host_memory`] dtypes of the others.
    pub fn runs_on_host(&self, dtypes: impl IntoIterator<Item = DType>) -> bool {
        match self.launch {
            GpuLaunch::Host => true,
            _ if self.host_memory.is_empty() => false,
            _ => match self.gpu {
                GpuSupport::Types(ts) => !dtypes.into_iter().all(|d| ts.contains(&d)),
                _ => false,
            },
        }
    }

    /// The same op run on the host for `dtypes` on GPUs (see [`OpDef::host_memory`]).
    pub const fn host_memory_for(self, dtypes: &'static [DType]) -> Self {
        OpDef { host_memory: dtypes, ..self }
    }
}

/// Registry under construction; each family adds its ops.
pub struct Registry(HashMap<&'static str, OpDef>);

impl Registry {
    /// Adds an op; panics on a duplicate name (a programming error caught by every test run).
    pub fn add(&mut self, op: OpDef) {
        let name = op.name;
        assert_eq!(matches!(op.gpu, GpuSupport::None), op.launch == GpuLaunch::None, "op {name}: a GPU kernel flag needs a launch family and none without");
        if !op.inputs.is_empty() {
            assert!(matches!(op.arity, Arity::Fixed(n) if n == op.inputs.len()), "op {name}: {} named inputs for arity {:?}", op.inputs.len(), op.arity);
        }
        assert!(self.0.insert(name, op).is_none(), "op {name} registered twice");
    }
}

static REGISTRY: LazyLock<HashMap<&'static str, OpDef>> = LazyLock::new(|| {
    let mut r = Registry(HashMap::new());
    state::register(&mut r);
    math::register(&mut r);
    complex::register(&mut r);
    matmul::register(&mut r);
    array::register(&mut r);
    shape_ops::register(&mut r);
    index::register(&mut r);
    scatter::register(&mut r);
    sparse::register(&mut r);
    sparse_solve::register(&mut r);
    collective::register(&mut r);
    p2p::register(&mut r);
    print::register(&mut r);
    timing::register(&mut r);
    functional::register(&mut r);
    nn::register(&mut r);
    conv::register(&mut r);
    sort::register(&mut r);
    dtw::register(&mut r);
    emd::register(&mut r);
    special::register(&mut r);
    bessel::register(&mut r);
    activation_grad::register(&mut r);
    reduce::register(&mut r);
    linalg::register(&mut r);
    loss::register(&mut r);
    random::register(&mut r);
    training::register(&mut r);
    dynamic_shape::register(&mut r);
    #[cfg(test)]
    crate::intra_op::register_probe(&mut r);
    r.0
});

/// The op named `name`; `NotFound` (TF's text: `Op type not registered`) otherwise.
pub fn lookup(name: &str) -> Result<&'static OpDef> {
    REGISTRY.get(name).ok_or_else(|| OxiflowError::NotFound(format!("Op type not registered '{name}' in binary running Oxiflow")))
}

/// Names of all registered ops, sorted.
pub fn registered() -> Vec<&'static str> {
    let mut v: Vec<_> = REGISTRY.keys().copied().collect();
    v.sort_unstable();
    v
}

/// Float dtypes: the usual GPU kernel set of math ops.
pub const GPU_FLOATS: GpuSupport = GpuSupport::Types(&[DType::Float32, DType::Float64]);

/// GPU kernels of comparisons (float operands, Bool result) and `SelectV2` (Bool or float
/// values): TF registers float GPU kernels for them.
pub const GPU_FLOATS_BOOL: GpuSupport = GpuSupport::Types(&[DType::Float32, DType::Float64, DType::Bool]);

/// Floats and `Int64`: the arithmetic TF registers an int64 GPU kernel for (`Add`, `Sub`,
/// `Mul`, `Maximum`, `Minimum`; index arithmetic such as ADCME's `argmax(x) + 1` stays on
/// the GPU). `Int32` is absent: TF's int32 GPU kernels compute in host memory.
pub const GPU_FLOATS_INT64: GpuSupport = GpuSupport::Types(&[DType::Float32, DType::Float64, DType::Int64]);

/// The comparisons' GPU kernels: float or `Int64` operands, `Bool` result (TF's int64 GPU
/// kernels of `Equal`, `Less`, ...).
pub const GPU_COMPARE: GpuSupport = GpuSupport::Types(&[DType::Float32, DType::Float64, DType::Int64, DType::Bool]);

/// [`OpDef::host_memory`] of TF's int32 GPU kernels (arithmetic, comparisons, `ZerosLike`),
/// which compute on the host with every argument in `HostMemory`.
pub const HOST_INT32: &[DType] = &[DType::Int32];

/// Shape function of unary elementwise float ops: output = input.
pub fn infer_unary_float(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    ctx.require_float(ctx.inputs[0].dtype)?;
    Ok(vec![ctx.inputs[0].clone()])
}

/// Row-major `values` of shape `dims` as a tensor of `like`'s float dtype (Float32 when
/// `like` is Float32, else Float64): the outputs of kernels that compute in f64.
pub(crate) fn float_like(like: &Tensor, dims: &[usize], values: Vec<f64>) -> Result<Tensor> {
    match like {
        Tensor::F32(_) => Tensor::from_vec(dims, values.into_iter().map(|x| x as f32).collect(), crate::tensor::Layout::RowMajor),
        _ => Tensor::from_vec(dims, values, crate::tensor::Layout::RowMajor),
    }
}

/// Shape function of unary ops of any dtype: output = input.
pub fn infer_same(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    Ok(vec![ctx.inputs[0].clone()])
}

/// Shape function of broadcasting binary ops: equal dtypes, NumPy-broadcast shapes.
pub fn infer_binary_broadcast(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let (a, b) = (&ctx.inputs[0], &ctx.inputs[1]);
    if a.dtype != b.dtype {
        return Err(ctx.dtype_error(a.dtype, b.dtype, " (both operands must have the same dtype)"));
    }
    let shape = Shape::broadcast(&a.shape, &b.shape).ok_or_else(|| ctx.shape_error(&a.shape, &b.shape, " (not broadcastable)"))?;
    Ok(vec![TensorType::new(a.dtype, shape)])
}

/// Shape function of ops with no outputs (`NoOp`).
pub fn infer_none(_: &InferCtx) -> Result<Vec<TensorType>> {
    Ok(vec![])
}

impl fmt::Debug for OpDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpDef({})", self.name)
    }
}
