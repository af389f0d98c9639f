"""Seed behaviours of the planner and the loader on real ONNX graphs."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import hetero_explore as he
from hetero_explore.providers import VirtualProvider, mask

F = TensorProto.FLOAT


def model(nodes, inputs, outputs, inits=(), functions=(), opset=17, extra_opsets=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)] + list(extra_opsets),
                          functions=list(functions))
    m.ir_version = 8
    return m


def vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def chain_model():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["a"], name="mm"),
             helper.make_node("Softmax", ["a"], ["b"], name="sm", axis=-1),
             helper.make_node("Relu", ["b"], ["y"], name="relu")]
    w = numpy_helper.from_array(np.ones((8, 8), np.float32), "w")
    return model(nodes, [vi("x", [2, 8])], [vi("y", [2, 8])], [w])


GPU = lambda: VirtualProvider("gpu", "cuda:0", ops=["MatMul", "Relu"])  # noqa: E731
CPU = lambda: VirtualProvider("cpu", "cpu:0", ops=["MatMul", "Relu", "Softmax"])  # noqa: E731


def test_summary_text_in_the_seed_form():
    p = he.plan(he.load_model(chain_model()), [GPU(), CPU()])
    assert p.summary() == ("3 partition(s) across 2 device(s); gpu: 2 node(s) (66.7%), cpu: 1 node(s) (33.3%); "
                           "2 cross-provider transfer(s); ops forced onto a fallback provider: Softmax; "
                           "partitions per provider: gpu 2 (optimal), cpu 1 (optimal)")
    assert p.partitions_df().attrs["partition_bounds"]["gpu"] == {"partitions": 2, "lower_bound": 2,
                                                                  "optimal": True}
    assert [t.kind for t in p.transfers] == ["D2H", "H2D"]
    assert [t.nbytes for t in p.transfers] == [64, 64]
    assert p.explain("sm")["declined_by"] == {"gpu": "Softmax not in gpu's op table"}


def test_tables_have_the_documented_columns():
    p = he.plan(he.load_model(chain_model()), [GPU(), CPU()])
    assert list(p.placement_df().columns) == ["node_id", "name", "op_type", "domain", "opset", "provider",
                                              "device", "partition", "declined_by", "expanded_from", "optimised",
                                              "subgraph"]
    assert list(p.partitions_df().columns)[:5] == ["partition", "provider", "device", "n_nodes", "op_types"]
    t = p.transfers_df()
    assert list(t["kind"]) == ["D2H", "H2D"] and list(t["bytes"]) == [64, 64]
    d = json.loads(p.to_json())
    for key in ("nodes", "partitions", "transfers", "transfer_bytes", "placement", "fallback_ops"):
        assert key in d
    assert d["transfer_bytes"] == 128 and d["placement"] == {"gpu": 2, "cpu": 1}
    assert d["fallback_ops"] == {"Softmax": 1}


def test_unsupported_node_sits_on_the_unplaced_lane_unless_strict():
    p = he.plan(he.load_model(chain_model()), [GPU(), mask(CPU(), deny=["Softmax"])])
    assert p.provider_names == ["gpu", "cpu", "unplaced"]
    assert p.placement_counts() == {"gpu": 2, "cpu": 0, "unplaced": 1}
    b = p.execution_blockers[0]
    assert (b.kind, b.where) == ("unplaceable", "sm")
    assert "gpu: Softmax not in gpu's op table" in b.detail and "cpu: Softmax denied by mask" in b.detail
    assert not p.executable
    with pytest.raises(he.HeterogeneousExecutionUnsupported, match="unplaceable"):
        he.guard_heterogeneous_fallback(p)


def test_unsupported_node_error_names_node_op_domain_opset_and_reasons():
    with pytest.raises(he.UnsupportedNodeError) as e:
        he.plan(he.load_model(chain_model()), [GPU(), mask(CPU(), deny=["Softmax"])], strict=True)
    msg = str(e.value)
    for part in ("'sm'", "Softmax", "ai.onnx", "opset 17", "gpu: Softmax not in gpu's op table",
                 "cpu: Softmax denied by mask"):
        assert part in msg
    assert e.value.reasons == {"gpu": "Softmax not in gpu's op table", "cpu": "Softmax denied by mask"}


def test_classification():
    single = he.classify_placement(he.load_model(chain_model()), [CPU()])
    assert isinstance(single, he.SingleProvider) and single.provider.name == "cpu"
    het = he.classify_placement(he.load_model(chain_model()), [GPU(), CPU()])
    assert isinstance(het, he.Heterogeneous) and len(het.plan.partitions) == 3


def test_guard_heterogeneous_fallback():
    g = he.load_model(chain_model())
    assert he.guard_heterogeneous_fallback(g, [GPU(), CPU()], enabled=True).is_heterogeneous
    with pytest.raises(he.HeterogeneousExecutionUnsupported, match="fallback is disabled.*Softmax"):
        he.guard_heterogeneous_fallback(g, [GPU(), CPU()], enabled=False)
    assert not he.guard_heterogeneous_fallback(g, [CPU()], enabled=False).is_heterogeneous


def _function_model(with_attr=False):
    body = [helper.make_node("Relu", ["a"], ["t"]), helper.make_node("Neg", ["t"], ["b"])]
    fn = helper.make_function("custom", "ReluNeg", ["a"], ["b"], body,
                              [helper.make_opsetid("", 17)], attributes=["alpha"] if with_attr else [])
    nodes = [helper.make_node("ReluNeg", ["x"], ["y"], domain="custom", name="fn_call")]
    return model(nodes, [vi("x", [4])], [vi("y", [4])], functions=[fn],
                 extra_opsets=[helper.make_opsetid("custom", 1)])


def test_function_node_no_provider_supports_is_inlined_and_placed():
    g = he.load_model(_function_model())
    provs = [VirtualProvider("gpu", "cuda:0", ops=["Relu"]), VirtualProvider("cpu", "cpu:0", ops=["Relu", "Neg"])]
    p = he.plan(g, provs)
    assert p.inlined_functions == ("custom::ReluNeg",)
    assert [n.op_type for n in p.graph.nodes] == ["Relu", "Neg"]
    assert [p.providers[a].name for a in p.assignment] == ["gpu", "cpu"]


def test_function_supported_by_a_provider_is_not_inlined():
    g = he.load_model(_function_model())
    provs = [VirtualProvider("npu", "npu:0", ops=["ReluNeg"], domain="custom"),
             VirtualProvider("cpu", "cpu:0", ops=["Relu", "Neg"])]
    p = he.plan(g, provs)
    assert p.inlined_functions == () and p.graph.nodes[0].op_type == "ReluNeg"


def test_attribute_parameterized_function_fails_clearly():
    g = he.load_model(_function_model(with_attr=True))
    with pytest.raises(he.FunctionInliningError, match="parameterized by attributes"):
        he.plan(g, [VirtualProvider("cpu", "cpu:0", ops=["Relu", "Neg"])])


def _if_model():
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [], [vi("t", [4])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", [4])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0, name="sum"),
             helper.make_node("Greater", ["s", "zero"], ["c"], name="gt"),
             helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="branch")]
    return model(nodes, [vi("x", [4])], [vi("y", [4])], [numpy_helper.from_array(np.float32(0), "zero")])


def test_control_flow_plans_but_execution_fails_closed():
    g = he.load_model(_if_model())
    p = he.plan(g, [VirtualProvider("cpu", "cpu:0", ops=["ReduceSum", "Greater"])])
    assert not p.executable
    assert [b.kind for b in p.execution_blockers] == ["control-flow"]
    assert p.execution_blockers[0].where == "branch"
    with pytest.raises(he.HeterogeneousExecutionUnsupported, match="control flow"):
        he.guard_heterogeneous_fallback(p, enabled=True)


def test_sequence_and_epcontext_are_blockers():
    nodes = [helper.make_node("SequenceConstruct", ["x", "x"], ["seq"], name="mkseq"),
             helper.make_node("ConcatFromSequence", ["seq"], ["y"], axis=0, name="cat")]
    m = model(nodes, [vi("x", [4])], [vi("y", [8])])
    p = he.plan(he.load_model(m), [VirtualProvider("cpu", "cpu:0", ops=[])])
    assert {b.kind for b in p.execution_blockers} == {"sequence"}
    assert "execution blocked" in p.summary()
    nodes = [helper.make_node("EPContext", ["x"], ["y"], domain="com.microsoft", name="ctx",
                              embed_mode=1, ep_cache_context="blob")]
    m = model(nodes, [vi("x", [4])], [vi("y", [4])], extra_opsets=[helper.make_opsetid("com.microsoft", 1)])
    p = he.plan(he.load_model(m, check=False), [VirtualProvider("cpu", "cpu:0", ops=["Relu"])])
    assert [b.kind for b in p.execution_blockers] == ["ep-context"]


def _dynamic_reshape_model():
    """What torch's TorchScript exporter emits: Shape → Gather → Unsqueeze → Concat → Reshape."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "ax0"], ["nu"]),
             helper.make_node("Concat", ["nu", "m1"], ["newshape"], axis=0),
             helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Reshape", ["r", "newshape"], ["y"], name="reshape")]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "i0"),
             numpy_helper.from_array(np.array([0], np.int64), "ax0"),
             numpy_helper.from_array(np.array([-1], np.int64), "m1")]
    return model(nodes, [vi("x", ["batch", 4, 8])], [vi("y", ["batch", 32])], inits)


