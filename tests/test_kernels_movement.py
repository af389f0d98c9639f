"""Old-opset definitions and the data-movement ops of ``kernels/movement.py``: each case
runs on the CPU and on the CUDA simulator (bitwise equal where CUDA claims the op) and
is compared with onnxruntime (the oracle for old opsets, where onnx's reference
evaluator is known to be wrong, see FACTS.md) or numpy."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

from hetero_explore.ir.errors import ExecutionError
from hetero_explore.providers.cpu import NumbaCPUProvider
from hetero_explore.providers.cuda import NumbaCUDAProvider
from support.harness import run_both, infer_outputs, node_model, run_node, supports

CPU = NumbaCPUProvider()
GPU = NumbaCUDAProvider()
F = np.float32


def ort_run(node, inputs, opset, const_inputs=()):
    m = node_model(node, inputs, opset, const_inputs)
    _, dtypes = infer_outputs(m)
    for o, dt in zip(m.graph.output, dtypes):
        o.type.tensor_type.elem_type = helper.np_dtype_to_tensor_dtype(np.dtype(dt))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {n: np.asarray(a) for i, (n, a) in enumerate(zip(node.input, inputs))
             if n and a is not None and i not in const_inputs}
    return sess.run(None, feeds)


def both(node, inputs, opset, const_inputs=(), cuda=True):
    """CPU (and CUDA-simulator) outputs; asserts they are bitwise equal."""
    return run_both(node, inputs, opset, const_inputs, cuda=cuda)


def check_vs_ort(node, inputs, opset, const_inputs=(), cuda=True, exact=True):
    got = both(node, inputs, opset, const_inputs, cuda)
    want = ort_run(node, inputs, opset, const_inputs)
    for g, w in zip(got, want):
        assert g.shape == w.shape, (g.shape, w.shape)
        if exact:
            assert np.array_equal(g, w), (g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6)
    return got


def rnd(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(F)


# --- old opsets ------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [None, 0, 2, -1])
@pytest.mark.parametrize("opset", [9, 11])
def test_softmax_old_coerces_to_2d(op, axis, opset):
    kw = {} if axis is None else {"axis": axis}
    n = helper.make_node(op, ["x"], ["y"], **kw)
    check_vs_ort(n, [rnd(2, 3, 4)], opset, exact=False)


def test_softmax_old_differs_from_13():
    """The old definition really is the 2-D coercion (default axis 1), not opset 13's axis -1."""
    x = rnd(2, 3, 4)
    old = both(helper.make_node("Softmax", ["x"], ["y"]), [x], 11)[0]
    new = both(helper.make_node("Softmax", ["x"], ["y"]), [x], 13)[0]
    np.testing.assert_allclose(old.reshape(2, 12).sum(1), 1, rtol=1e-5)
    np.testing.assert_allclose(new.sum(-1), 1, rtol=1e-5)
    assert not np.allclose(old, new)


@pytest.mark.parametrize("opset", [1, 9])
def test_slice1_attributes(opset):
    n = helper.make_node("Slice", ["x"], ["y"], starts=[1, -3], ends=[100, -1], axes=[0, 2])
    check_vs_ort(n, [rnd(3, 2, 5)], opset)
    n = helper.make_node("Slice", ["x"], ["y"], starts=[0, 1], ends=[2, 2])
    check_vs_ort(n, [rnd(3, 2, 5)], opset)


def test_slice10_inputs():
    n = helper.make_node("Slice", ["x", "s", "e", "a", "t"], ["y"])
    ins = [rnd(4, 5), np.array([3], np.int64), np.array([0], np.int64), np.array([1], np.int64),
           np.array([-1], np.int64)]
    check_vs_ort(n, ins, 10, const_inputs=(1, 2, 3, 4))


@pytest.mark.parametrize("opset", [9, 11])
def test_split_squeeze_unsqueeze_attributes(opset):
    x = rnd(2, 6, 1)
    check_vs_ort(helper.make_node("Split", ["x"], ["a", "b"], axis=1, split=[2, 4]), [x], opset)
    check_vs_ort(helper.make_node("Squeeze", ["x"], ["y"], axes=[2]), [x], opset)
    check_vs_ort(helper.make_node("Unsqueeze", ["x"], ["y"], axes=[0, 3]), [x], opset)


