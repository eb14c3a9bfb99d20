//! The crate's error type, converted into the core's [`OxiflowError`] at the device
//! boundary so that users see one kind of error (candle's habit: one `thiserror` enum whose
//! variants carry the device and op).

use oxiflow_core::OxiflowError;

/// Errors of the CUDA layer.
#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    /// No usable CUDA driver library (`libcuda.so.1`); the text says what was tried.
    #[error("no CUDA driver: {0}")]
    NoDriver(String),
    /// A CUDA driver call failed (`CUresult` name and text), naming the device and the call.
    #[error("CUDA error on {device} in {call}: {msg}")]
    Driver {
        /// Full device name (or `GPU:<ordinal>` before a session device exists).
        device: String,
        /// The driver call, e.g. `cuMemAlloc`.
        call: String,
        /// The `CUresult` as cudarc prints it.
        msg: String,
    },
    /// An NCCL call failed (`ncclResult_t` and NCCL's text), naming the device and the call.
    #[error("NCCL error on {device} in {call}: {msg}")]
    Nccl {
        /// Full device name.
        device: String,
        /// The NCCL call, e.g. `ncclAllReduce`.
        call: String,
        /// The result code and `ncclGetErrorString`'s text.
        msg: String,
    },
    /// NVRTC could not compile a kernel file; `log` is NVRTC's program log.
    #[error("NVRTC failed to compile kernels/{file} for {arch}: {log}")]
    Nvrtc {
        /// File name under `kernels/`.
        file: String,
        /// Target architecture, e.g. `compute_90`.
        arch: String,
        /// NVRTC's program log (or why NVRTC could not be loaded).
        log: String,
    },
    /// An allocation over the device's limit (TF's `OOM when allocating ...`).
    #[error("OOM when allocating {requested} bytes on {device}: {in_use} bytes in use, limit {limit} bytes")]
    OutOfMemory {
        /// Full device name.
        device: String,
        /// Bytes asked for.
        requested: u64,
        /// Bytes in live blocks when it failed.
        in_use: u64,
        /// The allocator's limit in bytes.
        limit: u64,
    },
    /// The device refused an allocation within the limit: it has no room left
    /// (`CUDA_ERROR_OUT_OF_MEMORY` from `cuMemAlloc`); `msg` says what holds the memory.
    #[error("OOM when allocating {requested} bytes on {device}: {msg}")]
    DeviceFull {
        /// Full device name.
        device: String,
        /// Bytes asked for (the request, not the region tried).
        requested: u64,
        /// What holds the memory and what to change.
        msg: String,
    },
    /// The op or dtype has no CUDA kernel, or a request the device cannot serve.
    #[error("{0}")]
    Unsupported(String),
}

/// `Result` with [`CudaError`].
pub type CudaResult<T> = std::result::Result<T, CudaError>;

impl From<CudaError> for OxiflowError {
    fn from(e: CudaError) -> OxiflowError {
        match e {
            CudaError::OutOfMemory { device, requested, in_use, limit } => {
                OxiflowError::ResourceExhausted { device, requested: requested as usize, in_use: in_use as usize, limit: limit as usize, what: String::new() }
            }
            CudaError::DeviceFull { device, requested, msg } => OxiflowError::DeviceMemoryFull { device, requested: requested as usize, msg },
            CudaError::Unsupported(m) => OxiflowError::Unimplemented(m),
            CudaError::NoDriver(m) => OxiflowError::FailedPrecondition(format!("no CUDA driver: {m}")),
            other => OxiflowError::Internal(other.to_string()),
        }
    }
}
