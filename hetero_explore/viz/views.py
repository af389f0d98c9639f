"""The views, registered once: each is a name, a title and ``render(state) -> HTML``; the app's
tabs and the report's sections are both built from :func:`registered` (a view added here
appears in both). ``state`` is a :class:`ViewState`, a read-only snapshot of an
:class:`~hetero_explore.session.explorer.Explorer` (:func:`snapshot`) or of a plan and its run (the
report); ``state.medium`` says whether the HTML goes into the app (``"app"``: tables filtered,
sorted and paged here, no script) or the report (``"report"``: the page's script does that).

A view that ``needs_run`` says "not executed yet" in the app and is left out of a report of a
plan that was not run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..session.explorer import TableOptions, ViewOptions
from ..ir.units import human_bytes, human_seconds
from .html import MAX_ROWS, esc, kv_table, table_html

#: most rows a table shows per page in the app
APP_PAGE_ROWS = 300
#: most boxes (nodes or partitions) drawn live in the app; above it the Graph view asks first
MAX_DRAW = 2500
#: columns whose cells take their provider's colour (in the report)
PROVIDER_COLUMNS = frozenset({"provider", "from_provider", "to_provider", "src_provider", "dst_provider",
                              "blamed_provider"})
#: a report of a model with name scopes also carries its node view up to this many nodes
REPORT_NODE_VIEW_MAX = 5000


# -- the snapshot a view is drawn from ----------------------------------------------------------
@dataclass(frozen=True)
class ViewState:
    """Everything a view is drawn from (read-only)."""

    plan: Any
    """The plan shown (the current one, or the last that worked when the current fails)."""
    plan_is_current: bool
    """False when the current configuration failed and ``plan`` is an older one."""
    plan_index: int | None
    """History index of the shown plan."""
    previous: Any
    """The plan before it (for the Changes view), or None."""
    run: Any
    """The last run of the shown plan, or None."""
    diff: Any
    """Its comparison with the reference run, or None."""
    reference: str
    """Reference provider name."""
    error: str
    """Why the current configuration cannot be planned ('' when it can)."""
    run_error: str
    """Why the last execution failed ('' when it did not)."""
    level: str = "auto"
    """Graph level: auto, node, partition or scope."""
    svg: Callable | None = None
    """``svg(plan, level[, expand]) -> str`` (cached by the explorer)."""
    export_message: str = ""
    """HTML of the last export's result (the app)."""
    max_draw: int = MAX_DRAW
    """Most boxes drawn without asking (0: no limit)."""
    drawing: bool = False
    """The picture is being laid out in the background: show a placeholder."""
    compile_seconds: float = 0.0
    """Seconds the last run spent compiling kernels (inside its timings)."""
    find: str = ""
    """Graph view: the box to find and show (see :func:`~.graph.focus_svg`)."""
    zoom: str = "100%"
    """Graph view: ``fit`` or a percentage."""
    expand: tuple = ()
    """Scope level: the scopes drawn open."""
    tables: tuple = ()
    """``(view, TableOptions)`` pairs for the main tables of :data:`TABLE_VIEWS`."""
    medium: str = "app"
    """``"app"`` or ``"report"``."""
    layout: str = "auto"
    """Report: partition-level layout, as in :func:`~.graph.plan_to_graphviz`."""
    max_rows: int = MAX_ROWS
    """Report: longest table shown."""
    provenance: dict = field(default_factory=dict)
    """Report: date, command, inputs, reference, not_run (see :func:`~.report.plan_to_html`)."""
    cell_class: Callable | None = None
    """``(column, value) -> css class`` (the report colours provider cells)."""
    timings: Any = None
    op_ulp: Any = None
    """Per op type and ONNX Runtime provider, the largest ULP of a node run alone on the inputs the
    reference gave it (:func:`~hetero_explore.analysis.divergence.op_ulp_table`), or None."""
    """:class:`~hetero_explore.analysis.timing.Timings` of the run (warm median/p90 over N, first
    run and compile time apart), or None when no warm runs were timed."""

    def table_options(self, view: str) -> TableOptions:
        return dict(self.tables).get(view, TableOptions())


