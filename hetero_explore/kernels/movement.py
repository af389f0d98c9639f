"""More data-movement ops: Tile, DepthToSpace, SpaceToDepth, Trilu, EyeLike,
ScatterND, ScatterElements and Pad (every target).

* Tile, DepthToSpace, SpaceToDepth, Trilu and EyeLike move bits (arrays viewed as
  unsigned integers of their width, as in ``data.py``): bitwise equal on every
  target by construction. DepthToSpace/SpaceToDepth are a reshape-transpose-reshape,
  i.e. one strided gather (``data._gather_strided``) with host-computed strides.
* ScatterND / ScatterElements copy ``data`` and then apply the updates **in order,
  in one sequential pass** (one CUDA thread): the ONNX reference applies them in
  index order, which fixes the result of duplicate indices and the accumulation
  order of the reductions (add, mul, max, min), so both targets agree bit for bit.
  That is slow on a GPU for many updates (a design choice for determinism, not an
  accident). Indices are checked in the kernel exactly as the Gathers are
  (``data.index_flag`` / ``data.raise_if_flagged``): an out-of-range index raises
  :class:`~hetero_explore.ir.errors.ExecutionError` naming the node on every target.
* Pad (constant / reflect / edge / wrap; Pad-2's attributes too) maps every output
  element to its source element or the constant: pure data movement, any dtype (the CPU
  fast path, :mod:`.cpu_fast.movement`, copies row by row).
"""

from __future__ import annotations

import numpy as np

from .common import bits, copy_array, dual, flat, kernel_pair, replayable, shape_array, to_target
from .common import node_error as _err
from .data import (INDEX, MOVE, _gather_strided, _meta, _prod, _shapes_known, _strides, index_flag,
                   raise_if_flagged)
from .opdef import ALL, FLOAT as F32, OpList

OPS = OpList()
register = OPS.register

UNTIL = 21  # checked to 21; Tile, Trilu and Scatter* have no schema version after it, so they claim on to 28
NUMERIC = ("float32", "int64", "int32")


# --- Tile ------------------------------------------------------------------------------
@dual
def tile_offset(i, oshape, ishape, istrides):
    """Input offset of output element ``i`` of a Tile: coordinate c -> c mod input dim."""
    off = 0
    for d in range(oshape.shape[0] - 1, -1, -1):
        n = oshape[d]
        c = i % n
        i //= n
        off += (c % ishape[d]) * istrides[d]
    return off


_TILE = kernel_pair("tile", "x, out, oshape, ishape, istrides",
                    "out[i] = x[tile_offset(i, oshape, ishape, istrides)]", module=__name__)


def _check_tile(ctx, target):
    why = _shapes_known(ctx)
    if why:
        return why
    ins, outs = tuple(ctx.in_shapes[0]), ctx.out_shapes[0]
    if outs is None or len(outs) != len(ins):
        return "Tile: the output shape is unknown or of another rank"
    if any(o % i if i else o for i, o in zip(ins, outs)):
        return f"Tile: output shape {tuple(outs)} is not a multiple of input shape {ins}"
    return None


@register("Tile", dtypes=MOVE, since=6, until=UNTIL, check=_check_tile,
          note="repeats come from shape inference (the output shape)")
def _build_tile(ctx, target):
    ins, outs = tuple(ctx.in_shapes[0]), tuple(ctx.out_shapes[0])
    o_shape, i_strides = _meta(outs, _strides(ins))
    i_shape = np.asarray(ins or (1,), np.int64)
    meta = to_target(target, o_shape, i_shape, i_strides)

    @replayable
    def run(inputs, outputs):
        x, out = bits(inputs[0]), bits(outputs[0])
        if out.shape[0]:
            target.launch(_TILE, out.shape[0], x, out, *meta)

    return run


# --- DepthToSpace / SpaceToDepth -------------------------------------------------------
def _check_d2s(ctx, target):
    why = _shapes_known(ctx)
    if why:
        return why
    xs = tuple(ctx.in_shapes[0])
    b = int(ctx.attrs.get("blocksize", 0))
    if len(xs) != 4 or b < 1:
        return f"{ctx.node.op_type}: needs a 4-D input and blocksize >= 1"
    if ctx.node.op_type == "DepthToSpace":
        if xs[1] % (b * b):
            return f"DepthToSpace: channels {xs[1]} not divisible by blocksize^2={b * b}"
    elif xs[2] % b or xs[3] % b:
        return f"SpaceToDepth: H, W {xs[2:]} not divisible by blocksize {b}"
    if ctx.attrs.get("mode", "DCR") not in ("DCR", "CRD"):   # SpaceToDepth: from version 28
        return f"{ctx.node.op_type}: mode {ctx.attrs.get('mode')!r} not supported"
    return None


