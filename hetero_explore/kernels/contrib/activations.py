"""onnxruntime's activation and fused-bias contrib ops, as compositions of standard ops.

* Gelu (com.microsoft 1) is the standard Gelu (``approximate="none"``: pmath's erf);
  BiasGelu(A, B) is Add then Gelu; FastGelu(X[, bias]) is (Add, then) Gelu with
  ``approximate="tanh"`` -- onnxruntime's formula, ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``,
  is the standard one.
* QuickGelu(X, alpha=1.702): ``x * sigmoid(alpha * x)``: Mul, Sigmoid, Mul.
* BiasAdd(X, bias, skip): ``(X + bias) + skip``: Add, Add.
* FusedGemm / FusedConv (written by onnxruntime's graph optimiser at the extended level):
  the Gemm / Conv (FusedConv: plus its ``Z`` input, added before the activation), then the
  activation its ``activation`` attribute names, with its parameters (FusedGemm:
  ``activation_alpha``/``_beta``; FusedConv: ``activation_params``).
"""

from __future__ import annotations

import numpy as np

from . import MS
from ..opdef import OpList
from .compose import Flow, flow_op, standard_output_types
from .norms import _dt, _types

OPS = OpList()


def _same(ctx):
    return [(ctx.in_shapes[0], _dt(ctx, 0))]


def _float_in(ctx, op, *idx):
    for i in idx:
        if ctx.has_input(i) and _dt(ctx, i) != np.float32:
            return f"{op}: input {i} dtype {_dt(ctx, i)} not supported (float32)"
    return None


def _gelu_plan(ctx):
    op = ctx.node.op_type
    why = _float_in(ctx, op, 0, 1)
    if why:
        return why
    f = Flow(ctx)
    x = "in0"
    if ctx.has_input(1):   # BiasGelu's B, FastGelu's bias
        if not f.has("in1") or not f.has("in0"):
            return f"{op}: inputs need known shapes"
        x = f.temp("biased", f.shape("in0"))
        f.step("Add", ["in0", "in1"], [x])
    f.step("Gelu", [x], ["out0"], opset=20, approximate="tanh" if op == "FastGelu" else "none")
    return f


_c, _b = flow_op(_gelu_plan)
OPS.add("Gelu", _b, domain=MS, since=1, until=1, check=_c, **_types(_same),
        note="the standard Gelu (erf form)")
OPS.add("BiasGelu", _b, domain=MS, since=1, until=1, check=_c, **_types(_same),
        note="Add(A, B), then the standard Gelu (erf form)")
OPS.add("FastGelu", _b, domain=MS, since=1, until=1, check=_c, **_types(_same),
        note="Add(X, bias) when bias is given, then the standard Gelu with approximate='tanh'")


def _quick_plan(ctx):
    why = _float_in(ctx, "QuickGelu", 0)
    if why:
        return why
    f = Flow(ctx)
    if not f.has("in0"):
        return "QuickGelu: X needs a known shape"
    xs = f.shape("in0")
    ax = f.temp("ax", xs)
    s = f.temp("sig", xs)
    f.step("Mul", ["in0", f.const("alpha", np.float32(ctx.attrs.get("alpha", 1.702)))], [ax])
    f.step("Sigmoid", [ax], [s])
    f.step("Mul", ["in0", s], ["out0"])
    return f


_c, _b = flow_op(_quick_plan)
OPS.add("QuickGelu", _b, domain=MS, since=1, until=1, check=_c, **_types(_same),
        note="x * sigmoid(alpha * x): Mul, Sigmoid, Mul")


