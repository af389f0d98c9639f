"""How long do the plan DAG views take to build and render as the model grows?

Builds synthetic models of 10^3 and 10^4 nodes (a residual chain of
MatMul / Relu / Add with scattered fallback ops that only the second provider
runs), plans them on two VirtualProviders, and times

* building the DOT (``plan.to_graphviz(level=...)``) and
* rendering it to SVG with ``dot`` (``PlanGraph.svg()``),

for the partition view at every size and the node view up to ``--node-max``, with the
picture's size in points (views above ``DOT_PARTITION_LIMIT`` partitions or
``DOT_NODE_LIMIT`` nodes are laid out by ``viz/layout.py``; a long partition chain wraps
into columns). ``--fallback-every 4`` gives about a partition per three nodes.

Usage::

    .venv/bin/python bench/render_scale.py [--sizes 1000 10000] [--fallback-every 50]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's package, not an installed one
import hetero_explore as he  # noqa: E402
from hetero_explore.providers import VirtualProvider  # noqa: E402

FAST = ["MatMul", "Relu", "Add"]
FALLBACK = ["Softmax", "Sigmoid"]


def synthetic_model(n_nodes: int, fallback_every: int = 50, width: int = 8, seed: int = 0):
    """A chain with residual Adds; every ``fallback_every``-th node (jittered) is a fallback op."""
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array(np.eye(width, dtype=np.float32), "W")
    nodes = []
    prev, skip = "x", "x"
    next_fb = int(rng.integers(fallback_every // 2, fallback_every + 1))
    for i in range(n_nodes):
        out = f"v{i}"
        if i == next_fb:
            op = FALLBACK[i % len(FALLBACK)]
            nodes.append(helper.make_node(op, [prev], [out], name=f"{op.lower()}_{i}"))
            next_fb = i + int(rng.integers(fallback_every // 2, fallback_every + 1))
        else:
            op = FAST[i % 3]
            if op == "MatMul":
                ins = [prev, "W"]
            elif op == "Add":
                ins = [prev, skip]
                skip = out
            else:
                ins = [prev]
            nodes.append(helper.make_node(op, ins, [out], name=f"{op.lower()}_{i}"))
        prev = out
    graph = helper.make_graph(nodes, f"synthetic_{n_nodes}",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, width])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [4, width])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def providers():
    return [VirtualProvider("gpu", "cuda:0", ops=FAST),
            VirtualProvider("cpu", "cpu:0", ops=FAST + FALLBACK)]


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--fallback-every", type=int, default=50)
    ap.add_argument("--node-max", type=int, default=1000, help="largest size drawn at node level")
    args = ap.parse_args(argv)

    print(f"{'nodes':>7} {'partitions':>10} {'transfers':>9} {'level':>9} {'layout':>6} "
          f"{'load+plan s':>11} {'build DOT s':>11} {'dot→SVG s':>10} {'SVG KiB':>8} {'picture pt':>15}")
    for n in args.sizes:
        model = synthetic_model(n, args.fallback_every)
        t0 = time.perf_counter()
        g = he.load_model(model)
        p = he.plan(g, providers())
        t_plan = time.perf_counter() - t0
        levels = ["partition"] + (["node"] if n <= args.node_max else [])
        for level in levels:
            dot, t_build = timed(lambda: p.to_graphviz(level=level))
            svg, t_svg = timed(dot.svg)
            m = re.search(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"', svg)
            size = f"{float(m.group(1)):.0f}x{float(m.group(2)):.0f}" if m else "?"
            print(f"{n:>7} {len(p.partitions):>10} {len(p.transfers):>9} {level:>9} {dot.layout:>6} "
                  f"{t_plan:>11.2f} {t_build:>11.3f} {t_svg:>10.2f} {len(svg) / 1024:>8.0f} {size:>15}")


if __name__ == "__main__":
    main()
