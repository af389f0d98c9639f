"""Graphviz DAG of a plan: a node-level view and a partition-level view.

Node ids in the DOT are synthetic (``n17``, ``p3``, ``in_0``, ``out_1``,
``init_4``); names that come from the model appear only inside quoted labels
and tooltips, escaped by :func:`dot_text`, so hostile names (quotes,
backslashes, ``<script>``, DOT syntax, newlines) cannot change the graph's
structure or the SVG that ``dot`` writes. The node, edge and cluster statements
are written as text by :class:`_DotWriter` (every value quoted by
:func:`_dot_quote`) and appended to a :class:`PlanGraph` (a
:class:`graphviz.Digraph`, which renders them).
"""

from __future__ import annotations

import contextlib
import math
import re
import shutil
from collections import Counter

import graphviz

from ..ir.errors import GraphvizNotFoundError, HeteroExploreError  # noqa: F401
from ..ir.units import human_bytes  # noqa: F401  (re-exported: viz.graph.human_bytes)
from .dotparts import (MAX_LABEL, MAX_LISTED, MAX_TOOLTIP, SCOPE_BOXES, _CTRL, _dtype_name,  # noqa: F401
                       _io_lines, _label, _listed, _node_lines, _node_tooltip, _pos, _tooltip, _truncate,
                       _vshort, dot_text, fmt_value)
from .html import CTRL, esc, fmt_shape  # noqa: F401  (the views' one escaper)
from .colors import (EDGE_COLOR, INIT_FILL, IO_FILL, TRANSFER_COLORS, darker, lighter,
                     provider_colors)

#: ``level="auto"`` draws every node up to this many nodes, partitions above it
#: (node-level layouts of thousands of nodes are unreadable and slow).
AUTO_NODE_LIMIT = 400
LEVELS = ("auto", "node", "partition", "scope")
#: Partition views with more partitions than this are laid out by :mod:`.layout` (linear-time
#: layers, a long chain wrapped into side-by-side columns, drawn by Graphviz's ``nop2``)
#: instead of by ``dot``, whose layout time grows quadratically (4-8 s at 733 partitions
#: here, ~10 s at 1,300).
DOT_PARTITION_LIMIT = 600
LAYOUTS = ("auto", "dot", "layered")
#: A view whose :func:`dot_cost` is above this is laid out by :mod:`.layout` even under the
#: node and partition limits (``dot`` took about a second at 2,900 here, 8 s at 5,600).
DOT_COST_LIMIT = 2500
#: Seconds ``dot`` may take to lay a picture out before the linear layout is drawn instead
#: (:meth:`PlanGraph.svg`); nothing waits on ``dot`` longer than this.
DOT_SECONDS = 2.0
#: Node views with more nodes than this are laid out by :mod:`.layout` (linear time, drawn by
#: Graphviz's ``nop2``) instead of by ``dot`` (a 2,000-node view with partition clusters took
#: 5-25 s in ``dot`` here, and about a second this way).
DOT_NODE_LIMIT = 300
#: The laid-out partition view wraps its layers into columns until the picture is at most
#: this many times as tall as it is wide (a chain of 1,200 partitions would otherwise be
#: ~90,000 pt tall and one box wide).
PARTITION_ASPECT = 1.5

INSTALL_HINT = ("install Graphviz: `apt-get install graphviz` (Debian/Ubuntu), "
                "`brew install graphviz` (macOS), `conda install -c conda-forge graphviz` (conda), "
                "or run the set-up command in the README")


def _missing_dot(cause: str = "") -> GraphvizNotFoundError:
    extra = f" ({cause})" if cause else ""
    return GraphvizNotFoundError(
        "Graphviz's `dot` executable was not found on PATH" + extra + "; it is needed to render "
        "plan graphs (the DOT text is still available as `.source`). To fix it, " + INSTALL_HINT)


def check_dot() -> str:
    """Path of the ``dot`` executable, or :class:`GraphvizNotFoundError` saying how to install it."""
    path = shutil.which("dot")
    if path is None:
        raise _missing_dot()
    return path


class LayoutTimeout(HeteroExploreError):
    """``dot`` did not lay the picture out within its time budget."""


class PlanGraph(graphviz.Digraph):
    """A :class:`graphviz.Digraph` that displays itself in Jupyter as SVG and turns a
    missing ``dot`` into :class:`GraphvizNotFoundError`.

    ``level`` is the view that was drawn (``"node"`` or ``"partition"``); ``layout`` how
    (``"dot"`` or ``"layered"``); ``fallback`` (when set) builds the same view with the linear
    layout, drawn by :meth:`svg` when ``dot`` runs over its budget."""

    level: str = "node"
    layout: str = "dot"
    fallback = None

    def pipe(self, *args, **kwargs):
        check_dot()
        try:
            return super().pipe(*args, **kwargs)
        except graphviz.ExecutableNotFound as e:
            raise _missing_dot(str(e)) from e

    def render(self, *args, **kwargs):
        check_dot()
        try:
            return super().render(*args, **kwargs)
        except graphviz.ExecutableNotFound as e:
            raise _missing_dot(str(e)) from e

    def svg(self, timeout: float | None = DOT_SECONDS) -> str:
        """The rendered SVG without the XML prologue and doctype (ready to inline in HTML),
        with each tooltip also given as an SVG ``<title>`` so that every browser shows it.

        ``dot`` gets ``timeout`` seconds (None: no limit); past them it is stopped and the
        :attr:`fallback` picture (the same view, laid out in linear time) is drawn instead,
        or :class:`LayoutTimeout` raised when there is none."""
        if timeout is None or self.layout != "dot":
            return add_svg_titles(strip_svg_prologue(self.pipe(format="svg", encoding="utf-8")))
        import subprocess
        exe = check_dot()
        try:
            r = subprocess.run([exe, "-Tsvg"], input=self.source.encode("utf-8"), capture_output=True,
                               timeout=timeout)
        except OSError as e:  # found on PATH but cannot be run
            raise _missing_dot(str(e)) from e
        except subprocess.TimeoutExpired:
            if self.fallback is None:
                raise LayoutTimeout(f"dot did not lay this {self.level} view out within {timeout:g} s; draw it "
                                    "with layout='layered' (linear time) or use the interactive graph "
                                    "(hetero_explore.viz.graphview)") from None
            alt = self.fallback()
            return alt.svg(timeout=None)
        if r.returncode != 0:
            raise graphviz.CalledProcessError(r.returncode, [exe, "-Tsvg"], output=r.stdout, stderr=r.stderr)
        return add_svg_titles(strip_svg_prologue(r.stdout.decode("utf-8")))

    def _repr_image_svg_xml(self):
        return self.svg()


