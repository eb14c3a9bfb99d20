//! Element types of tensors.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Element type of a tensor. The discriminants are TensorFlow's `DataType` enum values
/// (`types.proto`: `DT_FLOAT = 1`, `DT_DOUBLE = 2`, `DT_INT32 = 3`, `DT_INT64 = 9`,
/// `DT_BOOL = 10`), which is also the code passed across the C ABI.
///
/// ADCME's rule: a tensor built from a Julia value takes that value's `eltype`
/// (`Float64 -> Float64`, `Int64 -> Int64`, ...; `ADCME.DTYPE`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[repr(i32)]
pub enum DType {
    Float32 = 1,
    Float64 = 2,
    Int32 = 3,
    Int64 = 9,
    Bool = 10,
}

impl DType {
    /// All supported element types.
    pub const ALL: [DType; 5] = [DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool];
    /// Floating-point types (the ones gradients flow through).
    pub const FLOATS: [DType; 2] = [DType::Float32, DType::Float64];

    /// Size of one element in bytes.
    pub fn size_of(self) -> usize {
        match self {
            DType::Float32 | DType::Int32 => 4,
            DType::Float64 | DType::Int64 => 8,
            DType::Bool => 1,
        }
    }

    /// `true` for `Float32` and `Float64`.
    pub fn is_float(self) -> bool {
        matches!(self, DType::Float32 | DType::Float64)
    }

    /// TensorFlow's name (`float32`, `float64`, `int32`, `int64`, `bool`).
    pub fn tf_name(self) -> &'static str {
        match self {
            DType::Float32 => "float32",
            DType::Float64 => "float64",
            DType::Int32 => "int32",
            DType::Int64 => "int64",
            DType::Bool => "bool",
        }
    }

    /// TensorFlow `DataType` code (see the type docs).
    pub fn code(self) -> i32 {
        self as i32
    }

    /// Inverse of [`DType::code`]; `None` for unknown codes.
    pub fn from_code(code: i32) -> Option<DType> {
        DType::ALL.iter().copied().find(|d| d.code() == code)
    }

    /// Parses a TF name (`float64`), a Julia name (`Float64`) or a TF enum name (`DT_DOUBLE`).
    pub fn parse(s: &str) -> Option<DType> {
        Some(match s {
            "float32" | "Float32" | "DT_FLOAT" | "float" => DType::Float32,
            "float64" | "Float64" | "DT_DOUBLE" | "double" => DType::Float64,
            "int32" | "Int32" | "DT_INT32" => DType::Int32,
            "int64" | "Int64" | "DT_INT64" => DType::Int64,
            "bool" | "Bool" | "DT_BOOL" => DType::Bool,
            _ => return None,
        })
    }
}

impl fmt::Display for DType {
    /// Displays as the Julia type name (`Float64`), which is what Oxiflow's users write.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            DType::Float32 => "Float32",
            DType::Float64 => "Float64",
            DType::Int32 => "Int32",
            DType::Int64 => "Int64",
            DType::Bool => "Bool",
        };
        f.write_str(s)
    }
}
