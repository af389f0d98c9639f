"""Kernel and whole-model latency: the Numba CPU provider vs onnxruntime's CPU
provider, side by side, with the same number of threads.

    .venv/bin/python bench/kernel_speed.py              # everything (about 1-2 min, most of it the cold start)
    .venv/bin/python bench/kernel_speed.py --quick      # fewer repeats, 112x112 ResNet, no cold start (seconds)
    .venv/bin/python bench/kernel_speed.py --threads 2  # both sides with 2 threads

Threads. ``--threads T`` (default 1) sets onnxruntime's
``intra_op_num_threads = T`` and ``inter_op_num_threads = 1`` (sequential
execution), and ``NUMBA_NUM_THREADS = T`` (plus ``OMP/OPENBLAS/MKL_NUM_THREADS``)
before numpy and numba are imported. Our kernels are plain ``@njit`` loops:
none uses ``prange`` or ``parallel=True``, so they run single-threaded
whatever ``NUMBA_NUM_THREADS`` says; at T = 1 the comparison is one core
against one core.

What is timed. Ours: ``HeterogeneousExecutor(plan(graph, [cpu()])).run(feeds)``
(built once, one warm-up run excluded), i.e. kernels plus the executor's
per-run work (input validation, staging graph inputs into provider buffers,
allocating and freeing intermediates; initializers are staged once when the
executor is built). onnxruntime:
``InferenceSession.run`` on a session built once (default graph
optimizations, ORT_ENABLE_ALL: it fuses Conv+BatchNormalization+Relu and
prepacks constant weights), one warm-up run excluded. Weights are
initializers (constants) on both sides, as in a real model. Each case runs
``repeat`` times or until its time budget is spent (at least 3 runs); the
table gives the median wall time and the median process CPU time (all
threads of this process; on a shared machine CPU time is the steadier
figure), the ratio ours/onnxruntime of each, and the largest difference of
the outputs relative to their magnitude (a sanity check, not a test).

Where the time goes. For the whole models, each of our kernels is timed
separately (three extra runs with a process-CPU timer around every kernel
call; the run with the median total is shown) and summed per op type, next
to onnxruntime's own profiler (per node, wall time, summed per op type; its
fused nodes appear as FusedConv, FusedMatMul, Gelu etc.). "executor" is our
run's CPU time minus the kernels': staging graph inputs, allocating and
freeing, bookkeeping.

Cold start. A fresh interpreter imports the package, loads the ResNet-18-style
model from a file, plans it on the CPU provider, builds the kernels and runs
it once, with ``NUMBA_CACHE_DIR`` pointing at an empty temporary directory
(every kernel is JIT compiled); then a second fresh interpreter does the same
with the now-warm cache directory. Both wall times are reported (goal: warm
<= 2 s), each with its breakdown.

Results are printed as Markdown tables and written to
``bench/results/kernels.json``. Never run as a test (timings are not assertions).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _early_threads(argv) -> int:
    """--threads, read before numpy/numba are imported (they read the env once)."""
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
    return 1


THREADS = _early_threads(sys.argv[1:])
for _k in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_k] = str(THREADS)
os.environ.pop("NUMBA_ENABLE_CUDASIM", None)  # CPU only; the simulator plays no part here

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import hetero_explore as he  # noqa: E402
from hetero_explore.data import models  # noqa: E402
from hetero_explore.execution.executor import HeterogeneousExecutor  # noqa: E402
from hetero_explore.execution.inputs import random_inputs  # noqa: E402
from hetero_explore.providers import cpu  # noqa: E402

HERE = Path(__file__).resolve().parent
OPSET = 17


# -- single-op models -----------------------------------------------------------------------
def _one_node(op, inputs, weights, out_shape, seed=0, **attrs):
    """A one-node model. ``inputs``: [(name, shape)] graph inputs; ``weights``:
    [(name, array)] initializers; inputs then weights feed the node in that order."""
    names = [n for n, _ in inputs] + [n for n, _ in weights]
    node = helper.make_node(op, names, ["y"], name=op.lower(), **attrs)
    graph = helper.make_graph(
        [node], f"bench_{op}",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in inputs],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape))],
        initializer=[numpy_helper.from_array(np.ascontiguousarray(a, dtype=np.float32), n) for n, a in weights])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def _rand(rng, *shape, scale=None):
    fan = shape[-1] if scale is None else 1
    s = (1.0 / np.sqrt(max(fan, 1))) if scale is None else scale
    return (rng.standard_normal(shape) * s).astype(np.float32)


def op_cases():
    """(name, model builder, MAC count or None) for the per-op micro benchmarks."""
    rng = np.random.default_rng(0)

    def matmul(M, K, N):
        return lambda: _one_node("MatMul", [("a", (M, K))], [("b", _rand(rng, K, N))], (M, N))

    def conv(N, C, H, M, k, s, p, bias=False):
        OH = (H + 2 * p - k) // s + 1
        w = [("w", _rand(rng, M, C, k, k, scale=1.0 / np.sqrt(C * k * k)))]
        if bias:
            w.append(("b", _rand(rng, M, scale=0.1)))
        return (lambda: _one_node("Conv", [("x", (N, C, H, H))], w, (N, M, OH, OH), kernel_shape=[k, k],
                                  strides=[s, s], pads=[p] * 4),
                N * M * OH * OH * C * k * k)

    c1, mac1 = conv(1, 64, 56, 64, 3, 1, 1)
    c2, mac2 = conv(1, 3, 224, 64, 7, 2, 3)
    c3, mac3 = conv(1, 256, 14, 256, 3, 1, 1)
    c4, mac4 = conv(1, 64, 56, 128, 1, 2, 0)
    C = 64
    bn_w = [("scale", 1 + _rand(rng, C, scale=0.1)), ("bias", _rand(rng, C, scale=0.1)),
            ("mean", _rand(rng, C, scale=0.1)), ("var", 1 + np.abs(_rand(rng, C, scale=0.1)))]
    return [
        ("MatMul 256x256x256", matmul(256, 256, 256), 256 ** 3),
        ("MatMul 512x512x512", matmul(512, 512, 512), 512 ** 3),
        ("MatMul batched 8x(128x64 @ 64x128), both inputs",
         lambda: _one_node("MatMul", [("a", (8, 128, 64)), ("b", (8, 64, 128))], [], (8, 128, 128)),
         8 * 128 * 64 * 128),
        ("Gemm 128x768 @ (768x768)^T + bias",
         lambda: _one_node("Gemm", [("a", (128, 768))], [("w", _rand(rng, 768, 768)),
                                                         ("c", _rand(rng, 768, scale=0.1))],
                           (128, 768), transB=1),
         128 * 768 * 768),
        ("Conv 1x64x56x56, 3x3 p1, 64 out", c1, mac1),
        ("Conv 1x3x224x224, 7x7/2 p3, 64 out (stem)", c2, mac2),
        ("Conv 1x256x14x14, 3x3 p1, 256 out", c3, mac3),
        ("Conv 1x64x56x56, 1x1/2, 128 out (shortcut)", c4, mac4),
        ("Softmax 64x1024 (axis -1)",
         lambda: _one_node("Softmax", [("x", (64, 1024))], [], (64, 1024), axis=-1), None),
        ("LayerNormalization 64x768",
         lambda: _one_node("LayerNormalization", [("x", (64, 768))],
                           [("g", 1 + _rand(rng, 768, scale=0.1)), ("b", _rand(rng, 768, scale=0.1))],
                           (64, 768), axis=-1, epsilon=1e-5), None),
        ("BatchNormalization 1x64x112x112",
         lambda: _one_node("BatchNormalization", [("x", (1, C, 112, 112))], bn_w, (1, C, 112, 112),
                           epsilon=1e-5), None),
        ("MaxPool 1x64x112x112, 3x3/2 p1",
         lambda: _one_node("MaxPool", [("x", (1, C, 112, 112))], [], (1, C, 56, 56), kernel_shape=[3, 3],
                           strides=[2, 2], pads=[1, 1, 1, 1]), None),
    ]


def model_cases(image: int):
    enc = dict(batch=1, seq=128, dim=256, heads=4, layers=4, ff=1024)
    # MACs: ResNet-18 is 1.82 GMAC at 224 (scales with the pixel count); the encoder is counted below
    B, S, D, F, L = enc["batch"], enc["seq"], enc["dim"], enc["ff"], enc["layers"]
    enc_mac = L * B * (4 * S * D * D + 2 * S * S * D + 2 * S * D * F)
    return [
        (f"ResNet-18-style, 1x3x{image}x{image}, 1000 classes",
         lambda: models.resnet18_like(image=image), int(1.814e9 * (image / 224) ** 2)),
        ("Transformer encoder, 1x128x256, 4 heads, 4 layers, ff 1024",
         lambda: models.transformer(**enc), enc_mac),
    ]


# -- timing ---------------------------------------------------------------------------------
def _session(model, profile_prefix=None):
    so = ort.SessionOptions()
    so.intra_op_num_threads = THREADS
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    if profile_prefix:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _time(fn, repeat, budget_s):
    """Median wall and process-CPU seconds of ``fn()``: ``repeat`` runs, or fewer (>= 3) within the budget."""
    walls, cpus = [], []
    t_end = time.perf_counter() + budget_s
    while len(walls) < repeat and (len(walls) < 3 or time.perf_counter() < t_end):
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        w1, c1 = time.perf_counter(), time.process_time()
        walls.append(w1 - w0)
        cpus.append(c1 - c0)
    return statistics.median(walls), statistics.median(cpus), len(walls)


def _rel_diff(ours: dict, theirs: list, names: list) -> float:
    worst = 0.0
    for n, t in zip(names, theirs):
        a = ours[n].astype(np.float64)
        t = np.asarray(t, dtype=np.float64)
        worst = max(worst, float(np.max(np.abs(a - t)) / max(np.max(np.abs(t)), 1e-30)))
    return worst


def bench_case(name, build, macs, repeat, budget_s):
    model = build()
    graph = he.load_model(model)
    feeds = random_inputs(graph, seed=0)
    t0 = time.perf_counter()
    ex = HeterogeneousExecutor(he.plan(graph, [cpu()]))
    ours_out = ex.run(feeds).outputs                     # warm-up (compiles kernels not cached yet)
    t_first = time.perf_counter() - t0
    sess = _session(model)
    names = [o.name for o in model.graph.output]
    theirs_out = sess.run(None, feeds)                   # warm-up
    ow, oc, on = _time(lambda: ex.run(feeds), repeat, budget_s)
    rw, rc, rn = _time(lambda: sess.run(None, feeds), repeat, budget_s)
    return dict(case=name, ours_wall_ms=ow * 1e3, ours_cpu_ms=oc * 1e3, ours_runs=on,
                ort_wall_ms=rw * 1e3, ort_cpu_ms=rc * 1e3, ort_runs=rn,
                ratio_wall=ow / rw, ratio_cpu=oc / rc if rc > 0 else float("nan"),
                ours_gflops=(2 * macs / oc / 1e9) if macs and oc > 0 else None,
                ort_gflops=(2 * macs / rc / 1e9) if macs and rc > 0 else None,
                max_rel_diff=_rel_diff(ours_out, theirs_out, names), first_build_run_s=t_first), (model, graph,
                                                                                                  feeds, ex, sess)


# -- profiles -------------------------------------------------------------------------------
class _TimedKernel:
    def __init__(self, kernel, op_type, acc):
        self.kernel, self.op_type, self.acc = kernel, op_type, acc

    def run(self, ins, outs):
        t0 = time.process_time()
        self.kernel.run(ins, outs)
        self.acc[self.op_type] = self.acc.get(self.op_type, 0.0) + time.process_time() - t0

    def __getattr__(self, k):
        return getattr(self.kernel, k)


def profile_ours(ex, feeds, runs=3):
    """Per-op-type kernel CPU seconds and the executor's share (the run with the median total)."""
    per: list[dict] = []
    walls = []
    saved = []
    for part in ex.parts:
        for st in part.steps:
            saved.append((st, st.kernel))
    try:
        for _ in range(runs):
            acc: dict = {}
            for st, k in saved:
                st.kernel = _TimedKernel(k, st.node.op_type, acc)
            w0 = time.process_time()
            ex.run(feeds)
            walls.append(time.process_time() - w0)
            per.append(acc)
    finally:
        for st, k in saved:
            st.kernel = k
    i = int(np.argsort(walls)[len(walls) // 2])
    acc, wall = per[i], walls[i]
    out = dict(sorted(acc.items(), key=lambda kv: -kv[1]))
    out["executor (staging, alloc, bookkeeping)"] = wall - sum(acc.values())
    return {k: v * 1e3 for k, v in out.items()}, wall * 1e3


def profile_ort(model, feeds, runs=3):
    """Per-op-type milliseconds per run from onnxruntime's profiler."""
    with tempfile.TemporaryDirectory() as d:
        sess = _session(model, profile_prefix=str(Path(d) / "ort"))
        sess.run(None, feeds)
        for _ in range(runs):
            sess.run(None, feeds)
        path = sess.end_profiling()
        events = json.loads(Path(path).read_text())
    per: dict = {}
    model_runs = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
    for e in events:
        if e.get("cat") == "Node" and str(e.get("name", "")).endswith("_kernel_time"):
            op = e.get("args", {}).get("op_name", "?")
            per[op] = per.get(op, 0.0) + e["dur"]
    n = max(len(model_runs), 1)
    total = sum(e["dur"] for e in model_runs) / n
    out = {k: v / n / 1e3 for k, v in sorted(per.items(), key=lambda kv: -kv[1])}
    out["session (outside kernels)"] = total / 1e3 - sum(out.values())
    return out, total / 1e3


# -- cold start -----------------------------------------------------------------------------
_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import hetero_explore as he
from hetero_explore.execution.executor import HeterogeneousExecutor
from hetero_explore.execution.inputs import random_inputs
from hetero_explore.providers import cpu
t1 = time.perf_counter()
g = he.load_model(sys.argv[1])
t2 = time.perf_counter()
p = he.plan(g, [cpu()])
ex = HeterogeneousExecutor(p)
t3 = time.perf_counter()
r = ex.run(random_inputs(g, seed=0))
t4 = time.perf_counter()
print(json.dumps(dict(import_s=t1 - t0, load_s=t2 - t1, plan_and_build_kernels_s=t3 - t2, first_run_s=t4 - t3,
                      in_process_s=t4 - t0, out_sum=float(r.outputs["logits"].sum()))))
"""


def cold_start(model, timeout_s=900):
    res = {}
    with tempfile.TemporaryDirectory(prefix="hx_coldstart_") as d:
        path = Path(d) / "resnet18_like.onnx"
        onnx.save(model, str(path))
        cache = Path(d) / "numba_cache"
        cache.mkdir()
        env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
        for label in ("cold (empty NUMBA_CACHE_DIR)", "warm (same cache dir)"):
            w0 = time.perf_counter()
            p = subprocess.run([sys.executable, "-c", _CHILD, str(path)], env=env, capture_output=True,
                               text=True, timeout=timeout_s)
            wall = time.perf_counter() - w0
            if p.returncode != 0:
                raise RuntimeError(f"cold-start child failed:\n{p.stderr[-3000:]}")
            r = json.loads(p.stdout.strip().splitlines()[-1])
            r["process_wall_s"] = wall
            r["cache_files"] = sum(1 for _ in cache.rglob("*") if _.is_file())
            res[label] = r
    return res


# -- report ---------------------------------------------------------------------------------
def _fmt(v, nd=2):
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{nd}f}"
    return str(v)


def table(rows):
    head = ("| case | ours ms (wall) | ort ms (wall) | ours/ort (wall) | ours ms (cpu) | ort ms (cpu) | "
            "ours/ort (cpu) | ours GFLOP/s | ort GFLOP/s | runs ours/ort | max rel diff |")
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        lines.append(f"| {r['case']} | {_fmt(r['ours_wall_ms'], 3)} | {_fmt(r['ort_wall_ms'], 3)} | "
                     f"{_fmt(r['ratio_wall'], 1)} | {_fmt(r['ours_cpu_ms'], 3)} | {_fmt(r['ort_cpu_ms'], 3)} | "
                     f"{_fmt(r['ratio_cpu'], 1)} | {_fmt(r['ours_gflops'], 1)} | {_fmt(r['ort_gflops'], 1)} | "
                     f"{r['ours_runs']}/{r['ort_runs']} | {r['max_rel_diff']:.1e} |")
    return "\n".join(lines)


def profile_table(name, ours, ours_wall, theirs, theirs_wall):
    lines = [f"\n{name}: ours {ours_wall:.1f} ms/run (CPU), onnxruntime {theirs_wall:.1f} ms/run (wall; profiled runs)",
             "| ours: op type | ms | share | | onnxruntime: op type | ms | share |", "|---|---|---|---|---|---|---|"]
    a, b = list(ours.items()), list(theirs.items())
    for i in range(max(len(a), len(b))):
        l = (f"{a[i][0]} | {a[i][1]:.2f} | {100 * a[i][1] / ours_wall:.0f}%" if i < len(a) else " | | ")
        r = (f"{b[i][0]} | {b[i][1]:.2f} | {100 * b[i][1] / theirs_wall:.0f}%" if i < len(b) else " | | ")
        lines.append(f"| {l} | | {r} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1, help="threads for both sides (default 1)")
    ap.add_argument("--quick", action="store_true", help="fewer repeats, 112x112 ResNet, no cold start")
    ap.add_argument("--image", type=int, default=None, help="ResNet-18-style input size (default 224; 112 quick)")
    ap.add_argument("--repeat", type=int, default=None, help="runs per micro case (default 50; 10 quick)")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold/warm start subprocesses")
    ap.add_argument("--no-profile", action="store_true", help="skip the per-op-type profiles")
    ap.add_argument("--json", default=str(HERE / "results" / "kernels.json"), help="where to write results")
    args = ap.parse_args(argv)
    image = args.image or (112 if args.quick else 224)
    rep_ops = args.repeat or (10 if args.quick else 50)
    rep_models = 3 if args.quick else 15
    budget_ops = 3.0 if args.quick else 8.0
    budget_models = 10.0 if args.quick else 30.0
    t_start = time.perf_counter()

    env = dict(python=platform.python_version(), machine=platform.machine(), cpu=platform.processor() or "",
               cores=os.cpu_count(), threads=THREADS, numba_num_threads=os.environ["NUMBA_NUM_THREADS"],
               onnxruntime=ort.__version__, load_avg=os.getloadavg() if hasattr(os, "getloadavg") else None)
    try:
        import numba
        env["numba"] = numba.__version__
    except Exception:  # pragma: no cover
        pass
    print(f"threads: {THREADS} (onnxruntime intra_op={THREADS}, inter_op=1, sequential; NUMBA_NUM_THREADS="
          f"{THREADS}; our kernels use no prange: single-threaded); load average {env['load_avg']}",
          flush=True)

    rows = []
    for name, build, macs in op_cases():
        row, _ = bench_case(name, build, macs, rep_ops, budget_ops)
        rows.append(row)
        print(f"  {name}: ours {row['ours_cpu_ms']:.3f} ms, ort {row['ort_cpu_ms']:.3f} ms (cpu), "
              f"x{row['ratio_cpu']:.1f}", flush=True)
    profiles = {}
    resnet_model = None
    for name, build, macs in model_cases(image):
        row, (model, graph, feeds, ex, sess) = bench_case(name, build, macs, rep_models, budget_models)
        rows.append(row)
        print(f"  {name}: ours {row['ours_cpu_ms']:.1f} ms, ort {row['ort_cpu_ms']:.1f} ms (cpu), "
              f"x{row['ratio_cpu']:.1f}", flush=True)
        if not args.no_profile:
            po, pw = profile_ours(ex, feeds, runs=3)
            pt, tw = profile_ort(model, feeds, runs=3)
            profiles[name] = dict(ours=po, ours_wall_ms=pw, ort=pt, ort_wall_ms=tw)
        if name.startswith("ResNet"):
            resnet_model = model
        del ex, sess

    print("\n## Per op and whole model (median; ratio > 1: ours slower)\n")
    print(table(rows))
    for name, p in profiles.items():
        print(profile_table(name, p["ours"], p["ours_wall_ms"], p["ort"], p["ort_wall_ms"]))

    cold = None
    if not (args.quick or args.no_cold):
        print(f"\n## Cold start: ResNet-18-style {image}x{image}, fresh interpreter, load + plan + first run\n",
              flush=True)
        cold = cold_start(resnet_model)
        print("| start | process wall s | import s | load s | plan + build kernels s | first run s | "
              "numba cache files |")
        print("|---|---|---|---|---|---|---|")
        for label, r in cold.items():
            print(f"| {label} | {r['process_wall_s']:.2f} | {r['import_s']:.2f} | {r['load_s']:.2f} | "
                  f"{r['plan_and_build_kernels_s']:.2f} | {r['first_run_s']:.2f} | {r['cache_files']} |")
    total = time.perf_counter() - t_start
    print(f"\ntotal bench time {total:.0f} s")
    out = dict(env=env, image=image, rows=rows, profiles=profiles, cold_start=cold, total_s=total)
    if args.json:
        p = Path(args.json)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(out, indent=2, default=str))
        print(f"wrote {p}")


if __name__ == "__main__":
    main()
