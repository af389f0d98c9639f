"""If / Loop / Scan with child plans: results against onnxruntime, heterogeneous runs under
random deny masks byte-identical to the reference, CPU vs CUDA (simulator) bitwise, leak
counters, fail-closed cases and the plan tables' subgraph paths."""

from __future__ import annotations

import random

import numpy as np
import pytest

import hetero_explore as he
from hetero_explore.compare import diff_arrays
from hetero_explore.control import ControlFlowError
from hetero_explore.providers import resolve
from hetero_explore.providers.cuda import cuda_status
from hetero_explore.providers.virtual import mask, unmask

import control_models as cm

ort = pytest.importorskip("onnxruntime")
HAS_CUDA = cuda_status()[0]


def ort_run(m, feeds):
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))


def identical(a, b) -> bool:
    return set(a) == set(b) and all(diff_arrays(a[k], b[k])["byte_identical"] for k in a)


def counters(provs):
    return {unmask(p).name: unmask(p).live_allocations for p in provs}


CASES = {
    "if_on_shape": (cm.if_on_shape, lambda r: {"x": r.standard_normal((4, 3)).astype(np.float32)}),
    "if_on_shape_else": (lambda: cm.if_on_shape(2), lambda r: {"x": r.standard_normal((2, 3)).astype(np.float32)}),
    "if_on_data": (cm.if_on_data, lambda r: {"x": r.standard_normal((2, 4)).astype(np.float32)}),
    "loop_over_tensor": (cm.loop_over_tensor, lambda r: {"x": r.standard_normal((5, 3)).astype(np.float32),
                                                          "acc0": r.standard_normal(3).astype(np.float32)}),
    "if_in_loop": (lambda: cm.loop_over_tensor(nested_if=True),
                   lambda r: {"x": r.standard_normal((5, 3)).astype(np.float32),
                              "acc0": r.standard_normal(3).astype(np.float32)}),
    "scan_cumsum": (cm.scan_cumsum, lambda r: {"s0": r.standard_normal(2).astype(np.float32),
                                               "x": r.standard_normal((4, 2)).astype(np.float32)}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_reference_matches_onnxruntime(name):
    make, feeds = CASES[name]
    m = make()
    for seed in range(3):
        x = feeds(np.random.default_rng(seed))
        got = he.execute_reference(he.load_model(m), "cpu", x).outputs
        want = ort_run(m, x)
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=2e-6, atol=1e-6, err_msg=f"{name}: {k}")


@pytest.mark.parametrize("name", list(CASES))
def test_heterogeneous_random_masks_byte_identical(name):
    """[gpu, cpu] with random ops denied on the virtual GPU, inside the subgraphs too: every
    run is byte-identical to the CPU reference, and the leak counters come back."""
    make, feeds = CASES[name]
    g = he.load_model(make())
    cpu = resolve("cpu")
    x = feeds(np.random.default_rng(7))
    ref = he.execute_reference(g, cpu, x)
    ops = sorted({n.op_type for n in g.nodes} | {n.op_type for _, p in he.plan(g, [cpu]).nested()[1:]
                                                 for n in p.graph.nodes})
    rnd = random.Random(name)
    hetero_seen = False
    for trial in range(6):
        deny = rnd.sample(ops, rnd.randint(0, len(ops)))
        gpu = mask(resolve("gpu"), deny=deny)
        provs = [gpu, cpu]
        p = he.plan(g, provs)
        assert p.executable, p.execution_blockers
        hetero_seen |= any(c.is_heterogeneous for _, c in p.nested()) or len(
            {unmask(p.providers[a]).name for a in p.assignment}) > 1
        before = counters(provs)
        run = he.execute(p, x)
        assert identical(run.outputs, ref.outputs), (deny, he.compare(run, ref))
        assert counters(provs) == before
    assert hetero_seen


@pytest.mark.skipif(not HAS_CUDA, reason="no GPU and no CUDA simulator (NUMBA_ENABLE_CUDASIM=1)")
@pytest.mark.parametrize("name", ["if_on_data", "loop_over_tensor", "if_in_loop", "scan_cumsum"])
def test_cpu_and_cuda_bitwise(name):
    make, feeds = CASES[name]
    g = he.load_model(make())
    x = feeds(np.random.default_rng(3))
    cpu = he.execute_reference(g, "cpu", x)
    cuda = resolve("cuda")
    p = he.plan(g, [cuda])
    assert all(unmask(p.providers[a]).name == "cuda" for a in p.assignment)
    got = he.execute(p, x)
    assert identical(got.outputs, cpu.outputs), he.compare(got, cpu)
    # heterogeneous cuda + cpu, the loop/branch bodies split across both
    p2 = he.plan(g, [mask(cuda, deny=["Add", "Neg"]), resolve("cpu")])
    assert identical(he.execute(p2, x).outputs, cpu.outputs)


def test_plan_tables_carry_subgraph_paths_and_no_blockers():
    g = he.load_model(cm.loop_over_tensor(nested_if=True))
    p = he.plan(g, ["gpu", "cpu"])
    assert p.executable and not p.execution_blockers
    assert set(p.children) == {"Loop_0/body"}
    paths = set(p.placement_df()["subgraph"])
    assert paths == {"", "Loop_0/body", "Loop_0/body/If_in_loop/then_branch", "Loop_0/body/If_in_loop/else_branch"}
    assert "subgraph" in p.partitions_df().columns and "subgraph" in p.transfers_df().columns
    import json
    d = json.loads(p.to_json())
    assert set(d["subgraphs"]["Loop_0/body"]["subgraphs"]) == {"If_in_loop/then_branch", "If_in_loop/else_branch"}
    svg = p.to_graphviz(level="node").source
    assert "Loop_0/body" in svg and "If_in_loop/then_branch" in svg  # nested clusters
    # the Loop reads x from the outer scope: an implicit input of the control node
    loop = next(n for n in g.nodes if n.op_type == "Loop")
    assert loop.implicit_inputs == ("x", "two") or "x" in loop.implicit_inputs
    # a denied op inside the body moves only the body's node: nested transfers are planned
    p2 = he.plan(g, [mask(resolve("gpu"), deny=["Add"]), "cpu"])
    body = p2.children["Loop_0/body"]
    assert body.is_heterogeneous and body.transfers
    assert (p2.transfers_df()["subgraph"] == "Loop_0/body").any()


def test_unsupported_body_op_blocks_with_the_path():
    g = he.load_model(cm.if_on_data())
    p = he.plan(g, [mask(resolve("cpu"), deny=["Exp"])])
    kinds = {(b.kind, b.where) for b in p.execution_blockers}
    assert any(w.startswith("If_0") for _, w in kinds), p.execution_blockers
    with pytest.raises(he.HeterogeneousExecutionUnsupported):
        he.execute(p, {"x": np.ones((2, 4), np.float32)})


def test_growing_loop_fails_closed():
    g = he.load_model(cm.growing_loop())
    p = he.plan(g, ["cpu"])
    # a carried value that grows has no static shape, and the run cannot compute it: the plan
    # fails closed with the reason, never a wrong buffer
    assert not p.executable and p.execution_blockers[0].kind == "dynamic-shape"
    with pytest.raises(he.HeterogeneousExecutionUnsupported, match="Loop_grow"):
        he.execute(p, {"x": np.ones(1, np.float32)})


def test_failure_inside_a_branch_frees_everything():
    g = he.load_model(cm.failing_branch())
    cpu, gpu = resolve("cpu"), resolve("gpu")
    provs = [mask(gpu, deny=["Gather"]), cpu]
    p = he.plan(g, provs)
    before = counters(provs)
    x = np.arange(4, dtype=np.float32)
    ok = he.execute(p, {"c": np.bool_(False), "x": x, "idx": np.array([9], np.int64)})
    assert ok.outputs["y"].tolist() == [0.0]
    with pytest.raises(he.ExecutionError, match="bad_gather|out of range|index"):
        he.execute(p, {"c": np.bool_(True), "x": x, "idx": np.array([9], np.int64)})
    assert counters(provs) == before
    got = he.execute(p, {"c": np.bool_(True), "x": x, "idx": np.array([2], np.int64)})
    assert got.outputs["y"].tolist() == [2.0]
    assert counters(provs) == before


def test_thousand_iterations_no_leak():
    g = he.load_model(cm.counting_loop(1000))
    cpu, gpu = resolve("cpu"), resolve("gpu")
    provs = [mask(gpu, deny=["Identity"]), cpu]
    p = he.plan(g, provs)
    before = counters(provs)
    with he.executor.HeterogeneousExecutor(p) as ex:
        run = ex.run({"x": np.zeros(4, np.float32)})
        assert run.outputs["y"].tolist() == [1000.0] * 4
        kernel = next(st.kernel for r in ex.parts for st in r.steps if st.node.op_type == "Loop")
        assert kernel.stats.iterations == 1000
        assert kernel.stats.transfers >= 1000  # the condition crosses gpu -> cpu every iteration
        assert kernel.stats.specialisations == 1
    assert counters(provs) == before


def test_loop_data_dependent_body_specialises_on_values():
    """A body that slices by its iteration number (shapes depend on a value): specialised on
    the value of the small integer input, as onnx's test_loop11 needs."""
    from onnx import helper
    d = 2
    body = helper.make_graph([
        helper.make_node("Unsqueeze", ["i", "ax0"], ["i1"], name="b_unsq"),
        helper.make_node("Add", ["i1", "one_i"], ["i2"], name="b_inc"),
        helper.make_node("Slice", ["x", "i1", "i2"], ["xi"], name="b_slice"),
        helper.make_node("Add", ["acc_in", "xi"], ["acc_out"], name="b_add"),
        helper.make_node("Identity", ["cond_in"], ["cond_out"], name="b_cond")], "body",
        [cm.vi("i", [], cm.I64), cm.vi("cond_in", [], cm.B), cm.vi("acc_in", [1, d])],
        [cm.vi("cond_out", [], cm.B), cm.vi("acc_out", [1, d])])
    m = cm.model([helper.make_node("Loop", ["trips", "", "acc0"], ["acc"], body=body, name="L")],
                 [cm.vi("x", [3, d]), cm.vi("acc0", [1, d])], [cm.vi("acc", [1, d])],
                 [cm.const("trips", np.int64(3)), cm.const("ax0", np.array([0], np.int64)),
                  cm.const("one_i", np.array([1], np.int64))])
    x = np.arange(6, dtype=np.float32).reshape(3, d)
    acc0 = np.zeros((1, d), np.float32)
    got = he.execute_reference(he.load_model(m), "cpu", {"x": x, "acc0": acc0}).outputs["acc"]
    np.testing.assert_array_equal(got, x.sum(0, keepdims=True))


def test_branch_output_shape_mismatch_is_a_typed_error():
    """Branches whose outputs disagree with the shape planned at load time: a typed error
    naming the node, never a wrong buffer."""
    from onnx import helper
    then_g = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [], [cm.vi("t", [4])])
    else_g = helper.make_graph([helper.make_node("Slice", ["x", "s0", "s1"], ["e"])], "else", [],
                               [cm.vi("e", [2])])
    m = cm.model([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="If_x")],
                 [cm.vi("c", [], cm.B), cm.vi("x", [4])], [cm.vi("y", ["k"])],
                 [cm.const("s0", np.array([0], np.int64)), cm.const("s1", np.array([2], np.int64))])
    g = he.load_model(m)
    p = he.plan(g, ["cpu"])
    if p.executable:  # inference merged the branches to a static shape: the other branch must fail typed
        with pytest.raises((ControlFlowError, he.ExecutionError), match="If_x"):
            for c in (True, False):
                he.execute(p, {"c": np.bool_(c), "x": np.ones(4, np.float32)})
    else:
        with pytest.raises(he.HeterogeneousExecutionUnsupported):
            he.execute(p, {"c": np.bool_(True), "x": np.ones(4, np.float32)})
