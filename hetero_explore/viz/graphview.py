"""The interactive plan graph: big models drawn by a real layered layout engine in the browser.

One front end (``viz/static/graphview.js``, a plain ES module) serves two hosts:

* **the app** — :func:`graph_widget` wraps it as an `anywidget <https://anywidget.dev>`_
  widget (JupyterLab, VS Code, Colab, marimo; no server, no build step): the model's DAG is
  sent once (:func:`~.graphdata.graph_data`), each plan's placement after every re-plan
  (:func:`~.graphdata.placement_data`; the picture recolours without a new layout);
* **the report** — :func:`report_section` writes the same code, the same data and the
  layout engine into the self-contained HTML page (nothing fetched, works offline).

The layout engine is ELK's layered algorithm (elkjs 0.12.2, vendored under ``viz/vendor/``
with its EPL-2.0 licence), run in a web worker made from the vendored source, so laying out
never blocks the page. Scopes (the exporter's names, or blocks cut where the graph is
narrow) start collapsed, so a 10,000-node model opens as a few dozen boxes; search finds op
types, node names and tensor names, opens the scopes around a match and pans to it; a
minimap shows where the view is.
"""

from __future__ import annotations

import functools
import json
from importlib import resources

from .graphdata import graph_data, placement_data

#: node views with more nodes than this are drawn by this front end by default (the app's Graph
#: tab and the report); smaller ones keep the Graphviz picture
INTERACTIVE_MIN_NODES = 300
#: height of the drawing area, in CSS pixels
HEIGHT = 620


@functools.lru_cache(maxsize=None)
def module_source() -> str:
    """The front end's ES module text."""
    text = resources.files(__package__).joinpath("static", "graphview.js").read_text(encoding="utf-8")
    if "</script" in text.lower():  # it is inlined into the report: it must not end its script early
        raise RuntimeError("graphview.js must not contain '</script'")
    return text


@functools.lru_cache(maxsize=None)
def elk_source() -> str:
    """The vendored ELK worker (elkjs 0.12.2 ``lib/elk-worker.min.js``)."""
    text = resources.files(__package__).joinpath("vendor", "elk-worker.min.js").read_text(encoding="utf-8")
    if "</" in text:  # it is inlined into the report as a text block
        raise RuntimeError("the vendored ELK worker must not contain '</'")
    return text


def wants_interactive(plan, level: str = "auto") -> bool:
    """Whether the graph of ``plan`` is drawn by this front end by default: big node-level views
    (above :data:`INTERACTIVE_MIN_NODES` nodes) at ``level`` ``auto`` or ``interactive``."""
    return level == "interactive" or (level == "auto" and len(plan.graph.nodes) > INTERACTIVE_MIN_NODES)


# -- the app: an anywidget --------------------------------------------------------------------------
def graph_widget(plan, *, index: int | None = None, height: int = HEIGHT, query: str = ""):
    """The interactive graph of ``plan`` as a widget (needs ``anywidget``: the ``[jupyter]``
    extra). :func:`update_widget` shows a re-plan of the same model without a new layout."""
    cls = _widget_class()
    return cls(graph=graph_data(plan.graph), placement=placement_data(plan, index), _elk=elk_source(),
               height=int(height), query=query)


def update_widget(widget, plan, *, index: int | None = None) -> None:
    """Show ``plan`` in ``widget``: the same model re-planned recolours; another model is sent whole."""
    if widget.graph.get("name") != plan.graph.name or len(widget.graph.get("nodes", ())) != len(plan.graph.nodes):
        widget.graph = graph_data(plan.graph)
    widget.placement = placement_data(plan, index)


