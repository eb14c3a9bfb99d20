//! Static tensor shapes and NumPy/TensorFlow broadcasting.
//!
//! A static shape has a known rank; each dimension is known or [`UNKNOWN`] (TF1's partial
//! shapes, `TensorShape([None, 10])`, printed `[?,10]`). Only a `Placeholder` introduces
//! unknown dimensions; the ops that accept them are listed in
//! [`crate::ops::accepts_unknown_dims`], every other op refuses them when the node is added.

use std::fmt;

/// The value of an unknown dimension (TF's `-1` / Python `None`; shown as `?`).
pub const UNKNOWN: usize = usize::MAX;

/// A static shape in row-major (TensorFlow) order: `[2, 3]` is two rows of three.
/// A scalar has rank 0 (`[]`). A dimension may be [`UNKNOWN`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Shape(pub Vec<usize>);

/// One dimension two shapes must share (TF's `Dimension.merge_with`): the known one of the
/// two (either may be [`UNKNOWN`]), `None` when both are known and differ.
pub fn merge_dim(a: usize, b: usize) -> Option<usize> {
    match (a, b) {
        (UNKNOWN, d) | (d, UNKNOWN) => Some(d),
        _ => (a == b).then_some(a),
    }
}

impl Shape {
    /// The rank-0 shape.
    pub fn scalar() -> Shape {
        Shape(Vec::new())
    }
    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.0.len()
    }
    /// Number of elements (1 for a scalar). Saturates at `usize::MAX` (so an unknown
    /// dimension gives `usize::MAX`); check [`Shape::is_fully_defined`] first.
    pub fn num_elements(&self) -> usize {
        self.0.iter().fold(1usize, |n, &d| n.saturating_mul(d))
    }
    /// Every dimension known (TF's `TensorShape.is_fully_defined`).
    pub fn is_fully_defined(&self) -> bool {
        !self.0.contains(&UNKNOWN)
    }
    /// Whether a tensor with dimensions `dims` has this shape: the same rank, and each
    /// known dimension equal (TF's `TensorShape.is_compatible_with` for a full shape).
    /// Element by element on purpose: the executor checks every kernel's outputs with it,
    /// and slice equality would call `memcmp` even for a scalar's empty dims (that call
    /// once cost ~20 % of a scalar chain's step, docs/performance/engine.md).
    #[inline]
    pub fn matches(&self, dims: &[usize]) -> bool {
        self.0.len() == dims.len() && self.0.iter().zip(dims).all(|(&s, &d)| s == UNKNOWN || s == d)
    }
    /// The most specific shape compatible with both (TF's `TensorShape.merge_with`), or
    /// `None` when a rank or a known dimension differs.
    pub fn merge(&self, other: &Shape) -> Option<Shape> {
        if self.rank() != other.rank() {
            return None;
        }
        self.0.iter().zip(&other.0).map(|(&a, &b)| merge_dim(a, b)).collect::<Option<Vec<_>>>().map(Shape)
    }
    /// The dimensions.
    pub fn dims(&self) -> &[usize] {
        &self.0
    }

    /// NumPy broadcasting (`tf.broadcast_static_shape`): align trailing dimensions; each pair
    /// must be equal or contain a 1. Returns `None` when the shapes are incompatible. With
    /// an unknown dimension, as TF: `?` against 1 or `?` is `?`, against `k > 1` it is `k`
    /// (the run checks that the fed dimension is 1 or `k`).
    pub fn broadcast(a: &Shape, b: &Shape) -> Option<Shape> {
        let n = a.rank().max(b.rank());
        let mut out = vec![0; n];
        for (i, o) in out.iter_mut().enumerate() {
            let da = if i < n - a.rank() { 1 } else { a.0[i - (n - a.rank())] };
            let db = if i < n - b.rank() { 1 } else { b.0[i - (n - b.rank())] };
            *o = if da == db || db == 1 {
                da
            } else if da == 1 || da == UNKNOWN {
                db
            } else if db == UNKNOWN {
                da
            } else {
                return None;
            };
        }
        Some(Shape(out))
    }

    /// Axes of `out` (a broadcast result) that `self` was broadcast along, i.e. the axes a
    /// gradient must be summed over to get back to `self` (TF's `BroadcastGradientArgs`).
    /// Only meaningful for fully defined shapes (the gradient of a broadcast with unknown
    /// dimensions decides its axes at run time: `_SumToShape`).
    pub fn broadcast_axes(&self, out: &Shape) -> Vec<usize> {
        let lead = out.rank() - self.rank();
        (0..out.rank()).filter(|&i| i < lead || (self.0[i - lead] == 1 && out.0[i] != 1)).collect()
    }
}

