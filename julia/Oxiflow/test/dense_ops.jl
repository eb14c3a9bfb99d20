# floor, % / mod / rem, fld / div(.., RoundDown) (Floor, FloorMod, FloorDiv), svd (Svd) and
# the Adagrad, Adadelta and AdagradDA optimizers. Oracles: Julia Base (`mod` is Python's `%`,
# `fld` its `//`), LinearAlgebra (`svdvals`, `svd`), central finite differences (fd.jl), and
# each optimizer's update rule (TF's training_ops.cc) written out in plain Julia.

@testset "floor, %, mod, fld match Julia Base" begin
    reset_default_graph()
    s = Session()
    A = [-7.5 7.5 -7.0 7.0; 6.25 -6.25 0.0 5.5]
    B = [3.0 -3.0 -3.0 3.0; 2.0 2.0 4.0 -7.0]
    a, b = constant(A), constant(B)
    @test run(s, a % b) == mod.(A, B)
    @test run(s, mod(a, b)) == mod.(A, B)
    @test run(s, rem(a, b)) == mod.(A, B)          # on tensors `%` is Python's, not Julia's rem
    @test run(s, a % b) != rem.(A, B)
    @test run(s, fld(a, b)) == fld.(A, B)
    @test run(s, div(a, b, RoundDown)) == fld.(A, B)
    @test run(s, floor(a)) == floor.(A)
    @test run(s, floor.(a)) == floor.(A)
    # numbers and arrays take the tensor's dtype; broadcasting; dotted forms
    @test run(s, a % 2) == mod.(A, 2.0)
    @test run(s, 10.0 % b) == mod.(10.0, B)
    @test run(s, a .% 2) == mod.(A, 2.0)
    @test run(s, mod.(a, -2)) == mod.(A, -2.0)
    @test run(s, fld.(a, 2)) == fld.(A, 2.0)
    R = [1.5 -2.0 3.0 -4.0]
    @test run(s, mod(a, R)) == mod.(A, R)
    @test run(s, fld(A, constant(R))) == fld.(A, R)
    A32, B32 = Float32.(A), Float32.(B)
    r = run(s, constant(A32) % constant(B32))
    @test eltype(r) == Float32 && r == mod.(A32, B32)
    @test run(s, floor(constant(A32))) == floor.(A32)
    # integers (Int32, Int64): exact
    Iv = [-7 7 -7 7 0 9; 5 -5 13 -13 1 -1]
    Jv = [3 -3 -3 3 4 2; 2 2 -4 -4 7 1]
    for T in (Int32, Int64)
        ti, tj = constant(T.(Iv)), constant(T.(Jv))
        r = run(s, ti % tj)
        @test eltype(r) == T && r == mod.(T.(Iv), T.(Jv))
        @test run(s, fld(ti, tj)) == fld.(T.(Iv), T.(Jv))
        @test run(s, div(ti, tj, RoundDown)) == fld.(T.(Iv), T.(Jv))
        @test run(s, ti % 4) == mod.(T.(Iv), T(4))
        @test run(s, -9 % tj) == mod.(T(-9), T.(Jv))
    end
    # integer division by zero: an error naming the op, and the session stays usable
    e = try; run(s, constant([1, 2]) % constant([1, 0])); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("Integer division by zero", e.msg) && occursin("FloorMod", e.msg)
    e = try; run(s, fld(constant(Int32[1, 2]), Int32(0))); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("Integer division by zero", e.msg) && occursin("FloorDiv", e.msg)
    @test run(s, a % b) == mod.(A, B)
    e = try; floor(constant([1, 2])); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("Floor", e.msg)
    e = try; constant([1, 2]) % 1.5; nothing; catch err; err; end     # 1.5 does not fit Int64
    @test e isa OxiflowError
end

@testset "isnan, isinf, isfinite match Julia Base, f32 and f64" begin
    reset_default_graph()
    s = Session()
    X = [0.0 -0.0 1.5; Inf -Inf NaN; floatmax(Float64) 5e-324 -2.0]
    for T in (Float64, Float32)
        x = constant(T.(X))
        for (f, tff) in ((isnan, tf.math.is_nan), (isinf, tf.math.is_inf), (isfinite, tf.math.is_finite))
            y = f.(x)
            @test y.dtype == Bool && size(y) == (3, 3)
            @test run(s, y) == f.(T.(X))
            @test run(s, tff(x)) == f.(T.(X))
        end
    end
    @test run(s, tf.is_nan(constant([NaN, 1.0]))) == [true, false]
    e = try; isnan(constant([1, 2])); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("IsNan", e.msg)
    @test run(s, isfinite(constant(1.0))) == true    # the session is still usable
end

