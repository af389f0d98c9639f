"""Recorded and replayed node calls (``kernels.common.replayable``, ``runner.Program``).

A node whose run function is marked replayable, on arrays that are the same at every
run (the memory plan's views, held constants), runs its function once per program and
then replays the compiled calls it made. These tests hold the replay to the per-run
path (``runtime.run_graph``: every node's function at every run, no memory plan) bit
for bit, over several runs with new inputs, for every marked run function: each case
puts the op between two wrapper nodes, so that its inputs and outputs are arena values.
``test_every_replayable_run_function_has_a_case`` fails for a newly marked run function
that no case here exercises.
"""

import ast
import os
from pathlib import Path

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import hetero_explore as he
from hetero_explore.runner import core as runner
from hetero_explore.ir.errors import ExecutionError
from hetero_explore.execution.executor import HeterogeneousExecutor
from hetero_explore.providers.cpu import NumbaCPUProvider
from hetero_explore.kernels import target as T
from hetero_explore.execution.runtime import run_graph

KERNELS = Path(T.__file__).resolve().parent
F = np.float32
CPU = NumbaCPUProvider()


def rnd(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        return rng.integers(-5 if dtype.kind == "i" else 0, 6, shape).astype(dtype)
    return (rng.standard_normal(shape) * 3).astype(dtype)


class Case:
    """One op between wrapper nodes: every non-constant input comes from an Identity of a
    graph input, every output goes through one to a graph output (the graph is loaded as
    written: the Identity copies stay)."""

    def __init__(self, name, op, inputs, consts=None, opset=17, n_out=1, **attrs):
        self.name, self.op, self.opset, self.n_out, self.attrs = name, op, opset, n_out, attrs
        self.inputs = inputs            # [(shape, dtype) or None (absent)], graph-fed
        self.consts = consts or {}      # input index -> array (an initializer)

    def model(self):
        nodes, g_in, inits, names = [], [], [], []
        n_in = max([len(self.inputs)] + [i + 1 for i in self.consts])
        for i in range(n_in):
            if i in self.consts:
                inits.append(numpy_helper.from_array(np.asarray(self.consts[i]), f"c{i}"))
                names.append(f"c{i}")
            elif i < len(self.inputs) and self.inputs[i] is not None:
                shape, dtype = self.inputs[i]
                g_in.append(helper.make_tensor_value_info(f"in{i}", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                                                          list(shape)))
                nodes.append(helper.make_node("Identity", [f"in{i}"], [f"x{i}"], name=f"pre{i}"))
                names.append(f"x{i}")
            else:
                names.append("")
        outs = [f"y{k}" for k in range(self.n_out)]
        nodes.append(helper.make_node(self.op, names, outs, name="op", **self.attrs))
        return nodes, g_in, inits, outs

    def load(self):
        nodes, g_in, inits, outs = self.model()
        # the op's output types, to pick each output's wrapper
        probe = helper.make_model(helper.make_graph(nodes, "probe", g_in, [helper.make_tensor_value_info(o, 0, None)
                                                                          for o in outs], initializer=inits),
                                  opset_imports=[helper.make_opsetid("", self.opset)])
        probe.ir_version = 8
        g0 = he.load_model(probe, check=False, optimize=False, fold_constants=False)
        types = [(np.dtype(g0.values[o].dtype), g0.values[o].shape) for o in outs]
        g_out = []
        for k, (o, (dt, shape)) in enumerate(zip(outs, types)):
            nodes.append(helper.make_node("Identity", [o], [f"out{k}"], name=f"post{k}"))
            # the wrapper keeps the op's output type and shape
            g_out.append(helper.make_tensor_value_info(f"out{k}", helper.np_dtype_to_tensor_dtype(dt), list(shape)))
        m = helper.make_model(helper.make_graph(nodes, self.name, g_in, g_out, initializer=inits),
                              opset_imports=[helper.make_opsetid("", self.opset)])
        m.ir_version = 8
        # as written: the op itself (no Dropout elimination, no folding into a neighbour)
        return he.load_model(m, optimize=False, fold_constants=False)

    def feeds(self, g, seed):
        rng = np.random.default_rng(seed)
        return {n: rnd(rng, g.values[n].shape, g.values[n].dtype) for n in g.inputs}


def _x(*shape):
    return (shape, F)


W = np.random.default_rng(7)
CASES = [
    # elementwise.py
    Case("unary", "Relu", [_x(2, 5)]),
    Case("unary_attr", "LeakyRelu", [_x(3, 4)], alpha=0.25),
    Case("binary_bcast", "Add", [_x(2, 3, 4), _x(3, 1)]),
    Case("binary_variadic", "Sum", [_x(2, 3), _x(2, 3), _x(1, 3)]),
    Case("binary_one_input", "Max", [_x(4, 2)]),
    Case("binary_int", "Mul", [((3, 4), np.int32), ((4,), np.int32)]),
    Case("compare", "Greater", [_x(3, 4), _x(4)]),
    Case("mean", "Mean", [_x(2, 4), _x(2, 4)]),
    Case("cast", "Cast", [_x(3, 5)], to=TensorProto.INT64),
    Case("cast_bits", "Cast", [_x(3, 5)], to=TensorProto.FLOAT16),
    Case("half", "Add", [((2, 3), np.float16), ((2, 3), np.float16)]),
    Case("bitcast", "BitCast", [_x(3, 4)], opset=26, to=TensorProto.INT32),
    Case("where", "Where", [((2, 1, 4), bool), _x(3, 4), _x(2, 3, 1)]),
    Case("clip_const", "Clip", [_x(3, 4)], consts={1: F(-1.5), 2: F(2.0)}),
    # nn.py
    Case("matmul", "MatMul", [_x(2, 3, 4), _x(2, 4, 5)]),
    Case("matmul_const_b", "MatMul", [_x(2, 7, 9)], consts={1: W.standard_normal((9, 20)).astype(F)}),
    # one row of A (a decoder step): B packed in groups of panels (cpu_fast.gemm.mm_row_cpu)
    Case("matmul_const_b_one_row", "MatMul", [_x(1, 1, 9)], consts={1: W.standard_normal((9, 150)).astype(F)}),
    Case("gemm", "Gemm", [_x(3, 4), _x(5, 4), _x(5)], transB=1, alpha=0.5, beta=2.0),
    Case("gemm_const_b", "Gemm", [_x(3, 4)], consts={1: W.standard_normal((5, 4)).astype(F),
                                                      2: W.standard_normal(5).astype(F)}, transB=1),
    Case("conv", "Conv", [_x(1, 3, 7, 6)], consts={1: W.standard_normal((4, 3, 3, 3)).astype(F),
                                                    2: W.standard_normal(4).astype(F)}, pads=[1, 1, 1, 1]),
    # an initializer weight packed once at build time (the "conv" prepare rule): every packed path
    Case("conv_packed_px", "Conv", [_x(1, 3, 7, 6)], consts={1: W.standard_normal((17, 3, 3, 3)).astype(F),
                                                              2: W.standard_normal(17).astype(F)}, pads=[1, 1, 1, 1]),
    Case("conv_packed_dw", "Conv", [_x(1, 9, 6, 5)], consts={1: W.standard_normal((9, 1, 3, 3)).astype(F)},
         pads=[1, 1, 1, 1], group=9),
    Case("conv_packed_pw", "Conv", [_x(2, 5, 4, 5)], consts={1: W.standard_normal((7, 5, 1, 1)).astype(F),
                                                              2: W.standard_normal(7).astype(F)}),
    Case("conv_packed_gemvt", "Conv", [_x(1, 12, 1, 1)], consts={1: W.standard_normal((9, 12, 1, 1)).astype(F)}),
    Case("conv_transpose", "ConvTranspose", [_x(1, 2, 4, 5), _x(2, 3, 3, 3)], strides=[2, 2]),
    Case("maxpool", "MaxPool", [_x(1, 2, 7, 7)], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    Case("maxpool_int8", "MaxPool", [((1, 2, 5, 5), np.int8)], kernel_shape=[2, 2]),
    Case("maxpool_indices", "MaxPool", [_x(1, 2, 5, 5)], n_out=2, kernel_shape=[2, 2]),
    Case("avgpool", "AveragePool", [_x(1, 2, 6, 5)], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
         count_include_pad=1),
    Case("gpool", "GlobalAveragePool", [_x(2, 3, 4, 5)]),
    Case("batchnorm", "BatchNormalization", [_x(2, 3, 4)],
         consts={1: W.standard_normal(3).astype(F), 2: W.standard_normal(3).astype(F),
                 3: W.standard_normal(3).astype(F), 4: (np.abs(W.standard_normal(3)) + 0.5).astype(F)}),
    Case("lrn", "LRN", [_x(1, 5, 3, 3)], size=3),
    Case("softmax", "Softmax", [_x(2, 3, 7)], axis=-1),
    Case("softmax_11", "Softmax", [_x(2, 3, 7)], opset=11, axis=1),
    Case("layernorm", "LayerNormalization", [_x(4, 6)], consts={1: W.standard_normal(6).astype(F),
                                                                 2: W.standard_normal(6).astype(F)}),
    Case("dropout_mask", "Dropout", [_x(3, 4)], n_out=2),
    Case("resize_nearest", "Resize", [_x(1, 2, 3, 4)], consts={2: np.array([1, 1, 2, 2], F)}, mode="nearest"),
    Case("resize_linear", "Resize", [_x(1, 2, 3, 4)], consts={2: np.array([1, 1, 1.5, 2], F)}, mode="linear"),
    Case("pad", "Pad", [_x(2, 3)], consts={1: np.array([1, 0, 0, 2], np.int64)}, mode="reflect"),
    Case("clip_6", "Clip", [_x(3, 4)], opset=6, min=-0.5, max=0.75),
    # norm.py
    Case("instancenorm", "InstanceNormalization", [_x(2, 3, 4)], consts={1: W.standard_normal(3).astype(F),
                                                                         2: W.standard_normal(3).astype(F)}),
    Case("groupnorm", "GroupNormalization", [_x(2, 4, 3, 2)], opset=21, num_groups=2,
         consts={1: W.standard_normal(4).astype(F), 2: W.standard_normal(4).astype(F)}),
    Case("rmsnorm", "RMSNormalization", [_x(3, 6)], opset=23, consts={1: W.standard_normal(6).astype(F)}),
    Case("mvn", "MeanVarianceNormalization", [_x(2, 3, 4, 2)]),
    Case("lpnorm", "LpNormalization", [_x(3, 5)], axis=1, p=2),
    Case("lppool", "LpPool", [_x(1, 2, 5, 5)], kernel_shape=[2, 2], p=2),
    # reduce.py
    Case("reduce_rows", "ReduceMean", [_x(4, 6)], opset=18, consts={1: np.array([0], np.int64)}),
    Case("reduce_contig", "ReduceSum", [_x(3, 8)], opset=18, consts={1: np.array([1], np.int64)}),
    Case("reduce_generic", "ReduceProd", [_x(2, 3, 4)], opset=18, keepdims=0,
         consts={1: np.array([0, 2], np.int64)}),
    Case("argmax", "ArgMax", [_x(3, 5)], axis=1),
    Case("cumsum", "CumSum", [_x(3, 5)], consts={1: np.array(1, np.int64)}),
    # quant.py, einsum.py, movement.py, select.py
    Case("quantize", "QuantizeLinear", [_x(2, 5)], consts={1: F(0.1), 2: np.uint8(3)}),
    Case("dequantize", "DequantizeLinear", [((2, 5), np.uint8)], consts={1: F(0.5), 2: np.uint8(2)}),
    Case("dyn_quantize", "DynamicQuantizeLinear", [_x(3, 4)], n_out=3),
    Case("conv_integer", "ConvInteger", [((1, 2, 5, 5), np.uint8)],
         consts={1: W.integers(0, 9, (3, 2, 3, 3)).astype(np.uint8), 2: np.uint8(1)}),
    Case("qlinear_conv", "QLinearConv", [((1, 2, 5, 5), np.uint8)],
         consts={1: F(0.1), 2: np.uint8(1), 3: W.integers(0, 9, (3, 2, 3, 3)).astype(np.uint8), 4: F(0.2),
                 5: np.uint8(0), 6: F(0.3), 7: np.uint8(2)}),
    Case("matmul_integer", "MatMulInteger", [((3, 4), np.uint8), ((4, 5), np.uint8)]),
    Case("einsum", "Einsum", [_x(3, 4), _x(4, 2)], equation="ij,jk->ik"),
    Case("tile", "Tile", [_x(2, 3)], consts={1: np.array([2, 1], np.int64)}),
    Case("depth_to_space", "DepthToSpace", [_x(1, 8, 2, 3)], blocksize=2),
    Case("eyelike", "EyeLike", [_x(3, 4)], k=1),
    Case("topk", "TopK", [_x(3, 6)], n_out=2, consts={1: np.array([2], np.int64)}),
    Case("hardmax", "Hardmax", [_x(3, 5)]),
    # data.py
    Case("reshape", "Reshape", [_x(2, 6)], consts={1: np.array([3, 4], np.int64)}),
    Case("transpose", "Transpose", [_x(2, 3, 4)], perm=[2, 0, 1]),
    Case("expand", "Expand", [_x(3, 1)], consts={1: np.array([2, 3, 4], np.int64)}),
    Case("concat", "Concat", [_x(2, 3), _x(2, 1), _x(2, 2)], axis=1),
    Case("split", "Split", [_x(5, 4)], n_out=2, consts={1: np.array([2, 3], np.int64)}, axis=0),
    Case("slice", "Slice", [_x(6, 5)], consts={1: np.array([1, 4], np.int64), 2: np.array([5, 0], np.int64),
                                               3: np.array([0, 1], np.int64), 4: np.array([2, -2], np.int64)}),
    Case("slice_1", "Slice", [_x(6, 5)], opset=9, starts=[1, 0], ends=[5, 3]),
    # rnn.py's LSTM through the "lstm_step" prepare rule (cpu_fast.rnn): the weights initializers
    # (transposed at build time) and inputs (transposed in the call); initial states, peepholes
    Case("lstm_const_w", "LSTM", [_x(3, 2, 4)], n_out=3, hidden_size=5,
         consts={1: W.standard_normal((1, 20, 4)).astype(F), 2: W.standard_normal((1, 20, 5)).astype(F),
                 3: W.standard_normal((1, 40)).astype(F)}),
    Case("lstm_inputs", "LSTM", [_x(2, 1, 3), _x(2, 12, 3), _x(2, 12, 3), _x(2, 24), None, _x(2, 1, 3),
                                 _x(2, 1, 3), _x(2, 9)], n_out=3, hidden_size=3, direction="bidirectional"),
]


def _replayed(ex):
    """The steps of ``ex``'s held programs that replay recorded calls."""
    return [it[0] for prog in ex._pool[0] if prog is not None for it in prog.nodes
            if it[7] is not None and it[7] is not runner._RECORD]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_replay_matches_the_per_run_path_over_new_inputs(case):
    g = case.load()
    with HeterogeneousExecutor(he.plan(g, ["cpu"])) as ex:
        for seed in range(3):
            feeds = case.feeds(g, seed)
            got = ex.run(feeds)
            want = run_graph(g, CPU, feeds)
            for name in g.outputs:
                assert got.outputs[name].tobytes() == want[name].tobytes(), (case.name, seed, name)
            if seed == 0:   # the first run recorded: the op's node replays from now on
                assert "op" in [st.node.name for st in _replayed(ex)], case.name


def test_a_replayed_node_does_not_run_its_function_again():
    g = CASES[0].load()
    with HeterogeneousExecutor(he.plan(g, ["cpu"])) as ex:
        ex.run(CASES[0].feeds(g, 0))
        prog = ex._pool[0][0]

        def boom(ins, outs):
            raise AssertionError("the run function ran again")
        prog.nodes = tuple(it[:1] + (boom,) + it[2:] if it[0].node.name == "op" else it for it in prog.nodes)
        prog.items = runner._segments(prog.nodes)
        feeds = CASES[0].feeds(g, 1)
        assert ex.run(feeds).outputs["out0"].tobytes() == run_graph(g, CPU, feeds)["out0"].tobytes()


def test_replay_is_off_when_asked(monkeypatch):
    monkeypatch.setattr(runner, "REPLAY", False)
    g = CASES[0].load()
    with HeterogeneousExecutor(he.plan(g, ["cpu"])) as ex:
        ex.run(CASES[0].feeds(g, 0))
        ex.run(CASES[0].feeds(g, 1))
        assert _replayed(ex) == []


def _chain(*ops):
    """x -> Identity -> ops[0] ("op0") -> ops[1] ("op1") ... -> Identity -> y, float32 (2, 5)."""
    names = ["pre"] + [f"op{i}" for i in range(len(ops))] + ["post"]
    kinds = ["Identity", *ops, "Identity"]
    vals = ["x"] + [f"v{i}" for i in range(len(kinds) - 1)] + ["y"]
    nodes = [helper.make_node(k, [vals[i]], [vals[i + 1]], name=n) for i, (k, n) in enumerate(zip(kinds, names))]
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])])
    return he.load_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), optimize=False)


