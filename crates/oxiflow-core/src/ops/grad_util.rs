//! Helpers shared by the gradient functions of the op families (`math.rs`, `nn.rs`,
//! `reduce.rs`, `linalg.rs`, ...).

use crate::error::Result;
use crate::graph::{Graph, Node, Output};

/// The gradient of output 0, or `None` for every one of `n` inputs.
macro_rules! need_dy {
    ($grads:expr, $n:expr) => {
        match $grads[0] {
            Some(dy) => dy,
            None => return Ok(vec![None; $n]),
        }
    };
}
pub(crate) use need_dy;

/// Forward output 0 of `node`.
pub(crate) fn y0(node: &Node) -> Output {
    Output::new(node.id, 0)
}

/// A scalar of `like`'s dtype.
pub(crate) fn scalar_of(g: &mut Graph, like: Output, v: f64) -> Result<Output> {
    let d = g.dtype_of(like)?;
    g.scalar(d, v)
}

/// `dy` summed to the shape of `node`'s input `i` (for broadcasting binaries): static when
/// that shape is fully defined, decided at run time otherwise
/// ([`super::dynamic_shape::sum_to_like`]).
pub(crate) fn to_input_shape(g: &mut Graph, node: &Node, dy: Output, i: usize) -> Result<Output> {
    super::dynamic_shape::sum_to_like(g, dy, node.inputs[i])
}
