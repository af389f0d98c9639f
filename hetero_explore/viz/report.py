"""A self-contained HTML report of a plan (and optionally a run and a byte-identity diff).

One file: inline CSS, the DAG as inline SVG, one small inline script (table
filtering, sorting and paging, 200 rows a page; the DAG's pan, zoom and search) pinned by a Content-Security-Policy
hash, no network fetches, so it opens offline. Every string that comes from
the model or a provider is escaped with :func:`html.escape`; model data never
enters the script.
"""

from __future__ import annotations

import base64
import hashlib
import html
import math
import numbers
import os
import re
import stat
import tempfile
from pathlib import Path

import numpy as np

from ..about import versions
from ..units import human_bytes, human_seconds, is_byte_column, is_second_column
from .colors import provider_colors
from .graph import GraphvizNotFoundError, fmt_shape, plan_to_graphviz

#: Columns whose cells take their provider's colour.
PROVIDER_COLUMNS = frozenset({"provider", "from_provider", "to_provider", "src_provider", "dst_provider",
                              "blamed_provider"})
#: Tables longer than this are cut (with a note); the data stays in the plan's DataFrames.
MAX_ROWS = 20000

_CSS = """
:root { --fg:#1f2328; --muted:#59636e; --line:#d1d9e0; --bg:#ffffff; --soft:#f6f8fa; --ok:#1a7f37;
        --okbg:#dafbe1; --bad:#cf222e; --badbg:#ffebe9; }
* { box-sizing: border-box; }
body { font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: var(--fg);
       background: var(--bg); margin: 0; }
header { padding: 18px 28px 10px; border-bottom: 1px solid var(--line); background: var(--soft); }
header h1 { font-size: 20px; margin: 0 0 6px; }
header .summary { font-size: 15px; margin: 4px 0 8px; }
nav { padding: 6px 28px; border-bottom: 1px solid var(--line); position: sticky; top: 0;
      background: var(--bg); z-index: 2; }
nav a { margin-right: 14px; color: #0969da; text-decoration: none; }
main { padding: 8px 28px 40px; }
section { margin: 22px 0; }
h2 { font-size: 17px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 14px; margin: 14px 0 6px; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px;
         border: 1px solid var(--line); background: #fff; margin-right: 6px; }
.badge.ok { color: var(--ok); background: var(--okbg); border-color: #aceebb; }
.badge.bad { color: var(--bad); background: var(--badbg); border-color: #ffcecb; }
table { border-collapse: collapse; margin: 6px 0; font-size: 12.5px; }
th, td { border: 1px solid var(--line); padding: 3px 7px; text-align: left; vertical-align: top;
         max-width: 520px; overflow-wrap: anywhere; }
th { background: var(--soft); cursor: pointer; user-select: none; }
.tablewrap th { position: sticky; top: 0; z-index: 1; }
tbody tr:nth-child(even) td { background: #fbfcfd; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.na { color: var(--muted); }
td.ok { color: var(--ok); background: var(--okbg) !important; font-weight: 600; }
td.bad { color: var(--bad); background: var(--badbg) !important; font-weight: 600; }
table.kv th { width: 190px; position: static; cursor: default; }
.swatch { display: inline-block; width: 14px; height: 14px; border: 1px solid #888;
          vertical-align: -2px; margin-right: 6px; border-radius: 3px; }
pre { background: var(--soft); border: 1px solid var(--line); padding: 8px; white-space: pre-wrap;
      overflow-wrap: anywhere; max-height: 320px; overflow: auto; font-size: 12px; }
.dag { border: 1px solid var(--line); border-radius: 6px; overflow: auto; max-height: 85vh;
       background: #fff; padding: 6px; }
.dag svg { max-width: 100%; height: auto; }
.dag.actual svg { max-width: none; }
.dag.pz { height: 78vh; padding: 0; overflow: hidden; }
.dag.pz svg { width: 100%; height: 100%; max-width: none; }
.dag[hidden] { display: none; }
button.dag-view[aria-pressed="true"] { font-weight: bold; }
input.node-search { font-size: 13px; padding: 3px 6px; width: 300px; margin-left: 8px; }
.he-found path, .he-found polygon, .he-found ellipse { stroke: #d1242f !important; stroke-width: 4px !important; }
.note { color: var(--muted); font-size: 12.5px; }
.warn { border: 1px solid #d4a72c; background: #fff8c5; padding: 8px 12px; border-radius: 6px; }
input.filter { font-size: 13px; padding: 3px 6px; width: 320px; margin: 4px 0; }
button { font-size: 12px; margin: 4px 0; }
.tablewrap { overflow: auto; max-height: 70vh; }
.pager { font-size: 12.5px; margin: 2px 0 8px; }
.pager button { margin: 0 4px; }
footer { color: var(--muted); font-size: 12px; padding: 10px 28px 30px; }
"""

