"""DynamicQuantizeLSTM (com.microsoft 1): an LSTM whose W (num_directions, input_size, 4 hidden)
and R (num_directions, hidden, 4 hidden) are int8/uint8 with per-direction or per-(direction,
column) scales and zero points (what ``onnxruntime.quantization.quantize_dynamic`` writes for an
LSTM).

onnxruntime's CPU kernel quantises the *activations* too: X for all steps at once, and h
before every step, to uint8 with a range that includes 0 (DynamicQuantizeLinear's rule), and
multiplies them with the int8 weights exactly, scaling the int32 sums by ``x_scale * w_scale``.
It partitions the batch rows over its threads and quantises each partition's h on its own, so
its results for a batch depend on its thread count; here each row's h is quantised on its own
(onnxruntime's result with at least as many threads as rows, and a row's result never depends
on the other rows).
For one direction forward with the default activations and no peepholes, clip or
sequence_lens, the kernel here is that computation unrolled over the (static) sequence, in
standard ops: DynamicQuantizeLinear, MatMulInteger, Cast, Mul for ``X.W`` once; per step
DynamicQuantizeLinear(h), MatMulInteger, Cast, Mul, Add (+ ``X.W``), Add (``Wb + Rb``, summed
once at build), Split into i, o, f, c, Sigmoid x 3, Tanh, ``c = f * c_prev + i * g``, ``h = o *
tanh(c)``. The quantised values are onnxruntime's; only its float rounding inside the gates
(MLAS's own sigmoid/tanh) differs.

Any other configuration runs W and R dequantised once at build (``float32(q - zp) * scale``,
on the host, the same bits on every target) through the standard LSTM kernel: the activations
are then not quantised, and the results agree with onnxruntime's to their quantisation step
(~1/255 of their range), not to float precision.
"""

from __future__ import annotations

import numpy as np

from . import MS
from ..opdef import OpList
from .compose import Flow, flow_op
from .norms import _dt, _types

OPS = OpList()


def _deq(ctx, qi, si, zi, what):
    q, s = ctx.const(qi), ctx.const(si)
    if q is None or s is None:
        return f"DynamicQuantizeLSTM: {what} and its scale must be constants (initializers)"
    z = ctx.const(zi) if ctx.has_input(zi) else np.zeros_like(s, dtype=q.dtype)
    if z is None:
        return f"DynamicQuantizeLSTM: {what}'s zero point must be a constant"
    q = np.asarray(q)
    if q.dtype not in (np.int8, np.uint8) or q.ndim != 3:
        return f"DynamicQuantizeLSTM: {what} must be int8/uint8 (directions, rows, 4 hidden)"
    D, _, G = q.shape
    s = np.asarray(s, np.float32)
    z = np.asarray(z).astype(np.int32)
    if s.shape not in ((D,), (D, G)) or z.shape != s.shape:
        return f"DynamicQuantizeLSTM: {what}'s scale/zero point must be ({D},) or ({D}, {G}), got {s.shape}"
    s3 = s.reshape(D, 1, -1)
    z3 = z.reshape(D, 1, -1)
    w = (q.astype(np.int32) - z3).astype(np.float32) * s3
    return np.ascontiguousarray(np.transpose(w, (0, 2, 1)))   # (D, 4 hidden, rows): LSTM's layout


def _types_fn(ctx):
    xs = ctx.in_shapes[0]
    H = int(ctx.attrs.get("hidden_size", 0))
    ws = ctx.in_shapes[1]
    if xs is None or ws is None or H <= 0:
        return [None] * len(ctx.node.outputs)
    L, B = (xs[1], xs[0]) if int(ctx.attrs.get("layout", 0)) else (xs[0], xs[1])
    D = ws[0]
    dt = _dt(ctx, 0)
    if int(ctx.attrs.get("layout", 0)):
        out = [((B, L, D, H), dt), ((B, D, H), dt), ((B, D, H), dt)]
    else:
        out = [((L, D, B, H), dt), ((D, B, H), dt), ((D, B, H), dt)]
    return out[:len(ctx.node.outputs)]


