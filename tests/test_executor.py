"""The heterogeneous executor: byte identity with the reference, transfers,
releases, leak counters, bad inputs, fail-closed validation, traces."""

import json
import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import dataclasses  # noqa: E402
import gc  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import hetero_explore as he  # noqa: E402
from hetero_explore.data import models  # noqa: E402
from hetero_explore import providers as P  # noqa: E402
from hetero_explore.analysis.compare import compare  # noqa: E402
from hetero_explore.ir.errors import (ExecutionError, HeterogeneousExecutionUnsupported,  # noqa: E402
                                   InputValidationError, ProviderUnavailableError, TransferCountMismatch)
from hetero_explore.execution.executor import (AllocationLeak, HeterogeneousExecutor, NodeExecutionError,  # noqa: E402
                                     execute, execute_reference, partition_model)
from hetero_explore.execution.inputs import random_inputs  # noqa: E402
from hetero_explore.providers.base import Kernel  # noqa: E402
from hetero_explore.providers.cpu import NumbaCPUProvider  # noqa: E402
from hetero_explore.providers.cuda import cuda_status  # noqa: E402
from hetero_explore.providers.virtual import MaskedProvider  # noqa: E402

needs_cuda = pytest.mark.skipif(not cuda_status()[0], reason=cuda_status()[1] or "CUDA available")

MODELS = {"mlp": models.mlp, "cnn": models.cnn, "transformer": models.transformer, "chain": models.chain}
_GRAPHS: dict = {}
_REFS: dict = {}


def graph_of(name):
    if name not in _GRAPHS:
        _GRAPHS[name] = he.load_model(MODELS[name]("tiny"))
    return _GRAPHS[name]


def reference_of(name):
    """The whole model on the Numba CPU provider, computed once per test session."""
    if name not in _REFS:
        g = graph_of(name)
        _REFS[name] = execute_reference(g, P.cpu(), random_inputs(g, seed=7))
    return _REFS[name]


def counters(providers):
    return {id(P.unmask(p)): P.unmask(p).live_allocations for p in providers}


def assert_identical(run, ref):
    df = compare(run, ref)
    assert df["byte_identical"].all(), df.to_string()


def spread(graph, providers, deny_sets):
    """Mask each provider; ops denied everywhere stay allowed on the last one."""
    ops = set(graph.op_types())
    denied_everywhere = set.intersection(*(set(d) for d in deny_sets)) & ops
    deny_sets = list(deny_sets)
    deny_sets[-1] = set(deny_sets[-1]) - denied_everywhere
    return [P.mask(p, deny=sorted(d)) if d else p for p, d in zip(providers, deny_sets)]


def check_run(plan, ref):
    """One run on an executor that holds the constants: the run leaves the counters where the
    build left them, and close() brings them back to where they were before the build."""
    before = counters(plan.providers)
    with HeterogeneousExecutor(plan) as ex:
        built = counters(plan.providers)
        run = ex.run(ref.inputs)
        assert counters(plan.providers) == built
    assert counters(plan.providers) == before
    assert run.transfers_performed == len(plan.transfers)
    assert list(run.outputs) == plan.graph.outputs
    assert_identical(run, ref)
    return run


# -- byte identity under random placements ------------------------------------------
def _deny_strategy(name):
    ops = sorted(graph_of(name).op_types())
    return st.lists(st.frozensets(st.sampled_from(ops)), min_size=2, max_size=2)


