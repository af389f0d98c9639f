"""ONNX backend node cases on the CPU provider and the CUDA simulator, and the
single-provider graph runner (hetero_explore.execution.runtime.run_graph) they run on.

Conformance fails closed: tests/conformance_manifest.json lists the cases each
provider claims (and those the CUDA simulator's size cap skips). A listed case
that fails, is no longer claimed or is no longer generated fails here, and so
does a claimed case the manifest does not list; each failure says which case
and the command that regenerates the manifest (review its diff). A failing case
in an op owned by someone else is listed in KNOWN_FAILURES (xfail, not strict)
with the reason, so that the suite stays green while the fix is routed.
"""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from pathlib import Path

from hetero_explore.analysis.conformance import (CUDA_SIMULATOR_MAX_ELEMENTS, MANIFEST_COMMAND, _is_random,
                                        compare_outputs,
                                        load_manifest, manifest_verdict, node_cases, op_without_kernel,
                                        run_case, run_conformance)
from hetero_explore.ir.errors import ExecutionError, InputValidationError, KernelError
from hetero_explore.load.loader import load_model
from hetero_explore.providers.cpu import NumbaCPUProvider
from hetero_explore.providers.cuda import NumbaCUDAProvider
from hetero_explore.providers.virtual import mask
from hetero_explore.execution.runtime import run_graph
from support.bits import assert_bits_equal

CPU = NumbaCPUProvider()
GPU = NumbaCUDAProvider()

#: the CUDA simulator runs one Python thread per element: keep its cases tiny
CUDA_MAX_ELEMENTS = CUDA_SIMULATOR_MAX_ELEMENTS

#: case name -> why it fails (op, owner, what is wrong). Not strict: a fixed case XPASSes.
KNOWN_FAILURES: dict[str, str] = {
}

CASES = {c.name: c for c in node_cases()}
MANIFEST_PATH = Path(__file__).with_name("conformance_manifest.json")
MANIFEST = load_manifest(MANIFEST_PATH)
RUNS = {"cpu": (CPU, None), "cuda-simulator": (GPU, CUDA_MAX_ELEMENTS)}


def _cases(key):
    """Every case the manifest lists for ``key``, and every case whose op types all have
    a kernel on its provider (cheap, at collection; whether such a case is claimed is
    decided when it runs). A listed case whose provider lost a kernel stays a test."""
    provider, _ = RUNS[key]
    entry = MANIFEST.get(key, {"claimed": set(), "size_capped": set()})
    names = {c.name for c in CASES.values() if not op_without_kernel(c, provider)}
    names |= entry["claimed"] | entry["size_capped"]
    return [pytest.param(n, marks=pytest.mark.xfail(reason=KNOWN_FAILURES[n], strict=False))
            if n in KNOWN_FAILURES else n for n in sorted(names)]


def _verdict(name, key, record=None):
    provider, cap = RUNS[key]
    entry = MANIFEST[key]
    if name not in CASES:
        pytest.fail(f"{name} is in the manifest's {key} entry but onnx no longer generates it; regenerate "
                    f"the manifest ({MANIFEST_COMMAND}) and review its diff")
    row = run_case(CASES[name], provider, max_elements=cap, record=record)
    assert provider.live_allocations == 0, "run_graph leaked buffers"
    changed = manifest_verdict(row, entry)
    if changed:
        pytest.fail(f"{key}: {changed}")
    if row["status"] == "skipped: size cap":  # listed in the manifest's size_capped
        pytest.skip("size cap")
    if row["status"] == "unclaimed":  # not listed: nothing to hold (details: bench/conformance_report.py)
        pytest.skip(f"not claimed on {provider.name}: {row['reason'].split(':')[0]}")
    assert row["status"] == "passed", f"{row['case']} [{row['ops']}] {row['status']}: {row['error']}"


@pytest.mark.parametrize("name", _cases("cpu"))
def test_backend_case_cpu(name):
    _verdict(name, "cpu")


@pytest.mark.slow
@pytest.mark.parametrize("name", _cases("cuda-simulator"))
def test_backend_case_cuda_simulator(name):
    """The case on the CUDA simulator; then, for every case the CPU provider claims too, the
    two providers' outputs bit for bit (support.bits: NaN payloads aside), so the kernel
    contract is held on every conformance case both run, not only on the kernels' own tests."""
    gpu_out: list = []
    _verdict(name, "cuda-simulator", gpu_out)
    case = CASES[name]
    if name not in MANIFEST["cpu"]["claimed"] or _is_random(case.model) or not _bitwise_portable(case.model):
        return
    cpu_out: list = []
    row = run_case(case, CPU, record=cpu_out)
    assert row["status"] == "passed", row
    assert len(cpu_out) == len(gpu_out)
    for k, (c, g) in enumerate(zip(cpu_out, gpu_out)):
        assert set(c) == set(g)
        for out in c:
            assert_bits_equal(c[out], g[out], f"{name} data set {k} output {out!r}: CPU vs CUDA simulator")


