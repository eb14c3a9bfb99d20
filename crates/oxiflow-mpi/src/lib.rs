//! The MPI transport of Oxiflow's collectives: [`init`] starts MPI (rsmpi over the system's
//! OpenMPI, `MPI_Init_thread` with `MPI_THREAD_MULTIPLE`) and registers a
//! [`oxiflow_core::collective::Communicator`] on `MPI_COMM_WORLD`, which the collective ops
//! (`MpiAllreduce`, `MpiSum`, `MpiBcast`) call; [`finalize`] ends MPI. ADCME's `mpi_init`,
//! `mpi_finalize`, `mpi_initialized`, `mpi_finalized`, `mpi_rank`, `mpi_size`.
//!
//! Built without the `mpi` feature (no OpenMPI or libclang on the build machine), every
//! function is here and [`init`] fails with FailedPrecondition saying what to install;
//! the rest of Oxiflow does not depend on MPI.
//!
//! No silent hang: every collective is started non-blocking and polled; a peer that has
//! not joined after the timeout (`OXIFLOW_MPI_TIMEOUT` seconds, default 60; a rank that
//! runs other collectives, or hangs) makes it fail with DeadlineExceeded naming the op,
//! this rank and, from a stall census among the ranks that timed out, the ranks that never
//! joined and where the others wait (Horovod's stall inspector is the model; `census.rs`).
//! MPI cannot cancel a started collective, so its buffers are then leaked and this
//! process's MPI is unusable: end the job. A rank that dies ends the job through `mpirun`,
//! which stops the others.

#[cfg(not(feature = "mpi"))]
use oxiflow_core::error::{OxiflowError, Result};

#[cfg(feature = "mpi")]
mod census;
pub mod ps;
#[cfg(feature = "mpi")]
mod transport;
#[cfg(feature = "mpi")]
pub use transport::{finalize, init, is_finalized, is_initialized, local_rank_size, rank, size};

#[cfg(not(feature = "mpi"))]
const NOT_BUILT: &str = "this Oxiflow was built without MPI: install OpenMPI and libclang (Debian: apt-get install openmpi-bin libopenmpi-dev libclang-dev), then rebuild with `make setup build`";

/// Starts MPI (`MPI_Init_thread`, `MPI_THREAD_MULTIPLE`) and makes `MPI_COMM_WORLD` the
/// collectives' communicator. Returns `false` when MPI was already initialized by this
/// library (nothing changes). Errors: FailedPrecondition when MPI was finalized (MPI
/// cannot start twice) or this build has no MPI.
#[cfg(not(feature = "mpi"))]
pub fn init() -> Result<bool> {
    Err(OxiflowError::FailedPrecondition(NOT_BUILT.into()))
}

/// Ends MPI (`MPI_Finalize`); the collectives fail afterwards. Errors: FailedPrecondition
/// when MPI is not initialized.
#[cfg(not(feature = "mpi"))]
pub fn finalize() -> Result<()> {
    Err(OxiflowError::FailedPrecondition(NOT_BUILT.into()))
}

/// Whether [`init`] has run (and MPI is not finalized since).
#[cfg(not(feature = "mpi"))]
pub fn is_initialized() -> bool {
    false
}

/// Whether [`finalize`] has run.
#[cfg(not(feature = "mpi"))]
pub fn is_finalized() -> bool {
    false
}

/// This process's rank in `MPI_COMM_WORLD`. FailedPrecondition when MPI is not initialized.
#[cfg(not(feature = "mpi"))]
pub fn rank() -> Result<usize> {
    Err(OxiflowError::FailedPrecondition(NOT_BUILT.into()))
}

/// Number of ranks of `MPI_COMM_WORLD`. FailedPrecondition when MPI is not initialized.
#[cfg(not(feature = "mpi"))]
pub fn size() -> Result<usize> {
    Err(OxiflowError::FailedPrecondition(NOT_BUILT.into()))
}

/// This process's rank among the ranks on its host, and their number (Horovod's
/// `local_rank` and `local_size`; `MPI_Comm_split_type` with `MPI_COMM_TYPE_SHARED`,
/// computed once by [`init`]). FailedPrecondition when MPI is not initialized.
#[cfg(not(feature = "mpi"))]
pub fn local_rank_size() -> Result<(usize, usize)> {
    Err(OxiflowError::FailedPrecondition(NOT_BUILT.into()))
}

/// Whether this build has MPI (the `mpi` feature).
pub const fn built_with_mpi() -> bool {
    cfg!(feature = "mpi")
}
