# A tour of device placement with Oxiflow, following the ADCME "Parallel Computing" page
# (seed 000) step by step. Run it with `make demo`.
using Oxiflow

println("== Oxiflow placement tour ==")
if !has_gpu()
    use_emulated_gpus(1)
    println("No GPU present: using one emulated GPU (host memory, CPU kernels, GPU placement rules).")
end
for d in Oxiflow.list_devices()
    println("  device ", d.name, "  [", d.kind, "]")
end

println("\n1. @cpu places ops on a CPU (device id defaults to 0)")
@cpu 0 begin
    global a = Variable(1.0)
    global b = sin(a)
end
println("   a.device = ", repr(a.device), ", b.device = ", repr(b.device))
@gpu begin
    global gb = sin(constant(2.0))
end
println("   @gpu gives ", repr(gb.device))

println("\n2. A device function: variables on CPU:0 (the parameter server), the rest on GPU:0")
PS_OPS = ["Variable", "VariableV2", "AutoReloadVariable"]
function assign_to_device(device, ps_device="/device:CPU:0")
    function _assign(op)
        node_def = pybuiltin("isinstance")(op, tf.NodeDef) ? op : op.node_def
        if node_def.op in PS_OPS
            return ps_device
        else
            return device
        end
    end
    return _assign
end
@pywith tf.device(assign_to_device("/device:GPU:0")) begin
    global a = Variable(1.0)
    global b = sin(a)
end
@pywith tf.device("/CPU:0") begin
    global c = cos(b)
end
println("   a.device = ", repr(a.device), "   (", a.op.type, ")")
println("   b.device = ", repr(b.device), "   (", b.op.type, ")")
println("   c.device = ", repr(c.device), "   (", c.op.type, ")")

function profile_and_report(colocate::Bool)
    println("\n", colocate ? "3" : "4", ". gradients(c, a, colocate=$colocate), then run_profile + save_profile")
    g = gradients(c, a, colocate=colocate)
    println("   placement (log_device_placement=true):")
    sess = Session(log_device_placement=true); init(sess)
    v = run_profile(sess, g + c)
    file = "$(colocate).json"
    save_profile(file)
    println("   g + c = ", v, "   (d/da cos(sin a) + cos(sin a) at a=1: ",
            -sin(sin(1.0)) * cos(1.0) + cos(sin(1.0)), ")")
    println("   ops run, with the device each ran on:")
    for e in profile_events()
        e.kind === :op && println("     ", rpad(e.name, 34), e.device)
    end
    cp = profile_copies()
    println("   $file: $(cp.count) cross-device copies, $(cp.bytes) bytes copied")
    for e in profile_events()
        e.kind === :copy && println("     copy ", rpad(e.name, 28), e.from, " -> ", e.device)
    end
    return cp
end

t = profile_and_report(true)
f = profile_and_report(false)
println("\nSummary: colocate=true made $(t.count) copies ($(t.bytes) bytes); colocate=false made $(f.count) copies ($(f.bytes) bytes).")
println("Open true.json and false.json in chrome://tracing or https://ui.perfetto.dev to compare the timelines.")
