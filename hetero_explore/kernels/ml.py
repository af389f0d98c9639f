"""``ai.onnx.ml``: the traditional-ML operators that scikit-learn converters
(skl2onnx) emit, on the CPU provider only.

Ops: TreeEnsembleClassifier, TreeEnsembleRegressor (schema versions 1 and 3),
TreeEnsemble (5), LinearClassifier, LinearRegressor, SVMClassifier,
SVMRegressor, Normalizer, Scaler, Binarizer, Imputer, ArrayFeatureExtractor,
LabelEncoder (2 and 4, numeric keys and values), OneHotEncoder (integer
categories), FeatureVectorizer. Semantics follow the onnx specification and
onnxruntime's CPU kernels (``onnxruntime/core/providers/cpu/ml``).

How they run
------------
* Host only (``targets=("cpu",)``): these are data-dependent walks (trees) and
  small dense products that GPU runtimes also keep on the host. The code is
  numpy on host arrays, except the tree walks (compiled loops per row and tree
  over flat node arrays, :mod:`.forest`) and the row-wise post transforms.
* **One fixed accumulation order.** Dot products accumulate feature by feature
  in ascending index, starting from the intercept / rho (never BLAS, whose
  order depends on the library and the machine); trees are visited in
  ascending tree id and their leaf weights added in that order; all arithmetic
  is float32 where onnxruntime's kernels compute in float (a double threshold
  tensor of schema 3 compares in double, as onnxruntime does).
* Post transforms (NONE, LOGISTIC, SOFTMAX, SOFTMAX_ZERO, PROBIT) use this
  project's portable float32 exp/log/sqrt (:mod:`.pmath`), applied row by row
  in ascending column order. PROBIT is onnxruntime's ``ErfInv`` approximation
  (the one the onnx reference also uses), not an exact inverse erf.
* Tree node comparison: ``x CMP threshold or (missing_value_tracks_true and
  isnan(x))`` (onnxruntime's rule, so BRANCH_NEQ with NaN goes true).
* Invalid attributes (child ids that name no node, feature ids out of range for
  the input's width, mismatched attribute lengths) raise :class:`KernelError`
  when the kernel is built; out-of-range ArrayFeatureExtractor indices and
  OneHotEncoder categories that are not listed with ``zeros=0`` raise
  :class:`ExecutionError` naming the node at run time.
* Output shapes: onnx's shape inference leaves most of these ops' outputs
  without a shape; each definition's ``shape`` function gives them and the
  loader fills them in (:func:`hetero_explore.load.loader.complete_op_shapes`).

String tensors: CategoryMapper and the string paths of LabelEncoder (string keys
or values) are defined in :mod:`.strings` (this module's LabelEncoder declines
them there); string class labels of the classifiers are not claimed.

Not claimed (declined with a reason or absent): LabelEncoder-1, SVMClassifier with probability
estimates (``prob_a``/``prob_b``: libsvm's iterative pairwise coupling), and
the map/sequence ops ZipMap, DictVectorizer, CastMap (the executor carries
tensors only).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..ir.errors import ExecutionError, KernelError
from . import mlrows
from .forest import FlatForest
from .opdef import OpList
from .pmath import exp_f32, log_f32, sqrt_f32

OPS = OpList()
register = OPS.register

ML = "ai.onnx.ml"
F32 = np.float32
#: float input element types (integers are converted to float32, as onnxruntime does)
REAL_IN = ("float32", "float64", "int64", "int32")

POST = {"NONE": 0, "SOFTMAX": 1, "LOGISTIC": 2, "SOFTMAX_ZERO": 3, "PROBIT": 4}


def _where(ctx) -> str:
    return f"node {ctx.node.name!r} ({ctx.node.op_type})"


def _rank2(ctx, what="X") -> str | None:
    s = ctx.in_shapes[0] if ctx.in_shapes else None
    if s is None:
        return f"{ctx.node.op_type}: the shape of {what} is unknown"
    if len(s) != 2:
        return f"{ctx.node.op_type}: {what} must be 2-D [N, C] here, it has rank {len(s)}"
    return None


def _as_f32(x) -> np.ndarray:
    return np.asarray(x).astype(F32, copy=False)


def _post_code(ctx) -> int:
    p = ctx.attrs.get("post_transform", "NONE")
    if isinstance(p, (int, np.integer)):   # TreeEnsemble-5 encodes it as an int
        return int(p)
    if p not in POST:
        raise KernelError(f"{_where(ctx)}: post_transform={p!r} is not one of {', '.join(POST)}")
    return POST[p]


def _check_post(ctx, target):
    try:
        c = _post_code(ctx)
    except KernelError as e:
        return str(e)
    if not 0 <= c <= 4:
        return f"{ctx.node.op_type}: post_transform={c} is not one of 0..4"
    return None


# --- post transforms (float32, row by row, ascending columns) ----------------------------
_ERFINV_A = F32(2.0) / (F32(3.14159) * F32(0.147))
_ERFINV_B = F32(1.0) / F32(0.147)


@njit(cache=True, error_model="numpy")
def _logistic(v):
    # onnxruntime's ComputeLogistic: 1 / (1 + exp(-|v|)), mirrored for v < 0
    e = exp_f32(-abs(v))
    s = np.float32(1.0) / (np.float32(1.0) + e)
    return (np.float32(1.0) - s) if v < np.float32(0.0) else s


@njit(cache=True, error_model="numpy")
def _probit(v, a, b):
    # onnxruntime's ComputeProbit: sqrt(2) * ErfInv(2v - 1), ErfInv approximated
    x = v * np.float32(2.0) - np.float32(1.0)
    sgn = np.float32(-1.0) if x < np.float32(0.0) else np.float32(1.0)
    x = (np.float32(1.0) - x) * (np.float32(1.0) + x)
    lg = log_f32(x)
    v1 = a + np.float32(0.5) * lg
    v2 = b * lg
    v3 = -v1 + sqrt_f32(v1 * v1 - v2)
    return np.float32(1.41421356) * (sgn * sqrt_f32(v3))


@njit(cache=True, error_model="numpy")
def _post_rows(s, code, a, b):
    """Apply post transform ``code`` in place to the float32 matrix ``s`` (rows x classes)."""
    n, c = s.shape
    for i in range(n):
        if code == 2:
            for j in range(c):
                s[i, j] = _logistic(s[i, j])
        elif code == 4:
            for j in range(c):
                s[i, j] = _probit(s[i, j], a, b)
        elif code == 1:
            m = s[i, 0]
            for j in range(1, c):
                if s[i, j] > m:
                    m = s[i, j]
            tot = np.float32(0.0)
            for j in range(c):
                e = exp_f32(s[i, j] - m)
                s[i, j] = e
                tot += e
            for j in range(c):
                s[i, j] = s[i, j] / tot
        elif code == 3:
            m = s[i, 0]
            for j in range(1, c):
                if s[i, j] > m:
                    m = s[i, j]
            enm = exp_f32(-m)
            tot = np.float32(0.0)
            for j in range(c):
                v = s[i, j]
                if v > np.float32(0.0000001) or v < np.float32(-0.0000001):
                    v = exp_f32(v - m)
                    tot += v
                else:
                    v = v * enm
                s[i, j] = v
            for j in range(c):
                s[i, j] = np.float32(0.5) if tot == np.float32(0.0) else s[i, j] / tot


def post_transform(scores: np.ndarray, code: int) -> np.ndarray:
    """``scores`` (float32, 2-D, modified in place) after the post transform ``code``."""
    if code and scores.size:
        _post_rows(scores, np.int64(code), _ERFINV_A, _ERFINV_B)
    return scores


def _dot_rows(x: np.ndarray, w: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """out[n, c] = bias[c] + Σ_k x[n, k] · w[c, k], accumulated over ascending k in float32
    (compiled: :func:`.mlrows.dot_rows`)."""
    return mlrows.dot_rows(np.ascontiguousarray(x, F32), np.ascontiguousarray(w, F32),
                           np.ascontiguousarray(bias, F32))


def _argmax_labels(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    # first maximum wins (onnxruntime and numpy agree)
    return labels[np.argmax(scores, axis=1)] if scores.shape[1] else np.zeros(scores.shape[0], np.int64)


# --- tree ensembles ---------------------------------------------------------------------------
_MODES = {"BRANCH_LEQ": 0, "BRANCH_LT": 1, "BRANCH_GTE": 2, "BRANCH_GT": 3, "BRANCH_EQ": 4,
          "BRANCH_NEQ": 5, "BRANCH_MEMBER": 6, "LEAF": 7}
LEAF = 7


class _Forest:
    """Trees as flat arrays: internal nodes and leaves share one index space.

    feat, thr, mode, tnext, fnext, miss per node; ``roots`` in evaluation order;
    ``leafw[node]`` is the dense weight row (n_targets) of a leaf and
    ``leafhas[node]`` which targets it names (for MIN/MAX)."""

    def __init__(self, feat, thr, mode, tnext, fnext, miss, roots, leafw, leafhas, members=None):
        self.feat, self.thr, self.mode = feat, thr, mode
        self.tnext, self.fnext, self.miss = tnext, fnext, miss
        self.roots, self.leafw, self.leafhas = roots, leafw, leafhas
        self.members = members or {}

    def leaves(self, x: np.ndarray, root: int) -> np.ndarray:
        """The leaf each row of ``x`` reaches in the tree rooted at ``root``."""
        n = x.shape[0]
        idx = np.full(n, root, np.int64)
        rows = np.arange(n)
        steps = 0
        while rows.size:
            nd = idx[rows]
            inner = self.mode[nd] != LEAF
            rows, nd = rows[inner], nd[inner]
            if not rows.size:
                break
            v = x[rows, self.feat[nd]].astype(self.thr.dtype, copy=False)
            t = self.thr[nd]
            m = self.mode[nd]
            cond = np.select([m == 0, m == 1, m == 2, m == 3, m == 4, m == 5],
                             [v <= t, v < t, v >= t, v > t, v == t, v != t], False)
            if self.members:
                for node in np.unique(nd[m == 6]):
                    sel = nd == node
                    cond[sel] = np.isin(v[sel], self.members[int(node)])
            cond |= self.miss[nd] & np.isnan(v)
            idx[rows] = np.where(cond, self.tnext[nd], self.fnext[nd])
            steps += 1
            if steps > self.mode.shape[0]:
                raise ExecutionError("tree walk did not reach a leaf (the tree has a cycle)")
        return idx

    def _flat(self):
        """The compiled walk's arrays (:class:`.forest.FlatForest`), built on first use; None
        for a forest with BRANCH_MEMBER sets (those walk in numpy)."""
        if self.members:
            return None
        if getattr(self, "_flat_forest", None) is None:
            self._flat_forest = FlatForest(self.feat, self.thr, self.mode, self.tnext, self.fnext, self.miss,
                                           self.roots, self.leafw)
        return self._flat_forest

    def aggregate(self, x: np.ndarray, n_targets: int, agg: str, base) -> np.ndarray:
        """Aggregate the trees' leaf weights over the trees in order; then base values. The
        walks are compiled (:mod:`.forest`: per row, the trees in order, each target's sum
        ``acc + w`` in that order, as the numpy loop below adds them)."""
        dt = self.leafw.dtype
        n = x.shape[0]
        flat = self._flat()
        if agg in ("SUM", "AVERAGE"):
            if flat is not None:
                acc, bad = flat.sum(x)
                if bad >= 0:
                    raise ExecutionError(f"tree walk of row {bad} did not reach a leaf (the tree has a cycle)")
            else:
                acc = np.zeros((n, n_targets), dt)
                for r in self.roots:
                    acc += self.leafw[self.leaves(x, r)]
            if agg == "AVERAGE" and len(self.roots):
                acc /= dt.type(len(self.roots))
        else:
            acc = np.zeros((n, n_targets), dt)
            seen = np.zeros((n, n_targets), bool)
            pick = np.minimum if agg == "MIN" else np.maximum
            if flat is not None:
                leaves, bad = flat.leaves(x)
                if bad >= 0:
                    raise ExecutionError(f"tree walk of row {bad} did not reach a leaf (the tree has a cycle)")
            for t, r in enumerate(self.roots):
                lf = leaves[:, t] if flat is not None else self.leaves(x, r)
                w, h = self.leafw[lf], self.leafhas[lf]
                acc = np.where(h, np.where(seen, pick(acc, w), w), acc)
                seen |= h
        if base is not None:
            acc += np.asarray(base, dt)[None, :]
        return acc


def _attr_array(a, name, dtype=None, default=None):
    if f"{name}_as_tensor" in a:
        v = np.asarray(a[f"{name}_as_tensor"]).ravel()
        return v if dtype is None or v.dtype == np.float64 else v.astype(dtype)
    if name in a:
        return np.asarray(a[name], dtype=dtype)
    return default


def _forest_v1(ctx, weights_prefix: str, ids_name: str, n_targets: int) -> _Forest:
    """TreeEnsembleClassifier/Regressor (schema 1 and 3) as a :class:`_Forest`."""
    a, where = ctx.attrs, _where(ctx)
    treeids = np.asarray(a.get("nodes_treeids", []), np.int64)
    nodeids = np.asarray(a.get("nodes_nodeids", []), np.int64)
    nn = treeids.shape[0]
    feat = np.asarray(a.get("nodes_featureids", []), np.int64)
    thr = _attr_array(a, "nodes_values", F32, np.zeros(nn, F32))
    modes_s = list(a.get("nodes_modes", []))
    tids = np.asarray(a.get("nodes_truenodeids", []), np.int64)
    fids = np.asarray(a.get("nodes_falsenodeids", []), np.int64)
    miss = np.asarray(a.get("nodes_missing_value_tracks_true", [0] * nn), np.int64) != 0
    for nm, arr in (("nodes_nodeids", nodeids), ("nodes_featureids", feat), ("nodes_values", thr),
                    ("nodes_modes", modes_s), ("nodes_truenodeids", tids), ("nodes_falsenodeids", fids),
                    ("nodes_missing_value_tracks_true", miss)):
        if len(arr) != nn:
            raise KernelError(f"{where}: {nm} has {len(arr)} entries, nodes_treeids has {nn}")
    bad = [m for m in modes_s if m not in _MODES or m == "BRANCH_MEMBER"]
    if bad:
        raise KernelError(f"{where}: unknown node mode {bad[0]!r}")
    mode = np.asarray([_MODES[m] for m in modes_s], np.int64)
    index = {}
    for i, (t, nid) in enumerate(zip(treeids.tolist(), nodeids.tolist())):
        if (t, nid) in index:
            raise KernelError(f"{where}: node (tree {t}, id {nid}) is defined twice")
        index[(t, nid)] = i
    n_feat = ctx.in_shapes[0][1]
    tnext = np.zeros(nn, np.int64)
    fnext = np.zeros(nn, np.int64)
    for i in range(nn):
        if mode[i] == LEAF:
            continue
        t = int(treeids[i])
        for arr, out, what in ((tids, tnext, "true"), (fids, fnext, "false")):
            j = index.get((t, int(arr[i])))
            if j is None:
                raise KernelError(f"{where}: node (tree {t}, id {int(nodeids[i])}) has {what} child "
                                  f"id {int(arr[i])}, which tree {t} does not define")
            out[i] = j
        if not 0 <= feat[i] < n_feat:
            raise KernelError(f"{where}: node (tree {t}, id {int(nodeids[i])}) reads feature "
                              f"{int(feat[i])}, X has {n_feat} features")
    roots = []
    for t in sorted(set(treeids.tolist())):   # trees in ascending id, each rooted at its first node
        roots.append(int(np.nonzero(treeids == t)[0][0]))
    wt = np.asarray(a.get(f"{weights_prefix}_treeids", []), np.int64)
    wn = np.asarray(a.get(f"{weights_prefix}_nodeids", []), np.int64)
    wc = np.asarray(a.get(ids_name, []), np.int64)
    ww = _attr_array(a, f"{weights_prefix}_weights", F32, np.zeros(0, F32))
    if not len(wt) == len(wn) == len(wc) == len(ww):
        raise KernelError(f"{where}: the {weights_prefix}_* attributes differ in length")
    wdt = np.float64 if ww.dtype == np.float64 else F32
    leafw = np.zeros((nn, n_targets), wdt)
    leafhas = np.zeros((nn, n_targets), bool)
    for t, nid, c, w in zip(wt.tolist(), wn.tolist(), wc.tolist(), ww.tolist()):
        j = index.get((t, nid))
        if j is None or mode[j] != LEAF:
            raise KernelError(f"{where}: a weight names (tree {t}, id {nid}), which is not a leaf")
        if not 0 <= c < n_targets:
            raise KernelError(f"{where}: a weight names target/class {c}, outside 0..{n_targets - 1}")
        # several weights for one (leaf, target) are summed first (in attribute order)
        leafw[j, c] = leafw[j, c] + wdt(w)
        leafhas[j, c] = True
    return _Forest(feat, thr, mode, tnext, fnext, miss, roots, leafw, leafhas)


def _int_labels(ctx) -> list:
    """Integer class labels: ``classlabels_int64s`` (trees) or ``classlabels_ints`` (linear, SVM)."""
    a = ctx.attrs
    return list(a.get("classlabels_int64s", None) or a.get("classlabels_ints", None) or [])


def _n_classes(ctx) -> int:
    return max(len(_int_labels(ctx)), len(ctx.attrs.get("classlabels_strings", []) or []))


def _class_labels(ctx) -> np.ndarray:
    """The class labels: int64, or ``classlabels_strings`` as a string tensor's elements."""
    strs = ctx.attrs.get("classlabels_strings")
    if strs:
        return np.asarray([v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in strs], object)
    return np.asarray(_int_labels(ctx), np.int64)


