//! Test cases of the data-movement and indexing kernels, shared by the host check of the
//! launch plans (`src/launch/movement/tests.rs`, which emulates the kernels on the host)
//! and the GPU test (`tests/gpu_movement.rs`). Each case is one node built with the core's
//! graph builder, its input values, and the CPU kernel's outputs to compare with exactly.

#![allow(dead_code)]

use oxiflow_core::graph::{Graph, Node, NodeSpec, Output};
use oxiflow_core::ops::{AttrValue, KernelCtx, StateAccess};
use oxiflow_core::{DType, Layout, NodeId, Tensor};

/// One node to run on both devices.
pub struct Case {
    /// `Op dtype detail`, for failure messages.
    pub name: String,
    pub graph: Graph,
    pub node: NodeId,
    pub inputs: Vec<Tensor>,
}

impl Case {
    /// The node under test.
    pub fn node(&self) -> &Node {
        self.graph.node(self.node).expect("case node")
    }

    /// The CPU kernel's outputs.
    pub fn cpu_outputs(&self) -> Vec<Tensor> {
        let ctx = KernelCtx { node: self.node(), inputs: &self.inputs, state: &NoState };
        (self.node().op.kernel)(&ctx).unwrap_or_else(|e| panic!("{}: CPU kernel failed: {e}", self.name)).into_vec()
    }
}

/// No variables: the ops under test read none.
pub struct NoState;

impl StateAccess for NoState {
    fn read_variable(&self, _: NodeId) -> Option<Tensor> {
        None
    }
    fn assign_variable(&self, _: NodeId, _: Tensor) -> oxiflow_core::Result<()> {
        Ok(())
    }
}

/// Row-major bytes of a tensor as the device stores it (Bool: one byte 0/1).
pub fn tensor_bytes(t: &Tensor) -> Vec<u8> {
    let mut v = vec![0u8; t.num_bytes()];
    // SAFETY: `v` has room for every element; `write_raw` writes `len()` elements.
    unsafe { t.write_raw(v.as_mut_ptr(), Layout::RowMajor) };
    v
}

/// Distinct, exactly representable values for element `i` (`seed` shifts them), so sums
/// of a few of them (ScatterNd duplicates) are exact in every dtype.
pub fn ramp(dtype: DType, dims: &[usize], seed: i64) -> Tensor {
    let n: usize = dims.iter().product();
    let v = |i: usize| i as i64 * 3 + seed - 7;
    match dtype {
        DType::Float32 => Tensor::from_vec(dims, (0..n).map(|i| v(i) as f32 * 0.5).collect(), Layout::RowMajor),
        DType::Float64 => Tensor::from_vec(dims, (0..n).map(|i| v(i) as f64 * 0.25).collect(), Layout::RowMajor),
        DType::Int32 => Tensor::from_vec(dims, (0..n).map(|i| v(i) as i32).collect(), Layout::RowMajor),
        DType::Int64 => Tensor::from_vec(dims, (0..n).map(|i| v(i) * 1_000_000_007).collect(), Layout::RowMajor),
        DType::Bool => Tensor::from_vec(dims, (0..n).map(|i| (i as i64 + seed) % 3 == 0).collect(), Layout::RowMajor),
        DType::Complex64 | DType::Complex128 => panic!("no GPU kernel moves complex tensors"),
    }
    .expect("ramp tensor")
}

/// An index tensor of `dtype` (Int32 or Int64).
pub fn indices(dtype: DType, dims: &[usize], v: &[i64]) -> Tensor {
    match dtype {
        DType::Int32 => Tensor::from_vec(dims, v.iter().map(|&x| x as i32).collect(), Layout::RowMajor),
        _ => Tensor::from_vec(dims, v.to_vec(), Layout::RowMajor),
    }
    .expect("index tensor")
}

