//! Broadcasting elementwise maps of two tensors: the loops under the binary kernels (`Add`,
//! `Sub`, `Mul`, `RealDiv`, `Maximum`, `Minimum`, the comparisons).
//!
//! Both take any layouts. [`zip2`] accepts any `FnMut` and runs on the calling thread;
//! [`zip2_par`], the path of the arithmetic and comparison kernels, needs a `Fn + Sync` and
//! shards over the intra-op threads above [`SHARD_MIN`] elements, as TF's Eigen
//! `ThreadPoolDevice` shards a cwise op by its cost. When both operands lie in one memory
//! order (row-major, or column-major as Julia's arrays and the products of two of them are)
//! and the broadcast pairs each element of the smaller operand with a regular run of the
//! full one's (equal shapes, a single element, a bias row, a column), or both are matrices
//! of one shape in opposite orders (read tile by tile, the row-major one transposed: the
//! result is column-major), they map the elements in memory order with a loop compiled
//! twice (baseline x86-64 and AVX2, picked at run time as [`super::vmath`] does); every
//! other case goes through `ndarray`'s `Zip`.
//! The element function is the same on every path and the compiler never contracts a
//! product and a sum into an FMA, so the result has the same bits on either.

use super::*;
use crate::intra_op;
use crate::strided::is_column_major;
use ndarray::{ArcArray, ArrayViewD, IxDyn, ShapeBuilder, Zip};
use std::mem::MaybeUninit;

/// Elements below which a binary kernel stays on its own thread. A binary op moves three
/// values per element and computes little, so it takes more elements than `Tanh` to pay
/// for the hand-off (a 256x256 `Mul` in f32, 65536 elements, took about 20 us on one
/// thread of the project's VM).
const SHARD_MIN: usize = 1 << 15;

/// A view of `a` broadcast to `dims`; an error naming the node when impossible.
pub(crate) fn broadcast_view<'a, T>(ctx: &KernelCtx, a: &'a ArcArray<T, IxDyn>, dims: &[usize]) -> Result<ArrayViewD<'a, T>> {
    a.broadcast(IxDyn(dims)).ok_or_else(|| ctx.error(format!("cannot broadcast {} to {}", Shape(a.shape().to_vec()), Shape(dims.to_vec()))))
}

/// Broadcasting elementwise map of two arrays to the node's output shape, on the calling
/// thread, for any `FnMut` (kernels that record an error while mapping, as `Pow` and
/// `FloorMod` do). Operands the memory-order loops of [`zip2_par`] can pair take them
/// (serially); any other layout goes through `ndarray`'s broadcasting `Zip`. The result is
/// the same either way.
pub(crate) fn zip2<A: Copy, B: Copy, O: Clone>(
    ctx: &KernelCtx,
    a: &ArcArray<A, IxDyn>,
    b: &ArcArray<B, IxDyn>,
    mut f: impl FnMut(A, B) -> O,
) -> Result<ArcArray<O, IxDyn>> {
    let dims = ctx.node.outputs[0].shape.dims();
    let mapped = if full_is_a(a, b, dims) {
        pairing(a, b, dims).map(|(full, small, kind, fortran)| (map_serial(full, small, kind, &mut f), fortran))
    } else if b.shape() == dims {
        pairing(b, a, dims).map(|(full, small, kind, fortran)| (map_serial(full, small, kind, |y, x| f(x, y)), fortran))
    } else {
        None
    };
    if let Some((v, fortran)) = mapped {
        return shaped(ctx, dims, v, fortran);
    }
    let (av, bv) = (broadcast_view(ctx, a, dims)?, broadcast_view(ctx, b, dims)?);
    Ok(Zip::from(&av).and(&bv).map_collect(|&x, &y| f(x, y)).into_shared())
}

/// `f(full[i], small[j(i)])` for every `i` on the calling thread ([`zip_par`]'s map
/// without the sharding).
fn map_serial<A: Copy, B: Copy, O>(full: &[A], small: &[B], kind: Pairing, f: impl FnMut(A, B) -> O) -> Vec<O> {
    let mut out = crate::strided::buffer_for::<O>(full.len());
    run(full, small, kind, 0, &mut out.spare_capacity_mut()[..full.len()], f);
    // SAFETY: `run` wrote each of the first full.len() elements.
    unsafe { out.set_len(full.len()) };
    out
}

