//! Graph building and inspection exports.

use crate::handles::{Registry, GRAPH_KIND};
use crate::{guard, opt_str, put, req_str, return_str, slice};
use oxiflow_core::graph::{DeviceScope, NodeDef};
use oxiflow_core::ops::{lookup, AttrKind, AttrValue, Attrs, OpDef};
use oxiflow_core::{DType, DeviceSpec, Graph, Layout, NodeSpec, Output, OxiflowError, Result, Tensor};
use std::ffi::{c_char, c_void, CString};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// An owned graph handle (opaque to C).
pub struct OxGraph {
    pub(crate) inner: Arc<RwLock<Graph>>,
}

thread_local! {
    /// How many device-function calls this thread is inside. They run while their graph is
    /// locked (building a node, or a session placing it), so a graph call from one would
    /// wait for itself.
    static IN_DEVICE_FUNCTION: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

impl OxGraph {
    /// The graph, locked for building: waits while another thread builds or a session
    /// reads it (TF serialises graph changes with a mutex); fails only when called from
    /// inside a device function, which would wait for itself.
    pub(crate) fn write(&self) -> Result<RwLockWriteGuard<'_, Graph>> {
        if IN_DEVICE_FUNCTION.with(|d| d.get()) > 0 {
            return Err(busy());
        }
        Ok(self.inner.write().unwrap_or_else(|p| p.into_inner()))
    }
    /// The graph, locked for reading (many readers at once); as [`OxGraph::write`].
    pub(crate) fn read(&self) -> Result<RwLockReadGuard<'_, Graph>> {
        if IN_DEVICE_FUNCTION.with(|d| d.get()) > 0 {
            return Err(busy());
        }
        Ok(self.inner.read().unwrap_or_else(|p| p.into_inner()))
    }
}

fn busy() -> OxiflowError {
    OxiflowError::FailedPrecondition("the graph is busy: a device function may not build or inspect the graph (it receives a NodeDef instead)".into())
}

/// The live graphs (`handles.rs`: a handle is a number checked on every call).
pub(crate) static GRAPHS: Registry<OxGraph> = Registry::new(GRAPH_KIND);

/// The graph behind handle `g`; errors for a null, freed or foreign handle.
pub(crate) fn graph(g: *const OxGraph) -> Result<Arc<OxGraph>> {
    GRAPHS.get(g)
}

fn dtype(code: i32) -> Result<DType> {
    DType::from_code(code).ok_or_else(|| OxiflowError::InvalidArgument(format!("unknown dtype code {code}")))
}

pub(crate) fn dims_of(ndims: i32, dims: *const i64) -> Result<Vec<usize>> {
    slice(dims, ndims as i64, "dims")?
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| OxiflowError::InvalidArgument(format!("negative dimension {d}"))))
        .collect()
}

/// A dimension of a partial shape from the C side: `-1` is unknown (TF's `None`), any other
/// negative is `None`.
fn partial_dim(d: i64) -> Option<usize> {
    if d == -1 {
        Some(oxiflow_core::shape::UNKNOWN)
    } else {
        usize::try_from(d).ok()
    }
}

/// The memory a C array argument may be read from: `bytes` bytes from `start`.
#[derive(Clone, Copy)]
pub(crate) struct Extent {
    pub start: *const c_void,
    pub bytes: usize,
}

