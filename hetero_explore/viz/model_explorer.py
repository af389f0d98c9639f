"""Export a plan as node data for Google's Model Explorer (its "overlay" JSON).

Model Explorer colours a model's nodes by a *node data* file: ``{graph id: {"results":
{key: {"value": number, "bgColor": css}}, "thresholds" / "gradient": ...}}`` (see
``model_explorer/node_data_builder.py`` in google-ai-edge/model-explorer), where a key is a
node's id or any of its output tensor names. ONNX node ids depend on the adapter, so the
keys here are the output tensor names, which every ONNX adapter keeps; a node with no
output is keyed by its name. One file per metric, each loadable on its own:

* ``<stem>.provider.json`` — the provider index (0 = highest priority), coloured as in
  this tool's DAG;
* ``<stem>.partition.json`` — the partition id, coloured by its provider;
* ``<stem>.partition_seconds.json`` — with a run: the seconds of the node's partition in
  that run (a partition's nodes share it: kernels are timed per partition), on a gradient.
"""

from __future__ import annotations

import json
from pathlib import Path

from .colors import provider_colors

GRADIENT = [{"stop": 0, "bgColor": "#f7fbff"}, {"stop": 1, "bgColor": "#08306b"}]


def _keys(node) -> list[str]:
    outs = [o for o in node.outputs if o]
    return outs or [node.name]


def node_data(plan, run=None) -> dict[str, dict]:
    """metric name → Model Explorer node data (a dict, ready for ``json.dump``)."""
    graph_id = plan.graph.name or "main_graph"
    colors = provider_colors(plan.provider_names)
    prov, part, secs = {}, {}, {}
    part_seconds = {}
    if run is not None:
        for e in getattr(run, "events", ()):
            if e.kind == "partition":
                part_seconds[e.partition] = part_seconds.get(e.partition, 0.0) + e.seconds
    for n in plan.graph.nodes:
        pi = int(plan.assignment[n.id])
        p = plan.providers[pi]
        pid = int(plan.node_partition[n.id])
        for k in _keys(n):
            prov[k] = {"value": pi, "bgColor": colors[p.name]}
            part[k] = {"value": pid, "bgColor": colors[p.name]}
            if pid in part_seconds:
                secs[k] = {"value": part_seconds[pid]}
    out = {"provider": {graph_id: {"results": prov}}, "partition": {graph_id: {"results": part}}}
    if secs:
        out["partition_seconds"] = {graph_id: {"results": secs, "gradient": GRADIENT}}
    return out


def to_model_explorer(plan, out_dir=None, run=None, *, stem: str | None = None) -> list[Path]:
    """Write :func:`node_data` into the folder ``out_dir`` (created when missing; default
    ``<stem>_model_explorer`` in the current folder), one file per metric:
    ``<stem>.provider.json``, ``<stem>.partition.json`` and, with ``run``,
    ``<stem>.partition_seconds.json``; ``stem`` defaults to the graph's name. Returns the paths
    written. A model's own folder is never written to unless named: Model Explorer loads the
    model from where it is and these files from anywhere."""
    import re

    from ..ir.errors import ArgumentValueError
    from .report import write_text_safely
    stem = stem or re.sub(r"[^A-Za-z0-9_.-]+", "_", plan.graph.name or "model").strip("._") or "model"
    if out_dir is None:
        out = Path(f"{stem}_model_explorer")
    else:
        out = Path(out_dir)
        if out.suffix.lower() == ".onnx":
            raise ArgumentValueError(
                f"to_model_explorer writes into a folder, and {str(out_dir)!r} names a model file; give the "
                f"folder to write into, e.g. to_model_explorer({str(out.with_suffix('')) + '_model_explorer'!r}) "
                "(nothing is written beside a model unless its folder is given)")
    written = []
    for metric, data in node_data(plan, run).items():
        written.append(write_text_safely(out / f"{stem}.{metric}.json",
                                         json.dumps(data, indent=1, sort_keys=True), what="Model Explorer node data"))
    return written
