"""onnxruntime's attention contrib ops on the standard Attention kernel (opset 23, one row of
attention per item, :mod:`..attention`), composed with standard steps (:mod:`.compose`).

* Attention (com.microsoft 1): ``qkv = input . weights (+ bias)`` (MatMul, Add), split into Q,
  K, V (Split, ``qkv_hidden_sizes`` or thirds), then the standard Attention on the 3-D
  (batch, sequence, heads x head size) layout with ``num_heads`` query and key/value heads,
  ``scale`` (default 1/sqrt(head size)), ``unidirectional`` as ``is_causal`` (the frontier
  shifted by the past length), the ``past`` (2, B, N, P, H) halves as past_key/past_value and
  the ``present`` halves as present_key/present_value. The mask is onnxruntime's additive one:
  ``mask_filter_value`` (default -10000) where a key is masked, 0 elsewhere -- a raw 2-D (B, T)
  or 3-D (B, S, T) ``mask_index`` masks where it is not > 0 (Greater, Where); a 1-D (B) one
  holds each batch's end position, (2B) end and start positions (Less, GreaterOrEqual, And,
  Where); ``attention_bias`` is added to it (Add). ``do_rotary`` and a shared past/present
  buffer are not supported.
* QAttention (com.microsoft 1): the same with the projection computed as
  MatMulIntegerToFloat's steps (``float32((input - izp) . (weight - wzp)) * (input_scale *
  weight_scale) + bias``).
* MultiHeadAttention (com.microsoft 1): separate 3-D query/key/value (``bias``: split into
  three and added), ``key_padding_mask`` as above, ``attention_bias``, past_key/past_value
  (B, N, P, H) and present_key/present_value; packed or BNSH inputs, and the qk output, are not
  supported.
* GroupQueryAttention (com.microsoft 1): query (packed QKV or with key/value), rotary
  (``do_rotary``: the standard RotaryEmbedding at the positions onnxruntime uses -- ``s`` in a
  first prompt, ``seqlens_k + 1 - S + s`` after), the present key/value written as
  onnxruntime's CPU kernel does (zeros, the first ``past_b`` positions of the past, the new
  keys after them: a copy kernel of this module), and the standard Attention over the present
  with a boolean mask (this module's kernel): query ``i`` of batch ``b`` sees key ``j`` when
  ``j <= past_b + i`` and, with ``local_window_size`` > 0, ``j > past_b + i -
  local_window_size`` (the window holds that many keys, the query's own included, as onnxruntime
  1.32's CPU kernel counts it); ``past_b`` is 0 in a first prompt (``S == total_sequence_length``), else
  ``seqlens_k[b] + 1 - S``. ``softcap`` is the standard one. ``smooth_softmax``,
  ``attention_bias``, ``head_sink``, ``position_ids`` and the qk output are not supported.
* RotaryEmbedding (com.microsoft 1): the standard RotaryEmbedding (opset 23) with the inputs
  reordered (input, position_ids, cos, sin -> input, cos, sin, position_ids); a (1,)
  position_ids is the offset of position 0 (Add of 0 .. S-1); ``num_heads`` 0 on a 3-D input is
  taken from the caches (head size = 2 x their last dim). ``scale`` != 1 and packed batching
  are not supported.

Each step is the standard kernel, so these ops are as portable as it is; the two kernels of
this module move and compare integers only.
"""

from __future__ import annotations

import numpy as np

from . import MS
from ..common import kernel_pair
from ..opdef import OpList
from .compose import Flow, flow_op
from .matmul import _scaled_product
from .norms import _dt, _types

OPS = OpList()
F32 = np.dtype(np.float32)
I32 = np.dtype(np.int32)
I64 = np.dtype(np.int64)


# =============================================================================
# masks (onnxruntime's additive mask, from mask_index / key_padding_mask)
# =============================================================================
class _Why(str):
    """A reason a node is not supported (where a value name could be returned instead)."""


