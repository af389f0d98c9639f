"""Pooling (float32), written once for every target: MaxPool, AveragePool (1-, 2- and 3-D,
run as 3-D, as Conv) and GlobalAveragePool / GlobalMaxPool (any rank >= 3). The orders are
documented per op below; the CPU fast paths (:mod:`.cpu_fast.pools`) keep them.
"""

from __future__ import annotations

import numpy as np

from .common import prod as _prod
from .common import dual, flat, kernel_pair, replayable, to_target
from .nn import F32, _conv_like_check, _div, _i64, _to3, window_attrs
from .opdef import OpList

OPS = OpList()
register = OPS.register


# =============================================================================
# MaxPool / AveragePool (1-, 2- and 3-D; run as 3-D, as Conv)
# MaxPool: acc = -inf, then for taps (kd, kh, kw) ascending inside the input:
#   if v > acc: acc = v   (NaN inputs are ignored, as onnxruntime and the
#   ONNX reference do). With the Indices output: the first tap that sets the
#   maximum (a first tap of -inf counts), its flat index into x (row-major
#   over (n, c, spatial), or column-major over the spatial dims with
#   storage_order=1); -1 where no tap is a number.
# AveragePool: sum = 0.0f, then sum = sum + v over in-input taps (kd, kh, kw)
# ascending; result = sum / float32(count), count = in-input taps, plus the
# taps in the explicit padding when count_include_pad=1 (taps beyond the end
# padding, from ceil_mode, never count).
# Both targets: per output element (the CPU fast path: rows of accumulators,
# 1-D and 2-D).
# =============================================================================

# p (int64): 0 N, 1 C, 2 H, 3 W, 4 OH, 5 OW, 6 KH, 7 KW, 8 sh, 9 sw, 10 dh, 11 dw,
# 12 pad_top, 13 pad_left, 14 pad_bottom, 15 pad_right, 16 count_include_pad,
# 17 D, 18 OD, 19 KD, 20 sd, 21 dd, 22 pad_front, 23 pad_back
# (indices 0-16 are the 2-D layout the CPU fast path reads)


@dual
def _pool_at(x, nc, od, oh, ow, p, is_max):
    H, W, KH, KW, sh, sw, dh, dw = p[2], p[3], p[6], p[7], p[8], p[9], p[10], p[11]
    pt, pl, pb, pr, include = p[12], p[13], p[14], p[15], p[16]
    D, KD, sd, dd, pf, pk = p[17], p[19], p[20], p[21], p[22], p[23]
    xb = nc * D * H * W
    d0 = od * sd - pf
    h0 = oh * sh - pt
    w0 = ow * sw - pl
    if is_max:
        acc = np.float32(-np.inf)
        for kd in range(KD):
            idd = d0 + kd * dd
            if idd >= 0 and idd < D:
                for kh in range(KH):
                    ih = h0 + kh * dh
                    if ih >= 0 and ih < H:
                        for kw in range(KW):
                            iw = w0 + kw * dw
                            if iw >= 0 and iw < W:
                                v = x[xb + (idd * H + ih) * W + iw]
                                if v > acc:
                                    acc = v
        return acc
    s = np.float32(0)
    cnt = 0
    cpad = 0
    for kd in range(KD):
        idd = d0 + kd * dd
        if idd >= -pf and idd < D + pk:
            ind = idd >= 0 and idd < D
            for kh in range(KH):
                ih = h0 + kh * dh
                if ih >= -pt and ih < H + pb:
                    inh = ind and ih >= 0 and ih < H
                    for kw in range(KW):
                        iw = w0 + kw * dw
                        if iw >= -pl and iw < W + pr:
                            if inh and iw >= 0 and iw < W:
                                s += x[xb + (idd * H + ih) * W + iw]
                                cnt += 1
                            else:
                                cpad += 1
    if include:
        cnt += cpad
    return _div(s, np.float32(cnt))


