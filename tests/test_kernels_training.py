"""Training-mode kernels (kernels/training.py): the ai.onnx.preview.training optimisers
and training-mode BatchNormalization against onnx's ReferenceEvaluator, CPU vs CUDA simulator
bitwise; training-mode Dropout's invariants (hypothesis), its seeded reproducibility and the
typed errors; the loader keeping a training-mode BatchNormalization's unused outputs; and the
conformance check of Dropout's invariants (it must go red on wrong outputs)."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto as T
from onnx import helper as h
from onnx.reference import ReferenceEvaluator

import hetero_explore as he
from hetero_explore.analysis.conformance import _check_dropout, _is_random
from hetero_explore.ir.errors import HeteroExploreError
from hetero_explore.providers.cpu import NumbaCPUProvider
from hetero_explore.providers.cuda import NumbaCUDAProvider
from hetero_explore.kernels.training import _ipow
from support.bits import bits_equal
from support.harness import run_both, run_node, supports

CPU = NumbaCPUProvider()
GPU = NumbaCUDAProvider()
F = np.float32
TRAIN = "ai.onnx.preview.training"




def _both(node, ins, opset, out_shapes=None, out_dtypes=None, const_inputs=()):
    """CPU and CUDA simulator outputs, asserted bitwise equal; returns the CPU outputs."""
    return run_both(node, ins, opset, const_inputs, out_shapes=out_shapes, out_dtypes=out_dtypes)


def _reference(node, names, ins, opsets):
    vis = [h.make_tensor_value_info(n, h.np_dtype_to_tensor_dtype(np.asarray(a).dtype), np.shape(a))
           for n, a in zip(names, ins)]
    outs = [h.make_tensor_value_info(o, 0, None) for o in node.output]
    m = h.make_model(h.make_graph([node], "g", vis, outs), opset_imports=[h.make_opsetid(d, v) for d, v in opsets])
    return ReferenceEvaluator(m).run(None, dict(zip(names, ins)))


# --- optimisers ----------------------------------------------------------------------------
def _opt_case(op, n, seed, t, **attrs):
    rng = np.random.default_rng(seed)
    shapes = [(3,), (2, 4), (5,)][:n]
    k = {"Adagrad": 1, "Adam": 2, "Momentum": 1}[op]
    xs = [rng.standard_normal(s).astype(F) for s in shapes]
    gs = [rng.standard_normal(s).astype(F) for s in shapes]
    states = [[np.abs(rng.standard_normal(s)).astype(F) for s in shapes] for _ in range(k)]
    names = ["R", "T"] + [f"X{i}" for i in range(n)] + [f"G{i}" for i in range(n)]
    state_names = {"Adagrad": ["H"], "Adam": ["V", "H"], "Momentum": ["V"]}[op]
    for s in state_names:
        names += [f"{s}{i}" for i in range(n)]
    out_names = [f"{nm}_new" for nm in names[2:2 + n]] + [f"{nm}_new" for nm in names[2 + 2 * n:]]
    ins = [np.array(0.1, F), np.array(t, np.int64)] + xs + gs + [a for grp in states for a in grp]
    node = h.make_node(op, names, out_names, domain=TRAIN, name=f"{op}_n", **attrs)
    out_shapes = [a.shape for a in xs] * (1 + k)
    return node, names, ins, out_shapes


OPT_CASES = [
    ("Adagrad", 1, 0, dict(decay_factor=0.1, epsilon=1e-5, norm_coefficient=0.001)),
    ("Adagrad", 3, 5, dict(decay_factor=0.0, epsilon=1e-3, norm_coefficient=0.0)),
    ("Adam", 1, 0, dict(alpha=0.95, beta=0.1, epsilon=1e-7, norm_coefficient=0.001)),
    ("Adam", 2, 0, dict(alpha=0.9, beta=0.999, epsilon=1e-7, norm_coefficient=0.0)),
    ("Adam", 3, 37, dict(alpha=0.9, beta=0.999, epsilon=1e-2, norm_coefficient=0.01, norm_coefficient_post=0.02)),
    ("Momentum", 1, 0, dict(alpha=0.95, beta=0.1, mode="standard", norm_coefficient=0.001)),
    ("Momentum", 2, 4, dict(alpha=0.95, beta=0.85, mode="standard", norm_coefficient=0.001)),
    ("Momentum", 2, 4, dict(alpha=0.95, beta=1.0, mode="nesterov", norm_coefficient=0.01)),
    ("Momentum", 1, 0, dict(alpha=0.5, beta=0.3, mode="nesterov", norm_coefficient=0.0)),
]


@pytest.mark.parametrize("op,n,t,attrs", OPT_CASES,
                         ids=[f"{op}-{n}x-T{t}-{a.get('mode', '')}" for op, n, t, a in OPT_CASES])
def test_optimisers_match_reference_and_are_bitwise_portable(op, n, t, attrs):
    node, names, ins, out_shapes = _opt_case(op, n, seed=n + t, t=t, **attrs)
    got = _both(node, ins, 1, out_shapes, [np.dtype(F)] * len(out_shapes))
    want = _reference(node, names, ins, [("", 17), (TRAIN, 1)])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, np.asarray(w, np.float64), rtol=2e-6, atol=1e-7)


def test_optimiser_run_time_rate_and_step():
    """R and T are ordinary (non-constant) inputs: the kernels read them on each target; T = 0
    (no bias correction / beta replaced by 1) and T > 0 give different steps."""
    node, _, ins, out_shapes = _opt_case("Adam", 1, seed=2, t=0, alpha=0.9, beta=0.99)
    a = _both(node, ins, 1, out_shapes, [np.dtype(F)] * 3)
    ins[1] = np.array(3, np.int64)
    b = _both(node, ins, 1, out_shapes, [np.dtype(F)] * 3)
    assert not np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


@pytest.mark.parametrize("b,n", [(0.999, 0), (0.999, 1), (0.5, 7), (0.9, 1000), (0.999, 123456)])
def test_ipow_is_float32_binary_powering(b, n):
    r, bb, k = F(1), F(b), n
    while k:
        if k & 1:
            r = F(r * bb)
        bb = F(bb * bb)
        k >>= 1
    assert bits_equal(np.array(_ipow(F(b), n), F), np.array(r, F))
    assert abs(float(r) - b ** n) <= 1e-5 * max(b ** n, 1e-30) + 1e-30 * n


def test_optimiser_declines_double_tensors_and_bad_groups():
    node, names, ins, out_shapes = _opt_case("Adagrad", 1, seed=0, t=1)
    ins64 = ins[:2] + [a.astype(np.float64) for a in ins[2:]]
    from support.harness import make_context
    ctx = make_context(node, ins64, 1, out_shapes=out_shapes, out_dtypes=[np.dtype(np.float64)] * 2)
    m = CPU.supports(ctx)
    assert not m and "float32" in m.reason
    bad = h.make_node("Adagrad", names[:4], ["X0_new"], domain=TRAIN)
    ctx = make_context(bad, ins[:4], 1, out_shapes=[(3,)], out_dtypes=[np.dtype(F)])
    m = CPU.supports(ctx)
    assert not m and "groups" in m.reason


# --- BatchNormalization, training mode -----------------------------------------------------
def _bn_inputs(shape, seed):
    rng = np.random.default_rng(seed)
    C = shape[1]
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(F)
    return [x, rng.standard_normal(C).astype(F), rng.standard_normal(C).astype(F),
            rng.standard_normal(C).astype(F), np.abs(rng.standard_normal(C)).astype(F) + F(0.1)]


@pytest.mark.parametrize("shape,attrs", [((2, 3, 4, 5), {}), ((2, 3, 4, 5), {"epsilon": 1e-2}),
                                         ((4, 3), {"momentum": 0.5}), ((1, 2, 3, 2, 2), {"momentum": 0.0}),
                                         ((3, 1, 7), {"epsilon": 1e-3, "momentum": 0.99})])
def test_batchnorm_training_matches_reference_and_is_bitwise_portable(shape, attrs):
    ins = _bn_inputs(shape, seed=len(shape))
    names = ["x", "s", "b", "m", "v"]
    node = h.make_node("BatchNormalization", names, ["y", "rm", "rv"], name="bn", training_mode=1, **attrs)
    got = _both(node, ins, 15)
    want = _reference(node, names, ins, [("", 15)])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    # the statistics: float64 sums in (n, spatial) order, rounded once
    x64 = ins[0].astype(np.float64)
    axes = tuple(i for i in range(len(shape)) if i != 1)
    mean = x64.mean(axis=axes).astype(F)
    mom = F(attrs.get("momentum", 0.9))
    np.testing.assert_array_equal(got[1], ins[3] * mom + mean * (F(1) - mom))


def test_batchnorm_training_with_unused_running_outputs_loads_and_runs():
    """The loader drops unused optional outputs, except those onnx's inference needs: a
    training-mode BatchNormalization must keep all three (it could not be loaded before)."""
    shape = (2, 3, 4)
    node = h.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"], name="bn",
                       training_mode=1)
    vis = [h.make_tensor_value_info(n, T.FLOAT, s) for n, s in
           [("x", shape), ("s", (3,)), ("b", (3,)), ("m", (3,)), ("v", (3,))]]
    m = h.make_model(h.make_graph([node], "g", vis, [h.make_tensor_value_info("y", T.FLOAT, shape)]),
                     opset_imports=[h.make_opsetid("", 15)])
    g = he.load_model(m)
    assert [tuple(n.outputs) for n in g.nodes] == [("y", "rm", "rv")]
    ins = _bn_inputs(shape, seed=9)
    feeds = dict(zip(["x", "s", "b", "m", "v"], ins))
    run = he.execute(he.plan(g, ["cpu"]), feeds)
    want = ReferenceEvaluator(m).run(None, feeds)[0]
    np.testing.assert_allclose(run["y"], want, rtol=1e-5, atol=1e-6)


def test_loader_still_drops_outputs_inference_does_not_need():
    """Dropout-12's unused mask is still dropped (inference accepts one output)."""
    node = h.make_node("Dropout", ["x"], ["y", "mask"])
    m = h.make_model(h.make_graph([node], "g", [h.make_tensor_value_info("x", T.FLOAT, (2, 3))],
                                  [h.make_tensor_value_info("y", T.FLOAT, (2, 3))]),
                     opset_imports=[h.make_opsetid("", 13)])
    g = he.load_model(m, optimize=False)
    assert [tuple(n.outputs) for n in g.nodes] == [("y",)]


