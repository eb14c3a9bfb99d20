//! The plan/execute half of the movement launchers (`launch::movement::plan`, re-exported
//! by [`super`]): kernel metadata structs mirrored from `kernels/shape.cu` and
//! `kernels/index.cu`, the [`Step`]s a planner returns, [`execute`] (the only code that
//! touches the stream), launch sizing, and the attr/shape helpers the planners share.

use super::index::{DiagMeta, GatherMeta, NdMeta};
use super::{BLOCK, MAX_GRID, MAX_PIECES};
use crate::error::{CudaError, CudaResult};
use crate::launch::{entry_name, DevArg, LaunchCtx, MAX_RANK};
use cudarc::driver::{DeviceRepr, LaunchConfig, PushKernelArg};
use oxiflow_core::graph::Node;
use oxiflow_core::ops::AttrsExt;
use oxiflow_core::DType;

// ---------------------------------------------------------------- plans

/// A kernel's metadata argument, by value (first kernel parameter). Plans are short-lived
/// and small, so the variants stay unboxed.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Meta {
    Map(MapMeta),
    Swap(SwapMeta),
    Pieces(PiecesMeta),
    Gather(GatherMeta),
    Nd(NdMeta),
    Diag(DiagMeta),
}

impl Meta {
    /// Sets `wide`, so the kernel takes its 64-bit index path (same results; tests use it
    /// to run that path on small tensors).
    pub fn force_wide(&mut self) {
        match self {
            Meta::Map(m) => m.wide = 1,
            Meta::Swap(m) => m.wide = 1,
            Meta::Pieces(m) => m.wide = 1,
            Meta::Gather(m) => m.wide = 1,
            Meta::Nd(m) => m.wide = 1,
            Meta::Diag(m) => m.wide = 1,
        }
    }
}

/// One unit of work on the stream.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Launch `entry` over `total` work items (elements; tiles for [`Meta::Swap`]) with
    /// `meta` by value, then the 64-bit device pointers `ptrs` (in the entry's parameter
    /// order).
    Kernel { entry: String, total: usize, meta: Meta, ptrs: Vec<u64> },
    /// Zero `bytes` bytes at `ptr` (`cuMemsetD8Async`).
    Zero { ptr: u64, bytes: usize },
    /// Copy `bytes` bytes from device address `src` to `dst` (`cuMemcpyDtoDAsync`).
    Copy { src: u64, dst: u64, bytes: usize },
}

/// Enqueues `steps` on `ctx.stream` in order; never synchronizes.
pub fn execute(ctx: &LaunchCtx, node: &Node, steps: &[Step]) -> CudaResult<()> {
    execute_with_grid(ctx, node, steps, MAX_GRID)
}

/// [`execute`] with at most `max_grid` blocks per launch (at least 1). Tests pass 1 so
/// that the kernels' grid-stride loops cover every element from one block.
pub fn execute_with_grid(ctx: &LaunchCtx, node: &Node, steps: &[Step], max_grid: u32) -> CudaResult<()> {
    let max = max_grid.max(1);
    let grid = |total: usize| grid(total, max);
    let tile_grid = |tiles: usize| tile_grid(tiles, max);
    for s in steps {
        match s {
            Step::Zero { ptr, bytes } => {
                // SAFETY: the plan zeroes an output buffer of the device, `bytes` long;
                // ordered on the stream before the kernels that follow.
                unsafe { cudarc::driver::result::memset_d8_async(*ptr, 0, *bytes, ctx.stream.cu_stream()) }
                    .map_err(|e| driver_error(ctx, node, "cuMemsetD8Async", e))?;
            }
            Step::Copy { src, dst, bytes } => {
                // SAFETY: the plan copies an input buffer into an output buffer of the
                // device, both `bytes` long and distinct; ordered on the stream before the
                // kernels that follow.
                unsafe { cudarc::driver::result::memcpy_dtod_async(*dst, *src, *bytes, ctx.stream.cu_stream()) }
                    .map_err(|e| driver_error(ctx, node, "cuMemcpyDtoDAsync", e))?;
            }
            Step::Kernel { entry, total, meta, ptrs } => match meta {
                Meta::Map(m) => launch_raw(ctx, node, entry, grid(*total), m, ptrs)?,
                Meta::Swap(m) => launch_raw(ctx, node, entry, tile_grid(*total), m, ptrs)?,
                Meta::Pieces(m) => launch_raw(ctx, node, entry, grid(*total), m, ptrs)?,
                Meta::Gather(m) => launch_raw(ctx, node, entry, grid(*total), m, ptrs)?,
                Meta::Nd(m) => launch_raw(ctx, node, entry, grid(*total), m, ptrs)?,
                Meta::Diag(m) => launch_raw(ctx, node, entry, grid(*total), m, ptrs)?,
            },
        }
    }
    Ok(())
}

