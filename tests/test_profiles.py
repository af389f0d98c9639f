"""Capability profiles of real execution providers (hetero_explore/providers/profiles)."""

from __future__ import annotations

import json
import re
from importlib import resources

import numpy as np
import onnx
import onnx.defs
import pytest
from onnx import TensorProto, helper, numpy_helper, shape_inference

import hetero_explore as he
from hetero_explore.data import models
from hetero_explore.cli.main import main
from hetero_explore.providers import PROVIDERS, resolve
from hetero_explore.ir.context import node_context
from hetero_explore.providers.profiles import (PROFILE_NAMES, ProfileProvider, load_profile, profile_provider,
                                               profiles_df)

EXPECTED = {"ort-cuda", "tensorrt", "coreml", "coreml-mlprogram", "nnapi", "qnn", "directml", "openvino"}
KINDS = {"input_rank", "const_input", "attr_in", "attr_absent", "attr_all_ones", "input_dtype", "outputs_absent",
         "const_or_attr"}


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "t", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    # outputs typed by onnx's shape inference
    inferred = {v.name: v for v in shape_inference.infer_shapes(m, strict_mode=True).graph.value_info}
    inferred.update({v.name: v for v in shape_inference.infer_shapes(m, strict_mode=True).graph.output})
    for o in m.graph.output:
        if not o.type.tensor_type.HasField("shape") and o.name in inferred:
            o.CopyFrom(inferred[o.name])
    return m


def _vi(name, shape, dt=TensorProto.FLOAT):
    if shape is None:  # an output whose type shape inference computes
        return helper.make_tensor_value_info(name, 0, None)
    return helper.make_tensor_value_info(name, dt, shape)


def _ctx(model, i=0):
    g = he.load_model(model, fold_constants=False)
    return node_context(g, g.nodes[i])


def _table(name):
    return profile_provider(name, execute=False)


# -- the data files ------------------------------------------------------------------
def test_every_profile_is_registered_by_name():
    assert EXPECTED <= set(PROFILE_NAMES)
    for n in PROFILE_NAMES:
        assert n in PROVIDERS
        p = resolve(n)
        assert isinstance(p, ProfileProvider) and p.name == n and p.can_execute


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_profile_loads_and_validates(name):
    raw = json.loads((resources.files("hetero_explore.providers.profiles") / f"{name}.json")
                     .read_text(encoding="utf-8"))
    p = load_profile(name)
    # source and version recorded
    src = p.source
    assert src["repository"] and src["path"] and src["url"].startswith("https://")
    assert re.fullmatch(r"[0-9a-f]{64}", src["sha256"])
    assert src["commit"] is None or re.fullmatch(r"[0-9a-f]{40}", src["commit"])
    assert src["commit"] or src["branch"], "a source without a commit must name its branch"
    assert p.version and p.derived and p.execution_provider.endswith("ExecutionProvider")
    assert len(p.ops) >= 30
    top = onnx.defs.onnx_opset_version()
    if p.model_opsets is not None:
        lo, hi = p.model_opsets
        assert 1 <= lo <= hi <= top
    for (dom, op), spec in p.ops.items():
        if spec.source is not None:   # onnxruntime's contrib kernels (contrib/<name>.json): their own source
            assert re.fullmatch(r"[0-9a-f]{40}", spec.source["commit"]) and re.fullmatch(r"[0-9a-f]{64}",
                                                                                          spec.source["sha256"])
            assert dom == "com.microsoft" or (dom, op) == ("", "SimplifiedLayerNormalization"), (name, op)
            assert [(v.since, v.until) for v in spec.versions] == [(1, None)]
            continue
        assert onnx.defs.has(op, dom), f"{name}: {op} is not an onnx op"
        assert spec.versions
        for v in spec.versions:
            if v.since is None:
                assert v.until is None
                continue
            assert 1 <= v.since <= top and (v.until is None or v.since <= v.until <= top)
            # a claimed schema version is one onnx's history has for this op
            versions = {onnx.defs.get_schema(op, n, dom).since_version
                        for n in range(v.since, (v.until or top) + 1) if _has(op, n, dom)}
            assert any(v.since <= x <= (v.until or top) for x in versions), (name, op, v)
        for c in spec.conditions:
            assert c.kind in KINDS
            assert c.text in spec.note.replace("<br />", "<br/>"), (name, op, c.text)
        for u in spec.unchecked:
            assert u in spec.note
    assert raw["name"] == name


def _has(op, n, dom):
    try:
        onnx.defs.get_schema(op, n, dom)
        return True
    except Exception:
        return False


def test_profiles_df_lists_every_profile_with_its_source():
    df = profiles_df()
    assert set(df["name"]) == set(PROFILE_NAMES)
    assert df["source"].str.startswith("https://").all() and (df["ops"] > 0).all()


