"""Hostile models and files at load (issue 13): every case is a typed error, fast, with a
message naming what is wrong -- never a hang, a crash, a huge allocation or a wrong buffer."""

from __future__ import annotations

import contextlib
import os
import signal
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import hetero_explore as he
from hetero_explore.ir.errors import ShapeConflictError
from hetero_explore.load.validate import inlined_node_count

F = TensorProto.FLOAT


def vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def model(nodes, inputs, outputs, inits=(), opset=17, functions=(), extra_opsets=(), value_info=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits), value_info=list(value_info))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)] + list(extra_opsets),
                          functions=list(functions))
    m.ir_version = 8
    return m


def relu_model():
    return model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [vi("x", [4])], [vi("y", [4])])


@contextlib.contextmanager
def deadline(seconds):
    """Fail (instead of hanging the suite) when the body runs longer than ``seconds``."""
    def boom(*_):
        raise TimeoutError(f"took longer than {seconds} s")
    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# -- files ------------------------------------------------------------------------------------
def test_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "m.onnx"
    os.mkfifo(fifo)
    with deadline(20), pytest.raises(he.ModelLoadError, match="not a regular file"):
        he.load_model(fifo)


@pytest.mark.parametrize("dev", ["/dev/zero", "/dev/null"])
def test_devices_are_refused(dev):
    if not os.path.exists(dev):
        pytest.skip(f"{dev} does not exist on this system")
    with deadline(20), pytest.raises(he.ModelLoadError, match="not a regular file"):
        he.load_model(dev)


def test_empty_file_and_bytes_say_empty(tmp_path):
    p = tmp_path / "empty.onnx"
    p.write_bytes(b"")
    with pytest.raises(he.ModelLoadError, match="is empty"):
        he.load_model(p)
    with pytest.raises(he.ModelLoadError, match="is empty"):
        he.load_model(b"")


def test_bytes_without_a_graph_say_not_an_onnx_model():
    with pytest.raises(he.ModelLoadError, match="not an ONNX model"):
        he.load_model(onnx.ModelProto(ir_version=8).SerializeToString())


def test_too_long_name_is_typed():
    with pytest.raises(he.ModelLoadError, match="cannot open model path"):
        he.load_model("x" * 5000 + ".onnx")


def test_memory_error_becomes_a_typed_error_with_a_message(monkeypatch):
    def oom(*a, **k):
        raise MemoryError()
    monkeypatch.setattr(onnx, "load_model_from_string", oom)
    with pytest.raises(he.ModelLoadError, match="ran out of memory") as e:
        he.load_model(relu_model().SerializeToString())
    assert str(e.value).strip()


# -- functions ---------------------------------------------------------------------------------
def _function_tower(levels):
    """F0 = Relu; Fi calls F(i-1) twice: 2**levels nodes once inlined, a few KB serialized."""
    op = [helper.make_opsetid("", 17), helper.make_opsetid("f", 1)]
    fns = [helper.make_function("f", "F0", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])], op)]
    for i in range(1, levels + 1):
        fns.append(helper.make_function("f", f"F{i}", ["a"], ["b"],
                                        [helper.make_node(f"F{i-1}", ["a"], ["t"], domain="f"),
                                         helper.make_node(f"F{i-1}", ["t"], ["b"], domain="f")], op))
    return model([helper.make_node(f"F{levels}", ["x"], ["y"], domain="f", name="call")], [vi("x", [4])],
                 [vi("y", [4])], functions=fns, extra_opsets=[helper.make_opsetid("f", 1)])


def test_function_bomb_is_refused_before_inlining_or_inference():
    m = _function_tower(24)
    assert len(m.SerializeToString()) < 4096
    assert inlined_node_count(m) == 2 ** 24
    t0 = time.perf_counter()
    with deadline(30), pytest.raises(he.FunctionInliningError, match=f"{2 ** 24} nodes"):
        he.load_model(m)
    assert time.perf_counter() - t0 < 10


def test_small_function_tower_loads_and_inlines():
    m = _function_tower(4)
    assert inlined_node_count(m) == 16
    g = he.load_model(m)
    p = he.plan(g, ["cpu"])
    assert len(p.graph.nodes) == 16 and set(p.graph.op_types()) == {"Relu"}
    with pytest.raises(he.FunctionInliningError, match="16 nodes"):
        he.load_model(m, max_inlined_nodes=15)