fn driver_error(ctx: &LaunchCtx, node: &Node, call: &str, e: cudarc::driver::DriverError) -> CudaError {
    CudaError::Driver { device: ctx.device.to_string(), call: format!("{call} for {} '{}'", node.op.name, node.name), msg: e.to_string() }
}

/// Enqueues `entry` with `meta` by value and then `ptrs`.
fn launch_raw<M: DeviceRepr>(ctx: &LaunchCtx, node: &Node, entry: &str, cfg: LaunchConfig, meta: &M, ptrs: &[u64]) -> CudaResult<()> {
    let f = (ctx.function)(entry)?;
    let mut b = ctx.stream.launch_builder(&f);
    b.arg(meta);
    for p in ptrs {
        b.arg(p);
    }
    // SAFETY: the argument list matches the entry's signature in kernels/*.cu (a metadata
    // struct by value, then `T*`/`void*` pointers as 64-bit words); the pointers are device
    // buffers of the sizes the metadata describes, owned by the device until the stream
    // has run; the kernels stay within the metadata's bounds.
    unsafe { b.launch(cfg) }.map_err(|e| driver_error(ctx, node, &format!("cuLaunchKernel({entry})"), e))?;
    Ok(())
}

// ---------------------------------------------------------------- metadata (shape.cu)

/// `MapMeta` of `kernels/shape.cu`: an element-to-element map from an output of rank
/// `rank` to an input (which fields each kernel reads is documented there).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MapMeta {
    pub out_dims: [i64; MAX_RANK],
    pub in_dims: [i64; MAX_RANK],
    pub in_strides: [i64; MAX_RANK],
    pub start: [i64; MAX_RANK],
    pub step: [i64; MAX_RANK],
    pub base: i64,
    pub total: i64,
    pub rank: i32,
    pub wide: i32,
}

// SAFETY: plain `#[repr(C)]` data of integers, laid out as the CUDA struct.
unsafe impl DeviceRepr for MapMeta {}

impl MapMeta {
    /// A map onto an output of dimensions `out` whose input has `in_len` elements; `wide`
    /// is set when an index could exceed `i32::MAX`.
    pub fn new(out: &[usize], in_len: usize) -> MapMeta {
        let mut m = MapMeta { rank: out.len() as i32, ..Default::default() };
        for (i, &d) in out.iter().enumerate() {
            m.out_dims[i] = d as i64;
        }
        let total: usize = out.iter().product();
        m.total = total as i64;
        m.wide = wide(total.max(in_len));
        m
    }
}

/// `PiecesMeta` of `kernels/shape.cu`: up to [`MAX_PIECES`] tensors joined along one axis
/// or cut from one tensor, the joined tensor viewed as `[outer, row]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PiecesMeta {
    pub ptrs: [u64; MAX_PIECES],
    pub offs: [i64; MAX_PIECES + 1],
    pub outer: i64,
    pub row: i64,
    pub col0: i64,
    pub n: i32,
    pub wide: i32,
}

// SAFETY: plain `#[repr(C)]` data of integers, laid out as the CUDA struct.
unsafe impl DeviceRepr for PiecesMeta {}

