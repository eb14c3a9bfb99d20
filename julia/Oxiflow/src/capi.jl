# The only file with `ccall`: every C function of crates/oxiflow-capi/include/oxiflow.h that
# Julia uses is wrapped here under its C name. The library path is resolved in one place
# (`libpath`), overridable by ENV["OXIFLOW_LIB"], and checked in `__init__`.

const LIB = Ref{Ptr{Cvoid}}(C_NULL)
const SYMS = Dict{Symbol,Ptr{Cvoid}}()

const DEPS_FILE = normpath(joinpath(@__DIR__, "..", "deps", "deps.jl"))
const LIBNAME = Sys.isapple() ? "liboxiflow.dylib" : Sys.iswindows() ? "oxiflow.dll" : "liboxiflow.so"

"""The library path `Pkg.build("Oxiflow")` recorded in `deps/deps.jl`, or `nothing` when it has not run."""
function built_libpath()
    isfile(DEPS_FILE) || return nothing
    m = Module(:OxiflowDeps)
    Base.include(m, DEPS_FILE)
    return isdefined(m, :OXIFLOW_BUILT_LIB) ? String(m.OXIFLOW_BUILT_LIB) : nothing
end

"""
    libpath()

Path of the Oxiflow shared library, resolved here only: `ENV["OXIFLOW_LIB"]` when set; else
the path `Pkg.build("Oxiflow")` recorded in `deps/deps.jl` (`deps/build.jl` runs cargo and
writes it) when that file exists; else the release build of the repository this package
lives in (`target/release/liboxiflow.so`, made by `make build`). Independent of the working
directory.
"""
function libpath()
    p = get(ENV, "OXIFLOW_LIB", "")
    isempty(p) || return p
    built = built_libpath()
    built === nothing || return built
    return normpath(joinpath(@__DIR__, "..", "..", "..", "target", "release", LIBNAME))
end

"""
    select_blas_library()

Points `ENV["OXIFLOW_BLAS_LIB"]`, which the engine reads when `MatMul` first runs, at the
OpenBLAS build `make setup` unpacks into the repository's `.deps/openblas` (pip's
`scipy-openblas32`, the OpenBLAS NumPy and SciPy ship; newer than Debian's and faster on
small and skinny products), when that file exists and the variable is unset. Otherwise the
engine searches as its docs say (Debian's `libopenblas.so.0`, then the `gemm` crate).
"""
function select_blas_library()
    haskey(ENV, "OXIFLOW_BLAS_LIB") && return nothing
    p = normpath(joinpath(@__DIR__, "..", "..", "..", ".deps", "openblas", "scipy_openblas32", "lib", "libscipy_openblas.so"))
    isfile(p) && (ENV["OXIFLOW_BLAS_LIB"] = p)
    return nothing
end

function load_library()
    p = libpath()
    if !isfile(p)
        from = haskey(ENV, "OXIFLOW_LIB") && !isempty(ENV["OXIFLOW_LIB"]) ? "ENV[\"OXIFLOW_LIB\"]" :
               isfile(DEPS_FILE) ? "recorded by Pkg.build in $DEPS_FILE" : "the repository's release build"
        error("Oxiflow: the engine library was not found at $p ($from). Build it with " *
              "`Pkg.build(\"Oxiflow\")` (or `make build` in the Oxiflow repository), or set " *
              "ENV[\"OXIFLOW_LIB\"] to the path of $LIBNAME.")
    end
    LIB[] = Libdl.dlopen(p)
    empty!(SYMS)
    return p
end

@inline function sym(name::Symbol)
    p = get(SYMS, name, C_NULL)
    if p == C_NULL
        LIB[] == C_NULL && load_library()
        p = Libdl.dlsym(LIB[], name)
        SYMS[name] = p
    end
    return p
end

"""
    OxiflowError(code, kind, msg)

Raised for every error the engine reports: `code` is TensorFlow's status code (3 invalid
argument, 5 not found, 8 resource exhausted, 9 failed precondition, 12 unimplemented,
13 internal), `kind` its TF name, `msg` the engine's message (it names the op, device or
shape at fault). The graph and session stay usable afterwards.
"""
struct OxiflowError <: Exception
    code::Int
    kind::String
    msg::String
end

const KINDS = Dict(3 => "InvalidArgumentError", 4 => "DeadlineExceededError", 5 => "NotFoundError", 8 => "ResourceExhaustedError",
                   9 => "FailedPreconditionError", 12 => "UnimplementedError", 13 => "InternalError")

Base.showerror(io::IO, e::OxiflowError) = print(io, "OxiflowError (", e.kind, "): ", e.msg)

