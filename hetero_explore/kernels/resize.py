"""Resize and Upsample (float32), written once for every target.

* **Resize** (11+), modes nearest and linear: coordinates mapped on the host, once per
  axis and output position; per output element, the interpolation documented below (the
  CPU fast path, :mod:`.cpu_fast.movement`, runs it row by row).
* **Upsample** (7: ``scales`` attribute; 9: ``scales`` input, constant) and
  **Resize-10** (``scales`` input, constant): modes nearest and linear with
  the asymmetric coordinate mapping of those versions (``x_in = x_out / scale``);
  nearest takes ``floor`` when upsampling and ``ceil`` when downsampling
  (onnxruntime's rule for these versions; onnx's reference only defines integer
  upsampling, where every rule agrees). The kernels are the Resize-11 kernels
  (their coordinate tables, built on the host).
* **Resize-11+** (every mode: cubic, axes, tf_crop_and_resize, exclude_outside,
  antialias, keep_aspect_ratio_policy): registered after the nearest/linear Resize, so it
  runs only the nodes that one declines. The per-axis tables (neighbour indices,
  coefficients, extrapolated positions) are onnx's reference ones, built with its
  coefficient and coordinate functions (``onnx.reference.ops.op_resize``; private helpers
  of onnx, reused rather than re-derived: a change there shows up in
  tests/test_kernels_image.py); the kernel sums weight products times the input in
  float64 (IEEE double on every target, rounded once to float32).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .common import attr_str, dual, flat, kernel_pair, node_error, prod, replayable, shape_array, to_target
from .common import node_error as _err  # noqa: F401
from .nn import F32, _JIT
from .opdef import OpList

OPS = OpList()
register = OPS.register


# =============================================================================
# Resize (modes nearest and linear)
# Coordinates are mapped on the host, once per axis and output position, with
# the ONNX reference's float64 formulas, into integer index tables (and, for
# linear, float32 weights) shared by both targets. Linear interpolates over at
# most two axes (e.g. H and W of NCHW): with weights (a0, a1) on the inner
# axis and (b0, b1) on the outer one,
#   y = (x00*a0 + x01*a1)*b0 + (x10*a0 + x11*a1)*b1   (float32, this order),
#   one axis: y = x0*a0 + x1*a1.
# CPU: row by row over the last axis; CUDA: one thread per output element.
# Axes with an identity mapping are copied, not interpolated.
# =============================================================================


def _resize_axis_tables(mode, ctm, nearest_mode, in_w, out_w, scale):
    """(idx0, idx1, w0, w1, identity) for one axis, per the ONNX reference."""
    if math.isclose(scale, 1.0) and out_w == in_w:
        idx = np.arange(out_w, dtype=np.int64)
        return idx, idx, np.ones(out_w, np.float32), np.zeros(out_w, np.float32), True
    output_width = scale * in_w
    y = np.arange(out_w, dtype=np.float64)
    if ctm == "align_corners":
        x_ori = np.zeros(out_w) if output_width == 1 else y * (in_w - 1) / (output_width - 1)
    elif ctm == "asymmetric":
        x_ori = y / scale
    elif ctm == "pytorch_half_pixel":
        x_ori = np.full(out_w, -0.5) if output_width == 1 else (y + 0.5) / scale - 0.5
    elif ctm == "half_pixel":
        x_ori = (y + 0.5) / scale - 0.5
    elif ctm == "half_pixel_symmetric":
        adjustment = out_w / output_width
        center = in_w / 2
        offset = center * (1 - adjustment)
        x_ori = offset + (y + 0.5) / scale - 0.5
    else:  # pragma: no cover - rejected by the check
        raise ValueError(ctm)
    x_int = np.floor(x_ori).astype(np.int64)
    is_int = x_ori == x_int
    ratio = np.where(is_int, 1.0, x_ori - x_int)
    if mode == "nearest":
        if nearest_mode == "round_prefer_floor":
            up = ratio > 0.5
        elif nearest_mode == "round_prefer_ceil":
            up = ratio >= 0.5
        elif nearest_mode == "floor":
            up = np.zeros(out_w, bool)
        else:  # ceil
            up = np.ones(out_w, bool)
        # an integer x_ori: the reference's neighbours are (x-1, x) with weights (0, 1): x itself
        idx = np.where(is_int, x_int, np.where(up, x_int + 1, x_int))
        idx = np.clip(idx, 0, in_w - 1).astype(np.int64)
        return idx, idx, np.ones(out_w, np.float32), np.zeros(out_w, np.float32), False
    # linear: neighbours (x_int, x_int + 1) with weights (1 - r, r); integer x_ori: (x-1, x), (0, 1)
    i0 = np.where(is_int, x_int - 1, x_int)
    i1 = i0 + 1
    w1 = ratio
    w0 = 1.0 - ratio
    i0 = np.clip(i0, 0, in_w - 1).astype(np.int64)
    i1 = np.clip(i1, 0, in_w - 1).astype(np.int64)
    return i0, i1, w0.astype(np.float32), w1.astype(np.float32), False


@dual
def _resize_item(i, x, oshape, istr, tab_off, idx0, idx1, w0, w1, nlin, ax_a, ax_b):
    """Output element i. Axes other than ax_a/ax_b (the interpolated ones,
    ax_b the inner one; -1 when absent) use idx0 (nearest / identity)."""
    nd = oshape.shape[0]
    base = 0
    t = i
    pa = 0
    pb = 0
    for d in range(nd - 1, -1, -1):
        n = oshape[d]
        o = t % n
        t = t // n
        k = tab_off[d] + o
        if d == ax_a:
            pa = k
        elif d == ax_b:
            pb = k
        else:
            base += idx0[k] * istr[d]
    if nlin == 0:
        return x[base]
    if nlin == 1:
        sb = istr[ax_b]
        return _lerp(x[base + idx0[pb] * sb], x[base + idx1[pb] * sb], w0[pb], w1[pb])
    sa = istr[ax_a]
    sb = istr[ax_b]
    r0 = base + idx0[pa] * sa
    r1 = base + idx1[pa] * sa
    c0 = idx0[pb] * sb
    c1 = idx1[pb] * sb
    a0 = w0[pb]
    a1 = w1[pb]
    top = _lerp(x[r0 + c0], x[r0 + c1], a0, a1)
    bot = _lerp(x[r1 + c0], x[r1 + c1], a0, a1)
    return _lerp(top, bot, w0[pa], w1[pa])


@njit(**_JIT)
def _lerp(v0, v1, a0, a1):
    v0 = np.float32(v0)
    v1 = np.float32(v1)
    a0 = np.float32(a0)
    a1 = np.float32(a1)
    t0 = v0 * a0
    t1 = v1 * a1
    return t0 + t1


_RESIZE = kernel_pair(
    "resize", "x, out, oshape, istr, tab_off, idx0, idx1, w0, w1, nlin, ax_a, ax_b",
    """
    out[i] = _resize_item(i, x, oshape, istr, tab_off, idx0, idx1, w0, w1, nlin, ax_a, ax_b)
    """, count="out.shape[0]", index="i", module=__name__)


_CTM = ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "half_pixel_symmetric")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _resize_params(ctx):
    """(scales, sizes) as float64 / int lists from constant inputs, or a reason string."""
    xs = ctx.in_shapes[0]
    rank = len(xs)
    scales = sizes = None
    if ctx.has_input(2):
        c = ctx.const(2)
        if c is None:
            return "Resize: the scales input is not a constant"
        c = np.asarray(c).reshape(-1)
        if c.size:
            scales = [float(v) for v in c]
    if ctx.has_input(3):
        c = ctx.const(3)
        if c is None:
            return "Resize: the sizes input is not a constant"
        c = np.asarray(c).reshape(-1)
        if c.size:
            sizes = [int(v) for v in c]
    if (scales is None) == (sizes is None):
        return "Resize: exactly one of scales and sizes must be given"
    if (scales or sizes) and len(scales or sizes) != rank:
        return "Resize: scales/sizes length must equal the input rank"
    return scales, sizes


def _check_resize(ctx, target):
    at = ctx.attrs
    xs = ctx.in_shapes[0]
    if xs is None or len(xs) == 0:
        return "Resize: unknown or zero input rank"
    mode = at.get("mode", "nearest")
    if mode not in ("nearest", "linear"):
        return f"Resize: mode {mode!r} not supported (nearest, linear only)"
    ctm = at.get("coordinate_transformation_mode", "half_pixel")
    if ctm not in _CTM:
        return f"Resize: coordinate_transformation_mode {ctm!r} not supported"
    if ctm == "half_pixel_symmetric" and ctx.opset < 19:
        return "Resize: half_pixel_symmetric needs opset 19"
    if mode == "nearest" and at.get("nearest_mode", "round_prefer_floor") not in _NEAREST:
        return f"Resize: nearest_mode {at.get('nearest_mode')!r} not supported"
    if int(at.get("antialias", 0)):
        return "Resize: antialias=1 not supported"
    if "axes" in at:
        return "Resize: the axes attribute is not supported"
    if int(at.get("exclude_outside", 0)):
        return "Resize: exclude_outside=1 not supported"
    if at.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        return "Resize: keep_aspect_ratio_policy other than 'stretch' is not supported"
    p = _resize_params(ctx)
    if isinstance(p, str):
        return p
    ys = ctx.out_shapes[0] if ctx.out_shapes else None
    if ys is not None and any(x == 0 and y != 0 for x, y in zip(xs, ys)):
        return "Resize: an empty axis cannot be resized to a non-empty one (nothing to interpolate from)"
    if mode == "linear":
        scales, sizes = p
        if ys is not None:
            n_interp = 0
            for d in range(len(xs)):
                sc = scales[d] if scales is not None else (sizes[d] / xs[d] if xs[d] else 1.0)
                if not (math.isclose(sc, 1.0) and ys[d] == xs[d]):
                    n_interp += 1
            if n_interp > 2:
                return "Resize: linear interpolation over more than two axes is not supported"
    return None


def _build_resize(ctx, target):
    at = ctx.attrs
    xs, ys = tuple(ctx.in_shapes[0]), tuple(ctx.out_shapes[0])
    rank = len(xs)
    mode = at.get("mode", "nearest")
    ctm = at.get("coordinate_transformation_mode", "half_pixel")
    nm = at.get("nearest_mode", "round_prefer_floor")
    p = _resize_params(ctx)
    if isinstance(p, str):
        raise _err(ctx, p)
    scales, sizes = p
    if scales is None:   # an empty input axis stays empty (checked below): its scale is unused
        scales = [sizes[d] / xs[d] if xs[d] else 1.0 for d in range(rank)]
    return _table_run(ctx, target, mode, xs, ys, lambda d: _resize_axis_tables(
        mode, ctm, nm, xs[d], ys[d], float(scales[d])), replay=True)


def _table_run(ctx, target, mode, xs, ys, axis_tables, replay=False):
    """The run function of _RESIZE on the tables of every axis: ``axis_tables(d)`` gives axis
    d's (i0, i1, w0, w1, identity) (see _resize_axis_tables) for an output extent above 0;
    KernelError (naming the node) on an empty axis resized to a non-empty one, and on linear
    interpolation over more than two axes. ``replay``: mark it replayable."""
    rank = len(xs)
    i0s, i1s, w0s, w1s, offs, interp = [], [], [], [], [], []
    off = 0
    for d in range(rank):
        if xs[d] == 0 and ys[d] > 0:
            raise _err(ctx, "cannot resize an empty axis to a non-empty one")
        if ys[d] == 0:
            i0, i1, w0, w1, ident = (np.zeros(0, np.int64),) * 2 + (np.zeros(0, np.float32),) * 2 + (True,)
        else:
            i0, i1, w0, w1, ident = axis_tables(d)
        offs.append(off)
        off += ys[d]
        i0s.append(i0)
        i1s.append(i1)
        w0s.append(w0)
        w1s.append(w1)
        if mode == "linear" and not ident:
            interp.append(d)
    if len(interp) > 2:
        raise _err(ctx, "linear interpolation over more than two axes is not supported")
    nlin = len(interp)
    ax_a = interp[0] if nlin == 2 else -1
    ax_b = interp[-1] if nlin >= 1 else -1
    cat = lambda parts, dt: np.concatenate(parts).astype(dt) if off else np.zeros(1, dt)  # noqa: E731
    istr = np.ones(max(rank, 1), np.int64)
    acc = 1
    for d in range(rank - 1, -1, -1):
        istr[d] = acc
        acc *= xs[d]
    tabs = to_target(target, shape_array(ys), istr, np.asarray(offs or [0], np.int64),
                     cat(i0s, np.int64), cat(i1s, np.int64), cat(w0s, np.float32), cat(w1s, np.float32))

    def run(inputs, outputs):
        x, out = flat(inputs[0]), flat(outputs[0])
        target.launch(_RESIZE, out.shape[0], x, out, *tabs, nlin, ax_a, ax_b)

    return replayable(run) if replay else run


register("Resize", dtypes=F32, since=11, check=_check_resize,
         note="nearest / (bi)linear; host-side coordinate tables; constant scales or sizes")(_build_resize)


# =============================================================================
# Upsample-7/9 and Resize-10: the Resize kernels with the old versions' coordinate rule
# =============================================================================


def _old_scales(ctx):
    """The scales of Upsample-7 (attribute) / Upsample-9, Resize-10 (constant input 1),
    as floats, or a reason string."""
    op = ctx.node.op_type
    if op == "Upsample" and ctx.opset < 9:
        sc = ctx.attrs.get("scales")
        if sc is None:
            return f"{op}-7: the scales attribute is missing"
        sc = [float(v) for v in sc]
    else:
        c = ctx.const(1)
        if c is None:
            return f"{op}-{ctx.opset}: the scales input is not a constant"
        sc = [float(v) for v in np.asarray(c).reshape(-1)]
    xs = ctx.in_shapes[0]
    if xs is None or len(sc) != len(xs):
        return f"{op}: scales {sc} must have one entry per input dim"
    if any(not (s > 0) or not math.isfinite(s) for s in sc):
        return f"{op}: scales {sc} must be positive and finite"
    if op == "Upsample" and min(sc) < 1:
        return f"Upsample: scales {sc} must be >= 1 (its schema; downsampling is Resize)"
    return sc


def _check_old_resize(ctx, target):
    op = ctx.node.op_type
    xs = ctx.in_shapes[0]
    if xs is None or len(xs) == 0 or not ctx.out_shapes or ctx.out_shapes[0] is None:
        return f"{op}: input rank and output shape must be known"
    mode = attr_str(ctx, "mode", "nearest")
    if mode not in ("nearest", "linear", "bilinear"):
        return f"{op}: mode {mode!r} not supported (nearest, linear)"
    sc = _old_scales(ctx)
    if isinstance(sc, str):
        return sc
    ys = ctx.out_shapes[0]
    if mode != "nearest" and sum(1 for d in range(len(xs)) if not (sc[d] == 1.0 and ys[d] == xs[d])) > 2:
        return f"{op}: linear interpolation over more than two axes is not supported"
    return None


def _build_old_resize(ctx, target):
    why = _check_old_resize(ctx, target)
    if why:
        raise node_error(ctx, why)
    sc = _old_scales(ctx)
    mode = "nearest" if attr_str(ctx, "mode", "nearest") == "nearest" else "linear"
    xs, ys = tuple(ctx.in_shapes[0]), tuple(ctx.out_shapes[0])
    # nearest: floor where upsampling, ceil where downsampling (per axis)
    return _table_run(ctx, target, mode, xs, ys, lambda d: _resize_axis_tables(
        mode, "asymmetric", "floor" if sc[d] >= 1.0 else "ceil", xs[d], ys[d], sc[d]))


_OLD_NOTE = ("asymmetric coordinates (x_in = x_out / scale); nearest: floor when upsampling, ceil "
             "when downsampling (onnxruntime's rule); linear over at most two axes; the Resize kernels")
OPS.add("Upsample", _build_old_resize, since=7, until=9, dtypes=F32, check=_check_old_resize,
        note="Upsample-7 (scales attribute) / -9 (constant scales input): " + _OLD_NOTE)
OPS.add("Resize", _build_old_resize, since=10, until=10, dtypes=F32, check=_check_old_resize,
        note="Resize-10 (constant scales input): " + _OLD_NOTE)




# =============================================================================
# Resize-11+ in full (cubic, axes, tf_crop_and_resize, exclude_outside, antialias,
# keep_aspect_ratio_policy): the cases the nearest/linear Resize above declines. Per axis, the host
# builds onnx's reference tables (``_interpolate_1d_along_axis``: neighbour indices clamped
# to the edge, coefficients after exclude_outside, extrapolated positions) in float64; per
# output element the kernel sums weight products (innermost axis first) times the input in
# float64 and rounds once to float32 (the reference interpolates in float64 too).
# =============================================================================


@dual
def _rs_item(i, x, oshape, istr, toff, eoff, ntap, idx, wt, ext, extv, total):
    nd = oshape.shape[0]
    t = i
    for dd in range(nd):
        d = nd - 1 - dd
        o = t % oshape[d]
        t = t // oshape[d]
        if ext[eoff[d] + o] != 0:
            return extv
    acc = np.float64(0.0)
    for k in range(total):
        t = i
        rem = k
        w = np.float64(1.0)
        off = 0
        for dd in range(nd):
            d = nd - 1 - dd
            o = t % oshape[d]
            t = t // oshape[d]
            T = ntap[d]
            tap = rem % T
            rem = rem // T
            e = toff[d] + o * T + tap
            w = w * wt[e]
            off += idx[e] * istr[d]
        acc = acc + w * np.float64(x[off])
    return np.float32(acc)


_RESIZE_FULL = kernel_pair(
    "resize_full", "x, out, oshape, istr, toff, eoff, ntap, idx, wt, ext, extv, total",
    "out[i] = _rs_item(i, x, oshape, istr, toff, eoff, ntap, idx, wt, ext, extv, total)",
    module=__name__)


def _rs_coeff_fn(mode, nearest_mode, a, antialias):
    """onnx's reference coefficient functions (``onnx.reference.ops.op_resize``)."""
    from onnx.reference.ops import op_resize as R
    if mode == "nearest":
        return lambda r, s: R._nearest_coeffs(r, mode=nearest_mode)
    if mode == "cubic":
        f = R._cubic_coeffs_antialias if antialias else R._cubic_coeffs
        return lambda r, s: f(r, s, A=a)
    return R._linear_coeffs_antialias if antialias else R._linear_coeffs


