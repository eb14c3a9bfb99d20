# ADCME's MPI API (ADCME.jl src/mpi.jl) and Horovod's allreduce, on the engine's collective
# ops (`MpiSum`, `MpiBcast`, `MpiAllreduce`) and its OpenMPI transport. Run a program on
# several processes with `mpirun -n 4 julia script.jl`; every rank builds the same graph.

export mpi_init, mpi_finalize, mpi_initialized, mpi_finalized, mpi_rank, mpi_size,
       mpi_sum, mpi_bcast, mpi_allreduce, mpi_barrier, mpi_sync!, mpi_optimize,
       has_mpi, get_mpi, get_mpirun

"""
    has_mpi(verbose=true) -> Bool

ADCME's `has_mpi`: whether this Oxiflow can run MPI programs, i.e. its library was built
with MPI (OpenMPI through rsmpi; `make setup build` does it where OpenMPI is installed).
With `verbose`, an `@info` names the MPI library in use. Never raises.
"""
function has_mpi(verbose::Bool=true)
    built = oxf_mpi_state().built
    if built && verbose
        lib = mpi_library()
        @info "Use MPI library: $(lib === nothing ? "the one this Oxiflow was linked with" : lib)"
    end
    return built
end

# The path of the MPI shared library loaded with Oxiflow's (libmpi.so.*), or nothing.
function mpi_library()
    libs = filter(p -> occursin(r"(^|/)libmpi\.so", p), Libdl.dllist())
    return isempty(libs) ? nothing : realpath(first(libs))
end

"""
    get_mpi() -> (include_dir, library)

ADCME's `get_mpi`: the MPI include directory (the one holding `mpi.h`) and shared library,
for compiling code against the same MPI. `ENV["MPI_INCLUDE_PATH"]` and
`ENV["MPI_C_LIBRARIES"]` win when both are set (ADCME's rule); otherwise the library is the
`libmpi` loaded with Oxiflow and the include directory is found next to it or in
`/usr/include`. An `OxiflowError` (FailedPreconditionError) when Oxiflow was built without
MPI or the files are not found.
"""
function get_mpi()
    haskey(ENV, "MPI_INCLUDE_PATH") && haskey(ENV, "MPI_C_LIBRARIES") &&
        return ENV["MPI_INCLUDE_PATH"], ENV["MPI_C_LIBRARIES"]
    oxf_mpi_state().built || failed_precondition("get_mpi: this Oxiflow was built without MPI; install OpenMPI (Debian: libopenmpi-dev) and libclang, then run `make setup build`")
    lib = mpi_library()
    lib === nothing && failed_precondition("get_mpi: no libmpi is loaded with Oxiflow; set ENV[\"MPI_INCLUDE_PATH\"] and ENV[\"MPI_C_LIBRARIES\"]")
    dirs = [joinpath(dirname(lib), "openmpi", "include"), joinpath(dirname(dirname(lib)), "include"),
            "/usr/include/openmpi", "/usr/include/mpi", "/usr/include"]
    i = findfirst(d -> isfile(joinpath(d, "mpi.h")), dirs)
    i === nothing && failed_precondition("get_mpi: mpi.h not found in $(join(dirs, ", ")); install the MPI headers (Debian: libopenmpi-dev) or set ENV[\"MPI_INCLUDE_PATH\"] and ENV[\"MPI_C_LIBRARIES\"]")
    return dirs[i], lib
end

"""
    get_mpirun() -> String

ADCME's `get_mpirun`: the path of the `mpirun` program that starts an MPI job of this
Oxiflow (`mpirun -n 4 julia script.jl`). With `ENV["MPI_INCLUDE_PATH"]` and
`ENV["MPI_C_LIBRARIES"]` set, the `bin/mpirun` next to that include directory (ADCME's
rule, with its warning); otherwise `mpirun` (or `mpiexec`) on the `PATH`. An
`OxiflowError` (FailedPreconditionError) when Oxiflow has no MPI or no program is found.
"""
function get_mpirun()
    has_mpi(false) || failed_precondition("get_mpirun: this Oxiflow was built without MPI; install OpenMPI (Debian: libopenmpi-dev) and libclang, then run `make setup build`")
    if haskey(ENV, "MPI_INCLUDE_PATH") && haskey(ENV, "MPI_C_LIBRARIES")
        @warn "You are not using the default MPI. Trying to detect the executable..."
        mpirun = abspath(joinpath(ENV["MPI_INCLUDE_PATH"], "..", "bin", "mpirun"))
        isfile(mpirun) || failed_precondition("get_mpirun: $mpirun does not exist")
        return mpirun
    end
    for name in ("mpirun", "mpiexec")
        p = Sys.which(name)
        p === nothing || return p
    end
    failed_precondition("get_mpirun: neither mpirun nor mpiexec is on the PATH")
end

