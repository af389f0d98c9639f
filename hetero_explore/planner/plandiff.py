"""Plan-vs-plan diffs: what moved, which partitions and transfers came and went, and the
transfer bytes — for the explorer's Changes view and for diffing two sweeps.

A plan's :func:`plan_digest` is plain data (node names, providers, transfers), so a diff
needs neither plan: :func:`compare_digests` is the one diff, and :func:`compare_plans` is it
applied to two plans' digests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..ir import display


@dataclass(frozen=True)
class PlanComparison:
    """What changed between two plans (``a`` → ``b``)."""

    a: Any
    """The earlier plan."""
    b: Any
    """The later plan."""
    moved: Any
    """DataFrame: node, op_type, from_provider, to_provider (nodes matched by name)."""
    partitions_added: Any
    """DataFrame of partitions in ``b`` not in ``a`` (same provider and nodes)."""
    partitions_removed: Any
    """DataFrame of partitions in ``a`` not in ``b``."""
    transfers_added: Any
    """DataFrame of transfers in ``b`` not in ``a`` (same value, source and destination)."""
    transfers_removed: Any
    """DataFrame of transfers in ``a`` not in ``b``."""
    bytes_before: int | None
    """Bytes moved by ``a``'s transfers (None when a shape is unknown)."""
    bytes_after: int | None
    """Bytes moved by ``b``'s transfers."""

    @property
    def bytes_delta(self) -> int | None:
        if self.bytes_before is None or self.bytes_after is None:
            return None
        return self.bytes_after - self.bytes_before

    @property
    def changed(self) -> bool:
        return bool(len(self.moved) or len(self.partitions_added) or len(self.partitions_removed)
                    or len(self.transfers_added) or len(self.transfers_removed))

    def summary(self) -> str:
        if not self.changed:
            return "no change: same placement, partitions and transfers"
        d = self.bytes_delta
        delta = "unknown" if d is None else f"{d:+,d} B"
        return (f"{len(self.moved)} node(s) moved; partitions +{len(self.partitions_added)} "
                f"-{len(self.partitions_removed)}; transfers +{len(self.transfers_added)} "
                f"-{len(self.transfers_removed)}; transfer bytes {_fmt_bytes(self.bytes_before)} → "
                f"{_fmt_bytes(self.bytes_after)} ({delta})" + self._policy_note())

    def _policy_note(self) -> str:
        """What a change of placement policy saved, by the planner's cost model."""
        pa, pb = getattr(self.a, "policy", None), getattr(self.b, "policy", None)
        if pa == pb or not hasattr(self.a, "estimate") or not hasattr(self.b, "estimate"):
            return ""
        ea, eb = self.a.estimate(), self.b.estimate()
        return (f"; policy {pa} → {pb}: estimated time {ea['total_seconds'] * 1e3:.3f} → "
                f"{eb['total_seconds'] * 1e3:.3f} ms (transfers {ea['transfer_seconds'] * 1e3:.3f} → "
                f"{eb['transfer_seconds'] * 1e3:.3f} ms)")

    def to_dict(self) -> dict:
        return {"summary": self.summary(), "moved": self.moved.to_dict("records"),
                "partitions_added": self.partitions_added.to_dict("records"),
                "partitions_removed": self.partitions_removed.to_dict("records"),
                "transfers_added": self.transfers_added.to_dict("records"),
                "transfers_removed": self.transfers_removed.to_dict("records"),
                "bytes_before": self.bytes_before, "bytes_after": self.bytes_after,
                "bytes_delta": self.bytes_delta}

    def __repr__(self) -> str:
        return f"PlanComparison({self.summary()})"

    def _repr_html_(self) -> str:
        return display.render("html", self)


def _fmt_bytes(n) -> str:
    from ..ir.units import human_bytes
    return "unknown" if n is None else human_bytes(n)


def plan_digest(plan) -> dict:
    """What :func:`compare_digests` compares, as plain JSON-able data: placement (node name →
    [op type, provider]), partitions ([provider, device, node names]) and transfers
    ([value, from, to, kind, bytes]), and the transfer bytes. A sweep keeps one per row, so
    two sweeps can be diffed without their plans."""
    nodes = plan.graph.nodes
    return {
        "placement": {n.name: [n.op_type, plan.providers[plan.assignment[n.id]].name] for n in nodes},
        "partitions": [[part.provider, part.device, [nodes[i].name for i in part.node_ids]]
                       for part in plan.partitions],
        "transfers": [[t.value, t.src_provider, t.dst_provider, t.kind, t.nbytes] for t in plan.transfers],
        "transfer_bytes": plan.transfer_bytes,
    }


def compare_digests(da: dict, db: dict, a=None, b=None) -> PlanComparison:
    """What changed from digest ``da`` to ``db`` (see :func:`plan_digest`); ``a``/``b`` are
    the plans themselves when at hand (kept on the result)."""
    import pandas as pd

    pa, pb = da["placement"], db["placement"]
    moved = [{"node": name, "op_type": op, "from_provider": pa[name][1], "to_provider": prov}
             for name, (op, prov) in pb.items() if name in pa and pa[name][1] != prov]

    def parts(d):
        out = {}
        for pid, (prov, device, names) in enumerate(d["partitions"]):
            out[(prov, tuple(names))] = {
                "partition": pid, "provider": prov, "device": device, "n_nodes": len(names),
                "first_node": names[0] if names else "", "last_node": names[-1] if names else ""}
        return out

    def transfers(d):
        return {(v, src, dst): {"value": v, "from_provider": src, "to_provider": dst, "kind": kind,
                                "bytes": nbytes} for v, src, dst, kind, nbytes in d["transfers"]}

    part_cols = ["partition", "provider", "device", "n_nodes", "first_node", "last_node"]
    tr_cols = ["value", "from_provider", "to_provider", "kind", "bytes"]
    ka, kb = parts(da), parts(db)
    ta, tb = transfers(da), transfers(db)
    return PlanComparison(
        a=a, b=b,
        moved=pd.DataFrame(moved, columns=["node", "op_type", "from_provider", "to_provider"]),
        partitions_added=pd.DataFrame([v for k, v in kb.items() if k not in ka], columns=part_cols),
        partitions_removed=pd.DataFrame([v for k, v in ka.items() if k not in kb], columns=part_cols),
        transfers_added=pd.DataFrame([v for k, v in tb.items() if k not in ta], columns=tr_cols),
        transfers_removed=pd.DataFrame([v for k, v in ta.items() if k not in tb], columns=tr_cols),
        bytes_before=da["transfer_bytes"], bytes_after=db["transfer_bytes"])


def compare_plans(a, b) -> PlanComparison:
    """What changed from plan ``a`` to plan ``b``: nodes that moved (matched by
    name), partitions and transfers added or removed, and the transfer-bytes delta."""
    return compare_digests(plan_digest(a), plan_digest(b), a, b)
