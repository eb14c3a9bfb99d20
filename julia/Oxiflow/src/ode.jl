# ADCME's explicit ODE solvers, `rk4` and `ode45`, as a `while_loop` over the time steps
# with the solution kept in a `TensorArray`: differentiable with respect to the initial value,
# the final time and the parameters `θ` through the loop's gradient.

export rk4, ode45

# Butcher tableaux (a: the stage coefficients, row s for stage s; b: the weights; c: the
# nodes). RK4: the classical fourth-order method. ode45: Dormand and Prince's fifth-order
# step (J. Comp. Appl. Math. 6, 1980), the solution MATLAB's ode45 advances; ADCME takes
# fixed steps with it, without the embedded error estimate, and so does this.
const RK4_TABLEAU = (a=((), (1 / 2,), (0.0, 1 / 2), (0.0, 0.0, 1.0)),
                     b=(1 / 6, 1 / 3, 1 / 3, 1 / 6), c=(0.0, 1 / 2, 1 / 2, 1.0))
const DOPRI5_TABLEAU = (a=((), (1 / 5,), (3 / 40, 9 / 40), (44 / 45, -56 / 15, 32 / 9),
                           (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
                           (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656)),
                        b=(35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84),
                        c=(0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0))

# One explicit Runge-Kutta step of size h from (t, y); `fname` names the solver in errors.
function rk_step(tab, fname, f, t, y, h, θ)
    ks = Any[]
    for s in 1:length(tab.b)
        ys = y
        for (j, a) in enumerate(tab.a[s])
            a == 0 || (ys = ys + (a * h) * ks[j])
        end
        k = f(tab.c[s] == 0 ? t : t + tab.c[s] * h, ys, θ)
        k isa Tensor && size(k) == size(y) ||
            invalid("$fname: f(t, y, θ) must return a tensor of the size of y $(size(y)), got $(k isa Tensor ? size(k) : typeof(k))")
        push!(ks, k)
    end
    incr = nothing
    for (s, w) in enumerate(tab.b)
        w == 0 && continue
        incr = incr === nothing ? w * ks[s] : incr + w * ks[s]
    end
    return y + h * incr
end

function runge_kutta(tab, fname, f::Function, T, NT::Integer, y0, θ=missing)
    NT >= 1 || invalid("$fname: NT must be at least 1, got $NT")
    y = y0 isa Tensor ? y0 : constant(y0 isa Number ? Float64(y0) : Array{Float64}(y0))
    y.dtype == Float64 || invalid("$fname: the initial value must be Float64, got $(y.dtype)")
    Δt = (T isa Tensor ? T : constant(Float64(T))) / NT
    ta = write(TensorArray(NT + 1), 1, y)
    function body(i, ta)
        t = (cast(i, Float64) - 2.0) * Δt          # y_{i-1} is the value at t_{i-2} = (i-2)Δt
        return i + 1, write(ta, i, rk_step(tab, fname, f, t, read(ta, i - 1), Δt, θ))
    end
    _, out = while_loop((i, ta) -> i <= NT + 1, body, [constant(2), ta])
    return stack(out)
end

"""
    rk4(f, T, NT, y0, θ=missing)

ADCME's `rk4`: solves `dy/dt = f(t, y, θ)` from `y(0) = y0` (a Float64 number, vector or
tensor) to `t = T` in `NT` steps of the classical fourth-order Runge-Kutta method; returns
the `(NT+1)×...` tensor of `y` at `t = 0, T/NT, ..., T` (first row `y0`). `f` gets `t` as a
Float64 scalar tensor, `y` as a tensor of `y0`'s size and `θ` as given, and returns `dy/dt`
of `y`'s size. Built as a `while_loop`, so the result is differentiable with respect to
`y0`, `T` and the tensors `f` uses. Stage `s` of step `n` evaluates `f` at
`t_n + c_s Δt` with `t_n = n Δt` (ADCME passes `t_{n+1}` for `t_n`, which matters only for
`f` depending on `t`).
"""
rk4(f::Function, T, NT::Integer, y0, θ=missing) = runge_kutta(RK4_TABLEAU, "rk4", f, T, NT, y0, θ)

"""
    ode45(f, T, NT, y0, θ=missing)

ADCME's `ode45`: as [`rk4`](@ref), with the fifth-order Dormand-Prince step (the six stages
whose weights MATLAB's `ode45` advances with), fixed step `T/NT`, no error control.
"""
ode45(f::Function, T, NT::Integer, y0, θ=missing) = runge_kutta(DOPRI5_TABLEAU, "ode45", f, T, NT, y0, θ)
