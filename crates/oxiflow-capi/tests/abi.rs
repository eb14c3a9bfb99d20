//! The C ABI's contract: status codes with TF's numbers, the message in `oxf_last_error`,
//! null handles and bad input as errors (never a crash), and a header that declares every
//! export.

use oxiflow::*;
use std::ffi::{CStr, CString};
use std::ptr::{null, null_mut};

fn last_error() -> String {
    unsafe { CStr::from_ptr(oxf_last_error()) }.to_string_lossy().into_owned()
}

#[test]
fn malformed_device_string_is_status_3_with_the_string_quoted() {
    let mut out = null();
    let spec = CString::new("/device:GPU:3/extra").unwrap();
    assert_eq!(oxf_canonical_device(spec.as_ptr(), &mut out), 3);
    assert!(last_error().contains("'/device:GPU:3/extra'"), "{}", last_error());
    let ok = CString::new("/gpu:1").unwrap();
    assert_eq!(oxf_canonical_device(ok.as_ptr(), &mut out), 0);
    assert_eq!(unsafe { CStr::from_ptr(out) }.to_str().unwrap(), "/device:GPU:1");
}

#[test]
fn op_input_names_come_from_the_ops_declaration() {
    let mut out: *const std::ffi::c_char = null();
    let op = CString::new("ApplyAdam").unwrap();
    assert_eq!(oxf_op_inputs(op.as_ptr(), &mut out), 0);
    let names = unsafe { CStr::from_ptr(out) }.to_str().unwrap().to_string();
    // TF's training_ops.cc order
    assert_eq!(names, "var\nm\nv\nbeta1_power\nbeta2_power\nlr\nbeta1\nbeta2\nepsilon\ngrad");
    let sin = CString::new("Sin").unwrap();
    assert_eq!(oxf_op_inputs(sin.as_ptr(), &mut out), 0);
    assert_eq!(unsafe { CStr::from_ptr(out) }.to_str().unwrap(), "", "Sin does not name its input");
    let bad = CString::new("NoSuchOp").unwrap();
    assert_eq!(oxf_op_inputs(bad.as_ptr(), &mut out), 5);
    assert!(last_error().contains("Op type not registered 'NoSuchOp'"), "{}", last_error());
    assert_eq!(oxf_op_inputs(null(), &mut out), 3);
}

#[test]
fn bad_handles_and_unknown_ops_are_errors_not_crashes() {
    let mut n = 0i64;
    assert_eq!(oxf_graph_num_nodes(null(), &mut n), 3);
    assert!(last_error().contains("null OxGraph handle"), "{}", last_error());
    let g = oxf_graph_new();
    let op = CString::new("NoSuchOp").unwrap();
    assert_eq!(oxf_add_op(g, op.as_ptr(), null(), null(), 0, null(), null(), &mut n), 5);
    assert!(last_error().contains("Op type not registered 'NoSuchOp'"), "{}", last_error());
    let sin = CString::new("Sin").unwrap();
    let nodes = [42i64];
    let idx = [0i32];
    assert_eq!(oxf_add_op(g, sin.as_ptr(), nodes.as_ptr(), idx.as_ptr(), 1, null(), null(), &mut n), 5);
    let bad_json = CString::new("{not json").unwrap();
    assert_eq!(oxf_add_op(g, sin.as_ptr(), null(), null(), 0, bad_json.as_ptr(), null(), &mut n), 3);
    assert_eq!(oxf_graph_num_nodes(g, &mut n), 0);
    assert_eq!(n, 0, "failed calls added nothing");
    let mut s = null_mut();
    let opts = CString::new("{\"no_such_option\": 1}").unwrap();
    assert_eq!(oxf_session_new(g, opts.as_ptr(), &mut s), 3);
    assert!(last_error().contains("no_such_option"));
    oxf_graph_free(g);
}