def _unrolled(ctx):
    """Whether the unrolled, activation-quantising composition applies (see the module docs)."""
    a = ctx.attrs
    acts = [x.decode() if isinstance(x, bytes) else x for x in a.get("activations", [])]
    return (a.get("direction", "forward") in ("forward", b"forward") and not int(a.get("layout", 0))
            and acts in ([], ["Sigmoid", "Tanh", "Tanh"]) and "clip" not in a and not int(a.get("input_forget", 0))
            and not ctx.has_input(4) and not ctx.has_input(7) and ctx.in_shapes[0] is not None
            and ctx.const(1) is not None and ctx.const(2) is not None and np.asarray(ctx.const(1)).shape[0] == 1)


def _unrolled_plan(ctx):
    f = Flow(ctx)
    L, B, I = f.shape("in0")
    H = int(ctx.attrs["hidden_size"])
    G = 4 * H
    for i in (8, 10):
        if not f.has(f"in{i}") or f.shape(f"in{i}") not in ((1,), (1, G)):
            return "DynamicQuantizeLSTM: W_scale/R_scale must be (1,) or (1, 4 hidden)"
    W = f.view("W2", "in1", 0, (I, G))
    R = f.view("R2", "in2", 0, (H, G))

    def per(i):   # a (1,) / (1, 4H) scale or zero point as a scalar / (4H,)
        n = f"in{i}"
        return f.view(f"{n}_v", n, 0, () if f.shape(n) == (1,) else (G,)) if f.has(n) else ""

    ws, wz, rs, rz = per(8), per(9), per(10), per(11)
    # X . W for every step at once
    qx, sx, zx = f.temp("qx", (L * B, I), np.uint8), f.temp("sx", ()), f.temp("zx", (), np.uint8)
    f.step("DynamicQuantizeLinear", [f.view("X2", "in0", 0, (L * B, I))], [qx, sx, zx])
    xw_i = f.temp("xw_i", (L * B, G), np.int32)
    f.step("MatMulInteger", [qx, W, zx, wz], [xw_i])
    xw_f = f.temp("xw_f", (L * B, G))
    f.step("Cast", [xw_i], [xw_f], to=1)
    mx = f.temp("xw_mult", f.shape(ws))
    f.step("Mul", [sx, ws], [mx])
    xw = f.temp("xw", (L * B, G))
    f.step("Mul", [xw_f, mx], [xw])
    bias = None
    if f.has("in3"):
        b = np.asarray(ctx.const(3)) if ctx.const(3) is not None else None
        if b is None:
            return "DynamicQuantizeLSTM: B must be a constant for the quantised path"
        b = b.reshape(2, G)
        bias = f.const("bias_wr", (b[0] + b[1]).astype(np.float32))   # Wb + Rb, one float32 add each
    h = f.view("h0", "in5", 0, (B, H)) if f.has("in5") else f.const("h_zero", np.zeros((B, H), np.float32))
    c = f.view("c0", "in6", 0, (B, H)) if f.has("in6") else f.const("c_zero", np.zeros((B, H), np.float32))
    split = f.const("gate_split", np.full(4, H, np.int64))
    for t in range(L):
        # h quantised row by row (onnxruntime partitions the batch rows over its threads and
        # quantises each partition on its own: with as many threads as rows, row by row)
        hr_i = f.temp(f"hr_i{t}", (B, G), np.int32)
        for b in range(B):
            qh, sh, zh = f.temp(f"qh{t}_{b}", (1, H), np.uint8), f.temp(f"sh{t}_{b}", ()), f.temp(f"zh{t}_{b}", (), np.uint8)
            f.step("DynamicQuantizeLinear", [f.view(f"h{t}_{b}", h, b * H, (1, H))], [qh, sh, zh])
            f.step("MatMulInteger", [qh, R, zh, rz], [f.view(f"hr_i{t}_{b}", hr_i, b * G, (1, G))])
            mh = f.temp(f"hr_mult{t}_{b}", f.shape(rs))
            f.step("Mul", [sh, rs], [mh])
            if b == 0:
                mult = f.temp(f"hr_mults{t}", (B,) + f.shape(rs))
            f.step("Identity", [mh], [f.view(f"hr_mult{t}_{b}v", mult, b * int(np.prod(f.shape(rs), dtype=np.int64)),
                                            f.shape(rs))])
        hr_f = f.temp(f"hr_f{t}", (B, G))
        f.step("Cast", [hr_i], [hr_f], to=1)
        hr = f.temp(f"hr{t}", (B, G))
        f.step("Mul", [hr_f, mult if f.shape(rs) == (G,) else f.view(f"hr_mults{t}c", mult, 0, (B, 1))], [hr])
        gates = f.temp(f"pre{t}", (B, G))
        f.step("Add", [hr, f.view(f"xw{t}", xw, t * B * G, (B, G))], [gates])
        if bias is not None:
            g2 = f.temp(f"gates{t}", (B, G))
            f.step("Add", [gates, bias], [g2])
            gates = g2
        gi, go, gf, gc = (f.temp(f"{n}{t}", (B, H)) for n in ("gi", "go", "gf", "gc"))
        f.step("Split", [gates, split], [gi, go, gf, gc], axis=1)
        i_, o_, f_, g_ = (f.temp(f"{n}{t}", (B, H)) for n in ("i", "o", "f", "g"))
        f.step("Sigmoid", [gi], [i_])
        f.step("Sigmoid", [go], [o_])
        f.step("Sigmoid", [gf], [f_])
        f.step("Tanh", [gc], [g_])
        fc, ig = f.temp(f"fc{t}", (B, H)), f.temp(f"ig{t}", (B, H))
        f.step("Mul", [f_, c], [fc])
        f.step("Mul", [i_, g_], [ig])
        last = t == L - 1
        c_new = "out2" if last and f.has("out2") else f.temp(f"c{t + 1}", (B, H))
        c_new = f.view(f"c{t + 1}v", c_new, 0, (B, H)) if c_new == "out2" else c_new
        f.step("Add", [fc, ig], [c_new])
        tc = f.temp(f"tc{t}", (B, H))
        f.step("Tanh", [c_new], [tc])
        h_new = (f.view(f"h{t + 1}v", "out0", t * B * H, (B, H)) if f.has("out0")
                 else f.temp(f"h{t + 1}", (B, H)))
        f.step("Mul", [o_, tc], [h_new])
        h, c = h_new, c_new
    if f.has("out1"):
        f.step("Identity", [h], [f.view("yh", "out1", 0, (B, H))])
    return f


