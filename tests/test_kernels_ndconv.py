"""Conv, ConvTranspose, the pools and ConvInteger/QLinearConv over 1, 2 and 3 spatial dims:
against onnxruntime (and, for the documented accumulation order, a float32 numpy walk),
and CPU vs the CUDA simulator bit for bit."""

from __future__ import annotations

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from hetero_explore.kernels.fmadd import fma_emulated
from hetero_explore.providers.cpu import NumbaCPUProvider
from hetero_explore.providers.cuda import NumbaCUDAProvider
from support.harness import run_both, infer_outputs, node_model, run_node, supports

CPU = NumbaCPUProvider()
GPU = NumbaCUDAProvider()
F = np.float32


def rnd(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(F)


def bits(a):
    return np.ascontiguousarray(a).view(np.uint8)


def ort_run(node, inputs, opset, const_inputs=()):
    m = node_model(node, inputs, opset, const_inputs)
    _, dtypes = infer_outputs(m)
    for o, dt in zip(m.graph.output, dtypes):
        o.type.tensor_type.elem_type = helper.np_dtype_to_tensor_dtype(np.dtype(dt))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {n: np.asarray(a) for i, (n, a) in enumerate(zip(node.input, inputs))
             if n and a is not None and i not in const_inputs}
    return sess.run(None, feeds)


def both(node, inputs, opset=19, const_inputs=(), cuda=True):
    """CPU outputs; with cuda=True also the CUDA simulator's, asserted bitwise equal."""
    return run_both(node, inputs, opset, const_inputs, cuda=cuda)


def check(node, inputs, opset=19, const_inputs=(), cuda=True, want=None, rtol=1e-5, atol=1e-5):
    got = both(node, inputs, opset, const_inputs, cuda)
    if want is None:
        want = ort_run(node, inputs, opset, const_inputs)
    for g, w in zip(got, want):
        assert g.shape == w.shape, (g.shape, w.shape)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        if g.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, w)
    return got


# --- Conv ------------------------------------------------------------------------------

CONV_CASES = [
    # (x shape, w shape, attrs)
    ((2, 3, 7), (4, 3, 3), {}),
    ((1, 4, 9), (6, 2, 2), dict(group=2, strides=[2], pads=[1, 2], dilations=[2])),
    ((1, 2, 8), (3, 2, 3), dict(auto_pad="SAME_LOWER", strides=[3])),
    ((1, 2, 3, 4, 5), (2, 2, 2, 2, 3), {}),
    ((1, 2, 4, 4, 5), (2, 2, 2, 3, 2), dict(strides=[2, 1, 2], pads=[1, 0, 1, 0, 1, 1], dilations=[1, 2, 1])),
    ((1, 4, 3, 3, 4), (4, 1, 2, 2, 2), dict(group=4, auto_pad="SAME_UPPER")),
    ((1, 2, 4, 3, 3), (3, 2, 3, 1, 2), dict(auto_pad="VALID", strides=[1, 2, 1])),
]


