"""The planner's fast paths give the plans a straightforward planner would: placement
against per-node asking, partition and transfer records against a per-node
recomputation, cached re-plans against fresh graphs; capability answers are
remembered across plans only under a provider's capability key; the graph's arrays
against per-node references."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

import hetero_explore as he
from hetero_explore.ir.arrays import build_arrays, row_ids
from hetero_explore.providers import OpSpec, VirtualProvider, cpu, mask, virtual_gpu
from hetero_explore.ir.context import node_context
from hetero_explore.providers.registry_provider import RegistryProvider

from test_planner_properties import OPS, build_model, dags, provider_sets


# -- an independent reference -------------------------------------------------------
def reference_placement(g, provs):
    """Priority first-fit asking every provider about every node."""
    assignment, declined = [], []
    for node in g.nodes:
        reasons = {}
        for pi, p in enumerate(provs):
            m = p.supports(node_context(g, node))
            if m.supported:
                break
            reasons[p.name] = m.reason or "declined"
        else:
            pi = len(provs) - 1
        assignment.append(pi)
        declined.append(reasons)
    return assignment, declined


def reference_records(p):
    """Partition and transfer fields recomputed node by node from ``node_partition``."""
    g = p.graph
    vorder = {name: i for i, name in enumerate(g.values)}
    part = p.node_partition
    parts = []
    for pid in range(max(part) + 1 if part else 0):
        members = [n.id for n in g.nodes if part[n.id] == pid]
        produced = {o for i in members for o in g.nodes[i].outputs if o}
        ins = []
        for i in members:
            for x in g.nodes[i].inputs:
                if x and x not in produced and x not in ins:
                    ins.append(x)
        outs = sorted({o for o in produced
                       if o in g.outputs or any(part[c] != pid for c in g.values[o].consumers)},
                      key=vorder.__getitem__)

        def nbytes(vals):
            b = [g.values[v].nbytes for v in vals]
            return None if any(x is None for x in b) else sum(b)
        prov = p.assignment[members[0]]
        parts.append((pid, p.providers[prov].name, prov, members, ins, outs, nbytes(ins), nbytes(outs)))
    xfers = {}
    for v in g.values.values():
        if v.producer is None:
            continue
        sp = p.assignment[v.producer]
        for c in v.consumers:
            dp = p.assignment[c]
            if dp != sp:
                xfers.setdefault((v.name, dp), set()).add(part[c])
    transfers = sorted(((min(ds), vorder[name], dp, name, sorted(ds)) for (name, dp), ds in xfers.items()))
    return parts, [(name, p.providers[dp].name, p.providers[p.assignment[g.values[name].producer]].name,
                    part[g.values[name].producer], ds, g.values[name].nbytes) for _, _, dp, name, ds in transfers]


def records(p):
    parts = [(q.id, q.provider, q.provider_index, list(q.node_ids), list(q.inputs), list(q.outputs),
              q.bytes_in, q.bytes_out) for q in p.partitions]
    xfers = [(t.value, t.dst_provider, t.src_provider, t.src_partition, list(t.dst_partitions), t.nbytes)
             for t in p.transfers]
    return parts, xfers


def canonical(p):
    d = p.to_dict()
    d.pop("plan_seconds")
    d["declined"] = [dict(x) for x in p.declined]
    return json.dumps(d, sort_keys=True, default=str)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags(max_nodes=40), provider_sets())
def test_fast_plan_matches_a_node_by_node_reference(nodes, provs):
    g = he.load_model(build_model(nodes))
    p = he.plan(g, provs)
    a, declined = reference_placement(g, provs)
    assert list(p.assignment) == a and [dict(x) for x in p.declined] == declined
    assert records(p) == reference_records(p)
    assert p.n_partitions == len(p.partitions) and p.n_transfers == len(p.transfers)
    assert p.partition_counts() == {n: c for n, c in
                                    ((q.name, sum(1 for r in p.partitions if r.provider == q.name))
                                     for q in p.providers) if c}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags(max_nodes=30), st.lists(st.lists(st.sampled_from(OPS), unique=True, max_size=3), min_size=1,
                                    max_size=4))
def test_re_plans_on_a_warm_graph_equal_plans_on_a_fresh_one(nodes, denials):
    model = build_model(nodes)
    warm = he.load_model(model)
    gpu, host = virtual_gpu(), cpu()
    he.plan(warm, [gpu, host])
    for deny in denials:
        provs = [mask(gpu, deny=deny), host]
        assert canonical(he.plan(warm, provs)) == canonical(he.plan(he.load_model(model), [mask(virtual_gpu(),
                                                                                            deny=deny), cpu()]))


# -- what is asked, and when ------------------------------------------------------------
def transformer_like(n, frac=0.1, seed=0):
    rng = np.random.default_rng(seed)
    nodes, prev = [], -1
    while len(nodes) < n:
        i = len(nodes)
        nodes += [("MatMul", [prev]), ("Add", [i, prev]),
                  ("Erf" if rng.random() < 3 * frac else ["Relu", "Tanh", "Sigmoid"][rng.integers(3)], [i + 1])]
        prev = len(nodes) - 1
    protos = []
    for i, (op, ins) in enumerate(nodes[:n]):
        names = ["x" if j < 0 else f"v{j}" for j in ins] + (["W"] if op == "MatMul" else [])
        protos.append(helper.make_node(op, names, [f"v{i}"], name=f"n{i}"))
    w = numpy_helper.from_array(np.eye(4, dtype=np.float32), "W")
    gp = helper.make_graph(protos, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                           [helper.make_tensor_value_info(f"v{n - 1}", TensorProto.FLOAT, [2, 4])],
                           initializer=[w])
    return he.load_model(helper.make_model(gp, opset_imports=[helper.make_opsetid("", 17)]))


@pytest.fixture
def registry_calls(monkeypatch):
    """Every (provider, op type) the registry providers are asked about (patched on the
    class, so their capability keys still hold)."""
    calls = []
    orig = RegistryProvider.supports

    def counting(self, ctx):
        calls.append((self.name, ctx.node.op_type))
        return orig(self, ctx)
    monkeypatch.setattr(RegistryProvider, "supports", counting)
    return calls


def test_a_re_plan_after_one_deny_asks_only_about_the_denied_op(registry_calls):
    g = transformer_like(300)
    gpu, host = virtual_gpu(), cpu()
    first = he.plan(g, [mask(gpu, deny=["Erf"]), host])
    assert registry_calls and len(registry_calls) <= 12  # per signature or context class, never per node
    registry_calls.clear()
    again = he.plan(g, [mask(gpu, deny=["Erf"]), host])
    assert registry_calls == [] and canonical(again) == canonical(first)
    denied = he.plan(g, [mask(gpu, deny=["Erf", "Tanh"]), host])
    assert registry_calls and {op for _, op in registry_calls} == {"Tanh"}
    assert {name for name, _ in registry_calls} == {"cpu"}  # the gpu's answer is the mask's
    assert all(denied.declined[n.id]["gpu"] == "Tanh denied by mask" for n in g.nodes if n.op_type == "Tanh")
    registry_calls.clear()
    # fresh provider objects of the same kind share the remembered answers
    he.plan(g, [mask(virtual_gpu(), deny=["Erf", "Tanh"]), cpu()])
    assert registry_calls == []


def test_the_explorer_re_plans_from_the_graphs_arrays_and_remembered_answers(registry_calls):
    g = transformer_like(300)
    ex = he.Explorer(g, [virtual_gpu(), cpu()])
    ex.deny("gpu", ["Erf"])
    ex.plan
    arrays = g._arrays
    registry_calls.clear()
    ex.deny("gpu", ["Tanh"])
    p = ex.plan
    assert g._arrays is arrays
    assert {op for _, op in registry_calls} == {"Tanh"}
    assert all(p.provider_of(n.id).name == "cpu" for n in g.nodes if n.op_type in ("Erf", "Tanh"))


class Counting(VirtualProvider):
    """Overrides supports: its answers are not VirtualProvider's, so no key is inherited."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.calls = 0

    def supports(self, ctx):
        self.calls += 1
        return super().supports(ctx)


