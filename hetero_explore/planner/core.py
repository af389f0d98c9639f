"""plan(): placement, convex partitions, ordering, transfers, validation."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..ir.errors import FunctionInliningError, HeterogeneousExecutionUnsupported, UnsupportedNodeError
from ..load.expand import BodyUnavailable, carry_expansions, expand_nodes, expandable, inline_functions
from ..ir.graph import Graph, shape_is_static
from ..providers import resolve_all
from ..ir.arrays import sorted_unique
from .capability import place
from .partition import convex_partitions, lower_bounds, order_partitions
from .plan import Blocker, Plan, PlanTables, _Deferred
from .policies import get_policy

CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})
#: ops whose output shapes the run cannot compute when load time left them unknown: none now.
#: Control flow runs its subgraphs and allocates its outputs at the shapes they produced
#: (hetero_explore.kernels.host.control), SequenceAt / ConcatFromSequence / StringSplit compute theirs from
#: their run-time inputs (hetero_explore.runner.shapes); SequenceMap's outputs are host values (shape ()).
#: An op added here fails closed with the "dynamic-shape" blocker when its shapes are open.
RUNTIME_SHAPE_UNSUPPORTED: frozenset = frozenset()
SEQUENCE_OPS = frozenset({"SequenceConstruct", "SequenceAt", "SequenceEmpty", "SequenceInsert",
                          "SequenceErase", "SequenceLength", "SequenceMap", "SplitToSequence",
                          "ConcatFromSequence", "Optional", "OptionalGetElement", "OptionalHasElement"})
MAX_INLINE_ROUNDS = 16


# -- placement -------------------------------------------------------------------
def _blocker_kind(graph: Graph, node) -> str | None:
    if node.op_type in CONTROL_FLOW and node.domain == "":
        return "control-flow"
    if node.op_type in SEQUENCE_OPS and node.domain == "":
        return "sequence"
    if node.op_type == "EPContext":
        return "ep-context"
    return None


def _unsupported_error(graph: Graph, node, reasons: dict, note: str = "") -> UnsupportedNodeError:
    dom = node.domain or "ai.onnx"
    lines = "\n".join(f"  - {p}: {r}" for p, r in reasons.items())
    if note:
        lines += f"\n  ({note})"
    return UnsupportedNodeError(
        f"no provider supports node {node.name!r} (op {node.op_type}, domain {dom}, opset {node.opset}):\n"
        f"{lines}\nfix: add a provider that implements {node.op_type}, allow it on one of these "
        f"providers (remove a deny mask), or replace the op in the model",
        node_name=node.name, op_type=node.op_type, domain=dom, opset=node.opset, reasons=reasons)


# -- transfers -------------------------------------------------------------------


def _build(graph: Graph, providers, assignment, declined, policy, t0, inlined, unplaceable) -> Plan:
    arr = graph.arrays
    n = arr.n_nodes
    k = len(providers)
    a = np.asarray(assignment, np.int64)
    group_of = convex_partitions(a, arr, k)
    bounds_lb = lower_bounds(a, arr, k)
    node_part, n_parts = order_partitions(group_of, a, arr)
    vbytes = arr.value_bytes

    # members of each partition, ascending node ids
    by_part = np.argsort(node_part, kind="stable")
    m_ptr = _ptr(node_part, n_parts)
    part_prov = a[by_part[m_ptr[:-1]]] if n else np.zeros(0, np.int64)

    src, dst, val = arr.use_src, arr.use_dst, arr.use_val
    src_part = np.where(src >= 0, node_part[np.maximum(src, 0)], -1) if n else src
    dst_part = node_part[dst] if n else dst
    crossing = src_part != dst_part
    # partition inputs: (dst partition, value), in first-use order
    ins = _pairs_csr(dst_part[crossing], val[crossing], n_parts)
    # partition outputs: (src partition, value) for uses elsewhere, plus graph outputs; by value
    internal_cross = crossing & (src >= 0)
    gprod = arr.value_producer[arr.output_vals]
    has = gprod >= 0
    outs = _pairs_csr(np.concatenate([src_part[internal_cross], node_part[gprod[has]] if n else gprod[has]]),
                      np.concatenate([val[internal_cross], arr.output_vals[has]]), n_parts, by_value=True)

    # transfers: one per (value, destination provider), ordered by (first destination
    # partition, value, destination provider); destinations ascending
    xp = (src >= 0) & (a[np.maximum(src, 0)] != a[dst]) if n else np.zeros(0, bool)
    t_val, t_dprov, t_dpart = val[xp], a[dst[xp]], dst_part[xp]
    key = t_val * k + t_dprov
    o = np.lexsort((t_dpart, key))
    key_s, part_s = key[o], t_dpart[o]
    new_key = np.concatenate([[True], key_s[1:] != key_s[:-1]]) if len(o) else np.zeros(0, bool)
    new_pair = new_key | np.concatenate([[True], part_s[1:] != part_s[:-1]]) if len(o) else new_key
    g_key, g_part = key_s[new_pair], part_s[new_pair]         # distinct (key, partition), sorted
    starts = np.flatnonzero(new_key[new_pair])                 # first pair of each transfer
    t_v, t_d = g_key[starts] // k, g_key[starts] % k
    t_first = g_part[starts]
    order = np.lexsort((t_d, t_v, t_first))
    counts = np.diff(np.concatenate([starts, [len(g_key)]]))
    d_ptr = np.zeros(len(order) + 1, np.int64)
    np.cumsum(counts[order], out=d_ptr[1:])
    d_parts = g_part[np.repeat(starts[order], counts[order]) + _ranks(counts[order])] if len(order) else g_part
    t_v, t_d = t_v[order], t_d[order]
    t_sp = a[arr.value_producer[t_v]]
    t_spart = node_part[arr.value_producer[t_v]] if n else t_v
    tables = PlanTables(graph, tuple(providers), arr, part_prov, (m_ptr, by_part), ins, outs,
                        _segment_bytes(vbytes, ins), _segment_bytes(vbytes, outs),
                        (t_v, t_sp, t_d, t_spart, (d_ptr, d_parts)))

    blockers = _blockers(graph, providers, unplaceable, declined)
    return Plan(graph=graph, providers=tuple(providers), policy=policy,
                assignment=tuple(a.tolist()), declined=tuple(declined),
                partitions=_Deferred(tables.partitions), node_partition=tuple(node_part.tolist()),
                transfers=_Deferred(tables.transfers), execution_blockers=tuple(blockers),
                inlined_functions=tuple(inlined), plan_seconds=time.perf_counter() - t0,
                forced=tuple(unplaceable), lower_bounds=tuple(bounds_lb.tolist()), tables=tables)


def _ptr(ids: np.ndarray, m: int) -> np.ndarray:
    """CSR pointers of ``m`` groups from the group id of every item."""
    ptr = np.zeros(m + 1, np.int64)
    if len(ids):
        np.cumsum(np.bincount(ids, minlength=m), out=ptr[1:])
    return ptr


def _ranks(counts: np.ndarray) -> np.ndarray:
    """0, 1, ..., c-1 for every count c, concatenated."""
    total = int(counts.sum())
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    return np.arange(total, dtype=np.int64) - starts


def _pairs_csr(part: np.ndarray, val: np.ndarray, m: int, by_value: bool = False):
    """(ptr, values): the distinct values of every partition, in first-occurrence order
    (or ascending with ``by_value``)."""
    if len(part) == 0:
        return np.zeros(m + 1, np.int64), np.zeros(0, np.int64)
    key = part.astype(np.int64) * (int(val.max()) + 1) + val
    if by_value:
        key = sorted_unique(key)                     # (partition, value) ascending
        p_, v_ = key // (int(val.max()) + 1), key % (int(val.max()) + 1)
    else:
        _, first = np.unique(key, return_index=True)
        first.sort()                                 # first-occurrence order ...
        p_, v_ = part[first], val[first]
        o = np.argsort(p_, kind="stable")            # ... within each partition
        p_, v_ = p_[o], v_[o]
    return _ptr(p_, m), v_.astype(np.int64)


def _segment_bytes(vbytes: np.ndarray, csr) -> np.ndarray:
    """Bytes of every partition's values (-1 when one is unknown)."""
    ptr, vals = csr
    b = vbytes[vals]
    total = np.concatenate([[0], np.cumsum(np.maximum(b, 0))])
    unknown = np.concatenate([[0], np.cumsum(b < 0)])
    out = total[ptr[1:]] - total[ptr[:-1]]
    out[(unknown[ptr[1:]] - unknown[ptr[:-1]]) > 0] = -1
    return out


