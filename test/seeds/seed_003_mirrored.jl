# Seed 003 (TF guide "Using GPUs", "With tf.distribute.Strategy"): the MirroredStrategy
# block, in Julia. The seed's Python:
#
#   strategy = tf.distribute.MirroredStrategy()
#   with strategy.scope():
#     inputs = tf.keras.layers.Input(shape=(1,))
#     predictions = tf.keras.layers.Dense(1)(inputs)
#     model = tf.keras.models.Model(inputs=inputs, outputs=predictions)
#     model.compile(loss='mse', optimizer=tf.train.GradientDescentOptimizer(learning_rate=0.2))
#
# "runs a copy of your model on each GPU, splitting the input data between them". Oracle:
# full-batch gradient descent on the mean squared error computed in Julia (the replicas'
# averaged gradients are the whole batch's gradient), and the fit of y = 2x + 1.
using Oxiflow
include(joinpath(@__DIR__, "common.jl"))
if count(d -> d.type == "GPU", Oxiflow.list_devices()) < 2
    use_emulated_gpus(2)
    println("fewer than 2 GPUs present: running on two emulated GPUs (OXIFLOW_EMULATED_GPUS=2)")
end

@testset "seed 003: MirroredStrategy" begin
    strategy = MirroredStrategy()
    @test strategy.devices == [GPU0, "/job:localhost/replica:0/task:0/device:GPU:1"]   # every GPU, as TF
    N = 16
    xs = collect(range(-1.0, 1.0; length=N))
    ys = 2 .* xs .+ 1
    local kernel, bias, inputs, labels, train
    @pywith strategy.scope() begin
        inputs = placeholder(Float64; shape=[N, 1], name="inputs")                     # Input(shape=(1,))
        labels = placeholder(Float64; shape=[N, 1], name="labels")
        kernel = Variable(fill(0.5, 1, 1); name="dense/kernel")                        # Dense(1)
        bias = Variable(zeros(1); name="dense/bias")
    end
    @test kernel.device == "/device:CPU:0" && bias.device == "/device:CPU:0"
    dense(x) = x * kernel + bias
    mse(x, y) = mean((dense(x) - y)^2)
    # compile(loss='mse', optimizer=GradientDescentOptimizer(0.2)): the training step
    train = strategy.minimize(GradientDescentOptimizer(0.2), mse, inputs, labels)
    sess = Session(); init(sess)
    feeds = (inputs => reshape(xs, N, 1), labels => reshape(ys, N, 1))
    w, b = 0.5, 0.0
    for step in 1:5
        l, _ = run_profile(sess, [train.loss, train.train_op], feeds...)
        @test l ≈ mean((w .* xs .+ b .- ys) .^ 2) rtol = 1e-12
        r = w .* xs .+ b .- ys
        w, b = w - 0.2 * 2 * mean(r .* xs), b - 0.2 * 2 * mean(r)                      # Julia's GD step
        @test run(sess, kernel)[1] ≈ w rtol = 1e-12
        @test run(sess, bias)[1] ≈ b rtol = 1e-12
    end
    # each replica ran its copy of the model on its own GPU, on half of the batch
    ev = profile_events()
    mm(i) = unique([e.device for e in ev if e.kind === :op && startswith(e.name, "replica_$i/") && e.op == "MatMul"])
    @test mm(0) == [GPU0]
    @test mm(1) == ["/job:localhost/replica:0/task:0/device:GPU:1"]
    @test unique([e.device for e in ev if e.op == "ApplyGradientDescent"]) == [CPU0]
    for _ in 1:200
        run(sess, train.train_op, feeds...)
    end
    @test run(sess, kernel)[1] ≈ 2.0 atol = 1e-6
    @test run(sess, bias)[1] ≈ 1.0 atol = 1e-6
end
