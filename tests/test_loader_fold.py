"""Constant folding at load with the CPU provider's kernels, exporter quirks (issue 10)."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper, shape_inference, version_converter

import hetero_explore as he
from hetero_explore.providers import cpu
from hetero_explore.execution.runtime import run_graph

F = TensorProto.FLOAT


def vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def model(nodes, inputs, outputs, inits=(), opset=17, ir=8):
    m = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits)),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir
    return m


def _zoo_like_ir3():
    """Like the model zoo's 'light' models: IR 3, opset 9, every initializer also a graph
    input, weights computed at run time by ConstantOfShape from shape initializers."""
    def weight(name, shape, value):
        shp = numpy_helper.from_array(np.array(shape, np.int64), name + "__SHAPE")
        node = helper.make_node("ConstantOfShape", [shp.name], [name],
                                value=helper.make_tensor("v", F, [1], [value]))
        return shp, node

    inits, nodes = [], []
    for name, shape, v in [("conv_w", [4, 3, 3, 3], 0.02), ("conv_b", [4], 0.1), ("fc_w", [10, 64], 0.01),
                           ("fc_b", [10], 0.5)]:
        t, n = weight(name, shape, v)
        inits.append(t)
        nodes.append(n)
    inits.append(numpy_helper.from_array(np.array([1, -1], np.int64), "flat_shape"))
    nodes += [helper.make_node("Conv", ["data", "conv_w", "conv_b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
              helper.make_node("Relu", ["c"], ["r"], name="relu"),
              helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
              helper.make_node("Constant", [], ["scale"], value=numpy_helper.from_array(np.float32(2.0), "s")),
              helper.make_node("Mul", ["p", "scale"], ["ps"], name="scale_mul"),
              helper.make_node("Reshape", ["ps", "flat_shape"], ["flat"], name="flatten"),
              helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["prob"], transB=1, name="fc")]
    inputs = [vi("data", [1, 3, 8, 8])] + [vi(t.name, list(t.dims), t.data_type) for t in inits]
    m = model(nodes, inputs, [vi("prob", [1, 10])], inits, opset=9, ir=3)
    onnx.checker.check_model(m)
    return m


def test_ir3_initializers_as_inputs_keep_every_shape_after_conversion():
    m13 = version_converter.convert_version(_zoo_like_ir3(), 13)
    assert m13.ir_version == 3 and len(m13.graph.input) == 6
    g = he.load_model(m13)
    # onnx itself infers every value of this graph: so must the loader, after folding
    inferred = shape_inference.infer_shapes(m13, data_prop=True)
    assert all(v.type.tensor_type.HasField("shape") for v in inferred.graph.value_info)
    assert g.symbolic_values == []
    assert all(v.is_static for v in g.values.values()), [v for v in g.values.values() if not v.is_static]
    assert {"conv_w", "conv_b", "fc_w", "fc_b", "scale"} <= set(g.initializer_protos)
    assert [n.op_type for n in g.nodes] == ["Conv", "Relu", "MaxPool", "Mul", "Reshape", "Gemm"]
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    ref = he.execute_reference(g, "cpu", {"data": x}).outputs["prob"]
    import onnxruntime as ort
    sess = ort.InferenceSession(m13.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(ref, sess.run(None, {"data": x})[0], rtol=1e-5, atol=1e-6)


def _const_chain():
    """Constant → Cast → Mul(initializer) → Unsqueeze → Add(x): all but the Add fold."""
    w = numpy_helper.from_array(np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4), "w")
    nodes = [helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.arange(12, dtype=np.int64)
                                                                                  .reshape(3, 4), "kv"),
                              name="k"),
             helper.make_node("Cast", ["k"], ["kf"], to=F, name="cast"),
             helper.make_node("Mul", ["kf", "w"], ["kw"], name="mul"),
             helper.make_node("Exp", ["kw"], ["e"], name="exp"),
             helper.make_node("Unsqueeze", ["e", "ax"], ["eu"], name="unsq"),
             helper.make_node("Add", ["x", "eu"], ["y"], name="add")]
    return model(nodes, [vi("x", [2, 3, 4])], [vi("y", [2, 3, 4])],
                 [w, numpy_helper.from_array(np.array([0], np.int64), "ax")])


def test_folding_uses_the_cpu_kernels_bitwise():
    g = he.load_model(_const_chain())
    assert g.folded_nodes == ["k", "cast", "mul", "exp", "unsq"]
    assert [n.name for n in g.nodes] == ["add"]
    unfolded = he.load_model(_const_chain(), fold_constants=False)
    assert len(unfolded.nodes) == 6 and unfolded.folded_nodes == []
    # the folded constant is exactly what the CPU provider computes for that node at run time
    x = np.zeros((2, 3, 4), np.float32)
    inter = run_graph(unfolded, cpu(), {"x": x}, keep_intermediates=True)
    assert g.initializer("eu").tobytes() == inter["eu"].tobytes()
    a = he.execute_reference(g, "cpu", {"x": x + 1}).outputs["y"]
    b = he.execute_reference(unfolded, "cpu", {"x": x + 1}).outputs["y"]
    assert a.tobytes() == b.tobytes()


def test_fold_budget_is_checked_before_computing():
    # ConstantOfShape([700000000]) -> ReduceSum: 2.8 GB if computed; the budget says no first
    nodes = [helper.make_node("ConstantOfShape", ["n"], ["big"], name="bomb",
                              value=helper.make_tensor("v", F, [1], [1.0])),
             helper.make_node("ReduceSum", ["big"], ["y"], keepdims=0, name="sum")]
    m = model(nodes, [], [vi("y", [])], [numpy_helper.from_array(np.array([700_000_000], np.int64), "n")])
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        g = he.load_model(m)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - t0 < 60
    assert peak < 200 << 20, f"loading allocated {peak} bytes"
    assert "bomb" not in g.folded_nodes
    assert "2800000000 bytes" in g.info["fold_skipped"]["bomb"]
    assert "fold_limit_bytes" in g.info["fold_skipped"]["bomb"]
    assert [n.name for n in g.nodes] == ["bomb", "sum"]


def test_fold_limit_is_configurable():
    w = numpy_helper.from_array(np.ones((64, 64), np.float32), "w")
    nodes = [helper.make_node("Neg", ["w"], ["nw"], name="neg"), helper.make_node("Add", ["x", "nw"], ["y"])]
    m = model(nodes, [vi("x", [64, 64])], [vi("y", [64, 64])], [w])
    assert he.load_model(m).folded_nodes == ["neg"]
    small = he.load_model(m, fold_limit_bytes=1000)
    assert small.folded_nodes == [] and "16384 bytes" in small.info["fold_skipped"]["neg"]
    with pytest.raises(he.ModelLoadError, match="fold_limit_bytes"):
        he.load_model(m, fold_limit_bytes=-1)


def test_node_the_cpu_provider_does_not_claim_stays_unfolded():
    # the CPU has a float32 Sin only: a float64 Sin of a constant is left unfolded, with no
    # silent fallback to another evaluator
    c = numpy_helper.from_array(np.ones(4, np.float64), "c")
    nodes = [helper.make_node("Sin", ["c"], ["s"], name="sin"), helper.make_node("Add", ["x", "s"], ["y"])]
    g = he.load_model(model(nodes, [vi("x", [4], TensorProto.DOUBLE)], [vi("y", [4], TensorProto.DOUBLE)], [c]))
    assert g.folded_nodes == [] and "does not run it" in g.info["fold_skipped"]["sin"]


def test_folding_exposes_reshape_target_for_the_next_round():
    # onnx's data propagation does not evaluate Neg/Abs: the Reshape target is known only
    # once they are folded, and the next round's inference makes the output static
    nodes = [helper.make_node("Neg", ["c"], ["nc"]),
             helper.make_node("Abs", ["nc"], ["tgt"]),
             helper.make_node("Reshape", ["x", "tgt"], ["y"], name="reshape")]
    m = model(nodes, [vi("x", ["b", 3, 4])], [vi("y", [1, "n"])],
              [numpy_helper.from_array(np.array([1, 24], np.int64), "c")])
    assert not he.load_model(m, input_shapes={"x": (2, 3, 4)}, fold_constants=False).values["y"].is_static
    g = he.load_model(m, input_shapes={"x": (2, 3, 4)})
    assert g.folded_nodes == ["Neg:nc", "Abs:tgt"]
    assert g.values["y"].shape == (1, 24) and g.symbolic_values == []


@pytest.mark.parametrize("declared", [-1, 0])
def test_minus_one_and_zero_input_dims_are_symbolic_and_bindable(declared):
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    m = model(nodes, [vi("x", [declared, 4])], [vi("y", [declared, 4])])
    g = he.load_model(m)
    assert g.values["x"].shape == ("x:0", 4) and "x" in g.symbolic_values
    assert he.load_model(m, input_shapes={"x": (1, 4)}).values["y"].shape == (1, 4)
    assert he.load_model(m, dim_values={"x:0": 3}).values["y"].shape == (3, 4)
