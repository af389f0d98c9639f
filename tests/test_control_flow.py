"""If / Loop / Scan with child plans: results against onnxruntime, heterogeneous runs under
random deny masks byte-identical to the reference, CPU vs CUDA (simulator) bitwise, leak
counters, fail-closed cases and the plan tables' subgraph paths."""

from __future__ import annotations

import random

import numpy as np
import pytest

import hetero_explore as he
from hetero_explore.analysis.compare import diff_arrays
from hetero_explore.kernels.host.control import ControlFlowError
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
    # output shapes left to the run: a growing carried value and a scan output of a run-time
    # trip count; If branches of different shapes
    "growing_scan_loop": (cm.growing_scan_loop,
                          lambda r: {"trips": np.array(int(r.integers(1, 5)), np.int64),
                                     "v0": r.standard_normal(1).astype(np.float32),
                                     "x": r.standard_normal(2).astype(np.float32)}),
    "if_different_shapes": (cm.if_different_shapes,
                            lambda r: {"c": np.array(bool(r.integers(0, 2))),
                                       "x": r.standard_normal(4).astype(np.float32)}),
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
        # trial 0 denies the op of the graph's last node only (a split plan for certain)
        deny = rnd.sample(ops, rnd.randint(0, len(ops))) if trial else [g.nodes[-1].op_type]
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
@pytest.mark.parametrize("name", ["if_on_data", "loop_over_tensor", "if_in_loop", "scan_cumsum",
                                  "growing_scan_loop"])
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


def _hetero_runs(g, feeds, rnd, trials=4):
    """Runs under random deny masks on [virtual gpu, cpu]: (runs, whether one was heterogeneous)."""
    cpu = resolve("cpu")
    ops = sorted({n.op_type for n in g.nodes} | {n.op_type for _, p in he.plan(g, [cpu]).nested()[1:]
                                                 for n in p.graph.nodes})
    out, hetero = [], False
    for _ in range(trials):
        provs = [mask(resolve("gpu"), deny=rnd.sample(ops, rnd.randint(0, len(ops)))), cpu]
        p = he.plan(g, provs)
        before = counters(provs)
        out.append(he.execute(p, feeds).outputs)
        assert counters(provs) == before
        hetero = hetero or p.is_heterogeneous or any(c.is_heterogeneous for _, c in p.nested()[1:])
    return out, hetero


@pytest.mark.parametrize("trips", [0, 1, 3, 6])
def test_growing_loop_with_run_time_trip_count_matches_onnxruntime(trips):
    """A carried value that grows (Concat) and a scan output, trip count given at run time: no
    output shape is known at load time; the run takes them from the body's results. Same values
    as onnxruntime, heterogeneous runs byte-identical to the reference, counters back."""
    m = cm.growing_scan_loop()
    g = he.load_model(m)
    p = he.plan(g, ["cpu"])
    assert p.executable and not p.execution_blockers
    feeds = {"trips": np.array(trips, np.int64), "v0": np.array([0.5], np.float32),
             "x": np.array([1.0, -2.0], np.float32)}
    want = ort_run(m, feeds)
    ref = he.execute_reference(g, "cpu", feeds).outputs
    for k in want:
        assert ref[k].shape == want[k].shape, (k, ref[k].shape, want[k].shape)
        np.testing.assert_allclose(ref[k], want[k], rtol=1e-6, err_msg=k)
    runs, _ = _hetero_runs(g, feeds, random.Random(trips))
    for got in runs:
        assert identical(got, ref)


def test_growing_loop_runs_and_shows_its_run_time_shapes():
    g = he.load_model(cm.growing_loop())
    p = he.plan(g, ["cpu"])
    assert p.executable and not p.execution_blockers  # was: fail closed ("dynamic-shape")
    run = he.execute(p, {"x": np.ones(1, np.float32)})
    assert run.outputs["y"].tolist() == [1.0] * 4
    df = run.value_shapes_df()
    assert tuple(df.set_index("value").loc["y", "shape"]) == (4,)