def runtime_shape_blocker(graph: Graph, node) -> str | None:
    """Why ``node`` cannot run when its output shapes are left to the run (None: it can)."""
    bad = [o for o in node.outputs if o and o in graph.values
           and (graph.values[o].shape is None or not shape_is_static(graph.values[o].shape))]
    if not bad:
        return None
    if node.op_type not in RUNTIME_SHAPE_UNSUPPORTED or node.domain != "":
        # inputs known at load that onnx's inference already rejects (Range given 1-element
        # vectors, not scalars): the run would refuse them, so the plan does now
        vals = graph.values
        ins = [vals.get(n) if n else None for n in node.inputs]
        if all(v is not None and v.shape is not None and v.dtype is not None for n, v in zip(node.inputs, ins) if n):
            from ..runner.shapes import rejected_input_types
            why = rejected_input_types(node, [None if v is None else tuple(v.shape) for v in ins],
                                       [None if v is None else v.dtype for v in ins])
            if why:
                return (f"{node.op_type} output {bad[0]!r} is computed at run time, but onnx's inference rejects "
                        f"its input types: {why}")
        return None
    return (f"{node.op_type} output {bad[0]!r} has no static shape at load time, and its shape cannot be "
            "computed at run time (onnx's per-node inference does not reach into its subgraphs or data); "
            "bind the input shapes (load_model(model, input_shapes={...})) so that it is known when loading")


