"""Plan data: immutable records the planner proposes, and their tables."""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ir import display


@dataclass(frozen=True)
class Partition:
    """A convex set of nodes placed on one provider."""

    id: int
    """Position in the plan's (topological) partition order."""
    provider: str
    """Provider name."""
    provider_index: int
    """Priority of the provider (0 = highest)."""
    device: str
    """Device of the provider, e.g. ``cuda:0``."""
    node_ids: tuple[int, ...]
    """Member node ids, ascending (= topological order)."""
    inputs: tuple[str, ...]
    """Values consumed but not produced inside (graph inputs and initializers included)."""
    outputs: tuple[str, ...]
    """Values produced inside and used outside, or graph outputs."""
    bytes_in: int | None
    """Bytes of ``inputs`` (None when a shape is unknown)."""
    bytes_out: int | None
    """Bytes of ``outputs`` (None when a shape is unknown)."""

    @property
    def n_nodes(self) -> int:
        return len(self.node_ids)


@dataclass(frozen=True)
class Transfer:
    """One copy of a value to a destination provider, deduplicated per (value, destination)."""

    value: str
    """Value name."""
    dtype: str | None
    """dtype name."""
    shape: tuple | None
    """Shape (dims may be symbolic)."""
    nbytes: int | None
    """Bytes moved (None when the shape is not static)."""
    src_provider: str
    """Provider owning the authoritative allocation."""
    dst_provider: str
    """Provider receiving the copy."""
    src_device: str
    dst_device: str
    kind: str
    """``H2D``, ``D2H``, ``D2D``, ``H2H`` or ``same-device`` (two providers on one device)."""
    src_partition: int
    """Producing partition."""
    dst_partitions: tuple[int, ...]
    """Consuming partitions on the destination provider (the first one triggers the copy)."""


@dataclass(frozen=True)
class Blocker:
    """Something execution does not support yet (fail-closed)."""

    kind: str
    """``control-flow``, ``sequence``, ``ep-context``, ``symbolic-shape``, ``unplaceable`` or ``ep-compile``
    (an ONNX Runtime EP failed to compile the partition starting at ``where``)."""
    where: str
    """Node or value name."""
    detail: str
    """What and what to do."""


@dataclass(frozen=True)
class ConvexitySplit:
    """Two same-provider partitions joined by an edge that could not merge."""

    a: int
    """Upstream partition id."""
    b: int
    """Downstream partition id."""
    path: tuple[str, ...]
    """Node names of a path from ``a`` through another partition back into ``b``."""


