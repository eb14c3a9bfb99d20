//! Host tensors: an n-dimensional array of one dtype, shared cheaply between nodes.

use crate::dtype::DType;
use crate::error::{OxiflowError, Result};
use crate::shape::Shape;
use crate::strided::{convert_strided, copy_strided, dense_strides, element_count, standard_copy, try_buffer_for};
use ndarray::{ArcArray, IxDyn, ShapeBuilder};
pub use num_complex::Complex;

/// A dense tensor, row-major (TensorFlow order). Cloning shares the buffer.
/// Host tensors hold an ndarray; emulated GPUs keep their tensors in host memory too, and a
/// copy between devices is a real copy of the buffer ([`Tensor::deep_copy`]). Tensors in a
/// real GPU's memory are [`Tensor::Device`]: only their device's kernels read them, and the
/// executor copies them to the host (through [`DeviceBuffer::to_host`]) at every edge that
/// leaves the device, so a host kernel never sees one.
#[derive(Clone, Debug)]
pub enum Tensor {
    /// TF `DT_FLOAT`.
    F32(ArcArray<f32, IxDyn>),
    /// TF `DT_DOUBLE`.
    F64(ArcArray<f64, IxDyn>),
    /// TF `DT_INT32`.
    I32(ArcArray<i32, IxDyn>),
    /// TF `DT_INT64`.
    I64(ArcArray<i64, IxDyn>),
    /// TF `DT_BOOL`.
    Bool(ArcArray<bool, IxDyn>),
    /// TF `DT_COMPLEX64`: two `f32`s.
    C64(ArcArray<Complex<f32>, IxDyn>),
    /// TF `DT_COMPLEX128`: two `f64`s.
    C128(ArcArray<Complex<f64>, IxDyn>),
    /// Resident in a device's own memory (a CUDA GPU, `oxiflow-cuda`).
    Device(DeviceTensor),
}

/// A buffer in a device's own memory, implemented by the device crate (`oxiflow-cuda`'s
/// allocator blocks). Dropping the last reference returns the memory to the device.
pub trait DeviceBuffer: Send + Sync + std::fmt::Debug + std::any::Any {
    /// Full name of the device holding the buffer.
    fn device(&self) -> &str;
    /// Address of the first byte in the device's address space (`CUdeviceptr`).
    fn ptr(&self) -> u64;
    /// Size in bytes.
    fn num_bytes(&self) -> usize;
    /// Copies `dims` elements of `dtype`, row-major from the buffer's start, into a new host
    /// tensor (waits for the device's pending work on the buffer). Errors name the device.
    fn to_host(&self, dtype: DType, dims: &[usize]) -> Result<Tensor>;
    /// For the owning device to recover its own buffer type.
    fn as_any(&self) -> &dyn std::any::Any;
}

/// A tensor in device memory: dtype, row-major dims and the shared buffer (views with other
/// dims, as `Reshape` makes, share it).
#[derive(Clone, Debug)]
pub struct DeviceTensor {
    /// Element type; Bool is one byte per element, as on the host side of the C ABI.
    pub dtype: DType,
    /// Row-major dimensions (empty for a scalar); `dims.product() * dtype.size_of()` bytes
    /// from the buffer's start are the tensor.
    pub dims: Vec<usize>,
    /// The device memory, shared by every tensor viewing it.
    pub buffer: std::sync::Arc<dyn DeviceBuffer>,
}

impl DeviceTensor {
    /// The tensor copied to the host.
    pub fn to_host(&self) -> Result<Tensor> {
        self.buffer.to_host(self.dtype, &self.dims)
    }
}

/// What [`with_array!`] does with a device-resident tensor: host code reached one, which
/// the executor's copies at device boundaries rule out (an internal invariant, not a user
/// error).
#[cold]
pub fn device_resident(d: &DeviceTensor) -> ! {
    panic!(
        "internal error: a {} tensor of shape {:?} resident on {} reached host code; it must be copied to the host first",
        d.dtype,
        d.dims,
        d.buffer.device()
    )
}

/// Memory order of a flat buffer crossing the C ABI: Julia arrays are column-major,
/// TensorFlow's are row-major. The element at Julia index `[i, j]` is the element at
/// tensor index `[i-1, j-1]` either way; only the flat order differs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    RowMajor,
    ColumnMajor,
}

