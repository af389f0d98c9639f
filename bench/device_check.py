"""The GPU check, for a lent GPU machine (one script, <= 8 minutes).

    bash bench/device_check.sh            # on the device machine: writes $OUT/device_check.{json,md}

It needs numba, numba-cuda, numpy, onnx, onnxruntime, pandas, pytest (all on the
device image) and optionally cupy; not ipywidgets, graphviz or jupyterlab. With
``NUMBA_ENABLE_CUDASIM=0`` (a real GPU) it runs, each step under its own time
budget so that one slow step cannot eat the others':

1. **ptx** -- the CUDA provider's kernels really compile for the device, and their
   PTX has no ``fma``, ``.f64``, ``.approx`` or ``.ftz`` (the kernel contract).
2. **tests** -- the CUDA provider's kernel tests on the real device
   (``tests/test_kernels_*.py tests/test_opdefs.py -k cuda`` and friends).
3. **cases** -- every onnx backend node case the CUDA provider claims, with no
   size cap, against onnx's expected outputs and **bitwise against the CPU
   provider** (NaNs compared by position).
4. **models** -- the whole-model families (``hetero_explore.models``): CPU vs real
   CUDA bitwise, and timed (median of warm runs), with onnxruntime's CPU time
   beside them.
5. **peers** -- MatMul, Conv and Softmax, this project's CUDA kernels vs cupy
   (cuBLAS / cuDNN through cupy) in float32, timed with CUDA events.

Results: ``$OUT/device_check.json`` (everything) and ``$OUT/device_check.md``
(the tables). Without a GPU it says so and exits 2, writing the reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "0")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = Path(os.environ.get("OUT", ROOT / "bench" / "results"))
BUDGET = {"ptx": 60, "tests": 150, "cases": 150, "models": 90, "peers": 40}


def _canon(a):
    import numpy as np
    a = np.ascontiguousarray(a)
    if a.dtype.kind == "f":
        a = np.where(np.isnan(a), np.array(np.nan, a.dtype), a).astype(a.dtype)
    return a.view(np.uint8)


def step_ptx(res):
    """Compile every generated elementwise kernel and a kernel per model family for the device."""
    from numba import cuda
    from hetero_explore.providers.kernels.elementwise import elementwise_ops, launch_signature
    from hetero_explore.providers.kernels.common import _retarget
    from hetero_explore.providers.kernels.target import own_compilation
    import re
    bad, n, chars = {}, 0, 0
    for d in elementwise_ops():
        for pair in d.kernels:
            sig = launch_signature(d, pair)
            with own_compilation():
                k = cuda.jit(sig)(_retarget(pair.cuda.py, "cuda"))
                ptx = k.inspect_asm(sig) if hasattr(k, "inspect_asm") else ""
            ops = re.findall(r"^\s*(?:@!?%p\d+\s+)?([a-z]+(?:\.[a-z0-9]+)*)", ptx, re.M)
            s = {"fma": sum(o.startswith("fma") for o in ops), "f64": sum(".f64" in o for o in ops),
                 "approx": sum(".approx" in o for o in ops), "ftz": sum(".ftz" in o for o in ops)}
            n += 1
            chars += len(ptx)
            if any(s.values()):
                bad[pair.name] = s
    # ptx_chars == 0 means nothing was inspected (the simulator has no PTX)
    res["ptx"] = {"kernels": n, "ptx_chars": chars, "forbidden": bad}


def step_tests(res):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    files = ["tests/test_kernels_elementwise.py", "tests/test_opdefs.py", "tests/test_kernels_nn.py",
             "tests/test_kernels_data.py", "tests/test_kernels_reduce.py", "tests/test_executor.py"]
    files = [f for f in files if (ROOT / f).exists()]
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-k", "cuda or gpu or bitwise", *files,
           "-p", "no:cacheprovider"]
    t = time.perf_counter()
    try:
        r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=BUDGET["tests"])
        tail = r.stdout.strip().splitlines()[-1:] if r.stdout.strip() else []
        res["tests"] = {"rc": r.returncode, "summary": tail, "seconds": round(time.perf_counter() - t, 1),
                        "stderr_tail": r.stderr[-1500:] if r.returncode else ""}
    except subprocess.TimeoutExpired:
        res["tests"] = {"rc": None, "summary": [f"timed out after {BUDGET['tests']} s"]}


def step_cases(res):
    import numpy as np
    from hetero_explore.conformance import node_cases, run_case
    from hetero_explore.providers import cpu, cuda
    c, g = cpu(), cuda()
    manifest = json.loads((ROOT / "tests" / "conformance_manifest.json").read_text())
    entry = manifest["providers"]["cuda-simulator"]
    # in the simulator some claimed cases are skipped by its size cap; on a device, none are
    claimed = set(entry.get("claimed", [])) | set(entry.get("size_capped", []))
    t0 = time.perf_counter()
    rows, done = [], 0
    for case in node_cases():
        if case.name not in claimed:
            continue
        if time.perf_counter() - t0 > BUDGET["cases"]:
            break
        rc, rg = [], []
        a = run_case(case, c, record=rc)
        b = run_case(case, g, record=rg)
        same = bool(rc) and len(rc) == len(rg) and all(
            set(x) == set(y) and all(np.array_equal(_canon(x[k]), _canon(y[k])) for k in x)
            for x, y in zip(rc, rg))
        rows.append({"case": case.name, "cpu": a["status"], "cuda": b["status"], "bitwise": same,
                     "error": (b.get("error") or "")[:200]})
        done += 1
    res["cases"] = {"claimed_in_manifest": len(claimed), "run": done,
                    "cuda_passed": sum(r["cuda"] == "passed" for r in rows),
                    "bitwise_equal": sum(r["bitwise"] for r in rows),
                    "not_ok": [r for r in rows if r["cuda"] != "passed" or not r["bitwise"]][:100],
                    "seconds": round(time.perf_counter() - t0, 1)}


def _median_ms(fn, n=20):
    import numpy as np
    fn()
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts) * 1e3)


def step_models(res):
    import numpy as np
    import hetero_explore as he
    from hetero_explore import models
    from hetero_explore.executor import HeterogeneousExecutor
    from hetero_explore.planner import plan
    fams = [("mlp", lambda: models.mlp("small")), ("cnn", lambda: models.cnn("small")),
            ("transformer", lambda: models.transformer("small"))]
    if hasattr(models, "resnet18_like"):
        fams.append(("resnet18_like", lambda: models.resnet18_like()))
    out, t0 = [], time.perf_counter()
    for name, make in fams:
        if time.perf_counter() - t0 > BUDGET["models"]:
            break
        try:
            g = he.load_model(make())
            feeds = he.random_inputs(g, seed=0)
            ex_c = HeterogeneousExecutor(plan(g, ["cpu"]))
            ex_g = HeterogeneousExecutor(plan(g, ["cuda"]))
            rc, rg = ex_c.run(feeds), ex_g.run(feeds)
            same = all(np.array_equal(_canon(rc.outputs[k]), _canon(rg.outputs[k])) for k in rc.outputs)
            row = {"model": name, "bitwise": same, "cpu_ms": _median_ms(lambda: ex_c.run(feeds)),
                   "cuda_ms": _median_ms(lambda: ex_g.run(feeds))}
            try:
                import onnxruntime as ort
                so = ort.SessionOptions()
                so.intra_op_num_threads = 1
                sess = ort.InferenceSession(make().SerializeToString() if hasattr(make(), "SerializeToString")
                                            else make(), so, providers=["CPUExecutionProvider"])
                row["ort_cpu_ms"] = _median_ms(lambda: sess.run(None, feeds))
            except Exception as e:  # noqa: BLE001 - a peer's failure is a note, not a stop
                row["ort_error"] = str(e)[:200]
            out.append(row)
        except Exception as e:  # noqa: BLE001
            out.append({"model": name, "error": f"{type(e).__name__}: {e}"[:300]})
    res["models"] = out


def step_peers(res):
    import numpy as np
    from hetero_explore.providers import cuda as cuda_provider
    from onnx import helper
    try:
        import cupy as cp
    except Exception as e:  # noqa: BLE001
        res["peers"] = {"skipped": f"cupy not importable: {e}"}
        return
    from numba import cuda
    p = cuda_provider()
    rng = np.random.default_rng(0)

    def ours(op, inputs, **attrs):
        from kernel_harness import make_context
        node = helper.make_node(op, [f"x{i}" for i in range(len(inputs))], ["y"], **attrs)
        ctx = make_context(node, inputs, 17)
        k = p.get_kernel(ctx)
        bufs = [p.copy_from_host(a) for a in inputs]
        outs = [p.allocate(s, d) for s, d in zip(ctx.out_shapes, ctx.out_dtypes)]
        k.run(bufs, outs)
        cuda.synchronize()
        ev0, ev1 = cuda.event(), cuda.event()
        ev0.record()
        for _ in range(10):
            k.run(bufs, outs)
        ev1.record()
        ev1.synchronize()
        return cuda.event_elapsed_time(ev0, ev1) / 10

    def peer(fn):
        fn()
        cp.cuda.Device().synchronize()
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record()
        for _ in range(10):
            fn()
        e.record()
        e.synchronize()
        return cp.cuda.get_elapsed_time(s, e) / 10

    a = rng.standard_normal((1024, 1024)).astype(np.float32)
    b = rng.standard_normal((1024, 1024)).astype(np.float32)
    x = rng.standard_normal((1, 64, 56, 56)).astype(np.float32)
    w = rng.standard_normal((64, 64, 3, 3)).astype(np.float32)
    s = rng.standard_normal((256, 1024)).astype(np.float32)
    ca, cb, cs = cp.asarray(a), cp.asarray(b), cp.asarray(s)
    rows = [{"case": "MatMul 1024^3", "ours_ms": ours("MatMul", [a, b]), "cupy_ms": peer(lambda: ca @ cb)},
            {"case": "Softmax 256x1024", "ours_ms": ours("Softmax", [s], axis=-1),
             "cupy_ms": peer(lambda: cp.exp(cs - cs.max(axis=-1, keepdims=True)).sum(axis=-1))}]
    conv = {"case": "Conv 1x64x56x56 3x3 p1", "ours_ms": ours("Conv", [x, w], pads=[1, 1, 1, 1])}
    try:
        from cupyx.scipy import signal  # noqa: F401
        conv["cupy_ms"] = None
        conv["note"] = "cupy has no cuDNN conv without chainer; compare against cupyx correlate if needed"
    except Exception:  # noqa: BLE001
        pass
    rows.append(conv)
    for r in rows:
        if r.get("cupy_ms"):
            r["ratio"] = r["ours_ms"] / r["cupy_ms"]
    res["peers"] = rows


def main() -> int:
    if "--dry-run" in sys.argv:   # check the script itself (e.g. in the simulator): tiny budgets
        for k in BUDGET:
            BUDGET[k] = 5
    OUT.mkdir(parents=True, exist_ok=True)
    res = {"started": time.strftime("%Y-%m-%d %H:%M:%S")}
    from numba import cuda
    if not cuda.is_available():
        res["error"] = "no CUDA GPU available (and the simulator is off): nothing to check"
        (OUT / "device_check.json").write_text(json.dumps(res, indent=1))
        print(res["error"])
        return 2
    res["device"] = str(getattr(cuda.get_current_device(), "name", "CUDA simulator"))
    sys.path.insert(0, str(ROOT / "tests"))
    for name, fn in (("ptx", step_ptx), ("tests", step_tests), ("cases", step_cases),
                     ("models", step_models), ("peers", step_peers)):
        t = time.perf_counter()
        try:
            fn(res)
        except Exception:  # noqa: BLE001 - record and go on with the next step
            res[name] = {"error": traceback.format_exc()[-2000:]}
        res.setdefault("seconds", {})[name] = round(time.perf_counter() - t, 1)
        print(f"[device_check] {name}: {res['seconds'][name]} s", flush=True)
    (OUT / "device_check.json").write_text(json.dumps(res, indent=1, default=str))
    md = [f"# device check ({res.get('device')}, {res['started']})", ""]
    for key in ("ptx", "tests", "cases"):
        md.append(f"- **{key}**: `{json.dumps(res.get(key), default=str)[:600]}`")
    md.append("")
    md.append("| model | bitwise CPU=CUDA | CPU ms | CUDA ms | onnxruntime CPU ms |")
    md.append("|---|---|---|---|---|")
    for r in res.get("models", []) if isinstance(res.get("models"), list) else []:
        md.append(f"| {r.get('model')} | {r.get('bitwise')} | {r.get('cpu_ms', 0):.2f} | {r.get('cuda_ms', 0):.2f} | "
                  f"{r.get('ort_cpu_ms', float('nan')):.2f} |")
    md.append("")
    md.append(f"peers: `{json.dumps(res.get('peers'), default=str)[:800]}`")
    (OUT / "device_check.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