@testset "gradient of % against finite differences; floor and fld pass none" begin
    reset_default_graph()
    X0 = [2.3 -1.7 0.4; -3.1 5.2 1.1]
    Y0 = [0.9 -1.3 0.7; 1.6 -2.2 -0.45]
    W = [0.5 1.5 -1.0; 2.0 0.25 1.0]
    @test all(q -> 0.05 < q - floor(q) < 0.95, X0 ./ Y0)     # clear of the jumps of mod
    x = Variable(X0); y = Variable(Y0)
    loss = sum(W .* (x % y)) + sum(mod(x, 1.5) .* W)
    gx, gy = gradients(loss, [x, y])
    s = Session(); init(s)
    @test run(s, loss) ≈ sum(W .* mod.(X0, Y0)) + sum(mod.(X0, 1.5) .* W)
    @test run(s, gx) ≈ fd_grad(X -> sum(W .* mod.(X, Y0)) + sum(mod.(X, 1.5) .* W), X0) rtol = 1e-6
    @test run(s, gy) ≈ fd_grad(Y -> sum(W .* mod.(X0, Y)), Y0) rtol = 1e-6
    # floor and fld are piecewise constant: no gradient flows, and that is not an error
    @test gradients(sum(floor(x) + fld(x, y)), x) === nothing
    g2 = gradients(sum(floor(x) .* x), x)
    @test run(s, g2) == floor.(X0)
end

