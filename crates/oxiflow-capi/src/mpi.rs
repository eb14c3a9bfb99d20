//! ADCME's MPI lifetime and queries: `mpi_init`, `mpi_finalize`, `mpi_initialized`,
//! `mpi_finalized`, `mpi_rank`, `mpi_size` (`oxiflow-mpi`). The collectives themselves are
//! graph ops (`MpiAllreduce`, `MpiSum`, `MpiBcast`), built with `oxf_add_op`.

use crate::{guard, put};

/// Starts MPI (`MPI_Init_thread` with `MPI_THREAD_MULTIPLE`) and registers
/// `MPI_COMM_WORLD` for the collective ops; `*started` is 1, or 0 when MPI was running
/// already. Status 9 (FailedPrecondition) when MPI was finalized or this library was built
/// without MPI (the message says what to install).
#[no_mangle]
pub extern "C" fn oxf_mpi_init(started: *mut i32) -> i32 {
    guard(|| put(started, oxiflow_mpi::init()? as i32))
}

/// Ends MPI (`MPI_Finalize`). Status 9 when MPI is not running.
#[no_mangle]
pub extern "C" fn oxf_mpi_finalize() -> i32 {
    guard(oxiflow_mpi::finalize)
}

/// `*out`: bit 0 set when MPI is running, bit 1 when it was finalized, bit 2 when this
/// library was built with MPI.
#[no_mangle]
pub extern "C" fn oxf_mpi_state(out: *mut i32) -> i32 {
    guard(|| {
        let bits = oxiflow_mpi::is_initialized() as i32 | (oxiflow_mpi::is_finalized() as i32) << 1 | (oxiflow_mpi::built_with_mpi() as i32) << 2;
        put(out, bits)
    })
}

/// This process's rank and the number of ranks of `MPI_COMM_WORLD`. Status 9 when MPI is
/// not running.
#[no_mangle]
pub extern "C" fn oxf_mpi_rank_size(rank: *mut i64, size: *mut i64) -> i32 {
    guard(|| {
        put(rank, oxiflow_mpi::rank()? as i64)?;
        put(size, oxiflow_mpi::size()? as i64)
    })
}

/// This process's rank among the ranks on its host and their number (Horovod's
/// `local_rank`, `local_size`). Status 9 when MPI is not running.
#[no_mangle]
pub extern "C" fn oxf_mpi_local_rank_size(rank: *mut i64, size: *mut i64) -> i32 {
    guard(|| {
        let (r, n) = oxiflow_mpi::local_rank_size()?;
        put(rank, r as i64)?;
        put(size, n as i64)
    })
}

/// ADCME's `mpi_barrier`: returns once every rank has called it (`MPI_Barrier`, polled
/// with the collectives' timeout). Status 9 when MPI is not running, 4 (DeadlineExceeded)
/// when a rank does not arrive in time.
#[no_mangle]
pub extern "C" fn oxf_mpi_barrier() -> i32 {
    guard(|| oxiflow_core::collective::communicator("mpi_barrier")?.barrier("mpi_barrier"))
}

/// ADCME's `mpi_sync!`: copies rank `root`'s `n` elements at `data` into every rank's
/// `data` (`MPI_Bcast`), `dtype` the code of Float64 or Int64 (as `oxf_const` takes). Status 3 for
/// another dtype or a root that is not a rank, 9 when MPI is not running.
#[no_mangle]
pub extern "C" fn oxf_mpi_sync(data: *mut std::ffi::c_void, n: i64, dtype: i32, root: i64) -> i32 {
    use oxiflow_core::collective::HostBuf;
    use oxiflow_core::OxiflowError;
    guard(|| {
        let comm = oxiflow_core::collective::communicator("mpi_sync!")?;
        let root = usize::try_from(root)
            .ok()
            .filter(|&r| r < comm.size())
            .ok_or_else(|| OxiflowError::InvalidArgument(format!("mpi_sync!: root {root} is not a rank of this job (ranks 0 to {})", comm.size() - 1)))?;
        let len = usize::try_from(n).map_err(|_| OxiflowError::InvalidArgument(format!("mpi_sync!: negative length {n}")))?;
        if len > 0 && data.is_null() {
            return Err(OxiflowError::InvalidArgument("mpi_sync!: data is null".into()));
        }
        let buf = match oxiflow_core::DType::from_code(dtype) {
            // SAFETY: the caller passes `n` writable elements of the dtype at `data`.
            Some(oxiflow_core::DType::Float64) if len > 0 => HostBuf::F64(unsafe { std::slice::from_raw_parts_mut(data as *mut f64, len) }),
            Some(oxiflow_core::DType::Int64) if len > 0 => HostBuf::I64(unsafe { std::slice::from_raw_parts_mut(data as *mut i64, len) }),
            Some(oxiflow_core::DType::Float64 | oxiflow_core::DType::Int64) => HostBuf::F64(&mut []),
            _ => return Err(OxiflowError::InvalidArgument(format!("mpi_sync!: dtype code {dtype}: only Float64 and Int64 vectors"))),
        };
        comm.broadcast("mpi_sync!", buf, root)
    })
}