/// Builds a host tensor from a C array (copied): dense in the order `col_major` gives when
/// `strides` is null, else element `[i, j, ...]` at `data + i * strides[0] + j * strides[1] +
/// ...` elements (`ndims` strides, possibly negative: a Julia view or transpose). Every
/// element must lie inside `extent` (the buffer the caller owns): an array whose dims or
/// strides reach past it is refused (InvalidArgument naming both) instead of read.
pub(crate) fn tensor_from_c(
    code: i32,
    ndims: i32,
    dims: *const i64,
    data: *const c_void,
    col_major: i32,
    strides: *const i64,
    extent: Extent,
) -> Result<Tensor> {
    let dt = dtype(code)?;
    let dims = dims_of(ndims, dims)?;
    let es = dt.size_of();
    let n = oxiflow_core::strided::element_count(&dims, es)?;
    if n > 0 && data.is_null() {
        return Err(OxiflowError::InvalidArgument("tensor data is null".into()));
    }
    if strides.is_null() {
        check_extent(data, 0, (n * es) as isize, extent, &dims, dt)?;
        let layout = if col_major != 0 { Layout::ColumnMajor } else { Layout::RowMajor };
        return unsafe { Tensor::from_raw(dt, &dims, data as *const u8, layout) };
    }
    let strides = slice(strides, ndims as i64, "strides")?
        .iter()
        .map(|&s| isize::try_from(s).map_err(|_| OxiflowError::InvalidArgument(format!("stride {s} out of range"))))
        .collect::<Result<Vec<_>>>()?;
    if n > 0 {
        // the lowest and highest element offsets (in elements) the strides reach
        let too_far = || OxiflowError::InvalidArgument(format!("strides {strides:?} of dims {dims:?} reach outside any buffer"));
        let (mut lo, mut hi) = (0isize, 0isize);
        for (&d, &s) in dims.iter().zip(&strides) {
            let reach = isize::try_from(d - 1).ok().and_then(|m| m.checked_mul(s)).ok_or_else(too_far)?;
            if reach < 0 {
                lo = lo.checked_add(reach).ok_or_else(too_far)?;
            } else {
                hi = hi.checked_add(reach).ok_or_else(too_far)?;
            }
        }
        let es = es as isize;
        let lo_b = lo.checked_mul(es).ok_or_else(too_far)?;
        let hi_b = hi.checked_add(1).and_then(|h| h.checked_mul(es)).ok_or_else(too_far)?;
        check_extent(data, lo_b, hi_b, extent, &dims, dt)?;
    }
    unsafe { Tensor::from_raw_strided(dt, &dims, data as *const u8, &strides) }
}

/// Checks that bytes `data + lo .. data + hi` lie inside `extent` (nothing to check when
/// the range is empty).
fn check_extent(data: *const c_void, lo: isize, hi: isize, extent: Extent, dims: &[usize], dt: DType) -> Result<()> {
    if hi <= lo {
        return Ok(());
    }
    let (start, end) = (extent.start as usize, (extent.start as usize).checked_add(extent.bytes));
    let (first, last) = ((data as usize).checked_add_signed(lo), (data as usize).checked_add_signed(hi));
    let inside = matches!((first, last, end), (Some(f), Some(l), Some(e)) if !extent.start.is_null() && f >= start && l <= e);
    if inside {
        return Ok(());
    }
    Err(OxiflowError::InvalidArgument(format!(
        "a {dt} array of dims {dims:?} needs bytes {lo}..{hi} from its first element, which lie outside the {} bytes of its buffer{}",
        extent.bytes,
        if extent.start.is_null() { " (null)" } else { "" }
    )))
}

/// A dense C array of exactly `data_bytes` bytes (elements × element size; any other
/// length is an InvalidArgument naming both).
fn dense_from_c(dtype: i32, ndims: i32, dims: *const i64, data: *const c_void, data_bytes: usize, col_major: i32) -> Result<Tensor> {
    let t = tensor_from_c(dtype, ndims, dims, data, col_major, std::ptr::null(), Extent { start: data, bytes: data_bytes })?;
    if t.num_bytes() != data_bytes {
        return Err(OxiflowError::InvalidArgument(format!(
            "a {} array of dims {:?} has {} bytes, but {data_bytes} were given",
            t.dtype(),
            t.dims(),
            t.num_bytes()
        )));
    }
    Ok(t)
}

fn out_node(id: usize, out: *mut i64) -> Result<()> {
    put(out, id as i64)
}

pub(crate) fn node_id(n: i64) -> Result<usize> {
    usize::try_from(n).map_err(|_| OxiflowError::InvalidArgument(format!("invalid node id {n}")))
}

