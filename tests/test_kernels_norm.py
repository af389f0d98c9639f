"""Normalisation kernels (norm.py): InstanceNormalization, GroupNormalization (opset 18
per-group and opset 21 per-channel scale), RMSNormalization, MeanVarianceNormalization,
LpNormalization, LpPool, GlobalLpPool: against numpy (float64 oracles) and onnx's
reference evaluator, against the documented order, and CPU vs CUDA simulator bitwise."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
import pytest
from onnx import helper

from hetero_explore.providers.cpu import NumbaCPUProvider
from hetero_explore.providers.cuda import NumbaCUDAProvider
from support.harness import reference as support_reference, run_both, supports

CPU = NumbaCPUProvider()
GPU = NumbaCUDAProvider()
F = np.float32
RNG = np.random.default_rng(11)


def rnd(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def both(node, inputs, opset, same_shape=True, out_shape=None):
    """CPU and CUDA-simulator results, asserted bitwise equal. Shape inference of some
    function ops fails on one-node models, so identity-shaped outputs are given."""
    kw = {}
    if same_shape or out_shape is not None:
        kw = dict(out_shapes=[out_shape or inputs[0].shape], out_dtypes=[np.dtype(np.float32)])
    c = run_both(node, inputs, opset, **kw)[0]
    assert c.dtype == np.float32
    return c


def mk(op, n_in, **attrs):
    return helper.make_node(op, [f"i{k}" for k in range(n_in)], ["y"], name=f"{op}_n", **attrs)


def reference(node, inputs, opset):
    return support_reference(node, inputs, opset)[0]


@pytest.mark.parametrize("shape", [(2, 3, 4), (1, 2, 3, 5), (2, 2, 1, 2, 3)])
def test_instance_norm(shape):
    x, s, b = rnd(*shape), rnd(shape[1]), rnd(shape[1])
    node = mk("InstanceNormalization", 3, epsilon=1e-3)
    got = both(node, [x, s, b], 22)
    ax = tuple(range(2, len(shape)))
    x64 = x.astype(np.float64)
    m, v = x64.mean(ax, keepdims=True), x64.var(ax, keepdims=True)
    bc = (1, -1) + (1,) * (len(shape) - 2)
    want = (x64 - m) / np.sqrt(v + 1e-3) * s.reshape(bc) + b.reshape(bc)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, reference(node, [x, s, b], 22), rtol=1e-5, atol=1e-5)


def test_instance_norm_documented_order():
    """The statistics and the per-element steps, spelled out in float32 scalar steps."""
    x, s, b = rnd(1, 2, 7), rnd(2), rnd(2)
    got = both(mk("InstanceNormalization", 3), [x, s, b], 6)
    eps = F(1e-5)
    for c in range(2):
        row = x[0, c]
        acc = F(0)
        for v in row:
            acc = F(acc + v)
        mean = F(acc / F(7))
        q = F(0)
        for v in row:
            d = F(v - mean)
            q = F(q + F(d * d))
        den = F(np.sqrt(F(F(q / F(7)) + eps)))
        want = np.array([F(F(F(F(v - mean) / den) * s[c]) + b[c]) for v in row], np.float32)
        assert np.array_equal(got[0, c].view(np.uint32), want.view(np.uint32))


def _group_norm64(x, scale, bias, G, eps, per_channel):
    N, C = x.shape[:2]
    xg = x.astype(np.float64).reshape(N, G, -1)
    m = xg.mean(-1, keepdims=True)
    v = xg.var(-1, keepdims=True)
    y = ((xg - m) / np.sqrt(v + eps)).reshape(x.shape)
    bc = (1, C) + (1,) * (x.ndim - 2)
    if per_channel:
        return y * scale.reshape(bc) + bias.reshape(bc)
    rep = np.repeat(scale, C // G), np.repeat(bias, C // G)
    return y * rep[0].reshape(bc) + rep[1].reshape(bc)


@pytest.mark.parametrize("opset,per_channel", [(18, False), (21, True)])
@pytest.mark.parametrize("shape,G", [((2, 4, 3), 2), ((1, 6, 2, 2), 3), ((2, 4, 5), 1), ((1, 4, 3), 4)])
def test_group_norm(opset, per_channel, shape, G):
    C = shape[1]
    x = rnd(*shape)
    s, b = (rnd(C), rnd(C)) if per_channel else (rnd(G), rnd(G))
    got = both(mk("GroupNormalization", 3, num_groups=G, epsilon=1e-4), [x, s, b], opset)
    np.testing.assert_allclose(got, _group_norm64(x, s, b, G, 1e-4, per_channel), rtol=1e-5, atol=1e-5)


def test_group_norm_declines():
    x = rnd(1, 4, 3)
    node = mk("GroupNormalization", 3, num_groups=3)
    m = supports(CPU, node, [x, rnd(4), rnd(4)], opset=21)
    assert not m.supported and "divide" in m.reason
    node = mk("GroupNormalization", 3, num_groups=2)
    m = supports(CPU, node, [x, rnd(4), rnd(4)], opset=18)      # opset 18: per-group scale
    assert not m.supported and "num_groups" in m.reason
    m = supports(CPU, node, [x, rnd(2), rnd(2)], opset=21)      # opset 21: per-channel scale
    assert not m.supported and "length C" in m.reason


@pytest.mark.parametrize("shape,axis,sshape", [((2, 3, 4), -1, (4,)), ((2, 3, 4), 1, (3, 4)),
                                               ((2, 3, 4), 1, (1, 4)), ((3, 5), 0, (3, 5)),
                                               ((2, 2, 2, 3), -3, (2, 1, 3))])
def test_rms_norm(shape, axis, sshape):
    x, s = rnd(*shape), rnd(*sshape)
    node = mk("RMSNormalization", 2, axis=axis, epsilon=1e-4)
    got = both(node, [x, s], 23)
    ax = axis % len(shape)
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64 ** 2).mean(tuple(range(ax, len(shape))), keepdims=True) + 1e-4) * s
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, reference(node, [x, s], 23), rtol=1e-5, atol=1e-6)


def test_rms_norm_declines():
    x = rnd(2, 3)
    assert "stash_type" in supports(CPU, mk("RMSNormalization", 2, stash_type=0), [x, rnd(3)], opset=23).reason
    assert "broadcast" in supports(CPU, mk("RMSNormalization", 2), [x, rnd(2)], opset=23).reason


@pytest.mark.parametrize("axes", [None, [1], [0, 1], [-1]])
def test_mvn(axes):
    x = rnd(2, 3, 2, 2)
    attrs = {} if axes is None else {"axes": axes}
    got = both(mk("MeanVarianceNormalization", 1, **attrs), [x], 13)
    ax = tuple((0, 2, 3) if axes is None else [a % 4 for a in axes])
    x64 = x.astype(np.float64)
    want = (x64 - x64.mean(ax, keepdims=True)) / (np.sqrt(x64.var(ax, keepdims=True)) + 1e-9)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_lp_norm(p, axis):
    x = rnd(3, 4, 2)
    x[1, :, 1] = 0.0            # a zero norm along axis 1: 0, not NaN
    node = mk("LpNormalization", 1, axis=axis, p=p)
    got = both(node, [x], 22)
    x64 = x.astype(np.float64)
    norm = np.linalg.norm(x64, ord=p, axis=axis, keepdims=True) if p == 2 else np.abs(x64).sum(axis, keepdims=True)
    with np.errstate(invalid="ignore"):
        want = np.where(norm == 0, 0.0, x64 / norm)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert not np.isnan(got).any()


def test_lp_norm_declines_p3():
    m = supports(CPU, mk("LpNormalization", 1, p=3), [rnd(2, 3)], opset=22)
    assert not m.supported and "p=3" in m.reason


def _lppool64(x, k, p, strides, pads, dil):
    """Naive float64 LpPool over the in-input taps (zeros in the padding add nothing)."""
    nsp = x.ndim - 2
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(pads[i], pads[i + nsp]) for i in range(nsp)])
    out_sp = [(xp.shape[2 + i] - ((k[i] - 1) * dil[i] + 1)) // strides[i] + 1 for i in range(nsp)]
    out = np.zeros(x.shape[:2] + tuple(out_sp))
    for o in np.ndindex(*out_sp):
        sl = tuple(slice(o[i] * strides[i], o[i] * strides[i] + (k[i] - 1) * dil[i] + 1, dil[i])
                   for i in range(nsp))
        win = xp[(slice(None), slice(None)) + sl]
        out[(slice(None), slice(None)) + o] = (np.abs(win) ** p).sum(axis=tuple(range(2, 2 + nsp))) ** (1.0 / p)
    return out


@pytest.mark.parametrize("shape,k,p,strides,pads,dil", [
    ((1, 2, 7), [3], 2, [1], [0, 0], [1]),
    ((1, 2, 5, 5), [2, 3], 3, [2, 1], [1, 0, 0, 1], [1, 1]),
    ((1, 1, 6, 6), [2, 2], 1, [1, 1], [0, 0, 0, 0], [2, 2]),
    ((1, 2, 3, 4, 4), [2, 2, 2], 2, [1, 2, 1], [0, 1, 0, 1, 0, 0], [1, 1, 1]),
])
def test_lppool(shape, k, p, strides, pads, dil):
    x = rnd(*shape)
    node = mk("LpPool", 1, kernel_shape=k, p=p, strides=strides, pads=pads, dilations=dil)
    got = both(node, [x], 22, same_shape=False)
    np.testing.assert_allclose(got, _lppool64(x, k, p, strides, pads, dil), rtol=1e-5, atol=1e-6)


def test_lppool_same_upper_matches_explicit_pads():
    x = rnd(1, 1, 5, 5)
    a = both(mk("LpPool", 1, kernel_shape=[2, 2], auto_pad="SAME_UPPER"), [x], 22, same_shape=False)
    b = both(mk("LpPool", 1, kernel_shape=[2, 2], pads=[0, 0, 1, 1]), [x], 22, same_shape=False)
    assert a.shape == b.shape == (1, 1, 5, 5) and np.array_equal(a, b)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_global_lppool(p):
    x = rnd(2, 3, 2, 3)
    got = both(mk("GlobalLpPool", 1, p=p), [x], 22, same_shape=False, out_shape=(2, 3, 1, 1))
    want = (np.abs(x.astype(np.float64)) ** p).sum((2, 3), keepdims=True) ** (1.0 / p)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_a_group_norm_inside_a_model_loads_and_runs():
    """onnx's shape inference leaves a GroupNormalization's output untyped (its function body
    is not inferred); between two nodes that made the model unloadable. The op definition's
    shape function completes it (load.infer.complete_op_shapes), and the model runs as
    onnxruntime runs it."""
    import onnxruntime as ort
    from onnx import TensorProto, numpy_helper
    import hetero_explore as he
    x, s, b = rnd(2, 4, 3, 2), rnd(4), rnd(4)
    nodes = [helper.make_node("Neg", ["x"], ["x0"]),
             helper.make_node("GroupNormalization", ["x0", "s", "b"], ["y"], num_groups=2),
             helper.make_node("Relu", ["y"], ["z"])]
    g = helper.make_graph(nodes, "gn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 3, 2])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, 4, 3, 2])],
                          initializer=[numpy_helper.from_array(s, "s"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    graph = he.load_model(m)
    assert graph.values["y"].shape == (2, 4, 3, 2) and graph.values["y"].dtype == np.float32
    got = he.execute(he.plan(graph, ["cpu"]), {"x": x}).outputs["z"]
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
