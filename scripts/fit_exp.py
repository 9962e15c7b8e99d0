#!/usr/bin/python3
"""Derives the coefficients of kiln's float exp (ops/elementwise/exp.hpp).

e^x = 2^n * e^r with n = round(x / ln 2), r = x - n ln 2 (|r| <= ln(2)/2, ln 2 in two
parts), and e^r ~= 1 + r + r^2 P(r), P of degree DEG (the first argument, default 4:
exp.hpp's exp_pf; 3 gives cpu/reduce/row.hpp's row_exp_pf, within 2.3 ulp). P is fitted in relative error of e^r
by Lawson's iteratively re-weighted least squares on Chebyshev nodes (double precision),
which converges to the minimax fit; then the float32 evaluation, exactly as exp.hpp runs
it (fused multiply-adds emulated in double), is compared with math.exp over a dense grid
of the whole range where e^x is a normal float, in ulps of the float result.
Needs python3-numpy. Run: /usr/bin/python3 scripts/fit_exp.py [DEG]
"""
import math
import sys

import numpy as np

DEG = int(sys.argv[1]) if len(sys.argv) > 1 else 4
R = 0.5 * math.log(2.0)

n = 4000
k = np.arange(n)
rs = R * np.cos((2 * k + 1) * np.pi / (2 * n))
f = np.exp(rs)
target = f - 1.0 - rs
A = (rs * rs)[:, None] * rs[:, None] ** np.arange(DEG + 1)
w = np.ones_like(rs)
for _ in range(60):
    sw = np.sqrt(w) / f  # relative error of e^r
    c, *_ = np.linalg.lstsq(A * sw[:, None], target * sw, rcond=None)
    err = np.abs(A @ c - target) / f
    w = w * err / np.sum(w * err) * n  # Lawson: weight up the nodes where the error peaks
P = [np.float32(v) for v in c]

f32 = np.float32
LOG2E = f32(1.44269504088896341)
LN2_HI = f32(0.693359375)                 # 9 significant bits: n * LN2_HI is exact
LN2_LO = f32(math.log(2.0) - 0.693359375)


def fma(a, b, c):
    return f32(float(a) * float(b) + float(c))


def exp32(x):
    x = f32(x)
    nn = f32(np.rint(f32(x * LOG2E)))
    r = fma(nn, -LN2_HI, x)
    r = fma(nn, -LN2_LO, r)
    q = P[-1]
    for v in reversed(P[:-1]):
        q = fma(q, r, v)
    y = fma(f32(r * r), q, r)
    y = f32(y + f32(1.0))
    return f32(math.ldexp(float(y), int(nn)))


worst = 0.0
for x in np.linspace(-87.33, 88.72, 400001):
    x32 = f32(x)
    got = exp32(x32)
    ref = math.exp(float(x32))
    ulp = math.ldexp(1.0, math.frexp(ref)[1] - 24)
    worst = max(worst, abs(float(got) - ref) / ulp)
print("P =", ", ".join("%.9e" % v for v in P))
print("LN2_LO = %.9e" % LN2_LO)
print("worst error of the float evaluation: %.3f ulp" % worst)
