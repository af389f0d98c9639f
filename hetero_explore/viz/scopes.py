"""The scope view: a plan drawn by the exporter's name scopes, big scopes collapsed.

torch's exporters name nodes by the module that made them
(``/encoder/layer.0/attention/MatMul``): the scope of that node is
``/encoder/layer.0/attention``. Here each collapsed scope is one box (its
colour: its nodes' providers, striped when it spans several; its label: how
many nodes), an expanded scope is a cluster of what it holds, and a node whose
scopes are all expanded is drawn as itself. Big exported models then draw as a
few dozen boxes first and open where the user looks (``expand``).

Ids in the DOT stay synthetic (``s4``, ``cluster_s4``, ``n17``): scope names
appear only in escaped labels and tooltips, as in :mod:`.graph`.
"""

from __future__ import annotations

from collections import Counter

from ..ir.units import human_bytes
from .colors import TRANSFER_COLORS, darker
from .dotparts import (MAX_LISTED, SCOPE_BOXES, _io_lines, _label, _node_lines, _node_tooltip, _pos, _tooltip,
                       dot_text)


def node_scope(name: str) -> tuple[str, ...]:
    """The scope path of a node name: ``"/a/b/MatMul"`` -> ``("a", "b")``; names not written
    as ``/scope/.../name`` have no scope."""
    if not name or not name.startswith("/"):
        return ()
    return tuple(x for x in name.split("/")[1:-1] if x)


def scope_name(path: tuple[str, ...]) -> str:
    return "/" + "/".join(path)


def has_scopes(graph) -> bool:
    """Whether most nodes of ``graph`` are named ``/scope/.../name`` (a scope view says something)."""
    n = len(graph.nodes)
    return n > 0 and sum(1 for x in graph.nodes if node_scope(x.name)) * 2 > n


def model_scopes(graph) -> list[str]:
    """Every scope of a graph's node names (``"/a"``, ``"/a/b"``, ...), in the model's order."""
    seen: dict[str, None] = {}
    for n in graph.nodes:
        p = node_scope(n.name)
        for k in range(1, len(p) + 1):
            seen.setdefault(scope_name(p[:k]), None)
    return list(seen)