def _bitwise_portable(model) -> bool:
    """Every op of the case has definitions that honour the kernel contract (bitwise across
    targets); a definition declaring otherwise says so in the op table."""
    from hetero_explore.kernels import registry
    for n in model.graph.node:
        defs = [d for d in registry.registry() if d.op_type == n.op_type and d.domain == (n.domain or "")]
        if any(not d.bitwise_portable for d in defs):
            return False
    return True


def test_manifest_is_complete_sorted_and_made_with_this_cap():
    doc = json.loads(MANIFEST_PATH.read_text())
    assert doc["regenerate"] == MANIFEST_COMMAND
    assert set(doc["providers"]) == set(RUNS), f"regenerate the manifest: {MANIFEST_COMMAND}"
    for key, entry in doc["providers"].items():
        for field in ("claimed", "size_capped"):
            assert entry[field] == sorted(set(entry[field])), f"{key}.{field} is not sorted and unique"
        assert not set(entry["claimed"]) & set(entry["size_capped"])
        assert entry["max_elements"] == RUNS[key][1], (
            f"the {key} entry was made with size cap {entry['max_elements']}, the tests use {RUNS[key][1]}: "
            f"regenerate the manifest ({MANIFEST_COMMAND})")
    assert MANIFEST["cpu"]["claimed"] and MANIFEST["cuda-simulator"]["claimed"]


def _row(**kw):
    r = {"case": "test_x", "ops": "X", "claimed": False, "passed": False, "status": "unclaimed",
         "reason": "X: no kernel on cpu", "error": ""}
    r.update(kw)
    return r


@pytest.mark.parametrize("row, entry, needle", [
    (_row(), {"claimed": {"test_x"}, "size_capped": set()}, "no longer claimed: X: no kernel on cpu"),
    (_row(claimed=True, passed=True, status="passed"), {"claimed": set(), "size_capped": set()},
     "newly claimed (passed)"),
    (_row(claimed=True, status="failed"), {"claimed": set(), "size_capped": {"test_x"}},
     "lists it as skipped by the size cap"),
    (_row(status="skipped: size cap", reason="a tensor has 300 elements > 256"),
     {"claimed": {"test_x"}, "size_capped": set()}, "now skipped by the size cap"),
    (_row(status="skipped: size cap"), {"claimed": set(), "size_capped": set()}, "not listed"),
    (_row(), {"claimed": set(), "size_capped": {"test_x"}}, "was skipped by the size cap"),
], ids=["claim-gone", "new-claim", "capped-now-claimed", "claimed-now-capped", "new-cap", "cap-gone"])
def test_manifest_verdict_names_what_changed_and_the_command(row, entry, needle):
    why = manifest_verdict(row, entry)
    assert why and needle in why and "test_x" in why and MANIFEST_COMMAND in why


@pytest.mark.parametrize("row, entry", [
    (_row(), {"claimed": set(), "size_capped": set()}),
    (_row(claimed=True, status="failed"), {"claimed": {"test_x"}, "size_capped": set()}),
    (_row(status="skipped: size cap"), {"claimed": set(), "size_capped": {"test_x"}}),
], ids=["unlisted-unclaimed", "listed-claimed", "listed-capped"])
def test_manifest_verdict_agrees(row, entry):
    assert manifest_verdict(row, entry) is None


def test_a_provider_that_stops_claiming_a_listed_case_fails_red():
    """The regression the manifest exists for: a provider that loses a kernel."""
    masked = mask(NumbaCPUProvider(), deny=["Transpose"])
    row = run_case(CASES["test_transpose_default"], masked)
    assert row["status"] == "unclaimed"
    assert "test_transpose_default" in MANIFEST["cpu"]["claimed"]
    why = manifest_verdict(row, MANIFEST["cpu"])
    assert why and "no longer claimed" in why and "Transpose" in why


def test_known_failures_are_real_cases():
    assert set(KNOWN_FAILURES) <= set(CASES)


