//! Op attributes and declared inputs: TF's `AttrValue`, `OpDef.AttrDef` and
//! `OpDef.ArgDef`, the `attrs!`/`inputs!` macros that registrations use, and typed attribute
//! access whose errors name the op and the attribute ([`AttrsExt`]).

use crate::dtype::DType;
use crate::error::{OxiflowError, Result};
use crate::shape::Shape;
use crate::tensor::Tensor;
use std::collections::BTreeMap;
use std::fmt;

/// An attribute value (TF's `AttrValue`).
#[derive(Clone, Debug)]
pub enum AttrValue {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    Ints(Vec<i64>),
    Type(DType),
    Shape(Vec<usize>),
    Tensor(Tensor),
    /// The program of a `_FusedElementwise` step (made by the graph optimizer, never in a
    /// graph).
    Program(std::sync::Arc<super::fused::Program>),
    /// A function (TF's `func` attr): a branch of `If` ([`crate::function::Function`]).
    Func(std::sync::Arc<crate::function::Function>),
}

/// Attributes of a node, by name.
pub type Attrs = BTreeMap<String, AttrValue>;

/// `From<T> for AttrValue` for each `T => Variant`: the value wrapped as it is.
macro_rules! attr_from {
    ($($t:ty => $variant:ident),* $(,)?) => {
        $(impl From<$t> for AttrValue {
            fn from(v: $t) -> Self {
                AttrValue::$variant(v)
            }
        })*
    };
}
attr_from!(i64 => Int, f64 => Float, bool => Bool, Vec<i64> => Ints, DType => Type, Tensor => Tensor);

impl From<&str> for AttrValue {
    fn from(v: &str) -> Self {
        AttrValue::Str(v.to_string())
    }
}

impl fmt::Display for AttrValue {
    /// Short text form, as device functions see attrs (`NodeDef.attr`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttrValue::Int(v) => write!(f, "{v}"),
            AttrValue::Float(v) => write!(f, "{v}"),
            AttrValue::Bool(v) => write!(f, "{v}"),
            AttrValue::Str(v) => write!(f, "{v}"),
            AttrValue::Ints(v) => write!(f, "{v:?}"),
            AttrValue::Type(v) => write!(f, "{}", v.tf_name()),
            AttrValue::Shape(v) => write!(f, "{}", Shape(v.clone())),
            AttrValue::Tensor(t) => write!(f, "<{} tensor of shape {}>", t.dtype(), t.shape()),
            AttrValue::Program(p) => write!(f, "<fused program of {} ops>", p.replaced.len()),
            AttrValue::Func(func) => write!(f, "{func}"),
        }
    }
}

/// The type of an op attribute (TF's `OpDef.AttrDef.type`: `int`, `float`, `bool`,
/// `string`, `type`, `shape`, `list(int)`, `tensor`, `func`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AttrKind {
    /// One `i64` (`axis` of `ArgMax`, `seed`).
    Int,
    /// One `f64` (`alpha`); an integer is widened.
    Float,
    /// `true`/`false` (`transpose_a`, `keep_dims`).
    Bool,
    /// Text (`VariableV2`'s `container`).
    Str,
    /// A dtype (`DstT`, `dtype`); TF's name (`"float32"`, `"DT_FLOAT"`) where text is given.
    Type,
    /// Non-negative dims.
    Shape,
    /// A list of ints (`axis`, `perm`); a single int is read as a list of one.
    Ints,
    /// A host tensor (`Const`'s `value`).
    Tensor,
    /// A function (`If`'s `then_branch`).
    Func,
}

impl AttrKind {
    /// TF's name of the type (`list(int)`), for messages.
    pub fn tf_name(self) -> &'static str {
        match self {
            AttrKind::Int => "int",
            AttrKind::Float => "float",
            AttrKind::Bool => "bool",
            AttrKind::Str => "string",
            AttrKind::Type => "type",
            AttrKind::Shape => "shape",
            AttrKind::Ints => "list(int)",
            AttrKind::Tensor => "tensor",
            AttrKind::Func => "func",
        }
    }

    /// Whether `v` is a value of this type, with the readings `AttrsExt` accepts (an int for
    /// a float or a list, a dtype's TF name for a type, non-negative ints for a shape, a
    /// shape for a list). TF's `ValidateNodeDef` checks the same when a node is added.
    pub fn accepts(self, v: &AttrValue) -> bool {
        match (self, v) {
            (AttrKind::Int, AttrValue::Int(_)) | (AttrKind::Bool, AttrValue::Bool(_)) | (AttrKind::Str, AttrValue::Str(_)) => true,
            (AttrKind::Float, AttrValue::Float(_) | AttrValue::Int(_)) => true,
            (AttrKind::Type, AttrValue::Type(_)) => true,
            (AttrKind::Type, AttrValue::Str(s)) => DType::parse(s).is_some(),
            (AttrKind::Shape, AttrValue::Shape(_)) => true,
            (AttrKind::Shape, AttrValue::Ints(v)) => v.iter().all(|&d| d >= 0),
            (AttrKind::Ints, AttrValue::Ints(_) | AttrValue::Int(_) | AttrValue::Shape(_)) => true,
            (AttrKind::Tensor, AttrValue::Tensor(_)) => true,
            (AttrKind::Func, AttrValue::Func(_)) => true,
            _ => false,
        }
    }
}

