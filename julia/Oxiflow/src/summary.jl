# TensorBoard logs: ADCME's `Diary`, `scalar`, `write`, `activate`, and TF1's `tf.summary`
# (`scalar`, `histogram`, `merge`, `merge_all`, `FileWriter`).
#
# A summary is fetched like a tensor and comes back as TF's serialized `Summary` protocol
# buffer (a `String` of bytes, as `sess.run` returns it in TF). A writer appends `Event`
# records to `<logdir>/events.out.tfevents.<seconds>.<hostname><suffix>`, TF's file format
# (`tensorflow/core/lib/io/record_writer.cc`): per record the length as a little-endian
# UInt64, its masked CRC-32C, the bytes, and their masked CRC-32C, which TensorBoard reads.

using CRC32c: crc32c

# Protocol-buffer wire format, the few field kinds these messages use.
function pb_varint!(io::IO, x::UInt64)
    while x >= 0x80
        write(io, UInt8(x & 0x7f | 0x80))
        x >>= 7
    end
    write(io, UInt8(x))
end
pb_tag!(io, field, wire) = pb_varint!(io, UInt64(field << 3 | wire))
pb_int!(io, field, x::Integer) = (pb_tag!(io, field, 0); pb_varint!(io, reinterpret(UInt64, Int64(x))))
pb_double!(io, field, x) = (pb_tag!(io, field, 1); write(io, htol(Float64(x))))
pb_float!(io, field, x) = (pb_tag!(io, field, 5); write(io, htol(Float32(x))))
pb_bytes!(io, field, b::AbstractVector{UInt8}) = (pb_tag!(io, field, 2); pb_varint!(io, UInt64(length(b))); write(io, b))
pb_bytes!(io, field, s::AbstractString) = pb_bytes!(io, field, codeunits(s))
pb_doubles!(io, field, xs) = pb_bytes!(io, field, collect(reinterpret(UInt8, htol.(Float64.(xs)))))

# TF's masked CRC (`crc32c::Mask`): rotated right by 15 bits plus a constant, so that a CRC
# of data that holds CRCs stays well distributed.
masked_crc(b) = (c = crc32c(b); ((c >> 15) | (c << 17)) + 0xa282ead8)

function write_record(io::IO, data::Vector{UInt8})
    len = collect(reinterpret(UInt8, [htol(UInt64(length(data)))]))
    write(io, len); write(io, htol(masked_crc(len)))
    write(io, data); write(io, htol(masked_crc(data)))
end

# An `Event` (tensorflow/core/util/event.proto): wall_time = 1, step = 2, file_version = 3,
# graph_def = 4, summary = 5.
function event_bytes(; step::Integer=0, file_version=nothing, graph_def=nothing, summary=nothing)
    io = IOBuffer()
    pb_double!(io, 1, time())
    step == 0 || pb_int!(io, 2, step)
    file_version === nothing || pb_bytes!(io, 3, file_version)
    graph_def === nothing || pb_bytes!(io, 4, graph_def)
    summary === nothing || pb_bytes!(io, 5, summary)
    return take!(io)
end

"""
    Summary

What `tf.summary.scalar`, `tf.summary.histogram`, ADCME's `scalar` and `tf.summary.merge`
return: fetched with `run`, it is TF's serialized `Summary` (a `String` of bytes) holding a
value per tag, which `write(::Diary, step, s)` or `add_summary(writer, s, step)` logs.
"""
struct Summary
    items::Vector{Tuple{Symbol,String,Tensor}}   # (:scalar or :histogram, tag, tensor)
end

collect_leaves!(leaves, s::Summary) = (foreach(it -> push!(leaves, it[3]), s.items); nothing)
rebuild(s::Summary, vals, k) = summary_bytes(s.items, Any[vals[k[] += 1] for _ in s.items])

# `Summary` (summary.proto): repeated Value value = 1; Value: tag = 1, simple_value = 2,
# histo = 5.
function summary_bytes(items, values)
    io = IOBuffer()
    for ((kind, tag, _), v) in zip(items, values)
        val = IOBuffer()
        pb_bytes!(val, 1, tag)
        kind === :scalar ? pb_float!(val, 2, v) : pb_bytes!(val, 5, histogram_bytes(vec(collect(Float64, v))))
        pb_bytes!(io, 1, take!(val))
    end
    return String(take!(io))
end

# TF's default histogram buckets (`histogram.cc`, `InitDefaultBuckets`): limits growing by 10 %
# from 1e-12 to 1e20, mirrored for negative values, 0 between, ±DBL_MAX at the ends.
const HISTOGRAM_LIMITS = let pos = Float64[]
    v = 1.0e-12
    while v < 1.0e20
        push!(pos, v); v *= 1.1
    end
    push!(pos, floatmax(Float64))
    vcat(reverse(-pos), 0.0, pos)
