"""Byte-identity diffs, ULP distances and first-divergence blame.

:func:`compare` puts a run next to a reference, one row per graph output:
byte identity (NaNs compared by bit pattern, so ``-0.0`` and ``+0.0`` or two
NaN payloads count as different), how many elements differ, the largest
absolute difference, the largest distance in ULP and the first differing
index. With ``blame=True`` both runs are repeated keeping every intermediate,
and each differing output is traced to the first step, in topological order,
that made something differ: a node (its output differs while its inputs
match), a transfer (the destination's copy differs from the source), the
staging of an input or initializer, or the read-back of the output itself.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ..ir.errors import ArgumentTypeError, ArgumentValueError
from .diffs import _NOT_HOST, Blame, _host, _kind, diff_arrays, ulp_distance  # noqa: F401  (re-exported)

__all__ = ["compare", "first_divergence", "ulp_distance", "diff_arrays", "Blame"]


def _outputs_of(x, what: str) -> Mapping[str, np.ndarray]:
    outs = getattr(x, "outputs", x)
    if not isinstance(outs, Mapping):
        raise ArgumentTypeError(f"{what} must be a RunResult or a mapping name → array, got {type(x).__name__}")
    return outs


def _same_inputs(run, reference) -> None:
    ia, ib = getattr(run, "inputs", None), getattr(reference, "inputs", None)
    if not ia or not ib:
        return
    names = sorted(set(ia) | set(ib))
    bad = [n for n in names if n not in ia or n not in ib or not diff_arrays(ia[n], ib[n])["byte_identical"]]
    if bad:
        raise ArgumentValueError(f"the two runs were given different inputs ({', '.join(map(repr, bad))}); "
                         "compare runs of the same inputs")


def compare(run, reference, *, blame: bool = False, bisect: bool = False):
    """One row per output of ``run`` against ``reference`` (RunResults or mappings
    name → array): byte_identical, n_diff, max_abs, max_ulp, first_diff_index.

    With ``blame=True`` (both must be RunResults) outputs that differ also get
    the first divergence (see :func:`first_divergence`): columns ``blamed`` (node /
    transfer / staging / readback / not-reproduced / passthrough),
    ``blamed_node``, ``blamed_op``, ``blamed_partition``, ``blamed_provider``,
    ``blamed_value``, ``transfers_on_way`` and ``blame_detail``.

    When either run has a partition on a provider whose results are measured (an ONNX
    Runtime EP), blame replays partitions with identical inputs instead
    (:func:`hetero_explore.analysis.divergence.measured_blame`): ``blamed`` is ``partition``
    (the first partition that introduced a difference), or with ``bisect=True`` ``node``
    (the first node inside it that differs when the nodes run one at a time)."""
    import pandas as pd

    a, b = _outputs_of(run, "run"), _outputs_of(reference, "reference")
    if set(a) != set(b):
        only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
        raise ArgumentValueError(f"the runs have different outputs: only in run {only_a}, only in reference {only_b}")
    _same_inputs(run, reference)
    rows = []
    for name in a:
        d = diff_arrays(a[name], b[name])
        d.pop("detail", None)
        h = _host(a[name])
        if h is not _NOT_HOST:  # a sequence / map / optional
            rows.append({"output": name, "dtype": _kind(h), "shape": (len(h),) if h is not None else (), **d})
            continue
        rows.append({"output": name, "dtype": str(np.asarray(a[name]).dtype),
                     "shape": tuple(np.shape(a[name])), **d})
    cols = ["output", "dtype", "shape", "byte_identical", "n_diff", "max_abs", "max_ulp", "first_diff_index"]
    df = pd.DataFrame(rows, columns=cols)
    if blame:
        bcols = ["blamed", "blamed_node", "blamed_op", "blamed_partition", "blamed_provider", "blamed_value",
                 "transfers_on_way", "blame_detail"]
        found = {}
        if not df["byte_identical"].all():
            from .divergence import measured_blame, plan_is_measured
            from ..execution.executor import RunResult
            if isinstance(run, RunResult) and isinstance(reference, RunResult) and (
                    plan_is_measured(run.plan) or plan_is_measured(reference.plan)):
                differing = [n for n, same in zip(df["output"], df["byte_identical"]) if not same]
                found = measured_blame(run, reference, differing, bisect=bisect)
            else:
                found = first_divergence(run, reference)
        for c in bcols:
            df[c] = None
        df = df.astype({c: object for c in bcols})
        for i, name in enumerate(df["output"]):
            bl = found.get(name)
            if bl is None:
                continue
            vals = [bl.where, bl.node, bl.op_type, bl.partition, bl.provider, bl.value, list(bl.transfers),
                    bl.detail]
            for c, v in zip(bcols, vals):
                df.at[i, c] = v
    return df


def _tdesc(t) -> str:
    return f"{t.value}: {t.src_provider} → {t.dst_provider} ({t.kind})"


def _differs(x, y) -> bool:
    return not diff_arrays(x, y)["byte_identical"]


def _how(x, y) -> str:
    d = diff_arrays(x, y)
    if d["n_diff"] is None:
        return f"has {d.get('detail', 'a different dtype or shape')}"
    ulp = f", max {d['max_ulp']} ULP" if d["max_ulp"] is not None else ""
    size = "its" if _host(x) is not _NOT_HOST else f"{np.asarray(x).size}"
    return f"differs in {d['n_diff']} of {size} element(s){ulp}, first at {d['first_diff_index']}"


def first_divergence(run, reference) -> dict:
    """For each output of ``run`` that differs from ``reference``: a :class:`Blame`.

    Both are re-run keeping every intermediate (unless they already kept them).
    Steps are examined in the topological order of ``run``'s graph; for each
    node, first the copies of its inputs that reached its partition (staged
    inputs and initializers against the host arrays, transferred values against
    the source's values), then its outputs against the reference's. The first
    step among the output's ancestors that differs is blamed."""
    from ..execution.executor import RunResult

    if not isinstance(run, RunResult) or not isinstance(reference, RunResult):
        raise ArgumentTypeError("blame needs two RunResults (from execute / execute_reference), not plain arrays")
    _same_inputs(run, reference)
    differing = [n for n in run.outputs if _differs(run.outputs[n], reference.outputs[n])]
    if not differing:
        return {}
    hr = run if run.intermediates is not None else run.rerun(keep_intermediates=True)
    rr = reference if reference.intermediates is not None else reference.rerun(keep_intermediates=True)
    plan, graph = hr.plan, hr.plan.graph
    H, R = hr.intermediates, rr.intermediates
    vals = graph.values
    index_of = {p.name: i for i, p in enumerate(plan.providers)}
    tkey = {(t.value, index_of[t.dst_provider]): ti for ti, t in enumerate(plan.transfers)}

    # first divergence at each node, in topological order
    events: list[tuple[int, str, str, int | None, str]] = []  # (node id, where, value, transfer, how)
    for node in graph.nodes:
        pid = plan.node_partition[node.id]
        part = plan.partitions[pid]
        hit = None
        for name in node.present_inputs:
            v = vals[name]
            if v.producer is None:
                staged = (hr.staged_values or {}).get((name, pid))
                orig = hr.inputs[name] if name in hr.inputs else graph.initializer(name)
                if staged is not None and _differs(staged, orig):
                    hit = (node.id, "staging", name, None, _how(staged, orig))
                    break
            elif plan.node_partition[v.producer] != pid:
                ti = tkey.get((name, part.provider_index))
                if ti is not None and _differs(hr.transfer_values[ti], H[name]):
                    hit = (node.id, "transfer", name, ti, _how(hr.transfer_values[ti], H[name]))
                    break
        if hit is None:
            for o in node.outputs:
                if o and o in H and o in R and _differs(H[o], R[o]):
                    hit = (node.id, "node", o, None, _how(H[o], R[o]))
                    break
        if hit is not None:
            events.append(hit)

    preds, succs = graph.adjacency()

    def closure(start: int, edges) -> set:
        seen, stack = {start}, [start]
        while stack:
            for w in edges[stack.pop()]:
                if w not in seen:
                    seen.add(w)
                    stack.append(w)
        return seen

    out: dict[str, Blame] = {}
    for name in differing:
        producer = vals[name].producer
        if producer is None:
            out[name] = Blame(name, "passthrough", None, None, None, None, name, (),
                              f"output {name!r} is a graph input or initializer copied through, and the copy "
                              "differs")
            continue
        ancestors = closure(producer, preds)
        ev = next((e for e in events if e[0] in ancestors), None)
        if ev is None:
            if not _differs(hr.outputs[name], reference.outputs[name]) or \
                    not _differs(rr.outputs[name], run.outputs[name]):
                out[name] = Blame(name, "not-reproduced", None, None, None, None, name, (),
                                  f"output {name!r} differed, but not when both runs were repeated keeping "
                                  "intermediates: a provider or kernel is non-deterministic")
            else:
                pid = plan.node_partition[producer]
                prov = plan.partitions[pid].provider
                out[name] = Blame(name, "readback", graph.nodes[producer].name, graph.nodes[producer].op_type,
                                  pid, prov, name, (),
                                  f"every intermediate matches the reference, but output {name!r} "
                                  f"{_how(hr.outputs[name], rr.outputs[name])} after {prov!r} copied it to "
                                  "the host")
            continue
        nid, where, value, ti, how = ev
        node = graph.nodes[nid]
        pid = plan.node_partition[nid]
        part = plan.partitions[pid]
        downstream = closure(nid, succs)
        on_way = [t for t in plan.transfers
                  if vals[t.value].producer in downstream and vals[t.value].producer in ancestors]
        if where == "transfer":
            t = plan.transfers[ti]
            on_way = [t] + [x for x in on_way if x is not t]
            text = (f"transfer of {value!r} {t.src_provider} → {t.dst_provider} ({t.kind}) into partition "
                    f"{pid}: the destination's copy {how} against the source")
        elif where == "staging":
            text = (f"staging {value!r} on {part.provider!r} for partition {pid}: the staged copy {how} "
                    "against the host array")
        else:
            text = (f"node {node.name!r} ({node.op_type}) in partition {pid} on {part.provider!r} "
                    f"({part.device}) is the first whose output differs while its inputs match: {value!r} {how}")
        if on_way:
            text += f"; the difference reaches {name!r} through {len(on_way)} transfer(s): " + \
                "; ".join(_tdesc(t) for t in on_way)
        out[name] = Blame(name, where, node.name, node.op_type, pid, part.provider, value,
                          tuple(_tdesc(t) for t in on_way), text)
    return out
