#!/usr/bin/env python3
"""Fits the polynomial coefficients used by src/kernels/vmath_avx2.c (run once; output pasted there).

Least squares with relative-error weights on 2000 Chebyshev nodes of each interval (close to minimax),
in float64 against scipy/numpy references; prints C float arrays, lowest degree first.
  tanh(x)/x    = P(x^2)            x in [0, 0.625]
  erf(x)/x     = P(x^2)            x in [0, 1]
  erfc(z)e^z^2 = P(1/(1 + z/2))    z in [0.5, 10]
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
