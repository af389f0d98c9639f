"""Selection ops: TopK, Hardmax, OneHot, ReverseSequence, and Scatter (the opset 9-10
alias of ScatterElements). Both targets.

* **TopK** (1: ``k`` attribute; 10: ``k`` input, which must be a constant here; 11+:
  ``largest``/``sorted``): one item per row along ``axis``. Output ``j`` of a row is the
  element that comes ``j``-th in the order "greater value first, on ties the lower index"
  (``largest=0``: smaller first), found by a selection pass that never needs scratch
  memory: the ``j``-th is the best element strictly after the ``(j-1)``-th in that order,
  so each row costs ``k * n`` comparisons and both targets make the same comparisons.
  NaN ranks above every number (as numpy's sort puts it last); NaNs tie with each other.
  ``sorted=0`` leaves the order to the implementation: the output is sorted anyway.
* **Hardmax**: 1 where a row's first maximum is (NaN counts as the maximum, as
  ``np.argmax``), 0 elsewhere. Hardmax-1/11 coerce the input to 2-D at ``axis`` (default
  1: a row is everything from ``axis`` on), Hardmax-13 takes one axis (default -1).
* **OneHot**: ``depth`` comes from the output shape (shape inference needs it constant),
  ``values`` = [off, on] is read by the kernel; indices in [-depth, depth) count from the
  end when negative, others give an all-off row (the spec's rule, not an error). Float
  indices are truncated toward zero. Output elements are copied as bits (any dtype).
* **ReverseSequence**: for batch ``b``, the first ``sequence_lens[b]`` steps along
  ``time_axis`` are reversed, the rest copied. A length outside [0, T] is a typed error
  naming the node (flagged in the kernel, as the gathers do; the kernel reads nothing
  out of bounds).
"""

from __future__ import annotations

import numpy as np

from ..ir.errors import ExecutionError, KernelError
from .common import bits, dual, flat, kernel_pair, node_error, prod, replayable
from .data import index_flag
from .movement import _build_scatter_elements, _check_scatter
from .opdef import OpList, schema_version

OPS = OpList()

F = np.float32
SORTABLE = ("float32", "float64", "int64", "int32", "int8", "int16", "uint8", "uint16", "uint32", "uint64")
#: element types OneHot / ReverseSequence move as bits
MOVE = ("float32", "int64", "int32", "bool", "float64", "float16", "bfloat16", "int8", "uint8", "int16",
        "uint16", "uint32", "uint64")
INDEXLIKE = ("int64", "int32", "float32", "float64", "int8", "int16", "uint8", "uint16", "uint32")


def _axis(ctx, axis, rank, what="axis"):
    a = int(axis)
    if not -rank <= a < max(rank, 1):
        raise node_error(ctx, f"{what}={axis} is out of range for rank {rank}")
    return a + rank if a < 0 else a


def _known(ctx, idx=(0,)):
    for i in idx:
        if i >= len(ctx.in_shapes) or ctx.in_shapes[i] is None:
            return f"{ctx.node.op_type}: the shape of input {i} is unknown"
    if not ctx.out_shapes or ctx.out_shapes[0] is None:
        return f"{ctx.node.op_type}: the output shape is unknown"
    return None


# =============================================================================
# TopK
# =============================================================================
@dual
def _after(va, ia, vb, ib, largest):
    """Does (va, ia) come after (vb, ib) in TopK's order? (NaN ranks highest; ties: lower
    index first.)"""
    an = va != va
    bn = vb != vb
    if an and bn:
        return ia > ib
    if largest:
        if an:
            return False
        if bn:
            return True
        if va == vb:
            return ia > ib
        return va < vb
    if bn:
        return False
    if an:
        return True
    if va == vb:
        return ia > ib
    return va > vb


_TOPK = kernel_pair(
    "topk", "x, vals, idxs, n, k, inner, largest, rows",
    """
    o = r // inner
    q = r - o * inner
    base = o * n * inner + q
    obase = o * k * inner + q
    pv = x[base]
    pi = -1
    for j in range(k):
        best = -1
        bv = x[base]
        for t in range(n):
            v = x[base + t * inner]
            if pi >= 0 and not _after(v, t, pv, pi, largest):
                continue
            if best < 0 or _after(bv, best, v, t, largest):
                best = t
                bv = v
        vals[obase + j * inner] = bv
        idxs[obase + j * inner] = best
        pv = bv
        pi = best
    """, count="rows", index="r", module=__name__)


def _topk_k(ctx):
    """k: the attribute (TopK-1) or the constant input 1; None when not a constant."""
    if ctx.node.op_type == "TopK" and schema_since(ctx) < 10:
        return int(ctx.attrs.get("k", -1))
    c = ctx.const(1)
    if c is None:
        return None
    c = np.asarray(c).reshape(-1)
    if c.size != 1:
        raise node_error(ctx, f"k must hold one value, got shape {np.shape(c)}")
    return int(c[0])