def _additive_mask(f, op, m, B, S, T, filt, bias=None):
    """The float mask value name (broadcastable to (B, heads, S, T)) for mask input ``m`` (a name
    or None) plus ``bias`` (attention_bias, or None); a reason string when the mask is unsupported."""
    out = None
    if m is not None:
        ms, md = f.shape(m), f.dtype(m)
        if md != I32:
            return _Why(f"{op}: mask must be int32, got {md}")
        zero = f.const("f_zero", np.float32(0))
        fv = f.const("f_filter", np.float32(filt))
        if ms in ((B, T), (B, S, T)):
            keep = f.temp("keep", ms, np.bool_)
            f.step("Greater", [m, f.const("i_zero", np.int32(0))], [keep])
            mf = f.temp("maskf", ms)
            f.step("Where", [keep, zero, fv], [mf])
            out = f.view("maskf4", mf, 0, (B, 1, 1, T) if len(ms) == 2 else (B, 1, S, T))
        elif ms in ((B,), (2 * B,)):
            ar = f.const("key_pos", np.arange(T, dtype=np.int32))
            end = f.view("mask_end", m, 0, (B, 1))
            keep = f.temp("keep", (B, T), np.bool_)
            if ms == (2 * B,):
                k1 = f.temp("keep_end", (B, T), np.bool_)
                k2 = f.temp("keep_start", (B, T), np.bool_)
                f.step("Less", [ar, end], [k1])
                f.step("GreaterOrEqual", [ar, f.view("mask_start", m, B, (B, 1))], [k2])
                f.step("And", [k1, k2], [keep])
            else:
                f.step("Less", [ar, end], [keep])
            mf = f.temp("maskf", (B, T))
            f.step("Where", [keep, zero, fv], [mf])
            out = f.view("maskf4", mf, 0, (B, 1, 1, T))
        else:
            return _Why(f"{op}: mask shape {ms} not supported ((B), (2B), (B, T) or (B, S, T) with B={B}, "
                    f"S={S}, T={T})")
    if bias is not None:
        bs = f.shape(bias)
        if len(bs) != 4 or bs[-2:] != (S, T) or f.dtype(bias) != F32:
            return _Why(f"{op}: attention_bias must be float32 (B or 1, N or 1, {S}, {T}), got {bs}")
        if out is None:
            return bias
        both = f.temp("mask_bias", tuple(np.broadcast_shapes(f.shape(out), bs)))
        f.step("Add", [out, bias], [both])
        return both
    return out


def _core(f, op, q, k, v, N, Nkv, past_k, past_v, present_k, present_v, mask, scale, causal, y):
    """The standard Attention on 3-D q/k/v (B, L, heads x head size) into y (and the presents)."""
    f.step("Attention", [q, k, v, mask or "", past_k or "", past_v or ""],
           [y, present_k or "", present_v or ""], opset=23, q_num_heads=N, kv_num_heads=Nkv,
           is_causal=1 if causal else 0, scale=None if scale is None else float(scale))


def _scale(ctx):
    s = ctx.attrs.get("scale")
    return None if s is None or float(s) == 0.0 else float(s)


# =============================================================================
# Attention / QAttention
# =============================================================================
_ATTN_IX = {"Attention": dict(bias=2, mask=3, past=4, abias=5, pastlen=6),
            "QAttention": dict(bias=2, mask=5, past=8, abias=None, pastlen=None)}