@dual
def _pool_pos(i, p):
    """(nc, od, oh, ow) of pooled output element ``i``."""
    OH, OW, OD = p[4], p[5], p[18]
    ow = i % OW
    t = i // OW
    oh = t % OH
    t = t // OH
    return t // OD, t % OD, oh, ow


_POOL = kernel_pair(
    "pool", "x, p, is_max, out",
    """
    nc, od, oh, ow = _pool_pos(i, p)
    out[i] = _pool_at(x, nc, od, oh, ow, p, is_max)
    """, count="out.shape[0]", index="i", module=__name__)


@dual
def _maxpool_arg(x, nc, od, oh, ow, p, col_major, lo):
    """MaxPool's value and Indices entry for one output element (see the order above);
    ``lo`` is the lowest value of x's dtype (-inf for float32)."""
    H, W, KH, KW, sh, sw, dh, dw = p[2], p[3], p[6], p[7], p[8], p[9], p[10], p[11]
    pt, pl = p[12], p[13]
    D, KD, sd, dd, pf = p[17], p[19], p[20], p[21], p[22]
    S = D * H * W
    xb = nc * S
    d0 = od * sd - pf
    h0 = oh * sh - pt
    w0 = ow * sw - pl
    acc = lo
    best = -1
    for kd in range(KD):
        idd = d0 + kd * dd
        if idd >= 0 and idd < D:
            for kh in range(KH):
                ih = h0 + kh * dh
                if ih >= 0 and ih < H:
                    for kw in range(KW):
                        iw = w0 + kw * dw
                        if iw >= 0 and iw < W:
                            v = x[xb + (idd * H + ih) * W + iw]
                            if v > acc or (best < 0 and v == acc):
                                acc = v
                                if col_major:
                                    # column-major over the spatial dims (the leading size-1
                                    # dims of 1-D/2-D add nothing)
                                    best = xb + idd + (ih + iw * H) * D
                                else:
                                    best = xb + (idd * H + ih) * W + iw
    return acc, best


_MAXPOOL_IDX = kernel_pair(
    "maxpool_idx", "x, p, col_major, lo, out, idx",
    """
    nc, od, oh, ow = _pool_pos(i, p)
    v, b = _maxpool_arg(x, nc, od, oh, ow, p, col_major, lo)
    out[i] = v
    idx[i] = b
    """, count="out.shape[0]", index="i", module=__name__)


def _check_pool(ctx, target):
    r = _conv_like_check(ctx)
    if r:
        return r
    op = ctx.node.op_type
    ks = ctx.attrs.get("kernel_shape")
    if ks is None or len(ks) != len(ctx.in_shapes[0]) - 2:
        return f"{op}: kernel_shape missing or of the wrong length"
    if op == "MaxPool" and len(ctx.node.outputs) > 1 and ctx.node.outputs[1]:
        if int(ctx.attrs.get("storage_order", 0)) not in (0, 1):
            return "MaxPool: storage_order must be 0 or 1"
    xs = ctx.in_shapes[0]
    ys = ctx.out_shapes[0] if ctx.out_shapes else None
    if ys is None or len(ys) != len(xs):
        return f"{op}: output shape unknown"
    # With ceil_mode a last window may start past the input (in the right padding): onnx's shape
    # inference keeps it before schema version 22 (the output shape the runner allocates; its
    # value is then -inf for MaxPool, 0/0 for AveragePool) and drops it from 22 on, as
    # onnxruntime does at every version. The kernel follows the shapes it is given.
    return None


def pool_geometry(ctx, xs, ys):
    """MaxPool/AveragePool's geometry array (layout above) from the node's attributes."""
    xs, ys = tuple(xs), tuple(ys)
    nsp = len(xs) - 2
    ksp = [int(k) for k in ctx.attrs["kernel_shape"]]
    strides, dil, pads = window_attrs(ctx, xs, ys, ksp)
    include = int(ctx.attrs.get("count_include_pad", 0))
    D, H, W = _to3(xs[2:], 1)
    OD, OH, OW = _to3(ys[2:], 1)
    KD, KH, KW = _to3(ksp, 1)
    sd, sh, sw = _to3(strides, 1)
    dd, dh, dw = _to3(dil, 1)
    pf, pt, pl = _to3(pads[:nsp], 0)
    pk, pb, pr = _to3(pads[nsp:], 0)
    return _i64(xs[0], xs[1], H, W, OH, OW, KH, KW, sh, sw, dh, dw, pt, pl, pb, pr, include,
                D, OD, KD, sd, dd, pf, pk)