pub(crate) fn outputs(nodes: *const i64, idx: *const i32, n: i32, what: &str) -> Result<Vec<Output>> {
    let ns = slice(nodes, n as i64, what)?;
    let is = slice(idx, n as i64, what)?;
    ns.iter()
        .zip(is)
        .map(|(&a, &b)| {
            Ok(Output::new(node_id(a)?, usize::try_from(b).map_err(|_| OxiflowError::InvalidArgument(format!("{what}: invalid output index {b}")))?))
        })
        .collect()
}

/// A `func` attribute given as `{"graph": <graph handle>, "inputs": [[node, index], ...],
/// "outputs": [[node, index], ...]}`: a function of a copy of that graph as it is now
/// (later nodes added to it do not change the function). Errors: a handle that is not a
/// live graph, malformed pairs, and what [`oxiflow_core::function::Function::new`] refuses.
fn function_attr(op: &str, k: &str, f: &serde_json::Map<String, serde_json::Value>) -> Result<oxiflow_core::function::Function> {
    let bad = |m: &str| OxiflowError::InvalidArgument(format!("{op}: attr '{k}': {m}"));
    let handle = f.get("graph").and_then(|v| v.as_u64()).ok_or_else(|| bad("\"graph\" must be a graph handle"))?;
    let pairs = |key: &str| -> Result<Vec<Output>> {
        let items = f.get(key).and_then(|v| v.as_array()).ok_or_else(|| bad(&format!("\"{key}\" must be a list of [node, index] pairs")))?;
        items
            .iter()
            .map(|p| match p.as_array().map(|a| (a.len(), a.first().and_then(|v| v.as_u64()), a.get(1).and_then(|v| v.as_u64()))) {
                Some((2, Some(n), Some(i))) => Ok(Output::new(n as usize, i as usize)),
                _ => Err(bad(&format!("\"{key}\" holds {p}, not a [node, index] pair"))),
            })
            .collect()
    };
    let (inputs, outputs) = (pairs("inputs")?, pairs("outputs")?);
    let copy = graph(handle as usize as *const OxGraph)?.read()?.duplicate();
    oxiflow_core::function::Function::new(copy, inputs, outputs).map_err(|e| match e {
        OxiflowError::InvalidArgument(m) => bad(&m),
        e => e,
    })
}

/// Parses the attrs JSON object by the op's declared attribute types (`OpDef::attrs`, TF's
/// `OpDef.attr`): a `type` attribute from a dtype name (`"float32"`, `"DT_FLOAT"`), a
/// `shape` from an array of non-negative integers, a `float` from any number; otherwise
/// booleans, integers, floats, strings and integer arrays as JSON has them. An attribute
/// the op does not declare is parsed as JSON has it and then refused when the node is built
/// (TF's `NodeDef mentions attr ... not in Op<...>`); `op` is `None` for an unknown op type
/// (refused when the node is built, too).
fn parse_attrs(op: Option<&OpDef>, json: Option<&str>) -> Result<Attrs> {
    let mut attrs = Attrs::new();
    let Some(text) = json.filter(|s| !s.trim().is_empty()) else { return Ok(attrs) };
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| OxiflowError::InvalidArgument(format!("attrs are not valid JSON ({e}): {text}")))?;
    let obj = v.as_object().ok_or_else(|| OxiflowError::InvalidArgument(format!("attrs must be a JSON object: {text}")))?;
    for (k, v) in obj {
        let kind = op.and_then(|d| d.attr_def(k)).map(|a| a.kind);
        let bad = || match kind {
            Some(kind) => OxiflowError::InvalidArgument(format!("attr '{k}' of {} is a {}, not {v}", op.map_or("", |d| d.name), kind.tf_name())),
            None => OxiflowError::InvalidArgument(format!("attr '{k}' has an unsupported value {v}")),
        };
        let ints = |items: &[serde_json::Value]| items.iter().map(|x| x.as_i64().ok_or_else(bad)).collect::<Result<Vec<i64>>>();
        use serde_json::Value as J;
        let a = match (kind, v) {
            (Some(AttrKind::Type), J::String(s)) => {
                AttrValue::Type(DType::parse(s).ok_or_else(|| OxiflowError::InvalidArgument(format!("attr '{k}': unknown dtype '{s}'")))?)
            }
            // -1: an unknown dimension (ops that take none refuse it with their name)
            (Some(AttrKind::Shape), J::Array(items)) => AttrValue::Shape(ints(items)?.iter().map(|&d| partial_dim(d).ok_or_else(bad)).collect::<Result<_>>()?),
            (Some(AttrKind::Float), J::Number(n)) => AttrValue::Float(n.as_f64().ok_or_else(bad)?),
            (Some(AttrKind::Func), J::Object(f)) => AttrValue::Func(Arc::new(function_attr(op.map_or("", |d| d.name), k, f)?)),
            (_, J::Bool(b)) => AttrValue::Bool(*b),
            (_, J::Number(n)) => match n.as_i64() {
                Some(i) => AttrValue::Int(i),
                None => AttrValue::Float(n.as_f64().ok_or_else(bad)?),
            },
            (_, J::String(s)) => AttrValue::Str(s.clone()),
            (_, J::Array(items)) => AttrValue::Ints(ints(items)?),
            _ => return Err(bad()),
        };
        attrs.insert(k.clone(), a);
    }
    Ok(attrs)
}

