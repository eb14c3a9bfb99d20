# Julia tests of Oxiflow. Oracles: Julia Base for math, central finite differences for
# gradients, TF's documented placement rules for devices.
#
#   Pkg.test("Oxiflow")       (make test-julia runs this way)
#   julia --project=julia/Oxiflow julia/Oxiflow/test/runtests.jl
#
# Files the tests write (profiles, graphs) go to a scratch directory, not to test/ (where
# Pkg.test starts) or the caller's directory.
#
# The test files below run in up to four processes, one per core (this one and others started
# on this file with OXIFLOW_TEST_WORKER_FILES naming their share): most of their time is
# compilation, which keeps one core busy. OXIFLOW_TEST_JOBS=n sets the number of processes;
# 1 runs everything here, one file after the other.
using Test
const RUNTESTS = abspath(@__FILE__)    # this file, for the other processes (before the cd)
cd(mktempdir())
using Oxiflow
using LinearAlgebra
include("json.jl")
include("fd.jl")
include("optim_steps.jl")
include("capture.jl")

const CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
const GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"

use_emulated_gpus(1)

# Runs one test file and prints its wall time, so that a slow file shows in the log.
function timed_include(file)
    t = time()
    include(file)
    println("test/$file: $(round(time() - t; digits=1)) s")
end

# The test files in the order they run, each with its wall time in seconds on a 2-core
# machine when they ran one after the other: the weights that split them between processes.
const TEST_FILES = [
    "profile.jl" => 7, "fusion.jl" => 2, "placement.jl" => 1, "config.jl" => 5,
    "cuda.jl" => 1, "shapes.jl" => 18, "feed_fetch.jl" => 34, "dense.jl" => 24,
    "dense_ops.jl" => 18, "derivatives.jl" => 11, "custom_gradient.jl" => 6,
    "summary.jl" => 5, "training.jl" => 17, "layers.jl" => 8, "nn.jl" => 16,
    "keras.jl" => 5, "conv.jl" => 10, "sorting.jl" => 9, "initializers.jl" => 4,
    "newton.jl" => 11, "adcme_api.jl" => 9, "adcme_api2.jl" => 32, "tf_v1.jl" => 4,
    "scatter.jl" => 7, "sparse.jl" => 33, "sparse_extra.jl" => 11, "mpi_api.jl" => 3,
    "control_flow.jl" => 14, "ode.jl" => 3, "ode_alpha.jl" => 5, "pcl.jl" => 3, "distributions.jl" => 17, "ot.jl" => 3, "uq.jl" => 1, "gan.jl" => 3, "flows.jl" => 5, "examples.jl" => 4,
    "robustness.jl" => 21, "unknown_dims.jl" => 11, "unknown_dims_ops.jl" => 20, "unknown_end.jl" => 10,
    "matfile.jl" => 10, "kit_views.jl" => 6, "checkpointing.jl" => 3, "complex.jl" => 3,
]

"""
    split_files(files, jobs) -> Vector{Vector{String}}

`files` (name => weight pairs) dealt to `jobs` processes, heaviest first, each to the
process with the least weight so far; the first share (this process's) starts with the
inline test sets' 30 s. Each share keeps the listed order.
"""
function split_files(files, jobs)
    shares, load = [String[] for _ in 1:jobs], zeros(jobs)
    load[1] = 30
    for (f, w) in sort(files; by=last, rev=true)
        k = argmin(load)
        push!(shares[k], f)
        load[k] += w
    end
    return [filter(f -> f in share, first.(files)) for share in shares]
end

const WORKER_FILES = get(ENV, "OXIFLOW_TEST_WORKER_FILES", "")
const JOBS = WORKER_FILES == "" ? max(1, min(4, parse(Int, get(ENV, "OXIFLOW_TEST_JOBS", string(Sys.CPU_THREADS))))) : 1

if WORKER_FILES != ""
    # another process: its share of the files only
    @testset "Oxiflow (another process)" begin
        for f in split(WORKER_FILES, ',')
            timed_include(String(f))
        end
    end
else
    shares = split_files(TEST_FILES, JOBS)
    # the other shares start now, each in its own Julia with this project, output to a file
    workers = map(shares[2:end]) do share
        log = tempname()
        io = open(log, "w")
        cmd = `$(Base.julia_cmd()) --startup-file=no --project=$(Base.active_project()) $RUNTESTS`
        cmd = setenv(cmd, merge(Dict(ENV), Dict("OXIFLOW_TEST_WORKER_FILES" => join(share, ','))))
        (share, log, run(pipeline(cmd; stdout=io, stderr=io); wait=false), io)
    end
    isempty(workers) || println("test files in $(length(shares)) processes; this one runs: ", join(shares[1], ", "))