def _bias_add_plan(ctx):
    why = _float_in(ctx, "BiasAdd", 0, 1, 2)
    if why:
        return why
    f = Flow(ctx)
    if not all(f.has(f"in{i}") for i in range(3)):
        return "BiasAdd: X, bias and skip need known shapes"
    xs = f.shape("in0")
    if len(xs) != 3 or f.shape("in1") != (xs[2],) or f.shape("in2") != xs:
        return f"BiasAdd: X (N, S, C), bias (C,) and skip like X expected, got {xs}, {f.shape('in1')}, {f.shape('in2')}"
    t = f.temp("xb", xs)
    f.step("Add", ["in0", "in1"], [t])
    f.step("Add", [t, "in2"], ["out0"])
    return f


_c, _b = flow_op(_bias_add_plan)
OPS.add("BiasAdd", _b, domain=MS, since=1, until=1, check=_c, **_types(_same),
        note="(X + bias) + skip: Add, Add")


# -- FusedGemm / FusedConv ------------------------------------------------------------------
def _activation(f, op, act, params, x, y):
    """Append the activation ``act`` (onnxruntime's names) from ``x`` to ``y``; a reason when unknown."""
    if act in ("Relu", "Tanh", "Sigmoid"):
        f.step(act, [x], [y])
    elif act == "LeakyRelu":
        f.step(act, [x], [y], alpha=float(params[0]) if params else 0.01)
    elif act == "HardSigmoid":
        f.step(act, [x], [y], alpha=float(params[0]) if params else 0.2, beta=float(params[1]) if len(params) > 1 else 0.5)
    elif act == "Clip":
        lo = np.float32(params[0]) if params else np.float32(-np.inf)
        hi = np.float32(params[1]) if len(params) > 1 else np.float32(np.inf)
        f.step("Clip", [x, f.const("clip_lo", lo), f.const("clip_hi", hi)], [y])
    else:
        return f"{op}: activation {act!r} not supported (Relu, Tanh, Sigmoid, LeakyRelu, HardSigmoid, Clip)"
    return None


def _fused_plan(ctx):
    op = ctx.node.op_type
    base = "Gemm" if op == "FusedGemm" else "Conv"
    why = _float_in(ctx, op, 0, 1, 2, 3)
    if why:
        return why
    a = ctx.attrs
    act = a.get("activation", "")
    act = act.decode() if isinstance(act, bytes) else act
    params = ([a[k] for k in ("activation_alpha", "activation_beta") if k in a] if op == "FusedGemm"
              else list(a.get("activation_params", [])))
    own = _fused_own_attrs(ctx)
    n_in = 3
    f = Flow(ctx)
    if not f.has("out0"):
        return f"{op}: output shape unknown"
    ys = f.shape("out0")
    pre = f.temp("pre", ys)
    ins = [f"in{i}" if ctx.has_input(i) else "" for i in range(n_in)]
    while ins and not ins[-1]:
        ins.pop()
    if op == "FusedConv" and ctx.has_input(3):   # Z: added to the convolution before the activation
        conv = f.temp("conv", ys)
        f.step(base, ins, [conv], **own)
        f.step("Add", [conv, "in3"], [pre])
    else:
        f.step(base, ins, [pre], **own)
    return _activation(f, op, act, params, pre, "out0") or f


def _fused_own_attrs(ctx):
    keep = (("alpha", "beta", "transA", "transB") if ctx.node.op_type == "FusedGemm" else
            ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"))
    return {k: ctx.attrs[k] for k in keep if k in ctx.attrs}


def _fused_types(ctx):
    base = "Gemm" if ctx.node.op_type == "FusedGemm" else "Conv"
    return standard_output_types(ctx, base, _fused_own_attrs(ctx), n_inputs=3)


_c, _b = flow_op(_fused_plan)
OPS.add("FusedGemm", _b, domain=MS, since=1, until=1, check=_c, **_types(_fused_types),
        note="the standard Gemm, then the activation it names (Relu, Tanh, Sigmoid, LeakyRelu, HardSigmoid, Clip)")
OPS.add("FusedConv", _b, domain=MS, since=1, until=1, check=_c, **_types(_fused_types),
        note="the standard Conv (+ Z), then the activation it names")