def test_symbolic_batch_bound_through_input_shapes_folds_shape_subgraph():
    g = he.load_model(_dynamic_reshape_model(), input_shapes={"x": (3, 4, 8)})
    assert [n.op_type for n in g.nodes] == ["Relu", "Reshape"]
    assert len(g.folded_nodes) == 4 and g.symbolic_values == []
    assert g.values["y"].shape == (3, 32)
    p = he.plan(g, [VirtualProvider("cpu", "cpu:0", ops=["Relu", "Reshape"])])
    assert p.executable


def test_unbound_symbolic_batch_is_reported_and_executes():
    g = he.load_model(_dynamic_reshape_model())
    assert "x" in g.symbolic_values and "y" in g.symbolic_values
    p = he.plan(g, [VirtualProvider("cpu", "cpu:0", ops=["Relu", "Reshape", "Shape", "Gather", "Unsqueeze",
                                                          "Concat"])])
    assert p.execution_blockers == ()   # shapes are computed at run time (hetero_explore.runner.shapes)
    assert p.transfer_bytes == 0
    g2 = he.load_model(_dynamic_reshape_model(), dim_values={"batch": 5})
    assert g2.values["y"].shape == (5, 32)
    g3 = he.load_model(_dynamic_reshape_model(), input_shapes={"x": (3, 4, 8)}, fold_constants=False)
    assert len(g3.nodes) == 6 and g3.folded_nodes == []


