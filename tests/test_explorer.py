"""The scriptable what-if API: explore(), Explorer and compare_plans."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import hetero_explore as hx
from explorer_fixtures import N_NODES, OP_TYPES, cnn_model
from hetero_explore.ir.errors import HeterogeneousExecutionUnsupported, PlanningError, UnsupportedNodeError
from hetero_explore.session.explorer import Explorer, compare_plans, default_providers
from hetero_explore.providers import VirtualProvider, cpu


@pytest.fixture
def ex():
    """A small CNN on a virtual gpu (CPU kernels, own allocations) and cpu: fast, any machine."""
    return hx.explore(cnn_model(), providers=["gpu", "cpu"])


# -- explore() and defaults ----------------------------------------------------------------
def test_explore_is_exported():
    assert hx.explore is hx.session.explorer.explore and hx.Explorer is Explorer
    assert {"explore", "Explorer"} <= set(hx.__all__)


def test_default_providers_with_the_simulator(monkeypatch):
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    names = [p.name for p in default_providers()]
    assert names == ["cuda", "cpu"]


def test_default_providers_with_a_gpu(monkeypatch):
    cuda_mod = importlib.import_module("hetero_explore.providers.cuda")
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    monkeypatch.setattr(cuda_mod, "cuda_status", lambda: (True, ""))
    assert [p.name for p in default_providers()] == ["cuda", "cpu"]


def test_default_providers_on_a_laptop(monkeypatch):
    cuda_mod = importlib.import_module("hetero_explore.providers.cuda")
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    monkeypatch.setattr(cuda_mod, "cuda_status", lambda: (False, "no GPU"))
    provs = default_providers()
    assert [p.name for p in provs] == ["gpu", "cpu"]
    assert str(provs[0].device) == "gpu:0" and provs[0].can_execute
    e = hx.explore(cnn_model())
    assert e.provider_names == ["gpu", "cpu"]
    assert e.plan.placement_counts()["gpu"] == N_NODES


def test_reference_defaults_to_cpu_and_can_be_given(ex):
    assert ex.reference_provider.name == "cpu"
    assert ex.reference_provider is ex.providers["cpu"]
    e2 = hx.explore(cnn_model(), providers=["gpu", "cpu"], reference="gpu")
    assert e2.reference_provider.name == "gpu"


def test_explore_accepts_a_loaded_graph_but_not_shapes_with_it():
    g = hx.load_model(cnn_model())
    e = hx.explore(g, providers=["cpu"])
    assert e.graph is g
    with pytest.raises(ValueError, match="input_shapes"):
        hx.explore(g, providers=["cpu"], input_shapes={"image": (1, 3, 16, 16)})


def test_explore_binds_input_shapes():
    e = hx.explore(cnn_model("batch"), providers=["cpu"], input_shapes={"image": (2, 3, 16, 16)})
    assert e.graph.values["probs"].shape == (2, 10) and e.plan.executable
    assert e.inputs["image"].shape == (2, 3, 16, 16)


def test_duplicate_and_unknown_provider_names():
    with pytest.raises(ValueError, match="unique"):
        hx.explore(cnn_model(), providers=["cpu", "cpu"])
    with pytest.raises(ValueError, match="unknown provider name"):
        hx.explore(cnn_model(), providers=["tpu"])


# -- configuration ---------------------------------------------------------------------------
def test_order_takes_a_prefix_and_validates(ex):
    assert ex.order(["cpu"]) is ex
    assert ex.provider_names == ["cpu", "gpu"]
    ex.order(["gpu", "cpu"])
    assert ex.provider_names == ["gpu", "cpu"]
    with pytest.raises(KeyError, match="no provider named 'npu'"):
        ex.order(["npu"])
    with pytest.raises(ValueError, match="twice"):
        ex.order(["cpu", "cpu"])


def test_plan_is_lazy_and_replanned_on_change(ex):
    assert ex.history == [] and ex.dirty
    p0 = ex.plan
    assert len(ex.history) == 1 and not ex.dirty
    assert ex.plan is p0 and ex.replan() is p0 and len(ex.history) == 1  # nothing changed: no new step
    ex.order(["cpu"])
    assert ex.dirty
    p1 = ex.plan
    assert p1 is not p0 and p1.placement_counts()["cpu"] == len(ex.graph.nodes)
    assert [s.order for s in ex.history] == [("gpu", "cpu"), ("cpu", "gpu")]


def test_plans_are_cached_per_configuration(ex):
    p0 = ex.plan
    ex.deny("gpu", "Softmax")
    p1 = ex.plan
    ex.allow("gpu", "Softmax")
    assert ex.plan is p0  # toggling back re-plans from the cache
    assert ex.history[-1].seconds < 0.05
    ex.deny("gpu", ["Softmax"])
    assert ex.plan is p1
    assert len(ex.history) == 4


def test_deny_moves_ops_down_and_allow_undoes_it(ex):
    ex.deny("gpu", ["GatherND"])
    p = ex.plan
    assert ex.denied("gpu") == ("GatherND",)
    assert p.explain("watch_classes")["provider"] == "cpu"
    assert "denied by mask" in p.explain("watch_classes")["declined_by"]["gpu"]
    assert len(p.partitions) == 2 and len(p.transfers) == 1
    ex.allow("gpu")
    assert ex.denied("gpu") == () and not ex.plan.is_heterogeneous
    ex.set_denied("gpu", ["Relu", "Add"])
    assert ex.denied("gpu") == ("Add", "Relu")
    with pytest.raises(TypeError, match="op types are strings"):
        ex.deny("gpu", [1])


def test_disable_and_enable(ex):
    ex.disable("gpu")
    assert not ex.is_enabled("gpu")
    assert ex.plan.provider_names == ["cpu"]
    ex.enable("gpu")
    assert ex.plan.provider_names == ["gpu", "cpu"]


def test_everything_disabled_is_an_error_kept_in_history(ex):
    good = ex.plan
    ex.disable("gpu").disable("cpu")
    with pytest.raises(PlanningError, match="enable at least one"):
        ex.replan()
    assert ex.error.startswith("PlanningError")
    with pytest.raises(PlanningError):
        ex.plan  # noqa: B018 - the property re-raises
    assert ex.current.plan is None and ex.last_good_plan() is good
    assert len(ex.history) == 2  # asking again records nothing new
    ex.enable("cpu")
    assert ex.error is None and ex.plan.provider_names == ["cpu"]


def test_an_op_no_provider_supports_sits_on_the_unplaced_lane(ex):
    ex.deny("gpu", "Conv").deny("cpu", "Conv")
    p = ex.replan()                                   # the model still opens and shows
    pl = p.placement_df()
    conv = pl[pl.op_type == "Conv"]
    assert len(conv) and set(conv["provider"]) == {"unplaced"}
    assert set(pl[pl.op_type != "Conv"]["provider"]) <= {"gpu", "cpu"}
    first = p.execution_blockers[0]
    assert first.kind == "unplaceable" and first.where == "conv1"
    assert "gpu: " in first.detail and "cpu: " in first.detail     # each provider's reason
    assert "unplaced: " in p.summary()
    with pytest.raises(HeterogeneousExecutionUnsupported, match="unplaceable"):
        ex.execute()                                   # execution still fails closed
    with pytest.raises(UnsupportedNodeError, match="conv1"):
        hx.plan(ex.graph, ex._provider_list(), strict=True)     # scripts that want the error


def test_add_and_remove_a_virtual_provider(ex):
    npu = VirtualProvider("npu", "npu:0", ops=["Conv", "Relu"], kernels=cpu("npu-kernels"))
    ex.add_provider(npu, position=0)
    assert ex.provider_names == ["npu", "gpu", "cpu"]
    counts = ex.plan.placement_counts()
    assert counts["npu"] == 4  # two Conv, two Relu
    ex.remove_provider("npu")
    assert ex.provider_names == ["gpu", "cpu"]
    with pytest.raises(ValueError, match="unique"):
        ex.add_provider("cpu")


def test_providers_df_and_config(ex):
    ex.deny("gpu", "Softmax")
    ex.replan()
    df = ex.providers_df()
    assert list(df["provider"]) == ["gpu", "cpu"]
    assert df.loc[0, "denied_ops"] == "Softmax" and bool(df.loc[0, "enabled"])
    assert df["nodes_placed"].sum() == len(ex.graph.nodes)
    assert ex.config() == {"order": ["gpu", "cpu"], "enabled": {"gpu": True, "cpu": True},
                           "denied": {"gpu": ["Softmax"]}, "reference": "cpu"}
    assert ex.op_types == OP_TYPES


# -- compare_plans --------------------------------------------------------------------------
def test_compare_plans_reports_moves_partitions_transfers_and_bytes(ex):
    p0 = ex.plan
    ex.deny("gpu", "GatherND")
    p1 = ex.plan
    c = ex.compare_plans()  # previous → current
    assert c.a is p0 and c.b is p1
    assert c.moved.to_dict("records") == [
        {"node": "watch_classes", "op_type": "GatherND", "from_provider": "gpu", "to_provider": "cpu"}]
    assert len(c.partitions_removed) == 1 and len(c.partitions_added) == 2
    assert sorted(c.partitions_added["n_nodes"]) == [1, N_NODES - 1]
    assert list(c.transfers_added["value"]) == ["probs"] and len(c.transfers_removed) == 0
    assert (c.bytes_before, c.bytes_after, c.bytes_delta) == (0, 40, 40)
    assert c.changed and "1 node(s) moved" in c.summary() and "+40 B" in c.summary()
    assert c.to_dict()["bytes_delta"] == 40
    # by history index, by Step, by Plan; and the reverse
    back = ex.compare_plans(1, 0)
    assert back.bytes_delta == -40 and list(back.transfers_removed["value"]) == ["probs"]
    assert ex.compare_plans(ex.history[0], p1).moved.equals(c.moved)
    assert "<table" in c._repr_html_()


def test_compare_identical_plans_says_no_change(ex):
    c = compare_plans(ex.plan, ex.plan)
    assert not c.changed and c.summary().startswith("no change")
    assert ex.compare_plans().summary().startswith("no change")  # no previous plan yet


def test_compare_plans_rejects_failed_steps_and_bad_indices(ex):
    ex.plan
    ex.disable("gpu").disable("cpu")
    with pytest.raises(PlanningError):
        ex.replan()
    with pytest.raises(ValueError, match="has no plan"):
        ex.compare_plans(0, 1)
    with pytest.raises(IndexError, match="no step 7"):
        ex.compare_plans(0, 7)
    with pytest.raises(TypeError):
        ex.compare_plans("x", 0)


# -- execution ------------------------------------------------------------------------------
def test_execute_proves_byte_identity_and_records_it(ex):
    ex.deny("gpu", "GatherND")
    stages = []
    run = ex.execute(progress=lambda i, n, label: stages.append((i, n, label)))
    k = len(ex.plan.partitions)
    # a cold numba cache adds "<step>: compiling kernels" ticks, each at the step it interrupts
    for j, (i, n, label) in enumerate(stages):
        if label.endswith(": compiling kernels"):
            assert j > 0 and stages[j - 1][:2] == (i, n) and label == f"{stages[j - 1][2]}: compiling kernels"
    stages = [s for s in stages if not s[2].endswith(": compiling kernels")]
    assert [(i, n) for i, n, _ in stages] == [(i, k + 3) for i in range(k + 4)]
    assert [lab for _, _, lab in stages[1:k + 1]] == [f"partition {j + 1}/{k} on {p.provider}"
                                                      for j, p in enumerate(ex.plan.partitions)]
    assert ex.run is run and ex.reference_run is not None
    assert ex.byte_identical is True
    assert set(ex.diff["output"]) == {"probs", "watched"} and ex.diff["byte_identical"].all()
    assert run.transfers_performed == len(ex.plan.transfers) == 1
    assert ex.current.run is run and ex.current.diff is ex.diff
    row = ex.history_df().iloc[-1]
    assert bool(row["executed"]) and bool(row["byte_identical"])
    # a re-plan clears the current run; the history step keeps it
    ex.order(["cpu"])
    ex.replan()
    assert ex.run is None and ex.diff is None and ex.byte_identical is None
    assert ex.history[-2].run is run


def test_cancel_stops_between_partitions_and_frees_everything(ex):
    from hetero_explore.providers import unmask
    ex.deny("gpu", ["Relu"])
    k = len(ex.plan.partitions)
    assert k > 2

    def live():
        return [(unmask(p).live_allocations, unmask(p).live_bytes) for p in ex.providers.values()]

    before = live()
    seen = []

    def progress(i, n, label):
        seen.append(label)

    with pytest.raises(hx.RunCancelled, match=f"after partition 2/{k} on cpu, before partition 3/{k}"):
        ex.execute(progress=progress, cancel=lambda: len(seen) >= 3)
    assert seen == ["planning", f"partition 1/{k} on gpu", f"partition 2/{k} on cpu"]
    assert live() == before
    assert ex.run is None and ex.current.run is None
    # the executor's hooks are gone: a full run after a cancelled one goes through
    run = ex.execute()
    assert ex.byte_identical is True and run.rerun().outputs.keys() == run.outputs.keys()


def test_compiles_during_a_run_are_shown_and_counted():
    import numba
    from hetero_explore.session.explorer import _RunWatch
    labels = []
    w = _RunWatch(lambda i, n, label: labels.append(label), None, 4)
    w.tick(1, "partition 1/1 on cpu")
    with w.compiles():
        numba.njit(lambda x: x * 3 + 1)(2)  # a fresh function: numba compiles it here
    assert labels == ["partition 1/1 on cpu", "partition 1/1 on cpu: compiling kernels"]
    assert w.compile_seconds > 0
    w2 = _RunWatch(None, None, 4)
    f = numba.njit(lambda x: x - 1)
    f(1)
    with w2.compiles():
        f(2)  # already compiled: no event
    assert w2.compile_seconds == 0


def test_default_inputs_are_seeded_and_typed(ex):
    a = ex.inputs
    assert list(a) == ["image"] and a["image"].dtype == np.float32 and a["image"].shape == (1, 3, 16, 16)
    e2 = hx.explore(cnn_model(), providers=["cpu"])
    np.testing.assert_array_equal(a["image"], e2.inputs["image"])
    e3 = hx.explore(cnn_model(), providers=["cpu"], seed=1)
    assert not np.array_equal(a["image"], e3.inputs["image"])


def test_execute_with_given_inputs_and_reference_cache(ex):
    feeds = {"image": np.ones((1, 3, 16, 16), np.float32)}
    ex.execute(inputs=feeds)
    ref = ex.reference_run
    np.testing.assert_array_equal(ex.run.inputs["image"], feeds["image"])
    ex.deny("gpu", "Softmax")
    ex.execute(inputs={"image": feeds["image"].copy()})
    assert ex.reference_run is ref  # same inputs: the reference is not run again
    assert ex.byte_identical


def test_execution_on_symbolic_shapes_takes_the_callers_shapes():
    e = hx.explore(cnn_model("batch"), providers=["gpu", "cpu"])  # batch left symbolic
    assert e.plan.executable
    for n in (1, 2):
        e.execute(inputs={"image": np.random.default_rng(n).standard_normal((n, 3, 16, 16)).astype(np.float32)})
        assert e.byte_identical
        assert next(iter(e.run.outputs.values())).shape[0] == n


def test_default_providers_execute_on_the_simulator():
    """The conftest sets NUMBA_ENABLE_CUDASIM: the default plan runs on the simulated CUDA provider."""
    from hetero_explore.data import models
    e = hx.explore(models.mlp("tiny"))
    assert e.provider_names == ["cuda", "cpu"]
    e.deny("cuda", "Softmax")
    e.execute()
    assert e.byte_identical
    assert {"cuda", "cpu"} <= set(e.run.providers)


# -- views and listeners --------------------------------------------------------------------
def test_svg_is_cached_per_plan_and_level(ex):
    pytest.importorskip("graphviz")
    from hetero_explore.viz.graph import check_dot
    try:
        check_dot()
    except Exception as e:
        pytest.skip(f"graphviz dot missing: {e}")
    s1 = ex.svg()
    assert s1.startswith("<svg") and ex.svg() is s1
    assert ex.svg(level="partition") is not s1


def test_listeners_hear_plans_and_runs(ex):
    events = []
    ex.observe(events.append)
    ex.plan
    ex.execute()
    ex.order(["cpu"]).replan()
    assert events == ["plan", "run", "plan"]
    ex.unobserve(events.append)

    def broken(event):
        raise RuntimeError("a broken view")
    ex.observe(broken)
    ex.deny("cpu", "Relu").replan()  # a failing listener never breaks the model


def test_export_html(ex, tmp_path):
    pytest.importorskip("hetero_explore.viz.report")
    ex.deny("gpu", "GatherND")
    ex.execute()
    path = ex.export_html(tmp_path / "r.html")
    text = open(path, encoding="utf-8").read()
    assert "<html" in text.lower() and "probs" in text


def test_repr(ex):
    assert "not planned" in repr(ex)
    ex.plan
    assert "partition(s)" in repr(ex) and "<table" in ex._repr_html_()
