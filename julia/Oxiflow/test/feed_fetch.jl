# Feeding arrays into a run and fetching results back: every dtype, ranks 0 to 4 with
# unequal dimensions, strided views, transposes and permutations fed in place, and results
# whose engine layout differs from Julia's (Transpose, MatMul). The oracle is Julia Base:
# round trips are exact, permuted results equal `permutedims`.

const FEED_TYPES = (Float32, Float64, Int32, Int64, Bool)
const FEED_DIMS = ((), (7,), (3, 5), (2, 3, 4), (2, 5, 3, 4), (0, 3), (4, 0, 2))

sample(T, dims) = T === Bool ? rand(Bool, dims...) : T <: Integer ? rand(T(-10^6):T(10^6), dims...) : rand(T, dims...)

# `run` of an Identity of a placeholder fed with `x`; the fetched value and its type.
function round_trip(x; shape=size(x), T=eltype(x))
    reset_default_graph()
    p = placeholder(T; shape=collect(Int, shape))
    s = Session()
    return run(s, copy(p), p => x)
end

@testset "feed and fetch: every dtype, ranks 0 to 4, exact" begin
    for T in FEED_TYPES, dims in FEED_DIMS
        A = dims === () ? fill(sample(T, (1,))[1]) : sample(T, dims)
        got = round_trip(A)
        if dims === ()
            @test got isa T && got === A[]
        else
            @test got isa Array{T,length(dims)} && size(got) == dims && got == A
        end
    end
    # a scalar fed as a number
    for T in FEED_TYPES
        v = sample(T, (1,))[1]
        @test round_trip(v; shape=(), T=T) === v
    end
end

@testset "strided feeds: views, transposes, permutations" begin
    for T in FEED_TYPES
        B = sample(T, (9, 70, 5))
        M = sample(T, (37, 45))
        V = sample(T, (11,))
        for x in (view(M, 2:30, 3:40),            # a window: contiguous columns
                  view(M, 36:-2:1, :),            # negative stride along the first axis
                  view(M, 5, :),                  # a row: stride 37
                  view(M, :, 7),                  # a column: dense
                  view(B, :, 70:-1:1, 2:4),
                  transpose(M),                   # tiled transpose into a column-major tensor
                  transpose(V),
                  PermutedDimsArray(B, (3, 1, 2)),
                  PermutedDimsArray(B, (3, 2, 1)), # row-major in Julia's indices: one memcpy
                  reshape(view(B, :, 1:6, :), 9, 3, 2, 5),
                  view(M, [3, 1, 2], 4:6))        # not strided: collected first
            got = round_trip(x)
            @test got isa Array{T,ndims(x)} && got == collect(x)
        end
        T <: Real && T !== Bool && @test round_trip(M')::Matrix{T} == permutedims(M)
    end
    # a BitArray and a range are collected
    b = rand(Bool, 4, 3) .> 0
    @test round_trip(BitArray(b); T=Bool) == b
    @test round_trip(1:5) == collect(1:5)
end

@testset "fetching results the engine keeps in another layout" begin
    reset_default_graph()
    for T in FEED_TYPES
        A = sample(T, (2, 5, 3, 4)); M = sample(T, (37, 45))
        a = constant(A); m = constant(M)
        s = Session()
        @test run(s, permutedims(a, (3, 1, 4, 2))) == permutedims(A, (3, 1, 4, 2))
        @test run(s, permutedims(a, (4, 3, 2, 1))) == permutedims(A, (4, 3, 2, 1))
        @test run(s, transpose(m)) == permutedims(M)
        @test run(s, reverse(m; dims=1)) == reverse(M; dims=1)
        @test run(s, reshape(permutedims(a, (2, 1, 3, 4)), 10, 12)) == reshape(permutedims(A, (2, 1, 3, 4)), 10, 12)
    end
    # MatMul returns a row-major product: small integers keep it exact
    for T in (Float32, Float64)
        A = T.(rand(-8:8, 33, 70)); B = T.(rand(-8:8, 70, 41))
        @test run(Session(), constant(A) * constant(B))::Matrix{T} == A * B
    end
end

@testset "feed errors keep naming the placeholder" begin
    reset_default_graph()
    p = placeholder(Float64; shape=[3, 4], name="images")
    s = Session()
    W = rand(4, 3)
    @test run(s, copy(p), p => W') == permutedims(W)   # a 3×4 adjoint is a 3×4 feed
    e = try run(s, copy(p), p => view(rand(5, 5), 1:4, 1:3)); nothing catch err; err end
    @test e isa OxiflowError && occursin("images", e.msg) && occursin("shape", e.msg)
    e = try run(s, copy(p), p => transpose(rand(Float32, 4, 3))); nothing catch err; err end
    @test e isa OxiflowError && occursin("images", e.msg) && occursin("dtype", e.msg)
    @test_throws OxiflowError run(s, copy(p), p => view(rand(Int8, 3, 4), :, :))
    @test_throws OxiflowError run(s, copy(p), p => "not an array")
end

@testset "large fetched arrays are Julia's own: independent of the engine and of each other" begin
    reset_default_graph()
    n = 200   # 320 kB of Float64: above the size from which buffers are handed over
    A = rand(n, n)
    p = placeholder(Float64; shape=[n, n])
    y = copy(p)
    v = Variable(A)
    c = constant(2A)
    s = Session(); init(s)
    got = run(s, y, p => A)
    @test got == A && pointer(got) != pointer(A)
    got .= 0
    @test A[1] != 0 && run(s, y, p => A) == A
    # the same value fetched twice in one run: two arrays
    a, b = run(s, [y, y], p => A)
    a[1] = -1.0
    @test b == A && a[1] == -1.0
    # values the engine keeps (a variable, a constant) are copied, not handed over
    for t in (v, c)
        w = run(s, t)
        w .= NaN
        @test run(s, t) == (t === v ? A : 2A)
    end
    # a product (row-major in the engine) and many runs with collections in between
    for k in 1:30
        m = run(s, constant(A) * y, p => A)
        @test m ≈ A * A
        k % 10 == 0 && GC.gc()
    end
    for T in (Float32, Int32, Int64, Bool)
        B = sample(T, (300, 240))
        @test round_trip(B)::Matrix{T} == B
        @test round_trip(transpose(B))::Matrix{T} == permutedims(B)
    end
end
