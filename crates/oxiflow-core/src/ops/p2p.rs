//! Point-to-point MPI ops, gather and halo exchange, on the process's [`Communicator`]
//! ([`crate::collective`]): ADCME's `mpi_send`, `mpi_recv`, `mpi_sendrecv`, `mpi_gather` and
//! `mpi_halo_exchange`, each with its adjoint. Ranks are 0-based (`MPI_COMM_WORLD`).
//!
//! - `MpiSend(x)`, attrs `dest`, `tag` (default 0), `zeros` (default false): sends `x` to rank
//!   `dest` and outputs `x` (ADCME: "`a` itself is returned so that the send action can be
//!   added to the computational graph"), or zeros of its shape with `zeros` (the form
//!   `MpiRecv`'s gradient takes). Gradient: the output gradient plus the gradient received
//!   from `dest` (an `MpiRecv`); with `zeros`, only the received one. ADCME's kernel returns
//!   the received gradient alone, which is wrong when the sender also uses the output.
//! - `MpiRecv(x)`, attrs `src`, `tag`: outputs the tensor rank `src` sent, of `x`'s shape and
//!   dtype (`x` only gives the shape, as in ADCME). Gradient: the output gradient is sent
//!   back to `src` (an `MpiSend` with `zeros`); `x` gets zeros.
//! - `MpiSendRecv(x)`, attrs `dest`, `src`, `tag`: sends `x` to `dest` and outputs what `src`
//!   sent, both at once (`MPI_Sendrecv`: a ring, or two ranks swapping, cannot deadlock).
//!   Gradient: `MpiSendRecv` of the output gradient in the opposite direction.
//! - `MpiGather(x)`, attrs `root` (default 0), `ranks` (the number of ranks, default the
//!   communicator's size when the node is built): rank `root` gets every rank's `x`
//!   concatenated along the first axis in rank order (`MPI_Gather`; shape
//!   `[ranks * d0, d1, ...]`); the other ranks get zeros of that shape (ADCME's kernel
//!   leaves their output unwritten). Gradient: `MpiScatter` of `root`'s output gradient.
//! - `MpiScatter(x)`, attrs `root`, `ranks`: rank `q` gets the `q`-th of `ranks` equal slices
//!   (along the first axis) of `root`'s `x` (`MPI_Scatter`; the other ranks' `x` is not
//!   read). Gradient: `MpiGather`.
//! - `MpiHaloExchange(u)`, attrs `m`, `n`, `fill_value` (default 0.0), `tag`, `width`
//!   (default 1): ADCME's `mpi_halo_exchange` (width 1) and `mpi_halo_exchange2` (width 2,
//!   ADCME's `HaloExchangeNeighborTwo` op). The `m * n` ranks (exactly the job's) form an
//!   `m`-by-`n` process grid, rank `r` at row `r / n`, column `r % n` (row-major, as
//!   ADCME); each holds a block `u` of shape `[k1, k2]`, the same on every rank, of the
//!   global `[m*k1, n*k2]` array, with `k1, k2 >= width`. The output, `[k1 + 2w, k2 + 2w]`
//!   for `w = width`, is `u` framed by `w` cells on each side: rows `0..w` are the last `w`
//!   rows of the block above (in order: row 0 is its row `k1 - w`), rows `k1 + w..k1 + 2w`
//!   the first `w` rows of the block below, columns `0..w` the last `w` columns of the block
//!   on the left, columns `k2 + w..k2 + 2w` the first `w` columns of the block on the
//!   right, each `fill_value` where the grid has no neighbour; the four `w`-by-`w` corners
//!   are 0 (ADCME's kernels set them to 0.0, whatever `fill_value`). So the output is the
//!   window of the global array padded by `w` cells of `fill_value`, corners aside. ADCME
//!   takes square blocks only; rectangular ones work here. Gradient: `MpiHaloExchangeGrad`
//!   (attrs `m`, `n`, `tag`, `width`; input `[k1 + 2w, k2 + 2w]`, at least `3w` by `3w`),
//!   which sends each frame strip's gradient to that neighbour, where it is added to the
//!   edge strip it came from, plus the interior gradient. Its own gradient is
//!   `MpiHaloExchange` with `fill_value` 0 and the same `width`.
//!
//! Dtypes Float32, Float64, Int32, Int64 (the data travel in row-major order). CPU kernels
//! only; stateful (never folded or merged). Every op is one of the session's chained
//! collectives (its name starts with "Mpi"), so a rank issues them in node order.
//! Agreement before the data: gather, scatter and halo exchange are collectives and check
//! [`Communicator::agree`] (op, node name, dtype, shape, attrs); the point-to-point ops
//! exchange a key with each peer first (who sends what to whom: dtype, element count, tag;
//! on a tag of their own, `HANDSHAKE_TAG`), and both ends fail with FailedPrecondition
//! naming the op and the peer when the keys differ, so a receive never takes a message of
//! another size. A peer that never comes fails after the communicator's timeout
//! (DeadlineExceeded). Errors: `dest`/`src` not a rank or this rank (InvalidArgument naming
//! the node; ADCME asserts `src != dest` too), `tag` outside `0..=32766`, a grid `m * n`
//! that is not the number of ranks, a halo's `width` under 1 or a block smaller than
//! `width` by `width` (when the node is built), MPI not initialized (FailedPrecondition).
//!
//! Gradients of point-to-point ops are point-to-point ops, so both ends must differentiate:
//! when one rank's loss uses a received tensor, the sender's loss must use the sender's op
//! output (or the gradient run waits for a partner that never comes, then times out).

