//! Oracles for the transportation simplex: brute force over permutations (uniform weights,
//! where an optimum is a permutation matrix by Birkhoff's theorem), the closed form of the
//! 1-D distance `∫|F - G|` for the cost `|x - y|`, and an LP optimality certificate
//! (feasible plan, dual-feasible potentials, equal primal and dual objectives).

use super::{potentials, transport, transport_with};

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn weights(r: &mut Lcg, k: usize) -> Vec<f64> {
    let w: Vec<f64> = (0..k).map(|_| 0.1 + r.next()).collect();
    let s: f64 = w.iter().sum();
    w.into_iter().map(|x| x / s).collect()
}

/// The plan is feasible, the potentials of the basis are dual feasible, and the primal and
/// dual objectives agree: the plan is optimal (LP duality), whatever found it.
fn certify(a: &[f64], b: &[f64], cost: &[f64], what: &str) -> f64 {
    // block pricing (Bland's rule only after degenerate runs), and Bland's rule throughout
    let c = certify_with(a, b, cost, what, 50);
    let bland = certify_with(a, b, cost, &format!("{what} (Bland)"), 0);
    let scale = cost.iter().fold(1.0f64, |s, c| s.max(c.abs()));
    assert!((bland - c).abs() < 1e-9 * scale, "{what}: Bland's rule reached {bland} against {c}");
    c
}

fn certify_with(a: &[f64], b: &[f64], cost: &[f64], what: &str, degenerate_run: usize) -> f64 {
    let (m, n) = (a.len(), b.len());
    let t = transport_with(a, b, cost, 1_000_000, degenerate_run).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(t.basis.len(), m + n - 1, "{what}: a spanning tree");
    for (i, &ai) in a.iter().enumerate() {
        let s: f64 = t.flow[i * n..(i + 1) * n].iter().sum();
        assert!((s - ai).abs() < 1e-12, "{what}: row {i} sums to {s}, not {ai}");
    }
    for (j, &bj) in b.iter().enumerate() {
        let s: f64 = (0..m).map(|i| t.flow[i * n + j]).sum();
        assert!((s - bj).abs() < 1e-12, "{what}: column {j} sums to {s}, not {bj}");
    }
    assert!(t.flow.iter().all(|&f| f >= 0.0), "{what}: a negative flow");
    let (u, v) = potentials(m, n, &t.basis, cost).unwrap();
    let scale = cost.iter().fold(1.0f64, |s, c| s.max(c.abs()));
    for i in 0..m {
        for j in 0..n {
            assert!(u[i] + v[j] <= cost[i * n + j] + 1e-9 * scale, "{what}: reduced cost of ({i}, {j}) is negative");
        }
    }
    let dual: f64 = a.iter().zip(&u).map(|(x, y)| x * y).sum::<f64>() + b.iter().zip(&v).map(|(x, y)| x * y).sum::<f64>();
    let primal: f64 = t.flow.iter().zip(cost).map(|(f, c)| f * c).sum();
    assert!((primal - dual).abs() < 1e-9 * scale, "{what}: primal {primal} against dual {dual}");
    assert!((primal - t.cost).abs() < 1e-12 * scale, "{what}: the reported cost");
    t.cost
}

fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for k in 0..n {
            let mut q = p.clone();
            q.insert(k, n - 1);
            out.push(q);
        }
    }
    out
}

#[test]
fn uniform_weights_reach_the_best_assignment() {
    let mut r = Lcg(3);
    for n in 1..=6 {
        for round in 0..4 {
            // round 0: integer costs in 0..3 (many ties, highly degenerate pivots)
            let cost: Vec<f64> = (0..n * n).map(|_| if round == 0 { (r.next() * 4.0).floor() } else { r.next() * 10.0 }).collect();
            let w = vec![1.0 / n as f64; n];
            let best =
                permutations(n).iter().map(|p| p.iter().enumerate().map(|(i, &j)| cost[i * n + j]).sum::<f64>() / n as f64).fold(f64::INFINITY, f64::min);
            let got = certify(&w, &w, &cost, &format!("assignment n={n} round={round}"));
            assert!((got - best).abs() < 1e-12, "n={n}: {got} against the best permutation's {best}");
        }
    }
}

