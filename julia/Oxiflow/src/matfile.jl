# ADCME's `save(sess, file)` / `load(sess, file)`: variable values in MATLAB v5 .mat files
# (uncompressed Level 5 MAT-file format), written and read here without packages.
#
# A file is a 128-byte header (descriptive text, 8 bytes of subsystem offset, version 0x0100
# and the endian indicator "IM" for a little-endian file) followed by data elements. Every
# element has an 8-byte tag (UInt32 type, UInt32 byte count) and its data padded to 8 bytes;
# an element of at most 4 bytes may be packed into its tag (the "small data element": UInt16
# byte count in the upper half of the first word, UInt16 type in the lower, the data in the
# second word). Each variable is one miMATRIX element holding four sub-elements: array flags
# (class and the logical flag), dimensions (Int32, at least two), the array name (miINT8)
# and the real part (column-major, Julia's layout).

const MI_MATRIX = UInt32(14)
const MI_COMPRESSED = UInt32(15)
# miINT8 ... miUINT64 (miSINGLE 7, miDOUBLE 9): the types a data element may hold.
const MI_TYPES = Dict{UInt32,DataType}(1 => Int8, 2 => UInt8, 3 => Int16, 4 => UInt16, 5 => Int32, 6 => UInt32,
                                       7 => Float32, 9 => Float64, 12 => Int64, 13 => UInt64)
# The numeric MATLAB classes (mxDOUBLE_CLASS 6 ... mxUINT64_CLASS 15) and their element types.
const MX_TYPES = Dict{Int,DataType}(6 => Float64, 7 => Float32, 8 => Int8, 9 => UInt8, 10 => Int16, 11 => UInt16,
                                    12 => Int32, 13 => UInt32, 14 => Int64, 15 => UInt64)
const MX_NAMES = Dict(1 => "cell", 2 => "struct", 3 => "object", 4 => "char", 5 => "sparse", 16 => "function handle", 17 => "opaque")
# A variable's dtype as written: (class, data type). Bool is mxUINT8_CLASS with the logical flag.
const MAT_CLASS = Dict{DataType,Tuple{UInt32,UInt32}}(Float64 => (6, 9), Float32 => (7, 7), Int64 => (14, 12),
                                                      Int32 => (12, 5), Bool => (9, 2))
const MX_LOGICAL = UInt32(0x0200)
const MX_COMPLEX = UInt32(0x0800)

# ------------------------------------------------------------------ names

# Characters of graph names that MATLAB names do not allow, and what replaces them. ':' and
# '/' are replaced as ADCME's save/load replace them, so files of either load in the other.
const MAT_NAME_ESCAPES = Dict(':' => "colon", '/' => "backslash", '.' => "dot", '-' => "dash", '>' => "gt")

"""
    Oxiflow.mat_name(name) -> String

The MATLAB variable name under which [`save`](@ref) stores the graph tensor `name` and under
which [`load`](@ref) looks for it: `:` becomes `colon` and `/` becomes `backslash` (ADCME's
mapping), `.` `dot`, `-` `dash`, `>` `gt`, and a name that then starts with a digit or `_`
gets the prefix `x`, so the result is a valid MATLAB name (letters, digits, `_`, starting
with a letter): `mat_name("dense/kernel:0") == "densebackslashkernelcolon0"`.
"""
function mat_name(name::AbstractString)
    io = IOBuffer()
    for c in name
        if isascii(c) && (isletter(c) || isdigit(c) || c == '_')
            print(io, c)
        else
            print(io, get(() -> "u" * string(UInt32(c); base=16, pad=4), MAT_NAME_ESCAPES, c))
        end
    end
    s = String(take!(io))
    return isempty(s) || !isletter(s[1]) ? "x" * s : s
end

# ADCME's own names (only ':' and '/' replaced): `load` falls back to them for a file written by
# ADCME, where the two mappings differ (names with '.', '-', '>' or a leading digit or '_').
adcme_mat_name(name::AbstractString) = replace(replace(name, ":" => "colon"), "/" => "backslash")

