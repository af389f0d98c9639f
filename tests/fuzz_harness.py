"""The project's own fuzzing harness: hostile cases, each run in a child process.

A case is plain data (``Case(family, name, params)``); a worker process builds
it from ``params`` and runs it, so a crash, a hang or a memory blow-up in one
case is a result that names the case, never the end of the suite. Workers are
started with ``spawn``, capped with ``RLIMIT_AS`` and reused across cases;
one that dies or overruns its timeout is replaced.

The contract for every case: success with the right answer (checked against
onnxruntime where it answers), or a subclass of ``HeteroExploreError`` with a
message. Categories:

``ok``          the right answer (onnxruntime agrees), or a view escaped as required
``unverified``  we answered, onnxruntime refused the model (nothing to check against)
``typed``       a HeteroExploreError with a non-empty message
``untyped``     any other exception, or a typed one with an empty message
``wrong``       an answer that differs from onnxruntime's (values, shape or dtype), an
                unescaped string in a view, data read from outside the model folder
``crash``       the worker died (a signal: SIGSEGV, SIGKILL by the memory cap, ...)
``hang``        the case overran its timeout (the worker is killed)

Families: ``mutate`` (truncations and bit flips of real models), ``lying``
(declared shapes/dtypes that contradict what the graph computes), ``index``
(out-of-range indices on every indexing op the providers claim), ``names``
(hostile strings in every string slot, through DOT, HTML report, widget and
CLI), ``extdata`` (external-data paths escaping the model folder), ``feeds``
(hostile inputs) and ``bombs`` (sizes from the model far beyond memory).

Used by ``tests/test_fuzz.py`` (a few hundred cases) and ``bench/fuzz.py``
(as many as asked).
"""

from __future__ import annotations

import io
import multiprocessing as mp
import os
import random
import re
import tempfile
import time
import traceback
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

CATEGORIES = ("ok", "unverified", "typed", "untyped", "wrong", "crash", "hang")
#: categories that break the contract
FAILURES = ("untyped", "wrong", "crash", "hang")
#: the address-space cap of a worker (numba, LLVM and onnxruntime reserve ~2.5 GiB of it)
DEFAULT_MEMORY_CAP = 6 << 30
DEFAULT_TIMEOUT = 60.0
#: a tighter address-space cap for families whose point is size: a model of a few hundred bytes
#: must not take gigabytes (the worker itself holds ~2.5 GiB of address space after warm-up)
FAMILY_CAPS = {"bombs": 4 << 30}


@dataclass(frozen=True)
class Case:
    family: str
    name: str
    params: tuple = ()

    @property
    def id(self) -> str:
        return f"{self.family}:{self.name}"


@dataclass
class Result:
    case: Case
    category: str
    detail: str = ""
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)


# =============================================================================================
# case builders (run in the worker)
# =============================================================================================
def _h():
    from onnx import TensorProto, helper
    return TensorProto, helper


def _model(nodes, inputs, outputs, inits=(), value_info=(), opset=17, name="fuzz"):
    TensorProto, helper = _h()
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits), value_info=list(value_info))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _vi(name, elem, shape):
    _, helper = _h()
    return helper.make_tensor_value_info(name, elem, shape)


def _sym(name, elem, rank):
    """An output of known rank and unknown dims (onnx.checker wants a shape on outputs)."""
    _, helper = _h()
    return helper.make_tensor_value_info(name, elem, [f"{name}_d{i}" for i in range(rank)])


def _real_models():
    """Real models: (name, serialized bytes, load_model kwargs)."""
    from hetero_explore.data import models
    out = [("mlp", models.mlp("tiny").SerializeToString(), {}),
           ("cnn", models.cnn("tiny").SerializeToString(), {}),
           ("transformer", models.transformer("tiny").SerializeToString(), {})]
    demo = Path(__file__).resolve().parents[1] / "hetero_explore" / "data" / "demo.onnx"
    out.append(("demo", demo.read_bytes(), {"input_shapes": {"image": (1, 3, 16, 16)}}))
    return out


_REAL = {}


def _real(name):
    if not _REAL:
        for n, b, kw in _real_models():
            _REAL[n] = (b, kw)
    return _REAL[name]


def build_mutate(params):
    model, kind, seed = params
    data, kw = _real(model)
    rng = random.Random(seed)
    b = bytearray(data)
    if kind == "truncate":
        b = b[: rng.randrange(0, len(b))]
    elif kind == "flip":
        for _ in range(rng.choice((1, 1, 2, 4, 8))):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    elif kind == "byte":
        i = rng.randrange(len(b))
        b[i] = rng.choice((0x00, 0xFF, 0x7F, 0x80, rng.randrange(256)))
    elif kind == "splice":  # a chunk copied over another place
        i, j = rng.randrange(len(b)), rng.randrange(len(b))
        n = rng.randrange(1, 64)
        b[j:j + n] = b[i:i + n]
    return {"model": bytes(b), "load": kw, "providers": ["gpu", "cpu"], "seed": seed}


