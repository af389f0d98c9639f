"""How :mod:`.modelgen` draws a node of each op: :func:`generic` reads the schema (inputs by
type parameter, broadcast partners, attributes drawn by name within their schema); the
recipes in :data:`RECIPES` make the inputs that must fit each other or steer the op (matmul
partners, convolution weights, axes, shapes, indices, pads, ...) valid for the data they go
with. A recipe raises :class:`.modelgen.Reject` when the values drawn cannot make a valid node."""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import helper, numpy_helper

from . import modelgen as G

_V = onnx.defs.OpSchema.FormalParameterOption


def _dtype(d, formal) -> str:
    t = d.types.get(formal.type_str)
    if t is not None:
        return t
    name = formal.type_str[7:-1] if formal.type_str.startswith("tensor(") else ""
    if name in G._NAME:
        return G._NAME[name]
    raise G.Reject(f"type {formal.type_str}")


def _rank(v) -> int:
    return len(v.shape)


# -- attributes ------------------------------------------------------------------------------------
def attr_value(g, d, name: str, spec):
    """A value for attribute ``name`` (None: leave it out)."""
    rng = g.rng
    x = d.inputs[0] if d.inputs and d.inputs[0] is not None else None
    r = _rank(x) if x is not None else 0
    A = onnx.AttributeProto
    if name == "axis":
        if d.op in ("OneHot",):
            return rng.randint(-r - 1, r)
        if d.op in ("Flatten",):
            return rng.randint(-r, r)
        return rng.randint(-r, r - 1) if r else None
    if name == "axes" and spec.type == A.INTS:
        return sorted(rng.sample(range(r), rng.randint(1, r))) if r else None
    if name in ("keepdims", "exclusive", "reverse", "upper", "select_last_index", "largest", "sorted",
                "noop_with_empty_axes", "transA", "transB", "count_include_pad", "ceil_mode"):
        return rng.randint(0, 1)
    if name == "perm":
        if not r:
            return None
        p = list(range(r))
        rng.shuffle(p)
        return p
    if name in ("alpha", "beta", "gamma", "lambd", "bias"):
        return round(rng.uniform(0.05, 2.0), 3)
    if name == "epsilon":
        return rng.choice((1e-5, 1e-3, 0.1))
    if name == "to":
        return G._ONNX_OF[rng.choice(G.DTYPES)]
    if name == "blocksize":
        return 2
    if name == "direction" and d.op == "BitShift":
        return rng.choice(("LEFT", "RIGHT"))
    if name == "fmod":
        return 1 if d.types.get("T", "float32") in G._FLOAT_DTYPES else rng.randint(0, 1)
    if name == "approximate":
        return rng.choice(("none", "tanh"))
    if name == "mode" and d.op == "DepthToSpace":
        return rng.choice(("DCR", "CRD"))
    if name == "p" and spec.type == A.INT:
        return rng.choice((1, 2))
    if name == "batch_dims":
        return 0
    if name in ("min", "max") and spec.type == A.FLOAT:
        return round(rng.uniform(-2, 2), 2)
    if name == "ratio":
        return 0.5
    if spec.required:
        raise G.Reject(f"required attribute {name}")
    return None


def attributes(g, d, skip=()):
    for name, spec in d.schema.attributes.items():
        if name in skip or name in d.attrs:
            continue
        if spec.required or g.rng.random() < 0.4:
            v = attr_value(g, d, name, spec)
            if v is not None:
                d.attrs[name] = v


# -- the generic recipe ------------------------------------------------------------------------------
def generic(g, d):
    """Inputs by type parameter (the first one picked, the others of the same type its
    broadcast partners or picked), attributes by name."""
    first = {}
    for k, f in enumerate(d.schema.inputs):
        if f.option == _V.Optional and g.rng.random() < 0.5:
            d.inputs.append(None)
            continue
        dtype = _dtype(d, f)
        count = g.rng.randint(1, 3) if f.option == _V.Variadic else 1
        for _ in range(count):
            ref = first.get(f.type_str)
            if ref is None:
                v = g.pick(dtype)
                first[f.type_str] = v
            elif d.op in G.BROADCAST:
                v = g.partner(ref, dtype)
            else:
                v = g.partner(ref, dtype) if g.rng.random() < 0.3 else _same_shape(g, ref, dtype)
            d.inputs.append(v)
    attributes(g, d)