/// A new, empty graph. Never null.
#[no_mangle]
pub extern "C" fn oxf_graph_new() -> *mut OxGraph {
    GRAPHS.insert(OxGraph { inner: Arc::new(RwLock::new(Graph::new())) })
}

/// Frees a graph handle (sessions keep the graph alive on their own). Null is ignored
/// (status 0); a handle freed already or never issued is status 3 and frees nothing.
#[no_mangle]
pub extern "C" fn oxf_graph_free(g: *mut OxGraph) -> i32 {
    crate::handles::free(&GRAPHS, g)
}

/// Number of nodes in the graph.
#[no_mangle]
pub extern "C" fn oxf_graph_num_nodes(g: *const OxGraph, out: *mut i64) -> i32 {
    guard(|| put(out, graph(g)?.read()?.len() as i64))
}

/// `tf.constant(value)`: a `Const` node holding a copy of the array (`dtype` code, `ndims`
/// dims, `data_bytes` bytes at `data`, which must be the elements' size exactly,
/// `col_major` layout). `name` may be null (default `Const`); one ending in `/` is
/// used exactly, as in TF.
#[no_mangle]
pub extern "C" fn oxf_const(
    g: *mut OxGraph,
    dtype: i32,
    ndims: i32,
    dims: *const i64,
    data: *const c_void,
    data_bytes: usize,
    col_major: i32,
    name: *const c_char,
    out: *mut i64,
) -> i32 {
    guard(|| {
        let t = dense_from_c(dtype, ndims, dims, data, data_bytes, col_major)?;
        let mut spec = NodeSpec::new("Const", &[]).attr("dtype", t.dtype()).attr("value", t);
        spec.name = opt_str(name, "name")?.map(str::to_string);
        // (a name ending in '/' is used exactly: Graph::requested_name)
        out_node(graph(g)?.write()?.add_node(spec)?, out)
    })
}

/// A `Const` of dtype Int64 and shape `[nnz, 2]` holding the 0-based `(row, col)` pairs of
/// the 1-based Julia index vectors `ii` and `jj` (each `nnz` long): a sparse matrix's
/// `indices` (TF's layout) written in one pass, without a `[nnz, 2]` array on the caller's
/// side. Errors (InvalidArgument): an index outside `1..=m` (rows) or `1..=n` (columns),
/// naming it and its 1-based position. `name` may be null.
#[no_mangle]
pub extern "C" fn oxf_const_sparse_indices(
    g: *mut OxGraph,
    ii: *const i64,
    jj: *const i64,
    nnz: i64,
    m: i64,
    n: i64,
    name: *const c_char,
    out: *mut i64,
) -> i32 {
    guard(|| {
        let (ii, jj) = (slice(ii, nnz, "ii")?, slice(jj, nnz, "jj")?);
        let mut v: Vec<i64> = Vec::new();
        v.try_reserve_exact(2 * ii.len())
            .map_err(|_| OxiflowError::InvalidArgument(format!("SparseTensor: no memory for the indices of {} entries", ii.len())))?;
        for (k, (&i, &j)) in ii.iter().zip(jj).enumerate() {
            for (x, d, what) in [(i, m, "row"), (j, n, "column")] {
                if x < 1 || x > d {
                    return Err(OxiflowError::InvalidArgument(format!(
                        "SparseTensor: {what} index {x} (position {}) is out of bounds for a dimension of size {d}",
                        k + 1
                    )));
                }
            }
            v.push(i - 1);
            v.push(j - 1);
        }
        let t = Tensor::from_vec(&[ii.len(), 2], v, oxiflow_core::tensor::Layout::RowMajor)?;
        let mut spec = NodeSpec::new("Const", &[]).attr("dtype", t.dtype()).attr("value", t);
        spec.name = opt_str(name, "name")?.map(str::to_string);
        out_node(graph(g)?.write()?.add_node(spec)?, out)
    })
}

