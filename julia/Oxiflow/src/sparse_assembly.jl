# ADCME's sparse assembly and friends (ADCME.jl src/sparse.jl), built from the existing
# sparse functions (sparse.jl, sparse_solve.jl) and dense ops, no engine op of their own:
# `SparseAssembler` / `accumulate` / `assemble` (rows of a sparse matrix collected in Julia,
# concatenated with `ConcatV2`, small values dropped in Julia or by a `SparseRemap`),
# `trisolve` (a tridiagonal `SparseTensor` and `SparseSolve`) and `reshape` of a
# `SparseTensor` (TF's `tf.sparse.reshape`: `Mul`, `Add`, `FloorDiv`, `FloorMod` on the
# indices).

export SparseAssembler, assemble, trisolve

# ---------------------------------------------------------------- SparseAssembler

"""
    SparseAssembler(handle, n, tol=0.0)

ADCME's `SparseAssembler`: a handle for assembling an `n`-row sparse matrix row by row with
[`accumulate`](@ref) and
[`assemble`](@ref). `handle` is an integer naming the matrix (ADCME keeps one C++ assembler
per handle; here the handle is a plain Julia value, and two `SparseAssembler`s with the same
`handle`, `n` and `tol` are equal); `n` is the number of rows, a non-negative Julia integer;
`tol` a Julia real: every accumulated value `v` with `abs(v) <= tol` is dropped (ADCME's
kernel keeps `abs(v) > tol`, entry by entry before repeats add up; with the default
`tol = 0.0` exact zeros are dropped; for tensor values see [`assemble`](@ref)). ADCME also takes tensors for `handle`, `n` and `tol`;
here they must be Julia values (an `OxiflowError` otherwise), since the sparsity pattern is
built when the graph is built. ADCME's old zero-argument `SparseAssembler()` (returning three
functions) is not provided.

```julia
handle = SparseAssembler(100, 5, 0.0)
op1 = accumulate(handle, 1, [1;2;3], [1.0;2.0;3.0])
op2 = accumulate(handle, 2, [1;3], [1.0;1.0])
A = assemble(5, 5, [op1;op2])   # a 5×5 SparseTensor, rows 1 and 2 filled
```
"""
struct SparseAssembler
    handle::Int
    n::Int
    tol::Float64
    function SparseAssembler(handle, n, tol=0.0)
        for (x, what) in ((handle, "handle"), (n, "n"), (tol, "tol"))
            x isa Tensor && invalid("SparseAssembler: $what is a Tensor; Oxiflow builds the sparsity pattern when the graph is built, so give $what as a Julia $(what == "tol" ? "real" : "integer")")
        end
        (handle isa Integer && !(handle isa Bool)) || invalid("SparseAssembler: handle must be a Julia integer, got $(repr(handle))")
        (n isa Integer && !(n isa Bool) && n >= 0) || invalid("SparseAssembler: n (the number of rows) must be a non-negative Julia integer, got $(repr(n))")
        (tol isa Real && !(tol isa Bool) && !isnan(tol)) || invalid("SparseAssembler: tol must be a Julia real number, got $(repr(tol))")
        return new(Int(handle), Int(n), Float64(tol))
    end
end

"""
    SparseAccumulation

What [`accumulate`](@ref) returns: one
row's contribution (`assembler`, 1-based `row` and `cols`, and `vals`, a Float64 vector or
tensor), a small Julia object rather than a graph op (ADCME's is an op that fills a C++
accumulator when it runs). [`assemble`](@ref) combines them; `[op1; op2]` makes the vector
it takes.
"""
struct SparseAccumulation
    assembler::SparseAssembler
    row::Int
    cols::Vector{Int}
    vals::Union{Vector{Float64},Tensor}
end

Base.show(io::IO, op::SparseAccumulation) =
    print(io, "SparseAccumulation(handle=", op.assembler.handle, ", row=", op.row, ", ", length(op.cols), " entries",
          op.vals isa Tensor ? ", values " * op.vals.name : "", ")")