def test_run_conformance_frame():
    df = run_conformance(CPU, pattern=["test_transpose_default", "test_shape", "test_abs",
                                       "test_dft_inverse", "test_slice"])
    assert list(df.columns[:5]) == ["case", "ops", "claimed", "passed", "status"]
    by = df.set_index("case")
    assert bool(by.loc["test_transpose_default", "passed"])
    assert by.loc["test_dft_inverse", "status"] == "unclaimed"   # numpy's float32 FFT noise: declined
    assert by.loc["test_dft_inverse", "reason"]                 # declined with a reason
    gpu = run_conformance(GPU, pattern=["test_shape", "test_slice", "test_concat_1d_axis_0"],
                          max_elements=256).set_index("case")
    assert gpu.loc["test_shape", "status"] == "unclaimed"
    assert gpu.loc["test_slice", "status"] == "skipped: size cap"
    assert gpu.loc["test_concat_1d_axis_0", "status"] == "passed"


def test_slice_cases_bind_constants_for_cuda():
    """CUDA needs constant Slice parameters: the runner binds them as initializers."""
    row = run_case(CASES["test_slice_neg_steps"], GPU)
    assert row["status"] == "passed", row
    assert "starts" in row["const_inputs"]
    assert run_case(CASES["test_slice_neg_steps"], CPU)["const_inputs"] == ""


def test_compare_outputs():
    a = np.array([1.0, np.nan], np.float32)
    assert compare_outputs(a, a.copy(), 1e-4, 1e-5) is None
    assert compare_outputs(a, np.array([1.0, 0.0], np.float32), 1e-4, 1e-5)
    assert compare_outputs(a, a.astype(np.float64), 1e-4, 1e-5).startswith("dtype")
    assert compare_outputs(np.array([1, 2]), np.array([1, 3]), 0, 0).startswith("1 of 2")
    assert compare_outputs(np.zeros(2), np.zeros(3), 0, 0).startswith("shape")


def test_crashing_case_is_recorded():
    class Broken(NumbaCPUProvider):
        def supports(self, *a, **k):
            raise RuntimeError("boom")

    row = run_case(CASES["test_transpose_default"], Broken())
    assert row["status"] == "error" and "boom" in row["error"]


# --- run_graph ----------------------------------------------------------------
def _model():
    """x(2,3,4) -> Transpose -> Reshape(const) -> Concat(initializer) -> Gather -> Slice;
    plus Shape(x) and a dead Identity."""
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=[2, 0, 1]),
        helper.make_node("Reshape", ["t", "shp"], ["r"]),
        helper.make_node("Concat", ["r", "w"], ["c"], axis=1),
        helper.make_node("Gather", ["c", "idx"], ["g"], axis=0),
        helper.make_node("Slice", ["g", "st", "en", "ax", "sp"], ["y"]),
        helper.make_node("Identity", ["t"], ["dead"]),
    ]
    inits = [numpy_helper.from_array(np.array([4, 6], np.int64), "shp"),
             numpy_helper.from_array(np.arange(8, dtype=np.float32).reshape(4, 2), "w"),
             numpy_helper.from_array(np.array([1], np.int64), "st"),
             numpy_helper.from_array(np.array([-1], np.int64), "en"),
             numpy_helper.from_array(np.array([1], np.int64), "ax"),
             numpy_helper.from_array(np.array([2], np.int64), "sp")]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
         helper.make_tensor_value_info("idx", TensorProto.INT64, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 3]),
         helper.make_tensor_value_info("t", TensorProto.FLOAT, [4, 2, 3])],
        initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _feeds():
    return {"x": np.arange(24, dtype=np.float32).reshape(2, 3, 4), "idx": np.array([3, -1, 0])}


@pytest.mark.parametrize("provider", [CPU, GPU], ids=["cpu", "cuda"])
def test_run_graph_matches_reference(provider):
    model = _model()
    graph = load_model(model, optimize=False)     # keep the dead Identity: the runner must run it
    start = provider.live_allocations
    out = run_graph(graph, provider, _feeds())
    want = ReferenceEvaluator(model).run(None, _feeds())
    assert list(out) == ["y", "t"]
    for got, w in zip(out.values(), want):
        assert got.dtype == w.dtype and np.array_equal(got, w)
    assert provider.live_allocations == start
    inter = run_graph(graph, provider, _feeds(), keep_intermediates=True)
    assert list(inter)[:2] == ["y", "t"] and {"r", "c", "g", "dead"} <= set(inter)
    assert provider.live_allocations == start


