"""Fit the polynomial of kuiper_core.layers.activation's float32 GELU (dev tool, needs scipy).

For a = |x| the GELU needs a * Phi(-a), written as

    a * Phi(-a) = a * t * exp(P(s) - a^2 / 2),   t = 1 / (1 + K a),   s = 2t - 1 = (1 - K a) / (1 + K a)

where P(s) = log(Phi(-a) / t) + a^2 / 2 is smooth on s in [-1, 1] (a from 15 down to 0). P is
fitted in the monomials of s (well conditioned there: sum |c_k| ~ 2) by iteratively reweighted
least squares towards the minimax error, on a dense grid of a in [0, A_MAX]; beyond A_MAX the
float32 result is 0 (a * Phi(-a) < 1e-46). Prints the coefficients and the fit's max error.

    python tools/fit_gelu.py [K] [DEGREE]
"""

from __future__ import annotations

import sys

import numpy as np
from scipy.special import log_ndtr

A_MAX = 15.0


def fit(k: float, degree: int) -> tuple[np.ndarray, float]:
    a = np.linspace(0.0, A_MAX, 300001)
    t = 1.0 / (1.0 + k * a)
    s = 2.0 * t - 1.0
    target = log_ndtr(-a) + a * a / 2.0 - np.log(t)
    basis = np.vander(s, degree + 1, increasing=True)
    weight = np.ones_like(a)
    for _ in range(60):  # Lawson-style reweighting: weight grows where the error is largest
        c = np.linalg.lstsq(basis * weight[:, None], target * weight, rcond=None)[0]
        err = np.abs(basis @ c - target)
        weight *= 1.0 + 3.0 * err / err.max()
    return c, float(np.abs(basis @ c - target).max())


if __name__ == "__main__":
    k = float(sys.argv[1]) if len(sys.argv) > 1 else 0.34375
    degree = int(sys.argv[2]) if len(sys.argv) > 2 else 9
    coeffs, err = fit(k, degree)
    print(f"K = {k!r}, degree {degree}: max |P - fit| = {err:.2e}")
    print("(" + ", ".join(repr(float(c)) for c in coeffs) + ")")