def _d2s_layout(ctx):
    """(6-D output shape, matching input strides) of the reshape-transpose-reshape."""
    N, C, H, W = (int(v) for v in ctx.in_shapes[0])
    b = int(ctx.attrs["blocksize"])
    if ctx.node.op_type == "SpaceToDepth":
        # x (N, C, H/b, b, W/b, b) -> (N, b1, b2, C, H/b, W/b)
        h, w = H // b, W // b
        if ctx.attrs.get("mode", "DCR") == "CRD":   # -> (N, C, b1, b2, H/b, W/b)
            return (N, C, b, b, h, w), (C * H * W, H * W, W, 1, b * W, b)
        return (N, b, b, C, h, w), (C * H * W, W, 1, H * W, b * W, b)
    c = C // (b * b)
    if ctx.attrs.get("mode", "DCR") == "DCR":   # x (N, b1, b2, c, H, W)
        sN, sb1, sb2, sc = C * H * W, b * c * H * W, c * H * W, H * W
    else:                                     # CRD: x (N, c, b1, b2, H, W)
        sN, sc, sb1, sb2 = C * H * W, b * b * H * W, b * H * W, H * W
    # output (N, c, H, b1, W, b2)
    return (N, c, H, b, W, b), (sN, sc, W, sb1, 1, sb2)


@register(("DepthToSpace", "SpaceToDepth"), dtypes=MOVE, since=13, until=28, check=_check_d2s,
          note="one strided gather (DCR and CRD modes)")
def _build_d2s(ctx, target):
    shape, strides = _d2s_layout(ctx)
    meta = to_target(target, *_meta(shape, strides))

    @replayable
    def run(inputs, outputs):
        _gather_strided(target, inputs[0], outputs[0], 0, *meta)

    return run


# older schema versions: SpaceToDepth-1 is 13's (DCR; the mode attribute arrives in 28); DepthToSpace-1 has no mode (DCR)
register("SpaceToDepth", dtypes=MOVE, since=1, until=12, check=_check_d2s,
         note="one strided gather")(_build_d2s)
register("DepthToSpace", dtypes=MOVE, since=1, until=12, check=_check_d2s,
         note="DCR (no mode attribute before 11's; CRD from 11)")(_build_d2s)


# --- Trilu -----------------------------------------------------------------------------
_TRILU = kernel_pair(
    "trilu", "x, out, R, C, k, upper",
    """
    col = i % C
    row = (i // C) % R
    keep = (col - row >= k) if upper else (col - row <= k)
    out[i] = x[i] if keep else x[i] ^ x[i]
    """, module=__name__)


def _check_trilu(ctx, target):
    why = _shapes_known(ctx)
    if why:
        return why
    if len(ctx.in_shapes[0]) < 2:
        return "Trilu: input rank must be >= 2"
    if ctx.has_input(1):
        if not target.host and ctx.const(1) is None:
            return "Trilu: k is not a constant (the CUDA kernel needs it at build time)"
        s = ctx.in_shapes[1] if len(ctx.in_shapes) > 1 else None
        if s is not None and _prod(s) != 1:
            return "Trilu: k must hold one value"
    return None


@register("Trilu", dtypes=MOVE, since=14, until=UNTIL, check=_check_trilu,
          note="keeps col - row >= k (upper) or <= k (lower), zero elsewhere")
def _build_trilu(ctx, target):
    xs = tuple(ctx.in_shapes[0])
    R, C = int(xs[-2]), int(xs[-1])
    upper = bool(int(ctx.attrs.get("upper", 1)))
    kc = ctx.const(1) if ctx.has_input(1) else np.zeros(1, np.int64)

    def run(inputs, outputs):
        k = np.int64(np.asarray(kc if kc is not None else inputs[1]).reshape(-1)[0])
        x, out = bits(inputs[0]), bits(outputs[0])
        if out.shape[0]:
            target.launch(_TRILU, out.shape[0], x, out, R, C, k, upper)

    return run


# --- EyeLike ---------------------------------------------------------------------------
_EYE = kernel_pair(
    "eyelike", "out, C, k, one",
    """
    col = i % C
    row = i // C
    out[i] = one if col - row == k else one ^ one
    """, module=__name__)


def _check_eyelike(ctx, target):
    why = _shapes_known(ctx)
    if why:
        return why
    if len(ctx.in_shapes[0]) != 2:
        return "EyeLike: input must be 2-D"
    dt = ctx.out_dtypes[0] if ctx.out_dtypes else None
    if dt is None or np.dtype(dt).name not in MOVE:
        return f"EyeLike: output dtype {dt} not supported"
    return None


