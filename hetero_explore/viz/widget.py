"""The ipywidgets app over an :class:`~hetero_explore.session.explorer.Explorer`.

The explorer is the only state: provider order, enable flags, denied ops and the views'
options (graph level, open scopes, find, zoom, table filter/sort/page) live there. The
app's controls write to the explorer; the explorer notifies the app (``"plan"``, ``"run"``,
``"view"``), which then sets its controls from the explorer and redraws. A control set that
way writes nothing back, because a handler first compares the control with the explorer and
does nothing when they agree. The views are the registered ones of
:mod:`hetero_explore.viz.views` (the report's sections are the same views); only the visible
tab is rendered on a change (the others when they are opened), so re-planning stays live on
big models.

Every handler catches its errors and shows them in the app (a fail-closed execution, a
missing ``dot``): the widget never dies. Tests drive it through its controls and read
``get_state()``; no browser is needed.
"""

from __future__ import annotations

import base64
import os
import re
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import ipywidgets as widgets
from traitlets import Bool, Int, Unicode, observe

from ..ir.errors import RunCancelled
from ..session.explorer import LEVELS, TableOptions  # noqa: F401  (TableOptions: re-exported)
from . import views as _views
from .html import esc, table_page
from .views import (TABLE_VIEWS, ViewState, diff_verdict, error_box as _error_box, graph_boxes,  # noqa: F401
                    main_table, render_changes, snapshot)

