"""Helpers shared by kernels on both targets: compile-once-for-two-targets
functions, broadcasting metadata, CUDA launch.

How one piece of Python becomes both targets' code
-------------------------------------------------
* Scalar math (takes and returns scalars only): plain ``@njit``. A CPU kernel
  calls it compiled; a CUDA kernel calls it too (numba-cuda retargets CPU
  dispatchers to the GPU; in the simulator the compiled CPU code runs). Same
  source, same IEEE operations, same bits.
* Code that walks arrays (index math, accumulation loops): ``@dual``. It is
  compiled with ``njit`` for the CPU and as a CUDA device function for the
  GPU; inside it, other ``@dual`` functions resolve to the same target's twin.
  (The simulator cannot pass its device arrays into ``njit`` code, which is
  why array-walking code cannot simply be ``@njit``.)
* Kernels: ``@cpu_kernel`` (an ``njit`` loop over output items) and
  ``@cuda_kernel`` (one thread per item, ``if i < n``), both calling the same
  ``@dual``/``@njit`` per-item function.

Rules that keep results bitwise equal (numba and the simulator's Python
promote differently): write float constants as ``np.float32(...)``, never mix
a Python/int64 scalar into float32 arithmetic without converting it with
``np.float32(...)`` first, accumulate in ascending index order, no fastmath.
"""

from __future__ import annotations

import math
import types

import numpy as np
from numba import cuda, njit

THREADS_PER_BLOCK = 128


def _keep_mul_add_apart() -> None:
    """NVVM contracts a*b+c into FMA unless told otherwise, and numba-cuda passes no
    such option without fastmath. The kernel contract needs separate roundings on
    both targets, so ask NVVM for ``-fma=0`` whenever fastmath is off. Set
    HETERO_EXPLORE_ALLOW_FMA=1 to leave numba-cuda's default alone. (Only affects
    compilation for a real GPU; unverified here without one: check the PTX of a
    kernel with ``inspect_asm()`` for ``fma.rn.f32``.)"""
    import os
    if os.environ.get("HETERO_EXPLORE_ALLOW_FMA") == "1":
        return
    try:
        from numba.cuda.cudadrv import nvvm
    except Exception:  # pragma: no cover - numba-cuda missing or simulator-only install
        return
    original = nvvm.compile_ir
    if getattr(original, "_hetero_explore_no_fma", False):
        return

    def compile_ir(llvmir, **options):
        if not options.get("fastmath", False):
            options.setdefault("fma", False)
        return original(llvmir, **options)

    compile_ir._hetero_explore_no_fma = True
    nvvm.compile_ir = compile_ir


_keep_mul_add_apart()


class Dual:
    """One Python function compiled for both targets (see module docs)."""

    def __init__(self, fn, cache: bool = True):
        self.py = fn
        self._cache = cache
        self._cpu = None
        self._cuda = None
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__

    @property
    def cpu(self):
        if self._cpu is None:
            self._cpu = njit(cache=self._cache, error_model="numpy")(_retarget(self.py, "cpu"))
        return self._cpu

    @property
    def cuda(self):
        if self._cuda is None:
            self._cuda = cuda.jit(device=True)(_retarget(self.py, "cuda"))
        return self._cuda

    def __call__(self, *args):
        return self.cpu(*args)


def _retarget(fn, target: str):
    g = dict(fn.__globals__)
    for k in _referenced_names(fn.__code__):
        v = fn.__globals__.get(k)
        if isinstance(v, Dual) and v.py is not fn:
            g[k] = v.cpu if target == "cpu" else v.cuda
    new = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__module__ = fn.__module__
    new.__qualname__ = fn.__qualname__
    new.__doc__ = fn.__doc__
    return new


def _referenced_names(code) -> set:
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _referenced_names(c)
    return names


def dual(fn=None, *, cache: bool = True):
    """Decorator: compile ``fn`` for the CPU (``.cpu``) and as a CUDA device function (``.cuda``)."""
    if fn is None:
        return lambda f: Dual(f, cache=cache)
    return Dual(fn, cache=cache)


