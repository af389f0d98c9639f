"""Per-iteration overhead of a Loop beyond its kernels, side by side with onnxruntime.

The model: a Loop of N iterations (default 1,000) over a tiny body (``acc = acc + 1`` on a
float32[4], the condition passed through). Reported:

* ``hetero_explore``: wall time of one run of a reused :class:`HeterogeneousExecutor` on the
  CPU provider, divided by N;
* ``kernels``: the same body's kernels run N times by a bare node runner on preallocated
  buffers (what the iterations cannot avoid);
* ``overhead`` = the difference per iteration (the target is <= 20 us);
* ``onnxruntime``: its wall and CPU time per iteration on the same model.

``--growing N`` adds a second model: a Loop of N iterations whose carried value grows by one
element per iteration (``v = Concat(v, [1])``), so the body's input shape differs at every
iteration. Reported: the first run of a fresh executor (specialising the body included) and the
best of the reused executor's runs, wall and CPU time per iteration, the number of body
specialisations (plans) made, and onnxruntime on the same model.

The two hetero_explore figures are measured interleaved (one run of each per repeat) and the
best of each is kept, in wall time and in process CPU time (``time.process_time``): on a
loaded machine the CPU time is the steadier figure of the two.

Run: ``NUMBA_ENABLE_CUDASIM=1 python bench/loop_overhead.py [--trips 1000] [--repeat 5] [--growing 200]``
(from the repository root).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path[:0] = [os.path.join(os.path.dirname(__file__), ".."), os.path.join(os.path.dirname(__file__), "..", "tests")]

import hetero_explore as he  # noqa: E402
from hetero_explore.execution.executor import HeterogeneousExecutor  # noqa: E402
from hetero_explore.providers import resolve  # noqa: E402
from hetero_explore.runner.core import Ledger, NodeRunner  # noqa: E402

import control_models as cm  # noqa: E402


def best_interleaved(fns, repeat):
    """Best wall and CPU time of each function, run alternately ``repeat`` times."""
    wall = [float("inf")] * len(fns)
    cpu = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            wall[i] = min(wall[i], time.perf_counter() - t0)
            cpu[i] = min(cpu[i], time.process_time() - c0)
    return wall, cpu


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trips", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--growing", type=int, default=0,
                    help="also time a growing Loop of this many iterations (0: skip)")
    args = ap.parse_args(argv)
    n = args.trips
    m = cm.counting_loop(n)
    g = he.load_model(m)
    cpu = resolve("cpu")
    x = {"x": np.zeros(4, np.float32)}
    with HeterogeneousExecutor(he.plan(g, [cpu])) as ex:
        ex.run(x)  # specialise and compile the body once
        kernel = next(st.kernel for r in ex.parts for st in r.steps if st.node.op_type == "Loop")
        body_plan = next(iter(kernel._cache.values())).plan
        # the body's kernels alone, on buffers staged once
        bg = body_plan.graph
        runner = NodeRunner.for_graph(bg, cpu)
        with Ledger([cpu]) as led:
            env = {}
            for name in bg.inputs + [k for k in bg.initializer_protos]:
                v = bg.values[name]
                arr = bg.initializer(name) if bg.is_constant(name) else np.zeros(v.shape, v.dtype)
                env[name] = led.allocate(cpu, arr.shape, arr.dtype)
                cpu.copy_from_host(np.asarray(arr), env[name])

            arena = led.allocate(cpu, (runner.arena_size,), np.uint8) if runner.arena_size else None
            prog = runner.bind(arena, fixed=env)   # held like the executor's: records, then replays

            def kernels_only():
                for _ in range(n):
                    for name, b in runner.run({}, led, program=prog).items():
                        led.free(b)
            kernels_only()
            (t_he, t_k), (c_he, c_k) = best_interleaved([lambda: ex.run(x), kernels_only], args.repeat)
    try:
        import onnxruntime as ort
        s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        s.run(None, x)
        (t_ort,), (c_ort,) = best_interleaved([lambda: s.run(None, x)], args.repeat)
    except ImportError:
        t_ort = c_ort = float("nan")
    us = 1e6 / n
    print(f"Loop of {n} iterations, body Add + Identity on float32[4], CPU provider (best of {args.repeat})")
    print(f"  hetero_explore : {t_he * us:8.2f} us/iteration ({t_he * 1e3:.2f} ms per run)")
    print(f"  kernels alone  : {t_k * us:8.2f} us/iteration (the body's node runner on staged buffers)")
    print(f"  overhead       : {(t_he - t_k) * us:8.2f} us/iteration beyond the kernels (target <= 20)")
    print(f"  CPU time       : {c_he * us:8.2f} us/iteration, kernels alone {c_k * us:.2f}, overhead "
          f"{(c_he - c_k) * us:.2f} (process CPU time, steadier on a loaded machine)")
    print(f"  onnxruntime    : {t_ort * us:8.2f} us/iteration wall, {c_ort * us:.2f} CPU "
          f"({t_ort * 1e3:.2f} ms per run)")
    out = {"hetero_explore_us": t_he * us, "kernels_us": t_k * us, "overhead_us": (t_he - t_k) * us,
           "cpu_overhead_us": (c_he - c_k) * us, "onnxruntime_us": t_ort * us,
           "onnxruntime_cpu_us": c_ort * us}
    if args.growing:
        out.update(growing(args.growing, args.repeat))
    return out


def growing(n: int, repeat: int) -> dict:
    """The growing Loop (see the module docs): first run and reused runs, per iteration."""
    m = cm.growing_loop(n)
    g = he.load_model(m)
    cpu = resolve("cpu")
    x = {"x": np.zeros(1, np.float32)}
    with HeterogeneousExecutor(he.plan(g, [cpu])) as ex:
        t0, c0 = time.perf_counter(), time.process_time()
        first = ex.run(x)
        t_first, c_first = time.perf_counter() - t0, time.process_time() - c0
        assert first.outputs["y"].shape == (n + 1,), first.outputs["y"].shape
        kernel = next(st.kernel for r in ex.parts for st in r.steps if st.node.op_type == "Loop")
        plans_first = kernel.stats.specialisations
        (t_re,), (c_re,) = best_interleaved([lambda: ex.run(x)], repeat)
        plans_all = kernel.stats.specialisations
    try:
        import onnxruntime as ort
        s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        s.run(None, x)
        wall, cpu_t = best_interleaved([lambda: s.run(None, x)], repeat)
        t_ort, c_ort = wall[0], cpu_t[0]
    except ImportError:
        t_ort = c_ort = float("nan")
    us = 1e6 / n
    print(f"\nGrowing Loop of {n} iterations (v = Concat(v, [1]): a new body input shape every iteration), "
          f"CPU provider")
    print(f"  first run      : {t_first * us:8.2f} us/iteration wall, {c_first * us:8.2f} CPU "
          f"({plans_first} body specialisations)")
    print(f"  reused (best {repeat}): {t_re * us:8.2f} us/iteration wall, {c_re * us:8.2f} CPU "
          f"({plans_all - plans_first} more specialisations over {repeat} runs)")
    print(f"  onnxruntime    : {t_ort * us:8.2f} us/iteration wall, {c_ort * us:8.2f} CPU")
    return {"growing_first_us": t_first * us, "growing_first_cpu_us": c_first * us,
            "growing_reused_us": t_re * us, "growing_reused_cpu_us": c_re * us,
            "growing_plans_first": plans_first, "growing_plans_reused": plans_all - plans_first,
            "growing_onnxruntime_us": t_ort * us, "growing_onnxruntime_cpu_us": c_ort * us}


if __name__ == "__main__":
    main()