# Model data never enters this script; it only reads the DOM.
_JS = """
(function () {
  // tables: filter, sort and page (PAGE rows at a time); rows are hidden, never rebuilt
  var PAGE = 200;
  var tableState = function (t) {
    if (t.heState) return t.heState;
    var st = {q: '', page: 0, pager: null};
    t.heState = st;
    var rows = t.tBodies[0].rows.length;
    if (rows > PAGE) {
      var bar = document.createElement('div');
      bar.className = 'pager';
      var prev = document.createElement('button'), next = document.createElement('button');
      var info = document.createElement('span');
      prev.type = next.type = 'button';
      prev.className = 'page-prev'; next.className = 'page-next'; info.className = 'page-info';
      prev.textContent = '\u25c0 previous'; next.textContent = 'next \u25b6';
      bar.appendChild(prev); bar.appendChild(info); bar.appendChild(next);
      var wrap = t.parentNode;
      wrap.parentNode.insertBefore(bar, wrap.nextSibling);
      prev.addEventListener('click', function () { st.page -= 1; showRows(t); });
      next.addEventListener('click', function () { st.page += 1; showRows(t); });
      st.pager = {prev: prev, next: next, info: info};
    }
    return st;
  };
  var showRows = function (t) {
    var st = tableState(t), q = st.q, hits = [];
    Array.prototype.forEach.call(t.tBodies[0].rows, function (r) {
      if (!q || r.textContent.toLowerCase().indexOf(q) >= 0) hits.push(r); else r.style.display = 'none';
    });
    var pages = Math.max(1, Math.ceil(hits.length / PAGE));
    st.page = Math.max(0, Math.min(st.page, pages - 1));
    var lo = st.page * PAGE, hi = lo + PAGE;
    hits.forEach(function (r, i) { r.style.display = (i >= lo && i < hi) ? '' : 'none'; });
    if (st.pager) {
      st.pager.info.textContent = ' page ' + (st.page + 1) + ' of ' + pages + ' (' + hits.length +
        ' row(s)' + (q ? ' matching' : '') + ') ';
      st.pager.prev.disabled = st.page === 0;
      st.pager.next.disabled = st.page >= pages - 1;
    }
  };
  document.querySelectorAll('table.data').forEach(function (t) { showRows(t); });
  document.querySelectorAll('input.filter').forEach(function (inp) {
    var t = document.getElementById(inp.getAttribute('data-table'));
    if (!t) return;
    inp.addEventListener('input', function () {
      var st = tableState(t);
      st.q = inp.value.toLowerCase();
      st.page = 0;
      showRows(t);
    });
  });
  document.querySelectorAll('table.data').forEach(function (t) {
    Array.prototype.forEach.call(t.tHead.rows[0].cells, function (th, col) {
      th.addEventListener('click', function () {
        var asc = th.getAttribute('data-dir') !== 'asc';
        th.setAttribute('data-dir', asc ? 'asc' : 'desc');
        var rows = Array.prototype.slice.call(t.tBodies[0].rows);
        function key(r) {
          var c = r.cells[col]; var s = c ? (c.getAttribute('data-sort') || c.textContent) : '';
          var n = parseFloat(s); return isNaN(n) || String(n) !== s.trim() ? s : n;
        }
        rows.sort(function (a, b) {
          var x = key(a), y = key(b);
          var r = (typeof x === 'number' && typeof y === 'number') ? x - y : String(x).localeCompare(String(y));
          return asc ? r : -r;
        });
        rows.forEach(function (r) { t.tBodies[0].appendChild(r); });
        tableState(t).page = 0;
        showRows(t);
      });
    });
  });
  // the DAG: one or more pictures (the drawn level; with name scopes also the scope and node
  // views), each panned and zoomed by the vendored svg-pan-zoom once shown; find by name
  var boxes = Array.prototype.slice.call(document.querySelectorAll('div.dag[data-view]'));
  var dag = boxes[0] || null, svg = null, pz = null, pzs = {};
  var panzoom = function (box) {
    var s = box.querySelector('svg');
    if (!pzs[box.id] && s && typeof svgPanZoom === 'function') {
      box.classList.add('pz');
      s.setAttribute('width', '100%');
      s.setAttribute('height', '100%');
      pzs[box.id] = svgPanZoom(s, {zoomEnabled: true, controlIconsEnabled: true, fit: true, center: true,
                                   minZoom: 0.02, maxZoom: 500, zoomScaleSensitivity: 0.3});
    }
    return pzs[box.id] || null;
  };
  var pick = function (box) {
    boxes.forEach(function (b) { b.hidden = b !== box; });
    document.querySelectorAll('button.dag-view').forEach(function (b) {
      b.setAttribute('aria-pressed', b.getAttribute('data-target') === box.id ? 'true' : 'false');
    });
    dag = box;
    svg = box.querySelector('svg');
    pz = panzoom(box);
    window.heDagPanZoom = pz;
  };
  if (dag) pick(dag);
  document.querySelectorAll('button.dag-view').forEach(function (b) {
    b.addEventListener('click', function () { pick(document.getElementById(b.getAttribute('data-target'))); });
  });
  document.querySelectorAll('button.fit').forEach(function (b) {
    b.addEventListener('click', function () {
      var d = dag;
      d.classList.toggle('actual');
      var actual = d.classList.contains('actual');
      b.textContent = actual ? 'fit to width' : 'actual size';
      if (pz) {
        if (actual) { pz.zoomBy(1 / pz.getSizes().realZoom); } else { pz.resize(); pz.fit(); pz.center(); }
      }
    });
  });
  var find = document.getElementById('he-node-search'), said = document.getElementById('he-node-found');
  if (find && dag) {
    var hits = [], at = -1, shown = null;
    // what a box is called: its label lines and its tooltip's "name: ..." lines (not the values it reads)
    var names = function (g) {
      var out = Array.prototype.map.call(g.querySelectorAll('text'), function (t) {
        return t.textContent.toLowerCase();
      });
      var tip = g.querySelector('a > title');
      (tip ? tip.textContent.split('\\n') : []).forEach(function (line) {
        if (line.indexOf('name: ') === 0) out.push(line.slice(6).toLowerCase());
      });
      return out;
    };
    var lookIn = function (root, q) {
      var exact = [], part = [];
      if (!q || !root) return exact;
      ['g.node', 'g.cluster'].forEach(function (sel) {
        Array.prototype.forEach.call(root.querySelectorAll(sel), function (g) {
          var n = names(g);
          if (n.indexOf(q) >= 0) exact.push(g);
          else if (n.some(function (x) { return x.indexOf(q) >= 0; })) part.push(g);
        });
      });
      return exact.concat(part);  // exact names first
    };
    // the shown picture first; when it has no match, the first other picture that has one
    var look = function (q) {
      var h = lookIn(svg, q);
      for (var i = 0; !h.length && q && i < boxes.length; i++) {
        if (boxes[i] === dag) continue;
        h = lookIn(boxes[i].querySelector('svg'), q);
        if (h.length) pick(boxes[i]);
      }
      return h;
    };
    var show = function (g) {
      if (shown) shown.classList.remove('he-found');
      shown = g;
      if (!g) return;
      g.classList.add('he-found');
      if (!pz) { g.scrollIntoView({block: 'center', inline: 'center'}); return; }
      // the box's outline in user units (a text's box is inflated when zoomed far out), its centre
      // in the pan-zoom viewport's units (svg-pan-zoom draws its transforms on the next frame: compute)
      var shape = g.querySelector('path, polygon, ellipse') || g;
      var vp = svg.querySelector('.svg-pan-zoom_viewport');
      var s = pz.getSizes(), bb = shape.getBBox();
      var c = svg.createSVGPoint();
      c.x = bb.x + bb.width / 2;
      c.y = bb.y + bb.height / 2;
      c = c.matrixTransform(vp.getCTM().inverse().multiply(shape.getCTM()));
      if (bb.width > 0 && bb.height > 0) {
        var real = Math.min(40 / bb.height, 0.8 * s.width / bb.width, 0.8 * s.height / bb.height);
        pz.zoom(pz.getZoom() * real / s.realZoom);
      }
      var z = pz.getSizes().realZoom;
      pz.pan({x: s.width / 2 - c.x * z, y: s.height / 2 - c.y * z});
    };
    var tell = function () {
      said.textContent = !find.value ? '' : hits.length ? (at + 1) + ' of ' + hits.length + ' match(es)'
                                                        : 'nothing matches';
    };
    var search = function () {
      hits = look(find.value.trim().toLowerCase());
      at = hits.length ? 0 : -1;
      show(hits.length ? hits[0] : null);
      tell();
    };
    find.addEventListener('input', search);
    find.addEventListener('keydown', function (e) {
      if (e.key !== 'Enter' || !hits.length) return;
      e.preventDefault();
      at = (at + (e.shiftKey ? hits.length - 1 : 1)) % hits.length;
      show(hits[at]);
      tell();
    });
    // a collapsed scope opens on a click: the node view, at the scope's first node
    var nodesBox = document.getElementById('he-dag-nodes');
    boxes.forEach(function (box) {
      if (box.getAttribute('data-view') !== 'scope' || !nodesBox) return;
      Array.prototype.forEach.call(box.querySelectorAll('g.node'), function (g) {
        var t = g.querySelector('title');
        if (!t || !/^s\\d+$/.test(t.textContent)) return;
        g.style.cursor = 'zoom-in';
        g.addEventListener('click', function (e) {
          var scope = (names(g).filter(function (x) { return x.charAt(0) === '/'; })[0] || '');
          if (!scope) return;
          e.preventDefault();
          pick(nodesBox);
          find.value = scope + '/';
          search();
        });
      });
    });
  }
})();
"""


