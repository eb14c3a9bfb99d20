//! Kernel metadata passed by value (`#[repr(C)]`, at most [`MAX_RANK`] dims), the Rust
//! twins of the structs at the top of `kernels/binary.cu` (`Bcast`, `Ptrs8`) and
//! `kernels/reduce.cu` (`Red`), and the host-side planning that fills them: NumPy
//! broadcasting with axis merging, and the split of a reduction into kept and reduced
//! axes, segments and passes. Pure functions of shapes, tested without a GPU.

use super::MAX_RANK;
use cudarc::driver::{DeviceRepr, LaunchConfig};

/// Threads per block of the elementwise kernels.
pub const BLOCK: u32 = 256;
/// Most blocks an elementwise launch uses; the kernels loop (grid-stride) over the rest.
pub const MAX_GRID: u64 = 1 << 16;

/// Launch shape of a grid-stride kernel over `n` items (n > 0).
pub fn grid_1d(n: usize) -> LaunchConfig {
    let blocks = (n as u64).div_ceil(BLOCK as u64).clamp(1, MAX_GRID) as u32;
    LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (BLOCK, 1, 1), shared_mem_bytes: 0 }
}

/// Elements per thread per loop iteration of the unrolled elementwise kernels (`UNROLL`
/// in elementwise.cu and binary.cu).
pub const UNROLL: usize = 4;

/// Launch shape of an unrolled grid-stride kernel over `n` elements (n > 0): threads for
/// `n / UNROLL`, each loading `UNROLL` elements per iteration.
pub fn grid_unrolled(n: usize) -> LaunchConfig {
    grid_1d(n.div_ceil(UNROLL))
}

/// Broadcast metadata of `binary.cu`: output dims and each operand's element stride per
/// output axis (0 where broadcast). `rank == 0` is the flat fast path (operand `k`'s
/// element of output `i` is `i * strides[k][0]`).
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct BcastMeta {
    /// Output elements.
    pub n: i64,
    /// Axes in `dims` (after merging); 0 for the flat fast path.
    pub rank: i32,
    /// Padding (C layout), always 0.
    pub pad: i32,
    /// Output dims, outermost first.
    pub dims: [i64; MAX_RANK],
    /// Per operand, its element stride along each output axis (0: broadcast).
    pub strides: [[i64; MAX_RANK]; 3],
}
// SAFETY: plain `#[repr(C)]` integers, laid out as `struct Bcast` in kernels/binary.cu.
unsafe impl DeviceRepr for BcastMeta {}

/// Row-major element strides of `dims`.
pub fn row_major_strides(dims: &[usize]) -> Vec<i64> {
    let mut s = vec![0i64; dims.len()];
    let mut acc = 1i64;
    for i in (0..dims.len()).rev() {
        s[i] = acc;
        acc *= dims[i] as i64;
    }
    s
}

