//! Inputs of a `_FusedElementwise` program that are staged tile by tile instead of read in
//! place:
//! - a row or a column of its matrices (a bias row `r` in `x .+ r`, the `[n, 1]` row sums a
//!   softmax's gradient subtracts): spread over the tile's positions as the unfused binary
//!   kernels pair them ([`super::zip`]'s bias rows and columns), instead of one unfused op
//!   writing the broadcast result in full first. Only matrices: a row or column vector lies
//!   in both memory orders at once, so its elements need no reordering in either order of
//!   the run; and only next to a full-size operand (the fusion pass's rule), the one case
//!   where the unfused kernel's output takes the full operand's order.
//! - a full matrix in the other memory order (Julia's `x'` next to `x`, as in
//!   `0.5 .* (x + x')`): transposed [`GROUP`] lines at a time through register blocks
//!   ([`crate::transpose_block`]) and copied into each tile from there. The run copied such
//!   an input whole into its order first, on one thread, which made `0.5 .* (x + x')` three
//!   times slower than the unfused `x + x'` alone.

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

/// Lines transposed together by [`OtherOrder::fill`]: a whole number of 8x8 (4-byte) and
/// 4x4 (8-byte) register blocks across.
pub(crate) const GROUP: usize = 8;

/// A full input of a `[rows, cols]` run stored in the other memory order. The run walks
/// `lines` lines of `line` elements (columns of `rows` when it is column-major, rows of
/// `cols` otherwise); position `k` of the run, element `a = k % line` of line
/// `b = k / line`, is element `a * lines + b` of the input's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OtherOrder {
    line: usize,
    lines: usize,
}

/// One thread's lines of an [`OtherOrder`] input in the run's order: lines
/// `group * GROUP..` (at most [`GROUP`]), one after the other.
pub(crate) struct Lines<T> {
    buf: Vec<T>,
    group: usize,
}

impl<T> Lines<T> {
    /// No lines yet (the first [`OtherOrder::fill`] transposes its group).
    pub(crate) fn new() -> Self {
        Lines { buf: Vec::new(), group: usize::MAX }
    }
}

impl OtherOrder {
    /// The layout of a run of shape `dims` (a matrix) walked column-major (`column`) or
    /// row-major, for an input in the opposite order.
    pub(crate) fn new(dims: &[usize], column: bool) -> Self {
        let (rows, cols) = (dims[0], dims[1]);
        if column {
            OtherOrder { line: rows, lines: cols }
        } else {
            OtherOrder { line: cols, lines: rows }
        }
    }

    /// The layout of input `a` in a run of shape `dims` walked column-major (`column`) or
    /// row-major when `a` is a matrix stored exactly in the opposite order (a strided view,
    /// in neither, is not one: the run copies it into its order).
    pub(crate) fn of<T>(a: &ndarray::ArcArray<T, ndarray::IxDyn>, dims: &[usize], column: bool) -> Option<Self> {
        use crate::strided::is_column_major;
        // (a row-major matrix is one whose transpose is column-major)
        let opposite = if column { is_column_major(&a.t()) } else { is_column_major(a) };
        (dims.len() == 2 && a.shape() == dims && opposite).then(|| Self::new(dims, column))
    }

    /// Writes the elements of positions `at..at + d.len()` of the run into `d`, from `v`
    /// (the input's `line * lines` elements in its own order), transposing the lines'
    /// group into `lines` when the tile enters a new one.
    #[inline(always)]
    pub(crate) fn fill<T: Copy>(self, v: &[T], at: usize, d: &mut [T], lines: &mut Lines<T>) {
        let (l, m) = (self.line, self.lines);
        assert!(v.len() == l * m && at + d.len() <= v.len(), "an input in the other order: {} elements, run {l} x {m}", v.len());
        let (mut o, mut k) = (0, at);
        while o < d.len() {
            let g = k / l / GROUP;
            let (b0, b1) = (g * GROUP, ((g + 1) * GROUP).min(m));
            if lines.group != g {
                lines.buf.clear();
                lines.buf.reserve((b1 - b0) * l);
                // SAFETY: lines b0..b1 of the run read v[a * m + b] for a < l, b < b1 <= m,
                // inside v (asserted); buf has room for (b1 - b0) * l elements, all written
                // (dst[(b - b0) * l + a]) before set_len.
                unsafe {
                    crate::transpose_block::transpose_rect(v.as_ptr().add(b0), m, l, b1 - b0, lines.buf.as_mut_ptr(), l);
                    lines.buf.set_len((b1 - b0) * l);
                }
                lines.group = g;
            }
            let (from, len) = (k - b0 * l, (b1 * l - k).min(d.len() - o));
            d[o..o + len].copy_from_slice(&lines.buf[from..from + len]);
            o += len;
            k += len;
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

    #[test]
    fn an_input_in_the_other_order_reads_as_its_index_says() {
        // position k of a column-major run (i, j) = (k % rows, k / rows) reads a row-major
        // input at i * cols + j; a row-major run the other way round
        for (rows, cols) in [(5usize, 3usize), (9, 17), (16, 8), (1, 7), (7, 1), (33, 20)] {
            let v: Vec<f32> = (0..rows * cols).map(|x| x as f32 + 0.25).collect();
            let w: Vec<f64> = v.iter().map(|&x| f64::from(x)).collect();
            for column in [true, false] {
                let want: Vec<f32> = (0..rows * cols).map(|k| if column { v[(k % rows) * cols + k / rows] } else { v[(k % cols) * rows + k / cols] }).collect();
                let t = OtherOrder::new(&[rows, cols], column);
                // tiles of several lengths, in order and out of order (a group restaged)
                for tile in [1usize, 3, 8, 13, 64, 1000] {
                    let (mut l32, mut l64) = (Lines::new(), Lines::new());
                    let starts: Vec<usize> = (0..rows * cols).step_by(tile).collect();
                    for &at in starts.iter().chain(starts.iter().rev()) {
                        let n = tile.min(rows * cols - at);
                        let (mut d, mut e) = (vec![f32::NAN; n], vec![f64::NAN; n]);
                        t.fill(&v, at, &mut d, &mut l32);
                        t.fill(&w, at, &mut e, &mut l64);
                        assert_eq!(d, want[at..at + n], "{rows}x{cols} column-major run {column}, tile {tile} at {at}");
                        assert!(e.iter().zip(&d).all(|(&a, &b)| a == f64::from(b)), "f64 {rows}x{cols} {column} at {at}");
                    }
                }
            }
        }
    }
}
