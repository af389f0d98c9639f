"""Hand-built ONNX models with control flow, in the style torch's exporters emit them
(torch is not needed): an If on a shape and on data, a Loop over a tensor's first
axis, a Scan, an If nested in a Loop body, a Loop carrying a sequence."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
I64 = TensorProto.INT64
B = TensorProto.BOOL


def vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "control", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="tests")
    m.ir_version = 8
    return m


def if_on_shape(n=4):
    """``x * 2 if x.shape[0] > 2 else x - 1`` as torch.onnx.export writes the shape test
    (Shape -> Gather -> Greater -> If), with the branches reading ``x`` from the outer scope."""
    then_g = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["t"], name="then_mul")], "then", [],
                               [vi("t", [n, 3])])
    else_g = helper.make_graph([helper.make_node("Sub", ["x", "one"], ["e"], name="else_sub")], "else", [],
                               [vi("e", [n, 3])])
    nodes = [helper.make_node("Shape", ["x"], ["shp"], name="shape"),
             helper.make_node("Gather", ["shp", "zero_i"], ["d0"], axis=0, name="gather"),
             helper.make_node("Greater", ["d0", "two_i"], ["c"], name="gt"),
             helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="If_0"),
             helper.make_node("Relu", ["y"], ["out"], name="relu")]
    return model(nodes, [vi("x", [n, 3])], [vi("out", [n, 3])],
                 [const("zero_i", np.int64(0)), const("two_i", np.int64(2)), const("two", np.float32(2)),
                  const("one", np.float32(1))])


def if_on_data():
    """An If whose condition is computed at run time (sum(x) > 0); each branch has two nodes."""
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t0"], name="t_relu"),
                                helper.make_node("Mul", ["t0", "w"], ["t"], name="t_mul")], "then", [],
                               [vi("t", [2, 4])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e0"], name="e_neg"),
                                helper.make_node("Exp", ["e0"], ["e"], name="e_exp")], "else", [],
                               [vi("e", [2, 4])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0, name="sum"),
             helper.make_node("Greater", ["s", "zero"], ["c"], name="gt"),
             helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="If_0"),
             helper.make_node("Add", ["y", "x"], ["out"], name="add")]
    return model(nodes, [vi("x", [2, 4])], [vi("out", [2, 4])],
                 [const("zero", np.float32(0)), const("w", np.full((2, 4), 0.5, np.float32))])


def loop_over_tensor(n=5, d=3, nested_if=False):
    """``acc = 0; for i in range(x.shape[0]): acc = acc + x[i] * 2 (or an If on i % 2); ys.append(acc)``:
    the TorchScript exporter's Loop with the trip count from Shape/Gather, ``x`` captured from
    the outer scope, ``acc`` carried and ``ys`` a scan output."""
    body_nodes = [helper.make_node("Gather", ["x", "i"], ["xi"], axis=0, name="b_gather")]
    if nested_if:
        then_g = helper.make_graph([helper.make_node("Mul", ["xi", "two"], ["tt"], name="bt_mul")], "then", [],
                                   [vi("tt", [d])])
        else_g = helper.make_graph([helper.make_node("Neg", ["xi"], ["ee"], name="be_neg")], "else", [],
                                   [vi("ee", [d])])
        body_nodes += [helper.make_node("Mod", ["i", "two_i"], ["r"], name="b_mod"),
                       helper.make_node("Equal", ["r", "zero_i"], ["even"], name="b_eq"),
                       helper.make_node("If", ["even"], ["xs"], then_branch=then_g, else_branch=else_g,
                                        name="If_in_loop")]
    else:
        body_nodes += [helper.make_node("Mul", ["xi", "two"], ["xs"], name="b_mul")]
    body_nodes += [helper.make_node("Add", ["acc_in", "xs"], ["acc_out"], name="b_add"),
                   helper.make_node("Identity", ["cond_in"], ["cond_out"], name="b_cond"),
                   helper.make_node("Identity", ["acc_out"], ["y_out"], name="b_scan")]
    body = helper.make_graph(body_nodes, "body",
                             [vi("i", [], I64), vi("cond_in", [], B), vi("acc_in", [d])],
                             [vi("cond_out", [], B), vi("acc_out", [d]), vi("y_out", [d])])
    nodes = [helper.make_node("Shape", ["x"], ["shp"], name="shape"),
             helper.make_node("Gather", ["shp", "zero_i"], ["trip"], axis=0, name="gather"),
             helper.make_node("Loop", ["trip", "true", "acc0"], ["acc", "ys"], body=body, name="Loop_0"),
             helper.make_node("Tanh", ["acc"], ["out"], name="tanh")]
    return model(nodes, [vi("x", [n, d]), vi("acc0", [d])], [vi("out", [d]), vi("ys", [n, d])],
                 [const("zero_i", np.int64(0)), const("two_i", np.int64(2)), const("true", np.bool_(True)),
                  const("two", np.float32(2))])


def counting_loop(trips=1000):
    """A Loop of ``trips`` iterations over a tiny body (``acc = acc + 1``), for overhead and
    leak checks."""
    body = helper.make_graph([helper.make_node("Add", ["acc_in", "one"], ["acc_out"], name="b_add"),
                              helper.make_node("Identity", ["cond_in"], ["cond_out"], name="b_cond")],
                             "body", [vi("i", [], I64), vi("cond_in", [], B), vi("acc_in", [4])],
                             [vi("cond_out", [], B), vi("acc_out", [4])])
    nodes = [helper.make_node("Loop", ["trips", "", "x"], ["y"], body=body, name="Loop_0")]
    return model(nodes, [vi("x", [4])], [vi("y", [4])],
                 [const("trips", np.int64(trips)), const("one", np.ones(4, np.float32))])


def scan_cumsum(n=4, d=2):
    """Scan (opset 9+): running sum over the first axis, the state and the scan output both."""
    body = helper.make_graph([helper.make_node("Add", ["s_in", "x_t"], ["s_out"], name="b_add"),
                              helper.make_node("Sigmoid", ["s_out"], ["y_t"], name="b_sig")], "body",
                             [vi("s_in", [d]), vi("x_t", [d])], [vi("s_out", [d]), vi("y_t", [d])])
    nodes = [helper.make_node("Scan", ["s0", "x"], ["s", "ys"], body=body, num_scan_inputs=1, name="Scan_0")]
    return model(nodes, [vi("s0", [d]), vi("x", [n, d])], [vi("s", [d]), vi("ys", [n, d])])


def growing_loop(trips=3):
    """A Loop whose carried value grows every iteration (Concat): its output shape is not static."""
    body = helper.make_graph([helper.make_node("Concat", ["v_in", "one"], ["v_out"], axis=0, name="b_cat"),
                              helper.make_node("Identity", ["cond_in"], ["cond_out"], name="b_cond")],
                             "body", [vi("i", [], I64), vi("cond_in", [], B), vi("v_in", ["n"])],
                             [vi("cond_out", [], B), vi("v_out", ["m"])])
    nodes = [helper.make_node("Loop", ["trips", "", "x"], ["y"], body=body, name="Loop_grow")]
    return model(nodes, [vi("x", [1])], [vi("y", ["k"])],
                 [const("trips", np.int64(trips)), const("one", np.ones(1, np.float32))])


def failing_branch():
    """An If whose then-branch gathers with an index that is out of range at run time."""
    then_g = helper.make_graph([helper.make_node("Gather", ["x", "idx"], ["t"], axis=0, name="bad_gather")],
                               "then", [], [vi("t", [1])])
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["e0"], name="e_id"),
                                helper.make_node("Slice", ["e0", "s0", "s1"], ["e"], name="e_slice")],
                               "else", [], [vi("e", [1])])
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="If_fail")]
    return model(nodes, [vi("c", [], B), vi("x", [4]), vi("idx", [1], I64)], [vi("y", [1])],
                 [const("s0", np.array([0], np.int64)), const("s1", np.array([1], np.int64))])


def growing_scan_loop():
    """A Loop with a run-time trip count (a graph input) whose carried value grows (Concat) and
    which has a scan output (the running sum, one row per iteration): no output shape is known
    at load time, the run computes them from what the body produces."""
    body = helper.make_graph([
        helper.make_node("Concat", ["v_in", "x"], ["v_out"], axis=0, name="b_cat"),
        helper.make_node("ReduceSum", ["v_out"], ["s"], keepdims=1, name="b_sum"),
        helper.make_node("Mul", ["s", "x"], ["row"], name="b_row"),
        helper.make_node("Identity", ["cond_in"], ["cond_out"], name="b_cond")],
        "body", [vi("i", [], I64), vi("cond_in", [], B), vi("v_in", ["n"])],
        [vi("cond_out", [], B), vi("v_out", ["m"]), vi("row", [2])])
    nodes = [helper.make_node("Loop", ["trips", "", "v0"], ["v", "rows"], body=body, name="Loop_grow")]
    return model(nodes, [vi("trips", [], I64), vi("v0", [1]), vi("x", [2])], [vi("v", ["k"]), vi("rows", ["r", 2])])


def if_different_shapes():
    """An If whose branches give outputs of different shapes ([4] and [2]): onnx merges them to
    an unknown dim; the run takes the taken branch's shape. Its result feeds a node after it."""
    then_g = helper.make_graph([helper.make_node("Identity", ["x"], ["t"], name="t_id")], "then", [],
                               [vi("t", [4])])
    else_g = helper.make_graph([helper.make_node("Slice", ["x", "s0", "s1"], ["e"], name="e_slice")], "else",
                               [], [vi("e", [2])])
    nodes = [helper.make_node("If", ["c"], ["y0"], then_branch=then_g, else_branch=else_g, name="If_x"),
             helper.make_node("Neg", ["y0"], ["y"], name="after")]
    return model(nodes, [vi("c", [], B), vi("x", [4])], [vi("y", ["k"])],
                 [const("s0", np.array([0], np.int64)), const("s1", np.array([2], np.int64))])