"""Throws an `OxiflowError` of kind InvalidArgumentError: bad input caught on the Julia side."""
invalid(msg::AbstractString) = throw(OxiflowError(3, "InvalidArgumentError", msg))
"""Throws an `OxiflowError` of kind UnimplementedError: valid input that Oxiflow does not handle yet."""
unimplemented(msg::AbstractString) = throw(OxiflowError(12, "UnimplementedError", msg))
"""Throws an `OxiflowError` of kind FailedPreconditionError: the system is not in a state the call needs (a library built without MPI)."""
failed_precondition(msg::AbstractString) = throw(OxiflowError(9, "FailedPreconditionError", msg))

"""Throws an `OxiflowError` carrying the engine's last error message unless `status == 0`."""
function check(status::Integer)
    status == 0 && return nothing
    msg = unsafe_string(ccall(sym(:oxf_last_error), Cstring, ()))
    throw(OxiflowError(Int(status), get(KINDS, Int(status), "InternalError"), msg))
end

# Reads a library-owned string out-parameter.
function outstr(f)
    r = Ref{Cstring}(C_NULL)
    check(f(r))
    return r[] == C_NULL ? "" : unsafe_string(r[])
end

cstr_or_null(s::Nothing) = C_NULL
cstr_or_null(s::AbstractString) = String(s)

# ---------------------------------------------------------------- records
# Several exports return records as text, one per line, fields separated by tabs. This file
# is the only place that knows their columns: each wrapper below declares its record's
# schema and returns named tuples, and the rest of the package reads fields by name.

"""
    abi_records(text, schema::NamedTuple) -> Vector{NamedTuple}

The records of a C ABI text (one per line, fields separated by tabs; the last field keeps
any further tabs) as named tuples with `schema`'s names, each field parsed as `schema`'s
type for it (`String`, `Int64` or `Symbol`). An `OxiflowError` (InternalError) names the
record when a line has fewer fields or a number does not parse: the library and this file
disagree.
"""
function abi_records(text::AbstractString, schema::NamedTuple{names}) where {names}
    types = Tuple(schema)
    return map(split(text, '\n'; keepempty=false)) do line
        f = split(line, '\t'; limit=length(names))
        length(f) == length(names) || throw(OxiflowError(13, "InternalError", "C ABI record $(names): $(length(f)) fields in \"$line\""))
        NamedTuple{names}(ntuple(i -> abi_field(types[i], f[i], line), length(names)))
    end
end

abi_field(::Type{String}, s, line) = String(s)
abi_field(::Type{Symbol}, s, line) = Symbol(s)
function abi_field(::Type{Int64}, s, line)
    v = tryparse(Int64, s)
    v === nothing && throw(OxiflowError(13, "InternalError", "C ABI record: \"$s\" is not an integer in \"$line\""))
    return v
end

"""A device of a session (`oxf_session_devices`, `oxf_list_devices`, `oxf_list_logical_devices`):
full name, type (`"CPU"`, `"GPU"`), kind (`"cpu"`, `"emulated"`, `"cuda"`), TF's description, memory limit in bytes (0 for CPUs)."""
const DEVICE_RECORD = (name=String, type=String, kind=String, description=String, memory_limit=Int64)

"""A physical device (`oxf_list_physical_devices`, `oxf_get_visible_devices`): name
(`/physical_device:GPU:0`), type, physical index, uuid (`GPU-...`, empty for the CPU)."""
const PHYSICAL_DEVICE_RECORD = (name=String, device_type=String, physical=Int64, uuid=String)

"""A line of `oxf_result_trace_events`: an `op` (node, op type, device) or a `copy`
(tensor, source device, destination device), then start and end in ns and bytes."""
const TRACE_RECORD = (kind=Symbol, name=String, a=String, b=String, start_ns=Int64, end_ns=Int64, bytes=Int64)

oxf_version() = unsafe_string(ccall(sym(:oxf_version), Cstring, ()))
"""The input names of op type `op`, in its input order (empty when it does not name them)."""
oxf_op_inputs(op::AbstractString) = String.(split(outstr(r -> ccall(sym(:oxf_op_inputs), Int32, (Cstring, Ref{Cstring}), op, r)), '\n'; keepempty=false))
oxf_canonical_device(spec::AbstractString) = outstr(r -> ccall(sym(:oxf_canonical_device), Int32, (Cstring, Ref{Cstring}), spec, r))