@pytest.mark.parametrize("xs,ws,attrs", CONV_CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_conv_nd_vs_onnxruntime(xs, ws, attrs, bias):
    ins = [rnd(*xs), rnd(*ws, seed=1)] + ([rnd(ws[0], seed=2)] if bias else [])
    node = helper.make_node("Conv", ["x", "w", "b"][:len(ins)], ["y"], **attrs)
    check(node, ins, const_inputs=(1, 2) if bias else (1,))


def _conv3d_documented(x, w, b, strides, pads, dil):
    """The documented order, in float32: acc = 0; acc = fma(w, xv, acc) over (c, kd, kh, kw)
    ascending (a padded tap adds w * 0; fma rounds once); then + bias."""
    N, C = x.shape[:2]
    M = w.shape[0]
    K = w.shape[2:]
    osz = [(x.shape[2 + i] + pads[i] + pads[3 + i] - ((K[i] - 1) * dil[i] + 1)) // strides[i] + 1
           for i in range(3)]
    y = np.zeros((N, M, *osz), F)
    for n in range(N):
        for m in range(M):
            for o in np.ndindex(*osz):
                acc = F(0)
                for c in range(C):
                    for k in np.ndindex(*K):
                        pos = [o[i] * strides[i] - pads[i] + k[i] * dil[i] for i in range(3)]
                        inside = all(0 <= pos[i] < x.shape[2 + i] for i in range(3))
                        xv = x[(n, c, *pos)] if inside else F(0)
                        acc = F(fma_emulated(w[(m, c, *k)], xv, acc))
                y[(n, m, *o)] = F(acc + b[m])
    return y


def test_conv3d_bits_follow_documented_order():
    x, w, b = rnd(1, 2, 3, 4, 3), rnd(2, 2, 2, 2, 2, seed=1), rnd(2, seed=2)
    attrs = dict(strides=[1, 2, 1], pads=[1, 0, 1, 0, 1, 1], dilations=[1, 1, 2])
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)
    (got,) = both(node, [x, w, b], const_inputs=(1, 2))
    want = _conv3d_documented(x, w, b, attrs["strides"], attrs["pads"], attrs["dilations"])
    assert np.array_equal(bits(got), bits(want))


def test_conv_geometry_errors_name_the_node():
    from hetero_explore.ir.errors import KernelError
    x, w = rnd(1, 1, 3, 3, 3), rnd(1, 1, 2, 2, 2)
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="c3", kernel_shape=[2, 2, 3])
    with pytest.raises(KernelError, match="c3.*kernel_shape"):
        run_node(CPU, node, [x, w], opset=19, out_shapes=[(1, 1, 2, 2, 2)], out_dtypes=[np.float32])


def test_conv_declines_4d_spatial():
    node = helper.make_node("Conv", ["x", "w"], ["y"])
    m = supports(CPU, node, [rnd(1, 1, 2, 2, 2, 2), rnd(1, 1, 1, 1, 1, 1)])
    assert not m.supported and "3-D" in m.reason


# --- ConvTranspose ---------------------------------------------------------------------

CONVT_CASES = [
    ((1, 2, 5), (2, 3, 3), dict(strides=[2], pads=[1, 0], output_padding=[1])),
    ((1, 4, 4), (4, 1, 2), dict(group=2, dilations=[2])),
    ((1, 2, 2, 3, 2), (2, 2, 2, 2, 3), {}),
    ((1, 2, 2, 2, 3), (2, 1, 3, 2, 2), dict(strides=[2, 1, 2], pads=[1, 0, 0, 0, 1, 1], output_padding=[1, 0, 0])),
    ((1, 2, 2, 2, 2), (2, 2, 2, 2, 2), dict(strides=[2, 2, 1], auto_pad="SAME_UPPER")),
    ((1, 1, 3, 3), (1, 2, 3, 3), dict(strides=[3, 2], output_shape=[10, 8])),
    ((1, 1, 2, 3, 3), (1, 1, 2, 3, 3), dict(strides=[1, 2, 2], output_shape=[3, 6, 5])),
]


@pytest.mark.parametrize("xs,ws,attrs", CONVT_CASES)
def test_conv_transpose_nd_vs_onnxruntime(xs, ws, attrs):
    g = attrs.get("group", 1)
    ins = [rnd(*xs), rnd(*ws, seed=1), rnd(ws[1] * g, seed=2)]
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)
    check(node, ins, const_inputs=(1, 2))


# --- MaxPool / AveragePool --------------------------------------------------------------

POOL_CASES = [
    ((2, 3, 9), dict(kernel_shape=[3], strides=[2], pads=[1, 1])),
    ((1, 2, 8), dict(kernel_shape=[2], dilations=[3], ceil_mode=1, strides=[2])),
    ((1, 2, 7), dict(kernel_shape=[3], auto_pad="SAME_UPPER", strides=[2])),
    ((1, 2, 4, 5, 6), dict(kernel_shape=[2, 2, 2])),
    ((1, 2, 4, 5, 5), dict(kernel_shape=[3, 2, 3], strides=[2, 2, 1], pads=[1, 0, 1, 1, 1, 0])),
    ((1, 1, 5, 4, 5), dict(kernel_shape=[2, 2, 2], strides=[2, 2, 2], ceil_mode=1)),
    ((1, 1, 4, 5, 4), dict(kernel_shape=[2, 3, 2], dilations=[2, 1, 2])),
    ((1, 1, 3, 4, 5), dict(kernel_shape=[2, 2, 3], auto_pad="SAME_LOWER")),
]


