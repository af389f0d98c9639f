"""The self-contained HTML report: content and escaping (no browser), then opened in
headless Chromium (Debian's chromium through Playwright; never a browser download)."""

from __future__ import annotations

import base64
import hashlib
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from onnx import TensorProto, helper
from test_viz_graph import HOSTILE, hostile_plan, tiny_model, two_providers

import hetero_explore as he
from hetero_explore.providers import VirtualProvider, mask
from hetero_explore.viz import graph as G

OUT = Path(__file__).resolve().parents[1] / "test-output"
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` is not installed")


class FakeRun:
    """Stands in for executor.RunResult: anything with ``timings_df()``."""

    def timings_df(self):
        return pd.DataFrame({"step": ["P0", "D2H b", "P1", "H2D c", "P2"],
                             "kind": ["partition", "transfer", "partition", "transfer", "partition"],
                             "provider": ["gpu", "gpu→cpu", "cpu", "cpu→gpu", "gpu"],
                             "seconds": [0.0012, 0.0002, 0.0031, 0.0001, 0.0009]})

    def summary(self):
        return "5 steps in 5.5 ms"


def diff_df(all_ok=False):
    return pd.DataFrame([
        {"output": "Y", "byte_identical": True, "n_diff": 0, "max_abs": 0.0, "max_ulp": 0,
         "first_index": None, "blamed": None},
        {"output": "Z", "byte_identical": all_ok, "n_diff": 0 if all_ok else 3,
         "max_abs": 0.0 if all_ok else 1.2e-7, "max_ulp": 0 if all_ok else 2,
         "first_index": None if all_ok else (0, 1), "blamed": None if all_ok else "P1"}])


@pytest.fixture(scope="module")
def tiny_plan():
    return he.plan(he.load_model(tiny_model()), two_providers())


@pytest.fixture(scope="module")
def masked_plan():
    provs = [mask(VirtualProvider("gpu", "cuda:0", ops=["MatMul", "Relu", "Add", "Softmax"]), deny=["Softmax"]),
             VirtualProvider("cpu", "cpu:0", ops=["MatMul", "Relu", "Add", "Softmax"])]
    return he.plan(he.load_model(tiny_model()), provs)


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.starts: list[tuple[str, dict]] = []
        self.script_text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.starts.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.script_text.append(data)


def parse(page: str) -> _Tags:
    t = _Tags()
    t.feed(page)
    return t


# -- content (no browser) ----------------------------------------------------------------
@needs_dot
def test_report_sections_providers_and_metadata(masked_plan):
    page = masked_plan.to_html()
    assert page.startswith("<!DOCTYPE html>")
    assert re.sub(r"&#x27;", "'", page).count(masked_plan.summary()) >= 1
    for sid in ("providers", "model", "dag", "placement", "partitions", "transfers"):
        assert f'id="sec-{sid}"' in page
    assert 'id="sec-run"' not in page and 'id="sec-diff"' not in page
    # providers with order and masks
    assert "MaskedProvider over VirtualProvider" in page
    assert "deny: Softmax" in page
    assert "4 op(s): Add, MatMul, Relu, Softmax" in page
    # model metadata
    assert "opset imports" in page and "ai.onnx: 17" in page and "ir version" in page
    assert "none: the plan can be executed as planned" in page
    # the DAG inline, without XML prologue or doctype
    assert "<svg" in page and "<?xml" not in page and "<!DOCTYPE svg" not in page
    assert "MatMul (ai.onnx, opset 17)" in page  # a tooltip
    # provider colours in the tables
    assert ".prov-0 { background: #fdae6b" in page and 'class="prov-1"' in page


def test_report_writes_a_file(tiny_plan, tmp_path):
    when = {"date": "2026-01-01 00:00:00 UTC"}     # the one thing that changes between two calls
    path = tiny_plan.to_html(tmp_path / "sub" / "plan.html", provenance=when)
    assert path == tmp_path / "sub" / "plan.html" and path.is_file()
    assert path.read_text(encoding="utf-8") == tiny_plan.to_html(provenance=when)  # deterministic


@needs_dot
def test_report_is_self_contained(tiny_plan):
    page = tiny_plan.to_html(run=FakeRun(), diff=diff_df())
    tags = parse(page)
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", page))
    # XML namespace names (identifiers, never fetched: the browser tests record every request)
    namespaces = {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink", "http://www.w3.org/2000/xmlns/",
                  "http://www.w3.org/2001/xml-events", "http://www.w3.org/XML/1998/namespace"}
    assert urls <= namespaces, urls
    for tag, attrs in tags.starts:
        assert "src" not in attrs, (tag, attrs)
        assert tag not in ("link", "iframe", "object", "embed", "img", "base"), tag
        href = attrs.get("href") or attrs.get("xlink:href")
        assert href is None or href.startswith("#"), (tag, href)
    assert "@import" not in page and "url(" not in page
    scripts = [a for t, a in tags.starts if t == "script"]
    assert len(scripts) == 1
    # the Content-Security-Policy pins the one inline script by its hash
    csp = next(a["content"] for t, a in tags.starts if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    digest = base64.b64encode(hashlib.sha256("".join(tags.script_text).encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in csp and "default-src 'none'" in csp


@needs_dot
def test_report_escapes_hostile_names():
    p = hostile_plan()
    page = p.to_html(diff=pd.DataFrame([{"output": HOSTILE[0], "byte_identical": False}]))
    tags = parse(page)
    assert "window.__pwned=1</script>" not in page.replace("&lt;/script&gt;", "")
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page
    assert [t for t, _ in tags.starts].count("script") == 1
    assert not [t for t, _ in tags.starts if t in ("img", "b", "iframe")]
    for _, attrs in tags.starts:
        assert not [k for k in attrs if k.startswith("on")], attrs
    assert not re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", page)  # no C0/C1 control reaches the page
    assert "]]>" not in page  # '>' is always escaped outside markup
    # metadata, doc string and producer are shown, escaped
    assert "k&amp;" in page and "&lt;img src=x onerror=" in page
    assert "<pre>&lt;script&gt;window.__pwned=1&lt;/script&gt;]]&gt;</pre>" in page


@needs_dot
def test_report_run_and_diff(tiny_plan):
    page = tiny_plan.to_html(run=FakeRun(), diff=diff_df())
    assert 'id="he-timings"' in page and "5 steps in 5.5 ms" in page
    assert 'class="ok"' in page and 'class="bad"' in page
    assert "1 of 2 output(s) differ" in page
    ok = tiny_plan.to_html(run=FakeRun().timings_df(), diff=diff_df(all_ok=True))
    assert 'id="he-timings"' in ok  # a DataFrame is accepted directly
    assert "all 2 output(s) byte-identical" in ok and 'class="bad"' not in ok


def test_report_without_dot(tiny_plan, monkeypatch):
    monkeypatch.setattr(G.shutil, "which", lambda name: None)
    page = tiny_plan.to_html()
    assert "apt-get install graphviz" in page and "<summary>DOT source</summary>" in page
    assert "digraph plan" in page and "<svg" not in page
    assert 'id="he-placement"' in page


@needs_dot
def test_report_lists_execution_blockers():
    # (symbolic dims execute now; a node no provider supports still blocks execution)
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="r"),
                           helper.make_node("Abs", ["t"], ["y"], name="a")], "blocked",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    p = he.plan(he.load_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])),
                [VirtualProvider("cpu", "cpu:0", ops=["Relu"])])
    page = p.to_html()
    assert 'id="he-blockers"' in page and "unplaceable" in page and "unplaced lane" in page
    assert "execution blocked (1)" in page


@needs_dot
def test_report_of_a_large_model_uses_the_partition_view():
    n = 2000
    nodes = [helper.make_node("Softmax" if i % 40 == 39 else "Relu", [f"v{i - 1}" if i else "x"], [f"v{i}"])
             for i in range(n)]
    g = helper.make_graph(nodes, "long", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info(f"v{n - 1}", TensorProto.FLOAT, [4])])
    p = he.plan(he.load_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])),
                [VirtualProvider("gpu", "cuda:0", ops=["Relu"]),
                 VirtualProvider("cpu", "cpu:0", ops=["Softmax", "Relu"])])
    page = p.to_html(max_rows=500)
    assert 'class="hxg-mount"' in page               # big models: the interactive graph (test_graph_browser.py)
    assert "showing the first 500 of 2,000 nodes" in page
    page = p.to_html(max_rows=500, level="partition")  # the Graphviz partition view, asked for by name
    assert "partition view" in page and 'class="hxg-mount"' not in page


# -- in a browser ------------------------------------------------------------------------
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run"]
RECORD_CSP = """document.addEventListener('securitypolicyviolation',
  function (e) { (window.__csp = window.__csp || []).push(e.violatedDirective); });"""


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium); "
                    "no browser is downloaded for these tests")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


def open_report(browser, path: Path):
    """Open ``path``; returns (page, console errors, requested URLs)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    page.on("request", lambda r: requests.append(r.url))
    page.add_init_script(RECORD_CSP)
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    return page, errors, requests


@needs_dot
@pytest.mark.browser
def test_report_in_chromium(browser, masked_plan):
    OUT.mkdir(exist_ok=True)
    path = masked_plan.to_html(OUT / "report.html", run=FakeRun(), diff=diff_df())
    page, errors, requests = open_report(browser, path)
    try:
        assert page.title() == "hetero_explore plan — tiny"
        svg = page.locator("#he-dag-box svg")
        assert svg.is_visible()
        box = svg.bounding_box()
        assert box["width"] > 100 and box["height"] > 100
        assert page.locator("#he-dag-box svg g.node").count() >= 4 + 2  # ops, input, output, legend
        tips = page.locator("#he-dag-box svg g.node a > title").all_text_contents()
        assert any("MatMul (ai.onnx, opset 17)" in t and "X: float32[2,4]" in t for t in tips)
        for tid, rows in (("he-providers", 2), ("he-placement", 4), ("he-partitions", 3),
                          ("he-transfers", 2), ("he-timings", 5), ("he-diff", 2)):
            table = page.locator(f"#{tid}")
            table.scroll_into_view_if_needed()
            assert table.is_visible(), tid
            assert table.locator("tbody tr").count() == rows, tid
        bad = page.locator("#he-diff td.bad")
        assert bad.count() == 1
        assert bad.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(255, 235, 233)"
        gpu_cell = page.locator("#he-placement tbody tr").first.locator("td.prov-0")
        assert gpu_cell.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(253, 174, 107)"
        # the inline script works: filter and sort
        page.fill('input[data-table="he-placement"]', "soft")
        assert page.locator("#he-placement tbody tr:visible").count() == 1
        page.fill('input[data-table="he-placement"]', "")
        page.locator("#he-placement th", has_text="node_id").click()
        page.locator("#he-placement th", has_text="node_id").click()
        assert page.locator("#he-placement tbody tr").first.locator("td").first.inner_text() == "3"
        page.click("button.fit")
        assert "actual" in page.get_attribute("#he-dag-box", "class")
        page.click("button.fit")
        page.evaluate("window.scrollTo(0, 0)")
        page.screenshot(path=str(OUT / "report.png"), full_page=True)
        assert page.evaluate("window.__csp || []") == []
        assert errors == []
        assert requests == [path.as_uri()], requests
    finally:
        page.close()


@needs_dot
@pytest.mark.browser
def test_hostile_report_in_chromium_runs_no_model_script(browser):
    OUT.mkdir(exist_ok=True)
    p = hostile_plan()
    path = p.to_html(OUT / "report_hostile.html", diff=pd.DataFrame([{"output": HOSTILE[0], "byte_identical": False}]))
    page, errors, requests = open_report(browser, path)
    try:
        page.wait_for_timeout(200)  # let any (wrongly) injected onerror handler fire
        assert page.evaluate("typeof window.__pwned") == "undefined"
        assert page.locator("script").count() == 1
        assert page.locator("img, iframe, main b").count() == 0
        assert page.title() == "hetero_explore plan — " + HOSTILE[0] + "graph"
        assert page.locator("#he-dag-box svg").is_visible()
        names = page.locator("#he-placement tbody tr td:nth-child(2)").all_inner_texts()
        # control characters are shown as U+FFFD (see viz/report.py); everything else verbatim
        shown = re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", "\ufffd", HOSTILE[13])
        assert names[0] == HOSTILE[0] + "#n0" and names[13] == shown + "#n13", (names[13], shown)
        assert page.locator("#he-diff td.bad").count() == 1
        page.screenshot(path=str(OUT / "report_hostile.png"), full_page=True)
        assert page.evaluate("window.__csp || []") == []
        assert errors == []
        assert requests == [path.as_uri()], requests
    finally:
        page.close()


@needs_dot
@pytest.mark.browser
def test_partition_view_report_in_chromium(browser, tiny_plan):
    OUT.mkdir(exist_ok=True)
    path = tiny_plan.to_html(OUT / "report_partitions.html", level="partition")
    page, errors, requests = open_report(browser, path)
    try:
        assert page.locator("#he-dag-box svg g.node").count() == 3 + 2 + 1
        labels = page.locator("#he-dag-box svg g.edge text").all_text_contents()
        assert "D2H · 1 value(s) · 32 B" in labels and "H2D · 1 value(s) · 32 B" in labels
        page.screenshot(path=str(OUT / "report_partitions.png"), full_page=True)
        assert errors == [] and requests == [path.as_uri()]
    finally:
        page.close()


def test_report_cells_format_missing_values(tiny_plan):
    run = pd.DataFrame({"event": ["partition", "readback"], "bytes": pd.array([None, 32], dtype="Int64"),
                        "t": [pd.NaT, pd.Timestamp(0)], "seconds": [float("nan"), 0.5]})
    page = tiny_plan.to_html(run=run)
    timings = page[page.index('id="he-timings"'):]
    assert "&lt;NA&gt;" not in timings and "NaT" not in timings and ">nan<" not in timings
    assert timings.count('class="na"') == 3 and ">32 B<" in timings


@needs_dot
@pytest.mark.browser
def test_search_finds_a_node_in_a_2000_node_view_and_pans_to_it(browser):
    from hetero_explore.data import models
    OUT.mkdir(exist_ok=True)
    g = he.load_model(models.chain("tiny", layers=1000))
    assert len(g.nodes) == 2000
    p = he.plan(g, [VirtualProvider("gpu", "cuda:0", ops=["Add"]), "cpu"])
    p = he.plan(g, ["cpu"]) if len(p.partitions) > 50 else p  # one cluster: the layout stays quick
    run = he.execute(p, he.random_inputs(g, 0))
    path = p.to_html(OUT / "report_2000.html", level="node", run=run)
    page, errors, requests = open_report(browser, path)
    try:
        box = page.locator("#he-dag-box")
        assert "pz" in box.get_attribute("class")  # svg-pan-zoom took the picture over
        target = "relu_987"
        node = page.locator("#he-dag-box svg g.node").filter(
            has=page.locator("text", has_text=re.compile(f"^{target}$")))
        assert node.count() == 1
        before = node.bounding_box()
        assert before["height"] < 5  # fitted: 2,000 nodes are specks
        page.fill("#he-node-search", target)
        page.wait_for_timeout(300)
        # the node called so, then the node reading its output tensor (found by tensor name)
        assert page.locator("#he-node-found").inner_text() == "1 of 2 match(es)"
        assert "he-found" in node.get_attribute("class")
        after, frame = node.bounding_box(), box.bounding_box()
        assert after["height"] >= 25, after  # zoomed to a readable size
        cx, cy = after["x"] + after["width"] / 2, after["y"] + after["height"] / 2
        assert abs(cx - (frame["x"] + frame["width"] / 2)) < 30 and abs(cy - (frame["y"] + frame["height"] / 2)) < 30
        # Enter cycles through several matches; a miss says so
        page.fill("#he-node-search", "relu_98")  # 11 Relu nodes, and the 11 Add nodes reading their outputs
        assert page.locator("#he-node-found").inner_text() == "1 of 22 match(es)"
        page.press("#he-node-search", "Enter")
        assert page.locator("#he-node-found").inner_text() == "2 of 22 match(es)"
        page.fill("#he-node-search", "no such node")
        assert page.locator("#he-node-found").inner_text() == "nothing matches"
        page.screenshot(path=str(OUT / "report_2000_search.png"))
        # zoom buttons of the library work offline
        page.fill("#he-node-search", "")
        z0 = page.evaluate("window.heDagPanZoom.getZoom()")
        page.locator("#svg-pan-zoom-zoom-in").click()
        assert page.evaluate("window.heDagPanZoom.getZoom()") > z0
        # the timeline of the real run renders: one bar per partition
        tl = page.locator("svg.he-timeline")
        tl.scroll_into_view_if_needed()
        assert tl.is_visible() and tl.locator("rect.he-partition").count() == len(p.partitions)
        # a table sorts: node names descending
        th = page.locator("#he-placement th", has_text=re.compile("^name$"))
        th.scroll_into_view_if_needed()
        th.click()
        th.click()
        first = page.locator("#he-placement tbody tr").first.locator("td").nth(1).inner_text()
        assert first == max(n.name for n in g.nodes)
        # the table is paged: 200 rows a page, in the sorted order; the filter pages its matches
        names = sorted((n.name for n in g.nodes), reverse=True)
        rows = page.locator("#he-placement tbody tr:visible")
        info = page.locator("#sec-placement .page-info")
        assert rows.count() == 200 and info.inner_text().strip() == "page 1 of 10 (2000 row(s))"
        assert page.locator("#sec-placement .page-prev").is_disabled()
        page.locator("#sec-placement .page-next").click()
        assert info.inner_text().strip() == "page 2 of 10 (2000 row(s))"
        assert rows.count() == 200 and rows.first.locator("td").nth(1).inner_text() == names[200]
        page.screenshot(path=str(OUT / "report_2000_paged.png"))
        page.fill("input.filter[data-table='he-placement']", "relu_9")
        hits = [x for x in names if "relu_9" in x]
        assert info.inner_text().strip() == f"page 1 of 1 ({len(hits)} row(s) matching)"
        assert rows.count() == len(hits) and rows.first.locator("td").nth(1).inner_text() == hits[0]
        assert page.locator("#sec-placement .page-next").is_disabled()
        assert page.evaluate("window.__csp || []") == []
        assert errors == []
        assert requests == [path.as_uri()], requests
    finally:
        page.close()


@needs_dot
@pytest.mark.browser
def test_scoped_model_report_opens_a_scope_on_click(browser):
    """A torch-style scoped model: the report carries its partition, scope and node views;
    clicking a collapsed scope shows the node view at that scope's first node."""
    from test_viz_scopes import scoped_transformer
    OUT.mkdir(exist_ok=True)
    g = he.load_model(scoped_transformer(13))
    assert len(g.nodes) > G.AUTO_NODE_LIMIT
    p = he.plan(g, [mask(he.VirtualProvider("gpu", "cuda:0", ops=sorted(set(g.op_types()))), deny=["Softmax"]),
                    "cpu"])
    path = p.to_html(OUT / "report_scopes.html", level="scope")  # (at auto: the interactive graph)
    page, errors, requests = open_report(browser, path)
    try:
        assert page.locator("div.dag[data-view]").count() == 3
        # a big scoped model is drawn by its scopes first; the partition view is a click away
        scopes = page.locator("#he-dag-box")
        assert scopes.get_attribute("data-view") == "scope" and scopes.is_visible()
        assert not page.locator("#he-dag-partitions").is_visible()
        page.locator("button.dag-view[data-target='he-dag-partitions']").click()
        assert page.locator("#he-dag-partitions").is_visible() and not scopes.is_visible()
        assert "pz" in page.locator("#he-dag-partitions").get_attribute("class")
        page.locator("button.dag-view[data-target='he-dag-box']").click()
        assert scopes.is_visible() and "pz" in scopes.get_attribute("class")
        box = scopes.locator("svg g.node").filter(has=page.locator("text", has_text="/encoder/layer.4/mlp"))
        assert box.count() == 1
        page.screenshot(path=str(OUT / "report_scopes.png"))
        box.click()
        assert page.locator("#he-dag-nodes").is_visible() and not scopes.is_visible()
        first = min((n for n in g.nodes if n.name.startswith("/encoder/layer.4/mlp/")), key=lambda n: n.id)
        assert page.locator("#he-node-search").input_value() == "/encoder/layer.4/mlp/"
        found = page.locator("#he-dag-nodes svg g.he-found")
        assert found.count() == 1 and found.locator("title").first.text_content() == f"n{first.id}"
        n_hits = sum(n.name.startswith("/encoder/layer.4/mlp/") for n in g.nodes)
        assert page.locator("#he-node-found").inner_text() == f"1 of {n_hits} match(es)"
        page.screenshot(path=str(OUT / "report_scope_opened.png"))
        # a name only another picture shows: the search switches to it
        page.fill("#he-node-search", "\u25b8 14 node(s)")  # a collapsed scope's label
        assert scopes.is_visible() and page.locator("#he-node-found").inner_text() == "1 of 13 match(es)"
        assert page.evaluate("window.__csp || []") == []
        assert errors == []
        assert requests == [path.as_uri()], requests
    finally:
        page.close()