# A values argument as a Float64 vector or rank-1 Float64 tensor of known length (ADCME
# converts every values argument to Float64).
function float64_vector(fname, what, v)
    if v isa Tensor
        v.dtype in (Float64, Float32, Int64, Int32) ||
            invalid("$fname: $what must be a real vector or tensor, got a $(v.dtype) tensor")
        ndims(v) == 1 || invalid("$fname: $what must be a vector, got a tensor of size $(size(v))")
        known_size(v, fname)
        return cast(v, Float64)
    end
    (v isa AbstractVector{<:Real} && !(eltype(v) <: Bool)) ||
        invalid("$fname: $what must be a real Julia vector or a tensor, got a $(typeof(v))")
    return collect(Float64, v)
end
vector_length(v) = v isa Tensor ? size(v, 1) : length(v)

"""
    accumulate(handle::SparseAssembler, row, cols, vals) -> SparseAccumulation

ADCME's `accumulate`: adds `vals[k]` at `(row, cols[k])` of the matrix of `handle`, as
```julia
for k = 1:length(cols)
    A[row, cols[k]] += vals[k]
end
```
`row` is a 1-based Julia integer in `1:handle.n`; `cols` a vector of 1-based Julia integers
(checked against the number of columns by [`assemble`](@ref)); `vals` a real Julia vector or
a real tensor of known length (cast to Float64, as ADCME's `convert_to_tensor(vals,
dtype=Float64)`; the assembled matrix is differentiable with respect to it). Several
`accumulate`s may name the same row, and a row may repeat a column: repeats add up. ADCME
also takes tensors for `row` and `cols`; here they must be Julia integers. Returns a small
Julia object (not a graph op, unlike ADCME's): nothing runs until the `SparseTensor` of
`assemble` is used. `Base.accumulate(op, A)` keeps its meaning (this is one more method).
Errors (`OxiflowError`): a row outside `1:handle.n`, a column below 1, `cols` and `vals` of
different lengths, a tensor `row` or `cols`.
"""
function Base.accumulate(h::SparseAssembler, row, cols, vals)
    fname = "accumulate"
    (row isa Tensor || cols isa Tensor) &&
        invalid("$fname: row and cols must be Julia integers; Oxiflow builds the sparsity pattern when the graph is built (vals may be a tensor)")
    (row isa Integer && !(row isa Bool)) || invalid("$fname: row must be a Julia integer, got $(repr(row))")
    1 <= row <= h.n || invalid("$fname: row $row is out of bounds for the $(h.n) rows of SparseAssembler $(h.handle)")
    (cols isa AbstractVector{<:Integer} && !(eltype(cols) <: Bool)) ||
        invalid("$fname: cols must be a vector of Julia integers, got a $(typeof(cols))")
    for (k, c) in enumerate(cols)
        c >= 1 || invalid("$fname: column index $c (position $k) is out of bounds; columns are 1-based")
    end
    v = float64_vector(fname, "vals", vals)
    vector_length(v) == length(cols) ||
        invalid("$fname: $(length(cols)) columns but $(vector_length(v)) values; cols and vals must have the same length")
    return SparseAccumulation(h, Int(row), collect(Int, cols), v)
end