def strip_svg_prologue(svg: str) -> str:
    i = svg.find("<svg")
    return svg[i:] if i >= 0 else svg


_A_TITLE = re.compile(r'<a xlink:title="([^"<>]*)">')


def add_svg_titles(svg: str) -> str:
    """Copy dot's ``xlink:title`` tooltips into ``<title>`` children (the attribute text is
    already XML-escaped by dot, and is equally valid as element text)."""
    return _A_TITLE.sub(lambda m: f"{m.group(0)}<title>{m.group(1)}</title>", svg)


# -- escaping ----------------------------------------------------------------------------


class _Html(str):
    """An HTML-like DOT label (``<<TABLE ...>>``), written unquoted by :class:`_DotWriter`;
    only for markup this module builds, its text escaped with :func:`_html_text`."""

    __slots__ = ()


_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEYWORDS = frozenset({"node", "edge", "graph", "digraph", "subgraph", "strict"})
_QUOTE = re.compile(r'(?P<pairs>(?:\\\\)*)\\?"')


def _dot_quote(s) -> str:
    """``s`` as one DOT ID: an :class:`_Html` label as it is, anything else a double-quoted
    string in which every ``"`` is escaped and a final odd backslash is doubled, so nothing
    can end the string early or run into the next attribute. (Quoting only: what dot makes
    of backslashes and ``&`` inside the string is :func:`dot_text`'s business.)"""
    if isinstance(s, _Html):
        return s
    s = str(s)
    if '"' in s:  # a quote after an odd run of backslashes is escaped already (graphviz's own rule)
        s = _QUOTE.sub(r'\g<pairs>\\"', s)
    if s.endswith("\\") and (len(s) - len(s.rstrip("\\"))) % 2:
        s += "\\"
    return f'"{s}"'


def _dot_id(s: str) -> str:
    """A node or subgraph id: the synthetic ids (``n17``, ``cluster_p3``) as they are, anything
    else quoted."""
    return s if _ID.fullmatch(s) and s.lower() not in _KEYWORDS else _dot_quote(s)


def _attrs(label, attrs) -> str:
    parts = [] if label is None else [f"label={_dot_quote(label)}"]
    parts += [f"{k}={_dot_quote(v)}" for k, v in attrs.items() if v is not None]
    return " ".join(parts)


class _DotWriter:
    """The DOT statements of a view, written straight to text (the ``graphviz`` package's
    per-attribute quoting was most of the time spent building a 2,000-node view). It takes
    the calls of :class:`graphviz.Digraph` this module makes (``node``, ``edge``, ``attr``,
    ``subgraph``) and keeps the lines in ``body``, in the package's layout, to be appended
    to a :class:`PlanGraph`'s body. Every model string goes through :func:`_dot_quote`."""

    __slots__ = ("body", "_indent", "nodes", "edges")

    def __init__(self, indent: str = "\t"):
        self.body: list[str] = []
        self._indent = indent
        #: every node id and every (tail, head, labelled) edge written, nested clusters included
        #: (what :func:`dot_cost` reads)
        self.nodes: list[str] = []
        self.edges: list[tuple[str, str, bool]] = []

    def node(self, name: str, label=None, **attrs) -> None:
        a = _attrs(label, attrs)
        self.nodes.append(name)
        self.body.append(f"{self._indent}{_dot_id(name)} [{a}]\n" if a else f"{self._indent}{_dot_id(name)}\n")

    def edge(self, tail: str, head: str, label=None, **attrs) -> None:
        a = _attrs(label, attrs)
        self.edges.append((tail, head, label is not None))
        line = f"{self._indent}{_dot_id(tail)} -> {_dot_id(head)}"
        self.body.append(f"{line} [{a}]\n" if a else line + "\n")

    def attr(self, kw: str | None = None, **attrs) -> None:
        if not attrs:
            return
        if kw is None:
            self.body.append(f"{self._indent}{_attrs(None, attrs)}\n")
        elif kw in ("graph", "node", "edge"):
            self.body.append(f"{self._indent}{kw} [{_attrs(None, attrs)}]\n")
        else:
            raise ValueError(f"attr statement must target graph, node or edge, not {kw!r}")

    @contextlib.contextmanager
    def subgraph(self, name: str):
        sub = _DotWriter(self._indent + "\t")
        yield sub
        self.body.append(f"{self._indent}subgraph {_dot_id(name)} {{\n")
        self.body.extend(sub.body)
        self.body.append(f"{self._indent}}}\n")
        self.nodes.extend(sub.nodes)
        self.edges.extend(sub.edges)


