//! Dynamic time warping: `Dtw(s, t) -> (cost, path)`, the op behind ADCME's `dtw` (whose
//! kernel is the FastDTW custom op), and its gradient kernel `DtwGrad`.
//!
//! The cost of aligning `s[0..n)` with `t[0..m)` is the least sum of `|s[i] - t[j]|` over a
//! warping path from `(0, 0)` to `(n-1, m-1)` whose steps are `(1, 0)`, `(0, 1)` or
//! `(1, 1)` (Sakoe & Chiba 1978; the local cost FastDTW uses for scalar series):
//! `D[i][j] = |s[i] - t[j]| + min(D[i-1][j-1], D[i-1][j], D[i][j-1])`, computed exactly
//! by dynamic programming in O(nm) time and memory. ADCME's `use_fast` selects FastDTW's
//! approximation (Salvador & Chan 2007), whose cost can only be higher; this op is always
//! exact, so it is refused, with an error naming the sizes, when the table would pass
//! [`MAX_CELLS`].
//!
//! The cost is piecewise linear in `s` and `t`: on a fixed optimal path its gradient is
//! `∂cost/∂s[i] = Σ_{(i,j) on the path} sign(s[i] - t[j])` and `∂cost/∂t[j]` the negated
//! sum over `j`'s pairs (`DtwGrad`), the path being the op's second output. Ties between
//! predecessors go to the diagonal step, then to `(i-1, j)`.

use super::*;
use crate::NodeSpec;

/// The largest `(n + 1) * (m + 1)` cost table `Dtw` builds (2^27 cells, 1 GiB of f64).
pub const MAX_CELLS: usize = 1 << 27;

fn series_len(ctx: &InferCtx, k: usize, what: &str) -> Result<()> {
    let x = &ctx.inputs[k];
    ctx.require_float(x.dtype)?;
    if x.shape.rank() != 1 {
        return Err(ctx.invalid(format!("{what} must be a vector (a time series), got shape {}", x.shape)));
    }
    Ok(())
}

fn infer_dtw(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    series_len(ctx, 0, "s")?;
    series_len(ctx, 1, "t")?;
    let (s, t) = (&ctx.inputs[0], &ctx.inputs[1]);
    if s.dtype != t.dtype {
        return Err(ctx.dtype_error(s.dtype, t.dtype, " (s and t must have one dtype)"));
    }
    Ok(vec![TensorType::new(s.dtype, Shape::scalar()), TensorType::new(DType::Int64, Shape(vec![crate::shape::UNKNOWN, 2]))])
}

/// The exact DTW cost of `s` and `t` and an optimal path, `(i, j)` pairs from `(0, 0)` to
/// `(n-1, m-1)`; `None` when the table would pass [`MAX_CELLS`]. A NaN in either series
/// makes the cost NaN. Empty series have cost 0
/// and an empty path when both are empty, infinite cost otherwise (no path exists).
pub fn dtw(s: &[f64], t: &[f64]) -> Option<(f64, Vec<(usize, usize)>)> {
    let (n, m) = (s.len(), t.len());
    let w = m + 1;
    if (n + 1).checked_mul(w)? > MAX_CELLS {
        return None;
    }
    if n == 0 || m == 0 {
        return Some((if n == m { 0.0 } else { f64::INFINITY }, Vec::new()));
    }
    // d[(i + 1) * w + (j + 1)] = D[i][j]; row 0 and column 0 are the boundary
    let mut d = vec![f64::INFINITY; (n + 1) * w];
    d[0] = 0.0;
    for (i, &si) in s.iter().enumerate() {
        let (prev, cur) = d[i * w..(i + 2) * w].split_at_mut(w);
        for (j, &tj) in t.iter().enumerate() {
            let best = prev[j].min(prev[j + 1]).min(cur[j]);
            cur[j + 1] = (si - tj).abs() + best;
        }
    }
    let mut path = Vec::with_capacity(n + m);
    let (mut i, mut j) = (n, m);
    loop {
        path.push((i - 1, j - 1));
        if i == 1 && j == 1 {
            break;
        }
        let (diag, up, left) = (d[(i - 1) * w + j - 1], d[(i - 1) * w + j], d[i * w + j - 1]);
        // on the first row or column one way is left (NaN costs compare false everywhere)
        if i == 1 {
            j -= 1;
        } else if j == 1 {
            i -= 1;
        } else if diag <= up && diag <= left {
            i -= 1;
            j -= 1;
        } else if up <= left {
            i -= 1;
        } else {
            j -= 1;
        }
    }
    path.reverse();
    // a NaN in a series makes the distance NaN, as in any TF op; the table itself skips
    // NaN cells (`f64::min` ignores NaN), which would leave a finite or infinite cost
    let nan = s.iter().chain(t).any(|v| v.is_nan());
    Some((if nan { f64::NAN } else { d[n * w + m] }, path))
}

