"""String ops on the CPU provider: StringNormalizer, StringConcat, StringSplit, Equal,
TfIdfVectorizer (int and string tokens),
RegexFullMatch, and the string paths of ``ai.onnx.ml`` CategoryMapper and
LabelEncoder.

How strings are held
--------------------
An ONNX string tensor is a host numpy array of dtype ``object`` whose elements
are Python ``str`` (what ``onnx.numpy_helper.to_array`` gives). Only the CPU
provider holds them (``targets=("cpu",)``; its buffers are host arrays, so an
object buffer is an ``np.empty(shape, object)``); no other op declares the
``object`` dtype, so the planner keeps string values on the CPU. Everything
here is plain Python on those elements -- no numba kernel, no compile.

Hostile strings stay inert: every element is handled by Python's own ``str``
methods (never ``np.char``, which works on fixed-width ``<U`` copies and drops
trailing NULs, nor ``eval``/format strings); an element that is not a ``str``
is an :class:`ExecutionError` naming the node. Regular expressions are RE2
(``google-re2``, as the ONNX specification says: linear time, no
backreferences), never Python's backtracking ``re``: without ``re2`` installed,
RegexFullMatch is declined with the install hint.

Output shapes are static, from shape inference or the model's declarations:
StringNormalizer with stopwords and StringSplit have data-dependent output sizes;
when a result does not fit the planned shape the node raises
:class:`ExecutionError` with both sizes (nothing is written out of place).
"""

from __future__ import annotations

import numpy as np

from ..ir.errors import ExecutionError, KernelError
from .opdef import OpList

OPS = OpList()
register = OPS.register

ML = "ai.onnx.ml"
STR = ("object",)


def _where(ctx) -> str:
    return f"node {ctx.node.name!r} ({ctx.node.op_type})"


def _attr_str(ctx, name, default=None):
    v = ctx.attrs.get(name, default)
    return v.decode("utf-8") if isinstance(v, bytes) else v


def _attr_strs(ctx, name) -> list:
    return [s.decode("utf-8") if isinstance(s, bytes) else str(s) for s in ctx.attrs.get(name, [])]


def _strings(where: str, x) -> np.ndarray:
    """``x`` as an object array whose elements are all ``str`` (else ExecutionError)."""
    x = np.asarray(x)
    if x.dtype != object:
        raise ExecutionError(f"{where}: expected a string tensor (dtype object of str), got {x.dtype}")
    for v in x.flat:
        if not isinstance(v, str):
            raise ExecutionError(f"{where}: a string tensor holds a {type(v).__name__}, not a str")
    return x


def _store(where: str, out, result: np.ndarray) -> None:
    if tuple(out.shape) != tuple(result.shape):
        raise ExecutionError(f"{where}: the result has shape {tuple(result.shape)}, but the graph plans "
                             f"{tuple(out.shape)} for this output (its size depends on the data); declare "
                             "the output's shape for these inputs, or leave it symbolic and bind it")
    out[...] = result


def _same_shape(ctx):
    return [tuple(ctx.in_shapes[0])]


# -- StringNormalizer (10) ----------------------------------------------------------------
_CASE = ("NONE", "LOWER", "UPPER")


def _check_strnorm(ctx, target):
    act = _attr_str(ctx, "case_change_action", "NONE")
    if act not in _CASE:
        return f"StringNormalizer: case_change_action must be one of {', '.join(_CASE)}, got {act!r}"
    s = ctx.in_shapes[0]
    if s is None or not (len(s) == 1 or (len(s) == 2 and s[0] == 1)):
        return f"StringNormalizer: X must be [C] or [1, C], got {s}"
    return None


def _normalizer(ctx):
    """``fn(x) -> result``: StringNormalizer's result (its shape decided by the stopwords found)."""
    act = _attr_str(ctx, "case_change_action", "NONE")
    sensitive = bool(int(ctx.attrs.get("is_case_sensitive", 0)))
    stops = _attr_strs(ctx, "stopwords")
    stopset = set(stops) if sensitive else {w.casefold() for w in stops}
    change = {"NONE": lambda w: w, "LOWER": str.lower, "UPPER": str.upper}[act]
    where = _where(ctx)
    two_d = len(ctx.in_shapes[0]) == 2

    def normalize(x):
        x = _strings(where, x).reshape(-1)
        kept = [change(w) for w in x if (w if sensitive else w.casefold()) not in stopset]
        if not kept:
            kept = [""]
        res = np.empty(len(kept), object)
        res[:] = kept
        return res.reshape(1, -1) if two_d else res

    return normalize