def dot_cost(nodes, edges) -> int:
    """What ``dot`` would lay out, roughly: the boxes plus the virtual nodes it inserts, one per
    rank an edge crosses (twice as many for a labelled edge: its label takes a rank of its own)
    and one per label. Ranks are the longest-path layering of the drawn graph. ``dot``'s time
    grows much faster than this count (crossing minimisation over the virtual nodes): a
    41-box view whose 232 labelled edges skip many ranks (a DenseNet's partitions) counts
    ~6,000 and took 5 s; at 497 such edges, over 40 s. See :data:`DOT_COST_LIMIT`."""
    index = {n: i for i, n in enumerate(dict.fromkeys(nodes))}
    for t, h, _ in edges:
        index.setdefault(t, len(index))
        index.setdefault(h, len(index))
    n = len(index)
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = [0] * n
    for t, h, _ in edges:
        a, b = index[t], index[h]
        if a != b:
            succ[a].append(b)
            indeg[b] += 1
    rank = [0] * n
    stack = [i for i in range(n) if indeg[i] == 0]
    while stack:  # longest path from the sources (Kahn's order); a cycle's nodes keep rank 0
        i = stack.pop()
        for j in succ[i]:
            rank[j] = max(rank[j], rank[i] + 1)
            indeg[j] -= 1
            if indeg[j] == 0:
                stack.append(j)
    cost = n
    for t, h, labelled in edges:
        span = abs(rank[index[h]] - rank[index[t]])
        cost += max(0, span - 1) * (2 if labelled else 1) + (1 if labelled else 0)
    return cost


def _html_text(s, limit: int | None = MAX_LABEL) -> str:
    """``s`` escaped for text inside a DOT HTML-like label."""
    return esc(_truncate(str(s), limit).replace("\n", " ").replace("\r", " "))


# -- formatting (units: hetero_explore.ir.units) ------------------------------------------
def _penwidth(nbytes) -> str:
    if not nbytes:
        return "1.2"
    return f"{1.2 + min(5.0, math.log10(1 + nbytes) * 0.6):.2f}"


def _weight(nbytes) -> str:
    return str(1 + int(math.log2(1 + nbytes))) if nbytes else "1"


# -- the views ---------------------------------------------------------------------------
def auto_level(plan, max_nodes: int = AUTO_NODE_LIMIT) -> str:
    """What ``level="auto"`` draws: every node up to ``max_nodes`` nodes; above it the name
    scopes when the exporter wrote them (``/encoder/layer.0/...``), else the partitions."""
    if len(plan.graph.nodes) <= max_nodes:
        return "node"
    from .scopes import has_scopes
    return "scope" if has_scopes(plan.graph) else "partition"


