//! Property tests of the graph exports of the C ABI with random and hostile arguments:
//! handles that are null, freed, of another kind or made up; node ids and output indices
//! out of range; unknown dtype codes; negative, huge and overflowing dims; arrays whose
//! declared size disagrees with their dims; strings that are not UTF-8; malformed JSON and
//! attrs of every type; device functions that fail. Every call must return a TF status
//! with a message (never a panic, a crash or a read outside the arguments), a failed call
//! must leave the graph as it was, and a successful one must do what it says. Each
//! property runs `OXIFLOW_FUZZ_CASES` cases (100,000 by default; `make fuzz` runs more).

mod common;

use common::*;
use oxiflow::*;
use proptest::prelude::*;
use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr::{null, null_mut};

fn cstr(s: &str) -> CString {
    CString::new(s).unwrap()
}

fn num_nodes(g: *const OxGraph) -> i64 {
    let mut n = -1;
    assert_eq!(oxf_graph_num_nodes(g, &mut n), 0, "{}", last_error());
    n
}

fn add(g: *mut OxGraph, op: &str, inputs: &[i64], attrs: &str) -> i64 {
    let (op, attrs) = (cstr(op), cstr(attrs));
    let idx = vec![0i32; inputs.len()];
    let mut out = -1;
    assert_eq!(oxf_add_op(g, op.as_ptr(), inputs.as_ptr(), idx.as_ptr(), inputs.len() as i32, attrs.as_ptr(), null(), &mut out), 0, "{}", last_error());
    out
}

/// A small graph: `x` (Float64 [2, 3] placeholder), a constant, `Sin`, `Add`, a variable
/// (4 nodes) and `Unpack` (2 outputs).
fn fixture() -> *mut OxGraph {
    let g = oxf_graph_new();
    let dims = [2i64, 3];
    let mut x = -1;
    assert_eq!(oxf_placeholder(g, 2, 2, dims.as_ptr(), cstr("x").as_ptr(), &mut x), 0);
    let data = [0.5f64; 6];
    let mut c = -1;
    assert_eq!(oxf_const(g, 2, 2, dims.as_ptr(), data.as_ptr() as *const c_void, 48, 1, null(), &mut c), 0);
    let s = add(g, "Sin", &[x], "");
    add(g, "Add", &[s, c], "");
    let mut v = -1;
    assert_eq!(oxf_variable(g, 2, 2, dims.as_ptr(), data.as_ptr() as *const c_void, 48, 1, cstr("v").as_ptr(), 1, &mut v), 0);
    add(g, "Unpack", &[x], "{\"num\": 2}");
    g
}

/// `x` (Float64 [2, 3] placeholder), `Sin`, `IdentityN(sin, x)` marked as a custom
/// gradient, `Cos` of its output 0, `Exp` of `x`.
fn custom_fixture() -> *mut OxGraph {
    let g = oxf_graph_new();
    let dims = [2i64, 3];
    let mut x = -1;
    assert_eq!(oxf_placeholder(g, 2, 2, dims.as_ptr(), cstr("x").as_ptr(), &mut x), 0);
    let s = add(g, "Sin", &[x], "");
    let id = add(g, "IdentityN", &[s, x], "{\"_gradient_op_type\": \"CustomGradient-1\"}");
    add(g, "Cos", &[id], "");
    add(g, "Exp", &[x], "");
    g
}

/// Output lists for `custom_fixture`: mostly `through` (a pass that meets the custom node)
/// or `other`, else random pairs.
fn pairs_or(through: Vec<(i64, i32)>, other: Vec<(i64, i32)>) -> impl Strategy<Value = Vec<(i64, i32)>> {
    prop_oneof![3 => Just(through), 1 => Just(other), 2 => proptest::collection::vec((node_id(6), -1i32..3), 0..3)]
}

/// A freed graph handle (never live again).
fn freed_graph() -> *mut OxGraph {
    let g = oxf_graph_new();
    assert_eq!(oxf_graph_free(g), 0);
    g
}

thread_local! {
    static OTHER: *mut c_void = {
        // a live handle of another kind: a session
        let g = oxf_graph_new();
        let mut s = null_mut();
        assert_eq!(oxf_session_new(g, null(), &mut s), 0);
        s as *mut c_void
    };
}

