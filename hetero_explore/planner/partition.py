"""Convex same-provider partitioning in near-linear time: optimal for the
highest-priority provider, maximal for every provider.

Definitions. A *run* of provider p along a path is a maximal stretch of
consecutive p-nodes. Two different runs of p along one path can never share a
partition (the path would leave the partition and re-enter it), so
``LB_p = max over paths of the number of p-runs`` is a lower bound on the
number of p-partitions of any convex partitioning (:func:`lower_bounds`).

Algorithm (priority-recursive blocks; no per-merge graph search):

1. **Run index.** For the highest-priority provider p present,
   ``r(v) = max over predecessors u of r(u) + [v is p and u is not]`` (1 for a
   p-node without predecessors, 0 for other sources). ``r`` never decreases
   along an edge and rises when a path enters p from elsewhere. All p-nodes with
   the same ``r`` form one partition ``G_r``: a path leaving ``G_r`` through a
   non-p node comes back to p only with a larger ``r``, so ``G_r`` is convex,
   and there are exactly ``LB_p`` of them: **p is optimal**.
2. **Blocks between runs.** Every other node x may run anywhere between
   ``lo(x) = r(x)`` (after its p-ancestors) and ``hi(x) = min(r(d) - 1)`` over
   its p-descendants d. The blocks ``N_0 < G_1 < N_1 < G_2 < ...`` are a
   topological sequence of segments; x goes into ``N_s`` for the fewest
   distinct s that stab every interval ``[lo, hi]`` (greedy interval stabbing,
   each node to the smallest chosen s ≥ lo, which keeps edges forward). Fewer
   blocks, fewer partitions for the providers below.
3. **Recurse.** Inside each block (a segment: a path that leaves it never comes
   back), repeat 1–2 for the next provider on the block's induced subgraph,
   edges across blocks ignored. The last provider's block is one partition.
4. **Whole convex providers.** When a lower-priority provider's node set is
   convex, the planner also tries contracting it into one partition first (the
   first planner's behaviour) and keeps whichever result has fewer partitions, compared
   provider by provider in priority order.
5. **Maximal.** Finally, two same-provider partitions joined by an edge are
   merged when no other path of the partition graph joins them
   (:func:`merge_maximal`): reachability is checked 64 candidates at a time
   with bit sets over the partition graph, which is far smaller than the node
   graph.
6. **Not joined by an edge.** Unless every provider is already at its path lower
   bound (then no merge can exist), the partitions are re-grouped by greedy
   topological runs over the partition graph and over the node graph with a few
   structural switching rules (:func:`merge_unreachable`, best kept, compared in
   priority order), then same-provider partitions that neither reaches are merged,
   each into the earliest one (:func:`merge_unjoined`), and step 5 runs again.

Every step depends only on the graph's structure, never on node ids, so plans
are invariant under node-order permutations. The sweeps are compiled with numba
(CSR integer arrays): 10⁵ nodes take milliseconds.
"""

from __future__ import annotations


import numpy as np
from numba import njit

from ..ir.arrays import sorted_unique


@njit(cache=True)
def _reached(members, ptr, idx, order, step):
    """Per node: reached from the set ``members`` through at least one edge, sweeping
    ``order`` forwards (``step`` 1, with predecessor CSR) or backwards (-1, successors)."""
    n = members.shape[0]
    out = np.zeros(n, np.bool_)
    m = order.shape[0]
    start, stop = (0, m) if step > 0 else (m - 1, -1)
    for k in range(start, stop, step):
        v = order[k]
        for j in range(ptr[v], ptr[v + 1]):
            u = idx[j]
            if members[u] or out[u]:
                out[v] = True
                break
    return out


