# A `while_loop` writing one row of a `TensorArray` per step, as ADCME's time-stepping codes
# do, and `ode45` on the three-body problem of ADCME's ODE docs: time per step for growing
# step counts. Constant per-step times mean each write costs O(row); times that grow with
# the step count mean each write copies the array. Then the gradient of the row loop with
# respect to a parameter of its body, with the process's peak memory after each size (it
# only grows: the sizes run in increasing order). Figures: docs/performance/engine.md,
# "Loops writing a TensorArray".
#   julia --project=julia/Oxiflow bench/loop_tensorarray.jl
# OXIFLOW_BENCH_GRAD_STEPS (comma-separated, default 1000,4000,16000) sets the gradient's
# step counts.
using Oxiflow, Printf, LinearAlgebra

# n steps of u ← u + 0.01 θ sin(u), each u (width m) written to row i of the array
# (the stacked array and the variable θ)
function row_loop(n, m)
    reset_default_graph()
    θ = Variable(1.0)
    ta = write(TensorArray(n), 1, constant(ones(m)))
    cond(i, u, ta) = i <= n
    body(i, u, ta) = (u1 = u + 0.01 * θ * sin(u); (i + 1, u1, write(ta, i, u1)))
    _, _, out = while_loop(cond, body, [constant(2), constant(ones(m)), ta])
    return stack(out), θ
end

function three_body(nt)
    reset_default_graph()
    m = (5.0, 4.0, 3.0)
    f(t, y, θ) = begin
        r0, v0, r1, v1, r2, v2 = y[1:2], y[3:4], y[5:6], y[7:8], y[9:10], y[11:12]
        d0 = (r2 - r1) / norm(r2 - r1)^3.0
        d1 = (r0 - r2) / norm(r0 - r2)^3.0
        d2 = (r1 - r0) / norm(r1 - r0)^3.0
        [v0; m[2] * d2 - m[3] * d1; v1; m[3] * d0 - m[1] * d2; v2; m[1] * d1 - m[2] * d0]
    end
    return ode45(f, 30.0, nt, [1.0; -1.0; 0.0; 0.0; 1.0; 3.0; 0.0; 0.0; -2.0; -1.0; 0.0; 0.0])
end

timed(t, sess) = (t0 = time(); run(sess, t); time() - t0)
initialized() = (s = Session(); run(s, global_variables_initializer()); s)
for build in (() -> row_loop(10, 2)[1], () -> three_body(10))   # compiles the Julia side
    t = build(); run(initialized(), t)
end

println("while_loop writing a TensorArray, width 100:")
for n in (1000, 4000, 8000)
    y, _ = row_loop(n, 100)
    t = timed(y, initialized())
    @printf("  %6d steps  %7.3f s  %6.2f µs/step\n", n, t, 1e6 * t / n)
end
println("ode45, three bodies (12 unknowns):")
for nt in (2000, 8000, 32000)
    y = three_body(nt)
    t = timed(y, Session())
    @printf("  %6d steps  %7.3f s  %6.2f µs/step\n", nt, t, 1e6 * t / nt)
end
steps = parse.(Int, split(get(ENV, "OXIFLOW_BENCH_GRAD_STEPS", "1000,4000,16000"), ","))
println("gradient of sum(stack(ta)) with respect to θ, width 100:")
for n in steps
    y, θ = row_loop(n, 100)
    t = timed(gradients(sum(y), θ), initialized())
    @printf("  %6d steps  %7.3f s  %6.2f µs/step  peak memory %5.2f GiB\n", n, t, 1e6 * t / n, Sys.maxrss() / 2^30)
end