use super::math::def;
use super::*;
use crate::collective::{communicator, Communicator, HostBuf};
use crate::graph::NodeSpec;
use crate::tensor::Layout;
use std::ops::{AddAssign, Range};

const DTYPES: [DType; 4] = [DType::Float32, DType::Float64, DType::Int32, DType::Int64];

/// The tag of the key exchange before a point-to-point op's data (the largest tag MPI
/// guarantees); user tags are `0..HANDSHAKE_TAG`.
const HANDSHAKE_TAG: i32 = 32767;

/// An element the ops carry.
trait Msg: Element + Default + AddAssign {
    /// `v` as a communicator buffer.
    fn host(v: &mut [Self]) -> HostBuf<'_>;
    /// `x` converted (`as`) to this type (the halo's `fill_value`).
    fn of_f64(x: f64) -> Self;
}

macro_rules! msg {
    ($t:ty, $v:ident) => {
        impl Msg for $t {
            fn host(v: &mut [$t]) -> HostBuf<'_> {
                HostBuf::$v(v)
            }
            fn of_f64(x: f64) -> $t {
                x as $t
            }
        }
    };
}
msg!(f32, F32);
msg!(f64, F64);
msg!(i32, I32);
msg!(i64, I64);

/// `body::<T>(row-major elements of input 0)` for the element type `T` of input 0.
macro_rules! dispatch {
    ($ctx:expr, $body:ident ( $($arg:expr),* )) => {{
        let x = &$ctx.inputs[0];
        match x.dtype() {
            DType::Float32 => $body::<f32>(elements(x)?, $($arg),*),
            DType::Float64 => $body::<f64>(elements(x)?, $($arg),*),
            DType::Int32 => $body::<i32>(elements(x)?, $($arg),*),
            DType::Int64 => $body::<i64>(elements(x)?, $($arg),*),
            d => Err($ctx.error(format!("no kernel for dtype {d}"))),
        }
    }};
}

/// The elements of `t` in row-major order.
fn elements<T: Msg>(t: &Tensor) -> Result<Vec<T>> {
    T::view(t).map(|a| a.iter().copied().collect()).ok_or_else(|| OxiflowError::Internal(format!("expected a {} tensor, got {}", T::DTYPE, t.dtype())))
}

// ---------------------------------------------------------------- shape functions

