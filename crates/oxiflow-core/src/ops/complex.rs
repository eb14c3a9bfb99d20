//! Complex numbers (TF's `complex64`, `complex128`): `Complex`, `Real`, `Imag`,
//! `ComplexAbs`, `Angle`, `Conj`, and the discrete Fourier transforms `FFT`, `IFFT`, `FFT2D`,
//! `IFFT2D`, `FFT3D`, `IFFT3D` over the innermost 1, 2 or 3 axes (TF's `spectral_ops`, which
//! ADCME's `fft`/`ifft` call). The transforms are `rustfft`'s; `IFFT*` divide by the number
//! of points, as TF's and NumPy's inverse transforms. CPU only: the placer finds no GPU
//! kernel for a complex tensor.
//!
//! The complex kernels' helpers and shape functions of the arithmetic ops (`Add`, `Sub`, `Mul`, `RealDiv`, `Neg`, `Exp`,
//! `AddN`, `Sum`) are here too; their gradients follow TF's convention for a real loss `L` of a
//! complex `z`: the gradient is `∂L/∂Re z + i ∂L/∂Im z`, so a linear map's gradient is its
//! adjoint (`Mul`'s is `dy * conj(y)`, `FFT`'s `N * IFFT(dy)`).

use super::grad_util::{need_dy, to_input_shape};
use super::math::def;
use super::zip::zip2_par;
use super::*;
use crate::tensor::Complex;
use ndarray::{ArcArray, Axis, IxDyn};
use rustfft::{Fft, FftDirection, FftNum, FftPlanner};
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

/// Broadcasting binary map over two complex inputs of one dtype: `Some(result)` when input 0
/// is complex, else `None` (the caller's real kernels apply).
macro_rules! zip_complex {
    ($ctx:expr, |$x:ident, $y:ident| $body:expr) => {
        match (&$ctx.inputs[0], &$ctx.inputs[1]) {
            (Tensor::C64(a), Tensor::C64(b)) => Some(
                super::zip::zip2_par($ctx, a, b, |$x: crate::tensor::Complex<f32>, $y: crate::tensor::Complex<f32>| $body).map(|o| smallvec![Tensor::C64(o)]),
            ),
            (Tensor::C128(a), Tensor::C128(b)) => Some(
                super::zip::zip2_par($ctx, a, b, |$x: crate::tensor::Complex<f64>, $y: crate::tensor::Complex<f64>| $body).map(|o| smallvec![Tensor::C128(o)]),
            ),
            _ => None,
        }
    };
}
pub(crate) use zip_complex;

/// Elementwise map over a complex input 0: `Some(result)` when it is complex, else `None`.
macro_rules! map_complex {
    ($ctx:expr, |$x:ident| $body:expr) => {
        match &$ctx.inputs[0] {
            Tensor::C64(a) => Some(Ok::<Outputs, crate::error::OxiflowError>(smallvec![Tensor::C64(a.mapv(|$x| $body).into_shared())])),
            Tensor::C128(a) => Some(Ok(smallvec![Tensor::C128(a.mapv(|$x| $body).into_shared())])),
            _ => None,
        }
    };
}
pub(crate) use map_complex;

// ---------------------------------------------------------------- shape functions

/// Errors unless `d` is numeric or complex: the arithmetic ops with complex kernels (`Add`,
/// `Sub`, `Mul`, `RealDiv`, `Neg`, `AddN`, `Sum`; TF registers them for complex64 and
/// complex128 too).
pub(crate) fn require_arith(ctx: &InferCtx, d: DType) -> Result<()> {
    if d == DType::Bool {
        Err(ctx.invalid("needs a numeric operand (Float32, Float64, Int32, Int64, ComplexF32, ComplexF64), got Bool"))
    } else {
        Ok(())
    }
}

/// Shape function of `Add`, `Sub`, `Mul`: broadcasting, numeric or complex.
pub(crate) fn infer_binary_arith(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let out = infer_binary_broadcast(ctx)?;
    require_arith(ctx, out[0].dtype)?;
    Ok(out)
}

/// Shape function of `Neg`: numeric or complex, output = input.
pub(crate) fn infer_unary_arith(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    require_arith(ctx, ctx.inputs[0].dtype)?;
    infer_same(ctx)
}

