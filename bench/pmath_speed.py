"""Speed of the portable float32 math through the real unary kernels, 1 thread.

For each function: ns per element of the generated CPU unary kernel (the one the
CPU provider launches for Exp, Tanh, Erf, Sigmoid, Log, Gelu, ... on float32),
of numpy's float32 ufunc (where there is one) and of onnxruntime running a
one-node model (intra-op threads 1), on N float32 inputs drawn from a normal
distribution scaled to the range where the function varies (the values a model
feeds it). Median of ``--repeat`` timed calls after a warm-up.

``--vec`` also says whether LLVM vectorised the kernel's loop: it counts the
``<8 x float>``/``<4 x float>`` operations in the kernel's optimised LLVM IR and
the packed (``ps``) AVX instructions in its assembly.

Usage: python bench/pmath_speed.py [--n 100000 1000000] [--repeat 20] [--only tanh,erf] [--vec]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's hetero_explore

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from hetero_explore.kernels import elementwise  # noqa: E402,F401  (registers the kernels)
from hetero_explore.kernels.target import GENERATED  # noqa: E402

F = np.float32

#: name -> (generated CPU kernel, numpy float32 function or None, ONNX op, attrs, opset, input scale, offset)
CASES = {
    "exp": ("_Exp_f32_cpu", np.exp, "Exp", {}, 17, 4.0, 0.0),
    "log": ("_Log_f32_cpu", np.log, "Log", {}, 17, 4.0, 0.0),       # |x| (positive inputs)
    "tanh": ("_Tanh_f32_cpu", np.tanh, "Tanh", {}, 17, 2.0, 0.0),
    "erf": ("_Erf_f32_cpu", None, "Erf", {}, 17, 1.5, 0.0),
    "sigmoid": ("_Sigmoid_f32_cpu", lambda x: F(1) / (F(1) + np.exp(-x)), "Sigmoid", {}, 17, 4.0, 0.0),
    "softplus": ("_Softplus_f32_cpu", lambda x: np.logaddexp(F(0), x), "Softplus", {}, 17, 4.0, 0.0),
    "gelu_erf": ("_Gelu_erf_f32_cpu", None, "Gelu", {}, 20, 2.0, 0.0),
    "gelu_tanh": ("_Gelu_tanh_f32_cpu", None, "Gelu", {"approximate": "tanh"}, 20, 2.0, 0.0),
    "elu": ("_Elu_f32_cpu", None, "Elu", {"alpha": 1.0}, 17, 2.0, 0.0),
}


def _median_ns(fn, n, repeat):
    fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)) / n * 1e9


def _ort_session(op, attrs, opset):
    try:
        import onnx
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError:
        return None
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    try:
        return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    except Exception:  # an op this onnxruntime lacks
        return None


def vectorised(kernel_name):
    """(vector float ops in the optimised LLVM IR, packed float instructions in the asm)."""
    from numba import njit

    from hetero_explore.kernels.common import _retarget
    lk = GENERATED[kernel_name]
    # a fresh, uncached compile (numba cannot inspect code loaded from its cache)
    disp = njit(cache=False, error_model="numpy", nogil=True)(_retarget(lk.py, "cpu"))
    x = np.ones(8, F)
    disp(x, np.empty_like(x), F(1.0), F(0.0), 0)
    sig = disp.signatures[0]
    ir = disp.inspect_llvm(sig)
    asm = disp.inspect_asm(sig)
    vec_ir = len(re.findall(r"<(?:4|8|16) x float>", ir))
    packed = len(re.findall(r"\bv(?:add|sub|mul|div|max|min|cmp\w*|blendv|and|or)ps\b", asm))
    return vec_ir, packed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, nargs="*", default=[100_000, 1_000_000])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--vec", action="store_true", help="report vectorisation of each kernel")
    ap.add_argument("--no-ort", action="store_true")
    args = ap.parse_args()
    import numba
    numba.set_num_threads(1)
    names = [c for c in (args.only.split(",") if args.only else CASES)]
    rng = np.random.default_rng(0)
    print(f"{'function':<10} {'n':>8} {'ours ns/el':>11} {'numpy':>8} {'ort':>8} {'ours/ort':>9}"
          + ("  vec-IR  packed-asm" if args.vec else ""))
    for name in names:
        kname, npf, op, attrs, opset, scale, off = CASES[name]
        k = GENERATED[kname].compiled
        sess = None if args.no_ort else _ort_session(op, attrs, opset)
        for n in args.n:
            x = (rng.standard_normal(n) * scale + off).astype(F)
            if name == "log":
                x = np.abs(x)
            out = np.empty_like(x)
            ours = _median_ns(lambda: k(x, out, F(1.0) if name == "elu" else F(0.0), F(0.0), 0), n, args.repeat)
            nps = _median_ns(lambda: npf(x), n, args.repeat) if npf is not None else float("nan")
            orts = (_median_ns(lambda: sess.run(None, {"x": x}), n, args.repeat) if sess is not None
                    else float("nan"))
            line = f"{name:<10} {n:>8} {ours:>11.2f} {nps:>8.2f} {orts:>8.2f} {ours / orts:>9.2f}"
            if args.vec and n == args.n[0]:
                vi, pa = vectorised(kname)
                line += f"  {vi:>6}  {pa:>10}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