/// Applies `$body` to the array inside a tensor of any dtype, binding it to `$a`.
#[macro_export]
macro_rules! with_array {
    ($t:expr, $a:ident => $body:expr) => {
        match $t {
            $crate::tensor::Tensor::F32($a) => $body,
            $crate::tensor::Tensor::F64($a) => $body,
            $crate::tensor::Tensor::I32($a) => $body,
            $crate::tensor::Tensor::I64($a) => $body,
            $crate::tensor::Tensor::Bool($a) => $body,
            $crate::tensor::Tensor::C64($a) => $body,
            $crate::tensor::Tensor::C128($a) => $body,
            $crate::tensor::Tensor::Device(d) => $crate::tensor::device_resident(d),
        }
    };
}

/// Element types a tensor can hold, with their [`DType`] and the wrapping into [`Tensor`].
pub trait Element: Copy + Send + Sync + 'static + std::fmt::Debug + PartialEq {
    const DTYPE: DType;
    fn wrap(a: ArcArray<Self, IxDyn>) -> Tensor;
    fn view(t: &Tensor) -> Option<&ArcArray<Self, IxDyn>>;
    /// Mutable access to the array when `t` holds `Self` (writing through it copies the
    /// buffer first if another tensor shares it: ndarray's copy-on-write).
    fn view_mut(t: &mut Tensor) -> Option<&mut ArcArray<Self, IxDyn>>;
    fn zero() -> Self;
}

macro_rules! element {
    ($t:ty, $v:ident, $d:ident, $z:expr) => {
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn wrap(a: ArcArray<Self, IxDyn>) -> Tensor {
                Tensor::$v(a)
            }
            fn view(t: &Tensor) -> Option<&ArcArray<Self, IxDyn>> {
                match t {
                    Tensor::$v(a) => Some(a),
                    _ => None,
                }
            }
            fn view_mut(t: &mut Tensor) -> Option<&mut ArcArray<Self, IxDyn>> {
                match t {
                    Tensor::$v(a) => Some(a),
                    _ => None,
                }
            }
            fn zero() -> Self {
                $z
            }
        }
    };
}
element!(f32, F32, Float32, 0.0);
element!(f64, F64, Float64, 0.0);
element!(i32, I32, Int32, 0);
element!(i64, I64, Int64, 0);
element!(bool, Bool, Bool, false);
element!(Complex<f32>, C64, Complex64, Complex::new(0.0, 0.0));
element!(Complex<f64>, C128, Complex128, Complex::new(0.0, 0.0));

impl Tensor {
    /// Element type.
    pub fn dtype(&self) -> DType {
        match self {
            Tensor::F32(_) => DType::Float32,
            Tensor::F64(_) => DType::Float64,
            Tensor::I32(_) => DType::Int32,
            Tensor::I64(_) => DType::Int64,
            Tensor::Bool(_) => DType::Bool,
            Tensor::C64(_) => DType::Complex64,
            Tensor::C128(_) => DType::Complex128,
            Tensor::Device(d) => d.dtype,
        }
    }

    /// Dimensions, row-major.
    pub fn dims(&self) -> &[usize] {
        match self {
            Tensor::Device(d) => &d.dims,
            _ => with_array!(self, a => a.shape()),
        }
    }

    /// `true` when the tensor lives in a device's own memory ([`Tensor::Device`]).
    pub fn is_device_resident(&self) -> bool {
        matches!(self, Tensor::Device(_))
    }

    /// This tensor in host memory: itself (shared) when it already is, else a copy from its
    /// device. Errors are the device's copy errors.
    pub fn to_host(&self) -> Result<Tensor> {
        match self {
            Tensor::Device(d) => d.to_host(),
            _ => Ok(self.clone()),
        }
    }

