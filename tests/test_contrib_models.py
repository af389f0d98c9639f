"""Models as people ship them: onnxruntime's own tools' outputs (see ``contrib_models.py``) run on
the CPU provider within onnxruntime's tolerance, and heterogeneously (the virtual ``gpu`` with
half the model's contrib op types denied, so that they split between ``gpu`` and ``cpu``)
byte-identical to the CPU reference.

The models are generated once per session (torch exports with seeded weights, then
onnxruntime's optimiser, quantiser, session optimiser and onnxruntime-genai's builder); the
genai models are skipped, with the reason, where onnxruntime-genai is not installed.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("torch")
pytest.importorskip("transformers")

import hetero_explore as he  # noqa: E402

import contrib_models as cm  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("contrib_models")
    cache = {}

    def get(name):
        if name in cm.GENAI:
            why = cm.genai_available()
            if why:
                pytest.skip(why)
        if name not in cache:
            cache[name] = cm.build(name, d)
        return cache[name]

    return get


def _ort_outputs(case):
    so = ort.SessionOptions()
    if case.ort_options.get("graph_optimization_level") == "disable":
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(case.path), so, providers=["CPUExecutionProvider"])
    return {o.name: v for o, v in zip(sess.get_outputs(), sess.run(None, case.feeds))}


def _load(case):
    return he.load_model(str(case.path), input_shapes=case.input_shapes, dim_values=case.dim_values or None)


def _contrib_types(path):
    m = onnx.load(str(path), load_external_data=False)
    return {n.op_type for n in m.graph.node if n.domain == "com.microsoft" or n.op_type == "SimplifiedLayerNormalization"}


@pytest.mark.parametrize("name", list(cm.BUILDERS))
def test_tool_output_runs_within_onnxruntime_tolerance(corpus, name):
    case = corpus(name)
    written = _contrib_types(case.path)
    assert set(case.ops) <= written, f"{name}: the tool wrote {sorted(written)}, expected {case.ops}"
    g = _load(case)
    plan = he.plan(g, ["cpu"])
    df = plan.placement_df()
    assert set(df.provider) == {"cpu"}, df[df.provider != "cpu"][["name", "op_type", "declined_by"]].to_string()
    ours = he.execute_reference(g, "cpu", case.feeds).outputs
    theirs = _ort_outputs(case)
    assert set(theirs) <= set(ours)
    for k, v in theirs.items():
        assert ours[k].shape == v.shape and ours[k].dtype == v.dtype, k
        np.testing.assert_allclose(ours[k], v, rtol=0, atol=case.atol, err_msg=f"{name}: output {k}")


@pytest.mark.parametrize("name", list(cm.BUILDERS))
def test_tool_output_heterogeneous_is_byte_identical(corpus, name):
    case = corpus(name)
    ex = he.explore(str(case.path), providers=["gpu", "cpu"], input_shapes=case.input_shapes,
                    dim_values=case.dim_values or None)
    types = sorted(t for t in _contrib_types(case.path) if t in set(ex.graph.op_types()))
    if len(types) > 1:
        ex.deny("gpu", types[::2])     # half the contrib op types to the CPU: both providers run some
        ex.replan()
    placed = ex.plan.placement_df()
    assert "unplaced" not in set(placed.provider)
    on = placed[placed.op_type.isin(types)] if types else placed   # a plain QDQ model: any node
    assert "gpu" in set(on.provider), on[["name", "op_type", "provider", "declined_by"]].to_string()
    if len(types) > 1:
        assert {"gpu", "cpu"} <= set(on.provider)
    ex.execute(case.feeds)
    assert ex.byte_identical, ex.diff