# The tensors `save`/`load` handle (`nothing`: the session graph's GLOBAL_VARIABLES) and their
# MATLAB names; two tensors with one MATLAB name are an error.
function matfile_vars(sess::Session, vars, fname)
    vars isa AbstractVector && !all(v -> v isa Tensor, vars) &&
        invalid("$fname: vars must be a tensor or a vector of tensors, got $(typeof(vars))")
    vs = vars === nothing ? collection_tensors(sess.graph, GLOBAL_VARIABLES) :
         vars isa Tensor ? Tensor[vars] : Tensor[v for v in vars]
    names = String[]
    for v in vs
        getfield(v, :graph) === sess.graph || invalid("$fname: $(v.name) belongs to another graph than the session's")
        n = mat_name(v.name)
        k = findfirst(==(n), names)
        k === nothing || invalid("$fname: $(vs[k].name) and $(v.name) both map to the MATLAB name $n")
        push!(names, n)
    end
    return vs, names
end

# ------------------------------------------------------------------ writing

padded(n) = (n + 7) & ~7

function write_element(io::IO, type, data::AbstractVector)
    nb = sizeof(data)
    write(io, UInt32(type), UInt32(nb))
    write(io, data)
    write(io, zeros(UInt8, padded(nb) - nb))
end

# MATLAB arrays have at least two dimensions: a scalar is 1×1, a vector of length n is n×1.
mat_dims(sz::Tuple) = length(sz) == 0 ? (1, 1) : length(sz) == 1 ? (sz[1], 1) : sz

function write_matrix(io::IO, name::String, a::AbstractArray)
    T = eltype(a)
    haskey(MAT_CLASS, T) || invalid("save: $name holds $T values, which have no MATLAB class here")
    class, mi = MAT_CLASS[T]
    dims = Int32[d for d in mat_dims(size(a))]
    data = T === Bool ? UInt8[x for x in a] : vec(collect(a))
    nname = ncodeunits(name)
    body = 16 + 8 + padded(4 * length(dims)) + 8 + padded(nname) + 8 + padded(sizeof(data))
    write(io, MI_MATRIX, UInt32(body))
    write(io, UInt32(6), UInt32(8), class | (T === Bool ? MX_LOGICAL : UInt32(0)), UInt32(0))   # miUINT32 flags
    write_element(io, 5, dims)                       # miINT32
    write_element(io, 1, Vector{UInt8}(codeunits(name)))   # miINT8
    write_element(io, mi, data)
end

function write_mat_header(io::IO)
    text = "MATLAB 5.0 MAT-file, Platform: Oxiflow $(Sys.ARCH), Created on: " *
           Libc.strftime("%a %b %d %H:%M:%S %Y", time())
    write(io, rpad(text, 116)[1:116])
    write(io, zeros(UInt8, 8))          # no subsystem data
    write(io, UInt16(0x0100), UInt8('I'), UInt8('M'))
end

