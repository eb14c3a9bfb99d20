//! Session, run results and device listing exports.

use crate::graph::{graph, tensor_from_c, Extent};
use crate::handles::{Registry, RESULT_KIND, SESSION_KIND};
use crate::{guard, opt_str, put, return_str, slice};
use oxiflow_core::device::DeviceKind;
use oxiflow_core::profile::StepStats;
use oxiflow_core::{DType, Layout, Output, OxiflowError, Result, Session, SessionOptions, Tensor};
use std::ffi::{c_char, c_void};
use std::sync::{Arc, Mutex};

/// A session handle (opaque to C). Holds the graph alive.
pub struct OxSession {
    inner: Session,
}

impl std::ops::Deref for OxSession {
    type Target = Session;
    fn deref(&self) -> &Session {
        &self.inner
    }
}

/// The tensors and step statistics of one run (opaque to C).
pub struct OxRunResult {
    /// Locked: [`oxf_result_take`] replaces a value while other calls may read the result.
    values: Mutex<Vec<Fetched>>,
    stats: Option<StepStats>,
}

/// The live sessions and run results (`handles.rs`).
static SESSIONS: Registry<OxSession> = Registry::new(SESSION_KIND);
static RESULTS: Registry<OxRunResult> = Registry::new(RESULT_KIND);

/// One fetched value of a run result.
enum Fetched {
    /// Still held by the result.
    Held(Tensor),
    /// Handed over by [`oxf_result_take`]: only its dtype and dims remain.
    Taken(DType, Vec<usize>),
}

/// A feed value as C passes it: dtype code, `ndims` dims, the address of element
/// `[0, 0, ...]` and its layout: dense in column-major order when `col_major` is 1 (a
/// Julia `Array`), row-major when 0, or, when `strides` is not null, element
/// `[i, j, ...]` at `data + i * strides[0] + j * strides[1] + ...` elements (`ndims`
/// strides, possibly negative: a Julia view, transpose or `PermutedDimsArray`, copied
/// without first making it dense). Every element must lie inside the `buffer_bytes` bytes
/// at `buffer` (the array's whole allocation, e.g. a view's parent array; `data` itself for
/// a dense array): a view whose dims or strides reach outside it is refused, not read.
/// `data`, `dims`, `strides` and the buffer are read during the call only: the engine
/// copies the elements (one `memcpy` for a dense buffer).
#[repr(C)]
pub struct OxTensorView {
    pub dtype: i32,
    pub ndims: i32,
    pub dims: *const i64,
    pub data: *const c_void,
    pub col_major: i32,
    pub strides: *const i64,
    pub buffer: *const c_void,
    pub buffer_bytes: usize,
}

