//! Collective ops across MPI ranks, on the process's [`Communicator`]
//! ([`crate::collective`]): ADCME's `mpi_sum` and `mpi_bcast` and Horovod's allreduce.
//!
//! - `MpiAllreduce(x)`, attr `reduction` (`"sum"`, default, `"mean"`, `"max"`, `"min"`):
//!   every rank gets the element-wise reduction of all ranks' `x` (Horovod's
//!   `hvd.allreduce`; `"mean"` is the sum over the number of ranks, floats only).
//!   Gradient: the all-reduced sum of the output gradients (`"mean"`: their mean); for
//!   `"max"`/`"min"`, that sum masked to the ranks whose `x` equals the result.
//! - `MpiGroupedAllreduce(x_1, ..., x_n)`, attr `reduction` (`"sum"` or `"mean"`): `n`
//!   all-reduces in one call (Horovod's tensor fusion, `hvd.grouped_allreduce`): the
//!   inputs, of one dtype and any shapes, are packed into one fusion buffer, reduced by one
//!   `MPI_Allreduce`, and output `i` is a view of its part of the result. Gradient: the
//!   grouped all-reduce of the output gradients (zeros where none arrived).
//! - `MpiSum(x)`, attr `root` (default 0): ADCME's `mpi_sum`, `MPI_Reduce` with `MPI_SUM`:
//!   rank `root` gets the sum of all ranks' `x`, the others zeros. Gradient: `MpiBcast` of
//!   the output gradient from `root` (ADCME's adjoint).
//! - `MpiBcast(x)`, attr `root`: ADCME's `mpi_bcast`: every rank gets `root`'s `x`.
//!   Gradient: `MpiSum` of the output gradients to `root` (the other ranks' `x` do not
//!   affect the output: zero gradient).
//!
//! Dtypes Float32, Float64, Int32, Int64; any shape (the data travel in row-major order).
//! The kernels here move host tensors over the [`Communicator`] (MPI). The four ops are
//! also GPU ops ([`GpuLaunch::Collective`]): a GPU device runs them with its own collective
//! library where it has one (NCCL on a CUDA GPU, after [`negotiate`]; Horovod's GPU path),
//! else with these kernels on host copies; an emulated GPU runs these kernels. The ops are
//! stateful: never folded or merged, as each is a message exchange. Before its data, each
//! collective checks that all ranks run the same one ([`Communicator::agree`]: op, node
//! name, dtype, element count, attrs), so ranks running different collectives get an
//! error instead of mixing their data. Errors: MPI not initialized (FailedPrecondition),
//! `root` not a rank (InvalidArgument naming the node), a peer that does not join in time
//! (DeadlineExceeded, from the communicator).

use super::math::def;
use super::*;
use crate::collective::{communicator, Communicator, HostBuf, HostSlice, ReduceOp};
use crate::graph::NodeSpec;
use crate::tensor::Layout;
use ndarray::IxDyn;
use std::borrow::Cow;

const DTYPES: [DType; 4] = [DType::Float32, DType::Float64, DType::Int32, DType::Int64];

fn infer_collective(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let x = &ctx.inputs[0];
    if !DTYPES.contains(&x.dtype) {
        return Err(ctx.invalid(format!("collectives carry Float32, Float64, Int32 or Int64, got {}", x.dtype)));
    }
    if let Some(AttrValue::Int(r)) = ctx.attrs.get("root") {
        if *r < 0 {
            return Err(ctx.invalid(format!("root must be a rank (0 or more), got {r}")));
        }
    }
    if ctx.op == "MpiAllreduce" {
        let red = reduction(ctx.attrs, ctx.op)?;
        if red == "mean" && !x.dtype.is_float() {
            return Err(ctx.invalid(format!("reduction \"mean\" needs a float tensor, got {}", x.dtype)));
        }
    }
    Ok(vec![x.clone()])
}

/// `MpiAllreduce`'s `reduction` attr (default `"sum"`); InvalidArgument for another.
fn reduction<'a>(attrs: &'a Attrs, op: &str) -> Result<&'a str> {
    match attrs.get("reduction") {
        None => Ok("sum"),
        Some(AttrValue::Str(s)) if ["sum", "mean", "max", "min"].contains(&s.as_str()) => Ok(s.as_str()),
        Some(v) => Err(OxiflowError::InvalidArgument(format!("{op}: reduction must be \"sum\", \"mean\", \"max\" or \"min\", got {v}"))),
    }
}

