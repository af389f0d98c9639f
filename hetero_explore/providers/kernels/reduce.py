"""Reductions: ReduceSum, ReduceMean, ReduceMax, written once for both targets.

Accumulation order (the kernel contract, identical on "cpu" and "cuda"):
each output element visits its reduced input elements in ascending flat
input index order, one element at a time:

* ReduceSum: ``acc = 0`` (of the data type), then ``acc = acc + x`` for each
  element in ascending order.
* ReduceMean: the ReduceSum accumulator (float32), then one float32 division
  by the element count (the count converted to float32 on the host).
* ReduceMax: starts from the first element, then ``if x > acc or x != x:
  acc = x`` (NaN propagates, as numpy's ``maximum.reduce``). An empty
  reduction gives -inf (floats) or the type's minimum (integers).

The CUDA kernel runs one thread per output element. The CPU kernel loops
over output elements calling the same ``@dual`` per-element function, or,
when the innermost input dim is kept, updates a row of accumulators along
that dim reduced element by reduced element (ascending): each output
element still sees the same sequence of operations, so the bits agree.

Axes: as an attribute (ReduceSum before opset 13, ReduceMean/ReduceMax
before opset 18) or as the second input (after). The CUDA target needs the
axes input to be a constant; the CPU target reads a non-constant axes input
at run time. ``noop_with_empty_axes=1`` with no axes is an identity copy.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, njit

from ...errors import KernelError
from .common import bcast_offset, copy_array, cpu_kernel, dual, flat, kernel_pair, to_target
from .opdef import NUMERIC, OpList

OPS = OpList()
register = OPS.register

# --- reduction metadata --------------------------------------------------------


def _reduce_meta(in_shape, axes):
    """Kept and reduced dims of ``in_shape`` with their input element strides,
    size-1 dims dropped and adjacent dims of one kind merged.

    Returns int64 arrays (each of length ≥ 1): kshape, kstrides (kept dims, in
    order: the output's flat order), rshape_outer, rstrides_outer (reduced
    dims but the innermost), and ints r_inner_n, r_inner_stride, n_reduce.
    Visiting ``r`` in ascending order over (outer, inner) visits the reduced
    elements in ascending flat input index order."""
    nd = len(in_shape)
    strides = [1] * nd
    acc = 1
    for d in range(nd - 1, -1, -1):
        strides[d] = acc
        acc *= int(in_shape[d])
    axes = set(axes)
    kept, red = [], []  # lists of [size, stride]
    last_kind = None
    for d in range(nd):
        n = int(in_shape[d])
        kind = "r" if d in axes else "k"
        if n == 1:
            continue
        lst = red if kind == "r" else kept
        if last_kind == kind and lst:
            # merge with the previous dim of the same kind (it is contiguous with this one)
            prev = lst[-1]
            if prev[1] == strides[d] * n:
                prev[0] *= n
                prev[1] = strides[d]
            else:
                lst.append([n, strides[d]])
        else:
            lst.append([n, strides[d]])
        last_kind = kind
    n_reduce = 1
    for n, _ in red:
        n_reduce *= n
    if any(int(in_shape[d]) == 0 for d in axes):
        n_reduce = 0
    kshape = np.array([k[0] for k in kept] or [1], dtype=np.int64)
    kstrides = np.array([k[1] for k in kept] or [0], dtype=np.int64)
    if red:
        inner_n, inner_s = red[-1]
        outer = red[:-1]
    else:
        inner_n, inner_s, outer = 1, 0, []
    if n_reduce == 0:
        inner_n, outer = 0, []
    rshape = np.array([r[0] for r in outer] or [1], dtype=np.int64)
    rstrides = np.array([r[1] for r in outer] or [0], dtype=np.int64)
    n_outer = 1
    for r in outer:
        n_outer *= r[0]
    return kshape, kstrides, rshape, rstrides, int(inner_n), int(inner_s), int(n_outer), int(n_reduce)


# --- per-output-element math (one source for both targets) -----------------------


@njit(cache=True, error_model="numpy")
def _div(a, b):
    a = np.float32(a)
    b = np.float32(b)
    # IEEE division (x / 0 -> inf or NaN) instead of numba's ZeroDivisionError
    return a / b


@dual
def _sum_item(o, x, zero, kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s):
    base = bcast_offset(o, kshape, kstrides)
    acc = zero
    for ro in range(n_outer):
        off = base + bcast_offset(ro, rshape, rstrides)
        for j in range(inner_n):
            acc += x[off + j * inner_s]
    return acc


@dual
def _max_item(o, x, lowest, kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s):
    base = bcast_offset(o, kshape, kstrides)
    if inner_n == 0 or n_outer == 0:
        return lowest
    acc = x[base + bcast_offset(0, rshape, rstrides)]
    for ro in range(n_outer):
        off = base + bcast_offset(ro, rshape, rstrides)
        for j in range(inner_n):
            v = x[off + j * inner_s]
            if v > acc or v != v:
                acc = v
    return acc




_SUM = kernel_pair(
    "sum", "x, out, zero, kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s",
    """
    out[o] = _sum_item(o, x, zero, kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s)
    """, count="out.shape[0]", index="o", module=__name__)




_MEAN = kernel_pair(
    "mean", "x, out, zero, kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s, count",
    """
    out[o] = _div(_sum_item(o, x, zero, kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s), count)
    """, count="out.shape[0]", index="o", module=__name__)




_MAX = kernel_pair(
    "max", "x, out, lowest, kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s",
    """
    out[o] = _max_item(o, x, lowest, kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s)
    """, count="out.shape[0]", index="o", module=__name__)


@cpu_kernel
def _rows_cpu(x, out, kind, init, kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s, count):
    """CPU only, when the innermost input dim is kept (stride 1): a row of
    accumulators over that dim, updated reduced element by reduced element in
    ascending order: each output element sees exactly the sequence of the
    per-element functions above (kind 0 sum, 1 mean, 2 max)."""
    nk = kshape.shape[0]
    KL = kshape[nk - 1]
    kso = kshape[:nk - 1]
    kto = kstrides[:nk - 1]
    nko = out.shape[0] // KL
    for ko in range(nko):
        base = bcast_offset(ko, kso, kto)
        acc = out[ko * KL:(ko + 1) * KL]
        if kind == 2:
            if inner_n == 0 or n_outer == 0:
                acc[:] = init
                continue
            acc[:] = x[base:base + KL]
        else:
            acc[:] = init
        for ro in range(n_outer):
            off = base + bcast_offset(ro, rshape, rstrides)
            for j in range(inner_n):
                st = off + j * inner_s
                seg = x[st:st + KL]
                if kind == 2:
                    for c in range(KL):
                        v = seg[c]
                        acc[c] = v if (v > acc[c] or v != v) else acc[c]
                else:
                    for c in range(KL):
                        acc[c] = acc[c] + seg[c]
        if kind == 1:
            for c in range(KL):
                acc[c] = _div(acc[c], count)


@cpu_kernel
def _contig_cpu(x, out, kind, init, R, count):
    """CPU only, when each output reduces one contiguous block of R elements
    (out[o] from x[o*R:(o+1)*R]): four outputs at a time, each with its own
    ascending sequential chain (the same sequence as the per-element
    functions; the interleaving only hides the add latency)."""
    O = out.shape[0]
    o = 0
    while o + 4 <= O:
        x0 = x[o * R:(o + 1) * R]
        x1 = x[(o + 1) * R:(o + 2) * R]
        x2 = x[(o + 2) * R:(o + 3) * R]
        x3 = x[(o + 3) * R:(o + 4) * R]
        if kind == 2:
            if R == 0:
                a0 = a1 = a2 = a3 = init
            else:
                a0 = x0[0]
                a1 = x1[0]
                a2 = x2[0]
                a3 = x3[0]
            for j in range(R):
                v0 = x0[j]
                v1 = x1[j]
                v2 = x2[j]
                v3 = x3[j]
                a0 = v0 if (v0 > a0 or v0 != v0) else a0
                a1 = v1 if (v1 > a1 or v1 != v1) else a1
                a2 = v2 if (v2 > a2 or v2 != v2) else a2
                a3 = v3 if (v3 > a3 or v3 != v3) else a3
        else:
            a0 = a1 = a2 = a3 = init
            for j in range(R):
                a0 += x0[j]
                a1 += x1[j]
                a2 += x2[j]
                a3 += x3[j]
        if kind == 1:
            out[o] = _div(a0, count)
            out[o + 1] = _div(a1, count)
            out[o + 2] = _div(a2, count)
            out[o + 3] = _div(a3, count)
        else:
            out[o] = a0
            out[o + 1] = a1
            out[o + 2] = a2
            out[o + 3] = a3
        o += 4
    while o < O:
        xr = x[o * R:(o + 1) * R]
        if kind == 2:
            a0 = init
            if R > 0:
                a0 = xr[0]
            for j in range(R):
                v0 = xr[j]
                a0 = v0 if (v0 > a0 or v0 != v0) else a0
        else:
            a0 = init
            for j in range(R):
                a0 += xr[j]
        if kind == 1:
            out[o] = _div(a0, count)
        else:
            out[o] = a0
        o += 1


def _rows_ok(kshape, kstrides, out_size):
    return kshape.shape[0] >= 1 and int(kstrides[-1]) == 1 and int(kshape[-1]) > 1 and out_size > 0


# --- build / check -------------------------------------------------------------

_AXES_INPUT_SINCE = {"ReduceSum": 13, "ReduceMean": 18, "ReduceMax": 18}


def _axes_from_input(ctx) -> bool:
    return ctx.opset >= _AXES_INPUT_SINCE[ctx.node.op_type]


def _check(ctx, target):
    rank = None if ctx.in_shapes[0] is None else len(ctx.in_shapes[0])
    if _axes_from_input(ctx):
        if ctx.has_input(1):
            if not target.host and ctx.const(1) is None:
                return (f"{ctx.node.op_type}: the axes input is not a constant "
                        "(the CUDA kernel needs its reduction layout at build time)")
            c = ctx.const(1)
            if c is not None and rank is not None:
                r = _normalize_axes(np.asarray(c).reshape(-1).tolist(), rank)
                if isinstance(r, str):
                    return r
    else:
        axes = ctx.attrs.get("axes")
        if axes is not None and rank is not None:
            r = _normalize_axes(list(axes), rank)
            if isinstance(r, str):
                return r
    if len(ctx.node.outputs) != 1:
        return f"{ctx.node.op_type}: expected one output"
    return None


def _normalize_axes(axes, rank):
    out = []
    for a in axes:
        a = int(a)
        if a < -rank or a >= rank:
            return f"axis {a} out of range for rank {rank}"
        out.append(a + rank if a < 0 else a)
    if len(set(out)) != len(out):
        return f"repeated axes {axes}"
    return sorted(out)


def _build(ctx, target):
    op = ctx.node.op_type
    in_shape = tuple(ctx.in_shapes[0])
    rank = len(in_shape)
    keep_noop = int(ctx.attrs.get("noop_with_empty_axes", 0)) if ctx.opset >= 13 else 0
    dtype = np.dtype(ctx.in_dtypes[0])
    from_input = _axes_from_input(ctx)

    def axes_of(inputs):
        """Sorted, normalized axes, or None for identity (noop), or [] for all."""
        if from_input:
            if not ctx.has_input(1):
                raw = []
            else:
                c = ctx.const(1)
                if c is None:
                    if inputs is None:
                        return "runtime"
                    c = inputs[1]
                raw = np.asarray(c).reshape(-1).tolist()
        else:
            raw = list(ctx.attrs.get("axes", []) or [])
        if not raw:
            return None if keep_noop else list(range(rank))
        r = _normalize_axes(raw, rank)
        if isinstance(r, str):
            raise KernelError(f"node {ctx.node.name!r} ({op}): {r}")
        return r

    def make_meta(axes):
        kshape, kstrides, rshape, rstrides, inner_n, inner_s, n_outer, n_reduce = _reduce_meta(in_shape, axes)
        dev = to_target(target, kshape, kstrides, rshape, rstrides)
        return dev, inner_n, inner_s, n_outer, n_reduce

    if dtype == np.float32:
        zero = np.float32(0)
        lowest = np.float32(-np.inf)
    elif dtype in (np.dtype(np.int64), np.dtype(np.int32)):
        zero = dtype.type(0)
        lowest = dtype.type(np.iinfo(dtype).min)
    else:
        raise KernelError(f"node {ctx.node.name!r} ({op}): dtype {dtype} not supported")

    static_axes = axes_of(None)
    static_meta = None
    if not (isinstance(static_axes, str)) and static_axes is not None:
        static_meta = make_meta(static_axes)

    def run(inputs, outputs):
        x, out = flat(inputs[0]), flat(outputs[0])
        axes = static_axes
        meta = static_meta
        if isinstance(axes, str):  # CPU only: non-constant axes input
            axes = axes_of(inputs)
            meta = None if axes is None else make_meta(axes)
        if axes is None:  # noop_with_empty_axes: identity
            copy_array(target, x, out)
            return
        (kshape, kstrides, rshape, rstrides), inner_n, inner_s, n_outer, n_reduce = meta
        args = (kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s)
        if target.fast_paths:
            kind = {"ReduceSum": 0, "ReduceMean": 1, "ReduceMax": 2}[op]
            init = lowest if kind == 2 else zero
            count = np.float32(max(n_reduce, 0))
            if _rows_ok(kshape, kstrides, out.shape[0]):
                _rows_cpu(x, out, kind, init, *args, count)
                return
            if (n_outer == 1 and inner_s == 1 and inner_n == n_reduce and inner_n > 0
                    and kshape.shape[0] == 1 and int(kstrides[0]) == inner_n):
                _contig_cpu(x, out, kind, init, inner_n, count)
                return
        if op == "ReduceSum":
            target.launch(_SUM, out.shape[0], x, out, zero, *args)
        elif op == "ReduceMean":
            count = np.float32(n_reduce)
            target.launch(_MEAN, out.shape[0], x, out, zero, *args, count)
        else:
            target.launch(_MAX, out.shape[0], x, out, lowest, *args)

    return run


register("ReduceSum", dtypes=NUMERIC, since=11, check=_check,
         note="ascending flat-index sum per output element; axes input must be constant on CUDA")(_build)
register("ReduceMean", dtypes=("float32",), since=11, check=_check,
         note="ascending flat-index float32 sum, then one division by the count")(_build)
register("ReduceMax", dtypes=NUMERIC, since=11, check=_check,
         note="NaN-propagating max in ascending flat-index order")(_build)
