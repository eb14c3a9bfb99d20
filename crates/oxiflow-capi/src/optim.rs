//! Bound-constrained minimization for ADCME's `BFGS!`: L-BFGS-B (Byrd, Lu, Nocedal, Zhu;
//! v3.0) from the `lbfgsb-rs-pure` crate (a safe Rust port of the reference code,
//! BSD-3-Clause), driven through a C callback that evaluates the loss and its gradient
//! (in Julia: one session run of the loss and the gradient tensors).

use crate::{guard, put, slice};
use lbfgsb_rs_pure::{IterationControl, Status, LBFGSB};
use oxiflow_core::OxiflowError;
use std::cell::Cell;
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
/// bounds), with L-BFGS-B keeping `m` corrections (scipy's default 10). Stops when the
/// projected gradient's infinity norm is at most `pgtol`, when one iteration reduces the
/// loss by at most `ftol * max(|f_k|, |f_k+1|, 1)`, after `max_iter` iterations, or when
/// `iteration` (may be null) returns nonzero. Writes the final loss, the number of
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
        let (res, failed, reason) = minimize(xs, &lo, &hi, m, max_iter, pgtol, ftol, objective, iteration, userdata);
        if failed {
            return Err(OxiflowError::InvalidArgument("oxf_lbfgsb: the objective callback reported an error".into()));
        }
        let sol = res.map_err(|e| OxiflowError::InvalidArgument(format!("oxf_lbfgsb: {e}")))?;
        let status = match (reason, sol.status) {
            (Some(r), _) => r,
            (None, Status::Converged) => OXF_LBFGSB_PGTOL,
            (None, Status::MaxIter) => OXF_LBFGSB_MAX_ITER,
            (None, Status::LineSearchFailure) => OXF_LBFGSB_LINE_SEARCH,
            (None, Status::NumericalFailure) => OXF_LBFGSB_NUMERICAL,
        };
        xs.copy_from_slice(&sol.x);
        put(out_f, sol.f)?;
        put(out_iterations, sol.iterations as i64)?;
        put(out_status, status)
    })
}

type Solved = (std::result::Result<lbfgsb_rs_pure::Solution, &'static str>, bool, Option<i32>);

#[allow(clippy::too_many_arguments)]
fn minimize(
    x: &mut [f64],
    lo: &[f64],
    hi: &[f64],
    m: i32,
    max_iter: i64,
    pgtol: f64,
    ftol: f64,
    objective: OxObjectiveFn,
    iteration: Option<OxIterationFn>,
    userdata: *mut c_void,
) -> Solved {
    let n = x.len();
    let failed = Cell::new(false);
    let reason = Cell::new(None);
    // the loss at the previous iteration (at the start: the first evaluation)
    let prev_f: Cell<Option<f64>> = Cell::new(None);
    let mut solver = LBFGSB::new(m.max(1) as usize).with_pgtol(pgtol.max(0.0)).with_max_iter(max_iter.max(0) as usize);
    let mut fg = |xx: &[f64]| -> (f64, Vec<f64>) {
        let mut g = vec![0.0; n];
        if failed.get() {
            return (f64::NAN, g);
        }
        let mut f = f64::NAN;
        if objective(userdata, n as i64, xx.as_ptr(), g.as_mut_ptr(), &mut f) != 0 {
            failed.set(true);
            return (f64::NAN, vec![0.0; n]);
        }
        if prev_f.get().is_none() {
            prev_f.set(Some(f));
        }
        (f, g)
    };
    let mut cb = |info: &lbfgsb_rs_pure::IterationInfo, xx: &[f64]| {
        if failed.get() {
            return IterationControl::StopCustom;
        }
        if let Some(it) = iteration {
            if it(userdata, info.iteration as i64, info.f, info.proj_grad_norm, info.n_func_evals as i64, xx.as_ptr()) != 0 {
                reason.set(Some(OXF_LBFGSB_CALLBACK));
                return IterationControl::StopCustom;
            }
        }
        if info.proj_grad_norm <= pgtol {
            return IterationControl::Continue; // the solver reports this as converged
        }
        if let Some(p) = prev_f.get() {
            if (p - info.f) <= ftol * p.abs().max(info.f.abs()).max(1.0) {
                reason.set(Some(OXF_LBFGSB_FTOL));
                return IterationControl::StopConverged;
            }
        }
        prev_f.set(Some(info.f));
        IterationControl::Continue
    };
    let res = solver.minimize_with_callback(x, lo, hi, &mut fg, &mut cb);
    (res, failed.get(), reason.get())
}