"""
    assemble(m, n, ops) -> SparseTensor

ADCME's `assemble`: the `m×n` `SparseTensor` holding every entry accumulated by `ops` (a
vector of what [`accumulate`](@ref)
returned, e.g. `[op1; op2]`, or one of them), repeated positions meaning their sum. Entries
are stored by row (ascending), within a row in the order of `ops` and of each op's columns,
as ADCME's accumulator lays them out; they are not merged. `m`, `n` are Julia integers.

Values with `abs(v) <= tol` (the handle's `tol`) are dropped entry by entry, as ADCME's
kernel does: Julia-vector values when the graph is built; tensor values, when `tol > 0`, when
the graph runs (every entry goes through one `SparseRemap` that also sorts and merges the
matrix, so its nnz is unknown). With `tol <= 0` tensor values are all kept: an exact zero of
a tensor stays stored as an explicit zero (the matrix is the same, and its gradient with
respect to that value stays correct), where ADCME drops it.

Ops: a `Const` for the indices and, with tensor values, `ConcatV2` of the values
(differentiable with respect to them). Errors (`OxiflowError`): ops of different
`SparseAssembler`s, a row above `m` or a column above `n` (naming the op), a non-integer or
tensor `m`, `n`.
"""
function assemble(m, n, ops::AbstractVector)
    fname = "assemble"
    for (d, what) in ((m, "m"), (n, "n"))
        d isa Tensor && invalid("$fname: $what is a Tensor; Oxiflow keeps a sparse matrix's dense shape static, so give $what as a Julia integer")
        (d isa Integer && !(d isa Bool) && d >= 0) || invalid("$fname: $what must be a non-negative Julia integer, got $(repr(d))")
    end
    m, n = Int(m), Int(n)
    for (k, op) in enumerate(ops)
        op isa SparseAccumulation || invalid("$fname: ops must come from accumulate, got a $(typeof(op)) at position $k")
    end
    ops = SparseAccumulation[op for op in ops]
    isempty(ops) && return spzero(m, n)
    h = ops[1].assembler
    for op in ops
        op.assembler == h ||
            invalid("$fname: ops from different SparseAssemblers ($(h) and $(op.assembler)); assemble the ops of one handle")
    end
    for (k, op) in enumerate(ops)
        op.row <= m || invalid("$fname: op $k accumulates row $(op.row), out of bounds for a matrix of $m rows")
        for c in op.cols
            c <= n || invalid("$fname: op $k accumulates column $c, out of bounds for a matrix of $n columns")
        end
    end
    ops = ops[sortperm([op.row for op in ops]; alg=MergeSort)]    # by row, stable: ADCME's layout
    ts = [op.vals for op in ops if op.vals isa Tensor]
    g = isempty(ts) ? get_default_graph() : getfield(ts[1], :graph)
    tol = h.tol
    I = Int64[]; J = Int64[]
    parts = Tensor[]; pending = Float64[]      # consecutive Julia values go into one constant
    for op in ops
        if op.vals isa Tensor
            isempty(pending) || (push!(parts, constant_in(g, pending)); pending = Float64[])
            push!(parts, op.vals)
            append!(I, fill(op.row - 1, length(op.cols))); append!(J, op.cols .- 1)
        else
            keep = abs.(op.vals) .> tol
            append!(pending, op.vals[keep])
            append!(I, fill(op.row - 1, count(keep))); append!(J, op.cols[keep] .- 1)
        end
    end
    isempty(pending) || push!(parts, constant_in(g, pending))
    isempty(parts) && return spzero(m, n)
    vals = length(parts) == 1 ? parts[1] : add_op("ConcatV2", parts; axis=0)
    s = SparseTensor(constant_in(g, hcat(I, J)), vals, (m, n))
    (isempty(ts) || tol <= 0) && return s
    return drop_small(s, tol)
end
assemble(m, n, op::SparseAccumulation) = assemble(m, n, SparseAccumulation[op])
assemble(m, n, ops) = invalid("assemble: ops must be what accumulate returned or a vector of them, got a $(typeof(ops))")

# `s` without its entries of |value| <= tol, decided when the graph runs: such an entry is
# moved to an extra row m (`SelectV2`) that a `SparseRemap` drops (its row map sends m to -1);
# the remap also sorts and merges. The values' gradient flows to the kept entries.
function drop_small(s::SparseTensor, tol::Real)
    small = abs(s.values) <= tol
    r = if_else(small, Int64(s.m), index_column(s, 0))
    idx = add_op("Pack", Tensor[r, index_column(s, 1)]; axis=1)
    extended = SparseTensor(idx, s.values, (s.m + 1, s.n))
    return remap(extended, [collect(0:s.m-1); -1], 0:s.n-1, s.m, s.n)
end

# ---------------------------------------------------------------- trisolve

