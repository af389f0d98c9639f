"""Reductions (ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1,
ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp), ArgMax/ArgMin and
CumSum/CumProd, written once for both targets.

Accumulation order (the kernel contract, identical on "cpu" and "cuda"):
each output element visits its reduced input elements in ascending flat
input index order, one element at a time:

* ReduceSum: ``acc = 0`` (of the data type), then ``acc = acc + x`` for each
  element in ascending order.
* ReduceMean: the ReduceSum accumulator (float32), then one float32 division
  by the element count (the count converted to float32 on the host).
* ReduceMax: starts from the first element, then ``if x > acc or x != x:
  acc = x`` (NaN propagates, as numpy's ``maximum.reduce``). An empty
  reduction gives -inf (floats), the type's minimum (integers) or False.
  ReduceMin: the same with ``<`` (empty: +inf, the type's maximum, True).
* ReduceProd ``acc = 1; acc = acc * x``; ReduceL1 ``acc = 0; acc = acc + |x|``;
  ReduceSumSquare ``acc = 0; acc = acc + x*x``; ReduceL2 ``sqrt_f32`` of the
  ReduceSumSquare accumulator; ReduceLogSum ``log_f32`` of the ReduceSum one.
  Integers wrap (two's complement) on both targets.
* ReduceLogSumExp: ``m`` = the ReduceMax result; ``m`` itself when NaN or
  infinite (an empty set gives -inf); else ``s = 0; s = s + exp_f32(x - m)``
  then ``log_f32(s) + m`` (float32, portable). float64 uses libm's exp/log and
  is CPU-only.
* float64: ReduceSum/Max/Min/Prod/L1/SumSquare fold in float64 with the same
  steps on both targets (each step is one IEEE operation, so portable);
  ReduceMean stays float32-only (its division is written in float32).

The CUDA kernel runs one thread per output element. The CPU kernel loops
over output elements calling the same ``@dual`` per-element function, or,
when the innermost input dim is kept, updates a row of accumulators along
that dim reduced element by reduced element (ascending): each output
element still sees the same sequence of operations, so the bits agree
(ReduceSum/Mean/Max; on floats ReduceSumSquare/L1/Prod/Min too, and both
paths also take a contiguous block per output). Whatever the kept dims are,
each output element gets the same bits: a Scan body run over stacked steps
(one more kept axis in front, see ``host/scan_vectorise.py``) gives every
element the bits of its step.

Axes: as an attribute (ReduceSum before opset 13, the others before opset
18) or as the second input (after). The CUDA target needs the axes input to
be a constant; the CPU target reads a non-constant axes input at run time.
``noop_with_empty_axes=1`` with no axes is an identity copy (declined for the
reductions that transform elements first: L1, L2, SumSquare, LogSum,
LogSumExp, where the spec's identity and the runtimes disagree).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..ir.errors import KernelError
from .common import prod as _prod  # noqa: F401
from .common import bcast_offset, copy_array, cpu_kernel, dual, flat, kernel_pair, replayable, to_target
from .opdef import NUMERIC, OpList
from .pmath import exp_f32, log_f32, sqrt_f32

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


@njit(cache=True, error_model="numpy", inline="always")
def _step(kind, acc, v):
    """One reduced element into an accumulator, as the per-element functions above do it:
    kind 0/1 sum (and mean), 2 max (NaN propagates), 3 sum of squares, 4 sum of |v|,
    5 product, 6 min (NaN propagates)."""
    if kind == 2:
        return v if (v > acc or v != v) else acc
    if kind == 6:
        return v if (v < acc or v != v) else acc
    if kind == 3:
        return acc + v * v
    if kind == 4:
        return acc + abs(v)
    if kind == 5:
        return acc * v
    return acc + v


@cpu_kernel
def _rows_cpu(x, out, kind, init, kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s, count):
    """CPU only, when the innermost input dim is kept (stride 1): a row of
    accumulators over that dim, updated reduced element by reduced element in
    ascending order: each output element sees exactly the sequence of the
    per-element functions above (kind: see _step; 2 and 6 start from the first
    reduced element, as _max_item / _min_item do)."""
    nk = kshape.shape[0]
    KL = kshape[nk - 1]
    kso = kshape[:nk - 1]
    kto = kstrides[:nk - 1]
    nko = out.shape[0] // KL
    for ko in range(nko):
        base = bcast_offset(ko, kso, kto)
        acc = out[ko * KL:(ko + 1) * KL]
        if kind == 2 or kind == 6:
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
                for c in range(KL):
                    acc[c] = _step(kind, acc[c], seg[c])
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
    first = kind == 2 or kind == 6   # max / min: start from the first element
    o = 0
    while o + 4 <= O:
        x0 = x[o * R:(o + 1) * R]
        x1 = x[(o + 1) * R:(o + 2) * R]
        x2 = x[(o + 2) * R:(o + 3) * R]
        x3 = x[(o + 3) * R:(o + 4) * R]
        if first and R > 0:
            a0 = x0[0]
            a1 = x1[0]
            a2 = x2[0]
            a3 = x3[0]
        else:
            a0 = a1 = a2 = a3 = init
        for j in range(R):
            a0 = _step(kind, a0, x0[j])
            a1 = _step(kind, a1, x1[j])
            a2 = _step(kind, a2, x2[j])
            a3 = _step(kind, a3, x3[j])
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
        a0 = init
        if first and R > 0:
            a0 = xr[0]
        for j in range(R):
            a0 = _step(kind, a0, xr[j])
        if kind == 1:
            out[o] = _div(a0, count)
        else:
            out[o] = a0
        o += 1


def _rows_ok(kshape, kstrides, out_size):
    return kshape.shape[0] >= 1 and int(kstrides[-1]) == 1 and int(kshape[-1]) > 1 and out_size > 0


# --- ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum(Exp) ------------


@dual
def _min_item(o, x, highest, kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s):
    base = bcast_offset(o, kshape, kstrides)
    if inner_n == 0 or n_outer == 0:
        return highest
    acc = x[base + bcast_offset(0, rshape, rstrides)]
    for ro in range(n_outer):
        off = base + bcast_offset(ro, rshape, rstrides)
        for j in range(inner_n):
            v = x[off + j * inner_s]
            if v < acc or v != v:
                acc = v
    return acc


@dual
def _fold_item(o, x, kind, init, kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s):
    """kind 0: acc = acc * v (ReduceProd); 1: acc = acc + |v| (ReduceL1);
    2: acc = acc + v * v (ReduceSumSquare, ReduceL2 before its square root)."""
    base = bcast_offset(o, kshape, kstrides)
    acc = init
    for ro in range(n_outer):
        off = base + bcast_offset(ro, rshape, rstrides)
        for j in range(inner_n):
            v = x[off + j * inner_s]
            if kind == 0:
                acc = acc * v
            elif kind == 1:
                acc = acc + abs(v)
            else:
                acc = acc + v * v
    return acc


@dual
def _lse_item(o, x, kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s):
    """float32 log-sum-exp: m = the NaN-propagating max (as ReduceMax); m itself when it is
    NaN or infinite (or the set is empty: -inf); else log_f32(s) + m with
    s = 0, s = s + exp_f32(v - m) in ascending order."""
    m = _max_item(o, x, np.float32(-np.inf), kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s)
    if m != m or m == np.float32(np.inf) or m == np.float32(-np.inf):
        return m
    base = bcast_offset(o, kshape, kstrides)
    s = np.float32(0)
    for ro in range(n_outer):
        off = base + bcast_offset(ro, rshape, rstrides)
        for j in range(inner_n):
            s += np.float32(exp_f32(x[off + j * inner_s] - m))
    return np.float32(log_f32(s)) + m


@dual
def _lse64_item(o, x, kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s):
    """float64 log-sum-exp, the same steps with math.exp / math.log (CPU only: libm's
    float64 exp/log are not the same functions on every target)."""
    m = _max_item(o, x, -np.inf, kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s)
    if m != m or m == np.inf or m == -np.inf:
        return m
    base = bcast_offset(o, kshape, kstrides)
    s = 0.0
    for ro in range(n_outer):
        off = base + bcast_offset(ro, rshape, rstrides)
        for j in range(inner_n):
            s += math.exp(x[off + j * inner_s] - m)
    return math.log(s) + m


_RARGS = "kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s"

_MIN = kernel_pair(
    "min", f"x, out, highest, {_RARGS}",
    f"out[o] = _min_item(o, x, highest, {_RARGS})", count="out.shape[0]", index="o", module=__name__)

_FOLD = kernel_pair(
    "fold", f"x, out, kind, init, {_RARGS}",
    f"out[o] = _fold_item(o, x, kind, init, {_RARGS})", count="out.shape[0]", index="o", module=__name__)

_L2 = kernel_pair(
    "l2", f"x, out, zero, {_RARGS}",
    f"out[o] = sqrt_f32(_fold_item(o, x, 2, zero, {_RARGS}))", count="out.shape[0]", index="o",
    module=__name__)

_LOGSUM = kernel_pair(
    "logsum", f"x, out, zero, {_RARGS}",
    f"out[o] = log_f32(_sum_item(o, x, zero, {_RARGS}))", count="out.shape[0]", index="o", module=__name__)

_LSE = kernel_pair(
    "lse", f"x, out, {_RARGS}",
    f"out[o] = _lse_item(o, x, {_RARGS})", count="out.shape[0]", index="o", module=__name__)

_LSE64 = kernel_pair(
    "lse64", f"x, out, {_RARGS}",
    f"out[o] = _lse64_item(o, x, {_RARGS})", count="out.shape[0]", index="o", module=__name__)


# --- build / check -------------------------------------------------------------

_AXES_INPUT_SINCE = {"ReduceSum": 13}   # every other reduction: 18

#: reductions whose identity (noop_with_empty_axes=1, no axes) would skip an element transform;
#: the spec says "equivalent to the input", runtimes disagree: declined
_TRANSFORMING = ("ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")


def _axes_from_input(ctx) -> bool:
    return ctx.opset >= _AXES_INPUT_SINCE.get(ctx.node.op_type, 18)


def _noop(ctx) -> bool:
    return bool(int(ctx.attrs.get("noop_with_empty_axes", 0))) if ctx.opset >= 13 else False


def _check(ctx, target):
    op = ctx.node.op_type
    rank = None if ctx.in_shapes[0] is None else len(ctx.in_shapes[0])
    empty_axes = None   # True / False when known at build time
    if _axes_from_input(ctx):
        if ctx.has_input(1):
            c = ctx.const(1)
            if not target.host and c is None:
                return (f"{op}: the axes input is not a constant "
                        "(the CUDA kernel needs its reduction layout at build time)")
            if c is not None:
                empty_axes = np.asarray(c).size == 0
                if rank is not None:
                    r = _normalize_axes(np.asarray(c).reshape(-1).tolist(), rank)
                    if isinstance(r, str):
                        return r
        else:
            empty_axes = True
    else:
        axes = ctx.attrs.get("axes")
        empty_axes = not axes
        if axes is not None and rank is not None:
            r = _normalize_axes(list(axes), rank)
            if isinstance(r, str):
                return r
    if op in _TRANSFORMING and _noop(ctx) and empty_axes is not False:
        return (f"{op}: noop_with_empty_axes=1 with empty axes is declined (the spec's identity "
                "skips the element transform; runtimes disagree)")
    if len(ctx.node.outputs) != 1:
        return f"{op}: expected one output"
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


def _limits(dtype):
    """(lowest, highest) of ``dtype``: ±inf for floats, the type's range for integers, bools."""
    if dtype == np.bool_:
        return np.bool_(False), np.bool_(True)
    if dtype.kind == "f":
        return dtype.type(-np.inf), dtype.type(np.inf)
    info = np.iinfo(dtype)
    return dtype.type(info.min), dtype.type(info.max)


