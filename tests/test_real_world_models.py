"""Models shaped the way third-party exporters write them, each executed, compared with
onnxruntime, and run heterogeneously (gpu, cpu) byte-identical to the reference:

* a paddle2onnx-style graph (opset 11): fixed dims declared ``-1``, Reshape with a
  ``0`` (copy) dim, Conv + BatchNormalization + Relu + pooling + MatMul/Add + Softmax;
* model-zoo-style CNNs at opsets 7, 8 and 9 (IR 3): every initializer also a graph
  input, weights computed by ConstantOfShape (folded at load), BatchNormalization-7
  with ``spatial``, a Dropout whose unused ``mask`` is named, Gemm, Softmax-1.

The on-disk folders (tests/test_backend_folders.py) cover opset 6 and the nine
``light`` model-zoo architectures."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import hetero_explore as hx
from hetero_explore.load.loader import load_model
from hetero_explore.providers.cpu import NumbaCPUProvider
from hetero_explore.execution.runtime import run_graph

CPU = NumbaCPUProvider()
F = TensorProto.FLOAT
RNG = np.random.default_rng(0)


def _t(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def _w(*shape, scale=0.3):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def paddle_style():
    """What paddle2onnx emits for a small classifier: the batch dim (and here every fixed
    dim) declared -1, Reshape to [0, -1], MatMul + Add instead of Gemm."""
    inits = [_t("conv_w", _w(4, 3, 3, 3)), _t("conv_b", _w(4)),
             _t("bn_s", np.abs(_w(4)) + 0.5), _t("bn_b", _w(4)), _t("bn_m", _w(4)), _t("bn_v", np.abs(_w(4)) + 0.5),
             _t("shape", np.array([0, -1], np.int64)), _t("fc_w", _w(16, 5)), _t("fc_b", _w(5))]
    nodes = [helper.make_node("Conv", ["x", "conv_w", "conv_b"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1]),
             helper.make_node("BatchNormalization", ["c", "bn_s", "bn_b", "bn_m", "bn_v"], ["bn"], epsilon=1e-5,
                              momentum=0.9),
             helper.make_node("Relu", ["bn"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("AveragePool", ["p"], ["a"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Reshape", ["a", "shape"], ["flat"]),
             helper.make_node("MatMul", ["flat", "fc_w"], ["mm"]),
             helper.make_node("Add", ["mm", "fc_b"], ["logits"]),
             helper.make_node("Softmax", ["logits"], ["prob"], axis=1)]
    g = helper.make_graph(nodes, "paddle", [helper.make_tensor_value_info("x", F, [-1, 3, 8, 8])],
                          [helper.make_tensor_value_info("prob", F, [-1, 5])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)], producer_name="PaddlePaddle")
    m.ir_version = 6
    return m


def zoo_style(opset: int):
    """A model-zoo-style CNN at an old opset, IR 3: initializers listed as graph inputs;
    from opset 9 the conv/fc weights are ConstantOfShape of shape initializers (as in onnx's
    'light' models), before it stored initializers."""
    def const_of_shape(name, shape, value):
        shp = _t(name + "_shape", np.array(shape, np.int64))
        return shp, helper.make_node("ConstantOfShape", [shp.name], [name],
                                     value=helper.make_tensor("v", F, [1], [value]))

    inits, nodes = [], []
    for name, shape, v in (("conv_w", [4, 3, 3, 3], 0.05), ("fc_w", [6, 16], 0.02)):
        if opset >= 9:
            t, n = const_of_shape(name, shape, v)
            nodes.append(n)
        else:   # ConstantOfShape is opset 9: the older zoo models store the weights
            t = _t(name, np.full(shape, v, np.float32))
        inits.append(t)
    inits += [_t("conv_b", _w(4)), _t("bn_s", np.abs(_w(4)) + 0.5), _t("bn_b", _w(4)), _t("bn_m", _w(4)),
              _t("bn_v", np.abs(_w(4)) + 0.5), _t("fc_b", _w(6))]
    bn_kw = {"spatial": 1} if opset < 9 else {}
    nodes += [helper.make_node("Conv", ["data", "conv_w", "conv_b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
              helper.make_node("BatchNormalization", ["c", "bn_s", "bn_b", "bn_m", "bn_v"], ["bn"], epsilon=1e-5,
                               **bn_kw),
              helper.make_node("Relu", ["bn"], ["r"]),
              helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
              helper.make_node("Dropout", ["p"], ["d", "d_mask"], ratio=0.5),
              helper.make_node("AveragePool", ["d"], ["a"], kernel_shape=[2, 2], strides=[2, 2]),
              helper.make_node("Flatten", ["a"], ["flat"], axis=1),
              helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1),
              helper.make_node("Softmax", ["logits"], ["prob"], axis=1)]
    inputs = [helper.make_tensor_value_info("data", F, [1, 3, 8, 8])]
    inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in inits]
    g = helper.make_graph(nodes, "zoo", inputs, [helper.make_tensor_value_info("prob", F, [1, 6])],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 3
    onnx.checker.check_model(m)
    return m


def _ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


def _hetero_byte_identical(model, feeds, input_shapes=None):
    e = hx.explore(model, providers=["gpu", "cpu"], input_shapes=input_shapes)
    e.execute(feeds)
    assert e.byte_identical, e.diff
    return e


def test_paddle_style_minus_one_dims_bind_and_match_onnxruntime():
    m = paddle_style()
    g = load_model(m)
    assert g.values["x"].shape == ("x:0", 3, 8, 8) and "x" in g.symbolic_values
    for n in (1, 3):
        x = RNG.standard_normal((n, 3, 8, 8)).astype(np.float32)
        gb = load_model(m, input_shapes={"x": x.shape})
        assert gb.symbolic_values == [] and gb.values["prob"].shape == (n, 5)
        got = run_graph(gb, CPU, {"x": x})["prob"]
        np.testing.assert_allclose(got, _ort(m, {"x": x}), rtol=1e-5, atol=1e-6)


def test_paddle_style_heterogeneous_is_byte_identical():
    x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)
    e = _hetero_byte_identical(paddle_style(), {"x": x}, input_shapes={"x": (1, 3, 8, 8)})
    assert "gpu" in {p.provider for p in e.plan.partitions}


@pytest.mark.parametrize("opset", [7, 8, 9])
def test_zoo_style_old_opset_cnn_matches_onnxruntime(opset):
    m = zoo_style(opset)
    g = load_model(m)
    assert g.symbolic_values == []
    assert not any(n.op_type == "ConstantOfShape" for n in g.nodes)          # folded at load
    assert {"conv_w", "fc_w"} <= set(load_model(m, optimize=False).initializer_protos)
    # optimised (the default): the BatchNormalization is folded into the Conv's (constant) weights
    assert "fc_w" in g.initializer_protos and "BatchNormalization" not in g.op_types()
    conv = next(n for n in g.nodes if n.op_type == "Conv")
    assert g.is_constant(conv.inputs[1]) and g.is_constant(conv.inputs[2])
    x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)
    got = run_graph(g, CPU, {"data": x})["prob"]
    np.testing.assert_allclose(got, _ort(m, {"data": x}), rtol=1e-5, atol=1e-6)


def test_zoo_style_heterogeneous_is_byte_identical():
    x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)
    e = _hetero_byte_identical(zoo_style(9), {"data": x})
    assert "gpu" in {p.provider for p in e.plan.partitions}
