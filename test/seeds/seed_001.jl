# Seed 001 (the same ADCME page as extracted text): its code blocks as written, asserted.
using Oxiflow
include(joinpath(@__DIR__, "common.jl"))
ensure_gpu()

@testset "seed 001" begin
@cpu 0 begin
    global a = Variable(1.0)
    global b = sin(a)
end
@test b.device == "/device:CPU:0"
@cpu begin
    global a = Variable(1.0)
    global b = sin(a)
end
@test b.device == "/device:CPU:0"
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
g = gradients(c, a, colocate=true)
sess = Session(); init(sess)
run_profile(sess, g+c)
save_profile("true.json")
check_colocate_true(g, b, c)
check_profile_file("true.json")
g = gradients(c, a, colocate=false)
sess = Session(); init(sess)
@test run_profile(sess, g+c) ≈ value_oracle()
save_profile("false.json")
check_colocate_false(g, b, c)
check_profile_file("false.json")
@pywith tf.device("/cpu:0") begin
global update_ops = get_collection(tf.GraphKeys.UPDATE_OPS)
end
@test isempty(update_ops)
end