#[test]
fn a_column_major_feed_round_trips_through_a_run() {
    let g = oxf_graph_new();
    let dims = [2i64, 3];
    let mut p = 0i64;
    assert_eq!(oxf_placeholder(g, 2, 2, dims.as_ptr(), null(), &mut p), 0);
    let neg = CString::new("Neg").unwrap();
    let mut y = 0i64;
    assert_eq!(oxf_add_op(g, neg.as_ptr(), [p].as_ptr(), [0].as_ptr(), 1, null(), null(), &mut y), 0);
    let mut s = null_mut();
    assert_eq!(oxf_session_new(g, null(), &mut s), 0);
    // Julia's [1 2 3; 4 5 6], column-major
    let data = [1.0f64, 4.0, 2.0, 5.0, 3.0, 6.0];
    let view = OxTensorView {
        dtype: 2,
        ndims: 2,
        dims: dims.as_ptr(),
        data: data.as_ptr() as *const _,
        col_major: 1,
        strides: null(),
        buffer: data.as_ptr() as *const _,
        buffer_bytes: 48,
    };
    let mut r = null_mut();
    assert_eq!(oxf_session_run(s, [p].as_ptr(), [0].as_ptr(), &view, 1, [y].as_ptr(), [0].as_ptr(), 1, null(), 0, 0, &mut r), 0);
    let mut out = [0.0f64; 6];
    assert_eq!(oxf_result_copy(r, 0, out.as_mut_ptr() as *mut _, 48, 1), 0);
    assert_eq!(out, [-1.0, -4.0, -2.0, -5.0, -3.0, -6.0]);
    assert_eq!(oxf_result_copy(r, 0, out.as_mut_ptr() as *mut _, 40, 1), 3, "a wrong buffer size is refused");
    let mut json = null();
    assert_eq!(oxf_result_trace_json(r, &mut json), 9, "an untraced run has no profile");
    assert_eq!(oxf_result_free(r), 0);
    assert_eq!(oxf_session_free(s), 0);
    assert_eq!(oxf_graph_free(g), 0);
}

#[test]
fn the_committed_header_declares_every_export() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let header = std::fs::read_to_string(format!("{dir}/include/oxiflow.h")).unwrap();
    for entry in std::fs::read_dir(format!("{dir}/src")).unwrap() {
        let src = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for line in src.lines().filter(|l| l.starts_with("pub extern \"C\" fn ")) {
            let name = line["pub extern \"C\" fn ".len()..].split('(').next().unwrap();
            assert!(header.contains(&format!("{name}(")), "{name} is exported but not in oxiflow.h: run `make header`");
        }
    }
}

#[test]
fn a_fetched_value_is_handed_over_once_and_keeps_its_type() {
    let g = oxf_graph_new();
    let dims = [3i64, 2];
    let mut p = 0i64;
    assert_eq!(oxf_placeholder(g, 9, 2, dims.as_ptr(), null(), &mut p), 0);
    let id = CString::new("Identity").unwrap();
    let mut y = 0i64;
    assert_eq!(oxf_add_op(g, id.as_ptr(), [p].as_ptr(), [0].as_ptr(), 1, null(), null(), &mut y), 0);
    let mut s = null_mut();
    assert_eq!(oxf_session_new(g, null(), &mut s), 0);
    // a transposed view: element [i, j] at 2 i + j, i.e. row-major [[0, 1], [2, 3], [4, 5]]
    let data = [0i64, 1, 2, 3, 4, 5];
    let strides = [2i64, 1];
    let view = OxTensorView {
        dtype: 9,
        ndims: 2,
        dims: dims.as_ptr(),
        data: data.as_ptr() as *const _,
        col_major: 1,
        strides: strides.as_ptr(),
        buffer: data.as_ptr() as *const _,
        buffer_bytes: 48,
    };
    let mut r = null_mut();
    // fetched twice: the two values share one buffer, so the first is copied out
    assert_eq!(oxf_session_run(s, [p].as_ptr(), [0].as_ptr(), &view, 1, [y, y].as_ptr(), [0, 0].as_ptr(), 2, null(), 0, 0, &mut r), 0);
    let mut buf: *mut std::ffi::c_void = null_mut();
    assert_eq!(oxf_result_take(r, 0, 1, &mut buf), 0);
    assert!(!buf.is_null());
    let got = unsafe { std::slice::from_raw_parts(buf as *const i64, 6) }.to_vec();
    assert_eq!(got, [0, 2, 4, 1, 3, 5], "column-major");
    unsafe { free(buf) };
    assert_eq!(oxf_result_take(r, 0, 1, &mut buf), 9, "taken already");
    assert!(buf.is_null());
    let mut out = [0i64; 6];
    assert_eq!(oxf_result_copy(r, 0, out.as_mut_ptr() as *mut _, 48, 1), 9);
    let (mut dt, mut rank, mut d) = (0i32, 0i32, [0i64; 4]);
    assert_eq!(oxf_result_type(r, 0, &mut dt, &mut rank, d.as_mut_ptr(), 4), 0);
    assert_eq!((dt, rank, &d[..2]), (9, 2, &[3i64, 2][..]));
    // the second value is now the buffer's only holder: handed over as it is
    assert_eq!(oxf_result_take(r, 1, 0, &mut buf), 0);
    assert_eq!(unsafe { std::slice::from_raw_parts(buf as *const i64, 6) }, [0, 1, 2, 3, 4, 5], "row-major");
    unsafe { free(buf) };
    assert_eq!(oxf_result_take(r, 7, 1, &mut buf), 3);
    assert_eq!(oxf_result_free(r), 0);
    assert_eq!(oxf_session_free(s), 0);
    assert_eq!(oxf_graph_free(g), 0);
}