/// How an operand whose shape, padded with leading 1s, is `padded` broadcasts against the
/// full shape `dims` (same length), when each of its elements pairs with a regular run of
/// the full operand's row-major elements: [`Pairing::Same`], [`Pairing::Rows`] (a suffix of
/// `dims`: leading axes broadcast) or [`Pairing::Cols`] (a prefix followed by 1s: trailing
/// axes broadcast).
fn broadcast_kind(padded: &[usize], dims: &[usize]) -> Option<Pairing> {
    if padded == dims {
        return Some(Pairing::Same);
    }
    let lead = padded.iter().take_while(|&&d| d == 1).count();
    if padded[lead..] == dims[lead..] {
        return Some(Pairing::Rows);
    }
    let trail = padded.iter().rev().take_while(|&&d| d == 1).count();
    let k = dims.len() - trail;
    (padded[..k] == dims[..k]).then(|| Pairing::Cols { run: dims[k..].iter().product() })
}

/// `v` (the map's elements in memory order) as an array of shape `dims`, column-major when
/// `fortran`.
fn shaped<O>(ctx: &KernelCtx, dims: &[usize], v: Vec<O>, fortran: bool) -> Result<ArcArray<O, IxDyn>> {
    let shaped = if fortran { ArcArray::from_shape_vec(IxDyn(dims).f(), v) } else { ArcArray::from_shape_vec(IxDyn(dims), v) };
    shaped.map_err(|e| ctx.error(format!("output of shape {}: {e}", Shape(dims.to_vec()))))
}

/// `f(a, b)` elementwise with broadcasting, as [`zip2`], through the memory-order, SIMD and
/// sharded path described in the module docs where the layouts allow. The output is
/// column-major when the full-size operand is (so a chain of ops on Julia's arrays keeps
/// their order and a fetch needs no transpose), else row-major.
pub(crate) fn zip2_par<A, B, O>(
    ctx: &KernelCtx,
    a: &ArcArray<A, IxDyn>,
    b: &ArcArray<B, IxDyn>,
    f: impl Fn(A, B) -> O + Sync + Copy,
) -> Result<ArcArray<O, IxDyn>>
where
    A: Copy + Sync,
    B: Copy + Sync,
    O: Copy + Send + Clone,
{
    let dims = ctx.node.outputs[0].shape.dims();
    let mapped = if full_is_a(a, b, dims) {
        pairing(a, b, dims).map(|(full, small, kind, fortran)| (zip_par(full, small, kind, f), fortran))
    } else if b.shape() == dims {
        pairing(b, a, dims).map(|(full, small, kind, fortran)| (zip_par(full, small, kind, move |y, x| f(x, y)), fortran))
    } else {
        None
    };
    match mapped {
        Some((v, fortran)) => shaped(ctx, dims, v, fortran),
        None => zip2(ctx, a, b, f),
    }
}

/// Whether `a` is the operand whose memory order the output takes: it has the output's
/// shape, unless both do and only `b` is column-major. Two matrices of one shape in
/// opposite orders cost the same either way (one is read transposed), and the
/// column-major one is Julia's: a gradient's row-major ones (`BroadcastTo`) times a
/// column-major activation then gives a column-major product, which the `AddN` and the
/// slice gradients after it read in its own order (with a row-major one among them,
/// `AddN` walked the column-major ones across their columns).
fn full_is_a<A, B>(a: &ArcArray<A, IxDyn>, b: &ArcArray<B, IxDyn>, dims: &[usize]) -> bool {
    a.shape() == dims && !(b.shape() == dims && is_column_major(b) && !is_column_major(a))
}

/// How the elements of the two operands pair up in memory order ([`zip_par`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pairing {
    /// The small operand has one element.
    Scalar,
    /// Element `i` with element `i`.
    Same,
    /// Element `i` with `small[i % small.len()]`.
    Rows,
    /// Element `i` with `small[i / run]`.
    Cols { run: usize },
    /// Two matrices of one shape in opposite memory orders: in the full one's order a
    /// `rows x cols` row-major matrix, whose element `(r, c)` pairs with `small[c * rows + r]`
    /// (visited in tiles, so both operands are read a cache line at a time).
    Transposed { rows: usize, cols: usize },
}