def snapshot(ex, *, run_error: str = "", export_message: str = "", drawing: bool = False,
             max_draw: int = MAX_DRAW) -> ViewState:
    """The :class:`ViewState` of an explorer now (``run_error``, ``export_message`` and
    ``drawing`` are the app's: what its last action did)."""
    step = ex.current
    plan, current, idx = None, False, None
    if step is not None and step.plan is not None:
        plan, current, idx = step.plan, True, step.index
    else:
        for s in reversed(ex.history):
            if s.plan is not None:
                plan, idx = s.plan, s.index
                break
    previous = None
    if idx is not None:
        for s in reversed(ex.history[:idx]):
            if s.plan is not None and s.plan is not plan:
                previous = s.plan
                break
    run = ex.run if current else None
    diff = ex.diff if current else None
    v: ViewOptions = ex.view_options
    return ViewState(plan=plan, plan_is_current=current, plan_index=idx, previous=previous, run=run, diff=diff,
                     reference=ex.reference_provider.name, error=(step.error or "") if step is not None else "",
                     run_error=run_error, level=v.level, svg=ex.svg, export_message=export_message,
                     max_draw=0 if v.draw_big else max_draw, drawing=drawing,
                     compile_seconds=ex.compile_seconds if run is not None else 0.0, find=v.find, zoom=v.zoom,
                     expand=v.expand, tables=v.tables, timings=getattr(ex, "timings", None) if run is not None else None,
                     op_ulp=getattr(ex, "op_ulp", None) if run is not None else None,
                     provenance={"reference": ex.reference_provider.name,
                                 "inputs": getattr(ex, "_inputs_source", None),
                                 "date": _utc(ex.history[idx].when) + " (planned)" if idx is not None else ""})


def _utc(t: float) -> str:
    import datetime
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


# -- the registry ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class View:
    """One view: a tab of the app and a section of the report."""

    name: str
    """Tab title (``"Placement"``)."""
    title: str
    """Section heading in the report."""
    render: Callable[[ViewState], str]
    """``render(state) -> HTML``; pure."""
    needs_run: bool = False
    """Shows a run: left out of a report of a plan that was not executed."""
    section: str = ""
    """The report section's id (``sec-<section>``)."""


_REGISTRY: dict[str, View] = {}


def register(name: str, title: str | None = None, *, needs_run: bool = False, section: str | None = None):
    """Decorator: register ``render(state) -> HTML`` as the view ``name`` (once; a second
    registration of a name is an error). It then appears in the app and in the report."""
    def deco(fn):
        if name in _REGISTRY:
            raise ValueError(f"a view named {name!r} is registered already")
        _REGISTRY[name] = View(name, title or name, fn, needs_run, section or name.lower())
        return fn
    return deco


def unregister(name: str) -> None:
    """Remove a registered view (tests and plug-ins)."""
    _REGISTRY.pop(name, None)


def registered() -> tuple[View, ...]:
    """Every registered view, in registration order (the report's section order and the
    app's tab order)."""
    return tuple(_REGISTRY.values())


def view_names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def render(view: str, s: ViewState) -> str:
    """The HTML of one view. Pure: depends only on ``s``."""
    v = _REGISTRY.get(view)
    if v is None:
        raise ValueError(f"unknown view {view!r}; views are {view_names()}")
    if s.plan is None:
        return f"<div class='hx-note'>No plan: {esc(s.error or 'nothing planned yet')}</div>"
    stale = "" if s.plan_is_current or s.medium != "app" else (
        "<div class='hx-warn-box'>The current configuration cannot be planned (see the error above); "
        f"showing plan #{s.plan_index}, the last one that worked.</div>")
    return stale + v.render(s)


# -- helpers shared by the views --------------------------------------------------------------
def error_box(text: str, css: str) -> str:
    return f"<div class='hx-error-box {css}'>{esc(text)}</div>" if text else ""


def _medium_table(s: ViewState, df, table_id: str, what: str = "rows", opts: TableOptions | None = None,
           cell_class=None) -> str:
    """A table for the medium: in the app one page of it under ``opts``; in the report every row
    (up to ``max_rows``) with the page's filter box and the provider colours."""
    if s.medium == "app":
        return table_html(df, table_id, what=what, max_rows=APP_PAGE_ROWS, opts=opts, cell_class=cell_class)
    return table_html(df, table_id, what=what, max_rows=s.max_rows, filter=True,
                      cell_class=cell_class or s.cell_class)


