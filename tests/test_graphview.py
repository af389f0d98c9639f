"""The interactive graph's data and hosts, without a browser (test_graph_browser.py drives it in
Chromium): scopes from names or from the graph's structure, the JSON the front end reads, the
report's embedding and the app's widget."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

import hetero_explore as he
from hetero_explore.data import models
from hetero_explore.viz import graphdata as GD
from hetero_explore.viz import graphview as GV


def residual_model(blocks: int):
    """A ResNet-style chain with ONNX-default-like names (no scopes): 5 nodes per block once loaded."""
    return models.cnn("tiny", blocks=blocks, width=2, image=4, channels=1, classes=2)


@pytest.fixture(scope="module")
def big_plan():
    g = he.load_model(residual_model(120))          # 606 nodes
    return he.plan(g, [he.mask(he.providers.resolve("gpu"), deny=["Add"]), "cpu"])


def _items(scopes, node_scope):
    kids = Counter(p for p, *_ in scopes)
    kids.update(node_scope)
    return kids


def test_structure_scopes_cover_every_node_and_keep_each_scope_small(big_plan):
    g = big_plan.graph
    scopes, node_scope = GD.scope_tree(g)
    assert len(node_scope) == len(g.nodes) and all(s < len(scopes) for s in node_scope)
    per = _items(scopes, node_scope)
    assert per[-1] <= GD.TOP_ITEMS
    assert all(per[s] <= GD.MAX_CHILDREN for s in range(len(scopes)))
    assert all(kind == "block" for *_x, kind in scopes)
    for s, (parent, *_rest) in enumerate(scopes):   # a tree: every chain of parents ends at the top
        seen = set()
        while s != -1:
            assert s not in seen
            seen.add(s)
            s = scopes[s][0]


def test_blocks_are_cut_where_the_graph_is_narrow(big_plan):
    g = big_plan.graph
    scopes, node_scope = GD.scope_tree(g)
    cut = GD.cut_widths(g)
    top = [s for s, sc in enumerate(scopes) if sc[0] == -1]
    firsts = []
    for s in top:
        members = [n for n in range(len(g.nodes)) if _under(scopes, node_scope[n], s)]
        firsts.append(min(members))
    # every top-level block after the first starts where one value crosses (a residual block's output)
    assert [cut[f] for f in sorted(firsts)[1:]] == [1] * (len(firsts) - 1)


def _under(scopes, s, top):
    while s != -1:
        if s == top:
            return True
        s = scopes[s][0]
    return False


def test_name_scopes_come_from_the_exporters_names():
    m = models.transformer("tiny", layers=3)
    g = he.load_model(m)
    from hetero_explore.viz.scopes import has_scopes
    scopes, node_scope = GD.scope_tree(g)
    if has_scopes(g):
        assert any(kind == "name" for *_x, kind in scopes)
    assert len(node_scope) == len(g.nodes)


def test_graph_data_is_json_and_lists_every_tensor_name(big_plan):
    d = GD.graph_data(big_plan.graph)
    text = json.dumps(d)
    assert json.loads(text)["v"] == GD.VERSION
    names = {v[0] for v in d["values"]}
    for n in big_plan.graph.nodes:
        assert set(x for x in n.inputs + n.outputs if x) <= names
    p = GD.placement_data(big_plan, 3)
    assert len(p["node_provider"]) == len(big_plan.graph.nodes)
    assert p["providers"][0][0] == "gpu" and p["plan"] == 3


def test_the_report_embeds_the_view_offline_and_pins_its_script(big_plan):
    page = big_plan.to_html()
    assert 'class="hxg-mount"' in page and "hxg-elk" in page
    import html
    csp = html.unescape(re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1))
    assert "worker-src blob:" in csp and csp.count("'sha256-") == 2 and "default-src 'none'" in csp
    # no script is fetched: every <script> is inline (data blocks, the ELK source, two pinned scripts)
    assert not re.search(r"<script[^>]*\bsrc=", page)
    # model strings reach the page only inside JSON data blocks, with every "<" escaped
    for block in re.findall(r'<script type="application/json" id="[^"]+">(.*?)</script>', page, flags=re.S):
        assert "<" not in block
        json.loads(block)


def test_a_small_model_keeps_the_graphviz_picture():
    p = he.plan(he.load_model(models.cnn("tiny")), ["gpu", "cpu"])
    assert not GV.wants_interactive(p)
    assert 'class="hxg-mount"' not in p.to_html()


def test_hostile_names_stay_text_in_the_data_blocks():
    from onnx import TensorProto, helper
    evil = '</script><script>alert(1)</script><!--'
    nodes = [helper.make_node("Relu", ["x"], [evil], name=evil)]
    prev = evil
    for i in range(GV.INTERACTIVE_MIN_NODES + 1):
        nodes.append(helper.make_node("Relu", [prev], [f"t{i}"], name=f"r{i}"))
        prev = f"t{i}"
    g = helper.make_graph(nodes, evil, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, 2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    page = he.plan(he.load_model(m), ["gpu", "cpu"]).to_html()
    assert "<script>alert(1)" not in page
    assert page.count("<script") == page.count("</script>")


def test_the_app_shows_the_interactive_view_for_a_big_model_and_recolours_on_replan(big_plan):
    pytest.importorskip("anywidget")
    ex = he.explore(residual_model(120), providers=["gpu", "cpu"])
    app = ex.show()
    try:
        app.background_drawing = False
        app.select("Graph")
        app._redraw()
        gv = app.graph_view
        assert gv is not None and list(app.graph_box.children) == [gv]
        assert len(gv.graph["nodes"]) == len(ex.graph.nodes) and "hx-graph-interactive" in app.views["Graph"].value
        sent = []
        gv.observe(lambda ch: sent.append(ch["name"]), names=["graph", "placement"])
        ex.deny("gpu", ["Relu"])
        app._replan()
        assert sent == ["placement"], "a re-plan sends the placement only: no new layout"
        assert gv.placement["plan"] == ex.current.index
        gv.query = "relu_17"                      # typed in the browser: the explorer's find follows
        assert ex.view_options.find == "relu_17"
        app.level_dropdown.value = "partition"   # a Graphviz level: the interactive view goes away
        assert list(app.graph_box.children) == []
    finally:
        app.close()