def _vendored(name: str) -> str:
    return (Path(__file__).with_name("vendor") / name).read_text(encoding="utf-8")


#: The report's one inline script: the vendored svg-pan-zoom (BSD-2-Clause; see viz/vendor/),
#: then ours. Model data never enters it.
_SCRIPT = ("/* svg-pan-zoom 3.6.2, Copyright 2009-2010 Andrea Leofreddi and contributors, BSD-2-Clause "
           "(hetero_explore/viz/vendor/LICENSE-svg-pan-zoom.txt) */\n"
           + _vendored("svg-pan-zoom.min.js") + "\n" + _JS)


_CTRL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")  # C0, DEL, C1, lone surrogates


def _e(s) -> str:
    """``s`` escaped for HTML text or a quoted attribute (control characters become U+FFFD)."""
    return html.escape(_CTRL.sub("\ufffd", "" if s is None else str(s)), quote=True)


# -- tables ------------------------------------------------------------------------------
def _is_na(v) -> bool:
    """None, NaN, pandas' NA and NaT (never raises on lists or arrays)."""
    if v is None:
        return True
    if isinstance(v, float):
        return math.isnan(v)
    if isinstance(v, (str, bytes, list, tuple, dict, set, frozenset)) or hasattr(v, "__len__"):
        return False
    import pandas as pd

    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def _cell(col: str, v, cell_class=None) -> str:
    """One escaped ``<td>``."""
    import numpy as np

    classes: list[str] = []
    sort = None
    if isinstance(v, np.generic):
        v = v.item()
    extra = cell_class(col, v) if cell_class else None
    if extra:
        classes.append(extra)
    if _is_na(v):
        text = "—"
        classes.append("na")
    elif isinstance(v, bool):
        text = "✓ True" if v else "✗ False"
        sort = "1" if v else "0"
    elif isinstance(v, numbers.Real) and is_byte_column(col):
        text = human_bytes(v)
        sort = str(int(v))
        classes.append("num")
    elif isinstance(v, numbers.Real) and is_second_column(col):
        text = human_seconds(v)
        sort = repr(float(v))
        classes.append("num")
    elif isinstance(v, numbers.Integral):
        text = str(int(v))
        classes.append("num")
    elif isinstance(v, numbers.Real):
        text = f"{float(v):.6g}"
        sort = repr(float(v))
        classes.append("num")
    elif isinstance(v, dict):
        text = "; ".join(f"{k}: {x}" for k, x in v.items())
    elif isinstance(v, tuple) and col == "shape":
        text = fmt_shape(v)
    elif isinstance(v, (list, tuple, set, frozenset)):
        text = ", ".join(str(x) for x in v)
    else:
        text = str(v)
    attrs = ""
    if classes:
        attrs += f' class="{" ".join(classes)}"'
    if sort is not None:
        attrs += f' data-sort="{_e(sort)}"'
    return f"<td{attrs}>{_e(text)}</td>"