@needs_cuda
@pytest.mark.parametrize("name", ["mlp", "cnn", "transformer"])
def test_cpu_cuda_byte_identical_under_random_orders_and_masks(name):
    ref = reference_of(name)

    @settings(max_examples=8, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(order=st.permutations([0, 1]), denies=_deny_strategy(name))
    def prop(order, denies):
        base = [P.cuda(), P.cpu()]
        provs = spread(ref.graph, [base[i] for i in order], denies)
        check_run(he.plan(ref.graph, provs), ref)

    prop()


@pytest.mark.parametrize("name", ["mlp", "cnn", "transformer", "chain"])
def test_cpu_and_virtual_devices_byte_identical(name):
    ref = reference_of(name)
    ops = sorted(ref.graph.op_types())

    @settings(max_examples=10, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(order=st.permutations([0, 1, 2]), claims=st.lists(st.frozensets(st.sampled_from(ops)), min_size=2,
                                                                max_size=2),
           denies=st.frozensets(st.sampled_from(ops)))
    def prop(order, claims, denies):
        npu = P.VirtualProvider("npu", "npu:0", sorted(claims[0]), kernels=NumbaCPUProvider("npu-kernels"))
        dsp = P.VirtualProvider("dsp", "cpu:1", sorted(claims[1]), kernels=NumbaCPUProvider("dsp-kernels"))
        denies = denies & (claims[0] | claims[1])  # every op keeps a provider
        cpu = P.mask(P.cpu(), deny=sorted(denies)) if denies else P.cpu()
        check_run(he.plan(ref.graph, [[npu, dsp, cpu][i] for i in order]), ref)

    prop()


def test_virtual_gpu_and_cpu_alternating_chain():
    ref = reference_of("chain")
    gpu = P.virtual_gpu()
    plan = he.plan(ref.graph, [P.mask(gpu, deny=["Relu"]), P.cpu()])
    assert len(plan.partitions) == len(ref.graph.nodes)
    run = check_run(plan, ref)
    assert {t.kind for t in plan.transfers} == {"D2H", "H2D"}
    assert set(run.peak_bytes) == {"gpu:0", "cpu:0"}
    assert all(b > 0 for b in run.peak_bytes.values())


@needs_cuda
def test_cuda_reference_equals_cpu_reference_and_chain_round_trips():
    ref = reference_of("chain")
    assert_identical(execute_reference(ref.graph, P.cuda(), ref.inputs), ref)
    cuda, cpu = P.cuda(), P.cpu()
    plan = he.plan(ref.graph, [P.mask(cuda, deny=["Relu"]), cpu])
    run = check_run(plan, ref)
    kinds = run.timings_df().query("event == 'transfer'")["kind"]
    assert set(kinds) == {"D2H", "H2D"} and len(kinds) == len(plan.transfers)


# -- transfers and releases --------------------------------------------------------
def _alternating_plan():
    g = graph_of("chain")
    npu = P.VirtualProvider("npu", "npu:0", ["Add"], kernels=NumbaCPUProvider("npu-kernels"))
    return he.plan(g, [npu, P.cpu()]), npu


def test_releases_follow_last_consumers_and_nothing_leaks():
    plan, npu = _alternating_plan()
    ref = reference_of("chain")
    run = check_run(plan, ref)
    rel = run.releases_df()
    # every boundary value: one authoritative release, one per transfer realisation
    boundary = {o for p in plan.partitions for o in p.outputs}
    auth = rel[rel.role == "authoritative"]
    assert sorted(auth.value) == sorted(boundary)
    assert sorted(rel[rel.role == "transfer"].value) == sorted(t.value for t in plan.transfers)
    vals = plan.graph.values
    for r in auth.itertuples():
        consumers = {plan.node_partition[c] for c in vals[r.value].consumers}
        produced = plan.node_partition[vals[r.value].producer]
        assert r.after_partition == max(consumers | {produced})
    for t in plan.transfers:
        row = rel[(rel.role == "transfer") & (rel.value == t.value)].iloc[0]
        assert row.after_partition == max(t.dst_partitions)
    assert npu.live_allocations == 0 and npu.total_allocations > 0


def test_a_value_consumed_by_several_partitions_moves_once_per_destination():
    # x -> Add(a) -> r1 = Relu ; r2 = Relu ; both consume the Add output on the other provider
    nodes = [helper.make_node("Add", ["x", "c"], ["a"], name="add"),
             helper.make_node("Relu", ["a"], ["r1"], name="relu1"),
             helper.make_node("Add", ["r1", "a"], ["s"], name="add2"),
             helper.make_node("Relu", ["s"], ["y"], name="relu2")]
    g = he.load_model(_model(nodes, ["x"], ["y"], {"c": np.arange(6, dtype=np.float32).reshape(2, 3)}))
    npu = P.VirtualProvider("npu", "npu:0", ["Add"], kernels=NumbaCPUProvider("k"))
    plan = he.plan(g, [npu, P.cpu()])
    ref = execute_reference(g, P.cpu(), random_inputs(g))
    run = check_run(plan, ref)
    assert run.transfers_performed == len(plan.transfers) == 3


def test_plan_with_an_extra_or_missing_transfer_fails_loudly_before_running():
    plan, npu = _alternating_plan()
    t = plan.transfers[0]
    extra = dataclasses.replace(plan, transfers=plan.transfers + (dataclasses.replace(t, value="x"),))
    with pytest.raises(TransferCountMismatch, match="no transfer|read only|inconsistent|moves"):
        HeterogeneousExecutor(extra)
    missing = dataclasses.replace(plan, transfers=plan.transfers[1:])
    with pytest.raises(TransferCountMismatch, match="lists no transfer"):
        HeterogeneousExecutor(missing)
    assert npu.total_allocations == 0


# -- constants held across runs ----------------------------------------------------------
def _n_consts(plan):
    """Distinct (initializer, provider) pairs the partitions read."""
    g = plan.graph
    return len({(n, p.provider_index) for p in plan.partitions for n in p.inputs
                if g.is_constant(n) and n not in g.inputs})


def test_constants_are_staged_once_held_across_runs_and_freed_by_close():
    ref = reference_of("cnn")
    cpu = P.cpu()
    npu = P.VirtualProvider("npu", "npu:0", ["Conv", "Relu"], kernels=NumbaCPUProvider("npu-kernels"))
    plan = he.plan(ref.graph, [npu, cpu])
    n = _n_consts(plan)
    assert n > 0 and {p.provider for p in plan.partitions} == {"npu", "cpu"}
    before = (cpu.live_allocations, npu.live_allocations, cpu.live_bytes, npu.live_bytes)
    ex = HeterogeneousExecutor(plan)
    assert ex.holds_constants
    held = (cpu.live_allocations - before[0]) + (npu.live_allocations - before[1])
    # the constants, and one arena per provider for the memory plan
    assert ex.held_arenas == len(ex.arena_bytes) == 2
    assert held == n + ex.held_arenas
    assert (sum(ex.constant_bytes.values()) + sum(ex.arena_bytes.values())
            == (cpu.live_bytes - before[2]) + (npu.live_bytes - before[3]) > 0)
    built = (cpu.live_allocations, npu.live_allocations)
    staged_totals = (cpu.total_allocations, npu.total_allocations)
    one_shot = execute(plan, ref.inputs)  # stages the constants itself
    runs = [ex.run(ref.inputs) for _ in range(3)]
    for run in runs:
        assert (cpu.live_allocations, npu.live_allocations) == built
        assert_identical(run, ref)
        assert run.constant_bytes == ex.constant_bytes
        # the held constants are not allocated again: each run allocates n fewer buffers; the
        # held arenas are not allocated again either (the one-shot run allocated its own)
        assert run.allocations == one_shot.allocations - n
        assert run.arena_allocations == 0 and one_shot.arena_allocations == ex.held_arenas
    assert one_shot.constant_bytes == {}
    assert (cpu.total_allocations + npu.total_allocations - sum(staged_totals)
            == one_shot.allocations + one_shot.arena_allocations + sum(r.allocations for r in runs))
    ex.close()
    assert (cpu.live_allocations, npu.live_allocations, cpu.live_bytes, npu.live_bytes) == before
    assert not ex.holds_constants and ex.constant_bytes == {}
    ex.close()  # idempotent
    # a closed executor still runs: it stages the constants per run again
    again = ex.run(ref.inputs, keep_intermediates=True)
    assert (cpu.live_allocations, npu.live_allocations) == before[:2]
    # keep_intermediates runs the same programs (their arenas this run's own), copying every
    # node's outputs to the host as it goes
    assert again.allocations == one_shot.allocations and again.constant_bytes == {}
    assert again.arena_allocations == one_shot.arena_allocations == 2 and ex.held_arenas == 0
    assert again.intermediates and set(again.intermediates) >= {v for r in ex.parts for v in r.layout}
    assert_identical(again, ref)


def test_garbage_collecting_an_executor_frees_its_constants():
    ref = reference_of("mlp")
    cpu = P.cpu()
    before = cpu.live_allocations
    ex = HeterogeneousExecutor(he.plan(ref.graph, [cpu]))
    arenas = ex.held_arenas
    assert arenas == 1
    assert cpu.live_allocations - before == _n_consts(ex.plan) + arenas > arenas
    run = ex.run(ref.inputs)
    assert cpu.live_allocations - before == _n_consts(ex.plan) + arenas
    del ex
    gc.collect()
    # the run result keeps its executor (for rerun): still held
    assert cpu.live_allocations - before == _n_consts(run.plan) + arenas
    del run
    gc.collect()
    assert cpu.live_allocations == before


def _writes_into_constants(op, k):
    if op != "Add":
        return k
    inner = k._fn

    def fn(ins, outs):
        ins[1][...] = 0  # a misbehaving kernel: writes into its constant input
        inner(ins, outs)
    return Kernel(k.ctx, fn)


@pytest.mark.parametrize("keep", [True, False], ids=["held", "per-run"])
def test_a_kernel_writing_into_a_constant_fails_loudly(keep):
    g = graph_of("chain")
    bad = _Tweaked("bad", "npu:0", ["Add"], _writes_into_constants)
    cpu = P.cpu()
    plan = he.plan(g, [bad, cpu])
    ex = HeterogeneousExecutor(plan, keep_constants=keep)
    with pytest.raises(NodeExecutionError, match="read-only") as e:
        ex.run(random_inputs(g))
    assert e.value.op_type == "Add" and e.value.provider == "bad"
    for (name, _), buf in ex._constants.items():  # what every later run would read: untouched
        np.testing.assert_array_equal(buf.data, g.initializer(name))
    ex.close()
    assert bad.live_allocations == 0 and cpu.live_allocations == 0 and bad.total_allocations > 0


def test_a_kernel_that_keeps_an_allocation_is_a_leak_even_with_held_constants():
    g = graph_of("chain")
    hoard = []

    def tweak(op, k):
        if op != "Relu":
            return k
        inner = k._fn

        def fn(ins, outs):
            hoard.append(bad.allocate((4,), np.float32))  # never freed
            inner(ins, outs)
        return Kernel(k.ctx, fn)

    bad = _Tweaked("bad", "npu:0", ["Relu", "Add"], tweak)
    n_relu = sum(n.op_type == "Relu" for n in g.nodes)
    with HeterogeneousExecutor(he.plan(g, [bad, P.cpu()])) as ex:
        assert ex.holds_constants and bad.live_allocations == _n_consts(ex.plan) + ex.held_arenas > 1
        with pytest.raises(AllocationLeak, match=f"'bad': \\+{n_relu} allocation"):
            ex.run(random_inputs(g))
    assert len(hoard) == n_relu and bad.live_allocations == n_relu
    for b in hoard:
        bad.free(b)
    assert bad.live_allocations == 0


def test_staging_a_constant_that_fails_frees_what_was_staged():
    class BrokenCopy(P.VirtualProvider):
        def copy_from_host(self, array, out=None):
            if array.ndim == 1 and self.live_allocations > 1:  # the second constant
                raise OSError("link down")
            return super().copy_from_host(array, out)

    g = graph_of("chain")
    npu = BrokenCopy("npu", "npu:0", ["Add"], kernels=NumbaCPUProvider("k"))
    cpu = P.cpu()
    with pytest.raises(ExecutionError, match="staging initializer .* on provider 'npu'.*link down"):
        HeterogeneousExecutor(he.plan(g, [npu, cpu]))
    assert npu.total_allocations > 1 and npu.live_allocations == 0 and cpu.live_allocations == 0


# -- inputs and outputs -----------------------------------------------------------------
def _model(nodes, inputs, outputs, inits, shape=(2, 3), extra_outputs=()):
    g = helper.make_graph(
        nodes, "m", [helper.make_tensor_value_info(i, TensorProto.FLOAT, list(shape)) for i in inputs],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, list(shape)) for o in list(outputs)]
        + list(extra_outputs),
        initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_outputs_that_are_inputs_or_initializers_come_back_in_order():
    w = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    nodes = [helper.make_node("Add", ["x", "w"], ["s"], name="add"),
             helper.make_node("Relu", ["s"], ["y"], name="relu")]
    g = he.load_model(_model(nodes, ["x"], ["w", "y", "x"], {"w": w}))
    x = np.ones((2, 3), np.float32)
    npu = P.VirtualProvider("npu", "npu:0", ["Relu"], kernels=NumbaCPUProvider("k"))
    run = execute(he.plan(g, [npu, P.cpu()]), {"x": x})
    assert list(run.outputs) == ["w", "y", "x"]
    np.testing.assert_array_equal(run["w"], w)
    np.testing.assert_array_equal(run["x"], x)
    np.testing.assert_array_equal(run["y"], np.maximum(x + w, 0))
    assert run["x"] is not x


def test_positional_inputs_and_zero_node_graph():
    g = he.load_model(_model([], ["x"], ["x"], {}))
    x = np.ones((2, 3), np.float32)
    run = execute(he.plan(g, ["cpu"]), [x])
    np.testing.assert_array_equal(run["x"], x)
    assert run.transfers_performed == 0


@pytest.mark.parametrize("feeds, needles", [
    ({}, ["missing input(s): 'x' (expected float32 (2, 8))"]),
    ({"x": np.zeros((2, 8), np.float32), "z": 1}, ["unexpected input(s): 'z'"]),
    ({"x": np.zeros((2, 8), np.float32), "c_0": np.zeros(8, np.float32)}, ["'c_0' (an initializer"]),
    ({"x": np.zeros((2, 8), np.float64)}, ["input 'x': expected float32 (2, 8), got float64 (2, 8)", "astype"]),
    ({"x": np.zeros((2, 9), np.float32)}, ["expected float32 (2, 8), got float32 (2, 9)"]),
    ({"x": np.zeros((16,), np.float32)}, ["got float32 (16,)"]),
    ({"x": [[0.0] * 8] * 2}, ["got float64 (2, 8)"]),
    ({"y": 1, "x": np.zeros(3, np.int64)}, ["unexpected input(s): 'y'", "got int64 (3,)"]),
], ids=["missing", "extra", "initializer", "dtype", "dim", "rank", "list", "extra-and-mismatch"])
def test_bad_inputs_are_named_before_anything_runs(feeds, needles):
    plan, npu = _alternating_plan()
    with pytest.raises(InputValidationError) as e:
        execute(plan, feeds)
    for n in needles:
        assert n in str(e.value)
    assert npu.total_allocations == 0


@pytest.mark.parametrize("feeds", [np.zeros((2, 8), np.float32), [], [1, 2]], ids=["array", "empty", "two"])
def test_inputs_of_the_wrong_kind(feeds):
    plan, _ = _alternating_plan()
    with pytest.raises(InputValidationError, match="positional|dict"):
        execute(plan, feeds)


def test_execute_needs_a_plan():
    with pytest.raises(TypeError, match="execute_reference"):
        execute(graph_of("chain"), {})


# -- failing closed and failing midway ------------------------------------------------------
class _Tweaked(P.VirtualProvider):
    """Executes CPU kernels; ``tweak(op_type, kernel)`` may replace a kernel."""

    def __init__(self, name, device, ops, tweak):
        super().__init__(name, device, ops, kernels=NumbaCPUProvider(f"{name}-kernels"))
        self.tweak = tweak

    def get_kernel(self, ctx):
        return self.tweak(ctx.node.op_type, super().get_kernel(ctx))


def _failing_relu(op, k):
    if op != "Relu":
        return k

    def fn(ins, outs):
        raise FloatingPointError("boom")
    return Kernel(k.ctx, fn)


def test_failure_midway_names_partition_and_node_and_frees_everything():
    g = graph_of("chain")
    bad = _Tweaked("bad", "npu:0", ["Relu"], _failing_relu)
    cpu = P.cpu()
    plan = he.plan(g, [bad, cpu])
    with pytest.raises(NodeExecutionError) as e:
        execute(plan, random_inputs(g))
    assert isinstance(e.value, ExecutionError)
    assert e.value.partition == 1 and e.value.node == "relu_0" and e.value.provider == "bad"
    assert "partition 1" in str(e.value) and "relu_0" in str(e.value) and "boom" in str(e.value)
    assert bad.live_allocations == 0 and cpu.live_allocations == 0
    assert bad.total_allocations > 0


def test_failing_transfer_is_an_execution_error_and_frees_everything():
    class BrokenCopy(P.VirtualProvider):
        def copy_from_host(self, array, out=None):
            raise OSError("link down")

    g = graph_of("chain")
    npu = BrokenCopy("npu", "npu:0", ["Relu"], kernels=NumbaCPUProvider("k"))
    cpu = P.cpu()
    with pytest.raises(ExecutionError, match="partition 1 on provider 'npu'.*link down"):
        execute(he.plan(g, [npu, cpu]), random_inputs(g))
    assert npu.live_allocations == 0 and cpu.live_allocations == 0


def _aliasing_relu(op, k):
    if op == "Relu":
        k.may_alias_input = True
    return k


def _data_dependent_relu(op, k):
    if op == "Relu":
        k.data_dependent_output = True
    return k


def test_data_dependent_outputs_may_cross_partition_boundaries():
    # the runner computes such shapes before it allocates, and transfers copy the actual buffer
    g = graph_of("chain")
    npu = _Tweaked("npu", "npu:0", ["Relu"], _data_dependent_relu)
    cpu = P.cpu()
    x = random_inputs(g)
    run = execute(he.plan(g, [npu, cpu]), x)
    assert run.transfers_performed > 0
    assert bool(he.compare(run, he.execute_reference(g, "cpu", x))["byte_identical"].all())


@pytest.mark.parametrize("tweak, needle", [(_aliasing_relu, "view of its input")])
def test_boundary_kernels_that_cannot_be_honoured_fail_closed(tweak, needle):
    g = graph_of("chain")
    npu = _Tweaked("npu", "npu:0", ["Relu"], tweak)
    cpu = P.cpu()
    with pytest.raises(HeterogeneousExecutionUnsupported, match=needle):
        execute(he.plan(g, [npu, cpu]), random_inputs(g))
    assert npu.total_allocations == 0 and cpu.total_allocations == 0
    # inside one partition the same kernels are fine
    run = execute(he.plan(g, [_Tweaked("npu", "npu:0", ["Relu", "Add"], tweak), cpu]), random_inputs(g))
    assert run.transfers_performed == 0


def test_execution_blockers_fail_closed():
    from onnx import helper
    m = models.chain("tiny")
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    g = he.load_model(m)
    plan = he.plan(g, ["cpu"])
    assert not plan.execution_blockers        # symbolic dims execute (shapes computed at run time)
    assert execute(plan, {"x": np.zeros((2, 8), np.float32)}).outputs
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 8])
    ep = helper.make_model(helper.make_graph(
        [helper.make_node("EPContext", ["x"], ["y"], domain="com.microsoft", name="ctx")], "g", [x],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 8])]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    plan = he.plan(he.load_model(ep, check=False), ["cpu"])
    assert plan.execution_blockers
    with pytest.raises(HeterogeneousExecutionUnsupported, match="EPContext") as e:
        execute(plan, {"x": np.zeros((2, 8), np.float32)})
    assert e.value.blockers


