"""The static memory plan (arenas laid out by lifetime, prebuilt programs) and compile time
reported apart from run time."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import hetero_explore as he  # noqa: E402
from hetero_explore.data import models  # noqa: E402
from hetero_explore import providers as P  # noqa: E402
from hetero_explore.execution.executor import HeterogeneousExecutor, execute, execute_reference  # noqa: E402
from hetero_explore.execution.inputs import random_inputs  # noqa: E402
from hetero_explore.providers.base import Kernel  # noqa: E402
from hetero_explore.providers.cpu import NumbaCPUProvider  # noqa: E402
from hetero_explore.providers.cuda import cuda_status  # noqa: E402
from hetero_explore.runner.core import plan_offsets  # noqa: E402


# -- the layout ------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 500), st.integers(0, 30), st.integers(0, 10)), min_size=1, max_size=40),
       st.sampled_from([1, 64, 256]))
def test_values_live_at_the_same_time_never_share_bytes(specs, align):
    items = [(f"v{i}", n, a, a + d) for i, (n, a, d) in enumerate(specs)]
    offsets, total = plan_offsets(items, align)
    assert set(offsets) == {it[0] for it in items}
    size = {name: -(-n // align) * align for name, n, _, _ in items}
    for name, n, a, b in items:
        assert offsets[name] % align == 0 and offsets[name] + n <= total
    for i, (x, _, a1, b1) in enumerate(items):
        for y, _, a2, b2 in items[i + 1:]:
            if a1 <= b2 and a2 <= b1:   # live at once: disjoint bytes
                ox, oy = offsets[x], offsets[y]
                assert ox + size[x] <= oy or oy + size[y] <= ox, (x, y)
    # never worse than giving everything its own place, never better than the largest step
    assert total <= sum(size.values())
    steps = range(min(it[2] for it in items), max(it[3] for it in items) + 1)
    assert total >= max(sum(size[nm] for nm, _, a, b in items if a <= t <= b) for t in steps)


@pytest.mark.parametrize("layers", [4, 40])
def test_a_chain_reuses_two_slots_whatever_its_length(layers):
    g = he.load_model(models.chain("tiny", layers=layers))
    cpu = NumbaCPUProvider()
    with HeterogeneousExecutor(he.plan(g, [cpu])) as ex:
        (runner,) = ex.parts
        one = 2 * 8 * 4          # a 2x8 float32 value
        # every intermediate (2 per layer, minus the graph output) is in the arena ...
        assert len(runner.layout) == 2 * layers - 1
        # ... and a value only lives until its consumer ran: two slots are enough
        assert ex.arena_bytes == {"cpu:0": 2 * one}


# -- runs ------------------------------------------------------------------------------------
def test_a_warm_run_allocates_only_what_crosses_the_plan_and_matches_the_per_run_path():
    g = he.load_model(models.transformer("tiny"))
    feeds = random_inputs(g, seed=1)
    cpu = NumbaCPUProvider()
    with HeterogeneousExecutor(he.plan(g, [cpu])) as ex:
        (runner,) = ex.parts
        assert runner.layout, "the transformer's intermediates should be laid out"
        fast = ex.run(feeds)
        slow = ex.run(feeds, keep_intermediates=True)   # the same program, an arena of its own
        ref = execute_reference(g, P.cpu(), feeds)
        ref_inter = execute_reference(g, P.cpu(), feeds, keep_intermediates=True).intermediates
        for k in ref.outputs:
            assert fast.outputs[k].tobytes() == slow.outputs[k].tobytes() == ref.outputs[k].tobytes()
        # a warm run allocates the staged graph inputs and its outputs, nothing per node
        assert fast.allocations == len(g.inputs) + len(g.outputs) < len(g.nodes)
        assert slow.allocations == fast.allocations and slow.arena_allocations == 1
        assert fast.arena_allocations == 0 and fast.arena_bytes == slow.arena_bytes == ex.arena_bytes
        for name in runner.layout:   # every arena value copied out as the run went
            assert slow.intermediates[name].tobytes() == ref_inter[name].tobytes()


def test_peak_bytes_are_the_arena_plus_what_the_run_allocates():
    g = he.load_model(models.chain("tiny", layers=5))
    cpu = NumbaCPUProvider()
    feeds = random_inputs(g, seed=0)
    one = 2 * 8 * 4
    with HeterogeneousExecutor(he.plan(g, [cpu])) as ex:
        run = ex.run(feeds)
        # the staged input x (held until its partition ends) and the output y, plus the arena
        assert run.peak_bytes == {"cpu:0": ex.arena_bytes["cpu:0"] + 2 * one}
        assert "peak cpu:0: 256 B" in run.summary()
    # the one-shot execute allocates its arena through the run: the same peak, counted by its meter
    once = execute(he.plan(g, [cpu]), feeds)
    assert once.peak_bytes["cpu:0"] == run.peak_bytes["cpu:0"] + sum(
        g.initializer(n).nbytes for n in g.initializer_protos)
    assert once.arena_allocations == 1 and cpu.live_allocations == 0


def test_two_runs_outputs_are_independent_and_never_alias_the_arena():
    g = he.load_model(models.mlp("tiny"))
    cpu = NumbaCPUProvider()
    a_in, b_in = random_inputs(g, seed=1), random_inputs(g, seed=2)
    with HeterogeneousExecutor(he.plan(g, [cpu])) as ex:
        a = ex.run(a_in)
        a_bytes = {k: v.tobytes() for k, v in a.outputs.items()}
        b = ex.run(b_in)
        assert any(a.outputs[k].tobytes() != b.outputs[k].tobytes() for k in a.outputs)
        assert {k: v.tobytes() for k, v in a.outputs.items()} == a_bytes   # untouched by the 2nd run
        arenas = [buf.data for buf in ex._arenas]
        assert arenas
        for out in list(a.outputs.values()) + list(b.outputs.values()):
            assert all(not np.shares_memory(out, arena) for arena in arenas)
        b.outputs[next(iter(b.outputs))][...] = 0   # a caller writing into an output ...
        c = ex.run(a_in)
        assert {k: v.tobytes() for k, v in c.outputs.items()} == a_bytes   # ... changes no later run


def test_a_split_plan_shares_one_arena_per_provider_and_frees_everything():
    g = he.load_model(models.chain("tiny", layers=6))
    npu = P.VirtualProvider("npu", "npu:0", ["Add"], kernels=NumbaCPUProvider("npu-kernels"))
    cpu = P.cpu()
    plan = he.plan(g, [npu, cpu])
    feeds = random_inputs(g, seed=0)
    ref = execute_reference(g, P.cpu(), feeds)
    ex = HeterogeneousExecutor(plan)
    sizes = {}
    for part, runner in zip(plan.partitions, ex.parts):
        sizes[part.provider] = max(sizes.get(part.provider, 0), runner.arena_size)
    assert ex.arena_bytes == {str(p.device): n for p in (npu, cpu) if (n := sizes.get(p.name, 0))}
    assert ex.held_arenas == len(ex.arena_bytes)
    for _ in range(2):
        run = ex.run(feeds)
        assert run.outputs["y"].tobytes() == ref.outputs["y"].tobytes()
    ex.close()
    assert ex.held_arenas == 0 and npu.live_allocations == 0 and cpu.live_allocations == 0


@pytest.mark.skipif(not cuda_status()[0], reason="needs numba.cuda (the simulator or a GPU)")
def test_cuda_arena_views_give_the_cpu_bytes():
    g = he.load_model(models.mlp("tiny"))
    feeds = random_inputs(g, seed=3)
    gpu = P.cuda()
    with HeterogeneousExecutor(he.plan(g, [gpu])) as ex:
        assert ex.arena_bytes.get(str(gpu.device), 0) > 0
        run = ex.run(feeds)
        again = ex.run(feeds)
    ref = execute_reference(g, P.cpu(), feeds)
    for k in ref.outputs:
        assert run.outputs[k].tobytes() == again.outputs[k].tobytes() == ref.outputs[k].tobytes()
    assert gpu.live_allocations == 0


# -- compile time ----------------------------------------------------------------------------
def _fresh_jit_relu():
    """A Relu kernel compiled by numba on its first call (a new function: not in any cache)."""
    from numba import njit

    @njit(cache=False)
    def relu(x, y):
        for i in range(x.size):
            v = x.flat[i]
            y.flat[i] = v if v > 0 else np.float32(0)

    return relu


class _FreshKernels(P.VirtualProvider):
    def get_kernel(self, ctx):
        k = super().get_kernel(ctx)
        if ctx.node.op_type != "Relu":
            return k
        relu = _fresh_jit_relu()
        return Kernel(ctx, lambda ins, outs: relu(ins[0], outs[0]))


def test_compile_time_is_reported_apart_from_run_time_with_progress():
    g = he.load_model(models.chain("tiny", layers=2))
    npu = _FreshKernels("npu", "npu:0", ["Relu", "Add"], kernels=NumbaCPUProvider("k"))
    feeds = random_inputs(g, seed=0)
    ref = execute_reference(g, P.cpu(), feeds)
    seen = []
    with HeterogeneousExecutor(he.plan(g, [npu])) as ex:
        first = ex.run(feeds, progress=seen.append)
        second = ex.run(feeds, progress=seen.append)
    assert first.outputs["y"].tobytes() == second.outputs["y"].tobytes() == ref.outputs["y"].tobytes()
    assert first.compile_seconds > 0 and second.compile_seconds == 0
    assert seen and seen[0] == f"compiling kernels (1/{len(g.nodes)})"
    (part,) = [e for e in first.events if e.kind == "partition"]
    assert part.compile_s == pytest.approx(first.compile_seconds)
    assert part.seconds >= 0 and part.seconds + part.compile_s <= first.wall_seconds + first.compile_seconds + 1e-6
    # compilation is not run time: the first run's wall time excludes it
    assert first.wall_seconds < first.compile_seconds
    df = first.timings_df()
    assert "compile_s" in df.columns and df.loc[df.event == "partition", "compile_s"].sum() > 0
    assert "compiling kernels" in first.summary()


def test_the_cli_prints_compile_progress_on_stderr(capsys, tmp_path, monkeypatch):
    """``report --execute`` passes a progress callback to both runs and prints one line per run
    that compiled (the compile itself: a kernel numba has not seen, as above)."""
    import onnx

    from hetero_explore.execution import executor
    from hetero_explore.cli.main import main

    path = tmp_path / "chain.onnx"
    onnx.save(models.chain("tiny", layers=2), str(path))
    real = executor.HeterogeneousExecutor.run
    calls = []

    def run_with_a_cold_kernel(self, inputs, **kw):
        if self.kind != "heterogeneous" or "progress" not in kw:   # the reference, or a warm run
            return real(self, inputs, **kw)
        calls.append(kw)
        relu = _fresh_jit_relu()
        kw["progress"]("compiling kernels (1/4)")   # what the executor's listener says ...
        relu(np.zeros(2, np.float32), np.zeros(2, np.float32))   # ... when numba compiles
        run = real(self, inputs, **kw)
        run.compile_seconds = 0.5
        return run

    monkeypatch.setattr(executor.HeterogeneousExecutor, "run", run_with_a_cold_kernel)
    rc = main(["report", str(path), "-o", str(tmp_path / "r.html"), "--execute", "--providers", "cpu"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert calls and callable(calls[0]["progress"])
    assert "heterogeneous run: compiling kernels (1/4), 0.5 s (not counted as run time)" in err
    assert "cpu reference: compiling" not in err    # the reference compiled nothing: no line


def test_four_threads_through_one_executor_share_its_arena_safely():
    """Runs that overlap in time cannot share the held arena set: the one that finds it taken
    allocates its own through its ledger. Every run is byte-identical to a lone run, its peak
    is the lone run's, and the counters come back."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    g = he.load_model(models.transformer("tiny"))
    cpu = NumbaCPUProvider()
    feeds = [random_inputs(g, seed=s) for s in range(4)]
    with HeterogeneousExecutor(he.plan(g, [cpu])) as ex:
        assert ex.arena_bytes
        lone = [ex.run(f) for f in feeds]
        built = (cpu.live_allocations, cpu.live_bytes)
        barrier = threading.Barrier(4)

        def worker(i):
            barrier.wait()
            return [((i + r) % 4, ex.run(feeds[(i + r) % 4])) for r in range(6)]

        with ThreadPoolExecutor(4) as pool:
            runs = [x for f in [pool.submit(worker, i) for i in range(4)] for x in f.result()]
        assert (cpu.live_allocations, cpu.live_bytes) == built
        for k, run in runs:
            for name, ref in lone[k].outputs.items():
                assert run.outputs[name].tobytes() == ref.tobytes()
            assert run.peak_bytes == lone[k].peak_bytes
            assert run.allocations == lone[k].allocations
            assert run.arena_allocations in (0, len(ex.arena_bytes))
    assert cpu.live_allocations == 0 and cpu.live_bytes == 0


