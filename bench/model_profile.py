"""Where each whole-model family's time goes, per op type (CPU provider, warm).

    python bench/model_profile.py                     # every family of bench/models.py, 1 thread
    python bench/model_profile.py --only bert,gpt2 --threads 2 --runs 50
    python bench/model_profile.py --real --only knn,silero   # bench/real_models.py's families

Builds the executor as ``bench/models.py`` does, runs once (warm-up), then wraps
every prebuilt node call of its memory-plan programs with a timer and runs
``--runs`` more times. Prints, per family, the median run wall time and the
least CPU time (``time.thread_time``) of a run, the time in node calls per op
type (each node's fastest call over the runs, summed over the nodes of that
type: robust on a loaded machine) with its share of that CPU time, and the rest
(the least run CPU time minus the node calls: the executor's own work and the
Python side of each node call). The timer costs ~0.1-0.2 us per node.
Never run as a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

os.environ.pop("NUMBA_ENABLE_CUDASIM", None)  # CPU only
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))


def profile_family(name, threads, runs, top, bm):
    import numba
    import hetero_explore as he
    from hetero_explore.execution.executor import HeterogeneousExecutor
    from hetero_explore.runner.core import instrument
    from hetero_explore.providers import cpu

    path, feeds = bm.export(name)
    # the feeds' shapes bind the model's symbolic dims (a classifier's batch), as bench/models.py does
    graph = he.load_model(str(path), input_shapes={k: np.shape(v) for k, v in feeds.items()})
    plan = he.plan(graph, [cpu()])
    if plan.execution_blockers:
        print(f"## {name}: declined ({plan.execution_blockers[0].detail})")
        return
    numba.set_num_threads(threads)
    ex = HeterogeneousExecutor(plan)
    ex.run(feeds)   # warm-up; leaves one program set in the pool
    per_node = []          # (op type, [seconds per run])
    count = defaultdict(int)
    clock = time.perf_counter
    slow = 0
    for progs in ex._pool:
        for prog in progs:
            if prog is None:
                continue
            slow += sum(1 for it in prog.nodes if it[1] is None)

            def wrap(st, call):
                op = st.node.op_type
                count[op] += 1
                rec = []
                per_node.append((op, rec))

                def timed():
                    t0 = clock()
                    call()
                    rec.append(clock() - t0)
                return timed
            instrument(prog, wrap)   # each node's prebuilt call (its replay, once recorded)
    walls, cpus = [], []
    for _ in range(runs):
        c0, t0 = time.thread_time(), clock()
        ex.run(feeds)
        walls.append(clock() - t0)
        cpus.append(time.thread_time() - c0)
    ex.close()
    wall = statistics.median(walls)
    best = min(cpus)   # the run's CPU time: on shared cores the wall counts preemption
    nodes = sum(count.values())
    per_op = defaultdict(float)      # per op type: the sum over its nodes of each node's fastest call
    for op, rec in per_node:
        per_op[op] += min(rec)
    in_nodes = sum(per_op.values())
    print(f"\n## {name}: {len(graph.nodes)} nodes ({slow} on the per-run path), {threads} thread(s), "
          f"median wall {wall * 1e3:.2f} ms, least CPU time {best * 1e3:.2f} ms over {runs} runs")
    print("| op type | nodes | ms/run (fastest call per node, summed) | share of least run CPU | us/node |")
    print("|---|---|---|---|---|")
    for op, s in sorted(per_op.items(), key=lambda kv: -kv[1])[:top]:
        print(f"| {op} | {count[op]} | {s * 1e3:.3f} | {s / best:.0%} | {s / count[op] * 1e6:.1f} |")
    rest = best - in_nodes
    print(f"| (rest: least run CPU minus node calls) | {nodes} | {rest * 1e3:.3f} | {rest / best:.0%} | "
          f"{rest / max(nodes, 1) * 1e6:.1f} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", action="store_true", help="the families of bench/real_models.py")
    ap.add_argument("--only", default=None, help="comma-separated families (default: all)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--top", type=int, default=8, help="op types listed per family")
    args = ap.parse_args(argv)
    if args.real:
        import real_models as bm
    else:
        import models as bm
    fams = args.only.split(",") if args.only else list(bm.FAMILIES)
    print(f"load {os.getloadavg()}")
    for f in fams:
        profile_family(f, args.threads, args.runs, args.top, bm)
    print(f"\nload {os.getloadavg()}")


if __name__ == "__main__":
    main()