oxf_graph_new() = ccall(sym(:oxf_graph_new), Ptr{Cvoid}, ())
# The `*_free` calls return a status (3 for a handle freed already); finalizers ignore it.
oxf_graph_free(p::Ptr{Cvoid}) = ccall(sym(:oxf_graph_free), Int32, (Ptr{Cvoid},), p)
function oxf_graph_num_nodes(g)
    r = Ref{Int64}(0)
    check(ccall(sym(:oxf_graph_num_nodes), Int32, (Ptr{Cvoid}, Ref{Int64}), g, r))
    return r[]
end

function oxf_const(g, dtype::Int32, dims::Vector{Int64}, data, name)
    r = Ref{Int64}(-1)
    GC.@preserve data dims begin
        check(ccall(sym(:oxf_const), Int32, (Ptr{Cvoid}, Int32, Int32, Ptr{Int64}, Ptr{Cvoid}, Csize_t, Int32, Cstring, Ref{Int64}),
                    g, dtype, length(dims), dims, pointer(data), sizeof(data), 1, cstr_or_null(name), r))
    end
    return r[]
end

# Int64 [nnz, 2] 0-based pairs of the 1-based `ii`, `jj`, checked against m×n, in one pass
function oxf_const_sparse_indices(g, ii::Vector{Int64}, jj::Vector{Int64}, m::Integer, n::Integer)
    r = Ref{Int64}(-1)
    GC.@preserve ii jj begin
        check(ccall(sym(:oxf_const_sparse_indices), Int32, (Ptr{Cvoid}, Ptr{Int64}, Ptr{Int64}, Int64, Int64, Int64, Cstring, Ref{Int64}),
                    g, ii, jj, length(ii), m, n, C_NULL, r))
    end
    return r[]
end

function oxf_placeholder(g, dtype::Int32, dims::Vector{Int64}, name)
    r = Ref{Int64}(-1)
    check(ccall(sym(:oxf_placeholder), Int32, (Ptr{Cvoid}, Int32, Int32, Ptr{Int64}, Cstring, Ref{Int64}),
                g, dtype, length(dims), dims, cstr_or_null(name), r))
    return r[]
end

function oxf_variable(g, dtype::Int32, dims::Vector{Int64}, data, name, trainable::Bool)
    r = Ref{Int64}(-1)
    GC.@preserve data dims begin
        check(ccall(sym(:oxf_variable), Int32, (Ptr{Cvoid}, Int32, Int32, Ptr{Int64}, Ptr{Cvoid}, Csize_t, Int32, Cstring, Int32, Ref{Int64}),
                    g, dtype, length(dims), dims, pointer(data), sizeof(data), 1, cstr_or_null(name), Int32(trainable), r))
    end
    return r[]
end

function oxf_add_op(g, op::AbstractString, nodes::Vector{Int64}, idx::Vector{Int32}, attrs_json, name)
    r = Ref{Int64}(-1)
    check(ccall(sym(:oxf_add_op), Int32, (Ptr{Cvoid}, Cstring, Ptr{Int64}, Ptr{Int32}, Int32, Cstring, Cstring, Ref{Int64}),
                g, op, nodes, idx, length(nodes), cstr_or_null(attrs_json), cstr_or_null(name), r))
    return r[]
end

function oxf_global_variables_initializer(g)
    r = Ref{Int64}(-1)
    check(ccall(sym(:oxf_global_variables_initializer), Int32, (Ptr{Cvoid}, Ref{Int64}), g, r))
    return r[]
end

for f in (:oxf_node_name, :oxf_node_op, :oxf_node_device, :oxf_node_colocation, :oxf_node_inputs)
    @eval $f(g, node::Integer) = outstr(r -> ccall(sym($(QuoteNode(f))), Int32, (Ptr{Cvoid}, Int64, Ref{Cstring}), g, node, r))
end

function oxf_node_num_outputs(g, node::Integer)
    r = Ref{Int32}(0)
    check(ccall(sym(:oxf_node_num_outputs), Int32, (Ptr{Cvoid}, Int64, Ref{Int32}), g, node, r))
    return Int(r[])
end

function oxf_node_by_name(g, name::AbstractString)
    r = Ref{Int64}(-1)
    check(ccall(sym(:oxf_node_by_name), Int32, (Ptr{Cvoid}, Cstring, Ref{Int64}), g, name, r))
    return r[]
end

const MAX_RANK = 32

"""(dtype code, dims row-major) of output `index` of `node`."""
function oxf_output_type(g, node::Integer, index::Integer)
    dt = Ref{Int32}(0); rank = Ref{Int32}(0); dims = zeros(Int64, MAX_RANK)
    check(ccall(sym(:oxf_output_type), Int32, (Ptr{Cvoid}, Int64, Int32, Ref{Int32}, Ref{Int32}, Ptr{Int64}, Int32),
                g, node, index, dt, rank, dims, MAX_RANK))
    return dt[], dims[1:rank[]]
