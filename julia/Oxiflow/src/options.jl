# ADCME's `ADCME.options` (ADCME.jl src/options.jl): the settings its layers and solvers read,
# set by assignment (`Oxiflow.options.newton_raphson.rtol = 1e-4`). Not exported, as in ADCME.

"""
    Oxiflow.options.training.training

ADCME's `ADCME.options.training.training`: the Bool scalar tensor that [`dropout`](@ref),
[`BatchNormalization`](@ref) and [`Resnet1D`](@ref) read when no `training` argument is
given. Unless set, each graph gets its own `placeholder(false)` (a `PlaceholderWithDefault`,
so graphs run in inference mode unless it is fed `true`), made at the first read. Set it as
ADCME's docs do, `Oxiflow.options.training.training = placeholder(true)`, to train by
default and feed `false` to evaluate. Reading a value set in an earlier graph (before
`reset_default_graph`) raises an `OxiflowError`; set it again for the new graph. Not
exported, as in ADCME.
"""
mutable struct OptionsTraining
    value::Union{Nothing,Tensor}
    defaults::WeakKeyDict{Any,Tensor}
    verbose::Bool
end

function Base.getproperty(o::OptionsTraining, s::Symbol)
    s === :training || return getfield(o, s)
    g = get_default_graph()
    v = getfield(o, :value)
    v === nothing && return get!(() -> placeholder(false; name="training"), getfield(o, :defaults), g)
    getfield(v, :graph) === g ||
        invalid("options.training.training is $(v.name) of an earlier graph (before reset_default_graph); set it again, e.g. Oxiflow.options.training.training = placeholder(true)")
    return v
end

function Base.setproperty!(o::OptionsTraining, s::Symbol, x)
    s === :training || return setfield!(o, s, x)
    x === nothing && return setfield!(o, :value, nothing)
    t = x isa Bool ? placeholder(x; name="training") : x
    (t isa Tensor && t.dtype == Bool && ndims(t) == 0) ||
        invalid("options.training.training must be a Bool or a scalar Bool tensor, got $(repr(x))")
    return setfield!(o, :value, t)
end


mutable struct OptionsNewtonRaphson_LineSearch
    c1::Float64
    ρ_hi::Float64
    ρ_lo::Float64
    iterations::Int64
    maxstep::Int64
    αinitial::Float64
    OptionsNewtonRaphson_LineSearch() = new(1e-4, 0.5, 0.1, 1000, 9999999, 1.0)
end

"""
    Oxiflow.options.newton_raphson

ADCME's `ADCME.options.newton_raphson`, read by [`newton_raphson`](@ref) when it builds its
loop: `max_iter` (100), `verbose` (false), `rtol` (1e-12), `tol` (1e-12), `LM` (0.0, the
Levenberg-Marquardt shift `μ` in `(J + μI) \\ r`), `linesearch` (false; `true`: a
backtracking line search on the function value, see [`newton_raphson`](@ref)),
`linesearch_options` (ADCME's backtracking settings: `c1` 1e-4, `ρ_hi` 0.5, `ρ_lo` 0.1,
`iterations` 1000, `maxstep` 9999999 (no limit), `αinitial` 1.0).
"""
mutable struct OptionsNewtonRaphson
    max_iter::Int64
    verbose::Bool
    rtol::Float64
    tol::Float64
    LM::Float64
    linesearch::Bool
    linesearch_options::OptionsNewtonRaphson_LineSearch
    OptionsNewtonRaphson() = new(100, false, 1e-12, 1e-12, 0.0, false, OptionsNewtonRaphson_LineSearch())
end

"""
    Oxiflow.options.sparse

ADCME's `ADCME.options.sparse`: `solver` (`"SparseLU"`) is the method of `A \\ b` and
`factorize(A)` for a square `SparseTensor` when none is given (`"auto"`): `"SparseLU"`,
`"SparseQR"` or `"SimplicialLLT"` (Cholesky), as [`factorize`](@ref) names them.
`auto_reorder` (true): `find`, `rows`, `cols` and `values` give a `SparseTensor`'s entries
sorted by row, then column, the order in which ADCME keeps them (it reorders every
`SparseTensor` it builds); `false`: in the order stored. Oxiflow's sparse ops take entries in
any order either way.
"""
mutable struct OptionsSparse
    auto_reorder::Bool
    solver::String
    OptionsSparse() = new(true, "SparseLU")
end

"""
    Oxiflow.options.mpi, Oxiflow.options.customop

ADCME's `options.mpi` (`solver` `"BoomerAMG"`, `printlevel` 2: the Hypre solver of
`mpi_SparseTensor`, which Oxiflow does not have) and `options.customop` (`verbose` true, for
ADCME's custom-op builder): kept so that code setting them runs; they have no effect.
"""
mutable struct OptionsMPI
    solver::String
    printlevel::Int64
    OptionsMPI() = new("BoomerAMG", 2)
end

mutable struct OptionsCustomOp
    verbose::Bool
    OptionsCustomOp() = new(true)
end
@doc (@doc OptionsMPI) OptionsCustomOp

"""
    Oxiflow.options

ADCME's options container: `options.training` (see `Oxiflow.options.training.training`),
`options.newton_raphson` (see [`OptionsNewtonRaphson`](@ref)), `options.sparse` (see
[`OptionsSparse`](@ref)), `options.mpi` and `options.customop`. `reset_default_options()`
restores the defaults.
"""
mutable struct Options
    sparse::OptionsSparse
    newton_raphson::OptionsNewtonRaphson
    training::OptionsTraining
    mpi::OptionsMPI
    customop::OptionsCustomOp
end

const options = Options(OptionsSparse(), OptionsNewtonRaphson(), OptionsTraining(nothing, WeakKeyDict{Any,Tensor}(), true),
                        OptionsMPI(), OptionsCustomOp())

export reset_default_options

"""`reset_default_options()`: every field of `Oxiflow.options` back to its default (ADCME's)."""
function reset_default_options()
    options.training = OptionsTraining(nothing, WeakKeyDict{Any,Tensor}(), true)
    options.newton_raphson = OptionsNewtonRaphson()
    options.sparse = OptionsSparse()
    options.mpi = OptionsMPI()
    options.customop = OptionsCustomOp()
    return nothing
end