#[test]
fn freed_and_foreign_handles_are_errors_not_reads() {
    let g = oxf_graph_new();
    let mut s = null_mut();
    assert_eq!(oxf_session_new(g, null(), &mut s), 0);
    let mut n = 0i64;
    // a graph handle where a session is expected, and the other way round
    let mut log = null();
    assert_eq!(oxf_session_take_log(g as *const OxSession, &mut log), 3);
    assert!(last_error().contains("OxSession handle expected, got OxGraph handle"), "{}", last_error());
    assert_eq!(oxf_graph_num_nodes(s as *const OxGraph, &mut n), 3);
    // a number that was never a handle
    assert_eq!(oxf_graph_num_nodes(0x1234_5670 as *const OxGraph, &mut n), 3);
    assert!(last_error().contains("is not an OxGraph handle"), "{}", last_error());
    // the session keeps its graph: freeing the graph handle first is fine
    assert_eq!(oxf_graph_free(g), 0);
    assert_eq!(oxf_graph_num_nodes(g, &mut n), 3, "use after free");
    assert!(last_error().contains("freed already"), "{}", last_error());
    assert_eq!(oxf_graph_free(g), 3, "double free");
    assert!(last_error().contains("freed already"), "{}", last_error());
    assert_eq!(oxf_session_take_log(s, &mut log), 0, "the session still works");
    assert_eq!(oxf_session_free(s), 0);
    assert_eq!(oxf_session_free(s), 3);
    let mut r = null_mut();
    assert_eq!(oxf_session_run(s, null(), null(), null(), 0, null(), null(), 0, null(), 0, 0, &mut r), 3);
    assert_eq!(oxf_result_free(null_mut()), 0, "null is ignored");
    assert_eq!(oxf_graph_free(null_mut()), 0);
}

#[test]
fn arrays_are_read_only_inside_the_buffer_the_caller_gave() {
    let g = oxf_graph_new();
    let data = [1.0f64, 2.0, 3.0, 4.0];
    let dims = [2i64, 2];
    let mut c = 0i64;
    // a Const of 4 Float64 given 24 bytes, or 40
    assert_eq!(oxf_const(g, 2, 2, dims.as_ptr(), data.as_ptr() as *const _, 24, 1, null(), &mut c), 3);
    assert!(last_error().contains("outside the 24 bytes"), "{}", last_error());
    assert_eq!(oxf_const(g, 2, 2, dims.as_ptr(), data.as_ptr() as *const _, 40, 1, null(), &mut c), 3);
    assert!(last_error().contains("has 32 bytes, but 40 were given"), "{}", last_error());
    assert_eq!(oxf_variable(g, 2, 2, dims.as_ptr(), data.as_ptr() as *const _, 8, 1, null(), 1, &mut c), 3);
    assert_eq!(oxf_const(g, 2, 2, dims.as_ptr(), data.as_ptr() as *const _, 32, 1, null(), &mut c), 0);
    let mut p = 0i64;
    assert_eq!(oxf_placeholder(g, 2, 2, dims.as_ptr(), null(), &mut p), 0);
    let mut s = null_mut();
    assert_eq!(oxf_session_new(g, null(), &mut s), 0);
    let run = |view: &OxTensorView| {
        let mut r = null_mut();
        let st = oxf_session_run(s, [p].as_ptr(), [0].as_ptr(), view, 1, [p].as_ptr(), [0].as_ptr(), 1, null(), 0, 0, &mut r);
        assert_eq!(oxf_result_free(r), 0);
        st
    };
    let base = data.as_ptr() as *const std::ffi::c_void;
    let view = |data: *const f64, strides: *const i64, bytes: usize| OxTensorView {
        dtype: 2,
        ndims: 2,
        dims: dims.as_ptr(),
        data: data as *const _,
        col_major: 1,
        strides,
        buffer: base,
        buffer_bytes: bytes,
    };
    assert_eq!(run(&view(data.as_ptr(), null(), 32)), 0);
    assert_eq!(run(&view(data.as_ptr(), null(), 31)), 3, "one byte short");
    assert_eq!(run(&view(data[1..].as_ptr(), null(), 32)), 3, "starts inside, ends past the buffer");
    // strides [1, 2] fit, [1, 3] reach element 4, [-1, 2] reach element -1
    assert_eq!(run(&view(data.as_ptr(), [1i64, 2].as_ptr(), 32)), 0);
    assert_eq!(run(&view(data.as_ptr(), [1i64, 3].as_ptr(), 32)), 3);
    assert!(last_error().contains("outside the 32 bytes"), "{}", last_error());
    assert_eq!(run(&view(data.as_ptr(), [-1i64, 2].as_ptr(), 32)), 3);
    assert_eq!(run(&view(data[1..].as_ptr(), [-1i64, 2].as_ptr(), 32)), 0, "a reversed view inside the buffer");
    assert_eq!(run(&view(data.as_ptr(), [i64::MAX, 1].as_ptr(), 32)), 3, "a stride that overflows");
    assert_eq!(run(&OxTensorView { buffer: null(), ..view(data.as_ptr(), null(), 32) }), 3, "no buffer given");
    assert_eq!(oxf_session_free(s), 0);
    assert_eq!(oxf_graph_free(g), 0);
}

