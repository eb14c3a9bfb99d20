# Oxiflow's side of `make bench-peers`: the workloads of bench/peers/peers.py written as a
# user writes them (`using Oxiflow`, ADCME-style API), timed the same way, printed as the
# same JSON lines: {"framework","workload","dtype","value","unit","version"} on stdout.
#
#   OXIFLOW_LIB=$PWD/target/release/liboxiflow.so julia --project=julia/Oxiflow bench/peers/oxiflow.jl
#
# Every session is `Session(intra=2, inter=2)` (TF1's intra/inter_op_parallelism_threads,
# as the TF1 peer; OXIFLOW_BENCH_CORES overrides 2). Each `run` goes through the public
# API, so fed Julia arrays are copied in and fetched results copied out, as a user's are.
#
#   mlp_step       MLP 64-256-256-10, tanh, batch 256, mean(softmax_cross_entropy_with_logits)
#                  on one-hot labels, minimize(GradientDescentOptimizer(0.01), loss); x and
#                  labels fed to placeholders from Julia arrays every step. steps/s.
#   matmul_N       tf.matmul of two Variables, N×N, N = 256, 1024, 2048, product fetched;
#                  matmul_fed_N: both inputs fed placeholders. GFLOP/s = 2N³/t.
#   op_NAME        one op on a 1024×1024 Variable (a Julia, column-major array): tf.nn.softmax,
#                  tf.concat([v, v], 0) and (.., 1), abs, v .^ 2.5; result fetched. ms per run.
#   grad_NAME      gradients(loss, x) of a 1024×1024 Variable x in (-0.5, 0.5), fetched, ms
#                  per run; losses as peers.py's: exp sum(exp(x)), sumsq sum(x .* x),
#                  softmax sum(tf.nn.softmax(x) .* x), max sum(max(x, x')), rowbias
#                  sum((x .+ r) .^ 2) with r 1×1024, concat sum(tf.concat([x, x], 1) .^ 2),
#                  gather sum(x[idx, :]) with idx the rows (7i² + 3) mod 1024 (0-based i).
#   unary_OP       tanh exp log sigmoid sqrt relu sin cos of a Float32 Variable of 2^20
#                  values in (0.5, 2), result fetched, G elements/s; sin and cos also of
#                  the Float64 values.
#   feed_fetch     1024×1024 Float64 fed to a placeholder, tf.identity fetched: GB/s of
#                  2 × 8 MiB per run.
#   chain10k       a scalar Float64 placeholder through 10,000 alternating sin/cos, µs per
#                  op of a forward run; chain10k_grad: the value and gradients(y, x), ms.
#   pinn_step      one Adam step (lr 1e-3) of a physics-informed network: u = fc(x, [20, 20,
#                  20, 1], θ) on 1024 points of (0, 1), loss mean((u_xx + π² sin(πx))²) +
#                  sum of u² at 0 and 1, u_xx by gradients twice; θ from the formula of
#                  bench/peers/pinn.py (the starting loss in "note"). steps/s.
#   resnet_step    one Adam step (lr 1e-3) of ADCME's Resnet1D(10, 20; num_blocks=10) on a
#                  batch of 64 × 64 features fed from Julia arrays every step, mean sparse
#                  softmax cross-entropy; weights from the formula of bench/peers/resnet.py
#                  (the starting loss in "note"). steps/s.
#   conv_fwd       sum(conv2d(x, f)), x 32 × 28 × 28 × 8 and f 3 × 3 × 8 × 16 in variables,
#                  SAME; conv_grad: the gradients of sum(conv2d(x, f)²) for x and f; ms.
#                  Data from the formulas of bench/peers/conv.py.
#   while10k       while_loop of 10,000 iterations, scalar Float64 body (counter + 1,
#                  x * 1.0001) from a fed x, µs per iteration.
#   digits_epoch   examples/digits_mlp.jl run as a program in a scratch directory; the
#                  median of the epoch times it prints, the first (compilation) left out.
#                  Skipped with OXIFLOW_BENCH_DIGITS=0.
#
# Timing (as peers.py): warm-up 0.5 s (2 s for mlp_step), then blocks of ~0.1 s of
# back-to-back runs, at least 3 blocks and ~1 s (2 s for mlp_step); the median of the
# blocks' per-run times. {"meta": "loadavg", ...} lines: the 1-minute load average at the
# start and the end. Progress goes to stderr.
using Oxiflow
using Printf
using Random

