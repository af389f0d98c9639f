"""The ipywidgets app over an :class:`~hetero_explore.explorer.Explorer`.

State lives in traitlets on :class:`ExplorerApp` (provider order, enable
flags, denied ops, graph level, plan and run versions, errors); the controls
write those traits, an observer pushes them into the explorer and re-plans,
and one pure function, :func:`render`, turns a :class:`ViewState` into the
HTML of each view. Only the visible tab is rendered on a change (the others
when they are opened), so re-planning stays live on big models.

Every handler catches its errors and shows them in the app (an op no
provider supports, a fail-closed execution, a missing ``dot``): the widget
never dies. Tests drive it through its traits and read ``get_state()``; no
browser is needed.
"""

from __future__ import annotations

import base64
import html
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Callable

import ipywidgets as widgets
from traitlets import Bool, Dict, Int, List, Unicode, observe

from ..errors import RunCancelled

#: views, in tab order
VIEWS = ("Graph", "Placement", "Partitions", "Transfers", "Run", "Diff", "Changes", "Export")
#: rows shown per table (the full table is one DataFrame call away)
MAX_ROWS = 300
#: most boxes (nodes or partitions) drawn live; above it the Graph view asks first (node views
#: above ``graph.DOT_NODE_LIMIT`` nodes and big partition views are laid out in linear time:
#: a 2,000-node node view is on screen in about 1-2 s, drawn in the background)
MAX_DRAW = 2500
#: pictures with more boxes are laid out in the background (the rest of the app stays live)
SYNC_DRAW_BOXES = 50
#: largest report offered as an in-page download link
MAX_DOWNLOAD_BYTES = 16 << 20

STYLE = """<style>
.hx-app table.hx-table {border-collapse: collapse; font-size: 12px; margin: 4px 0;}
.hx-app .hx-table-wrap {overflow: auto; max-height: 520px;}
.hx-app table.hx-table th, .hx-app table.hx-table td {border: 1px solid #ddd; padding: 2px 6px;
  text-align: left; vertical-align: top; max-width: 40em; overflow-wrap: break-word;}
.hx-app table.hx-table th {background: #f3f3f3; white-space: nowrap; position: sticky; top: 0;}
.hx-app .hx-note {color: #555; font-size: 12px; margin: 4px 0;}
.hx-app .hx-ok {color: #1a7f37; font-weight: bold;}
.hx-app .hx-bad {color: #b42318; font-weight: bold;}
.hx-app .hx-error-box {background: #fdecea; border: 1px solid #f5c2c0; color: #611a15; padding: 6px 8px;
  white-space: pre-wrap; font-family: monospace; font-size: 12px;}
.hx-app .hx-warn-box {background: #fff8e1; border: 1px solid #ffe08a; padding: 4px 8px; font-size: 12px;}
.hx-app .hx-svg {overflow: auto; max-height: 640px; border: 1px solid #eee;}
.hx-app .hx-found path, .hx-app .hx-found polygon, .hx-app .hx-found ellipse {stroke: #d1242f; stroke-width: 4px;}
</style>"""


