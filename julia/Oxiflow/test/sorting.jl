# ADCME's sort, argsort, topk, findall, lgamma and rolling functions: values against Julia
# Base (sort, sortperm, factorial, loops over the windows), gradients against finite
# differences.

@testset "sort, argsort and topk match Julia's sort" begin
    reset_default_graph()
    s = Session()
    v = [3.0, -1.0, 2.0, 2.0, 0.5, -1.0, 7.0]
    @test run(s, sort(constant(v))) == sort(v)
    @test run(s, sort(constant(v); rev=true)) == sort(v; rev=true)
    # positions are 1-based and stable (sortperm's ties are by position, in both orders)
    @test run(s, argsort(constant(v))) == sortperm(v)
    @test run(s, argsort(constant(v); rev=true)) == sortperm(v; rev=true)
    @test eltype(run(s, argsort(constant(v)))) == Int32
    # ties (`+ 0.0` turns a -0.0 into 0.0: Julia's isless orders them, TF's comparisons do not)
    A = round.(4 .* randn(4, 6)) .+ 0.0
    for d in (1, 2, -1), rev in (false, true)
        @test run(s, sort(constant(A); dims=d, rev=rev)) == sort(A; dims=d == -1 ? 2 : d, rev=rev)
        want = mapslices(c -> sortperm(c; rev=rev), A; dims=d == -1 ? 2 : d)
        @test run(s, argsort(constant(A); dims=d, rev=rev)) == want
    end
    B = randn(3, 4, 5)
    @test run(s, sort(constant(B); dims=2)) == sort(B; dims=2)
    # integers, the extremes included (the ascending key is the bitwise complement)
    I = Int32[5, typemin(Int32), -3, typemax(Int32), 0, -3]
    @test run(s, sort(constant(I))) == sort(I)
    @test run(s, argsort(constant(I))) == sortperm(I)
    L = Int64[typemax(Int64), 2, typemin(Int64), 2]
    @test run(s, sort(constant(L))) == sort(L)
    @test run(s, sort(constant(L); rev=true)) == sort(L; rev=true)
    # NaN comes last in either order
    N = [2.0, NaN, -1.0, 5.0]
    @test isequal(run(s, sort(constant(N))), [-1.0, 2.0, 5.0, NaN])
    @test isequal(run(s, sort(constant(N); rev=true)), [5.0, 2.0, -1.0, NaN])
    # topk: the k largest of each row, 1-based positions
    for k in (1, 3, 6)
        vals, idx = run(s, topk(constant(A), k))
        @test size(vals) == (4, k) && eltype(idx) == Int32
        for r in 1:4
            p = sortperm(A[r, :]; rev=true)[1:k]
            @test idx[r, :] == p && vals[r, :] == A[r, p]
        end
    end
    @test_throws OxiflowError topk(constant(A), 7)
    @test_throws OxiflowError sort(constant([true, false]))
    @test_throws OxiflowError sort(constant(A); dims=3)
    # a sort along an unknown dimension is refused; other dimensions may be unknown
    p = placeholder(Float64; shape=[nothing, 3])
    @test_throws OxiflowError sort(p; dims=1)
    @test run(s, sort(p), Dict(p => A[:, 1:3])) == sort(A[:, 1:3]; dims=2)
end

@testset "sort's gradient goes back to where each value came from" begin
    reset_default_graph()
    X = randn(3, 5); W = randn(3, 5)
    x = placeholder(Float64; shape=[3, 5])
    s = Session()
    for (d, rev) in ((1, false), (2, true))
        loss = sum(sort(x; dims=d, rev=rev) .* W)
        g = run(s, gradients(loss, x), Dict(x => X))
        @test g ≈ fd_grad(Y -> sum(sort(Y; dims=d, rev=rev) .* W), X) atol=1e-6
    end
    vals, _ = topk(x, 2)
    g = run(s, gradients(sum(vals .^ 2), x), Dict(x => X))
    @test g ≈ fd_grad(Y -> sum(sum(sort(Y; dims=2, rev=true)[:, 1:2] .^ 2)), X) atol=1e-6
end

@testset "lgamma and its derivatives" begin
    reset_default_graph()
    s = Session()
    n = 1:12
    # Γ(n) = (n - 1)!, and log Γ(x + 1) - log Γ(x) = log x
    @test run(s, lgamma(constant(Float64.(n)))) ≈ log.(factorial.(n .- 1)) rtol=1e-14
    X = 0.1 .+ 5 .* rand(20)
    @test run(s, lgamma(constant(X .+ 1)) - lgamma(constant(X))) ≈ log.(X) rtol=1e-12
    @test run(s, lgamma(0.5)) ≈ log(sqrt(pi))
    @test run(s, lgamma(constant(Float32[0.5]))) ≈ Float32[log(sqrt(pi))]
    # its gradient (digamma) and second derivative (trigamma) against finite differences
    x = placeholder(Float64; shape=[20])
    d1 = gradients(sum(lgamma(x)), x)
    d2 = gradients(sum(d1), x)
    h = 1e-5
    @test run(s, d1, Dict(x => X)) ≈ (run(s, lgamma(constant(X .+ h))) - run(s, lgamma(constant(X .- h)))) / 2h rtol=1e-7
    @test run(s, d2, Dict(x => X)) ≈ (run(s, d1, Dict(x => X .+ h)) - run(s, d1, Dict(x => X .- h))) / 2h rtol=1e-6
    @test run(s, tf.math.digamma(1.0)) ≈ -Base.MathConstants.eulergamma
    @test run(s, tf.math.polygamma(1.0, 1.0)) ≈ pi^2 / 6
    @test_throws OxiflowError lgamma(constant([1, 2]))
