"""The on-disk ONNX backend folders (simple, pytorch-converted, pytorch-operator,
light) on the CPU provider and the CUDA simulator, failing closed against the
"folders" part of tests/conformance_manifest.json as tests/test_conformance.py
does for the node cases: a listed case that fails, is no longer claimed or
disappears fails here, and so does a claimed case the manifest does not list.

Time: the light models take 1-30 s each on the CPU; three of them
(LIGHT_IN_SUITE) run here, all nine with HETERO_ALL_FOLDERS=1 and in
``bench/conformance_report.py`` (which writes the manifest from all of them)."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from hetero_explore.analysis.conformance import (CUDA_SIMULATOR_MAX_ELEMENTS, FOLDERS, MANIFEST_COMMAND, folder_cases,
                                        load_folder_manifest,
                                        manifest_verdict, op_without_kernel, run_case)
from hetero_explore.load.loader import load_model
from hetero_explore.providers.cpu import NumbaCPUProvider
from hetero_explore.providers.cuda import NumbaCUDAProvider
from hetero_explore.execution.runtime import run_graph

CPU = NumbaCPUProvider()
GPU = NumbaCUDAProvider()
RUNS = {"cpu": (CPU, None), "cuda-simulator": (GPU, CUDA_SIMULATOR_MAX_ELEMENTS)}
CASES = {c.name: c for c in folder_cases()}
MANIFEST = load_folder_manifest(Path(__file__).with_name("conformance_manifest.json"))
LIGHT = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet",
         "squeezenet", "vgg19", "zfnet512")
#: light models quick enough for the suite (about 1-3 s each on the CPU)
LIGHT_IN_SUITE = {"light/squeezenet", "light/inception_v1", "light/shufflenet"}
ALL_FOLDERS = os.environ.get("HETERO_ALL_FOLDERS") == "1"


def _in_suite(name: str) -> bool:
    return ALL_FOLDERS or not name.startswith("light/") or name in LIGHT_IN_SUITE


def _cases(key):
    provider, _ = RUNS[key]
    entry = MANIFEST.get(key, {"claimed": set(), "size_capped": set()})
    names = {n for n, c in CASES.items() if not op_without_kernel(c, provider)}
    names |= entry["claimed"] | entry["size_capped"]
    return sorted(n for n in names if _in_suite(n))


@pytest.mark.parametrize("key", sorted(RUNS))
def test_manifest_has_folder_entries(key):
    assert key in MANIFEST, f"the manifest has no folder entry for {key}: regenerate it ({MANIFEST_COMMAND})"


def test_folder_cases_are_read():
    per = {f: sum(1 for n in CASES if n.startswith(f + "/")) for f in FOLDERS}
    assert per == {"simple": 23, "pytorch-converted": 82, "pytorch-operator": 35, "light": 9}, per
    assert {f"light/{m}" for m in LIGHT} <= set(CASES)
    c = CASES["pytorch-operator/test_operator_add_broadcast"]
    (ins, outs), = c.data_sets
    assert [a.shape for a in ins] == [(2, 3), (3,)] and outs[0].shape == (2, 3)
    assert CASES["light/densenet121"].rtol == 2e-3      # from onnx's data/real/*/data.json


def test_cpu_claims_every_light_and_pytorch_case():
    """The issue's bar: pytorch-converted, pytorch-operator and light pass in full on the CPU
    provider (pytorch-converted since Conv/ConvTranspose/pools run 3-D)."""
    claimed = MANIFEST["cpu"]["claimed"]
    assert {f"light/{m}" for m in LIGHT} <= claimed
    assert {n for n in CASES if n.startswith("pytorch-operator/")} <= claimed
    assert {n for n in CASES if n.startswith("pytorch-converted/")} <= claimed


def _verdict(name, key):
    provider, cap = RUNS[key]
    entry = MANIFEST[key]
    if name not in CASES:
        pytest.fail(f"{name} is in the manifest's folders/{key} entry but onnx no longer ships it; "
                    f"regenerate the manifest ({MANIFEST_COMMAND}) and review its diff")
    row = run_case(CASES[name], provider, max_elements=cap)
    assert provider.live_allocations == 0, "run_graph leaked buffers"
    changed = manifest_verdict(row, entry)
    if changed:
        pytest.fail(f"folders/{key}: {changed}")
    if row["status"] == "skipped: size cap":
        pytest.skip("size cap")
    if row["status"] == "unclaimed":
        pytest.skip(f"not claimed on {provider.name}: {row['reason'].split(':')[0]}")
    assert row["status"] == "passed", f"{row['case']} [{row['ops']}] {row['status']}: {row['error']}"


@pytest.mark.parametrize("name", _cases("cpu"))
def test_folder_cpu(name):
    _verdict(name, "cpu")


@pytest.mark.parametrize("name", _cases("cuda-simulator"))
def test_folder_cuda_simulator(name):
    _verdict(name, "cuda-simulator")


@pytest.mark.parametrize("name", sorted(n for n in LIGHT_IN_SUITE | ({f"light/{m}" for m in LIGHT}
                                                                     if ALL_FOLDERS else set())))
def test_light_model_matches_onnxruntime(name):
    """Besides the stored output (test_folder_cpu): the same input through onnxruntime."""
    case = CASES[name]
    (ins, _), = case.data_sets
    inits = {t.name for t in case.model.graph.initializer}
    names = [vi.name for vi in case.model.graph.input if vi.name not in inits]
    feeds = dict(zip(names, ins))
    got = run_graph(load_model(case.model), CPU, feeds)
    sess = ort.InferenceSession(case.model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    for (k, g), w in zip(got.items(), want):
        assert g.shape == w.shape and g.dtype == w.dtype, k
        np.testing.assert_allclose(g, w, rtol=case.rtol, atol=1e-6)
