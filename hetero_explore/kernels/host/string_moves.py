"""String tensors through the ops that only move or select data, on the CPU provider.

A string tensor is a host ``object`` array of ``str`` (see :mod:`hetero_explore.kernels.strings`).
An op that only moves or selects elements -- Reshape, Transpose, Slice, Gather, Concat, Where,
ScatterND ... -- does to a string tensor what it does to any tensor: so its string kernel *is*
its numeric kernel, run on the elements' positions. Each string input is replaced by the int64
array of its element positions (the inputs' elements numbered one after the other), the op's
own int64 kernel moves the positions, and every output element is the string at the position
it received. The semantics (negative indices, broadcasting, steps, out-of-range errors naming
the node) are therefore exactly the numeric op's, with no second implementation to drift.

The other inputs (indices, shapes, conditions, split sizes) are passed as they are. Only the
CPU provider holds string tensors; every other provider declines them, saying so
(:mod:`hetero_explore.providers.registry_provider`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ...ir.errors import KernelError
from ..opdef import OpList, definitions

OPS = OpList()
OBJ = np.dtype(object)
I64 = np.dtype(np.int64)

#: op -> the inputs that carry the moved elements (the string inputs); "all": every input
MOVED = {
    "Identity": (0,), "Reshape": (0,), "Flatten": (0,), "Squeeze": (0,), "Unsqueeze": (0,), "Transpose": (0,),
    "Expand": (0,), "Tile": (0,), "Concat": "all", "Split": (0,), "Slice": (0,), "Gather": (0,),
    "GatherElements": (0,), "GatherND": (0,), "Where": (1, 2), "DepthToSpace": (0,), "SpaceToDepth": (0,),
    "ReverseSequence": (0,), "Compress": (0,), "ScatterND": (0, 2), "ScatterElements": (0, 2),
}


def _moved(op, ctx):
    m = MOVED[op]
    return tuple(range(len(ctx.node.inputs))) if m == "all" else m


def _numeric(ctx):
    """(the op's int64 definition for this node, the node's context with positions for strings)
    or (None, reason)."""
    op = ctx.node.op_type
    moved = _moved(op, ctx)
    ins = list(ctx.in_dtypes)
    for i in moved:
        if i < len(ins) and ins[i] is not None:
            if np.dtype(ins[i]) != OBJ:
                return None, f"{op}: input {i} is not a string tensor (the strings' inputs must all be strings)"
            ins[i] = I64
    outs = [I64 if d is not None and np.dtype(d) == OBJ else d for d in ctx.out_dtypes]
    nctx = dataclasses.replace(ctx, in_dtypes=ins, out_dtypes=outs)
    reasons = []
    for d in definitions(ctx.node.domain, op, "cpu"):
        if "object" in d.dtypes or not d.claims(ctx.opset) or "int64" not in d.dtypes:
            continue
        why = d.check(nctx, reg_target()) if d.check is not None else None
        if why:
            reasons.append(why)
            continue
        return d, nctx
    return None, "; ".join(reasons) or f"{op}: no int64 kernel to move the strings' positions with"


def reg_target():
    from ..target import CPU
    return CPU


def _check(ctx, target):
    d, why = _numeric(ctx)
    return None if d is not None else why


def _build(ctx, target):
    d, nctx = _numeric(ctx)
    if d is None:
        raise KernelError(f"node {ctx.node.name!r} ({ctx.node.op_type}): {nctx}")
    run_n = d.build(nctx, target)
    moved = [i for i in _moved(ctx.node.op_type, ctx) if ctx.has_input(i)]
    where = f"node {ctx.node.name!r} ({ctx.node.op_type})"
    def run(inputs, outputs):
        pool = [np.asarray(inputs[i], dtype=object).reshape(-1) for i in moved]
        pool = np.concatenate(pool) if pool else np.empty(0, object)
        ins, off = list(inputs), 0
        for i in moved:   # the strings' positions: each string input numbered after the previous ones
            a = np.asarray(inputs[i])
            ins[i] = np.arange(off, off + a.size, dtype=np.int64).reshape(a.shape)
            off += a.size
        tmp = [None if o is None else np.empty(np.shape(o), np.int64) for o in outputs]
        run_n(ins, tmp)
        for o, p in zip(outputs, tmp):
            if o is None:
                continue
            if p.size and (p.min() < 0 or p.max() >= pool.size):
                raise KernelError(f"{where}: a moved position is out of range (the numeric kernel wrote "
                                  "elements it did not move)")
            o[...] = pool[p] if p.size else p.astype(object)

    return run


def _def_for(op):
    moved = MOVED[op]
    first = 0 if moved == "all" else moved[0]
    kw = {}
    if op == "Compress":      # its output size comes from the condition's values
        from ..dynamic import _compress_infer
        kw = dict(shape_inputs=(1,), infer=_compress_infer, data_dependent_output=True)
    return dict(dtypes=("object",), dtype_input=first, targets=("cpu",), since=1, until=28, check=_check,
                note="string tensor: the op's int64 kernel moves the elements' positions, the strings follow",
                **kw)


for _op in MOVED:
    OPS.add(_op, _build, **_def_for(_op))