end

@testset "tf.math.erf, erfc, erfinv, ndtri" begin
    reset_default_graph()
    s = Session()
    # Abramowitz & Stegun table 7.1; erfc(3) from NIST DLMF
    @test run(s, tf.math.erf([0.0, 0.5, 1.0, 2.0])) ≈ [0.0, 0.5204998778130465, 0.8427007929497149, 0.9953222650189527] rtol=1e-15
    @test run(s, tf.erfc(3.0)) ≈ 2.209049699858544e-5 rtol=1e-14
    Y = collect(range(-0.999, 0.999; length=101))
    @test run(s, tf.math.erf(tf.math.erfinv(Y))) ≈ Y rtol=1e-14
    @test run(s, tf.math.erfinv([1.0, -1.0])) == [Inf, -Inf]
    @test isnan(run(s, tf.math.erfinv(1.5)))
    @test run(s, tf.math.ndtri([0.0013498980316300946, 7.61985302416047e-24, 0.5])) ≈ [-3.0, -10.0, 0.0] rtol=1e-12
    @test eltype(run(s, tf.math.erf(constant(Float32[0.5])))) == Float32
    # gradients against finite differences of the ops themselves
    X = collect(range(-1.5, 1.5; length=7))
    x = placeholder(Float64; shape=[7])
    h = 1e-6
    for f in (tf.math.erf, tf.math.erfc, tf.math.erfinv, tf.math.ndtri)
        xs = f === tf.math.erfinv ? X ./ 2 : f === tf.math.ndtri ? (X .+ 2) ./ 4 : X
        g = run(s, gradients(sum(f(x)), x), x => xs)
        @test g ≈ (run(s, f(xs .+ h)) - run(s, f(xs .- h))) / 2h rtol=1e-7
    end
    @test_throws OxiflowError tf.math.erf(constant([1, 2]))
end

# Julia loops over the windows
jl_roll(f, u, m) = [f(u[k:k+m-1]) for k in 1:length(u)-m+1]

@testset "rolling sums, means, variances and deviations" begin
    reset_default_graph()
    s = Session()
    u = 100 .+ randn(30)
    for m in (2, 5, 30)
        @test run(s, rollsum(u, m)) ≈ jl_roll(sum, u, m)
        @test run(s, rollmean(constant(u), m)) ≈ jl_roll(w -> sum(w) / m, u, m)
        @test run(s, rollvar(u, m)) ≈ jl_roll(w -> sum((w .- sum(w) / m) .^ 2) / (m - 1), u, m) rtol=1e-9
        @test run(s, rollstd(u, m)) ≈ jl_roll(w -> sqrt(sum((w .- sum(w) / m) .^ 2) / (m - 1)), u, m) rtol=1e-9
    end
    # a constant window has variance 0, not a rounding error below it
    @test all(run(s, rollstd(fill(0.1, 8), 3)) .== 0)
    x = placeholder(Float64; shape=[10])
    X = randn(10); W = randn(8)
    g = run(s, gradients(sum(rollvar(x, 3) .* W), x), Dict(x => X))
    @test g ≈ fd_grad(Y -> sum(jl_roll(w -> sum((w .- sum(w) / 3) .^ 2) / 2, Y, 3) .* W), X) atol=1e-6
    @test_throws OxiflowError rollsum(u, 1)
    @test_throws OxiflowError rollsum(u, 31)
    @test_throws OxiflowError rollsum(constant(randn(3, 3)), 2)
end

@testset "findall, and TF's 0-based sort, argsort and top_k" begin
    reset_default_graph()
    s = Session()
    @test run(s, findall(constant([true, false, true, true]))) == [1, 3, 4]
    # a matrix gives (row, column) pairs row by row, as ADCME's tf.where(o) + 1
    M = [true false; false true; true true]
    @test run(s, findall(constant(M))) == [1 1; 2 2; 3 1; 3 2]
    p = placeholder(Bool; shape=[nothing])
    @test run(s, findall(p), Dict(p => [false, true, false])) == [2]
    @test_throws OxiflowError findall(constant([1, 2]))
    A = randn(3, 4)
    @test run(s, tf.sort(A; axis=0)) == sort(A; dims=1)
    @test run(s, tf.argsort(A; direction="DESCENDING")) == mapslices(r -> sortperm(r; rev=true), A; dims=2) .- 1
    v, i = run(s, collect(tf.math.top_k(A, 2)))
    @test i == mapslices(r -> sortperm(r; rev=true)[1:2], A; dims=2) .- 1
    @test v == mapslices(r -> sort(r; rev=true)[1:2], A; dims=2)
    @test_throws OxiflowError tf.sort(A; direction="UP")
end
