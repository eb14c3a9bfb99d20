# Acceptance tests of the digits examples (examples/digits_mlp.jl, examples/data_parallel.jl):
#   - malformed data is reported with its row number and nothing is trained;
#   - the MLP (fixed seed) reaches >= 95% held-out accuracy computing on the CPU and on an
#     emulated GPU, with the same numbers on both (the emulated GPU runs the CPU kernels);
#   - synchronous replicas give the parameters of one device on the same global batch
#     (Float64, 1e-10), asynchronous training reaches >= 93%;
#   - no op on one replica's GPU waits for an op on another's (the replicas can run together).
#   julia --project=julia/Oxiflow test/examples/digits.jl
using Test
include(joinpath(@__DIR__, "..", "..", "examples", "data_parallel.jl"))
use_emulated_gpus(4)

@testset "digits data errors name the row" begin
    good = join(vcat(string.(0:15), string.(0:15), string.(0:15), string.(0:15), ["3"]), ",")
    X, y = parse_digits([good, "", good])
    @test size(X) == (2, 64) && y == [3, 3] && X[1, 1:3] == [0.0, 1.0, 2.0]
    err(lines) = try; parse_digits(lines); nothing; catch e; e; end
    e = err([good, good, "1,2,3"])
    @test e isa DigitsDataError && e.row == 3 && occursin("row 3", sprint(showerror, e)) && occursin("got 3", e.msg)
    e = err([good, replace(good, r",3$" => ",10")])
    @test e isa DigitsDataError && e.row == 2 && occursin("label 10", e.msg)
    e = err([replace(good, r"^0," => "x,")])
    @test e isa DigitsDataError && e.row == 1 && occursin("not an integer", e.msg)
    e = err([replace(good, r"^0," => "17,")])
    @test e isa DigitsDataError && occursin("pixel 1 is 17", e.msg)
    # through the gzip reader, as the example loads the real file
    mktempdir() do d
        path = joinpath(d, "bad.csv")
        write(path, join([good, good, good * ",1"], "\n") * "\n")
        run(`gzip $path`)
        e = try; load_digits(path * ".gz"); nothing; catch ex; ex; end
        @test e isa DigitsDataError && e.row == 3 && e.source == "bad.csv.gz" && occursin("got 66", e.msg)
    end
end

dir = digits_dir()   # the acceptance bounds need the real data: a missing file is an error
X, y = load_digits(joinpath(dir, "digits.csv.gz"))
@test size(X) == (1797, 64) && sort(unique(y)) == collect(0:9)
Xtr, ytr, Xte, yte = split_standardize(X, y)

@testset "digits MLP: >= 95% held out on the CPU and on an emulated GPU" begin
    runs = Dict{String,Any}()
    for dev in ("/device:CPU:0", "/device:GPU:0")
        r = train_digits(Xtr, ytr, Xte, yte; device=dev, verbose=false, profile=(dev == "/device:GPU:0"))
        runs[dev] = r
        @test r.accuracy >= 0.95
        # the moving statistics were updated by training (they start at 1)...
        mv0 = run(r.sess, tensor("bn1/moving_variance:0"))
        @test maximum(abs.(mv0 .- 1)) > 0.1
        # ...by TF's formula: running only the update ops n times on one batch moves them
        # to that batch's variance of X W1 as var + momentum^n (mv0 - var)
        W1 = run(r.sess, r.params.W1)
        xb = Xtr[1:64, :]
        vb = vec(var(xb * W1; dims=1, corrected=false))
        x = tensor("x:0")
        for _ in 1:30
            run(r.sess, r.update_ops, x => xb)
        end
        @test run(r.sess, tensor("bn1/moving_variance:0")) ≈ vb + 0.99^30 * (mv0 - vb) rtol = 1e-9
        @test assigned_device(r.sess, tensor("bn1/moving_mean:0")) == "/job:localhost/replica:0/task:0/device:CPU:0"
    end
    a, b = runs["/device:CPU:0"], runs["/device:GPU:0"]
    @test [h.loss for h in a.history] ≈ [h.loss for h in b.history] rtol = 1e-12
    # the traced GPU step: matmuls on the GPU, Adam updates and moving averages on the CPU
    ev = profile_events()
    dev_of(pred) = unique([e.device for e in ev if e.kind === :op && pred(e)])
    @test dev_of(e -> e.op == "MatMul") == ["/job:localhost/replica:0/task:0/device:GPU:0"]
    @test dev_of(e -> e.op == "ApplyAdam") == ["/job:localhost/replica:0/task:0/device:CPU:0"]
    @test dev_of(e -> occursin("AssignMovingAvg", e.name) && e.op == "Assign") == ["/job:localhost/replica:0/task:0/device:CPU:0"]
