# BFGS!: ADCME's L-BFGS-B driver, on the engine's bound-constrained L-BFGS (`oxf_lbfgsb`,
# a projected L-BFGS in crates/oxiflow-capi/src/optim.rs), which calls back here for the loss
# and gradient at each trial point.

const LBFGSB_REASONS = Dict(0 => "CONVERGENCE: NORM_OF_PROJECTED_GRADIENT_<=_PGTOL",
                            1 => "CONVERGENCE: REL_REDUCTION_OF_F_<=_FACTR*EPSMCH",
                            2 => "STOP: TOTAL NO. of ITERATIONS REACHED LIMIT",
                            3 => "STOP: THE CALLBACK ASKED TO STOP",
                            4 => "ABNORMAL_TERMINATION_IN_LNSRCH",
                            5 => "ABNORMAL_TERMINATION: NUMERICAL FAILURE")

# What the C callbacks reach through `userdata`.
mutable struct BFGSProblem
    fg::Function              # x -> (loss, gradient vector)
    step::Function            # (iteration, loss, x) -> Bool (true: stop)
    error::Any                # the first exception thrown by fg or step
end

function _lbfgsb_objective(ud::Ptr{Cvoid}, n::Int64, x::Ptr{Float64}, g::Ptr{Float64}, f::Ptr{Float64})::Int32
    p = unsafe_pointer_to_objref(ud)::BFGSProblem
    try
        xv = copy(unsafe_wrap(Array, x, Int(n)))
        l, gv = p.fg(xv)
        length(gv) == n || invalid("lbfgsb: fg returned a gradient of length $(length(gv)) for $n variables")
        unsafe_store!(f, Float64(l))
        gvec = Vector{Float64}(gv)
        GC.@preserve gvec unsafe_copyto!(g, pointer(gvec), Int(n))
        return Int32(0)
    catch e
        p.error = e
        return Int32(1)
    end
end

function _lbfgsb_iteration(ud::Ptr{Cvoid}, it::Int64, f::Float64, pg::Float64, nev::Int64, x::Ptr{Float64})::Int32
    p = unsafe_pointer_to_objref(ud)::BFGSProblem
    try
        return Int32(p.step(Int(it), f, copy(unsafe_wrap(Array, x, length_of(p)))) ? 1 : 0)
    catch e
        p.error = e
        return Int32(1)
    end
end
length_of(p::BFGSProblem) = p.fg.n

"""
    lbfgsb(fg, x0; lower=-Inf, upper=Inf, max_iter=15000, m=10, pgtol=1e-12, ftol=1e-12, step=(it, f, x) -> false)

Minimizes `fg(x) -> (f, ∇f)` over `lower .<= x .<= upper` with the engine's projected
L-BFGS (`oxf_lbfgsb`: active-set L-BFGS directions, projected Armijo backtracking; scipy's
L-BFGS-B stopping rules), keeping `m` corrections.
Stops when the projected gradient's infinity norm is at most `pgtol`, when an iteration
reduces `f` by at most `ftol*max(|f|, 1)` (scipy's `ftol`), after `max_iter` iterations, or
when `step(iteration, f, x)` returns `true`. Returns `(x, f, iterations, message)`.
Exceptions thrown by `fg` or `step` propagate.
"""
function lbfgsb(fg, x0::AbstractVector{<:Real}; lower=-Inf, upper=Inf, max_iter::Integer=15000, m::Integer=10,
                pgtol::Real=1e-12, ftol::Real=1e-12, step=(it, f, x) -> false)
    x = Vector{Float64}(x0)
    n = length(x)
    n > 0 || invalid("lbfgsb: no variables to optimize")
    lo = lower isa Real ? fill(Float64(lower), n) : Vector{Float64}(lower)
    hi = upper isa Real ? fill(Float64(upper), n) : Vector{Float64}(upper)
    length(lo) == n && length(hi) == n || invalid("lbfgsb: bounds have lengths $(length(lo)), $(length(hi)) for $n variables")
    wrapped = SizedObjective(fg, n)
    p = BFGSProblem(wrapped, step, nothing)
    obj = @cfunction(_lbfgsb_objective, Int32, (Ptr{Cvoid}, Int64, Ptr{Float64}, Ptr{Float64}, Ptr{Float64}))
    itf = @cfunction(_lbfgsb_iteration, Int32, (Ptr{Cvoid}, Int64, Float64, Float64, Int64, Ptr{Float64}))
    local res
    GC.@preserve p begin
        try
            res = oxf_lbfgsb(x, lo, hi, m, max_iter, pgtol, ftol, obj, itf, pointer_from_objref(p))
        catch e
            p.error === nothing && rethrow()
        end
    end
    p.error === nothing || throw(p.error)
    f, iters, status = res
    return x, f, iters, get(LBFGSB_REASONS, status, "status $status")