def test_a_failing_replay_in_a_segment_names_its_node():
    g = _chain("Relu", "Neg", "Abs")
    feeds = {"x": np.arange(10, dtype=F).reshape(2, 5) - 5}
    with HeterogeneousExecutor(he.plan(g, ["cpu"])) as ex:
        ex.run(feeds)
        prog = ex._pool[0][0]
        assert len(prog.items) < len(prog.nodes)     # op0..op2 replay as one segment
        assert ex.run(feeds).outputs["y"].tobytes() == run_graph(g, CPU, feeds)["y"].tobytes()

        def broken():
            raise ValueError("replay broke")
        prog.nodes = tuple(it[:7] + (broken,) if it[0].node.name == "op1" else it for it in prog.nodes)
        prog.items = runner._segments(prog.nodes)
        with pytest.raises(ExecutionError, match=r"node 'op1' \(Neg\).*replay broke"):
            ex.run(feeds)


def test_a_gather_is_not_replayed_and_still_refuses_bad_indices():
    """Gather checks its indices after the launch (in Python): it is not replayable, so a
    later run with an index out of range still fails instead of reading row 0."""
    data = np.arange(12, dtype=F).reshape(4, 3)
    case = Case("gather", "Gather", [None, ((2,), np.int64)], consts={0: data})
    g = case.load()
    with HeterogeneousExecutor(he.plan(g, ["cpu"])) as ex:
        ex.run({"in1": np.array([-1, 2], np.int64)})     # rows 3 and 2
        assert "op" not in [st.node.name for st in _replayed(ex)]
        with pytest.raises(ExecutionError, match="op"):
            ex.run({"in1": np.array([9, 0], np.int64)})   # row 9 of 4