def _strnorm_infer(ctx, arrays):
    """The output's shape from the data (how many words the stopwords leave)."""
    if arrays[0] is None:
        return [(None, np.dtype(object))]
    return [(tuple(_normalizer(ctx)(arrays[0]).shape), np.dtype(object))]


@register("StringNormalizer", since=10, until=21, dtypes=STR, targets=("cpu",), check=_check_strnorm,
          infer=_strnorm_infer, shape_inputs=(0,),
          note="stopwords removed (case-folded unless is_case_sensitive), then LOWER/UPPER with str.lower/"
               "upper; nothing left gives [''] (locale ignored: Python's Unicode case mapping)")
def _build_strnorm(ctx, target):
    normalize = _normalizer(ctx)
    where = _where(ctx)

    def run(inputs, outputs):
        _store(where, outputs[0], normalize(inputs[0]))

    return run


# -- StringConcat (20) --------------------------------------------------------------------
@register("StringConcat", since=20, until=21, dtypes=STR, targets=("cpu",),
          note="X + Y per element, numpy broadcasting (Python str concatenation)")
def _build_strconcat(ctx, target):
    where = _where(ctx)

    def run(inputs, outputs):
        x, y = _strings(where, inputs[0]), _strings(where, inputs[1])
        res = np.frompyfunc(str.__add__, 2, 1)(x, y)
        _store(where, outputs[0], np.asarray(res, object).reshape(np.broadcast_shapes(x.shape, y.shape)))

    return run


# -- Equal on strings (19) ----------------------------------------------------------------
@register("Equal", since=19, until=21, dtypes=STR, targets=("cpu",),
          note="string Equal (from version 19): Python str equality per element, numpy broadcasting")
def _build_str_equal(ctx, target):
    where = _where(ctx)

    def run(inputs, outputs):
        x, y = _strings(where, inputs[0]), _strings(where, inputs[1])
        res = np.frompyfunc(str.__eq__, 2, 1)(x, y)
        _store(where, outputs[0], np.asarray(res, dtype=bool).reshape(np.broadcast_shapes(x.shape, y.shape)))

    return run


# -- StringSplit (20) ---------------------------------------------------------------------
def _check_split(ctx, target):
    ms = ctx.attrs.get("maxsplit")
    if ms is not None and int(ms) < 0:
        return f"StringSplit: maxsplit must be >= 0 when given, got {ms}"
    return None


@register("StringSplit", since=20, until=21, dtypes=STR, targets=("cpu",), check=_check_split,
          note="str.split(delimiter or None (runs of whitespace), maxsplit); Y padded with '' to the "
               "longest split, Z the counts")
def _build_split(ctx, target):
    delim = _attr_str(ctx, "delimiter", "") or None
    ms = ctx.attrs.get("maxsplit")
    maxsplit = -1 if ms is None else int(ms)
    where = _where(ctx)
    xs = tuple(ctx.in_shapes[0])

    def run(inputs, outputs):
        x = _strings(where, inputs[0])
        parts = [w.split(delim, maxsplit) for w in x.reshape(-1)]
        width = max((len(p) for p in parts), default=0)
        y = np.empty((len(parts), width), object)
        y[...] = ""
        for i, p in enumerate(parts):
            y[i, :len(p)] = p
        _store(where, outputs[0], y.reshape(xs + (width,)))
        if len(outputs) > 1 and outputs[1] is not None:
            _store(where, outputs[1], np.array([len(p) for p in parts], np.int64).reshape(xs))

    return run


# -- RegexFullMatch (20), RE2 -------------------------------------------------------------
def _re2():
    try:
        import re2
    except ImportError:
        return None
    return re2


