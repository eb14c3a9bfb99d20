//! Inputs of a `_FusedElementwise` program that are a row or a column of its matrices (a
//! bias row `r` in `x .+ r`, the `[n, 1]` row sums a softmax's gradient subtracts): read in
//! place tile by tile, spread over the tile's positions as the unfused binary kernels pair
//! them ([`super::zip`]'s bias rows and columns), instead of one unfused op writing the
//! broadcast result in full first.
//!
//! Only matrices: a row or column vector lies in both memory orders at once, so its
//! elements need no reordering in either order of the run; and only next to a full-size
//! operand (the fusion pass's rule), the one case where the unfused kernel's output takes
//! the full operand's order.

/// How an input of a run's shape `[rows, cols]` broadcasts: a row `[1, cols]` or a column
/// `[rows, 1]` (neither a single element nor the full shape).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Vector {
    Row,
    Column,
}

impl Vector {
    /// The kind of an input of shape `input` in a cluster of shape `dims`, if it is one.
    pub(crate) fn of(input: &[usize], dims: &[usize]) -> Option<Vector> {
        match (input, dims) {
            (&[1, c], &[r, c2]) if c == c2 && r > 1 && c > 1 => Some(Vector::Row),
            (&[r, 1], &[r2, c]) if r == r2 && r > 1 && c > 1 => Some(Vector::Column),
            _ => None,
        }
    }

    /// How its elements spread over a `[rows, cols]` run walked column-major (`column`) or
    /// row-major: a row repeats each element for a column's `rows` positions column-major,
    /// and cycles through its `cols` elements row-major; a column the other way round.
    pub(crate) fn spread(self, dims: &[usize], column: bool) -> Spread {
        let (rows, cols) = (dims[0], dims[1]);
        match (self, column) {
            (Vector::Row, true) => Spread::Blocks(rows),
            (Vector::Row, false) => Spread::Cycle(cols),
            (Vector::Column, true) => Spread::Cycle(rows),
            (Vector::Column, false) => Spread::Blocks(cols),
        }
    }
}

/// Element `k` of a run in memory order reads `v[k % n]` (`Cycle(n)`) or `v[k / n]`
/// (`Blocks(n)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Spread {
    Cycle(usize),
    Blocks(usize),
}

impl Spread {
    /// Writes the elements of positions `at..at + d.len()` of the run into `d`.
    #[inline(always)]
    pub(crate) fn fill<T: Copy>(self, v: &[T], at: usize, d: &mut [T]) {
        let mut o = 0;
        match self {
            Spread::Cycle(n) => {
                let mut k = at % n;
                while o < d.len() {
                    let m = (n - k).min(d.len() - o);
                    d[o..o + m].copy_from_slice(&v[k..k + m]);
                    o += m;
                    k = 0;
                }
            }
            Spread::Blocks(n) => {
                let mut k = at;
                while o < d.len() {
                    let m = (n - k % n).min(d.len() - o);
                    d[o..o + m].fill(v[k / n]);
                    o += m;
                    k += m;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_and_columns_spread_as_their_index_says() {
        // a 3x4 run: position k is (i, j) = (k % 3, k / 3) column-major, (k / 4, k % 4)
        // row-major; a row reads v[j], a column v[i]
        let dims = [3usize, 4];
        for (input, vector) in [([1usize, 4], Vector::Row), ([3, 1], Vector::Column)] {
            assert_eq!(Vector::of(&input, &dims), Some(vector));
            let v: Vec<f64> = (0..input[0] * input[1]).map(|x| x as f64 + 0.5).collect();
            for column in [true, false] {
                let want: Vec<f64> = (0..12)
                    .map(|k| {
                        let (i, j) = if column { (k % 3, k / 3) } else { (k / 4, k % 4) };
                        v[if vector == Vector::Row { j } else { i }]
                    })
                    .collect();
                // every window, as tiles of any length and offset read it
                for at in 0..12 {
                    for len in 0..=12 - at {
                        let mut d = vec![f64::NAN; len];
                        vector.spread(&dims, column).fill(&v, at, &mut d);
                        assert_eq!(d, want[at..at + len], "{vector:?} column-major {column}, at {at}, len {len}");
                    }
                }
            }
        }
        for (input, dims) in [(&[1usize, 1][..], &[3usize, 4][..]), (&[3, 4], &[3, 4]), (&[4], &[3, 4]), (&[1, 4], &[1, 4]), (&[1, 2, 4], &[3, 2, 4])] {
            assert_eq!(Vector::of(input, dims), None, "{input:?} in {dims:?}");
        }
    }
}