class PlanTables:
    """The planner's array form of a plan's partitions and transfers: Partition and
    Transfer records are made from it when first read (a plan of 10⁵ nodes has
    thousands of each, and a what-if re-plan often reads only counts)."""

    def __init__(self, graph, providers, arr, part_prov, members, ins, outs, bytes_in, bytes_out, xfer):
        self.graph = graph
        self.providers = providers
        self.arr = arr
        #: provider index of every partition
        self.part_prov = part_prov
        #: (ptr, node ids): members of every partition, ascending, as CSR
        self.members = members
        #: (ptr, value indices): inputs and outputs of every partition, as CSR
        self.ins = ins
        self.outs = outs
        #: bytes of them (-1 when a shape is unknown)
        self.bytes_in = bytes_in
        self.bytes_out = bytes_out
        #: transfers: (value, source provider, destination provider, source partition,
        #: (ptr, destination partitions) CSR), in execution order
        self.xfer = xfer

    @property
    def n_transfers(self) -> int:
        return len(self.xfer[0])

    def partition_counts(self) -> np.ndarray:
        return np.bincount(self.part_prov, minlength=len(self.providers))

    def partitions(self) -> tuple:
        names = self.arr.value_names
        info = [(p.name, str(p.device)) for p in self.providers]
        mp, mi = self.members[0].tolist(), self.members[1].tolist()
        ip, ii = self.ins[0].tolist(), [names[v] for v in self.ins[1].tolist()]
        op, oi = self.outs[0].tolist(), [names[v] for v in self.outs[1].tolist()]
        b_in = [None if b < 0 else b for b in self.bytes_in.tolist()]
        b_out = [None if b < 0 else b for b in self.bytes_out.tolist()]
        return tuple(Partition(k, info[pi][0], pi, info[pi][1], tuple(mi[mp[k]:mp[k + 1]]),
                               tuple(ii[ip[k]:ip[k + 1]]), tuple(oi[op[k]:op[k + 1]]), b_in[k], b_out[k])
                     for k, pi in enumerate(self.part_prov.tolist()))

    def transfers(self) -> tuple:
        from ..providers.base import transfer_kind
        val, sp, dp, spart, (dptr, dparts) = self.xfer
        if not len(val):
            return ()
        provs = self.providers
        info = [(p.name, str(p.device)) for p in provs]
        kinds = {(i, j): transfer_kind(provs[i].device, provs[j].device)
                 for i in range(len(provs)) for j in range(len(provs))}
        names = self.arr.value_names
        values = self.graph.values
        vbytes = self.arr.value_bytes
        dptr_l, dparts_l = dptr.tolist(), dparts.tolist()
        dtype_names: dict = {}
        out = []
        for k, (v, i, j, s, b) in enumerate(zip(val.tolist(), sp.tolist(), dp.tolist(), spart.tolist(),
                                                vbytes[val].tolist())):
            value = values[names[v]]
            dt = value.dtype
            if dt is not None and dt not in dtype_names:
                dtype_names[dt] = dt.name
            out.append(Transfer(names[v], None if dt is None else dtype_names[dt], value.shape,
                                None if b < 0 else b, info[i][0], info[j][0], info[i][1], info[j][1],
                                kinds[(i, j)], s, tuple(dparts_l[dptr_l[k]:dptr_l[k + 1]])))
        return tuple(out)


class _Deferred:
    """A field value that :class:`_LazyField` computes on first read."""

    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn


class _LazyField:
    """A dataclass field that may be given as a :class:`_Deferred` (computed once, on
    first read); any other value is stored as it is. Reads look like plain fields."""

    def __set_name__(self, owner, name):
        self.slot = "_lazy_" + name

    def __get__(self, obj, owner=None):
        if obj is None:
            raise AttributeError(self.slot)  # no default: the field stays required
        v = obj.__dict__[self.slot]
        if type(v) is _Deferred:
            v = v.fn()
            obj.__dict__[self.slot] = v
        return v

    def __set__(self, obj, value):
        obj.__dict__[self.slot] = value

    def ready(self, obj) -> bool:
        return type(obj.__dict__.get(self.slot)) is not _Deferred