@testset "Oxiflow" begin

@testset "values follow Julia eltypes and layouts" begin
    reset_default_graph()
    A = [1.0 2.0 3.0; 4.0 5.0 6.0]
    @test constant(A).shape == (2, 3)
    @test constant(A).dtype == Float64
    @test constant([1, 2]).dtype == Int64
    @test constant(Float32[1, 2]).dtype == Float32
    @test constant(true).dtype == Bool
    s = Session()
    @test run(s, constant(A)) == A
    @test run(s, constant(Int32[1 2; 3 4])) == Int32[1 2; 3 4]
    @test run(s, constant(3.5)) === 3.5
    @test run(s, constant([true, false])) == [true, false]
    B = reshape(collect(1.0:24.0), 2, 3, 4)
    @test run(s, constant(B)) == B
    @test_throws OxiflowError constant(Int8[1, 2])
end

@testset "math matches Julia Base" begin
    reset_default_graph()
    A = [0.5 1.5; 2.0 3.0]; B = [1.0 -2.0; 0.25 4.0]; v = [1.0, -1.0]
    a = constant(A); b = constant(B)
    s = Session()
    @test run(s, a + b) ≈ A + B
    @test run(s, a - 1) ≈ A .- 1
    @test run(s, 2.0 * a) ≈ 2.0 * A
    @test run(s, a / b) ≈ A ./ B
    @test run(s, a^2) ≈ A .^ 2
    @test run(s, a .^ 3) ≈ A .^ 3
    # exponents with a cheaper form than pow (square root, reciprocal, products) keep pow's
    # values, signed zeros and infinities included
    P = [4.0 0.3 -0.0 0.0 -Inf Inf 2.5e-3 -7.0 1e-300 3e100]
    for T in (Float64, Float32), e in (0.5, -0.5, -1.0, 3.0, 2.5, 0.0, 1.0, 2.0)
        # C's pow: where Julia's ^ throws a DomainError (a negative base, a fractional
        # exponent) NaN, but |x|^e for -Inf
        cpow = x -> x < 0 && !isinteger(T(e)) ? (isinf(x) ? abs(x)^T(e) : T(NaN)) : x^T(e)
        got, want = run(s, constant(T.(P)) .^ T(e)), cpow.(T.(P))
        @test eltype(got) == T && isequal(isnan.(got), isnan.(want)) && isequal(isinf.(got), isinf.(want))
        @test all(signbit.(got) .== signbit.(want) .| isnan.(want))
        @test all(isapprox.(got, want; rtol=4eps(T)) .| isnan.(want) .| isinf.(want))
    end
    @test run(s, a * b) ≈ A * B
    @test run(s, a * constant(v)) ≈ A * v
    @test run(s, constant(v) * constant(v)) ≈ v .* v
    @test run(s, a .* b) ≈ A .* B
    # NumPy/TF broadcasting aligns trailing dimensions (ADCME's semantics): a length-2
    # vector is added to every row, as Julia's 1×2 row would be
    @test run(s, a .+ [10.0, 20.0]) ≈ A .+ [10.0 20.0]
    @test run(s, -a) ≈ -A
    for (f, x) in ((sin, A), (cos, A), (exp, A), (log, A), (tanh, A), (sqrt, A))
        @test run(s, f(constant(x))) ≈ f.(x)
    end
    @test run(s, sin.(a)) ≈ sin.(A)
    @test run(s, sum(a)) ≈ sum(A)
    @test run(s, sum(a; dims=1)) ≈ vec(sum(A; dims=1))
    @test run(s, sum(a; dims=2)) ≈ vec(sum(A; dims=2))
    @test run(s, cast(a, Float32)) ≈ Float32.(A)
    @test size(run(s, a + 1)) == (2, 2)
    e = try; constant([1.0, 2.0]) + constant([1.0, 2.0, 3.0]); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("[2]", e.msg) && occursin("[3]", e.msg) && occursin("add", e.msg)
    e = try; constant(A) * constant([1.0, 2.0, 3.0]); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("MatMul", e.msg)
    @test_throws OxiflowError constant([1, 2]) + 1.5   # inexact in an Int64 tensor
end

