"""A linear-time layered layout of nested boxes, for pictures too big for ``dot``.

Graphviz's ``dot`` gives the best pictures but its layout time grows much faster
than the graph (a 2,000-node node view with one cluster per partition took
5-25 s here). This module places boxes itself, in time linear in the boxes and
edges, and the views hand the positions to Graphviz's ``nop2`` engine, which
only draws (straight edges, clusters from their ``bb``).

The picture is a tree of boxes: leaves (nodes, graph inputs and outputs, or
collapsed name scopes) inside groups (partitions, expanded scopes). Each group
lays its children out in layers (longest path over the children's DAG, the
edges between leaves lifted to the children that hold them), orders each layer
by the mean position of its predecessors, and becomes a box of the size of
what it holds; its parent then lays that box out like a leaf. Children are
ranked by the first leaf they hold (the model's topological order), so edges
that would close a cycle among lifted children only skip ranking.

A deep DAG (a chain of a thousand partitions) makes a picture one box wide and
tens of thousands of points tall; :func:`wrap` then cuts the top level's
layers into bands of consecutive layers set side by side, as a newspaper sets
columns, until the picture's height is at most a given multiple of its width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: gap between layers, between boxes in a layer, and inside a group's border (points)
RANK_SEP, NODE_SEP, PAD = 26.0, 14.0, 10.0
#: height of a group's label above its children (points)
LABEL_H = 20.0
#: gap between the columns :func:`wrap` makes (points)
COLUMN_SEP = 60.0


@dataclass
class Box:
    """One box of the picture: a leaf (``children`` is None) or a group of boxes."""

    key: str
    """The DOT id (leaves) or cluster name (groups)."""
    w: float = 0.0
    """Width in points (leaves: given; groups: computed)."""
    h: float = 0.0
    """Height in points (leaves: given; groups: computed)."""
    order: float = 0.0
    """Rank of the box in the model's order (leaves: given; groups: their first leaf's)."""
    children: list | None = None
    """The boxes inside (None for a leaf)."""
    x: float = 0.0
    """Left edge, from the picture's top-left corner, growing right (computed)."""
    y: float = 0.0
    """Top edge, from the picture's top-left corner, growing down (computed)."""
    label_h: float = LABEL_H
    """Room for a group's label."""
    row: int = 0
    """The layer the box sits in inside its group (computed)."""
    rows: list = field(default_factory=list, repr=False)
    """A group's layers as ``(top, height)`` relative to its top-left corner (computed)."""
    _local: list = field(default_factory=list, repr=False)


def estimate_size(lines, fontsize: float = 10.0, min_h: float = 21.6) -> tuple[float, float]:
    """A generous ``(width, height)`` in points for a box with these label lines (Helvetica)."""
    lines = [str(x) for x in lines] or [""]
    w = max(len(x) for x in lines) * fontsize * 0.62 + 18.0
    h = max(min_h, len(lines) * fontsize * 1.25 + 8.0)
    return max(w, 40.0), h


def layout(root: Box, edges) -> Box:
    """Place every box under ``root`` (in place, and return it). ``edges`` are ``(leaf key,
    leaf key)`` pairs; an edge between leaves of different children of a group ranks those
    children inside that group."""
    path: dict[str, tuple[Box, ...]] = {}

    def walk(b: Box, up: tuple[Box, ...]) -> None:
        here = up + (b,)
        if b.children is None:
            path[b.key] = here
            return
        for c in b.children:
            walk(c, here)
        b.order = min((c.order for c in b.children), default=b.order)

    walk(root, ())
    local: dict[int, set] = {}
    for a, b in edges:
        pa, pb = path.get(a), path.get(b)
        if pa is None or pb is None or a == b:
            continue
        k = 0
        while k < len(pa) and k < len(pb) and pa[k] is pb[k]:
            k += 1
        if k == 0 or k >= len(pa) or k >= len(pb):
            continue
        local.setdefault(id(pa[k - 1]), set()).add((id(pa[k]), id(pb[k])))
    _place(root, local)
    _absolute(root, 0.0, 0.0)
    return root


