"""A new executing target is one :class:`Target` subclass plus its template.

A toy target, registered here and only here, runs every kernel as a plain Python loop over
host arrays (no compiler): kernel pairs generate its kernel from the same per-item
statement as the CPU's and the CUDA's (pairs made before it was registered, on first use),
``@dual`` functions resolve to its twins, and a provider on it runs whole ops through the
op definitions' builds. Its results are bitwise the generated CPU kernels' (the same
float32 operations in the same order). No production code knows the toy target.
"""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
import pytest
from onnx import helper

from hetero_explore.kernels import registry
from hetero_explore.kernels.common import dual
from hetero_explore.kernels.target import (CPU, GENERATED, TARGETS, CPUTarget, Target, get_target, kernel_pair,
                                           register_target, unregister_target)
from hetero_explore.providers.cpu import NumbaCPUProvider

from support.harness import run_node

F = np.float32


class PyLoopTarget(Target):
    """Kernels as plain Python loops over host arrays: the whole target."""

    name = "pyloop"
    host = True
    template = """
def {name}({params}):
    for {index} in range({count}):
{body}
"""

    def compile(self, fn, cache):
        return fn

    def compile_device(self, fn, cache):
        return fn

    def to_device(self, *arrays):
        return arrays if len(arrays) != 1 else arrays[0]

    def to_host(self, a):
        return a


@dual
def _scaled(x, i, alpha):
    return alpha * x[i]


@pytest.fixture(scope="module")
def toy():
    registry.registry()
    t = register_target(PyLoopTarget())
    yield t
    unregister_target(t.name)
    assert t.name not in TARGETS and not any(k.target == t.name for k in GENERATED.values())


class ToyProvider(NumbaCPUProvider):
    """The CPU provider's host memory, on the toy target's kernels."""

    def __init__(self, target):
        super().__init__("pyloop")
        self.target = target


class GeneratedCPU(NumbaCPUProvider):
    target = CPUTarget(generated_only=True)


def test_a_new_pair_gets_a_kernel_for_the_toy_target(toy):
    pair = kernel_pair("test_targets_axpy", "x, y, alpha, out", "out[i] = _scaled(x, i, alpha) + y[i]",
                       module=__name__)
    assert set(pair.kernels) == set(TARGETS) >= {"cpu", "cuda", "pyloop"}
    assert GENERATED["_test_targets_axpy_pyloop"] is pair.kernel("pyloop")
    assert "for i in range(out.shape[0])" in pair.kernel("pyloop").py.__source__
    x, y = np.arange(5, dtype=F), np.ones(5, F)
    got, want = np.zeros(5, F), np.zeros(5, F)
    toy.launch(pair, 5, x, y, F(0.5), got)
    CPU.launch(pair, 5, x, y, F(0.5), want)
    assert got.tobytes() == want.tobytes() and got[4] == F(3)
    assert callable(_scaled.on("pyloop")) and not hasattr(_scaled.on("pyloop"), "py_func")   # a plain function
    assert get_target("pyloop") is toy


@pytest.mark.parametrize("op,inputs,attrs", [
    ("Add", [np.arange(6, dtype=F).reshape(2, 3), np.array([0.5, -1.0, 2.0], F)], {}),
    ("Relu", [np.array([-1.0, 0.0, -0.0, 3.5, np.inf], F)], {}),
    ("MatMul", [np.arange(6, dtype=F).reshape(2, 3) / F(7), np.arange(12, dtype=F).reshape(3, 4) / F(3)], {}),
    ("Softmax", [np.linspace(-3, 3, 12, dtype=F).reshape(3, 4)], {"axis": -1}),
    ("Transpose", [np.arange(24, dtype=F).reshape(2, 3, 4)], {"perm": [2, 0, 1]}),
], ids=["add-broadcast", "relu", "matmul", "softmax", "transpose"])
def test_existing_ops_run_on_the_toy_target(toy, op, inputs, attrs):
    """Pairs generated before the target was registered generate its kernel on first use;
    the op definitions' builds run unchanged (no fast path: the toy target has none)."""
    node = helper.make_node(op, [f"x{i}" for i in range(len(inputs))], ["y"], name=f"{op}_n", **attrs)
    before = {n for n, k in GENERATED.items() if k.target == "pyloop"}
    got = run_node(ToyProvider(toy), node, inputs)[0]
    assert {n for n, k in GENERATED.items() if k.target == "pyloop"} > before   # its kernels ran
    want = run_node(GeneratedCPU("cpu-generated"), node, inputs)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), (op, got, want)


def test_the_toy_target_claims_generated_ops_only(toy):
    by_op = {d.op_type: d for d in registry.registry() if d.domain == ""}
    assert "pyloop" in by_op["Add"].targets and "pyloop" in by_op["Conv"].targets
    assert "pyloop" not in by_op["Shape"].targets     # host-only code: targets=("cpu",)
    p = ToyProvider(toy)
    assert "MatMul" in p.supported_op_types() and "Shape" not in p.supported_op_types()
    assert toy.prepared("mm", np.ones((2, 2), F), rows=1, sam=2, sak=1) is None   # no rules registered for it
