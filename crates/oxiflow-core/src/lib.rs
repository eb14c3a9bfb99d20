//! # oxiflow-core
//!
//! The engine of Oxiflow: a TensorFlow-1.x-style dataflow graph ([`graph::Graph`]) with an
//! op registry ([`ops`]), static shape inference, device specs and scopes
//! ([`device::spec`]), a TF-compatible placer, reverse-mode autodiff, a session whose
//! executor runs nodes on a thread pool across devices, and a profiler that writes TF's
//! Chrome-trace timeline. See docs/architecture.md for the layers; the Julia package reaches this
//! crate only through `oxiflow-capi`.

pub mod autodiff;
pub mod builder;
pub mod checkpointing;
pub mod collective;
pub mod device;
pub mod dtype;
pub mod error;
pub mod eval;
pub mod executor;
pub mod explain;
pub mod function;
pub mod fusion;
mod fusion_matmul;
pub mod graph;
pub mod graphviz;
pub mod host_alloc;
pub mod intra_op;
pub mod lbfgs;
pub mod ops;
pub mod placer;
pub mod profile;
pub mod session;
pub mod shape;
pub mod strided;
pub mod tensor;
pub mod timeline;
mod transpose_block;
pub mod variable_store;

pub use device::spec::DeviceSpec;
pub use dtype::DType;
pub use error::{OxiflowError, Result};
pub use graph::{Graph, NodeId, NodeSpec, Output};
pub use session::{RunOutputs, Session, SessionOptions};
pub use shape::Shape;
pub use tensor::{Layout, Tensor};
