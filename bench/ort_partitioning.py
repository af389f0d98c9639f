"""Did partitioning alone change ONNX Runtime's results? Per model, in ULP.

    python bench/ort_partitioning.py [--ep ort:openvino] [--no-torch]

For every model (the families of ``bench/profile_accuracy.py``), three runs on the same seeded
inputs, all through ONNX Runtime:

* ``whole``  — the whole model on ``ort:cpu`` (the reference);
* ``ep``     — the whole model on the EP alone (``--ep``, default ``ort:openvino``) where it takes
  every node, else not run;
* ``split``  — heterogeneous plans (below): partitions, each its own session, host copies between.

Printed per model, each against ``whole`` (max ULP / max abs over the outputs):

* ``ep_*``: ``[EP, ort:cpu]`` as priority places it (the EP's share of nodes);
* ``cpu_split_*``: the CPU EP alone, split into partitions by denying :data:`SPLIT_OPS` on a first
  ``ort:cpu`` (the rest on a second ``ort:cpu`` with the same settings): **partitioning alone**,
  the same EP on both sides, each partition its own session (ORT's fusions stop at boundaries);
* ``ep_split_*``: the EP split the same way, the denied ops on the CPU EP.

Where the EP is not offered on this machine (the OpenVINO plugin on a non-Intel CPU), it says
why and measures partitioning alone.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


#: ops denied on the first provider to force partitions (the ones these models have)
SPLIT_OPS = ("Relu", "Softmax", "Add", "Erf", "Sigmoid", "HardSwish", "Concat")


def _ulp(run, ref) -> tuple:
    import hetero_explore as he
    d = he.compare(run, ref)
    return int(d["max_ulp"].max()), float(d["max_abs"].max())


def measure(name, g, ep: str | None) -> dict:
    """One model's row; ``ep`` None (the EP is not offered here): partitioning alone only."""
    import hetero_explore as he
    from hetero_explore.providers import mask, resolve
    feeds = he.random_inputs(g, seed=0)
    row = {"model": name, "nodes": len(g.nodes)}
    whole = he.execute_reference(g, "ort:cpu", feeds)
    if ep is None:
        return _cpu_split(he, g, feeds, whole, row)
    # 1. [EP, ort:cpu] as ORT's priority would place it, against the whole model on the CPU EP
    p = he.plan(g, [ep, "ort:cpu"])
    counts = p.placement_counts()
    row.update(parts=len(p.partitions), ep_share=round(100 * counts.get(p.providers[0].name, 0) / len(g.nodes), 1))
    if p.executable:
        row["ep_ulp"], row["ep_abs"] = _ulp(he.execute(p, feeds), whole)
    else:
        row["error"] = "; ".join(f"[{b.kind}] {b.detail}"[:160] for b in p.execution_blockers)
    _cpu_split(he, g, feeds, whole, row)
    # 3. the EP split the same way, the rest on the CPU EP
    pe = he.plan(g, [mask(resolve(ep), deny=SPLIT_OPS), "ort:cpu"])
    row["ep_split_parts"] = len(pe.partitions)
    if pe.executable:
        row["ep_split_ulp"], row["ep_split_abs"] = _ulp(he.execute(pe, feeds), whole)
    return row


def _cpu_split(he, g, feeds, whole, row) -> dict:
    """2. partitioning alone: the CPU EP split in partitions (the same EP and settings on both sides)."""
    from hetero_explore.providers import mask, resolve
    cpu2 = resolve("ort:cpu?graph_optimization_level=all")
    ps = he.plan(g, [mask(resolve("ort:cpu"), deny=SPLIT_OPS), cpu2])
    row["cpu_split_parts"] = len(ps.partitions)
    row["cpu_split_ulp"], row["cpu_split_abs"] = _ulp(he.execute(ps, feeds), whole)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ep", default="ort:openvino")
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args(argv)
    from hetero_explore.providers import resolve
    ok, why = resolve(args.ep).available()
    ep = args.ep
    if not ok:
        print(f"{args.ep} is not offered here ({why}): partitioning alone only (the cpu_split columns)")
        ep = None
    from profile_accuracy import models
    cols = ["model", "nodes", "parts", "ep_share", "ep_ulp", "ep_abs", "cpu_split_parts", "cpu_split_ulp",
            "cpu_split_abs", "ep_split_parts", "ep_split_ulp", "ep_split_abs", "error"]
    print(" | ".join(cols))
    for name, g in models(not args.no_torch):
        try:
            r = measure(name, g, ep)
        except Exception as e:  # noqa: BLE001 - one model's failure is a row
            r = {"model": name, "error": f"{type(e).__name__}: {e}"[:300]}
        print(" | ".join(str(r.get(c, "")) for c in cols), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
