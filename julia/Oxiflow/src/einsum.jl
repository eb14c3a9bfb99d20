# einsum (ADCME's `einsum`, TF's `tf.einsum`) as a composite of `Transpose`, `Reshape`,
# `Sum`, `MatrixDiagPart` and `MatMul`/`BatchMatMulV2`: each pair of operands is brought to
# `[batch, kept, contracted]` layout and multiplied, the way TF 1.x's Python einsum
# reduced an equation to matrix products. Gradients come from those ops.

# One parsed operand or result: its letters, in order.
const EinsumTerm = Vector{Char}

function einsum_parse(equation::AbstractString, n::Int)
    eq = replace(String(equation), r"\s" => "")
    occursin("...", eq) && invalid("einsum: ellipsis (...) is not supported in \"$equation\"; name every axis")
    lhs, rhs = occursin("->", eq) ? split(eq, "->"; limit=2) : (eq, nothing)
    terms = EinsumTerm[collect(t) for t in split(lhs, ',')]
    length(terms) == n || invalid("einsum: \"$equation\" has $(length(terms)) operand(s) but $n tensor(s) were given")
    for t in terms, c in t
        isletter(c) || invalid("einsum: '$c' in \"$equation\" is not an axis letter")
    end
    out = if rhs === nothing
        # NumPy's implicit output: the letters that appear once, in alphabetical order
        all_letters = reduce(vcat, terms)
        sort(unique(filter(c -> count(==(c), all_letters) == 1, all_letters)))
    else
        collect(rhs)
    end
    for c in out
        isletter(c) || invalid("einsum: '$c' in the output of \"$equation\" is not an axis letter")
        any(t -> c in t, terms) || invalid("einsum: output letter '$c' of \"$equation\" appears in no operand")
    end
    length(unique(out)) == length(out) || invalid("einsum: the output of \"$equation\" repeats a letter")
    return terms, out
end

# Transpose `t` (letters `have`) to the letter order `want` (a permutation of `have`).
function einsum_permute(t::Tensor, have::AbstractVector, want::AbstractVector)
    perm = [findfirst(==(c), have) - 1 for c in want]
    return perm == collect(0:length(perm)-1) ? t : transpose_tensor(t, perm)
end

# `t` reshaped to `dims` (an entry `nothing` is a size known only when the graph runs: the
# product of a group of letters one of which is unknown). Reshape infers one such entry
# (`-1`); two would need the fed sizes, so they raise naming `einsum`.
function einsum_reshape(t::Tensor, dims, equation)
    want = Int[engine_dim(d) for d in dims]
    want == engine_dims(t) && return t
    count(==(-1), want) <= 1 ||
        unimplemented("einsum: \"$equation\" would reshape a tensor of size $(size(t)) to $(Tuple(dims)), with more than one unknown dimension (nothing); give the placeholders more of their sizes")
    return add_op("Reshape", [t]; shape=want)
end

# Removes a repeated letter of one operand by taking the diagonal (`ii->i`, only for a pair
# of axes that are the operand's last two after a transpose; sizes must agree).
function einsum_diagonals(t::Tensor, term::AbstractVector, equation)
    while length(unique(term)) < length(term)
        c = term[findfirst(k -> count(==(term[k]), term) > 1, 1:length(term))]
        pos = findall(==(c), term)
        length(pos) == 2 || invalid("einsum: letter '$c' appears more than twice in one operand of \"$equation\"")
        (size(t, pos[1]) === nothing || size(t, pos[2]) === nothing) &&
            unimplemented("einsum: letter '$c' repeats in an operand of size $(size(t)) of \"$equation\" along an unknown dimension (nothing): the diagonal needs both sizes known to check them")
        size(t, pos[1]) == size(t, pos[2]) ||
            invalid("einsum: letter '$c' names axes of sizes $(size(t, pos[1])) and $(size(t, pos[2])) in \"$equation\"")
        keep = [k for k in 1:length(term) if !(k in pos)]
        perm = [keep; pos] .- 1
        perm == collect(0:length(term)-1) || (t = transpose_tensor(t, perm))
        t = add_op("MatrixDiagPart", [t])
        term = Char[term[keep]; c]
    end
    return t, term
end

# Sums away the letters of `term` that are not in `keep`.
function einsum_sum_out(t::Tensor, term::AbstractVector, keep)
    gone = [k - 1 for k in 1:length(term) if !(term[k] in keep)]
    isempty(gone) && return t, term
    return add_op("Sum", [t]; axis=gone, keep_dims=false), [c for c in term if c in keep]
end