/// Tile edge of the tiled transpose (`OXI_TILE` in `kernels/shape.cu`).
pub const TILE: usize = 32;
/// Smallest `rows` and `cols` for which a transpose of the last two axes takes the tiled
/// kernel; thinner matrices go through the strided gather.
pub const TILED_MIN: usize = 8;

/// `SwapMeta` of `kernels/shape.cu`: `x [batch, rows, cols] -> y [batch, cols, rows]` by
/// 32 x 32 tiles (`transpose_{dtype}_tiled`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwapMeta {
    pub batch: i64,
    pub rows: i64,
    pub cols: i64,
    pub tiles_r: i64,
    pub tiles_c: i64,
    pub wide: i32,
    pub _pad: i32,
}

// SAFETY: plain `#[repr(C)]` data of integers, laid out as the CUDA struct.
unsafe impl DeviceRepr for SwapMeta {}

/// The tiled form of a merged transpose `m` when it swaps the last two axes of a
/// `[batch, rows, cols]` tensor (out axes `[cols, rows]` with strides `[1, cols]`, after an
/// optional batch axis of stride `rows * cols`) and both are at least [`TILED_MIN`].
pub fn as_swap(m: &MapMeta) -> Option<SwapMeta> {
    let (d, s) = (&m.out_dims, &m.in_strides);
    let (batch, cols, rows) = match m.rank {
        2 if s[0] == 1 && s[1] == d[0] => (1, d[0], d[1]),
        3 if s[1] == 1 && s[2] == d[1] && s[0] == d[1] * d[2] => (d[0], d[1], d[2]),
        _ => return None,
    };
    if m.base != 0 || rows < TILED_MIN as i64 || cols < TILED_MIN as i64 {
        return None;
    }
    let t = TILE as i64;
    Some(SwapMeta { batch, rows, cols, tiles_r: (rows + t - 1) / t, tiles_c: (cols + t - 1) / t, wide: m.wide, _pad: 0 })
}

// ---------------------------------------------------------------- shared helpers

/// `1` when an element count needs 64-bit index arithmetic in the kernels.
/// ([`Meta::force_wide`] sets it regardless, for tests of the 64-bit path.)
pub(crate) fn wide(n: usize) -> i32 {
    (n > i32::MAX as usize) as i32
}

/// Launch configuration for `total` elements: [`BLOCK`] threads, up to `max_grid` blocks.
pub(crate) fn grid(total: usize, max_grid: u32) -> LaunchConfig {
    let blocks = total.div_ceil(BLOCK as usize).clamp(1, max_grid as usize) as u32;
    LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (BLOCK, 1, 1), shared_mem_bytes: 0 }
}

/// Launch configuration of the tiled transpose over `tiles` tiles: 32 x 8 threads, one
/// tile per block, up to `max_grid` blocks.
pub(crate) fn tile_grid(tiles: usize, max_grid: u32) -> LaunchConfig {
    let blocks = tiles.clamp(1, max_grid as usize) as u32;
    LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (TILE as u32, 8, 1), shared_mem_bytes: 0 }
}

/// Row-major element strides of `dims`.
pub(crate) fn strides(dims: &[usize]) -> Vec<i64> {
    let mut s = vec![1i64; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1] as i64;
    }
    s
}

/// An error naming the node, for attrs the shape function should already have rejected.
pub(crate) fn invalid(node: &Node, msg: impl std::fmt::Display) -> CudaError {
    CudaError::Unsupported(format!("{} '{}': {msg}", node.op.name, node.name))
}

/// Errors unless `rank` fits the kernels' metadata.
pub(crate) fn check_rank(node: &Node, rank: usize) -> CudaResult<()> {
    if rank > MAX_RANK {
        return Err(invalid(node, format!("rank {rank} exceeds the CUDA kernels' maximum of {MAX_RANK}")));
    }
    Ok(())
}

/// The dtype of `arg`, or [`CudaError::Unsupported`] when the op has no kernel for it.
pub(crate) fn dtype_in(node: &Node, arg: &DevArg, allowed: &[DType]) -> CudaResult<DType> {
    if allowed.contains(&arg.dtype) {
        Ok(arg.dtype)
    } else {
        Err(CudaError::Unsupported(format!("{} '{}': no CUDA kernel for dtype {}", node.op.name, node.name, arg.dtype)))
    }
}

