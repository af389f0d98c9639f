"""Property tests of the planner's invariants on random DAGs and capability masks."""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import hetero_explore as he
from hetero_explore.providers import VirtualProvider
from support.plans import check_invariants as _check_invariants, closure, mergeable_pairs, path_runs  # noqa: F401

UNARY = ["Relu", "Sigmoid", "Tanh", "Exp", "Neg"]
BINARY = ["Add", "Mul", "Sub"]
OPS = UNARY + BINARY
DEVICES = ["cpu:0", "cuda:0", "cuda:1", "npu:0", "cpu:0"]


@st.composite
def dags(draw, max_nodes=30):
    """A random DAG as a list of (op, input indices); index -1 is the graph input."""
    n = draw(st.integers(1, max_nodes))
    nodes = []
    for i in range(n):
        op = draw(st.sampled_from(OPS))
        arity = 2 if op in BINARY else 1
        ins = [draw(st.integers(-1, i - 1)) for _ in range(arity)]
        nodes.append((op, ins))
    return nodes


def build_model(nodes, order=None) -> onnx.ModelProto:
    order = list(range(len(nodes))) if order is None else order
    consumed = {j for _, ins in nodes for j in ins}
    protos = []
    for i in order:
        op, ins = nodes[i]
        names = ["x" if j < 0 else f"v{j}" for j in ins]
        protos.append(helper.make_node(op, names, [f"v{i}"], name=f"n{i}"))
    outs = [i for i in range(len(nodes)) if i not in consumed] or [len(nodes) - 1]
    graph = helper.make_graph(
        protos, "random",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info(f"v{i}", TensorProto.FLOAT, [4]) for i in outs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@st.composite
def provider_sets(draw):
    k = draw(st.integers(2, 4))
    provs = []
    for i in range(k):
        if i == k - 1:
            ops = OPS  # the last provider takes everything: placement always succeeds
        else:
            ops = draw(st.lists(st.sampled_from(OPS), unique=True, max_size=len(OPS)))
        provs.append(VirtualProvider(f"p{i}", draw(st.sampled_from(DEVICES)), ops=ops))
    return provs


def check_invariants(g, p):
    """The plan invariants, placement by the virtual providers' op lists, 16-byte transfers."""
    _check_invariants(g, p, first_fit=lambda node: next(i for i, pr in enumerate(p.providers)
                                                         if node.op_type in pr.ops), nbytes=lambda v: 16)


def random_topological_order(nodes, rnd):
    """A random order of node indices in which producers come before consumers
    (ONNX requires topologically sorted nodes)."""
    remaining = {i: {j for j in ins if j >= 0} for i, (_, ins) in enumerate(nodes)}
    order = []
    while remaining:
        ready = sorted(i for i, deps in remaining.items() if not deps)
        pick = rnd.choice(ready)
        order.append(pick)
        del remaining[pick]
        for deps in remaining.values():
            deps.discard(pick)
    return order


def canonical(p):
    names = lambda ids: frozenset(p.graph.nodes[i].name for i in ids)  # noqa: E731
    return (frozenset((part.provider, names(part.node_ids)) for part in p.partitions),
            frozenset((t.value, t.src_provider, t.dst_provider, t.kind) for t in p.transfers),
            {p.graph.nodes[i].name: p.providers[a].name for i, a in enumerate(p.assignment)})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags(), provider_sets(), st.randoms(use_true_random=False))
def test_plan_invariants_and_determinism(nodes, provs, rnd):
    g = he.load_model(build_model(nodes))
    p = he.plan(g, provs)
    check_invariants(g, p)
    # deterministic
    p2 = he.plan(he.load_model(build_model(nodes)), provs)
    assert canonical(p) == canonical(p2)
    assert [part.node_ids for part in p.partitions] == [part.node_ids for part in p2.partitions]
    assert p.to_json() == p2.to_json().replace(f'"plan_seconds": {p2.plan_seconds}',
                                               f'"plan_seconds": {p.plan_seconds}')
    # unchanged (up to ids) when the model's node order is permuted
    order = random_topological_order(nodes, rnd)
    p3 = he.plan(he.load_model(build_model(nodes, order)), provs)
    assert canonical(p3) == canonical(p)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 2), min_size=1, max_size=40))
