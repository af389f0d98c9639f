"""Nodes no provider runs are expanded into their onnx schema function bodies
(hetero_explore.load.expand), planned heterogeneously and executed on our kernels."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import hetero_explore as he
from hetero_explore.load import expand
from hetero_explore.ir.errors import FunctionExpansionError, UnsupportedNodeError
from hetero_explore.providers import VirtualProvider, mask, resolve

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def model(nodes, inputs, outputs, opset):
    g = helper.make_graph(nodes, "g", inputs, outputs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m


def vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def sce_model(reduction="mean"):
    node = helper.make_node("SoftmaxCrossEntropyLoss", ["x", "y"], ["loss"], name="sce", reduction=reduction)
    out = [3] if reduction == "none" else []
    return model([node], [vi("x", F, [3, 5]), vi("y", I64, [3])], [vi("loss", F, out)], 13)


def gelu_model(approximate="none"):
    node = helper.make_node("Gelu", ["x"], ["y"], name="gelu", approximate=approximate)
    return model([node], [vi("x", F, [2, 6])], [vi("y", F, [2, 6])], 20)


def attention_model():
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], name="attn")
    shape = [1, 2, 4, 8]  # batch, heads, sequence, head size
    return model([node], [vi("q", F, shape), vi("k", F, shape), vi("v", F, shape)], [vi("y", F, shape)], 23)


def sce_inputs():
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((3, 5)).astype(np.float32), "y": np.array([0, 4, 2], np.int64)}


def onnxruntime_outputs(m, feeds):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in m.graph.output]
    return dict(zip(names, sess.run(names, feeds)))


def check_against_reference_and_ort(p, m, feeds):
    run = he.execute(p, feeds)
    ref = he.execute_reference(p.graph, "cpu", feeds)
    diff = he.compare(run, ref)
    assert diff["byte_identical"].all(), diff.to_string()
    for name, want in onnxruntime_outputs(m, feeds).items():
        np.testing.assert_allclose(run.outputs[name], want, rtol=1e-5, atol=1e-6)
    return run


# -- the loss: SoftmaxCrossEntropyLoss -> (LogSoftmax, ..., NegativeLogLikelihoodLoss -> ...) ----------
def test_loss_is_expanded_recursively_planned_heterogeneously_and_byte_identical():
    m = sce_model()
    g = he.load_model(m)
    cuda = mask(resolve("cuda"), deny=["LogSoftmax"])  # forces a second provider into the plan
    p = he.plan(g, [cuda, "cpu"])
    ops = [n.op_type for n in p.graph.nodes]
    assert "SoftmaxCrossEntropyLoss" not in ops and "NegativeLogLikelihoodLoss" not in ops
    assert "LogSoftmax" in ops and "GatherElements" in ops
    assert p.is_heterogeneous and set(p.placement_counts().values()) != {0}
    # both levels recorded: the loss (depth 1) and the NLL loss of its body (depth 2)
    recs = {r["op_type"]: r for r in p.expansions}
    assert recs["SoftmaxCrossEntropyLoss"]["depth"] == 1 and recs["SoftmaxCrossEntropyLoss"]["node"] == "sce"
    assert recs["NegativeLogLikelihoodLoss"]["depth"] == 2
    assert recs["NegativeLogLikelihoodLoss"]["expanded_from"] == "sce"
    assert recs["SoftmaxCrossEntropyLoss"]["body"] == "context-dependent"
    df = p.placement_df()
    assert (df["expanded_from"] == "sce").all()
    assert df["name"].is_unique
    assert "expanded into onnx function bodies: SoftmaxCrossEntropyLoss (1 node(s) → " in p.summary()
    assert p.to_dict()["expansions"][0]["node"] == "sce"
    assert p.graph.info["expanded_from"] and not p.graph.symbolic_values
    check_against_reference_and_ort(p, m, sce_inputs())


@pytest.mark.parametrize("reduction", ["sum", "none"])
def test_loss_reductions_on_cpu_match_onnxruntime(reduction):
    m = sce_model(reduction)
    p = he.plan(he.load_model(m), ["cpu"])
    assert {r["op_type"] for r in p.expansions} == {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"}
    check_against_reference_and_ort(p, m, sce_inputs())


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_context_dependent_body_heterogeneous(approximate):
    m = gelu_model(approximate)
    # Gelu has native kernels now: deny it everywhere so that its body is what runs
    cuda = mask(resolve("cuda"), deny=["Erf", "Tanh", "Gelu"])
    p = he.plan(he.load_model(m), [cuda, mask(resolve("cpu"), deny=["Gelu"])])
    assert [r["op_type"] for r in p.expansions] == ["Gelu"] and p.is_heterogeneous
    feeds = {"x": np.linspace(-3, 3, 12, dtype=np.float32).reshape(2, 6)}
    check_against_reference_and_ort(p, m, feeds)


# -- Attention ----------------------------------------------------------------------------------
def _attention_body_ops():
    g = expand.expand_nodes(he.load_model(attention_model()), [0])
    return sorted(set(g.op_types()))


def test_attention_expands_and_plans_heterogeneously_on_capability_providers():
    body = _attention_body_ops()
    assert "MatMul" in body and "Softmax" in body and "Attention" not in body
    npu = VirtualProvider("npu", "npu:0", ops=["MatMul", "Softmax"])
    host = VirtualProvider("host", "cpu:0", ops=[op for op in body if op not in ("MatMul", "Softmax")])
    p = he.plan(he.load_model(attention_model()), [npu, host])
    assert p.is_heterogeneous
    assert p.expansions[0]["node"] == "attn" and p.expansions[0]["body"] == "context-dependent"
    df = p.placement_df()
    assert (df["expanded_from"] == "attn").all()
    assert set(df.loc[df["op_type"].isin(["MatMul", "Softmax"]), "provider"]) == {"npu"}
    assert p.transfers  # values cross between the two


def test_attention_executes_byte_identical_and_matches_onnxruntime():
    # (was a strict xfail until Cast at opset 23+ existed: Attention-23's body casts)
    m = attention_model()
    # both providers run Attention natively (attention.py): deny it to test its body
    p = he.plan(he.load_model(m), [mask(resolve("cuda"), deny=["Softmax", "Attention"]),
                                   mask(resolve("cpu"), deny=["Attention"])], strict=True)
    assert p.expansions and p.expansions[0]["node"] == "attn"
    rng = np.random.default_rng(1)
    feeds = {n: rng.standard_normal((1, 2, 4, 8)).astype(np.float32) for n in ("q", "k", "v")}
    check_against_reference_and_ort(p, m, feeds)


def test_attention_error_names_the_model_node_and_the_body_op_missing():
    with pytest.raises(UnsupportedNodeError) as e:
        # the body's MatMul (no body of its own) denied on the only provider
        he.plan(he.load_model(attention_model()), [mask(resolve("cpu"), deny=["MatMul", "Attention"])], strict=True)
    msg = str(e.value)
    assert e.value.node_name == "attn" and e.value.op_type == "Attention"
    assert "its onnx function body was expanded, but no provider supports the body's node 'attn/" in msg


# -- native kernels first, bounds, opsets ------------------------------------------------------------
def test_a_provider_that_runs_the_op_keeps_it_unexpanded():
    npu = VirtualProvider("npu", "npu:0", ops=["SoftmaxCrossEntropyLoss"])
    p = he.plan(he.load_model(sce_model()), [npu, "cpu"])
    assert [n.op_type for n in p.graph.nodes] == ["SoftmaxCrossEntropyLoss"]
    assert p.expansions == () and p.expanded_ops() == {}
    assert p.placement_df()["expanded_from"].isna().all()
    assert "expanded" not in p.summary()
    # lower priority still wins over expansion: cpu has no kernel, the npu runs it natively
    p2 = he.plan(he.load_model(sce_model()), ["cpu", npu])
    assert [n.op_type for n in p2.graph.nodes] == ["SoftmaxCrossEntropyLoss"]
    assert p2.provider_of(0).name == "npu"


def test_expansion_bounds_nodes_and_depth(monkeypatch):
    g = he.load_model(sce_model())
    with pytest.raises(FunctionExpansionError, match=r"bound: 3\); add a provider that implements"):
        expand.expand_nodes(g, [0], max_nodes=3)
    g1 = expand.expand_nodes(g, [0])
    nll = [n.id for n in g1.nodes if n.op_type == "NegativeLogLikelihoodLoss"]
    with pytest.raises(FunctionExpansionError, match="nested function expansions"):
        expand.expand_nodes(g1, nll, max_depth=1)
    # the planner uses the module's bound
    monkeypatch.setattr(expand, "MAX_EXPANSION_DEPTH", 1)
    with pytest.raises(FunctionExpansionError, match="the bound is 1"):
        he.plan(he.load_model(sce_model()), ["cpu"])


def test_body_names_are_fresh_and_inputs_outputs_bound():
    m = sce_model()
    # a value named like the one the body would create must not be captured
    m.graph.node.insert(0, helper.make_node("Identity", ["x"], ["sce/X_Log"], name="clash"))
    m.graph.node[1].input[0] = "sce/X_Log"
    # optimize=False: the clashing Identity is this test's fixture (the optimiser would remove it)
    g = expand.expand_nodes(he.load_model(m, fold_constants=False, optimize=False), [1])
    produced = [o for n in g.nodes for o in n.outputs if o]
    assert len(produced) == len(set(produced))
    assert g.values["sce/X_Log"].producer == next(n.id for n in g.nodes if n.name == "clash")
    assert g.outputs == ["loss"] and g.values["loss"].producer is not None
    assert all(g.info["expanded_from"][n.name] == "sce" for n in g.nodes if n.name != "clash")


def test_attribute_references_are_bound_to_the_node_or_the_schema_default():
    # Elu's body (opset 18) is "Alpha = Constant <value_float = @alpha>"
    for alpha, want in ((None, 1.0), (0.5, 0.5)):
        kw = {} if alpha is None else {"alpha": alpha}
        m = model([helper.make_node("Elu", ["x"], ["y"], name="elu", **kw)],
                  [vi("x", F, [4])], [vi("y", F, [4])], 18)
        g = expand.expand_nodes(he.load_model(m, fold_constants=False), [0])
        consts = [n for n in g.nodes if n.op_type == "Constant"]
        alphas = [a.f for n in consts for a in n.proto.attribute if a.name == "value_float"]
        assert alphas == [pytest.approx(want)], alphas
        assert all(not a.ref_attr_name for n in g.nodes for a in n.proto.attribute)


def test_no_body_before_its_opset_and_unknown_ops():
    m = model([helper.make_node("Elu", ["x"], ["y"], name="elu")], [vi("x", F, [4])], [vi("y", F, [4])], 10)
    g = he.load_model(m)
    why = expand.expandable(g, g.nodes[0])
    assert "needs opset 18 or later" in why
    with pytest.raises(expand.BodyUnavailable):
        expand.function_body(g, g.nodes[0])
    npu = VirtualProvider("npu", "npu:0", ops=["Relu"])
    with pytest.raises(UnsupportedNodeError, match="needs opset 18 or later"):
        he.plan(g, [npu], strict=True)
    assert not expand.has_function_body("Relu", "", 13)
    assert expand.has_function_body("Mish", "", 18) and not expand.has_function_body("Mish", "", 17)


def test_body_opsets_must_mean_the_same_at_the_models_opset():
    s = lambda op, v: onnx.defs.get_schema(op, v, "")  # noqa: E731
    assert expand._incompatible("Cast", s("Cast", 11), s("Cast", 23)) is None  # types and saturate added
    assert "inputs or outputs" in expand._incompatible("ReduceMean", s("ReduceMean", 13), s("ReduceMean", 18))
    assert "attributes ['axis']" in expand._incompatible("Softmax", s("Softmax", 11), s("Softmax", 13))


def test_conformance_claims_through_expansion():
    from hetero_explore.analysis.conformance import node_cases, run_case

    case = next(c for c in node_cases() if c.name == "test_sce_mean_weight")
    row = run_case(case, resolve("cpu"))
    assert row["status"] == "passed", row
    assert row["expanded"].split(",")[0] == "SoftmaxCrossEntropyLoss"
    # LogSoftmax has a body of its own: denied, it is expanded too
    row = run_case(case, mask(resolve("cpu"), deny=["LogSoftmax"]))
    assert row["status"] == "passed" and "LogSoftmax" in row["expanded"].split(","), row
    # GatherElements has none: the case is not claimed, and the reason says why
    row = run_case(case, mask(resolve("cpu"), deny=["GatherElements"]))
    assert not row["claimed"] and "GatherElements" in row["reason"], row