# The product of two operands, keeping the letters in `keep` (in the order batch, a's, b's).
function einsum_pair(a::Tensor, ta::AbstractVector, b::Tensor, tb::AbstractVector, keep, dimof, equation)
    batch = [c for c in ta if c in tb && c in keep]
    contr = [c for c in ta if c in tb && !(c in keep)]
    akept = [c for c in ta if !(c in tb)]
    bkept = [c for c in tb if !(c in ta)]
    # a group's size, `nothing` when one of its letters is unknown
    prodof(cs) = any(c -> dimof[c] === nothing, cs) ? nothing : reduce(*, Int[dimof[c] for c in cs]; init=1)
    a2 = einsum_reshape(einsum_permute(a, ta, [batch; akept; contr]), isempty(batch) ?
                        (prodof(akept), prodof(contr)) : (prodof(batch), prodof(akept), prodof(contr)), equation)
    b2 = einsum_reshape(einsum_permute(b, tb, [batch; contr; bkept]), isempty(batch) ?
                        (prodof(contr), prodof(bkept)) : (prodof(batch), prodof(contr), prodof(bkept)), equation)
    p = isempty(batch) ? add_op("MatMul", [a2, b2]) : add_op("BatchMatMulV2", [a2, b2])
    term = [batch; akept; bkept]
    return einsum_reshape(p, Any[dimof[c] for c in term], equation), term
end

"""
    einsum(equation, tensors...)

Einstein summation (ADCME's `einsum`, TF's `tf.einsum`, NumPy's rules): `equation` names
each operand's axes with letters, `,` between operands, and the result's axes after `->`
(without `->`, the letters that appear once, alphabetically). Letters missing from the
result are summed; a letter repeated within one operand takes a diagonal (`"ii->i"`).
Examples: `einsum("ij,jk->ik", A, B)` (matrix product), `einsum("bij,bjk->bik", X, Y)`
(batched), `einsum("i,i->", x, y)` (dot), `einsum("ij->ji", A)` (transpose), `einsum("ii",
A)` (trace). Operands are tensors or Julia arrays (arrays take the first tensor's dtype)
with one dtype. A composite of `Transpose`, `Reshape`, `Sum`, `MatrixDiagPart`, `MatMul`
and `BatchMatMulV2`, so it is differentiable. Errors (`OxiflowError`) name the equation:
wrong operand count, a letter of two different sizes, an ellipsis (not supported).

Dimensions may be unknown (`nothing`, a batch fed at run time): `einsum("bij,jk->bik", x, W)`
of an `x` of size `(nothing, 2, 3)` is `(nothing, 2, 4)`. Each product reshapes its operands
to `[batch, kept, contracted]` groups, and Reshape infers one unknown size; an equation that
would group two unknown letters apart (two unknown batch letters kept in the result, say)
raises an `OxiflowError` (UnimplementedError) naming `einsum`, and so does a repeated
letter (a diagonal) along an unknown dimension. A batch letter unknown in both operands is
multiplied as `BatchMatMulV2` does: fed sizes that differ fail the run unless one is 1,
which broadcasts.
"""
function einsum(equation::AbstractString, args...)
    isempty(args) && invalid("einsum: \"$equation\" needs at least one operand")
    xs = collect(Any, args)
    any(x -> x isa Tensor, xs) || (xs[1] = constant(xs[1]))
    ts = as_tensors(xs, "einsum")
    terms, out = einsum_parse(equation, length(ts))
    # each letter's size: the known one where operands disagree on knowing it
    dimof = Dict{Char,Union{Int,Nothing}}()
    for (k, (t, term)) in enumerate(zip(ts, terms))
        length(term) == ndims(t) ||
            invalid("einsum: operand $k of \"$equation\" has $(length(term)) letters but shape $(size(t))")
        for (i, c) in enumerate(term)
            d = get!(dimof, c, size(t, i))
            d === nothing && (dimof[c] = d = size(t, i))
            (size(t, i) === nothing || d == size(t, i)) || invalid("einsum: letter '$c' stands for sizes $d and $(size(t, i)) in \"$equation\"")
        end
    end
    # diagonals first, then letters used nowhere else are summed before any product
    cur = Tensor[]; cterms = EinsumTerm[]
    for (k, (t, term)) in enumerate(zip(ts, terms))
        t, term = einsum_diagonals(t, term, equation)
        others = vcat(out, [terms[j] for j in 1:length(terms) if j != k]...)
        t, term = einsum_sum_out(t, term, others)
        push!(cur, t); push!(cterms, term)
    end
    acc, aterm = cur[1], cterms[1]
    for k in 2:length(cur)
        later = vcat(out, cterms[k+1:end]...)
        acc, aterm = einsum_pair(acc, aterm, cur[k], cterms[k], later, dimof, equation)
        acc, aterm = einsum_sum_out(acc, aterm, later)
    end
    acc, aterm = einsum_sum_out(acc, aterm, out)
    return einsum_permute(acc, aterm, out)
end