def schema_since(ctx) -> int:
    """The schema version of the node's op at the model's opset (onnx's history)."""
    dom = "" if ctx.node.domain in ("", "ai.onnx") else ctx.node.domain
    return schema_version(dom, ctx.node.op_type, ctx.opset) or ctx.opset


def _check_topk(ctx, target):
    why = _known(ctx)
    if why:
        return why
    rank = len(ctx.in_shapes[0])
    if rank == 0:
        return "TopK: the input must have rank >= 1"
    try:
        k = _topk_k(ctx)
        axis = _axis(ctx, ctx.attrs.get("axis", -1), rank)
    except KernelError as e:
        return str(e)
    if k is None:
        return "TopK: k is not a constant (run-time k is not supported)"
    n = ctx.in_shapes[0][axis]
    if not 0 <= k <= n:
        return f"TopK: k={k} is outside [0, {n}] (the axis length)"
    return None


def _build_topk(ctx, target):
    shape = tuple(ctx.in_shapes[0])
    axis = _axis(ctx, ctx.attrs.get("axis", -1), len(shape))
    k = _topk_k(ctx)
    n = int(shape[axis])
    if k is None or not 0 <= k <= n:
        raise node_error(ctx, f"k={k} must be a constant in [0, {n}]")
    inner = prod(shape[axis + 1:])
    rows = prod(shape[:axis]) * inner
    largest = bool(int(ctx.attrs.get("largest", 1)))

    @replayable
    def run(inputs, outputs):
        if k == 0 or rows == 0:
            return
        target.launch(_TOPK, rows, flat(inputs[0]), flat(outputs[0]), flat(outputs[1]), n, k, inner,
                      largest, rows)

    return run


# TopK-24 only adds bfloat16 (not claimed: dtypes)
_TOPK_NOTE = "selection in a fixed order: larger (largest=0: smaller) first, ties by lower index; " \
             "NaN ranks highest; k must be a constant"
OPS.add("TopK", _build_topk, since=1, until=9, dtypes=("float32",), check=_check_topk, note=_TOPK_NOTE,
        kernels=(_TOPK,))
OPS.add("TopK", _build_topk, since=10, until=10, dtypes=("float32",), check=_check_topk, note=_TOPK_NOTE,
        kernels=(_TOPK,))
OPS.add("TopK", _build_topk, since=11, until=24, dtypes=SORTABLE, check=_check_topk, note=_TOPK_NOTE,
        kernels=(_TOPK,))


# =============================================================================
# Hardmax
# =============================================================================
_HARDMAX = kernel_pair(
    "hardmax", "x, out, n, inner, rows",
    """
    o = r // inner
    q = r - o * inner
    base = o * n * inner + q
    best = 0
    bv = x[base]
    for t in range(1, n):
        v = x[base + t * inner]
        if bv == bv and (v > bv or v != v):
            best = t
            bv = v
    for t in range(n):
        out[base + t * inner] = 1 if t == best else 0
    """, count="rows", index="r", module=__name__)


def _hardmax_layout(ctx):
    """(outer, n, inner) of the rows Hardmax normalises."""
    shape = tuple(ctx.in_shapes[0])
    rank = len(shape)
    if schema_since(ctx) < 13:       # coerce to 2-D at axis (default 1)
        axis = _axis(ctx, ctx.attrs.get("axis", 1), rank) if rank else 0
        return prod(shape[:axis]), prod(shape[axis:]), 1
    axis = _axis(ctx, ctx.attrs.get("axis", -1), rank)
    return prod(shape[:axis]), int(shape[axis]), prod(shape[axis + 1:])


def _check_hardmax(ctx, target):
    why = _known(ctx)
    if why:
        return why
    if len(ctx.in_shapes[0]) == 0:
        return "Hardmax: the input must have rank >= 1"
    try:
        _hardmax_layout(ctx)
    except KernelError as e:
        return str(e)
    return None


def _build_hardmax(ctx, target):
    outer, n, inner = _hardmax_layout(ctx)
    rows = outer * inner

    @replayable
    def run(inputs, outputs):
        if n == 0 or rows == 0:
            return
        target.launch(_HARDMAX, rows, flat(inputs[0]), flat(outputs[0]), n, inner, rows)

    return run


OPS.add("Hardmax", _build_hardmax, since=1, until=12, dtypes=("float32", "float64"), check=_check_hardmax,
        kernels=(_HARDMAX,), note="1 at the first maximum (NaN counts as the maximum); 2-D coercion at axis")
OPS.add("Hardmax", _build_hardmax, since=13, until=28, dtypes=("float32", "float64"), check=_check_hardmax,
        kernels=(_HARDMAX,), note="1 at the first maximum along axis (NaN counts as the maximum)")


# =============================================================================
# OneHot
# =============================================================================
_ONEHOT = kernel_pair(
    "onehot", "idx, vals, out, depth, inner",
    """
    q = i % inner
    t = i // inner
    d = t % depth
    o = t // depth
    v = np.int64(idx[o * inner + q])
    if v < 0:
        v += depth
    out[i] = vals[1] if v == d else vals[0]
    """, module=__name__)