const CORES = parse(Int, get(ENV, "OXIFLOW_BENCH_CORES", "2"))
const SIZES = (256, 1024, 2048)
const UNARY = ("tanh", "exp", "log", "sigmoid", "sqrt", "relu", "sin", "cos")
const UNARY64 = ("sin", "cos")
const NUNARY = 1 << 20
const CHAIN = 10_000
const FEED_BYTES = 2 * 1024 * 1024 * 8

"""Oxiflow's version: the package's, plus the repository's commit when git knows it."""
function oxiflow_version()
    toml = read(joinpath(dirname(pathof(Oxiflow)), "..", "Project.toml"), String)
    m = match(r"(?m)^version\s*=\s*\"([^\"]+)\"", toml)
    v = m === nothing ? "?" : m.captures[1]
    commit = try
        strip(read(`git -C $(@__DIR__) rev-parse --short HEAD`, String))
    catch
        ""
    end
    return isempty(commit) ? v : "$v ($commit)"
end
const VERSION_STR = oxiflow_version()

jstr(s) = "\"" * replace(replace(string(s), "\\" => "\\\\"), "\"" => "\\\"") * "\""
jnum(x) = isfinite(x) ? @sprintf("%.6g", x) : "null"
dtname(T) = T == Float32 ? "float32" : "float64"

function emit(workload, dtype, value, unit; note=nothing)
    extra = note === nothing ? "" : ", \"note\": " * jstr(note)
    println("{\"framework\": \"oxiflow\", \"workload\": ", jstr(workload), ", \"dtype\": ", jstr(dtype),
            ", \"value\": ", jnum(value), ", \"unit\": ", jstr(unit), ", \"version\": ", jstr(VERSION_STR), extra, "}")
    flush(stdout)
    @printf(stderr, "  oxiflow %s %s: %.4g %s  (at %.0f s)\n", workload, dtype, value, unit, time() - T_START)
end

const T_START = time()
emit_loadavg(at) = (println("{\"meta\": \"loadavg\", \"side\": \"oxiflow\", \"at\": ", jstr(at), ", \"value\": ",
                            jnum(Sys.loadavg()[1]), "}"); flush(stdout))

"""Median seconds per call of `f()`: warm-up, then blocks of back-to-back calls."""
function time_calls(f; warmup_s=0.5, measure_s=1.0, min_blocks=3, block_s=0.1)
    t0 = time(); n = 0
    el = 0.0
    while true
        f(); n += 1
        el = time() - t0
        el >= warmup_s && break
    end
    block = max(1, floor(Int, block_s / (el / n)))
    per_call = Float64[]
    start = time()
    while length(per_call) < min_blocks || (time() - start < measure_s && length(per_call) < 500)
        t = time_ns()
        for _ in 1:block
            f()
        end
        push!(per_call, (time_ns() - t) / 1e9 / block)
    end
    sort!(per_call)
    k = length(per_call)
    return isodd(k) ? per_call[(k + 1) ÷ 2] : (per_call[k ÷ 2] + per_call[k ÷ 2 + 1]) / 2
end

session() = Session(intra=CORES, inter=CORES)

glorot(rng, T, m, n) = T.((2 .* rand(rng, m, n) .- 1) .* sqrt(6 / (m + n)))

function bench_mlp(T)
    reset_default_graph()
    rng = MersenneTwister(1)
    sizes = (64, 256, 256, 10)
    W = [Variable(glorot(rng, T, sizes[i], sizes[i+1])) for i in 1:3]
    b = [Variable(zeros(T, sizes[i+1])) for i in 1:3]
    x = placeholder(T; shape=[256, 64])
    y = placeholder(T; shape=[256, 10])
    h = tanh(x * W[1] + b[1])
    h = tanh(h * W[2] + b[2])
    logits = h * W[3] + b[3]
    loss = mean(softmax_cross_entropy_with_logits(logits, y))
    train = minimize(GradientDescentOptimizer(0.01), loss)
    X = rand(rng, T, 256, 64)
    labels = rand(rng, 0:9, 256)
    Y = T[labels[i] == c - 1 for i in 1:256, c in 1:10]
    sess = session(); init(sess)
    t = time_calls(() -> run(sess, train, x => X, y => Y); warmup_s=2.0, measure_s=2.0)
    emit("mlp_step", dtname(T), 1 / t, "steps/s")
