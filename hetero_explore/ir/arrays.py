"""The graph's flat integer arrays (CSR adjacency, value uses, slots, interned shapes and dtypes,
node signatures): built once per loaded graph (:attr:`hetero_explore.ir.graph.Graph.arrays`)
for the planner's hot loops. What the planner derives from them and remembers per graph
(context classes, capability answers) it keeps itself (:mod:`hetero_explore.planner.arrays`)."""

from __future__ import annotations

import itertools
import math
import operator
from dataclasses import dataclass

import numpy as np


@dataclass
class GraphArrays:
    n_nodes: int
    #: predecessor CSR over node ids (unique, ascending)
    pred_ptr: np.ndarray
    pred_idx: np.ndarray
    #: successor CSR over node ids (unique, ascending)
    succ_ptr: np.ndarray
    succ_idx: np.ndarray
    #: every (value -> consuming node) use, one per distinct (value, consumer)
    use_src: np.ndarray   # producer node id, -1 for graph inputs and initializers
    use_dst: np.ndarray   # consumer node id
    use_val: np.ndarray   # value index
    #: value index -> name, and per value: producer (-1), bytes (-1 unknown)
    value_names: list
    value_producer: np.ndarray
    value_bytes: np.ndarray
    #: graph output value indices
    output_vals: np.ndarray
    #: node id -> signature id; signatures: (domain, op_type, opset, input dtypes)
    node_sig: np.ndarray
    signatures: list
    #: one representative node id per signature
    sig_first: np.ndarray
    #: input slots of every node (value index, -1 for an absent optional input), CSR
    in_ptr: np.ndarray = None
    in_idx: np.ndarray = None
    #: per value: interned shape id, and whether it is an initializer
    value_shape: np.ndarray = None
    value_const: np.ndarray = None
    #: value name -> index (built on first use when build_graph recorded the slots)
    value_index: dict = None
    #: output slots of every node (value index, -1 for an empty slot), CSR; None: look up by name
    out_ptr: np.ndarray = None
    out_idx: np.ndarray = None
    #: per value: interned dtype id
    value_dtype: np.ndarray = None
    #: per value: element count of its static shape (-1 unknown)
    value_elems: np.ndarray = None
    _sig_members: tuple = None

    def sig_members(self) -> tuple[np.ndarray, list]:
        """Node ids grouped by signature (ascending within each), and group bounds."""
        if self._sig_members is None:
            by_sig = np.argsort(self.node_sig, kind="stable")
            counts = np.bincount(self.node_sig, minlength=len(self.signatures))
            self._sig_members = (by_sig, np.concatenate([[0], np.cumsum(counts)]).tolist())
        return self._sig_members

    def sig_pos(self) -> np.ndarray:
        """Position of every node among the nodes of its signature (ascending ids)."""
        if self._sig_pos is None:
            by_sig, bounds = self.sig_members()
            pos = np.empty(self.n_nodes, np.int64)
            start = np.asarray(bounds[:-1], np.int64)[self.node_sig[by_sig]]
            pos[by_sig] = np.arange(self.n_nodes) - start
            self._sig_pos = pos
        return self._sig_pos

    _sig_pos: np.ndarray = None


def sorted_unique(key: np.ndarray) -> np.ndarray:
    """``np.unique(key)`` for int64 keys by sorting: numpy 2.4's hash-based unique is
    ~20x slower on wide keys such as ``src * n + dst``."""
    key = np.sort(key)
    if len(key) > 1:
        key = key[np.concatenate([[True], key[1:] != key[:-1]])]
    return key