def test_recursive_function_is_refused():
    op = [helper.make_opsetid("", 17), helper.make_opsetid("f", 1)]
    fn = helper.make_function("f", "R", ["a"], ["b"], [helper.make_node("R", ["a"], ["b"], domain="f")], op)
    m = model([helper.make_node("R", ["x"], ["y"], domain="f")], [vi("x", [4])], [vi("y", [4])],
              functions=[fn], extra_opsets=[helper.make_opsetid("f", 1)])
    with deadline(20), pytest.raises(he.FunctionInliningError, match="calls itself"):
        he.load_model(m, check=False)


# -- shapes and bindings -----------------------------------------------------------------------
def test_int64_max_input_dim_is_typed_at_load():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2 ** 63 - 1])], [vi("y", [2 ** 63 - 1])])
    with pytest.raises(he.InvalidModelError, match="over the bound"):
        he.load_model(m)


def _sym_model():
    return model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", ["n", 4])], [vi("y", ["n", 4])])


@pytest.mark.parametrize("shapes", [
    {"x": (True, 4)}, {"x": (2.5, 4)}, {"x": (-1, 4)}, {"x": ("2", 4)}, {"x": "24"}, {"x": 3},
    {"x": (None, 4)}, {"x": (2 ** 62, 4)}, {1: (2, 4)}, [("x", (2, 4))],
])
def test_bad_input_shapes_are_shape_binding_errors(shapes):
    with pytest.raises(he.ShapeBindingError):
        he.load_model(_sym_model(), input_shapes=shapes)


@pytest.mark.parametrize("dims", [{"n": True}, {"n": 2.5}, {"n": -1}, {"n": "2"}, {"n": None}, "n=2"])
def test_bad_dim_values_are_shape_binding_errors(dims):
    with pytest.raises(he.ShapeBindingError):
        he.load_model(_sym_model(), dim_values=dims)


def test_numpy_ints_bind():
    g = he.load_model(_sym_model(), input_shapes={"x": np.array([3, 4])})
    assert g.values["y"].shape == (3, 4)


# -- validation that check=False keeps ---------------------------------------------------------
def _gather(axis_attr):
    idx = numpy_helper.from_array(np.array([0], np.int64), "i")
    n = helper.make_node("Gather", ["x", "i"], ["y"], name="g")
    n.attribute.append(axis_attr)
    return model([n], [vi("x", [4])], [vi("y", [1])], [idx])


def _with_attr(op, attr, ins=("x",), opset=17, shape=(4,)):
    n = helper.make_node(op, list(ins), ["y"], name="n")
    n.attribute.append(attr)
    return model([n], [vi("x", list(shape))], [vi("y", list(shape))], opset=opset)


def _dup_producer():
    return model([helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Neg", ["x"], ["y"], name="b")],
                 [vi("x", [4])], [vi("y", [4])])


def _dup_input():
    return model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [4]), vi("x", [4])], [vi("y", [4])])


def _ir99():
    m = relu_model()
    m.ir_version = 99
    return m


def _reduce_axes_attr():
    return model([helper.make_node("ReduceSum", ["x"], ["y"], axes=[0], name="rs")], [vi("x", [4])],
                 [vi("y", [1])], opset=17)


@pytest.mark.parametrize("make, match", [
    (_dup_producer, "produced by node 'b'"),
    (_dup_input, "listed twice"),
    (lambda: _with_attr("LeakyRelu", helper.make_attribute("alpha", "0.1")), "'alpha' is STRING"),
    (lambda: _with_attr("Softmax", helper.make_attribute("axis", numpy_helper.from_array(np.array(0, np.int64)))),
     "'axis' is TENSOR"),
    (lambda: _with_attr("Relu", helper.make_attribute("foo", 1)), "attribute 'foo'"),
    (_reduce_axes_attr, "attribute 'axes'"),
    (_ir99, "ir_version is 99"),
    (lambda: _gather(helper.make_attribute("axis", 0.0)), "'axis' is FLOAT"),
], ids=["dup-producer", "dup-input", "alpha-string", "axis-tensor", "unknown-attr", "reducesum-axes-attr",
        "ir99", "gather-float-axis"])
@pytest.mark.parametrize("check", [True, False])
def test_own_validation_runs_with_and_without_checker(make, match, check):
    with pytest.raises(he.InvalidModelError, match=match if not check else None):
        he.load_model(make(), check=check)