@functools.lru_cache(maxsize=None)
def _widget_class():
    try:
        import anywidget
        import traitlets
    except ImportError as e:
        from ..ir.errors import MissingDependencyError
        raise MissingDependencyError("the interactive graph needs anywidget: pip install 'hetero_explore[jupyter]' "
                                     "(or anywidget); plan.to_graphviz() draws without it") from e

    class GraphView(anywidget.AnyWidget):
        """The interactive plan graph (see :mod:`hetero_explore.viz.graphview`)."""

        _esm = traitlets.Unicode(module_source()).tag(sync=True)
        graph = traitlets.Dict().tag(sync=True)
        """The model's DAG (:func:`~hetero_explore.viz.graphdata.graph_data`)."""
        placement = traitlets.Dict().tag(sync=True)
        """The shown plan (:func:`~hetero_explore.viz.graphdata.placement_data`)."""
        _elk = traitlets.Unicode().tag(sync=True)
        query = traitlets.Unicode("").tag(sync=True)
        """The search box's text (set it to search from Python)."""
        height = traitlets.Int(HEIGHT).tag(sync=True)
        stats = traitlets.Dict().tag(sync=True)
        """What the browser measured: ``first_draw_ms``, ``layout_ms``, ``render_ms``, ``boxes``,
        ``recolour_ms``, ``find_ms`` (written by the front end)."""

    return GraphView


# -- the report ---------------------------------------------------------------------------------------
def _json_block(obj) -> str:
    """JSON safe inside ``<script type="application/json">``: every ``<`` escaped, so no
    ``</script>`` or ``<!--`` can end or change the block."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).replace("<", "\\u003c")


#: the report's bootstrap: mount the front end on each placeholder, from the page's data blocks.
#: The model is anywidget's, in miniature: ``get``/``set``/``on``/``off``; ``update(k, v)`` sets a
#: value and tells the listeners, as a change from the kernel would (bench/responsiveness.py
#: re-plans through it).
_BOOT = """
;(function () {
  document.querySelectorAll("div.hxg-mount").forEach(function (el) {
    var text = function (id) { return document.getElementById(id).textContent; };
    var state = {graph: JSON.parse(text(el.dataset.graph)), placement: JSON.parse(text(el.dataset.placement)),
                 _elk: text(el.dataset.elk), query: "", height: +(el.dataset.height || 620), stats: {}};
    var listeners = {};
    var model = {get: function (k) { return state[k]; }, set: function (k, v) { state[k] = v; },
                 save_changes: function () {},
                 on: function (ev, fn) { (listeners[ev] = listeners[ev] || []).push(fn); },
                 off: function (ev, fn) { listeners[ev] = (listeners[ev] || []).filter(function (f) { return f !== fn; }); },
                 update: function (k, v) { state[k] = v; (listeners["change:" + k] || []).forEach(function (f) { f(); }); }};
    el.hxModel = model;
    mount(el, model, {t0: 0});  // first_draw_ms counts from the page's navigation start
  });
})();
"""


#: where :func:`report_section` wants the report's script (right after the graph's data, so that
#: the graph draws while the rest of a big page is still being parsed)
SCRIPT_MARK = "<!--hxg-script-->"


@functools.lru_cache(maxsize=None)
def report_script() -> str:
    """The report's classic script: the front end (its ``export`` keywords dropped, inside a
    function scope) and its bootstrap. A classic script, not a module, so that it runs where
    it stands in the page (a module would wait for the whole page to be parsed)."""
    import re
    text = module_source()
    text = re.sub(r"^export default \{.*?^\};\s*$", "", text, flags=re.M | re.S)
    text = re.sub(r"^export (?=(const|function|class|async) )", "", text, flags=re.M)
    if re.search(r"^\s*(export|import)\b", text, flags=re.M):
        raise RuntimeError("graphview.js has an export or import the report cannot run as a classic script")
    return "(function () {\n" + text + _BOOT + "\n})();"


def report_section(plan, *, height: int = HEIGHT, key: str = "main") -> str:
    """The interactive graph for the report: a placeholder, the model and plan as JSON data
    blocks and the ELK worker's source as a text block (the page adds :func:`report_module`
    once, at :data:`SCRIPT_MARK`, and allows ``worker-src blob:``)."""
    gid, pid, eid = f"hxg-graph-{key}", f"hxg-placement-{key}", "hxg-elk"
    return (f'<div class="hxg-mount" id="hxg-{key}" data-graph="{gid}" data-placement="{pid}" data-elk="{eid}" '
            f'data-height="{int(height)}"></div>'
            f'<script type="application/json" id="{gid}">{_json_block(graph_data(plan.graph))}</script>'
            f'<script type="application/json" id="{pid}">{_json_block(placement_data(plan))}</script>'
            f'<script type="text/plain" id="{eid}">{elk_source()}</script>' + SCRIPT_MARK)