/// Rows and columns of a tile of [`Pairing::Transposed`].
const TILE_ROWS: usize = 64;
const TILE_COLS: usize = 64;

/// The full operand's elements in memory order, the small one's in the same order, how they
/// pair, and whether that order is column-major; `None` when the layouts do not allow it
/// (the caller then takes [`zip2`]). `full` has the output's shape `dims`.
fn pairing<'a, A, B>(full: &'a ArcArray<A, IxDyn>, small: &'a ArcArray<B, IxDyn>, dims: &[usize]) -> Option<(&'a [A], &'a [B], Pairing, bool)> {
    if small.ndim() > dims.len() || full.is_empty() {
        return None;
    }
    let (fs, fortran) = match full.as_slice() {
        Some(s) => (s, false),
        None if full.t().is_standard_layout() => (full.as_slice_memory_order()?, true),
        None => return None,
    };
    if small.len() == 1 {
        return Some((fs, small.as_slice_memory_order()?, Pairing::Scalar, fortran));
    }
    // a matrix of the same shape in the other order: read transposed, tile by tile
    if small.shape() == dims && dims.len() == 2 {
        let other = if fortran { small.as_slice() } else { small.as_slice_memory_order().filter(|_| small.t().is_standard_layout()) };
        if let Some(ss) = other {
            let (rows, cols) = if fortran { (dims[1], dims[0]) } else { (dims[0], dims[1]) };
            return Some((fs, ss, Pairing::Transposed { rows, cols }, fortran));
        }
    }
    // otherwise the small operand's elements must lie in the same order as the full one's
    let ss = match fortran {
        true if small.t().is_standard_layout() => small.as_slice_memory_order()?,
        true => return None,
        false => small.as_slice()?,
    };
    let mut padded = vec![1; dims.len() - small.ndim()];
    padded.extend_from_slice(small.shape());
    let kind = if fortran {
        let rev = |v: &[usize]| v.iter().rev().copied().collect::<Vec<_>>();
        broadcast_kind(&rev(&padded), &rev(dims))?
    } else {
        broadcast_kind(&padded, dims)?
    };
    if ss.is_empty() || fs.len() % ss.len() != 0 {
        return None;
    }
    Some((fs, ss, kind, fortran))
}

/// `f(full[i], small[j(i)])` for every `i`, `j` as `kind` says, in a new vector: on the
/// calling thread ([`map_serial`]) below [`SHARD_MIN`] elements or with one intra-op thread, else in chunks
/// (about four a thread, each a whole number of the pairing's runs) over the intra-op
/// threads, the caller included ([`intra_op::parallel_for_each`]).
fn zip_par<A: Copy + Sync, B: Copy + Sync, O: Copy + Send>(full: &[A], small: &[B], kind: Pairing, f: impl Fn(A, B) -> O + Sync + Copy) -> Vec<O> {
    let n = full.len();
    let Some(chunk) = intra_op::shard_len(n, SHARD_MIN) else {
        return map_serial(full, small, kind, f);
    };
    let mut out = crate::strided::buffer_for::<O>(n);
    let unit = match kind {
        Pairing::Rows => small.len(),
        Pairing::Cols { run } => run,
        Pairing::Transposed { cols, .. } => cols * TILE_ROWS,
        Pairing::Scalar | Pairing::Same => 64,
    };
    let chunk = chunk.next_multiple_of(unit.max(1));
    let items: Vec<(usize, &mut [MaybeUninit<O>])> = out.spare_capacity_mut()[..n].chunks_mut(chunk).enumerate().map(|(i, d)| (i * chunk, d)).collect();
    intra_op::parallel_for_each(items, |(start, d)| run(full, small, kind, start, d, f));
    // SAFETY: `run` wrote each of the first n elements (every chunk covers whole runs).
    unsafe { out.set_len(n) };
    out
}

super::vmath::avx2_build! {
    /// Fills `dst` with elements `start..start + dst.len()` of the map (see [`zip_par`]): with
    /// the AVX2 build of the loop where the CPU has it, else the baseline one.
    fn run[A: Copy, B: Copy, O](full: &[A], small: &[B], kind: Pairing, start: usize, dst: &mut [MaybeUninit<O>], f: impl FnMut(A, B) -> O) => body
}