end

oxf_push_device(g, spec::AbstractString) = check(ccall(sym(:oxf_push_device), Int32, (Ptr{Cvoid}, Cstring), g, spec))
oxf_push_device_reset(g) = check(ccall(sym(:oxf_push_device_reset), Int32, (Ptr{Cvoid},), g))
oxf_push_device_fn(g, f::Ptr{Cvoid}, ud::Ptr{Cvoid}) = check(ccall(sym(:oxf_push_device_fn), Int32, (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}), g, f, ud))
oxf_pop_device(g) = check(ccall(sym(:oxf_pop_device), Int32, (Ptr{Cvoid},), g))
oxf_push_colocation(g, node::Integer, ignore_existing::Bool) = check(ccall(sym(:oxf_push_colocation), Int32, (Ptr{Cvoid}, Int64, Int32), g, node, Int32(ignore_existing)))
oxf_pop_colocation(g) = check(ccall(sym(:oxf_pop_colocation), Int32, (Ptr{Cvoid},), g))
oxf_push_name_scope(g, name::AbstractString) = outstr(r -> ccall(sym(:oxf_push_name_scope), Int32, (Ptr{Cvoid}, Cstring, Ref{Cstring}), g, name, r))
oxf_pop_name_scope(g) = check(ccall(sym(:oxf_pop_name_scope), Int32, (Ptr{Cvoid},), g))
oxf_add_to_collection(g, key::AbstractString, node::Integer, index::Integer) =
    check(ccall(sym(:oxf_add_to_collection), Int32, (Ptr{Cvoid}, Cstring, Int64, Int32), g, key, node, index))
"""The `(node, output index)` pairs of graph collection `key`, in insertion order."""
function oxf_collection(g, key::AbstractString)
    text = outstr(r -> ccall(sym(:oxf_collection), Int32, (Ptr{Cvoid}, Cstring, Ref{Cstring}), g, key, r))
    return Tuple{Int64,Int32}[(abi_field(Int64, a, text), Int32(abi_field(Int64, b, text))) for (a, b) in split.(split(text, '\n'; keepempty=false))]
end

pairs_arrays(ps) = (Int64[p === nothing ? -1 : p[1] for p in ps], Int32[p === nothing ? 0 : p[2] for p in ps])

"""Starts a backward pass the caller drives (`oxf_gradients_begin_checkpointed`); returns
its handle, to free with `oxf_gradients_free` on every path. `checkpointing`: `""` for an
ordinary pass, else `"speed"`, `"memory"` or `"collection"` ([`gradient_checkpointing`](@ref))."""
function oxf_gradients_begin(g, ys::Vector{Tuple{Int64,Int32}}, xs::Vector{Tuple{Int64,Int32}},
                             gys::Union{Nothing,Vector{Tuple{Int64,Int32}}}, colocate::Bool, checkpointing::AbstractString="")
    (yn, yi), (xn, xi) = pairs_arrays(ys), pairs_arrays(xs)
    gyn, gyi = gys === nothing ? (Int64[], Int32[]) : pairs_arrays(gys)
    r = Ref{Ptr{Cvoid}}(C_NULL)
    GC.@preserve gyn gyi begin
        check(ccall(sym(:oxf_gradients_begin_checkpointed), Int32,
                    (Ptr{Cvoid}, Ptr{Int64}, Ptr{Int32}, Int32, Ptr{Int64}, Ptr{Int32}, Int32, Ptr{Int64}, Ptr{Int32}, Int32, Cstring, Ref{Ptr{Cvoid}}),
                    g, yn, yi, length(ys), xn, xi, length(xs),
                    gys === nothing ? Ptr{Int64}(C_NULL) : pointer(gyn), gys === nothing ? Ptr{Int32}(C_NULL) : pointer(gyi),
                    Int32(colocate), checkpointing, r))
    end
    return r[]
end