fn too_large(ctx: &KernelCtx, n: usize, m: usize) -> OxiflowError {
    ctx.error(format!(
        "series of lengths {n} and {m} need a {}x{} cost table, more than the {MAX_CELLS} cells exact DTW allows here; shorten or downsample them",
        n + 1,
        m + 1
    ))
}

fn kernel_dtw(ctx: &KernelCtx) -> Result<Outputs> {
    let (s, t) = (ctx.inputs[0].to_f64_vec(), ctx.inputs[1].to_f64_vec());
    let (cost, path) = dtw(&s, &t).ok_or_else(|| too_large(ctx, s.len(), t.len()))?;
    let cost = float_like(&ctx.inputs[0], &[], vec![cost])?;
    let flat: Vec<i64> = path.iter().flat_map(|&(i, j)| [i as i64, j as i64]).collect();
    let path = Tensor::from_vec(&[path.len(), 2], flat, crate::tensor::Layout::RowMajor)?;
    Ok(smallvec![cost, path])
}

/// `DtwGrad(dcost, s, t, path) -> (ds, dt)`: the gradient of `Dtw` along its path;
/// `dcost` a scalar of the series' dtype, `path` `Int64 [k, 2]` pairs of indices.
fn infer_dtw_grad(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    series_len(ctx, 1, "s")?;
    series_len(ctx, 2, "t")?;
    let (dc, s, t, path) = (&ctx.inputs[0], &ctx.inputs[1], &ctx.inputs[2], &ctx.inputs[3]);
    if s.dtype != t.dtype || dc.dtype != s.dtype {
        return Err(ctx.dtype_error(s.dtype, if s.dtype != t.dtype { t.dtype } else { dc.dtype }, " (dcost, s and t must have one dtype)"));
    }
    if dc.shape.rank() != 0 {
        return Err(ctx.invalid(format!("dcost must be a scalar, got shape {}", dc.shape)));
    }
    if path.dtype != DType::Int64 || Shape(vec![crate::shape::UNKNOWN, 2]).merge(&path.shape).is_none() {
        return Err(ctx.invalid(format!("path must be Int64 [k, 2], got {} {}", path.dtype, path.shape)));
    }
    Ok(vec![s.clone(), t.clone()])
}

fn kernel_dtw_grad(ctx: &KernelCtx) -> Result<Outputs> {
    let dy = ctx.inputs[0].to_f64_vec()[0];
    let (s, t) = (ctx.inputs[1].to_f64_vec(), ctx.inputs[2].to_f64_vec());
    let path = ctx.inputs[3].to_f64_vec();
    let (mut ds, mut dt) = (vec![0.0; s.len()], vec![0.0; t.len()]);
    for p in path.chunks_exact(2) {
        if !(0.0..s.len() as f64).contains(&p[0]) || !(0.0..t.len() as f64).contains(&p[1]) {
            return Err(ctx.error(format!("path pair ({}, {}) is outside series of lengths {} and {}", p[0], p[1], s.len(), t.len())));
        }
        let (i, j) = (p[0] as usize, p[1] as usize);
        let g = dy * (s[i] - t[j]).signum() * f64::from(s[i] != t[j]);
        ds[i] += g;
        dt[j] -= g;
    }
    let (n, m) = (ds.len(), dt.len());
    Ok(smallvec![float_like(&ctx.inputs[1], &[n], ds)?, float_like(&ctx.inputs[2], &[m], dt)?])
}