end

function bench_matmul(T)
    for n in SIZES
        reset_default_graph()
        rng = MersenneTwister(2)
        A = T.(2 .* rand(rng, n, n) .- 1); B = T.(2 .* rand(rng, n, n) .- 1)
        c = tf.matmul(Variable(A), Variable(B))
        pa = placeholder(T; shape=[n, n]); pb = placeholder(T; shape=[n, n])
        cf = tf.matmul(pa, pb)
        sess = session(); init(sess)
        t = time_calls(() -> run(sess, c))
        emit("matmul_$n", dtname(T), 2n^3 / t / 1e9, "GFLOP/s")
        t = time_calls(() -> run(sess, cf, pa => A, pb => B))
        emit("matmul_fed_$n", dtname(T), 2n^3 / t / 1e9, "GFLOP/s")
    end
end

function bench_unary()
    reset_default_graph()
    v64 = 0.5 .+ 1.5 .* rand(MersenneTwister(3), NUNARY)
    v = Variable(Float32.(v64))
    w = Variable(v64)
    ops = Dict("tanh" => tanh(v), "exp" => exp(v), "log" => log(v),
               "sigmoid" => sigmoid(v), "sqrt" => sqrt(v), "relu" => relu(v),
               "sin" => sin(v), "cos" => cos(v))
    ops64 = Dict("sin" => sin(w), "cos" => cos(w))
    sess = session(); init(sess)
    for name in UNARY
        op = ops[name]
        t = time_calls(() -> run(sess, op))
        emit("unary_$name", "float32", NUNARY / t / 1e9, "Gelem/s")
    end
    for name in UNARY64
        op = ops64[name]
        t = time_calls(() -> run(sess, op))
        emit("unary_$name", "float64", NUNARY / t / 1e9, "Gelem/s")
    end
end

# One op on a 1024×1024 variable (a Julia, column-major array), as peers.py's op_NAME.
function bench_ops(T)
    reset_default_graph()
    v = Variable(T.(0.5 .+ rand(MersenneTwister(5), 1024, 1024)))
    ops = [("softmax", tf.nn.softmax(v)), ("concat0", tf.concat([v, v], 0)), ("concat1", tf.concat([v, v], 1)),
           ("abs", abs(v)), ("pow", v .^ T(2.5)), ("pow05", v .^ T(0.5)), ("pow3", v .^ T(3))]
    sess = session(); init(sess)
    for (name, op) in ops
        t = time_calls(() -> run(sess, op))
        emit("op_$name", dtname(T), t * 1e3, "ms")
    end
end

function bench_feed_fetch()
    reset_default_graph()
    p = placeholder(Float64; shape=[1024, 1024])
    o = tf.identity(p)
    A = rand(MersenneTwister(4), 1024, 1024)
    sess = session()
    t = time_calls(() -> run(sess, o, p => A))
    emit("feed_fetch", "float64", FEED_BYTES / t / 1e9, "GB/s")
end

function bench_chain()
    reset_default_graph()
    x = placeholder(Float64; shape=Int[])
    y = x
    for i in 1:CHAIN
        y = isodd(i) ? sin(y) : cos(y)
    end
    dy = gradients(y, x)
    sess = session()
    t = time_calls(() -> run(sess, y, x => 0.5))
    emit("chain10k", "float64", t / CHAIN * 1e6, "us/op")
    t = time_calls(() -> run(sess, [y, dy], x => 0.5))
    emit("chain10k_grad", "float64", t * 1e3, "ms")
end

function bench_while()
    reset_default_graph()
    n = 10_000
    x = placeholder(Float64; shape=Int[])
    _, w = while_loop((i, v) -> i < n, (i, v) -> (i + 1, v * 1.0001), [constant(0), x])
    sess = session()
    t = time_calls(() -> run(sess, w, x => 0.5))
    emit("while10k", "float64", t / n * 1e6, "us/iter")
end

