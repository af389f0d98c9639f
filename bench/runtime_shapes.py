"""Cost of run-time shapes: the same model run with its batch bound at load time (static
plan, no per-run inference) and left symbolic (every node's shapes computed as it runs,
from the per-node caches after the first run).

    python bench/runtime_shapes.py [--runs 200] [--batch 4]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

import numpy as np  # noqa: E402

import hetero_explore as he  # noqa: E402
from hetero_explore.execution.executor import HeterogeneousExecutor  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--batch", type=int, default=4)
    a = ap.parse_args()
    from test_runtime_shapes import dynamic_axes_model
    m = dynamic_axes_model()
    x = {"x": np.random.default_rng(0).standard_normal((a.batch, 3, 4)).astype(np.float32)}
    for label, g in (("bound", he.load_model(m, input_shapes={"x": x["x"].shape}, fold_constants=False)),
                     ("symbolic", he.load_model(m, fold_constants=False))):
        ex = HeterogeneousExecutor(he.plan(g, ["cpu"]))
        dyn = sum(len(p.dynamic_nodes) for p in ex.parts)
        ex.run(x)
        t0 = time.perf_counter()
        for _ in range(a.runs):
            ex.run(x)
        per = (time.perf_counter() - t0) / a.runs
        print(f"{label:9s} {len(g.nodes)} nodes, {dyn} with run-time shapes: {per * 1e6:8.1f} us per run")


if __name__ == "__main__":
    main()
