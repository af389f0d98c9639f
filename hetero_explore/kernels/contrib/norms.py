"""onnxruntime's normalisation contrib ops, as compositions of standard ops (:mod:`.compose`).

* SkipLayerNormalization (com.microsoft 1): ``s = (input + skip) + bias`` (numpy broadcasting
  of skip: (B, S, H), (1, S, H) or (S, H)), ``output = LayerNormalization(s, gamma, beta,
  axis=-1, epsilon)``; ``input_skip_bias_sum`` is ``s``. Add, Add, LayerNormalization.
* SkipSimplifiedLayerNormalization (com.microsoft 1): the same with RMSNormalization (opset
  23: ``x / sqrt(mean(x^2) + epsilon) * gamma``) instead of LayerNormalization.
* SimplifiedLayerNormalization (registered by onnxruntime in the *default* domain, since 1;
  also accepted in com.microsoft): RMSNormalization(X, scale, axis, epsilon).
* EmbedLayerNormalization (com.microsoft 1): ``e = (word[ids] + position[pos]) + segment[seg]``
  (pos: ``position_ids``, broadcast over the batch, else 0 .. S-1), ``output =
  LayerNormalization(e, gamma, beta, epsilon)``, ``mask_index[b]`` = how many of
  ``mask[b, :]`` equal 1 (onnxruntime's CPU kernel counts them; 0 without a mask),
  ``embedding_sum`` = e. Gather x 3, Add x 2, LayerNormalization; Equal, Cast, ReduceSum.
* QEmbedLayerNormalization (com.microsoft 1): each quantised table dequantised
  (DequantizeLinear: ``float32(q - zp) * scale``), then EmbedLayerNormalization.

The statistics outputs (``mean``, ``inv_std_var``) that onnxruntime's schemas list for training
are not produced (a node that reads them is declined, saying so).
"""

from __future__ import annotations

import numpy as np

from . import MS
from ..opdef import OpList
from .compose import Flow, flow_op

OPS = OpList()
F32 = np.float32
I32 = np.dtype(np.int32)


def _used(ctx, k) -> bool:
    outs = ctx.node.outputs
    return k < len(outs) and bool(outs[k])


def _types(fn):
    """``(shape, infer)`` of an OpDef from ``fn(ctx) -> [(shape, dtype) | None per output]``."""

    def shape(ctx):
        return [None if t is None else t[0] for t in fn(ctx)]

    def infer(ctx, arrays):
        return [None if t is None else (tuple(t[0]), np.dtype(t[1])) for t in fn(ctx)]

    return dict(shape=shape, infer=infer, shape_inputs=())


def _dt(ctx, i):
    d = ctx.in_dtypes[i] if i < len(ctx.in_dtypes) else None
    return None if d is None else np.dtype(d)


# -- SkipLayerNormalization / SkipSimplifiedLayerNormalization ------------------------------
def _skip_types(ctx):
    xs, dt = ctx.in_shapes[0], _dt(ctx, 0)
    out = [(xs, dt), None, None, (xs, dt)]
    return out[:len(ctx.node.outputs)]


def _skip_plan(ctx):
    op = ctx.node.op_type
    simplified = op == "SkipSimplifiedLayerNormalization"
    bias_i = 3 if simplified else 4
    for k in (1, 2):
        if _used(ctx, k):
            return f"{op}: the mean/inv_std_var outputs (training only) are not produced"
    xs = ctx.in_shapes[0]
    if xs is None or len(xs) not in (2, 3) or any(ctx.in_shapes[i] is None for i in (1, 2)):
        return f"{op}: input must be 2-D or 3-D (batch, sequence, hidden) with known shapes"
    if _dt(ctx, 0) != np.float32:
        return f"{op}: input dtype {_dt(ctx, 0)} not supported (float32)"
    f = Flow(ctx)
    H = xs[-1]
    named = ((2, "gamma"), (3, "bias")) if simplified else ((2, "gamma"), (3, "beta"), (4, "bias"))
    for i, what in named:
        if ctx.has_input(i):
            s = ctx.in_shapes[i]
            if s is None or int(np.prod(s)) != H or (len(s) and s[-1] != H):
                return f"{op}: {what} must have {H} elements along the hidden axis, got {s}"
    s = "out3" if _used(ctx, 3) else f.temp("sum", xs)
    has_bias = ctx.has_input(bias_i)
    first = f.temp("sum0", xs) if has_bias else s
    f.step("Add", ["in0", "in1"], [first])
    if has_bias:
        f.step("Add", [first, f"in{bias_i}"], [s])
    if simplified:
        f.step("RMSNormalization", [s, "in2"], ["out0"], opset=23, axis=-1,
               epsilon=float(ctx.attrs.get("epsilon", 1e-12)))
    else:
        beta = "in3" if ctx.has_input(3) else ""
        f.step("LayerNormalization", [s, "in2", beta], ["out0"], axis=-1,
               epsilon=float(ctx.attrs.get("epsilon", 1e-12)))
    return f


