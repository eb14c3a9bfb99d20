//! Bound-constrained minimization for ADCME's `BFGS!` (`ScipyOptimizerInterface` with
//! L-BFGS-B in TF 1.x): the solver, over a loss-and-gradient closure. The C ABI's
//! `oxf_lbfgsb` drives it with a callback (in Julia: one session run of the loss and the
//! gradient tensors).
//!
//! The method is a projected L-BFGS for box constraints (the "two-metric"/active-set
//! variant of Bertsekas 1982 and Kim, Sra & Dhillon 2010): variables at a bound whose
//! gradient pushes them out are held fixed, the L-BFGS two-loop recursion (Nocedal &
//! Wright, Alg. 7.4) gives the direction of the free ones, and an Armijo search along the
//! projected path (backtracking by safeguarded quadratic interpolation; extrapolating by
//! 4x while the slope stays steeper than 0.9 of the initial one) keeps every iterate
//! feasible. Its stopping rules are
//! those of scipy's L-BFGS-B (`pgtol` on the projected gradient, `ftol` on the relative
//! reduction, `maxiter`). It is not Byrd–Lu–Nocedal–Zhu's generalized-Cauchy-point
//! L-BFGS-B: the crates that port that code were tried and not used (`lbfgsb-rs-pure`
//! 0.1.2 stops short on Rosenbrock and on a bounded quadratic; `lbfgsb` needs bindgen and
//! libclang to build).

use std::collections::VecDeque;

/// Settings of [`projected_lbfgs`] (scipy's `fmin_l_bfgs_b` names).
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Corrections kept (scipy's `m`, default 10); at least 1.
    pub m: usize,
    /// Iterations at most (`maxiter`).
    pub max_iter: usize,
    /// Stop when the projected gradient's infinity norm is at most this (`pgtol`).
    pub pgtol: f64,
    /// Stop when one iteration reduces the loss by at most `ftol * max(|f_k|, |f_k+1|, 1)`
    /// (scipy's `factr * eps`).
    pub ftol: f64,
}

/// Why [`projected_lbfgs`] stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// The projected gradient is at most `pgtol` (also: no descent direction is left).
    Pgtol,
    /// One iteration reduced the loss by at most `ftol` relative (scipy's `factr` test).
    Ftol,
    /// `max_iter` iterations done.
    MaxIter,
    /// The progress callback asked to stop.
    Callback,
    /// The line search failed to reduce the loss (often: converged to rounding level).
    LineSearch,
    /// A non-finite loss or gradient, or a singular update.
    Numerical,
}

/// Outcome of [`projected_lbfgs`]: final loss, iterations done, and why it stopped.
#[derive(Clone, Copy, Debug)]
pub struct Outcome {
    /// The loss at the final `x`.
    pub f: f64,
    /// Iterations completed (0 when the start already met `pgtol` or was not finite).
    pub iterations: usize,
    /// Why the solver stopped.
    pub status: Status,
}

fn project(x: &mut [f64], lo: &[f64], hi: &[f64]) {
    for i in 0..x.len() {
        x[i] = x[i].max(lo[i]).min(hi[i]);
    }
}

