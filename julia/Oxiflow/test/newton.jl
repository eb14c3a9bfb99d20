# ADCME's Newton-Raphson solvers (newton.jl) against plain-Julia Newton iterations, closed
# forms and finite differences of a plain-Julia solve.
using LinearAlgebra, SparseArrays

# Newton's method in plain Julia: the iterates u₀, u₁, ... while ‖r‖ ≥ tol (of the iterate
# before), at most `maxit` steps, as newton_raphson documents it.
function jl_newton(r, J, u; tol=1e-12, maxit=100)
    us, rn = [u], norm(r(u))
    while rn >= tol && length(us) - 1 < maxit
        rn = norm(r(us[end]))
        push!(us, us[end] - J(us[end]) \ r(us[end]))
    end
    return us
end

nr_err(f) = try; f(); nothing; catch e; e; end

@testset "newton_raphson: iterates against Julia's Newton, sparse Jacobian, gradient in closed form" begin
    reset_default_graph(); reset_default_options()
    cube(θ, x) = (x^3 - θ, 3spdiag(x^2))
    θv = [8.0, 27.0, 64.0]
    θ = constant(θv)
    nr = newton_raphson(cube, constant(ones(3)), θ)
    s = Session()
    x, res, U, conv, it = run(s, [nr.x, nr.res, nr.u, nr.converged, nr.iter])
    us = jl_newton(u -> u .^ 3 .- θv, u -> Diagonal(3u .^ 2), ones(3))
    @test it == length(us) - 1 && conv == true
    @test x ≈ [2.0, 3.0, 4.0] rtol = 1e-14
    @test size(U) == (3, 101) && all(U[:, it+2:end] .== 0)
    @test U[:, 1:it+1] ≈ hcat(us...) rtol = 1e-12
    @test res[1:it] ≈ [norm(u .^ 3 .- θv) for u in us[1:it]] rtol = 1e-12
    # ADCME's run(sess, nr): the five values as an NRResult
    r = run(s, nr)
    @test r isa NRResult && r.x == x && r.res == res && r.u == U && r.converged === conv && r.iter == it
    @test occursin("converged = true", sprint(show, r))
    y = newton_raphson_with_grad(cube, constant(ones(3)), θ)
    @test run(s, y) == x                                     # the solution itself, exactly
    @test run(s, gradients(sum(y), θ)) ≈ 1 ./ (3 .* x .^ 2) rtol = 1e-12   # dx/dθ = 1/(3x²)
    # a step budget: stops early, not converged
    Oxiflow.options.newton_raphson.max_iter = 3
    nr3 = newton_raphson(cube, constant(ones(3)), θ)
    @test run(s, [nr3.iter, nr3.converged]) == [3, false]
    @test run(s, nr3.x) ≈ us[4] rtol = 1e-12
    # Levenberg-Marquardt: (J + μI) δ = r, the same root
    reset_default_options(); Oxiflow.options.newton_raphson.LM = 0.5
    nrl = newton_raphson(cube, constant(ones(3)), θ)
    @test run(s, nrl.x) ≈ [2.0, 3.0, 4.0] rtol = 1e-10
    @test run(s, nrl.u)[:, 2] ≈ ones(3) - (Diagonal(fill(3.0, 3)) + 0.5I) \ (ones(3) .- θv) rtol = 1e-12
    # verbose: each iteration's residual norms, written when the loop runs
    reset_default_options(); Oxiflow.options.newton_raphson.verbose = true
    nrv = newton_raphson(cube, constant(ones(3)), θ)
    local itv
    out = captured_stderr(() -> (itv = run(s, nrv.iter)))
    lines = filter(l -> startswith(l, "Newton iteration"), split(out, '\n'))
    @test length(lines) == itv == it
    @test startswith(lines[1], "Newton iteration 0 : r (abs) = $(norm(ones(3) .- θv)) r (rel) = 1")
    reset_default_options()
end

