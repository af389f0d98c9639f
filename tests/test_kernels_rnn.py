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

from hetero_explore.ir.errors import ExecutionError, HeteroExploreError
from hetero_explore.providers.cpu import NumbaCPUProvider
from hetero_explore.providers.cuda import NumbaCUDAProvider
from hetero_explore.kernels.pmath import tanh_f32
from support.harness import run_both, infer_outputs, node_model, run_node, supports

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
    c = run_both(node, ins, opset)
    assert all(a.dtype == np.float32 for a in c)
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


# --- every kernel of rnn.py, quant.py, signal.py and random.py compiles for sm_90 --------------
_RECORD_MINE = r'''
import json, os, sys
os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
sys.path.insert(0, os.environ["TESTS_DIR"])
import numpy as np
import numba
from numba.core import types
from numba.core.typing.typeof import Purpose
from numba.np.numpy_support import as_dtype
from onnx import helper
from hetero_explore.providers.cuda import NumbaCUDAProvider
from hetero_explore.kernels import target
from support.harness import run_node
import test_kernels_rnn as R

def arg_type(a):
    t = numba.typeof(a, Purpose.argument)
    if isinstance(t, types.Array):
        return ["array", as_dtype(t.dtype).name, t.ndim, t.layout]
    return ["scalar", as_dtype(t).name]

launches = {}
original = target.LazyKernel.__getitem__
def getitem(self, config):
    launcher = original(self, config)
    def run(*args):
        launches.setdefault(json.dumps([self.py.__module__, self.py.__name__, [arg_type(a) for a in args]]), 1)
        return launcher(*args)
    return run
target.LazyKernel.__getitem__ = getitem
GPU = NumbaCUDAProvider()
rng = np.random.default_rng(0)
for op in ("RNN", "GRU", "LSTM"):
    ins = R.make_inputs(op, 2, 1, 2, 2, 2, rng, lens=[2], init=True, peep=True)
    run_node(GPU, R.make_node(op, ins, 2, direction="bidirectional", clip=1.0), ins, opset=22)
f = np.float32
x = rng.standard_normal((2, 4)).astype(f)
q = np.ones((2, 4), np.uint8)
mk = lambda op, ins, outs=("y",), **a: helper.make_node(op, ins, list(outs), name="n", **a)
run_node(GPU, mk("QuantizeLinear", ["x", "s", "z"]), [x, np.asarray(0.1, f), np.asarray(1, np.uint8)], opset=21)
run_node(GPU, mk("DequantizeLinear", ["x", "s", "z"]), [q, np.asarray(0.1, f), np.asarray(1, np.uint8)], opset=21)
run_node(GPU, mk("DynamicQuantizeLinear", ["x"], ("y", "s", "z")), [x], opset=11)
run_node(GPU, mk("MatMulInteger", ["a", "b"]), [q, q.T.copy()], opset=10)
run_node(GPU, mk("QLinearMatMul", list("abcdefgh")), [q, np.asarray(0.1, f), np.asarray(1, np.uint8), q.T.copy(),
         np.asarray(0.1, f), np.asarray(1, np.uint8), np.asarray(0.1, f), np.asarray(1, np.uint8)], opset=10)
xc = np.ones((1, 2, 3, 3), np.uint8)
run_node(GPU, mk("ConvInteger", ["x", "w"]), [xc, xc], opset=10)
run_node(GPU, mk("QLinearConv", list("abcdefgh")), [xc, np.asarray(0.1, f), np.asarray(1, np.uint8), xc,
         np.asarray(0.1, f), np.asarray(1, np.uint8), np.asarray(0.1, f), np.asarray(1, np.uint8)], opset=10)
import ml_dtypes
h = np.float16
run_node(GPU, mk("QuantizeLinear", ["x", "s", "z"]), [x, np.asarray(0.1, f), np.zeros((), ml_dtypes.float8_e4m3fn)],
         opset=21)
run_node(GPU, mk("QuantizeLinear", ["x", "s", "z"]), [x.astype(h), np.asarray(0.1, h), np.zeros((), ml_dtypes.int4)],
         opset=21)
run_node(GPU, mk("DequantizeLinear", ["x", "s"]), [x.astype(ml_dtypes.float8_e4m3fn), np.asarray(0.1, h)], opset=21)
run_node(GPU, mk("DequantizeLinear", ["x", "s", "z"]), [q.astype(ml_dtypes.uint4), np.asarray(0.1, f),
         np.asarray(1, ml_dtypes.uint4)], opset=21)
run_node(GPU, mk("QLinearMatMul", list("abcdefgh")), [q, np.asarray(0.1, h), np.asarray(1, np.uint8), q.T.copy(),
         np.asarray(0.1, h), np.asarray(1, np.uint8), np.asarray(0.1, h), np.asarray(1, np.uint8)], opset=21)
s = rng.standard_normal((1, 6, 2)).astype(f)
run_node(GPU, mk("DFT", ["x"], axis=1, inverse=0), [s], opset=17)
run_node(GPU, mk("STFT", ["x", "st", "", "fl"]), [s[..., :1].copy(), np.asarray(2, np.int64), None,
         np.asarray(4, np.int64)], opset=17, const_inputs=(1, 3))
run_node(GPU, mk("HannWindow", ["n"]), [np.asarray(4, np.int64)], opset=17, const_inputs=(0,))
run_node(GPU, mk("RandomUniform", [], shape=[4], seed=1.0), [], opset=22)
run_node(GPU, mk("RandomNormal", [], shape=[4], seed=1.0), [], opset=22)
run_node(GPU, mk("Bernoulli", ["p"], seed=1.0), [x], opset=22)
run_node(GPU, mk("Multinomial", ["p"], seed=1.0), [x], opset=22)
print(json.dumps([json.loads(k) + [["mine"]] for k in launches]))
'''


@pytest.mark.slow
def test_new_kernels_compile_for_sm90_float32_ieee_without_fma():
    """The recurrent, quantisation, signal and random kernels compile for a real GPU (sm_90
    PTX) without stray fma (the gates' explicit fmas are fma.rn.f32; nothing else is
    contracted: ptx_tools.contract), approximate or flush-to-zero instructions; .f64 only where the op
    computes in float64 on every target (float64 random outputs, Bernoulli's float64 compare)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from ptx_tools import PRELUDE, run_script
    from test_gpu_compile import _COMPILE_BODY

    here = str(Path(__file__).resolve().parent)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", TESTS_DIR=here)
    r = subprocess.run([sys.executable, "-c", _RECORD_MINE], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    launches = json.loads(r.stdout.strip().splitlines()[-1])
    mods = {m.rsplit(".", 1)[-1] for m, *_ in launches}
    assert {"rnn", "quant", "signal", "random"} <= mods, mods
    res = run_script(PRELUDE + _COMPILE_BODY, stdin=json.dumps(launches), timeout=900)["kernels"]
    errors = {k: v["error"] for k, v in res.items() if "error" in v}
    assert not errors, errors
    f64_ok = ("random_uniform", "random_bernoulli")
    bad = {k: v["stats"] for k, v in res.items()
           if v["stats"]["fma"] or v["stats"]["approx"] or v["stats"]["ftz"]
           or (v["stats"]["f64"] and not any(n in k for n in f64_ok))}
    assert not bad, bad
