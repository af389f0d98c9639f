"""The pieces of Graphviz pictures that every view draws with: escaped DOT text, labels and
tooltips, a box's lines and tooltip, positions; shared by :mod:`.graph` and :mod:`.scopes`."""

from __future__ import annotations

import functools

import graphviz

from .html import CTRL, fmt_shape
from .notes import unchecked_note

#: ``level="scope"`` without ``scope_depth``: the deepest scope level that shows at most this
#: many boxes (at least the top level)
SCOPE_BOXES = 60
#: Longest model string shown in a label (the tooltip has more).
MAX_LABEL = 40
#: Longest tooltip.
MAX_TOOLTIP = 2000
#: Values listed per node or partition in a tooltip.
MAX_LISTED = 12

#: control characters, shown as U+FFFD
_CTRL = CTRL


def _truncate(s: str, limit: int | None) -> str:
    if limit is not None and len(s) > limit:
        return s[: max(1, limit - 1)] + "\u2026"
    return s


def dot_text(s, limit: int | None = MAX_LABEL, multiline: bool = False) -> str:
    """``s`` escaped for a quoted DOT label or tooltip (an escString).

    Backslashes are doubled (so ``\\N``, ``\\G``, ``\\l`` stay literal), ``&`` becomes
    ``&amp;`` (dot decodes entities in labels), control characters become U+FFFD and
    newlines become a DOT line break when ``multiline`` or a visible ``\\n`` otherwise.
    Quotes are escaped when the statement is written (:func:`_dot_quote`, which quotes every
    value but an :class:`_Html` label, so ``<...>`` is never taken for an HTML-like label;
    labels are still wrapped with :func:`graphviz.nohtml` for callers that hand them to the
    graphviz package)."""
    s = _truncate(str(s), limit)
    s = s.replace("\\", "\\\\").replace("&", "&amp;")
    s = s.replace("\r\n", "\n").replace("\r", "\n")
    s = s.replace("\n", "\\n" if multiline else "\\\\n").replace("\t", " ")
    return _CTRL.sub("\ufffd", s)


def _label(*lines) -> str:
    """Join already-escaped lines with DOT line breaks; never an HTML-like label."""
    return graphviz.nohtml("\\n".join(lines))


def _tooltip(lines) -> str:
    # dot applies object substitution (\N, \G ...) to tooltips in version-dependent ways
    # even after escaping, so a backslash is shown as U+29F5 (reverse solidus operator).
    text = "\n".join(str(x) for x in lines).replace("\\", "\u29f5")
    return graphviz.nohtml(dot_text(text, MAX_TOOLTIP, multiline=True))


@functools.lru_cache(maxsize=512)
def _dtype_name(dtype) -> str:
    return "?" if dtype is None else dtype.name  # numpy's dtype.name is slow: asked per value and tooltip


def fmt_value(graph, name: str) -> str:
    v = graph.values.get(name)
    if v is None:
        return f"{name}: ?"
    return f"{name}: {_dtype_name(v.dtype)}{fmt_shape(v.shape)}"


def _listed(graph, names, limit=MAX_LISTED) -> list[str]:
    names = [n for n in names if n]
    out = ["  " + fmt_value(graph, n) for n in names[:limit]]
    if len(names) > limit:
        out.append(f"  ... and {len(names) - limit} more")
    return out


def _vshort(graph, name) -> str:
    v = graph.values.get(name)
    if v is None:
        return "?"
    return _dtype_name(v.dtype) + fmt_shape(v.shape)


def _pos(pos, key) -> dict:
    if not pos or key not in pos:
        return {}
    at = pos[key]
    if isinstance(at, str):
        return {"pos": at}
    x, y = at
    return {"pos": f"{x:.0f},{y:.0f}"}


def _node_lines(n, max_label) -> list[str]:
    """A node box's label lines (escaped)."""
    lines = [dot_text(n.op_type, max_label)]
    if n.name != f"{n.op_type}_{n.id}":
        lines.append(dot_text(n.name, max_label))
    return lines


def _io_lines(graph, name, max_label) -> list[str]:
    return [dot_text(name, max_label), dot_text(_vshort(graph, name), max_label)]


def _node_tooltip(plan, n) -> list[str]:
    graph = plan.graph
    p = plan.provider_of(n.id)
    dom = n.domain or "ai.onnx"
    lines = [f"{n.op_type} ({dom}, opset {n.opset})", f"name: {n.name}",
             f"provider: {p.name} ({p.device}), partition P{plan.node_partition[n.id]}"]
    ins = [x for x in n.inputs if x]
    if ins:
        lines += ["inputs:"] + _listed(graph, ins)
    outs = [x for x in n.outputs if x]
    if outs:
        lines += ["outputs:"] + _listed(graph, outs)
    declined = plan.declined[n.id]
    if declined:
        lines.append("declined by:")
        lines += [f"  {k}: {r}" for k, r in declined.items()]
    if n.id in plan.forced:
        lines.append("no provider supports it (placed on the last provider for display)")
    note = unchecked_note(p, n)
    if note:
        lines.append("note: " + note)
    return lines