fn check_dtype(ctx: &InferCtx) -> Result<()> {
    let d = ctx.inputs[0].dtype;
    if !DTYPES.contains(&d) {
        return Err(ctx.invalid(format!("MPI ops carry Float32, Float64, Int32 or Int64, got {d}")));
    }
    for k in ["dest", "src", "root"] {
        if let Some(v) = ctx.attrs.get(k) {
            match v {
                AttrValue::Int(r) if *r >= 0 => {}
                v => return Err(ctx.invalid(format!("{k} must be a rank (0 or more), got {v}"))),
            }
        }
    }
    if let Some(v) = ctx.attrs.get("tag") {
        match v {
            AttrValue::Int(t) if (0..HANDSHAKE_TAG as i64).contains(t) => {}
            v => return Err(ctx.invalid(format!("tag must be an integer from 0 to {}, got {v}", HANDSHAKE_TAG - 1))),
        }
    }
    Ok(())
}

fn infer_p2p(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    check_dtype(ctx)?;
    let need: &[&str] = match ctx.op {
        "MpiSend" => &["dest"],
        "MpiRecv" => &["src"],
        _ => &["dest", "src"],
    };
    for k in need {
        if !ctx.attrs.contains_key(*k) {
            return Err(ctx.invalid(format!("needs the attr {k} (a rank)")));
        }
    }
    Ok(vec![ctx.inputs[0].clone()])
}

/// The `ranks` attr of a gather or scatter, or the communicator's size.
fn ranks_of(attrs: &Attrs, op: &str, what: &str) -> Result<usize> {
    match attrs.get("ranks") {
        Some(AttrValue::Int(r)) if *r >= 1 => Ok(*r as usize),
        Some(v) => Err(OxiflowError::InvalidArgument(format!("{what}: ranks must be 1 or more, got {v}"))),
        None => communicator(what).map(|c| c.size()).map_err(|_| {
            OxiflowError::FailedPrecondition(format!(
                "{what}: {op} needs the number of ranks for its shape: call mpi_init() before building it, or give the attr ranks"
            ))
        }),
    }
}

fn infer_gather(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    check_dtype(ctx)?;
    let x = &ctx.inputs[0];
    let what = format!("{} '{}'", ctx.op, ctx.node);
    let ranks = ranks_of(ctx.attrs, ctx.op, &what)?;
    let mut dims = x.shape.dims().to_vec();
    if dims.is_empty() {
        return Err(ctx.invalid("needs a tensor of rank 1 or more (the ranks' tensors are concatenated along the first axis), got a scalar"));
    }
    if ctx.op == "MpiGather" {
        dims[0] = dims[0].saturating_mul(ranks);
    } else if !dims[0].is_multiple_of(ranks) {
        return Err(ctx.invalid(format!("the first dimension of {} does not split into {ranks} equal slices", x.shape)));
    } else {
        dims[0] /= ranks;
    }
    Ok(vec![TensorType::new(x.dtype, Shape(dims))])
}

/// The halo's `width` attr (default 1), 1 or more.
fn width_attr(v: Option<&AttrValue>) -> std::result::Result<usize, String> {
    match v {
        None => Ok(1),
        Some(AttrValue::Int(w)) if *w >= 1 && *w <= u32::MAX as i64 => Ok(*w as usize),
        Some(v) => Err(format!("width (the halo's depth in cells) must be an integer of 1 or more, got {v}")),
    }
}

fn infer_halo(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    check_dtype(ctx)?;
    let x = &ctx.inputs[0];
    for k in ["m", "n"] {
        match ctx.attrs.get(k) {
            Some(AttrValue::Int(v)) if *v >= 1 => {}
            v => return Err(ctx.invalid(format!("{k} (the process grid's {}) must be 1 or more, got {v:?}", if k == "m" { "rows" } else { "columns" }))),
        }
    }
    let w = width_attr(ctx.attrs.get("width")).map_err(|e| ctx.invalid(e))?;
    let grad = ctx.op == "MpiHaloExchangeGrad";
    // each neighbour's frame strip is `w` rows (columns) of this block, so a block is at
    // least `w` by `w`; the gradient's input is a block with its frame of `w` on each side
    let least = if grad { 3 * w } else { w };
    let d = x.shape.dims();
    if d.len() != 2 || d[0] < least || d[1] < least {
        let of = if grad {
            format!("the output gradient of a halo of width {w}: a block of at least {w}x{w} framed by {w} on each side")
        } else {
            format!("the local block; a halo of width {w} sends {w} rows and columns of it to each neighbour")
        };
        return Err(ctx.invalid(format!("needs a matrix of at least {least}x{least} ({of}), got shape {}", x.shape)));
    }
    let out = if grad { vec![d[0] - 2 * w, d[1] - 2 * w] } else { vec![d[0] + 2 * w, d[1] + 2 * w] };
    Ok(vec![TensorType::new(x.dtype, Shape(out))])
}

