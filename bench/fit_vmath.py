#!/usr/bin/env python3
"""Fits the polynomial coefficients used by src/kernels/vmath_avx2.c (run once; output pasted there).

Least squares with relative-error weights on 2000 Chebyshev nodes of each interval (close to minimax),
in float64 against scipy/numpy references; prints C float arrays, lowest degree first.
  tanh(x)/x    = P(x^2)            x in [0, 0.625]
  erf(x)/x     = P(x^2)            x in [0, 1]
  erfc(z)e^z^2 = P(1/(1 + z/2))    z in [0.5, 10]
  erfcx(a/sqrt2)/2 = P_i(a - c_i)  a in [0, 14.5], eight intervals (GELU, erf form: gelu_q_tables below)
"""
import numpy as np
from scipy.special import erf, erfc


def fit(f, a, b, deg, var, n=2000):
    k = np.arange(n)
    x = (a + b) / 2 + (b - a) / 2 * np.cos((2 * k + 1) * np.pi / (2 * n))
    t, y = var(x), f(x)
    V = np.vander(t, deg + 1, increasing=True)
    w = 1 / np.abs(y)
    c, *_ = np.linalg.lstsq(V * w[:, None], y * w, rcond=None)
    xx = np.linspace(a, b, 200001)
    err = np.max(np.abs(np.polynomial.polynomial.polyval(var(xx), c) - f(xx)) / np.abs(f(xx)))
    return c, err


def show(name, c, err):
    body = ", ".join(f"{v:.9e}f" for v in c.astype(np.float32))
    print(f"/* {name}: max rel fit error {err:.2e} */\nstatic const float {name}[{len(c)}] = {{{body}}};")


R = lambda z: erfc(z) * np.exp(z * z)
show("k_tanh", *fit(lambda x: np.tanh(x) / x, 1e-6, 0.625, 6, lambda x: x * x))
show("k_erf", *fit(lambda x: erf(x) / x, 1e-6, 1.0, 7, lambda x: x * x))
show("k_erfc", *fit(R, 0.5, 10.0, 12, lambda z: 1 / (1 + 0.5 * z)))


# GELU (erf form): Phi(-a) = Q(a) e^(-a^2/2), Q(a) = erfcx(a/sqrt2)/2, a = |x|, on eight intervals found from the
# bits of a + 4 (quarter octaves of [4, 16): a in [0,1) [1,2) [2,3) [3,4) [4,6) [6,8) [8,10) [10,14.5]), a
# polynomial of degree 7 in a - centre on each; the coefficients rounded to float one at a time, lowest first, the
# later ones refitted to what the rounded ones leave (smaller error than rounding a double fit). Printed in the
# order the kernel's permute reads them: interval i at lane (bits(a + 4) >> 21) & 7, two copies (16 lanes).
def gelu_q_tables(deg=7, n=3000):
    from scipy.special import erfcx
    Q = lambda a: 0.5 * erfcx(a / np.sqrt(2))
    parts = [0, 1, 2, 3, 4, 6, 8, 10, 14.5]
    lane = [4, 5, 6, 7, 0, 1, 2, 3]  # interval i's lane: (bits(a + 4) >> 21) & 7
    cen = np.zeros(8, np.float32)
    coef = np.zeros((deg + 1, 8), np.float32)
    worst = 0
    for i in range(8):
        a, b = max(parts[i] - 0.01, 0), parts[i + 1] + 0.01
        k = np.arange(n)
        x = (a + b) / 2 + (b - a) / 2 * np.cos((2 * k + 1) * np.pi / (2 * n))
        c0 = np.float32((parts[i] + parts[i + 1]) / 2)
        u, y = x - c0, Q(x)
        w = 1 / y
        cs, rest = [], y.copy()
        for d in range(deg + 1):
            V = np.vander(u, deg + 1 - d, increasing=True) * (u[:, None] ** d)
            c, *_ = np.linalg.lstsq(V * w[:, None], rest * w, rcond=None)
            cf = np.float32(c[0])
            cs.append(cf)
            rest = rest - float(cf) * u ** d
        xx = np.linspace(a, b, 40001)
        err = np.max(np.abs(np.polynomial.polynomial.polyval(xx - c0, np.array(cs, np.float64)) - Q(xx)) / Q(xx))
        worst = max(worst, err)
        cen[lane[i]] = c0
        coef[:, lane[i]] = cs
    body = lambda v: ", ".join(f"{float(t):.9e}f" for t in list(v) * 2)
    print(f"/* gelu_erf's Q(a) = erfcx(a/sqrt2)/2 by interval: max rel fit error {worst:.2e} */")
    print(f"static const float k_gelu_c[16] = {{{body(cen)}}};")
    print(f"static const float k_gelu_q[{deg + 1}][16] = {{")
    for d in range(deg + 1):
        print(f"    {{{body(coef[d])}}},")
    print("};")


gelu_q_tables()
