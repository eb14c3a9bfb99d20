# The main-job examples that run with the ops of this package: examples/diabetes_regression.jl
# (least squares by Adam and BFGS! against Julia's closed form). Its data lives in
# ../shared/data beside the repository; without it the test says so and is skipped.

module DiabetesExample
include(joinpath(@__DIR__, "..", "..", "..", "examples", "diabetes_regression.jl"))
end

@testset "example: diabetes least squares" begin
    dir = DiabetesExample.diabetes_dir()
    if dir === nothing
        println("examples.jl: diabetes data not found (../shared/data or ENV[\"OXIFLOW_DATA\"]); test skipped")
        @test_skip "diabetes data"
    else
        X, y = DiabetesExample.load_diabetes(dir)
        @test size(X) == (442, 10) && length(y) == 442
        exact, adam, bfgs = DiabetesExample.diabetes_fit(X, y)
        @test DiabetesExample.relerr(bfgs, exact) < 1e-6
        @test DiabetesExample.relerr(adam, exact) < 1e-6
    end
end