class ScopeView:
    """Which box each node of ``plan`` is drawn in, for ``expand`` and ``depth``
    (see :func:`.graph.plan_to_graphviz`)."""

    def __init__(self, plan, expand=(), depth: int | None = None, max_boxes: int | None = None):

        self.plan = plan
        graph = plan.graph
        opened = set()
        for x in expand or ():  # an expanded scope opens its parents too
            parts = tuple(y for y in str(x).split("/") if y)
            opened.update(scope_name(parts[:k]) for k in range(1, len(parts) + 1))
        self.expand = frozenset(opened)
        self.paths = [node_scope(n.name) for n in graph.nodes]
        self.size: Counter = Counter()
        for p in self.paths:
            for k in range(1, len(p) + 1):
                self.size[p[:k]] += 1
        if depth is None:
            limit = SCOPE_BOXES if max_boxes is None else max_boxes
            deepest = max((len(p) for p in self.paths), default=0)
            depth, count = 1, len(set(self._boxes(1)))
            for d in range(2, deepest + 1):  # the deepest within the limit (a few boxes: one deeper)
                c = len(set(self._boxes(d)))
                if c > 4 * limit or (c > limit and count >= 8):
                    break
                depth, count = d, c
        self.depth = max(1, int(depth))
        self.box_of = self._boxes(self.depth)
        self.n_boxes = len(set(self.box_of))

    def _open(self, prefix: tuple[str, ...], depth: int) -> bool:
        return len(prefix) < depth or scope_name(prefix) in self.expand

    def _boxes(self, depth: int) -> list:
        """Per node: ``("s", scope path)`` of the collapsed scope it is drawn in, or ``("n", id)``."""
        out = []
        for nid, p in enumerate(self.paths):
            box = ("n", nid)
            for k in range(1, len(p) + 1):
                if not self._open(p[:k], depth):
                    if self.size[p[:k]] > 1:  # a scope of one node: draw the node
                        box = ("s", p[:k])
                    break
            out.append(box)
        return out

    # -- ids ----------------------------------------------------------------------------------
    def _ids(self):
        """DOT ids: ``s{k}`` for collapsed scopes, ``cluster_s{k}`` for open ones, ``n{id}`` for nodes."""
        if hasattr(self, "_id"):
            return self._id
        ids: dict = {}
        for p in self.paths:
            for k in range(1, len(p) + 1):
                ids.setdefault(p[:k], len(ids))
        self._id = ids
        return ids

    def key(self, box) -> str:
        return f"n{box[1]}" if box[0] == "n" else f"s{self._ids()[box[1]]}"

    def _parent(self, box) -> tuple[str, ...]:
        """The open scope a box sits in (``()``: the top)."""
        if box[0] == "s":
            return box[1][:-1]
        p = self.paths[box[1]]
        k = 0
        while k < len(p) and self._open(p[:k + 1], self.depth):
            k += 1
        return p[:k]

    def _tree(self):
        """``(members, clusters)``: the boxes in each open scope, and the open scopes in order."""
        members: dict[tuple, list] = {(): []}
        seen = set()
        for box in self.box_of:
            if box in seen:
                continue
            seen.add(box)
            par = self._parent(box)
            for k in range(1, len(par) + 1):
                if par[:k] not in members:
                    members[par[:k]] = []
                    members[par[:k - 1]].append(("c", par[:k]))
            members[par].append(box)
        return members

    def _edges(self):
        """``{(src key, dst key): [value names]}`` between the boxes drawn (inputs: ``in_i``)."""
        graph = self.plan.graph
        in_index = {n: i for i, n in enumerate(graph.inputs)}
        agg: dict[tuple[str, str], list[str]] = {}
        for n in graph.nodes:
            dst = self.key(self.box_of[n.id])
            for name in dict.fromkeys(x for x in n.inputs if x):
                v = graph.values.get(name)
                if v is None:
                    continue
                if v.producer is not None:
                    src = self.key(self.box_of[v.producer])
                elif name in in_index:
                    src = f"in_{in_index[name]}"
                else:
                    continue
                if src != dst:
                    agg.setdefault((src, dst), []).append(name)
        for i, name in enumerate(graph.outputs):
            v = graph.values.get(name)
            if v is not None and v.producer is not None:
                agg.setdefault((self.key(self.box_of[v.producer]), f"out_{i}"), []).append(name)
            elif name in in_index:
                agg.setdefault((f"in_{in_index[name]}", f"out_{i}"), []).append(name)
        return agg

    # -- layout and drawing -------------------------------------------------------------------
    def _box_lines(self, box, max_label) -> list[str]:
        if box[0] == "n":
            return _node_lines(self.plan.graph.nodes[box[1]], max_label)
        name = scope_name(box[1])
        if len(name) > max_label:  # the tail of a scope says most
            name = "\u2026" + name[-(max_label - 1):]
        return [dot_text(name, None), dot_text(f"\u25b8 {self.size[box[1]]} node(s)", max_label)]

    def positions(self, max_label, rankdir="TB"):
        """``(pos, bb)`` for :func:`.graph.plan_to_graphviz` (the layered layout)."""
        from . import layout as L

        graph = self.plan.graph
        lr = rankdir == "LR"
        first: dict = {}
        for nid, box in enumerate(self.box_of):
            first.setdefault(box, float(nid))

        def leaf(key, lines, order, scale=1.0):
            w, h = L.estimate_size(lines)
            w, h = w * scale, h * scale
            return L.Box(key, *((h, w) if lr else (w, h)), order=order)

        members = self._tree()

        def build(scope) -> list:
            out = []
            for item in members.get(scope, ()):
                if item[0] == "c":
                    out.append(L.Box(f"cluster_s{self._ids()[item[1]]}", children=build(item[1]),
                                     label_h=0.0 if lr else L.LABEL_H))
                else:
                    out.append(leaf(self.key(item), self._box_lines(item, max_label), first[item]))
            return out

        kids = [leaf(f"in_{i}", _io_lines(graph, name, max_label), -1.0 - len(graph.inputs) + i, 1.25)
                for i, name in enumerate(graph.inputs)]
        kids += build(())
        kids += [leaf(f"out_{i}", _io_lines(graph, name, max_label), float(len(graph.nodes) + i), 1.25)
                 for i, name in enumerate(graph.outputs)]
        root = L.layout(L.Box("root", children=kids, label_h=0.0), list(self._edges()))
        return ({b.key: L.dot_pos(b, rankdir) for b in L.leaves(root)},
                {b.key: L.dot_bb(b, rankdir) for b in L.groups(root)})

    def _scope_tooltip(self, path) -> list[str]:
        plan = self.plan
        nodes = [n for n in plan.graph.nodes if self.box_of[n.id] == ("s", path)]
        provs = Counter(plan.provider_of(n.id).name for n in nodes)
        ops = Counter(n.op_type for n in nodes)
        parts = sorted({plan.node_partition[n.id] for n in nodes})
        lines = [f"scope {scope_name(path)}", f"name: {scope_name(path)}",
                 f"{len(nodes)} node(s): " + ", ".join(f"{p} {k}" for p, k in provs.most_common()),
                 "ops: " + ", ".join(f"{op}\u00d7{k}" for op, k in ops.most_common(MAX_LISTED))
                 + (" ..." if len(ops) > MAX_LISTED else ""),
                 "partitions: " + ", ".join(f"P{i}" for i in parts[:MAX_LISTED])
                 + (" ..." if len(parts) > MAX_LISTED else ""),
                 "nodes (each: its name):"] + [f"name: {n.name}" for n in nodes[:MAX_LISTED]]
        if len(nodes) > MAX_LISTED:
            lines.append(f"  ... and {len(nodes) - MAX_LISTED} more")
        lines.append("(collapsed: expand it to see its nodes)")
        return lines

    def draw(self, g, colors, max_label, pos, bbs) -> None:

        plan = self.plan
        graph = plan.graph
        members = self._tree()
        provs_of: dict = {}
        for n in graph.nodes:
            provs_of.setdefault(self.box_of[n.id], Counter())[plan.provider_of(n.id).name] += 1

        def box_attrs(box) -> dict:
            if box[0] == "n":
                color = colors[plan.provider_of(box[1]).name]
                return dict(fillcolor=color, color=darker(color),
                            tooltip=_tooltip(_node_tooltip(plan, graph.nodes[box[1]])))
            counts = provs_of[box].most_common()
            total = sum(k for _p, k in counts)
            main = colors[counts[0][0]]
            attrs = dict(color=darker(main), penwidth="2", tooltip=_tooltip(self._scope_tooltip(box[1])))
            if len(counts) == 1:
                attrs.update(fillcolor=main, style="filled,bold")
            else:  # one stripe per provider, as wide as its share of the nodes (at least a tenth: visible)
                rest = [max(0.1, int(1000 * k / total) / 1000) for _p, k in counts[1:]]
                fr = [max(0.0, round(1.0 - sum(rest), 3))] + rest
                attrs.update(style="striped", fillcolor=":".join(
                    f"{colors[p]};{f:.3f}" for (p, _k), f in zip(counts, fr)))
            return attrs

        def emit(sub, scope):
            for item in members.get(scope, ()):
                if item[0] == "c":
                    cid = f"cluster_s{self._ids()[item[1]]}"
                    with sub.subgraph(name=cid) as c:
                        c.attr(label=_label(dot_text(scope_name(item[1]), 2 * max_label)),
                               style="rounded,dashed", color="#8c959f", fontsize="11",
                               tooltip=_tooltip([f"scope {scope_name(item[1])} (expanded)",
                                                 f"name: {scope_name(item[1])}",
                                                 f"{self.size[item[1]]} node(s)"]))
                        if bbs and cid in bbs:
                            c.attr(bb=bbs[cid])
                        emit(c, item[1])
                else:
                    key = self.key(item)
                    sub.node(key, _label(*self._box_lines(item, max_label)), **box_attrs(item),
                             **_pos(pos, key))

        emit(g, ())
        vals = graph.values
        for (src, dst), names in self._edges().items():
            nbytes = 0
            crossing = False
            for name in names:
                v = vals[name]
                nbytes = None if nbytes is None or v.nbytes is None else nbytes + v.nbytes
                if v.producer is not None and not dst.startswith("out_"):
                    pa = plan.assignment[v.producer]
                    crossing = crossing or any(plan.assignment[c] != pa for c in v.consumers
                                               if self.key(self.box_of[c]) == dst)
            tip = [f"{len(names)} value(s), {human_bytes(nbytes)}"] + [f"  {x}" for x in names[:12]]
            if crossing:
                col = TRANSFER_COLORS.get("D2D", "#d62728")
                g.edge(src, dst, color=col, style="bold", penwidth="1.8",
                       tooltip=_tooltip(tip + ["crosses providers (a transfer)"]))
            else:
                g.edge(src, dst, tooltip=_tooltip(tip))