class CountingKeyed(Counting):
    """Declares that its answers are VirtualProvider's: remembered across plans."""

    def capability_key(self):
        return ("counting", self.name, frozenset(self.ops))


def test_answers_are_remembered_across_plans_only_under_a_capability_key():
    g = transformer_like(60)
    everything = ["MatMul", "Add", "Erf", "Relu", "Tanh", "Sigmoid"]
    plain = Counting("gpu", "cuda:0", ops=everything)
    he.plan(g, [plain, VirtualProvider("cpu", "cpu:0", ops=everything)])
    n1 = plain.calls
    assert 0 < n1 < len(g.nodes)  # once per signature within a plan
    he.plan(g, [plain, VirtualProvider("cpu", "cpu:0", ops=everything)])
    assert plain.calls == 2 * n1  # asked again: no key
    keyed = CountingKeyed("gpu", "cuda:0", ops=everything)
    he.plan(g, [keyed, VirtualProvider("cpu", "cpu:0", ops=everything)])
    n2 = keyed.calls
    he.plan(g, [mask(keyed, deny=["Tanh"]), VirtualProvider("cpu", "cpu:0", ops=everything)])
    assert keyed.calls == n2


def test_changing_a_virtual_providers_op_table_changes_the_next_plan():
    g = transformer_like(60)
    gpu = VirtualProvider("gpu", "cuda:0", ops=["MatMul", "Add"])
    host = VirtualProvider("cpu", "cpu:0", ops=["MatMul", "Add", "Erf", "Relu", "Tanh", "Sigmoid"])
    before = he.plan(g, [gpu, host])
    gpu.ops["Tanh"] = OpSpec()
    after = he.plan(g, [gpu, host])
    tanh = [n.id for n in g.nodes if n.op_type == "Tanh"]
    assert tanh and all(before.assignment[i] == 1 for i in tanh) and all(after.assignment[i] == 0 for i in tanh)


