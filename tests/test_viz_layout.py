"""The linear-time layered layout (viz/layout.py) and the big node views drawn with it."""

from __future__ import annotations

import re
import shutil
import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import hetero_explore as he
from hetero_explore.providers import VirtualProvider
from hetero_explore.viz import graph as G
from hetero_explore.viz import layout as L

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` is not installed")
SVG = "{http://www.w3.org/2000/svg}"


def _overlap(a: L.Box, b: L.Box) -> bool:
    return a.x < b.x + b.w and b.x < a.x + a.w and a.y < b.y + b.h and b.y < a.y + a.h


def _inside(a: L.Box, g: L.Box) -> bool:
    return g.x <= a.x and g.y <= a.y and a.x + a.w <= g.x + g.w + 1e-6 and a.y + a.h <= g.y + g.h + 1e-6


def test_nested_layout_ranks_edges_and_never_overlaps():
    rng = np.random.default_rng(0)
    # 60 leaves in 6 groups of 10 (a chain with skips), plus two root-level leaves
    leaves = [L.Box(f"n{i}", w=float(rng.integers(40, 160)), h=22.0, order=float(i)) for i in range(60)]
    grp = [L.Box(f"g{k}", children=leaves[10 * k:10 * k + 10]) for k in range(6)]
    top = L.Box("in", w=60, h=30, order=-1.0)
    bottom = L.Box("out", w=60, h=30, order=99.0)
    root = L.Box("root", children=[bottom, *grp, top], label_h=0.0)
    edges = [("in", "n0")] + [(f"n{i}", f"n{i + 1}") for i in range(59)] + \
            [(f"n{i}", f"n{i + 3}") for i in range(0, 57, 4)] + [("n59", "out")]
    L.layout(root, edges)
    boxes = {b.key: b for b in L.leaves(root)}
    for a, b in edges:  # every edge points down (the chain's order is kept)
        assert boxes[a].y + boxes[a].h <= boxes[b].y, (a, b)
    for g in grp:  # leaves lie inside their group, groups and leaves never overlap
        for c in g.children:
            assert _inside(c, g)
        kids = g.children
        assert not any(_overlap(x, y) for i, x in enumerate(kids) for y in kids[i + 1:])
    tops = [top, *grp, bottom]
    assert not any(_overlap(x, y) for i, x in enumerate(tops) for y in tops[i + 1:])
    # a cycle among lifted groups (g1 -> g0 through a late leaf) only skips ranking
    L.layout(root, edges + [("n15", "n2")])


def test_parallel_branches_sit_side_by_side():
    a, b, c, d = (L.Box(k, w=50, h=20, order=float(i)) for i, k in enumerate("abcd"))
    root = L.Box("root", children=[a, b, c, d], label_h=0.0)
    L.layout(root, [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    assert b.y == c.y and not _overlap(b, c)
    assert a.y < b.y < d.y


def _big_model(n: int):
    """A residual chain of Relu / Add with a Softmax (second provider only) every 40 nodes."""
    nodes, prev, skip = [], "x", "x"
    for i in range(n):
        out = f"v{i}"
        if i % 40 == 39:
            nodes.append(helper.make_node("Softmax", [prev], [out], name=f"/block{i // 40}/softmax"))
        elif i % 3 == 2:
            nodes.append(helper.make_node("Add", [prev, skip], [out], name=f"/block{i // 40}/add_{i}"))
            skip = out
        else:
            nodes.append(helper.make_node("Relu", [prev], [out], name=f"/block{i // 40}/relu_{i}"))
        prev = out
    g = helper.make_graph(nodes, f"chain{n}", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [2, 4])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _providers():
    return [VirtualProvider("gpu", "cuda:0", ops=["Relu", "Add"]),
            VirtualProvider("cpu", "cpu:0", ops=["Relu", "Add", "Softmax"])]


def _points(el):
    shape = next(e for e in el.iter() if e.tag in (f"{SVG}polygon", f"{SVG}path"))
    text = shape.get("points") if shape.tag == f"{SVG}polygon" else shape.get("d")
    nums = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", text)]
    xs, ys = nums[0::2], nums[1::2]
    return min(xs), min(ys), max(xs), max(ys)


@needs_dot
def test_a_2000_node_view_is_laid_out_in_linear_time():
    p = he.plan(he.load_model(_big_model(2000)), _providers())
    assert len(p.partitions) == 100
    t0 = time.perf_counter()
    d = p.to_graphviz(level="node")
    svg = d.svg()
    elapsed = time.perf_counter() - t0
    assert d.level == "node" and d.layout == "layered" and "layout=nop2" in d.source
    # generous (a loaded test machine): guards against dot's layout, which took 5-25 s at this size
    assert elapsed < 30, f"2,000-node view took {elapsed:.1f}s"
    root = ET.fromstring(svg)
    boxes, clusters = {}, {}
    for g in root.iter(f"{SVG}g"):
        title = g.find(f"{SVG}title")
        if title is None:
            continue
        if g.get("class") == "node" and re.fullmatch(r"n\d+", title.text):
            boxes[int(title.text[1:])] = _points(g)
        elif g.get("class") == "cluster":
            clusters[int(title.text[len("cluster_p"):])] = _points(g)
    assert len(boxes) == 2000 and len(clusters) == 100
    for part in p.partitions:  # every node is drawn inside its partition's box
        cx0, cy0, cx1, cy1 = clusters[part.id]
        for nid in part.node_ids:
            x0, y0, x1, y1 = boxes[nid]
            assert cx0 <= x0 and cy0 <= y0 and x1 <= cx1 and y1 <= cy1, (nid, part.id)
    # a node's box and the next node's never overlap; the chain goes down the page
    for i in range(1999):
        assert boxes[i][3] <= boxes[i + 1][1], i
    # the picture is still searchable by node name
    assert G.find_in_svg(svg, "/block7/softmax")


def test_which_node_views_are_layered(monkeypatch):
    p = he.plan(he.load_model(_big_model(60)), _providers())
    assert p.to_graphviz(level="node").layout == "dot"  # small: dot
    assert p.to_graphviz(level="node", layout="layered").layout == "layered"
    monkeypatch.setattr(G, "DOT_NODE_LIMIT", 10)
    assert p.to_graphviz(level="node").layout == "layered"
    assert p.to_graphviz(level="node", show_initializers=True).layout == "dot"
    assert p.to_graphviz(level="node", layout="dot").layout == "dot"


def test_wrap_cuts_a_deep_chain_into_columns_that_never_overlap():
    boxes = [L.Box(f"n{i}", w=float(60 + 40 * (i % 3)), h=24.0, order=float(i)) for i in range(400)]
    side = [L.Box(f"s{i}", w=50.0, h=24.0, order=float(i) + 0.5) for i in range(0, 400, 50)]
    root = L.Box("root", children=boxes + side, label_h=0.0)
    edges = [(f"n{i}", f"n{i + 1}") for i in range(399)] + [(f"n{i}", f"s{i}") for i in range(0, 400, 50)]
    L.layout(root, edges)
    tall = root.h
    assert tall > 10_000 and len(root.rows) == 400
    k = L.wrap(root, 1.5)
    assert k > 2 and root.h <= 1.5 * root.w and root.h < tall / (k - 1)
    every = boxes + side
    for b in every:  # inside the root's box
        assert 0 <= b.x and b.x + b.w <= root.w + 1e-6 and 0 <= b.y and b.y + b.h <= root.h + 1e-6
    srt = sorted(every, key=lambda b: b.x)
    for i, a in enumerate(srt):
        for b in srt[i + 1:]:
            if b.x >= a.x + a.w:
                break
            assert not _overlap(a, b), (a.key, b.key)
    col = root.w / k
    for a, b in zip(boxes, boxes[1:]):  # down a column, or on to the top of the next column
        same = int(a.x // col) == int(b.x // col)
        assert (same and a.y + a.h <= b.y) or (not same and int(b.x // col) == int(a.x // col) + 1 and b.y < a.y)
    for s in side:  # a side branch stays in its layer's column, beside it
        n = boxes[int(s.key[1:]) + 1]
        assert int(s.x // col) == int(n.x // col) and abs(s.y - n.y) < 1e-6
    # a short or wide picture is left alone
    small = L.Box("root", children=[L.Box("a", w=50, h=20, order=0.0), L.Box("b", w=50, h=20, order=1.0)],
                  label_h=0.0)
    L.layout(small, [("a", "b")])
    before = [(b.x, b.y) for b in small.children]
    assert L.wrap(small, 1.5) == 1 and [(b.x, b.y) for b in small.children] == before