/// Shape function of `Exp`: float or complex, output = input.
pub(crate) fn infer_unary_float_or_complex(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    if !ctx.inputs[0].dtype.is_complex() {
        ctx.require_float(ctx.inputs[0].dtype)?;
    }
    infer_same(ctx)
}

/// Shape function of `RealDiv`: broadcasting, float or complex.
pub(crate) fn infer_binary_div(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let out = infer_binary_broadcast(ctx)?;
    if !out[0].dtype.is_complex() {
        ctx.require_float(out[0].dtype)?;
    }
    Ok(out)
}

fn require_complex(ctx: &InferCtx, d: DType) -> Result<()> {
    if d.is_complex() {
        Ok(())
    } else {
        Err(ctx.invalid(format!("needs a complex operand (ComplexF32, ComplexF64), got {d}")))
    }
}

/// `Complex(real, imag)`: two float tensors of one dtype, broadcast; output the complex type.
fn infer_complex(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    let out = infer_binary_broadcast(ctx)?;
    let c = out[0].dtype.complex_of().ok_or_else(|| ctx.invalid(format!("needs Float32 or Float64 parts, got {}", out[0].dtype)))?;
    Ok(vec![TensorType::new(c, out[0].shape.clone())])
}

/// `Real`, `Imag`, `ComplexAbs`, `Angle`: a complex input, its real type out.
fn infer_part(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    require_complex(ctx, ctx.inputs[0].dtype)?;
    Ok(vec![TensorType::new(ctx.inputs[0].dtype.real_part(), ctx.inputs[0].shape.clone())])
}

fn infer_same_complex(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    require_complex(ctx, ctx.inputs[0].dtype)?;
    infer_same(ctx)
}

/// The number of innermost axes the transform `op` works on (`FFT2D` → 2).
fn fft_rank(op: &str) -> usize {
    match op.trim_start_matches('I') {
        "FFT2D" => 2,
        "FFT3D" => 3,
        _ => 1,
    }
}

fn infer_fft(ctx: &InferCtx) -> Result<Vec<TensorType>> {
    require_complex(ctx, ctx.inputs[0].dtype)?;
    let k = fft_rank(ctx.op);
    let shape = &ctx.inputs[0].shape;
    if shape.rank() < k {
        return Err(ctx.invalid(format!("needs a tensor of rank at least {k}, got shape {shape}")));
    }
    infer_same(ctx)
}

// ---------------------------------------------------------------- kernels

fn kernel_complex(ctx: &KernelCtx) -> Result<Outputs> {
    Ok(smallvec![match (&ctx.inputs[0], &ctx.inputs[1]) {
        (Tensor::F32(a), Tensor::F32(b)) => Tensor::C64(zip2_par(ctx, a, b, Complex::new)?),
        (Tensor::F64(a), Tensor::F64(b)) => Tensor::C128(zip2_par(ctx, a, b, Complex::new)?),
        _ => return Err(super::math::no_kernel(ctx)),
    }])
}

/// Applies `$f` (a closure over `Complex<T>` giving `T`) to a complex input 0.
macro_rules! part {
    ($ctx:expr, |$x:ident| $body:expr) => {
        Ok(smallvec![match &$ctx.inputs[0] {
            Tensor::C64(a) => Tensor::F32(a.mapv(|$x| $body).into_shared()),
            Tensor::C128(a) => Tensor::F64(a.mapv(|$x| $body).into_shared()),
            _ => return Err(super::math::no_kernel($ctx)),
        }])
    };
}

fn kernel_real(ctx: &KernelCtx) -> Result<Outputs> {
    part!(ctx, |x| x.re)
}

fn kernel_imag(ctx: &KernelCtx) -> Result<Outputs> {
    part!(ctx, |x| x.im)
}

/// `|z|` without overflow or underflow in the squares (`hypot`, as `std::abs` of C++).
fn kernel_complex_abs(ctx: &KernelCtx) -> Result<Outputs> {
    part!(ctx, |x| x.re.hypot(x.im))
}

/// `atan2(im, re)`, in `[-π, π]`.
fn kernel_angle(ctx: &KernelCtx) -> Result<Outputs> {
    part!(ctx, |x| x.im.atan2(x.re))
}

