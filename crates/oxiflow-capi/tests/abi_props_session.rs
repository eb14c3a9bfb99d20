//! Property tests of the session, run-result and profile exports of the C ABI with random
//! and hostile arguments (see `abi_props_graph.rs` for what every call must satisfy): any
//! options JSON, feeds of any dtype code, dims, strides and buffer size, fetches and
//! targets of any node and index, results used after being freed or handed over, and
//! timeline JSON that is not a timeline. A fed value fetched back must equal what was fed
//! (Julia-style column-major indexing as the oracle). `OXIFLOW_FUZZ_CASES` cases each.

mod common;

use common::*;
use oxiflow::*;
use proptest::prelude::*;
use std::ffi::{c_char, c_void, CString};
use std::ptr::{null, null_mut};

fn cstr(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// A graph with a Float64 `[2, 3]` placeholder `x` (node 0), `Identity(x)` (node 1),
/// `Neg(x)` (node 2), a variable `v` (nodes 3-6, its initializer `v/Assign` is node 5), and
/// `init` (node 7); and a session over it.
struct Fixture {
    g: *mut OxGraph,
    s: *mut OxSession,
}

fn fixture() -> Fixture {
    let g = oxf_graph_new();
    let dims = [2i64, 3];
    let mut x = -1;
    assert_eq!(oxf_placeholder(g, 2, 2, dims.as_ptr(), cstr("x").as_ptr(), &mut x), 0);
    for op in ["Identity", "Neg"] {
        let mut y = -1;
        assert_eq!(oxf_add_op(g, cstr(op).as_ptr(), [x].as_ptr(), [0].as_ptr(), 1, null(), null(), &mut y), 0);
    }
    let data = [1.5f64; 6];
    let mut v = -1;
    assert_eq!(oxf_variable(g, 2, 2, dims.as_ptr(), data.as_ptr() as *const c_void, 48, 1, cstr("v").as_ptr(), 1, &mut v), 0);
    let mut init = -1;
    assert_eq!(oxf_global_variables_initializer(g, &mut init), 0);
    assert_eq!(init, 7);
    let mut s = null_mut();
    assert_eq!(oxf_session_new(g, cstr("{\"inter_op_threads\": 1, \"intra_op_threads\": 1}").as_ptr(), &mut s), 0, "{}", last_error());
    Fixture { g, s }
}

fn freed_session() -> *mut OxSession {
    let f = fixture();
    assert_eq!(oxf_session_free(f.s), 0);
    assert_eq!(oxf_graph_free(f.g), 0);
    f.s
}

thread_local! {
    static F: Fixture = fixture();
    static FREED: *mut OxSession = freed_session();
}

const OPTION_KEYS: &[&str] = &[
    "allow_soft_placement",
    "log_device_placement",
    "CPU",
    "GPU",
    "inter_op_threads",
    "intra_op_threads",
    "emulated_gpus",
    "fusion",
    "gpu_options",
    "no_such_option",
];

/// Options that would start many threads or devices are left to the bounds tests
/// (`Session(inter=2^31)` and the like are refused before anything starts): here a value of
/// 3 to 256 becomes 2 so that 100,000 sessions start quickly.
fn tame(json: &CArg) -> CArg {
    match json {
        CArg::Bytes(b) => {
            let text = String::from_utf8_lossy(b).to_string();
            let mut out = String::new();
            for tok in text.split_inclusive(|c: char| !c.is_ascii_digit()) {
                let digits: String = tok.chars().take_while(|c| c.is_ascii_digit()).collect();
                match digits.parse::<u64>() {
                    Ok(v) if (3..=256).contains(&v) => out.push_str(&tok.replacen(&digits, "2", 1)),
                    _ => out.push_str(tok),
                }
            }
            CArg::Bytes(out.into_bytes())
        }
        CArg::Null => CArg::Null,
    }
}

proptest! {
    #![proptest_config(config())]

    /// Sessions from any options JSON, and every session query on a live, freed or made-up
    /// handle.
    #[test]
    fn sessions(opts in json_arg(OPTION_KEYS), h in handle(), node in node_id(10), device in c_arg(DEVICE_WORDS)) {
        let opts = tame(&opts);
        let g = F.with(|f| f.g);
        let mut s = null_mut();
        let st = opts.with(|o| oxf_session_new(g, o, &mut s));
        check_status(st, "oxf_session_new")?;
        let mut out: *const c_char = null();
        let st2 = opts.with(|o| oxf_list_devices(o, &mut out));
        check_status(st2, "oxf_list_devices")?;
        prop_assert_eq!(st == 0, st2 == 0, "oxf_session_new and oxf_list_devices disagree: {}", last_error());
        if st2 == 0 {
            prop_assert!(out_string(out, "oxf_list_devices")?.starts_with("/job:localhost/replica:0/task:0/device:CPU:0\t"));
        }
        let live = if st == 0 { s } else { F.with(|f| f.s) };
        let s = h.pick(live, FREED.with(|f| *f), g as *mut c_void);
        let string_calls: [(&str, extern "C" fn(*const OxSession, *mut *const c_char) -> i32); 4] = [
            ("oxf_session_take_log", oxf_session_take_log),
            ("oxf_session_devices", oxf_session_devices),
            ("oxf_session_placement_report", oxf_session_placement_report),
            ("oxf_session_graph_dot", oxf_session_graph_dot),
        ];
        for (call, f) in string_calls {
            let st = f(s, &mut out);
            check_status(st, call)?;
            prop_assert_eq!(st == 0, h.is_live(), "{}: {}", call, last_error());
            if st == 0 {
                out_string(out, call)?;
            }
        }
        let real = h.is_live() && (0..8).contains(&node);
        for (call, f) in [("oxf_session_assigned_device", oxf_session_assigned_device as extern "C" fn(*const OxSession, i64, *mut *const c_char) -> i32), ("oxf_session_explain_placement", oxf_session_explain_placement)] {
            let st = f(s, node, &mut out);
            check_status(st, call)?;
            prop_assert_eq!(st == 0, real, "{} of node {}: {}", call, node, last_error());
        }
        let (mut inter, mut intra) = (0i32, 0i32);
        let st = oxf_session_threads(s, &mut inter, &mut intra);
        check_status(st, "oxf_session_threads")?;
        if st == 0 {
            prop_assert!(inter >= 1 && intra >= 1);
        }
        let mut mem = [0u64; 4];
        let st = device.with(|d| oxf_session_memory_stats(s, d, mem.as_mut_ptr()));
        check_status(st, "oxf_session_memory_stats")?;
        if st == 0 {
            prop_assert!(mem[0] <= mem[1] && mem[1] <= mem[2].max(mem[1]));
        }
        if live != F.with(|f| f.s) {
            prop_assert_eq!(oxf_session_free(live), 0);
            prop_assert_eq!(oxf_session_free(live), 3, "a double free is reported");
        }
    }

    /// Runs with any feeds, fetches and targets, then every result export on the result,
    /// a freed one and made-up ones. What is fed to `x` and fetched through `Identity`
    /// comes back equal.
    #[test]
    fn runs(
        // mostly a good feed of x (Float64 [2, 3]) fetched through Identity, so that the
        // value check runs in about a third of the cases
        dtype in prop_oneof![3 => Just(2), 1 => dtype_code()], dims in prop_oneof![3 => Just(vec![2i64, 3]), 1 => dims()],
        strides in proptest::option::of(proptest::collection::vec(-7i64..8, 0..4)),
        start in 0usize..40, buffer_elems in 0usize..48, col_major in any::<i32>(),
        feed_node in prop_oneof![3 => Just(0i64), 1 => node_id(10)], feed_index in prop_oneof![3 => Just(0i32), 1 => -1i32..2],
        fetches in proptest::collection::vec((prop_oneof![2 => Just(1i64), 1 => node_id(10)], prop_oneof![3 => Just(0i32), 1 => -1i32..2]), 0..4),
        targets in proptest::collection::vec(node_id(10), 0..3),
        trace in any::<i32>(), h in handle(), which in -1i32..5, dst_bytes in prop_oneof![Just(None), (0usize..100).prop_map(Some)], take_layout in any::<i32>(),
    ) {
        let (s, g) = F.with(|f| (f.s, f.g));
        // a zero stride makes a large tensor of a small buffer; one that this machine could
        // allocate but that takes seconds to fill is left out (an impossible one is kept:
        // it must be an OOM error, not an abort)
        let elems = dims.iter().try_fold(1u128, |a, &d| u64::try_from(d).ok().and_then(|d| a.checked_mul(d as u128)));
        let zero_stride = strides.as_ref().is_some_and(|v| v.len() == dims.len() && v.contains(&0));
        prop_assume!(!(zero_stride && elems.is_some_and(|n| n > 1 << 24 && n < 1 << 36)));
        // the buffer holds 48 Float64 0, 1, 2, ...; the view starts `start` elements in
        let buffer: Vec<f64> = (0..48).map(|i| i as f64).collect();
        let data = unsafe { buffer.as_ptr().add(start) };
        let strides_ptr = strides.as_ref().map_or(null(), |v| if v.len() == dims.len() { v.as_ptr() } else { null() });
        let view = OxTensorView {
            dtype, ndims: dims.len() as i32, dims: dims.as_ptr(), data: data as *const c_void, col_major, strides: strides_ptr,
            buffer: buffer.as_ptr() as *const c_void, buffer_bytes: buffer_elems * 8,
        };
        let (fnodes, fidx): (Vec<i64>, Vec<i32>) = fetches.iter().copied().unzip();
        let mut r = null_mut();
        let st = oxf_session_run(s, [feed_node].as_ptr(), [feed_index].as_ptr(), &view, 1, fnodes.as_ptr(), fidx.as_ptr(), fnodes.len() as i32, targets.as_ptr(), targets.len() as i32, trace, &mut r);
        check_status(st, "oxf_session_run")?;
        if st == 0 {
            // fed x as Float64 [2, 3]: every Identity fetch is the fed view, column-major
            for (k, &(n, i)) in fetches.iter().enumerate() {
                if n == 1 && i == 0 && feed_node == 0 && feed_index == 0 {
                    let mut got = [0f64; 6];
                    prop_assert_eq!(oxf_result_copy(r, k as i32, got.as_mut_ptr() as *mut c_void, 48, 1), 0);
                    let st_ = strides.as_ref().filter(|v| v.len() == 2).map(|v| (v[0], v[1]));
                    for (j, &x) in got.iter().enumerate() {
                        let (a, b) = ((j % 2) as i64, (j / 2) as i64);
                        let off = match st_ {
                            Some((s0, s1)) => a * s0 + b * s1,
                            None if col_major != 0 => a + 2 * b,
                            None => 3 * a + b,
                        };
                        prop_assert_eq!(x, (start as i64 + off) as f64, "element [{}, {}]", a, b);
                    }
                }
            }
        }
        let freed = {
            let mut r2 = null_mut();
            prop_assert_eq!(oxf_session_run(s, null(), null(), null(), 0, null(), null(), 0, null(), 0, 0, &mut r2), 0);
            prop_assert_eq!(oxf_result_free(r2), 0);
            r2
        };
        let res = h.pick(r, freed, g as *mut c_void);
        let live = st == 0 && h.is_live();
        let (mut dt, mut rank, mut d) = (0i32, 0i32, [0i64; 8]);
        let st = oxf_result_type(res, which, &mut dt, &mut rank, d.as_mut_ptr(), 8);
        check_status(st, "oxf_result_type")?;
        prop_assert_eq!(st == 0, live && which >= 0 && (which as usize) < fetches.len(), "oxf_result_type: {}", last_error());
        let mut dst = [0u8; 100];
        let n_bytes = if st == 0 { d[..rank as usize].iter().product::<i64>() as usize * if dt == 10 { 1 } else if dt == 1 || dt == 3 { 4 } else { 8 } } else { 0 };
        let want = dst_bytes.unwrap_or(n_bytes.min(100));
        let st_copy = oxf_result_copy(res, which, dst.as_mut_ptr() as *mut c_void, want, take_layout);
        check_status(st_copy, "oxf_result_copy")?;
        if st_copy == 0 {
            prop_assert_eq!(want, n_bytes);
        }
        let mut taken: *mut c_void = null_mut();
        let st_take = oxf_result_take(res, which, take_layout, &mut taken);
        check_status(st_take, "oxf_result_take")?;
        if !taken.is_null() {
            unsafe { free(taken) };
            let mut again: *mut c_void = null_mut();
            prop_assert_eq!(oxf_result_take(res, which, take_layout, &mut again), 9, "taken twice");
        }
        let mut out: *const c_char = null();
        for (call, f) in [("oxf_result_trace_json", oxf_result_trace_json as extern "C" fn(*const OxRunResult, *mut *const c_char) -> i32), ("oxf_result_trace_events", oxf_result_trace_events)] {
            let st = f(res, &mut out);
            check_status(st, call)?;
            prop_assert_eq!(st == 0, live && trace != 0, "{}: {}", call, last_error());
        }
        let st = oxf_result_free(res);
        check_status(st, "oxf_result_free")?;
        prop_assert_eq!(st == 0, live || res.is_null());
        if h.is_live() && !r.is_null() {
            prop_assert_eq!(oxf_result_free(r), 3, "a double free is reported");
        } else if !r.is_null() {
            prop_assert_eq!(oxf_result_free(r), 0);
        }
    }

    /// Timeline rendering from any text: a timeline, JSON of another shape, or bytes.
    #[test]
    fn timelines(json in prop_oneof![
        json_arg(&["traceEvents", "ph", "ts", "dur", "pid", "tid", "name", "args"]),
        proptest::collection::vec((0u8..4, 0i64..1000, -5i64..500), 0..6).prop_map(|evs| CArg::Bytes(format!(
            "{{\"traceEvents\": [{}]}}",
            evs.iter().map(|(ph, ts, dur)| format!("{{\"ph\": \"{}\", \"ts\": {ts}, \"dur\": {dur}, \"pid\": {ph}, \"tid\": 0, \"name\": \"op{ph}\", \"args\": {{}}}}", ["X", "M", "s", "f"][*ph as usize])).collect::<Vec<_>>().join(", ")
        ).into_bytes())),
    ]) {
        let mut out: *const c_char = null();
        let st = json.with(|j| oxf_timeline_html(j, &mut out));
        check_status(st, "oxf_timeline_html")?;
        if st == 0 {
            prop_assert!(out_string(out, "oxf_timeline_html")?.contains("<html"));
        }
        let st2 = json.with(|j| oxf_timeline_summary(j, &mut out));
        check_status(st2, "oxf_timeline_summary")?;
        prop_assert_eq!(st == 0, st2 == 0, "html and summary disagree on the same JSON: {}", last_error());
    }
}

extern "C" {
    fn free(p: *mut c_void);
}