def _same_shape(g, v, dtype):
    fits = [u for u in g.pool if u.dtype == dtype and u.shape == v.shape and u is not v]
    return g.rng.choice(fits) if fits and g.rng.random() < 0.5 else g.new_input(dtype, v.shape)


def _data(g, d, min_rank=0, max_rank=4, rank=None):
    f = d.schema.inputs[0]
    v = g.pick(_dtype(d, f), rank=rank, min_rank=min_rank, max_rank=max_rank)
    d.inputs.append(v)
    return v


# -- recipes -----------------------------------------------------------------------------------------
def binary_nonzero(g, d):
    """Div / Mod: an integer divisor is a constant with no zero (and no -1: INT_MIN / -1 traps)."""
    a = _data(g, d)
    dtype = a.dtype
    if dtype in G._INT_DTYPES:
        p = g.partner(a, dtype)
        g.pool.remove(p) if p in g.pool and p.const is None and p.name in g.feeds else None
        vals = g.data(dtype, p.shape, 1, 6, special=False)
        if np.dtype(dtype).kind == "i" and g.rng.random() < 0.5:
            vals = (vals * np.where(g.nrng.random(p.shape) < 0.5, -1, 1) * (vals > 1) + (vals <= 1) * vals
                    ).astype(dtype)
        d.inputs.append(g.const(vals, dtype, p.shape))
    else:
        d.inputs.append(g.partner(a, dtype))
    attributes(g, d)


def bitshift(g, d):
    a = _data(g, d)
    bits = np.dtype(a.dtype).itemsize * 8
    p = g.partner(a, a.dtype)
    d.inputs.append(g.const(g.data(a.dtype, p.shape, 0, bits - 1, special=False), a.dtype, p.shape))
    attributes(g, d)


def pow_(g, d):
    a = _data(g, d)
    t1 = d.types.get("T1", a.dtype)
    if t1 in G._INT_DTYPES or a.dtype in G._INT_DTYPES:
        p = g.partner(a, t1)
        d.inputs.append(g.const(g.data(t1, p.shape, 0, 3, special=False), t1, p.shape))
    else:
        d.inputs.append(g.partner(a, t1))


def matmul(g, d):
    a = _data(g, d, min_rank=1)
    k = a.shape[-1]
    n = g.rng.choice((1, 2, 3))
    if _rank(a) == 1 or g.rng.random() < 0.5:
        shape = (k, n) if g.rng.random() < 0.8 else (k,)
    else:
        shape = a.shape[:-2][-g.rng.randint(0, len(a.shape) - 2):] + (k, n) if _rank(a) > 2 else (k, n)
    fits = [u for u in g.pool if u.dtype == a.dtype and u.shape == shape]
    d.inputs.append(g.rng.choice(fits) if fits and g.rng.random() < 0.5 else g.new_input(a.dtype, shape))


def gemm(g, d):
    attributes(g, d)
    ta, tb = d.attrs.get("transA", 0), d.attrs.get("transB", 0)
    a = _data(g, d, rank=2)
    m, k = (a.shape[1], a.shape[0]) if ta else a.shape
    n = g.rng.choice((1, 2, 3, 4))
    d.inputs.append(g.new_input(a.dtype, (n, k) if tb else (k, n)))
    if g.rng.random() < 0.6:
        d.inputs.append(g.new_input(a.dtype, g.rng.choice(((m, n), (n,), (1, n), (m, 1), ()))))


