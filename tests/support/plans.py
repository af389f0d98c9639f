"""The plan's invariants, checked on any plan (the planner's property tests and the
differential fuzzer use them): priority first-fit placement with its declines recorded, every
node in one partition on its provider, convex partitions listed in topological order,
transfers exactly the deduplicated cross-provider edges, partition counts at their lower
bounds where the bound is the proof, and maximal partitions."""

from __future__ import annotations


def closure(graph):
    """reach[u] = set of nodes reachable from u (excluding u)."""
    _, succs = graph.adjacency()
    reach = [set() for _ in graph.nodes]
    for u in reversed(range(len(graph.nodes))):
        for w in succs[u]:
            reach[u].add(w)
            reach[u] |= reach[w]
    return reach


def check_invariants(g, p, first_fit=None, nbytes=None):
    """Assert every invariant of plan ``p`` of graph ``g``. ``first_fit(node) -> provider
    index``: where priority first-fit must place the node (default: where the plan did, its
    declines then checked to be exactly the providers before it); ``nbytes(value) -> int``:
    each transfer's bytes (default: not checked)."""
    n = len(g.nodes)
    if n == 0:   # loading folded everything: nothing to place, cut or move
        assert not p.partitions and not p.transfers and len(p.assignment) == 0
        return
    # placement is priority first-fit
    for node in g.nodes:
        first = p.assignment[node.id] if first_fit is None else first_fit(node)
        assert p.assignment[node.id] == first
        assert set(p.declined[node.id]) == {pr.name for pr in p.providers[:first]}
    # every node in exactly one partition, on the partition's provider
    seen = sorted(v for part in p.partitions for v in part.node_ids)
    assert seen == list(range(n))
    for part in p.partitions:
        assert all(p.assignment[v] == part.provider_index for v in part.node_ids)
        assert all(p.node_partition[v] == part.id for v in part.node_ids)
    assert [part.id for part in p.partitions] == list(range(len(p.partitions)))
    # convexity
    reach = closure(g)
    for part in p.partitions:
        members = set(part.node_ids)
        out_of = set().union(*(reach[v] for v in members)) - members
        for x in out_of:
            assert not (reach[x] & members), f"path leaves partition {part.id} via node {x} and re-enters"
    # partition graph acyclic and listed in topological order
    preds, _ = g.adjacency()
    for v in range(n):
        for u in preds[v]:
            assert p.node_partition[u] <= p.node_partition[v]
    # transfers are exactly the deduplicated cross-provider boundary edges
    expected = set()
    for v in range(n):
        for name in (x for x in g.nodes[v].inputs if x):
            u = g.values[name].producer
            if u is not None and p.assignment[u] != p.assignment[v]:
                expected.add((name, p.providers[p.assignment[v]].name))
    got = [(t.value, t.dst_provider) for t in p.transfers]
    assert len(got) == len(set(got)), "duplicate transfers"
    assert set(got) == expected
    for t in p.transfers:
        assert t.src_provider == p.providers[p.assignment[g.values[t.value].producer]].name
        if nbytes is not None:
            assert t.nbytes == nbytes(t.value), (t.value, t.nbytes)
    # the highest-priority provider in use is optimal: exactly its path lower bound,
    # computed here independently (max number of separate runs along a path)
    top = min(p.assignment)
    assert sum(1 for part in p.partitions if part.provider_index == top) == path_runs(g, p.assignment, top)
    # a convex highest-priority provider therefore gets exactly one partition
    members = {v for v in range(n) if p.assignment[v] == top}
    out_of = set().union(*(reach[v] for v in members)) - members
    if not any(reach[x] & members for x in out_of):
        assert sum(1 for part in p.partitions if part.provider_index == top) == 1
    # every provider's count is at least its bound, and the plan reports the bounds
    for pi, pr in enumerate(p.providers):
        lb = path_runs(g, p.assignment, pi)
        assert p.lower_bounds[pi] == lb
        assert sum(1 for part in p.partitions if part.provider_index == pi) >= lb
    # maximal: no two same-provider partitions joined by an edge can merge, i.e. every
    # such pair is also joined by another path of the partition graph
    for a, b in mergeable_pairs(g, p):
        raise AssertionError(f"partitions {a} and {b} ({p.partitions[a].provider}) could merge")


def path_runs(g, assignment, pi):
    """Brute force: the largest number of separate runs of provider ``pi`` along a path."""
    preds, _ = g.adjacency()
    best = [0] * len(g.nodes)
    for v in range(len(g.nodes)):
        is_p = assignment[v] == pi
        b = 1 if is_p else 0
        for u in preds[v]:
            b = max(b, best[u] + (1 if is_p and assignment[u] != pi else 0))
        best[v] = b
    return max(best, default=0)


def mergeable_pairs(g, p):
    """Same-provider partition pairs joined by an edge and by no other path
    (transitive closure of the partition graph, by brute force)."""
    preds, _ = g.adjacency()
    m = len(p.partitions)
    succ = [set() for _ in range(m)]
    for v in range(len(g.nodes)):
        for u in preds[v]:
            a, b = p.node_partition[u], p.node_partition[v]
            if a != b:
                succ[a].add(b)
    reach = [set() for _ in range(m)]
    for a in reversed(range(m)):  # partition ids are topological
        for b in succ[a]:
            reach[a] |= {b} | reach[b]
    return [(a, b) for a in range(m) for b in sorted(succ[a])
            if p.partitions[a].provider == p.partitions[b].provider
            and not any(b in reach[x] for x in succ[a] if x != b)]
