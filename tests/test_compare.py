"""compare(): bit-level diffs, ULP distances, and blame of the first divergence."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import hetero_explore as he  # noqa: E402
from hetero_explore.data import models  # noqa: E402
from hetero_explore import providers as P  # noqa: E402
from hetero_explore.analysis.compare import compare, diff_arrays, first_divergence, ulp_distance  # noqa: E402
from hetero_explore.execution.executor import execute, execute_reference  # noqa: E402
from hetero_explore.execution.inputs import random_inputs  # noqa: E402
from hetero_explore.providers.base import Kernel  # noqa: E402
from hetero_explore.providers.cpu import NumbaCPUProvider  # noqa: E402

F32 = np.float32


# -- ULP and bit-level diffs ------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_ulp_distance_counts_representable_steps(dtype):
    one = dtype(1)
    up = np.nextafter(one, dtype(2))
    up3 = np.nextafter(np.nextafter(up, dtype(2)), dtype(2))
    tiny = np.nextafter(dtype(0), dtype(1))
    a = np.array([one, one, up3, dtype(0), -tiny, np.inf], dtype=dtype)
    b = np.array([one, up, one, -dtype(0), tiny, np.finfo(dtype).max], dtype=dtype)
    assert ulp_distance(a, b).tolist() == [0, 1, 3, 0, 2, 1]
    assert ulp_distance(b, a).tolist() == [0, 1, 3, 0, 2, 1]


def test_ulp_distance_spans_the_whole_float64_range_without_overflow():
    a = np.array([-np.inf], np.float64)
    b = np.array([np.inf], np.float64)
    assert int(ulp_distance(a, b)[0]) == 2 * 0x7FF0000000000000


def test_ulp_distance_rejects_non_floats():
    with pytest.raises(TypeError):
        ulp_distance(np.arange(3), np.arange(3))
    with pytest.raises(TypeError):
        ulp_distance(np.zeros(3, np.float32), np.zeros(3, np.float64))


def test_nans_compare_by_bit_pattern():
    qnan = np.array([np.nan], F32)
    other = np.array([0x7FC00001], np.uint32).view(F32)
    assert diff_arrays(qnan, qnan.copy())["byte_identical"]
    d = diff_arrays(qnan, other)
    assert not d["byte_identical"] and d["n_diff"] == 1 and d["max_ulp"] == 1
    assert np.isnan(d["max_abs"])


def test_signed_zeros_differ_in_bytes_but_not_in_value():
    d = diff_arrays(np.array([0.0, 1.0], F32), np.array([-0.0, 1.0], F32))
    assert not d["byte_identical"] and d["n_diff"] == 1 and d["max_abs"] == 0.0 and d["max_ulp"] == 0
    assert d["first_diff_index"] == (0,)


def test_diff_arrays_reports_counts_magnitudes_and_first_index():
    a = np.zeros((3, 4), F32)
    b = a.copy()
    b[1, 2] = np.nextafter(F32(0), F32(1)) * 5
    b[2, 0] = 0.5
    d = diff_arrays(a, b)
    assert d["n_diff"] == 2 and d["first_diff_index"] == (1, 2) and d["max_abs"] == 0.5
    assert d["max_ulp"] == int(np.array(0.5, F32).view(np.uint32))
    assert diff_arrays(np.arange(4), np.array([0, 1, 2, 7]))["max_abs"] == 4 and \
        diff_arrays(np.arange(4), np.array([0, 1, 2, 7]))["max_ulp"] is None
    bools = diff_arrays(np.array([True, False]), np.array([True, True]))
    assert bools["n_diff"] == 1 and bools["max_abs"] is None
    shape = diff_arrays(np.zeros(3, F32), np.zeros(4, F32))
    assert not shape["byte_identical"] and shape["n_diff"] is None
    assert not diff_arrays(np.zeros(3, F32), np.zeros(3, np.float64))["byte_identical"]
    assert diff_arrays(np.zeros((0, 2), F32), np.zeros((0, 2), F32))["byte_identical"]
    c = np.zeros(2, np.complex128)
    assert diff_arrays(c, c + 1j)["n_diff"] == 2


def test_compare_mappings_and_mismatched_names():
    df = compare({"y": np.ones(3, F32), "z": np.zeros(2, np.int64)},
                 {"y": np.ones(3, F32), "z": np.array([0, 5])})
    assert list(df.output) == ["y", "z"]
    assert df.byte_identical.tolist() == [True, False]
    assert df.loc[1, "n_diff"] == 1 and df.loc[1, "max_abs"] == 5
    with pytest.raises(ValueError, match="only in run \\['y'\\]"):
        compare({"y": np.ones(1)}, {"w": np.ones(1)})
    with pytest.raises(TypeError):
        compare([np.ones(1)], {"w": np.ones(1)})


# -- runs --------------------------------------------------------------------------------
GRAPH = he.load_model(models.chain("tiny"))
FEEDS = random_inputs(GRAPH, seed=3)


def _reference():
    return execute_reference(GRAPH, P.cpu(), FEEDS)


def test_compare_runs_and_refuses_different_inputs():
    ref = _reference()
    run = execute(he.plan(GRAPH, [P.virtual_gpu(), P.cpu()]), FEEDS)
    df = compare(run, ref, blame=True)
    assert df.byte_identical.all() and df.blamed.isna().all()
    other = execute_reference(GRAPH, P.cpu(), random_inputs(GRAPH, seed=4))
    with pytest.raises(ValueError, match="different inputs"):
        compare(run, other)
    with pytest.raises(TypeError, match="RunResult"):
        first_divergence(run.outputs, ref)


class NonConforming(P.VirtualProvider):
    """Runs CPU kernels but nudges one node's output (or corrupts its copies)."""

    def __init__(self, name, device, ops, *, nudge_node=None, nudge_once=False, corrupt_copies=False,
                 corrupt_staging=False):
        super().__init__(name, device, ops, kernels=NumbaCPUProvider(f"{name}-kernels"))
        self.nudge_node = nudge_node
        self.nudges_left = 1 if nudge_once else None
        self.corrupt_copies = corrupt_copies
        self.corrupt_staging = corrupt_staging

    def get_kernel(self, ctx):
        k = super().get_kernel(ctx)
        if ctx.node.name != self.nudge_node:
            return k
        inner = k._fn

        def fn(ins, outs):
            inner(ins, outs)
            if self.nudges_left is not None:
                if self.nudges_left == 0:
                    return
                self.nudges_left -= 1
            o = outs[0].reshape(-1)
            o[-1] += F32(0.25)
        return Kernel(k.ctx, fn)

    def copy_device_async(self, src, out):
        ev = super().copy_device_async(src, out)
        if self.corrupt_copies:
            out.data.reshape(-1)[0] += F32(1)
        return ev

    def copy_from_host(self, array, out=None):
        out = super().copy_from_host(array, out)
        if self.corrupt_staging and out.shape == (8,):
            out.data[3] = -out.data[3]
        if self.corrupt_copies:
            out.data.reshape(-1)[0] += F32(1)
        return out