end

struct SizedObjective <: Function
    f::Any
    n::Int
end
(s::SizedObjective)(x) = s.f(x)

"""
    BFGS!(sess, loss, max_iter=15000; vars=nothing, bounds=nothing, var_to_bounds=nothing,
          callback=nothing, feed_dict=nothing, m=10, ftol=1e-12, pgtol=1e-12)
    BFGS!(sess, loss; max_iter=..., ...)
    BFGS!(sess, loss, grads, vars; kwargs...)

ADCME's `BFGS!`: minimizes the scalar `loss` over `vars` (default: every trainable
variable) with L-BFGS-B (scipy's options as ADCME sets them: `maxiter=max_iter`,
`ftol=1e-12`, `gtol=1e-12`; the engine's projected L-BFGS, see [`lbfgsb`](@ref)), then assigns the result to the variables in `sess`.
`bounds` (or `var_to_bounds`) is a `Dict(variable => [lo, hi])`, `lo`/`hi` numbers or
arrays of the variable's size. Prints `iter k, current loss=...` for every loss evaluation
and `================ STEP k ===============` after every iteration, calls
`callback(values_of_vars, k, loss)` there, and returns the vector of losses after each
iteration. The second form takes the gradient tensors `grads` (one per variable, shaped
like it) instead of differentiating `loss` (ADCME sends that form to Optim.jl; here it runs
the same L-BFGS-B).
"""
function BFGS!(sess::Session, loss::Tensor, iters::Integer=15000; vars=nothing, max_iter::Integer=iters, kwargs...)
    vs = vars_or_trainable(vars)
    isempty(vs) && invalid("BFGS!: no trainable variables to optimize")
    ndims(loss) == 0 || invalid("BFGS!: the loss must be a scalar, got shape $(size(loss))")
    grads = gradients(loss, Tensor[v for v in vs])
    return bfgs_run(sess, loss, grads, vs, max_iter; kwargs...)
end

function BFGS!(sess::Session, loss::Tensor, grads::AbstractVector, vars::AbstractVector; max_iter::Integer=15000, kwargs...)
    length(grads) == length(vars) || invalid("BFGS!: $(length(grads)) gradients for $(length(vars)) variables")
    return bfgs_run(sess, loss, grads, collect(vars), max_iter; kwargs...)
end
BFGS!(sess::Session, loss::Tensor, grads::Tensor, vars::Tensor; kwargs...) = BFGS!(sess, loss, [grads], [vars]; kwargs...)

function bfgs_run(sess::Session, loss::Tensor, grads, vs, max_iter::Integer; bounds=nothing, var_to_bounds=nothing,
                  callback=nothing, feed_dict=nothing, m::Integer=10, ftol::Real=1e-12, pgtol::Real=1e-12, method="L-BFGS-B")
    method == "L-BFGS-B" || invalid("BFGS!: only method=\"L-BFGS-B\" is available, not \"$method\"")
    p = var_pack(vs, "BFGS!")
    for (g, v) in zip(grads, p.vars)
        g === nothing || size(g) == size(v) || invalid("BFGS!: gradient $(g.name) has size $(size(g)) but $(v.name) has size $(size(v))")
    end
    lo, hi = packed_bounds(p, bounds === nothing ? var_to_bounds : bounds, "BFGS!")
    fetch_grads = Tensor[g for g in grads if g !== nothing]
    extra = feed_pairs(feed_dict)
    nevals = Ref(0)
    function fg(x)
        out = run(sess, [loss, fetch_grads]; feed_dict=Dict(vcat(var_feeds(p, x), extra)))
        l = Float64(out[1])
        println("iter $(nevals[]), current loss=$l")
        nevals[] += 1
        return l, pack_grads(p, grads, out[2])
    end
    history = Float64[]
    function step(it, f, x)
        println("================ STEP $(it - 1) ===============")
        callback === nothing || callback(unpack(p, x), it - 1, f)
        push!(history, f)
        return false
    end
    @info "Optimization starts..."
    x, f, iters, msg = lbfgsb(fg, pack_values(p, sess); lower=lo, upper=hi, max_iter=max_iter, m=m, pgtol=pgtol, ftol=ftol, step=step)
    assign_packed!(p, sess, x)   # store the result in the session's variables
    println("Optimization terminated with:\n  Message: $msg\n  Objective function value: $f\n  Number of iterations: $iters\n  Number of functions evaluations: $(nevals[])")
    return history
end
