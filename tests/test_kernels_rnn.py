"""Recurrent kernels (rnn.py): RNN, GRU, LSTM against onnxruntime on random weights, over
directions, layouts, activations, clip, linear_before_reset, input_forget, peepholes,
sequence_lens, initial states and absent outputs; CPU vs CUDA simulator bitwise; and the
documented float32 order spelled out for one RNN step."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

from hetero_explore.errors import ExecutionError, HeteroExploreError
from hetero_explore.providers.cpu import NumbaCPUProvider
from hetero_explore.providers.cuda import NumbaCUDAProvider
from hetero_explore.providers.kernels.pmath import tanh_f32
from kernel_harness import infer_outputs, node_model, run_node, supports

CPU = NumbaCPUProvider()
GPU = NumbaCUDAProvider()
F = np.float32
G = {"RNN": 1, "GRU": 3, "LSTM": 4}
INPUTS = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]


def make_inputs(op, T, B, I, H, D, rng, layout=0, bias=True, lens=None, init=False, peep=False):
    g = G[op]
    x = rng.standard_normal((B, T, I) if layout else (T, B, I)).astype(F)
    ins = [x, (rng.standard_normal((D, g * H, I)) * 0.5).astype(F),
           (rng.standard_normal((D, g * H, H)) * 0.5).astype(F)]
    ins.append((rng.standard_normal((D, 2 * g * H)) * 0.5).astype(F) if bias else None)
    ins.append(None if lens is None else np.asarray(lens, np.int32))
    sshape = (B, D, H) if layout else (D, B, H)
    ins.append(rng.standard_normal(sshape).astype(F) if init else None)
    if op == "LSTM":
        ins.append(rng.standard_normal(sshape).astype(F) if init else None)
        ins.append((rng.standard_normal((D, 3 * H)) * 0.5).astype(F) if peep else None)
    while ins and ins[-1] is None:
        ins.pop()
    return ins


def make_node(op, ins, H, outputs=("Y", "Y_h", "Y_c"), **attrs):
    names = [INPUTS[k] if a is not None else "" for k, a in enumerate(ins)]
    outs = list(outputs if op == "LSTM" else outputs[:2])
    while outs and not outs[-1]:
        outs.pop()
    return helper.make_node(op, names, outs, name=f"{op}_n", hidden_size=H, **attrs)


def ort_run(node, ins, opset):
    model = node_model(node, ins, opset)
    shapes, dtypes = infer_outputs(model)
    del model.graph.output[:]
    model.graph.output.extend(
        helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(d), s)
        for o, s, d in zip([o for o in node.output if o], shapes, dtypes))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {n: a for n, a in zip(node.input, ins) if n and a is not None}
    names = [o for o in node.output if o]
    return sess.run(names, feeds)


def both(node, ins, opset):
    c = run_node(CPU, node, ins, opset=opset)
    g = run_node(GPU, node, ins, opset=opset)
    for a, b in zip(c, g):
        assert a.shape == b.shape and a.dtype == b.dtype == np.float32
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), (node.op_type, a, b)
    return c


def check(op, opset=22, T=3, B=2, I=3, H=4, D=1, seed=0, outputs=("Y", "Y_h", "Y_c"), tol=2e-5, **kw):
    rng = np.random.default_rng(seed)
    attrs = kw.pop("attrs", {})
    ins = make_inputs(op, T, B, I, H, D, rng, layout=attrs.get("layout", 0), **kw)
    node = make_node(op, ins, H, outputs=outputs, **attrs)
    got = both(node, ins, opset)
    want = ort_run(node, ins, opset)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
    return got


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_directions(op, direction):
    D = 2 if direction == "bidirectional" else 1
    check(op, D=D, init=True, attrs=dict(direction=direction))


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_sequence_lens(op, direction):
    D = 2 if direction == "bidirectional" else 1
    check(op, T=4, B=3, D=D, lens=[4, 2, 1], init=True, attrs=dict(direction=direction))


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_layout_1(op):
    """layout=1 (batch first; onnxruntime runs only layout 0): the same numbers as the
    layout-0 node on transposed inputs, bit for bit, and that one against onnxruntime."""
    rng = np.random.default_rng(3)
    T, B, I, H, D = 3, 2, 3, 4, 2
    ins1 = make_inputs(op, T, B, I, H, D, rng, layout=1, lens=[3, 2], init=True, peep=True)
    ins0 = list(ins1)
    ins0[0] = np.ascontiguousarray(ins1[0].transpose(1, 0, 2))
    for k in (5, 6):
        if k < len(ins1) and ins1[k] is not None:
            ins0[k] = np.ascontiguousarray(ins1[k].transpose(1, 0, 2))
    got1 = both(make_node(op, ins1, H, direction="bidirectional", layout=1), ins1, 14)
    node0 = make_node(op, ins0, H, direction="bidirectional")
    got0 = both(node0, ins0, 14)
    assert np.array_equal(got1[0], got0[0].transpose(2, 0, 1, 3))
    for a, b in zip(got1[1:], got0[1:]):
        assert np.array_equal(a, b.transpose(1, 0, 2))
    for g, w in zip(got0, ort_run(node0, ins0, 14)):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("opset", [7, 14])
def test_old_opsets_no_bias(op, opset):
    check(op, opset=opset, bias=False)


def test_gru_linear_before_reset():
    check("GRU", D=2, init=True, attrs=dict(direction="bidirectional", linear_before_reset=1))


def test_lstm_peepholes_input_forget():
    check("LSTM", init=True, peep=True)
    check("LSTM", init=True, peep=True, attrs=dict(input_forget=1))


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_clip(op):
    check(op, D=2, attrs=dict(clip=0.3, direction="bidirectional"))


ACTS = [("Relu", None, None), ("LeakyRelu", 0.1, None), ("LeakyRelu", None, None), ("ThresholdedRelu", 0.2, None),
        ("ScaledTanh", 0.8, 1.3), ("HardSigmoid", 0.3, 0.4), ("HardSigmoid", None, None), ("Elu", 0.7, None),
        ("Softsign", None, None), ("Softplus", None, None), ("Affine", 0.5, 0.25)]


@pytest.mark.parametrize("act,alpha,beta", ACTS)
def test_rnn_activations(act, alpha, beta):
    attrs = dict(activations=[act])
    if alpha is not None:
        attrs["activation_alpha"] = [alpha]
    if beta is not None:
        attrs["activation_beta"] = [beta]
    check("RNN", attrs=attrs)


def test_lstm_mixed_activations_bidirectional():
    check("LSTM", D=2, attrs=dict(direction="bidirectional",
                                  activations=["HardSigmoid", "Tanh", "Softsign", "Sigmoid", "Elu", "Tanh"],
                                  activation_alpha=[0.25, 0.9], activation_beta=[0.45]))


@pytest.mark.parametrize("op", ["GRU", "LSTM"])
@pytest.mark.parametrize("outputs", [("Y",), ("", "Y_h"), ("", "", "Y_c"), ("Y", "", "Y_c")])
def test_absent_outputs(op, outputs):
    if op == "GRU" and outputs[-1] == "Y_c":
        outputs = outputs[:2] if any(outputs[:2]) else ("", "Y_h")
    check(op, outputs=outputs, init=True)


def test_larger_lstm():
    check("LSTM", T=5, B=3, I=10, H=8, D=2, lens=[5, 3, 4], init=True, peep=True,
          attrs=dict(direction="bidirectional"), tol=5e-5)


def test_rnn_documented_order():
    """One RNN step, spelled out in float32 scalar steps: (x.W + h.R) + (Wb + Rb), then tanh."""
    rng = np.random.default_rng(5)
    ins = make_inputs("RNN", 1, 1, 3, 2, 1, rng, init=True)
    node = make_node("RNN", ins, 2, outputs=("Y",))
    got = both(node, ins, 22)[0]
    x, w, r, b, _, h0 = ins
    for j in range(2):
        ax = F(0)
        for k in range(3):
            ax = F(ax + F(x[0, 0, k] * w[0, j, k]))
        ah = F(0)
        for k in range(2):
            ah = F(ah + F(h0[0, 0, k] * r[0, j, k]))
        pre = F(F(ax + ah) + F(b[0, j] + b[0, 2 + j]))
        assert got[0, 0, 0, j].view(np.uint32) == F(tanh_f32(pre)).view(np.uint32)


def test_bad_sequence_lens_raise():
    rng = np.random.default_rng(1)
    for prov in (CPU, GPU):
        ins = make_inputs("LSTM", 3, 2, 2, 2, 1, rng, lens=[3, 4])
        node = make_node("LSTM", ins, 2)
        with pytest.raises(ExecutionError, match="sequence_lens\\[1\\] = 4"):
            run_node(prov, node, ins, opset=22)
        ins[4] = np.asarray([-1, 2], np.int32)
        with pytest.raises(ExecutionError, match="sequence_lens\\[0\\] = -1"):
            run_node(prov, node, ins, opset=22)


def test_declines():
    rng = np.random.default_rng(2)
    ins = make_inputs("RNN", 2, 1, 2, 2, 1, rng)
    m = supports(CPU, make_node("RNN", ins, 2, activations=["Gelu"]), ins, opset=22)
    assert not m.supported and "activation 'Gelu'" in m.reason
    m = supports(CPU, make_node("RNN", ins, 3), ins, opset=22)
    assert not m.supported and "expected (1, 3, 2)" in m.reason
    m = supports(CPU, make_node("RNN", ins, 2), ins, opset=1)
    assert not m.supported
    with pytest.raises(HeteroExploreError):
        run_node(CPU, make_node("RNN", ins, 2, direction="sideways"), ins, opset=22)
