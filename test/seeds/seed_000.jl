# Seed 000 (ADCME docs, "Parallel Computing"): every Julia code block as written, with the
# results the seed documents asserted.
using Oxiflow
include(joinpath(@__DIR__, "common.jl"))
ensure_gpu()

@testset "seed 000" begin
@cpu 0 begin
    global a = Variable(1.0)
    global b = sin(a)
end
@test (a.device, b.device) == ("/device:CPU:0", "/device:CPU:0")

@cpu begin
    global a = Variable(1.0)
    global b = sin(a)
end
@test (a.device, b.device) == ("/device:CPU:0", "/device:CPU:0")

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
@test a.device == "/device:CPU:0"
@test b.device == "/device:GPU:0"

@pywith tf.device(assign_to_device("/device:GPU:0")) begin
    global a = Variable(1.0)
    global b = sin(a)
end

@pywith tf.device("/CPU:0") begin
    global c = cos(b)
end

g = gradients(c, a, colocate=true)
# the gradient reaching `a` is built by sin's gradient: colocated with sin, on its device
@test g.op.colocation_groups == ["loc:@" * b.op.name]
@test g.device == "/device:GPU:0"

g = gradients(c, a, colocate=true)
sess = Session(); init(sess)
@test run_profile(sess, g+c) ≈ value_oracle()
save_profile("true.json")
check_colocate_true(g, b, c)
check_profile_file("true.json")
copies_true = profile_copies()

g = gradients(c, a, colocate=false)
sess = Session(); init(sess)
@test run_profile(sess, g+c) ≈ value_oracle()
save_profile("false.json")
check_colocate_false(g, b, c)
check_profile_file("false.json")
copies_false = profile_copies()
println("cross-device copies: colocate=true $(copies_true.count) ($(copies_true.bytes) bytes), colocate=false $(copies_false.count) ($(copies_false.bytes) bytes)")

@pywith tf.device("/cpu:0") begin
global update_ops = get_collection(tf.GraphKeys.UPDATE_OPS)
end
@test update_ops == Tensor[]
end