#[test]
fn threads_build_run_and_free_through_the_abi_at_once() {
    // two threads add nodes to one graph while two others run steps in one session; then a
    // session is freed while another thread runs steps in it: its step in flight ends
    // normally, its next call is status 3, nothing crashes
    let g = oxf_graph_new();
    let dims = [4i64];
    let mut p = 0i64;
    assert_eq!(oxf_placeholder(g, 2, 1, dims.as_ptr(), null(), &mut p), 0);
    let mut y = 0i64;
    assert_eq!(oxf_add_op(g, CString::new("Square").unwrap().as_ptr(), [p].as_ptr(), [0].as_ptr(), 1, null(), null(), &mut y), 0);
    let mut s = null_mut();
    assert_eq!(oxf_session_new(g, null(), &mut s), 0);
    let (gh, sh) = (g as usize, s as usize);
    let run = move |k: f64| -> (i32, f64) {
        let data = [k, 1.0, 2.0, 3.0];
        let view = OxTensorView {
            dtype: 2,
            ndims: 1,
            dims: dims.as_ptr(),
            data: data.as_ptr() as *const _,
            col_major: 1,
            strides: null(),
            buffer: data.as_ptr() as *const _,
            buffer_bytes: 32,
        };
        let mut r = null_mut();
        let st = oxf_session_run(sh as *const OxSession, [p].as_ptr(), [0].as_ptr(), &view, 1, [y].as_ptr(), [0].as_ptr(), 1, null(), 0, 0, &mut r);
        let mut out = [0.0f64; 4];
        if st == 0 {
            assert_eq!(oxf_result_copy(r, 0, out.as_mut_ptr() as *mut _, 32, 1), 0);
            assert_eq!(oxf_result_free(r), 0);
        }
        (st, out[0])
    };
    let builders: Vec<_> = (0..2)
        .map(|t| {
            std::thread::spawn(move || {
                let op = CString::new("Neg").unwrap();
                for _ in 0..500 {
                    let mut n = 0i64;
                    assert_eq!(oxf_add_op(gh as *mut OxGraph, op.as_ptr(), [p].as_ptr(), [0].as_ptr(), 1, null(), null(), &mut n), 0, "builder {t}");
                }
            })
        })
        .collect();
    let runners: Vec<_> = (0..2)
        .map(|t| {
            std::thread::spawn(move || {
                for i in 0..300 {
                    let k = (t * 1000 + i) as f64;
                    assert_eq!(run(k), (0, k * k), "runner {t} step {i}: {}", last_error());
                }
            })
        })
        .collect();
    for h in builders.into_iter().chain(runners) {
        h.join().unwrap();
    }
    let mut n = 0i64;
    assert_eq!(oxf_graph_num_nodes(g, &mut n), 0);
    assert_eq!(n, 2 + 1000, "every node the builders added is there once");
    let stepper = std::thread::spawn(move || {
        let mut ok = 0;
        loop {
            match run(3.0) {
                (0, v) => {
                    assert_eq!(v, 9.0);
                    ok += 1;
                }
                (3, _) => return ok,
                (st, _) => panic!("status {st}: {}", last_error()),
            }
        }
    });
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(oxf_session_free(s), 0);
    let steps = stepper.join().unwrap();
    assert!(steps > 0, "the stepper ran before the session was freed");
    assert_eq!(oxf_graph_free(g), 0);
}

extern "C" {
    fn free(p: *mut std::ffi::c_void);
}

#[test]
fn too_many_logical_devices_are_refused_before_any_list_is_built() {
    // a count of i64::MAX with no limits array: the list of entries is never allocated
    let cpu = CString::new("/physical_device:CPU:0").unwrap();
    let st = oxf_set_logical_device_configuration(cpu.as_ptr(), null(), i64::MAX);
    assert_eq!(st, 3, "InvalidArgument");
    let e = last_error();
    assert!(e.contains("logical devices asked of /physical_device:CPU:0, at most 256"), "{e}");
}