def _blockers(graph: Graph, providers, unplaceable, declined) -> list[Blocker]:
    out: list[Blocker] = []
    for nid in unplaceable:          # first: what no provider takes
        node = graph.nodes[nid]
        if _blocker_kind(graph, node) is None:
            reasons = "; ".join(f"{p}: {r}" for p, r in declined[nid].items())
            out.append(Blocker("unplaceable", node.name, f"no provider supports {node.op_type} ({reasons}); "
                               "it sits on the unplaced lane"))
    present = {sig[1] for sig in graph.arrays.signatures}
    risky = present & (CONTROL_FLOW | SEQUENCE_OPS | {"EPContext"})
    forced = set(unplaceable)
    for node in (graph.nodes if risky else ()):
        kind = _blocker_kind(graph, node)
        # control flow and sequences execute where a provider claims them (hetero_explore.kernels.host.control,
        # hetero_explore.kernels.host.sequences); a node no provider claims still blocks, with the reasons
        if kind in ("control-flow", "sequence") and node.id not in forced:
            continue
        reasons = "; ".join(f"{p}: {r}" for p, r in (declined[node.id] or {}).items()) or "no provider"
        if kind == "control-flow":
            out.append(Blocker(kind, node.name, f"{node.op_type} (control flow) is not executed here: no "
                               f"provider claims it ({reasons}); unroll it at export, or run this model "
                               "with onnxruntime"))
        elif kind == "sequence":
            out.append(Blocker(kind, node.name, f"{node.op_type} produces or consumes a sequence, and no "
                               f"provider claims it ({reasons}); sequences run on the CPU provider"))
        elif kind == "ep-context":
            out.append(Blocker(kind, node.name, "EPContext nodes hold another runtime's compiled "
                               "binary; it cannot be executed here. Use the model before compilation"))
    # run-time shapes come from onnx's per-node inference (hetero_explore.runner.shapes), which cannot
    # see into subgraphs nor count a data-dependent split: such a node whose output shapes are
    # not known at load time fails closed here rather than at run time
    for node in (graph.nodes if present & RUNTIME_SHAPE_UNSUPPORTED else ()):
        why = runtime_shape_blocker(graph, node)
        if why:
            out.append(Blocker("dynamic-shape", node.name, why))
    # symbolic and data-dependent shapes execute: the node runner computes them at run time
    # (hetero_explore.runner.shapes); a value whose element type is unknown cannot be allocated
    sym = [n for n in graph.symbolic_values if graph.values[n].kind != "initializer"
           and graph.values[n].dtype is None]
    if sym:
        head = ", ".join(repr(s) for s in sym[:5]) + (" ..." if len(sym) > 5 else "")
        out.append(Blocker("symbolic-shape", sym[0],
                           f"{len(sym)} value(s) have an unknown element type ({head}); shapes are computed at "
                           "run time, element types must be known when the model is loaded (declare them "
                           "in the model)"))
    return out


