//! Exact optimal transport: `OtNetwork(a, b, M) -> (P, loss, basis)`, the op behind ADCME's
//! `emd` and `empirical_emd` (ADCME loads it as its `ot_network` custom op), and its
//! gradient kernel `OtNetworkGrad`.
//!
//! `P` minimizes `loss = Σ P_ij M_ij` over the plans with row sums `a` and column sums `b`
//! (the transportation problem, Hitchcock 1941). It is solved by the transportation simplex
//! (Dantzig 1951; the network simplex on the bipartite graph): a northwest-corner spanning
//! tree of `m + n - 1` basic cells, node potentials `u_i + v_j = M_ij` on the tree, an
//! entering cell of negative reduced cost `M_ij - u_i - v_j` found by block pricing, and
//! the ratio test on the cycle the cell closes. After 50 degenerate pivots in a row the
//! pricing and the ratio test switch to Bland's rule (least index) until a pivot moves
//! flow, so the method cannot cycle. `basis` lists the final tree's cells.
//!
//! Gradients (LP duality; as POT's `emd2`): `∂loss/∂M = P`; `∂loss/∂a = u - mean(u)` and
//! `∂loss/∂b = v - mean(v)` (the potentials are defined up to a shift that the equal sums
//! of `a` and `b` make irrelevant; POT centers them). `P` is piecewise constant in `M` and,
//! on a fixed basis, linear in `a` and `b`: an upstream gradient `G` on `P` adds the
//! potentials of the costs `G` on the same tree to `a`'s and `b`'s gradients and nothing to
//! `M`'s. `OtNetworkGrad` solves the potentials of `G + g·M` (`g` the loss's upstream
//! gradient) once.

use super::*;
use crate::NodeSpec;

/// An optimal plan of the transportation problem ([`transport`]).
#[derive(Clone, Debug)]
pub struct Transport {
    /// `m × n` row-major.
    pub flow: Vec<f64>,
    /// The spanning tree's cells `(i, j)`, `m + n - 1` of them.
    pub basis: Vec<(usize, usize)>,
    /// `Σ flow_ij cost_ij`.
    pub cost: f64,
    /// Simplex pivots taken.
    pub pivots: usize,
}

/// Consecutive degenerate pivots after which Bland's rule takes over.
const DEGENERATE_RUN: usize = 50;

/// Node potentials on the tree of `basis` (rows `0..m`, then columns) with
/// `pot[i] + pot[m + j] = cost[i * n + j]` on every basic cell and `pot[0] = 0`, and the
/// tree's parent links (node, cell index) and depths from node 0.
struct Tree {
    pot: Vec<f64>,
    parent: Vec<(usize, usize)>,
    depth: Vec<usize>,
}

fn tree(m: usize, n: usize, basis: &[(usize, usize)], cost: &[f64]) -> std::result::Result<Tree, String> {
    let nodes = m + n;
    // adjacency in CSR form: (neighbour, cell) per node
    let mut start = vec![0usize; nodes + 1];
    for &(i, j) in basis {
        start[i + 1] += 1;
        start[m + j + 1] += 1;
    }
    for k in 0..nodes {
        start[k + 1] += start[k];
    }
    let mut fill = start.clone();
    let mut adj = vec![(0usize, 0usize); 2 * basis.len()];
    for (c, &(i, j)) in basis.iter().enumerate() {
        adj[fill[i]] = (m + j, c);
        fill[i] += 1;
        adj[fill[m + j]] = (i, c);
        fill[m + j] += 1;
    }
    let none = (usize::MAX, usize::MAX);
    let (mut pot, mut parent, mut depth) = (vec![0.0; nodes], vec![none; nodes], vec![0usize; nodes]);
    let mut seen = vec![false; nodes];
    let mut queue = Vec::with_capacity(nodes);
    seen[0] = true;
    queue.push(0);
    let mut head = 0;
    while head < queue.len() {
        let k = queue[head];
        head += 1;
        for &(nb, c) in &adj[start[k]..start[k + 1]] {
            if seen[nb] {
                continue;
            }
            seen[nb] = true;
            let (i, j) = basis[c];
            pot[nb] = cost[i * n + j] - pot[k];
            parent[nb] = (k, c);
            depth[nb] = depth[k] + 1;
            queue.push(nb);
        }
    }
    if queue.len() != nodes {
        return Err(format!("internal: the basis of {} cells does not span the {m} + {n} nodes", basis.len()));
    }
    Ok(Tree { pot, parent, depth })
}

/// The potentials `(u, v)` of `cost` on the spanning tree `basis` (`u[0] = 0`).
pub fn potentials(m: usize, n: usize, basis: &[(usize, usize)], cost: &[f64]) -> std::result::Result<(Vec<f64>, Vec<f64>), String> {
    let t = tree(m, n, basis, cost)?;
    Ok((t.pot[..m].to_vec(), t.pot[m..].to_vec()))
}