/// The transport's reduction for a `reduction` attr value (`"mean"` is a sum, divided after).
fn reduce_op(reduction: &str) -> ReduceOp {
    match reduction {
        "max" => ReduceOp::Max,
        "min" => ReduceOp::Min,
        _ => ReduceOp::Sum,
    }
}

/// The `root` attr (default 0), checked against the communicator's size.
fn root(ctx: &KernelCtx, comm: &dyn Communicator) -> Result<usize> {
    let r = super::shape_ops::int_or(&ctx.node.attrs, ctx.node.op.name, "root", 0)?;
    match usize::try_from(r) {
        Ok(r) if r < comm.size() => Ok(r),
        _ => Err(ctx.error(format!("root {r} is not a rank of this job (ranks 0 to {})", comm.size() - 1))),
    }
}

/// The first phase of every collective in a profile: `<node>/negotiate`, type
/// `MpiNegotiate`, the agreement check, whose length is the time this rank waited for the
/// others to reach the collective (Horovod's timeline calls it `NEGOTIATE_ALLREDUCE`).
const NEGOTIATE: (&str, &str) = ("negotiate", "MpiNegotiate");
/// Bytes the agreement check all-reduces (two `i64`s).
const AGREE_BYTES: usize = 16;

/// Runs `f`, one phase of a collective, and in a traced run records it as the inner step
/// `<node>/<name>` of type `op` (the second phase: `<node>/transfer`, typed by the MPI call
/// that moves the data, `MPI_Allreduce`, `MPI_Reduce`, `MPI_Bcast`) with the `bytes` it moves.
fn phase<T>((name, op): (&str, &str), bytes: usize, f: impl FnOnce() -> Result<T>) -> Result<T> {
    if !crate::function::recording() {
        return f();
    }
    let t0 = std::time::Instant::now();
    let r = f();
    crate::function::record_phase(name, op, t0, std::time::Instant::now(), bytes);
    r
}

/// FNV-1a of `s`: the key ranks compare before a collective.
pub(super) fn key_of(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

/// The elements of `a` in row-major order: its own memory when it is laid out so (no copy),
/// else a dense copy.
fn row_major<T: Copy>(a: &ndarray::ArcArray<T, ndarray::IxDyn>) -> Cow<'_, [T]> {
    match a.as_slice() {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(crate::strided::standard_copy(&a.view()).into_iter().collect()),
    }
}

/// Checks that every rank runs this node's collective now ([`Communicator::agree`] on a hash
/// of op, node name, every input's dtype and dims, and attrs), recorded as the `negotiate`
/// phase in a traced run. Every collective and point-to-point op calls it before its data.
pub(super) fn agree_on_node(ctx: &KernelCtx, comm: &dyn Communicator, what: &str) -> Result<()> {
    agree_via(ctx, comm, what, "")
}

/// [`agree_on_node`] with the transport that moves the data in the key (empty: the host's
/// MPI path, whose key is the plain one), so ranks that would move it different ways fail
/// the check instead of waiting for each other.
fn agree_via(ctx: &KernelCtx, comm: &dyn Communicator, what: &str, transport: &str) -> Result<()> {
    let inputs: Vec<String> = ctx.inputs.iter().map(|t| format!("{} {:?}", t.dtype(), t.dims())).collect();
    let attrs: Vec<String> = ctx.node.attrs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut key = format!("{what} {} {}", inputs.join(" "), attrs.join(","));
    if !transport.is_empty() {
        key = format!("{key} via {transport}");
    }
    phase(NEGOTIATE, AGREE_BYTES, || comm.agree(what, key_of(&key)))
}

