"""Normalisations (float32), written once for every target: InstanceNormalization,
GroupNormalization (opset 18 and 21 semantics), RMSNormalization,
MeanVarianceNormalization, LpNormalization, LpPool and GlobalLpPool; and, with their own
kernels and orders documented at each (their CPU fast paths in :mod:`.cpu_fast.rows`),
BatchNormalization (inference), LRN and LayerNormalization.

Every normalisation is two kernels over a *view* of the input (its flat layout
read as a shape of its own: GroupNormalization reads (N, C, ...) as
(N, G, C/G, S)):

1. statistics, one item per group (the elements that share a mean), in
   ascending flat index order within the group:

   * mean/variance (Instance, Group, MeanVariance): ``s = 0; s = s + x``;
     ``mean = s / n``; ``q = 0; d = x - mean; q = q + d*d``; ``var = q / n``;
     ``den = sqrt_f32(var + eps)`` (MeanVariance: ``sqrt_f32(var) + eps``,
     eps = 1e-9 as onnx's function body);
   * RMS: ``q = 0; q = q + x*x``; ``den = sqrt_f32(q / n + eps)``, mean = 0;
   * Lp: ``q = 0; q = q + |x|`` (p=1) or ``q = q + x*x`` then ``sqrt_f32(q)``
     (p=2), mean = 0;

   (n is the group size as float32; every operation rounded to float32.)
2. per element: ``y = (x - mean) / den``, then ``y = y * scale`` and
   ``y = y + bias`` where the op has them (Lp: y = 0 where den == 0, as the
   onnx reference). The division is exact IEEE division on both targets.

LpPool / GlobalLpPool (1-, 2- and 3-D): per output element, ``s = 0; s = s +
pow_f32(|v|, p)`` over the in-input taps in ascending (kd, kh, kw) order
(padding contributes nothing, as zeros would), then ``pow_f32(s, 1/p)`` with
``1/p`` rounded to float32 on the host.

Both targets run the same ``@dual`` per-item functions (one group or one
element per item), so every output element sees the same sequence of float32
operations.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .common import prod as _prod
from .common import bcast_offset, broadcast_strides, dual, flat, kernel_pair, replayable, shape_array, to_target
from .nn import F32, _JIT, _div, _to3, window_attrs
from .opdef import OpList
from .pmath import pow_f32, sqrt_f32
from .reduce import _reduce_meta

OPS = OpList()
register = OPS.register

# statistics modes
MEANVAR, MVN, RMS, L1, L2 = 0, 1, 2, 3, 4


@njit(**_JIT)
def _den(mode, q, cnt, eps):
    """The denominator of a group from its second accumulator ``q`` (see module docs)."""
    q = np.float32(q)
    cnt = np.float32(cnt)
    eps = np.float32(eps)
    if mode == 0:
        return sqrt_f32(q / cnt + eps)
    if mode == 1:
        return sqrt_f32(q / cnt) + eps
    if mode == 2:
        return sqrt_f32(q / cnt + eps)
    if mode == 3:
        return q
    return sqrt_f32(q)


@dual
def _stats_item(o, x, mode, kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s, cnt, eps,
                mean_out, den_out):
    base = bcast_offset(o, kshape, kstrides)
    mean = np.float32(0)
    if mode <= 1:
        s = np.float32(0)
        for ro in range(n_outer):
            off = base + bcast_offset(ro, rshape, rstrides)
            for j in range(inner_n):
                s += x[off + j * inner_s]
        mean = np.float32(_div(s, cnt))
    q = np.float32(0)
    for ro in range(n_outer):
        off = base + bcast_offset(ro, rshape, rstrides)
        for j in range(inner_n):
            v = x[off + j * inner_s]
            if mode <= 1:
                d = v - mean
                q += d * d
            elif mode == 3:
                q += abs(v)
            else:
                q += v * v
    mean_out[o] = mean
    den_out[o] = np.float32(_den(mode, q, cnt, eps))


_STATS = kernel_pair(
    "norm_stats", "x, mode, kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s, cnt, eps, mean, den",
    """
    _stats_item(o, x, mode, kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s, cnt, eps, mean, den)
    """, count="mean.shape[0]", index="o", module=__name__)


@dual
def _apply_item(i, x, mean, den, vshape, gstr, sstr, bstr, scale, bias, has_scale, has_bias, zero_if_zero):
    g = bcast_offset(i, vshape, gstr)
    d = den[g]
    y = x[i] - mean[g]
    if zero_if_zero and d == np.float32(0):
        y = np.float32(0)
    else:
        y = np.float32(_div(y, d))
    if has_scale:
        y = y * scale[bcast_offset(i, vshape, sstr)]
    if has_bias:
        y = y + bias[bcast_offset(i, vshape, bstr)]
    return y


_APPLY = kernel_pair(
    "norm_apply", "x, out, mean, den, vshape, gstr, sstr, bstr, scale, bias, has_scale, has_bias, zero_if_zero",
    """
    out[i] = _apply_item(i, x, mean, den, vshape, gstr, sstr, bstr, scale, bias, has_scale, has_bias,
                         zero_if_zero)
    """, count="out.shape[0]", index="i", module=__name__)


def _group_strides(vshape, axes) -> np.ndarray:
    """Strides that map a flat element index (over ``vshape``) to its group's flat index
    (the kept dims, row-major; reduced dims 0)."""
    st = np.zeros(max(len(vshape), 1), dtype=np.int64)
    acc = 1
    for d in range(len(vshape) - 1, -1, -1):
        if d not in axes:
            st[d] = acc
            acc *= int(vshape[d])
    return st


def _normalizer(target, vshape, axes, mode, eps, sstr=None, bstr=None, zero_if_zero=False):
    """A run function (x, scale, bias, out) for a normalisation over ``axes`` of ``vshape``."""
    vshape = tuple(int(v) for v in vshape)
    axes = sorted(set(axes))
    kshape, kstrides, rshape, rstrides, inner_n, inner_s, n_outer, n_reduce = _reduce_meta(vshape, axes)
    groups = _prod(vshape[d] for d in range(len(vshape)) if d not in axes)
    cnt = np.float32(n_reduce)
    eps = np.float32(eps)
    gstr = _group_strides(vshape, axes)
    zeros = np.zeros(max(len(vshape), 1), dtype=np.int64)
    has_scale, has_bias = sstr is not None, bstr is not None
    sstr = zeros if sstr is None else np.asarray(sstr, dtype=np.int64)
    bstr = zeros if bstr is None else np.asarray(bstr, dtype=np.int64)
    kshape, kstrides, rshape, rstrides, vs, gstr, sstr, bstr = to_target(
        target, kshape, kstrides, rshape, rstrides, shape_array(vshape), gstr, sstr, bstr)
    mean, den, dummy = to_target(target, np.zeros(max(groups, 1), np.float32), np.zeros(max(groups, 1), np.float32),
                                 np.zeros(1, np.float32))
    mode = int(mode)

    def run(x, scale, bias, out):
        x, out = flat(x), flat(out)
        if out.shape[0] == 0:
            return
        sc = flat(scale) if has_scale else dummy
        b = flat(bias) if has_bias else dummy
        target.launch(_STATS, groups, x, mode, kshape, kstrides, rshape, rstrides, n_outer, inner_n, inner_s,
                      cnt, eps, mean, den)
        target.launch(_APPLY, out.shape[0], x, out, mean, den, vs, gstr, sstr, bstr, sc, b, has_scale, has_bias,
                      zero_if_zero)

    return run


def _axis(ctx, default, rank):
    ax = int(ctx.attrs.get("axis", default))
    if ax < -rank or ax >= rank:
        return f"{ctx.node.op_type}: axis {ax} out of range for rank {rank}"
    return ax + rank if ax < 0 else ax


def _one_output(ctx):
    if len([o for o in ctx.node.outputs if o]) != 1:
        return f"{ctx.node.op_type}: only the Y output is supported"
    return None


# --- InstanceNormalization -------------------------------------------------------------------


def _check_instance(ctx, target):
    xs = ctx.in_shapes[0]
    if xs is None or len(xs) < 3:
        return "InstanceNormalization: input must be (N, C, spatial...)"
    for i in (1, 2):
        s = ctx.in_shapes[i] if i < len(ctx.in_shapes) else None
        if s is None or tuple(s) != (xs[1],):
            return "InstanceNormalization: scale and B must be 1-D of length C"
    return _one_output(ctx)


def _build_instance(ctx, target):
    xs = tuple(ctx.in_shapes[0])
    st = np.zeros(len(xs), np.int64)
    st[1] = 1
    fn = _normalizer(target, xs, range(2, len(xs)), MEANVAR, ctx.attrs.get("epsilon", 1e-5), st, st)

    @replayable
    def run(inputs, outputs):
        fn(inputs[0], inputs[1], inputs[2], outputs[0])

    return run


register("InstanceNormalization", dtypes=F32, since=6, until=22, check=_check_instance,
         note="per (n, c): two-pass ascending mean/variance; (x - mean) / sqrt(var + eps) * scale + B")(
    _build_instance)


# --- GroupNormalization ------------------------------------------------------------------------


def _check_group(ctx, target):
    xs = ctx.in_shapes[0]
    if xs is None or len(xs) < 2:
        return "GroupNormalization: input must be (N, C, ...)"
    G = int(ctx.attrs.get("num_groups", 0))
    C = int(xs[1])
    if G < 1 or C % G:
        return f"GroupNormalization: num_groups={G} must be >= 1 and divide C={C}"
    if int(ctx.attrs.get("stash_type", 1)) != 1:
        return "GroupNormalization: only stash_type=1 (float32) is supported"
    want = (G,) if ctx.opset < 21 else (C,)
    for i in (1, 2):
        s = ctx.in_shapes[i] if i < len(ctx.in_shapes) else None
        if s is None or tuple(s) != want:
            what = "num_groups (opset 18-20)" if ctx.opset < 21 else "C (opset >= 21)"
            return f"GroupNormalization: scale and bias must be 1-D of length {what}"
    return _one_output(ctx)


def _build_group(ctx, target):
    xs = tuple(ctx.in_shapes[0])
    G = int(ctx.attrs["num_groups"])
    C = int(xs[1])
    vshape = (int(xs[0]), G, C // G, _prod(xs[2:]))
    # per-channel scale (opset 21) indexes (g, c) as g * C/G + c; per-group (opset 18) as g
    st = np.array([0, C // G, 1, 0] if ctx.opset >= 21 else [0, 1, 0, 0], np.int64)
    fn = _normalizer(target, vshape, (2, 3), MEANVAR, ctx.attrs.get("epsilon", 1e-5), st, st)

    @replayable
    def run(inputs, outputs):
        fn(inputs[0], inputs[1], inputs[2], outputs[0])

    return run


def _group_shape(ctx):
    """Y has X's shape (onnx's inference leaves GroupNormalization's output unknown: its
    function body is not inferred; the loader asks this instead, see loader.complete_op_shapes)."""
    return [tuple(ctx.in_shapes[0])]


register("GroupNormalization", dtypes=F32, since=18, until=18, check=_check_group, shape=_group_shape,
         note="opset 18-20: scale/bias per group; two-pass ascending mean/variance per (n, group)")(_build_group)
register("GroupNormalization", dtypes=F32, since=21, until=21, check=_check_group, shape=_group_shape,
         note="opset >= 21: scale/bias per channel; two-pass ascending mean/variance per (n, group)")(_build_group)


# --- RMSNormalization --------------------------------------------------------------------------


def _check_rms(ctx, target):
    xs = ctx.in_shapes[0]
    if xs is None or len(xs) == 0:
        return "RMSNormalization: input must have rank >= 1"
    ax = _axis(ctx, -1, len(xs))
    if isinstance(ax, str):
        return ax
    if int(ctx.attrs.get("stash_type", 1)) != 1:
        return "RMSNormalization: only stash_type=1 (float32) is supported"
    ss = ctx.in_shapes[1] if len(ctx.in_shapes) > 1 else None
    if ss is None:
        return "RMSNormalization: scale shape unknown"
    ns = tuple(xs[ax:])
    try:
        ok = tuple(np.broadcast_shapes(tuple(ss), ns)) == ns
    except ValueError:
        ok = False
    if not ok:
        return f"RMSNormalization: scale shape {tuple(ss)} does not broadcast to the normalized shape {ns}"
    return _one_output(ctx)


def _build_rms(ctx, target):
    xs = tuple(ctx.in_shapes[0])
    ax = _axis(ctx, -1, len(xs))
    sstr = broadcast_strides(tuple(ctx.in_shapes[1]), xs)
    fn = _normalizer(target, xs, range(ax, len(xs)), RMS, ctx.attrs.get("epsilon", 1e-5), sstr)

    @replayable
    def run(inputs, outputs):
        fn(inputs[0], inputs[1], None, outputs[0])

    return run


register("RMSNormalization", dtypes=F32, since=23, until=23, check=_check_rms,
         note="ascending sum of squares per row; x / sqrt(sum / n + eps) * scale")(_build_rms)


# --- MeanVarianceNormalization -----------------------------------------------------------------


def _mvn_axes(ctx, rank):
    axes = [int(a) for a in ctx.attrs.get("axes", [0, 2, 3])]
    out = []
    for a in axes:
        if a < -rank or a >= rank:
            return f"MeanVarianceNormalization: axis {a} out of range for rank {rank}"
        out.append(a + rank if a < 0 else a)
    if len(set(out)) != len(out):
        return f"MeanVarianceNormalization: repeated axes {axes}"
    return out


def _check_mvn(ctx, target):
    xs = ctx.in_shapes[0]
    if xs is None:
        return "MeanVarianceNormalization: unknown rank"
    r = _mvn_axes(ctx, len(xs))
    return r if isinstance(r, str) else None


def _build_mvn(ctx, target):
    xs = tuple(ctx.in_shapes[0])
    fn = _normalizer(target, xs, _mvn_axes(ctx, len(xs)), MVN, 1e-9)

    @replayable
    def run(inputs, outputs):
        fn(inputs[0], None, None, outputs[0])

    return run


register("MeanVarianceNormalization", dtypes=F32, since=9, check=_check_mvn,
         note="two-pass ascending mean/variance over axes; (x - mean) / (sqrt(var) + 1e-9)")(_build_mvn)


# --- LpNormalization ---------------------------------------------------------------------------


def _check_lpnorm(ctx, target):
    xs = ctx.in_shapes[0]
    if xs is None or len(xs) == 0:
        return "LpNormalization: input must have rank >= 1"
    ax = _axis(ctx, -1, len(xs))
    if isinstance(ax, str):
        return ax
    p = int(ctx.attrs.get("p", 2))
    if p not in (1, 2):
        return f"LpNormalization: p={p} (only 1 and 2 are defined)"
    return None


def _build_lpnorm(ctx, target):
    xs = tuple(ctx.in_shapes[0])
    ax = _axis(ctx, -1, len(xs))
    mode = L1 if int(ctx.attrs.get("p", 2)) == 1 else L2
    fn = _normalizer(target, xs, [ax], mode, 0.0, zero_if_zero=True)

    @replayable
    def run(inputs, outputs):
        fn(inputs[0], None, None, outputs[0])

    return run


register("LpNormalization", dtypes=F32, since=1, until=22, check=_check_lpnorm,
         note="ascending sum of |x| (p=1) or x*x then sqrt (p=2) along the axis; x / norm, 0 where norm is 0")(
    _build_lpnorm)


# --- LpPool / GlobalLpPool -------------------------------------------------------------------
# q (int64): D, H, W, OD, OH, OW, KD, KH, KW, sd, sh, sw, dd, dh, dw, pd, ph, pw


@dual
def _lppool_item(i, x, q, p, inv_p):
    D = q[0]
    H = q[1]
    W = q[2]
    OD = q[3]
    OH = q[4]
    OW = q[5]
    ow = i % OW
    t = i // OW
    oh = t % OH
    t = t // OH
    od = t % OD
    nc = t // OD
    xb = nc * D * H * W
    d0 = od * q[9] - q[15]
    h0 = oh * q[10] - q[16]
    w0 = ow * q[11] - q[17]
    s = np.float32(0)
    for kd in range(q[6]):
        idd = d0 + kd * q[12]
        if idd >= 0 and idd < D:
            for kh in range(q[7]):
                ih = h0 + kh * q[13]
                if ih >= 0 and ih < H:
                    for kw in range(q[8]):
                        iw = w0 + kw * q[14]
                        if iw >= 0 and iw < W:
                            v = x[xb + (idd * H + ih) * W + iw]
                            s += np.float32(pow_f32(abs(v), p))
    return np.float32(pow_f32(s, inv_p))


_LPPOOL = kernel_pair(
    "lppool", "x, q, p, inv_p, out",
    "out[i] = _lppool_item(i, x, q, p, inv_p)", count="out.shape[0]", index="i", module=__name__)


def _check_lppool(ctx, target):
    xs = ctx.in_shapes[0]
    op = ctx.node.op_type
    if xs is None or not 3 <= len(xs) <= 5:
        return f"{op}: only 1-, 2- and 3-D inputs (N, C, spatial...) are supported"
    if int(ctx.attrs.get("p", 2)) < 1:
        return f"{op}: p must be >= 1"
    if op == "LpPool":
        ks = ctx.attrs.get("kernel_shape")
        if ks is None or len(ks) != len(xs) - 2:
            return "LpPool: kernel_shape missing or of the wrong length"
        ap = ctx.attrs.get("auto_pad", "NOTSET")
        if ap not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
            return f"LpPool: auto_pad {ap!r} not supported"
    ys = ctx.out_shapes[0] if ctx.out_shapes else None
    if ys is None or len(ys) != len(xs):
        return f"{op}: output shape unknown"
    return None


def _build_lppool(ctx, target):
    xs, ys = tuple(ctx.in_shapes[0]), tuple(ctx.out_shapes[0])
    nsp = len(xs) - 2
    at = ctx.attrs
    if ctx.node.op_type == "GlobalLpPool":
        ksp, strides, dil, pads = list(xs[2:]), [1] * nsp, [1] * nsp, [0] * (2 * nsp)
    else:
        ksp = [int(k) for k in at["kernel_shape"]]
        strides, dil, pads = window_attrs(ctx, xs, ys, ksp)
    vals = (_to3(xs[2:], 1) + _to3(ys[2:], 1) + _to3(ksp, 1) + _to3(strides, 1) + _to3(dil, 1)
            + _to3(pads[:nsp], 0))
    q = to_target(target, np.asarray([int(v) for v in vals], dtype=np.int64))
    pv = int(at.get("p", 2))
    p = np.float32(pv)
    inv_p = np.float32(1.0 / pv)

    @replayable
    def run(inputs, outputs):
        x, out = flat(inputs[0]), flat(outputs[0])
        target.launch(_LPPOOL, out.shape[0], x, q, p, inv_p, out)

    return run


register("LpPool", dtypes=F32, since=11, until=22, check=_check_lppool,
         note="ascending in-input taps: (sum of pow(|x|, p)) ** (1/p); padding adds nothing")(_build_lppool)
register("GlobalLpPool", dtypes=F32, since=2, until=22, check=_check_lppool,
         note="ascending spatial order per (n, c): (sum of pow(|x|, p)) ** (1/p)")(_build_lppool)


# =============================================================================
# BatchNormalization (inference)
# Per channel: f = scale / sqrt_f32(var + eps); per element:
# y = (x - mean) * f + b  (each operation rounded to float32, no FMA).
# The CPU computes f once per (n, c) block, CUDA once per element; the same
# scalar functions give the same bits.
# =============================================================================


@njit(**_JIT)
def _bn_factor(scale, var, eps):
    scale = np.float32(scale)
    var = np.float32(var)
    eps = np.float32(eps)
    return scale / sqrt_f32(var + eps)


@njit(**_JIT)
def _bn_apply(x, mean, f, b):
    x = np.float32(x)
    mean = np.float32(mean)
    f = np.float32(f)
    b = np.float32(b)
    t = (x - mean) * f
    return t + b


_BN = kernel_pair(
    "bn", "x, scale, bias, mean, var, eps, C, S, out",
    """
    c = (i // S) % C
    f = _bn_factor(scale[c], var[c], eps)
    out[i] = _bn_apply(x[i], mean[c], f, bias[c])
    """, count="out.shape[0]", index="i", module=__name__)


def _check_bn(ctx, target):
    if int(ctx.attrs.get("spatial", 1)) != 1:
        return "BatchNormalization: spatial=0 (per-element statistics, opset 7) is not supported"
    if int(ctx.attrs.get("training_mode", 0)) != 0:
        return "BatchNormalization: training_mode=1 is not supported (inference only)"
    if len([o for o in ctx.node.outputs if o]) != 1:
        return "BatchNormalization: only the Y output is supported (inference)"
    xs = ctx.in_shapes[0]
    if xs is None or len(xs) < 2:
        return "BatchNormalization: input must be (N, C, ...)"
    C = xs[1]
    for i in range(1, 5):
        s = ctx.in_shapes[i] if i < len(ctx.in_shapes) else None
        if s is None or _prod(s) != C or len(s) != 1:
            return "BatchNormalization: scale, B, mean and var must be 1-D of length C"
        d = ctx.in_dtypes[i] if i < len(ctx.in_dtypes) else None
        if d is not None and np.dtype(d) != np.float32 and ctx.const(i) is None:
            # BatchNormalization-15 lets them differ from X; constant ones are converted at build
            return (f"BatchNormalization: input {i} is {np.dtype(d).name} and not a constant; the kernel "
                    "takes float32 scale, B, mean and var (or constants of another float type)")
    return None


def _build_bn(ctx, target):
    xs = tuple(ctx.in_shapes[0])
    C = int(xs[1])
    S = _prod(xs[2:])
    eps = np.float32(ctx.attrs.get("epsilon", 1e-5))
    # parameters of another float type (BatchNormalization-15's T1/T2) are constants: float32 copies
    conv = {i: to_target(target, np.asarray(ctx.const(i), np.float32).reshape(-1)) for i in range(1, 5)
            if np.dtype(ctx.in_dtypes[i]) != np.float32}

    @replayable
    def run(inputs, outputs):
        x, out = flat(inputs[0]), flat(outputs[0])
        sc, b, mean, var = (conv[i] if i in conv else flat(inputs[i]) for i in range(1, 5))
        target.launch(_BN, out.shape[0], x, sc, b, mean, var, eps, C, S, out)

    return run


register("BatchNormalization", dtypes=F32, since=7, check=_check_bn,
         note="inference: (x - mean) * (scale / sqrt(var + eps)) + B")(_build_bn)


# =============================================================================
# LRN
# Per element: s = 0.0f; s = s + v*v over channels c - floor((size-1)/2) ..
# c + ceil((size-1)/2) (clipped), ascending; then
# y = x / pow_f32(bias + coef * s, beta), coef = float32(alpha) / float32(size)
# computed once on the host. Both targets: per output element.
# =============================================================================


@njit(**_JIT)
def _lrn_finish(x, s, coef, bias, beta):
    x = np.float32(x)
    s = np.float32(s)
    coef = np.float32(coef)
    bias = np.float32(bias)
    beta = np.float32(beta)
    t = coef * s
    base = bias + t
    return x / pow_f32(base, beta)


@dual
def _lrn_item(i, x, C, S, lo, hi, coef, bias, beta):
    c = (i // S) % C
    b = i - c * S
    c0 = c - lo
    if c0 < 0:
        c0 = 0
    c1 = c + hi
    if c1 > C - 1:
        c1 = C - 1
    s = np.float32(0)
    for cc in range(c0, c1 + 1):
        v = x[b + cc * S]
        s += v * v
    return np.float32(_lrn_finish(x[i], s, coef, bias, beta))


_LRN = kernel_pair(
    "lrn", "x, C, S, lo, hi, coef, bias, beta, out",
    """
    out[i] = _lrn_item(i, x, C, S, lo, hi, coef, bias, beta)
    """, count="out.shape[0]", index="i", module=__name__)


def _check_lrn(ctx, target):
    xs = ctx.in_shapes[0]
    if xs is None or len(xs) < 3:
        return "LRN: input must be (N, C, spatial...)"
    if "size" not in ctx.attrs or int(ctx.attrs["size"]) < 1:
        return "LRN: the size attribute is required"
    return None


def _build_lrn(ctx, target):
    xs = tuple(ctx.in_shapes[0])
    C = int(xs[1])
    S = _prod(xs[2:])
    size = int(ctx.attrs["size"])
    alpha = np.float32(ctx.attrs.get("alpha", 1e-4))
    beta = np.float32(ctx.attrs.get("beta", 0.75))
    bias = np.float32(ctx.attrs.get("bias", 1.0))
    coef = np.float32(alpha / np.float32(size))
    lo = (size - 1) // 2
    hi = size - 1 - lo

    @replayable
    def run(inputs, outputs):
        x, out = flat(inputs[0]), flat(outputs[0])
        target.launch(_LRN, out.shape[0], x, C, S, lo, hi, coef, bias, beta, out)

    return run


register("LRN", dtypes=F32, since=1, check=_check_lrn,
         note="ascending channel-window sum of squares; x / pow(bias + alpha/size * s, beta)")(_build_lrn)


# =============================================================================
# LayerNormalization (opset >= 17)
# Per row of D = prod(shape[axis:]) elements: s = 0.0f, s += x ascending;
# mean = s / float32(D); q = 0.0f, q += (x - mean)^2 ascending (d = x - mean;
# q = q + d*d); var = q / float32(D); inv = 1.0f / sqrt_f32(var + eps);
# y = ((x - mean) * inv) * scale (+ bias). Optional outputs Mean, InvStdDev
# get mean and inv. Both targets: one row per item (the CPU fast path,
# cpu_fast.rows._ln_cpu, runs eight rows at a time with their sum chains
# interleaved: each row's sequence unchanged).
# =============================================================================


@njit(**_JIT)
def _ln_inv(q, Df, eps):
    q = np.float32(q)
    Df = np.float32(Df)
    eps = np.float32(eps)
    var = q / Df
    return np.float32(1.0) / sqrt_f32(var + eps)


@njit(**_JIT)
def _ln_apply(x, mean, inv, sc):
    x = np.float32(x)
    mean = np.float32(mean)
    inv = np.float32(inv)
    sc = np.float32(sc)
    return ((x - mean) * inv) * sc


@dual
def _ln_row(r, x, out, scale, bias, has_b, D, Df, eps, nshape, sstr, bstr, sfull, bfull, mean_out, inv_out,
            want_stats):
    b = r * D
    s = np.float32(0)
    for j in range(D):
        s += x[b + j]
    mean = np.float32(_div(s, Df))
    q = np.float32(0)
    for j in range(D):
        d = x[b + j] - mean
        q += d * d
    inv = np.float32(_ln_inv(q, Df, eps))
    for j in range(D):
        so = j if sfull else bcast_offset(j, nshape, sstr)
        y = np.float32(_ln_apply(x[b + j], mean, inv, scale[so]))
        if has_b:
            bo = j if bfull else bcast_offset(j, nshape, bstr)
            y = y + bias[bo]
        out[b + j] = y
    if want_stats:
        mean_out[r] = mean
        inv_out[r] = inv


_LN = kernel_pair(
    "ln", "x, out, scale, bias, has_b, rows, D, Df, eps, nshape, sstr, bstr, sfull, bfull, mean_out, inv_out, want_stats",
    """
    _ln_row(r, x, out, scale, bias, has_b, D, Df, eps, nshape, sstr, bstr, sfull, bfull, mean_out, inv_out,
            want_stats)
    """, count="rows", index="r", module=__name__)


def _check_ln(ctx, target):
    xs = ctx.in_shapes[0]
    if xs is None or len(xs) == 0:
        return "LayerNormalization: input must have rank >= 1"
    rank = len(xs)
    ax = int(ctx.attrs.get("axis", -1))
    if ax < -rank or ax >= rank:
        return f"LayerNormalization: axis {ax} out of range for rank {rank}"
    if int(ctx.attrs.get("stash_type", 1)) != 1:
        return "LayerNormalization: only stash_type=1 (float32) is supported"
    ax = ax + rank if ax < 0 else ax
    ns = tuple(xs[ax:])
    for i in (1, 2):
        if i == 2 and not ctx.has_input(2):
            continue
        s = ctx.in_shapes[i] if i < len(ctx.in_shapes) else None
        if s is None:
            return "LayerNormalization: scale/bias shape unknown"
        try:
            if tuple(np.broadcast_shapes(tuple(s), ns)) != ns:
                raise ValueError
        except ValueError:
            return f"LayerNormalization: {'scale' if i == 1 else 'bias'} shape {tuple(s)} " \
                   f"does not broadcast to the normalized shape {ns}"
    outs = ctx.node.outputs
    for k in (1, 2):
        if len(outs) > k and outs[k] and k < len(ctx.out_dtypes) and ctx.out_dtypes[k] is not None \
                and np.dtype(ctx.out_dtypes[k]) != np.float32:
            return "LayerNormalization: Mean/InvStdDev outputs must be float32"
    return None


def _build_ln(ctx, target):
    xs = tuple(ctx.in_shapes[0])
    rank = len(xs)
    ax = int(ctx.attrs.get("axis", -1))
    ax = ax + rank if ax < 0 else ax
    ns = tuple(xs[ax:])
    D = _prod(ns)
    rows = _prod(xs[:ax])
    Df = np.float32(D)
    eps = np.float32(ctx.attrs.get("epsilon", 1e-5))
    has_b = ctx.has_input(2)
    ss = tuple(ctx.in_shapes[1])
    sfull = _prod(ss) == D
    bs = tuple(ctx.in_shapes[2]) if has_b else ns
    bfull = _prod(bs) == D
    nshape = shape_array(ns)
    sstr = broadcast_strides(ss, ns)
    bstr = broadcast_strides(bs, ns)
    outs = ctx.node.outputs
    want_mean = len(outs) > 1 and bool(outs[1])
    want_inv = len(outs) > 2 and bool(outs[2])
    want_stats = want_mean or want_inv
    nshape, sstr, bstr, d_scratch = to_target(target, nshape, sstr, bstr, np.zeros(max(rows, 1), np.float32))
    d_scratch2 = to_target(target, np.zeros(max(rows, 1), np.float32))

    @replayable
    def run(inputs, outputs):
        x, out = flat(inputs[0]), flat(outputs[0])
        sc = flat(inputs[1])
        b = flat(inputs[2]) if has_b else sc
        mo = flat(outputs[1]) if want_mean else d_scratch
        io = flat(outputs[2]) if want_inv else d_scratch2
        args = (x, out, sc, b, has_b, rows, D, Df, eps, nshape, sstr, bstr, sfull, bfull, mo, io, want_stats)
        target.launch(_LN, rows, *args)

    return run


register("LayerNormalization", dtypes=F32, since=17, check=_check_ln,
         note="two-pass mean/variance in ascending order; ((x - mean) * inv) * scale + bias")(_build_ln)
