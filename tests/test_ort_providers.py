"""ONNX Runtime's execution providers as providers (``ort:<EP>``): real onnxruntime sessions,
no mocks. Models are built here with seeded weights (a TorchScript-exported CNN, a scripted
``If``, an skl2onnx pipeline). ``ort:cpu`` is a real EP everywhere; the OpenVINO tests run where
the installed onnxruntime offers ``OpenVINOExecutionProvider`` (an Intel CPU with
onnxruntime-ep-openvino, or the onnxruntime-openvino build) and say why they skip elsewhere."""

from __future__ import annotations

import functools
import io
import sys
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import hetero_explore as he
from hetero_explore.analysis import divergence as dv
from hetero_explore.execution.executor import HeterogeneousExecutor
from hetero_explore.ir.errors import (ArgumentValueError, HeterogeneousExecutionUnsupported,
                                      MissingDependencyError, ProviderUnavailableError)
from hetero_explore.providers import mask, resolve
from hetero_explore.providers import ort as hort

ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")
nn = torch.nn

OPENVINO, OPENVINO_WHY = resolve("ort:openvino").available()
needs_openvino = pytest.mark.skipif(not OPENVINO, reason=f"no OpenVINO EP here: {OPENVINO_WHY}")


# -- models ------------------------------------------------------------------------------------
class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        y = torch.sigmoid(self.conv2(y)) * y
        y = torch.nn.functional.adaptive_avg_pool2d(y, 1).flatten(1)
        return torch.softmax(self.fc(y), dim=1)


class IfOnShape(nn.Module):
    def __init__(self):
        super().__init__()
        self.wide = nn.Linear(3, 3)
        self.narrow = nn.Linear(3, 3)

    def forward(self, x):
        if x.shape[1] > 4:
            return torch.relu(self.wide(x[:, :3]))
        else:
            return self.narrow(x[:, :3]) * 2.0


@functools.lru_cache(maxsize=None)
def cnn_bytes() -> bytes:
    torch.manual_seed(7)
    m = SmallCNN().eval()
    with torch.no_grad():          # non-trivial batch-norm statistics
        m.bn.running_mean.uniform_(-0.5, 0.5)
        m.bn.running_var.uniform_(0.5, 2.0)
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (torch.randn(1, 3, 8, 8),), f, dynamo=False, opset_version=17,
                          input_names=["x"], output_names=["y"])
    return f.getvalue()


@functools.lru_cache(maxsize=None)
def if_bytes() -> bytes:
    torch.manual_seed(11)
    m = IfOnShape().eval()
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(torch.jit.script(m), (torch.randn(2, 5),), f, dynamo=False, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "b", 1: "w"}})
    return f.getvalue()


def cnn():
    return he.load_model(cnn_bytes())


def cnn_inputs(seed=0):
    return {"x": np.random.default_rng(seed).standard_normal((1, 3, 8, 8)).astype(np.float32)}


def ort_assignment(model_bytes, providers):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    s = ort.InferenceSession(model_bytes, so, providers=providers)
    out: dict = {}
    for sg in s.get_provider_graph_assignment_info():
        out.setdefault(sg.ep_name, set()).update(n.name for n in sg.get_nodes())
    return out


