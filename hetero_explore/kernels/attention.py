"""The attention family as direct kernels: Attention (schema versions 23-25),
FlexAttention (ai.onnx.preview 1, without its score_mod/prob_mod subgraphs),
RotaryEmbedding (23), CausalConvWithState (27), SwiGLU (28), LinearAttention (27),
for float32, float16 and bfloat16 -- one definition each, both targets.

Without these the ops ran only through onnx's function bodies, float32 only.

Half types are computed in float32 **with the roundings onnx's reference
makes** (``onnx/reference/ops/op_attention.py`` and friends, in numpy's or
ml_dtypes' arithmetic): every value the reference holds in the half type is
rounded to it (:func:`round_to`, round to nearest even on the float32 value)
at the same step, every sum the reference accumulates in float32 (numpy's and
ml_dtypes' half matmul, numpy's float16 sum) is accumulated in float32 and
rounded once, and ml_dtypes' bfloat16 sum (a reduction of bfloat16 additions) is
rounded after every addition. SwiGLU's and FlexAttention's cases expect other
roundings (onnx computed SwiGLU's half case in float32 and rounded once;
FlexAttention's reference runs the softmax and P.V in float32), which those two
follow. The conformance runner compares with
``rtol = 1e-4`` -- below a half ULP -- so "computed in float32, rounded once at
the outputs" would not reproduce the expected values; this does, bit for bit in
the cases onnx ships (the float32 sums run in ascending index order, where
numpy's pairwise sum may add in another order: a difference that reaches the
half result only at a rounding tie). Half inputs are widened to float32 and
half outputs narrowed (exact: the values are already representable) by
:func:`.elementwise.half_build`.

Attention, per output row (batch b, query head h, query i), one item:

1. scores for every key j (past keys first, then the new ones, as the present
   key): ``s = sum_d rnd(q[d] * c) * rnd(k[j, d] * c)`` over ascending d,
   ``c = T(sqrt(scale))`` (scale defaults to 1/sqrt(head size)), ``s = rnd(s)``;
   softcap > 0: ``s = tanh(s / cap) * cap`` in float32 (onnx's reference holds the attribute
   as a numpy float32, which promotes half scores to float32 from there on: x and the
   softmax are then not rounded to the half type either);
2. the bias of (i, j): the mask value (bool: 0 / -inf; past the mask's last
   dimension: -inf), plus -inf where the causal frontier ``j <= i + offset``,
   the sliding window or the non-padded length (``nonpad_kv_seqlen``) excludes
   j; ``x = rnd(s + bias)``;
3. softmax over j: ``m = max x`` (0 when -inf), ``e = rnd(exp(rnd(x - m)))``,
   ``t = sum e`` ascending, ``p = rnd(e / t)`` (t = 0 -> 1); a row whose
   biases are all -inf gets p = 0 (onnx's fully-masked-row guard);
   ``softmax_precision`` = float computes this step without half roundings;
4. ``y[dv] = rnd(sum_j p_j * v[j, dv])`` over ascending j.

Both sums (steps 1 and 4) are the kernel contract's multiply-accumulate: ``acc = fma(a, b,
acc)`` in float32 (:func:`.fmadd.fma`, the exact product plus acc rounded once).

``qk_matmul_output`` is s (modes 0 and 1, as onnx's reference), x (mode 2) or p
(mode 3). GQA maps query head h to key head ``h // (q_heads / kv_heads)``.
Every step is a fixed sequence of float32 operations with pmath's exp/tanh,
so both targets give the same bits.

LinearAttention keeps every column j of a (batch, kv head) state independent under all four
update rules (``(S^T k)[j] = sum_i S[i, j] k[i]``), so one item owns column j of
``present_state`` and walks the sequence: gated ``S[:, j] *= exp(g_t)`` (per head or per key
dim), delta ``u = beta_t (v_t[j] - sum_i S[i, j] k_t[i])``, write ``S[i, j] += k_t[i] u``, read
``y[t, qh, j] = scale * sum_i q_t[qh, i] S[i, j]`` for each query head of the group. onnx's
reference computes it in float32 whatever the input type and rounds once at the outputs, which
:func:`half_build` does for the half types.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import njit

from ..ir.errors import ExecutionError
from .common import attr_str, broadcast_strides, dual, flat, kernel_pair, node_error as _err
from .fmadd import fma
from .elementwise import HALF, half_build
from .opdef import OpList
from .pmath import exp_f32, sigmoid_f32, tanh_f32

OPS = OpList()

_JIT = dict(cache=True, error_model="numpy")
F32 = np.float32
#: rounding codes: 0 float32 (none), 1 float16, 2 bfloat16
_RD = {"float32": 0, "float16": 1, "bfloat16": 2}
_NEG_INF = np.float32(-np.inf)
_FLOATS = ("float32",) + HALF


_F16_BIG = F32(65520.0)            # float16: at and above this, rounding gives inf
_F16_TINY = F32(2.0 ** -14)        # float16's least normal number
_BF16_TINY = F32(2.0 ** -126)
_HALF = F32(0.5)                   # ulp 2**-24: float16's subnormal quantum
_BF16_SUB = F32(2.0 ** -110)       # ulp 2**-133: bfloat16's subnormal quantum
_BIG = F32(2.0 ** 100)
_DOWN, _UP = F32(2.0 ** -64), F32(2.0 ** 64)


@njit(**_JIT)
def round_to(x, rd):
    """The float32 ``x`` rounded to float16 (rd=1) or bfloat16 (rd=2), round to nearest
    even, as a float32 (rd=0: x), in float32 arithmetic only. Normal range: Veltkamp's
    split ``c = (2**s + 1) |x|; c - (c - |x|)`` (s = 24 - the format's significand bits)
    keeps the leading bits of |x| rounded to nearest, ties to even (checked against numpy's
    and ml_dtypes' casts on ~10**7 values and every tie, tests); subnormal range:
    ``(|x| + k) - k`` with k's ulp the format's subnormal quantum; float16 overflow gives inf
    (bfloat16's: float32's own). Signs (of zeros too) kept; NaN and inf pass."""
    x = np.float32(x)
    if rd == 0 or x != x or x == np.float32(0) or x - x != np.float32(0):
        return x
    a = abs(x)
    if rd == 1:
        if a >= _F16_BIG:
            r = a * _UP * _UP * _UP           # inf
        elif a < _F16_TINY:
            r = (a + _HALF) - _HALF
        else:
            c = np.float32(8193.0) * a
            r = c - (c - a)
    else:
        if a < _BF16_TINY:
            r = (a + _BF16_SUB) - _BF16_SUB
        elif a >= _BIG:
            b = a * _DOWN
            c = np.float32(65537.0) * b
            r = (c - (c - b)) * _UP
        else:
            c = np.float32(65537.0) * a
            r = c - (c - a)
    return r if x > np.float32(0) else -r


# =============================================================================
# Attention
# =============================================================================
# meta (int64): 0 B, 1 Hq, 2 Hk, 3 Lq, 4 Lkv, 5 D, 6 Dv, 7..10 Q strides (b, h, i, d),
# 11..14 Y strides (b, h, i, dv), 15 mask kind (0 none, 1 float, 2 bool), 16 Lm (mask's last
# dim), 17..19 mask strides (b, h, i), 20 causal, 21 left window, 22 right window,
# 23 has nonpad, 24 past length, 25 qk mode (-1: no qk output), 26 rd, 27 rd of the softmax,
# 28 round the probabilities to the input type before P.V (Attention: 1; FlexAttention: 0)
_M = 29


@dual
def _attn_row(r, q, pk, pv, maskf, maskb, nonpad, y, qk, S, meta, c, cap):
    Hq = meta[1]
    Hk = meta[2]
    Lq = meta[3]
    Lkv = meta[4]
    D = meta[5]
    Dv = meta[6]
    rd = meta[26]
    rds = meta[27]
    mode = meta[25]
    rdx = rd if cap <= np.float32(0) else 0
    i = r % Lq
    h = (r // Lq) % Hq
    b = r // (Lq * Hq)
    hk = h // (Hq // Hk)
    qo = b * meta[7] + h * meta[8] + i * meta[9]
    kb = (b * Hk + hk) * Lkv
    so = r * Lkv
    # the causal / window frontier offset
    if meta[24] > 0:
        off = meta[24]
    elif meta[23] != 0:
        off = nonpad[b] - Lq
    else:
        off = 0
    allm = True
    m = _NEG_INF
    for j in range(Lkv):
        ko = (kb + j) * D
        acc = np.float32(0)
        for d in range(D):
            acc = fma(round_to(q[qo + d * meta[10]] * c, rd), round_to(pk[ko + d] * c, rd), acc)
        s = round_to(np.float32(acc), rd)
        if cap > np.float32(0):
            s = tanh_f32(s / cap) * cap
        bias = np.float32(0)
        if meta[15] != 0:
            if j < meta[16]:
                mo = b * meta[17] + h * meta[18] + i * meta[19] + j
                if meta[15] == 1:
                    bias = maskf[mo]
                elif not maskb[mo]:
                    bias = _NEG_INF
            else:
                bias = _NEG_INF
        ok = True
        if meta[20] != 0 and j > i + off:
            ok = False
        diff = (i + off) - j
        if meta[21] >= 0 and diff > meta[21]:
            ok = False
        if meta[22] >= 0 and -diff > meta[22]:
            ok = False
        if meta[23] != 0 and j >= nonpad[b]:
            ok = False
        if not ok:
            bias = bias + _NEG_INF
        if bias != _NEG_INF:
            allm = False
        x = round_to(s + bias, rdx)
        S[so + j] = x
        if mode == 0 or mode == 1:
            qk[so + j] = s
        elif mode == 2:
            qk[so + j] = x
        if j == 0 or x > m:
            m = x
    if m == _NEG_INF:
        m = np.float32(0)
    t = np.float32(0)
    for j in range(Lkv):
        e = round_to(exp_f32(round_to(S[so + j] - m, rds)), rds)
        S[so + j] = e
        t = t + e
        if rds == 2:
            t = round_to(t, 2)
    t = round_to(t, rds)
    if t == np.float32(0):
        t = np.float32(1)
    for j in range(Lkv):
        p = round_to(S[so + j] / t, rds)
        if allm:
            p = np.float32(0)
        if meta[28] != 0:
            p = round_to(p, rd)
        S[so + j] = p
        if mode == 3:
            qk[so + j] = p
    yo = b * meta[11] + h * meta[12] + i * meta[13]
    vb = (b * Hk + hk) * Lkv
    for dv in range(Dv):
        acc = np.float32(0)
        for j in range(Lkv):
            acc = fma(S[so + j], pv[(vb + j) * Dv + dv], acc)
        y[yo + dv * meta[14]] = round_to(np.float32(acc), rd)


_ATTN = kernel_pair("attention_row", "q, pk, pv, maskf, maskb, nonpad, y, qk, S, meta, c, cap, rows",
                    "_attn_row(r, q, pk, pv, maskf, maskb, nonpad, y, qk, S, meta, c, cap)",
                    count="rows", index="r", module=__name__)


@dual
def _kv_item(t, past, new, out, P, L, H, D, ns):
    """present[b, h, j, d] = past[b, h, j, d] (j < P) else new[b, h, j - P, d] (strided)."""
    d = t % D
    j = (t // D) % (P + L)
    bh = t // (D * (P + L))
    h = bh % H
    b = bh // H
    if j < P:
        out[t] = past[(bh * P + j) * D + d]
    else:
        out[t] = new[b * ns[0] + h * ns[1] + (j - P) * ns[2] + d * ns[3]]


_KV = kernel_pair("attention_kv", "past, new, out, P, L, H, D, ns", "_kv_item(i, past, new, out, P, L, H, D, ns)",
                  count="out.shape[0]", module=__name__)


def _out(outputs, k):
    return outputs[k] if k < len(outputs) else None


def _geometry(ctx):
    """(B, Hq, Hk, Lq, L, D, Dv, Q strides, K strides, V strides, Y strides) or a reason."""
    qs, ks, vs = (ctx.in_shapes[i] for i in range(3))
    a = ctx.attrs
    if qs is None or ks is None or vs is None:
        return "Attention: Q, K and V shapes must be known"
    if not (len(qs) == len(ks) == len(vs)) or len(qs) not in (3, 4):
        return f"Attention: Q, K, V must all be 3-D or all 4-D (got ranks {len(qs)}, {len(ks)}, {len(vs)})"
    if len(qs) == 4:
        B, Hq, Lq, D = qs
        _, Hk, L, Dk = ks
        Hv, Lv, Dv = vs[1], vs[2], vs[3]
        if ks[0] != B or vs[0] != B or Dk != D or Hv != Hk or Lv != L:
            return f"Attention: inconsistent Q {qs}, K {ks}, V {vs}"
        st = lambda H, Ln, Dd: (H * Ln * Dd, Ln * Dd, Dd, 1)  # noqa: E731
        qst, kst, vst = st(Hq, Lq, D), st(Hk, L, D), st(Hk, L, Dv)
        yst = st(Hq, Lq, Dv)
    else:
        Hq, Hk = int(a.get("q_num_heads", 0)), int(a.get("kv_num_heads", 0))
        if Hq <= 0 or Hk <= 0:
            return "Attention: 3-D inputs need q_num_heads and kv_num_heads"
        B, Lq, hq = qs
        _, L, hk = ks
        hv = vs[2]
        if hq % Hq or hk % Hk or hv % Hk or ks[0] != B or vs[0] != B or vs[1] != L:
            return f"Attention: Q {qs}, K {ks}, V {vs} do not split into {Hq}/{Hk} heads"
        D, Dv = hq // Hq, hv // Hk
        if hk // Hk != D:
            return f"Attention: Q and K head sizes differ ({D} vs {hk // Hk})"
        st = lambda H, Ln, Dd: (Ln * H * Dd, Dd, H * Dd, 1)  # noqa: E731
        qst, kst, vst = st(Hq, Lq, D), st(Hk, L, D), st(Hk, L, Dv)
        yst = st(Hq, Lq, Dv)
    if Hk <= 0 or Hq % Hk:
        return f"Attention: {Hq} query heads are not a multiple of {Hk} key/value heads"
    return B, Hq, Hk, Lq, L, D, Dv, qst, kst, vst, yst


def _dt(ctx, i):
    return None if i >= len(ctx.in_dtypes) or ctx.in_dtypes[i] is None else np.dtype(ctx.in_dtypes[i]).name


def _check_attention(ctx, target):
    g = _geometry(ctx)
    if isinstance(g, str):
        return g
    t = _dt(ctx, 0)
    if t not in _FLOATS:
        return f"Attention: Q dtype {t} not supported (float32, float16, bfloat16)"
    if _dt(ctx, 1) != t or _dt(ctx, 2) != t:
        return "Attention: K and V must have Q's dtype"
    if ctx.has_input(3):
        md = _dt(ctx, 3)
        if md not in ("bool", t):
            return f"Attention: attn_mask dtype {md} not supported (bool or Q's dtype {t})"
        ms = ctx.in_shapes[3]
        if ms is None or not 1 <= len(ms) <= 4:
            return "Attention: attn_mask shape must be known, rank 1 to 4"
        lead = tuple(ms[:-1])
        tgt = (g[0], g[1], g[3])
        pad = (1,) * (3 - len(lead)) + lead
        if any(p not in (1, d) for p, d in zip(pad, tgt)) or ms[-1] > ctx.in_shapes[1][-2] + (
                ctx.in_shapes[4][2] if ctx.has_input(4) and ctx.in_shapes[4] is not None else 0):
            return f"Attention: attn_mask {tuple(ms)} does not broadcast to (batch, heads, q, kv)"
    if ctx.has_input(4) != ctx.has_input(5):
        return "Attention: past_key and past_value must be given together"
    if ctx.has_input(4):
        ps, pvs = ctx.in_shapes[4], ctx.in_shapes[5]
        B, Hq, Hk, Lq, L, D, Dv = g[:7]
        if ps is None or pvs is None or len(ps) != 4 or len(pvs) != 4 or tuple(ps[:2]) != (B, Hk) \
                or ps[3] != D or tuple(pvs[:2]) != (B, Hk) or pvs[3] != Dv or pvs[2] != ps[2]:
            return "Attention: past_key/past_value must be (batch, kv_heads, past, head size)"
        if _dt(ctx, 4) != t or _dt(ctx, 5) != t:
            return "Attention: past_key/past_value must have Q's dtype"
    if ctx.has_input(6):
        if ctx.has_input(4):
            return "Attention: nonpad_kv_seqlen cannot be combined with past_key/past_value"
        ns = ctx.in_shapes[6]
        if _dt(ctx, 6) != "int64" or ns is None or tuple(ns) != (g[0],):
            return "Attention: nonpad_kv_seqlen must be int64 of shape (batch,)"
    sp = int(ctx.attrs.get("softmax_precision", 0))
    own = {"float32": 1, "float16": 10, "bfloat16": 16}[t]
    if sp not in (0, 1, own) and not (sp == 11 and t == "float32"):
        return f"Attention: softmax_precision {sp} not supported (float, or the input's type)"
    if int(ctx.attrs.get("qk_matmul_output_mode", 0)) not in (0, 1, 2, 3):
        return "Attention: qk_matmul_output_mode must be 0..3"
    for w in ("left_window_size", "right_window_size"):
        if int(ctx.attrs.get(w, -1)) < -1:
            return f"Attention: {w} must be -1 or >= 0"
    if len(ctx.in_shapes[0]) == 4 and ctx.opset >= 25 and (
            "q_num_heads" in ctx.attrs or "kv_num_heads" in ctx.attrs):
        return "Attention: q_num_heads/kv_num_heads must not be given for 4-D inputs"
    return None


def _half_dtype(t):
    if t == "float16":
        return np.float16
    if t == "bfloat16":
        import ml_dtypes
        return ml_dtypes.bfloat16
    return np.float32


def _build_attention32(ctx, target, t, flex=False):
    """The Attention kernel on float32 arrays, rounding as dtype ``t`` (see module docs);
    ``flex``: FlexAttention's (softmax and P.V in float32, scale's square root in float32)."""
    why = (_check_flex if flex else _check_attention)(ctx, target)
    if why:
        raise _err(ctx, why)
    B, Hq, Hk, Lq, L, D, Dv, qst, kst, vst, yst = _geometry(ctx)
    a = ctx.attrs
    rd = _RD[t]
    T = _half_dtype(t)
    # onnx's reference holds float attributes as numpy float32 scalars: sqrt(scale) in float32
    # for a given scale, in float64 for the default 1/sqrt(head size); a softcap promotes the
    # half-type scores to float32 from the softcap on (and the softmax with them)
    scale = a.get("scale")
    root = np.sqrt(1 / np.sqrt(D)) if scale is None else np.sqrt(np.float32(scale))
    if flex:
        root = np.sqrt(np.float32(1 / np.sqrt(D) if scale is None else scale))
    c = np.float32(T(root))
    cap = np.float32(a.get("softcap", 0.0))
    cap = cap if cap > 0 else np.float32(0)
    P = int(ctx.in_shapes[4][2]) if ctx.has_input(4) else 0
    Lkv = P + L
    mode_attr = int(a.get("qk_matmul_output_mode", 0))
    has_qk = len(ctx.node.outputs) > 3 and bool(ctx.node.outputs[3])
    sp = int(a.get("softmax_precision", 0))
    rds = 0 if (sp in (1, 11) or flex or cap > 0) else rd
    meta = np.zeros(_M, np.int64)
    meta[:7] = (B, Hq, Hk, Lq, Lkv, D, Dv)
    meta[7:11] = qst
    meta[11:15] = yst
    if ctx.has_input(3):
        ms = tuple(ctx.in_shapes[3])
        Lm = int(ms[-1])
        lead = (1,) * (3 - len(ms[:-1])) + tuple(ms[:-1])
        mst = broadcast_strides(lead, (B, Hq, Lq)) * Lm
        meta[15] = 2 if _dt(ctx, 3) == "bool" else 1
        meta[16] = Lm
        meta[17:20] = mst
    meta[20] = int(a.get("is_causal", 0))
    meta[21] = int(a.get("left_window_size", -1))
    meta[22] = int(a.get("right_window_size", -1))
    meta[23] = int(ctx.has_input(6))
    meta[24] = P
    meta[25] = mode_attr if has_qk else -1
    meta[26] = rd
    meta[27] = rds
    meta[28] = 0 if flex else 1
    rows = B * Hq * Lq
    dmeta = target.to_device(meta)
    kst_d = target.to_device(np.asarray(kst, np.int64))
    vst_d = target.to_device(np.asarray(vst, np.int64))
    dummy_f = target.to_device(np.zeros(1, np.float32))
    dummy_b = target.to_device(np.zeros(1, np.bool_))
    dummy_i = target.to_device(np.zeros(1, np.int64))

    def temp(n):
        z = np.empty(max(n, 1), np.float32)
        return z if target.host else target.to_device(z)

    def run(inputs, outputs):
        q, k, v = flat(inputs[0]), flat(inputs[1]), flat(inputs[2])
        mask = inputs[3] if len(inputs) > 3 else None
        past_k = inputs[4] if len(inputs) > 4 else None
        past_v = inputs[5] if len(inputs) > 5 else None
        nonpad = inputs[6] if len(inputs) > 6 else None
        y = flat(outputs[0])
        pk, pv, qk = _out(outputs, 1), _out(outputs, 2), _out(outputs, 3)
        pk = temp(B * Hk * Lkv * D) if pk is None else flat(pk)
        pv = temp(B * Hk * Lkv * Dv) if pv is None else flat(pv)
        qk = temp(1) if qk is None else flat(qk)
        target.launch(_KV, B * Hk * Lkv * D, dummy_f if past_k is None else flat(past_k), k, pk, P, L, Hk, D, kst_d)
        target.launch(_KV, B * Hk * Lkv * Dv, dummy_f if past_v is None else flat(past_v), v, pv, P, L, Hk, Dv, vst_d)
        S = temp(rows * Lkv)
        mf = flat(mask) if mask is not None and meta[15] == 1 else dummy_f
        mb = flat(mask) if mask is not None and meta[15] == 2 else dummy_b
        npd = flat(nonpad) if nonpad is not None else dummy_i
        target.launch(_ATTN, rows, q, pk, pv, mf, mb, npd, y, qk, S, dmeta, c, cap, rows)

    return run


def _typed_build(build32):
    """A build that rounds as the node's input type: half inputs widened, outputs narrowed
    by :func:`half_build`, the kernel told which type's roundings to make."""

    def build(ctx, target):
        t = _dt(ctx, 0)
        return half_build(functools.partial(build32, t=t))(ctx, target)

    return build


OPS.add("Attention", _typed_build(_build_attention32), since=23, until=28, dtypes=_FLOATS,
        check=_check_attention, kernels=(_ATTN, _KV),
        note="one row per item: scores, bias (mask/causal/window/nonpad), softmax, P.V in ascending "
             "order; half types round where onnx's reference does")


def _check_flex(ctx, target):
    """FlexAttention (ai.onnx.preview, 1) without score_mod/prob_mod subgraphs: Attention's
    kernel with the softmax and P.V in float32 (onnx's reference, ``op_flex_attention.py``)."""
    for g in ("score_mod", "prob_mod"):
        if g in ctx.attrs:
            return f"FlexAttention: the {g} subgraph is not supported by the kernel"
    qs = ctx.in_shapes[0]
    if qs is None or len(qs) != 4:
        return "FlexAttention: Q, K, V must be 4-D with known shapes"
    why = _geometry(ctx)
    if isinstance(why, str):
        return why.replace("Attention:", "FlexAttention:")
    t = _dt(ctx, 0)
    if t not in _FLOATS or _dt(ctx, 1) != t or _dt(ctx, 2) != t:
        return f"FlexAttention: Q, K, V must share one dtype of float32, float16, bfloat16 (got {t})"
    if int(ctx.attrs.get("softmax_precision", 1)) != 1:
        return "FlexAttention: softmax_precision other than float is not supported"
    return None


OPS.add("FlexAttention", _typed_build(functools.partial(_build_attention32, flex=True)),
        domain="ai.onnx.preview", since=1, until=1, dtypes=_FLOATS, check=_check_flex, kernels=(_ATTN, _KV),
        note="without score_mod/prob_mod: Attention's row kernel, softmax and P.V in float32")


# =============================================================================
# SwiGLU: y = a * sigmoid(alpha * a) * b (the reference's roundings in the half types)
# =============================================================================
@njit(**_JIT)
def _swiglu(a, b, na, rd):
    t = round_to(na * a, rd)
    e = round_to(exp_f32(t), rd)
    s = round_to(np.float32(1) / round_to(np.float32(1) + e, rd), rd)
    return round_to(round_to(a * s, rd) * b, rd)


_SWIGLU = kernel_pair("swiglu", "a, b, out, na, rd", "out[i] = _swiglu(a[i], b[i], na, rd)", module=__name__)


def _check_swiglu(ctx, target):
    sa, sb = ctx.in_shapes[0], ctx.in_shapes[1]
    if sa is None or sb is None or tuple(sa) != tuple(sb):
        return "SwiGLU: A and B must have the same known shape (no broadcasting)"
    if _dt(ctx, 0) != _dt(ctx, 1):
        return "SwiGLU: A and B must have the same dtype"
    return None


def _build_swiglu32(ctx, target, t):
    why = _check_swiglu(ctx, target)
    if why:
        raise _err(ctx, why)
    alpha = float(ctx.attrs.get("alpha", 1.0))
    na = np.float32(-alpha)
    rd = 0      # onnx's half cases expect the float32 result rounded once (backend/test/case/node/swiglu.py)

    def run(inputs, outputs):
        out = flat(outputs[0])
        target.launch(_SWIGLU, out.shape[0], flat(inputs[0]), flat(inputs[1]), out, na, rd)

    return run


OPS.add("SwiGLU", _typed_build(_build_swiglu32), since=28, until=28, dtypes=_FLOATS, check=_check_swiglu,
        kernels=(_SWIGLU,), note="a * (1 / (1 + exp(-alpha a))) * b, pmath exp; half: reference's roundings")


# =============================================================================
# CausalConvWithState: depthwise causal conv1d over [past_state, input], optional SiLU
# =============================================================================
@dual
def _cconv_item(t, x, w, bias, past, out, C, Lx, K, has_bias, has_past, act, rd):
    """out[b, c, l] = sum_k w[c, k] * padded[b, c, l + k] (ascending k), + bias[c]; SiLU
    (float32, as the reference) when act; padded = [past (or zeros), x] along the time axis."""
    l = t % Lx
    bc = t // Lx
    c = bc % C
    acc = np.float32(0)
    for kk in range(K):
        p = l + kk
        if p < K - 1:
            v = past[bc * (K - 1) + p] if has_past else np.float32(0)
        else:
            v = x[bc * Lx + p - (K - 1)]
        acc += w[c * K + kk] * v
    s = round_to(acc, rd)
    if has_bias:
        s = round_to(s + bias[c], rd)
    if act:
        s = s * sigmoid_f32(s)
    out[t] = round_to(s, rd)


@dual
def _cstate_item(t, x, past, st, Lx, K, has_past):
    """present_state[b, c, m] = padded[b, c, Lx + m] (the last K - 1 time steps)."""
    m = t % (K - 1)
    bc = t // (K - 1)
    p = Lx + m
    if p < K - 1:
        st[t] = past[bc * (K - 1) + p] if has_past else np.float32(0)
    else:
        st[t] = x[bc * Lx + p - (K - 1)]


_CCONV = kernel_pair("causal_conv", "x, w, bias, past, out, C, Lx, K, has_bias, has_past, act, rd",
                     "_cconv_item(i, x, w, bias, past, out, C, Lx, K, has_bias, has_past, act, rd)",
                     module=__name__)
_CSTATE = kernel_pair("causal_conv_state", "x, past, st, Lx, K, has_past",
                      "_cstate_item(i, x, past, st, Lx, K, has_past)", count="st.shape[0]", module=__name__)


def _check_cconv(ctx, target):
    xs, ws = ctx.in_shapes[0], ctx.in_shapes[1]
    if xs is None or ws is None or len(xs) != 3 or len(ws) != 3 or ws[0] != xs[1] or ws[1] != 1 or ws[2] < 1:
        return "CausalConvWithState: input (batch, channels, length) and weight (channels, 1, k) needed"
    t = _dt(ctx, 0)
    for i in (1, 2, 3):
        if ctx.has_input(i) and _dt(ctx, i) != t:
            return "CausalConvWithState: weight, bias and past_state must have the input's dtype"
    if ctx.has_input(2) and (ctx.in_shapes[2] is None or tuple(ctx.in_shapes[2]) != (xs[1],)):
        return "CausalConvWithState: bias must be (channels,)"
    if ctx.has_input(3) and (ctx.in_shapes[3] is None or tuple(ctx.in_shapes[3]) != (xs[0], xs[1], ws[2] - 1)):
        return "CausalConvWithState: past_state must be (batch, channels, k - 1)"
    act = ctx.attrs.get("activation", "none")
    act = act.decode() if isinstance(act, bytes) else act
    if act not in ("none", "silu", "swish"):
        return f"CausalConvWithState: activation {act!r} not supported (none, silu, swish)"
    return None


def _build_cconv32(ctx, target, t):
    why = _check_cconv(ctx, target)
    if why:
        raise _err(ctx, why)
    B, C, Lx = (int(v) for v in ctx.in_shapes[0])
    K = int(ctx.in_shapes[1][2])
    act = ctx.attrs.get("activation", "none")
    act = (act.decode() if isinstance(act, bytes) else act) in ("silu", "swish")
    rd = _RD[t]
    has_bias, has_past = ctx.has_input(2), ctx.has_input(3)
    dummy = target.to_device(np.zeros(1, np.float32))

    def run(inputs, outputs):
        x, w = flat(inputs[0]), flat(inputs[1])
        bias = flat(inputs[2]) if has_bias else dummy
        past = flat(inputs[3]) if has_past else dummy
        out = flat(outputs[0])
        target.launch(_CCONV, out.shape[0], x, w, bias, past, out, C, Lx, K, has_bias, has_past, act, rd)
        st = _out(outputs, 1)
        if st is not None and K > 1:
            st = flat(st)
            target.launch(_CSTATE, st.shape[0], x, past, st, Lx, K, has_past)

    return run


OPS.add("CausalConvWithState", _typed_build(_build_cconv32), since=27, until=28, dtypes=_FLOATS,
        check=_check_cconv, kernels=(_CCONV, _CSTATE),
        note="depthwise causal conv1d over [past_state, input] (ascending taps), + bias, optional SiLU")


# =============================================================================
# RotaryEmbedding (23)
# =============================================================================
@dual
def _rope_item(t, x, cosc, sinc, pos, out, S, H, Dh, R, inter, xs, has_pos, bad, npos, rd):
    """One output element (b, s, h, d) of the input in its own layout (strides xs for the
    logical (b, s, h, d) order); d < R is rotated with the cache row of (b, s)."""
    d = t % Dh
    h = (t // Dh) % H
    s = (t // (Dh * H)) % S
    b = t // (Dh * H * S)
    o = b * xs[0] + s * xs[1] + h * xs[2]
    if d >= R:
        out[o + d * xs[3]] = x[o + d * xs[3]]
        return
    half = R // 2
    if has_pos:
        p = pos[b * S + s]
        if p < 0 or p >= npos:
            bad[0] = 1
            p = 0
        row = p * half
    else:
        row = (b * S + s) * half
    if inter:
        k = d // 2
        x1 = x[o + (2 * k) * xs[3]]
        x2 = x[o + (2 * k + 1) * xs[3]]
        first = d % 2 == 0
    elif d < half:
        k = d
        x1 = x[o + d * xs[3]]
        x2 = x[o + (d + half) * xs[3]]
        first = True
    else:
        k = d - half
        x1 = x[o + k * xs[3]]
        x2 = x[o + d * xs[3]]
        first = False
    cv = cosc[row + k]
    sv = sinc[row + k]
    if first:
        y = round_to(round_to(cv * x1, rd) - round_to(sv * x2, rd), rd)
    else:
        y = round_to(round_to(sv * x1, rd) + round_to(cv * x2, rd), rd)
    out[o + d * xs[3]] = y


_ROPE = kernel_pair("rotary_embedding",
                    "x, cosc, sinc, pos, out, S, H, Dh, R, inter, xs, has_pos, bad, npos, rd",
                    "_rope_item(i, x, cosc, sinc, pos, out, S, H, Dh, R, inter, xs, has_pos, bad, npos, rd)",
                    module=__name__)


def _rope_geometry(ctx):
    xs = ctx.in_shapes[0]
    if xs is None or len(xs) not in (3, 4):
        return "RotaryEmbedding: input must be 3-D or 4-D with a known shape"
    if len(xs) == 4:
        B, H, S, Dh = xs
        st = (H * S * Dh, Dh, S * Dh, 1)
    else:
        H = int(ctx.attrs.get("num_heads", 0))
        B, S, hid = xs
        if H <= 0 or hid % H:
            return "RotaryEmbedding: 3-D input needs num_heads dividing the hidden size"
        Dh = hid // H
        st = (S * hid, hid, Dh, 1)
    R = int(ctx.attrs.get("rotary_embedding_dim", 0)) or Dh
    if R > Dh or R % 2:
        return f"RotaryEmbedding: rotary_embedding_dim {R} must be even and <= head size {Dh}"
    return B, S, H, Dh, R, st


def _check_rope(ctx, target):
    g = _rope_geometry(ctx)
    if isinstance(g, str):
        return g
    B, S, H, Dh, R, _ = g
    t = _dt(ctx, 0)
    if _dt(ctx, 1) != t or _dt(ctx, 2) != t:
        return "RotaryEmbedding: cos_cache and sin_cache must have the input's dtype"
    cs, ss = ctx.in_shapes[1], ctx.in_shapes[2]
    if cs is None or ss is None or tuple(cs) != tuple(ss):
        return "RotaryEmbedding: cos_cache and sin_cache must have the same known shape"
    if ctx.has_input(3):
        ps = ctx.in_shapes[3]
        if _dt(ctx, 3) != "int64" or ps is None or tuple(ps) != (B, S) or len(cs) != 2 or cs[1] != R // 2:
            return "RotaryEmbedding: with position_ids (batch, seq), caches must be (max_pos, rotary_dim / 2)"
    elif tuple(cs) != (B, S, R // 2):
        return "RotaryEmbedding: without position_ids, caches must be (batch, seq, rotary_dim / 2)"
    return None


def _build_rope32(ctx, target, t):
    why = _check_rope(ctx, target)
    if why:
        raise _err(ctx, why)
    B, S, H, Dh, R, st = _rope_geometry(ctx)
    inter = bool(int(ctx.attrs.get("interleaved", 0)))
    has_pos = ctx.has_input(3)
    npos = int(ctx.in_shapes[1][0])
    xs = target.to_device(np.asarray(st, np.int64))
    dummy = target.to_device(np.zeros(1, np.int64))
    rd = _RD[t]

    def run(inputs, outputs):
        out = flat(outputs[0])
        pos = flat(inputs[3]) if has_pos else dummy
        bad = target.to_device(np.zeros(1, np.int32))
        target.launch(_ROPE, out.shape[0], flat(inputs[0]), flat(inputs[1]), flat(inputs[2]), pos, out,
                      S, H, Dh, R, inter, xs, has_pos, bad, npos, rd)
        if has_pos and int(target.to_host(bad)[0]):
            p = np.asarray(target.to_host(pos)).reshape(-1)
            first = int(p[(p < 0) | (p >= npos)][0])
            raise ExecutionError(f"node {ctx.node.name!r} (RotaryEmbedding): position id {first} is out "
                                 f"of range for caches of {npos} positions (valid: 0..{npos - 1})")

    return run


OPS.add("RotaryEmbedding", _typed_build(_build_rope32), since=23, until=28, dtypes=_FLOATS, check=_check_rope,
        kernels=(_ROPE,), note="cos*x1 - sin*x2 / sin*x1 + cos*x2 per rotated pair; position ids range-checked")


# =============================================================================
# LinearAttention (27): linear / gated / delta / gated_delta recurrent state updates
# =============================================================================
# meta (int64): 0 T, 1 Hq, 2 Hkv, 3 Dk, 4 Dv, 5 decay mode (0 none, 1 per head, 2 per key dim),
# 6 beta last dim (0 none, 1 or Hkv), 7 has past
_LA_M = 8


@dual
def _linattn_item(c, q, k, v, past, decay, beta, y, st, meta, scale):
    """Column j of one (batch b, key/value head h) state, walked over time (onnx's
    reference, ``op_linear_attention.py``, in float32): S[:, j] *= exp(g_t) (gated),
    u = beta_t * (v_t[j] - sum_i S[i, j] k_t[i]) (delta; else u = v_t[j]),
    S[i, j] += k_t[i] u, then for each query head of h's group
    y[b, t, qh, j] = scale * sum_i q_t[qh, i] S[i, j]; every sum in ascending i."""
    T, Hq, Hk, Dk, Dv = meta[0], meta[1], meta[2], meta[3], meta[4]
    gmode, nb, has_past = meta[5], meta[6], meta[7]
    G = Hq // Hk
    j = c % Dv
    bh = c // Dv
    h = bh % Hk
    b = bh // Hk
    so = bh * Dk * Dv + j                       # state[b, h, i, j] at so + i * Dv
    for i in range(Dk):
        st[so + i * Dv] = past[so + i * Dv] if has_past else np.float32(0)
    for t in range(T):
        bt = b * T + t
        ko = bt * Hk * Dk + h * Dk
        if gmode == 1:
            e = exp_f32(decay[bt * Hk + h])
            for i in range(Dk):
                st[so + i * Dv] = st[so + i * Dv] * e
        elif gmode == 2:
            for i in range(Dk):
                st[so + i * Dv] = st[so + i * Dv] * exp_f32(decay[ko + i])
        u = v[bt * Hk * Dv + h * Dv + j]
        if nb > 0:
            r = np.float32(0)
            for i in range(Dk):
                r += st[so + i * Dv] * k[ko + i]
            bv = beta[bt * nb + (h if nb > 1 else 0)]
            u = bv * (u - r)
        for i in range(Dk):
            st[so + i * Dv] = st[so + i * Dv] + k[ko + i] * u
        for g in range(G):
            qh = h * G + g
            qo = bt * Hq * Dk + qh * Dk
            acc = np.float32(0)
            for i in range(Dk):
                acc += q[qo + i] * st[so + i * Dv]
            y[bt * Hq * Dv + qh * Dv + j] = scale * acc


_LINATTN = kernel_pair("linear_attention", "q, k, v, past, decay, beta, y, st, meta, scale, items",
                       "_linattn_item(i, q, k, v, past, decay, beta, y, st, meta, scale)",
                       count="items", module=__name__)

_LA_RULES = ("linear", "gated", "delta", "gated_delta")



def _linattn_geometry(ctx):
    """(B, T, Hq, Hkv, Dk, Dv, decay mode, beta last dim, has past) or a reason."""
    a = ctx.attrs
    rule = attr_str(ctx, "update_rule", "gated_delta")
    if rule not in _LA_RULES:
        return f"LinearAttention: update_rule {rule!r} not supported ({', '.join(_LA_RULES)})"
    Hq, Hk = int(a.get("q_num_heads", 0)), int(a.get("kv_num_heads", 0))
    if Hq <= 0 or Hk <= 0 or Hq % Hk:
        return (f"LinearAttention: q_num_heads ({Hq}) must be a positive multiple of "
                f"kv_num_heads ({Hk})")
    qs, ks, vs = (ctx.in_shapes[i] for i in range(3))
    if qs is None or ks is None or vs is None or any(s is None for s in (*qs, *ks, *vs)):
        return "LinearAttention: query, key and value shapes must be known"
    if not (len(qs) == len(ks) == len(vs) == 3):
        return f"LinearAttention: query, key, value must be 3-D (B, T, H*D) (got {qs}, {ks}, {vs})"
    B, T = int(qs[0]), int(qs[1])
    if tuple(ks[:2]) != (B, T) or tuple(vs[:2]) != (B, T):
        return f"LinearAttention: query {qs}, key {ks}, value {vs} differ in (B, T)"
    if qs[2] % Hq or ks[2] % Hk or vs[2] % Hk:
        return f"LinearAttention: query {qs}, key {ks}, value {vs} do not split into {Hq}/{Hk} heads"
    Dk, Dv = int(qs[2]) // Hq, int(vs[2]) // Hk
    if int(ks[2]) // Hk != Dk:
        return f"LinearAttention: query and key head sizes differ ({Dk} vs {int(ks[2]) // Hk})"
    gating, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    has_past, has_decay, has_beta = ctx.has_input(3), ctx.has_input(4), ctx.has_input(5)
    if gating != has_decay:
        return f"LinearAttention: update_rule {rule!r} {'requires' if gating else 'forbids'} the decay input"
    if delta != has_beta:
        return f"LinearAttention: update_rule {rule!r} {'requires' if delta else 'forbids'} the beta input"
    if has_past and (ctx.in_shapes[3] is None or tuple(ctx.in_shapes[3]) != (B, Hk, Dk, Dv)):
        return f"LinearAttention: past_state must be ({B}, {Hk}, {Dk}, {Dv}) (got {ctx.in_shapes[3]})"
    gmode = 0
    if has_decay:
        ds = ctx.in_shapes[4]
        if ds is None or len(ds) != 3 or tuple(ds[:2]) != (B, T) or ds[2] not in (Hk, Hk * Dk):
            return (f"LinearAttention: decay must be ({B}, {T}, {Hk}) per head or ({B}, {T}, {Hk * Dk}) "
                    f"per key dim (got {ds})")
        gmode = 1 if ds[2] == Hk else 2
    nb = 0
    if has_beta:
        bs = ctx.in_shapes[5]
        if bs is None or len(bs) != 3 or tuple(bs[:2]) != (B, T) or bs[2] not in (Hk, 1):
            return f"LinearAttention: beta must be ({B}, {T}, {Hk}) or ({B}, {T}, 1) (got {bs})"
        nb = int(bs[2])
    return B, T, Hq, Hk, Dk, Dv, gmode, nb, has_past


def _check_linattn(ctx, target):
    g = _linattn_geometry(ctx)
    if isinstance(g, str):
        return g
    for i in range(6):
        if ctx.has_input(i) and _dt(ctx, i) not in _FLOATS:
            return f"LinearAttention: input {i} dtype {_dt(ctx, i)} not supported (float32, float16, bfloat16)"
    t = _dt(ctx, 0)
    for i in (1, 2, 4, 5):
        if ctx.has_input(i) and _dt(ctx, i) != t:
            return "LinearAttention: key, value, decay and beta must have the query's dtype"
    return None


def _build_linattn(ctx, target):
    """Computed in float32 as onnx's reference (half inputs widened, outputs rounded once by
    :func:`half_build`)."""
    g = _check_linattn(ctx, target)
    if g:
        raise _err(ctx, g)
    B, T, Hq, Hk, Dk, Dv, gmode, nb, has_past = _linattn_geometry(ctx)
    s = float(ctx.attrs.get("scale", 0.0))
    scale = np.float32(s) if s != 0.0 else np.float32(1.0 / np.sqrt(Dk))
    meta = target.to_device(np.array([T, Hq, Hk, Dk, Dv, gmode, nb, int(has_past)], np.int64))
    dummy = target.to_device(np.zeros(1, np.float32))
    items = B * Hk * Dv
    nst = B * Hk * Dk * Dv

    def run(inputs, outputs):
        q, k, v = (flat(inputs[i]) for i in range(3))
        past = flat(inputs[3]) if has_past else dummy
        decay = flat(inputs[4]) if gmode else dummy
        beta = flat(inputs[5]) if nb else dummy
        y = flat(outputs[0])
        st = _out(outputs, 1)
        st = flat(st) if st is not None else target.to_device(np.empty(nst, np.float32))
        if items:
            target.launch(_LINATTN, items, q, k, v, past, decay, beta, y, st, meta, scale, items)

    return run


OPS.add("LinearAttention", half_build(_build_linattn), since=27, until=28, dtypes=_FLOATS,
        check=_check_linattn, kernels=(_LINATTN,),
        note="one item per (batch, kv head, value column): the column's state walked over time "
             "(decay, delta correction, outer-product write, GQA read), ascending sums, pmath exp; "
             "float32 as onnx's reference, half outputs rounded once")