# --- Dropout, training mode ----------------------------------------------------------------
def _dropout(shape, ratio, train, seed=0, mask=True, provider=CPU, const=(1, 2), dt=F):
    x = (np.random.default_rng(seed).standard_normal(shape) + 0.25).astype(dt)
    node = h.make_node("Dropout", ["x", "r", "t"], ["y", "z"] if mask else ["y"], name="drop", seed=seed)
    ins = [x, np.array(ratio, F), np.array(train, np.bool_)]
    outs = run_node(provider, node, ins, opset=22, const_inputs=const)
    return x, outs


def _invariants(x, ratio, train, y, z):
    if not train or ratio == 0:
        assert np.array_equal(y, x) and (z is None or z.all())
        return
    scaled = x / (F(1) - F(ratio))
    kept = z if z is not None else (y != 0)
    assert np.array_equal(y[kept], scaled[kept])
    assert not np.any(y[~kept])


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=3).map(tuple),
       ratio=st.sampled_from([0.0, 0.1, 0.5, 0.75, 0.9]), train=st.booleans(), seed=st.integers(0, 2 ** 20),
       mask=st.booleans(), const=st.sampled_from([(1, 2), ()]))
def test_dropout_invariants(shape, ratio, train, seed, mask, const):
    """Constant or run-time ratio/training_mode (host): kept elements exactly x / (1 - ratio),
    dropped ones 0, the mask True exactly where kept; identity when not training or ratio 0."""
    x, outs = _dropout(shape, ratio, train, seed, mask, const=const)
    y = outs[0]
    z = outs[1] if mask else None
    assert y.shape == x.shape and y.dtype == x.dtype
    if mask:
        assert z.dtype == np.bool_ and z.shape == x.shape
    _invariants(x, ratio, train, y, z)


