"""The node runner (hetero_explore.runner.core): shapes are checked, not trusted; an
output-shape function can plug in; runs in several threads at once keep their own
ledgers, meters and results."""

import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import threading  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import hetero_explore as he  # noqa: E402
from hetero_explore.data import models  # noqa: E402
from hetero_explore import providers as P  # noqa: E402
from hetero_explore.ir.errors import ExecutionError, KernelError  # noqa: E402
from hetero_explore.execution.executor import AllocationLeak, HeterogeneousExecutor, execute  # noqa: E402
from hetero_explore.execution.inputs import random_inputs  # noqa: E402
from hetero_explore.providers.base import Kernel  # noqa: E402
from hetero_explore.providers.cpu import NumbaCPUProvider  # noqa: E402
from hetero_explore.runner.core import Ledger, NodeExecutionError, NodeRunner, ShapeMismatchError  # noqa: E402
from hetero_explore.execution.runtime import run_graph  # noqa: E402


def _graph():
    """x(2,3) -> Add(w) -> a -> Relu -> y"""
    nodes = [helper.make_node("Add", ["x", "w"], ["a"], name="add"),
             helper.make_node("Relu", ["a"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                          initializer=[numpy_helper.from_array(np.ones((2, 3), np.float32), "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return he.load_model(m)


def _env(ledger, cpu, graph, **arrays):
    env = {}
    for name, a in arrays.items():
        env[name] = ledger.allocate(cpu, a.shape, a.dtype)
        cpu.copy_from_host(a, env[name])
    env.setdefault("w", ledger.allocate(cpu, (2, 3), np.float32))
    cpu.copy_from_host(graph.initializer("w"), env["w"])
    return env


def _program(runner, ledger, provider):
    """A one-shot program of ``runner``, its arena (if any) allocated through ``ledger``."""
    arena = ledger.allocate(provider, (runner.arena_size,), np.uint8) if runner.arena_size else None
    return runner.bind(arena, record=False)


def test_a_runner_runs_only_programs():
    graph, cpu = _graph(), NumbaCPUProvider()
    with Ledger([cpu]) as ledger, pytest.raises(ExecutionError, match="runs a bound program"):
        NodeRunner.for_graph(graph, cpu).run(_env(ledger, cpu, graph, x=np.zeros((2, 3), np.float32)), ledger)


def test_runner_runs_a_graph_and_frees_what_it_produced():
    graph, cpu = _graph(), NumbaCPUProvider()
    runner = NodeRunner.for_graph(graph, cpu)
    assert [st.node.op_type for st in runner.steps] == ["Add", "Relu"]
    assert runner.steps[0].free == ("a",) or runner.steps[1].free == ("a",)
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 3
    assert set(runner.layout) == {"a"}   # the intermediate lives in the memory plan's arena
    with Ledger([cpu]) as ledger:
        out = runner.run(_env(ledger, cpu, graph, x=x), ledger, program=_program(runner, ledger, cpu))
        got = cpu.copy_to_host(out["y"])
        assert ledger.allocations == 4 and ledger.frees == 0  # x, w, the arena, y
    assert ledger.leaks() == [] and cpu.live_allocations == 0
    np.testing.assert_array_equal(got, np.maximum(x + 1, 0))


@pytest.mark.parametrize("bad, needle", [
    (np.zeros((3, 2), np.float32), "float32 (3, 2), but the kernel was built for float32 (2, 3)"),
    (np.zeros((2, 3), np.float64), "float64 (2, 3), but the kernel was built for float32 (2, 3)"),
], ids=["shape", "dtype"])
def test_an_input_that_differs_from_the_plan_is_named_not_trusted(bad, needle):
    graph, cpu = _graph(), NumbaCPUProvider()
    runner = NodeRunner.for_graph(graph, cpu, partition=3)
    with Ledger([cpu]) as ledger:
        env = _env(ledger, cpu, graph, x=bad)
        prog = _program(runner, ledger, cpu)
        with pytest.raises(ShapeMismatchError) as e:
            runner.run(env, ledger, program=prog)
    err = e.value
    assert isinstance(err, ExecutionError) and isinstance(err, NodeExecutionError)
    assert (err.node, err.op_type, err.value, err.partition, err.provider) == ("add", "Add", "x", 3, "cpu")
    assert err.planned == ((2, 3), np.dtype(np.float32)) and err.actual == (bad.shape, bad.dtype)
    assert needle in str(err) and "input 'x'" in str(err) and "node 'add' (Add)" in str(err)
    assert ledger.allocations == 3  # x, w, the arena: nothing for the node, it never ran
    assert cpu.live_allocations == 0


def test_an_output_shape_function_plugs_in_and_is_checked_against_the_plan():
    graph, cpu = _graph(), NumbaCPUProvider()
    seen = []

    def infer(ctx, arrays):
        seen.append((ctx.node.op_type, [None if a is None else a.shape for a in arrays]))
        return [arrays[0].shape]  # elementwise: the first input's shape

    x = np.zeros((2, 3), np.float32)
    runner = NodeRunner.for_graph(graph, cpu, infer_shapes=infer)
    with Ledger([cpu]) as ledger:
        runner.run(_env(ledger, cpu, graph, x=x), ledger, program=_program(runner, ledger, cpu))
    assert seen == [("Add", [(2, 3), (2, 3)]), ("Relu", [(2, 3)])]

    def wrong(ctx, arrays):
        return [(6,)] if ctx.node.op_type == "Relu" else None  # None: no opinion

    runner = NodeRunner.for_graph(graph, cpu, infer_shapes=wrong)
    with Ledger([cpu]) as ledger:
        with pytest.raises(ShapeMismatchError, match=r"output 'y' as float32 \(6,\), but the kernel was built "
                                                     r"for float32 \(2, 3\)") as e:
            runner.run(_env(ledger, cpu, graph, x=x), ledger, program=_program(runner, ledger, cpu))
    assert e.value.node == "relu" and e.value.value == "y"
    assert cpu.live_allocations == 0

    # a kernel's own infer_shapes takes precedence over the runner's
    class Inferring(NumbaCPUProvider):
        def get_kernel(self, ctx):
            k = super().get_kernel(ctx)
            k.infer_shapes = lambda ctx, arrays: [(1, 6)]
            return k

    inferring = Inferring()
    runner = NodeRunner.for_graph(graph, inferring, infer_shapes=infer)
    with Ledger([inferring]) as ledger:
        with pytest.raises(ShapeMismatchError, match="output 'a'"):
            runner.run(_env(ledger, inferring, graph, x=x), ledger, program=_program(runner, ledger, inferring))


def test_every_kernel_is_built_before_anything_runs():
    graph = _graph()
    with pytest.raises(KernelError, match="masked off"):
        NodeRunner.for_graph(graph, P.mask(NumbaCPUProvider(), deny=["Relu"]))


def test_run_graph_reports_a_kernel_that_keeps_an_allocation():
    graph = _graph()

    class Hoarding(NumbaCPUProvider):
        def get_kernel(self, ctx):
            k = super().get_kernel(ctx)
            if ctx.node.op_type != "Relu":
                return k

            def fn(ins, outs):
                hoard.append(self.allocate((2,), np.float32))
                k._fn(ins, outs)
            return Kernel(ctx, fn)

    hoard = []
    p = Hoarding()
    with pytest.raises(AllocationLeak, match=r"'cpu': \+1 allocation"):
        run_graph(graph, p, {"x": np.zeros((2, 3), np.float32)})
    assert p.live_allocations == 1 == len(hoard)


# -- threads -------------------------------------------------------------------------
def _split_plan():
    """The Add/Relu chain alternating between a virtual npu and the CPU (many boundaries)."""
    g = he.load_model(models.chain("tiny", layers=6))
    npu = P.VirtualProvider("npu", "npu:0", ["Add"], kernels=NumbaCPUProvider("npu-kernels"))
    cpu = P.cpu()
    return he.plan(g, [npu, cpu]), npu, cpu


def _in_threads(fn, n_threads, runs):
    barrier = threading.Barrier(n_threads)

    def worker(i):
        barrier.wait()
        return [fn(i, r) for r in range(runs)]

    with ThreadPoolExecutor(n_threads) as pool:
        return [f.result() for f in [pool.submit(worker, i) for i in range(n_threads)]]


@pytest.mark.parametrize("entry", ["executor", "execute"])
def test_four_threads_running_one_plan_are_byte_identical_and_leave_the_counters(entry):
    plan, npu, cpu = _split_plan()
    assert len(plan.partitions) > 4
    feeds = [random_inputs(plan.graph, seed=s) for s in range(4)]
    with HeterogeneousExecutor(plan) as ex:
        single = [ex.run(f) for f in feeds]
        start = (npu.live_allocations, cpu.live_allocations, npu.live_bytes, cpu.live_bytes)
        totals = (npu.total_allocations, cpu.total_allocations)

        def one(i, r):
            f = feeds[(i + r) % 4]
            run = ex.run(f) if entry == "executor" else execute(plan, f)
            return (i + r) % 4, run

        results = _in_threads(one, 4, 12)
        assert (npu.live_allocations, cpu.live_allocations, npu.live_bytes, cpu.live_bytes) == start
    assert npu.live_allocations == 0 and cpu.live_allocations == 0
    one_run = single[0].allocations if entry == "executor" else execute(plan, feeds[0]).allocations
    runs = [r for per_thread in results for r in per_thread]
    assert len(runs) == 48
    # every run allocated what a lone run allocates, and the providers saw exactly that many
    assert all(run.allocations == one_run for _, run in runs)
    assert (npu.total_allocations + cpu.total_allocations - sum(totals)
            >= 48 * one_run)
    for k, run in runs:
        ref = single[k]
        assert list(run.outputs) == list(ref.outputs)
        for name in ref.outputs:
            assert run.outputs[name].tobytes() == ref.outputs[name].tobytes()
        if entry == "executor":  # the run's own peak, not its neighbours'
            assert run.peak_bytes == ref.peak_bytes


def test_another_threads_allocation_is_not_the_runs_leak():
    """Another thread allocates (and keeps) a buffer on a provider while a run on it is
    midway: that is not the run's leak."""
    g = he.load_model(models.chain("tiny", layers=2))
    midway, resume = threading.Event(), threading.Event()
    hoard = []

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

    npu = Pausing("npu", "npu:0", ["Relu"], kernels=NumbaCPUProvider("k"))
    plan = he.plan(g, [npu, P.cpu()])
    feeds = random_inputs(g)
    ref = execute(plan, feeds)
    out = {}

    def paused_run():
        try:
            out["run"] = execute(plan, feeds)
        except Exception as e:  # reported below, in the test's thread
            out["error"] = e

    t = threading.Thread(target=paused_run, name="pausing")
    t.start()
    assert midway.wait(30)
    hoard.append(npu.allocate((8,), np.float32))  # another thread allocates (and keeps) meanwhile
    resume.set()
    t.join(30)
    assert "error" not in out, out.get("error")
    assert out["run"].outputs["y"].tobytes() == ref.outputs["y"].tobytes()
    assert npu.live_allocations == 1
    npu.free(hoard.pop())
    assert npu.live_allocations == 0


def test_counters_stay_exact_under_contention():
    p = NumbaCPUProvider()

    def churn(i, r):
        bufs = [p.allocate((4,), np.float32) for _ in range(50)]
        for b in bufs:
            p.free(b)

    _in_threads(churn, 4, 40)
    assert p.live_allocations == 0 and p.live_bytes == 0 and p.total_allocations == 4 * 40 * 50


def test_a_meter_counts_its_threads_allocations_and_their_frees_from_anywhere():
    p = NumbaCPUProvider()
    before = p.allocate((2,), np.float32)  # not the meter's
    m = p.open_meter()
    a = p.allocate((4,), np.float32)
    other = []
    th = threading.Thread(target=lambda: other.append(p.allocate((8,), np.float32)))
    th.start()
    th.join()
    assert (m.allocations, m.live_allocations, m.live_bytes, m.peak_bytes) == (1, 1, 16, 16)
    th = threading.Thread(target=lambda: p.free(a))  # freed elsewhere: still the meter's buffer
    th.start()
    th.join()
    p.free(before)
    assert (m.live_allocations, m.live_bytes, m.peak_bytes) == (0, 0, 16)
    p.close_meter(m)
    p.allocate((4,), np.float32)
    assert m.allocations == 1


def test_a_run_over_the_memory_budget_is_refused_before_allocating(monkeypatch):
    """ConstantOfShape([700000000]) -> ReduceSum: 2.8 GB that the loader leaves unfolded; executing
    it is refused against the budget, naming the node, before anything is allocated."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    import hetero_explore as he
    from hetero_explore.ir.errors import MemoryBudgetError
    shape = numpy_helper.from_array(np.array([700000000], np.int64), "shape")
    g = helper.make_graph([helper.make_node("ConstantOfShape", ["shape"], ["big"], name="bomb"),
                           helper.make_node("ReduceSum", ["big"], ["y"], keepdims=0)], "bomb", [],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])], [shape])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    graph = he.load_model(m)
    monkeypatch.setenv("HETERO_EXPLORE_MEMORY_BUDGET", "1G")
    cpu = he.providers.cpu()
    before = cpu.live_allocations
    with pytest.raises(MemoryBudgetError, match=r"'bomb' \(ConstantOfShape\).*2\.6 GiB.*budget of 1\.0 GiB"):
        he.execute_reference(graph, cpu, {})
    assert cpu.live_allocations == before