_FAST_KIND = {"ReduceSum": 0, "ReduceMean": 1, "ReduceMax": 2}
#: float-only kinds of the row and contiguous paths (see _step): integer products and squares
#: are left to the generated kernel's own typing
_FAST_KIND_FLOAT = {"ReduceSumSquare": 3, "ReduceL1": 4, "ReduceProd": 5, "ReduceMin": 6}


def _build(ctx, target):
    op = ctx.node.op_type
    in_shape = tuple(ctx.in_shapes[0])
    rank = len(in_shape)
    keep_noop = _noop(ctx)
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
            if keep_noop and op in _TRANSFORMING:
                raise KernelError(f"node {ctx.node.name!r} ({op}): noop_with_empty_axes=1 with empty "
                                  "axes is not supported for this reduction")
            return None if keep_noop else list(range(rank))
        r = _normalize_axes(raw, rank)
        if isinstance(r, str):
            raise KernelError(f"node {ctx.node.name!r} ({op}): {r}")
        return r

    def make_meta(axes):
        kshape, kstrides, rshape, rstrides, inner_n, inner_s, n_outer, n_reduce = _reduce_meta(in_shape, axes)
        dev = to_target(target, kshape, kstrides, rshape, rstrides)
        return dev, inner_n, inner_s, n_outer, n_reduce

    if dtype.kind not in "fiub":
        raise KernelError(f"node {ctx.node.name!r} ({op}): dtype {dtype} not supported")
    zero, one = dtype.type(0), dtype.type(1)
    lowest, highest = _limits(dtype)

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
        fast_kind = _FAST_KIND.get(op) if dtype != np.bool_ else None
        if fast_kind is None and dtype.kind == "f":
            fast_kind = _FAST_KIND_FLOAT.get(op)
        if target.fast_paths and fast_kind is not None:
            kind = fast_kind
            init = lowest if kind == 2 else (highest if kind == 6 else (one if kind == 5 else zero))
            count = np.float32(max(n_reduce, 0))
            if _rows_ok(kshape, kstrides, out.shape[0]):
                target.call(_rows_cpu, x, out, kind, init, *args, count)
                return
            if (n_outer == 1 and inner_s == 1 and inner_n == n_reduce and inner_n > 0
                    and kshape.shape[0] == 1 and int(kstrides[0]) == inner_n):
                target.call(_contig_cpu, x, out, kind, init, inner_n, count)
                return
        n = out.shape[0]
        if op == "ReduceSum":
            target.launch(_SUM, n, x, out, zero, *args)
        elif op == "ReduceMean":
            target.launch(_MEAN, n, x, out, zero, *args, np.float32(n_reduce))
        elif op == "ReduceMax":
            target.launch(_MAX, n, x, out, lowest, *args)
        elif op == "ReduceMin":
            target.launch(_MIN, n, x, out, highest, *args)
        elif op == "ReduceProd":
            target.launch(_FOLD, n, x, out, 0, one, *args)
        elif op == "ReduceL1":
            target.launch(_FOLD, n, x, out, 1, zero, *args)
        elif op == "ReduceSumSquare":
            target.launch(_FOLD, n, x, out, 2, zero, *args)
        elif op == "ReduceL2":
            target.launch(_L2, n, x, out, zero, *args)
        elif op == "ReduceLogSum":
            target.launch(_LOGSUM, n, x, out, zero, *args)
        elif dtype == np.float64:
            target.launch(_LSE64, n, x, out, *args)
        else:
            target.launch(_LSE, n, x, out, *args)

    return run if isinstance(static_axes, str) else replayable(run)   # else the axes are read per run


