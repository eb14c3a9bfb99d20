# Base operators and functions on tensors, from tables (TF op type per Julia function).

const TensorLike = Union{Tensor,Number,AbstractArray}

# A Julia number or array mixed with a tensor takes the tensor's dtype (ADCME's rule) and
# goes into the tensor's graph; an inexact conversion (1.5 into an Int64 tensor) is an error.
function as_tensor(x, like::Tensor)
    x isa Tensor && return x
    T = like.dtype
    a = as_array(x)
    try
        return constant_in(getfield(like, :graph), convert(Array{T}, a))
    catch e
        e isa InexactError || rethrow()
        invalid("cannot use $(repr(x)) ($(eltype(a))) with a $T tensor without losing precision")
    end
end
as_tensor(x) = x isa Tensor ? x : constant(x)

function binary(op::AbstractString, a, b; name=nothing)
    ta = a isa Tensor ? a : as_tensor(a, b)
    tb = b isa Tensor ? b : as_tensor(b, ta)
    return add_op(op, [ta, tb]; name=name)
end

# Elementwise binary operators (NumPy broadcasting): +, -, /, ^ and their dotted forms.
for (f, op) in ((:+, "Add"), (:-, "Sub"), (:/, "RealDiv"), (:^, "Pow"))
    @eval begin
        Base.$f(a::Tensor, b::Tensor) = binary($op, a, b)
        Base.$f(a::Tensor, b::Union{Number,AbstractArray}) = binary($op, a, b)
        Base.$f(a::Union{Number,AbstractArray}, b::Tensor) = binary($op, a, b)
    end
end
# resolve ambiguities with Base's ^(::Number, ::Integer) style methods
Base.:^(a::Tensor, b::Integer) = binary("Pow", a, b)
Base.literal_pow(::typeof(^), a::Tensor, ::Val{p}) where {p} = binary("Pow", a, p)

const BROADCAST_OPS = Dict{Function,String}((+) => "Add", (-) => "Sub", (*) => "Mul", (/) => "RealDiv", (^) => "Pow")

for (A, B) in ((:Tensor, :Tensor), (:Tensor, :TensorLike), (:TensorLike, :Tensor))
    @eval function Base.broadcasted(f::Function, a::$A, b::$B)
        op = get(BROADCAST_OPS, f, nothing)
        op === nothing ? f(as_tensor(a), as_tensor(b)) : binary(op, a, b)
    end
end
Base.broadcasted(::typeof(Base.literal_pow), ::typeof(^), a::Tensor, ::Val{p}) where {p} = binary("Pow", a, p)
# A fused dot expression mixing a tensor with Julia values (`t .* (2 .* k)`): Julia hands the
# part without tensors over unevaluated (parts with tensors are tensors already); it is
# evaluated first, as Base would.
Base.broadcasted(f::Function, a::Tensor, b::Broadcast.Broadcasted) = Base.broadcasted(f, a, Broadcast.materialize(b))
Base.broadcasted(f::Function, a::Broadcast.Broadcasted, b::Tensor) = Base.broadcasted(f, Broadcast.materialize(a), b)
# dotted unary calls such as sin.(x) are the op itself (ADCME refuses them; they are harmless)
Base.broadcasted(f::Function, a::Tensor) = f(a)

"""
    a * b

ADCME's rules: with a scalar (number or rank-0 tensor) on either side, elementwise `Mul`;
matrix × matrix is `MatMul`; matrix × vector is a matrix-vector product; vector × vector
is elementwise. Other ranks raise an `OxiflowError`. Unknown dimensions (`nothing` in
`size`, e.g. the batch of a `placeholder(Float64; shape=[nothing, 10])`) pass through: an
`n×10` batch times a `10×k` matrix is an `n×k` batch for every fed `n`; a size that does not
fit fails when the graph runs, naming `MatMul` and both shapes.
"""
function Base.:*(a::Tensor, b::Tensor)
    ra, rb = ndims(a), ndims(b)
    if ra == 0 || rb == 0 || (ra == 1 && rb == 1)
        return binary("Mul", a, b)
    elseif ra == 2 && rb == 2
        return add_op("MatMul", [a, b])
    elseif ra == 2 && rb == 1
        m = add_op("MatMul", [a, add_op("Reshape", [b]; shape=[engine_dim(size(b, 1)), 1])])
        return add_op("Reshape", [m]; shape=[engine_dim(size(a, 1))])
    end
    invalid("*: no product of a rank-$ra tensor $(size(a)) and a rank-$rb tensor $(size(b)); use .* for elementwise products")
end
Base.:*(a::Tensor, b::Union{Number,AbstractArray}) = a * as_tensor(b, a)
Base.:*(a::Union{Number,AbstractArray}, b::Tensor) = as_tensor(a, b) * b

Base.:-(a::Tensor) = add_op("Neg", [a])
Base.:+(a::Tensor) = a

# Unary elementwise functions: Julia function => TF op type.
for (f, op) in (
    (:sin, "Sin"),
    (:cos, "Cos"),
    (:exp, "Exp"),
    (:log, "Log"),
    (:tanh, "Tanh"),
    (:sqrt, "Sqrt"),
)
    @eval Base.$f(a::Tensor) = add_op($op, [a])
end

"""
    cast(t, T) / cast(T, t)

Converts a tensor to element type `T` (`Cast`, TF's `tf.cast`).
"""
cast(t::Tensor, T::Type) = t.dtype == T ? t : add_op("Cast", [t]; DstT=T)
cast(T::Type, t::Tensor) = cast(t, T)

"""`add_n(ts)`: the sum of same-shaped tensors (`AddN`)."""
add_n(ts::AbstractVector) = add_op("AddN", Tensor[as_tensor(t) for t in ts])

"""`matmul(a, b)`: `MatMul` of two matrices (TF's `tf.matmul`)."""
matmul(a::Tensor, b::Tensor) = add_op("MatMul", [a, b])
