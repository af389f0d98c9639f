"""The data the interactive graph (:mod:`.graphview`) draws: a model's DAG as compact JSON, its
nodes grouped into a tree of scopes, and a plan's placement over it.

**Scopes.** Exporters that name nodes by module (``/encoder/layer.0/attention/MatMul``) give the
tree directly (:func:`.scopes.node_scope`). Where names carry no scopes (``Conv_12``), or a scope
holds more items than a reader can take in at once, the items are grouped into *blocks*: runs of
consecutive items (in topological order) cut where the fewest values cross from one run to the
next, so a ResNet's residual blocks or a transformer's layers come out as blocks of their own,
without names. It runs in linear time: the *cut width* at each position of the topological order
(values produced before it and read at or after it) is one pass over the values, and each split
looks at each item once. Every scope at most :data:`MAX_CHILDREN` items wide (the top
:data:`TOP_ITEMS`), so a 10,000-node model opens as a few dozen boxes and any node is three or
four clicks (or one search) away.

**The JSON** (:func:`graph_data`, sent once per model) holds the nodes, the values they read and
write (names, dtypes, shapes: what a search finds and a tooltip shows) and the scope tree;
:func:`placement_data` (sent per plan) holds each node's provider and partition, small enough to
send on every re-plan so that the picture recolours without a new layout.
"""

from __future__ import annotations

import math
from collections import Counter

from .colors import provider_colors
from .scopes import has_scopes, node_scope

#: most items (nodes and sub-scopes) an open scope shows; more are grouped into blocks
MAX_CHILDREN = 24
#: most items the top level shows
TOP_ITEMS = 40
#: format version of :func:`graph_data` (the front end checks it)
VERSION = 1


def cut_widths(graph) -> list[int]:
    """``w[i]``: how many values are produced by nodes before position ``i`` of the topological
    order and read by a node at or after it (graph outputs count as read at the end). A block
    boundary where this is small is a natural one (a residual block's single output)."""
    n = len(graph.nodes)
    diff = [0] * (n + 2)
    outputs = set(graph.outputs)
    for v in graph.values.values():
        p = v.producer
        if p is None or not isinstance(p, int):
            continue
        last = max((c for c in v.consumers if isinstance(c, int)), default=-1)
        if v.name in outputs:
            last = n
        if last > p:
            diff[p + 1] += 1
            diff[last + 1] -= 1
    out, acc = [], 0
    for i in range(n + 1):
        acc += diff[i]
        out.append(acc)
    return out