@pytest.mark.parametrize("xs,attrs", POOL_CASES)
@pytest.mark.parametrize("op,extra", [("MaxPool", {}), ("AveragePool", {}),
                                      ("AveragePool", {"count_include_pad": 1})])
def test_pool_nd_vs_onnxruntime(op, extra, xs, attrs):
    node = helper.make_node(op, ["x"], ["y"], **attrs, **extra)
    check(node, [rnd(*xs)])


@pytest.mark.parametrize("op", ["AveragePool", "MaxPool"])
def test_ceil_window_starting_in_right_padding(op):
    """Schema version 22 (and onnxruntime) drop a last ceil_mode window that would start in the
    right padding. Here in=5, k=2, s=2, pads 1+1: ceil gives 4 windows, the 4th would start at
    6 - 1 = 5 (in the right padding): 3 windows at version 22, as onnxruntime. Before 22 onnx's
    shape inference keeps the 4th (the runner's shapes), with no input tap in it."""
    x = rnd(1, 1, 5, seed=3)
    node = helper.make_node(op, ["x"], ["y"], kernel_shape=[2], strides=[2], pads=[1, 1], ceil_mode=1)
    (y,) = check(node, [x], opset=22)
    assert y.shape == (1, 1, 3)
    (y19,) = both(node, [x], opset=19)
    assert y19.shape == (1, 1, 4)
    assert np.array_equal(bits(y19[..., :3]), bits(y))
    assert (np.isnan(y19[0, 0, 3]) if op == "AveragePool" else y19[0, 0, 3] == -np.inf)
    # a ceil_mode window that starts inside the input is kept at every version
    node = helper.make_node(op, ["x"], ["y"], kernel_shape=[2], strides=[2], pads=[1, 0], ceil_mode=1)
    for opset in (11, 19, 22):
        (y,) = check(node, [x], opset=opset)
        assert y.shape == (1, 1, 3)


@pytest.mark.parametrize("xs,attrs", [
    ((1, 2, 7), dict(kernel_shape=[3], strides=[2], pads=[1, 1])),
    ((1, 2, 4, 5), dict(kernel_shape=[2, 2], strides=[1, 2], pads=[1, 0, 0, 1])),
    ((1, 2, 3, 4, 5), dict(kernel_shape=[2, 2, 2], strides=[1, 2, 2], pads=[0, 1, 0, 1, 0, 1])),
])
@pytest.mark.parametrize("storage_order", [0, 1])
def test_maxpool_indices(xs, attrs, storage_order):
    """Indices: flat positions in x (row-major, or column-major over the spatial dims with
    storage_order=1), against onnx's reference (the schema's definition)."""
    x = rnd(2, *xs[1:], seed=4)
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], storage_order=storage_order, **attrs)
    model = node_model(node, [x], 19)
    want = ReferenceEvaluator(model).run(None, {"x": x})
    got = check(node, [x], want=want)
    assert got[1].dtype == np.int64
    if storage_order == 0:   # onnxruntime agrees on the row-major indices
        np.testing.assert_array_equal(got[1], ort_run(node, [x], 19)[1])