def build_lying(params):
    """Declared shapes / dtypes that contradict what the nodes compute."""
    TensorProto, helper = _h()
    F, I64 = TensorProto.FLOAT, TensorProto.INT64
    kind = params[0]
    relu = [helper.make_node("Relu", ["x"], ["y"])]
    if kind == "relu-out-bigger":
        m = _model(relu, [_vi("x", F, [4])], [_vi("y", F, [12])])
    elif kind == "relu-out-huge":
        m = _model(relu, [_vi("x", F, [4])], [_vi("y", F, [100000000])])
    elif kind == "relu-out-smaller":
        m = _model(relu, [_vi("x", F, [4])], [_vi("y", F, [2])])
    elif kind == "relu-out-rank":
        m = _model(relu, [_vi("x", F, [4])], [_vi("y", F, [2, 2])])
    elif kind == "relu-out-scalar":
        m = _model(relu, [_vi("x", F, [4])], [_vi("y", F, [])])
    elif kind == "relu-out-int64":
        m = _model(relu, [_vi("x", F, [4])], [_vi("y", I64, [4])])
    elif kind == "add-not-broadcastable":
        m = _model([helper.make_node("Add", ["a", "b"], ["y"])], [_vi("a", F, [4]), _vi("b", F, [5])],
                   [_vi("y", F, [5])])
    elif kind == "intermediate-int64":
        m = _model([helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Neg", ["t"], ["y"])],
                   [_vi("x", F, [4])], [_vi("y", F, [4])], value_info=[_vi("t", I64, [4])])
    elif kind == "intermediate-shape":
        m = _model([helper.make_node("Relu", ["x"], ["t"]), helper.make_node("Neg", ["t"], ["y"])],
                   [_vi("x", F, [4])], [_vi("y", F, [4])], value_info=[_vi("t", F, [64])])
    elif kind == "matmul-inner-mismatch":
        m = _model([helper.make_node("MatMul", ["a", "b"], ["y"])], [_vi("a", F, [2, 3]), _vi("b", F, [4, 2])],
                   [_vi("y", F, [2, 2])])
    elif kind == "reshape-count":
        shape = helper.make_tensor("s", I64, [2], [3, 3])
        m = _model([helper.make_node("Reshape", ["x", "s"], ["y"])], [_vi("x", F, [4])], [_vi("y", F, [3, 3])],
                   inits=[shape])
    elif kind == "concat-rank":
        m = _model([helper.make_node("Concat", ["a", "b"], ["y"], axis=0)], [_vi("a", F, [2]), _vi("b", F, [2, 2])],
                   [_vi("y", F, [4])])
    elif kind == "initializer-shape":  # the initializer's data does not match its dims
        w = TensorProto(name="w", data_type=F, dims=[8], float_data=[1.0] * 4)
        m = _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", F, [8])], [_vi("y", F, [8])], inits=[w])
    elif kind == "initializer-raw-short":
        w = TensorProto(name="w", data_type=F, dims=[8], raw_data=b"\0" * 12)
        m = _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", F, [8])], [_vi("y", F, [8])], inits=[w])
    elif kind == "input-dtype-vs-op":
        m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", TensorProto.STRING, [4])], [_vi("y", F, [4])])
    elif kind == "gemm-declared":
        m = _model([helper.make_node("Gemm", ["a", "b"], ["y"])], [_vi("a", F, [2, 3]), _vi("b", F, [3, 4])],
                   [_vi("y", F, [2, 5])])
    elif kind == "transpose-perm":
        m = _model([helper.make_node("Transpose", ["x"], ["y"], perm=[0, 5])], [_vi("x", F, [2, 3])],
                   [_vi("y", F, [3, 2])])
    elif kind == "softmax-axis":
        m = _model([helper.make_node("Softmax", ["x"], ["y"], axis=7)], [_vi("x", F, [2, 3])], [_vi("y", F, [2, 3])])
    elif kind == "conv-dilation-0":
        w = helper.make_tensor("w", F, [1, 1, 2, 2], [1.0] * 4)
        m = _model([helper.make_node("Conv", ["x", "w"], ["y"], dilations=[0, 0])], [_vi("x", F, [1, 1, 4, 4])],
                   [_vi("y", F, [1, 1, 3, 3])], inits=[w])
    elif kind == "split-sizes":
        s = helper.make_tensor("s", I64, [2], [3, 3])
        m = _model([helper.make_node("Split", ["x", "s"], ["a", "b"], axis=0)], [_vi("x", F, [4])],
                   [_vi("a", F, [3]), _vi("b", F, [3])], inits=[s])
    elif kind == "cast-to-999":
        m = _model([helper.make_node("Cast", ["x"], ["y"], to=999)], [_vi("x", F, [4])], [_vi("y", F, [4])])
    else:
        raise KeyError(kind)
    return {"model": m.SerializeToString(), "load": {}, "providers": ["gpu", "cpu"], "seed": 0,
            "check": params[1] if len(params) > 1 else True}


#: indexing ops the providers claim (Gather, GatherElements, GatherND, Slice, Split, Pad, ...)
#: and two they do not (ScatterND, ScatterElements: must be a typed "unsupported")
INDEX_KINDS = ["gather-axis0-n", "gather-axis0-neg", "gather-axis1-n", "gather-huge", "gather-ok-neg",
               "gatherelements-n", "gatherelements-neg", "gathernd-n", "gathernd-neg", "gathernd-batch",
               "scatternd-n", "scatterelements-n", "slice-starts-huge", "slice-ends-neg-huge",
               "slice-axes-oor", "slice-step-neg", "split-oor-axis", "pad-neg-huge", "gather-init-n"]


def build_index(params):
    import numpy as np
    TensorProto, helper = _h()
    F, I64 = TensorProto.FLOAT, TensorProto.INT64
    kind, provider = params
    feeds = {"x": np.arange(12, dtype=np.float32).reshape(3, 4)}
    x = _vi("x", F, [3, 4])

    def idx(name, arr):
        a = np.asarray(arr, dtype=np.int64)
        feeds[name] = a
        return _vi(name, I64, list(a.shape))

    rank = {"gathernd-n": 1, "gathernd-neg": 1, "gathernd-batch": 1, "gather-huge": 2}.get(kind, 2)
    y = _sym("y", F, rank)
    inits = []

    def const(name, arr):
        inits.append(helper.make_tensor(name, I64, [len(arr)], list(arr)))
        return name
    if kind.startswith("gather-") and kind != "gather-init-n":
        axis = 1 if "axis1" in kind else 0
        vals = {"gather-axis0-n": [0, 3], "gather-axis0-neg": [-4, 0], "gather-axis1-n": [1, 4],
                "gather-huge": [2 ** 62], "gather-ok-neg": [-1, -3]}[kind]
        m = _model([helper.make_node("Gather", ["x", "i"], ["y"], axis=axis)], [x, idx("i", vals)], [y])
    elif kind == "gather-init-n":
        m = _model([helper.make_node("Gather", ["x", "i"], ["y"], axis=0)], [x], [y],
                   inits=[helper.make_tensor("i", I64, [2], [1, 7])])
        feeds.pop("i", None)
    elif kind.startswith("gatherelements"):
        v = [[0, 1, 2, 3], [3, 0, 4, 1]] if kind.endswith("-n") else [[0, 1, 2, 3], [-5, 0, 1, 1]]
        m = _model([helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1)], [x, idx("i", v)], [y])
    elif kind.startswith("gathernd"):
        v = {"gathernd-n": [[0, 1], [3, 0]], "gathernd-neg": [[-4, 0]], "gathernd-batch": [[2, 9]]}[kind]
        m = _model([helper.make_node("GatherND", ["x", "i"], ["y"])], [x, idx("i", v)], [y])
    elif kind == "scatternd-n":
        feeds["u"] = np.ones((1,), np.float32)
        m = _model([helper.make_node("ScatterND", ["x", "i", "u"], ["y"])],
                   [x, idx("i", [[5, 0]]), _vi("u", F, [1])], [y])
    elif kind == "scatterelements-n":
        feeds["u"] = np.ones((1, 1), np.float32)
        m = _model([helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1)],
                   [x, idx("i", [[9]]), _vi("u", F, [1, 1])], [y])
    elif kind.startswith("slice"):
        starts, ends, axes, steps = {"slice-starts-huge": ([2 ** 62], [2 ** 63 - 1], [0], [1]),
                                     "slice-ends-neg-huge": ([0], [-(2 ** 62)], [1], [1]),
                                     "slice-axes-oor": ([0], [1], [5], [1]),
                                     "slice-step-neg": ([100], [-100], [1], [-1])}[kind]
        ins = [const("s", starts), const("e", ends), const("a", axes), const("t", steps)]
        m = _model([helper.make_node("Slice", ["x"] + ins, ["y"])], [x], [y], inits=inits)
    elif kind == "split-oor-axis":
        m = _model([helper.make_node("Split", ["x"], ["y", "z"], axis=3, num_outputs=2)], [x],
                   [y, _sym("z", F, 2)], opset=18)
    elif kind == "pad-neg-huge":
        m = _model([helper.make_node("Pad", ["x", const("p", [0, -(2 ** 40), 0, 0])], ["y"])], [x], [y],
                   inits=inits)
    else:
        raise KeyError(kind)
    invalid = kind not in ("gather-ok-neg", "slice-starts-huge", "slice-ends-neg-huge", "slice-step-neg")
    return {"model": m.SerializeToString(), "load": {}, "providers": [provider], "feeds": feeds, "seed": 0,
            "invalid": invalid}