def test_planning_only_provider_is_unavailable():
    g = graph_of("chain")
    npu = P.VirtualProvider("npu", "npu:0", ["Relu"])
    with pytest.raises(ProviderUnavailableError, match="npu"):
        execute(he.plan(g, [npu, P.cpu()]), random_inputs(g))


def test_two_providers_sharing_one_memory_owner():
    class Renamed(MaskedProvider):
        def __init__(self, inner, name, deny):
            super().__init__(inner, deny)
            self._name = name

        @property
        def name(self):
            return self._name

    shared = P.cpu()
    a, b = Renamed(shared, "cpu-a", ["Relu"]), Renamed(shared, "cpu-b", ["Add"])
    ref = reference_of("chain")
    plan = he.plan(ref.graph, [a, b])
    assert len(plan.transfers) > 0 and {t.kind for t in plan.transfers} == {"same-device"}
    run = check_run(plan, ref)
    assert shared.live_allocations == 0
    assert list(run.peak_bytes) == ["cpu:0"]


# -- results ----------------------------------------------------------------------------
def test_timings_trace_and_summary(tmp_path):
    plan, _ = _alternating_plan()
    run = check_run(plan, reference_of("chain"))
    df = run.timings_df()
    parts = df[df.event == "partition"]
    assert list(parts.partition) == [p.id for p in plan.partitions]
    assert list(parts.nodes) == [p.n_nodes for p in plan.partitions]
    tr = df[df.event == "transfer"]
    assert list(tr.value) == [t.value for t in plan.transfers]
    assert list(tr.bytes) == [t.nbytes for t in plan.transfers]
    assert (df.seconds >= 0).all() and (df.start_s.diff().dropna() >= 0).all()
    path = tmp_path / "run.json"
    doc = run.to_chrome_trace(path)
    loaded = json.loads(path.read_text())
    assert loaded == json.loads(json.dumps(doc))
    spans = [e for e in loaded["traceEvents"] if e["ph"] == "X"]
    assert len(spans) == len(df)
    tracks = {e["args"]["name"]: e["tid"] for e in loaded["traceEvents"] if e["name"] == "thread_name"}
    assert set(tracks) == {"npu:0", "cpu:0"}
    assert {e["cat"] for e in spans} == {"partition", "transfer", "readback"}
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans)
    assert "transfer" in run.summary() and "RunResult" in repr(run) and "<table" in run._repr_html_()