def _check_tree_classifier(ctx, target):
    r = _rank2(ctx) or _check_post(ctx, target)
    if r:
        return r
    if _n_classes(ctx) < 2:
        return "TreeEnsembleClassifier: fewer than two class labels"
    return None


def _shape_classifier(ctx, n_scores):
    n = ctx.in_shapes[0][0]
    return [(n,), (n, n_scores)]


@register("TreeEnsembleClassifier", domain=ML, since=1, until=4, dtypes=REAL_IN, targets=("cpu",),
          check=_check_tree_classifier,
          shape=lambda ctx: _shape_classifier(ctx, _n_classes(ctx)),
          note="trees in ascending id, float32 sums (double thresholds compare in double); "
               "binary: one class id -> [1-s, s] or [-s, s]; int64 or string labels")
def _build_tree_classifier(ctx, target):
    a = ctx.attrs
    labels = _class_labels(ctx)
    nc = labels.shape[0]
    forest = _forest_v1(ctx, "class", "class_ids", nc)
    base = _attr_array(a, "base_values", F32)
    code = _post_code(ctx)
    binary = len(set(np.asarray(a.get("class_ids", []), np.int64).tolist())) == 1 and nc == 2
    if base is not None and binary and base.size == 1:   # the one score column's base value
        base = np.repeat(base, nc)
    if base is not None and base.size not in (0, nc):
        raise KernelError(f"{_where(ctx)}: base_values has {base.size} entries for {nc} classes")
    base = None if base is None or base.size == 0 else base

    def run(inputs, outputs):
        x = np.asarray(inputs[0])
        x = x if x.dtype.kind == "f" else x.astype(F32)
        s = forest.aggregate(x, nc, "SUM", base).astype(F32, copy=False)
        if binary:  # one score column: onnxruntime writes the second class from it
            only = int(np.asarray(a["class_ids"])[0])
            v = s[:, only].copy()
            s[:, 1] = v
            s[:, 0] = (F32(1.0) - v) if code in (0, 4) else -v
        s = np.ascontiguousarray(s, F32)
        post_transform(s, code)
        outputs[1][...] = s
        outputs[0][...] = _argmax_labels(s, labels)

    return run


