"""Elementwise ops on the CPU: Sigmoid, Erf and other float32 ops in parallel blocks.

Sigmoid and Erf: each element gets the generated kernel's bits (``sigmoid_f32``, ``erf_f32``),
from a cheaper restricted-range form of the same function where the element lies in its range
(:func:`..pmath.sigmoid_near_f32`, :func:`..pmath.erf_near_f32`) and from the full function
elsewhere. Add/Sub/Mul/Div and Relu/LeakyRelu/Exp/Tanh/Sqrt: the generated kernel's own loop (the
template of :mod:`..elementwise`, the same expression per element) run on blocks of the output.

Elements are independent, so a large input runs in fixed blocks in parallel (each block
decides its own path): the bits do not depend on the blocking or the thread count.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .. import elementwise as ew
from ..common import cpu_kernel
from ..overrides import override
from ..pmath import ERF_B, SIG_NEAR, erf_f32, erf_near_f32, sigmoid_f32, sigmoid_near_f32
from .base import JIT, PAR
from .llvm import num_threads, parallel_chunks, shares

#: elements per parallel block (fixed; 2 threads balance within a few percent from ~16 blocks)
_UN_BLOCK = 1 << 13
#: elements from which a unary op here runs its blocks in parallel: ~15-30 us of work on one
#: thread (Sigmoid ~0.8 ns, Erf ~0.5 ns an element), a few times what a parallel region costs
_UN_PAR = 1 << 15


_F32_ABS = np.uint32(0x7FFFFFFF)


def _bits(v) -> np.uint32:
    return np.uint32(np.array([v], np.float32).view(np.uint32)[0])


# --- Sigmoid ------------------------------------------------------------------------------
_SIG_NEAR_BITS = _bits(SIG_NEAR)


@njit(**JIT)
def _sigmoid_block(X, out, lo, hi):
    """out[lo:hi] = sigmoid_f32(X[lo:hi]): sigmoid_near_f32 on every element (one vectorised
    loop), then, only when the largest magnitude's bits (NaN's compare above any number's)
    exceed SIG_NEAR's, sigmoid_f32 on the elements outside its range. (The far test as a flag
    ORed inside the first loop cost that loop ~30%.)"""
    xr = X[lo:hi]
    yr = out[lo:hi]
    for j in range(hi - lo):
        yr[j] = sigmoid_near_f32(xr[j])
    xb = xr.view(np.uint32)
    m = np.uint32(0)
    for j in range(hi - lo):
        m = max(m, xb[j] & _F32_ABS)
    if m > _SIG_NEAR_BITS:
        for j in range(hi - lo):
            x = xr[j]
            if not abs(x) <= SIG_NEAR:
                yr[j] = sigmoid_f32(x)


@njit(**PAR)
def _sigmoid_par(X, out, nb):
    prev = parallel_chunks(shares(nb))   # see llvm.parallel_chunks
    n = X.shape[0]
    for bu in prange(nb):
        b = np.int64(bu)
        _sigmoid_block(X, out, b * _UN_BLOCK, min(n, (b + 1) * _UN_BLOCK))
    parallel_chunks(prev)


@cpu_kernel
def _sigmoid_cpu(X, out, p0, p1, aux):
    """CPU only: Sigmoid as the generated kernel's sigmoid_f32 per element (_sigmoid_block),
    blocks in parallel from _UN_PAR elements."""
    n = X.shape[0]
    nb = (n + _UN_BLOCK - 1) // _UN_BLOCK
    if n >= _UN_PAR and num_threads() > 1:
        _sigmoid_par(X, out, nb)
    else:
        for b in range(nb):
            _sigmoid_block(X, out, b * _UN_BLOCK, min(n, (b + 1) * _UN_BLOCK))


# --- Erf ----------------------------------------------------------------------------------
#: Erf: elements per block of the far-argument test (one AVX2 vector), and the share of such
#: blocks from which a whole block goes through erf_f32 instead (measured break-even: ~1/4)
_ERF_BLOCK = 8
_ERF_FAR_SHARE = 3
_ERF_B_BITS = _bits(ERF_B)


@njit(**JIT)
def _erf_flat(x, out):
    """out = erf_f32(x), the generated kernel's loop."""
    for i in range(x.shape[0]):
        out[i] = erf_f32(x[i])


@njit(**JIT)
def _erf_near_flat(x, out):
    """out = erf_near_f32(x): erf_f32's bits where |x| < ERF_B."""
    for i in range(x.shape[0]):
        out[i] = erf_near_f32(x[i])


