# Profiles of seed 000's program: the saved JSON against the placement rules, the
# summary against the JSON, the HTML page and the Graphviz graph. Oracles: TF's placement
# rules for devices; the JSON itself, recomputed here in Julia, for the summary's figures.

isdefined(@__MODULE__, :timeline_ops) || include("profile_helpers.jl")   # once per process (fusion.jl uses it too)

@testset "profiles of seed 000 (colocate = $colocate)" for colocate in (true, false)
    g, sess = seed000_profile(colocate)
    path = tempname() * ".json"
    save_profile(path)
    xs, dev = timeline_ops(path)
    ops = [e for e in xs if e["cat"] == "Op"]
    copies = [e for e in xs if e["cat"] == "Copy"]
    where = Dict(e["args"]["name"] => dev(e) for e in ops)
    # ops fused into one CPU step (`_FusedElementwise`) ran where that step ran
    for e in ops, m in get(e["args"], "fused_ops", String[])
        where[String(split(m, " (")[1])] = dev(e)
    end
    # forward ops where the scopes and the device function put them
    @test where["Variable"] == CPU0 && where["Variable/read"] == CPU0
    @test where["Sin"] == GPU0 && where["Cos"] == CPU0
    # every gradient op on the device the rules give: with colocate, its forward op's
    # device; without, the default device (GPU:0, the best device with a kernel)
    grad_ops = [n for n in keys(where) if startswith(n, "gradients")]
    @test !isempty(grad_ops)
    # (with colocate, the seed grad_ys_0 = OnesLike(Cos) is colocated with ys's op, Cos,
    # as TF's _DefaultGradYs does; every gradient op of this graph is one of these three)
    colocated_with = Dict("Sin_grad" => GPU0, "Cos_grad" => CPU0, "grad_ys_0" => CPU0)
    for n in grad_ops
        fwd = split(n, '/')[2]                       # gradients/Sin_grad/... -> Sin_grad
        @test haskey(colocated_with, fwd)
        want = !colocate ? GPU0 : get(colocated_with, fwd, "no rule for $n")
        @test (n, where[n]) == (n, want)
    end
    # one copy per (tensor, consumer device) whose producer is on another device
    producer(t) = where[split(t, ':')[1]]
    edges = Set{Tuple{String,String}}()
    for e in ops, (k, v) in e["args"]
        startswith(k, "input") || continue
        haskey(where, split(v, ':')[1]) || continue
        producer(v) != dev(e) && push!(edges, (v, dev(e)))
    end
    @test length(copies) == length(edges) == profile_copies().count
    @test Set((e["args"]["input0"], e["args"]["to"]) for e in copies) == edges
    @test all(e -> e["args"]["from"] == producer(e["args"]["input0"]), copies)

    # the summary's figures are the JSON's
    buf = IOBuffer(); profile_summary(io=buf)
    text = String(take!(buf))
    @test occursin("$(length(copies)) cross-device copies, $(sum(Int[e["args"]["bytes"] for e in copies])) bytes", text)
    for d in (CPU0, GPU0)
        row = split(first(filter(l -> startswith(l, d * " "), split(text, '\n'))))
        mine = [e for e in ops if dev(e) == d]
        @test parse(Int, row[2]) == length(mine)
        busy = union_us([(e["ts"], e["ts"] + e["dur"]) for e in mine])
        @test isapprox(parse(Float64, row[3]), busy / 1000, atol=0.0011)
        @test parse(Int, row[6]) == count(e -> e["args"]["to"] == d, copies)
    end
    @test occursin("Top ", text)

    # the HTML page embeds the same step and is self-contained
    html = tempname() * ".html"
    save_profile(html)
    page = read(html, String)
    @test startswith(page, "<!DOCTYPE html>")
    @test !occursin("src=", page) && !occursin("href=", page)
    @test occursin("\"name\":\"gradients/Sin_grad/Cos\"", page)
    @test count("\"kind\":\"", page) == length(copies)

    # the graph as DOT: placed nodes clustered by device, cross-device edges dashed
    dot = read(save_graph(tempname() * ".dot"; sess=sess), String)
    @test occursin("label=\"$CPU0\"", dot) && occursin("label=\"$GPU0\"", dot)
    @test count("style=dashed", dot) >= 1
    if Sys.which("dot") === nothing
        println("skipped: save_graph(\"x.svg\") needs Graphviz's dot, which is not installed")
    else
        svg = save_graph(tempname() * ".svg"; sess=sess)
        @test endswith(svg, ".svg") && occursin("<svg", read(svg, String))
    end
