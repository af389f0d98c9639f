"""The scope view: exporter name scopes collapsed into boxes, expanded on demand (graph and app)."""

from __future__ import annotations

import os
import re
import shutil
import warnings
import xml.etree.ElementTree as ET

import pytest

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import hetero_explore as hx  # noqa: E402
from hetero_explore.data import models  # noqa: E402
from hetero_explore.viz import graph as G  # noqa: E402
from hetero_explore.viz.scopes import ScopeView, model_scopes, node_scope  # noqa: E402

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` is not installed")
SVG = "{http://www.w3.org/2000/svg}"
PER_LAYER = 33  # nodes per block of models.transformer


def scoped_transformer(layers: int, hostile: str = ""):
    """models.transformer with torch-style names: /encoder/layer.K/{attention,mlp}/Op_i."""
    m = models.transformer("tiny", layers=layers)
    for i, n in enumerate(m.graph.node):
        part = "attention" if i % PER_LAYER < 14 else "mlp"
        n.name = f"/encoder{hostile}/layer.{i // PER_LAYER}/{part}/{n.op_type}_{i}"
    return m


def test_node_scope():
    assert node_scope("/encoder/layer.0/attention/MatMul") == ("encoder", "layer.0", "attention")
    assert node_scope("/MatMul_3") == () and node_scope("matmul_0") == () and node_scope("") == ()
    assert node_scope("//a//b/x") == ("a", "b")


def _explorer(layers):
    ex = hx.explore(scoped_transformer(layers), providers=["gpu", "cpu"])
    ex.deny("gpu", ["Softmax"])
    return ex


def test_scopes_are_collapsed_to_a_few_boxes_and_expand_on_demand():
    ex = _explorer(8)
    plan = ex.plan
    assert model_scopes(ex.graph)[:3] == ["/encoder", "/encoder/layer.0", "/encoder/layer.0/attention"]
    v = ScopeView(plan)  # depth chosen: 16 attention/mlp boxes fit the limit
    assert v.depth == 3 and v.n_boxes == 16
    v1 = ScopeView(plan, depth=1)
    assert v1.n_boxes == 1
    # expanding one layer's scope (its parents open with it) shows its two blocks, the others stay whole
    v2 = ScopeView(plan, depth=2, expand=["/encoder/layer.3"])
    assert v2.n_boxes == 7 + 2
    # expanding a leaf scope shows its nodes
    v3 = ScopeView(plan, expand=["/encoder/layer.3/mlp"])
    assert v3.n_boxes == 15 + (PER_LAYER - 14)
    shown = {b for b in v3.box_of if b[0] == "n"}
    assert all(node_scope(ex.graph.nodes[i].name)[1:] == ("layer.3", "mlp") for _k, i in shown)


@needs_dot
def test_scope_view_draws_boxes_clusters_and_provider_stripes():
    plan = _explorer(3).plan
    d = plan.to_graphviz(level="scope", expand=["/encoder/layer.1/attention"])
    assert d.level == "scope"
    svg = d.svg()
    root = ET.fromstring(svg)
    titles = {g.find(f"{SVG}title").text: g for g in root.iter(f"{SVG}g") if g.get("class") in ("node", "cluster")}
    scope_boxes = [t for t in titles if re.fullmatch(r"s\d+", t)]
    assert len(scope_boxes) == 5  # 3 layers x 2 blocks, one open
    assert len([t for t in titles if re.fullmatch(r"n\d+", t)]) == 14  # the open attention block's nodes
    clusters = [t for t in titles if t.startswith("cluster_s")]
    assert len(clusters) == 5  # /encoder, the three layers, the open block
    # the mlp blocks hold the Softmax on cpu: drawn striped (several fills in one box)
    texts = "".join(svg.split())
    assert "▸19node(s)" in texts and "▸14node(s)" in texts
    # searchable by scope name, and by the names of nodes inside a collapsed scope
    assert G.find_in_svg(svg, "/encoder/layer.2/mlp")
    assert G.find_in_svg(svg, "/encoder/layer.2/mlp/Softmax")
    # the layered layout gives the same boxes
    d2 = plan.to_graphviz(level="scope", expand=["/encoder/layer.1/attention"], layout="layered")
    assert d2.layout == "layered" and d2.svg().count('class="node"') == svg.count('class="node"')


@needs_dot
@pytest.mark.parametrize("layout", ["dot", "layered"])
def test_hostile_scope_names_stay_inert(layout):
    hostile = '"]; x [label=pwned]; <script>alert(1)</script>\\N&amp;\n'
    ex = hx.explore(scoped_transformer(2, hostile=hostile), providers=["gpu", "cpu"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d = ex.plan.to_graphviz(level="scope", layout=layout, expand=[model_scopes(ex.graph)[1]])
    for line in d.source.splitlines():  # every id is synthetic
        m = re.match(r"\s*(\S+) \[", line)
        if m and not m.group(1) in ("graph", "node", "edge"):
            assert re.fullmatch(r"(n|s|in_|out_)\d+|legend", m.group(1)), line[:80]
    root = ET.fromstring(d.svg())
    assert not [e for e in root.iter() if e.tag.lower().endswith(("script", "foreignobject"))]
    texts = [t.text or "" for t in root.iter(f"{SVG}text")]
    assert any("<script>" in t for t in texts)  # shown literally


@needs_dot
def test_app_expands_and_collapses_scopes():
    ex = _explorer(3)
    app = ex.show()
    app.background_drawing = False
    assert app.scope_names[0] == "/encoder"
    app.level = "scope"
    html0 = app.views["Graph"].value
    assert "<svg" in html0 and "layer.1/attention" in html0
    n0 = html0.count('class="node"')
    app.scope_pick.value = "/encoder/layer.1/attention"
    app.expand_button.click()
    assert app.expand == ["/encoder/layer.1/attention"] and not app.action_error
    html1 = app.views["Graph"].value
    assert html1.count('class="node"') == n0 - 1 + 14
    app.collapse_scope("/encoder/layer.1")
    assert app.expand == [] and app.views["Graph"].value.count('class="node"') == n0
    app.scope_pick.value = "/nope"
    app.expand_button.click()
    assert "no node of this model is in scope '/nope'" in app.action_error
    app.close()
