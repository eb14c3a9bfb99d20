"""The `pinn` group of `make bench-peers` (peers.py imports it; oxiflow.jl's bench_pinn is
Oxiflow's side): one Adam step of a physics-informed network, ADCME's `fc` written in each
framework.

    pinn_step   u(x) = fc(x, [20, 20, 20, 1], θ) (tanh; layer (m, n) reads the next m*n
                entries of the vector θ row by row as W, then n biases, as ADCME's `fc`)
                on N = 1024 points x_i = (i - 1/2)/N, f = π² sin(πx);
                loss = mean((u_xx + f)²) + sum(u(0)² + u(1)²), u_xx by differentiating
                u twice in x (tf.gradients twice in TF1; autograd.grad with create_graph in
                torch; jax.grad of the sum twice in JAX; Oxiflow's gradients twice);
                one Adam step (lr 1e-3, TF's defaults) of θ. steps/s. θ starts from the
                same formula everywhere (theta0), so every framework reports the same
                starting loss in "note" (31.3555 in float64).
"""
import math

N = 1024
WIDTHS = (1, 20, 20, 20, 1)


def theta0(np, dt):
    """θ at the start: weight k of the vector sin(1.3 k + 0.4) · sqrt(3/m) (layer (m, n)),
    biases 0 (deterministic, so that every framework starts from the same network)."""
    parts, k = [], 0
    for m, n in zip(WIDTHS[:-1], WIDTHS[1:]):
        parts += [np.sin(1.3 * np.arange(k, k + m * n) + 0.4) * math.sqrt(3.0 / m), np.zeros(n)]
        k += m * n + n
    return np.concatenate(parts).astype(dt)


def data(np, dt):
    x = ((np.arange(1, N + 1) - 0.5) / N).reshape(N, 1)
    return x.astype(dt), (math.pi ** 2 * np.sin(math.pi * x)).astype(dt), np.array([[0.0], [1.0]], dtype=dt)


def net(th, z, matmul, tanh, reshape):
    """ADCME's fc(z, WIDTHS[1:], th) with one framework's ops."""
    k = 0
    for i, (m, n) in enumerate(zip(WIDTHS[:-1], WIDTHS[1:])):
        z = matmul(z, reshape(th[k:k + m * n], (m, n))) + th[k + m * n:k + m * n + n]
        if i < len(WIDTHS) - 2:
            z = tanh(z)
        k += m * n + n
    return z


def run(fw, dtypes, emit, time_calls, ncores):
    """Emits pinn_step for framework `fw` ("tf1", "torch" or "jax") in each of `dtypes`."""
    import numpy as np
    for dt in dtypes:
        X, F, B = data(np, dt)
        step, loss0, sync, ver = globals()["_" + fw](np, dt, X, F, B, ncores)
        t = time_calls(step, warmup_s=2.0, measure_s=2.0, sync=sync)
        emit(fw, "pinn_step", dt, 1 / t, "steps/s", ver, note=f"loss at the start {loss0:.6g}")


def _tf1(np, dt, X, F, B, ncores):
    import tensorflow as tf
    tf1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        th = tf1.Variable(theta0(np, dt))
        x = tf.constant(X)
        u = net(th, x, tf.matmul, tf.tanh, tf.reshape)
        uxx = tf.gradients(tf.gradients(u, x)[0], x)[0]
        loss = tf.reduce_mean((uxx + F) ** 2) + tf.reduce_sum(net(th, tf.constant(B), tf.matmul, tf.tanh, tf.reshape) ** 2)
        train = tf1.train.AdamOptimizer(1e-3).minimize(loss)
        init = tf1.global_variables_initializer()
    cfg = tf1.ConfigProto(intra_op_parallelism_threads=ncores, inter_op_parallelism_threads=ncores)
    s = tf1.Session(graph=g, config=cfg)
    s.run(init)
    return (lambda: s.run(train)), float(s.run(loss)), None, tf.__version__


def _torch(np, dt, X, F, B, ncores):
    import torch
    th = torch.tensor(theta0(np, dt), requires_grad=True)
    x = torch.from_numpy(X).requires_grad_(True)
    f, xb = torch.from_numpy(F), torch.from_numpy(B)
    opt = torch.optim.Adam([th], lr=1e-3)

    def loss_fn():
        u = net(th, x, torch.matmul, torch.tanh, torch.reshape)
        ux = torch.autograd.grad(u.sum(), x, create_graph=True)[0]
        uxx = torch.autograd.grad(ux.sum(), x, create_graph=True)[0]
        return ((uxx + f) ** 2).mean() + (net(th, xb, torch.matmul, torch.tanh, torch.reshape) ** 2).sum()

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn().backward()
        opt.step()
    return step, loss_fn().item(), None, torch.__version__


def _jax(np, dt, X, F, B, ncores):
    import jax
    import jax.numpy as jnp
    x, f, xb = jnp.asarray(X), jnp.asarray(F), jnp.asarray(B)
    u = lambda th, z: net(th, z, jnp.matmul, jnp.tanh, jnp.reshape)

    def loss_fn(th):
        ux = jax.grad(lambda z: u(th, z).sum())
        uxx = jax.grad(lambda z: ux(z).sum())(x)
        return jnp.mean((uxx + f) ** 2) + jnp.sum(u(th, xb) ** 2)
    b1, b2, eps = 0.9, 0.999, 1e-8

    @jax.jit
    def adam(th, m, v, t):    # TF's Adam (no optax in the venv): the same update
        g = jax.grad(loss_fn)(th)
        t = t + 1
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        lr = 1e-3 * jnp.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        return th - lr * m / (jnp.sqrt(v) + eps), m, v, t
    th = jnp.asarray(theta0(np, dt))
    state = [th, jnp.zeros_like(th), jnp.zeros_like(th), jnp.asarray(0.0, dtype=dt)]

    def step():
        state[:] = adam(*state)
    return step, float(jax.jit(loss_fn)(th)), (lambda: jax.block_until_ready(state[0])), jax.__version__
