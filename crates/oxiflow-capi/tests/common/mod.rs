//! Shared pieces of the C ABI's property tests (`abi_props_*.rs`): the case count, hostile
//! argument strategies and the checks every call's outcome must pass.
#![allow(dead_code)]

use oxiflow::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use std::ffi::{c_char, CStr, CString};
use std::ptr::null;

/// Cases per property: `OXIFLOW_FUZZ_CASES`, 100,000 by default (`make test`); `make fuzz`
/// asks for more. The random generator's seed is `OXIFLOW_FUZZ_SEED` (`make fuzz` draws and
/// prints a new one each time, so a failure can be replayed); unset, it is fixed, so that
/// `make test` runs the same cases on every machine.
pub fn config() -> Config {
    let cases = std::env::var("OXIFLOW_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000);
    Config { cases, failure_persistence: None, rng_seed: RngSeed::Fixed(fuzz_seed()), ..Config::default() }
}

/// The seed `config` uses (see there).
pub fn fuzz_seed() -> u64 {
    match std::env::var("OXIFLOW_FUZZ_SEED").ok().as_deref() {
        None | Some("") => 0x0f1f_2026,
        Some(v) => v.parse().unwrap_or_else(|_| panic!("OXIFLOW_FUZZ_SEED={v}: not a number")),
    }
}

pub fn last_error() -> String {
    unsafe { CStr::from_ptr(oxf_last_error()) }.to_string_lossy().into_owned()
}

/// The statuses an export may return (TF codes): a panic turned into 13 ("Oxiflow
/// panicked") or any other number fails the property.
pub fn check_status(st: i32, call: &str) -> Result<(), TestCaseError> {
    prop_assert!(matches!(st, 0 | 3 | 5 | 8 | 9 | 12 | 13), "{call}: status {st} is not a TF code");
    if st != 0 {
        let e = last_error();
        prop_assert!(!e.is_empty(), "{call}: status {st} without a message");
        prop_assert!(!e.contains("panicked"), "{call}: a panic reached the guard: {e}");
    }
    Ok(())
}

/// A returned string: valid UTF-8 behind a non-null pointer.
pub fn out_string(p: *const c_char, call: &str) -> Result<String, TestCaseError> {
    prop_assert!(!p.is_null(), "{call}: status 0 with a null string");
    let s = unsafe { CStr::from_ptr(p) }.to_str();
    prop_assert!(s.is_ok(), "{call}: the returned string is not UTF-8");
    Ok(s.unwrap().to_string())
}

/// A C string argument: null, bytes (invalid UTF-8 included, NULs end it), or one of the
/// `words` the export understands, possibly with junk appended.
#[derive(Debug, Clone)]
pub enum CArg {
    Null,
    Bytes(Vec<u8>),
}

impl CArg {
    /// Keeps the string alive while its pointer is used.
    pub fn with<T>(&self, f: impl FnOnce(*const c_char) -> T) -> T {
        match self {
            CArg::Null => f(null()),
            CArg::Bytes(b) => {
                let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
                let c = CString::new(&b[..end]).unwrap();
                f(c.as_ptr())
            }
        }
    }
}

pub fn c_arg(words: &'static [&'static str]) -> impl Strategy<Value = CArg> {
    let word = proptest::sample::select(words);
    prop_oneof![
        1 => Just(CArg::Null),
        3 => proptest::collection::vec(any::<u8>(), 0..24).prop_map(CArg::Bytes),
        2 => "\\PC{0,16}".prop_map(|s| CArg::Bytes(s.into_bytes())),
        6 => (word.clone(), proptest::option::of("[:/*0-9A-Za-z_ ]{0,6}"))
            .prop_map(|(w, tail)| CArg::Bytes(format!("{w}{}", tail.unwrap_or_default()).into_bytes())),
    ]
}

/// Device strings, good and bad.
pub const DEVICE_WORDS: &[&str] = &[
    "/device:CPU:0",
    "/cpu:0",
    "/gpu:0",
    "/device:GPU:1",
    "GPU:0",
    "CPU:0",
    "/job:localhost/replica:0/task:0/device:CPU:0",
    "/job:localhost",
    "/device:GPU:*",
    "/physical_device:GPU:0",
    "/physical_device:CPU:0",
    "/device:XLA_CPU:0",
    "/device:CPU:-1",
    "",
    "/",
    "//",
    "/device:",
    "gpu",
    "/replica:99999999999999999999",
    "/task:x",
];

