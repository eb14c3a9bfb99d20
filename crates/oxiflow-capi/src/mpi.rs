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