/// `tf.placeholder(dtype, shape)`; a dimension of `-1` is unknown (TF's `None`), fed any
/// size; `name` may be null (default `Placeholder`).
#[no_mangle]
pub extern "C" fn oxf_placeholder(g: *mut OxGraph, dtype: i32, ndims: i32, dims: *const i64, name: *const c_char, out: *mut i64) -> i32 {
    guard(|| {
        let dt = self::dtype(dtype)?;
        // -1 is an unknown dimension (TF's `shape=[None, 10]`)
        let d = slice(dims, ndims as i64, "dims")?
            .iter()
            .map(|&d| partial_dim(d).ok_or_else(|| OxiflowError::InvalidArgument(format!("placeholder: dimension {d} (give -1 for an unknown one)"))))
            .collect::<Result<Vec<usize>>>()?;
        let o = graph(g)?.write()?.placeholder(dt, &d, opt_str(name, "name")?)?;
        out_node(o.node, out)
    })
}

/// `tf.Variable(value; name, trainable)`: creates `<name>/initial_value`, `<name>`
/// (`VariableV2`, returned), `<name>/Assign`, `<name>/read`. The initial value is given as
/// to [`oxf_const`] (`data_bytes` exactly its size). `name` may be null.
#[no_mangle]
pub extern "C" fn oxf_variable(
    g: *mut OxGraph,
    dtype: i32,
    ndims: i32,
    dims: *const i64,
    data: *const c_void,
    data_bytes: usize,
    col_major: i32,
    name: *const c_char,
    trainable: i32,
    out: *mut i64,
) -> i32 {
    guard(|| {
        let t = dense_from_c(dtype, ndims, dims, data, data_bytes, col_major)?;
        let id = graph(g)?.write()?.variable(t, opt_str(name, "name")?, trainable != 0)?;
        out_node(id, out)
    })
}

/// Adds a node of `op_type` with inputs `(input_nodes[i], input_indices[i])`, attrs as a
/// JSON object (may be null) and an optional name (made unique in the current name scope;
/// a name ending in `/` is used exactly, as in TF). Errors name the op, node and shapes.
#[no_mangle]
pub extern "C" fn oxf_add_op(
    g: *mut OxGraph,
    op_type: *const c_char,
    input_nodes: *const i64,
    input_indices: *const i32,
    n_inputs: i32,
    attrs_json: *const c_char,
    name: *const c_char,
    out: *mut i64,
) -> i32 {
    guard(|| {
        let mut spec = NodeSpec::new(req_str(op_type, "op type")?, &outputs(input_nodes, input_indices, n_inputs, "inputs")?);
        spec.attrs = parse_attrs(lookup(&spec.op).ok(), opt_str(attrs_json, "attrs")?)?;
        spec.name = opt_str(name, "name")?.map(str::to_string);
        // (a name ending in '/' is used exactly: Graph::requested_name)
        out_node(graph(g)?.write()?.add_node(spec)?, out)
    })
}

/// `tf.global_variables_initializer()`: a new `NoOp` `init` depending on every variable's
/// initializer.
#[no_mangle]
pub extern "C" fn oxf_global_variables_initializer(g: *mut OxGraph, out: *mut i64) -> i32 {
    guard(|| out_node(graph(g)?.write()?.global_variables_initializer()?, out))
}