def _build_pool(ctx, target):
    xs, ys = tuple(ctx.in_shapes[0]), tuple(ctx.out_shapes[0])
    p = to_target(target, pool_geometry(ctx, xs, ys))
    is_max = ctx.node.op_type == "MaxPool"
    with_idx = is_max and len(ctx.node.outputs) > 1 and bool(ctx.node.outputs[1])
    col_major = int(ctx.attrs.get("storage_order", 0)) == 1
    dt = np.dtype(ctx.in_dtypes[0])
    lo = np.float32(-np.inf) if dt == np.float32 else dt.type(np.iinfo(dt).min)
    # integer MaxPool runs the Indices kernel (no NaN to skip), indices into a scratch buffer
    scratch = None if with_idx or dt == np.float32 else to_target(target, np.empty(max(_prod(ys), 1), np.int64))

    @replayable
    def run(inputs, outputs):
        x, out = flat(inputs[0]), flat(outputs[0])
        if with_idx:
            target.launch(_MAXPOOL_IDX, out.shape[0], x, p, col_major, lo, out, flat(outputs[1]))
        elif scratch is not None:
            target.launch(_MAXPOOL_IDX, out.shape[0], x, p, col_major, lo, out, scratch)
        else:
            target.launch(_POOL, out.shape[0], x, p, is_max, out)

    return run


register("MaxPool", dtypes=("float32", "int8", "uint8"), since=12, until=28, check=_check_pool,
         note="1-3 spatial dims; ascending taps, NaN ignored; Indices (storage_order 0/1): the first "
              "maximal tap", kernels=(_POOL, _MAXPOOL_IDX))(_build_pool)
register("AveragePool", dtypes=F32, since=11, until=28, check=_check_pool,
         note="1-3 spatial dims; ascending float32 sum of taps, then / count")(_build_pool)


# =============================================================================
# GlobalAveragePool / GlobalMaxPool (any rank >= 3)
# Average: sum = 0.0f, += x over the spatial positions in ascending flat order,
# then / float32(count). Max: acc = -inf, if v > acc: acc = v (NaN ignored,
# as MaxPool). One output per (n, c) on both targets.
# =============================================================================


@dual
def _gpool_item(r, x, S, is_max, count):
    b = r * S
    if is_max:
        acc = np.float32(-np.inf)
        for j in range(S):
            v = x[b + j]
            if v > acc:
                acc = v
        return acc
    s = np.float32(0)
    for j in range(S):
        s += x[b + j]
    return _div(s, count)


_GPOOL = kernel_pair(
    "gpool", "x, S, is_max, count, out",
    """
    out[r] = _gpool_item(r, x, S, is_max, count)
    """, count="out.shape[0]", index="r", module=__name__)


def _check_gpool(ctx, target):
    xs = ctx.in_shapes[0]
    if xs is None or len(xs) < 3:
        return f"{ctx.node.op_type}: input must be (N, C, spatial...)"
    return None


def _build_gpool(ctx, target):
    xs = tuple(ctx.in_shapes[0])
    S = _prod(xs[2:])
    is_max = ctx.node.op_type == "GlobalMaxPool"
    count = np.float32(S)

    @replayable
    def run(inputs, outputs):
        x, out = flat(inputs[0]), flat(outputs[0])
        target.launch(_GPOOL, out.shape[0], x, S, is_max, count, out)

    return run


register(("GlobalAveragePool", "GlobalMaxPool"), dtypes=F32, since=1, until=28, check=_check_gpool,
         note="ascending spatial order per (n, c)")(_build_gpool)
