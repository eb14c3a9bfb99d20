#!/usr/bin/env python3
"""Peer frameworks on the workloads of `make bench-peers` (Oxiflow's side: oxiflow.jl).

Run with the venv that scripts/install-peers.sh makes:

    .deps/peers/bin/python bench/peers/peers.py [--framework tf1|torch|jax|numpy]...

PEERS_WORKLOADS=mlp,matmul,ops,grads,pinn,resnet,conv,other (the default) picks the workload groups to run; oxiflow.jl
reads it too, and bench/peers/rounds.py (`make bench-peers-rounds`) uses it.

Prints one JSON object per line on stdout:
    {"framework", "workload", "dtype", "value", "unit", "version"}   (+ "note" on some)
A framework that does not import prints {"framework", "status": "not installed", "error"};
one whose run fails part-way prints {"framework", "status": "failed", "error"} after the
figures it had; a workload left out prints {"framework", "workload", "status": "skipped",
"note"}. {"meta": "loadavg", ...} lines give the 1-minute load average at the start and the
end (other processes on the 2 cores skew every figure). Progress goes to stderr. Each framework runs in its own child process (TF, torch and JAX each load
their own thread pools and BLAS), one after the other.

What is measured (the same definitions as oxiflow.jl):
  mlp_step      MLP 64-256-256-10, tanh, batch 256, mean softmax cross-entropy on one-hot
                labels, one SGD step (lr 0.01); Glorot-uniform weights, zero biases.
                TF1 feeds x and labels from host arrays to placeholders every step; torch
                and JAX have no feed: the batch is a tensor / device array made once.
                torch: torch.optim.SGD and F.cross_entropy with probability targets;
                JAX: one jax.jit of value-less grad + update. steps/s.
  matmul_N      N×N @ N×N, N = 256, 1024, 2048; GFLOP/s = 2N³/t. TF1: MatMul of two
                variables, the product fetched; matmul_fed_N: both inputs fed placeholders.
  unary_OP      tanh exp log sigmoid sqrt relu sin cos on 2^20 float32 in (0.5, 2), held in a
                variable (TF1) / tensor (torch) / device array (JAX); TF1 fetches the result.
                sin and cos also in float64 (the same values).
                NumPy's sigmoid is 1/(1+exp(-x)), its relu maximum(x, 0). G elements/s.
  feed_fetch    TF1: 1024×1024 float64 fed to a placeholder, tf.identity fetched; GB/s of
                2 × 8 MiB (fed + fetched) per run.
  chain10k      scalar float64 through 10,000 alternating sin/cos; µs per op of a forward
                run. chain10k_grad: value and gradient w.r.t. the input, ms per run.
                TF1 (also framework "tf1-nograppler": rewrite_options.disable_meta_optimizer),
                torch eager, JAX jit (its compile time in "note"; JAX's chain10k_grad is not
                run by default, see JAX_CHAIN_GRAD_NOTE).
  op_NAME       one op on a 1024×1024 array (NumPy only; each side in its own memory order:
                Oxiflow's variable holds a Julia, column-major array, NumPy's is row-major):
                softmax over the last axis (NumPy: exp(x - max) / sum, both over axis 1),
                concat0 / concat1 (two copies joined along axis 0 / 1), abs, pow (x ** 2.5),
                pow05 (x ** 0.5: NumPy's and Oxiflow's sqrt) and pow3 (x ** 3), in
                (0.5, 1.5); ms per call, the result fetched (Oxiflow) / returned (NumPy).
  grad_NAME     the gradient of a scalar loss with respect to a 1024×1024 array x in
                (-0.5, 0.5) (a variable in TF1 and Oxiflow, Julia's column-major array on
                Oxiflow's side; a tensor with requires_grad in torch; jax.jit(jax.grad(f)) in
                JAX), ms per call, the gradient fetched (TF1, Oxiflow) / returned (torch,
                JAX). Losses: exp sum(exp(x)); sumsq sum(x²); softmax sum(softmax(x) · x)
                (softmax over the last axis); max sum(maximum(x, xᵀ)); rowbias
                sum((x + r)²), r of shape (1, 1024); concat sum(concat([x, x], axis 1)²);
                gather sum(x[idx, :]), idx the 1024 rows (7 i² + 3) mod 1024 (repeats).
  pinn_step     one Adam step of ADCME's fc network as a physics-informed model (u_xx in
                the loss): see bench/peers/pinn.py. steps/s.
  resnet_step   one Adam step of ADCME's front-page Resnet1D on a fed batch: see
                bench/peers/resnet.py. steps/s.
  conv_fwd, conv_grad  a 3×3 convolution of a 32×28×28×8 batch to 16 channels (SAME): its
                sum, and the gradients of its sum of squares: see bench/peers/conv.py. ms.
  while10k      a while loop of 10,000 iterations with a scalar float64 body (counter
                + 1, x * 1.0001) from a fed x; µs per iteration. TF1 tf.while_loop in a
                Session; JAX jax.lax.while_loop under jit (compile time in "note").

Timing: a warm-up (0.5 s; 2 s for mlp_step), then blocks of ~0.1 s of back-to-back calls
(at least 3 blocks, ~1 s; 2 s for mlp_step); the figure is the median of the blocks'
per-call times. JAX's asynchronous dispatch is closed by block_until_ready at the end of
each block.

Cores: each child is pinned to the first PEERS_CORES CPUs (default 2, the bench machine's
nproc) with sched_setaffinity, and OMP/OpenBLAS/MKL_NUM_THREADS are set to it; TF1:
ConfigProto(intra_op_parallelism_threads=2, inter_op_parallelism_threads=2), Grappler and
oneDNN at their defaults; torch.set_num_threads(2), set_num_interop_threads(2); JAX: XLA's
default CPU client (its thread pool sized by the 2 CPUs it may use). OMP_WAIT_POLICY is
PASSIVE unless set: torch's OpenMP (libgomp) threads otherwise spin at every barrier, and
with other processes on the 2 cores (load ~4) torch's mlp_step ran at ~3 steps/s, against
~150 with PASSIVE and ~230 with one thread under the same load.
"""
import json
import os
import statistics
import subprocess
import sys
import time
from types import SimpleNamespace