_ORDER = "ascending flat-index order per output element"
NUMERIC64 = NUMERIC + ("float64",)   # float64 + * and comparisons are single IEEE operations: portable
register("ReduceSum", dtypes=NUMERIC64, since=1, check=_check,
         note=f"acc = acc + x in {_ORDER}; axes input must be constant on CUDA")(_build)
register("ReduceMean", dtypes=("float32",), since=1, check=_check,
         note=f"float32 acc = acc + x in {_ORDER}, then one division by the count")(_build)
register("ReduceMax", dtypes=NUMERIC64 + ("bool",), since=1, check=_check,
         note=f"NaN-propagating max in {_ORDER} (empty: -inf / type minimum / False)")(_build)
register("ReduceMin", dtypes=NUMERIC64 + ("bool",), since=1, check=_check,
         note=f"NaN-propagating min in {_ORDER} (empty: +inf / type maximum / True)")(_build)
register("ReduceProd", dtypes=NUMERIC64, since=1, check=_check,
         note=f"acc = 1, acc = acc * x in {_ORDER} (integers wrap)")(_build)
register("ReduceL1", dtypes=NUMERIC64, since=1, check=_check,
         note=f"acc = 0, acc = acc + |x| in {_ORDER}")(_build)
register("ReduceSumSquare", dtypes=NUMERIC64, since=1, check=_check,
         note=f"acc = 0, acc = acc + x*x in {_ORDER}")(_build)
