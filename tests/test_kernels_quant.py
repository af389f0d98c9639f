"""Quantisation kernels (quant.py) against onnxruntime: QuantizeLinear / DequantizeLinear
(per tensor, per axis, blocked; int8/uint8/int16/uint16; rounding ties to even, saturation),
DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv; CPU vs CUDA
simulator bitwise; declines with reasons."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

from hetero_explore.providers.cpu import NumbaCPUProvider
from hetero_explore.providers.cuda import NumbaCUDAProvider
from support.harness import run_both, infer_outputs, node_model, supports

CPU = NumbaCPUProvider()
GPU = NumbaCUDAProvider()
F = np.float32


def ort_run(node, ins, opset):
    model = node_model(node, ins, opset)
    shapes, dtypes = infer_outputs(model)
    del model.graph.output[:]
    model.graph.output.extend(
        helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(d), s)
        for o, s, d in zip([o for o in node.output if o], shapes, dtypes))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {n: a for n, a in zip(node.input, ins) if n and a is not None}
    return sess.run([o for o in node.output if o], feeds)


def both(node, ins, opset):
    return run_both(node, ins, opset)


def check(node, ins, opset, exact=True):
    got = both(node, ins, opset)
    want = ort_run(node, ins, opset)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        if exact:
            assert np.array_equal(g, w), (node.op_type, g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    return got


def mk(op, names, outs=("y",), **attrs):
    return helper.make_node(op, list(names), list(outs), name=f"{op}_n", **attrs)


RNG = np.random.default_rng(7)


@pytest.mark.parametrize("qdt", [np.int8, np.uint8, np.int16, np.uint16])
def test_quantize_per_tensor(qdt):
    x = (RNG.standard_normal((3, 7)) * 100).astype(F)
    x[0, :6] = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5]     # ties to even
    x[1, 0], x[1, 1] = 1e9, -1e9                      # saturation
    zp = np.asarray(3 if np.dtype(qdt).kind == "u" else -2, qdt)
    check(mk("QuantizeLinear", ["x", "s", "z"]), [x, np.asarray(0.5, F), zp], 21)
    if qdt == np.uint8:
        check(mk("QuantizeLinear", ["x", "s"]), [x, np.asarray(0.25, F)], 13)
        check(mk("QuantizeLinear", ["x", "s", "z"]), [x, np.asarray(0.5, F), zp], 10)


def test_quantize_int32_input():
    """int32 x (onnxruntime has no kernel for it): numpy's float32 x / 3, rint, + zp, clip."""
    x = RNG.integers(-1000, 1000, (4, 5)).astype(np.int32)
    x[0, :4] = [3 * 5 // 2, 9, -9, -15 // 2]
    (got,) = both(mk("QuantizeLinear", ["x", "s", "z"]), [x, np.asarray(2.0, F), np.asarray(-5, np.int8)], 13)
    want = np.clip(np.rint(x.astype(F) / F(2.0)) - 5, -128, 127).astype(np.int8)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_quantize_dequantize_per_axis(axis):
    x = (RNG.standard_normal((3, 4, 5)) * 20).astype(F)
    n = x.shape[axis]
    s = (RNG.random(n) + 0.1).astype(F)
    z = RNG.integers(0, 20, n).astype(np.uint8)
    (q,) = check(mk("QuantizeLinear", ["x", "s", "z"], axis=axis), [x, s, z], 13)
    check(mk("DequantizeLinear", ["q", "s", "z"], axis=axis), [q, s, z], 13, exact=True)


@pytest.mark.parametrize("qdt", [np.int8, np.int16, np.uint16])
def test_blocked(qdt):
    x = (RNG.standard_normal((2, 7, 3)) * 20).astype(F)
    s = (RNG.random((2, 3, 3)) + 0.1).astype(F)        # axis 1, block 3: ceil(7/3) = 3 blocks
    z = RNG.integers(0, 20, (2, 3, 3)).astype(qdt)
    (q,) = check(mk("QuantizeLinear", ["x", "s", "z"], axis=1, block_size=3), [x, s, z], 21)
    check(mk("DequantizeLinear", ["q", "s", "z"], axis=1, block_size=3), [q, s, z], 21)


@pytest.mark.parametrize("xdt", [np.int8, np.uint8, np.int16, np.uint16, np.int32])
def test_dequantize_types(xdt):
    info = np.iinfo(xdt)
    x = RNG.integers(max(info.min, -30000), min(info.max, 30000), (4, 6)).astype(xdt)
    z = np.asarray(0 if xdt == np.int32 else 7, xdt)
    check(mk("DequantizeLinear", ["x", "s", "z"]), [x, np.asarray(0.37, F), z], 21)


@pytest.mark.parametrize("case", ["mixed", "positive", "negative", "zeros"])
def test_dynamic_quantize(case):
    x = RNG.standard_normal((5, 300)).astype(F) * 3
    if case == "positive":
        x = np.abs(x) + 1
    elif case == "negative":
        x = -np.abs(x) - 1
    elif case == "zeros":
        x = np.zeros((3, 4), F)
    check(mk("DynamicQuantizeLinear", ["x"], ("y", "ys", "yz")), [x], 11)


@pytest.mark.parametrize("adt,bdt", [(np.uint8, np.uint8), (np.int8, np.int8), (np.uint8, np.int8)])
def test_matmul_integer(adt, bdt):
    a = RNG.integers(np.iinfo(adt).min, np.iinfo(adt).max, (2, 3, 5)).astype(adt)
    b = RNG.integers(np.iinfo(bdt).min, np.iinfo(bdt).max, (5, 4)).astype(bdt)
    if adt == bdt:
        check(mk("MatMulInteger", ["a", "b", "za", "zb"]), [a, b, np.asarray(5, adt), np.asarray(3, bdt)], 10)
    # (onnxruntime's uint8 x int8 path on x86 saturates pairs of products to int16, so mixed
    # signedness is checked against numpy only)
    # per-row / per-column zero points (onnxruntime takes only scalars): numpy in int64
    za = RNG.integers(0, 9, 3).astype(adt)
    zb = RNG.integers(0, 9, 4).astype(bdt)
    (got,) = both(mk("MatMulInteger", ["a", "b", "za", "zb"]), [a, b, za, zb], 10)
    want = (a.astype(np.int64) - za[:, None].astype(np.int64)) @ (b.astype(np.int64) - zb.astype(np.int64))
    assert got.dtype == np.int32 and np.array_equal(got, want)
    if adt == bdt:
        check(mk("MatMulInteger", ["a", "b"]), [a, b], 10)


@pytest.mark.parametrize("dt", [np.uint8, np.int8])
def test_qlinear_matmul(dt):
    lo, hi = np.iinfo(dt).min, np.iinfo(dt).max
    a = RNG.integers(lo, hi, (2, 3, 6)).astype(dt)
    b = RNG.integers(lo, hi, (6, 4)).astype(dt)
    ins = [a, np.asarray(0.02, F), np.asarray(3, dt), b, np.asarray(0.03, F), np.asarray(-2 if lo else 9, dt),
           np.asarray(0.5, F), np.asarray(1, dt)]
    check(mk("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"]), ins, 10)
    ins[4] = (RNG.random(4) * 0.05 + 0.01).astype(F)   # per-column b scale
    ins[5] = RNG.integers(0, 5, 4).astype(dt)
    check(mk("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"]), ins, 21)