/// Errors unless the node has `n` inputs and `m` outputs as given.
pub(crate) fn arity(node: &Node, inputs: &[DevArg], outputs: &[DevArg], n: usize, m: usize) -> CudaResult<()> {
    if inputs.len() != n || outputs.len() != m {
        return Err(invalid(node, format!("launcher expects {n} inputs and {m} outputs, got {} and {}", inputs.len(), outputs.len())));
    }
    Ok(())
}

/// An int attr, or `default` when absent (the CPU kernels' `int_or`).
pub(crate) fn int_or(node: &Node, k: &str, default: i64) -> CudaResult<i64> {
    if node.attrs.contains_key(k) {
        node.attrs.get_int(node.op.name, k).map_err(|e| invalid(node, e))
    } else {
        Ok(default)
    }
}

/// An int attr (the CPU kernels' `get_int`).
pub(crate) fn int(node: &Node, k: &str) -> CudaResult<i64> {
    node.attrs.get_int(node.op.name, k).map_err(|e| invalid(node, e))
}

/// An int-list attr.
pub(crate) fn ints(node: &Node, k: &str) -> CudaResult<Vec<i64>> {
    node.attrs.get_ints(node.op.name, k).map_err(|e| invalid(node, e))
}

/// `axis` taken modulo `rank` as the CPU kernels do (`(a + r) % r`), checked.
pub(crate) fn axis_mod(node: &Node, a: i64, rank: usize) -> CudaResult<usize> {
    let r = rank.max(1) as i64;
    if !(-r..r).contains(&a) {
        return Err(invalid(node, format!("axis {a} is out of range for rank {rank}")));
    }
    Ok(((a + r) % r) as usize)
}

/// The kernel step `{node.op}_{dtype}` over `total` elements, or none when `total` is 0.
pub(crate) fn kernel(node: &Node, dtype: DType, total: usize, meta: Meta, ptrs: &[u64]) -> Vec<Step> {
    if total == 0 {
        return Vec::new();
    }
    vec![Step::Kernel { entry: entry_name(node.op.name, dtype), total, meta, ptrs: ptrs.to_vec() }]
}

/// A strided-map step (`MapMeta`, input pointer, output pointer).
pub(crate) fn map_step(node: &Node, dtype: DType, m: MapMeta, x: &DevArg, y: &DevArg) -> CudaResult<Vec<Step>> {
    Ok(kernel(node, dtype, m.total as usize, Meta::Map(m), &[x.ptr, y.ptr]))
}

/// The `MapMeta` of a strided gather `y[c] = x[base + sum_d c_d * stride_d]` over output
/// axes `(size, stride)`, simplified first: axes of size 1 are dropped and neighbours that
/// walk memory as one axis (`stride_d == stride_{d+1} * size_{d+1}`) are merged, so fewer
/// divisions run per element and inputs of rank above [`MAX_RANK`] often still fit.
pub fn gather_meta(node: &Node, axes: &[(usize, i64)], base: i64, in_len: usize) -> CudaResult<MapMeta> {
    let total: usize = axes.iter().map(|a| a.0).product();
    let mut merged: Vec<(usize, i64)> = Vec::with_capacity(axes.len());
    if total > 0 {
        for &(n, st) in axes.iter().filter(|a| a.0 != 1) {
            match merged.last_mut() {
                Some(last) if last.1 == st * n as i64 => *last = (last.0 * n, st),
                _ => merged.push((n, st)),
            }
        }
    }
    check_rank(node, merged.len())?;
    let dims: Vec<usize> = merged.iter().map(|a| a.0).collect();
    let mut m = MapMeta::new(&dims, in_len);
    m.total = total as i64;
    m.wide = wide(total.max(in_len));
    for (d, a) in merged.iter().enumerate() {
        m.in_strides[d] = a.1;
    }
    m.base = base;
    Ok(m)
}
