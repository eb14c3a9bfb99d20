# The CUDA layer as Julia sees it: never an error for lack of a GPU, and a reason when
# there is none. On a GPU machine (driver present) the real GPUs must be listed.
@testset "cuda_status" begin
    s = cuda_status()
    @test s.driver in ("present", "absent")
    if s.driver == "absent"
        @test occursin("libcuda", s.driver_info) || occursin("OXIFLOW_DISABLE_CUDA", s.driver_info)
        @test isempty(s.gpus)
        @test s.reason !== nothing && !isempty(s.reason)
        println("cuda_status: no CUDA driver here, real-GPU checks skipped (", s.reason, ")")
    else
        @test parse(Int, s.driver_info) >= 12000
        if isempty(s.gpus)
            @test s.reason !== nothing
        else
            for (i, desc, mem, uuid) in s.gpus
                @test occursin("compute capability", desc)
                @test mem > 0
                @test startswith(uuid, "GPU-")
            end
        end
    end
end