end

@testset "sync replicas equal one device on the same global batch (Float64)" begin
    params(r) = [run(r.sess, getfield(r.params, k)) for k in (:W1, :W2, :W3, :b3, :b1, :b2)]
    one = train_parallel(Xtr, ytr, Xte, yte; replicas=1, epochs=1, use_bn=false, verbose=false)
    for R in (2, 4)
        r = train_parallel(Xtr, ytr, Xte, yte; replicas=R, epochs=1, use_bn=false, verbose=false)
        @test maximum(maximum(abs.(p - q)) for (p, q) in zip(params(r), params(one))) < 1e-10
        @test r.history[1].loss ≈ one.history[1].loss rtol = 1e-12
    end
end

# For each computing node of the session's graph, the GPUs its transitive inputs (data and control)
# were placed on: replicas can run together when no op on one replica's GPU waits for an
# op on another's. A structural check: whether they did overlap in one traced step
# depends on how the OS scheduled the worker threads.
function gpus_upstream(sess::Session)
    g = Oxiflow.get_default_graph()
    n = Oxiflow.oxf_graph_num_nodes(g)
    dev = [Oxiflow.oxf_session_assigned_device(sess, k) for k in 0:n-1]
    memo = Dict{Int,Set{String}}()
    function up(k)
        haskey(memo, k) && return memo[k]
        s = Set{String}()
        for inp in Oxiflow.splitlines(Oxiflow.oxf_node_inputs(g, k))
            j = Oxiflow.oxf_node_by_name(g, String(split(lstrip(inp, '^'), ':')[1]))
            union!(s, up(j))
            occursin("/device:GPU:", dev[j+1]) && push!(s, dev[j+1])
        end
        return memo[k] = s
    end
    # a NoOp computes nothing: the step's final group may wait for every replica
    return [(dev[k+1], up(k)) for k in 0:n-1 if Oxiflow.oxf_node_op(g, k) != "NoOp"]
end
replicas_independent(sess) = all(occursin("/device:GPU:", d) ? issubset(u, Set([d])) : true for (d, u) in gpus_upstream(sess))

@testset "async replicas converge to >= 93%; no replica waits for another" begin
    r = train_parallel(Xtr, ytr, Xte, yte; replicas=4, mode=:async, epochs=8, verbose=false,
                       profile_file=joinpath(mktempdir(), "async.json"))
    @test r.accuracy >= 0.93
    @test length(r.trainer.replica_train_ops) == 4
    @test length(r.overlap.windows) == 4                  # every replica's GPU ran kernels
    # no barrier serialises them: no GPU op waits for another GPU's op
    @test replicas_independent(r.sess)
    s = train_parallel(Xtr, ytr, Xte, yte; replicas=2, mode=:sync, epochs=2, verbose=false,
                       profile_file=joinpath(mktempdir(), "sync.json"))
    @test length(s.overlap.windows) == 2
    @test replicas_independent(s.sess)
    # one AddN per gradient on the CPU (fused there with the division that averages), then
    # ApplyAdam there
    ev = profile_events()
    @test all(e -> e.device == "/job:localhost/replica:0/task:0/device:CPU:0",
              [e for e in ev if e.kind === :op && (e.op == "ApplyAdam" || startswith(e.name, "average_gradients"))])
    @test count(e -> e.kind === :op && e.op in ("AddN", "_FusedElementwise") && startswith(e.name, "average_gradients"), ev) == 8
end

@testset "the replica check sees a GPU op that waits for another GPU's" begin
    reset_default_graph()
    a = @gpu 0 sin(constant(1.0))
    @gpu 1 cos(a)
    @test !replicas_independent(Session())
    reset_default_graph()
    @gpu 0 sin(constant(1.0))
    @gpu 1 cos(constant(2.0))
    @test replicas_independent(Session())
end
