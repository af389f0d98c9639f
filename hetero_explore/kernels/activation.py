"""Softmax / LogSoftmax (every opset), Dropout (inference) and Clip-6 (float32), written
once for every target. The orders are documented per op below; the CPU fast path of the
row kernel (:mod:`.cpu_fast.rows`) keeps them.
"""

from __future__ import annotations

import numpy as np

from .common import prod as _prod  # noqa: F401
from .common import copy_array, dual, flat, kernel_pair, replayable
from .elementwise import _CLIP
from .nn import F32, _div
from .opdef import OpList
from .pmath import exp_f32, log_f32

OPS = OpList()
register = OPS.register


# =============================================================================
# Softmax / LogSoftmax (opset >= 13: one axis)
# Per row (all elements along the axis): m = max (first element, then
# if v > m: m = v, ascending); s = 0.0f, s = s + exp_f32(v - m) ascending;
# Softmax: y = exp_f32(v - m) / s; LogSoftmax: y = (v - m) - log_f32(s).
# CUDA: one row per thread (_softmax_row). CPU (_softmax_cpu): the same
# sequence per element, in passes over contiguous slices (max, exps, sum,
# divide for a last-axis softmax, four rows at a time with their max and sum
# chains interleaved, the exps by pmath.exp_nonpos_f32 = exp_f32's bits for
# v - m <= 0; the axis outside and the inner index inside, with a max and a sum
# per inner index, otherwise).
# =============================================================================


@dual
def _softmax_row(r, x, out, A, inner, is_log):
    o = r // inner
    j = r - o * inner
    b = o * A * inner + j
    if A <= 0:
        return
    m = x[b]
    for a in range(1, A):
        v = x[b + a * inner]
        if v > m:
            m = v
    s = np.float32(0)
    if is_log:
        for a in range(A):
            s += np.float32(exp_f32(x[b + a * inner] - m))
        ls = np.float32(log_f32(s))
        for a in range(A):
            k = b + a * inner
            out[k] = (x[k] - m) - ls
    else:
        # keep exp(x - m) in the output, then divide it in place (same bits as recomputing)
        for a in range(A):
            k = b + a * inner
            e = np.float32(exp_f32(x[k] - m))
            out[k] = e
            s += e
        for a in range(A):
            k = b + a * inner
            out[k] = _div(out[k], s)


_SOFTMAX = kernel_pair(
    "softmax", "x, out, rows, A, inner, is_log",
    """
    _softmax_row(r, x, out, A, inner, is_log)
    """, count="rows", index="r", module=__name__)


def _check_softmax(ctx, target):
    xs = ctx.in_shapes[0]
    if xs is None:
        return f"{ctx.node.op_type}: unknown rank"
    rank = len(xs)
    ax = int(ctx.attrs.get("axis", -1))
    if rank == 0 or ax < -rank or ax >= rank:
        return f"{ctx.node.op_type}: axis {ax} out of range for rank {rank}"
    return None


def _build_softmax(ctx, target):
    xs = tuple(ctx.in_shapes[0])
    rank = len(xs)
    ax = int(ctx.attrs.get("axis", -1))
    ax = ax + rank if ax < 0 else ax
    A = int(xs[ax])
    inner = _prod(xs[ax + 1:])
    rows = _prod(xs[:ax]) * inner
    is_log = ctx.node.op_type == "LogSoftmax"

    @replayable
    def run(inputs, outputs):
        x, out = flat(inputs[0]), flat(outputs[0])
        target.launch(_SOFTMAX, rows, x, out, rows, A, inner, is_log)

    return run


register(("Softmax", "LogSoftmax"), dtypes=F32, since=13, check=_check_softmax,
         note="max, ascending sum of exp(x - max), then exp(x - max) / sum (Log: (x - max) - log(sum))")(
    _build_softmax)


# =============================================================================
# Dropout (inference): identity copy; the optional mask output is all True.
# =============================================================================


_FILL_TRUE = kernel_pair(
    "fill_true", "out",
    """
    out[i] = True
    """, count="out.shape[0]", index="i", module=__name__)


def _check_dropout(ctx, target):
    if len(ctx.node.outputs) > 1 and ctx.node.outputs[1]:
        dt = ctx.out_dtypes[1] if len(ctx.out_dtypes) > 1 else None
        if dt is None or np.dtype(dt) != np.bool_:
            return "Dropout: a mask output that is not bool (Dropout-7) is not supported"
    if ctx.has_input(2):
        c = ctx.const(2)
        if c is None:
            return "Dropout: training_mode is not a constant (only inference is supported)"
        if bool(np.asarray(c).reshape(-1)[0]):
            return "Dropout: training_mode=True is not supported (inference only)"
    return None


def _build_dropout(ctx, target):
    want_mask = len(ctx.node.outputs) > 1 and bool(ctx.node.outputs[1])

    @replayable
    def run(inputs, outputs):
        copy_array(target, inputs[0], outputs[0])
        if want_mask:
            m = flat(outputs[1])
            target.launch(_FILL_TRUE, m.shape[0], m)

    return run


register("Dropout", dtypes=F32, since=7, until=28, check=_check_dropout,
         note="inference: identity (mask all True); training_mode must be absent or constant False")(_build_dropout)


# =============================================================================
# Old schema versions whose semantics differ (model-zoo CNNs are opset 9, paddle 11-12)
# =============================================================================
def _check_softmax_old(ctx, target):
    xs = ctx.in_shapes[0]
    if xs is None:
        return f"{ctx.node.op_type}: unknown rank"
    rank = len(xs)
    ax = int(ctx.attrs.get("axis", 1))
    if rank == 0 or ax < -rank or ax >= rank:
        return f"{ctx.node.op_type}: axis {ax} out of range for rank {rank}"
    return None


def _build_softmax_old(ctx, target):
    """Softmax/LogSoftmax-1/11: the input is coerced to 2-D at ``axis`` (default 1) and each
    row of prod(shape[axis:]) elements is normalised: the opset-13 kernel with inner = 1."""
    xs = tuple(ctx.in_shapes[0])
    rank = len(xs)
    ax = int(ctx.attrs.get("axis", 1))
    ax = ax + rank if ax < 0 else ax
    A = _prod(xs[ax:])
    rows = _prod(xs[:ax])
    is_log = ctx.node.op_type == "LogSoftmax"

    @replayable
    def run(inputs, outputs):
        x, out = flat(inputs[0]), flat(outputs[0])
        if A:
            target.launch(_SOFTMAX, rows, x, out, rows, A, 1, is_log)

    return run


register(("Softmax", "LogSoftmax"), dtypes=F32, since=1, until=12, check=_check_softmax_old,
         note="opset < 13: coerced to 2-D at axis (default 1); the opset-13 row kernel")(_build_softmax_old)




def _build_clip6(ctx, target):
    lo = np.float32(ctx.attrs.get("min", -np.inf))
    hi = np.float32(ctx.attrs.get("max", np.inf))
    aux = np.int64(0)

    @replayable
    def run(inputs, outputs):
        x, out = flat(inputs[0]), flat(outputs[0])
        target.launch(_CLIP["f32"], out.shape[0], x, out, lo, hi, aux)

    return run


register("Clip", dtypes=F32, since=6, until=10,
         note="Clip-6: min/max attributes (the Clip-11 float32 kernel)")(_build_clip6)