impl BcastMeta {
    /// Metadata for writing `out` from up to 3 `operands` that broadcast to it (NumPy
    /// rules: dims aligned on the right, size-1 dims repeated). Axes of size 1 are dropped
    /// and neighbouring axes that are contiguous in every operand merged; `None` when more
    /// than [`MAX_RANK`] axes remain or an operand does not broadcast.
    pub fn new(out: &[usize], operands: &[&[usize]]) -> Option<BcastMeta> {
        assert!(operands.len() <= 3, "at most 3 operands");
        let n: usize = out.iter().product();
        let mut m = BcastMeta { n: n as i64, rank: 0, pad: 0, dims: [0; MAX_RANK], strides: [[0; MAX_RANK]; 3] };
        // Flat fast path: every operand is either the full output or a single element.
        let flat: Vec<Option<i64>> = operands
            .iter()
            .map(|d| {
                let len: usize = d.iter().product();
                if len == n && broadcasts(d, out) {
                    Some(1)
                } else if len == 1 {
                    Some(0)
                } else {
                    None
                }
            })
            .collect();
        if flat.iter().all(Option::is_some) {
            for (k, f) in flat.iter().enumerate() {
                m.strides[k][0] = f.unwrap_or(0);
            }
            return Some(m);
        }
        // Per output axis: (dim, stride in each operand).
        let mut axes: Vec<(i64, [i64; 3])> = Vec::with_capacity(out.len());
        let op_strides: Vec<Vec<i64>> = operands.iter().map(|d| row_major_strides(d)).collect();
        for (i, &d) in out.iter().enumerate() {
            if d == 1 {
                continue;
            }
            let mut st = [0i64; 3];
            for (k, od) in operands.iter().enumerate() {
                let lead = out.len().checked_sub(od.len())?;
                if i >= lead {
                    let j = i - lead;
                    if od[j] == d {
                        st[k] = op_strides[k][j];
                    } else if od[j] != 1 {
                        return None;
                    }
                }
            }
            axes.push((d as i64, st));
        }
        let merged = merge_axes(axes);
        if merged.len() > MAX_RANK {
            return None;
        }
        m.rank = merged.len() as i32;
        for (i, (d, st)) in merged.iter().enumerate() {
            m.dims[i] = *d;
            for (k, &v) in st.iter().enumerate() {
                m.strides[k][i] = v;
            }
        }
        Some(m)
    }
}

/// `true` when `d` broadcasts to `out` (NumPy rules).
fn broadcasts(d: &[usize], out: &[usize]) -> bool {
    d.len() <= out.len() && d.iter().rev().zip(out.iter().rev()).all(|(&a, &b)| a == b || a == 1)
}

/// Merges neighbouring axes `(dim, strides)` where the outer one's stride equals the inner
/// one's stride times the inner dim in every operand (then one loop covers both).
fn merge_axes<const K: usize>(axes: Vec<(i64, [i64; K])>) -> Vec<(i64, [i64; K])> {
    let mut out: Vec<(i64, [i64; K])> = Vec::with_capacity(axes.len());
    for (d, st) in axes {
        if let Some(last) = out.last_mut() {
            if (0..K).all(|k| last.1[k] == st[k] * d) {
                last.0 *= d;
                last.1 = st;
                continue;
            }
        }
        out.push((d, st));
    }
    out
}

/// Up to 8 device addresses by value (`Ptrs8` of binary.cu, AddN's inputs).
#[repr(C)]
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Ptrs8 {
    /// Device addresses; unused slots 0.
    pub p: [u64; 8],
}
// SAFETY: plain `#[repr(C)]` integers, laid out as `struct Ptrs8` in kernels/binary.cu.
unsafe impl DeviceRepr for Ptrs8 {}

/// Reduction metadata of `reduce.cu` (`struct Red`): see that file's header for the
/// meaning of each field.
#[repr(C)]
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RedMeta {
    pub num_out: i64,
    pub r_len: i64,
    pub seg_len: i64,
    pub segs: i64,
    pub count: i64,
    pub k_rank: i32,
    pub r_rank: i32,
    pub per_thread: i32,
    pub out_i64: i32,
    pub k_dims: [i64; MAX_RANK],
    pub k_strides: [i64; MAX_RANK],
    pub r_dims: [i64; MAX_RANK],
    pub r_strides: [i64; MAX_RANK],
}
// SAFETY: plain `#[repr(C)]` integers, laid out as `struct Red` in kernels/reduce.cu.
unsafe impl DeviceRepr for RedMeta {}

/// Largest block of the reduction kernels (`MAX_BLOCK` in reduce.cu).
pub const RED_MAX_BLOCK: u32 = 256;

/// One launch of a reduction kernel.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RedPass {
    /// The kernel's metadata.
    pub meta: RedMeta,
    /// Blocks in the grid.
    pub cfg_grid: u32,
    /// Threads per block (a power of two <= [`RED_MAX_BLOCK`] for the block strategy).
    pub cfg_block: u32,
}

