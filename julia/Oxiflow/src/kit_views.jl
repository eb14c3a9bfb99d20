# ADCME's landscape and gradient views (ADCME.jl src/kit.jl, also in ADCMEKit.jl), the
# inverse-modeling recipe's steps 3 and 4: `lineview`/`meshview`/`pcolormeshview` evaluate a
# loss along a segment or over a plane of parameter values, `gradview`/`jacview`/`PCLview`
# check a graph's derivative against finite differences along a random direction. ADCME
# draws them with PyPlot and fails without it; here they are drawn the same way when the
# user's program has loaded PyPlot, and otherwise summarized as text. Each returns its data.

export linedata, lineview, meshdata, meshview, pcolormeshview, gradview, jacview, PCLview

# PyPlot when the user's program has loaded it, else nothing.
pyplot() = isdefined(Main, :PyPlot) ? Main.PyPlot : nothing

"""
    linedata(θ1, θ2=nothing; n=10) -> Vector

ADCME's points of the segment from `θ1` to `θ2`: `(1 - α) θ1 + α θ2` for `α` in
`LinRange(0, 1, n)`, each of `θ1`'s shape. Without `θ2`, the end is `θ1 .* (1 .+ randn(...))`
(Julia's global RNG, as ADCME).
"""
function linedata(θ1, θ2=nothing; n::Integer=10)
    n >= 1 || invalid("linedata: n must be at least 1, got $n")
    θ2 === nothing && (θ2 = θ1 .* (1 .+ randn(size(θ1)...)))
    size(θ1) == size(θ2) || invalid("linedata: θ1 has size $(size(θ1)) and θ2 $(size(θ2))")
    return [θ1 .* (1 - x) .+ θ2 .* x for x in LinRange(0.0, 1.0, n)]
end

"""
    lineview(sess, pl, loss, θ1, θ2=nothing; n=10) -> Vector{Float64}
    lineview(losses)

ADCME's line view of a loss landscape: `loss` (a scalar tensor) run with the placeholder `pl`
fed each point of [`linedata`](@ref)`(θ1, θ2; n)`, i.e. `h(α) = loss((1 - α) θ1 + α θ2)` at
`n` values of `α` from 0 to 1. Returns the losses. With PyPlot loaded, ADCME's plot of `h`;
without it the values are printed. `lineview(losses)` shows given values.
"""
function lineview(sess::Session, pl, loss, θ1, θ2=nothing; n::Integer=10)
    dat = linedata(θ1, θ2; n=n)
    V = [scalar_loss(run(sess, loss, pl => d), "lineview") for d in dat]
    return lineview(V)
end
function lineview(losses::AbstractVector{<:Real})
    α = collect(LinRange(0.0, 1.0, length(losses)))
    mp = pyplot()
    if mp !== nothing
        mp.close("all")
        mp.plot(α, losses)
        mp.xlabel("\$\\alpha\$")
        mp.ylabel("loss")
        mp.grid("on")
    else
        println("lineview: loss((1 - α) θ1 + α θ2)")
        for (a, l) in zip(α, losses)
            @printf("  α = %.4f  loss = %.6e\n", a, l)
        end
    end
    return Vector{Float64}(losses)
end

# A fetched loss as a Float64, or an error naming the view when it is not a scalar.
function scalar_loss(v, fname)
    v isa Real && return Float64(v)
    v isa AbstractArray && length(v) == 1 && return Float64(v[1])
    invalid("$fname: the loss must be a scalar tensor, got a value of size $(size(v))")
end

"""
    meshdata(θ; a=1, b=1, m=10, n=10, direction=missing) -> Matrix

ADCME's plane of parameter values around `θ`: entry `[i, j]` is `θ + δ α_i + γ β_j` with
`α = LinRange(-a, a, m)`, `β = LinRange(-b, b, n)`. `δ` and `γ` are random directions
(`randn`, Julia's global RNG); with `direction`, `δ = direction - θ` and `γ` is random with
`δ`'s norm, so that `α = 1` reaches `direction`.
"""
function meshdata(θ; a::Real=1, b::Real=1, m::Integer=10, n::Integer=10, direction=missing)
    (m >= 1 && n >= 1) || invalid("meshdata: m and n must be at least 1, got m = $m, n = $n")
    if ismissing(direction)
        δ = randn(size(θ)...); γ = randn(size(θ)...)
    else
        size(direction) == size(θ) || invalid("meshdata: direction has size $(size(direction)) and θ $(size(θ))")
        δ = direction .- θ
        γ = randn(size(θ)...)
        γ = γ ./ norm(γ) .* norm(δ)
    end
    as, bs = LinRange(-a, a, m), LinRange(-b, b, n)
    return [θ .+ δ .* as[i] .+ γ .* bs[j] for i in 1:m, j in 1:n]
end

