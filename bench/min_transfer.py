"""The min-transfer placement policy against priority first-fit on generated models.

    python bench/min_transfer.py [--execute]

For each model of hetero_explore.models and a deny mask on the virtual GPU
(ops that real accelerators' profiles often lack, one at a time), plans with
policy="priority" and policy="min-transfer", and prints transfers, bytes moved
and the cost model's estimated seconds. With --execute it also runs both plans
and checks their outputs are byte-identical to the CPU reference run.
"""

from __future__ import annotations

import argparse

import numpy as np

import hetero_explore as he
from hetero_explore import models
from hetero_explore.providers import cpu, mask, virtual_gpu

CASES = [("mlp", lambda: models.mlp("small"), ["Gemm", "Relu", "Softmax"]),
         ("cnn", lambda: models.cnn("small"), ["Relu", "MaxPool", "BatchNormalization"]),
         ("transformer", lambda: models.transformer("small"), ["Softmax", "Erf", "LayerNormalization", "Add"]),
         ("resnet18_like", lambda: models.resnet18_like(image=64, width=16), ["Relu", "Add", "MaxPool"])]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--execute", action="store_true")
    a = ap.parse_args(argv)
    print(f"{'model':>14} {'deny':>18} {'policy':>12} {'moved':>5} {'xfers':>5} {'MiB':>8} {'xfer ms':>8} "
          f"{'kern ms':>8} {'total ms':>8} {'parts':>5} {'identical':>9}")
    for name, make, denies in CASES:
        g = he.load_model(make())
        ref = None
        for deny in denies:
            if deny not in g.op_types():
                continue
            provs = [mask(virtual_gpu(), deny=[deny]), cpu()]
            plans = {pol: he.plan(g, provs, policy=pol) for pol in ("priority", "min-transfer")}
            for pol, p in plans.items():
                e = p.estimate()
                moved = sum(x != y for x, y in zip(p.assignment, plans["priority"].assignment))
                ident = ""
                if a.execute:
                    inputs = he.random_inputs(p.graph, seed=0)
                    if ref is None:
                        ref = he.execute_reference(p.graph, cpu(), inputs)
                    run = he.execute(p, inputs)
                    ident = str(all(np.array_equal(np.asarray(run.outputs[k]).view(np.uint8),
                                                   np.asarray(ref.outputs[k]).view(np.uint8))
                                    for k in ref.outputs))
                print(f"{name:>14} {deny:>18} {pol:>12} {moved:>5} {e['transfers']:>5} "
                      f"{e['transfer_bytes'] / 2**20:>8.3f} {e['transfer_seconds'] * 1e3:>8.3f} "
                      f"{e['kernel_seconds'] * 1e3:>8.3f} {e['total_seconds'] * 1e3:>8.3f} "
                      f"{len(p.partitions):>5} {ident:>9}", flush=True)


if __name__ == "__main__":
    main()