# -- public entry points ------------------------------------------------------------
def plan(graph, providers=("gpu", "cpu"), policy: str = "priority", cost_model=None, *,
         strict: bool = False) -> Plan:
    """Place, partition and plan transfers for ``graph`` on ``providers`` (front = highest priority).

    ``graph`` may be a loaded :class:`Graph` or anything :func:`load_model` accepts.
    Planning never refuses to show a model: a node no provider supports (after
    function inlining and expansion) is placed on the ``unplaced`` lane
    (:class:`~hetero_explore.providers.unplaced.UnplacedLane`, appended to the plan's
    providers) and listed first among the execution blockers with each provider's
    reason, so execution fails closed. With ``strict=True`` such a node raises
    :class:`UnsupportedNodeError` instead. Control flow, sequence and EPContext nodes
    that no provider supports are placed on the last provider and listed as
    execution blockers.

    ``policy`` names a placement policy of :data:`~hetero_explore.planner.policies.POLICIES`:
    ``"priority"`` (first-fit by priority, the default) or ``"min-transfer"`` (may move
    nodes to a lower-priority provider that supports them when the estimate of
    :class:`~hetero_explore.planner.policies.CostModel` ``cost_model`` says it saves time).
    """
    t0 = time.perf_counter()
    refine = get_policy(policy)
    if not isinstance(graph, Graph):
        from ..load.loader import load_model
        graph = load_model(graph)
    provs = resolve_all(providers)
    inlined: list[str] = []
    expanded_roots: dict[str, tuple] = {}  # model node name -> (graph, node id, reasons) before expanding
    graph0 = graph
    no_expand: set[str] = set()   # model nodes whose expansion did not make them placeable
    rounds = 0
    while True:
        rounds += 1
        if rounds > MAX_INLINE_ROUNDS:
            break
        assignment, declined, unplaceable = place(graph, provs)
        fn_keys = []
        to_expand = []
        hard = []
        for nid in unplaceable:
            node = graph.nodes[nid]
            if graph.function_for(node) is not None:
                key = (node.domain, node.op_type)
                if key not in fn_keys:
                    fn_keys.append(key)
            elif _blocker_kind(graph, node) is None:
                (hard if node.name in no_expand or expandable(graph, node) else to_expand).append(nid)
        if fn_keys:
            old = graph
            graph = inline_functions(graph, fn_keys)
            carry_expansions(old, graph)
            inlined += [f"{d}::{n}" if d else n for d, n in fn_keys]
            continue
        if hard and (strict or not to_expand):
            if strict:
                raise _hard_error(graph, hard[0], declined, expanded_roots)
            origin = graph.info.get("expanded_from", {})
            roots = {origin.get(graph.nodes[n].name) for n in hard} - {None} - no_expand
            if roots:
                # an expansion that leaves body nodes unplaceable shows worse than the model's
                # own node: plan again from the start without expanding those model nodes
                no_expand |= roots
                graph, inlined, expanded_roots, rounds = graph0, [], {}, 0
                continue
            provs, assignment = _with_unplaced_lane(provs, assignment, hard)
            to_expand = []
        if to_expand:
            for nid in to_expand:
                name = graph.nodes[nid].name
                root = graph.info.get("expanded_from", {}).get(name, name)
                expanded_roots.setdefault(root, (graph, nid, declined[nid]))
            try:
                graph = expand_nodes(graph, to_expand)
            except BodyUnavailable as e:
                nid = next((i for i in to_expand if graph.nodes[i].name == e.node_name), to_expand[0])
                raise _hard_error(graph, nid, declined, expanded_roots,
                                  f"its onnx function body cannot be used: {e}") from e
            continue
        if policy != "priority":
            assignment, declined = refine(graph, provs, assignment, declined, cost_model)
        p = _build(graph, provs, assignment, declined, policy, t0, inlined, unplaceable)
        return _with_children(_with_partition_checks(p), provs, policy)
    raise FunctionInliningError(f"function inlining and expansion did not converge after {MAX_INLINE_ROUNDS} "
                                f"rounds (inlined so far: {inlined}; expanded: "
                                f"{list(dict.fromkeys(graph.info.get('expanded_from', {}).values()))[:5]}); the model's "
                                "functions may be recursive")


