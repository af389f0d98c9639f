"""onnxruntime's contrib ops, one node at a time: each against onnxruntime's CPU kernel on the same
one-node model (its tolerance: float outputs within a few ULP-scale absolute errors, quantised
outputs within one unit where onnxruntime takes an integer shortcut), and the CUDA provider
(numba's simulator in the suite) bit for bit against the CPU provider.

The one-node models import ``com.microsoft`` version 1 beside the default domain; the loader's
path is the users' (shape inference, the op definitions' own shapes for the contrib outputs).
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

ort = pytest.importorskip("onnxruntime")

from hetero_explore.execution.runtime import run_graph  # noqa: E402
from hetero_explore.load.loader import load_model  # noqa: E402
from hetero_explore.providers.cpu import NumbaCPUProvider  # noqa: E402
from hetero_explore.providers.cuda import NumbaCUDAProvider  # noqa: E402
from support.bits import assert_bits_equal  # noqa: E402

MS = "com.microsoft"
F = np.float32
R = np.random.default_rng(7)
CPU = NumbaCPUProvider()
CUDA = NumbaCUDAProvider()


def f32(*shape, scale=1.0):
    return (R.standard_normal(shape) * scale).astype(F)


def model(op, inputs, outputs, attrs=None, const=(), domain=MS, opset=21):
    """A one-node model: ``inputs`` are (name, array or None); ``outputs`` (name, numpy dtype)."""
    names = [n if a is not None else "" for n, a in inputs]
    node = helper.make_node(op, names, [n for n, _ in outputs], domain=domain or None, **(attrs or {}))
    gin, inits = [], []
    for n, a in inputs:
        if a is None:
            continue
        a = np.asarray(a)
        if n in const:
            inits.append(numpy_helper.from_array(a, n))
        else:
            gin.append(helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape))
    gout = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.dtype(d)), None) for n, d in outputs
            if n]
    g = helper.make_graph([node], "t", gin, gout, initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)])
    m.ir_version = 9
    return m


def ours(m, feeds, provider=CPU):
    g = load_model(m, fold_constants=False, optimize=False, check=False)   # outputs declared without shapes
    got = run_graph(g, provider, feeds)
    return [got[o.name] for o in m.graph.output]


def theirs(m, feeds, threads=0):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def check(op, inputs, outputs, attrs=None, const=(), atol=2e-6, cuda=True, domain=MS, opset=21, rows=None,
          qtol=0, rtol=1e-6, threads=0, expected=None):
    """Ours (CPU) against onnxruntime; CUDA bit for bit against the CPU. ``rows``: compare only
    these leading-index rows of output 0 with onnxruntime (the rest onnxruntime leaves undefined).
    ``qtol``: integer outputs may differ from onnxruntime's by this many units. ``expected``: the
    expected outputs as a function of the feeds, for an op onnxruntime's CPU build lacks."""
    m = model(op, inputs, outputs, attrs, const, domain, opset)
    feeds = {n: np.asarray(a) for n, a in inputs if a is not None and n not in const}
    got = ours(m, feeds)
    exp = theirs(m, feeds, threads) if expected is None else expected(feeds)
    for k, (a, b) in enumerate(zip(got, exp)):
        assert a.shape == b.shape and a.dtype == b.dtype, (op, k, a.shape, b.shape, a.dtype, b.dtype)
        if k == 0 and rows is not None:
            a, b = a[rows], b[rows]
        if a.dtype.kind in "iub":
            assert np.max(np.abs(a.astype(np.int64) - b.astype(np.int64)), initial=0) <= qtol, (op, k)
        else:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"{op} output {k}")
    if cuda:
        for k, (a, b) in enumerate(zip(got, ours(m, feeds, CUDA))):
            assert_bits_equal(a, b, f"{op} output {k}: CPU vs CUDA")
    return got


# -- normalisations -----------------------------------------------------------------------------
def test_skip_layer_normalization():
    B, S, H = 2, 3, 8
    check("SkipLayerNormalization",
          [("x", f32(B, S, H)), ("skip", f32(B, S, H)), ("gamma", f32(H)), ("beta", f32(H)), ("bias", f32(H))],
          [("y", F), ("", F), ("", F), ("sum", F)], {"epsilon": 1e-5}, const=("gamma", "beta", "bias"))


def test_skip_layer_normalization_broadcast_skip_no_beta():
    check("SkipLayerNormalization", [("x", f32(2, 3, 8)), ("skip", f32(3, 8)), ("gamma", f32(8))], [("y", F)],
          const=("gamma",))


