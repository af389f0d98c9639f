"""Tokenizer (com.microsoft 1): what skl2onnx writes for a text vectoriser's analyser; string
tensors on the CPU provider (host values, no numba kernel).

onnxruntime's CPU kernel (``contrib_ops/cpu/tokenizer.cc``), element by element of X ([C] or
[N, C] strings), with lengths counted in characters (code points):

* character tokenisation (``separators == [""]`` or ``tokenexp == "."``): every character;
* ``separators`` (RE2 patterns, leftmost-longest): the string is split by the first pattern,
  every piece by the next, and so on; a piece shorter than ``mincharnum`` is dropped (the text
  between two matches, and the trailing text); when a pattern leaves no piece, the row is empty;
* ``tokenexp`` (an RE2 pattern, leftmost-longest): the successive matches of at least
  ``mincharnum`` characters (a shorter match is skipped one character at a time);
* with ``mark`` the row starts with ``"\\x02"`` and its tokens end with ``"\\x03"``; then
  ``pad_value`` up to the longest row. Y is X's shape plus that length (0, without marks, when
  no row has a token).

The output's last dim depends on the data: it is computed at run time from X (``infer``).
Patterns are compiled with RE2 (``google-re2``, linear time); without it the op is declined
with the install hint, as RegexFullMatch is.
"""

from __future__ import annotations

import numpy as np

from . import MS
from ...ir.errors import ExecutionError
from ..opdef import OpList

OPS = OpList()
_START, _END = "\x02", "\x03"


def _attr_str(v):
    return v.decode("utf-8") if isinstance(v, bytes) else v


def _spec(ctx):
    a = ctx.attrs
    seps = [_attr_str(s) for s in a.get("separators", [])] if "separators" in a else None
    exp = _attr_str(a.get("tokenexp", "")) if "tokenexp" in a else None
    return dict(mark=bool(int(a.get("mark", 0))), pad=_attr_str(a.get("pad_value", "")),
                minc=int(a.get("mincharnum", 1)), seps=seps, exp=exp)


def _re2():
    try:
        import re2
    except ImportError:
        return None
    return re2


def _compile(re2, pattern):
    o = re2.Options()
    o.longest_match = True
    return re2.compile(pattern, o)


def _check(ctx, target):
    sp = _spec(ctx)
    if sp["seps"] is None and not sp["exp"]:
        return "Tokenizer: either separators or tokenexp must be given"
    if sp["minc"] <= 0:
        return "Tokenizer: mincharnum must be positive"
    xs = ctx.in_shapes[0]
    if xs is not None and len(xs) not in (1, 2):
        return "Tokenizer: X must be [C] or [N, C]"
    chars = (sp["seps"] == [""]) if sp["seps"] is not None else sp["exp"] == "."
    if chars and sp["minc"] >= 2:
        return "Tokenizer: mincharnum must be < 2 for character tokenisation"
    if not chars and _re2() is None:
        return "Tokenizer: its patterns need RE2 (pip install google-re2)"
    try:
        if not chars:
            for p in (sp["seps"] if sp["seps"] is not None else [sp["exp"]]):
                _compile(_re2(), p)
    except Exception as e:  # noqa: BLE001 - re2 raises its own error type
        return f"Tokenizer: pattern not accepted by RE2: {e}"
    return None


def _split(text, rx, minc):
    out, start, n = [], 0, len(text)
    while True:
        m = rx.search(text, start, n)
        if m is None:
            if n - start >= minc:
                out.append(text[start:])
            return out
        a, b = m.span()
        if a - start >= minc:
            out.append(text[start:a])
        start = b if b > a else a + 1
        if start > n:
            return out


def _tokens(s, sp, rxs):
    if not isinstance(s, str):
        raise ExecutionError(f"Tokenizer: X holds a {type(s).__name__}, not a str")
    seps, exp, minc = sp["seps"], sp["exp"], sp["minc"]
    if (seps == [""]) if seps is not None else exp == ".":
        return list(s)
    if seps is not None:
        row = [s]
        for rx in rxs:
            toks = [t for text in row for t in _split(text, rx, minc)]
            if not toks:
                return []
            row = toks
        return row
    row, start, n = [], 0, len(s)
    if n < minc:
        return row
    rx = rxs[0]
    while True:
        m = rx.search(s, start, n)
        if m is None:
            return row
        a, b = m.span()
        if b - a >= minc:
            row.append(s[a:b])
            start = b
        else:
            start = a + 1
        if start > n:
            return row


def _tokenize(ctx, x):
    sp = _spec(ctx)
    re2 = _re2()
    chars = (sp["seps"] == [""]) if sp["seps"] is not None else sp["exp"] == "."
    rxs = [] if chars else [_compile(re2, p) for p in (sp["seps"] if sp["seps"] is not None else [sp["exp"]])]
    x = np.asarray(x, dtype=object)
    rows = [_tokens(s, sp, rxs) for s in x.reshape(-1)]
    width = max((len(r) for r in rows), default=0)
    if x.size == 0:     # onnxruntime: [N, 0] for an empty [N, C], [0] for an empty [C]
        return rows, (x.shape[:1] if x.ndim == 2 else ()) + (0,), sp
    if width == 0:
        return rows, tuple(x.shape) + (0,), sp
    if sp["mark"]:
        width += 2
    return rows, tuple(x.shape) + (width,), sp


def _shape(ctx):
    xs = ctx.in_shapes[0]
    return [None if xs is None else tuple(xs) + (None,)]


def _infer(ctx, arrays):
    if arrays[0] is None:   # the input types alone (at load time): strings, the width unknown
        return [(None if ctx.in_shapes[0] is None else tuple(ctx.in_shapes[0]) + (None,), np.dtype(object))]
    _, shape, _ = _tokenize(ctx, arrays[0])
    return [(shape, np.dtype(object))]


def _build(ctx, target):
    def run(inputs, outputs):
        rows, shape, sp = _tokenize(ctx, inputs[0])
        out = outputs[0]
        if tuple(out.shape) != shape:
            raise ExecutionError(f"node {ctx.node.name!r} (Tokenizer): the tokens need shape {shape}, the plan "
                                 f"gave {tuple(out.shape)}")
        if not out.size:
            return
        flat = out.reshape(-1, shape[-1])
        for k, r in enumerate(rows):
            line = ([_START] + r + [_END]) if sp["mark"] else list(r)
            flat[k, :] = line + [sp["pad"]] * (shape[-1] - len(line))

    return run


OPS.add("Tokenizer", _build, domain=MS, since=1, until=1, dtypes=("object",), targets=("cpu",), check=_check,
        shape=_shape, infer=_infer, shape_inputs=(0,), data_dependent_output=True,
        note="onnxruntime's tokenizer: characters, RE2 separators (split in turn) or an RE2 token "
             "expression; mincharnum, start/end marks, pad_value; the width comes from the data")