register("ReduceL2", dtypes=("float32",), since=1, check=_check,
         note=f"sqrt_f32 of acc = acc + x*x in {_ORDER}")(_build)
# version 28 only drops the integer types: the float definitions hold through it
register("ReduceLogSum", dtypes=("float32",), since=1, until=28, check=_check,
         note=f"log_f32 of acc = acc + x in {_ORDER} (empty: -inf)")(_build)
register("ReduceLogSumExp", dtypes=("float32",), since=1, until=28, check=_check,
         note=f"m = max; log_f32(sum of exp_f32(x - m) in {_ORDER}) + m; m when NaN/inf/empty")(_build)
register("ReduceLogSumExp", dtypes=("float64",), since=1, until=28, check=_check, targets=("cpu",),
         note=f"float64: m = max; log(sum of exp(x - m) in {_ORDER}) + m (libm: CPU only)")(_build)


# =============================================================================
# ArgMax / ArgMin
# Per output element (one row along the axis), a = 0 .. A-1 ascending:
# best = x[0]; then a NaN wins over any number (the first NaN, or the last
# with select_last_index, as numpy/onnxruntime); otherwise v replaces best
# when v > best (ArgMin: v < best), or also when v == best with
# select_last_index. Output int64. Both targets: one row per item.
# =============================================================================


