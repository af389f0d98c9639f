// hetero_explore's interactive plan graph: an anywidget front end (plain ES module, no server),
// also mounted by the self-contained HTML report. The DAG is laid out by ELK's layered
// algorithm (elkjs, vendored) in a web worker, drawn as SVG, panned and zoomed by one
// transform. Nodes are grouped into scopes (the exporter's name scopes, or blocks cut where
// the graph is narrow); a collapsed scope is one box, a click opens it. Search finds op types,
// node names and tensor names; the view opens the scopes around a match and pans to it.
//
// Data (from Python, hetero_explore.viz.graphdata): `graph` (nodes, values, scopes; sent once)
// and `placement` (provider and partition per node; sent per plan: a re-plan recolours without
// a new layout). Model strings only ever reach the page as text (textContent), never as markup.

const NS = "http://www.w3.org/2000/svg";
// boxes drawn when the view opens: scopes are opened, biggest first, while fewer are shown
export const INITIAL_BOXES = 60;
// boxes ELK lays out at most; opening a scope past this asks for a smaller one first
export const MAX_BOXES = 1500;
const LAYOUT = {
  "elk.algorithm": "layered", "elk.direction": "DOWN", "elk.hierarchyHandling": "INCLUDE_CHILDREN",
  "elk.layered.thoroughness": "2", "elk.edgeRouting": "POLYLINE",
  "elk.layered.crossingMinimization.greedySwitch.type": "OFF",
  "elk.layered.nodePlacement.strategy": "LINEAR_SEGMENTS",
  "elk.spacing.nodeNode": "14", "elk.layered.spacing.nodeNodeBetweenLayers": "26",
  "elk.spacing.edgeNode": "8", "elk.layered.spacing.edgeNodeBetweenLayers": "8",
};
const PAD = "[top=28,left=10,bottom=10,right=10]";
const now = () => (typeof performance !== "undefined" ? performance.now() : Date.now());

// -- the model of the graph (built once per `graph`) -----------------------------------------------
export function prepare(g) {
  const nN = g.nodes.length, nS = g.scopes.length, nV = g.values.length;
  const scopeParent = g.scopes.map((s) => s[0]);
  const nodeScope = g.nodes.map((n) => n[2]);
  const scopeKids = Array.from({ length: nS }, () => []);
  const scopeNodes = Array.from({ length: nS }, () => []);
  const rootKids = [], rootNodes = [];
  scopeParent.forEach((p, s) => (p < 0 ? rootKids : scopeKids[p]).push(s));
  nodeScope.forEach((s, n) => (s < 0 ? rootNodes : scopeNodes[s]).push(n));
  const size = new Array(nS).fill(0), first = new Array(nS).fill(nN);
  for (let n = 0; n < nN; n++) {
    for (let s = nodeScope[n]; s >= 0; s = scopeParent[s]) { size[s] += 1; if (n < first[s]) first[s] = n; }
  }
  const depth = new Array(nS).fill(0);
  for (let s = 0; s < nS; s++) { let d = 0; for (let p = scopeParent[s]; p >= 0; p = scopeParent[p]) d++; depth[s] = d; }
  // values: producer and consumers; edges producer -> consumer (graph inputs/outputs as pseudo nodes)
  const producer = new Array(nV).fill(-1), consumers = Array.from({ length: nV }, () => []);
  g.nodes.forEach((n, i) => { n[4].forEach((v) => { producer[v] = i; }); n[3].forEach((v) => consumers[v].push(i)); });
  const isConst = new Uint8Array(nV);
  (g.constants || []).forEach((v) => { isConst[v] = 1; });
  const inputOf = new Map(g.inputs.map((v, k) => [v, k]));
  const edges = [];  // [from key, to key, value]
  for (let v = 0; v < nV; v++) {
    if (isConst[v]) continue;
    const p = producer[v];
    const src = p >= 0 ? "n" + p : (inputOf.has(v) ? "i" + inputOf.get(v) : null);
    if (src === null) continue;
    const seen = new Set();
    consumers[v].forEach((c) => { if (!seen.has(c)) { seen.add(c); edges.push([src, "n" + c, v]); } });
  }
  g.outputs.forEach((v, k) => {
    const p = producer[v];
    const src = p >= 0 ? "n" + p : (inputOf.has(v) ? "i" + inputOf.get(v) : null);
    if (src !== null) edges.push([src, "o" + k, v]);
  });
  // search: lower-cased fields per node (op type, name, every tensor it reads or writes)
  const low = (x) => String(x).toLowerCase();
  const fields = g.nodes.map((n) => [low(n[0]), low(n[1])].concat(n[3].concat(n[4]).map((v) => low(g.values[v][0]))));
  return { g, nN, nS, scopeParent, nodeScope, scopeKids, scopeNodes, rootKids, rootNodes, size, first, depth,
           producer, consumers, edges, fields };
}

// the scopes opened first: a whole level at a time (a half-open level draws lopsided), while at
// most `limit` boxes show; a scope that is all its parent holds opens with it
export function initialExpanded(m, limit = INITIAL_BOXES) {
  const open = new Set();
  const items = (s) => (s < 0 ? m.rootKids.length + m.rootNodes.length : m.scopeKids[s].length + m.scopeNodes[s].length);
  let shown = items(-1);
  let level = m.rootKids.filter((s) => m.size[s] > 1);
  const through = (ss) => {  // open scopes that are the only thing their parent shows
    let changed = true;
    while (changed) {
      changed = false;
      const next = [];
      ss.forEach((s) => {
        if (ss.length === 1 && shown - 1 + items(s) <= limit) { open.add(s); shown += items(s) - 1; next.push(...m.scopeKids[s].filter((k) => m.size[k] > 1)); changed = true; }
        else next.push(s);
      });
      ss = next;
    }
    return ss;
  };
  level = through(level);
  while (level.length) {
    const more = level.reduce((a, s) => a + items(s) - 1, 0);
    if (shown + more > limit) break;
    level.forEach((s) => open.add(s));
    shown += more;
    level = through(level.flatMap((s) => m.scopeKids[s].filter((k) => m.size[k] > 1)));
  }
  return open;
}

