#!/usr/bin/python3
"""Derives the coefficients of kiln's float erf and tanh (ops/elementwise/erf.hpp, tanh.hpp).

f(x) ~= x * P(x^2) / Q(x^2) on |x| <= X, Q(0) = 1; beyond X, f rounds to +-1 in float.
  erf:  P degree 5, Q degree 5, X = 4   (erf.hpp cuts over to +-1 at 3.92)
  tanh: P degree 6, Q degree 6, X = 9
A rational fit in relative error by iteratively re-weighted linear least squares on
Chebyshev nodes (double precision); then the worst relative error of the float32
evaluation is measured on a dense grid.
Needs python3-numpy. Run: /usr/bin/python3 scripts/fit_rational.py erf|tanh
"""
import math
import sys

import numpy as np

FITS = {"erf": (math.erf, 5, 5, 4.0), "tanh": (math.tanh, 6, 6, 9.0)}
fn, DP, DQ, X = FITS[sys.argv[1] if len(sys.argv) > 1 else "erf"]

n = 6000
k = np.arange(n)
xs = np.abs(0.5 * X + 0.5 * X * np.cos((2 * k + 1) * np.pi / (2 * n))) + 1e-6
ts = xs * xs
f = np.array([fn(x) for x in xs])
q_prev = np.ones_like(xs)
for _ in range(40):
    # x P(t) - f (Q(t) - 1) = f, weighted by 1 / (f Q_prev) so the residual is relative
    A = np.hstack([xs[:, None] * ts[:, None] ** np.arange(DP + 1),
                   -(f[:, None] * ts[:, None] ** np.arange(1, DQ + 1))])
    w = 1.0 / (f * q_prev)
    c, *_ = np.linalg.lstsq(A * w[:, None], f * w, rcond=None)
    P, Q = c[:DP + 1], np.concatenate([[1.0], c[DP + 1:]])
    q_prev = np.polyval(Q[::-1], ts)


def horner32(coef, x):
    r = np.float32(coef[-1])
    for v in reversed(coef[:-1]):
        r = np.float32(r * x + np.float32(v))
    return r


worst = 0.0
for x in np.linspace(1e-4, X + 0.5, 100001):
    x32 = np.float32(x)
    xc = min(x32, np.float32(X))
    t = np.float32(xc * xc)
    v = np.float32(np.float32(xc * horner32(P, t)) / horner32(Q, t))
    if x32 >= X:
        v = np.float32(1.0)
    ref = fn(float(x32))
    worst = max(worst, abs(float(v) - ref) / ref)
print("P =", ", ".join("%.9e" % v for v in P))
print("Q =", ", ".join("%.9e" % v for v in Q))
print("worst relative error of the float evaluation: %.3e" % worst)