/// The loop of [`run`]. `start` and `dst.len()` are whole numbers of the pairing's runs
/// (or reach the end of `full`), so every element of `dst` is written.
#[inline(always)]
fn body<A: Copy, B: Copy, O>(full: &[A], small: &[B], kind: Pairing, start: usize, dst: &mut [MaybeUninit<O>], mut f: impl FnMut(A, B) -> O) {
    let full = &full[start..start + dst.len()];
    match kind {
        Pairing::Scalar => {
            let y = small[0];
            dst.iter_mut().zip(full).for_each(|(d, &x)| {
                d.write(f(x, y));
            });
        }
        Pairing::Same => {
            let small = &small[start..start + dst.len()];
            dst.iter_mut().zip(full).zip(small).for_each(|((d, &x), &y)| {
                d.write(f(x, y));
            });
        }
        Pairing::Rows => {
            debug_assert!(start.is_multiple_of(small.len()) && dst.len().is_multiple_of(small.len()));
            for (drow, row) in dst.chunks_exact_mut(small.len()).zip(full.chunks_exact(small.len())) {
                drow.iter_mut().zip(row).zip(small).for_each(|((d, &x), &y)| {
                    d.write(f(x, y));
                });
            }
        }
        Pairing::Transposed { rows, cols } => {
            debug_assert!(start.is_multiple_of(cols) && dst.len().is_multiple_of(cols));
            let (r0, nrows) = (start / cols, dst.len() / cols);
            // one tile of `small`, transposed (tile row r at r * TILE_COLS) in register
            // blocks, then zipped row by row with `full` as the other pairings are
            let mut tile = [small[0]; TILE_ROWS * TILE_COLS];
            for tr in (0..nrows).step_by(TILE_ROWS) {
                let th = (tr + TILE_ROWS).min(nrows) - tr;
                for tc in (0..cols).step_by(TILE_COLS) {
                    let tw = (tc + TILE_COLS).min(cols) - tc;
                    let first = tc * rows + r0 + tr;
                    assert!(th > 0 && tw > 0 && first + (tw - 1) * rows + th <= small.len());
                    // SAFETY: columns tc..tc + tw of `small` hold rows r0 + tr..r0 + tr + th
                    // (asserted), and the tile has room for th rows of tw <= TILE_COLS.
                    unsafe { crate::transpose_block::transpose_rect(small[first..].as_ptr(), rows, tw, th, tile.as_mut_ptr(), TILE_COLS) };
                    for r in 0..th {
                        let o = (tr + r) * cols + tc;
                        let trow = &tile[r * TILE_COLS..r * TILE_COLS + tw];
                        dst[o..o + tw].iter_mut().zip(&full[o..o + tw]).zip(trow).for_each(|((d, &x), &y)| {
                            d.write(f(x, y));
                        });
                    }
                }
            }
        }
        Pairing::Cols { run } => {
            debug_assert!(start.is_multiple_of(run));
            for ((dblk, blk), &y) in dst.chunks_mut(run).zip(full.chunks(run)).zip(&small[start / run..]) {
                dblk.iter_mut().zip(blk).for_each(|(d, &x)| {
                    d.write(f(x, y));
                });
            }
        }
    }
}

/// One operand of [`select_in_order`]: the output's elements in memory order, or one value
/// for all of them.
#[derive(Clone, Copy)]
enum Src<'a, T> {
    Full(&'a [T]),
    One(T),
}

/// Elements `start..start + d.len()` of `c ? x : y`, one loop per kind of operand so that
/// each is a branch-free vector loop (a select per element; with the kinds matched inside
/// the loop it compiled to a branch per element, mispredicted on a random mask: 4 ns an
/// element).
#[inline(always)]
fn select_body<T: Copy>(c: Src<bool>, x: Src<T>, y: Src<T>, start: usize, d: &mut [MaybeUninit<T>]) {
    let r = start..start + d.len();
    match (c, x, y) {
        (Src::One(c), x, y) => match if c { x } else { y } {
            Src::Full(v) => d.iter_mut().zip(&v[r]).for_each(|(d, &v)| {
                d.write(v);
            }),
            Src::One(v) => d.iter_mut().for_each(|d| {
                d.write(v);
            }),
        },
        (Src::Full(c), Src::Full(x), Src::Full(y)) => d.iter_mut().zip(&c[r.clone()]).zip(&x[r.clone()]).zip(&y[r]).for_each(|(((d, &c), &x), &y)| {
            d.write(pick(c, x, y));
        }),
        (Src::Full(c), Src::Full(x), Src::One(y)) => d.iter_mut().zip(&c[r.clone()]).zip(&x[r]).for_each(|((d, &c), &x)| {
            d.write(pick(c, x, y));
        }),
        (Src::Full(c), Src::One(x), Src::Full(y)) => d.iter_mut().zip(&c[r.clone()]).zip(&y[r]).for_each(|((d, &c), &y)| {
            d.write(pick(c, x, y));
        }),
        (Src::Full(c), Src::One(x), Src::One(y)) => d.iter_mut().zip(&c[r]).for_each(|(d, &c)| {
            d.write(pick(c, x, y));
        }),
    }
}