@pytest.mark.parametrize("c", [True, False])
def test_if_with_branches_of_different_shapes_matches_onnxruntime(c):
    m = cm.if_different_shapes()
    g = he.load_model(m)
    p = he.plan(g, ["cpu"])
    assert p.executable, p.execution_blockers
    feeds = {"c": np.array(c), "x": np.arange(4, dtype=np.float32)}
    want = ort_run(m, feeds)
    ref = he.execute_reference(g, "cpu", feeds).outputs
    assert ref["y"].shape == want["y"].shape == ((4,) if c else (2,))
    np.testing.assert_array_equal(ref["y"], want["y"])
    runs, _ = _hetero_runs(g, feeds, random.Random(int(c)))
    for got in runs:
        assert identical(got, ref)


def _redeclare(m, name, shape):
    from onnx import helper
    out = [o for o in m.graph.output]
    del m.graph.output[:]
    for o in out:
        m.graph.output.append(helper.make_tensor_value_info(name, cm.F, shape) if o.name == name else o)
    return m


def test_a_loop_output_declared_with_a_rank_its_body_does_not_give_is_rejected_at_load():
    for declared in (["k", 2], [2, "k"]):
        with pytest.raises(he.HeteroExploreError, match="'y'.*Loop_0"):
            he.load_model(_redeclare(cm.counting_loop(3), "y", declared))


@pytest.mark.parametrize("case", ["static", "run-time"])
def test_a_loop_output_declared_with_a_shape_its_body_does_not_give_is_a_typed_error(case):
    """The outer graph declares a Loop output with a shape the body does not produce: a typed
    error naming the node and both shapes, never a wrong buffer; counters come back. "static":
    every output shape is known, the planned buffer is refused; "run-time": the scan output is
    declared for 5 iterations while the trip count (given at run time) is 3."""
    if case == "static":
        m, feeds, actual = _redeclare(cm.counting_loop(3), "y", [5]), {"x": np.zeros(4, np.float32)}, "(4,)"
    else:
        m = _redeclare(cm.growing_scan_loop(), "rows", [5, 2])
        feeds = {"trips": np.array(3, np.int64), "v0": np.zeros(1, np.float32), "x": np.ones(2, np.float32)}
        actual = "(3, 2)"
    g = he.load_model(m)
    cpu = resolve("cpu")
    before = counters([cpu])
    with pytest.raises(he.ExecutionError, match="Loop_") as ei:
        he.execute(he.plan(g, [cpu]), feeds)
    assert actual in str(ei.value) and "5" in str(ei.value)
    assert counters([cpu]) == before


def test_scan_outputs_of_different_shapes_per_iteration_are_a_typed_error():
    """A Loop body whose scan output changes shape from one iteration to the next (it slices
    the growing carried value): a typed error, not a ragged buffer."""
    from onnx import helper
    body = helper.make_graph([
        helper.make_node("Concat", ["v_in", "one"], ["v_out"], axis=0, name="b_cat"),
        helper.make_node("Identity", ["v_out"], ["row"], name="b_row"),
        helper.make_node("Identity", ["cond_in"], ["cond_out"], name="b_cond")],
        "body", [cm.vi("i", [], cm.I64), cm.vi("cond_in", [], cm.B), cm.vi("v_in", ["n"])],
        [cm.vi("cond_out", [], cm.B), cm.vi("v_out", ["m"]), cm.vi("row", ["m"])])
    m = cm.model([helper.make_node("Loop", ["trips", "", "x"], ["y", "rows"], body=body, name="Loop_ragged")],
                 [cm.vi("x", [1])], [cm.vi("y", ["a"]), cm.vi("rows", ["b", "c"])],
                 [cm.const("trips", np.int64(3)), cm.const("one", np.ones(1, np.float32))])
    cpu = resolve("cpu")
    before = counters([cpu])
    with pytest.raises(he.ExecutionError, match="Loop_ragged.*same shape"):
        he.execute(he.plan(he.load_model(m), [cpu]), {"x": np.ones(1, np.float32)})
    assert counters([cpu]) == before


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
    with he.execution.executor.HeterogeneousExecutor(p) as ex:
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
    """A branch whose output disagrees with the rank the outer graph declares for the If: a
    typed error naming the node, never a wrong buffer."""
    from onnx import helper
    m = cm.if_different_shapes()
    del m.graph.output[:]
    m.graph.output.append(helper.make_tensor_value_info("y", cm.F, ["a", "b"]))  # rank 2: a lie
    try:
        g = he.load_model(m)
    except he.HeteroExploreError:
        return  # rejected at load (typed)
    with pytest.raises(he.ExecutionError, match="If_x|after"):
        he.execute(he.plan(g, ["cpu"]), {"c": np.bool_(True), "x": np.ones(4, np.float32)})