def _split(items, first, cut, k):
    """``items`` (in order; ``first[i]``: the topological position of item i's first node) cut into
    ``k`` runs of about equal length, each cut moved within half a run's length to where
    ``cut`` (:func:`cut_widths`) is smallest (ties: nearest the even cut)."""
    n = len(items)
    size = n / k
    bounds, lo = [0], 0
    for j in range(1, k):
        target = round(j * size)
        half = max(1, int(size // 2))
        a, b = max(lo + 1, target - half), min(n - (k - j), target + half)
        if a > b:
            a = b = max(lo + 1, min(target, n - (k - j)))
        best = min(range(a, b + 1), key=lambda i: (cut[first[i]], abs(i - target)))
        bounds.append(best)
        lo = best
    bounds.append(n)
    return [items[bounds[i]:bounds[i + 1]] for i in range(k) if bounds[i] < bounds[i + 1]]


def scope_tree(graph, *, max_children: int = MAX_CHILDREN, top_items: int = TOP_ITEMS):
    """``(scopes, node_scope)``: ``scopes[i] = (parent, label, title, kind)`` with ``parent`` -1
    for the top, ``kind`` ``"name"`` (an exporter's scope) or ``"block"`` (a run of items cut at
    a narrow point); ``node_scope[node id]`` the innermost scope holding it (-1: the top)."""
    nodes = graph.nodes
    n = len(nodes)
    cut = cut_widths(graph)
    scopes: list[list] = []                     # [parent, label, title, kind]
    node_parent = [-1] * n
    named = has_scopes(graph)
    index: dict[tuple, int] = {}

    def new_scope(parent, label, title, kind) -> int:
        scopes.append([parent, label, title, kind])
        return len(scopes) - 1

    if named:
        for nd in nodes:
            path = node_scope(nd.name)
            parent = -1
            for k in range(1, len(path) + 1):
                key = path[:k]
                sid = index.get(key)
                if sid is None:
                    sid = index[key] = new_scope(parent, path[k - 1], "/" + "/".join(key), "name")
                parent = sid
            node_parent[nd.id] = parent

    # each scope's items, in order of their first node: ("s", scope id) or ("n", node id)
    children: dict[int, list] = {}
    first_of: dict[tuple, int] = {}
    for nd in nodes:
        s = node_parent[nd.id]
        children.setdefault(s, []).append(("n", nd.id))
        first_of[("n", nd.id)] = nd.id
        while s != -1 and ("s", s) not in first_of:  # a scope's first node: where it enters
            first_of[("s", s)] = nd.id
            p = scopes[s][0]
            children.setdefault(p, []).append(("s", s))
            s = p
    for items in children.values():
        items.sort(key=lambda it: first_of[it])

    def reparent(item, parent):
        if item[0] == "n":
            node_parent[item[1]] = parent
        else:
            scopes[item[1]][0] = parent

    def node_ids(item):
        if item[0] == "n":
            yield item[1]
        else:
            for it in children.get(item[1], ()):
                yield from node_ids(it)

    def group(parent: int, items: list, limit: int) -> None:
        """Cut ``items`` (the contents of ``parent``) into as few blocks as keep each at most
        ``max_children`` items wide, at most ``limit`` of them; recursively inside each block."""
        if len(items) <= limit:
            return
        k = max(2, min(limit, math.ceil(len(items) / max_children)))
        for run in _split(items, [first_of[it] for it in items], cut, k):
            if len(run) == 1:
                continue
            ids = sorted(i for it in run for i in node_ids(it))
            ops = Counter(nodes[i].op_type for i in ids)
            label = f"{_short(nodes[ids[0]].name)} \u2026 {_short(nodes[ids[-1]].name)}"
            title = (f"{nodes[ids[0]].name} \u2026 {nodes[ids[-1]].name}: " + ", ".join(
                f"{op}\u00d7{c}" for op, c in ops.most_common(4)) + (", \u2026" if len(ops) > 4 else ""))
            sid = new_scope(parent, label, title, "block")
            for it in run:
                reparent(it, sid)
            first_of[("s", sid)] = ids[0]
            children[sid] = list(run)
            group(sid, children[sid], max_children)

    for parent in [-1] + list(range(len(scopes))):  # the name scopes; blocks are grouped as they are made
        group(parent, children.get(parent, []), top_items if parent == -1 else max_children)
    return [tuple(x) for x in scopes], node_parent


def _short(name: str, keep: int = 18) -> str:
    """A node name for a block's label: the tail says most (``/encoder/layer.3/Add`` → ``…layer.3/Add``)."""
    return name if len(name) <= keep else "\u2026" + name[-(keep - 1):]


def _shape_text(shape) -> str:
    if shape is None:
        return "?"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def graph_data(graph) -> dict:
    """The model's DAG for the front end (JSON-ready): ``nodes[i] = [op_type, name, scope,
    [input value indices], [output value indices]]``, ``values[j] = [name, dtype, shape]``,
    ``scopes`` (:func:`scope_tree`), the graph's ``inputs`` and ``outputs`` (value indices)."""
    vindex: dict[str, int] = {}
    values: list = []

    def vid(name: str) -> int:
        i = vindex.get(name)
        if i is None:
            v = graph.values.get(name)
            dt = "?" if v is None or v.dtype is None else v.dtype.name
            i = vindex[name] = len(values)
            values.append([name, dt, _shape_text(None if v is None else v.shape)])
        return i

    scopes, node_parent = scope_tree(graph)
    nodes = []
    for nd in graph.nodes:
        ins = [vid(x) for x in nd.inputs if x]
        outs = [vid(x) for x in nd.outputs if x]
        nodes.append([nd.op_type, nd.name, node_parent[nd.id], ins, outs])
    consts = [vindex[name] for name, v in graph.values.items() if name in vindex and v.kind == "initializer"]
    return {"v": VERSION, "name": graph.name, "nodes": nodes, "values": values,
            "scopes": [list(s) for s in scopes], "inputs": [vid(x) for x in graph.inputs],
            "outputs": [vid(x) for x in graph.outputs], "constants": sorted(consts),
            "named_scopes": has_scopes(graph)}


def placement_data(plan, index: int | None = None) -> dict:
    """A plan over :func:`graph_data`'s nodes: ``providers[i] = [name, device, colour]``,
    ``node_provider`` and ``node_partition`` per node, ``partitions[k] = [provider, n_nodes]``,
    ``notes`` (node id → what a profile accepted unchecked) and the plan's ``summary``."""
    from .notes import placement_notes
    colors = provider_colors(plan.provider_names)
    notes = {str(nid): text for (sub, nid), text in placement_notes(plan).items() if sub == ""}
    return {"v": VERSION, "plan": index, "summary": plan.summary(),
            "providers": [[p.name, str(p.device), colors[p.name]] for p in plan.providers],
            "node_provider": [int(x) for x in plan.assignment],
            "node_partition": [int(x) for x in plan.node_partition],
            "partitions": [[int(p.provider_index), int(p.n_nodes)] for p in plan.partitions],
            "notes": notes}