def _as_df(obj):
    import pandas as pd

    if obj is None:
        return None
    if isinstance(obj, pd.DataFrame):
        return obj
    for attr in ("timings_df", "to_df", "to_frame"):
        f = getattr(obj, attr, None)
        if callable(f):
            return f()
    try:
        return pd.DataFrame(obj)
    except Exception:
        return None


#: views whose main table has filter / sort / page controls in the app
TABLE_VIEWS = ("Placement", "Partitions", "Transfers")


def main_table(view: str, plan):
    """The DataFrame of ``view``'s main table (the one the app pages, sorts and filters)."""
    if view == "Placement":
        from .notes import placement_notes
        df = plan.placement_df()
        notes = placement_notes(plan)
        if notes:  # accepted on conditions a profile's table states only in words: said on the node
            subs = df["subgraph"] if "subgraph" in df.columns else [""] * len(df)
            df["note"] = [notes.get((sub, nid), "") for sub, nid in zip(subs, df["node_id"])]
        return df
    if view == "Partitions":
        return plan.partitions_df()
    if view == "Transfers":
        return plan.transfers_df()
    raise ValueError(f"{view!r} has no main table; those that do: {TABLE_VIEWS}")


def graph_boxes(plan, level: str, expand=()) -> tuple[str, int]:
    """(level drawn, number of boxes) for ``level`` (``auto`` resolved as the graph view does)."""
    from .graph import auto_level
    from .graphview import wants_interactive
    if wants_interactive(plan, level):
        return "interactive", 0              # laid out in the browser: nothing drawn here
    n = len(plan.graph.nodes)
    if level == "auto":
        level = auto_level(plan)
    if level == "scope":
        from .scopes import ScopeView
        return level, ScopeView(plan, expand=expand).n_boxes
    return level, (n if level == "node" else len(plan.partitions))


def diff_verdict(diff, reference: str) -> tuple[bool | None, str]:
    """(all identical?, one line) for a comparison DataFrame."""
    if diff is None:
        return None, "not executed yet"
    n = len(diff)
    same = int(diff["byte_identical"].sum()) if "byte_identical" in diff else 0
    if n and same == n:
        return True, f"byte-identical: all {n} output(s) equal the reference run on {reference}, byte for byte"
    return False, f"NOT byte-identical: {n - same} of {n} output(s) differ from the reference run on {reference}"


#: what a byte-identity verdict means, spelled out
DIFF_MEANING = (
    "Each row is one graph output. byte_identical is True when the heterogeneous run's output has exactly "
    "the bytes of the single-provider reference run's output (same dtype, same shape, every element's bit "
    "pattern equal, NaN payloads included) — not merely close within a tolerance. When it is False, n_diff "
    "counts the elements that differ, max_abs and max_ulp measure the largest difference, and the first "
    "differing index and the node or transfer blamed for it say where to look.")


def render_changes(c) -> str:
    """HTML of a :class:`~hetero_explore.planner.plandiff.PlanComparison`."""
    out = [f"<div class='hx-changes-summary'><b>Changes:</b> {esc(c.summary())}</div>"]
    if c.changed:
        for title, df, what in (("Nodes that moved", c.moved, "moved nodes"),
                                ("Partitions added", c.partitions_added, "partitions added"),
                                ("Partitions removed", c.partitions_removed, "partitions removed"),
                                ("Transfers added", c.transfers_added, "transfers added"),
                                ("Transfers removed", c.transfers_removed, "transfers removed")):
            if len(df):
                out.append(f"<div class='hx-note'><b>{title}</b> ({len(df)})</div>"
                           + table_html(df, what=what, max_rows=APP_PAGE_ROWS))
    return "".join(out)


