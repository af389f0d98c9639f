"""Flat integer arrays of a graph for the planner's hot loops (built once per graph)."""

from __future__ import annotations

import math
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


def _csr(src: np.ndarray, dst: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    if len(src):
        key = np.unique(src.astype(np.int64) * max(n, 1) + dst)
        src, dst = key // max(n, 1), key % max(n, 1)
    counts = np.bincount(src, minlength=n) if len(src) else np.zeros(n, np.int64)
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ptr, dst.astype(np.int64)  # already sorted by (src, dst)


def graph_arrays(graph) -> GraphArrays:
    cached = getattr(graph, "_arrays", None)
    if cached is not None:
        return cached
    values = graph.values
    names = list(values)
    vindex = {name: i for i, name in enumerate(names)}
    producer = np.full(len(names), -1, np.int64)
    nbytes = np.full(len(names), -1, np.int64)
    for i, name in enumerate(names):
        v = values[name]
        if v.producer is not None:
            producer[i] = v.producer
        s = v.shape
        if v.dtype is not None and s is not None and all(type(d) is int for d in s):
            nbytes[i] = math.prod(s) * v.dtype.itemsize
    src, dst, val = [], [], []
    sigs: dict = {}
    node_sig = np.empty(len(graph.nodes), np.int64)
    sig_first = []
    for node in graph.nodes:
        nid = node.id
        dts = []
        seen = set()
        for inp in node.inputs:
            if not inp:
                dts.append(None)
                continue
            v = values[inp]
            dts.append(v.dtype)
            if inp in seen:
                continue
            seen.add(inp)
            vi = vindex[inp]
            src.append(producer[vi])
            dst.append(nid)
            val.append(vi)
        key = (node.domain, node.op_type, node.opset, tuple(dts))
        s = sigs.get(key)
        if s is None:
            s = sigs[key] = len(sigs)
            sig_first.append(nid)
        node_sig[nid] = s
    use_src = np.asarray(src, np.int64)
    use_dst = np.asarray(dst, np.int64)
    use_val = np.asarray(val, np.int64)
    n = len(graph.nodes)
    internal = use_src >= 0
    pred_ptr, pred_idx = _csr(use_dst[internal], use_src[internal], n)
    succ_ptr, succ_idx = _csr(use_src[internal], use_dst[internal], n)
    arr = GraphArrays(n, pred_ptr, pred_idx, succ_ptr, succ_idx, use_src, use_dst, use_val, names, producer,
                      nbytes, np.asarray([vindex[o] for o in graph.outputs if o in vindex], np.int64),
                      node_sig, list(sigs), np.asarray(sig_first, np.int64))
    graph._arrays = arr
    return arr