@doc raw"""
    trisolve(a, b, c, d)

ADCME's `trisolve`: the solution `x` (a Float64 vector tensor of length `n`) of the
tridiagonal system

$$a_i x_{i-1} + b_i x_i + c_i x_{i+1} = d_i,$$

i.e. `Tridiagonal(a, b, c) * x = d` (ADCME's matrix `diagm(-1 => a, 0 => b, 1 => c)`): `a`
is the lower diagonal (length `n - 1`; ADCME's ``a_2, …, a_n``), `b` the diagonal (length
`n`), `c` the upper diagonal (length `n - 1`) and `d` the right-hand side (length `n`). Each
is a real Julia vector or a real vector tensor of known length, cast to Float64 (as ADCME's
`convert_to_tensor(..., Float64)`). ADCME runs its own Thomas-algorithm kernel
(`tri_solve`); here the three diagonals make a `SparseTensor` (`spdiag(n, -1 => a, 0 => b,
1 => c)`) solved by sparse LU (`SparseSolve`, CPU only), so the result is differentiable
with respect to all four. A singular matrix fails when the graph runs (an `OxiflowError`
naming `SparseSolve`); lengths that do not fit (or `n = 0`) raise an `OxiflowError` when the
op is added.
"""
function trisolve(a, b, c, d)
    fname = "trisolve"
    a, b, c, d = (float64_vector(fname, w, x) for (w, x) in (("a", a), ("b", b), ("c", c), ("d", d)))
    n = vector_length(b)
    n >= 1 || invalid("$fname: the diagonal b is empty; the system needs at least one unknown")
    la, lc, ld = vector_length(a), vector_length(c), vector_length(d)
    (la == n - 1 && lc == n - 1 && ld == n) ||
        invalid("$fname: lengths a $la, b $n, c $lc, d $ld; a and c (the lower and upper diagonals) must have length length(b) - 1 = $(n - 1) and d length(b) = $n")
    A = spdiag(n, -1 => a, 0 => b, 1 => c)
    return A \ d
end

# ---------------------------------------------------------------- reshape

"""
    reshape(s::SparseTensor, m, n)
    reshape(s::SparseTensor, (m, n))

ADCME's `reshape` of a `SparseTensor` (TF's `tf.sparse.reshape`, which ADCME calls): the
same entries in a matrix of dense shape `m×n`, in **row-major** order (TF's, NumPy's; not
Julia's column-major `reshape`): entry `(i, j)` (0-based) of the `M×N` matrix `s` has the
linear index `i*N + j` and moves to `(lin ÷ n, lin % n)`. So the dense result is
`permutedims(reshape(permutedims(Array(s)), n, m))` in Julia terms. One of `m`, `n` may be
`-1` or `:` (inferred, as TF's `-1`). The values are unchanged (same tensor, differentiable),
in the same order; repeated entries stay repeated. Ops: `GatherV2`, `Mul`, `Add`,
`FloorDiv`, `FloorMod`, `Pack` on the indices (none when the shape does not change). Errors
(`OxiflowError`): `m*n != M*N`, not two dimensions (ADCME's `SparseTensor` is a matrix), a
tensor or negative dimension.
"""
Base.reshape(s::SparseTensor, dims...) = reshape_sparse(s, length(dims) == 1 && dims[1] isa Union{Tuple,AbstractVector} ? Tuple(dims[1]) : dims)

function reshape_sparse(s::SparseTensor, dims::Tuple)
    fname = "reshape"
    M, N = s.m, s.n
    length(dims) == 2 ||
        invalid("$fname: a SparseTensor reshapes to a matrix (two dimensions), got $(length(dims)) dimensions $(repr(dims))")
    for d in dims
        d isa Tensor && invalid("$fname: a dimension is a Tensor; Oxiflow keeps a sparse matrix's dense shape static, so give Julia integers")
        (d isa Colon || (d isa Integer && !(d isa Bool) && d >= -1)) ||
            invalid("$fname: dimensions must be non-negative Julia integers, with at most one -1 or `:` (inferred), got $(repr(dims))")
    end
    inferred = findall(d -> d isa Colon || d == -1, collect(dims))
    length(inferred) <= 1 || invalid("$fname: at most one dimension may be inferred (-1 or :), got $(repr(dims))")
    if length(inferred) == 1
        other = dims[3 - inferred[1]]
        (other > 0 && (M * N) % other == 0) ||
            invalid("$fname: cannot infer a dimension to reshape a SparseTensor of size ($M, $N) ($(M * N) entries) into $(repr(dims))")
        dims = inferred[1] == 1 ? ((M * N) ÷ other, other) : (other, (M * N) ÷ other)
    end
    m, n = Int(dims[1]), Int(dims[2])
    m * n == M * N ||
        invalid("$fname: cannot reshape a SparseTensor of size ($M, $N) ($(M * N) entries) into ($m, $n) ($(m * n) entries)")
    (m, n) == (M, N) && return s
    M * N == 0 && return SparseTensor(s.indices, s.values, (m, n))    # no entry can be stored
    lin = index_column(s, 0) * Int64(N) + index_column(s, 1)
    idx = add_op("Pack", Tensor[fld(lin, Int64(n)), mod(lin, Int64(n))]; axis=1)
    return SparseTensor(idx, s.values, (m, n))
end