# -- the views, in report order (the app opens on the Graph tab) --------------------------------------
@register("About", "About this report")
def _about(s: ViewState) -> str:
    """Date, how it was made, versions, the inputs and the reference: what a colleague needs to
    trust (or reproduce) what the views show."""
    import datetime

    import pandas as pd

    from ..ir.about import versions

    plan, run, diff, prov = s.plan, s.run, s.diff, s.provenance
    made = prov.get("command") or ("hetero_explore: Plan.to_html(...) / Explorer.export_html(...) from Python"
                                   if s.medium == "report" else "hetero_explore: explore(...).show()")
    date = prov.get("date") or (datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
                                if s.medium == "report" else "")  # the app's views stay pure
    rows = ([("date", date)] if date else []) + [("made by", made)]
    rows += [(f"{k} version", v) for k, v in versions().items()]
    rows.append(("providers (priority order)", ", ".join(p.name for p in plan.providers)))
    rows.append(("placement policy", plan.policy))
    if diff is not None:
        rows.append(("reference run", f"single provider {prov.get('reference', s.reference)!s}, same inputs"))
    if prov.get("not_run"):
        rows.append(("execution", f"nothing was executed: {prov['not_run']}"))
    elif run is None:
        rows.append(("execution", "not executed (plan only)"))
    out = [kv_table(rows)]
    inputs = getattr(run, "inputs", None) if run is not None else None
    if inputs:
        source = prov.get("inputs") or "given by the caller"
        out.append(f"<h3>Inputs</h3><p class=\"note\">{esc(source)}</p>")
        recs = []
        for name, a in inputs.items():
            a = np.asarray(a)
            rec = {"input": name, "dtype": a.dtype.name, "shape": str(tuple(a.shape)), "elements": int(a.size)}
            if a.size and a.dtype.kind in "fiub":
                rec.update(min=float(a.min()), max=float(a.max()))
            else:
                rec.update(min=None, max=None)
            recs.append(rec)
        out.append(table_html(pd.DataFrame(recs, columns=["input", "dtype", "shape", "elements", "min", "max"]),
                              "he-inputs"))
    return "".join(out)


@register("Providers", "Providers (priority order)")
def _providers(s: ViewState) -> str:
    from .html import td
    plan = s.plan
    counts = plan.placement_counts()
    rows = ['<div class="tablewrap hx-table-wrap"><table class="data hx-table" id="he-providers"><thead><tr>'
            "<th>priority</th><th>provider</th><th>device</th><th>type</th><th>executes</th>"
            "<th>capability</th><th>mask</th><th>nodes placed</th></tr></thead><tbody>"]
    for i, p in enumerate(plan.providers):
        inner = getattr(p, "inner", p)
        kind = type(p).__name__ if inner is p else f"{type(p).__name__} over {type(inner).__name__}"
        mask = []
        deny = getattr(p, "deny", None)
        allow = getattr(p, "allow", None)
        if inner is not p:
            if deny:
                mask.append("deny: " + ", ".join(sorted(map(str, deny))))
            if allow is not None:
                mask.append("allow only: " + ", ".join(sorted(map(str, allow))))
            if getattr(p, "check", None) is not None:
                mask.append("custom capability check")
        ops = getattr(inner, "ops", None)
        cap = getattr(inner, "capability", None)
        if cap is not None:
            capability = f"the op table of {getattr(cap, 'name', type(cap).__name__)}"
        elif isinstance(ops, dict) and ops:
            capability = f"{len(ops)} op(s): " + ", ".join(sorted(map(str, ops)))
        elif ops is not None and not isinstance(ops, dict):
            capability = ", ".join(sorted(map(str, ops)))
        else:
            capability = "its kernel registry"
        try:
            executes = bool(getattr(p, "can_execute"))
        except Exception:
            executes = None
        rows.append(
            f'<tr><td class="num">{i}</td><td class="prov-{i}">'
            f'{esc(p.name)}</td><td>{esc(p.device)}</td><td>{esc(kind)}</td>'
            f'{td("executes", executes)}<td>{esc(capability)}</td><td>{esc("; ".join(mask) or "—")}</td>'
            f'<td class="num">{counts.get(p.name, 0)}</td></tr>')
    rows.append("</tbody></table></div>")
    return "".join(rows) + _table_vs_ep(s)


def _table_vs_ep(s: ViewState) -> str:
    """For each doc-table profile in the provider list: what its table says next to what its real
    execution provider says on this graph (ONNX Runtime's own assignment), where that EP is usable
    here; otherwise why it is not."""
    from ..planner.ortplan import claims_side_by_side, real_ep_of
    from ..providers.virtual import unmask
    out = []
    for p in s.plan.providers:
        ep_name = real_ep_of(p)
        if ep_name is None:
            continue
        try:
            from ..providers import resolve
            ep = resolve(ep_name)
            ok, why = ep.available()
        except Exception as e:   # noqa: BLE001 - onnxruntime missing: say so, the table stays
            ok, why = False, str(e)
        title = f"{p.name}: the table says / {ep_name} says"
        if not ok:
            out.append(f"<h4 class='hx-table-vs-ep'>{esc(title)}</h4><div class='hx-note note'>"
                       f"{esc(ep_name)} is not usable here, so only the table answers: {esc(why)}</div>")
            continue
        from ..providers.profiles import profile_provider
        df = claims_side_by_side(s.plan.graph, profile_provider(unmask(p).profile.name, execute=False), ep)
        out.append(f"<h4 class='hx-table-vs-ep'>{esc(title)} (nodes claimed per op type; disagreements first)</h4>"
                   + _medium_table(s, df, f"he-table-vs-ep-{len(out)}", what="op types"))
    return "".join(out)