/// The northwest-corner basic solution: a staircase of exactly `m + n - 1` cells from
/// `(0, 0)` to `(m-1, n-1)`, each step moving down when the row's supply is the smaller
/// remainder and right otherwise (zero flows where both run out together).
fn northwest(a: &[f64], b: &[f64]) -> (Vec<(usize, usize)>, Vec<f64>) {
    let (m, n) = (a.len(), b.len());
    let (mut s, mut d) = (a[0], b[0]);
    let (mut i, mut j) = (0, 0);
    let (mut cells, mut flows) = (Vec::with_capacity(m + n - 1), Vec::with_capacity(m + n - 1));
    loop {
        let x = s.min(d).max(0.0);
        cells.push((i, j));
        flows.push(x);
        s -= x;
        d -= x;
        let down = j == n - 1 || (i < m - 1 && s <= d);
        if i == m - 1 && j == n - 1 {
            break;
        }
        if down {
            i += 1;
            s = a[i];
        } else {
            j += 1;
            d = b[j];
        }
    }
    (cells, flows)
}

/// Solves `min Σ P_ij cost_ij` over `P >= 0` with row sums `a` and column sums `b`
/// (`cost` row-major `m × n`), in at most `max_iter` pivots. Errors (messages for the op's
/// error): empty sides, negative or non-finite weights or costs, sums that differ by more
/// than `1e-8` relative, and an optimum not reached in `max_iter` pivots.
pub fn transport(a: &[f64], b: &[f64], cost: &[f64], max_iter: usize) -> std::result::Result<Transport, String> {
    transport_with(a, b, cost, max_iter, DEGENERATE_RUN)
}

/// [`transport`] switching to Bland's rule after `degenerate_run` degenerate pivots in a row
/// (0: Bland's rule throughout).
pub(crate) fn transport_with(a: &[f64], b: &[f64], cost: &[f64], max_iter: usize, degenerate_run: usize) -> std::result::Result<Transport, String> {
    let (m, n) = (a.len(), b.len());
    if m == 0 || n == 0 {
        return Err(format!("a and b must not be empty, got lengths {m} and {n}"));
    }
    if cost.len() != m * n {
        return Err(format!("M must be {m}x{n} for a of length {m} and b of length {n}, got {} entries", cost.len()));
    }
    if let Some(w) = a.iter().chain(b).find(|w| !(w.is_finite() && **w >= 0.0)) {
        return Err(format!("the weights a and b must be finite and non-negative, got {w}"));
    }
    if let Some(c) = cost.iter().find(|c| !c.is_finite()) {
        return Err(format!("the costs M must be finite, got {c}"));
    }
    let (sa, sb): (f64, f64) = (a.iter().sum(), b.iter().sum());
    if (sa - sb).abs() > 1e-8 * sa.max(sb).max(f64::MIN_POSITIVE) {
        return Err(format!("a and b must have equal sums, got {sa} and {sb}"));
    }
    let (mut basis, mut flows) = northwest(a, b);
    let scale = cost.iter().fold(0.0f64, |s, c| s.max(c.abs()));
    let tol = 1e-10 * scale.max(f64::MIN_POSITIVE);
    let mut in_basis = vec![false; m * n];
    for &(i, j) in &basis {
        in_basis[i * n + j] = true;
    }
    let block = ((m * n) as f64).sqrt().ceil().max(32.0) as usize;
    let (mut next, mut pivots, mut degenerate) = (0usize, 0usize, 0usize);
    loop {
        let t = tree(m, n, &basis, cost)?;
        let reduced = |k: usize| cost[k] - t.pot[k / n] - t.pot[m + k % n];
        let bland = degenerate >= degenerate_run;
        let entering = if bland {
            (0..m * n).find(|&k| !in_basis[k] && reduced(k) < -tol)
        } else {
            // block pricing: the most negative reduced cost of the first block (from where
            // the last search stopped) that has one
            let mut found = None;
            let mut scanned = 0;
            while scanned < m * n && found.is_none() {
                let (mut best, mut arg) = (-tol, None);
                for _ in 0..block.min(m * n - scanned) {
                    let k = next;
                    next = if next + 1 == m * n { 0 } else { next + 1 };
                    if !in_basis[k] {
                        let r = reduced(k);
                        if r < best {
                            best = r;
                            arg = Some(k);
                        }
                    }
                }
                scanned += block;
                found = arg;
            }
            found
        };
        let Some(k) = entering else { break };
        if pivots == max_iter {
            return Err(format!("no optimal plan after {max_iter} simplex pivots ({m}x{n} problem); raise iter"));
        }
        pivots += 1;
        let (ei, ej) = (k / n, k % n);
        // the tree path from column ej to row ei, as basis cells in path order
        let (mut x, mut y) = (m + ej, ei);
        let (mut from_col, mut from_row) = (Vec::new(), Vec::new());
        while t.depth[x] > t.depth[y] {
            from_col.push(t.parent[x].1);
            x = t.parent[x].0;
        }
        while t.depth[y] > t.depth[x] {
            from_row.push(t.parent[y].1);
            y = t.parent[y].0;
        }
        while x != y {
            from_col.push(t.parent[x].1);
            x = t.parent[x].0;
            from_row.push(t.parent[y].1);
            y = t.parent[y].0;
        }
        from_row.reverse();
        let path: Vec<usize> = from_col.into_iter().chain(from_row).collect();
        // signs alternate along the path, starting with a decrease next to column ej; the
        // leaving cell is the decreasing one of least flow (Bland: of least index on ties)
        let mut leave = path[0];
        for &c in path.iter().step_by(2) {
            let (fc, fl) = (flows[c], flows[leave]);
            let key = |c: usize| basis[c].0 * n + basis[c].1;
            if fc < fl || (bland && fc == fl && key(c) < key(leave)) {
                leave = c;
            }
        }
        let theta = flows[leave];
        for (p, &c) in path.iter().enumerate() {
            if p % 2 == 0 {
                flows[c] -= theta;
            } else {
                flows[c] += theta;
            }
        }
        degenerate = if theta > 0.0 { 0 } else { degenerate + 1 };
        let (li, lj) = basis[leave];
        in_basis[li * n + lj] = false;
        in_basis[k] = true;
        basis[leave] = (ei, ej);
        flows[leave] = theta;
    }
    let mut flow = vec![0.0; m * n];
    let mut total = 0.0;
    for (&(i, j), &f) in basis.iter().zip(&flows) {
        let f = f.max(0.0);
        flow[i * n + j] = f;
        total += f * cost[i * n + j];
    }
    Ok(Transport { flow, basis, cost: total, pivots })
}

