"""A self-contained HTML report of a plan (and optionally a run and a byte-identity diff).

One file: inline CSS, the DAG as inline SVG, one small inline script (table
filtering, sorting and paging, 200 rows a page; the DAG's pan, zoom and search) pinned by a Content-Security-Policy
hash, no network fetches, so it opens offline. Every string that comes from
the model or a provider is escaped with :func:`~hetero_explore.viz.html.esc`; model data never
enters the script. The sections are the registered views (:mod:`hetero_explore.viz.views`),
rendered for the report: the same views as the app's tabs.
"""

from __future__ import annotations

import base64
import hashlib
import os
import stat
import tempfile
from pathlib import Path

from ..ir.units import human_bytes, human_seconds
from .colors import provider_colors
from .html import MAX_ROWS, esc, table_html  # noqa: F401  (MAX_ROWS, table_html: re-exported)
from .views import PROVIDER_COLUMNS, ViewState, registered

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
th { background: var(--soft); cursor: pointer; user-select: none; overflow-wrap: normal; word-break: keep-all;
     hyphens: none; }
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
    // what a box is called: its label lines and its tooltip's "name: ..." lines; and the tensors
    // it reads and writes (listed under "inputs:" / "outputs:"; viz.graph.tooltip_names)
    var parts = function (g) {
      var out = Array.prototype.map.call(g.querySelectorAll('text'), function (t) {
        return t.textContent.toLowerCase();
      });
      var tensors = [];
      var tip = g.querySelector('a > title'), listing = false;
      (tip ? tip.textContent.replace(/\\u00a0/g, ' ').split('\\n') : []).forEach(function (line) {
        if (line.indexOf('name: ') === 0) { out.push(line.slice(6).toLowerCase()); listing = false; }
        else if (line === 'inputs:' || line === 'outputs:') listing = true;
        else if (listing && line.indexOf('  ') === 0 && line.indexOf('  ... and ') !== 0)
          tensors.push(line.slice(2).split(': ')[0].toLowerCase());
        else listing = false;
      });
      return {names: out, tensors: tensors};
    };
    var names = function (g) { return parts(g).names; };
    var lookIn = function (root, q) {
      var exact = [], tensor = [], part = [];
      if (!q || !root) return exact;
      ['g.node', 'g.cluster'].forEach(function (sel) {
        Array.prototype.forEach.call(root.querySelectorAll(sel), function (g) {
          var p = parts(g), all = p.names.concat(p.tensors);
          if (p.names.indexOf(q) >= 0) exact.push(g);
          else if (p.tensors.indexOf(q) >= 0) tensor.push(g);
          else if (all.some(function (x) { return x.indexOf(q) >= 0; })) part.push(g);
        });
      });
      return exact.concat(tensor, part);  // a box called so first, then one reading or writing it
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


def plan_to_html(plan, path=None, run=None, diff=None, *, title: str | None = None, level: str = "auto",
                 layout: str = "auto", max_rows: int = MAX_ROWS, provenance: dict | None = None,
                 previous=None, expand=(), timings=None, op_ulp=None):
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
        previous: an earlier plan of the same model, for the Changes section.
        expand: at the scope level, the scopes drawn open.
        timings: the run's :class:`~hetero_explore.analysis.timing.Timings` (warm median and p90
            over N runs, the first run and compile time apart), shown in the Run section.
        op_ulp: the per-op ULP table of a run with ONNX Runtime partitions (``Explorer.op_ulp``),
            shown in the Diff section.

    Returns:
        The HTML text when ``path`` is None, else the :class:`pathlib.Path` written.
    """
    from ..ir.about import __version__

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
        f'<span class="badge">{len(plan.transfers):,} transfers · {esc(human_bytes(tb))}</span>',
        f'<span class="badge">planned in {plan.plan_seconds * 1000:.1f} ms</span>',
        f'<span class="badge">policy: {esc(plan.policy)}</span>',
    ]
    if timings is not None and getattr(timings, "n", 0):
        badges.append(f'<span class="badge">warm {esc(human_seconds(timings.warm_median_seconds))} median '
                      f'(p90 {esc(human_seconds(timings.warm_p90_seconds))}, {timings.n} runs)</span>')
    diff_badge = ""
    if diff is not None and "byte_identical" in getattr(diff, "columns", ()) and len(diff):
        ok = diff["byte_identical"].astype(bool)
        diff_badge = (f'<span class="badge ok">all {len(diff)} output(s) byte-identical</span>' if bool(ok.all())
                      else f'<span class="badge bad">{int((~ok).sum())} of {len(diff)} output(s) differ</span>')
    prov = dict(provenance or {})
    state = ViewState(plan=plan, plan_is_current=True, plan_index=None, previous=previous, run=run, diff=diff,
                      reference=str(prov.get("reference", "cpu")), error="", run_error="", level=level,
                      expand=tuple(expand), medium="report", layout=layout, max_rows=max_rows, provenance=prov,
                      cell_class=prov_cls, timings=timings, op_ulp=op_ulp)
    executed = run is not None or diff is not None
    sections = [(v.section, v.title, v.render(state)) for v in registered() if executed or not v.needs_run]

    nav = "".join(f'<a href="#sec-{sid}">{esc(name)}</a>' for sid, name, _ in sections)
    body = "".join(f'<section id="sec-{sid}"><h2>{esc(name)}</h2>{content}</section>'
                   for sid, name, content in sections)
    scripts = [_SCRIPT]
    workers = ""
    from .graphview import SCRIPT_MARK
    if SCRIPT_MARK in body:  # the interactive graph: its script where it stands, ELK's worker from a blob
        from .graphview import report_script
        scripts.append(report_script())
        body = body.replace(SCRIPT_MARK, f"<script>{scripts[-1]}</script>", 1).replace(SCRIPT_MARK, "")
        workers = " worker-src blob:;"
    hashes = " ".join("'sha256-" + base64.b64encode(hashlib.sha256(x.encode("utf-8")).digest()).decode("ascii") + "'"
                      for x in scripts)
    csp = (f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
           f"script-src {hashes};{workers} base-uri 'none'; form-action 'none'")
    page = (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{esc(csp)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_CSS}{prov_css}</style></head><body>"
        f"<header><h1>{esc(title)}</h1><div class=\"summary\">{esc(plan.summary())}</div>"
        f"<div>{''.join(badges)}{diff_badge}</div></header>"
        f"<nav>{nav}</nav><main>{body}</main>"
        f"<footer>generated by hetero_explore {esc(__version__)}; self-contained, works offline</footer>"
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

    Refuses, with :class:`~hetero_explore.ir.errors.OutputWriteError`, an empty path, a
    folder, a device or other non-regular file (``/dev/full``), a path under a file,
    and any OS failure (no space, no permission, a name too long). On failure the text
    is not lost: it is written to a fresh file in the temporary folder, whose path the
    message gives and ``error.fallback_path`` holds (None when that failed too)."""
    from ..ir.errors import OutputWriteError

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