#: fragments that attack HTML, XML, DOT, terminals and format strings
HOSTILE_FRAGMENTS = ["<script>window.__pwned=1</script>", '"', "'", "&amp;", "\x1b]0;pwned\x07", "\x1b[2J",
                     "\x08\x08", "\r", "\n", "\u202e", "\u2066", "\x9b", "\\N\\G", "}", "{0}", "%s", "]]>",
                     "-->", "<img src=x onerror=alert(1)>", "\t", "\x00", "\x7f", "\ufeff", "é中✓", " "]


def _hostile_string(rng, long=False):
    s = "".join(rng.choice(HOSTILE_FRAGMENTS) for _ in range(rng.randrange(1, 5)))
    return s * 2000 if long else s


def build_names(params):
    TensorProto, helper = _h()
    F = TensorProto.FLOAT
    slot, seed = params
    rng = random.Random(seed)
    hs = _hostile_string(rng, long=(slot == "long"))
    names = {"node": "n", "value": "t", "input": "x", "output": "y", "graph": "g", "doc": "", "meta": "k",
             "producer": "p", "provider": "gpu", "domain": ""}
    key = "node" if slot in ("long", "invalid-utf8") else slot
    names[key] = (names[key] + hs) if slot != "invalid-utf8" else "NAME@@"
    nodes = [helper.make_node("Relu", [names["input"]], [names["value"]], name=names["node"] + "0",
                              doc_string=names["doc"]),
             helper.make_node("Softmax", [names["value"]], [names["output"]], name=names["node"] + "1")]
    if slot == "domain":
        nodes.append(helper.make_node("Hostile" + hs[:20], [names["output"]], ["z"],
                                      domain="ai.fuzz" + hs[:20], name="custom" + hs))
    outs = [_vi(names["output"], F, [4])] + ([_vi("z", F, [4])] if slot == "domain" else [])
    g = helper.make_graph(nodes, names["graph"], [_vi(names["input"], F, [4])], outs, doc_string=names["doc"])
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid("ai.fuzz" + hs[:20], 1)] if slot == "domain"
                                              else [])
    m = helper.make_model(g, opset_imports=opsets, producer_name=names["producer"], doc_string=names["doc"])
    m.ir_version = 8
    if slot == "meta":
        helper.set_model_props(m, {names["meta"]: hs, "plain": hs})
    data = m.SerializeToString()
    if slot == "invalid-utf8":
        data = data.replace(b"NAME@@", b"NA\xff\xfe\xc0")
    return {"model": data, "slot": slot, "provider_name": names["provider"], "hostile": hs}


