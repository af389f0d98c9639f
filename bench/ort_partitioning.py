"""Did partitioning alone change ONNX Runtime's results? Per model, in ULP.

    python bench/ort_partitioning.py [--ep ort:openvino] [--no-torch]

For every model (the families of ``bench/profile_accuracy.py``), three runs on the same seeded
inputs, all through ONNX Runtime:

* ``whole``  — the whole model on ``ort:cpu`` (the reference);
* ``ep``     — the whole model on the EP alone (``--ep``, default ``ort:openvino``) where it takes
  every node, else not run;
* ``split``  — the heterogeneous plan ``[EP, ort:cpu]``: the EP's partitions and the CPU EP's
  partitions, each its own session, host copies between them.

Printed per model: nodes, partitions, the EP's share, max ULP / max abs of ``split`` against
``whole``, and of each ``split`` partition against ``ort:cpu`` fed the same inputs
(:func:`hetero_explore.analysis.divergence.partition_ulp_df`): a CPU-EP partition that differs
there differs only because it is its own session (ORT's fusions stop at the boundary).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def measure(name, g, ep: str) -> dict:
    import hetero_explore as he
    from hetero_explore.analysis import divergence as dv
    feeds = he.random_inputs(g, seed=0)
    row = {"model": name, "nodes": len(g.nodes)}
    whole = he.execute_reference(g, "ort:cpu", feeds)
    p = he.plan(g, [ep, "ort:cpu"])
    counts = p.placement_counts()
    row.update(partitions=len(p.partitions), ep_share=round(100 * counts.get(p.providers[0].name, 0) / len(g.nodes), 1))
    if not p.executable:
        row["error"] = "; ".join(f"[{b.kind}] {b.detail}"[:200] for b in p.execution_blockers)
        return row
    split = he.execute(p, feeds)
    d = he.compare(split, whole)
    row.update(split_max_ulp=int(d["max_ulp"].max()), split_max_abs=float(d["max_abs"].max()),
               identical=bool(d["byte_identical"].all()))
    parts = dv.partition_ulp_df(split, whole)
    cpu_parts = parts[parts["provider"] == "ort:cpu"]
    ep_parts = parts[parts["provider"] != "ort:cpu"]
    row["cpu_parts_max_ulp"] = int(cpu_parts["max_ulp"].max()) if len(cpu_parts) and cpu_parts["max_ulp"].notna().any() else None
    row["ep_parts_max_ulp"] = int(ep_parts["max_ulp"].max()) if len(ep_parts) and ep_parts["max_ulp"].notna().any() else None
    if counts.get(p.providers[0].name, 0) == len(g.nodes):
        row["ep_whole_is_split"] = True
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ep", default="ort:openvino")
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args(argv)
    from hetero_explore.providers import resolve
    ok, why = resolve(args.ep).available()
    if not ok:
        print(f"{args.ep} is not offered here: {why}")
        return 2
    from profile_accuracy import models
    cols = ["model", "nodes", "partitions", "ep_share", "identical", "split_max_ulp", "split_max_abs",
            "ep_parts_max_ulp", "cpu_parts_max_ulp", "error"]
    print(" | ".join(cols))
    for name, g in models(not args.no_torch):
        try:
            r = measure(name, g, args.ep)
        except Exception as e:  # noqa: BLE001 - one model's failure is a row
            r = {"model": name, "error": f"{type(e).__name__}: {e}"[:300]}
        print(" | ".join(str(r.get(c, "")) for c in cols), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
