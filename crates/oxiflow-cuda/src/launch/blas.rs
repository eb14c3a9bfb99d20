//! `MatMul` and `BatchMatMulV2` through cuBLAS (`cublas{S,D}gemm`,
//! `cublas{S,D}gemmStridedBatched`), on the handle [`LaunchCtx::blas`] bound to the
//! compute stream.
//!
//! Tensors are row-major; cuBLAS is column-major. A row-major `[r, c]` matrix is, read
//! column-major, its transpose (`c x r`, leading dimension `c`). So `C = op(A) op(B)`
//! (`[m, n]`) is computed as `C^T = op(B)^T op(A)^T`: cuBLAS's "A" is our B (transposed
//! when `transpose_b`/`adj_y`), its "B" is our A, and its `m, n` are our `n, m`.
//! Attrs as the CPU kernels: `transpose_a`/`transpose_b` (matmul.rs) and `adj_x`/`adj_y`
//! (linalg.rs), default false (real types: adjoint = transpose).
//!
//! `BatchMatMulV2` broadcasts batch axes: an operand whose batch equals the output's is
//! strided by its matrix size, a single matrix gets stride 0, and any other broadcast is
//! materialized in scratch memory with `broadcast_to_{dtype}` first. An empty inner
//! dimension (`k == 0`) gives zeros, as on the CPU.

use super::compute::{expect_io, launch_broadcast, node_error};
use super::{DevArg, LaunchCtx};
use crate::error::{CudaError, CudaResult};
use cudarc::cublas::sys::cublasOperation_t as Op;
use oxiflow_core::graph::Node;
use oxiflow_core::ops::AttrsExt;
use oxiflow_core::DType;
use std::os::raw::{c_int, c_longlong};

/// One strided-batched product in cuBLAS's terms (column-major).
struct Gemm {
    transa: Op,
    transb: Op,
    m: c_int,
    n: c_int,
    k: c_int,
    a: u64,
    lda: c_int,
    stride_a: c_longlong,
    b: u64,
    ldb: c_int,
    stride_b: c_longlong,
    c: u64,
    ldc: c_int,
    stride_c: c_longlong,
    batch: c_int,
}

fn to_int(node: &Node, v: usize, what: &str) -> CudaResult<c_int> {
    c_int::try_from(v).map_err(|_| node_error(node, format!("{what} = {v} exceeds cuBLAS's 32-bit sizes")))
}

fn blas_error(ctx: &LaunchCtx, node: &Node, call: &str, e: cudarc::cublas::result::CublasError) -> CudaError {
    CudaError::Driver { device: ctx.device.to_string(), call: format!("{call} for {} '{}'", node.op.name, node.name), msg: format!("{e:?}") }
}

/// Zeros `out` (the product over an empty inner dimension).
fn zero_fill(ctx: &LaunchCtx, node: &Node, out: &DevArg) -> CudaResult<()> {
    if out.num_bytes() == 0 {
        return Ok(());
    }
    // SAFETY: `out` is a live device buffer of `num_bytes()` bytes; enqueued on the stream.
    unsafe { cudarc::driver::result::memset_d8_async(out.ptr, 0, out.num_bytes(), ctx.stream.cu_stream()) }.map_err(|e| CudaError::Driver {
        device: ctx.device.to_string(),
        call: format!("cuMemsetD8Async for {} '{}'", node.op.name, node.name),
        msg: format!("{e:?}"),
    })
}