@testset "newton_raphson_with_grad: a network coefficient, dense Jacobian, gradient against finite differences" begin
    reset_default_graph(); reset_default_options()
    # -(1 + nn(u)) u'' + u = f on 11 interior nodes, as ADCME's README writes it, small
    n = 13; h = 1 / (n - 1); xs = collect(range(0, 1; length=n))
    fv = @. π^2 * sin(π * xs) + sin(π * xs)
    dims = [1, 4, 1]
    function res_jac(θ, x)
        nn = squeeze(fc(reshape(x, :, 1), dims[2:end], θ)) + 1.0
        uf = vector(2:n-1, x, n)
        r = -nn .* (uf[3:end] + uf[1:end-2] - 2uf[2:end-1]) / h^2 + uf[2:end-1] - fv[2:end-1]
        return r, gradients(r, x)
    end
    # the same in Julia: residual and Jacobian by hand (nn'(u) from tanh')
    function jl_parts(θ, u)
        W1, b1, W2, b2 = θ[1:4], θ[5:8], θ[9:12], θ[13]
        a = tanh.(u * W1' .+ b1')
        nn = a * W2 .+ b2 .+ 1
        dnn = ((1 .- a .^ 2) .* W1') * W2
        uf = [0.0; u; 0.0]
        lap = (uf[3:end] + uf[1:end-2] - 2uf[2:end-1]) / h^2
        r = -nn .* lap + u - fv[2:end-1]
        m = length(u)
        D = Tridiagonal(fill(1 / h^2, m - 1), fill(-2 / h^2, m), fill(1 / h^2, m - 1))
        return r, -Diagonal(nn) * D - Diagonal(dnn .* lap) + I
    end
    jl_solve(θ) = jl_newton(u -> jl_parts(θ, u)[1], u -> jl_parts(θ, u)[2], zeros(n - 2); tol=1e-13)[end]
    θ0 = 0.3 .* sin.(1:13)
    θ = Variable(θ0)
    Oxiflow.options.newton_raphson.tol = 1e-13
    y = newton_raphson_with_grad(res_jac, constant(zeros(n - 2)), θ)
    loss = sum((y - sin.(π .* xs[2:end-1]))^2)
    g = gradients(loss, θ)
    s = Session(); init(s)
    @test run(s, y) ≈ jl_solve(θ0) rtol = 1e-10
    G = run(s, g)
    jl_loss(t) = sum((jl_solve(t) .- sin.(π .* xs[2:end-1])) .^ 2)
    for v in (ones(13), sin.(3.0 .* (1:13)), [1.0; zeros(12)])
        @test dot(G, v) ≈ (jl_loss(θ0 + 1e-6v) - jl_loss(θ0 - 1e-6v)) / 2e-6 rtol = 1e-5
    end
    reset_default_options()
end

@testset "NonlinearConstrainedProblem: ADCME's example, the adjoint gradient in closed form" begin
    reset_default_graph(); reset_default_options()
    f(θ, u) = (u^3 + u - θ, spdiag(3u^2 + 1))
    L(u) = sum((u - 1)^2)
    pl = Variable(ones(1))
    l, u, dl = NonlinearConstrainedProblem(f, L, pl, ones(1))
    s = Session(); init(s)
    lv, uv, dv = run(s, [l, u, dl])
    @test uv[1]^3 + uv[1] ≈ 1.0 rtol = 1e-12
    @test lv ≈ (uv[1] - 1)^2 rtol = 1e-12
    @test dv ≈ [2 * (uv[1] - 1) / (3uv[1]^2 + 1)] rtol = 1e-10    # dL/du · du/dθ
    BFGS!(s, l, dl, pl)
    @test run(s, pl) ≈ [2.0] rtol = 1e-6                         # u = 1 needs θ = 2
end

@testset "newton_raphson: errors leave the graph usable" begin
    reset_default_graph(); reset_default_options()
    good(θ, x) = (x - θ, spdiag(ones(2)))
    # a residual that turns NaN stops the loop and is not reported as converged
    nan_res(θ, x) = (x - θ + constant(NaN) * sum(x), spdiag(ones(2)))
    nrn = newton_raphson(nan_res, constant(ones(2)), constant([1.0, 2.0]))
    @test run(Session(), nrn.converged) == false
    e = nr_err(() -> newton_raphson(good, constant(ones(2, 2)), constant([1.0, 2.0])))
    @test e isa OxiflowError && occursin("must be a vector", e.msg)
    e = nr_err(() -> newton_raphson((θ, x) -> x - θ, constant(ones(2)), constant([1.0, 2.0])))
    @test e isa OxiflowError && occursin("must return (r, J)", e.msg)
    # the line search needs the function value
    Oxiflow.options.newton_raphson.linesearch = true
    e = nr_err(() -> newton_raphson(good, constant(ones(2)), constant([1.0, 2.0])))
    @test e isa OxiflowError && occursin("(val, r, J)", e.msg)
    e = nr_err(() -> newton_raphson((θ, x) -> (x, x - θ, spdiag(ones(2))), constant(ones(2)), constant([1.0, 2.0])))
    @test e isa OxiflowError && occursin("must be a scalar", e.msg)
    reset_default_options()
    @test Oxiflow.options.newton_raphson.linesearch == false && Oxiflow.options.newton_raphson.tol == 1e-12
    nr = newton_raphson(good, constant(ones(2)), constant([1.0, 2.0]))
    @test run(Session(), nr.x) == [1.0, 2.0]
end

@testset "newton_raphson with line search: ADCME's cases, a step plain Newton overshoots, Armijo on every step" begin
    reset_default_graph(); reset_default_options()
    s = Session()
    # ADCME's own test: f1-f4 without, f5-f7 with the line search (f returns the value too)
    f1(θ, u) = (u^2 - 1, 2 * spdiag(u))
    f2(θ, u) = (u^3 - 2u - 5, spdiag(3u^2 - 2))
    f3(θ, u) = (exp(2u) - u - 6, spdiag(2 * exp(2u) - 1))
    f4(θ, u) = ((cos(u) - u)^2, spdiag((-u + cos(u)) * (-2 * sin(u) - 2)))
    f5(θ, u) = (sum(1 / 3 * (u - 1)^3), (u - 1)^2, 2 * spdiag(u - 1))
    f6(θ, u) = (sum((u - 1.3)^2), 2(u - 1.3), 2spdiag(length(u)))
    f7(θ, u) = (sum(0.988 * u^5 - 4.96 * u^4 + 4.978 * u^3 + 5.015 * u^2 - 6.043 * u - 1),
                4.94 * u^4 - 19.84 * u^3 + 14.934 * u^2 + 10.03 * u - 6.043,
                spdiag(4.94 * 3 * u^3 - 19.84 * 3 * u^2 + 14.934 * 2 * u + 10.03))
    for u0 in (0.1, 0.5, 0.9)
        plain = [newton_raphson(f, constant([u0]), missing) for f in (f1, f2, f3, f4)]
        Oxiflow.options.newton_raphson.linesearch = true
        searched = [newton_raphson(f, constant([u0]), missing) for f in (f5, f6, f7)]
        reset_default_options()
        for (k, nr) in enumerate(vcat(plain, searched))
            @test run(s, nr).converged
        end
        # the quadratic f6: the full Newton step meets the Armijo condition, one step to 1.3
        r6 = run(s, searched[2])
        @test r6.u[1, 2] ≈ 1.3 rtol = 1e-14
    end
    # f(u) = √(1 + u²): the Newton step from u goes to -u³, so plain Newton from 2 diverges
    smooth(θ, u) = (sum(sqrt(1 + u^2)), u / sqrt(1 + u^2), spdiag((1 + u^2)^(-1.5)))
    Oxiflow.options.newton_raphson.max_iter = 4
    plain = run(s, newton_raphson((θ, u) -> smooth(θ, u)[2:3], constant([2.0]), missing))
    @test plain.converged == false
    @test plain.u[1, 1:5] ≈ [2.0, -8.0, 512.0, -512.0^3, 512.0^9] rtol = 1e-12
    reset_default_options()
    Oxiflow.options.newton_raphson.linesearch = true
    nr = run(s, newton_raphson(smooth, constant([2.0]), missing))
    @test nr.converged && abs(nr.x[1]) < 1e-12
    # its first step by hand: α = 1 fails Armijo, the quadratic through f(0), f'(0), f(1)
    # gives α = 0.3028..., inside [0.1, 0.5], which passes
    F(u) = sqrt(1 + u^2); δ = 2 * (1 + 4) ; f0 = F(2.0); df0 = -(2 / sqrt(5)) * δ
    @test !(F(2 - δ) <= f0 + 1e-4 * df0)
    α = -df0 / (2 * (F(2 - δ) - f0 - df0))
    @test 0.1 < α < 0.5 && F(2 - α * δ) <= f0 + 1e-4 * α * df0
    @test nr.u[1, 2] ≈ 2 - α * δ rtol = 1e-12
    # every step decreases the value at least as Armijo asks
    us = nr.u[1, 1:nr.iter+1]
    for k in 1:nr.iter
        u, un = us[k], us[k+1]
        @test F(un) <= F(u) - 1e-4 * (u / F(u)) * (u - un) + 1e-15
    end
    # f5 from below 1: δ is not a descent direction, the step is the full one
    r5 = run(s, newton_raphson(f5, constant([0.5]), missing))
    @test r5.u[1, 2] ≈ 0.5 - (0.5 - 1)^2 / (2 * (0.5 - 1)) rtol = 1e-14
    # verbose prints each step length
    Oxiflow.options.newton_raphson.verbose = true
    nrv = newton_raphson(smooth, constant([2.0]), missing)
    out = captured_stderr(() -> run(s, nrv.x))
    @test occursin("Current Step Size = $(α)", out) || occursin("Current Step Size = $(Float64(α))", out)
    reset_default_options()
end

@testset "BFGS!(f, x0): the in-graph minimizer against closed forms" begin
    reset_default_graph()
    vg(v, x) = (v, gradients(v, x))
    # a quadratic: the minimizer solves A x = b (Julia's backslash as the oracle)
    A = [4.0 1 0; 1 3 1; 0 1 2]; b = [1.0, 2, 3]
    xq = BFGS!(x -> vg(0.5 * sum(x .* (A * x)) - sum(b .* x), x), zeros(3))
    # Rosenbrock's valley, minimum at (1, 1), from the classic start
    xr = BFGS!(x -> vg((1 - x[1])^2 + 100 * (x[2] - x[1]^2)^2, x), [-1.2, 1.0], 200)
    # Float32 keeps its dtype
    x32 = BFGS!(x -> vg(sum((x - 3.0f0)^2), x), Float32[0, 1])
    # an infinite value beyond x = 0.5 is a failed trial: the line search backs off
    xinf = BFGS!(x -> vg(sum(x^2) + if_else(x[1] > 0.5, Inf, 0.0), x), [-2.0])
    # one step: along -∇f(x0), downhill
    x1 = BFGS!(x -> vg(0.5 * sum(x .* (A * x)) - sum(b .* x), x), [1.0, -1, 2], 1)
    # no step
    x0 = BFGS!(x -> vg(sum(x^2), x), [1.0, 2.0], 0)
    sess = Session()
    @test run(sess, xq) ≈ A \ b rtol = 1e-8
    @test run(sess, xr) ≈ [1.0, 1.0] rtol = 1e-6
    r32 = run(sess, x32)
    @test eltype(r32) == Float32 && r32 ≈ [3, 3]
    @test abs(run(sess, xinf)[1]) < 1e-8
    v1, p0 = run(sess, x1), [1.0, -1, 2]
    f(x) = 0.5 * x' * A * x - b' * x
    d = v1 - p0; g = A * p0 - b
    @test f(v1) < f(p0) && d' * g < 0
    @test abs(d' * g) ≈ norm(d) * norm(g) rtol = 1e-12
    @test run(sess, x0) == [1.0, 2.0]
    # bad input: an OxiflowError naming BFGS!, and the graph still runs
    err(f) = try; f(); nothing; catch e; e; end
    for (f, part) in ((() -> BFGS!(x -> vg(sum(x^2), x), zeros(2, 2)), "float vector of known length"),
                      (() -> BFGS!(x -> sum(x^2), zeros(2)), "must return (value, gradient)"),
                      (() -> BFGS!(x -> (sum(x^2), x[1:1]), zeros(2)), "the gradient must have the position's size (2,)"),
                      (() -> BFGS!(x -> (x, x), zeros(2)), "the value must be a scalar"),
                      (() -> BFGS!(x -> vg(sum(x^2), x), zeros(2); tolerance=-1), "tolerances must be >= 0"))
        e = err(f)
        @test e isa OxiflowError && occursin("BFGS!", e.msg) && occursin(part, e.msg)
    end
    @test run(sess, xq) ≈ A \ b rtol = 1e-8
end
