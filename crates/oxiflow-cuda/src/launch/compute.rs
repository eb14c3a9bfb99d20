//! Launchers of the compute kernels (elementwise, broadcasting binary ops, reductions,
//! training updates, random numbers, cuBLAS MatMul). Filled in by the kernels work.

use super::Launcher;

/// The launcher of `op`, if it is one of this family's.
pub fn launcher(_op: &str) -> Option<Launcher> {
    None
}
