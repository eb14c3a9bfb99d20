# The main job's epoch time, in ms, finer than the 0.01 s that examples/digits_mlp.jl prints:
# `train_digits` (the example's own function, its data and defaults: batch 64, Adam, one
# emulated GPU when no GPU is present, variables on /cpu:0) is timed for 16 epochs and for
# 1, and the difference divided by 15, so graph building, session start and the first
# (compiling) epoch are left out. Three repetitions per process; the figures go to
# docs/performance/peers-history.md (the digits epoch, 26f30ca).
#   julia --project=julia/Oxiflow bench/digits_epoch.jl [REPO_ROOT]
# REPO_ROOT (default: this repository) is where examples/digits_mlp.jl is read, so an
# older checkout's example can be timed with that checkout's package and library.
root = isempty(ARGS) ? joinpath(@__DIR__, "..") : ARGS[1]
include(joinpath(root, "examples", "digits_mlp.jl"))
has_gpu() || use_emulated_gpus(1)
X, y = load_digits(joinpath(digits_dir(), "digits.csv.gz"))
Xtr, ytr, Xte, yte = split_standardize(X, y)
train_digits(Xtr, ytr, Xte, yte; epochs=2, verbose=false, profile=false)
ms = Float64[]
for rep in 1:3
    t1 = @elapsed train_digits(Xtr, ytr, Xte, yte; epochs=1, verbose=false, profile=false)
    t16 = @elapsed train_digits(Xtr, ytr, Xte, yte; epochs=16, verbose=false, profile=false)
    push!(ms, 1e3 * (t16 - t1) / 15)
end
println("digits epoch, ms per epoch (3 repetitions): ", join([string(round(t; digits=2)) for t in ms], ", "))