@njit(cache=True)
def _convex(members, pred_ptr, pred_idx, succ_ptr, succ_idx, order):
    """Is the set ``members`` convex in the DAG given in topological ``order``? (no node
    outside it is both reached from it and reaching it)"""
    fwd = _reached(members, pred_ptr, pred_idx, order, 1)
    bwd = _reached(members, succ_ptr, succ_idx, order, -1)
    return not np.any(fwd & bwd & ~members)


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
def _split_blocks(prov, p, block, active, n_blocks, pred_ptr, pred_idx, succ_ptr, succ_idx, order):
    """One recursion step for provider ``p``: (block, sub-key) of every active node.

    sub-key 2r-1 for p-nodes (partition G_r), 2s for the others (block N_s)."""
    n = prov.shape[0]
    r = np.zeros(n, np.int64)
    for k in range(order.shape[0]):
        v = order[k]
        if not active[v]:
            continue
        is_p = prov[v] == p
        best = 1 if is_p else 0
        b = block[v]
        for j in range(pred_ptr[v], pred_ptr[v + 1]):
            u = pred_idx[j]
            if not active[u] or block[u] != b:
                continue
            c = r[u] + (1 if (is_p and prov[u] != p) else 0)
            if c > best:
                best = c
        r[v] = best
    maxr = np.zeros(n_blocks, np.int64)
    for v in range(n):
        if active[v] and r[v] > maxr[block[v]]:
            maxr[block[v]] = r[v]
    hi = np.zeros(n, np.int64)
    for k in range(order.shape[0] - 1, -1, -1):
        v = order[k]
        if not active[v] or prov[v] == p:
            continue
        b = block[v]
        h = maxr[b]
        for j in range(succ_ptr[v], succ_ptr[v + 1]):
            w = succ_idx[j]
            if not active[w] or block[w] != b:
                continue
            c = r[w] - 1 if prov[w] == p else hi[w]
            if c < h:
                h = c
        hi[v] = h
    # greedy interval stabbing per block: sort the others by (block, hi)
    m = 0
    for v in range(n):
        if active[v] and prov[v] != p:
            m += 1
    ids = np.empty(m, np.int64)
    keys = np.empty(m, np.int64)
    m = 0
    for v in range(n):
        if active[v] and prov[v] != p:
            ids[m] = v
            keys[m] = block[v] * (n + 1) + hi[v]
            m += 1
    srt = ids[np.argsort(keys, kind="mergesort")]
    pts = np.empty(m, np.int64)   # chosen points, grouped by block, ascending
    pblk = np.empty(m, np.int64)
    n_pts = 0
    cur_b = -1
    last = -1
    for i in range(m):
        v = srt[i]
        b = block[v]
        if b != cur_b:
            cur_b = b
            last = -1
        if r[v] > last:
            last = hi[v]
            pts[n_pts] = last
            pblk[n_pts] = b
            n_pts += 1
    # per block: range of its points
    start = np.full(n_blocks, -1, np.int64)
    stop = np.zeros(n_blocks, np.int64)
    for i in range(n_pts):
        b = pblk[i]
        if start[b] < 0:
            start[b] = i
        stop[b] = i + 1
    sub = np.zeros(n, np.int64)
    for v in range(n):
        if not active[v]:
            continue
        if prov[v] == p:
            sub[v] = 2 * r[v] - 1
            continue
        b = block[v]
        lo_i = start[b]
        hi_i = stop[b]
        # smallest chosen point >= r[v]
        while lo_i < hi_i:
            mid = (lo_i + hi_i) // 2
            if pts[mid] < r[v]:
                lo_i = mid + 1
            else:
                hi_i = mid
        sub[v] = 2 * pts[lo_i]
    return sub