def test_partition_models_are_standalone_and_compose():
    plan, _ = _alternating_plan()
    ref = execute_reference(plan.graph, P.cpu(), reference_of("chain").inputs, keep_intermediates=True)
    env = dict(ref.inputs)
    for part in plan.partitions:
        m = partition_model(plan, part.id)
        onnx.checker.check_model(m)
        g = he.load_model(m)
        run = execute_reference(g, P.cpu(), {n: env[n] for n in g.inputs})
        env.update(run.outputs)
        for o in part.outputs:
            np.testing.assert_array_equal(run[o], ref.intermediates[o])


def test_rerun_keeps_intermediates():
    plan, _ = _alternating_plan()
    run = execute(plan, reference_of("chain").inputs)
    again = run.rerun()
    assert again.intermediates is not None and set(again.intermediates) >= {o for n in plan.graph.nodes
                                                                            for o in n.outputs}
    assert len(again.transfer_values) == len(plan.transfers)
    assert_identical(again, run)


def test_a_caller_reusing_its_input_buffer_changes_neither_the_run_nor_rerun_nor_blame():
    g = graph_of("chain")
    bad = _Tweaked("bad", "npu:0", ["Relu"], _nudging_relu)
    plan = he.plan(g, [bad, P.cpu()])
    x = random_inputs(g, seed=3)["x"]
    kept = x.copy()
    run = execute(plan, {"x": x})
    ref = execute_reference(g, P.cpu(), {"x": kept.copy()})
    x[...] = 1e6  # the caller reuses its buffer for the next batch
    assert run.inputs["x"] is not x and np.array_equal(run.inputs["x"], kept)
    assert not run.inputs["x"].flags.writeable
    with pytest.raises(ValueError):
        run.inputs["x"][0, 0] = 0
    assert run.rerun().outputs["y"].tobytes() == run.outputs["y"].tobytes()
    df = compare(run, ref, blame=True)  # the runs were given the same values: comparable
    assert not df["byte_identical"].any()
    assert df["blamed"].iloc[0] == "node" and df["blamed_op"].iloc[0] == "Relu", df.to_string()
    assert df["blamed_provider"].iloc[0] == "bad"