@pytest.mark.parametrize("opset", [5, 9, 11])
def test_reshape_flatten_concat_transpose_gather_old(opset):
    x = rnd(2, 3, 4)
    check_vs_ort(helper.make_node("Reshape", ["x", "s"], ["y"]), [x, np.array([4, -1], np.int64)], opset,
                 const_inputs=(1,))
    check_vs_ort(helper.make_node("Flatten", ["x"], ["y"], axis=2), [x], opset)
    check_vs_ort(helper.make_node("Concat", ["x", "z"], ["y"], axis=1), [x, rnd(2, 1, 4)], opset)
    check_vs_ort(helper.make_node("Transpose", ["x"], ["y"], perm=[2, 0, 1]), [x], opset)
    check_vs_ort(helper.make_node("Gather", ["x", "i"], ["y"], axis=1), [x, np.array([2, 0], np.int64)], opset)


def test_gemm7_broadcast_c():
    n = helper.make_node("Gemm", ["a", "b", "c"], ["y"], alpha=0.5, beta=2.0, transB=1)
    check_vs_ort(n, [rnd(3, 4), rnd(5, 4, seed=1), rnd(5, seed=2)], 7, exact=False)
    check_vs_ort(n, [rnd(3, 4), rnd(5, 4, seed=1), rnd(3, 1, seed=2)], 9, exact=False)


def test_batchnorm7_and_spatial0_declined():
    x = rnd(2, 3, 2, 2)
    p = [np.abs(rnd(3, seed=s)) + F(0.5) for s in range(1, 5)]
    n = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], momentum=0.9, spatial=1)
    check_vs_ort(n, [x] + p, 7, exact=False)
    n0 = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], spatial=0)
    m = supports(CPU, n0, [x] + p, opset=7)
    assert not m.supported and "spatial" in m.reason


@pytest.mark.parametrize("opset", [7, 10])
def test_dropout_old_is_identity(opset):
    x = rnd(3, 4)
    got = both(helper.make_node("Dropout", ["x"], ["y"], ratio=0.3), [x], opset)[0]
    assert np.array_equal(got, x)


def test_dropout10_mask():
    x = rnd(3, 4)
    y, mask = both(helper.make_node("Dropout", ["x"], ["y", "m"]), [x], 10)
    assert np.array_equal(y, x) and mask.dtype == np.bool_ and mask.all()


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad2_attributes(mode):
    n = helper.make_node("Pad", ["x"], ["y"], mode=mode, pads=[0, 1, 1, 2], value=1.5)
    check_vs_ort(n, [rnd(3, 4)], 9)


def test_pad11_inputs():
    n = helper.make_node("Pad", ["x", "p", "v"], ["y"], mode="constant")
    check_vs_ort(n, [rnd(3, 4), np.array([1, 0, 0, 2], np.int64), np.array(-2.0, F)], 11, const_inputs=(1, 2))


def test_clip6_attributes():
    x = np.array([-3, -1, 0, 0.5, 2, 7], F)
    check_vs_ort(helper.make_node("Clip", ["x"], ["y"], min=-1.0, max=2.0), [x], 6)
    check_vs_ort(helper.make_node("Clip", ["x"], ["y"], max=0.25), [x], 9)


def test_constant_old():
    t = helper.make_tensor("v", 1, [2], [1.0, 2.0])
    n = helper.make_node("Constant", [], ["y"], value=t)
    assert np.array_equal(run_node(CPU, n, [], opset=9)[0], np.array([1, 2], F))
    n = helper.make_node("Constant", [], ["y"], value_floats=[3.0, 4.0])
    assert np.array_equal(run_node(CPU, n, [], opset=12)[0], np.array([3, 4], F))


# --- movement.py -----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F, np.int64, np.bool_])
def test_tile(dtype):
    x = (rnd(2, 3) > 0).astype(dtype) if dtype == np.bool_ else (rnd(2, 3) * 10).astype(dtype)
    n = helper.make_node("Tile", ["x", "r"], ["y"])
    check_vs_ort(n, [x, np.array([2, 3], np.int64)], 13, const_inputs=(1,))


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space(mode):
    x = np.arange(2 * 8 * 2 * 3, dtype=F).reshape(2, 8, 2, 3)
    check_vs_ort(helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2, mode=mode), [x], 13)