EXT_KINDS = ["legit", "dotdot", "absolute", "symlink-out", "symlink-etc", "hardlink-out", "offset-huge",
             "offset-negative", "offset-text", "length-huge", "length-short", "location-dir", "location-empty",
             "fifo", "dev-zero", "sub-dotdot", "nested-ok", "missing", "sub-dotdot-inside", "nul-location"]


def build_extdata(params, workdir):
    """Y = X + W with W (float32 [4]) in an external file whose path or range is hostile."""
    import numpy as np
    import onnx
    TensorProto, helper = _h()
    kind = params[0]
    d = Path(workdir)
    md = d / "model"
    md.mkdir()
    outside = d / "outside.bin"
    w = np.arange(4, dtype=np.float32) + 1
    outside.write_bytes(w.tobytes())
    (md / "w.bin").write_bytes(w.tobytes())
    loc, offset, length = "w.bin", None, None
    if kind == "dotdot":
        loc = "../outside.bin"
    elif kind == "absolute":
        loc = str(outside)
    elif kind == "symlink-out":
        os.symlink(outside, md / "link.bin")
        loc = "link.bin"
    elif kind == "symlink-etc":
        os.symlink("/etc/hostname" if os.path.exists("/etc/hostname") else "/etc/passwd", md / "link.bin")
        loc = "link.bin"
    elif kind == "hardlink-out":
        try:
            os.link(outside, md / "hard.bin")
            loc = "hard.bin"
        except OSError:
            loc = "w.bin"
    elif kind == "offset-huge":
        offset = str(2 ** 62)
    elif kind == "offset-negative":
        offset = "-8"
    elif kind == "offset-text":
        offset = "abc"
    elif kind == "length-huge":
        length = str(2 ** 40)
    elif kind == "length-short":
        length = "8"
    elif kind == "location-dir":
        (md / "adir").mkdir()
        loc = "adir"
    elif kind == "location-empty":
        loc = ""
    elif kind == "fifo":
        os.mkfifo(md / "pipe.bin")
        loc = "pipe.bin"
    elif kind == "dev-zero":
        loc = "/dev/zero"
    elif kind == "sub-dotdot":
        (md / "sub").mkdir()
        loc = "sub/../../outside.bin"
    elif kind == "nested-ok":
        (md / "sub").mkdir()
        (md / "sub" / "w.bin").write_bytes(w.tobytes())
        loc = "sub/w.bin"
    elif kind == "missing":
        loc = "nope.bin"
    elif kind == "sub-dotdot-inside":  # resolves inside the folder: valid
        (md / "sub").mkdir()
        loc = "sub/../w.bin"
    elif kind == "nul-location":
        loc = "w\x00.bin"
    t = TensorProto()
    t.name, t.data_type = "w", TensorProto.FLOAT
    t.dims.extend([4])
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", loc), ("offset", offset), ("length", length)):
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, v
    m = _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", TensorProto.FLOAT, [4])],
               [_vi("y", TensorProto.FLOAT, [4])], inits=[t])
    path = md / "m.onnx"
    onnx.save(m, str(path), save_as_external_data=False)
    escaping = kind in ("dotdot", "absolute", "symlink-out", "symlink-etc", "dev-zero", "sub-dotdot")
    return {"model": str(path), "load": {}, "providers": ["cpu"], "seed": 0, "escaping": escaping,
            "feeds": {"x": np.ones(4, np.float32)}, "expected": {"y": w + 1} if kind in ("legit", "nested-ok", "sub-dotdot-inside")
            else None}


FEED_KINDS = ["float64", "big-endian", "list", "ragged", "object", "string", "none", "0-d", "wrong-shape",
              "transposed", "extra-dim", "non-contiguous", "read-only", "memmap", "fortran", "unaligned",
              "masked", "masked-none", "int-for-float", "nan-int", "huge-shape", "bool", "complex",
              "datetime", "structured", "subclass", "positional", "positional-short", "extra-name",
              "empty-dict", "initializer-fed", "int-key", "bytes"]


