"""Small generated ONNX models for tests, demos and benchmarks.

Each generator returns an ``onnx.ModelProto`` (opset 17, float32, static
shapes) built with ``onnx.helper`` and weights drawn from a seeded generator,
so the same arguments always give the same bytes::

    from hetero_explore import load_model

    from hetero_explore.data import models
    from hetero_explore.execution.inputs import random_inputs
    m = models.mlp("tiny")                    # a preset
    m = models.cnn("small", blocks=3)         # a preset with one dimension overridden
    feeds = random_inputs(load_model(m), seed=1)   # {input name: array}

Presets (``size=``): ``"tiny"`` (a few hundred elements per tensor: fit for
the CUDA simulator), ``"small"``, ``"medium"``, ``"large"`` (benchmarks).
Every dimension of a preset can be overridden by keyword.

* :func:`mlp` — MatMul/Add/Relu hidden layers, a Gemm classifier, Softmax.
* :func:`cnn` — Conv/BatchNormalization/Relu stem, ResNet-style residual
  blocks (Conv/BN/Relu/Conv/BN, Add, Relu), MaxPool, GlobalAveragePool,
  Flatten, Gemm.
* :func:`transformer` — pre-norm encoder blocks: LayerNormalization,
  multi-head self-attention (MatMul/Add, Reshape, Transpose, Mul by the scale,
  Softmax), residual Add, a feed-forward block with Gelu written as Erf
  (``0.5·x·(1 + erf(x/√2))``: Div, Erf, Add, Mul).
* :func:`chain` — Add/Relu repeated; the smallest model with many nodes.
* :func:`resnet18_like` — the ResNet-18 topology (7×7/2 stem, 3×3/2 max pool,
  four stages of two basic blocks with 1×1/2 projection shortcuts, global
  average pool, classifier) at a chosen input size; benchmarks.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17

_PRESETS = {
    "mlp": {
        "tiny": dict(batch=2, features=8, hidden=(16,), classes=4),
        "small": dict(batch=8, features=64, hidden=(128, 128), classes=10),
        "medium": dict(batch=32, features=256, hidden=(512, 512), classes=10),
        "large": dict(batch=64, features=1024, hidden=(2048, 2048, 2048), classes=100),
    },
    "cnn": {
        "tiny": dict(batch=1, channels=2, image=6, width=4, blocks=1, classes=3),
        "small": dict(batch=1, channels=3, image=16, width=8, blocks=2, classes=10),
        "medium": dict(batch=2, channels=3, image=32, width=16, blocks=2, classes=10),
        "large": dict(batch=4, channels=3, image=64, width=32, blocks=3, classes=100),
    },
    "transformer": {
        "tiny": dict(batch=1, seq=4, dim=8, heads=2, layers=1, ff=16),
        "small": dict(batch=2, seq=16, dim=32, heads=4, layers=2, ff=64),
        "medium": dict(batch=4, seq=64, dim=128, heads=4, layers=2, ff=256),
        "large": dict(batch=8, seq=128, dim=256, heads=8, layers=4, ff=1024),
    },
    "chain": {
        "tiny": dict(batch=2, width=8, layers=4),
        "small": dict(batch=4, width=64, layers=16),
        "medium": dict(batch=16, width=256, layers=32),
        "large": dict(batch=64, width=1024, layers=64),
    },
}

SIZES = ("tiny", "small", "medium", "large")


def _params(kind: str, size: str, overrides: dict) -> dict:
    presets = _PRESETS[kind]
    if size not in presets:
        raise ValueError(f"unknown size {size!r} for {kind}(); choose one of {', '.join(presets)}")
    p = dict(presets[size])
    for k, v in overrides.items():
        if v is None:
            continue
        if k not in p:
            raise TypeError(f"{kind}() has no dimension {k!r}; dimensions are: {', '.join(p)}")
        p[k] = v
    return p


class _Builder:
    """Collects nodes and seeded initializers; hands out unique names."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._count: dict[str, int] = {}

    def name(self, base: str) -> str:
        i = self._count.get(base, 0)
        self._count[base] = i + 1
        return f"{base}_{i}"

    def const(self, base: str, array) -> str:
        name = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, base: str, shape, fan_in: int) -> str:
        w = self.rng.standard_normal(shape).astype(np.float32) * np.float32(1.0 / math.sqrt(max(fan_in, 1)))
        return self.const(base, w)

    def small(self, base: str, shape, scale: float = 0.1) -> str:
        return self.const(base, (self.rng.standard_normal(shape) * scale).astype(np.float32))

    def op(self, op_type: str, inputs, out: str | None = None, **attrs) -> str:
        """Append a one-output node; its output is named ``out`` or after the node."""
        name = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out or name], name=name, **attrs))
        return out or name

    def model(self, graph_name: str, inputs, outputs, doc: str) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, graph_name, inputs, outputs, initializer=self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="hetero_explore.data.models", doc_string=doc)
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