def _compile(ctx):
    re2 = _re2()
    pattern = _attr_str(ctx, "pattern")
    if re2 is None:
        return None, ("RegexFullMatch needs RE2 (the ONNX specification's syntax; linear-time matching): "
                      "pip install google-re2 (Python's backtracking re is not used: a hostile pattern "
                      "could run for hours)")
    if pattern is None:
        return None, "RegexFullMatch: the pattern attribute is missing"
    opts = re2.Options()
    opts.log_errors = False
    try:
        return re2.compile(pattern, opts), None
    except Exception as e:
        return None, f"RegexFullMatch: the pattern {pattern[:80]!r} is not valid RE2: {e}"


def _check_regex(ctx, target):
    return _compile(ctx)[1]


@register("RegexFullMatch", since=20, until=21, dtypes=STR, targets=("cpu",), check=_check_regex,
          note="RE2 full match per element (google-re2); declined without it")
def _build_regex(ctx, target):
    rx, why = _compile(ctx)
    if why:
        raise KernelError(f"{_where(ctx)}: {why}")
    where = _where(ctx)

    def run(inputs, outputs):
        x = _strings(where, inputs[0])
        res = np.fromiter((rx.fullmatch(w) is not None for w in x.reshape(-1)), bool, x.size)
        _store(where, outputs[0], res.reshape(x.shape))

    return run


# -- ai.onnx.ml CategoryMapper (1) --------------------------------------------------------
def _cats(ctx):
    ints = [int(v) for v in ctx.attrs.get("cats_int64s", [])]
    strs = _attr_strs(ctx, "cats_strings")
    return ints, strs


def _check_catmap(ctx, target):
    ints, strs = _cats(ctx)
    if len(ints) != len(strs):
        return f"CategoryMapper: {len(ints)} cats_int64s for {len(strs)} cats_strings"
    dt = ctx.in_dtypes[0]
    if dt is None or np.dtype(dt) not in (np.dtype(object), np.dtype(np.int64)):
        return f"CategoryMapper: the input must be string or int64, got {dt}"
    return None


@register("CategoryMapper", domain=ML, since=1, until=5, dtypes=("object", "int64"), targets=("cpu",),
          check=_check_catmap, shape=_same_shape,
          note="string -> int64 (else default_int64) or int64 -> string (else default_string); first "
               "listed pair wins for repeated keys")
def _build_catmap(ctx, target):
    ints, strs = _cats(ctx)
    where = _where(ctx)
    if np.dtype(ctx.in_dtypes[0]) == object:
        table = {}
        for s, i in zip(strs, ints):
            table.setdefault(s, i)
        default = int(ctx.attrs.get("default_int64", -1))

        def run(inputs, outputs):
            x = _strings(where, inputs[0])
            _store(where, outputs[0], np.fromiter((table.get(w, default) for w in x.reshape(-1)),
                                                  np.int64, x.size).reshape(x.shape))
    else:
        table = {}
        for i, s in zip(ints, strs):
            table.setdefault(i, s)
        default = _attr_str(ctx, "default_string", "_Unused")

        def run(inputs, outputs):
            x = np.asarray(inputs[0])
            res = np.empty(x.size, object)
            res[:] = [table.get(int(v), default) for v in x.reshape(-1)]
            _store(where, outputs[0], res.reshape(x.shape))

    return run


# -- ai.onnx.ml LabelEncoder (2, 4): string keys or values ----------------------------------
def _le_side(ctx, kind: str):
    """(values as a list, 'str' | 'int' | 'float') of the keys or the values."""
    a = ctx.attrs
    if f"{kind}_strings" in a:
        return _attr_strs(ctx, f"{kind}_strings"), "str"
    if f"{kind}_int64s" in a:
        return [int(v) for v in a[f"{kind}_int64s"]], "int"
    if f"{kind}_floats" in a:
        return [np.float32(v) for v in a[f"{kind}_floats"]], "float"
    if f"{kind}_tensor" in a:
        t = np.asarray(a[f"{kind}_tensor"]).ravel()
        if t.dtype == object:
            return [v.decode("utf-8") if isinstance(v, bytes) else v for v in t], "str"
        return t.tolist(), ("int" if t.dtype.kind in "iu" else "float")
    return None, None