fn kernel_conj(ctx: &KernelCtx) -> Result<Outputs> {
    map_complex!(ctx, |x| x.conj()).unwrap_or_else(|| Err(super::math::no_kernel(ctx)))
}

/// Most FFT plans kept: sizes beyond it clear the cache (a program uses a handful).
const MAX_PLANS: usize = 64;

/// `rustfft`'s plan for `n` points (planning a size that is not a power of two costs more
/// than a small transform), made once per element type, size and direction.
fn plan<T: FftNum>(n: usize, direction: FftDirection) -> Arc<dyn Fft<T>> {
    type Plans = HashMap<(TypeId, usize, bool), Box<dyn Any + Send + Sync>>;
    static PLANS: LazyLock<Mutex<Plans>> = LazyLock::new(Default::default);
    let key = (TypeId::of::<T>(), n, direction == FftDirection::Inverse);
    let mut plans = PLANS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(p) = plans.get(&key).and_then(|b| b.downcast_ref::<Arc<dyn Fft<T>>>()) {
        return p.clone();
    }
    let p = FftPlanner::<T>::new().plan_fft(n, direction);
    if plans.len() >= MAX_PLANS {
        plans.clear();
    }
    plans.insert(key, Box::new(p.clone()));
    p
}

/// The transform of `a` over its innermost `k` axes, one axis after another (the DFT is
/// separable), on a row-major copy: the last axis's rows are contiguous and transformed in
/// place, the other axes' lanes are copied out, transformed and written back.
fn fft_axes<T: FftNum>(a: &ArcArray<Complex<T>, IxDyn>, k: usize, direction: FftDirection) -> ArcArray<Complex<T>, IxDyn> {
    let mut out = a.as_standard_layout().into_owned();
    let rank = out.ndim();
    let mut points = 1usize;
    for ax in rank - k..rank {
        let n = out.shape()[ax];
        points *= n;
        if n <= 1 || out.is_empty() {
            continue;
        }
        let fft = plan::<T>(n, direction);
        let mut scratch = vec![Complex::new(T::zero(), T::zero()); fft.get_inplace_scratch_len()];
        if ax == rank - 1 {
            let rows = out.as_slice_mut().expect("a standard-layout array is one slice");
            fft.process_with_scratch(rows, &mut scratch);
            continue;
        }
        let mut buf = vec![Complex::new(T::zero(), T::zero()); n];
        for mut lane in out.lanes_mut(Axis(ax)) {
            buf.iter_mut().zip(lane.iter()).for_each(|(b, &x)| *b = x);
            fft.process_with_scratch(&mut buf, &mut scratch);
            lane.iter_mut().zip(&buf).for_each(|(x, &b)| *x = b);
        }
    }
    if direction == FftDirection::Inverse && points > 1 {
        let scale = T::one() / T::from_usize(points).expect("a count fits the float type");
        out.mapv_inplace(|x| x * scale);
    }
    out.into_shared()
}

fn kernel_fft(ctx: &KernelCtx) -> Result<Outputs> {
    let k = fft_rank(ctx.node.op.name);
    let dir = if ctx.node.op.name.starts_with('I') { FftDirection::Inverse } else { FftDirection::Forward };
    Ok(smallvec![match &ctx.inputs[0] {
        Tensor::C64(a) => Tensor::C64(fft_axes(a, k, dir)),
        Tensor::C128(a) => Tensor::C128(fft_axes(a, k, dir)),
        _ => return Err(super::math::no_kernel(ctx)),
    }])
}

// ---------------------------------------------------------------- gradients

/// A complex tensor with real part `re` and imaginary part 0.
fn as_complex(g: &mut Graph, re: Output) -> Result<Output> {
    let zero = g.op("ZerosLike", &[re])?;
    g.op("Complex", &[re, zero])
}

/// TF `_ComplexGrad`: `Real(dz)` and `Imag(dz)`, each summed to its input's shape.
fn grad_complex(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dz = need_dy!(grads, 2);
    let re = g.op("Real", &[dz])?;
    let im = g.op("Imag", &[dz])?;
    Ok(vec![Some(to_input_shape(g, node, re, 0)?), Some(to_input_shape(g, node, im, 1)?)])
}