def _renumber(block: np.ndarray, sub: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense ids of (block, sub) pairs in lexicographic order."""
    key = block.astype(np.int64) * (int(sub.max()) + 1) + sub
    uniq, inv = np.unique(key, return_inverse=True)
    return inv.astype(np.int64), len(uniq)


def _recursive_groups(prov, pred_ptr, pred_idx, succ_ptr, succ_idx, order, n_providers):
    """Group id of every (super) node, numbered in a topological (lexicographic) order."""
    n = prov.shape[0]
    block = np.zeros(n, np.int64)
    n_blocks = 1
    active = np.ones(n, np.bool_)
    present = np.bincount(prov, minlength=n_providers)
    for p in range(n_providers):
        if not present[p]:
            continue
        sub = _split_blocks(prov, p, block, active, n_blocks, pred_ptr, pred_idx, succ_ptr, succ_idx, order)
        block, n_blocks = _renumber(block, sub)
        active &= prov != p
    return block


def _contracted_csr(rep, arr, n_super):
    ps, pd_ = arr.pred_idx, np.repeat(np.arange(arr.n_nodes), np.diff(arr.pred_ptr))
    cu, cv = rep[ps], rep[pd_]
    keep = cu != cv
    cu, cv = cu[keep], cv[keep]
    return _csr_pair(cu, cv, n_super)


def _csr_pair(cu, cv, n):
    """(pred_ptr, pred_idx, succ_ptr, succ_idx) of the distinct edges cu -> cv."""
    if len(cu):
        key = sorted_unique(cu * n + cv)
        cu, cv = key // n, key % n
    succ_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(cu, minlength=n), out=succ_ptr[1:])
    succ_idx = cv.copy()
    o = np.lexsort((cu, cv))
    pred_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(cv, minlength=n), out=pred_ptr[1:])
    pred_idx = cu[o]
    return pred_ptr, pred_idx, succ_ptr, succ_idx


def _contract_convex(assignment, arr, n_providers, skip_first: bool):
    """The first planner's step: contract each provider whose node set is convex (in priority
    order) into one super node. Returns (rep, sup_prov, csr..., order) or None."""
    n = arr.n_nodes
    rep = np.arange(n, dtype=np.int64)
    pred_ptr, pred_idx, succ_ptr, succ_idx = arr.pred_ptr, arr.pred_idx, arr.succ_ptr, arr.succ_idx
    order = np.arange(n, dtype=np.int64)
    sup_prov = assignment
    changed = False
    for p in range(n_providers):
        member_nodes = np.flatnonzero(assignment == p)
        if len(member_nodes) == 0:
            continue
        n_super = int(rep.max()) + 1
        members = np.zeros(n_super, np.bool_)
        members[rep[member_nodes]] = True
        if int(members.sum()) == 1:
            continue
        if not _convex(members, pred_ptr, pred_idx, succ_ptr, succ_idx, order):
            continue
        if skip_first and not changed and p == int(assignment.min()):
            continue  # the top provider gets one partition anyway when it is convex
        changed = True
        rep[member_nodes] = rep[member_nodes].min()
        _, rep = np.unique(rep, return_inverse=True)
        rep = rep.astype(np.int64)
        n_super = int(rep.max()) + 1
        pred_ptr, pred_idx, succ_ptr, succ_idx = _contracted_csr(rep, arr, n_super)
        order = _topo(pred_ptr, succ_ptr, succ_idx, n_super)
        if len(order) != n_super:  # pragma: no cover - contracting a convex set keeps a DAG
            raise RuntimeError("internal error: contraction produced a cycle")
        sup_prov = np.zeros(n_super, np.int64)
        sup_prov[rep] = assignment
    if not changed:
        return None
    return rep, sup_prov, pred_ptr, pred_idx, succ_ptr, succ_idx, order


def _counts(group, assignment, n_providers):
    gp = np.zeros(int(group.max()) + 1, np.int64)
    gp[group] = assignment
    return tuple(np.bincount(gp, minlength=n_providers).tolist())


# -- maximality: merge same-provider partitions joined only by their edge ----------
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
def _union(parent, nxt, tail, a, b):
    """Merge the sets rooted at ``a`` and ``b`` (the smaller id stays the root); ``nxt``/``tail``
    chain each set's members so that a set can be walked."""
    if b < a:
        a, b = b, a
    parent[b] = a
    nxt[tail[a]] = b
    tail[a] = tail[b]


