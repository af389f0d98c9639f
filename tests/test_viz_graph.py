"""The plan DAG as DOT: colours, clusters, labels, levels, layouts, escaping, hostile names."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import warnings
import xml.etree.ElementTree as ET
import zlib

import graphviz
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import hetero_explore as he
from hetero_explore.providers import VirtualProvider, mask
from hetero_explore.viz import colors as C
from hetero_explore.viz import graph as G
from hetero_explore.viz.graph import GraphvizNotFoundError, dot_text

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` is not installed")
SVG = "{http://www.w3.org/2000/svg}"
XLINK = "{http://www.w3.org/1999/xlink}"
SYNTHETIC_ID = re.compile(r"^(n\d+|p\d+|in_\d+|out_\d+|init_\d+|legend)$")


# -- models ------------------------------------------------------------------------------
def tiny_model():
    """X → MatMul(W) → Relu → Softmax (cpu only) → Add(·, relu) → Y."""
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "W")
    nodes = [helper.make_node("MatMul", ["X", "W"], ["a"], name="mm"),
             helper.make_node("Relu", ["a"], ["b"], name="relu"),
             helper.make_node("Softmax", ["b"], ["c"], name="soft"),
             helper.make_node("Add", ["c", "b"], ["Y"], name="add")]
    g = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 4])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def two_providers():
    return [VirtualProvider("gpu", "cuda:0", ops=["MatMul", "Relu", "Add"]),
            VirtualProvider("cpu", "cpu:0", ops=["MatMul", "Relu", "Add", "Softmax"])]


#: Names that attack HTML, XML, DOT and Graphviz's escString handling.
HOSTILE = ['<script>window.__pwned=1</script>', 'q"uo\'te', 'a&b &amp; &nbsp;', 'new\nline', ']]>',
           '}; digraph x { a -> b', '\\N\\G\\l', 'trail\\', '<b>html</b>', '<<x>>', '-->',
           'tab\tx\x01', '"; node [label=pwned] "', 'esc\x1b]0;title\x07\x1b[2J', 'c1\x9b\x85\u202ebidi',
           '<img src=x onerror="window.__pwned=2">']


def hostile_model():
    """A chain whose every node, value, graph, doc string and metadata name is hostile."""
    x = HOSTILE[0]
    nodes, prev = [], x
    for i, h in enumerate(HOSTILE):
        op = "Softmax" if i % 3 == 1 else "Relu"
        out = f"{h}#{i}"
        nodes.append(helper.make_node(op, [prev], [out], name=f"{h}#n{i}", doc_string=h))
        prev = out
    g = helper.make_graph(nodes, HOSTILE[0] + "graph", [helper.make_tensor_value_info(x, TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [2])], doc_string=HOSTILE[0])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], doc_string=HOSTILE[0] + "]]>")
    m.producer_name = HOSTILE[-1]
    helper.set_model_props(m, {HOSTILE[0]: HOSTILE[1], "k&": "]]>", "nl": "a\nb"})
    return m


def hostile_plan():
    provs = [VirtualProvider("gpu", "cuda:0", ops=["Relu"]), VirtualProvider("cpu", "cpu:0", ops=["Relu", "Softmax"])]
    return he.plan(he.load_model(hostile_model()), provs)


@pytest.fixture(scope="module")
def tiny_plan():
    return he.plan(he.load_model(tiny_model()), two_providers())


def layout_json(source: str) -> dict:
    """Run ``dot -Tjson``: {'nodes': {name: attrs}, 'clusters': {name: (attrs, node names)},
    'edges': [(tail, head, attrs)]}."""
    r = subprocess.run(["dot", "-Tjson"], input=source.encode(), capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    d = json.loads(r.stdout, strict=False)  # dot writes control characters of hostile names raw
    objs = d.get("objects", [])
    nodes = {o["name"]: o for o in objs if "nodes" not in o}
    names = [o["name"] for o in objs]
    clusters = {o["name"]: (o, {names[i] for i in o.get("nodes", [])}) for o in objs if "nodes" in o}
    edges = [(names[e["tail"]], names[e["head"]], e) for e in d.get("edges", [])]
    return {"nodes": nodes, "clusters": clusters, "edges": edges}


def render_svg(source: str) -> ET.Element:
    r = subprocess.run(["dot", "-Tsvg"], input=source.encode(), capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stderr.decode().strip() == "", r.stderr.decode()  # no warnings either
    return ET.fromstring(r.stdout.decode("utf-8"))


# -- colours -----------------------------------------------------------------------------
def test_known_provider_colours_are_fixed():
    assert C.provider_color("cpu") == C.KNOWN["cpu"]
    assert C.provider_color("CUDA") == C.KNOWN["cuda"]
    assert C.provider_color(" gpu ") == C.KNOWN["gpu"]
    assert len(set(C.KNOWN.values())) == len(C.KNOWN)
    assert not set(C.KNOWN.values()) & set(C.PALETTE)


def test_other_colours_come_from_a_stable_hash():
    # crc32, not Python's salted hash(): the same on every run and machine
    for name in ("npu", "dsp", "my-accelerator"):
        assert C.provider_color(name) == C.PALETTE[zlib.crc32(name.encode()) % len(C.PALETTE)]


def test_colours_within_a_plan_are_distinct_and_order_independent():
    names = ["npu", "fpga", "dsp", "rocm", "cpu", "gpu", "xpu", "hpu", "asic"]
    slot = lambda n: zlib.crc32(n.encode()) % len(C.PALETTE)  # noqa: E731
    assert slot("npu") == slot("fpga") and slot("xpu") == slot("hpu") == slot("asic")  # probing is exercised
    a = C.provider_colors(names)
    b = C.provider_colors(list(reversed(names)))
    assert a == b
    assert len(set(a.values())) == len(names)
    assert a["cpu"] == C.KNOWN["cpu"]


def test_colours_are_stable_between_plans(tiny_plan):
    other = he.plan(he.load_model(tiny_model()), list(reversed(two_providers())))
    c1 = C.provider_colors(tiny_plan.provider_names)
    c2 = C.provider_colors(other.provider_names)
    assert c1 == c2


# -- escaping ----------------------------------------------------------------------------
@pytest.mark.parametrize("raw, escaped", [
    ("plain", "plain"),
    ("a\\b", "a\\\\b"),
    ("\\N", "\\\\N"),
    ("x&y", "x&amp;y"),
    ("two\nlines", "two\\\\nlines"),
    ("ctl\x01", "ctl\ufffd"),
    ("tab\tx", "tab x"),
], ids=["plain", "backslash", "escstring", "ampersand", "newline", "control", "tab"])
def test_dot_text(raw, escaped):
    assert dot_text(raw) == escaped


def test_dot_text_multiline_and_truncation():
    assert dot_text("a\nb", multiline=True) == "a\\nb"
    assert dot_text("x" * 100, limit=10) == "x" * 9 + "\u2026"


def test_labels_are_never_html_like():
    label = G._label(dot_text("<b>bold</b>"))
    assert isinstance(label, graphviz.quoting.NoHtml)
    assert graphviz.quoting.quote(label) == '"<b>bold</b>"'


# -- node level --------------------------------------------------------------------------
@needs_dot
def test_node_level_clusters_colours_and_labels(tiny_plan):
    p = tiny_plan
    d = p.to_graphviz()
    assert d.level == "node"
    lay = layout_json(d.source)
    colors = C.provider_colors(p.provider_names)
    parts = {name: members for name, (attrs, members) in lay["clusters"].items()}
    assert len(parts) == len(p.partitions) == 3
    for part in p.partitions:
        attrs, members = lay["clusters"][f"cluster_p{part.id}"]
        assert members == {f"n{i}" for i in part.node_ids}
        assert attrs["label"] == f"P{part.id} · {part.provider} · {part.device} · {part.n_nodes} node(s)"
        for i in part.node_ids:
            assert lay["nodes"][f"n{i}"]["fillcolor"] == colors[part.provider]
    mm = lay["nodes"]["n0"]
    assert mm["label"] == "MatMul\\nmm"
    assert "MatMul (ai.onnx, opset 17)" in mm["tooltip"]
    assert "X: float32[2,4]" in mm["tooltip"] and "W: float32[4,4]" in mm["tooltip"]
    soft = lay["nodes"]["n2"]
    assert "gpu: Softmax not in gpu's op table" in soft["tooltip"]
    # graph inputs and outputs are shaped apart from op boxes and from each other
    assert lay["nodes"]["in_0"]["shape"] == "ellipse"
    assert lay["nodes"]["out_0"]["peripheries"] == "2"
    assert mm.get("shape", "box") != "ellipse"
    # transfers: drawn bold in their kind's colour, labelled with kind and bytes
    edges = {(t, h): a for t, h, a in lay["edges"]}
    d2h, h2d = edges[("n1", "n2")], edges[("n2", "n3")]
    assert d2h["label"] == "D2H 32 B" and d2h["style"] == "bold" and d2h["color"] == C.TRANSFER_COLORS["D2H"]
    assert h2d["label"] == "H2D 32 B" and h2d["color"] == C.TRANSFER_COLORS["H2D"]
    plain = edges[("n0", "n1")]
    assert plain.get("label", "") == "" and plain.get("style", "") != "bold"
    assert edges[("n1", "n3")]["style"] == "dashed"  # same provider, other partition: no copy
    assert ("in_0", "n0") in edges and ("n3", "out_0") in edges
    # the legend names every provider with its priority
    legend = lay["nodes"]["legend"]["label"]
    assert "0. gpu (cuda:0)" in legend and "1. cpu (cpu:0)" in legend
    assert C.KNOWN["gpu"] in legend and C.KNOWN["cpu"] in legend


@needs_dot
def test_transfer_reuse_is_labelled_once():
    # b is consumed by two cpu nodes in one partition: one copy, one labelled edge
    nodes = [helper.make_node("Relu", ["X"], ["b"], name="r"),
             helper.make_node("Softmax", ["b"], ["c"], name="s1"),
             helper.make_node("Sigmoid", ["b"], ["d"], name="s2"),
             helper.make_node("Add", ["c", "d"], ["Y"], name="add")]
    g = helper.make_graph(nodes, "fan", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [8])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [8])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    provs = [VirtualProvider("gpu", "cuda:0", ops=["Relu"]),
             VirtualProvider("cpu", "cpu:0", ops=["Relu", "Softmax", "Sigmoid", "Add"])]
    p = he.plan(he.load_model(m), provs)
    assert len(p.transfers) == 1
    labelled = [a for _, _, a in layout_json(p.to_graphviz().source)["edges"] if a.get("label", "").startswith("D2H")]
    assert len(labelled) == 1


@needs_dot
def test_show_initializers(tiny_plan):
    assert "init_0" not in layout_json(tiny_plan.to_graphviz().source)["nodes"]
    lay = layout_json(tiny_plan.to_graphviz(show_initializers=True).source)
    assert lay["nodes"]["init_0"]["shape"] == "note"
    assert ("init_0", "n0") in {(t, h) for t, h, _ in lay["edges"]}


# -- partition level ---------------------------------------------------------------------
@needs_dot
def test_partition_level_nodes_and_byte_labels(tiny_plan):
    p = tiny_plan
    d = p.to_graphviz(level="partition")
    assert d.level == "partition" and d.layout == "dot"
    lay = layout_json(d.source)
    colors = C.provider_colors(p.provider_names)
    boxes = {k: v for k, v in lay["nodes"].items() if re.fullmatch(r"p\d+", k)}
    assert set(boxes) == {f"p{part.id}" for part in p.partitions}
    assert not lay["clusters"]
    for part in p.partitions:
        assert boxes[f"p{part.id}"]["fillcolor"] == colors[part.provider]
        assert boxes[f"p{part.id}"]["label"].startswith(f"P{part.id} · {part.provider}")
    edges = {(t, h): a for t, h, a in lay["edges"]}
    assert edges[("p0", "p1")]["label"] == "D2H · 1 value(s) · 32 B"
    assert edges[("p1", "p2")]["label"] == "H2D · 1 value(s) · 32 B"
    assert edges[("p0", "p2")]["label"] == "1 value(s) · 32 B" and edges[("p0", "p2")]["style"] == "dashed"
    assert int(edges[("p0", "p1")]["weight"]) > 1 and float(edges[("p0", "p1")]["penwidth"]) > 1.2
    assert ("in_0", "p0") in edges and ("p2", "out_0") in edges


def test_auto_level_threshold(tiny_plan):
    assert tiny_plan.to_graphviz().level == "node"
    assert tiny_plan.to_graphviz(max_nodes=3).level == "partition"
    assert tiny_plan.to_graphviz(level="node", max_nodes=1).level == "node"
    assert G.AUTO_NODE_LIMIT >= 100


def test_bad_arguments(tiny_plan):
    with pytest.raises(ValueError, match="level"):
        tiny_plan.to_graphviz(level="nodes")
    with pytest.raises(ValueError, match="layout"):
        tiny_plan.to_graphviz(level="partition", layout="neato")


@needs_dot
def test_layered_partition_view_for_many_partitions(tiny_plan, monkeypatch):
    monkeypatch.setattr(G, "DOT_PARTITION_LIMIT", 2)
    d = tiny_plan.to_graphviz(level="partition")
    assert d.layout == "layered" and "layout=nop2" in d.source
    lay = layout_json(d.source)
    for name in ("p0", "p1", "p2", "in_0", "out_0", "legend"):
        assert "pos" in lay["nodes"][name]
    assert len(lay["edges"]) == 5
    assert tiny_plan.to_graphviz(level="partition", layout="dot").layout == "dot"
    with pytest.raises(ValueError, match="layout must be one of auto, dot, layered"):
        tiny_plan.to_graphviz(level="partition", layout="grid")  # the serpentine grid is gone
    # the chosen layout never changes the node level
    assert tiny_plan.to_graphviz(level="node").layout == "dot"


def _svg_boxes_and_edges(svg: str):
    """``({title: (x0, y0, x1, y1)} of the drawn nodes, [(tail, head)] of the drawn edges,
    (width, height) of the picture in points)``."""
    root = ET.fromstring(svg)
    boxes, edges = {}, []
    for g in root.iter(f"{SVG}g"):
        title = g.find(f"{SVG}title")
        if title is None:
            continue
        if g.get("class") == "node":
            shape = next(e for e in g.iter() if e.tag in (f"{SVG}polygon", f"{SVG}path", f"{SVG}ellipse"))
            if shape.tag == f"{SVG}ellipse":
                cx, cy, rx, ry = (float(shape.get(k)) for k in ("cx", "cy", "rx", "ry"))
                box = (cx - rx, cy - ry, cx + rx, cy + ry)
            else:
                nums = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?",
                                                     shape.get("points") or shape.get("d"))]
                box = (min(nums[0::2]), min(nums[1::2]), max(nums[0::2]), max(nums[1::2]))
            assert title.text not in boxes, f"{title.text} drawn twice"
            boxes[title.text] = box
        elif g.get("class") == "edge":
            edges.append(tuple(title.text.split("->")))
    w, h = (float(root.get(k).removesuffix("pt")) for k in ("width", "height"))
    return boxes, edges, (w, h)


@needs_dot
@pytest.mark.parametrize("rankdir", ["TB", "LR"])
def test_partition_view_of_1200_partitions_is_laid_out_in_columns(rankdir):
    """A chain of 1,200 partitions (each Relu on the gpu, each Softmax on the cpu): every
    partition drawn once, the edges join the right boxes, no two boxes overlap, the picture
    is wrapped into columns of bounded aspect ratio, and it is drawn in linear time."""
    import time

    n = 1200
    nodes = [helper.make_node("Relu" if i % 2 == 0 else "Softmax", [f"v{i - 1}" if i else "x"], [f"v{i}"])
             for i in range(n)]
    g = helper.make_graph(nodes, "zigzag", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info(f"v{n - 1}", TensorProto.FLOAT, [4])])
    p = he.plan(he.load_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])),
                [VirtualProvider("gpu", "cuda:0", ops=["Relu"]),
                 VirtualProvider("cpu", "cpu:0", ops=["Softmax", "Relu"])])
    assert len(p.partitions) == n
    t0 = time.perf_counter()
    d = p.to_graphviz(rankdir=rankdir)
    svg = d.svg()
    elapsed = time.perf_counter() - t0
    assert d.level == "partition" and d.layout == "layered"
    assert elapsed < 60, f"{elapsed:.1f}s"  # generous (a loaded machine): guards against dot's quadratic layout
    boxes, edges, (w, h) = _svg_boxes_and_edges(svg)
    assert set(boxes) == {f"p{i}" for i in range(n)} | {"in_0", "out_0", "legend"}
    want = {(f"p{i}", f"p{i + 1}") for i in range(n - 1)} | {("in_0", "p0"), (f"p{n - 1}", "out_0")}
    assert sorted(edges) == sorted(want)
    drawn = sorted(boxes.values())  # sweep by left edge: no two boxes overlap
    for i, a in enumerate(drawn):
        for b in drawn[i + 1:]:
            if b[0] >= a[2]:
                break
            assert not (a[1] < b[3] and b[1] < a[3]), (a, b)
    long_side, short_side = (h, w) if rankdir == "TB" else (w, h)
    assert long_side <= 1.6 * short_side, (w, h)  # a 1,200-box chain would be ~90,000 pt long unwrapped
    assert short_side < 40_000, (w, h)
    # the wrapped chain reads down each column (across each row with LR), columns left to right
    centre = {k: ((x0 + x1) / 2, (y0 + y1) / 2) for k, (x0, y0, x1, y1) in boxes.items()}
    down, across = (1, 0) if rankdir == "TB" else (0, 1)
    turns = 0
    for i in range(n - 1):
        a, b = centre[f"p{i}"], centre[f"p{i + 1}"]
        if b[down] <= a[down]:  # a new column begins further right (further down with LR)
            turns += 1
            assert b[across] > a[across], i
    assert turns >= 3


# -- hostile names -----------------------------------------------------------------------
@needs_dot
@pytest.mark.parametrize("level, layout", [("node", "dot"), ("node", "layered"), ("partition", "dot"),
                                           ("partition", "layered")])
def test_hostile_names_yield_valid_dot_and_safe_svg(level, layout):
    p = hostile_plan()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. graphviz's DotSyntaxWarning
        d = p.to_graphviz(level=level, layout=layout, show_initializers=True)
    lay = layout_json(d.source)
    # structure: only synthetic ids, exactly the expected number of nodes and edges
    assert all(SYNTHETIC_ID.match(name) for name in lay["nodes"]), sorted(lay["nodes"])
    if level == "node":
        assert len([n for n in lay["nodes"] if n.startswith("n")]) == len(HOSTILE)
        assert len(lay["edges"]) == len(HOSTILE) + 1
    else:
        assert len([n for n in lay["nodes"] if n.startswith("p")]) == len(p.partitions)
    root = render_svg(d.source)
    assert not [e for e in root.iter() if e.tag.lower().endswith(("script", "foreignobject", "image"))]
    for e in root.iter():
        for k, v in e.attrib.items():
            assert not k.lower().startswith("on"), (k, v)
            assert "javascript:" not in v.lower()
    texts = [t.text or "" for t in root.iter(f"{SVG}text")]
    tips = "\n".join(a.get(f"{XLINK}title", "") for a in root.iter(f"{SVG}a"))
    assert HOSTILE[0] + "graph" in texts  # the graph title, shown literally
    if level == "node":
        # labels show the names literally (newline as a visible \n, control char as U+FFFD)
        for i, h in enumerate(HOSTILE):
            shown = G._truncate(f"{h}#n{i}", G.MAX_LABEL)
            shown = G._CTRL.sub("\ufffd", shown.replace("\n", "\\n").replace("\t", " "))
            assert shown in texts, shown
        assert "\\N\\G\\l#n6" in texts
        assert "a&b &amp; &nbsp;#n2" in tips  # entities stay literal text
    assert "<script>window.__pwned=1</script>" in tips
    assert 'q"uo\'te#1' in tips


def test_hostile_dot_source_has_no_raw_breakouts():
    """Every DOT line is one statement of an expected form: names never leak out of quotes."""
    ids = r"(n\d+|p\d+|in_\d+|out_\d+|init_\d+|legend)"
    forms = [r"digraph plan \{", r"(graph|node|edge) \[.*\]", r"(label|color)=.*",
             r"subgraph cluster_p\d+ \{", r"\}", ids + r" \[.*\]", ids + " -> " + ids + r" \[.*\]"]
    for level in ("node", "partition"):
        src = hostile_plan().to_graphviz(level=level, show_initializers=True).source
        for line in src.strip().splitlines():
            assert any(re.fullmatch(f, line.strip()) for f in forms), line[:100]


# -- rendering, Jupyter, missing dot -----------------------------------------------------
@needs_dot
def test_svg_and_jupyter_display(tiny_plan):
    d = tiny_plan.to_graphviz()
    svg = d.svg()
    assert svg.startswith("<svg") and "<?xml" not in svg and "DOCTYPE" not in svg
    bundle = d._repr_mimebundle_()
    assert "image/svg+xml" in bundle and "<svg" in bundle["image/svg+xml"]


def test_missing_dot_is_a_clear_error(tiny_plan, monkeypatch):
    monkeypatch.setattr(G.shutil, "which", lambda name: None)
    d = tiny_plan.to_graphviz()
    assert "digraph plan" in d.source  # building the DOT needs no binary
    for call in (d.svg, d._repr_mimebundle_, lambda: d.render(format="svg")):
        with pytest.raises(GraphvizNotFoundError) as ei:
            call()
        msg = str(ei.value)
        assert "apt-get install graphviz" in msg and "brew install graphviz" in msg
        assert "conda install -c conda-forge graphviz" in msg and "README" in msg
    assert isinstance(ei.value, he.HeteroExploreError)


def test_executable_not_found_is_translated(tiny_plan, monkeypatch, tmp_path):
    # `which` finds something, but the graphviz package cannot run it
    monkeypatch.setattr(G.shutil, "which", lambda name: "/nonexistent/dot")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(GraphvizNotFoundError, match="apt-get install graphviz"):
        tiny_plan.to_graphviz().svg()


def test_masked_provider_plans_draw(tiny_plan):
    provs = [mask(VirtualProvider("gpu", "cuda:0", ops=["MatMul", "Relu", "Add", "Softmax"]), deny=["Softmax"]),
             VirtualProvider("cpu", "cpu:0", ops=["MatMul", "Relu", "Add", "Softmax"])]
    p = he.plan(he.load_model(tiny_model()), provs)
    assert p.to_graphviz().source == tiny_plan.to_graphviz().source.replace(
        "Softmax not in gpu's op table", "Softmax denied by mask")


# -- the DOT writer's quoting ----------------------------------------------------------------
QUOTING = HOSTILE + ['"', '\\"', '\\\\"', 'end\\', 'end\\\\', 'end\\\\\\', '\\', '" ]; evil [label="x',
                     'a"; b -> c; "', '}', '{', '[', ']', ';', ',', '=', '->', '--', 'node', 'graph',
                     'subgraph x {', '/* c */', '// c', '# c', '\\"; x=1 ; "', '', ' ', '\u2028\u2029', '<>']


@needs_dot
def test_dot_quote_keeps_hostile_strings_inside_one_attribute():
    """Each hostile string, quoted by the writer as a label and a tooltip of one node and an
    edge: dot parses exactly one node pair and one edge with exactly the attributes written,
    and a string that went through dot_text (as every model string does) comes back unchanged."""
    for raw in QUOTING:
        for s in (raw, dot_text(raw, None)):
            w = G._DotWriter()
            w.node("n0", s, tooltip=s, fillcolor="#ffffff")
            w.edge("n0", "n1", label=s, tooltip=s)
            with w.subgraph(name="cluster_p0") as c:
                c.attr(label=s)
                c.node("n1", s)
            src = "digraph plan {\n" + "".join(w.body) + "}\n"
            lay = layout_json(src)
            assert set(lay["nodes"]) == {"n0", "n1"}, (raw, src)
            assert set(lay["clusters"]) == {"cluster_p0"}, (raw, src)
            assert [(t, h) for t, h, _ in lay["edges"]] == [("n0", "n1")], (raw, src)
            n0 = lay["nodes"]["n0"]
            assert n0["fillcolor"] == "#ffffff", (raw, src)
            if s is not raw:  # dot_text's output: what dot reads is what was written
                assert n0["label"] == s and n0["tooltip"] == s, (raw, n0["label"])
                assert lay["edges"][0][2]["label"] == s
                assert lay["clusters"]["cluster_p0"][0]["label"] == s


def test_dot_quote_matches_graphviz_quoting_and_marks_html():
    from graphviz.quoting import quote
    for s in QUOTING:
        if s.endswith("\\"):
            continue  # graphviz's quote warns and leaves an odd final backslash (a syntax error)
        q, theirs = G._dot_quote(s), quote(graphviz.nohtml(s))
        assert q.startswith('"') and q.endswith('"')
        assert q == theirs or not theirs.startswith('"'), (s, q, theirs)
    assert G._dot_quote("end\\") == '"end\\\\"' and G._dot_quote("end\\\\") == '"end\\\\"'
    assert G._dot_quote(G._Html("<<B>x</B>>")) == "<<B>x</B>>"   # only markup this module builds
    assert G._dot_quote("<<B>x</B>>") == '"<<B>x</B>>"'            # any other string is text
    assert G._dot_id("n17") == "n17" and G._dot_id("node") == '"node"' and G._dot_id('a b"') == '"a b\\""'