end

@testset "profile errors" begin
    reset_default_graph()
    @test_throws OxiflowError Oxiflow.oxf_timeline_html("{\"events\": []}")
    @test_throws OxiflowError Oxiflow.oxf_timeline_summary("not json")
end

@testset "run_profile records the whole step with pairs and with feed_dict" begin
    reset_default_graph()
    p = placeholder(Float64, shape=[3])
    @gpu begin
        global q = sum(sin(p))
    end
    s = Session(emulated_gpus=1)
    v = [0.1, 0.2, 0.3]
    names_of() = sort([e.name for e in profile_events() if e.kind === :op])
    @test run_profile(s, q, p => v) ≈ sum(sin.(v))
    with_pairs = names_of()
    @test run_profile(s, q; feed_dict=Dict(p => v)) ≈ sum(sin.(v))
    with_dict = names_of()
    @test with_pairs == with_dict
    @test any(n -> startswith(n, "Sin"), with_pairs) && any(n -> startswith(n, "Sum"), with_pairs)
end

@testset "a profile shows each iteration of a while_loop's body" begin
    reset_default_graph()
    x0 = placeholder(Float64, shape=[3])
    _, x = while_loop((k, x) -> k < 4, (k, x) -> (k + 1, sin(x) * 2.0), [constant(0), x0])
    s = Session()
    v = [0.1, 0.2, 0.3]
    want = v
    for _ in 1:4; want = sin.(want) * 2.0; end
    @test run_profile(s, x, x0 => v) ≈ want
    ops = [e for e in profile_events() if e.kind === :op]
    loop = only([e for e in ops if e.op == "While"])
    sins = [e for e in ops if e.op == "Sin"]
    # one Sin per iteration, named inside the loop's body, within the loop's own step
    @test length(sins) == 4
    @test all(e -> startswith(e.name, loop.name * "/body/"), sins)
    @test all(e -> loop.start_ns <= e.start_ns && e.end_ns <= loop.end_ns, sins)
    # cond's comparison runs once more than the body
    @test count(e -> e.op == "Less" && startswith(e.name, loop.name * "/cond/"), ops) == 5
    # the saved timeline gives each one its iteration
    path = joinpath(mktempdir(), "loop.json")
    save_profile(path)
    evs = MiniJSON.parse_json(read(path, String))["traceEvents"]
    body_sins = [e["args"] for e in evs if e["ph"] == "X" && e["args"]["op"] == "Sin"]
    @test sort([a["iteration"] for a in body_sins]) == 0:3
    @test all(a -> a["frame"] == loop.name * "/body", body_sins)
    conds = [e["args"]["iteration"] for e in evs if e["ph"] == "X" && e["args"]["op"] == "Less"]
    @test sort(conds) == 0:4
end

@testset "timestamp and sleep_for time part of a graph (ADCME's)" begin
    reset_default_graph()
    a = constant(0.2)
    t0 = timestamp(a)
    slept = sleep_for(a)
    t1 = timestamp(slept)
    sess = Session()
    before = time()
    t0_, t1_, s_ = run(sess, [t0, t1, slept])
    after = time()
    @test before - 1e-3 <= t0_ <= t1_ <= after + 1e-3
    @test 0.2 <= s_ < 2.0
    @test t1_ - t0_ >= 0.2          # t1 waits for the sleep, t0 for nothing long
    # stateful: the clock is read again on every run
    u0, = run(sess, [t0])
    @test u0 >= t1_
    @test timestamp().op.type == "Timestamp" && isempty(timestamp(1.0).op.inputs)
    @test timestamp(a).op.inputs == ["^" * a.op.name]
    @test size(sleep_for(constant(Int32(0)))) == ()
    e = try; run(sess, sleep_for(-1.0)); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("SleepFor", e.msg) && occursin("-1", e.msg)
    e = try; run(sess, sleep_for(1e30)); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("SleepFor", e.msg)
    @test run(sess, sleep_for(0.0)) >= 0      # the session is still usable
    @test_throws OxiflowError sleep_for(constant([0.1, 0.2]))
    @test_throws OxiflowError sleep_for(constant(true))
end