def _vi(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def mlp(size: str = "tiny", *, batch: int | None = None, features: int | None = None,
        hidden: tuple | None = None, classes: int | None = None, seed: int = 0) -> onnx.ModelProto:
    """A multi-layer perceptron.

    ``x[batch, features]`` → (MatMul, Add, Relu) per hidden width → Gemm(transB=1)
    → ``logits[batch, classes]`` → Softmax → ``probs``. Outputs: ``probs``, ``logits``.
    """
    p = _params("mlp", size, dict(batch=batch, features=features, hidden=hidden, classes=classes))
    b = _Builder(seed)
    h, width = "x", p["features"]
    for out in tuple(p["hidden"]):
        w = b.weight("w", (width, out), width)
        h = b.op("Relu", [b.op("Add", [b.op("MatMul", [h, w]), b.small("b", (out,))])])
        width = out
    wc = b.weight("wc", (p["classes"], width), width)
    logits = b.op("Gemm", [h, wc, b.small("bc", (p["classes"],))], out="logits", transB=1)
    b.op("Softmax", [logits], out="probs", axis=-1)
    shape_out = (p["batch"], p["classes"])
    return b.model("mlp", [_vi("x", (p["batch"], p["features"]))],
                   [_vi("probs", shape_out), _vi("logits", shape_out)],
                   f"generated MLP {p}")


def _conv_bn(b: _Builder, x: str, cin: int, cout: int, relu: bool) -> str:
    w = b.weight("conv_w", (cout, cin, 3, 3), cin * 9)
    y = b.op("Conv", [x, w, b.small("conv_b", (cout,))], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    scale = (1.0 + b.rng.standard_normal(cout) * 0.1).astype(np.float32)
    bias = (b.rng.standard_normal(cout) * 0.1).astype(np.float32)
    mean = (b.rng.standard_normal(cout) * 0.1).astype(np.float32)
    var = (1.0 + np.abs(b.rng.standard_normal(cout)) * 0.1).astype(np.float32)
    y = b.op("BatchNormalization", [y, b.const("bn_scale", scale), b.const("bn_bias", bias),
                                    b.const("bn_mean", mean), b.const("bn_var", var)], epsilon=1e-5)
    return b.op("Relu", [y]) if relu else y


def cnn(size: str = "tiny", *, batch: int | None = None, channels: int | None = None,
        image: int | None = None, width: int | None = None, blocks: int | None = None,
        classes: int | None = None, seed: int = 0) -> onnx.ModelProto:
    """A small ResNet-style convolutional network.

    ``x[batch, channels, image, image]`` → Conv3x3/BN/Relu stem → ``blocks`` ×
    (Conv/BN/Relu/Conv/BN + skip Add, Relu) → MaxPool 2×2 → GlobalAveragePool →
    Flatten → Gemm → ``logits[batch, classes]``.
    """
    p = _params("cnn", size, dict(batch=batch, channels=channels, image=image, width=width,
                                  blocks=blocks, classes=classes))
    b = _Builder(seed)
    c = p["width"]
    h = _conv_bn(b, "x", p["channels"], c, relu=True)
    for _ in range(p["blocks"]):
        r = _conv_bn(b, h, c, c, relu=True)
        r = _conv_bn(b, r, c, c, relu=False)
        h = b.op("Relu", [b.op("Add", [r, h])])
    h = b.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = b.op("Flatten", [b.op("GlobalAveragePool", [h])], axis=1)
    b.op("Gemm", [h, b.weight("fc_w", (p["classes"], c), c), b.small("fc_b", (p["classes"],))],
         out="logits", transB=1)
    return b.model("cnn", [_vi("x", (p["batch"], p["channels"], p["image"], p["image"]))],
                   [_vi("logits", (p["batch"], p["classes"]))], f"generated CNN {p}")


def _layer_norm(b: _Builder, x: str, dim: int) -> str:
    gamma = (1.0 + b.rng.standard_normal(dim) * 0.1).astype(np.float32)
    return b.op("LayerNormalization", [x, b.const("ln_gamma", gamma), b.small("ln_beta", (dim,))],
                axis=-1, epsilon=1e-5)


def _linear(b: _Builder, x: str, din: int, dout: int) -> str:
    return b.op("Add", [b.op("MatMul", [x, b.weight("w", (din, dout), din)]), b.small("b", (dout,))])


def transformer(size: str = "tiny", *, batch: int | None = None, seq: int | None = None,
                dim: int | None = None, heads: int | None = None, layers: int | None = None,
                ff: int | None = None, seed: int = 0) -> onnx.ModelProto:
    """A pre-norm transformer encoder.

    ``x[batch, seq, dim]`` → ``layers`` × (LayerNorm → multi-head self-attention →
    residual Add → LayerNorm → Linear/Gelu(Erf)/Linear → residual Add) → ``y``.
    """
    p = _params("transformer", size, dict(batch=batch, seq=seq, dim=dim, heads=heads, layers=layers, ff=ff))
    B, S, D, H, F = p["batch"], p["seq"], p["dim"], p["heads"], p["ff"]
    if D % H:
        raise ValueError(f"dim ({D}) must be a multiple of heads ({H})")
    dh = D // H
    b = _Builder(seed)
    split = b.const("heads_shape", np.array([B, S, H, dh], dtype=np.int64))
    merge = b.const("model_shape", np.array([B, S, D], dtype=np.int64))
    scale = b.const("scale", np.array(1.0 / math.sqrt(dh), dtype=np.float32))
    sqrt2 = b.const("sqrt2", np.array(math.sqrt(2.0), dtype=np.float32))
    one = b.const("one", np.array(1.0, dtype=np.float32))
    half = b.const("half", np.array(0.5, dtype=np.float32))
    h = "x"
    for _ in range(p["layers"]):
        n = _layer_norm(b, h, D)
        q, k, v = (b.op("Reshape", [_linear(b, n, D, D), split]) for _ in range(3))
        q = b.op("Transpose", [q], perm=[0, 2, 1, 3])          # [B, H, S, dh]
        k = b.op("Transpose", [k], perm=[0, 2, 3, 1])          # [B, H, dh, S]
        v = b.op("Transpose", [v], perm=[0, 2, 1, 3])          # [B, H, S, dh]
        att = b.op("Softmax", [b.op("Mul", [b.op("MatMul", [q, k]), scale])], axis=-1)
        ctx = b.op("Transpose", [b.op("MatMul", [att, v])], perm=[0, 2, 1, 3])  # [B, S, H, dh]
        ctx = _linear(b, b.op("Reshape", [ctx, merge]), D, D)
        h = b.op("Add", [h, ctx])
        n = _layer_norm(b, h, D)
        f = _linear(b, n, D, F)
        gelu = b.op("Mul", [b.op("Mul", [f, half]),
                            b.op("Add", [b.op("Erf", [b.op("Div", [f, sqrt2])]), one])])
        h = b.op("Add", [h, _linear(b, gelu, F, D)])
    b.op("Identity", [h], out="y")
    return b.model("transformer", [_vi("x", (B, S, D))], [_vi("y", (B, S, D))],
                   f"generated transformer {p}")


def chain(size: str = "tiny", *, batch: int | None = None, width: int | None = None,
          layers: int | None = None, seed: int = 0) -> onnx.ModelProto:
    """``layers`` × (Add a constant, Relu) on ``x[batch, width]`` → ``y``: only Add and Relu."""
    p = _params("chain", size, dict(batch=batch, width=width, layers=layers))
    b = _Builder(seed)
    h = "x"
    for i in range(p["layers"]):
        last = i == p["layers"] - 1
        h = b.op("Relu", [b.op("Add", [h, b.small("c", (p["width"],), 1.0)])], out="y" if last else None)
    return b.model("chain", [_vi("x", (p["batch"], p["width"]))], [_vi("y", (p["batch"], p["width"]))],
                   f"generated Add/Relu chain {p}")


def _conv_bn_k(b: _Builder, x: str, cin: int, cout: int, k: int, stride: int, relu: bool) -> str:
    """Conv k×k (stride, 'same'-style padding k//2, no bias) → BatchNormalization (→ Relu)."""
    w = b.weight("conv_w", (cout, cin, k, k), cin * k * k)
    pad = k // 2
    y = b.op("Conv", [x, w], kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)
    scale = (1.0 + b.rng.standard_normal(cout) * 0.1).astype(np.float32)
    bias = (b.rng.standard_normal(cout) * 0.1).astype(np.float32)
    mean = (b.rng.standard_normal(cout) * 0.1).astype(np.float32)
    var = (1.0 + np.abs(b.rng.standard_normal(cout)) * 0.1).astype(np.float32)
    y = b.op("BatchNormalization", [y, b.const("bn_scale", scale), b.const("bn_bias", bias),
                                    b.const("bn_mean", mean), b.const("bn_var", var)], epsilon=1e-5)
    return b.op("Relu", [y]) if relu else y


def resnet18_like(*, batch: int = 1, image: int = 224, channels: int = 3, width: int = 64,
                  classes: int = 1000, seed: int = 0) -> onnx.ModelProto:
    """The ResNet-18 topology (He et al. 2015, torchvision ``resnet18``), unfused, seeded weights.

    ``x[batch, channels, image, image]`` → Conv 7×7/2 (``width`` channels)/BN/Relu →
    MaxPool 3×3/2 (pad 1) → four stages of two basic blocks (Conv 3×3/BN/Relu/Conv
    3×3/BN + shortcut, Add, Relu) with ``width``·(1, 2, 4, 8) channels; the first
    block of stages 2–4 has stride 2 and a Conv 1×1/2 + BN projection shortcut →
    GlobalAveragePool → Flatten → Gemm → ``logits[batch, classes]``.

    BatchNormalization is kept as its own node (not folded into the Conv), as an
    exporter in training mode would leave it. With the defaults: 11.7 M weights,
    1.8 GMAC per image; ``image=112`` is a quarter of the arithmetic.
    """
    if image < 32:
        raise ValueError(f"image ({image}) must be at least 32 (five stride-2 stages)")
    b = _Builder(seed)
    h = _conv_bn_k(b, "x", channels, width, 7, 2, relu=True)
    h = b.op("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = width
    for stage in range(4):
        cout = width * (2 ** stage)
        for block in range(2):
            stride = 2 if (stage > 0 and block == 0) else 1
            r = _conv_bn_k(b, h, cin, cout, 3, stride, relu=True)
            r = _conv_bn_k(b, r, cout, cout, 3, 1, relu=False)
            skip = _conv_bn_k(b, h, cin, cout, 1, stride, relu=False) if (stride != 1 or cin != cout) else h
            h = b.op("Relu", [b.op("Add", [r, skip])])
            cin = cout
    h = b.op("Flatten", [b.op("GlobalAveragePool", [h])], axis=1)
    b.op("Gemm", [h, b.weight("fc_w", (classes, cin), cin), b.small("fc_b", (classes,))],
         out="logits", transB=1)
    return b.model("resnet18_like", [_vi("x", (batch, channels, image, image))],
                   [_vi("logits", (batch, classes))],
                   f"generated ResNet-18 topology batch={batch} image={image} width={width} classes={classes}")


__all__ = ["mlp", "cnn", "transformer", "chain", "resnet18_like", "SIZES", "OPSET"]