/// Builds `op` over placeholders shaped like `inputs`, with `attrs`.
pub fn case(name: impl Into<String>, op: &str, inputs: Vec<Tensor>, attrs: Vec<(&str, AttrValue)>) -> Case {
    let name = name.into();
    let mut g = Graph::new();
    let ins: Vec<Output> = inputs.iter().enumerate().map(|(i, t)| g.placeholder(t.dtype(), t.dims(), Some(&format!("in{i}"))).expect("placeholder")).collect();
    let mut spec = NodeSpec::new(op, &ins);
    for (k, v) in attrs {
        spec = spec.attr(k, v);
    }
    let id = g.add_node(spec).unwrap_or_else(|e| panic!("{name}: cannot build the node: {e}"));
    Case { name, graph: g, node: id, inputs }
}

fn ints(v: &[i64]) -> AttrValue {
    AttrValue::Ints(v.to_vec())
}

/// Dtypes of the layout ops (`GpuSupport::Any`).
pub const ALL: &[DType] = &[DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool];
/// Dtypes of the gather/scatter ops.
pub const NUMERIC: &[DType] = &[DType::Float32, DType::Float64, DType::Int32, DType::Int64];
/// Dtypes of the diagonal ops.
pub const FLOATS: &[DType] = &[DType::Float32, DType::Float64];

/// The slicing attrs `(begin, end, strides, begin_mask, end_mask, shrink_axis_mask)` and the
/// input shape of each strided-slice case.
#[allow(clippy::type_complexity)]
pub fn slices() -> Vec<(Vec<usize>, [Vec<i64>; 3], [i64; 3])> {
    vec![
        (vec![5, 6], [vec![1, -1], vec![4, 0], vec![2, -2]], [0, 0, 0]),
        (vec![5, 6], [vec![3, 1], vec![0, 5], vec![1, 2]], [1, 0, 0]),
        (vec![5, 6], [vec![0, 4], vec![0, 0], vec![-1, -3]], [1, 3, 0]),
        (vec![5, 6], [vec![2, 0], vec![3, 6], vec![1, 1]], [0, 0, 1]),
        (vec![5, 6], [vec![-1, 1], vec![0, 3], vec![1, 1]], [0, 0, 1]),
        (vec![4, 3, 2], [vec![3, 0, 1], vec![1, 3, 2], vec![1, 1, 1]], [0, 0, 0]),
        (vec![4, 3, 2], [vec![-1, 2, 0], vec![-5, -4, 2], vec![-1, -1, 1]], [0, 0, 4]),
        (vec![7], [vec![1], vec![7], vec![3]], [0, 0, 0]),
    ]
}

fn slice_attrs(b: &[Vec<i64>; 3], m: &[i64; 3]) -> Vec<(&'static str, AttrValue)> {
    vec![
        ("begin", ints(&b[0])),
        ("end", ints(&b[1])),
        ("strides", ints(&b[2])),
        ("begin_mask", AttrValue::Int(m[0])),
        ("end_mask", AttrValue::Int(m[1])),
        ("shrink_axis_mask", AttrValue::Int(m[2])),
    ]
}

