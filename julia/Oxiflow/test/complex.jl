# Complex tensors and ADCME's fft/ifft. Oracles: Julia's complex arithmetic, the DFT summed
# term by term (FFTW is not a dependency), and central finite differences of real losses
# built through complex ops.

@testset "complex tensors and fft" begin

# Julia's fft over every axis, summed term by term
function dft(x::AbstractArray, inverse=false)
    s = inverse ? 1 : -1
    N = length(x)
    y = [sum(x[J] * cis(s * 2π * sum((Tuple(I)[d] - 1) * (Tuple(J)[d] - 1) / size(x, d) for d in 1:ndims(x)))
             for J in CartesianIndices(x)) for I in CartesianIndices(x)]
    return inverse ? y ./ N : y
end

@testset "values cross the ABI and arithmetic follows Julia's" begin
    reset_default_graph()
    a = [1.0+2im 3.0-1im; -0.5im 2.0+0im]
    b = ComplexF64[0.5-1im, 2.0+3im]
    s = Session()
    A = constant(a)
    @test A.dtype == ComplexF64 && run(s, A) == a
    @test run(s, constant(ComplexF32[1 + 1im])) == ComplexF32[1 + 1im]
    p = placeholder(ComplexF64; shape=[2])
    @test run(s, p .* 2.0, p => b) == b .* 2
    @test run(s, A + A) == a + a && run(s, A - 1.0) == a .- 1 && run(s, -A) == -a
    @test run(s, A .* constant(a)) ≈ a .* a && run(s, A ./ 2im) ≈ a ./ 2im
    @test run(s, sum(A)) ≈ sum(a) && run(s, sum(A; dims=1)) ≈ vec(sum(a; dims=1))
    @test run(s, real(A)) == real(a) && run(s, imag(A)) == imag(a) && run(s, conj(A)) == conj(a)
    @test run(s, abs(A)) ≈ abs.(a) && run(s, angle(A)) ≈ angle.(a)
    @test run(s, complex(constant([1.0, 2.0]), constant([3.0, -4.0]))) == [1 + 3im, 2 - 4im]
    @test run(s, cast(constant([1.5, -2.0]), ComplexF64)) == [1.5 + 0im, -2.0 + 0im]
    @test run(s, cast(A, Float64)) == real(a)          # TF's Cast keeps the real part
    x = constant([1.0, -2.0])
    @test real(x) === x && conj(x) === x && run(s, imag(x)) == [0.0, 0.0]
    # ops without complex kernels refuse at build time, naming the op
    @test run(s, exp(A)) ≈ exp.(a)
    e = try; log(A); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("Log", e.msg) && occursin("ComplexF64", e.msg)
    @test_throws OxiflowError max(A, A)
    @test_throws OxiflowError constant(1im)                 # Complex{Int64} has no dtype
end

@testset "fft and ifft against the DFT, ranks 1 to 3" begin
    reset_default_graph()
    s = Session()
    for dims in ((8,), (7,), (3, 5), (4, 2, 3))
        x = reshape([sin(0.3k) + 1im * cos(0.7k) for k in 1:prod(dims)], dims)
        X = fft(constant(x))
        @test X.dtype == ComplexF64
        @test run(s, X) ≈ dft(x) rtol = 1e-12
        @test run(s, ifft(constant(x))) ≈ dft(x, true) rtol = 1e-12
        @test run(s, ifft(X)) ≈ x rtol = 1e-12
    end
    # a real tensor is made complex first; Float32 gives ComplexF32
    r = [0.0, 1.0, 0.0, -1.0]
    @test run(s, fft(constant(r))) ≈ dft(complex.(r))
    @test fft(constant(Float32.(r))).dtype == ComplexF32
    @test_throws OxiflowError fft(constant(ones(2, 2, 2, 2)))
    @test_throws OxiflowError fft(constant([1, 2]))
    # the spectral derivative of the user guide
    t = 2π * (0:7) / 8
    u = constant(sin.(t))
    k = [0, 1, 2, 3, -4, -3, -2, -1]
    du = real(ifft(fft(u) .* (1im .* k)))
    @test run(s, du) ≈ cos.(t) atol = 1e-12
end

@testset "gradients of real losses through complex ops" begin
    reset_default_graph()
    x0 = [0.3, -1.1, 0.8, 0.2, -0.4, 0.9]
    xr = placeholder(Float64; shape=[6])
    k = constant(ComplexF64[1, 2im, -1, 0.5, 1 - 1im, 3])
    z = fft(complex(xr, xr .* xr)) .* k
    loss = sum(abs(z)) + sum(angle(conj(ifft(z)) + 2.0)) + sum(real(z) .* imag(z))
    g = gradients(loss, xr)
    s = Session()
    fd = fd_grad(v -> run(s, loss, xr => v), x0)
    @test run(s, g, xr => x0) ≈ fd rtol = 1e-6
end

@testset "complex ops stay off GPUs" begin
    reset_default_graph()
    local X
    @pywith tf.device("/device:GPU:0") begin
        X = fft(constant(ComplexF64[1, 2, 3]))
    end
    @test run(Session(emulated_gpus=1, soft=true), X) ≈ dft(ComplexF64[1, 2, 3])   # on the CPU
    @test_throws OxiflowError run(Session(emulated_gpus=1, soft=false), X)
end

end