fn grad_dtw(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let Some(dy) = grads[0] else { return Ok(vec![None, None]) };
    let path = Output::new(node.id, 1);
    let gn = g.add_node(NodeSpec::new("DtwGrad", &[dy, node.inputs[0], node.inputs[1], path]))?;
    Ok(vec![Some(Output::new(gn, 0)), Some(Output::new(gn, 1))])
}

pub(crate) fn register(r: &mut Registry) {
    r.add(super::math::def("Dtw", "Dtw", Arity::Fixed(2), infer_dtw, kernel_dtw, GpuSupport::None, Some(grad_dtw)));
    r.add(super::math::def("DtwGrad", "DtwGrad", Arity::Fixed(4), infer_dtw_grad, kernel_dtw_grad, GpuSupport::None, None));
}

#[cfg(test)]
mod tests {
    use super::dtw;

    /// Every warping path of an `n`-by-`m` pair, by recursion: the oracle for small sizes.
    fn all_paths(n: usize, m: usize) -> Vec<Vec<(usize, usize)>> {
        fn go(i: usize, j: usize, n: usize, m: usize, cur: &mut Vec<(usize, usize)>, out: &mut Vec<Vec<(usize, usize)>>) {
            cur.push((i, j));
            if (i, j) == (n - 1, m - 1) {
                out.push(cur.clone());
            } else {
                for (di, dj) in [(1, 0), (0, 1), (1, 1)] {
                    if i + di < n && j + dj < m {
                        go(i + di, j + dj, n, m, cur, out);
                    }
                }
            }
            cur.pop();
        }
        let mut out = Vec::new();
        go(0, 0, n, m, &mut Vec::new(), &mut out);
        out
    }

    #[test]
    fn exact_cost_and_path_match_brute_force() {
        let mut seed = 7u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) % 1000) as f64 / 100.0
        };
        for (n, m) in [(1, 1), (1, 4), (3, 2), (4, 4), (5, 3), (6, 5)] {
            let s: Vec<f64> = (0..n).map(|_| next()).collect();
            let t: Vec<f64> = (0..m).map(|_| next()).collect();
            let cost_of = |p: &[(usize, usize)]| p.iter().map(|&(i, j)| (s[i] - t[j]).abs()).sum::<f64>();
            let best = all_paths(n, m).iter().map(|p| cost_of(p)).fold(f64::INFINITY, f64::min);
            let (cost, path) = dtw(&s, &t).unwrap();
            assert!((cost - best).abs() < 1e-12, "{n}x{m}: {cost} against {best}");
            assert!((cost_of(&path) - cost).abs() < 1e-12, "the path's own cost is the cost");
            assert!(all_paths(n, m).contains(&path), "{path:?} is a warping path");
        }
        // ADCME's documentation example
        let (cost, _) = dtw(&[1.0, 2.0, 3.0, 5.0, 5.0, 5.0, 6.0], &[1.0, 1.0, 2.0, 2.0, 3.0, 5.0]).unwrap();
        assert_eq!(cost, 1.0);
        assert_eq!(dtw(&[], &[]).unwrap(), (0.0, vec![]));
        assert!(dtw(&[1.0], &[]).unwrap().0.is_infinite());
        assert!(dtw(&vec![0.0; 20_000], &vec![0.0; 20_000]).is_none());
    }

    /// A NaN in a series (missing data) gives a NaN cost, an infinity an infinite one, and
    /// both still a warping path; the traceback used to step past the table's edge on NaN
    /// costs.
    #[test]
    fn nan_and_infinite_values_give_a_path() {
        for (s, t, want_nan) in [
            (vec![1.0, f64::NAN, 3.0, 4.0], vec![1.0, 2.0, 3.0], true),
            (vec![f64::NAN; 3], vec![f64::NAN; 5], true),
            (vec![0.0, 1.0], vec![f64::INFINITY, 2.0, f64::NEG_INFINITY], false),
        ] {
            let (cost, path) = dtw(&s, &t).unwrap();
            assert!(if want_nan { cost.is_nan() } else { cost == f64::INFINITY }, "{s:?} {t:?}: cost {cost}");
            assert!(all_paths(s.len(), t.len()).contains(&path), "{path:?} is a warping path");
        }
    }
}
