//! Element types of tensors.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Element type of a tensor. The discriminants are TensorFlow's `DataType` enum values
/// (`types.proto`: `DT_FLOAT = 1`, `DT_DOUBLE = 2`, `DT_INT32 = 3`, `DT_COMPLEX64 = 8`,
/// `DT_INT64 = 9`, `DT_BOOL = 10`, `DT_COMPLEX128 = 18`), which is also the code passed
/// across the C ABI. A complex element is its real part then its imaginary part (C's
/// `float complex`, Julia's `ComplexF32`/`ComplexF64`, `num_complex::Complex`).
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
    /// Two `f32`s: TF's `complex64`, Julia's `ComplexF32`.
    Complex64 = 8,
    /// Two `f64`s: TF's `complex128`, Julia's `ComplexF64`.
    Complex128 = 18,
}

impl DType {
    /// All supported element types.
    pub const ALL: [DType; 7] = [DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool, DType::Complex64, DType::Complex128];
    /// Floating-point types (the ones gradients flow through).
    pub const FLOATS: [DType; 2] = [DType::Float32, DType::Float64];

    /// Size of one element in bytes.
    pub fn size_of(self) -> usize {
        match self {
            DType::Float32 | DType::Int32 => 4,
            DType::Float64 | DType::Int64 | DType::Complex64 => 8,
            DType::Complex128 => 16,
            DType::Bool => 1,
        }
    }

    /// `true` for `Float32` and `Float64`.
    pub fn is_float(self) -> bool {
        matches!(self, DType::Float32 | DType::Float64)
    }

    /// `true` for `Complex64` and `Complex128`.
    pub fn is_complex(self) -> bool {
        matches!(self, DType::Complex64 | DType::Complex128)
    }

    /// Whether gradients flow through tensors of this dtype: the float and complex types
    /// (TF's `_IsBackpropagatable`).
    pub fn is_differentiable(self) -> bool {
        self.is_float() || self.is_complex()
    }

    /// The real type of a complex one's parts (`Complex128 -> Float64`); other types map to
    /// themselves.
    pub fn real_part(self) -> DType {
        match self {
            DType::Complex64 => DType::Float32,
            DType::Complex128 => DType::Float64,
            d => d,
        }
    }

    /// The complex type with parts of this float type (`Float64 -> Complex128`); `None` for
    /// non-float types.
    pub fn complex_of(self) -> Option<DType> {
        match self {
            DType::Float32 => Some(DType::Complex64),
            DType::Float64 => Some(DType::Complex128),
            _ => None,
        }
    }

    /// TensorFlow's name (`float32`, `float64`, `int32`, `int64`, `bool`, `complex64`,
    /// `complex128`).
    pub fn tf_name(self) -> &'static str {
        match self {
            DType::Float32 => "float32",
            DType::Float64 => "float64",
            DType::Int32 => "int32",
            DType::Int64 => "int64",
            DType::Bool => "bool",
            DType::Complex64 => "complex64",
            DType::Complex128 => "complex128",
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

    /// Parses a TF name (`float64`), a Julia name (`Float64`, `ComplexF64` or its `string`,
    /// `Complex{Float64}`) or a TF enum name (`DT_DOUBLE`).
    pub fn parse(s: &str) -> Option<DType> {
        Some(match s {
            "float32" | "Float32" | "DT_FLOAT" | "float" => DType::Float32,
            "float64" | "Float64" | "DT_DOUBLE" | "double" => DType::Float64,
            "int32" | "Int32" | "DT_INT32" => DType::Int32,
            "int64" | "Int64" | "DT_INT64" => DType::Int64,
            "bool" | "Bool" | "DT_BOOL" => DType::Bool,
            "complex64" | "ComplexF32" | "Complex{Float32}" | "DT_COMPLEX64" => DType::Complex64,
            "complex128" | "ComplexF64" | "Complex{Float64}" | "DT_COMPLEX128" | "complex" => DType::Complex128,
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
            DType::Complex64 => "ComplexF32",
            DType::Complex128 => "ComplexF64",
        };
        f.write_str(s)
    }
}
