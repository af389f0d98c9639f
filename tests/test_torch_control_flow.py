"""Control flow from real torch exports: TorchScript-scripted modules exported with
``torch.onnx.export(torch.jit.script(m), ..., dynamo=False)`` keep Python ``if`` / ``for`` as
onnx ``If`` / ``Loop``. Seeded random weights; results against torch and onnxruntime,
heterogeneous runs under random deny masks byte-identical to the CPU reference (leak counters
back), CPU vs CUDA (simulator) bitwise on tiny sizes, and the plan tables' subgraph paths."""

from __future__ import annotations

import functools
import io
import random
import warnings
from collections import Counter

import numpy as np
import onnx
import pytest

import hetero_explore as he
from hetero_explore.analysis.compare import diff_arrays
from hetero_explore.providers import resolve
from hetero_explore.providers.cuda import cuda_status
from hetero_explore.providers.virtual import mask, unmask

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
nn = torch.nn
HAS_CUDA = cuda_status()[0]


# -- the modules ------------------------------------------------------------------------------
class IfOnShape(nn.Module):
    """``if x.shape[1] > 4``: two Linear heads, the branch chosen by the input's width."""

    def __init__(self):
        super().__init__()
        self.wide = nn.Linear(3, 3)
        self.narrow = nn.Linear(3, 3)

    def forward(self, x):
        if x.shape[1] > 4:
            return torch.relu(self.wide(x[:, :3]))
        else:
            return self.narrow(x[:, :3]) * 2.0


class LoopOverTensor(nn.Module):
    """``for i in range(x.shape[0])``: a carried state updated from each row."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        h = torch.zeros(x.shape[1])
        for i in range(x.shape[0]):
            h = torch.tanh(self.lin(x[i]) + h)
        return h


class LSTMStepLoop(nn.Module):
    """A scripted LSTM step: ``nn.LSTMCell`` applied in a loop over the time axis."""

    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(3, 4)

    def forward(self, x):
        h = torch.zeros(x.shape[1], 4)
        c = torch.zeros(x.shape[1], 4)
        for t in range(x.shape[0]):
            h, c = self.cell(x[t], (h, c))
        return h


class AudioRateSwitch(nn.Module):
    """The audio models' 8 kHz / 16 kHz switch: frames of 8 samples go to one LSTM, frames of 4
    to another, and a shared head; the LSTMs sit inside the If's branches."""

    def __init__(self):
        super().__init__()
        self.lstm16 = nn.LSTM(8, 4, batch_first=True)
        self.lstm8 = nn.LSTM(4, 4, batch_first=True)
        self.head = nn.Linear(4, 1)

    def forward(self, x):
        if x.shape[2] == 8:
            y, _ = self.lstm16(x)
        else:
            y, _ = self.lstm8(x)
        return torch.sigmoid(self.head(y[:, -1]))


#: name -> (module class, example input shape for the export, dynamic axes of x,
#:          (control op, op that must be inside its subgraph), input shapes to run)
MODELS = {
    "if_on_shape": (IfOnShape, (2, 5), {0: "b", 1: "w"}, ("If", "Gemm"), [(2, 5), (2, 3), (1, 6)]),
    "loop_over_tensor": (LoopOverTensor, (4, 3), {0: "n"}, ("Loop", "Tanh"), [(4, 3), (1, 3), (0, 3)]),
    "lstm_step_loop": (LSTMStepLoop, (3, 2, 3), {0: "t", 1: "b"}, ("Loop", "LSTM"), [(3, 2, 3), (1, 1, 3)]),
    "audio_rate_switch": (AudioRateSwitch, (1, 3, 8), {0: "b", 1: "t", 2: "f"}, ("If", "LSTM"),
                          [(1, 3, 8), (2, 2, 4)]),
}