import conv
import pinn
import resnet

NCORES = int(os.environ.get("PEERS_CORES", "2"))
JAX_CHAIN_GRAD_NOTE = ("not run: jax.jit of value_and_grad over the 10,000-op chain crashed XLA's compiler "
                       "(SIGSEGV after ~1 min) with jax 0.10.2 here; PEERS_JAX_CHAIN_GRAD=1 tries it")
T_START = time.perf_counter()
FRAMEWORKS = ["tf1", "torch", "jax", "numpy"]
MODULE = {"tf1": "tensorflow", "torch": "torch", "jax": "jax", "numpy": "numpy"}
DTYPES = ("float32", "float64")
SIZES = (256, 1024, 2048)
UNARY = ("tanh", "exp", "log", "sigmoid", "sqrt", "relu", "sin", "cos")
UNARY64 = ("sin", "cos")   # also measured in float64
NUNARY = 1 << 20
CHAIN = 10_000
WHILE_N = 10_000
FEED_BYTES = 2 * 1024 * 1024 * 8
# PEERS_WORKLOADS: a comma list of the groups to run, "mlp" (mlp_step), "matmul" (matmul_N,
# matmul_fed_N), "ops" (op_NAME), "grads" (grad_NAME), "pinn" (pinn_step), "resnet"
# (resnet_step), "conv" (conv_fwd, conv_grad) and "other" (the rest); all when unset.
# bench/peers/rounds.py sets it.
GROUPS = ("mlp", "matmul", "ops", "grads", "pinn", "resnet", "conv", "other")
GRADS = ("exp", "sumsq", "softmax", "max", "rowbias", "concat", "gather")
OPS_N = 1024
WORKLOADS = [g.strip() for g in os.environ.get("PEERS_WORKLOADS", ",".join(GROUPS)).split(",") if g.strip()]