fn with_node<T>(g: *const OxGraph, node: i64, f: impl FnOnce(&Graph, &oxiflow_core::graph::Node) -> Result<T>) -> Result<T> {
    let gh = graph(g)?;
    let gr = gh.read()?;
    let n = gr.node(node_id(node)?)?;
    f(&gr, n)
}

/// Node name (`Sin`, `gradients/Cos_grad/Sin`).
#[no_mangle]
pub extern "C" fn oxf_node_name(g: *const OxGraph, node: i64, out: *mut *const c_char) -> i32 {
    guard(|| return_str(with_node(g, node, |_, n| Ok(n.name.clone()))?, out))
}

/// Op type (`Sin`, `VariableV2`).
#[no_mangle]
pub extern "C" fn oxf_node_op(g: *const OxGraph, node: i64, out: *mut *const c_char) -> i32 {
    guard(|| return_str(with_node(g, node, |_, n| Ok(n.op.name.to_string()))?, out))
}

/// Requested device in canonical form (`/device:GPU:0`; `""` when unplaced), TF's `op.device`.
#[no_mangle]
pub extern "C" fn oxf_node_device(g: *const OxGraph, node: i64, out: *mut *const c_char) -> i32 {
    guard(|| return_str(with_node(g, node, |_, n| Ok(n.requested_device.to_string()))?, out))
}

/// Colocation list (`loc:@name` entries), one per line.
#[no_mangle]
pub extern "C" fn oxf_node_colocation(g: *const OxGraph, node: i64, out: *mut *const c_char) -> i32 {
    guard(|| return_str(with_node(g, node, |_, n| Ok(n.colocation.join("\n")))?, out))
}

/// Input tensor names (TF NodeDef style: `Sin`, `Split:1`, `^init` for control inputs),
/// one per line.
#[no_mangle]
pub extern "C" fn oxf_node_inputs(g: *const OxGraph, node: i64, out: *mut *const c_char) -> i32 {
    guard(|| return_str(with_node(g, node, |gr, n| Ok(gr.node_def(n.id)?.input.join("\n")))?, out))
}

/// Number of outputs of a node.
#[no_mangle]
pub extern "C" fn oxf_node_num_outputs(g: *const OxGraph, node: i64, out: *mut i32) -> i32 {
    guard(|| put(out, with_node(g, node, |_, n| Ok(n.outputs.len() as i32))?))
}

/// The node named `name`; status 5 when there is none.
#[no_mangle]
pub extern "C" fn oxf_node_by_name(g: *const OxGraph, name: *const c_char, out: *mut i64) -> i32 {
    guard(|| {
        let name = req_str(name, "name")?;
        let id = graph(g)?.read()?.node_by_name(name).ok_or_else(|| OxiflowError::NotFound(format!("no node named '{name}' in the graph")))?;
        out_node(id, out)
    })
}

/// Dtype code, rank and (into `dims`, room for `max_dims`) dimensions of output `index`;
/// an unknown dimension is `-1`.
#[no_mangle]
pub extern "C" fn oxf_output_type(g: *const OxGraph, node: i64, index: i32, dtype: *mut i32, rank: *mut i32, dims: *mut i64, max_dims: i32) -> i32 {
    guard(|| {
        let gh = graph(g)?;
        let gr = gh.read()?;
        let index = usize::try_from(index).map_err(|_| OxiflowError::InvalidArgument(format!("invalid output index {index}")))?;
        let tt = gr.output_type(Output::new(node_id(node)?, index))?;
        put(dtype, tt.dtype.code())?;
        put(rank, tt.shape.rank() as i32)?;
        if tt.shape.rank() > max_dims.max(0) as usize {
            return Err(OxiflowError::InvalidArgument(format!("rank {} exceeds the {max_dims} dims given", tt.shape.rank())));
        }
        if tt.shape.rank() > 0 && dims.is_null() {
            return Err(OxiflowError::InvalidArgument("null dims buffer".into()));
        }
        for (i, &d) in tt.shape.dims().iter().enumerate() {
            let d = if d == oxiflow_core::shape::UNKNOWN { -1 } else { d as i64 };
            unsafe { *dims.add(i) = d };
        }
        Ok(())
    })
}