"""Goes on with a backward pass (`oxf_gradients_resume`), `supplied` the gradients of the
inputs of the custom node it stopped at (`(node, index)` or `nothing` each), or `nothing`
the first time. Returns `(node, list)`: the next custom node and the gradients reaching its
outputs, or node -1 and the gradient of each x; `(-1, 0)` in the list is none."""
function oxf_gradients_resume(run::Ptr{Cvoid}, supplied)
    dn, di = supplied === nothing ? (Int64[], Int32[]) : pairs_arrays(supplied)
    node = Ref{Int64}(-1); count = Ref{Int32}(0)
    check(ccall(sym(:oxf_gradients_resume), Int32, (Ptr{Cvoid}, Ptr{Int64}, Ptr{Int32}, Int32, Ref{Int64}, Ref{Int32}),
                run, dn, di, supplied === nothing ? Int32(-1) : Int32(length(dn)), node, count))
    on = fill(Int64(-1), count[]); oi = zeros(Int32, count[])
    check(ccall(sym(:oxf_gradients_take), Int32, (Ptr{Cvoid}, Ptr{Int64}, Ptr{Int32}, Int32), run, on, oi, count[]))
    return node[], [(on[k], oi[k]) for k in 1:count[]]
end

"""Frees a backward pass; an unfinished one is aborted (its nodes removed)."""
oxf_gradients_free(run::Ptr{Cvoid}) = check(ccall(sym(:oxf_gradients_free), Int32, (Ptr{Cvoid},), run))

function oxf_session_new(g, options_json::AbstractString)
    r = Ref{Ptr{Cvoid}}(C_NULL)
    check(ccall(sym(:oxf_session_new), Int32, (Ptr{Cvoid}, Cstring, Ref{Ptr{Cvoid}}), g, options_json, r))
    return r[]
end
oxf_session_free(p::Ptr{Cvoid}) = ccall(sym(:oxf_session_free), Int32, (Ptr{Cvoid},), p)
oxf_session_take_log(s) = outstr(r -> ccall(sym(:oxf_session_take_log), Int32, (Ptr{Cvoid}, Ref{Cstring}), s, r))
oxf_session_assigned_device(s, node::Integer) = outstr(r -> ccall(sym(:oxf_session_assigned_device), Int32, (Ptr{Cvoid}, Int64, Ref{Cstring}), s, node, r))
oxf_session_devices(s) = abi_records(outstr(r -> ccall(sym(:oxf_session_devices), Int32, (Ptr{Cvoid}, Ref{Cstring}), s, r)), DEVICE_RECORD)
oxf_list_devices(options_json::AbstractString) =
    abi_records(outstr(r -> ccall(sym(:oxf_list_devices), Int32, (Cstring, Ref{Cstring}), options_json, r)), DEVICE_RECORD)

"""
Mirror of C `OxTensorView`: a feed value read in place during `oxf_session_run`. `strides`
is null for a dense column-major `Array` (`col_major = 1`), else Julia's `strides` of the
array in elements (a view, transpose or `PermutedDimsArray`). `buffer`/`buffer_bytes` are
the `Array` the elements live in (the view's root parent): the engine refuses a view that
reaches outside it.
"""
struct OxTensorView
    dtype::Int32
    ndims::Int32
    dims::Ptr{Int64}
    data::Ptr{Cvoid}
    col_major::Int32
    strides::Ptr{Int64}
    buffer::Ptr{Cvoid}
    buffer_bytes::Csize_t
end

"""
    oxf_session_run(s, feeds, values, fetches, targets, trace)

Runs one step: `values[k]` (an `Array`, or an array with `strides` and `pointer`: see
`feed_value`) is fed to the tensor `feeds[k]` and copied by the engine during the call
(one `memcpy` for a dense array); returns the result handle, to free with
`oxf_result_free`.
"""
function oxf_session_run(s, feeds::Vector{Tuple{Int64,Int32}}, values::Vector, fetches::Vector{Tuple{Int64,Int32}},
                         targets::Vector{Int64}, trace::Bool)
    n = length(values)
    dims = [Int64[] for _ in 1:n]
    strs = [Int64[] for _ in 1:n]
    views = Vector{OxTensorView}(undef, n)
    r = Ref{Ptr{Cvoid}}(C_NULL)
    GC.@preserve values dims strs begin
        for k in 1:n
            views[k] = tensor_view(values[k], dims[k], strs[k])
        end
        check(ccall(sym(:oxf_session_run), Int32,
                    (Ptr{Cvoid}, Ptr{Int64}, Ptr{Int32}, Ptr{OxTensorView}, Int32, Ptr{Int64}, Ptr{Int32}, Int32, Ptr{Int64}, Int32, Int32, Ref{Ptr{Cvoid}}),
                    s, first.(feeds), last.(feeds), views, n, first.(fetches), last.(fetches), length(fetches),
                    targets, length(targets), Int32(trace), r))
    end
    return r[]
end

