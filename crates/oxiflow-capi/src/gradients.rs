//! Reverse-mode differentiation exports: `tf.gradients` in one call ([`oxf_gradients`]),
//! and as a backward pass that stops at custom-gradient nodes for the caller to build their
//! gradients ([`oxf_gradients_begin`], [`oxf_gradients_resume`], [`oxf_gradients_take`],
//! [`oxf_gradients_free`]), which ADCME's `register` and `tf.custom_gradient` need: their
//! gradient is caller code (Julia) that builds graph nodes, so the caller drives the pass
//! instead of being called back from inside it while the graph is locked.

use crate::graph::{graph, outputs, OxGraph};
use crate::handles::{Registry, GRADIENT_RUN_KIND};
use crate::{guard, put};
use oxiflow_core::autodiff::{GradientRun, GradientStep};
use oxiflow_core::checkpointing::Checkpointing;
use oxiflow_core::{Output, OxiflowError, Result};
use std::ffi::c_char;
use std::sync::{Arc, Mutex};

/// `tf.gradients(ys, xs; grad_ys, colocate_gradients_with_ops)`. `grad_ys` arrays may be
/// null (ones). Writes one `(node, index)` per x into `out_nodes`/`out_indices`, node `-1`
/// when x is unreachable from ys (ADCME returns `nothing`). A custom-gradient node on the
/// way is an error (Unimplemented): use [`oxf_gradients_begin`] to build its gradient.
#[no_mangle]
pub extern "C" fn oxf_gradients(
    g: *mut OxGraph,
    y_nodes: *const i64,
    y_indices: *const i32,
    n_ys: i32,
    x_nodes: *const i64,
    x_indices: *const i32,
    n_xs: i32,
    grad_y_nodes: *const i64,
    grad_y_indices: *const i32,
    colocate: i32,
    out_nodes: *mut i64,
    out_indices: *mut i32,
) -> i32 {
    guard(|| {
        let (ys, xs, gys) = pass_args(y_nodes, y_indices, n_ys, x_nodes, x_indices, n_xs, grad_y_nodes, grad_y_indices)?;
        if !xs.is_empty() && (out_nodes.is_null() || out_indices.is_null()) {
            return Err(OxiflowError::InvalidArgument("null output arrays".into()));
        }
        let gh = graph(g)?;
        let mut gr = gh.write()?;
        let res = oxiflow_core::autodiff::gradients(&mut gr, &ys, &xs, gys.as_deref(), colocate != 0)?;
        write_pairs(&res, out_nodes, out_indices);
        Ok(())
    })
}

type PassArgs = (Vec<Output>, Vec<Output>, Option<Vec<Output>>);

#[allow(clippy::too_many_arguments)]
fn pass_args(
    y_nodes: *const i64,
    y_indices: *const i32,
    n_ys: i32,
    x_nodes: *const i64,
    x_indices: *const i32,
    n_xs: i32,
    gy_nodes: *const i64,
    gy_indices: *const i32,
) -> Result<PassArgs> {
    let ys = outputs(y_nodes, y_indices, n_ys, "ys")?;
    let xs = outputs(x_nodes, x_indices, n_xs, "xs")?;
    let gys = if gy_nodes.is_null() { None } else { Some(outputs(gy_nodes, gy_indices, n_ys, "grad_ys")?) };
    Ok((ys, xs, gys))
}

fn write_pairs(res: &[Option<Output>], out_nodes: *mut i64, out_indices: *mut i32) {
    for (i, r) in res.iter().enumerate() {
        unsafe {
            *out_nodes.add(i) = r.map_or(-1, |o| o.node as i64);
            *out_indices.add(i) = r.map_or(0, |o| o.index as i32);
        }
    }
}