/// Op types for `oxf_add_op`: every registered one, and some that are not.
fn op_type() -> impl Strategy<Value = CArg> {
    let mut names: Vec<&'static str> = oxiflow_core::ops::registered();
    names.extend(["NoSuchOp", "", "sin", "Sin ", "_Internal"]);
    let names: &'static [&'static str] = Box::leak(names.into_boxed_slice());
    prop_oneof![9 => proptest::sample::select(names).prop_map(|s| CArg::Bytes(s.as_bytes().to_vec())), 1 => c_arg(&["Sin"])]
}

const ATTR_KEYS: &[&str] = &[
    "T",
    "dtype",
    "DstT",
    "SrcT",
    "shape",
    "N",
    "axis",
    "num_split",
    "transpose_a",
    "transpose_b",
    "keep_dims",
    "value",
    "seed",
    "seed2",
    "Tidx",
    "perm",
    "num",
    "begin_mask",
    "paddings",
    "container",
    "shared_name",
    "use_locking",
    "alpha",
];

const NAME_WORDS: &[&str] = &["x", "v", "Sin", "a/b", "a/", "scope/", "a:b", "", "_x", "Add_1", "v/read", "-x", ".", "a b"];

proptest! {
    #![proptest_config(config())]

    /// Inspection of nodes: consistent answers for real nodes (the name finds the node
    /// again), errors for everything else.
    #[test]
    fn inspecting_nodes(h in handle(), node in node_id(12), index in -2i32..4, max_dims in -1i32..8, name in c_arg(NAME_WORDS), key in c_arg(&["trainable_variables", "variables", "nope"])) {
        thread_local!(static G: *mut OxGraph = fixture());
        let live = G.with(|g| *g);
        let g = h.pick(live, freed_graph(), OTHER.with(|o| *o));
        let n_live = num_nodes(live);
        let mut n = 0i64;
        let st = oxf_graph_num_nodes(g, &mut n);
        check_status(st, "oxf_graph_num_nodes")?;
        prop_assert_eq!(st == 0, h.is_live());
        let real = h.is_live() && node >= 0 && node < n_live;
        let mut out: *const c_char = null();
        type StrFn = extern "C" fn(*const OxGraph, i64, *mut *const c_char) -> i32;
        let fns: [(&str, StrFn); 4] = [("oxf_node_name", oxf_node_name), ("oxf_node_op", oxf_node_op), ("oxf_node_device", oxf_node_device), ("oxf_node_colocation", oxf_node_colocation)];
        for (call, f) in fns.iter().chain([("oxf_node_inputs", oxf_node_inputs as StrFn)].iter()) {
            let st = f(g, node, &mut out);
            check_status(st, call)?;
            prop_assert_eq!(st == 0, real, "{} on node {}: {}", call, node, last_error());
            if st == 0 {
                out_string(out, call)?;
            }
        }
        if real {
            prop_assert_eq!(oxf_node_name(g, node, &mut out), 0);
            let own = out_string(out, "oxf_node_name")?;
            let c = cstr(&own);
            let mut back = -1i64;
            prop_assert_eq!(oxf_node_by_name(g, c.as_ptr(), &mut back), 0);
            prop_assert_eq!(back, node, "the node named {} is not {}", own, node);
        }
        let mut k = 0i32;
        let st = oxf_node_num_outputs(g, node, &mut k);
        check_status(st, "oxf_node_num_outputs")?;
        prop_assert_eq!(st == 0, real);
        let (mut dt, mut rank, mut dims) = (0i32, 0i32, [0i64; 8]);
        let st = oxf_output_type(g, node, index, &mut dt, &mut rank, dims.as_mut_ptr(), max_dims);
        check_status(st, "oxf_output_type")?;
        if st == 0 {
            prop_assert!(real && index >= 0 && index < k, "output {} of node {} typed", index, node);
            prop_assert!(rank <= max_dims && [1, 2, 3, 9, 10].contains(&dt));
        }
        let mut id = 0i64;
        let st = name.with(|p| oxf_node_by_name(g, p, &mut id));
        check_status(st, "oxf_node_by_name")?;
        if st == 0 {
            prop_assert!(id >= 0 && id < n_live);
        }
        let st = key.with(|p| oxf_collection(g, p, &mut out));
        check_status(st, "oxf_collection")?;
        prop_assert_eq!(num_nodes(live), n_live, "inspection added nodes");
    }

    /// Building with hostile arguments: a failed call adds no node; a successful one adds
    /// the node it returns, of the requested type.
    #[test]
    fn building_nodes(
        h in handle(), dtype in dtype_code(), dims in dims(), short in 0usize..2, extra in 0usize..9, col in any::<i32>(),
        name in c_arg(NAME_WORDS), op in op_type(), inputs in proptest::collection::vec((node_id(12), -1i32..3), 0..4),
        attrs in json_arg(ATTR_KEYS), trainable in any::<i32>(), key in c_arg(&["losses", "variables"]), coll_node in node_id(12),
    ) {
        let live = fixture();
        let g = h.pick(live, freed_graph(), OTHER.with(|o| *o));
        // the data: a real buffer of 64 bytes; the declared size at most that
        let data = [7u8; 64];
        let count: i64 = dims.iter().try_fold(1i64, |a, &d| a.checked_mul(d)).unwrap_or(-1);
        let bytes = if (0..=8).contains(&count) { (count as usize * 8).saturating_sub(short * 4) } else { extra * 8 };
        let before = num_nodes(live);
        let mut out = -1i64;
        let dp = dims.as_ptr();
        let nd = dims.len() as i32;
        let mut expected = before;
        for call in ["oxf_const", "oxf_placeholder", "oxf_variable"] {
            let st = name.with(|n| match call {
                "oxf_const" => oxf_const(g, dtype, nd, dp, data.as_ptr() as *const c_void, bytes.min(64), col, n, &mut out),
                "oxf_placeholder" => oxf_placeholder(g, dtype, nd, dp, n, &mut out),
                _ => oxf_variable(g, dtype, nd, dp, data.as_ptr() as *const c_void, bytes.min(64), col, n, trainable, &mut out),
            });
            check_status(st, call)?;
            if st == 0 {
                prop_assert!(h.is_live());
                expected = num_nodes(live);
                prop_assert!(out >= before && out < expected, "{} returned node {}", call, out);
            }
            prop_assert_eq!(num_nodes(live), expected, "{} changed the node count wrongly", call);
        }
        let (nodes, idx): (Vec<i64>, Vec<i32>) = inputs.iter().copied().unzip();
        let st = op.with(|o| attrs.with(|a| name.with(|n| oxf_add_op(g, o, nodes.as_ptr(), idx.as_ptr(), nodes.len() as i32, a, n, &mut out))));
        check_status(st, "oxf_add_op")?;
        if st == 0 {
            let mut ty = null();
            prop_assert_eq!(oxf_node_op(live, out, &mut ty), 0);
            let CArg::Bytes(b) = &op else { unreachable!("a null op type was accepted") };
            prop_assert_eq!(unsafe { CStr::from_ptr(ty) }.to_bytes(), &b[..]);
            expected = num_nodes(live);
        }
        prop_assert_eq!(num_nodes(live), expected, "oxf_add_op changed the node count wrongly");
        let st = oxf_global_variables_initializer(g, &mut out);
        check_status(st, "oxf_global_variables_initializer")?;
        prop_assert_eq!(st == 0, h.is_live());
        let st = key.with(|k| oxf_add_to_collection(g, k, coll_node, 0));
        check_status(st, "oxf_add_to_collection")?;
        // the graph still builds
        add(live, "Sin", &[0], "");
        prop_assert_eq!(oxf_graph_free(live), 0);
    }

    /// Scopes pushed and popped in any order with hostile arguments: failed pushes open
    /// nothing, pops of nothing are harmless, and once every scope that opened is closed a
    /// new node has no device, no colocation and no control inputs.
    #[test]
    fn scopes(h in handle(), actions in proptest::collection::vec((0u8..10, c_arg(DEVICE_WORDS), node_id(12), any::<i32>(), 0usize..5), 1..8)) {
        let live = fixture();
        let g = h.pick(live, freed_graph(), OTHER.with(|o| *o));
        let mut open: Vec<u8> = Vec::new();
        for (a, text, node, flag, mode) in &actions {
            let mut s: *const c_char = null();
            let deps = [*node, 0];
            let (call, st) = match a {
                0 => ("oxf_push_device", text.with(|p| oxf_push_device(g, p))),
                1 => ("oxf_push_device_reset", oxf_push_device_reset(g)),
                2 => ("oxf_push_device_fn", oxf_push_device_fn(g, Some(device_fn), *mode as *mut c_void)),
                3 => ("oxf_push_colocation", oxf_push_colocation(g, *node, *flag)),
                4 => ("oxf_push_name_scope", text.with(|p| oxf_push_name_scope(g, p, &mut s))),
                5 => ("oxf_push_control_dependencies", oxf_push_control_dependencies(g, deps.as_ptr(), (*flag & 1) + 1)),
                6 => ("oxf_pop_device", oxf_pop_device(g)),
                7 => ("oxf_pop_colocation", oxf_pop_colocation(g)),
                8 => ("oxf_pop_name_scope", oxf_pop_name_scope(g)),
                _ => ("oxf_pop_control_dependencies", oxf_pop_control_dependencies(g)),
            };
            check_status(st, call)?;
            if st == 0 && *a < 6 {
                prop_assert!(h.is_live());
                open.push(*a);
            }
            // each kind of scope has its own stack (device scopes and device functions share one)
            let kind = |k: u8| match k {
                0..=2 | 6 => 0,
                3 | 7 => 3,
                4 | 8 => 4,
                _ => 5,
            };
            if st == 0 && *a >= 6 {
                if let Some(at) = open.iter().rposition(|&k| kind(k) == kind(*a)) {
                    open.remove(at);
                }
            }
            // a node built inside whatever is open: the device function may refuse it
            let mut out = -1;
            let before = num_nodes(live);
            let st = oxf_add_op(live, cstr("Cos").as_ptr(), [0i64].as_ptr(), [0i32].as_ptr(), 1, null(), null(), &mut out);
            check_status(st, "oxf_add_op in scopes")?;
            prop_assert_eq!(num_nodes(live), before + (st == 0) as i64);
        }
        for a in open.iter().rev() {
            let st = match a {
                0..=2 => oxf_pop_device(live),
                3 => oxf_pop_colocation(live),
                4 => oxf_pop_name_scope(live),
                _ => oxf_pop_control_dependencies(live),
            };
            prop_assert_eq!(st, 0, "{}", last_error());
        }
        let y = add(live, "Cos", &[0], "");
        let mut out = null();
        prop_assert_eq!(oxf_node_device(live, y, &mut out), 0);
        prop_assert_eq!(out_string(out, "oxf_node_device")?, "");
        prop_assert_eq!(oxf_node_inputs(live, y, &mut out), 0);
        prop_assert_eq!(out_string(out, "oxf_node_inputs")?, "x");
        prop_assert_eq!(oxf_node_colocation(live, y, &mut out), 0);
        prop_assert_eq!(out_string(out, "oxf_node_colocation")?, "");
        prop_assert_eq!(oxf_graph_free(live), 0);
    }

    /// `oxf_gradients` with any ys, xs and grad_ys: an error, or for every x a valid
    /// tensor or -1.
    #[test]
    fn gradients(h in handle(), ys in proptest::collection::vec((node_id(12), -1i32..3), 0..3), xs in proptest::collection::vec((node_id(12), -1i32..3), 0..3), with_grad_ys in any::<bool>(), gy in node_id(12), colocate in any::<i32>()) {
        thread_local!(static G: *mut OxGraph = fixture());
        let live = G.with(|g| *g);
        let g = h.pick(live, freed_graph(), OTHER.with(|o| *o));
        let (yn, yi): (Vec<i64>, Vec<i32>) = ys.iter().copied().unzip();
        let (xn, xi): (Vec<i64>, Vec<i32>) = xs.iter().copied().unzip();
        let (gn, gi) = (vec![gy; yn.len()], vec![0i32; yn.len()]);
        let (mut on, mut oi) = (vec![-7i64; xn.len()], vec![-7i32; xn.len()]);
        let (gnp, gip) = if with_grad_ys { (gn.as_ptr(), gi.as_ptr()) } else { (null(), null()) };
        let before = num_nodes(live);
        let st = oxf_gradients(g, yn.as_ptr(), yi.as_ptr(), yn.len() as i32, xn.as_ptr(), xi.as_ptr(), xn.len() as i32, gnp, gip, colocate, on.as_mut_ptr(), oi.as_mut_ptr());
        check_status(st, "oxf_gradients")?;
        let after = num_nodes(live);
        if st == 0 {
            for (&n, &i) in on.iter().zip(&oi) {
                prop_assert!(n == -1 || (n >= 0 && n < after && i >= 0), "gradient ({}, {})", n, i);
            }
        } else {
            prop_assert_eq!(after, before, "a failed oxf_gradients added nodes");
        }
    }

    /// The driven backward pass (`oxf_gradients_begin`, `_resume`, `_take`, `_free`) on a
    /// graph with a custom-gradient node, with any handles, ys, xs, supplied gradients and
    /// list lengths: every call returns a TF status with a message; a listed gradient is -1 or
    /// a node of the graph; a failed resume, and a pass freed unfinished, leave the graph's
    /// node count as it was before the pass; a freed run is refused.
    #[test]
    fn driven_gradients(h in handle(), ys in pairs_or(vec![(3, 0)], vec![(2, 0), (4, 0)]), xs in pairs_or(vec![(0, 0)], vec![(1, 0), (0, 0)]),
                        supplied in proptest::collection::vec((-2i64..12, -1i32..3), 0..4), n_supplied in -2i32..4, take_n in -1i32..4, steps in 1usize..4) {
        thread_local!(static G: *mut OxGraph = custom_fixture());
        let live = G.with(|g| *g);
        let g = h.pick(live, freed_graph(), OTHER.with(|o| *o));
        let (yn, yi): (Vec<i64>, Vec<i32>) = ys.iter().copied().unzip();
        let (xn, xi): (Vec<i64>, Vec<i32>) = xs.iter().copied().unzip();
        let before = num_nodes(live);
        let mut run = null_mut();
        let st = oxf_gradients_begin(g, yn.as_ptr(), yi.as_ptr(), yn.len() as i32, xn.as_ptr(), xi.as_ptr(), xn.len() as i32, null(), null(), 1, &mut run);
        check_status(st, "oxf_gradients_begin")?;
        if st != 0 {
            prop_assert_eq!(num_nodes(live), before, "a failed oxf_gradients_begin added nodes");
            return Ok(());
        }
        let (dn, di): (Vec<i64>, Vec<i32>) = supplied.iter().copied().unzip();
        let mut done = false;
        for step in 0..steps {
            // the first call supplies nothing; later ones at most the array's length
            let n = if step == 0 { -1 } else { n_supplied.min(dn.len() as i32) };
            let (mut node, mut count) = (-7i64, -7i32);
            let st = oxf_gradients_resume(run, dn.as_ptr(), di.as_ptr(), n, &mut node, &mut count);
            check_status(st, "oxf_gradients_resume")?;
            if st != 0 {
                prop_assert_eq!(num_nodes(live), before, "a failed resume left nodes");
                break;
            }
            prop_assert!(count >= 0 && node >= -1 && node < num_nodes(live), "node {} count {}", node, count);
            let k = take_n.max(0) as usize;
            let (mut on, mut oi) = (vec![-7i64; k], vec![-7i32; k]);
            let st = oxf_gradients_take(run, on.as_mut_ptr(), oi.as_mut_ptr(), take_n);
            check_status(st, "oxf_gradients_take")?;
            prop_assert_eq!(st == 0, take_n == count, "take {} of {}", take_n, count);
            if st == 0 {
                for (&n, &i) in on.iter().zip(&oi) {
                    prop_assert!(n == -1 || (n >= 0 && n < num_nodes(live) && i >= 0), "gradient ({}, {})", n, i);
                }
            }
            if node == -1 {
                done = true;
                break;
            }
        }
        prop_assert_eq!(oxf_gradients_free(run), 0);
        if !done {
            prop_assert_eq!(num_nodes(live), before, "a pass freed unfinished left nodes");
        }
        let (mut node, mut count) = (0i64, 0i32);
        prop_assert_eq!(oxf_gradients_resume(run, null(), null(), -1, &mut node, &mut count), 3);
        prop_assert!(last_error().contains("freed already"), "{}", last_error());
        prop_assert_eq!(oxf_gradients_free(run), 3);
    }
}

/// A device function whose answer depends on `userdata`: a good device, a malformed one,
/// a null answer, an error with a message, an error without one.
unsafe extern "C" fn device_fn(userdata: *mut c_void, node: *const OxNodeDef, out: *mut *const c_char) -> i32 {
    static ANSWERS: [&[u8]; 5] = [b"/device:CPU:0\0", b"/device:GPU:0/junk\0", b"\0", b"refused by the test\0", b"\0"];
    assert!(!node.is_null() && !(*node).op.is_null());
    let mode = userdata as usize % ANSWERS.len();
    *out = if mode == 2 || mode == 4 { null() } else { ANSWERS[mode].as_ptr() as *const c_char };
    (mode >= 3) as i32
}