end

# `HistogramProto`: min = 1, max = 2, num = 3, sum = 4, sum_squares = 5, bucket_limit = 6,
# bucket = 7 (packed). A value counts in the first bucket whose limit exceeds it; runs of
# empty buckets are merged into one, as TF's `Histogram::EncodeToProto` does.
function histogram_bytes(x::Vector{Float64})
    counts = zeros(length(HISTOGRAM_LIMITS))
    for v in x
        counts[min(searchsortedlast(HISTOGRAM_LIMITS, v) + 1, length(counts))] += 1
    end
    limits = Float64[]; buckets = Float64[]
    i = 1
    while i <= length(counts)
        limit, c = HISTOGRAM_LIMITS[i], counts[i]
        i += 1
        if c <= 0
            while i <= length(counts) && counts[i] <= 0
                limit, c = HISTOGRAM_LIMITS[i], counts[i]; i += 1
            end
        end
        push!(limits, limit); push!(buckets, c)
    end
    io = IOBuffer()
    pb_double!(io, 1, isempty(x) ? HISTOGRAM_LIMITS[end] : minimum(x))
    pb_double!(io, 2, isempty(x) ? -floatmax(Float64) : maximum(x))
    pb_double!(io, 3, length(x)); pb_double!(io, 4, sum(x)); pb_double!(io, 5, sum(abs2, x))
    pb_doubles!(io, 6, limits); pb_doubles!(io, 7, buckets)
    return take!(io)
end

# The summaries made in each graph, for `tf.summary.merge_all` (TF's `SUMMARIES` collection).
const GRAPH_SUMMARIES = WeakKeyDict{Graph,Vector{Summary}}()

function new_summary(kind::Symbol, tag::AbstractString, t::Tensor, fname)
    T = t.dtype
    (T <: Real && T !== Bool) || invalid("$fname: '$tag' needs a real numeric tensor, got $T")
    kind === :scalar && ndims(t) != 0 && invalid("$fname: '$tag' needs a scalar tensor, got size $(size(t))")
    s = Summary([(kind, String(tag), t)])
    push!(get!(() -> Summary[], GRAPH_SUMMARIES, getfield(t, :graph)), s)
    return s
end

"""
    scalar(o, name=tensorname(o))

ADCME's `scalar`: a [`Summary`](@ref) of the scalar tensor `o` under the tag `name`
(`tf.summary.scalar(name, o)`). Errors: `o` not a real numeric scalar.
"""
scalar(o::Tensor, name::Union{AbstractString,Missing}=missing) = new_summary(:scalar, ismissing(name) ? tensorname(o) : name, o, "scalar")

"""
    merge_summaries(summaries) -> Summary

TF's `tf.summary.merge`: one [`Summary`](@ref) whose fetched value holds every tag of
`summaries`.
"""
merge_summaries(summaries) = Summary(vcat((s.items for s in summaries)...))

"""
    SummaryWriter(logdir; graph=nothing, filename_suffix="")

TF's `tf.summary.FileWriter`: creates `logdir` and a new event file in it
(`events.out.tfevents.<seconds>.<hostname><suffix>`), starting with the file-version event
and, when `graph` is given, the graph's nodes (name, op, inputs, device: TensorBoard's Graphs
tab; attributes are not written). `add_summary(w, s, step)` appends a fetched summary,
`flush(w)`, `close(w)`; each record is flushed as it is written, so TensorBoard sees it
while the program runs. `w.add_summary(s, step)` and `w.get_logdir()` are TF's spellings.
"""
mutable struct SummaryWriter
    logdir::String
    path::String
    io::IOStream
end

function SummaryWriter(logdir::AbstractString; graph=nothing, filename_suffix=nothing)
    mkpath(logdir)
    path = joinpath(logdir, "events.out.tfevents.$(floor(Int, time())).$(gethostname())$(something(filename_suffix, ""))")
    w = SummaryWriter(String(logdir), path, open(path, "w"))
    write_event(w, event_bytes(file_version="brain.Event:2"))
    graph === nothing || write_event(w, event_bytes(graph_def=graph_def_bytes(graph)))
    return w
end

function write_event(w::SummaryWriter, bytes)
    isopen(w.io) || invalid("SummaryWriter: $(w.path) was closed")
    write_record(w.io, bytes); flush(w.io)
    return nothing
end

