"""The ``ort-cuda`` and ``directml`` profiles claim onnxruntime's contrib ops from their tables
(``providers/profiles/contrib/*.json``, transcribed from onnxruntime's OperatorKernels.md): every
claimed contrib op that the CPU kernels implement executes there -- a one-node model planned on
``[profile, cpu]`` puts the node on the profile and runs byte-identical to the CPU reference --
and a claimed op the kernels lack is declined with both reasons."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

import hetero_explore as he  # noqa: E402
from hetero_explore.kernels import registry as reg  # noqa: E402
from hetero_explore.load.loader import load_model  # noqa: E402
from hetero_explore.providers.profiles import load_profile  # noqa: E402
from support.bits import assert_bits_equal  # noqa: E402

import test_kernels_contrib as tk  # noqa: E402

F = np.float32
MS = "com.microsoft"


def _case(op):
    """(inputs, outputs, attrs, const, domain) of a small float32 / uint8 case of ``op``."""
    q8 = tk._q((2, 3, 4))
    s, z = tk._sz(0.05, 128)
    B, S, H = 2, 3, 8
    cases = {
        "Attention": (tk._attn_inputs(B, S, H, 2), [("y", F)], {"num_heads": 2}, ("w", "bias")),
        "BiasAdd": ([("x", tk.f32(2, 3, 8)), ("b", tk.f32(8)), ("skip", tk.f32(2, 3, 8))], [("y", F)], {}, ("b",)),
        "BiasGelu": ([("x", tk.f32(2, 8)), ("b", tk.f32(8))], [("y", F)], {}, ("b",)),
        "FastGelu": ([("x", tk.f32(2, 8)), ("b", tk.f32(8))], [("y", F)], {}, ("b",)),
        "Gelu": ([("x", tk.f32(2, 8))], [("y", F)], {}, ()),
        "QuickGelu": ([("x", tk.f32(2, 8))], [("y", F)], {"alpha": 1.702}, ()),
        "FusedMatMul": ([("a", tk.f32(3, 4)), ("b", tk.f32(5, 4))], [("y", F)], {"transB": 1, "alpha": 0.5}, ()),
        "FusedConv": ([("x", tk.f32(1, 2, 5, 5)), ("w", tk.f32(3, 2, 3, 3)), ("b", tk.f32(3))], [("y", F)],
                      {"activation": "Relu"}, ("w", "b")),
        "SkipLayerNormalization": ([("x", tk.f32(B, S, H)), ("skip", tk.f32(B, S, H)), ("g", tk.f32(H)),
                                    ("beta", tk.f32(H))], [("y", F)], {}, ("g", "beta")),
        "SkipSimplifiedLayerNormalization": ([("x", tk.f32(B, S, H)), ("skip", tk.f32(B, S, H)), ("g", tk.f32(H))],
                                             [("y", F)], {}, ("g",)),
        "SimplifiedLayerNormalization": ([("x", tk.f32(B, S, H)), ("g", tk.f32(H))], [("y", F)], {}, ("g",)),
        "EmbedLayerNormalization": ([("ids", np.array([[1, 4, 2]], np.int32)), ("seg", None), ("word", tk.f32(6, H)),
                                     ("pos", tk.f32(4, H)), ("segt", None), ("gamma", tk.f32(H)),
                                     ("beta", tk.f32(H))], [("y", F), ("mi", np.int32)], {},
                                    ("word", "pos", "gamma", "beta")),
        "MultiHeadAttention": ([("q", tk.f32(B, S, H)), ("k", tk.f32(B, S, H)), ("v", tk.f32(B, S, H))], [("y", F)],
                               {"num_heads": 2}, ()),
        "RotaryEmbedding": ([("x", tk.f32(1, 3, 8)), ("pos", np.array([[0, 2, 1]], np.int64)),
                             ("cos", tk.f32(4, 2)), ("sin", tk.f32(4, 2))], [("y", F)], {"num_heads": 2},
                            ("cos", "sin")),
        "MatMulNBits": ([("a", tk.f32(2, 32))] + tk._nbits(32, 4, 4, 16, True), [("y", F)],
                        {"K": 32, "N": 4, "bits": 4, "block_size": 16}, ("b", "scales", "zp")),
        "GatherBlockQuantized": ([("data", tk._q((4, 8))), ("idx", np.array([2, 0], np.int64)),
                                  ("scales", np.abs(tk.f32(4, 1)) + 0.1)], [("y", F)],
                                 {"block_size": 16, "bits": 4}, ("data", "scales")),
        "MatMulIntegerToFloat": ([("a", q8), ("b", tk._q((4, 5), np.int8)), ("sa", s), ("sb", np.array(0.01, F))],
                                 [("y", F)], {}, ("b",)),
        "DynamicQuantizeMatMul": ([("a", tk.f32(3, 4)), ("b", tk._q((4, 5), np.int8)), ("sb", np.array(0.01, F))],
                                  [("y", F)], {}, ("b", "sb")),
        "QAttention": ([("x", tk._q((B, S, H), np.int8)), ("w", tk._q((H, 3 * H), np.int8)), ("bias", tk.f32(3 * H)),
                        ("sx", np.array(0.02, F)), ("sw", np.array(0.01, F))], [("y", F)], {"num_heads": 2},
                       ("w", "bias", "sw")),
        "GroupQueryAttention": tk._gqa(1, 2, 3, 2, 1, 16, [4], 5, {}, packed=True, rotary=False)
        + ([("y", F), ("pk_out", F), ("pv_out", F)],),
        "DequantizeLinear": ([("x", q8), ("s", s), ("z", z)], [("y", F)], {}, ()),
        "QuantizeLinear": ([("x", tk.f32(2, 4)), ("s", s), ("z", z)], [("y", np.uint8)], {}, ()),
        "QLinearAdd": ([("a", q8), ("sa", s), ("za", z), ("b", q8), ("sb", s), ("zb", z), ("sc", s), ("zc", z)],
                       [("y", np.uint8)], {}, ()),
        "QLinearSigmoid": ([("x", q8), ("sx", s), ("zx", z), ("sy", s), ("zy", z)], [("y", np.uint8)], {}, ()),
        "QLinearGlobalAveragePool": ([("x", tk._q((1, 2, 3, 3))), ("sx", s), ("zx", z), ("sy", s), ("zy", z)],
                                     [("y", np.uint8)], {}, ()),
        "QLinearAveragePool": ([("x", tk._q((1, 2, 4, 4))), ("sx", s), ("zx", z), ("sy", s), ("zy", z)],
                               [("y", np.uint8)], {"kernel_shape": [2, 2]}, ()),
        "QLinearConcat": ([("sy", s), ("zy", z), ("x1", q8), ("s1", s), ("z1", z), ("x2", q8), ("s2", s), ("z2", z)],
                          [("y", np.uint8)], {"axis": 1}, ()),
    }
    if op == "GroupQueryAttention":
        ins, attrs, out = cases[op]
        return ins, out, attrs, ("cos", "sin", "total"), MS
    ins, outs, attrs, const = cases[op]
    return ins, outs, attrs, const, "" if op == "SimplifiedLayerNormalization" else MS


def _claimed(profile):
    p = load_profile(profile)
    return sorted((d, op) for (d, op) in p.ops if p.ops[(d, op)].source is not None)


def _implemented(domain, op):
    return bool(reg.find(domain, op, "cpu"))


PAIRS = [(p, op) for p in ("ort-cuda", "directml") for (d, op) in _claimed(p) if _implemented(d, op)]


def test_profiles_claim_the_contrib_ops_of_their_tables():
    for p in ("ort-cuda", "directml"):
        claimed = _claimed(p)
        assert len(claimed) > 20
        assert all(load_profile(p).ops[k].source["commit"].startswith("001d12d") for k in claimed)


@pytest.mark.parametrize("profile,op", PAIRS, ids=[f"{p}-{o}" for p, o in PAIRS])
def test_claimed_contrib_op_executes_on_the_profile(profile, op):
    ins, outs, attrs, const, domain = _case(op)
    m = tk.model(op, ins, outs, attrs, const, domain)
    feeds = {n: np.asarray(a) for n, a in ins if a is not None and n not in const}
    g = load_model(m, check=False, fold_constants=False, optimize=False)
    plan = he.plan(g, [profile, "cpu"])
    row = plan.placement_df().iloc[0]
    spec = load_profile(profile).ops[(domain, op)]
    d0 = np.asarray(ins[0][1]).dtype.name
    if spec.versions[0].dtypes is not None and d0 not in spec.versions[0].dtypes:
        # the table claims other types only (CUDA's GroupQueryAttention: float16/bfloat16)
        assert row.provider == "cpu" and "is not supported (the table lists" in row.declined_by[profile]
        return
    assert row.provider == profile, row.declined_by
    run = he.execute(plan, feeds)
    ref = he.execute_reference(g, "cpu", feeds)
    for k in run.outputs:
        assert_bits_equal(run.outputs[k], ref.outputs[k], f"{profile} {op} output {k}")


def test_claimed_contrib_op_without_a_kernel_is_declined_with_both_reasons():
    from onnx import TensorProto, helper
    node = helper.make_node("BiasSoftmax", ["x", "b"], ["y"], domain=MS, axis=-1)
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4]),
                                        helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)])
    plan = he.plan(load_model(m, check=False), ["ort-cuda", "cpu"])
    why = plan.placement_df().iloc[0].declined_by["ort-cuda"]
    assert "table claims BiasSoftmax" in why and "decline" in why
