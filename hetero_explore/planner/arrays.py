"""What the planner derives from a graph's integer arrays (:mod:`hetero_explore.ir.arrays`) and
remembers per graph: the context classes of each node signature, and the capability answers of
providers with a ``capability_key()`` (:mod:`.capability`). The graph never changes after
loading, so they hold across plans; they live in the graph's cache under the planner's key."""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

import numpy as np

from ..ir.arrays import _OUTPUTS, GraphArrays, _slots, row_ids


@dataclass
class PlannerCache:
    """The planner's per-graph memory (``graph.cache(PlannerCache)``)."""

    ctx_cache: dict = field(default_factory=dict)
    """Signature id -> context classes of its nodes (see :func:`context_classes`)."""
    answers: dict = field(default_factory=dict)
    """Capability answers of providers that declare a ``capability_key()``, per key."""


def planner_cache(graph) -> PlannerCache:
    """The planner's memory of ``graph``."""
    return graph.cache(PlannerCache)


_UNIQUE_ATTRS = None


def _attr_key(proto):
    """Hashable attributes of a node, or None when they hold tensors or graphs (such
    nodes are asked one by one: comparing them would cost more than asking)."""
    global _UNIQUE_ATTRS
    if not len(proto.attribute):
        return ()
    if _UNIQUE_ATTRS is None:
        from onnx import AttributeProto as A
        _UNIQUE_ATTRS = frozenset({A.TENSOR, A.GRAPH, A.TENSORS, A.GRAPHS, A.SPARSE_TENSOR,
                                   A.SPARSE_TENSORS, A.TYPE_PROTO, A.TYPE_PROTOS})
    if any(a.type in _UNIQUE_ATTRS for a in proto.attribute):
        return None
    return tuple(a.SerializeToString() for a in proto.attribute)


def context_classes(graph, arr: GraphArrays, sig: int, members: np.ndarray) -> np.ndarray:
    """Context class of each node in ``members`` (all nodes of signature ``sig``).

    Nodes of one class have equal kernel contexts up to their names: the same
    signature, attributes, input and output shapes and dtypes, present inputs, and
    the same initializers as constant inputs. -1 marks a node compared with no other
    (its attributes hold tensors or graphs). Computed once per signature."""
    ctx_cache = planner_cache(graph).ctx_cache
    hit = ctx_cache.get(sig)
    if hit is not None:
        return hit
    nodes = graph.nodes
    m = len(members)
    k = int(arr.in_ptr[members[0] + 1] - arr.in_ptr[members[0]])  # one signature: one input count
    cols = []
    if k:
        slots = arr.in_idx[arr.in_ptr[members][:, None] + np.arange(k)]
        safe = np.maximum(slots, 0)
        code = np.where(arr.value_const[safe], -2 - slots, arr.value_shape[safe])
        cols.append(np.where(slots < 0, -1, code))
    member_nodes = list(map(nodes.__getitem__, members.tolist()))
    # attributes: hashable keys, interned; None (tensors, graphs) marks a node compared with none
    protos = list(map(_PROTO, member_nodes))
    attr = np.zeros(m, np.int64)
    unique = np.zeros(m, bool)
    with_attrs = np.flatnonzero(np.fromiter(map(len, map(_ATTRIBUTE, protos)), np.int64, m))
    if len(with_attrs):
        akeys: dict = {}
        for r in with_attrs.tolist():
            a = _attr_key(protos[r])
            if a is None:
                unique[r] = True
            else:
                attr[r] = akeys.setdefault(a, len(akeys) + 1)
    cols.append(attr[:, None])
    # outputs: count, then (shape id, dtype id) per slot (-1 absent), padded with -2
    if arr.out_ptr is not None:
        starts = arr.out_ptr[members]
        olen = arr.out_ptr[members + 1] - starts
        out_idx = arr.out_idx
    else:
        if arr.value_index is None:
            arr.value_index = dict(zip(arr.value_names, range(len(arr.value_names))))
        out_ptr, out_idx = _slots(member_nodes, _OUTPUTS, arr.value_index, default=True)
        starts, olen = out_ptr[:-1], np.diff(out_ptr)
    width = int(olen.max()) if m else 0
    cols.append(olen[:, None])
    if width:
        pos = starts[:, None] + np.arange(width)
        inside = np.arange(width)[None, :] < olen[:, None]
        j = np.where(inside, out_idx[np.minimum(pos, len(out_idx) - 1)], -1)
        safe = np.maximum(j, 0)
        sh = np.where(j < 0, -1, arr.value_shape[safe])
        dt = np.where(j < 0, -1, arr.value_dtype[safe])
        cols.append(np.where(inside, sh, -2))
        cols.append(np.where(inside, dt, -2))
    out = row_ids(np.concatenate(cols, axis=1))
    out[unique] = -1
    ctx_cache[sig] = out
    return out


_PROTO = operator.attrgetter("proto")
_ATTRIBUTE = operator.attrgetter("attribute")
