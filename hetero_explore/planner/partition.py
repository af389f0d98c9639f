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
"""

from __future__ import annotations

import heapq


def _convex(members: list[bool], preds: list[list[int]], succs: list[list[int]], order: list[int]) -> bool:
    """Is the set ``members`` convex in the DAG given in topological ``order``?"""
    n = len(members)
    fwd = [False] * n  # reachable from the set through at least one edge
    for v in order:
        for u in preds[v]:
            if members[u] or fwd[u]:
                fwd[v] = True
                break
    bwd = [False] * n  # reaches the set through at least one edge
    for v in reversed(order):
        for w in succs[v]:
            if members[w] or bwd[w]:
                bwd[v] = True
                break
    for v in range(n):
        if not members[v] and fwd[v] and bwd[v]:
            return False
    return True


def _contract(rep: list[int], preds: list[list[int]], n_super: int):
    """Contracted adjacency over super ids from node-level predecessors."""
    cpreds: list[set] = [set() for _ in range(n_super)]
    for v, ps in enumerate(preds):
        rv = rep[v]
        for u in ps:
            ru = rep[u]
            if ru != rv:
                cpreds[rv].add(ru)
    cp = [sorted(s) for s in cpreds]
    cs: list[list[int]] = [[] for _ in range(n_super)]
    for v, ps in enumerate(cp):
        for u in ps:
            cs[u].append(v)
    return cp, cs


def _topo(preds: list[list[int]], succs: list[list[int]], key) -> list[int]:
    n = len(preds)
    indeg = [len(p) for p in preds]
    heap = [(key(v), v) for v in range(n) if indeg[v] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        _, v = heapq.heappop(heap)
        out.append(v)
        for w in succs[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                heapq.heappush(heap, (key(w), w))
    if len(out) != n:  # pragma: no cover - contraction of convex sets keeps a DAG
        raise RuntimeError("internal error: contracted graph has a cycle")
    return out


def convex_partitions(assignment: list[int], preds: list[list[int]], succs: list[list[int]],
                      n_providers: int) -> list[list[int]]:
    """Group node ids (0..n-1, ids in topological order) into convex same-provider
    partitions. Returns the groups (each sorted ascending), unordered."""
    n = len(assignment)
    if n == 0:
        return []
    order = list(range(n))  # node ids are a topological order

    # 1. whole-provider contraction, in priority order
    rep = list(range(n))
    cur_preds, cur_succs, cur_order = preds, succs, order
    sup_prov = list(assignment)
    contracted_any = False
    for p in range(n_providers):
        members_nodes = [v for v in range(n) if assignment[v] == p]
        if not members_nodes:
            continue
        if len(members_nodes) == 1 and not contracted_any:
            # a single node is trivially convex; contract only if it changes nothing: skip
            pass
        m_super = [False] * len(cur_preds)
        for v in members_nodes:
            m_super[rep[v]] = True
        if not _convex(m_super, cur_preds, cur_succs, cur_order):
            continue
        # contract: all members map to the smallest member's current super id
        # renumber super ids densely
        target = min(rep[v] for v in members_nodes)
        old_ids = sorted(set(rep))
        for v in members_nodes:
            rep[v] = target
        uniq = sorted(set(rep))
        remap = {s: i for i, s in enumerate(uniq)}
        rep = [remap[r] for r in rep]
        n_super = len(uniq)
        cur_preds, cur_succs = _contract(rep, preds, n_super)
        min_member = [n] * n_super
        for v in range(n):
            if v < min_member[rep[v]]:
                min_member[rep[v]] = v
        cur_order = _topo(cur_preds, cur_succs, key=lambda s: min_member[s])
        sup_prov = [0] * n_super
        for v in range(n):
            sup_prov[rep[v]] = assignment[v]
        contracted_any = True
        del old_ids

    # 2. levels on the (contracted) DAG
    ns = len(cur_preds)
    level = [0] * ns
    for v in cur_order:
        pv = sup_prov[v]
        best = 0
        for u in cur_preds[v]:
            lu = level[u] + (sup_prov[u] != pv)
            if lu > best:
                best = lu
        level[v] = best
    for v in reversed(cur_order):
        ss = cur_succs[v]
        if not ss:
            continue
        pv = sup_prov[v]
        lo = min(level[w] - (sup_prov[w] != pv) for w in ss)
        if lo > level[v]:
            level[v] = lo

    # 3. connected components within (provider, level) groups, via union-find
    parent = list(range(ns))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for v in range(ns):
        pv, lv = sup_prov[v], level[v]
        for u in cur_preds[v]:
            if sup_prov[u] == pv and level[u] == lv:
                ru, rv = find(u), find(v)
                if ru != rv:
                    if ru < rv:
                        parent[rv] = ru
                    else:
                        parent[ru] = rv
    groups: dict[int, list[int]] = {}
    for v in range(n):
        groups.setdefault(find(rep[v]), []).append(v)
    return list(groups.values())


def order_partitions(groups: list[list[int]], assignment: list[int], preds: list[list[int]]) -> list[list[int]]:
    """Topological order of partitions, ties by (min topological rank, provider priority, first node)."""
    gid = [0] * len(assignment)
    for g, members in enumerate(groups):
        for v in members:
            gid[v] = g
    gp: list[set] = [set() for _ in groups]
    for v, ps in enumerate(preds):
        for u in ps:
            if gid[u] != gid[v]:
                gp[gid[v]].add(gid[u])
    gpl = [sorted(s) for s in gp]
    gs: list[list[int]] = [[] for _ in groups]
    for g, ps in enumerate(gpl):
        for u in ps:
            gs[u].append(g)
    keys = [(min(m), assignment[m[0]], min(m)) for m in groups]
    ordered = _topo(gpl, gs, key=lambda g: keys[g])
    return [sorted(groups[g]) for g in ordered]