/// What a collective node does, for a device that moves its data itself.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Collective {
    /// `MpiAllreduce`: every rank gets the element-wise `op` of all ranks' input; `mean`
    /// (floats only): the sum divided by the number of ranks.
    Allreduce { op: ReduceOp, mean: bool },
    /// `MpiGroupedAllreduce`: every input all-reduced with a sum (`mean`: divided by the
    /// number of ranks) into the output of the same index.
    GroupedAllreduce { mean: bool },
    /// `MpiSum`: rank `root` gets the sum, the other ranks zeros (`MPI_Reduce`).
    Reduce { root: usize },
    /// `MpiBcast`: every rank gets `root`'s input (`MPI_Bcast`).
    Broadcast { root: usize },
}

/// A collective node ready to move its data on a device: `what` (`"MpiAllreduce 'x'"`, for
/// errors and profiles), the process's communicator and what the node does.
pub struct Negotiated {
    /// `"<Op> '<node>'"`.
    pub what: String,
    /// The process's communicator (rank, size, timeout; it carries NCCL's unique id).
    pub comm: std::sync::Arc<dyn Communicator>,
    /// What the node does.
    pub collective: Collective,
}

/// The first half of a collective node for a device that moves the data itself (NCCL on a
/// CUDA GPU): reads the node's `reduction` or `root`, then checks that every rank runs this
/// collective now over the same `transport` (the CPU kernel's agreement key plus
/// `transport`, e.g. `"nccl"`, recorded as the `negotiate` phase). The device then moves the
/// data and must leave the outputs as the CPU kernels here would. Errors: those of the CPU
/// kernels (MPI not initialized: FailedPrecondition; `root` not a rank: InvalidArgument
/// naming the node; a peer that does not join in time: DeadlineExceeded), and
/// FailedPrecondition naming the node when another rank runs another collective or moves
/// this one another way; InvalidArgument for an op that is not one of the four.
pub fn negotiate(ctx: &KernelCtx, transport: &str) -> Result<Negotiated> {
    let what = format!("{} '{}'", ctx.node.op.name, ctx.node.name);
    let comm = communicator(&what)?;
    let attrs = &ctx.node.attrs;
    let collective = match ctx.node.op.name {
        "MpiAllreduce" => {
            let red = reduction(attrs, ctx.node.op.name)?;
            Collective::Allreduce { op: reduce_op(red), mean: red == "mean" }
        }
        "MpiGroupedAllreduce" => Collective::GroupedAllreduce { mean: reduction(attrs, ctx.node.op.name)? == "mean" },
        "MpiSum" => Collective::Reduce { root: root(ctx, comm.as_ref())? },
        "MpiBcast" => Collective::Broadcast { root: root(ctx, comm.as_ref())? },
        op => return Err(ctx.error(format!("{op} is not a collective a device can run"))),
    };
    agree_via(ctx, comm.as_ref(), &what, transport)?;
    Ok(Negotiated { what, comm, collective })
}

/// `"<Op> '<node>'"` and the communicator, after [`agree_on_node`].
fn agreed(ctx: &KernelCtx) -> Result<(String, std::sync::Arc<dyn Communicator>)> {
    let what = format!("{} '{}'", ctx.node.op.name, ctx.node.name);
    let comm = communicator(&what)?;
    agree_on_node(ctx, comm.as_ref(), &what)?;
    Ok((what, comm))
}

/// Runs `f` on a row-major host copy of input 0, after checking that every rank runs this
/// collective, and returns the buffer as the output (same dtype and shape).
fn collective(ctx: &KernelCtx, f: impl FnOnce(&dyn Communicator, &str, HostBuf) -> Result<()>) -> Result<Outputs> {
    let (what, comm) = agreed(ctx)?;
    let x = &ctx.inputs[0];
    let dims = x.dims().to_vec();
    macro_rules! go {
        ($a:expr, $v:ident) => {{
            let mut v = row_major($a).into_owned();
            let call = if ctx.node.op.name == "MpiSum" { "MPI_Reduce" } else { "MPI_Bcast" };
            phase(("transfer", call), std::mem::size_of_val(&v[..]), || f(comm.as_ref(), &what, HostBuf::$v(&mut v)))?;
            Tensor::from_vec(&dims, v, Layout::RowMajor)?
        }};
    }
    let out = match x {
        Tensor::F32(a) => go!(a, F32),
        Tensor::F64(a) => go!(a, F64),
        Tensor::I32(a) => go!(a, I32),
        Tensor::I64(a) => go!(a, I64),
        t => return Err(ctx.error(format!("no kernel for dtype {}", t.dtype()))),
    };
    Ok(smallvec![out])
}