@dual
def _arg_item(r, x, A, inner, is_min, last):
    o = r // inner
    j = r - o * inner
    b = o * A * inner + j
    best = x[b]
    bi = 0
    for a in range(1, A):
        v = x[b + a * inner]
        if best != best:
            if last and v != v:
                bi = a
        elif v != v:
            best = v
            bi = a
        else:
            better = (v < best) if is_min else (v > best)
            if better or (last and v == best):
                best = v
                bi = a
    return bi


_ARG = kernel_pair(
    "arg", "x, out, A, inner, is_min, last",
    "out[r] = _arg_item(r, x, A, inner, is_min, last)", count="out.shape[0]", index="r", module=__name__)


def _check_arg(ctx, target):
    xs = ctx.in_shapes[0]
    if xs is None or len(xs) == 0:
        return f"{ctx.node.op_type}: input must have rank >= 1"
    rank = len(xs)
    ax = int(ctx.attrs.get("axis", 0))
    if ax < -rank or ax >= rank:
        return f"{ctx.node.op_type}: axis {ax} out of range for rank {rank}"
    if int(xs[ax]) == 0:
        return f"{ctx.node.op_type}: the reduced axis {ax} is empty (no index to return)"
    return None


def _build_arg(ctx, target):
    xs = tuple(ctx.in_shapes[0])
    rank = len(xs)
    ax = int(ctx.attrs.get("axis", 0))
    ax = ax + rank if ax < 0 else ax
    A = int(xs[ax])
    inner = _prod(xs[ax + 1:])
    is_min = ctx.node.op_type == "ArgMin"
    last = bool(int(ctx.attrs.get("select_last_index", 0)))

    @replayable
    def run(inputs, outputs):
        x, out = flat(inputs[0]), flat(outputs[0])
        target.launch(_ARG, out.shape[0], x, out, A, max(inner, 1), is_min, last)

    return run


