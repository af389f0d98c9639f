"""The GPU check, for a lent GPU machine (one script, <= 8 minutes), and its rehearsal.

    bash bench/device_check.sh              # on the device machine: $OUT/device_check.{json,md}
    bash bench/device_check.sh --rehearse   # anywhere: the same code paths on numba's CUDA
                                            # simulator with tiny subsets (no GPU needed)

It needs numba, numba-cuda, numpy, onnx, onnxruntime, pytest (all on the device
image) and optionally cupy; not ipywidgets, graphviz, jupyterlab or torch. Real mode
forces ``NUMBA_ENABLE_CUDASIM=0``; without a GPU it writes the reason to
``$OUT/device_check.{json,md}`` and exits 2. ``--rehearse`` forces the simulator.

Steps (each has a status -- ``ok``, ``failed``, ``error``, ``timed out``, ``skipped`` --
and its own time budget; a step that fails, raises or runs out of time keeps the results
it had so far and the next step still runs; the JSON and the markdown are rewritten
after every step, so even an outer kill leaves what was done):

=========  ===========================================================  ==========
step       what it does                                                 budget (s)
=========  ===========================================================  ==========
(start)    launches in the background, at t=0: the kernel warm-up        --
           (``hetero_explore.session.warmup`` on cpu and cuda, one process per
           provider), the **ptx** worker, the **tests** subprocess and
           the **cases** shards
ptx        lowers every generated elementwise kernel (154) to sm_90 PTX  240 from t=0
           in a background worker, through NVVM as tests/ptx_tools.py
           does (no driver needed, so the rehearsal runs it too), and
           checks the explicit-FMA contract on MatMul and Conv
           (``fma.rn.f32`` present, no stray contracted fma) and that the
           elementwise kernels have no ``fma``, ``.approx``/``div.full``, ``.ftz``,
           nor ``.f64`` outside float64 kernels (on the 2-core dev box
           at load 6: 0.3-60 s per kernel, the pmath transcendentals
           the slow ones)
tests      ``pytest -v -k "cuda or gpu or bitwise"`` over the CUDA       200 from t=0
           kernel test files (412 tests today), ``NUMBA_ENABLE_CUDASIM=0``;
           partial counts are parsed from ``-v`` lines when it is killed
cases      every onnx backend node case the CUDA provider claims         250 from t=0
           (manifest ``cuda-simulator`` claimed + size-capped: no size
           cap on a device), CPU vs CUDA bitwise and against onnx's
           expected outputs, in ``SHARDS`` parallel processes, each
           writing one JSON line per case (a killed shard keeps its
           rows)
models     ``hetero_explore.data.models`` families (mlp, cnn, transformer,    90
           resnet18-like): CPU vs CUDA bitwise, median warm ms, and
           onnxruntime CPU (1 thread) beside them
peers      MatMul 1024^3, Conv 1x64x56x56 3x3, Softmax 256x1024:         45
           this project's CUDA kernel vs cupy (cuBLAS; cuDNN when
           cupyx.cudnn works, else im2col + cuBLAS), CUDA events
ort        onnxruntime-gpu's real EPs (``ort:cuda``, ``ort:tensorrt``):  60
           the ``ort-cuda`` / ``tensorrt`` capability profiles against
           them (precision / recall of claimed nodes, disagreeing ops,
           ``bench/profile_accuracy.py``), and real CUDA-EP partitions
           beside numba.cuda ones (``[ort:cuda without Softmax, cuda]``:
           ULP against the whole model on ``ort:cuda``); skipped with
           the reason where onnxruntime-gpu or its EP is missing
           (``--ort-eps ort-cuda=ort:cuda,...`` picks the pairs)
=========  ===========================================================  ==========

Wall time on the device: the background work (warm-up, ptx, tests, cases) runs at once
on the machine's 16 cores, so the script waits at most 250 s from its start for ptx,
tests and cases (+ <= 30 s collecting), then models (<= 90 s) and peers (<= 45 s) run
alone (they time things): at most ~415 s in all. The whole run is capped at ``TOTAL`` =
450 s by its own deadline (each step's budget is cut to what is left), and
``device_check.sh`` kills it at 470 s (SIGTERM: the background processes are killed and
the JSON written so far stays). The machine
starts with a cold numba cache (the cache is not carried), so expect the first minutes
to be compilation: the warm-up processes compile the models' kernels for the models
step while the tests and cases run; cases that could not run before their budget ended
are counted as ``not run`` (not as failures) in the summary.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

REHEARSE = "--rehearse" in sys.argv
ROOT = Path(__file__).resolve().parent.parent
for p in (str(ROOT / "tests"), str(ROOT), str(ROOT / "bench")):
    if p not in sys.path:
        sys.path.insert(0, p)

TOTAL = 450
BUDGET = {"ptx": 240, "tests": 200, "cases": 250, "models": 90, "peers": 45, "ort": 60}
SHARDS = 11   # the device has 16 cores: 11 case shards + 2 ptx workers + tests + 2 warm-ups
PTX_WORKERS = 2
STEPS = ("ptx", "tests", "cases", "models", "peers", "ort")
#: the ort step's pairs: doc-table profile → the real EP (onnxruntime-gpu) it describes
ORT_PAIRS = {"ort-cuda": "ort:cuda", "tensorrt": "ort:tensorrt"}
TEST_FILES = ["tests/test_kernels_elementwise.py", "tests/test_kernels_elementwise2.py", "tests/test_opdefs.py",
              "tests/test_kernels_nn.py", "tests/test_kernels_norm.py", "tests/test_kernels_data.py",
              "tests/test_kernels_movement.py", "tests/test_kernels_reduce.py", "tests/test_kernels_reduce2.py",
              "tests/test_kernels_attention.py", "tests/test_kernels_cast.py", "tests/test_kernels_select.py",
              "tests/test_executor.py"]
TEST_K = "cuda or gpu or bitwise"
# the rehearsal: tiny subsets of every step, same code paths
R_BUDGET = {"ptx": 120, "tests": 240, "cases": 240, "models": 150, "peers": 90, "ort": 60}
R_TOTAL = 600
R_SHARDS = 2
R_TEST_FILES = ["tests/test_kernels_elementwise.py"]
R_TEST_K = "binary_broadcast_rows_cpu_cuda_bitwise and sa0 and Add"
R_CASES = ("test_abs", "test_relu", "test_matmul_2d", "test_softmax_example")
R_PTX_KERNELS = 3
R_PTX_WORKERS = 2


def out_dir() -> Path:
    """``$OUT`` (created if missing); ``bench/results`` when ``$OUT`` is unset or empty."""
    d = Path(os.environ.get("OUT") or (ROOT / "bench" / "results"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def to_json(o):
    """``json.dumps`` default: numpy scalars and arrays, paths, anything else as str."""
    import numpy as np
    if isinstance(o, np.bool_):
        return bool(o)
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        f = float(o)
        return f if math.isfinite(f) else str(f)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    return str(o)


def _canon(a):
    import numpy as np
    a = np.ascontiguousarray(a)
    if a.dtype.kind in "fc":
        a = np.where(np.isnan(a), np.array(np.nan, a.dtype), a).astype(a.dtype)
    if a.dtype.kind == "O":
        return a
    return a.reshape(-1).view(np.uint8)


def same_bytes(x, y) -> bool:
    import numpy as np
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape or x.dtype != y.dtype:
        return False
    if x.dtype.kind == "O":
        return bool(np.array_equal(x, y))
    return bool(np.array_equal(_canon(x), _canon(y)))


class StepTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise StepTimeout("the step's time budget ran out")


# ------------------------------------------------------------------------------------------
# background work: warm-up, tests, case shards
# ------------------------------------------------------------------------------------------
WARM = r'''
import sys
from hetero_explore.session import warmup as w
if len(sys.argv) > 2:                     # only these jobs (the rehearsal: the smallest)
    jobs = w._jobs
    w._jobs = lambda: [j for j in jobs() if j[0] in sys.argv[2].split(",")]
w.warmup(providers=(sys.argv[1],), progress=lambda s: print(s, flush=True))
'''


_CHILDREN: list = []   # every background process (its own process group), killed on SIGTERM


def _popen(args, log: Path, env=None):
    f = open(log, "w")
    p = subprocess.Popen(args, cwd=ROOT, env=env or dict(os.environ), stdout=f, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True)
    p._log = f  # noqa: SLF001 - closed in _finish
    _CHILDREN.append(p)
    return p


def _on_term(res, out):
    """SIGTERM (the shell's ``timeout``): kill the background processes, keep what was written."""
    def handler(signum, frame):
        for p in _CHILDREN:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        res["killed"] = f"terminated by signal {signum} after {time.perf_counter() - res['_t0']:.0f} s"
        try:
            write(res, out)
        finally:
            os._exit(124)
    return handler


def _finish(p, deadline: float) -> tuple:
    """Wait for ``p`` until ``deadline`` (perf_counter); kill its process group after it.
    Returns (returncode or None when killed, log text)."""
    try:
        rc = p.wait(timeout=max(0.0, deadline - time.perf_counter()))
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
        rc = None
    p._log.close()  # noqa: SLF001
    return rc, Path(p._log.name).read_text(errors="replace")  # noqa: SLF001


def claimed_cases() -> list:
    manifest = json.loads((ROOT / "tests" / "conformance_manifest.json").read_text())
    entry = manifest["providers"]["cuda-simulator"]
    # in the simulator some claimed cases are skipped by its size cap; on a device, none are
    names = sorted(set(entry.get("claimed", [])) | set(entry.get("size_capped", [])))
    if REHEARSE:
        names = [n for n in names if n in R_CASES]
    return names


def shard_main(index: int, count: int, path: str) -> int:
    """One case shard (a subprocess): every ``count``-th claimed case from ``index``;
    one JSON line per case, flushed, so a kill keeps what was done."""
    import numpy as np
    from hetero_explore.analysis.conformance import node_cases, run_case
    from hetero_explore.providers import cpu, cuda
    names = set(claimed_cases()[index::count])
    c, g = cpu(), cuda()
    with open(path, "a") as f:
        for case in node_cases():
            if case.name not in names:
                continue
            t = time.perf_counter()
            row = {"case": case.name}
            try:
                rc, rg = [], []
                a = run_case(case, c, record=rc)
                b = run_case(case, g, record=rg)
                row.update(cpu=a["status"], cuda=b["status"], error=str(b.get("error") or b.get("reason") or "")[:300],
                           bitwise=bool(rc) and len(rc) == len(rg) and all(
                               set(x) == set(y) and all(same_bytes(x[k], y[k]) for k in x) for x, y in zip(rc, rg)))
            except Exception as e:  # noqa: BLE001 - a crash is this case's result
                row.update(cpu="?", cuda="error", bitwise=False, error=f"{type(e).__name__}: {e}"[:300])
            row["seconds"] = round(time.perf_counter() - t, 3)
            f.write(json.dumps(row, default=to_json) + "\n")
            f.flush()
    del np
    return 0


def start_background(out: Path) -> dict:
    env = dict(os.environ)
    only = ["mlp"] if REHEARSE else []
    bg = {"warmup": [_popen([sys.executable, "-c", WARM, p, *only], out / f"warmup_{p}.log", env)
                     for p in ("cpu", "cuda")]}
    files = [f for f in (R_TEST_FILES if REHEARSE else TEST_FILES) if (ROOT / f).exists()]
    bg["test_files"] = files
    bg["ptx"] = []
    n = R_PTX_WORKERS if REHEARSE else PTX_WORKERS
    for i in range(n):
        ptx = out / f"ptx_{i}.jsonl"
        ptx.write_text("")
        bg["ptx"].append((_popen([sys.executable, str(Path(__file__).resolve()), "--ptx",
                                  str(R_PTX_KERNELS if REHEARSE else 0), str(ptx), f"{i}/{n}"],
                                 out / f"ptx_{i}.log", dict(env, NUMBA_ENABLE_CUDASIM="0")), ptx))
    bg["tests"] = _popen([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-k",
                          R_TEST_K if REHEARSE else TEST_K, *files], out / "tests.log", env)
    n = R_SHARDS if REHEARSE else SHARDS
    bg["shards"] = []
    for i in range(n):
        path = out / f"cases_{i}.jsonl"
        path.write_text("")
        p = _popen([sys.executable, str(Path(__file__).resolve()), "--shard", f"{i}/{n}", str(path)]
                   + (["--rehearse"] if REHEARSE else []), out / f"cases_{i}.log", env)
        bg["shards"].append((p, path))
    return bg


# ------------------------------------------------------------------------------------------
# steps: each fills ``part`` (kept when it times out or raises) and returns its status
# ------------------------------------------------------------------------------------------
def ptx_main(limit: int, path: str, index: int = 0, count: int = 1) -> int:
    """The ptx worker (a subprocess, ``NUMBA_ENABLE_CUDASIM=0`` even in the rehearsal):
    lowers every generated elementwise kernel to sm_90 PTX through NVVM, the way
    ``tests/ptx_tools.py`` does (no driver needed, so the rehearsal runs this very code),
    and counts the instructions the kernel contract forbids; one JSON line per kernel."""
    import io
    import contextlib
    from ptx_tools import PRELUDE
    env = {"__name__": "ptx_worker"}
    buf = io.StringIO()
    how = "NVVM (ptx_tools: sm_90)"
    try:
        with contextlib.redirect_stdout(buf):
            exec(compile(PRELUDE, "ptx_tools.PRELUDE", "exec"), env)   # noqa: S102 - the project's own prelude
        ptx_of, stats = env["ptx"], env["stats"]
    except SystemExit:       # the prelude found no libNVVM/libdevice: on a device, ask the driver
        from numba import cuda
        if not cuda.is_available():
            Path(path).write_text(json.dumps({"skipped": buf.getvalue().strip()[-300:]}) + "\n")
            return 0
        how = "numba cuda.jit + inspect_asm (the device's compiler)"

        def ptx_of(fn, sig):
            from hetero_explore.kernels.target import own_compilation
            with own_compilation():
                k = cuda.jit(sig)(fn)
                return k.inspect_asm(sig)

        def stats(p):
            ops = re.findall(r"^\s*(?:@!?%p\d+\s+)?([a-z]+(?:\.[a-z0-9]+)*)", p, re.M)
            return {"fma": sum(o.startswith("fma") for o in ops), "f64": sum(".f64" in o for o in ops),
                    "approx": sum(".approx" in o or "div.full" in o for o in ops),
                    "ftz": sum(".ftz" in o for o in ops)}
    from hetero_explore.kernels.common import _retarget
    from hetero_explore.kernels.elementwise import elementwise_ops, launch_signature
    pairs = [(d, pair) for d in elementwise_ops() for pair in d.kernels][:limit or None][index::count]
    contract = env.get("contract")
    fma_kernels = fma_contract_kernels() if index == 0 else []
    with open(path, "w") as f:
        f.write(json.dumps({"of": len(pairs) + len(fma_kernels), "how": how}) + "\n")
        f.flush()
        # the explicit-FMA contract first (two kernels): fma.rn.f32 where the kernel writes fma, and
        # no stray (contracted) fma -- counted on the PTX with the explicit fmas replaced by a
        # product-free marker (ptx_tools.contract); the driver's path can only count fma.rn
        for name, fn, sig in fma_kernels:
            row = {"kernel": name, "fma_contract": True}
            try:
                if contract is not None:
                    c = contract(fn, sig)
                    row.update(chars=0, stats=c["stats"], fma_rn=c["fma_rn"], written=c["written"])
                else:
                    text = ptx_of(fn, sig)
                    st = stats(text)
                    row.update(chars=len(text), fma_rn=st.pop("fma"), written=True, stats=st,
                               stray="not separable on the driver's path")
            except Exception as e:  # noqa: BLE001 - one kernel's failure is a finding
                row["error"] = f"{type(e).__name__}: {e}"[:300]
            f.write(json.dumps(row, default=to_json) + "\n")
            f.flush()
        for d, pair in pairs:
            row = {"kernel": pair.name}
            try:
                text = ptx_of(_retarget(pair.cuda.py, "cuda"), launch_signature(d, pair))
                row.update(chars=len(text), stats=stats(text))
            except Exception as e:  # noqa: BLE001 - one kernel's failure is a finding
                row["error"] = f"{type(e).__name__}: {e}"[:300]
            f.write(json.dumps(row, default=to_json) + "\n")
            f.flush()
    return 0


def fma_contract_kernels() -> list:
    """(name, CUDA kernel function, numba signature) of the kernels whose multiply-accumulates
    the contract makes explicit fmas (MatMul/Gemm, Conv): their PTX must show fma.rn.f32."""
    from numba import types
    from hetero_explore.kernels import nn
    from hetero_explore.kernels.common import _retarget
    A = types.Array(types.float32, 1, "C")
    IA = types.Array(types.int64, 1, "C")
    i64, f32 = types.int64, types.float32
    mm = (A, A, A, A) + (i64,) * 7 + (IA, IA, IA) + (i64,) * 3 + (f32, f32)
    conv = (A, A, A, types.boolean, IA, A)
    return [("_mm_cuda", _retarget(nn._MM.cuda.py, "cuda"), mm),
            ("_conv_cuda", _retarget(nn._CONV.cuda.py, "cuda"), conv)]


def step_ptx(part, ctx):
    """Collect the ptx worker (started at t=0): kernels lowered to PTX, forbidden instructions."""
    part.update(kernels=0, of=0, ptx_chars=0, forbidden={}, compile_errors={})
    killed, logs, rcs = 0, [], []
    for p, path in ctx["bg"]["ptx"]:
        rc, log = _finish(p, ctx["t0"] + ctx["budget"]["ptx"])
        killed += rc is None
        rcs.append(rc)
        logs.append(log)
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue        # a line cut by a kill
            if "skipped" in row:
                part["reason"] = row["skipped"]
            elif "of" in row:
                part["of"] += row["of"]
                part["how"] = row["how"]
            elif "error" in row:
                part["compile_errors"][row["kernel"]] = row["error"]
            else:
                part["kernels"] += 1
                part["ptx_chars"] += row["chars"]
                bad = dict(row["stats"])
                if row.get("fma_contract"):
                    part.setdefault("fma_contract", {})[row["kernel"]] = {
                        "fma_rn": row["fma_rn"], "stray_fma": row.get("stray", bad.get("fma", 0))}
                    if not row["fma_rn"]:
                        bad["fma_missing"] = 1   # the contract's explicit fma did not become fma.rn
                if row["kernel"].endswith("_f64"):
                    bad["f64"] = 0          # a float64 kernel computes in double on the CPU too
                if any(bad.values()):
                    part["forbidden"][row["kernel"]] = row["stats"]
    rc = None if killed else max(rcs, key=abs)
    log = "\n".join(logs)
    if "reason" in part:
        return "skipped"
    if rc is None:
        part["note"] = f"killed after its budget: {part['kernels']} of {part.get('of')} kernels lowered"
        return "timed out"
    if rc != 0 or "how" not in part:
        part["log_tail"] = log[-2000:]
        return "error"
    return "failed" if part["forbidden"] or part["compile_errors"] or part["kernels"] != part["of"] else "ok"


_OUTCOME = re.compile(r"\s(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")


def step_tests(part, ctx):
    """Collect the tests subprocess (started at t=0)."""
    part["files"] = ctx["bg"]["test_files"]
    part["k"] = R_TEST_K if REHEARSE else TEST_K
    rc, log = _finish(ctx["bg"]["tests"], ctx["t0"] + ctx["budget"]["tests"])
    counts = {}
    for m in _OUTCOME.finditer(log):
        counts[m.group(1).lower()] = counts.get(m.group(1).lower(), 0) + 1
    lines = log.strip().splitlines()
    part.update(rc=rc, counts=counts, summary=lines[-1] if lines else "",
                failures=[ln.strip()[:200] for ln in lines if ln.startswith(("FAILED", "ERROR"))][:30])
    if rc is None:
        part["note"] = f"killed after {ctx['budget']['tests']} s from the start; counts are what had run"
        return "timed out"
    if rc != 0:
        part["log_tail"] = log[-2000:]
    return "ok" if rc == 0 and counts.get("passed") else "failed"


def step_cases(part, ctx):
    """Collect the case shards (started at t=0)."""
    names = claimed_cases()
    part.update(claimed=len(names), shards=len(ctx["bg"]["shards"]))
    rows, killed, crashed = [], 0, []
    for i, (p, path) in enumerate(ctx["bg"]["shards"]):
        rc, log = _finish(p, ctx["t0"] + ctx["budget"]["cases"])
        killed += rc is None
        if rc not in (0, None):
            crashed.append({"shard": i, "rc": rc, "log_tail": log[-1500:]})
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass  # a line cut by a kill
    ok = [r for r in rows if r.get("cuda") == "passed" and r.get("bitwise")]
    part.update(run=len(rows), not_run=len(names) - len(rows), cuda_passed=sum(r.get("cuda") == "passed" for r in rows),
                bitwise_equal=sum(bool(r.get("bitwise")) for r in rows), ok=len(ok),
                not_ok=[r for r in rows if r not in ok][:100], shards_killed=killed, shards_crashed=crashed,
                slowest=sorted(rows, key=lambda r: -r.get("seconds", 0))[:5])
    if crashed:
        return "error"
    if killed:
        part["note"] = f"budget ({ctx['budget']['cases']} s from the start) ended with {part['not_run']} cases not run"
        return "timed out"
    return "ok" if len(ok) == len(names) else "failed"


def _median_ms(fn, n=20):
    import numpy as np
    fn()
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts) * 1e3)