def test_chain_gets_one_partition_per_maximal_run(seq):
    """A chain whose node i runs op OPS[seq[i]]: partitions == maximal same-provider runs."""
    ops = ["Relu", "Sigmoid", "Tanh"]
    nodes = [(ops[s], [i - 1]) for i, s in enumerate(seq)]
    g = he.load_model(build_model(nodes))
    provs = [VirtualProvider("a", "cuda:0", ops=["Relu"]), VirtualProvider("b", "npu:0", ops=["Sigmoid"]),
             VirtualProvider("c", "cpu:0", ops=ops)]
    p = he.plan(g, provs)
    runs = [k for k, _ in itertools.groupby(p.assignment)]
    assert len(p.partitions) == len(runs)
    assert len(p.transfers) == len(runs) - 1
    check_invariants(g, p)


def test_diamond_cannot_merge_and_explains_why():
    # a -> b(other provider) -> d ; a -> d : a and d are on "g" but merging them would
    # make a path leave and re-enter.
    nodes = [("Relu", [-1]), ("Sigmoid", [0]), ("Add", [0, 1])]
    g = he.load_model(build_model(nodes))
    provs = [VirtualProvider("g", "cuda:0", ops=["Relu", "Add"]), VirtualProvider("c", "cpu:0", ops=OPS)]
    p = he.plan(g, provs)
    assert len(p.partitions) == 3
    assert [part.provider for part in p.partitions] == ["g", "c", "g"]
    assert len(p.convexity_splits) == 1
    split = p.convexity_splits[0]
    assert split.path == ("n0", "n1", "n2")
    check_invariants(g, p)


def test_independent_branches_of_a_convex_provider_form_one_partition():
    # two independent branches on the primary provider: its node set is convex
    nodes = [("Relu", [-1]), ("Relu", [0]), ("Tanh", [-1]), ("Sigmoid", [2])]
    g = he.load_model(build_model(nodes))
    provs = [VirtualProvider("g", "cuda:0", ops=["Relu", "Sigmoid"]), VirtualProvider("c", "cpu:0", ops=OPS)]
    p = he.plan(g, provs)
    assert sum(part.provider == "g" for part in p.partitions) == 1
    check_invariants(g, p)


def test_transfer_dedup_per_value_and_destination():
    # v0 on gpu feeds three cpu consumers and two npu consumers
    nodes = [("Relu", [-1]), ("Tanh", [0]), ("Exp", [0]), ("Neg", [0]), ("Sigmoid", [0]), ("Sigmoid", [0])]
    g = he.load_model(build_model(nodes))
    provs = [VirtualProvider("gpu", "cuda:0", ops=["Relu"]), VirtualProvider("npu", "npu:0", ops=["Sigmoid"]),
             VirtualProvider("cpu", "cpu:0", ops=OPS)]
    p = he.plan(g, provs)
    keys = sorted((t.value, t.dst_provider, t.kind) for t in p.transfers)
    assert keys == [("v0", "cpu", "D2H"), ("v0", "npu", "D2D")]




