# Derivatives: ADCME's gradients shape cases, jacobian, hessian, hessian_vector against
# central finite differences in Float64, on the CPU and on an emulated GPU;
# gradient_magnitude, gradients_colocate, independent; ADCME's derivative checks
# (test_gradients, test_jacobian, test_hessian) against the orders their errors must show.

@testset "derivatives" begin

A0 = [0.4 -1.2 0.3; 0.7 0.5 -0.6]
x0 = [0.3, -0.8, 0.5]
yfun(x) = tanh.(A0 * x) .* exp.(x[1:2])                       # R^3 -> R^2
ffun(x) = sum(exp.(A0 * x)) + sum(sin.(x) .* x .^ 2)          # R^3 -> R
gradf(x) = A0' * exp.(A0 * x) .+ cos.(x) .* x .^ 2 .+ 2 .* x .* sin.(x)   # its gradient, by hand

for (where, dev) in (("CPU", "/device:CPU:0"), ("emulated GPU", "/device:GPU:0"))
    @testset "jacobian, hessian, hessian_vector on $where" begin
        reset_default_graph()
        x = Variable(x0)
        local J, H, Hv, g, y
        @pywith tf.device(dev) begin
            A = constant(A0)
            E = constant([1.0 0.0 0.0; 0.0 1.0 0.0])               # picks x[1:2] without indexing ops
            y = tanh(A * x) .* exp(E * x)
            f = sum(exp(A * x)) + sum(sin(x) .* x^2)
            J = jacobian(y, x)
            H = hessian(f, x)
            Hv = hessian_vector(f, x, [1.0, -2.0, 0.5])
            g = gradients(y, x)                                     # vector/vector: the Jacobian (ADCME)
        end
        s = Session(); init(s)
        @test size(J) == (2, 3) && size(H) == (3, 3) && size(Hv) == (3,)
        @test run(s, y) ≈ yfun(x0)
        Jfd = fd_jacobian(yfun, x0)
        @test run(s, J) ≈ Jfd rtol = 1e-8
        @test run(s, g) ≈ Jfd rtol = 1e-8
        @test gradf(x0) ≈ fd_gradient(ffun, x0) rtol = 1e-8      # the hand gradient is right
        Hfd = fd_jacobian(gradf, x0)
        Hval = run(s, H)
        @test Hval ≈ Hfd rtol = 1e-6
        @test Hval ≈ Hval' rtol = 1e-12
        @test run(s, Hv) ≈ Hfd * [1.0, -2.0, 0.5] rtol = 1e-6
        @test run(s, Hv) ≈ Hval * [1.0, -2.0, 0.5] rtol = 1e-12
        @test assigned_device(s, J) == "/job:localhost/replica:0/task:0" * dev
        @test assigned_device(s, H) == "/job:localhost/replica:0/task:0" * dev
    end
end

@testset "gradients: ADCME's shape cases" begin
    reset_default_graph()
    a = Variable(0.7)
    v = Variable([0.2, -0.4])
    s = Session(); init(s)
    # vector ys, scalar xs: the vector dy_i/da
    dy = gradients(sin(v * a), a)
    @test size(dy) == (2,)
    @test run(s, dy) ≈ cos.([0.2, -0.4] * 0.7) .* [0.2, -0.4]
    # matrix ys, scalar xs: the matrix dY_ij/da
    M = [1.0 2.0; 3.0 4.0]
    dM = gradients(exp(constant(M) * a), a)
    @test size(dM) == (2, 2)
    @test run(s, dM) ≈ M .* exp.(M * 0.7)
    # a vector of xs
    gs = gradients(sum(v * a), [a, v])
    @test gs isa Vector && length(gs) == 2
    @test run(s, gs[1]) ≈ sum([0.2, -0.4]) && run(s, gs[2]) ≈ [0.7, 0.7]
    # grad_ys: vector-Jacobian product
    @test run(s, gradients(sin(v), v; grad_ys=[2.0, 3.0])) ≈ [2.0, 3.0] .* cos.([0.2, -0.4])
    # unreachable: nothing, also for Jacobians
    @test gradients(sin(v), constant(1.0)) === nothing
    @test jacobian(sin(v), Variable([1.0])) === nothing
    # scalar hessian
    @test run(s, hessian(a^3, a)) ≈ 6 * 0.7
    @test run(s, hessian(sum(v) * 2.0, v)) == zeros(2, 2)   # linear: the gradient is constant
    e = try; hessian(v, v); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("scalar", e.msg)
