"""Helpers shared by kernels on every target: compile-once-for-every-target
functions, broadcasting metadata, bit copies.

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
* Kernels: :func:`.target.kernel_pair` generates the CPU loop and the CUDA
  kernel (one thread per item, ``if i < n``) from one per-item statement that
  calls the same ``@dual``/``@njit`` functions. ``@cpu_kernel`` is for CPU-only
  code (the fast paths in ``cpu_fast/``, registered in :mod:`.overrides`).

Rules that keep results bitwise equal (numba and the simulator's Python
promote differently): write float constants as ``np.float32(...)``, never mix
a Python/int64 scalar into float32 arithmetic without converting it with
``np.float32(...)`` first, accumulate in ascending index order, no fastmath.
"""

from __future__ import annotations

import numpy as np

from .target import (CPU, CUDA, Dual, LazyKernel, Target, _retarget, cuda, get_target,  # noqa: F401
                     kernel_pair)


def dual(fn=None, *, cache: bool = True):
    """Decorator: compile ``fn`` for every target that calls it (``.cpu``: njit; ``.cuda``: a
    CUDA device function; ``.on(name)`` for any registered target)."""
    if fn is None:
        return lambda f: Dual(f, cache=cache)
    return Dual(fn, cache=cache)


def cpu_kernel(fn=None, *, cache: bool = True):
    """Decorator: an ``njit`` CPU kernel in which ``@dual`` calls resolve to CPU twins."""
    if fn is None:
        return lambda f: LazyKernel(f, "cpu", cache)
    return LazyKernel(fn, "cpu", cache)


def replayable(run):
    """Mark a build's run function as replayable: its only effects are its ``target.launch``
    (and ``target.call``) calls, whose arguments are fixed by the input and output arrays it
    is given (views of them, build-time constants, scratch the kernel writes in full before
    it reads it). It reads no input *values* in Python, checks nothing after a launch, and
    allocates no zeroed scratch that a kernel accumulates into. The runner then records the
    calls of such a node once, when its arrays are the same at every run, and replays them
    (see :class:`.target.Recording`). ``tests/test_replay.py`` runs every marked op twice on
    new inputs against the unreplayed run."""
    run.replayable = True
    return run


def cuda_kernel(fn):
    """Decorator: a ``cuda.jit`` kernel in which ``@dual`` calls resolve to device twins."""
    return LazyKernel(fn, "cuda", False)


def node_error(ctx, msg):
    """A KernelError naming the node of ``ctx``."""
    from ..ir.errors import KernelError
    return KernelError(f"node {ctx.node.name!r} ({ctx.node.op_type}): {msg}")


def attr_str(ctx, name: str, default):
    """The string attribute ``name`` of ``ctx``'s node (``default`` when absent; bytes decoded)."""
    v = ctx.attrs.get(name, default)
    return v.decode() if isinstance(v, bytes) else v


def prod(xs) -> int:
    """The product of ``xs`` as a Python int (exact, unlike np.prod's int64)."""
    p = 1
    for v in xs:
        p *= int(v)
    return p


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


def to_target(target, *arrays):
    """Move small metadata arrays to ``target`` (identity on host targets)."""
    return get_target(target).to_device(*arrays)


def flat(a):
    """A flat view of a host or device array. (This runs for every array of every node call:
    a host array's ``ravel()`` -- a view when it is contiguous, as every buffer is -- takes
    about a quarter of ``reshape(a.size)``'s time.)"""
    if a.ndim == 1:
        return a
    if type(a) is np.ndarray:
        return a.ravel()
    return a.reshape(a.size)


_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def bits(a):
    """A flat view of a host or device array as unsigned integers of the same width."""
    v = a.view(_UINT[a.dtype.itemsize])
    return flat(v)


_COPY = kernel_pair("copy_bits", "x, out", "out[i] = x[i]", module=__name__)


def copy_array(target, x, out) -> None:
    """Copy ``x`` into ``out`` (same size and item width) bit for bit, on any target."""
    x, out = bits(x), bits(out)
    get_target(target).launch(_COPY, out.shape[0], x, out)