def _plan(ctx):
    if _dt(ctx, 0) != np.float32:
        return "DynamicQuantizeLSTM: X must be float32"
    if _unrolled(ctx):
        return _unrolled_plan(ctx)
    w = _deq(ctx, 1, 8, 9, "W")
    if isinstance(w, str):
        return w
    r = _deq(ctx, 2, 10, 11, "R")
    if isinstance(r, str):
        return r
    f = Flow(ctx)
    attrs = {k: ctx.attrs[k] for k in ("activation_alpha", "activation_beta", "activations", "clip", "direction",
                                       "hidden_size", "input_forget", "layout") if k in ctx.attrs}
    ins = ["in0", f.const("W", w), f.const("R", r)] + [f"in{i}" if f.has(f"in{i}") else "" for i in range(3, 8)]
    while ins and not ins[-1]:
        ins.pop()
    outs = [f"out{k}" if f.has(f"out{k}") else "" for k in range(len(ctx.node.outputs))]
    f.step("LSTM", ins, outs, opset=14, **attrs)
    return f


_c, _b = flow_op(_plan)
OPS.add("DynamicQuantizeLSTM", _b, domain=MS, since=1, until=1, check=_c, **_types(_types_fn),
        note="forward, default activations: onnxruntime's computation unrolled (X and each h quantised to "
             "uint8, exact int products, then the gates); otherwise W and R dequantised once, standard LSTM")