// what is drawn for an expansion: each node's box (itself or its outermost closed scope)
export function visible(m, open) {
  const rep = new Array(m.nN);
  const boxOfScope = new Map();
  for (let n = 0; n < m.nN; n++) {
    let r = "n" + n;
    const chain = [];
    for (let s = m.nodeScope[n]; s >= 0; s = m.scopeParent[s]) chain.push(s);
    for (let k = chain.length - 1; k >= 0; k--) {
      const s = chain[k];
      if (!open.has(s) && m.size[s] > 1) { r = "s" + s; break; }
    }
    rep[n] = r;
  }
  const items = new Set(rep);
  m.g.inputs.forEach((_v, k) => items.add("i" + k));
  m.g.outputs.forEach((_v, k) => items.add("o" + k));
  // the open scopes around each drawn box (innermost last)
  const containers = new Map();
  const within = (key) => {
    if (containers.has(key)) return containers.get(key);
    let s = -1;
    if (key[0] === "n") s = m.nodeScope[+key.slice(1)];
    else if (key[0] === "s") s = m.scopeParent[+key.slice(1)];
    const chain = [];
    for (; s >= 0; s = m.scopeParent[s]) if (open.has(s) || m.size[s] <= 1) { if (m.size[s] > 1) chain.push(s); }
    chain.reverse();
    containers.set(key, chain);
    return chain;
  };
  const agg = new Map();
  const repOf = (key) => (key[0] === "n" ? rep[+key.slice(1)] : key);
  for (const [a, b, v] of m.edges) {
    const ra = repOf(a), rb = repOf(b);
    if (ra === rb) continue;
    const k = ra + ">" + rb;
    let e = agg.get(k);
    if (!e) { e = { a: ra, b: rb, values: [], pairs: [] }; agg.set(k, e); }
    if (e.values.length < 12) e.values.push(v);
    if (e.pairs.length < 64) e.pairs.push([a, b]);
  }
  let boxes = 0;
  items.forEach((k) => { if (k[0] === "n" || k[0] === "s") boxes++; });
  return { rep, items, within, edges: Array.from(agg.values()), boxes };
}

const textWidth = (s, px) => Math.ceil(String(s).length * px * 0.6);
function clip(s, n) { s = String(s); return s.length > n ? s.slice(0, n - 1) + "\u2026" : s; }

function boxSize(m, key) {
  const g = m.g;
  if (key[0] === "n") {
    const n = g.nodes[+key.slice(1)];
    const w = Math.max(textWidth(n[0], 11), textWidth(clip(n[1], 32), 10));
    return [Math.min(260, Math.max(56, w + 16)), n[1] && n[1] !== n[0] ? 34 : 22];
  }
  if (key[0] === "s") {
    const s = g.scopes[+key.slice(1)];
    return [Math.min(300, Math.max(90, textWidth(clip(s[1], 40), 11) + 20)), 38];
  }
  const v = key[0] === "i" ? g.inputs[+key.slice(1)] : g.outputs[+key.slice(1)];
  return [Math.min(240, Math.max(56, textWidth(clip(g.values[v][0], 30), 10) + 24)), 24];
}

// the ELK graph of a visible set: open scopes are compound nodes, each edge in its endpoints'
// innermost common scope (ELK reports its points relative to that container)
export function elkGraph(m, vis, aspect = 2) {
  const compound = new Map();
  // a long chain of layers wraps into side-by-side runs, to about the drawing area's aspect ratio
  const rootOptions = Object.assign({}, LAYOUT, { "elk.layered.wrapping.strategy": "MULTI_EDGE",
                                                  "elk.aspectRatio": String(Math.max(0.5, Math.min(4, aspect))) });
  const root = { id: "root", layoutOptions: rootOptions, children: [], edges: [] };
  const holder = (chain) => {
    let parent = root;
    for (const s of chain) {
      let c = compound.get(s);
      if (!c) {
        c = { id: "c" + s, layoutOptions: Object.assign({}, LAYOUT, { "elk.padding": PAD }), children: [], edges: [] };
        compound.set(s, c);
        parent.children.push(c);
      }
      parent = c;
    }
    return parent;
  };
  const order = Array.from(vis.items).sort((a, b) => orderKey(m, a) - orderKey(m, b));
  for (const key of order) {
    const [w, h] = boxSize(m, key);
    holder(vis.within(key)).children.push({ id: key, width: w, height: h });
  }
  vis.edges.forEach((e, i) => {
    const ca = vis.within(e.a), cb = vis.within(e.b);
    let k = 0;
    while (k < ca.length && k < cb.length && ca[k] === cb[k]) k++;
    holder(ca.slice(0, k)).edges.push({ id: "e" + i, sources: [e.a], targets: [e.b] });
  });
  return root;
}

function orderKey(m, key) {
  const t = key[0], i = +key.slice(1);
  if (t === "i") return -1e9 + i;
  if (t === "o") return 1e9 + i;
  if (t === "n") return i;
  return m.first[i];
}