# The C view of one feed value (a function barrier: typed on the array). `dims` and, for a
# non-dense array, `strs` are filled and pointed to; the caller keeps them and `a` alive.
function tensor_view(a::AbstractArray{T,N}, dims::Vector{Int64}, strs::Vector{Int64}) where {T,N}
    append!(dims, size(a))
    dense = a isa Array
    dense || append!(strs, strides(a))
    root = root_array(a)
    return OxTensorView(dtype_code(T), N, pointer(dims), pointer(a), 1, dense ? Ptr{Int64}(C_NULL) : pointer(strs),
                        pointer(root), sizeof(root))
end

# The array whose memory `a` (a view, reshape, transpose or permutation of views) reads:
# its innermost parent.
function root_array(a::AbstractArray)
    p = parent(a)
    return p === a ? a : root_array(p)
end

oxf_result_free(p::Ptr{Cvoid}) = ccall(sym(:oxf_result_free), Int32, (Ptr{Cvoid},), p)

function oxf_result_type(res, i::Integer)
    dt = Ref{Int32}(0); rank = Ref{Int32}(0); dims = zeros(Int64, MAX_RANK)
    check(ccall(sym(:oxf_result_type), Int32, (Ptr{Cvoid}, Int32, Ref{Int32}, Ref{Int32}, Ptr{Int64}, Int32),
                res, i, dt, rank, dims, MAX_RANK))
    return dt[], dims[1:rank[]]
end

function oxf_result_copy!(res, i::Integer, dst::Array)
    GC.@preserve dst check(ccall(sym(:oxf_result_copy), Int32, (Ptr{Cvoid}, Int32, Ptr{Cvoid}, Csize_t, Int32),
                                res, i, pointer(dst), sizeof(dst), 1))
    return dst
end

"""
    oxf_result_take(res, i)

Pointer to a `malloc`ed column-major buffer of fetched value `i` that the caller now owns
(wrap it with `unsafe_wrap(Array, p, dims; own=true)`), or `C_NULL` when the engine hands
nothing over (an empty value; a platform whose engine allocator is not `malloc`): copy
with `oxf_result_copy!` then. No copy is made when nothing else shared the engine's buffer.
"""
function oxf_result_take(res, i::Integer)
    p = Ref{Ptr{Cvoid}}(C_NULL)
    check(ccall(sym(:oxf_result_take), Int32, (Ptr{Cvoid}, Int32, Int32, Ref{Ptr{Cvoid}}), res, i, 1, p))
    return p[]
end

oxf_result_trace_json(res) = outstr(r -> ccall(sym(:oxf_result_trace_json), Int32, (Ptr{Cvoid}, Ref{Cstring}), res, r))
"""The trace's events as `(kind, name, op, device, from, start_ns, end_ns, bytes)`: `kind`
`:op` for a kernel (`name` the node, `from` empty) or `:copy` for a cross-device copy (`name`
the tensor, `op` `"_Recv"`, `device` the destination, `from` the source)."""
function oxf_result_trace_events(res)
    recs = abi_records(outstr(r -> ccall(sym(:oxf_result_trace_events), Int32, (Ptr{Cvoid}, Ref{Cstring}), res, r)), TRACE_RECORD)
    return map(recs) do e
        op = e.kind === :op
        (kind=e.kind, name=e.name, op=op ? e.a : "_Recv", device=e.b, from=op ? "" : e.a, start_ns=e.start_ns, end_ns=e.end_ns, bytes=e.bytes)
    end
end
oxf_timeline_html(json::AbstractString) = outstr(r -> ccall(sym(:oxf_timeline_html), Int32, (Cstring, Ref{Cstring}), json, r))
oxf_timeline_merge(jsons::AbstractString) = outstr(r -> ccall(sym(:oxf_timeline_merge), Int32, (Cstring, Ref{Cstring}), jsons, r))
oxf_timeline_summary(json::AbstractString) = outstr(r -> ccall(sym(:oxf_timeline_summary), Int32, (Cstring, Ref{Cstring}), json, r))
oxf_session_graph_dot(s) = outstr(r -> ccall(sym(:oxf_session_graph_dot), Int32, (Ptr{Cvoid}, Ref{Cstring}), s, r))

oxf_push_control_dependencies(g, nodes::Vector{Int64}) =
    check(ccall(sym(:oxf_push_control_dependencies), Int32, (Ptr{Cvoid}, Ptr{Int64}, Int32), g, nodes, length(nodes)))
oxf_pop_control_dependencies(g) = check(ccall(sym(:oxf_pop_control_dependencies), Int32, (Ptr{Cvoid},), g))

