"""onnxruntime's matrix-product contrib ops, as compositions of standard ops (:mod:`.compose`).

* FusedMatMul(A, B; alpha, transA, transB): Transpose (the last two axes, where asked), MatMul,
  then Mul by alpha (when alpha != 1): ``alpha * (A . B)``, the product rounded first as
  onnxruntime's GEMM scales its sum. ``transBatchA``/``transBatchB`` are not supported.
* MatMulIntegerToFloat(A, B, a_scale, b_scale[, a_zp, b_zp, bias]):
  ``float32(MatMulInteger(A, B, a_zp, b_zp)) * (a_scale * b_scale) (+ bias)`` -- onnxruntime's
  order (the scale product first, then one multiply per element, then the bias): MatMulInteger,
  Cast, Mul, Mul, Add.
* DynamicQuantizeMatMul(A, B, b_scale[, b_zp, bias]): DynamicQuantizeLinear(A) (uint8, the
  standard op's scale and zero point), then MatMulIntegerToFloat's steps.
* QGemm(A, a_scale, a_zp, B, b_scale, b_zp[, C, y_scale, y_zp]; alpha, transA, transB): the
  exact int32 product of (A - a_zp)(B - b_zp) (Transpose, MatMulInteger), plus the int32 C,
  as float32 times ``(a_scale * b_scale) * alpha``; with ``y_scale``, QuantizeLinear to
  ``y_zp``'s type. onnxruntime requantises with one combined multiplier, so a quantised
  output may differ from its by one unit where the product sits on a rounding boundary.
* MatMulNBits(A, B, scales[, zero_points, g_idx, bias]; K, N, bits, block_size): B's
  ``bits``-bit codes (low bits first in each byte; (N, blocks, bytes per block)) dequantised
  once, when the node is built, to the float32 matrix ``float32(q - zp) * scale`` (K, N) --
  each element one exact subtraction and one correctly rounded multiply, the same bits on
  every target -- then the standard MatMul (+ Add bias). The default zero point is
  ``2**(bits - 1)``; uint8 zero points are packed like the codes. With ``accuracy_level`` 4
  onnxruntime's CPU kernel (MLAS CompInt8, on x86) first quantises A to int8 per block of
  ``block_size`` along K; so does this one (:func:`_int8_blocks`, standard ops: then A's
  quantisation is onnxruntime's, and only the order of the float sums differs).
  ``g_idx`` and float zero points are not supported.
* GatherBlockQuantized(data, indices, scales[, zero_points]; gather_axis, quantize_axis,
  block_size, bits): the table dequantised once at build time as onnxruntime's CPU kernel does
  (``float32(q - zp) * scale`` per block along ``quantize_axis``; uint8 data holds 8/bits codes
  per byte, low first, with default zero point ``2**(bits - 1)``; int4/uint4 data default to
  0), then the standard Gather. An index out of range is an error here (onnxruntime writes
  zeros for it).
"""

from __future__ import annotations

import numpy as np

from . import MS
from ..opdef import OpList
from .compose import Flow, flow_op
from .norms import _dt, _types

OPS = OpList()
F32 = np.dtype(np.float32)
_Q8 = (np.dtype(np.uint8), np.dtype(np.int8))


def _swap_last(f, name, tag):
    s = f.shape(name)
    perm = list(range(len(s)))
    perm[-2], perm[-1] = perm[-1], perm[-2]
    t = f.temp(tag, tuple(s[p] for p in perm), f.dtype(name))
    f.step("Transpose", [name], [t], perm=perm)
    return t


# -- FusedMatMul ----------------------------------------------------------------------------
def _fmm_attrs(ctx):
    return {k: int(ctx.attrs.get(k, 0)) for k in ("transA", "transB", "transBatchA", "transBatchB")}


def _fmm_types(ctx):
    a, b = ctx.in_shapes[0], ctx.in_shapes[1]
    if a is None or b is None:
        return [None]
    t = _fmm_attrs(ctx)
    if t["transA"] and len(a) >= 2:
        a = tuple(a[:-2]) + (a[-1], a[-2])
    if t["transB"] and len(b) >= 2:
        b = tuple(b[:-2]) + (b[-1], b[-2])
    s = matmul_shape(a, b)
    return [None if s is None else (s, _dt(ctx, 0))]


