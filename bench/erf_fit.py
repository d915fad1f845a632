"""
Fits the coefficients of Loom's float32 erf (loom_erff in src/backends/native/jit_fast.ts):
  |x| < T:        erf(x) = x + x·(S0 + S1·x² + … + S6·x¹²)       (odd, T = 0.921875)
  T ≤ |x| < 3.92: erf(x) = 1 − R(u), u = (|x| − MID)·INV_HALF ∈ [−1, 1], R of degree 14 (≈ erfc)
  |x| ≥ 3.92:     ±1 (erfc(3.92) < 3.3e-8)
Least squares on Chebyshev nodes, reweighted toward minimax (Lawson), against Python's
double math.erf / math.erfc; coefficients rounded to float32 and printed as C hex floats.
Run: /usr/bin/python3 bench/erf_fit.py  (output committed as bench/erf_fit.txt). The bound that
counts is the one bench/erf_bound.ts measures over every float32 in [0, 4] with the rounded
coefficients and float32 arithmetic; the fit errors printed here are the double-precision ones.
"""
import math
import numpy as np

erf = np.vectorize(math.erf)
erfc = np.vectorize(math.erfc)
T, HI = 0.921875, 3.92
# the kernel computes u = (|x| − MID)·INV_HALF with both in float32: fit in exactly that variable
MID, INV_HALF = float(np.float32((T + HI) / 2)), float(np.float32(2 / (HI - T)))


def fit(f, basis, lo, hi, m=6000, rounds=80):
    k = np.arange(m)
    x = (lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.pi * (k + 0.5) / m)
    A, y, w = basis(x), f(x), np.ones(m) / m
    for _ in range(rounds):
        c = np.linalg.lstsq(A * np.sqrt(w)[:, None], y * np.sqrt(w), rcond=None)[0]
        r = np.abs(A @ c - y)
        w *= r / r.max() + 1e-3
        w /= w.sum()
    return c


def hexf(c):
    m, e = float(np.float32(c)).hex().split("p")
    return m.rstrip("0").rstrip(".") + "p" + e + "f"


# small piece: erf(x)/x − 1 = S0 + S1 x² + … in x² (x + x·S: S0 ≈ 0.128 rounds to float32 far less than 2/√π would)
small = fit(lambda x: erf(x) / x - 1, lambda x: np.stack([x ** (2 * i) for i in range(7)], 1), 1e-4, T)
big = fit(erfc, lambda x: np.stack([((x - MID) * INV_HALF) ** i for i in range(15)], 1), T, HI)
xs = np.linspace(1e-4, T, 200001)
es = np.abs(xs + xs * np.polyval(np.float32(small)[::-1].astype(float), xs * xs) - erf(xs)).max()
xb = np.linspace(T, HI, 200001)
eb = np.abs(np.polyval(np.float32(big)[::-1].astype(float), (xb - MID) * INV_HALF) - erfc(xb)).max()
print(f"T = {T}, HI = {HI}, MID = {hexf(MID)}, INV_HALF = {hexf(INV_HALF)}")
print(f"small (x + x·S(x²)), max abs fit error with float32 coefficients in double: {es:.3e}")
print("S = {" + ", ".join(hexf(c) for c in small) + "}")
print(f"big (1 − R(u)), max abs fit error with float32 coefficients in double: {eb:.3e}")
print("R = {" + ", ".join(hexf(c) for c in big) + "}")
