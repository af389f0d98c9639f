"""Planning speed and partition quality at scale, beside torch.fx's CapabilityBasedPartitioner.

    python bench/plan_scale.py [--sizes 1000,10000,100000] [--unsupported 0.05,0.2]
                               [--repeat 3] [--no-torch] [--torch-max-nodes 10000]
                               [--torch-budget 120] [--clock wall|cpu]

Synthetic transformer-like graphs (MatMul → Add(residual) → activation blocks,
some skip connections) where a fraction of all nodes is Erf, which the gpu does
not run. Per size and fraction:

* ``gpu parts`` / ``gpu LB``: our gpu partitions and the path lower bound (the
  largest number of separate gpu runs along one path); equal means optimal;
* ``fx parts`` / ``fx s``: torch.fx's count of supported partitions (it partitions
  only the supported nodes) and the seconds of ``propose_partitions()``, where it
  finishes: it runs in a child process killed after ``--torch-budget`` seconds
  (shown as ``>budget``), and not at all above ``--torch-max-nodes``;
* ``load``: :func:`~hetero_explore.load_model` of the graph (onnx's checker and shape
  inference, the IR, and the planner's integer arrays, which are built at load time);
* times of ``plan()`` with plain providers (``VirtualProvider`` op tables) and with
  realistic ones (``[mask(virtual_gpu(), deny=["Erf"]), cpu()]``: the CUDA
  provider's op table executing CPU kernels): ``first`` on a freshly loaded graph
  (its integer arrays were built by the load; ``arrays`` times building them again
  alone), ``replan`` (median), and ``deny`` = a re-plan after denying one more op
  (Tanh) on the gpu; ``explorer`` = the same deny through
  :class:`~hetero_explore.Explorer` (its re-plan reuses the graph's arrays and the
  providers' remembered answers).

``--clock cpu`` times with the process's CPU time instead of the wall clock: on a
shared machine the wall clock measures the other processes too.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's package, not an installed one

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import hetero_explore as he
from hetero_explore.providers import VirtualProvider

ACT = ["Relu", "Tanh", "Sigmoid"]


def structure(n_nodes: int, unsupported: float = 0.05, seed: int = 0):
    """[(op, [input indices]), ...]; -1 = graph input. A fraction ``unsupported`` of
    all nodes is Erf; 30 % of blocks add a skip connection over the previous block."""
    rng = np.random.default_rng(seed)
    nodes = []
    prev = -1
    while len(nodes) < n_nodes:
        i = len(nodes)
        nodes.append(("MatMul", [prev]))
        nodes.append(("Add", [i, prev]))               # residual
        op = "Erf" if rng.random() < 3 * unsupported else ACT[int(rng.integers(3))]
        nodes.append((op, [i + 1]))
        if i >= 3 and rng.random() < 0.3:
            nodes.append(("Add", [i + 2, i - 1]))      # skip over one block
        prev = len(nodes) - 1
    return nodes[:n_nodes]


def onnx_model(nodes):
    protos = []
    for i, (op, ins) in enumerate(nodes):
        names = ["x" if j < 0 else f"v{j}" for j in ins]
        if op == "MatMul":
            names = names + ["W"]
        protos.append(helper.make_node(op, names, [f"v{i}"], name=f"n{i}"))
    w = numpy_helper.from_array(np.eye(16, dtype=np.float32), "W")
    g = helper.make_graph(protos, "scale", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                          [helper.make_tensor_value_info(f"v{len(nodes) - 1}", TensorProto.FLOAT, [4, 16])],
                          initializer=[w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def realistic_providers():
    from hetero_explore.providers import cpu, mask, virtual_gpu
    return [mask(virtual_gpu(), deny=["Erf"]), cpu()]


def providers(k: int):
    everything = ["MatMul", "Add", "Erf"] + ACT
    gpu = VirtualProvider("gpu", "cuda:0", ops=["MatMul", "Add"] + ACT)
    cpu = VirtualProvider("cpu", "cpu:0", ops=everything)
    if k == 2:
        return [gpu, cpu]
    npu = VirtualProvider("npu", "npu:0", ops=["MatMul", "Add", "Relu", "Sigmoid"])  # no Tanh, no Erf
    return [npu, gpu, cpu]


def torch_partition(nodes):
    import torch
    import torch.fx as fx
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
    from torch.fx.passes.operator_support import OperatorSupportBase

    fns = {"MatMul": torch.matmul, "Add": torch.add, "Erf": torch.erf, "Relu": torch.relu,
           "Tanh": torch.tanh, "Sigmoid": torch.sigmoid}
    g = fx.Graph()
    x = g.placeholder("x")
    w = g.placeholder("w")
    vals = []
    for op, ins in nodes:
        args = [x if j < 0 else vals[j] for j in ins]
        if op == "MatMul":
            args.append(w)
        vals.append(g.call_function(fns[op], tuple(args)))
    g.output(vals[-1])
    gm = fx.GraphModule(torch.nn.Module(), g)

    class Support(OperatorSupportBase):
        def is_node_supported(self, submodules, node):
            return node.op == "call_function" and node.target is not torch.erf

    part = CapabilityBasedPartitioner(gm, Support(), allows_single_node_partition=True)
    t0 = time.perf_counter()
    parts = part.propose_partitions()
    return time.perf_counter() - t0, len(parts)


def _torch_child(nodes, conn):
    try:
        conn.send(torch_partition(nodes))
    except ImportError:
        conn.send((float("nan"), "no torch"))


def torch_within(nodes, budget: float):
    """torch.fx's (seconds, partitions) in a child process, or (nan, ">budget s") when it
    does not finish within ``budget`` seconds (the child is then killed)."""
    import multiprocessing as mp
    ctx = mp.get_context("fork")
    here, there = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_torch_child, args=(nodes, there), daemon=True)
    child.start()
    there.close()
    try:
        if here.poll(budget):
            return here.recv()
        return float("nan"), f">{budget:g}s"
    finally:
        if child.is_alive():
            child.kill()
        child.join()


CLOCK = time.perf_counter


def _time_plans(model, provs, repeat, explorer=False):
    from hetero_explore.ir.arrays import build_arrays
    from hetero_explore.providers import mask
    t0 = CLOCK()
    g = he.load_model(model)  # builds the graph's integer arrays too
    load = CLOCK() - t0
    t0 = CLOCK()
    p = he.plan(g, provs)  # first plan of this graph
    first = CLOCK() - t0
    keep, g._arrays = g._arrays, None
    t0 = CLOCK()
    build_arrays(g)  # again, alone (string hashes are cached by now: a little faster)
    arrays = CLOCK() - t0
    g._arrays = keep
    times = []
    for _ in range(repeat):
        t0 = CLOCK()
        he.plan(g, provs)
        times.append(CLOCK() - t0)
    denied = [mask(provs[0], deny=["Tanh"])] + list(provs[1:])
    t0 = CLOCK()
    he.plan(g, denied)
    deny = CLOCK() - t0
    ex_deny = float("nan")
    if explorer:
        ex = he.Explorer(g, provs)
        ex.plan
        ex.deny(provs[0].name, ["Tanh"])
        t0 = CLOCK()
        ex.plan
        ex_deny = CLOCK() - t0
    return p, load, first, arrays, statistics.median(times), deny, ex_deny


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--unsupported", default="0.05,0.2")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--torch-max-nodes", type=int, default=10000,
                    help="skip torch.fx above this size (it is quadratic)")
    ap.add_argument("--torch-budget", type=float, default=120.0,
                    help="seconds torch.fx may take per graph before it is stopped")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="wall clock, or this process's CPU time (steadier on a shared machine)")
    a = ap.parse_args(argv)
    global CLOCK
    CLOCK = time.perf_counter if a.clock == "wall" else time.process_time
    warm = onnx_model(structure(60))
    he.plan(he.load_model(warm), providers(2))  # JIT warm-up (cached on disk)
    he.plan(he.load_model(warm), realistic_providers())
    print(f"{'nodes':>7} {'unsup':>5} {'gpu parts':>9} {'gpu LB':>7} {'cpu parts':>9} {'cpu LB':>7} "
          f"{'fx parts':>8} {'fx s':>7} | {'load':>6} | {'plain first':>11} {'replan':>7} {'deny':>7} | "
          f"{'real first':>10} {'arrays':>7} {'replan':>7} {'deny':>7} {'explorer':>8}   ({a.clock} s)")
    for n in [int(x) for x in a.sizes.split(",")]:
        for frac in [float(x) for x in a.unsupported.split(",")]:
            nodes = structure(n, frac)
            model = onnx_model(nodes)
            p, load, f1, _, r1, d1, _ = _time_plans(model, providers(2), a.repeat)
            q, _, f2, a2, r2, d2, e2 = _time_plans(model, realistic_providers(), a.repeat, explorer=True)
            b = q.partition_bounds()
            bp = p.partition_bounds()
            assert bp["gpu"]["partitions"] == b["gpu"]["partitions"]
            t_s, t_parts = float("nan"), "-"
            if not a.no_torch and n <= a.torch_max_nodes:
                t_s, t_parts = torch_within(nodes, a.torch_budget)
            print(f"{n:>7} {frac:>5.2f} {b['gpu']['partitions']:>9} {b['gpu']['lower_bound']:>7} "
                  f"{b['cpu']['partitions']:>9} {b['cpu']['lower_bound']:>7} {t_parts!s:>8} {t_s:>7.2f} | "
                  f"{load:>6.2f} | "
                  f"{f1:>11.3f} {r1:>7.3f} {d1:>7.3f} | {f2:>10.3f} {a2:>7.3f} {r2:>7.3f} {d2:>7.3f} {e2:>8.3f}",
                  flush=True)


if __name__ == "__main__":
    main()
