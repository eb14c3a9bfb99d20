//! Static tensor shapes and NumPy/TensorFlow broadcasting.

use std::fmt;

/// A static, fully known shape in row-major (TensorFlow) order: `[2, 3]` is two rows of three.
/// A scalar has rank 0 (`[]`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Shape(pub Vec<usize>);

impl Shape {
    /// The rank-0 shape.
    pub fn scalar() -> Shape {
        Shape(Vec::new())
    }
    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.0.len()
    }
    /// Number of elements (1 for a scalar).
    pub fn num_elements(&self) -> usize {
        self.0.iter().product()
    }
    /// The dimensions.
    pub fn dims(&self) -> &[usize] {
        &self.0
    }

    /// NumPy broadcasting (`tf.broadcast_static_shape`): align trailing dimensions; each pair
    /// must be equal or contain a 1. Returns `None` when the shapes are incompatible.
    pub fn broadcast(a: &Shape, b: &Shape) -> Option<Shape> {
        let n = a.rank().max(b.rank());
        let mut out = vec![0; n];
        for (i, o) in out.iter_mut().enumerate() {
            let da = if i < n - a.rank() { 1 } else { a.0[i - (n - a.rank())] };
            let db = if i < n - b.rank() { 1 } else { b.0[i - (n - b.rank())] };
            *o = if da == db || db == 1 {
                da
            } else if da == 1 {
                db
            } else {
                return None;
            };
        }
        Some(Shape(out))
    }

    /// Axes of `out` (a broadcast result) that `self` was broadcast along, i.e. the axes a
    /// gradient must be summed over to get back to `self` (TF's `BroadcastGradientArgs`).
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
            write!(f, "{d}")?;
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
}