/// The default of an attribute a node may leave out (TF's `AttrDef.default_value`), where
/// code outside the op's own kernel needs it (the CUDA training launcher passes the op's
/// bool attributes to the kernel).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AttrDefault {
    /// The default of a `Bool` attribute (`update_slots`: `true`).
    Bool(bool),
}

/// One attribute an op takes, by name and type (TF's `OpDef.AttrDef`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct AttrDef {
    /// TF's attribute name (`keep_dims`, `DstT`).
    pub name: &'static str,
    /// Its type.
    pub kind: AttrKind,
    /// `None`: no default, or the zero of its type (`false`, `0`, empty).
    pub default: Option<AttrDefault>,
}

/// A `&'static [AttrDef]` from `"name" => Kind` pairs, a default after `=` where it is not
/// the type's zero, for an op's registration:
/// `.with_attrs(attrs!["use_locking" => Bool, "update_slots" => Bool = true])`.
macro_rules! attrs {
    ($($name:literal => $kind:ident $(= $default:literal)?),* $(,)?) => {{
        const ATTRS: &[$crate::ops::AttrDef] = &[$($crate::ops::AttrDef {
            name: $name,
            kind: $crate::ops::AttrKind::$kind,
            default: $crate::ops::attr_default!($kind $(, $default)?),
        }),*];
        ATTRS
    }};
}
pub(crate) use attrs;

/// The `default` of an [`AttrDef`] in [`attrs!`]: `None`, or `Some(AttrDefault::Kind(v))`.
macro_rules! attr_default {
    ($kind:ident) => {
        None
    };
    ($kind:ident, $default:literal) => {
        Some($crate::ops::AttrDefault::$kind($default))
    };
}
pub(crate) use attr_default;

/// What an input of an op holds, as far as code outside its kernel must know (TF's
/// `OpDef.input_arg`; the roles let one shape function and one CUDA launcher serve every
/// training op).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum InputRole {
    /// Any tensor; the op's shape function says which.
    Tensor,
    /// A variable the op updates in place (TF's `Ref(T)`: a training op's variable, first,
    /// and its slots, of the variable's dtype and shape); these are the op's `ref_inputs`.
    Ref,
    /// A tensor of the first input's dtype and shape (a training op's slots and gradient).
    LikeFirst,
    /// A rank-0 tensor of the first input's dtype (a training op's hyperparameters).
    Scalar,
    /// A rank-0 Int64 (`ApplyAdagradDA`'s `global_step`).
    Int64Scalar,
}

/// One named input of an op (TF's `OpDef.ArgDef`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct InputDef {
    /// TF's input name (`var`, `grad`).
    pub name: &'static str,
    /// What it holds.
    pub role: InputRole,
}

/// A `&'static [InputDef]` from `"name" => Role` pairs, in the op's input order:
/// `.with_inputs(inputs!["var" => Ref, "alpha" => Scalar, "delta" => LikeFirst])`.
macro_rules! inputs {
    ($($name:literal => $role:ident),* $(,)?) => {{
        const INPUTS: &[$crate::ops::InputDef] = &[$($crate::ops::InputDef { name: $name, role: $crate::ops::InputRole::$role }),*];
        INPUTS
    }};
}
pub(crate) use inputs;