#[test]
fn one_dimensional_costs_match_the_closed_form() {
    // W1 between discrete measures on the line = ∫ |F(x) - G(x)| dx
    let mut r = Lcg(11);
    for (m, n) in [(1, 1), (1, 5), (4, 3), (7, 9), (20, 15), (40, 40)] {
        let (xs, ys): (Vec<f64>, Vec<f64>) = ((0..m).map(|_| r.next() * 5.0).collect(), (0..n).map(|_| r.next() * 5.0 - 1.0).collect());
        let (a, b) = (weights(&mut r, m), weights(&mut r, n));
        let cost: Vec<f64> = (0..m * n).map(|k| (xs[k / n] - ys[k % n]).abs()).collect();
        let mut pts: Vec<(f64, f64)> = xs.iter().zip(&a).map(|(&x, &w)| (x, w)).chain(ys.iter().zip(&b).map(|(&y, &w)| (y, -w))).collect();
        pts.sort_by(|p, q| p.0.partial_cmp(&q.0).unwrap());
        let (mut diff, mut w1) = (0.0, 0.0);
        for k in 0..pts.len() - 1 {
            diff += pts[k].1;
            w1 += diff.abs() * (pts[k + 1].0 - pts[k].0);
        }
        let got = certify(&a, &b, &cost, &format!("1-D {m}x{n}"));
        assert!((got - w1).abs() < 1e-10, "{m}x{n}: {got} against ∫|F - G| = {w1}");
    }
}

#[test]
fn random_and_degenerate_problems_are_certified_optimal() {
    let mut r = Lcg(5);
    for (m, n) in [(2, 3), (5, 5), (8, 3), (30, 25), (60, 80)] {
        let (a, b) = (weights(&mut r, m), weights(&mut r, n));
        let cost: Vec<f64> = (0..m * n).map(|_| r.next()).collect();
        certify(&a, &b, &cost, &format!("random {m}x{n}"));
        // equal partial sums (northwest ties), zero weights and constant costs
        let (a2, b2) = (vec![0.25; 4], vec![0.5, 0.0, 0.5]);
        certify(&a2, &b2, &(0..12).map(|k| ((k * 7) % 5) as f64).collect::<Vec<_>>(), "ties");
        certify(&vec![1.0 / m as f64; m], &vec![1.0 / n as f64; n], &vec![2.0; m * n], &format!("constant {m}x{n}"));
    }
}

#[test]
fn bad_input_and_the_iteration_limit_are_errors() {
    let c = vec![0.0, 1.0, 1.0, 0.0];
    assert!(transport(&[], &[1.0], &[], 10).unwrap_err().contains("must not be empty"));
    assert!(transport(&[0.5, 0.5], &[0.5, 0.6], &c, 10).unwrap_err().contains("equal sums"));
    assert!(transport(&[1.5, -0.5], &[0.5, 0.5], &c, 10).unwrap_err().contains("non-negative"));
    assert!(transport(&[0.5, 0.5], &[0.5, 0.5], &[0.0, f64::NAN, 1.0, 0.0], 10).unwrap_err().contains("finite"));
    assert!(transport(&[0.5, 0.5], &[0.5, 0.5], &c[..3], 10).unwrap_err().contains("2x2"));
    // northwest puts everything on the diagonal already: optimal without a pivot
    assert_eq!(transport(&[0.5, 0.5], &[0.5, 0.5], &c, 0).unwrap().pivots, 0);
    // the anti-diagonal is optimal here: one pivot needed, none allowed
    let anti = vec![1.0, 0.0, 0.0, 1.0];
    assert!(transport(&[0.5, 0.5], &[0.5, 0.5], &anti, 0).unwrap_err().contains("no optimal plan after 0 simplex pivots"));
    assert_eq!(transport(&[0.5, 0.5], &[0.5, 0.5], &anti, 1).unwrap().cost, 0.0);
}