/// Pushes `tf.device(spec)`; a malformed spec is status 3 and pushes nothing.
#[no_mangle]
pub extern "C" fn oxf_push_device(g: *mut OxGraph, spec: *const c_char) -> i32 {
    guard(|| {
        let s = DeviceSpec::parse(req_str(spec, "device spec")?)?;
        graph(g)?.write()?.push_device(DeviceScope::Spec(s));
        Ok(())
    })
}

/// Pushes `tf.device(None)`: outer device scopes stop applying.
#[no_mangle]
pub extern "C" fn oxf_push_device_reset(g: *mut OxGraph) -> i32 {
    guard(|| {
        graph(g)?.write()?.push_device(DeviceScope::Reset);
        Ok(())
    })
}

/// A node as a device function sees it. All strings are valid during the callback only.
#[repr(C)]
pub struct OxNodeDef {
    pub name: *const c_char,
    pub op: *const c_char,
    /// Device set so far by inner scopes (canonical, may be empty).
    pub device: *const c_char,
    pub inputs: *const *const c_char,
    pub n_inputs: i32,
    pub attr_keys: *const *const c_char,
    pub attr_values: *const *const c_char,
    pub n_attrs: i32,
}

/// A device function: returns 0 and sets `*out` to a device string (NUL-terminated, valid
/// until the callback is called again), or non-zero and sets `*out` to an error message.
pub type OxDeviceFn = Option<unsafe extern "C" fn(userdata: *mut c_void, node: *const OxNodeDef, out: *mut *const c_char) -> i32>;

struct CDeviceFn {
    f: unsafe extern "C" fn(*mut c_void, *const OxNodeDef, *mut *const c_char) -> i32,
    userdata: usize,
}

fn cstrings(v: impl IntoIterator<Item = String>) -> Vec<CString> {
    v.into_iter().map(crate::to_cstring).collect()
}

impl oxiflow_core::graph::DeviceFunction for CDeviceFn {
    fn call(&self, node: &NodeDef) -> std::result::Result<String, String> {
        let name = crate::to_cstring(node.name.clone());
        let op = crate::to_cstring(node.op.clone());
        let device = crate::to_cstring(node.device.clone());
        let inputs = cstrings(node.input.iter().cloned());
        let keys = cstrings(node.attr.keys().cloned());
        let values = cstrings(node.attr.values().cloned());
        let ip: Vec<*const c_char> = inputs.iter().map(|c| c.as_ptr()).collect();
        let kp: Vec<*const c_char> = keys.iter().map(|c| c.as_ptr()).collect();
        let vp: Vec<*const c_char> = values.iter().map(|c| c.as_ptr()).collect();
        let def = OxNodeDef {
            name: name.as_ptr(),
            op: op.as_ptr(),
            device: device.as_ptr(),
            inputs: ip.as_ptr(),
            n_inputs: ip.len() as i32,
            attr_keys: kp.as_ptr(),
            attr_values: vp.as_ptr(),
            n_attrs: kp.len() as i32,
        };
        let mut out: *const c_char = std::ptr::null();
        IN_DEVICE_FUNCTION.with(|d| d.set(d.get() + 1));
        // SAFETY: f is the caller's callback with the documented signature; def and its
        // strings live until it returns.
        let status = unsafe { (self.f)(self.userdata as *mut c_void, &def, &mut out) };
        IN_DEVICE_FUNCTION.with(|d| d.set(d.get() - 1));
        let text = if out.is_null() { String::new() } else { unsafe { std::ffi::CStr::from_ptr(out) }.to_string_lossy().into_owned() };
        if status == 0 {
            Ok(text)
        } else if text.is_empty() {
            Err(format!("device function returned status {status}"))
        } else {
            Err(text)
        }
    }
}