// -- a draft layout for the first picture, while ELK's worker starts ------------------------------------
// Layers by longest path, each layer ordered by its predecessors' mean position, open scopes laid
// out inside first (bottom-up); straight edges. Linear in the boxes and edges; replaced by ELK's
// layout as soon as the worker is ready, so the first picture never waits for the engine to boot.
export function draftLayout(root, aspect = 2) {
  const GAP_X = 14, GAP_Y = 26, GAP_COL = 48;
  const place = (node) => {
    const kids = node.children || [];
    kids.forEach((c) => { if (c.children) place(c); });
    const top = node.id === "root" ? 12 : 28, side = node.id === "root" ? 12 : 10;
    const index = new Map(kids.map((c, i) => [c.id, i]));
    const owner = new Map();  // any id inside a kid -> that kid's index
    const claim = (n, i) => { owner.set(n.id, i); (n.children || []).forEach((c) => claim(c, i)); };
    kids.forEach((c, i) => claim(c, i));
    const preds = kids.map(() => []);
    const all = [];
    const gather = (n) => { (n.edges || []).forEach((e) => all.push(e)); (n.children || []).forEach(gather); };
    gather(node);
    all.forEach((e) => {
      const a = owner.get(e.sources[0]), b = owner.get(e.targets[0]);
      if (a !== undefined && b !== undefined && a !== b && a < b) preds[b].push(a);
    });
    const layer = kids.map(() => 0);
    kids.forEach((_c, i) => preds[i].forEach((a) => { layer[i] = Math.max(layer[i], layer[a] + 1); }));
    const layers = [];
    kids.forEach((_c, i) => { (layers[layer[i]] = layers[layer[i]] || []).push(i); });
    const xcenter = kids.map(() => 0);
    let y = top, width = 0;
    const rows = [];
    layers.forEach((row) => {
      if (!row) return;
      row.sort((a, b) => {
        const m = (i) => (preds[i].length ? preds[i].reduce((s, p) => s + xcenter[p], 0) / preds[i].length : i);
        return m(a) - m(b);
      });
      let x = 0, h = 0;
      row.forEach((i) => { const c = kids[i]; c.x = x; x += c.width + GAP_X; h = Math.max(h, c.height); });
      rows.push([row, x - GAP_X, y]);
      row.forEach((i) => { kids[i].y = y; xcenter[i] = kids[i].x + kids[i].width / 2; });
      width = Math.max(width, x - GAP_X);
      y += h + GAP_Y;
    });
    rows.forEach(([row, w]) => row.forEach((i) => {  // centre each layer
      kids[i].x += side + (width - w) / 2; xcenter[i] = kids[i].x + kids[i].width / 2;
    }));
    let height = y - GAP_Y;
    if (node.id === "root" && rows.length > 3 && height > aspect * width) {
      // wrap the layers into columns (read each down, the columns left to right), as ELK does
      const cols = Math.min(rows.length, Math.max(1, Math.round(Math.sqrt(height * aspect / Math.max(1, width)))));
      const per = Math.ceil(height / cols);
      let col = 0, y0 = rows[0][2], maxH = 0;
      rows.forEach(([row, _w, ry]) => {
        if (ry - y0 >= per && col < cols - 1) { col += 1; y0 = ry; }
        row.forEach((i) => { kids[i].x += col * (width + GAP_COL); kids[i].y = top + (ry - y0); maxH = Math.max(maxH, kids[i].y + kids[i].height); });
      });
      width = (col + 1) * width + col * GAP_COL;
      height = maxH - top;
    }
    node.width = Math.max(node.width || 0, width + 2 * side, 60);
    node.height = Math.max(top + height + (node.id === "root" ? 12 : 10), 40);
  };
  place(root);
  // straight edges in root coordinates, from the source's bottom to the target's top
  const abs = new Map();
  const walk = (n, ox, oy) => { (n.children || []).forEach((c) => { abs.set(c.id, [ox + c.x, oy + c.y, c]); walk(c, ox + c.x, oy + c.y); }); };
  walk(root, 0, 0);
  const edges = [];
  const gather = (n) => { (n.edges || []).forEach((e) => edges.push(e)); (n.children || []).forEach(gather); };
  gather(root);
  edges.forEach((e) => {
    const a = abs.get(e.sources[0]), b = abs.get(e.targets[0]);
    if (!a || !b) return;
    e.sections = [{ startPoint: { x: a[0] + a[2].width / 2, y: a[1] + a[2].height }, endPoint: { x: b[0] + b[2].width / 2, y: b[1] } }];
    e.container = "root";
  });
  root.draft = true;
  return root;
}

// -- ELK in a web worker -----------------------------------------------------------------------------
class ElkWorker {
  constructor(source) {
    this.url = URL.createObjectURL(new Blob([source], { type: "application/javascript" }));
    this.worker = new Worker(this.url);
    this.next = 0;
    this.pending = new Map();
    this.worker.onmessage = (ev) => {
      const d = ev.data || {};
      const p = this.pending.get(d.id);
      if (!p) return;
      this.pending.delete(d.id);
      if (d.error) p.reject(new Error(d.error.message || String(d.error))); else p.resolve(d.data);
    };
    this.worker.onerror = (ev) => { this.pending.forEach((p) => p.reject(new Error(ev.message || "ELK worker failed"))); this.pending.clear(); };
    const t = now();
    this.ready = this.call({ cmd: "register", algorithms: ["layered"] }).then(() => { this.ready_ms = now() - t; });
  }
  call(msg) {
    const id = this.next++;
    return new Promise((resolve, reject) => { this.pending.set(id, { resolve, reject }); this.worker.postMessage(Object.assign({ id }, msg)); });
  }
  async layout(graph) {
    await this.ready;
    return this.call({ cmd: "layout", graph, layoutOptions: {}, options: {} });
  }
  close() { this.worker.terminate(); URL.revokeObjectURL(this.url); }
}