    /// Shape as a [`Shape`].
    pub fn shape(&self) -> Shape {
        Shape(self.dims().to_vec())
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Tensor::Device(d) => d.dims.iter().product(),
            _ => with_array!(self, a => a.len()),
        }
    }

    /// `true` when the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of element data (`len * dtype.size_of()`).
    pub fn num_bytes(&self) -> usize {
        self.len() * self.dtype().size_of()
    }

    /// Wraps an ndarray (any layout; kernels read it through ndarray's strides).
    pub fn from_array<T: Element>(a: ndarray::ArrayD<T>) -> Tensor {
        T::wrap(a.into_shared())
    }

    /// A rank-0 tensor.
    pub fn scalar<T: Element>(v: T) -> Tensor {
        T::wrap(ArcArray::from_elem(IxDyn(&[]), v))
    }

    /// A tensor of `dims` filled with `v`.
    pub fn full<T: Element>(dims: &[usize], v: T) -> Tensor {
        T::wrap(ArcArray::from_elem(IxDyn(dims), v))
    }

    /// A tensor of `dims` and `dtype` filled with the value `v` converted to `dtype`
    /// (`v != 0` for Bool, `v + 0i` for the complex types), row-major. Used for scalar constants in gradients.
    pub fn filled(dtype: DType, dims: &[usize], v: f64) -> Tensor {
        Tensor::filled_in(dtype, dims, v, Layout::RowMajor)
    }

    /// [`Tensor::filled`] stored in `layout` (`ZerosLike`/`OnesLike` of a column-major
    /// tensor are column-major, as their input).
    pub fn filled_in(dtype: DType, dims: &[usize], v: f64, layout: Layout) -> Tensor {
        fn fill<T: Element>(dims: &[usize], layout: Layout, v: T) -> Tensor {
            T::wrap(ArcArray::from_elem(IxDyn(dims).set_f(layout == Layout::ColumnMajor), v))
        }
        match dtype {
            DType::Float32 => fill(dims, layout, v as f32),
            DType::Float64 => fill(dims, layout, v),
            DType::Int32 => fill(dims, layout, v as i32),
            DType::Int64 => fill(dims, layout, v as i64),
            DType::Bool => fill(dims, layout, v != 0.0),
            DType::Complex64 => fill(dims, layout, Complex::new(v as f32, 0.0)),
            DType::Complex128 => fill(dims, layout, Complex::new(v, 0.0)),
        }
    }

    /// Builds a tensor from a flat vector in the given layout.
    /// Errors when `data.len()` is not the product of `dims`.
    pub fn from_vec<T: Element>(dims: &[usize], data: Vec<T>, layout: Layout) -> Result<Tensor> {
        let n: usize = dims.iter().product();
        if data.len() != n {
            return Err(OxiflowError::InvalidArgument(format!("tensor of shape {} needs {} elements, got {}", Shape(dims.to_vec()), n, data.len())));
        }
        let a = match layout {
            Layout::RowMajor => ndarray::ArrayD::from_shape_vec(IxDyn(dims), data),
            Layout::ColumnMajor => ndarray::ArrayD::from_shape_vec(IxDyn(dims).f(), data),
        }
        .map_err(|e| OxiflowError::Internal(e.to_string()))?;
        Ok(T::wrap(a.into_shared()))
    }

    /// Copies a flat buffer of `dtype` elements in `layout` into a new tensor (one `memcpy`;
    /// Bool bytes are read as `byte != 0`). The tensor keeps the buffer's layout: a
    /// column-major buffer becomes a column-major (Fortran order) tensor, not a transposed
    /// copy. Errors when `dims` has more elements than memory can address.
    ///
    /// # Safety
    /// `data` must point to `dims.product()` readable, aligned elements of `dtype`.
    pub unsafe fn from_raw(dtype: DType, dims: &[usize], data: *const u8, layout: Layout) -> Result<Tensor> {
        element_count(dims, dtype.size_of())?;
        Tensor::from_raw_strided(dtype, dims, data, &dense_strides(dims, layout == Layout::ColumnMajor))
    }

    /// Copies a strided buffer of `dtype` elements into a new tensor: element `[i, j, ...]`
    /// is at `data + (i * strides[0] + j * strides[1] + ...) * size` (strides in elements,
    /// possibly negative, as Julia's `strides` of a view or a transpose). A buffer dense in
    /// row-major order becomes a row-major tensor, anything else a column-major one; a
    /// dense buffer is one `memcpy`, others are copied in contiguous runs or cache-sized
    /// tiles ([`crate::strided`]). Bool bytes are read as `byte != 0`.
    /// Errors: `strides` not one per dimension, more elements than memory can address.
    ///
    /// # Safety
    /// Every element the strides reach from `data` must be readable and aligned for `dtype`
    /// (one byte per Bool).
    pub unsafe fn from_raw_strided(dtype: DType, dims: &[usize], data: *const u8, strides: &[isize]) -> Result<Tensor> {
        if strides.len() != dims.len() {
            return Err(OxiflowError::InvalidArgument(format!("{} strides given for a tensor of rank {}", strides.len(), dims.len())));
        }
        let n = element_count(dims, dtype.size_of())?;
        // row-major when the source already is (a memcpy), else Julia's column-major
        let row_major = dims.len() > 1 && same_steps(dims, strides, &dense_strides(dims, false));
        unsafe fn gather<S: Copy + 'static, T: Element>(
            dims: &[usize],
            n: usize,
            src: *const S,
            strides: &[isize],
            row_major: bool,
            f: impl Fn(S) -> T + Copy,
        ) -> Result<Tensor> {
            // a zero stride makes a large tensor of a small buffer: its copy may not fit
            let mut v: Vec<T> = try_buffer_for(n).ok_or_else(|| OxiflowError::OutOfMemory {
                op: "copy of".into(),
                node: "a fed or constant value".into(),
                shape: crate::shape::Shape(dims.to_vec()).to_string(),
                dtype: T::DTYPE.to_string(),
                device: "/device:CPU:0".into(),
                bytes: n.checked_mul(std::mem::size_of::<T>()),
            })?;
            if n > 0 {
                let dst = dense_strides(dims, !row_major);
                if std::mem::size_of::<S>() == std::mem::size_of::<T>() && std::any::TypeId::of::<S>() == std::any::TypeId::of::<T>() {
                    copy_strided(dims, src as *const T, strides, v.as_mut_ptr(), &dst);
                } else {
                    convert_strided(dims, src, strides, v.as_mut_ptr(), &dst, f);
                }
                // SAFETY: the copy wrote every one of the `n` elements of the dense destination.
                v.set_len(n);
            }
            Tensor::from_vec(dims, v, if row_major { Layout::RowMajor } else { Layout::ColumnMajor })
        }
        match dtype {
            DType::Float32 => gather(dims, n, data as *const f32, strides, row_major, |x: f32| x),
            DType::Float64 => gather(dims, n, data as *const f64, strides, row_major, |x: f64| x),
            DType::Int32 => gather(dims, n, data as *const i32, strides, row_major, |x: i32| x),
            DType::Int64 => gather(dims, n, data as *const i64, strides, row_major, |x: i64| x),
            DType::Bool => gather(dims, n, data, strides, row_major, |b: u8| b != 0),
            DType::Complex64 => gather(dims, n, data as *const Complex<f32>, strides, row_major, |x: Complex<f32>| x),
            DType::Complex128 => gather(dims, n, data as *const Complex<f64>, strides, row_major, |x: Complex<f64>| x),
        }
    }

    /// Writes the elements into `out` (room for `len()` elements of this dtype) in
    /// `layout`: one `memcpy` when the tensor's memory is already in that order, else a
    /// copy in contiguous runs or cache-sized tiles ([`crate::strided`]), never an
    /// element-by-element walk in logical order.
    ///
    /// # Safety
    /// `out` must point to `len()` writable, aligned elements of `self.dtype()`
    /// (one byte per element for Bool) that do not overlap the tensor.
    pub unsafe fn write_raw(&self, out: *mut u8, layout: Layout) {
        unsafe fn write<T: Copy>(a: &ArcArray<T, IxDyn>, out: *mut T, layout: Layout) {
            copy_strided(a.shape(), a.as_ptr(), a.strides(), out, &dense_strides(a.shape(), layout == Layout::ColumnMajor));
        }
        match self {
            Tensor::F32(a) => write(a, out as *mut f32, layout),
            Tensor::F64(a) => write(a, out as *mut f64, layout),
            Tensor::I32(a) => write(a, out as *mut i32, layout),
            Tensor::I64(a) => write(a, out as *mut i64, layout),
            // a `bool` is one byte, 0 or 1: what C reads
            Tensor::Bool(a) => write(a, out as *mut bool, layout),
            Tensor::C64(a) => write(a, out as *mut Complex<f32>, layout),
            Tensor::C128(a) => write(a, out as *mut Complex<f64>, layout),
            Tensor::Device(d) => device_resident(d),
        }
    }

    /// A copy with its own buffer, in standard layout: what a device-to-device copy makes.
    /// A host tensor only (device-resident tensors are copied by their device).
    pub fn deep_copy(&self) -> Tensor {
        with_array!(self, a => Element::wrap(standard_copy(&a.view()).into_shared()))
    }

    /// Values converted to `f64`, row-major (for tests and finite differences); of a
    /// complex tensor, the real parts ([`Tensor::to_complex_vec`] has both).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match self {
            Tensor::F32(a) => a.iter().map(|&x| x as f64).collect(),
            Tensor::F64(a) => a.iter().copied().collect(),
            Tensor::I32(a) => a.iter().map(|&x| x as f64).collect(),
            Tensor::I64(a) => a.iter().map(|&x| x as f64).collect(),
            Tensor::Bool(a) => a.iter().map(|&x| x as u8 as f64).collect(),
            Tensor::C64(a) => a.iter().map(|x| x.re as f64).collect(),
            Tensor::C128(a) => a.iter().map(|x| x.re).collect(),
            Tensor::Device(d) => d.to_host().map(|t| t.to_f64_vec()).unwrap_or_else(|e| panic!("{e}")),
        }
    }

    /// Values as `Complex<f64>`, row-major (imaginary parts 0 for real types; tests).
    pub fn to_complex_vec(&self) -> Vec<Complex<f64>> {
        match self {
            Tensor::C64(a) => a.iter().map(|x| Complex::new(x.re as f64, x.im as f64)).collect(),
            Tensor::C128(a) => a.iter().copied().collect(),
            _ => self.to_f64_vec().into_iter().map(|x| Complex::new(x, 0.0)).collect(),
        }
    }

    /// Borrow as an array of `T`; errors naming both dtypes when they differ.
    pub fn array<T: Element>(&self) -> Result<&ArcArray<T, IxDyn>> {
        T::view(self).ok_or_else(|| OxiflowError::Internal(format!("expected a {} tensor, got {}", T::DTYPE, self.dtype())))
    }

    /// Element-wise equality of dtype, shape and values (tests).
    pub fn same_as(&self, other: &Tensor) -> bool {
        self.dtype() == other.dtype() && self.dims() == other.dims() && self.to_complex_vec() == other.to_complex_vec()
    }
}