def _fmm_plan(ctx):
    t = _fmm_attrs(ctx)
    if t["transBatchA"] or t["transBatchB"]:
        return "FusedMatMul: transBatchA/transBatchB are not supported"
    if _dt(ctx, 0) != F32 or _dt(ctx, 1) != F32:
        return "FusedMatMul: A and B must be float32"
    f = Flow(ctx)
    if not (f.has("in0") and f.has("in1") and f.has("out0")):
        return "FusedMatMul: A, B and Y need known shapes"
    a, b = "in0", "in1"
    if t["transA"] or t["transB"]:
        if (t["transA"] and len(f.shape(a)) < 2) or (t["transB"] and len(f.shape(b)) < 2):
            return "FusedMatMul: a transposed operand must have rank >= 2"
        a = _swap_last(f, a, "at") if t["transA"] else a
        b = _swap_last(f, b, "bt") if t["transB"] else b
    alpha = np.float32(ctx.attrs.get("alpha", 1.0))
    if alpha == 1:
        f.step("MatMul", [a, b], ["out0"])
    else:
        p = f.temp("prod", f.shape("out0"))
        f.step("MatMul", [a, b], [p])
        f.step("Mul", [p, f.const("alpha", alpha)], ["out0"])
    return f


_c, _b = flow_op(_fmm_plan)
OPS.add("FusedMatMul", _b, domain=MS, since=1, until=1, check=_c, **_types(_fmm_types),
        note="Transpose (transA/transB), MatMul, Mul(alpha): alpha * (A . B)")


# -- MatMulIntegerToFloat / DynamicQuantizeMatMul ---------------------------------------------
def matmul_shape(a, b):
    """numpy's matmul result shape of shapes ``a`` and ``b`` (None when they do not multiply)."""
    if a is None or b is None or not len(a) or not len(b):
        return None
    a2 = (1,) + tuple(a) if len(a) == 1 else tuple(a)
    b2 = tuple(b) + (1,) if len(b) == 1 else tuple(b)
    if a2[-1] != b2[-2]:
        return None
    try:
        batch = tuple(np.broadcast_shapes(a2[:-2], b2[:-2]))
    except ValueError:
        return None
    out = batch + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return out


def _float_types(ctx):
    s = matmul_shape(ctx.in_shapes[0], ctx.in_shapes[1])
    return [None if s is None else (s, F32)]


def _scaled_product(f, op, a, b, azp, bzp, a_scale, b_scale, bias, out, extra=None):
    """``float32(MatMulInteger(a, b, azp, bzp) [+ extra]) * (a_scale * b_scale) [+ bias]`` into out."""
    ys = f.shape(out)
    acc = f.temp("acc", ys, np.int32)
    f.step("MatMulInteger", [a, b, azp or "", bzp or ""], [acc])
    if extra is not None:
        acc2 = f.temp("acc_c", ys, np.int32)
        f.step("Add", [acc, extra], [acc2])
        acc = acc2
    af = f.temp("acc_f", ys)
    f.step("Cast", [acc], [af], to=1)
    ss = tuple(np.broadcast_shapes(f.shape(a_scale), f.shape(b_scale)))
    mult = f.temp("mult", ss)
    f.step("Mul", [a_scale, b_scale], [mult])
    if bias:
        y = f.temp("scaled", ys)
        f.step("Mul", [af, mult], [y])
        f.step("Add", [y, bias], [out])
    else:
        f.step("Mul", [af, mult], [out])