/// Pushes a device function scope: `f(userdata, node, out)` is called for every node created
/// inside it, on the calling thread, while the graph is locked (it must not call back into
/// the graph).
#[no_mangle]
pub extern "C" fn oxf_push_device_fn(g: *mut OxGraph, f: OxDeviceFn, userdata: *mut c_void) -> i32 {
    guard(|| {
        let f = f.ok_or_else(|| OxiflowError::InvalidArgument("null device function".into()))?;
        graph(g)?.write()?.push_device(DeviceScope::Function(Arc::new(CDeviceFn { f, userdata: userdata as usize })));
        Ok(())
    })
}

/// Pops the innermost device scope.
#[no_mangle]
pub extern "C" fn oxf_pop_device(g: *mut OxGraph) -> i32 {
    guard(|| graph(g)?.write()?.pop_device())
}

/// Opens `colocate_with(node)` (outer device scopes suspended inside).
#[no_mangle]
pub extern "C" fn oxf_push_colocation(g: *mut OxGraph, node: i64, ignore_existing: i32) -> i32 {
    guard(|| graph(g)?.write()?.push_colocation(node_id(node)?, ignore_existing != 0))
}

/// Closes the innermost `colocate_with`.
#[no_mangle]
pub extern "C" fn oxf_pop_colocation(g: *mut OxGraph) -> i32 {
    guard(|| {
        graph(g)?.write()?.pop_colocation();
        Ok(())
    })
}

/// Opens `tf.name_scope(name)`; the unique scope name is returned through `out`.
#[no_mangle]
pub extern "C" fn oxf_push_name_scope(g: *mut OxGraph, name: *const c_char, out: *mut *const c_char) -> i32 {
    guard(|| {
        let s = graph(g)?.write()?.push_name_scope(req_str(name, "name scope")?);
        return_str(s, out)
    })
}

/// Closes the innermost name scope.
#[no_mangle]
pub extern "C" fn oxf_pop_name_scope(g: *mut OxGraph) -> i32 {
    guard(|| {
        graph(g)?.write()?.pop_name_scope();
        Ok(())
    })
}

/// Adds `(node, index)` to collection `key` (`tf.add_to_collection`).
#[no_mangle]
pub extern "C" fn oxf_add_to_collection(g: *mut OxGraph, key: *const c_char, node: i64, index: i32) -> i32 {
    guard(|| {
        let key = req_str(key, "collection key")?;
        let gh = graph(g)?;
        let mut gr = gh.write()?;
        let o = Output::new(node_id(node)?, index.max(0) as usize);
        gr.output_type(o)?;
        gr.add_to_collection(key, o);
        Ok(())
    })
}

/// Members of collection `key` as lines `node index`.
#[no_mangle]
pub extern "C" fn oxf_collection(g: *const OxGraph, key: *const c_char, out: *mut *const c_char) -> i32 {
    guard(|| {
        let gh = graph(g)?;
        let gr = gh.read()?;
        let lines: Vec<String> = gr.collection(req_str(key, "collection key")?).iter().map(|o| format!("{} {}", o.node, o.index)).collect();
        return_str(lines.join("\n"), out)
    })
}

/// Opens `tf.control_dependencies(ops)`: nodes created until
/// [`oxf_pop_control_dependencies`] run after the `n` nodes `nodes` (nested blocks add up).
/// An unknown node id is an error and opens nothing.
#[no_mangle]
pub extern "C" fn oxf_push_control_dependencies(g: *mut OxGraph, nodes: *const i64, n: i32) -> i32 {
    guard(|| {
        let ids: Vec<usize> = slice(nodes, n as i64, "control dependencies")?.iter().map(|&d| node_id(d)).collect::<Result<_>>()?;
        let gh = graph(g)?;
        let mut gr = gh.write()?;
        for &id in &ids {
            gr.node(id)?;
        }
        gr.push_control_dependencies(&ids);
        Ok(())
    })
}

/// Closes the innermost `control_dependencies` block (no-op when none is open).
#[no_mangle]
pub extern "C" fn oxf_pop_control_dependencies(g: *mut OxGraph) -> i32 {
    guard(|| {
        graph(g)?.write()?.pop_control_dependencies();
        Ok(())
    })
}