def test_skip_simplified_layer_normalization():
    B, S, H = 2, 3, 8
    check("SkipSimplifiedLayerNormalization",
          [("x", f32(B, S, H)), ("skip", f32(B, S, H)), ("gamma", f32(H)), ("bias", f32(H))],
          [("y", F), ("", F), ("", F), ("sum", F)], {"epsilon": 1e-6}, const=("gamma", "bias"))


def test_simplified_layer_normalization_default_domain():
    check("SimplifiedLayerNormalization", [("x", f32(2, 3, 8)), ("scale", f32(8))], [("y", F)],
          {"epsilon": 1e-6, "axis": -1}, const=("scale",), domain="")


def test_embed_layer_normalization():
    B, S, H = 2, 5, 8
    ids = R.integers(0, 20, (B, S)).astype(np.int32)
    seg = R.integers(0, 2, (B, S)).astype(np.int32)
    mask = np.ones((B, S), np.int32)
    mask[1, 3:] = 0
    check("EmbedLayerNormalization",
          [("ids", ids), ("seg", seg), ("word", f32(20, H)), ("pos", f32(16, H)), ("segt", f32(2, H)),
           ("gamma", f32(H)), ("beta", f32(H)), ("mask", mask)],
          [("y", F), ("mask_index", np.int32), ("sum", F)], {"epsilon": 1e-12},
          const=("word", "pos", "segt", "gamma", "beta"))


def test_embed_layer_normalization_position_ids_no_segment_no_mask():
    B, S, H = 2, 4, 8
    check("EmbedLayerNormalization",
          [("ids", R.integers(0, 20, (B, S)).astype(np.int32)), ("seg", None), ("word", f32(20, H)),
           ("pos", f32(16, H)), ("segt", None), ("gamma", f32(H)), ("beta", f32(H)), ("mask", None),
           ("pids", np.array([[3, 1, 0, 2]], np.int32))],
          [("y", F), ("mask_index", np.int32)], const=("word", "pos", "gamma", "beta"))


# -- activations --------------------------------------------------------------------------------
@pytest.mark.parametrize("op,bias", [("Gelu", False), ("BiasGelu", True), ("FastGelu", False), ("FastGelu", True),
                                     ("QuickGelu", False)])
def test_gelus(op, bias):
    x = f32(2, 3, 16, scale=2.0)
    ins = [("x", x)] + ([("b", f32(16))] if bias else [])
    check(op, ins, [("y", F)], {"alpha": 1.5} if op == "QuickGelu" else None, const=("b",), atol=3e-6)


def test_bias_add():
    # onnxruntime has BiasAdd on CUDA only: its definition, (X + bias) + skip in float32
    b = f32(8)
    check("BiasAdd", [("x", f32(2, 3, 8)), ("b", b), ("skip", f32(2, 3, 8))], [("y", F)], const=("b",),
          expected=lambda feeds: [(feeds["x"] + b) + feeds["skip"]], atol=0, rtol=0)


def test_fused_gemm_leaky_relu():
    check("FusedGemm", [("a", f32(4, 6)), ("b", f32(5, 6)), ("c", f32(5))], [("y", F)],
          {"transB": 1, "alpha": 0.5, "activation": "LeakyRelu", "activation_alpha": 0.2}, const=("b", "c"))


def test_fused_conv_relu_with_z():
    check("FusedConv", [("x", f32(1, 3, 6, 6)), ("w", f32(4, 3, 3, 3)), ("b", f32(4)), ("z", f32(1, 4, 6, 6))],
          [("y", F)], {"pads": [1, 1, 1, 1], "activation": "Relu"}, const=("w", "b"), atol=5e-6)


@pytest.mark.parametrize("ta,tb,alpha", [(0, 0, 1.0), (1, 0, 0.25), (0, 1, 2.0), (1, 1, 0.5)])
def test_fused_matmul(ta, tb, alpha):
    a = f32(2, 5, 4) if ta else f32(2, 4, 5)
    b = f32(3, 5) if tb else f32(5, 3)
    check("FusedMatMul", [("a", a), ("b", b)], [("y", F)], {"transA": ta, "transB": tb, "alpha": alpha})


# -- quantised matrix products ----------------------------------------------------------------
def test_matmul_integer_to_float_per_column():
    a = R.integers(0, 255, (2, 3, 8)).astype(np.uint8)
    b = R.integers(-128, 127, (8, 5)).astype(np.int8)
    check("MatMulIntegerToFloat",
          [("a", a), ("b", b), ("sa", np.array(0.02, F)), ("sb", np.abs(f32(5)) * 0.01),
           ("za", np.array(128, np.uint8)), ("zb", np.zeros(5, np.int8)), ("bias", f32(5))],
          [("y", F)], const=("b", "sb", "zb", "bias"))