def step_models(part, ctx):
    """Whole models: CPU vs CUDA bitwise, timed; onnxruntime CPU beside them."""
    import hetero_explore as he
    from hetero_explore.data import models
    from hetero_explore.execution.executor import HeterogeneousExecutor
    from hetero_explore.planner import plan
    # wait (briefly) for the warm-up to compile the models' kernels
    warm = []
    for p in ctx["bg"]["warmup"]:
        rc, log = _finish(p, time.perf_counter() + 30)
        warm.append({"rc": rc, "last": (log.strip().splitlines() or [""])[-1][:200]})
    part["warmup"] = warm
    if REHEARSE:
        fams = [("mlp-tiny", lambda: models.mlp("tiny"))]
        n = 3
    else:
        fams = [("mlp", lambda: models.mlp("small")), ("cnn", lambda: models.cnn("small")),
                ("transformer", lambda: models.transformer("small")),
                ("resnet18_like", lambda: models.resnet18_like())]
        n = 20
    rows = part["rows"] = []
    for name, make in fams:
        row = {"model": name}
        rows.append(row)
        try:
            proto = make()
            g = he.load_model(proto)
            feeds = he.random_inputs(g, seed=0)
            ex_c = HeterogeneousExecutor(plan(g, ["cpu"]))
            ex_g = HeterogeneousExecutor(plan(g, ["cuda"]))
            rc, rg = ex_c.run(feeds), ex_g.run(feeds)
            row["bitwise"] = set(rc.outputs) == set(rg.outputs) and all(
                same_bytes(rc.outputs[k], rg.outputs[k]) for k in rc.outputs)
            row["cpu_ms"] = _median_ms(lambda: ex_c.run(feeds), n)
            row["cuda_ms"] = _median_ms(lambda: ex_g.run(feeds), n)
            try:
                import onnxruntime as ort
                so = ort.SessionOptions()
                so.intra_op_num_threads = 1
                sess = ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
                row["ort_cpu_ms"] = _median_ms(lambda: sess.run(None, feeds), n)
            except StepTimeout:
                raise
            except Exception as e:  # noqa: BLE001 - a peer's failure is a note, not a stop
                row["ort_error"] = f"{type(e).__name__}: {e}"[:200]
        except StepTimeout:
            raise
        except Exception as e:  # noqa: BLE001
            row["error"] = f"{type(e).__name__}: {e}"[:300]
    return "ok" if all(r.get("bitwise") for r in rows) else "failed"


