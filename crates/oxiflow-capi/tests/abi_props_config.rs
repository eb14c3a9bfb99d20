//! Property tests of the process-wide exports of the C ABI (`tf.config`, device strings,
//! CUDA status, version, the panic guard) and of `oxf_lbfgsb`, with random and hostile
//! arguments (see `abi_props_graph.rs` for what every call must satisfy). The `tf.config`
//! calls change process state, so they run in one property, in random order, each case
//! ending with a reset. `OXIFLOW_FUZZ_CASES` cases each.

mod common;

use common::*;
use oxiflow::*;
use proptest::prelude::*;
use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr::null;

proptest! {
    #![proptest_config(config())]

    /// `tf.config` calls in any order with any arguments: each succeeds or fails with a TF
    /// status, what was set reads back, and the CPU stays listed first.
    #[test]
    fn process_configuration(actions in proptest::collection::vec((0u8..12, any::<i32>(), c_arg(DEVICE_WORDS), proptest::collection::vec(prop_oneof![-2i64..3000, Just(1 << 40), Just(i64::MAX)], 0..4), prop_oneof![-1i64..5, Just(1i64 << 40), Just(300)], prop_oneof![any::<f64>(), 0.0f64..=1.0]), 1..6)) {
        let mut out: *const c_char = null();
        for (a, flag, text, limits, n, f) in &actions {
            let (call, st) = match a {
                0 => ("oxf_set_soft_device_placement", oxf_set_soft_device_placement(*flag)),
                1 => ("oxf_set_log_device_placement", oxf_set_log_device_placement(*flag)),
                2 => ("oxf_set_memory_growth", text.with(|t| oxf_set_memory_growth(t, *flag))),
                3 => ("oxf_get_memory_growth", { let mut on = 0; text.with(|t| oxf_get_memory_growth(t, &mut on)) }),
                4 => ("oxf_set_memory_fraction", oxf_set_memory_fraction(*f)),
                5 => {
                    // the count never exceeds the array, except with a null array (all unset)
                    let (p, k) = if *flag % 3 == 0 { (null(), *n) } else { (limits.as_ptr(), (*n).clamp(-1, limits.len() as i64)) };
                    ("oxf_set_logical_device_configuration", text.with(|t| oxf_set_logical_device_configuration(t, p, k)))
                }
                6 => ("oxf_get_logical_device_configuration", text.with(|t| oxf_get_logical_device_configuration(t, &mut out))),
                7 => ("oxf_set_visible_devices", text.with(|t| oxf_set_visible_devices(t, if *flag % 2 == 0 { c"GPU".as_ptr() } else { null() }))),
                8 => ("oxf_get_visible_devices", text.with(|t| oxf_get_visible_devices(t, &mut out))),
                9 => ("oxf_list_logical_devices", oxf_list_logical_devices(&mut out)),
                10 => ("oxf_list_physical_devices", oxf_list_physical_devices(&mut out)),
                _ => ("oxf_cuda_status", oxf_cuda_status(&mut out)),
            };
            check_status(st, call)?;
            if st == 0 && [6, 8, 9, 10, 11].contains(a) {
                let text = out_string(out, call)?;
                if [9, 10].contains(a) {
                    prop_assert!(text.contains("CPU:0\t"), "{} lists no CPU:0: {}", call, text);
                }
            }
            let (mut soft, mut log, mut init) = (-1, -1, -1);
            prop_assert_eq!(oxf_device_policy(&mut soft, &mut log, &mut init), 0);
            if st == 0 && *a == 0 {
                prop_assert_eq!(soft, (*flag != 0) as i32);
            }
            if st == 0 && *a == 1 {
                prop_assert_eq!(log, (*flag != 0) as i32);
            }
            if st == 0 && *a == 4 {
                prop_assert!(*f > 0.0 && *f <= 1.0, "memory fraction {} accepted", f);
            }
            if *a == 9 && st == 0 {
                prop_assert_eq!(init, 1, "listing logical devices initializes the runtime");
            }
        }
        prop_assert_eq!(oxf_reset_device_configuration(), 0);
        let (mut soft, mut log, mut init) = (-1, -1, -1);
        prop_assert_eq!(oxf_device_policy(&mut soft, &mut log, &mut init), 0);
        prop_assert_eq!(init, 0);
        prop_assert_eq!(oxf_list_physical_devices(&mut out), 0);
        prop_assert!(out_string(out, "oxf_list_physical_devices")?.starts_with("/physical_device:CPU:0\t"));
    }

    /// Device strings through the ABI: a canonical form is a fixed point, an error quotes
    /// the string (TF's parser error).
    #[test]
    fn device_strings(spec in c_arg(DEVICE_WORDS), null_out in proptest::bool::weighted(0.05)) {
        let mut out: *const c_char = null();
        let st = spec.with(|s| oxf_canonical_device(s, if null_out { std::ptr::null_mut() } else { &mut out }));
        check_status(st, "oxf_canonical_device")?;
        if null_out {
            prop_assert_eq!(st, 3);
        } else if st == 0 {
            let c = out_string(out, "oxf_canonical_device")?;
            let cs = CString::new(c.clone()).unwrap();
            prop_assert_eq!(oxf_canonical_device(cs.as_ptr(), &mut out), 0);
            prop_assert_eq!(out_string(out, "oxf_canonical_device")?, c);
        } else if let CArg::Bytes(b) = &spec {
            let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
            if let Ok(s) = std::str::from_utf8(&b[..end]) {
                prop_assert!(last_error().contains(&format!("'{s}'")), "{} does not quote {:?}", last_error(), s);
            }
        }
        // the calls without arguments
        prop_assert_eq!(unsafe { CStr::from_ptr(oxf_version()) }.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
        prop_assert_eq!(oxf_panic_check(), 13);
        prop_assert!(last_error().contains("Oxiflow panicked: oxf_panic_check"));
    }

    /// `oxf_lbfgsb` on a separable quadratic `sum (x_i - c_i)^2` inside a box, with hostile
    /// sizes, bounds, tolerances and callbacks: an error, or a point inside the bounds; at
    /// a PGTOL stop the point is the box-projected minimizer `clamp(c, lo, hi)` to within
    /// `pgtol` (the oracle).
    #[test]
    fn lbfgsb(
        n in prop_oneof![-2i64..0, 1i64..6], x0 in proptest::collection::vec(-10.0f64..10.0, 6), c in proptest::collection::vec(-10.0f64..10.0, 6),
        bounds in proptest::option::of(proptest::collection::vec((-12.0f64..12.0, 0.0f64..8.0), 6)), swap_bound in proptest::option::of(0usize..6),
        m in -1i32..12, max_iter in -1i64..40, pgtol in prop_oneof![Just(1e-8f64), 0.0f64..1e-2, Just(f64::NAN), Just(-1.0)],
        ftol in prop_oneof![Just(0.0f64), Just(1e-12), Just(f64::NAN)], mode in 0u8..6, stop_at in 0i64..5,
    ) {
        let mut x = x0.clone();
        let (mut lo, mut hi): (Vec<f64>, Vec<f64>) = match &bounds {
            Some(b) => b.iter().map(|&(l, w)| (l, l + w)).unzip(),
            None => (vec![f64::NEG_INFINITY; 6], vec![f64::INFINITY; 6]),
        };
        if let Some(k) = swap_bound {
            std::mem::swap(&mut lo[k], &mut hi[k]);
        }
        let mut data = Objective { c: c.clone(), mode, stop_at, calls: 0 };
        let (mut f, mut iters, mut status) = (0.0, 0i64, -1i32);
        let (lp, hp) = if bounds.is_some() || swap_bound.is_some() { (lo.as_ptr(), hi.as_ptr()) } else { (null(), null()) };
        let obj: Option<extern "C" fn(*mut c_void, i64, *const f64, *mut f64, *mut f64) -> i32> = if mode == 5 { None } else { Some(objective) };
        let st = oxf_lbfgsb(n, x.as_mut_ptr(), lp, hp, m, max_iter, pgtol, ftol, obj, Some(iteration), &mut data as *mut Objective as *mut c_void, &mut f, &mut iters, &mut status);
        check_status(st, "oxf_lbfgsb")?;
        let crossed = swap_bound.is_some_and(|k| (k as i64) < n && lo[k] > hi[k]);
        if n <= 0 || crossed || mode == 5 {
            prop_assert_eq!(st, 3);
        }
        if st == 0 {
            prop_assert!((0..=5).contains(&status), "status {}", status);
            for i in 0..n as usize {
                if lp.is_null() {
                    continue;
                }
                prop_assert!(x[i] >= lo[i] && x[i] <= hi[i], "x[{}] = {} outside [{}, {}]", i, x[i], lo[i], hi[i]);
                if status == OXF_LBFGSB_PGTOL && mode == 0 && pgtol.is_finite() && pgtol > 0.0 {
                    let want = c[i].max(lo[i]).min(hi[i]);
                    prop_assert!((x[i] - want).abs() <= pgtol, "x[{}] = {}, minimizer {}", i, x[i], want);
                }
            }
            if mode == 1 {
                prop_assert_eq!(status, OXF_LBFGSB_NUMERICAL, "a NaN loss is a numerical failure");
            }
        }
    }
}

/// The objective's data: the centre `c`, how to misbehave, when the iteration callback stops.
struct Objective {
    c: Vec<f64>,
    /// 0: honest; 1: NaN loss; 2: an error after 3 calls; 3: infinite gradient; 4: honest
    /// but the iteration callback stops at `stop_at`; 5: no objective (null callback).
    mode: u8,
    stop_at: i64,
    calls: usize,
}

extern "C" fn objective(userdata: *mut c_void, n: i64, x: *const f64, grad: *mut f64, f: *mut f64) -> i32 {
    let d = unsafe { &mut *(userdata as *mut Objective) };
    d.calls += 1;
    let (x, g) = unsafe { (std::slice::from_raw_parts(x, n as usize), std::slice::from_raw_parts_mut(grad, n as usize)) };
    let mut loss = 0.0;
    for i in 0..x.len() {
        loss += (x[i] - d.c[i]).powi(2);
        g[i] = 2.0 * (x[i] - d.c[i]);
    }
    match d.mode {
        1 => loss = f64::NAN,
        2 if d.calls > 3 => return 1,
        3 => g[0] = f64::INFINITY,
        _ => {}
    }
    unsafe { *f = loss };
    0
}

extern "C" fn iteration(userdata: *mut c_void, it: i64, _f: f64, _pg: f64, _evals: i64, _x: *const f64) -> i32 {
    let d = unsafe { &*(userdata as *const Objective) };
    (d.mode == 4 && it >= d.stop_at) as i32
}
