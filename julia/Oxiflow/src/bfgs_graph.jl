# BFGS!(value_and_gradients_function, x0): ADCME's in-graph BFGS (it calls TF Probability's
# `tfp.optimizer.bfgs_minimize` and returns the final position). Built here as one
# `while_loop` whose body evaluates the function once per trial point: a quasi-Newton
# direction from the inverse-Hessian estimate, an Armijo backtracking line search by
# safeguarded quadratic interpolation, and the BFGS update of the estimate (Nocedal and
# Wright, Numerical Optimization, 2nd ed., algorithm 6.1 and eq. 6.17; section 3.5 for the
# interpolation). TFP's line search is Hager-Zhang's, so the iterates differ from TFP's;
# the stopping rules are TFP's.

# The (value, gradient) of `fun` at `x` (a vector of dtype T and length n), checked.
function bfgs_value_and_gradient(fun, x::Tensor, T::Type, n::Integer)
    out = fun(x)
    out isa Union{Tuple,AbstractVector} && length(out) == 2 ||
        invalid("BFGS!: value_and_gradients_function must return (value, gradient), got a $(typeof(out))")
    v, g = out
    v isa Union{Tensor,Real} && g isa Union{Tensor,AbstractVector{<:Real}} ||
        invalid("BFGS!: value_and_gradients_function must return (value, gradient) tensors, got a $(typeof(v)) and a $(typeof(g))")
    v, g = cast(convert_to_tensor(v), T), cast(convert_to_tensor(g), T)
    ndims(v) == 0 || invalid("BFGS!: the value must be a scalar, got size $(size(v))")
    size(g) == (n,) || invalid("BFGS!: the gradient must have the position's size ($n,), got $(size(g))")
    return v, g
end