def _table(df, table_id: str, *, cell_class=None, max_rows: int = MAX_ROWS, filter: bool = False,
           index: bool = False) -> str:
    """An escaped, sortable HTML table of a DataFrame."""
    if df is None or len(df.columns) == 0:
        return '<p class="note">(nothing)</p>'
    if index:
        df = df.reset_index()
    cols = [str(c) for c in df.columns]
    n = len(df)
    out = []
    if filter and n > 1:
        out.append(f'<input class="filter" type="search" placeholder="filter rows…" '
                   f'data-table="{_e(table_id)}" aria-label="filter {_e(table_id)}">')
    out.append(f'<div class="tablewrap"><table class="data" id="{_e(table_id)}"><thead><tr>')
    out.extend(f"<th>{_e(c)}</th>" for c in cols)
    out.append("</tr></thead><tbody>")
    for row in df.head(max_rows).itertuples(index=False, name=None):
        out.append("<tr>" + "".join(_cell(c, v, cell_class) for c, v in zip(cols, row)) + "</tr>")
    out.append("</tbody></table></div>")
    if n == 0:
        out.append('<p class="note">(no rows)</p>')
    elif n > max_rows:
        out.append(f'<p class="note">showing the first {max_rows:,} of {n:,} rows</p>')
    return "".join(out)