@dataclass(frozen=True, eq=False)
class Plan:
    """An immutable heterogeneous execution plan for one graph and provider list."""

    graph: Any
    """The planned :class:`hetero_explore.ir.graph.Graph` (functions may have been inlined)."""
    providers: tuple
    """Providers in priority order."""
    policy: str
    """Placement policy name."""
    assignment: tuple[int, ...]
    """Provider index of every node id."""
    declined: tuple[dict, ...]
    """Per node: provider name → reason, for each higher-priority provider that declined."""
    partitions: tuple[Partition, ...] = _LazyField()
    """Partitions in execution order."""
    node_partition: tuple[int, ...]
    """Partition id of every node id."""
    transfers: tuple[Transfer, ...] = _LazyField()
    """Cross-provider copies in execution order."""
    execution_blockers: tuple[Blocker, ...] = ()
    """What makes execution fail closed."""
    inlined_functions: tuple[str, ...] = ()
    """Model-local functions inlined so that placement could succeed."""
    plan_seconds: float = 0.0
    """Wall time of planning."""
    forced: tuple[int, ...] = field(default=())
    """Nodes no provider supports, placed on the last provider only so that the plan can be shown."""
    lower_bounds: tuple[int, ...] = ()
    """Per provider (priority order): the largest number of separate runs of it along one
    path of the graph, a lower bound on its partition count in any convex partitioning."""
    children: dict = field(default_factory=dict, compare=False)
    """Subgraph path (``If_0/then_branch``) → the child :class:`Plan` of that subgraph, over
    the same providers (see :mod:`hetero_explore.planner.children`); nested children are in theirs."""
    tables: Any = field(default=None, repr=False)
    """The planner's :class:`PlanTables` behind ``partitions`` and ``transfers`` (None
    when they were given as records)."""

    def nested(self):
        """(subgraph path, plan) of this plan (path ``""``) and every nested child plan."""
        out = [("", self)]
        for path, child in self.children.items():
            out += [(path if not sub else f"{path}/{sub}", p) for sub, p in child.nested()]
        return out

    def _tables_first(self, name: str) -> bool:
        """True when ``name`` is still unmaterialised and the tables can answer instead."""
        return self.tables is not None and not type(self).__dict__[name].ready(self)

    @property
    def expansions(self) -> tuple[dict, ...]:
        """Nodes expanded into their onnx function bodies so that placement could succeed
        (see :mod:`hetero_explore.load.expand`): node, op_type, opset, body, body_version,
        nodes (the body's node names), depth, expanded_from (the model node)."""
        return tuple(self.graph.info.get("expansions", ()))

    def expanded_ops(self) -> dict[str, tuple[int, int]]:
        """Op type of each expanded model node → (model nodes expanded, nodes of theirs in the plan)."""
        origin = self.graph.info.get("expanded_from", {})
        out: dict[str, list[int]] = {}
        for r in self.expansions:
            if r["depth"] == 1:
                out.setdefault(r["op_type"], [0, 0])[0] += 1
        op_of = {r["node"]: r["op_type"] for r in self.expansions if r["depth"] == 1}
        for n in self.graph.nodes:
            root = origin.get(n.name)
            if root in op_of:
                out[op_of[root]][1] += 1
        return {k: (v[0], v[1]) for k, v in out.items()}

    @property
    def convexity_splits(self) -> tuple[ConvexitySplit, ...]:
        """Why some adjacent same-provider nodes stayed apart (computed on first use)."""
        cached = self.__dict__.get("_splits")
        if cached is None:
            cached = convexity_splits(self)
            object.__setattr__(self, "_splits", cached)
        return cached

    # -- basics ----------------------------------------------------------------
    @property
    def provider_names(self) -> list[str]:
        return [p.name for p in self.providers]

    def provider_of(self, node_id: int):
        return self.providers[self.assignment[node_id]]

    @property
    def devices(self) -> list[str]:
        used = sorted(set(self.assignment))
        return list(dict.fromkeys(str(self.providers[i].device) for i in used))

    @property
    def is_heterogeneous(self) -> bool:
        return len(set(self.assignment)) > 1

    @property
    def executable(self) -> bool:
        return not self.execution_blockers

    @property
    def transfer_bytes(self) -> int | None:
        if self._tables_first("transfers"):
            b = self.tables.arr.value_bytes[self.tables.xfer[0]]
            return None if (b < 0).any() else int(b.sum())
        if any(t.nbytes is None for t in self.transfers):
            return None
        return int(sum(t.nbytes for t in self.transfers))

    @property
    def n_transfers(self) -> int:
        """``len(transfers)``, without making the records."""
        return self.tables.n_transfers if self._tables_first("transfers") else len(self.transfers)

    @property
    def n_partitions(self) -> int:
        """``len(partitions)``, without making the records."""
        return len(self.tables.part_prov) if self._tables_first("partitions") else len(self.partitions)

    def placement_counts(self) -> dict[str, int]:
        counts = {p.name: 0 for p in self.providers}
        per = np.bincount(np.asarray(self.assignment, np.int64), minlength=len(self.providers)) \
            if self.assignment else np.zeros(len(self.providers), np.int64)
        for p, c in zip(self.providers, per.tolist()):
            counts[p.name] += c
        return counts

    def partition_counts(self) -> dict[str, int]:
        """Provider name → number of its partitions (providers with no nodes omitted)."""
        counts: dict[str, int] = {}
        if self._tables_first("partitions"):
            for p, c in zip(self.providers, self.tables.partition_counts().tolist()):
                if c:
                    counts[p.name] = counts.get(p.name, 0) + c
        else:
            for part in self.partitions:
                counts[part.provider] = counts.get(part.provider, 0) + 1
        return {p.name: counts[p.name] for p in self.providers if p.name in counts}

    def partition_bounds(self) -> dict[str, dict]:
        """Provider name → ``{"partitions", "lower_bound", "optimal"}``: the partition
        count beside the path lower bound (largest number of separate runs of the
        provider along one path). ``optimal`` is True when the count meets the bound,
        which proves it minimal."""
        counts = self.partition_counts()
        out = {}
        for i, p in enumerate(self.providers):
            if p.name not in counts:
                continue
            lb = self.lower_bounds[i] if i < len(self.lower_bounds) else None
            out[p.name] = {"partitions": counts[p.name], "lower_bound": lb,
                           "optimal": lb is not None and counts[p.name] == lb}
        return out

    def estimate(self, cost_model=None) -> dict:
        """Estimated transfer and kernel seconds, and bytes moved (see
        :class:`~hetero_explore.planner.policies.CostModel`)."""
        from .policies import estimate
        return estimate(self, cost_model)

    def fallback_ops(self) -> dict[str, int]:
        """Op types placed below the highest-priority provider (op → node count)."""
        out: dict[str, int] = {}
        if self.tables is not None and self.assignment:
            arr = self.tables.arr
            below = np.asarray(self.assignment, np.int64) != 0
            per_sig = np.bincount(arr.node_sig[below], minlength=len(arr.signatures))
            for s, c in zip(arr.signatures, per_sig.tolist()):
                if c:
                    out[s[1]] = out.get(s[1], 0) + c
        else:
            for n in self.graph.nodes:
                if self.assignment[n.id] != 0:
                    out[n.op_type] = out.get(n.op_type, 0) + 1
        return dict(sorted(out.items()))

    def summary(self) -> str:
        """One line: partitions, devices, placement shares, transfers, fallback ops, expansions."""
        from ..load.optimize import summary_text
        from .ops_table import share
        counts = self.placement_counts()
        total = sum(counts.values())
        per = ", ".join(f"{name}: {c} node(s) ({share(c, total):.1f}%)" for name, c in counts.items() if c)
        fb = self.fallback_ops()
        fb_text = ", ".join(fb) if fb else "none"
        n_dev = len(self.devices)
        text = (f"{self.n_partitions} partition(s) across {n_dev} device(s); {per}; "
                f"{self.n_transfers} cross-provider transfer(s); "
                f"ops forced onto a fallback provider: {fb_text}")
        if self.n_partitions > 1 and self.lower_bounds:
            text += "; partitions per provider: " + ", ".join(
                f"{name} {b['partitions']:,d} (" + ("optimal" if b["optimal"]
                                                  else f"lower bound {b['lower_bound']:,d}") + ")"
                for name, b in self.partition_bounds().items())
        subs = self.nested()[1:]
        if subs:  # control-flow bodies: their nodes are in the tables too, so the count says them
            inner: dict = {}
            for _path, child in subs:
                for name, c in child.placement_counts().items():
                    inner[name] = inner.get(name, 0) + c
            text += (f"; plus {sum(inner.values())} node(s) in {len(subs)} control-flow subgraph(s): "
                     + ", ".join(f"{name} {c}" for name, c in inner.items() if c))
        ex = self.expanded_ops()
        if ex:
            text += "; expanded into onnx function bodies: " + ", ".join(
                f"{op} ({k} node(s) → {m})" for op, (k, m) in ex.items())
        opt = summary_text(getattr(self.graph, "optimizations", ()))
        if opt:
            text += f"; {opt}"
        vec = _run_notes(self)
        if vec:
            text += f"; Scan body run over all its steps at once: {', '.join(vec)}"
        if self.execution_blockers:
            text += f"; execution blocked: {len(self.execution_blockers)} reason(s)"
        return text

    def explain(self, node: int | str) -> dict:
        """Why a node sits where it does: its provider and each higher-priority provider's reason."""
        n = self._node(node)
        return {"node": n.name, "op_type": n.op_type, "provider": self.provider_of(n.id).name,
                "partition": self.node_partition[n.id], "declined_by": dict(self.declined[n.id])}

    def _node(self, node):
        if isinstance(node, (int, np.integer)):
            return self.graph.nodes[int(node)]
        for n in self.graph.nodes:
            if n.name == node:
                return n
        raise KeyError(f"no node named {node!r}")

    # -- tables ----------------------------------------------------------------
    def placement_df(self):
        """One row per node, those of the subgraphs included (``subgraph``: their path, "" for
        the main graph)."""
        return _nested_df(self, "_placement_df")

    def partitions_df(self):
        """One row per partition, those of the subgraphs' child plans included (``subgraph``)."""
        df = _nested_df(self, "_partitions_df")
        df.attrs["partition_bounds"] = self.partition_bounds()
        df.attrs["policy"] = self.policy
        return df

    def transfers_df(self):
        """One row per planned transfer, those inside subgraphs included (``subgraph``)."""
        return _nested_df(self, "_transfers_df")

    def _placement_df(self):
        import pandas as pd
        rows = []
        origin = self.graph.info.get("expanded_from", {})
        from ..load.optimize import node_notes
        notes = node_notes(getattr(self.graph, "optimizations", ()))
        notes.update(_run_notes(self))
        for n in self.graph.nodes:
            p = self.providers[self.assignment[n.id]]
            rows.append({"node_id": n.id, "name": n.name, "op_type": n.op_type,
                         "domain": n.domain or "ai.onnx", "opset": n.opset, "provider": p.name,
                         "device": str(p.device), "partition": self.node_partition[n.id],
                         "declined_by": dict(self.declined[n.id]), "expanded_from": origin.get(n.name),
                         "optimised": notes.get(n.name)})
        return pd.DataFrame(rows, columns=["node_id", "name", "op_type", "domain", "opset", "provider",
                                           "device", "partition", "declined_by", "expanded_from", "optimised"])

    def _partitions_df(self):
        import pandas as pd
        nodes = self.graph.nodes
        rows = []
        for p in self.partitions:
            ops = list(dict.fromkeys(nodes[i].op_type for i in p.node_ids))
            rows.append({"partition": p.id, "provider": p.provider, "device": p.device,
                         "n_nodes": p.n_nodes, "op_types": ", ".join(ops),
                         "inputs": list(p.inputs), "outputs": list(p.outputs),
                         "bytes_in": p.bytes_in, "bytes_out": p.bytes_out})
        df = pd.DataFrame(rows, columns=["partition", "provider", "device", "n_nodes", "op_types",
                                         "inputs", "outputs", "bytes_in", "bytes_out"])
        df.attrs["partition_bounds"] = self.partition_bounds()
        df.attrs["policy"] = self.policy
        return df

    def _transfers_df(self):
        import pandas as pd
        rows = [{"value": t.value, "dtype": t.dtype, "shape": t.shape, "bytes": t.nbytes,
                 "from_provider": t.src_provider, "to_provider": t.dst_provider,
                 "from_device": t.src_device, "to_device": t.dst_device, "kind": t.kind,
                 "from_partition": t.src_partition, "to_partitions": list(t.dst_partitions)}
                for t in self.transfers]
        return pd.DataFrame(rows, columns=["value", "dtype", "shape", "bytes", "from_provider",
                                           "to_provider", "from_device", "to_device", "kind",
                                           "from_partition", "to_partitions"])

    def ops_df(self):
        """Op type × provider node counts, shares and decline reasons
        (:func:`hetero_explore.planner.ops_table.ops_df`)."""
        from .ops_table import ops_df
        return ops_df(self)

    def to_ort_assignment(self) -> list[dict]:
        """The plan in the shape of ONNX Runtime's graph assignment info: one dict per partition
        (``ep_name``, ``device_type``, ``provider``, ``nodes``); see :mod:`.ortplan`."""
        return to_ort_assignment(self)

    def blockers_df(self):
        import pandas as pd
        return pd.DataFrame([{"kind": b.kind, "where": b.where, "detail": b.detail}
                             for b in self.execution_blockers], columns=["kind", "where", "detail"])

    def to_dict(self) -> dict:
        nodes = self.graph.nodes
        return {
            "graph": self.graph.name,
            "summary": self.summary(),
            "policy": self.policy,
            "providers": [{"name": p.name, "device": str(p.device), "priority": i}
                          for i, p in enumerate(self.providers)],
            "nodes": len(nodes),
            "partitions": [
                {"id": p.id, "provider": p.provider, "device": p.device, "n_nodes": p.n_nodes,
                 "nodes": [nodes[i].name for i in p.node_ids], "inputs": list(p.inputs),
                 "outputs": list(p.outputs), "bytes_in": p.bytes_in, "bytes_out": p.bytes_out}
                for p in self.partitions],
            "transfers": [
                {"value": t.value, "dtype": t.dtype, "shape": list(t.shape) if t.shape is not None else None,
                 "bytes": t.nbytes, "from_provider": t.src_provider, "to_provider": t.dst_provider,
                 "from_device": t.src_device, "to_device": t.dst_device, "kind": t.kind,
                 "from_partition": t.src_partition, "to_partitions": list(t.dst_partitions)}
                for t in self.transfers],
            "transfer_bytes": self.transfer_bytes,
            "placement": self.placement_counts(),
            "fallback_ops": self.fallback_ops(),
            "node_placement": [
                {"id": n.id, "name": n.name, "op_type": n.op_type, "domain": n.domain,
                 "opset": n.opset, "provider": self.providers[self.assignment[n.id]].name,
                 "partition": self.node_partition[n.id], "declined_by": dict(self.declined[n.id]),
                 "expanded_from": self.graph.info.get("expanded_from", {}).get(n.name)}
                for n in nodes],
            "execution_blockers": [{"kind": b.kind, "where": b.where, "detail": b.detail}
                                   for b in self.execution_blockers],
            "convexity_splits": [{"a": s.a, "b": s.b, "path": list(s.path)} for s in self.convexity_splits],
            "partition_bounds": self.partition_bounds(),
            "inlined_functions": list(self.inlined_functions),
            "expansions": [{k: (list(v) if isinstance(v, tuple) else v) for k, v in r.items()}
                           for r in self.expansions],
            "folded_nodes": list(self.graph.folded_nodes),
            "optimizations": [dict(r) for r in getattr(self.graph, "optimizations", ())],
            "plan_seconds": self.plan_seconds,
            "subgraphs": {path: child.to_dict() for path, child in self.children.items()},
        }

    def to_json(self, **kw) -> str:
        kw.setdefault("indent", 2)
        return json.dumps(self.to_dict(), default=_json_default, **kw)

    # -- views (drawn by hetero_explore.viz, through the display registry) ---------
    def to_graphviz(self, level: str = "auto", show_initializers: bool = False, **kw):
        """The plan as a Graphviz DAG coloured by provider (:mod:`hetero_explore.viz.graph`)."""
        return display.render("graphviz", self, level=level, show_initializers=show_initializers, **kw)

    def to_model_explorer(self, out_dir=None, run=None, **kw) -> list:
        """Node data (provider, partition, and with ``run`` partition seconds) for Google's
        Model Explorer, one JSON file per metric in the folder ``out_dir`` (default
        ``<graph name>_model_explorer`` here; :mod:`hetero_explore.viz.model_explorer`)."""
        return display.render("model_explorer", self, out_dir, run, **kw)

    def to_html(self, path=None, run=None, diff=None, **kw):
        """The self-contained HTML report (:mod:`hetero_explore.viz.report`)."""
        return display.render("report", self, path, run=run, diff=diff, **kw)

    def __repr__(self) -> str:
        return f"Plan({self.summary()})"

    def _repr_html_(self) -> str:
        return display.render("html", self)