# The grids α[i, j] = as[i], β[i, j] = bs[j] of a view over an m×n plane.
function mesh_grids(m, n, a, b)
    as, bs = LinRange(-a, a, m), LinRange(-b, b, n)
    return [as[i] for i in 1:m, j in 1:n], [bs[j] for i in 1:m, j in 1:n]
end

"""
    meshview(sess, pl, loss, θ; a=1, b=1, m=9, n=9, direction=missing) -> (α, β, losses)
    meshview(losses, a=1, b=1)
    pcolormeshview(sess, pl, loss, θ; a=1, b=1, m=9, n=9, direction=missing)
    pcolormeshview(losses, a=1, b=1)

ADCME's surface view of a loss landscape: `loss` (a scalar tensor) run with the placeholder
`pl` fed each point of [`meshdata`](@ref)`(θ; a, b, m, n, direction)`. Returns the grids
`α[i, j]` (from `-a` to `a`) and `β[i, j]` (from `-b` to `b`) and the `m×n` losses; `θ` is
at the center. With PyPlot loaded, ADCME's 3-D mesh (`meshview`) or colour map
(`pcolormeshview`); without it the smallest and largest losses and the loss at `θ` are
printed.
"""
function meshview(sess::Session, pl, loss, θ; a::Real=1, b::Real=1, m::Integer=9, n::Integer=9, direction=missing)
    return meshview(mesh_losses(sess, pl, loss, θ, a, b, m, n, direction, "meshview"), a, b)
end
function pcolormeshview(sess::Session, pl, loss, θ; a::Real=1, b::Real=1, m::Integer=9, n::Integer=9, direction=missing)
    return pcolormeshview(mesh_losses(sess, pl, loss, θ, a, b, m, n, direction, "pcolormeshview"), a, b)
end
function mesh_losses(sess, pl, loss, θ, a, b, m, n, direction, fname)
    dat = meshdata(θ; a=a, b=b, m=m, n=n, direction=direction)
    return [scalar_loss(run(sess, loss, pl => d), fname) for d in dat]
end

function meshview(losses::AbstractMatrix{<:Real}, a::Real=1, b::Real=1)
    return show_mesh("meshview", losses, a, b) do mp, α, β, c
        mp.mesh(α, β, losses)
        mp.xlabel("\$\\alpha\$")
        mp.ylabel("\$\\beta\$")
        mp.zlabel("loss")
        mp.scatter3D(α[c...], β[c...], losses[c...], color="red", s=100)
    end
end
function pcolormeshview(losses::AbstractMatrix{<:Real}, a::Real=1, b::Real=1)
    return show_mesh("pcolormeshview", losses, a, b) do mp, α, β, c
        mp.pcolormesh(α, β, losses)
        mp.xlabel("\$\\alpha\$")
        mp.ylabel("\$\\beta\$")
        mp.scatter(0.0, 0.0, marker="*", s=100)
        mp.colorbar()
    end
end

# The grids and losses of a mesh view, drawn by `draw(PyPlot, α, β, center)` when PyPlot is
# loaded, else summarized.
function show_mesh(draw::Function, fname, losses, a, b)
    m, n = size(losses)
    α, β = mesh_grids(m, n, a, b)
    mp = pyplot()
    if mp !== nothing
        mp.close("all")
        draw(mp, α, β, ((m + 1) ÷ 2, (n + 1) ÷ 2))
    else
        print_mesh(fname, losses)
    end
    return α, β, Matrix{Float64}(losses)
end
@doc (@doc meshview) pcolormeshview

function print_mesh(fname, losses)
    m, n = size(losses)
    lo, hi = argmin(losses), argmax(losses)
    println("$fname: $m×$n losses over θ + α δ + β γ; at θ (the center): ",
            @sprintf("%.6e", losses[(m+1)÷2, (n+1)÷2]))
    println(@sprintf("  smallest %.6e at [%d, %d], largest %.6e at [%d, %d]",
                     losses[lo], Tuple(lo)..., losses[hi], Tuple(hi)...))
end

"""
    gradview(sess, pl, loss, u0; scale=1.0, mpi=false) -> (err1, err2)
    gradview(sess, pl, loss, u0, grad; scale=1.0, mpi=false)

ADCME's gradient check of a graph: with `v` a random direction (`rand`, Julia's global RNG)
and `γ = scale ./ 10 .^ (1:5)`, `err1[i] = ‖L(u0 + γ v) - L(u0)‖` (finite differences) and
`err2[i] = ‖L(u0 + γ v) - L(u0) - γ g⋅v‖`, `L` being `loss` run with the placeholder `pl` fed
and `g` the gradient `gradients(loss, pl)` (or the given `grad` tensor) at `u0`. A right
gradient makes `err2` fall as `γ²`, a wrong one as `γ`. With PyPlot loaded, ADCME's
log-log plot (saved to `mpi_gradview.png` when `mpi`); otherwise the two lists and their
orders are printed, as [`test_gradients`](@ref). `mpi=true`: only rank 0 shows them.
"""
function gradview(sess::Session, pl, loss, u0; scale::Real=1.0, mpi::Bool=false)
    g = gradients(loss, pl)
    g === nothing && invalid("gradview: loss does not depend on the placeholder $(convert_to_tensor(pl).name)")
    return gradview(sess, pl, loss, u0, g; scale=scale, mpi=mpi)