def _csr(src: np.ndarray, dst: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    if len(src):
        key = sorted_unique(src.astype(np.int64) * max(n, 1) + dst)
        src, dst = key // max(n, 1), key % max(n, 1)
    counts = np.bincount(src, minlength=n) if len(src) else np.zeros(n, np.int64)
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ptr, dst.astype(np.int64)  # already sorted by (src, dst)


def build_arrays(graph) -> GraphArrays:
    """The graph's integer arrays (use :attr:`Graph.arrays`, which builds them once: the graph
    is immutable after loading). One pass of C-level list building per attribute, the rest numpy."""
    values = graph.values
    names = list(values)
    vals = list(values.values())
    nv = len(names)
    recorded = getattr(graph, "_slots", None)  # slot indices build_graph recorded on its walk
    vindex = None if recorded is not None else dict(zip(names, range(nv)))
    nodes = graph.nodes
    n = len(nodes)
    # per value: producer, interned shape and dtype (dense ids, first-seen order), bytes
    producer = np.fromiter((-1 if p is None else p for p in map(_PRODUCER, vals)), np.int64, nv)
    shapes = list(map(_SHAPE, vals))
    try:
        vshape, uniq_shapes = _intern(shapes)
    except TypeError:  # a shape given as a list
        vshape, uniq_shapes = _intern([_t(s) for s in shapes])
    elems = np.fromiter(map(_elements, uniq_shapes), np.int64, len(uniq_shapes))
    vdtype = list(map(_DTYPE, vals))
    vdt, uniq_dt = _intern(vdtype)
    itemsize = np.asarray([-1 if d is None else d.itemsize for d in uniq_dt], np.int64)
    nbytes = np.full(nv, -1, np.int64)
    if nv:
        e, isz = elems[vshape], itemsize[vdt]
        ok = (e >= 0) & (isz >= 0)
        nbytes[ok] = e[ok] * isz[ok]
    # per node: input slots (value index, -1 absent), CSR
    out_ptr = out_idx = None
    if recorded is not None:
        in_ptr, in_idx = _csr_of(recorded[0], recorded[1])
        out_ptr, out_idx = _csr_of(recorded[2], recorded[3])
    else:
        in_ptr, in_idx = _slots(nodes, _INPUTS, vindex, default=False)
        out_ptr, out_idx = _slots(nodes, _OUTPUTS, vindex, default=True)
    in_len = np.diff(in_ptr)
    # signatures (domain, op_type, opset, input dtypes), numbered in first-node order
    base_ids: dict = {}
    base = np.fromiter(map(base_ids.setdefault, map(_BASE, nodes), itertools.count()), np.int64, n)
    # an absent input and an input of unknown dtype both count as None
    none_code = uniq_dt.index(None) if None in uniq_dt else len(uniq_dt)
    slot_dt = np.where(in_idx >= 0, vdt[np.maximum(in_idx, 0)] if nv else 0, none_code)
    node_sig, sig_first = _group_rows(base, in_ptr, in_len, slot_dt)
    signatures = []
    for nid in sig_first.tolist():
        node = nodes[nid]
        idx = in_idx[in_ptr[nid]:in_ptr[nid + 1]].tolist()
        signatures.append((node.domain, node.op_type, node.opset,
                           tuple([vdtype[j] if j >= 0 else None for j in idx])))
    # one use per distinct (value, consumer), in first-use order
    present = in_idx >= 0
    val_a = in_idx[present]
    dst_a = np.repeat(np.arange(n, dtype=np.int64), in_len)[present]
    if len(val_a):
        _, first = np.unique(val_a * max(n, 1) + dst_a, return_index=True)
        first.sort()
        val_a, dst_a = val_a[first], dst_a[first]
    use_src = producer[val_a] if len(val_a) else val_a.copy()
    internal = use_src >= 0
    pred_ptr, pred_idx = _csr(dst_a[internal], use_src[internal], n)
    succ_ptr, succ_idx = _csr(use_src[internal], dst_a[internal], n)
    vconst = np.zeros(nv, bool)
    if vindex is None:
        inits = [values[k].index for k in graph.initializer_protos if k in values]
        outs = [values[o].index for o in graph.outputs if o in values]
    else:
        inits = [vindex[k] for k in graph.initializer_protos if k in vindex]
        outs = [vindex[o] for o in graph.outputs if o in vindex]
    vconst[inits] = True
    arr = GraphArrays(n, pred_ptr, pred_idx, succ_ptr, succ_idx, use_src, dst_a, val_a, names, producer,
                      nbytes, np.asarray(outs, np.int64),
                      node_sig, signatures, sig_first,
                      in_ptr=in_ptr, in_idx=in_idx, value_shape=vshape, value_const=vconst,
                      value_index=vindex, value_dtype=vdt, out_ptr=out_ptr, out_idx=out_idx,
                      value_elems=elems[vshape] if nv else np.zeros(0, np.int64))
    return arr


_PRODUCER = operator.attrgetter("producer")
_SHAPE = operator.attrgetter("shape")
_DTYPE = operator.attrgetter("dtype")
_INPUTS = operator.attrgetter("inputs")
_OUTPUTS = operator.attrgetter("outputs")
_BASE = operator.attrgetter("domain", "op_type", "opset")


def _intern(items: list) -> tuple[np.ndarray, list]:
    """Dense ids of hashable ``items`` in first-seen order, and the distinct items."""
    ids: dict = {}
    raw = np.fromiter(map(ids.setdefault, items, itertools.count()), np.int64, len(items))
    if not len(raw):
        return raw, []
    _, dense = np.unique(raw, return_inverse=True)  # raw ids are first-seen positions
    return dense.reshape(-1).astype(np.int64), list(ids)


def _elements(shape) -> int:
    """Element count of a static shape (dims all ``int``), -1 otherwise."""
    if shape is None or not all(type(d) is int for d in shape):
        return -1
    return math.prod(shape)


def row_ids(table: np.ndarray) -> np.ndarray:
    """Dense ids of the rows of an integer matrix, numbered in lexicographic row order
    (the inverse of ``np.unique(table, axis=0)``, which sorts rows as opaque records
    and is ~10x slower): the columns are packed into one int64 key, mixed radix."""
    m, cols = table.shape
    if m == 0:
        return np.zeros(0, np.int64)
    key = np.zeros(m, np.int64)
    bound = 1
    for c in range(cols):
        col = table[:, c]
        lo = int(col.min())
        r = int(col.max()) - lo + 1
        if r == 1:
            continue
        if bound * r >= 1 << 62:
            _, key = np.unique(key, return_inverse=True)
            key = key.reshape(-1).astype(np.int64)
            bound = int(key.max()) + 1
            if bound * r >= 1 << 62:  # a column too wide to pack: make it dense first
                _, col = np.unique(col, return_inverse=True)
                col, lo, r = col.reshape(-1).astype(np.int64), 0, int(col.max()) + 1
        key = key * r + (col - lo)
        bound *= r
    _, ids = np.unique(key, return_inverse=True)
    return ids.reshape(-1).astype(np.int64)


def _group_rows(base: np.ndarray, ptr: np.ndarray, lens: np.ndarray, slots: np.ndarray):
    """Dense ids of the rows (base[i], slots[ptr[i]:ptr[i+1]]), numbered in order of
    first occurrence, and the first row of each id."""
    n = len(base)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    raw = np.empty(n, np.int64)
    offset = 0
    for k in np.unique(lens).tolist():
        rows = np.flatnonzero(lens == k)
        table = np.empty((len(rows), k + 1), np.int64)
        table[:, 0] = base[rows]
        if k:
            table[:, 1:] = slots[ptr[rows][:, None] + np.arange(k)]
        inv = row_ids(table)
        raw[rows] = inv + offset
        offset += int(inv.max()) + 1
    _, first, inv = np.unique(raw, return_index=True, return_inverse=True)
    rank = np.empty(len(first), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    ids = rank[inv.reshape(-1)]
    return ids, np.sort(first)


def _csr_of(lens: list, flat: list) -> tuple[np.ndarray, np.ndarray]:
    """CSR (ptr, idx) of per-row lengths and the rows' concatenated items."""
    ptr = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(np.asarray(lens, np.int64), out=ptr[1:])
    return ptr, np.asarray(flat, np.int64).reshape(-1)


def _t(shape):
    return shape if shape is None or type(shape) is tuple else tuple(shape)


def _slots(nodes, getter, vindex: dict, default: bool) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the value indices named by ``getter(node)`` for every node ("" -> -1; an
    unknown name -> -1 when ``default``, else KeyError)."""
    lists = list(map(getter, nodes))
    lens = np.fromiter(map(len, lists), np.int64, len(lists))
    ptr = np.zeros(len(lists) + 1, np.int64)
    np.cumsum(lens, out=ptr[1:])
    flat = itertools.chain.from_iterable(lists)
    if default:
        idx = np.fromiter(map(vindex.get, flat, itertools.repeat(-1)), np.int64, int(ptr[-1]))
        if "" in vindex:
            names = list(itertools.chain.from_iterable(lists))
            idx[[i for i, nm in enumerate(names) if not nm]] = -1
    else:
        lookup = dict(vindex)
        lookup[""] = -1
        idx = np.fromiter(map(lookup.__getitem__, flat), np.int64, int(ptr[-1]))
    return ptr, idx