/// A backward pass in progress (opaque to C): [`GradientRun`] on its graph, and the list
/// the last [`oxf_gradients_resume`] produced, for [`oxf_gradients_take`].
pub struct OxGradientRun {
    graph: Arc<OxGraph>,
    run: Mutex<GradientRun>,
    last: Mutex<Vec<Option<Output>>>,
}

impl Drop for OxGradientRun {
    /// An unfinished pass is aborted: its nodes are removed and its scopes closed.
    fn drop(&mut self) {
        self.abort();
    }
}

static RUNS: Registry<OxGradientRun> = Registry::new(GRADIENT_RUN_KIND);

/// Starts `tf.gradients(ys, xs; grad_ys, colocate_gradients_with_ops)` on graph `g` as a
/// pass the caller drives; arguments as [`oxf_gradients`]. Writes the run's handle into
/// `*out_run`; nothing is differentiated until [`oxf_gradients_resume`]. Errors: unknown
/// outputs, `grad_ys` of the wrong dtype or shape; then no run is made.
#[no_mangle]
pub extern "C" fn oxf_gradients_begin(
    g: *mut OxGraph,
    y_nodes: *const i64,
    y_indices: *const i32,
    n_ys: i32,
    x_nodes: *const i64,
    x_indices: *const i32,
    n_xs: i32,
    grad_y_nodes: *const i64,
    grad_y_indices: *const i32,
    colocate: i32,
    out_run: *mut *mut OxGradientRun,
) -> i32 {
    oxf_gradients_begin_checkpointed(g, y_nodes, y_indices, n_ys, x_nodes, x_indices, n_xs, grad_y_nodes, grad_y_indices, colocate, std::ptr::null(), out_run)
}

/// [`oxf_gradients_begin`] for a pass that recomputes forward tensors from checkpoints
/// instead of keeping them (ADCME's `gradient_checkpointing(type)`): `checkpointing` is
/// `"speed"`, `"memory"` or `"collection"` (see `oxiflow_core::checkpointing`), or null or
/// empty for an ordinary pass. Errors: those of [`oxf_gradients_begin`], an unknown type
/// (InvalidArgument).
#[no_mangle]
pub extern "C" fn oxf_gradients_begin_checkpointed(
    g: *mut OxGraph,
    y_nodes: *const i64,
    y_indices: *const i32,
    n_ys: i32,
    x_nodes: *const i64,
    x_indices: *const i32,
    n_xs: i32,
    grad_y_nodes: *const i64,
    grad_y_indices: *const i32,
    colocate: i32,
    checkpointing: *const c_char,
    out_run: *mut *mut OxGradientRun,
) -> i32 {
    guard(|| {
        let (ys, xs, gys) = pass_args(y_nodes, y_indices, n_ys, x_nodes, x_indices, n_xs, grad_y_nodes, grad_y_indices)?;
        if out_run.is_null() {
            return Err(OxiflowError::InvalidArgument("null output pointer".into()));
        }
        let mode = match crate::opt_str(checkpointing, "checkpointing")? {
            None | Some("") => None,
            Some(s) => Some(Checkpointing::parse(s)?),
        };
        let gh = graph(g)?;
        let run = {
            let mut gr = gh.write()?;
            GradientRun::start_checkpointed(&mut gr, &ys, &xs, gys.as_deref(), colocate != 0, mode)?
        };
        put(out_run, RUNS.insert(OxGradientRun { graph: gh, run: Mutex::new(run), last: Mutex::new(Vec::new()) }))
    })
}