@testset "svd: factors, svdvals, batches, gradients ($dev)" for (dev, mk) in (("CPU", () -> Session(GPU=0)), ("emulated GPU", () -> Session()))
    reset_default_graph()
    s = mk()
    Sq = [2.0 -1.0 0.5; 0.3 1.5 -0.7; 1.2 0.4 2.2]
    Tall = [1.0 2.0 0.5; -0.5 1.0 3.0; 2.0 -1.0 0.0; 0.25 0.75 -1.5]
    Wide = Matrix(Tall')
    for M in (Sq, Tall, Wide)
        r = svd(constant(M))
        S, U, V, Vt = run(s, [r.S, r.U, r.V, r.Vt])
        m, n = size(M); p = min(m, n)
        @test size(S) == (p,) && size(U) == (m, p) && size(V) == (n, p) && size(Vt) == (p, n)
        @test S ≈ svdvals(M) rtol = 1e-12
        @test issorted(S; rev=true) && all(S .>= 0)
        @test U * diagm(S) * Vt ≈ M rtol = 1e-12
        @test U' * U ≈ Matrix(I, p, p) atol = 1e-12
        @test V' * V ≈ Matrix(I, p, p) atol = 1e-12
        @test Vt == Matrix(V')
        @test run(s, r.U * diagm(r.S) * r.Vt) ≈ M rtol = 1e-12      # ADCME's reconstruction
    end
    # Float32, and a batch [2, 3, 2] of 3×2 matrices
    S32 = run(s, svd(constant(Float32.(Tall))).S)
    @test eltype(S32) == Float32
    @test S32 ≈ svdvals(Float32.(Tall)) rtol = 1e-5
    Bt = cat([1.0 2.0; 3.0 -1.0; 0.5 0.0], [0.2 -1.0; 1.0 1.0; 2.0 0.3]; dims=3)
    Bt = permutedims(Bt, (3, 1, 2))                                # (batch, m, n)
    rb = svd(constant(Bt))
    Sb, Ub, Vtb = run(s, [rb.S, rb.U, rb.Vt])
    @test size(Sb) == (2, 2) && size(Ub) == (2, 3, 2) && size(Vtb) == (2, 2, 2)
    for k in 1:2
        @test Sb[k, :] ≈ svdvals(Bt[k, :, :]) rtol = 1e-12
        @test Ub[k, :, :] * diagm(Sb[k, :]) * Vtb[k, :, :] ≈ Bt[k, :, :] rtol = 1e-12
    end
    # gradients: sum of singular values, and a sign-invariant function of U and V
    W1 = [0.5 1.0 -0.5; 1.5 -1.0 0.25; 0.3 0.7 1.1; -0.2 0.9 0.4]
    W2 = [1.0 -0.3 0.8; 0.2 0.6 -1.2; 0.9 1.4 0.1]
    x = Variable(Tall)
    r = svd(x)
    g_s = gradients(sum(r.S), x)
    g_uv = gradients(sum((r.U .* r.U) .* W1) + sum((r.V .* r.V) .* W2) + sum(r.S .* [1.0, -2.0, 0.5]), x)
    init(s)
    @test run(s, g_s) ≈ fd_grad(M -> sum(svdvals(M)), Tall) rtol = 1e-6
    f_uv(M) = (F = LinearAlgebra.svd(M); sum((F.U .* F.U) .* W1) + sum((F.V .* F.V) .* W2) + sum(F.S .* [1.0, -2.0, 0.5]))
    @test run(s, g_uv) ≈ fd_grad(f_uv, Tall) rtol = 1e-5
    w = Variable(Wide)
    g_fro = gradients(sum(svd(w).S .^ 2), w)
    init(s)
    @test run(s, g_fro) ≈ 2 * Wide rtol = 1e-10                   # d|A|_F^2 / dA = 2A
    # errors name the op; CPU only
    e = try; svd(constant([1.0, 2.0])); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("Svd", e.msg)
    e = try; svd(constant([1 2; 3 4])); nothing; catch err; err; end
    @test e isa OxiflowError && occursin("Svd", e.msg)
    if dev == "emulated GPU"
        rs = svd(constant(Sq)).S
        run(s, rs)
        @test assigned_device(s, rs) == CPU0
    end
end


@testset "Adagrad, Adadelta, AdagradDA optimizers follow their update rules" begin
    # Adagrad: accum += g^2; x -= lr * g / sqrt(accum)
    vals, op, s = step_values(() -> AdagradOptimizer(0.1; initial_accumulator_value=0.2), 3)
    x = [1.0, -2.0]; acc = fill(0.2, 2)
    for k in 1:3
        g = gradq(x); acc += g .^ 2; x -= 0.1 * g ./ sqrt.(acc)
        @test vals[k+1] ≈ x rtol = 1e-12
    end
    @test op.op.name == "Adagrad"
    @test run(s, tensor("Variable/Adagrad")) ≈ acc rtol = 1e-12
    @test tensor("Adagrad/update_Variable/ApplyAdagrad").op.type == "ApplyAdagrad"
    @test tensor("Variable/Adagrad").op.colocation_groups == ["loc:@Variable"]
    @test !(tensor("Variable/Adagrad") in get_collection(TRAINABLE_VARIABLES))
    @test assigned_device(s, tensor("Adagrad/update_Variable/ApplyAdagrad")) == GPU0

    # Adadelta: TF's rule, learning rate included
    vals, op, s = step_values(() -> AdadeltaOptimizer(1.0; rho=0.9, epsilon=1e-6), 3)
    x = [1.0, -2.0]; a = zeros(2); au = zeros(2)
    for k in 1:3
        g = gradq(x)
        a = 0.9 * a + 0.1 * g .^ 2
        u = sqrt.(au .+ 1e-6) ./ sqrt.(a .+ 1e-6) .* g
        au = 0.9 * au + 0.1 * u .^ 2
        x -= 1.0 * u
        @test vals[k+1] ≈ x rtol = 1e-12
    end
    @test run(s, tensor("Variable/Adadelta")) ≈ a && run(s, tensor("Variable/Adadelta_1")) ≈ au
    @test tensor("Adadelta/lr").op.type == "Const" && tensor("Adadelta/rho").op.type == "Const"
    @test tensor("Adadelta/update_Variable/ApplyAdadelta").op.type == "ApplyAdadelta"
    vals, _, _ = step_values(() -> AdadeltaOptimizer(), 1)           # defaults: lr 1e-3, rho 0.95, eps 1e-8
    g = gradq([1.0, -2.0]); a = 0.05 * g .^ 2
    @test vals[2] ≈ [1.0, -2.0] - 1e-3 * sqrt(1e-8) ./ sqrt.(a .+ 1e-8) .* g rtol = 1e-12

    # AdagradDA: closed form from the accumulated gradients; the op sees global_step + 1, and
    # the user (not the update) increments global_step
    for (l1, l2) in ((0.0, 0.0), (0.6, 0.1))
        local gs
        make = () -> (gs = Variable(0; name="global_step", trainable=false);
                      AdagradDAOptimizer(0.5, gs; initial_gradient_squared_accumulator_value=0.3,
                                         l1_regularization_strength=l1, l2_regularization_strength=l2))
        bump = (s, k) -> (k == 2 && run(s, assign(gs, gs + 2)))  # global_step 0, 0, 2 before steps 1, 2, 3
        vals, op, s = step_values(make, 3; between=bump)
        x = [1.0, -2.0]; ga = zeros(2); gg = fill(0.3, 2)
        for (k, t) in zip(1:3, (1, 1, 3))
            g = gradq(x); ga += g; gg += g .^ 2
            den = l2 * t * 0.5 .+ sqrt.(gg)
            x = l1 > 0 ? -0.5 * sign.(ga) .* max.(abs.(ga) .- l1 * t, 0) ./ den : -0.5 * ga ./ den
            @test vals[k+1] ≈ x rtol = 1e-12
        end
        @test run(s, gs) == 2
        @test run(s, tensor("Variable/AdagradDA")) ≈ ga && run(s, tensor("Variable/AdagradDA_1")) ≈ gg
        upd = tensor("AdagradDA/update_Variable/ApplyAdagradDA")
        @test upd.op.type == "ApplyAdagradDA"
        @test assigned_device(s, upd) == CPU0                      # no GPU kernel: the variable follows
        @test assigned_device(s, tensor("Variable")) == CPU0
    end
    @test_throws OxiflowError AdagradDAOptimizer(0.1, constant(1.0))
    @test_throws OxiflowError AdagradOptimizer(0.1; initial_accumulator_value=0.0)
end
