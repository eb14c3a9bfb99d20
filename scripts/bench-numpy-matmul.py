#!/usr/bin/env python3
"""NumPy (OpenBLAS) reference for the `matmul` criterion bench: `a @ b` on square n x n
matrices, Float32 and Float64, result freshly allocated each call (as Oxiflow's kernel
does). Prints the median time of `reps` calls and GFLOP/s = 2 n^3 / time.

Usage: python3 scripts/bench-numpy-matmul.py   (needs `pip install numpy`)
"""
import time

import numpy as np


def bench(n, dtype, reps):
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, (n, n)).astype(dtype)
    b = rng.uniform(-1, 1, (n, n)).astype(dtype)
    a @ b  # warm-up (thread pool start, page faults)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t)
    t = sorted(times)[len(times) // 2]
    return t, 2 * n**3 / t / 1e9


def main():
    cfg = np.show_config(mode="dicts") if "mode" in np.show_config.__code__.co_varnames else {}
    blas = cfg.get("Build Dependencies", {}).get("blas", {})
    print(f"numpy {np.__version__}, BLAS: {blas.get('name', '?')} {blas.get('version', '')}")
    for dtype in ("float32", "float64"):
        for n in (256, 1024, 2048):
            reps = {256: 200, 1024: 20, 2048: 10}[n]
            t, gflops = bench(n, dtype, reps)
            print(f"numpy {dtype} n={n:5d}: {t * 1e3:9.3f} ms  {gflops:7.1f} GFLOP/s (median of {reps})")


if __name__ == "__main__":
    main()