def _sizes(ctx, wshape):
    hs = ctx.attrs.get("qkv_hidden_sizes")
    if hs:
        return [int(x) for x in hs]
    if wshape is None or wshape[-1] % 3:
        return None
    return [wshape[-1] // 3] * 3


def _attn_types(ctx):
    xs, ws = ctx.in_shapes[0], ctx.in_shapes[1]
    sizes = _sizes(ctx, ws)
    if xs is None or len(xs) != 3 or sizes is None:
        return [None] * len(ctx.node.outputs)
    B, S = xs[0], xs[1]
    N = int(ctx.attrs.get("num_heads", 1)) or 1
    dt = F32 if ctx.node.op_type == "QAttention" else _dt(ctx, 0)
    out = [((B, S, sizes[2]), dt)]
    pi = _ATTN_IX[ctx.node.op_type]["past"]
    P = ctx.in_shapes[pi][3] if ctx.has_input(pi) and ctx.in_shapes[pi] is not None else 0
    out.append(((2, B, N, P + S, sizes[1] // N), dt))
    return out[:len(ctx.node.outputs)]


def _attn_plan(ctx):
    op = ctx.node.op_type
    ix = _ATTN_IX[op]
    a = ctx.attrs
    N = int(a.get("num_heads", 0))
    if N <= 0:
        return f"{op}: num_heads must be > 0"
    if int(a.get("do_rotary", 0)):
        return f"{op}: do_rotary is not supported"
    if int(a.get("past_present_share_buffer", 0)):
        return f"{op}: past_present_share_buffer is not supported"
    if ix["pastlen"] is not None and ctx.has_input(ix["pastlen"]):
        return f"{op}: past_sequence_length (a shared past/present buffer) is not supported"
    f = Flow(ctx)
    if not f.has("in0") or not f.has("in1") or not f.has("out0"):
        return f"{op}: input, weights and output need known shapes"
    xs, ws = f.shape("in0"), f.shape("in1")
    if len(xs) != 3 or len(ws) != 2 or ws[0] != xs[2]:
        return f"{op}: input (B, S, hidden) and weights (hidden, q + k + v) expected, got {xs}, {ws}"
    B, S = xs[0], xs[1]
    sizes = _sizes(ctx, ws)
    if sizes is None or sum(sizes) != ws[1] or sizes[0] != sizes[1] or any(s % N for s in sizes):
        return f"{op}: qkv sizes {sizes} do not split weights {ws} into {N} heads with equal q and k"
    D = sizes[1] // N
    qkv = f.temp("qkv", (B, S, ws[1]))
    bias = f"in{ix['bias']}" if f.has(f"in{ix['bias']}") else ""
    if op == "QAttention":
        if f.dtype("in0") not in (np.dtype(np.uint8), np.dtype(np.int8)):
            return f"{op}: input must be uint8 or int8"
        for i in (3, 4):
            if not f.has(f"in{i}") or f.dtype(f"in{i}") != F32:
                return f"{op}: input_scale and weight_scale must be float32 and given"
        _scaled_product(f, op, "in0", "in1", "in6" if f.has("in6") else "", "in7" if f.has("in7") else "",
                        "in3", "in4", bias, qkv)
    else:
        if f.dtype("in0") != F32 or f.dtype("in1") != F32:
            return f"{op}: input and weights must be float32"
        if bias:
            p = f.temp("proj", (B, S, ws[1]))
            f.step("MatMul", ["in0", "in1"], [p])
            f.step("Add", [p, bias], [qkv])
        else:
            f.step("MatMul", ["in0", "in1"], [qkv])
    q, k, v = (f.temp(n, (B, S, s)) for n, s in zip(("q", "k", "v"), sizes))
    f.step("Split", [qkv, f.const("qkv_split", np.asarray(sizes, np.int64))], [q, k, v], axis=2)
    pname = f"in{ix['past']}"
    P = 0
    past_k = past_v = None
    if f.has(pname):
        ps = f.shape(pname)
        if len(ps) != 5 or ps[:3] != (2, B, N) or ps[4] != D:
            return f"{op}: past must be (2, {B}, {N}, past, {D}), got {ps}"
        P = ps[3]
        half = B * N * P * D
        past_k = f.view("past_k", pname, 0, (B, N, P, D))
        past_v = f.view("past_v", pname, half, (B, N, P, D))
    present_k = present_v = None
    if f.has("out1"):
        half = B * N * (P + S) * D
        present_k = f.view("present_k", "out1", 0, (B, N, P + S, D))
        present_v = f.view("present_v", "out1", half, (B, N, P + S, sizes[2] // N))
    elif past_k is not None:
        present_k = f.temp("present_k", (B, N, P + S, D))
        present_v = f.temp("present_v", (B, N, P + S, sizes[2] // N))
    mname = f"in{ix['mask']}"
    abias = f"in{ix['abias']}" if ix["abias"] is not None and f.has(f"in{ix['abias']}") else None
    mask = _additive_mask(f, op, mname if f.has(mname) else None, B, S, P + S,
                          a.get("mask_filter_value", -10000.0), abias)
    if isinstance(mask, _Why):
        return str(mask)
    _core(f, op, q, k, v, N, N, past_k, past_v, present_k, present_v, mask, _scale(ctx),
          int(a.get("unidirectional", 0)), "out0")
    return f


_c, _b = flow_op(_attn_plan)
OPS.add("Attention", _b, domain=MS, since=1, until=1, check=_c, **_types(_attn_types),
        note="MatMul + bias, Split, the standard Attention (3-D, past/present halves, causal for "
             "unidirectional) with onnxruntime's additive mask (mask_filter_value) + attention_bias")
OPS.add("QAttention", _b, domain=MS, since=1, until=1, dtypes=("uint8", "int8"), check=_c, **_types(_attn_types),
        note="float32(MatMulInteger) * (input_scale * weight_scale) + bias, then Attention's steps")


# =============================================================================
# MultiHeadAttention
# =============================================================================
def _mha_types(ctx):
    qs, vs = ctx.in_shapes[0], ctx.in_shapes[2] if len(ctx.in_shapes) > 2 else None
    if qs is None or len(qs) != 3 or vs is None or len(vs) != 3:
        return [None] * len(ctx.node.outputs)
    B, S = qs[0], qs[1]
    L = vs[1]
    N = int(ctx.attrs.get("num_heads", 1)) or 1
    ks = ctx.in_shapes[1]
    P = ctx.in_shapes[6][2] if ctx.has_input(6) and ctx.in_shapes[6] is not None else 0
    dt = _dt(ctx, 0)
    out = [((B, S, vs[2]), dt), ((B, N, P + L, ks[2] // N), dt), ((B, N, P + L, vs[2] // N), dt)]
    return out[:len(ctx.node.outputs)]


def _mha_plan(ctx):
    op = "MultiHeadAttention"
    a = ctx.attrs
    N = int(a.get("num_heads", 0))
    if N <= 0:
        return f"{op}: num_heads must be > 0"
    if len(ctx.node.outputs) > 3 and ctx.node.outputs[3]:
        return f"{op}: the qk output is not supported"
    if any(ctx.has_input(i) for i in (8, 9)):
        return f"{op}: past_sequence_length / cache_indirection are not supported"
    f = Flow(ctx)
    for i in range(3):
        if not f.has(f"in{i}") or len(f.shape(f"in{i}")) != 3:
            return f"{op}: query, key and value must be 3-D (B, L, hidden) with known shapes (packed or BNSH " \
                   "layouts are not supported)"
        if f.dtype(f"in{i}") != F32:
            return f"{op}: query, key and value must be float32"
    (B, S, Dq), (_, L, Dk), (_, L2, Dv) = (f.shape(f"in{i}") for i in range(3))
    if L2 != L or Dq != Dk or Dq % N or Dv % N:
        return f"{op}: query {f.shape('in0')}, key {f.shape('in1')}, value {f.shape('in2')} do not fit {N} heads"
    q, k, v = "in0", "in1", "in2"
    if f.has("in3"):
        if f.shape("in3") != (Dq + Dk + Dv,):
            return f"{op}: bias must be ({Dq + Dk + Dv},)"
        bq, bk, bv = (f.temp(n, (s,)) for n, s in (("bq", Dq), ("bk", Dk), ("bv", Dv)))
        f.step("Split", ["in3", f.const("bias_split", np.asarray([Dq, Dk, Dv], np.int64))], [bq, bk, bv], axis=0)
        q2, k2, v2 = f.temp("qb", (B, S, Dq)), f.temp("kb", (B, L, Dk)), f.temp("vb", (B, L, Dv))
        f.step("Add", [q, bq], [q2])
        f.step("Add", [k, bk], [k2])
        f.step("Add", [v, bv], [v2])
        q, k, v = q2, k2, v2
    P = 0
    past_k = past_v = None
    if f.has("in6") or f.has("in7"):
        if not (f.has("in6") and f.has("in7")):
            return f"{op}: past_key and past_value must be given together"
        P = f.shape("in6")[2]
        if f.shape("in6") != (B, N, P, Dk // N) or f.shape("in7") != (B, N, P, Dv // N):
            return f"{op}: past_key/past_value must be ({B}, {N}, past, head size)"
        past_k, past_v = "in6", "in7"
    present_k = "out1" if f.has("out1") else None
    present_v = "out2" if f.has("out2") else None
    if past_k is not None and (present_k is None or present_v is None):
        present_k = present_k or f.temp("present_k", (B, N, P + L, Dk // N))
        present_v = present_v or f.temp("present_v", (B, N, P + L, Dv // N))
    mask = _additive_mask(f, op, "in4" if f.has("in4") else None, B, S, P + L,
                          a.get("mask_filter_value", -10000.0), "in5" if f.has("in5") else None)
    if isinstance(mask, _Why):
        return str(mask)
    _core(f, op, q, k, v, N, N, past_k, past_v, present_k, present_v, mask, _scale(ctx),
          int(a.get("unidirectional", 0)), "out0")
    return f


_c, _b = flow_op(_mha_plan)
OPS.add("MultiHeadAttention", _b, domain=MS, since=1, until=1, check=_c, **_types(_mha_types),
        note="bias split and added, the standard Attention (3-D, past/present) with onnxruntime's additive "
             "key_padding_mask + attention_bias")


# =============================================================================
# GroupQueryAttention
# =============================================================================
# present[b, h, j, d]: the past's first past_b positions, then the S new ones, zeros after
_GQA_PRESENT = kernel_pair(
    "gqa_present", "past, new, out, seqk, P, S, T, H, D, first",
    """
d = i % D
j = (i // D) % T
h = (i // (D * T)) % H
b = i // (D * T * H)
pb = 0 if first == 1 else seqk[b] + 1 - S
if j < pb and j < P:
    out[i] = past[((b * H + h) * P + j) * D + d]
elif j >= pb and j < pb + S:
    out[i] = new[((b * S + (j - pb)) * H + h) * D + d]
else:
    out[i] = np.float32(0)
""", module=__name__)

# mask[b, i, j]: key j visible from query i of batch b (causal frontier past_b + i, local window)
_GQA_MASK = kernel_pair(
    "gqa_mask", "seqk, out, S, T, first, win",
    """
j = i % T
s = (i // T) % S
b = i // (T * S)
pb = 0 if first == 1 else seqk[b] + 1 - S
c = pb + s
ok = j <= c
if win > 0 and j <= c - win:
    ok = False
out[i] = ok
""", module=__name__)


def _gqa_kernel(pair, args_of):
    """A build for the synthetic step ``op`` that launches ``pair`` with ``args_of(ins, outs)``."""

    def build(ctx, target):
        def run(inputs, outputs):
            n, args = args_of([None if a is None else a.reshape(a.size) for a in inputs],
                              [o.reshape(o.size) for o in outputs])
            target.launch(pair, n, *args)
        return run
    return build


def _gqa_total(ctx):
    """total_sequence_length's value (constant or given at run time), else None."""
    t = ctx.const(6) if ctx.has_input(6) else None
    return None if t is None else int(np.asarray(t).reshape(-1)[0])


def _gqa_geometry(ctx):
    a = ctx.attrs
    N, Nkv = int(a.get("num_heads", 0)), int(a.get("kv_num_heads", 0))
    qs = ctx.in_shapes[0]
    if N <= 0 or Nkv <= 0 or N % Nkv:
        return "GroupQueryAttention: num_heads must be a positive multiple of kv_num_heads"
    if qs is None or len(qs) != 3:
        return "GroupQueryAttention: query must be 3-D (B, S, hidden) with a known shape"
    B, S, Dq = qs
    packed = not ctx.has_input(1)
    if packed:
        if Dq % (N + 2 * Nkv):
            return f"GroupQueryAttention: packed QKV width {Dq} is not (num_heads + 2 kv_num_heads) x head size"
        D = Dq // (N + 2 * Nkv)
    else:
        if Dq % N:
            return f"GroupQueryAttention: query width {Dq} is not a multiple of num_heads {N}"
        D = Dq // N
    P = ctx.in_shapes[3][2] if ctx.has_input(3) and ctx.in_shapes[3] is not None else 0
    return B, S, N, Nkv, D, P, packed


def _gqa_types(ctx):
    g = _gqa_geometry(ctx)
    if isinstance(g, str):
        return [None] * len(ctx.node.outputs)
    B, S, N, Nkv, D, P, _ = g
    dt = _dt(ctx, 0)
    total = _gqa_total(ctx)
    pres = None if total is None else ((B, Nkv, max(P, total), D), dt)
    return [((B, S, N * D), dt), pres, pres][:len(ctx.node.outputs)]


def _gqa_plan(ctx):
    op = "GroupQueryAttention"
    a = ctx.attrs
    g = _gqa_geometry(ctx)
    if isinstance(g, str):
        return g
    B, S, N, Nkv, D, P, packed = g
    if int(a.get("smooth_softmax", 0)):
        return f"{op}: smooth_softmax is not supported"
    if int(a.get("qk_output", 0)) or (len(ctx.node.outputs) > 3 and ctx.node.outputs[3]):
        return f"{op}: the qk output is not supported"
    for i, what in ((9, "position_ids"), (10, "attention_bias"), (11, "head_sink")):
        if ctx.has_input(i):
            return f"{op}: {what} is not supported"
    f = Flow(ctx)
    if f.dtype("in0") != F32:
        return f"{op}: query must be float32"
    if not f.has("in5") or f.shape("in5") != (B,) or f.dtype("in5") != I32:
        return f"{op}: seqlens_k must be int32 ({B},)"
    if not (f.has("out0") and f.has("out1") and f.has("out2")):
        return f"{op}: output, present_key and present_value need known shapes"
    T = f.shape("out1")[2]
    total = _gqa_total(ctx)
    if total is None:
        if P >= T:
            return f"{op}: total_sequence_length must be a constant when past and present share a length"
        total = T
    if T != max(P, total):
        return f"{op}: present length {T} is not max(past {P}, total_sequence_length {total})"
    first = 1 if S == total else 0
    if packed:
        q, k, v = f.temp("q", (B, S, N * D)), f.temp("k", (B, S, Nkv * D)), f.temp("v", (B, S, Nkv * D))
        f.step("Split", ["in0", f.const("qkv_split", np.asarray([N * D, Nkv * D, Nkv * D], np.int64))],
               [q, k, v], axis=2)
    else:
        q, k, v = "in0", "in1", "in2"
        if f.shape(k) != (B, S, Nkv * D) or f.shape(v) != (B, S, Nkv * D):
            return f"{op}: key and value must be ({B}, {S}, {Nkv * D})"
    if int(a.get("do_rotary", 0)):
        if not (f.has("in7") and f.has("in8")):
            return f"{op}: do_rotary needs cos_cache and sin_cache"
        R = 2 * f.shape("in7")[-1]
        if first:
            pos = f.const("pos", np.broadcast_to(np.arange(S, dtype=np.int64), (B, S)))
        else:
            s64 = f.temp("seqk64", (B,), np.int64)
            f.step("Cast", ["in5"], [s64], to=7)
            p0 = f.temp("past_len", (B,), np.int64)
            f.step("Add", [s64, f.const("one_minus_s", np.int64(1 - S))], [p0])
            pos = f.temp("pos", (B, S), np.int64)
            f.step("Add", [f.view("past_len2", p0, 0, (B, 1)), f.const("steps", np.arange(S, dtype=np.int64))],
                   [pos])
        inter = int(a.get("rotary_interleaved", 0))
        q2, k2 = f.temp("q_rot", (B, S, N * D)), f.temp("k_rot", (B, S, Nkv * D))
        f.step("RotaryEmbedding", [q, "in7", "in8", pos], [q2], opset=23, num_heads=N, interleaved=inter,
               rotary_embedding_dim=R)
        f.step("RotaryEmbedding", [k, "in7", "in8", pos], [k2], opset=23, num_heads=Nkv, interleaved=inter,
               rotary_embedding_dim=R)
        q, k = q2, k2
    past_k = "in3" if f.has("in3") else None
    past_v = "in4" if f.has("in4") else None
    if (past_k is None) != (past_v is None):
        return f"{op}: past_key and past_value must be given together"
    for name, src in (("out1", past_k), ("out2", past_v)):
        new = k if name == "out1" else v
        src = src or f.const("no_past", np.zeros(1, np.float32))
        f.step(f"gqa_present:{name}", [src, new, "in5"], [name])
    mask = f.temp("mask", (B, 1, S, T), np.bool_)
    f.step("gqa_mask", ["in5"], [mask])
    qt = f.temp("q4", (B, N, S, D))
    f.step("Transpose", [f.view("q_bsnd", q, 0, (B, S, N, D))], [qt], perm=[0, 2, 1, 3])
    y4 = f.temp("y4", (B, N, S, D))
    f.step("Attention", [qt, "out1", "out2", mask], [y4], opset=23, scale=_scale(ctx),
           softcap=float(a.get("softcap", 0.0)) or None)
    f.step("Transpose", [y4], [f.view("y_bsnd", "out0", 0, (B, S, N, D))], perm=[0, 2, 1, 3])
    win = int(a.get("local_window_size", -1))
    f.local = {
        "gqa_present:out1": _gqa_kernel(_GQA_PRESENT, lambda i, o: (o[0].size, (
            i[0], i[1], o[0], i[2], P, S, T, Nkv, D, first))),
        "gqa_present:out2": _gqa_kernel(_GQA_PRESENT, lambda i, o: (o[0].size, (
            i[0], i[1], o[0], i[2], P, S, T, Nkv, D, first))),
        "gqa_mask": _gqa_kernel(_GQA_MASK, lambda i, o: (o[0].size, (i[0], o[0], S, T, first, win))),
    }
    return f


_c, _b = flow_op(_gqa_plan)
OPS.add("GroupQueryAttention", _b, domain=MS, since=1, until=1, check=_c, shape_inputs=(6,),
        kernels=(_GQA_PRESENT, _GQA_MASK), **{k: v for k, v in _types(_gqa_types).items() if k != "shape_inputs"},
        note="Split (packed), RotaryEmbedding (do_rotary), the present written as onnxruntime's CPU kernel "
             "writes it, the standard Attention over it with the causal/window mask of seqlens_k")


# =============================================================================
# RotaryEmbedding (com.microsoft)
# =============================================================================
def _rope_types(ctx):
    return [(ctx.in_shapes[0], _dt(ctx, 0))]


def _rope_plan(ctx):
    op = "RotaryEmbedding"
    a = ctx.attrs
    if float(a.get("scale", 1.0)) != 1.0:
        return f"{op} (com.microsoft): scale != 1 is not supported"
    if int(a.get("is_packed_batching", 0)):
        return f"{op} (com.microsoft): is_packed_batching is not supported"
    f = Flow(ctx)
    if not all(f.has(f"in{i}") for i in range(4)):
        return f"{op}: input, position_ids, cos_cache and sin_cache need known shapes"
    xs = f.shape("in0")
    if len(xs) == 3:
        B, S = xs[0], xs[1]
    elif len(xs) == 4:
        B, S = xs[0], xs[2]
    else:
        return f"{op}: input must be 3-D or 4-D"
    half = f.shape("in2")[-1]
    R = int(a.get("rotary_embedding_dim", 0)) or 2 * half
    H = int(a.get("num_heads", 0))
    if len(xs) == 3 and H <= 0:
        if xs[2] % (2 * half):
            return f"{op}: hidden size {xs[2]} is not a multiple of the caches' head size {2 * half}"
        H = xs[2] // (2 * half)
    pos = "in1"
    if f.dtype(pos) != I64:
        return f"{op}: position_ids must be int64"
    if f.shape(pos) == (1,):
        p = f.temp("pos", (B, S), np.int64)
        f.step("Add", [f.const("steps", np.broadcast_to(np.arange(S, dtype=np.int64), (B, S))), pos], [p])
        pos = p
    elif f.shape(pos) != (B, S):
        return f"{op}: position_ids must be ({B}, {S}) or (1,), got {f.shape(pos)}"
    attrs = dict(interleaved=int(a.get("interleaved", 0)), rotary_embedding_dim=R)
    if len(xs) == 3:
        attrs["num_heads"] = H
    f.step("RotaryEmbedding", ["in0", "in2", "in3", pos], ["out0"], opset=23, **attrs)
    return f


_c, _b = flow_op(_rope_plan)
OPS.add("RotaryEmbedding", _b, domain=MS, since=1, until=1, check=_c, **_types(_rope_types),
        note="the standard RotaryEmbedding (opset 23), inputs reordered; a (1,) position_ids is an offset")