"""
    BFGS!(value_and_gradients_function, initial_position, max_iter=50;
          tolerance=1e-8, x_tolerance=0, f_relative_tolerance=0, max_line_search_iterations=50)

ADCME's in-graph BFGS minimizer (it returns the `position` of TF Probability's
`tfp.optimizer.bfgs_minimize`): a vector tensor, the position where the iteration stopped,
computed when the graph runs. `value_and_gradients_function(x)` builds, for a vector tensor
`x` of `initial_position`'s length, the objective's value (a scalar) and its gradient (a
vector like `x`), e.g. `(f, gradients(f, x))`; it is called inside a `while_loop` body
(and once before, at `initial_position`). `initial_position` is a Julia vector (Float64
unless it is Float32) or a vector tensor of known length.

Each iteration takes the direction `p = -H g` of the inverse-Hessian estimate `H`
(initially the identity; reset to it when `p` is not a descent direction), backtracks
from the step 1 by safeguarded quadratic interpolation (each trial step 0.1 to 0.5 times
the last) until the value satisfies Armijo's condition `f(x + a p) <= f(x) + 1e-4 a gᵀp`
(a NaN or infinite value is a failed trial), and updates `H` by BFGS's formula when
`sᵀy > 0` (Nocedal and Wright, algorithm 6.1). TF Probability's line search (Hager-Zhang)
differs, so the iterates are not TFP's; its stopping rules are: the gradient's largest
absolute entry at most `tolerance`, an accepted step whose largest entry is at most
`x_tolerance`, or a change of the value at most `f_relative_tolerance` times its magnitude;
`max_iter` accepted steps; or a line search of `max_line_search_iterations` trials without
an acceptable step. Not differentiable (the loop is built with `back_prop=false`).

Errors (`OxiflowError`, InvalidArgumentError): an `initial_position` that is not a float
vector of known length, a function that does not return a scalar value and a gradient of
the position's size, a negative tolerance or a `max_iter` below 0.
"""
function BFGS!(value_and_gradients_function::Function, initial_position, max_iter::Integer=50;
               tolerance::Real=1e-8, x_tolerance::Real=0.0, f_relative_tolerance::Real=0.0,
               max_line_search_iterations::Integer=50)
    max_iter >= 0 || invalid("BFGS!: max_iter must be >= 0, got $max_iter")
    max_line_search_iterations >= 1 || invalid("BFGS!: max_line_search_iterations must be >= 1, got $max_line_search_iterations")
    all(t -> t >= 0, (tolerance, x_tolerance, f_relative_tolerance)) ||
        invalid("BFGS!: the tolerances must be >= 0, got tolerance=$tolerance, x_tolerance=$x_tolerance, f_relative_tolerance=$f_relative_tolerance")
    x0 = initial_position isa Tensor ? initial_position :
         constant(initial_position isa AbstractArray{Float32} ? initial_position : Float64.(initial_position))
    T = x0.dtype
    (T <: AbstractFloat && ndims(x0) == 1 && size(x0, 1) !== nothing) ||
        invalid("BFGS!: the initial position must be a float vector of known length, got a $T tensor of size $(size(x0))")
    n = size(x0, 1)
    fg(x) = bfgs_value_and_gradient(value_and_gradients_function, x, T, n)
    c1, tiny = T(1e-4), T(floatmin(T))
    f0, g0 = fg(x0)
    H0 = constant(Matrix{T}(LinearAlgebra.I, n, n))
    # loop state: accepted steps k, trials since the last accepted step bt, position x with
    # its value f and gradient g, estimate H, direction p, trial step a, and done
    converged(g) = maximum(abs(g)) <= tolerance
    state0 = [constant(0), constant(0), x0, f0, g0, H0, -g0, constant(one(T)), converged(g0)]
    condition(k, bt, x, f, g, H, p, a, done) = (!done) & (k < max_iter)
    function body(k, bt, x, f, g, H, p, a, done)
        xt = x + a * p
        ft, gt = fg(xt)
        slope = sum(g .* p)
        ok = (ft <= f + c1 * a * slope) & isfinite(ft)
        # BFGS's inverse update with s = xt - x, y = gt - g, ρ = 1/sᵀy (eq. 6.17):
        # H - ρ (s (Hy)ᵀ + (Hy) sᵀ) + (ρ² yᵀHy + ρ) s sᵀ, kept only when sᵀy > 0
        s, y = xt - x, gt - g
        sy = sum(s .* y)
        ρ = 1 / if_else(sy > 0, sy, one(T))
        Hy = H * y
        sc, hc = reshape(s, n, 1), reshape(Hy, n, 1)
        Hnew = H - ρ * (sc * hc' + hc * sc') + (ρ^2 * sum(y .* Hy) + ρ) * (sc * sc')
        Hn = if_else(ok & (sy > 0), Hnew, H)
        xn, fn, gn = if_else(ok, xt, x), if_else(ok, ft, f), if_else(ok, gt, g)
        # the next direction; the steepest descent (and H reset) where it does not descend
        pq = -(Hn * gn)
        descends = sum(gn .* pq) < 0
        pn, Hn = if_else(descends, pq, -gn), if_else(descends, Hn, H0)
        # rejected: the minimizer of the quadratic through f, the slope and ft, in [0.1a, 0.5a]
        aq = -slope * a^2 / (2 * (ft - f - slope * a) + tiny)
        aq = if_else(isfinite(aq), aq, a / 2)
        ab = min(max(aq, a / 10), a / 2)
        an = if_else(ok, one(T), ab)
        btn = if_else(ok, constant(0), bt + 1)
        stop = converged(gn) |
               (ok & (maximum(abs(s)) <= x_tolerance)) |
               (ok & (abs(ft - f) <= f_relative_tolerance * abs(f))) |
               (btn >= max_line_search_iterations)
        kn = k + cast(ok, Int64)
        return kn, btn, xn, fn, gn, Hn, pn, an, stop
    end
    out = while_loop(condition, body, state0; back_prop=false)
    return stop_gradient(out[3])
end