"""`add_summary(w, summary, step=0)`: appends a fetched [`Summary`](@ref) (its bytes) at `step`."""
add_summary(w::SummaryWriter, s::AbstractString, step::Integer=0) = write_event(w, event_bytes(step=step, summary=codeunits(s)))
Base.flush(w::SummaryWriter) = (isopen(w.io) && flush(w.io); nothing)
Base.close(w::SummaryWriter) = (close(w.io); nothing)

function Base.getproperty(w::SummaryWriter, s::Symbol)
    s === :add_summary && return (summary, step=0) -> add_summary(w, summary, step)
    s === :get_logdir && return () -> getfield(w, :logdir)
    s === :flush && return () -> flush(w)
    s === :close && return () -> close(w)
    return getfield(w, s)
end

# `GraphDef` (graph.proto): node = 1; `NodeDef`: name = 1, op = 2, input = 3, device = 4.
function graph_def_bytes(g::Graph)
    io = IOBuffer()
    for n in 0:oxf_graph_num_nodes(g)-1
        nd = IOBuffer()
        pb_bytes!(nd, 1, oxf_node_name(g, n)); pb_bytes!(nd, 2, oxf_node_op(g, n))
        foreach(i -> pb_bytes!(nd, 3, i), splitlines(oxf_node_inputs(g, n)))
        dev = oxf_node_device(g, n)
        isempty(dev) || pb_bytes!(nd, 4, dev)
        pb_bytes!(io, 1, take!(nd))
    end
    return take!(io)
end

"""
    Diary(suffix=nothing)

ADCME's TensorBoard log: a [`SummaryWriter`](@ref) in a new temporary directory (`d.tdir`),
with the default graph; prints the `tensorboard` command that shows it.
`write(d, step, s)` logs a fetched summary (or a vector of them) at `step`; `save(d, dir)`
copies the log to `dir`; `load(d, dir)` continues logging in `dir`; `activate(d, port)`
starts TensorBoard on it.

```julia
d = Diary("test")
p = placeholder(1.0, dtype=Float64)
s = scalar(constant(1.0) + p, "variable")
for i = 1:100
    write(d, i, run(sess, s, Dict(p => Float64(i))))
end
```
"""
mutable struct Diary
    writer::SummaryWriter
    tdir::String
end

function Diary(suffix::Union{AbstractString,Nothing}=nothing)
    tdir = mktempdir()
    printstyled("tensorboard --logdir=\"$(tdir)\" --port 0\n", color=:blue)
    return Diary(SummaryWriter(tdir; graph=get_default_graph(), filename_suffix=suffix), tdir)
end

Base.write(d::Diary, step::Integer, s::AbstractString) = add_summary(d.writer, s, step)
Base.write(d::Diary, step::Integer, ss::AbstractVector{<:AbstractString}) = (foreach(s -> add_summary(d.writer, s, step), ss); nothing)

"""`save(d::Diary, dir)`: copies the diary's log directory to `dir` (replacing it)."""
function save(d::Diary, dir::AbstractString)
    flush(d.writer)
    cp(d.tdir, dir; force=true)
end

"""`load(d::Diary, dir)`: `d` logs into `dir` from now on, in a new event file there."""
function load(d::Diary, dir::AbstractString)
    close(d.writer)
    d.writer = SummaryWriter(dir; graph=get_default_graph())
    d.tdir = String(dir)
    return d
end

"""
    activate(d::Diary, port=0)

Starts TensorBoard on the diary's directory in the background (ADCME's `activate`) and
returns the process. Without a `tensorboard` executable on the `PATH`, prints the command
to run where TensorBoard is installed and returns `nothing`.
"""
function activate(d::Diary, port::Integer=0)
    flush(d.writer)
    printstyled("tensorboard --logdir=\"$(d.tdir)\" --port $port\n", color=:blue)
    exe = Sys.which("tensorboard")
    if exe === nothing
        @warn "activate: tensorboard is not installed here; run the command above where it is (the log is in $(d.tdir))"
        return nothing
    end
    return run(`$exe --logdir=$(d.tdir) --port $port`; wait=false)
end

const TF_SUMMARY = (
    scalar=(name, tensor; kwargs...) -> new_summary(:scalar, name, as_tensor(tensor), "tf.summary.scalar"),
    histogram=(name, values; kwargs...) -> new_summary(:histogram, name, as_tensor(values), "tf.summary.histogram"),
    merge=(summaries; kwargs...) -> merge_summaries(summaries),
    merge_all=(; kwargs...) -> (list = get(GRAPH_SUMMARIES, get_default_graph(), Summary[]); isempty(list) ? nothing : merge_summaries(list)),
    FileWriter=(logdir, graph=nothing; filename_suffix=nothing, kwargs...) -> SummaryWriter(logdir; graph=graph, filename_suffix=filename_suffix),
)