def _run_notes(plan) -> dict:
    """Node name → how its kernel runs it beyond the node as written, for the placement table's
    ``optimised`` column: a Scan whose body runs once over its stacked steps (see
    :mod:`hetero_explore.kernels.host.scan_vectorise`; not where a provider runs its partitions
    itself, as ONNX Runtime's EPs do)."""
    out = {}
    graph = plan.graph
    if not any(n.op_type == "Scan" for n in graph.nodes):
        return out
    from ..kernels.host import control
    if not control.VECTORISE_SCANS:
        return out
    from ..providers.base import ExecutionProvider
    from ..providers.virtual import unmask
    for n in graph.nodes:
        if n.op_type != "Scan":
            continue
        if type(unmask(plan.providers[plan.assignment[n.id]])).partition_runner is not \
                ExecutionProvider.partition_runner:
            continue   # the provider runs its partitions itself
        if control.vectorise_declined(n, n.opset) is None:
            out[n.name] = ("body vectorised: runs once over the stacked scan steps (no carried state), "
                           "not once per step")
    return out


def _nested_df(plan, method: str):
    """``plan.<method>()`` with a ``subgraph`` column, followed by the same table of every nested
    child plan (rows of the main graph first; their ``subgraph`` is "")."""
    import pandas as pd
    frames = []
    for path, p in plan.nested():
        df = getattr(p, method)()
        if "shape" in df.columns and "value" in df.columns and len(df):
            df["shape"] = [display_shape(p.graph, v, s) for v, s in zip(df["value"], df["shape"])]
        df.insert(len(df.columns), "subgraph", path)
        frames.append(df)
    if len(frames) == 1:
        return frames[0]
    out = pd.concat([f for f in frames if len(f)] or frames[:1], ignore_index=True)
    return out


def display_shape(graph, value: str, shape):
    """``shape`` for a table: a dim onnx's inference made up a name for (``unk__N``) is shown
    as ``<producing node>.d<axis>`` (the first value it appears in names it; a dim with no
    producer as ``?``), so that a reader knows where it comes from (a Loop's carried value, an
    If's merged branches)."""
    if not isinstance(shape, (tuple, list)) or not any(isinstance(d, str) and d.startswith("unk__") for d in shape):
        return shape
    names = _unk_names(graph)
    return tuple(names.get(d, "?") if isinstance(d, str) and d.startswith("unk__") else d for d in shape)


def _unk_names(graph) -> dict:
    names: dict = {}
    for name, v in graph.values.items():
        if v.shape is None or v.producer is None:
            continue
        for a, d in enumerate(v.shape):
            if isinstance(d, str) and d.startswith("unk__") and d not in names:
                names[d] = f"{graph.nodes[v.producer].name}.d{a}"
    return names


def _json_default(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, tuple):
        return list(o)
    return str(o)


#: convexity splits explained per plan at most (``Plan.convexity_splits``)
MAX_SPLIT_EXPLANATIONS = 64


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