class _LazyKernel:
    def __init__(self, fn, target: str, cache: bool):
        self.py = fn
        self.target = target
        self._cache = cache
        self._compiled = None

    @property
    def compiled(self):
        if self._compiled is None:
            f = _retarget(self.py, self.target)
            self._compiled = (njit(cache=self._cache, error_model="numpy")(f) if self.target == "cpu"
                              else cuda.jit(f))
        return self._compiled

    def __call__(self, *args):
        return self.compiled(*args)

    def __getitem__(self, config):
        return self.compiled[config]


def cpu_kernel(fn=None, *, cache: bool = True):
    """Decorator: an ``njit`` CPU kernel in which ``@dual`` calls resolve to CPU twins."""
    if fn is None:
        return lambda f: _LazyKernel(f, "cpu", cache)
    return _LazyKernel(fn, "cpu", cache)


def cuda_kernel(fn):
    """Decorator: a ``cuda.jit`` kernel in which ``@dual`` calls resolve to device twins."""
    return _LazyKernel(fn, "cuda", False)


def broadcast_strides(in_shape, out_shape) -> np.ndarray:
    """Element strides of an input broadcast to ``out_shape`` (0 on broadcast dims),
    as an int64 array of len(out_shape) (at least 1)."""
    in_shape = tuple(in_shape)
    out_shape = tuple(out_shape)
    nd = len(out_shape)
    padded = (1,) * (nd - len(in_shape)) + in_shape
    strides = np.zeros(max(nd, 1), dtype=np.int64)
    acc = 1
    for d in range(nd - 1, -1, -1):
        strides[d] = 0 if padded[d] == 1 else acc
        acc *= padded[d]
    return strides


def shape_array(shape) -> np.ndarray:
    """A shape as an int64 array (length ≥ 1 so that kernels never see empty arrays)."""
    return np.asarray(tuple(shape) if len(shape) else (1,), dtype=np.int64)


@dual
def bcast_offset(i, shape, strides):
    """Flat input offset of flat output index ``i`` under broadcasting."""
    off = 0
    for d in range(shape.shape[0] - 1, -1, -1):
        n = shape[d]
        off += (i % n) * strides[d]
        i //= n
    return off


def launch(kernel, n: int, *args) -> None:
    """Launch a 1-D CUDA kernel over ``n`` items (nothing to do when n == 0)."""
    if n <= 0:
        return
    threads = min(THREADS_PER_BLOCK, n)
    blocks = math.ceil(n / threads)
    kernel[blocks, threads](*args)


def to_target(target: str, *arrays):
    """Move small metadata arrays to the device for CUDA kernels (identity on the CPU)."""
    if target == "cpu":
        return arrays if len(arrays) != 1 else arrays[0]
    moved = tuple(cuda.to_device(np.ascontiguousarray(a)) for a in arrays)
    return moved if len(moved) != 1 else moved[0]


def flat(a):
    """A flat view of a host or device array."""
    return a if a.ndim == 1 else a.reshape(a.size)


_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def bits(a):
    """A flat view of a host or device array as unsigned integers of the same width."""
    v = a.view(_UINT[a.dtype.itemsize])
    return v if v.ndim == 1 else v.reshape(v.size)


@dual
def copy_item(i, x, out):
    out[i] = x[i]


@cpu_kernel
def _copy_cpu(x, out):
    for i in range(out.shape[0]):
        copy_item(i, x, out)


@cuda_kernel
def _copy_cuda(x, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        copy_item(i, x, out)


def copy_array(target: str, x, out) -> None:
    """Copy ``x`` into ``out`` (same size and item width) bit for bit, on either target."""
    x, out = bits(x), bits(out)
    if target == "cpu":
        _copy_cpu(x, out)
    else:
        launch(_copy_cuda, out.shape[0], x, out)