# -- names and availability ------------------------------------------------------------------------
def test_names_resolve_to_ort_providers():
    p = resolve("ort:cpu")
    assert isinstance(p, hort.OrtProvider) and p.ep == "CPUExecutionProvider" and p.available() == (True, "")
    q = resolve("ort:OpenVINO?device_type=CPU&num_of_threads=2")
    assert q.ep == "OpenVINOExecutionProvider" and q.options == {"device_type": "CPU", "num_of_threads": "2"}
    assert q.name == "ort:openvino?device_type=CPU&num_of_threads=2"
    assert resolve("ort:CPUExecutionProvider").name == "ort:cpu"
    with pytest.raises(ArgumentValueError, match="graph_optimization_level"):
        resolve("ort:cpu?graph_optimization_level=fast")
    with pytest.raises(ArgumentValueError, match="names no EP"):
        resolve("ort:")
    # an EP this onnxruntime lacks is a provider that says why, and plans with that reason
    cuda = resolve("ort:cuda")
    ok, why = cuda.available()
    if not ok:
        assert "CUDAExecutionProvider" in why and "onnxruntime-gpu" in why
        g = cnn()
        p = he.plan(g, [cuda, "cpu"])
        assert p.placement_counts()["cpu"] == len(g.nodes)
        assert p.declined[0]["ort:cuda"] == why
        with pytest.raises(HeterogeneousExecutionUnsupported, match="unplaceable"):
            he.execute(he.plan(g, [cuda]), cnn_inputs())


def test_openvino_is_listed_with_its_reason():
    ex = he.explore(cnn(), ["ort:openvino", "ort:cpu", "cpu"])
    row = ex.providers_df().set_index("provider").loc["ort:openvino"]
    assert bool(row["can_execute"]) == OPENVINO
    if not OPENVINO:
        assert "OpenVINOExecutionProvider" in row["why_not"]
        assert "pip install" not in row["why_not"] or "onnxruntime-ep-openvino" in row["why_not"]
    table = hort.ep_table().set_index("provider")
    assert bool(table.loc["ort:cpu", "available"]) and bool(table.loc["ort:openvino", "available"]) == OPENVINO


def test_without_onnxruntime_ort_names_name_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(MissingDependencyError, match=r"hetero_explore\[ort\]"):
        resolve("ort:cpu")


# -- capability --------------------------------------------------------------------------------
def test_capability_is_ort_assignment():
    g = cnn()
    p = he.plan(g, ["ort:cpu", "cpu"])
    names = hort.node_names(g)
    got = ort_assignment(hort.graph_digest(g)[1], ["CPUExecutionProvider"])
    assert {names[i] for i, a in enumerate(p.assignment) if a == 0} == got["CPUExecutionProvider"]
    assert p.placement_counts()["ort:cpu"] == len(g.nodes)
    # a node ORT cannot open a session for is declined in ORT's own words; the rest stays claimed
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    s = helper.make_tensor_value_info("s", TensorProto.STRING, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    z = helper.make_tensor_value_info("z", TensorProto.STRING, [2])
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["t"], name="r"), helper.make_node("Exp", ["t"], ["y"], name="e"),
         helper.make_node("StringNormalizer", ["s"], ["z"], name="sn", case_change_action="LOWER",
                          locale="xx_NOT_A_LOCALE")], "g", [x, s], [y, z]),
        opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    p = he.plan(he.load_model(m), ["ort:cpu", "cpu"])
    rows = p.placement_df().set_index("name")
    assert rows.loc["r", "provider"] == rows.loc["e", "provider"] == "ort:cpu"
    assert rows.loc["sn", "provider"] == "cpu"
    assert "onnxruntime's CPU EP cannot run it" in p.declined[rows.loc["sn", "node_id"]]["ort:cpu"]


@needs_openvino
def test_openvino_capability_is_its_assignment():
    g = cnn()
    p = he.plan(g, ["ort:openvino", "cpu"])
    names = hort.node_names(g)
    r = resolve("ort:openvino").route
    provs = [("OpenVINOExecutionProvider", {}), "CPUExecutionProvider"] if r.kind == "bridge" else None
    if provs is not None:
        got = ort_assignment(hort.graph_digest(g)[1], provs)
        assert {names[i] for i, a in enumerate(p.assignment) if a == 0} == got.get("OpenVINOExecutionProvider", set())
    run = he.execute(p, cnn_inputs())
    ref = he.execute_reference(g, "ort:cpu", cnn_inputs())
    assert np.allclose(run["y"], ref["y"], atol=1e-5)