def _with_partition_checks(p: Plan) -> Plan:
    """Partitions their provider says it cannot run (``partition_blocker``: an ONNX Runtime EP that
    fails to compile them) become ``ep-compile`` blockers. Asked only of providers that check."""
    from ..providers.base import ExecutionProvider
    from ..providers.virtual import unmask
    checks = {i for i, prov in enumerate(p.providers)
              if getattr(type(unmask(prov)), "partition_blocker", None) not in (None, ExecutionProvider.partition_blocker)}
    if not checks:
        return p
    from dataclasses import replace
    extra = []
    for part in p.partitions:
        if part.provider_index in checks:
            why = p.providers[part.provider_index].partition_blocker(p.graph, part.node_ids, part.outputs,
                                                                     partition=part.id)
            if why:
                extra.append(Blocker("ep-compile", p.graph.nodes[part.node_ids[0]].name, why))
    return replace(p, execution_blockers=tuple(p.execution_blockers) + tuple(extra)) if extra else p


def _with_unplaced_lane(provs, assignment, hard):
    """``provs`` + the unplaced lane, with the ``hard`` nodes assigned to it."""
    from ..providers.unplaced import UnplacedLane, is_unplaced
    if not any(is_unplaced(p) for p in provs):
        provs = [*provs, UnplacedLane()]
    assignment = assignment.copy()
    assignment[np.asarray(hard, dtype=np.int64)] = len(provs) - 1
    return provs, assignment


def _with_children(p: Plan, provs, policy: str) -> Plan:
    """Control-flow hook: the child plans of the subgraphs (over the same providers), and their
    blockers, attached to the plan (see :mod:`hetero_explore.planner.children`)."""
    ops = {sig[1] for sig in p.graph.arrays.signatures}
    if not (getattr(p.graph, "has_implicit_inputs", True) or ops & (CONTROL_FLOW | {"SequenceMap"})):
        return p
    from dataclasses import replace

    from .children import plan_children   # (it plans each subgraph with plan, given below)
    t = time.perf_counter()
    forced = frozenset(p.graph.nodes[i].name for i in p.forced)
    children, blockers = plan_children(p.graph, provs, policy, blocked=forced, make_plan=plan)
    return replace(p, children=children, execution_blockers=tuple(p.execution_blockers) + tuple(blockers),
                   plan_seconds=p.plan_seconds + time.perf_counter() - t)


def _hard_error(graph: Graph, nid: int, declined, expanded_roots: dict, note: str = "") -> UnsupportedNodeError:
    """The error for a node no provider supports. A node that came from expanding a
    model node's onnx function body is reported as that model node (with the reasons
    the providers gave for it), naming the body's op that no provider supports."""
    node = graph.nodes[nid]
    root = graph.info.get("expanded_from", {}).get(node.name)
    if root is None or root not in expanded_roots:
        why = expandable(graph, node)
        if not note and why and "needs opset" in why:
            note = why
        return _unsupported_error(graph, node, declined[nid], note)
    g0, rid, reasons = expanded_roots[root]
    inner = "; ".join(f"{p}: {r}" for p, r in declined[nid].items())
    note = (f"its onnx function body was expanded, but no provider supports the body's node {node.name!r} "
            f"(op {node.op_type}: {inner})" + (f"; {note}" if note else ""))
    return _unsupported_error(g0, g0.nodes[rid], reasons, note)


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
