"""The bundled demo model: a small CNN classifier whose logits are clamped to a
range computed at run time (``Clip`` with a non-constant bound) before the
softmax. The CUDA kernel of Clip needs its bounds at build time, so on
``[gpu, cpu]`` that one node falls back to the CPU and the plan is
heterogeneous out of the box, with real transfers around it."""

from __future__ import annotations

from importlib import resources

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DEMO_INPUT = "image"
DEMO_SHAPE = (1, 3, 16, 16)


def build_demo_model(seed: int = 0) -> onnx.ModelProto:
    """Build the demo model from scratch (deterministic weights)."""
    rng = np.random.default_rng(seed)

    def w(name, *shape, scale=0.2):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [
        w("conv1.w", 8, 3, 3, 3), w("conv1.b", 8),
        numpy_helper.from_array(np.ones(8, np.float32), "bn1.scale"),
        numpy_helper.from_array(np.zeros(8, np.float32), "bn1.bias"),
        w("bn1.mean", 8, scale=0.05),
        numpy_helper.from_array((1.0 + rng.random(8) * 0.1).astype(np.float32), "bn1.var"),
        w("conv2.w", 16, 8, 3, 3), w("conv2.b", 16),
        w("fc.w", 10, 16), w("fc.b", 10),
        numpy_helper.from_array(np.array([[0, 3], [0, 7]], np.int64), "watched_classes"),
        numpy_helper.from_array(np.array([8.0], np.float32), "clamp_range"),
        numpy_helper.from_array(np.array([], np.int64), "scalar_shape"),
    ]
    nodes = [
        helper.make_node("Conv", ["image", "conv1.w", "conv1.b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "bn1.scale", "bn1.bias", "bn1.mean", "bn1.var"],
                         ["b1"], name="bn1"),
        helper.make_node("Relu", ["b1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "conv2.w", "conv2.b"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("Add", ["r2", "c2"], ["res"], name="residual"),
        helper.make_node("GlobalAveragePool", ["res"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], name="fc", transB=1),
        helper.make_node("ReduceMax", ["logits"], ["top"], name="top_logit", keepdims=0),
        helper.make_node("Sub", ["top", "clamp_range"], ["floor"], name="clamp_floor"),
        helper.make_node("Reshape", ["floor", "scalar_shape"], ["floor_s"], name="as_scalar"),
        helper.make_node("Clip", ["logits", "floor_s"], ["clamped"], name="clamp_logits"),
        helper.make_node("Softmax", ["clamped"], ["probs"], name="softmax", axis=-1),
        helper.make_node("GatherND", ["probs", "watched_classes"], ["watched"], name="watch_classes"),
    ]
    graph = helper.make_graph(
        nodes, "hetero_explore_demo",
        [helper.make_tensor_value_info(DEMO_INPUT, TensorProto.FLOAT, ["batch", 3, 16, 16])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10]),
         helper.make_tensor_value_info("watched", TensorProto.FLOAT, [2])],
        initializer=inits,
        doc_string="hetero_explore demo: a small CNN classifier, logits clamped to [max-8, inf) "
                   "with a bound computed at run time, softmax, and a GatherND of watched classes.")
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="hetero_explore", doc_string="hetero_explore demo model")
    model.ir_version = 8
    helper.set_model_props(model, {"purpose": "demo", "input": "image NCHW, batch symbolic"})
    onnx.checker.check_model(model)
    return model


def demo_model() -> onnx.ModelProto:
    """The bundled demo model (``hetero_explore/data/demo.onnx``)."""
    try:
        data = resources.files("hetero_explore").joinpath("data/demo.onnx").read_bytes()
        return onnx.load_from_string(data)
    except (FileNotFoundError, OSError):  # pragma: no cover - source tree without the file
        return build_demo_model()


def demo_input_shapes() -> dict:
    return {DEMO_INPUT: DEMO_SHAPE}


def demo_inputs(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {DEMO_INPUT: rng.standard_normal(DEMO_SHAPE).astype(np.float32)}


def demo_shape_args() -> list:
    """``--input-shape`` style bindings for the demo model."""
    return list(demo_input_shapes().items())


if __name__ == "__main__":  # regenerate the bundled file
    import sys
    out = sys.argv[1] if len(sys.argv) > 1 else "hetero_explore/data/demo.onnx"
    onnx.save(build_demo_model(), out)
    print(f"wrote {out}")
