"""Every CUDA kernel the CUDA provider launches for real models compiles for a
real GPU (sm_90 PTX), in float32 IEEE arithmetic only.

The simulator runs kernels as Python, so a kernel that numba-cuda cannot compile
(e.g. one calling an ``@njit`` function that has an explicit signature) or that
compiles to something breaking the kernel contract (bitwise equal to the CPU
provider) passes every simulator test. This test:

1. records, in a subprocess on the simulator, every kernel launch of the CUDA
   provider while it runs the tiny MLP, CNN and transformer and the demo model:
   the CUDA kernel (module + function name; generated kernels are looked up in
   ``target.GENERATED``) and the numba types of its
   arguments as numba-cuda would type them (``numba.typeof``: device arrays →
   ``Array(dtype, ndim, layout)``, Python ints → int64, floats → float64, numpy
   scalars → their type, bools → boolean). It wraps ``LazyKernel.__getitem__``
   (the ``kernel[blocks, threads]`` every launch goes through), so it sees
   launches whether or not they go through ``Target.launch``;
2. compiles each distinct (kernel, signature) for sm_90 with the simulator off
   (``ptx_tools``; skipped where libNVVM/libdevice is missing) through the
   project's NVVM options (target.py asks for ``fma=False``), and checks the
   explicit-FMA contract: ``fma.rn.f32`` exactly where a kernel writes ``fma(a, b, c)``
   (``kernels.fmadd``; MatMul/Gemm and Conv must), no *stray* ``fma`` (a contracted
   ``a*b + c``: counted on the PTX compiled with the explicit fmas replaced by a
   product-free marker), no ``.f64``, ``.approx``/``div.full`` or ``.ftz``.

The demo model cannot run on the CUDA provider alone (its ``Clip`` has a bound
computed at run time, which the CUDA kernel declines; see demo.py), so it runs on
``[cuda, cpu]`` with that node on the CPU, as the demo is meant to.
"""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import functools  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402

from ptx_tools import PRELUDE, run_script  # noqa: E402

# "module.kernel" -> reason, for kernels known not to compile for the GPU (xfail)
KNOWN_FAILURES: dict = {}

_RECORD_SCRIPT = r'''
import json, os
os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
import numba
from numba.core import types
from numba.core.typing.typeof import Purpose
from numba.np.numpy_support import as_dtype
import hetero_explore as he
from hetero_explore.data import demo, models
from hetero_explore.execution.executor import execute, execute_reference
from hetero_explore.execution.inputs import random_inputs
from hetero_explore.planner import plan
from hetero_explore.providers import cpu, cuda
from hetero_explore.kernels import target

def arg_type(a):
    t = numba.typeof(a, Purpose.argument)
    if isinstance(t, types.Array):
        return ["array", as_dtype(t.dtype).name, t.ndim, t.layout]
    if isinstance(t, (types.Boolean, types.Integer, types.Float)):
        return ["scalar", as_dtype(t).name]
    raise TypeError(f"unexpected kernel argument {a!r} of numba type {t}")

launches = {}
current = None
original = target.LazyKernel.__getitem__

def getitem(self, config):
    launcher = original(self, config)
    if self.target != "cuda":
        return launcher
    def run(*args):
        sig = [arg_type(a) for a in args]
        key = json.dumps([self.py.__module__, self.py.__name__, sig])
        launches.setdefault(key, set()).add(current)
        return launcher(*args)
    return run

target.LazyKernel.__getitem__ = getitem
# as written and as the load-time optimisation rewrites them (which folds away every BatchNormalization)
for optimize in (False, True):
    for name, make in (("mlp", models.mlp), ("cnn", models.cnn), ("transformer", models.transformer)):
        current = name
        graph = he.load_model(make(size="tiny"), optimize=optimize)
        execute_reference(graph, cuda(), random_inputs(graph))
    current = "demo"
    graph = he.load_model(demo.demo_model(), input_shapes=demo.demo_input_shapes(), optimize=optimize)
    execute(plan(graph, [cuda(), cpu()]), demo.demo_inputs())
print(json.dumps([json.loads(k) + [sorted(v)] for k, v in launches.items()]))
'''

