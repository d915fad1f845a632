"""
Fits the coefficients of Loom's float32 erf (loom_erff in src/backends/native/jit_fast.ts), one
odd polynomial over the whole range that matters:
  |x| < 3.92:  erf(x) = x·P(v),  v = x²·VA − 1 ∈ [−1, 1]  (VA = float32(2/3.92²)), P of degree 15
  |x| ≥ 3.92:  ±1 (erfc(3.92) < 3.3e-8)
(One polynomial, no pieces: on AVX-512 its 17 fmas cost less than two shorter polynomials whose
coefficients each lane picks.) Least squares on Chebyshev nodes, reweighted toward minimax
(Lawson), against Python's double math.erf, with VA exactly as the kernel rounds it;
coefficients rounded to float32 and printed as C hex floats, highest degree first.
Run: /usr/bin/python3 bench/erf_fit.py (output committed as bench/erf_fit.txt). The bound that
counts is the one bench/erf_bound.ts measures over every float32 in [0, 4] with float32
arithmetic; the fit error printed here is in double with the rounded coefficients.
"""
import math
import numpy as np

erf = np.vectorize(math.erf)
HI, DEG = 3.92, 15
VA = float(np.float32(2 / HI**2))


def var(x):
    return x * x * VA - 1


def fit(m=8000, rounds=80):
    k = np.arange(m)
    x = np.abs(HI / 2 + HI / 2 * np.cos(np.pi * (k + 0.5) / m)) + 1e-6
    A, y, w = np.stack([x * var(x) ** i for i in range(DEG + 1)], 1), erf(x), np.ones(m) / m
    for _ in range(rounds):
        c = np.linalg.lstsq(A * np.sqrt(w)[:, None], y * np.sqrt(w), rcond=None)[0]
        r = np.abs(A @ c - y)
        w *= r / r.max() + 1e-3
        w /= w.sum()
    return c


def hexf(c):
    m, e = float(np.float32(c)).hex().split("p")
    return m.rstrip("0").rstrip(".") + "p" + e + "f"


c = fit()
xs = np.linspace(0, HI, 400001)
err = np.abs(xs * np.polyval(np.float32(c)[::-1].astype(float), var(xs)) - erf(xs)).max()
print(f"HI = {HI}, degree {DEG}, VA = {hexf(VA)}")
print(f"x·P(v): max abs fit error in double with float32 coefficients: {err:.3e}")
print("P (c15 … c0) = {" + ", ".join(hexf(v) for v in c[::-1]) + "}")
