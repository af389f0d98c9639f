"""The explicit fused multiply-add of the kernel contract: ``fma(a, b, c)``, one IEEE 754
float32 operation on every target.

IEEE 754's fused multiply-add computes ``a*b + c`` exactly and rounds once (to nearest,
ties to even), so it is as portable as a multiply or an add: the same inputs give the same
bits on an x86 ``vfmadd*ps``, an ARM ``fmla`` and CUDA's ``fma.rn.f32``. What is *not*
portable is a compiler contracting ``a*b + c`` into an fma where it likes; the kernels
never let it (no fast-math on the CPU, NVVM's ``-fma=0`` on CUDA: see :mod:`.target`). So a
multiply-add is either written ``fma(a, b, c)`` -- one rounding, on every target -- or
written ``a*b + c`` -- two roundings, on every target.

How the one function reaches each target:

* **CPU** (``njit``): :func:`fma` calls the LLVM intrinsic ``llvm.fma.f32``, which becomes
  ``vfmadd`` (FMA3 hardware) or a call to libm's correctly rounded ``fmaf``; LLVM's loop
  vectoriser turns it into ``llvm.fma.v8f32``/``v16f32`` (``vfmadd*ps``) in loops over
  output elements. The CPU micro-kernels (:mod:`.cpu_fast.llvm`) call the vector
  intrinsic themselves.
* **CUDA** (numba-cuda): the same ``@njit`` function is compiled for the GPU (numba-cuda
  retargets CPU dispatchers), and NVVM lowers ``llvm.fma.f32`` to ``fma.rn.f32`` even under
  ``-fma=0`` (which only stops contraction). ``tests/test_gpu_compile.py`` checks the sm_90
  PTX: ``fma.rn.f32`` where a kernel calls :func:`fma`, none where it does not.
* **numba's CUDA simulator**: it runs ``@njit`` helpers as compiled CPU code, so a simulated
  kernel gets the hardware's correctly rounded fma, bit for bit the CPU's -- not
  ``numba.cuda.fma``'s simulation, which computes ``a*b + c`` in float64 and rounds twice.
  :func:`fma_emulated` is an exact float64 emulation (round to odd, then one rounding to
  float32) for code that runs as plain numpy (tests, benchmarks): it equals :func:`fma`.

Arguments are converted to float32 first (a float32 value passed through Python as a float
is unchanged by that), so the result is the float32 ``fma`` of three float32 values.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir as llvm_ir
from numba import njit, types
from numba.extending import intrinsic

_F32 = llvm_ir.FloatType()


@intrinsic
def _llvm_fma_f32(typingctx, a, b, c):
    """``llvm.fma.f32(a, b, c)`` (float32 arguments)."""
    sig = types.float32(types.float32, types.float32, types.float32)

    def codegen(context, builder, signature, args):
        # the function type is required: without it LLVM's verifier rejects the call
        fn = builder.module.declare_intrinsic("llvm.fma", [_F32], llvm_ir.FunctionType(_F32, [_F32, _F32, _F32]))
        return builder.call(fn, list(args))

    return sig, codegen


@njit(cache=True, error_model="numpy")
def fma(a, b, c):
    """``a*b + c`` computed exactly and rounded once to float32 (IEEE 754 fusedMultiplyAdd),
    the same bits on every target (see the module docs)."""
    return _llvm_fma_f32(np.float32(a), np.float32(b), np.float32(c))


def fma_emulated(a, b, c) -> np.ndarray:
    """:func:`fma` on numpy arrays (or scalars), emulated exactly in float64.

    A product of two float32 values is exact in float64 (24 + 24 significand bits <= 53).
    The sum ``p + c`` is then rounded to odd (truncated towards zero, the last bit set when
    anything was cut off: Boldo and Melquiond's rule), which keeps enough information for
    the final rounding to float32 to be the correctly rounded one (53 >= 24 + 2). NaN and
    infinity propagate as the IEEE operation does; an exact zero takes the sign of the
    plain float64 sum (IEEE's rule for fma)."""
    a = np.asarray(a, dtype=np.float32).astype(np.float64)
    b = np.asarray(b, dtype=np.float32).astype(np.float64)
    c = np.asarray(c, dtype=np.float32).astype(np.float64)
    with np.errstate(all="ignore"):
        p = a * b                                  # exact
        s = p + c                                  # rounded to nearest in float64
        # the rounding error of s, exactly (TwoSum)
        bb = s - p
        err = (p - (s - bb)) + (c - bb)
        # round to odd: inexact, the true value lies strictly between s and its neighbour
        # towards err; of those two, take the one whose last significand bit is 1
        inexact = np.isfinite(s) & (err != 0)
        even = (s.view(np.int64) & 1) == 0
        stepped = np.nextafter(s, np.where(err > 0, np.inf, -np.inf))
        s_odd = np.where(inexact & even, stepped, s)
        r = s_odd.astype(np.float32)
    return r
