"""Compile CUDA kernels for a real GPU (sm_90 PTX) without one: shared by
test_pmath.py and test_gpu_compile.py.

numba's CUDA simulator runs kernels as Python (and scalar ``@njit`` helpers as
CPU code), so it cannot show whether a kernel compiles for the GPU or what the
GPU compiler makes of it. With the CUDA toolkit's libNVVM and libdevice
installed (no GPU or driver needed), numba-cuda can lower a kernel to LLVM IR and
NVVM can turn that into PTX, which ``PRELUDE`` sets up in a subprocess (the test
process itself runs the simulator, which must be chosen before numba is first
imported). ``run_script(PRELUDE + body)`` runs it and returns the JSON object the
script prints last; when libNVVM/libdevice is missing the prelude prints
``{"skip": reason}`` and ``run_script`` calls ``pytest.skip`` with that reason.

Names the prelude defines for the script body:

* ``nvvm``, ``types`` (numba.core.types), ``cc`` (numba.cuda.compiler),
  ``_retarget`` (hetero_explore's: a ``@cuda_kernel``'s Python function with its
  ``@dual`` calls bound to their CUDA device twins);
* ``ptx(fn, args, **opts)``: PTX text of kernel ``fn`` (a plain Python function,
  e.g. ``_retarget(k.py, "cuda")``) for argument types ``args`` on sm_90, no
  fastmath; ``opts`` go to ``nvvm.compile_ir`` (which target.py wraps to ask for
  ``fma=False`` for this project's compilations unless fastmath);
* ``stats(ptx_text)``: counts of instructions that break the kernel contract:
  ``fma`` (a*b+c contracted into one rounding), ``f64`` (any ``.f64``
  instruction), ``approx`` (``.approx`` or ``div.full``: non-IEEE division, sqrt,
  transcendentals), ``ftz`` (subnormals flushed to zero);
* ``contract(fn, args)``: the explicit-FMA contract of a kernel -- ``stats`` of its PTX
  with every explicit fma (``llvm.fma.f32``, written as ``fma(a, b, c)`` in the kernel)
  replaced by a product-free marker, so that ``stats["fma"]`` counts only *stray* fmas
  (contraction), ``written`` (the kernel's IR calls ``llvm.fma.f32``) and ``fma_rn`` (the
  ``fma.rn.f32`` instructions of the real PTX: more than 0 exactly when ``written``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PRELUDE = r'''
import glob, json, os, re, sys, types as _t
os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
try:
    from cuda.pathfinder import load_nvidia_dynamic_lib
    from numba.cuda.cudadrv import nvvm
    nvvm.NVVM()
    lib = None
    try:
        from cuda.pathfinder import find_bitcode_lib
        lib = find_bitcode_lib("device")
    except Exception:
        d = os.path.dirname(load_nvidia_dynamic_lib("nvvm").abs_path)
        for up in range(4):
            c = glob.glob(os.path.join(d, *([".."] * up), "nvvm", "libdevice", "libdevice*.bc"))
            if c:
                lib = c[0]
                break
    if lib is None:
        raise RuntimeError("libdevice not found")
    nvvm.LibDevice._cache_ = open(lib, "rb").read()
except Exception as e:
    print(json.dumps({"skip": f"libNVVM/libdevice not available: {type(e).__name__}: {e}"}))
    sys.exit(0)
import numba.cuda.dispatcher as _d
_d.get_current_device = lambda: _t.SimpleNamespace(compute_capability=(9, 0))
from numba import types
import numba.cuda.compiler as cc
from hetero_explore.kernels.common import _retarget
from hetero_explore.kernels.target import own_compilation

_FMA_CALL = re.compile(r'@"?llvm\.fma\.f32\b"?')
_FMA_DECL = re.compile(r"^declare[^\n]*@__he_fma_marker\([^\n]*$", re.M)
# what an explicit fma becomes when counting strays: two subtractions (no product, so nothing a
# compiler could contract into an fma)
_MARKER = ("define internal float @__he_fma_marker(float %a, float %b, float %c) {\n"
           "  %m = fsub float %a, %b\n  %r = fsub float %m, %c\n  ret float %r\n}")

def _llvm(fn, args):
    return list(cc.compile_cuda(fn, types.void, args, fastmath=False, cc=(9, 0)).library.llvm_strs)

def _nvvm(strs, **opts):
    with own_compilation():   # this project's compilations: NVVM gets -fma=0 (see target.py)
        p = nvvm.compile_ir(strs, arch="compute_90", opt=3, fastmath=False, **opts)
    return p.decode() if isinstance(p, bytes) else p

def ptx(fn, args, **opts):
    return _nvvm(_llvm(fn, args), **opts)

def contract(fn, args, **opts):
    """The fma contract of kernel ``fn``: ``stats`` of its PTX with every explicit fma (a call
    of ``llvm.fma.f32``: hetero_explore.kernels.fmadd.fma) replaced by a marker without a
    product -- so its ``fma`` counts *stray* fmas, contracted by the compiler --, ``written``
    (the kernel calls fma) and ``fma_rn`` (fma.rn.f32 in the real PTX)."""
    strs = _llvm(fn, args)
    written = any(_FMA_CALL.search(s) for s in strs)
    if not written:
        p = _nvvm(strs, **opts)
        return {"stats": stats(p), "written": False, "fma_rn": p.count("fma.rn.f32")}
    real = _nvvm(strs, **opts)
    marked = [_FMA_DECL.sub(_MARKER, _FMA_CALL.sub("@__he_fma_marker", s)) for s in strs]
    return {"stats": stats(_nvvm(marked, **opts)), "written": True, "fma_rn": real.count("fma.rn.f32")}

def stats(p):
    ops = re.findall(r"^\s*(?:@!?%p\d+\s+)?([a-z]+(?:\.[a-z0-9]+)*)", p, re.M)
    return {"fma": sum(o.startswith("fma") for o in ops), "f64": sum(".f64" in o for o in ops),
            "approx": sum(".approx" in o or "div.full" in o for o in ops), "ftz": sum(".ftz" in o for o in ops)}
'''


def run_script(script: str, stdin: str | None = None, timeout: float = 900) -> dict:
    """Run ``script`` (``PRELUDE`` + a body that prints one JSON object last) with the
    simulator off; its JSON result, or ``pytest.skip`` where libNVVM is unavailable."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    r = subprocess.run([sys.executable, "-c", script], input=stdin, capture_output=True, text=True, env=env,
                       timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    if "skip" in out:
        pytest.skip(out["skip"])
    return out
