"""
Fits the coefficients of Loom's float32 erf (loom_erff in src/backends/native/jit_fast.ts). Two
pieces share ONE Horner evaluation of degree 9 (the kernel picks each coefficient per lane), in
a variable v ∈ [−1, 1]:
  |x| < T = 2.125:  v = x²·VS_A + VS_B,        erf(x) = x + x·P_small(v)   (P_small ≈ erf(x)/x − 1)
  T ≤ |x| < 3.92:   v = |x|·VB_A + VB_B,       erf(x) = ±(1 − P_big(v))    (P_big ≈ erfc(|x|))
  |x| ≥ 3.92:       ±1 (erfc(3.92) < 3.3e-8)
The affine maps' constants are float32 and the fit uses them exactly as the kernel does.
Least squares on Chebyshev nodes, reweighted toward minimax (Lawson), against Python's double
math.erf / math.erfc; coefficients rounded to float32 and printed as C hex floats, highest
degree first. Run: /usr/bin/python3 bench/erf_fit.py (output committed as bench/erf_fit.txt).
The bound that counts is the one bench/erf_bound.ts measures over every float32 in [0, 4] with
float32 arithmetic; the fit errors printed here are in double with the rounded coefficients.
"""
import math
import numpy as np

erf = np.vectorize(math.erf)
erfc = np.vectorize(math.erfc)
T, HI, DEG = 2.125, 3.92, 9
f32 = lambda c: float(np.float32(c))
VS_A, VS_B = f32(2 / T**2), -1.0
VB_A = f32(2 / (HI - T))
VB_B = f32(-(T + HI) / (HI - T))


def fit(f, var, lo, hi, m=6000, rounds=80):
    k = np.arange(m)
    x = (lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.pi * (k + 0.5) / m)
    A, y, w = np.stack([var(x) ** i for i in range(DEG + 1)], 1), f(x), np.ones(m) / m
    for _ in range(rounds):
        c = np.linalg.lstsq(A * np.sqrt(w)[:, None], y * np.sqrt(w), rcond=None)[0]
        r = np.abs(A @ c - y)
        w *= r / r.max() + 1e-3
        w /= w.sum()
    return c


def hexf(c):
    m, e = float(np.float32(c)).hex().split("p")
    return m.rstrip("0").rstrip(".") + "p" + e + "f"


def horner(c, v):
    return np.polyval(np.float32(c)[::-1].astype(float), v)


vs = lambda x: x * x * VS_A + VS_B
vb = lambda x: x * VB_A + VB_B
small = fit(lambda x: erf(x) / x - 1, vs, 1e-4, T)
big = fit(erfc, vb, T, HI)
xs = np.linspace(1e-4, T, 200001)
xb = np.linspace(T, HI, 200001)
es = np.abs(xs + xs * horner(small, vs(xs)) - erf(xs)).max()
eb = np.abs(1 - horner(big, vb(xb)) - erf(xb)).max()
print(f"T = {T}, HI = {HI}, degree {DEG}")
print(f"VS_A = {hexf(VS_A)}, VS_B = {hexf(VS_B)}, VB_A = {hexf(VB_A)}, VB_B = {hexf(VB_B)}")
print(f"small (x + x·P(v)): max abs fit error in double with float32 coefficients: {es:.3e}")
print("P_small (c9 … c0) = {" + ", ".join(hexf(c) for c in small[::-1]) + "}")
print(f"big (1 − P(v)): max abs fit error in double with float32 coefficients: {eb:.3e}")
print("P_big (c9 … c0) = {" + ", ".join(hexf(c) for c in big[::-1]) + "}")