@pytest.mark.parametrize("kwargs, match", [
    ({"input_shapes": {"nope": (1,)}}, "not a graph input"),
    ({"input_shapes": {"x": (1, 2)}}, "rank 3"),
    ({"input_shapes": {"x": (1, 5, 8)}}, "fixed at 4"),
    ({"dim_values": {"seq": 3}}, "no symbolic dim"),
])
def test_bad_bindings_are_typed(kwargs, match):
    with pytest.raises(he.ShapeBindingError, match=match):
        he.load_model(_dynamic_reshape_model(), **kwargs)


def test_malformed_models_are_typed(tmp_path):
    with pytest.raises(he.ModelLoadError, match="not a serialized ONNX model"):
        he.load_model(b"\x08\x07garbage\xff\xff")
    with pytest.raises(he.ModelLoadError, match="not found"):
        he.load_model(tmp_path / "missing.onnx")
    with pytest.raises(he.ModelLoadError, match="cannot load a model from int"):
        he.load_model(42)
    bad = model([helper.make_node("Relu", ["nope"], ["y"])], [vi("x", [4])], [vi("y", [4])])
    with pytest.raises(he.InvalidModelError, match="onnx.checker"):
        he.load_model(bad)


def test_external_data_outside_model_dir_is_refused(tmp_path):
    m = chain_model()
    t = m.graph.initializer[0]
    t.data_location = TensorProto.EXTERNAL
    t.ClearField("raw_data")
    t.ClearField("float_data")
    e = t.external_data.add()
    e.key, e.value = "location", "../../etc/passwd"
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    with pytest.raises(he.ModelLoadError, match="outside the model's directory"):
        he.load_model(path)


def test_hostile_names_survive_planning_and_json():
    name = '<script>alert(1)</script>"&]]>\n{}->;'
    nodes = [helper.make_node("Relu", ["x"], [name], name=name),
             helper.make_node("Neg", [name], ["y"], name=name + "2")]
    m = model(nodes, [vi("x", [4])], [vi("y", [4])])
    p = he.plan(he.load_model(m), [VirtualProvider("a", "cuda:0", ops=["Relu"]),
                                   VirtualProvider("b", "cpu:0", ops=["Neg"])])
    d = json.loads(p.to_json())
    assert d["transfers"][0]["value"] == name


def test_unknown_policy_and_provider_names():
    g = he.load_model(chain_model())
    with pytest.raises(he.PlanningError, match="unknown placement policy"):
        he.plan(g, [CPU()], policy="fastest")
    with pytest.raises(ValueError, match="unknown provider name"):
        he.plan(g, ["tpu"])
    with pytest.raises(ValueError, match="unique"):
        he.plan(g, [CPU(), CPU()])
    with pytest.raises(ValueError, match="empty"):
        he.plan(g, [])


def test_mask_check_composes_with_chain():
    """mask(check=chain(...)) declines by the composed checks; the first refusal is the reason."""
    from hetero_explore.data import models
    from hetero_explore.providers import chain, cpu, decline_if_input_dtype, decline_if_larger_than
    g = he.load_model(models.mlp("tiny"))
    strict = mask(cpu(), check=chain(decline_if_larger_than(4), decline_if_input_dtype("int64")))
    p = he.plan(g, [strict, cpu("cpu2")])
    assert set(p.placement_df()["provider"]) == {"cpu2"}
    assert any("larger than 4" in r for r in p.placement_df()["declined_by"].astype(str))
    assert not strict.signature_cacheable(g.nodes[0])


def test_provider_names_resolve_through_a_registry():
    from hetero_explore.ir.errors import UnknownProviderError
    from hetero_explore.providers import PROVIDERS, register_provider, resolve
    assert {"cpu", "cuda", "gpu"} <= set(PROVIDERS)
    register_provider("npu-test", lambda: VirtualProvider("npu-test", "npu:0", ops=["Relu"]))
    try:
        assert resolve("NPU-test").device.type == "npu"
        with pytest.raises(UnknownProviderError, match="did you mean 'npu-test'"):
            resolve("npu-tset")
    finally:
        PROVIDERS.pop("npu-test")
