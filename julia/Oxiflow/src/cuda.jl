"""
    cuda_status() -> NamedTuple

What Oxiflow's CUDA layer found on this machine: `driver` (`"present"` or `"absent"`),
`driver_info` (the CUDA driver version, e.g. `"13000"`, or why no driver loaded), `gpus`
(one `(ordinal, description, memory_bytes, uuid)` per real GPU, `description` as in TF's
`Device mapping:` lines) and `reason` (why there is no real GPU, or `nothing`).
Emulated GPUs (`use_emulated_gpus`) are not listed here; when they are asked for, sessions
use them instead of real GPUs.
"""
cuda_status() = oxf_cuda_status()