@pytest.mark.parametrize("ratio", [0.2, 0.5, 0.8])
def test_dropout_drop_fraction_and_seeds(ratio):
    shape = (64, 64)
    x, (y, z) = _dropout(shape, ratio, True, seed=11)
    n = z.size
    dropped = n - int(z.sum())
    sd = (n * ratio * (1 - ratio)) ** 0.5
    assert abs(dropped - n * ratio) < 5 * sd       # a binomial(n, ratio) count
    _, (y2, z2) = _dropout(shape, ratio, True, seed=11)
    assert np.array_equal(z, z2) and bits_equal(y, y2)   # seeded: reproducible
    _, (_, z3) = _dropout(shape, ratio, True, seed=12)
    assert not np.array_equal(z, z3)                  # another seed, another mask


@pytest.mark.parametrize("ratio,train,mask", [(0.5, True, True), (0.3, True, False), (0.0, True, True),
                                              (0.7, False, True)])
def test_dropout_cpu_and_cuda_bitwise(ratio, train, mask):
    x, c = _dropout((3, 4, 5), ratio, train, seed=3, mask=mask)
    _, g = _dropout((3, 4, 5), ratio, train, seed=3, mask=mask, provider=GPU)
    for a, b in zip(c, g):
        assert bits_equal(a, b)
    _invariants(x, ratio, train, c[0], c[1] if mask else None)


