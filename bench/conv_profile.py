"""Every Conv node of the bench/models.py families, one by one, against onnxruntime.

    python bench/conv_profile.py                      # resnet, detector, mobilenet, vit; 1 thread
    python bench/conv_profile.py --only resnet --threads 2 --runs 30

For each Conv node (after the loader's optimisation, so Conv+BN are folded as
in a real run) prints its shape (N,C,H,W -> M,KH,KW, stride, group), its
multiply-adds, the CPU fast path's time (what the node's build runs: the weights
packed once by the "conv" prepare rule, ``cpu_fast.conv.conv_pack`` and
``conv_packed_cpu``, or the ``_conv_cpu`` run rule for paths that read the weight
as it is), its GMAC/s,
which CPU path it takes, and onnxruntime's time for a one-node model of the
same Conv (weights and bias as initializers, same thread count; its time
includes the NCHWc reorders it does around a lone Conv, which in a whole model
it mostly does not). The two run alternately, ``--runs`` times each (each run
repeats the call enough times for ~0.2 ms); the times are medians of the
calling thread's CPU time per call (``--wall``: of wall time), robust on a
shared machine. The ratio column is ours / onnxruntime's. Never run as a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
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
    from hetero_explore.load.loader import load_model

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


def _fast():
    """The module of the Conv fast paths: cpu_fast.conv (``fastpaths`` in older checkouts)."""
    try:
        from hetero_explore.kernels.cpu_fast import conv
        return conv
    except ImportError:
        from hetero_explore.kernels import fastpaths
        return fastpaths


def path_of(p):
    """Which branch of the Conv fast path (_conv_cpu) a geometry takes."""
    fp = _fast()
    if hasattr(fp, "conv_kind"):
        return fp.CONV_PATHS[fp.conv_kind(p)]
    # older checkouts (before / after comparisons): mirrors their _conv_cpu
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


def interleaved(fns, runs, wall=False):
    """Median seconds per call of each of ``fns``, run alternately ``runs`` times each; a run
    repeats the call enough times for ~0.2 ms (the clock's cost stays out of small calls)."""
    clock = time.perf_counter if wall else time.thread_time
    reps = []
    for fn in fns:
        fn()
        t = time.perf_counter()
        fn()
        reps.append(max(1, min(1000, int(2e-4 / max(time.perf_counter() - t, 1e-7)))))
    times = [[] for _ in fns]
    for _ in range(runs):
        for fn, r, ts in zip(fns, reps, times):
            t = clock()
            for _ in range(r):
                fn()
            ts.append((clock() - t) / r)
    return [statistics.median(ts) for ts in times]


def ort_session(xs, w, b, attrs, threads):
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
    return (lambda: sess.run(None, {"x": x})), sess.run(None, {"x": x})[0], x


def ours_call(name, xs, w, b, attrs, ys, x):
    from types import SimpleNamespace
    from hetero_explore.kernels import nn
    ctx = SimpleNamespace(node=SimpleNamespace(op_type="Conv", name=name), attrs=attrs)
    p = nn.conv_geometry(ctx, xs, w.shape, ys)
    out = np.empty(int(np.prod(ys)), dtype=np.float32)
    wf = np.ascontiguousarray(w, dtype=np.float32).ravel()
    bf = np.ascontiguousarray(b, dtype=np.float32).ravel() if b is not None else np.zeros(1, np.float32)
    from hetero_explore.kernels import registry
    registry.registry()     # registers the fast paths
    fp = _fast()
    xf = x.ravel()
    wp = fp.conv_pack(wf, p) if hasattr(fp, "conv_pack") else None
    if wp is not None:   # what _build_conv runs for an initializer weight
        k = fp.conv_packed_cpu
        fn = lambda: k(xf, wp, bf, b is not None, p, out)   # noqa: E731
    else:
        k = fp._conv_cpu.compiled
        fn = lambda: k(xf, wf, bf, b is not None, p, out)   # noqa: E731
    fn()
    return fn, out.reshape(ys), p


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="resnet,detector,mobilenet,vit")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--wall", action="store_true", help="medians of wall time instead of thread CPU time")
    args = ap.parse_args(argv)
    import numba
    numba.set_num_threads(args.threads)
    print(f"# Conv nodes, {args.threads} thread(s), medians of {args.runs} alternating runs "
          f"({'wall' if args.wall else 'thread CPU'} time); load {os.getloadavg()[0]:.2f}")
    for fam in args.only.split(","):
        rows = conv_nodes(fam)
        print(f"\n## {fam}: {len(rows)} Conv nodes")
        print(f"{'node':<22} {'N,C,H,W':>16} {'M,KH,KW':>10} {'s':>2} {'g':>4} {'MMAC':>7} {'ours us':>8} "
              f"{'GMAC/s':>6} {'ort us':>7} {'ort GMAC/s':>10} {'ratio':>5}  path")
        tot_o = tot_r = 0.0
        for nm, xs, w, b, attrs, ys in rows:
            fr, yr, x = ort_session(xs, w, b, attrs, args.threads)
            fo, yo, p = ours_call(nm, xs, w, b, attrs, ys, x)
            to, tr = interleaved([fo, fr], args.runs, args.wall)
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
