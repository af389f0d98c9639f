"""Per-node table of the MatMul/Gemm/Softmax nodes of the transformer and MLP families, ours vs
onnxruntime, and where the rest of a run's time goes.

    python bench/matmul_profile.py                         # bert, gpt2, vit, mlp; 1 thread; 30 runs
    python bench/matmul_profile.py --only mlp --runs 50 --threads 2
    python bench/matmul_profile.py --ops MatMul,Gemm,Softmax,LayerNormalization

Per family (the models of ``bench/models.py``): builds the executor as
``bench/model_profile.py`` does, wraps every prebuilt node call with a
``time.perf_counter`` timer, runs ``--runs`` times after a warm-up, and takes
each node's fastest call. onnxruntime runs the same model with
``enable_profiling`` (default graph optimisations, same thread count) and each
node's fastest ``*_kernel_time`` event (its ``dur``, in us) is matched to our
node by name: once with graph optimisations off (every node keeps its name, so
node for node; "ort us"), once with the default ones as ``bench/models.py``
runs it ("ort opt us"; "-" where it fused the node away, e.g. MatMul + Add into
Gemm; its fused nodes of those kinds are listed under the table).

Columns: the node's A and B shapes (after Gemm's transposes are applied: M x K
by K x N), the batch count, the transposes (Gemm's transA/transB; for MatMul
"B^T" when B is a Transpose node's output, a materialised copy), MACs, our
fastest call in us, GMAC/s, onnxruntime's fastest kernel time in us, and the
ratio. Softmax: rows x axis length, no MACs.

Then the rest breakdown: the least CPU time of a whole ``run()`` against the
sum of the fastest node calls, and the executor's phases timed by calling
them directly (input validation and private copies, the partition loop
without the node calls, RunResult assembly), each the fastest of ``--runs``.
Never run as a test.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

os.environ.pop("NUMBA_ENABLE_CUDASIM", None)  # CPU only
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))


def _ort_node_times(path, feeds, threads, runs, optimize=True):
    """onnxruntime's fastest kernel time per node name (us) and op type per name; ``optimize``
    False: graph optimisations off (every node keeps its name: one to one with ours)."""
    import tempfile
    import onnxruntime as ort
    so = ort.SessionOptions()
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.enable_profiling = True
    with tempfile.TemporaryDirectory() as td:
        so.profile_file_prefix = os.path.join(td, "ort")
        sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        for _ in range(runs + 1):
            sess.run(None, feeds)
        prof = sess.end_profiling()
        with open(prof) as f:
            events = json.load(f)
    best: dict[str, float] = {}
    op_of: dict[str, str] = {}
    for ev in events:   # the warm-up run's events too: each node's fastest call drops them
        if ev.get("cat") != "Node" or not ev.get("name", "").endswith("_kernel_time"):
            continue
        name = ev["name"][:-len("_kernel_time")]
        d = float(ev["dur"])
        best[name] = min(best.get(name, math.inf), d)
        op_of[name] = ev.get("args", {}).get("op_name", "?")
    return best, op_of


def _node_info(st, graph):
    """(A shape, B shape, batch, transposes, MACs) of a MatMul/Gemm node, or the Softmax rows."""
    ctx = st.ctx
    op = st.node.op_type
    ins = [tuple(s) if s is not None else None for s in ctx.in_shapes]
    if op in ("MatMul", "Gemm"):
        sa, sb = ins[0], ins[1]
        if op == "Gemm":
            ta = int(ctx.attrs.get("transA", 0))
            tb = int(ctx.attrs.get("transB", 0))
            M, K = (sa[1], sa[0]) if ta else sa
            N = sb[0] if tb else sb[1]
            batch = 1
            tr = ",".join(t for t, on in (("A^T", ta), ("B^T", tb)) if on) or "-"
            const_b = ctx.const(1) is not None
            tr += " (B const)" if const_b else ""
            bias = "bias" if ctx.has_input(2) else ""
            return f"{M}x{K}", f"{K}x{N}", batch, tr + (" +" + bias if bias else ""), M * K * N
        a2 = (1,) + sa if len(sa) == 1 else sa
        b2 = sb + (1,) if len(sb) == 1 else sb
        M, K, N = a2[-2], a2[-1], b2[-1]
        import numpy as np
        ob = tuple(np.broadcast_shapes(a2[:-2], b2[:-2]))
        batch = math.prod(ob)
        prod = graph.values[st.node.inputs[1]].producer
        src = graph.nodes[prod].op_type if prod is not None else ("const" if ctx.const(1) is not None else "input")
        tr = "B^T (Transpose)" if src == "Transpose" else f"B from {src}"
        return "x".join(map(str, sa)), "x".join(map(str, sb)), batch, tr, batch * M * K * N
    xs = ins[0]
    ax = int(ctx.attrs.get("axis", -1))
    ax = ax + len(xs) if ax < 0 else ax
    return "x".join(map(str, xs)), f"axis {ax} ({xs[ax]})", math.prod(xs[:ax]) * math.prod(xs[ax + 1:]), "-", 0


def profile_family(name, threads, runs, ops):
    import numba
    import hetero_explore as he
    from hetero_explore.execution.executor import HeterogeneousExecutor
    from hetero_explore.runner.core import instrument
    from hetero_explore.providers import cpu
    import models as bm

    path, feeds = bm.export(name)
    graph = he.load_model(str(path))
    plan = he.plan(graph, [cpu()])
    if plan.execution_blockers:
        print(f"## {name}: declined ({plan.execution_blockers[0].detail})")
        return
    numba.set_num_threads(threads)
    ex = HeterogeneousExecutor(plan)
    ex.run(feeds)
    clock = time.perf_counter
    rows = []       # (st, rec)
    allrec = []
    for progs in ex._pool:
        for prog in progs:
            if prog is None:
                continue

            def wrap(st, call):
                rec = []
                allrec.append((st.node.op_type, rec))
                if st.node.op_type in ops:
                    rows.append((st, rec))

                def timed():
                    t0 = clock()
                    call()
                    rec.append(clock() - t0)
                return timed
            instrument(prog, wrap)   # each node's prebuilt call (its replay, once recorded)
    cpus, walls = [], []
    for _ in range(runs):
        c0, t0 = time.thread_time(), clock()
        ex.run(feeds)
        walls.append(clock() - t0)
        cpus.append(time.thread_time() - c0)
    ort_best, ort_op = _ort_node_times(path, feeds, threads, runs)
    ort_node, _ = _ort_node_times(path, feeds, threads, runs, optimize=False)
    print(f"\n## {name}: {len(graph.nodes)} nodes, {threads} thread(s), {runs} runs; onnxruntime's kernels "
          f"(sum of each node's fastest): {sum(ort_best.values()):.0f} us optimised, "
          f"{sum(ort_node.values()):.0f} us unoptimised; ours {sum(min(r) for _, r in allrec) * 1e6:.0f} us")
    print("(ort us: the same node in an unoptimised onnxruntime session, node for node; ort opt: the "
          "optimised session's node of that name, '-' where it was fused away)")
    print("| node | op | A | B | batch | transposes | MACs | ours us | GMAC/s | ort us | ours/ort | ort opt us |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    matched = set()
    tot_ours = tot_ort = 0.0
    for st, rec in rows:
        a, b, batch, tr, macs = _node_info(st, graph)
        us = min(rec) * 1e6
        oo = ort_best.get(st.node.name)
        if oo is not None:
            matched.add(st.node.name)
        o = ort_node.get(st.node.name)
        tot_ort += o or 0.0
        tot_ours += us
        g = f"{macs / us / 1e3:.1f}" if macs else "-"
        print(f"| {st.node.name} | {st.node.op_type} | {a} | {b} | {batch} | {tr} | {macs} | {us:.1f} | {g} | "
              f"{'-' if o is None else f'{o:.0f}'} | {'-' if o is None else f'{us / max(o, 1):.2f}'} | "
              f"{'-' if oo is None else f'{oo:.0f}'} |")
    print(f"| total | | | | | | | {tot_ours:.0f} | | {tot_ort:.0f} | {tot_ours / max(tot_ort, 1):.2f} | |")
    other = defaultdict(float)
    for nm, d in ort_best.items():
        if nm not in matched and any(k in ort_op[nm] for k in ("MatMul", "Gemm", "Softmax", "Attention")):
            other[ort_op[nm]] += d
    if other:
        print("the optimised onnxruntime session's other nodes of those kinds (fused): " +
              ", ".join(f"{k} {v:.0f} us" for k, v in sorted(other.items())))
    # -- the rest --------------------------------------------------------------------
    in_nodes = sum(min(r) for _, r in allrec)
    best = min(cpus)
    n = len(allrec)
    print(f"\nrest: least run CPU {best * 1e6:.0f} us - node calls {in_nodes * 1e6:.0f} us = "
          f"{(best - in_nodes) * 1e6:.0f} us over {n} nodes ({(best - in_nodes) / max(n, 1) * 1e6:.1f} us/node)"
          " (model_profile.py's figure: the fastest call of each node, each from its own run)")
    # the same run's node calls: what the executor itself adds to each run
    per_run = [walls[i] - sum(r[i] for _, r in allrec) for i in range(runs)]   # wall - wall
    sums = [sum(r[i] for _, r in allrec) for i in range(runs)]
    print(f"  per run (its wall time - its own node calls' wall time): least {min(per_run) * 1e6:.0f} us, median "
          f"{statistics.median(per_run) * 1e6:.0f} us; a run's node calls: least {min(sums) * 1e6:.0f} us, "
          f"median {statistics.median(sums) * 1e6:.0f} us (vs {in_nodes * 1e6:.0f} us summing each node's least)")
    _phases(ex, feeds, runs, clock)
    ex.close()


def _phases(ex, feeds, runs, clock):
    """The executor's per-run phases, each called on its own (fastest of ``runs``)."""
    from hetero_explore.execution.executor import _private_copies
    from hetero_explore.execution.inputs import validate_inputs
    from hetero_explore.runner.core import instrument
    g = ex.plan.graph
    phases = {
        "validate_inputs": lambda: validate_inputs(g, feeds),
        "validate + private copies": lambda: _private_copies(validate_inputs(g, feeds)),
        "whole run() (timed nodes)": lambda: ex.run(feeds),
    }
    progs = ex._pool[0]
    for part_ex, prog in zip(ex.parts, progs):
        if prog is None:
            continue
        saved = prog.items, prog.nodes
        instrument(prog, lambda st, call: (lambda: None))
        t = []
        for _ in range(runs):
            t0 = clock()
            ex.run(feeds)
            t.append(clock() - t0)
        prog.items, prog.nodes = saved
        print(f"  run() with every node call a no-op: {min(t) * 1e6:.0f} us")
        break
    for nm, f in phases.items():
        t = []
        for _ in range(runs):
            t0 = clock()
            f()
            t.append(clock() - t0)
        print(f"  {nm}: {min(t) * 1e6:.1f} us (median {statistics.median(t) * 1e6:.1f})")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="bert,gpt2,vit,mlp", help="comma-separated families")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--ops", default="MatMul,Gemm,Softmax", help="op types listed per node")
    args = ap.parse_args(argv)
    print(f"load {os.getloadavg()}")
    for f in args.only.split(","):
        profile_family(f, args.threads, args.runs, set(args.ops.split(",")))
    print(f"\nload {os.getloadavg()}")


if __name__ == "__main__":
    main()
