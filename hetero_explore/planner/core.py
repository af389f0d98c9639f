"""plan(): placement, convex partitions, ordering, transfers, validation."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from ..errors import FunctionInliningError, HeterogeneousExecutionUnsupported, PlanningError, UnsupportedNodeError
from ..expand import BodyUnavailable, carry_expansions, expand_nodes, expandable
from ..ir import Graph
from ..providers import resolve_all
from ..providers.base import node_context, transfer_kind
from .arrays import context_classes, graph_arrays
from .partition import convex_partitions, lower_bounds, order_partitions
from .plan import Blocker, ConvexitySplit, Partition, Plan, Transfer
from .policies import get_policy

CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})
SEQUENCE_OPS = frozenset({"SequenceConstruct", "SequenceAt", "SequenceEmpty", "SequenceInsert",
                          "SequenceErase", "SequenceLength", "SequenceMap", "SplitToSequence",
                          "ConcatFromSequence", "Optional", "OptionalGetElement", "OptionalHasElement"})
MAX_INLINE_ROUNDS = 16
MAX_SPLIT_EXPLANATIONS = 64


# -- placement -------------------------------------------------------------------
def _blocker_kind(graph: Graph, node) -> str | None:
    if node.op_type in CONTROL_FLOW and node.domain == "":
        return "control-flow"
    if node.op_type in SEQUENCE_OPS and node.domain == "":
        return "sequence"
    if node.op_type == "EPContext":
        return "ep-context"
    return None


def _cache_mode(p, node) -> int:
    """How far one answer of ``p`` for ``node`` carries: SIG (every node of its
    signature), CTX (every node of its context class) or NODE (this node only)."""
    f = getattr(p, "signature_cacheable", None)
    if f is not None and f(node):
        return SIG
    f = getattr(p, "context_cacheable", None)
    if f is not None and f(node):
        return CTX
    return NODE


SIG, CTX, NODE = 0, 1, 2


def _ask(p, node, ctx, reasons) -> bool:
    try:
        m = p.supports(ctx)
    except Exception as e:  # a provider's oracle must not take the planner down
        reasons[p.name] = f"capability check failed: {type(e).__name__}: {e}"
        return False
    if m.supported:
        return True
    reasons[p.name] = m.reason or "declined"
    return False


def place(graph: Graph, providers) -> tuple[np.ndarray, list[dict], list[int]]:
    """Priority first-fit. Returns (assignment, declined-reasons, unplaceable node ids).

    A provider is asked as few times as its answers allow: once per signature
    (domain, op type, opset, input dtypes) when it declares
    ``signature_cacheable(node)``; once per context class (the same, plus
    attributes, shapes and constant inputs) when it declares
    ``context_cacheable(node)`` and accepts (a refusal is asked again per node, so
    that its reason names the right node); otherwise once per node. Masks are
    cacheable per signature for the op types they deny, whatever the provider below."""
    arr = graph_arrays(graph)
    nodes = graph.nodes
    n_prov = len(providers)
    assignment = np.full(arr.n_nodes, -1, np.int64)
    declined: list = [None] * arr.n_nodes
    by_sig = np.argsort(arr.node_sig, kind="stable")
    counts = np.bincount(arr.node_sig, minlength=len(arr.signatures)) if arr.n_nodes else np.zeros(0, np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)]).tolist()
    for s in range(len(arr.signatures)):
        members = by_sig[starts[s]:starts[s + 1]]
        rep = nodes[int(members[0])]
        # cohorts: (node ids, reasons shared by them, a context built for the first one)
        cohorts = [(members, {})]
        pos = None  # position of each member within ``members``
        for pi, p in enumerate(providers):
            mode = _cache_mode(p, rep)
            nxt = []
            for ids, reasons in cohorts:
                if mode == CTX:
                    if pos is None:
                        pos = {nid: k for k, nid in enumerate(members.tolist())} if len(ids) != len(members) \
                            else None
                    all_cls = context_classes(graph, arr, s, members)
                    cls = all_cls if len(ids) == len(members) else all_cls[[pos[i] for i in ids.tolist()]]
                    if (cls < 0).any():
                        groups = [ids]  # some node is not comparable: ask one by one
                        mode_c = NODE
                    else:
                        _, first, inv = np.unique(cls, return_index=True, return_inverse=True)
                        order = np.argsort(first, kind="stable")
                        groups = [ids[inv == k] for k in order] if len(order) > 1 else [ids]
                        mode_c = CTX
                else:
                    groups, mode_c = [ids], mode
                for grp in groups:
                    if mode_c == NODE:
                        for nid in grp.tolist():
                            r = dict(reasons)
                            if _ask(p, nodes[nid], node_context(graph, nodes[nid]), r):
                                assignment[nid] = pi
                                declined[nid] = r
                            else:
                                nxt.append((np.asarray([nid]), r))
                        continue
                    head = nodes[int(grp[0])]
                    r = dict(reasons)
                    if _ask(p, head, node_context(graph, head), r):
                        assignment[grp] = pi
                        for nid in grp.tolist():
                            declined[nid] = reasons
                    elif mode_c == SIG or len(grp) == 1:
                        nxt.append((grp, r))
                    else:  # a refusal may name the node: ask the others themselves
                        nxt.append((grp[:1], r))
                        for nid in grp[1:].tolist():
                            r2 = dict(reasons)
                            if _ask(p, nodes[nid], node_context(graph, nodes[nid]), r2):
                                assignment[nid] = pi
                                declined[nid] = r2
                            else:
                                nxt.append((np.asarray([nid]), r2))
            cohorts = nxt
            if not cohorts:
                break
        for ids, reasons in cohorts:
            for nid in ids.tolist():
                declined[nid] = reasons
    unplaceable = np.flatnonzero(assignment < 0).tolist()
    assignment[assignment < 0] = n_prov - 1
    return assignment, declined, unplaceable


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


def _build(graph: Graph, providers, assignment, declined, policy, t0, inlined, unplaceable) -> Plan:
    arr = graph_arrays(graph)
    n = arr.n_nodes
    group_of = convex_partitions(assignment, arr, len(providers))
    bounds_lb = lower_bounds(assignment, arr, len(providers))
    node_part, n_parts = order_partitions(group_of, assignment, arr)
    names = arr.value_names
    vbytes = arr.value_bytes.tolist()

    # members of each partition, ascending node ids
    by_part = np.argsort(node_part, kind="stable")
    counts = np.bincount(node_part, minlength=n_parts) if n else np.zeros(0, np.int64)
    bounds = np.concatenate([[0], np.cumsum(counts)]).tolist()

    src, dst, val = arr.use_src, arr.use_dst, arr.use_val
    src_part = np.where(src >= 0, node_part[np.maximum(src, 0)] if n else src, -1)
    dst_part = node_part[dst] if n else dst
    crossing = src_part != dst_part
    # partition inputs: (dst partition, value), in first-use order
    ins = _unique_pairs(dst_part[crossing], val[crossing])
    # partition outputs: (src partition, value) for uses elsewhere, plus graph outputs
    internal_cross = crossing & (src >= 0)
    out_p = [src_part[internal_cross]]
    out_v = [val[internal_cross]]
    gprod = arr.value_producer[arr.output_vals]
    has = gprod >= 0
    out_p.append(node_part[gprod[has]] if n else gprod[has])
    out_v.append(arr.output_vals[has])
    outs = _unique_pairs(np.concatenate(out_p), np.concatenate(out_v), sort_by_value=True)

    partitions = []
    by_part_l = by_part.tolist()
    assign_l = np.asarray(assignment).tolist()
    prov_info = [(p.name, str(p.device)) for p in providers]
    for pid in range(n_parts):
        members = tuple(by_part_l[bounds[pid]:bounds[pid + 1]])
        pi = assign_l[members[0]]
        pname, pdev = prov_info[pi]
        iv = ins.get(pid, ())
        ov = outs.get(pid, ())
        partitions.append(Partition(pid, pname, pi, pdev, members,
                                    tuple(names[v] for v in iv), tuple(names[v] for v in ov),
                                    _bytes(vbytes, iv), _bytes(vbytes, ov)))

    # transfers: one per (value, destination provider); ordered by first destination partition
    a = np.asarray(assignment)
    xp = (src >= 0) & (a[np.maximum(src, 0)] != a[dst]) if n else np.zeros(0, bool)
    t_val, t_dprov, t_dpart = val[xp], a[dst[xp]], dst_part[xp]
    transfers: list[Transfer] = []
    if len(t_val):
        key = t_val * len(providers) + t_dprov
        order = np.lexsort((t_dpart, key))
        key_s, part_s = key[order], t_dpart[order]
        starts = np.flatnonzero(np.concatenate([[True], key_s[1:] != key_s[:-1]]))
        ends = np.concatenate([starts[1:], [len(key_s)]])
        recs = []
        key_l, part_l = key_s.tolist(), part_s.tolist()
        for st, en in zip(starts.tolist(), ends.tolist()):
            v, dp = divmod(key_l[st], len(providers))
            dparts = (part_l[st],) if en - st == 1 else tuple(dict.fromkeys(part_l[st:en]))
            recs.append((dparts[0], v, dp, dparts))
        recs.sort()
        kinds = {(i, j): transfer_kind(providers[i].device, providers[j].device)
                 for i in range(len(providers)) for j in range(len(providers))}
        dtype_names: dict = {}
        vprod = arr.value_producer.tolist()
        node_part_l = node_part.tolist()
        for _, v, dp, dparts in recs:
            value = graph.values[names[v]]
            sp_i = assign_l[vprod[v]]
            dt = value.dtype
            if dt is not None and dt not in dtype_names:
                dtype_names[dt] = dt.name
            transfers.append(Transfer(
                names[v], None if dt is None else dtype_names[dt], value.shape,
                None if vbytes[v] < 0 else vbytes[v], prov_info[sp_i][0], prov_info[dp][0], prov_info[sp_i][1],
                prov_info[dp][1], kinds[(sp_i, dp)], node_part_l[vprod[v]], dparts))

    blockers = _blockers(graph, providers, unplaceable, declined)
    return Plan(graph=graph, providers=tuple(providers), policy=policy,
                assignment=tuple(np.asarray(assignment).tolist()), declined=tuple(declined),
                partitions=tuple(partitions), node_partition=tuple(node_part.tolist()),
                transfers=tuple(transfers), execution_blockers=tuple(blockers),
                inlined_functions=tuple(inlined), plan_seconds=time.perf_counter() - t0,
                forced=tuple(unplaceable), lower_bounds=tuple(bounds_lb.tolist()))


def _unique_pairs(part: np.ndarray, val: np.ndarray, sort_by_value: bool = False) -> dict[int, list[int]]:
    """partition -> distinct values, in first-occurrence order (or value order)."""
    out: dict[int, list[int]] = {}
    if len(part) == 0:
        return out
    key = part.astype(np.int64) * (int(val.max()) + 1) + val
    _, first = np.unique(key, return_index=True)
    if not sort_by_value:
        first = np.sort(first)
    for pp, vv in zip(part[first].tolist(), val[first].tolist()):
        out.setdefault(pp, []).append(vv)
    if sort_by_value:
        for k in out:
            out[k].sort()
    return out


def _bytes(vbytes: list, vals) -> int | None:
    total = 0
    for v in vals:
        b = vbytes[v]
        if b < 0:
            return None
        total += b
    return total


def convexity_splits(plan: Plan, limit: int = MAX_SPLIT_EXPLANATIONS) -> tuple[ConvexitySplit, ...]:
    """Why adjacent same-provider nodes stayed in different partitions: for each such
    partition pair, a path that would leave the merged partition and re-enter it."""
    graph = plan.graph
    preds, succs = graph.adjacency()
    node_partition, assignment = plan.node_partition, plan.assignment
    splits: list[ConvexitySplit] = []
    seen_pairs = set()
    budget = [200_000]
    for v in range(len(graph.nodes)):
        for u in preds[v]:
            if assignment[u] == assignment[v] and node_partition[u] != node_partition[v]:
                pair = (node_partition[u], node_partition[v])
                if pair in seen_pairs or len(splits) >= limit:
                    continue
                seen_pairs.add(pair)
                path = _escape_path(u, v, node_partition, succs, budget)
                if path:
                    splits.append(ConvexitySplit(pair[0], pair[1], tuple(graph.nodes[i].name for i in path)))
    return tuple(splits)


def _escape_path(u: int, v: int, node_partition, succs, budget) -> list[int] | None:
    """A path u → (outside u's partition) → ... → v: why u and v could not merge."""
    pu = node_partition[u]
    start = [w for w in succs[u] if node_partition[w] != pu and w != v]
    if not start:
        return None
    prev = {w: u for w in start}
    q = deque(start)
    while q and budget[0] > 0:
        budget[0] -= 1
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
            if w < v:
                q.append(w)
    return None


def _blockers(graph: Graph, providers, unplaceable, declined) -> list[Blocker]:
    out: list[Blocker] = []
    for nid in unplaceable:          # first: what no provider takes
        node = graph.nodes[nid]
        if _blocker_kind(graph, node) is None:
            reasons = "; ".join(f"{p}: {r}" for p, r in declined[nid].items())
            out.append(Blocker("unplaceable", node.name, f"no provider supports {node.op_type} ({reasons}); "
                               "it sits on the unplaced lane"))
    present = {sig[1] for sig in graph_arrays(graph).signatures}
    risky = present & (CONTROL_FLOW | SEQUENCE_OPS | {"EPContext"})
    forced = set(unplaceable)
    for node in (graph.nodes if risky else ()):
        kind = _blocker_kind(graph, node)
        # control flow and sequences execute where a provider claims them (hetero_explore.control,
        # hetero_explore.sequences); a node no provider claims still blocks, with the reasons
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
    # symbolic and data-dependent shapes execute: the node runner computes them at run time
    # (hetero_explore.shapes); a value whose element type is unknown cannot be allocated
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
    ``"priority"`` (the seed's first-fit, the default) or ``"min-transfer"`` (may move
    nodes to a lower-priority provider that supports them when the estimate of
    :class:`~hetero_explore.planner.policies.CostModel` ``cost_model`` says it saves time).
    """
    t0 = time.perf_counter()
    refine = get_policy(policy)
    if not isinstance(graph, Graph):
        from ..loader import load_model
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
            graph = _inline(graph, fn_keys)
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
        return _with_children(p, provs, policy)
    raise FunctionInliningError(f"function inlining and expansion did not converge after {MAX_INLINE_ROUNDS} "
                                f"rounds (inlined so far: {inlined}; expanded: "
                                f"{list(dict.fromkeys(graph.info.get('expanded_from', {}).values()))[:5]}); the model's "
                                "functions may be recursive")


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
    blockers, attached to the plan (see :mod:`hetero_explore.control`)."""
    if not any(n.implicit_inputs or n.op_type in CONTROL_FLOW or n.op_type == "SequenceMap"
               for n in p.graph.nodes):
        return p
    from dataclasses import replace

    from ..control import plan_children
    t = time.perf_counter()
    forced = frozenset(p.graph.nodes[i].name for i in p.forced)
    children, blockers = plan_children(p.graph, provs, policy, blocked=forced)
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