"""
    save(sess, file, vars=nothing) -> nothing

Writes the current value of each variable in `vars` (a tensor or a vector of tensors;
default: every variable of the session's graph, `get_collection(GLOBAL_VARIABLES)`, so
optimizer slots and non-trainable variables too) in session `sess` to `file` as a MATLAB v5
.mat file (uncompressed), one MATLAB variable per graph variable, as ADCME's `save(sess,
file, vars)` does.

Each value is stored under [`Oxiflow.mat_name`](@ref)`(v.name)`: `:` becomes `colon`, `/`
`backslash` (ADCME's mapping; `dense/kernel:0` is `densebackslashkernelcolon0`), `.`, `-`
and `>` become `dot`, `dash`, `gt`, and `x` is put before a name that would start with a
digit or `_`. Classes: Float64 `double`, Float32 `single`, Int64 `int64`, Int32 `int32`, Bool
`logical`. Dimensions as in MATLAB: a scalar is 1×1, a vector of length n is n×1, arrays keep
their size (column-major, as Julia stores them). `scipy.io.loadmat` and MATLAB read the file;
[`load`](@ref) reads it back.

Errors (`OxiflowError`): a tensor of another graph, two tensors whose names map to one MATLAB
name, and what `run(sess, vars)` raises (an uninitialized variable). The file is written
only after every value was fetched. Returns `nothing`.
"""
function save(sess::Session, file::AbstractString, vars::Union{AbstractVector,Tensor,Nothing}=nothing)
    vs, names = matfile_vars(sess, vars, "save")
    vals = isempty(vs) ? Any[] : run(sess, vs)
    io = IOBuffer()
    write_mat_header(io)
    for (n, x) in zip(names, vals)
        write_matrix(io, n, x isa AbstractArray ? x : fill(x))
    end
    write(file, take!(io))
    return nothing
end

# ------------------------------------------------------------------ reading

"""One MATLAB variable read from a file: its class, logical flag, dimensions and values
(column-major, of the class's element type), or `problem` saying why it cannot be loaded."""
struct MatArray
    class::Int
    logical::Bool
    dims::Vector{Int}
    data::Vector
    problem::String
end

getnum(::Type{T}, b::AbstractVector{UInt8}, pos) where {T} = reinterpret(T, b[pos:pos+sizeof(T)-1])[1]

# The tag at `pos`: (type, byte count, first data byte, position of the next element).
function read_tag(b::AbstractVector{UInt8}, pos::Int)
    w = getnum(UInt32, b, pos)
    w >> 16 == 0 || return (w & 0xffff, Int(w >> 16), pos + 4, pos + 8)   # small data element
    n = Int(getnum(UInt32, b, pos + 4))
    pos + 7 + n <= length(b) || throw(BoundsError(b, pos + 7 + n))
    return (w, n, pos + 8, pos + 8 + padded(n))
end

# The data of the element at `pos` as a vector of its own type, and where the next one starts.
function read_element(b::AbstractVector{UInt8}, pos::Int, what)
    type, n, start, next = read_tag(b, pos)
    T = get(MI_TYPES, type, nothing)
    T === nothing && error("$what has the data type $type, not a numeric one")
    n % sizeof(T) == 0 || error("$what: $n bytes of $T data")
    return collect(reinterpret(T, b[start:start+n-1])), next
end

# The miMATRIX element whose data start at `pos` and end with `b`: (name, MatArray).
function read_matrix(b::AbstractVector{UInt8}, pos::Int)
    flags, pos = read_element(b, pos, "the array flags")
    class = Int(flags[1] & 0xff)
    dims, pos = read_element(b, pos, "the dimensions")
    namebytes, pos = read_element(b, pos, "the array name")
    name = String(copy(reinterpret(UInt8, namebytes)))
    dims = Int.(dims)
    logical = flags[1] & MX_LOGICAL != 0
    T = get(MX_TYPES, class, nothing)
    T === nothing && return name, MatArray(class, logical, dims, Any[], "a $(get(MX_NAMES, class, "class $class")) array, not a numeric one")
    flags[1] & MX_COMPLEX != 0 && return name, MatArray(class, logical, dims, Any[], "a complex array")
    raw, _ = read_element(b, pos, "the values of $name")
    length(raw) == prod(dims) || error("$name has $(length(raw)) values for the dimensions $(join(dims, '×'))")
    data = try
        logical ? Bool[x != 0 for x in raw] : convert(Vector{T}, raw)
    catch e
        e isa InexactError || rethrow()
        return name, MatArray(class, logical, dims, Any[], "values stored as $(eltype(raw)) that do not fit its class $T")
    end
    return name, MatArray(class, logical, dims, data, "")
end