@testset "device scopes and specs" begin
    reset_default_graph()
    @cpu 2 begin
        global x2 = constant(1.0)
    end
    @test x2.device == "/device:CPU:2"
    @gpu begin
        global y0 = constant(1.0)
    end
    @test y0.device == "/device:GPU:0"
    @pywith tf.device("/job:worker/replica:2/device:CPU:1") begin
        @pywith tf.device("/device:GPU:2") begin
            global z = constant(1.0)
        end
        global w = constant(1.0)
    end
    @test z.device == "/job:worker/replica:2/device:GPU:2"
    @test w.device == "/job:worker/replica:2/device:CPU:1"
    @pywith tf.device("/gpu:1") begin
        @pywith tf.device(nothing) begin
            global u = constant(1.0)
        end
    end
    @test u.device == ""
    k = constant(2.0)
    @gpu begin
        colocate_with(k) do
            global kk = sin(k)
        end
    end
    @test kk.device == ""                      # outer scope suspended inside colocate_with
    @test kk.op.colocation_groups == ["loc:@" * k.op.name]
    n = 0
    @pywith tf.device(op -> (n += 1; op.op == "Const" ? "/cpu:0" : "/gpu:0")) begin
        global c1 = constant(1.0)
        global s1 = sin(c1)
    end
    @test (c1.device, s1.device, n) == ("/device:CPU:0", "/device:GPU:0", 2)
end

@testset "gradients against finite differences" begin
    reset_default_graph()
    f(x) = sum(tanh.(x) .* exp.(x)) + sum(sin.(x))^2
    x0 = [0.3, -0.7, 1.1]
    x = Variable(x0)
    y = sum(tanh(x) * exp(x)) + sum(sin(x))^2
    g = gradients(y, x)
    s = Session(); init(s)
    @test run(s, y) ≈ f(x0)
    h = 1e-6
    fd = [(f(x0 + h * (1:3 .== i)) - f(x0 - h * (1:3 .== i))) / 2h for i in 1:3]
    @test run(s, g) ≈ fd rtol = 1e-6
    W = Variable([1.0 2.0; 3.0 4.0]); v = constant([0.5, -1.5])
    l = sum((W * v)^2)
    gW = gradients(l, W)
    init(s)
    @test run(s, gW) ≈ 2 * ([1.0 2.0; 3.0 4.0] * [0.5, -1.5]) * [0.5, -1.5]'
    @test gradients(l, constant(1.0)) === nothing
    # the second gradients call builds in scope gradients_1, and W's gradient is the first
    # product of _MatMulGrad (dC * v'), named as TF names it
    @test gW.op.name == "gradients_1/MatMul_grad/MatMul" && gW.op.type == "MatMul"
    e = try; gradients(tanh(W), x); nothing; catch err; err; end   # rank-2 ys, vector xs: no ADCME rule
    @test e isa OxiflowError && occursin("rank-2", e.msg)
end

@testset "sessions, variables, feeds" begin
    reset_default_graph()
    v = Variable([1.0, 2.0]; name="weights")
    @test v.op.type == "VariableV2"
    @test v.name == "weights:0"
    p = placeholder(Float64; shape=[2])
    q = placeholder(3.0)
    y = v + p
    s = Session(); init(s)
    @test run(s, y, p => [10.0, 20.0]) == [11.0, 22.0]
    @test run(s, y; feed_dict=Dict(p => [1.0, 1.0])) == [2.0, 3.0]
    @test run(s, [y, q], p => [0.0, 0.0]) == [[1.0, 2.0], 3.0]
    @test run(s, q, q => 5.0) == 5.0
    @test run(s, (v, q)) == ([1.0, 2.0], 3.0)
    @test get_collection(TRAINABLE_VARIABLES) == [v]
    @test get_collection("weig") == [v]
end

@testset "bad input raises OxiflowError and the session stays usable" begin
    reset_default_graph()
    v = Variable(1.0)
    p = placeholder(Float64; shape=[2])
    ok = sin(constant(0.5))
    s = Session(emulated_gpus=0)
    check_usable() = @test run(s, ok) ≈ sin(0.5)
    # malformed device string
    e = try; @pywith tf.device("/job:foo/replica:-1") begin; constant(1.0); end; nothing; catch err; err; end
    @test e isa OxiflowError && occursin("'/job:foo/replica:-1'", e.msg)
    check_usable()
    # GPU requested, none present, soft placement off
    @gpu begin
        global onGPU = cos(constant(1.0))
    end
    e = try; run(s, onGPU); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("Cannot assign a device for operation", e.msg) && occursin("GPU:0", e.msg)
    check_usable()
    @test run(Session(emulated_gpus=0, soft=true), onGPU) ≈ cos(1.0)
    # feeds of the wrong shape or dtype
    e = try; run(s, p + 1.0, p => [1.0, 2.0, 3.0]); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("shape [3]", e.msg) && occursin("Placeholder:0", e.msg)
    e = try; run(s, p + 1.0, p => [1, 2]); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("dtype Int64", e.msg)
    check_usable()
    # uninitialized variable
    e = try; run(s, v); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("uninitialized value Variable", e.msg)
    check_usable()
    # device function that throws, and one that returns garbage
    n0 = Oxiflow.oxf_graph_num_nodes(Oxiflow.get_default_graph())
    e = try; @pywith tf.device(op -> error("no device for you")) begin; constant(1.0); end; nothing; catch err; err; end
    @test e isa OxiflowError && occursin("no device for you", e.msg) && occursin("Const", e.msg)
    e = try; @pywith tf.device(op -> 42) begin; constant(1.0); end; nothing; catch err; err; end
    @test e isa OxiflowError && occursin("42", e.msg)
    e = try; @pywith tf.device(op -> "foobar") begin; constant(1.0); end; nothing; catch err; err; end
    @test e isa OxiflowError && occursin("'foobar'", e.msg)
    @test Oxiflow.oxf_graph_num_nodes(Oxiflow.get_default_graph()) == n0   # nothing half-built
    check_usable()
    init(s)
    @test run(s, v) == 1.0
