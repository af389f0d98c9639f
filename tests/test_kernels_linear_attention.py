"""LinearAttention (opset 27, attention.py): every update rule, per-head and per-key-dim
decay, per-head and scalar beta, GQA/MQA, with and without past_state, explicit scale,
float16/bfloat16 -- against onnx's ReferenceEvaluator, CPU vs CUDA simulator bitwise, and
the declines (bad attributes, missing/forbidden inputs, wrong shapes)."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper

from support.harness import make_context, supports
from test_kernels_attention import CPU, GPU, both, close_to_reference, reference

BF16 = ml_dtypes.bfloat16
OPSET = 27
RULES = ("linear", "gated", "delta", "gated_delta")


def case(rule, B=2, T=3, Hq=4, Hk=2, Dk=3, Dv=2, past=False, decay="dim", beta="head", dt=np.float32,
         state_dt=None, scale=None, seed=0):
    """A LinearAttention node and its inputs (key L2-normalised per head, as onnx's cases)."""
    rng = np.random.default_rng(seed)

    def r(shape, dtype=dt):
        return rng.standard_normal(shape).astype(np.float32).astype(dtype)

    q, v = r((B, T, Hq * Dk)), r((B, T, Hk * Dv))
    k4 = rng.standard_normal((B, T, Hk, Dk)).astype(np.float32)
    k4 /= np.maximum(np.linalg.norm(k4, axis=-1, keepdims=True), 1e-6)
    k = k4.reshape(B, T, Hk * Dk).astype(dt)
    gating, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    ins = [q, k, v, None, None, None]
    if past:
        ins[3] = (r((B, Hk, Dk, Dv), state_dt or dt).astype(np.float32) * 0.5).astype(state_dt or dt)
    if gating:
        ins[4] = (-np.abs(r((B, T, Hk if decay == "head" else Hk * Dk), np.float32)) * 0.3).astype(dt)
    if delta:
        ins[5] = rng.random((B, T, Hk if beta == "head" else 1)).astype(np.float32).astype(dt)
    names = ["q", "k", "v", "s" if past else "", "g" if gating else "", "b" if delta else ""]
    while names and not names[-1]:
        names.pop()
        ins.pop()
    attrs = dict(q_num_heads=Hq, kv_num_heads=Hk, update_rule=rule)
    if scale is not None:
        attrs["scale"] = scale
    return helper.make_node("LinearAttention", names, ["y", "state"], name="la", **attrs), ins


def check_case(node, ins):
    got = both(node, ins, OPSET)            # CPU and CUDA simulator, bitwise
    want = reference(node, ins, OPSET)
    assert len(got) == len(want) == 2
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        close_to_reference(g, w, np.float32 if w.dtype == np.float32 else w.dtype.type)
    return got


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("past", [False, True], ids=["nopast", "past"])
def test_every_rule_matches_reference(rule, past):
    check_case(*case(rule, past=past))


@pytest.mark.parametrize("rule", ["gated", "gated_delta"])
def test_per_head_decay(rule):
    check_case(*case(rule, decay="head"))


@pytest.mark.parametrize("rule", ["delta", "gated_delta"])
def test_scalar_beta(rule):
    check_case(*case(rule, beta="scalar"))


@pytest.mark.parametrize("Hq,Hk", [(3, 1), (6, 2), (2, 2)], ids=["mqa", "gqa", "mha"])
def test_grouped_query_heads(Hq, Hk):
    check_case(*case("gated_delta", Hq=Hq, Hk=Hk, Dk=2, Dv=3, past=True))


def test_explicit_scale_and_longer_sequence():
    check_case(*case("gated_delta", T=7, scale=0.25, past=True))
    # the default scale is 1/sqrt(d_k): a different scale gives a different output
    n1, ins = case("linear", Dk=4)
    n2, _ = case("linear", Dk=4, scale=0.9)
    a, b = both(n1, ins, OPSET)[0], both(n2, ins, OPSET)[0]
    np.testing.assert_allclose(b, a * np.float32(0.9 * 2.0), rtol=1e-5, atol=1e-6)


def test_decode_step_continues_a_prefill():
    """Running T steps at once equals running them one by one, feeding present_state back."""
    node, ins = case("gated_delta", T=4, past=True)
    y_all, s_all = both(node, ins, OPSET)
    s = ins[3]
    ys = []
    for t in range(4):
        step = [ins[0][:, t:t + 1], ins[1][:, t:t + 1], ins[2][:, t:t + 1], s, ins[4][:, t:t + 1],
                ins[5][:, t:t + 1]]
        y, s = both(node, step, OPSET)
        ys.append(y)
    np.testing.assert_array_equal(np.concatenate(ys, axis=1), y_all)
    np.testing.assert_array_equal(s, s_all)


@pytest.mark.parametrize("dt", [np.float16, BF16], ids=["f16", "bf16"])
@pytest.mark.parametrize("rule", ["linear", "gated_delta"])
def test_half_types(dt, rule):
    got = check_case(*case(rule, Hq=4, Hk=2, past=(rule == "linear"), dt=dt))
    assert got[0].dtype == np.dtype(dt) and got[1].dtype == np.dtype(dt)


def test_float32_state_with_float16_activations():
    node, ins = case("gated_delta", past=True, dt=np.float16, state_dt=np.float32)
    got = check_case(node, ins)
    assert got[0].dtype == np.float16 and got[1].dtype == np.float32


def _reason(node, ins):
    """The CPU and CUDA decline reason (a context with placeholder output shapes, not onnx's shape inference, which rejects
    some of these nodes itself: the kernel must decline them too)."""
    f32 = np.dtype(np.float32)
    ctx = make_context(node, ins, OPSET, out_shapes=[ins[0].shape, (1, 1, 1, 1)], out_dtypes=[f32, f32])
    why, why_gpu = CPU.supports(ctx), GPU.supports(ctx)
    assert not why and not why_gpu and why.reason == why_gpu.reason
    return why.reason


def test_declines_bad_attributes_and_inputs():
    node, ins = case("linear")
    assert supports(CPU, node, ins, opset=OPSET) and supports(GPU, node, ins, opset=OPSET)
    bad = helper.make_node("LinearAttention", ["q", "k", "v"], ["y", "state"], q_num_heads=4, kv_num_heads=2,
                           update_rule="mamba")
    assert "update_rule 'mamba'" in _reason(bad, ins)
    bad = helper.make_node("LinearAttention", ["q", "k", "v"], ["y", "state"], q_num_heads=4, kv_num_heads=3,
                           update_rule="linear")
    assert "multiple of kv_num_heads" in _reason(bad, ins)
    bad = helper.make_node("LinearAttention", ["q", "k", "v"], ["y", "state"], q_num_heads=5, kv_num_heads=1,
                           update_rule="linear")
    assert "do not split" in _reason(bad, ins)
    # gated_delta (the default rule) needs decay and beta
    bad = helper.make_node("LinearAttention", ["q", "k", "v"], ["y", "state"], q_num_heads=4, kv_num_heads=2)
    assert "requires the decay" in _reason(bad, ins)
    node, ins = case("gated_delta")
    lin = helper.make_node("LinearAttention", node.input, ["y", "state"], q_num_heads=4, kv_num_heads=2,
                           update_rule="linear")
    assert "forbids the decay" in _reason(lin, ins)
    node, ins = case("delta", beta="head")
    ins[5] = np.ones((2, 3, 3), np.float32)
    assert "beta must be" in _reason(node, ins)
    node, ins = case("gated", decay="head")
    ins[4] = np.ones((2, 3, 5), np.float32)
    assert "decay must be" in _reason(node, ins)
    node, ins = case("linear", past=True)
    ins[3] = np.zeros((2, 2, 2, 3), np.float32)
    assert "past_state must be" in _reason(node, ins)


@st.composite
def configs(draw):
    Hk = draw(st.integers(1, 2))
    return dict(rule=draw(st.sampled_from(RULES)), B=draw(st.integers(1, 2)), T=draw(st.integers(1, 4)),
                Hq=Hk * draw(st.integers(1, 2)), Hk=Hk, Dk=draw(st.integers(1, 4)), Dv=draw(st.integers(1, 3)),
                past=draw(st.booleans()), decay=draw(st.sampled_from(["head", "dim"])),
                beta=draw(st.sampled_from(["head", "scalar"])),
                scale=draw(st.sampled_from([None, 0.3])), seed=draw(st.integers(0, 2 ** 16)))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs())
def test_random_shapes_and_rules_match_reference(cfg):
    check_case(*case(**cfg))
