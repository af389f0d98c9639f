"""Placement policies: a registry of functions that refine priority first-fit.

* ``priority`` — first-fit by priority: every node on the highest-priority
  provider that supports it (nothing to refine).
* ``min-transfer`` — starts from ``priority`` and moves a node (or a whole
  partition) to a lower-priority provider that *supports* it when the estimated
  time saved on transfers (bytes / link bandwidth + a per-transfer latency)
  outweighs the estimated kernel time lost (FLOPs and bytes against each
  provider's throughput, see :class:`CostModel`). It never moves a node to a
  provider that declined it, so byte identity is unaffected: only placement
  changes.

A policy is ``fn(graph, providers, assignment, declined, cost_model) ->
(assignment, declined)``; add one with :func:`register_policy`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..ir.errors import PlanningError
from ..providers.base import transfer_kind


@dataclass(frozen=True)
class CostModel:
    """Rough, explicit numbers for what-if comparisons (not a simulator)."""

    link_bandwidth: dict = field(default_factory=lambda: {
        "H2D": 25e9, "D2H": 25e9, "D2D": 50e9, "H2H": 20e9, "same-device": 200e9})
    """Bytes per second per transfer kind."""
    transfer_latency: float = 10e-6
    """Seconds per transfer, whatever its size."""
    host_flops: float = 100e9
    """FLOP/s of a host (CPU) provider."""
    host_bandwidth: float = 50e9
    """Memory bytes/s of a host provider."""
    device_flops: float = 10e12
    """FLOP/s of a non-host (accelerator) provider."""
    device_bandwidth: float = 1e12
    """Memory bytes/s of a non-host provider."""
    launch_overhead: float = 2e-6
    """Seconds per node per kernel launch on any provider."""

    def link(self, kind: str) -> float:
        return self.link_bandwidth.get(kind, 20e9)

    def transfer_seconds(self, nbytes: int, kind: str) -> float:
        return self.transfer_latency + max(nbytes, 0) / self.link(kind)

    def kernel_seconds(self, flops: float, nbytes: float, is_host: bool) -> float:
        f, b = (self.host_flops, self.host_bandwidth) if is_host else (self.device_flops, self.device_bandwidth)
        return self.launch_overhead + max(flops / f, nbytes / b)


DEFAULT_COST = CostModel()


def _numel(shape) -> int:
    if shape is None or not all(isinstance(d, int) for d in shape):
        return 0
    return int(math.prod(shape))


def node_work(graph, node) -> tuple[float, float]:
    """(FLOPs, bytes read + written) of a node, roughly: 2·M·N·K for MatMul/Gemm,
    2·out·(C/group)·kernel for Conv, one per output element otherwise."""
    vals = graph.values
    ins = [vals[i] for i in node.inputs if i and i in vals]
    outs = [vals[o] for o in node.outputs if o and o in vals]
    nbytes = sum(v.nbytes or 0 for v in ins + outs)
    out_elems = sum(_numel(v.shape) for v in outs)
    return _flops(node, ins, out_elems), float(nbytes)


def _flops(node, ins: list, out_elems: int) -> float:
    """:func:`node_work`'s FLOPs of ``node`` from its input values and output elements."""
    op = node.op_type
    if op in ("MatMul", "Gemm", "FusedMatMul") and len(ins) >= 2 and ins[0].shape:
        k = ins[0].shape[-1] if op != "Gemm" or not node.attr("transA", 0) else ins[0].shape[0]
        return 2.0 * out_elems * (k if isinstance(k, int) else 1)
    if op in ("Conv", "ConvTranspose") and len(ins) >= 2 and ins[1].shape:
        w = ins[1].shape
        return 2.0 * out_elems * (_numel(w[1:]) or 1)
    return float(out_elems)


#: ops whose FLOPs :func:`node_work` counts from their operands (the rest: one per output element)
_COUNTED = frozenset({"MatMul", "Gemm", "FusedMatMul", "Conv", "ConvTranspose"})