/// Parses session options JSON over the process-wide defaults (`tf.config` calls):
/// `allow_soft_placement`, `log_device_placement` (bools), `CPU`, `GPU` (device counts),
/// `inter_op_threads`, `intra_op_threads`, `emulated_gpus` (integers), `fusion` (bool:
/// elementwise fusion of CPU ops, on by default), `gpu_options` (an
/// object: `allow_growth` bool, `per_process_gpu_memory_fraction` number,
/// `visible_device_list` string, `virtual_devices_mb` array of arrays of MiB).
pub(crate) fn parse_options(json: Option<&str>) -> Result<SessionOptions> {
    let mut o = SessionOptions::from_process_defaults()?;
    let Some(text) = json.filter(|s| !s.trim().is_empty()) else { return Ok(o) };
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| OxiflowError::InvalidArgument(format!("session options are not valid JSON ({e}): {text}")))?;
    let obj = v.as_object().ok_or_else(|| OxiflowError::InvalidArgument("session options must be a JSON object".into()))?;
    for (k, v) in obj {
        let bad = || OxiflowError::InvalidArgument(format!("session option '{k}' has an invalid value {v}"));
        let count = || v.as_u64().map(|n| n as usize).ok_or_else(bad);
        match k.as_str() {
            "allow_soft_placement" => o.allow_soft_placement = v.as_bool().ok_or_else(bad)?,
            "log_device_placement" => o.log_device_placement = v.as_bool().ok_or_else(bad)?,
            "CPU" => o.cpu_count = Some(count()?),
            "GPU" => o.gpu_count = Some(count()?),
            "inter_op_threads" => o.inter_op_threads = Some(count()?),
            "intra_op_threads" => o.intra_op_threads = Some(count()?),
            "emulated_gpus" => o.emulated_gpus = Some(count()?),
            "fusion" => o.fusion = Some(v.as_bool().ok_or_else(bad)?),
            "gpu_options" => {
                let g = v.as_object().ok_or_else(bad)?;
                for (gk, gv) in g {
                    let gbad = || OxiflowError::InvalidArgument(format!("gpu_options.{gk} has an invalid value {gv}"));
                    match gk.as_str() {
                        "allow_growth" => o.gpu_options.allow_growth = gv.as_bool().ok_or_else(gbad)?,
                        "per_process_gpu_memory_fraction" => {
                            let f = gv.as_f64().ok_or_else(gbad)?;
                            // proto3's 0 means "unset" (TF's default limit)
                            o.gpu_options.per_process_gpu_memory_fraction = if f == 0.0 { None } else { Some(f) };
                        }
                        "visible_device_list" => o.gpu_options.visible_device_list = Some(gv.as_str().ok_or_else(gbad)?.to_string()),
                        "virtual_devices_mb" => {
                            let outer = gv.as_array().ok_or_else(gbad)?;
                            o.gpu_options.virtual_devices_mb = outer
                                .iter()
                                .map(|inner| inner.as_array().and_then(|a| a.iter().map(|x| x.as_u64()).collect::<Option<Vec<u64>>>()).ok_or_else(gbad))
                                .collect::<Result<_>>()?;
                        }
                        _ => return Err(OxiflowError::InvalidArgument(format!("unknown gpu_options field '{gk}'"))),
                    }
                }
            }
            _ => return Err(OxiflowError::InvalidArgument(format!("unknown session option '{k}'"))),
        }
    }
    Ok(o)
}

/// Creates a session over graph `g` with options JSON (may be null).
#[no_mangle]
pub extern "C" fn oxf_session_new(g: *const OxGraph, options_json: *const c_char, out: *mut *mut OxSession) -> i32 {
    guard(|| {
        let opts = parse_options(opt_str(options_json, "options")?)?;
        let s = Session::new(graph(g)?.inner.clone(), opts)?;
        oxiflow_core::device::process::mark_initialized();
        put(out, SESSIONS.insert(OxSession { inner: s }))
    })
}

use crate::graph::OxGraph;

/// The session behind handle `s`; errors for a null, freed or foreign handle.
pub(crate) fn session(s: *const OxSession) -> Result<Arc<OxSession>> {
    SESSIONS.get(s)
}

/// Frees a session and its variables (after a step another thread is running in it
/// ends). Null is ignored (status 0); a handle freed already or never issued is status 3
/// and frees nothing.
#[no_mangle]
pub extern "C" fn oxf_session_free(s: *mut OxSession) -> i32 {
    crate::handles::free(&SESSIONS, s)
}

/// Takes the session's log text since the last call (device mapping, placement lines).
#[no_mangle]
pub extern "C" fn oxf_session_take_log(s: *const OxSession, out: *mut *const c_char) -> i32 {
    guard(|| return_str(session(s)?.take_log(), out))
}

/// Full name of the device `node` is placed on in this session (placing it if needed).
#[no_mangle]
pub extern "C" fn oxf_session_assigned_device(s: *const OxSession, node: i64, out: *mut *const c_char) -> i32 {
    guard(|| {
        let id = usize::try_from(node).map_err(|_| OxiflowError::InvalidArgument(format!("invalid node id {node}")))?;
        return_str(session(s)?.assigned_device(id)?, out)
    })
}

