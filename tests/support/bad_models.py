"""A corpus of invalid models, one defect each, for the message rule (tests/test_messages.py):
every typed error names the node (its name, or its index and op type when unnamed), the input
or attribute at fault and what would be valid, in its first line; onnx's own text after it.

``CORPUS`` maps a case name to ``(build, where)``: ``build(named)`` returns the model (its
faulty node named ``"bad"`` when ``named``, else unnamed), ``where`` is what the first line
must mention: ``("attribute", name)``, ``("input", index)``, or ``("output", name)``."""

from __future__ import annotations

from onnx import TensorProto, helper

F, I64, S, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.STRING, TensorProto.BOOL


def vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def _m(node_args, inputs, outputs, inits=(), opset=17, pre=(), named=True):
    op, ins, outs, attrs = node_args
    nodes = list(pre) + [helper.make_node(op, ins, outs, name="bad" if named else "", **attrs)]
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _c(name, vals, t=I64, dims=None):
    return helper.make_tensor(name, t, [len(vals)] if dims is None else dims, vals)


X23 = [vi("x", F, [2, 3])]
def sym(name, t, rank):
    return vi(name, t, [f"{name}{i}" for i in range(rank)])


YS = [sym("y", F, 2)]

CORPUS = {
    # attributes out of their valid range
    "transpose-perm": (lambda n: _m(("Transpose", ["x"], ["y"], {"perm": [0, 5]}), X23, YS, named=n),
                       ("attribute", "perm")),
    "transpose-perm-short": (lambda n: _m(("Transpose", ["x"], ["y"], {"perm": [0]}), X23, [sym("y", F, 1)], named=n),
                             ("attribute", "perm")),
    "softmax-axis": (lambda n: _m(("Softmax", ["x"], ["y"], {"axis": 7}), X23, YS, named=n), ("attribute", "axis")),
    "concat-axis": (lambda n: _m(("Concat", ["x", "x"], ["y"], {"axis": 4}), X23, YS, named=n),
                    ("attribute", "axis")),
    "gather-axis": (lambda n: _m(("Gather", ["x", "i"], ["y"], {"axis": 3}), X23 + [vi("i", I64, [2])], YS,
                                 named=n), ("attribute", "axis")),
    "flatten-axis": (lambda n: _m(("Flatten", ["x"], ["y"], {"axis": 5}), X23, YS, named=n), ("attribute", "axis")),
    "argmax-axis": (lambda n: _m(("ArgMax", ["x"], ["y"], {"axis": -4}), X23, [sym("y", I64, 2)],
                                 named=n), ("attribute", "axis")),
    "split-axis": (lambda n: _m(("Split", ["x"], ["y", "z"], {"axis": 2}), X23, YS + [sym("z", F, 2)],
                                named=n), ("attribute", "axis")),
    "lrn-size": (lambda n: _m(("LRN", ["x"], ["y"], {"size": 0}), [vi("x", F, [1, 2, 3, 3])], [sym("y", F, 4)],
                              named=n), ("attribute", "size")),
    "cast-to": (lambda n: _m(("Cast", ["x"], ["y"], {"to": 999}), X23, YS, named=n), ("attribute", "to")),
    "depthtospace-blocksize": (lambda n: _m(("DepthToSpace", ["x"], ["y"], {"blocksize": 3}),
                                            [vi("x", F, [1, 4, 2, 2])], [sym("y", F, 4)], named=n),
                               ("attribute", "blocksize")),
    "conv-dilations-0": (lambda n: _m(("Conv", ["x", "w"], ["y"], {"dilations": [0, 0]}), [vi("x", F, [1, 1, 4, 4])],
                                      [sym("y", F, 4)], [helper.make_tensor("w", F, [1, 1, 2, 2], [1.0] * 4)],
                                      named=n), ("attribute", "dilations")),
    "conv-kernel-shape": (lambda n: _m(("Conv", ["x", "w"], ["y"], {"kernel_shape": [3, 3]}),
                                       [vi("x", F, [1, 1, 4, 4])], [sym("y", F, 4)],
                                       [helper.make_tensor("w", F, [1, 1, 2, 2], [1.0] * 4)], named=n),
                          ("attribute", "kernel_shape")),
    "pad-mode": (lambda n: _m(("Pad", ["x", "p"], ["y"], {"mode": "mirror"}), X23, YS, [_c("p", [0, 0, 0, 0])],
                              named=n), ("attribute", "mode")),
    "einsum-equation": (lambda n: _m(("Einsum", ["x", "x"], ["y"], {"equation": "ij,jk->ikz"}), X23, YS, named=n),
                        ("attribute", "equation")),
    "reduce-axes": (lambda n: _m(("ReduceSum", ["x", "a"], ["y"], {}), X23, YS, [_c("a", [5])], named=n),
                    ("input", 1)),
    "squeeze-axes": (lambda n: _m(("Squeeze", ["x", "a"], ["y"], {}), X23, [sym("y", F, 1)], [_c("a", [0])],
                                  named=n), ("input", 1)),
    "unsqueeze-axes": (lambda n: _m(("Unsqueeze", ["x", "a"], ["y"], {}), X23, [sym("y", F, 3)], [_c("a", [9])],
                                    named=n), ("input", 1)),
    "topk-axis": (lambda n: _m(("TopK", ["x", "k"], ["y", "z"], {"axis": 3}), X23,
                               [sym("y", F, 2), sym("z", I64, 2)], [_c("k", [1])], named=n),
                  ("attribute", "axis")),
    "gemm-trans": (lambda n: _m(("Gemm", ["a", "b"], ["y"], {"transA": 1}), [vi("a", F, [2, 3]), vi("b", F, [3, 4])],
                                YS, named=n), ("input", 0)),
    # inputs of the wrong type or shape
    "relu-string": (lambda n: _m(("Relu", ["x"], ["y"], {}), [vi("x", S, [4])], [vi("y", S, [4])], named=n),
                    ("input", 0)),
    "add-mixed-types": (lambda n: _m(("Add", ["x", "i"], ["y"], {}), [vi("x", F, [4]), vi("i", I64, [4])],
                                     [vi("y", F, [4])], named=n), ("input", 1)),
    "add-broadcast": (lambda n: _m(("Add", ["x", "z"], ["y"], {}), [vi("x", F, [4]), vi("z", F, [5])],
                                   [sym("y", F, 1)], named=n), ("input", 1)),
    "matmul-inner": (lambda n: _m(("MatMul", ["a", "b"], ["y"], {}), [vi("a", F, [2, 3]), vi("b", F, [4, 2])],
                                  YS, named=n), ("input", 1)),
    "reshape-count": (lambda n: _m(("Reshape", ["x", "s"], ["y"], {}), X23, YS, [_c("s", [4, 4])], named=n),
                      ("input", 1)),
    "concat-rank": (lambda n: _m(("Concat", ["x", "z"], ["y"], {"axis": 0}), X23 + [vi("z", F, [2])], YS,
                                 named=n), ("input", 1)),
    "where-cond-float": (lambda n: _m(("Where", ["x", "x", "x"], ["y"], {}), X23, YS, named=n), ("input", 0)),
    "gather-indices-float": (lambda n: _m(("Gather", ["x", "x"], ["y"], {}), X23, [sym("y", F, 3)], named=n),
                             ("input", 1)),
    "expand-incompatible": (lambda n: _m(("Expand", ["x", "s"], ["y"], {}), X23, YS, [_c("s", [4, 4])], named=n),
                            ("input", 1)),
    "tile-repeats-length": (lambda n: _m(("Tile", ["x", "r"], ["y"], {}), X23, YS, [_c("r", [1, 2, 3])], named=n),
                            ("input", 1)),
    "slice-lengths": (lambda n: _m(("Slice", ["x", "s", "e"], ["y"], {}), X23, YS, [_c("s", [0, 0]), _c("e", [1])],
                                   named=n), ("input", 1)),
    "range-not-scalar": (lambda n: _m(("Range", ["a", "b", "d"], ["y"], {}), [vi("a", F, [2]), vi("b", F, []),
                                                                             vi("d", F, [])], [sym("y", F, 1)],
                                      named=n), ("input", 0)),
    "conv-weight-rank": (lambda n: _m(("Conv", ["x", "w"], ["y"], {}), [vi("x", F, [1, 1, 4, 4])], [sym("y", F, 4)],
                                      [helper.make_tensor("w", F, [1, 2], [1.0] * 2)], named=n), ("input", 1)),
    "batchnorm-scale": (lambda n: _m(("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], {}),
                                     [vi("x", F, [1, 2, 3, 3])], [sym("y", F, 4)],
                                     [helper.make_tensor(k, F, [3], [1.0] * 3) for k in "sbmv"], named=n),
                        ("input", 1)),
    "and-float": (lambda n: _m(("And", ["x", "x"], ["y"], {}), X23, [sym("y", B, 2)], named=n), ("input", 0)),
    "layernorm-scale": (lambda n: _m(("LayerNormalization", ["x", "s"], ["y"], {}), X23, YS,
                                     [helper.make_tensor("s", F, [5], [1.0] * 5)], named=n), ("input", 1)),
    "slice-step-0": (lambda n: _m(("Slice", ["x", "s", "e", "a", "st"], ["y"], {}), X23, YS,
                                  [_c("s", [0]), _c("e", [2]), _c("a", [1]), _c("st", [0])], named=n), ("input", 4)),
    "split-sizes": (lambda n: _m(("Split", ["x", "sp"], ["y", "z"], {"axis": 1}), X23, YS + [sym("z", F, 2)],
                                 [_c("sp", [1, 5])], named=n), ("input", 1)),
    "missing-input": (lambda n: _m(("Relu", ["nope"], ["y"], {}), X23, YS, named=n), ("input", 0)),
    "unknown-attribute": (lambda n: _m(("Relu", ["x"], ["y"], {"foo": 1}), X23, YS, named=n), ("attribute", "foo")),
    "attribute-type": (lambda n: _m(("LeakyRelu", ["x"], ["y"], {"alpha": "0.1"}), X23, YS, named=n),
                       ("attribute", "alpha")),
    "required-attribute": (lambda n: _m(("Cast", ["x"], ["y"], {}), X23, YS, named=n), ("attribute", "to")),
    # declared types that contradict what the node computes
    "declared-output-type": (lambda n: _m(("Relu", ["x"], ["y"], {}), X23, [vi("y", I64, [2, 3])], named=n),
                             ("output", "y")),
    "declared-output-shape": (lambda n: _m(("Relu", ["x"], ["y"], {}), X23, [vi("y", F, [3, 3])], named=n),
                              ("output", "y")),
}