def test_a_patched_capability_is_asked_again():
    g = transformer_like(60)
    vg = virtual_gpu()
    he.plan(g, [vg, cpu()])
    calls = []
    orig = vg.capability.supports
    vg.capability.supports = lambda ctx: (calls.append(ctx.node.name), orig(ctx))[1]
    he.plan(g, [vg, cpu()])
    assert calls  # an instance patch voids the key: nothing remembered is used


# -- lazy records -------------------------------------------------------------------------
def test_records_are_made_on_first_read_and_replace_still_works():
    g = transformer_like(200)
    p = he.plan(g, [mask(virtual_gpu(), deny=["Erf"]), cpu()])
    assert "_lazy_partitions" in p.__dict__
    text = p.summary()  # counts come from the tables
    assert type(p.__dict__["_lazy_partitions"]).__name__ == "_Deferred"
    assert f"{len(p.partitions)} partition(s)" in text and f"{len(p.transfers)} cross-provider" in text
    assert p.partitions is p.partitions
    q = dataclasses.replace(p, transfers=p.transfers[1:])
    assert q.n_transfers == len(p.transfers) - 1 and q.partitions == p.partitions
    assert q.transfer_bytes == sum(t.nbytes for t in q.transfers)
    assert p.fallback_ops() == {"Erf": sum(1 for n in g.nodes if n.op_type == "Erf")}


# -- the arrays -------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(st.integers(1, 60), st.integers(1, 5), st.sampled_from([3, 100, 1 << 40]), st.randoms())
def test_row_ids_equal_numpys_unique_rows(m, cols, span, rnd):
    table = np.asarray([[rnd.randrange(-span, span) for _ in range(cols)] for _ in range(m)], np.int64)
    _, want = np.unique(table, axis=0, return_inverse=True)
    assert np.array_equal(row_ids(table), want.reshape(-1))