/// The session's devices, one per line: `name\ttype\tkind\tdescription\tmemory_limit`
/// (kind is `cpu`, `emulated` or `cuda`; memory_limit in bytes, 0 for devices without an
/// accounted memory).
#[no_mangle]
pub extern "C" fn oxf_session_devices(s: *const OxSession, out: *mut *const c_char) -> i32 {
    guard(|| return_str(device_lines(&session(s)?.inner), out))
}

pub(crate) fn device_lines(s: &Session) -> String {
    s.devices()
        .devices
        .iter()
        .map(|d| {
            let a = d.attributes();
            let kind = match a.kind {
                DeviceKind::Cpu => "cpu",
                DeviceKind::EmulatedGpu => "emulated",
                DeviceKind::ProvidedGpu => "cuda",
            };
            let limit = d.memory().map(|m| m.stats().bytes_limit).unwrap_or(0);
            format!("{}\t{}\t{}\t{}\t{}", a.name, a.device_type, kind, a.description, limit)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The devices a session with these options (JSON, may be null) would have, in the format
/// of [`oxf_session_devices`], without creating one.
#[no_mangle]
pub extern "C" fn oxf_list_devices(options_json: *const c_char, out: *mut *const c_char) -> i32 {
    guard(|| {
        let mut opts = parse_options(opt_str(options_json, "options")?)?;
        // the options are checked as given (as a session would), then no workers start
        opts.check()?;
        opts.inter_op_threads = Some(1);
        let g = std::sync::Arc::new(std::sync::RwLock::new(oxiflow_core::Graph::new()));
        return_str(device_lines(&Session::new(g, opts)?), out)
    })
}

/// Runs one step. Feeds are `(feed_nodes[i], feed_indices[i]) <- feed_values[i]`; fetches
/// `(fetch_nodes[i], fetch_indices[i])`; `targets` are nodes run for their effect; `trace`
/// records step statistics. On success `*out` is a result handle to free with
/// [`oxf_result_free`].
#[no_mangle]
pub extern "C" fn oxf_session_run(
    s: *const OxSession,
    feed_nodes: *const i64,
    feed_indices: *const i32,
    feed_values: *const OxTensorView,
    n_feeds: i32,
    fetch_nodes: *const i64,
    fetch_indices: *const i32,
    n_fetches: i32,
    targets: *const i64,
    n_targets: i32,
    trace: i32,
    out: *mut *mut OxRunResult,
) -> i32 {
    guard(|| {
        let sess = session(s)?;
        let out_of = |n: &[i64], i: &[i32]| -> Result<Vec<Output>> {
            n.iter()
                .zip(i)
                .map(|(&a, &b)| {
                    if a < 0 || b < 0 {
                        return Err(OxiflowError::InvalidArgument(format!("invalid tensor ({a}, {b})")));
                    }
                    Ok(Output::new(a as usize, b as usize))
                })
                .collect()
        };
        let feed_outs = out_of(slice(feed_nodes, n_feeds as i64, "feed nodes")?, slice(feed_indices, n_feeds as i64, "feed indices")?)?;
        let views = slice(feed_values, n_feeds as i64, "feed values")?;
        let feeds = feed_outs
            .into_iter()
            .zip(views)
            .map(|(o, v)| Ok((o, tensor_from_c(v.dtype, v.ndims, v.dims, v.data, v.col_major, v.strides, Extent { start: v.buffer, bytes: v.buffer_bytes })?)))
            .collect::<Result<Vec<_>>>()?;
        let fetches = out_of(slice(fetch_nodes, n_fetches as i64, "fetch nodes")?, slice(fetch_indices, n_fetches as i64, "fetch indices")?)?;
        let targets = slice(targets, n_targets as i64, "targets")?
            .iter()
            .map(|&t| usize::try_from(t).map_err(|_| OxiflowError::InvalidArgument(format!("invalid target node {t}"))))
            .collect::<Result<Vec<_>>>()?;
        let r = sess.run(&feeds, &fetches, &targets, trace != 0)?;
        put(out, RESULTS.insert(OxRunResult { values: Mutex::new(r.values.into_iter().map(Fetched::Held).collect()), stats: r.step_stats }))
    })
}

fn result(r: *const OxRunResult) -> Result<Arc<OxRunResult>> {
    RESULTS.get(r)
}

/// Calls `f` with fetched value `i` of result `r`, the result's values locked.
fn with_fetched<T>(r: *const OxRunResult, i: i32, f: impl FnOnce(&mut Fetched) -> Result<T>) -> Result<T> {
    let res = result(r)?;
    let mut values = res.values.lock().unwrap_or_else(|p| p.into_inner());
    let n = values.len();
    let slot = usize::try_from(i).ok().and_then(|k| values.get_mut(k));
    f(slot.ok_or_else(|| OxiflowError::InvalidArgument(format!("no fetched value {i} (the result holds {n})")))?)
}

/// Calls `f` with fetched value `i` while the result still holds it.
fn with_value<T>(r: *const OxRunResult, i: i32, f: impl FnOnce(&Tensor) -> Result<T>) -> Result<T> {
    with_fetched(r, i, |v| match v {
        Fetched::Held(t) => f(t),
        Fetched::Taken(..) => Err(OxiflowError::FailedPrecondition(format!("fetched value {i} was handed over by oxf_result_take"))),
    })
}

/// Frees a run result. Null is ignored (status 0); a handle freed already or never issued
/// is status 3 and frees nothing.
#[no_mangle]
pub extern "C" fn oxf_result_free(r: *mut OxRunResult) -> i32 {
    crate::handles::free(&RESULTS, r)
}

/// Dtype code, rank and (into `dims`, room for `max_dims`) dimensions of fetched value `i`
/// (also after [`oxf_result_take`] handed it over).
#[no_mangle]
pub extern "C" fn oxf_result_type(r: *const OxRunResult, i: i32, dtype: *mut i32, rank: *mut i32, dims: *mut i64, max_dims: i32) -> i32 {
    guard(|| {
        let (dt, d) = with_fetched(r, i, |v| {
            Ok(match v {
                Fetched::Held(t) => (t.dtype(), t.dims().to_vec()),
                Fetched::Taken(dt, d) => (*dt, d.clone()),
            })
        })?;
        put(dtype, dt.code())?;
        put(rank, d.len() as i32)?;
        if d.len() > max_dims.max(0) as usize {
            return Err(OxiflowError::InvalidArgument(format!("rank {} exceeds the {max_dims} dims given", d.len())));
        }
        if !d.is_empty() && dims.is_null() {
            return Err(OxiflowError::InvalidArgument("null dims buffer".into()));
        }
        for (k, &n) in d.iter().enumerate() {
            unsafe { *dims.add(k) = n as i64 };
        }
        Ok(())
    })
}

/// Copies fetched value `i` into `dst` (`dst_bytes` must equal elements × element size) in
/// the given layout.
#[no_mangle]
pub extern "C" fn oxf_result_copy(r: *const OxRunResult, i: i32, dst: *mut c_void, dst_bytes: usize, col_major: i32) -> i32 {
    guard(|| {
        with_value(r, i, |t| {
            if dst_bytes != t.num_bytes() {
                return Err(OxiflowError::InvalidArgument(format!("destination has {dst_bytes} bytes, value {i} needs {}", t.num_bytes())));
            }
            if t.num_bytes() > 0 {
                if dst.is_null() {
                    return Err(OxiflowError::InvalidArgument("null destination".into()));
                }
                let layout = if col_major != 0 { Layout::ColumnMajor } else { Layout::RowMajor };
                unsafe { t.write_raw(dst as *mut u8, layout) };
            }
            Ok(())
        })
    })
}

/// Hands fetched value `i` to the caller: `*out` receives a buffer of its elements in the
/// given layout (column-major when `col_major` is 1), allocated with C's `malloc`, which
/// the caller now owns and releases with `free` (Julia: `unsafe_wrap(Array, p, dims;
/// own = true)`). No copy is made when the result held the only reference to a buffer
/// already in that layout (a fed array fetched back through `Identity`, a fresh kernel
/// output); otherwise the elements are copied into a new buffer, as
/// [`oxf_result_copy`] would. Afterwards the value keeps its dtype and dims
/// ([`oxf_result_type`]) but cannot be copied or taken again (status 9).
/// `*out` is null and nothing is taken for an empty value, or where the library's
/// allocator is not C's `malloc` (only Unix hands buffers over): use
/// [`oxf_result_copy`] then.
#[no_mangle]
pub extern "C" fn oxf_result_take(r: *mut OxRunResult, i: i32, col_major: i32, out: *mut *mut c_void) -> i32 {
    guard(|| {
        put(out, std::ptr::null_mut())?;
        let taken = with_fetched(r, i, |slot| {
            let (dtype, dims) = match &*slot {
                Fetched::Held(t) if !crate::handover::CAN_HAND_OVER || t.is_empty() || t.is_device_resident() => return Ok(None),
                Fetched::Held(t) => (t.dtype(), t.dims().to_vec()),
                Fetched::Taken(..) => return Err(OxiflowError::FailedPrecondition(format!("fetched value {i} was handed over already"))),
            };
            match std::mem::replace(slot, Fetched::Taken(dtype, dims)) {
                Fetched::Held(t) => Ok(Some(t)),
                Fetched::Taken(..) => Ok(None),
            }
        })?;
        // the copy (when one is needed) runs outside the result's lock
        match taken {
            Some(t) => put(out, crate::handover::into_malloc_buffer(t, col_major != 0)?),
            None => Ok(()),
        }
    })
}

/// Calls `f` with the step statistics of traced result `r`.
fn with_stats<T>(r: *const OxRunResult, f: impl FnOnce(&StepStats) -> Result<T>) -> Result<T> {
    let res = result(r)?;
    f(res.stats.as_ref().ok_or_else(|| OxiflowError::FailedPrecondition("this run was not traced (use run_profile)".into()))?)
}

/// The traced step as TF timeline JSON (Chrome trace event format).
#[no_mangle]
pub extern "C" fn oxf_result_trace_json(r: *const OxRunResult, out: *mut *const c_char) -> i32 {
    guard(|| return_str(with_stats(r, |st| Ok(st.chrome_trace_json()))?, out))
}

/// The traced step's events, one per line, tab-separated:
/// `op\t<node>\t<op type>\t<device>\t<start ns>\t<end ns>\t<bytes>` for kernels and
/// `copy\t<tensor>\t<from device>\t<to device>\t<start ns>\t<end ns>\t<bytes>` for copies.
#[no_mangle]
pub extern "C" fn oxf_result_trace_events(r: *const OxRunResult, out: *mut *const c_char) -> i32 {
    guard(|| {
        let lines: Vec<String> = with_stats(r, |st| {
            Ok(st
                .nodes
                .iter()
                .map(|n| {
                    let l = st.label(n);
                    match &l.copy {
                        Some(c) => format!("copy\t{}\t{}\t{}\t{}\t{}\t{}", c.tensor, c.from, c.to, n.start_ns, n.end_ns, n.output_bytes),
                        None => format!("op\t{}\t{}\t{}\t{}\t{}\t{}", l.node_name, l.op, l.device, n.start_ns, n.end_ns, n.output_bytes),
                    }
                })
                .collect())
        })?;
        return_str(lines.join("\n"), out)
    })
}