@functools.lru_cache(maxsize=None)
def exported(name: str):
    """(scripted module, onnx model bytes) of MODELS[name], seeded."""
    cls, shape, axes, _, _ = MODELS[name]
    torch.manual_seed(sum(map(ord, name)))
    mod = cls().eval()
    f = io.BytesIO()
    with warnings.catch_warnings():  # TorchScript's deprecation and tracer warnings
        warnings.simplefilter("ignore")
        scripted = torch.jit.script(mod)
        torch.onnx.export(scripted, (torch.randn(*shape),), f, dynamo=False, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": axes})
    return mod, f.getvalue()


def model(name):
    return onnx.load_from_string(exported(name)[1])


def feeds(shape, seed=0):
    return {"x": np.random.default_rng(seed).standard_normal(shape).astype(np.float32)}


def identical(a, b) -> bool:
    return set(a) == set(b) and all(diff_arrays(a[k], b[k])["byte_identical"] for k in a)


def counters(provs):
    return {unmask(p).name: unmask(p).live_allocations for p in provs}


def sub_ops(m: onnx.ModelProto, control: str) -> Counter:
    c = Counter()
    for n in m.graph.node:
        if n.op_type == control:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    c.update(k.op_type for k in a.g.node)
    return c


# -- tests ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(MODELS))
def test_export_holds_real_control_flow(name):
    m = model(name)
    onnx.checker.check_model(m, full_check=True)
    control, inner = MODELS[name][3]
    assert control in {n.op_type for n in m.graph.node}
    assert sub_ops(m, control)[inner] >= 1, sub_ops(m, control)
    p = he.plan(he.load_model(m), ["cpu"])
    assert p.executable and not p.execution_blockers, p.execution_blockers


@pytest.mark.parametrize("name", list(MODELS))
def test_results_match_torch_and_onnxruntime(name):
    mod, raw = exported(name)
    m = onnx.load_from_string(raw)
    g = he.load_model(m)
    sess = ort.InferenceSession(raw, providers=["CPUExecutionProvider"])
    for k, shape in enumerate(MODELS[name][4]):
        x = feeds(shape, k)
        got = he.execute_reference(g, "cpu", x).outputs["y"]
        with torch.no_grad():
            want = mod(torch.from_numpy(x["x"])).numpy()
        assert got.shape == want.shape, (shape, got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"{name} {shape} vs torch")
        np.testing.assert_allclose(got, sess.run(None, x)[0], rtol=1e-5, atol=1e-6,
                                   err_msg=f"{name} {shape} vs onnxruntime")


@pytest.mark.parametrize("name", list(MODELS))
def test_heterogeneous_random_masks_byte_identical(name):
    """[virtual gpu, cpu] with random ops denied on the gpu, inside the subgraphs too: every run
    byte-identical to the CPU reference; the leak counters come back."""
    g = he.load_model(model(name))
    cpu = resolve("cpu")
    shape = MODELS[name][4][0]
    x = feeds(shape, 11)
    ref = he.execute_reference(g, cpu, x)
    ops = sorted({n.op_type for n in g.nodes} | {n.op_type for _, p in he.plan(g, [cpu]).nested()[1:]
                                                 for n in p.graph.nodes})
    rnd = random.Random(name)
    hetero_seen = False
    for trial in range(4):
        deny = rnd.sample(ops, rnd.randint(1, len(ops))) if trial else [MODELS[name][3][1]]
        provs = [mask(resolve("gpu"), deny=deny), cpu]
        p = he.plan(g, provs)
        assert p.executable, (deny, p.execution_blockers)
        hetero_seen |= any(c.is_heterogeneous for _, c in p.nested())
        before = counters(provs)
        run = he.execute(p, x)
        assert identical(run.outputs, ref.outputs), (deny, he.compare(run, ref))
        assert counters(provs) == before
    assert hetero_seen


def test_plan_tables_show_the_subgraph_paths():
    for name, paths in [("if_on_shape", {"", "/If/then_branch", "/If/else_branch"}),
                        ("lstm_step_loop", {"", "/Loop/body"}),
                        ("audio_rate_switch", {"", "/If/then_branch", "/If/else_branch"})]:
        g = he.load_model(model(name))
        inner = MODELS[name][3][1]
        p = he.plan(g, [mask(resolve("gpu"), deny=[inner]), "cpu"])
        pl = p.placement_df()
        assert set(pl["subgraph"]) == paths, (name, set(pl["subgraph"]))
        # the denied op inside the subgraphs is placed on the cpu, with its subgraph path
        rows = pl[pl["op_type"] == inner] if "op_type" in pl.columns else pl[pl["node"].str.contains(inner)]
        assert len(rows) and set(rows["subgraph"]) <= paths - {""}
        assert (p.transfers_df()["subgraph"] != "").any()
        svg = p.to_graphviz(level="node").source
        assert all(s in svg for s in paths - {""})


@pytest.mark.skipif(not HAS_CUDA, reason="no GPU and no CUDA simulator (NUMBA_ENABLE_CUDASIM=1)")
@pytest.mark.parametrize("name,shape", [("if_on_shape", (1, 5)), ("if_on_shape", (1, 3)),
                                        ("loop_over_tensor", (2, 3)), ("lstm_step_loop", (2, 1, 3)),
                                        ("audio_rate_switch", (1, 2, 4))])
def test_cpu_and_cuda_bitwise(name, shape):
    g = he.load_model(model(name))
    x = feeds(shape, 5)
    ref = he.execute_reference(g, "cpu", x)
    cuda = resolve("cuda")
    p = he.plan(g, [cuda, resolve("cpu")])
    assert p.executable, p.execution_blockers
    on_cuda = [n for _, c in p.nested() for n, a in zip(c.graph.nodes, c.assignment)
               if unmask(c.providers[a]).name == "cuda"]
    assert on_cuda  # the control node and (most of) its subgraphs run on the device
    got = he.execute(p, x)
    assert identical(got.outputs, ref.outputs), he.compare(got, ref)
