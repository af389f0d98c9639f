"""Tests generated from the op definitions: every elementwise OpDef, for each dtype
it declares, runs on random inputs on the CPU provider and on the CUDA provider
(simulator), bitwise equal, and agrees with onnx's reference evaluator.

Nothing here names an op: a definition added to ``elementwise.py`` is tested
as soon as it exists (and ``test_every_elementwise_opdef_is_swept`` fails if its
family has no input generator here)."""

import os
import zlib

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from hetero_explore.providers.cpu import NumbaCPUProvider
from hetero_explore.providers.cuda import NumbaCUDAProvider
from hetero_explore.kernels.elementwise import elementwise_ops

from support.harness import run_node

CPU = NumbaCPUProvider()
GPU = NumbaCUDAProvider()
ARITY = {"unary": 1, "unary_pred": 1, "binary": 2, "binary_pred": 2}
SKIP_REFERENCE = {
    # where this project's documented semantics differ from onnx's reference evaluator
    ("Div", "int32"), ("Div", "int64"),     # x/0 defined as 0 here; the evaluator raises
}


def _defs():
    out = []
    for d in elementwise_ops():
        if d.family not in ARITY:
            continue
        for dt in d.dtypes:
            out.append(pytest.param(d, dt, id=f"{d.op_type}-{dt}-{d.since}"))
    return out


def _inputs(rng, dt, n, shape):
    if dt == "bool":
        return [rng.integers(0, 2, shape).astype(bool) for _ in range(n)]
    if dt.startswith("int"):
        return [rng.integers(-20, 20, shape).astype(dt) for _ in range(n)]
    if dt.startswith("uint"):
        return [rng.integers(0, 40, shape).astype(dt) for _ in range(n)]
    xs = [(rng.standard_normal(shape) * 3).astype(dt) for _ in range(n)]
    return xs


#: values for attributes an op's schema requires (no default): the sweep needs one each
REQUIRED_ATTRS = {"BitShift": {"direction": "LEFT"}}


def _required_attrs(d, opset) -> set:
    import onnx.defs
    try:
        schema = onnx.defs.get_schema(d.op_type, opset, d.domain)
    except Exception:
        return set()
    return {name for name, a in schema.attributes.items() if a.required}


def test_required_attributes_have_sample_values():
    for d in elementwise_ops():
        if d.family in ARITY:
            missing = _required_attrs(d, _opset(d)) - set(REQUIRED_ATTRS.get(d.op_type, {}))
            assert not missing, (d.op_type, missing)


def _widen(a):
    """bfloat16 (an ml_dtypes type, kind 'V') as float32: exact, and numpy's float tools apply."""
    return a.astype(np.float32) if a.dtype.kind == "V" and "float" in a.dtype.name else a


def _opset(d) -> int:
    return max(d.opsets())


def test_every_elementwise_opdef_is_swept():
    fams = {d.family for d in elementwise_ops()}
    assert fams <= set(ARITY) | {"clip", "cast", "where"}, fams
    assert len(_defs()) >= 60


@pytest.mark.parametrize("d,dt", _defs())
def test_opdef_cpu_cuda_bitwise_and_reference(d, dt):
    rng = np.random.default_rng(zlib.crc32(f"{d.op_type}/{dt}".encode()))  # not hash(): salted per process
    n = ARITY[d.family]
    opset = _opset(d)
    for shape in [(7,), (3, 4)]:
        xs = _inputs(rng, dt, n, shape)
        if d.op_type in ("Div", "Pow") and np.dtype(dt).kind in "iu":
            xs[1] = np.where(xs[1] == 0, 1, np.abs(xs[1]) % 4 + (d.op_type == "Div")).astype(dt)
        node = helper.make_node(d.op_type, [f"x{i}" for i in range(n)], ["y"], name=f"{d.op_type}_n",
                                **REQUIRED_ATTRS.get(d.op_type, {}))
        c_raw = run_node(CPU, node, xs, opset=opset)[0]
        c = _widen(c_raw)
        if "cuda" in d.targets:
            g = _widen(run_node(GPU, node, xs, opset=opset)[0])
            assert np.array_equal(np.isnan(c) if c.dtype.kind == "f" else c, np.isnan(g) if g.dtype.kind == "f" else g)
            m = ~np.isnan(c) if c.dtype.kind == "f" else np.ones(c.shape, bool)
            assert np.array_equal(c[m].view(np.uint8), g[m].view(np.uint8)), (d.op_type, dt, c, g)
        if (d.op_type, dt) in SKIP_REFERENCE:
            continue
        model = helper.make_model(
            helper.make_graph([node], "g",
                              [helper.make_tensor_value_info(f"x{i}", helper.np_dtype_to_tensor_dtype(x.dtype),
                                                             x.shape) for i, x in enumerate(xs)],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.UNDEFINED, None)]),
            opset_imports=[helper.make_opsetid("", opset)])
        with np.errstate(all="ignore"):
            want = ReferenceEvaluator(model).run(None, {f"x{i}": x for i, x in enumerate(xs)})[0]
        assert c_raw.shape == want.shape and c_raw.dtype == want.dtype, (d.op_type, dt, c_raw.dtype, want.dtype)
        want = _widen(np.asarray(want))
        if c.dtype.kind == "f":
            np.testing.assert_allclose(c, want, rtol=2e-6, atol=1e-7, err_msg=f"{d.op_type} {dt}")
        else:
            assert np.array_equal(c, want), (d.op_type, dt, xs, c, want)
