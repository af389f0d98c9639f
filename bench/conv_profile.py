"""Every Conv node of the bench/models.py families, one by one, against onnxruntime.

    python bench/conv_profile.py                      # resnet, detector, mobilenet, vit; 1 thread
    python bench/conv_profile.py --only resnet --threads 2 --runs 30

For each Conv node (after the loader's optimisation, so Conv+BN are folded as
in a real run) prints its shape (N,C,H,W -> M,KH,KW, stride, group), its
multiply-adds, the CPU fast path's time (the kernel called directly on the
node's weights, the least of ``--runs`` calls), its GMAC/s, which CPU path
``_conv_cpu`` takes for it, and onnxruntime's time for a one-node model of the
same Conv (weights and bias as initializers, the least of ``--runs`` runs, same
thread count). The ratio column is ours / onnxruntime's. Never run as a test.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.pop("NUMBA_ENABLE_CUDASIM", None)  # CPU only
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402


def conv_nodes(name):
    """(node name, x shape, w, b or None, attrs, y shape) of every Conv of family ``name``."""
    import onnx
    from onnx import numpy_helper
    import models as bm
    from hetero_explore.loader import load_model

    path, _ = bm.export(name)
    g = load_model(str(path))
    m = g.model if hasattr(g, "model") else None
    if m is None:
        m = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    shapes = {}
    for vi in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        shapes[vi.name] = tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
    out = []
    for n in m.graph.node:
        if n.op_type != "Conv":
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        w = inits[n.input[1]]
        b = inits[n.input[2]] if len(n.input) > 2 and n.input[2] else None
        out.append((n.name, shapes[n.input[0]], w, b, attrs, shapes[n.output[0]]))
    return out


def path_of(p):
    """Which branch of fastpaths._conv_cpu a geometry takes (mirrors its tests)."""
    from hetero_explore.providers.kernels import fastpaths as fp
    N, C, H, W, M, KH, KW, OH, OW, sh, sw, dh, dw, pt, pl, G = (int(v) for v in p[:16])
    if p[16] != 1 or p[17] != 1 or p[18] != 1:
        return "item (3-D)"
    Cg, Mg = C // G, M // G
    if G > 1 and Cg == 1:
        return "dw"
    if G > 1 and Mg <= fp._DIRECT_MG:
        return "direct"
    if hasattr(fp, "_conv_wide_ok") and fp._conv_wide_ok(p):
        return "wide"
    if KH == 1 and KW == 1 and sh == 1 and sw == 1 and pt == 0 and pl == 0 and OH == H and OW == W:
        return "gemv 1x1" if hasattr(fp, "_conv_gemv") and OH * OW < fp._MK_W else "gemm 1x1"
    return "im2col+gemm"


def best_of(fn, runs):
    fn()
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def ort_time(xs, w, b, attrs, threads, runs):
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
    ins = ["x", "w"] + (["b"] if b is not None else [])
    inits = [numpy_helper.from_array(w, "w")] + ([numpy_helper.from_array(b, "b")] if b is not None else [])
    node = helper.make_node("Conv", ins, ["y"], **attrs)
    graph = helper.make_graph([node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(xs))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal(xs).astype(np.float32)
    return best_of(lambda: sess.run(None, {"x": x}), runs), sess.run(None, {"x": x})[0], x


def ours_time(name, xs, w, b, attrs, ys, runs, x):
    from types import SimpleNamespace
    from hetero_explore.providers.kernels import nn
    ctx = SimpleNamespace(node=SimpleNamespace(op_type="Conv", name=name), attrs=attrs)
    p = nn.conv_geometry(ctx, xs, w.shape, ys)
    out = np.empty(int(np.prod(ys)), dtype=np.float32)
    wf = np.ascontiguousarray(w, dtype=np.float32).ravel()
    bf = np.ascontiguousarray(b, dtype=np.float32).ravel() if b is not None else np.zeros(1, np.float32)
    from hetero_explore.providers.kernels import fastpaths
    fastpaths.install()
    k = nn._CONV.cpu_fast.compiled
    xf = x.ravel()
    t = best_of(lambda: k(xf, wf, bf, b is not None, p, out), runs)
    return t, out.reshape(ys), p


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="resnet,detector,mobilenet,vit")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args(argv)
    import numba
    numba.set_num_threads(args.threads)
    print(f"# Conv nodes, {args.threads} thread(s), least of {args.runs}; load {os.getloadavg()[0]:.2f}")
    for fam in args.only.split(","):
        rows = conv_nodes(fam)
        print(f"\n## {fam}: {len(rows)} Conv nodes")
        print(f"{'node':<22} {'N,C,H,W':>16} {'M,KH,KW':>10} {'s':>2} {'g':>4} {'MMAC':>7} {'ours us':>8} "
              f"{'GMAC/s':>6} {'ort us':>7} {'ort GMAC/s':>10} {'ratio':>5}  path")
        tot_o = tot_r = 0.0
        for nm, xs, w, b, attrs, ys in rows:
            tr, yr, x = ort_time(xs, w, b, attrs, args.threads, args.runs)
            to, yo, p = ours_time(nm, xs, w, b, attrs, ys, args.runs, x)
            err = float(np.max(np.abs(yo - yr)) / max(np.max(np.abs(yr)), 1e-30))
            assert err < 1e-4, (nm, err)
            macs = int(np.prod(ys)) * int(np.prod(w.shape[1:]))
            tot_o += to
            tot_r += tr
            s = attrs.get("strides", [1])[0]
            print(f"{nm[-22:]:<22} {','.join(map(str, xs)):>16} {','.join(map(str, w.shape[:1] + w.shape[2:])):>10} "
                  f"{s:>2} {attrs.get('group', 1):>4} {macs / 1e6:>7.2f} {to * 1e6:>8.1f} {macs / to / 1e9:>6.1f} "
                  f"{tr * 1e6:>7.1f} {macs / tr / 1e9:>10.1f} {to / tr:>5.2f}  {path_of(p)}")
        print(f"{'total':<22} {'':>16} {'':>10} {'':>2} {'':>4} {'':>7} {tot_o * 1e6:>8.1f} {'':>6} "
              f"{tot_r * 1e6:>7.1f} {'':>10} {tot_o / tot_r:>5.2f}")


if __name__ == "__main__":
    main()