_LE_OUT = {"str": np.dtype(object), "int": np.dtype(np.int64), "float": np.dtype(np.float32)}


def _check_le_str(ctx, target):
    keys, kk = _le_side(ctx, "keys")
    vals, vk = _le_side(ctx, "values")
    if keys is None or vals is None:
        return "LabelEncoder: keys or values missing"
    if "str" not in (kk, vk):
        return "LabelEncoder: numeric keys and values (the numeric definition runs those)"
    if "float" in (kk, vk) and "str" in (kk, vk) and ctx.opset < 2:
        return "LabelEncoder-1 is not supported"
    if len(keys) != len(vals):
        return f"LabelEncoder: {len(keys)} keys for {len(vals)} values"
    dt = ctx.in_dtypes[0]
    want = {"str": np.dtype(object), "int": np.dtype(np.int64), "float": np.dtype(np.float32)}[kk]
    if dt is None or np.dtype(dt) != want:
        return f"LabelEncoder: input dtype {dt} differs from the keys' ({want})"
    return None


def _le_default(ctx, vk):
    a = ctx.attrs
    if "default_tensor" in a:
        d = np.asarray(a["default_tensor"]).ravel()[0]
        return d.decode("utf-8") if isinstance(d, bytes) else (d if vk == "str" else d.item())
    if vk == "str":
        return _attr_str(ctx, "default_string", "_Unused")
    if vk == "int":
        return int(a.get("default_int64", -1))
    return np.float32(a.get("default_float", -0.0))


@register("LabelEncoder", domain=ML, since=2, until=5, dtypes=("object", "int64", "float32"), targets=("cpu",),
          check=_check_le_str, shape=_same_shape,
          note="string keys or values: a dict lookup per element, else the default ('_Unused', -1, -0.0); "
               "NaN float keys match NaN")
def _build_le_str(ctx, target):
    keys, kk = _le_side(ctx, "keys")
    vals, vk = _le_side(ctx, "values")
    default = _le_default(ctx, vk)
    table = {}
    nan_val = None
    for k, v in zip(keys, vals):
        if kk == "float" and np.isnan(k):
            nan_val = v if nan_val is None else nan_val
            continue
        table.setdefault(k, v)
    where = _where(ctx)
    out_dt = _LE_OUT[vk]

    def key(v):
        if kk == "str":
            return v
        return int(v) if kk == "int" else np.float32(v)

    def run(inputs, outputs):
        x = _strings(where, inputs[0]) if kk == "str" else np.asarray(inputs[0])
        res = np.empty(x.size, out_dt)
        for i, v in enumerate(x.reshape(-1)):
            if kk == "float" and np.isnan(v):
                res[i] = default if nan_val is None else nan_val
            else:
                res[i] = table.get(key(v), default)
        _store(where, outputs[0], res.reshape(x.shape))

    return run


# -- TfIdfVectorizer (9): int or string tokens ----------------------------------------------
_MODES = ("TF", "IDF", "TFIDF")


def _tfidf_pool(ctx):
    """({n: {n-gram tuple: output index}}, output size), or a reason (str)."""
    a = ctx.attrs
    strings = "pool_strings" in a
    pool = _attr_strs(ctx, "pool_strings") if strings else [int(v) for v in a.get("pool_int64s", [])]
    counts = [int(v) for v in a.get("ngram_counts", [])]
    indexes = [int(v) for v in a.get("ngram_indexes", [])]
    if not pool or not counts or not indexes:
        return "TfIdfVectorizer: pool, ngram_counts and ngram_indexes are required"
    if any(i < 0 for i in indexes):
        return "TfIdfVectorizer: ngram_indexes must be >= 0"
    bounds = counts + [len(pool)]
    if any(not 0 <= bounds[i] <= bounds[i + 1] <= len(pool) for i in range(len(counts))):
        return f"TfIdfVectorizer: ngram_counts {counts} do not split a pool of {len(pool)}"
    table: dict = {}
    k = 0
    for g in range(len(counts)):
        n = g + 1
        items = pool[bounds[g]:bounds[g + 1]]
        if len(items) % n:
            return f"TfIdfVectorizer: the {n}-gram part of the pool has {len(items)} items, not a multiple of {n}"
        for j in range(0, len(items), n):
            if k >= len(indexes):
                return f"TfIdfVectorizer: {len(indexes)} ngram_indexes for more n-grams in the pool"
            table.setdefault(n, {}).setdefault(tuple(items[j:j + n]), indexes[k])
            k += 1
    return table, max(indexes) + 1, strings