@njit(cache=True)
def _roots(parent, m):
    out = np.empty(m, np.int64)
    for v in range(m):
        out[v] = _find(parent, v)
    return out


@njit(cache=True)
def _blocked_batch(ca, cb, succ_ptr, succ_idx, pred_ptr, pred_idx, order, m):
    """For candidate edges ca[i] -> cb[i] of a DAG with m nodes: is cb[i] reachable
    from ca[i] along a path of two or more edges? 64 candidates per sweep."""
    n_c = ca.shape[0]
    blocked = np.zeros(n_c, np.bool_)
    bits = np.zeros(m, np.uint64)
    for s in range(0, n_c, 64):
        e = min(s + 64, n_c)
        bits[:] = 0
        lo = m
        for i in range(s, e):
            a = ca[i]
            bit = np.uint64(1) << np.uint64(i - s)
            for j in range(succ_ptr[a], succ_ptr[a + 1]):
                x = succ_idx[j]
                if x != cb[i]:
                    bits[x] |= bit
                    if x < lo:
                        lo = x
        # propagate along the topological order (order[k] == k: ids are topological)
        for v in range(lo, m):
            acc = bits[v]
            for j in range(pred_ptr[v], pred_ptr[v + 1]):
                acc |= bits[pred_idx[j]]
            bits[v] = acc
        for i in range(s, e):
            if (bits[cb[i]] >> np.uint64(i - s)) & np.uint64(1):
                blocked[i] = True
    return blocked


@njit(cache=True)
def _merge_round(ca, cb, blocked, succ_ptr, succ_idx, m):
    """Merge the unblocked candidates in order; after the first merge each further one
    is re-checked exactly (a breadth-first search over the merged graph)."""
    parent = np.arange(m)
    nxt = np.full(m, -1, np.int64)   # member lists of each root
    tail = np.arange(m)
    seen = np.zeros(m, np.int64)
    stamp = 0
    stack = np.empty(m, np.int64)
    merged = 0
    for i in range(ca.shape[0]):
        if blocked[i]:
            continue
        a = _find(parent, ca[i])
        b = _find(parent, cb[i])
        if a == b:
            continue
        if merged:
            # is b reachable from a through some other node?
            stamp += 1
            if _path_avoiding(parent, nxt, succ_ptr, succ_idx, a, b, seen, stamp, stack):
                continue
        # merge b into a (keep the smaller id as root)
        _union(parent, nxt, tail, a, b)
        merged += 1
    return _roots(parent, m), merged


def merge_maximal(group: np.ndarray, assignment: np.ndarray, arr) -> np.ndarray:
    """Merge same-provider partitions joined by an edge when no other path of the
    partition graph joins them, until none is left. ``group`` must be dense ids in a
    topological order of the partition graph; returns such ids again."""
    src = np.repeat(np.arange(arr.n_nodes), np.diff(arr.succ_ptr))
    dst = arr.succ_idx
    while True:
        m = int(group.max()) + 1
        gp = np.zeros(m, np.int64)
        gp[group] = assignment
        gu, gv = group[src], group[dst]
        keep = gu != gv
        pred_ptr, pred_idx, succ_ptr, succ_idx = _csr_pair(gu[keep], gv[keep], m)
        qs = np.repeat(np.arange(m), np.diff(succ_ptr))
        same = gp[qs] == gp[succ_idx]
        if not same.any():
            return group
        ca, cb = qs[same], succ_idx[same]   # sorted by (a, b): deterministic
        order = np.arange(m, dtype=np.int64)
        blocked = _blocked_batch(ca, cb, succ_ptr, succ_idx, pred_ptr, pred_idx, order, m)
        if blocked.all():
            return group
        root, merged = _merge_round(ca, cb, blocked, succ_ptr, succ_idx, m)
        if not merged:
            return group
        # renumber the merged partition graph topologically (keys stay structural)
        group = _topological_ids(root[group], arr)