// -- the view ------------------------------------------------------------------------------------------
const CSS = `
.hxg{font:12px/1.3 -apple-system,"Segoe UI",Helvetica,Arial,sans-serif;color:#1f2328;border:1px solid #d0d7de;border-radius:6px;position:relative;background:#fff}
.hxg-bar{display:flex;flex-wrap:wrap;gap:6px;align-items:center;padding:6px 8px;border-bottom:1px solid #d0d7de;background:#f6f8fa}
.hxg-bar input{font-size:12px;padding:2px 6px;width:260px}
.hxg-bar button{font-size:12px;padding:1px 8px;cursor:pointer}
.hxg-count,.hxg-status,.hxg-hint{color:#59636e}
.hxg-main{position:relative;height:var(--hxg-height,620px);overflow:hidden;cursor:grab;touch-action:none}
.hxg-main.drag{cursor:grabbing}
.hxg-main svg{width:100%;height:100%;display:block}
.hxg-mini{position:absolute;right:8px;bottom:8px;border:1px solid #8c959f;background:rgba(255,255,255,.9);cursor:crosshair}
.hxg-tip{position:absolute;pointer-events:none;background:#fff;border:1px solid #8c959f;border-radius:4px;padding:4px 6px;white-space:pre;font:11px/1.35 ui-monospace,Menlo,monospace;max-width:520px;overflow:hidden;box-shadow:0 2px 6px rgba(0,0,0,.15);z-index:3}
.hxg-legend{display:flex;flex-wrap:wrap;gap:10px;padding:4px 8px;border-top:1px solid #d0d7de;font-size:11.5px}
.hxg-legend i{display:inline-block;width:12px;height:12px;border:1px solid #888;border-radius:2px;margin-right:4px;vertical-align:-2px}
.hxg g.node{cursor:pointer}
.hxg g.node rect{stroke:#57606a;stroke-width:1}
.hxg g.node.scope rect{stroke-width:2;stroke:#24292f}
.hxg g.node.io rect{fill:#eef2f6}
.hxg g.node text{pointer-events:none}
.hxg g.node.hit rect{stroke:#d1242f;stroke-width:4}
.hxg g.open rect{fill:rgba(246,248,250,.55);stroke:#8c959f;stroke-dasharray:5 3}
.hxg g.open text{cursor:pointer;fill:#59636e}
.hxg path.edge{fill:none;stroke:#8c959f;stroke-width:1.1}
.hxg path.edge.cross{stroke:#d62728;stroke-width:2.2}
.hxg path.edge.split{stroke-dasharray:4 3}
`;

function svgEl(tag, attrs, parent) {
  const e = document.createElementNS(NS, tag);
  if (attrs) for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(e);
  return e;
}
function htmlEl(tag, cls, parent, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}

export class GraphView {
  constructor(el, model, opts = {}) {
    this.t0 = opts.t0 !== undefined ? opts.t0 : now();
    this.el = el;
    this.model = model;
    this.stats = {};
    this.layouts = new Map();
    this.k = 1; this.tx = 0; this.ty = 0;
    this.matches = []; this.at = -1;
    this.build();
    this.elk = null;
    try {
      this.elk = new ElkWorker(model.get("_elk") || opts.elkSource || "");
    } catch (e) {
      this.fail("the layout engine could not start: " + e.message);
      return;
    }
    this.setGraph(model.get("graph"));
    this.onGraph = () => this.setGraph(model.get("graph"));
    this.onPlacement = () => this.recolour();
    this.onQuery = () => { const q = model.get("query") || ""; if (q !== this.input.value) { this.input.value = q; this.search(q, true); } };
    if (model.on) {
      model.on("change:graph", this.onGraph);
      model.on("change:placement", this.onPlacement);
      model.on("change:query", this.onQuery);
    }
    el.hxGraph = this;
  }