/// Typed attribute access with errors that name the op and the attribute.
pub trait AttrsExt {
    /// Int attr `k` of op `op`; `InvalidArgument` naming both when missing or not an int.
    fn get_int(&self, op: &str, k: &str) -> Result<i64>;
    /// Bool attr `k`, or `default` when absent (TF's attr defaults, e.g. `transpose_a`);
    /// `InvalidArgument` naming the op and the attribute when it is not a bool (a string
    /// `"yes"` was once read as `false`). Ops read their bool attrs when the node is built,
    /// so kernels see only checked values.
    fn get_bool_or(&self, op: &str, k: &str, default: bool) -> Result<bool>;
    /// List-of-ints attr (`axis`, `perm`); a single int or a shape is accepted too.
    fn get_ints(&self, op: &str, k: &str) -> Result<Vec<i64>>;
    /// Dtype attr (`DstT`, `dtype`), as a dtype or its TF name.
    fn get_type(&self, op: &str, k: &str) -> Result<DType>;
    /// Shape attr (non-negative dims).
    fn get_shape(&self, op: &str, k: &str) -> Result<Vec<usize>>;
    /// Shape attr whose dimensions may be [`crate::shape::UNKNOWN`] (`Placeholder`,
    /// `Reshape`'s `-1`).
    fn get_partial_shape(&self, op: &str, k: &str) -> Result<Vec<usize>>;
    /// Tensor attr (`Const`'s `value`).
    fn get_tensor(&self, op: &str, k: &str) -> Result<&Tensor>;
    /// Float attr (`alpha`); an int is widened.
    fn get_float(&self, op: &str, k: &str) -> Result<f64>;
    /// String attr `k` (`padding`, `template`), `None` when absent; `InvalidArgument` naming
    /// op and attr when it holds another type.
    fn get_str_opt(&self, op: &str, k: &str) -> Result<Option<&str>>;
}

fn missing(op: &str, k: &str, want: &str) -> OxiflowError {
    OxiflowError::InvalidArgument(format!("{op}: attribute '{k}' ({want}) is missing or has the wrong type"))
}

impl AttrsExt for Attrs {
    fn get_str_opt(&self, op: &str, k: &str) -> Result<Option<&str>> {
        match self.get(k) {
            None => Ok(None),
            Some(AttrValue::Str(s)) => Ok(Some(s.as_str())),
            Some(other) => Err(OxiflowError::InvalidArgument(format!("{op}: attr '{k}' must be a string, got {other}"))),
        }
    }
    fn get_int(&self, op: &str, k: &str) -> Result<i64> {
        match self.get(k) {
            Some(AttrValue::Int(v)) => Ok(*v),
            _ => Err(missing(op, k, "int")),
        }
    }
    fn get_bool_or(&self, op: &str, k: &str, default: bool) -> Result<bool> {
        match self.get(k) {
            Some(AttrValue::Bool(v)) => Ok(*v),
            None => Ok(default),
            Some(other) => Err(OxiflowError::InvalidArgument(format!("{op}: attr '{k}' must be a bool, got {other:?}"))),
        }
    }
    fn get_ints(&self, op: &str, k: &str) -> Result<Vec<i64>> {
        match self.get(k) {
            Some(AttrValue::Ints(v)) => Ok(v.clone()),
            Some(AttrValue::Int(v)) => Ok(vec![*v]),
            Some(AttrValue::Shape(v)) => Ok(v.iter().map(|&d| d as i64).collect()),
            _ => Err(missing(op, k, "list of ints")),
        }
    }
    fn get_type(&self, op: &str, k: &str) -> Result<DType> {
        match self.get(k) {
            Some(AttrValue::Type(v)) => Ok(*v),
            Some(AttrValue::Str(s)) => DType::parse(s).ok_or_else(|| missing(op, k, "dtype")),
            _ => Err(missing(op, k, "dtype")),
        }
    }
    fn get_shape(&self, op: &str, k: &str) -> Result<Vec<usize>> {
        match self.get(k) {
            Some(AttrValue::Shape(v)) if v.contains(&crate::shape::UNKNOWN) => {
                Err(OxiflowError::InvalidArgument(format!("{op}: attribute '{k}' has an unknown dimension (-1), which {op} does not accept")))
            }
            Some(AttrValue::Shape(v)) => Ok(v.clone()),
            Some(AttrValue::Ints(v)) if v.iter().all(|&d| d >= 0) => Ok(v.iter().map(|&d| d as usize).collect()),
            _ => Err(missing(op, k, "shape")),
        }
    }
    fn get_partial_shape(&self, op: &str, k: &str) -> Result<Vec<usize>> {
        match self.get(k) {
            Some(AttrValue::Shape(v)) => Ok(v.clone()),
            _ => self.get_shape(op, k),
        }
    }
    fn get_tensor(&self, op: &str, k: &str) -> Result<&Tensor> {
        match self.get(k) {
            Some(AttrValue::Tensor(t)) => Ok(t),
            _ => Err(missing(op, k, "tensor")),
        }
    }
    fn get_float(&self, op: &str, k: &str) -> Result<f64> {
        match self.get(k) {
            Some(AttrValue::Float(v)) => Ok(*v),
            Some(AttrValue::Int(v)) => Ok(*v as f64),
            _ => Err(missing(op, k, "float")),
        }
    }
}