def _mmif_plan(ctx):
    op = ctx.node.op_type
    f = Flow(ctx)
    dyn = op == "DynamicQuantizeMatMul"
    need = (0, 1, 2) if dyn else (0, 1, 2, 3)
    if not all(f.has(f"in{i}") for i in need) or not f.has("out0"):
        return f"{op}: inputs {list(need)} and the output need known shapes"
    if dyn:
        if f.dtype("in0") != F32:
            return f"{op}: A must be float32"
        b, bs = "in1", "in2"
        bzp = "in3" if f.has("in3") else ""
        bias = "in4" if f.has("in4") else ""
        ash = f.shape("in0")
        qa = f.temp("qa", ash, np.uint8)
        a_scale = f.temp("a_scale", ())
        azp = f.temp("a_zp", (), np.uint8)
        f.step("DynamicQuantizeLinear", ["in0"], [qa, a_scale, azp])
        a = qa
    else:
        a, b, a_scale, bs = "in0", "in1", "in2", "in3"
        azp = "in4" if f.has("in4") else ""
        bzp = "in5" if f.has("in5") else ""
        bias = "in6" if f.has("in6") else ""
        if f.dtype(a) not in _Q8:
            return f"{op}: A must be uint8 or int8, got {f.dtype(a)}"
    if f.dtype(b) not in _Q8:
        return f"{op}: B must be uint8 or int8, got {f.dtype(b)}"
    for s in (a_scale, bs) + ((bias,) if bias else ()):
        if f.dtype(s) != F32:
            return f"{op}: scales and bias must be float32"
    _scaled_product(f, op, a, b, azp, bzp, a_scale, bs, bias, "out0")
    return f


_c, _b = flow_op(_mmif_plan)
OPS.add("MatMulIntegerToFloat", _b, domain=MS, since=1, until=1, dtypes=("uint8", "int8"), check=_c,
        **_types(_float_types),
        note="float32(MatMulInteger) * (a_scale * b_scale) + bias: MatMulInteger, Cast, Mul, Mul, Add")
OPS.add("DynamicQuantizeMatMul", _b, domain=MS, since=1, until=1, dtypes=("float32",), check=_c,
        **_types(_float_types),
        note="DynamicQuantizeLinear(A), then float32(MatMulInteger) * (a_scale * b_scale) + bias")


# -- QGemm ----------------------------------------------------------------------------------
def _qgemm_types(ctx):
    a, b = ctx.in_shapes[0], ctx.in_shapes[3]
    if a is None or b is None or len(a) != 2 or len(b) != 2:
        return [None]
    M = a[1] if int(ctx.attrs.get("transA", 0)) else a[0]
    N = b[0] if int(ctx.attrs.get("transB", 0)) else b[1]
    dt = _dt(ctx, 8) if ctx.has_input(8) else (_dt(ctx, 0) if ctx.has_input(7) else F32)
    return [((M, N), dt)]


def _qgemm_plan(ctx):
    f = Flow(ctx)
    if not all(f.has(f"in{i}") for i in (0, 1, 2, 3, 4, 5)) or not f.has("out0"):
        return "QGemm: A, B, their scales and zero points, and Y need known shapes"
    if f.dtype("in0") not in _Q8 or f.dtype("in3") not in _Q8:
        return "QGemm: A and B must be uint8 or int8"
    if len(f.shape("in0")) != 2 or len(f.shape("in3")) != 2:
        return "QGemm: A and B must be 2-D"
    a = _swap_last(f, "in0", "at") if int(ctx.attrs.get("transA", 0)) else "in0"
    b = _swap_last(f, "in3", "bt") if int(ctx.attrs.get("transB", 0)) else "in3"
    ys = f.shape("out0")
    c = "in6" if f.has("in6") else None
    if c is not None and f.dtype(c) != np.int32:
        return "QGemm: C must be int32"
    alpha = np.float32(ctx.attrs.get("alpha", 1.0))
    bs = "in4"
    if alpha != 1:
        bs = f.temp("b_scale_alpha", f.shape("in4"))
        f.step("Mul", ["in4", f.const("alpha", alpha)], [bs])
    quantised = f.has("in7")
    yf = f.temp("y_f", ys) if quantised else "out0"
    _scaled_product(f, "QGemm", a, b, "in2", "in5", "in1", bs, "", yf, extra=c)
    if quantised:
        f.step("QuantizeLinear", [yf, "in7", "in8" if f.has("in8") else ""], ["out0"])
    return f