/// Every case: each op of the family, each GPU dtype, edge cases (empty pieces, more than
/// 32 pieces, zero multiples, negative strides, shrunk axes, duplicate scatter indices).
pub fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    for &d in ALL {
        let t = |dims: &[usize], seed| ramp(d, dims, seed);
        v.push(case(format!("Transpose {d} [2,3,4] perm [2,0,1]"), "Transpose", vec![t(&[2, 3, 4], 0)], vec![("perm", ints(&[2, 0, 1]))]));
        v.push(case(format!("Transpose {d} [33,65] perm [1,0]"), "Transpose", vec![t(&[33, 65], 1)], vec![("perm", ints(&[1, 0]))]));
        v.push(case(format!("Transpose {d} scalar"), "Transpose", vec![t(&[], 2)], vec![("perm", ints(&[]))]));
        v.push(case(format!("Transpose {d} rank 8"), "Transpose", vec![t(&[2, 1, 3, 1, 2, 2, 1, 3], 2)], vec![("perm", ints(&[7, 0, 6, 1, 5, 2, 4, 3]))]));
        v.push(case(
            format!("Transpose {d} rank 9, merged to fit"),
            "Transpose",
            vec![t(&[2, 3, 1, 2, 1, 1, 2, 1, 3], 3)],
            vec![("perm", ints(&[0, 1, 2, 3, 4, 5, 6, 8, 7]))],
        ));
        v.push(case(
            format!("ReverseV2 {d} rank 10, merged to fit"),
            "ReverseV2",
            vec![t(&[1, 2, 1, 2, 1, 2, 1, 2, 1, 2], 4)],
            vec![("axis", ints(&[1, 3, -1]))],
        ));
        v.push(case(format!("Transpose {d} [3,40,17] perm [0,2,1] (tiled)"), "Transpose", vec![t(&[3, 40, 17], 4)], vec![("perm", ints(&[0, 2, 1]))]));
        v.push(case(
            format!("Transpose {d} [2,1,64,33] perm [1,0,3,2] (tiled)"),
            "Transpose",
            vec![t(&[2, 1, 64, 33], 5)],
            vec![("perm", ints(&[1, 0, 3, 2]))],
        ));
        v.push(case(format!("Transpose {d} [70,9] perm [1,0] (tiled, partial tiles)"), "Transpose", vec![t(&[70, 9], 6)], vec![("perm", ints(&[1, 0]))]));
        v.push(case(
            format!("ConcatV2 {d} axis 1"),
            "ConcatV2",
            vec![t(&[2, 3], 0), t(&[2, 1], 1), t(&[2, 0], 2), t(&[2, 2], 3)],
            vec![("axis", AttrValue::Int(1))],
        ));
        v.push(case(format!("ConcatV2 {d} axis -3"), "ConcatV2", vec![t(&[1, 2, 2], 0), t(&[3, 2, 2], 1)], vec![("axis", AttrValue::Int(-3))]));
        v.push(case(
            format!("ConcatV2 {d} 40 inputs"),
            "ConcatV2",
            (0..40).map(|i| t(&[2, 1 + i % 3], i as i64)).collect(),
            vec![("axis", AttrValue::Int(-1))],
        ));
        for axis in [0i64, 1, -1] {
            v.push(case(format!("Pack {d} axis {axis}"), "Pack", vec![t(&[2, 3], 0), t(&[2, 3], 1), t(&[2, 3], 2)], vec![("axis", AttrValue::Int(axis))]));
            v.push(case(format!("Unpack {d} axis {axis}"), "Unpack", vec![t(&[3, 4, 2], 0)], vec![("axis", AttrValue::Int(axis))]));
        }
        v.push(case(format!("Pack {d} 35 inputs"), "Pack", (0..35).map(|i| t(&[2], i)).collect(), vec![("axis", AttrValue::Int(1))]));
        v.push(case(format!("Pack {d} scalars"), "Pack", vec![t(&[], 0), t(&[], 1)], vec![]));
        v.push(case(format!("Unpack {d} 34 outputs"), "Unpack", vec![t(&[34, 2], 0)], vec![]));
        v.push(case(format!("SplitV {d} axis 1"), "SplitV", vec![t(&[4, 6], 0)], vec![("size_splits", ints(&[1, -1, 2])), ("axis", AttrValue::Int(1))]));
        v.push(case(format!("SplitV {d} empty piece"), "SplitV", vec![t(&[4, 6], 1)], vec![("size_splits", ints(&[0, 4])), ("axis", AttrValue::Int(-2))]));
        v.push(case(format!("Tile {d} [2,3] x [2,3]"), "Tile", vec![t(&[2, 3], 0)], vec![("multiples", ints(&[2, 3]))]));
        v.push(case(format!("Tile {d} zero multiple"), "Tile", vec![t(&[2, 1, 3], 0)], vec![("multiples", ints(&[1, 4, 0]))]));
        v.push(case(format!("Tile {d} [2,1,3] x [3,4,1]"), "Tile", vec![t(&[2, 1, 3], 1)], vec![("multiples", ints(&[3, 4, 1]))]));
        for axes in [vec![0, 2], vec![-1], vec![]] {
            v.push(case(format!("ReverseV2 {d} axis {axes:?}"), "ReverseV2", vec![t(&[2, 3, 4], 0)], vec![("axis", ints(&axes))]));
        }
        v.push(case(format!("Pad {d} [2,3]"), "Pad", vec![t(&[2, 3], 0)], vec![("paddings", ints(&[1, 0, 2, 1]))]));
        v.push(case(format!("Pad {d} [3] none"), "Pad", vec![t(&[3], 0)], vec![("paddings", ints(&[0, 0]))]));
        v.push(case(format!("Pad {d} [2,0,2]"), "Pad", vec![t(&[2, 0, 2], 0)], vec![("paddings", ints(&[0, 1, 1, 1, 2, 0]))]));
        for (i, (shape, b, m)) in slices().into_iter().enumerate() {
            let x = t(&shape, i as i64);
            let sliced = case(format!("StridedSlice {d} #{i}"), "StridedSlice", vec![x], slice_attrs(&b, &m));
            let out = sliced.node().outputs[0].shape.0.clone();
            v.push(sliced);
            let mut attrs = slice_attrs(&b, &m);
            attrs.push(("shape", AttrValue::Shape(shape.clone())));
            v.push(case(format!("StridedSliceGrad {d} #{i}"), "StridedSliceGrad", vec![t(&out, 5)], attrs));
        }
    }
    for &d in NUMERIC {
        let t = |dims: &[usize], seed| ramp(d, dims, seed);
        for &id in &[DType::Int32, DType::Int64] {
            let gi = format!("{d} indices {id}");
            v.push(case(format!("GatherV2 {gi} axis 0"), "GatherV2", vec![t(&[4, 3], 0), indices(id, &[2, 2], &[3, 0, 0, 2])], vec![]));
            v.push(case(
                format!("GatherV2 {gi} axis 1"),
                "GatherV2",
                vec![t(&[2, 3, 4], 0), indices(id, &[5], &[2, 2, 0, 1, 2])],
                vec![("axis", AttrValue::Int(1))],
            ));
            v.push(case(
                format!("GatherV2 {gi} axis -1 scalar index"),
                "GatherV2",
                vec![t(&[2, 3, 4], 1), indices(id, &[], &[3])],
                vec![("axis", AttrValue::Int(-1))],
            ));
            v.push(case(format!("GatherNd {gi} k 2"), "GatherNd", vec![t(&[3, 4, 2], 0), indices(id, &[2, 2], &[2, 3, 0, 1])], vec![]));
            v.push(case(format!("GatherNd {gi} k 1"), "GatherNd", vec![t(&[3, 4, 2], 1), indices(id, &[3, 1], &[1, 1, 0])], vec![]));
            v.push(case(format!("GatherNd {gi} k 3"), "GatherNd", vec![t(&[3, 4, 2], 2), indices(id, &[2, 1, 3], &[2, 3, 1, 0, 0, 0])], vec![]));
            let shape = |s: &[usize]| ("shape", AttrValue::Shape(s.to_vec()));
            v.push(case(format!("ScatterNd {gi} duplicates"), "ScatterNd", vec![indices(id, &[4, 1], &[1, 3, 1, 1]), t(&[4, 3], 0)], vec![shape(&[5, 3])]));
            v.push(case(format!("ScatterNd {gi} k 2"), "ScatterNd", vec![indices(id, &[3, 2], &[2, 3, 0, 0, 2, 3]), t(&[3], 1)], vec![shape(&[3, 4])]));
            v.push(case(
                format!("ScatterNd {gi} batch of rows"),
                "ScatterNd",
                vec![indices(id, &[2, 2, 1], &[0, 2, 2, 1]), t(&[2, 2, 2, 2], 2)],
                vec![shape(&[3, 2, 2])],
            ));
            // rows written once (Update: of repeated rows the GPU keeps one, unspecified
            // which); Add and Sub sum repeated rows
            v.push(case(
                format!("TensorScatterUpdate {gi} rows"),
                "TensorScatterUpdate",
                vec![t(&[5, 3], 0), indices(id, &[2, 1], &[3, 0]), t(&[2, 3], 1)],
                vec![],
            ));
            v.push(case(
                format!("TensorScatterUpdate {gi} elements"),
                "TensorScatterUpdate",
                vec![t(&[3, 4], 0), indices(id, &[3, 2], &[2, 3, 0, 0, 1, 2]), t(&[3], 2)],
                vec![],
            ));
            for op in ["TensorScatterAdd", "TensorScatterSub"] {
                v.push(case(format!("{op} {gi} duplicates"), op, vec![t(&[5, 3], 0), indices(id, &[4, 1], &[1, 3, 1, 1]), t(&[4, 3], 1)], vec![]));
                v.push(case(
                    format!("{op} {gi} batch of rows"),
                    op,
                    vec![t(&[3, 2, 2], 2), indices(id, &[2, 2, 1], &[0, 2, 2, 1]), t(&[2, 2, 2, 2], 3)],
                    vec![],
                ));
            }
        }
    }
    for &d in FLOATS {
        let t = |dims: &[usize], seed| ramp(d, dims, seed);
        v.push(case(format!("MatrixDiag {d} [2,3]"), "MatrixDiag", vec![t(&[2, 3], 0)], vec![]));
        v.push(case(format!("MatrixDiag {d} [4]"), "MatrixDiag", vec![t(&[4], 1)], vec![]));
        v.push(case(format!("MatrixDiagPart {d} [2,3,4]"), "MatrixDiagPart", vec![t(&[2, 3, 4], 0)], vec![]));
        v.push(case(format!("MatrixDiagPart {d} [5,2]"), "MatrixDiagPart", vec![t(&[5, 2], 1)], vec![]));
    }
    v
}

