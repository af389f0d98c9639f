"""One state, one set of views: a view registered once is a tab of the app and a section of the
report; the app's controls write to the explorer and follow it (no copy of its state)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("ipywidgets")

import hetero_explore as hx  # noqa: E402
import hetero_explore.ir.errors  # noqa: E402,F401  (hx.ir.errors below)
import hetero_explore.session.explorer  # noqa: E402,F401
from explorer_fixtures import cnn_model  # noqa: E402
from hetero_explore.viz import views as V  # noqa: E402

VIZ = Path(hx.__file__).parent / "viz"


@pytest.fixture
def ex():
    return hx.explore(cnn_model(), providers=["gpu", "cpu"])


@pytest.fixture
def app(ex):
    a = ex.show()
    a.background_drawing = False
    yield a
    a.close()


def value(w) -> str:
    return w.get_state()["value"]


@pytest.fixture
def extra_views():
    """Two views registered for the test (one needs a run), removed after it."""
    @V.register("Probe", "A probe view", section="probe")
    def _probe(s):
        return f"<p class='probe'>{len(s.plan.partitions)} partition(s) on {V.esc(s.medium)}</p>"

    @V.register("RunProbe", "A run probe", needs_run=True)
    def _run_probe(s):
        return f"<p class='run-probe'>ran: {s.run is not None}</p>"

    yield
    V.unregister("Probe")
    V.unregister("RunProbe")


# -- the registry feeds both ------------------------------------------------------------------------
def test_every_registered_view_is_a_tab_and_a_report_section(ex):
    a = ex.show()
    try:
        assert a.view_names[:-1] == V.view_names() and a.view_names[-1] == "Export"
        assert tuple(a.tabs.get_state()["titles"]) == a.view_names
    finally:
        a.close()
    page = ex.plan.to_html()
    for v in V.registered():
        if not v.needs_run:
            assert f'<section id="sec-{v.section}"><h2>{v.title}</h2>' in page, v.name
    ex.execute()
    page = ex.plan.to_html(run=ex.run, diff=ex.diff)
    for v in V.registered():
        assert f'<section id="sec-{v.section}"><h2>{v.title}</h2>' in page, v.name


def test_a_view_registered_once_appears_in_the_app_and_the_report(ex, extra_views):
    a = ex.show()
    try:
        assert "Probe" in a.tabs.get_state()["titles"] and "RunProbe" in a.tabs.get_state()["titles"]
        a.select("Probe")
        assert "partition(s) on app" in value(a.views["Probe"])
        a.select("RunProbe")
        assert "ran: False" in value(a.views["RunProbe"])
    finally:
        a.close()
    page = ex.plan.to_html()
    assert '<section id="sec-probe"><h2>A probe view</h2>' in page and "partition(s) on report" in page
    assert 'href="#sec-probe"' in page
    assert "run-probe" not in page  # needs a run: left out of a plan-only report
    ex.execute()
    page = ex.plan.to_html(run=ex.run, diff=ex.diff)
    assert '<section id="sec-runprobe"><h2>A run probe</h2>' in page and "ran: True" in page


def test_a_view_name_is_registered_once(extra_views):
    with pytest.raises(ValueError, match="registered already"):
        V.register("Probe")(lambda s: "")


def test_export_from_the_explorer_follows_its_view_options(ex, tmp_path):
    ex.replan()
    ex.set_view(level="partition")
    ex.deny("gpu", "GatherND").replan()
    out = Path(ex.export_html(tmp_path / "r.html")).read_text(encoding="utf-8")
    assert "partition view:" in out
    assert "1 node(s) moved" in out  # the Changes section compares with the explorer's previous plan


# -- the explorer is the only state -------------------------------------------------------------------
def test_the_app_holds_no_copy_of_the_explorers_state(app):
    mirrored = {"order", "enabled", "denied", "error", "level", "expand", "find", "zoom", "draw_big", "tables"}
    assert not mirrored & set(app.trait_names())
    assert not [k for k in vars(app) if "syncing" in k]


def test_controls_write_to_the_explorer(app, ex):
    app.enable_boxes["gpu"].value = False
    assert not ex.is_enabled("gpu") and ex.plan.provider_names == ["cpu"]
    app.enable_boxes["gpu"].value = True
    app.deny_selects["gpu"].value = ("Relu",)
    assert ex.denied("gpu") == ("Relu",)
    app.level_dropdown.value = "partition"
    assert ex.view_options.level == "partition"
    app.zoom_dropdown.value = "50%"
    app.find_box.value = "relu"
    app.draw_big_box.value = True
    assert (ex.view_options.zoom, ex.view_options.find, ex.view_options.draw_big) == ("50%", "relu", True)
    c = app.table_controls["Placement"]
    app.select("Placement")
    c["query"].value = "conv"
    c["sort"].value = "name"
    c["descending"].value = True
    assert ex.view_options.table("Placement") == hx.session.explorer.TableOptions(query="conv", sort="name",
                                                                          descending=True, page=0)


def test_the_explorer_drives_the_controls(app, ex):
    v = app.plan_version
    ex.disable("gpu").deny("cpu", ["Relu"]).replan()
    assert app.plan_version == v + 1
    assert app.enable_boxes["gpu"].value is False and app.deny_selects["cpu"].value == ("Relu",)
    assert "(off)" in app.order_select.get_state()["_options_labels"][0]
    ex.set_view(level="node", zoom="fit", find="relu2")
    assert (app.level_dropdown.value, app.zoom_dropdown.value, app.find_box.value) == ("node", "fit", "relu2")
    assert app.level == "node" and app.find == "relu2"
    app.select("Placement")
    ex.set_table("Placement", query="gather", sort="op_type")
    c = app.table_controls["Placement"]
    assert c["query"].value == "gather" and c["sort"].value == "op_type"
    assert "matching <code>gather</code>" in value(app.views["Placement"])


def test_following_the_explorer_writes_nothing_back(app, ex, monkeypatch):
    """A control set from the explorer's state calls none of the explorer's setters."""
    calls = []
    for name in ("order", "enable", "disable", "set_denied", "set_view", "set_table"):
        orig = getattr(ex, name)
        monkeypatch.setattr(ex, name, lambda *a, _o=orig, _n=name, **k: (calls.append(_n), _o(*a, **k))[1])
    ex._view = hx.session.explorer.ViewOptions(level="partition", find="x",
                                      tables=(("Placement", hx.session.explorer.TableOptions(sort="name", page=1)),))
    ex._enabled["gpu"] = False
    ex._denied["cpu"] = frozenset({"Relu"})
    ex.replan()
    app.select("Placement")
    assert calls == []
    assert app.level_dropdown.value == "partition" and app.table_controls["Placement"]["sort"].value == "name"
    assert ex.view_options.table("Placement").page == 1  # the sort menu's rebuild did not reset the page


def test_the_apps_setters_write_to_the_explorer(app, ex):
    app.order = ["cpu", "gpu"]
    app.enabled = {"gpu": False}
    app.denied = {"cpu": ["Relu"]}
    app.level = "partition"
    app.tables = {"Transfers": {"sort": "bytes", "descending": True}}
    assert ex.provider_names == ["cpu", "gpu"] and not ex.is_enabled("gpu") and ex.denied("cpu") == ("Relu",)
    assert ex.view_options.level == "partition"
    assert ex.view_options.table("Transfers") == hx.session.explorer.TableOptions(sort="bytes", descending=True)
    assert ex.plan.provider_names == ["cpu", "unplaced"]  # Relu: denied on the only enabled provider


def test_two_apps_on_one_explorer_show_the_same_state(ex):
    a, b = ex.show(), ex.show(keep_previous=True)
    try:
        a.level_dropdown.value = "partition"
        assert b.level_dropdown.value == "partition"
        b.deny_selects["gpu"].value = ("Relu",)
        assert a.deny_selects["gpu"].value == ("Relu",) and a.denied["gpu"] == ["Relu"]
        c = ex.show(keep_previous=True)  # a new app opens on the same state
        assert c.level_dropdown.value == "partition" and c.deny_selects["gpu"].value == ("Relu",)
        c.close()
        d = ex.show()  # without keep_previous: the apps shown before are closed
        assert a.explorer_closed and b.explorer_closed and d.level_dropdown.value == "partition"
        d.close()
    finally:
        a.close()
        b.close()


def test_ops_denied_by_a_script_outside_the_menu_survive_a_menu_change(app, ex):
    ex.deny("gpu", ["NoSuchOp"]).replan()  # not in the model: not in the menu
    app.deny_selects["gpu"].value = ("Relu",)
    assert ex.denied("gpu") == ("NoSuchOp", "Relu")


def test_view_options_are_checked(ex):
    with pytest.raises(hx.ir.errors.ArgumentValueError, match="levels are"):
        ex.set_view(level="nodes")
    with pytest.raises(hx.ir.errors.ArgumentValueError, match="percentage"):
        ex.set_view(zoom="big")
    with pytest.raises(hx.ir.errors.ArgumentValueError, match="no view option"):
        ex.set_view(colour="red")


# -- one escaper, one table renderer -------------------------------------------------------------------
def test_one_escaper_and_one_table_renderer_under_viz():
    for f in VIZ.glob("*.py"):
        if f.name == "html.py":
            continue
        text = f.read_text(encoding="utf-8")
        assert "html.escape(" not in text, f"{f.name} escapes HTML itself: use viz.html.esc"
        assert not re.search(r"^def _(e|esc|cell|table)\(", text, re.M), f"{f.name} has its own escaper/table"
        assert "<table class=\"data" not in text or f.name == "views.py", f.name


def test_the_table_renderer_formats_units_in_one_place():
    import pandas as pd
    from hetero_explore.viz.html import table_html
    html = table_html(pd.DataFrame([{"bytes": 16.0, "seconds": 6.1522e-05, "n": None, "ok": True}]))
    assert ">16 B<" in html and ">61.5 µs<" in html and ">—<" in html and "✓ True" in html
    assert "6.1522e-05" not in html.replace('data-sort="6.1522e-05"', "")