def _css_name(name: str) -> str:
    """A CSS-class-safe form of a provider name."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


def _esc(x) -> str:
    """``x`` escaped for HTML text or a quoted attribute; control characters become U+FFFD
    (the report's escaping: one rule for every HTML view of a model string)."""
    from .report import _e
    return _e(x)


def _descendants(w) -> list:
    """``w`` and every widget reachable from its traits (children, layout, style, ...), once each."""
    seen, out, stack = set(), [], [w]
    while stack:
        x = stack.pop()
        if not isinstance(x, widgets.Widget) or id(x) in seen:
            continue
        seen.add(id(x))
        out.append(x)
        for k in x.keys:
            try:
                v = getattr(x, k)
            except Exception:  # pragma: no cover - a trait that cannot be read
                continue
            if isinstance(v, widgets.Widget):
                stack.append(v)
            elif isinstance(v, (list, tuple)):
                stack.extend(i for i in v if isinstance(i, widgets.Widget))
    return out


def close_tree(w, keep=()) -> None:
    """Close ``w`` and every widget under it (layouts and styles too: each is a widget held
    in ipywidgets' registry until closed), except those in ``keep`` and what lies under them."""
    kept = set()
    for k in keep:
        kept.update(id(x) for x in _descendants(k))
    for x in _descendants(w):
        if id(x) not in kept:
            widgets.Widget.close(x)  # the base close: ExplorerApp.close calls close_tree itself


@dataclass(frozen=True)
class TableOptions:
    """How the app shows a view's main table: filtered, sorted, one page of it."""

    query: str = ""
    """Rows whose shown text contains this (case-insensitive); '' keeps every row."""
    sort: str = ""
    """Column sorted by ('' keeps the plan's order)."""
    descending: bool = False
    """Sort descending."""
    page: int = 0
    """0-based page (clamped to the pages there are)."""


#: views whose main table has filter / sort / page controls in the app
TABLE_VIEWS = ("Placement", "Partitions", "Transfers")


def main_table(view: str, plan):
    """The DataFrame of ``view``'s main table (the one the app pages, sorts and filters)."""
    if view == "Placement":
        return plan.placement_df()
    if view == "Partitions":
        return plan.partitions_df()
    if view == "Transfers":
        return plan.transfers_df()
    raise ValueError(f"{view!r} has no main table; those that do: {TABLE_VIEWS}")


def table_page(df, opts: TableOptions, page_rows: int = MAX_ROWS):
    """``(rows shown, rows matching, page, pages)`` of ``df`` under ``opts`` (pandas does the work:
    the app's HTML widgets run no script, so sorting, filtering and paging happen here)."""
    import pandas as pd
    n = len(df)
    if opts.query and n:
        q = opts.query.lower()
        text = df.map(_cell)
        hit = text.apply(lambda col: col.str.lower().str.contains(q, regex=False)).any(axis=1)
        df = df[hit.to_numpy()]
    if opts.sort and opts.sort in df.columns and len(df):
        col = df[opts.sort]
        if pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col):
            key = None
        else:  # mixed objects (lists, None, numbers): by the text shown
            def key(c):
                return c.map(_cell).str.lower()
        df = df.sort_values(opts.sort, ascending=not opts.descending, kind="stable", key=key,
                            na_position="last")
    m = len(df)
    pages = max(1, -(-m // page_rows))
    page = min(max(int(opts.page), 0), pages - 1)
    return df.iloc[page * page_rows:(page + 1) * page_rows], m, page, pages


def _table(df, max_rows: int = MAX_ROWS, what: str = "rows", opts: TableOptions | None = None) -> str:
    """A DataFrame as an escaped HTML table, at most ``max_rows`` rows (a plain loop:
    several times faster than ``DataFrame.to_html`` on the tables the app redraws live).
    With ``opts`` the table is filtered, sorted and cut into pages of ``max_rows``."""
    if df is None:
        return ""
    n = len(df)
    if n == 0:
        return f"<div class='hx-note'>(no {what})</div>"
    note = ""
    if opts is not None:
        total = n
        df, n, page, pages = table_page(df, opts, max_rows)
        first = page * max_rows
        where = f" matching <code>{_esc(opts.query)}</code>" if opts.query else ""
        order = (f", sorted by <code>{_esc(opts.sort)}</code> {'descending' if opts.descending else 'ascending'}"
                 if opts.sort and opts.sort in df.columns else "")
        note = (f"<div class='hx-note hx-table-page'>{what} {first + 1 if n else 0:,d}\u2013"
                f"{min(first + max_rows, n):,d} of {n:,d}{where}"
                + (f" (of {total:,d})" if n != total else "") + order
                + f"; page {page + 1} of {pages}</div>")
        if n == 0:
            return note + f"<div class='hx-note'>(no {what}{where})</div>"
        max_rows = len(df)
    cols = [str(c) for c in df.columns]
    parts = ["<div class='hx-table-wrap'><table class='hx-table'><thead><tr>"]
    parts += [f"<th>{_esc(c)}</th>" for c in cols]
    parts.append("</tr></thead><tbody>")
    for row in df.head(max_rows).itertuples(index=False, name=None):
        parts.append("<tr>" + "".join(f"<td>{_esc(_cell(v))}</td>" for v in row) + "</tr>")
    parts.append("</tbody></table></div>")
    if opts is None and n > max_rows:
        parts.append(f"<div class='hx-note'>showing {max_rows} of {n} {what}</div>")
    return note + "".join(parts)


def _cell(v) -> str:
    if v is None or type(v).__name__ in ("NAType", "NaTType"):  # pandas' missing values
        return ""
    if isinstance(v, float):
        return "" if v != v else f"{v:.6g}"
    if isinstance(v, dict):
        return "; ".join(f"{k}: {x}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return ", ".join(str(x) for x in v)
    return str(v)


def _error_box(text: str, css: str) -> str:
    return f"<div class='hx-error-box {css}'>{_esc(text)}</div>" if text else ""


# -- the pure redraw function ------------------------------------------------------------
@dataclass(frozen=True)
class ViewState:
    """Everything a view is drawn from."""

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
    """Graph level: auto, node or partition."""
    svg: Callable[[Any, str], str] | None = None
    """``svg(plan, level) -> str`` (cached by the explorer)."""
    export_message: str = ""
    """HTML of the last export's result."""
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

    def table_options(self, view: str) -> TableOptions:
        return dict(self.tables).get(view, TableOptions())


def graph_boxes(plan, level: str, expand=()) -> tuple[str, int]:
    """(level drawn, number of boxes) for ``level`` (``auto`` resolved as the graph view does)."""
    from .graph import auto_level
    n = len(plan.graph.nodes)
    if level == "auto":
        level = auto_level(plan)
    if level == "scope":
        from .scopes import ScopeView
        return level, ScopeView(plan, expand=expand).n_boxes
    return level, (n if level == "node" else len(plan.partitions))


def render(view: str, s: ViewState) -> str:
    """The HTML of one view. Pure: depends only on ``s``."""
    if view == "Export":
        return s.export_message or ("<div class='hx-note'>Write the self-contained HTML report of the "
                                    "current plan (with its last run and diff).</div>")
    if s.plan is None:
        return f"<div class='hx-note'>No plan: {_esc(s.error or 'nothing planned yet')}</div>"
    p = s.plan
    stale = "" if s.plan_is_current else (
        "<div class='hx-warn-box'>The current configuration cannot be planned (see the error above); "
        f"showing plan #{s.plan_index}, the last one that worked.</div>")
    if view == "Graph":
        head = (f"<div class='hx-graph-caption'>plan #{s.plan_index}: {_esc(p.summary())}</div>")
        drawn, boxes = graph_boxes(p, s.level, s.expand)
        if s.max_draw and boxes > s.max_draw:
            return stale + head + (
                f"<div class='hx-warn-box hx-graph-skipped'>The {drawn}-level picture has {boxes:,d} boxes, "
                f"more than the live limit ({s.max_draw}); laying it out takes a while. Tick "
                "<b>draw big graphs</b>, pick another level, or call <code>plan.to_graphviz()</code> "
                "in a cell.</div>")
        if s.drawing:
            return stale + head + (f"<div class='hx-note hx-graph-drawing'>laying out the {drawn}-level "
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
            body = ((f"<div class='hx-note hx-find-result'>find <code>{_esc(s.find)}</code>: {_esc(note)}</div>"
                     if note else "") + f"<div class='hx-svg'>{svg}</div>")
        except Exception as e:
            body = _error_box(f"cannot draw the graph: {type(e).__name__}: {e}", "hx-graph-error")
        return stale + head + body
    if view == "Placement":
        df = main_table(view, p)
        return stale + (f"<div class='hx-note'>{len(df)} node(s); <code>declined_by</code> lists each "
                        "higher-priority provider's reason</div>") + _table(df, what="nodes",
                                                                            opts=s.table_options(view))
    if view == "Partitions":
        body = _table(main_table(view, p), what="partitions", opts=s.table_options(view))
        if p.convexity_splits:
            body += ("<div class='hx-note'>Same-provider partitions kept apart to stay convex:</div>"
                     + _table(_splits_df(p), what="splits"))
        if p.execution_blockers:
            body += ("<div class='hx-note hx-bad'>Execution blockers (fail closed):</div>"
                     + _table(p.blockers_df(), what="blockers"))
        return stale + body
    if view == "Transfers":
        tb = p.transfer_bytes
        head = (f"<div class='hx-note'>{len(p.transfers)} transfer(s), "
                f"{'unknown' if tb is None else f'{tb:,d}'} byte(s), one per (value, destination)</div>")
        return stale + head + _table(main_table(view, p), what="transfers", opts=s.table_options(view))
    if view == "Run":
        return stale + _render_run(s)
    if view == "Diff":
        return stale + _render_diff(s)
    if view == "Changes":
        if s.previous is None:
            return stale + "<div class='hx-note'>No earlier plan to compare with yet.</div>"
        from ..explorer import compare_plans
        return stale + render_changes(compare_plans(s.previous, p))
    raise ValueError(f"unknown view {view!r}; views are {VIEWS}")


def _splits_df(p):
    import pandas as pd
    return pd.DataFrame([{"upstream": c.a, "downstream": c.b, "path": " → ".join(c.path)}
                         for c in p.convexity_splits], columns=["upstream", "downstream", "path"])


def _render_run(s: ViewState) -> str:
    err = _error_box(s.run_error, "hx-run-error")
    if s.run is None:
        return err + "<div class='hx-note'>Not executed yet: press <b>Execute</b>.</div>"
    r = s.run
    bits = []
    for attr in ("total_seconds", "wall_seconds", "seconds"):
        v = getattr(r, attr, None)
        if isinstance(v, (int, float)):
            bits.append(f"wall {v * 1e3:.2f} ms")
            break
    peak = getattr(r, "peak_bytes", None)
    if peak is not None:
        bits.append("peak memory " + (", ".join(f"{k}: {v:,d} B" for k, v in peak.items())
                                      if isinstance(peak, dict) else f"{peak:,d} B"))
    tp = getattr(r, "transfers_performed", None)
    if tp is not None:
        n = tp if isinstance(tp, int) else len(tp)
        bits.append(f"{n} transfer(s) performed (plan lists {len(s.plan.transfers)})")
    if s.compile_seconds >= 0.05:
        bits.append(f"of which compiling kernels {s.compile_seconds:.1f} s (a first run; the next is warm)")
    head = f"<div class='hx-note hx-run-summary'>{_esc('; '.join(bits))}</div>" if bits else ""
    try:
        from .timeline import timeline_svg  # the report's renderer: one timeline for both
        chart = f"<div class='hx-timeline'>{timeline_svg(r)}</div>"
    except Exception as e:
        chart = _error_box(f"no timeline: {type(e).__name__}: {e}", "hx-timeline-error")
    try:
        table = _table(r.timings_df(), what="timings")
    except Exception as e:
        table = _error_box(f"no timings: {type(e).__name__}: {e}", "")
    return err + head + chart + table


def diff_verdict(diff, reference: str) -> tuple[bool | None, str]:
    """(all identical?, one line) for a comparison DataFrame."""
    if diff is None:
        return None, "not executed yet"
    n = len(diff)
    same = int(diff["byte_identical"].sum()) if "byte_identical" in diff else 0
    if n and same == n:
        return True, f"byte-identical: all {n} output(s) equal the reference run on {reference}, byte for byte"
    return False, f"NOT byte-identical: {n - same} of {n} output(s) differ from the reference run on {reference}"


def _render_diff(s: ViewState) -> str:
    err = _error_box(s.run_error, "hx-run-error")
    if s.diff is None:
        return err + "<div class='hx-note'>Not executed yet: press <b>Execute</b> to compare the plan's " \
                     f"outputs with a run of the whole graph on {_esc(s.reference)}.</div>"
    ok, line = diff_verdict(s.diff, s.reference)
    css = "hx-ok" if ok else "hx-bad"
    mark = "\u2714" if ok else "\u2718"
    df = s.diff
    if ok:  # nothing to blame: leave the empty blame columns out
        df = df[[c for c in df.columns if not (str(c).startswith("blame") or c == "transfers_on_way")]]
    return (err + f"<div class='hx-verdict {css}'>{mark} {_esc(line)}</div>"
            + _table(df, what="outputs"))


def render_changes(c) -> str:
    """HTML of a :class:`~hetero_explore.explorer.PlanComparison`."""
    out = [f"<div class='hx-changes-summary'><b>Changes:</b> {_esc(c.summary())}</div>"]
    if c.changed:
        for title, df, what in (("Nodes that moved", c.moved, "moved nodes"),
                                ("Partitions added", c.partitions_added, "partitions added"),
                                ("Partitions removed", c.partitions_removed, "partitions removed"),
                                ("Transfers added", c.transfers_added, "transfers added"),
                                ("Transfers removed", c.transfers_removed, "transfers removed")):
            if len(df):
                out.append(f"<div class='hx-note'><b>{title}</b> ({len(df)})</div>" + _table(df, what=what))
    return "".join(out)


# -- the app -----------------------------------------------------------------------------
class ExplorerApp(widgets.VBox):
    """The explorer as an app: reorder, enable and deny, re-plan live, execute,
    and read the plan's views. ``ExplorerApp(explorer)`` or ``explorer.show()``."""

    order = List(Unicode()).tag(sync=True)
    """All provider names in priority order."""
    enabled = Dict().tag(sync=True)
    """Provider name → enabled."""
    denied = Dict().tag(sync=True)
    """Provider name → sorted list of denied op types."""
    level = Unicode("auto").tag(sync=True)
    """Graph level: auto, node, partition or scope."""
    expand = List(Unicode()).tag(sync=True)
    """Scope level: the name scopes drawn open (the others are one box each)."""
    draw_big = Bool(False).tag(sync=True)
    """Draw the graph even when it has more than MAX_DRAW boxes."""
    plan_version = Int(0).tag(sync=True)
    """Bumped on every re-plan."""
    run_version = Int(0).tag(sync=True)
    """Bumped on every execution (or failed one)."""
    error = Unicode("").tag(sync=True)
    """Why the current configuration cannot be planned ('' when it can)."""
    run_error = Unicode("").tag(sync=True)
    """Why the last execution failed."""
    action_error = Unicode("").tag(sync=True)
    """What the last control action raised ('' when it did not)."""
    status = Unicode("").tag(sync=True)
    """One line: what just happened."""
    busy = Bool(False).tag(sync=True)
    """True while executing."""
    find = Unicode("").tag(sync=True)
    """Graph view: outline the first box whose name contains this and show the picture around it."""
    zoom = Unicode("100%").tag(sync=True)
    """Graph view: ``fit`` (to the width) or a percentage of the drawn size."""
    tables = Dict().tag(sync=True)
    """View → its main table's options (``query``, ``sort``, ``descending``, ``page``; see
    :class:`TableOptions`)."""

    def __init__(self, explorer, **kwargs):
        super().__init__(**kwargs)
        self.add_class("hx-app")
        self.explorer = ex = explorer
        self._syncing = False
        self._table_syncing = False
        self._self_call = False
        self._rendered: dict[str, tuple] = {}
        self._export_message = ""
        self.last_redraw_seconds = 0.0
        #: lay big pictures out in the background (False: always draw before returning)
        self.background_drawing = True
        self._pool: ThreadPoolExecutor | None = None
        self._pending: tuple | None = None
        self._future = None
        self._lock = threading.RLock()
        self._run_thread: threading.Thread | None = None
        self._cancel = threading.Event()

        names = ex.provider_names
        # provider order: a list with up/down buttons
        self.order_select = widgets.Select(options=[], rows=max(2, min(len(names), 6)),
                                           description="priority", layout=widgets.Layout(width="260px"))
        self.order_select.add_class("hx-order")
        self.up_button = widgets.Button(description="\u25b2 up", tooltip="raise the selected provider's "
                                        "priority", layout=widgets.Layout(width="80px"))
        self.up_button.add_class("hx-order-up")
        self.down_button = widgets.Button(description="\u25bc down", tooltip="lower its priority",
                                          layout=widgets.Layout(width="80px"))
        self.down_button.add_class("hx-order-down")
        self.up_button.on_click(lambda _b: self._guard(self._move, -1))
        self.down_button.on_click(lambda _b: self._guard(self._move, +1))

        # enable toggles and per-provider denials
        self.enable_boxes: dict[str, widgets.Checkbox] = {}
        self.deny_selects: dict[str, widgets.SelectMultiple] = {}
        ops = ex.op_types
        for n in names:
            self._make_provider_controls(n, ops)

        self.execute_button = widgets.Button(description="Execute", button_style="primary",
                                             icon="play", tooltip="run the plan and the reference; diff them")
        self.execute_button.add_class("hx-execute")
        self.execute_button.on_click(lambda _b: self._guard(self.execute, False))
        self.cancel_button = widgets.Button(description="Cancel", icon="stop", disabled=True,
                                            tooltip="stop the run before its next partition")
        self.cancel_button.add_class("hx-cancel")
        self.cancel_button.on_click(lambda _b: self._guard(self.cancel))
        self.progress = widgets.IntProgress(value=0, min=0, max=4, description="",
                                            layout=widgets.Layout(width="160px"))
        self.progress.add_class("hx-progress")
        self.status_label = widgets.HTML("")
        self.status_label.add_class("hx-status")
        self.error_html = widgets.HTML("")
        self.error_html.add_class("hx-error")
        self.summary_html = widgets.HTML("")
        self.summary_html.add_class("hx-summary")

        self.level_dropdown = widgets.Dropdown(options=["auto", "node", "partition", "scope"], value=self.level,
                                               description="level", layout=widgets.Layout(width="200px"))
        self.level_dropdown.add_class("hx-level")
        self.level_dropdown.observe(self._on_level, names="value")
        self.draw_big_box = widgets.Checkbox(value=False, description="draw big graphs", indent=False)
        self.draw_big_box.add_class("hx-draw-big")
        self.draw_big_box.observe(lambda ch: setattr(self, "draw_big", bool(ch["new"])), names="value")

        # scope level: open or close a name scope (kernel-side: the picture is laid out again)
        from .scopes import model_scopes
        self.scope_names = model_scopes(ex.graph)
        self.scope_pick = widgets.Combobox(options=self.scope_names[:5000], placeholder="scope, e.g. "
                                           + (self.scope_names[0] if self.scope_names else "/encoder"),
                                           ensure_option=False, layout=widgets.Layout(width="240px"))
        self.scope_pick.add_class("hx-scope-pick")
        self.expand_button = widgets.Button(description="expand", tooltip="draw this scope open (scope level)",
                                            layout=widgets.Layout(width="80px"))
        self.expand_button.add_class("hx-expand")
        self.expand_button.on_click(lambda _b: self._guard(self.expand_scope, self.scope_pick.value))
        self.collapse_button = widgets.Button(description="collapse", tooltip="draw this scope as one box",
                                              layout=widgets.Layout(width="80px"))
        self.collapse_button.add_class("hx-collapse")
        self.collapse_button.on_click(lambda _b: self._guard(self.collapse_scope, self.scope_pick.value))
        self.find_box = widgets.Text(value="", placeholder="find a node or partition by name\u2026",
                                     continuous_update=False, layout=widgets.Layout(width="260px"))
        self.find_box.add_class("hx-find")
        self.find_box.observe(lambda ch: setattr(self, "find", ch["new"]), names="value")
        self.zoom_dropdown = widgets.Dropdown(options=["fit", "25%", "50%", "100%", "200%"], value="100%",
                                              description="zoom", layout=widgets.Layout(width="160px"))
        self.zoom_dropdown.add_class("hx-zoom")
        self.zoom_dropdown.observe(lambda ch: setattr(self, "zoom", ch["new"]), names="value")
        self.table_controls: dict[str, dict] = {}
        self._table_columns: dict[str, tuple] = {}
        self.views: dict[str, widgets.HTML] = {}
        for v in VIEWS:
            h = widgets.HTML("")
            h.add_class(f"hx-view-{v.lower()}")
            self.views[v] = h
        self.export_path = widgets.Text(value="hetero_explore_report.html", description="path")
        self.export_path.add_class("hx-export-path")
        self.export_button = widgets.Button(description="Write HTML report", icon="download")
        self.export_button.add_class("hx-export-button")
        self.export_button.on_click(lambda _b: self._guard(self.export))

        pages = []
        for v in VIEWS:
            if v == "Graph":
                rows = [widgets.HBox([self.level_dropdown, self.draw_big_box, self.find_box, self.zoom_dropdown])]
                rows.append(widgets.HBox([self.scope_pick, self.expand_button, self.collapse_button],
                                         layout=widgets.Layout(display="" if self.scope_names else "none")))
                pages.append(widgets.VBox(rows + [self.views[v]]))
            elif v == "Export":
                pages.append(widgets.VBox([widgets.HBox([self.export_path, self.export_button]),
                                           self.views[v]]))
            elif v in TABLE_VIEWS:
                pages.append(widgets.VBox([self._make_table_controls(v), self.views[v]]))
            else:
                pages.append(self.views[v])
        self.tabs = widgets.Tab(children=pages, titles=list(VIEWS))
        self.tabs.add_class("hx-tabs")
        self.tabs.observe(self._on_tab, names="selected_index")

        header = widgets.HTML(STYLE + f"<b>hetero_explore</b> \u2014 {_esc(ex.graph.name)}: "
                              f"{len(ex.graph.nodes)} node(s), {len(ops)} op type(s); reference "
                              f"{_esc(ex.reference_provider.name)}")
        header.add_class("hx-header")
        order_box = widgets.VBox([self.order_select, widgets.HBox([self.up_button, self.down_button])])
        self.enable_box = widgets.VBox()
        self.enable_box.add_class("hx-enable")
        self.deny_box = widgets.VBox()
        self.deny_box.add_class("hx-deny")
        self._layout_provider_controls()
        controls = widgets.HBox([order_box, self.enable_box, self.deny_box])
        run_row = widgets.HBox([self.execute_button, self.cancel_button, self.progress, self.status_label])
        self.children = [header, controls, run_row, self.error_html, self.summary_html, self.tabs]

        self._read_model()
        ex.observe(self._on_model)
        self._guard(self._replan)

    # -- construction helpers ---------------------------------------------------------
    def _make_table_controls(self, view: str):
        """Filter box, sort column, direction and page buttons of ``view``'s main table."""
        v = view.lower()
        q = widgets.Text(value="", placeholder="filter rows\u2026", layout=widgets.Layout(width="240px"))
        sort = widgets.Dropdown(options=[("(plan order)", "")], value="", description="sort by",
                                layout=widgets.Layout(width="260px"))
        desc = widgets.ToggleButton(value=False, description="descending", icon="sort-amount-desc",
                                    layout=widgets.Layout(width="120px"))
        prev = widgets.Button(description="\u25c0 prev", layout=widgets.Layout(width="80px"))
        nxt = widgets.Button(description="next \u25b6", layout=widgets.Layout(width="80px"))
        for w, css in ((q, "filter"), (sort, "sort"), (desc, "desc"), (prev, "prev"), (nxt, "next")):
            w.add_class(f"hx-table-{css}")
            w.add_class(f"hx-{css}-{v}")
        q.observe(lambda ch: self._guard(self._set_table, view, query=ch["new"], page=0), names="value")
        sort.observe(lambda ch: self._guard(self._set_table, view, sort=ch["new"], page=0), names="value")
        desc.observe(lambda ch: self._guard(self._set_table, view, descending=bool(ch["new"]), page=0),
                     names="value")
        prev.on_click(lambda _b: self._guard(self._turn_page, view, -1))
        nxt.on_click(lambda _b: self._guard(self._turn_page, view, +1))
        self.table_controls[view] = {"query": q, "sort": sort, "descending": desc, "prev": prev, "next": nxt}
        box = widgets.HBox([q, sort, desc, prev, nxt])
        box.add_class("hx-table-controls")
        return box

    def _options(self, view: str) -> TableOptions:
        return TableOptions(**self.tables.get(view, {}))

    def _set_table(self, view: str, **changes) -> None:
        if self._table_syncing:
            return
        o = replace(self._options(view), **changes)
        self.tables = {**self.tables, view: {"query": o.query, "sort": o.sort, "descending": o.descending,
                                             "page": o.page}}

    def _turn_page(self, view: str, delta: int) -> None:
        s = self.view_state()
        if s.plan is None:
            return
        o = self._options(view)
        _rows, _m, page, pages = table_page(main_table(view, s.plan), o)
        self._set_table(view, page=min(max(page + delta, 0), pages - 1))

    def _sync_table_controls(self, view: str, plan) -> None:
        """The sort menu lists the columns of the table shown; the controls show the options."""
        c = self.table_controls.get(view)
        if c is None or plan is None:
            return
        cols = self._table_columns.get(view)
        if cols is None or cols[0] is not plan:
            cols = (plan, tuple(str(x) for x in main_table(view, plan).columns))
            self._table_columns[view] = cols
        opts = [("(plan order)", "")] + [(x, x) for x in cols[1]]
        o = self._options(view)
        self._table_syncing = True
        try:
            if list(c["sort"].options) != opts:
                c["sort"].options = opts
            if c["sort"].value != (o.sort if o.sort in cols[1] else ""):
                c["sort"].value = o.sort if o.sort in cols[1] else ""
            if c["query"].value != o.query:
                c["query"].value = o.query
            if c["descending"].value != o.descending:
                c["descending"].value = o.descending
        finally:
            self._table_syncing = False

    def _make_provider_controls(self, n: str, ops) -> None:
        cb = widgets.Checkbox(value=True, description=n, indent=False)
        cb.add_class("hx-enable-toggle")
        cb.add_class(f"hx-enable-{_css_name(n)}")
        cb.observe(lambda ch, n=n: self._guard(self._set_enabled, n, ch["new"]), names="value")
        self.enable_boxes[n] = cb
        sel = widgets.SelectMultiple(options=list(ops), value=(), rows=min(max(len(ops), 2), 5),
                                     layout=widgets.Layout(width="200px"))
        sel.add_class("hx-deny-select")
        sel.add_class(f"hx-deny-{_css_name(n)}")
        sel.observe(lambda ch, n=n: self._guard(self._set_denied, n, ch["new"]), names="value")
        self.deny_selects[n] = sel

    def _layout_provider_controls(self) -> None:
        names = self.explorer.provider_names
        old = list(self.enable_box.children) + list(self.deny_box.children)
        controls = list(self.enable_boxes.values()) + list(self.deny_selects.values())
        for w in old:  # the titles and rows made last time (the controls themselves are kept)
            close_tree(w, keep=controls)
        self.enable_box.children = [widgets.HTML("<b>enabled</b>")] + [self.enable_boxes[n] for n in names]
        self.deny_box.children = ([widgets.HTML("<b>denied ops</b> (ctrl-click to select several)")]
                                  + [self._deny_row(n) for n in names])

    def _match_providers(self) -> None:
        """Providers added or removed by a scripted call: controls for exactly those the explorer has."""
        names = self.explorer.provider_names
        if set(names) == set(self.enable_boxes):
            return
        for n in [n for n in self.enable_boxes if n not in names]:
            close_tree(self.enable_boxes.pop(n))
            close_tree(self.deny_selects.pop(n))
        for n in names:
            if n not in self.enable_boxes:
                self._make_provider_controls(n, self.explorer.op_types)
        self.order_select.rows = max(2, min(len(names), 6))
        self._layout_provider_controls()

    def _deny_row(self, n: str):
        return widgets.HBox([widgets.HTML(f"<code>{_esc(n)}</code>", layout=widgets.Layout(width="90px")),
                             self.deny_selects[n]])

    # -- errors never kill the widget -------------------------------------------------------
    def _guard(self, fn, *args, **kwargs):
        """Run a handler; show what it raised in the app instead of letting the widget die."""
        if self.action_error:
            self.action_error = ""
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # shown in the app
            self.action_error = f"{type(e).__name__}: {e}"
            self.status = "error"
            try:
                self._read_model()  # the controls show what the explorer really holds
                self._redraw()
            except Exception:  # pragma: no cover - the banner at least
                self.error_html.value = _error_box(self.action_error, "hx-action-error")
            return None

    # -- control → trait handlers ----------------------------------------------------------
    def _move(self, delta: int) -> None:
        name = self.order_select.value
        if name is None:
            self.status = "select a provider first, then move it"
            return
        order = list(self.order)
        i = order.index(name)
        j = i + delta
        if not 0 <= j < len(order):
            return
        order[i], order[j] = order[j], order[i]
        self.order = order

    def _set_enabled(self, name: str, value: bool) -> None:
        if self._syncing:
            return
        self.enabled = {**self.enabled, name: bool(value)}

    def _set_denied(self, name: str, value) -> None:
        if self._syncing:
            return
        self.denied = {**self.denied, name: sorted(value)}

    def expand_scope(self, scope: str) -> None:
        """Draw ``scope`` (``"/encoder/layer.0"``) open in the scope view (and switch to it)."""
        scope = "/" + "/".join(x for x in str(scope).split("/") if x)
        if scope not in self.scope_names:
            raise ValueError(f"no node of this model is in scope {scope!r}; scopes look like "
                             f"{', '.join(self.scope_names[:3]) or '(none: node names have no /scope/ part)'}")
        if scope not in self.expand:
            self.expand = [*self.expand, scope]
        self.level = "scope"

    def collapse_scope(self, scope: str = "") -> None:
        """Draw ``scope`` and the scopes under it as one box again ('' or '/': collapse all)."""
        scope = "/" + "/".join(x for x in str(scope).split("/") if x)
        self.expand = [] if scope == "/" else [x for x in self.expand
                                              if x != scope and not x.startswith(scope + "/")]
        self.level = "scope"

    def _on_level(self, change) -> None:
        if not self._syncing:
            self.level = change["new"]

    def _on_tab(self, change) -> None:
        self._guard(self._redraw)

    # -- trait observers: push into the explorer, re-plan, redraw ---------------------------
    @observe("order", "enabled", "denied")
    def _config_changed(self, change) -> None:
        if self._syncing:
            return
        self._guard(self._push_and_replan)

    def _push_and_replan(self) -> None:
        ex = self.explorer
        self._syncing = True  # the explorer's notifications must not write back mid-push
        try:
            known = set(ex.provider_names)
            ex.order([n for n in self.order if n in known])
            for n, on in self.enabled.items():
                if n in known:
                    (ex.enable if on else ex.disable)(n)
            for n in ex.provider_names:
                ex.set_denied(n, self.denied.get(n, ()))
        finally:
            self._syncing = False
        self._replan()

    def _replan(self) -> None:
        t0 = time.perf_counter()
        self._self_call = True
        try:
            self.explorer.replan()
        except Exception:
            pass  # the explorer recorded it; _read_model shows it
        finally:
            self._self_call = False
        self._read_model()
        self.status = self._plan_status(time.perf_counter() - t0)
        self.plan_version += 1

    def _plan_status(self, seconds: float) -> str:
        step = self.explorer.current
        if step is None:
            return ""
        if step.plan is None:
            return f"plan #{step.index} failed"
        return f"plan #{step.index} in {seconds * 1e3:.1f} ms"

    def _on_model(self, event: str) -> None:
        """The explorer changed under us (a scripted call in another cell)."""
        if self._syncing or self._self_call or threading.current_thread() is self._run_thread:
            return
        self._read_model()
        if event == "run":
            self.run_version += 1
        else:
            self.plan_version += 1

    def _read_model(self) -> None:
        """Traits and controls from the explorer's state."""
        ex = self.explorer
        self._syncing = True
        try:
            self.order = ex.provider_names
            self.enabled = {n: ex.is_enabled(n) for n in ex.provider_names}
            self.denied = {n: list(ex.denied(n)) for n in ex.provider_names}
            step = ex.current
            self.error = (step.error or "") if step is not None else ""
            self._sync_controls()
        finally:
            self._syncing = False

    def _sync_controls(self) -> None:
        self._match_providers()
        sel = self.order_select.value
        labels = []
        for i, n in enumerate(self.order):
            p = self.explorer.providers[n]
            off = "" if self.enabled.get(n, True) else " (off)"
            labels.append((f"{i + 1}. {n} ({p.device}){off}", n))
        if list(self.order_select.options) != labels:
            self.order_select.options = labels
            self.order_select.value = sel if sel in self.order else None
        for n, cb in self.enable_boxes.items():
            cb.value = bool(self.enabled.get(n, True))
        for n, s in self.deny_selects.items():
            want = tuple(o for o in s.options if o in set(self.denied.get(n, ())))
            if tuple(s.value) != want:
                s.value = want
        if self.level_dropdown.value != self.level:
            self.level_dropdown.value = self.level

    @observe("plan_version", "run_version", "level", "busy", "draw_big", "tables", "find", "zoom", "expand")
    def _state_changed(self, change) -> None:
        self._guard(self._redraw)

    # -- one redraw ---------------------------------------------------------------------------
    def view_state(self) -> ViewState:
        ex = self.explorer
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
        return ViewState(plan=plan, plan_is_current=current, plan_index=idx, previous=previous,
                         run=run, diff=diff, reference=ex.reference_provider.name, error=self.error,
                         run_error=self.run_error, level=self.level, svg=ex.svg,
                         export_message=self._export_message, max_draw=0 if self.draw_big else MAX_DRAW,
                         compile_seconds=ex.compile_seconds if run is not None else 0.0,
                         tables=tuple((v, self._options(v)) for v in TABLE_VIEWS), find=self.find,
                         zoom=self.zoom, expand=tuple(self.expand))

    def _redraw(self) -> None:
        """Redraw the summary, the error box and the visible view from the traits."""
        t0 = time.perf_counter()
        s = self.view_state()
        self.error_html.value = _error_box(
            f"This configuration cannot be planned: {s.error}" if s.error else "", "hx-plan-error") \
            + _error_box(self.run_error, "hx-run-error-banner") \
            + _error_box(self.action_error, "hx-action-error")
        if s.plan is not None:
            cur = "" if s.plan_is_current else " (last plan that worked)"
            self.summary_html.value = (f"<div class='hx-note'><b>plan #{s.plan_index}{cur}</b>: "
                                       f"{_esc(s.plan.summary())}</div>")
        else:
            self.summary_html.value = ""
        self.status_label.value = f"<span class='hx-note'>{_esc(self.status)}</span>"
        self.execute_button.disabled = self.busy or s.plan is None or not s.plan_is_current
        self.cancel_button.disabled = not self.busy
        visible = VIEWS[self.tabs.selected_index or 0]
        if visible == "Graph":
            s = self._maybe_draw_later(s)
        self._render_view(visible, s)
        self.last_redraw_seconds = time.perf_counter() - t0

    def _render_view(self, view: str, s: ViewState) -> None:
        key = (id(s.plan), s.plan_is_current, id(s.run), id(s.diff), id(s.previous), s.error, s.run_error,
               s.level, s.export_message, s.max_draw, s.drawing, s.table_options(view), s.find, s.zoom, s.expand)
        if view in TABLE_VIEWS:
            self._sync_table_controls(view, s.plan)
        with self._lock:
            if self._rendered.get(view) != key:
                self.views[view].value = render(view, s)
                self._rendered[view] = key

    # -- big pictures are laid out in the background ---------------------------------------------
    def _maybe_draw_later(self, s: ViewState) -> ViewState:
        if s.plan is None or not self.background_drawing:
            return s
        _drawn, boxes = graph_boxes(s.plan, s.level, s.expand)
        if boxes <= SYNC_DRAW_BOXES or (s.max_draw and boxes > s.max_draw):
            return s
        if self.explorer.svg_cached(s.plan, s.level, s.expand) is not None:
            return s
        self._draw_later(s.plan, s.level, s.expand)
        return replace(s, drawing=True)

    def _draw_later(self, plan, level: str, expand=()) -> None:
        key = (id(plan), level, tuple(expand))
        with self._lock:
            if self._pending == key:
                return
            self._pending = key
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hx-graph")
        ex = self.explorer

        def job():
            try:
                if self._pending == key:  # still wanted
                    ex.svg(plan, level, expand)
            except Exception:
                pass  # drawn (and its error shown) by the synchronous path below
            finally:
                with self._lock:
                    if self._pending == key:
                        self._pending = None
                self._drawn(plan, level, tuple(expand))

        self._future = self._pool.submit(job)

    def _drawn(self, plan, level: str, expand=()) -> None:
        """A background layout finished: show it if that plan is still on screen."""
        try:
            s = self.view_state()
            if s.plan is plan and s.level == level and s.expand == tuple(expand) and VIEWS[self.tabs.selected_index or 0] == "Graph":
                self._render_view("Graph", s)
        except Exception as e:  # never let a worker thread die silently with a stale view
            self.views["Graph"].value = _error_box(f"cannot draw the graph: {type(e).__name__}: {e}",
                                                   "hx-graph-error")

    def wait_for_graph(self, timeout: float = 60.0) -> bool:
        """Wait until a background layout (if any) is on screen; True when none is pending."""
        f = self._future
        if f is not None:
            f.result(timeout=timeout)
        return self._pending is None

    def redraw_all(self) -> None:
        """Render every view now (tests and exports; the app renders lazily)."""
        s = self.view_state()
        for v in VIEWS:
            self.views[v].value = render(v, s)
        self._redraw()

    # -- actions -------------------------------------------------------------------------------
    def select(self, view: str) -> None:
        """Open a tab by name (``"Graph"``, ``"Diff"``, ...)."""
        self.tabs.selected_index = VIEWS.index(view)

    @observe("status")
    def _status_changed(self, change) -> None:
        self.status_label.value = f"<span class='hx-note'>{_esc(change['new'])}</span>"

    def execute(self, wait: bool = True) -> None:
        """What the Execute button does (with ``wait=False``): run the current plan in a worker
        thread, with progress per partition and the Cancel button live; re-planning and the
        tabs stay usable meanwhile (the run keeps the plan it started with). ``wait=True``
        returns when the run has finished."""
        if self.busy:
            self.status = "a run is in progress: wait for it or press Cancel"
            return
        ex = self.explorer
        self._cancel.clear()
        self.run_error = ""
        self.progress.bar_style = "info"
        self.progress.value = 0
        self.busy = True
        t0 = time.perf_counter()
        planned = ex.current.index if ex.current is not None else None

        def tick(i, total, label):
            self.progress.max = total
            self.progress.value = min(i, total)
            self.status = label

        def work():
            try:
                ex.execute(progress=tick, cancel=self._cancel.is_set)
            except RunCancelled as e:
                self.progress.bar_style = "warning"
                self.status = f"cancelled: {e}"
            except Exception as e:
                self.progress.bar_style = "danger"
                self.run_error = f"execution failed: {type(e).__name__}: {e}"
                self.status = "execution failed"
            else:
                cur = ex.current.index if ex.current is not None else None
                if cur != planned:
                    self.progress.bar_style = "info"
                    self.status = (f"executed plan #{planned} in {(time.perf_counter() - t0) * 1e3:.0f} ms; "
                                   f"the configuration changed meanwhile: plan #{cur} is not executed "
                                   "(the run is kept in the history)")
                else:
                    ok, line = diff_verdict(ex.diff, ex.reference_provider.name)
                    self.progress.bar_style = "success" if ok else "warning"
                    comp = (f" (of which compiling kernels {ex.compile_seconds:.1f} s)"
                            if ex.compile_seconds >= 0.05 else "")
                    self.status = (f"executed in {(time.perf_counter() - t0) * 1e3:.0f} ms{comp}: "
                                   f"{line.split(':')[0]}")
            finally:
                self.busy = False
                try:
                    self.run_version += 1
                except Exception:  # pragma: no cover - a redraw error is shown by _guard next time
                    pass

        th = threading.Thread(target=work, name="hx-execute", daemon=True)
        self._run_thread = th
        th.start()
        if wait:
            th.join()

    def cancel(self) -> None:
        """What the Cancel button does: stop the run before its next partition."""
        if not self.busy:
            self.status = "nothing is running"
            return
        self._cancel.set()
        self.status = "cancelling: the run stops before its next partition\u2026"

    def wait_for_run(self, timeout: float = 120.0) -> bool:
        """Wait for a run started with ``execute(wait=False)``; True when none is running."""
        th = self._run_thread
        if th is not None:
            th.join(timeout)
        return not self.busy

    def export(self) -> str | None:
        """What the Export button does: write the report, offer it for download."""
        path = self.export_path.value.strip() or "hetero_explore_report.html"
        try:
            written = self.explorer.export_html(path)
            size = os.path.getsize(written)
            msg = (f"<div class='hx-export-result hx-ok'>wrote <code>{_esc(written)}</code> "
                   f"({size:,d} bytes)</div>")
            if size <= MAX_DOWNLOAD_BYTES:
                with open(written, "rb") as f:
                    b64 = base64.b64encode(f.read()).decode("ascii")
                fname = os.path.basename(written)
                msg += (f"<a class='hx-download' download='{_esc(fname)}' "
                        f"href='data:text/html;base64,{b64}'>download {_esc(fname)}</a>")
        except Exception as e:
            written = None
            msg = _error_box(f"export failed: {type(e).__name__}: {e}", "hx-export-error")
        self._export_message = msg
        self.select("Export")
        self._rendered.pop("Export", None)
        self._redraw()
        return written

    def close(self):
        """Stop following the explorer and close every widget of the app (ipywidgets keeps
        each one, with its layout and style, in a registry until it is closed). A run in
        progress is cancelled and waited for."""
        self.explorer.unobserve(self._on_model)
        if self.busy:
            self._cancel.set()
            self.wait_for_run(60.0)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        extra = list(self.enable_boxes.values()) + list(self.deny_selects.values())
        for w in [self] + extra:
            close_tree(w)
