//! The one error type of the engine.
//!
//! Every variant names what went wrong in the user's terms: the node, the op, the device,
//! the shapes. [`OxiflowError::code`] maps each variant to a TensorFlow status code
//! (`error_codes.proto`), which the C ABI passes to Julia along with the message.

use crate::dtype::DType;
use crate::shape::Shape;

/// Result alias used throughout the engine.
pub type Result<T, E = OxiflowError> = std::result::Result<T, E>;

/// An engine error. Messages follow TensorFlow's texts where TF has one (placer, feeds,
/// uninitialized variables), so that users can search for them.
#[derive(Debug, Clone, thiserror::Error)]
pub enum OxiflowError {
    /// A device string that does not parse (TF: `Malformed device specification`).
    #[error("Malformed device specification '{spec}': {reason}")]
    MalformedDevice { spec: String, reason: String },

    /// Operand shapes that do not fit the op, found when the node is built.
    #[error("{op} '{node}': incompatible shapes {lhs} and {rhs}{detail}")]
    ShapeMismatch { op: String, node: String, lhs: Shape, rhs: Shape, detail: String },

    /// Operand dtypes that do not fit the op, found when the node is built.
    #[error("{op} '{node}': expected dtype {expected}, got {got}{detail}")]
    DTypeMismatch { op: String, node: String, expected: DType, got: DType, detail: String },

    /// The placer could not find a device (TF: `Cannot assign a device for operation ...`).
    #[error("Cannot assign a device for operation {node}: {msg}")]
    Placement { node: String, msg: String },

    /// A user device function failed or returned something that is not a device string.
    #[error("device function failed for operation {node} ({op}): {msg}")]
    DeviceFunction { node: String, op: String, msg: String },

    /// A fed value that does not match the tensor it replaces.
    #[error("Cannot feed value of {what} for Tensor '{tensor}', which has {expected}")]
    Feed { tensor: String, what: String, expected: String },

    /// A variable read before `init` (TF's FailedPrecondition text).
    #[error("Attempting to use uninitialized value {variable}\n\t [[{{{{node {node}}}}}]]")]
    Uninitialized { variable: String, node: String },

    /// An allocation over a device's memory limit. `what` names the tensor when the
    /// executor knows it (` for BroadcastTo 'b' (shape[1099511627776] and type Float64)`), else is
    /// empty.
    #[error("OOM when allocating {requested} bytes on {device}{what}: {in_use} bytes in use, limit {limit} bytes")]
    ResourceExhausted { device: String, requested: usize, in_use: usize, limit: usize, what: String },

    /// A device allocation within the limit that the device itself refused because it has
    /// no room left (other allocators or processes hold its memory; the CUDA driver's
    /// `CUDA_ERROR_OUT_OF_MEMORY`). `msg` says what holds it and what to change.
    #[error("OOM when allocating {requested} bytes on {device}: {msg}")]
    DeviceMemoryFull { device: String, requested: usize, msg: String },

    /// An output a kernel would allocate in host memory that the host cannot give (TF's
    /// `OOM when allocating tensor with shape[...] and type ... on ...`), found before the
    /// kernel runs; `bytes` is `None` when the size overflows.
    #[error(
        "OOM when allocating tensor with shape{shape} and type {dtype} on {device}: {} for {op} '{node}'",
        bytes.map_or_else(|| "its size overflows".to_string(), |b| format!("{b} bytes could not be allocated"))
    )]
    OutOfMemory { op: String, node: String, shape: String, dtype: String, device: String, bytes: Option<usize> },

    /// Bad argument not covered above; the message names the op or node.
    #[error("{0}")]
    InvalidArgument(String),

    /// A name (node, tensor, device, op type) that does not exist.
    #[error("{0}")]
    NotFound(String),

    /// Something that needs to have happened first did not (e.g. a profile before `run_profile`).
    #[error("{0}")]
    FailedPrecondition(String),

    /// An operation that did not complete in time (a collective whose peers did not join:
    /// TF's `DeadlineExceededError`).
    #[error("{0}")]
    DeadlineExceeded(String),

    /// A feature this build does not have yet; the message says which.
    #[error("{0}")]
    Unimplemented(String),

    /// A bug in Oxiflow (a kernel panicked, an invariant broke).
    #[error("internal error: {0}")]
    Internal(String),
}

impl OxiflowError {
    /// TensorFlow status code of this error (`INVALID_ARGUMENT = 3`, `DEADLINE_EXCEEDED = 4`, `NOT_FOUND = 5`,
    /// `RESOURCE_EXHAUSTED = 8`, `FAILED_PRECONDITION = 9`, `UNIMPLEMENTED = 12`, `INTERNAL = 13`).
    pub fn code(&self) -> i32 {
        use OxiflowError::*;
        match self {
            MalformedDevice { .. }
            | ShapeMismatch { .. }
            | DTypeMismatch { .. }
            | Placement { .. }
            | DeviceFunction { .. }
            | Feed { .. }
            | InvalidArgument(_) => 3,
            DeadlineExceeded(_) => 4,
            NotFound(_) => 5,
            ResourceExhausted { .. } | DeviceMemoryFull { .. } | OutOfMemory { .. } => 8,
            Uninitialized { .. } | FailedPrecondition(_) => 9,
            Unimplemented(_) => 12,
            Internal(_) => 13,
        }
    }

    /// TF's name for [`OxiflowError::code`] (`InvalidArgumentError`, ...), for messages.
    pub fn kind(&self) -> &'static str {
        match self.code() {
            3 => "InvalidArgumentError",
            4 => "DeadlineExceededError",
            5 => "NotFoundError",
            8 => "ResourceExhaustedError",
            9 => "FailedPreconditionError",
            12 => "UnimplementedError",
            _ => "InternalError",
        }
    }
}

/// Shorthand for `Err(OxiflowError::InvalidArgument(format!(...)))`.
#[macro_export]
macro_rules! invalid {
    ($($arg:tt)*) => { Err($crate::error::OxiflowError::InvalidArgument(format!($($arg)*))) };
}
