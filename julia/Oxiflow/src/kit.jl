# ADCME's gradient checks (ADCME.jl src/kit.jl): `test_gradients`, `test_jacobian` and
# `test_hessian` compare f(x0 + γv) - f(x0) with the linearization the user's derivative
# gives, for γ = scale/10, ..., scale/10^5. With a correct derivative the second error falls
# as γ² and the first as γ. ADCME plots them with PyPlot (`showfig=true`, its default); here
# they are plotted the same way when the user's program has loaded PyPlot, else printed
# with their observed orders.

export print_tensor, test_gradients, test_jacobian, test_hessian, debug

"""
    debug(sess, o)

ADCME's `debug`: runs `o` in `sess` and returns its value; when the run fails with an
`OxiflowError`, prints the whole error to `stdout` instead of raising it and returns
`nothing` (ADCME prints TensorFlow's Python traceback this way; Oxiflow's errors already name
the op, device and shapes). Other exceptions propagate.
"""
function debug(sess::Session, o)
    try
        return run(sess, o)
    catch e
        e isa OxiflowError || rethrow()
        showerror(stdout, e); println()
        return nothing
    end
end

"""
    test_gradients(f, x0; scale=1.0, showfig=true, mpi=false) -> (err1, err2)

ADCME's gradient check of a scalar function: `y, g = f(x)` returns the value and the
gradient (a vector like `x`). With `v` a random direction (Julia's global RNG, as ADCME) and
`γ = scale ./ 10 .^ (1:5)`, returns the finite-difference errors `err1[i] = |f(x0 + γv) -
f(x0)|` and the linearization errors `err2[i] = |f(x0 + γv) - f(x0) - γ g⋅v|`: `err2`
falls as `γ²` (100x per step) when `g` is right, as `γ` when it is not. `showfig`: with
`PyPlot` loaded in `Main`, ADCME's log-log plot saved to `test.png`; without it the two
lists and their orders are printed (ADCME raises an error there). `mpi=true`: only rank 0
plots or prints.
"""
function test_gradients(f::Function, x0::AbstractVector{<:Real}; scale::Real=1.0, showfig::Bool=true, mpi::Bool=false)
    f0, g = f(x0)
    length(g) == length(x0) || invalid("test_gradients: f returned a gradient of length $(length(g)) for an x of length $(length(x0))")
    return derivative_check(x0, scale, showfig, mpi, "test_gradients") do v, γ
        f1, _ = f(x0 .+ γ .* v)
        abs(f1 - f0), abs(f1 - f0 - γ * sum(g .* v))
    end
end

"""
    test_jacobian(f, x0; scale=1.0, showfig=true, mpi=false) -> (err1, err2)
    test_hessian(f, x0; kwargs...)

ADCME's Jacobian check: `y, J = f(x)` returns a vector and its Jacobian (`length(y) ×
length(x)`); the errors are the norms `‖f(x0 + γv) - f(x0)‖` and `‖f(x0 + γv) - f(x0) -
γ J v‖`, otherwise as [`test_gradients`](@ref). `test_hessian` is the same check for `g, H =
f(x)`, a gradient and its Hessian.
"""
function test_jacobian(f::Function, x0::AbstractVector{<:Real}; scale::Real=1.0, showfig::Bool=true, mpi::Bool=false)
    f0, J = f(x0)
    size(J) == (length(f0), length(x0)) ||
        invalid("test_jacobian: f returned a Jacobian of size $(size(J)) for $(length(f0)) outputs and $(length(x0)) inputs")
    return derivative_check(x0, scale, showfig, mpi, "test_jacobian") do v, γ
        f1, _ = f(x0 .+ γ .* v)
        norm(f1 .- f0), norm(f1 .- f0 .- γ .* (J * v))
    end
end
test_hessian(f::Function, x0::AbstractVector{<:Real}; kwargs...) = test_jacobian(f, x0; kwargs...)
@doc (@doc test_jacobian) test_hessian

# The five steps of the checks; `errors(v, γ)` gives (finite difference, linearization).
function derivative_check(errors::Function, x0, scale, showfig, mpi, fname)
    v = rand(length(x0))
    γs = scale ./ 10 .^ (1:5)
    errs = [errors(v, γ) for γ in γs]
    err1, err2 = first.(errs), last.(errs)
    (showfig && !(mpi && mpi_initialized() && mpi_rank() > 0)) && show_check(γs, err1, err2, fname, "test.png")
    return err1, err2
end

# The errors of a derivative check, plotted (ADCME's figure, saved to `savefile` unless it is
# `nothing`) with PyPlot loaded, and printed with their observed orders.
function show_check(γs, err1, err2, fname, savefile)
    if isdefined(Main, :PyPlot)
        mp = Main.PyPlot
        mp.close("all")
        mp.loglog(γs, err1, label="Finite Difference")
        mp.loglog(γs, err2, label="Automatic Differentiation")
        mp.loglog(γs, γs * 0.5 * abs(err1[1]) / γs[1], "--", label="\$\\mathcal{O}(\\gamma)\$")
        mp.loglog(γs, γs .^ 2 * 0.5 * abs(err2[1]) / γs[1]^2, "--", label="\$\\mathcal{O}(\\gamma^2)\$")
        mp.plt.gca().invert_xaxis()
        mp.legend()
        if savefile !== nothing
            mp.savefig(savefile)
            @info "Results saved to $savefile"
        end
    end
    # the slope of log(err) against log(γ) between consecutive steps (1: finite differences,
    # 2: a right derivative; rounding flattens the last steps when the errors reach it)
    order(e) = join([@sprintf("%.2f", log10(e[i] / e[i+1])) for i in 1:length(e)-1 if e[i] > 0 && e[i+1] > 0], ", ")
    println("$fname: γ = ", γs)
    println("Finite difference: $err1 (orders $(order(err1)))")
    println("Automatic differentiation: $err2 (orders $(order(err2)))")
end

"""
    print_tensor(t, info="")

ADCME's `print_tensor`: `t` itself, and when it is computed, `info` and the full value of
`t` are written to standard error (a `Print` node, as `tf.print` with every entry shown).
Use the returned tensor (or `bind` it) so that the print runs.
"""
print_tensor(t, info::AbstractString="") = (x = convert_to_tensor(t);
    print_node(x, [x]; prefix=isempty(info) ? "" : info * "\n", summarize=-1))

# A `Print` node (print.rs): `input` passed through; when it runs, `prefix`, then `pieces`
# (strings as they are, tensors by value) joined by `sep`, written to standard error. The
# one builder of `tf.print`, `tf.Print` and `print_tensor`.
function print_node(input::Tensor, pieces; prefix::AbstractString="", sep::AbstractString=" ", summarize::Integer=3, name=nothing)
    literal(s) = replace(String(s), "{}" => "{ }")      # a "{}" in the text is not a placeholder
    parts, data = String[], Tensor[]
    for p in pieces
        p isa AbstractString ? push!(parts, literal(p)) : (push!(parts, "{}"); push!(data, convert_to_tensor(p)))
    end
    return add_op("Print", Tensor[input; data]; template=literal(prefix) * join(parts, sep), summarize=Int(summarize), name=name)
end