def greedy_runs(g, assignment, k, switch):
    """Runs per provider of a greedy topological order: keep taking a ready node of the
    current provider (smallest id); when none is ready, switch to the provider that
    ``switch(ready)`` picks. Contiguous runs of a topological order are convex, so these
    counts are achievable."""
    preds, succs = g.adjacency()
    indeg = [len(ps) for ps in preds]
    ready = sorted(v for v in range(len(g.nodes)) if indeg[v] == 0)
    runs = [0] * k
    cur = -1
    while ready:
        mine = [v for v in ready if assignment[v] == cur]
        if not mine:
            cur = switch(ready)
            runs[cur] += 1
            mine = [v for v in ready if assignment[v] == cur]
        v = mine[0]
        ready.remove(v)
        for w in succs[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append(w)
        ready.sort()
    return runs


# derandomized: the planner's re-grouping is a set of structural greedy orders, not an
# exact optimiser, and about one random case in several thousand still beats it (see
# test_known_gap_beyond_the_structural_greedies); fixed examples keep this reproducible.
@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(dags(), provider_sets())
def test_partition_counts_reach_the_bound_wherever_a_greedy_order_does(nodes, provs):
    g = he.load_model(build_model(nodes))
    p = he.plan(g, provs)
    k = len(p.providers)
    a = p.assignment
    counts = [sum(1 for part in p.partitions if part.provider_index == pi) for pi in range(k)]
    bounds = [path_runs(g, a, pi) for pi in range(k)]
    switches = [lambda ready: a[ready[0]],                                        # oldest ready node's
                lambda ready: max(range(k), key=lambda q: (sum(a[v] == q for v in ready), -q))]  # most ready
    for switch in switches:
        greedy = greedy_runs(g, a, k, switch)
        assert all(gr >= lb for gr, lb in zip(greedy, bounds))
        if greedy == bounds:  # the bound is achievable, and a greedy order shows it
            assert counts == bounds, (greedy, counts)


def test_unjoined_same_provider_partitions_merge():
    """The smallest case the level sweep missed: nodes 3 and 4 (provider p1) are not
    joined by an edge and neither reaches the other, so they share one partition."""
    a = [1, 0, 2, 1, 1, 0]
    ops = {0: "Sigmoid", 1: "Relu", 2: "Tanh"}   # provider -> an op only it (or a later one) runs
    nodes = [(ops[a[0]], [-1]), (ops[a[1]], [0]), (ops[a[2]], [0]), ("Add", [1, 2]),
             (ops[a[4]], [2]), (ops[a[5]], [3])]
    provs = [VirtualProvider("p0", "cuda:0", ops=["Sigmoid"]), VirtualProvider("p1", "npu:0", ops=["Relu", "Add"]),
             VirtualProvider("p2", "cpu:0", ops=OPS)]
    g = he.load_model(build_model(nodes))
    p = he.plan(g, provs)
    assert list(p.assignment) == a
    counts = [sum(1 for part in p.partitions if part.provider_index == pi) for pi in range(3)]
    assert counts == [2, 2, 1] == list(p.lower_bounds)
    assert p.node_partition[3] == p.node_partition[4]
    check_invariants(g, p)


KNOWN_GAP = [("Sigmoid", [-1]), ("Relu", [0]), ("Relu", [0]), ("Tanh", [0]), ("Relu", [0]), ("Relu", [0]),
             ("Relu", [0]), ("Relu", [0]), ("Relu", [0]), ("Relu", [0]), ("Sigmoid", [1]), ("Tanh", [1]),
             ("Relu", [10]), ("Relu", [0]), ("Relu", [0]), ("Relu", [0]), ("Relu", [0]), ("Relu", [0]),
             ("Relu", [0]), ("Relu", [0]), ("Relu", [11]), ("Relu", [0]), ("Relu", [3]), ("Tanh", [20]),
             ("Relu", [0]), ("Relu", [0]), ("Relu", [0]), ("Relu", [0]), ("Relu", [0])]


@pytest.mark.xfail(strict=True, reason="known gap: the oldest-ready greedy (node-id order) reaches [2, 2, 2]; "
                   "the planner's structural greedies and merges stop at [2, 2, 3]")
def test_known_gap_beyond_the_structural_greedies():
    g = he.load_model(build_model(KNOWN_GAP))
    provs = [VirtualProvider("p0", "cuda:0", ops=["Relu"]), VirtualProvider("p1", "npu:0", ops=["Sigmoid"]),
             VirtualProvider("p2", "cpu:0", ops=OPS)]
    p = he.plan(g, provs)
    check_invariants(g, p)
    a = p.assignment
    assert greedy_runs(g, a, 3, lambda ready: max(range(3), key=lambda q: (sum(a[v] == q for v in ready), -q))) \
        == [2, 2, 2] or greedy_runs(g, a, 3, lambda ready: a[ready[0]]) == [2, 2, 2]
    counts = [sum(1 for part in p.partitions if part.provider_index == pi) for pi in range(3)]
    assert counts == list(p.lower_bounds) == [2, 2, 2]