def plan_to_graphviz(plan, level: str = "auto", show_initializers: bool = False, *,
                     max_nodes: int = AUTO_NODE_LIMIT, rankdir: str = "TB", legend: bool = True,
                     max_label: int = MAX_LABEL, layout: str = "auto", expand=(),
                     scope_depth: int | None = None) -> PlanGraph:
    """The plan's DAG as a :class:`PlanGraph` (a ``graphviz.Digraph``).

    Args:
        plan: a :class:`hetero_explore.planner.plan.Plan`.
        level: ``"node"`` (one box per node, one cluster per partition),
            ``"partition"`` (one box per partition, edges labelled by the bytes that
            cross them), ``"scope"`` (the exporter's name scopes collapsed into boxes,
            :mod:`.scopes`) or ``"auto"`` (node level up to ``max_nodes`` nodes, then the
            scope level when most nodes have a ``/scope/`` name, else the partition level).
        show_initializers: draw initializers as small notes (node level only).
        max_nodes: the ``auto`` threshold.
        rankdir: Graphviz ``rankdir`` (``TB`` or ``LR``).
        legend: draw the provider legend.
        max_label: longest model string shown in a label; tooltips show more.
        expand: ``level="scope"``: name scopes (``"/encoder/layer.0"``) drawn open, as a
            cluster of what they hold, instead of as one box.
        scope_depth: ``level="scope"``: scopes this deep or deeper are drawn as one box unless
            expanded (1: the top-level scopes); None: the deepest that keeps at most
            ``SCOPE_BOXES`` boxes.
        layout: ``"dot"``, ``"layered"`` (:mod:`.layout`'s linear-time layers, drawn by
            ``nop2``; at node level the partitions are clusters; at partition level a long
            chain of layers wraps into side-by-side columns, at most ``PARTITION_ASPECT``
            times as tall as wide) or ``"auto"`` (node level: ``layered`` above
            ``DOT_NODE_LIMIT`` nodes unless initializers or control-flow bodies are drawn;
            partition level: ``layered`` above ``DOT_PARTITION_LIMIT`` partitions).
    """
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}; got {level!r}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}; got {layout!r}")
    chosen = layout
    kw = dict(show_initializers=show_initializers, max_nodes=max_nodes, rankdir=rankdir, legend=legend,
              max_label=max_label, expand=expand, scope_depth=scope_depth)
    if level == "auto":
        level = auto_level(plan, max_nodes)
    if level == "scope":
        from .scopes import ScopeView
        view = ScopeView(plan, expand=expand, depth=scope_depth)
        if layout == "auto":
            layout = "layered" if view.n_boxes > DOT_NODE_LIMIT else "dot"
    elif level == "node":
        if layout == "auto":
            big = len(plan.graph.nodes) > DOT_NODE_LIMIT
            layout = "layered" if big and not show_initializers and not getattr(plan, "children", None) else "dot"
        elif getattr(plan, "children", None):
            layout = "dot"  # control-flow bodies are laid out by dot
    elif layout == "auto":
        layout = "layered" if len(plan.partitions) > DOT_PARTITION_LIMIT else "dot"
    colors = provider_colors(plan.provider_names)
    g = PlanGraph(name="plan", graph_attr={
        "rankdir": rankdir, "fontname": "Helvetica", "fontsize": "12", "labelloc": "t",
        "newrank": "true", "compound": "true", "nodesep": "0.25", "ranksep": "0.45",
        "tooltip": " ",
    }, node_attr={"fontname": "Helvetica", "fontsize": "10", "style": "filled,rounded",
                  "shape": "box", "margin": "0.08,0.04", "height": "0.3"},
        edge_attr={"fontname": "Helvetica", "fontsize": "9", "color": EDGE_COLOR, "arrowsize": "0.6"})
    g.level = level
    g.layout = layout
    graph = plan.graph
    tb = plan.transfer_bytes
    title = [dot_text(graph.name, 80),
             dot_text(f"{len(graph.nodes)} node(s) · {len(plan.partitions)} partition(s) · "
                      f"{len(plan.transfers)} transfer(s) ({human_bytes(tb)}) · {level} view", None)]
    g.attr(label=_label(*title))
    pos: dict[str, tuple[float, float]] = {}
    bbs: dict[str, str] = {}
    w = _DotWriter()  # nodes, edges and clusters: written as text, appended to g's body at the end
    if level == "scope":
        if layout == "layered":
            pos, bbs = view.positions(max_label, rankdir)
            g.attr(layout="nop2", splines="line", outputorder="edgesfirst")
            if legend:
                pos["legend"] = "-150.0,-40.0"
        _io_nodes(w, plan, max_label, pos)
        view.draw(w, colors, max_label, pos, bbs)
    elif layout == "layered":
        pos, bbs = _layered_positions(plan, level, max_label, rankdir, legend, show_initializers)
        g.attr(layout="nop2", splines="line", outputorder="edgesfirst")
    if level == "scope":
        pass
    elif level == "node":
        _io_nodes(w, plan, max_label, pos)
        _node_level(w, plan, colors, show_initializers, max_label, pos, bbs)
    else:
        agg, inp = _crossings(plan)
        _io_nodes(w, plan, max_label, pos)
        _partition_level(w, plan, colors, max_label, agg, inp, pos)
    if legend:
        at = pos.get("legend")
        _legend(w, plan, colors, at if not isinstance(at, str) else tuple(float(x) for x in at.split(",")))
    layered_ok = not (level == "node" and getattr(plan, "children", None))  # control-flow bodies: dot only
    if layout == "dot" and layered_ok and chosen != "dot":
        if dot_cost(w.nodes, w.edges) > DOT_COST_LIMIT:  # dot would take seconds to minutes
            return plan_to_graphviz(plan, level, layout="layered", **kw)
        g.fallback = lambda: plan_to_graphviz(plan, level, layout="layered", **kw)
    g.body.extend(w.body)
    return g


def _layered_positions(plan, level, max_label, rankdir, legend, show_initializers=False):
    """``(pos, bb)``: DOT ``pos`` of every box and ``bb`` of every cluster, from
    :func:`.layout.layout` (node level: partitions as groups of node boxes)."""
    from . import layout as L

    graph = plan.graph
    lr = rankdir == "LR"

    def leaf(key, lines, order, fontsize=10.0, ellipse=False):
        w, h = L.estimate_size(lines, fontsize)
        if ellipse:
            w, h = w * 1.25, h * 1.2
        return L.Box(key, *((h, w) if lr else (w, h)), order=order)

    n_nodes = len(graph.nodes)
    kids = [leaf(f"in_{i}", _io_lines(graph, name, max_label), -1.0 - len(graph.inputs) + i, ellipse=True)
            for i, name in enumerate(graph.inputs)]
    edges = []
    if level == "node":
        for part in plan.partitions:
            box = L.Box(f"cluster_p{part.id}", children=[
                leaf(f"n{nid}", _node_lines(graph.nodes[nid], max_label), float(nid)) for nid in part.node_ids])
            if lr:
                box.label_h = 0.0
            kids.append(box)
        in_index = {n: i for i, n in enumerate(graph.inputs)}
        for n in graph.nodes:
            for name in n.inputs:
                v = graph.values.get(name) if name else None
                if v is None:
                    continue
                if v.producer is not None:
                    edges.append((f"n{v.producer}", f"n{n.id}"))
                elif name in in_index:
                    edges.append((f"in_{in_index[name]}", f"n{n.id}"))
        if show_initializers:  # numbered as _node_level numbers them
            k = 0
            for name, v in graph.values.items():
                if v.kind == "initializer" and v.consumers:
                    first = min(v.consumers) if all(isinstance(c, int) for c in v.consumers) else 0
                    kids.append(leaf(f"init_{k}", [dot_text(name, max_label), dot_text(_vshort(graph, name))],
                                     first - 0.5, fontsize=8.0))
                    edges.extend((f"init_{k}", f"n{c}") for c in v.consumers if isinstance(c, int))
                    k += 1
        src = lambda nid: f"n{nid}"  # noqa: E731
    else:  # partition level: one box per partition
        agg, inp = _crossings(plan)
        for part in plan.partitions:
            kids.append(leaf(f"p{part.id}", _partition_lines(plan, part, max_label, max_label), float(part.node_ids[0])
                             if part.node_ids else float(part.id)))
        edges = [(f"p{a}", f"p{b}") for a, b in agg] + [(f"in_{k}", f"p{b}") for k, b in inp]
        src = lambda nid: f"p{plan.node_partition[nid]}"  # noqa: E731
    for i, name in enumerate(graph.outputs):
        kids.append(leaf(f"out_{i}", _io_lines(graph, name, max_label), float(n_nodes + i), ellipse=True))
        v = graph.values.get(name)
        if v is not None and v.producer is not None:
            edges.append((src(v.producer), f"out_{i}"))
    root = L.layout(L.Box("root", children=kids, label_h=0.0), edges)
    if level != "node":  # a long chain of partitions wraps into columns (rows, left to right)
        L.wrap(root, PARTITION_ASPECT)  # layout coordinates: with LR, the picture's width over height
    pos = {b.key: L.dot_pos(b, rankdir) for b in L.leaves(root)}
    bbs = {b.key: L.dot_bb(b, rankdir) for b in L.groups(root)}
    if legend:
        pos["legend"] = f"{-150.0:.1f},{-40.0:.1f}"
    return pos, bbs