"""
    mpi_init(; pin_gpu=true)

ADCME's `mpi_init`: starts MPI (`MPI_Init_thread` with `MPI_THREAD_MULTIPLE`, on
`MPI_COMM_WORLD`); call it before running any graph with MPI ops. A second call warns and
does nothing (ADCME's behaviour). With `pin_gpu` (the default), when several ranks share a
host that has GPUs, each rank keeps only GPU `mpi_local_rank()` (modulo the number of GPUs)
visible, as Horovod's recipe does, so its sessions see that GPU as `GPU:0`; call it before
the first `Session` (a rank that already made one keeps every GPU, with a warning). Raises an `OxiflowError` (FailedPreconditionError) when MPI
was finalized in this process, or when this Oxiflow was built without MPI (the message says
what to install: OpenMPI and libclang, then `make setup build`).

A collective that waits longer than `OXIFLOW_MPI_TIMEOUT` seconds (default 60) for the other
ranks fails with a DeadlineExceededError naming the op and the rank, instead of hanging.
"""
function mpi_init(; pin_gpu::Bool=true)
    if oxf_mpi_state().running
        @warn "MPI has already been initialized"
        return nothing
    end
    oxf_mpi_init()
    pin_gpu && pin_gpu_to_local_rank()
    return nothing
end

"""
    mpi_finalize()

ADCME's `mpi_finalize`: ends MPI (`MPI_Finalize`). MPI ops fail afterwards and MPI cannot
start again in this process. An `OxiflowError` when MPI is not running.
"""
mpi_finalize() = (oxf_mpi_finalize(); nothing)

"""
    mpi_initialized()

Whether MPI is running in this process (ADCME's `mpi_initialized`).
"""
mpi_initialized() = oxf_mpi_state().running

"""
    mpi_finalized()

Whether `mpi_finalize` has run in this process (ADCME's `mpi_finalized`).
"""
mpi_finalized() = oxf_mpi_state().finalized

"""
    mpi_rank()

This process's rank in `MPI_COMM_WORLD`, 0-based (ADCME's `mpi_rank`). An `OxiflowError`
when MPI is not running.
"""
mpi_rank() = oxf_mpi_rank_size()[1]

"""
    mpi_size()

The number of ranks of `MPI_COMM_WORLD` (ADCME's `mpi_size`). An `OxiflowError` when MPI is
not running.
"""
mpi_size() = oxf_mpi_rank_size()[2]

# A collective's operand: a tensor as it is, a Julia number or array as a Float64 constant
# (ADCME's `convert_to_tensor(a, dtype=Float64)`).
mpi_operand(a) = a isa Tensor ? a : constant(a isa AbstractArray ? float.(a) : Float64(a))

function mpi_root(fname, root)
    (root isa Integer && !(root isa Bool) && root >= 0) ||
        invalid("$fname: root must be a rank (a non-negative Julia integer), got $(repr(root))")
    return Int(root)
end

"""
    mpi_sum(a, root=0)
    mpi_sum(a; root=0)

ADCME's `mpi_sum`: the sum of `a` over all ranks, on rank `root` (`MPI_Reduce` with
`MPI_SUM`); the other ranks get zeros. `a`: a tensor (Float64, Float32, Int32 or Int64, any
shape, the same on every rank) or a Julia number or array (made a Float64 constant).
Differentiable: the gradient with respect to each rank's `a` is rank `root`'s output
gradient, broadcast (ADCME's adjoint), so `gradients` works across ranks. Op: `MpiSum`
(CPU). Errors when the graph runs: MPI not initialized, `root` not a rank, ranks that
disagree on the collective.
"""
mpi_sum(a, root_::Integer=0; root::Integer=root_, name=nothing) =
    add_op("MpiSum", Tensor[mpi_operand(a)]; root=mpi_root("mpi_sum", root), name=name)

"""
    mpi_bcast(a, root=0)
    mpi_bcast(a; root=0)

ADCME's `mpi_bcast`: rank `root`'s `a` on every rank (`MPI_Bcast`). `a` as for
[`mpi_sum`](@ref). Differentiable: the gradient reaches rank `root`'s `a` as the sum of all
ranks' output gradients (an `MpiSum`); the other ranks' `a` get zeros. Op: `MpiBcast` (CPU).
"""
mpi_bcast(a, root_::Integer=0; root::Integer=root_, name=nothing) =
    add_op("MpiBcast", Tensor[mpi_operand(a)]; root=mpi_root("mpi_bcast", root), name=name)

"""
    mpi_allreduce(a; op="sum")

Horovod's `allreduce` (`MPI_Allreduce`): every rank gets the element-wise reduction of all
ranks' `a`, `op` one of `"sum"`, `"mean"` (the sum over `mpi_size()`, float tensors only),
`"max"`, `"min"`. `a` as for [`mpi_sum`](@ref). Differentiable: the gradient is the
all-reduced sum of the output gradients (`"mean"`: their mean; `"max"`/`"min"`: that sum
where a rank's `a` equals the result, zero elsewhere). Op: `MpiAllreduce` (CPU).
"""
function mpi_allreduce(a; op::AbstractString="sum", name=nothing)
    op in ("sum", "mean", "max", "min") || invalid("mpi_allreduce: op must be \"sum\", \"mean\", \"max\" or \"min\", got $(repr(op))")
    return add_op("MpiAllreduce", Tensor[mpi_operand(a)]; reduction=String(op), name=name)
