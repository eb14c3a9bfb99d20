# ADCME's rk4 and ode45. Oracles: for y' = -θy one step multiplies y by the method's
# stability polynomial R(-θh) (RK4: the degree-4 Taylor polynomial of exp; Dormand-Prince's
# fifth-order solution: degree 5 plus z^6/600), a closed form independent of the
# implementation; a Runge-Kutta loop written out in plain Julia; exact solutions; finite
# differences for gradients.

R4(z) = 1 + z + z^2 / 2 + z^3 / 6 + z^4 / 24
R5(z) = R4(z) + z^5 / 120 + z^6 / 600

@testset "rk4 and ode45 match their stability polynomials on y' = -θy" begin
    reset_default_graph()
    s = Session()
    θ0 = 0.9; T = 2.0; NT = 20; h = T / NT
    θ = Variable(θ0)
    for (solver, R) in ((rk4, R4), (ode45, R5))
        Y = solver((t, y, θ) -> -θ * y, T, NT, 1.5, θ)
        @test size(Y) == (NT + 1,)
        init(s)
        @test run(s, Y) ≈ [1.5 * R(-θ0 * h)^n for n in 0:NT] rtol = 1e-13
        # d y_N / dθ against the closed form's finite difference
        g = gradients(Y[NT+1], θ)
        yN(th) = 1.5 * R(-th * h)^NT
        @test run(s, g) ≈ (yN(θ0 + 1e-6) - yN(θ0 - 1e-6)) / 2e-6 rtol = 1e-7
    end
end

@testset "rk4 on a pendulum equals a plain-Julia RK4 loop; time enters at t_n" begin
    reset_default_graph()
    s = Session()
    f(t, y, θ) = [y[2], -θ * sin(y[1])]
    function rk4_julia(θ, T, NT, y)
        h = T / NT; out = [copy(y)]
        for n in 0:NT-1
            k1 = f(n * h, y, θ); k2 = f(n * h + h / 2, y + h / 2 * k1, θ)
            k3 = f(n * h + h / 2, y + h / 2 * k2, θ); k4 = f(n * h + h, y + h * k3, θ)
            y = y + h / 6 * (k1 + 2k2 + 2k3 + k4); push!(out, y)
        end
        return permutedims(hcat(out...))
    end
    θ = Variable(2.0); y0 = Variable([1.0, 0.0])
    ft(t, y, θ) = [y[2]; -θ * sin(y[1])]
    Y = rk4(ft, 3.0, 60, y0, θ)
    init(s)
    @test run(s, Y) ≈ rk4_julia(2.0, 3.0, 60, [1.0, 0.0]) rtol = 1e-12
    L = sum(Y[end, :] .* [0.3, 0.7])
    gθ, gy = gradients(L, [θ, y0])
    Lj(th, yy) = sum(rk4_julia(th, 3.0, 60, yy)[end, :] .* [0.3, 0.7])
    @test run(s, gθ) ≈ (Lj(2.0 + 1e-6, [1.0, 0.0]) - Lj(2.0 - 1e-6, [1.0, 0.0])) / 2e-6 rtol = 1e-6
    @test run(s, gy) ≈ fd_grad(yy -> Lj(2.0, yy), [1.0, 0.0]) rtol = 1e-6
    # y' = cos(t): y = sin(t) to the method's accuracy only when stage times start at t_n = nΔt
    @test abs(run(s, rk4((t, y, θ) -> cos(t), 1.0, 50, 0.0)[end]) - sin(1.0)) < 1e-9
    @test abs(run(s, ode45((t, y, θ) -> cos(t), 1.0, 50, 0.0)[end]) - sin(1.0)) < 1e-11
    # a wrong-size derivative is an error naming the solver
    e = try; rk4((t, y, θ) -> sum(y), 1.0, 10, [1.0, 2.0]); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("rk4", e.msg) && occursin("(2,)", e.msg)
end