_COMPILE_BODY = r'''
import importlib, time
from numba.np.numpy_support import from_dtype
import numpy as np
from hetero_explore.kernels.target import GENERATED, LazyKernel

def numba_type(t):
    if t[0] == "array":
        return types.Array(from_dtype(np.dtype(t[1])), t[2], t[3])
    return from_dtype(np.dtype(t[1]))

res = {}
t_all = time.perf_counter()
for module, name, sig, _models in json.loads(sys.stdin.read()):
    key = f"{module.rsplit('.', 1)[-1]}.{name}({', '.join(str(numba_type(t)) for t in sig)})"
    t0 = time.perf_counter()
    try:
        mod = importlib.import_module(module)     # generates its kernels into GENERATED
        k = GENERATED.get(name) or getattr(mod, name)
        assert isinstance(k, LazyKernel) and k.target == "cuda", f"{module}.{name} is not a CUDA kernel"
        c = contract(_retarget(k.py, "cuda"), tuple(numba_type(t) for t in sig))
        res[key] = {"kernel": f"{module}.{name}", "stats": c["stats"], "fma_written": c["written"],
                    "fma_rn": c["fma_rn"]}
    except Exception as e:
        res[key] = {"kernel": f"{module}.{name}", "error": f"{type(e).__name__}: {str(e)[:1500]}"}
    res[key]["seconds"] = round(time.perf_counter() - t0, 2)
print(json.dumps({"kernels": res, "seconds": round(time.perf_counter() - t_all, 1)}))
'''


@functools.lru_cache(maxsize=1)
def _launches() -> list:
    """[module, kernel name, argument types, models that launched it] per distinct launch signature."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, "-c", _RECORD_SCRIPT], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@functools.lru_cache(maxsize=1)
def _compiled() -> dict:
    return run_script(PRELUDE + _COMPILE_BODY, stdin=json.dumps(_launches()), timeout=600)


def _split_known(bad: dict):
    """(unexpected failures, known failures) of ``bad`` (key -> details) by KNOWN_FAILURES."""
    known = {k: v for k, v in bad.items() if v["kernel"] in KNOWN_FAILURES}
    return {k: v for k, v in bad.items() if k not in known}, known


def test_recording_sees_the_models_kernels():
    launches = _launches()
    names = {name for _, name, _, _ in launches}
    # a guard against a recorder that silently records nothing (or only part of a model)
    for expected in ("_mm_cuda", "_conv_cuda", "_softmax_cuda", "_ln_cuda", "_Add_f32_cuda", "_bn_cuda"):
        assert expected in names, (expected, sorted(names))
    assert {m for *_, ms in launches for m in ms} == {"mlp", "cnn", "transformer", "demo"}


@pytest.mark.slow
def test_every_launched_kernel_compiles_for_sm90():
    res = _compiled()["kernels"]
    assert len(res) == len(_launches())
    failed = {k: r for k, r in res.items() if "error" in r}
    unexpected, known = _split_known(failed)
    assert not unexpected, "kernels that do not compile for the GPU:\n" + "\n".join(
        f"  {k}: {r['error']}" for k, r in unexpected.items())
    if known:
        pytest.xfail("; ".join(f"{r['kernel']}: {KNOWN_FAILURES[r['kernel']]}" for r in known.values()))


#: kernels whose contract says fma (their multiply-accumulates): their PTX must show fma.rn.f32
MUST_FMA = ("_mm_cuda", "_conv_cuda")


@pytest.mark.slow
def test_explicit_fma_becomes_fma_rn_exactly_where_written():
    res = _compiled()["kernels"]
    ok = {k: r for k, r in res.items() if "stats" in r}
    for name in MUST_FMA:
        hits = [r for r in ok.values() if r["kernel"].endswith("." + name)]
        assert hits and all(r["fma_written"] and r["fma_rn"] > 0 for r in hits), (name, hits)
    wrong = {k: (r["fma_written"], r["fma_rn"]) for k, r in ok.items() if r["fma_written"] != (r["fma_rn"] > 0)}
    assert not wrong, "fma.rn.f32 where no fma is written, or a written fma lost (written, fma.rn count):\n" + \
        "\n".join(f"  {k}: {v}" for k, v in wrong.items())


@pytest.mark.slow
def test_launched_kernels_are_float32_ieee_without_fma():
    # stray fma: a*b+c contracted into one rounding where the kernel wrote two (explicit
    # fma(a, b, c) calls are replaced by a product-free marker before counting); .f64: double arithmetic where the
    # CPU computes in float32; .approx/div.full: non-IEEE division, sqrt, transcendentals;
    # .ftz: subnormals flushed to zero. Any of these breaks bitwise CPU == GPU.
    res = _compiled()["kernels"]
    bad = {k: r for k, r in res.items() if "stats" in r and any(r["stats"].values())}
    assert not bad, "kernels with forbidden PTX instructions (counts per kernel):\n" + "\n".join(
        f"  {k}: {r['stats']}" for k, r in bad.items())
