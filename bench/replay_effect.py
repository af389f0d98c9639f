"""What replaying recorded node calls saves: whole models with replay on and off, against
onnxruntime, in one process.

    python bench/replay_effect.py                      # every family of bench/models.py, 1 thread, 40 rounds
    python bench/replay_effect.py --only bert,mobilenet --rounds 60

Per family (the models of ``bench/models.py``): two executors of the same plan, one built
with ``hetero_explore.runner.core.REPLAY = False`` (every node calls its run function at every
run: flat views, argument tuples, numba's dispatch) and one with replay (the default: a
node's compiled calls recorded at the first run, then called through numba's entry points
directly; consecutive replayed nodes as one segment), and an onnxruntime session (1 thread,
default optimisations). Each round runs the three once, one after another, so all see the
same machine load; the table gives the medians, the ratios to onnxruntime and whether the
two executors' outputs are the same bits. The geometric mean of the ratios closes it.
Never run as a test.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.pop("NUMBA_ENABLE_CUDASIM", None)  # CPU only
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))


def family(name, rounds):
    import numpy as np
    import hetero_explore as he
    from hetero_explore.runner import core as runner
    from hetero_explore.execution.executor import HeterogeneousExecutor
    from hetero_explore.providers import cpu
    import models as bm

    path, feeds = bm.export(name)
    graph = he.load_model(str(path))
    plan = he.plan(graph, [cpu()])
    saved = runner.REPLAY
    try:
        runner.REPLAY = False
        plain = HeterogeneousExecutor(plan)
        runner.REPLAY = True
        replay = HeterogeneousExecutor(plan)
    finally:
        runner.REPLAY = saved
    a, b = plain.run(feeds), replay.run(feeds)   # warm-up; the second records
    b = replay.run(feeds)                        # replayed
    same = all(a.outputs[k].tobytes() == b.outputs[k].tobytes() for k in a.outputs)
    sess = bm._session(path, 1)
    sess.run(None, feeds)
    t = {"plain": [], "replay": [], "ort": []}
    clock = time.perf_counter
    for _ in range(rounds):
        for key, fn in (("plain", lambda: plain.run(feeds)), ("ort", lambda: sess.run(None, feeds)),
                        ("replay", lambda: replay.run(feeds))):
            t0 = clock()
            fn()
            t[key].append(clock() - t0)
    plain.close()
    replay.close()
    m = {k: statistics.median(v) * 1e3 for k, v in t.items()}
    return dict(family=name, nodes=len(graph.nodes), same=same, **m)


def main(argv=None):
    import numba
    import models as bm
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None, help="comma-separated families (default: all)")
    ap.add_argument("--rounds", type=int, default=40)
    args = ap.parse_args(argv)
    fams = args.only.split(",") if args.only else list(bm.FAMILIES)
    numba.set_num_threads(1)
    print(f"load {os.getloadavg()[0]:.2f}", flush=True)
    rows = []
    for f in fams:
        r = family(f, args.rounds)
        rows.append(r)
        print(f"  {f}: plain {r['plain']:.3f} ms, replay {r['replay']:.3f} ms, onnxruntime {r['ort']:.3f} ms",
              flush=True)
    print("\n| family | nodes | plain ms | replay ms | ort ms | plain/ort | replay/ort | same bits |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['family']} | {r['nodes']} | {r['plain']:.3f} | {r['replay']:.3f} | {r['ort']:.3f} | "
              f"{r['plain'] / r['ort']:.2f} | {r['replay'] / r['ort']:.2f} | {r['same']} |")
    gm = lambda k: math.exp(statistics.fmean(math.log(r[k] / r["ort"]) for r in rows))  # noqa: E731
    print(f"| **geomean** | | | | | **{gm('plain'):.2f}** | **{gm('replay'):.2f}** | |")
    print(f"\nload {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
