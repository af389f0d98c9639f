"""Random *valid* ONNX models over the ops the registry claims (the differential fuzzer's
generator, issue 29).

A model is a random DAG grown one node at a time. For each node an op is drawn from the op
registry (:func:`hetero_explore.kernels.registry.registry`: the ops with CPU kernels that
claim the model's opset, with their dtypes); onnx's schema at that opset gives its inputs
(type constraints, optional and variadic ones) and attributes. Data inputs come from the
values made so far (the DAG's edges) or new graph inputs and constants, of a dtype the
schema and the op definition both allow, in shapes that fit (broadcast partners, matmul
partners, ...). Inputs that steer the op (shapes, axes, indices, pads, repeats, k, ...) are
constants made valid for the data they go with, and attributes are drawn within their
schema (axes within the rank, permutations, odd LRN sizes, ...). A candidate node is kept
only when onnx's per-node inference accepts it with static output shapes and the CPU
provider supports it (``supports(ctx)``); else another is drawn. The finished model passes
onnx's checker and strict shape inference with data propagation.

Shapes stay tiny (the CUDA simulator runs every element in Python): rank 0-4, dims 0-5,
at most :data:`MAX_ELEMENTS` elements per value, some 0-sized dims and size-1 broadcasts.
Data holds special values: +-0, +-inf, NaN, subnormals and integer extremes.

Everything is reproducible from ``seed``."""

from __future__ import annotations

import functools
import math
import random
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

#: the most elements one generated value may hold
MAX_ELEMENTS = 256
#: model opsets drawn from (every op definition claims some of them; onnxruntime runs them all)
OPSETS = (13, 14, 15, 16, 17, 18, 19, 20, 21)
#: dtypes the generator makes (numpy names); bfloat16 and the float8 family are left out (the
#: oracles' support for them is thin)
DTYPES = ("float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "uint16", "uint32",
          "uint64", "bool")
#: ops not drawn: control flow and containers (no subgraphs here), random numbers (no oracle),
#: strings and ML-domain ops, image decoding, ops beyond the model opsets, and ops whose inputs
#: this generator cannot make valid (RoI lists, sampling grids, ...)
EXCLUDE = {
    "If", "Loop", "Scan", "SequenceMap", "SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase",
    "SequenceAt", "SequenceLength", "SplitToSequence", "ConcatFromSequence", "Optional", "OptionalHasElement",
    "OptionalGetElement", "RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike", "Bernoulli",
    "Multinomial", "StringNormalizer", "StringConcat", "StringSplit", "RegexFullMatch", "TfIdfVectorizer",
    "ImageDecoder", "Constant", "RoiAlign", "MaxRoiPool", "GridSample", "AffineGrid", "Col2Im", "DeformConv",
    "MaxUnpool", "NonMaxSuppression", "RNN", "GRU", "LSTM", "STFT", "DFT", "MelWeightMatrix", "HannWindow",
    "HammingWindow", "BlackmanWindow", "Upsample", "Scatter", "DynamicQuantizeLinear", "QLinearConv",
    "QLinearMatMul", "ConvInteger", "MatMulInteger", "Attention", "RotaryEmbedding", "RMSNormalization",
    "TensorScatter", "Swish", "BitCast", "CumProd", "SwiGLU", "CausalConvWithState", "LinearAttention",
}

_INT_DTYPES = ("int64", "int32", "int16", "int8", "uint8", "uint16", "uint32", "uint64")
_FLOAT_DTYPES = ("float32", "float64", "float16")
_ONNX_OF = {n: helper.np_dtype_to_tensor_dtype(np.dtype(n)) for n in DTYPES}
_NP_OF = {v: k for k, v in _ONNX_OF.items()}
#: ops whose output size depends on their data: drawn, their outputs only graph outputs
DYNAMIC = {"NonZero", "Unique", "Compress"}
#: ops whose data inputs broadcast together (numpy's rules)
BROADCAST = {"Add", "Sub", "Mul", "Div", "Pow", "Mod", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
             "And", "Or", "Xor", "Where", "Max", "Min", "Sum", "Mean", "PRelu", "BitShift", "BitwiseAnd",
             "BitwiseOr", "BitwiseXor"}