@register("Ops", "Ops per provider")
def _ops(s: ViewState) -> str:
    return _medium_table(s, s.plan.ops_df(), "he-ops", what="op types")


def _optimizations_text(graph) -> str:
    from ..load.optimize import summary_text
    recs = list(getattr(graph, "optimizations", ()))
    if not recs:
        return "none"
    each = "; ".join(f"{r['node']} ← {', '.join(r['removed'])}" if r["rule"] == "conv_bn" else
                     f"{', '.join(r['removed'])} → {r['node']}" if r["rule"] == "matmul_add_gemm" else
                     f"{r['node']} removed" for r in recs[:200])
    return summary_text(recs) + f" ({each}{' …' if len(recs) > 200 else ''})"


def _dt(graph, name):
    v = graph.values.get(name)
    return None if v is None or v.dtype is None else v.dtype.name


def _shape(graph, name):
    v = graph.values.get(name)
    return None if v is None else v.shape


@register("Model", "Model")
def _model(s: ViewState) -> str:
    import pandas as pd

    plan = s.plan
    graph = plan.graph
    info = dict(graph.info or {})
    n_init = sum(1 for v in graph.values.values() if v.kind == "initializer")
    init_bytes = sum((v.nbytes or 0) for v in graph.values.values() if v.kind == "initializer")
    rows = [("graph name", graph.name)]
    rows += [(k.replace("_", " "), v) for k, v in info.items() if v not in (None, "")]
    rows.append(("opset imports", ", ".join(f"{d or 'ai.onnx'}: {v}" for d, v in graph.opset_imports.items())))
    rows.append(("nodes", f"{len(graph.nodes):,}"))
    rows.append(("initializers", f"{n_init:,} ({human_bytes(init_bytes)})"))
    rows.append(("op types", ", ".join(graph.op_types())))
    if graph.functions:
        rows.append(("model-local functions", ", ".join(f"{d}::{n}" if d else n for d, n in graph.functions)))
    rows.append(("inlined functions", ", ".join(plan.inlined_functions) or "none"))
    rows.append(("folded nodes", (f"{len(graph.folded_nodes)}: " + ", ".join(graph.folded_nodes[:200])
                                  + (" …" if len(graph.folded_nodes) > 200 else ""))
                 if graph.folded_nodes else "none"))
    rows.append(("load-time optimisations", _optimizations_text(graph)))
    if graph.symbolic_values:
        rows.append(("symbolic / unknown shapes", ", ".join(graph.symbolic_values[:200])))
    out = [kv_table(rows)]
    io = [{"role": "input", "name": n, "dtype": _dt(graph, n), "shape": _shape(graph, n)} for n in graph.inputs]
    io += [{"role": "output", "name": n, "dtype": _dt(graph, n), "shape": _shape(graph, n)} for n in graph.outputs]
    out.append("<h3>Inputs and outputs</h3>")
    out.append(table_html(pd.DataFrame(io, columns=["role", "name", "dtype", "shape"]), "he-io"))
    if graph.metadata:
        out.append("<h3>Metadata</h3>")
        out.append(table_html(pd.DataFrame([{"key": k, "value": v} for k, v in graph.metadata.items()],
                                           columns=["key", "value"]), "he-metadata"))
    if graph.doc_string:
        out.append("<h3>Doc string</h3>")
        out.append(f"<pre>{esc(graph.doc_string)}</pre>")
    return "".join(out)


