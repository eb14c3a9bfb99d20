"""The `resnet` group of `make bench-peers` (peers.py imports it; oxiflow.jl's bench_resnet is
Oxiflow's side): one Adam step of ADCME's front-page network, `Resnet1D(10, num_blocks=10)`,
written in each framework.

    resnet_step  a Dense layer 64 -> 20, ten residual blocks x + L2(relu(L1(relu(x)))) of
                 Dense 20 -> 20 layers, a Dense layer 20 -> 10 (logits); loss the mean sparse
                 softmax cross-entropy over a batch of 64 (64 features, labels 0..9); one
                 Adam step (lr 1e-3, TF's defaults). The batch is fed from NumPy arrays at
                 every step, as ADCME's page feeds its MNIST batches (TF1: feed_dict;
                 torch: torch.from_numpy; JAX: the jitted step's arguments). steps/s. The
                 weights start from one formula (weights0), so every framework reports the
                 same starting loss in "note".
"""
import math

FEATURES, HIDDEN, CLASSES, BLOCKS, BATCH = 64, 20, 10, 10, 64


def shapes():
    """(in, out) of the 22 Dense layers, in the order they are applied."""
    return [(FEATURES, HIDDEN)] + [(HIDDEN, HIDDEN)] * (2 * BLOCKS) + [(HIDDEN, CLASSES)]


def weights0(np, dt):
    """Kernel j (row-major, in × out): entry k is sin(1.3 k + 0.7 j + 0.4) · sqrt(6/(in+out))
    (a Glorot-uniform range); biases 0."""
    out = []
    for j, (m, n) in enumerate(shapes()):
        w = np.sin(1.3 * np.arange(m * n) + 0.7 * j + 0.4) * math.sqrt(6.0 / (m + n))
        out += [w.reshape(m, n).astype(dt), np.zeros(n, dtype=dt)]
    return out


def batch(np, dt):
    """Features (64 × 64, row-major) 0.5 + 0.5 sin(0.37 i + 0.11), in [0, 1], and labels
    (7 i + 3) mod 10. (A fractional part, (0.37 i + 0.11) mod 1, hits integers such as i = 97,
    where rounding decides between 0 and 1.)"""
    i = np.arange(BATCH * FEATURES)
    x = (0.5 + 0.5 * np.sin(0.37 * i + 0.11)).reshape(BATCH, FEATURES).astype(dt)
    return x, ((7 * np.arange(BATCH) + 3) % CLASSES).astype(np.int64)


def net(p, x, matmul, relu):
    """The residual network on x with parameters p = [W0, b0, W1, b1, ...]."""
    lin = lambda h, j: matmul(h, p[2 * j]) + p[2 * j + 1]
    h = lin(x, 0)
    for b in range(BLOCKS):
        h = lin(relu(lin(relu(h), 1 + 2 * b)), 2 + 2 * b) + h
    return lin(h, 2 * BLOCKS + 1)


def run(fw, dtypes, emit, time_calls, ncores):
    """Emits resnet_step for framework `fw` ("tf1", "torch" or "jax") in each of `dtypes`."""
    import numpy as np
    for dt in dtypes:
        X, L = batch(np, dt)
        step, loss0, sync, ver = globals()["_" + fw](np, dt, X, L, ncores)
        t = time_calls(step, warmup_s=2.0, measure_s=2.0, sync=sync)
        emit(fw, "resnet_step", dt, 1 / t, "steps/s", ver, note=f"loss at the start {loss0:.6g}")


def _tf1(np, dt, X, L, ncores):
    import tensorflow as tf
    tf1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        p = [tf1.Variable(w) for w in weights0(np, dt)]
        x = tf1.placeholder(dt, [BATCH, FEATURES])
        lab = tf1.placeholder(tf.int64, [BATCH])
        logits = net(p, x, tf.matmul, tf.nn.relu)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=logits))
        train = tf1.train.AdamOptimizer(1e-3).minimize(loss)
        init = tf1.global_variables_initializer()
    cfg = tf1.ConfigProto(intra_op_parallelism_threads=ncores, inter_op_parallelism_threads=ncores)
    s = tf1.Session(graph=g, config=cfg)
    s.run(init)
    feed = {x: X, lab: L}
    return (lambda: s.run([train, loss], feed)), float(s.run(loss, feed)), None, tf.__version__


def _torch(np, dt, X, L, ncores):
    import torch
    p = [torch.tensor(w, requires_grad=True) for w in weights0(np, dt)]
    opt = torch.optim.Adam(p, lr=1e-3)
    ce = torch.nn.functional.cross_entropy

    def loss_fn(x, lab):
        return ce(net(p, x, torch.matmul, torch.relu), lab)

    def step():
        x, lab = torch.from_numpy(X), torch.from_numpy(L)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(x, lab)
        loss.backward()
        opt.step()
        return loss.item()
    return step, loss_fn(torch.from_numpy(X), torch.from_numpy(L)).item(), None, torch.__version__


def _jax(np, dt, X, L, ncores):
    import jax
    import jax.numpy as jnp

    def loss_fn(p, x, lab):
        logits = net(p, x, jnp.matmul, jax.nn.relu)
        return jnp.mean(jax.nn.logsumexp(logits, axis=1) - jnp.take_along_axis(logits, lab[:, None], axis=1)[:, 0])
    b1, b2, eps = 0.9, 0.999, 1e-8

    @jax.jit
    def adam(p, m, v, t, x, lab):    # TF's Adam (no optax in the venv): the same update
        loss, g = jax.value_and_grad(loss_fn)(p, x, lab)
        t = t + 1
        lr = 1e-3 * jnp.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        m = [b1 * mi + (1 - b1) * gi for mi, gi in zip(m, g)]
        v = [b2 * vi + (1 - b2) * gi * gi for vi, gi in zip(v, g)]
        p = [pi - lr * mi / (jnp.sqrt(vi) + eps) for pi, mi, vi in zip(p, m, v)]
        return p, m, v, t, loss
    p = [jnp.asarray(w) for w in weights0(np, dt)]
    state = [p, [jnp.zeros_like(w) for w in p], [jnp.zeros_like(w) for w in p], jnp.asarray(0.0, dtype=dt)]

    def step():
        state[:] = adam(*state, X, L)[:4]
    return step, float(jax.jit(loss_fn)(p, X, L)), (lambda: jax.block_until_ready(state[0])), jax.__version__
