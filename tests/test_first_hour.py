"""A newcomer's first hour (issue 30): each blocker and confusing item a new user met, as a
test that failed before it was fixed. The real-browser halves (the app executing a scalar-input
model, the 10,000-node graph, the sweep page) are in test_graph_browser.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

import hetero_explore as he
from hetero_explore.cli.main import main
from ux_models import scalar_input_model, symbolic_model, zoo

DEMO = str(Path(__file__).resolve().parents[1] / "hetero_explore" / "data" / "demo.onnx")


def run_cli(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def vad_path(tmp_path_factory):
    p = tmp_path_factory.mktemp("vad") / "vad.onnx"
    onnx.save(scalar_input_model(), str(p))
    return str(p)


# -- blocker: a 0-d input ------------------------------------------------------------------------
def test_random_inputs_keep_a_scalar_input_scalar():
    g = he.load_model(scalar_input_model())
    feeds = he.random_inputs(g, seed=1)
    assert feeds["sr"].shape == () and feeds["sr"].dtype == np.int64
    assert feeds["x"].shape == (1, 16) and feeds["x"].flags.c_contiguous


def test_cli_report_execute_runs_a_scalar_input_model(capsys, tmp_path, vad_path):
    rc, out, err = run_cli(capsys, "report", vad_path, "-o", str(tmp_path / "r.html"), "--execute",
                           "--providers", "gpu,cpu", "--runs", "3")
    assert rc == 0, err
    assert "expected int64 ()" not in err and "nothing was executed" not in err
    assert "byte_identical" in out and "True" in out


def test_explorer_and_app_execute_a_scalar_input_model():
    pytest.importorskip("ipywidgets")
    ex = he.explore(scalar_input_model(), providers=["gpu", "cpu"])
    app = ex.show()
    try:
        app.execute(wait=True)
        assert app.run_error == "", app.run_error
        assert ex.byte_identical is True
    finally:
        app.close()


def test_sweep_execute_runs_a_scalar_input_model(vad_path):
    df = he.sweep([vad_path], providers=["gpu,cpu"], execute=True, client="in-process")
    row = df.iloc[0]
    assert row["ok"], row["error"]
    assert row["byte_identical"] is True or row["byte_identical"] == True  # noqa: E712


# -- blocker: a zoo laid out as <name>/model.onnx ------------------------------------------------
def test_zoo_layout_sweep_names_every_row_by_its_folder(tmp_path):
    paths = zoo(tmp_path / "zoo")
    df = he.sweep(str(tmp_path / "zoo"), providers=["gpu,cpu", "cpu"], client="in-process")
    assert len(df) == 6
    assert sorted(set(df["name"])) == ["bert", "resnet", "vad"]
    assert set(df["model"]) == {str(p) for p in paths}
    from hetero_explore.viz.sweep_report import sweep_to_html
    page = sweep_to_html(df)
    assert re.search(r"<th>models</th><td>3</td>", page), "the sweep page counts every model"


def test_model_names_go_up_the_folders_until_unique():
    from hetero_explore.analysis.fleet import model_names
    got = model_names(["/z/a/x/model.onnx", "/z/b/x/model.onnx", "/z/c/y.onnx", "/z/d/y.onnx", "/z/e/solo.onnx"])
    assert got == ["a/x", "b/x", "c", "d", "solo"]


def test_compare_sweeps_keeps_every_model_of_a_zoo(tmp_path):
    from hetero_explore.analysis.fleet import compare_sweeps
    zoo(tmp_path / "zoo", names=("resnet", "bert", "vad", "chain"))
    before = he.sweep(str(tmp_path / "zoo"), providers=["gpu,cpu", "cpu"], client="in-process")
    onnx.save(scalar_input_model(), str(tmp_path / "zoo" / "chain" / "model.onnx"))   # one model re-exported
    after = he.sweep(str(tmp_path / "zoo"), providers=["gpu,cpu", "cpu"], client="in-process")
    c = compare_sweeps(before, after)
    assert len(c) == 8 and sorted(set(c["name"])) == ["bert", "chain", "resnet", "vad"]
    assert set(c.loc[c["name"] == "chain", "status"]) == {"changed"}
    assert set(c.loc[c["name"] != "chain", "status"]) == {"same"}
    # a sweep written before names were unique (every row named "model") is not merged either
    legacy = before.copy()
    legacy["name"] = "model"
    c2 = compare_sweeps(legacy, before)
    assert len(c2) == 8 and set(c2["status"]) == {"same"}


def test_cli_sweep_binds_input_shapes_and_dims(capsys, tmp_path):
    d = tmp_path / "sym"
    d.mkdir()
    onnx.save(symbolic_model(8), str(d / "a.onnx"))
    onnx.save(scalar_input_model(), str(d / "b.onnx"))           # has no "batch": the binding skips it
    rc, out, err = run_cli(capsys, "sweep", str(d), "--in-process", "--execute", "--quiet",
                           "-o", str(tmp_path / "no.json"))
    assert rc == 0
    rows = json.loads((tmp_path / "no.json").read_text())
    bad = [r for r in rows if not r["ok"]]
    assert bad and "--input-shape" in bad[0]["error"] and "input_shapes=" not in bad[0]["error"]
    rc, out, err = run_cli(capsys, "sweep", str(d), "--in-process", "--execute", "--quiet", "--dim", "batch=2",
                           "-o", str(tmp_path / "dim.json"))
    rows = json.loads((tmp_path / "dim.json").read_text())
    assert rc == 0 and all(r["ok"] for r in rows), [r["error"] for r in rows]
    rc, out, err = run_cli(capsys, "sweep", str(d), "--in-process", "--execute", "--quiet",
                           "--input-shape", "feat=3,8", "-o", str(tmp_path / "shape.json"))
    rows = json.loads((tmp_path / "shape.json").read_text())
    assert rc == 0 and all(r["ok"] for r in rows), [r["error"] for r in rows]
    assert {r["warm_runs"] for r in rows} and all(r["warm_runs"] >= 3 for r in rows)


# -- blocker: graph layout must not hang the report ----------------------------------------------
def test_a_picture_dot_would_take_long_on_goes_to_the_linear_layout():
    from hetero_explore.viz.graph import DOT_COST_LIMIT, plan_to_graphviz
    dense = dense_plan(20)          # 41 partitions, 232 labelled edges spanning many ranks: dot took 5-8 s
    assert len(dense.partitions) == 41
    pic = plan_to_graphviz(dense, level="partition")
    assert pic.layout == "layered", "a partition view dot would take seconds to minutes on is laid out in linear time"
    assert plan_to_graphviz(dense_plan(6), level="partition").layout == "dot"   # a small one stays with dot
    assert DOT_COST_LIMIT > 0


def test_dot_past_its_time_budget_gives_way_to_the_linear_layout():
    import shutil
    if shutil.which("dot") is None:
        pytest.skip("Graphviz dot is not installed")
    from hetero_explore.viz.graph import LayoutTimeout, plan_to_graphviz
    pic = plan_to_graphviz(dense_plan(12), level="partition")
    assert pic.layout == "dot" and pic.fallback is not None
    svg = pic.svg(timeout=0.0001)           # dot cannot finish in 0.1 ms: the linear layout is drawn
    assert svg.startswith("<svg") and "P0" in svg
    pic.fallback = None
    with pytest.raises(LayoutTimeout, match="layered"):
        pic.svg(timeout=0.0001)


def dense_plan(layers: int):
    """A DenseNet block with Concat denied on the accelerator: every layer's output feeds every
    later Concat (on the CPU), so each partition sends a labelled edge to every later one."""
    from onnx import TensorProto, helper
    nodes = [helper.make_node("Relu", ["x"], ["x0"], name="stem")]
    outs = ["x0"]
    for i in range(1, layers + 1):
        nodes.append(helper.make_node("Concat", list(outs), [f"c{i}"], name=f"concat{i}", axis=1))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"x{i}"], name=f"relu{i}"))
        outs.append(f"x{i}")
    g = helper.make_graph(nodes, "dense", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1])],
                          [helper.make_tensor_value_info(outs[-1], TensorProto.FLOAT, [1, 2 ** (layers - 1)])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    npu = he.VirtualProvider("npu", "npu:0", ops=["Relu"])
    return he.plan(he.load_model(m), [npu, "cpu"])


# -- the CLI fits the terminal -------------------------------------------------------------------
def test_plan_piped_into_head_exits_quietly():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                        os.environ.get("PYTHONPATH", "")]))
    p = subprocess.Popen([sys.executable, "-m", "hetero_explore.cli.main", "plan", DEMO, "--providers", "nnapi,cpu",
                          "--full"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    p.stdout.close()                       # the reader is gone before the first line is written
    err = p.stderr.read().decode()
    rc = p.wait(timeout=300)
    assert rc == 0 and "BrokenPipeError" not in err and "internal error" not in err, err


@pytest.mark.parametrize("columns", [80, 120])
def test_tables_fit_the_terminal_and_reasons_are_wrapped_not_cut(capsys, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    rc, out, _ = run_cli(capsys, "plan", DEMO, "--providers", "nnapi,cpu", "--input-shape", "image=1,3,16,16")
    assert rc == 0
    assert max(len(line) for line in out.splitlines()) <= columns
    flat = "".join(out.split())
    # the whole decline reason, source included, is there (wrapped, never cut at the column's edge)
    assert "".join("ai.onnx:GatherND is not in the NnapiExecutionProvider table, microsoft/onnxruntime "
                   "tools/ci_build/github/android/nnapi_supported_ops.md@".split()) in flat
    rc, out, _ = run_cli(capsys, "providers", "--providers", "tensorrt")
    assert rc == 0 and max(len(line) for line in out.splitlines()) <= columns
    assert out.count("github.com/onnx/onnx-tensorrt") == 1      # the source once, not on every row


def test_ops_table_lists_declined_op_types_first(capsys):
    rc, out, _ = run_cli(capsys, "plan", DEMO, "--providers", "nnapi,cpu", "--input-shape", "image=1,3,16,16")
    ops = out.split("Ops (")[1].split("\n\n")[0].splitlines()
    rows = [ln.split()[0] for ln in ops if ln and not ln.startswith(("node", "every", "op_type", "\u2500", "-", " "))]
    rows = [r for r in rows if r[0].isupper()]
    assert rows[:2] == ["GatherND", "ReduceMax"], rows


def test_help_lists_every_provider_family_from_the_registry(capsys, monkeypatch):
    from hetero_explore import providers as P
    monkeypatch.setitem(P.PROVIDERS, "ort:examplenpu", lambda: None)   # a family added by another module
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for name in ("cpu", "cuda", "gpu", "nnapi", "coreml", "tensorrt", "qnn", "ort:examplenpu"):
        assert name in out, name
    assert "ONNX Runtime execution providers" in out
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    assert "placement policies (--policy): priority, min-transfer" in " ".join(top.split())


def test_report_and_cli_give_warm_timings_with_the_first_run_apart(capsys, tmp_path):
    rc, out, err = run_cli(capsys, "report", DEMO, "-o", str(tmp_path / "r.html"), "--execute",
                           "--input-shape", "image=1,3,16,16", "--runs", "5")
    assert rc == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("timings: "))
    assert re.search(r"warm \S+ \S+ median, p90 \S+ \S+ over [3-5] runs; first run", line), line
    page = (tmp_path / "r.html").read_text()
    assert "warm runs timed" in page and "first run (a new executor; not warm)" in page and "warm p90" in page


# -- the rest: explore(), Model Explorer, profiles, control flow ----------------------------------
def test_explore_takes_fold_constants():
    from onnx import TensorProto, helper, numpy_helper
    inits = [numpy_helper.from_array(np.ones((1, 4), np.float32), n) for n in ("a", "b")]
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["c"], name="const_add"),
                           helper.make_node("Add", ["x", "c"], ["y"], name="add")], "foldable",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    assert len(he.explore(m).graph.nodes) == 1
    assert len(he.explore(m, fold_constants=False).graph.nodes) == 2


def test_model_explorer_files_never_land_beside_the_model(tmp_path, monkeypatch):
    from hetero_explore.ir.errors import ArgumentValueError
    models_dir = tmp_path / "theirs"
    models_dir.mkdir()
    onnx.save(scalar_input_model(), str(models_dir / "vad.onnx"))
    p = he.plan(he.load_model(str(models_dir / "vad.onnx")), ["gpu", "cpu"])
    monkeypatch.chdir(tmp_path)
    written = p.to_model_explorer()
    assert all(w.parent == Path("scalar_input_model_explorer") or w.parent.name == "scalar_input_model_explorer"
               for w in written)
    assert sorted(x.name for x in models_dir.iterdir()) == ["vad.onnx"]
    with pytest.raises(ArgumentValueError, match="folder"):
        p.to_model_explorer(models_dir / "vad.onnx")


def test_a_profiles_unchecked_conditions_are_said_on_the_node(capsys):
    from hetero_explore.viz.notes import placement_notes
    from hetero_explore.viz.views import main_table
    p = he.plan(he.load_model(DEMO, input_shapes={"image": (1, 3, 16, 16)}), ["qnn", "cpu"])
    notes = placement_notes(p)
    convs = [n.id for n in p.graph.nodes if n.op_type == "Conv"]
    assert convs and all(("", i) in notes for i in convs)
    assert "QNN" in notes[("", convs[0])] or "Qnn" in notes[("", convs[0])]
    df = main_table("Placement", p)
    assert df.loc[df["op_type"] == "Conv", "note"].str.contains("without checking").all()
    rc, out, _ = run_cli(capsys, "plan", DEMO, "--providers", "qnn,cpu", "--input-shape", "image=1,3,16,16")
    assert "without checking" in out


def test_a_control_flow_summary_counts_the_subgraphs_nodes():
    import control_models as cm
    p = he.plan(he.load_model(cm.loop_over_tensor(nested_if=True)), ["gpu", "cpu"])
    total = len(p.placement_df())
    m = re.search(r"(\d+) node\(s\) \(100\.0%\).*plus (\d+) node\(s\) in (\d+) control-flow subgraph", p.summary())
    assert m and int(m.group(1)) + int(m.group(2)) == total


# -- the app: providers of every family, live; honest timings; last round's leftovers -------------
@pytest.fixture
def app():
    pytest.importorskip("ipywidgets")
    from explorer_fixtures import cnn_model
    ex = he.explore(cnn_model(), providers=["gpu", "cpu"])
    a = ex.show()
    a.background_drawing = False
    yield a
    a.close()


def test_the_app_offers_every_provider_family_and_policy(app, monkeypatch):
    from hetero_explore import providers as P
    values = [v for _label, v in app.picker.add_pick.options]
    for name in ("nnapi", "coreml", "tensorrt", "qnn", "cuda"):
        assert name in values, name
    assert "gpu" not in values and "cpu" not in values              # already in the list
    policies = list(app.picker.policy.options)
    assert policies[:2] == ["priority", "min-transfer"]
    from hetero_explore.providers.ort import device_policies
    assert policies[2:] == list(device_policies())                 # ONNX Runtime's, after the placement ones
    assert "ort:cpu" in values                                     # the ort: family, from this machine's ORT
    monkeypatch.setitem(P.PROVIDERS, "ort:examplenpu", lambda: P.virtual_gpu("ort:examplenpu"))
    app.picker.refresh()
    assert "ort:examplenpu" in [v for _l, v in app.picker.add_pick.options]


def test_the_app_switches_profiles_lists_and_policies_live(app):
    ex = app.explorer
    v0 = app.plan_version
    app.picker.add_pick.value = "nnapi"
    app.picker.add_button.click()
    assert ex.provider_names == ["gpu", "nnapi", "cpu"] and app.plan_version == v0 + 1
    assert "nnapi" in [o[1] for o in app.order_select.options]
    app.picker.list_text.value = "coreml,cpu"
    app.picker.use_button.click()
    assert ex.provider_names == ["coreml", "cpu"] and ex.plan.providers[0].name == "coreml"
    assert "coreml" in app.deny_selects and "gpu" not in app.deny_selects
    app.picker.policy.value = "min-transfer"
    assert ex.policy == "min-transfer" and ex.plan.policy == "min-transfer"
    # ONNX Runtime's device policy: the devices it picks here become the list (on this CPU: its CPU EP)
    app.picker.policy.value = "PREFER_CPU"
    assert ex.policy == "PREFER_CPU" and ex.plan.policy == "priority" and ex.policy_note
    assert ex.provider_names[0].startswith("ort:") and ex.plan.providers[0].name == ex.provider_names[0]
    app.picker.list_text.value = "coreml,cpu"
    app.picker.use_button.click()
    assert ex.policy == "priority" and ex.provider_names == ["coreml", "cpu"]   # a list of one's own again
    app.order_select.value = "coreml"
    app.picker.remove_button.click()
    assert ex.provider_names == ["cpu"]


def test_the_progress_bar_resets_when_the_plan_changes(app):
    app.execute(wait=True)
    assert app.progress.bar_style == "success"
    app.explorer.deny("gpu", ["Relu"])
    app._replan()
    assert app.progress.bar_style == "" and app.progress.value == 0


def test_denied_ops_are_spelled_out_beside_the_list(app):
    app.explorer.deny("gpu", ["Softmax", "Add"])
    app._replan()
    assert "denies Add, Softmax" in app.deny_labels["gpu"].value
    assert "denies nothing" in app.deny_labels["cpu"].value


def test_the_export_button_is_not_cut_off(app):
    assert app.export_button.layout.width == "auto"


def test_the_run_tab_gives_warm_timings_with_the_first_run_apart(app):
    app.execute(wait=True)
    app.select("Run")
    html = app.views["Run"].value
    assert "warm runs timed" in html and "warm p90" in html and "first run (a new executor; not warm)" in html
    assert re.search(r"over \d+ runs", app.status), app.status


def test_a_one_partition_plan_on_the_default_providers_suggests_a_heterogeneous_what_if(capsys):
    from hetero_explore.data import sample_path
    rc, out, err = run_cli(capsys, "plan", sample_path("mobilenet"))
    assert rc == 0 and out.startswith("1 partition(s)")
    assert "--providers nnapi,cpu" in err
    rc, out, err = run_cli(capsys, "plan", sample_path("mobilenet"), "--providers", "nnapi,cpu")
    assert "note: every node" not in err and out.startswith("39 partition(s)")


def test_graphviz_find_knows_tensor_names():
    from onnx import TensorProto, helper
    from hetero_explore.viz.graph import find_in_svg
    nodes = [helper.make_node("Relu", ["x"], ["conv3_1"]), helper.make_node("Sigmoid", ["conv3_1"], ["y"])]
    g = helper.make_graph(nodes, "unnamed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])])
    p = he.plan(he.load_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])), ["cpu"])
    svg = p.to_graphviz(level="node").svg()
    hits = find_in_svg(svg, "conv3_1")
    assert len(hits) == 2                        # the node writing it and the node reading it


def test_report_headers_break_only_between_words():
    from hetero_explore.viz.html import header_html
    assert header_html("share_of_nodes") == "share_<wbr>of_<wbr>nodes"
    assert header_html("<b>") == "&lt;b&gt;"
    from hetero_explore.viz.report import _CSS
    th = next(line for line in _CSS.splitlines() if line.startswith("th {"))
    assert "overflow-wrap: normal" in th and "keep-all" in _CSS