fn run(ctx: &LaunchCtx, node: &Node, dtype: DType, g: &Gemm) -> CudaResult<()> {
    let Some(blas) = ctx.blas else {
        return Err(CudaError::Unsupported(format!(
            "{} '{}' needs cuBLAS on {}, which could not be loaded ({:?})",
            node.op.name,
            node.name,
            ctx.device,
            crate::probe::cublas_status()
        )));
    };
    let h = *blas.handle();
    use cudarc::cublas::result as r;
    // SAFETY: the pointers are live device buffers holding `batch` matrices of the sizes and
    // leading dimensions given (computed from the DevArgs' dims below); alpha/beta are host
    // scalars (cuBLAS's default host pointer mode); the handle is bound to the stream.
    let res = unsafe {
        match dtype {
            DType::Float32 => {
                let (alpha, beta) = (1.0f32, 0.0f32);
                if g.batch == 1 {
                    r::sgemm(h, g.transa, g.transb, g.m, g.n, g.k, &alpha, g.a as *const f32, g.lda, g.b as *const f32, g.ldb, &beta, g.c as *mut f32, g.ldc)
                } else {
                    r::sgemm_strided_batched(
                        h,
                        g.transa,
                        g.transb,
                        g.m,
                        g.n,
                        g.k,
                        &alpha,
                        g.a as *const f32,
                        g.lda,
                        g.stride_a,
                        g.b as *const f32,
                        g.ldb,
                        g.stride_b,
                        &beta,
                        g.c as *mut f32,
                        g.ldc,
                        g.stride_c,
                        g.batch,
                    )
                }
            }
            DType::Float64 => {
                let (alpha, beta) = (1.0f64, 0.0f64);
                if g.batch == 1 {
                    r::dgemm(h, g.transa, g.transb, g.m, g.n, g.k, &alpha, g.a as *const f64, g.lda, g.b as *const f64, g.ldb, &beta, g.c as *mut f64, g.ldc)
                } else {
                    r::dgemm_strided_batched(
                        h,
                        g.transa,
                        g.transb,
                        g.m,
                        g.n,
                        g.k,
                        &alpha,
                        g.a as *const f64,
                        g.lda,
                        g.stride_a,
                        g.b as *const f64,
                        g.ldb,
                        g.stride_b,
                        &beta,
                        g.c as *mut f64,
                        g.ldc,
                        g.stride_c,
                        g.batch,
                    )
                }
            }
            d => return Err(node_error(node, format!("no cuBLAS product for dtype {d}"))),
        }
    };
    let call = match (dtype, g.batch == 1) {
        (DType::Float32, true) => "cublasSgemm",
        (DType::Float32, false) => "cublasSgemmStridedBatched",
        (_, true) => "cublasDgemm",
        (_, false) => "cublasDgemmStridedBatched",
    };
    res.map_err(|e| blas_error(ctx, node, call, e))
}

/// The launcher of a cuBLAS op (`GpuLaunch::CuBlas`), by op type.
pub(crate) fn launcher(op: &str) -> Option<super::Launcher> {
    Some(match op {
        "MatMul" => mat_mul,
        "BatchMatMulV2" => batch_mat_mul_v2,
        _ => return None,
    })
}

/// `MatMul(a, b)` with `transpose_a`, `transpose_b`: rank-2 operands, `[m, n]` output.
pub(crate) fn mat_mul(ctx: &LaunchCtx, node: &Node, inputs: &[DevArg], outputs: &[DevArg]) -> CudaResult<()> {
    expect_io(node, inputs, outputs, 2, 1)?;
    let (a, b, c) = (&inputs[0], &inputs[1], &outputs[0]);
    let ta = node.attrs.get_bool_or(node.op.name, "transpose_a", false).unwrap_or(false);
    let tb = node.attrs.get_bool_or(node.op.name, "transpose_b", false).unwrap_or(false);
    if a.dims.len() != 2 || b.dims.len() != 2 || a.dtype != b.dtype {
        return Err(node_error(node, format!("needs two rank-2 operands of one dtype, got {:?} {} and {:?} {}", a.dims, a.dtype, b.dims, b.dtype)));
    }
    let (m, k) = if ta { (a.dims[1], a.dims[0]) } else { (a.dims[0], a.dims[1]) };
    let (k2, n) = if tb { (b.dims[1], b.dims[0]) } else { (b.dims[0], b.dims[1]) };
    if k != k2 || c.dims != [m, n] {
        return Err(node_error(node, format!("incompatible shapes {:?} and {:?} -> {:?} (transpose_a={ta}, transpose_b={tb})", a.dims, b.dims, c.dims)));
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        return zero_fill(ctx, node, c);
    }
    let g = Gemm {
        transa: if tb { Op::CUBLAS_OP_T } else { Op::CUBLAS_OP_N },
        transb: if ta { Op::CUBLAS_OP_T } else { Op::CUBLAS_OP_N },
        m: to_int(node, n, "n")?,
        n: to_int(node, m, "m")?,
        k: to_int(node, k, "k")?,
        a: b.ptr,
        lda: to_int(node, b.dims[1], "ldb")?,
        stride_a: 0,
        b: a.ptr,
        ldb: to_int(node, a.dims[1], "lda")?,
        stride_b: 0,
        c: c.ptr,
        ldc: to_int(node, n, "n")?,
        stride_c: 0,
        batch: 1,
    };
    run(ctx, node, a.dtype, &g)
}

