# ADCME's dense API, continued: tril/triu, einsum, solve_batch, vector, interp1, RBF2D/RBF3D, the external
# optimizers (ScipyOptimizerInterface, CustomOptimizer, Optimize!) and the `tf.*` functions.
# Oracles: Julia Base / LinearAlgebra, finite differences, closed-form minimizers.

@testset "ADCME: tril and triu match LinearAlgebra, on matrices and batches" begin
    reset_default_graph()
    s = Session()
    for (m, n) in ((5, 3), (3, 5), (4, 4)), k in -3:3
        A = rand(m, n)
        @test run(s, tril(constant(A), k)) == tril(A, k)
        @test run(s, triu(constant(A), k)) == triu(A, k)
    end
    B = rand(2, 4, 3)
    @test run(s, tril(constant(B), 1)) == cat([reshape(tril(B[i, :, :], 1), 1, 4, 3) for i in 1:2]...; dims=1)
    @test run(s, triu(constant([Inf 1.0; 2.0 3.0]))) == [Inf 1.0; 0.0 3.0]       # nothing leaks from the other triangle
    A = rand(4, 4); W = rand(4, 4); x = constant(A)
    @test run(s, gradients(sum(tril(x, -1) .* W), x)) ≈ fd_grad(X -> sum(tril(X, -1) .* W), A)
    e = try; tril(constant([1.0, 2.0])); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("(2,)", e.msg)
end