def want(group):
    """Whether PEERS_WORKLOADS selects workload group `group`."""
    return group in WORKLOADS


def dtypes_for(group):
    """The dtypes to run group `group`'s loop over: none when it is not selected."""
    return DTYPES if want(group) else ()


def emit(framework, workload, dtype, value, unit, version, **extra):
    rec = {"framework": framework, "workload": workload, "dtype": dtype,
           "value": value, "unit": unit, "version": version}
    rec.update(extra)
    print(json.dumps(rec), flush=True)
    print(f"  {framework} {workload} {dtype}: {value:.4g} {unit}  (at {time.perf_counter() - T_START:.0f} s)",
          file=sys.stderr, flush=True)


def time_calls(f, warmup_s=0.5, measure_s=1.0, min_blocks=3, block_s=0.1, sync=None):
    """Median seconds per call of `f()` over blocks of back-to-back calls after a warm-up."""
    sync = sync or (lambda: None)
    t0 = time.perf_counter()
    n = 0
    while True:
        f()
        n += 1
        sync()
        el = time.perf_counter() - t0
        if el >= warmup_s:
            break
    block = max(1, int(block_s / (el / n)))
    per_call = []
    start = time.perf_counter()
    while len(per_call) < min_blocks or (time.perf_counter() - start < measure_s and len(per_call) < 500):
        t = time.perf_counter()
        for _ in range(block):
            f()
        sync()
        per_call.append((time.perf_counter() - t) / block)
    return statistics.median(per_call)


# ---------------------------------------------------------------- data (NumPy, seeded)
def mlp_data(np, dtype, seed=1):
    rng = np.random.default_rng(seed)
    sizes = (64, 256, 256, 10)
    ws = [rng.uniform(-1, 1, (m, n)) * np.sqrt(6 / (m + n)) for m, n in zip(sizes[:-1], sizes[1:])]
    bs = [np.zeros(n) for n in sizes[1:]]
    x = rng.uniform(0, 1, (256, 64))
    y = np.eye(10)[rng.integers(0, 10, 256)]
    cast = lambda a: np.ascontiguousarray(a, dtype=dtype)
    return [cast(w) for w in ws], [cast(b) for b in bs], cast(x), cast(y)


def square(np, n, dtype, seed=2):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, (n, n)).astype(dtype), rng.uniform(-1, 1, (n, n)).astype(dtype)


def grad_data(np, dtype):
    """The grad_NAME workloads' x (1024×1024 in (-0.5, 0.5)), row r (1×1024) and row indices."""
    rng = np.random.default_rng(6)
    x = (rng.random((OPS_N, OPS_N)) - 0.5).astype(dtype)
    r = rng.random((1, OPS_N)).astype(dtype)
    idx = np.array([(7 * i * i + 3) % OPS_N for i in range(OPS_N)], dtype=np.int64)
    return x, r, idx


def grad_losses(op, r, idx):
    """The grad_NAME losses as functions of x, written with one framework's ops `op` (a
    namespace of sum, exp, maximum, transpose, softmax over the last axis, concat of a list
    along axis 1 and gather of rows)."""
    return {"exp": lambda x: op.sum(op.exp(x)), "sumsq": lambda x: op.sum(x * x),
            "softmax": lambda x: op.sum(op.softmax(x) * x), "max": lambda x: op.sum(op.maximum(x, op.transpose(x))),
            "rowbias": lambda x: op.sum((x + r) ** 2), "concat": lambda x: op.sum(op.concat([x, x]) ** 2),
            "gather": lambda x: op.sum(op.gather(x, idx))}


def unary_input(np, dtype="float32"):
    return np.random.default_rng(3).uniform(0.5, 2.0, NUNARY).astype(dtype)