def _io_nodes(g, plan, max_label, pos):
    graph = plan.graph
    for i, name in enumerate(graph.inputs):
        g.node(f"in_{i}", _label(dot_text(name, max_label), dot_text(_vshort(graph, name), max_label)),
               shape="ellipse", style="filled,bold", fillcolor=IO_FILL,
               tooltip=_tooltip(["graph input", fmt_value(graph, name)]), **_pos(pos, f"in_{i}"))
    for i, name in enumerate(graph.outputs):
        g.node(f"out_{i}", _label(dot_text(name, max_label), dot_text(_vshort(graph, name), max_label)),
               shape="ellipse", peripheries="2", style="filled", fillcolor=IO_FILL,
               tooltip=_tooltip(["graph output", fmt_value(graph, name)]), **_pos(pos, f"out_{i}"))


def _output_edges(g, plan, src_of):
    """Edges into graph-output nodes; ``src_of(value) -> node id or None``."""
    graph = plan.graph
    in_index = {n: i for i, n in enumerate(graph.inputs)}
    for i, name in enumerate(graph.outputs):
        v = graph.values.get(name)
        if v is None:
            continue
        if v.producer is not None:
            g.edge(src_of(v.producer), f"out_{i}", tooltip=_tooltip([fmt_value(graph, name)]))
        elif name in in_index:
            g.edge(f"in_{in_index[name]}", f"out_{i}", tooltip=_tooltip([fmt_value(graph, name)]))


def _node_level(g, plan, colors, show_initializers, max_label, pos=None, bbs=None):
    graph = plan.graph
    vals = graph.values
    provs = plan.providers
    in_index = {n: i for i, n in enumerate(graph.inputs)}
    init_index: dict[str, int] = {}
    tmap = {(t.value, t.dst_provider): t for t in plan.transfers}

    for part in plan.partitions:
        color = colors[part.provider]
        with g.subgraph(name=f"cluster_p{part.id}") as c:
            c.attr(label=_label(dot_text(f"P{part.id} · {part.provider} · {part.device} · "
                                         f"{part.n_nodes} node(s)", 2 * max_label)),
                   style="rounded,filled", fillcolor=lighter(color), color=darker(color),
                   fontsize="11", tooltip=_tooltip(_partition_tooltip(plan, part)))
            if bbs and f"cluster_p{part.id}" in bbs:
                c.attr(bb=bbs[f"cluster_p{part.id}"])
            c.attr("node", fillcolor=color, color=darker(color))  # once per cluster, not per node
            for nid in part.node_ids:
                n = graph.nodes[nid]
                c.node(f"n{nid}", _label(*_node_lines(n, max_label)),
                       tooltip=_tooltip(_node_tooltip(plan, n)), **_pos(pos, f"n{nid}"))

    if show_initializers:
        for name, v in vals.items():
            if v.kind == "initializer" and v.consumers:
                k = init_index[name] = len(init_index)
                g.node(f"init_{k}", _label(dot_text(name, max_label), dot_text(_vshort(graph, name))),
                       shape="note", style="filled", fillcolor=INIT_FILL, fontsize="8",
                       tooltip=_tooltip(["initializer", fmt_value(graph, name)]), **_pos(pos, f"init_{k}"))

    labelled: set[tuple[str, str]] = set()
    for n in graph.nodes:
        dst_prov = provs[plan.assignment[n.id]].name
        for name in dict.fromkeys(x for x in n.inputs if x):
            v = vals.get(name)
            if v is None:
                continue
            tip = fmt_value(graph, name)
            if v.producer is None:
                if name in in_index:
                    g.edge(f"in_{in_index[name]}", f"n{n.id}", tooltip=_tooltip([tip]))
                elif name in init_index:
                    g.edge(f"init_{init_index[name]}", f"n{n.id}", tooltip=_tooltip([tip]),
                           style="dotted", arrowsize="0.4")
                continue
            src = f"n{v.producer}"
            t = tmap.get((name, dst_prov))
            if t is not None and plan.assignment[v.producer] != plan.assignment[n.id]:
                key = (name, dst_prov)
                first = key not in labelled and plan.node_partition[n.id] == t.dst_partitions[0]
                col = TRANSFER_COLORS.get(t.kind, "#d62728")
                text = (f"{t.kind} transfer of {name} ({t.dtype or '?'}{fmt_shape(t.shape)}, "
                        f"{'?' if t.nbytes is None else t.nbytes} bytes) from {t.src_provider} "
                        f"({t.src_device}) to {t.dst_provider} ({t.dst_device}); partitions "
                        + ", ".join(f"P{p}" for p in t.dst_partitions))
                if first:
                    labelled.add(key)
                    g.edge(src, f"n{n.id}", label=_label(dot_text(f"{t.kind} {human_bytes(t.nbytes)}")),
                           color=col, fontcolor=col, penwidth="2.2", style="bold",
                           tooltip=_tooltip([text]))
                else:
                    g.edge(src, f"n{n.id}", color=col, penwidth="1.4", style="dashed",
                           tooltip=_tooltip([text, "(reuses the copy already made)"]))
            elif plan.node_partition[v.producer] != plan.node_partition[n.id]:
                g.edge(src, f"n{n.id}", style="dashed",
                       tooltip=_tooltip([tip, "crosses partitions on one provider (no copy)"]))
            else:
                g.edge(src, f"n{n.id}", tooltip=_tooltip([tip]))
    _output_edges(g, plan, lambda nid: f"n{nid}")
    _subgraph_clusters(g, plan, colors, max_label, lambda nid: f"n{nid}", "")