fn infer_ot(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let (a, b, c) = (&ctx.inputs[0], &ctx.inputs[1], &ctx.inputs[2]);
    ctx.require_float(c.dtype)?;
    for (x, what) in [(a, "a"), (b, "b")] {
        if x.dtype != c.dtype {
            return Err(ctx.dtype_error(x.dtype, c.dtype, format!(" ({what} and M must have one dtype)")));
        }
        if x.shape.rank() != 1 {
            return Err(ctx.invalid(format!("{what} must be a vector of weights, got shape {}", x.shape)));
        }
    }
    if c.shape.rank() != 2 {
        return Err(ctx.invalid(format!("M must be a matrix of costs, got shape {}", c.shape)));
    }
    let (ad, bd, cd) = (a.shape.dims(), b.shape.dims(), c.shape.dims());
    let known = |d: usize| d != crate::shape::UNKNOWN;
    if (known(ad[0]) && known(cd[0]) && ad[0] != cd[0]) || (known(bd[0]) && known(cd[1]) && bd[0] != cd[1]) {
        return Err(ctx.invalid(format!("M of shape {} does not match a of shape {} and b of shape {}", c.shape, a.shape, b.shape)));
    }
    Ok(vec![c.clone(), TensorType::new(c.dtype, Shape::scalar()), TensorType::new(DType::Int64, Shape(vec![crate::shape::UNKNOWN, 2]))])
}

fn kernel_ot(ctx: &KernelCtx) -> Result<Outputs> {
    let max_iter = ctx.node.attrs.get_int("OtNetwork", "max_iter")?;
    let max_iter = usize::try_from(max_iter).map_err(|_| ctx.error(format!("max_iter must be >= 0, got {max_iter}")))?;
    let (a, b) = (ctx.inputs[0].to_f64_vec(), ctx.inputs[1].to_f64_vec());
    let m_dims = ctx.inputs[2].dims().to_vec();
    if m_dims != [a.len(), b.len()] {
        return Err(ctx.error(format!("M of shape {m_dims:?} does not match a of length {} and b of length {}", a.len(), b.len())));
    }
    let cost = ctx.inputs[2].to_f64_vec();
    let t = transport(&a, &b, &cost, max_iter).map_err(|e| ctx.error(e))?;
    let like = &ctx.inputs[2];
    let basis: Vec<i64> = t.basis.iter().flat_map(|&(i, j)| [i as i64, j as i64]).collect();
    Ok(smallvec![
        float_like(like, &m_dims, t.flow)?,
        float_like(like, &[], vec![t.cost])?,
        Tensor::from_vec(&[t.basis.len(), 2], basis, crate::tensor::Layout::RowMajor)?
    ])
}