# -- the graph ----------------------------------------------------------------------------------------
def _render_dot(plan, **kw):
    """``(svg or None, html of a warning or '', the PlanGraph or None)``."""
    from .graph import GraphvizNotFoundError, plan_to_graphviz
    try:
        dot = plan_to_graphviz(plan, **kw)
    except Exception as e:  # building the DOT never needs dot; still, never lose the report
        return None, f'<p class="warn">the DAG could not be built: {esc(type(e).__name__)}: {esc(e)}</p>', None
    try:
        return dot.svg(), "", dot
    except GraphvizNotFoundError as e:
        return None, (f'<p class="warn">{esc(e)}</p><details><summary>DOT source</summary>'
                      f"<pre>{esc(dot.source)}</pre></details>"), dot
    except Exception as e:
        return None, (f'<p class="warn">Graphviz failed to render the DAG: {esc(type(e).__name__)}: {esc(e)}</p>'
                      f"<details><summary>DOT source</summary><pre>{esc(dot.source)}</pre></details>"), dot


_LEVEL_TEXT = {"node": "one box per node, one cluster per partition",
               "partition": "one box per partition; edges carry the bytes that cross them",
               "scope": "the exporter's name scopes, one box each (striped by provider share); "
                        "click one to open it in the node view"}


INTERACTIVE_NOTE = ("Laid out in your browser by ELK's layered algorithm; scopes (the exporter's names, or blocks "
                    "cut where the graph is narrow) start closed: click a box to open it, its frame's title to "
                    "close it. Search finds op types, node names and tensor names (Enter: next match). Drag to "
                    "pan, wheel to zoom; the minimap shows where you are; red edges are transfers.")


def _dag_report(s: ViewState) -> str:
    """The report's DAG: big models in the interactive view (:mod:`.graphview`); otherwise the
    drawn level and, for a scoped model, the other levels behind view buttons; panned, zoomed
    and searched by the page's script."""
    from .graphview import report_section, wants_interactive
    from .scopes import model_scopes

    plan = s.plan
    if wants_interactive(plan, s.level):
        return f'<p class="note">{esc(INTERACTIVE_NOTE)}</p>' + report_section(plan)
    svg, warn, dot = _render_dot(plan, level=s.level, layout=s.layout, expand=s.expand) if s.level == "scope" \
        else _render_dot(plan, level=s.level, layout=s.layout)
    if svg is None:
        return warn
    pictures = [(dot.level, "he-dag-box", svg)]
    n = len(plan.graph.nodes)
    if n > 1 and model_scopes(plan.graph):  # the other views of a scoped model, for its view buttons
        extra = {"node": ["scope"], "partition": ["scope", "node"], "scope": ["partition", "node"]}[dot.level]
        for lv in extra:
            if lv == "node" and n > REPORT_NODE_VIEW_MAX:
                continue
            more, _warn, _dot = _render_dot(plan, level=lv)
            if more is not None:
                pictures.append((lv, f"he-dag-{lv}s", more))
    buttons = ""
    if len(pictures) > 1:
        buttons = "view: " + "".join(
            f'<button class="dag-view" type="button" data-target="{bid}" aria-pressed="false">{esc(lv)}s</button> '
            for lv, bid, _svg in pictures)
    notes = "; ".join(f"{esc(lv)} view: {esc(_LEVEL_TEXT[lv])}" for lv, _bid, _svg in pictures)
    boxes = "".join(f'<div class="dag" id="{bid}" data-view="{esc(lv)}"{" hidden" if k else ""}>{pic}</div>'
                    for k, (lv, bid, pic) in enumerate(pictures))
    return (f'<p class="note">{notes}. Hover for op, shapes and dtypes; drag to '
            'pan, scroll or the +/\u2212 buttons to zoom.</p><p>' + buttons +
            '<button class="fit" type="button" data-target="he-dag-box">actual size</button> '
            '<input id="he-node-search" class="node-search" type="search" '
            'placeholder="find a node, scope or partition by name\u2026" aria-label="find a node by name"> '
            '<span id="he-node-found" class="note" aria-live="polite"></span></p>' + boxes)