// ---------------------------------------------------------------- kernels

/// `MpiSend 'name'`, for errors.
fn what(ctx: &KernelCtx) -> String {
    format!("{} '{}'", ctx.node.op.name, ctx.node.name)
}

/// Rank attr `k` (`dest`, `src`, `root`): a rank of the job and, for `dest`/`src`, not
/// this one.
fn rank_attr(ctx: &KernelCtx, comm: &dyn Communicator, k: &str, default: Option<i64>) -> Result<usize> {
    let r = match default {
        Some(d) => super::shape_ops::int_or(&ctx.node.attrs, ctx.node.op.name, k, d)?,
        None => ctx.node.attrs.get_int(ctx.node.op.name, k)?,
    };
    match usize::try_from(r) {
        Ok(r) if r < comm.size() => {
            if k != "root" && r == comm.rank() {
                return Err(ctx.error(format!(
                    "{k} {r} is this rank: a rank does not send to or receive from itself (ADCME asserts src != dest; for ADCME's mpi_sendrecv(a, dest, src) pair, call mpi_send on rank src and mpi_recv on rank dest)"
                )));
            }
            Ok(r)
        }
        _ => Err(ctx.error(format!("{k} {r} is not a rank of this job (ranks 0 to {})", comm.size() - 1))),
    }
}

/// The `tag` attr (default 0).
fn tag_attr(ctx: &KernelCtx) -> Result<i32> {
    let t = super::shape_ops::int_or(&ctx.node.attrs, ctx.node.op.name, "tag", 0)?;
    i32::try_from(t).ok().filter(|t| (0..HANDSHAKE_TAG).contains(t)).ok_or_else(|| ctx.error(format!("tag must be from 0 to {}, got {t}", HANDSHAKE_TAG - 1)))
}

/// Before a point-to-point op's data: with each peer, exchanges a key of the messages
/// between the two (`(from, to)` in `msgs`, each of `count` elements of `dtype` with
/// `tag`), as both ends describe them; FailedPrecondition on both ends when they differ.
fn handshake(comm: &dyn Communicator, what: &str, msgs: &[(usize, usize)], dtype: DType, count: usize, tag: i32) -> Result<()> {
    let me = comm.rank();
    let mut peers: Vec<usize> = msgs.iter().map(|&(f, t)| if f == me { t } else { f }).collect();
    peers.sort_unstable();
    peers.dedup();
    let describe = |p: usize| {
        let mut d: Vec<String> =
            msgs.iter().filter(|&&(f, t)| f == p || t == p).map(|(f, t)| format!("rank {f} sends {count} {dtype} to rank {t} with tag {tag}")).collect();
        d.sort();
        d.join(", ")
    };
    let mut mine: Vec<i64> = peers.iter().map(|&p| super::collective::key_of(&describe(p)) as i64).collect();
    let mut theirs = vec![0i64; peers.len()];
    let sends = mine.chunks_mut(1).zip(&peers).map(|(k, &p)| (HostBuf::I64(k), p)).collect();
    let recvs = theirs.chunks_mut(1).zip(&peers).map(|(k, &p)| (HostBuf::I64(k), p)).collect();
    comm.exchange(what, sends, recvs, HANDSHAKE_TAG)?;
    for (i, &p) in peers.iter().enumerate() {
        if mine[i] != theirs[i] {
            return Err(OxiflowError::FailedPrecondition(format!(
                "{what} on rank {me} of {}: rank {p} does not run the matching point-to-point op here (this rank expects: {}); the two ends must agree on ranks, dtype, element count and tag, and run their MPI ops in the same order",
                comm.size(),
                describe(p)
            )));
        }
    }
    Ok(())
}

