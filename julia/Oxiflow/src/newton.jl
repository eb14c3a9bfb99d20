# ADCME's Newton-Raphson solvers (ADCME.jl src/optim.jl): `newton_raphson` (a `while_loop`
# of Newton steps built from the user's residual and Jacobian), `newton_raphson_with_grad`
# (its solution, differentiable in the parameters through the implicit function theorem) and
# `NonlinearConstrainedProblem` (the adjoint gradient of a loss of that solution). The
# settings come from `Oxiflow.options.newton_raphson` (options.jl).

export newton_raphson, newton_raphson_with_grad, NonlinearConstrainedProblem, NRResult

"""
    NRResult

What [`newton_raphson`](@ref) returns (ADCME's `NRResult`), all tensors without gradients:
`x` the solution (the last iterate, a vector like `u0`); `res` the residual norms
`‖r(u₀)‖, ‖r(u₁)‖, ...` (`max_iter + 1` entries, zeros after the last step's); `u` the
iterates as columns (`length(u0) × (max_iter + 1)`, zeros after the last); `converged` a Bool
scalar, true when the loop stopped on a tolerance rather than on `max_iter`; `iter` the
number of Newton steps (Int64 scalar). `run(sess, nr)` (ADCME's) runs all five and returns
an `NRResult` of their values (arrays, a Bool and an Int).
"""
struct NRResult{X,R,U,C,I}
    x::X
    res::R
    u::U
    converged::C
    iter::I
end

function Base.show(io::IO, r::NRResult)
    part(v) = v isa Tensor ? v.name : repr(v)
    print(io, "NRResult(x = ", part(r.x), ", converged = ", part(r.converged), ", iter = ", part(r.iter), ")")
end

Base.run(sess::Session, nr::NRResult{Tensor,Tensor,Tensor,Tensor,Tensor}, feeds::Pair...; feed_dict=nothing) =
    NRResult(run(sess, Tensor[nr.x, nr.res, nr.u, nr.converged, nr.iter], feeds...; feed_dict=feed_dict)...)

# The residual and the Jacobian from what the user's function returned: (r, J) or (val, r, J).
function nr_parts(out, fname)
    (out isa Tuple || out isa AbstractVector) && length(out) in (2, 3) ||
        invalid("$fname: the function must return (r, J), or (val, r, J) with line search; got $(typeof(out))")
    r, J = length(out) == 2 ? (out[1], out[2]) : (out[2], out[3])
    r = convert_to_tensor(r)
    ndims(r) == 1 || invalid("$fname: the residual must be a vector, got size $(size(r))")
    J isa Union{Tensor,SparseTensor} || (J = convert_to_tensor(J))
    return r, J
end

# The function value of (val, r, J), a scalar tensor, for the line search.
function nr_value(out, fname)
    (out isa Tuple || out isa AbstractVector) && length(out) == 3 ||
        invalid("$fname: with options.newton_raphson.linesearch the function must return (val, r, J), the value whose gradient r is; got $(out isa Tuple ? "$(length(out)) values" : typeof(out))")
    v = convert_to_tensor(out[1])
    length(v) == 1 || invalid("$fname: the function value must be a scalar, got size $(size(v))")
    return ndims(v) == 0 ? v : reshape(v, ())
end

# The step length α of the Newton step u - α δ by backtracking (options.newton_raphson.
# linesearch_options, `ls`): the first trial is α₀ = αinitial (at most maxstep / ‖δ‖); while
# the sufficient-decrease (Armijo) condition f(u - αδ) ≤ f₀ + c1 α f′₀ fails, with
# f′₀ = -r₀·δ the slope along the step, and fewer than `iterations` trials were made, the next
# α minimizes the quadratic (after one trial) or cubic (after two) that interpolates the
# values and f′₀ (Nocedal & Wright, Numerical Optimization, §3.5), kept in
# [ρ_lo α, ρ_hi α] (ρ_hi α when the interpolation is not finite, e.g. for a NaN value).
# When δ is not a descent direction (f′₀ ≥ 0) no α can satisfy the condition and α₀ is
# taken, as ADCME's search returns it then.
function nr_backtrack(fval, u, δ, f0, r0, ls, T)
    c = x -> constant(T(x))
    df0 = -sum(r0 .* δ)
    α0 = c(ls.αinitial)
    ls.maxstep < 9999999 && (α0 = min(α0, c(ls.maxstep) / norm(δ)))
    armijo(α, fα) = fα <= f0 + c(ls.c1) * α * df0            # false for a NaN value
    condition(k, α1, α2, f1, f2) = (df0 < c(0)) & !armijo(α2, f2) & (k < ls.iterations)
    function body(k, α1, α2, f1, f2)
        e1, e2 = f1 - f0 - df0 * α1, f2 - f0 - df0 * α2
        quad = -(df0 * α2^2) / (c(2) * e2)
        d = c(1) / (α1^2 * α2^2 * (α2 - α1))
        a = (α1^2 * e2 - α2^2 * e1) * d
        b = (-α1^3 * e2 + α2^3 * e1) * d
        cubic = if_else(abs(a) < c(1e-10), -df0 / (c(2) * b), (-b + sqrt(max(b^2 - c(3) * a * df0, c(0)))) / (c(3) * a))
        αt = if_else(k < 1, quad, cubic)
        hi, lo = c(ls.ρ_hi) * α2, c(ls.ρ_lo) * α2
        αn = if_else(isfinite(αt), min(max(αt, lo), hi), hi)
        return k + 1, α2, αn, f2, fval(u - αn * δ)
    end
    z = c(0)
    _, _, α, _, _ = while_loop(condition, body, [constant(0), z, α0, z, fval(u - α0 * δ)]; back_prop=false)
    return α