# -- non-adjacent merges: a greedy topological re-grouping of the partition graph ----
@njit(cache=True)
def _greedy_runs(gp, weight, n_providers, pred_ptr, succ_ptr, succ_idx, rule):
    """Run index of every unit of a DAG (units = partitions, provider ``gp``): a
    topological order that keeps taking ready units of the current provider until
    none is left (that closure does not depend on the order inside it), then switches
    to the provider that ``rule`` picks among those with ready units: 0 = highest
    priority, 1 = most ready units, 2 = most ready nodes (``weight``), 3 = lowest
    priority, 4 = the ready unit with the longest tail (most provider changes along a
    path to a sink: a critical path first); ties go to the higher priority. Unit ids
    must be topological. Each run is a contiguous stretch of a topological order, hence
    convex, and a union of units. The choice depends only on the structure."""
    m = gp.shape[0]
    indeg = np.empty(m, np.int64)
    for u in range(m):
        indeg[u] = pred_ptr[u + 1] - pred_ptr[u]
    head = np.full(n_providers, -1, np.int64)   # per provider: a stack of ready units
    nxt = np.full(m, -1, np.int64)
    cnt = np.zeros(n_providers, np.int64)
    wsum = np.zeros(n_providers, np.int64)
    tail = np.zeros(m, np.int64)
    if rule == 4:
        for u in range(m - 1, -1, -1):
            t = 0
            for j in range(succ_ptr[u], succ_ptr[u + 1]):
                w = succ_idx[j]
                c = tail[w] + (1 if gp[w] != gp[u] else 0)
                if c > t:
                    t = c
            tail[u] = t
    tmax = np.full(n_providers, -1, np.int64)   # longest tail among the ready units
    for u in range(m):
        if indeg[u] == 0:
            q = gp[u]
            nxt[u] = head[q]
            head[q] = u
            cnt[q] += 1
            wsum[q] += weight[u]
            if tail[u] > tmax[q]:
                tmax[q] = tail[u]
    run = np.full(m, -1, np.int64)
    n_runs = 0
    done = 0
    while done < m:
        best = -1
        for q in range(n_providers):
            if cnt[q] == 0:
                continue
            if best < 0:
                best = q
            elif rule == 1 and cnt[q] > cnt[best]:
                best = q
            elif rule == 2 and wsum[q] > wsum[best]:
                best = q
            elif rule == 3:
                best = q
            elif rule == 4 and tmax[q] > tmax[best]:
                best = q
        if best < 0:  # pragma: no cover - the partition graph is a DAG
            break
        q = best
        tmax[q] = -1  # the stack is drained: every unit pushed from now on is new
        while head[q] >= 0:
            u = head[q]
            head[q] = nxt[u]
            cnt[q] -= 1
            wsum[q] -= weight[u]
            run[u] = n_runs
            done += 1
            for j in range(succ_ptr[u], succ_ptr[u + 1]):
                w = succ_idx[j]
                indeg[w] -= 1
                if indeg[w] == 0:
                    r = gp[w]
                    nxt[w] = head[r]
                    head[r] = w
                    cnt[r] += 1
                    wsum[r] += weight[w]
                    if tail[w] > tmax[r]:
                        tmax[r] = tail[w]
        n_runs += 1
    return run


def _greedy_regroup(group, assignment, arr, n_providers, rules):
    """The best greedy topological re-grouping of the units ``group`` (dense ids) over
    ``rules``, compared provider by provider in priority order: (group ids, counts)."""
    m = int(group.max()) + 1
    gp = np.zeros(m, np.int64)
    gp[group] = assignment
    weight = np.bincount(group, minlength=m).astype(np.int64)
    src = np.repeat(np.arange(arr.n_nodes), np.diff(arr.succ_ptr))
    gu, gv = group[src], group[arr.succ_idx]
    keep = gu != gv
    pred_ptr, _, succ_ptr, succ_idx = _csr_pair(gu[keep], gv[keep], m)
    best, best_c = None, None
    for rule in rules:
        g2 = _greedy_runs(gp, weight, n_providers, pred_ptr, succ_ptr, succ_idx, rule)[group]
        c2 = _counts(g2, assignment, n_providers)
        if best_c is None or c2 < best_c:
            best, best_c = g2, c2
    return best, best_c