/// Whether `strides` step through `dims` as `dense` do, ignoring axes of length 1 (whose
/// stride is never used).
fn same_steps(dims: &[usize], strides: &[isize], dense: &[isize]) -> bool {
    dims.iter().zip(strides).zip(dense).all(|((&d, &s), &e)| d == 1 || s == e)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn column_major_round_trip_keeps_indices() {
        // Julia [1 2 3; 4 5 6] is stored column-major as 1 4 2 5 3 6
        let t = Tensor::from_vec(&[2, 3], vec![1.0f64, 4.0, 2.0, 5.0, 3.0, 6.0], Layout::ColumnMajor).unwrap();
        assert_eq!(t.to_f64_vec(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let mut out = vec![0.0f64; 6];
        unsafe { t.write_raw(out.as_mut_ptr() as *mut u8, Layout::ColumnMajor) };
        assert_eq!(out, vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
        let mut row = vec![0.0f64; 6];
        unsafe { t.write_raw(row.as_mut_ptr() as *mut u8, Layout::RowMajor) };
        assert_eq!(row, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    }
    #[test]
    fn strided_buffers_keep_indices_and_pick_a_dense_layout() {
        // [1 2 3; 4 5 6] read through three different strides
        let row = [1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0];
        let t = unsafe { Tensor::from_raw_strided(DType::Float64, &[2, 3], row.as_ptr() as *const u8, &[3, 1]) }.unwrap();
        assert!(t.array::<f64>().unwrap().is_standard_layout(), "a row-major buffer is copied as it is");
        assert_eq!(t.to_f64_vec(), row);
        let col = [1.0f64, 4.0, 2.0, 5.0, 3.0, 6.0];
        let t = unsafe { Tensor::from_raw_strided(DType::Float64, &[2, 3], col.as_ptr() as *const u8, &[1, 2]) }.unwrap();
        assert!(t.array::<f64>().unwrap().t().is_standard_layout(), "a column-major buffer stays column-major");
        assert_eq!(t.to_f64_vec(), row);
        // every other element, backwards: element [i, j] at 10 - 2 * (i + 2 j)
        let wide: Vec<i32> = (0..11).collect();
        let t = unsafe { Tensor::from_raw_strided(DType::Int32, &[2, 3], wide.as_ptr().add(10) as *const u8, &[-2, -4]) }.unwrap();
        assert_eq!(t.to_f64_vec(), vec![10.0, 6.0, 2.0, 8.0, 4.0, 0.0]);
        let bytes = [0u8, 2, 1, 0];
        let t = unsafe { Tensor::from_raw_strided(DType::Bool, &[2, 2], bytes.as_ptr(), &[1, 2]) }.unwrap();
        assert_eq!(t.to_f64_vec(), vec![0.0, 1.0, 1.0, 0.0]);
        assert!(unsafe { Tensor::from_raw_strided(DType::Bool, &[2, 2], bytes.as_ptr(), &[1]) }.is_err());
        let mut out = [0u8; 4];
        unsafe { t.write_raw(out.as_mut_ptr(), Layout::ColumnMajor) };
        assert_eq!(out, [0, 1, 1, 0], "Bool goes back as 0/1 bytes");
    }

    #[test]
    fn deep_copy_of_a_column_major_tensor_is_row_major() {
        let t = Tensor::from_vec(&[2, 3], vec![1i64, 4, 2, 5, 3, 6], Layout::ColumnMajor).unwrap();
        let c = t.deep_copy();
        assert!(c.array::<i64>().unwrap().is_standard_layout());
        assert!(c.same_as(&t));
    }

    #[test]
    fn wrong_element_count_is_an_error() {
        assert!(Tensor::from_vec(&[2, 2], vec![1.0f64; 3], Layout::RowMajor).is_err());
    }
}