end

# The Newton step J \ r, with ADCME's Levenberg-Marquardt shift (J + μI) \ r when μ > 0.
function nr_step(J, r, μ)
    if μ > 0
        J = J isa SparseTensor ? J + μ * spdiag(size(J, 1)) : J + μ * I
    end
    return J \ r
end

"""
    newton_raphson(f, u0, θ=missing, args...; kwargs...) -> NRResult

ADCME's Newton-Raphson solver of `r(θ, u) = 0` for the vector `u`, starting from `u0` (a
vector tensor or Julia vector of known length). `f(θ, u, args...; kwargs...)` returns the
residual `r` (a vector) and its Jacobian `J = ∂r/∂u` (a dense matrix tensor, e.g.
`gradients(r, u)`, or a `SparseTensor`). Each step solves `J δ = r` and sets `u = u - δ`
(`(J + LM·I) δ = r` when `options.newton_raphson.LM > 0`), inside one `while_loop`, which runs
while `‖r‖ ≥ tol`, `‖r‖ ≥ rtol·‖r(u0)‖` (of the iterate before the current one: the last step
is taken from an iterate that met the tolerance) and fewer than `max_iter` steps were taken.
Settings: `Oxiflow.options.newton_raphson` (`max_iter`, `tol`, `rtol`, `LM`, `verbose`),
read when the graph is built.

With `options.newton_raphson.linesearch = true`, `f` returns `(val, r, J)`, `val` the
scalar whose gradient is `r` (and `J` its Hessian), and each step is `u - α δ` with `α` from a
backtracking line search on `val` (`options.newton_raphson.linesearch_options`: `c1`,
`ρ_hi`, `ρ_lo`, `iterations`, `maxstep`, `αinitial`, ADCME's settings): `α = αinitial`
first, then quadratic and cubic interpolation until `val(u - αδ) ≤ val(u) - c1 α r·δ`
(Nocedal & Wright, Numerical Optimization, §3.5); where `δ` is not a descent direction
(`r·δ ≤ 0`) the step is `αinitial δ`.

Differs from ADCME: `rtol` is relative to the first residual (ADCME compares the residual
two steps back with `rtol` as an absolute bound). ADCME's line search evaluates its first
interpolation with two equal step lengths (a division by zero, so NaN), which makes its first
trial `ρ_hi·αinitial`: it never takes the full Newton step; here the first trial is
`αinitial`. With `verbose`, the settings are printed when the loop is built and each
iteration's residual norms (absolute, relative) to standard error when it runs (`tf.print`,
as ADCME), and with the line search each step length.
The result carries no gradient; see [`newton_raphson_with_grad`](@ref).
"""
function newton_raphson(func::Function, u0, θ=missing, args...; kwargs...)
    o = options.newton_raphson
    o.max_iter >= 1 || invalid("newton_raphson: options.newton_raphson.max_iter must be >= 1, got $(o.max_iter)")
    f(θ, u) = func(θ, u, args...; kwargs...)
    u = convert_to_tensor(u0)
    ndims(u) == 1 || invalid("newton_raphson: the initial guess must be a vector, got size $(size(u))")
    size(u, 1) === nothing && invalid("newton_raphson: the length of the initial guess must be known when the graph is built")
    T, maxit = u.dtype, o.max_iter
    o.verbose && @info "newton_raphson: absolute tolerance $(o.tol), relative tolerance $(o.rtol), at most $maxit steps, LM = $(o.LM)"
    r0, _ = nr_parts(f(θ, u), "newton_raphson")
    n0 = norm(r0)
    going(rn) = (rn >= o.tol) & (rn >= o.rtol * n0)
    ta_r = write(TensorArray(maxit + 1; dtype=T), 1, n0)
    ta_u = write(TensorArray(maxit + 1; dtype=T), 1, u)
    condition(i, u, rn, ta_r, ta_u) = going(rn) & (i < maxit)
    function body(i, u, rn, ta_r, ta_u)
        out = f(θ, u)
        r, J = nr_parts(out, "newton_raphson")
        δ = nr_step(J, r, o.LM)
        if o.linesearch
            fval(x) = nr_value(f(θ, x), "newton_raphson")
            α = nr_backtrack(fval, u, δ, nr_value(out, "newton_raphson"), r, o.linesearch_options, T)
            o.verbose && (α = bind(α, tf.print("Current Step Size =", α)))
            δ = α * δ
        end
        unew = u - δ
        rn = norm(r)
        o.verbose && (rn = bind(rn, tf.print("Newton iteration", i, ": r (abs) =", rn, "r (rel) =", rn / n0)))
        return i + 1, unew, rn, write(ta_r, i + 1, rn), write(ta_u, i + 2, unew)
    end
    i, x, rn, ta_r, ta_u = while_loop(condition, body, [constant(0), u, n0, ta_r, ta_u]; back_prop=false)
    # stopped by a tolerance (a NaN residual stops the loop too, and is not convergence)
    converged = (rn < o.tol) | (rn < o.rtol * n0)
    return NRResult(stop_gradient(x), stop_gradient(stack(ta_r)), stop_gradient(stack(ta_u)'), converged, i)
end

"""
    newton_raphson_with_grad(f, u0, θ=missing, args...; kwargs...) -> Tensor

ADCME's differentiable Newton-Raphson: the solution `x` of [`newton_raphson`](@ref)`(f, u0,
θ, args...)`, whose gradient with respect to `θ` (and to tensors in `args`) is the implicit
function theorem's: for an upstream gradient `dy`, `-∂/∂θ sum(r(θ, x) .* (J(x)' \\ dy))`, as
ADCME's registered backward. Built as `x + (z - stop_gradient(z))` with
`z = -(stop_gradient(J) \\ r(θ, x))`: the value is exactly `x`, the first derivative the
implicit one (higher derivatives are not the solution's). With a `θ` that is not a tensor,
a warning and no gradient, as ADCME.
"""
function newton_raphson_with_grad(func::Function, u0, θ=missing, args...; kwargs...)
    nr = newton_raphson(func, u0, θ, args...; kwargs...)
    if !(θ isa Tensor)
        @warn "newton_raphson_with_grad: θ is not a tensor, no gradients is available"
        return nr.x
    end
    r, J = nr_parts(func(θ, nr.x, args...; kwargs...), "newton_raphson_with_grad")
    Jc = J isa SparseTensor ? SparseTensor(J.indices, stop_gradient(J.values), (J.m, J.n)) : stop_gradient(J)
    z = -(Jc \ r)
    return nr.x + (z - stop_gradient(z))
end

"""
    NonlinearConstrainedProblem(f, L, θ, u0) -> (l, u, dl/dθ)

ADCME's gradient of `L(u)` subject to `r(θ, u) = 0`, with `r, J = f(θ, u)` as for
[`newton_raphson`](@ref): `u` is the Newton solution from `u0`, `l = L(u)`, and the gradient
is the adjoint one, `-∂/∂θ sum(r(θ, u) .* g)` with `g = J' \\ ∇L(u)` held constant. For
`BFGS!(sess, l, dldθ, θ)`.
"""
function NonlinearConstrainedProblem(f::Function, L::Function, θ, u0)
    θt = convert_to_tensor(θ)
    nr = newton_raphson(f, u0, θt)
    r, A = nr_parts(f(θt, nr.x), "NonlinearConstrainedProblem")
    l = L(nr.x)
    top = gradients(l, nr.x)
    top === nothing && invalid("NonlinearConstrainedProblem: L(u) does not depend on u")
    g = stop_gradient(A' \ top)
    d = gradients(sum(r .* g), θt)
    d === nothing && invalid("NonlinearConstrainedProblem: the residual does not depend on θ")
    return l, nr.x, -d
end