/// TF `_RealGrad`: `dy + 0i`.
fn grad_real(g: &mut Graph, _: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    Ok(vec![Some(as_complex(g, dy)?)])
}

/// TF `_ImagGrad`: `0 + dy i`.
fn grad_imag(g: &mut Graph, _: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let zero = g.op("ZerosLike", &[dy])?;
    Ok(vec![Some(g.op("Complex", &[zero, dy])?)])
}

/// TF `_ComplexAbsGrad`: `dy z / |z|`, 0 where `z = 0` (`div_no_nan`).
fn grad_complex_abs(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let (z, r) = (node.inputs[0], Output::new(node.id, 0));
    let zero = g.op("ZerosLike", &[r])?;
    let nonzero = g.op("Greater", &[r, zero])?;
    let ones = g.op("OnesLike", &[r])?;
    let safe_r = g.op("SelectV2", &[nonzero, r, ones])?;
    let s = g.op("RealDiv", &[dy, safe_r])?;
    let s = g.op("SelectV2", &[nonzero, s, zero])?;
    let s = as_complex(g, s)?;
    Ok(vec![Some(g.op("Mul", &[s, z])?)])
}

/// TF `_AngleGrad`: `-(dy + 0i) / (im + re i)`, that is `dy (-im + re i) / |z|²`.
fn grad_angle(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let z = node.inputs[0];
    let (re, im) = (g.op("Real", &[z])?, g.op("Imag", &[z])?);
    let swapped = g.op("Complex", &[im, re])?;
    let d = as_complex(g, dy)?;
    let q = g.op("RealDiv", &[d, swapped])?;
    Ok(vec![Some(g.op("Neg", &[q])?)])
}

/// TF `_ConjGrad`: `conj(dz)`.
fn grad_conj(g: &mut Graph, _: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dz = need_dy!(grads, 1);
    Ok(vec![Some(g.op("Conj", &[dz])?)])
}

/// TF `_FFTGrad` and the others: the adjoint of the DFT over `N` points is `N` times the
/// inverse transform, and the inverse's adjoint the forward transform over `N`.
fn grad_fft(g: &mut Graph, node: &Node, grads: &[Option<Output>]) -> Result<Vec<Option<Output>>> {
    let dy = need_dy!(grads, 1);
    let op = node.op.name;
    let (k, inverse) = (fft_rank(op), op.starts_with('I'));
    let dims = g.shape_of(node.inputs[0])?.dims().to_vec();
    let inner = &dims[dims.len() - k..];
    if inner.contains(&crate::shape::UNKNOWN) {
        return Err(OxiflowError::Unimplemented(format!("gradient of {op} '{}': the transformed axes must have known sizes, got {inner:?}", node.name)));
    }
    let points = inner.iter().product::<usize>() as f64;
    let other = if inverse { op.trim_start_matches('I').to_string() } else { format!("I{op}") };
    let t = g.op(&other, &[dy])?;
    let d = g.dtype_of(dy)?;
    let scale = g.scalar(d, if inverse { 1.0 / points } else { points })?;
    Ok(vec![Some(g.op("Mul", &[t, scale])?)])
}

pub(crate) fn register(r: &mut Registry) {
    let one = Arity::Fixed(1);
    r.add(def("Complex", "Complex", Arity::Fixed(2), infer_complex, kernel_complex, GpuSupport::None, Some(grad_complex)));
    r.add(def("Real", "Real", one, infer_part, kernel_real, GpuSupport::None, Some(grad_real)));
    r.add(def("Imag", "Imag", one, infer_part, kernel_imag, GpuSupport::None, Some(grad_imag)));
    r.add(def("ComplexAbs", "ComplexAbs", one, infer_part, kernel_complex_abs, GpuSupport::None, Some(grad_complex_abs)));
    r.add(def("Angle", "Angle", one, infer_part, kernel_angle, GpuSupport::None, Some(grad_angle)));
    r.add(def("Conj", "Conj", one, infer_same_complex, kernel_conj, GpuSupport::None, Some(grad_conj)));
    for name in ["FFT", "IFFT", "FFT2D", "IFFT2D", "FFT3D", "IFFT3D"] {
        r.add(def(name, name, one, infer_fft, kernel_fft, GpuSupport::None, Some(grad_fft)));
    }
}
