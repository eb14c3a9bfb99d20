//! The fuzz tests' shared parts: hostile dtypes, shapes, values and attributes drawn from a
//! seed, and the harness that runs the cases with a panic hook and a watchdog.
#![allow(dead_code)]

use crate::common::Rng;
use num_complex::Complex;
use oxiflow_core::ops::{AttrKind, AttrValue};
use oxiflow_core::{DType, Layout, Tensor};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The panic hook is the process's: the tests take turns.
pub static SERIAL: Mutex<()> = Mutex::new(());

pub const INTS: &[i64] = &[0, 1, 2, 3, -1, -2, 4, 5, 7, 100, -100, 1 << 40, i64::MAX, i64::MIN];
pub const FLOATS: &[f64] = &[0.0, 1.0, -1.0, 0.5, 2.0, -3.5, 1e300, -1e-300, f64::NAN, f64::INFINITY, f64::NEG_INFINITY];
pub const DIMS: &[usize] = &[0, 1, 2, 3, 4, 5];

pub fn dtype(r: &mut Rng) -> DType {
    // mostly floats: most ops take them
    r.pick(&[DType::Float64, DType::Float64, DType::Float32, DType::Float32, DType::Int32, DType::Int64, DType::Bool, DType::Complex64, DType::Complex128])
}

pub fn dims(r: &mut Rng) -> Vec<usize> {
    let rank = r.pick(&[0, 1, 1, 2, 2, 2, 3, 4]);
    (0..rank).map(|_| if r.chance(0.1) { 0 } else { r.pick(&DIMS[1..]) }).collect()
}

/// A value an integer operand may hold: mostly small (sizes, axes, indices in range),
/// sometimes negative or huge.
pub fn int(r: &mut Rng) -> i64 {
    if r.chance(0.75) {
        r.below(5) as i64
    } else {
        r.pick(INTS)
    }
}

pub fn tensor(r: &mut Rng, dt: DType, d: &[usize]) -> Tensor {
    tensor_with(r, dt, d, 0.2)
}

/// As [`tensor`], a float being one of [`FLOATS`] (NaN, infinities, ...) with chance `odd`.
pub fn tensor_with(r: &mut Rng, dt: DType, d: &[usize], odd: f64) -> Tensor {
    let n: usize = d.iter().product();
    let layout = if r.chance(0.5) { Layout::RowMajor } else { Layout::ColumnMajor };
    let f: Vec<f64> = (0..n).map(|_| if !r.chance(odd) { (r.below(2001) as f64 - 1000.0) / 250.0 } else { r.pick(FLOATS) }).collect();
    match dt {
        DType::Float64 => Tensor::from_vec(d, f, layout),
        DType::Float32 => Tensor::from_vec(d, f.iter().map(|&v| v as f32).collect(), layout),
        DType::Int32 => Tensor::from_vec(d, (0..n).map(|_| int(r) as i32).collect(), layout),
        DType::Int64 => Tensor::from_vec(d, (0..n).map(|_| int(r)).collect(), layout),
        DType::Bool => Tensor::from_vec(d, (0..n).map(|_| r.chance(0.5)).collect::<Vec<bool>>(), layout),
        DType::Complex64 => Tensor::from_vec(d, f.iter().map(|&v| Complex::new(v as f32, 0.5)).collect(), layout),
        DType::Complex128 => Tensor::from_vec(d, f.iter().map(|&v| Complex::new(v, -0.25)).collect(), layout),
    }
    .unwrap()
}