def test_support_df_shows_conditions_and_source():
    df = resolve("coreml").support_df()
    conv = df[df.op_type == "Conv"].iloc[0]
    assert "Only 1D/2D Conv is supported." in conv["conditions"]
    assert conv["source"].startswith("https://github.com/microsoft/onnxruntime/")
    assert set(df.op_type) == {op for _, op in load_profile("coreml").ops}


# -- documented conditions -----------------------------------------------------------
def _conv(rank, const_w=True):
    x = _vi("x", [1, 2] + [5] * (rank - 2))
    w = np.ones([3, 2] + [3] * (rank - 2), np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv")]
    if const_w:
        return _model(nodes, [x], [_vi("y", None)], [numpy_helper.from_array(w, "w")])
    return _model(nodes, [x, _vi("w", list(w.shape))], [_vi("y", None)])


def test_coreml_declines_a_3d_conv_citing_its_docs():
    p = _table("coreml")
    ok = p.supports(_ctx(_conv(4)))
    assert ok.supported
    m = p.supports(_ctx(_conv(5)))
    assert not m.supported
    assert "input 0 has rank 5" in m.reason and "Only 1D/2D Conv is supported." in m.reason
    assert "coreml_supported_ops.md" in m.reason
    # and the constant-weights condition
    m = p.supports(_ctx(_conv(4, const_w=False)))
    assert not m.supported and "Weights and bias should be constant." in m.reason


def test_nnapi_takes_only_2d_conv():
    assert _table("nnapi").supports(_ctx(_conv(4))).supported
    m = _table("nnapi").supports(_ctx(_conv(3)))
    assert not m.supported and "Only 2D Conv is supported." in m.reason


def _resize(mode):
    x = _vi("x", [1, 1, 2, 2])
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    n = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode, name="rs")
    return _model([n], [x], [_vi("y", None)], [scales])


def test_tensorrt_resize_modes_follow_its_matrix():
    p = _table("tensorrt")
    assert p.supports(_ctx(_resize("linear"))).supported
    assert p.supports(_ctx(_resize("nearest"))).supported
    m = p.supports(_ctx(_resize("cubic")))
    assert not m.supported and "mode='cubic'" in m.reason and "onnx/onnx-tensorrt docs/operators.md" in m.reason


def test_tensorrt_maxpool_indices_output_is_declined():
    x = _vi("x", [1, 1, 4, 4])
    one = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2])
    two = helper.make_node("MaxPool", ["x"], ["y", "idx"], kernel_shape=[2, 2])
    p = _table("tensorrt")
    assert p.supports(_ctx(_model([one], [x], [_vi("y", None)]))).supported
    m = p.supports(_ctx(_model([two], [x], [_vi("y", None), _vi("idx", None, TensorProto.INT64)])))
    assert not m.supported and "`Indices` output tensor unsupported." in m.reason


def test_tensorrt_opset_range_is_the_pages():
    x = _vi("x", [2])
    m8 = _model([helper.make_node("Relu", ["x"], ["y"])], [x], [_vi("y", None)], opset=8)
    m = _table("tensorrt").supports(_ctx(m8))
    assert not m.supported and "covers opsets 9-20" in m.reason


def test_attribute_defaults_come_from_onnx_schemas():
    # DepthToSpace's mode defaults to DCR: accepted without the attribute, declined with CRD
    x = _vi("x", [1, 4, 2, 2])
    p = _table("coreml")
    dcr = _model([helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2)], [x], [_vi("y", None)])
    crd = _model([helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=2, mode="CRD")], [x], [_vi("y", None)])
    assert p.supports(_ctx(dcr)).supported
    m = p.supports(_ctx(crd))
    assert not m.supported and "Only DCR mode DepthToSpace is supported." in m.reason


def test_ort_kernel_rows_are_schema_versions_and_dtypes():
    p = _table("ort-cuda")
    x = _vi("x", [2])
    # Abs is registered for schema versions 6-12 and 13+: schema version 1 (opset 5) is not
    abs5 = _model([helper.make_node("Abs", ["x"], ["y"])], [x], [_vi("y", [2])], opset=5)
    abs13 = _model([helper.make_node("Abs", ["x"], ["y"])], [x], [_vi("y", [2])], opset=13)
    m = p.supports(_ctx(abs5))
    assert not m.supported and "schema version 1" in m.reason
    assert p.supports(_ctx(abs13)).supported
    # a dtype the row does not list is declined
    spec = load_profile("ort-cuda").ops[("", "Relu")]
    row = [v for v in spec.versions if v.until is None][0]
    missing = next(d for d in ("int32", "int64", "int8", "int16") if d not in row.dtypes)
    onnx_dt = helper.np_dtype_to_tensor_dtype(np.dtype(missing))
    erf = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2], onnx_dt)], [_vi("y", [2], onnx_dt)])
    m = p.supports(_ctx(erf))
    assert not m.supported and f"with {missing} input" in m.reason


