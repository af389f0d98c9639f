"""Einsum (opset 12+) with one or two operands, both targets.

The equation is parsed here into index tokens (letters; ``...`` becomes right-aligned
broadcast dimensions); implicit mode (no ``->``) puts the ellipsis dimensions first and
then the letters that occur once, alphabetically, as numpy does. Each output element is
one sum, in one fixed order: over the contracted indices in row-major order of their
first appearance in the equation, adding ``A[..] * B[..]`` (one operand: ``A[..]``) into
an accumulator of the output's type that starts at zero. A letter repeated within one
operand (a diagonal) adds its strides; a dimension of size 1 broadcasts (stride 0).
Declined, with a reason: three or more operands, mismatched dimension sizes, letters in
the output that no input has. float16 and bfloat16 run the float32 kernel on the widened
operands and round the result once (:func:`.elementwise.half_build`), as onnx's reference
computes them.
"""

from __future__ import annotations

import numpy as np

from .common import flat, kernel_pair, node_error, prod, replayable
from .opdef import OpList

OPS = OpList()
DTYPES = ("float32", "float64", "int64", "int32")

_BODY = """
rem = i
oa = 0
ob = 0
for d in range(n_out - 1, -1, -1):
    c = rem % sizes[d]
    rem = rem // sizes[d]
    oa += c * sa[d]
    ob += c * sb[d]
acc = zero
for t in range(n_comb):
    rem = t
    pa = oa
    pb = ob
    for d in range(n_tok - 1, n_out - 1, -1):
        c = rem % sizes[d]
        rem = rem // sizes[d]
        pa += c * sa[d]
        pb += c * sb[d]
    acc += {term}
out[i] = acc
"""
_PARAMS = "A, B, out, sizes, sa, sb, n_out, n_tok, n_comb, zero"
_EINSUM = {1: kernel_pair("einsum1", _PARAMS, _BODY.format(term="A[pa]"), module=__name__),
           2: kernel_pair("einsum2", _PARAMS, _BODY.format(term="A[pa] * B[pb]"), module=__name__)}


class EinsumPlan:
    """Tokens (output ones first), their sizes, and each operand's stride per token."""

    def __init__(self, sizes, strides, n_out, out_shape):
        self.sizes = sizes
        self.strides = strides
        self.n_out = n_out
        self.out_shape = out_shape


def _terms(eq: str, ranks):
    eq = eq.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ValueError(f"the equation has {len(terms)} operands, the node {len(ranks)}")
    toks, n_ell = [], 0
    for term, rank in zip(terms, ranks):
        if term.count("...") > 1:
            raise ValueError(f"more than one ellipsis in {term!r}")
        head, ell, tail = term.partition("...")
        letters = len(head) + len(tail)
        if any(not ch.isalpha() for ch in head + tail):
            raise ValueError(f"term {term!r} has characters other than letters and '...'")
        e = rank - letters if ell else 0
        if e < 0 or (not ell and letters != rank):
            raise ValueError(f"term {term!r} does not match an operand of rank {rank}")
        n_ell = max(n_ell, e)
        toks.append((list(head), e, list(tail)))
    def expand(t):
        head, e, tail = t
        return head + [f".{n_ell - e + j}" for j in range(e)] + tail
    ins = [expand(t) for t in toks]
    if arrow:
        head, ell, tail = rhs.partition("...")
        if any(not ch.isalpha() for ch in head + tail) or rhs.count("...") > 1:
            raise ValueError(f"output term {rhs!r} is malformed")
        out = list(head) + ([f".{j}" for j in range(n_ell)] if ell else []) + list(tail)
        if not ell and n_ell:
            raise ValueError("the inputs have '...' but the output does not")
    else:
        counts = {}
        for t in ins:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = [f".{j}" for j in range(n_ell)] + sorted(c for c, k in counts.items() if k == 1 and c[0] != ".")
    return ins, out


def plan(eq: str, shapes) -> EinsumPlan:
    """Parse ``eq`` for operands of ``shapes`` (ValueError on what is not supported)."""
    ins, out = _terms(eq, [len(s) for s in shapes])
    if len(set(out)) != len(out):
        raise ValueError(f"the output repeats an index: {out}")
    order = list(out)
    for t in ins:
        for c in t:
            if c not in order:
                order.append(c)
    missing = [c for c in out if not any(c in t for t in ins)]
    if missing:
        raise ValueError(f"output indices {missing} occur in no input")
    size = {}
    for t, shape in zip(ins, shapes):
        for c, n in zip(t, shape):
            n = int(n)
            if c in size and size[c] != n and 1 not in (size[c], n):
                raise ValueError(f"index {c!r} has sizes {size[c]} and {n}")
            size[c] = n if c not in size or size[c] == 1 else size[c]
    strides = []
    for t, shape in zip(ins, shapes):
        st = np.zeros(len(order), np.int64)
        acc = 1
        for k in range(len(t) - 1, -1, -1):
            n = int(shape[k])
            if n != 1 or size[t[k]] == 1:
                st[order.index(t[k])] += acc
            acc *= n
        strides.append(st)
    sizes = np.array([size[c] for c in order], np.int64)
    return EinsumPlan(sizes, strides, len(out), tuple(int(size[c]) for c in out))


def _check(ctx, target):
    if len(ctx.in_shapes) not in (1, 2):
        return f"Einsum with {len(ctx.in_shapes)} operands not supported (one or two)"
    if any(s is None for s in ctx.in_shapes):
        return "Einsum: an input shape is unknown"
    if len({np.dtype(d).name for d in ctx.in_dtypes}) != 1:
        return "Einsum: the operands must have one dtype"
    try:
        p = plan(str(ctx.attrs.get("equation", "")), ctx.in_shapes)
    except ValueError as e:
        return f"Einsum: {e}"
    if ctx.out_shapes and ctx.out_shapes[0] is not None and tuple(ctx.out_shapes[0]) != p.out_shape:
        return f"Einsum: output shape {p.out_shape} differs from inference's {tuple(ctx.out_shapes[0])}"
    return None


def _build(ctx, target):
    try:
        p = plan(str(ctx.attrs.get("equation", "")), ctx.in_shapes)
    except ValueError as e:
        raise node_error(ctx, str(e)) from None
    k = len(ctx.in_shapes)
    pair = _EINSUM[k]
    sizes = p.sizes if p.sizes.size else np.ones(1, np.int64)
    sa = p.strides[0] if p.sizes.size else np.zeros(1, np.int64)
    sb = (p.strides[1] if k == 2 else sa) if p.sizes.size else np.zeros(1, np.int64)
    n_tok = int(p.sizes.size)
    n_comb = prod(p.sizes[p.n_out:])
    n = prod(p.out_shape)
    zero = np.dtype(ctx.in_dtypes[0]).type(0)
    sizes, sa, sb = target.to_device(sizes, sa, sb)

    @replayable
    def run(inputs, outputs):
        if n == 0:
            return
        a = flat(inputs[0])
        b = flat(inputs[1]) if k == 2 else a
        target.launch(pair, n, a, b, flat(outputs[0]), sizes, sa, sb, p.n_out, n_tok, n_comb, zero)

    return run


def _half_build(ctx, target):
    from .elementwise import half_build
    return half_build(_build)(ctx, target)


OPS.add("Einsum", _half_build, since=12, until=28, dtypes=DTYPES + ("float16", "bfloat16"), check=_check,
        kernels=tuple(_EINSUM.values()),
        note="one or two operands; each output element one sum over the contracted indices in row-major "
             "order (fixed), products left to right; float16/bfloat16 operands widened to float32 (exact), "
             "the float32 result rounded once to the half type")
