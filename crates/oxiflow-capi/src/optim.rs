//! `oxf_lbfgsb`: ADCME's `BFGS!` through the C ABI. The solver is
//! [`oxiflow_core::lbfgs`]; this file checks the caller's arrays and turns its callbacks
//! into the solver's closures.

use crate::{guard, put, slice};
use oxiflow_core::lbfgs::{projected_lbfgs, Options, Status};
use oxiflow_core::OxiflowError;
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
        #[allow(clippy::neg_cmp_op_on_partial_ord)] // a NaN bound is refused too
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
        put(out_status, status_code(r.status))
    })
}

/// The `OXF_LBFGSB_*` code of a solver status.
fn status_code(s: Status) -> i32 {
    match s {
        Status::Pgtol => OXF_LBFGSB_PGTOL,
        Status::Ftol => OXF_LBFGSB_FTOL,
        Status::MaxIter => OXF_LBFGSB_MAX_ITER,
        Status::Callback => OXF_LBFGSB_CALLBACK,
        Status::LineSearch => OXF_LBFGSB_LINE_SEARCH,
        Status::Numerical => OXF_LBFGSB_NUMERICAL,
    }
}
