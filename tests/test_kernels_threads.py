"""Results do not depend on the number of threads.

The CPU fast paths run independent output blocks in parallel (``prange`` over
Conv output planes and MatMul batches); each output element is still computed
by one iteration with one fixed sequence of float32 operations. Here the heavy
ops run with ``numba.set_num_threads(1)`` and ``(2)`` (and the machine's
maximum) and must agree bit for bit, with shapes that give every thread work;
small cases of the same ops also run on the CUDA simulator, bitwise equal to
the CPU (the CUDA kernel is the generated per-element statement).
"""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numba
import numpy as np
import pytest
from onnx import helper

from hetero_explore.providers.cpu import NumbaCPUProvider
from hetero_explore.providers.cuda import NumbaCUDAProvider

from support.harness import run_node

F = np.float32
CPU = NumbaCPUProvider()
GPU = NumbaCUDAProvider()
MAX_THREADS = numba.config.NUMBA_NUM_THREADS


def canon(a):
    a = np.ascontiguousarray(a)
    if a.dtype.kind == "f":
        a = np.where(np.isnan(a), np.float32(np.nan), a).astype(a.dtype)
    return a.view(np.uint8)


def rnd(rng, *shape):
    return rng.standard_normal(shape).astype(F)


def _cases(rng, small=False):
    """(op, inputs, const_inputs, opset, attrs); ``small``: shapes fit for the CUDA simulator."""
    # large shapes: above cpu_fast.base.PAR_WORK multiply-adds, so that the parallel loops run
    s = 1 if small else 4
    C = 3 if small else 32
    H = 5 if small else 40
    yield "Conv", [rnd(rng, 1, C, H, H), rnd(rng, 2 * C, C, 3, 3), rnd(rng, 2 * C)], (1, 2), 17, dict(pads=[1] * 4)
    yield "Conv", [rnd(rng, 1, C, H, H), rnd(rng, C, 1, 3, 3), rnd(rng, C)], (1, 2), 17, dict(pads=[1] * 4,
                                                                                             group=C)
    yield "Conv", [rnd(rng, 2, C, H, H), rnd(rng, C, 1, 5, 5)], (1,), 17, dict(pads=[2] * 4, strides=[2, 2],
                                                                              group=C)
    # depthwise with channel multiplier 2, dilation and bias (cpu_fast.conv_packed._conv_dw8, chunks of
    # 8-channel blocks)
    yield "Conv", [rnd(rng, 1, C, H, H), rnd(rng, 2 * C, 1, 3, 3), rnd(rng, 2 * C)], (1, 2), 17, dict(
        pads=[2] * 4, dilations=[2, 2], group=C)
    yield "Conv", [rnd(rng, 1, 3, 2 * H, 2 * H), rnd(rng, 8, 3, 7, 7)], (1,), 17, dict(pads=[3] * 4,
                                                                                      strides=[2, 2])
    # the pixel-tile indirect GEMM (cpu_fast.conv_packed._conv_px), grouped (more than 4 outputs per group),
    # stride 2, batch 2; and 1x1 Conv on a 1x1 map (cpu_fast.conv_packed._conv_gemvt, blocks of 64 channels)
    yield "Conv", [rnd(rng, 2, 2 * C, H, H), rnd(rng, 4 * C, C, 3, 3), rnd(rng, 4 * C)], (1, 2), 17, dict(
        pads=[1] * 4, strides=[2, 2], group=2)
    yield "Conv", [rnd(rng, 1, 24 * C, 1, 1), rnd(rng, 16 * C + 3, 24 * C, 1, 1), rnd(rng, 16 * C + 3)], (1, 2), \
        17, {}
    # pointwise 1x1 (cpu_fast.conv_packed._conv_pw: items of 48 output channels x 256 pixels, the last 6-row
    # block and 16-pixel panel overlapping) and the pixel-tile path on a strided 1x1 (_conv_px)
    yield "Conv", [rnd(rng, 1, 2 * C, H, H), rnd(rng, 2 * C + 6, 2 * C, 1, 1), rnd(rng, 2 * C + 6)], (1, 2), 17, {}
    yield "Conv", [rnd(rng, 2, 2 * C, H, H), rnd(rng, 16 * C + 3, 2 * C, 1, 1)], (1,), 17, dict(strides=[2, 2])
    yield "MatMul", [rnd(rng, 2, 2 * s, 16 * s, 8 * s), rnd(rng, 2, 2 * s, 8 * s, 16 * s)], (), 17, {}
    yield "MatMul", [rnd(rng, 3, 16 * s, 32 * s), rnd(rng, 32 * s, 16 * s)], (1,), 17, {}
    yield "Gemm", [rnd(rng, 8 * s, 16 * s), rnd(rng, 8 * s, 16 * s), rnd(rng, 8 * s)], (1, 2), 17, dict(transB=1)
    # unbatched products in parallel blocks of rows x columns (cpu_fast.gemm._mm_blocks_par)
    yield "Gemm", [rnd(rng, 25 * s, 16 * s), rnd(rng, 70 * s, 16 * s), rnd(rng, 70 * s)], (1, 2), 17, dict(transB=1)
    yield "MatMul", [rnd(rng, 25 * s, 16 * s), rnd(rng, 16 * s, 70 * s)], (), 17, {}
    # a constant B packed once, panels in parallel (cpu_fast.gemm.mm_packed_cpu), MatMul and Gemm
    yield "MatMul", [rnd(rng, 1, 9 * s, 16 * s), rnd(rng, 16 * s, 70 * s + 3)], (1,), 17, {}
    yield "Gemm", [rnd(rng, 9 * s, 16 * s), rnd(rng, 70 * s + 3, 16 * s), rnd(rng, 70 * s + 3)], (1, 2), 17, dict(
        transB=1)
    # one row times a constant B: groups of panels in parallel (cpu_fast.gemm._mm_packed_rows_par)
    yield "MatMul", [rnd(rng, 1, 64 * s), rnd(rng, 64 * s, 260 * s + 5)], (1,), 17, {}
    yield "Softmax", [rnd(rng, 2, 4 * s, 8 * s) * F(8)], (), 17, dict(axis=-1)
    # over the last axis in parallel blocks of rows (cpu_fast.rows._softmax_last_par), a row tail
    yield "Softmax", [rnd(rng, 2, 8 * s, 32 * s + 1) * F(8)], (), 17, dict(axis=-1)
    yield "LogSoftmax", [rnd(rng, 1, 3, 17 * s, 16 * s) * F(8)], (), 17, dict(axis=-1)
    yield "LayerNormalization", [rnd(rng, 2, 4 * s, 8 * s), rnd(rng, 8 * s), rnd(rng, 8 * s)], (1, 2), 17, {}
    # blocks of rows in parallel (cpu_fast.rows._ln_groups_par), the last block short
    yield "LayerNormalization", [rnd(rng, 1, H + 1, H, C + 8), rnd(rng, C + 8), rnd(rng, C + 8)], (1, 2), 17, {}
    yield "ReduceMean", [rnd(rng, 2, 4 * s, 8 * s), np.array([-1], np.int64)], (1,), 18, {}
    yield "ReduceSum", [rnd(rng, 2, 4 * s, 8 * s), np.array([1], np.int64)], (1,), 18, {}
    yield "MaxPool", [rnd(rng, 1, C, H, H)], (), 17, dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)
    # elementwise transcendental ops in parallel blocks (cpu_fast.elementwise), some elements outside the
    # near forms' ranges (Sigmoid: |x| > 64; Erf: |x| >= 1.25)
    yield "Sigmoid", [rnd(rng, 1, C, H, H) * F(30)], (), 17, {}
    yield "Erf", [rnd(rng, 1, C, H, H) * F(0.7)], (), 17, {}
    yield "Relu", [rnd(rng, 1, 4 * C, H, H)], (), 17, {}
    yield "Tanh", [rnd(rng, 1, C, H, H)], (), 17, {}
    # binary ops in parallel blocks of elements or of outer rows (a channel scale)
    yield "Mul", [rnd(rng, 1, 2 * C, H, H), rnd(rng, 1, 2 * C, H, H)], (), 17, {}
    yield "Div", [rnd(rng, 1, 2 * C, H, H), rnd(rng, 1, 2 * C, 1, 1)], (), 17, {}
    yield "AveragePool", [rnd(rng, 1, C, H, H)], (), 17, dict(kernel_shape=[3, 3], pads=[1] * 4)