"""
    Oxiflow.read_mat(file) -> Dict{String,MatArray}

The variables of the MATLAB v5 .mat file `file`, by name. Numeric and logical arrays are
read, their values converted to the class's element type when the file stores them in a
narrower type (as MATLAB and SciPy may); other classes (cell, struct, char, sparse) and
complex arrays are kept with a `problem` that `load` reports if asked for them. An
`OxiflowError` for a file that is not a little-endian v5 file, a truncated or malformed one,
or one with a compressed element (not supported: no zlib without packages).
"""
function read_mat(file::AbstractString)
    b = read(file)
    length(b) >= 128 || invalid("load: $file is not a MATLAB v5 .mat file (shorter than the 128-byte header)")
    b[127:128] == UInt8['M', 'I'] && invalid("load: $file is a big-endian .mat file; only little-endian files are supported")
    b[127:128] == UInt8['I', 'M'] && getnum(UInt16, b, 125) == 0x0100 ||
        invalid("load: $file is not a MATLAB v5 .mat file (no version 0x0100 and endian indicator 'IM' at byte 124; " *
                "a MATLAB v7.3 file is HDF5: save with -v6 or -v7)")
    d = Dict{String,MatArray}()
    pos = 129
    try
        while pos + 7 <= length(b)
            type, n, start, next = read_tag(b, pos)
            type == MI_COMPRESSED && invalid("load: $file holds compressed (zlib) variables, which Oxiflow cannot read; " *
                                             "save it uncompressed: scipy.io.savemat(..., do_compression=False) (SciPy's default) or MATLAB's save -v6")
            if type == MI_MATRIX && n > 0
                name, a = read_matrix(view(b, 1:start+n-1), start)
                d[name] = a
            end
            pos = next
        end
    catch e
        e isa OxiflowError && rethrow()
        e isa Union{BoundsError,ErrorException} || rethrow()
        invalid("load: $file is truncated or not a valid MATLAB v5 .mat file (at byte $(pos - 1): " *
                (e isa BoundsError ? "an element runs past the end" : e.msg) * ")")
    end
    return d
end

"""
    Oxiflow.matread(file) -> Dict{String,Any}

The numeric and logical variables of the MATLAB v5 .mat file `file` by name, as MAT.jl's
`matread` gives them: a 1×1 array as a number, others as arrays of their MATLAB size (a
vector saved by [`save`](@ref) comes back as a one-column matrix). Variables of other
classes are left out. Errors as [`Oxiflow.read_mat`](@ref).
"""
function matread(file::AbstractString)
    d = Dict{String,Any}()
    for (k, a) in read_mat(file)
        isempty(a.problem) || continue
        T = a.logical ? Bool : MX_TYPES[a.class]
        v = reshape(convert(Vector{T}, a.data), Tuple(a.dims))
        d[k] = length(v) == 1 ? v[1] : v
    end
    return d
end

# ------------------------------------------------------------------ loading

# Per variable and graph, made at its first `load` and reused (so repeated loads neither grow
# the graph nor keep values in it): a placeholder, an Assign of it, and a NoOp that runs the
# Assign without fetching its output (no copy of the value back from the variable's device).
const LOAD_OPS = WeakKeyDict{Graph,Dict{Tuple{Int64,Int32},Tuple{Tensor,Tensor}}}()

function load_op(v::Tensor)
    g = getfield(v, :graph)
    ops = get!(() -> Dict{Tuple{Int64,Int32},Tuple{Tensor,Tensor}}(), LOAD_OPS, g)
    return get!(ops, pair(v)) do
        p = Tensor(g, oxf_placeholder(g, dtype_code(v.dtype), Int64[size(v)...], nothing), 0)
        a = assign(v, p)
        oxf_push_control_dependencies(g, Int64[getfield(a, :node)])
        try
            (p, Tensor(g, oxf_add_op(g, "NoOp", Int64[], Int32[], nothing, nothing), 0))
        finally
            oxf_pop_control_dependencies(g)
        end
    end
end