@register("EyeLike", dtypes=MOVE, since=9, until=28, check=_check_eyelike,
          note="ones on diagonal k in the output dtype")
def _build_eyelike(ctx, target):
    C = int(ctx.in_shapes[0][1])
    k = np.int64(ctx.attrs.get("k", 0))
    dt = np.dtype(ctx.out_dtypes[0])
    one = np.ones(1, dt).view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize])[0]

    @replayable
    def run(inputs, outputs):
        out = bits(outputs[0])
        if out.shape[0]:
            target.launch(_EYE, out.shape[0], out, C, k, one)

    return run


# --- ScatterND / ScatterElements -------------------------------------------------------
_REDUCTIONS = {"none": 0, "add": 1, "mul": 2, "max": 3, "min": 4}


@dual
def combine(a, u, red):
    """out = reduction(a, u): none/add/mul/max/min (max/min propagate NaN like numpy)."""
    if red == 1:
        return a + u
    if red == 2:
        return a * u
    if red == 3:
        return u if (u > a or u != u) else a
    if red == 4:
        return u if (u < a or u != u) else a
    return u


_SCATTERND = kernel_pair(
    "scatternd", "out, idx, upd, m, inner, n_upd, dshape, dstrides, red, bad",
    """
    for t in range(n_upd):
        off = 0
        ok = True
        for j in range(m):
            k = idx[t * m + j]
            if k < 0:
                k += dshape[j]
            if k < 0 or k >= dshape[j]:
                bad[0] = 1
                ok = False
            off += k * dstrides[j]
        if ok:
            for r in range(inner):
                out[off + r] = combine(out[off + r], upd[t * inner + r], red)
    """, count="1", module=__name__)


_SCATTER_ELEMENTS = kernel_pair(
    "scatter_elements", "out, idx, upd, ushape, dstrides, axis, axis_dim, red, bad",
    """
    for t in range(upd.shape[0]):
        off = 0
        rem = t
        ok = True
        for d in range(ushape.shape[0] - 1, -1, -1):
            n = ushape[d]
            c = rem % n
            rem //= n
            if d == axis:
                c = idx[t]
                if c < 0:
                    c += axis_dim
                if c < 0 or c >= axis_dim:
                    bad[0] = 1
                    ok = False
            off += c * dstrides[d]
        if ok:
            out[off] = combine(out[off], upd[t], red)
    """, count="1", module=__name__)


def _check_scatter(ctx, target):
    why = _shapes_known(ctx, (0, 1, 2))
    if why:
        return why
    dt = ctx.in_dtypes[1] if len(ctx.in_dtypes) > 1 else None
    if dt is None or np.dtype(dt).name not in INDEX:
        return f"{ctx.node.op_type}: indices must be int64 or int32"
    if ctx.in_dtypes[2] is None or np.dtype(ctx.in_dtypes[2]) != np.dtype(ctx.in_dtypes[0]):
        return f"{ctx.node.op_type}: updates and data must have one dtype"
    red = ctx.attrs.get("reduction", "none")
    if red not in _REDUCTIONS:
        return f"{ctx.node.op_type}: reduction {red!r} not supported"
    ds, ish, us = (tuple(ctx.in_shapes[i]) for i in range(3))
    if ctx.node.op_type == "ScatterND":
        if not ds or not ish:
            return "ScatterND: data and indices must have rank >= 1"
        m = ish[-1]
        if m > len(ds) or us != ish[:-1] + ds[m:]:
            return f"ScatterND: updates shape {us} must be {ish[:-1] + ds[m:]}"
    else:
        if not ds or len(ds) != len(ish) or ish != us:
            return f"ScatterElements: data {ds}, indices {ish} and updates {us} must have one rank, " \
                   "indices and updates one shape"
        try:
            axis = int(ctx.attrs.get("axis", 0))
            axis = axis + len(ds) if axis < 0 else axis
            if not 0 <= axis < len(ds):
                raise ValueError
        except ValueError:
            return f"ScatterElements: axis {ctx.attrs.get('axis')} out of range"
        if any(i > d for k, (i, d) in enumerate(zip(ish, ds)) if k != axis):
            return f"ScatterElements: indices {ish} exceed data {ds} outside axis {axis}"
    return None