/// Infinity norm of the projected gradient step `P(x - g) - x` (scipy's `pgtol` measure).
fn proj_grad_norm(x: &[f64], g: &[f64], lo: &[f64], hi: &[f64]) -> f64 {
    (0..x.len()).map(|i| ((x[i] - g[i]).max(lo[i]).min(hi[i]) - x[i]).abs()).fold(0.0, f64::max)
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The loss at `x`, its gradient written into the second argument; `None`: the caller's
/// objective failed.
pub type Objective<'a> = dyn FnMut(&[f64], &mut [f64]) -> Option<f64> + 'a;
/// Called after each iteration with (iteration, loss, projected-gradient norm, evaluations,
/// x); `true` stops the solver.
pub type Progress<'a> = dyn FnMut(usize, f64, f64, usize, &[f64]) -> bool + 'a;

/// Minimizes `eval` from `x` (projected into the bounds first, feasible on return) subject
/// to `lo[i] <= x[i] <= hi[i]` (`-inf`/`inf` for no bound; the caller checks `lo <= hi`),
/// calling `step` after every iteration. `None` when `eval` failed.
#[allow(clippy::neg_cmp_op_on_partial_ord)] // `!(gd < 0.0)`: a NaN slope is not a descent
pub fn projected_lbfgs(x: &mut [f64], lo: &[f64], hi: &[f64], o: &Options, eval: &mut Objective, step: &mut Progress) -> Option<Outcome> {
    let n = x.len();
    project(x, lo, hi);
    let mut g = vec![0.0; n];
    let mut f = eval(x, &mut g)?;
    let mut evals = 1;
    let done = |f, iterations, status| Some(Outcome { f, iterations, status });
    // A NaN or infinite loss or gradient is a numerical failure, never a convergence
    // (f64::max skips NaN, so a NaN gradient had a projected norm of 0).
    let finite = |f: f64, g: &[f64]| f.is_finite() && g.iter().all(|v| v.is_finite());
    if !finite(f, &g) {
        return done(f, 0, Status::Numerical);
    }
    if proj_grad_norm(x, &g, lo, hi) <= o.pgtol {
        return done(f, 0, Status::Pgtol);
    }
    let mut mem: VecDeque<Pair> = VecDeque::new();
    let (mut xn, mut gn, mut d) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    let (mut xt, mut gt) = (vec![0.0; n], vec![0.0; n]);
    for iter in 1..=o.max_iter {
        // free variables: not at a bound that the gradient pushes against
        let free: Vec<bool> = (0..n).map(|i| !((x[i] <= lo[i] && g[i] > 0.0) || (x[i] >= hi[i] && g[i] < 0.0))).collect();
        two_loop(&mem, &g, &free, &mut d);
        let mut gd = dot(&g, &d);
        if !(gd < 0.0) {
            // not a descent direction (stale curvature pairs): restart from steepest descent
            mem.clear();
            two_loop(&mem, &g, &free, &mut d);
            gd = dot(&g, &d);
            if !(gd < 0.0) {
                return done(f, iter - 1, Status::Pgtol);
            }
        }
        // first step without curvature information: at most unit length (as L-BFGS-B)
        let dnorm = dot(&d, &d).sqrt();
        let mut alpha = if mem.is_empty() { (1.0 / dnorm).min(1.0) } else { 1.0 };
        let mut accepted = None;
        for _ in 0..60 {
            for i in 0..n {
                xn[i] = x[i] + alpha * d[i];
            }
            project(&mut xn, lo, hi);
            let decrease: f64 = (0..n).map(|i| g[i] * (xn[i] - x[i])).sum();
            if xn == x {
                break;
            }
            let fnew = eval(&xn, &mut gn)?;
            evals += 1;
            if fnew.is_finite() && fnew <= f + 1e-4 * decrease {
                accepted = Some(fnew);
                break;
            }
            // safeguarded quadratic interpolation of f along the (unprojected) step
            let q = if fnew.is_finite() { -gd * alpha * alpha / (2.0 * (fnew - f - gd * alpha)) } else { 0.1 * alpha };
            alpha = q.clamp(0.1 * alpha, 0.5 * alpha);
        }
        let Some(mut fnew) = accepted else { return done(f, iter - 1, Status::LineSearch) };
        // Extrapolate while the slope along d is still steep (Wolfe's curvature condition
        // fails), as More-Thuente's search in L-BFGS-B does: without it, a region where f is
        // concave along d (no curvature pair is stored) would be crossed in tiny steps.
        for _ in 0..50 {
            if dot(&gn, &d) >= 0.9 * gd {
                break;
            }
            let a2 = alpha * 4.0;
            for i in 0..n {
                xt[i] = x[i] + a2 * d[i];
            }
            project(&mut xt, lo, hi);
            if xt == xn {
                break; // every moving variable is at a bound
            }
            let ft = eval(&xt, &mut gt)?;
            evals += 1;
            let decrease: f64 = (0..n).map(|i| g[i] * (xt[i] - x[i])).sum();
            if !(ft.is_finite() && ft <= f + 1e-4 * decrease && ft < fnew) {
                break;
            }
            std::mem::swap(&mut xn, &mut xt);
            std::mem::swap(&mut gn, &mut gt);
            fnew = ft;
            alpha = a2;
        }
        let s: Vec<f64> = (0..n).map(|i| xn[i] - x[i]).collect();
        let y: Vec<f64> = (0..n).map(|i| gn[i] - g[i]).collect();
        let sy = dot(&s, &y);
        if sy > f64::EPSILON * dot(&y, &y) {
            if mem.len() == o.m {
                mem.pop_front();
            }
            mem.push_back((s, y, 1.0 / sy));
        }
        let fprev = f;
        x.copy_from_slice(&xn);
        g.copy_from_slice(&gn);
        f = fnew;
        if !finite(f, &g) {
            return done(f, iter, Status::Numerical);
        }
        let pg = proj_grad_norm(x, &g, lo, hi);
        if step(iter, f, pg, evals, x) {
            return done(f, iter, Status::Callback);
        }
        if pg <= o.pgtol {
            return done(f, iter, Status::Pgtol);
        }
        if fprev - f <= o.ftol * fprev.abs().max(f.abs()).max(1.0) {
            return done(f, iter, Status::Ftol);
        }
    }
    done(f, o.max_iter, Status::MaxIter)
}

/// One curvature pair of the L-BFGS memory: `s` (step), `y` (gradient change), `1 / s'y`.
type Pair = (Vec<f64>, Vec<f64>, f64);

/// `d = -H g` on the free variables (0 on the others) by the L-BFGS two-loop recursion,
/// `H0 = (s'y / y'y) I` from the newest pair.
#[allow(clippy::needless_range_loop)] // `i` indexes q and the masked pair alike
fn two_loop(mem: &VecDeque<Pair>, g: &[f64], free: &[bool], d: &mut [f64]) {
    let n = g.len();
    let mask = |v: &[f64], i: usize| if free[i] { v[i] } else { 0.0 };
    let mut q: Vec<f64> = (0..n).map(|i| mask(g, i)).collect();
    let mut a = vec![0.0; mem.len()];
    for (k, (s, y, rho)) in mem.iter().enumerate().rev() {
        a[k] = rho * (0..n).map(|i| mask(s, i) * q[i]).sum::<f64>();
        for i in 0..n {
            q[i] -= a[k] * mask(y, i);
        }
    }
    let gamma = mem.back().map_or(1.0, |(s, y, _)| dot(s, y) / dot(y, y));
    for v in q.iter_mut() {
        *v *= gamma;
    }
    for (k, (s, y, rho)) in mem.iter().enumerate() {
        let b = rho * (0..n).map(|i| mask(y, i) * q[i]).sum::<f64>();
        for i in 0..n {
            q[i] += mask(s, i) * (a[k] - b);
        }
    }
    for i in 0..n {
        d[i] = -q[i];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(x: &mut [f64], lo: &[f64], hi: &[f64], f: impl Fn(&[f64], &mut [f64]) -> f64) -> Outcome {
        let o = Options { m: 10, max_iter: 500, pgtol: 1e-10, ftol: 0.0 };
        projected_lbfgs(x, lo, hi, &o, &mut |x: &[f64], g: &mut [f64]| Some(f(x, g)), &mut |_, _, _, _, _| false).expect("objective never fails")
    }

    /// Rosenbrock's function, minimum 0 at (1, 1).
    fn rosenbrock(x: &[f64], g: &mut [f64]) -> f64 {
        let (a, b) = (x[0], x[1]);
        g[0] = -2.0 * (1.0 - a) - 400.0 * a * (b - a * a);
        g[1] = 200.0 * (b - a * a);
        (1.0 - a).powi(2) + 100.0 * (b - a * a).powi(2)
    }

    #[test]
    fn unbounded_rosenbrock_reaches_its_minimum() {
        let mut x = [-1.2, 1.0];
        let inf = [f64::INFINITY; 2];
        let r = run(&mut x, &[-f64::INFINITY; 2], &inf, rosenbrock);
        assert!((x[0] - 1.0).abs() < 1e-6 && (x[1] - 1.0).abs() < 1e-6, "{x:?} {r:?}");
        assert!(r.f < 1e-12 && r.status != Status::Numerical, "{r:?}");
    }

    #[test]
    fn a_bounded_quadratic_stops_on_its_bound_with_the_free_coordinate_optimal() {
        // f = (x0 - 3)^2 + (x1 + 1)^2 over 0 <= x <= 2: the minimum is (2, 0), where x0 is
        // held at its upper bound and x1 at its lower one; from a start inside the box.
        let mut x = [0.5, 1.5];
        let r = run(&mut x, &[0.0, 0.0], &[2.0, 2.0], |x, g| {
            g[0] = 2.0 * (x[0] - 3.0);
            g[1] = 2.0 * (x[1] + 1.0);
            (x[0] - 3.0).powi(2) + (x[1] + 1.0).powi(2)
        });
        assert_eq!(x, [2.0, 0.0], "{r:?}");
        assert!((r.f - 2.0).abs() < 1e-12 && r.status == Status::Pgtol, "{r:?}");
        // a bound that cuts through the valley: x1 <= 0.5 on a quadratic centred at (1, 1)
        let mut y = [0.0, 0.0];
        run(&mut y, &[-5.0, -5.0], &[5.0, 0.5], |x, g| {
            g[0] = 2.0 * (x[0] - 1.0);
            g[1] = 2.0 * (x[1] - 1.0);
            (x[0] - 1.0).powi(2) + (x[1] - 1.0).powi(2)
        });
        assert!((y[0] - 1.0).abs() < 1e-8 && y[1] == 0.5, "{y:?}");
    }

    #[test]
    fn a_nan_loss_is_a_numerical_stop_and_a_failed_objective_is_none() {
        let o = Options { m: 5, max_iter: 10, pgtol: 1e-8, ftol: 1e-12 };
        let mut x = [1.0];
        let r = projected_lbfgs(
            &mut x,
            &[-1.0],
            &[2.0],
            &o,
            &mut |_: &[f64], g: &mut [f64]| {
                g[0] = 1.0;
                Some(f64::NAN)
            },
            &mut |_, _, _, _, _| false,
        );
        assert_eq!(r.map(|r| r.status), Some(Status::Numerical));
        let none = projected_lbfgs(&mut x, &[-1.0], &[2.0], &o, &mut |_: &[f64], _: &mut [f64]| None, &mut |_, _, _, _, _| false);
        assert!(none.is_none());
        // the progress callback stops it after the first iteration
        let mut z = [-1.2, 1.0];
        let r = projected_lbfgs(
            &mut z,
            &[-f64::INFINITY; 2],
            &[f64::INFINITY; 2],
            &o,
            &mut |x: &[f64], g: &mut [f64]| Some(rosenbrock(x, g)),
            &mut |it, _, _, _, _| it >= 1,
        )
        .unwrap();
        assert_eq!((r.status, r.iterations), (Status::Callback, 1));
    }
}
