# Assertions shared by the seed scripts. Oracles: the seeds' documented results and TF's
# placement rules (colocate=true: each gradient op on its forward op's device; false: the
# default device, GPU:0 when present).
using Test
include(joinpath(@__DIR__, "..", "..", "julia", "Oxiflow", "test", "json.jl"))

const CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
const GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"

"""Runs `f()`, returning its value and what it printed (placement and `Executing op` lines)."""
function capture(f)
    path, io = mktemp()
    r = redirect_stdout(f, io)
    close(io)
    return r, read(path, String)
end

# Ensures a GPU: a real one if present, else one emulated GPU (said out loud).
function ensure_gpu()
    if !has_gpu()
        use_emulated_gpus(1)
        println("no GPU present: running on one emulated GPU (OXIFLOW_EMULATED_GPUS=1)")
    end
end

"""Checks a saved profile: valid JSON, events on each device the step used."""
function check_profile_file(path)
    j = MiniJSON.parse_json(read(path, String))
    ev = j["traceEvents"]
    procs = Dict(e["pid"] => e["args"]["name"] for e in ev if e["ph"] == "M" && e["name"] == "process_name")
    used = unique([e.device for e in profile_events()])
    for d in used
        @test any(e -> e["ph"] == "X" && procs[e["pid"]] == "$d Compute", ev)
    end
    copies = [e for e in ev if e["ph"] == "X" && e["cat"] == "Copy"]
    @test length(copies) == profile_copies().count
    # copies sit on their destination device's Memcpy process, labelled by direction
    for c in copies
        @test procs[c["pid"]] == c["args"]["to"] * " Memcpy"
        @test c["args"]["direction"] in ("host to device", "device to host", "device to device")
    end
    return ev
end

"""Devices of the gradient ops in the last profile, by forward op (`Sin`, `Cos`)."""
function gradient_devices(g, fwd::AbstractString)
    scope = split(g.op.name, '/')[1]                  # gradients, gradients_1, ...
    prefix = "$scope/$(fwd)_grad/"
    return unique([e.device for e in profile_events() if e.kind === :op && startswith(e.name, prefix)])
end

function check_colocate_true(g, b, c)
    @test gradient_devices(g, b.op.name) == [GPU0]   # gradients of sin stay on GPU:0
    @test gradient_devices(g, c.op.name) == [CPU0]   # gradients of cos stay on CPU:0
end

function check_colocate_false(g, b, c)
    @test gradient_devices(g, b.op.name) == [GPU0]
    @test gradient_devices(g, c.op.name) == [GPU0]   # default placement: GPU:0
end

function value_oracle()
    return -sin(sin(1.0)) * cos(1.0) + cos(sin(1.0))  # d cos(sin a)/da + cos(sin a) at a = 1
end