"""
L-BFGS-B from `x` (updated in place) within `[lower, upper]`; `objective` and `iteration`
are C function pointers receiving `userdata`. Returns `(f, iterations, status)`.
"""
function oxf_lbfgsb(x::Vector{Float64}, lower::Vector{Float64}, upper::Vector{Float64}, m::Integer, max_iter::Integer,
                    pgtol::Real, ftol::Real, objective::Ptr{Cvoid}, iteration::Ptr{Cvoid}, userdata::Ptr{Cvoid})
    f = Ref{Float64}(NaN); it = Ref{Int64}(0); st = Ref{Int32}(0)
    GC.@preserve x lower upper begin
        check(ccall(sym(:oxf_lbfgsb), Int32,
                    (Int64, Ptr{Float64}, Ptr{Float64}, Ptr{Float64}, Int32, Int64, Float64, Float64, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid},
                     Ref{Float64}, Ref{Int64}, Ref{Int32}),
                    length(x), x, lower, upper, Int32(m), Int64(max_iter), Float64(pgtol), Float64(ftol), objective, iteration,
                    userdata, f, it, st))
    end
    return f[], it[], Int(st[])
end

# Device configuration (crates/oxiflow-capi/src/config.rs)
oxf_set_soft_device_placement(on::Bool) = check(ccall(sym(:oxf_set_soft_device_placement), Int32, (Int32,), on))
oxf_set_log_device_placement(on::Bool) = check(ccall(sym(:oxf_set_log_device_placement), Int32, (Int32,), on))
function oxf_device_policy()
    soft = Ref{Int32}(0); log = Ref{Int32}(0); ini = Ref{Int32}(0)
    check(ccall(sym(:oxf_device_policy), Int32, (Ref{Int32}, Ref{Int32}, Ref{Int32}), soft, log, ini))
    return (soft=soft[] != 0, log=log[] != 0, initialized=ini[] != 0)
end
oxf_set_memory_growth(device::AbstractString, on::Bool) = check(ccall(sym(:oxf_set_memory_growth), Int32, (Cstring, Int32), device, on))
function oxf_get_memory_growth(device::AbstractString)
    on = Ref{Int32}(0)
    check(ccall(sym(:oxf_get_memory_growth), Int32, (Cstring, Ref{Int32}), device, on))
    return on[] != 0
end
oxf_set_memory_fraction(f::Real) = check(ccall(sym(:oxf_set_memory_fraction), Int32, (Float64,), Float64(f)))
oxf_set_logical_device_configuration(device::AbstractString, limits_mb::Vector{Int64}) =
    check(ccall(sym(:oxf_set_logical_device_configuration), Int32, (Cstring, Ptr{Int64}, Int64), device, limits_mb, length(limits_mb)))
"""The memory limits (MiB, `nothing` where unset) of the logical devices configured for `device`."""
function oxf_get_logical_device_configuration(device::AbstractString)
    text = outstr(r -> ccall(sym(:oxf_get_logical_device_configuration), Int32, (Cstring, Ref{Cstring}), device, r))
    return Union{Nothing,Int64}[x == "-" ? nothing : abi_field(Int64, x, text) for x in split(text, ','; keepempty=false)]
end
oxf_list_physical_devices() = abi_records(outstr(r -> ccall(sym(:oxf_list_physical_devices), Int32, (Ref{Cstring},), r)), PHYSICAL_DEVICE_RECORD)
oxf_set_visible_devices(devices::AbstractString, device_type) =
    check(ccall(sym(:oxf_set_visible_devices), Int32, (Cstring, Cstring), devices, cstr_or_null(device_type)))
oxf_get_visible_devices(device_type) =
    abi_records(outstr(r -> ccall(sym(:oxf_get_visible_devices), Int32, (Cstring, Ref{Cstring}), cstr_or_null(device_type), r)), PHYSICAL_DEVICE_RECORD)
oxf_list_logical_devices() = abi_records(outstr(r -> ccall(sym(:oxf_list_logical_devices), Int32, (Ref{Cstring},), r)), DEVICE_RECORD)
oxf_reset_device_configuration() = check(ccall(sym(:oxf_reset_device_configuration), Int32, ()))
function oxf_session_memory_stats(s, device::AbstractString)
    out = zeros(UInt64, 4)
    check(ccall(sym(:oxf_session_memory_stats), Int32, (Ptr{Cvoid}, Cstring, Ptr{UInt64}), s, device, out))
    return (current=Int(out[1]), peak=Int(out[2]), limit=Int(out[3]), reserved=Int(out[4]))
end
function oxf_session_threads(s)
    inter = Ref{Int32}(0); intra = Ref{Int32}(0)
    check(ccall(sym(:oxf_session_threads), Int32, (Ptr{Cvoid}, Ref{Int32}, Ref{Int32}), s, inter, intra))
    return Int(inter[]), Int(intra[])
