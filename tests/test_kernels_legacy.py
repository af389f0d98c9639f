"""Opset 1-6 definitions (hetero_explore/kernels/legacy.py): legacy broadcasting,
PRelu-6, BatchNormalization-6, and the old Conv/pool versions, against numpy; and the
loader's dropping of unused optional outputs (Dropout-7's mask)."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from hetero_explore.ir.errors import InvalidModelError
from hetero_explore.load.loader import load_model
from hetero_explore.ir.context import node_context
from hetero_explore.providers.cpu import NumbaCPUProvider
from hetero_explore.execution.runtime import run_graph

CPU = NumbaCPUProvider()
F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, opset, inits=(), ir=3):
    m = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits)),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir
    return m


def _vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def _claim(model):
    g = load_model(model, fold_constants=False)
    return g, [CPU.supports(node_context(g, n)) for n in g.nodes]


@pytest.mark.parametrize("op,fn", [("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply),
                                   ("Div", np.divide)])
@pytest.mark.parametrize("bshape,axis,view", [
    ((4, 5), None, (1, 4, 5)),       # a suffix of A's shape
    ((3,), 0, (3, 1, 1)),            # aligned at axis 0
    ((4,), 1, (1, 4, 1)),            # aligned at axis 1
    ((3, 1), 0, (3, 1, 1)),          # a 1 in B (the pytorch exporters emit these)
    ((), None, ()),                  # a scalar
])
def test_legacy_broadcast_binary(op, fn, bshape, axis, view):
    kw = {"broadcast": 1} if axis is None else {"broadcast": 1, "axis": axis}
    n = helper.make_node(op, ["a", "b"], ["y"], **kw)
    m = _model([n], [_vi("a", [3, 4, 5]), _vi("b", list(bshape))], [_vi("y", [3, 4, 5])], opset=6)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4, 5)).astype(np.float32)
    b = (rng.standard_normal(bshape) + 3).astype(np.float32)
    got = run_graph(load_model(m), CPU, {"a": a, "b": b})["y"]
    assert np.array_equal(got, fn(a, b.reshape(view)))


def test_legacy_broadcast_mismatch_is_declined():
    n = helper.make_node("Add", ["a", "b"], ["y"], broadcast=1, axis=0)
    m = _model([n], [_vi("a", [3, 4]), _vi("b", [4])], [_vi("y", [3, 4])], opset=6)
    _, ms = _claim(m)
    assert not ms[0].supported and "does not match" in ms[0].reason
    n0 = helper.make_node("Add", ["a", "b"], ["y"])        # broadcast=0: shapes must be equal
    m0 = _model([n0], [_vi("a", [3, 4]), _vi("b", [4])], [_vi("y", [3, 4])], opset=6)
    _, ms = _claim(m0)
    assert not ms[0].supported and "broadcast=0" in ms[0].reason


def test_gemm6_broadcast_c_matches_onnxruntime_at_opset7():
    rng = np.random.default_rng(1)
    a, w, c = (rng.standard_normal(s).astype(np.float32) for s in ((4, 10), (8, 10), (8,)))
    n6 = helper.make_node("Gemm", ["a", "w", "c"], ["y"], broadcast=1, transB=1, alpha=0.5)
    m6 = _model([n6], [_vi("a", [4, 10])], [_vi("y", [4, 8])], opset=6,
                inits=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(c, "c")], ir=7)
    got = run_graph(load_model(m6), CPU, {"a": a})["y"]
    n7 = helper.make_node("Gemm", ["a", "w", "c"], ["y"], transB=1, alpha=0.5)
    m7 = _model([n7], [_vi("a", [4, 10])], [_vi("y", [4, 8])], opset=7,
                inits=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(c, "c")], ir=7)
    want = ort.InferenceSession(m7.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"a": a})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("slope_shape", [(1,), (3,)])
def test_prelu6_scalar_or_per_channel(slope_shape):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    s = rng.uniform(0.1, 0.5, slope_shape).astype(np.float32)
    n = helper.make_node("PRelu", ["x", "s"], ["y"])
    m = _model([n], [_vi("x", [2, 3, 4, 5]), _vi("s", list(slope_shape))], [_vi("y", [2, 3, 4, 5])], opset=6)
    got = run_graph(load_model(m), CPU, {"x": x, "s": s})["y"]
    sv = s.reshape((1, -1, 1, 1)) if s.size > 1 else s.reshape(())
    assert np.array_equal(got, np.where(x >= 0, x, x * sv))


def test_prelu6_other_slope_shapes_are_declined():
    n = helper.make_node("PRelu", ["x", "s"], ["y"])
    m = _model([n], [_vi("x", [2, 3, 4]), _vi("s", [4])], [_vi("y", [2, 3, 4])], opset=6)
    _, ms = _claim(m)
    assert not ms[0].supported and "one per channel" in ms[0].reason


def test_batchnorm6_is_test():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    ps = [rng.uniform(0.5, 1.5, 3).astype(np.float32) for _ in range(4)]
    names = ["scale", "b", "mean", "var"]
    inits = [numpy_helper.from_array(p, nm) for p, nm in zip(ps, names)]
    n = helper.make_node("BatchNormalization", ["x"] + names, ["y"], is_test=1, epsilon=1e-5)
    m = _model([n], [_vi("x", [2, 3, 4])], [_vi("y", [2, 3, 4])], opset=6, inits=inits, ir=7)
    got = run_graph(load_model(m), CPU, {"x": x})["y"]
    sc, b, mu, var = (p.reshape(1, 3, 1) for p in ps)
    np.testing.assert_allclose(got, (x - mu) * (sc / np.sqrt(var + np.float32(1e-5))) + b, rtol=1e-5, atol=1e-6)
    n0 = helper.make_node("BatchNormalization", ["x"] + names, ["y"], is_test=0)
    _, ms = _claim(_model([n0], [_vi("x", [2, 3, 4])], [_vi("y", [2, 3, 4])], opset=6, inits=inits, ir=7))
    assert not ms[0].supported and "is_test=0" in ms[0].reason


def test_opset6_conv_and_pools_match_opset11():
    """Conv-1, MaxPool-1 and AveragePool-1 run the current kernels: bitwise the opset-11 model."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 2, 7, 7)).astype(np.float32)
    w = numpy_helper.from_array(rng.standard_normal((3, 2, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("AveragePool", ["c"], ["q"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    outs = [_vi("p", [1, 3, 3, 3]), _vi("q", [1, 3, 7, 7])]
    got = run_graph(load_model(_model(nodes, [_vi("x", [1, 2, 7, 7])], outs, 6, [w], ir=7)), CPU, {"x": x})
    want = run_graph(load_model(_model(nodes, [_vi("x", [1, 2, 7, 7])], outs, 11, [w], ir=7)), CPU, {"x": x})
    for k in ("p", "q"):
        assert np.array_equal(got[k], want[k])


def test_unused_dropout7_mask_is_dropped():
    """onnx infers no shape for Dropout-7's mask; unused, it no longer blocks the model."""
    nodes = [helper.make_node("Dropout", ["x"], ["y", "mask"], ratio=0.5),
             helper.make_node("Relu", ["y"], ["z"])]
    m = _model(nodes, [_vi("x", [2, 3])], [_vi("z", [2, 3])], opset=9)
    g = load_model(m, optimize=False)      # (the load-time optimisation would remove the Dropout)
    assert list(g.nodes[0].outputs) == ["y"] and not g.symbolic_values
    x = np.array([[-1, 2, 3], [4, -5, 6]], np.float32)
    assert np.array_equal(run_graph(g, CPU, {"x": x})["z"], np.maximum(x, 0))
    # a consumed mask stays, and onnx still infers no shape for it: the loader says so by name
    nodes2 = nodes + [helper.make_node("Identity", ["mask"], ["m2"])]
    with pytest.raises(InvalidModelError, match="cannot compute its output 'mask'"):
        load_model(_model(nodes2, [_vi("x", [2, 3])], [_vi("z", [2, 3]), _vi("m2", [2, 3])], opset=9),
                   fold_constants=False)
