# Scatter updates of dense tensors with ADCME's 1-based semantics: `scatter_update`,
# `scatter_add`, `scatter_sub` (vector and matrix forms), built on TF's
# `TensorScatterUpdate`/`TensorScatterAdd`/`TensorScatterSub` (crates/oxiflow-core/src/ops/scatter.rs),
# differentiable with respect to the tensor and the updates.

export scatter_update, scatter_add, scatter_sub

# The 1-based positions an index selects along a dimension of size `d`: a Julia vector of
# Ints (bounds checked here, naming the function and the position), or an Int tensor
# (checked by the kernel when it runs).
function scatter_positions(fname, i, d::Integer, k::Integer)
    if i isa Tensor
        i.dtype in (Int32, Int64) && ndims(i) <= 1 ||
            invalid("$fname: a tensor index must be a 0-d or 1-d Int32/Int64 tensor, got $(i.dtype) of size $(size(i))")
        return ndims(i) == 0 ? reshape(i, [1]) : i
    end
    p = if i isa Colon
        collect(1:d)
    elseif i isa Bool
        invalid("$fname: a Bool scalar is not an index (dimension $k of size $d)")
    elseif i isa Integer
        [Int(i)]
    elseif i isa AbstractVector{Bool}
        length(i) == d || invalid("$fname: a Bool mask of length $(length(i)) for dimension $k of size $d")
        findall(i)
    elseif i isa AbstractVector{<:Integer}
        collect(Int, i)
    else
        invalid("$fname: cannot index dimension $k with a $(typeof(i)); use an integer, a range, a vector of integers or Bools, `:` or an Int tensor")
    end
    for (n, j) in enumerate(p)
        1 <= j <= d || invalid("$fname: index $j (position $n) is out of bounds for dimension $k of size $d")
    end
    return p
end

# 0-based index rows as an Int64 tensor of shape [n, 1] (one dimension) or [nx*ny, 2]
# (two dimensions, rows (x[a], y[b]) with `b` varying fastest, the row-major order of an
# `nx×ny` update block).
function scatter_indices(g::Graph, ps...)
    if all(p -> !(p isa Tensor), ps)
        if length(ps) == 1
            return constant_in(g, reshape(ps[1] .- 1, :, 1))
        end
        px, py = ps
        rows = [(x - 1, y - 1) for x in px for y in py]
        return constant_in(g, Int64[r[c] for r in rows, c in 1:2])
    end
    ts = [p isa Tensor ? cast(p, Int64) - 1 : constant_in(g, p .- 1) for p in ps]
    length(ts) == 1 && return reshape(ts[1], [length(ts[1]), 1])
    nx, ny = length(ts[1]), length(ts[2])
    X = reshape(ts[1], [nx, 1]) + constant_in(g, zeros(Int64, nx, ny))
    Y = reshape(ts[2], [1, ny]) + constant_in(g, zeros(Int64, nx, ny))
    return add_op("Pack", Tensor[reshape(X, [nx * ny]), reshape(Y, [nx * ny])]; axis=1)
end

# The updates as a length-`n` vector of the tensor's dtype: a scalar (number or 0-d tensor)
# is repeated `n` times; `shape` is the block the indices select, for the error text.
function scatter_values(fname, u, like::Tensor, n::Integer, shape)
    g = getfield(like, :graph)
    t = u isa Tensor ? u : as_tensor(u isa Number ? u : collect(u), like)
    t.dtype == like.dtype || invalid("$fname: updates of dtype $(t.dtype) for a $(like.dtype) tensor")
    ndims(t) == 0 && return t + constant_in(g, zeros(like.dtype, n))
    sz = size(t)
    ok = sz == Tuple(shape) || (ndims(t) == 1 && length(t) == n && (length(shape) == 1 || any(==(1), shape)))
    ok || invalid("$fname: updates of size $sz for an index block of size $(Tuple(shape))")
    return ndims(t) == 1 ? t : reshape(t, [n])
end

# Every tensor argument with its sizes known (the positions and blocks are computed here).
scatter_known(fname, xs...) = foreach(x -> x isa Tensor && known_size(x, fname), xs)

for (f, op, sym) in ((:scatter_update, "TensorScatterUpdate", "="), (:scatter_add, "TensorScatterAdd", "+="), (:scatter_sub, "TensorScatterSub", "-="))
    fname = string(f)
    @eval begin
        @doc """
            $($fname)(a, indices, updates)
            $($fname)(A, ii, jj, updates)

        ADCME's `$($fname)`: a copy of the vector `a` with `a[indices] $($sym) updates`, or of
        the matrix `A` with `A[ii, jj] $($sym) updates`, as one op (`$($op)`, TF's
        `tensor_scatter_nd_$(split($fname, '_')[2])`), differentiable with respect to the
        tensor and the updates. Indices are 1-based: an integer, a range, a vector of integers,
        a Bool mask, `:` or a 0-d/1-d Int tensor. `updates` has one value per selected element
        (for the matrix form a `length(ii)×length(jj)` matrix, or a vector when one of them
        selects a single row or column), or is a scalar used for all of them.
        $( $sym == "=" ? "A repeated index keeps the last update." : "Updates at a repeated index add up.")
        A Julia index out of bounds raises an `OxiflowError` naming the function, dimension and
        position; a tensor index out of bounds fails when the op runs, naming the node.
        The tensor, the updates and a tensor index need every dimension known (an unknown one
        raises an `OxiflowError`, UnimplementedError).
        """ function $f(a::Tensor, indices, updates)
            scatter_known($fname, a, indices, updates)
            ndims(a) == 1 || invalid(string($fname, ": the vector form needs a 1-d tensor, got size ", size(a), "; use ", $fname, "(A, ii, jj, updates) for a matrix"))
            p = scatter_positions($fname, indices, length(a), 1)
            n = length(p)
            idx = scatter_indices(getfield(a, :graph), p)
            vals = scatter_values($fname, updates, a, n, (n,))
            return add_op($op, Tensor[a, idx, vals])
        end
        function $f(A::Tensor, ii, jj, updates)
            scatter_known($fname, A, ii, jj, updates)
            ndims(A) == 2 || invalid(string($fname, ": the matrix form needs a 2-d tensor, got size ", size(A)))
            px = scatter_positions($fname, ii, size(A, 1), 1)
            py = scatter_positions($fname, jj, size(A, 2), 2)
            nx, ny = length(px), length(py)
            idx = scatter_indices(getfield(A, :graph), px, py)
            vals = scatter_values($fname, updates, A, nx * ny, (nx, ny))
            return add_op($op, Tensor[A, idx, vals])
        end
    end
end