def test_tables_name_the_dims_onnx_made_up_by_their_producer():
    """An If whose branches differ merges to a dim onnx names ``unk__N``: the transfer table
    shows it as ``<node>.d<axis>``, not as onnx's made-up symbol."""
    g = he.load_model(cm.if_different_shapes())
    assert any(isinstance(d, str) and d.startswith("unk__") for d in g.values["y0"].shape)
    p = he.plan(g, [mask(resolve("gpu"), deny=["Neg"]), "cpu"])
    df = p.transfers_df()
    row = df[df["value"] == "y0"].iloc[0]
    assert tuple(row["shape"]) == ("If_x.d0",)
    assert not any("unk__" in str(s) for s in df["shape"])


def _scan8(directions=(0,), with_lens=True):
    """Scan-8 (opset 8): a running sum state and a scan output (state + x_t), batch axis 0."""
    from onnx import helper
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"], name="b_add"),
         helper.make_node("Mul", ["s_out", "x_t"], ["y_t"], name="b_mul")], "body",
        [cm.vi("s_in", [2]), cm.vi("x_t", [2])], [cm.vi("s_out", [2]), cm.vi("y_t", [2])])
    node = helper.make_node("Scan", ["lens" if with_lens else "", "s0", "x"], ["s", "y"], body=body,
                            num_scan_inputs=1, directions=list(directions), name="Scan8")
    ins = ([cm.vi("lens", [3], cm.I64)] if with_lens else []) + [cm.vi("s0", [3, 2]), cm.vi("x", [3, 4, 2])]
    m = cm.model([node], ins, [cm.vi("s", [3, 2]), cm.vi("y", [3, 4, 2])], opset=8)
    m.ir_version = 3
    return m


@pytest.mark.parametrize("directions,with_lens", [((0,), True), ((1,), True), ((0,), False), ((1,), False)])
def test_scan8_batch_axis_and_sequence_lens_match_onnxruntime(directions, with_lens):
    m = _scan8(directions, with_lens)
    r = np.random.default_rng(4)
    feeds = {"s0": r.standard_normal((3, 2)).astype(np.float32),
             "x": r.standard_normal((3, 4, 2)).astype(np.float32)}
    if with_lens:
        feeds["lens"] = np.array([4, 1, 2], np.int64)  # onnxruntime refuses 0
    want = ort_run(m, feeds)
    g = he.load_model(m)
    p = he.plan(g, ["cpu"])
    assert p.executable, p.execution_blockers
    got = he.execute_reference(g, "cpu", feeds).outputs
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6, atol=1e-7, err_msg=k)
    runs, _ = _hetero_runs(g, feeds, random.Random(sum(directions) + with_lens))
    for run in runs:
        assert identical(run, got)


def test_scan8_bad_sequence_lens_is_a_typed_error():
    m = _scan8()
    cpu = resolve("cpu")
    before = counters([cpu])
    feeds = {"lens": np.array([5, 1, 0], np.int64), "s0": np.zeros((3, 2), np.float32),
             "x": np.zeros((3, 4, 2), np.float32)}
    with pytest.raises(he.ExecutionError, match="Scan8.*sequence_lens"):
        he.execute(he.plan(he.load_model(m), [cpu]), feeds)
    assert counters([cpu]) == before


@pytest.mark.skipif(not HAS_CUDA, reason="no GPU and no CUDA simulator (NUMBA_ENABLE_CUDASIM=1)")
@pytest.mark.parametrize("c", [True, False])
def test_outer_constants_are_constants_of_the_child_plan_on_cuda_alone(c):
    """The else branch's Slice reads its starts/ends from the outer graph's initializers: the
    child plan binds them as constants, so on the CUDA provider alone the branch places as it
    would at top level (it was unplaceable: 'starts must be a constant'), and runs bitwise equal
    to the CPU reference."""
    g = he.load_model(cm.if_different_shapes())
    p = he.plan(g, [resolve("cuda")])
    assert p.executable and not p.execution_blockers, p.execution_blockers
    child = p.children["If_x/else_branch"]
    assert child.graph.is_constant("s0") and child.graph.is_constant("s1")
    assert "s0" not in child.graph.inputs and "x" in child.graph.inputs
    feeds = {"c": np.array(c), "x": np.arange(4, dtype=np.float32) - 1.5}
    ref = he.execute_reference(g, "cpu", feeds)
    got = he.execute(p, feeds)
    assert identical(got.outputs, ref.outputs), he.compare(got, ref)
    np.testing.assert_array_equal(got.outputs["y"], -(feeds["x"] if c else feeds["x"][:2]))