def test_recording_is_spoiled_by_a_launch_that_is_not_recorded():
    class Quiet(T.Target):   # a target whose launches a replay would not repeat
        def launch(self, pair, n, *args):
            T.RECORDING.spoil()

    with T.Recording() as r:
        T.CPU.call(lambda: None)
        Quiet().launch(None, 1)
    assert r.calls is None
    with T.Recording() as r:
        T.CPU.call(len, (1, 2))
    assert r.calls == [(len, ((1, 2),))]
    with pytest.raises(RuntimeError, match="nest"):
        with T.Recording():
            with T.Recording():
                pass
    assert T.RECORDING.calls is None


def test_a_prepared_call_runs_the_compiled_overload_of_its_arguments():
    from numba import njit

    @njit
    def add_into(a, b, out):
        for i in range(out.shape[0]):
            out[i] = a[i] + b[i]

    a, b, out = np.ones(4, F), np.full(4, F(2)), np.zeros(4, F)
    add_into(a, b, out)
    call = T.prepared_call(add_into, (a, b, out))
    assert call.func is not add_into          # numba's compiled entry point, not the dispatcher
    out[:] = 0
    call()
    assert out.tolist() == [3.0] * 4
    assert T.prepared_call(len, ((1,),))() == 1   # a plain function is called as it is