@register("Graph", "DAG", section="dag")
def _graph(s: ViewState) -> str:
    if s.medium == "report":
        return _dag_report(s)
    p = s.plan
    # the plan's summary is above the tabs; the caption says which plan and picture this is
    head = (f"<div class='hx-graph-caption'>plan #{s.plan_index}: {len(p.graph.nodes):,} node(s), "
            f"{len(p.partitions):,} partition(s) on {len(p.devices)} device(s)</div>")
    from .graphview import wants_interactive
    if wants_interactive(p, s.level):  # the app shows the interactive view under this caption
        return head + f"<div class='hx-note hx-graph-interactive'>{esc(INTERACTIVE_NOTE)}</div>"
    drawn, boxes = graph_boxes(p, s.level, s.expand)
    if s.max_draw and boxes > s.max_draw:
        return head + (
            f"<div class='hx-warn-box hx-graph-skipped'>The {drawn}-level picture has {boxes:,d} boxes, "
            f"more than the live limit ({s.max_draw}); laying it out takes a while. Tick "
            "<b>draw big graphs</b>, pick another level, or call <code>plan.to_graphviz()</code> "
            "in a cell.</div>")
    if s.drawing:
        return head + (f"<div class='hx-note hx-graph-drawing'>laying out the {drawn}-level "
                       f"picture ({boxes:,d} boxes)\u2026</div>")
    try:
        if s.level == "scope":
            svg = (s.svg(p, s.level, s.expand) if s.svg is not None
                   else p.to_graphviz(level="scope", expand=s.expand).svg())
        else:
            svg = s.svg(p, s.level) if s.svg is not None else p.to_graphviz(level=s.level).svg()
        note = ""
        if s.find.strip() or s.zoom != "100%":
            from .graph import focus_svg
            svg, note = focus_svg(svg, s.find, None if s.zoom == "fit" else float(s.zoom.rstrip("%")) / 100)
        body = ((f"<div class='hx-note hx-find-result'>find <code>{esc(s.find)}</code>: {esc(note)}</div>"
                 if note else "") + f"<div class='hx-svg'>{svg}</div>")
    except Exception as e:
        body = error_box(f"cannot draw the graph: {type(e).__name__}: {e}", "hx-graph-error")
    return head + body


# -- the plan's tables ----------------------------------------------------------------------------------
@register("Placement", "Placement")
def _placement(s: ViewState) -> str:
    df = main_table("Placement", s.plan)
    return (f"<div class='hx-note note'>{len(df):,d} node(s); <code>declined_by</code> lists each "
            "higher-priority provider's reason</div>"
            + _medium_table(s, df, "he-placement", what="nodes", opts=s.table_options("Placement")))


def _splits_df(p):
    import pandas as pd
    return pd.DataFrame([{"from_partition": c.a, "to_partition": c.b, "path": " → ".join(c.path)}
                         for c in p.convexity_splits], columns=["from_partition", "to_partition", "path"])


@register("Partitions", "Partitions")
def _partitions(s: ViewState) -> str:
    p = s.plan
    body = _medium_table(s, main_table("Partitions", p), "he-partitions", what="partitions",
                  opts=s.table_options("Partitions"))
    body += "<h3>Execution blockers</h3>"
    if p.execution_blockers:
        body += ("<div class='hx-note hx-bad'>Execution blockers (fail closed):</div>"
                 + table_html(p.blockers_df(), "he-blockers", what="blockers"))
    else:
        body += "<p class='note hx-note'>none: the plan can be executed as planned</p>"
    if p.convexity_splits:
        body += ("<h3>Convexity splits</h3><p class='note hx-note'>same-provider partitions kept apart "
                 "to stay convex (a path leaves and re-enters)</p>"
                 + table_html(_splits_df(p), "he-splits", what="splits"))
    return body


@register("Transfers", "Transfers")
def _transfers(s: ViewState) -> str:
    p = s.plan
    tb = p.transfer_bytes
    head = (f"<div class='hx-note note'>{len(p.transfers):,d} transfer(s), "
            f"{'unknown bytes' if tb is None else human_bytes(tb)}, one per (value, destination)</div>")
    if not p.transfers and s.medium == "report":
        return '<p class="note">no cross-provider transfers</p>'
    return head + _medium_table(s, main_table("Transfers", p), "he-transfers", what="transfers",
                         opts=s.table_options("Transfers"))


