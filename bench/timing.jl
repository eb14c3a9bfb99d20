# Shared by the Julia benchmark scripts in bench/ (`include("timing.jl")`).

"""Median wall time of `f()` in µs over `n` calls, after `warmup` calls."""
function median_us(f; n=3000, warmup=200)
    for _ in 1:warmup; f(); end
    ts = Float64[]
    for _ in 1:n
        t0 = time_ns(); f(); push!(ts, (time_ns() - t0) / 1e3)
    end
    sort!(ts)
    return ts[div(n, 2)]
end
