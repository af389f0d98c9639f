"""Accuracy of the portable float32 math (hetero_explore.kernels.pmath).

For each function: >= 10**6 float32 inputs (random float32 bit patterns filtered
to the function's meaningful domain, plus a dense uniform grid over the region
where the function varies), result compared with the float64 reference rounded
to float32. The distance is counted in float32 ULPs as the difference of the
two values' positions in the ordered set of float32 numbers (so 1 = adjacent
floats; +-0 are one point; nan vs nan = 0).

References (float64, then rounded to float32):
  exp/log/tanh/sqrt: numpy's float64 ufuncs; sigmoid: 1/(1+exp(-x)) in float64
  (e^x/(1+e^x) for x < 0); erf: CPython's ``math.erf`` (libm double erf) on
  every input; pow: numpy float64 ``np.power``.

Usage: python bench/pmath_ulp.py [--n N] [--seed S]
       python bench/pmath_ulp.py --exhaustive [exp log tanh sigmoid erf]
           (every float32 input, float64 libm reference inside numba; minutes per function)
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from numba import njit

from hetero_explore.kernels import pmath


@njit
def _map1(f, xs, out):
    for i in range(xs.shape[0]):
        out[i] = f(xs[i])


@njit
def _map2(f, xs, ys, out):
    for i in range(xs.shape[0]):
        out[i] = f(xs[i], ys[i])


def ordinal(a: np.ndarray) -> np.ndarray:
    """float32 -> int64 position in the ordered float32 line (-0 == +0)."""
    i = a.astype(np.float32).view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF), i)


def ulp_dist(got: np.ndarray, ref64: np.ndarray) -> np.ndarray:
    ref = ref64.astype(np.float32)
    d = np.abs(ordinal(got) - ordinal(ref))
    gn, rn = np.isnan(got), np.isnan(ref)
    d = np.where(gn & rn, 0, d)
    d = np.where(gn ^ rn, 2**32, d)
    return d


def random_floats(rng, n, lo, hi):
    """Random float32 bit patterns (log-uniform magnitudes, both signs) in [lo, hi]."""
    out = []
    have = 0
    while have < n:
        b = rng.integers(0, 2**32, size=2 * n, dtype=np.uint64).astype(np.uint32).view(np.float32)
        b = b[np.isfinite(b) & (b >= lo) & (b <= hi)]
        out.append(b)
        have += b.size
    return np.concatenate(out)[:n]


def grid(lo, hi, n):
    return np.linspace(lo, hi, n, dtype=np.float64).astype(np.float32)


SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-45, -1e-45, 1.1754944e-38,
                     3.4028235e38, -3.4028235e38, 0.5, 2.0], dtype=np.float32)


def inputs_unary(rng, n, lo, hi, glo, ghi):
    return np.concatenate([random_floats(rng, n // 2, lo, hi), grid(glo, ghi, n - n // 2), SPECIALS])


def sigmoid64(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def run(n: int, seed: int):
    rng = np.random.default_rng(seed)
    # every portable unary function of pmath's table, with its reference and domain
    cases = []
    for name, p in pmath.UNARY.items():
        lo, hi = p.domain
        cases.append((name, p.fn, inputs_unary(rng, n, lo, hi, max(lo, -20.0), min(hi, 20.0)), p.reference))
    rows = []
    with np.errstate(all="ignore"):
        for name, f, xs, ref in cases:
            t = time.perf_counter()
            out = np.empty_like(xs)
            _map1(f, xs, out)
            d = ulp_dist(out, ref(xs.astype(np.float64)))
            rows.append((name, xs.size, int(d.max()), float(d.mean()), float((d > 1).mean()),
                         xs[np.argmax(d)], time.perf_counter() - t))

        # pow: positive bases with exponents keeping |y ln x| in range, bases near 1 with
        # large exponents, negative bases with integer exponents, and exact integer powers.
        t = time.perf_counter()
        m = n // 4
        x1 = random_floats(rng, m, 0, np.inf)
        y1 = (rng.uniform(-100, 100, m) / np.maximum(np.abs(np.log(x1.astype(np.float64))), 1e-30))
        y1 = y1.astype(np.float32)
        x2 = grid(0.5, 2.0, m)
        y2 = random_floats(rng, m, -300, 300)
        x3 = -random_floats(rng, m, 0, 1e4)
        y3 = rng.integers(-40, 41, m).astype(np.float32)
        x4 = rng.integers(-30, 31, n - 3 * m).astype(np.float32)
        y4 = rng.integers(-20, 21, n - 3 * m).astype(np.float32)
        sp = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, np.inf, -np.inf, np.nan, 3.0, -3.0, 1e-45],
                      dtype=np.float32)
        xs5, ys5 = (a.ravel() for a in np.meshgrid(sp, sp))
        xs = np.concatenate([x1, x2, x3, x4, xs5])
        ys = np.concatenate([y1, y2, y3, y4, ys5])
        out = np.empty_like(xs)
        _map2(pmath.pow_f32, xs, ys, out)
        d = ulp_dist(out, np.power(xs.astype(np.float64), ys.astype(np.float64)))
        # special cases vs numpy's float32 np.power on arrays (C99 pow semantics): where
        # either result is nan, inf or zero the two must agree bitwise (nan sign aside)
        ref5 = np.power(xs5, ys5)
        got5 = out[-xs5.size:]
        special = ~np.isfinite(ref5) | ~np.isfinite(got5) | (ref5 == 0) | (got5 == 0)
        g, r = got5[special], ref5[special]
        bad_special = int((ulp_dist(g, r.astype(np.float64)) != 0).sum()
                          + ((g == 0) & (np.signbit(g) != np.signbit(r))).sum())
        rows.append(("pow", xs.size, int(d.max()), float(d.mean()), float((d > 1).mean()),
                     (xs[np.argmax(d)], ys[np.argmax(d)]), time.perf_counter() - t))
    return rows, bad_special


# --- exhaustive mode: every float32 bit pattern, reference in float64 libm via numba ---------
@njit
def _ref64(code, x):
    if code == 0:
        return math.exp(x)
    if code == 1:
        return math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan)
    if code == 2:
        return math.tanh(x)
    if code == 3:
        e = math.exp(-abs(x))
        return 1.0 / (1.0 + e) if x >= 0 else e / (1.0 + e)
    return math.erf(x)


@njit
def _ord32(v):
    buf = np.empty(1, np.float32)
    buf[0] = v
    i = np.int64(buf.view(np.int32)[0])
    return -(i & 0x7FFFFFFF) if i < 0 else i


@njit
def _exhaustive_chunk(f, code, xs, hist):
    worst = 0
    worst_x = np.float32(0)
    total = 0
    for j in range(xs.shape[0]):
        x = xs[j]
        got = f(x)
        ref = np.float32(_ref64(code, np.float64(x)))
        if got != got or ref != ref:
            d = 0 if (got != got and ref != ref) else 2**32
        else:
            d = abs(_ord32(got) - _ord32(ref))
        total += d
        hist[min(d, hist.shape[0] - 1)] += 1
        if d > worst:
            worst = d
            worst_x = x
    return worst, worst_x, total


def exhaustive(names):
    funcs = {"exp": (pmath.exp_f32, 0), "log": (pmath.log_f32, 1), "tanh": (pmath.tanh_f32, 2),
             "sigmoid": (pmath.sigmoid_f32, 3), "erf": (pmath.erf_f32, 4)}
    step = 1 << 24
    print(f"{'function':<9} {'inputs':>11} {'max ULP':>8} {'mean ULP':>9} {'# >1 ULP':>9}  worst input")
    for name in names:
        f, code = funcs[name]
        t = time.perf_counter()
        hist = np.zeros(4, np.int64)
        worst, worst_x, total = 0, None, 0
        for start in range(0, 1 << 32, step):
            xs = np.arange(start, start + step, dtype=np.uint64).astype(np.uint32).view(np.float32)
            w, wx, tot = _exhaustive_chunk(f, code, xs, hist)
            total += tot
            if w > worst:
                worst, worst_x = w, wx
        n = 1 << 32
        print(f"{name:<9} {n:>11} {worst:>8} {total / n:>9.4f} {hist[2:].sum():>9}  {worst_x!r}"
              f"   ({time.perf_counter() - t:.0f} s)", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000, help="inputs per function (default 10**6)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--exhaustive", nargs="*", metavar="FN",
                    help="instead: all 2**32 float32 inputs of the given unary functions "
                         "(exp log tanh sigmoid erf; default all five; minutes each)")
    args = ap.parse_args()
    if args.exhaustive is not None:
        exhaustive(args.exhaustive or ["exp", "log", "tanh", "sigmoid", "erf"])
        return
    t0 = time.perf_counter()
    rows, bad_special = run(args.n, args.seed)
    print(f"{'function':<9} {'inputs':>9} {'max ULP':>8} {'mean ULP':>9} {'frac >1':>9}  {'worst input':<28} {'time s':>6}")
    for name, cnt, mx, mean, gt1, worst, dt in rows:
        w = f"{worst[0]!r}, {worst[1]!r}" if isinstance(worst, tuple) else repr(worst)
        print(f"{name:<9} {cnt:>9} {mx:>8} {mean:>9.4f} {gt1:>9.2e}  {w:<28} {dt:>6.2f}")
    print(f"pow special-value grid vs numpy float32 np.power: {bad_special} mismatches")
    print(f"total {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
