#!/usr/bin/env python3
"""Fits the rational approximation of tanh that the f32 CPU kernel uses
(crates/oxiflow-core/src/ops/vmath.rs, `tanh_f32`) and prints its coefficients as the
shortest f32 literals.

    tanh(x) ~ x P(x^2) / Q(x^2)  on [0, C],  deg P = 5, deg Q = 4,  P(0) = Q(0) = 1

The fit minimises the largest relative error over a grid by linear programming, the
linearised ("differential correction") form: each round solves
    min d  subject to  |x P(s) - t Q(s)| / (t Q_prev(s)) <= d  at every grid point,
with Q_prev the previous round's denominator, until d settles (about 10 rounds). The
reference is NumPy's float64 tanh (about 1e-16 relative, far below the 4e-9 the fit
reaches). The kernel clamps |x| to 9.9, inside the fitted range, where both of its code
paths (with and without FMA) evaluate the approximation to exactly 1.0; the clamp's value
was picked by evaluating it, and the unit tests check it.

Needs NumPy and SciPy, e.g. the environment `scripts/install-scipy.sh` makes:
    .deps/scipy/bin/python scripts/fit-tanh-f32.py
"""
import numpy as np
from scipy.optimize import linprog

C = 10.0  # fitted range [0, C]
M, N = 5, 4  # degrees of P and Q in s = x^2

xs = np.unique(np.concatenate([np.linspace(1e-4, C, 6000), np.geomspace(1e-4, 1, 500)]))
t = np.tanh(xs)
u = xs**2 / C**2  # s scaled to [0, 1] for the solver's conditioning
A = np.vstack([u**k for k in range(M + 1)]).T * xs[:, None]  # x P(u)
B = np.vstack([u**k for k in range(1, N + 1)]).T * t[:, None]  # t (Q(u) - 1)
q_prev = np.ones_like(xs)
for _ in range(12):
    # scaled by 1e4, with the dual simplex: the same coefficients from SciPy 1.15 and 1.17
    w = 1e4 / (t * q_prev)
    lhs = np.hstack([A, -B]) * w[:, None]
    rhs = t * w
    nv = lhs.shape[1]
    ones = np.ones((len(xs), 1))
    res = linprog(
        np.r_[np.zeros(nv), 1.0],
        A_ub=np.vstack([np.hstack([lhs, -ones]), np.hstack([-lhs, -ones])]),
        b_ub=np.r_[rhs, -rhs],
        bounds=[(None, None)] * nv + [(0, None)],
        method="highs-ds",
    )
    assert res.success, res.message
    p, q = res.x[: M + 1], np.r_[1.0, res.x[M + 1 : nv]]
    q_prev = sum(q[k] * u**k for k in range(N + 1))
    rel = xs * sum(p[k] * u**k for k in range(M + 1)) / q_prev / t - 1
print(f"max relative error of the fit on [0, {C}]: {np.abs(rel).max():.3e}")
for name, c in (("P", p), ("Q", q)):
    lits = [np.format_float_positional(v, unique=True) if abs(v) > 1e-4 else np.format_float_scientific(v, unique=True)
            for v in (np.float32(c[k] / C ** (2 * k)) for k in range(len(c)))]
    print(f"{name}: [{', '.join(lits)}]")