# ---------------------------------------------------------------- TensorFlow 1 (graph)
def run_tf1():
    import numpy as np
    import tensorflow as tf
    tf1 = tf.compat.v1
    tf1.disable_eager_execution()
    ver = tf.__version__

    def session(g, grappler=True):
        cfg = tf1.ConfigProto(intra_op_parallelism_threads=NCORES, inter_op_parallelism_threads=NCORES)
        if not grappler:
            cfg.graph_options.rewrite_options.disable_meta_optimizer = True
        return tf1.Session(graph=g, config=cfg)

    for dt in dtypes_for("mlp"):
        ws, bs, X, Y = mlp_data(np, dt)
        g = tf.Graph()
        with g.as_default():
            x = tf1.placeholder(dt, [256, 64])
            y = tf1.placeholder(dt, [256, 10])
            W = [tf1.Variable(w) for w in ws]
            b = [tf1.Variable(v) for v in bs]
            h = tf.tanh(tf.matmul(x, W[0]) + b[0])
            h = tf.tanh(tf.matmul(h, W[1]) + b[1])
            logits = tf.matmul(h, W[2]) + b[2]
            loss = tf.reduce_mean(tf1.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=logits))
            train = tf1.train.GradientDescentOptimizer(0.01).minimize(loss)
            init = tf1.global_variables_initializer()
        with session(g) as s:
            s.run(init)
            feed = {x: X, y: Y}
            t = time_calls(lambda: s.run(train, feed), warmup_s=2.0, measure_s=2.0)
        emit("tf1", "mlp_step", dt, 1 / t, "steps/s", ver)

    for dt in dtypes_for("matmul"):
        for n in SIZES:
            A, B = square(np, n, dt)
            g = tf.Graph()
            with g.as_default():
                c = tf.matmul(tf1.Variable(A), tf1.Variable(B))
                pa, pb = tf1.placeholder(dt, [n, n]), tf1.placeholder(dt, [n, n])
                cf = tf.matmul(pa, pb)
                init = tf1.global_variables_initializer()
            with session(g) as s:
                s.run(init)
                t = time_calls(lambda: s.run(c))
                emit("tf1", f"matmul_{n}", dt, 2 * n**3 / t / 1e9, "GFLOP/s", ver)
                feed = {pa: A, pb: B}
                t = time_calls(lambda: s.run(cf, feed))
                emit("tf1", f"matmul_fed_{n}", dt, 2 * n**3 / t / 1e9, "GFLOP/s", ver)

    for dt in dtypes_for("grads"):
        X, R, IDX = grad_data(np, dt)
        g = tf.Graph()
        with g.as_default():
            x = tf1.Variable(X)
            op = SimpleNamespace(sum=tf.reduce_sum, exp=tf.exp, maximum=tf.maximum, transpose=tf.transpose,
                                 softmax=tf.nn.softmax, concat=lambda xs: tf.concat(xs, 1), gather=tf.gather)
            losses = grad_losses(op, tf.constant(R), tf.constant(IDX))
            # dense, as ADCME's gradients() returns it (convert_to_tensor): the gather's
            # gradient is an IndexedSlices, which a session fetches as its rows and indices
            # without scattering them into a 1024×1024 array
            grads = {k: tf.convert_to_tensor(tf.gradients(f(x), x)[0]) for k, f in losses.items()}
            init = tf1.global_variables_initializer()
        with session(g) as s:
            s.run(init)
            for name in GRADS:
                t = time_calls(lambda: s.run(grads[name]))
                emit("tf1", f"grad_{name}", dt, t * 1e3, "ms", ver)

    pinn.run("tf1", dtypes_for("pinn"), emit, time_calls, NCORES)
    resnet.run("tf1", dtypes_for("resnet"), emit, time_calls, NCORES)
    conv.run("tf1", dtypes_for("conv"), emit, time_calls, NCORES)
    if not want("other"):
        return
    g = tf.Graph()
    with g.as_default():
        v = tf1.Variable(unary_input(np))
        ops = {"tanh": tf.tanh(v), "exp": tf.exp(v), "log": tf.math.log(v),
               "sigmoid": tf.sigmoid(v), "sqrt": tf.sqrt(v), "relu": tf.nn.relu(v),
               "sin": tf.sin(v), "cos": tf.cos(v)}
        v64 = tf1.Variable(unary_input(np, "float64"))
        ops64 = {"sin": tf.sin(v64), "cos": tf.cos(v64)}
        init = tf1.global_variables_initializer()
    with session(g) as s:
        s.run(init)
        for name in UNARY:
            t = time_calls(lambda: s.run(ops[name]))
            emit("tf1", f"unary_{name}", "float32", NUNARY / t / 1e9, "Gelem/s", ver)
        for name in UNARY64:
            t = time_calls(lambda: s.run(ops64[name]))
            emit("tf1", f"unary_{name}", "float64", NUNARY / t / 1e9, "Gelem/s", ver)

    g = tf.Graph()
    with g.as_default():
        p = tf1.placeholder("float64", [1024, 1024])
        o = tf.identity(p)
    A = np.random.default_rng(4).uniform(0, 1, (1024, 1024))
    with session(g) as s:
        t = time_calls(lambda: s.run(o, {p: A}))
    emit("tf1", "feed_fetch", "float64", FEED_BYTES / t / 1e9, "GB/s", ver)

    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder("float64", [])
        y = x
        for i in range(CHAIN):
            y = tf.sin(y) if i % 2 == 0 else tf.cos(y)
        dy = tf.gradients(y, x)[0]
    for fw, grappler in (("tf1", True), ("tf1-nograppler", False)):
        with session(g, grappler) as s:
            t = time_calls(lambda: s.run(y, {x: 0.5}))
            emit(fw, "chain10k", "float64", t / CHAIN * 1e6, "us/op", ver)
            t = time_calls(lambda: s.run([y, dy], {x: 0.5}))
            emit(fw, "chain10k_grad", "float64", t * 1e3, "ms", ver)

    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder("float64", [])
        _, w = tf1.while_loop(lambda i, v: i < WHILE_N, lambda i, v: (i + 1, v * 1.0001), [tf.constant(0), x])
    with session(g) as s:
        t = time_calls(lambda: s.run(w, {x: 0.5}))
        emit("tf1", "while10k", "float64", t / WHILE_N * 1e6, "us/iter", ver)