end

@testset "profile JSON in TF timeline layout" begin
    reset_default_graph()
    @gpu begin
        global gx = sin(constant([1.0, 2.0]))
    end
    @cpu begin
        global cx = sum(gx)
    end
    s = Session()
    @test run_profile(s, cx) ≈ sin(1.0) + sin(2.0)
    path = tempname() * ".json"
    save_profile(path)
    j = MiniJSON.parse_json(read(path, String))
    ev = j["traceEvents"]
    procs = Dict(e["pid"] => e["args"]["name"] for e in ev if e["ph"] == "M" && e["name"] == "process_name")
    @test procs[0] == "Allocators"
    @test "$CPU0 Compute" in values(procs) && "$GPU0 Compute" in values(procs)
    xs = [e for e in ev if e["ph"] == "X"]
    @test any(e -> e["name"] == "Sin" && procs[e["pid"]] == "$GPU0 Compute", xs)
    @test any(e -> e["name"] == "Sum" && procs[e["pid"]] == "$CPU0 Compute", xs)
    @test count(e -> e["cat"] == "Copy", xs) == profile_copies().count == 1
    @test profile_copies().bytes == 16
    # the copy (Sin's output, GPU:0 to CPU:0) on CPU:0's Memcpy process, device-to-host lane
    cp = first(filter(e -> e["cat"] == "Copy", xs))
    @test procs[cp["pid"]] == "$CPU0 Memcpy" && cp["name"] == "MemcpyDtoH"
    @test cp["args"]["direction"] == "device to host" && cp["args"]["bytes"] == 16
    @test any(e -> e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == cp["pid"] &&
                   e["tid"] == cp["tid"] && e["args"]["name"] == "device to host", ev)
    # each op's output shapes and dtypes
    sn = first(filter(e -> e["name"] == "Sin", xs))
    @test sn["args"]["shape"] == "[2]" && sn["args"]["dtype"] == "Float64"
    sm = first(filter(e -> e["name"] == "Sum", xs))
    @test sm["args"]["shape"] == "[]" && sm["args"]["dtype"] == "Float64"
    @test any(e -> e["ph"] == "s", ev) && any(e -> e["ph"] == "t", ev)
    @test assigned_device(s, gx) == GPU0
end

@testset "every test file is listed in TEST_FILES" begin
    helpers = ["runtests.jl", "json.jl", "fd.jl", "optim_steps.jl", "capture.jl", "profile_helpers.jl"]
    @test sort(vcat(first.(TEST_FILES), helpers)) == sort(filter(f -> endswith(f, ".jl"), readdir(dirname(RUNTESTS))))
end

# The list is generated on one Julia version; on another some of Base's signatures differ
# and a statement may match no method, so the check runs on the version that generated it.
if (VERSION.major, VERSION.minor) == (Oxiflow.PRECOMPILE_JULIA.major, Oxiflow.PRECOMPILE_JULIA.minor)
    @testset "the precompile statements still match methods (scripts/julia-precompile-list.jl)" begin
        @test Oxiflow._precompile_(force=true)
    end
else
    println("not checked here: the precompile statements were generated on Julia $(Oxiflow.PRECOMPILE_JULIA), this is $VERSION")
end

for f in shares[1]
    timed_include(f)
end

for (share, log, p, io) in workers
    wait(p)
    close(io)
    println("--- another process (", join(share, ", "), "), exit status $(p.exitcode):")
    print(read(log, String))
    rm(log; force=true)
    @testset "another process: $(join(share, ", "))" begin
        @test success(p)
    end
end

end # @testset "Oxiflow"
end # this process runs the inline test sets and its share