def _subgraph_clusters(g, plan, colors, max_label, node_id_of, prefix: str, depth: int = 0) -> None:
    """Each subgraph of a control node as a nested cluster (its own partitions, coloured by
    provider), linked to its control node by a dotted edge; recursively for nested control
    flow. Ids are prefixed by the subgraph's position so that they never clash."""
    if not getattr(plan, "children", None):
        return
    by_name = {n.name: n for n in plan.graph.nodes}
    for k, (path, child) in enumerate(plan.children.items()):
        owner_name, _, attr = path.partition("/")
        owner = by_name.get(owner_name)
        sp = f"{prefix}s{k}_"
        cg = child.graph
        with g.subgraph(name=f"cluster_{sp}sub") as c:
            full = f"{prefix and prefix + ' '}{path}"
            c.attr(label=_label(dot_text(f"{path} · {len(cg.nodes)} node(s) · {len(child.partitions)} "
                                         f"partition(s)", 2 * max_label)),
                   style="dashed,rounded", color=EDGE_COLOR, fillcolor="white", fontsize="10",
                   tooltip=_tooltip([f"subgraph {full}", f"{len(child.transfers)} transfer(s)"]))
            for part in child.partitions:
                color = colors.get(part.provider, "#cccccc")
                with c.subgraph(name=f"cluster_{sp}p{part.id}") as cc:
                    cc.attr(label=_label(dot_text(f"P{part.id} · {part.provider}", max_label)),
                            style="rounded,filled", fillcolor=lighter(color), color=darker(color), fontsize="9")
                    for nid in part.node_ids:
                        n = cg.nodes[nid]
                        cc.node(f"{sp}n{nid}", _label(dot_text(n.op_type, max_label)), fillcolor=color,
                                color=darker(color), tooltip=_tooltip(_node_tooltip(child, n)))
            for n in cg.nodes:
                for name in dict.fromkeys(x for x in n.inputs if x):
                    v = cg.values.get(name)
                    if v is not None and v.producer is not None:
                        crossing = child.assignment[v.producer] != child.assignment[n.id]
                        c.edge(f"{sp}n{v.producer}", f"{sp}n{n.id}",
                               **({"color": TRANSFER_COLORS.get("D2D", "#d62728"), "style": "bold"} if crossing
                                  else {}))
        if owner is not None and cg.nodes:
            g.edge(node_id_of(owner.id), f"{sp}n0", style="dotted", arrowhead="none", lhead=f"cluster_{sp}sub",
                   tooltip=_tooltip([f"{owner.name} runs {attr}"]))
        _subgraph_clusters(g, child, colors, max_label, lambda nid, sp=sp: f"{sp}n{nid}", sp, depth + 1)


def _op_counts(plan, part) -> Counter:
    nodes = plan.graph.nodes
    return Counter(nodes[i].op_type for i in part.node_ids)


def _partition_tooltip(plan, part) -> list[str]:
    graph = plan.graph
    ops = _op_counts(plan, part)
    lines = [f"partition P{part.id}: {part.provider} ({part.device}), {part.n_nodes} node(s)",
             "ops: " + ", ".join(f"{op}×{k}" for op, k in ops.most_common(MAX_LISTED))
             + (" ..." if len(ops) > MAX_LISTED else ""),
             f"bytes in: {human_bytes(part.bytes_in)}, bytes out: {human_bytes(part.bytes_out)}"]
    if part.inputs:
        lines += ["inputs:"] + _listed(graph, part.inputs)
    if part.outputs:
        lines += ["outputs:"] + _listed(graph, part.outputs)
    return lines


