# fft/ifft throughput: Oxiflow's FFT and FFT2D (rustfft, CPU) against NumPy's numpy.fft
# (pocketfft) on the same complex data in the same run: a 2^16-point and a 1000-point
# (not a power of two) vector, a batch of 256 rows of 1024 points (FFT over each row, TF's
# tf.signal.fft of a matrix), and a 512 × 512 2-D transform. Median wall time of the run
# (Oxiflow: feed, transform, fetch; NumPy: the call), in ms. NumPy comes from the python in
# .deps/scipy (make setup) or OXIFLOW_NUMPY_PYTHON; without one only Oxiflow's column prints.
# Figures: docs/performance.md, "FFT".
#   julia --project=julia/Oxiflow bench/fft.jl
using Oxiflow, Printf

include("timing.jl")

cases = [("FFT, 65536 points", (65536,), "np.fft.fft(x)", false),
         ("FFT, 1000 points", (1000,), "np.fft.fft(x)", false),
         ("FFT of 256 rows of 1024", (256, 1024), "np.fft.fft(x, axis=-1)", true),
         ("FFT2D, 512 x 512", (512, 512), "np.fft.fft2(x)", false)]

python = get(ENV, "OXIFLOW_NUMPY_PYTHON", joinpath(@__DIR__, "..", ".deps", "scipy", "bin", "python"))
function numpy_ms(shape, call)
    isfile(python) || return NaN
    dims = join(shape, ", ")
    script = """
    import numpy as np, timeit
    x = (np.random.rand($dims) + 1j * np.random.rand($dims)).astype(np.complex128)
    ts = timeit.repeat(lambda: $call, number=1, repeat=200)
    print(sorted(ts)[len(ts) // 2] * 1e3)
    """
    return parse(Float64, read(`$python -c $script`, String))
end

@printf("%-26s %12s %12s %8s\n", "case", "Oxiflow ms", "NumPy ms", "ratio")
for (name, shape, call, rows) in cases
    reset_default_graph()
    # a matrix's rows in TF's (row-major) order: the Julia matrix is its transpose's storage
    x = placeholder(ComplexF64; shape=collect(shape))
    y = rows ? Oxiflow.add_op("FFT", [x]) : fft(x)
    s = Session()
    v = rand(ComplexF64, shape...)
    t = median_us(() -> run(s, y, x => v); n=200, warmup=10) / 1e3
    np = numpy_ms(shape, call)
    @printf("%-26s %12.3f %12.3f %8.2f\n", name, t, np, np / t)
end