def _run(provider, op, inputs, const, opset, attrs):
    node = helper.make_node(op, [f"x{i}" for i in range(len(inputs))], ["y"], name=f"{op}_threads", **attrs)
    return run_node(provider, node, inputs, opset=opset, const_inputs=const)[0]


@pytest.fixture
def restore_threads():
    n = numba.get_num_threads()
    yield
    numba.set_num_threads(n)


def test_thread_cases_are_large_enough_to_run_in_parallel():
    from hetero_explore.kernels.cpu_fast.base import PAR_WORK
    def conv_macs(i, at):
        k, st, pd = i[1].shape[2], at.get("strides", [1, 1])[0], at.get("pads", [0] * 4)[0]
        o = (i[0].shape[2] + 2 * pd - k) // st + 1
        return np.prod(i[1].shape) * i[0].shape[0] * o * o

    macs = {"Conv": conv_macs,
            "MatMul": lambda i, at: (np.prod(np.broadcast_shapes(i[0].shape[:-2], i[1].shape[:-2]))
                                     * i[0].shape[-2] * i[0].shape[-1] * i[1].shape[-1])}
    for op, inputs, _, _, attrs in _cases(np.random.default_rng(0)):
        if op in macs:
            assert macs[op](inputs, attrs) >= PAR_WORK, (op, [a.shape for a in inputs])
    # the last-axis Softmax cases: more than one block of rows, enough elements to go parallel
    from hetero_explore.kernels.cpu_fast.rows import _SM_PAR, _SM_ROWS
    sm = [i[0].shape for op, i, _, _, at in _cases(np.random.default_rng(0))
          if op.endswith("Softmax") and at.get("axis") == -1 and i[0].size >= _SM_PAR]
    assert len(sm) >= 2 and all(np.prod(s[:-1]) > _SM_ROWS for s in sm), sm
    # the elementwise ops of cpu_fast.elementwise: enough elements for several parallel blocks
    from hetero_explore.kernels.cpu_fast.elementwise import _BIN_BLOCK, _BIN_PAR, _UN_BLOCK, _UN_PAR
    un = [i[0].size for op, i, _, _, _ in _cases(np.random.default_rng(0)) if op in ("Sigmoid", "Erf")]
    assert len(un) == 2 and all(n >= _UN_PAR and n > 2 * _UN_BLOCK for n in un), un
    from hetero_explore.kernels.cpu_fast.rows import _LN_PAR, _LN_ROWS
    ln = [i[0].shape for op, i, _, _, _ in _cases(np.random.default_rng(0)) if op == "LayerNormalization"]
    assert any(np.prod(s) >= _LN_PAR and np.prod(s[:-1]) > 2 * _LN_ROWS and np.prod(s[:-1]) % _LN_ROWS for s in ln), ln
    from hetero_explore.kernels.cpu_fast.elementwise import _UN_OPS
    for op, i, _, _, _ in _cases(np.random.default_rng(0)):
        if op + "_f32" in _UN_OPS:
            assert i[0].size >= _UN_OPS[op + "_f32"][1] and i[0].size > 2 * _UN_BLOCK, (op, i[0].shape)
    bi = [i[0].size for op, i, _, _, _ in _cases(np.random.default_rng(0)) if op in ("Mul", "Div")]
    assert len(bi) == 2 and all(n >= _BIN_PAR and n > 2 * _BIN_BLOCK for n in bi), bi


