# The main job (examples/digits_mlp.jl: digits, MLP 64-128-64-10 with batch normalization
# and ReLU, Adam(0.01), global batch 64, 15 epochs) trained data-parallel over MPI ranks,
# Horovod's way:
#
#   - every rank builds the same graph and shuffles the training rows with the same seed;
#     of each global batch of 64 rows, rank r takes its own 64/n (n = mpi_size(), which must
#     divide 64);
#   - `DistributedOptimizer(AdamOptimizer(0.01))` averages the gradients over the ranks (one
#     fused all-reduce per step) before Adam's update, so every rank takes the same step;
#   - `broadcast_global_variables(0)` after `init` starts every rank from rank 0's values;
#   - batch normalization uses each rank's own rows (Horovod's default, not synchronised
#     batch norm); each rank keeps its own moving statistics, so each evaluates on its own.
#
#   mpirun -np 4 julia --project=julia/Oxiflow examples/mpi_digits.jl [epochs]
#
# Ranks share a host's cores: each session runs kernels on one thread when several ranks
# share the host (`mpi_local_size() > 1`). Prints, on rank 0, the loss and held-out accuracy
# per epoch, the training speed in examples/s (all ranks together, epochs 2 onwards), every
# rank's held-out accuracy, and ends with `held-out accuracy: NN.N%` (rank 0's). Exits with
# an error when any rank's accuracy is below 95 %, as the single-process job does.
using Oxiflow
using Printf

include(joinpath(@__DIR__, "digits_mlp.jl"))

"""
    train_distributed(Xtr, ytr, Xte, yte; epochs=15, batch=64, lr=0.01, seed=1, verbose=true)

Trains the digits MLP over the MPI ranks as the file header says; returns `(accuracy,
history, examples_per_s)`, `accuracy` this rank's held-out accuracy after the last epoch,
`examples_per_s` the global training rows per second from epoch 2 on (epoch 1 when there is
one). Must be called on every rank.
"""
function train_distributed(Xtr, ytr, Xte, yte; epochs::Integer=15, batch::Integer=64, lr=0.01, seed::Integer=1, verbose::Bool=true)
    r, n = mpi_rank(), mpi_size()
    batch % n == 0 || error("mpi_digits: the global batch $batch must be divisible by the number of ranks $n")
    local_batch = batch ÷ n
    reset_default_graph()
    p = mlp_params(; seed=seed + r)       # different on every rank until the broadcast
    x = placeholder(Float64; shape=[local_batch, 64], name="x")
    yh = placeholder(Float64; shape=[local_batch, 10], name="labels")
    loss = mlp_loss(p, x, yh)
    test_logits = mlp_logits(p, constant(Xte; name="test_images"); training=false)
    train_op = control_dependencies(get_collection(UPDATE_OPS)) do
        minimize(DistributedOptimizer(AdamOptimizer(lr)), loss)
    end
    mean_loss = mpi_allreduce(loss; op="mean")
    sess = mpi_local_size() > 1 ? Session(intra=1, inter=1) : Session()
    init(sess)
    run(sess, broadcast_global_variables(0))
    rng = SplitMix(UInt64(seed) + 0x1234)       # the same shuffles on every rank
    nb = div(length(ytr), batch)
    history = []
    seconds = 0.0
    for epoch in 1:epochs
        t0 = time()
        perm = shuffle_perm(rng, length(ytr))
        ls = 0.0
        for b in 1:nb
            idx = perm[(b-1)*batch+r*local_batch+1:(b-1)*batch+(r+1)*local_batch]
            l, _ = run(sess, [mean_loss, train_op], x => Xtr[idx, :], yh => onehot(ytr[idx]))
            ls += l
        end
        dt = time() - t0
        (epoch > 1 || epochs == 1) && (seconds += dt)
        acc = accuracy(run(sess, test_logits), yte)
        push!(history, (epoch=epoch, loss=ls / nb, test_accuracy=acc))
        verbose && r == 0 && @printf("  epoch %2d  loss %.4f  held-out %5.1f%% (rank 0)  (%.3f s)\n", epoch, ls / nb, 100acc, dt)
    end
    counted = epochs == 1 ? 1 : epochs - 1
    return (accuracy=history[end].test_accuracy, history=history, examples_per_s=counted * nb * batch / seconds)
end

if abspath(PROGRAM_FILE) == @__FILE__
    epochs = isempty(ARGS) ? 15 : parse(Int, ARGS[1])
    mpi_init()
    r, n = mpi_rank(), mpi_size()
    X, y = load_digits(joinpath(digits_dir(), "digits.csv.gz"))
    Xtr, ytr, Xte, yte = split_standardize(X, y)
    r == 0 && @printf("digits on %d MPI ranks (%d on this host, %d cores): global batch 64, %d rows per rank per step\n",
                      n, mpi_local_size(), Sys.CPU_THREADS, 64 ÷ n)
    res = train_distributed(Xtr, ytr, Xte, yte; epochs=epochs)
    # every rank's accuracy on every rank: each contributes its own entry to a sum
    reset_default_graph()
    all_accs = run(Session(), mpi_allreduce(constant([q == r ? res.accuracy : 0.0 for q in 0:n-1])))
    if r == 0
        @printf("training speed: %.0f examples/s (%d ranks, epochs 2 to %d)\n", res.examples_per_s, n, epochs)
        println("held-out accuracy per rank: ", join([@sprintf("%.1f%%", 100a) for a in all_accs], ", "))
        @printf("held-out accuracy: %.1f%%\n", 100 * res.accuracy)
    end
    mpi_finalize()
    minimum(all_accs) >= 0.95 || error("mpi_digits: a rank's held-out accuracy $(round(100 * minimum(all_accs); digits=1))% is below 95%")
end