@functools.lru_cache(maxsize=None)
def claimed_ops(opset: int) -> tuple:
    """(op type, allowed dtypes of its checked input, that input's index) for every
    default-domain op with CPU kernels claiming ``opset``, minus :data:`EXCLUDE`."""
    from hetero_explore.kernels.registry import registry
    from hetero_explore.load.ort_schemas import ORT_DEFAULT_DOMAIN_OPS
    out: dict = {}
    for d in registry():
        # onnxruntime's default-domain ops (SimplifiedLayerNormalization) have an onnx schema only
        # once a load has registered it in this process: drawing them would make a seed's model
        # depend on what the process loaded before (a worker and --repro drew different models)
        if (d.domain != "" or "cpu" not in d.targets or d.op_type in EXCLUDE or d.op_type in ORT_DEFAULT_DOMAIN_OPS
                or not d.claims(opset)):
            continue
        try:
            onnx.defs.get_schema(d.op_type, opset, "")
        except Exception:
            continue
        dts, idx = out.get(d.op_type, (set(), d.dtype_input))
        out[d.op_type] = (dts | {t for t in d.dtypes if t in DTYPES}, idx)
    return tuple((op, tuple(sorted(dts)), idx) for op, (dts, idx) in sorted(out.items()) if dts)


@dataclass
class Val:
    name: str
    dtype: str
    shape: tuple
    const: np.ndarray | None = None


@dataclass
class Draft:
    """A node being drawn."""

    op: str
    schema: object
    inputs: list = field(default_factory=list)      # Val or None (absent optional)
    attrs: dict = field(default_factory=dict)
    types: dict = field(default_factory=dict)       # type param -> dtype name
    n_outputs: int | None = None


class Reject(Exception):
    """This draw cannot make a valid node: draw again."""


def _numel(shape) -> int:
    return int(math.prod(shape)) if shape else 1