@testset "ADCME: einsum matches Julia loops, and differentiates" begin
    reset_default_graph()
    A = rand(3, 4); B = rand(4, 5); C = rand(5, 2); x = rand(4); y = rand(4)
    X = rand(2, 3, 4); Y = rand(2, 4, 5); S = rand(4, 4)
    s = Session()
    @test run(s, einsum("ij,jk->ik", A, B)) ≈ A * B
    @test run(s, einsum("ij,jk", A, B)) ≈ A * B                                 # implicit output
    @test run(s, einsum("ij,jk,kl->il", A, B, C)) ≈ A * B * C
    @test run(s, einsum("bij,bjk->bik", X, Y)) ≈ cat([reshape(X[b, :, :] * Y[b, :, :], 1, 3, 5) for b in 1:2]...; dims=1)
    @test run(s, einsum("i,i->", x, y)) ≈ dot(x, y)
    @test run(s, einsum("i,j->ij", x, y)) ≈ x * y'
    @test run(s, einsum("ij->ji", A)) == permutedims(A)
    @test run(s, einsum("ij->", A)) ≈ sum(A)
    @test run(s, einsum("ij->j", A)) ≈ vec(sum(A, dims=1))
    @test run(s, einsum("ii", S)) ≈ tr(S)
    @test run(s, einsum("ii->i", S)) ≈ diag(S)
    @test run(s, einsum("ij,kj->ik", A, constant(B'))) ≈ A * B                  # a mix of arrays and tensors
    @test run(s, einsum("bij,jk->bik", X, B)) ≈ cat([reshape(X[b, :, :] * B, 1, 3, 5) for b in 1:2]...; dims=1)
    a = constant(A); W = rand(3, 5)
    @test run(s, gradients(sum(einsum("ij,jk->ik", a, B) .* W), a)) ≈ fd_grad(Z -> sum(Z * B .* W), A) rtol = 1e-6
    xs = constant(X)
    @test run(s, gradients(sum(einsum("bij,jk->bik", xs, B) .^ 2), xs)) ≈
          fd_grad(Z -> sum(sum((Z[b, :, :] * B) .^ 2) for b in 1:2), X) rtol = 1e-6
    for (eq, args, needle) in (("ij,jk->ik", (A, A), "'j'"), ("ij->ik", (A,), "'k'"), ("ij,jk", (A,), "2 operand"),
                               ("...ij->ij", (A,), "ellipsis"), ("ijk->i", (A,), "3 letters"))
        e = try; einsum(eq, args...); nothing; catch err; err; end
        @test e isa OxiflowError && occursin(needle, e.msg)
    end
end

@testset "ADCME: solve_batch and vector" begin
    reset_default_graph()
    s = Session()
    a = rand(10, 5) + [I; zeros(5, 5)]; b = rand(100, 10)
    @test run(s, solve_batch(a, b)) ≈ (a \ b')'
    a2 = rand(10, 10) + 10I
    @test run(s, solve_batch(a2, b)) ≈ (a2 \ b')'
    A = constant(a2); R = rand(3, 10); W = rand(3, 10)
    @test run(s, gradients(sum(solve_batch(A, R) .* W), A)) ≈ fd_grad(M -> sum((M \ R')' .* W), a2) rtol = 1e-5
    v = constant([1.0, 2.0, 3.0])
    @test run(s, vector([2, 5, 2], v, 6)) == [0.0, 4.0, 0.0, 0.0, 2.0, 0.0]      # repeats are summed
    @test run(s, vector(2:4, [1.0, 2.0, 3.0], 5)) == [0.0, 1.0, 2.0, 3.0, 0.0]
    @test run(s, vector(constant([3, 1]), [5.0, 6.0], 3)) == [6.0, 0.0, 5.0]
    @test run(s, gradients(sum(vector([2, 5, 2], v, 6) .* collect(1.0:6.0)), v)) == [2.0, 5.0, 2.0]
    e = try; vector([0, 2], [1.0, 2.0], 3); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("index 0 at position 1", e.msg)
    e = try; solve_batch(rand(3, 3), rand(4, 2)); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("(4, 2)", e.msg)
end

# Runs f() with stdout discarded (the optimizers print every evaluation; Julia 1.5 cannot
# redirect to `devnull`).
quietly(f) = open(io -> redirect_stdout(f, io), "/dev/null", "w")

# Rosenbrock, minimum 0 at (1, 1): the loss of ADCME's optimizer examples.
rosen(x) = (1 - x[1])^2 + 100(x[2] - x[1]^2)^2

@testset "ADCME: interp1 matches a Julia piecewise-linear oracle, and differentiates in every input" begin
    reset_default_graph()
    # the oracle: Base's searchsortedlast finds the interval, the last one for x[end]
    lin(x, v, q) = (i = clamp(searchsortedlast(x, q), 1, length(x) - 1); v[i] + (q - x[i]) / (x[i+1] - x[i]) * (v[i+1] - v[i]))
    x = [0.0, 0.3, 0.45, 0.8, 1.0]; v = x .^ 2 .+ 1
    xq = [0.0, 0.3, 0.1, 0.62, 0.99, 1.0, 0.45]    # both ends and interior sample points too
    s = Session()
    @test run(s, interp1(x, v, xq)) ≈ lin.(Ref(x), Ref(v), xq)
    @test run(s, interp1(x, v, xq))[[1, 2, 6, 7]] ≈ v[[1, 2, 5, 3]]
    @test run(s, interp1(x, constant(Float32.(v)), xq)) ≈ Float32.(lin.(Ref(x), Ref(v), xq))
    Q = [0.05 0.5; 0.7 0.95]
    @test run(s, interp1(constant(x), v, Q)) ≈ lin.(Ref(x), Ref(v), Q)
    # gradients in v, x and the query points (inside the intervals), against central differences
    q0 = [0.1, 0.62, 0.99, 0.4]
    tx, tv, tq = Variable(x), Variable(v), Variable(q0)
    loss = sum(interp1(tx, tv, tq) .^ 2)
    gx, gv, gq = gradients(loss, [tx, tv, tq])
    init(s)
    f(xx, vv, qq) = sum(lin.(Ref(xx), Ref(vv), qq) .^ 2)
    @test run(s, loss) ≈ f(x, v, q0)
    @test run(s, gv) ≈ fd_grad(vv -> f(x, vv, q0), v) rtol = 1e-6
    @test run(s, gx) ≈ fd_grad(xx -> f(xx, v, q0), x) rtol = 1e-6
    @test run(s, gq) ≈ fd_grad(qq -> f(x, v, qq), q0) rtol = 1e-6
    # errors: lengths when built; a point out of range, NaN or unsorted samples when run
    e = try; interp1(x, v[1:4], xq); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("interp1", e.msg) && occursin("5 sample points", e.msg) && occursin("4 values", e.msg)
    for (xs, q, want) in ((x, [0.5, 1.2], "interpolation point 2 is 1.2, not in the range [0, 1]"),
                          (x, [NaN], "interpolation point 1 is NaN"),
                          ([0.0, 0.5, 0.5, 1.0], [0.2], "point 2 is 0.5 and point 3 is 0.5"))
        e = try; run(s, interp1(xs, [1.0, 2.0, 3.0, 4.0, 5.0][1:length(xs)], q)); nothing; catch err; err; end
        @test e isa OxiflowError && occursin("_InterpInterval", e.msg) && occursin(want, e.msg)
    end
    @test run(s, interp1(x, v, [0.5])) ≈ [lin(x, v, 0.5)]    # the session stays usable
    # a number, and query points whose count is known only when the graph runs
    @test run(s, interp1(x, v, 0.62)) ≈ lin(x, v, 0.62)
    p = placeholder(Float64, shape=[nothing])
    yp = interp1(x, constant(v), p)
    @test size(yp) == (nothing,) && run(s, yp, p => xq) ≈ lin.(Ref(x), Ref(v), xq)
end

@testset "ADCME: RBF2D and RBF3D match their formula, and differentiate" begin
    reset_default_graph()
    basis = (s -> exp(-s), s -> sqrt(1 + s), s -> 1 / (1 + s), s -> 1 / sqrt(1 + s))    # of s = (ε r)²
    function rbf_jl(pts, ctrs, c, eps, d, kind)    # ADCME's formula, point by point
        out = zeros(length(pts[1]))
        for i in eachindex(out)
            for j in eachindex(c)
                r2 = sum((p[i] - q[j])^2 for (p, q) in zip(pts, ctrs))
                out[i] += c[j] * basis[kind+1](eps[j]^2 * r2)
            end
            isempty(d) || (out[i] += d[1])
            for k in 2:length(d)
                out[i] += d[k] * pts[k-1][i]
            end
        end
        return out
    end
    xc, yc, zc = [0.0, 0.5, 1.0], [0.2, 0.9, 0.4], [0.3, 0.1, 0.8]
    c0, eps0 = [1.0, -2.0, 0.5], [0.7, 1.3, 2.0]
    x, y, z = [0.1, 0.5, 0.9, 0.3], [0.0, 0.9, 0.5, 0.7], [0.2, 0.6, 0.1, 0.9]
    s = Session()
    for kind in 0:3, d in (zeros(0), [0.5], [0.5, -1.0, 2.0])
        r = RBF2D(xc, yc; c=c0, eps=eps0, d=d, kind=kind)
        @test run(s, r(x, y)) ≈ rbf_jl((x, y), (xc, yc), c0, eps0, d, kind)
    end
    for kind in 0:3
        r = RBF3D(xc, yc, zc; c=c0, eps=1.5, d=[0.5, -1.0, 2.0, 3.0], kind=kind)
        @test run(s, r(x, y, z)) ≈ rbf_jl((x, y, z), (xc, yc, zc), c0, fill(1.5, 3), [0.5, -1.0, 2.0, 3.0], kind)
    end
    # ADCME's defaults: c a trainable Variable of zeros, eps ones
    r = RBF2D(xc, yc; d=[2.0])
    init(s)
    @test r.c in get_collection(TRAINABLE_VARIABLES) && run(s, r(x, y)) == fill(2.0, 4)
    # gradients in the coefficients, the shapes, the centers and the points, also at a center
    tc, te, txc, tx = Variable(c0), Variable(eps0), Variable(xc), Variable([0.0, 0.5, 0.9, 0.3])
    for kind in 0:3
        loss = sum(RBF2D(txc, yc; c=tc, eps=te, d=[0.5, -1.0, 2.0], kind=kind)(tx, y) .^ 2)
        g = gradients(loss, [tc, te, txc, tx])
        init(s)
        f(c, e, xcs, xs) = sum(rbf_jl((xs, y), (xcs, yc), c, e, [0.5, -1.0, 2.0], kind) .^ 2)
        x0 = [0.0, 0.5, 0.9, 0.3]
        @test run(s, g[1]) ≈ fd_grad(v -> f(v, eps0, xc, x0), c0) rtol = 1e-6
        @test run(s, g[2]) ≈ fd_grad(v -> f(c0, v, xc, x0), eps0) rtol = 1e-6
        @test run(s, g[3]) ≈ fd_grad(v -> f(c0, eps0, v, x0), xc) rtol = 1e-6
        @test run(s, g[4]) ≈ fd_grad(v -> f(c0, eps0, xc, v), x0) rtol = 1e-6
    end
    # centers known only when the graph runs, with c and eps given
    pc = placeholder(Float64, shape=[nothing])
    r = RBF2D(pc, yc; c=constant(c0), eps=constant(eps0), kind=3)
    @test run(s, r(x, y), pc => xc) ≈ rbf_jl((x, y), (xc, yc), c0, eps0, zeros(0), 3)
    # errors name the function and the sizes
    for (build, want) in ((() -> RBF2D(xc, yc[1:2]), "3, 2"), (() -> RBF2D(pc, yc; c=constant(c0), eps=constant([1.0])), "nothing, 3, 3, 1"), (() -> RBF2D(xc, yc; d=[1.0, 2.0]), "0, 1 or 3 entries"),
                          (() -> RBF3D(xc, yc, zc; d=[1.0, 2.0, 3.0]), "0, 1 or 4 entries"), (() -> RBF2D(xc, yc; kind=4), "got 4"))
        e = try; build(); nothing; catch err; err; end
        @test e isa OxiflowError && occursin("RBF", e.msg) && occursin(want, e.msg)
    end
end

@testset "ADCME: ScipyOptimizerInterface + ScipyOptimizerMinimize" begin
    reset_default_graph()
    x = Variable([-1.2, 1.0]); b = placeholder(Float64)
    loss = (1 - x[1])^2 + b * (x[2] - x[1]^2)^2
    opt = ScipyOptimizerInterface(loss; options=Dict("maxiter" => 500))
    s = Session(); init(s)
    nloss = Ref(0); steps = Vector{Vector{Float64}}()
    r = quietly() do
        ScipyOptimizerMinimize(s, opt; feed_dict=Dict(b => 100.0), fetches=[loss, x],
                               loss_callback=(l, xv) -> (nloss[] += 1; @assert l ≈ rosen(xv)),
                               step_callback=xv -> push!(steps, copy(xv)))
    end
    @test r === nothing
    @test run(s, x) ≈ [1.0, 1.0] atol = 1e-6
    @test nloss[] >= length(steps) > 10 && steps[end] ≈ run(s, x)
    # bounds; the method form opt.minimize(sess)
    y = Variable([3.0, 3.0])
    bounded = ScipyOptimizerInterface(sum((y - [0.0, 5.0])^2); var_list=[y], var_to_bounds=Dict(y => ([1.0, 1.0], [2.0, 2.0])))
    init(s)
    bounded.minimize(s)
    @test run(s, y) ≈ [1.0, 2.0]
    @test run(s, x) ≈ [-1.2, 1.0]                                                  # not in var_list: unchanged
    for bad in (() -> ScipyOptimizerInterface(loss; method="SLSQP"), () -> ScipyOptimizerInterface(loss; inequalities=[x[1]]),
                () -> ScipyOptimizerInterface(loss; options=Dict("maxfun" => 3)), () -> ScipyOptimizerInterface(x))
        e = try; bad(); nothing; catch err; err; end
        @test e isa OxiflowError
    end
end

@testset "ADCME: CustomOptimizer hands f, df, c, dc and bounds to a Julia optimizer" begin
    reset_default_graph()
    x = Variable([0.5, 2.0])
    loss = sum((x - [3.0, -1.0])^2)
    c1 = 4.0 - sum(x)                           # inequality, meant ≥ 0
    c2 = x[1] - 2x[2]                           # equality, meant = 0
    received = Dict{Symbol,Any}()
    # a projected-gradient penalty method written here: enough for this convex problem
    con = CustomOptimizer() do f, df, c, dc, x0, x_L, x_U
        received[:f] = f(x0); received[:df] = df(x0); received[:c] = c(x0); received[:dc] = dc(x0)
        received[:bounds] = (copy(x_L), copy(x_U))
        z = copy(x0)
        for _ in 1:20000
            cz = c(z); J = reshape(dc(z), length(z), 2)
            g = df(z) .+ 200 .* (min(cz[1], 0) .* J[:, 1] .+ cz[2] .* J[:, 2])
            z = clamp.(z .- 1e-3 .* g, x_L, x_U)
        end
        z
    end
    opt = con(loss; inequalities=[c1], equalities=[c2], var_to_bounds=Dict(x => (-10.0, 10.0)))
    s = Session(); init(s)
    minimize(opt, s)
    @test received[:f] ≈ sum(([0.5, 2.0] - [3.0, -1.0]) .^ 2)
    @test received[:df] ≈ 2 .* ([0.5, 2.0] - [3.0, -1.0])
    @test received[:c] ≈ [4.0 - 2.5, 0.5 - 4.0]
    @test received[:dc] ≈ [-1.0, -1.0, 1.0, -2.0]                                  # nvar × ncon, column-major
    @test received[:bounds] == (fill(-10.0, 2), fill(10.0, 2))
    # the constrained minimum: on x1 = 2 x2, the closest point to (3, -1) is (2, 1) (c1 = 1 ≥ 0)
    @test run(s, x) ≈ [2.0, 1.0] atol = 2e-2
    e = try; con(loss; inequalities=[x]); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("scalar", e.msg)
end

@testset "ADCME: Optimize! with the engine's L-BFGS-B, a custom function, and Optim's calling convention" begin
    reset_default_graph()
    x = Variable([-1.2, 1.0])
    loss = (1 - x[1])^2 + 100(x[2] - x[1]^2)^2
    y = Variable([2.0, -3.0])
    q = sum((y - [1.0, 2.0])^2)
    s = Session(); init(s)
    iters = Int[]
    losses, feval = quietly() do
        Optimize!(s, loss, 200; vars=[x], callback=(xv, it, l) -> push!(iters, it), return_feval_loss=true)
    end
    @test run(s, x) ≈ [1.0, 1.0] atol = 1e-6
    @test length(losses) == length(iters) > 10 && losses[end] < 1e-10 && length(feval) >= length(losses)
    # a custom optimizer function gets f, g!, fg and x0 (ADCME's contract); plain gradient descent here
    out = quietly() do
        Optimize!(s, q, 77; vars=[y], optimizer=(f, g!, fg, x0; max_iter) -> begin
            z = copy(x0); G = zeros(2)
            @assert fg(G, z) ≈ f(z) && G ≈ 2 .* (z .- [1.0, 2.0])
            for _ in 1:max_iter
                g!(G, z); z .-= 0.25 .* G
            end
            f(z), max_iter
        end)
    end
    @test out[2] == 77 && out[1] < 1e-12
    @test run(s, y) ≈ [1.0, 2.0]                     # the variables hold the last point evaluated
    # Optim.jl is not installable here; a stand-in with Optim's entry points checks the call
    Core.eval(Main, :(module Optim
        struct GD end
        Options(; kw...) = Dict{Symbol,Any}(kw)
        function optimize(f, g!, x0, ::GD, o)
            z = copy(x0); G = similar(z)
            for it in 1:o[:iterations]
                g!(G, z); z .-= 0.25 .* G
                o[:callback]((iteration=it, value=f(z)))
            end
            return z
        end
    end))
    init(s)
    ls = quietly() do
        Optimize!(s, q, 60; vars=[y], optimizer=Main.Optim.GD())
    end
    @test length(ls) == 60 && ls[end] < 1e-10 && run(s, y) ≈ [1.0, 2.0]
    e = try; Optimize!(s, loss; vars=[constant(1.0)]); nothing; catch err; err; end
    @test e isa OxiflowError
end

@testset "tf.* functions with TF's conventions" begin
    reset_default_graph()
    A = reshape(collect(1.0:6.0), 2, 3)
    a = constant(A)
    s = Session()
    @test run(s, tf.reshape(a, (3, 2))) == permutedims(reshape(permutedims(A), 2, 3))   # row-major, as TF
    @test run(s, tf.reduce_sum(a, axis=1)) == vec(sum(A, dims=2))
    @test run(s, tf.reduce_mean(a, 0; keepdims=true)) == mean(A, dims=1)
    @test run(s, tf.reduce_max(a)) == 6.0 && run(s, tf.reduce_min(a, axis=-1)) == [1.0, 2.0]
    @test run(s, tf.transpose(a)) == permutedims(A) && run(s, tf.transpose(a, perm=[1, 0])) == permutedims(A)
    @test size(tf.expand_dims(a, 0)) == (1, 2, 3) && size(tf.expand_dims(a, axis=-1)) == (2, 3, 1)
    @test size(tf.squeeze(constant(rand(1, 3, 1)), axis=[0])) == (3, 1)
    @test run(s, tf.concat([a, a], axis=1)) == [A A] && run(s, tf.stack([a, a], axis=0))[2, :, :] == A
    @test tf.zeros((2, 2)).dtype == Float32 && run(s, tf.ones([2]; dtype=Float64)) == [1.0, 1.0]
    @test tf.random.normal([3]).dtype == Float32 && size(tf.random.uniform((2, 2); dtype=Float64)) == (2, 2)
    @test run(s, tf.nn.relu(a - 3)) == max.(A .- 3, 0) && run(s, tf.math.square(a)) == A .^ 2
    @test run(s, tf.maximum(a, 2.0)) == max.(A, 2.0) && run(s, tf.where(a > 2.0, a, 0.0)) == ifelse.(A .> 2, A, 0.0)
    M = [2.0 1.0; 1.0 3.0]
    @test run(s, tf.linalg.solve(M, reshape([1.0, 2.0], 2, 1))) ≈ M \ [1.0, 2.0]
    g = tf.gradients(tf.reduce_sum(a^2), a)
    @test g isa Vector && run(s, g[1]) == 2A
    @test tf.float64 === Float64 && tf.int32 === Int32
    sv, u, v = tf.linalg.svd(a)
    @test run(s, sv) ≈ svdvals(A) && run(s, u * diagm(sv) * v') ≈ A
    @test run(s, tf.math.floormod(constant([-7, 7]), 3)) == [2, 1] && run(s, tf.floordiv(constant([-7.0]), 2.0)) == [-4.0]
    @test tf.train.AdagradOptimizer(0.1) isa AdagradOptimizer
    e = try; tf.no_such_function; nothing; catch err; err; end
    @test e isa OxiflowError && occursin("tf.no_such_function", e.msg) && occursin("reshape", e.msg)
end

@testset "ADCME: global_variables_initializer gives every variable its initial value again" begin
    reset_default_graph()
    a = Variable([1.0, 2.0]); b = Variable(3.0f0)
    s = Session()
    run(s, global_variables_initializer())
    @test run(s, a) == [1.0, 2.0] && run(s, b) === 3.0f0
    run(s, assign(a, [5.0, 6.0]))
    @test run(s, a) == [5.0, 6.0]
    run(s, global_variables_initializer())
    @test run(s, a) == [1.0, 2.0]
end

@testset "vectorized tanh/exp/log/sigmoid/sqrt/relu agree with Julia Base" begin
    reset_default_graph()
    for T in (Float32, Float64)
        x = T.(range(-9, 9; length=100_003))   # above the threshold where kernels shard
        p = placeholder(T; shape=[length(x)])
        pos = abs.(x) .+ T(1e-3)
        s = Session()
        tol = 4 * eps(T)   # the kernels: <= 3 ulp (f32), <= 4 ulp of libm (f64)
        close(got, want) = all(abs.(got .- want) .<= tol .* max.(abs.(want), floatmin(T)))
        @test close(run(s, tanh(p), p => x), tanh.(x))
        @test close(run(s, exp(p), p => x), exp.(x))
        @test close(run(s, log(p), p => pos), log.(pos))
        @test close(run(s, sigmoid(p), p => x), 1 ./ (1 .+ exp.(-Float64.(x))))
        @test run(s, sqrt(p), p => pos) == sqrt.(pos)
        @test run(s, relu(p), p => x) == max.(x, 0)
    end
end

@testset "cell: rows of different lengths as a RaggedTensor" begin
    reset_default_graph()
    sess = Session()
    rows = [[1.0], [2.0, 3.0], Float64[], [4.0, 5.0, 6.0]]
    r = cell(rows)
    @test length(r) == 4 && eltype(r) == Float64
    for i in 1:4
        @test run(sess, r[i]) == rows[i]
    end
    @test run(sess, r) == rows
    @test run(sess, r.row_splits) == [0, 1, 3, 3, 6]
    @test run(sess, sum(r[4]) * r[2]) ≈ 15 .* [2.0, 3.0]         # rows are ordinary tensors
    # rows that are matrices, ragged in the first dimension; dtype converts
    m = [ones(2, 3), zeros(0, 3), [1 2 3.0]]
    r2 = cell(m; dtype=Float32)
    @test size(r2[1]) == (2, 3) && run(sess, r2) == [Float32.(a) for a in m]
    @test eltype(run(sess, r2[3])) == Float32
    err(f) = try; f(); nothing; catch e; e; end
    for (f, part) in ((() -> cell([1, 2]), "expected a vector of arrays"),
                      (() -> cell([ones(2, 3), ones(2, 2)]), "differ in their first dimension only"),
                      (() -> r[5], "row 5 is out of bounds for a RaggedTensor of 4 rows"),
                      (() -> cell([[1.5], [2.0]]; dtype=Int64), "cannot be converted to Int64"))
        e = err(f)
        @test e isa OxiflowError && occursin(part, e.msg)
    end
end