_c, _b = flow_op(_qgemm_plan)
OPS.add("QGemm", _b, domain=MS, since=1, until=1, dtypes=("uint8", "int8"), check=_c, **_types(_qgemm_types),
        note="int32 (A - a_zp)(B - b_zp) + C, as float32 * ((a_scale * b_scale * alpha)), "
             "QuantizeLinear(y_scale, y_zp) when given")


# -- MatMulNBits ----------------------------------------------------------------------------
def _codes(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """The first ``count`` ``bits``-bit codes of each row of ``packed`` (uint8, low bits first)."""
    p = np.asarray(packed, np.uint8)
    per = 8 // bits
    shifts = (np.arange(per, dtype=np.uint8) * bits).astype(np.uint8)
    q = (p[..., :, None] >> shifts) & np.uint8((1 << bits) - 1)
    return q.reshape(p.shape[:-1] + (p.shape[-1] * per,))[..., :count].astype(np.int32)


def _nbits_layout(ctx):
    """(K, N, bits, block size, blocks) or a reason: the shapes and types of B, scales and zero
    points checked without reading their values."""
    a = ctx.attrs
    K, N = int(a.get("K", 0)), int(a.get("N", 0))
    bits, bs = int(a.get("bits", 4)), int(a.get("block_size", 0))
    if bits not in (2, 4, 8):
        return f"MatMulNBits: bits={bits} not supported (2, 4, 8)"
    if bs < 16 or bs & (bs - 1):
        return f"MatMulNBits: block_size={bs} must be a power of 2 and >= 16"
    if ctx.has_input(4):
        return "MatMulNBits: g_idx (act-order) is not supported"
    blocks = -(-K // bs)
    shapes = {i: ctx.in_shapes[i] if i < len(ctx.in_shapes) else None for i in (1, 2, 3)}
    if ctx.const(1) is None or ctx.const(2) is None or (ctx.has_input(3) and ctx.const(3) is None):
        return "MatMulNBits: B, scales and zero_points must be constants (initializers)"
    if np.dtype(ctx.in_dtypes[1]) != np.uint8 or tuple(shapes[1]) != (N, blocks, bs * bits // 8):
        return f"MatMulNBits: B must be uint8 ({N}, {blocks}, {bs * bits // 8}), got {ctx.in_dtypes[1]} {shapes[1]}"
    if np.dtype(ctx.in_dtypes[2]) != np.float32 or int(np.prod(shapes[2])) != N * blocks:
        return f"MatMulNBits: scales must be float32 with {N * blocks} elements, got {ctx.in_dtypes[2]} {shapes[2]}"
    if ctx.has_input(3) and np.dtype(ctx.in_dtypes[3]) != np.uint8:
        return "MatMulNBits: float zero points are not supported (uint8 ones are)"
    return K, N, bits, bs, blocks


def _nbits_table(ctx, layout):
    """The dequantised B (K, N) float32."""
    K, N, bits, bs, blocks = layout
    B, sc = np.asarray(ctx.const(1)), np.asarray(ctx.const(2)).reshape(N, blocks)
    if ctx.has_input(3):
        zps = _codes(np.asarray(ctx.const(3)).reshape(N, -1), bits, blocks)
    else:
        zps = np.full((N, blocks), 1 << (bits - 1), np.int32)
    q = _codes(B.reshape(N, blocks, -1), bits, bs)                  # (N, blocks, bs)
    w = (q - zps[:, :, None]).astype(np.float32) * sc[:, :, None]   # exact difference, one rounding
    return np.ascontiguousarray(w.reshape(N, blocks * bs)[:, :K].T)


def _nbits_types(ctx):
    a = ctx.in_shapes[0]
    if a is None or len(a) < 1:
        return [None]
    return [(tuple(a[:-1]) + (int(ctx.attrs.get("N", 0)),), _dt(ctx, 0))]


def _nbits_plan(ctx):
    if _dt(ctx, 0) != F32:
        return f"MatMulNBits: A dtype {_dt(ctx, 0)} not supported (float32)"
    K = int(ctx.attrs.get("K", 0))
    if ctx.in_shapes[0] is None or ctx.in_shapes[0][-1] != K:
        return f"MatMulNBits: A's last dim must be K={K}"
    layout = _nbits_layout(ctx)
    if isinstance(layout, str):
        return layout
    f = Flow(ctx)
    if not f.has("out0"):
        return "MatMulNBits: output shape unknown"
    W = f.lazy_const("W", (K, layout[1]), np.float32, lambda: _nbits_table(ctx, layout))
    a = "in0"
    if int(ctx.attrs.get("accuracy_level", 0)) == 4:
        a = _int8_blocks(f, "in0", int(ctx.attrs.get("block_size", 0)))
        if a is None:
            return "MatMulNBits: accuracy_level 4 needs K to be a multiple of block_size"
    if f.has("in5"):
        p = f.temp("prod", f.shape("out0"))
        f.step("MatMul", [a, W], [p])
        f.step("Add", [p, "in5"], ["out0"])
    else:
        f.step("MatMul", [a, W], ["out0"])
    return f


def _int8_blocks(f, a, bs):
    """``a`` (.., K) as onnxruntime's MLAS quantises it for ``accuracy_level`` 4 (CompInt8), per
    block of ``bs`` along K: ``amax = max |a|``, ``scale = amax / 127``, ``q = round_half_even(a *
    (127 / amax))`` (0 where amax is 0), saturated to int8 -- and back, ``q * scale``: the
    product with the dequantised B is then onnxruntime's blockwise int8 product up to the
    order of its float sums. Abs, ReduceMax, Div, Equal, Where, Mul, Round, Clip, Mul."""
    s = f.shape(a)
    K = s[-1]
    if K % bs:
        return None
    blocks = tuple(s[:-1]) + (K // bs, bs)
    stat = tuple(s[:-1]) + (K // bs, 1)
    x = f.view("a_blocks", a, 0, blocks)
    ab = f.temp("a_abs", blocks)
    f.step("Abs", [x], [ab])
    amax = f.temp("a_amax", stat)
    f.step("ReduceMax", [ab, f.const("last_axis", np.array([-1], np.int64))], [amax], opset=18, keepdims=1)
    c127 = f.const("c127", np.float32(127))
    scale = f.temp("a_scale", stat)
    f.step("Div", [amax, c127], [scale])
    inv0 = f.temp("a_inv0", stat)
    f.step("Div", [c127, amax], [inv0])
    zero = f.const("f_zero", np.float32(0))
    is0 = f.temp("a_is0", stat, np.bool_)
    f.step("Equal", [amax, zero], [is0])
    inv = f.temp("a_inv", stat)
    f.step("Where", [is0, zero, inv0], [inv])
    t = f.temp("a_t", blocks)
    f.step("Mul", [x, inv], [t])
    r = f.temp("a_r", blocks)
    f.step("Round", [t], [r])
    q = f.temp("a_q", blocks)
    f.step("Clip", [r, f.const("q_lo", np.float32(-128)), f.const("q_hi", np.float32(127))], [q])
    d = f.temp("a_deq", blocks)
    f.step("Mul", [q, scale], [d])
    return f.view("a_int8", d, 0, s)


_c, _b = flow_op(_nbits_plan)
OPS.add("MatMulNBits", _b, domain=MS, since=1, until=1, check=_c, **_types(_nbits_types),
        note="B dequantised once at build (float32(q - zp) * scale, exact per element), then MatMul (+ bias)")


# -- GatherBlockQuantized -------------------------------------------------------------------
def _gbq_layout(ctx):
    """(table shape, gather axis, quantize axis, bits, block) or a reason, from the shapes and
    types alone (the table itself is computed when a build needs it)."""
    a = ctx.attrs
    if ctx.const(0) is None or ctx.const(2) is None or (ctx.has_input(3) and ctx.const(3) is None):
        return "GatherBlockQuantized: data, scales and zero_points must be constants (initializers)"
    bits, bs = int(a.get("bits", 4)), int(a.get("block_size", 128))
    if bs < 16 or bs & (bs - 1):
        return f"GatherBlockQuantized: block_size={bs} must be a power of 2 and >= 16"
    ds, ss = tuple(ctx.in_shapes[0]), tuple(ctx.in_shapes[2])
    rank = len(ds)
    gax = int(a.get("gather_axis", 0)) % max(rank, 1)
    qax = int(a.get("quantize_axis", 1)) % max(rank, 1)
    dname = np.dtype(ctx.in_dtypes[0]).name
    if np.dtype(ctx.in_dtypes[2]) != np.float32:
        return "GatherBlockQuantized: scales must be float32"
    if dname == "uint8":
        if bits not in (2, 4, 8) or gax != 0 or qax != rank - 1:
            return "GatherBlockQuantized: uint8 data needs bits 2/4/8, gather_axis 0 and the last quantize_axis"
        table = ds[:-1] + (ds[-1] * (8 // bits),)
    elif dname in ("int4", "uint4"):
        if bits != 4:
            return "GatherBlockQuantized: int4/uint4 data needs bits=4"
        table = ds
    else:
        return f"GatherBlockQuantized: data dtype {dname} not supported (uint8, int4, uint4)"
    want = table[:qax] + (-(-table[qax] // bs),) + table[qax + 1:]
    if ss != want:
        return f"GatherBlockQuantized: scales must be {want}, got {ss}"
    return table, gax, qax, bits, bs


def _gbq_table(ctx, layout):
    """The dequantised table, as onnxruntime's CPU kernel dequantises each gathered element."""
    table, gax, qax, bits, bs = layout
    data, sc = np.asarray(ctx.const(0)), np.asarray(ctx.const(2))
    zp = ctx.const(3) if ctx.has_input(3) else None
    nq = table[qax]
    blk = np.arange(nq) // bs
    if data.dtype == np.uint8:   # codes packed low bits first, default zero point 2**(bits - 1)
        q = _codes(data, bits, nq)
        z = _codes(zp, bits, sc.shape[-1]) if zp is not None else np.full(sc.shape, 1 << (bits - 1), np.int32)
    else:
        q = data.astype(np.int32)
        z = np.asarray(zp).astype(np.int32) if zp is not None else np.zeros(sc.shape, np.int32)
    return (q - np.take(z, blk, axis=qax)).astype(np.float32) * np.take(sc, blk, axis=qax)


def _gbq_types(ctx):
    data, idx = ctx.in_shapes[0], ctx.in_shapes[1]
    if data is None or idx is None:
        return [None]
    rank = len(data)
    gax = int(ctx.attrs.get("gather_axis", 0)) % max(rank, 1)
    out = list(data[:gax]) + list(idx) + list(data[gax + 1:])
    if _dt(ctx, 0) == np.uint8 and out:
        out[-1] *= 8 // int(ctx.attrs.get("bits", 4))
    return [(tuple(out), _dt(ctx, 2))]


def _gbq_plan(ctx):
    if any(ctx.in_shapes[i] is None for i in (0, 2)):
        return "GatherBlockQuantized: data and scales need known shapes"
    layout = _gbq_layout(ctx)
    if isinstance(layout, str):
        return layout
    f = Flow(ctx)
    if not f.has("in1") or not f.has("out0"):
        return "GatherBlockQuantized: indices and the output need known shapes"
    table = f.lazy_const("table", layout[0], np.float32, lambda: _gbq_table(ctx, layout))
    f.step("Gather", [table, "in1"], ["out0"], axis=layout[1])
    return f


_c, _b = flow_op(_gbq_plan)
OPS.add("GatherBlockQuantized", _b, domain=MS, since=1, until=1, dtypes=("uint8", "int4", "uint4"), check=_c,
        **_types(_gbq_types),
        note="the table dequantised once at build (float32(q - zp) * scale per block), then Gather")