class ModelGen:
    """Grows one random model (see the module docs); :meth:`build` returns it."""

    def __init__(self, seed: int, max_nodes: int = 20, min_nodes: int = 5, opset: int | None = None,
                 special: float = 0.15, zero_dims: float = 0.04):
        self.seed = seed
        self.rng = random.Random(seed)
        self.nrng = np.random.default_rng(seed)
        self.opset = opset or self.rng.choice(OPSETS)
        self.target = self.rng.randint(min_nodes, max(min_nodes, max_nodes))
        self.special, self.zero_dims = special, zero_dims
        self.ops = claimed_ops(self.opset)
        self.pool: list[Val] = []
        self.made: list[Val] = []
        self.nodes: list = []
        self.inputs: list[Val] = []
        self.inits: dict[str, np.ndarray] = {}
        self.feeds: dict[str, np.ndarray] = {}
        self.n = 0
        self.rejects: dict[str, int] = {}
        from hetero_explore.providers import cpu
        self.cpu = cpu()

    # -- names, data -------------------------------------------------------------------------
    def fresh_name(self, base: str) -> str:
        self.n += 1
        return f"{base}{self.n}"

    def data(self, dtype: str, shape: tuple, lo=None, hi=None, special: bool | None = None) -> np.ndarray:
        """Random data of ``dtype``/``shape``: normal floats (scale varies), small ints, with
        special values sprinkled in (unless ``special`` is False or a range is given)."""
        r, dt = self.nrng, np.dtype(dtype)
        if dt.kind == "b":
            return r.random(shape) < 0.5
        if dt.kind == "f":
            if lo is not None:
                return r.uniform(lo, hi, size=shape).astype(dt)
            scale = self.rng.choice((0.5, 1.0, 1.0, 3.0, 100.0))
            a = (r.standard_normal(shape) * scale).astype(dt)
        else:
            info = np.iinfo(dt)
            lo_, hi_ = (lo, hi) if lo is not None else (max(info.min, -6), min(info.max, 6))
            a = r.integers(lo_, hi_ + 1, size=shape, dtype=np.int64).astype(dt)
        a = np.array(a, dtype=dt).reshape(shape)
        sprinkle = (special if special is not None else lo is None) and a.size and self.rng.random() < self.special
        if sprinkle:
            flat = a.reshape(-1)
            for _ in range(self.rng.randint(1, max(1, min(3, flat.size)))):
                i = self.rng.randrange(flat.size)
                if dt.kind == "f":
                    tiny = np.finfo(dt).tiny
                    flat[i] = self.rng.choice([0.0, -0.0, np.inf, -np.inf, np.nan, tiny / 4, -tiny / 2,
                                               float(np.finfo(dt).max) / 2, 1e-3])
                else:
                    info = np.iinfo(dt)
                    flat[i] = self.rng.choice([info.min, info.max, 0, info.max - 1])
        return a

    def shape(self, rank: int | None = None, zero: bool = True) -> tuple:
        rank = self.rng.choice((0, 1, 1, 2, 2, 2, 3, 3, 4)) if rank is None else rank
        dims = [self.rng.choice((1, 2, 2, 3, 3, 4, 5)) for _ in range(rank)]
        if zero and dims and self.rng.random() < self.zero_dims:
            dims[self.rng.randrange(rank)] = 0
        while _numel(dims) > MAX_ELEMENTS // 2:
            dims[dims.index(max(dims))] -= 1
        return tuple(dims)

    def new_input(self, dtype: str, shape: tuple, const: bool | None = None, values=None) -> Val:
        """A new graph input (fed) or, with ``const``, an initializer."""
        const = self.rng.random() < 0.3 if const is None else const
        arr = np.asarray(values, dtype=dtype).reshape(shape) if values is not None else self.data(dtype, shape)
        name = self.fresh_name("c" if const else "in")
        if const:
            self.inits[name] = arr
            v = Val(name, dtype, tuple(arr.shape), arr)
        else:
            self.feeds[name] = arr
            v = Val(name, dtype, tuple(arr.shape))
            self.inputs.append(v)
        self.pool.append(v)
        return v

    def const(self, values, dtype: str = "int64", shape=None) -> Val:
        arr = np.asarray(values, dtype=dtype)
        if shape is not None:
            arr = arr.reshape(shape)
        name = self.fresh_name("k")
        self.inits[name] = arr
        return Val(name, dtype, tuple(arr.shape), arr)

    # -- picking values ----------------------------------------------------------------------
    def pick(self, dtype: str, rank=None, min_rank: int = 0, max_rank: int = 4, fresh: float = 0.15) -> Val:
        """A value made so far of ``dtype`` (recent ones first), else a new input."""
        cands = [v for v in self.pool if v.dtype == dtype and min_rank <= len(v.shape) <= max_rank
                 and (rank is None or len(v.shape) == rank)]
        if cands and self.rng.random() > fresh:
            k = min(len(cands), 6)
            return self.rng.choice(cands[-k:]) if self.rng.random() < 0.7 else self.rng.choice(cands)
        r = rank if rank is not None else self.rng.randint(min_rank, max(min_rank, min(max_rank, 4)))
        return self.new_input(dtype, self.shape(r))

    def partner(self, v: Val, dtype: str | None = None) -> Val:
        """A value that broadcasts with ``v`` (from the pool when one fits, else new)."""
        dtype = dtype or v.dtype
        fits = [u for u in self.pool if u.dtype == dtype and u is not v and _broadcasts(u.shape, v.shape)
                and _numel(np.broadcast_shapes(u.shape, v.shape)) <= MAX_ELEMENTS]
        if fits and self.rng.random() < 0.5:
            return self.rng.choice(fits[-6:])
        s = list(v.shape)
        k = self.rng.randint(0, len(s))
        s = s[k:] if self.rng.random() < 0.5 else s
        s = [1 if self.rng.random() < 0.3 else d for d in s]
        if self.rng.random() < 0.15 and len(s) < 4:
            s = [self.rng.choice((1, 2))] + s
            if _numel(np.broadcast_shapes(tuple(s), v.shape)) > MAX_ELEMENTS:
                s[0] = 1
        return self.new_input(dtype, tuple(s))

    # -- one node ----------------------------------------------------------------------------
    def dtypes_for(self, op: str, allowed_op: tuple, idx: int, schema) -> dict | None:
        """A dtype per type parameter: the checked input's from the op definition's list."""
        types = {}
        formal = schema.inputs[min(idx, len(schema.inputs) - 1)].type_str if schema.inputs else None
        have = {v.dtype for v in self.pool}
        for tc in schema.type_constraints:
            allowed = [_NP_OF[t] for t in _tensor_types(tc.allowed_type_strs)]
            if tc.type_param_str == formal:
                allowed = [t for t in allowed if t in allowed_op]
            if not allowed:
                return None
            pref = [t for t in allowed if t in have]
            types[tc.type_param_str] = self.rng.choice(pref if pref and self.rng.random() < 0.8 else allowed)
        return types

    def draft(self, op: str, allowed: tuple, idx: int) -> Draft:
        schema = onnx.defs.get_schema(op, self.opset, "")
        types = self.dtypes_for(op, allowed, idx, schema)
        if types is None:
            raise Reject("no dtype")
        d = Draft(op, schema, types=types)
        make = RECIPES.get(op, generic)
        make(self, d)
        return d

    def try_node(self, d: Draft):
        """The node of ``d`` when onnx infers it (static, small outputs) and the CPU supports it."""
        from hetero_explore.ir.context import KernelContext
        from hetero_explore.ir.graph import Node, onnx_to_np_dtype
        ins = [v.name if v is not None else "" for v in d.inputs]
        while ins and not ins[-1]:
            ins.pop()
        n_out = d.n_outputs if d.n_outputs is not None else len(d.schema.outputs)
        outs = [self.fresh_name("v") for _ in range(n_out)]
        node = helper.make_node(d.op, ins, outs, name=f"n{len(self.nodes)}", **d.attrs)
        types = {v.name: helper.make_tensor_type_proto(_ONNX_OF[v.dtype], list(v.shape)) for v in d.inputs if v}
        data = {v.name: numpy_helper.from_array(np.asarray(v.const), v.name) for v in d.inputs
                if v is not None and v.const is not None}
        try:
            res = shape_inference.infer_node_outputs(d.schema, node, types, data,
                                                     opset_imports=[helper.make_opsetid("", self.opset)])
        except Exception as e:
            raise Reject(f"inference: {str(e)[:80]}") from None
        got = []
        for o in outs:
            t = res.get(o)
            if t is None or not t.HasField("tensor_type") or t.tensor_type.elem_type not in _NP_OF:
                raise Reject("output type")
            tt = t.tensor_type
            if not tt.HasField("shape"):
                raise Reject("output shape")
            if not all(x.HasField("dim_value") for x in tt.shape.dim):
                if d.op not in DYNAMIC:   # a data-dependent size: only the ops that make one
                    raise Reject("output shape")
                shape = tuple(int(x.dim_value) if x.HasField("dim_value") else None for x in tt.shape.dim)
            else:
                shape = tuple(int(x.dim_value) for x in tt.shape.dim)
                if any(x < 0 for x in shape):
                    # onnx's inference can give a negative dim; fed to a later node's inference it
                    # aborts the process (Slice: std::clamp asserts), which is onnx's, not a finding
                    raise Reject("negative dim from onnx's inference")
                if _numel(shape) > MAX_ELEMENTS or len(shape) > 5:
                    raise Reject("too big")
            got.append(Val(o, _NP_OF[tt.elem_type], shape))
        consts = {v.name: v.const for v in d.inputs if v is not None and v.const is not None}
        ctx = KernelContext(Node(len(self.nodes), node, self.opset), self.opset,
                            [v.shape if v else None for v in d.inputs][:len(ins)],
                            [np.dtype(v.dtype) if v else None for v in d.inputs][:len(ins)],
                            [v.shape for v in got], [onnx_to_np_dtype(_ONNX_OF[v.dtype]) for v in got],
                            graph=_Consts(consts))
        if any(None in v.shape for v in got):
            ctx.out_shapes = [None if None in v.shape else v.shape for v in got]
        try:
            ok = self.cpu.supports(ctx)
        except Exception as e:  # a check that raises is the fuzzer's finding, not a rejection
            raise RuntimeError(f"the CPU provider's supports() raised on {d.op}: {type(e).__name__}: {e}") from e
        if not ok.supported:
            raise Reject(f"cpu: {ok.reason}"[:80])
        return node, got

    def add_node(self) -> bool:
        for _ in range(40):
            op, allowed, idx = self.rng.choice(self.ops)
            saved = (len(self.pool), len(self.inputs), dict(self.inits), dict(self.feeds), self.n)
            try:
                try:
                    d = self.draft(op, allowed, idx)
                except (ValueError, IndexError, KeyError, StopIteration) as e:  # a recipe's draw that cannot fit
                    raise Reject(f"recipe: {type(e).__name__}") from None
                node, outs = self.try_node(d)
            except Reject as r:
                self.rejects[op] = self.rejects.get(op, 0) + 1
                n_pool, n_in, inits, feeds, _ = saved
                del self.pool[n_pool:]
                del self.inputs[n_in:]
                self.inits, self.feeds = inits, feeds
                del r
                continue
            self.nodes.append(node)
            self.made.extend(outs)
            self.pool.extend(v for v in outs if None not in v.shape)   # data-dependent sizes: outputs only
            return True
        return False

    def build(self) -> tuple[onnx.ModelProto, dict]:
        """The model and its feeds."""
        while len(self.nodes) < self.target:
            if not self.add_node():
                break
        if not self.nodes:
            raise RuntimeError(f"seed {self.seed}: no node could be drawn at opset {self.opset}")
        produced = {v.name: v for v in self.made}
        used = {i for n in self.nodes for i in n.input}
        outs = [o for n in self.nodes for o in n.output if o not in used]
        extra = [o for n in self.nodes for o in n.output if o in used and self.rng.random() < 0.1]
        outputs = [helper.make_tensor_value_info(o, _ONNX_OF[produced[o].dtype],
                                                 [d if d is not None else f"{o}_d{i}"
                                                  for i, d in enumerate(produced[o].shape)])
                   for o in dict.fromkeys(outs + extra)]
        graph = helper.make_graph(
            self.nodes, f"fuzz{self.seed}",
            [helper.make_tensor_value_info(v.name, _ONNX_OF[v.dtype], list(v.shape)) for v in self.inputs],
            outputs, initializer=[numpy_helper.from_array(np.asarray(a), k) for k, a in self.inits.items()])
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                              producer_name="hetero_explore difffuzz")
        m.ir_version = 8 if self.opset <= 18 else 9 if self.opset <= 20 else 10
        return m, dict(self.feeds)