def merge_unreachable(group: np.ndarray, assignment: np.ndarray, arr, n_providers: int) -> np.ndarray:
    """Merge same-provider partitions that need not be apart, joined by an edge or not.

    Candidates: greedy topological runs (:func:`_greedy_runs`, several switching rules)
    over the partition graph (unions of the partitions, so no count can rise) and over
    the node graph (which can split a partition the level sweep made too coarse), the
    latter regrouped once more over its own runs. The best is kept, compared provider
    by provider in priority order, the current grouping winning ties. ``group`` must be
    dense ids; dense topological ids are returned."""
    if int(group.max()) == 0:
        return group
    best, best_c = group, _counts(group, assignment, n_providers)
    g2, c2 = _greedy_regroup(group, assignment, arr, n_providers, (0, 1, 2, 3, 4))
    if c2 < best_c:
        best, best_c = g2, c2
    nodes = np.arange(arr.n_nodes, dtype=np.int64)
    g3, _ = _greedy_regroup(nodes, assignment, arr, n_providers, (0, 1, 3, 4))
    _, g3 = np.unique(g3, return_inverse=True)
    g3, c3 = _greedy_regroup(g3.astype(np.int64), assignment, arr, n_providers, (0, 1, 2, 3, 4))
    if c3 < best_c:
        best, best_c = g3, c3
    if best is group:
        return group
    return _topological_ids(best, arr)


@njit(cache=True)
def _first_unreachable(gp, pred_ptr, pred_idx, m):
    """Per unit u of a DAG with topological ids: the smallest a < u of the same provider
    that does not reach u (-1 if none); a < u cannot be reached from u, so the two are
    mutually unreachable. Reachability from 64 sources at a time, O(m/64 * edges)."""
    cand = np.full(m, -1, np.int64)
    bits = np.zeros(m, np.uint64)
    n_prov = 0
    for u in range(m):
        if gp[u] + 1 > n_prov:
            n_prov = gp[u] + 1
    pmask = np.zeros(n_prov, np.uint64)
    for s in range(0, m, 64):
        e = min(s + 64, m)
        pmask[:] = 0
        for a in range(s, e):
            pmask[gp[a]] |= np.uint64(1) << np.uint64(a - s)
        for v in range(s, m):
            acc = np.uint64(0)
            if v < e:
                acc = np.uint64(1) << np.uint64(v - s)
            for j in range(pred_ptr[v], pred_ptr[v + 1]):
                acc |= bits[pred_idx[j]]
            bits[v] = acc
        for u in range(s + 1, m):
            if cand[u] >= 0:
                continue
            free = pmask[gp[u]] & ~bits[u]
            if u < e:
                free &= (np.uint64(1) << np.uint64(u - s)) - np.uint64(1)   # only a < u
            if free:
                k = 0
                while not ((free >> np.uint64(k)) & np.uint64(1)):
                    k += 1
                cand[u] = s + k
    return cand


@njit(cache=True)
def _path_avoiding(parent, nxt, succ_ptr, succ_idx, a, b, seen, stamp, stack):
    """Does a path of two or more edges lead from merged unit ``a`` to ``b``?"""
    top = 0
    seen[a] = stamp
    seen[b] = stamp
    x = a
    while x >= 0:
        for j in range(succ_ptr[x], succ_ptr[x + 1]):
            y = _find(parent, succ_idx[j])
            if seen[y] != stamp:
                seen[y] = stamp
                stack[top] = y
                top += 1
        x = nxt[x]
    while top > 0:
        top -= 1
        x = stack[top]
        while x >= 0:
            for j in range(succ_ptr[x], succ_ptr[x + 1]):
                y = _find(parent, succ_idx[j])
                if y == b:
                    return True
                if seen[y] != stamp:
                    seen[y] = stamp
                    stack[top] = y
                    top += 1
            x = nxt[x]
    return False


