"""The `conv` group of `make bench-peers` (peers.py imports it; oxiflow.jl's bench_conv is
Oxiflow's side): a 2-D convolution, NHWC input x (32 × 28 × 28 × 8) and HWIO filter f
(3 × 3 × 8 × 16), stride 1, SAME padding, both held by the framework (TF1 and Oxiflow
variables; torch tensors; JAX arrays passed to the jitted function).

    conv_fwd   sum(conv(x, f)), fetched: ms per call.
    conv_grad  the gradients of sum(conv(x, f)²) with respect to x and f, fetched /
               returned: ms per call.

x is sin(0.37 i + 0.11) and f is cos(0.23 i + 0.5) / 6 over their row-major element index i,
so every framework computes the same sums (the loss at the start is in "note"). torch runs
its native NCHW layout (x and f permuted once, before timing); the others NHWC. Oxiflow's
variables hold Julia's column-major arrays of the same NHWC sizes.
"""
import math

N, H, W, C, K, OC = 32, 28, 28, 8, 3, 16


def data(np, dt):
    """x (N, H, W, C) and f (K, K, C, OC), row-major, by the formulas above."""
    x = np.sin(0.37 * np.arange(N * H * W * C) + 0.11).reshape(N, H, W, C).astype(dt)
    f = (np.cos(0.23 * np.arange(K * K * C * OC) + 0.5) / 6).reshape(K, K, C, OC).astype(dt)
    return x, f


def run(fw, dtypes, emit, time_calls, ncores):
    """Emits conv_fwd and conv_grad for framework `fw` ("tf1", "torch" or "jax") in each of `dtypes`."""
    import numpy as np
    for dt in dtypes:
        X, F = data(np, dt)
        fwd, grad, loss0, sync, ver = globals()["_" + fw](np, X, F, ncores)
        t = time_calls(fwd, sync=sync)
        emit(fw, "conv_fwd", dt, t * 1e3, "ms", ver, note=f"loss at the start {loss0:.6g}")
        t = time_calls(grad, sync=sync)
        emit(fw, "conv_grad", dt, t * 1e3, "ms", ver, note=f"loss at the start {loss0:.6g}")


def _tf1(np, X, F, ncores):
    import tensorflow as tf
    tf1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        x, f = tf1.Variable(X), tf1.Variable(F)
        y = tf.nn.conv2d(x, f, [1, 1, 1, 1], "SAME")
        s1, loss = tf.reduce_sum(y), tf.reduce_sum(y * y)
        grads = tf.gradients(loss, [x, f])
        init = tf1.global_variables_initializer()
    cfg = tf1.ConfigProto(intra_op_parallelism_threads=ncores, inter_op_parallelism_threads=ncores)
    s = tf1.Session(graph=g, config=cfg)
    s.run(init)
    return (lambda: s.run(s1)), (lambda: s.run(grads)), float(s.run(loss)), None, tf.__version__


def _torch(np, X, F, ncores):
    import torch
    torch.set_num_threads(ncores)
    x = torch.from_numpy(np.ascontiguousarray(X.transpose(0, 3, 1, 2))).requires_grad_()
    f = torch.from_numpy(np.ascontiguousarray(F.transpose(3, 2, 0, 1))).requires_grad_()
    conv = lambda: torch.nn.functional.conv2d(x, f, padding=K // 2)

    def fwd():
        with torch.no_grad():
            return float(conv().sum())

    def grad():
        y = conv()
        return [g.numpy() for g in torch.autograd.grad((y * y).sum(), [x, f])]
    with torch.no_grad():
        loss0 = float((conv() ** 2).sum())
    return fwd, grad, loss0, None, torch.__version__


def _jax(np, X, F, ncores):
    import jax
    import jax.numpy as jnp
    x, f = jnp.asarray(X), jnp.asarray(F)
    conv = lambda x, f: jax.lax.conv_general_dilated(x, f, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    s1 = jax.jit(lambda x, f: jnp.sum(conv(x, f)))
    loss = lambda x, f: jnp.sum(conv(x, f) ** 2)
    g = jax.jit(jax.grad(loss, argnums=(0, 1)))
    out = [None]

    def fwd():
        out[0] = s1(x, f)

    def grad():
        out[0] = g(x, f)
    return fwd, grad, float(jax.jit(loss)(x, f)), (lambda: jax.block_until_ready(out[0])), jax.__version__