def test_checker_message_is_whole():
    # onnx.checker's message about a missing input spans two lines; the node is on the second
    m = model([helper.make_node("Relu", ["nope"], ["y"], name="the_relu")], [vi("x", [4])], [vi("y", [4])])
    with pytest.raises(he.InvalidModelError, match="onnx.checker") as e:
        he.load_model(m)
    assert "the_relu" in str(e.value) or "OpType: Relu" in str(e.value)


# -- invalid nodes: the real problem, not "symbolic shapes" ------------------------------------
def _x4():
    return vi("x", [1, 2, 4, 4])


def _i64(a, n):
    return numpy_helper.from_array(np.array(a, np.int64), n)


INVALID_NODES = {
    "transpose-perm": (lambda: model([helper.make_node("Transpose", ["x"], ["y"], perm=[0, 5], name="bad")],
                                     [_x4()], [vi("y", ["a", "b", "c", "d"])]), "Invalid attribute perm"),
    "cast-to-999": (lambda: model([helper.make_node("Cast", ["x"], ["y"], to=999, name="bad")], [_x4()],
                                  [vi("y", ["a", "b", "c", "d"])]), "valid type"),
    "conv-dilations-0": (lambda: model([helper.make_node("Conv", ["x", "w"], ["y"], dilations=[0, 0], name="bad")],
                                       [_x4()], [vi("y", ["a", "b", "c", "d"])],
                                       [numpy_helper.from_array(np.ones((2, 2, 3, 3), np.float32), "w")]),
                         "dilations"),
    "slice-step-0": (lambda: model([helper.make_node("Slice", ["x", "s", "e", "a", "st"], ["y"], name="bad")],
                                   [_x4()], [vi("y", ["a", "b", "c", "d"])],
                                   [_i64([0], "s"), _i64([2], "e"), _i64([1], "a"), _i64([0], "st")]), "step"),
    "split-sizes": (lambda: model([helper.make_node("Split", ["x", "sp"], ["y", "z"], axis=1, name="bad")],
                                  [_x4()], [vi("y", ["a", "b", "c", "d"]), vi("z", ["a", "b", "c", "d"])],
                                  [_i64([1, 5], "sp")]), "split"),
}


@pytest.mark.parametrize("case", sorted(INVALID_NODES))
@pytest.mark.parametrize("check", [True, False])
def test_invalid_node_is_named_at_load(case, check):
    make, match = INVALID_NODES[case]
    with pytest.raises(he.InvalidModelError, match=match) as e:
        he.load_model(make(), check=check)
    assert "bad" in str(e.value) and "symbolic" not in str(e.value)


# -- tensors whose data does not match their dims ----------------------------------------------
def _init_model(t):
    return model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [4])], [vi("y", [4])], [t])


def test_short_raw_data_names_the_tensor():
    t = numpy_helper.from_array(np.ones(4, np.float32), "weights")
    t.raw_data = t.raw_data[:6]
    with pytest.raises(he.InvalidModelError, match="initializer 'weights'.*holds 6 bytes"):
        he.load_model(_init_model(t), check=False)


def test_huge_declared_dims_with_tiny_data_are_refused_before_reading():
    t = numpy_helper.from_array(np.ones(4, np.float32), "weights")
    del t.dims[:]
    t.dims.extend([700_000_000])
    with pytest.raises(he.InvalidModelError, match="initializer 'weights'"):
        he.load_model(_init_model(t), check=False)


def test_typed_field_count_names_the_tensor():
    t = helper.make_tensor("weights", F, [4], [1.0, 2.0, 3.0, 4.0])
    del t.float_data[-1]
    with pytest.raises(he.InvalidModelError, match="initializer 'weights'.*float_data holds 3"):
        he.load_model(_init_model(t), check=False)


def test_constant_attribute_tensor_is_checked():
    t = numpy_helper.from_array(np.ones(4, np.float32), "c")
    t.raw_data = t.raw_data[:4]
    m = model([helper.make_node("Constant", [], ["k"], value=t, name="const"),
               helper.make_node("Add", ["x", "k"], ["y"])], [vi("x", [4])], [vi("y", [4])])
    with pytest.raises(he.InvalidModelError, match="node 'const'"):
        he.load_model(m, check=False)


# -- external data -----------------------------------------------------------------------------
def _external_model(location, offset=None, length=None):
    t = numpy_helper.from_array(np.ones(4, np.float32), "w")
    t.data_location = TensorProto.EXTERNAL
    t.ClearField("raw_data")
    for k, v in [("location", location), ("offset", offset), ("length", length)]:
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, str(v)
    return _init_model(t)


