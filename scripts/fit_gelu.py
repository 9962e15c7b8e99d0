#!/usr/bin/python3
"""Derives the coefficients of gelu's tail factor (ops/elementwise/gelu.hpp).

R(w) = erfc(w / sqrt 2) / 2 * e^(w^2 / 2) = Phi(-w) e^(w^2/2), smooth and bounded on w >= 0
(R(0) = 1/2, R(w) ~ 1 / (w sqrt(2 pi))), fitted as R(w) ~= P(w) / Q(w), Q(0) = 1, on
[0, W] (W = 15: beyond, e^(-w^2/2) is 0 in float), in relative error by iteratively re-weighted linear least squares on Chebyshev
nodes (double precision); then the worst relative error of the float32 evaluation.
Needs python3-numpy. Run: /usr/bin/python3 scripts/fit_gelu.py [DP DQ W]
"""
import math
import sys

import numpy as np

DP = int(sys.argv[1]) if len(sys.argv) > 1 else 4
DQ = int(sys.argv[2]) if len(sys.argv) > 2 else 5
W = float(sys.argv[3]) if len(sys.argv) > 3 else 15.0


def R(w):
    return 0.5 * math.erfc(w / math.sqrt(2.0)) * math.exp(0.5 * w * w)


n = 6000
k = np.arange(n)
ws = 0.5 * W + 0.5 * W * np.cos((2 * k + 1) * np.pi / (2 * n))
f = np.array([R(w) for w in ws])
q_prev = np.ones_like(ws)
for _ in range(60):
    A = np.hstack([ws[:, None] ** np.arange(DP + 1), -(f[:, None] * ws[:, None] ** np.arange(1, DQ + 1))])
    wt = 1.0 / (f * q_prev)
    c, *_ = np.linalg.lstsq(A * wt[:, None], f * wt, rcond=None)
    P, Q = c[:DP + 1], np.concatenate([[1.0], c[DP + 1:]])
    q_prev = np.polyval(Q[::-1], ws)


def horner32(coef, x):
    r = np.float32(coef[-1])
    for v in reversed(coef[:-1]):
        r = np.float32(r * x + np.float32(v))
    return r


worst = 0.0
wx = 0
for w in np.linspace(0.0, W, 200001):
    w32 = np.float32(w)
    v = np.float32(horner32(P, w32) / horner32(Q, w32))
    ref = R(float(w32))
    e = abs(float(v) - ref) / ref
    if e > worst:
        worst, wx = e, w32
print("P =", ", ".join("%.9e" % v for v in P))
print("Q =", ", ".join("%.9e" % v for v in Q))
print("worst relative error of the float evaluation: %.3e at w = %g" % (worst, wx))