def conv(g, d, transpose=False):
    x = _data(g, d, rank=g.rng.choice((3, 4)))
    if any(s == 0 for s in x.shape):
        raise G.Reject("empty conv")
    sp = len(x.shape) - 2
    c = x.shape[1]
    group = g.rng.choice([q for q in (1, 2, c) if q and c % q == 0])
    m = group * g.rng.choice((1, 2))
    ks = [g.rng.randint(1, max(1, min(3, s))) for s in x.shape[2:]]
    w_shape = (c, m // group, *ks) if transpose else (m, c // group, *ks)
    d.inputs.append(g.new_input(x.dtype, w_shape, const=g.rng.random() < 0.7))
    if g.rng.random() < 0.5:
        d.inputs.append(g.new_input(x.dtype, ((m if not transpose else m),), const=True))
    d.attrs["group"] = group
    if g.rng.random() < 0.5:
        d.attrs["strides"] = [g.rng.choice((1, 2)) for _ in range(sp)]
    if g.rng.random() < 0.3:
        d.attrs["dilations"] = [g.rng.choice((1, 2)) for _ in range(sp)]
    if g.rng.random() < 0.5:
        d.attrs["pads"] = [g.rng.randint(0, k - 1) for k in ks] * 2
    elif g.rng.random() < 0.3:
        d.attrs["auto_pad"] = g.rng.choice(("SAME_UPPER", "SAME_LOWER", "VALID"))
    if g.rng.random() < 0.3:
        d.attrs["kernel_shape"] = ks
    if transpose and g.rng.random() < 0.3:
        d.attrs["output_padding"] = [0] * sp


def pool(g, d):
    x = _data(g, d, rank=g.rng.choice((3, 4)))
    if 0 in x.shape:   # runtimes refuse empty windows: undefined, not worth drawing
        raise G.Reject("empty")
    sp = len(x.shape) - 2
    ks = [g.rng.randint(1, max(1, min(3, s))) for s in x.shape[2:]]
    d.attrs["kernel_shape"] = ks
    if g.rng.random() < 0.5:
        d.attrs["strides"] = [g.rng.choice((1, 2)) for _ in range(sp)]
    if g.rng.random() < 0.5:
        d.attrs["pads"] = [g.rng.randint(0, k - 1) for k in ks] * 2
    if d.op != "LpPool" and g.rng.random() < 0.3:
        d.attrs["ceil_mode"] = 1
    if d.op == "AveragePool" and g.rng.random() < 0.4:
        d.attrs["count_include_pad"] = 1
    if d.op == "MaxPool" and g.rng.random() < 0.3:
        d.attrs["dilations"] = [g.rng.choice((1, 2)) for _ in range(sp)]
    if d.op == "MaxPool" and g.rng.random() < 0.3:
        d.n_outputs = 2
    else:
        d.n_outputs = 1
    if d.op == "LpPool":
        d.attrs["p"] = g.rng.choice((1, 2, 3))


def channel_norm(g, d):
    """BatchNormalization / InstanceNormalization: per-channel parameters."""
    x = _data(g, d, min_rank=2 if d.op == "BatchNormalization" else 3)
    c = x.shape[1]
    n_par = 4 if d.op == "BatchNormalization" else 2
    for i in range(n_par):
        f = d.schema.inputs[1 + i]
        dt = _dtype(d, f)
        vals = g.data(dt, (c,), 0.1, 2.0) if i == 3 else g.data(dt, (c,), special=False)
        d.inputs.append(g.const(vals, dt, (c,)) if g.rng.random() < 0.7 else g.new_input(dt, (c,), values=vals))
    attributes(g, d, skip=("training_mode", "momentum", "spatial"))
    d.n_outputs = 1


def layer_norm(g, d):
    x = _data(g, d, min_rank=1)
    axis = g.rng.randint(-_rank(x), _rank(x) - 1)
    d.attrs["axis"] = axis
    norm = x.shape[axis:]
    d.inputs.append(g.new_input(x.dtype, norm))
    if g.rng.random() < 0.5:
        d.inputs.append(g.new_input(x.dtype, norm))
    if g.rng.random() < 0.4:
        d.attrs["epsilon"] = 1e-3
    d.n_outputs = 1


def group_norm(g, d):
    x = _data(g, d, min_rank=3)
    c = x.shape[1]
    ng = g.rng.choice([q for q in (1, 2, c) if q and c % q == 0] or [1])
    d.attrs["num_groups"] = ng
    n = c if g.opset >= 21 else ng
    d.inputs += [g.new_input(x.dtype, (n,)), g.new_input(x.dtype, (n,))]


def axis_attr(g, d, need_rank=1):
    x = _data(g, d, min_rank=need_rank)
    r = _rank(x)
    d.attrs["axis"] = g.rng.randint(-r, r - 1)
    attributes(g, d)


def reduce_(g, d):
    x = _data(g, d)
    r = _rank(x)
    takes_input = any(f.name == "axes" for f in d.schema.inputs)
    axes = sorted(g.rng.sample(range(-r, r), g.rng.randint(0, r))) if r else []
    axes = [a for i, a in enumerate(axes) if (a % r) not in [b % r for b in axes[:i]]] if r else []
    if takes_input:
        if axes or g.rng.random() < 0.3:
            d.inputs.append(g.const(axes, "int64", (len(axes),)))
    elif axes:
        d.attrs["axes"] = axes
    d.attrs["keepdims"] = g.rng.randint(0, 1)
    if takes_input and g.rng.random() < 0.2:
        d.attrs["noop_with_empty_axes"] = 1


def arg_(g, d):
    x = _data(g, d, min_rank=1)
    if x.shape[d.attrs.setdefault("axis", g.rng.randint(-_rank(x), _rank(x) - 1))] == 0:
        raise G.Reject("empty axis")
    d.attrs["keepdims"] = g.rng.randint(0, 1)
    d.attrs["select_last_index"] = g.rng.randint(0, 1)


def cumsum(g, d):
    x = _data(g, d, min_rank=1)
    r = _rank(x)
    d.inputs.append(g.const(g.rng.randint(-r, r - 1), g.rng.choice(("int64", "int32")), ()))
    attributes(g, d)


def cast(g, d):
    x = _data(g, d)
    to = g.rng.choice([t for t in G.DTYPES if t in {G._NP_OF[v] for v in G._tensor_types(
        next(tc.allowed_type_strs for tc in d.schema.type_constraints if tc.type_param_str == "T2"))}])
    if d.op == "CastLike":
        d.inputs.append(g.pick(to))
    else:
        d.attrs["to"] = G._ONNX_OF[to]
    del x


def reshape(g, d):
    x = _data(g, d)
    n = G._numel(x.shape)
    dims = _factor(g, n)
    if dims and g.rng.random() < 0.3 and n > 0:
        dims[g.rng.randrange(len(dims))] = -1
    if g.rng.random() < 0.2 and dims and len(dims) <= len(x.shape) and x.shape[0] == (dims[0] if dims[0] > 0 else -9):
        dims[0] = 0
    d.inputs.append(g.const(dims, "int64", (len(dims),)))


def _factor(g, n):
    if n == 0:
        return [0, g.rng.choice((1, 2))]
    dims, left = [], n
    for p in (2, 3, 5, 2, 2, 3):
        if left % p == 0 and g.rng.random() < 0.5 and len(dims) < 3:
            dims.append(p)
            left //= p
    dims.append(left)
    g.rng.shuffle(dims)
    return dims


def expand(g, d):
    x = _data(g, d)
    s = [1 if (dim == 1 and g.rng.random() < 0.5) else dim for dim in x.shape]
    s = [g.rng.choice((2, 3)) if dim == 1 and g.rng.random() < 0.5 else dim for dim in s]
    if g.rng.random() < 0.3:
        s = [g.rng.choice((1, 2))] + s
    if G._numel(np.broadcast_shapes(x.shape, tuple(s))) > G.MAX_ELEMENTS:
        raise G.Reject("big")
    d.inputs.append(g.const(s, "int64", (len(s),)))


def tile(g, d):
    x = _data(g, d)
    reps = [g.rng.choice((1, 1, 2, 3)) for _ in x.shape]
    d.inputs.append(g.const(reps, "int64", (len(reps),)))


def squeeze(g, d):
    x = _data(g, d)
    ones = [i for i, s in enumerate(x.shape) if s == 1]
    if d.op == "Squeeze":
        if ones and g.rng.random() < 0.8:
            ax = g.rng.sample(ones, g.rng.randint(1, len(ones)))
            ax = [a - len(x.shape) if g.rng.random() < 0.3 else a for a in ax]
            d.inputs.append(g.const(ax, "int64", (len(ax),)))
    else:
        k = g.rng.randint(1, 2)
        out = len(x.shape) + k
        ax = g.rng.sample(range(out), k)
        d.inputs.append(g.const(ax, "int64", (k,)))


def transpose(g, d):
    x = _data(g, d)
    if _rank(x) and g.rng.random() < 0.8:
        p = list(range(_rank(x)))
        g.rng.shuffle(p)
        d.attrs["perm"] = p


def concat(g, d):
    x = _data(g, d, min_rank=1)
    r = _rank(x)
    axis = g.rng.randint(-r, r - 1)
    d.attrs["axis"] = axis
    for _ in range(g.rng.randint(0, 2)):
        s = list(x.shape)
        s[axis] = g.rng.choice((0, 1, 2))
        d.inputs.append(g.new_input(x.dtype, tuple(s)) if g.rng.random() < 0.6 else x)


def split(g, d):
    x = _data(g, d, min_rank=1)
    r = _rank(x)
    axis = g.rng.randint(-r, r - 1)
    d.attrs["axis"] = axis
    n = x.shape[axis]
    k = g.rng.randint(1, 3)
    if g.opset >= 18 and g.rng.random() < 0.5:
        if n < k:
            raise G.Reject("split")
        d.attrs["num_outputs"] = k
        d.n_outputs = k
        return
    cuts = sorted(g.rng.randint(0, n) for _ in range(k - 1))
    sizes = [b - a for a, b in zip([0] + cuts, cuts + [n])]
    d.inputs.append(g.const(sizes, "int64", (len(sizes),)))
    d.n_outputs = len(sizes)


def slice_(g, d):
    x = _data(g, d, min_rank=1)
    r = _rank(x)
    axes = g.rng.sample(range(r), g.rng.randint(1, r))
    starts, ends, steps = [], [], []
    for a in axes:
        n = x.shape[a]
        st = g.rng.choice((1, 1, 1, -1, 2, -2))
        s0 = g.rng.randint(-n - 2, n + 2)
        e0 = g.rng.choice((g.rng.randint(-n - 2, n + 2), 2 ** 62 if st > 0 else -(2 ** 62)))
        starts.append(s0)
        ends.append(e0)
        steps.append(st)
    t = g.rng.choice(("int64", "int32"))
    if t == "int32":
        ends = [max(min(e, 2 ** 31 - 1), -(2 ** 31)) for e in ends]
    d.inputs += [g.const(starts, t), g.const(ends, t)]
    if g.rng.random() < 0.85:
        d.inputs.append(g.const([a - r if g.rng.random() < 0.3 else a for a in axes], t))
        if g.rng.random() < 0.8:
            d.inputs.append(g.const(steps, t))


def gather(g, d):
    x = _data(g, d, min_rank=1)
    r = _rank(x)
    axis = g.rng.randint(-r, r - 1)
    d.attrs["axis"] = axis
    n = x.shape[axis]
    if n == 0:
        raise G.Reject("empty")
    shape = g.shape(g.rng.choice((0, 1, 1, 2)))
    t = d.types.get("Tind", "int64")
    d.inputs.append(g.const(g.nrng.integers(-n, n, size=shape), t, shape))


def gather_elements(g, d):
    x = _data(g, d, min_rank=1)
    r = _rank(x)
    axis = g.rng.randint(-r, r - 1)
    d.attrs["axis"] = axis
    n = x.shape[axis]
    if n == 0:
        raise G.Reject("empty")
    shape = list(x.shape)
    shape[axis] = g.rng.randint(1, 3)
    t = d.types.get("Tind", "int64")
    d.inputs.append(g.const(g.nrng.integers(-n, n, size=shape), t, tuple(shape)))


def gather_nd(g, d):
    x = _data(g, d, min_rank=1)
    r = _rank(x)
    k = g.rng.randint(1, r)
    if any(x.shape[i] == 0 for i in range(k)):
        raise G.Reject("empty")
    lead = g.shape(g.rng.choice((0, 1, 1, 2)), zero=False)
    idx = np.stack([g.nrng.integers(-x.shape[i], x.shape[i], size=lead) for i in range(k)], axis=-1)
    d.inputs.append(g.const(idx, "int64", idx.shape))


def scatter_nd(g, d):
    x = _data(g, d, min_rank=1)
    r = _rank(x)
    k = g.rng.randint(1, r)
    cells = [tuple(c) for c in np.ndindex(*x.shape[:k])]
    if not cells:
        raise G.Reject("empty")
    m = g.rng.randint(1, min(3, len(cells)))
    pick = g.rng.sample(cells, m)    # distinct: the result of duplicates depends on the order
    idx = np.array(pick, dtype=np.int64).reshape(m, k)
    d.inputs.append(g.const(idx, "int64", idx.shape))
    d.inputs.append(g.new_input(x.dtype, (m,) + x.shape[k:]))
    if g.opset >= 16 and g.rng.random() < 0.3:
        d.attrs["reduction"] = g.rng.choice(("add", "mul") + (("max", "min") if g.opset >= 18 else ()))


def scatter_elements(g, d):
    x = _data(g, d, min_rank=1)
    r = _rank(x)
    axis = g.rng.randint(-r, r - 1)
    n = x.shape[axis]
    if n == 0 or 0 in x.shape:
        raise G.Reject("empty")
    d.attrs["axis"] = axis
    shape = list(x.shape)
    shape[axis] = 1
    idx = g.nrng.integers(0, n, size=shape)    # one index per line: no duplicates
    d.inputs.append(g.const(idx, "int64", tuple(shape)))
    d.inputs.append(g.new_input(x.dtype, tuple(shape)))
    if g.opset >= 16 and g.rng.random() < 0.3:
        d.attrs["reduction"] = g.rng.choice(("add", "mul") + (("max", "min") if g.opset >= 18 else ()))


def pad(g, d):
    x = _data(g, d)
    r = _rank(x)
    mode = g.rng.choice(("constant", "constant", "reflect", "edge") + (("wrap",) if g.opset >= 19 else ()))
    begin, end = [], []
    for s in x.shape:   # a negative pad crops: at most the dim in all
        lo = -min(s, 1) if mode == "constant" else 0
        hi = 2 if mode != "reflect" else max(0, min(2, s - 1))
        a = g.rng.randint(lo, hi)
        b = g.rng.randint(max(lo, -(s + min(a, 0))), hi)
        begin.append(a)
        end.append(b)
    pads = begin + end
    if mode != "constant" and 0 in x.shape:
        raise G.Reject("empty")
    d.attrs["mode"] = mode
    d.inputs.append(g.const(pads, "int64", (len(pads),)))
    if mode == "constant" and g.rng.random() < 0.5:
        d.inputs.append(g.const(g.data(x.dtype, (), special=False), x.dtype, ()))
    del r


def space_depth(g, d):
    x = _data(g, d, rank=4)
    b = 2
    if d.op == "DepthToSpace":
        if x.shape[1] % (b * b):
            raise G.Reject("channels")
        if g.rng.random() < 0.5:
            d.attrs["mode"] = g.rng.choice(("DCR", "CRD"))
    elif x.shape[2] % b or x.shape[3] % b:
        raise G.Reject("spatial")
    d.attrs["blocksize"] = b


def trilu(g, d):
    _data(g, d, min_rank=2)
    if g.rng.random() < 0.6:
        d.inputs.append(g.const(g.rng.randint(-3, 3), "int64", ()))
    attributes(g, d)


def eyelike(g, d):
    _data(g, d, rank=2)
    if g.rng.random() < 0.5:
        d.attrs["k"] = g.rng.randint(-2, 2)
    if g.rng.random() < 0.3:
        d.attrs["dtype"] = G._ONNX_OF[g.rng.choice(("float32", "int64", "int32"))]


def shape_(g, d):
    x = _data(g, d)
    if g.opset >= 15 and g.rng.random() < 0.4:
        r = _rank(x)
        d.attrs["start"] = g.rng.randint(-r - 1, r + 1)
        if g.rng.random() < 0.5:
            d.attrs["end"] = g.rng.randint(-r - 1, r + 1)


def constant_of_shape(g, d):
    s = g.shape()
    d.inputs.append(g.const(list(s), "int64", (len(s),)))
    if g.rng.random() < 0.7:
        dt = g.rng.choice(("float32", "int64", "int32", "float64", "bool", "uint8"))
        d.attrs["value"] = numpy_helper.from_array(g.data(dt, (1,), special=g.rng.random() < 0.3), "value")


def range_(g, d):
    t = d.types["T"]
    start = g.rng.randint(-5, 5)
    count = g.rng.randint(0, 12)
    delta = g.rng.choice((1, 2, 3, -1, -2)) if t in G._INT_DTYPES else g.rng.choice((0.5, 1.0, -0.25, 1.5))
    limit = start + count * delta
    d.inputs += [g.const(start, t, ()), g.const(limit, t, ()), g.const(delta, t, ())]


def topk(g, d):
    x = _data(g, d, min_rank=1)
    r = _rank(x)
    axis = g.rng.randint(-r, r - 1)
    d.attrs["axis"] = axis
    d.inputs.append(g.const([g.rng.randint(0, x.shape[axis])], "int64", (1,)))
    if g.rng.random() < 0.4:
        d.attrs["largest"] = 0
    d.attrs["sorted"] = 1


def onehot(g, d):
    ti, td, tv = d.types["T1"], d.types["T2"], d.types["T3"]
    shape = g.shape(g.rng.choice((0, 1, 2)))
    depth = g.rng.randint(1, 5)
    d.inputs.append(g.const(g.nrng.integers(-depth, depth, size=shape), ti, shape))
    d.inputs.append(g.const(depth, td, ()))
    d.inputs.append(g.const(g.data(tv, (2,), special=False), tv, (2,)))
    d.attrs["axis"] = g.rng.randint(-len(shape) - 1, len(shape))


def clip(g, d):
    x = _data(g, d)
    for _ in range(2):
        if g.rng.random() < 0.6:
            d.inputs.append(g.const(g.data(x.dtype, (), special=False), x.dtype, ()))
        else:
            d.inputs.append(None)


def where(g, d):
    t = d.types["T"]
    c = g.pick("bool")
    d.inputs.append(c)
    d.inputs.append(g.partner(c, t))
    d.inputs.append(g.partner(c, t))


def compress(g, d):
    x = _data(g, d, min_rank=1)
    r = _rank(x)
    if g.rng.random() < 0.7:
        axis = g.rng.randint(-r, r - 1)
        d.attrs["axis"] = axis
        n = x.shape[axis]
    else:
        n = G._numel(x.shape)
    d.inputs.append(g.const(g.nrng.random(g.rng.randint(0, n)) < 0.5, "bool"))


def reverse_sequence(g, d):
    x = _data(g, d, min_rank=2)
    ba, ta = (0, 1) if g.rng.random() < 0.5 else (1, 0)
    d.attrs["batch_axis"], d.attrs["time_axis"] = ba, ta
    b, t = x.shape[ba], x.shape[ta]
    d.inputs.append(g.const(g.nrng.integers(0, t + 1, size=(b,)), "int64", (b,)))


def einsum(g, d):
    x = _data(g, d, min_rank=1, max_rank=3)
    letters = "ijkl"[:_rank(x)]
    other = "".join(g.rng.sample(letters, g.rng.randint(0, len(letters)))) + ("m" if g.rng.random() < 0.5 else "")
    dims = dict(zip(letters, x.shape))
    dims["m"] = g.rng.randint(1, 3)
    y = g.new_input(x.dtype, tuple(dims[c] for c in other)) if other or g.rng.random() < 0.5 else None
    ins = [letters] + ([other] if y is not None else [])
    pool = sorted(set("".join(ins)))
    out = "".join(c for c in pool if g.rng.random() < 0.6)
    d.attrs["equation"] = ",".join(ins) + "->" + out
    if y is not None:
        d.inputs.append(y)


def det(g, d):
    x = _data(g, d, min_rank=2)
    n = x.shape[-1]
    if x.shape[-2] != n:
        v = g.new_input(x.dtype, x.shape[:-2] + (n, n))
        d.inputs[0] = v


def prelu(g, d):
    x = _data(g, d)
    s = list(x.shape)
    s = s[g.rng.randint(0, len(s)):] if s else s
    s = [1 if g.rng.random() < 0.4 else q for q in s]
    d.inputs.append(g.new_input(x.dtype, tuple(s)))


def lrn(g, d):
    _data(g, d, rank=4)
    d.attrs["size"] = g.rng.choice((1, 3, 5))
    attributes(g, d)


def mvn(g, d):
    x = _data(g, d, min_rank=1)
    if g.rng.random() < 0.5:
        d.attrs["axes"] = sorted(g.rng.sample(range(_rank(x)), g.rng.randint(1, _rank(x))))
    elif _rank(x) != 4:
        raise G.Reject("default axes need rank 4")


def lpnorm(g, d):
    x = _data(g, d, min_rank=1)
    d.attrs["axis"] = g.rng.randint(-_rank(x), _rank(x) - 1)
    d.attrs["p"] = g.rng.choice((1, 2))


def global_pool(g, d):
    if 0 in _data(g, d, min_rank=3).shape:
        raise G.Reject("empty")


def unique(g, d):
    x = _data(g, d)
    if g.rng.random() < 0.4 and _rank(x):
        d.attrs["axis"] = g.rng.randint(-_rank(x), _rank(x) - 1)
    d.attrs["sorted"] = 1
    d.n_outputs = g.rng.randint(1, 4)


def quantize(g, d):
    if d.op == "QuantizeLinear":
        x = _data(g, d)
        st = _dtype(d, d.schema.inputs[1])
        d.inputs.append(g.const(g.data(st, (), 0.05, 2.0), st, ()))
        zt = d.types.get("T2", "uint8")
        if zt not in ("uint8", "int8", "uint16", "int16"):
            raise G.Reject("zero point type")
        d.inputs.append(g.const(g.data(zt, (), 0, 5, special=False), zt, ()))
    else:
        t = d.types["T1"] if "T1" in d.types else d.types.get("T")
        if t not in ("uint8", "int8", "int32", "uint16", "int16"):
            raise G.Reject("type")
        x = g.pick(t)
        d.inputs.append(x)
        st = "float32"
        d.inputs.append(g.const(g.data(st, (), 0.05, 2.0), st, ()))
        if t != "int32" and g.rng.random() < 0.6:
            d.inputs.append(g.const(g.data(t, (), 0, 5, special=False), t, ()))
    del x


def size_(g, d):
    _data(g, d)


def dropout(g, d):
    _data(g, d)
    d.n_outputs = 1


def hardmax(g, d):
    x = _data(g, d, min_rank=1)
    d.attrs["axis"] = g.rng.randint(-_rank(x), _rank(x) - 1)


def nonzero(g, d):
    _data(g, d)


def flatten(g, d):
    x = _data(g, d)
    r = _rank(x)
    d.attrs["axis"] = g.rng.randint(-r, r)


def resize(g, d):
    x = _data(g, d, min_rank=1, max_rank=4)
    r = _rank(x)
    d.inputs.append(None)   # roi
    mode = g.rng.choice(("nearest", "linear", "cubic"))
    d.attrs["mode"] = mode
    if mode != "nearest" and r > 2:
        spatial = list(range(r - 2, r))
    else:
        spatial = list(range(r)) if mode == "nearest" else list(range(r))
    if g.rng.random() < 0.5:
        scales = [1.0 if i not in spatial else g.rng.choice((0.5, 1.0, 1.5, 2.0)) for i in range(r)]
        d.inputs.append(g.const(scales, "float32", (r,)))
    else:
        d.inputs.append(None)
        sizes = [s if i not in spatial else g.rng.randint(1, 5) for i, s in enumerate(x.shape)]
        d.inputs.append(g.const(sizes, "int64", (r,)))
    if g.rng.random() < 0.5:
        d.attrs["coordinate_transformation_mode"] = g.rng.choice(
            ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"))
    if mode == "nearest" and g.rng.random() < 0.5:
        d.attrs["nearest_mode"] = g.rng.choice(("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"))


def mod(g, d):
    binary_nonzero(g, d)
    t = d.inputs[0].dtype
    d.attrs["fmod"] = 1 if t in G._FLOAT_DTYPES else g.rng.randint(0, 1)


RECIPES = {
    "Div": binary_nonzero, "Mod": mod, "BitShift": bitshift, "Pow": pow_,
    "MatMul": matmul, "Gemm": gemm, "Conv": conv,
    "ConvTranspose": lambda g, d: conv(g, d, transpose=True),
    "MaxPool": pool, "AveragePool": pool, "LpPool": pool,
    "GlobalAveragePool": global_pool, "GlobalMaxPool": global_pool, "GlobalLpPool": global_pool,
    "BatchNormalization": channel_norm, "InstanceNormalization": channel_norm,
    "LayerNormalization": layer_norm, "GroupNormalization": group_norm,
    "Softmax": lambda g, d: axis_attr(g, d), "LogSoftmax": lambda g, d: axis_attr(g, d), "Hardmax": hardmax,
    "ArgMax": arg_, "ArgMin": arg_, "CumSum": cumsum, "Cast": cast, "CastLike": cast,
    "Reshape": reshape, "Expand": expand, "Tile": tile, "Squeeze": squeeze, "Unsqueeze": squeeze,
    "Transpose": transpose, "Concat": concat, "Split": split, "Slice": slice_, "Gather": gather,
    "GatherElements": gather_elements, "GatherND": gather_nd, "ScatterND": scatter_nd,
    "ScatterElements": scatter_elements, "Pad": pad, "DepthToSpace": space_depth, "SpaceToDepth": space_depth,
    "Trilu": trilu, "EyeLike": eyelike, "Shape": shape_, "Size": size_, "ConstantOfShape": constant_of_shape,
    "Range": range_, "TopK": topk, "OneHot": onehot, "Clip": clip, "Where": where, "Compress": compress,
    "ReverseSequence": reverse_sequence, "Einsum": einsum, "Det": det, "PRelu": prelu, "LRN": lrn,
    "MeanVarianceNormalization": mvn, "LpNormalization": lpnorm, "Unique": unique,
    "QuantizeLinear": quantize, "DequantizeLinear": quantize, "Dropout": dropout, "NonZero": nonzero,
    "Flatten": flatten, "Resize": resize,
    **{op: reduce_ for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                              "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")},
}
del math, helper
