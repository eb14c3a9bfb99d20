"""
    Oxiflow

Device placement, autodiff and sessions for ADCME-style Julia programs, on a Rust engine
(TensorFlow 1.x semantics, no Python). Build a graph with `constant`, `placeholder`,
`Variable` and Base operators; place it with `@cpu`, `@gpu`, `@pywith tf.device(...)` or a
device function; differentiate with `gradients(ys, xs; colocate=true)`; run it in a
`Session`; see it with `run_profile` + `save_profile`.
"""
module Oxiflow

# The package's own methods compile at LLVM optimization level 1 (Julia's default is 2).
# Its Julia code builds graphs and calls the library, where all the arithmetic runs, so the
# extra optimization only costs compile time in every fresh session: with level 1 a small
# program's first graph + run takes 1.7-2.2 s instead of 2.3-3.2 s, and an MPI test job on
# 2 ranks 8 % less; building a 10k-op graph (2.2-3.0 µs per op) and `run` on a small graph
# did not measurably slow down. Users' own code keeps its level (`julia -O`).
Base.Experimental.@optlevel 1

using Libdl
using LinearAlgebra
using Printf
using SparseArrays
using Statistics

export Tensor, Operation, NodeDef, OxiflowError,
       constant, placeholder, Variable, cast, get_dtype,
       @cpu, @gpu, @pywith, tf, pybuiltin, colocate_with, name_scope, control_dependencies,
       gradients, gradient_checkpointing, Session, init, global_variables_initializer, run_profile, save_profile, profile_events, profile_copies,
       reset_default_graph, list_physical_devices, has_gpu, assigned_device, use_emulated_gpus,
       get_collection, add_to_collection, GLOBAL_VARIABLES, TRAINABLE_VARIABLES, UPDATE_OPS, save, load
export rvec, cvec, squeeze, concat, stack, unstack, pad, ones_like, zeros_like, convert_to_tensor, set_shape
export group, assign, independent, tensor, get_variable, variable_scope, AUTO_REUSE, gpu_info, get_gpu
export cuda_status, is_variable, group_assign, stop_gradient, tensorname, use_gpu
export jacobian, hessian, hessian_vector, gradient_magnitude, gradients_colocate, register
export Diary, scalar, activate, SummaryWriter, add_summary
export GradientDescentOptimizer, MomentumOptimizer, AdamOptimizer, RMSPropOptimizer,
       AdagradOptimizer, AdadeltaOptimizer, AdagradDAOptimizer,
       minimize, apply_gradients, compute_gradients, BFGS!, lbfgsb,
       ScipyOptimizerInterface, ScipyOptimizerMinimize, CustomOptimizer, Optimize!

include("capi.jl")
include("graph.jl")
include("control_flow.jl")
include("ops.jl")
include("shapes.jl")
include("end_index.jl")
include("indexing.jl")
include("device.jl")
include("gradients.jl")
include("custom_gradient.jl")
include("variables.jl")
include("initializers.jl")
include("optimizers.jl")
include("session.jl")
include("matfile.jl")
include("config.jl")
include("cuda.jl")
include("profile.jl")
include("summary.jl")
include("bfgs.jl")
include("external_optim.jl")
include("math.jl")
include("complex.jl")
include("linalg.jl")
include("sorting.jl")
include("interp.jl")
include("rbf.jl")
include("scatter.jl")
include("sparse.jl")
include("ragged.jl")
include("sparse_solve.jl")
include("sparse_assembly.jl")
include("pcl.jl")
include("distributions.jl")
include("ot.jl")
include("uq.jl")
include("gan.jl")
include("flows.jl")
include("flows_spline.jl")
include("mpi.jl")
include("mpi_p2p.jl")
include("ode.jl")
include("ode_alpha.jl")
include("einsum.jl")
include("layers.jl")
include("nn.jl")
include("options.jl")
include("keras.jl")
include("conv.jl")
include("conv_layers.jl")
include("pool.jl")
include("newton.jl")
include("bfgs_graph.jl")
include("kit.jl")
include("kit_views.jl")
include("tf_compat.jl")
include("replicas.jl")
include("mpi_training.jl")
include("mpi_ps.jl")
include("show.jl")
include("precompile.jl")

function __init__()
    select_blas_library()
    load_library()
    DEVICE_FN_TRAMPOLINE[] = @cfunction(_device_fn_trampoline, Int32, (Ptr{Cvoid}, Ptr{OxNodeDef}, Ptr{Cstring}))
    DEFAULT_GRAPH[] = Graph()
    return nothing
end

# type inference of the common path into the package image (src/precompile.jl)
_precompile_()

end # module