impl RedPass {
    /// The launch configuration.
    pub fn config(&self) -> LaunchConfig {
        LaunchConfig { grid_dim: (self.cfg_grid, 1, 1), block_dim: (self.cfg_block, 1, 1), shared_mem_bytes: 0 }
    }
}

/// A planned reduction: one pass (`first` writes the output) or two (`first` writes
/// `num_out * segs` partials, `second` reduces them into the output).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RedPlan {
    /// `{op}_{dtype}` (one pass) or `{op}_{dtype}_partial`.
    pub first: RedPass,
    /// `{op}_{dtype}_finish`, when the first pass writes partials.
    pub second: Option<RedPass>,
}

impl RedPlan {
    /// Number of partials the first pass writes when there are two passes.
    pub fn partials(&self) -> usize {
        if self.second.is_some() {
            (self.first.meta.num_out * self.first.meta.segs) as usize
        } else {
            0
        }
    }
}

/// Groups at most this long are reduced by one thread each even when contiguous (a block
/// would leave most of its threads idle).
pub const SMALL_GROUP: u64 = 32;

/// A pass over `num_out` outputs of `r_len` elements each, strategy and segments chosen
/// from the layout: block per task when the innermost input axis is reduced
/// (`inner_reduced`, contiguous loads) and groups are longer than [`SMALL_GROUP`], else
/// thread per task (neighbouring threads read neighbouring outputs' elements).
fn pass(mut meta: RedMeta, inner_reduced: bool) -> RedPass {
    let (num_out, r_len) = (meta.num_out.max(1) as u64, meta.r_len.max(0) as u64);
    let by_block = inner_reduced && r_len > SMALL_GROUP;
    let (block, segs) = if by_block {
        let block = (r_len.next_power_of_two()).clamp(32, RED_MAX_BLOCK as u64) as u32;
        let segs = if num_out < 512 && r_len > 4096 { r_len.div_ceil(2048).min(1024u64.div_ceil(num_out)).max(1) } else { 1 };
        (block, segs)
    } else {
        let segs = if num_out < 65536 && r_len > 64 { 65536u64.div_ceil(num_out).min(r_len.div_ceil(32)).max(1) } else { 1 };
        (BLOCK, segs)
    };
    let seg_len = r_len.div_ceil(segs).max(1);
    let segs = if r_len == 0 { 1 } else { r_len.div_ceil(seg_len) };
    meta.seg_len = seg_len as i64;
    meta.segs = segs as i64;
    meta.per_thread = i32::from(!by_block);
    let tasks = num_out * segs;
    let grid = if meta.per_thread == 1 { tasks.div_ceil(BLOCK as u64) } else { tasks }.clamp(1, MAX_GRID) as u32;
    RedPass { meta, cfg_grid: grid, cfg_block: block }
}