def _kv(rows) -> str:
    """A key/value table; values are escaped (pass ``(key, html, True)`` for prebuilt HTML)."""
    out = ['<table class="kv"><tbody>']
    for r in rows:
        k, v = r[0], r[1]
        raw = len(r) > 2 and r[2]
        out.append(f"<tr><th>{_e(k)}</th><td>{v if raw else _e(v)}</td></tr>")
    out.append("</tbody></table>")
    return "".join(out)


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


# -- sections ----------------------------------------------------------------------------
def _provider_section(plan) -> str:
    counts = plan.placement_counts()
    rows = ['<div class="tablewrap"><table class="data" id="he-providers"><thead><tr>'
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
            f'{_e(p.name)}</td><td>{_e(p.device)}</td><td>{_e(kind)}</td>'
            f'{_cell("executes", executes)}<td>{_e(capability)}</td><td>{_e("; ".join(mask) or "—")}</td>'
            f'<td class="num">{counts.get(p.name, 0)}</td></tr>')
    rows.append("</tbody></table></div>")
    return "".join(rows)


def _optimizations_text(graph) -> str:
    from ..optimize import summary_text
    recs = list(getattr(graph, "optimizations", ()))
    if not recs:
        return "none"
    each = "; ".join(f"{r['node']} ← {', '.join(r['removed'])}" if r["rule"] == "conv_bn" else
                     f"{', '.join(r['removed'])} → {r['node']}" if r["rule"] == "matmul_add_gemm" else
                     f"{r['node']} removed" for r in recs[:200])
    return summary_text(recs) + f" ({each}{' …' if len(recs) > 200 else ''})"


def _model_section(plan) -> str:
    import pandas as pd

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
    out = [_kv(rows)]

    io = [{"role": "input", "name": n, "dtype": _dt(graph, n), "shape": _shape(graph, n)} for n in graph.inputs]
    io += [{"role": "output", "name": n, "dtype": _dt(graph, n), "shape": _shape(graph, n)} for n in graph.outputs]
    out.append("<h3>Inputs and outputs</h3>")
    out.append(_table(pd.DataFrame(io, columns=["role", "name", "dtype", "shape"]), "he-io"))
    if graph.metadata:
        out.append("<h3>Metadata</h3>")
        out.append(_table(pd.DataFrame([{"key": k, "value": v} for k, v in graph.metadata.items()],
                                       columns=["key", "value"]), "he-metadata"))
    if graph.doc_string:
        out.append("<h3>Doc string</h3>")
        out.append(f"<pre>{_e(graph.doc_string)}</pre>")
    out.append("<h3>Execution blockers</h3>")
    if plan.execution_blockers:
        out.append(_table(plan.blockers_df(), "he-blockers"))
    else:
        out.append('<p class="note">none: the plan can be executed as planned</p>')
    if plan.convexity_splits:
        out.append("<h3>Convexity splits</h3><p class=\"note\">same-provider neighbours kept apart "
                   "because a path leaves and re-enters</p>")
        out.append(_table(pd.DataFrame([{"from_partition": s.a, "to_partition": s.b, "path": list(s.path)}
                                        for s in plan.convexity_splits]), "he-splits"))
    return "".join(out)


def _dt(graph, name):
    v = graph.values.get(name)
    return None if v is None or v.dtype is None else v.dtype.name


def _shape(graph, name):
    v = graph.values.get(name)
    return None if v is None else v.shape


#: a report of a model with name scopes also carries its node view up to this many nodes
REPORT_NODE_VIEW_MAX = 5000


def _render(plan, **kw):
    """``(svg or None, html of a warning or '', the PlanGraph or None)``."""
    try:
        dot = plan_to_graphviz(plan, **kw)
    except Exception as e:  # building the DOT never needs dot; still, never lose the report
        return None, f'<p class="warn">the DAG could not be built: {_e(type(e).__name__)}: {_e(e)}</p>', None
    try:
        return dot.svg(), "", dot
    except GraphvizNotFoundError as e:
        return None, (f'<p class="warn">{_e(e)}</p><details><summary>DOT source</summary>'
                      f"<pre>{_e(dot.source)}</pre></details>"), dot
    except Exception as e:
        return None, (f'<p class="warn">Graphviz failed to render the DAG: {_e(type(e).__name__)}: {_e(e)}</p>'
                      f"<details><summary>DOT source</summary><pre>{_e(dot.source)}</pre></details>"), dot