def _onehot_axis(ctx):
    rank = len(ctx.in_shapes[0]) + 1
    return _axis(ctx, ctx.attrs.get("axis", -1), rank)


def _check_onehot(ctx, target):
    why = _known(ctx, (0, 1, 2))
    if why:
        return why
    if ctx.in_dtypes[0] is None or np.dtype(ctx.in_dtypes[0]).name not in INDEXLIKE:
        return f"OneHot: indices of type {ctx.in_dtypes[0]} not supported"
    if prod(ctx.in_shapes[2]) != 2:
        return f"OneHot: values must hold [off, on], got shape {tuple(ctx.in_shapes[2])}"
    if ctx.in_dtypes[2] is None or np.dtype(ctx.in_dtypes[2]).name not in MOVE:
        return f"OneHot: values of type {ctx.in_dtypes[2]} not supported"
    try:
        axis = _onehot_axis(ctx)
    except KernelError as e:
        return str(e)
    if len(ctx.out_shapes[0]) != len(ctx.in_shapes[0]) + 1 or ctx.out_shapes[0][axis] is None:
        return "OneHot: depth is not known at planning time (not a constant)"
    return None


def _build_onehot(ctx, target):
    axis = _onehot_axis(ctx)
    oshape = tuple(ctx.out_shapes[0])
    depth = int(oshape[axis])
    inner = prod(oshape[axis + 1:])
    n = prod(oshape)

    def run(inputs, outputs):
        if n == 0:
            return
        if depth <= 0:
            raise ExecutionError(f"node {ctx.node.name!r} (OneHot): depth must be positive, got {depth}")
        target.launch(_ONEHOT, n, flat(inputs[0]), bits(inputs[2]), bits(outputs[0]), depth, max(inner, 1))

    return run


OPS.add("OneHot", _build_onehot, since=9, until=28, dtypes=INDEXLIKE, check=_check_onehot, kernels=(_ONEHOT,),
        note="depth from the output shape (a constant); indices outside [-depth, depth) give an all-off row")


# =============================================================================
# ReverseSequence
# =============================================================================
_REVSEQ = kernel_pair(
    "reverse_sequence", "x, lens, out, T, B, st, sb, bad",
    """
    t = (i // st) % T
    b = (i // sb) % B
    n = lens[b]
    if n < 0 or n > T:
        bad[0] = 1
        n = 0
    if t < n:
        out[i] = x[i + (n - 1 - 2 * t) * st]
    else:
        out[i] = x[i]
    """, module=__name__)


def _check_revseq(ctx, target):
    why = _known(ctx, (0, 1))
    if why:
        return why
    shape = tuple(ctx.in_shapes[0])
    if len(shape) < 2:
        return "ReverseSequence: the input must have rank >= 2"
    ba, ta = int(ctx.attrs.get("batch_axis", 1)), int(ctx.attrs.get("time_axis", 0))
    if {ba, ta} not in ({0, 1},):
        return f"ReverseSequence: batch_axis={ba} and time_axis={ta} must be 0 and 1 (either order)"
    if ctx.in_dtypes[1] is None or np.dtype(ctx.in_dtypes[1]).name not in ("int64", "int32"):
        return "ReverseSequence: sequence_lens must be int64 or int32"
    if tuple(ctx.in_shapes[1]) != (shape[ba],):
        return f"ReverseSequence: sequence_lens shape {tuple(ctx.in_shapes[1])} must be ({shape[ba]},)"
    return None


def _build_revseq(ctx, target):
    shape = tuple(ctx.in_shapes[0])
    ba, ta = int(ctx.attrs.get("batch_axis", 1)), int(ctx.attrs.get("time_axis", 0))
    T, B = int(shape[ta]), int(shape[ba])
    st, sb = prod(shape[ta + 1:]), prod(shape[ba + 1:])
    n = prod(shape)

    def run(inputs, outputs):
        if n == 0:
            return
        lens = flat(inputs[1])
        bad = index_flag(target)
        target.launch(_REVSEQ, n, bits(inputs[0]), lens, bits(outputs[0]), T, B, st, sb, bad)
        if int(target.to_host(bad)[0]):
            host = np.asarray(target.to_host(lens))
            wrong = [int(v) for v in host if not 0 <= int(v) <= T]
            raise ExecutionError(f"node {ctx.node.name!r} (ReverseSequence): sequence_lens {wrong[:4]} "
                                 f"outside [0, {T}] (the time axis length); fix the lengths")

    return run


OPS.add("ReverseSequence", _build_revseq, since=10, until=28, dtypes=MOVE, check=_check_revseq,
        kernels=(_REVSEQ,), note="lengths outside [0, T] raise (checked in the kernel)")


# =============================================================================
# Scatter: ScatterElements without reduction, under its opset 9-10 name
# =============================================================================
OPS.add("Scatter", _build_scatter_elements, since=9, until=11,
        dtypes=("float32", "int64", "int32"), check=_check_scatter,
        note="ScatterElements' kernel (Scatter-9 is ScatterElements-11 without reduction)")
