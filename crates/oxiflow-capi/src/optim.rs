//! Bound-constrained minimization for ADCME's `BFGS!`, driven through a C callback that
//! evaluates the loss and its gradient (in Julia: one session run of the loss and the
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

use crate::{guard, put, slice};
use oxiflow_core::OxiflowError;
use std::collections::VecDeque;
use std::ffi::c_void;

/// Loss and gradient at `x` (length `n`): writes the gradient into `grad` (length `n`) and
/// the loss into `f`; returns 0, or nonzero to abort the minimization.
pub type OxObjectiveFn = extern "C" fn(userdata: *mut c_void, n: i64, x: *const f64, grad: *mut f64, f: *mut f64) -> i32;

/// Called after each L-BFGS-B iteration (1-based) with the loss, the infinity norm of the
/// projected gradient, the number of loss evaluations so far and the current point;
/// returns 0 to go on, nonzero to stop.
pub type OxIterationFn = extern "C" fn(userdata: *mut c_void, iteration: i64, f: f64, proj_grad_norm: f64, n_evals: i64, x: *const f64) -> i32;

/// Termination reasons written to `out_status` by [`oxf_lbfgsb`].
pub const OXF_LBFGSB_PGTOL: i32 = 0;
/// Relative reduction of the loss in one iteration at most `ftol` (scipy's `factr` test).
pub const OXF_LBFGSB_FTOL: i32 = 1;
/// `max_iter` iterations done.
pub const OXF_LBFGSB_MAX_ITER: i32 = 2;
/// The iteration callback asked to stop.
pub const OXF_LBFGSB_CALLBACK: i32 = 3;
/// The line search failed to reduce the loss (often: converged to rounding level).
pub const OXF_LBFGSB_LINE_SEARCH: i32 = 4;
/// A numerical failure inside the algorithm (singular update, non-finite values).
pub const OXF_LBFGSB_NUMERICAL: i32 = 5;

/// Minimizes a function of `n` variables from `x` (updated in place to the result)
/// subject to `lower[i] <= x[i] <= upper[i]` (`-Inf`/`Inf` for no bound; null arrays: no
/// bounds) with projected L-BFGS keeping `m` corrections (scipy's default 10). Stops when
/// the projected gradient's infinity norm is at most `pgtol`, when one iteration reduces
/// the loss by at most `ftol * max(|f_k|, |f_k+1|, 1)`, after `max_iter` iterations, or
/// when `iteration` (may be null) returns nonzero. Writes the final loss, the number of
/// iterations and the reason (`OXF_LBFGSB_*`). Errors: null or negative sizes, bounds with
/// `lower > upper`, or an objective callback returning nonzero (status 3; the caller keeps
/// its own error).
#[no_mangle]
pub extern "C" fn oxf_lbfgsb(
    n: i64,
    x: *mut f64,
    lower: *const f64,
    upper: *const f64,
    m: i32,
    max_iter: i64,
    pgtol: f64,
    ftol: f64,
    objective: Option<OxObjectiveFn>,
    iteration: Option<OxIterationFn>,
    userdata: *mut c_void,
    out_f: *mut f64,
    out_iterations: *mut i64,
    out_status: *mut i32,
) -> i32 {
    guard(|| {
        let objective = objective.ok_or_else(|| OxiflowError::InvalidArgument("oxf_lbfgsb: null objective callback".into()))?;
        let n_us = usize::try_from(n).map_err(|_| OxiflowError::InvalidArgument(format!("oxf_lbfgsb: negative size {n}")))?;
        if n_us == 0 || x.is_null() {
            return Err(OxiflowError::InvalidArgument("oxf_lbfgsb: no variables to optimize".into()));
        }
        let xs = unsafe { std::slice::from_raw_parts_mut(x, n_us) };
        let lo = if lower.is_null() { vec![f64::NEG_INFINITY; n_us] } else { slice(lower, n, "lower bounds")?.to_vec() };
        let hi = if upper.is_null() { vec![f64::INFINITY; n_us] } else { slice(upper, n, "upper bounds")?.to_vec() };
        if let Some(i) = (0..n_us).find(|&i| !(lo[i] <= hi[i])) {
            return Err(OxiflowError::InvalidArgument(format!("oxf_lbfgsb: bounds of variable {i} are [{}, {}]", lo[i], hi[i])));
        }
        let opts = Options { m: m.max(1) as usize, max_iter: max_iter.max(0) as usize, pgtol, ftol };
        let mut eval = |x: &[f64], g: &mut [f64]| -> Option<f64> {
            let mut f = f64::NAN;
            (objective(userdata, n, x.as_ptr(), g.as_mut_ptr(), &mut f) == 0).then_some(f)
        };
        let mut step = |it: usize, f: f64, pg: f64, evals: usize, x: &[f64]| match iteration {
            Some(cb) => cb(userdata, it as i64, f, pg, evals as i64, x.as_ptr()) != 0,
            None => false,
        };
        let r = projected_lbfgs(xs, &lo, &hi, &opts, &mut eval, &mut step)
            .ok_or_else(|| OxiflowError::InvalidArgument("oxf_lbfgsb: the objective callback reported an error".into()))?;
        put(out_f, r.f)?;
        put(out_iterations, r.iterations as i64)?;
        put(out_status, r.status)
    })
}

/// Settings of [`projected_lbfgs`].
struct Options {
    m: usize,
    max_iter: usize,
    pgtol: f64,
    ftol: f64,
}

/// Outcome of [`projected_lbfgs`]: final loss, iterations, `OXF_LBFGSB_*` reason.
struct Outcome {
    f: f64,
    iterations: usize,
    status: i32,
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

/// Minimizes from `x` (feasible on return); `None` when `eval` failed.
fn projected_lbfgs(
    x: &mut [f64],
    lo: &[f64],
    hi: &[f64],
    o: &Options,
    eval: &mut dyn FnMut(&[f64], &mut [f64]) -> Option<f64>,
    step: &mut dyn FnMut(usize, f64, f64, usize, &[f64]) -> bool,
) -> Option<Outcome> {
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
        return done(f, 0, OXF_LBFGSB_NUMERICAL);
    }
    if proj_grad_norm(x, &g, lo, hi) <= o.pgtol {
        return done(f, 0, OXF_LBFGSB_PGTOL);
    }
    let mut mem: VecDeque<(Vec<f64>, Vec<f64>, f64)> = VecDeque::new();
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
                return done(f, iter - 1, OXF_LBFGSB_PGTOL);
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
        let Some(mut fnew) = accepted else { return done(f, iter - 1, OXF_LBFGSB_LINE_SEARCH) };
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
            return done(f, iter, OXF_LBFGSB_NUMERICAL);
        }
        let pg = proj_grad_norm(x, &g, lo, hi);
        if step(iter, f, pg, evals, x) {
            return done(f, iter, OXF_LBFGSB_CALLBACK);
        }
        if pg <= o.pgtol {
            return done(f, iter, OXF_LBFGSB_PGTOL);
        }
        if fprev - f <= o.ftol * fprev.abs().max(f.abs()).max(1.0) {
            return done(f, iter, OXF_LBFGSB_FTOL);
        }
    }
    done(f, o.max_iter, OXF_LBFGSB_MAX_ITER)
}

/// `d = -H g` on the free variables (0 on the others) by the L-BFGS two-loop recursion,
/// `H0 = (s'y / y'y) I` from the newest pair.
fn two_loop(mem: &VecDeque<(Vec<f64>, Vec<f64>, f64)>, g: &[f64], free: &[bool], d: &mut [f64]) {
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
