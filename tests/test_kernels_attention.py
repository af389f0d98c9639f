"""The attention family's direct kernels (attention.py): Attention, FlexAttention,
RotaryEmbedding, CausalConvWithState, SwiGLU -- against onnx's ReferenceEvaluator (float32,
float16, bfloat16), CPU vs CUDA simulator bitwise, the direct kernel vs the expanded
function body, the half-type rounding helper against numpy / ml_dtypes casts, and the
typed errors."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

import hetero_explore as he
from hetero_explore.ir.errors import ExecutionError
from hetero_explore.providers import mask, resolve
from hetero_explore.providers.cpu import NumbaCPUProvider
from hetero_explore.providers.cuda import NumbaCUDAProvider
from hetero_explore.kernels.attention import round_to
from support.bits import bits_equal
from support.harness import reference as support_reference, run_both, run_node, supports

CPU = NumbaCPUProvider()
GPU = NumbaCUDAProvider()
BF16 = ml_dtypes.bfloat16
RNG = np.random.default_rng(23)


def rnd(shape, dt=np.float32):
    return RNG.standard_normal(shape).astype(np.float32).astype(dt)


def reference(node, inputs, opset, domain=""):
    return support_reference(node, inputs, opset, domain=domain)




def both(node, inputs, opset):
    """CPU and CUDA-simulator outputs, asserted bitwise equal."""
    return run_both(node, inputs, opset)


def close_to_reference(got, want, dt):
    """float32: within 1e-4 (the conformance tolerance); half types: bit for bit but for at most
    1% of the elements (or one) (the kernel makes the reference's roundings; numpy's pairwise
    float32 sums and its float32 exp/tanh may tip a rounding tie) and within two half ULPs."""
    got = np.asarray(got).astype(np.float32)
    want = np.asarray(want).astype(np.float32)
    assert got.shape == want.shape
    if dt == np.float32:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        return
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    assert (~same).sum() <= max(1, same.size // 100), f"{(~same).sum()} of {same.size} differ"
    ulp = 2.0 ** -10 if dt == np.float16 else 2.0 ** -7
    np.testing.assert_allclose(got, want, rtol=2 * ulp, atol=1e-6)


# -- the rounding helper --------------------------------------------------------------------------------
def test_round_to_matches_numpy_float16_and_ml_dtypes_bfloat16():
    x = np.concatenate([
        RNG.standard_normal(4000).astype(np.float32) * np.float32(10.0) ** RNG.integers(-8, 6, 4000),
        np.array([0.0, -0.0, 65504.0, 65519.0, 65520.0, -65520.0, 6e-8, 3e-8, -2.98e-8, 6.1e-5,
                  1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, 3.4e38, -3.4e38, 1e-40, np.inf, -np.inf],
                 np.float32)]).astype(np.float32)
    for rd, dt in ((1, np.float16), (2, BF16)):
        want = x.astype(dt).astype(np.float32)
        got = np.array([round_to(v, rd) for v in x], np.float32)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), x[got.view(np.uint32) != want.view(np.uint32)]
    assert np.isnan(round_to(np.float32(np.nan), 1)) and round_to(np.float32(1.1), 0) == np.float32(1.1)


# -- Attention ------------------------------------------------------------------------------------------
def attn_node(n_in=3, outs=("y",), **attrs):
    names = ["q", "k", "v", "mask", "past_k", "past_v", "nonpad"][:n_in]
    return helper.make_node("Attention", names, list(outs), name="attn", **attrs)


CASES = [
    # (id, Q shape, K shape, V shape, attrs, extras)
    ("plain", (1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 3), {}, {}),
    ("causal_gqa", (1, 4, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4), {"is_causal": 1}, {}),
    ("float_mask_softcap_mode2", (2, 1, 3, 4), (2, 1, 4, 4), (2, 1, 4, 4),
     {"softcap": 2.0, "qk_matmul_output_mode": 2}, {"mask": (3, 4)}),
    ("bool_mask_causal_mode3", (1, 2, 3, 4), (1, 2, 4, 4), (1, 2, 4, 4),
     {"is_causal": 1, "qk_matmul_output_mode": 3}, {"bmask": (1, 2, 3, 4)}),
    ("past_mode0", (1, 2, 2, 4), (1, 2, 2, 4), (1, 2, 2, 4), {"scale": 0.3}, {"past": 3}),
    ("nonpad_window", (2, 2, 2, 4), (2, 2, 5, 4), (2, 2, 5, 4),
     {"is_causal": 1, "left_window_size": 1}, {"nonpad": [5, 3]}),
    ("3d", (1, 3, 8), (1, 4, 4), (1, 4, 6), {"q_num_heads": 2, "kv_num_heads": 1}, {}),
]


def attn_inputs(qs, ks, vs, extras, dt):
    ins = [rnd(qs, dt), rnd(ks, dt), rnd(vs, dt)]
    B = qs[0]
    if "mask" in extras:
        ins.append(rnd(extras["mask"], dt))
    elif "bmask" in extras:
        ins.append(RNG.random(extras["bmask"]) > 0.3)
    if "past" in extras:
        while len(ins) < 4:
            ins.append(None)
        P = extras["past"]
        ins += [rnd((B, ks[1], P, ks[3]), dt), rnd((B, vs[1], P, vs[3]), dt)]
    if "nonpad" in extras:
        while len(ins) < 6:
            ins.append(None)
        ins.append(np.array(extras["nonpad"], np.int64))
    return ins


def attn_case(case, dt):
    name, qs, ks, vs, attrs, extras = case
    ins = attn_inputs(qs, ks, vs, extras, dt)
    outs = ["y", "present_key", "present_value"] if "past" in extras else ["y", "", ""]
    if "qk_matmul_output_mode" in attrs or "past" in extras:
        outs = outs + ["qk"]
    while not outs[-1]:
        outs.pop()
    names = [nm if a is not None else "" for nm, a in zip(["q", "k", "v", "mask", "past_k", "past_v", "nonpad"], ins)]
    n = helper.make_node("Attention", names, outs, name="attn", **attrs)
    return n, ins


@pytest.mark.parametrize("dt", [np.float32, np.float16, BF16], ids=["f32", "f16", "bf16"])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_attention_matches_onnx_reference(case, dt):
    n, ins = attn_case(case, dt)
    opset = 25
    got = run_node(CPU, n, ins, opset=opset)
    want = reference(n, ins, opset)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        close_to_reference(g, w, dt)


@pytest.mark.parametrize("case", [CASES[1], CASES[3], CASES[5], CASES[6]], ids=lambda c: c[0])
@pytest.mark.parametrize("dt", [np.float32, np.float16], ids=["f32", "f16"])
def test_attention_cpu_and_cuda_simulator_bitwise(case, dt):
    n, ins = attn_case(case, dt)
    both(n, ins, 25)


def test_fully_masked_row_is_zero_and_mode3_zero():
    n = attn_node(4, ("y", "", "", "qk"), qk_matmul_output_mode=3)
    m = np.array([[False, False], [True, False]])
    ins = [rnd((1, 1, 2, 4)), rnd((1, 1, 2, 4)), rnd((1, 1, 2, 4)), m]
    y, qk = both(n, ins, 24)
    assert np.all(y[0, 0, 0] == 0) and np.all(qk[0, 0, 0] == 0)
    assert np.allclose(qk[0, 0, 1], [1.0, 0.0])


def test_direct_kernel_matches_the_expanded_function_body_float32():
    q, k, v = rnd((1, 2, 3, 8)), rnd((1, 2, 5, 8)), rnd((1, 2, 5, 8))
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], name="attn", is_causal=1, softcap=3.0)
    vi = lambda nm, s: helper.make_tensor_value_info(nm, TensorProto.FLOAT, s)  # noqa: E731
    g = helper.make_graph([node], "g", [vi("q", q.shape), vi("k", k.shape), vi("v", v.shape)],
                          [vi("y", (1, 2, 3, 8))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)])
    m.ir_version = 9
    feeds = {"q": q, "k": k, "v": v}
    direct = he.plan(he.load_model(m), ["cpu"], strict=True)
    assert [nd.op_type for nd in direct.graph.nodes] == ["Attention"]      # not expanded: the kernel runs it
    expanded = he.plan(he.load_model(m), [mask(resolve("cpu"), deny=["Attention"])], strict=True)
    assert "Attention" not in {nd.op_type for nd in expanded.graph.nodes}
    a = he.execute(direct, feeds).outputs["y"]
    b = he.execute(expanded, feeds).outputs["y"]
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_attention_declines_what_it_does_not_implement():
    q, k, v = rnd((1, 1, 2, 4)), rnd((1, 1, 2, 4)), rnd((1, 1, 2, 4))
    why = supports(CPU, attn_node(softmax_precision=TensorProto.FLOAT16), [q, k, v], opset=23)
    assert not why and "softmax_precision" in why.reason
    why = supports(CPU, attn_node(4), [q, k, v, np.zeros((2, 2), np.int32)], opset=23)
    assert not why and "attn_mask dtype" in why.reason
    assert supports(CPU, attn_node(), [q, k, v], opset=23)


# -- FlexAttention ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", [np.float32, np.float16], ids=["f32", "f16"])
def test_flexattention_without_mods_matches_reference_and_is_bitwise_across_targets(dt):
    n = helper.make_node("FlexAttention", ["q", "k", "v"], ["y"], name="flex", domain="ai.onnx.preview",
                         scale=0.2)
    ins = [rnd((1, 4, 3, 4), dt), rnd((1, 2, 5, 4), dt), rnd((1, 2, 5, 6), dt)]
    opset_fix = {"domain": "ai.onnx.preview"}
    # the one-node model needs the preview domain imported
    import support.harness as kernel_harness
    orig = kernel_harness.node_model

    def with_domain(*a, **kw):
        m = orig(*a, **kw)
        m.opset_import.append(helper.make_opsetid(opset_fix["domain"], 1))
        return m

    kernel_harness.node_model = with_domain
    try:
        got = both(n, ins, 23)
    finally:
        kernel_harness.node_model = orig
    want = reference(n, ins, 23, domain="ai.onnx.preview")
    close_to_reference(got[0], want[0], dt)


# -- SwiGLU, CausalConvWithState, RotaryEmbedding ---------------------------------------------------------
@pytest.mark.parametrize("dt", [np.float32, np.float16, BF16], ids=["f32", "f16", "bf16"])
def test_swiglu_is_float32_rounded_once(dt):
    a, b = rnd((3, 5), dt), rnd((3, 5), dt)
    n = helper.make_node("SwiGLU", ["a", "b"], ["y"], name="swiglu", alpha=0.7)
    (y,) = both(n, [a, b], 28)
    af, bf = a.astype(np.float32), b.astype(np.float32)
    want = (af * (1 / (1 + np.exp(np.float32(-0.7) * af))).astype(np.float32) * bf).astype(dt)
    close_to_reference(y, want, dt)


@pytest.mark.parametrize("dt", [np.float32, np.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("act,past,bias", [("none", False, True), ("silu", True, False), ("none", True, True)])
def test_causal_conv_with_state_matches_reference(dt, act, past, bias):
    B, C, L, K = 2, 3, 5, 3
    ins = [rnd((B, C, L), dt), rnd((C, 1, K), dt), rnd((C,), dt) if bias else None,
           rnd((B, C, K - 1), dt) if past else None]
    n = helper.make_node("CausalConvWithState", ["x", "w", "b" if bias else "", "s" if past else ""],
                         ["y", "state"], name="cconv", activation=act)
    got = both(n, ins, 27)
    want = reference(n, ins, 27)
    for g, w in zip(got, want):
        close_to_reference(g, w, dt)
    assert bits_equal(got[1], want[1])     # the state is a copy


@pytest.mark.parametrize("dt", [np.float32, np.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("interleaved,rot,three_d", [(0, 0, False), (1, 4, False), (0, 4, True)])
def test_rotary_embedding_matches_reference(dt, interleaved, rot, three_d):
    B, H, S, D = 2, 2, 3, 6 if rot else 4
    R = rot or D
    x = rnd((B, S, H * D) if three_d else (B, H, S, D), dt)
    cos, sin = rnd((10, R // 2), dt), rnd((10, R // 2), dt)
    pos = RNG.integers(0, 10, (B, S)).astype(np.int64)
    attrs = dict(interleaved=interleaved, rotary_embedding_dim=rot)
    if three_d:
        attrs["num_heads"] = H
    n = helper.make_node("RotaryEmbedding", ["x", "c", "s", "p"], ["y"], name="rope", **attrs)
    (y,) = both(n, [x, cos, sin, pos], 23)
    (want,) = reference(n, [x, cos, sin, pos], 23)
    close_to_reference(y, want, dt)


@pytest.mark.parametrize("prov", [CPU, GPU], ids=["cpu", "cuda"])
def test_rotary_position_ids_out_of_range_raise_a_typed_error(prov):
    x = rnd((1, 1, 2, 4))
    cos, sin = rnd((5, 2)), rnd((5, 2))
    n = helper.make_node("RotaryEmbedding", ["x", "c", "s", "p"], ["y"], name="rope")
    with pytest.raises(ExecutionError, match=r"rope.*position id 5 is out of range"):
        run_node(prov, n, [x, cos, sin, np.array([[0, 5]], np.int64)], opset=23)
    with pytest.raises(ExecutionError, match="position id -1"):
        run_node(prov, n, [x, cos, sin, np.array([[-1, 0]], np.int64)], opset=23)


# -- every kernel of attention.py compiles for sm_90 in float32 IEEE arithmetic ------------------------
_RECORD = r'''
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
from support.bits import bits_equal
from support.harness import run_node

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
        if self.py.__module__.endswith(".attention"):
            launches.setdefault(json.dumps([self.py.__module__, self.py.__name__, [arg_type(a) for a in args]]), 1)
        return launcher(*args)
    return run
target.LazyKernel.__getitem__ = getitem
GPU = NumbaCUDAProvider()
r = np.random.default_rng(0)
f = lambda *s: r.standard_normal(s).astype(np.float32)
mk = lambda op, ins, outs=("y",), **a: helper.make_node(op, ins, list(outs), name="n", **a)
run_node(GPU, mk("Attention", ["q", "k", "v", "m"], ("y", "", "", "qk"), is_causal=1, softcap=2.0,
                 qk_matmul_output_mode=3), [f(1, 2, 2, 4), f(1, 1, 3, 4), f(1, 1, 3, 4), r.random((2, 3)) > 0.5],
         opset=25)
run_node(GPU, mk("Attention", ["q", "k", "v", "m"]), [f(1, 2, 2, 4), f(1, 2, 3, 4), f(1, 2, 3, 4), f(2, 3)], opset=25)
run_node(GPU, mk("SwiGLU", ["a", "b"]), [f(2, 3), f(2, 3)], opset=28)
run_node(GPU, mk("CausalConvWithState", ["x", "w", "b", "s"], ("y", "st"), activation="silu"),
         [f(1, 2, 3), f(2, 1, 3), f(2), f(1, 2, 2)], opset=27)
run_node(GPU, mk("RotaryEmbedding", ["x", "c", "s", "p"]), [f(1, 1, 2, 4), f(3, 2), f(3, 2), np.zeros((1, 2), np.int64)],
         opset=23)
run_node(GPU, mk("LinearAttention", ["q", "k", "v", "s", "g", "b"], ("y", "st"), q_num_heads=2, kv_num_heads=1),
         [f(1, 2, 4), f(1, 2, 2), f(1, 2, 2), f(1, 1, 2, 2), f(1, 2, 2), f(1, 2, 1)], opset=27)
print(json.dumps([json.loads(k) + [["attention"]] for k in launches]))
'''


@pytest.mark.slow
def test_attention_kernels_compile_for_sm90_float32_ieee_without_fma():
    """Every attention.py kernel the CUDA provider launches compiles for a real GPU (sm_90
    PTX) with no stray fma (the explicit fma of Attention's two sums is fma.rn.f32; nothing
    else is contracted: ptx_tools.contract), no .f64, no approximate or flush-to-zero
    instruction."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from ptx_tools import PRELUDE, run_script
    from test_gpu_compile import _COMPILE_BODY

    here = str(Path(__file__).resolve().parent)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", TESTS_DIR=here)
    r = subprocess.run([sys.executable, "-c", _RECORD], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    launches = json.loads(r.stdout.strip().splitlines()[-1])
    names = {n for _, n, *_ in launches}
    assert {"_attention_row_cuda", "_attention_kv_cuda", "_swiglu_cuda", "_causal_conv_cuda",
            "_causal_conv_state_cuda", "_rotary_embedding_cuda", "_linear_attention_cuda"} <= names, names
    res = run_script(PRELUDE + _COMPILE_BODY, stdin=json.dumps(launches), timeout=900)["kernels"]
    errors = {k: v["error"] for k, v in res.items() if "error" in v}
    assert not errors, errors
    bad = {k: v["stats"] for k, v in res.items() if any(v["stats"].values())}
    assert not bad, bad


# -- random shapes, masks and attributes against the reference (hypothesis) ---------------------------
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def attention_configs(draw):
    B = draw(st.integers(1, 2))
    Hk = draw(st.integers(1, 2))
    Hq = Hk * draw(st.integers(1, 2))
    Lq, L, D, Dv = (draw(st.integers(1, 4)) for _ in range(4))
    P = draw(st.integers(0, 2))
    attrs = {}
    if draw(st.booleans()):
        attrs["is_causal"] = 1
    if draw(st.booleans()):
        attrs["softcap"] = draw(st.sampled_from([0.5, 2.0]))
    if draw(st.booleans()):
        attrs["scale"] = draw(st.sampled_from([0.1, 0.7]))
    mode = draw(st.sampled_from([None, 0, 1, 2, 3]))
    if mode is not None:
        attrs["qk_matmul_output_mode"] = mode
    if draw(st.booleans()):
        attrs["left_window_size"] = draw(st.integers(0, 2))
    mask = draw(st.sampled_from([None, "float", "bool"]))
    mrank = draw(st.integers(2, 4))   # onnx's reference fails on a rank-1 mask with is_causal alone
    mlast = draw(st.integers(1, P + L))
    nonpad = None
    if P == 0 and draw(st.booleans()):
        nonpad = [draw(st.integers(0, L)) for _ in range(B)]
    dt = draw(st.sampled_from([np.float32, np.float16, BF16]))
    return B, Hq, Hk, Lq, L, D, Dv, P, attrs, mask, mrank, mlast, nonpad, dt


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(attention_configs())
def test_attention_random_configs_match_reference(cfg):
    B, Hq, Hk, Lq, L, D, Dv, P, attrs, mask, mrank, mlast, nonpad, dt = cfg
    ins = [rnd((B, Hq, Lq, D), dt), rnd((B, Hk, L, D), dt), rnd((B, Hk, L, Dv), dt)]
    full = (B, Hq, Lq, mlast)
    mshape = full[4 - mrank:]
    if mask == "float":
        ins.append(rnd(mshape, dt))
    elif mask == "bool":
        ins.append(RNG.random(mshape) > 0.3)
    else:
        ins.append(None)
    ins += [rnd((B, Hk, P, D), dt), rnd((B, Hk, P, Dv), dt)] if P else [None, None]
    ins.append(None if nonpad is None else np.array(nonpad, np.int64))
    while ins[-1] is None:
        ins.pop()
    names = [nm if a is not None else "" for nm, a in zip(["q", "k", "v", "m", "pk", "pv", "np"], ins)]
    outs = ["y", "pk_out" if P else "", "pv_out" if P else "", "qk" if "qk_matmul_output_mode" in attrs else ""]
    while not outs[-1]:
        outs.pop()
    n = helper.make_node("Attention", names, outs, name="attn", **attrs)
    got = run_node(CPU, n, ins, opset=25)
    want = reference(n, ins, 25)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        close_to_reference(g, w, dt)