def test_maxpool_indices_first_maximum_and_minus_inf():
    """Ties: the first maximal tap; a window of -inf values still points at its first tap."""
    x = np.array([[[1, 1, -np.inf, -np.inf, 2, 2]]], F)
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2], strides=[2])
    y, i = both(node, [x])
    np.testing.assert_array_equal(y, [[[1, -np.inf, 2]]])
    np.testing.assert_array_equal(i, [[[0, 2, 4]]])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("xs,attrs", [
    ((1, 2, 7), dict(kernel_shape=[3], strides=[2], pads=[1, 1])),
    ((1, 2, 5, 5), dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)),
    ((1, 1, 3, 4, 5), dict(kernel_shape=[2, 2, 2], strides=[1, 2, 2], pads=[1, 0, 0, 1, 1, 0])),
])
def test_maxpool_integer_vs_onnxruntime(dtype, xs, attrs):
    """int8/uint8 MaxPool (schema 12+); values include the dtype's minimum, which a window
    of minima must still return (with its first tap as the index)."""
    info = np.iinfo(dtype)
    x = np.random.default_rng(5).integers(info.min, info.max + 1, xs).astype(dtype)
    x.flat[:4] = info.min
    check(helper.make_node("MaxPool", ["x"], ["y"], **attrs), [x])
    check(helper.make_node("MaxPool", ["x"], ["y", "i"], **attrs), [x])


def test_pool_declines_4d_spatial():
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[1, 1, 1, 1])
    m = supports(CPU, node, [rnd(1, 1, 2, 2, 2, 2)])
    assert not m.supported and "3-D" in m.reason


# --- ConvInteger / QLinearConv (the same walk, int32 accumulators) ----------------------


def _q(shape, seed, dtype=np.uint8):
    info = np.iinfo(dtype)
    return np.random.default_rng(seed).integers(info.min, info.max + 1, shape).astype(dtype)


@pytest.mark.parametrize("xs,ws,attrs", [
    ((1, 2, 7), (3, 2, 3), dict(pads=[1, 1], strides=[2])),
    ((1, 2, 3, 4, 4), (2, 2, 2, 2, 2), dict(pads=[1, 0, 1, 0, 1, 1])),
])
def test_conv_integer_nd(xs, ws, attrs):
    x, w = _q(xs, 1), _q(ws, 2)
    xz, wz = np.array(3, np.uint8), np.array(5, np.uint8)
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], **attrs)
    (got,) = both(node, [x, w, xz, wz], opset=10, const_inputs=(1, 2, 3))
    ref = _int_conv(x.astype(np.int64) - 3, w.astype(np.int64) - 5, attrs)
    np.testing.assert_array_equal(got, ref.astype(np.int32))


def _int_conv(x, w, attrs):
    nsp = x.ndim - 2
    s = attrs.get("strides", [1] * nsp)
    p = attrs.get("pads", [0] * 2 * nsp)
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p[i], p[nsp + i]) for i in range(nsp)])
    K = w.shape[2:]
    osz = [(xp.shape[2 + i] - K[i]) // s[i] + 1 for i in range(nsp)]
    y = np.zeros((x.shape[0], w.shape[0], *osz), np.int64)
    for o in np.ndindex(*osz):
        sl = tuple(slice(o[i] * s[i], o[i] * s[i] + K[i]) for i in range(nsp))
        patch = xp[(slice(None), slice(None)) + sl]
        y[(slice(None), slice(None)) + o] = np.tensordot(patch, w, axes=(list(range(1, patch.ndim)), list(range(1, w.ndim))))
    return y


def test_qlinear_conv_3d_vs_onnxruntime():
    x, w = _q((1, 2, 3, 4, 3), 1), _q((2, 2, 2, 2, 2), 2)
    ins = [x, np.array(0.05, F), np.array(7, np.uint8), w, np.array([0.02, 0.03], F),
           np.array(9, np.uint8), np.array(0.1, F), np.array(11, np.uint8), np.array([50, -20], np.int32)]
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"],
                            pads=[1, 0, 0, 1, 0, 1])
    got = both(node, ins, opset=10, const_inputs=tuple(range(1, 9)))
    want = ort_run(node, ins, 10, const_inputs=tuple(range(1, 9)))
    # float rounding of the requantisation may differ from onnxruntime's by one step
    assert np.abs(got[0].astype(int) - want[0].astype(int)).max() <= 1