_VIEW_TEXT = {"node": "one box per node, one cluster per partition",
              "partition": "one box per partition; edges carry the bytes that cross them",
              "scope": "the exporter's name scopes, one box each (striped by provider share); "
                       "click one to open it in the node view"}


def _dag_section(plan, level: str, layout: str) -> str:
    from .scopes import model_scopes

    svg, warn, dot = _render(plan, level=level, layout=layout)
    if svg is None:
        return warn
    pictures = [(dot.level, "he-dag-box", svg)]
    n = len(plan.graph.nodes)
    if n > 1 and model_scopes(plan.graph):  # the other views of a scoped model, for its view buttons
        extra = {"node": ["scope"], "partition": ["scope", "node"], "scope": ["partition", "node"]}[dot.level]
        for lv in extra:
            if lv == "node" and n > REPORT_NODE_VIEW_MAX:
                continue
            more, _warn, _dot = _render(plan, level=lv)
            if more is not None:
                pictures.append((lv, f"he-dag-{lv}s", more))
    buttons = ""
    if len(pictures) > 1:
        buttons = "view: " + "".join(
            f'<button class="dag-view" type="button" data-target="{bid}" aria-pressed="false">{_e(lv)}s</button> '
            for lv, bid, _svg in pictures)
    notes = "; ".join(f"{_e(lv)} view: {_e(_VIEW_TEXT[lv])}" for lv, _bid, _svg in pictures)
    boxes = "".join(f'<div class="dag" id="{bid}" data-view="{_e(lv)}"{" hidden" if k else ""}>{pic}</div>'
                    for k, (lv, bid, pic) in enumerate(pictures))
    return (f'<p class="note">{notes}. Hover for op, shapes and dtypes; drag to '
            'pan, scroll or the +/\u2212 buttons to zoom.</p><p>' + buttons +
            '<button class="fit" type="button" data-target="he-dag-box">actual size</button> '
            '<input id="he-node-search" class="node-search" type="search" '
            'placeholder="find a node, scope or partition by name\u2026" aria-label="find a node by name"> '
            '<span id="he-node-found" class="note" aria-live="polite"></span></p>' + boxes)


def _run_section(run, cell_class=None) -> str:
    df = _as_df(run)
    out = []
    for attr in ("summary",):
        f = getattr(run, attr, None)
        if callable(f):
            try:
                out.append(f'<p>{_e(f())}</p>')
            except Exception:
                pass
    if getattr(run, "events", None):
        from .timeline import timeline_svg
        out.append("<h3>Timeline</h3>" + timeline_svg(run))
    if df is None:
        out.append(f"<pre>{_e(repr(run))}</pre>")
    else:
        out.append(_table(df, "he-timings", cell_class=cell_class, filter=True))
    return "".join(out)


def _diff_section(diff, cell_class=None) -> tuple[str, str]:
    """(badge html, section html)."""
    df = _as_df(diff)
    if df is None:
        return "", f"<pre>{_e(repr(diff))}</pre>"
    badge = ""
    if "byte_identical" in df.columns and len(df):
        ok = df["byte_identical"].astype(bool)
        if bool(ok.all()):
            badge = f'<span class="badge ok">all {len(df)} output(s) byte-identical</span>'
        else:
            badge = f'<span class="badge bad">{int((~ok).sum())} of {len(df)} output(s) differ</span>'

    def cls(col, v):
        if col == "byte_identical" and isinstance(v, bool):
            return "ok" if v else "bad"
        return cell_class(col, v) if cell_class else None

    return badge, ((f"<p>{badge}</p>" if badge else "") + f'<p class="note">{_e(DIFF_MEANING)}</p>'
                   + _table(df, "he-diff", cell_class=cls))


#: what a byte-identity verdict means, spelled out in the report
DIFF_MEANING = (
    "Each row is one graph output. byte_identical is True when the heterogeneous run's output has exactly "
    "the bytes of the single-provider reference run's output (same dtype, same shape, every element's bit "
    "pattern equal, NaN payloads included) — not merely close within a tolerance. When it is False, n_diff "
    "counts the elements that differ, max_abs and max_ulp measure the largest difference, and the first "
    "differing index and the node or transfer blamed for it say where to look.")