_c, _b = flow_op(_skip_plan)
OPS.add("SkipLayerNormalization", _b, domain=MS, since=1, until=1, check=_c, **_types(_skip_types),
        note="Add(input, skip), Add(bias), LayerNormalization(gamma, beta, epsilon); input_skip_bias_sum "
             "is the sum (standard kernels, step by step)")
OPS.add("SkipSimplifiedLayerNormalization", _b, domain=MS, since=1, until=1, check=_c, **_types(_skip_types),
        note="Add(input, skip), Add(bias), RMSNormalization(gamma, epsilon); input_skip_bias_sum is the sum")


# -- SimplifiedLayerNormalization ----------------------------------------------------------
def _simp_types(ctx):
    return [(ctx.in_shapes[0], _dt(ctx, 0))]


def _simp_plan(ctx):
    if _used(ctx, 1):
        return "SimplifiedLayerNormalization: the inv_std_var output (training only) is not produced"
    if _dt(ctx, 0) != np.float32 or _dt(ctx, 1) != np.float32:
        return "SimplifiedLayerNormalization: X and scale must be float32"
    f = Flow(ctx)
    if not f.has("in0") or not f.has("in1"):
        return "SimplifiedLayerNormalization: X and scale need known shapes"
    f.step("RMSNormalization", ["in0", "in1"], ["out0"], opset=23, axis=int(ctx.attrs.get("axis", -1)),
           epsilon=float(ctx.attrs.get("epsilon", 1e-5)), stash_type=int(ctx.attrs.get("stash_type", 1)))
    return f


_c, _b = flow_op(_simp_plan)
_SIMP_NOTE = "RMSNormalization(X, scale, axis, epsilon): x / sqrt(mean(x^2) + epsilon) * scale"
# onnxruntime registers it in the default domain (version 1, every opset since); some tools write it
# in com.microsoft
OPS.add("SimplifiedLayerNormalization", _b, since=1, until=99, check=_c, **_types(_simp_types), note=_SIMP_NOTE)
OPS.add("SimplifiedLayerNormalization", _b, domain=MS, since=1, until=1, check=_c, **_types(_simp_types),
        note=_SIMP_NOTE)


# -- EmbedLayerNormalization / QEmbedLayerNormalization -------------------------------------
# input indices: ids, segment ids, word, position, segment table, gamma, beta, mask, position ids
_EMB = dict(ids=0, seg=1, word=2, pos=3, segt=4, gamma=5, beta=6, mask=7, posids=8)
_QEMB = dict(ids=0, seg=1, word=2, pos=3, segt=4, gamma=5, beta=6, mask=7, posids=None)
#: QEmbedLayerNormalization: the quantised tables' scale and zero point inputs
_QEMB_SZ = {"word": (8, 13), "pos": (9, 14), "segt": (10, 15), "gamma": (11, 16), "beta": (12, 17)}


def _emb_types(ctx):
    ids, word = ctx.in_shapes[0], ctx.in_shapes[2]
    if ids is None or word is None or len(ids) != 2:
        return [None] * len(ctx.node.outputs)
    B, S = ids
    H = word[-1]
    dt = np.dtype(np.float32) if ctx.node.op_type == "QEmbedLayerNormalization" else _dt(ctx, 2)
    out = [((B, S, H), dt), ((B,), I32), ((B, S, H), dt)]
    return out[:len(ctx.node.outputs)]