def test_a_table_op_the_cpu_kernels_lack_says_both():
    # NNAPI's table lists Sin with no dtype limit; the CPU kernels it executes with have a
    # float32 Sin only, so a float64 Sin is claimed by the table and declined by the kernels
    p = resolve("nnapi")
    sin = _model([helper.make_node("Sin", ["x"], ["y"])], [_vi("x", [2], TensorProto.DOUBLE)],
                 [_vi("y", [2], TensorProto.DOUBLE)])
    ctx = _ctx(sin)
    assert p.table_supports(ctx).supported and not p.kernels.supports(ctx).supported
    m = p.supports(ctx)
    assert not m.supported and "table claims Sin" in m.reason and "nnapi-kernels" in m.reason


# -- caching -------------------------------------------------------------------------
def test_answers_without_conditions_are_cached_per_signature(monkeypatch):
    p = resolve("coreml")
    g = he.load_model(models.chain("small"))
    by_op = {n.op_type: n for n in g.nodes}
    assert p.signature_cacheable(by_op["Relu"])           # no conditions
    assert p.context_cacheable(by_op["Relu"])
    conv = he.load_model(models.cnn("tiny"))
    c = next(n for n in conv.nodes if n.op_type == "Conv")
    assert not p.signature_cacheable(c) and p.context_cacheable(c)
    calls = []
    orig = ProfileProvider.table_supports

    def counting(self, ctx):
        calls.append(ctx.node.op_type)
        return orig(self, ctx)

    monkeypatch.setattr(ProfileProvider, "table_supports", counting)
    he.plan(g, [p, "cpu"])
    # one question per signature, not one per node
    assert len(calls) == len({(n.op_type, n.opset) for n in g.nodes}) < len(g.nodes)


# -- a real model, planned, executed, byte-identical -----------------------------------
@pytest.mark.parametrize("profile, model, fallback", [
    ("coreml", "transformer", {"LayerNormalization", "Erf"}),
    ("coreml-mlprogram", "cnn", {"BatchNormalization", "Flatten"}),
])
def test_a_real_model_is_heterogeneous_and_byte_identical(profile, model, fallback):
    m = getattr(models, model)("tiny")
    g = he.load_model(m, optimize=False)   # the ops as written: the optimisation would fold the cnn's BNs
    plan = he.plan(g, [profile, "cpu"])
    counts = plan.placement_df().provider.value_counts().to_dict()
    assert counts.get(profile, 0) > 0 and counts.get("cpu", 0) > 0, counts
    on_cpu = set(plan.placement_df().query("provider == 'cpu'").op_type)
    assert fallback <= on_cpu
    # the table says why: each fallback op's decline quotes the profile's source
    decl = plan.placement_df().query("provider == 'cpu'").declined_by
    assert all(profile in d and "table" in d[profile] for d in decl)
    run = he.execute(plan, he.random_inputs(g, seed=3))
    ref = he.execute_reference(g, "cpu", run.inputs)
    assert bool(he.compare(run, ref)["byte_identical"].all())


def test_profile_device_is_its_own():
    g = he.load_model(models.transformer("tiny"))
    plan = he.plan(g, ["coreml", "cpu"])
    devs = set(plan.placement_df().device.astype(str))
    assert devs == {"ane:0", "cpu:0"}
    assert len(plan.transfers_df()) > 0


def test_explore_accepts_profile_names():
    ex = he.explore(models.transformer("tiny"), providers=["coreml", "cpu"])
    assert ex.plan is not None
    assert set(ex.plan.placement_df().provider) == {"coreml", "cpu"}


# -- command line ----------------------------------------------------------------------
def test_cli_plans_on_a_profile(capsys, tmp_path):
    path = tmp_path / "t.onnx"
    onnx.save(models.transformer("tiny"), str(path))
    rc = main(["plan", str(path), "--providers", "coreml,cpu", "--json"])
    out, _ = capsys.readouterr()
    assert rc == 0
    d = json.loads(out)
    assert d["placement"]["coreml"] > 0 and d["placement"]["cpu"] > 0
    assert "LayerNormalization" in d["fallback_ops"]


def test_cli_lists_a_profiles_table(capsys):
    rc = main(["providers", "--providers", "tensorrt"])
    out, _ = capsys.readouterr()
    assert rc == 0 and "Resize" in out
