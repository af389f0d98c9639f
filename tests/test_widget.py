"""The ipywidgets app, driven through its traits and controls; read through get_state().
No browser, no kernel."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

pytest.importorskip("ipywidgets")

import hetero_explore as hx  # noqa: E402
from hetero_explore.data import models  # noqa: E402
from explorer_fixtures import N_NODES, cnn_model  # noqa: E402
from hetero_explore.viz import widget as W  # noqa: E402


def _has_dot() -> bool:
    from hetero_explore.viz.graph import check_dot
    try:
        check_dot()
        return True
    except Exception:
        return False


needs_dot = pytest.mark.skipif(not _has_dot(), reason="Graphviz's dot is not installed")


@pytest.fixture
def ex():
    return hx.explore(cnn_model(), providers=["gpu", "cpu"])


@pytest.fixture
def app(ex):
    a = ex.show()
    yield a
    a.close()


def value(w) -> str:
    return w.get_state()["value"]


def view(app, name) -> str:
    app.select(name)
    return value(app.views[name])


# -- construction ------------------------------------------------------------------------------
def test_app_state_after_construction(app, ex):
    assert isinstance(app, W.ExplorerApp)
    st = app.get_state()
    # the configuration is the explorer's, read through the app (no copy in the app's traits)
    assert "order" not in st and "enabled" not in st and "denied" not in st
    assert app.order == ["gpu", "cpu"]
    assert app.enabled == {"gpu": True, "cpu": True}
    assert app.denied == {"gpu": [], "cpu": []}
    assert st["plan_version"] >= 1 and app.error == ""
    assert "hx-app" in st["_dom_classes"]
    sel = app.order_select.get_state()
    assert sel["_options_labels"] == ("1. gpu (gpu:0)", "2. cpu (cpu:0)")
    assert set(app.deny_selects) == {"gpu", "cpu"}
    assert app.deny_selects["gpu"].get_state()["_options_labels"] == tuple(ex.op_types)
    assert f"gpu: {N_NODES} node(s)" in value(app.summary_html)
    assert app.tabs.get_state()["titles"] == W.VIEWS
    assert "hx-execute" in app.execute_button.get_state()["_dom_classes"]
    assert not app.execute_button.get_state()["disabled"]


@needs_dot
def test_graph_tab_shows_the_plan_as_svg(app):
    html = value(app.views["Graph"])
    assert "hx-graph-caption" in html and "<svg" in html and "plan #0" in html


# -- reorder, enable, deny -------------------------------------------------------------------------
@needs_dot
def test_reorder_with_the_buttons_replans_and_redraws(app, ex):
    v0 = app.plan_version
    app.order_select.value = "cpu"
    app.up_button.click()
    assert app.order == ["cpu", "gpu"] and ex.provider_names == ["cpu", "gpu"]
    assert app.plan_version == v0 + 1
    assert app.order_select.get_state()["_options_labels"][0] == "1. cpu (cpu:0)"
    assert app.order_select.value == "cpu"  # the selection follows the moved provider
    graph = value(app.views["Graph"])
    assert "plan #1" in graph and f"{N_NODES} node(s), 1 partition(s)" in graph
    assert f"cpu: {N_NODES} node(s)" in value(app.summary_html) and "cpu: " not in graph  # the summary once
    assert "plan #1" in app.status
    app.up_button.click()  # already first: nothing happens
    assert app.order == ["cpu", "gpu"] and app.plan_version == v0 + 1
    app.down_button.click()
    assert app.order == ["gpu", "cpu"]


def test_moving_without_a_selection_says_so(app):
    app.order_select.value = None
    app.up_button.click()
    assert "select a provider" in app.status


def test_setting_the_order_trait_is_the_same_as_clicking(app, ex):
    app.order = ["cpu", "gpu"]
    assert ex.provider_names == ["cpu", "gpu"] and ex.plan.placement_counts()["cpu"] == N_NODES


def test_deny_an_op_from_the_app(app, ex):
    app.deny_selects["gpu"].value = ("GatherND",)
    assert app.denied["gpu"] == ["GatherND"] and ex.denied("gpu") == ("GatherND",)
    assert "2 partition(s)" in value(app.summary_html)
    assert "probs" in view(app, "Transfers")
    parts = view(app, "Partitions")
    assert parts.count("<tr>") == 3  # header + two partitions
    changes = view(app, "Changes")
    assert "watch_classes" in changes and "1 node(s) moved" in changes
    placement = view(app, "Placement")
    assert "GatherND denied by mask" in placement


def test_enable_toggle(app, ex):
    app.enable_boxes["gpu"].value = False
    assert app.enabled == {"gpu": False, "cpu": True} and not ex.is_enabled("gpu")
    assert "(off)" in app.order_select.get_state()["_options_labels"][0]
    assert f"cpu: {N_NODES} node(s)" in value(app.summary_html)


# -- errors are shown, never raised -----------------------------------------------------------------
def test_unsupported_op_is_shown_on_the_unplaced_lane_and_the_app_recovers(app, ex):
    app.deny_selects["gpu"].value = ("Conv",)
    app.deny_selects["cpu"].value = ("Conv",)
    assert app.error == ""                     # the model still opens: nothing refused
    assert "unplaced: " in value(app.summary_html)
    assert "unplaced" in view(app, "Placement") and "unplaceable" in value(app.summary_html) + view(app, "Placement") + view(app, "Partitions")
    assert not ex.plan.executable              # it cannot execute
    app.deny_selects["cpu"].value = ()
    assert app.error == "" and "unplaced" not in value(app.summary_html)
    assert not app.execute_button.disabled


def test_all_providers_disabled(app):
    app.enable_boxes["gpu"].value = False
    app.enable_boxes["cpu"].value = False
    assert "enable at least one provider" in value(app.error_html)
    app.enable_boxes["cpu"].value = True
    assert app.error == ""


def test_fail_closed_execution_is_shown():
    e = hx.explore(cnn_model(), providers=["gpu", "cpu"])
    e.deny("gpu", "Conv").deny("cpu", "Conv")        # Conv on the unplaced lane: execution fails closed
    a = e.show()
    a.execute_button.click()  # the run starts in a worker thread
    assert a.wait_for_run(60)
    assert "HeterogeneousExecutionUnsupported" in a.run_error
    assert "unplaceable" in value(a.error_html)
    assert a.progress.bar_style == "danger" and not a.busy
    assert "HeterogeneousExecutionUnsupported" in view(a, "Run")
    assert "blocker" in view(a, "Partitions").lower()


def test_graph_errors_are_shown_in_the_tab(app, ex, monkeypatch):
    from hetero_explore.viz.graph import GraphvizNotFoundError

    def no_dot(plan=None, level="auto"):
        raise GraphvizNotFoundError("Graphviz's `dot` executable was not found on PATH; install graphviz")
    monkeypatch.setattr(ex, "svg", no_dot)
    app.order = ["cpu", "gpu"]
    html = view(app, "Graph")
    assert "cannot draw the graph" in html and "install graphviz" in html


def test_a_raising_handler_never_kills_the_app(app, ex, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("kaboom")
    monkeypatch.setattr(ex, "order", boom)
    app.order = ["cpu", "gpu"]
    assert "kaboom" in app.action_error and "kaboom" in value(app.error_html)
    assert app.order == ["gpu", "cpu"]  # the controls went back to what the explorer holds
    monkeypatch.undo()
    app.order = ["cpu", "gpu"]  # the next action works and clears the message
    assert app.action_error == "" and "kaboom" not in value(app.error_html)
    assert ex.provider_names == ["cpu", "gpu"]


# -- execute, diff, run -----------------------------------------------------------------------------
def test_execute_fills_run_and_diff(app, ex):
    app.deny_selects["gpu"].value = ("GatherND",)
    assert "Not executed yet" in view(app, "Diff")
    app.execute_button.click()  # runs in a worker thread
    assert app.wait_for_run(120)
    assert app.run_error == "" and not app.busy
    p = app.progress.get_state()
    assert p["value"] == p["max"] == len(ex.plan.partitions) + 3 and p["bar_style"] == "success"
    diff = view(app, "Diff")
    assert "byte-identical" in diff and "hx-ok" in diff and "probs" in diff
    run = view(app, "Run")
    assert "1 transfer(s) performed (plan lists 1)" in run and "partition" in run
    assert "class=\"he-timeline\"" in run and run.count("he-step he-partition") == len(ex.plan.partitions)
    assert "byte-identical" in app.status
    # a new plan invalidates the shown run
    app.order = ["cpu", "gpu"]
    assert "Not executed yet" in view(app, "Diff")


def test_a_differing_output_is_shown_with_its_verdict():
    import pandas as pd
    diff = pd.DataFrame([{"output": "y", "byte_identical": False, "n_diff": 3, "max_ulp": 2},
                         {"output": "z", "byte_identical": True, "n_diff": 0, "max_ulp": 0}])
    ok, line = W.diff_verdict(diff, "cpu")
    assert ok is False and "1 of 2 output(s) differ" in line
    e = hx.explore(cnn_model(), providers=["gpu", "cpu"])
    s = W.ViewState(plan=e.plan, plan_is_current=True, plan_index=0, previous=None, run=None, diff=diff,
                    reference="cpu", error="", run_error="")
    html = W.render("Diff", s)
    assert "NOT byte-identical" in html and "hx-bad" in html


# -- scripted changes reach the app ----------------------------------------------------------------
def test_scripted_calls_update_the_app(app, ex):
    v = app.plan_version
    ex.order(["cpu"]).deny("gpu", "Relu").replan()
    assert app.order == ["cpu", "gpu"] and app.denied["gpu"] == ["Relu"]
    assert app.deny_selects["gpu"].value == ("Relu",)
    assert app.plan_version == v + 1
    ex.execute()
    assert "byte-identical" in view(app, "Diff")


# -- big graphs, levels, export ------------------------------------------------------------------------
@needs_dot
def test_big_graphs_ask_before_drawing(monkeypatch):
    monkeypatch.setattr(W, "MAX_DRAW", 400)
    e = hx.explore(models.chain("tiny", layers=250), providers=["gpu", "cpu"])  # 500 nodes
    a = e.show()
    a.level = "node"
    html = value(a.views["Graph"])
    assert "hx-graph-skipped" in html and "500 boxes" in html
    a.level = "partition"
    assert "<svg" in value(a.views["Graph"])
    a.level = "node"
    a.draw_big_box.value = True
    assert a.draw_big
    # laid out in the background: a placeholder first, then the picture
    assert "hx-graph-drawing" in value(a.views["Graph"]) and "500 boxes" in value(a.views["Graph"])
    assert a.wait_for_graph(timeout=120)
    assert "<svg" in value(a.views["Graph"])
    a.close()


@needs_dot
def test_background_drawing_can_be_turned_off():
    e = hx.explore(models.chain("tiny", layers=40), providers=["gpu", "cpu"])  # 80 nodes
    a = e.show()
    a.background_drawing = False
    a.level = "partition"
    a.level = "node"
    assert "<svg" in value(a.views["Graph"])


@needs_dot
def test_level_dropdown(app):
    app.level_dropdown.value = "partition"
    assert app.level == "partition" and "partition view" in value(app.views["Graph"])


def test_export_writes_and_offers_the_report(app, tmp_path):
    pytest.importorskip("hetero_explore.viz.report")
    app.execute_button.click()
    assert app.wait_for_run(120)
    app.export_path.value = str(tmp_path / "report.html")
    app.export_button.click()
    html = value(app.views["Export"])
    assert os.path.isfile(tmp_path / "report.html")
    assert "wrote" in html and "data:text/html;base64," in html and "download report.html" in html
    assert app.tabs.selected_index == W.VIEWS.index("Export")


def test_export_errors_are_shown(app, tmp_path):
    (tmp_path / "a_file").write_text("x")
    app.export_path.value = str(tmp_path / "a_file" / "r.html")  # a file where a folder must be
    app.export_button.click()
    assert "export failed" in value(app.views["Export"])


# -- the pure redraw function -------------------------------------------------------------------------
def test_render_is_pure_and_complete(ex):
    s = W.ViewState(plan=ex.plan, plan_is_current=True, plan_index=0, previous=None, run=None, diff=None,
                    reference="cpu", error="", run_error="", svg=lambda p, lvl: "<svg>stub</svg>")
    for v in W.VIEWS:
        assert W.render(v, s) == W.render(v, s)
    assert "<svg>stub</svg>" in W.render("Graph", s)
    assert "No earlier plan" in W.render("Changes", s)
    with pytest.raises(ValueError, match="unknown view"):
        W.render("Nope", s)
    none = W.ViewState(plan=None, plan_is_current=False, plan_index=None, previous=None, run=None,
                       diff=None, reference="cpu", error="PlanningError: x", run_error="")
    assert "No plan: PlanningError: x" in W.render("Placement", none)


def test_tables_escape_model_strings():
    import pandas as pd
    from hetero_explore.viz.html import table_html
    html = table_html(pd.DataFrame([{"name": "<script>alert(1)</script>", "d": {"a": 1}, "n": np.nan}]))
    assert "<script>" not in html and "&lt;script&gt;" in html and "a: 1" in html
    big = table_html(pd.DataFrame({"x": range(1000)}), max_rows=10)
    assert big.count("<tr>") == 11 and "showing the first 10 of 1,000 rows" in big


def test_only_the_visible_view_is_rendered(app):
    app.order = ["cpu", "gpu"]
    assert value(app.views["Placement"]) == ""  # not opened yet
    assert "cpu" in view(app, "Placement")


def test_redraw_all(app):
    app.redraw_all()
    assert all(value(app.views[v]) for v in W.VIEWS)


def test_odd_provider_names_get_safe_css_classes():
    from hetero_explore.providers import VirtualProvider, cpu
    npu = VirtualProvider("my npu!<x>", "npu:0", ops=["Conv", "Relu"], kernels=cpu("k"))
    e = hx.explore(cnn_model(), providers=[npu, "cpu"])
    a = e.show()
    classes = a.enable_boxes["my npu!<x>"].get_state()["_dom_classes"]
    assert "hx-enable-my_npu__x_" in classes
    assert a.order_select.get_state()["_options_labels"][0] == "1. my npu!<x> (npu:0)"  # text, not HTML
    assert "my npu!&lt;x&gt;" in value(a.deny_box.children[1].children[0])
    a.deny_selects["my npu!<x>"].value = ("Relu",)
    assert e.denied("my npu!<x>") == ("Relu",)


def test_providers_added_or_removed_by_a_script_get_controls(app, ex):
    from hetero_explore.providers import VirtualProvider, cpu
    ex.add_provider(VirtualProvider("npu", "npu:0", ops=["Conv"], kernels=cpu("k")), position=0).replan()
    assert app.order == ["npu", "gpu", "cpu"] and set(app.enable_boxes) == {"npu", "gpu", "cpu"}
    assert len(app.enable_box.children) == 4 and len(app.deny_box.children) == 4
    app.deny_selects["npu"].value = ("Conv",)
    assert ex.denied("npu") == ("Conv",) and ex.plan.placement_counts()["npu"] == 0
    ex.remove_provider("npu").replan()
    assert app.order == ["gpu", "cpu"] and set(app.deny_selects) == {"gpu", "cpu"}
    app.enable_boxes["gpu"].value = False
    assert app.error == "" and ex.plan.provider_names == ["cpu"]


# -- hostile input and leaks ---------------------------------------------------------------------
def _registry():
    from ipywidgets.widgets import widget as wmod
    reg = getattr(wmod, "_instances", None)
    return reg if reg is not None else W.widgets.Widget.widgets


def test_show_close_cycles_leave_no_widget_behind(ex):
    import gc
    a = ex.show()
    a.close()
    gc.collect()
    before = len(_registry())
    for i in range(5):
        a = ex.show()
        a.select("Graph")
        ex.disable("gpu") if i == 2 else ex.enable("gpu")  # controls rebuilt while the app lives
        a.close()
    gc.collect()
    assert len(_registry()) == before, f"{len(_registry()) - before} widget(s) left in ipywidgets' registry"


def test_every_view_escapes_hostile_names():
    from test_viz_graph import HOSTILE, hostile_model
    ex = hx.explore(hostile_model(), providers=[hx.VirtualProvider("gpu", "cuda:0", ops=["Relu"]),
                                                hx.VirtualProvider("cpu", "cpu:0", ops=["Relu", "Softmax"])])
    a = ex.show()
    a.background_drawing = False
    try:
        pages = {v: view(a, v) for v in W.VIEWS}
        pages["header"] = value(a.children[0])
        for where, page in pages.items():
            assert "<script>window" not in page and "<img src=x" not in page and "<b>html" not in page, where
            assert not re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", page), where
        assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in pages["Placement"]
        assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in pages["header"]
    finally:
        a.close()


# -- Execute runs off the main thread: progress, Cancel, re-planning meanwhile ----------------------
@pytest.fixture
def gated(monkeypatch):
    """Holds each run after its first partition until ``release`` is set (``started`` says it got there)."""
    import threading
    from hetero_explore.session import explorer as E
    started, release = threading.Event(), threading.Event()
    orig = E._WatchedPart.run

    def held(self, *a, **k):
        out = orig(self, *a, **k)
        if self.k == 0:
            started.set()
            release.wait(60)
        return out

    monkeypatch.setattr(E._WatchedPart, "run", held)
    yield started, release
    release.set()


def _live(ex):
    from hetero_explore.providers import unmask
    return [(unmask(p).live_allocations, unmask(p).live_bytes) for p in ex.providers.values()]


def test_execute_runs_in_a_worker_with_progress_and_cancel(app, ex, gated):
    started, release = gated
    ex.deny("gpu", ["Relu"]).replan()
    n = len(ex.plan.partitions)
    assert n > 2
    before = _live(ex)
    app.execute_button.click()
    assert started.wait(60), "the run never reached its first partition"
    # the click returned while the run is held: the app is live
    assert app.busy and app.execute_button.disabled and not app.cancel_button.disabled
    assert app.status == f"partition 1/{n} on gpu" and app.progress.value == 1 and app.progress.max == n + 3
    app.select("Placement")
    assert "node(s)" in value(app.views["Placement"])
    app.cancel_button.click()
    assert app.status.startswith("cancelling")
    release.set()
    assert app.wait_for_run(60)
    assert not app.busy and app.cancel_button.disabled and not app.execute_button.disabled
    assert app.status.startswith(f"cancelled: the run was cancelled after partition 1/{n} on gpu, before "
                                 f"partition 2/{n}")
    assert app.progress.bar_style == "warning" and app.run_error == ""
    assert ex.run is None and ex.current.run is None
    assert "Not executed yet" in view(app, "Run")
    assert _live(ex) == before  # nothing leaked
    app.execute()  # and the next run goes through
    assert ex.byte_identical is True and "byte-identical" in app.status


def test_replanning_while_a_run_executes_keeps_the_runs_own_plan(app, ex, gated):
    started, release = gated
    ex.deny("gpu", ["Relu"]).replan()
    first = ex.current
    app.execute_button.click()
    assert started.wait(60)
    v = app.plan_version
    app.order = ["cpu", "gpu"]  # re-plan while the run is held after its first partition
    assert app.plan_version == v + 1 and ex.current is not first
    assert app.status.startswith(f"plan #{ex.current.index} in")
    assert "Not executed yet" in view(app, "Run")
    release.set()
    assert app.wait_for_run(60)
    assert app.run_error == ""
    # the run finished on the plan it started with, recorded on its own step
    assert first.run is not None and first.run.plan is first.plan
    assert bool(first.diff["byte_identical"].all())
    assert ex.run is None and ex.diff is None and ex.current.run is None
    assert "configuration changed meanwhile" in app.status
    assert "Not executed yet" in view(app, "Run") and not app.execute_button.disabled
    app.execute()
    assert ex.current.run is not None and ex.byte_identical is True


def test_cancel_with_nothing_running_says_so(app):
    app.cancel()
    assert app.status == "nothing is running" and app.cancel_button.disabled


# -- tables: filter, sort, pages beyond MAX_ROWS ---------------------------------------------------
def test_tables_are_paged_sorted_and_filtered():
    import re
    e = hx.explore(models.chain("tiny", layers=250), providers=["gpu", "cpu"])  # 500 nodes
    a = e.show()
    a.background_drawing = False
    try:
        a.select("Placement")

        def shown():
            v = value(a.views["Placement"])
            return (re.search(r"hx-table-page'>(.*?)</div>", v).group(1),
                    re.findall(r"<tr><td[^>]*>[^<]*</td><td[^>]*>([^<]*)</td>", v))

        note, names = shown()
        assert note == "nodes 1–300 of 500; page 1 of 2" and len(names) == 300
        assert names[:2] == [e.graph.nodes[0].name, e.graph.nodes[1].name]
        c = a.table_controls["Placement"]
        c["next"].click()
        note, names = shown()
        assert note == "nodes 301–500 of 500; page 2 of 2" and len(names) == 200
        c["next"].click()  # no page 3
        assert a.tables["Placement"]["page"] == 1
        assert ("name", "name") in c["sort"].options
        c["sort"].value = "name"  # back to page 1, sorted
        c["descending"].value = True
        note, names = shown()
        everything = sorted((n.name for n in e.graph.nodes), key=str.lower, reverse=True)
        assert note.startswith("nodes 1–300 of 500, sorted by <code>name</code> descending")
        assert names == everything[:300]
        c["query"].value = "ADD"  # case-insensitive, over every shown cell
        note, names = shown()
        adds = [n for n in everything if "add" in n.lower()]
        assert note.startswith(f"nodes 1–{len(adds)} of {len(adds)} matching <code>ADD</code> (of 500)")
        assert names == adds
        c["query"].value = "no such node"
        assert "(no nodes matching" in value(a.views["Placement"])
        # the options survive a re-plan; the sort menu keeps its choice
        e.deny("gpu", "Relu").replan()
        assert c["sort"].value == "name" and a.tables["Placement"]["query"] == "no such node"
    finally:
        a.close()


def test_table_page_sorts_mixed_columns_by_their_text():
    import pandas as pd
    df = pd.DataFrame({"k": ["b", None, "A", ["x"]], "n": [3, 1, 2, 0]})
    rows, m, page, pages = W.table_page(df, W.TableOptions(sort="k"))
    assert list(rows["n"]) == [1, 2, 3, 0] and (m, page, pages) == (4, 0, 1)  # '' < 'a' < 'b' < 'x'
    rows, *_ = W.table_page(df, W.TableOptions(sort="n", descending=True))
    assert list(rows["n"]) == [3, 2, 1, 0]
    rows, m, page, pages = W.table_page(df, W.TableOptions(page=9), page_rows=3)
    assert (m, page, pages) == (4, 1, 2) and list(rows["n"]) == [0]


@needs_dot
def test_find_a_node_in_the_graph_and_zoom(app, ex):
    import re
    app.level = "node"
    app.select("Graph")
    app.wait_for_graph()
    full = view(app, "Graph")
    assert "hx-found" not in full
    app.find_box.value = "relu2"
    g = view(app, "Graph")
    assert "1 match(es); showing the first, outlined in red" in g
    found = re.search(r'<g id="node\d+" class="node hx-found">(.*?)</g>\s*</g>', g, re.S).group(1)
    assert ">relu2</text>" in found
    # the view is cut around the node: its box lies inside the new viewBox
    x0, y0, w, h = map(float, re.search(r'<svg width="[\d.]+pt" height="[\d.]+pt"\s+viewBox="([-\d. ]+)"',
                                        g).group(1).split())
    from hetero_explore.viz.graph import find_in_svg
    (_at, (bx, by, bw, bh)), = find_in_svg(full[full.index("<svg"):], "relu2")
    assert x0 < bx and bx + bw < x0 + w and y0 < by and by + bh < y0 + h and h < 1000
    app.find_box.value = "no such node"
    assert "nothing matches" in view(app, "Graph")
    app.find_box.value = ""
    app.zoom_dropdown.value = "fit"
    assert '<svg width="100%"' in view(app, "Graph")
    app.zoom_dropdown.value = "50%"
    w100 = float(re.search(r'<svg width="([\d.]+)pt"', full).group(1))
    w50 = float(re.search(r'<svg width="([\d.]+)pt"', view(app, "Graph")).group(1))
    assert abs(w50 - w100 / 2) < 0.02