def _save(tmp_path, m):
    p = tmp_path / "m.onnx"
    p.write_bytes(m.SerializeToString())
    return p


def test_external_data_in_the_model_directory_loads(tmp_path):
    (tmp_path / "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    g = he.load_model(_save(tmp_path, _external_model("w.bin")))
    x = np.zeros(4, np.float32)
    assert he.execute_reference(g, "cpu", {"x": x}).outputs["y"].tolist() == [0, 1, 2, 3]


def test_external_data_absolute_and_dotdot_are_refused(tmp_path):
    for loc in ["/etc/passwd", "../w.bin", "sub/../../w.bin"]:
        with pytest.raises(he.ModelLoadError, match="outside the model's directory"):
            he.load_model(_save(tmp_path, _external_model(loc)))


def test_external_data_symlink_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "w.bin").write_bytes(np.ones(4, np.float32).tobytes())
    d = tmp_path / "model"
    d.mkdir()
    os.symlink(outside / "w.bin", d / "w.bin")
    with pytest.raises(he.ModelLoadError, match="symbolic link"):
        he.load_model(_save(d, _external_model("w.bin")))


def test_external_data_hard_link_is_refused(tmp_path):
    outside = tmp_path / "outside.bin"
    outside.write_bytes(np.ones(4, np.float32).tobytes())
    d = tmp_path / "model"
    d.mkdir()
    os.link(outside, d / "w.bin")
    with pytest.raises(he.ModelLoadError, match="hard link"):
        he.load_model(_save(d, _external_model("w.bin")))


def test_external_data_fifo_is_not_called_missing(tmp_path):
    os.mkfifo(tmp_path / "w.bin")
    with deadline(20), pytest.raises(he.ModelLoadError, match="not a regular file"):
        he.load_model(_save(tmp_path, _external_model("w.bin")))


def test_external_data_missing_file(tmp_path):
    with pytest.raises(he.ModelLoadError, match="missing"):
        he.load_model(_save(tmp_path, _external_model("w.bin")))


@pytest.mark.parametrize("offset, length, match", [
    (2 ** 40, None, "beyond the end"), (0, 2 ** 40, "beyond the end"), (0, 8, "holds 8 bytes"),
    (-4, None, "negative"), ("x", None, "non-integer"),
])
def test_external_data_offsets_and_lengths_are_checked(tmp_path, offset, length, match):
    (tmp_path / "w.bin").write_bytes(np.ones(4, np.float32).tobytes())
    with pytest.raises(he.InvalidModelError, match=match):
        he.load_model(_save(tmp_path, _external_model("w.bin", offset, length)))


# -- declared shapes that lie --------------------------------------------------------------------
LIES = {
    "output-huge": ([vi("y", [100_000_000])], [], "declared float\\[100000000\\]"),
    "output-12": ([vi("y", [12])], [], "declared float\\[12\\]"),
    "output-int64": ([vi("y", [4], TensorProto.INT64)], [], "declared int64\\[4\\]"),
    "output-rank": ([vi("y", [2, 2])], [], "declared float\\[2, 2\\]"),
    "intermediate-huge": ([vi("y", [4])], [vi("r", [100_000_000])], "value 'r' is declared float\\[100000000\\]"),
    "intermediate-int64": ([vi("y", [4])], [vi("r", [4], TensorProto.INT64)], "value 'r' is declared int64"),
}


@pytest.mark.parametrize("case", sorted(LIES))
@pytest.mark.parametrize("check", [True, False])
def test_declared_shapes_that_lie_are_rejected_before_execution(case, check):
    outputs, value_info, match = LIES[case]
    m = model([helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Neg", ["r"], ["y"], name="neg")],
              [vi("x", [4])], outputs, value_info=value_info)
    with pytest.raises(ShapeConflictError, match=match) as e:
        he.execute(he.plan(he.load_model(m, check=check), ["cpu"]), {"x": np.ones(4, np.float32)})
    assert "computed by node" in str(e.value) and "float[4]" in str(e.value)


def test_declared_symbolic_and_unknown_dims_are_not_lies():
    m = model([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["y"])],
              [vi("x", [4])], [vi("y", ["n"])], value_info=[vi("r", [-1])])
    g = he.load_model(m)
    assert g.values["y"].shape == (4,) and g.values["r"].shape == (4,)
    out = he.execute(he.plan(g, ["cpu"]), {"x": np.arange(4, dtype=np.float32)}).outputs["y"]
    assert out.tolist() == [0, -1, -2, -3]