CONV_ATTRS = [dict(), dict(pads=[1, 1, 1, 1]), dict(strides=[2, 1], dilations=[1, 2]),
              dict(auto_pad="SAME_UPPER"), dict(group=2)]


@pytest.mark.parametrize("attrs", CONV_ATTRS, ids=lambda a: ",".join(a) or "plain")
def test_conv_integer(attrs):
    x = RNG.integers(0, 255, (1, 4, 5, 6)).astype(np.uint8)
    w = RNG.integers(0, 255, (4, 4 // attrs.get("group", 1), 3, 3)).astype(np.uint8)
    check(mk("ConvInteger", ["x", "w", "xz", "wz"], **attrs), [x, w, np.asarray(100, np.uint8),
                                                                 np.asarray(120, np.uint8)], 10)


def test_conv_integer_1d_no_zero_points():
    x = RNG.integers(0, 255, (2, 3, 7)).astype(np.uint8)
    w = RNG.integers(0, 255, (2, 3, 3)).astype(np.uint8)
    check(mk("ConvInteger", ["x", "w"], pads=[1, 0]), [x, w], 10)


def conv_int64(x, w, xz, wz, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), group=1):
    """Exact integer 2-D convolution in numpy (int64), padding with the zero point."""
    x = x.astype(np.int64) - np.int64(xz)
    w = w.astype(np.int64) - np.asarray(wz, np.int64).reshape(-1, 1, 1, 1)
    N, C, H, W = x.shape
    M, Cg, KH, KW = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    OH = (H + pads[0] + pads[2] - (KH - 1) * dilations[0] - 1) // strides[0] + 1
    OW = (W + pads[1] + pads[3] - (KW - 1) * dilations[1] - 1) // strides[1] + 1
    out = np.zeros((N, M, OH, OW), np.int64)
    Mg = M // group
    for m in range(M):
        g = m // Mg
        for oh in range(OH):
            for ow in range(OW):
                patch = xp[:, g * Cg:(g + 1) * Cg, oh * strides[0]:oh * strides[0] + (KH - 1) * dilations[0] + 1:dilations[0],
                           ow * strides[1]:ow * strides[1] + (KW - 1) * dilations[1] + 1:dilations[1]]
                out[:, m, oh, ow] = (patch * w[m]).sum(axis=(1, 2, 3))
    return out


@pytest.mark.parametrize("attrs", CONV_ATTRS, ids=lambda a: ",".join(a) or "plain")
@pytest.mark.parametrize("wdt", [np.uint8, np.int8])
def test_qlinear_conv(attrs, wdt):
    G = attrs.get("group", 1)
    x = RNG.integers(0, 255, (1, 4, 5, 6)).astype(np.uint8)
    w = RNG.integers(np.iinfo(wdt).min, np.iinfo(wdt).max, (4, 4 // G, 3, 3)).astype(wdt)
    ws = (RNG.random(4) * 0.01 + 0.002).astype(F)
    wz = RNG.integers(0, 20, 4).astype(wdt) if wdt == np.uint8 else np.zeros(4, wdt)
    bias = RNG.integers(-500, 500, 4).astype(np.int32)
    xs, ys = F(0.05), F(0.2)
    ins = [x, np.asarray(xs), np.asarray(128, np.uint8), w, ws, wz, np.asarray(ys), np.asarray(100, np.uint8), bias]
    node = mk("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], **attrs)
    if wdt == np.uint8:
        check(node, ins, 10)
        return
    # onnxruntime's uint8 x int8 path saturates pairs of products to int16 on x86: numpy oracle
    (got,) = both(node, ins, 10)
    kw = {k: v for k, v in attrs.items() if k != "auto_pad"}
    if attrs.get("auto_pad") == "SAME_UPPER":
        kw["pads"] = (1, 1, 1, 1)
    acc = conv_int64(x, w, 128, wz, **kw) + bias.reshape(1, -1, 1, 1)
    mult = (xs * ws) / ys
    want = np.clip(np.rint(acc.astype(np.int32).astype(F) * mult.reshape(1, -1, 1, 1)) + 100, 0, 255)
    assert np.array_equal(got, want.astype(np.uint8))


def test_declines():
    x = RNG.standard_normal((2, 3)).astype(F)
    m = supports(CPU, mk("QuantizeLinear", ["x", "s"]), [x, np.asarray(1, np.int32)], opset=21)
    assert not m.supported and "scale dtype int32" in m.reason
    m = supports(CPU, mk("QuantizeLinear", ["x", "s"], axis=1), [x, np.ones(2, F)], opset=13)
    assert not m.supported and "per-axis scale must have shape (3,)" in m.reason
    m = supports(CPU, mk("QuantizeLinear", ["x", "s"], axis=1, block_size=2), [x, np.ones((2, 1), F)], opset=21)
    assert not m.supported and "blocked scale must have shape (2, 2)" in m.reason