# --- every marked run function is exercised above -----------------------------------------
def _marked_locations():
    """(path in kernels/, first line) of every run function the kernel sources (the fast paths
    of kernels/cpu_fast/ included) mark replayable: the decorator's line for ``@replayable``,
    the ``def`` line for ``replayable(run)``."""
    found = set()
    for path in T.kernel_sources():
        name = path.relative_to(KERNELS).as_posix()
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            for d in fn.decorator_list:
                if isinstance(d, ast.Name) and d.id == "replayable":
                    found.add((name, min(x.lineno for x in fn.decorator_list)))
            defs = {n.name: n.lineno for n in fn.body if isinstance(n, ast.FunctionDef) and not n.decorator_list}
            for node in ast.walk(fn):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "replayable"
                        and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in defs):
                    found.add((name, defs[node.args[0].id]))
    return found


def test_every_replayable_run_function_has_a_case():
    marked = _marked_locations()
    assert len(marked) > 20
    seen = set()
    for case in CASES:
        g = case.load()
        for node in g.nodes:
            if node.name != "op":
                continue
            from hetero_explore.ir.context import node_context
            k = CPU.get_kernel(node_context(g, node))
            assert k.replayable, case.name
            code = k._fn.__code__
            f = Path(code.co_filename).resolve()
            seen.add((f.relative_to(KERNELS).as_posix() if f.is_relative_to(KERNELS) else f.name, code.co_firstlineno))
    assert marked - seen == set(), "replayable run functions without a case in tests/test_replay.py"
