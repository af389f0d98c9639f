"""Sequences, optionals and maps as host values: op results against onnx's reference
evaluator (or onnxruntime), graph outputs as Python lists/dicts, element-by-element
comparison, heterogeneous runs byte-identical to the reference, a Loop carrying a sequence,
typed errors for bad positions, leak counters."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import hetero_explore as he
from hetero_explore.analysis.compare import diff_arrays
from hetero_explore.providers import resolve
from hetero_explore.providers.virtual import mask, unmask

import control_models as cm

F = TensorProto.FLOAT


def seq_vi(name, shape=None, t=F):
    return helper.make_tensor_sequence_value_info(name, t, shape)


def opt_vi(name, shape, t=F):
    return helper.make_value_info(name, helper.make_optional_type_proto(helper.make_tensor_type_proto(t, shape)))


def split_concat_model():
    """x -> SplitToSequence -> SequenceInsert(x[0] row) -> SequenceErase(0) -> SequenceAt(1), SequenceLength,
    ConcatFromSequence; the sequence itself is a graph output too."""
    nodes = [
        helper.make_node("SplitToSequence", ["x", "split"], ["s"], axis=0, name="split"),
        helper.make_node("SequenceAt", ["s", "zero"], ["first"], name="at0"),
        helper.make_node("Relu", ["first"], ["first_r"], name="relu"),
        helper.make_node("SequenceInsert", ["s", "first_r"], ["s2"], name="insert"),
        helper.make_node("SequenceErase", ["s2", "zero"], ["s3"], name="erase"),
        helper.make_node("SequenceAt", ["s3", "minus1"], ["last"], name="at_last"),
        helper.make_node("SequenceLength", ["s3"], ["n"], name="len"),
        helper.make_node("ConcatFromSequence", ["s3"], ["cat"], axis=0, name="cat"),
        helper.make_node("Mul", ["cat", "two"], ["y"], name="mul"),
    ]
    m = cm.model(nodes, [cm.vi("x", [4, 3])],
                    [cm.vi("y", [4, 3]), cm.vi("last", [2, 3]), cm.vi("n", [], TensorProto.INT64),
                     seq_vi("s3", [2, 3])],
                    [cm.const("split", np.array([2, 2], np.int64)), cm.const("zero", np.int64(0)),
                     cm.const("minus1", np.int64(-1)), cm.const("two", np.float32(2))])
    # onnx does not track a sequence's length through SequenceInsert/Erase: the exporter declares it
    m.graph.value_info.append(cm.vi("cat", [4, 3]))
    return m


def construct_model():
    nodes = [helper.make_node("Neg", ["a"], ["na"], name="neg"),
             helper.make_node("SequenceConstruct", ["a", "na", "b"], ["s"], name="construct"),
             helper.make_node("ConcatFromSequence", ["s"], ["stacked"], axis=0, new_axis=1, name="stack"),
             helper.make_node("SequenceEmpty", [], ["e"], dtype=F, name="empty"),
             helper.make_node("SequenceLength", ["e"], ["ne"], name="len_e"),
             helper.make_node("Optional", ["a"], ["o"], name="opt"),
             helper.make_node("OptionalHasElement", ["o"], ["has"], name="has"),
             helper.make_node("OptionalGetElement", ["o"], ["got"], name="get"),
             helper.make_node("Add", ["got", "b"], ["y"], name="add")]
    return cm.model(nodes, [cm.vi("a", [3]), cm.vi("b", [3])],
                    [cm.vi("stacked", [3, 3]), cm.vi("ne", [], TensorProto.INT64),
                     cm.vi("has", [], TensorProto.BOOL), cm.vi("y", [3]), seq_vi("s", [3])], opset=18)


def loop_with_sequence(n=4):
    """A Loop that appends its running value to a sequence each iteration (a list output)."""
    body = helper.make_graph([
        helper.make_node("Cast", ["i"], ["fi"], to=F, name="b_cast"),
        helper.make_node("Add", ["x", "fi"], ["v"], name="b_add"),
        helper.make_node("SequenceInsert", ["seq_in", "v"], ["seq_out"], name="b_insert"),
        helper.make_node("Identity", ["cond_in"], ["cond_out"], name="b_cond")], "body",
        [cm.vi("i", [], cm.I64), cm.vi("cond_in", [], cm.B), seq_vi("seq_in", [2])],
        [cm.vi("cond_out", [], cm.B), seq_vi("seq_out", [2])])
    nodes = [helper.make_node("SequenceEmpty", [], ["s0"], dtype=F, name="empty"),
             helper.make_node("Loop", ["trips", "", "s0"], ["seq"], body=body, name="Loop_seq"),
             helper.make_node("ConcatFromSequence", ["seq"], ["cat"], axis=0, name="cat")]
    m = cm.model(nodes, [cm.vi("x", [2])], [seq_vi("seq", [2]), cm.vi("cat", [2 * n])],
                 [cm.const("trips", np.int64(n))])
    return m


def reference(m, feeds):
    """onnxruntime's outputs (onnx's ReferenceEvaluator mishandles some of these sequence graphs:
    ConcatFromSequence after a Loop, SequenceEmpty outputs)."""
    ort = pytest.importorskip("onnxruntime")
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))


def assert_same(got, want):
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w)
        return
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert np.asarray(got).dtype == np.asarray(want).dtype


MODELS = {
    "split_concat": (split_concat_model, lambda r: {"x": r.standard_normal((4, 3)).astype(np.float32)}),
    "construct": (construct_model, lambda r: {"a": r.standard_normal(3).astype(np.float32),
                                              "b": r.standard_normal(3).astype(np.float32)}),
    "loop_with_sequence": (loop_with_sequence, lambda r: {"x": r.standard_normal(2).astype(np.float32)}),
}


@pytest.mark.parametrize("name", list(MODELS))
def test_against_reference_evaluator(name):
    make, feeds = MODELS[name]
    m = make()
    x = feeds(np.random.default_rng(0))
    got = he.execute_reference(he.load_model(m), "cpu", x).outputs
    want = reference(m, x)
    for k in want:
        assert_same(got[k], want[k])
    seqs = [o.name for o in m.graph.output if o.type.HasField("sequence_type")]
    assert seqs and all(isinstance(got[k], list) for k in seqs)


@pytest.mark.parametrize("name", list(MODELS))
def test_heterogeneous_byte_identical_and_no_leaks(name):
    make, feeds = MODELS[name]
    g = he.load_model(make())
    x = feeds(np.random.default_rng(1))
    cpu, gpu = resolve("cpu"), resolve("gpu")
    ref = he.execute_reference(g, cpu, x)
    for deny in ([], ["Mul", "Relu"], ["Add", "Cast"], ["Neg"]):
        provs = [mask(gpu, deny=deny), cpu]
        p = he.plan(g, provs)
        assert p.executable, p.execution_blockers
        before = {unmask(q).name: unmask(q).live_allocations for q in provs}
        run = he.execute(p, x)
        d = he.compare(run, ref)
        assert d["byte_identical"].all(), d
        assert {unmask(q).name: unmask(q).live_allocations for q in provs} == before
    # sequence ops run on the CPU provider only: the virtual GPU declines them with the reason
    p = he.plan(g, [gpu, cpu])
    seq_nodes = [n for n in g.nodes if n.op_type.startswith(("Sequence", "Split", "Concat", "Optional"))]
    assert all(p.providers[p.assignment[n.id]].name == "cpu" for n in seq_nodes)


def test_compare_sequences_element_by_element():
    a = [np.array([1.0, 2.0], np.float32), np.array([3.0], np.float32)]
    b = [np.array([1.0, 2.0], np.float32), np.array([np.nextafter(np.float32(3), np.float32(4))], np.float32)]
    d = diff_arrays(a, b)
    assert not d["byte_identical"] and d["n_diff"] == 1 and d["max_ulp"] == 1 and d["first_diff_index"] == (1, 0)
    assert diff_arrays(a, [x.copy() for x in a])["byte_identical"]
    assert diff_arrays(a, a[:1])["n_diff"] is None
    assert diff_arrays({1: np.float32(1)}, {1: np.float32(1)})["byte_identical"]
    assert diff_arrays(None, None)["byte_identical"]
    assert not diff_arrays(None, a)["byte_identical"]
    df = he.compare({"s": a}, {"s": b})
    assert df.loc[0, "dtype"] == "sequence" and df.loc[0, "n_diff"] == 1


def test_sequence_inputs_and_bad_positions():
    nodes = [helper.make_node("SequenceAt", ["s", "p"], ["y"], name="at")]
    m = cm.model(nodes, [seq_vi("s", [2]), cm.vi("p", [], cm.I64)], [cm.vi("y", [2])])
    g = he.load_model(m)
    s = [np.array([1, 2], np.float32), np.array([3, 4], np.float32)]
    assert he.execute_reference(g, "cpu", {"s": s, "p": np.int64(-1)}).outputs["y"].tolist() == [3, 4]
    cpu = resolve("cpu")
    before = cpu.live_allocations
    with pytest.raises(he.ExecutionError, match="position 5 is out of range"):
        he.execute_reference(g, cpu, {"s": s, "p": np.int64(5)})
    assert cpu.live_allocations == before
    with pytest.raises(he.InputValidationError, match="list of numpy arrays"):
        he.execute_reference(g, "cpu", {"s": np.zeros(2, np.float32), "p": np.int64(0)})
    # an element whose shape differs from the planned one: a typed error, not a wrong buffer
    with pytest.raises(he.ExecutionError, match="planned as float32 \\(2,\\)"):
        he.execute_reference(g, "cpu", {"s": [np.zeros(3, np.float32)], "p": np.int64(0)})


def test_optional_empty_input():
    nodes = [helper.make_node("OptionalHasElement", ["o"], ["has"], name="has")]
    m = cm.model(nodes, [opt_vi("o", [2])], [cm.vi("has", [], TensorProto.BOOL)], opset=18)
    g = he.load_model(m)
    assert he.execute_reference(g, "cpu", {"o": None}).outputs["has"] == np.bool_(False)
    assert he.execute_reference(g, "cpu", {"o": np.ones(2, np.float32)}).outputs["has"] == np.bool_(True)


def _ml_model(nodes, inputs, outputs):
    g = helper.make_graph(nodes, "ml", inputs, outputs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)])
    m.ir_version = 8
    return m


def test_dict_vectorizer_and_cast_map():
    map_t = helper.make_map_type_proto(TensorProto.INT64, helper.make_tensor_type_proto(F, []))
    nodes = [helper.make_node("DictVectorizer", ["m"], ["v"], domain="ai.onnx.ml", int64_vocabulary=[3, 1, 7],
                              name="dv"),
             helper.make_node("CastMap", ["m"], ["c"], domain="ai.onnx.ml", cast_to="TO_FLOAT", map_form="DENSE",
                              name="cm")]
    m = _ml_model(nodes, [helper.make_value_info("m", map_t)],
                  [cm.vi("v", [1, 3]), cm.vi("c", [1, 2])])
    g = he.load_model(m, check=False)
    feeds = {"m": {1: np.float32(2.5), 7: np.float32(-1.0)}}
    got = he.execute_reference(g, "cpu", feeds).outputs
    m_dv = _ml_model(nodes[:1], [helper.make_value_info("m", map_t)], [cm.vi("v", [1, 3])])
    want = dict(zip(["v"], ReferenceEvaluator(m_dv).run(None, feeds)))
    np.testing.assert_array_equal(got["v"].reshape(-1), np.asarray(want["v"]).reshape(-1))
    np.testing.assert_array_equal(got["c"], np.array([[2.5, -1.0]], np.float32))


def test_zipmap_outputs_dicts():
    seq_map = helper.make_sequence_type_proto(
        helper.make_map_type_proto(TensorProto.INT64, helper.make_tensor_type_proto(F, [])))
    nodes = [helper.make_node("ZipMap", ["x"], ["z"], domain="ai.onnx.ml", classlabels_int64s=[10, 20],
                              name="zip")]
    m = _ml_model(nodes, [cm.vi("x", [2, 2])], [helper.make_value_info("z", seq_map)])
    g = he.load_model(m, check=False)
    x = np.array([[0.25, 0.75], [1.0, 0.0]], np.float32)
    z = he.execute_reference(g, "cpu", {"x": x}).outputs["z"]
    assert z == [{10: np.float32(0.25), 20: np.float32(0.75)}, {10: np.float32(1.0), 20: np.float32(0.0)}]
