# Reading profiles: the summary table, the HTML timeline, the graph as Graphviz; timing
# inside the graph (ADCME's timestamp and sleep_for).

export profile_summary, save_graph, timestamp, sleep_for

"""
    profile_summary(; io=stdout)

Prints a summary of the last `run_profile` step as aligned tables: per device the number of
kernels, busy time (time at least one kernel ran), idle time (the step's span minus busy
time), busy %, copies into the device with their bytes and time, and peak memory (`-` when
not recorded); then the 10 longest kernels. Times in ms. The figures are computed from the
same timeline JSON that `save_profile` writes. Errors when no profile was recorded.
"""
function profile_summary(; io::IO=stdout)
    print(io, oxf_timeline_summary(last_profile().json))
    return nothing
end

"""
    save_graph(path; sess=last session)

Writes the graph of `sess` as Graphviz DOT: one cluster per device with the nodes the
session placed there, nodes coloured by device (grey and dashed: not placed by any run yet),
cross-device edges (where a copy happens) dashed red with the bytes copied, control edges
dotted. With a `.svg` (or `.png`, `.pdf`) path the DOT is rendered by Graphviz's `dot`
program when it is installed; otherwise the `.dot` file is written next to it and a
warning says so. Returns the path written.
"""
function save_graph(path::AbstractString; sess=LAST_SESSION[])
    sess isa Session || invalid("save_graph: no session; create one with Session() or pass sess=")
    dot = oxf_session_graph_dot(sess)
    ext = lowercase(splitext(path)[2])
    if ext in (".svg", ".png", ".pdf")
        exe = Sys.which("dot")
        if exe === nothing
            alt = splitext(path)[1] * ".dot"
            write(alt, dot)
            @warn "save_graph: Graphviz's `dot` program is not installed (Debian: apt-get install graphviz); wrote $alt instead of $path"
            return alt
        end
        # call it as `dot`: Sys.which resolves symlinks, and Graphviz picks its layout engine
        # from the name it was called by (Debian's /usr/bin/dot is a symlink)
        open(`dot -T$(ext[2:end]) -o $path`, "w", stdout) do p
            write(p, dot)
        end
        return path
    end
    write(path, dot)
    return path
end

"""
    timestamp(deps=missing) -> Tensor

ADCME's `timestamp`: a Float64 scalar, the wall-clock time in seconds since the Unix epoch
when the op runs (TF's `Timestamp` op, `tf.timestamp`). With a tensor `deps` the op runs
after `deps` (a control dependency), so `run(sess, [t0, t1])` with `t0 = timestamp(a)` and
`t1 = timestamp(b)` times what lies between `a` and `b`. A Julia number for `deps` adds no
dependency, as in ADCME, where it is only converted to a constant. The op is stateful: every
run reads the clock again. Timing in a multi-threaded step is approximate (ADCME says the
same). CPU only.
"""
function timestamp(deps=missing)
    deps isa Tensor || deps === missing || deps isa Real ||
        invalid("timestamp: deps must be a tensor, a Julia number or missing, got a $(typeof(deps))")
    deps isa Tensor || return add_op("Timestamp", Tensor[])
    return control_dependencies(() -> add_op("Timestamp", Tensor[]), deps)
end

"""
    sleep_for(t) -> Tensor

ADCME's `sleep_for`: an op (`SleepFor`) that, when it runs, blocks its thread for `t`
seconds (a Julia real or a scalar real tensor, cast to Float64) and outputs the seconds that
passed, a Float64 scalar. ADCME's kernel outputs whole seconds (its integer division drops
the fraction); this one keeps the fraction. Combine with [`timestamp`](@ref) and `bind` to
time part of a graph. A negative, NaN or infinite `t` is an `OxiflowError` when the op runs;
a non-scalar or non-real `t` when it is built. CPU only; stateful.
"""
function sleep_for(t::Union{Tensor,Real})
    t isa Bool && invalid("sleep_for: t must be a number of seconds, got $t")
    if t isa Tensor
        t.dtype in (Float64, Float32, Int64, Int32) ||
            invalid("sleep_for: t must be a real scalar tensor, got a $(t.dtype) tensor")
        ndims(t) == 0 || invalid("sleep_for: t must be a scalar, got a tensor of size $(size(t))")
        t.dtype == Float64 || (t = cast(t, Float64))
    else
        t = constant(Float64(t))
    end
    return add_op("SleepFor", Tensor[t])
end