def _check_tree_regressor(ctx, target):
    r = _rank2(ctx) or _check_post(ctx, target)
    if r:
        return r
    if ctx.attrs.get("aggregate_function", "SUM") not in ("SUM", "AVERAGE", "MIN", "MAX"):
        return f"TreeEnsembleRegressor: aggregate_function={ctx.attrs['aggregate_function']!r}"
    return None


@register("TreeEnsembleRegressor", domain=ML, since=1, until=4, dtypes=REAL_IN, targets=("cpu",),
          check=_check_tree_regressor,
          shape=lambda ctx: [(ctx.in_shapes[0][0], int(ctx.attrs.get("n_targets", 1)))],
          note="SUM/AVERAGE/MIN/MAX over trees in ascending id, then base_values, then post_transform")
def _build_tree_regressor(ctx, target):
    a = ctx.attrs
    nt = int(a.get("n_targets", 1))
    forest = _forest_v1(ctx, "target", "target_ids", nt)
    base = _attr_array(a, "base_values", F32)
    base = None if base is None or base.size == 0 else base
    if base is not None and base.size != nt:
        raise KernelError(f"{_where(ctx)}: base_values has {base.size} entries for {nt} targets")
    agg = a.get("aggregate_function", "SUM")
    code = _post_code(ctx)

    def run(inputs, outputs):
        x = np.asarray(inputs[0])
        x = x if x.dtype.kind == "f" else x.astype(F32)
        s = np.ascontiguousarray(forest.aggregate(x, nt, agg, base), F32)
        post_transform(s, code)
        outputs[0][...] = s

    return run