# -- execution ---------------------------------------------------------------------------------
def test_heterogeneous_execution_through_sessions():
    g = cnn()
    p = he.plan(g, [mask(resolve("ort:cpu"), deny=["Sigmoid"]), "cpu"])
    assert p.is_heterogeneous and len(p.partitions) == 3
    feeds = cnn_inputs()
    with HeterogeneousExecutor(p) as ex1, HeterogeneousExecutor(p) as ex2:
        # one session per partition, built when planning and reused by every executor
        for a, b in zip(ex1.parts, ex2.parts):
            if isinstance(a, hort.OrtPartitionRunner):
                assert a.session is b.session
        run = ex1.run(feeds)
        again = ex2.run(feeds)
    assert he.compare(run, again)["byte_identical"].all()
    t = run.timings_df()
    parts = t[t["event"] == "partition"]
    assert list(parts["provider"]) == ["ort:cpu", "cpu", "ort:cpu"]
    xfers = t[t["event"] == "transfer"]
    assert len(xfers) == len(p.transfers) and (xfers["bytes"] > 0).all()
    torch.manual_seed(7)
    ref = he.execute_reference(g, "cpu", feeds)
    assert np.allclose(run["y"], ref["y"], atol=1e-5) and np.isclose(run["y"].sum(), 1.0, atol=1e-5)


def test_skl2onnx_pipeline_and_if_model_run_end_to_end():
    skl2onnx = pytest.importorskip("skl2onnx")
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    rng = np.random.default_rng(3)
    X = rng.standard_normal((60, 4)).astype(np.float32)
    yv = (X[:, 0] + X[:, 1] > 0).astype(np.int64)
    pipe = make_pipeline(StandardScaler(), LogisticRegression()).fit(X, yv)
    m = skl2onnx.to_onnx(pipe, X[:2], options={"zipmap": False}, target_opset={"": 17, "ai.onnx.ml": 3})
    g = he.load_model(m, input_shapes={"X": (5, 4)})
    p = he.plan(g, [mask(resolve("ort:cpu"), deny=["LinearClassifier"]), "cpu"])
    assert {"ort:cpu", "cpu"} <= set(p.placement_counts())
    feeds = {"X": X[:5]}
    run = he.execute(p, feeds)
    ref = he.execute_reference(g, "ort:cpu", feeds)
    assert np.array_equal(run.outputs["label"], ref.outputs["label"])
    # a scripted If: ORT runs it (subgraphs inside its session), or the If runs here beside ORT
    gi = he.load_model(if_bytes(), input_shapes={"x": (2, 5)})
    xi = {"x": np.random.default_rng(1).standard_normal((2, 5)).astype(np.float32)}
    for provs in (["ort:cpu", "cpu"], [mask(resolve("ort:cpu"), deny=["If"]), "cpu"]):
        pi = he.plan(gi, provs)
        assert pi.executable, pi.execution_blockers
        out = he.execute(pi, xi)
        want = he.execute_reference(gi, "ort:cpu", xi)
        assert np.allclose(out["y"], want["y"], atol=1e-6)


# -- divergence --------------------------------------------------------------------------------
def test_blame_finds_the_partition_and_the_node():
    g = he.load_model(he.models.transformer())
    p = he.plan(g, [mask(resolve("ort:cpu"), deny=["Softmax", "Erf"]), "cpu"])
    x = he.random_inputs(g, 0)
    run, ref = he.execute(p, x), he.execute_reference(g, "cpu", x)
    parts = dv.partition_ulp_df(run, ref)
    # the project's own partitions replay bit for bit; an ORT partition is a measurement
    assert parts[parts["provider"] == "cpu"]["byte_identical"].all()
    diff = he.compare(run, ref, blame=True, bisect=True)
    if diff["byte_identical"].all():
        pytest.skip("ORT's CPU EP gave the Numba CPU provider's bits on every output")
    row = diff.iloc[0]
    assert row["blamed"] == "node" and row["blamed_provider"] == "ort:cpu"
    first = parts[parts["byte_identical"] == False].iloc[0]  # noqa: E712
    assert row["blamed_partition"] == first["partition"] and first["max_ulp"] > 0
    node = g.nodes[[n.name for n in g.nodes].index(row["blamed_node"])]
    assert p.node_partition[node.id] == first["partition"]
    steps = dv.bisect_partition(run, ref, int(first["partition"]))
    assert steps[-1].node == row["blamed_node"] and steps[-1].max_ulp > 0
    assert all(s.byte_identical for s in steps[:-1])
    table = dv.op_ulp_table(dv.op_ulp_df(run, ref))
    assert set(table["provider"]) == {"ort:cpu"} and table["max_ulp"].max() > 0


