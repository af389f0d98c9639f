"""plan(): placement, convex partitions, ordering, transfers, validation."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

from ..errors import FunctionInliningError, HeterogeneousExecutionUnsupported, PlanningError, UnsupportedNodeError
from ..ir import Graph, shape_is_static
from ..providers import resolve_all
from ..providers.base import KernelContext
from .partition import convex_partitions, order_partitions
from .plan import Blocker, ConvexitySplit, Partition, Plan, Transfer

POLICIES = ("priority",)
CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})
SEQUENCE_OPS = frozenset({"SequenceConstruct", "SequenceAt", "SequenceEmpty", "SequenceInsert",
                          "SequenceErase", "SequenceLength", "SequenceMap", "SplitToSequence",
                          "ConcatFromSequence", "Optional", "OptionalGetElement", "OptionalHasElement"})
MAX_INLINE_ROUNDS = 16
MAX_SPLIT_EXPLANATIONS = 64


# -- placement -------------------------------------------------------------------
def _context(graph: Graph, node) -> KernelContext:
    vals = graph.values
    ins = [vals[i] if i else None for i in node.inputs]
    outs = [vals[o] for o in node.outputs if o]
    return KernelContext(node, node.opset,
                         [None if v is None else v.shape for v in ins],
                         [None if v is None else v.dtype for v in ins],
                         [v.shape for v in outs], [v.dtype for v in outs], graph=graph)


def _blocker_kind(graph: Graph, node) -> str | None:
    if node.op_type in CONTROL_FLOW and node.domain == "":
        return "control-flow"
    if node.op_type in SEQUENCE_OPS and node.domain == "":
        return "sequence"
    if node.op_type == "EPContext":
        return "ep-context"
    return None


def place(graph: Graph, providers) -> tuple[list[int], list[dict], list[int]]:
    """Priority first-fit. Returns (assignment, declined-reasons, unplaceable node ids)."""
    assignment: list[int] = []
    declined: list[dict] = []
    unplaceable: list[int] = []
    n_prov = len(providers)
    for node in graph.nodes:
        ctx = _context(graph, node)
        reasons: dict[str, str] = {}
        chosen = -1
        for pi, p in enumerate(providers):
            try:
                m = p.supports_op(node, node.opset, ctx.in_shapes, ctx.in_dtypes, ctx)
            except Exception as e:  # a provider's oracle must not take the planner down
                reasons[p.name] = f"capability check failed: {type(e).__name__}: {e}"
                continue
            if m.supported:
                chosen = pi
                break
            reasons[p.name] = m.reason or "declined"
        if chosen < 0:
            unplaceable.append(node.id)
            chosen = n_prov - 1
        assignment.append(chosen)
        declined.append(reasons)
    return assignment, declined, unplaceable


def _unsupported_error(graph: Graph, node, reasons: dict) -> UnsupportedNodeError:
    dom = node.domain or "ai.onnx"
    lines = "\n".join(f"  - {p}: {r}" for p, r in reasons.items())
    return UnsupportedNodeError(
        f"no provider supports node {node.name!r} (op {node.op_type}, domain {dom}, opset {node.opset}):\n"
        f"{lines}\nfix: add a provider that implements {node.op_type}, allow it on one of these "
        f"providers (remove a deny mask), or replace the op in the model",
        node_name=node.name, op_type=node.op_type, domain=dom, opset=node.opset, reasons=reasons)


def _inline(graph: Graph, keys: list[tuple[str, str]]) -> Graph:
    from onnx import inliner

    from ..loader import load_model

    for key in keys:
        fns = [f for f in graph.model.functions if (f.domain, f.name) == key]
        if len(fns) > 1 or any(getattr(f, "overload", "") for f in fns):
            raise FunctionInliningError(
                f"function {key[0]}::{key[1]} has several overloads; inlining it would be ambiguous. "
                "Give it a single definition or a provider that implements it")
        f = fns[0]
        if len(f.attribute) or len(f.attribute_proto):
            raise FunctionInliningError(
                f"function {key[0]}::{key[1]} is parameterized by attributes "
                f"({', '.join(list(f.attribute) + [a.name for a in f.attribute_proto])}); it cannot be "
                "inlined safely here. Add a provider that implements it, or inline it when exporting")
    try:
        m = inliner.inline_selected_functions(graph.model, keys, exclude=False)
    except Exception as e:
        raise FunctionInliningError(f"onnx's inliner failed on {keys}: {e}") from e
    return load_model(m, check=False)


# -- transfers -------------------------------------------------------------------
def _kind(src_dev, dst_dev) -> str:
    if src_dev == dst_dev:
        return "same-device"
    if src_dev.is_host and not dst_dev.is_host:
        return "H2D"
    if not src_dev.is_host and dst_dev.is_host:
        return "D2H"
    if src_dev.is_host and dst_dev.is_host:
        return "H2H"
    return "D2D"


def _sum_bytes(graph: Graph, names) -> int | None:
    total = 0
    for n in names:
        b = graph.values[n].nbytes
        if b is None:
            return None
        total += b
    return total


def _build(graph: Graph, providers, assignment, declined, policy, t0, inlined, unplaceable) -> Plan:
    preds, succs = graph.adjacency()
    groups = convex_partitions(assignment, preds, succs, len(providers))
    ordered = order_partitions(groups, assignment, preds)
    node_partition = [0] * len(graph.nodes)
    for pid, members in enumerate(ordered):
        for v in members:
            node_partition[v] = pid
    vals = graph.values
    graph_outputs = set(graph.outputs)
    partitions = []
    for pid, members in enumerate(ordered):
        pi = assignment[members[0]]
        prov = providers[pi]
        mset = set(members)
        ins: dict[str, None] = {}
        outs: dict[str, None] = {}
        for v in members:
            node = graph.nodes[v]
            for i in node.inputs:
                if i and vals[i].producer not in mset:
                    ins.setdefault(i, None)
            for o in node.outputs:
                if not o:
                    continue
                if o in graph_outputs or any(c not in mset for c in vals[o].consumers):
                    outs.setdefault(o, None)
        partitions.append(Partition(pid, prov.name, pi, str(prov.device), tuple(members), tuple(ins),
                                    tuple(outs), _sum_bytes(graph, ins), _sum_bytes(graph, outs)))

    # transfers: one per (value, destination provider), in first-use order
    transfers: list[Transfer] = []
    index: dict[tuple[str, int], int] = {}
    dst_parts: dict[int, list[int]] = {}
    for part in partitions:
        for name in part.inputs:
            v = vals[name]
            if v.producer is None:  # graph input / initializer: staged by the consumer
                continue
            src_pi = assignment[v.producer]
            if src_pi == part.provider_index:
                continue
            key = (name, part.provider_index)
            if key in index:
                dst_parts[index[key]].append(part.id)
                continue
            sp, dp = providers[src_pi], providers[part.provider_index]
            index[key] = len(transfers)
            dst_parts[len(transfers)] = [part.id]
            transfers.append(Transfer(
                name, None if v.dtype is None else v.dtype.name, v.shape, v.nbytes, sp.name, dp.name,
                str(sp.device), str(dp.device), _kind(sp.device, dp.device),
                node_partition[v.producer], ()))
    transfers = [Transfer(**{**t.__dict__, "dst_partitions": tuple(dst_parts[i])})
                 for i, t in enumerate(transfers)]

    # explain convexity splits: same-provider edges across partitions
    splits: list[ConvexitySplit] = []
    seen_pairs = set()
    for v in range(len(graph.nodes)):
        for u in preds[v]:
            if assignment[u] == assignment[v] and node_partition[u] != node_partition[v]:
                pair = (node_partition[u], node_partition[v])
                if pair in seen_pairs or len(splits) >= MAX_SPLIT_EXPLANATIONS:
                    continue
                seen_pairs.add(pair)
                path = _escape_path(u, v, node_partition, succs)
                if path:
                    splits.append(ConvexitySplit(pair[0], pair[1],
                                                 tuple(graph.nodes[i].name for i in path)))

    blockers = _blockers(graph, providers, unplaceable, declined)
    return Plan(graph=graph, providers=tuple(providers), policy=policy, assignment=tuple(assignment),
                declined=tuple(declined), partitions=tuple(partitions),
                node_partition=tuple(node_partition), transfers=tuple(transfers),
                execution_blockers=tuple(blockers), convexity_splits=tuple(splits),
                inlined_functions=tuple(inlined), plan_seconds=time.perf_counter() - t0,
                forced=tuple(unplaceable))


def _escape_path(u: int, v: int, node_partition, succs) -> list[int] | None:
    """A path u → (outside u's partition) → ... → v: why u and v could not merge."""
    pu = node_partition[u]
    start = [w for w in succs[u] if node_partition[w] != pu and w != v]
    if not start:
        return None
    prev = {w: u for w in start}
    q = deque(start)
    limit = 20000
    while q and limit:
        limit -= 1
        x = q.popleft()
        for w in succs[x]:
            if w in prev:
                continue
            prev[w] = x
            if w == v:
                path = [v]
                while path[-1] != u:
                    path.append(prev[path[-1]])
                return path[::-1]
            if w < v + 1:
                q.append(w)
    return None


def _blockers(graph: Graph, providers, unplaceable, declined) -> list[Blocker]:
    out: list[Blocker] = []
    for node in graph.nodes:
        kind = _blocker_kind(graph, node)
        if kind == "control-flow":
            out.append(Blocker(kind, node.name, f"{node.op_type} (control flow) is not executed yet; "
                               "unroll it at export, or run this model with onnxruntime"))
        elif kind == "sequence":
            out.append(Blocker(kind, node.name, f"{node.op_type} produces or consumes a sequence; "
                               "sequences are not executed yet"))
        elif kind == "ep-context":
            out.append(Blocker(kind, node.name, "EPContext nodes hold another runtime's compiled "
                               "binary; it cannot be executed here. Use the model before compilation"))
    for nid in unplaceable:
        node = graph.nodes[nid]
        if _blocker_kind(graph, node) is None:
            reasons = "; ".join(f"{p}: {r}" for p, r in declined[nid].items())
            out.append(Blocker("unplaceable", node.name, f"no provider supports {node.op_type} ({reasons})"))
    sym = [n for n in graph.symbolic_values if graph.values[n].kind != "initializer"]
    if sym:
        head = ", ".join(repr(s) for s in sym[:5]) + (" ..." if len(sym) > 5 else "")
        out.append(Blocker("symbolic-shape", sym[0],
                           f"{len(sym)} value(s) have symbolic or unknown shapes ({head}); bind them "
                           "with load_model(model, input_shapes={...}) or dim_values={...}"))
    return out


# -- public entry points ------------------------------------------------------------
def plan(graph, providers=("gpu", "cpu"), policy: str = "priority") -> Plan:
    """Place, partition and plan transfers for ``graph`` on ``providers`` (front = highest priority).

    ``graph`` may be a loaded :class:`Graph` or anything :func:`load_model` accepts.
    Raises :class:`UnsupportedNodeError` when no provider supports a node that
    execution could run at all; control flow, sequence and EPContext nodes that no
    provider supports are instead placed on the last provider and listed as
    execution blockers, so that such a model can still be shown.
    """
    t0 = time.perf_counter()
    if policy not in POLICIES:
        raise PlanningError(f"unknown placement policy {policy!r}; known: {', '.join(POLICIES)}")
    if not isinstance(graph, Graph):
        from ..loader import load_model
        graph = load_model(graph)
    provs = resolve_all(providers)
    inlined: list[str] = []
    for _ in range(MAX_INLINE_ROUNDS):
        assignment, declined, unplaceable = place(graph, provs)
        fn_keys = []
        hard = []
        for nid in unplaceable:
            node = graph.nodes[nid]
            if graph.function_for(node) is not None:
                key = (node.domain, node.op_type)
                if key not in fn_keys:
                    fn_keys.append(key)
            elif _blocker_kind(graph, node) is None:
                hard.append(nid)
        if fn_keys:
            graph = _inline(graph, fn_keys)
            inlined += [f"{d}::{n}" if d else n for d, n in fn_keys]
            continue
        if hard:
            nid = hard[0]
            raise _unsupported_error(graph, graph.nodes[nid], declined[nid])
        return _build(graph, provs, assignment, declined, policy, t0, inlined, unplaceable)
    raise FunctionInliningError(f"function inlining did not converge after {MAX_INLINE_ROUNDS} rounds "
                                f"(inlined so far: {inlined}); the model's functions may be recursive")


@dataclass(frozen=True)
class SingleProvider:
    """Every node runs on one provider: no partitions to cross."""

    provider: object
    plan: Plan


@dataclass(frozen=True)
class Heterogeneous:
    """Nodes are spread over several providers."""

    plan: Plan


def classify_placement(graph, providers=("gpu", "cpu"), policy: str = "priority"):
    """``SingleProvider(provider)`` or ``Heterogeneous(plan)``."""
    p = plan(graph, providers, policy)
    if p.is_heterogeneous:
        return Heterogeneous(p)
    used = p.assignment[0] if p.assignment else 0
    return SingleProvider(p.providers[used], p)


def guard_heterogeneous_fallback(graph, providers=("gpu", "cpu"), enabled: bool = True) -> Plan:
    """Fail closed: returns the plan only when it can be executed as planned.

    Raises :class:`HeterogeneousExecutionUnsupported` when the plan needs more than
    one provider but heterogeneous fallback is disabled, or when the plan has
    execution blockers (control flow, sequences, EPContext, symbolic shapes)."""
    p = graph if isinstance(graph, Plan) else plan(graph, providers)
    if p.is_heterogeneous and not enabled:
        fb = ", ".join(p.fallback_ops()) or "none"
        raise HeterogeneousExecutionUnsupported(
            f"heterogeneous fallback is disabled but the plan needs {len(p.placement_counts())} providers "
            f"({p.summary()}); ops that force the fallback: {fb}. Enable fallback or give a provider "
            "that supports every op")
    if p.execution_blockers:
        lines = "\n".join(f"  - [{b.kind}] {b.where}: {b.detail}" for b in p.execution_blockers)
        raise HeterogeneousExecutionUnsupported(
            f"this plan cannot be executed ({len(p.execution_blockers)} blocker(s)):\n{lines}",
            list(p.execution_blockers))
    return p