/// `if c { x } else { y }` as a bit mask on the elements' bits (8-, 4- and 1-byte elements,
/// every dtype of a tensor), which the compiler vectorizes; as a plain `if` it picked the
/// address to load from, one element at a time.
#[inline(always)]
fn pick<T: Copy>(c: bool, x: T, y: T) -> T {
    macro_rules! by_bits {
        ($u:ty) => {{
            let m = <$u>::from(c).wrapping_neg();
            // SAFETY: `T` is as large as `$u` (the match below), every bit pattern of `$u` is
            // one, and the result is the bits of `x` or of `y`, so a valid `T`.
            unsafe {
                let (xb, yb): ($u, $u) = (std::mem::transmute_copy(&x), std::mem::transmute_copy(&y));
                std::mem::transmute_copy(&((xb & m) | (yb & !m)))
            }
        }};
    }
    match std::mem::size_of::<T>() {
        8 => by_bits!(u64),
        4 => by_bits!(u32),
        1 => by_bits!(u8),
        _ => {
            if c {
                x
            } else {
                y
            }
        }
    }
}

super::vmath::avx2_build! {
    /// [`select_body`] with the AVX2 build of its loops where the CPU has it (as [`run`]).
    fn select_run[T: Copy](c: Src<bool>, x: Src<T>, y: Src<T>, start: usize, d: &mut [MaybeUninit<T>]) => select_body
}

/// `SelectV2`'s `c ? x : y` elementwise in memory order, sharded over the intra-op threads
/// above [`SHARD_MIN`] elements, when each operand either has the output's shape `dims` or
/// one element, and the full-size ones all lie in one memory order (row-major, or
/// column-major as Julia's arrays and the gradients made from them): the result then has
/// that order. `None` for any other layout or broadcast, which the caller maps with
/// `ndarray`'s `Zip` (the same values, in logical order; a gradient's select on
/// column-major operands took 4.8 ms per 1M elements that way).
pub(crate) fn select_in_order<T: Copy + Send + Sync>(
    c: &ArcArray<bool, IxDyn>,
    x: &ArcArray<T, IxDyn>,
    y: &ArcArray<T, IxDyn>,
    dims: &[usize],
) -> Option<ArcArray<T, IxDyn>> {
    let n: usize = dims.iter().product();
    if n == 0 {
        return None;
    }
    // (contiguous row-major, contiguous column-major) for each full-size operand
    let orders = [
        (c.shape() == dims).then(|| (c.is_standard_layout(), c.t().is_standard_layout())),
        (x.shape() == dims).then(|| (x.is_standard_layout(), x.t().is_standard_layout())),
        (y.shape() == dims).then(|| (y.is_standard_layout(), y.t().is_standard_layout())),
    ];
    let sizes_ok = [c.len(), x.len(), y.len()].iter().zip(&orders).all(|(&len, o)| o.is_some() || len == 1);
    if !sizes_ok {
        return None;
    }
    let fortran = if orders.iter().flatten().all(|o| o.0) {
        false
    } else if orders.iter().flatten().all(|o| o.1) {
        true
    } else {
        return None;
    };
    fn src<'a, T: Copy>(a: &'a ArcArray<T, IxDyn>, full: bool) -> Option<Src<'a, T>> {
        if full {
            a.as_slice_memory_order().map(Src::Full)
        } else {
            a.iter().next().map(|&v| Src::One(v))
        }
    }
    let (cs, xs, ys) = (src(c, orders[0].is_some())?, src(x, orders[1].is_some())?, src(y, orders[2].is_some())?);
    fill_in_order(dims, fortran, |start, d| select_run(cs, xs, ys, start, d))
}