def _check_tfidf(ctx, target):
    r = _tfidf_pool(ctx)
    if isinstance(r, str):
        return r
    _, size, strings = r
    mode = _attr_str(ctx, "mode", "TF")
    if mode not in _MODES:
        return f"TfIdfVectorizer: mode must be one of {', '.join(_MODES)}, got {mode!r}"
    lo, hi = int(ctx.attrs.get("min_gram_length", 1)), int(ctx.attrs.get("max_gram_length", 1))
    if not 1 <= lo <= hi:
        return f"TfIdfVectorizer: need 1 <= min_gram_length <= max_gram_length, got {lo}, {hi}"
    if int(ctx.attrs.get("max_skip_count", 0)) < 0:
        return "TfIdfVectorizer: max_skip_count must be >= 0"
    w = ctx.attrs.get("weights")
    if w is not None and len(w) and len(w) < size:
        return f"TfIdfVectorizer: {len(w)} weights for an output of {size}"
    dt = ctx.in_dtypes[0]
    if dt is None or (np.dtype(dt) == object) != strings:
        return f"TfIdfVectorizer: input dtype {dt} does not match the {'string' if strings else 'int'} pool"
    s = ctx.in_shapes[0]
    if s is None or len(s) not in (1, 2):
        return f"TfIdfVectorizer: X must be [C] or [N, C], got {s}"
    return None


def _tfidf_shape(ctx):
    r = _tfidf_pool(ctx)
    s = ctx.in_shapes[0]
    if isinstance(r, str) or s is None:
        return [None]
    return [(r[1],) if len(s) == 1 else (s[0], r[1])]


@register("TfIdfVectorizer", since=9, until=21, dtypes=("int64", "int32", "object"), targets=("cpu",),
          check=_check_tfidf, shape=_tfidf_shape,
          note="n-gram counts per row (skip distances 1..max_skip_count+1; unigrams once), then TF / IDF "
               "(count > 0 -> weight) / TFIDF (count * weight), float32")
def _build_tfidf(ctx, target):
    r = _tfidf_pool(ctx)
    if isinstance(r, str):
        raise KernelError(f"{_where(ctx)}: {r}")
    table, size, strings = r
    mode = _attr_str(ctx, "mode", "TF")
    lo, hi = int(ctx.attrs.get("min_gram_length", 1)), int(ctx.attrs.get("max_gram_length", 1))
    skips = int(ctx.attrs.get("max_skip_count", 0))
    w = ctx.attrs.get("weights")
    weights = np.asarray(w, np.float32) if w is not None and len(w) else None
    where = _where(ctx)

    def counts(row) -> np.ndarray:
        c = np.zeros(size, np.int64)
        C = len(row)
        for d in range(1, skips + 2):
            for n in range(max(lo, 1 if d == 1 else 2), hi + 1):
                grams = table.get(n)
                if not grams:
                    continue
                for start in range(C - d * (n - 1)):
                    idx = grams.get(tuple(row[start + k * d] for k in range(n)))
                    if idx is not None:
                        c[idx] += 1
        return c

    def run(inputs, outputs):
        x = _strings(where, inputs[0]) if strings else np.asarray(inputs[0])
        rows = x.reshape(1, -1) if x.ndim == 1 else x
        out = np.empty((rows.shape[0], size), np.float32)
        for i, row in enumerate(rows):
            toks = list(row) if strings else [int(v) for v in row]
            c = counts(toks)
            if mode == "TF":
                out[i] = c.astype(np.float32)
            elif mode == "IDF":
                out[i] = np.where(c > 0, weights if weights is not None else np.float32(1), np.float32(0))
            else:
                out[i] = c.astype(np.float32) * weights if weights is not None else c.astype(np.float32)
        _store(where, outputs[0], out.reshape(-1) if x.ndim == 1 else out)

    return run