/// An element type collectives carry, with its [`HostSlice`] and [`HostBuf`] variants.
trait Carried: crate::tensor::Element + Copy {
    fn slice(s: &[Self]) -> HostSlice<'_>;
    fn buf(s: &mut [Self]) -> HostBuf<'_>;
    /// Divides every element by `n` (the `"mean"` reduction; integers never get here:
    /// inference refuses `"mean"` on them).
    fn divide(s: &mut [Self], n: f64);
}

macro_rules! carried {
    ($($t:ty => $v:ident, $div:expr);*) => {$(
        impl Carried for $t {
            fn slice(s: &[Self]) -> HostSlice<'_> {
                HostSlice::$v(s)
            }
            fn buf(s: &mut [Self]) -> HostBuf<'_> {
                HostBuf::$v(s)
            }
            fn divide(s: &mut [Self], n: f64) {
                let div: fn(Self, f64) -> Self = $div;
                s.iter_mut().for_each(|x| *x = div(*x, n));
            }
        }
    )*};
}
carried!(
    f32 => F32, |x, n| (x as f64 / n) as f32;
    f64 => F64, |x, n| x / n;
    i32 => I32, |x, _| x;
    i64 => I64, |x, _| x
);

/// All-reduces `a` from its own memory into a new output buffer (no other copy; TF's
/// collective kernels likewise reduce from the input into the output). When the transport
/// fails (a timeout, after which MPI may still use both buffers) the two are leaked, as
/// [`Communicator::allreduce_into`] requires.
fn allreduce_tensor<T: Carried>(
    ctx: &KernelCtx,
    comm: &dyn Communicator,
    what: &str,
    a: &ndarray::ArcArray<T, ndarray::IxDyn>,
    op: ReduceOp,
    mean: Option<f64>,
) -> Result<Tensor> {
    let send = row_major(a);
    let n = send.len();
    let mut out: Vec<T> = crate::strided::try_buffer_for(n).ok_or_else(|| ctx.error(format!("cannot allocate {n} elements for the result on the host")))?;
    // SAFETY: every element is written by the all-reduce before the vector is read, and the
    // element types (f32, f64, i32, i64) have no invalid bit patterns.
    unsafe { out.set_len(n) };
    // SAFETY: on error both buffers are leaked below, never freed or reused.
    let r =
        phase(("transfer", "MPI_Allreduce"), std::mem::size_of_val(&send[..]), || unsafe { comm.allreduce_into(what, T::slice(&send), T::buf(&mut out), op) });
    if let Err(e) = r {
        std::mem::forget(out);
        match send {
            Cow::Owned(v) => std::mem::forget(v),
            Cow::Borrowed(_) => std::mem::forget(a.clone()),
        }
        return Err(e);
    }
    if let Some(n) = mean {
        T::divide(&mut out, n);
    }
    Tensor::from_vec(a.shape(), out, Layout::RowMajor)
}

fn kernel_allreduce(ctx: &KernelCtx) -> Result<Outputs> {
    let red = reduction(&ctx.node.attrs, ctx.node.op.name)?;
    let op = reduce_op(red);
    let (what, comm) = agreed(ctx)?;
    let mean = (red == "mean").then_some(comm.size() as f64);
    let (c, w) = (comm.as_ref(), what.as_str());
    let out = match &ctx.inputs[0] {
        Tensor::F32(a) => allreduce_tensor(ctx, c, w, a, op, mean)?,
        Tensor::F64(a) => allreduce_tensor(ctx, c, w, a, op, mean)?,
        Tensor::I32(a) => allreduce_tensor(ctx, c, w, a, op, None)?,
        Tensor::I64(a) => allreduce_tensor(ctx, c, w, a, op, None)?,
        t => return Err(ctx.error(format!("no kernel for dtype {}", t.dtype()))),
    };
    Ok(smallvec![out])
}

// ---------------------------------------------------------------- MpiGroupedAllreduce