def _crossings(plan):
    """Values crossing each (producer partition, consumer partition) pair, and each
    (graph input, consumer partition) pair."""
    vals = plan.graph.values
    np_ = plan.node_partition
    in_index = {n: i for i, n in enumerate(plan.graph.inputs)}
    agg: dict[tuple[int, int], list[str]] = {}
    inp: dict[tuple[int, int], list[str]] = {}
    for part in plan.partitions:
        for name in part.inputs:
            v = vals[name]
            if v.producer is None:
                if name in in_index:
                    inp.setdefault((in_index[name], part.id), []).append(name)
                continue
            agg.setdefault((np_[v.producer], part.id), []).append(name)
    return agg, inp


def _partition_lines(plan, part, max_label, ops_limit) -> list[str]:
    """A partition box's label lines (escaped)."""
    ops = _op_counts(plan, part)
    top = ", ".join(f"{op}×{k}" for op, k in ops.most_common(3)) + (" …" if len(ops) > 3 else "")
    return [dot_text(f"P{part.id} · {part.provider}", max_label),
            dot_text(f"{part.device} · {part.n_nodes} node(s)", max_label), dot_text(top, ops_limit)]


def _partition_level(g, plan, colors, max_label, agg, inp, pos):
    graph = plan.graph
    vals = graph.values
    np_ = plan.node_partition
    parts = plan.partitions
    tmap = {(t.value, t.dst_provider): t for t in plan.transfers}
    ops_limit = 2 * max_label if not pos else max_label

    for part in parts:
        color = colors[part.provider]
        g.node(f"p{part.id}", _label(*_partition_lines(plan, part, max_label, ops_limit)),
               fillcolor=color, color=darker(color), penwidth="1.5",
               tooltip=_tooltip(_partition_tooltip(plan, part)), **_pos(pos, f"p{part.id}"))

    for (k, b), names in inp.items():
        g.edge(f"in_{k}", f"p{b}", tooltip=_tooltip([fmt_value(graph, n) for n in names]))

    for (a, b), names in agg.items():
        pa, pb = parts[a], parts[b]
        nbytes = 0
        for name in names:
            nb = vals[name].nbytes
            if nb is None:
                nbytes = None
                break
            nbytes += nb
        tip = [f"P{a} ({pa.provider}) → P{b} ({pb.provider}): {len(names)} value(s), "
               f"{human_bytes(nbytes)}"] + _listed(graph, names)
        if pa.provider_index == pb.provider_index:
            g.edge(f"p{a}", f"p{b}", label=_label(dot_text(f"{len(names)} value(s) · {human_bytes(nbytes)}")),
                   style="dashed", penwidth=_penwidth(nbytes), weight=_weight(nbytes),
                   tooltip=_tooltip(tip + ["same provider: no copy"]))
            continue
        kinds = []
        reused = 0
        for name in names:
            t = tmap.get((name, pb.provider))
            if t is None:
                continue
            kinds.append(t.kind)
            if t.dst_partitions and t.dst_partitions[0] != b:
                reused += vals[name].nbytes or 0
        kind = "/".join(dict.fromkeys(kinds)) or "copy"
        col = TRANSFER_COLORS.get(kinds[0], "#d62728") if kinds else "#d62728"
        text = f"{kind} · {len(names)} value(s) · {human_bytes(nbytes)}"
        if reused and nbytes is not None:
            text += f"\n({human_bytes(reused)} reuse an earlier copy)"
        g.edge(f"p{a}", f"p{b}", label=_label(dot_text(text, None, multiline=True)), color=col,
               fontcolor=col, style="bold", penwidth=_penwidth(nbytes), weight=_weight(nbytes),
               tooltip=_tooltip(tip))
    _output_edges(g, plan, lambda nid: f"p{np_[nid]}")


def _legend(g, plan, colors, at=None):
    rows = []
    counts = plan.placement_counts()
    for i, p in enumerate(plan.providers):
        c = colors[p.name]
        rows.append(f'<TR><TD BGCOLOR="{c}" WIDTH="18"> </TD><TD ALIGN="LEFT">{i}. '
                    f'{_html_text(p.name)} ({_html_text(p.device)}) · {counts.get(p.name, 0)} node(s)'
                    f'</TD></TR>')
    kinds = list(dict.fromkeys(t.kind for t in plan.transfers))
    for k in kinds:
        rows.append(f'<TR><TD><FONT COLOR="{TRANSFER_COLORS.get(k, "#d62728")}">&#10230;</FONT></TD>'
                    f'<TD ALIGN="LEFT">{_html_text(k)} transfer</TD></TR>')
    rows.append('<TR><TD>&#9711;</TD><TD ALIGN="LEFT">graph input (double: output)</TD></TR>')
    table = _Html('<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3">'
                  '<TR><TD COLSPAN="2"><B>providers (priority order)</B></TD></TR>'
                  + "".join(rows) + "</TABLE>>")
    g.node("legend", table, shape="plaintext", style="", fontsize="9",
           tooltip=graphviz.nohtml("legend"), **({"pos": f"{at[0]:.0f},{at[1]:.0f}"} if at else {}))


