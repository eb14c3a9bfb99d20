# ADCME's scatter_update / scatter_add / scatter_sub on dense tensors. Oracles: Julia's own
# indexed assignment on a copy (`B[ii, jj] = U`, `B[ii, jj] .+= U`), finite differences.

# What Julia gives for `A[ii...] op= U`, with ADCME's rule that updates at a repeated index
# add up for += and -= (Julia's `.+=` on a repeated index would apply only one of them).
scatter_jl_positions(i, d) = i isa Colon ? collect(1:d) : (i isa AbstractVector{Bool} ? findall(i) : (i isa Integer ? [i] : collect(i)))
function julia_scatter(op, A, idx, U)
    B = copy(A)
    ps = map(scatter_jl_positions, idx, size(A))
    # one (i,) or (i, j) per update value, `j` varying fastest: the row-major order of an
    # `length(ii)×length(jj)` block, as ADCME flattens the updates
    cart = length(ps) == 1 ? [(i,) for i in ps[1]] : [(i, j) for i in ps[1] for j in ps[2]]
    u = U isa Number ? fill(U, length(cart)) : (ndims(U) == 2 ? vec(permutedims(U)) : vec(U))
    for (k, c) in enumerate(cart)
        B[c...] = op === :update ? u[k] : (op === :add ? B[c...] + u[k] : B[c...] - u[k])
    end
    return B
end

@testset "ADCME: scatter_update, scatter_add, scatter_sub match Julia's indexed assignment" begin
    reset_default_graph()
    s = Session()
    a = rand(6); A = rand(4, 5)
    fs = ((scatter_update, :update), (scatter_add, :add), (scatter_sub, :sub))
    for (f, op) in fs
        for (idx, U) in (([2, 5, 2], [1.0, 2.0, 3.0]), (2:4, [1.0, 2.0, 3.0]), (3, 7.0), (Bool[1, 0, 0, 1, 0, 0], [5.0, 6.0]),
                         (:, collect(1.0:6.0)), (constant([6, 1]), [9.0, 8.0]), (2:3, -1.5))
            jidx = idx isa Tensor ? [6, 1] : idx
            @test run(s, f(constant(a), idx, U)) ≈ julia_scatter(op, a, (jidx,), U)
        end
        for (ii, jj, U) in ((2:3, [1, 4], [1.0 2.0; 3.0 4.0]), (1, :, collect(1.0:5.0)), (:, 2, [1.0, 2.0, 3.0, 4.0]),
                            ([4, 1], 3:5, rand(2, 3)), (Bool[0, 1, 1, 0], 5, 0.5), (constant([3, 1]), constant(Int32[2, 5]), rand(2, 2)))
            jii = ii isa Tensor ? [3, 1] : ii; jjj = jj isa Tensor ? [2, 5] : jj
            @test run(s, f(constant(A), ii, jj, U)) ≈ julia_scatter(op, A, (jii, jjj), U)
        end
    end
    # repeated indices: last update wins for scatter_update, updates add up otherwise
    @test run(s, scatter_update(constant(a), [2, 2], [1.0, 3.0]))[2] == 3.0
    @test run(s, scatter_add(constant(a), [2, 2], [1.0, 3.0]))[2] ≈ a[2] + 4.0
    # dtypes follow the tensor; Float32 and Int64 tensors work
    @test run(s, scatter_add(constant(Float32[1, 2, 3]), 2, 1)) == Float32[1, 3, 3]
    @test run(s, scatter_sub(constant([1, 2, 3]), [1, 3], [1, 1])) == [0, 2, 2]
end

@testset "ADCME: scatter gradients match finite differences" begin
    reset_default_graph()
    s = Session()
    A0 = rand(4, 3); U0 = rand(2, 2); W = rand(4, 3)
    for (f, op) in ((scatter_update, :update), (scatter_add, :add), (scatter_sub, :sub))
        X = Variable(A0); U = Variable(U0)
        L = sum(sin(f(X, [4, 2], 1:2, U)) .* W)
        init(s)
        gX, gU = run(s, gradients(L, [X, U]))
        @test gX ≈ fd_grad(M -> sum(sin.(julia_scatter(op, M, ([4, 2], 1:2), U0)) .* W), A0) rtol = 1e-6
        @test gU ≈ fd_grad(V -> sum(sin.(julia_scatter(op, A0, ([4, 2], 1:2), V)) .* W), U0) rtol = 1e-6
    end
    # a scalar update used for every selected element gets the sum of their gradients
    x = Variable(rand(5)); c = Variable(2.0)
    init(s)
    @test run(s, gradients(sum(scatter_add(x, [1, 3, 3], c) .* collect(1.0:5.0)), c)) ≈ 1.0 + 3.0 + 3.0
end

@testset "ADCME: scatter errors name the function, index and sizes; the graph stays usable" begin
    reset_default_graph()
    s = Session()
    a = constant(rand(4)); A = constant(rand(3, 3))
    err(f) = try; f(); nothing; catch e; e; end
    e = err(() -> scatter_update(a, [1, 5], [1.0, 2.0]))
    @test e isa OxiflowError && occursin("scatter_update", e.msg) && occursin("index 5", e.msg) && occursin("size 4", e.msg)
    e = err(() -> scatter_add(a, 1:3, [1.0, 2.0]))
    @test e isa OxiflowError && occursin("scatter_add", e.msg) && occursin("(2,)", e.msg) && occursin("(3,)", e.msg)
    e = err(() -> scatter_sub(A, 1:2, 1:2, rand(3, 2)))
    @test e isa OxiflowError && occursin("(3, 2)", e.msg) && occursin("(2, 2)", e.msg)
    e = err(() -> scatter_update(A, 1, [1.0]))
    @test e isa OxiflowError && occursin("1-d tensor", e.msg)
    e = err(() -> scatter_update(a, 1, constant(Float32(1))))
    @test e isa OxiflowError && occursin("Float32", e.msg)
    # a tensor index out of range fails when the op runs, naming the op; the session goes on
    k = placeholder(Int64; shape=[1])
    y = scatter_update(a, k, [0.0])
    e = err(() -> run(s, y, k => [9]))
    @test e isa OxiflowError && occursin("TensorScatterUpdate", e.msg)
    @test run(s, y, k => [2])[2] == 0.0
end