@njit(cache=True)
def _merge_unjoined(cand, succ_ptr, succ_idx, m):
    """Merge each unit u into ``cand[u]`` in ascending u; after the first merge each one
    is re-checked exactly in both directions over the merged graph."""
    parent = np.arange(m)
    nxt = np.full(m, -1, np.int64)
    tail = np.arange(m)
    seen = np.zeros(m, np.int64)
    stack = np.empty(m, np.int64)
    stamp = 0
    merged = 0
    for u in range(m):
        if cand[u] < 0:
            continue
        a = _find(parent, cand[u])
        b = _find(parent, u)
        if a == b:
            continue
        if merged:
            stamp += 1
            if _path_avoiding(parent, nxt, succ_ptr, succ_idx, a, b, seen, stamp, stack):
                continue
            stamp += 1
            if _path_avoiding(parent, nxt, succ_ptr, succ_idx, b, a, seen, stamp, stack):
                continue
        _union(parent, nxt, tail, a, b)
        merged += 1
    return _roots(parent, m), merged


def merge_unjoined(group: np.ndarray, assignment: np.ndarray, arr) -> np.ndarray:
    """Merge same-provider partitions that neither reaches (merging two mutually
    unreachable convex sets keeps them convex and the partition graph acyclic), each
    into the earliest such partition, until none is left. ``group``: dense topological
    ids (structural, so the result is too); returns such ids again."""
    src = np.repeat(np.arange(arr.n_nodes), np.diff(arr.succ_ptr))
    while True:
        m = int(group.max()) + 1
        if m <= 1:
            return group
        gp = np.zeros(m, np.int64)
        gp[group] = assignment
        gu, gv = group[src], group[arr.succ_idx]
        keep = gu != gv
        pred_ptr, pred_idx, succ_ptr, succ_idx = _csr_pair(gu[keep], gv[keep], m)
        cand = _first_unreachable(gp, pred_ptr, pred_idx, m)
        if not (cand >= 0).any():
            return group
        root, merged = _merge_unjoined(cand, succ_ptr, succ_idx, m)
        if not merged:
            return group
        group = _topological_ids(root[group], arr)


@njit(cache=True)
def _lower_bound_runs(prov, n_providers, pred_ptr, pred_idx):
    n = prov.shape[0]
    out = np.zeros(n_providers, np.int64)
    r = np.zeros(n, np.int64)
    for p in range(n_providers):
        best_all = 0
        for v in range(n):  # node ids are topological
            is_p = prov[v] == p
            best = 1 if is_p else 0
            for j in range(pred_ptr[v], pred_ptr[v + 1]):
                u = pred_idx[j]
                c = r[u] + (1 if (is_p and prov[u] != p) else 0)
                if c > best:
                    best = c
            r[v] = best
            if best > best_all:
                best_all = best
        out[p] = best_all
    return out


def lower_bounds(assignment: np.ndarray, arr, n_providers: int) -> np.ndarray:
    """Per provider: the largest number of separate runs of it along one path, a lower
    bound on its number of partitions in any convex partitioning."""
    if arr.n_nodes == 0:
        return np.zeros(n_providers, np.int64)
    return _lower_bound_runs(np.asarray(assignment, np.int64), n_providers, arr.pred_ptr, arr.pred_idx)