impl From<Vec<usize>> for Shape {
    fn from(v: Vec<usize>) -> Shape {
        Shape(v)
    }
}
impl From<&[usize]> for Shape {
    fn from(v: &[usize]) -> Shape {
        Shape(v.to_vec())
    }
}

impl fmt::Display for Shape {
    /// TensorFlow's notation: `[]`, `[3]`, `[2,3]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, ",")?;
            }
            if *d == UNKNOWN {
                write!(f, "?")?;
            } else {
                write!(f, "{d}")?;
            }
        }
        write!(f, "]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn broadcasting_follows_numpy() {
        let s = |v: &[usize]| Shape(v.to_vec());
        assert_eq!(Shape::broadcast(&s(&[2, 3]), &s(&[3])), Some(s(&[2, 3])));
        assert_eq!(Shape::broadcast(&s(&[2, 1]), &s(&[1, 4])), Some(s(&[2, 4])));
        assert_eq!(Shape::broadcast(&s(&[]), &s(&[5])), Some(s(&[5])));
        assert_eq!(Shape::broadcast(&s(&[2, 3]), &s(&[2])), None);
        assert_eq!(s(&[3]).broadcast_axes(&s(&[2, 3])), vec![0]);
        assert_eq!(s(&[2, 1]).broadcast_axes(&s(&[2, 4])), vec![1]);
        assert_eq!(s(&[]).broadcast_axes(&s(&[2, 4])), vec![0, 1]);
    }

    #[test]
    fn unknown_dimensions_follow_tf_partial_shapes() {
        let s = |v: &[usize]| Shape(v.to_vec());
        const U: usize = UNKNOWN;
        // tf.broadcast_static_shape: ? with 1 or ? stays ?, ? with k > 1 is k
        assert_eq!(Shape::broadcast(&s(&[U, 3]), &s(&[3])), Some(s(&[U, 3])));
        assert_eq!(Shape::broadcast(&s(&[U, 1]), &s(&[1, 4])), Some(s(&[U, 4])));
        assert_eq!(Shape::broadcast(&s(&[U]), &s(&[5])), Some(s(&[5])));
        assert_eq!(Shape::broadcast(&s(&[5]), &s(&[U])), Some(s(&[5])));
        assert_eq!(Shape::broadcast(&s(&[U]), &s(&[U])), Some(s(&[U])));
        assert_eq!(Shape::broadcast(&s(&[U, 2]), &s(&[3])), None);
        assert!(!s(&[U, 3]).is_fully_defined() && s(&[2, 3]).is_fully_defined());
        assert!(s(&[U, 3]).matches(&[7, 3]) && !s(&[U, 3]).matches(&[7, 4]) && !s(&[U, 3]).matches(&[3]));
        assert_eq!(s(&[U, 3]).merge(&s(&[4, U])), Some(s(&[4, 3])));
        assert_eq!(s(&[U, 3]).merge(&s(&[4, 2])), None);
        assert_eq!(s(&[U, 3]).to_string(), "[?,3]");
        assert_eq!(s(&[U, 3]).num_elements(), usize::MAX);
    }
}