/// Sends `v` to `dest` and receives from `src` (`peers`, either may be absent); the output
/// is the received tensor, else zeros (`zeros`) or `v`.
fn p2p_t<T: Msg>(
    mut v: Vec<T>,
    comm: &dyn Communicator,
    what: &str,
    dims: &[usize],
    peers: (Option<usize>, Option<usize>),
    tag: i32,
    zeros: bool,
) -> Result<Tensor> {
    let (dest, src) = peers;
    let mut recv = vec![T::default(); if src.is_some() { v.len() } else { 0 }];
    let sends = dest.map(|d| (T::host(&mut v), d)).into_iter().collect();
    let recvs = src.map(|s| (T::host(&mut recv), s)).into_iter().collect();
    comm.exchange(what, sends, recvs, tag)?;
    let out = if src.is_some() {
        recv
    } else if zeros {
        vec![T::default(); v.len()]
    } else {
        v
    };
    Tensor::from_vec(dims, out, Layout::RowMajor)
}

fn kernel_p2p(ctx: &KernelCtx) -> Result<Outputs> {
    let what = what(ctx);
    let comm = communicator(&what)?;
    let op = ctx.node.op.name;
    let dest = if op == "MpiRecv" { None } else { Some(rank_attr(ctx, comm.as_ref(), "dest", None)?) };
    let src = if op == "MpiSend" { None } else { Some(rank_attr(ctx, comm.as_ref(), "src", None)?) };
    let tag = tag_attr(ctx)?;
    let zeros = ctx.node.attrs.get_bool_or(op, "zeros", false)?;
    let x = &ctx.inputs[0];
    let me = comm.rank();
    let msgs: Vec<(usize, usize)> = dest.map(|d| (me, d)).into_iter().chain(src.map(|s| (s, me))).collect();
    handshake(comm.as_ref(), &what, &msgs, x.dtype(), x.len(), tag)?;
    let dims = x.dims().to_vec();
    let out = dispatch!(ctx, p2p_t(comm.as_ref(), &what, &dims, (dest, src), tag, zeros))?;
    Ok(smallvec![out])
}

/// Gathers (`gather`) `v` into `root`'s output of `out_dims`, or scatters `root`'s `v`
/// into every rank's output of `out_dims`; a gather's other ranks get zeros.
fn gather_t<T: Msg>(mut v: Vec<T>, comm: &dyn Communicator, what: &str, out_dims: &[usize], root: usize, gather: bool) -> Result<Tensor> {
    let n: usize = out_dims.iter().product();
    let mut out = vec![T::default(); n];
    if gather {
        let mut recv = vec![T::default(); if comm.rank() == root { n } else { 0 }];
        comm.gather(what, T::host(&mut v), T::host(&mut recv), root)?;
        if comm.rank() == root {
            out = recv;
        }
    } else {
        comm.scatter(what, T::host(&mut v), T::host(&mut out), root)?;
    }
    Tensor::from_vec(out_dims, out, Layout::RowMajor)
}

fn kernel_gather(ctx: &KernelCtx) -> Result<Outputs> {
    let what = what(ctx);
    let comm = communicator(&what)?;
    let root = rank_attr(ctx, comm.as_ref(), "root", Some(0))?;
    let ranks = ranks_of(&ctx.node.attrs, ctx.node.op.name, &what)?;
    if ranks != comm.size() {
        return Err(ctx.error(format!("built for {ranks} ranks, but this job has {}", comm.size())));
    }
    super::collective::agree_on_node(ctx, comm.as_ref(), &what)?;
    let out_dims = ctx.node.outputs[0].shape.dims().to_vec();
    let gather = ctx.node.op.name == "MpiGather";
    let out = dispatch!(ctx, gather_t(comm.as_ref(), &what, &out_dims, root, gather))?;
    Ok(smallvec![out])
}

