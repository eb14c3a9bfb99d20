# Where the project's shared data lives, for the examples and their tests.

"""
    shared_data_dir(file)

The directory holding `file` (e.g. `"digits.csv.gz"`): `ENV["OXIFLOW_DATA"]` when set, else
`shared/data` next to the repository (`../shared/data` from its root) or next to any
directory above it (so a git worktree or a CI clone deeper in the tree finds it too);
`nothing` when absent.
"""
function shared_data_dir(file::AbstractString)
    if haskey(ENV, "OXIFLOW_DATA")
        return isfile(joinpath(ENV["OXIFLOW_DATA"], file)) ? ENV["OXIFLOW_DATA"] : nothing
    end
    d = normpath(joinpath(@__DIR__, ".."))
    while true
        parent = dirname(d)
        cand = joinpath(parent, "shared", "data")
        isfile(joinpath(cand, file)) && return cand
        (parent == d || isempty(parent)) && return nothing
        d = parent
    end
end