# ---------------------------------------------------------------- PyTorch (eager)
def run_torch():
    import numpy as np
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(NCORES)
    torch.set_num_interop_threads(NCORES)
    ver = torch.__version__

    for dt in dtypes_for("mlp"):
        ws, bs, X, Y = mlp_data(np, dt)
        params = [torch.tensor(a, requires_grad=True) for pair in zip(ws, bs) for a in pair]
        x, y = torch.from_numpy(X), torch.from_numpy(Y)
        opt = torch.optim.SGD(params, lr=0.01)
        W1, b1, W2, b2, W3, b3 = params

        def step():
            opt.zero_grad(set_to_none=True)
            h = torch.tanh(x @ W1 + b1)
            h = torch.tanh(h @ W2 + b2)
            loss = F.cross_entropy(h @ W3 + b3, y)  # probability targets, mean over the batch
            loss.backward()
            opt.step()
        t = time_calls(step, warmup_s=2.0, measure_s=2.0)
        emit("torch", "mlp_step", dt, 1 / t, "steps/s", ver)

    for dt in dtypes_for("matmul"):
        for n in SIZES:
            a, b = (torch.from_numpy(m) for m in square(np, n, dt))
            t = time_calls(lambda: a @ b)
            emit("torch", f"matmul_{n}", dt, 2 * n**3 / t / 1e9, "GFLOP/s", ver)

    for dt in dtypes_for("grads"):
        X, R, IDX = grad_data(np, dt)
        x = torch.from_numpy(X).requires_grad_(True)
        op = SimpleNamespace(sum=torch.sum, exp=torch.exp, maximum=torch.maximum, transpose=lambda a: a.T,
                             softmax=lambda a: torch.softmax(a, dim=-1), concat=lambda xs: torch.cat(xs, 1),
                             gather=lambda a, i: a[i])
        losses = grad_losses(op, torch.from_numpy(R), torch.from_numpy(IDX))

        def grad(f):
            x.grad = None
            f(x).backward()
            return x.grad
        for name in GRADS:
            t = time_calls(lambda: grad(losses[name]))
            emit("torch", f"grad_{name}", dt, t * 1e3, "ms", ver)

    pinn.run("torch", dtypes_for("pinn"), emit, time_calls, NCORES)
    resnet.run("torch", dtypes_for("resnet"), emit, time_calls, NCORES)
    conv.run("torch", dtypes_for("conv"), emit, time_calls, NCORES)
    if not want("other"):
        return
    v = torch.from_numpy(unary_input(np))
    fns = {"tanh": torch.tanh, "exp": torch.exp, "log": torch.log,
           "sigmoid": torch.sigmoid, "sqrt": torch.sqrt, "relu": torch.relu,
           "sin": torch.sin, "cos": torch.cos}
    for name in UNARY:
        t = time_calls(lambda: fns[name](v))
        emit("torch", f"unary_{name}", "float32", NUNARY / t / 1e9, "Gelem/s", ver)
    v64 = torch.from_numpy(unary_input(np, "float64"))
    for name in UNARY64:
        t = time_calls(lambda: fns[name](v64))
        emit("torch", f"unary_{name}", "float64", NUNARY / t / 1e9, "Gelem/s", ver)

    def chain(x):
        for i in range(CHAIN):
            x = torch.sin(x) if i % 2 == 0 else torch.cos(x)
        return x
    x0 = torch.tensor(0.5, dtype=torch.float64)
    with torch.no_grad():
        t = time_calls(lambda: chain(x0))
    emit("torch", "chain10k", "float64", t / CHAIN * 1e6, "us/op", ver)

    def value_and_grad():
        x = x0.clone().requires_grad_(True)
        y = chain(x)
        y.backward()
        return y.item(), x.grad.item()
    t = time_calls(value_and_grad)
    emit("torch", "chain10k_grad", "float64", t * 1e3, "ms", ver)