/// Plans the reduction of a row-major tensor of `dims` over `axes` (sorted, distinct,
/// in range). `out_i64` is passed through for ArgMax/ArgMin. `None` when more than
/// [`MAX_RANK`] kept or reduced axes remain after merging.
pub fn plan_reduction(dims: &[usize], axes: &[usize], out_i64: bool) -> Option<RedPlan> {
    let strides = row_major_strides(dims);
    let mut kept: Vec<(i64, [i64; 1])> = Vec::new();
    let mut red: Vec<(i64, [i64; 1])> = Vec::new();
    let mut inner_reduced = false;
    for (i, &d) in dims.iter().enumerate() {
        if d == 1 {
            continue;
        }
        let is_red = axes.contains(&i);
        inner_reduced = is_red;
        if is_red { &mut red } else { &mut kept }.push((d as i64, [strides[i]]));
    }
    let (kept, red) = (merge_axes(kept), merge_axes(red));
    if kept.len() > MAX_RANK || red.len() > MAX_RANK {
        return None;
    }
    let num_out: i64 = kept.iter().map(|a| a.0).product();
    let r_len: i64 = axes.iter().map(|&a| dims[a] as i64).product();
    let mut meta = RedMeta {
        num_out,
        r_len,
        seg_len: 0,
        segs: 1,
        count: r_len,
        k_rank: kept.len() as i32,
        r_rank: red.len() as i32,
        per_thread: 0,
        out_i64: i32::from(out_i64),
        k_dims: [0; MAX_RANK],
        k_strides: [0; MAX_RANK],
        r_dims: [0; MAX_RANK],
        r_strides: [0; MAX_RANK],
    };
    for (i, (d, s)) in kept.iter().enumerate() {
        meta.k_dims[i] = *d;
        meta.k_strides[i] = s[0];
    }
    for (i, (d, s)) in red.iter().enumerate() {
        meta.r_dims[i] = *d;
        meta.r_strides[i] = s[0];
    }
    let first = pass(meta, inner_reduced);
    if first.meta.segs <= 1 {
        return Some(RedPlan { first, second: None });
    }
    // Pass 2: partials [segs, num_out], reduced over axis 0.
    let segs = first.meta.segs;
    let mut m2 = RedMeta { r_len: segs, k_rank: 1, r_rank: 1, ..meta };
    m2.k_dims = [0; MAX_RANK];
    m2.k_strides = [0; MAX_RANK];
    m2.r_dims = [0; MAX_RANK];
    m2.r_strides = [0; MAX_RANK];
    m2.k_dims[0] = num_out;
    m2.k_strides[0] = 1;
    m2.r_dims[0] = segs;
    m2.r_strides[0] = num_out;
    // Few outputs: a block per output (parallel over the segments); many: a thread each.
    let mut second = pass(m2, num_out < 256);
    if second.meta.segs != 1 {
        // Never split the second pass: it reads at most a few thousand partials per output.
        second.meta.segs = 1;
        second.meta.seg_len = segs;
        let tasks = num_out as u64;
        second.cfg_grid = if second.meta.per_thread == 1 { tasks.div_ceil(BLOCK as u64) } else { tasks }.clamp(1, MAX_GRID) as u32;
    }
    Some(RedPlan { first, second: Some(second) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_shapes_and_scalars_take_the_flat_path() {
        let m = BcastMeta::new(&[4, 5], &[&[4, 5], &[]]).unwrap();
        assert_eq!((m.rank, m.n, m.strides[0][0], m.strides[1][0]), (0, 20, 1, 0));
        let m = BcastMeta::new(&[4, 5], &[&[1, 1], &[4, 5], &[1]]).unwrap();
        assert_eq!((m.rank, m.strides[0][0], m.strides[1][0], m.strides[2][0]), (0, 0, 1, 0));
    }

    #[test]
    fn broadcasting_strides_and_merging() {
        // [3,4] + [4]: b is broadcast on axis 0.
        let m = BcastMeta::new(&[3, 4], &[&[3, 4], &[4]]).unwrap();
        assert_eq!(m.rank, 2);
        assert_eq!(&m.dims[..2], &[3, 4]);
        assert_eq!(&m.strides[0][..2], &[4, 1]);
        assert_eq!(&m.strides[1][..2], &[0, 1]);
        // [2,3,4] + [2,3,1]: axes 0 and 1 merge (contiguous in both).
        let m = BcastMeta::new(&[2, 3, 4], &[&[2, 3, 4], &[2, 3, 1]]).unwrap();
        assert_eq!(m.rank, 2);
        assert_eq!(&m.dims[..2], &[6, 4]);
        assert_eq!(&m.strides[0][..2], &[4, 1]);
        assert_eq!(&m.strides[1][..2], &[1, 0]);
        // [2,1,4] vs [1,3,1] -> [2,3,4]
        let m = BcastMeta::new(&[2, 3, 4], &[&[2, 1, 4], &[1, 3, 1]]).unwrap();
        assert_eq!(m.rank, 3);
        assert_eq!(&m.strides[0][..3], &[4, 0, 1]);
        assert_eq!(&m.strides[1][..3], &[0, 1, 0]);
        assert!(BcastMeta::new(&[2, 3], &[&[2, 4]]).is_none());
    }

    /// The kernel's `offsets` (binary.cu) in Rust.
    fn kernel_offsets(m: &BcastMeta, i: i64, k: usize) -> i64 {
        if m.rank == 0 {
            return i * m.strides[k][0];
        }
        let (mut rem, mut off) = (i, 0);
        for d in (0..m.rank as usize).rev() {
            off += (rem % m.dims[d]) * m.strides[k][d];
            rem /= m.dims[d];
        }
        off
    }

    #[test]
    fn broadcast_offsets_match_numpy_indexing() {
        let cases: &[(&[usize], &[&[usize]])] = &[
            (&[2, 3, 4], &[&[2, 3, 4], &[3, 1], &[1]]),
            (&[2, 3, 4], &[&[2, 1, 4], &[1, 3, 1], &[4]]),
            (&[5, 1, 6], &[&[1, 1, 6], &[5, 1, 1], &[]]),
            (&[2, 3, 4, 5], &[&[2, 1, 4, 1], &[3, 1, 5], &[2, 3, 4, 5]]),
            (&[7], &[&[7], &[1], &[7]]),
        ];
        for (out, ops) in cases {
            let m = BcastMeta::new(out, ops).unwrap();
            let n: usize = out.iter().product();
            for i in 0..n {
                // unravel i over `out`, then ravel into each operand with its broadcast
                let mut idx = vec![0usize; out.len()];
                let mut rem = i;
                for d in (0..out.len()).rev() {
                    idx[d] = rem % out[d];
                    rem /= out[d];
                }
                for (k, od) in ops.iter().enumerate() {
                    let lead = out.len() - od.len();
                    let st = row_major_strides(od);
                    let want: i64 = (0..od.len()).map(|j| if od[j] == 1 { 0 } else { idx[lead + j] as i64 * st[j] }).sum();
                    assert_eq!(kernel_offsets(&m, i as i64, k), want, "out {out:?} operand {k} {od:?} element {i}");
                }
            }
        }
    }

    /// Reference: each output's offsets enumerated from the plan equal the direct ones.
    fn offsets(m: &RedMeta) -> Vec<Vec<i64>> {
        let dec = |mut i: i64, rank: i32, dims: &[i64], st: &[i64]| {
            let mut off = 0;
            for d in (0..rank as usize).rev() {
                off += (i % dims[d]) * st[d];
                i /= dims[d];
            }
            off
        };
        (0..m.num_out)
            .map(|o| {
                let base = dec(o, m.k_rank, &m.k_dims, &m.k_strides);
                (0..m.r_len).map(|r| base + dec(r, m.r_rank, &m.r_dims, &m.r_strides)).collect()
            })
            .collect()
    }

    fn offs_len(m: &RedMeta) -> (usize, usize) {
        let o = offsets(m);
        (o.len(), o[0].len())
    }

    #[test]
    fn reduction_plans_cover_each_group_exactly() {
        // [2,3,4] over axis 1: outputs (i,k), elements i*12 + j*4 + k.
        let p = plan_reduction(&[2, 3, 4], &[1], false).unwrap();
        let offs = offsets(&p.first.meta);
        assert_eq!(offs.len(), 8);
        assert_eq!(offs[0], vec![0, 4, 8]);
        assert_eq!(offs[5], vec![13, 17, 21]);
        assert_eq!(p.first.meta.per_thread, 1, "innermost axis kept: a thread per output");
        // over axes 0 and 2: outputs j, elements i*12 + j*4 + k
        let p = plan_reduction(&[2, 3, 4], &[0, 2], false).unwrap();
        let offs = offsets(&p.first.meta);
        assert_eq!(offs[1], vec![4, 5, 6, 7, 16, 17, 18, 19]);
        assert_eq!(p.first.meta.per_thread, 1, "short groups: a thread per output");
        let p = plan_reduction(&[2, 3, 40], &[0, 2], false).unwrap();
        assert_eq!(offs_len(&p.first.meta), (3, 80));
        assert_eq!(p.first.meta.per_thread, 0, "innermost axis reduced, long groups: a block per output");
        // all axes of a big tensor: two passes
        let p = plan_reduction(&[1000, 1000], &[0, 1], false).unwrap();
        let s = p.second.expect("two passes");
        assert_eq!(p.first.meta.k_rank, 0);
        assert_eq!(p.first.meta.r_rank, 1, "both reduced axes merge");
        assert!(p.first.meta.segs > 1 && p.first.meta.segs * p.first.meta.seg_len >= 1_000_000);
        assert_eq!((s.meta.num_out, s.meta.r_len, s.meta.segs, s.meta.count), (1, p.first.meta.segs, 1, 1_000_000));
        assert_eq!(p.partials(), p.first.meta.segs as usize);
        // column reduction with few outputs: split into segments as well
        let p = plan_reduction(&[100_000, 4], &[0], true).unwrap();
        assert!(p.second.is_some() && p.first.meta.per_thread == 1 && p.first.meta.out_i64 == 1);
        // size-1 axes vanish, no axes reduced: a copy
        let p = plan_reduction(&[3, 1, 2], &[1], false).unwrap();
        assert_eq!((p.first.meta.num_out, p.first.meta.r_len, p.first.meta.r_rank), (6, 1, 0));
        // empty reduced axis: identity values, one pass
        let p = plan_reduction(&[3, 0], &[1], false).unwrap();
        assert_eq!((p.first.meta.num_out, p.first.meta.r_len, p.second), (3, 0, None));
    }

    #[test]
    fn reduction_groups_match_numpy_for_every_axis_set() {
        for dims in [vec![2usize, 3, 4], vec![3, 1, 5, 2], vec![1, 4, 1], vec![6], vec![2, 2, 2, 2, 2]] {
            let r = dims.len();
            for mask in 0..(1u32 << r) {
                let axes: Vec<usize> = (0..r).filter(|a| mask & (1 << a) != 0).collect();
                let p = plan_reduction(&dims, &axes, false).unwrap();
                let m = p.first.meta;
                // the expected groups: input elements by their kept coordinates, row-major
                let strides = row_major_strides(&dims);
                let n: usize = dims.iter().product();
                let mut groups: std::collections::BTreeMap<Vec<usize>, Vec<i64>> = Default::default();
                for i in 0..n {
                    let mut rem = i;
                    let mut idx = vec![0; r];
                    for d in (0..r).rev() {
                        idx[d] = rem % dims[d];
                        rem /= dims[d];
                    }
                    let key: Vec<usize> = (0..r).filter(|a| !axes.contains(a)).map(|a| idx[a]).collect();
                    groups.entry(key).or_default().push((0..r).map(|d| idx[d] as i64 * strides[d]).sum());
                }
                let want: Vec<Vec<i64>> = groups.into_values().collect();
                assert_eq!(offsets(&m), want, "{dims:?} over {axes:?}");
                assert_eq!(m.count, m.r_len);
                assert!(m.seg_len * m.segs >= m.r_len && (m.segs - 1) * m.seg_len < m.r_len.max(1));
            }
        }
    }

    #[test]
    fn block_sizes_are_powers_of_two() {
        for r in [1usize, 5, 33, 200, 1000, 100_000] {
            let p = plan_reduction(&[7, r], &[1], false).unwrap();
            let b = p.first.cfg_block;
            assert!(b.is_power_of_two() && b <= RED_MAX_BLOCK, "{r}: {b}");
            if let Some(s) = p.second {
                assert!(s.cfg_block.is_power_of_two() && s.cfg_block <= RED_MAX_BLOCK);
            }
        }
    }
}