/// JSON texts, good and bad, for options and attrs.
pub fn json_arg(keys: &'static [&'static str]) -> impl Strategy<Value = CArg> {
    let value = prop_oneof![
        Just("true".to_string()),
        Just("false".to_string()),
        Just("null".to_string()),
        (-3i64..5).prop_map(|v| v.to_string()),
        prop_oneof![Just(1i64 << 31), Just(1 << 40), Just(i64::MAX), Just(i64::MIN), Just(257)].prop_map(|v| v.to_string()),
        Just("1e308".to_string()),
        Just("-0.5".to_string()),
        Just("18446744073709551616".to_string()),
        "[a-zA-Z0-9:/]{0,8}".prop_map(|s| format!("\"{s}\"")),
        Just("\"DT_FLOAT\"".to_string()),
        Just("\"float64\"".to_string()),
        proptest::collection::vec(-2i64..5, 0..4).prop_map(|v| format!("{v:?}")),
        Just("[1099511627776, 1099511627776]".to_string()),
        Just("{\"allow_growth\": true}".to_string()),
        Just("[[1, 2], [3]]".to_string()),
    ];
    let obj = proptest::collection::vec((proptest::sample::select(keys), value), 0..4)
        .prop_map(|kv| format!("{{{}}}", kv.iter().map(|(k, v)| format!("\"{k}\": {v}")).collect::<Vec<_>>().join(", ")));
    prop_oneof![
        6 => obj.prop_map(|s| CArg::Bytes(s.into_bytes())),
        1 => Just(CArg::Null),
        1 => proptest::collection::vec(any::<u8>(), 0..16).prop_map(CArg::Bytes),
        1 => Just(CArg::Bytes(b"[1, 2]".to_vec())),
    ]
}

/// Which handle a call gets: the live one, null, a freed one, one of another kind, or any
/// number at all.
#[derive(Debug, Clone, Copy)]
pub enum Handle {
    Live,
    Null,
    Freed,
    OtherKind,
    Number(usize),
}

pub fn handle() -> impl Strategy<Value = Handle> {
    prop_oneof![
        12 => Just(Handle::Live),
        1 => Just(Handle::Null),
        1 => Just(Handle::Freed),
        1 => Just(Handle::OtherKind),
        1 => any::<usize>().prop_map(Handle::Number),
    ]
}

impl Handle {
    /// The pointer for this choice, given the live, freed and other-kind handles.
    pub fn pick<T>(self, live: *mut T, freed: *mut T, other: *mut std::ffi::c_void) -> *mut T {
        match self {
            Handle::Live => live,
            Handle::Null => std::ptr::null_mut(),
            Handle::Freed => freed,
            Handle::OtherKind => other as *mut T,
            Handle::Number(n) => n as *mut T,
        }
    }
    pub fn is_live(self) -> bool {
        matches!(self, Handle::Live)
    }
}

/// A node id: usually one of the graph's `n` nodes (or just past them), sometimes any number.
pub fn node_id(n: i64) -> impl Strategy<Value = i64> {
    prop_oneof![8 => 0..n + 2, 1 => any::<i64>(), 1 => Just(-1i64)]
}

/// Dtype codes: the supported ones and others.
pub fn dtype_code() -> impl Strategy<Value = i32> {
    prop_oneof![8 => proptest::sample::select(&[1, 2, 3, 9, 10][..]), 1 => any::<i32>(), 1 => 0..30i32]
}

/// Dims: small ones mostly, negative, huge and overflowing ones sometimes.
pub fn dims() -> impl Strategy<Value = Vec<i64>> {
    let d = prop_oneof![10 => 0..4i64, 1 => Just(-1i64), 1 => Just(1i64 << 31), 1 => Just(i64::MAX), 1 => Just(1i64 << 40)];
    proptest::collection::vec(d, 0..5)
}
