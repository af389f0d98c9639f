"""Divergence of runs that involve a real runtime (ONNX Runtime's EPs), explained in ULP.

Between this project's own kernel providers a heterogeneous run is byte-identical to its
reference by construction, and :func:`hetero_explore.analysis.compare.first_divergence`
traces any difference node by node. A partition run by an ORT EP is one fused session: its
inside is not observable and its results are a measurement. Here a difference is explained
by **replaying**, with identical inputs on both sides:

* :func:`partition_ulp_df` — every partition of the run, fed the very inputs it got in the
  run, is run again on the reference provider; the ULP between its outputs in the run and
  the reference's outputs for the same inputs is what that partition itself introduced.
  The first partition (in the plan's order) whose outputs differ is the one blamed.
* :func:`bisect_partition` — inside that partition, its nodes run one at a time, each fed
  the reference's values (the reference's outputs of the nodes before it), on the
  partition's provider and on the reference provider: the first node whose outputs differ
  is blamed.
* :func:`op_ulp_df` — the same one-node comparison for every node of the graph, folded into
  a table of op type × provider: the largest ULP seen, the nodes measured and those the
  provider would not run alone (an EP may not take a lone node that it takes in context).

ULP figures come from :func:`~hetero_explore.analysis.compare.diff_arrays` (floats of one
dtype; integer and bool outputs count differing elements, their ULP column stays empty).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.errors import ArgumentTypeError, HeteroExploreError
from .diffs import Blame, diff_arrays

__all__ = ["is_measured", "run_nodes", "partition_ulp_df", "bisect_partition", "op_ulp_df", "op_ulp_table",
           "measured_blame", "NodeDiff"]


def _unmask(p):
    from ..providers.virtual import unmask
    while True:
        q = unmask(p)
        if q is p:
            return p
        p = q


def is_measured(provider) -> bool:
    """True for providers whose results are measured, not proven (ONNX Runtime's EPs)."""
    return bool(getattr(_unmask(provider), "measured", False))


def plan_is_measured(plan) -> bool:
    used = {p.provider_index for p in plan.partitions}
    return any(is_measured(plan.providers[i]) for i in used)


def _reads(graph, node_ids) -> list[str]:
    """Values the nodes read from outside themselves (outer-scope reads included), first use first."""
    produced, reads = set(), {}
    for i in sorted(node_ids):
        n = graph.nodes[i]
        for x in n.inputs:
            if x and x not in produced:
                reads.setdefault(x, None)
        produced.update(o for o in n.outputs if o)
    return list(reads)


def run_nodes(graph, provider, node_ids, outputs, values: dict) -> dict:
    """Nodes ``node_ids`` of ``graph`` on ``provider`` from host ``values`` (every value they read
    from outside; initializers may be left out): ``outputs`` → host arrays. An ORT provider runs
    them as one session of their own (the partition's session when they are a partition); the
    project's providers through the node runner."""
    from ..providers.base import ExecutionProvider
    prov = _unmask(provider)
    outputs = list(outputs)
    reads = _reads(graph, node_ids)
    if hasattr(prov, "partition_session"):
        sess, ins, outs = prov.partition_session(graph, node_ids, outputs)
        got = sess.run(list(outs), {n: _feed(values[n]) for n in ins})
        return dict(zip(outs, got))
    if not isinstance(prov, ExecutionProvider):
        raise ArgumentTypeError(f"expected a provider, got {type(provider).__name__}")
    from ..runner.core import NodeRunner
    runner = NodeRunner.for_graph(graph, prov, node_ids, outputs)
    return runner.run_once({name: values[name] if name in values else graph.initializer(name) for name in reads})


def _feed(a):
    if isinstance(a, np.ndarray) and a.dtype == object and a.ndim == 0:
        return a[()]
    return a


def _reference_provider(reference):
    from ..execution.executor import RunResult
    from ..providers import resolve
    if isinstance(reference, RunResult):
        parts = reference.plan.partitions
        return reference.plan.providers[parts[0].provider_index] if parts else reference.plan.providers[0]
    return resolve(reference)


def _recorded(run):
    """The run again keeping its intermediates (every partition's outputs at least)."""
    return run if run.intermediates is not None else run.rerun(keep_intermediates=True)


def _value(run, name):
    if name in run.intermediates:
        return run.intermediates[name]
    if name in run.inputs:
        return run.inputs[name]
    return run.graph.initializer(name)


def _worst(diffs: dict) -> tuple:
    """(byte_identical, n_diff, max_ulp, max_abs, worst output) over {output: diff_arrays}."""
    same = all(d["byte_identical"] for d in diffs.values())
    n = sum(d["n_diff"] or 0 for d in diffs.values())
    ulps = [(d["max_ulp"], o) for o, d in diffs.items() if d["max_ulp"] is not None]
    abss = [d["max_abs"] for d in diffs.values() if d["max_abs"] is not None]
    worst = max(ulps)[1] if ulps and max(ulps)[0] else next((o for o, d in diffs.items()
                                                            if not d["byte_identical"]), None)
    return same, n, (max(u for u, _ in ulps) if ulps else None), (max(abss) if abss else None), worst


def partition_ulp_df(run, reference):
    """One row per partition of ``run``: what it introduced, measured by replaying it on the
    reference provider (``reference``: a RunResult — its provider is used — or a provider) with
    the inputs it got in the run. Columns: partition, provider, nodes, byte_identical, n_diff,
    max_ulp, max_abs, worst_output, error (why it could not be replayed)."""
    import pandas as pd
    ref = _reference_provider(reference)
    hr = _recorded(run)
    plan, graph = hr.plan, hr.graph
    rows = []
    for part in plan.partitions:
        prov = plan.providers[part.provider_index]
        row = {"partition": part.id, "provider": prov.name, "nodes": part.n_nodes, "byte_identical": None,
               "n_diff": None, "max_ulp": None, "max_abs": None, "worst_output": None, "error": None}
        try:
            feeds = {n: _value(hr, n) for n in _reads(graph, part.node_ids)}
            got = run_nodes(graph, ref, part.node_ids, part.outputs, feeds)
            diffs = {o: diff_arrays(hr.intermediates[o], got[o]) for o in part.outputs}
            same, n, ulp, mabs, worst = _worst(diffs)
            row.update(byte_identical=same, n_diff=n, max_ulp=ulp, max_abs=mabs, worst_output=worst)
        except HeteroExploreError as e:
            row["error"] = f"{type(e).__name__}: {e}"
        except Exception as e:  # noqa: BLE001 - ORT's refusal to replay is a finding, not a crash
            row["error"] = f"{type(e).__name__}: {e}"
        rows.append(row)
    df = pd.DataFrame(rows, columns=["partition", "provider", "nodes", "byte_identical", "n_diff", "max_ulp",
                                     "max_abs", "worst_output", "error"])
    df.attrs["reference"] = ref.name
    return df


@dataclass(frozen=True)
class NodeDiff:
    """One node run alone on two providers with the same inputs."""

    node: str
    op_type: str
    provider: str
    byte_identical: bool | None
    max_ulp: int | None
    max_abs: float | None
    note: str = ""
    """Why it was not measured (the provider would not run it alone), else ''."""


def _one_node(graph, nid, prov, ref, values) -> tuple[NodeDiff, dict]:
    """(its diff, the reference's outputs) of node ``nid`` on ``prov`` against ``ref``."""
    node = graph.nodes[nid]
    outs = [o for o in node.outputs if o]
    feeds = {n: values[n] for n in _reads(graph, [nid]) if n in values}
    want = run_nodes(graph, ref, [nid], outs, feeds)
    if _unmask(prov) is _unmask(ref):
        return NodeDiff(node.name, node.op_type, prov.name, True, 0, 0.0), want
    try:
        got = run_nodes(graph, prov, [nid], outs, feeds)
    except Exception as e:  # noqa: BLE001 - an EP that will not take a lone node: said, not raised
        return NodeDiff(node.name, node.op_type, prov.name, None, None, None,
                        f"{prov.name} does not run it alone: {type(e).__name__}: {e}"), want
    same, _, ulp, mabs, _ = _worst({o: diff_arrays(got[o], want[o]) for o in outs})
    return NodeDiff(node.name, node.op_type, prov.name, same, ulp, mabs), want


def bisect_partition(run, reference, partition: int) -> list[NodeDiff]:
    """The nodes of ``partition`` one at a time, in order, each on the partition's provider and on
    the reference provider with the reference's values as inputs (the partition's own inputs are
    those of the run), until the first node that differs (the last item; all of them equal when
    none differs)."""
    ref = _reference_provider(reference)
    hr = _recorded(run)
    plan, graph = hr.plan, hr.graph
    part = plan.partitions[partition]
    prov = plan.providers[part.provider_index]
    values = {n: _value(hr, n) for n in _reads(graph, part.node_ids)}
    out = []
    for nid in part.node_ids:
        d, want = _one_node(graph, nid, prov, ref, values)
        values.update(want)
        out.append(d)
        if d.byte_identical is False:
            break
    return out


def op_ulp_df(run, reference, *, measured_only: bool = True):
    """Every node of ``run``'s plan (those on measured providers, with ``measured_only``) run alone
    on its provider and on the reference provider, fed the reference's values: one row per node
    (node, op_type, provider, byte_identical, max_ulp, max_abs, note). See :func:`op_ulp_table`."""
    import pandas as pd
    ref = _reference_provider(reference)
    plan = run.plan
    graph = plan.graph
    values = dict(run.inputs)
    rows = []
    for node in graph.nodes:
        prov = plan.providers[plan.assignment[node.id]]
        if measured_only and not is_measured(prov):
            outs = [o for o in node.outputs if o]
            feeds = {n: values[n] for n in _reads(graph, [node.id]) if n in values}
            values.update(run_nodes(graph, ref, [node.id], outs, feeds))
            continue
        d, want = _one_node(graph, node.id, prov, ref, values)
        values.update(want)
        rows.append(d.__dict__)
    df = pd.DataFrame(rows, columns=["node", "op_type", "provider", "byte_identical", "max_ulp", "max_abs", "note"])
    df.attrs["reference"] = ref.name
    return df


def op_ulp_table(df):
    """:func:`op_ulp_df` folded: one row per (op type, provider) with the nodes measured, the
    largest ULP and absolute difference seen, and the nodes the provider would not run alone."""
    import pandas as pd
    cols = ["op_type", "provider", "nodes", "measured", "max_ulp", "max_abs", "not_alone"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for (op, prov), g in df.groupby(["op_type", "provider"], sort=True):
        m = g[g["note"] == ""]
        ulps = m["max_ulp"].dropna()
        abss = m["max_abs"].dropna()
        rows.append({"op_type": op, "provider": prov, "nodes": len(g), "measured": len(m),
                     "max_ulp": int(ulps.max()) if len(ulps) else None,
                     "max_abs": float(abss.max()) if len(abss) else None, "not_alone": len(g) - len(m)})
    out = pd.DataFrame(rows, columns=cols)
    return out.sort_values(["max_ulp", "op_type"], ascending=[False, True], na_position="last").reset_index(drop=True)


def measured_blame(run, reference, differing, *, bisect: bool = False) -> dict:
    """Output → :class:`~hetero_explore.analysis.compare.Blame` for runs with measured partitions:
    the first partition among the output's ancestors that introduced a difference (replayed with
    identical inputs, :func:`partition_ulp_df`), and with ``bisect`` the first node inside it."""
    parts = partition_ulp_df(run, reference)
    plan, graph = run.plan, run.graph
    preds, _ = graph.adjacency()
    ref_name = parts.attrs.get("reference")
    bisected: dict[int, list] = {}
    out = {}
    for name in differing:
        producer = graph.values[name].producer
        if producer is None:
            out[name] = Blame(name, "passthrough", None, None, None, None, name, (),
                              f"output {name!r} is a graph input or initializer copied through, and the copy differs")
            continue
        seen, stack = {producer}, [producer]
        while stack:
            for w in preds[stack.pop()]:
                if w not in seen:
                    seen.add(w)
                    stack.append(w)
        anc_parts = {plan.node_partition[v] for v in seen}
        hit = next((r for r in parts.itertuples() if r.partition in anc_parts and r.byte_identical is False), None)
        if hit is None:
            errs = [r for r in parts.itertuples() if r.partition in anc_parts and r.error]
            why = (f"; partition {errs[0].partition} could not be replayed: {errs[0].error}" if errs else
                   ": each partition gives the same bits as the reference fed the same inputs, so the difference "
                   "comes from how the reference runs the whole graph (its fusions across partition boundaries)")
            out[name] = Blame(name, "not-localised", None, None, None, None, name, (),
                              f"output {name!r} differs from the {ref_name} reference{why}")
            continue
        part = plan.partitions[hit.partition]
        first = graph.nodes[part.node_ids[0]]
        text = (f"partition {hit.partition} on {hit.provider!r} ({hit.nodes} node(s)) is the first whose outputs "
                f"differ from {ref_name}'s for the same inputs: {hit.n_diff} element(s), max {hit.max_ulp} ULP "
                f"(max abs {hit.max_abs:.3g}) on {hit.worst_output!r}")
        where, node, op, value = "partition", first.name, first.op_type, hit.worst_output
        if bisect:
            if hit.partition not in bisected:
                bisected[hit.partition] = bisect_partition(run, reference, hit.partition)
            steps = bisected[hit.partition]
            last = steps[-1] if steps else None
            if last is not None and last.byte_identical is False:
                where, node, op = "node", last.node, last.op_type
                text += (f"; run one node at a time, node {last.node!r} ({last.op_type}) is the first that differs "
                         f"for the same inputs: max {last.max_ulp} ULP")
            else:
                skipped = [s for s in steps if s.note]
                text += ("; run one node at a time, no single node differs"
                         + (f" ({len(skipped)} node(s) would not run alone on {hit.provider})" if skipped else
                            ": the difference comes from the EP's fusion of several nodes"))
        out[name] = Blame(name, where, node, op, hit.partition, hit.provider, value, (), text)
    return out