def test_a_nonconforming_kernel_is_blamed_to_its_node():
    ref = _reference()
    bad = NonConforming("bad", "npu:0", ["Relu"], nudge_node="relu_1")
    plan = he.plan(GRAPH, [bad, P.cpu()])
    run = execute(plan, FEEDS)
    df = compare(run, ref, blame=True)
    row = df.iloc[0]
    assert not row.byte_identical and row.max_ulp >= 1
    assert row.blamed == "node" and row.blamed_node == "relu_1" and row.blamed_op == "Relu"
    assert row.blamed_provider == "bad" and row.blamed_partition == plan.node_partition[3]
    assert row.transfers_on_way[0].startswith("relu_1: bad → cpu")
    assert "relu_1" in row.blame_detail and "inputs match" in row.blame_detail
    assert bad.live_allocations == 0


def test_a_corrupting_transfer_is_blamed_to_the_transfer():
    ref = _reference()
    bad = NonConforming("bad", "gpu:1", ["Relu"], corrupt_copies=True)
    plan = he.plan(GRAPH, [bad, P.cpu()])
    run = execute(plan, FEEDS)
    bl = first_divergence(run, ref)["y"]
    assert bl.where == "transfer" and bl.value == "add_0" and bl.node == "relu_0"
    assert bl.provider == "bad" and bl.transfers[0] == "add_0: cpu → bad (H2D)"
    assert "destination's copy differs" in bl.detail