#: the app-only tab after the registered views
EXPORT = "Export"
#: views, in tab order (the registered views, then Export)
VIEWS = _views.view_names() + (EXPORT,)
#: rows shown per table page
MAX_ROWS = _views.APP_PAGE_ROWS
#: most boxes (nodes or partitions) drawn live; above it the Graph view asks first (node views
#: above ``graph.DOT_NODE_LIMIT`` nodes and big partition views are laid out in linear time:
#: a 2,000-node node view is on screen in about 1-2 s, drawn in the background)
MAX_DRAW = _views.MAX_DRAW
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
.hx-app table.hx-table td.num {text-align: right; font-variant-numeric: tabular-nums;}
.hx-app table.hx-table td.na {color: #777;}
.hx-app table.hx-table td.ok {color: #1a7f37; font-weight: bold;}
.hx-app table.hx-table td.bad {color: #b42318; font-weight: bold;}
.hx-app table.kv th {text-align: left; padding-right: 12px;}
.hx-app .hx-note, .hx-app .note {color: #555; font-size: 12px; margin: 4px 0;}
.hx-app .hx-ok {color: #1a7f37; font-weight: bold;}
.hx-app .hx-bad {color: #b42318; font-weight: bold;}
.hx-app .hx-error-box {background: #fdecea; border: 1px solid #f5c2c0; color: #611a15; padding: 6px 8px;
  white-space: pre-wrap; font-family: monospace; font-size: 12px;}
.hx-app .hx-warn-box {background: #fff8e1; border: 1px solid #ffe08a; padding: 4px 8px; font-size: 12px;}
.hx-app .hx-svg {overflow: auto; max-height: 640px; border: 1px solid #eee;}
.hx-app .hx-found path, .hx-app .hx-found polygon, .hx-app .hx-found ellipse {stroke: #d1242f; stroke-width: 4px;}
.hx-app .hx-denied-ops {white-space: nowrap;}
.hx-app .hx-tabs .lm-TabBar-content {flex-wrap: wrap;}
.hx-app .hx-tabs .lm-TabBar-tab {flex: 0 0 auto !important; min-width: 0 !important; max-width: none !important;}
</style>"""


def render(view: str, s: ViewState) -> str:
    """The HTML of one tab: a registered view (:func:`~.views.render`) or Export. Pure."""
    if view == EXPORT:
        return s.export_message or ("<div class='hx-note'>Write the self-contained HTML report of the "
                                    "current plan (with its last run and diff).</div>")
    return _views.render(view, s)


def _css_name(name: str) -> str:
    """A CSS-class-safe form of a provider name."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


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


# -- the app -----------------------------------------------------------------------------
class ExplorerApp(widgets.VBox):
    """The explorer as an app: reorder, enable and deny, re-plan live, execute,
    and read the plan's views. ``ExplorerApp(explorer)`` or ``explorer.show()``."""

    # What the app itself did (not the explorer's state: that is read from the explorer).
    plan_version = Int(0).tag(sync=True)
    """Bumped on every re-plan the explorer reports."""
    run_version = Int(0).tag(sync=True)
    """Bumped on every execution (or failed one)."""
    run_error = Unicode("").tag(sync=True)
    """Why the last execution started here failed."""
    action_error = Unicode("").tag(sync=True)
    """What the last control action raised ('' when it did not)."""
    status = Unicode("").tag(sync=True)
    """One line: what just happened."""
    busy = Bool(False).tag(sync=True)
    """True while executing."""

    # The explorer's state, read from it and written to it (never copied here).
    @property
    def order(self) -> list[str]:
        """All provider names in priority order (the explorer's)."""
        return self.explorer.provider_names

    @order.setter
    def order(self, names) -> None:
        names = list(names)
        self._guard(self._configure, lambda ex: ex.order([n for n in names if n in set(ex.provider_names)]))

    @property
    def enabled(self) -> dict[str, bool]:
        """Provider name → enabled (the explorer's)."""
        ex = self.explorer
        return {n: ex.is_enabled(n) for n in ex.provider_names}

    @enabled.setter
    def enabled(self, flags: dict) -> None:
        def apply(ex):
            for n, on in flags.items():
                (ex.enable if on else ex.disable)(n)
        self._guard(self._configure, apply)

    @property
    def denied(self) -> dict[str, list[str]]:
        """Provider name → sorted list of denied op types (the explorer's)."""
        ex = self.explorer
        return {n: list(ex.denied(n)) for n in ex.provider_names}

    @denied.setter
    def denied(self, ops: dict) -> None:
        def apply(ex):
            for n in ex.provider_names:
                ex.set_denied(n, ops.get(n, ()))
        self._guard(self._configure, apply)

    @property
    def error(self) -> str:
        """Why the current configuration cannot be planned ('' when it can)."""
        step = self.explorer.current
        return (step.error or "") if step is not None else ""

    def _view_option(name: str, doc: str):  # noqa: N805  (a property factory, used in the class body)
        def get(self):
            v = getattr(self.explorer.view_options, name)
            return list(v) if name == "expand" else v

        def put(self, value):
            self._guard(self.explorer.set_view, **{name: value})
        return property(get, put, doc=doc)

    level = _view_option("level", "Graph level: auto, node, partition or scope (the explorer's view option).")
    expand = _view_option("expand", "Scope level: the name scopes drawn open (the others are one box each).")
    draw_big = _view_option("draw_big", "Draw the graph even when it has more than MAX_DRAW boxes.")
    find = _view_option("find", "Graph view: outline the first box whose name contains this and show the "
                                "picture around it.")
    zoom = _view_option("zoom", "Graph view: ``fit`` (to the width) or a percentage of the drawn size.")
    del _view_option

    @property
    def tables(self) -> dict[str, dict]:
        """View → its main table's options (``query``, ``sort``, ``descending``, ``page``; the
        explorer's, see :class:`~hetero_explore.session.explorer.TableOptions`)."""
        return {v: {"query": o.query, "sort": o.sort, "descending": o.descending, "page": o.page}
                for v, o in self.explorer.view_options.tables}

    @tables.setter
    def tables(self, options: dict) -> None:
        def apply():
            for view, o in options.items():
                self.explorer.set_table(view, **dict(o))
        self._guard(apply)

    _explorer_ref = None

    @property
    def explorer_closed(self) -> bool:
        """Whether the app was closed (or its explorer garbage-collected): it shows nothing live."""
        return self._explorer_ref is None or self._explorer_ref() is None

    @property
    def explorer(self):
        """The explorer shown (held weakly: see :meth:`Explorer.show`)."""
        ex = self._explorer_ref() if self._explorer_ref is not None else None
        if ex is None:
            from ..ir.errors import ArgumentValueError
            raise ArgumentValueError("this app's explorer is gone (garbage-collected, or the app was closed); "
                                     "show it again from a live explorer: ex.show()")
        return ex

    def __init__(self, explorer, **kwargs):
        super().__init__(**kwargs)
        self.add_class("hx-app")
        self._explorer_ref = weakref.ref(explorer)
        ex = explorer
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
        self.deny_labels: dict[str, widgets.HTML] = {}
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

        vo = ex.view_options
        self.level_dropdown = widgets.Dropdown(options=list(LEVELS), value=vo.level,
                                               description="level", layout=widgets.Layout(width="200px"))
        self.level_dropdown.add_class("hx-level")
        self.level_dropdown.observe(lambda ch: self._on_view_control("level", ch["new"]), names="value")
        self.draw_big_box = widgets.Checkbox(value=vo.draw_big, description="draw big graphs", indent=False)
        self.draw_big_box.add_class("hx-draw-big")
        self.draw_big_box.observe(lambda ch: self._on_view_control("draw_big", bool(ch["new"])), names="value")

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
        self.find_box = widgets.Text(value=vo.find, placeholder="find a node or partition by name\u2026",
                                     continuous_update=False, layout=widgets.Layout(width="260px"))
        self.find_box.add_class("hx-find")
        self.find_box.observe(lambda ch: self._on_view_control("find", ch["new"]), names="value")
        zooms = ["fit", "25%", "50%", "100%", "200%"]
        self.zoom_dropdown = widgets.Dropdown(options=zooms + ([vo.zoom] if vo.zoom not in zooms else []),
                                              value=vo.zoom, description="zoom", layout=widgets.Layout(width="160px"))
        self.zoom_dropdown.add_class("hx-zoom")
        self.zoom_dropdown.observe(lambda ch: self._on_view_control("zoom", ch["new"]), names="value")
        self.table_controls: dict[str, dict] = {}
        self._table_columns: dict[str, tuple] = {}
        self._sort_handlers: dict[str, object] = {}
        #: the tabs: every registered view (see hetero_explore.viz.views.register), then Export
        self.view_names = _views.view_names() + (EXPORT,)
        self.views: dict[str, widgets.HTML] = {}
        for v in self.view_names:
            h = widgets.HTML("")
            h.add_class(f"hx-view-{v.lower()}")
            self.views[v] = h
        self.export_path = widgets.Text(value="hetero_explore_report.html", description="path")
        self.export_path.add_class("hx-export-path")
        self.export_button = widgets.Button(description="Write HTML report", icon="download",
                                            layout=widgets.Layout(width="auto", min_width="190px"))
        self.export_button.add_class("hx-export-button")
        self.export_button.on_click(lambda _b: self._guard(self.export))

        pages = []
        for v in self.view_names:
            if v == "Graph":
                rows = [widgets.HBox([self.level_dropdown, self.draw_big_box, self.find_box, self.zoom_dropdown])]
                rows.append(widgets.HBox([self.scope_pick, self.expand_button, self.collapse_button],
                                         layout=widgets.Layout(display="" if self.scope_names else "none")))
                self.graph_box = widgets.Box([], layout=widgets.Layout(width="100%", display="block"))
                self.graph_box.add_class("hx-graph-box")
                pages.append(widgets.VBox(rows + [self.views[v], self.graph_box]))
            elif v == "Export":
                pages.append(widgets.VBox([widgets.HBox([self.export_path, self.export_button]),
                                           self.views[v]]))
            elif v in TABLE_VIEWS:
                pages.append(widgets.VBox([self._make_table_controls(v), self.views[v]]))
            else:
                pages.append(self.views[v])
        self.tabs = widgets.Tab(children=pages, titles=list(self.view_names),
                                selected_index=self.view_names.index("Graph") if "Graph" in self.view_names else 0)
        self.tabs.add_class("hx-tabs")
        self.tabs.observe(self._on_tab, names="selected_index")

        header = widgets.HTML(STYLE + f"<b>hetero_explore</b> \u2014 {esc(ex.graph.name)}: "
                              f"{len(ex.graph.nodes)} node(s), {len(ops)} op type(s); reference "
                              f"{esc(ex.reference_provider.name)}")
        header.add_class("hx-header")
        from .picker import ProviderPicker
        self.picker = ProviderPicker(self)
        order_box = widgets.VBox([self.order_select, widgets.HBox([self.up_button, self.down_button])])
        self.enable_box = widgets.VBox()
        self.enable_box.add_class("hx-enable")
        self.deny_box = widgets.VBox()
        self.deny_box.add_class("hx-deny")
        self._layout_provider_controls()
        controls = widgets.VBox([widgets.HBox([order_box, self.enable_box, self.deny_box]), self.picker.box])
        run_row = widgets.HBox([self.execute_button, self.cancel_button, self.progress, self.status_label])
        self.children = [header, controls, run_row, self.error_html, self.summary_html, self.tabs]

        self._read_model()
        ex.observe(self._on_model)
        self._guard(self._replan)
        if self.plan_version == 0:  # planned before the app existed: no notification came
            self._read_model()
            self.status = self._plan_status(ex.current)
            self.plan_version += 1

    # -- construction helpers ---------------------------------------------------------
    def _make_table_controls(self, view: str):
        """Filter box, sort column, direction and page buttons of ``view``'s main table."""
        v = view.lower()
        o = self.explorer.view_options.table(view)
        q = widgets.Text(value=o.query, placeholder="filter rows\u2026", layout=widgets.Layout(width="240px"))
        sort = widgets.Dropdown(options=[("(plan order)", "")], value="", description="sort by",
                                layout=widgets.Layout(width="260px"))
        desc = widgets.ToggleButton(value=o.descending, description="descending", icon="sort-amount-desc",
                                    layout=widgets.Layout(width="120px"))
        prev = widgets.Button(description="\u25c0 prev", layout=widgets.Layout(width="80px"))
        nxt = widgets.Button(description="next \u25b6", layout=widgets.Layout(width="80px"))
        for w, css in ((q, "filter"), (sort, "sort"), (desc, "desc"), (prev, "prev"), (nxt, "next")):
            w.add_class(f"hx-table-{css}")
            w.add_class(f"hx-{css}-{v}")
        q.observe(lambda ch: self._on_table_control(view, "query", ch["new"]), names="value")
        on_sort = (lambda ch: self._on_table_control(view, "sort", ch["new"]))
        sort.observe(on_sort, names="value")
        desc.observe(lambda ch: self._on_table_control(view, "descending", bool(ch["new"])), names="value")
        prev.on_click(lambda _b: self._guard(self._turn_page, view, -1))
        nxt.on_click(lambda _b: self._guard(self._turn_page, view, +1))
        self.table_controls[view] = {"query": q, "sort": sort, "descending": desc, "prev": prev, "next": nxt}
        self._sort_handlers[view] = on_sort
        box = widgets.HBox([q, sort, desc, prev, nxt])
        box.add_class("hx-table-controls")
        return box

    def _options(self, view: str) -> TableOptions:
        return self.explorer.view_options.table(view)

    def _on_table_control(self, view: str, key: str, value) -> None:
        """A table control changed: a new filter, sort or direction goes to the explorer (back to
        page 1); one that shows what the explorer holds already does nothing."""
        if getattr(self._options(view), key) == value:
            return
        self._guard(self.explorer.set_table, view, **{key: value, "page": 0})

    def _turn_page(self, view: str, delta: int) -> None:
        s = self.view_state()
        if s.plan is None:
            return
        o = self._options(view)
        _rows, _m, page, pages = table_page(main_table(view, s.plan), o, MAX_ROWS)
        self.explorer.set_table(view, page=min(max(page + delta, 0), pages - 1))

    def _sync_table_controls(self, view: str, plan) -> None:
        """The sort menu lists the columns of the table shown; the controls show the explorer's options."""
        c = self.table_controls.get(view)
        if c is None or plan is None:
            return
        cols = self._table_columns.get(view)
        if cols is None or cols[0] is not plan:
            cols = (plan, tuple(str(x) for x in main_table(view, plan).columns))
            self._table_columns[view] = cols
        opts = [("(plan order)", "")] + [(x, x) for x in cols[1]]
        o = self._options(view)
        want = o.sort if o.sort in cols[1] else ""
        if list(c["sort"].options) != opts:
            # ipywidgets selects the first option whenever the options change (Selection.
            # _propagate_options): that is no user's choice, so the menu is not listened to meanwhile
            c["sort"].unobserve(self._sort_handlers[view], names="value")
            try:
                c["sort"].options = opts
                c["sort"].value = want
            finally:
                c["sort"].observe(self._sort_handlers[view], names="value")
        elif c["sort"].value != want:
            c["sort"].value = want
        c["query"].value = o.query
        c["descending"].value = o.descending

    def _make_provider_controls(self, n: str, ops) -> None:
        cb = widgets.Checkbox(value=True, description=n, indent=False)
        cb.add_class("hx-enable-toggle")
        cb.add_class(f"hx-enable-{_css_name(n)}")
        cb.observe(lambda ch, n=n: self._on_enable(n, bool(ch["new"])), names="value")
        self.enable_boxes[n] = cb
        label = widgets.HTML("", layout=widgets.Layout(width="auto", min_width="120px"))
        label.add_class("hx-denied")
        label.add_class(f"hx-denied-{_css_name(n)}")
        self.deny_labels[n] = label
        sel = widgets.SelectMultiple(options=list(ops), value=(), rows=min(max(len(ops), 2), 5),
                                     layout=widgets.Layout(width="200px"))
        sel.add_class("hx-deny-select")
        sel.add_class(f"hx-deny-{_css_name(n)}")
        sel.observe(lambda ch, n=n: self._on_deny(n, ch["new"]), names="value")
        self.deny_selects[n] = sel

    def _layout_provider_controls(self) -> None:
        names = self.explorer.provider_names
        old = list(self.enable_box.children) + list(self.deny_box.children)
        controls = (list(self.enable_boxes.values()) + list(self.deny_selects.values())
                    + list(self.deny_labels.values()))
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
            close_tree(self.deny_labels.pop(n))
        for n in names:
            if n not in self.enable_boxes:
                self._make_provider_controls(n, self.explorer.op_types)
        self.order_select.rows = max(2, min(len(names), 6))
        self._layout_provider_controls()

    def _deny_row(self, n: str):
        return widgets.HBox([widgets.HTML(f"<code>{esc(n)}</code>", layout=widgets.Layout(width="90px")),
                             self.deny_selects[n], self.deny_labels[n]])

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

    # -- controls → the explorer (a control that shows the explorer's state already does nothing) -----
    def _configure(self, change) -> None:
        """Apply ``change(explorer)`` and re-plan; the explorer's notification redraws."""
        change(self.explorer)
        self._replan()

    def _move(self, delta: int) -> None:
        name = self.order_select.value
        if name is None:
            self.status = "select a provider first, then move it"
            return
        order = self.explorer.provider_names
        i = order.index(name)
        j = i + delta
        if not 0 <= j < len(order):
            return
        order[i], order[j] = order[j], order[i]
        self._configure(lambda ex: ex.order(order))

    def _on_enable(self, name: str, value: bool) -> None:
        ex = self.explorer
        if name not in ex.provider_names or ex.is_enabled(name) == value:
            return
        self._guard(self._configure, lambda ex: (ex.enable if value else ex.disable)(name))

    def _on_deny(self, name: str, value) -> None:
        ex = self.explorer
        if name not in ex.provider_names:
            return
        shown = set(self.deny_selects[name].options)
        # op types the menu does not list (denied by a script, absent from the model) stay denied
        new = tuple(sorted((set(ex.denied(name)) - shown) | set(value)))
        if new == ex.denied(name):
            return
        self._guard(self._configure, lambda ex: ex.set_denied(name, new))

    def _on_view_control(self, key: str, value) -> None:
        if getattr(self.explorer.view_options, key) == value:
            return
        self._guard(self.explorer.set_view, **{key: value})

    def expand_scope(self, scope: str) -> None:
        """Draw ``scope`` (``"/encoder/layer.0"``) open in the scope view (and switch to it)."""
        scope = "/" + "/".join(x for x in str(scope).split("/") if x)
        if scope not in self.scope_names:
            raise ValueError(f"no node of this model is in scope {scope!r}; scopes look like "
                             f"{', '.join(self.scope_names[:3]) or '(none: node names have no /scope/ part)'}")
        ex = self.explorer
        expand = ex.view_options.expand
        ex.set_view(expand=expand if scope in expand else (*expand, scope), level="scope")

    def collapse_scope(self, scope: str = "") -> None:
        """Draw ``scope`` and the scopes under it as one box again ('' or '/': collapse all)."""
        scope = "/" + "/".join(x for x in str(scope).split("/") if x)
        ex = self.explorer
        ex.set_view(expand=() if scope == "/" else [x for x in ex.view_options.expand
                                                   if x != scope and not x.startswith(scope + "/")],
                    level="scope")

    def _on_tab(self, change) -> None:
        self._guard(self._redraw)

    # -- the explorer → the controls and the views ---------------------------------------------
    def _replan(self) -> None:
        t0 = time.perf_counter()
        v = self.plan_version
        try:
            self.explorer.replan()
        except Exception:
            pass  # the explorer recorded it (and notified): the app shows it
        if self.plan_version != v:  # a new plan was reported: say how long it took here
            self.status = self._plan_status(self.explorer.current, time.perf_counter() - t0)

    @staticmethod
    def _plan_status(step, seconds: float | None = None) -> str:
        if step is None:
            return ""
        if step.plan is None:
            return f"plan #{step.index} failed"
        return f"plan #{step.index} in {(step.seconds if seconds is None else seconds) * 1e3:.1f} ms"

    def _on_model(self, event: str) -> None:
        """The explorer changed (a control here, or a scripted call in another cell)."""
        if threading.current_thread() is self._run_thread:
            return  # the run's own thread: its end is shown by execute()
        self._guard(self._follow, event)

    def _follow(self, event: str) -> None:
        self._read_model()
        if event == "run":
            self.run_version += 1
        elif event == "plan":
            self.status = self._plan_status(self.explorer.current)
            if not self.busy:  # a new plan has not run: the bar no longer reports a run
                self.progress.value = 0
                self.progress.bar_style = ""
            self.plan_version += 1
        else:
            self._redraw()

    def _read_model(self) -> None:
        """The controls from the explorer's state (each handler then finds nothing to do)."""
        ex = self.explorer
        self._match_providers()
        sel = self.order_select.value
        order = ex.provider_names
        labels = []
        for i, n in enumerate(order):
            p = ex.providers[n]
            off = "" if ex.is_enabled(n) else " (off)"
            labels.append((f"{i + 1}. {n} ({p.device}){off}", n))
        if list(self.order_select.options) != labels:
            self.order_select.options = labels
            self.order_select.value = sel if sel in order else None
        for n, cb in self.enable_boxes.items():
            cb.value = ex.is_enabled(n)
        for n, s in self.deny_selects.items():
            denied = set(ex.denied(n))
            want = tuple(o for o in s.options if o in denied)
            if tuple(s.value) != want:
                s.value = want
            label = self.deny_labels.get(n)
            if label is not None:  # the denied ops in words: a list box scrolls its selection out of sight
                text = ("denies " + ", ".join(sorted(denied))) if denied else "denies nothing"
                html = f"<span class='hx-note hx-denied-ops'>{esc(text)}</span>"
                if label.value != html:
                    label.value = html
        if hasattr(self, "picker"):
            self.picker.refresh()
        vo = ex.view_options
        self.level_dropdown.value = vo.level
        self.draw_big_box.value = vo.draw_big
        self.find_box.value = vo.find
        if vo.zoom not in self.zoom_dropdown.options:
            self.zoom_dropdown.options = [*self.zoom_dropdown.options, vo.zoom]
        self.zoom_dropdown.value = vo.zoom

    @observe("plan_version", "run_version", "busy")
    def _state_changed(self, change) -> None:
        self._guard(self._redraw)

    # -- one redraw ---------------------------------------------------------------------------
    def view_state(self) -> ViewState:
        """The snapshot the views are drawn from: the explorer's state and what the app last did."""
        return snapshot(self.explorer, run_error=self.run_error, export_message=self._export_message,
                        max_draw=MAX_DRAW)

    def _redraw(self) -> None:
        """Redraw the summary, the error box and the visible view."""
        t0 = time.perf_counter()
        s = self.view_state()
        self.error_html.value = _error_box(
            f"This configuration cannot be planned: {s.error}" if s.error else "", "hx-plan-error") \
            + _error_box(self.run_error, "hx-run-error-banner") \
            + _error_box(self.action_error, "hx-action-error")
        if s.plan is not None:
            cur = "" if s.plan_is_current else " (last plan that worked)"
            self.summary_html.value = (f"<div class='hx-note'><b>plan #{s.plan_index}{cur}</b>: "
                                       f"{esc(s.plan.summary())}</div>")
        else:
            self.summary_html.value = ""
        self.status_label.value = f"<span class='hx-note'>{esc(self.status)}</span>"
        self.execute_button.disabled = self.busy or s.plan is None or not s.plan_is_current
        self.cancel_button.disabled = not self.busy
        visible = self.view_names[self.tabs.selected_index or 0]
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
        if view == "Graph":
            self._sync_graph_view(s)

    # -- the interactive graph (big models): laid out in the browser -----------------------------
    #: the interactive graph widget (:mod:`hetero_explore.viz.graphview`), made when first needed
    graph_view = None

    def _sync_graph_view(self, s: ViewState) -> None:
        """Show the interactive view under the Graph tab when the level asks for it (big models at
        ``auto``, or ``interactive``); a re-plan only recolours it. Without anywidget the tab says
        so and the Graphviz levels still work."""
        from .graphview import graph_widget, update_widget, wants_interactive
        if s.plan is None or not wants_interactive(s.plan, s.level):
            if self.graph_box.children:
                self.graph_box.children = []
            return
        try:
            if self.graph_view is None:
                self.graph_view = graph_widget(s.plan, index=s.plan_index, query=s.find)
                self.graph_view.add_class("hx-graphview")
                self.graph_view.observe(self._on_graph_query, names="query")
            else:
                update_widget(self.graph_view, s.plan, index=s.plan_index)
                if self.graph_view.query != s.find:
                    self.graph_view.query = s.find
        except Exception as e:  # e.g. anywidget missing: the tab says why, the other levels still draw
            self.views["Graph"].value += _error_box(f"the interactive graph cannot be shown: {type(e).__name__}: "
                                                    f"{e}; pick the node, partition or scope level", "hx-graph-error")
            return
        if list(self.graph_box.children) != [self.graph_view]:
            self.graph_box.children = [self.graph_view]

    def _on_graph_query(self, change) -> None:
        """A search typed in the interactive graph becomes the explorer's find (and back)."""
        if self.explorer.view_options.find != change["new"]:
            self._guard(self.explorer.set_view, find=change["new"])

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
            if s.plan is plan and s.level == level and s.expand == tuple(expand) and \
                    self.view_names[self.tabs.selected_index or 0] == "Graph":
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
        for v in self.view_names:
            self.views[v].value = render(v, s)
        self._redraw()

    # -- actions -------------------------------------------------------------------------------
    def select(self, view: str) -> None:
        """Open a tab by name (``"Graph"``, ``"Diff"``, ...)."""
        self.tabs.selected_index = self.view_names.index(view)

    @observe("status")
    def _status_changed(self, change) -> None:
        self.status_label.value = f"<span class='hx-note'>{esc(change['new'])}</span>"

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
                    t = ex.timings
                    when = t.text() if t is not None else f"executed in {(time.perf_counter() - t0) * 1e3:.0f} ms"
                    self.status = f"{when}: {line.split(':')[0]}"
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
            msg = (f"<div class='hx-export-result hx-ok'>wrote <code>{esc(written)}</code> "
                   f"({size:,d} bytes)</div>")
            if size <= MAX_DOWNLOAD_BYTES:
                with open(written, "rb") as f:
                    b64 = base64.b64encode(f.read()).decode("ascii")
                fname = os.path.basename(written)
                msg += (f"<a class='hx-download' download='{esc(fname)}' "
                        f"href='data:text/html;base64,{b64}'>download {esc(fname)}</a>")
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
        progress is cancelled and waited for. Closing twice does nothing more."""
        ref = self._explorer_ref
        if ref is None:
            return
        ex = ref()
        if ex is not None:
            ex.unobserve(self._on_model)
        if self.busy:
            self._cancel.set()
            self.wait_for_run(60.0)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        extra = (list(self.enable_boxes.values()) + list(self.deny_selects.values())
                 + list(self.deny_labels.values()) + ([self.graph_view] if self.graph_view is not None else []))
        for w in [self] + extra:
            close_tree(w)
        # a closed app may stay referenced (IPython's Out[] keeps a cell's value): it keeps neither
        # the explorer, nor its (closed) widgets, nor the views' pages
        self._rendered.clear()
        self._sort_handlers = {}   # closures over the tables' controls
        self._explorer_ref = None
        self.children = ()
        for name, v in list(vars(self).items()):
            if isinstance(v, widgets.Widget):
                setattr(self, name, None)
            elif isinstance(v, (dict, list)) and any(isinstance(x, widgets.Widget) or isinstance(x, dict)
                                                      for x in (v.values() if isinstance(v, dict) else v)):
                setattr(self, name, type(v)())
            elif type(v).__module__.startswith(__package__ + "."):   # a part holding widgets (the picker)
                setattr(self, name, None)
