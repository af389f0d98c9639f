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
from .plan import Plan


def _ep_of(provider) -> tuple[str, str]:
    """(EP name, device type) of a plan's provider: ORT's for ``ort:`` providers, else the
    provider's own name and device."""
    from ..providers.virtual import unmask
    p = provider
    while unmask(p) is not p:
        p = unmask(p)
    dev = str(p.device).split(":")[0].upper()
    return getattr(p, "ep", p.name), dev


def to_ort_assignment(plan: Plan) -> list[dict]:
    """One dict per partition, in the plan's order: ``ep_name``, ``device_type``, ``provider`` (the
    plan's provider name), ``nodes`` (node names as ORT sees the exported graph)."""
    from ..providers.ort import node_names
    names = node_names(plan.graph)
    out = []
    for part in plan.partitions:
        ep, dev = _ep_of(plan.providers[part.provider_index])
        out.append({"ep_name": ep, "device_type": dev, "provider": part.provider,
                    "nodes": [names[i] for i in part.node_ids]})
    return out


def plan_from_ort(model, providers=("ort:cpu",), *, input_shapes=None) -> Plan:
    """The plan of what one real ORT session does with ``model`` (a path, ModelProto, bytes or a
    loaded :class:`~hetero_explore.ir.graph.Graph`) given ``providers`` (``ort:`` names, in
    priority order; ORT adds its CPU EP as fallback). The session runs with ORT's graph
    optimisations off, so that its nodes are the loaded graph's; the EPs it used become the plan's
    providers, each claiming exactly its nodes."""
    from ..ir.graph import Graph
    from ..providers.ort import AssignedProvider, node_names, session_assignment
    from .core import plan as make_plan
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
    from .core import plan as make_plan
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