def build_feeds(params, workdir):
    import numpy as np
    from hetero_explore.data import models
    kind = params[0]
    m = models.mlp("tiny")
    x = np.random.default_rng(5).standard_normal((2, 8)).astype(np.float32)
    good = {"x": x}
    if kind == "float64":
        f = {"x": x.astype(np.float64)}
    elif kind == "big-endian":
        f = {"x": x.astype(">f4")}
    elif kind == "list":
        f = {"x": x.tolist()}
    elif kind == "ragged":
        f = {"x": [[1.0], [1.0, 2.0]]}
    elif kind == "object":
        f = {"x": x.astype(object)}
    elif kind == "string":
        f = {"x": "abc"}
    elif kind == "none":
        f = {"x": None}
    elif kind == "0-d":
        f = {"x": np.float32(1)}
    elif kind == "wrong-shape":
        f = {"x": x[:, :5]}
    elif kind == "transposed":
        f = {"x": x.T}
    elif kind == "extra-dim":
        f = {"x": x[None]}
    elif kind == "non-contiguous":
        wide = np.zeros((2, 16), np.float32)
        wide[:, ::2] = x
        f = {"x": wide[:, ::2]}
    elif kind == "read-only":
        r = x.copy()
        r.flags.writeable = False
        f = {"x": r}
    elif kind == "memmap":
        mm = np.memmap(Path(workdir) / "mm.bin", dtype=np.float32, mode="w+", shape=x.shape)
        mm[:] = x
        f = {"x": mm}
    elif kind == "fortran":
        f = {"x": np.asfortranarray(x)}
    elif kind == "unaligned":
        u = np.zeros(x.nbytes + 1, np.uint8)[1:].view(np.float32).reshape(x.shape)
        u[...] = x
        f = {"x": u}
    elif kind == "masked":
        f = {"x": np.ma.masked_array(x, mask=np.eye(2, 8, dtype=bool))}
    elif kind == "masked-none":
        f = {"x": np.ma.masked_array(x, mask=False)}
    elif kind == "int-for-float":
        f = {"x": x.astype(np.int32)}
    elif kind == "nan-int":
        f = {"x": np.full((2, 8), np.nan).astype(np.int64)}
    elif kind == "huge-shape":
        f = {"x": np.broadcast_to(np.float32(1), (2, 10 ** 9))}
    elif kind == "bool":
        f = {"x": x > 0}
    elif kind == "complex":
        f = {"x": x.astype(np.complex64)}
    elif kind == "datetime":
        f = {"x": np.zeros((2, 8), "datetime64[s]")}
    elif kind == "structured":
        f = {"x": np.zeros((2, 8), [("a", "f4")])}
    elif kind == "subclass":
        f = {"x": x.view(np.matrix)}
    elif kind == "positional":
        f = [x]
    elif kind == "positional-short":
        f = []
    elif kind == "extra-name":
        f = {"x": x, "zz": x}
    elif kind == "empty-dict":
        f = {}
    elif kind == "initializer-fed":
        import onnx
        f = {"x": x, onnx.load_from_string(m.SerializeToString()).graph.initializer[0].name: x}
    elif kind == "int-key":
        f = {0: x}
    elif kind == "bytes":
        f = {"x": x.tobytes()}
    else:
        raise KeyError(kind)
    return {"model": m.SerializeToString(), "load": {}, "providers": ["gpu", "cpu"], "feeds": f,
            "good": good if kind in ("non-contiguous", "read-only", "memmap", "fortran", "unaligned",
                                     "masked-none", "subclass", "positional") else None, "seed": 0}


BOMB_KINDS = ["constantofshape-fold", "constantofshape-runtime", "expand-huge", "range-huge", "nested-functions",
              "resize-huge", "pad-huge", "reshape-huge-init", "declared-input-int64-max", "tile-huge"]


def build_bombs(params):
    import numpy as np
    import onnx
    TensorProto, helper = _h()
    F, I64 = TensorProto.FLOAT, TensorProto.INT64
    kind = params[0]
    feeds = None
    load = {}
    if kind == "constantofshape-fold":
        s = helper.make_tensor("s", I64, [1], [700000000])
        m = _model([helper.make_node("ConstantOfShape", ["s"], ["c"]), helper.make_node("ReduceSum", ["c"], ["y"])],
                   [], [_sym("y", F, 1)], inits=[s])
    elif kind == "constantofshape-runtime":
        m = _model([helper.make_node("ConstantOfShape", ["s"], ["y"])], [_vi("s", I64, [1])], [_sym("y", F, 1)])
        feeds = {"s": np.array([10 ** 12], np.int64)}
    elif kind == "expand-huge":
        m = _model([helper.make_node("Expand", ["x", "s"], ["y"])], [_vi("x", F, [1]), _vi("s", I64, [2])],
                   [_sym("y", F, 2)])
        feeds = {"x": np.ones(1, np.float32), "s": np.array([10 ** 6, 10 ** 6], np.int64)}
    elif kind == "range-huge":
        m = _model([helper.make_node("Range", ["a", "b", "d"], ["y"])],
                   [_vi("a", F, []), _vi("b", F, []), _vi("d", F, [])], [_sym("y", F, 1)])
        feeds = {"a": np.float32(0), "b": np.float32(1e12), "d": np.float32(1)}
        feeds = {k: np.asarray(v) for k, v in feeds.items()}
    elif kind == "nested-functions":
        funcs = []
        for i in range(25):
            body = ([helper.make_node("Relu", ["a"], ["b"])] if i == 0 else
                    [helper.make_node(f"f{i - 1}", ["a"], ["t"], domain="local"),
                     helper.make_node(f"f{i - 1}", ["t"], ["b"], domain="local")])
            funcs.append(helper.make_function("local", f"f{i}", ["a"], ["b"], body,
                                              [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]))
        g = helper.make_graph([helper.make_node("f24", ["x"], ["y"], domain="local")], "g",
                              [_vi("x", F, [4])], [_vi("y", F, [4])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
                              functions=funcs)
        m.ir_version = 8
    elif kind == "resize-huge":
        sc = helper.make_tensor("sc", F, [4], [1, 1, 1e5, 1e5])
        m = _model([helper.make_node("Resize", ["x", "", "sc"], ["y"])], [_vi("x", F, [1, 1, 4, 4])],
                   [_sym("y", F, 4)], inits=[sc])
    elif kind == "pad-huge":
        m = _model([helper.make_node("Pad", ["x", "p"], ["y"])], [_vi("x", F, [4]), _vi("p", I64, [2])],
                   [_sym("y", F, 1)])
        feeds = {"x": np.ones(4, np.float32), "p": np.array([0, 10 ** 12], np.int64)}
    elif kind == "reshape-huge-init":
        s = helper.make_tensor("s", I64, [2], [10 ** 9, 10 ** 9])
        m = _model([helper.make_node("Reshape", ["x", "s"], ["y"])], [_vi("x", F, [4])], [_sym("y", F, 2)],
                   inits=[s])
    elif kind == "declared-input-int64-max":
        m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", F, [2 ** 63 - 1])], [_sym("y", F, 1)])
    elif kind == "tile-huge":
        r = helper.make_tensor("r", I64, [1], [10 ** 12])
        m = _model([helper.make_node("Tile", ["x", "r"], ["y"])], [_vi("x", F, [4])], [_sym("y", F, 1)], inits=[r])
    else:
        raise KeyError(kind)
    onnx.checker  # noqa: B018 (imported for the worker's warm-up)
    return {"model": m.SerializeToString(), "load": load, "providers": ["cpu"], "feeds": feeds, "seed": 0}


# =============================================================================================
# running one case (in the worker)
# =============================================================================================
def _typed(e) -> tuple[str, str]:
    from hetero_explore.ir.errors import HeteroExploreError
    msg = str(e)
    if isinstance(e, HeteroExploreError):
        if not msg.strip():
            return "untyped", f"{type(e).__name__} with an empty message"
        return "typed", f"{type(e).__name__}: {msg[:300]}"
    tb = traceback.extract_tb(e.__traceback__)
    where = f" at {Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
    return "untyped", f"{type(e).__name__}{where}: {msg[:300]}"


def _ort(model, feeds):
    """onnxruntime's outputs, or None when it refuses the model or the feeds."""
    try:
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.log_severity_level = 4
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        src = model if isinstance(model, (bytes, str)) else model.SerializeToString()
        sess = ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        vals = sess.run(None, feeds)
        return dict(zip(names, vals))
    except Exception:
        return None


def _agree(ours, ref) -> str | None:
    """None when ``ours`` matches onnxruntime's ``ref``, else what differs."""
    import numpy as np
    if set(ours) != set(ref):
        return f"outputs {sorted(ours)} vs onnxruntime's {sorted(ref)}"
    for k in ref:
        a, b = np.asarray(ours[k]), np.asarray(ref[k])
        if a.shape != b.shape:
            return f"output {k!r}: shape {a.shape} vs onnxruntime's {b.shape}"
        if a.dtype != b.dtype:
            return f"output {k!r}: dtype {a.dtype} vs onnxruntime's {b.dtype}"
        if a.dtype.kind == "f":
            if not np.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True):
                i = int(np.argmax(~np.isclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True)))
                return f"output {k!r}: values differ, first at flat index {i}: {a.ravel()[i]!r} vs {b.ravel()[i]!r}"
        elif not np.array_equal(a, b):
            return f"output {k!r}: values differ"
    return None