# -- policies ----------------------------------------------------------------------------------
def test_ort_device_policy_picks_the_providers():
    g = cnn()
    ex = he.explore(g, policy="PREFER_CPU")
    assert ex.provider_names == ["ort:cpu"]
    assert "CPUExecutionProvider" in ex.policy_note and "PREFER_CPU" in ex.policy_note
    assert ex.policy == "PREFER_CPU" and ex.plan.policy == "priority"   # placement stays first-fit
    assert ex.plan.placement_counts() == {"ort:cpu": len(g.nodes)}
    npu = he.explore(g, policy="ort:PREFER_NPU")
    assert npu.provider_names[0].startswith("ort:") and npu.policy_note.startswith("ORT's PREFER_NPU policy saw")
    with pytest.raises(ArgumentValueError, match="either providers or an ORT policy"):
        he.explore(g, ["cpu"], policy="PREFER_NPU")
    assert he.explore(g, ["ort:cpu", "cpu"], policy="min-transfer").policy == "min-transfer"


# -- interop -----------------------------------------------------------------------------------
def test_plan_from_ort_round_trip():
    g = cnn()
    names = hort.node_names(g)
    got = ort_assignment(hort.graph_digest(g)[1], ["CPUExecutionProvider"])
    p = he.plan_from_ort(g, ["ort:cpu"])
    a = p.to_ort_assignment()
    assert {x["ep_name"] for x in a} == set(got)
    assert {n for x in a for n in x["nodes"]} == got["CPUExecutionProvider"] == set(names)
    assert a[0]["device_type"] == "CPU"
    # the explorer's plan vs what ORT did: no change when both put everything on the CPU EP
    assert "no change" in he.planner.plandiff.compare_plans(he.plan(g, ["ort:cpu"]), p).summary()
    hp = he.plan(g, [mask(resolve("ort:cpu"), deny=["Sigmoid"]), "cpu"])
    ha = hp.to_ort_assignment()
    assert [x["ep_name"] for x in ha] == ["CPUExecutionProvider", "cpu", "CPUExecutionProvider"]
    assert sum(len(x["nodes"]) for x in ha) == len(g.nodes)
    # and what ORT did executes
    run = he.execute(p, cnn_inputs())
    assert np.isclose(run["y"].sum(), 1.0, atol=1e-5)