def _place(b: Box, local: dict[int, set]) -> None:
    """Size ``b`` from its children (laid out relative to its top-left corner)."""
    if b.children is None:
        return
    for c in b.children:
        _place(c, local)
    kids = sorted(b.children, key=lambda c: c.order)
    if not kids:
        b.w, b.h = 2 * PAD + 40.0, 2 * PAD + b.label_h
        return
    index = {id(c): i for i, c in enumerate(kids)}
    preds: list[list[int]] = [[] for _ in kids]
    for s, d in local.get(id(b), ()):
        i, j = index[s], index[d]
        if i < j:  # children in the model's order: a back edge (a cycle of scopes) does not rank
            preds[j].append(i)
    layer = [0] * len(kids)
    for j in range(len(kids)):
        if preds[j]:
            layer[j] = 1 + max(layer[i] for i in preds[j])
    layers: list[list[int]] = [[] for _ in range(max(layer) + 1)]
    for j in range(len(kids)):
        layers[layer[j]].append(j)
    cx = [0.0] * len(kids)
    top = b.label_h + PAD
    b.rows = []
    for r, members in enumerate(layers):
        want = []
        for j in members:
            ps = preds[j]
            want.append(sum(cx[i] for i in ps) / len(ps) if ps else None)
        # place left to right in the order of the wanted centres (no predecessors: keep the model's order)
        seq = sorted(range(len(members)), key=lambda k: (want[k] is None, want[k] or 0.0, kids[members[k]].order))
        right = None
        placed = []
        for k in seq:
            c = kids[members[k]]
            x = want[k] if want[k] is not None else (0.0 if right is None else right + NODE_SEP + c.w / 2)
            if right is not None:
                x = max(x, right + NODE_SEP + c.w / 2)
            placed.append((k, x))
            right = x + c.w / 2
        shifts = [want[k] - x for k, x in placed if want[k] is not None]
        shift = sum(shifts) / len(shifts) if shifts else 0.0
        height = 0.0
        for k, x in placed:
            j = members[k]
            cx[j] = x + shift
            height = max(height, kids[j].h)
        for k, _x in placed:
            j = members[k]
            kids[j]._local = [cx[j] - kids[j].w / 2, top + (height - kids[j].h) / 2]
            kids[j].row = r
        b.rows.append((top, height))
        top += height + RANK_SEP
    left = min(c._local[0] for c in kids)
    right = max(c._local[0] + c.w for c in kids)
    for c in kids:
        c._local[0] += PAD - left
    b.w = max(right - left + 2 * PAD, 40.0)
    b.h = top - RANK_SEP + PAD


def wrap(root: Box, max_aspect: float = 1.5, gap: float = COLUMN_SEP) -> int:
    """Cut the layers of a laid-out ``root`` (see :func:`layout`) into bands of consecutive
    layers set side by side, left to right, the fewest that make the picture at most
    ``max_aspect`` times as tall as it is wide (a layer is never split, so one very tall
    layer may keep it taller). Every band is as wide as the widest layer, so columns never
    overlap; in place; returns the number of columns (1: nothing moved)."""
    rows = root.rows
    if len(rows) < 2 or root.h <= max_aspect * root.w:
        return 1
    first = rows[0][0]
    bottom = rows[-1][0] + rows[-1][1]
    ends = [t + h - first for t, h in rows]  # each layer's bottom, from the first layer's top
    span = bottom - first

    def bands(k: int) -> list[int]:
        # a layer goes to the band its middle falls in, as if the column were cut in k equal parts
        per = span / k
        return [min(k - 1, int((t - first + h / 2) / per)) for t, h in rows]

    best = None
    # no k below this can fit: a column is at least span / k tall, the picture at most k (w + gap) wide
    k0 = max(2, int(math.sqrt(span / (max_aspect * (root.w + gap)))))
    for k in range(min(k0, len(rows)), len(rows) + 1):
        band = bands(k)
        tops: dict[int, float] = {}
        height = 0.0
        for (t, _h), e, j in zip(rows, ends, band):
            tops.setdefault(j, t - first)
            height = max(height, e - tops[j])
        width = k * root.w + (k - 1) * gap
        best = (k, band, tops)
        if height + root.h - span <= max_aspect * width:
            break
    k, band, tops = best
    col_w = root.w + gap
    for c in root.children or ():
        j = band[c.row]
        _shift(c, j * col_w, -tops[j])
    new_rows = [(t - tops[j], h) for (t, h), j in zip(rows, band)]
    root.rows = new_rows
    root.h = max(t + h for t, h in new_rows) + PAD
    root.w = k * root.w + (k - 1) * gap
    return k


def _shift(b: Box, dx: float, dy: float) -> None:
    b.x += dx
    b.y += dy
    if b._local:
        b._local[0] += dx
        b._local[1] += dy
    for c in b.children or ():
        _shift_abs(c, dx, dy)


def _shift_abs(b: Box, dx: float, dy: float) -> None:
    b.x += dx
    b.y += dy
    for c in b.children or ():
        _shift_abs(c, dx, dy)


def _absolute(b: Box, x: float, y: float) -> None:
    b.x, b.y = x, y
    for c in b.children or ():
        _absolute(c, x + c._local[0], y + c._local[1])


def leaves(b: Box):
    """Every leaf under ``b``, depth first."""
    if b.children is None:
        yield b
        return
    for c in b.children:
        yield from leaves(c)


def groups(b: Box):
    """Every group under ``b`` (not ``b`` itself), depth first."""
    for c in b.children or ():
        if c.children is not None:
            yield c
            yield from groups(c)


def dot_pos(b: Box, rankdir: str = "TB") -> str:
    """A leaf's centre as Graphviz ``pos`` (points, y up)."""
    cx, cy = b.x + b.w / 2, b.y + b.h / 2
    if rankdir == "LR":
        cx, cy = cy, cx
    return f"{cx:.1f},{-cy:.1f}"


def dot_bb(b: Box, rankdir: str = "TB") -> str:
    """A group's rectangle as Graphviz ``bb`` (``llx,lly,urx,ury``, points, y up)."""
    x0, y0, x1, y1 = b.x, b.y, b.x + b.w, b.y + b.h
    if rankdir == "LR":
        x0, y0, x1, y1 = y0, x0, y1, x1
    return f"{x0:.1f},{-y1:.1f},{x1:.1f},{-y0:.1f}"
