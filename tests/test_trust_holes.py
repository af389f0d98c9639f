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


# -- the data-propagation memory bomb ---------------------------------------------------------------
def _rss_child(code: str) -> tuple[str, float]:
    """Run ``code`` in a fresh interpreter; (its last printed line, its peak RSS in MB)."""
    import subprocess
    import sys
    prog = ("import resource, sys\n" + code +
            "\nprint('PEAK', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)\n")
    r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    assert r.returncode == 0 and lines and lines[-1].startswith("PEAK"), r.stdout[-2000:] + r.stderr[-3000:]
    return (lines[-2] if len(lines) > 1 else ""), float(lines[-1].split()[1])


BOMB = """
from onnx import helper, TensorProto as T
import hetero_explore as he
n = {n}
nodes = [helper.make_node("ConstantOfShape", ["s"], ["c"], name="cos")]
prev = "c"
for i in range(4):
    nodes.append(helper.make_node("Add", [prev, prev], [f"a{{i}}"])); prev = f"a{{i}}"
nodes.append(helper.make_node("ReduceSum", [prev], ["y"], keepdims=0))
g = helper.make_graph(nodes, "g", [], [helper.make_tensor_value_info("y", T.FLOAT, [])],
                      initializer=[helper.make_tensor("s", T.INT64, [1], [n])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]); m.ir_version = 8
print(len(m.SerializeToString()), "bytes")
import resource
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
try:
    g = he.load_model(m.SerializeToString())
    print("loaded", g.values["c"].shape, "before", before)
except he.HeteroExploreError as e:
    print("typed", type(e).__name__, str(e)[:300].replace(chr(10), " "), "before", before)
"""


def test_a_small_model_of_huge_values_loads_without_materialising_them():
    """A ~180-byte model: ConstantOfShape([350M]) feeding Adds (1.4 GB float32 values). onnx's
    data propagation turned each element into a dim (GBs, then std::bad_alloc); the load must
    size the values first and keep its peak memory small (the values are made only at run time,
    under the memory budget)."""
    line, peak = _rss_child(BOMB.format(n=350_000_000))
    assert line.startswith("loaded (350000000,)"), line
    before = float(line.split()[-1])
    assert peak - before < 300, f"the load raised the peak RSS by {peak - before:.0f} MB"


def test_a_value_over_the_element_bound_is_refused_before_inference_naming_the_node():
    line, peak = _rss_child(BOMB.format(n=2 ** 41))
    assert line.startswith("typed InvalidModelError"), line
    assert "node 'cos' (ConstantOfShape)" in line and "'s'" in line and "bound" in line, line


@pytest.mark.parametrize("kind", ["input-vector", "expand", "tile", "range"])
def test_long_vectors_into_data_propagating_ops_keep_the_load_small(kind):
    """Long 1-D values read by ops with a data-propagation function (Add, Concat, ...) are kept
    out of onnx's data propagation; shapes computed by Shape/Gather/Concat still propagate."""
    make = {
        "input-vector": 'x = [helper.make_tensor_value_info("c", T.FLOAT, [n])]; pre = []; inits = []',
        "expand": 'x = []; pre = [helper.make_node("Expand", ["one", "s"], ["c"])]; '
                  'inits = [helper.make_tensor("s", T.INT64, [1], [n]), helper.make_tensor("one", T.FLOAT, [1], [1])]',
        "tile": 'x = []; pre = [helper.make_node("Tile", ["one", "s"], ["c"])]; '
                'inits = [helper.make_tensor("s", T.INT64, [1], [n]), helper.make_tensor("one", T.FLOAT, [1], [1])]',
        "range": 'x = []; pre = [helper.make_node("Range", ["a", "b", "d"], ["c"])]; '
                 'inits = [helper.make_tensor("a", T.FLOAT, [], [0]), helper.make_tensor("b", T.FLOAT, [], [n]), '
                 'helper.make_tensor("d", T.FLOAT, [], [1])]',
    }[kind]
    code = f"""
from onnx import helper, TensorProto as T
import hetero_explore as he
n = 20_000_000
{make}
# the Reshape's target is computed (Concat of constants): only data propagation sizes y
nodes = pre + [helper.make_node("Add", ["c", "c"], ["d2"]), helper.make_node("Concat", ["k0", "k1"], ["k"], axis=0),
               helper.make_node("Reshape", ["d2", "k"], ["y"]), helper.make_node("Shape", ["y"], ["z"])]
inits = inits + [helper.make_tensor("k0", T.INT64, [1], [n // 4]), helper.make_tensor("k1", T.INT64, [1], [4])]
g = helper.make_graph(nodes, "g", x, [helper.make_tensor_value_info("y", T.FLOAT, ["a", "b"]),
                      helper.make_tensor_value_info("z", T.INT64, ["r"])], initializer=inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]); m.ir_version = 8
import resource
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
g = he.load_model(m.SerializeToString(), fold_constants=False)
print("shapes", g.values["y"].shape, g.values["z"].shape, "before", before)
"""
    line, peak = _rss_child(code)
    assert line.startswith("shapes (5000000, 4) (2,)"), line
    assert peak - float(line.split()[-1]) < 300, f"the load raised the peak RSS by {peak - float(line.split()[-1]):.0f} MB"
