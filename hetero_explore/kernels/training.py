"""Training-mode ops (float32), written once for both targets: the
``ai.onnx.preview.training`` optimisers (Adagrad, Adam, Momentum),
BatchNormalization with ``training_mode=1`` and Dropout with ``training_mode``
true.

Every step below is one float32 operation in the order written (no FMA); ``R``
(float or double) is read as ``float32(R)`` and ``T`` (int64) as
``float32(T)``; attributes are float32. Square roots are :func:`.pmath.sqrt_f32`.

* **Adagrad** (per element): ``r = R / (1 + T * decay_factor)``;
  ``g = norm_coefficient * x + G``; ``h = H + g * g``;
  ``x = x - (r * g) / (sqrt(h) + epsilon)``.
* **Adam**: ``g = norm_coefficient * x + G``; ``v = alpha * V + (1 - alpha) * g``;
  ``h = beta * H + (1 - beta) * (g * g)``; with ``T > 0``
  ``r = (R * sqrt(1 - beta^T)) / (1 - alpha^T)`` (``^T``: :func:`_ipow`, binary powering
  by repeated float32 squaring, the same multiplications on every target), else ``r = R``;
  ``x = (1 - norm_coefficient_post) * (x - r * (v / (sqrt(h) + epsilon)))``.
* **Momentum**: ``g = norm_coefficient * x + G``; ``b = beta`` if ``T > 0`` else 1;
  ``v = alpha * V + b * g``; standard: ``x = x - R * v``; nesterov:
  ``x = x - R * (g + alpha * v)``.

  The optimisers' inputs are ``R, T`` then the groups ``X1..Xn, G1..Gn`` (and
  ``H1..Hn`` / ``V1..Vn, H1..Hn``); the outputs are the new X's, then the new
  states, in the same order (onnx's schema). One launch per tensor of the group.
* **BatchNormalization, training_mode=1** (versions 14, 15; outputs ``Y``,
  ``running_mean``, ``running_var``): per channel ``c`` the batch mean and the
  population variance over the ``M = N * prod(spatial)`` elements, accumulated in
  **float64** in one fixed order (n ascending, then the spatial index ascending):
  ``mean = sum(x) / M``, ``var = sum((x - mean)^2) / M`` (two passes), rounded once to
  float32; then ``Y`` is the inference formula with those statistics
  (``(x - mean) * (scale / sqrt(var + eps)) + B``, norm.py's scalar functions) and
  ``running = input * momentum + batch * (1 - momentum)`` in float32. The statistics
  kernel runs one item per channel, ``Y`` one per element.
* **Dropout, training_mode true** (versions 12, 13, 22): element ``i`` is kept when
  ``u >= ratio`` with ``u`` the 24-bit uniform of :mod:`.random`'s counter-based
  generator (``key`` from the ``seed`` attribute, or :func:`.random.implicit_seed` of the
  node; counter ``i * 256``), so every target draws the same mask; a kept element is
  ``x / (1 - ratio)`` (float32), a dropped one ``0``; the mask output is the kept flags.
  ``ratio = 0`` or ``training_mode`` false: the identity, mask all true. ``ratio``
  outside ``[0, 1)`` in training mode is a :class:`~hetero_explore.ir.errors.KernelError` naming the node (the
  schema's range; ``1`` would divide by zero). ``ratio`` and ``training_mode`` may be
  computed at run time on host targets (read from the inputs); on a device target they
  must be constants. onnx's expected values come from numpy's generator, so the
  conformance cases compare shape, dtype and the invariants above
  (:func:`hetero_explore.analysis.conformance._check_dropout`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .common import flat, kernel_pair, node_error, prod
from .norm import _bn_apply, _bn_factor
from .opdef import OpList
from .pmath import sqrt_f32
from .random import _key, _u24

OPS = OpList()

TRAINING = "ai.onnx.preview.training"
_JIT = dict(cache=True, error_model="numpy")
F0 = np.float32(0.0)
F1 = np.float32(1.0)


@njit(**_JIT)
def _ipow(b, n):
    """``b ** n`` for an integer ``n >= 0`` by binary powering in float32 (fixed steps)."""
    b = np.float32(b)
    r = np.float32(1.0)
    k = np.int64(n)
    while k > 0:
        if k & 1:
            r = np.float32(r * b)
        b = np.float32(b * b)
        k = k >> 1
    return r


@njit(**_JIT)
def _adam_rate(r, t, alpha, beta):
    r = np.float32(r)
    alpha = np.float32(alpha)
    beta = np.float32(beta)
    if t <= 0:
        return r
    one = np.float32(1.0)
    num = np.float32(r * np.float32(sqrt_f32(np.float32(one - np.float32(_ipow(beta, t))))))
    return np.float32(num / np.float32(one - np.float32(_ipow(alpha, t))))


_ADAGRAD = kernel_pair(
    "train_adagrad", "x, g, h, R, T, norm, eps, decay, xo, ho",
    """
    r = np.float32(R[0]) / (F1 + np.float32(T[0]) * decay)
    gr = norm * np.float32(x[i]) + np.float32(g[i])
    hn = np.float32(h[i]) + gr * gr
    ho[i] = hn
    xo[i] = np.float32(x[i]) - (r * gr) / (np.float32(sqrt_f32(hn)) + eps)
    """, count="xo.shape[0]", module=__name__)

_ADAM = kernel_pair(
    "train_adam", "x, g, v, h, R, T, norm, post, alpha, beta, eps, xo, vo, ho",
    """
    r = np.float32(_adam_rate(R[0], T[0], alpha, beta))
    gr = norm * np.float32(x[i]) + np.float32(g[i])
    vn = alpha * np.float32(v[i]) + (F1 - alpha) * gr
    hn = beta * np.float32(h[i]) + (F1 - beta) * (gr * gr)
    vo[i] = vn
    ho[i] = hn
    xn = np.float32(x[i]) - r * (vn / (np.float32(sqrt_f32(hn)) + eps))
    xo[i] = (F1 - post) * xn
    """, count="xo.shape[0]", module=__name__)

_MOMENTUM = kernel_pair(
    "train_momentum", "x, g, v, R, T, norm, alpha, beta, nesterov, xo, vo",
    """
    b = beta if T[0] > 0 else F1
    r = np.float32(R[0])
    gr = norm * np.float32(x[i]) + np.float32(g[i])
    vn = alpha * np.float32(v[i]) + b * gr
    vo[i] = vn
    if nesterov == 1:
        xo[i] = np.float32(x[i]) - r * (gr + alpha * vn)
    else:
        xo[i] = np.float32(x[i]) - r * vn
    """, count="xo.shape[0]", module=__name__)

#: per optimiser: (state tensors per X, kernel)
_STATES = {"Adagrad": 1, "Adam": 2, "Momentum": 1}


def _f32(ctx, name, default):
    return np.float32(ctx.attrs.get(name, default))


def _check_opt(ctx, target):
    op = ctx.node.op_type
    k = 2 + _STATES[op]   # X, G and the states
    n_in = len(ctx.node.inputs)
    if n_in < 2 + k or (n_in - 2) % k:
        return f"{op}: needs R, T and groups of {k} tensors (X, G, states), got {n_in} inputs"
    n = (n_in - 2) // k
    if len(ctx.node.outputs) != n * (k - 1) or not all(ctx.node.outputs):
        return f"{op}: every output (the {n} new X's and their states) must be present"
    for i in (0, 1):
        s = ctx.in_shapes[i]
        if s is None or prod(s) != 1:
            return f"{op}: {'R' if i == 0 else 'T'} must be a scalar"
    dts = [None if d is None else np.dtype(d).name for d in ctx.in_dtypes]
    if dts[0] not in ("float32", "float64") or dts[1] != "int64":
        return f"{op}: R must be float or double and T int64, got {dts[0]}, {dts[1]}"
    for j in range(n):
        group = [2 + j + q * n for q in range(k)]
        if any(dts[i] != "float32" for i in group):
            return f"{op}: tensor group {j} must be float32 (double is not supported)"
        shapes = {tuple(ctx.in_shapes[i]) if ctx.in_shapes[i] is not None else None for i in group}
        if len(shapes) != 1 or None in shapes:
            return f"{op}: X, G and the states of group {j} must have one known shape"
    if op == "Momentum":
        mode = ctx.attrs.get("mode", None)
        mode = mode.decode() if isinstance(mode, bytes) else mode
        if mode not in ("standard", "nesterov"):
            return f"Momentum: mode must be 'standard' or 'nesterov', got {mode!r}"
        for a in ("alpha", "beta", "norm_coefficient"):
            if a not in ctx.attrs:
                return f"Momentum: the required attribute {a} is missing"
    return None


def _build_opt(ctx, target):
    op = ctx.node.op_type
    k = 2 + _STATES[op]
    n = (len(ctx.node.inputs) - 2) // k
    norm = _f32(ctx, "norm_coefficient", 0.0)
    if op == "Adagrad":
        eps, decay = _f32(ctx, "epsilon", 0.0), _f32(ctx, "decay_factor", 0.0)

        def step(ins, outs, j):
            target.launch(_ADAGRAD, outs[j].shape[0], ins[2 + j], ins[2 + n + j], ins[2 + 2 * n + j],
                          ins[0], ins[1], norm, eps, decay, outs[j], outs[n + j])
    elif op == "Adam":
        post = _f32(ctx, "norm_coefficient_post", 0.0)
        alpha, beta, eps = _f32(ctx, "alpha", 0.9), _f32(ctx, "beta", 0.999), _f32(ctx, "epsilon", 0.0)

        def step(ins, outs, j):
            target.launch(_ADAM, outs[j].shape[0], ins[2 + j], ins[2 + n + j], ins[2 + 2 * n + j],
                          ins[2 + 3 * n + j], ins[0], ins[1], norm, post, alpha, beta, eps,
                          outs[j], outs[n + j], outs[2 * n + j])
    else:
        mode = ctx.attrs.get("mode")
        nesterov = 1 if (mode.decode() if isinstance(mode, bytes) else mode) == "nesterov" else 0
        alpha, beta = _f32(ctx, "alpha", 0.0), _f32(ctx, "beta", 0.0)

        def step(ins, outs, j):
            target.launch(_MOMENTUM, outs[j].shape[0], ins[2 + j], ins[2 + n + j], ins[2 + 2 * n + j],
                          ins[0], ins[1], norm, alpha, beta, nesterov, outs[j], outs[n + j])

    def run(inputs, outputs):
        ins = [flat(a) for a in inputs]
        outs = [flat(a) for a in outputs]
        for j in range(n):
            if outs[j].shape[0]:
                step(ins, outs, j)

    return run


_OPT_NOTES = {
    "Adagrad": "r = R / (1 + T*decay); h += g*g; x -= r*g / (sqrt(h) + eps) (float32, g = norm*x + G)",
    "Adam": "bias-corrected Adam (beta^T by float32 binary powering), then (1 - norm_post) * x (float32)",
    "Momentum": "standard or Nesterov momentum (beta replaced by 1 at T = 0; float32)",
}
for _op in ("Adagrad", "Adam", "Momentum"):
    OPS.add(_op, _build_opt, domain=TRAINING, since=1, until=1, dtypes=("float32",), dtype_input=2,
            check=_check_opt, note=_OPT_NOTES[_op],
            kernels=({"Adagrad": _ADAGRAD, "Adam": _ADAM, "Momentum": _MOMENTUM}[_op],))


# --- BatchNormalization, training_mode=1 ---------------------------------------------------
_BN_STATS = kernel_pair(
    "train_bn_stats", "x, mean_in, var_in, momentum, N, C, S, smean, svar, rmean, rvar",
    """
    acc = np.float64(0.0)
    for b in range(N):
        base = (b * C + c) * S
        for s in range(S):
            acc = acc + np.float64(x[base + s])
    m64 = acc / np.float64(N * S)
    acc2 = np.float64(0.0)
    for b in range(N):
        base = (b * C + c) * S
        for s in range(S):
            d = np.float64(x[base + s]) - m64
            acc2 = acc2 + d * d
    m = np.float32(m64)
    v = np.float32(acc2 / np.float64(N * S))
    smean[c] = m
    svar[c] = v
    rest = F1 - momentum
    rmean[c] = np.float32(mean_in[c]) * momentum + m * rest
    rvar[c] = np.float32(var_in[c]) * momentum + v * rest
    """, count="smean.shape[0]", index="c", module=__name__)

_BN_Y = kernel_pair(
    "train_bn_y", "x, scale, bias, smean, svar, eps, C, S, out",
    """
    c = (i // S) % C
    f = _bn_factor(scale[c], svar[c], eps)
    out[i] = _bn_apply(x[i], smean[c], f, bias[c])
    """, count="out.shape[0]", module=__name__)


def _check_bn_train(ctx, target):
    if int(ctx.attrs.get("training_mode", 0)) != 1:
        return "BatchNormalization (training): training_mode is not 1 (the inference definition runs it)"
    if len(ctx.node.outputs) != 3 or not all(ctx.node.outputs):
        return "BatchNormalization (training): needs the Y, running_mean and running_var outputs"
    xs = ctx.in_shapes[0]
    if xs is None or len(xs) < 2:
        return "BatchNormalization (training): input must be (N, C, ...) with a known shape"
    C = xs[1]
    for i in range(1, 5):
        s = ctx.in_shapes[i] if i < len(ctx.in_shapes) else None
        if s is None or len(s) != 1 or s[0] != C:
            return "BatchNormalization (training): scale, B, input_mean and input_var must be 1-D of length C"
        if ctx.in_dtypes[i] is None or np.dtype(ctx.in_dtypes[i]) != np.float32:
            return "BatchNormalization (training): scale, B, mean and var must be float32"
    return None


def _temp(target, n):
    a = np.empty(max(n, 1), np.float32)
    return a if target.host else target.to_device(a)


def _build_bn_train(ctx, target):
    xs = tuple(ctx.in_shapes[0])
    N, C, S = int(xs[0]), int(xs[1]), prod(xs[2:])
    eps = np.float32(ctx.attrs.get("epsilon", 1e-5))
    momentum = np.float32(ctx.attrs.get("momentum", 0.9))

    def run(inputs, outputs):
        x = flat(inputs[0])
        sc, b, mean, var = (flat(inputs[i]) for i in range(1, 5))
        y, rm, rv = (flat(o) for o in outputs)
        if C == 0:
            return
        # per run (builds may run concurrently); an empty batch gives NaN statistics (0 / 0, as
        # onnx's reference) and an empty Y
        smean, svar = _temp(target, C), _temp(target, C)
        target.launch(_BN_STATS, C, x, mean, var, momentum, N, C, S, smean, svar, rm, rv)
        if y.shape[0]:
            target.launch(_BN_Y, y.shape[0], x, sc, b, smean, svar, eps, C, S, y)

    return run


OPS.add("BatchNormalization", _build_bn_train, since=14, until=21, dtypes=("float32",),
        check=_check_bn_train, kernels=(_BN_STATS, _BN_Y),
        note="training_mode=1: batch mean / population variance in float64 (n, then spatial, ascending), "
             "rounded; Y with them; running = input*momentum + batch*(1-momentum)")


# --- Dropout, training mode -----------------------------------------------------------------
_DROPOUT = kernel_pair(
    "train_dropout", "x, out, mask, want_mask, key, ratio, train",
    """
    keep = True
    if train == 1 and ratio > F0:
        keep = np.float32(_u24(key, np.uint64(i) * U_256)) >= ratio
    if keep:
        if train == 1 and ratio > F0:
            out[i] = np.float32(x[i]) / (F1 - ratio)
        else:
            out[i] = x[i]
    else:
        out[i] = F0
    if want_mask == 1:
        mask[i] = keep
    """, count="out.shape[0]", module=__name__, U_256=np.uint64(256))


def _dropout_scalar(ctx, i):
    """(known, value) of the optional scalar input ``i`` at build time."""
    if not ctx.has_input(i):
        return True, None
    c = ctx.const(i)
    return (False, None) if c is None else (True, np.asarray(c).reshape(-1)[0])


def _check_dropout_train(ctx, target):
    if len(ctx.node.outputs) > 1 and ctx.node.outputs[1]:
        dt = ctx.out_dtypes[1] if len(ctx.out_dtypes) > 1 else None
        if dt is None or np.dtype(dt) != np.bool_:
            return "Dropout: the mask output must be bool"
    for i, what in ((1, "ratio"), (2, "training_mode")):
        if ctx.has_input(i):
            s = ctx.in_shapes[i] if i < len(ctx.in_shapes) else None
            if s is not None and prod(s) != 1:
                return f"Dropout: {what} must be a scalar"
            known, _ = _dropout_scalar(ctx, i)
            if not known and not target.host:
                return (f"Dropout: {what} is computed at run time; on a device target it must be a "
                        "constant (host targets read it at run time)")
    return None


def _ratio(ctx, r):
    r = np.float32(0.5 if r is None else r)
    if not (F0 <= r < F1):
        raise node_error(ctx, f"training-mode ratio {float(r)!r} is outside [0, 1) (the schema's range; "
                              "1 would drop every element and divide by zero)")
    return r


def _build_dropout_train(ctx, target):
    key = _key(ctx)
    want_mask = 1 if len(ctx.node.outputs) > 1 and ctx.node.outputs[1] else 0
    r_known, r_val = _dropout_scalar(ctx, 1)
    t_known, t_val = _dropout_scalar(ctx, 2)
    dummy = None if want_mask else (np.zeros(1, np.bool_) if target.host
                                    else target.to_device(np.zeros(1, np.bool_)))

    def params(inputs):
        t = t_val if t_known else np.asarray(inputs[2]).reshape(-1)[0]
        train = 1 if t is not None and bool(t) else 0
        r = r_val if r_known else np.asarray(inputs[1]).reshape(-1)[0]
        return (_ratio(ctx, r) if train else F0), train

    fixed = params(None) if r_known and t_known else None

    def run(inputs, outputs):
        ratio, train = fixed if fixed is not None else params(inputs)
        out = flat(outputs[0])
        mask = flat(outputs[1]) if want_mask else dummy
        if out.shape[0]:
            target.launch(_DROPOUT, out.shape[0], flat(inputs[0]), out, mask, want_mask, key, ratio, train)

    return run


OPS.add("Dropout", _build_dropout_train, since=12, until=28, dtypes=("float32",), check=_check_dropout_train,
        kernels=(_DROPOUT,),
        note="training_mode: keep where u >= ratio (counter-based uniform of the seed, bitwise equal on every "
             "target), kept x / (1 - ratio), mask; ratio in [0, 1)")