/// `OtNetworkGrad(dP, dloss, M, P, basis) -> (da, db, dM)`: `M` a float `[m, n]` cost
/// matrix, `dP` and `P` of its dtype and shape, `dloss` a scalar of its dtype, `basis` the
/// `Int64 [k, 2]` cells of the forward op's spanning tree.
fn infer_ot_grad(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let c = &ctx.inputs[2];
    ctx.require_float(c.dtype)?;
    if c.shape.rank() != 2 {
        return Err(ctx.invalid(format!("M must be a matrix, got shape {}", c.shape)));
    }
    for (k, what) in [(0, "dP"), (3, "P")] {
        let t = &ctx.inputs[k];
        if t.dtype != c.dtype {
            return Err(ctx.dtype_error(c.dtype, t.dtype, format!(" ({what} and M must have one dtype)")));
        }
        if t.shape.merge(&c.shape).is_none() {
            return Err(ctx.shape_error(&c.shape, &t.shape, format!(" ({what} must have M's shape)")));
        }
    }
    let dl = &ctx.inputs[1];
    if dl.dtype != c.dtype || dl.shape.rank() != 0 {
        return Err(ctx.invalid(format!("dloss must be a {} scalar, got {} {}", c.dtype, dl.dtype, dl.shape)));
    }
    let basis = &ctx.inputs[4];
    if basis.dtype != DType::Int64 || Shape(vec![crate::shape::UNKNOWN, 2]).merge(&basis.shape).is_none() {
        return Err(ctx.invalid(format!("basis must be Int64 [k, 2], got {} {}", basis.dtype, basis.shape)));
    }
    let d = c.shape.dims();
    let vector = |k: usize| TensorType::new(c.dtype, Shape(vec![d[k]]));
    Ok(vec![vector(0), vector(1), c.clone()])
}

fn kernel_ot_grad(ctx: &KernelCtx) -> Result<Outputs> {
    let dims = ctx.inputs[2].dims().to_vec();
    let (m, n) = (dims[0], dims[1]);
    if m == 0 || n == 0 {
        return Err(ctx.error(format!("M of shape {dims:?} is empty: a transport plan needs a source and a sink")));
    }
    let gl = ctx.inputs[1].to_f64_vec()[0];
    let (gp, cost, p) = (ctx.inputs[0].to_f64_vec(), ctx.inputs[2].to_f64_vec(), ctx.inputs[3].to_f64_vec());
    let raw = ctx.inputs[4].to_f64_vec();
    let mut basis = Vec::with_capacity(raw.len() / 2);
    for c in raw.chunks_exact(2) {
        let (i, j) = (c[0], c[1]);
        if !(0.0..m as f64).contains(&i) || !(0.0..n as f64).contains(&j) {
            return Err(ctx.error(format!("basis cell ({i}, {j}) is outside the {m}x{n} plan")));
        }
        basis.push((i as usize, j as usize));
    }
    let c: Vec<f64> = gp.iter().zip(&cost).map(|(g, c)| g + gl * c).collect();
    let (mut u, mut v) = potentials(m, n, &basis, &c).map_err(|e| ctx.error(e))?;
    for w in [&mut u, &mut v] {
        let mean = w.iter().sum::<f64>() / w.len() as f64;
        w.iter_mut().for_each(|x| *x -= mean);
    }
    let like = &ctx.inputs[2];
    let dm: Vec<f64> = p.iter().map(|x| gl * x).collect();
    Ok(smallvec![float_like(like, &[m], u)?, float_like(like, &[n], v)?, float_like(like, &dims, dm)?])
}

fn grad_ot(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    if grads[0].is_none() && grads[1].is_none() {
        return Ok(vec![None, None, None]);
    }
    let (p, loss) = (Output::new(node.id, 0), Output::new(node.id, 1));
    let dp = match grads[0] {
        Some(d) => d,
        None => Output::new(g.add_node(NodeSpec::new("ZerosLike", &[p]))?, 0),
    };
    let dl = match grads[1] {
        Some(d) => d,
        None => Output::new(g.add_node(NodeSpec::new("ZerosLike", &[loss]))?, 0),
    };
    let gn = g.add_node(NodeSpec::new("OtNetworkGrad", &[dp, dl, node.inputs[2], p, Output::new(node.id, 2)]))?;
    Ok(vec![Some(Output::new(gn, 0)), Some(Output::new(gn, 1)), Some(Output::new(gn, 2))])
}

pub(crate) fn register(r: &mut Registry) {
    r.add(
        super::math::def("OtNetwork", "OtNetwork", Arity::Fixed(3), infer_ot, kernel_ot, GpuSupport::None, Some(grad_ot)).with_attrs(attrs!["max_iter" => Int]),
    );
    r.add(super::math::def("OtNetworkGrad", "OtNetworkGrad", Arity::Fixed(5), infer_ot_grad, kernel_ot_grad, GpuSupport::None, None));
}

#[cfg(test)]
#[path = "emd_tests.rs"]
mod tests;
