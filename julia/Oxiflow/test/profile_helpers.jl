# Helpers for profile tests: seed 000's program, profiled; timeline JSON readers.

const PS_OPS = ["Variable", "VariableV2", "AutoReloadVariable"]
function ps_assign(device, ps_device="/device:CPU:0")
    return op -> ((op isa NodeDef ? op : op.node_def).op in PS_OPS ? ps_device : device)
end

"""Builds seed 000's program; returns (a, b, c, g, sess) after one profiled run."""
function seed000_profile(colocate::Bool)
    reset_default_graph()
    @pywith tf.device(ps_assign("/device:GPU:0")) begin
        global pa = Variable(1.0)
        global pb = sin(pa)
    end
    @pywith tf.device("/CPU:0") begin
        global pc = cos(pb)
    end
    g = gradients(pc, pa, colocate=colocate)
    sess = Session(); init(sess)
    @test run_profile(sess, g + pc) ≈ -sin(sin(1.0)) * cos(1.0) + cos(sin(1.0))
    return g, sess
end

"""X events of a saved timeline with their device (process name minus ` Compute` or ` Memcpy`)."""
function timeline_ops(path)
    ev = MiniJSON.parse_json(read(path, String))["traceEvents"]
    procs = Dict(e["pid"] => e["args"]["name"] for e in ev if e["ph"] == "M" && e["name"] == "process_name")
    xs = [e for e in ev if e["ph"] == "X"]
    dev(e) = replace(replace(procs[e["pid"]], " Compute" => ""), " Memcpy" => "")
    return xs, dev
end

# Union length of intervals, in µs.
function union_us(iv)
    isempty(iv) && return 0.0
    iv = sort(iv)
    total = 0.0; (cs, ce) = iv[1]
    for (s, e) in iv[2:end]
        if s <= ce
            ce = max(ce, e)
        else
            total += ce - cs; cs, ce = s, e
        end
    end
    return total + ce - cs
end

