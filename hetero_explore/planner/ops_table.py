"""The per-op table of a plan: op type × provider node counts, shares, and decline reasons.

What ExecuTorch's ``get_operator_delegation_dataframe()`` and onnxruntime's
"assigned 3/412 nodes (0.7%) … [ops: …]" line give, for any provider list: one row per
op type, a node-count column per provider, the share of the model's nodes that op type is,
the share of its nodes on the first (highest-priority) provider, and, per provider that
declined some of its nodes, the reasons it gave (deduplicated).
"""

from __future__ import annotations


def share(n: int, total: int) -> float:
    """``n / total`` as a percentage (0.0 for an empty model)."""
    return 100.0 * n / total if total else 0.0


def ops_df(plan):
    """One row per op type (most nodes first): ``op_type``, ``domain``, ``nodes``,
    ``share_of_nodes`` (%), one count column per provider (in priority order),
    ``on_first`` (% of this op's nodes on the highest-priority provider) and ``declined``
    (``provider: reason; reason`` per provider that declined some of its nodes, ``|``
    between providers; empty when none did)."""
    import pandas as pd
    names = [p.name for p in plan.providers]
    rows: dict[tuple[str, str], dict] = {}
    for n in plan.graph.nodes:
        key = (n.domain or "ai.onnx", n.op_type)
        r = rows.get(key)
        if r is None:
            r = rows[key] = {"op_type": n.op_type, "domain": key[0], "nodes": 0,
                             **{name: 0 for name in names}, "declined": {}}
        r["nodes"] += 1
        r[names[plan.assignment[n.id]]] += 1
        for prov, why in dict(plan.declined[n.id]).items():
            reasons = r["declined"].setdefault(prov, [])
            if why not in reasons:
                reasons.append(why)
    total = len(plan.graph.nodes)
    out = []
    for r in rows.values():
        r["share_of_nodes"] = round(share(r["nodes"], total), 1)
        r["on_first"] = round(share(r[names[0]], r["nodes"]), 1) if names else 0.0
        r["declined"] = " | ".join(f"{p}: {'; '.join(w)}" for p, w in r["declined"].items())
        out.append(r)
    out.sort(key=lambda r: (-r["nodes"], r["op_type"], r["domain"]))
    cols = ["op_type", "domain", "nodes", "share_of_nodes", *names, "on_first", "declined"]
    return pd.DataFrame(out, columns=cols)