def _build_scatternd(ctx, target):
    ds, ish = tuple(ctx.in_shapes[0]), tuple(ctx.in_shapes[1])
    m = int(ish[-1])
    inner = _prod(ds[m:])
    n_upd = _prod(ish[:-1])
    dstr = _strides(ds)
    dims = [int(v) for v in ds[:m]]
    dshape, dstrides = to_target(target, np.asarray(dims or [1], np.int64),
                                 np.asarray(dstr[:m] or [0], np.int64))
    red = _REDUCTIONS[ctx.attrs.get("reduction", "none")]

    def run(inputs, outputs):
        copy_array(target, inputs[0], outputs[0])
        out, idx, upd = flat(outputs[0]), flat(inputs[1]), flat(inputs[2])
        if n_upd == 0:
            return
        bad = index_flag(target)
        target.launch(_SCATTERND, 1, out, idx, upd, m, inner, n_upd, dshape, dstrides, red, bad)
        if m:
            raise_if_flagged(target, ctx, bad, idx, dims)

    return run


def _build_scatter_elements(ctx, target):
    ds, ish = tuple(ctx.in_shapes[0]), tuple(ctx.in_shapes[1])
    axis = int(ctx.attrs.get("axis", 0))
    axis = axis + len(ds) if axis < 0 else axis
    axis_dim = int(ds[axis])
    ushape, dstrides = to_target(target, *_meta(ish, _strides(ds)))
    red = _REDUCTIONS[ctx.attrs.get("reduction", "none")]

    def run(inputs, outputs):
        copy_array(target, inputs[0], outputs[0])
        out, idx, upd = flat(outputs[0]), flat(inputs[1]), flat(inputs[2])
        if upd.shape[0] == 0:
            return
        bad = index_flag(target)
        target.launch(_SCATTER_ELEMENTS, 1, out, idx, upd, ushape, dstrides, axis, axis_dim, red, bad)
        raise_if_flagged(target, ctx, bad, idx, axis_dim)

    return run


_SC_NOTE = "updates applied in index order in one sequential pass (deterministic duplicates " \
           "and reductions; one CUDA thread); out-of-range indices raise"
for _op, _b in (("ScatterND", _build_scatternd), ("ScatterElements", _build_scatter_elements)):
    register(_op, dtypes=NUMERIC, since=11, until=UNTIL, check=_check_scatter, note=_SC_NOTE)(_b)


# =============================================================================
# Pad (constant / reflect / edge / wrap): pure data movement, any dtype.
# =============================================================================

_PAD_MODES = {"constant": 0, "reflect": 1, "edge": 2, "wrap": 3}


@dual
def _pad_map(j, n, mode):
    """Input index along one axis for the (unpadded) index j, or -1 for the constant value."""
    if j >= 0 and j < n:
        return j
    if mode == 0:
        return -1
    if mode == 2:
        return 0 if j < 0 else n - 1
    if mode == 1:
        if n == 1:
            return 0
        per = 2 * (n - 1)
        j = j % per
        if j < 0:
            j += per
        if j >= n:
            j = per - j
        return j
    j = j % n
    if j < 0:
        j += n
    return j


@dual
def _pad_src(i, oshape, ishape, istr, pbeg, mode):
    """Flat input offset of output element i, or -1 for the constant value."""
    off = 0
    t = i
    for d in range(oshape.shape[0] - 1, -1, -1):
        n_o = oshape[d]
        o = t % n_o
        t = t // n_o
        j = _pad_map(o - pbeg[d], ishape[d], mode)
        if j < 0:
            return -1
        off += j * istr[d]
    return off


_PAD = kernel_pair(
    "pad", "x, out, cval, oshape, ishape, istr, pbeg, mode",
    """
    s = _pad_src(i, oshape, ishape, istr, pbeg, mode)
    out[i] = cval[0] if s < 0 else x[s]
    """, count="out.shape[0]", index="i", module=__name__)


def _pad_layout(ctx, xs, pads, axes):
    """Begin pads per dim and the output shape from the pads input (and axes)."""
    rank = len(xs)
    pads = [int(v) for v in np.asarray(pads).reshape(-1)]
    if axes is None:
        axes = list(range(rank))
    else:
        axes = [int(a) + rank if int(a) < 0 else int(a) for a in np.asarray(axes).reshape(-1)]
    k = len(axes)
    if len(pads) != 2 * k:
        raise _err(ctx, f"pads has {len(pads)} values, expected {2 * k}")
    beg = [0] * rank
    end = [0] * rank
    for i, a in enumerate(axes):
        beg[a] = pads[i]
        end[a] = pads[k + i]
    oshape = tuple(xs[d] + beg[d] + end[d] for d in range(rank))
    return beg, oshape


