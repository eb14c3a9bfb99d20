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
    Driver { device: String, call: String, msg: String },
    /// NVRTC could not compile a kernel file; `log` is NVRTC's program log.
    #[error("NVRTC failed to compile kernels/{file} for {arch}: {log}")]
    Nvrtc { file: String, arch: String, log: String },
    /// An allocation over the device's limit (TF's `OOM when allocating ...`).
    #[error("OOM when allocating {requested} bytes on {device}: {in_use} bytes in use, limit {limit} bytes")]
    OutOfMemory { device: String, requested: u64, in_use: u64, limit: u64 },
    /// The op or dtype has no CUDA kernel, or a request the device cannot serve.
    #[error("{0}")]
    Unsupported(String),
}

/// `Result` with [`CudaError`].
pub type CudaResult<T> = std::result::Result<T, CudaError>;

impl From<CudaError> for OxiflowError {
    fn from(e: CudaError) -> OxiflowError {
        match e {
            CudaError::OutOfMemory { device, requested, in_use, limit } => OxiflowError::ResourceExhausted {
                device,
                requested: requested as usize,
                in_use: in_use as usize,
                limit: limit as usize,
            },
            CudaError::Unsupported(m) => OxiflowError::Unimplemented(m),
            CudaError::NoDriver(m) => OxiflowError::FailedPrecondition(format!("no CUDA driver: {m}")),
            other => OxiflowError::Internal(other.to_string()),
        }
    }
}
