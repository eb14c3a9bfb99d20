# ADCME's radial basis function representations `RBF2D`, `RBF3D` (src/rbf.jl there), as
# composites: the squared distances of every point to every center by broadcasting, the
# basis function of `(ε r)²` elementwise, and a matrix-vector product with the coefficients.

export RBF2D, RBF3D

"""
    RBF2D(xc, yc; c=missing, eps=missing, d=zeros(0), kind=0)
    RBF3D(xc, yc, zc; c=missing, eps=missing, d=zeros(0), kind=0)

ADCME's radial basis function representation on a 2-D (3-D) domain, with `nc` centers at
`(xc[j], yc[j])` (and `zc[j]`):

    f(x, y) = Σⱼ c[j] φ(rⱼ; eps[j]) + d₀ + d₁ x + d₂ y       (+ d₃ z in 3-D)

where `rⱼ` is the distance to center `j` and `kind` picks `φ`: 0 Gaussian `exp(-(ε r)²)`,
1 multiquadric `sqrt(1 + (ε r)²)`, 2 inverse quadratic `1 / (1 + (ε r)²)`, 3 inverse
multiquadric `1 / sqrt(1 + (ε r)²)`. `d` has 0, 1 (only `d₀`) or 3 (4 in 3-D) entries.
Defaults as ADCME's: `c` a new trainable `Variable(zeros(nc))`, `eps` ones (a number is used
for every center). Every argument may be a Julia vector or a Float64 tensor (a `Variable` to
train it). Calling the object, `rbf(x, y)` (`rbf(x, y, z)`), evaluates `f` at the points
given by the vectors `x`, `y` (`z`), a vector of their length.

Built from elementwise ops, `MatMul` and broadcasting, so `f` is differentiable in
everything (the coefficients, shapes and centers, and the points), also at a center (the
basis is a function of `r²` here; ADCME's kernel divides by `r` there), and runs on any
device those ops run on. It holds an `N × nc` matrix while it runs. Errors: an
`OxiflowError` naming the sizes when the centers, `c` and `eps` differ in length, when `d`
has another length, or for an unknown `kind`.
"""
struct RBF2D
    xc::Tensor
    yc::Tensor
    eps::Tensor
    c::Tensor
    d::Tensor
    kind::Int
end

"""
    RBF3D(xc, yc, zc; c=missing, eps=missing, d=zeros(0), kind=0)

The 3-D `RBF2D`: centers `(xc[j], yc[j], zc[j])`, `d` with 0, 1 or 4 entries
(`d₀ + d₁ x + d₂ y + d₃ z`), evaluated as `rbf(x, y, z)`. See `RBF2D`.
"""
struct RBF3D
    xc::Tensor
    yc::Tensor
    zc::Tensor
    eps::Tensor
    c::Tensor
    d::Tensor
    kind::Int
end

function RBF2D(xc, yc; c=missing, eps=missing, d=zeros(0), kind::Integer=0)
    centers, eps, c, d = rbf_parts("RBF2D", (xc, yc), c, eps, d, kind, (0, 1, 3))
    return RBF2D(centers..., eps, c, d, Int(kind))
end

function RBF3D(xc, yc, zc; c=missing, eps=missing, d=zeros(0), kind::Integer=0)
    centers, eps, c, d = rbf_parts("RBF3D", (xc, yc, zc), c, eps, d, kind, (0, 1, 4))
    return RBF3D(centers..., eps, c, d, Int(kind))
end

# The checked Float64 tensors of an RBF's parts; ADCME's defaults for `c` and `eps`.
function rbf_parts(fname, centers, c, eps, d, kind, d_lengths)
    0 <= kind <= 3 || invalid("$fname: kind must be 0 (Gaussian), 1 (multiquadric), 2 (inverse quadratic) or 3 (inverse multiquadric), got $kind")
    f64(v) = v isa Tensor ? v : constant(convert(Vector{Float64}, collect(v)))
    cs = map(f64, centers)
    nc = size(cs[1], 1)
    nc === nothing && (c === missing || !(eps isa Tensor)) &&
        invalid("$fname: the number of centers is unknown until the graph runs; give c and eps as tensors")
    c = c === missing ? Variable(zeros(nc)) : f64(c)
    eps = eps === missing ? f64(ones(nc)) : eps isa Real ? f64(fill(Float64(eps), nc)) : f64(eps)
    parts = (cs..., c, eps)
    all(t -> ndims(t) == 1 && t.dtype == Float64, parts) ||
        invalid("$fname: the centers, c and eps must be Float64 vectors, got $(join(("$(t.dtype) $(size(t))" for t in parts), ", "))")
    lens = map(t -> size(t, 1), parts)
    known = filter(l -> l !== nothing, collect(lens))
    all(l -> l == known[1], known) ||
        invalid("$fname: the centers, c and eps must have one length, got $(join(lens, ", "))")
    d = f64(d)
    (ndims(d) == 1 && size(d, 1) in d_lengths) ||
        invalid("$fname: d must have $(join(d_lengths, ", ", " or ")) entries, got size $(size(d))")
    return cs, eps, c, d
end

(o::RBF2D)(x, y) = rbf_eval((x, y), (o.xc, o.yc), o.eps, o.c, o.d, o.kind)
(o::RBF3D)(x, y, z) = rbf_eval((x, y, z), (o.xc, o.yc, o.zc), o.eps, o.c, o.d, o.kind)

function rbf_eval(points, centers, eps, c, d, kind)
    ps = map(p -> as_tensor(p, c), points)
    col(t) = add_op("ExpandDims", [t]; dim=1)    # N -> N×1
    row(t) = add_op("ExpandDims", [t]; dim=0)    # nc -> 1×nc
    r2 = sum((col(p) .- row(q)) .^ 2 for (p, q) in zip(ps, centers))
    s = r2 .* row(eps .* eps)                      # (ε r)², N×nc
    phi = kind == 0 ? exp(-s) : kind == 1 ? sqrt(1.0 .+ s) : kind == 2 ? 1.0 ./ (1.0 .+ s) : 1.0 ./ sqrt(1.0 .+ s)
    z = add_op("Squeeze", [add_op("MatMul", [phi, col(c)])]; squeeze_dims=[1])
    nd = size(d, 1)
    nd >= 1 && (z = z .+ d[1])
    for k in 2:nd
        z = z .+ d[k] .* ps[k-1]
    end
    return z
end