pub fn attr(r: &mut Rng, kind: AttrKind) -> AttrValue {
    match kind {
        AttrKind::Int => AttrValue::Int(int(r)),
        AttrKind::Float => AttrValue::Float(r.pick(FLOATS)),
        AttrKind::Bool => AttrValue::Bool(r.chance(0.5)),
        AttrKind::Str => AttrValue::Str(r.pick(&["", "x", "SAME", "VALID", "NHWC", "NCHW", "sum", "mean", "max", "lu", "garbage"]).to_string()),
        AttrKind::Type => AttrValue::Type(dtype(r)),
        AttrKind::Shape => AttrValue::Shape(if r.chance(0.1) { vec![1 << 40, 1 << 40] } else { dims(r) }),
        AttrKind::Ints => AttrValue::Ints((0..r.below(5)).map(|_| int(r)).collect()),
        AttrKind::Tensor => {
            let (dt, d) = (dtype(r), dims(r));
            AttrValue::Tensor(tensor(r, dt, &d))
        }
        AttrKind::Func => unreachable!("ops with function attributes are excluded"),
    }
}

/// The case running now and since when, for [`watchdog`].
static CURRENT: Mutex<Option<(Instant, String)>> = Mutex::new(None);

/// Runs `f` as the case `what`, which [`watchdog`] names if it runs for over a minute.
pub fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), what.to_string()));
    let out = f();
    *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = None;
    out
}

/// Ends the process, naming the case, when one runs for more than a minute: a hang is a
/// defect as a panic is, and the test harness would otherwise wait for it forever.
pub fn watchdog() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        std::thread::spawn(|| loop {
            std::thread::sleep(std::time::Duration::from_secs(1));
            if let Some((t, what)) = &*CURRENT.lock().unwrap_or_else(|e| e.into_inner()) {
                if t.elapsed().as_secs() > 60 {
                    eprintln!("a case has run for over a minute: {what}");
                    std::process::exit(3);
                }
            }
        });
    });
}

/// How far a case got: the op was refused at build time, built, ran, and its gradient ran.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub enum Reached {
    Nothing,
    Built,
    Ran,
    Differentiated,
}

/// Runs `OXIFLOW_OP_FUZZ_CASES` (default 400) cases of each of `items` by `case(k, i, rng,
/// description, error)`, the seed `OXIFLOW_FUZZ_SEED` or `default_seed`, with a panic hook
/// that records every panic on any thread; prints how deep the cases of each item reached
/// and returns the failures: the cases that panicked, and, where `first_must_run`, an item
/// whose case 0 did not run (a template that tests nothing).
pub fn fuzz(
    default_seed: u64,
    items: &[&'static str],
    first_must_run: bool,
    case: impl Fn(usize, usize, &mut Rng, &mut String, &mut String) -> Reached,
) -> Vec<String> {
    let cases: usize = std::env::var("OXIFLOW_OP_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(400);
    let seed: u64 = std::env::var("OXIFLOW_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(default_seed);
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    watchdog();
    let panics: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = panics.clone();
    std::panic::set_hook(Box::new(move |info| seen.lock().unwrap_or_else(|e| e.into_inner()).push(info.to_string())));
    let (mut failures, mut counts) = (Vec::new(), Vec::new());
    for (k, op) in items.iter().enumerate() {
        let mut r = Rng::new(seed ^ (k as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut reached = [0usize; 4];
        for i in 0..cases {
            let (mut desc, mut why) = (String::new(), String::new());
            let res = catch_unwind(AssertUnwindSafe(|| case(k, i, &mut r, &mut desc, &mut why)));
            if first_must_run && i == 0 && !matches!(res, Ok(Reached::Ran | Reached::Differentiated)) {
                failures.push(format!("{desc} did not run: {res:?}: {why}"));
            }
            reached[*res.as_ref().unwrap_or(&Reached::Nothing) as usize] += 1;
            let caught: Vec<String> = std::mem::take(&mut *panics.lock().unwrap_or_else(|e| e.into_inner()));
            if res.is_err() || !caught.is_empty() {
                failures.push(format!("{op} case {i} {desc}\n    {}", caught.join("\n    ")));
            }
        }
        counts.push(format!("{op:>28}: built {:>4}, ran {:>4}, differentiated {:>4}", cases - reached[0], reached[2] + reached[3], reached[3]));
    }
    let _ = std::panic::take_hook();
    // `--nocapture` shows it
    println!("{} cases each:\n{}", cases, counts.join("\n"));
    failures
}
