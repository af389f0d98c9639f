"""Re-export the bundled real model ``hetero_explore/data/mobilenet_v3_tiny.onnx``.

A MobileNetV3-style network written with ``torch.nn`` (inverted residuals, depthwise 3x3/5x5
convolutions, squeeze-excite with Hardsigmoid, Hardswish; half width, 10 classes, a 1x3x64x64
image), with seeded random weights and non-trivial BatchNorm statistics, exported by torch's
TorchScript exporter as a user would (``dynamo=False``, opset 17, constant folding on). Its node
names carry the module scopes (``/body/body.3/f/f.4/Conv``), as real exports do.

    python bench/export_bundled.py          # needs torch==2.13.0 (the [bench] extra); writes the file

Nothing is downloaded. The output is deterministic for a given torch version (the producer
version is fixed in the file, the doc string dropped).
"""

from __future__ import annotations

import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "hetero_explore" / "data" / "mobilenet_v3_tiny.onnx"


def build():
    import torch
    from torch import nn
    from torch.nn import functional as F

    class SE(nn.Module):
        def __init__(self, c, r=4):
            super().__init__()
            self.f1 = nn.Conv2d(c, max(c // r, 8), 1)
            self.f2 = nn.Conv2d(max(c // r, 8), c, 1)

        def forward(self, x):
            s = F.adaptive_avg_pool2d(x, 1)
            return x * F.hardsigmoid(self.f2(torch.relu(self.f1(s))))

    class InvRes(nn.Module):
        def __init__(self, cin, exp, cout, k, stride, se, hs):
            super().__init__()
            act = nn.Hardswish if hs else nn.ReLU
            layers = []
            if exp != cin:
                layers += [nn.Conv2d(cin, exp, 1, bias=False), nn.BatchNorm2d(exp), act()]
            layers += [nn.Conv2d(exp, exp, k, stride, k // 2, groups=exp, bias=False), nn.BatchNorm2d(exp), act()]
            if se:
                layers.append(SE(exp))
            layers += [nn.Conv2d(exp, cout, 1, bias=False), nn.BatchNorm2d(cout)]
            self.f = nn.Sequential(*layers)
            self.res = stride == 1 and cin == cout

        def forward(self, x):
            y = self.f(x)
            return x + y if self.res else y

    class MobileNetV3Tiny(nn.Module):
        def __init__(self, classes=10):
            super().__init__()
            cfg = [(8, 8, 8, 3, 2, True, False), (8, 32, 12, 3, 2, False, False), (12, 36, 12, 3, 1, False, False),
                   (12, 48, 20, 5, 2, True, True), (20, 120, 20, 5, 1, True, True), (20, 60, 24, 5, 1, True, True),
                   (24, 144, 48, 5, 2, True, True), (48, 288, 48, 5, 1, True, True)]
            self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.Hardswish())
            self.body = nn.Sequential(*[InvRes(*c) for c in cfg])
            self.head = nn.Sequential(nn.Conv2d(48, 144, 1, bias=False), nn.BatchNorm2d(144), nn.Hardswish())
            self.fc = nn.Sequential(nn.Linear(144, 128), nn.Hardswish(), nn.Linear(128, classes))

        def forward(self, x):
            x = self.head(self.body(self.stem(x)))
            return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    torch.manual_seed(0)
    model = MobileNetV3Tiny().eval()
    with torch.no_grad():
        for m in model.modules():  # non-trivial BatchNorm statistics, as in a trained model
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    return model, torch.randn(1, 3, 64, 64)


def main() -> int:
    import onnx
    import torch
    model, x = build()
    tmp = OUT.with_suffix(".tmp.onnx")
    with torch.no_grad():
        torch.onnx.export(model, (x,), str(tmp), dynamo=False, opset_version=17, input_names=["image"],
                          output_names=["logits"], do_constant_folding=True)
    m = onnx.load(str(tmp))
    m.producer_version = "torch " + torch.__version__.split("+")[0]
    m.doc_string = ""
    m.graph.name = "mobilenet_v3_tiny"
    onnx.checker.check_model(m)
    onnx.save(m, str(OUT))
    tmp.unlink()
    print(f"wrote {OUT} ({OUT.stat().st_size:,} bytes, {len(m.graph.node)} nodes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