/// Goes on with pass `run` until it completes or stops at a custom-gradient node
/// (`IdentityN` with `_gradient_op_type`). `n_supplied` is `-1` on the first call; after a
/// stop it is the node's input count and `dx_nodes`/`dx_indices` hold the gradient of each
/// input (node `-1`: none), built by the caller in the scopes the stop left open.
///
/// Writes into `*out_node` the custom node's id, or `-1` when the pass is complete, and into
/// `*out_count` the length of the list [`oxf_gradients_take`] then gives: the gradient
/// reaching each of the node's outputs, or the gradient of each x. Any error (bad arguments
/// too, except a stale `run` handle) aborts the pass (its nodes are removed, the caller's
/// too) and later calls fail (FailedPrecondition).
#[no_mangle]
pub extern "C" fn oxf_gradients_resume(
    run: *mut OxGradientRun,
    dx_nodes: *const i64,
    dx_indices: *const i32,
    n_supplied: i32,
    out_node: *mut i64,
    out_count: *mut i32,
) -> i32 {
    guard(|| {
        let r = RUNS.get(run)?;
        let res = r.resume(dx_nodes, dx_indices, n_supplied);
        if res.is_err() {
            r.abort();
        }
        let (node, count) = res?;
        put(out_node, node)?;
        put(out_count, count)
    })
}

impl OxGradientRun {
    /// [`oxf_gradients_resume`] up to its outputs: the node id (or -1) and the list's length.
    fn resume(&self, dx_nodes: *const i64, dx_indices: *const i32, n_supplied: i32) -> Result<(i64, i32)> {
        let supplied: Option<Vec<Option<Output>>> = match n_supplied {
            -1 => None,
            n if n < -1 => return Err(OxiflowError::InvalidArgument(format!("n_supplied must be -1 or a count, got {n}"))),
            n => {
                // node -1 is "no gradient": read it as index 0 of node 0 first, then mark it
                let nodes = crate::slice(dx_nodes, n as i64, "dx_nodes")?;
                let fixed: Vec<i64> = nodes.iter().map(|&d| d.max(0)).collect();
                let pairs = outputs(fixed.as_ptr(), dx_indices, n, "dxs")?;
                Some(nodes.iter().zip(pairs).map(|(&d, o)| (d >= 0).then_some(o)).collect())
            }
        };
        let mut gr = self.graph.write()?;
        let mut pass = self.run.lock().unwrap_or_else(|p| p.into_inner());
        let step = pass.resume(&mut gr, supplied.as_deref());
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        last.clear();
        let node = match step? {
            GradientStep::Done(grads) => {
                *last = grads;
                -1
            }
            GradientStep::Custom { node, out_grads } => {
                *last = out_grads;
                node as i64
            }
        };
        Ok((node, last.len() as i32))
    }

    /// Aborts the pass (a no-op when it is complete or aborted already).
    fn abort(&self) {
        if let Ok(mut g) = self.graph.write() {
            self.run.lock().unwrap_or_else(|p| p.into_inner()).abort(&mut g);
        }
    }
}

/// Copies the list the last [`oxf_gradients_resume`] of `run` produced, `n` entries (its
/// `*out_count`), into `out_nodes`/`out_indices`: node `-1` for no gradient. Errors: `n`
/// not that length, null arrays.
#[no_mangle]
pub extern "C" fn oxf_gradients_take(run: *mut OxGradientRun, out_nodes: *mut i64, out_indices: *mut i32, n: i32) -> i32 {
    guard(|| {
        let r = RUNS.get(run)?;
        let last = r.last.lock().unwrap_or_else(|p| p.into_inner());
        if n < 0 || n as usize != last.len() {
            return Err(OxiflowError::InvalidArgument(format!("oxf_gradients_take: the list has {} entries, asked for {n}", last.len())));
        }
        if n > 0 && (out_nodes.is_null() || out_indices.is_null()) {
            return Err(OxiflowError::InvalidArgument("null output arrays".into()));
        }
        write_pairs(&last, out_nodes, out_indices);
        Ok(())
    })
}

/// Frees `run`; an unfinished pass is aborted first (its nodes removed, its scopes closed).
/// Null is ignored; a freed or unknown handle returns status 3.
#[no_mangle]
pub extern "C" fn oxf_gradients_free(run: *mut OxGradientRun) -> i32 {
    crate::handles::free(&RUNS, run)
}
