"""The min-transfer placement policy against priority first-fit on generated models.

    python bench/min_transfer.py [--execute] [--torch] [--models a,b]

For each model of hetero_explore.data.models and a deny mask on the virtual GPU
(ops that real accelerators' profiles often lack, one at a time), plans with
policy="priority" and policy="min-transfer", and prints transfers, bytes moved
and the cost model's estimated seconds. With --execute it also runs both plans
and checks their outputs are byte-identical to the CPU reference run. With
--torch it adds models exported by torch's TorchScript exporter from small
``torch.nn`` modules with seeded random weights (a transformer encoder layer, a
CNN block, a GRU-free MLP mixer); it needs torch.
"""

from __future__ import annotations

import argparse

import numpy as np

import hetero_explore as he
from hetero_explore.data import models
from hetero_explore.providers import cpu, mask, virtual_gpu

CASES = [("mlp", lambda: models.mlp("small"), ["Gemm", "Relu", "Softmax"]),
         ("cnn", lambda: models.cnn("small"), ["Relu", "MaxPool", "BatchNormalization"]),
         ("transformer", lambda: models.transformer("small"), ["Softmax", "Erf", "LayerNormalization", "Add"]),
         ("resnet18_like", lambda: models.resnet18_like(image=64, width=16), ["Relu", "Add", "MaxPool"])]


def torch_cases():
    """(name, ModelProto maker, denies) of small torch modules exported to ONNX."""
    import io
    import warnings

    import onnx
    import torch
    from torch import nn

    def export(module, *example):
        torch.manual_seed(0)
        module = module.eval()
        buf = io.BytesIO()
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
            torch.onnx.export(module, example, buf, dynamo=False, opset_version=17)
        return onnx.load_from_string(buf.getvalue())

    class Encoder(nn.Module):  # one pre-norm encoder block (nn.TransformerEncoderLayer's eval
        def __init__(self, d=32, heads=4):  # fast path does not export)
            super().__init__()
            self.h, self.d = heads, d
            self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.n1(x)).reshape(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
            att = torch.softmax(q @ k.transpose(-1, -2) / (d // self.h) ** 0.5, dim=-1)
            x = x + self.out((att @ v).transpose(1, 2).reshape(b, t, d))
            return x + self.ff(self.n2(x))

    def encoder():
        torch.manual_seed(0)
        return export(Encoder(), torch.randn(1, 8, 32))

    def cnn():
        torch.manual_seed(0)
        net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                            nn.Flatten(), nn.Linear(16, 10), nn.Softmax(dim=-1))
        return export(net, torch.randn(1, 3, 16, 16))

    class Mixer(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(16)
            self.tok = nn.Linear(8, 8)
            self.ch = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16))

        def forward(self, x):
            x = x + self.tok(self.norm(x).transpose(1, 2)).transpose(1, 2)
            return x + self.ch(self.norm(x))

    def mixer():
        torch.manual_seed(0)
        return export(Mixer(), torch.randn(2, 8, 16))

    return [("torch_encoder", encoder, ["Softmax", "Erf", "LayerNormalization", "Add", "Transpose"]),
            ("torch_cnn", cnn, ["Relu", "MaxPool", "Softmax"]),
            ("torch_mixer", mixer, ["Erf", "Transpose", "LayerNormalization"])]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--execute", action="store_true")
    ap.add_argument("--torch", action="store_true", help="add models exported from torch.nn modules")
    ap.add_argument("--models", default="", help="comma-separated model names to keep (default: all)")
    a = ap.parse_args(argv)
    cases = CASES + (torch_cases() if a.torch else [])
    if a.models:
        keep = a.models.split(",")
        cases = [c for c in cases if c[0] in keep]
    print(f"{'model':>14} {'deny':>18} {'policy':>12} {'moved':>5} {'xfers':>5} {'MiB':>8} {'xfer ms':>8} "
          f"{'kern ms':>8} {'total ms':>8} {'parts':>5} {'identical':>9}")
    for name, make, denies in cases:
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
