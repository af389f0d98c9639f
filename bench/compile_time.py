"""Compile time of the portable float32 math: one loop kernel per pmath function.

For each public function of ``kernels/pmath.py`` this compiles (uncached)
a plain ``@njit`` loop ``y[i] = f(x[i])`` on float32 arrays -- the shape of the
generated unary kernels, with the function inlined into the loop -- and prints the
seconds it took and how much of it was numba's ``inline_inlinables`` pass (which
deep-copies a callee's IR block by block at every inlined call site, so nested
helpers with many conditional expressions compile slowly; see pmath's docstring).

Usage: python bench/compile_time.py [--only exp_f32,cosh_f32]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's hetero_explore

import numpy as np  # noqa: E402
import numba  # noqa: E402

from hetero_explore.kernels import pmath  # noqa: E402

UNARY = ["exp_f32", "log_f32", "tanh_f32", "sigmoid_f32", "erf_f32", "sqrt_f32", "softplus_f32",
         "sin_f32", "cos_f32", "tan_f32", "atan_f32", "asin_f32", "acos_f32", "sinh_f32", "cosh_f32",
         "asinh_f32", "acosh_f32", "atanh_f32"]


def _loop(f, nargs):
    if nargs == 2:
        def loop(x, y):
            for i in range(x.size):
                y[i] = f(x[i], y[i])
    else:
        def loop(x, y):
            for i in range(x.size):
                y[i] = f(x[i])
    return numba.njit(error_model="numpy")(loop)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated function names (default: all)")
    args = ap.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or UNARY + ["pow_f32"]
    x = np.ones(64, np.float32)
    y = np.ones(64, np.float32)
    total = 0.0
    print(f"{'function':<14}{'compile s':>10}{'inliner s':>10}")
    for name in names:
        fn = _loop(getattr(pmath, name), 2 if name == "pow_f32" else 1)
        t = time.perf_counter()
        fn(x, y)
        dt = time.perf_counter() - t
        total += dt
        times = fn.get_metadata(fn.signatures[0])["pipeline_times"]["nopython"]
        inl = sum(v.run for k, v in times.items() if "inline_inlinables" in k)
        print(f"{name:<14}{dt:>10.2f}{inl:>10.2f}", flush=True)
    print(f"{'total':<14}{total:>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