/// The grid's neighbours of rank `r` in an `m`-by-`n` grid: above, below, left, right.
fn neighbours(r: usize, m: usize, n: usize) -> [Option<usize>; 4] {
    let (i, j) = (r / n, r % n);
    [(i > 0).then(|| r - n), (i + 1 < m).then(|| r + n), (j > 0).then(|| r - 1), (j + 1 < n).then(|| r + 1)]
}

/// Sends the four `sides` to the existing neighbours `nb` and returns the four sides they
/// sent (empty where there is none), posted together.
fn swap_sides<T: Msg>(comm: &dyn Communicator, what: &str, nb: [Option<usize>; 4], mut sides: [Vec<T>; 4], tag: i32) -> Result<[Vec<T>; 4]> {
    let mut got: [Vec<T>; 4] = std::array::from_fn(|s| vec![T::default(); if nb[s].is_some() { sides[s].len() } else { 0 }]);
    let mut sends = Vec::new();
    let mut recvs = Vec::new();
    for ((p, s), g) in nb.iter().zip(sides.iter_mut()).zip(got.iter_mut()) {
        if let Some(p) = *p {
            sends.push((T::host(s), p));
            recvs.push((T::host(g), p));
        }
    }
    comm.exchange(what, sends, recvs, tag)?;
    Ok(got)
}

/// The elements of the `rows` x `cols` window of the row-major matrix `v` with `width`
/// columns, row-major.
fn window<T: Copy>(v: &[T], width: usize, (rows, cols): &Rect) -> Vec<T> {
    rows.clone().flat_map(|i| v[i * width + cols.start..i * width + cols.end].iter().copied()).collect()
}

/// A window of a matrix: its rows and its columns.
type Rect = (Range<usize>, Range<usize>);

/// One rank's halo exchange: its `[k1, k2]` block, the halo's width `w`, its neighbours
/// `nb` (above, below, left, right, as [`neighbours`]), `fill` where there is none, `tag`.
struct Halo {
    k: (usize, usize),
    w: usize,
    nb: [Option<usize>; 4],
    fill: f64,
    tag: i32,
}

/// Side by side (above, below, left, right): the frame's four strips in the
/// `[k1 + 2w, k2 + 2w]` output, and the block's edge strips that each neighbour's frame on
/// that side holds (the block above holds this block's first `w` rows below its own, and
/// so on).
fn halo_strips(&Halo { k: (k1, k2), w, .. }: &Halo) -> ([Rect; 4], [Rect; 4]) {
    let frame = [(0..w, w..w + k2), (k1 + w..k1 + 2 * w, w..w + k2), (w..w + k1, 0..w), (w..w + k1, k2 + w..k2 + 2 * w)];
    let edges = [(0..w, 0..k2), (k1 - w..k1, 0..k2), (0..k1, 0..w), (0..k1, k2 - w..k2)];
    (frame, edges)
}

/// `MpiHaloExchange` of width `w` of the `[k1, k2]` block `u` (row-major): each edge strip
/// goes to that side's neighbour, whose strip fills the frame on that side.
fn halo_t<T: Msg>(u: Vec<T>, comm: &dyn Communicator, what: &str, h: &Halo) -> Result<Tensor> {
    let &Halo { k: (k1, k2), w, nb, .. } = h;
    let (frame, edges) = halo_strips(h);
    let got = swap_sides(comm, what, nb, edges.each_ref().map(|r| window(&u, k2, r)), h.tag)?;
    let cols = k2 + 2 * w;
    let mut out = vec![T::default(); (k1 + 2 * w) * cols];
    for i in 0..k1 {
        out[(i + w) * cols + w..(i + w) * cols + w + k2].copy_from_slice(&u[i * k2..(i + 1) * k2]);
    }
    let fill = T::of_f64(h.fill);
    for (s, (rows, cs)) in frame.iter().enumerate() {
        let mut from = got[s].iter();
        for i in rows.clone() {
            for o in &mut out[i * cols + cs.start..i * cols + cs.end] {
                *o = if nb[s].is_some() { *from.next().expect("a full strip") } else { fill };
            }
        }
    }
    Tensor::from_vec(&[k1 + 2 * w, cols], out, Layout::RowMajor)
}