def _run_model(spec) -> tuple[str, str]:
    import hetero_explore as he
    from hetero_explore.execution.inputs import random_inputs
    try:
        g = he.load_model(spec["model"], **spec.get("load", {}), check=spec.get("check", True))
        p = he.plan(g, spec["providers"])
        feeds = spec.get("feeds")
        if feeds is None:
            feeds = random_inputs(g, seed=spec.get("seed", 0), max_bytes=64 << 20)
        run = he.execute(p, feeds)
    except Exception as e:
        return _typed(e)
    if spec.get("escaping"):
        return "wrong", "loaded external data from outside the model's folder"
    ours = dict(run.outputs)
    if spec.get("expected") is not None:
        bad = _agree(ours, spec["expected"])
        return ("wrong", bad) if bad else ("ok", "")
    good = spec.get("good")
    import numpy as np
    ort_feeds = good if good is not None else feeds
    if isinstance(ort_feeds, (list, tuple)):
        ort_feeds = dict(zip(g.inputs, ort_feeds))
    try:
        ort_feeds = {k: np.ascontiguousarray(np.asarray(v)) for k, v in ort_feeds.items()}
    except Exception:
        return "unverified", "feeds onnxruntime cannot take"
    ref = _ort(spec["model"], ort_feeds)
    if ref is None and spec.get("invalid"):
        return "wrong", ("answered although an index is out of range (onnxruntime refuses): "
                         + ", ".join(f"{k} {np.asarray(v).shape} = {np.asarray(v).ravel()[:6].tolist()}"
                                     for k, v in ours.items()))
    if ref is None:
        return "unverified", "onnxruntime refused the model or its feeds"
    bad = _agree(ours, ref)
    if bad and _near_overflow(spec["model"]):
        # weights within a few orders of float32's limit: intermediate values overflow, and
        # where inf/NaN appear depends on the evaluation order (onnxruntime folds BatchNorm into
        # Conv weights, for one), so onnxruntime's answer is no oracle here
        return "unverified", f"{bad} (float weights near float32 overflow: order-dependent results)"
    return ("wrong", bad) if bad else ("ok", "")


def _near_overflow(model, limit: float = 1e30) -> bool:
    """Does a float initializer or Constant hold a non-finite value or one beyond ``limit``?"""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    try:
        m = model if isinstance(model, onnx.ModelProto) else onnx.load_from_string(model)
        tensors = list(m.graph.initializer) + [a.t for n in m.graph.node for a in n.attribute if a.HasField("t")]
        for t in tensors:
            a = numpy_helper.to_array(t)
            if a.dtype.kind == "f" and a.size and not (np.isfinite(a).all() and np.abs(a).max() <= limit):
                return True
    except Exception:
        return False
    return False