# ---------------------------------------------------------------- JAX (jit)
def run_jax():
    import numpy as np
    import jax
    jax.config.update("jax_enable_x64", True)    # float64 arrays; float32 ones stay float32
    import jax.numpy as jnp
    ver = jax.__version__

    def loss_fn(p, x, y):
        W1, b1, W2, b2, W3, b3 = p
        h = jnp.tanh(x @ W1 + b1)
        h = jnp.tanh(h @ W2 + b2)
        return jnp.mean(-jnp.sum(y * jax.nn.log_softmax(h @ W3 + b3, axis=1), axis=1))

    @jax.jit
    def sgd_step(p, x, y):
        g = jax.grad(loss_fn)(p, x, y)
        return [w - 0.01 * gw for w, gw in zip(p, g)]

    for dt in dtypes_for("mlp"):
        ws, bs, X, Y = mlp_data(np, dt)
        state = [[jnp.asarray(a) for pair in zip(ws, bs) for a in pair]]
        x, y = jnp.asarray(X), jnp.asarray(Y)

        def step():
            state[0] = sgd_step(state[0], x, y)
        t = time_calls(step, warmup_s=2.0, measure_s=2.0, sync=lambda: jax.block_until_ready(state[0]))
        emit("jax", "mlp_step", dt, 1 / t, "steps/s", ver)

    mm = jax.jit(lambda a, b: a @ b)
    for dt in dtypes_for("matmul"):
        for n in SIZES:
            a, b = (jnp.asarray(m) for m in square(np, n, dt))
            out = [None]

            def call():
                out[0] = mm(a, b)
            t = time_calls(call, sync=lambda: out[0].block_until_ready())
            emit("jax", f"matmul_{n}", dt, 2 * n**3 / t / 1e9, "GFLOP/s", ver)

    for dt in dtypes_for("grads"):
        X, R, IDX = grad_data(np, dt)
        x = jnp.asarray(X)
        op = SimpleNamespace(sum=jnp.sum, exp=jnp.exp, maximum=jnp.maximum, transpose=jnp.transpose,
                             softmax=lambda a: jax.nn.softmax(a, axis=-1), concat=lambda xs: jnp.concatenate(xs, 1),
                             gather=lambda a, i: a[i])
        losses = grad_losses(op, jnp.asarray(R), jnp.asarray(IDX))
        for name in GRADS:
            f = jax.jit(jax.grad(losses[name]))
            out = [None]

            def call():
                out[0] = f(x)
            t = time_calls(call, sync=lambda: out[0].block_until_ready())
            emit("jax", f"grad_{name}", dt, t * 1e3, "ms", ver)

    pinn.run("jax", dtypes_for("pinn"), emit, time_calls, NCORES)
    resnet.run("jax", dtypes_for("resnet"), emit, time_calls, NCORES)
    conv.run("jax", dtypes_for("conv"), emit, time_calls, NCORES)
    if not want("other"):
        return
    fns = {"tanh": jnp.tanh, "exp": jnp.exp, "log": jnp.log,
           "sigmoid": jax.nn.sigmoid, "sqrt": jnp.sqrt, "relu": jax.nn.relu,
           "sin": jnp.sin, "cos": jnp.cos}
    # float64 needs jax_enable_x64 (set above when JAX starts), else the array is float32
    for dt, names in (("float32", UNARY), ("float64", UNARY64)):
        v = jnp.asarray(unary_input(np, dt))
        if str(v.dtype) != dt:
            for name in names:
                print(json.dumps({"framework": "jax", "workload": f"unary_{name}", "dtype": dt, "status": "skipped",
                                  "note": f"jax made a {v.dtype} array (jax_enable_x64 off)"}), flush=True)
            continue
        for name in names:
            f = jax.jit(fns[name])
            out = [None]

            def call():
                out[0] = f(v)
            t = time_calls(call, sync=lambda: out[0].block_until_ready())
            emit("jax", f"unary_{name}", dt, NUNARY / t / 1e9, "Gelem/s", ver)

    def chain(x):
        for i in range(CHAIN):
            x = jnp.sin(x) if i % 2 == 0 else jnp.cos(x)
        return x
    x0 = jnp.asarray(0.5, dtype=jnp.float64)
    chains = [("chain10k", chain, 1e6 / CHAIN, "us/op")]
    if os.environ.get("PEERS_JAX_CHAIN_GRAD") == "1":
        chains.append(("chain10k_grad", jax.value_and_grad(chain), 1e3, "ms"))
    else:
        print(json.dumps({"framework": "jax", "workload": "chain10k_grad", "dtype": "float64", "status": "skipped",
                          "note": JAX_CHAIN_GRAD_NOTE}), flush=True)
    for workload, fn, scale, unit in chains:
        f = jax.jit(fn)
        c0 = time.perf_counter()
        jax.block_until_ready(f(x0))
        compile_s = time.perf_counter() - c0
        out = [None]

        def call():
            out[0] = f(x0)
        t = time_calls(call, sync=lambda: jax.block_until_ready(out[0]))
        emit("jax", workload, "float64", t * scale, unit, ver, note=f"trace+compile {compile_s:.1f} s")


    def loop(x):
        return jax.lax.while_loop(lambda c: c[0] < WHILE_N, lambda c: (c[0] + 1, c[1] * 1.0001), (0, x))[1]
    f = jax.jit(loop)
    c0 = time.perf_counter()
    jax.block_until_ready(f(x0))
    compile_s = time.perf_counter() - c0
    out = [None]

    def call_loop():
        out[0] = f(x0)
    t = time_calls(call_loop, sync=lambda: jax.block_until_ready(out[0]))
    emit("jax", "while10k", "float64", t / WHILE_N * 1e6, "us/iter", ver, note=f"trace+compile {compile_s:.1f} s")


