# TensorBoard logs (`Diary`, `scalar`, `tf.summary`, `SummaryWriter`). Oracles: bytes that
# TensorFlow itself wrote (2.21's `tf.compat.v1.summary.merge` of a scalar and a histogram,
# and a `tf.io.TFRecordWriter` record, recorded 2026-11-29), and the event files read back here
# record by record, with their CRCs and the values computed in Julia.

# A minimal protocol-buffer reader: field number => values (UInt64 for varints and fixed
# 64-bit fields, UInt32 for fixed 32-bit ones, byte vectors for length-delimited ones).
function pb_fields(b::Vector{UInt8})
    f = Dict{Int,Vector{Any}}(); i = 1
    function varint()
        x = UInt64(0); s = 0
        while true
            c = b[i]; i += 1
            x |= UInt64(c & 0x7f) << s; s += 7
            c < 0x80 && return x
        end
    end
    while i <= length(b)
        key = varint(); field = Int(key >> 3); wire = key & 7
        v = wire == 0 ? varint() :
            wire == 1 ? (i += 8; reinterpret(UInt64, b[i-8:i-1])[1]) :
            wire == 5 ? (i += 4; reinterpret(UInt32, b[i-4:i-1])[1]) :
            (n = Int(varint()); i += n; b[i-n:i-1])
        push!(get!(f, field, Any[]), v)
    end
    return f
end

# The records of a TFRecord file, each CRC checked (TF's masked CRC-32C).
function tf_records(path)
    mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8
    b = read(path); i = 1; out = Vector{UInt8}[]
    while i <= length(b)
        len = b[i:i+7]; n = Int(reinterpret(UInt64, len)[1])
        @test reinterpret(UInt32, b[i+8:i+11])[1] == mask(Oxiflow.crc32c(len))
        data = b[i+12:i+11+n]
        @test reinterpret(UInt32, b[i+12+n:i+15+n])[1] == mask(Oxiflow.crc32c(data))
        push!(out, data); i += 16 + n
    end
    return out
end

events_in(dir) = [pb_fields(r) for f in readdir(dir; join=true) if occursin("tfevents", f) for r in tf_records(f)]

@testset "summaries serialize as TensorFlow does" begin
    reset_default_graph()
    # CRC-32C's check value (RFC 3720) for the library the records use
    @test Oxiflow.crc32c(Vector{UInt8}("123456789")) == 0xe3069283
    io = IOBuffer(); Oxiflow.write_record(io, Vector{UInt8}("brain.Event:2"))
    @test bytes2hex(take!(io)) == "0d000000000000003c37b834627261696e2e4576656e743a32ee01067c"
    c = tf.summary.scalar("loss", constant(5.5))
    h = tf.summary.histogram("w", constant([0.0, 1.0, -2.5, 3.0, 3.0, 1e-13]))
    tf_bytes = "0a0b0a046c6f7373150000b0400ac7010a01772ac1010900000000000004c0110000000000000840190000000000" *
        "0018402171000000000012402900000000004039403248ea360f76a3ef04c077603c0e660803c000000000000000001" *
        "1ea2d819997713d08996919155aed3f2b14facdbe24f03f68bc10359a0707400d9cc5a029550940ffffffffffffef7f3a" *
        "480000000000000000000000000000f03f000000000000000000000000000000400000000000000000000000000000f03f" *
        "000000000000000000000000000000400000000000000000"
    s = Session()
    @test bytes2hex(codeunits(run(s, tf.summary.merge([c, h])))) == tf_bytes
    # merge_all holds every summary of the graph, in order
    @test run(s, tf.summary.merge_all()) == run(s, tf.summary.merge([c, h]))
    @test_throws OxiflowError scalar(constant([1.0, 2.0]), "v")
    @test_throws OxiflowError scalar(constant(true), "b")
end

@testset "Diary and FileWriter logs read back" begin
    reset_default_graph()
    x = placeholder(Float64; shape=[3], name="x")
    y = sin(x) * 2.0
    s = scalar(sum(y), "loss")
    hist = tf.summary.histogram("y", y)
    dir = mktempdir()
    w = tf.summary.FileWriter(dir, Oxiflow.get_default_graph())
    @test w.get_logdir() == dir
    sess = Session()
    X = [[1.0, 2.0, 3.0], [-0.5, 0.25, 4.0]]
    for (i, v) in enumerate(X)
        w.add_summary(run(sess, tf.summary.merge([s, hist]), x => v), i)
    end
    close(w)
    @test_throws OxiflowError add_summary(w, run(sess, s, x => X[1]), 3)
    ev = events_in(dir)
    @test length(ev) == 2 + length(X)
    @test String(ev[1][3][1]) == "brain.Event:2"
    nodes = [pb_fields(n) for n in pb_fields(ev[2][4][1])[1]]
    @test [String(n[1][1]) for n in nodes[1:4]] == ["x", "Sin", "Const", "mul"]
    @test [String(n[2][1]) for n in nodes[1:4]] == ["Placeholder", "Sin", "Const", "Mul"]
    @test String.(nodes[4][3]) == ["Sin", "Const"]
    for (i, v) in enumerate(X)
        e = ev[2+i]
        @test e[2][1] == i                                      # step
        loss, histo = [pb_fields(val) for val in pb_fields(e[5][1])[1]]
        @test String(loss[1][1]) == "loss" && reinterpret(Float32, loss[2][1]) == Float32(sum(2 .* sin.(v)))
        hp = pb_fields(histo[5][1]); dbl(k) = reinterpret(Float64, hp[k][1])
        Y = 2 .* sin.(v)
        @test (dbl(1), dbl(2), dbl(3)) == (minimum(Y), maximum(Y), 3.0)
        @test dbl(4) ≈ sum(Y) && dbl(5) ≈ sum(abs2, Y)
        limits = reinterpret(Float64, hp[6][1]); counts = reinterpret(Float64, hp[7][1])
        @test sum(counts) == 3
        # every value lies in a bucket holding a count: above the previous limit, below its own
        for y in Y
            k = findfirst(>(y), limits)
            @test counts[k] >= 1 && (k == 1 || limits[k-1] <= y)
        end
    end
    # ADCME's Diary: write, save, load
    d = Diary()
    p = placeholder(1.0, dtype=Float64)
    sp = scalar(constant(1.0) + p, "variable")
    for i in 1:3
        write(d, i, run(sess, sp, Dict(p => Float64(i))))
    end
    write(d, 4, [run(sess, sp, p => 10.0), run(sess, sp, p => 20.0)])
    saved = joinpath(mktempdir(), "diary")
    save(d, saved)
    vals(dir) = [(Int(e[2][1]), reinterpret(Float32, pb_fields(pb_fields(e[5][1])[1][1])[2][1])) for e in events_in(dir) if haskey(e, 5)]
    @test vals(saved) == [(1, 2f0), (2, 3f0), (3, 4f0), (4, 11f0), (4, 21f0)]
    other = mktempdir()
    load(d, other)
    write(d, 5, run(sess, sp, p => 0.5))
    @test d.tdir == other && vals(other) == [(5, 1.5f0)]
    # TensorBoard itself is not installed here: activate says how to start it
    if Sys.which("tensorboard") === nothing
        @test (@test_logs (:warn, r"tensorboard is not installed") activate(d)) === nothing
    else
        proc = activate(d)
        @test proc isa Base.Process
        kill(proc)
    end
end