# -- the run ---------------------------------------------------------------------------------------
@register("Run", "Run timings", needs_run=True)
def _run(s: ViewState) -> str:
    err = error_box(s.run_error, "hx-run-error")
    if s.run is None:
        return err + ("<div class='hx-note'>Not executed yet: press <b>Execute</b>.</div>" if s.medium == "app"
                      else "<p class='note'>no run timings were given (only the comparison)</p>")
    r = s.run
    out = [err]
    t = s.timings
    if t is not None:
        out.append(f"<div class='hx-timings-line'><b>Timings:</b> {esc(t.text())}</div>")
        out.append(kv_table(t.rows(), "hx-timings"))
    f = getattr(r, "summary", None)
    if callable(f):
        try:
            out.append(f"<p class='note hx-note'>the first run (the one shown below and diffed): {esc(f())}</p>")
        except Exception:
            pass
    bits = []
    for attr in ("total_seconds", "wall_seconds", "seconds"):
        v = getattr(r, attr, None)
        if isinstance(v, (int, float)):
            bits.append(f"first run {human_seconds(v)} (a new executor: not a warm time"
                        + ("" if t is not None else "; no warm runs were timed") + ")")
            break
    peak = getattr(r, "peak_bytes", None)
    if peak is not None:
        bits.append("peak memory " + (", ".join(f"{k}: {human_bytes(v)}" for k, v in peak.items())
                                      if isinstance(peak, dict) else human_bytes(peak)))
    tp = getattr(r, "transfers_performed", None)
    if tp is not None:
        n = tp if isinstance(tp, int) else len(tp)
        bits.append(f"{n} transfer(s) performed (plan lists {len(s.plan.transfers)})")
    if s.compile_seconds >= 0.05:
        bits.append(f"plus {human_seconds(s.compile_seconds)} compiling kernels (not in the run's time)")
    if bits:
        out.append(f"<div class='hx-note hx-run-summary'>{esc('; '.join(bits))}</div>")
    if getattr(r, "events", None):
        try:
            from .timeline import timeline_svg
            out.append(f"<h3>Timeline</h3><div class='hx-timeline'>{timeline_svg(r)}</div>")
        except Exception as e:
            out.append(error_box(f"no timeline: {type(e).__name__}: {e}", "hx-timeline-error"))
    try:
        df = _as_df(r)
    except Exception as e:
        return "".join(out) + error_box(f"no timings: {type(e).__name__}: {e}", "")
    out.append(f"<pre>{esc(repr(r))}</pre>" if df is None else _medium_table(s, df, "he-timings", what="timings"))
    return "".join(out)


@register("Diff", "Byte-identity diff", needs_run=True)
def _diff(s: ViewState) -> str:
    err = error_box(s.run_error, "hx-run-error")
    if s.diff is None:
        return err + ("<div class='hx-note'>Not executed yet: press <b>Execute</b> to compare the plan's "
                      f"outputs with a run of the whole graph on {esc(s.reference)}.</div>")
    df = _as_df(s.diff)
    if df is None:
        return err + f"<pre>{esc(repr(s.diff))}</pre>"
    ok, line = diff_verdict(df, s.reference)
    if ok and s.medium == "app":  # nothing to blame: leave the empty blame columns out
        df = df[[c for c in df.columns if not (str(c).startswith("blame") or c == "transfers_on_way")]]
    base = s.cell_class

    def cls(col, v):
        if col == "byte_identical" and isinstance(v, bool):
            return "ok" if v else "bad"
        return base(col, v) if base else None

    mark = "\u2714" if ok else "\u2718"
    out = (err + f"<div class='hx-verdict {'hx-ok' if ok else 'hx-bad'}'>{mark} {esc(line)}</div>"
           + f'<p class="note hx-note">{esc(DIFF_MEANING)}</p>' + _medium_table(s, df, "he-diff", what="outputs",
                                                                      cell_class=cls))
    ops = _as_df(s.op_ulp)
    if ops is not None:
        out += (f"<h4 class='hx-op-ulp-title'>Per op type on ONNX Runtime's providers: the largest ULP of a node "
                f"run alone on the inputs {esc(s.reference)} gave it (measured, not proven)</h4>"
                + _medium_table(s, ops, "he-op-ulp", what="op types"))
    return out


@register("Changes", "Changes since the previous plan")
def _changes(s: ViewState) -> str:
    if s.previous is None:
        return ("<div class='hx-note note'>No earlier plan to compare with yet.</div>" if s.medium == "app" else
                "<p class='note'>No earlier plan to compare with (a report written by Explorer.export_html "
                "shows what changed since the explorer's previous plan).</p>")
    from ..planner.plandiff import compare_plans
    return render_changes(compare_plans(s.previous, s.plan))
