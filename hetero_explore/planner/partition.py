"""Convex same-provider partitioning in near-linear time.

Algorithm (no per-merge graph search):

1. **Whole-provider partitions.** In priority order, a provider whose node set
   is convex (no path leaves the set and re-enters it) in the current graph is
   contracted into one super node: it becomes exactly one partition.
   Contracting a convex set keeps the graph acyclic. Each check is one forward
   and one backward sweep, O(V + E).
2. **Levels.** On the contracted DAG, ``level(v) = max over predecessors u of
   level(u) + [provider(u) != provider(v)]`` (as soon as possible), then a
   reverse sweep raises each node to ``min over successors w of level(w) -
   [provider differs]`` (as late as possible) so that a node merges with its
   consumers when nothing in between forces a switch. Along any edge the level
   never decreases, and it strictly increases when the provider changes.
3. **Groups.** Nodes sharing (provider, level) and connected through edges
   inside that group form one partition. A path that leaves such a group must
   raise the level (a provider switch, or a same-provider node at a higher
   level) and can never come back down: every partition is convex and the
   partition graph is acyclic (edges between partitions raise the level).

A chain therefore gets exactly one partition per maximal same-provider run.
The sweeps are compiled with numba (CSR integer arrays), so 10⁵ nodes take
milliseconds.
"""

from __future__ import annotations

import heapq

import numpy as np
from numba import njit


@njit(cache=True)
def _convex(members, pred_ptr, pred_idx, succ_ptr, succ_idx, order):
    """Is the set ``members`` convex in the DAG given in topological ``order``?"""
    n = members.shape[0]
    fwd = np.zeros(n, np.bool_)  # reachable from the set through at least one edge
    for k in range(order.shape[0]):
        v = order[k]
        for j in range(pred_ptr[v], pred_ptr[v + 1]):
            u = pred_idx[j]
            if members[u] or fwd[u]:
                fwd[v] = True
                break
    bwd = np.zeros(n, np.bool_)
    for k in range(order.shape[0] - 1, -1, -1):
        v = order[k]
        for j in range(succ_ptr[v], succ_ptr[v + 1]):
            w = succ_idx[j]
            if members[w] or bwd[w]:
                bwd[v] = True
                break
        if bwd[v] and fwd[v] and not members[v]:
            return False
    return True


@njit(cache=True)
def _topo(pred_ptr, succ_ptr, succ_idx, n):
    """Any topological order (Kahn, FIFO)."""
    indeg = np.empty(n, np.int64)
    for v in range(n):
        indeg[v] = pred_ptr[v + 1] - pred_ptr[v]
    queue = np.empty(n, np.int64)
    head = 0
    tail = 0
    for v in range(n):
        if indeg[v] == 0:
            queue[tail] = v
            tail += 1
    while head < tail:
        v = queue[head]
        head += 1
        for j in range(succ_ptr[v], succ_ptr[v + 1]):
            w = succ_idx[j]
            indeg[w] -= 1
            if indeg[w] == 0:
                queue[tail] = w
                tail += 1
    return queue[:tail]


@njit(cache=True)
def _levels(prov, pred_ptr, pred_idx, succ_ptr, succ_idx, order):
    n = prov.shape[0]
    level = np.zeros(n, np.int64)
    for k in range(order.shape[0]):
        v = order[k]
        best = 0
        pv = prov[v]
        for j in range(pred_ptr[v], pred_ptr[v + 1]):
            u = pred_idx[j]
            lu = level[u] + (1 if prov[u] != pv else 0)
            if lu > best:
                best = lu
        level[v] = best
    for k in range(order.shape[0] - 1, -1, -1):
        v = order[k]
        if succ_ptr[v] == succ_ptr[v + 1]:
            continue
        pv = prov[v]
        lo = np.int64(1) << 62
        for j in range(succ_ptr[v], succ_ptr[v + 1]):
            w = succ_idx[j]
            lw = level[w] - (1 if prov[w] != pv else 0)
            if lw < lo:
                lo = lw
        if lo > level[v]:
            level[v] = lo
    return level


@njit(cache=True)
def _find(parent, x):
    root = x
    while parent[root] != root:
        root = parent[root]
    while parent[x] != root:
        nxt = parent[x]
        parent[x] = root
        x = nxt
    return root


@njit(cache=True)
def _components(prov, level, pred_ptr, pred_idx):
    n = prov.shape[0]
    parent = np.arange(n)
    for v in range(n):
        for j in range(pred_ptr[v], pred_ptr[v + 1]):
            u = pred_idx[j]
            if prov[u] == prov[v] and level[u] == level[v]:
                ru = _find(parent, u)
                rv = _find(parent, v)
                if ru < rv:
                    parent[rv] = ru
                elif rv < ru:
                    parent[ru] = rv
    out = np.empty(n, np.int64)
    for v in range(n):
        out[v] = _find(parent, v)
    return out