def _emb_plan(ctx):
    op = ctx.node.op_type
    quant = op == "QEmbedLayerNormalization"
    ix = _QEMB if quant else _EMB
    f = Flow(ctx)
    for k in ("ids", "word", "pos", "gamma", "beta"):
        if not f.has(f"in{ix[k]}"):
            return f"{op}: input {k} must be given, with a known shape"
    B, S = f.shape("in0") if len(f.shape("in0")) == 2 else (None, None)
    if B is None:
        return f"{op}: input_ids must be 2-D (batch, sequence)"
    for k in ("ids", "seg", "mask", "posids"):
        i = ix.get(k)
        if i is not None and f.has(f"in{i}") and f.dtype(f"in{i}") != I32:
            return f"{op}: {k} must be int32 (onnxruntime's schema), got {f.dtype(f'in{i}')}"
    tables = {}
    for k in ("word", "pos", "segt", "gamma", "beta"):
        name = f"in{ix[k]}"
        if not f.has(name):
            continue
        if quant:
            si, zi = _QEMB_SZ[k]
            if not f.has(f"in{si}"):
                return f"{op}: the scale of {k} must be given"
            if f.dtype(name) not in (np.uint8, np.int8):
                return f"{op}: quantised {k} must be uint8 or int8, got {f.dtype(name)}"
            deq = f.temp(f"{k}_f", f.shape(name))
            f.step("DequantizeLinear", [name, f"in{si}", f"in{zi}" if f.has(f"in{zi}") else ""], [deq])
            tables[k] = deq
        else:
            if f.dtype(name) != np.float32:
                return f"{op}: {k} must be float32, got {f.dtype(name)}"
            tables[k] = name
    H = f.shape(tables["word"])[-1]
    for k in ("pos", "segt"):
        if k in tables and (len(f.shape(tables[k])) != 2 or f.shape(tables[k])[1] != H):
            return f"{op}: the {k} table must be 2-D with {H} columns, got {f.shape(tables[k])}"
    if not f.has(f"in{ix['seg']}") and "segt" in tables or f.has(f"in{ix['seg']}") and "segt" not in tables:
        return f"{op}: segment_ids and segment_embedding must be given together"
    w = f.temp("w", (B, S, H))
    f.step("Gather", [tables["word"], "in0"], [w], axis=0)
    pid = f"in{ix['posids']}" if ix["posids"] is not None and f.has(f"in{ix['posids']}") else None
    if pid is None:
        pid = f.const("pos_ids", np.broadcast_to(np.arange(S, dtype=np.int32), (B, S)))
    elif f.shape(pid) not in ((B, S), (1, S)):
        return f"{op}: position_ids must be ({B}, {S}) or (1, {S}), got {f.shape(pid)}"
    p = f.temp("p", f.shape(pid) + (H,))
    f.step("Gather", [tables["pos"], pid], [p], axis=0)
    e = "out2" if _used(ctx, 2) and not quant else f.temp("e", (B, S, H))
    wp = f.temp("wp", (B, S, H)) if "segt" in tables else e
    f.step("Add", [w, p], [wp])
    if "segt" in tables:
        sg = f.temp("sg", (B, S, H))
        f.step("Gather", [tables["segt"], f"in{ix['seg']}"], [sg], axis=0)
        f.step("Add", [wp, sg], [e])
    f.step("LayerNormalization", [e, tables["gamma"], tables["beta"]], ["out0"], axis=-1,
           epsilon=float(ctx.attrs.get("epsilon", 1e-12)))
    if _used(ctx, 1):
        if int(ctx.attrs.get("mask_index_type", 1)) == 0:
            return f"{op}: mask_index_type=0 writes no mask_index, but the node reads one"
        m = f"in{ix['mask']}"
        if f.has(m):
            if f.shape(m) != (B, S):
                return f"{op}: mask must be ({B}, {S}), got {f.shape(m)}"
            eq = f.temp("mask_eq", (B, S), np.bool_)
            f.step("Equal", [m, f.const("one", np.ones((), np.int32))], [eq])
            cnt = f.temp("mask_i", (B, S), np.int32)
            f.step("Cast", [eq], [cnt], to=6)
            f.step("ReduceSum", [cnt, f.const("axis1", np.array([1], np.int64))], ["out1"], keepdims=0)
        else:
            f.step("Identity", [f.const("zeros", np.zeros((B,), np.int32))], ["out1"])
    return f


_c, _b = flow_op(_emb_plan)
OPS.add("EmbedLayerNormalization", _b, domain=MS, since=1, until=1, dtypes=("int32",), check=_c,
        **_types(_emb_types),
        note="(word[ids] + position[pos]) + segment[seg], LayerNormalization(gamma, beta); mask_index = "
             "count of mask == 1 per batch (Gather, Add, LayerNormalization, Equal, Cast, ReduceSum)")
OPS.add("QEmbedLayerNormalization", _b, domain=MS, since=1, until=1, dtypes=("int32",), check=_c,
        **_types(_emb_types),
        note="each uint8/int8 table DequantizeLinear'd, then EmbedLayerNormalization's steps")
