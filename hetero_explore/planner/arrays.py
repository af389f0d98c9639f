"""Flat integer arrays of a graph for the planner's hot loops (built once per graph)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

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
    value_index: dict = None
    #: signature id -> context classes of its nodes (see :func:`context_classes`)
    ctx_cache: dict = field(default_factory=dict)


def _csr(src: np.ndarray, dst: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    if len(src):
        key = np.unique(src.astype(np.int64) * max(n, 1) + dst)
        src, dst = key // max(n, 1), key % max(n, 1)
    counts = np.bincount(src, minlength=n) if len(src) else np.zeros(n, np.int64)
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ptr, dst.astype(np.int64)  # already sorted by (src, dst)


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


def graph_arrays(graph) -> GraphArrays:
    cached = getattr(graph, "_arrays", None)
    if cached is not None:
        return cached
    values = graph.values
    names = list(values)
    vindex = {name: i for i, name in enumerate(names)}
    producer = np.full(len(names), -1, np.int64)
    nbytes = np.full(len(names), -1, np.int64)
    shape_ids: dict = {}
    vshape = np.empty(len(names), np.int64)
    for i, name in enumerate(names):
        v = values[name]
        if v.producer is not None:
            producer[i] = v.producer
        s = v.shape
        if s is not None:
            s = _t(s)
            if v.dtype is not None:
                try:
                    b = math.prod(s)
                except TypeError:  # symbolic dims
                    b = None
                if type(b) is int and all(type(d) is int for d in s):
                    nbytes[i] = b * v.dtype.itemsize
        sid = shape_ids.get(s)
        if sid is None:
            sid = shape_ids[s] = len(shape_ids)
        vshape[i] = sid
    vdtype = [values[name].dtype for name in names]
    dst: list = []
    val: list = []
    in_idx: list = []
    in_ptr = np.zeros(len(graph.nodes) + 1, np.int64)
    sigs: dict = {}
    node_sig = np.empty(len(graph.nodes), np.int64)
    sig_first = []
    for node in graph.nodes:
        nid = node.id
        ins = node.inputs
        if ins:
            idx = [vindex[i] if i else -1 for i in ins]
            in_idx.extend(idx)
            in_ptr[nid + 1] = len(idx)
            dts = tuple([vdtype[j] if j >= 0 else None for j in idx])
            for j in idx:
                if j >= 0:
                    val.append(j)
                    dst.append(nid)
        else:
            dts = ()
        key = (node.domain, node.op_type, node.opset, dts)
        s = sigs.get(key)
        if s is None:
            s = sigs[key] = len(sigs)
            sig_first.append(nid)
        node_sig[nid] = s
    # one use per distinct (value, consumer), in first-use order
    val_a = np.asarray(val, np.int64)
    dst_a = np.asarray(dst, np.int64)
    if len(val_a):
        _, first = np.unique(val_a * max(len(graph.nodes), 1) + dst_a, return_index=True)
        first.sort()
        val_a, dst_a = val_a[first], dst_a[first]
    src = producer[val_a] if len(val_a) else val_a
    val, dst = val_a, dst_a
    use_src = np.asarray(src, np.int64)
    use_dst = np.asarray(dst, np.int64)
    use_val = np.asarray(val, np.int64)
    n = len(graph.nodes)
    internal = use_src >= 0
    pred_ptr, pred_idx = _csr(use_dst[internal], use_src[internal], n)
    succ_ptr, succ_idx = _csr(use_src[internal], use_dst[internal], n)
    arr = GraphArrays(n, pred_ptr, pred_idx, succ_ptr, succ_idx, use_src, use_dst, use_val, names, producer,
                      nbytes, np.asarray([vindex[o] for o in graph.outputs if o in vindex], np.int64),
                      node_sig, list(sigs), np.asarray(sig_first, np.int64),
                      in_ptr=np.cumsum(in_ptr), in_idx=np.asarray(in_idx, np.int64), value_shape=vshape,
                      value_const=np.fromiter((graph.is_constant(nm) for nm in names), bool, len(names)),
                      value_index=vindex)
    graph._arrays = arr
    return arr


def _t(shape):
    return shape if shape is None or type(shape) is tuple else tuple(shape)


def context_classes(graph, arr: GraphArrays, sig: int, members: np.ndarray) -> np.ndarray:
    """Context class of each node in ``members`` (all nodes of signature ``sig``).

    Nodes of one class have equal kernel contexts up to their names: the same
    signature, attributes, input and output shapes and dtypes, present inputs, and
    the same initializers as constant inputs. -1 marks a node compared with no other
    (its attributes hold tensors or graphs). Computed once per signature."""
    hit = arr.ctx_cache.get(sig)
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
    vindex = arr.value_index
    vdt: dict = {}
    outs, attrs, unique = [], [], np.zeros(m, bool)
    akeys: dict = {(): 0}
    for r, nid in enumerate(members.tolist()):
        node = nodes[nid]
        a = _attr_key(node.proto)
        if a is None:
            unique[r] = True
            attrs.append(-1)
        else:
            attrs.append(akeys.setdefault(a, len(akeys)))
        o = []
        for name in node.outputs:
            j = vindex.get(name, -1) if name else -1
            o.append(-1 if j < 0 else int(arr.value_shape[j]))
            o.append(-1 if j < 0 else vdt.setdefault(graph.values[name].dtype, len(vdt)))
        outs.append(tuple(o))
    okeys: dict = {}
    cols.append(np.asarray([[akey, okeys.setdefault(o, len(okeys))] for akey, o in zip(attrs, outs)],
                           np.int64).reshape(m, 2))
    table = np.concatenate(cols, axis=1)
    _, out = np.unique(table, axis=0, return_inverse=True)
    out = out.reshape(-1).astype(np.int64)
    out[unique] = -1
    arr.ctx_cache[sig] = out
    return out