def test_results_identical_for_any_thread_count(restore_threads):
    if MAX_THREADS < 2:
        pytest.skip("numba has one thread here (NUMBA_NUM_THREADS=1): nothing to compare")
    counts = sorted({1, 2, MAX_THREADS})
    for case in _cases(np.random.default_rng(0)):
        got = []
        for t in counts:
            numba.set_num_threads(t)
            got.append(_run(CPU, *case))
        for t, g in zip(counts[1:], got[1:]):
            assert np.array_equal(canon(got[0]), canon(g)), f"{case[0]} {case[4]}: 1 vs {t} threads differ"


def test_threaded_cpu_equals_cuda_simulator(restore_threads):
    numba.set_num_threads(MAX_THREADS)
    for case in _cases(np.random.default_rng(1), small=True):
        c = _run(CPU, *case)
        g = _run(GPU, *case)
        assert c.shape == g.shape and np.array_equal(canon(c), canon(g)), f"{case[0]} {case[4]}: CPU vs CUDA"


def test_cpu_kernels_release_the_gil():
    """Every CPU kernel (generated and fast path) is compiled with nogil=True, so that a run
    in a worker thread (the app's Execute) leaves the interpreter's other threads running."""
    from hetero_explore.kernels import overrides, registry
    from hetero_explore.kernels.target import GENERATED
    registry.registry()
    cpu = [k for name, k in GENERATED.items() if name.endswith("_cpu")]
    assert len(cpu) > 50
    fast = [overrides.rule(key, "cpu").run for key in ("mm", "conv", "pool", "softmax", "ln")]
    for k in cpu + fast:
        assert k.compiled.targetoptions.get("nogil") is True, k


