"""Models for the newcomer tests (issue 30): a scalar (0-d) input as Silero VAD has, and a
model zoo laid out as ``<name>/model.onnx``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def scalar_input_model() -> onnx.ModelProto:
    """``x[1, 16]`` float and ``sr`` a 0-d int64 (Silero VAD's sample rate) → ``y[1, 16]``:
    ``relu(x * cast(sr) + w)``."""
    w = numpy_helper.from_array(np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 16), "w")
    nodes = [helper.make_node("Cast", ["sr"], ["srf"], name="sr_to_float", to=TensorProto.FLOAT),
             helper.make_node("Mul", ["x", "srf"], ["xs"], name="scale"),
             helper.make_node("Add", ["xs", "w"], ["xa"], name="shift"),
             helper.make_node("Relu", ["xa"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "scalar_input", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16]),
                                                  helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])], initializer=[w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def symbolic_model(width: int = 8) -> onnx.ModelProto:
    """``feat[batch, width]`` (a symbolic batch) → relu → softmax."""
    nodes = [helper.make_node("Relu", ["feat"], ["r"], name="relu"),
             helper.make_node("Softmax", ["r"], ["y"], name="softmax", axis=-1)]
    g = helper.make_graph(nodes, f"symbolic_{width}",
                          [helper.make_tensor_value_info("feat", TensorProto.FLOAT, ["batch", width])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", width])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def zoo(root: Path, names=("resnet", "bert", "vad")) -> list[Path]:
    """A model zoo as hubs lay them out: ``root/<name>/model.onnx``, every file named alike."""
    from hetero_explore.data import models
    makers = {"resnet": lambda: models.cnn("tiny"), "bert": lambda: models.mlp("tiny"),
              "vad": scalar_input_model, "chain": lambda: models.chain("tiny")}
    out = []
    for n in names:
        d = Path(root) / n
        d.mkdir(parents=True, exist_ok=True)
        onnx.save(makers[n](), str(d / "model.onnx"))
        out.append(d / "model.onnx")
    return out


def unnamed_resnet(blocks: int, width: int = 2, image: int = 4) -> onnx.ModelProto:
    """A ResNet-style chain whose nodes have no names (the loader calls them ``Conv_12``) while its
    tensors do (``b17_conv1``, ``b17_sum``), as in many third-party exports: what a Netron user
    searches for is a tensor name. ``5 * blocks + 1`` nodes: a stem Conv, then per block
    Conv 1x1 → Relu → Conv 1x1 → Add (the skip) → Relu."""
    rng = np.random.default_rng(0)
    inits, nodes = [], []

    def w(name):
        inits.append(numpy_helper.from_array((rng.standard_normal((width, width, 1, 1)) * 0.5).astype(np.float32),
                                             name))
        return name

    nodes.append(helper.make_node("Conv", ["x", w("stem_w")], ["stem"]))
    h = "stem"
    for i in range(blocks):
        nodes += [helper.make_node("Conv", [h, w(f"b{i}_w1")], [f"b{i}_conv1"]),
                  helper.make_node("Relu", [f"b{i}_conv1"], [f"b{i}_relu1"]),
                  helper.make_node("Conv", [f"b{i}_relu1", w(f"b{i}_w2")], [f"b{i}_conv2"]),
                  helper.make_node("Add", [f"b{i}_conv2", h], [f"b{i}_sum"]),
                  helper.make_node("Relu", [f"b{i}_sum"], [f"b{i}_out"])]
        h = f"b{i}_out"
    g = helper.make_graph(nodes, f"unnamed_resnet_{blocks}",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width, image, image])],
                          [helper.make_tensor_value_info(h, TensorProto.FLOAT, [1, width, image, image])],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m