/// `MpiHaloExchangeGrad` of width `w` of the `[k1 + 2w, k2 + 2w]` gradient `dy`: its
/// interior, plus the frame gradients the neighbours send back, added to the edge strips
/// they came from.
fn halo_grad_t<T: Msg>(dy: Vec<T>, comm: &dyn Communicator, what: &str, h: &Halo) -> Result<Tensor> {
    let &Halo { k: (k1, k2), w, nb, .. } = h;
    let (frame, edges) = halo_strips(h);
    let cols = k2 + 2 * w;
    let got = swap_sides(comm, what, nb, frame.each_ref().map(|r| window(&dy, cols, r)), h.tag)?;
    let mut out = window(&dy, cols, &(w..w + k1, w..w + k2));
    for (s, (rows, cs)) in edges.iter().enumerate() {
        if nb[s].is_some() {
            let mut from = got[s].iter();
            for i in rows.clone() {
                for o in &mut out[i * k2 + cs.start..i * k2 + cs.end] {
                    *o += *from.next().expect("a full strip");
                }
            }
        }
    }
    Tensor::from_vec(&[k1, k2], out, Layout::RowMajor)
}

fn kernel_halo(ctx: &KernelCtx) -> Result<Outputs> {
    let what = what(ctx);
    let comm = communicator(&what)?;
    let op = ctx.node.op.name;
    let (m, n) = (ctx.node.attrs.get_int(op, "m")?, ctx.node.attrs.get_int(op, "n")?);
    if m < 1 || n < 1 || m.checked_mul(n) != Some(comm.size() as i64) {
        return Err(ctx.error(format!("an m x n = {m} x {n} process grid needs m * n ranks, but this job has {}", comm.size())));
    }
    let fill = if ctx.node.attrs.contains_key("fill_value") { ctx.node.attrs.get_float(op, "fill_value")? } else { 0.0 };
    let tag = tag_attr(ctx)?;
    let w = width_attr(ctx.node.attrs.get("width")).map_err(|e| ctx.error(e))?;
    super::collective::agree_on_node(ctx, comm.as_ref(), &what)?;
    let nb = neighbours(comm.rank(), m as usize, n as usize);
    let d = ctx.inputs[0].dims();
    let out = if op == "MpiHaloExchange" {
        dispatch!(ctx, halo_t(comm.as_ref(), &what, &Halo { k: (d[0], d[1]), w, nb, fill, tag }))?
    } else {
        dispatch!(ctx, halo_grad_t(comm.as_ref(), &what, &Halo { k: (d[0] - 2 * w, d[1] - 2 * w), w, nb, fill, tag }))?
    };
    Ok(smallvec![out])
}

// ---------------------------------------------------------------- gradients

/// A node `op` on `x` with `node`'s attrs named in `keep` and the `extra` ones.
fn like(g: &mut Graph, op: &str, x: Output, node: &Node, keep: &[&str], extra: &[(&str, AttrValue)]) -> Result<Output> {
    let mut spec = NodeSpec::new(op, &[x]);
    for k in keep {
        if let Some(v) = node.attrs.get(*k) {
            spec = spec.attr(k, v.clone());
        }
    }
    for (k, v) in extra {
        spec = spec.attr(k, v.clone());
    }
    g.op_spec(spec)
}

/// Attr `k` of `node` (a rank), for a gradient node.
fn attr(node: &Node, k: &str) -> Result<AttrValue> {
    node.attrs.get(k).cloned().ok_or_else(|| OxiflowError::InvalidArgument(format!("{} '{}': needs the attr {k}", node.op.name, node.name)))
}