def step_peers(part, ctx):
    """This project's CUDA MatMul/Conv/Softmax vs cupy (cuBLAS / cuDNN), float32."""
    import numpy as np
    from numba import cuda
    from onnx import helper
    from support.harness import make_context
    from hetero_explore.providers import cuda as cuda_provider
    p = cuda_provider()
    rng = np.random.default_rng(0)
    reps = 2 if REHEARSE else 10

    def ours(op, inputs, **attrs):
        node = helper.make_node(op, [f"x{i}" for i in range(len(inputs))], ["y"], **attrs)
        kctx = make_context(node, inputs, 17)
        k = p.get_kernel(kctx)
        bufs = [p.copy_from_host(a) for a in inputs]
        outs = [p.allocate(s, d) for s, d in zip(kctx.out_shapes, kctx.out_dtypes)]
        k.run(bufs, outs)
        cuda.synchronize()
        ev0, ev1 = cuda.event(), cuda.event()
        ev0.record()
        for _ in range(reps):
            k.run(bufs, outs)
        ev1.record()
        ev1.synchronize()
        return ev0.elapsed_time(ev1) / reps, p.copy_to_host(outs[0])   # (cuda.event_elapsed_time: not in the simulator)

    if REHEARSE:
        m, img, ch, sm = 16, 6, 2, (4, 8)
    else:
        m, img, ch, sm = 1024, 56, 64, (256, 1024)
    a = rng.standard_normal((m, m)).astype(np.float32)
    b = rng.standard_normal((m, m)).astype(np.float32)
    x = rng.standard_normal((1, ch, img, img)).astype(np.float32)
    w = rng.standard_normal((ch, ch, 3, 3)).astype(np.float32)
    s = rng.standard_normal(sm).astype(np.float32)
    cases = [("MatMul", f"MatMul {m}^3", [a, b], {}),
             ("Conv", f"Conv 1x{ch}x{img}x{img} 3x3 pad 1", [x, w], {"pads": [1, 1, 1, 1]}),
             ("Softmax", f"Softmax {sm[0]}x{sm[1]}", [s], {"axis": -1})]
    rows = part["rows"] = []
    for op, label, inputs, attrs in cases:
        row = {"case": label}
        rows.append(row)
        try:
            row["ours_ms"], row["_y"] = ours(op, inputs, **attrs)
            if REHEARSE:
                part["note"] = "the simulator's CUDA events have no timing: ours_ms is meaningless here"
        except StepTimeout:
            raise
        except Exception as e:  # noqa: BLE001
            row["error"] = f"{type(e).__name__}: {e}"[:300]
    try:
        import cupy as cp
    except Exception as e:  # noqa: BLE001 - absent or broken: the step says so
        part["reason"] = f"cupy not installed ({type(e).__name__}: {e})"[:300]
        for r in rows:
            r.pop("_y", None)
        return "failed" if any("error" in r for r in rows) else "skipped"

    def peer(fn):
        y = fn()
        cp.cuda.Device().synchronize()
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record()
        for _ in range(reps):
            fn()
        e1.record()
        e1.synchronize()
        return cp.cuda.get_elapsed_time(e0, e1) / reps, cp.asnumpy(y)

    def conv_peer():
        cx, cw = cp.asarray(x), cp.asarray(w)
        try:
            from cupyx import cudnn
            y = cp.empty((1, ch, img, img), cp.float32)

            def f():
                cudnn.convolution_forward(cx, cw, None, y, (1, 1), (1, 1), (1, 1), 1, auto_tune=False,
                                          tensor_core="never")
                return y
            f()
            return f, "cuDNN (cupyx.cudnn)"
        except Exception:  # noqa: BLE001 - no cuDNN: im2col + cuBLAS
            xp = cp.pad(cx, ((0, 0), (0, 0), (1, 1), (1, 1)))
            wm = cw.reshape(ch, -1)

            def f():
                cols = cp.stack([xp[0, :, i:i + img, j:j + img] for i in range(3) for j in range(3)], axis=1)
                return (wm @ cols.reshape(ch * 9, -1)).reshape(1, ch, img, img)
            return f, "im2col + cuBLAS"

    ca, cb, cs = cp.asarray(a), cp.asarray(b), cp.asarray(s)

    def softmax():
        e = cp.exp(cs - cs.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    cf, how = conv_peer()
    peers = [(lambda: ca @ cb, "cuBLAS"), (cf, how), (softmax, "cupy elementwise + reductions")]
    for row, (fn, how) in zip(rows, peers):
        try:
            row["peer"] = how
            row["cupy_ms"], yc = peer(fn)
            if "_y" in row:
                row["max_abs_diff"] = float(np.max(np.abs(row["_y"].astype(np.float64) - yc.astype(np.float64))))
                row["ratio"] = row["ours_ms"] / row["cupy_ms"] if row["cupy_ms"] else None
        except StepTimeout:
            raise
        except Exception as e:  # noqa: BLE001
            row["peer_error"] = f"{type(e).__name__}: {e}"[:300]
        row.pop("_y", None)
    return "ok" if all("ratio" in r for r in rows) else "failed"


# ------------------------------------------------------------------------------------------
# reporting
# ------------------------------------------------------------------------------------------
def parse_ort_eps(argv) -> dict:
    """``--ort-eps profile=ort:EP,...`` from ``argv`` (default :data:`ORT_PAIRS`); a malformed item or
    an unknown profile raises ``ValueError`` naming it."""
    if "--ort-eps" not in argv:
        return dict(ORT_PAIRS)
    i = argv.index("--ort-eps")
    if i + 1 >= len(argv):
        raise ValueError("--ort-eps needs profile=ort:EP pairs, e.g. ort-cuda=ort:cuda,tensorrt=ort:tensorrt")
    from hetero_explore.providers.profiles import PROFILE_NAMES
    out = {}
    for item in argv[i + 1].split(","):
        prof, sep, ep = item.partition("=")
        if not sep or not ep.strip().startswith("ort:"):
            raise ValueError(f"--ort-eps takes profile=ort:EP items, got {item!r}")
        if prof.strip() not in PROFILE_NAMES:
            raise ValueError(f"--ort-eps: unknown profile {prof.strip()!r}; known: {', '.join(PROFILE_NAMES)}")
        out[prof.strip()] = ep.strip()
    return out


def step_ort(part, ctx):
    """onnxruntime-gpu's EPs: the profiles measured against them, and CUDA-EP partitions beside numba.cuda."""
    if str(ROOT / "bench") not in sys.path:     # imported as a module (the tests): its sibling script
        sys.path.insert(0, str(ROOT / "bench"))
    from profile_accuracy import compare_claims
    import hetero_explore as he
    from hetero_explore.data import models
    from hetero_explore.providers import mask, resolve
    from hetero_explore.providers.profiles import profile_provider
    pairs = ctx.get("ort_eps") or dict(ORT_PAIRS)
    part["pairs"] = pairs
    avail = {}
    for prof, name in pairs.items():
        try:
            ok, why = resolve(name).available()
        except Exception as e:  # noqa: BLE001 - no onnxruntime at all: the reason
            ok, why = False, f"{type(e).__name__}: {e}"
        (avail.__setitem__(prof, name) if ok else part.setdefault("unavailable", {}).__setitem__(name, why))
    if not avail:
        part["reason"] = "no real EP to compare: " + "; ".join(f"{k}: {v}" for k, v in part["unavailable"].items())
        return "skipped"
    fams = ([("mlp-tiny", lambda: models.mlp("tiny"))] if REHEARSE else
            [("mlp", lambda: models.mlp("small")), ("cnn", lambda: models.cnn("small")),
             ("transformer", lambda: models.transformer("small")), ("resnet18_like", lambda: models.resnet18_like())])
    rows = part["rows"] = []
    runs = part["runs"] = []
    for name, make in fams:
        g = he.load_model(make())
        for prof, ep in avail.items():
            try:
                rows.append({"model": name, "profile": prof, "ep": ep,
                             **compare_claims(g, profile_provider(prof, execute=False), resolve(ep))})
            except StepTimeout:
                raise
            except Exception as e:  # noqa: BLE001
                rows.append({"model": name, "profile": prof, "ep": ep, "error": f"{type(e).__name__}: {e}"[:300]})
        ep = next(iter(avail.values()))
        run = {"model": name, "providers": f"{ep} (no Softmax), cuda"}
        runs.append(run)
        try:
            feeds = he.random_inputs(g, seed=0)
            p = he.plan(g, [mask(resolve(ep), deny=["Softmax"]), "cuda"])
            r = he.execute(p, feeds)
            d = he.compare(r, he.execute_reference(g, ep, feeds))
            run.update(partitions=len(p.partitions), max_ulp=int(d["max_ulp"].max()),
                       ms=round(1e3 * r.wall_seconds, 3))
        except StepTimeout:
            raise
        except Exception as e:  # noqa: BLE001
            run["error"] = f"{type(e).__name__}: {e}"[:300]
    return "ok" if not any("error" in r for r in rows + runs) else "failed"


def _f(v, fmt="{:.2f}"):
    return fmt.format(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else ("" if v is None else str(v))


def markdown(res) -> str:
    mode = "rehearsal on the CUDA simulator" if res.get("rehearse") else "real device"
    md = [f"# device check: {res.get('device', 'no device')} ({mode}, {res.get('started')})", ""]
    if res.get("error"):
        md += [f"**not run**: {res['error']}", ""]
    if res.get("killed"):
        md += [f"**killed**: {res['killed']}", ""]
    md += ["| step | status | seconds | note |", "|---|---|---|---|"]
    for name in STEPS:
        st = res.get("steps", {}).get(name)
        if st is None:
            md.append(f"| {name} | not started | | |")
            continue
        note = st.get("reason") or st.get("note") or (st.get("error") or "").strip().splitlines()[-1:] or ""
        note = note[0] if isinstance(note, list) else note
        md.append(f"| {name} | {st.get('status')} | {_f(st.get('seconds'), '{:.1f}')} | {str(note)[:160]} |")
    steps = res.get("steps", {})
    p = steps.get("ptx", {})
    if "kernels" in p:
        md += ["", "## ptx", "", "| kernels compiled | of | PTX chars | with forbidden instructions | compile errors |",
               "|---|---|---|---|---|",
               f"| {p['kernels']} | {p.get('of')} | {p['ptx_chars']} | {len(p['forbidden'])} | {len(p['compile_errors'])} |",
               "", f"lowered with: {p.get('how', '')}"]
        for k, v in p.get("fma_contract", {}).items():
            md.append(f"- explicit-FMA contract `{k}`: {v['fma_rn']} fma.rn.f32, stray fma: {v['stray_fma']}")
        for k, v in list(p["forbidden"].items())[:20]:
            md.append(f"- `{k}`: {v}")
        for k, v in list(p["compile_errors"].items())[:20]:
            md.append(f"- `{k}`: {v[:160]}")
    t = steps.get("tests", {})
    if "counts" in t:
        md += ["", "## tests", "", "| passed | failed | errors | skipped | rc |", "|---|---|---|---|---|",
               f"| {t['counts'].get('passed', 0)} | {t['counts'].get('failed', 0)} | {t['counts'].get('error', 0)} | "
               f"{t['counts'].get('skipped', 0)} | {t.get('rc')} |"]
        md += [f"- `{ln}`" for ln in t.get("failures", [])[:20]]
    c = steps.get("cases", {})
    if "run" in c:
        md += ["", "## cases", "", "| claimed | run | not run | CUDA passed | bitwise CPU=CUDA | both |",
               "|---|---|---|---|---|---|",
               f"| {c['claimed']} | {c['run']} | {c['not_run']} | {c['cuda_passed']} | {c['bitwise_equal']} | {c['ok']} |"]
        if c["not_ok"]:
            md += ["", "| case | cpu | cuda | bitwise | error |", "|---|---|---|---|---|"]
            md += [f"| {r['case']} | {r.get('cpu')} | {r.get('cuda')} | {r.get('bitwise')} | "
                   f"{str(r.get('error', ''))[:120].replace('|', '/')} |" for r in c["not_ok"][:40]]
    m = steps.get("models", {})
    if "rows" in m:
        md += ["", "## models", "", "| model | bitwise CPU=CUDA | CPU ms | CUDA ms | onnxruntime CPU ms | error |",
               "|---|---|---|---|---|---|"]
        md += [f"| {r['model']} | {_f(r.get('bitwise'))} | {_f(r.get('cpu_ms'))} | {_f(r.get('cuda_ms'))} | "
               f"{_f(r.get('ort_cpu_ms'))} | {r.get('error', r.get('ort_error', ''))[:120]} |" for r in m["rows"]]
    pe = steps.get("peers", {})
    if "rows" in pe:
        md += ["", "## peers", ""]
        if pe.get("reason"):
            md += [f"skipped: {pe['reason']}", ""]
        md += ["| case | ours ms | peer | peer ms | ours/peer | max abs diff | error |", "|---|---|---|---|---|---|---|"]
        md += [f"| {r['case']} | {_f(r.get('ours_ms'), '{:.3f}')} | {r.get('peer', '')} | {_f(r.get('cupy_ms'), '{:.3f}')} | "
               f"{_f(r.get('ratio'))} | {_f(r.get('max_abs_diff'), '{:.2e}')} | "
               f"{str(r.get('error') or r.get('peer_error') or '')[:120]} |" for r in pe["rows"]]
    o = steps.get("ort", {})
    if o:
        md += ["", "## ort", ""]
        if o.get("reason"):
            md += [f"skipped: {o['reason']}", ""]
        if o.get("rows"):
            md += ["| model | profile | EP | precision | recall | disagreeing ops | error |", "|---|---|---|---|---|---|---|"]
            md += [f"| {r['model']} | {r['profile']} | {r['ep']} | {_f(r.get('precision'))} | {_f(r.get('recall'))} | "
                   f"{'; '.join(f'{k}: {v}' for k, v in list(r.get('disagree', {}).items())[:3])} | "
                   f"{str(r.get('error', ''))[:120]} |" for r in o["rows"]]
        if o.get("runs"):
            md += ["", "| model | providers | partitions | max ULP vs the EP alone | ms | error |", "|---|---|---|---|---|---|"]
            md += [f"| {r['model']} | {r['providers']} | {r.get('partitions', '')} | {r.get('max_ulp', '')} | "
                   f"{_f(r.get('ms'))} | {str(r.get('error', ''))[:120]} |" for r in o["runs"]]
    return "\n".join(md) + "\n"


def write(res, out: Path) -> None:
    res = {k: v for k, v in res.items() if not k.startswith("_")}
    (out / "device_check.json").write_text(json.dumps(res, indent=1, default=to_json))
    (out / "device_check.md").write_text(markdown(res))


def run_steps(res, ctx, steps, out: Path, total: float) -> None:
    """Run ``steps`` ((name, fn(part, ctx) -> status) in order), each under its time budget
    (SIGALRM): a step that raises or runs out of time keeps what it put in ``part`` and the
    next one runs; ``res`` is written to ``out`` after every step."""
    t0, budget = ctx["t0"], ctx["budget"]
    signal.signal(signal.SIGALRM, _alarm)
    for name, fn in steps:
        t = time.perf_counter()
        part = {}
        left = total - (t - t0)
        if name in ("ptx", "tests", "cases"):
            # background work started at t0: waited for up to its budget from the start
            budget[name] = min(budget[name], max(1.0, total - 60))
            alarm = max(1.0, t0 + budget[name] - t) + 30   # + collecting after the kill
        else:
            # its own budget, cut to what is left of the total
            alarm = max(1.0, min(budget[name], left))
        signal.setitimer(signal.ITIMER_REAL, alarm)
        try:
            status = fn(part, ctx)
        except StepTimeout:
            status = "timed out"
            part["note"] = f"stopped after {alarm:.0f} s (its budget); results so far are kept"
        except Exception:  # noqa: BLE001 - record and go on with the next step
            status = "error"
            part["error"] = traceback.format_exc()[-2000:]
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        part["status"] = status
        part["seconds"] = round(time.perf_counter() - t, 1)
        res["steps"][name] = part
        write(res, out)
        print(f"[device_check] {name}: {status} in {part['seconds']} s", flush=True)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # the simulator must be chosen before numba is first imported (here, not at import:
    # importing this module must not change a test process's environment)
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1" if REHEARSE else "0"
    if "--ptx" in argv:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "0"    # NVVM lowering, no driver needed
        i = argv.index("--ptx")
        k, n = map(int, argv[i + 3].split("/"))
        return ptx_main(int(argv[i + 1]), argv[i + 2], k, n)
    if "--shard" in argv:
        i = argv.index("--shard")
        k, n = map(int, argv[i + 1].split("/"))
        return shard_main(k, n, argv[i + 2])
    t0 = time.perf_counter()
    try:
        ort_eps = parse_ort_eps(argv)
    except ValueError as e:
        print(f"device_check: {e}", file=sys.stderr)
        return 2
    out = out_dir()
    total = R_TOTAL if REHEARSE else TOTAL
    budget = dict(R_BUDGET if REHEARSE else BUDGET)
    res = {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "rehearse": REHEARSE,
           "simulator": os.environ["NUMBA_ENABLE_CUDASIM"] == "1", "budget_s": budget, "total_budget_s": total,
           "steps": {}}
    from numba import cuda
    if not cuda.is_available():
        res["error"] = ("no CUDA GPU available (NUMBA_ENABLE_CUDASIM=0 and numba finds no device/driver): "
                        "nothing to check; run it on a lent GPU machine, or rehearse with --rehearse")
        write(res, out)
        print(res["error"], file=sys.stderr)
        return 2
    try:
        res["device"] = "CUDA simulator" if REHEARSE else str(cuda.get_current_device().name.decode()
                                                              if isinstance(cuda.get_current_device().name, bytes)
                                                              else cuda.get_current_device().name)
    except Exception as e:  # noqa: BLE001
        res["device"] = f"unknown ({type(e).__name__})"
    res["_t0"] = t0
    signal.signal(signal.SIGTERM, _on_term(res, out))
    ctx = {"t0": t0, "budget": budget, "bg": start_background(out), "ort_eps": ort_eps}
    write(res, out)
    run_steps(res, ctx, ((n, globals()[f"step_{n}"]) for n in STEPS), out, total)
    for p in _CHILDREN:                 # never leave a process behind
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
    res["seconds"] = round(time.perf_counter() - t0, 1)
    write(res, out)
    print(markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