# ---------------------------------------------------------------- NumPy
def run_numpy():
    import numpy as np
    ver = np.__version__
    for dt in dtypes_for("matmul"):
        for n in SIZES:
            a, b = square(np, n, dt)
            t = time_calls(lambda: a @ b)
            emit("numpy", f"matmul_{n}", dt, 2 * n**3 / t / 1e9, "GFLOP/s", ver)
    for dt in dtypes_for("ops"):
        x = (0.5 + np.random.default_rng(5).random((OPS_N, OPS_N))).astype(dt)
        p = np.dtype(dt).type(2.5)

        def softmax(x):
            e = np.exp(x - x.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)
        ops = {"softmax": lambda: softmax(x), "concat0": lambda: np.concatenate([x, x], 0),
               "concat1": lambda: np.concatenate([x, x], 1), "abs": lambda: np.abs(x), "pow": lambda: x ** p,
               "pow05": lambda: x ** np.dtype(dt).type(0.5), "pow3": lambda: x ** np.dtype(dt).type(3)}
        for name, f in ops.items():
            t = time_calls(f)
            emit("numpy", f"op_{name}", dt, t * 1e3, "ms", ver)
    if not want("other"):
        return
    v = unary_input(np)
    fns = {"tanh": np.tanh, "exp": np.exp, "log": np.log,
           "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "sqrt": np.sqrt, "relu": lambda x: np.maximum(x, 0),
           "sin": np.sin, "cos": np.cos}
    for name in UNARY:
        t = time_calls(lambda: fns[name](v))
        emit("numpy", f"unary_{name}", "float32", NUNARY / t / 1e9, "Gelem/s", ver)
    v64 = unary_input(np, "float64")
    for name in UNARY64:
        t = time_calls(lambda: fns[name](v64))
        emit("numpy", f"unary_{name}", "float64", NUNARY / t / 1e9, "Gelem/s", ver)


