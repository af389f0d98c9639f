"""What a control-flow body's iterations reuse (runner.RecyclingLedger, ir.buffers.BufferPool,
NodeRunner.bind's ``keyed`` replays): the buffers a body frees come back for the next buffers
of the same provider, shape and dtype, iteration after iteration and run after run; the nodes
given the same arrays again replay their recorded calls; the results stay what each node's
function gives (the same bits as onnxruntime on exact bodies, as a reference run), every
allocation is counted and freed, and a Loop carrying a growing sequence is specialised once
per element type, not once per length."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
import pytest

import hetero_explore as he
from hetero_explore.execution.executor import HeterogeneousExecutor
from hetero_explore.ir.buffers import BufferPool
from hetero_explore.providers import resolve
from hetero_explore.runner import core as rc
from hetero_explore.runner.core import Ledger, RecyclingLedger

import control_models as cm

F = np.float32


def test_recycling_ledger_hands_freed_buffers_out_again_and_frees_them_all():
    cpu = resolve("cpu")
    base = cpu.live_allocations
    pool = BufferPool()
    with RecyclingLedger([cpu], pool) as led:
        a = led.allocate(cpu, (4,), np.float32)
        arr = a.data
        led.free(a)
        b = led.allocate(cpu, (4,), np.dtype(np.float32))
        assert b is a and b.data is arr and led.live_bytes == 16     # the same buffer, live again
        c = led.allocate(cpu, (4,), np.float64)                       # another dtype: a new one
        assert c is not b and led.allocations == 3 and led.frees == 1
    led.check_leaks()
    assert cpu.live_allocations == base
    # the arrays went to the pool: the next ledger's first buffers are made from them, counted
    assert pool.nbytes == 16 + 32
    with RecyclingLedger([cpu], pool) as led2:
        d = led2.allocate(cpu, [4], np.float32)
        assert d.data is arr and cpu.live_allocations == base + 1 and pool.nbytes == 32
    led2.check_leaks()
    assert cpu.live_allocations == base


def test_read_only_object_and_view_buffers_are_not_kept():
    cpu = resolve("cpu")
    pool = BufferPool()
    with RecyclingLedger([cpu], pool) as led:
        ro = led.allocate(cpu, (3,), np.float32)
        ro.data.flags.writeable = False           # a staged constant
        led.free(ro)
        obj = led.allocate(cpu, (), object)       # a host value: reused in the run, not pooled after
        led.free(obj)
        assert list(led.spare) == [(cpu, (), np.dtype(object))]
        fresh = led.allocate(cpu, (3,), np.float32)
        assert fresh.data.flags.writeable
    assert pool.nbytes == 12                      # only the writeable float array
    assert BufferPool(max_array_bytes=8).give(cpu, np.zeros(4, F)) is None


def test_keyed_replays_record_once_per_array_set_and_stop_when_they_do_not_pay():
    calls = []

    def fn(ins, outs):
        calls.append(1)

    k = rc._Keyed(fn, [0], [0])
    a, b = np.zeros(3, F), np.zeros(3, F)
    for _ in range(3):
        k([a], [b])
    assert len(k.replays) == 1 and k.hits == 2 and k.misses == 1
    # new arrays at every call: it gives up after PATIENCE misses and calls fn
    for _ in range(rc._Keyed.PATIENCE + 2):
        k([np.zeros(3, F)], [np.zeros(3, F)])
    assert k.off and not k.replays
    big = rc._Keyed(fn, [0], [])
    big([np.zeros(rc._Keyed.MAX_BYTES + 1, np.uint8)], [])
    assert big.off


def _loop_kernel(ex, op="Loop"):
    return next(st.kernel for r in ex.parts for st in r.steps if st.node.op_type == op)


def _keyed(ex, kernel):
    out = []
    for body in kernel._cache.values():
        for progs in body._pool:
            for prog in progs:
                out += [it[1] for it in prog.nodes if isinstance(it[1], rc._Keyed)]
    return out


def test_a_loop_body_replays_on_recycled_buffers_with_the_results_of_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    m = cm.loop_over_tensor(n=7, d=3)
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    g = he.load_model(m)
    rng = np.random.default_rng(0)
    cpu = resolve("cpu")
    with HeterogeneousExecutor(he.plan(g, [cpu])) as ex:
        before = None
        for run in range(6):    # new values every run: the replays read them from the same arrays
            feeds = {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(F)
                     for i in m.graph.input}
            got = ex.run(feeds).outputs
            want = dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))
            for k_ in want:
                np.testing.assert_allclose(got[k_], want[k_], rtol=1e-6, atol=1e-6)
            ref = he.execute_reference(g, cpu, feeds).outputs
            for k_ in ref:
                assert np.array_equal(got[k_], ref[k_]), k_
            if before is None:    # after the first run: the body's executor holds its constants and arena
                before = cpu.live_allocations
        assert cpu.live_allocations == before
        keyed = _keyed(ex, _loop_kernel(ex))
        assert keyed and sum(k.hits for k in keyed) > sum(k.misses for k in keyed)


def test_counting_loop_is_exact_and_reuses_its_buffers():
    m = cm.counting_loop(50)
    g = he.load_model(m)
    with HeterogeneousExecutor(he.plan(g, ["cpu"])) as ex:
        for v in (0.0, 1.5, -3.0):
            x = np.full(4, v, F)
            got = ex.run({"x": x}).outputs
            want = x.copy()
            for _ in range(50):
                want = want + F(1)
            assert np.array_equal(got[g.outputs[0]], want)
        k = _loop_kernel(ex)
        assert k._pool.nbytes > 0                 # arrays kept for the next run
        keyed = _keyed(ex, k)
        assert sum(q.hits for q in keyed) >= 2 * 140


def test_a_loop_carrying_a_growing_sequence_is_specialised_per_element_type():
    from test_sequences import loop_with_sequence, reference
    m = loop_with_sequence(n=9)
    g = he.load_model(m)
    x = {"x": np.arange(2, dtype=F)}
    with HeterogeneousExecutor(he.plan(g, ["cpu"])) as ex:
        got = ex.run(x).outputs
        ex.run(x)
        k = _loop_kernel(ex)
        # the empty sequence (its declared type) and a sequence of float32[2], not one per length
        assert k.stats.specialisations == 2
    want = reference(m, x)
    assert np.array_equal(got["cat"], want["cat"])


def test_a_plain_ledger_still_runs_keyed_programs():
    """A keyed program run through a plain Ledger (new arrays every run) gives the same results."""
    m = cm.counting_loop(5)
    g = he.load_model(m)
    with HeterogeneousExecutor(he.plan(g, ["cpu"])) as ex:
        ex.run({"x": np.zeros(4, F)})
        k = _loop_kernel(ex)
        body = next(iter(k._cache.values()))
        env_names = body.graph.inputs
        cpu = resolve("cpu")
        with Ledger([cpu]) as led:
            env = {}
            for n in env_names:
                v = body.graph.values[n]
                env[n] = led.allocate(cpu, v.shape, v.dtype)
                env[n].data[...] = 1
            for _ in range(rc._Keyed.PATIENCE + 3):
                out = body.run_nested(env, led)
                vals = {n: b.data.copy() for n, b in out.items()}
                for b in out.values():
                    if b not in env.values():
                        led.free(b)
            assert any(np.array_equal(v, np.full(4, 2, F)) for v in vals.values())
        led.check_leaks()