def test_space_to_depth_and_old():
    x = np.arange(2 * 3 * 4 * 6, dtype=F).reshape(2, 3, 4, 6)
    check_vs_ort(helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2), [x], 13)
    check_vs_ort(helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2), [x], 9)
    check_vs_ort(helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=1), [x], 9)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_space_to_depth_28_mode(mode):
    """SpaceToDepth-28 gained DepthToSpace's mode attribute; it is the inverse of DepthToSpace
    with the same mode (numpy's reshape-transpose-reshape, as the schema defines it)."""
    N, C, H, W, b = 2, 3, 4, 6, 2
    x = rnd(N, C, H, W)
    got, = both(helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=b, mode=mode), [x], 28)
    t = x.reshape(N, C, H // b, b, W // b, b)
    order = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
    assert np.array_equal(got, t.transpose(order).reshape(N, C * b * b, H // b, W // b))
    back, = both(helper.make_node("DepthToSpace", ["y"], ["z"], blocksize=b, mode=mode), [got], 28)
    assert np.array_equal(back, x)


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [-1, 0, 2])
def test_trilu(upper, k):
    x = rnd(2, 3, 4)
    n = helper.make_node("Trilu", ["x", "k"], ["y"], upper=upper)
    check_vs_ort(n, [x, np.array(k, np.int64)], 14, const_inputs=(1,))
    want = np.triu(x, k) if upper else np.tril(x, k)
    assert np.array_equal(both(n, [x, np.array(k, np.int64)], 14, const_inputs=(1,))[0], want)


@pytest.mark.parametrize("k", [-1, 0, 3])
def test_eyelike(k):
    n = helper.make_node("EyeLike", ["x"], ["y"], k=k, dtype=7)
    got = both(n, [rnd(3, 4)], 13)[0]
    assert got.dtype == np.int64 and np.array_equal(got, np.eye(3, 4, k, dtype=np.int64))
    n = helper.make_node("EyeLike", ["x"], ["y"], k=k)
    check_vs_ort(n, [rnd(3, 4)], 13)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatternd(reduction):
    x = rnd(4, 3)
    idx = np.array([[1], [-1], [1]], np.int64)   # a duplicate: applied in order
    upd = rnd(3, 3, seed=5)
    kw = {} if reduction == "none" else {"reduction": reduction}
    opset = 18
    n = helper.make_node("ScatterND", ["x", "i", "u"], ["y"], **kw)
    got = both(n, [x, idx, upd], opset)[0]
    want = x.copy()
    for t, k in enumerate(idx[:, 0]):
        a, u = want[k], upd[t]
        want[k] = {"none": u, "add": a + u, "mul": a * u, "max": np.maximum(a, u), "min": np.minimum(a, u)}[reduction]
    assert np.array_equal(got, want)
    if reduction != "none":   # (onnxruntime refuses duplicates with reduction none)
        check_vs_ort(n, [x, idx, upd], opset)


def test_scatternd_points():
    x = rnd(2, 3)
    n = helper.make_node("ScatterND", ["x", "i", "u"], ["y"])
    check_vs_ort(n, [x, np.array([[0, 2], [1, 0]], np.int64), np.array([5, 6], F)], 13)


@pytest.mark.parametrize("reduction", ["none", "add", "max"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_scatter_elements(reduction, axis):
    x = rnd(3, 4)
    idx = np.array([[0, 2], [2, -1], [1, 0]], np.int64) if axis else np.array([[0, 2, 1, 0], [2, 0, 1, 1]])
    upd = rnd(*idx.shape, seed=7)
    kw = {} if reduction == "none" else {"reduction": reduction}
    n = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=axis, **kw)
    check_vs_ort(n, [x, idx, upd], 18)


@pytest.mark.parametrize("provider", [CPU, GPU], ids=["cpu", "cuda"])
def test_scatter_out_of_range_raises(provider):
    x = rnd(3, 4)
    n = helper.make_node("ScatterND", ["x", "i", "u"], ["y"])
    with pytest.raises(ExecutionError, match="ScatterND.*index 5 is out of range"):
        run_node(provider, n, [x, np.array([[5, 0]], np.int64), np.ones(1, F)], opset=13)
    n = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1)
    with pytest.raises(ExecutionError, match="ScatterElements.*index -5 is out of range"):
        run_node(provider, n, [x, np.array([[-5]], np.int64), np.ones((1, 1), F)], opset=13)