def test_dynamic_quantize_matmul():
    check("DynamicQuantizeMatMul",
          [("a", f32(2, 4, 8)), ("b", R.integers(-128, 127, (8, 6)).astype(np.int8)), ("sb", np.array([0.01], F)),
           ("zb", np.array([0], np.int8)), ("bias", f32(6))], [("y", F)], const=("b", "sb", "zb", "bias"))


@pytest.mark.parametrize("quantised", [False, True])
def test_qgemm(quantised):
    a = R.integers(0, 255, (3, 8)).astype(np.uint8)
    b = R.integers(-128, 127, (5, 8)).astype(np.int8)
    ins = [("a", a), ("sa", np.array(0.02, F)), ("za", np.array(120, np.uint8)), ("b", b),
           ("sb", np.array(0.01, F)), ("zb", np.array(0, np.int8)), ("c", R.integers(-500, 500, (5,)).astype(np.int32))]
    out = [("y", F)]
    if quantised:
        ins += [("sy", np.array(0.05, F)), ("zy", np.array(128, np.uint8))]
        out = [("y", np.uint8)]
    check("QGemm", ins, out, {"transB": 1, "alpha": 1.0}, const=("b", "sb", "zb", "c"), qtol=1, atol=1e-5)


def _nbits(K, N, bits, bs, zp):
    blocks = -(-K // bs)
    B = R.integers(0, 256, (N, blocks, bs * bits // 8)).astype(np.uint8)
    scales = (np.abs(f32(N * blocks)) * 0.05 + 0.01).astype(F)
    ins = [("b", B), ("scales", scales)]
    if zp:
        ins.append(("zp", R.integers(0, 256, (N, -(-blocks * bits // 8))).astype(np.uint8)))
    return ins


@pytest.mark.parametrize("bits,zp,acc", [(4, True, 0), (4, False, 4), (8, True, 0), (4, True, 4)])
def test_matmul_nbits(bits, zp, acc):
    K, N, bs = 32, 6, 16
    ins = [("a", f32(2, 3, K))] + _nbits(K, N, bits, bs, zp)
    check("MatMulNBits", ins, [("y", F)], {"K": K, "N": N, "bits": bits, "block_size": bs, "accuracy_level": acc},
          const=("b", "scales", "zp"), atol=3e-6)


def test_gather_block_quantized_uint8_packed():
    data = R.integers(0, 256, (10, 16)).astype(np.uint8)          # 32 4-bit codes per row
    check("GatherBlockQuantized",
          [("data", data), ("idx", np.array([[3, 0], [9, 3]], np.int64)), ("scales", np.abs(f32(10, 2)) + 0.1),
           ("zp", R.integers(0, 256, (10, 1)).astype(np.uint8))],
          [("y", F)], {"block_size": 16, "gather_axis": 0, "quantize_axis": 1, "bits": 4},
          const=("data", "scales", "zp"))


# -- attention ----------------------------------------------------------------------------------
def _attn_inputs(B, S, H, N, P=0):
    ins = [("x", f32(B, S, H)), ("w", f32(H, 3 * H, scale=0.3)), ("bias", f32(3 * H))]
    return ins


@pytest.mark.parametrize("mask_kind", ["none", "raw2d", "lengths", "raw3d"])
def test_attention_masks(mask_kind):
    B, S, H, N = 2, 4, 8, 2
    ins = _attn_inputs(B, S, H, N)
    mask = None
    if mask_kind == "raw2d":
        mask = np.ones((B, S), np.int32)
        mask[1, 2:] = 0
    elif mask_kind == "lengths":
        mask = np.array([4, 2], np.int32)
    elif mask_kind == "raw3d":
        mask = (R.random((B, S, S)) > 0.3).astype(np.int32)
        mask[..., 0] = 1
    ins.append(("mask", mask))
    check("Attention", ins, [("y", F)], {"num_heads": N}, const=("w", "bias"), atol=3e-6)


def test_attention_unidirectional_past_present():
    B, S, H, N, P = 1, 3, 8, 2, 2
    ins = _attn_inputs(B, S, H, N) + [("mask", np.ones((B, P + S), np.int32)), ("past", f32(2, B, N, P, H // N))]
    check("Attention", ins, [("y", F), ("present", F)], {"num_heads": N, "unidirectional": 1}, const=("w", "bias"),
          atol=3e-6)


def test_attention_bias_and_mask():
    B, S, H, N = 2, 3, 8, 2
    mask = np.ones((B, S), np.int32)
    mask[0, -1] = 0
    ins = _attn_inputs(B, S, H, N) + [("mask", mask), ("past", None), ("abias", f32(1, N, S, S))]
    check("Attention", ins, [("y", F)], {"num_heads": N}, const=("w", "bias"), atol=3e-6)


def test_multi_head_attention():
    B, S, L, H, N, P = 2, 3, 3, 8, 2, 2
    mask = np.ones((B, P + L), np.int32)
    mask[0, -1] = 0
    ins = [("q", f32(B, S, H)), ("k", f32(B, L, H)), ("v", f32(B, L, H)), ("bias", f32(3 * H)), ("mask", mask),
           ("abias", None), ("pk", f32(B, N, P, H // N)), ("pv", f32(B, N, P, H // N))]
    check("MultiHeadAttention", ins, [("y", F), ("present_k", F), ("present_v", F)], {"num_heads": N},
          const=("bias",), atol=3e-6)


def _gqa(B, S, P, N, Nkv, D, seqk, total, attrs, packed=True, rotary=True):
    q = f32(B, S, (N + 2 * Nkv) * D) if packed else f32(B, S, N * D)
    ins = [("q", q), ("k", None if packed else f32(B, S, Nkv * D)), ("v", None if packed else f32(B, S, Nkv * D)),
           ("pk", f32(B, Nkv, P, D)), ("pv", f32(B, Nkv, P, D)), ("seqk", np.asarray(seqk, np.int32)),
           ("total", np.array(total, np.int32))]
    if rotary:
        ang = np.arange(32)[:, None] * (1.0 / 10000 ** (np.arange(D // 2) / (D // 2)))[None]
        ins += [("cos", np.cos(ang).astype(F)), ("sin", np.sin(ang).astype(F))]
    a = {"num_heads": N, "kv_num_heads": Nkv, "do_rotary": int(rotary)}
    a.update(attrs)
    return ins, a


@pytest.mark.parametrize("case", ["prompt", "decode", "window", "softcap", "separate_qkv"])
def test_group_query_attention(case):
    B, N, Nkv, D = 1, 4, 2, 16       # onnxruntime's CPU kernel wants head sizes that are multiples of 16
    if case == "prompt":
        ins, a = _gqa(B, 4, 0, N, Nkv, D, [3], 4, {})
    elif case == "decode":
        ins, a = _gqa(B, 1, 5, N, Nkv, D, [5], 6, {"rotary_interleaved": 1})
    elif case == "window":
        ins, a = _gqa(B, 3, 4, N, Nkv, D, [6], 7, {"local_window_size": 2})
    elif case == "softcap":
        ins, a = _gqa(B, 3, 4, N, Nkv, D, [6], 7, {"softcap": 5.0})
    else:
        ins, a = _gqa(B, 2, 3, N, Nkv, D, [4], 5, {}, packed=False, rotary=False)
    check("GroupQueryAttention", ins, [("y", F), ("present_k", F), ("present_v", F)], a,
          const=("cos", "sin", "total"), atol=5e-6, cuda=case in ("decode", "separate_qkv"))


def test_group_query_attention_padded_batch_first_prompt():
    # batch 2, right padded: onnxruntime leaves the padded query rows undefined (compared: row 0
    # whole, the valid rows of batch 1 through the present keys and values)
    ins, a = _gqa(2, 4, 0, 2, 1, 16, [3, 1], 4, {})
    m = model("GroupQueryAttention", ins, [("y", F), ("present_k", F), ("present_v", F)], a, ("cos", "sin", "total"))
    feeds = {n: v for n, v in ins if v is not None and n not in ("cos", "sin", "total")}
    got, exp = ours(m, feeds), theirs(m, feeds)
    np.testing.assert_allclose(got[0][0], exp[0][0], atol=5e-6)
    np.testing.assert_allclose(got[0][1, :2], exp[0][1, :2], atol=5e-6)
    for k in (1, 2):
        np.testing.assert_allclose(got[k][1, :, :2], exp[k][1, :, :2], atol=5e-6)


@pytest.mark.parametrize("layout,pos,inter", [("3d", "ids", 0), ("3d", "offset", 1), ("4d", "ids", 0)])
def test_rotary_embedding_contrib(layout, pos, inter):
    B, S, N, D = 2, 3, 2, 8
    x = f32(B, S, N * D) if layout == "3d" else f32(B, N, S, D)
    p = R.integers(0, 10, (B, S)).astype(np.int64) if pos == "ids" else np.array([4], np.int64)
    ang = np.arange(16)[:, None] * (1.0 / 10000 ** (np.arange(D // 2) / (D // 2)))[None]
    check("RotaryEmbedding", [("x", x), ("pos", p), ("cos", np.cos(ang).astype(F)), ("sin", np.sin(ang).astype(F))],
          [("y", F)], {"interleaved": inter, "num_heads": N if layout == "3d" else 0}, const=("cos", "sin"))


# -- QOperator ops ----------------------------------------------------------------------------
def _q(shape, dt=np.uint8):
    lo, hi = (0, 255) if dt == np.uint8 else (-128, 127)
    return R.integers(lo, hi + 1, shape).astype(dt)


def _sz(s, z, dt=np.uint8):
    return np.array(s, F), np.array(z, dt)


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_qlinear_binary(op):
    sa, za = _sz(0.05, 120)
    sb, zb = _sz(0.03, 130)
    sc, zc = _sz(0.08, 125)
    check(op, [("a", _q((2, 3, 4))), ("sa", sa), ("za", za), ("b", _q((4,))), ("sb", sb), ("zb", zb),
               ("sc", sc), ("zc", zc)], [("c", np.uint8)], const=("sb", "zb", "b"), qtol=1)


@pytest.mark.parametrize("op,attrs", [("QLinearSigmoid", {}), ("QLinearLeakyRelu", {"alpha": 0.1}),
                                      ("QLinearSoftmax", {"axis": -1, "opset": 13}),
                                      ("QLinearGlobalAveragePool", {"channels_last": 0}),
                                      ("QLinearGlobalAveragePool", {"channels_last": 1}),
                                      ("QLinearAveragePool", {"kernel_shape": [2, 2], "strides": [2, 2]})])
def test_qlinear_unary(op, attrs):
    sx, zx = _sz(0.04, 128)
    sy, zy = _sz(1 / 256 if op == "QLinearSoftmax" else 0.03, 0 if op == "QLinearSoftmax" else 128)
    x = _q((1, 3, 4, 4)) if "Pool" in op else _q((2, 5))
    check(op, [("x", x), ("sx", sx), ("zx", zx), ("sy", sy), ("zy", zy)], [("y", np.uint8)], attrs, qtol=1)


def test_qlinear_concat():
    sy, zy = _sz(0.05, 128)
    s1, z1 = _sz(0.04, 120)
    s2, z2 = _sz(0.06, 135)
    check("QLinearConcat", [("sy", sy), ("zy", zy), ("x1", _q((1, 2, 3))), ("s1", s1), ("z1", z1),
                            ("x2", _q((1, 3, 3))), ("s2", s2), ("z2", z2)], [("y", np.uint8)], {"axis": 1}, qtol=1)


def test_contrib_quantize_dequantize_int16():
    x = f32(2, 6)
    s, z = np.array(0.001, F), np.array(10, np.int16)
    q = check("QuantizeLinear", [("x", x), ("s", s), ("z", z)], [("q", np.int16)])[0]
    check("DequantizeLinear", [("q", q), ("s", s), ("z", z)], [("y", F)])


# -- DynamicQuantizeLSTM --------------------------------------------------------------------
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_dynamic_quantize_lstm(direction):
    L, B, I, H = 4, 2, 5, 6
    D = 2 if direction == "bidirectional" else 1
    W = _q((D, I, 4 * H), np.int8)
    Rw = _q((D, H, 4 * H), np.int8)
    ins = [("x", f32(L, B, I)), ("w", W), ("r", Rw), ("b", f32(D, 8 * H, scale=0.1)), ("seq", None),
           ("h0", f32(D, B, H)), ("c0", f32(D, B, H)), ("p", None), ("ws", np.full(D, 0.02, F)),
           ("wz", np.zeros(D, np.int8)), ("rs", np.abs(f32(D, 4 * H)) * 0.02 + 0.005), ("rz", np.zeros((D, 4 * H), np.int8))]
    # forward: onnxruntime's computation itself (X and h quantised); bidirectional runs the float
    # LSTM on dequantised weights, within the activations' quantisation step
    # onnxruntime quantises h per partition of the batch rows over its threads: with one thread per
    # row, row by row, as the kernel here does
    check("DynamicQuantizeLSTM", ins, [("y", F), ("yh", F), ("yc", F)], {"hidden_size": H, "direction": direction},
          const=("w", "r", "b", "ws", "wz", "rs", "rz"), atol=1e-6 if D == 1 else 2e-2, cuda=D == 1, threads=B)