def convex_partitions(assignment: np.ndarray, arr, n_providers: int) -> np.ndarray:
    """Group id of every node (dense, topological): convex same-provider partitions."""
    n = arr.n_nodes
    if n == 0:
        return np.zeros(0, np.int64)
    assignment = np.asarray(assignment, np.int64)
    order = np.arange(n, dtype=np.int64)  # node ids are topological
    group = _recursive_groups(assignment, arr.pred_ptr, arr.pred_idx, arr.succ_ptr, arr.succ_idx, order,
                              n_providers)
    alt = _contract_convex(assignment, arr, n_providers, skip_first=True)
    if alt is not None:
        rep, sup_prov, pp, pi, sp, si, sorder = alt
        g2 = _recursive_groups(sup_prov, pp, pi, sp, si, sorder, n_providers)[rep]
        # contracted ids follow the super graph's order; make them dense and topological
        if _counts(g2, assignment, n_providers) <= _counts(group, assignment, n_providers):
            group = _topological_ids(g2, arr)
    group = merge_maximal(group, assignment, arr)
    # counts never go below the path lower bounds: at the bounds no merge can exist
    bounds = tuple(lower_bounds(assignment, arr, n_providers).tolist())
    if _counts(group, assignment, n_providers) == bounds:
        return group
    group = merge_unreachable(group, assignment, arr, n_providers)
    if _counts(group, assignment, n_providers) == bounds:
        return group  # at the bounds: maximal too (a merge would go below them)
    group = merge_unjoined(group, assignment, arr)
    return merge_maximal(group, assignment, arr)


def _topological_ids(group, arr):
    _, g = np.unique(group, return_inverse=True)
    m = int(g.max()) + 1
    src = np.repeat(np.arange(arr.n_nodes), np.diff(arr.succ_ptr))
    gu, gv = g[src], g[arr.succ_idx]
    keep = gu != gv
    p2, _, s2, si2 = _csr_pair(gu[keep], gv[keep], m)
    topo = _topo(p2, s2, si2, m)
    if len(topo) != m:  # pragma: no cover - merges are checked acyclic
        raise RuntimeError("internal error: the partition graph has a cycle")
    rank = np.empty(m, np.int64)
    rank[topo] = np.arange(m)
    return rank[g]


@njit(cache=True)
def _heap_push(heap, size, x):
    """Push ``x`` on the binary min-heap ``heap[:size]``; returns the new size."""
    i = size
    while i > 0:
        par = (i - 1) // 2
        if heap[par] <= x:
            break
        heap[i] = heap[par]
        i = par
    heap[i] = x
    return size + 1


@njit(cache=True)
def _rank_groups(first, sptr, gv, indeg, gid):
    """Kahn's order over the partition graph, always taking the ready group whose
    first node is smallest (first nodes are distinct: a binary heap of them)."""
    m = first.shape[0]
    heap = np.empty(m, np.int64)
    size = 0
    rank = np.empty(m, np.int64)
    for g in range(m):
        if indeg[g] == 0:
            size = _heap_push(heap, size, first[g])
    r = 0
    while size > 0:
        top = heap[0]
        size -= 1
        x = heap[size]
        i = 0
        while True:  # sift x down from the root
            c = 2 * i + 1
            if c >= size:
                break
            if c + 1 < size and heap[c + 1] < heap[c]:
                c += 1
            if heap[c] >= x:
                break
            heap[i] = heap[c]
            i = c
        if size > 0:
            heap[i] = x
        g = gid[top]
        rank[g] = r
        r += 1
        for j in range(sptr[g], sptr[g + 1]):
            w = gv[j]
            indeg[w] -= 1
            if indeg[w] == 0:
                size = _heap_push(heap, size, first[w])
    return rank, r


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
        key = sorted_unique(gu * n_groups + gv)
        gu, gv = key // n_groups, key % n_groups
    indeg = np.bincount(gv, minlength=n_groups).astype(np.int64)
    sptr = np.zeros(n_groups + 1, np.int64)
    np.cumsum(np.bincount(gu, minlength=n_groups), out=sptr[1:])
    rank, r = _rank_groups(first, sptr, gv.astype(np.int64), indeg, gid)
    if r != n_groups:  # pragma: no cover
        raise RuntimeError("internal error: the partition graph has a cycle")
    return rank[gid], n_groups
