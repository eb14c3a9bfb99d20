"""
    cuda_status() -> NamedTuple

What Oxiflow's CUDA layer found on this machine: `driver` (`"present"` or `"absent"`),
`driver_info` (the CUDA driver version, e.g. `"13000"`, or why no driver loaded), `gpus`
(one `(ordinal, description, memory_bytes, uuid)` per real GPU, `description` as in TF's
`Device mapping:` lines) and `reason` (why there is no real GPU, or `nothing`).
Emulated GPUs (`use_emulated_gpus`) are not listed here; when they are asked for, sessions
use them instead of real GPUs.
"""
function cuda_status()
    driver, info, reason = "absent", "", nothing
    gpus = Tuple{Int,String,Int,String}[]
    for line in split(oxf_cuda_status(), '\n'; keepempty=false)
        f = split(line, '\t')
        if f[1] == "driver"
            driver, info = String(f[2]), String(f[3])
        elseif f[1] == "gpu"
            push!(gpus, (parse(Int, f[2]), String(f[3]), parse(Int, f[4]), String(f[5])))
        elseif f[1] == "reason"
            reason = String(f[2])
        end
    end
    return (driver=driver, driver_info=info, gpus=gpus, reason=reason)
end