# -- find and zoom in a drawn picture (the app: its HTML widget runs no script) -----------------
_SVG_BOX = re.compile(r'<g id="(?:node|clust)\d+" class="(node|cluster)">')
_SVG_TEXT = re.compile(r"<text[^>]*>([^<]*)</text>")
_SVG_TIP = re.compile(r'xlink:title="([^"]*)"')
_SVG_SHAPE = re.compile(r'<(path|polygon|ellipse)\b([^>]*)>')
_SVG_NUM = re.compile(r"-?\d+(?:\.\d+)?(?:e-?\d+)?")
_SVG_TRANSLATE = re.compile(r'<g id="graph0" class="graph" transform="[^"]*translate\((-?[\d.]+) (-?[\d.]+)\)"')
_SVG_ROOT = re.compile(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"\s+viewBox="([-\d. ]+)"')


def _svg_attr(attrs: str, name: str) -> str | None:
    m = re.search(rf'\b{name}="([^"]*)"', attrs)
    return m.group(1) if m else None


def tooltip_names(tip: str) -> tuple[list[str], list[str]]:
    """``(names, tensors)`` a box has in its tooltip: its ``name:`` lines, and the tensors listed
    under ``inputs:`` / ``outputs:`` (``  conv3_1: float32[1,64,56,56]`` → ``conv3_1``), so that a
    search finds an unnamed node by the tensor names a Netron user knows."""
    names, tensors, listing = [], [], False
    for line in tip.replace("\xa0", " ").split("\n"):  # dot writes the indent's second space as &#160;
        if line.startswith("name: "):
            names.append(line[6:])
        elif line in ("inputs:", "outputs:"):
            listing = True
            continue
        elif listing and line.startswith("  ") and not line.startswith("  ... and "):
            tensors.append(line[2:].split(": ", 1)[0])
            continue
        listing = False
    return names, tensors


def find_in_svg(svg: str, query: str) -> list[tuple[int, tuple[float, float, float, float]]]:
    """Boxes of a Graphviz picture whose label, tooltip ``name:`` line or a tensor it reads or
    writes (:func:`tooltip_names`) contains ``query`` (case-insensitive; a box called so first, then
    one reading or writing a tensor called so, then partial matches):
    ``(offset of the box's <g>, (x, y, w, h))`` in the picture's viewBox units."""
    import html as _html
    q = query.strip().lower()
    if not q:
        return []
    t = _SVG_TRANSLATE.search(svg)
    tx, ty = (float(t.group(1)), float(t.group(2))) if t else (0.0, 0.0)
    starts = [m.start() for m in _SVG_BOX.finditer(svg)]
    exact, by_tensor, part = [], [], []
    for i, at in enumerate(starts):
        seg = svg[at:starts[i + 1] if i + 1 < len(starts) else len(svg)]
        end = seg.find('<g id="edge')
        seg = seg if end < 0 else seg[:end]
        names = [_html.unescape(x).lower() for x in _SVG_TEXT.findall(seg)]
        tensors: list[str] = []
        tip = _SVG_TIP.search(seg)
        if tip:
            more, ts = tooltip_names(_html.unescape(tip.group(1)))
            names += [x.lower() for x in more]
            tensors = [x.lower() for x in ts]
        tier = 0 if q in names else 1 if q in tensors else 2 if any(q in n for n in names + tensors) else None
        if tier is None:
            continue
        shape = _SVG_SHAPE.search(seg)
        if shape is None:
            continue
        kind, attrs = shape.groups()
        if kind == "ellipse":
            cx, cy, rx, ry = (float(_svg_attr(attrs, k) or 0) for k in ("cx", "cy", "rx", "ry"))
            xs, ys = [cx - rx, cx + rx], [cy - ry, cy + ry]
        else:
            nums = [float(x) for x in _SVG_NUM.findall(_svg_attr(attrs, "d" if kind == "path" else "points") or "")]
            xs, ys = nums[0::2], nums[1::2]
        if not xs or not ys:
            continue
        box = (min(xs) + tx, min(ys) + ty, max(xs) - min(xs), max(ys) - min(ys))
        (exact, by_tensor, part)[tier].append((at, box))
    return exact + by_tensor + part


def focus_svg(svg: str, query: str = "", zoom: float | None = 1.0, window=(560.0, 360.0)) -> tuple[str, str]:
    """``(svg, note)``: the picture with its first box matching ``query`` outlined and the view
    cut to a ``window`` (viewBox units) around it, drawn at ``zoom`` (None: fit the width).
    Without a query only the zoom changes."""
    root = _SVG_ROOT.search(svg)
    if root is None:
        return svg, ""
    note = ""
    w, h = float(root.group(1)), float(root.group(2))
    view = root.group(3)
    hits = find_in_svg(svg, query) if query.strip() else []
    if query.strip():
        if hits:
            at, (x, y, bw, bh) = hits[0]
            ww, wh = max(window[0], bw * 1.5), max(window[1], bh * 1.5)
            view = f"{x + bw / 2 - ww / 2:.2f} {y + bh / 2 - wh / 2:.2f} {ww:.2f} {wh:.2f}"
            w, h = ww, wh
            g_end = svg.index(">", at)
            head = svg[at:g_end].replace('class="node"', 'class="node hx-found"').replace(
                'class="cluster"', 'class="cluster hx-found"')
            svg = svg[:at] + head + svg[g_end:]
            note = f"{len(hits)} match(es); showing the first, outlined in red"
        else:
            note = "nothing matches"
    size = 'width="100%"' if zoom is None else f'width="{w * zoom:.2f}pt" height="{h * zoom:.2f}pt"'
    svg = svg[:root.start()] + f'<svg {size}\n viewBox="{view}"' + svg[root.end():]
    return svg, note