squeeze_trailing(d) = (k = something(findlast(x -> x != 1, d), 0); Tuple(d[1:k]))

# The value of variable `v` from its stored array `a`, reshaped to `v`'s size; an error
# naming both when the class or the size differs. A vector may be stored n×1 or 1×n (SciPy's
# default), and trailing singleton dimensions do not count (MATLAB drops them).
function mat_value(a::MatArray, v::Tensor, key, file)
    isempty(a.problem) || invalid("load: $(v.name) is stored in $file as $key, $(a.problem)")
    T = v.dtype
    class, _ = MAT_CLASS[T]
    stored = a.logical ? "logical" : string(MX_TYPES[a.class])
    got = "$stored of size $(join(a.dims, '×'))"
    if a.class != class || a.logical != (T === Bool)
        invalid("load: $(v.name) is a $T variable of size $(size(v)), but $file stores $key as $got")
    end
    sz = size(v)
    squeeze_trailing(a.dims) == squeeze_trailing(sz) || (length(sz) == 1 && a.dims == [1, sz[1]]) ||
        invalid("load: $(v.name) has size $(sz) (MATLAB $(join(mat_dims(sz), '×'))), but $file stores $key as $got")
    return reshape(convert(Vector{T}, a.data), sz)
end

"""
    load(sess, file, vars=nothing) -> nothing

Reads the MATLAB v5 .mat file `file` and assigns each variable in `vars` (a variable or a
vector of them; default: every variable of the session's graph, `GLOBAL_VARIABLES`) its
stored value in session `sess`, as ADCME's `load(sess, file, vars)` does. Variables are
looked up by [`Oxiflow.mat_name`](@ref)`(v.name)`, the name [`save`](@ref) writes (ADCME's
names are found too), so a file from `save` loads into a new session of the same graph,
whatever devices its variables are on (the values go through one placeholder and one
`Assign` per variable, made at the first `load` and reused). Files written by MATLAB
(`save -v6`) or by `scipy.io.savemat` (uncompressed, its default) load when their names
follow that mapping; a vector may be stored n×1 or 1×n, and values stored in a narrower type
than their class are converted. Variables in the file that are not asked for are ignored.

Errors (`OxiflowError`, InvalidArgumentError), raised before anything is assigned: variables
the file lacks (all of them named, with the MATLAB names looked for); a stored array of
another class (a Float32 variable needs `single`, Float64 `double`, Int64 `int64`, Int32
`int32`, Bool `logical`) or of another size (the variable and both sizes named); a stored
cell, struct, char, sparse or complex array; a file that is not a little-endian v5 file, is
truncated, or holds compressed elements (MATLAB's default `-v7` format, or `savemat(...,
do_compression=True)`: save with `-v6` or `do_compression=False`). Returns `nothing`.
"""
function load(sess::Session, file::AbstractString, vars::Union{AbstractVector,Tensor,Nothing}=nothing)
    vs, names = matfile_vars(sess, vars, "load")
    for v in vs
        is_variable_op(v) || invalid("load: $(v.name) is a $(v.op.type) tensor, not a Variable")
    end
    d = read_mat(file)
    keys_ = [haskey(d, n) ? n : haskey(d, adcme_mat_name(v.name)) ? adcme_mat_name(v.name) : nothing
             for (v, n) in zip(vs, names)]
    lacking = [i for (i, k) in enumerate(keys_) if k === nothing]
    isempty(lacking) || invalid("load: $file has no value for the variable" * (length(lacking) > 1 ? "s " : " ") *
                                join(("$(vs[i].name) (MATLAB name $(names[i]))" for i in lacking), ", ") *
                                "; nothing was assigned")
    values = [mat_value(d[k], v, k, file) for (v, k) in zip(vs, keys_)]
    isempty(vs) && return nothing
    ops = [load_op(v) for v in vs]
    run(sess, Tensor[last(o) for o in ops], (first(o) => x for (o, x) in zip(ops, values))...)
    return nothing
end
