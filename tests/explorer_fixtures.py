"""A small fixed model for the explorer and widget tests (independent of the bundled
demo, which may evolve): a CNN classifier whose last step, GatherND, every provider
supports, so that a plan's shape is decided by the test's own what-ifs."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

#: nodes and op types once loaded: the model has 12 nodes, and the loader's load-time
#: optimisation folds bn1 into conv1 (hetero_explore.load.optimize)
N_NODES = 11
OP_TYPES = sorted(["Conv", "Relu", "MaxPool", "Add", "GlobalAveragePool", "Flatten",
                   "Gemm", "Softmax", "GatherND"])


def cnn_model(batch="1") -> onnx.ModelProto:
    """``image[batch, 3, 16, 16]`` → conv/bn/relu/pool/conv/relu/add/gap/flatten/gemm → ``probs[batch, 10]``
    → GatherND → ``watched[2]``. ``batch="batch"`` leaves the batch dim symbolic."""
    rng = np.random.default_rng(0)

    def w(name, *shape, scale=0.2):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [
        w("conv1.w", 8, 3, 3, 3), w("conv1.b", 8),
        numpy_helper.from_array(np.ones(8, np.float32), "bn1.scale"),
        numpy_helper.from_array(np.zeros(8, np.float32), "bn1.bias"),
        w("bn1.mean", 8, scale=0.05),
        numpy_helper.from_array((1.0 + rng.random(8) * 0.1).astype(np.float32), "bn1.var"),
        w("conv2.w", 16, 8, 3, 3), w("conv2.b", 16), w("fc.w", 10, 16), w("fc.b", 10),
        numpy_helper.from_array(np.array([[0, 3], [0, 7]], np.int64), "watched_classes"),
    ]
    mk = helper.make_node
    nodes = [
        mk("Conv", ["image", "conv1.w", "conv1.b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        mk("BatchNormalization", ["c1", "bn1.scale", "bn1.bias", "bn1.mean", "bn1.var"], ["b1"], name="bn1"),
        mk("Relu", ["b1"], ["r1"], name="relu1"),
        mk("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        mk("Conv", ["p1", "conv2.w", "conv2.b"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        mk("Relu", ["c2"], ["r2"], name="relu2"),
        mk("Add", ["r2", "c2"], ["res"], name="residual"),
        mk("GlobalAveragePool", ["res"], ["gap"], name="gap"),
        mk("Flatten", ["gap"], ["flat"], name="flatten"),
        mk("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], name="fc", transB=1),
        mk("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
        mk("GatherND", ["probs", "watched_classes"], ["watched"], name="watch_classes"),
    ]
    b = int(batch) if str(batch).isdigit() else batch
    graph = helper.make_graph(
        nodes, "explorer_test_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [b, 3, 16, 16])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [b, 10]),
         helper.make_tensor_value_info("watched", TensorProto.FLOAT, [2])],
        initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m
