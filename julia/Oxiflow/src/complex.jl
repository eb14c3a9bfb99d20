# Complex tensors (ComplexF32, ComplexF64: TF's complex64, complex128) and ADCME's fft and
# ifft. Ops: crates/oxiflow-core/src/ops/complex.rs.

export fft, ifft

"""
    fft(x)

The discrete Fourier transform of a tensor of rank 1, 2 or 3 over all its axes, as ADCME's
`fft` (TF's `tf.signal.fft`, `fft2d`, `fft3d`; ops `FFT`, `FFT2D`, `FFT3D`): for a vector
`X[k] = Σₙ x[n] exp(-2πi k n / N)`, Julia's `FFTW.fft(x)` for every rank. A real tensor is
converted to complex first (Float32 → ComplexF32, Float64 → ComplexF64; TF requires a
complex input). The result is complex; gradients flow back to a real or complex `x` (the
adjoint, `N` times the inverse transform). CPU only: complex tensors have no GPU kernels.
Errors: rank 0 or above 3 (ADCME's "FFT for d>=4 not supported"), an integer tensor.
"""
fft(x::Tensor) = spectral(x, "FFT", "fft")

"""
    ifft(x)

The inverse of [`fft`](@ref): `x[n] = (1/N) Σₖ X[k] exp(2πi k n / N)` over all axes of a
tensor of rank 1, 2 or 3 (ADCME's `ifft`; TF's `tf.signal.ifft`, `ifft2d`, `ifft3d`), complex
out. A real tensor is converted to complex first.
"""
ifft(x::Tensor) = spectral(x, "IFFT", "ifft")

function spectral(x::Tensor, op::String, fname::String)
    r = ndims(x)
    1 <= r <= 3 || invalid("$fname: a tensor of rank 1, 2 or 3 is needed (ADCME: FFT for d>=4 not supported), got shape $(size(x))")
    return add_op(r == 1 ? op : "$(op)$(r)D", [as_complex(x, fname)])
end

# `x` as a complex tensor: itself, or a real float tensor with imaginary part 0
function as_complex(x::Tensor, fname)
    T = x.dtype
    T <: Complex && return x
    T <: AbstractFloat || invalid("$fname: needs a float or complex tensor, got $T")
    return cast(x, Complex{T})
end

"""
    complex(re, im)

The complex tensor `re + im i` of two float tensors of one dtype (broadcast; TF's
`tf.complex`, op `Complex`): Float64 parts give ComplexF64. Gradients reach both parts.
"""
Base.complex(re::Tensor, im::Tensor) = add_op("Complex", [re, im])
Base.complex(re::Tensor, im::Union{Real,AbstractArray}) = complex(re, as_tensor(im, re))
Base.complex(re::Union{Real,AbstractArray}, im::Tensor) = complex(as_tensor(re, im), im)
Base.complex(re::Tensor) = as_complex(re, "complex")

"""
    real(z), imag(z), conj(z), abs(z), angle(z)

Parts of a complex tensor (TF's `tf.math.real`, `imag`, `conj`, `abs`, `angle`; ops `Real`,
`Imag`, `Conj`, `ComplexAbs`, `Angle`): `real`, `imag`, `abs` and `angle` (`atan2(im, re)`)
give the real type (ComplexF64 → Float64), `conj` the complex type. For a real tensor, as
TF's: `real` and `conj` return it, `imag` zeros of its shape, `abs` the `Abs` op, `angle` the
angle of `x + 0i`. `abs` computes
`hypot(re, im)` (no overflow in the squares). Gradients follow TF's convention for complex
tensors (`∂L/∂re + i ∂L/∂im`).
"""
Base.real(z::Tensor) = z.dtype <: Complex ? add_op("Real", [z]) : z
Base.imag(z::Tensor) = z.dtype <: Complex ? add_op("Imag", [z]) : add_op("ZerosLike", [z])
Base.conj(z::Tensor) = z.dtype <: Complex ? add_op("Conj", [z]) : z
Base.abs(z::Tensor) = add_op(z.dtype <: Complex ? "ComplexAbs" : "Abs", [z])
Base.angle(z::Tensor) = add_op("Angle", [as_complex(z, "angle")])