_AGG5 = {0: "AVERAGE", 1: "SUM", 2: "MIN", 3: "MAX"}


def _check_tree5(ctx, target):
    r = _rank2(ctx)
    if r:
        return r
    if int(ctx.attrs.get("post_transform", 0)) != 0:
        return "TreeEnsemble: only post_transform=NONE (0) is specified for TreeEnsemble-5 here"
    if int(ctx.attrs.get("aggregate_function", 1)) not in _AGG5:
        return f"TreeEnsemble: aggregate_function={ctx.attrs['aggregate_function']} is not 0..3"
    if ctx.in_dtypes[0] is None or np.dtype(ctx.in_dtypes[0]).name not in ("float32", "float64"):
        return "TreeEnsemble: X must be float32 or float64 here"
    return None


def _forest_v5(ctx) -> _Forest:
    a, where = ctx.attrs, _where(ctx)
    splits = np.asarray(a["nodes_splits"]).ravel()
    dt = splits.dtype if splits.dtype in (np.float32, np.float64) else np.dtype(F32)
    splits = splits.astype(dt)
    feat = np.asarray(a["nodes_featureids"], np.int64)
    modes = np.asarray(a["nodes_modes"]).ravel().astype(np.int64)
    tn = np.asarray(a["nodes_truenodeids"], np.int64)
    fn = np.asarray(a["nodes_falsenodeids"], np.int64)
    tl = np.asarray(a["nodes_trueleafs"], np.int64)
    fl = np.asarray(a["nodes_falseleafs"], np.int64)
    ni = splits.shape[0]
    miss = np.asarray(a.get("nodes_missing_value_tracks_true", [0] * ni), np.int64) != 0
    lt = np.asarray(a["leaf_targetids"], np.int64)
    lw = np.asarray(a["leaf_weights"]).ravel().astype(dt)
    roots5 = np.asarray(a["tree_roots"], np.int64)
    nt = int(a.get("n_targets", 1))
    for nm, arr in (("nodes_featureids", feat), ("nodes_modes", modes), ("nodes_truenodeids", tn),
                    ("nodes_falsenodeids", fn), ("nodes_trueleafs", tl), ("nodes_falseleafs", fl),
                    ("nodes_missing_value_tracks_true", miss)):
        if len(arr) != ni:
            raise KernelError(f"{where}: {nm} has {len(arr)} entries, nodes_splits has {ni}")
    nl = lt.shape[0]
    if lw.shape[0] != nl:
        raise KernelError(f"{where}: leaf_weights has {lw.shape[0]} entries, leaf_targetids has {nl}")
    if np.any((modes < 0) | (modes > 6)):
        raise KernelError(f"{where}: nodes_modes must be 0..6")
    n_feat = ctx.in_shapes[0][1]
    if np.any((feat < 0) | (feat >= n_feat)):
        raise KernelError(f"{where}: a node reads a feature outside 0..{n_feat - 1}")
    if np.any((lt < 0) | (lt >= nt)):
        raise KernelError(f"{where}: a leaf names a target outside 0..{nt - 1}")

    def child(ids, leafs):
        out = np.where(leafs != 0, ni + ids, ids)
        ok = np.where(leafs != 0, (ids >= 0) & (ids < nl), (ids >= 0) & (ids < ni))
        if not ok.all():
            raise KernelError(f"{where}: a node's child index is out of range")
        return out

    tnext, fnext = child(tn, tl), child(fn, fl)
    if np.any((roots5 < 0) | (roots5 >= ni)):
        raise KernelError(f"{where}: tree_roots names a node outside 0..{ni - 1}")
    members = {}
    mv = a.get("membership_values")
    if mv is not None:
        mv = np.asarray(mv).ravel().astype(dt)
        pos = 0
        for i in np.nonzero(modes == 6)[0]:
            cur = []
            while pos < mv.shape[0] and not np.isnan(mv[pos]):
                cur.append(mv[pos])
                pos += 1
            pos += 1
            members[int(i)] = np.asarray(cur, dt)
    elif np.any(modes == 6):
        raise KernelError(f"{where}: BRANCH_MEMBER nodes without membership_values")
    feat_all = np.concatenate([feat, np.zeros(nl, np.int64)])
    thr_all = np.concatenate([splits, np.zeros(nl, dt)])
    mode_all = np.concatenate([modes, np.full(nl, LEAF, np.int64)])
    tnext_all = np.concatenate([tnext, np.zeros(nl, np.int64)])
    fnext_all = np.concatenate([fnext, np.zeros(nl, np.int64)])
    miss_all = np.concatenate([miss, np.zeros(nl, bool)])
    leafw = np.zeros((ni + nl, nt), dt)
    leafhas = np.zeros((ni + nl, nt), bool)
    leafw[ni + np.arange(nl), lt] = lw
    leafhas[ni + np.arange(nl), lt] = True
    return _Forest(feat_all, thr_all, mode_all, tnext_all, fnext_all, miss_all, roots5.tolist(),
                   leafw, leafhas, members)