_RAW_TERMINAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_RAW_HTML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def _run_names(spec, workdir) -> tuple[str, str]:
    """Every view of a model with a hostile string in one slot: DOT, HTML report, widget, CLI."""
    import hetero_explore as he
    from hetero_explore import VirtualProvider
    problems = []
    try:
        g = he.load_model(spec["model"])
        provs = [VirtualProvider(spec["provider_name"], "cuda:0", ops=["Relu"]),
                 VirtualProvider("cpu", "cpu:0", ops=["Relu", "Softmax"])]
        p = he.plan(g, provs)
    except Exception as e:
        cat, detail = _typed(e)
        if cat != "typed":
            return cat, detail
        p = None
    if p is not None:
        for level in ("node", "partition"):
            src = p.to_graphviz(level=level, show_initializers=True).source
            if _RAW_HTML.search(src):
                problems.append(f"raw control character in the DOT source ({level})")
            for line in src.splitlines():
                if "<script" in line and "label=<" in line:
                    problems.append("an HTML-like DOT label carries a model string")
        page = p.to_html()
        if page.count("<script") != 1 or "<img src=x" in page or _RAW_HTML.search(page):
            problems.append("the HTML report shows a model string unescaped")
        try:
            from hetero_explore.viz import widget as W
            ex = he.explore(g, providers=provs)
            app = ex.show()
            app.background_drawing = False
            try:
                for v in W.VIEWS:
                    app.select(v)
                    html = app.views[v].value
                    if "<script>window" in html or "<img src=x" in html or _RAW_HTML.search(html):
                        problems.append(f"the widget's {v} view shows a model string unescaped")
            finally:
                app.close()
        except ImportError:
            pass
        except Exception as e:
            cat, detail = _typed(e)
            if cat != "typed":
                return cat, "widget: " + detail
    # the command line, on the model file
    from hetero_explore.cli.main import main
    path = Path(workdir) / "hostile.onnx"
    path.write_bytes(spec["model"])
    for argv in (["plan", str(path), "--providers", "cpu"], ["plan", str(path), "--providers", "cpu", "--json"],
                 ["plan", str(path), "--providers", "gpu"]):
        out, err = io.StringIO(), io.StringIO()
        try:
            with redirect_stdout(out), redirect_stderr(err):
                rc = main(argv)
        except SystemExit as e:
            rc = e.code
        text = out.getvalue() + err.getvalue()
        if _RAW_TERMINAL.search(text):
            problems.append(f"`{' '.join(argv[:1] + argv[2:])}` printed a raw control character")
        if "Traceback" in text or rc == 3:
            problems.append(f"`{' '.join(argv[:1] + argv[2:])}` failed untyped: {err.getvalue()[:200]}")
        if rc not in (0, 2):
            problems.append(f"`{' '.join(argv[:1] + argv[2:])}` exited {rc}")
        if rc == 2 and err.getvalue().count("\n") != 1:
            problems.append("an error message of more than one line")
    if problems:
        return "wrong", "; ".join(dict.fromkeys(problems))
    return "ok", ""


def run_case(case: Case) -> tuple[str, str]:
    """Build and run one case; returns (category, detail). Runs in a worker."""
    with tempfile.TemporaryDirectory(prefix="hx-fuzz-") as wd:
        try:
            fam = case.family
            if fam == "mutate":
                spec = build_mutate(case.params)
            elif fam == "lying":
                spec = build_lying(case.params)
            elif fam == "index":
                spec = build_index(case.params)
            elif fam == "names":
                return _run_names(build_names(case.params), wd)
            elif fam == "extdata":
                spec = build_extdata(case.params, wd)
            elif fam == "feeds":
                spec = build_feeds(case.params, wd)
            elif fam == "bombs":
                spec = build_bombs(case.params)
            elif fam == "diff":   # the differential fuzzer (bench/difffuzz.py): its own categories
                from support.diffcheck import run_case as run_diff
                return run_diff(case.params)
            elif fam == "diffmodel":   # one given model (shrinking a crash or a hang)
                from support.diffcheck import run_model_case
                return run_model_case(case.params)
            else:
                raise KeyError(fam)
        except Exception as e:  # the harness itself failed to build the case
            return "untyped", f"harness could not build the case: {type(e).__name__}: {e}"
        return _run_model(spec)