@pytest.mark.parametrize("ratio", [1.0, -0.1, 1.5])
@pytest.mark.parametrize("const", [(1, 2), ()])
def test_dropout_ratio_out_of_range_is_a_typed_error(ratio, const):
    with pytest.raises(HeteroExploreError, match="drop.*ratio.*outside \\[0, 1\\)"):
        _dropout((2, 3), ratio, True, const=const)


def test_dropout_ratio_out_of_range_is_fine_when_not_training():
    x, (y, z) = _dropout((2, 3), 1.0, False)
    assert np.array_equal(y, x) and z.all()


def test_dropout_run_time_flags_are_declined_on_device():
    node = h.make_node("Dropout", ["x", "r", "t"], ["y"], name="drop", seed=1)
    ins = [np.ones((2, 3), F), np.array(0.5, F), np.array(True)]
    m = supports(GPU, node, ins, opset=22)
    assert not m and "run time" in m.reason
    assert supports(GPU, node, ins, opset=22, const_inputs=(1, 2))
    assert supports(CPU, node, ins, opset=22)


def _dropout_model(mask=True):
    node = h.make_node("Dropout", ["x", "r", "t"], ["y", "z"] if mask else ["y"], seed=0)
    return h.make_model(h.make_graph([node], "g", [h.make_tensor_value_info(n, T.FLOAT, None) for n in "xrt"],
                                     [h.make_tensor_value_info("y", T.FLOAT, None)]))


def test_conformance_dropout_check_goes_red_on_wrong_outputs():
    m = _dropout_model()
    assert _is_random(m)
    x = np.arange(1, 13, dtype=F).reshape(3, 4)
    feeds = {"x": x, "r": np.array(0.5, F), "t": np.array(True)}
    z = (np.arange(12) % 3 == 0).reshape(3, 4)
    y = np.where(z, x / F(0.5), F(0))
    assert _check_dropout(m, feeds, {"y": y, "z": z}) is None
    assert "kept" in _check_dropout(m, feeds, {"y": np.where(z, x, F(0)), "z": z})
    assert "dropped" in _check_dropout(m, feeds, {"y": x / F(0.5), "z": z})
    ident = {"x": x, "r": np.array(0.0, F), "t": np.array(True)}
    assert _check_dropout(m, ident, {"y": x, "z": np.ones_like(z)}) is None
    assert "mask" in _check_dropout(m, ident, {"y": x, "z": z})
    assert "differs" in _check_dropout(m, ident, {"y": y, "z": np.ones_like(z)})
    plain = h.make_model(h.make_graph([h.make_node("Dropout", ["x"], ["y"])], "g",
                                      [h.make_tensor_value_info("x", T.FLOAT, None)],
                                      [h.make_tensor_value_info("y", T.FLOAT, None)]))
    assert not _is_random(plain)



_PTX_BODY = r'''
from hetero_explore.kernels import training
from hetero_explore.kernels.target import GENERATED
A = lambda dt: types.Array(dt, 1, "C")
f, i8, u8 = types.float32, types.int64, types.uint64
fa = A(f)
sigs = {
    "_train_adagrad_cuda": (fa, fa, fa, fa, A(i8), f, f, f, fa, fa),
    "_train_adam_cuda": (fa, fa, fa, fa, fa, A(i8), f, f, f, f, f, fa, fa, fa),
    "_train_momentum_cuda": (fa, fa, fa, fa, A(i8), f, f, f, i8, fa, fa),   # a double R adds one cvt
    "_train_bn_stats_cuda": (fa, fa, fa, f, i8, i8, i8, fa, fa, fa, fa),
    "_train_bn_y_cuda": (fa, fa, fa, fa, fa, f, i8, i8, fa),
    "_train_dropout_cuda": (fa, fa, A(types.boolean), i8, u8, f, i8),
}
res = {}
for name, sig in sigs.items():
    try:
        res[name] = stats(ptx(_retarget(GENERATED[name].py, "cuda"), sig))
    except Exception as e:
        res[name] = {"error": f"{type(e).__name__}: {str(e)[:800]}"}
print(json.dumps(res))
'''


@pytest.mark.slow
def test_training_kernels_compile_for_sm90_without_fma():
    """The CUDA kernels compile for a real GPU (sm_90 PTX) with no FMA, no approximate or
    flush-to-zero instructions; float64 only in the BatchNormalization statistics (documented
    float64 accumulation, IEEE on both targets)."""
    from ptx_tools import PRELUDE, run_script
    res = run_script(PRELUDE + _PTX_BODY)
    for name, s in res.items():
        assert "error" not in s, (name, s)
        assert s["fma"] == 0 and s["approx"] == 0 and s["ftz"] == 0, (name, s)
        if name != "_train_bn_stats_cuda":
            assert s["f64"] == 0, (name, s)