/// Gather/scatter cases with one index out of range, the position of the first bad index
/// (element of indices for GatherV2, row for the others), and the CPU kernel's
/// error text.
pub fn bad_index_cases() -> Vec<(Case, u64, String)> {
    let d = DType::Float32;
    let cases = vec![
        (case("GatherV2 bad", "GatherV2", vec![ramp(d, &[4, 3], 0), indices(DType::Int32, &[4], &[1, 7, 0, -1])], vec![]), 1),
        (case("GatherNd bad", "GatherNd", vec![ramp(d, &[3, 4], 0), indices(DType::Int64, &[3, 2], &[0, 0, 2, 4, 3, 0])], vec![]), 1),
        (
            case(
                "ScatterNd bad",
                "ScatterNd",
                vec![indices(DType::Int32, &[3, 1], &[0, -2, 5]), ramp(d, &[3, 2], 0)],
                vec![("shape", AttrValue::Shape(vec![4, 2]))],
            ),
            1,
        ),
        (
            case(
                "TensorScatterAdd bad",
                "TensorScatterAdd",
                vec![ramp(d, &[4, 2], 0), indices(DType::Int32, &[3, 1], &[0, -2, 5]), ramp(d, &[3, 2], 0)],
                vec![],
            ),
            1,
        ),
    ];
    cases
        .into_iter()
        .map(|(c, pos)| {
            let ctx = KernelCtx { node: c.node(), inputs: &c.inputs, state: &NoState };
            let err = match (c.node().op.kernel)(&ctx) {
                Err(e) => e.to_string(),
                Ok(_) => panic!("{}: the CPU kernel accepted a bad index", c.name),
            };
            (c, pos, err)
        })
        .collect()
}