/// An operand's batched view: its device address and the stride between its matrices,
/// broadcast into `scratch` when neither its own batch nor a single matrix serves.
fn batched_operand<'a>(
    ctx: &LaunchCtx<'a>,
    node: &Node,
    x: &DevArg,
    batch: &[usize],
    keep: &mut Vec<Box<dyn super::Scratch + 'a>>,
) -> CudaResult<(u64, c_longlong)> {
    let r = x.dims.len();
    let (rows, cols) = (x.dims[r - 2], x.dims[r - 1]);
    let xb = &x.dims[..r - 2];
    let mat = (rows * cols) as c_longlong;
    let nb: usize = batch.iter().product();
    // Same batch (after left-padding with 1s): consecutive matrices.
    let padded_equal = xb.len() <= batch.len() && {
        let lead = batch.len() - xb.len();
        batch[..lead].iter().all(|&d| d == 1) && &batch[lead..] == xb
    };
    if padded_equal {
        return Ok((x.ptr, mat));
    }
    if xb.iter().product::<usize>() == 1 {
        return Ok((x.ptr, 0));
    }
    let mut dims = batch.to_vec();
    dims.extend([rows, cols]);
    let bytes = nb * rows * cols * x.dtype.size_of();
    let s = (ctx.scratch)(bytes)?;
    let full = DevArg { ptr: s.ptr(), dtype: x.dtype, dims };
    launch_broadcast(ctx, node, x, &full)?;
    keep.push(s);
    Ok((full.ptr, mat))
}

/// `BatchMatMulV2(x [..., r0, c0], y [..., r1, c1])` with `adj_x`, `adj_y`; batch axes
/// broadcast; output `[batch..., m, n]`.
pub(crate) fn batch_mat_mul_v2(ctx: &LaunchCtx, node: &Node, inputs: &[DevArg], outputs: &[DevArg]) -> CudaResult<()> {
    expect_io(node, inputs, outputs, 2, 1)?;
    let (x, y, out) = (&inputs[0], &inputs[1], &outputs[0]);
    let ax = node.attrs.get_bool_or(node.op.name, "adj_x", false).unwrap_or(false);
    let ay = node.attrs.get_bool_or(node.op.name, "adj_y", false).unwrap_or(false);
    if x.dims.len() < 2 || y.dims.len() < 2 || out.dims.len() < 2 || x.dtype != y.dtype {
        return Err(node_error(node, format!("needs operands of rank >= 2 and one dtype, got {:?} {} and {:?} {}", x.dims, x.dtype, y.dims, y.dtype)));
    }
    let (rx, ry, ro) = (x.dims.len(), y.dims.len(), out.dims.len());
    let (r0, c0, r1, c1) = (x.dims[rx - 2], x.dims[rx - 1], y.dims[ry - 2], y.dims[ry - 1]);
    let (m, k) = if ax { (c0, r0) } else { (r0, c0) };
    let (k2, n) = if ay { (c1, r1) } else { (r1, c1) };
    let batch = &out.dims[..ro - 2];
    if k != k2 || out.dims[ro - 2] != m || out.dims[ro - 1] != n {
        return Err(node_error(node, format!("incompatible shapes {:?} and {:?} -> {:?} (adj_x={ax}, adj_y={ay})", x.dims, y.dims, out.dims)));
    }
    let nb: usize = batch.iter().product();
    if nb == 0 || m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        return zero_fill(ctx, node, out);
    }
    let mut keep = Vec::new();
    let (xp, xs) = batched_operand(ctx, node, x, batch, &mut keep)?;
    let (yp, ys) = batched_operand(ctx, node, y, batch, &mut keep)?;
    let g = Gemm {
        transa: if ay { Op::CUBLAS_OP_T } else { Op::CUBLAS_OP_N },
        transb: if ax { Op::CUBLAS_OP_T } else { Op::CUBLAS_OP_N },
        m: to_int(node, n, "n")?,
        n: to_int(node, m, "m")?,
        k: to_int(node, k, "k")?,
        a: yp,
        lda: to_int(node, c1, "ldy")?,
        stride_a: ys,
        b: xp,
        ldb: to_int(node, c0, "ldx")?,
        stride_b: xs,
        c: out.ptr,
        ldc: to_int(node, n, "n")?,
        stride_c: (m * n) as c_longlong,
        batch: to_int(node, nb, "batch")?,
    };
    run(ctx, node, x.dtype, &g)?;
    // Scratch copies are released after the product is enqueued (stream-ordered frees).
    drop(keep);
    Ok(())
}