end

"""
    mpi_barrier()

Returns once every rank has called it (`MPI_Barrier`; ADCME's `mpi_barrier`). Called
directly, not a graph op. An `OxiflowError` when MPI is not running, or a
DeadlineExceededError when a rank does not arrive within `OXIFLOW_MPI_TIMEOUT` seconds.
"""
mpi_barrier() = (oxf_mpi_barrier(); nothing)

"""
    mpi_sync!(message::Vector{Int64}, root=0)
    mpi_sync!(message::Vector{Float64}, root=0)

ADCME's `mpi_sync!`: overwrites every rank's `message` with rank `root`'s (`MPI_Bcast`), in
place, and returns it. Called directly, not a graph op; every rank passes a vector of the
same length and type. An `OxiflowError` when MPI is not running or `root` is not a rank.
"""
function mpi_sync!(message::Union{Vector{Int64},Vector{Float64}}, root::Integer=0)
    root >= 0 || invalid("mpi_sync!: root must be a rank (0 or more), got $root")
    return oxf_mpi_sync(message, root)
end

"""
    mpi_optimize(f, g!, x0; method="LBFGS", options=missing) -> result or nothing

ADCME's `mpi_optimize`: minimizes `f(x)` with the gradient `g!(G, x)` (which fills `G`) from
`x0` (a vector) when every rank's `f` and `g!` run collective graphs, typically a loss summed
over ranks (`mpi_sum`) of parameters broadcast from rank 0 (`mpi_bcast`). Rank 0 runs the
optimizer; it tells the other ranks (by `mpi_sync!` of a flag, as ADCME does) to evaluate
`f` or `g!` with it, at their own `x0`, whose value the broadcast ignores, and when to stop.
ADCME hands the problem to Optim.jl; here rank 0 runs the engine's L-BFGS ([`lbfgsb`](@ref),
no bounds). `method="BFGS"` runs it with a memory as long as `x0` (BFGS up to the initial
Hessian scaling). `options` takes Optim's names, as a `NamedTuple` or a `Dict`: `iterations`
(1000), `g_tol` (1e-8, the gradient's infinity norm), `f_tol` (0, relative reduction of `f`).

Returns, on rank 0, `(minimizer, minimum, iterations, message, f_calls)`, a `NamedTuple`;
`nothing` on the others. Every rank must call it. If `f` or `g!` throws on rank 0, the other
ranks stop with an `OxiflowError` (instead of waiting), and rank 0 rethrows; if it throws on
another rank, that rank rethrows and rank 0's next collective fails with a
DeadlineExceededError after `OXIFLOW_MPI_TIMEOUT` seconds (default 60). An unknown
method or option is an `OxiflowError` on every rank, before any collective call.
"""
function mpi_optimize(_f::Function, _g!::Function, x0::AbstractVector{<:Real}; method::AbstractString="LBFGS", options=missing)
    method in ("LBFGS", "BFGS") || invalid("mpi_optimize: method must be \"LBFGS\" or \"BFGS\", got $(repr(method))")
    opts = Dict{Symbol,Any}(:iterations => 1000, :g_tol => 1e-8, :f_tol => 0.0)
    if options !== missing
        for (k, v) in pairs(options)
            haskey(opts, Symbol(k)) || invalid("mpi_optimize: unknown option $k (known: iterations, g_tol, f_tol)")
            opts[Symbol(k)] = v
        end
    end
    x = Vector{Float64}(x0)
    flag = zeros(Int64, 1)          # 1: evaluate f, 2: evaluate g!, 0: done, -1: rank 0 failed
    sync(k) = (flag[1] = k; mpi_sync!(flag))
    if mpi_rank() != 0
        while true
            mpi_sync!(flag)
            flag[1] == 1 ? _f(x) : flag[1] == 2 ? _g!(zero(x), x) : flag[1] == 0 ? (return nothing) :
                invalid("mpi_optimize: rank 0 failed while evaluating f or g! (its error is on rank 0)")
        end
    end
    println("[MPI Size = $(mpi_size())] Optimization starts...")
    ncalls = Ref(0)
    function fg(xv)
        sync(1)
        L = Float64(_f(xv))
        sync(2)
        G = zero(xv)
        _g!(G, xv)
        ncalls[] += 1
        return L, G
    end
    local res
    try
        res = lbfgsb(fg, x; max_iter=Int(opts[:iterations]), pgtol=Float64(opts[:g_tol]), ftol=Float64(opts[:f_tol]),
                     m=method == "BFGS" ? max(10, length(x)) : 10)
    catch
        sync(-1)
        rethrow()
    end
    sync(0)
    xm, fm, iters, msg = res
    return (minimizer=xm, minimum=fm, iterations=iters, message=msg, f_calls=ncalls[])
end
