"""Plans and ONNX Runtime, both ways.

* :func:`to_ort_assignment` — a plan in the shape of ORT's graph assignment info
  (``InferenceSession.get_provider_graph_assignment_info()``): one entry per partition with
  the EP name, its device type and its node names (as :func:`~hetero_explore.providers.ort.export_nodes`
  names them, the names ORT sees).
* :func:`plan_from_ort` — what a real ORT session did with a model, as a :class:`Plan` (each
  EP a provider claiming exactly the nodes ORT assigned it), so that the plan-vs-plan diff
  (:func:`~hetero_explore.planner.plandiff.compare_plans`, the app's Changes view) shows what
  the explorer planned against what ORT did.
* :func:`move_failed` — a plan whose ``ep-compile`` blockers (partitions an EP claimed and then
  failed to compile) are moved to the next provider: the EP declines those nodes with its
  own message, and the rest is planned as before.
"""

from __future__ import annotations

from ..ir.errors import PlanningError
from .core import plan as make_plan
from .plan import Plan, _ep_of, to_ort_assignment  # noqa: F401  (to_ort_assignment: re-exported)


def plan_from_ort(model, providers=("ort:cpu",), *, input_shapes=None) -> Plan:
    """The plan of what one real ORT session does with ``model`` (a path, ModelProto, bytes or a
    loaded :class:`~hetero_explore.ir.graph.Graph`) given ``providers`` (``ort:`` names, in
    priority order; ORT adds its CPU EP as fallback). The session runs with ORT's graph
    optimisations off, so that its nodes are the loaded graph's; the EPs it used become the plan's
    providers, each claiming exactly its nodes."""
    from ..ir.graph import Graph
    from ..providers.ort import AssignedProvider, node_names, session_assignment
    if isinstance(model, Graph):
        graph = model
    else:
        from ..load.loader import load_model
        graph = load_model(model, input_shapes=input_shapes)
    provs, got = session_assignment(graph, providers)
    placed = {n: ep for ep, ns in got.items() for n in ns}
    by_ep = {p.ep: p for p in provs}
    out = []
    for ep in list(by_ep) + [e for e in got if e not in by_ep]:
        if ep not in got:
            continue
        p = by_ep.get(ep)
        out.append(AssignedProvider(ep, p.options if p else {}, p.session_settings if p else {}, graph,
                                    set(got[ep]), placed))
    if not out:
        raise PlanningError(f"the ORT session assigned none of the {len(graph.nodes)} node(s) to an EP")
    missing = [n for n in node_names(graph) if n not in placed]
    if missing:
        raise PlanningError(f"ORT's assignment info lists no EP for {len(missing)} node(s) "
                            f"({', '.join(missing[:5])}); it cannot be read as a plan")
    return make_plan(graph, out)


def move_failed(plan: Plan, max_rounds: int = 8) -> Plan:
    """``plan`` re-planned with every partition that has an ``ep-compile`` blocker moved to the next
    provider: its EP declines those nodes with the EP's message (repeated while new partitions fail,
    at most ``max_rounds`` times). A plan without such blockers is returned as it is."""
    from ..providers.base import KernelMatch
    from ..providers.virtual import mask
    declines: dict[int, dict[int, str]] = {}
    p = plan
    for _ in range(max_rounds):
        failed = [b for b in p.execution_blockers if b.kind == "ep-compile"]
        if not failed:
            return p
        first = {p.graph.nodes[part.node_ids[0]].name: part for part in p.partitions}
        for b in failed:
            part = first.get(b.where)
            if part is None:
                continue
            d = declines.setdefault(part.provider_index, {})
            for i in part.node_ids:
                d[i] = f"moved off: {b.detail}"
        provs = []
        for i, prov in enumerate(plan.providers):
            if i in declines:
                reasons = dict(declines[i])

                def check(ctx, reasons=reasons):
                    why = reasons.get(ctx.node.id) if ctx.graph is plan.graph else None
                    return KernelMatch.no(why) if why else KernelMatch.yes()
                prov = mask(prov, check=check)
            provs.append(prov)
        from ..providers.unplaced import is_unplaced
        p = make_plan(plan.graph, [q for q in provs if not is_unplaced(q)], policy=plan.policy)
    return p


# -- doc-table profiles against their real EPs ------------------------------------------------
#: doc-table profile → the real EP it describes, as an ``ort:`` name
PROFILE_EPS = {"openvino": "ort:openvino", "ort-cuda": "ort:cuda", "tensorrt": "ort:tensorrt",
               "directml": "ort:directml", "coreml": "ort:coreml", "coreml-mlprogram": "ort:coreml?ModelFormat=MLProgram",
               "nnapi": "ort:nnapi", "qnn": "ort:qnn"}


def claimed(graph, provider) -> set[int]:
    """Node ids ``provider`` claims on ``graph`` (asked as the only provider)."""
    from .capability import place
    _, _, unplaceable = place(graph, [provider])
    return set(range(len(graph.nodes))) - set(unplaceable)


def compare_claims(graph, table_provider, ep_provider) -> dict:
    """Precision / recall of a table's claims against an EP's on ``graph`` (the EP is the truth),
    and the op types where they disagree."""
    import collections
    t, e = claimed(graph, table_provider), claimed(graph, ep_provider)
    tp = len(t & e)
    ops = collections.Counter()
    for i in t - e:
        ops[(graph.nodes[i].op_type, "table yes, EP no")] += 1
    for i in e - t:
        ops[(graph.nodes[i].op_type, "table no, EP yes")] += 1
    return {"nodes": len(graph.nodes), "table": len(t), "ep": len(e), "both": tp,
            "precision": tp / len(t) if t else None, "recall": tp / len(e) if e else None,
            "disagree": {f"{op} ({how})": n for (op, how), n in ops.most_common()}}


def claims_side_by_side(graph, table_provider, ep_provider):
    """What a doc table says and what the real EP says, per op type of ``graph``: one row per op
    type (``op_type``, ``nodes``, ``table_claims``, ``ep_claims``, ``agree``), disagreements first."""
    import pandas as pd
    t, e = claimed(graph, table_provider), claimed(graph, ep_provider)
    rows: dict = {}
    for n in graph.nodes:
        r = rows.setdefault(n.op_type, {"op_type": n.op_type, "nodes": 0, "table_claims": 0, "ep_claims": 0})
        r["nodes"] += 1
        r["table_claims"] += n.id in t
        r["ep_claims"] += n.id in e
    df = pd.DataFrame(list(rows.values()), columns=["op_type", "nodes", "table_claims", "ep_claims"])
    df["agree"] = df["table_claims"] == df["ep_claims"]
    return df.sort_values(["agree", "op_type"]).reset_index(drop=True)


def real_ep_of(provider) -> str | None:
    """The ``ort:`` name of the real EP a doc-table profile provider describes, or None."""
    from ..providers.profiles import ProfileProvider
    from ..providers.virtual import unmask
    p = unmask(provider)
    if not isinstance(p, ProfileProvider):
        return None
    return PROFILE_EPS.get(p.profile.name)