fn grad_send(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None]) };
    let back = like(g, "MpiRecv", dy, node, &["tag"], &[("src", attr(node, "dest")?)])?;
    if node.attrs.get_bool_or(node.op.name, "zeros", false)? {
        return Ok(vec![Some(back)]);
    }
    Ok(vec![Some(g.op("Add", &[dy, back])?)])
}

fn grad_recv(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None]) };
    Ok(vec![Some(like(g, "MpiSend", dy, node, &["tag"], &[("dest", attr(node, "src")?), ("zeros", AttrValue::Bool(true))])?)])
}

fn grad_sendrecv(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None]) };
    Ok(vec![Some(like(g, "MpiSendRecv", dy, node, &["tag"], &[("dest", attr(node, "src")?), ("src", attr(node, "dest")?)])?)])
}

fn grad_gather(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None]) };
    let gather = node.op.name == "MpiGather";
    let op = if gather { "MpiScatter" } else { "MpiGather" };
    // the number of ranks the node was built for: its attr, else its shapes' ratio
    let ranks = match node.attrs.get("ranks") {
        Some(v) => v.clone(),
        None => {
            let (i, o) = (g.output_type(node.inputs[0])?.shape.dims()[0], node.outputs[0].shape.dims()[0]);
            let (big, small) = if gather { (o, i) } else { (i, o) };
            let ranks = match big.checked_div(small) {
                Some(r) => r,
                None => ranks_of(&node.attrs, node.op.name, &format!("{} '{}'", node.op.name, node.name))?,
            };
            AttrValue::Int(ranks as i64)
        }
    };
    Ok(vec![Some(like(g, op, dy, node, &["root"], &[("ranks", ranks)])?)])
}

fn grad_halo(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None]) };
    let dx = if node.op.name == "MpiHaloExchange" {
        like(g, "MpiHaloExchangeGrad", dy, node, &["m", "n", "tag", "width"], &[])?
    } else {
        like(g, "MpiHaloExchange", dy, node, &["m", "n", "tag", "width"], &[("fill_value", AttrValue::Float(0.0))])?
    };
    Ok(vec![Some(dx)])
}

pub(crate) fn register(r: &mut Registry) {
    let one = Arity::Fixed(1);
    let cpu = GpuSupport::None;
    let stateful = |d: OpDef| OpDef { stateful: true, ..d };
    r.add(stateful(
        def("MpiSend", "MpiSend", one, infer_p2p, kernel_p2p, cpu, Some(grad_send)).with_attrs(attrs!["dest" => Int, "tag" => Int, "zeros" => Bool]),
    ));
    r.add(stateful(def("MpiRecv", "MpiRecv", one, infer_p2p, kernel_p2p, cpu, Some(grad_recv)).with_attrs(attrs!["src" => Int, "tag" => Int])));
    r.add(stateful(
        def("MpiSendRecv", "MpiSendRecv", one, infer_p2p, kernel_p2p, cpu, Some(grad_sendrecv)).with_attrs(attrs!["dest" => Int, "src" => Int, "tag" => Int]),
    ));
    r.add(stateful(def("MpiGather", "MpiGather", one, infer_gather, kernel_gather, cpu, Some(grad_gather)).with_attrs(attrs!["root" => Int, "ranks" => Int])));
    r.add(stateful(
        def("MpiScatter", "MpiScatter", one, infer_gather, kernel_gather, cpu, Some(grad_gather)).with_attrs(attrs!["root" => Int, "ranks" => Int]),
    ));
    r.add(stateful(
        def("MpiHaloExchange", "MpiHaloExchange", one, infer_halo, kernel_halo, cpu, Some(grad_halo))
            .with_attrs(attrs!["m" => Int, "n" => Int, "fill_value" => Float, "tag" => Int, "width" => Int]),
    ));
    r.add(stateful(
        def("MpiHaloExchangeGrad", "MpiHaloExchangeGrad", one, infer_halo, kernel_halo, cpu, Some(grad_halo))
            .with_attrs(attrs!["m" => Int, "n" => Int, "tag" => Int, "width" => Int]),
    ));
}