fn infer_grouped(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let dtype = ctx.inputs[0].dtype;
    if !DTYPES.contains(&dtype) {
        return Err(ctx.invalid(format!("collectives carry Float32, Float64, Int32 or Int64, got {dtype}")));
    }
    if let Some((i, t)) = ctx.inputs.iter().enumerate().find(|(_, t)| t.dtype != dtype) {
        return Err(ctx.invalid(format!("every input must have input 0's dtype {dtype} (one fusion buffer), input {i} is {}", t.dtype)));
    }
    match reduction(ctx.attrs, ctx.op)? {
        "sum" => {}
        "mean" if dtype.is_float() => {}
        "mean" => return Err(ctx.invalid(format!("reduction \"mean\" needs float tensors, got {dtype}"))),
        r => return Err(ctx.invalid(format!("reduction must be \"sum\" or \"mean\" for a grouped all-reduce, got \"{r}\""))),
    }
    Ok(ctx.inputs.to_vec())
}

/// Packs every input into one fusion buffer, all-reduces it in one call, and hands out the
/// outputs as views of the result (no copy back).
fn grouped_t<T: Carried>(ctx: &KernelCtx, comm: &dyn Communicator, what: &str, mean: Option<f64>) -> Result<Outputs> {
    let arrays = ctx.inputs.iter().map(|t| T::view(t).ok_or_else(|| ctx.error("inputs of different dtypes"))).collect::<Result<Vec<_>>>()?;
    let total: usize = arrays.iter().map(|a| a.len()).sum();
    let alloc =
        || crate::strided::try_buffer_for::<T>(total).ok_or_else(|| ctx.error(format!("cannot allocate a fusion buffer of {total} elements on the host")));
    let mut send = alloc()?;
    for a in &arrays {
        send.extend_from_slice(&row_major(a));
    }
    let mut out = alloc()?;
    // SAFETY: the all-reduce writes every element before the vector is read; the element
    // types have no invalid bit patterns.
    unsafe { out.set_len(total) };
    // SAFETY: on error both buffers are leaked, never freed or reused.
    let bytes = std::mem::size_of_val(&send[..]);
    if let Err(e) = phase(("transfer", "MPI_Allreduce"), bytes, || unsafe { comm.allreduce_into(what, T::slice(&send), T::buf(&mut out), ReduceOp::Sum) }) {
        std::mem::forget(send);
        std::mem::forget(out);
        return Err(e);
    }
    drop(send);
    if let Some(n) = mean {
        T::divide(&mut out, n);
    }
    let whole = ndarray::ArcArray::from_vec(out).into_dyn();
    let mut at = 0;
    let mut outs = Outputs::new();
    for a in &arrays {
        let part = whole.clone().slice_move(ndarray::s![at..at + a.len()].as_ref());
        at += a.len();
        outs.push(T::wrap(part.into_shape_with_order(IxDyn(a.shape())).map_err(|e| ctx.error(e))?));
    }
    Ok(outs)
}

fn kernel_grouped(ctx: &KernelCtx) -> Result<Outputs> {
    let red = reduction(&ctx.node.attrs, ctx.node.op.name)?;
    let (what, comm) = agreed(ctx)?;
    let mean = (red == "mean").then_some(comm.size() as f64);
    match &ctx.inputs[0] {
        Tensor::F32(_) => grouped_t::<f32>(ctx, comm.as_ref(), &what, mean),
        Tensor::F64(_) => grouped_t::<f64>(ctx, comm.as_ref(), &what, mean),
        Tensor::I32(_) => grouped_t::<i32>(ctx, comm.as_ref(), &what, None),
        Tensor::I64(_) => grouped_t::<i64>(ctx, comm.as_ref(), &what, None),
        t => Err(ctx.error(format!("no kernel for dtype {}", t.dtype()))),
    }
}

/// The adjoint of a grouped sum (mean) is the grouped sum (mean) of the output gradients.
fn grad_grouped(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    if grads.iter().all(Option::is_none) {
        return Ok(vec![None; grads.len()]);
    }
    let dys = (0..grads.len()).map(|i| grads[i].map_or_else(|| g.op("ZerosLike", &[Output::new(node.id, i)]), Ok)).collect::<Result<Vec<_>>>()?;
    let red = reduction(&node.attrs, node.op.name)?;
    let id = g.add_node(NodeSpec::new("MpiGroupedAllreduce", &dys).attr("reduction", red))?;
    Ok((0..dys.len()).map(|i| Some(Output::new(id, i))).collect())
}

