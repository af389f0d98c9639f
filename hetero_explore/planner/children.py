"""Child plans: the subgraphs of every control node planned over the same providers (masks
included) and policy as their parent, keyed by subgraph path (``If_0/then_branch``,
``Loop_3/body/If_1/else_branch``). :meth:`Plan.children` holds them; their execution blockers
(other than symbolic shapes, which the run resolves) block the parent."""

from __future__ import annotations

from ..ir.errors import HeteroExploreError
from ..ir.graph import Graph
from ..load.subgraphs import child_graph
from .plan import Blocker


def subgraph_path(node, attr: str, prefix: str = "") -> str:
    return f"{prefix}{node.name}/{attr}"


# -- child plans ------------------------------------------------------------------------------
def plan_children(graph: Graph, providers, policy: str = "priority", prefix: str = "",
                  blocked: frozenset = frozenset(), *, make_plan) -> tuple[dict, list]:
    """Plans of the subgraphs of every control node of ``graph`` over ``providers``:
    ({path: Plan}, blockers of the parent from them). A subgraph that cannot be planned is a
    blocker, not an error, so that the model still shows; nodes named in ``blocked`` (already
    blockers of the parent: no provider claims them) add no blockers of their subgraphs.
    ``make_plan``: the planner's ``plan`` (the planner gives it: it plans each child as it plans
    its parent)."""
    children: dict = {}
    blockers: list = []
    for node in graph.nodes:
        for attr, sub in node.subgraphs:
            path = subgraph_path(node, attr, prefix)
            try:
                g = child_graph(graph, sub, where=path)
                p = make_plan(g, providers, policy)
            except HeteroExploreError as e:
                if node.name not in blocked:
                    blockers.append(Blocker("control-flow", path, f"the subgraph cannot be planned: {e}"))
                continue
            children[path] = p
            if node.name in blocked:
                continue
            for b in p.execution_blockers:
                if b.kind == "symbolic-shape":
                    continue  # subgraphs are specialised to their run-time shapes
                where = b.where if b.where.startswith(path + "/") else f"{path}/{b.where}"
                blockers.append(Blocker(b.kind, where, b.detail))
    return children, blockers


def walk_children(plan, prefix: str = ""):
    """(path, plan) of every nested child plan, depth first (paths are absolute)."""
    for path, child in getattr(plan, "children", {}).items():
        yield path, child
        yield from walk_children(child)
