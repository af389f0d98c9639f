"""onnxruntime's QOperator ops (com.microsoft): each is DequantizeLinear of its quantised inputs,
the standard float op, and QuantizeLinear to its output scale and zero point -- the standard
kernels, step by step (:mod:`.compose`).

* QLinearAdd / QLinearMul (A, A_scale, A_zp, B, B_scale, B_zp, C_scale[, C_zp]): Add / Mul.
* QLinearSigmoid / QLinearLeakyRelu (X, X_scale, X_zp, Y_scale[, Y_zp]; alpha): Sigmoid /
  LeakyRelu.
* QLinearGlobalAveragePool / QLinearAveragePool (X, x_scale, x_zp, y_scale, y_zp;
  ``channels_last``): GlobalAveragePool / AveragePool (channels-last: transposed to NCHW and
  back).
* QLinearConcat (Y_scale, Y_zp, then X, X_scale, X_zp per input; axis): Concat.
* QLinearSoftmax (X, X_scale, x_zp, y_scale, y_zp; axis, opset): Softmax of that opset.
* QuantizeLinear / DequantizeLinear (com.microsoft 1): the standard ops (int8, uint8, int16,
  uint16, int4, uint4; per tensor or per ``axis``).

onnxruntime computes some of these with integer or lookup-table shortcuts (QLinearAdd with
the scale ratios, QLinearSigmoid with a 256-entry table of the same float function, pools with
integer sums): a quantised output can then differ from onnxruntime's by one unit where the
float result sits at a rounding boundary.
"""

from __future__ import annotations

import numpy as np

from . import MS
from ..opdef import OpList
from .compose import Flow, flow_op, standard_output_types
from .norms import _dt, _types

OPS = OpList()
_Q = (np.dtype(np.uint8), np.dtype(np.int8))


def _deq(f, x, s, z, tag):
    y = f.temp(tag, f.shape(x))
    f.step("DequantizeLinear", [x, s, z or ""], [y])
    return y


def _quant(f, y, s, z, out, qdt):
    """QuantizeLinear(y, s, z) into out, with a zero zero point of the output's type when z is absent."""
    if not z:
        z = f.const("zp_default", np.zeros((), qdt))
    f.step("QuantizeLinear", [y, s, z], [out])


def _opt(f, i):
    return f"in{i}" if f.has(f"in{i}") else ""


def _binary_plan(ctx):
    op = ctx.node.op_type
    f = Flow(ctx)
    for i in (0, 1, 3, 4, 6):
        if not f.has(f"in{i}"):
            return f"{op}: A, B and the scales need known shapes"
    if f.dtype("in0") not in _Q or f.dtype("in3") != f.dtype("in0"):
        return f"{op}: A and B must both be uint8 or both int8"
    if not f.has("out0"):
        return f"{op}: output shape unknown"
    a = _deq(f, "in0", "in1", _opt(f, 2), "a_f")
    b = _deq(f, "in3", "in4", _opt(f, 5), "b_f")
    y = f.temp("y_f", f.shape("out0"))
    f.step("Add" if op == "QLinearAdd" else "Mul", [a, b], [y])
    _quant(f, y, "in6", _opt(f, 7), "out0", f.dtype("in0"))
    return f


def _binary_types(ctx):
    a, b = ctx.in_shapes[0], ctx.in_shapes[3] if len(ctx.in_shapes) > 3 else None
    if a is None or b is None:
        return [None]
    try:
        return [(tuple(np.broadcast_shapes(tuple(a), tuple(b))), _dt(ctx, 0))]
    except ValueError:
        return [None]


_c, _b = flow_op(_binary_plan)
for _op, _f in (("QLinearAdd", "Add"), ("QLinearMul", "Mul")):
    OPS.add(_op, _b, domain=MS, since=1, until=1, dtypes=("uint8", "int8"), check=_c, **_types(_binary_types),
            note=f"DequantizeLinear A and B, {_f}, QuantizeLinear(C_scale, C_zp)")


# -- unary: Sigmoid, LeakyRelu, Softmax, pools ------------------------------------------------
_UNARY = {"QLinearSigmoid": "Sigmoid", "QLinearLeakyRelu": "LeakyRelu", "QLinearSoftmax": "Softmax",
          "QLinearGlobalAveragePool": "GlobalAveragePool", "QLinearAveragePool": "AveragePool"}
_POOL_ATTRS = ("auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides", "dilations")


def _unary_std(ctx):
    """(standard op, its attributes, its opset) of a unary QLinear op."""
    op = ctx.node.op_type
    a = ctx.attrs
    if op == "QLinearLeakyRelu":
        return "LeakyRelu", {"alpha": float(a.get("alpha", 0.01))}, 21
    if op == "QLinearSoftmax":
        return "Softmax", {"axis": int(a.get("axis", -1))}, 13 if int(a.get("opset", 13)) >= 13 else 11
    if op == "QLinearAveragePool":
        return "AveragePool", {k: a[k] for k in _POOL_ATTRS if k in a}, 21
    return _UNARY[op], {}, 21


def _unary_types(ctx):
    op = ctx.node.op_type
    xs = ctx.in_shapes[0]
    if xs is None:
        return [None]
    if op in ("QLinearGlobalAveragePool", "QLinearAveragePool"):
        last = int(ctx.attrs.get("channels_last", 0))
        if op == "QLinearGlobalAveragePool":
            s = (xs[0],) + (1,) * (len(xs) - 2) + (xs[-1],) if last else tuple(xs[:2]) + (1,) * (len(xs) - 2)
            return [(s, _dt(ctx, 0))]
        std, attrs, opset = _unary_std(ctx)
        nchw = (xs[0], xs[-1]) + tuple(xs[1:-1]) if last else tuple(xs)
        r = standard_output_types(_with_shape(ctx, nchw), std, attrs, n_inputs=1, opset=opset)
        if r[0] is None:
            return [None]
        s = r[0][0]
        if last:
            s = (s[0],) + tuple(s[2:]) + (s[1],)
        return [(s, _dt(ctx, 0))]
    return [(tuple(xs), _dt(ctx, 0))]


