"""Load-time graph optimisation (hetero_explore.load.optimize): each rule applied and not applied,
onnxruntime agreement, optimize=False, hetero byte identity, the CLI flag."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import hetero_explore as he  # noqa: E402
from hetero_explore.data import demo, models  # noqa: E402
from hetero_explore.execution.executor import execute_reference  # noqa: E402
from hetero_explore.execution.inputs import random_inputs  # noqa: E402
from hetero_explore.load.optimize import optimize_model, summary_text  # noqa: E402
from hetero_explore.providers import cpu, cuda  # noqa: E402
from hetero_explore.providers.cuda import cuda_status  # noqa: E402

ort = pytest.importorskip("onnxruntime")

F = TensorProto.FLOAT
RTOL, ATOL = 1e-4, 1e-5   # tests/test_whole_models.py's tolerance (onnxruntime agreement)


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _t(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def _vi(name, shape, et=F):
    return helper.make_tensor_value_info(name, et, shape)


def _rules(g):
    return [r["rule"] for r in g.optimizations]


def _ort(model, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # an independent oracle
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in model.graph.output], sess.run(None, feeds)))


def _close(ours, theirs):
    assert set(ours) >= set(theirs)
    for k, want in theirs.items():
        got = ours[k]
        assert got.shape == want.shape and got.dtype == want.dtype, k
        err = np.abs(got.astype(np.float64) - want.astype(np.float64))
        assert (err <= ATOL + RTOL * np.abs(want.astype(np.float64))).all(), f"{k}: max err {err.max():.3g}"


def _conv_bn_model(rng, *, bn_param_input=False, conv_bias=True, conv_out_used_twice=False):
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    scale = (1 + rng.random(4)).astype(np.float32)
    bias = rng.standard_normal(4).astype(np.float32)
    mean = rng.standard_normal(4).astype(np.float32)
    var = (0.5 + rng.random(4)).astype(np.float32)
    inits = [_t("W", w), _t("bias", bias), _t("mean", mean), _t("var", var)]
    inputs = [_vi("x", [1, 3, 8, 8])]
    if bn_param_input:
        inputs.append(_vi("scale", [4]))
    else:
        inits.append(_t("scale", scale))
    if conv_bias:
        inits.append(_t("B", b))
    nodes = [helper.make_node("Conv", ["x", "W", "B"] if conv_bias else ["x", "W"], ["c"], name="conv",
                              pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["y"], name="bn",
                              epsilon=1e-3),
             helper.make_node("Relu", ["y"], ["out"], name="relu")]
    outputs = [_vi("out", [1, 4, 8, 8])]
    if conv_out_used_twice:
        nodes.append(helper.make_node("Relu", ["c"], ["c2"], name="relu2"))
        outputs.append(_vi("c2", [1, 4, 8, 8]))
    return _model(nodes, inputs, outputs, inits), scale


# -- Conv + BatchNormalization --------------------------------------------------------------------
@pytest.mark.parametrize("conv_bias", [True, False])
def test_conv_bn_folded_keeps_the_conv_name_and_agrees_with_onnxruntime(conv_bias):
    rng = np.random.default_rng(0)
    m, _ = _conv_bn_model(rng, conv_bias=conv_bias)
    g = he.load_model(m)
    assert _rules(g) == ["conv_bn"]
    assert [n.op_type for n in g.nodes] == ["Conv", "Relu"]
    conv = g.nodes[0]
    assert conv.name == "conv" and conv.outputs == ("y",)
    assert g.optimizations[0]["node"] == "conv" and g.optimizations[0]["removed"] == ["bn"]
    df = he.plan(g, ["cpu"]).placement_df()
    col = df.set_index("name")["optimised"]
    assert col["conv"] == "folded bn" and col.isna()["relu"]
    # the unfolded weights and BN parameters are gone, the folded ones are there
    assert not {"W", "B", "scale", "bias", "mean", "var"} & set(g.initializer_protos)
    assert len(conv.inputs) == 3 and all(g.is_constant(i) for i in conv.inputs[1:])
    feeds = {"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)}
    ours = execute_reference(g, cpu(), feeds).outputs
    _close(ours, _ort(m, feeds))
    # and the unoptimised graph gives the same within tolerance (not bitwise: the rounding moved)
    _close(execute_reference(he.load_model(m, optimize=False), cpu(), feeds).outputs, {"out": ours["out"]})


def test_conv_bn_not_folded_when_a_bn_parameter_is_a_graph_input():
    m, scale = _conv_bn_model(np.random.default_rng(1), bn_param_input=True)
    g = he.load_model(m)
    assert "conv_bn" not in _rules(g)
    assert [n.op_type for n in g.nodes] == ["Conv", "BatchNormalization", "Relu"]
    feeds = {"x": np.random.default_rng(2).standard_normal((1, 3, 8, 8)).astype(np.float32), "scale": scale}
    _close(execute_reference(g, cpu(), feeds).outputs, _ort(m, feeds))


def test_conv_bn_not_folded_when_the_conv_output_has_another_consumer():
    m, _ = _conv_bn_model(np.random.default_rng(1), conv_out_used_twice=True)
    g = he.load_model(m)
    assert g.optimizations == []
    assert sorted(n.op_type for n in g.nodes) == ["BatchNormalization", "Conv", "Relu", "Relu"]


def test_conv_bn_not_folded_in_training_mode_or_with_its_statistics_outputs_used():
    rng = np.random.default_rng(3)
    m, _ = _conv_bn_model(rng)
    bn = m.graph.node[1]
    bn.attribute.append(helper.make_attribute("training_mode", 1))
    bn.output.extend(["running_mean", "running_var"])
    assert optimize_model(m)[1] == []      # training mode, the statistics unused
    m.graph.output.extend([_vi("running_mean", [4]), _vi("running_var", [4])])
    g = he.load_model(m)                   # the statistics graph outputs
    assert "conv_bn" not in _rules(g) and "BatchNormalization" in g.op_types()


# -- Identity / Dropout ---------------------------------------------------------------------------
def test_identity_removed_between_nodes_and_before_a_graph_output():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r1"),
             helper.make_node("Identity", ["a"], ["b"], name="id1"),
             helper.make_node("Relu", ["b"], ["c"], name="r2"),
             helper.make_node("Identity", ["c"], ["y"], name="id2")]
    m = _model(nodes, [_vi("x", [2, 3])], [_vi("y", [2, 3])])
    g = he.load_model(m)
    assert _rules(g) == ["identity", "identity"]
    assert [(n.name, n.inputs, n.outputs) for n in g.nodes] == [("r1", ("x",), ("a",)), ("r2", ("a",), ("y",))]
    assert g.outputs == ["y"]
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    assert execute_reference(g, cpu(), {"x": x}).outputs["y"].tobytes() == np.maximum(x, 0).tobytes()


def test_identity_from_a_graph_input_to_a_graph_output_stays():
    m = _model([helper.make_node("Identity", ["x"], ["y"], name="id")], [_vi("x", [3])], [_vi("y", [3])])
    g = he.load_model(m)
    assert g.optimizations == [] and [n.op_type for n in g.nodes] == ["Identity"]
    x = np.arange(3, dtype=np.float32)
    assert execute_reference(g, cpu(), {"x": x}).outputs["y"].tobytes() == x.tobytes()


def test_identity_whose_input_is_also_a_graph_output_stays():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r"),
             helper.make_node("Identity", ["a"], ["y"], name="id")]
    m = _model(nodes, [_vi("x", [3])], [_vi("a", [3]), _vi("y", [3])])
    g = he.load_model(m)
    assert g.optimizations == [] and g.outputs == ["a", "y"]
    out = execute_reference(g, cpu(), {"x": np.array([-1, 0, 2], np.float32)}).outputs
    assert out["a"].tolist() == out["y"].tolist() == [0, 0, 2]


def test_inference_dropout_removed_training_dropout_and_used_mask_kept():
    nodes = [helper.make_node("Dropout", ["x"], ["a"], name="drop", ratio=0.5),
             helper.make_node("Relu", ["a"], ["y"], name="r")]
    g = he.load_model(_model(nodes, [_vi("x", [4])], [_vi("y", [4])], opset=11))
    assert _rules(g) == ["dropout"] and [n.name for n in g.nodes] == ["r"]
    # training_mode a constant True: stays (our kernel declines it; it is not an identity)
    nodes = [helper.make_node("Dropout", ["x", "ratio", "train"], ["a"], name="drop"),
             helper.make_node("Relu", ["a"], ["y"], name="r")]
    inits = [_t("ratio", np.float32(0.5)), _t("train", np.bool_(True))]
    g = he.load_model(_model(nodes, [_vi("x", [4])], [_vi("y", [4])], inits), fold_constants=False)
    assert "dropout" not in _rules(g)
    # constant False: removed
    inits = [_t("ratio", np.float32(0.5)), _t("train", np.bool_(False))]
    g = he.load_model(_model(nodes, [_vi("x", [4])], [_vi("y", [4])], inits), fold_constants=False)
    assert _rules(g) == ["dropout"]
    # the mask is a graph output: stays
    nodes = [helper.make_node("Dropout", ["x"], ["a", "mask"], name="drop"),
             helper.make_node("Relu", ["a"], ["y"], name="r")]
    g = he.load_model(_model(nodes, [_vi("x", [4])], [_vi("y", [4]), _vi("mask", [4], TensorProto.BOOL)]))
    assert g.optimizations == []


# -- MatMul + Add -> Gemm ---------------------------------------------------------------------
def _mm_add(rng, *, bias_shape=(5,), swap=False, mm_used_twice=False, b_input=False, m=3, k=7, n=5):
    bw = rng.standard_normal((k, n)).astype(np.float32)
    c = rng.standard_normal(bias_shape).astype(np.float32)
    inits = [_t("c", c)]
    inputs = [_vi("a", [m, k])]
    if b_input:
        inputs.append(_vi("B", [k, n]))
    else:
        inits.append(_t("B", bw))
    nodes = [helper.make_node("MatMul", ["a", "B"], ["mm"], name="fc"),
             helper.make_node("Add", ["c", "mm"] if swap else ["mm", "c"], ["y"], name="fc_add")]
    outputs = [_vi("y", [m, n])]
    if mm_used_twice:
        nodes.append(helper.make_node("Relu", ["mm"], ["z"], name="relu"))
        outputs.append(_vi("z", [m, n]))
    return _model(nodes, inputs, outputs, inits), bw


def _special_inputs(rng, m, k):
    a = rng.standard_normal((m, k)).astype(np.float32)
    a[0, 0] = np.inf          # inf and NaN rows/columns, -0 and denormals: the bits must match too
    a[1, 1] = np.nan
    a[2, :] = -0.0
    a[2, 3] = np.float32(1e-41)
    return a


@pytest.mark.parametrize("bias_shape,swap", [((5,), False), ((1, 5), False), ((5,), True)])
def test_matmul_add_becomes_gemm_bitwise_equal_to_matmul_then_add(bias_shape, swap):
    rng = np.random.default_rng(4)
    m, _ = _mm_add(rng, bias_shape=bias_shape, swap=swap)
    g = he.load_model(m)
    g0 = he.load_model(m, optimize=False)
    assert _rules(g) == ["matmul_add_gemm"] and [n.op_type for n in g0.nodes] == ["MatMul", "Add"]
    assert [(n.op_type, n.name, n.outputs) for n in g.nodes] == [("Gemm", "fc", ("y",))]
    assert g.optimizations[0]["removed"] == ["fc", "fc_add"]
    assert list(he.plan(g, ["cpu"]).placement_df()["optimised"]) == ["from fc, fc_add"]
    feeds = {"a": _special_inputs(rng, 3, 7)}
    providers = [cpu()] + ([cuda()] if cuda_status()[0] else [])
    for prov in providers:
        fused = execute_reference(g, prov, feeds).outputs["y"]
        plain = execute_reference(g0, prov, feeds).outputs["y"]
        assert fused.tobytes() == plain.tobytes(), prov.name
    assert np.isnan(fused[1]).all() and np.isfinite(fused[2]).all()
    feeds = {"a": rng.standard_normal((3, 7)).astype(np.float32)}
    _close(execute_reference(g, cpu(), feeds).outputs, _ort(m, feeds))


def test_gemm_fusion_bitwise_on_a_larger_blocked_shape():
    # the CPU GEMM's blocked path (K blocks, column panels, edge rows) against MatMul then Add
    rng = np.random.default_rng(5)
    m, _ = _mm_add(rng, m=37, k=600, n=70, bias_shape=(70,))
    feeds = {"a": rng.standard_normal((37, 600)).astype(np.float32)}
    fused = execute_reference(he.load_model(m), cpu(), feeds).outputs["y"]
    plain = execute_reference(he.load_model(m, optimize=False), cpu(), feeds).outputs["y"]
    assert fused.tobytes() == plain.tobytes()


def test_matmul_add_not_fused_when_the_matmul_output_has_two_consumers():
    m, _ = _mm_add(np.random.default_rng(6), mm_used_twice=True)
    g = he.load_model(m)
    assert g.optimizations == [] and sorted(n.op_type for n in g.nodes) == ["Add", "MatMul", "Relu"]


def test_matmul_add_not_fused_when_b_is_not_an_initializer_or_the_bias_is_not_1d():
    rng = np.random.default_rng(7)
    assert he.load_model(_mm_add(rng, b_input=True)[0]).optimizations == []
    assert he.load_model(_mm_add(rng, bias_shape=(3, 5))[0]).optimizations == []
    assert he.load_model(_mm_add(rng, bias_shape=(1,))[0]).optimizations == []
    bad = _mm_add(rng)[0]
    bad.graph.initializer[0].CopyFrom(_t("c", np.array([0, np.nan, 0, 0, 0], np.float32)))
    assert he.load_model(bad).optimizations == []


# -- the switch, the records, the views ----------------------------------------------------------
def test_optimize_false_leaves_the_graph_as_loaded():
    m = models.resnet18_like(image=32, width=8, classes=10)
    g0 = he.load_model(m, optimize=False, fold_constants=False)
    g = he.load_model(m, fold_constants=False)
    assert g0.optimizations == [] and "optimised" not in he.plan(g0, ["cpu"]).summary()
    assert sorted((n.name, n.op_type, tuple(n.input), tuple(n.output)) for n in m.graph.node) == sorted(
        (n.name, n.op_type, n.inputs, n.outputs) for n in g0.nodes)
    assert set(g0.initializer_protos) == {t.name for t in m.graph.initializer}
    n_bn = sum(n.op_type == "BatchNormalization" for n in g0.nodes)
    assert n_bn > 0 and "BatchNormalization" not in g.op_types()
    assert len(g0.nodes) - len(g.nodes) == n_bn == _rules(g).count("conv_bn")
    assert f"optimised: {n_bn} Conv+BN folded" in he.plan(g, ["cpu"]).summary()
    with pytest.raises(TypeError):
        he.load_model(m, optimize="no")


def test_optimize_model_changes_nothing_without_a_match():
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2])], [_vi("y", [2])])
    before = m.SerializeToString()
    out, recs = optimize_model(m)
    assert recs == [] and out.SerializeToString() == before
    assert summary_text([]) == ""


def test_resnet_like_optimised_agrees_with_onnxruntime_and_is_hetero_byte_identical():
    m = models.resnet18_like(image=32, width=8, classes=10)
    ex = he.explore(m, ["gpu", "cpu"], seed=3)
    assert "conv_bn" in _rules(ex.graph)
    ex.execute()
    assert ex.byte_identical is True
    feeds = random_inputs(ex.graph, seed=3)
    _close(execute_reference(ex.graph, cpu(), feeds).outputs, _ort(m, feeds))
    assert "optimize" in he.explore.__doc__


def test_demo_optimised_matches_onnxruntime_and_report_lists_the_rewrites(tmp_path):
    model = demo.demo_model()
    g = he.load_model(model, input_shapes=demo.demo_input_shapes())
    assert _rules(g) == ["conv_bn"]
    ours = execute_reference(g, cpu(), demo.demo_inputs()).outputs
    _close(ours, _ort(model, demo.demo_inputs()))
    p = he.plan(g, ["cpu"])
    assert p.to_dict()["optimizations"][0]["node"] == "conv1"
    html = (tmp_path / "r.html")
    p.to_html(str(html))
    text = html.read_text()
    assert "load-time optimisations" in text and "optimised: 1 Conv+BN folded" in text and "bn1" in text


def test_cli_no_optimize_flag(capsys):
    from hetero_explore.cli.main import main
    path = os.path.join(os.path.dirname(he.__file__), "data", "demo.onnx")
    def summary(out: str) -> str:   # the summary paragraph (wrapped to the terminal's width), as one line
        return " ".join(out.split("\n\n")[0].split())

    assert main(["plan", path, "--input-shape", "image=1,3,16,16", "--providers", "cpu"]) == 0
    on = summary(capsys.readouterr().out)
    assert main(["plan", path, "--input-shape", "image=1,3,16,16", "--providers", "cpu", "--no-optimize"]) == 0
    off = summary(capsys.readouterr().out)
    assert on.startswith("1 partition(s)") and off.startswith("1 partition(s)")
    assert "optimised: 1 Conv+BN folded" in on and "optimised" not in off
    assert main(["plan", path, "--input-shape", "image=1,3,16,16", "--providers", "cpu", "--json"]) == 0
    import json
    d = json.loads(capsys.readouterr().out)
    assert d["optimizations"][0]["rule"] == "conv_bn"


def test_cli_deny_of_an_op_the_optimiser_removed_says_so(capsys):
    from hetero_explore.cli.main import main
    path = os.path.join(os.path.dirname(he.__file__), "data", "demo.onnx")
    assert main(["plan", path, "--input-shape", "image=1,3,16,16", "--deny", "gpu:BatchNormalization"]) == 0
    err = capsys.readouterr().err
    assert "the load-time optimisation removed the model's BatchNormalization node(s)" in err
    assert "--no-optimize" in err
    assert main(["plan", path, "--input-shape", "image=1,3,16,16", "--deny", "gpu:BatchNormalization",
                 "--no-optimize"]) == 0
    captured = capsys.readouterr()
    assert "BatchNormalization" not in captured.err and "optimised" not in captured.out.splitlines()[0]


def test_sweep_threads_optimize():
    from hetero_explore.analysis.fleet import IN_PROCESS, sweep
    m = models.cnn("tiny")
    on = sweep([m], providers=["cpu"], client=IN_PROCESS)
    off = sweep([m], providers=["cpu"], client=IN_PROCESS, optimize=False)
    n_bn = sum(n.op_type == "BatchNormalization" for n in m.graph.node)
    assert bool(on["ok"].all()) and bool(off["ok"].all()) and n_bn > 0
    assert int(off["nodes"].iloc[0]) - int(on["nodes"].iloc[0]) == n_bn
    ex = he.explore(m, ["cpu"], optimize=False)
    assert "BatchNormalization" in ex.graph.op_types() and ex.graph.optimizations == []
    from hetero_explore.ir.errors import ArgumentValueError
    with pytest.raises(ArgumentValueError):
        he.explore(he.load_model(m), ["cpu"], optimize=False)
