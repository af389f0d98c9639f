"""Planning speed at scale, side by side with torch.fx's CapabilityBasedPartitioner.

    python bench/plan_scale.py [--sizes 1000,10000,100000] [--repeat 3] [--no-torch]

Synthetic transformer-like chains (MatMul → Add(residual) → activation ...)
with scattered fallback ops (Erf: only the CPU supports it), 2 or 3 providers.
For each size: hetero_explore.plan() time (graph already loaded; "first" includes
building the graph's integer arrays, "plan" is the median re-plan), partitions
and transfers; torch.fx's CapabilityBasedPartitioner.propose_partitions() on
an fx.Graph of the same structure (supported = everything but erf), its time
and partition count. torch partitions only the supported (accelerator) nodes,
so compare its count with our count of accelerator partitions.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import hetero_explore as he
from hetero_explore.providers import VirtualProvider

ACT = ["Relu", "Tanh", "Sigmoid"]


def structure(n_nodes: int, fallback_every: int = 47, seed: int = 0):
    """[(op, [input indices]), ...]; -1 = graph input. Residual block pattern."""
    rng = np.random.default_rng(seed)
    nodes = []
    prev = -1
    while len(nodes) < n_nodes:
        i = len(nodes)
        nodes.append(("MatMul", [prev]))
        nodes.append(("Add", [i, prev]))               # residual
        op = "Erf" if rng.integers(0, fallback_every // 3 + 1) == 0 else ACT[len(nodes) % 3]
        nodes.append((op, [i + 1]))
        prev = i + 2
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


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--providers", type=int, default=2, choices=(2, 3))
    ap.add_argument("--no-torch", action="store_true")
    a = ap.parse_args(argv)
    print(f"{'nodes':>7} {'prov':>4} {'load s':>7} {'first s':>7} {'plan s':>7} {'parts':>6} {'acc parts':>9} "
          f"{'xfers':>6} {'torch s':>8} {'torch parts':>11} {'torch/first':>11}")
    for n in [int(s) for s in a.sizes.split(",")]:
        nodes = structure(n)
        t0 = time.perf_counter()
        g = he.load_model(onnx_model(nodes))
        load_s = time.perf_counter() - t0
        provs = providers(a.providers)
        he.plan(he.load_model(onnx_model(structure(50))), provs)  # JIT warm-up (cached on disk)
        t0 = time.perf_counter()
        p = he.plan(g, provs)  # first plan of this graph: builds its integer arrays too
        first_s = time.perf_counter() - t0
        times = []
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            p = he.plan(g, provs)  # re-plan, as the explorer does on every change
            times.append(time.perf_counter() - t0)
        plan_s = statistics.median(times)
        acc = sum(1 for part in p.partitions if part.provider != "cpu")
        t_s, t_parts = (float("nan"), -1)
        if not a.no_torch:
            try:
                t_s, t_parts = torch_partition(nodes)
            except ImportError:
                print("  (torch not installed: pip install torch==2.13.0)")
        ratio = t_s / first_s if t_s == t_s else float("nan")
        print(f"{n:>7} {a.providers:>4} {load_s:>7.2f} {first_s:>7.3f} {plan_s:>7.3f} {len(p.partitions):>6} {acc:>9} "
              f"{len(p.transfers):>6} {t_s:>8.3f} {t_parts:>11} {ratio:>11.2f}", flush=True)


if __name__ == "__main__":
    main()