def _check_pad(ctx, target):
    mode = ctx.attrs.get("mode", "constant")
    if mode not in _PAD_MODES:
        return f"Pad: mode {mode!r} not supported"
    if mode == "wrap" and ctx.opset < 19:
        return "Pad: mode 'wrap' needs opset 19"
    if ctx.in_shapes[0] is None:
        return "Pad: unknown input rank"
    if not target.host:
        for i, what in ((1, "pads"), (2, "constant_value"), (3, "axes")):
            if ctx.has_input(i) and ctx.const(i) is None:
                return f"Pad: the {what} input is not a constant (the CUDA kernel needs it at build time)"
    if ctx.has_input(1) and ctx.const(1) is not None:
        pads = np.asarray(ctx.const(1)).reshape(-1)
        if mode != "constant" and (pads < 0).any():
            return f"Pad: negative pads with mode {mode!r} are not supported"
        xs = ctx.in_shapes[0]
        if mode in ("reflect", "edge", "wrap") and any(d == 0 for d in xs):
            return f"Pad: mode {mode!r} cannot pad an empty axis"
    return None


def _build_pad(ctx, target):
    xs = tuple(ctx.in_shapes[0])
    rank = len(xs)
    mode = _PAD_MODES[ctx.attrs.get("mode", "constant")]
    dtype = np.dtype(ctx.in_dtypes[0])
    has_cv = ctx.has_input(2)
    has_axes = ctx.has_input(3)

    def meta(inputs):
        pads = ctx.const(1)
        if pads is None:
            pads = inputs[1]
        axes = None
        if has_axes:
            axes = ctx.const(3)
            if axes is None:
                axes = inputs[3]
        cv = None
        if has_cv:
            cv = ctx.const(2)
            if cv is None:
                cv = inputs[2]
        cval = np.zeros(1, dtype)
        if cv is not None and np.asarray(cv).size:
            cval[0] = np.asarray(cv).reshape(-1)[0]
        beg, oshape = _pad_layout(ctx, xs, pads, axes)
        if tuple(oshape) != tuple(ctx.out_shapes[0]):
            raise _err(ctx, f"output shape {tuple(ctx.out_shapes[0])} != {oshape} from the pads")
        istr = np.ones(max(rank, 1), np.int64)
        acc = 1
        for d in range(rank - 1, -1, -1):
            istr[d] = acc
            acc *= xs[d]
        return to_target(target, cval, shape_array(oshape), shape_array(xs), istr,
                         np.asarray(beg or [0], np.int64))

    static = all((not ctx.has_input(i)) or ctx.const(i) is not None for i in (1, 2, 3))
    fixed = meta(None) if static else None

    def run(inputs, outputs):
        x, out = flat(inputs[0]), flat(outputs[0])
        m = fixed if fixed is not None else meta(inputs)
        target.launch(_PAD, out.shape[0], x, out, *m, mode)

    return replayable(run) if fixed is not None else run   # else it reads the pads at every run


register("Pad", dtypes=ALL, since=11, until=28, check=_check_pad,
         note="constant/reflect/edge/wrap; pads, value and axes must be constants on CUDA")(_build_pad)


def _check_pad2(ctx, target):
    mode = ctx.attrs.get("mode", "constant")
    if mode not in _PAD_MODES or mode == "wrap":
        return f"Pad: mode {mode!r} not supported"
    xs = ctx.in_shapes[0]
    if xs is None:
        return "Pad: unknown input rank"
    pads = np.asarray(ctx.attrs.get("pads", []), np.int64).reshape(-1)
    if pads.size != 2 * len(xs):
        return f"Pad: pads has {pads.size} values, expected {2 * len(xs)}"
    if mode != "constant" and (pads < 0).any():
        return f"Pad: negative pads with mode {mode!r} are not supported"
    if mode in ("reflect", "edge") and any(d == 0 for d in xs):
        return f"Pad: mode {mode!r} cannot pad an empty axis"
    return None


class _AttrInputs:
    """A view of a Pad-2 context whose pads and value attributes read as constant inputs, so
    that the Pad-11+ build serves it unchanged."""

    def __init__(self, ctx):
        self._ctx = ctx
        dt = np.dtype(ctx.in_dtypes[0])
        self._c = {1: np.asarray(ctx.attrs.get("pads", []), np.int64),
                   2: np.asarray([ctx.attrs.get("value", 0.0)]).astype(dt)}

    def __getattr__(self, name):
        return getattr(self._ctx, name)

    def has_input(self, i):
        return i in self._c or (i == 0 and self._ctx.has_input(0))

    def const(self, i):
        return self._c.get(i)


register("Pad", dtypes=F32, since=2, until=10, check=_check_pad2,
         note="Pad-2: pads/mode/value attributes (the Pad-11 kernel)")(
    lambda ctx, target: _build_pad(_AttrInputs(ctx), target))


