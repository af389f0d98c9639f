"""The hostile-input holes of issue 29, each pinned by a test that failed before its fix:
NUL bytes in paths, external data through ``..`` that stays inside the model's folder,
the data-propagation memory bomb, unbounded Loops, notebook memory."""

from __future__ import annotations

import os

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import hetero_explore as he

F = TensorProto.FLOAT


def vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _external_model(location):
    t = numpy_helper.from_array(np.ones(4, np.float32), "w")
    t.data_location = TensorProto.EXTERNAL
    t.ClearField("raw_data")
    e = t.external_data.add()
    e.key, e.value = "location", location
    return _model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [vi("x", [4])], [vi("y", [4])], [t])


def _save(folder, m):
    p = folder / "m.onnx"
    p.write_bytes(m.SerializeToString())
    return p


# -- NUL bytes ------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [str, lambda s: __import__("pathlib").PurePosixPath(s)], ids=["str", "path"])
def test_nul_byte_in_the_model_path_is_a_typed_error_naming_it(tmp_path, make):
    with pytest.raises(he.ModelLoadError, match=r"NUL byte \(\\x00\) at position \d+") as e:
        he.load_model(make(str(tmp_path / "a\x00b.onnx")))
    assert "path" in str(e.value)


def test_nul_byte_in_an_external_data_location_is_a_typed_error_naming_the_tensor(tmp_path):
    (tmp_path / "w.bin").write_bytes(np.ones(4, np.float32).tobytes())
    with pytest.raises(he.InvalidModelError, match=r"tensor 'w' .*NUL byte \(\\x00\) at position 1"):
        he.load_model(_save(tmp_path, _external_model("w\x00.bin")))


# -- external data: resolved paths, not spellings ------------------------------------------------
@pytest.mark.parametrize("loc, make_sub", [("sub/../w.bin", True), ("sub/../w.bin", False), ("./w.bin", False),
                                           ("sub/./../sub/../w.bin", True)])
def test_external_data_through_dotdot_that_stays_inside_loads(tmp_path, loc, make_sub):
    (tmp_path / "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    if make_sub:
        (tmp_path / "sub").mkdir()
    g = he.load_model(_save(tmp_path, _external_model(loc)))
    y = he.execute_reference(g, "cpu", {"x": np.zeros(4, np.float32)}).outputs["y"]
    assert y.tolist() == [0, 1, 2, 3]


def test_external_data_escapes_are_still_refused(tmp_path):
    d = tmp_path / "model"
    d.mkdir()
    (tmp_path / "w.bin").write_bytes(np.ones(4, np.float32).tobytes())
    for loc in ["../w.bin", "sub/../../w.bin", str(tmp_path / "w.bin"), "./../w.bin"]:
        with pytest.raises(he.ModelLoadError, match="outside the model's directory"):
            he.load_model(_save(d, _external_model(loc)))


def test_external_data_through_a_linked_folder_is_refused_even_when_it_resolves_inside(tmp_path):
    d = tmp_path / "model"
    (d / "real").mkdir(parents=True)
    (d / "w.bin").write_bytes(np.ones(4, np.float32).tobytes())
    (tmp_path / "elsewhere" / "x").mkdir(parents=True)
    (tmp_path / "elsewhere" / "w.bin").write_bytes(np.ones(4, np.float32).tobytes())
    os.symlink(tmp_path / "elsewhere" / "x", d / "out")      # sub/.. would lead to elsewhere/
    os.symlink(d / "real", d / "in")                          # a link that stays inside
    for loc in ["out/../w.bin", "in/../w.bin"]:
        with pytest.raises(he.ModelLoadError, match="symbolic link"):
            he.load_model(_save(d, _external_model(loc)))