  build() {
    const el = this.el;
    if (!document.getElementById("hxg-style")) {
      const st = htmlEl("style", "", document.head);
      st.id = "hxg-style";
      st.textContent = CSS;
    }
    this.root = htmlEl("div", "hxg", el);
    const h = this.model.get("height");
    if (h) this.root.style.setProperty("--hxg-height", h + "px");
    const bar = htmlEl("div", "hxg-bar", this.root);
    this.input = htmlEl("input", "hxg-search", bar);
    this.input.type = "search";
    this.input.placeholder = "find an op type, node or tensor name\u2026";
    this.input.setAttribute("aria-label", "find an op type, node name or tensor name");
    const btn = (label, title, fn, cls) => { const b = htmlEl("button", cls || "", bar, label); b.type = "button"; b.title = title; b.addEventListener("click", fn); return b; };
    btn("\u25c0", "previous match (Shift+Enter)", () => this.step(-1), "hxg-prev");
    btn("\u25b6", "next match (Enter)", () => this.step(1), "hxg-next");
    this.count = htmlEl("span", "hxg-count", bar);
    btn("fit", "fit the whole picture", () => this.fit(), "hxg-fit");
    btn("+", "zoom in", () => this.zoomBy(1.25), "hxg-zoom-in");
    btn("\u2212", "zoom out", () => this.zoomBy(0.8), "hxg-zoom-out");
    btn("collapse all", "back to the first picture", () => this.reset(), "hxg-collapse");
    this.status = htmlEl("span", "hxg-status", bar);
    let timer = null;
    this.input.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => this.search(this.input.value, true), 150); });
    this.input.addEventListener("keydown", (e) => {
      if (e.key !== "Enter") return;
      e.preventDefault();
      clearTimeout(timer);
      if (this.query !== this.input.value) this.search(this.input.value, true); else this.step(e.shiftKey ? -1 : 1);
    });
    this.main = htmlEl("div", "hxg-main", this.root);
    this.svg = svgEl("svg", { role: "img", "aria-label": "plan graph" }, this.main);
    const defs = svgEl("defs", null, this.svg);
    const mk = svgEl("marker", { id: "hxg-arrow", viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "7", markerHeight: "7", markerUnits: "userSpaceOnUse", orient: "auto-start-reverse" }, defs);
    svgEl("path", { d: "M0,0 L10,5 L0,10 z", fill: "#8c959f" }, mk);
    this.defs = defs;
    this.vp = svgEl("g", { class: "viewport" }, this.svg);
    this.mini = htmlEl("canvas", "hxg-mini", this.main);
    this.mini.width = 220; this.mini.height = 150;
    this.tip = htmlEl("div", "hxg-tip", this.main);
    this.tip.hidden = true;
    this.legend = htmlEl("div", "hxg-legend", this.root);
    this.wire();
  }

  wire() {
    let drag = null;
    const main = this.main;
    main.addEventListener("pointerdown", (e) => {
      if (e.target === this.mini) return;
      drag = { x: e.clientX, y: e.clientY, tx: this.tx, ty: this.ty, moved: false, id: this.target(e) };
      main.setPointerCapture && main.setPointerCapture(e.pointerId);
    });
    main.addEventListener("pointermove", (e) => {
      if (drag) {
        const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
        if (Math.abs(dx) + Math.abs(dy) > 3) { drag.moved = true; main.classList.add("drag"); this.tip.hidden = true; }
        if (drag.moved) { this.moved = true; this.tx = drag.tx + dx; this.ty = drag.ty + dy; this.apply(); }
        return;
      }
      this.hover(e);
    });
    main.addEventListener("pointerup", (e) => {
      const d = drag;
      drag = null;
      main.classList.remove("drag");
      if (d && !d.moved) this.click(d.id);  // the box pressed (the captured pointer's target is the area)
    });
    main.addEventListener("pointerleave", () => { this.tip.hidden = true; });
    main.addEventListener("wheel", (e) => {
      e.preventDefault();
      this.moved = true;
      const r = this.svg.getBoundingClientRect();
      this.zoomAt(Math.exp(-e.deltaY * 0.0015), e.clientX - r.left, e.clientY - r.top);
    }, { passive: false });
    const miniMove = (e) => {
      if (!this.layout) return;
      const r = this.mini.getBoundingClientRect();
      const s = this.miniScale;
      this.centerOn((e.clientX - r.left - this.miniOff[0]) / s, (e.clientY - r.top - this.miniOff[1]) / s, this.k);
    };
    this.mini.addEventListener("pointerdown", (e) => { e.stopPropagation(); miniMove(e); this.mini.onpointermove = (ev) => { if (ev.buttons) miniMove(ev); }; });
  }

  fail(text) { this.status.textContent = text; this.root.dataset.error = text; }

  setGraph(g) {
    if (!g || !g.nodes) { this.fail("no graph"); return; }
    const t = now();
    this.m = prepare(g);
    this.layouts.clear();
    this.open = initialExpanded(this.m);
    this.stats.prepare_ms = now() - t;
    this.legendDraw();
    this.relayout(true);
  }

  reset() { this.open = initialExpanded(this.m); this.relayout(true); }

  key() { return Array.from(this.open).sort((a, b) => a - b).join(","); }

  aspect() { const r = this.main.getBoundingClientRect(); return r.width > 0 && r.height > 0 ? r.width / r.height : 2; }

  async relayout(fit, then) {
    const m = this.m;
    const vis = visible(m, this.open);
    if (vis.boxes > MAX_BOXES) {
      this.status.textContent = `${vis.boxes} boxes are too many to lay out here; collapse a scope or search`;
      return false;
    }
    const key = this.key();
    const t0 = now();
    let lay = this.layouts.get(key);
    if (!lay) {
      this.status.textContent = `laying out ${vis.boxes} boxes\u2026`;
      const gen = (this.gen = (this.gen || 0) + 1);
      if (this.elk.ready_ms === undefined) {
        // the engine is still starting: draw a draft now, ELK's layout replaces it when it comes
        const td = now();
        this.vis = vis;
        this.layout = draftLayout(elkGraph(m, vis, this.aspect()), this.aspect());
        this.draw();
        this.stats.draft_ms = now() - td;
        if (this.stats.first_draw_ms === undefined) this.stats.first_draw_ms = now() - this.t0;
        if (fit && !this.moved) this.fit();
        this.status.textContent = `${vis.boxes} boxes of ${m.nN} nodes \u00b7 a draft while the layout engine starts`;
        if (then) then();
        this.report();
      }
      try {
        lay = await this.elk.layout(elkGraph(m, vis, this.aspect()));
      } catch (e) {
        this.fail("layout failed: " + e.message);
        return false;
      }
      if (gen !== this.gen) return false;  // a newer layout was asked for meanwhile
      this.layouts.set(key, lay);
    }
    const t1 = now();
    this.vis = vis;
    this.layout = lay;
    this.draw();
    const t2 = now();
    this.stats.layout_ms = t1 - t0;
    this.stats.render_ms = t2 - t1;
    this.stats.boxes = vis.boxes;
    if (this.elk.ready_ms !== undefined) this.stats.elk_ready_ms = this.elk.ready_ms;
    if (this.stats.first_draw_ms === undefined) this.stats.first_draw_ms = t2 - this.t0;
    if (this.stats.elk_draw_ms === undefined) this.stats.elk_draw_ms = t2 - this.t0;
    if (fit && !this.moved) this.fit();
    this.status.textContent = `${vis.boxes} boxes of ${m.nN} nodes \u00b7 laid out in ${Math.round(t1 - t0)} ms`;
    this.report();
    if (then) then();
    return true;
  }

  report() {
    const d = this.root.dataset;
    for (const k in this.stats) d[k.replace(/_([a-z])/g, (_x, c) => c.toUpperCase())] = String(Math.round(this.stats[k] * 10) / 10);
    d.drawn = "1";
    if (this.model.set) { this.model.set("stats", Object.assign({}, this.stats)); if (this.model.save_changes) this.model.save_changes(); }
  }

  // -- drawing ----------------------------------------------------------------------------------------
  draw() {
    const m = this.m, lay = this.layout, vis = this.vis;
    while (this.vp.firstChild) this.vp.removeChild(this.vp.firstChild);
    const gOpen = svgEl("g", { class: "opens" }, this.vp);
    const gEdge = svgEl("g", { class: "edges" }, this.vp);
    const gNode = svgEl("g", { class: "nodes" }, this.vp);
    this.pos = new Map();
    this.nodeEls = new Map();
    const place = (n, ox, oy) => {
      const x = ox + (n.x || 0), y = oy + (n.y || 0);
      if (n.id !== "root") this.pos.set(n.id, { x, y, w: n.width, h: n.height, node: n });
      (n.children || []).forEach((c) => place(c, x, y));
    };
    place(lay, 0, 0);
    // open scopes: frames with their name (a click closes them)
    this.pos.forEach((p, id) => {
      if (id[0] !== "c") return;
      const s = +id.slice(1);
      const g = svgEl("g", { class: "open", "data-id": id }, gOpen);
      svgEl("rect", { x: p.x, y: p.y, width: p.w, height: p.h, rx: 6 }, g);
      const t = svgEl("text", { x: p.x + 8, y: p.y + 17, "font-size": 11 }, g);
      t.textContent = "\u25be " + clip(m.g.scopes[s][1], 60) + ` (${m.size[s]})`;
    });
    // edges: points relative to their container
    const edgesOf = (n) => { (n.edges || []).forEach((e) => this.drawEdge(e, n.id === "root" ? { x: 0, y: 0 } : this.pos.get(n.id), gEdge)); (n.children || []).forEach(edgesOf); };
    this.edgeEls = [];
    edgesOf(lay);
    // boxes
    this.pos.forEach((p, id) => {
      if (id[0] === "c") return;
      const g = svgEl("g", { class: "node", "data-id": id, transform: `translate(${p.x},${p.y})` }, gNode);
      const r = svgEl("rect", { width: p.w, height: p.h, rx: id[0] === "s" ? 7 : 4 }, g);
      this.nodeEls.set(id, { g, r });
      this.label(id, g, p);
    });
    this.recolour(true);
    this.miniDraw();
  }

  drawEdge(e, at, parent) {
    const sec = (e.sections || [])[0];
    if (!sec) return;
    const pts = [sec.startPoint].concat(sec.bendPoints || [], [sec.endPoint]);
    const d = "M" + pts.map((p) => `${p.x + at.x},${p.y + at.y}`).join("L");
    const path = svgEl("path", { class: "edge", d, "marker-end": "url(#hxg-arrow)" }, parent);
    const agg = this.vis.edges[+e.id.slice(1)];
    this.edgeEls.push([path, agg]);
  }

  label(id, g, p) {
    const m = this.m, gd = m.g;
    const line = (text, y, size, weight) => { const t = svgEl("text", { x: p.w / 2, y, "text-anchor": "middle", "font-size": size }, g); if (weight) t.setAttribute("font-weight", weight); t.textContent = text; };
    if (id[0] === "n") {
      const n = gd.nodes[+id.slice(1)];
      if (p.h > 24) { line(clip(n[0], 30), 14, 11, "600"); line(clip(n[1], 32), 28, 10); } else line(clip(n[0], 30), 15, 11, "600");
    } else if (id[0] === "s") {
      const s = +id.slice(1);
      line(clip(gd.scopes[s][1], 40), 16, 11, "600");
      line(`\u25b8 ${m.size[s]} nodes`, 31, 10);
      g.classList.add("scope");
    } else {
      const v = id[0] === "i" ? gd.inputs[+id.slice(1)] : gd.outputs[+id.slice(1)];
      line(clip(gd.values[v][0], 30), 16, 10);
      g.classList.add("io");
    }
  }

  legendDraw() {
    const pl = this.model.get("placement") || {};
    const L = this.legend;
    while (L.firstChild) L.removeChild(L.firstChild);
    (pl.providers || []).forEach((p) => {
      const s = htmlEl("span", "", L);
      const i = htmlEl("i", "", s);
      i.style.background = p[2];
      s.appendChild(document.createTextNode(`${p[0]} (${p[1]})`));
    });
    const note = htmlEl("span", "hxg-hint", L, "red edges: transfers between providers \u00b7 drag to pan, wheel to zoom, click a box to open it");
    note.style.marginLeft = "auto";
  }

  // provider colours (a re-plan changes only these: no new layout)
  recolour(quiet) {
    const t = now();
    const m = this.m, pl = this.model.get("placement") || {};
    const np = pl.node_provider || [], part = pl.node_partition || [], provs = pl.providers || [];
    const colour = (i) => (provs[i] ? provs[i][2] : "#dddddd");
    while (this.defs.childNodes.length > 1) this.defs.removeChild(this.defs.lastChild);
    let grad = 0;
    this.nodeEls.forEach(({ r }, id) => {
      if (id[0] === "n") { r.setAttribute("fill", colour(np[+id.slice(1)])); return; }
      if (id[0] !== "s") return;
      const s = +id.slice(1), counts = new Map();
      const walk = (x) => { m.scopeNodes[x].forEach((n) => counts.set(np[n], (counts.get(np[n]) || 0) + 1)); m.scopeKids[x].forEach(walk); };
      walk(s);
      const parts = Array.from(counts.entries()).sort((a, b) => b[1] - a[1]);
      if (parts.length <= 1) { r.setAttribute("fill", colour(parts.length ? parts[0][0] : -1)); return; }
      // striped by each provider's share of the scope's nodes
      const lg = svgEl("linearGradient", { id: "hxg-g" + (grad++), x1: "0", x2: "1", y1: "0", y2: "0" }, this.defs);
      let acc = 0;
      const total = parts.reduce((a, p) => a + p[1], 0);
      parts.forEach(([pi, c]) => {
        svgEl("stop", { offset: acc, "stop-color": colour(pi) }, lg);
        acc += c / total;
        svgEl("stop", { offset: acc, "stop-color": colour(pi) }, lg);
      });
      r.setAttribute("fill", `url(#${lg.id})`);
    });
    const prov = (key) => (key[0] === "n" ? np[+key.slice(1)] : null);
    const partOf = (key) => (key[0] === "n" ? part[+key.slice(1)] : null);
    (this.edgeEls || []).forEach(([path, agg]) => {
      let cross = false, split = false;
      for (const [a, b] of agg.pairs) {
        const pa = prov(a), pb = prov(b);
        if (pa !== null && pb !== null && pa !== pb) { cross = true; break; }
        if (partOf(a) !== null && partOf(b) !== null && partOf(a) !== partOf(b)) split = true;
      }
      path.classList.toggle("cross", cross);
      path.classList.toggle("split", !cross && split);
    });
    if (!quiet) { this.legendDraw(); this.miniDraw(); }
    this.stats.recolour_ms = now() - t;
    if (!quiet) this.report();
  }

  // -- minimap ----------------------------------------------------------------------------------------
  miniDraw() {
    const lay = this.layout;
    if (!lay) return;
    const W = this.mini.width, H = this.mini.height;
    const s = Math.min((W - 8) / Math.max(1, lay.width), (H - 8) / Math.max(1, lay.height));
    this.miniScale = s;
    this.miniOff = [(W - lay.width * s) / 2, (H - lay.height * s) / 2];
    const c = document.createElement("canvas");
    c.width = W; c.height = H;
    const x = c.getContext("2d");
    x.fillStyle = "#fff"; x.fillRect(0, 0, W, H);
    this.nodeEls.forEach(({ r }, id) => {
      const p = this.pos.get(id);
      const f = r.getAttribute("fill") || "#ccc";
      x.fillStyle = f.startsWith("url(") ? "#9aa4ae" : f;
      x.fillRect(this.miniOff[0] + p.x * s, this.miniOff[1] + p.y * s, Math.max(1, p.w * s), Math.max(1, p.h * s));
    });
    this.miniBase = c;
    this.miniView();
  }

  miniView() {
    if (!this.miniBase) return;
    const x = this.mini.getContext("2d");
    x.drawImage(this.miniBase, 0, 0);
    const r = this.svg.getBoundingClientRect(), s = this.miniScale;
    x.strokeStyle = "#d1242f"; x.lineWidth = 1.5;
    x.strokeRect(this.miniOff[0] + (-this.tx / this.k) * s, this.miniOff[1] + (-this.ty / this.k) * s, (r.width / this.k) * s, (r.height / this.k) * s);
  }

  // -- pan and zoom (one transform) ---------------------------------------------------------------------
  apply() {
    this.vp.setAttribute("transform", `translate(${this.tx},${this.ty}) scale(${this.k})`);
    if (!this.miniQueued) {
      this.miniQueued = true;
      requestAnimationFrame(() => { this.miniQueued = false; this.miniView(); });
    }
  }
  zoomAt(f, cx, cy) {
    const k = Math.min(8, Math.max(0.02, this.k * f));
    this.tx = cx - (cx - this.tx) * (k / this.k);
    this.ty = cy - (cy - this.ty) * (k / this.k);
    this.k = k;
    this.apply();
  }
  zoomBy(f) { const r = this.svg.getBoundingClientRect(); this.zoomAt(f, r.width / 2, r.height / 2); }
  fit() {
    if (!this.layout) return;
    const r = this.svg.getBoundingClientRect();
    const w = Math.max(1, this.layout.width), h = Math.max(1, this.layout.height);
    this.k = Math.min(1.5, Math.max(0.02, Math.min((r.width - 20) / w, (r.height - 20) / h)));
    this.tx = (r.width - w * this.k) / 2;
    this.ty = Math.max(10, (r.height - h * this.k) / 2);
    this.apply();
  }
  centerOn(x, y, k) {
    const r = this.svg.getBoundingClientRect();
    this.k = k;
    this.tx = r.width / 2 - x * k;
    this.ty = r.height / 2 - y * k;
    this.apply();
  }

  // -- pointer ----------------------------------------------------------------------------------------
  target(e) {
    let t = e.target;
    while (t && t !== this.svg && !(t.getAttribute && t.getAttribute("data-id"))) t = t.parentNode;
    return t && t !== this.svg ? t.getAttribute("data-id") : null;
  }
  click(id) {
    if (!id) return;
    if (id[0] === "s") { this.open.add(+id.slice(1)); this.relayoutKeeping(id); }
    else if (id[0] === "c") { this.closeScope(+id.slice(1)); }
  }
  closeScope(s) {
    const drop = (x) => { this.open.delete(x); this.m.scopeKids[x].forEach(drop); };
    drop(s);
    this.relayoutKeeping("s" + s);
  }
  // re-lay out, keeping the box that was clicked where it was on screen
  relayoutKeeping(id) {
    const before = this.pos.get(id) || this.pos.get("c" + id.slice(1));
    const sx = before ? before.x * this.k + this.tx : 0, sy = before ? before.y * this.k + this.ty : 0;
    this.relayout(false, () => {
      const after = this.pos.get(id) || this.pos.get("c" + id.slice(1));
      if (before && after) { this.tx = sx - after.x * this.k; this.ty = sy - after.y * this.k; this.apply(); }
    }).then((ok) => { if (ok === false && id[0] === "s") { this.open.delete(+id.slice(1)); } });
  }
  hover(e) {
    const id = this.target(e);
    if (!id || id[0] === "c") { this.tip.hidden = true; return; }
    this.tip.textContent = this.describe(id);
    const r = this.main.getBoundingClientRect();
    this.tip.style.left = Math.min(r.width - 300, e.clientX - r.left + 14) + "px";
    this.tip.style.top = (e.clientY - r.top + 14) + "px";
    this.tip.hidden = false;
  }
  describe(id) {
    const m = this.m, g = m.g, pl = this.model.get("placement") || {};
    const provs = pl.providers || [];
    const val = (v) => `  ${g.values[v][0]}: ${g.values[v][1]}${g.values[v][2]}`;
    if (id[0] === "n") {
      const i = +id.slice(1), n = g.nodes[i];
      const p = provs[(pl.node_provider || [])[i]];
      const lines = [`${n[0]}  ${n[1]}`, `provider: ${p ? p[0] + " (" + p[1] + ")" : "?"}, partition P${(pl.node_partition || [])[i]}`];
      const ins = n[3].filter((v) => !(g.constants || []).includes(v));
      if (ins.length) lines.push("inputs:", ...ins.slice(0, 10).map(val));
      if (n[4].length) lines.push("outputs:", ...n[4].slice(0, 10).map(val));
      const note = (pl.notes || {})[String(i)];
      if (note) lines.push("note: " + note);
      return lines.join("\n");
    }
    if (id[0] === "s") {
      const s = +id.slice(1), sc = g.scopes[s];
      return `${sc[3] === "name" ? "scope" : "block"} ${sc[2]}\n${m.size[s]} node(s); click to open`;
    }
    const v = id[0] === "i" ? g.inputs[+id.slice(1)] : g.outputs[+id.slice(1)];
    return `graph ${id[0] === "i" ? "input" : "output"}\n${val(v)}`;
  }

  // -- search -----------------------------------------------------------------------------------------
  search(q, go) {
    const t = now();
    q = String(q || "").trim().toLowerCase();
    this.query = this.input.value;
    if (this.model.set && this.model.get("query") !== this.input.value) { this.model.set("query", this.input.value); this.model.save_changes && this.model.save_changes(); }
    const m = this.m, exact = [], part = [];
    if (q) {
      for (let n = 0; n < m.nN; n++) {
        const f = m.fields[n];
        if (f.includes(q)) exact.push(n);
        else if (f.some((x) => x.includes(q))) part.push(n);
      }
    }
    this.matches = exact.concat(part);
    this.at = this.matches.length ? 0 : -1;
    this.stats.search_ms = now() - t;
    this.tell();
    if (go && this.matches.length) return this.show(this.matches[0]);
    this.mark(null);
    this.tell();
    return Promise.resolve(false);
  }
  step(d) {
    if (!this.matches.length) return Promise.resolve(false);
    this.at = (this.at + d + this.matches.length) % this.matches.length;
    return this.show(this.matches[this.at]);
  }
  tell() {
    this.count.textContent = !this.input.value ? "" : this.matches.length ? `${this.at + 1} of ${this.matches.length}` : "nothing matches";
  }
  // open the scopes around node n, then pan to it
  show(n) {
    const t = now();
    const m = this.m;
    let changed = false;
    for (let s = m.nodeScope[n]; s >= 0; s = m.scopeParent[s]) if (!this.open.has(s)) { this.open.add(s); changed = true; }
    const go = () => {
      const p = this.pos.get(this.vis.rep[n]);
      if (p) this.centerOn(p.x + p.w / 2, p.y + p.h / 2, Math.max(this.k, 1));
      this.mark(this.vis.rep[n]);
      this.tell();
      this.stats.find_ms = now() - t;
      this.root.dataset.found = this.vis.rep[n];
      this.report();
    };
    if (!changed && this.vis) { go(); return Promise.resolve(true); }
    return this.relayout(false, go);
  }
  mark(id) {
    if (this.marked) { const e = this.nodeEls.get(this.marked); if (e) e.g.classList.remove("hit"); }
    this.marked = id;
    if (id) { const e = this.nodeEls.get(id); if (e) e.g.classList.add("hit"); }
  }

  // pan/zoom frame times (the browser tests and bench/responsiveness.py call this)
  async benchPanZoom(steps = 60) {
    const times = [];
    const frame = () => new Promise((res) => requestAnimationFrame(res));
    await frame();
    let last = now();
    const r = this.svg.getBoundingClientRect();
    for (let i = 0; i < steps; i++) {
      if (i % 2) this.zoomAt(i % 4 === 1 ? 1.1 : 1 / 1.1, r.width / 2, r.height / 2);
      else { this.tx += 7; this.ty += 5; this.apply(); }
      await frame();
      const t = now();
      times.push(t - last);
      last = t;
    }
    times.sort((a, b) => a - b);
    return { steps, median_ms: times[Math.floor(times.length / 2)], p90_ms: times[Math.floor(times.length * 0.9)], max_ms: times[times.length - 1] };
  }

  destroy() {
    if (this.model.off) {
      this.model.off("change:graph", this.onGraph);
      this.model.off("change:placement", this.onPlacement);
      this.model.off("change:query", this.onQuery);
    }
    if (this.elk) this.elk.close();
  }
}

export function mount(el, model, opts) { return new GraphView(el, model, opts); }

// anywidget's entry point
export default {
  render({ model, el }) {
    const view = mount(el, model);
    return () => view.destroy();
  },
};
