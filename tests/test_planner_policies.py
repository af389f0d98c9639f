"""Placement policies (priority, min-transfer), the capability cache through masks and
virtual GPUs, lower bounds on transformer-like graphs, and the explorer's policy what-if."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import hetero_explore as he
from hetero_explore.data import models
from hetero_explore.planner import POLICIES, CostModel, register_policy
from hetero_explore.providers import KernelMatch, VirtualProvider, cpu, mask, virtual_gpu

from test_planner_properties import build_model, check_invariants, dags, provider_sets


def sandwich(n=4096):
    """Relu -> Neg -> Relu -> Neg ... on a big tensor: Neg runs only on the CPU."""
    nodes = []
    prev = "x"
    for i in range(6):
        op = "Relu" if i % 2 == 0 else "Neg"
        nodes.append(helper.make_node(op, [prev], [f"v{i}"], name=f"n{i}"))
        prev = f"v{i}"
    g = helper.make_graph(nodes, "s", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [n])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def two():
    return [VirtualProvider("gpu", "cuda:0", ops=["Relu"]), VirtualProvider("cpu", "cpu:0", ops=["Relu", "Neg"])]


def test_policy_registry_and_unknown_names():
    assert set(POLICIES) >= {"priority", "min-transfer"}
    g = he.load_model(sandwich())
    with pytest.raises(he.PlanningError, match="unknown placement policy 'fastest'.*min-transfer"):
        he.plan(g, two(), policy="fastest")
    register_policy("all-last", lambda graph, provs, a, d, cost: (np.full_like(a, len(provs) - 1), d))
    try:
        p = he.plan(g, two(), policy="all-last")
        assert set(p.assignment) == {1} and p.policy == "all-last"
    finally:
        del POLICIES["all-last"]


def test_min_transfer_moves_a_sandwiched_run_and_says_why():
    g = he.load_model(sandwich())
    pr = he.plan(g, two())
    mt = he.plan(g, two(), policy="min-transfer")
    assert pr.policy == "priority" and [pr.providers[i].name for i in pr.assignment].count("gpu") == 3
    assert len(pr.transfers) == 5 and len(mt.transfers) == 0 and set(mt.assignment) == {1}
    assert mt.estimate()["total_seconds"] < pr.estimate()["total_seconds"]
    assert "min-transfer policy moved it to cpu" in mt.explain("n0")["declined_by"]["gpu"]
    # a cost model where transfers are free keeps the priority placement
    free = CostModel(transfer_latency=0.0, link_bandwidth={k: 1e30 for k in ("H2D", "D2H", "D2D", "H2H")})
    assert he.plan(g, two(), policy="min-transfer", cost_model=free).assignment == pr.assignment


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags(), provider_sets())
def test_min_transfer_only_uses_supporting_providers_and_never_costs_more(nodes, provs):
    g = he.load_model(build_model(nodes))
    pr = he.plan(g, provs)
    mt = he.plan(g, provs, policy="min-transfer")
    for node in g.nodes:
        q = mt.providers[mt.assignment[node.id]]
        assert node.op_type in q.ops, f"{node.name} moved to {q.name}, which does not support it"
        assert mt.assignment[node.id] >= pr.assignment[node.id]  # only ever to lower priority
    assert mt.estimate()["total_seconds"] <= pr.estimate()["total_seconds"] + 1e-12
    check_invariants_partitions_only(g, mt)


def check_invariants_partitions_only(g, p):
    """Convexity and maximality (placement is not first-fit under this policy)."""
    import test_planner_properties as tp
    reach = tp.closure(g)
    for part in p.partitions:
        members = set(part.node_ids)
        out_of = set().union(*(reach[v] for v in members)) - members
        assert not any(reach[x] & members for x in out_of)
    assert not tp.mergeable_pairs(g, p)


def test_min_transfer_keeps_byte_identity():
    from hetero_explore.data import models
    g = he.load_model(models.mlp("tiny"))
    provs = [mask(virtual_gpu(), deny=["Relu"]), cpu()]
    pr = he.plan(g, provs)
    mt = he.plan(g, provs, policy="min-transfer")
    assert mt.estimate()["total_seconds"] <= pr.estimate()["total_seconds"]
    inputs = he.random_inputs(g, seed=0)
    ref = he.execute_reference(g, cpu(), inputs)
    for p in (pr, mt):
        run = he.execute(p, inputs)
        for k, v in ref.outputs.items():
            assert np.asarray(run.outputs[k]).tobytes() == np.asarray(v).tobytes()


# -- the capability cache ---------------------------------------------------------------
class Counting(VirtualProvider):
    """Counts supports() calls; neither signature- nor (optionally) context-cacheable."""

    def __init__(self, *a, ctx_ok=False, refuse=(), **kw):
        super().__init__(*a, **kw)
        self.calls = 0
        self.ctx_ok = ctx_ok
        self.refuse = set(refuse)

    def supports(self, ctx):
        self.calls += 1
        if ctx.node.op_type in self.refuse:
            return KernelMatch.no(f"node {ctx.node.name} refused")
        return super().supports(ctx)

    def signature_cacheable(self, node):
        return False

    def context_cacheable(self, node):
        return self.ctx_ok


def relu_chain(n):
    nodes = [("Relu" if i % 5 else "Neg", [i - 1]) for i in range(n)]
    return he.load_model(build_model(nodes))


def test_mask_refusals_are_cached_per_signature_whatever_the_provider_below():
    g = relu_chain(50)
    inner = Counting("gpu", "cuda:0", ops=["Relu", "Neg"])
    p = he.plan(g, [mask(inner, deny=["Neg"]), VirtualProvider("cpu", "cpu:0", ops=["Relu", "Neg"])])
    assert inner.calls == 40  # asked for every Relu (not cacheable), never for a denied Neg
    assert {p.declined[i]["gpu"] for i in range(0, 50, 5)} == {"Neg denied by mask"}


def test_context_cacheable_providers_are_asked_once_per_context_class():
    g = relu_chain(50)
    inner = Counting("gpu", "cuda:0", ops=["Relu", "Neg"], ctx_ok=True, refuse=["Neg"])
    p = he.plan(g, [inner, VirtualProvider("cpu", "cpu:0", ops=["Relu", "Neg"])])
    # one class of Relu nodes (same shapes) is asked once; refusals are asked per node
    assert inner.calls == 1 + 10
    assert p.declined[5]["gpu"] == "node n5 refused" and p.declined[10]["gpu"] == "node n10 refused"


def test_virtual_gpu_with_a_mask_asks_once_per_context_class():
    w = numpy_helper.from_array(np.eye(8, dtype=np.float32), "W")
    nodes = [helper.make_node("MatMul", ["x" if i == 0 else f"v{i - 1}", "W"], [f"v{i}"], name=f"m{i}")
             for i in range(300)]
    gp = helper.make_graph(nodes, "mm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                           [helper.make_tensor_value_info("v299", TensorProto.FLOAT, [2, 8])], initializer=[w])
    g = he.load_model(helper.make_model(gp, opset_imports=[helper.make_opsetid("", 17)]))
    vg = virtual_gpu()
    calls = []
    orig = vg.capability.supports
    vg.capability.supports = lambda ctx: (calls.append(ctx.node.name), orig(ctx))[1]
    p = he.plan(g, [mask(vg, deny=["Erf"]), cpu()])
    assert set(p.assignment) == {0} and len(calls) == 1


# -- lower bounds on transformer-like graphs ------------------------------------------------
def transformer_like(n, frac, seed=0):
    """MatMul -> Add(residual) -> activation blocks; a fraction ``frac`` of all nodes is
    Erf, which the gpu does not run."""
    rng = np.random.default_rng(seed)
    nodes, prev = [], -1
    while len(nodes) < n:
        i = len(nodes)
        nodes.append(("MatMul", [prev]))
        nodes.append(("Add", [i, prev]))
        nodes.append(("Erf" if rng.random() < 3 * frac else ["Relu", "Tanh", "Sigmoid"][rng.integers(3)], [i + 1]))
        if rng.random() < 0.3 and i >= 3:  # a skip connection over one block
            nodes.append(("Add", [i + 2, i - 1]))
        prev = len(nodes) - 1
    protos = []
    for i, (op, ins) in enumerate(nodes[:n]):
        names = ["x" if j < 0 else f"v{j}" for j in ins] + (["W"] if op == "MatMul" else [])
        protos.append(helper.make_node(op, names, [f"v{i}"], name=f"n{i}"))
    w = numpy_helper.from_array(np.eye(4, dtype=np.float32), "W")
    gp = helper.make_graph(protos, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                           [helper.make_tensor_value_info(f"v{n - 1}", TensorProto.FLOAT, [2, 4])], initializer=[w])
    return helper.make_model(gp, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("frac", [0.05, 0.2], ids=["5pct", "20pct"])
def test_transformer_like_gpu_partitions_meet_the_lower_bound(frac):
    g = he.load_model(transformer_like(1000, frac))
    p = he.plan(g, [mask(virtual_gpu(), deny=["Erf"]), cpu()])
    b = p.partition_bounds()
    assert b["gpu"]["optimal"] and b["gpu"]["partitions"] > 10
    assert "(optimal)" in p.summary()
    assert b["cpu"]["partitions"] <= b["gpu"]["partitions"] + 1


# -- the explorer's policy what-if -----------------------------------------------------------
def test_explorer_offers_min_transfer_as_a_what_if():
    g = he.load_model(sandwich())
    ex = he.Explorer(g, two())
    first = ex.plan
    ex.set_policy("min-transfer")
    assert ex.dirty
    second = ex.plan
    assert first.policy == "priority" and second.policy == "min-transfer"
    c = ex.compare_plans()
    assert len(c.moved) == 3 and set(c.moved["to_provider"]) == {"cpu"}
    assert "policy priority → min-transfer: estimated time" in c.summary()
    assert ex.history[-1].label.endswith("policy min-transfer")
    ex.set_policy("priority")
    assert ex.plan is first  # from the plan cache
    with pytest.raises(he.PlanningError, match="unknown placement policy"):
        ex.set_policy("fastest")


@pytest.mark.parametrize("make", [lambda: models.mlp("small"), lambda: models.cnn("small"),
                                  lambda: models.transformer("small")])
def test_kernel_times_from_the_arrays_equal_node_work_node_by_node(make):
    from hetero_explore.planner.policies import DEFAULT_COST, kernel_times, node_work
    g = he.load_model(make())
    provs = [virtual_gpu(), cpu()]
    want = [[DEFAULT_COST.kernel_seconds(*node_work(g, n), p.device.is_host) for p in provs] for n in g.nodes]
    assert kernel_times(g, provs, DEFAULT_COST).tolist() == want
