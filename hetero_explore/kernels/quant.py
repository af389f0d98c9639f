"""Quantisation ops, written once for both targets: QuantizeLinear, DequantizeLinear
(per-tensor, per-axis, blocked), DynamicQuantizeLinear, MatMulInteger, ConvInteger,
QLinearMatMul, QLinearConv.

Types: quantised values int8, uint8, int16, uint16, the sub-byte integers int4/uint4/int2/uint2,
and the float formats float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz), float4e2m1, float6 (e2m3,
e3m2); int32 (DequantizeLinear input, accumulators, biases). Real values and scales: float32,
float16, bfloat16 (and float8e8m0 scales). Formats numba cannot hold go through
:func:`.floatfmt.cast_bits` on their bit patterns (exact widening; one round to nearest even
when narrowing): half x/scales are widened to float32; a sub-byte integer is quantised in the
int8/uint8 kernel with its own range and re-encoded (exact); a float format is ``float32(x /
scale)`` cast once to it (float8: ``saturate``, default 1: overflow and inf give the largest
finite value, else inf/NaN per the format; float4/float6 always saturate, NaN gives a zero);
a half output is the float32 result rounded once. Zero points of float formats follow onnx's
reference: ignored by QuantizeLinear for float8 (added for float4/float6), ignored by
DequantizeLinear for float8 and float4 (subtracted for float6). QuantizeLinear's division is
float32 unless ``precision`` (23+) says float16/bfloat16 or x and the scale are both that half
type (numpy's promotion, as the reference): then the float32 quotient is rounded to it first.
A scalar scale with a 1-element zero point (or the reverse) is per tensor.

Integer parts are exact: products and sums of (value - zero point) in int64, stored
wrapped to int32 as onnxruntime's int32 accumulators wrap, so any order gives the same
bits. Float parts, one fixed order on every target (no FMA):

* QuantizeLinear: ``q = float32(x) / scale`` (a float32 division, as onnxruntime's
  MLAS), clamped to ``[qmin - zp, qmax - zp]``, rounded half to even, then ``+ zp``:
  the same as round-then-saturate, because the bounds are integers. A NaN
  quantises to the zero point.
* DequantizeLinear: ``float32(int64(x) - zp) * scale``.
* DynamicQuantizeLinear (uint8): ``lo = min(0, min x)``, ``hi = max(0, max x)``
  (NaNs ignored; min/max are exact, so the two-stage reduction order does not
  matter), ``scale = (hi - lo) / 255`` (1 when ``hi == lo``, as onnxruntime),
  ``zp = round(clamp(-lo / scale, 0, 255))``, then QuantizeLinear.
* QLinearMatMul / QLinearConv: ``mult = (a_scale * b_scale) / y_scale``
  (per element, from the per-tensor or per-row/column/channel scales; QLinearMatMul's
  float16/bfloat16 scales: rounded to that type after the product and after the division,
  numpy's half arithmetic in onnx's reference), then
  ``float32(acc) * mult`` quantised like QuantizeLinear with ``y_zero_point``;
  QLinearConv adds its int32 bias to the accumulator first.

Per-axis and blocked scales (``axis``, ``block_size`` 21+): the scale of
element ``(outer, a, inner)`` (``a`` on the axis) is ``scale[outer*so + (a //
block)*sa + inner*si]`` with strides chosen at build time (all zero per tensor).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .common import (bcast_offset, broadcast_strides, flat, kernel_pair, node_error, prod, replayable, shape_array,
                     to_target)
from .nn import _conv_out, _conv_tap  # noqa: F401 (called from the kernel source)
from .opdef import OpList

OPS = OpList()

F = np.float32
_JIT = dict(cache=True, error_model="numpy")
M_RND = F(12582912.0)          # 1.5 * 2**23: (t + M) - M rounds |t| < 2**22 to nearest even
I32_OFF = np.int64(2 ** 31)
U32_MASK = np.int64(2 ** 32 - 1)

QTYPES = ("int8", "uint8", "int16", "uint16")
_RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535)}
_SUPPORTED_Q = ("int8, uint8, int16, uint16 (float8, int4, int2, float4, float6: no native numpy dtype; "
                "float16 scales: not yet)")


@njit(**_JIT)
def _quant(q_, zp_, lo_, hi_):
    """saturate(round_half_even(q) + zp) to [lo, hi]; NaN gives zp."""
    q = np.float32(q_)
    zp = np.int64(zp_)
    lo = np.int64(lo_)
    hi = np.int64(hi_)
    if q != q:
        return zp
    a = np.float32(lo - zp)
    b = np.float32(hi - zp)
    if q < a:
        q = a
    if q > b:
        q = b
    r = (q + M_RND) - M_RND
    return np.int64(r) + zp


@njit(**_JIT)
def _wrap32(v_):
    v = np.int64(v_)
    return ((v + I32_OFF) & U32_MASK) - I32_OFF


# ---------------------------------------------------------------------------------------------
# QuantizeLinear / DequantizeLinear
# ---------------------------------------------------------------------------------------------
_SIDX = """
inn = i % inner
tt = i // inner
a = tt % dimA
o = tt // dimA
k = o * so + (a // bs) * sa + inn * si
zp = np.int64(z[k]) if has_z == 1 else np.int64(0)
"""

_QL = kernel_pair(
    "quantize_linear", "x, s, z, has_z, out, inner, dimA, bs, so, sa, si, lo, hi",
    _SIDX + """
q = np.float32(x[i]) / s[k]
out[i] = _quant(q, zp, lo, hi)
""", module=__name__)

_DQL = kernel_pair(
    "dequantize_linear", "x, s, z, has_z, out, inner, dimA, bs, so, sa, si",
    _SIDX + """
out[i] = np.float32(np.int64(x[i]) - zp) * s[k]
""", module=__name__)


def _dt(ctx, k, outs=False):
    dts = ctx.out_dtypes if outs else ctx.in_dtypes
    if k >= len(dts) or dts[k] is None:
        return None
    return np.dtype(dts[k]).name


def _scale_layout(ctx, xs, ss, zs):
    """(inner, dimA, block, so, sa, si) for scale shape ``ss`` over x shape ``xs``; raises
    KernelError naming the node when the shapes do not fit the axis / block_size."""
    at = ctx.attrs
    rank = len(xs)
    if zs is not None and tuple(zs) != tuple(ss) and not (prod(zs) == 1 and prod(ss) == 1 and len(zs) <= 1
                                                          and len(ss) <= 1):
        # a scalar and a 1-element vector are both per tensor (onnx's reference reads either)
        raise node_error(ctx, f"zero point shape {tuple(zs)} differs from the scale shape {tuple(ss)}")
    n_s = prod(ss)
    bs = int(at.get("block_size", 0))
    if bs < 0:
        raise node_error(ctx, f"block_size={bs} must be >= 0")
    if rank == 0 or (n_s == 1 and len(ss) <= 1 and bs == 0):
        return 1, 1, 1, 0, 0, 0
    axis = int(at.get("axis", 1))
    if not -rank <= axis < rank:
        raise node_error(ctx, f"axis={axis} is out of range for rank {rank}")
    axis %= rank
    dimA = int(xs[axis])
    inner = prod(xs[axis + 1:])
    if bs == 0:
        if tuple(ss) != (dimA,):
            raise node_error(ctx, f"per-axis scale must have shape ({dimA},) for axis {axis} of {tuple(xs)}, "
                                  f"got {tuple(ss)}")
        return inner, dimA, 1, 0, 1, 0
    nb = -(-dimA // bs)
    want = tuple(xs[:axis]) + (nb,) + tuple(xs[axis + 1:])
    if tuple(ss) != want:
        raise node_error(ctx, f"blocked scale must have shape {want} (block_size={bs} on axis {axis} of "
                              f"{tuple(xs)}), got {tuple(ss)}")
    return inner, dimA, bs, nb * inner, inner, 1


#: sub-byte integer formats: computed in the int8/uint8 kernels, then re-encoded (exact)
SUB_INT = {"int4": ("int8", -8, 7), "uint4": ("uint8", 0, 15), "int2": ("int8", -2, 1), "uint2": ("uint8", 0, 3)}
#: float quantised formats (float8, float4, float6): q = x / scale in float32, one cast to the format
FLOAT_Q = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float4_e2m1fn",
           "float6_e2m3fn", "float6_e3m2fn")
_FLOAT8 = FLOAT_Q[:4]
ALL_Q = QTYPES + tuple(SUB_INT) + FLOAT_Q
HALF = ("float16", "bfloat16")
#: scale dtypes (widened to float32 exactly before use)
SCALE_DT = ("float32",) + HALF + ("float8_e8m0fnu",)
_PRECISION = {1: "float32", 10: "float16", 16: "bfloat16"}   # QuantizeLinear-23 ``precision``

_KIDX = """
inn = i % inner
tt = i // inner
a = tt % dimA
o = tt // dimA
k = o * so + (a // bs) * sa + inn * si
"""

# q = x / scale (+ float zero point: float4/float6 outputs, as onnx's reference), float32
_QDIV = kernel_pair(
    "quantize_div", "x, s, z, addz, out, inner, dimA, bs, so, sa, si",
    _KIDX + """
v = x[i] / s[k]
if addz == 1:
    v = v + z[k]
out[i] = v
""", module=__name__)

# y = (x - zp) * scale for x already widened to float32 (float formats)
_DQF = kernel_pair(
    "dequantize_float", "x, s, z, has_z, out, inner, dimA, bs, so, sa, si",
    _KIDX + """
v = x[i]
if has_z == 1:
    v = v - z[k]
out[i] = v * s[k]
""", module=__name__)


def _cast_pair():
    from .elementwise import _CAST_BITS
    return _CAST_BITS


def _fmt_args(src, dst):
    from . import floatfmt
    return tuple(np.int64(v) for v in floatfmt.fmt(src) + floatfmt.fmt(dst))


def _recode(target, a, src, dst, out, saturate=False):
    """``out`` (dtype ``dst``) = ``a`` (dtype ``src``) converted on the bit patterns
    (floatfmt.cast_bits: one round to nearest even, ONNX's saturate rules)."""
    from . import floatfmt
    from .common import bits
    a, out = flat(a), flat(out)
    # as many items as the source has: a scratch ``out`` holds at least one (see _temp)
    target.launch(_cast_pair(), min(a.shape[0], out.shape[0]), bits(a), bits(out), *_fmt_args(src, dst),
                  bool(saturate), np.int64(floatfmt.ROUND_NEAREST))


def _temp(target, n, dt):
    a = np.empty(max(1, n), dt)
    return a if target.host else target.to_device(a)


def _widen(target, a, dt, to="float32"):
    """``a`` as ``to`` (itself when it already is): exact for every use here."""
    if dt == to:
        return flat(a)
    t = _temp(target, a.size, to)
    _recode(target, a, dt, to, t)
    return t


def _zp_dt(ctx):
    return _dt(ctx, 2) if ctx.has_input(2) and len(ctx.in_dtypes) > 2 else None


def _div_precision(ctx):
    """dtype name of QuantizeLinear's division: ``precision`` (23+), else the half type of x and
    the scale when both are that type (numpy's promotion, as onnx's reference), else float32."""
    prec = int(ctx.attrs.get("precision", 0))
    if prec:
        return _PRECISION.get(prec)
    xdt, sdt = _dt(ctx, 0), _dt(ctx, 1)
    return xdt if xdt == sdt and xdt in HALF else "float32"


def _fast(ctx):
    """The fused int kernels apply: float32/int32 x, float32 scale and division, native int types."""
    op = ctx.node.op_type
    if _dt(ctx, 1) != "float32":
        return False
    if op == "QuantizeLinear":
        return (_dt(ctx, 0) in ("float32", "int32") and _div_precision(ctx) == "float32"
                and _dt(ctx, 0, outs=True) in QTYPES)
    return _dt(ctx, 0) in QTYPES + ("int32",) and _dt(ctx, 0, outs=True) == "float32"


def _check_q(ctx, target):
    from ..ir.errors import KernelError
    op = ctx.node.op_type
    if any(ctx.in_shapes[k] is None for k in range(min(2, len(ctx.in_shapes)))):
        return f"{op}: x and the scale need known shapes"
    sdt = _dt(ctx, 1)
    if sdt not in SCALE_DT:
        return f"{op}: scale dtype {sdt} not supported ({', '.join(SCALE_DT)})"
    xdt, zdt = _dt(ctx, 0), _zp_dt(ctx)
    if op == "QuantizeLinear":
        prec = int(ctx.attrs.get("precision", 0))
        if prec and prec not in _PRECISION:
            return f"QuantizeLinear: precision={prec} not supported (float32, float16, bfloat16)"
        if xdt == "int32" and (sdt != "float32" or prec not in (0, 1)):
            return "QuantizeLinear: int32 x needs a float32 scale and float32 precision"
        if xdt not in ("float32", "int32") + HALF:
            return f"QuantizeLinear: x dtype {xdt} not supported (float32, float16, bfloat16, int32)"
        qdt = _dt(ctx, 0, outs=True)
        if qdt not in ALL_Q:
            return f"QuantizeLinear: output dtype {qdt} not supported ({', '.join(ALL_Q)})"
        if xdt == "int32" and qdt in FLOAT_Q:
            return f"QuantizeLinear: int32 x to {qdt} not supported (float x for float formats)"
        if zdt is not None and zdt != qdt:
            return f"QuantizeLinear: zero point dtype {zdt} differs from the output dtype {qdt}"
    else:
        odt = _dt(ctx, 0, outs=True)
        if odt not in ("float32",) + HALF:
            return f"DequantizeLinear: output dtype {odt} not supported (float32, float16, bfloat16)"
        if xdt not in ALL_Q + ("int32",):
            return f"DequantizeLinear: x dtype {xdt} not supported ({', '.join(ALL_Q)}, int32)"
        if zdt is not None and zdt != xdt:
            return "DequantizeLinear: zero point dtype differs from x"
    try:
        zs = ctx.in_shapes[2] if ctx.has_input(2) and len(ctx.in_shapes) > 2 else None
        _scale_layout(ctx, ctx.in_shapes[0], ctx.in_shapes[1], zs)
    except KernelError as e:
        return str(e)
    return None


def _build_ql(ctx, target):
    op = ctx.node.op_type
    xs, ss = tuple(ctx.in_shapes[0]), tuple(ctx.in_shapes[1])
    has_z = ctx.has_input(2)
    zs = ctx.in_shapes[2] if has_z else None
    layout = _scale_layout(ctx, xs, ss, zs)
    dummy = to_target(target, np.zeros(1, np.int32))
    fdummy = to_target(target, np.zeros(1, np.float32))
    n, n_s = prod(xs), prod(ss)
    xdt, sdt = _dt(ctx, 0), _dt(ctx, 1)
    odt = _dt(ctx, 0, outs=True)
    fast = _fast(ctx)
    if op == "QuantizeLinear":
        qdt = odt
        prec = _div_precision(ctx)
        kdt, lo, hi = SUB_INT.get(qdt, (qdt,) + _RANGE.get(qdt, (0, 0)))
        # float8 outputs ignore the zero point, float4/float6 add it (onnx's reference)
        addz = 1 if (qdt in FLOAT_Q and qdt not in _FLOAT8 and has_z) else 0
        sat = bool(ctx.attrs.get("saturate", 1)) if qdt in _FLOAT8 else True
        ones = to_target(target, np.ones(max(1, n_s), np.float32))
    else:
        qdt = xdt
        kdt = SUB_INT[qdt][0] if qdt in SUB_INT else qdt
        # float8 / float4 inputs ignore the zero point (onnx's reference requires float8 ones to be 0)
        dq_z = has_z and not (qdt in _FLOAT8 or qdt == "float4_e2m1fn")

    def zero_point(inputs, to):
        if not has_z or inputs[2] is None:
            return None
        return _widen(target, inputs[2], qdt, to)

    def run(inputs, outputs):
        x, s, out = flat(inputs[0]), flat(inputs[1]), flat(outputs[0])
        if fast:
            z = flat(inputs[2]) if has_z and inputs[2] is not None else dummy
            hz = 1 if has_z and inputs[2] is not None else 0
            if op == "QuantizeLinear":
                target.launch(_QL, n, x, s, z, hz, out, *layout, lo, hi)
            else:
                target.launch(_DQL, n, x, s, z, hz, out, *layout)
            return
        s32 = _widen(target, s, sdt)
        if op == "QuantizeLinear":
            x32 = _widen(target, x, xdt) if xdt != "int32" else x
            if qdt in FLOAT_Q:
                zf = zero_point(inputs, "float32") if addz else None
                q = _temp(target, n, np.float32)
                target.launch(_QDIV, n, x32, s32, fdummy, 0, q, *layout)
                if prec != "float32":
                    _round_to(target, q, prec, n)
                if zf is not None:
                    target.launch(_QDIV, n, q, ones, zf, 1, q, *layout)
                _recode(target, q, "float32", qdt, out, saturate=sat)
                return
            z = zero_point(inputs, kdt)
            hz = 0 if z is None else 1
            z = dummy if z is None else z
            dst = out if kdt == qdt else _temp(target, n, kdt)
            if prec != "float32":
                q = _temp(target, n, np.float32)
                target.launch(_QDIV, n, x32, s32, fdummy, 0, q, *layout)
                _round_to(target, q, prec, n)
                target.launch(_QL, n, q, ones, z, hz, dst, *layout, lo, hi)
            else:
                target.launch(_QL, n, x32, s32, z, hz, dst, *layout, lo, hi)
            if kdt != qdt:
                _recode(target, dst, kdt, qdt, out)
            return
        y = out if odt == "float32" else _temp(target, n, np.float32)
        if qdt in FLOAT_Q:
            x32 = _widen(target, x, qdt)
            zf = zero_point(inputs, "float32") if dq_z else None
            target.launch(_DQF, n, x32, s32, fdummy if zf is None else zf, 0 if zf is None else 1, y, *layout)
        else:
            xi = _widen(target, x, qdt, kdt)
            z = zero_point(inputs, kdt)
            target.launch(_DQL, n, xi, s32, dummy if z is None else z, 0 if z is None else 1, y, *layout)
        if odt != "float32":
            _recode(target, y, "float32", odt, out)

    return replayable(run) if fast else run   # the fused kernels: launches only


def _round_to(target, q, dt, n):
    """Round the float32 values of ``q`` in place to ``dt`` (float16/bfloat16) precision."""
    h = _temp(target, n, np.uint16)
    _recode(target, q, "float32", dt, h)
    _recode(target, h, dt, "float32", q)


_QNOTE = ("per-tensor, per-axis, blocked (21+); q = x / scale in float32 (float16/bfloat16 when x and the "
          "scale are, or per `precision`); ints: round half to even, + zp, saturate (int8/uint8/int16/uint16, "
          "int4/uint4/int2/uint2); float8/float4/float6: one round to nearest even to the format, float8 "
          "`saturate`, float8 zero points ignored, float4/float6 ones added (onnx's reference)")
_DQNOTE = ("per-tensor, per-axis, blocked (21+); float32(x - zp) * scale (float8/float4 zero points ignored, "
           "as onnx's reference), rounded once to a float16/bfloat16 output")
_K = (_QL, _DQL, _QDIV, _DQF)
OPS.add("QuantizeLinear", _build_ql, since=10, until=28, dtypes=("float32", "int32") + HALF, check=_check_q,
        note=_QNOTE, kernels=_K)
OPS.add("DequantizeLinear", _build_ql, since=10, until=28, dtypes=ALL_Q + ("int32",), check=_check_q,
        note=_DQNOTE, kernels=_K)

# ---------------------------------------------------------------------------------------------
# DynamicQuantizeLinear
# ---------------------------------------------------------------------------------------------
_CHUNK = 1024

_DYN_PART = kernel_pair(
    "dynq_part", "x, n, ch, mn, mx, parts",
    """
lo = np.float32(0)
hi = np.float32(0)
end = min(n, (i + 1) * ch)
for k in range(i * ch, end):
    v = x[k]
    if v < lo:
        lo = v
    if v > hi:
        hi = v
mn[i] = lo
mx[i] = hi
""", count="parts", module=__name__)

_DYN_PARAMS = kernel_pair(
    "dynq_params", "mn, mx, parts, scale, zp, one",
    """
lo = np.float32(0)
hi = np.float32(0)
for k in range(parts):
    if mn[k] < lo:
        lo = mn[k]
    if mx[k] > hi:
        hi = mx[k]
sc = np.float32(1) if hi == lo else (hi - lo) / np.float32(255)
scale[0] = sc
zp[0] = _quant(-lo / sc, 0, 0, 255)
""", count="one", module=__name__)

_DYN_Q = kernel_pair(
    "dynq_apply", "x, scale, zp, out",
    """
out[i] = _quant(x[i] / scale[0], zp[0], 0, 255)
""", module=__name__)


def _check_dyn(ctx, target):
    if ctx.in_shapes[0] is None:
        return "DynamicQuantizeLinear: x needs a known shape"
    return None


def _build_dyn(ctx, target):
    n = prod(ctx.in_shapes[0])
    parts = max(1, -(-n // _CHUNK))
    mn, mx = to_target(target, np.zeros(parts, np.float32), np.zeros(parts, np.float32))
    sc_tmp, zp_tmp = to_target(target, np.zeros(1, np.float32), np.zeros(1, np.uint8))

    @replayable
    def run(inputs, outputs):
        x = flat(inputs[0])
        outs = list(outputs) + [None] * (3 - len(outputs))
        scale = flat(outs[1]) if outs[1] is not None else sc_tmp
        zp = flat(outs[2]) if outs[2] is not None else zp_tmp
        target.launch(_DYN_PART, parts, x, n, _CHUNK, mn, mx, parts)
        target.launch(_DYN_PARAMS, 1, mn, mx, parts, scale, zp, 1)
        if outs[0] is not None:
            target.launch(_DYN_Q, n, x, scale, zp, flat(outs[0]))

    return run


OPS.add("DynamicQuantizeLinear", _build_dyn, since=11, until=28, dtypes=("float32",), check=_check_dyn,
        note="uint8; range includes 0, NaNs ignored; scale = (max - min) / 255 (1 if equal); "
             "zp = round(clamp(-min / scale, 0, 255)); then QuantizeLinear",
        kernels=(_DYN_PART, _DYN_PARAMS, _DYN_Q))

# ---------------------------------------------------------------------------------------------
# MatMulInteger / QLinearMatMul
# ---------------------------------------------------------------------------------------------
# per output element: acc = sum_k (a[m, k] - azp[m]) * (b[k, n] - bzp[n]), k ascending, int64,
# wrapped to int32. mode 0: int32 output; mode 1: quantised output (QLinearMatMul).
_IMM = kernel_pair(
    "matmul_integer",
    "a, b, azp, sazp, bzp, sbzp, out, M, K, N, bshape, sa, sb, mode, mult, sas, sbs, nn, yzp, lo, hi",
    """
MN = M * N
bt = i // MN
r = i - bt * MN
m = r // N
n = r - m * N
a0 = bcast_offset(bt, bshape, sa) + m * K
b0 = bcast_offset(bt, bshape, sb) + n
za = np.int64(azp[m * sazp])
zb = np.int64(bzp[n * sbzp])
acc = np.int64(0)
for k in range(K):
    acc += (np.int64(a[a0 + k]) - za) * (np.int64(b[b0 + k * N]) - zb)
acc = _wrap32(acc)
if mode == 0:
    out[i] = acc
else:
    out[i] = _quant(np.float32(acc) * mult[m * sas * nn + n * sbs], np.int64(yzp[0]), lo, hi)
""", module=__name__)

# QLinearMatMul's multipliers, one per (row, column) of the per-tensor/per-row/per-column scales:
# mode 0: (a_scale * b_scale) / y_scale; modes 1 and 2 split it (a * b, then / y) for half scales,
# whose build rounds to the half type after each step (numpy's float16 arithmetic, as onnx's reference)
_QMULT = kernel_pair(
    "qlinear_mult", "a, sas, b, sbs, y, mode, out, nn",
    """
m = i // nn
n = i - m * nn
if mode == 0:
    out[i] = (a[m * sas] * b[n * sbs]) / y[0]
elif mode == 1:
    out[i] = a[m * sas] * b[n * sbs]
else:
    out[i] = out[i] / y[0]
""", module=__name__)


def _zp_stride(ctx, k, n, what):
    """Stride (0 or 1) of a per-tensor or per-row/column (length n) zero point / scale at input k."""
    if not ctx.has_input(k) or k >= len(ctx.in_shapes):
        return 0
    s = ctx.in_shapes[k]
    if s is None:
        raise node_error(ctx, f"{what} needs a known shape")
    c = prod(s)
    if c == 1 and len(s) <= 1:
        return 0
    if tuple(s) == (n,) and n > 1:
        return 1
    raise node_error(ctx, f"{what} has shape {tuple(s)}: expected a scalar or ({n},)")


def _mm_dims(ctx, ai, bi):
    sa, sb = ctx.in_shapes[ai], ctx.in_shapes[bi]
    if sa is None or sb is None or len(sa) == 0 or len(sb) == 0:
        raise node_error(ctx, "A and B need known shapes of rank >= 1")
    sa, sb = tuple(sa), tuple(sb)
    a2 = (1,) + sa if len(sa) == 1 else sa
    b2 = sb + (1,) if len(sb) == 1 else sb
    M, K = a2[-2], a2[-1]
    K2, N = b2[-2], b2[-1]
    if K != K2:
        raise node_error(ctx, f"inner dimensions differ: {sa} x {sb}")
    obatch = tuple(np.broadcast_shapes(a2[:-2], b2[:-2]))
    meta = (shape_array(obatch), broadcast_strides(a2[:-2], obatch) * (M * K),
            broadcast_strides(b2[:-2], obatch) * (K * N))
    return M, K, N, meta


_QIN = {"MatMulInteger": (0, 1, 2, 3), "QLinearMatMul": (0, 3, 2, 5)}   # a, b, azp, bzp


def _check_mm(ctx, target):
    from ..ir.errors import KernelError
    op = ctx.node.op_type
    ai, bi, zai, zbi = _QIN[op]
    for k in (ai, bi):
        if _dt(ctx, k) not in ("int8", "uint8"):
            return f"{op}: input {k} dtype {_dt(ctx, k)} not supported (int8, uint8)"
    for k, ref in ((zai, ai), (zbi, bi)):
        if ctx.has_input(k) and _dt(ctx, k) != _dt(ctx, ref):
            return f"{op}: zero point {k} dtype differs from its tensor"
    try:
        M, K, N, _ = _mm_dims(ctx, ai, bi)
        _zp_stride(ctx, zai, M, "a_zero_point")
        _zp_stride(ctx, zbi, N, "b_zero_point")
        if op == "QLinearMatMul":
            sdts = {_dt(ctx, k) for k in (1, 4, 6)}
            if len(sdts) != 1 or not sdts <= {"float32", "float16", "bfloat16"}:
                return (f"QLinearMatMul: scale dtypes {sorted(map(str, sdts))} not supported (all float32, "
                        "all float16 or all bfloat16)")
            _zp_stride(ctx, 1, M, "a_scale")
            _zp_stride(ctx, 4, N, "b_scale")
            _zp_stride(ctx, 6, 1, "y_scale")
            _zp_stride(ctx, 7, 1, "y_zero_point")
            if _dt(ctx, 0, outs=True) not in ("int8", "uint8"):
                return f"QLinearMatMul: output dtype {_dt(ctx, 0, outs=True)} not supported"
    except KernelError as e:
        return str(e)
    return None


def _build_mm(ctx, target):
    op = ctx.node.op_type
    ai, bi, zai, zbi = _QIN[op]
    M, K, N, meta = _mm_dims(ctx, ai, bi)
    sz_a = _zp_stride(ctx, zai, M, "a_zero_point")
    sz_b = _zp_stride(ctx, zbi, N, "b_zero_point")
    meta = to_target(target, *meta)
    zero = to_target(target, np.zeros(1, np.int32))
    one = to_target(target, np.ones(1, np.float32))
    if op == "QLinearMatMul":
        s_as, s_bs = _zp_stride(ctx, 1, M, "a_scale"), _zp_stride(ctx, 4, N, "b_scale")
        lo, hi = _RANGE[_dt(ctx, 0, outs=True)]
        sdt = _dt(ctx, 1)
        nn = N if s_bs else 1
        nm = (M if s_as else 1) * nn

    def run(inputs, outputs):
        a, b, out = flat(inputs[ai]), flat(inputs[bi]), flat(outputs[0])
        za = flat(inputs[zai]) if zai < len(inputs) and inputs[zai] is not None else zero
        zb = flat(inputs[zbi]) if zbi < len(inputs) and inputs[zbi] is not None else zero
        if op == "MatMulInteger":
            q = (0, one, 0, 0, 1, zero, 0, 0)
        else:
            sa_, sb_, sy_ = (_widen(target, inputs[k], sdt) for k in (1, 4, 6))
            mult = _temp(target, nm, np.float32)
            if sdt == "float32":
                target.launch(_QMULT, nm, sa_, s_as, sb_, s_bs, sy_, 0, mult, nn)
            else:
                target.launch(_QMULT, nm, sa_, s_as, sb_, s_bs, sy_, 1, mult, nn)
                _round_to(target, mult, sdt, nm)
                target.launch(_QMULT, nm, sa_, s_as, sb_, s_bs, sy_, 2, mult, nn)
                _round_to(target, mult, sdt, nm)
            q = (1, mult, s_as, s_bs, nn, flat(inputs[7]), lo, hi)
        target.launch(_IMM, out.shape[0], a, b, za, sz_a, zb, sz_b, out, M, K, N, *meta, *q)

    return replayable(run) if op == "MatMulInteger" else run   # QLinearMatMul widens its scales per run


OPS.add("MatMulInteger", _build_mm, since=10, until=28, dtypes=("int8", "uint8"), check=_check_mm,
        note="int32 = sum (a - azp)(b - bzp), exact; zero points per tensor or per row/column",
        kernels=(_IMM,))
OPS.add("QLinearMatMul", _build_mm, since=10, until=21, dtypes=("int8", "uint8"), check=_check_mm,
        note="exact int32 accumulator, then float32(acc) * ((a_scale * b_scale) / y_scale), round half "
             "to even, + y_zp, saturate; float32 scales, or float16/bfloat16 ones with the multiplier "
             "rounded to that type after each step (as numpy's arithmetic in onnx's reference)",
        kernels=(_IMM, _QMULT))

# ---------------------------------------------------------------------------------------------
# ConvInteger / QLinearConv (1-, 2- and 3-D)
# ---------------------------------------------------------------------------------------------
# p: nn.conv_geometry's array; the taps are nn's Conv walk (_conv_out, _conv_tap), padding
# taps skipped (a padded x is the zero point, whose product is 0)
_ICONV = kernel_pair(
    "conv_integer",
    "x, w, xzp, wzp, swz, bias, has_b, p, out, mode, xs_, ws_, sws, ys_, yzp, lo, hi",
    """
nn_, m, od, oh, ow = _conv_out(i, p)
C = p[1]
M = p[4]
KH = p[5]
KW = p[6]
KD = p[17]
G = p[15]
Cg = C // G
g = m // (M // G)
zx = np.int64(xzp[0])
zw = np.int64(wzp[m * swz])
acc = np.int64(0)
for c in range(Cg):
    wb = (m * Cg + c) * KD * KH * KW
    for kd in range(KD):
        for kh in range(KH):
            for kw in range(KW):
                o = _conv_tap(p, nn_, g * Cg + c, od, oh, ow, kd, kh, kw)
                if o >= 0:
                    acc += (np.int64(x[o]) - zx) * (np.int64(w[wb + (kd * KH + kh) * KW + kw]) - zw)
if has_b == 1:
    acc += np.int64(bias[m])
acc = _wrap32(acc)
if mode == 0:
    out[i] = acc
else:
    mult = (xs_[0] * ws_[m * sws]) / ys_[0]
    out[i] = _quant(np.float32(acc) * mult, np.int64(yzp[0]), lo, hi)
""", module=__name__)

_CIN = {"ConvInteger": (0, 1, 2, 3, None), "QLinearConv": (0, 3, 2, 5, 8)}   # x, w, xzp, wzp, bias


def _conv_geometry(ctx, xi, wi):
    from .nn import conv_geometry
    xs, ws, ys = ctx.in_shapes[xi], ctx.in_shapes[wi], ctx.out_shapes[0] if ctx.out_shapes else None
    op = ctx.node.op_type
    if xs is None or ws is None or ys is None or len(xs) not in (3, 4, 5) or len(ws) != len(xs):
        raise node_error(ctx, f"{op}: 1-D, 2-D and 3-D inputs (N, C, D1[, D2[, D3]]) with known shapes only")
    ap = ctx.attrs.get("auto_pad", "NOTSET")
    ap = ap.decode() if isinstance(ap, bytes) else ap
    if ap not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise node_error(ctx, f"auto_pad {ap!r} not supported")
    return conv_geometry(ctx, xs, ws, ys)


def _check_conv(ctx, target):
    from ..ir.errors import KernelError
    op = ctx.node.op_type
    xi, wi, zxi, zwi, bi = _CIN[op]
    for k in (xi, wi):
        if _dt(ctx, k) not in ("int8", "uint8"):
            return f"{op}: input {k} dtype {_dt(ctx, k)} not supported (int8, uint8)"
    try:
        p = _conv_geometry(ctx, xi, wi)
        _zp_stride(ctx, zxi, 1, "x_zero_point")
        _zp_stride(ctx, zwi, int(p[4]), "w_zero_point")
        if op == "QLinearConv":
            for k in (1, 4, 6):
                if _dt(ctx, k) != "float32":
                    return f"QLinearConv: scale {k} dtype {_dt(ctx, k)} not supported (float32)"
            _zp_stride(ctx, 1, 1, "x_scale")
            _zp_stride(ctx, 4, int(p[4]), "w_scale")
            _zp_stride(ctx, 6, 1, "y_scale")
            _zp_stride(ctx, 7, 1, "y_zero_point")
            if ctx.has_input(8) and _dt(ctx, 8) != "int32":
                return "QLinearConv: bias must be int32"
            if _dt(ctx, 0, outs=True) not in ("int8", "uint8"):
                return f"QLinearConv: output dtype {_dt(ctx, 0, outs=True)} not supported"
    except KernelError as e:
        return str(e)
    return None


def _build_conv(ctx, target):
    op = ctx.node.op_type
    xi, wi, zxi, zwi, bi = _CIN[op]
    p = _conv_geometry(ctx, xi, wi)
    swz = _zp_stride(ctx, zwi, int(p[4]), "w_zero_point")
    p = to_target(target, p)
    zero = to_target(target, np.zeros(1, np.int32))
    one = to_target(target, np.ones(1, np.float32))
    has_b = 1 if bi is not None and ctx.has_input(bi) else 0
    if op == "QLinearConv":
        sws = _zp_stride(ctx, 4, int(ctx.in_shapes[wi][0]), "w_scale")
        lo, hi = _RANGE[_dt(ctx, 0, outs=True)]

    @replayable
    def run(inputs, outputs):
        x, w, out = flat(inputs[xi]), flat(inputs[wi]), flat(outputs[0])
        zx = flat(inputs[zxi]) if zxi < len(inputs) and inputs[zxi] is not None else zero
        zw = flat(inputs[zwi]) if zwi < len(inputs) and inputs[zwi] is not None else zero
        b = flat(inputs[bi]) if has_b else zero
        if op == "ConvInteger":
            q = (0, one, one, 0, one, zero, 0, 0)
        else:
            q = (1, flat(inputs[1]), flat(inputs[4]), sws, flat(inputs[6]), flat(inputs[7]), lo, hi)
        target.launch(_ICONV, out.shape[0], x, w, zx, zw, swz, b, has_b, p, out, *q)

    return run


OPS.add("ConvInteger", _build_conv, since=10, until=28, dtypes=("int8", "uint8"), check=_check_conv,
        note="1-3 spatial dims; int32 = sum over taps of (x - xzp)(w - wzp[m]), exact; padding is the zero point",
        kernels=(_ICONV,))
OPS.add("QLinearConv", _build_conv, since=10, until=28, dtypes=("int8", "uint8"), check=_check_conv,
        note="1-3 spatial dims; exact int32 accumulator + bias, then float32(acc) * ((x_scale * w_scale[m]) / "
             "y_scale), round half to even, + y_zp, saturate", kernels=(_ICONV,))
