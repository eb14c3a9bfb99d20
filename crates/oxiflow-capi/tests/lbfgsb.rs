//! `oxf_lbfgsb`: converges on Rosenbrock, respects bounds, stops when the iteration
//! callback asks, and reports a failing objective as an error.

use oxiflow::*;
use std::ffi::c_void;

extern "C" fn rosenbrock(_: *mut c_void, n: i64, x: *const f64, g: *mut f64, f: *mut f64) -> i32 {
    let x = unsafe { std::slice::from_raw_parts(x, n as usize) };
    let g = unsafe { std::slice::from_raw_parts_mut(g, n as usize) };
    let (a, b) = (x[0], x[1]);
    unsafe { *f = (1.0 - a).powi(2) + 100.0 * (b - a * a).powi(2) };
    g[0] = -2.0 * (1.0 - a) - 400.0 * a * (b - a * a);
    g[1] = 200.0 * (b - a * a);
    0
}

extern "C" fn failing(_: *mut c_void, _: i64, _: *const f64, _: *mut f64, _: *mut f64) -> i32 {
    1
}

/// Counts iterations in `*userdata` (an `i64`) and stops after 3.
extern "C" fn stop_after_3(ud: *mut c_void, it: i64, f: f64, pg: f64, _: i64, _: *const f64) -> i32 {
    assert!(f.is_finite() && pg >= 0.0);
    unsafe { *(ud as *mut i64) = it };
    i32::from(it >= 3)
}

fn solve(x: &mut [f64], lo: Option<&[f64]>, hi: Option<&[f64]>, obj: OxObjectiveFn, it: Option<OxIterationFn>, ud: *mut c_void) -> (i32, f64, i64, i32) {
    let (mut f, mut iters, mut status) = (0.0, 0i64, -1i32);
    let rc = oxf_lbfgsb(
        x.len() as i64,
        x.as_mut_ptr(),
        lo.map_or(std::ptr::null(), |l| l.as_ptr()),
        hi.map_or(std::ptr::null(), |h| h.as_ptr()),
        10,
        1000,
        1e-12,
        1e-12,
        Some(obj),
        it,
        ud,
        &mut f,
        &mut iters,
        &mut status,
    );
    (rc, f, iters, status)
}

#[test]
fn rosenbrock_converges() {
    let mut x = [-1.2, 1.0];
    let (rc, f, iters, status) = solve(&mut x, None, None, rosenbrock, None, std::ptr::null_mut());
    assert_eq!(rc, 0);
    assert!((x[0] - 1.0).abs() < 1e-6 && (x[1] - 1.0).abs() < 1e-6, "{x:?}");
    assert!(f < 1e-12 && iters > 5 && iters < 200, "f={f} iters={iters}");
    assert!(status == OXF_LBFGSB_PGTOL || status == OXF_LBFGSB_FTOL, "{status}");
}

#[test]
fn bounds_are_respected() {
    // a <= 0.5 is active at the optimum (0.5, 0.25); b is bounded below by 0.3 too
    let mut x = [-1.2, 1.0];
    let (rc, _, _, _) = solve(&mut x, Some(&[-2.0, f64::NEG_INFINITY]), Some(&[0.5, f64::INFINITY]), rosenbrock, None, std::ptr::null_mut());
    assert_eq!(rc, 0);
    assert_eq!(x[0], 0.5);
    assert!((x[1] - 0.25).abs() < 1e-6, "{x:?}");
    let mut x = [0.0, 0.0];
    let (rc, _, _, _) = solve(&mut x, Some(&[-2.0, 0.3]), Some(&[0.5, 2.0]), rosenbrock, None, std::ptr::null_mut());
    assert_eq!(rc, 0);
    assert!(x[0] <= 0.5 && x[1] >= 0.3, "{x:?}");
    // start outside the box: projected first
    let mut x = [5.0, 5.0];
    let (rc, _, _, _) = solve(&mut x, Some(&[-2.0, -2.0]), Some(&[0.5, 2.0]), rosenbrock, None, std::ptr::null_mut());
    assert_eq!(rc, 0);
    assert!(x[0] == 0.5 && (x[1] - 0.25).abs() < 1e-6, "{x:?}");
}

#[test]
fn callback_stops_and_errors_are_reported() {
    let mut x = [-1.2, 1.0];
    let mut seen = 0i64;
    let (rc, _, iters, status) = solve(&mut x, None, None, rosenbrock, Some(stop_after_3), &mut seen as *mut i64 as *mut c_void);
    assert_eq!((rc, iters, status, seen), (0, 3, OXF_LBFGSB_CALLBACK, 3));
    let (rc, ..) = solve(&mut x, None, None, failing, None, std::ptr::null_mut());
    assert_eq!(rc, 3);
    assert!(unsafe { std::ffi::CStr::from_ptr(oxf_last_error()) }.to_str().unwrap().contains("objective"));
    let (rc, ..) = solve(&mut x, Some(&[1.0, 1.0]), Some(&[0.0, 2.0]), rosenbrock, None, std::ptr::null_mut());
    assert_eq!(rc, 3);
}

extern "C" fn neg_cos(_: *mut c_void, _: i64, x: *const f64, g: *mut f64, f: *mut f64) -> i32 {
    let v = unsafe { *x };
    unsafe {
        *f = -v.cos();
        *g = v.sin();
    }
    0
}

#[test]
fn concave_stretches_are_crossed_in_few_iterations() {
    // -cos x from x = 3.1: concave until |x| < pi/2, minimum at 0; a search that only
    // backtracks would crawl with steps of |sin x|
    let mut x = [3.1];
    let (rc, f, iters, _) = solve(&mut x, None, None, neg_cos, None, std::ptr::null_mut());
    assert_eq!(rc, 0);
    assert!(x[0].abs() < 1e-6 && (f + 1.0).abs() < 1e-12, "x={x:?} f={f}");
    assert!(iters < 20, "{iters} iterations");
}