end

@testset "gradient_magnitude, gradients_colocate, independent" begin
    reset_default_graph()
    a = Variable(0.5); b = Variable([1.0, 2.0])
    l = a^2 + sum(b^2)
    s = Session(); init(s)
    @test run(s, gradient_magnitude(l, [a, b])) ≈ norm([2 * 0.5, 2.0, 4.0])
    @test run(s, gradient_magnitude(l, a)) ≈ 1.0
    @cpu 1 begin
        global lc = sin(b)
    end
    gc = gradients_colocate(sum(lc), b)
    @test gc.device == "/device:CPU:1"
    s2 = Session(CPU=2); init(s2)
    @test run(s2, gc) ≈ cos.([1.0, 2.0])
    @test assigned_device(s2, gc) == "/job:localhost/replica:0/task:0/device:CPU:1"
    # independent: value passes, gradient does not
    z = independent(a * a) * a
    @test run(s, z) ≈ 0.125
    @test run(s, gradients(z, a)) ≈ 0.25          # d/da (stop(a^2) * a) = a^2
    @test independent(a).op.type == "StopGradient"
    @test gradients(independent(sin(a)), a) === nothing
end

end

using Random
@testset "test_gradients, test_jacobian, test_hessian: ADCME's derivative checks" begin
    reset_default_graph()
    Random.seed!(21)
    p = placeholder(Float64; shape=[3])
    y = sum(exp(p) .* p)
    g = gradients(y, p)
    J = jacobian(exp(p) .* p, p)
    H = hessian(y, p)
    s = Session()
    x0 = [0.3, -0.2, 0.5]
    # a right gradient: the linearization error falls as γ² (100x a step), finite differences as γ
    e1, e2 = test_gradients(x -> run(s, [y, g], p => x), x0; showfig=false)
    @test length(e1) == length(e2) == 5
    @test all(0.05 .< e1[2:end] ./ e1[1:end-1] .< 0.2)
    @test all(0.005 .< e2[2:4] ./ e2[1:3] .< 0.02)
    # a wrong one (off by 10 %) falls as γ only
    _, bad = test_gradients(x -> ((v, gv) = run(s, [y, g], p => x); (v, 1.1 .* gv)), x0; showfig=false)
    @test all(0.08 .< bad[3:end] ./ bad[2:end-1] .< 0.12)   # (at γ = 0.1 the γ² term still counts)
    _, ej = test_jacobian(x -> run(s, [exp(p) .* p, J], p => x), x0; showfig=false)
    @test all(0.005 .< ej[2:4] ./ ej[1:3] .< 0.02)
    _, eh = test_hessian(x -> run(s, [g, H], p => x), x0; showfig=false)
    @test all(0.005 .< eh[2:4] ./ eh[1:3] .< 0.02)
    # showfig without PyPlot prints the errors and their orders instead of failing
    out = mktemp() do path, io
        redirect_stdout(io) do
            test_gradients(x -> run(s, [y, g], p => x), x0)
        end
        flush(io); read(path, String)
    end
    m = match(r"Automatic differentiation: .* \(orders ([0-9.]+), ([0-9.]+)", out)
    @test m !== nothing && all(abs.(parse.(Float64, m.captures) .- 2) .< 0.1)
    e = try; test_jacobian(x -> (x, ones(2, 2)), x0; showfig=false); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("Jacobian of size (2, 2)", e.msg)
end