RUNNERS = {"tf1": run_tf1, "torch": run_torch, "jax": run_jax, "numpy": run_numpy}


def child(fw):
    try:
        __import__(MODULE[fw])
    except Exception as e:  # ImportError, or a broken install that fails while importing
        print(json.dumps({"framework": fw, "status": "not installed", "error": f"{type(e).__name__}: {e}"}), flush=True)
        return 0
    RUNNERS[fw]()
    return 0


def main(argv):
    unknown = [g for g in WORKLOADS if g not in GROUPS]
    if unknown:
        print(f"peers.py: unknown PEERS_WORKLOADS group(s) {unknown} (known: {', '.join(GROUPS)})", file=sys.stderr)
        return 2
    if len(argv) == 3 and argv[1] == "--child":
        return child(argv[2])
    wanted = [a for a in argv[1:] if a != "--framework"] or FRAMEWORKS
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(NCORES)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # see the docstring: libgomp spinning on shared cores
    cpus = sorted(os.sched_getaffinity(0))[:NCORES]
    print(json.dumps({"meta": "loadavg", "side": "peers", "at": "start", "value": os.getloadavg()[0]}), flush=True)
    for fw in wanted:
        if fw not in RUNNERS:
            print(f"peers.py: unknown framework {fw!r} (known: {', '.join(FRAMEWORKS)})", file=sys.stderr)
            return 2
        t0 = time.time()
        r = subprocess.run([sys.executable, __file__, "--child", fw], env=env,
                           preexec_fn=lambda: os.sched_setaffinity(0, cpus))
        print(f"peers.py: {fw} done in {time.time() - t0:.0f} s", file=sys.stderr)
        if r.returncode != 0:
            print(json.dumps({"framework": fw, "status": "failed", "error": f"exit code {r.returncode}"}), flush=True)
    print(json.dumps({"meta": "loadavg", "side": "peers", "at": "end", "value": os.getloadavg()[0]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