def _rs_axis(ctm, in_w, out_w, scale, roi, coeffs_fn, exclude):
    """(indices (out_w, n), float64 weights (out_w, n), extrapolated (out_w,)) of one axis,
    as onnx's reference ``_interpolate_1d_along_axis`` computes them."""
    from onnx.reference.ops import op_resize as R
    y = np.arange(out_w, dtype=np.float64)
    x_ori, is_ext = R._compute_x_ori(ctm, y, scale, in_w, scale * in_w, out_w, roi)
    x_int = np.floor(x_ori).astype(np.int64)
    ratios = np.where(x_ori == x_int, 1.0, x_ori - x_int)
    first = np.asarray(coeffs_fn(float(ratios[0]), scale), dtype=np.float64)
    n = len(first)
    co = np.empty((out_w, n), np.float64)
    co[0] = first
    for j in range(1, out_w):
        co[j] = coeffs_fn(float(ratios[j]), scale)
    pad = int(np.ceil(n / 2))
    xp = x_ori + pad
    pp = np.floor(xp).astype(np.int64)
    frac = xp - pp
    if n % 2 == 0:
        off = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        off = np.where(frac <= 0.5, -((n - 1) // 2), -((n - 1) // 2) + 1)
    nb = (pp + off)[:, None] + np.arange(n)[None, :] - pad
    if exclude:
        co = np.where((nb < 0) | (nb >= in_w), 0.0, co)
        s = co.sum(axis=-1, keepdims=True)
        co = co / np.where(s == 0, 1.0, s)
    ext = np.zeros(out_w, np.int32) if is_ext is None else is_ext.astype(np.int32)
    return np.clip(nb, 0, in_w - 1).astype(np.int64), co, ext


def _rs_plan(ctx):
    """Per-axis (scale, out size, roi) as the reference derives them, or a reason string."""
    at = ctx.attrs
    xs = ctx.in_shapes[0]
    if xs is None or len(xs) == 0 or not ctx.out_shapes or ctx.out_shapes[0] is None:
        return "Resize: input and output shapes must be known"
    r = len(xs)

    def const(i):
        if not ctx.has_input(i):
            return None
        c = ctx.const(i)
        if c is None:
            return "dynamic"
        c = np.asarray(c).reshape(-1)
        return c if c.size else None

    roi, scales, sizes = const(1), const(2), const(3)
    for name, v in (("roi", roi), ("scales", scales), ("sizes", sizes)):
        if isinstance(v, str):
            return f"Resize: the {name} input is not a constant"
    if (scales is None) == (sizes is None):
        return "Resize: exactly one of scales and sizes must be given"
    axes = at.get("axes")
    axes = list(range(r)) if axes is None else [int(a) + r if int(a) < 0 else int(a) for a in axes]
    if sorted(set(axes)) != sorted(axes) or any(not 0 <= a < r for a in axes):
        return f"Resize: axes {at.get('axes')} are repeated or out of range for rank {r}"
    n = len(axes)
    vals = scales if scales is not None else sizes
    if len(vals) != n:
        return f"Resize: {'scales' if scales is not None else 'sizes'} must have one entry per axis"
    ctm = at.get("coordinate_transformation_mode", "half_pixel")
    full_roi = None
    if ctm == "tf_crop_and_resize":
        if roi is None or len(roi) != 2 * n:
            return "Resize: tf_crop_and_resize needs a constant roi of 2 entries per axis"
        full_roi = [0.0] * r + [1.0] * r
        for i, d in enumerate(axes):
            full_roi[d] = float(roi[i])
            full_roi[r + d] = float(roi[n + i])
    sc = [1.0] * r
    out = list(xs)
    policy = at.get("keep_aspect_ratio_policy", "stretch")
    if scales is not None:
        for i, d in enumerate(axes):
            sc[d] = float(scales[i])
        if any(not (s > 0) or not math.isfinite(s) for s in sc):
            return f"Resize: scales {list(scales)} must be positive and finite"
        out = [int(sc[d] * xs[d]) for d in range(r)]
    else:
        for i, d in enumerate(axes):
            out[d] = int(sizes[i])
        if any(xs[d] == 0 for d in axes):
            return "Resize: cannot resize an empty axis by sizes"
        sc = [out[d] / xs[d] for d in range(r)]
        if policy not in ("stretch", "not_larger", "not_smaller"):
            return f"Resize: keep_aspect_ratio_policy {policy!r} unknown"
        if policy != "stretch":
            s = min(sc[d] for d in axes) if policy == "not_larger" else max(sc[d] for d in axes)
            sc = [s if d in axes else 1.0 for d in range(r)]
            out = [int(s * xs[d] + 0.5) if d in axes else xs[d] for d in range(r)]
    if tuple(out) != tuple(ctx.out_shapes[0]):
        return f"Resize: output shape {tuple(ctx.out_shapes[0])} is not the computed {tuple(out)}"
    if any(xs[d] == 0 and out[d] > 0 for d in range(r)):
        return "Resize: cannot resize an empty axis to a non-empty one"
    return sc, out, full_roi, axes


def _check_resize_full(ctx, target):
    at = ctx.attrs
    mode = at.get("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        return f"Resize: mode {mode!r} unknown"
    ctm = at.get("coordinate_transformation_mode", "half_pixel")
    if ctm not in ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                   "half_pixel_symmetric", "tf_crop_and_resize"):
        return f"Resize: coordinate_transformation_mode {ctm!r} unknown"
    if ctm == "half_pixel_symmetric" and ctx.opset < 19:
        return "Resize: half_pixel_symmetric needs opset 19"
    if mode == "nearest" and int(at.get("antialias", 0)):
        return "Resize: antialias is not defined for mode nearest"
    if at.get("nearest_mode", "round_prefer_floor") not in ("round_prefer_floor", "round_prefer_ceil",
                                                             "floor", "ceil"):
        return f"Resize: nearest_mode {at.get('nearest_mode')!r} unknown"
    p = _rs_plan(ctx)
    if isinstance(p, str):
        return p
    taps = 1
    for d in range(len(p[1])):
        if p[1][d] and not (math.isclose(p[0][d], 1.0) and p[1][d] == ctx.in_shapes[0][d]):
            taps *= 4 if mode == "cubic" else 2
    if taps > 4096 and not int(at.get("antialias", 0)):
        return "Resize: too many interpolated axes"
    return None


def _build_resize_full(ctx, target):
    why = _check_resize_full(ctx, target)
    if why:
        raise node_error(ctx, why)
    at = ctx.attrs
    sc, out, roi, axes = _rs_plan(ctx)
    xs = tuple(ctx.in_shapes[0])
    r = len(xs)
    mode = at.get("mode", "nearest")
    ctm = at.get("coordinate_transformation_mode", "half_pixel")
    fn = _rs_coeff_fn(mode, at.get("nearest_mode", "round_prefer_floor"),
                      float(at.get("cubic_coeff_a", -0.75)), int(at.get("antialias", 0)))
    exclude = bool(int(at.get("exclude_outside", 0)))
    idxs, wts, exts, toff, eoff, ntap = [], [], [], [], [], []
    t_acc = e_acc = 0
    for d in range(r):
        roi_d = None if roi is None else [roi[d], roi[d + r]]
        identity = (math.isclose(sc[d], 1.0) and out[d] == xs[d]
                    and (roi is None or (math.isclose(roi[d], 0.0) and math.isclose(roi[d + r], 1.0))))
        if identity or d not in axes or out[d] == 0:
            ix = np.arange(out[d], dtype=np.int64).reshape(-1, 1)
            w = np.ones((out[d], 1), np.float64)
            e = np.zeros(out[d], np.int32)
        else:
            ix, w, e = _rs_axis(ctm, xs[d], out[d], sc[d], roi_d, fn, exclude)
        toff.append(t_acc)
        eoff.append(e_acc)
        ntap.append(ix.shape[1])
        t_acc += ix.size
        e_acc += e.size
        idxs.append(ix.reshape(-1))
        wts.append(w.reshape(-1))
        exts.append(e)
    total = prod(ntap)
    istr = np.ones(r, np.int64)
    acc = 1
    for d in range(r - 1, -1, -1):
        istr[d] = acc
        acc *= xs[d]
    cat = lambda parts, dt: np.concatenate(parts).astype(dt) if sum(p.size for p in parts) else np.zeros(1, dt)  # noqa: E731
    tabs = to_target(target, np.asarray(out, np.int64), istr, np.asarray(toff, np.int64),
                     np.asarray(eoff, np.int64), np.asarray(ntap, np.int64), cat(idxs, np.int64),
                     cat(wts, np.float64), cat(exts, np.int32))
    extv = np.float32(at.get("extrapolation_value", 0.0))

    def run(inputs, outputs):
        o = flat(outputs[0])
        target.launch(_RESIZE_FULL, o.shape[0], flat(inputs[0]), o, *tabs, extv, total)

    return run


register("Resize", dtypes=F32, since=11, until=22, check=_check_resize_full,
         note="every mode (cubic, axes, tf_crop_and_resize, exclude_outside, antialias, "
              "keep_aspect_ratio_policy): onnx's reference per-axis tables, float64 weight products; "
              "the plain nearest/linear cases run nn's Resize first")(_build_resize_full)