@settings(max_examples=80, deadline=None)
@given(dags(max_nodes=40))
def test_graph_arrays_match_per_node_references(nodes):
    g = he.load_model(build_model(nodes))
    arr = g.arrays
    preds, succs = g.adjacency()
    assert [arr.pred_idx[arr.pred_ptr[v]:arr.pred_ptr[v + 1]].tolist() for v in range(len(g.nodes))] == preds
    assert [arr.succ_idx[arr.succ_ptr[v]:arr.succ_ptr[v + 1]].tolist() for v in range(len(g.nodes))] == succs
    sigs: dict = {}
    for n in g.nodes:
        key = (n.domain, n.op_type, n.opset, tuple(g.values[i].dtype if i else None for i in n.inputs))
        assert arr.signatures[arr.node_sig[n.id]] == key
        sigs.setdefault(key, n.id)
    assert arr.signatures == list(sigs) and arr.sig_first.tolist() == list(sigs.values())
    assert arr.value_bytes.tolist() == [-1 if v.nbytes is None else v.nbytes for v in g.values.values()]


@settings(max_examples=60, deadline=None)
@given(dags(max_nodes=40))
def test_arrays_from_the_loaders_recorded_slots_equal_arrays_from_name_lookups(nodes):
    g = he.load_model(build_model(nodes))
    assert g._slots is not None and g._arrays is not None  # recorded by build_graph, built at load
    arr = g.arrays
    names = arr.value_names
    assert names == list(g.values) and [v.index for v in g.values.values()] == list(range(len(names)))
    for n in g.nodes:
        ins = arr.in_idx[arr.in_ptr[n.id]:arr.in_ptr[n.id + 1]].tolist()
        outs = arr.out_idx[arr.out_ptr[n.id]:arr.out_ptr[n.id + 1]].tolist()
        assert [names[j] if j >= 0 else "" for j in ins] == list(n.inputs)
        assert [names[j] if j >= 0 else "" for j in outs] == list(n.outputs)
    g._arrays, g._slots = None, None          # the path that looks every name up
    ref = g.arrays
    for f in dataclasses.fields(arr):
        a, b = getattr(arr, f.name), getattr(ref, f.name)
        if f.name in ("value_index", "out_ptr", "out_idx", "ctx_cache", "answers") or f.name.startswith("_"):
            continue
        assert (np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b), f.name
    provs = [mask(virtual_gpu(), deny=["Relu"]), cpu()]
    g2 = he.load_model(build_model(nodes))
    assert he.plan(g, provs).node_partition == he.plan(g2, provs).node_partition


def test_recorded_slots_keep_empty_and_repeated_inputs_and_several_outputs():
    mx = numpy_helper.from_array(np.float32(1.0).reshape(()), "mx")
    g = helper.make_graph(
        [helper.make_node("Clip", ["x", "", "mx"], ["c"], name="clip"),
         helper.make_node("Mul", ["c", "c"], ["m"], name="sq"),
         helper.make_node("Split", ["m"], ["s0", "s1"], name="split", axis=0, num_outputs=2)],
        "slots", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3])],
        [helper.make_tensor_value_info("s0", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("s1", TensorProto.FLOAT, [2, 3])], initializer=[mx])
    gr = he.load_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]))
    arr = gr.arrays
    names = arr.value_names
    row = [[names[j] if j >= 0 else "" for j in arr.in_idx[arr.in_ptr[i]:arr.in_ptr[i + 1]].tolist()]
           for i in range(3)]
    assert row == [["x", "", "mx"], ["c", "c"], ["m"]]
    assert [names[j] for j in arr.out_idx[arr.out_ptr[2]:arr.out_ptr[3]].tolist()] == ["s0", "s1"]
    assert gr.values["c"].consumers == [1]   # a node reading a value twice is one consumer
    assert arr.pred_idx[arr.pred_ptr[1]:arr.pred_ptr[2]].tolist() == [0]