@njit(**JIT)
def _erf_far_blocks(x):
    """Indices of the _ERF_BLOCK-element blocks of x holding an element with |x| >= ERF_B or
    a NaN (its magnitude bits compare above ERF_B's), the last block possibly short."""
    n = x.shape[0]
    nw = (n + _ERF_BLOCK - 1) // _ERF_BLOCK
    far = np.zeros(nw * _ERF_BLOCK, dtype=np.uint8)
    xb = x.view(np.uint32)
    for i in range(n):
        far[i] = np.uint8((xb[i] & _F32_ABS) >= _ERF_B_BITS)
    fw = far.view(np.uint64)
    idx = np.empty(nw, dtype=np.int64)
    nf = 0
    for w in range(nw):
        idx[nf] = w
        nf += np.int64(fw[w] != 0)
    return idx[:nf]


@njit(**JIT)
def _erf_block(X, out):
    """Erf of one block (X, out: its slices). erf_f32 computes all three of its ranges' forms
    on every element (branch-free, vectorised) and selects one; most inputs of a GELU lie in
    the first two (|x| < 1.25), where erf_near_f32 gives the same bits from those two alone.
    So: the groups of 8 holding a far element (or NaN) are found first; with few of them,
    every element takes erf_near_f32 and the far groups are then recomputed with erf_f32
    (gathered into a scratch row, so that its loop stays one vectorised loop); with many (a
    share above 1 / _ERF_FAR_SHARE), all go through erf_f32."""
    n = X.shape[0]
    nw = (n + _ERF_BLOCK - 1) // _ERF_BLOCK
    blocks = _erf_far_blocks(X)
    nf = blocks.shape[0]
    if nf * _ERF_FAR_SHARE > nw:
        _erf_flat(X, out)
        return
    _erf_near_flat(X, out)
    if nf == 0:
        return
    xs = np.zeros(nf * _ERF_BLOCK, dtype=np.float32)
    ys = np.empty(nf * _ERF_BLOCK, dtype=np.float32)
    for j in range(nf):
        o = blocks[j] * _ERF_BLOCK
        for i in range(min(_ERF_BLOCK, n - o)):
            xs[j * _ERF_BLOCK + i] = X[o + i]
    _erf_flat(xs, ys)
    for j in range(nf):
        o = blocks[j] * _ERF_BLOCK
        for i in range(min(_ERF_BLOCK, n - o)):
            out[o + i] = ys[j * _ERF_BLOCK + i]


@njit(**PAR)
def _erf_par(X, out, nb):
    prev = parallel_chunks(shares(nb))   # see llvm.parallel_chunks
    n = X.shape[0]
    for bu in prange(nb):
        b = np.int64(bu)
        lo = b * _UN_BLOCK
        hi = min(n, lo + _UN_BLOCK)
        _erf_block(X[lo:hi], out[lo:hi])
    parallel_chunks(prev)