def _contracted_csr(rep, arr, n_super):
    ps, pd_ = arr.pred_idx, np.repeat(np.arange(arr.n_nodes), np.diff(arr.pred_ptr))
    cu, cv = rep[ps], rep[pd_]
    keep = cu != cv
    cu, cv = cu[keep], cv[keep]
    if len(cu):
        key = np.unique(cu * n_super + cv)
        cu, cv = key // n_super, key % n_super
    # successor CSR (sorted by cu)
    succ_ptr = np.zeros(n_super + 1, np.int64)
    np.cumsum(np.bincount(cu, minlength=n_super), out=succ_ptr[1:])
    succ_idx = cv.copy()
    o = np.lexsort((cu, cv))
    pred_ptr = np.zeros(n_super + 1, np.int64)
    np.cumsum(np.bincount(cv, minlength=n_super), out=pred_ptr[1:])
    pred_idx = cu[o]
    return pred_ptr, pred_idx, succ_ptr, succ_idx


def convex_partitions(assignment: np.ndarray, arr, n_providers: int) -> np.ndarray:
    """Group id (a representative node id) of every node: convex same-provider partitions."""
    n = arr.n_nodes
    if n == 0:
        return np.zeros(0, np.int64)
    assignment = np.asarray(assignment, np.int64)
    rep = np.arange(n, dtype=np.int64)
    pred_ptr, pred_idx, succ_ptr, succ_idx = arr.pred_ptr, arr.pred_idx, arr.succ_ptr, arr.succ_idx
    order = np.arange(n, dtype=np.int64)  # node ids are topological
    sup_prov = assignment
    for p in range(n_providers):
        member_nodes = np.flatnonzero(assignment == p)
        if len(member_nodes) == 0:
            continue
        n_super = int(rep.max()) + 1
        members = np.zeros(n_super, np.bool_)
        members[rep[member_nodes]] = True
        if int(members.sum()) == 1:
            continue  # already a single (super) node
        if not _convex(members, pred_ptr, pred_idx, succ_ptr, succ_idx, order):
            continue
        target = rep[member_nodes].min()
        rep[member_nodes] = target
        _, rep = np.unique(rep, return_inverse=True)
        rep = rep.astype(np.int64)
        n_super = int(rep.max()) + 1
        pred_ptr, pred_idx, succ_ptr, succ_idx = _contracted_csr(rep, arr, n_super)
        order = _topo(pred_ptr, succ_ptr, succ_idx, n_super)
        if len(order) != n_super:  # pragma: no cover - contracting a convex set keeps a DAG
            raise RuntimeError("internal error: contraction produced a cycle")
        sup_prov = np.zeros(n_super, np.int64)
        sup_prov[rep] = assignment
    level = _levels(sup_prov, pred_ptr, pred_idx, succ_ptr, succ_idx, order)
    comp = _components(sup_prov, level, pred_ptr, pred_idx)
    return comp[rep]


def order_partitions(group_of: np.ndarray, assignment: np.ndarray, arr) -> tuple[np.ndarray, int]:
    """Partition index of every node: topological over the partition graph, ties by
    (min topological rank of members, provider priority, first node)."""
    n = arr.n_nodes
    if n == 0:
        return np.zeros(0, np.int64), 0
    uniq, gid = np.unique(group_of, return_inverse=True)
    n_groups = len(uniq)
    first = np.full(n_groups, n, np.int64)
    np.minimum.at(first, gid, np.arange(n))
    src = np.repeat(np.arange(n), np.diff(arr.succ_ptr))
    gu, gv = gid[src], gid[arr.succ_idx]
    keep = gu != gv
    gu, gv = gu[keep], gv[keep]
    if len(gu):
        key = np.unique(gu * n_groups + gv)
        gu, gv = key // n_groups, key % n_groups
    indeg = np.bincount(gv, minlength=n_groups)
    sptr = np.zeros(n_groups + 1, np.int64)
    np.cumsum(np.bincount(gu, minlength=n_groups), out=sptr[1:])
    prov = np.asarray(assignment)[first]
    keys = list(zip(first.tolist(), prov.tolist()))
    heap = [(keys[g], g) for g in np.flatnonzero(indeg == 0).tolist()]
    heapq.heapify(heap)
    indeg = indeg.tolist()
    sptr_l = sptr.tolist()
    gv_l = gv.tolist()
    rank = np.empty(n_groups, np.int64)
    r = 0
    while heap:
        _, g = heapq.heappop(heap)
        rank[g] = r
        r += 1
        for j in range(sptr_l[g], sptr_l[g + 1]):
            w = gv_l[j]
            indeg[w] -= 1
            if indeg[w] == 0:
                heapq.heappush(heap, (keys[w], w))
    if r != n_groups:  # pragma: no cover
        raise RuntimeError("internal error: the partition graph has a cycle")
    return rank[gid], n_groups