def _slot_sums(per_value: np.ndarray, ptr: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Per node: the sum of ``per_value`` over its slots (absent slots count 0)."""
    x = np.where(idx >= 0, per_value[np.maximum(idx, 0)], 0) if len(idx) else np.zeros(0, np.int64)
    total = np.concatenate([[0], np.cumsum(x)])
    return total[ptr[1:]] - total[ptr[:-1]]


def kernel_times(graph, providers, cost: CostModel) -> np.ndarray:
    """(n_nodes, n_providers) estimated seconds of each node on each provider: the
    values of :meth:`CostModel.kernel_seconds` of :func:`node_work`, computed from the
    graph's arrays (operands looked at only for the ops whose FLOPs it counts)."""
    arr = graph.arrays
    n = arr.n_nodes
    nbytes = (_slot_sums(np.maximum(arr.value_bytes, 0), arr.in_ptr, arr.in_idx)
              + _slot_sums(np.maximum(arr.value_bytes, 0), arr.out_ptr, arr.out_idx)).astype(np.float64)
    out_elems = _slot_sums(np.maximum(arr.value_elems, 0), arr.out_ptr, arr.out_idx)
    flops = out_elems.astype(np.float64)
    counted = [i for i, sig in enumerate(arr.signatures) if sig[1] in _COUNTED]
    if counted:
        vals = graph.values
        elems = out_elems.tolist()
        for v in np.flatnonzero(np.isin(arr.node_sig, counted)).tolist():
            node = graph.nodes[v]
            flops[v] = _flops(node, [vals[i] for i in node.inputs if i and i in vals], elems[v])
    out = np.empty((n, len(providers)))
    for j, p in enumerate(providers):
        f, b = ((cost.host_flops, cost.host_bandwidth) if p.device.is_host
                else (cost.device_flops, cost.device_bandwidth))
        out[:, j] = cost.launch_overhead + np.maximum(flops / f, nbytes / b)
    return out


def estimate(plan, cost: CostModel | None = None) -> dict:
    """Estimated seconds of a plan: transfers (bytes / bandwidth + latency each) and
    kernels (per provider from FLOPs and bytes), with the bytes moved."""
    cost = cost or DEFAULT_COST
    t_x = 0.0
    moved = 0
    for t in plan.transfers:
        b = t.nbytes or 0
        moved += b
        t_x += cost.transfer_seconds(b, t.kind)
    kt = kernel_times(plan.graph, plan.providers, cost)
    a = np.asarray(plan.assignment, np.int64)
    t_k = float(kt[np.arange(len(a)), a].sum()) if len(a) else 0.0
    return {"transfer_bytes": moved, "transfers": len(plan.transfers), "transfer_seconds": t_x,
            "kernel_seconds": t_k, "total_seconds": t_x + t_k}


# -- policies ---------------------------------------------------------------------------
def priority_policy(graph, providers, assignment, declined, cost=None):
    """Priority first-fit: nothing to change."""
    return assignment, declined


class _TransferCost:
    """Incremental transfer cost: per produced value, its consumers' providers."""

    def __init__(self, graph, providers, assignment, cost):
        arr = graph.arrays
        self.a = assignment
        self.cost = cost
        self.k = len(providers)
        self.devs = [p.device for p in providers]
        self.kind_cost = {}
        self.vbytes = arr.value_bytes
        n = arr.n_nodes
        internal = arr.use_src >= 0
        src, dst, val = arr.use_src[internal], arr.use_dst[internal], arr.use_val[internal]
        # per value: consumer node ids; per node: values it reads / writes
        self.consumers: dict[int, list[int]] = {}
        self.reads: list[list[int]] = [[] for _ in range(n)]
        for s_, d_, v_ in zip(src.tolist(), dst.tolist(), val.tolist()):
            self.consumers.setdefault(v_, []).append(d_)
            self.reads[d_].append(v_)
        self.producer = arr.value_producer
        self.producer_l = arr.value_producer.tolist()
        self.vbytes_l = arr.value_bytes.tolist()
        self.kinds = [[transfer_kind(s, d) for d in self.devs] for s in self.devs]
        self.writes: list[list[int]] = [[] for _ in range(n)]
        for v_ in self.consumers:
            self.writes[int(self.producer[v_])].append(v_)

    def value_cost(self, v: int, a: dict | None = None) -> float:
        cur = self.a
        p = self.producer_l[v]
        if a:
            src = a.get(p, cur[p])
            dsts = {a.get(c, cur[c]) for c in self.consumers[v]}
        else:
            src = cur[p]
            dsts = {cur[c] for c in self.consumers[v]}
        dsts.discard(src)
        if not dsts:
            return 0.0
        b = max(self.vbytes_l[v], 0)
        total = 0.0
        for d in dsts:
            total += self.cost.transfer_seconds(b, self.kinds[int(src)][int(d)])
        return total

    def delta(self, nodes, q: int) -> float:
        """Transfer seconds after moving ``nodes`` to provider ``q``, minus before."""
        touched = set()
        for v in nodes:
            touched.update(self.reads[v])
            touched.update(self.writes[v])
        moved = {v: q for v in nodes}
        return sum(self.value_cost(x, moved) - self.value_cost(x) for x in touched)


def min_transfer_policy(graph, providers, assignment, declined, cost=None, support=None):
    """Move nodes (first whole partitions of the priority plan, then single nodes) to a
    lower-priority provider that supports them when that lowers the estimated time."""
    cost = cost or DEFAULT_COST
    if support is None:
        support = support_matrix(graph, providers)
    a = np.asarray(assignment, np.int64).copy()
    kt = kernel_times(graph, providers, cost)
    tc = _TransferCost(graph, providers, a, cost)
    reason_of: dict[int, tuple[int, float]] = {}
    eps = 1e-12

    kt_rows = kt.tolist()            # one node's row as Python floats (the same values)
    support_rows = support.tolist()

    def try_move(nodes: list[int]) -> bool:
        cur = int(a[nodes[0]])
        best_q, best_gain = -1, eps
        one = nodes[0] if len(nodes) == 1 else -1
        for q in range(cur + 1, len(providers)):
            if one >= 0:
                if not support_rows[one][q]:
                    continue
                d_k = kt_rows[one][q] - kt_rows[one][cur]
            else:
                if not all(support[v, q] for v in nodes):
                    continue
                d_k = float(kt[nodes, q].sum() - kt[nodes, cur].sum())
            gain = -(tc.delta(nodes, q) + d_k)
            if gain > best_gain:
                best_q, best_gain = q, gain
        if best_q < 0:
            return False
        for v in nodes:
            a[v] = best_q
            reason_of[v] = (cur, best_gain)
        return True

    # 1. runs: connected same-provider groups of the priority placement, as units
    from .partition import convex_partitions
    groups = convex_partitions(a, graph.arrays, len(providers))
    members: dict[int, list[int]] = {}
    for v, g in enumerate(groups.tolist()):
        members.setdefault(g, []).append(v)
    for g in sorted(members, key=lambda g: members[g][0]):
        nodes = members[g]
        if int(a[nodes[0]]) < len(providers) - 1:
            try_move(nodes)
    # 2. single nodes, a few sweeps in topological order
    for _ in range(3):
        changed = False
        for v in range(len(a)):
            if int(a[v]) < len(providers) - 1 and try_move([v]):
                changed = True
        if not changed:
            break
    new_declined = list(declined)
    for v, (frm, gain) in reason_of.items():
        if int(a[v]) == int(assignment[v]):
            continue
        r = dict(declined[v])
        for pi in range(int(assignment[v]), int(a[v])):
            if providers[pi].name not in r:
                r[providers[pi].name] = (f"supported, but the min-transfer policy moved it to "
                                         f"{providers[int(a[v])].name} (estimated {gain * 1e6:.1f} µs saved)")
        new_declined[v] = r
    return a, new_declined


def support_matrix(graph, providers) -> np.ndarray:
    """(n_nodes, n_providers) bool: does each provider support each node? Asked with
    the planner's capability cache, one provider at a time."""
    from .capability import place
    out = np.zeros((len(graph.nodes), len(providers)), bool)
    for pi, p in enumerate(providers):
        a, _, unplaceable = place(graph, [p])
        col = np.ones(len(graph.nodes), bool)
        col[unplaceable] = False
        out[:, pi] = col
    return out


POLICIES: dict[str, Callable] = {"priority": priority_policy, "min-transfer": min_transfer_policy}
"""Placement policy name → function (see the module docstring)."""


def register_policy(name: str, fn: Callable) -> None:
    """Add a placement policy ``fn(graph, providers, assignment, declined, cost) ->
    (assignment, declined)``; it must only move nodes to providers that support them."""
    POLICIES[name] = fn


def get_policy(name: str) -> Callable:
    fn = POLICIES.get(name)
    if fn is None:
        raise PlanningError(f"unknown placement policy {name!r}; known: {', '.join(POLICIES)} "
                            "(add one with hetero_explore.planner.register_policy)")
    return fn