super::vmath::avx2_build! {
    /// Elements `start..start + d.len()` of [`sum_in_order`]'s sum, with the AVX2 build of
    /// the loops where the CPU has it (as [`run`]).
    fn sum_run[T: Copy](xs: &[&[T]], start: usize, d: &mut [MaybeUninit<T>], add: impl Fn(T, T) -> T) => sum_body
}

#[inline(always)]
fn sum_body<T: Copy>(xs: &[&[T]], start: usize, d: &mut [MaybeUninit<T>], add: impl Fn(T, T) -> T) {
    const BLOCK: usize = 2048;
    for (b, d) in d.chunks_mut(BLOCK).enumerate() {
        let lo = start + b * BLOCK;
        let r = lo..lo + d.len();
        d.iter_mut().zip(&xs[0][r.clone()]).zip(&xs[1][r.clone()]).for_each(|((d, &a), &b)| {
            d.write(add(a, b));
        });
        // SAFETY: the loop above wrote every element of `d`.
        let d = unsafe { &mut *(d as *mut [MaybeUninit<T>] as *mut [T]) };
        for s in &xs[2..] {
            d.iter_mut().zip(&s[r.clone()]).for_each(|(d, &x)| *d = add(*d, x));
        }
    }
}

/// `AddN`'s sum `((x0 + x1) + x2) + ...` (left to right, as fused programs add) in memory
/// order, sharded over the intra-op threads above [`SHARD_MIN`] elements, when every input
/// has the shape `dims` and all lie in one memory order (the result then has it); `None`
/// otherwise (the caller adds pairwise with [`zip2_par`]). Each chunk is summed in blocks
/// of 2048 elements, one vector loop per input, so the partial sums stay in L1.
pub(crate) fn sum_in_order<T: Copy + Send + Sync>(
    xs: &[&ArcArray<T, IxDyn>],
    dims: &[usize],
    add: impl Fn(T, T) -> T + Sync + Copy,
) -> Option<ArcArray<T, IxDyn>> {
    let n: usize = dims.iter().product();
    if xs.len() < 2 || n == 0 || xs.iter().any(|x| x.shape() != dims) {
        return None;
    }
    let fortran = if xs.iter().all(|x| x.is_standard_layout()) {
        false
    } else if xs.iter().all(|x| x.t().is_standard_layout()) {
        true
    } else {
        return None;
    };
    let slices: Vec<&[T]> = xs.iter().map(|x| x.as_slice_memory_order()).collect::<Option<_>>()?;
    fill_in_order(dims, fortran, |start, d| sum_run(&slices, start, d, add))
}

/// A new array of shape `dims` (at least one element), column-major when `fortran`, whose
/// elements in memory order `fill(start, d)` writes, every one of `d` (the elements
/// `start..start + d.len()`), sharded over the intra-op threads above [`SHARD_MIN`]
/// elements. (`None` only if ndarray refused the shape, which holds exactly its elements.)
fn fill_in_order<T: Send>(dims: &[usize], fortran: bool, fill: impl Fn(usize, &mut [MaybeUninit<T>]) + Sync) -> Option<ArcArray<T, IxDyn>> {
    let n: usize = dims.iter().product();
    let mut out = crate::strided::buffer_for::<T>(n);
    match intra_op::shard_len(n, SHARD_MIN) {
        None => fill(0, &mut out.spare_capacity_mut()[..n]),
        Some(chunk) => {
            let chunk = chunk.next_multiple_of(64);
            let items: Vec<(usize, &mut [MaybeUninit<T>])> = out.spare_capacity_mut()[..n].chunks_mut(chunk).enumerate().map(|(i, d)| (i * chunk, d)).collect();
            intra_op::parallel_for_each(items, |(start, d)| fill(start, d));
        }
    }
    // SAFETY: the chunks cover the first n elements and `fill` writes every element of each.
    unsafe { out.set_len(n) };
    let shaped = if fortran { ArcArray::from_shape_vec(IxDyn(dims).f(), out) } else { ArcArray::from_shape_vec(IxDyn(dims), out) };
    shaped.ok()
}

#[cfg(test)]
#[path = "zip_tests.rs"]
mod tests;