class _Consts:
    def __init__(self, consts):
        self._c = consts

    def is_constant(self, name):
        return name in self._c

    def initializer(self, name):
        return self._c[name]


def _tensor_types(strs):
    """The ONNX element types of ``tensor(...)`` strings the generator makes."""
    return [_ONNX_OF[_NAME[s[7:-1]]] for s in strs if s.startswith("tensor(") and s[7:-1] in _NAME]


_NAME = {"float": "float32", "double": "float64", "float16": "float16", "int64": "int64", "int32": "int32",
         "int16": "int16", "int8": "int8", "uint8": "uint8", "uint16": "uint16", "uint32": "uint32",
         "uint64": "uint64", "bool": "bool"}


def _broadcasts(a, b) -> bool:
    try:
        np.broadcast_shapes(tuple(a), tuple(b))
        return True
    except ValueError:
        return False


def make_model(seed: int, max_nodes: int = 20, min_nodes: int = 5) -> tuple[onnx.ModelProto, dict]:
    """The random model of ``seed`` and its feeds."""
    return ModelGen(seed, max_nodes=max_nodes, min_nodes=min_nodes).build()


# =============================================================================================
# recipes: how a node of an op is drawn (the generic one from the schema; others where the
# inputs must fit each other or steer the op)
# =============================================================================================
from . import modelrecipes as _r  # noqa: E402

generic = _r.generic
RECIPES = _r.RECIPES