def _nudging_relu(op, k):
    """A Relu one ULP off (upwards) on every element: byte identity breaks at that node."""
    if op != "Relu":
        return k
    inner = k._fn

    def fn(ins, outs):
        inner(ins, outs)
        outs[0][...] = np.nextafter(outs[0], np.float32(np.inf))
    return Kernel(k.ctx, fn)


def test_execute_reference_takes_names_plans_and_models():
    ref = reference_of("chain")
    plan, _ = _alternating_plan()
    for graph, provider in [(plan, "cpu"), (models.chain("tiny"), "gpu"), (ref.graph, P.cpu())]:
        run = execute_reference(graph, provider, ref.inputs)
        assert run.kind == "reference" and len(run.plan.partitions) == 1 and run.transfers_performed == 0
        assert_identical(run, ref)
    with pytest.raises(he.UnsupportedNodeError, match="Relu"):
        execute_reference(ref.graph, P.mask(P.cpu(), deny=["Relu"]), ref.inputs)


def test_overhead_benchmark_runs():
    """The benchmark's measurement on its smallest workload (no timing asserted)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "bench" / "hetero_overhead.py"
    spec = importlib.util.spec_from_file_location("hetero_overhead", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    name, make, ops = bench.WORKLOADS[0]
    row = bench.measure(name, lambda: models.chain("tiny", layers=3), ops, repeat=2)
    assert row["partitions"] == 6 and row["transfers"] == 5
    assert 0 <= row["transfer_share"] <= 1


# --- the quick check of a run's inputs (inputs.exact_feeds) ----------------------------------
class _Sub(np.ndarray):
    """An ndarray subclass (validation converts it; the quick check declines it)."""


def _two_input_graph():
    nodes = [helper.make_node("Add", ["a", "b"], ["y"])]
    g = helper.make_graph(nodes, "two", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
                                         helper.make_tensor_value_info("b", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return he.load_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dtype=st.sampled_from([np.float32, np.float64, np.int32, ">f4"]),
       shape=st.sampled_from([(2, 3), (3, 2), (6,), (1, 2, 3)]),
       kind=st.sampled_from(["dict", "list", "extra", "missing", "masked", "subclass"]))
def test_the_quick_input_check_takes_exactly_what_validation_passes_unchanged(dtype, shape, kind):
    """exact_feeds either returns what validate_inputs returns (the same arrays) or declines
    (None); it never accepts what validation would refuse or convert."""
    from hetero_explore.execution.inputs import exact_feeds, input_specs, validate_inputs
    g = _two_input_graph()
    specs = input_specs(g)
    a = np.ones(shape, dtype=dtype)
    b = np.zeros((2, 3), np.float32)
    feeds = {"dict": {"a": a, "b": b}, "list": [a, b], "extra": {"a": a, "b": b, "c": b},
             "missing": {"a": a}, "masked": {"a": np.ma.masked_array(a), "b": b},
             "subclass": {"a": a.view(_Sub), "b": b}}[kind]
    quick = exact_feeds(specs, feeds)
    try:
        full = validate_inputs(g, feeds)
    except InputValidationError:
        assert quick is None
        return
    if quick is not None:
        assert list(quick) == list(full) and all(quick[k] is full[k] for k in quick)
    exact = kind == "dict" and np.dtype(dtype) == np.float32 and np.dtype(dtype).isnative and shape == (2, 3)
    assert (quick is not None) == exact


def test_a_run_with_wrong_inputs_still_explains_after_quick_runs():
    g = _two_input_graph()
    with HeterogeneousExecutor(he.plan(g, ["cpu"])) as ex:
        ok = {"a": np.ones((2, 3), np.float32), "b": np.ones((2, 3), np.float32)}
        assert ex.run(ok).outputs["y"].tolist() == [[2.0] * 3] * 2
        with pytest.raises(InputValidationError, match="wrong dtype"):
            ex.run({"a": np.ones((2, 3), np.float64), "b": ok["b"]})
        # a list in graph-input order is converted by validation, as before
        assert ex.run([ok["a"], ok["b"]]).outputs["y"].tolist() == [[2.0] * 3] * 2