# -- an EP that claims and then fails to compile ----------------------------------------------------
def _if_conv_unknown_rank():
    """Reshape to a run-time shape (rank unknown), then an If whose branches Conv it: the
    OpenVINO EP takes the If and fails to compile it (rank not static)."""
    w = numpy_helper.from_array(np.ones((2, 1, 3), np.float32), "w")

    def branch(name):
        out = helper.make_tensor_value_info(name + "_y", TensorProto.FLOAT, None)
        return helper.make_graph([helper.make_node("Conv", ["xr", "w"], [name + "_y"], name=name + "_conv")],
                                 name, [], [out])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1, 16])
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    s = helper.make_tensor_value_info("s", TensorProto.INT64, ["k"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Reshape", ["x", "s"], ["xr"], name="reshape"),
             helper.make_node("If", ["c"], ["y"], name="if", then_branch=branch("then"), else_branch=branch("else"))]
    m = helper.make_model(helper.make_graph(nodes, "g", [x, c, s], [y], [w]),
                          opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@needs_openvino
def test_compile_failure_is_shown_not_raised():
    g = he.load_model(_if_conv_unknown_rank(), check=False)   # onnx.checker wants shaped outputs; ORT does not
    p = he.plan(g, ["ort:openvino", "cpu"])
    # ORT cannot open the whole graph with OpenVINO (it takes the If, then fails to compile it): the
    # graph is asked in pieces, and the EP's message is in every decline; a partition that fails
    # with CPU fallback disabled would be an ep-compile blocker (he.move_failed moves it)
    why = " ".join(r.get("ort:openvino", "") for r in p.declined)
    claimed = [i for i, a in enumerate(p.assignment) if p.providers[a].name == "ort:openvino"]
    assert "could not create the whole graph's session" in why or claimed
    bl = [b for b in p.execution_blockers if b.kind == "ep-compile"]
    moved = he.move_failed(p)
    assert not [b for b in moved.execution_blockers if b.kind == "ep-compile"]
    assert bool(bl) == (moved is not p)
    feeds = {"x": np.arange(16, dtype=np.float32).reshape(1, 1, 16), "c": np.array(True),
             "s": np.array([1, 1, 16], np.int64)}
    run = he.execute(moved, feeds)
    assert run["y"].shape == (1, 2, 14)


def test_app_and_report_show_the_per_op_ulp_table():
    """After a run with ONNX Runtime partitions, the Explorer keeps the per-op ULP table (op type ×
    provider: the largest ULP of a node run alone on the reference's inputs); the app's Diff view
    and the report show it. A plan without ORT partitions has none."""
    from hetero_explore.viz import views as V
    ex = he.explore(cnn(), providers=[mask(resolve("ort:cpu"), deny=["Relu"]), "cpu"])
    ex.execute(inputs=cnn_inputs())
    t = ex.op_ulp
    assert t is not None and len(t) and set(t["provider"]) == {"ort:cpu"}
    assert {"Conv", "Sigmoid"} <= set(t["op_type"]) and "Relu" not in set(t["op_type"])
    assert (t["max_ulp"].dropna() >= 0).all()
    html = V.render("Diff", V.snapshot(ex))
    assert 'id="he-op-ulp"' in html and "Conv" in html and "measured, not proven" in html
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "r.html"
        ex.export_html(str(path))
        assert "he-op-ulp" in path.read_text()
    ex2 = he.explore(cnn(), providers=["cpu"])
    ex2.execute(inputs=cnn_inputs())
    assert ex2.op_ulp is None and "he-op-ulp" not in V.render("Diff", V.snapshot(ex2))


def test_providers_view_shows_what_the_table_and_the_real_ep_say(monkeypatch):
    """A doc-table profile in the list: the Providers view puts its table's claims next to its real
    EP's (ORT's own assignment of this graph), or says why the EP is not usable here. The EP is a
    real session: the CPU EP stands in for NNAPI's in the mapping only."""
    from hetero_explore.planner import ortplan
    from hetero_explore.viz import views as V
    ex = he.explore(cnn(), providers=["nnapi", "cpu"])
    ex.replan()
    html = V.render("Providers", V.snapshot(ex))
    assert "nnapi: the table says / ort:nnapi says" in html and "not usable here" in html
    monkeypatch.setitem(ortplan.PROFILE_EPS, "nnapi", "ort:cpu")
    html = V.render("Providers", V.snapshot(ex))
    assert "nnapi: the table says / ort:cpu says" in html and 'id="he-table-vs-ep-0"' in html
    df = ortplan.claims_side_by_side(ex.graph, resolve("nnapi"), resolve("ort:cpu"))
    assert int(df["nodes"].sum()) == len(ex.graph.nodes)
    assert (df["ep_claims"] == df["nodes"]).all()          # the CPU EP runs every op of this CNN
    assert (~df["agree"]).sum() == (df["table_claims"] != df["nodes"]).sum()