end
function gradview(sess::Session, pl, loss, u0, grad; scale::Real=1.0, mpi::Bool=false)
    J = run(sess, grad, pl => u0)
    return view_check(sess, loss, pl, u0, (), scale, "gradview"; mpi=mpi, savefile=mpi ? "mpi_gradview.png" : nothing) do γ, v
        size(J) == size(v) ? γ * sum(J .* v) : γ .* (J * vec(v))
    end
end

"""
    jacview(sess, f, θ, u0, feeds...) -> (err1, err2)

ADCME's Jacobian check of a residual: `r, J = f(θ, u)` with `u` a new Float64 placeholder of
`length(u0)` and `J` the Jacobian `∂r/∂u` (a dense matrix tensor or a `SparseTensor`).
Initializes `sess`'s variables (as ADCME's `init(sess)`), then with `v` a random direction
and `γ = 1 ./ 10 .^ (1:5)` returns `err1[i] = ‖r(u0 + γ v) - r(u0)‖` and `err2[i] = ‖r(u0 +
γ v) - r(u0) - γ J v‖`; `feeds` (pairs) are added to every run. Shown as
[`gradview`](@ref).
"""
function jacview(sess::Session, f::Function, θ, u0::AbstractVector{<:Real}, feeds::Pair...)
    u = placeholder(Float64; shape=[length(u0)])
    r, J = f(θ, u)
    r = convert_to_tensor(r)
    J isa SparseTensor || (J = convert_to_tensor(J))     # a constant Jacobian may be an array
    init(sess)
    r0, J0 = run(sess, [r, J], u => u0, feeds...)
    size(J0) == (length(r0), length(u0)) ||
        invalid("jacview: f returned a Jacobian of size $(size(J0)) for $(length(r0)) residuals and $(length(u0)) unknowns")
    return view_check(sess, r, u, u0, feeds, 1.0, "jacview") do γ, v
        γ .* (J0 * v)
    end
end

"""
    PCLview(sess, f, L, θ, u0, feeds...; options=missing) -> (err1, err2)

ADCME's check of the physics-constrained gradient of [`NonlinearConstrainedProblem`](@ref)`(f,
L, x, u0)` with respect to a new Float64 placeholder `x` fed `θ` (a vector, a number, or a
tensor whose value is taken): initializes `sess`'s variables, then the errors of
[`gradview`](@ref) along a random direction, with `γ = 1 ./ 10 .^ (1:5)`. ADCME's `options`
cannot be passed (its `NonlinearConstrainedProblem` takes none either); the Newton settings
are `Oxiflow.options.newton_raphson`.
"""
function PCLview(sess::Session, f::Function, L::Function, θ, u0, feeds::Pair...; options=missing)
    ismissing(options) || invalid("PCLview: options are not taken; set Oxiflow.options.newton_raphson instead")
    θ isa Tensor && (θ = run(sess, θ, feeds...))
    θv = θ isa Real ? [Float64(θ)] : Vector{Float64}(vec(θ))
    x = placeholder(Float64; shape=[length(θv)])
    l, _, g = NonlinearConstrainedProblem(f, L, x, u0)
    init(sess)
    g0 = run(sess, g, x => θv, feeds...)
    return view_check(sess, l, x, θv, feeds, 1.0, "PCLview") do γ, v
        γ * sum(g0 .* v)
    end
end

# The errors of the three views: `out` run with `pl` fed u0 + γv (`v` random, of u0's
# shape) against its value at u0 and the linearization `lin(γ, v)`; shown by rank 0 only
# when `mpi`.
function view_check(lin::Function, sess, out, pl, u0, feeds, scale, fname; mpi::Bool=false, savefile=nothing)
    v = u0 isa Real ? rand() : rand(size(u0)...)
    γs = scale ./ 10 .^ (1:5)
    o0 = run(sess, out, pl => u0, feeds...)
    errs = map(γs) do γ
        o1 = run(sess, out, pl => u0 .+ γ .* v, feeds...)
        norm(o1 .- o0), norm(o1 .- o0 .- lin(γ, v))
    end
    err1, err2 = first.(errs), last.(errs)
    (mpi && mpi_initialized() && mpi_rank() > 0) || show_check(γs, err1, err2, fname, savefile)
    return err1, err2
end