end
oxf_session_explain_placement(s, node::Integer) =
    outstr(r -> ccall(sym(:oxf_session_explain_placement), Int32, (Ptr{Cvoid}, Int64, Ref{Cstring}), s, node, r))
oxf_session_placement_report(s) = outstr(r -> ccall(sym(:oxf_session_placement_report), Int32, (Ptr{Cvoid}, Ref{Cstring}), s, r))
"""What the CUDA layer found: `(driver, driver_info, gpus, reason)` (see `cuda_status`)."""
function oxf_cuda_status()
    text = outstr(r -> ccall(sym(:oxf_cuda_status), Int32, (Ref{Cstring},), r))
    driver, info, reason = "absent", "", nothing
    gpus = Tuple{Int,String,Int,String}[]
    for line in split(text, '\n'; keepempty=false)
        tag = split(line, '\t'; limit=2)[1]
        if tag == "driver"
            d = abi_records(line, (tag=String, status=String, info=String))[1]
            driver, info = d.status, d.info
        elseif tag == "gpu"
            g = abi_records(line, (tag=String, ordinal=Int64, description=String, memory_bytes=Int64, uuid=String))[1]
            push!(gpus, (g.ordinal, g.description, g.memory_bytes, g.uuid))
        elseif tag == "reason"
            reason = abi_records(line, (tag=String, reason=String))[1].reason
        end
    end
    return (driver=driver, driver_info=info, gpus=gpus, reason=reason)
end

# ---------------------------------------------------------------- MPI (oxiflow-mpi)

function oxf_mpi_init()
    r = Ref{Int32}(0)
    check(ccall(sym(:oxf_mpi_init), Int32, (Ref{Int32},), r))
    return r[] == 1
end

oxf_mpi_finalize() = check(ccall(sym(:oxf_mpi_finalize), Int32, ()))

function oxf_mpi_state()
    r = Ref{Int32}(0)
    check(ccall(sym(:oxf_mpi_state), Int32, (Ref{Int32},), r))
    return (running=(r[] & 1) != 0, finalized=(r[] & 2) != 0, built=(r[] & 4) != 0)
end

function oxf_mpi_rank_size()
    rank = Ref{Int64}(0); size = Ref{Int64}(0)
    check(ccall(sym(:oxf_mpi_rank_size), Int32, (Ref{Int64}, Ref{Int64}), rank, size))
    return Int(rank[]), Int(size[])
end

function oxf_mpi_local_rank_size()
    rank, size = Ref{Int64}(0), Ref{Int64}(0)
    check(ccall(sym(:oxf_mpi_local_rank_size), Int32, (Ref{Int64}, Ref{Int64}), rank, size))
    return (Int(rank[]), Int(size[]))
end

oxf_mpi_barrier() = check(ccall(sym(:oxf_mpi_barrier), Int32, ()))

function oxf_ps_start(params::Vector{Float64}, learning_rate::Float64, momentum::Float64)
    id = Ref{Int64}(0)
    check(ccall(sym(:oxf_ps_start), Int32, (Ptr{Float64}, Int64, Float64, Float64, Ref{Int64}),
                params, length(params), learning_rate, momentum, id))
    return id[]
end

function oxf_ps_push(id::Int64, grad::Vector{Float64}, n::Int)
    params = zeros(n); version = Ref{Int64}(0); staleness = Ref{Int64}(0)
    check(ccall(sym(:oxf_ps_push), Int32, (Int64, Ptr{Float64}, Int64, Ptr{Float64}, Int64, Ref{Int64}, Ref{Int64}),
                id, grad, length(grad), params, n, version, staleness))
    return params, Int(version[]), Int(staleness[])
end

function oxf_ps_pull(id::Int64, n::Int)
    params = zeros(n); version = Ref{Int64}(0)
    check(ccall(sym(:oxf_ps_pull), Int32, (Int64, Ptr{Float64}, Int64, Ref{Int64}), id, params, n, version))
    return params, Int(version[])
end

function oxf_ps_close(id::Int64, n::Int)
    params = zeros(n); version = Ref{Int64}(0)
    check(ccall(sym(:oxf_ps_close), Int32, (Int64, Ptr{Float64}, Int64, Ref{Int64}), id, params, n, version))
    return params, Int(version[])
end

function oxf_mpi_sync(message::Union{Vector{Float64},Vector{Int64}}, root::Integer)
    GC.@preserve message check(ccall(sym(:oxf_mpi_sync), Int32, (Ptr{Cvoid}, Int64, Int32, Int64),
                                     message, length(message), dtype_code(eltype(message)), root))
    return message
end