def _with_shape(ctx, shape):
    import dataclasses
    return dataclasses.replace(ctx, in_shapes=[tuple(shape)] + list(ctx.in_shapes[1:]),
                               in_dtypes=[np.dtype(np.float32)] + list(ctx.in_dtypes[1:]))


def _unary_plan(ctx):
    op = ctx.node.op_type
    f = Flow(ctx)
    if not f.has("in0") or not f.has("in1") or not f.has("in3") or not f.has("out0"):
        return f"{op}: X, X_scale, Y_scale and Y need known shapes"
    if f.dtype("in0") not in _Q:
        return f"{op}: X must be uint8 or int8"
    std, attrs, opset = _unary_std(ctx)
    x = _deq(f, "in0", "in1", _opt(f, 2), "x_f")
    last = int(ctx.attrs.get("channels_last", 0)) and op in ("QLinearGlobalAveragePool", "QLinearAveragePool")
    ys = f.shape("out0")
    if last:
        xs = f.shape("in0")
        r = len(xs)
        to_first = [0, r - 1] + list(range(1, r - 1))
        to_last = [0] + list(range(2, r)) + [1]
        xt = f.temp("x_nchw", tuple(xs[p] for p in to_first))
        f.step("Transpose", [x], [xt], perm=to_first)
        yt = f.temp("y_nchw", (ys[0], ys[-1]) + tuple(ys[1:-1]))
        f.step(std, [xt], [yt], opset=opset, **attrs)
        y = f.temp("y_f", ys)
        f.step("Transpose", [yt], [y], perm=to_last)
    else:
        y = f.temp("y_f", ys)
        f.step(std, [x], [y], opset=opset, **attrs)
    _quant(f, y, "in3", _opt(f, 4), "out0", f.dtype("in0"))
    return f


_c, _b = flow_op(_unary_plan)
for _op, _f in _UNARY.items():
    OPS.add(_op, _b, domain=MS, since=1, until=1, dtypes=("uint8", "int8"), check=_c, **_types(_unary_types),
            note=f"DequantizeLinear, {_f}, QuantizeLinear")


# -- QLinearConcat ----------------------------------------------------------------------------
def _concat_types(ctx):
    xs = [ctx.in_shapes[i] for i in range(2, len(ctx.in_shapes), 3)]
    if not xs or any(s is None for s in xs):
        return [None]
    ax = int(ctx.attrs.get("axis", 0)) % len(xs[0])
    out = list(xs[0])
    out[ax] = sum(int(s[ax]) for s in xs)
    return [(tuple(out), _dt(ctx, 2))]


def _concat_plan(ctx):
    f = Flow(ctx)
    n = len(ctx.node.inputs)
    if n < 5 or (n - 2) % 3:
        return "QLinearConcat: inputs must be Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) triples"
    if not f.has("in0") or not f.has("out0"):
        return "QLinearConcat: Y_scale and Y need known shapes"
    parts = []
    for k, i in enumerate(range(2, n, 3)):
        if not f.has(f"in{i}") or not f.has(f"in{i + 1}"):
            return "QLinearConcat: every X and X_scale needs a known shape"
        if f.dtype(f"in{i}") not in _Q:
            return "QLinearConcat: X must be uint8 or int8"
        parts.append(_deq(f, f"in{i}", f"in{i + 1}", _opt(f, i + 2), f"x{k}_f"))
    y = f.temp("y_f", f.shape("out0"))
    f.step("Concat", parts, [y], axis=int(ctx.attrs.get("axis", 0)))
    _quant(f, y, "in0", _opt(f, 1), "out0", f.dtype("in2"))
    return f


_c, _b = flow_op(_concat_plan)
OPS.add("QLinearConcat", _b, domain=MS, since=1, until=1, dtypes=("float32",), check=_c, **_types(_concat_types),
        note="DequantizeLinear each input, Concat, QuantizeLinear(Y_scale, Y_zp)")


# -- QuantizeLinear / DequantizeLinear (com.microsoft) -------------------------------------------
def _qdq_types(ctx):
    xs = ctx.in_shapes[0]
    if xs is None:
        return [None]
    if ctx.node.op_type == "DequantizeLinear":
        return [(tuple(xs), _dt(ctx, 1))]
    zdt = _dt(ctx, 2) if ctx.has_input(2) else np.dtype(np.uint8)
    return [(tuple(xs), zdt)]


def _qdq_plan(ctx):
    op = ctx.node.op_type
    f = Flow(ctx)
    if not f.has("in0") or not f.has("in1") or not f.has("out0"):
        return f"{op} (com.microsoft): x, the scale and y need known shapes"
    f.step(op, ["in0", "in1", _opt(f, 2)], ["out0"], axis=int(ctx.attrs.get("axis", 1)))
    return f


_c, _b = flow_op(_qdq_plan)
OPS.add("QuantizeLinear", _b, domain=MS, since=1, until=1, dtypes=("float32",), check=_c, **_types(_qdq_types),
        note="the standard QuantizeLinear (per tensor or per axis)")
OPS.add("DequantizeLinear", _b, domain=MS, since=1, until=1,
        dtypes=("int8", "uint8", "int16", "uint16", "int4", "uint4", "int32"), check=_c, **_types(_qdq_types),
        note="the standard DequantizeLinear (per tensor or per axis)")