def test_tree_walk_rows_identical_for_any_thread_count(restore_threads):
    """The compiled tree ensemble walk (kernels.forest) runs blocks of rows in parallel above
    PAR_ROWS_WORK rows x trees; the sums do not depend on the thread count."""
    from hetero_explore.kernels import forest
    from test_kernels_ml import _random_forest
    rng = np.random.default_rng(2)
    f = _random_forest(rng, n_trees=40, depth=5)
    x = rng.standard_normal((forest.PAR_ROWS_WORK // 40 + 50, 5)).astype(F)
    flat = forest.FlatForest(f.feat, f.thr, f.mode, f.tnext, f.fnext, f.miss, f.roots, f.leafw)
    got = []
    for t in sorted({1, 2, MAX_THREADS}):
        numba.set_num_threads(t)
        s, bad = flat.sum(x)
        lv, bad2 = flat.leaves(x)
        assert bad == bad2 == -1
        got.append((canon(s), lv))
    assert all(np.array_equal(g[0], got[0][0]) and np.array_equal(g[1], got[0][1]) for g in got[1:])


@pytest.mark.parametrize("rows", [16, 24, 64, 600])
def test_packed_tree_walk_identical_for_any_thread_count(restore_threads, rows):
    """The packed tree walk (kernels.forest) splits the rows among the threads, or with few rows
    per thread the trees (the leaves first, then each row's sum over the trees in order): the
    sums and leaves do not depend on the thread count, and are the generic walk's."""
    from hetero_explore.kernels import forest
    from test_kernels_ml import _random_forest
    rng = np.random.default_rng(5)
    f = _random_forest(rng, n_trees=300, depth=7, modes=4, p_leaf=0.1)
    x = rng.standard_normal((rows, 5)).astype(F)
    x[rng.random(x.shape) < 0.05] = np.nan
    flat = forest.FlatForest(f.feat, f.thr, f.mode, f.tnext, f.fnext, f.miss, f.roots, f.leafw)
    assert flat.packed and rows * flat.steps >= forest.PAR_STEPS
    generic = forest.FlatForest(f.feat, f.thr, f.mode, f.tnext, f.fnext, f.miss, f.roots, f.leafw)
    generic.packed = False
    numba.set_num_threads(1)
    want = (canon(generic.sum(x)[0]), generic.leaves(x)[0])
    for t in sorted({1, 2, MAX_THREADS}):
        numba.set_num_threads(t)
        s, bad = flat.sum(x)
        lv, bad2 = flat.leaves(x)
        assert bad == bad2 == -1
        assert np.array_equal(canon(s), want[0]) and np.array_equal(lv, want[1]), t


@pytest.mark.parametrize("kind", ["RBF", "POLY"])
def test_svm_rows_identical_for_any_thread_count(restore_threads, kind):
    """kernels.mlrows runs an SVM's blocks of rows in parallel (svc_rows_par, svr_rows_par): the
    scores, votes and regressions are the sequential loops' bits at any thread count."""
    from hetero_explore.kernels import mlrows
    rng = np.random.default_rng(6)
    x = rnd(rng, 3 * mlrows._BLOCK + 5, 7)
    sv = rnd(rng, 23, 7)
    vpc = np.array([8, 7, 8], np.int64)
    start = np.array([0, 8, 15], np.int64)
    coefs, rho = rnd(rng, 2, 23), rnd(rng, 3)
    args = (x, sv, mlrows.KERNELS[kind], F(0.2), F(0.5), 3)
    want = mlrows.svc_rows(*args, coefs, rho, start, vpc) + (mlrows.svr_rows(*args, coefs[0], rho[0]),)
    for t in sorted({1, 2, MAX_THREADS}):
        numba.set_num_threads(t)
        assert mlrows.svm_parallel(x.shape[0]) == (t > 1)
        got = mlrows.svc_rows_par(*args, coefs, rho, start, vpc) + (mlrows.svr_rows_par(*args, coefs[0], rho[0]),)
        assert all(np.array_equal(canon(g), canon(w)) for g, w in zip(got, want)), t


def test_parallel_kernels_run_on_tbb_when_it_is_installed():
    """With the tbb wheel installed (a dependency), kernels.target loads its library so that numba's
    TBB layer runs the parallel loops (the calling thread takes the blocks no worker took)."""
    import importlib.metadata as md
    try:
        md.version("tbb")
    except md.PackageNotFoundError:
        pytest.skip("the tbb package is not installed: numba uses OpenMP or its workqueue")
    if os.environ.get("NUMBA_THREADING_LAYER", "default") != "default":
        pytest.skip("NUMBA_THREADING_LAYER chooses the layer here")
    from hetero_explore.kernels import target
    _run(CPU, *next(iter(_cases(np.random.default_rng(0)))))
    assert target.TBB and numba.threading_layer() == "tbb"