@pytest.mark.parametrize("make,feeds", [
    (lambda: cm.growing_loop(40), {"x": np.ones(1, np.float32)}),
    (cm.growing_scan_loop, {"trips": np.array(12, np.int64), "v0": np.array([0.5], np.float32),
                            "x": np.array([1.0, -2.0], np.float32)}),
])
def test_growing_loop_plans_its_body_twice_not_every_iteration(make, feeds, monkeypatch):
    """A carried value that grows every iteration: the body is planned for the first shape,
    then once more with the growing dim left symbolic (run with run-time shapes), not once per
    iteration; the results are byte-identical to one exact specialisation per iteration, on
    the CPU and under deny masks, and a reused executor plans nothing more."""
    import hetero_explore.kernels.host.control as control
    g = he.load_model(make())
    cpu = resolve("cpu")

    def run(provs):
        with he.execution.executor.HeterogeneousExecutor(he.plan(g, provs)) as ex:
            out = ex.run(feeds).outputs
            kernel = next(st.kernel for r in ex.parts for st in r.steps if st.node.op_type == "Loop")
            n = kernel.stats.specialisations
            again = ex.run(feeds).outputs
            assert identical(again, out)
            if control.GENERALISE_LOOPS:  # per exact shape, a second run re-plans what the cache dropped
                assert kernel.stats.specialisations == n
        return out, n

    got, plans = run([cpu])
    assert plans == 2
    monkeypatch.setattr(control, "GENERALISE_LOOPS", False)
    exact, plans_exact = run([cpu])
    assert plans_exact > 2
    assert identical(got, exact)
    monkeypatch.setattr(control, "GENERALISE_LOOPS", True)
    for deny in (["Concat"], ["Identity", "Mul"], ["ReduceSum"]):
        provs = [mask(resolve("gpu"), deny=deny), cpu]
        before = counters(provs)
        out, _ = run(provs)
        assert identical(out, exact), deny
        assert counters(provs) == before


def test_body_reading_a_formal_input_of_its_loop_from_the_outer_scope():
    """torch's TorchScript exporter passes a constant ``true`` as the Loop's condition and has
    the body read that same outer value (``cond_out = Identity(outer_true)``): a captured value
    that is also a formal input of the control node (not an implicit one). Same as onnxruntime."""
    from onnx import helper
    body = helper.make_graph([
        helper.make_node("Add", ["acc_in", "x"], ["acc_out"], name="b_add"),
        helper.make_node("Identity", ["keep_going"], ["cond_out"], name="b_cond")], "body",
        [cm.vi("i", [], cm.I64), cm.vi("cond_in", [], cm.B), cm.vi("acc_in", [2])],
        [cm.vi("cond_out", [], cm.B), cm.vi("acc_out", [2])])
    m = cm.model([helper.make_node("Loop", ["trips", "keep_going", "acc0"], ["acc"], body=body, name="L_t")],
                 [cm.vi("x", [2]), cm.vi("acc0", [2]), cm.vi("keep_going", [], cm.B)], [cm.vi("acc", [2])],
                 [cm.const("trips", np.int64(3))])  # a graph input: not bound as a child constant
    g = he.load_model(m)
    loop = g.nodes[0]
    assert "keep_going" in loop.formal_inputs and "keep_going" not in loop.implicit_inputs
    feeds = {"x": np.array([1.0, 2.0], np.float32), "acc0": np.zeros(2, np.float32),
             "keep_going": np.array(True)}
    got = he.execute_reference(g, "cpu", feeds).outputs
    np.testing.assert_array_equal(got["acc"], ort_run(m, feeds)["acc"])
    np.testing.assert_array_equal(got["acc"], [3.0, 6.0])
