"""What the load-time graph optimisation (hetero_explore.load.optimize) changes: node counts
before/after and warm run time with ``optimize`` on and off, on the CPU provider.

    PYTHONPATH=. python bench/optimize_effect.py                      # resnet18_like (224x224, width 64) and the demo
    PYTHONPATH=. python bench/optimize_effect.py --image 64 --width 16 --runs 5

Each model is loaded twice (``optimize=False`` / ``True``), planned on ``cpu`` only and run
once untimed (compiles what numba's cache lacks), then ``--runs`` times, the two
configurations interleaved; the median and the fastest run are printed. The max abs difference between the two graphs' outputs is printed too (Conv+BN
folding moves the rounding; MatMul+Add → Gemm is bitwise).
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def measure(label, model, input_shapes, feeds, runs):
    import hetero_explore as he
    from hetero_explore.execution.executor import HeterogeneousExecutor
    from hetero_explore.load.optimize import summary_text

    graphs, exes, outs = {}, {}, {}
    for opt in (False, True):
        g = graphs[opt] = he.load_model(model, input_shapes=input_shapes, optimize=opt)
        if feeds is None:
            from hetero_explore.execution.inputs import random_inputs
            feeds = random_inputs(g, seed=0)
        exes[opt] = HeterogeneousExecutor(he.plan(g, ["cpu"]))
        outs[opt] = exes[opt].run(feeds).outputs          # untimed: compiles what the cache lacks
    times = {False: [], True: []}
    for _ in range(runs):                                  # interleaved: load on the machine hits both alike
        for opt in (False, True):
            t = time.perf_counter()
            exes[opt].run(feeds)
            times[opt].append(time.perf_counter() - t)
    for ex in exes.values():
        ex.close()
    rows = [(opt, len(graphs[opt].nodes), float(np.median(times[opt])), float(np.min(times[opt])),
             summary_text(graphs[opt].optimizations) or "-") for opt in (False, True)]
    diff = max(float(np.max(np.abs(outs[True][k].astype(np.float64) - outs[False][k].astype(np.float64))))
               for k in outs[False])
    print(f"\n{label}")
    print(f"  {'optimize':<9} {'nodes':>6} {'median run':>11} {'fastest':>11}  rewrites")
    for opt, n, t, tmin, text in rows:
        print(f"  {str(opt):<9} {n:>6} {1000 * t:>8.2f} ms {1000 * tmin:>8.2f} ms  {text}")
    print(f"  speed-up {rows[0][2] / rows[1][2]:.2f}x; max |optimised - unoptimised| = {diff:.3g}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", type=int, default=224, help="resnet18_like input size (default 224)")
    ap.add_argument("--width", type=int, default=64, help="resnet18_like base width (default 64)")
    ap.add_argument("--runs", type=int, default=10, help="timed runs per configuration (default 10)")
    args = ap.parse_args(argv)
    from hetero_explore.data import demo, models

    measure(f"models.resnet18_like(image={args.image}, width={args.width})",
            models.resnet18_like(image=args.image, width=args.width), None, None, args.runs)
    measure("demo model (batch 1)", demo.demo_model(), demo.demo_input_shapes(), demo.demo_inputs(), args.runs)


if __name__ == "__main__":
    main()
