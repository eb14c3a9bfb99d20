# The main-job examples that run with the ops of this package: examples/diabetes_regression.jl
# (least squares by Adam and BFGS! against Julia's closed form). Its data lives in
# ../shared/data beside the repository (or above it); without it the test fails.

module DiabetesExample
include(joinpath(@__DIR__, "..", "..", "..", "examples", "diabetes_regression.jl"))
end

@testset "example: diabetes least squares" begin
    dir = DiabetesExample.diabetes_dir()
    if dir === nothing
        # the project's data is part of its environment: a missing file is a failure, not a skip
        @error "diabetes data not found: the example's test needs shared/data/diabetes_*.csv.gz beside the repository (or ENV[\"OXIFLOW_DATA\"])"
        @test dir !== nothing
    else
        X, y = DiabetesExample.load_diabetes(dir)
        @test size(X) == (442, 10) && length(y) == 442
        exact, adam, bfgs = DiabetesExample.diabetes_fit(X, y)
        @test DiabetesExample.relerr(bfgs, exact) < 1e-6
        @test DiabetesExample.relerr(adam, exact) < 1e-6
    end
end