@cpu_kernel
def _erf_cpu(X, out, p0, p1, aux):
    """CPU only: Erf as the generated kernel's erf_f32 per element (_erf_block), blocks of
    _UN_BLOCK in parallel from _UN_PAR elements."""
    n = X.shape[0]
    if n >= _UN_PAR and num_threads() > 1:
        _erf_par(X, out, (n + _UN_BLOCK - 1) // _UN_BLOCK)
    else:
        _erf_block(X, out)


# --- Add, Sub, Mul, Div (float32) --------------------------------------------------------------
#: output elements per parallel block of a binary op, and from how many it goes parallel (a
#: binary op streams ~12 bytes an element: ~10 us on one thread at 2**16)
_BIN_BLOCK = 1 << 14
_BIN_PAR = 1 << 16

#: the kernels of one binary op, from the generated kernel's own CPU loop (``{body}``, run on a
#: block: a range of elements when neither input broadcasts, else a range of the coalesced
#: shape's outermost axis, whose inputs start at that row's offsets) in parallel blocks
_BIN_SRC = """
@njit(**JIT)
def _{name}_blk(A, B, out, ma, mb, shape, sa, sb, aux):
{body}


@njit(**PAR)
def _{name}_par(A, B, out, ma, mb, shape, sa, sb, aux, nb, per):
    prev = parallel_chunks(shares(nb))   # see llvm.parallel_chunks
    n = out.shape[0]
    flat_ = ma != BCAST and mb != BCAST
    inner = n // shape[0] if shape.shape[0] > 0 and shape[0] > 0 else n
    for bu in prange(nb):
        b = np.int64(bu)
        if flat_:
            lo = b * per
            hi = min(n, lo + per)
            al = lo if ma == FULL else 0
            bl = lo if mb == FULL else 0
            _{name}_blk(A[al:al + (hi - lo if ma == FULL else 1)], B[bl:bl + (hi - lo if mb == FULL else 1)],
                        out[lo:hi], ma, mb, shape, sa, sb, aux)
        else:
            r0 = b * per
            r1 = min(shape[0], r0 + per)
            sub = shape.copy()
            sub[0] = r1 - r0
            _{name}_blk(A[r0 * sa[0]:], B[r0 * sb[0]:], out[r0 * inner:r1 * inner], ma, mb, sub, sa, sb, aux)
    parallel_chunks(prev)


def _{name}_fast(A, B, out, ma, mb, shape, sa, sb, aux):
    n = out.shape[0]
    if n >= _BIN_PAR and num_threads() > 1:
        if ma != BCAST and mb != BCAST:
            per = _BIN_BLOCK
            nb = (n + per - 1) // per
        else:
            per = max(1, _BIN_BLOCK // (n // shape[0]))
            nb = (shape[0] + per - 1) // per
        if nb > 1:
            _{name}_par(A, B, out, ma, mb, shape, sa, sb, aux, nb, per)
            return
    _{name}_blk(A, B, out, ma, mb, shape, sa, sb, aux)
"""

#: kernel pair name -> its float32 expression (as elementwise declares it)
_BIN_OPS = {"Add_f32": "a + b", "Sub_f32": "a - b", "Mul_f32": "a * b", "Div_f32": "a / b"}


def _binary_fast(name: str, expr: str):
    """The CPU run kernel of the binary pair ``name`` (see _BIN_SRC), compiled from source like
    the generated kernels (this module's file anchors numba's cache)."""
    lines = ew._BINARY_CPU.format(expr=expr).strip("\n").splitlines()
    body = "\n".join("    " + ln if ln.strip() else ln for ln in lines)
    src = _BIN_SRC.format(name=name, body=body)
    ns = dict(vars(ew))
    ns.update(np=np, njit=njit, prange=prange, JIT=JIT, PAR=PAR, num_threads=num_threads,
              parallel_chunks=parallel_chunks, shares=shares, _BIN_BLOCK=_BIN_BLOCK,
              _BIN_PAR=_BIN_PAR, __name__=__name__)
    exec(compile(src, __file__, "exec"), ns)
    fn = ns[f"_{name}_fast"]
    fn.__module__ = __name__
    return cpu_kernel(fn)


_BIN_FAST = {name: _binary_fast(name, expr) for name, expr in _BIN_OPS.items()}


# --- other float32 unary ops: the generated loop in parallel blocks -------------------------------
_UNARY_SRC = """
@njit(**PAR)
def _{name}_par(X, out, p0, p1, aux, nb):
    prev = parallel_chunks(shares(nb))   # see llvm.parallel_chunks
    n = out.shape[0]
    for bu in prange(nb):
        b = np.int64(bu)
        lo = b * _UN_BLOCK
        hi = min(n, lo + _UN_BLOCK)
        xr = X[lo:hi]
        yr = out[lo:hi]
        for i in range(hi - lo):
            x = xr[i]
            yr[i] = {expr}
    parallel_chunks(prev)


def _{name}_fast(X, out, p0, p1, aux):
    n = out.shape[0]
    if n >= {par} and num_threads() > 1:
        _{name}_par(X, out, p0, p1, aux, (n + _UN_BLOCK - 1) // _UN_BLOCK)
    else:
        for i in range(n):
            x = X[i]
            out[i] = {expr}
"""

#: kernel pair name -> (its float32 expression as elementwise declares it, the elements from
#: which it runs in parallel: ~15-30 us of work on one thread)
_UN_OPS = {"Relu_f32": ("unary_f32(RELU, x, p0, p1)", 1 << 17),
           "LeakyRelu_f32": ("unary_f32(LEAKYRELU, x, p0, p1)", 1 << 17),
           "Exp_f32": ("exp_f32(x)", _UN_PAR), "Tanh_f32": ("tanh_f32(x)", _UN_PAR),
           "Sqrt_f32": ("sqrt_f32(x)", 1 << 16)}


def _unary_fast(name: str, expr: str, par: int):
    """The CPU run kernel of the unary pair ``name``: its generated per-element statement, in
    parallel blocks of _UN_BLOCK elements from ``par`` elements (see _binary_fast)."""
    src = _UNARY_SRC.format(name=name, expr=expr, par=par)
    ns = dict(vars(ew))
    ns.update(np=np, njit=njit, prange=prange, PAR=PAR, num_threads=num_threads, parallel_chunks=parallel_chunks,
              shares=shares, _UN_BLOCK=_UN_BLOCK, __name__=__name__)
    exec(compile(src, __file__, "exec"), ns)
    fn = ns[f"_{name}_fast"]
    fn.__module__ = __name__
    return cpu_kernel(fn)


_UN_FAST = {name: _unary_fast(name, expr, par) for name, (expr, par) in _UN_OPS.items()}


def register() -> None:
    override(ew._SIGMOID, target="cpu", run=_sigmoid_cpu)
    override(ew._ERF, target="cpu", run=_erf_cpu)
    for name, run in list(_BIN_FAST.items()) + list(_UN_FAST.items()):
        override(name, target="cpu", run=run)