def test_run_graph_frees_after_last_use():
    from hetero_explore.execution.executor import execute_reference
    p = NumbaCPUProvider()
    graph = load_model(_model(), optimize=False)  # the nodes as written (the dead Identity too)
    run_graph(graph, p, _feeds())   # run_graph is execute_reference through the executor
    assert p.live_allocations == 0
    assert p.peak_bytes < sum(v.nbytes for v in graph.values.values())
    q = NumbaCPUProvider()
    run = execute_reference(graph, q, _feeds())
    # every allocation is the run's own (staged inputs and initializers, outputs) or its arena,
    # where the intermediates share memory by lifetime: the peak stays below the sum of all values
    assert q.total_allocations == run.allocations + run.arena_allocations and run.arena_allocations == 1
    assert q.live_allocations == 0 and q.peak_bytes == sum(run.peak_bytes.values())


def test_run_graph_unsupported_node_fails_before_running():
    nodes = [helper.make_node("Identity", ["x"], ["a"]), helper.make_node("Shape", ["a"], ["y"])]
    model = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [1])]),
        opset_imports=[helper.make_opsetid("", 17)])
    graph = load_model(model, fold_constants=False, optimize=False)   # the Identity runs first
    before = GPU.total_allocations
    with pytest.raises(KernelError, match="Shape"):
        run_graph(graph, GPU, {"x": np.zeros(2, np.float32)})
    assert GPU.total_allocations == before
    assert np.array_equal(run_graph(graph, CPU, {"x": np.zeros(2, np.float32)})["y"], [2])


def test_run_graph_frees_everything_on_failure():
    p = NumbaCPUProvider()
    graph = load_model(_model())
    feeds = _feeds()
    feeds["idx"] = np.array([3, 7, 0])  # out of range: the CPU Gather raises midway
    with pytest.raises(ExecutionError, match="out of range"):
        run_graph(graph, p, feeds)
    assert p.live_allocations == 0 and p.total_allocations > 0


def test_run_graph_validates_inputs():
    graph = load_model(_model())
    good = _feeds()
    with pytest.raises(InputValidationError, match="missing"):
        run_graph(graph, CPU, {"x": good["x"]})
    with pytest.raises(InputValidationError, match="unknown"):
        run_graph(graph, CPU, {**good, "z": good["x"]})
    with pytest.raises(InputValidationError, match="dtype"):
        run_graph(graph, CPU, {**good, "x": good["x"].astype(np.float64)})
    with pytest.raises(InputValidationError, match="shape"):
        run_graph(graph, CPU, {**good, "x": good["x"].reshape(4, 3, 2)})
    assert CPU.live_allocations == 0


@pytest.mark.parametrize("provider", [CPU, GPU], ids=["cpu", "cuda"])
def test_run_graph_scalars_and_passthrough(provider):
    """A scalar input keeps its shape; a graph input may also be a graph output."""
    nodes = [helper.make_node("Unsqueeze", ["s", "ax"], ["u"])]
    model = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("s", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("u", TensorProto.FLOAT, [1]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [])],
        initializer=[numpy_helper.from_array(np.array([0], np.int64), "ax")]),
        opset_imports=[helper.make_opsetid("", 17)])
    graph = load_model(model)
    out = run_graph(graph, provider, {"s": np.array(2.5, np.float32)})
    assert out["u"].shape == (1,) and out["u"][0] == 2.5
    assert out["s"].shape == () and out["s"] == 2.5
    assert provider.live_allocations == 0


def test_conformance_runs_through_the_executors_programs(monkeypatch):
    """Conformance runs the path users run: the executor (a plan, held kernels) and its compiled
    programs (arena + replay), never a loop of its own. Counted on real cases."""
    from hetero_explore.execution import executor as ex_mod
    from hetero_explore.runner import core as runner_mod

    runs, binds = [], []
    real_run, real_bind = ex_mod.HeterogeneousExecutor.run, runner_mod.NodeRunner.bind

    def run(self, *a, **kw):
        runs.append(self.kind)
        return real_run(self, *a, **kw)

    def bind(self, *a, **kw):
        binds.append(len(self.steps))
        return real_bind(self, *a, **kw)

    monkeypatch.setattr(ex_mod.HeterogeneousExecutor, "run", run)
    monkeypatch.setattr(runner_mod.NodeRunner, "bind", bind)
    names = [n for n in ("test_add", "test_softmax_axis_0", "test_if", "test_loop11") if n in CASES]
    for name in names:
        row = run_case(CASES[name], CPU)
        assert row["status"] == "passed", row
    assert runs.count("reference") >= len(names)        # one executor run per data set, at least
    assert len(binds) >= len(names) and all(n > 0 for n in binds)   # every partition ran as a program