/// Borrows `n` writable elements at `p` (an empty slice when `n == 0`).
fn slice_mut<'a>(p: *mut f64, n: i64, what: &str) -> oxiflow_core::Result<&'a mut [f64]> {
    let s = crate::slice(p as *const f64, n, what)?;
    // SAFETY: `slice` checked the pointer and length; the caller passes `n` writable
    // elements at `p` that nothing else uses during the call.
    Ok(unsafe { std::slice::from_raw_parts_mut(s.as_ptr() as *mut f64, s.len()) })
}

/// The id of a parameter server, as `oxf_ps_start` returned it.
fn ps_id(id: i64) -> oxiflow_core::Result<u64> {
    u64::try_from(id).map_err(|_| oxiflow_core::OxiflowError::InvalidArgument(format!("parameter server id {id} is negative")))
}

/// Starts an asynchronous parameter server on rank 0 (`oxiflow_mpi::ps::start`; collective:
/// every rank calls it with `n` Float64 parameters at `params`, the same `n`,
/// `learning_rate` > 0 and `momentum` in [0, 1)). Rank 0's parameters become the server's
/// and are written into every rank's `params`; `*id` receives the server's id. Status 9
/// before `oxf_mpi_init` or without MPI, 3 for bad or disagreeing arguments (on every
/// rank), 4 (DeadlineExceeded) when a rank does not join in time.
#[no_mangle]
pub extern "C" fn oxf_ps_start(params: *mut f64, n: i64, learning_rate: f64, momentum: f64, id: *mut i64) -> i32 {
    guard(|| {
        let p = slice_mut(params, n, "ParameterServer: params")?;
        put(id, oxiflow_mpi::ps::start(p, learning_rate, momentum)? as i64)
    })
}

/// Pushes this rank's gradient (`n` Float64 at `grad`, the server's length) to server `id`,
/// which applies it at once; the updated parameters go to `params` (`n_params` elements),
/// the updates applied so far to `*version`, and the push's staleness (updates by other
/// ranks since this rank last received parameters) to `*staleness`. Status 3 naming both
/// lengths when they differ from the server's (nothing sent), 9 for a closed id, 4 when
/// the server does not reply in time.
#[no_mangle]
pub extern "C" fn oxf_ps_push(id: i64, grad: *const f64, n: i64, params: *mut f64, n_params: i64, version: *mut i64, staleness: *mut i64) -> i32 {
    guard(|| {
        let g = crate::slice(grad, n, "ps_push: gradient")?;
        let p = slice_mut(params, n_params, "ps_push: params")?;
        let r = oxiflow_mpi::ps::push(ps_id(id)?, g, p)?;
        put(version, r.version as i64)?;
        put(staleness, r.staleness as i64)
    })
}

/// Copies server `id`'s parameters into `params` (`n_params` elements) and the updates
/// applied so far into `*version`. Errors as `oxf_ps_push`.
#[no_mangle]
pub extern "C" fn oxf_ps_pull(id: i64, params: *mut f64, n_params: i64, version: *mut i64) -> i32 {
    guard(|| {
        let p = slice_mut(params, n_params, "ps_pull: params")?;
        put(version, oxiflow_mpi::ps::pull(ps_id(id)?, p)?.version as i64)
    })
}

/// Closes server `id` on this rank (collective: returns once every rank closed it): the
/// final parameters go to `params` (`n_params` elements), the total number of updates to
/// `*version`. The id is invalid afterwards. Status 4 when a rank does not close in time.
#[no_mangle]
pub extern "C" fn oxf_ps_close(id: i64, params: *mut f64, n_params: i64, version: *mut i64) -> i32 {
    guard(|| {
        let p = slice_mut(params, n_params, "close(ParameterServer): params")?;
        put(version, oxiflow_mpi::ps::close(ps_id(id)?, p)?.version as i64)
    })
}