"""The epoch times `(N.NN s)` that examples/digits_mlp.jl prints, run as a program."""
function bench_digits()
    script = normpath(joinpath(@__DIR__, "..", "..", "examples", "digits_mlp.jl"))
    project = dirname(Base.active_project())
    out = mktempdir() do dir
        read(setenv(`$(Base.julia_cmd()) --project=$project $script`, ENV; dir=dir), String)
    end
    secs = [parse(Float64, m.captures[1]) for m in eachmatch(r"epoch\s+\d+ .*\((\d+\.\d+) s\)", out)]
    length(secs) >= 2 || error("digits_mlp.jl printed no epoch times:\n$out")
    rest = sort(secs[2:end])
    k = length(rest)
    med = isodd(k) ? rest[(k + 1) ÷ 2] : (rest[k ÷ 2] + rest[k ÷ 2 + 1]) / 2
    emit("digits_epoch", "float64", med, "s", note=@sprintf("median of epochs 2-%d; epoch 1 (compiles): %.2f s", length(secs), secs[1]))
end

# The gradient of a scalar loss with respect to a 1024×1024 variable, as peers.py's grad_NAME.
function bench_grads(T)
    reset_default_graph()
    rng = MersenneTwister(6)
    x = Variable(T.(rand(rng, 1024, 1024) .- 0.5))
    r = constant(T.(rand(rng, 1, 1024)))
    idx = [(7i^2 + 3) % 1024 + 1 for i in 0:1023]
    losses = [("exp", sum(exp(x))), ("sumsq", sum(x .* x)), ("softmax", sum(tf.nn.softmax(x) .* x)),
              ("max", sum(max(x, x'))), ("rowbias", sum((x .+ r) .^ 2)), ("concat", sum(tf.concat([x, x], 1) .^ 2)),
              ("gather", sum(x[idx, :]))]
    grads = [(name, gradients(loss, x)) for (name, loss) in losses]
    sess = session(); init(sess)
    for (name, g) in grads
        t = time_calls(() -> run(sess, g))
        emit("grad_$name", dtname(T), t * 1e3, "ms")
    end
end

# pinn_step: as bench/peers/pinn.py (theta0 is its formula), through ADCME's fc.
function bench_pinn(T)
    reset_default_graph()
    widths = [1, 20, 20, 20, 1]
    θ0, k = Float64[], 0
    for i in 1:length(widths)-1
        m, n = widths[i], widths[i+1]
        append!(θ0, sin.(1.3 .* (k:k+m*n-1) .+ 0.4) .* sqrt(3.0 / m))
        append!(θ0, zeros(n))
        k += m * n + n
    end
    N = 1024
    X = T.(reshape(((1:N) .- 0.5) ./ N, N, 1))
    θ = Variable(T.(θ0))
    x = constant(X)
    uxx = gradients(sum(gradients(sum(fc(x, widths[2:end], θ)), x)), x)
    ub = fc(constant(T[0; 1][:, :]), widths[2:end], θ)
    loss = mean((uxx + T.(pi^2 .* sin.(pi .* X)))^2) + sum(ub^2)
    train = minimize(AdamOptimizer(1e-3), loss)
    sess = session(); init(sess)
    loss0 = run(sess, loss)
    t = time_calls(() -> run(sess, train); warmup_s=2.0, measure_s=2.0)
    emit("pinn_step", dtname(T), 1 / t, "steps/s"; note=@sprintf("loss at the start %.6g", loss0))
end

# resnet_step: as bench/peers/resnet.py (weights0 is its formula), through ADCME's Resnet1D,
# the batch fed from Julia arrays at every step as ADCME's front page does.
function bench_resnet(T)
    reset_default_graph()
    F, H, C, NB, B = 64, 20, 10, 10, 64
    Oxiflow.options.training.training = placeholder(true)
    x = placeholder(zeros(T, B, F))
    l = placeholder(zeros(Int64, B))
    resnet = Resnet1D(C, H; num_blocks=NB)
    loss = mean(sparse_softmax_cross_entropy_with_logits(labels=l, logits=resnet(x)))
    train = minimize(AdamOptimizer(1e-3), loss)
    layers = [resnet.initial_layer; [d for blk in resnet.blocks for d in blk.linear_layers]; resnet.final_layer]
    sess = session(); init(sess)
    for (j, d) in enumerate(layers)      # weights0 of resnet.py: row-major (in × out) kernels
        m, n = size(d.kernel)
        w = sin.(1.3 .* (0:m*n-1) .+ 0.7 * (j - 1) .+ 0.4) .* sqrt(6.0 / (m + n))
        run(sess, assign(d.kernel, T.(permutedims(reshape(w, n, m)))))
    end
    X = T.(permutedims(reshape(0.5 .+ 0.5 .* sin.(0.37 .* collect(0:B*F-1) .+ 0.11), F, B)))
    L = (7 .* (0:B-1) .+ 3) .% C
    feed = Dict(x => X, l => L)
    loss0 = run(sess, loss; feed_dict=feed)
    t = time_calls(() -> run(sess, [train, loss]; feed_dict=feed); warmup_s=2.0, measure_s=2.0)
    emit("resnet_step", dtname(T), 1 / t, "steps/s"; note=@sprintf("loss at the start %.6g", loss0))
end

# conv_fwd, conv_grad: as bench/peers/conv.py (its data formulas over the row-major index),
# the arrays in variables (Julia's column-major NHWC arrays).
function bench_conv(T)
    reset_default_graph()
    N, H, W, C, K, OC = 32, 28, 28, 8, 3, 16
    rowmajor(v, dims) = permutedims(reshape(v, reverse(dims)...), length(dims):-1:1)
    X = T.(rowmajor(sin.(0.37 .* (0:N*H*W*C-1) .+ 0.11), (N, H, W, C)))
    F = T.(rowmajor(cos.(0.23 .* (0:K*K*C*OC-1) .+ 0.5) ./ 6, (K, K, C, OC)))
    x, f = Variable(X), Variable(F)
    y = tf.nn.conv2d(x, f, 1, "SAME")
    s1, loss = sum(y), sum(y .* y)
    grads = gradients(loss, [x, f])
    sess = session(); init(sess)
    note = @sprintf("loss at the start %.6g", run(sess, loss))
    emit("conv_fwd", dtname(T), time_calls(() -> run(sess, s1)) * 1e3, "ms"; note=note)
    emit("conv_grad", dtname(T), time_calls(() -> run(sess, grads)) * 1e3, "ms"; note=note)
end

# PEERS_WORKLOADS (as peers.py): a comma list of the groups to run, "mlp", "matmul", "ops",
# "grads", "pinn", "resnet", "conv" and "other" (the rest, the digits epoch included); all
# when unset.
const GROUPS = ("mlp", "matmul", "ops", "grads", "pinn", "resnet", "conv", "other")

function main()
    groups = filter(!isempty, strip.(split(get(ENV, "PEERS_WORKLOADS", join(GROUPS, ",")), ",")))
    bad = setdiff(groups, GROUPS)
    isempty(bad) || error("oxiflow.jl: unknown PEERS_WORKLOADS group(s) $(join(bad, ", ")) (known: $(join(GROUPS, ", ")))")
    steps = Any[]
    "mlp" in groups && append!(steps, [() -> bench_mlp(Float32), () -> bench_mlp(Float64)])
    "matmul" in groups && append!(steps, [() -> bench_matmul(Float32), () -> bench_matmul(Float64)])
    "ops" in groups && append!(steps, [() -> bench_ops(Float32), () -> bench_ops(Float64)])
    "grads" in groups && append!(steps, [() -> bench_grads(Float32), () -> bench_grads(Float64)])
    "pinn" in groups && append!(steps, [() -> bench_pinn(Float32), () -> bench_pinn(Float64)])
    "resnet" in groups && append!(steps, [() -> bench_resnet(Float32), () -> bench_resnet(Float64)])
    "conv" in groups && append!(steps, [() -> bench_conv(Float32), () -> bench_conv(Float64)])
    "other" in groups && append!(steps, [bench_unary, bench_feed_fetch, bench_chain, bench_while])
    "other" in groups && get(ENV, "OXIFLOW_BENCH_DIGITS", "1") != "0" && push!(steps, bench_digits)
    emit_loadavg("start")
    for s in steps
        s()
    end
    emit_loadavg("end")
end

main()