def test_a_run_that_finds_the_held_arenas_in_use_allocates_its_own():
    import threading

    g = he.load_model(models.chain("tiny", layers=3))
    midway, resume = threading.Event(), threading.Event()

    class Pausing(P.VirtualProvider):
        def get_kernel(self, ctx):
            k = super().get_kernel(ctx)
            if ctx.node.op_type != "Relu":
                return k

            def fn(ins, outs):
                if threading.current_thread().name == "pausing":
                    midway.set()
                    assert resume.wait(30)
                k._fn(ins, outs)
            return Kernel(ctx, fn)

    npu = Pausing("npu", "npu:0", ["Relu", "Add"], kernels=NumbaCPUProvider("k"))
    feeds = random_inputs(g, seed=0)
    with HeterogeneousExecutor(he.plan(g, [npu])) as ex:
        lone = ex.run(feeds)
        built = npu.live_allocations
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("run", ex.run(feeds)), name="pausing")
        t.start()
        assert midway.wait(30)          # the paused run holds the executor's arena set
        busy = ex.run(feeds)
        assert npu.live_allocations == built + 1   # the paused run holds its staged input, nothing else
        resume.set()
        t.join(30)
        assert busy.arena_allocations == 1 and out["run"].arena_allocations == 0
        for r in (busy, out["run"]):
            assert r.outputs["y"].tobytes() == lone.outputs["y"].tobytes()
            assert r.peak_bytes == lone.peak_bytes and r.allocations == lone.allocations
        assert npu.live_allocations == built
    assert npu.live_allocations == 0