def _about_section(plan, run, diff, provenance: dict) -> str:
    """Date, how the report was made, versions, the inputs and the reference: what a colleague
    needs to trust (or reproduce) what the report shows."""
    import datetime

    import pandas as pd

    made = provenance.get("command") or "hetero_explore: Plan.to_html(...) / Explorer.export_html(...) from Python"
    date = provenance.get("date") or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    rows = [("date", date),
            ("made by", made)]
    rows += [(f"{k} version", v) for k, v in versions().items()]
    rows.append(("providers (priority order)", ", ".join(p.name for p in plan.providers)))
    rows.append(("placement policy", plan.policy))
    if diff is not None:
        rows.append(("reference run", f"single provider {provenance.get('reference', 'cpu')!s}, same inputs"))
    if provenance.get("not_run"):
        rows.append(("execution", f"nothing was executed: {provenance['not_run']}"))
    elif run is None:
        rows.append(("execution", "not executed (plan only)"))
    out = [_kv(rows)]
    inputs = getattr(run, "inputs", None) if run is not None else None
    if inputs:
        source = provenance.get("inputs") or "given by the caller"
        out.append(f"<h3>Inputs</h3><p class=\"note\">{_e(source)}</p>")
        recs = []
        for name, a in inputs.items():
            a = np.asarray(a)
            rec = {"input": name, "dtype": a.dtype.name, "shape": str(tuple(a.shape)), "elements": int(a.size)}
            if a.size and a.dtype.kind in "fiub":
                rec.update(min=float(a.min()), max=float(a.max()))
            else:
                rec.update(min=None, max=None)
            recs.append(rec)
        out.append(_table(pd.DataFrame(recs, columns=["input", "dtype", "shape", "elements", "min", "max"]),
                          "he-inputs"))
    return "".join(out)


def plan_to_html(plan, path=None, run=None, diff=None, *, title: str | None = None, level: str = "auto",
                 layout: str = "auto", max_rows: int = MAX_ROWS, provenance: dict | None = None):
    """Write a self-contained HTML report of ``plan`` (return the HTML when ``path`` is None).

    Args:
        plan: the :class:`~hetero_explore.planner.plan.Plan`.
        path: file to write; parent folders are created. None: return the HTML text.
        run: a ``RunResult`` (anything with ``timings_df()``) or a timings DataFrame.
        diff: the byte-identity comparison DataFrame (one row per output; a
            ``byte_identical`` column is coloured green/red).
        title: page title (default: the graph's name).
        level: DAG level, as in :meth:`Plan.to_graphviz`.
        layout: partition-level layout, as in :func:`plan_to_graphviz`.
        max_rows: longest table shown.
        provenance: what the "About" section says beyond the date and versions:
            ``command`` (the command line or API call that made it), ``inputs`` (where the
            inputs came from, e.g. "seeded random inputs, seed 0"), ``reference`` (the
            reference provider's name), ``not_run`` (why nothing was executed) and ``date``
            (default: now, UTC).

    Returns:
        The HTML text when ``path`` is None, else the :class:`pathlib.Path` written.
    """
    from ..about import __version__

    graph = plan.graph
    colors = provider_colors(plan.provider_names)
    prov_index = {p.name: i for i, p in enumerate(plan.providers)}
    prov_css = "".join(f".prov-{i} {{ background: {colors[p.name]} !important; }}\n"
                       for i, p in enumerate(plan.providers))

    def prov_cls(col, v):
        if col in PROVIDER_COLUMNS and isinstance(v, str) and v in prov_index:
            return f"prov-{prov_index[v]}"
        return None

    title = title or f"hetero_explore plan — {graph.name}"
    tb = plan.transfer_bytes
    badges = [
        f'<span class="badge">{"heterogeneous" if plan.is_heterogeneous else "single provider"}</span>',
        ('<span class="badge ok">executable</span>' if plan.executable
         else f'<span class="badge bad">execution blocked ({len(plan.execution_blockers)})</span>'),
        f'<span class="badge">{len(graph.nodes):,} nodes</span>',
        f'<span class="badge">{len(plan.partitions):,} partitions</span>',
        f'<span class="badge">{len(plan.transfers):,} transfers · {_e(human_bytes(tb))}</span>',
        f'<span class="badge">planned in {plan.plan_seconds * 1000:.1f} ms</span>',
        f'<span class="badge">policy: {_e(plan.policy)}</span>',
    ]
    diff_badge, diff_html = ("", "")
    if diff is not None:
        diff_badge, diff_html = _diff_section(diff, prov_cls)
    sections = [
        ("about", "About this report", _about_section(plan, run, diff, dict(provenance or {}))),
        ("providers", "Providers (priority order)", _provider_section(plan)),
        ("ops", "Ops per provider", _table(plan.ops_df(), "he-ops", cell_class=prov_cls, max_rows=max_rows,
                                           filter=True)),
        ("model", "Model", _model_section(plan)),
        ("dag", "DAG", _dag_section(plan, level, layout)),
        ("placement", "Placement", _table(plan.placement_df(), "he-placement", cell_class=prov_cls,
                                          max_rows=max_rows, filter=True)),
        ("partitions", "Partitions", _table(plan.partitions_df(), "he-partitions", cell_class=prov_cls,
                                            max_rows=max_rows, filter=True)),
        ("transfers", "Transfers", _table(plan.transfers_df(), "he-transfers", cell_class=prov_cls,
                                          max_rows=max_rows, filter=True)
         if plan.transfers else '<p class="note">no cross-provider transfers</p>'),
    ]
    if run is not None:
        sections.append(("run", "Run timings", _run_section(run, prov_cls)))
    if diff is not None:
        sections.append(("diff", "Byte-identity diff", diff_html))

    script_hash = base64.b64encode(hashlib.sha256(_SCRIPT.encode("utf-8")).digest()).decode("ascii")
    csp = (f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
           f"script-src 'sha256-{script_hash}'; base-uri 'none'; form-action 'none'")
    nav = "".join(f'<a href="#sec-{sid}">{_e(name)}</a>' for sid, name, _ in sections)
    body = "".join(f'<section id="sec-{sid}"><h2>{_e(name)}</h2>{content}</section>'
                   for sid, name, content in sections)
    page = (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{_e(csp)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}{prov_css}</style></head><body>"
        f"<header><h1>{_e(title)}</h1><div class=\"summary\">{_e(plan.summary())}</div>"
        f"<div>{''.join(badges)}{diff_badge}</div></header>"
        f"<nav>{nav}</nav><main>{body}</main>"
        f"<footer>generated by hetero_explore {_e(__version__)}; self-contained, works offline</footer>"
        f"<script>{_SCRIPT}</script></body></html>\n")
    if path is None:
        return page
    return write_text_safely(path, page, what="report")


