//! Graph-building conveniences on [`Graph`], used by gradient functions, composites and
//! tests. Each returns output 0 of the new node.

use crate::dtype::DType;
use crate::error::Result;
use crate::graph::{Graph, NodeSpec, Output};
use crate::ops::AttrValue;
use crate::shape::Shape;
use crate::tensor::Tensor;

impl Graph {
    /// Adds `op` with `inputs` and no attrs; returns output 0.
    pub fn op(&mut self, op: &str, inputs: &[Output]) -> Result<Output> {
        Ok(Output::new(self.add_node(NodeSpec::new(op, inputs))?, 0))
    }

    /// Adds a fully described node; returns output 0.
    pub fn op_spec(&mut self, spec: NodeSpec) -> Result<Output> {
        Ok(Output::new(self.add_node(spec)?, 0))
    }

    /// `Const` holding `value`.
    pub fn constant(&mut self, value: Tensor) -> Result<Output> {
        let dtype = value.dtype();
        self.op_spec(NodeSpec::new("Const", &[]).attr("value", value).attr("dtype", dtype))
    }

    /// Scalar `Const` of `dtype` holding `v` (converted).
    pub fn scalar(&mut self, dtype: DType, v: f64) -> Result<Output> {
        self.constant(Tensor::filled(dtype, &[], v))
    }

    /// `Placeholder` of `dtype` and `shape`, named `name` or `Placeholder`.
    /// A dimension of `shape` may be [`crate::shape::UNKNOWN`] (fed any size).
    pub fn placeholder(&mut self, dtype: DType, shape: &[usize], name: Option<&str>) -> Result<Output> {
        let mut spec = NodeSpec::new("Placeholder", &[]).attr("dtype", dtype).attr("shape", AttrValue::Shape(shape.to_vec()));
        spec.name = name.map(str::to_string);
        self.op_spec(spec)
    }

    /// Static shape of an output.
    pub fn shape_of(&self, o: Output) -> Result<Shape> {
        Ok(self.output_type(o)?.shape.clone())
    }

    /// Static dtype of an output.
    pub fn dtype_of(&self, o: Output) -> Result<DType> {
        Ok(self.output_type(o)?.dtype)
    }
}
