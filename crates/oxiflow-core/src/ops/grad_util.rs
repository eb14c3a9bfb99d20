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
/// ([`super::dynamic_shape::sum_to_like`]), and `dy` itself when input `i` has the output's
/// shape whatever the run-time sizes ([`keeps_output_shape`]: a `[?, n]` product plus a
/// `[n]` bias), as TF's `BroadcastGradientArgs` finds no axis to reduce there.
pub(crate) fn to_input_shape(g: &mut Graph, node: &Node, dy: Output, i: usize) -> Result<Output> {
    if keeps_output_shape(g, node, i)? {
        return Ok(dy);
    }
    super::dynamic_shape::sum_to_like(g, dy, node.inputs[i])
}

/// Whether input `i` of the broadcasting `node`, whose static shape is partial, is sure to
/// have the output's shape at run time: no other input has more axes, and on every axis
/// another input has, input `i`'s size is known and is not 1 (or that input's is known to
/// be 1 too), so nothing can broadcast it. Then its gradient is `dy` as it is, and the
/// gradient graph does not read the input itself (which lets the fusion pass fuse the
/// product and bias of a layer with an unknown batch size).
fn keeps_output_shape(g: &Graph, node: &Node, i: usize) -> Result<bool> {
    use crate::shape::UNKNOWN;
    let x = g.shape_of(node.inputs[i])?;
    if x.is_fully_defined() {
        return Ok(false);
    }
    for (j, &o) in node.inputs.iter().enumerate() {
        if j == i {
            continue;
        }
        let y = g.shape_of(o)?;
        if y.rank() > x.rank() {
            return Ok(false);
        }
        if x.dims().iter().rev().zip(y.dims().iter().rev()).any(|(&dx, &dy)| dx == UNKNOWN || (dx == 1 && dy != 1)) {
            return Ok(false);
        }
    }
    Ok(true)
}