@register("TreeEnsemble", domain=ML, since=5, until=5, dtypes=("float32", "float64"), targets=("cpu",),
          check=_check_tree5,
          shape=lambda ctx: [(ctx.in_shapes[0][0], int(ctx.attrs.get("n_targets", 1)))],
          note="tree_roots in order; BRANCH_MEMBER sets; aggregate then post_transform NONE")
def _build_tree5(ctx, target):
    forest = _forest_v5(ctx)
    nt = int(ctx.attrs.get("n_targets", 1))
    agg = _AGG5[int(ctx.attrs.get("aggregate_function", 1))]

    def run(inputs, outputs):
        outputs[0][...] = forest.aggregate(np.asarray(inputs[0]), nt, agg, None)

    return run


# --- linear models ----------------------------------------------------------------------------
def _features(ctx) -> int:
    """X's feature count: its last dim (a 1-D X is one row, as onnxruntime reads it)."""
    xs = ctx.in_shapes[0]
    return int(xs[-1]) if len(xs) in (1, 2) else 0


def _linear_parts(ctx, rows=None):
    """(w [rows, features], b [rows]). onnxruntime's reading: the row count is the number of
    intercepts (when given), the feature count X's, and the coefficients are read as the first
    rows x features values, row by row (further values are not read; fewer are an error here,
    where onnxruntime would read past them)."""
    a, where = ctx.attrs, _where(ctx)
    nf = _features(ctx)
    coef = np.asarray(a.get("coefficients", []), F32)
    b = a.get("intercepts")
    if rows is None:
        rows = len(b) if b else (coef.size // nf if nf and coef.size % nf == 0 else 0)
    if nf == 0 or rows == 0 or coef.size < rows * nf:
        raise KernelError(f"{where}: {coef.size} coefficients are fewer than {rows} rows of {nf} features "
                          "(rows: the intercepts' count; features: X's last dim)")
    w = coef[:rows * nf].reshape(rows, nf)
    b = np.asarray(b if b else [0.0] * rows, F32)
    if b.size != rows:
        raise KernelError(f"{where}: {b.size} intercepts for {rows} coefficient rows")
    return w, b


def _lc_rows(ctx) -> int:
    b = ctx.attrs.get("intercepts")
    nf = _features(ctx)
    return len(b) if b else len(ctx.attrs.get("coefficients", [])) // max(nf, 1)


def _lc_n_scores(ctx) -> int:
    rows = _lc_rows(ctx)
    return 2 if rows == 1 and _n_classes(ctx) == 2 else rows


def _lc_shape(ctx):
    xs = ctx.in_shapes[0]
    n = xs[0] if len(xs) == 2 else 1
    return [(n,), (n, _lc_n_scores(ctx))]


def _check_linear_classifier(ctx, target):
    xs = ctx.in_shapes[0] if ctx.in_shapes else None
    if xs is None or len(xs) not in (1, 2):
        return "LinearClassifier: X must be [N, C] or [C] with a known shape"
    r = _check_post(ctx, target)
    if r:
        return r
    if not _n_classes(ctx):
        return "LinearClassifier: no classlabels_ints or classlabels_strings"
    return None


@register("LinearClassifier", domain=ML, since=1, until=5, dtypes=REAL_IN, targets=("cpu",),
          check=_check_linear_classifier, shape=_lc_shape,
          note="scores = intercept + Σ_k x_k·w_k (ascending k, float32); one row & two classes -> [-s, s]; "
               "rows = intercepts, features = X's (onnxruntime's reading); int64 or string labels")
def _build_linear_classifier(ctx, target):
    w, b = _linear_parts(ctx)
    labels = _class_labels(ctx)
    code = _post_code(ctx)
    two = w.shape[0] == 1 and labels.shape[0] == 2
    if not two and w.shape[0] != labels.shape[0]:
        raise KernelError(f"{_where(ctx)}: {w.shape[0]} coefficient rows for {labels.shape[0]} classes")

    def run(inputs, outputs):
        s = _dot_rows(_as_f32(inputs[0]).reshape(-1, w.shape[1]), w, b)
        if two:
            s = np.ascontiguousarray(np.concatenate([-s, s], axis=1))
        post_transform(s, code)
        outputs[1][...] = s
        outputs[0][...] = _argmax_labels(s, labels)

    return run


def _check_linear_regressor(ctx, target):
    return _rank2(ctx) or _check_post(ctx, target)


@register("LinearRegressor", domain=ML, since=1, until=5, dtypes=REAL_IN, targets=("cpu",),
          check=_check_linear_regressor,
          shape=lambda ctx: [(ctx.in_shapes[0][0], int(ctx.attrs.get("targets", 1)))],
          note="intercept + Σ_k x_k·w_k (ascending k, float32), then post_transform")
def _build_linear_regressor(ctx, target):
    nt = int(ctx.attrs.get("targets", 1))
    w, b = _linear_parts(ctx, rows=nt)
    if w.shape[0] != nt:
        raise KernelError(f"{_where(ctx)}: {w.shape[0]} coefficient rows for targets={nt}")
    code = _post_code(ctx)

    def run(inputs, outputs):
        s = _dot_rows(_as_f32(inputs[0]), w, b)
        post_transform(s, code)
        outputs[0][...] = s

    return run


# --- SVMs ---------------------------------------------------------------------------------------
_KERNELS = ("LINEAR", "POLY", "RBF", "SIGMOID")


def _svm_args(x, sv, kind, gamma, coef0, degree):
    """x, the vectors and the kernel's parameters as :mod:`.mlrows`' SVM loops take them."""
    return (np.ascontiguousarray(x, F32), np.ascontiguousarray(sv, F32), mlrows.KERNELS[kind], F32(gamma),
            F32(coef0), int(degree))


def _svm_params(ctx):
    a, where = ctx.attrs, _where(ctx)
    kind = a.get("kernel_type", "LINEAR")
    if kind not in _KERNELS:
        raise KernelError(f"{where}: kernel_type={kind!r} is not one of {', '.join(_KERNELS)}")
    kp = list(a.get("kernel_params", [])) + [0.0, 0.0, 0.0]
    gamma, coef0, degree = F32(kp[0]), F32(kp[1]), int(kp[2])
    nf = ctx.in_shapes[0][1]
    sv = np.asarray(a.get("support_vectors", []), F32)
    if sv.size % max(nf, 1):
        raise KernelError(f"{where}: {sv.size} support vector values do not split into rows of {nf}")
    return kind, gamma, coef0, degree, sv.reshape(-1, nf) if nf else sv.reshape(0, 0)


def _svc_n_scores(ctx) -> int:
    a = ctx.attrs
    nc = max(_n_classes(ctx), 1)
    nv = int(sum(a.get("vectors_per_class", []) or []))
    k = nc * (nc - 1) // 2 if nv > 0 else nc
    return 2 if k == 1 else k


def _check_svc(ctx, target):
    r = _rank2(ctx) or _check_post(ctx, target)
    if r:
        return r
    a = ctx.attrs
    if _n_classes(ctx) < 2:
        return "SVMClassifier: fewer than two class labels"
    if not a.get("vectors_per_class"):
        return "SVMClassifier: the linear (no support vectors) mode is not implemented"
    if a.get("prob_a"):
        return "SVMClassifier: probability estimates (prob_a/prob_b) are not implemented"
    if _post_code(ctx) != 0:
        return "SVMClassifier: only post_transform NONE is implemented"
    return None


@register("SVMClassifier", domain=ML, since=1, until=5, dtypes=REAL_IN, targets=("cpu",),
          check=_check_svc, shape=lambda ctx: _shape_classifier(ctx, _svc_n_scores(ctx)),
          note="one-vs-one votes (SVC) or one-vs-rest scores (linear), float32; no probabilities")
def _build_svc(ctx, target):
    a, where = ctx.attrs, _where(ctx)
    kind, gamma, coef0, degree, sv = _svm_params(ctx)
    labels = _class_labels(ctx)
    nc = labels.shape[0]
    vpc = np.asarray(a.get("vectors_per_class", []), np.int64)
    nv = int(vpc.sum()) if vpc.size else 0
    coef = np.asarray(a.get("coefficients", []), F32)
    rho = np.asarray(a.get("rho", []), F32)
    if nv:
        if sv.shape[0] != nv or vpc.shape[0] != nc or coef.size != (nc - 1) * nv:
            raise KernelError(f"{where}: support_vectors / vectors_per_class / coefficients do not "
                              f"match {nc} classes and {nv} vectors")
        if rho.size != nc * (nc - 1) // 2:
            raise KernelError(f"{where}: rho has {rho.size} entries, {nc * (nc - 1) // 2} pairs")
        coefs = np.ascontiguousarray(coef.reshape(nc - 1, nv))
        start = np.concatenate([[0], np.cumsum(vpc)[:-1]]).astype(np.int64)
    else:
        raise KernelError(f"{where}: the linear SVM mode (no support vectors) is not implemented")
    all_pos = bool(coef.size == 0 or coef.min() >= 0)

    def run(inputs, outputs):
        x = _as_f32(inputs[0])
        n = x.shape[0]
        if nv:
            # per pair (i, j): rho + coef * k over class i's vectors, then class j's, ascending
            f = mlrows.svc_rows_par if mlrows.svm_parallel(n) else mlrows.svc_rows
            scores, votes = f(*_svm_args(x, sv, kind, gamma, coef0, degree), coefs, rho, start, vpc)
            if nc == 2:   # one pair: onnxruntime writes [-s, s] and labels by the vote
                lab = (np.full(n, labels[1]) if all_pos
                       else np.where(scores[:, 0] > 0, labels[0], labels[1]))
                scores = np.concatenate([-scores, scores], axis=1)
            else:
                lab = labels[np.argmax(votes, axis=1)]
        else:
            raise KernelError(f"{where}: the linear SVM mode is not implemented")
        outputs[1][...] = scores
        outputs[0][...] = lab

    return run


@register("SVMRegressor", domain=ML, since=1, until=5, dtypes=REAL_IN, targets=("cpu",),
          check=lambda ctx, t: _rank2(ctx) or _check_post(ctx, t)
          or (None if int(ctx.attrs.get("one_class", 0)) == 0 else "SVMRegressor: one_class=1 not implemented"),
          shape=lambda ctx: [(ctx.in_shapes[0][0], 1)],
          note="rho + Σ_j coef_j·K(x, sv_j) over ascending j, float32")
def _build_svr(ctx, target):
    a, where = ctx.attrs, _where(ctx)
    kind, gamma, coef0, degree, sv = _svm_params(ctx)
    coef = np.asarray(a.get("coefficients", []), F32)
    rho = np.asarray(a.get("rho", [0.0]), F32)
    nv = int(a.get("n_supports", 0))
    code = _post_code(ctx)
    if nv:
        if sv.shape[0] != nv or coef.size != nv:
            raise KernelError(f"{where}: n_supports={nv}, {sv.shape[0]} support vectors, {coef.size} coefficients")
    else:
        nf = ctx.in_shapes[0][1]
        if coef.size != nf:
            raise KernelError(f"{where}: linear mode needs {nf} coefficients, has {coef.size}")

    def run(inputs, outputs):
        x = _as_f32(inputs[0])
        if nv:   # rho + coef_j * k_j over ascending j
            f = mlrows.svr_rows_par if mlrows.svm_parallel(x.shape[0]) else mlrows.svr_rows
            s = f(*_svm_args(x, sv, kind, gamma, coef0, degree), coef, F32(rho[0]))[:, None]
        else:
            s = _dot_rows(x, coef.reshape(1, -1), rho[:1])
        s = np.ascontiguousarray(s, F32)
        post_transform(s, code)
        outputs[0][...] = s

    return run


# --- preprocessing -----------------------------------------------------------------------------
def _same_shape(ctx):
    return [tuple(ctx.in_shapes[0])]


@njit(cache=True, error_model="numpy")
def _l2_rows(x, out):
    for i in range(x.shape[0]):
        s = np.float32(0.0)
        for j in range(x.shape[1]):
            s += x[i, j] * x[i, j]
        r = sqrt_f32(s)
        for j in range(x.shape[1]):
            out[i, j] = x[i, j] / r if r != np.float32(0.0) else x[i, j]


def _check_normalizer(ctx, target):
    s = ctx.in_shapes[0]
    if s is None or len(s) not in (1, 2):
        return "Normalizer: X must be 1-D or 2-D"
    if ctx.attrs.get("norm", "MAX") not in ("MAX", "L1", "L2"):
        return f"Normalizer: norm={ctx.attrs.get('norm')!r} is not MAX, L1 or L2"
    return None


@register("Normalizer", domain=ML, since=1, until=5, dtypes=REAL_IN, targets=("cpu",),
          check=_check_normalizer, shape=_same_shape,
          note="per row MAX / L1 / L2 (float32, ascending columns); a zero norm leaves the row")
def _build_normalizer(ctx, target):
    norm = ctx.attrs.get("norm", "MAX")

    def run(inputs, outputs):
        x = _as_f32(inputs[0])
        x2 = np.ascontiguousarray(x.reshape(1, -1) if x.ndim == 1 else x)
        out = np.empty_like(x2)
        if norm == "L2":
            _l2_rows(x2, out)
        else:
            if norm == "MAX":
                d = x2.max(axis=1, keepdims=True) if x2.shape[1] else np.ones((x2.shape[0], 1), F32)
            else:
                d = np.zeros((x2.shape[0], 1), F32)
                for j in range(x2.shape[1]):
                    d += np.abs(x2[:, j:j + 1])
            out[...] = np.where(d != 0, x2 / np.where(d != 0, d, F32(1.0)), x2)
        outputs[0][...] = out.reshape(outputs[0].shape)

    return run


@register("Scaler", domain=ML, since=1, until=5, dtypes=REAL_IN, targets=("cpu",),
          check=lambda ctx, t: None if ctx.in_shapes[0] is not None and len(ctx.in_shapes[0]) in (1, 2)
          else "Scaler: X must be 1-D or 2-D",
          shape=_same_shape, note="(x - offset) * scale in float32; one value or one per column")
def _build_scaler(ctx, target):
    a = ctx.attrs
    nf = ctx.in_shapes[0][-1]
    off = np.asarray(a.get("offset", [0.0]), F32)
    sc = np.asarray(a.get("scale", [1.0]), F32)
    for nm, v in (("offset", off), ("scale", sc)):
        if v.size not in (1, nf):
            raise KernelError(f"{_where(ctx)}: {nm} has {v.size} values for {nf} columns")

    def run(inputs, outputs):
        outputs[0][...] = (_as_f32(inputs[0]) - off) * sc

    return run


@register("Binarizer", domain=ML, since=1, until=5, dtypes=("float32", "float64", "int64", "int32"),
          targets=("cpu",), shape=_same_shape, note="x > threshold ? 1 : 0 in the input dtype")
def _build_binarizer(ctx, target):
    thr = float(ctx.attrs.get("threshold", 0.0))

    def run(inputs, outputs):
        x = np.asarray(inputs[0])
        t = x.dtype.type(thr) if x.dtype.kind == "f" else thr
        outputs[0][...] = np.where(x > t, 1, 0).astype(x.dtype)

    return run


def _check_imputer(ctx, target):
    a = ctx.attrs
    dt = reg_dtype(ctx)
    if dt == "float32":
        if not a.get("imputed_value_floats"):
            return "Imputer: float input needs imputed_value_floats"
    elif dt in ("int64",):
        if not a.get("imputed_value_int64s"):
            return "Imputer: int64 input needs imputed_value_int64s"
    else:
        return f"Imputer: dtype {dt} (float32 and int64 only)"
    s = ctx.in_shapes[0]
    if s is None or len(s) not in (1, 2):
        return "Imputer: X must be 1-D or 2-D"
    return None


def reg_dtype(ctx) -> str | None:
    d = ctx.in_dtypes[0] if ctx.in_dtypes else None
    return None if d is None else np.dtype(d).name


@register("Imputer", domain=ML, since=1, until=5, dtypes=("float32", "int64"), targets=("cpu",),
          check=_check_imputer, shape=_same_shape,
          note="replaced_value (NaN matches NaN) -> imputed value (one, or one per column)")
def _build_imputer(ctx, target):
    a = ctx.attrs
    fl = reg_dtype(ctx) == "float32"
    vals = np.asarray(a["imputed_value_floats"] if fl else a["imputed_value_int64s"], F32 if fl else np.int64)
    rep = a.get("replaced_value_float", 0.0) if fl else a.get("replaced_value_int64", 0)
    nf = ctx.in_shapes[0][-1]
    if vals.size not in (1, nf):
        raise KernelError(f"{_where(ctx)}: {vals.size} imputed values for {nf} columns")

    def run(inputs, outputs):
        x = np.asarray(inputs[0])
        if fl:
            r = F32(rep)
            hit = np.isnan(x) if np.isnan(r) else (x == r)
        else:
            hit = x == np.int64(rep)
        outputs[0][...] = np.where(hit, vals, x)

    return run


def _check_afe(ctx, target):
    s, si = ctx.in_shapes[0], ctx.in_shapes[1] if len(ctx.in_shapes) > 1 else None
    if s is None or si is None:
        return "ArrayFeatureExtractor: input shapes unknown"
    if len(s) == 0:
        return "ArrayFeatureExtractor: X must have rank >= 1"
    if ctx.in_dtypes[1] is None or np.dtype(ctx.in_dtypes[1]).name != "int64":
        return "ArrayFeatureExtractor: Y must be int64"
    return None


@register("ArrayFeatureExtractor", domain=ML, since=1, until=5, dtypes=("float32", "float64", "int64", "int32"),
          targets=("cpu",), check=_check_afe,
          shape=lambda ctx: [tuple(ctx.in_shapes[0][:-1]) + (int(np.prod(ctx.in_shapes[1], dtype=np.int64)),)
                             if len(ctx.in_shapes[0]) > 1 else (int(np.prod(ctx.in_shapes[1], dtype=np.int64)),)],
          note="X[..., Y] on the last axis; out-of-range indices are an ExecutionError")
def _build_afe(ctx, target):
    where = _where(ctx)

    def run(inputs, outputs):
        x = np.asarray(inputs[0])
        idx = np.asarray(inputs[1], np.int64).ravel()
        n = x.shape[-1]
        if idx.size == 1:   # one column (skl2onnx's SVC and classifier graphs): no index arrays
            k = int(idx[0])
            if not 0 <= k < n:
                raise ExecutionError(f"{where}: index {k} is out of range for the last axis of X, of size {n} "
                                     f"(valid: 0..{n - 1})")
            outputs[0][...] = x[..., k:k + 1].reshape(outputs[0].shape)
            return
        bad = (idx < 0) | (idx >= n)
        if bad.any():
            raise ExecutionError(f"{where}: index {int(idx[bad][0])} is out of range for the last "
                                 f"axis of X, of size {n} (valid: 0..{n - 1})")
        outputs[0][...] = x[..., idx].reshape(outputs[0].shape)

    return run


# LabelEncoder 2 and 4: numeric keys/values
def _le_table(ctx):
    a = ctx.attrs
    keys = vals = None
    if "keys_tensor" in a:
        keys = np.asarray(a["keys_tensor"]).ravel()
    for nm, dt in (("keys_floats", F32), ("keys_int64s", np.int64), ("keys_strings", object)):
        if nm in a:
            keys = np.asarray(a[nm], dt)
    if "values_tensor" in a:
        vals = np.asarray(a["values_tensor"]).ravel()
    for nm, dt in (("values_floats", F32), ("values_int64s", np.int64), ("values_strings", object)):
        if nm in a:
            vals = np.asarray(a[nm], dt)
    if "default_tensor" in a:
        default = np.asarray(a["default_tensor"]).ravel()[:1]
    elif vals is not None and vals.dtype == F32:
        default = np.asarray([a.get("default_float", -0.0)], F32)
    elif vals is not None and vals.dtype == np.int64:
        default = np.asarray([a.get("default_int64", -1)], np.int64)
    else:
        default = None
    return keys, vals, default


def _check_le(ctx, target):
    keys, vals, default = _le_table(ctx)
    if keys is None or vals is None:
        return "LabelEncoder: keys or values missing"
    if keys.dtype.kind in "OSU" or vals.dtype.kind in "OSU":
        return "LabelEncoder: string keys or values (string tensors are not supported)"
    if keys.shape[0] != vals.shape[0]:
        return f"LabelEncoder: {keys.shape[0]} keys for {vals.shape[0]} values"
    if ctx.in_dtypes[0] is None or np.dtype(ctx.in_dtypes[0]) != keys.dtype:
        return f"LabelEncoder: input dtype {reg_dtype(ctx)} differs from the keys' {keys.dtype.name}"
    return None


@register("LabelEncoder", domain=ML, since=2, until=5, dtypes=("float32", "float64", "int64", "int32", "int16"),
          targets=("cpu",), check=_check_le, shape=_same_shape,
          note="numeric keys -> numeric values, else default (NaN keys match NaN); no strings")
def _build_le(ctx, target):
    keys, vals, default = _le_table(ctx)
    order = np.argsort(keys, kind="stable")
    sk, sv = keys[order], vals[order]
    nan_key = np.nonzero(np.isnan(keys))[0] if keys.dtype.kind == "f" else np.zeros(0, np.int64)
    default = default.astype(vals.dtype) if default is not None else np.zeros(1, vals.dtype)

    def run(inputs, outputs):
        x = np.asarray(inputs[0])
        pos = np.searchsorted(sk, x)
        posc = np.minimum(pos, max(sk.shape[0] - 1, 0))
        hit = (sk.shape[0] > 0) & (sk[posc] == x) if sk.shape[0] else np.zeros(x.shape, bool)
        out = np.where(hit, sv[posc] if sk.shape[0] else default[0], default[0])
        if nan_key.size:
            out = np.where(np.isnan(x), vals[nan_key[0]], out)
        outputs[0][...] = out

    return run


def _check_ohe(ctx, target):
    a = ctx.attrs
    strings = reg_dtype(ctx) == "object"
    if strings and not a.get("cats_strings"):
        return "OneHotEncoder: a string input needs cats_strings"
    if not strings and not a.get("cats_int64s"):
        return "OneHotEncoder: a numeric input needs cats_int64s"
    if ctx.in_shapes[0] is None:
        return "OneHotEncoder: the input shape is unknown"
    return None


def _ohe_cats(ctx):
    a = ctx.attrs
    if reg_dtype(ctx) == "object":
        return np.asarray([c.decode("utf-8") if isinstance(c, bytes) else str(c) for c in a["cats_strings"]], object)
    return np.asarray(a["cats_int64s"], np.int64)


@register("OneHotEncoder", domain=ML, since=1, until=5, dtypes=("int64", "int32", "float32", "float64", "object"),
          targets=("cpu",), check=_check_ohe,
          shape=lambda ctx: [tuple(ctx.in_shapes[0]) + (len(_ohe_cats(ctx)),)],
          note="float32 one-hot over cats_int64s (float input truncated to int64, as onnxruntime does) or "
               "cats_strings (string input, exact str equality); unknown with zeros=0 is an ExecutionError")
def _build_ohe(ctx, target):
    from .strings import _strings as _check_strings   # every element a str (else ExecutionError)
    cats = _ohe_cats(ctx)
    strings = cats.dtype == object
    zeros = int(ctx.attrs.get("zeros", 1))
    where = _where(ctx)

    def run(inputs, outputs):
        x = np.asarray(inputs[0])
        xi = _check_strings(where, x) if strings else x.astype(np.int64)
        eq = xi[..., None] == cats
        if not zeros and not eq.any(axis=-1).all():
            bad = xi[~eq.any(axis=-1)].ravel()[0]
            raise ExecutionError(f"{where}: value {bad!r} is not one of the categories and zeros=0")
        outputs[0][...] = eq.astype(F32)

    return run


def _check_fv(ctx, target):
    dims = list(ctx.attrs.get("inputdimensions", []))
    if len(dims) != len(ctx.node.inputs):
        return f"FeatureVectorizer: {len(dims)} inputdimensions for {len(ctx.node.inputs)} inputs"
    for s in ctx.in_shapes:
        if s is None or len(s) not in (1, 2):
            return "FeatureVectorizer: every input must be 1-D or 2-D with a known shape"
    if len({(s[0] if len(s) == 2 else 1) for s in ctx.in_shapes}) != 1:
        return "FeatureVectorizer: the inputs differ in batch size"
    return None


@register("FeatureVectorizer", domain=ML, since=1, until=5, dtypes=("float32", "float64", "int64", "int32"),
          targets=("cpu",), check=_check_fv,
          shape=lambda ctx: [((ctx.in_shapes[0][0] if len(ctx.in_shapes[0]) == 2 else 1),
                              int(sum(ctx.attrs.get("inputdimensions", []))))],
          note="concatenate inputs as float32 columns, each cut or zero-padded to its inputdimensions")
def _build_fv(ctx, target):
    dims = [int(d) for d in ctx.attrs["inputdimensions"]]

    def run(inputs, outputs):
        out = outputs[0]
        out[...] = 0
        col = 0
        for x, d in zip(inputs, dims):
            x = _as_f32(x)
            x = x.reshape(1, -1) if x.ndim == 1 else x
            k = min(d, x.shape[1])
            out[:, col:col + k] = x[:, :k]
            col += d

    return run
