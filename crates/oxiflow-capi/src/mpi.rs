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