def test_corrupted_staging_is_blamed_to_the_staging():
    ref = _reference()
    bad = NonConforming("bad", "npu:0", ["Add"], corrupt_staging=True)
    run = execute(he.plan(GRAPH, [bad, P.cpu()]), FEEDS)
    bl = first_divergence(run, ref)["y"]
    assert bl.where == "staging" and bl.value == "c_0" and bl.node == "add_0" and bl.partition == 0


def test_blame_on_a_reference_that_differs_from_a_correct_run():
    """Blame is relative: a broken *reference* provider is named by its node as well."""
    bad = NonConforming("bad", "npu:0", ["Add", "Relu"], nudge_node="add_2")
    ref = execute_reference(GRAPH, bad, FEEDS)
    run = execute(he.plan(GRAPH, [P.virtual_gpu(), P.cpu()]), FEEDS)
    bl = first_divergence(run, ref)["y"]
    assert bl.where == "node" and bl.node == "add_2" and bl.provider == "gpu"


def test_a_difference_that_does_not_reproduce_is_reported_as_such():
    ref = _reference()
    flaky = NonConforming("flaky", "npu:0", ["Relu"], nudge_node="relu_2", nudge_once=True)
    run = execute(he.plan(GRAPH, [flaky, P.cpu()]), FEEDS)
    df = compare(run, ref, blame=True)
    assert df.loc[0, "blamed"] == "not-reproduced" and "non-deterministic" in df.loc[0, "blame_detail"]


def test_blame_reuses_kept_intermediates():
    ref = execute_reference(GRAPH, P.cpu(), FEEDS, keep_intermediates=True)
    bad = NonConforming("bad", "npu:0", ["Relu"], nudge_node="relu_0", nudge_once=True)
    run = execute(he.plan(GRAPH, [bad, P.cpu()]), FEEDS, keep_intermediates=True)
    bl = first_divergence(run, ref)["y"]  # the one nudged run is the one examined
    assert bl.where == "node" and bl.node == "relu_0"


def test_the_app_the_cli_and_the_sweep_check_runs_with_one_function(monkeypatch, tmp_path):
    """Execute + reference + compare is written once (analysis.check.run_and_compare): the
    Explorer, the CLI and the sweep all call it, so they agree on what a checked run is."""
    import onnx

    from hetero_explore.analysis import check
    from hetero_explore.analysis.fleet import run_one
    from hetero_explore.cli.main import main

    seen = []
    real = check.run_and_compare

    def spy(plan, inputs, **kw):
        got = real(plan, inputs, **kw)
        seen.append((plan.graph.name, got.byte_identical))
        return got

    monkeypatch.setattr(check, "run_and_compare", spy)
    m = models.mlp("tiny")
    ex = he.explore(m, providers=["gpu", "cpu"])
    ex.execute()
    assert len(seen) == 1 and ex.byte_identical
    path = tmp_path / "mlp.onnx"
    onnx.save(m, path)
    assert main(["report", str(path), "--providers", "gpu,cpu", "--execute", "-o", str(tmp_path / "r.html")]) == 0
    assert len(seen) == 2
    row = run_one(str(path), ("gpu", "cpu"), {}, execute=True)
    assert row["ok"] and row["byte_identical"] and len(seen) == 3, row
    assert all(ok for _, ok in seen)