def _write_beside(target: Path, data: bytes, mode: int | None) -> None:
    """Write ``data`` to a temporary file in ``target``'s folder, then move it onto ``target``
    (atomic on POSIX: a reader sees the old file or the whole new one, never half)."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".hx-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode if mode is not None else 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


def write_text_safely(path, text: str, *, what: str = "file") -> Path:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file beside it and a rename;
    parent folders are created. Returns the path written.

    Refuses, with :class:`~hetero_explore.errors.OutputWriteError`, an empty path, a
    folder, a device or other non-regular file (``/dev/full``), a path under a file,
    and any OS failure (no space, no permission, a name too long). On failure the text
    is not lost: it is written to a fresh file in the temporary folder, whose path the
    message gives and ``error.fallback_path`` holds (None when that failed too)."""
    from ..errors import OutputWriteError

    data = text.encode("utf-8")
    raw = os.fspath(path) if isinstance(path, (str, bytes, os.PathLike)) else None
    why = None
    target = None
    if raw is None:
        why = f"the path must be a string or a path-like object, not {type(path).__name__}"
    elif isinstance(raw, bytes):
        raw = os.fsdecode(raw)
    if why is None and (not raw or not raw.strip()):
        why = "the path is empty"
    if why is None and "\0" in raw:
        why = "the path contains a NUL character"
    if why is None:
        target = Path(os.path.realpath(raw))  # follow a symlink: replace the file it points to
        try:
            st = os.stat(target)
        except FileNotFoundError:
            st = None
        except OSError as e:  # a name too long, a path under a file, a loop, no permission
            st = None
            why = e.strerror or type(e).__name__
        if st is not None and stat.S_ISDIR(st.st_mode):
            why = "it is a folder; give a file name inside it, e.g. " + os.path.join(raw, "report.html")
        elif st is not None and not stat.S_ISREG(st.st_mode):
            why = "it exists and is not a regular file (a device, FIFO or socket); give a file path"
    if why is None:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            _write_beside(target, data, None if st is None else stat.S_IMODE(st.st_mode))
            return target
        except OSError as e:
            why = f"{e.strerror or type(e).__name__}" + (f" ({e.filename})" if e.filename else "")
    # keep the result: a fresh file in the temporary folder
    fallback = None
    try:
        fd, fallback = tempfile.mkstemp(prefix="hetero_explore_", suffix=_suffix(raw))
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        kept = f"; the {what} was saved instead to {fallback}"
    except OSError as e2:
        fallback = None
        kept = f"; saving it to the temporary folder failed too ({e2.strerror or e2})"
    err = OutputWriteError(f"cannot write the {what} to {raw!r}: {why}{kept}; give another path "
                           f"(a writable folder and a file name under 255 bytes)")
    err.fallback_path = fallback
    raise err


def _suffix(raw) -> str:
    ext = os.path.splitext(raw or "")[1] if isinstance(raw, str) else ""
    return ext if ext and len(ext) <= 16 and ext[1:].isalnum() else ".html"