/// A second handle on `buf` (for a call that takes it by value, before `buf` is used again).
fn reborrow<'a>(buf: &'a mut HostBuf) -> HostBuf<'a> {
    match buf {
        HostBuf::F32(b) => HostBuf::F32(b),
        HostBuf::F64(b) => HostBuf::F64(b),
        HostBuf::I32(b) => HostBuf::I32(b),
        HostBuf::I64(b) => HostBuf::I64(b),
    }
}

fn kernel_sum(ctx: &KernelCtx) -> Result<Outputs> {
    collective(ctx, |comm, what, mut buf| {
        let root = root(ctx, comm)?;
        comm.reduce(what, reborrow(&mut buf), ReduceOp::Sum, root)?;
        if comm.rank() != root {
            match buf {
                HostBuf::F32(b) => b.fill(0.0),
                HostBuf::F64(b) => b.fill(0.0),
                HostBuf::I32(b) => b.fill(0),
                HostBuf::I64(b) => b.fill(0),
            }
        }
        Ok(())
    })
}

fn kernel_bcast(ctx: &KernelCtx) -> Result<Outputs> {
    collective(ctx, |comm, what, buf| comm.broadcast(what, buf, root(ctx, comm)?))
}

/// A collective node `op` on `x` with `node`'s `root`/`reduction` attrs (or `reduction`).
fn collective_like(g: &mut Graph, op: &str, x: Output, node: &Node, reduction: Option<&str>) -> Result<Output> {
    let mut spec = NodeSpec::new(op, &[x]);
    if let Some(r) = node.attrs.get("root") {
        spec = spec.attr("root", r.clone());
    }
    if let Some(r) = reduction {
        spec = spec.attr("reduction", r);
    }
    g.op_spec(spec)
}

fn grad_allreduce(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None]) };
    let red = reduction(&node.attrs, node.op.name)?;
    if red == "mean" {
        return Ok(vec![Some(collective_like(g, "MpiAllreduce", dy, node, Some("mean"))?)]);
    }
    let total = collective_like(g, "MpiAllreduce", dy, node, Some("sum"))?;
    if red == "sum" {
        return Ok(vec![Some(total)]);
    }
    // max/min: the gradient reaches the ranks whose x is the result
    let x = node.inputs[0];
    let hit = g.op("Equal", &[x, Output::new(node.id, 0)])?;
    let dtype = g.output_type(x)?.dtype;
    let mask = g.op_spec(NodeSpec::new("Cast", &[hit]).attr("DstT", dtype))?;
    Ok(vec![Some(g.op("Mul", &[total, mask])?)])
}

fn grad_sum(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None]) };
    Ok(vec![Some(collective_like(g, "MpiBcast", dy, node, None)?)])
}

fn grad_bcast(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None]) };
    Ok(vec![Some(collective_like(g, "MpiSum", dy, node, None)?)])
}

pub(crate) fn register(r: &mut Registry) {
    let one = Arity::Fixed(1);
    // GPU ops too: NCCL on a CUDA GPU, these kernels on host copies otherwise
    let cpu = GpuSupport::Types(&DTYPES);
    let stateful = |d: OpDef| OpDef { stateful: true, ..d }.launched_as(GpuLaunch::Collective);
    r.add(stateful(
        def("MpiAllreduce", "MpiAllreduce", one, infer_collective, kernel_allreduce, cpu, Some(grad_allreduce)).with_attrs(attrs!["reduction" => Str]),
    ));
    r.add(stateful(
        def("MpiGroupedAllreduce", "MpiGroupedAllreduce", Arity::AtLeast(1), infer_grouped, kernel_grouped, cpu, Some(grad_grouped))
            .with_attrs(attrs!["reduction" => Str]),
    ));
    r.add(stateful(def("MpiSum", "MpiSum", one, infer_collective, kernel_sum, cpu, Some(grad_sum)).with_attrs(attrs!["root" => Int])));
    r.add(stateful(def("MpiBcast", "MpiBcast", one, infer_collective, kernel_bcast, cpu, Some(grad_bcast)).with_attrs(attrs!["root" => Int])));
}