register(("ArgMax", "ArgMin"), dtypes=NUMERIC, since=1, check=_check_arg,
         note="ascending along the axis; first (select_last_index: last) extreme; NaN wins as numpy")(_build_arg)


# =============================================================================
# CumSum / CumProd
# Per row along the axis (a = 0 .. .. 0 with reverse=1):
# acc = 0 (CumProd: 1); inclusive: acc = acc + v (CumProd: acc * v), then
# out = acc; exclusive: out = acc first. One row per item on both targets;
# float64 adds/multiplies are single IEEE operations on both, so float64 is
# portable too. Integers wrap.
# =============================================================================


@dual
def _cum_row(r, x, out, A, inner, exclusive, reverse, is_prod, init):
    o = r // inner
    j = r - o * inner
    b = o * A * inner + j
    acc = init
    for t in range(A):
        a = t
        if reverse:
            a = A - 1 - t
        k = b + a * inner
        v = x[k]
        if exclusive:
            out[k] = acc
        if is_prod:
            acc = acc * v
        else:
            acc = acc + v
        if not exclusive:
            out[k] = acc


_CUM = kernel_pair(
    "cum", "x, out, rows, A, inner, exclusive, reverse, is_prod, init",
    "_cum_row(r, x, out, A, inner, exclusive, reverse, is_prod, init)", count="rows", index="r",
    module=__name__)


def _cum_axis(ctx, value, rank):
    a = np.asarray(value).reshape(-1)
    if a.size != 1 or a.dtype.kind not in "iu":
        return f"{ctx.node.op_type}: axis must be an integer scalar (got {a.size} values of {a.dtype})"
    ax = int(a[0])
    if ax < -rank or ax >= rank:
        return f"{ctx.node.op_type}: axis {ax} out of range for rank {rank}"
    return ax + rank if ax < 0 else ax


def _check_cum(ctx, target):
    xs = ctx.in_shapes[0]
    if xs is None or len(xs) == 0:
        return f"{ctx.node.op_type}: input must have rank >= 1"
    c = ctx.const(1)
    if c is None:
        if not target.host:
            return f"{ctx.node.op_type}: the axis input is not a constant (the CUDA kernel needs it at build time)"
        return None
    r = _cum_axis(ctx, c, len(xs))
    return r if isinstance(r, str) else None


def _build_cum(ctx, target):
    xs = tuple(ctx.in_shapes[0])
    rank = len(xs)
    dtype = np.dtype(ctx.in_dtypes[0])
    is_prod = ctx.node.op_type == "CumProd"
    init = dtype.type(1 if is_prod else 0)
    exclusive = bool(int(ctx.attrs.get("exclusive", 0)))
    reverse = bool(int(ctx.attrs.get("reverse", 0)))

    def layout(ax):
        if isinstance(ax, str):
            raise KernelError(f"node {ctx.node.name!r}: {ax}")
        A = int(xs[ax])
        inner = _prod(xs[ax + 1:])   # 0 when a later dim is 0: no rows then (an empty tensor)
        return A, inner, _prod(xs[:ax]) * inner if A > 0 else 0

    c = ctx.const(1)
    static = layout(_cum_axis(ctx, c, rank)) if c is not None else None

    def run(inputs, outputs):
        x, out = flat(inputs[0]), flat(outputs[0])
        A, inner, rows = static if static is not None else layout(_cum_axis(ctx, inputs[1], rank))
        target.launch(_CUM, rows, x, out, rows, A, inner, exclusive, reverse, is_prod, init)

    return replayable(run) if static is not None else run   # else the axis is read per run


_CUM_DT = ("float32", "float64", "int64", "int32")
register("CumSum", dtypes=_CUM_DT, since=11, until=14, check=_check_cum,
         note="running sum in axis order (reverse: descending); exclusive shifts by one")(_build_cum)
register("CumProd", dtypes=_CUM_DT, since=26, until=26, check=_check_cum,
         note="running product in axis order (reverse: descending); exclusive shifts by one")(_build_cum)