# =============================================================================================
# the case lists
# =============================================================================================
def cases(n_mutate: int = 120, n_names_seeds: int = 3, *, cuda: bool = True, seed: int = 0) -> list[Case]:
    """The cases: ``n_mutate`` mutated real models (spread over models and kinds), every
    lying-shape, index, external-data, feed and bomb case, hostile names in every slot
    with ``n_names_seeds`` strings each."""
    out = []
    rng = random.Random(seed)
    models_ = ["mlp", "cnn", "transformer", "demo"]
    kinds = ["truncate", "flip", "byte", "splice"]
    for i in range(n_mutate):
        m, k = models_[i % 4], kinds[(i // 4) % 4]
        s = rng.randrange(2 ** 31)
        out.append(Case("mutate", f"{m}-{k}-{s}", (m, k, s)))
    for k in ["relu-out-bigger", "relu-out-huge", "relu-out-smaller", "relu-out-rank", "relu-out-scalar",
              "relu-out-int64", "add-not-broadcastable", "intermediate-int64", "intermediate-shape",
              "matmul-inner-mismatch", "reshape-count", "concat-rank", "initializer-shape",
              "initializer-raw-short", "input-dtype-vs-op", "gemm-declared", "transpose-perm", "softmax-axis",
              "conv-dilation-0", "split-sizes", "cast-to-999"]:
        out.append(Case("lying", k, (k,)))
        out.append(Case("lying", k + "-nocheck", (k, False)))
    provs = ["cpu", "gpu"] + (["cuda"] if cuda else [])
    for k in INDEX_KINDS:
        for p in provs:
            out.append(Case("index", f"{k}-{p}", (k, p)))
    for slot in ["node", "value", "input", "output", "graph", "doc", "meta", "producer", "provider", "domain"]:
        for s in range(n_names_seeds):
            out.append(Case("names", f"{slot}-{s}", (slot, s)))
    out += [Case("names", "long-0", ("long", 0)), Case("names", "invalid-utf8-0", ("invalid-utf8", 0))]
    out += [Case("extdata", k, (k,)) for k in EXT_KINDS]
    out += [Case("feeds", k, (k,)) for k in FEED_KINDS]
    out += [Case("bombs", k, (k,)) for k in BOMB_KINDS]
    return out


# =============================================================================================
# the pool: reused spawn workers with a memory cap; a dead or hung worker is replaced
# =============================================================================================
def _worker(conn, memory_cap):
    import resource
    if memory_cap:
        resource.setrlimit(resource.RLIMIT_AS, (memory_cap, memory_cap))
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
    import warnings
    warnings.simplefilter("ignore")
    try:  # warm up the imports once per worker
        import hetero_explore  # noqa: F401
        import onnxruntime  # noqa: F401
    except Exception:
        pass
    conn.send(("ready", None))
    while True:
        try:
            case = conn.recv()
        except EOFError:
            return
        if case is None:
            return
        t0 = time.perf_counter()
        cap = FAMILY_CAPS.get(case.family)
        if memory_cap and cap and cap < memory_cap:
            resource.setrlimit(resource.RLIMIT_AS, (cap, memory_cap))
        try:
            cat, detail = run_case(case)
        except BaseException as e:  # MemoryError, RecursionError, SystemExit: a result, not a death
            cat, detail = _typed(e) if isinstance(e, Exception) else ("untyped", f"{type(e).__name__}: {e}")
        finally:
            if memory_cap and cap and cap < memory_cap:
                resource.setrlimit(resource.RLIMIT_AS, (memory_cap, memory_cap))
        conn.send(("done", (cat, detail, time.perf_counter() - t0)))


class _Slot:
    def __init__(self, ctx, memory_cap):
        self.ctx, self.cap = ctx, memory_cap
        self.start()

    def start(self):
        self.parent, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_worker, args=(child, self.cap), daemon=True)
        self.proc.start()
        child.close()
        self.ready = False
        self.case = None
        self.t0 = None
        self.n = 0

    def kill(self):
        try:
            self.proc.kill()
        except Exception:
            pass
        self.proc.join(5)
        self.parent.close()


def run_cases(case_list, *, workers: int = 2, timeout: float = DEFAULT_TIMEOUT,
              memory_cap: int = DEFAULT_MEMORY_CAP, max_tasks_per_child: int = 150,
              progress=None) -> list[Result]:
    """Run every case in a pool of ``workers`` reused child processes; returns one Result per
    case, in order. A worker that dies is a ``crash``; one that overruns ``timeout`` seconds on a
    case is killed and the case is a ``hang``; either way a fresh worker takes its place."""
    ctx = mp.get_context("spawn")
    todo = list(enumerate(case_list))[::-1]
    results: dict[int, Result] = {}
    slots = [_Slot(ctx, memory_cap) for _ in range(max(1, min(workers, len(case_list))))]
    startup_timeout = 300.0
    t_spawn = {id(s): time.perf_counter() for s in slots}
    try:
        while len(results) < len(case_list):
            for s in slots:
                if s.case is None and s.ready and todo:
                    s.case = todo.pop()
                    s.t0 = time.perf_counter()
                    s.parent.send(s.case[1])
            conns = [s.parent for s in slots if not s.parent.closed]
            mp.connection.wait(conns + [s.proc.sentinel for s in slots], timeout=0.5)
            now = time.perf_counter()
            for s in slots:
                msg = None
                try:
                    if s.parent.poll():
                        msg = s.parent.recv()
                except (EOFError, OSError):
                    msg = ("dead", None)
                if msg is None and not s.proc.is_alive():
                    msg = ("dead", None)
                if msg is None:
                    if s.case is not None and now - s.t0 > timeout:
                        i, c = s.case
                        results[i] = Result(c, "hang", f"no result after {timeout:.0f} s", now - s.t0)
                        s.kill()
                        s.start()
                        t_spawn[id(s)] = now
                        if progress:
                            progress(results[i])
                    elif not s.ready and now - t_spawn[id(s)] > startup_timeout:
                        raise RuntimeError("a fuzz worker did not start in 300 s")
                    continue
                kind, payload = msg
                if kind == "ready":
                    s.ready = True
                elif kind == "done":
                    i, c = s.case
                    cat, detail, secs = payload
                    results[i] = Result(c, cat, detail, secs)
                    s.case = None
                    s.n += 1
                    if progress:
                        progress(results[i])
                    if s.n >= max_tasks_per_child:
                        s.parent.send(None)
                        s.kill()
                        s.start()
                        t_spawn[id(s)] = now
                elif kind == "dead":
                    s.proc.join(5)
                    code = s.proc.exitcode
                    if s.case is not None:
                        i, c = s.case
                        sig = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
                        results[i] = Result(c, "crash", f"the worker died ({sig})", now - s.t0)
                        if progress:
                            progress(results[i])
                    elif not s.ready:
                        raise RuntimeError(f"a fuzz worker died while starting (exit code {code})")
                    s.kill()
                    s.start()
                    t_spawn[id(s)] = now
    finally:
        for s in slots:
            try:
                s.parent.send(None)
            except Exception:
                pass
            s.kill()
    return [results[i] for i in range(len(case_list))]


def summarize(results) -> dict:
    counts = {c: 0 for c in CATEGORIES}
    per_family: dict[str, dict] = {}
    for r in results:
        counts[r.category] += 1
        per_family.setdefault(r.case.family, {c: 0 for c in CATEGORIES})[r.category] += 1
    return {"total": len(results), "counts": counts, "per_family": per_family}
