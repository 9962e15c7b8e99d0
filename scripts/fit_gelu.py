#!/usr/bin/python3
"""Derives the coefficients of gelu's tail factor (ops/elementwise/gelu.hpp).

R(w) = erfc(w / sqrt 2) / 2 * e^(w^2 / 2) = Phi(-w) e^(w^2/2), smooth and bounded on w >= 0
(R(0) = 1/2, R(w) ~ 1 / (w sqrt(2 pi))), fitted as R(w) ~= P(w) / Q(w), Q(0) = 1, on
[0, W] (W = 15: beyond, e^(-w^2/2) is 0 in float), in relative error by iteratively re-weighted linear least squares on Chebyshev
nodes (double precision); then the worst relative error of the float32 evaluation.
Second, the CPU body's own e^(-w^2/2) = 2^n e^(s/2) (|s| <= ln 2): e^(s/2) ~= 1 + s G(s),
G of degree 4 (gelu_exp), fitted in relative error the same way (Lawson's re-weighting),
and its float evaluation checked over |s| <= ln 2.
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


# e^(s/2) ~= 1 + s (g0 + g1 s + ... + g4 s^4) on |s| <= ln 2, relative error (Lawson)
S = math.log(2.0)
m = 4000
ss = S * np.cos((2 * np.arange(m) + 1) * np.pi / (2 * m))
fe = np.exp(0.5 * ss)
A = ss[:, None] * ss[:, None] ** np.arange(5)
lw = np.ones_like(ss)
for _ in range(80):
    sw = np.sqrt(lw) / fe
    g, *_ = np.linalg.lstsq(A * sw[:, None], (fe - 1.0) * sw, rcond=None)
    err = np.abs(A @ g - (fe - 1.0)) / fe
    lw = lw * err / np.sum(lw * err) * m
G = [np.float32(v) for v in g]


def fma32(a, b, c):
    return np.float32(float(a) * float(b) + float(c))


worst_e = 0.0
for sv in np.linspace(-S - 1e-4, S + 1e-4, 200001):
    s32 = np.float32(sv)
    acc = G[-1]
    for v in reversed(G[:-1]):
        acc = fma32(acc, s32, v)
    y = fma32(s32, acc, np.float32(1.0))
    ref = math.exp(0.5 * float(s32))
    worst_e = max(worst_e, abs(float(y) - ref) / ref)
print("gelu_exp =", ", ".join("%.9e" % v for v in G))
print("worst relative error of its float evaluation: %.3e" % worst_e)
