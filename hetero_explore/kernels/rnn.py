"""Recurrent ops: RNN, GRU, LSTM (float32), opsets 7-22, written once for both targets.

Every attribute of schema versions 7, 14 and 22 is implemented: ``direction``
(forward / reverse / bidirectional), ``activations`` with ``activation_alpha``
and ``activation_beta``, ``clip``, GRU's ``linear_before_reset``, LSTM's
``input_forget`` and peepholes (``P``), ``sequence_lens``, ``initial_h`` /
``initial_c``, ``layout`` (14+); every output (Y, Y_h, Y_c) may be present or
absent. Version 22 only added bfloat16/float16 types; versions 1 and 3 (with
``output_sequence``) are not claimed.

How it runs
-----------
The time loop is sequential on the host: one launch per time step (two for
GRU), each over the ``D*B*H`` items (direction, batch row, hidden unit). Item
``(d, b, j)`` reads the whole previous hidden state of ``(d, b)`` from one half
of a double-buffered state array and writes unit ``j`` of the new state into
the other half, so a launch never reads what it writes. The cell state of
LSTM is read and written only by its own item (one buffer). GRU's default
``linear_before_reset=0`` needs ``r (.) H_{t-1}`` of every unit before any
candidate state: its first launch writes ``z``, ``r`` and ``r (.) H_{t-1}``,
the second the new state.

On the CPU with fast paths on, LSTM runs as one call of ``cpu_fast.rnn.lstm_cpu``
instead (the "lstm_step" prepare rule: the gate products of every gate row at
once over transposed weights, transposed once at build time when ``W``/``R``
are constants), with every element's sequence below unchanged
(``tests/test_fastpaths.py``).

Accumulation order (the same on every target; one thread per item on CUDA, a
loop over the items on the CPU): each gate's pre-activation is
``(dot(x_t, W_row) + dot(h_{t-1}, R_row)) + (Wb + Rb)``, each dot product
``acc = 0.0f; acc = fma(a[k], b[k], acc)`` for ``k`` ascending (:func:`.fmadd.fma`: the
exact product plus acc, rounded once; the kernel contract's explicit fma); absent
``B`` is zeros. Then, in float32 steps:

* RNN: ``H = f(clip(pre))``.
* GRU: ``z = f(clip(pre_z))``, ``r = f(clip(pre_r))``; candidate
  ``hh = g(clip((dot(x, Wh) + dot(r (.) H_{t-1}, Rh)) + (Wbh + Rbh)))`` or, with
  ``linear_before_reset``, ``g(clip((dot(x, Wh) + Wbh) + r * (dot(H_{t-1}, Rh) + Rbh)))``;
  ``H = (1 - z) * hh + z * H_{t-1}``.
* LSTM: ``i = f(clip(pre_i + Pi * C_{t-1}))``, ``f = f(clip(pre_f + Pf * C_{t-1}))``
  (``1 - i`` with ``input_forget``), ``c = g(clip(pre_c))``,
  ``C = f * C_{t-1} + i * c``, ``o = f(clip(pre_o + Po * C))``, ``H = o * h(C)``
  (the peephole products only when ``P`` is given).

Activations are :func:`_act` over :mod:`.pmath`'s portable functions
(Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh,
HardSigmoid, Elu, Softsign, Softplus); ``activation_alpha``/``beta`` are
consumed in order by the activations that take them, defaults as onnxruntime's
(LeakyRelu 0.01, ThresholdedRelu 1, Elu 1, HardSigmoid 0.2/0.5, Affine and
ScaledTanh 1/1... see :data:`_DEFAULTS`).

``sequence_lens`` (as onnxruntime): batch row ``b`` runs ``L = sequence_lens[b]``
steps; the reverse direction runs times ``L-1 .. 0``; ``Y`` is zero at times
``>= L`` and ``Y_h``/``Y_c`` hold the state after the row's last step. The
lengths are read back to the host (``B`` integers) and checked: a length
outside ``[0, T]`` raises ExecutionError naming the node, on every target.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..ir.errors import ExecutionError
from .common import dual, flat, kernel_pair, node_error
from .fmadd import fma
from .opdef import OpList
from .pmath import exp_f32, sigmoid_f32, softplus_f32, tanh_f32

OPS = OpList()

F = np.float32
F0 = F(0.0)
F1 = F(1.0)
_JIT = dict(cache=True, error_model="numpy")

# activation codes: name (lower case) -> (code, takes alpha, takes beta, default alpha, default beta)
_ACTS = {
    "relu": (0, False, False, 0.0, 0.0),
    "tanh": (1, False, False, 0.0, 0.0),
    "sigmoid": (2, False, False, 0.0, 0.0),
    "affine": (3, True, True, 1.0, 0.0),
    "leakyrelu": (4, True, False, 0.01, 0.0),
    "thresholdedrelu": (5, True, False, 1.0, 0.0),
    "scaledtanh": (6, True, True, 1.0, 1.0),
    "hardsigmoid": (7, True, True, 0.2, 0.5),
    "elu": (8, True, False, 1.0, 0.0),
    "softsign": (9, False, False, 0.0, 0.0),
    "softplus": (10, False, False, 0.0, 0.0),
}
_DEFAULTS = {k: (v[3], v[4]) for k, v in _ACTS.items() if v[1] or v[2]}


@njit(**_JIT)
def _act(code, x_, alpha_, beta_):
    """Activation ``code`` (see ``_ACTS``) of float32 ``x``."""
    x = np.float32(x_)
    alpha = np.float32(alpha_)
    beta = np.float32(beta_)
    if code == 1:
        return tanh_f32(x)
    if code == 2:
        return sigmoid_f32(x)
    if code == 0:
        return x if x > F0 else (F0 if x == x else x)
    if code == 3:
        return alpha * x + beta
    if code == 4:
        return x if x >= F0 else alpha * x
    if code == 5:
        return x if x > alpha else F0
    if code == 6:
        return alpha * tanh_f32(beta * x)
    if code == 7:
        y = alpha * x + beta
        if y != y:
            return y
        return F0 if y < F0 else (F1 if y > F1 else y)
    if code == 8:
        return x if x >= F0 else alpha * (exp_f32(x) - F1)
    if code == 9:
        return x / (F1 + abs(x))
    return softplus_f32(x)


@njit(**_JIT)
def _clip(x_, c_, has_clip):
    x = np.float32(x_)
    c = np.float32(c_)
    if has_clip == 0 or x != x:
        return x
    if x < -c:
        return -c
    if x > c:
        return c
    return x


@dual
def _pre(x, x0, w, w0, n_in, h, h0, r, r0, n_h, bias, wb, rb):
    """One gate's pre-activation: (dot(x, W row) + dot(h, R row)) + (Wb + Rb)."""
    ax = np.float32(0)
    for k in range(n_in):
        ax = fma(x[x0 + k], w[w0 + k], ax)
    ah = np.float32(0)
    for k in range(n_h):
        ah = fma(h[h0 + k], r[r0 + k], ah)
    # float32 sums in the simulator too (its fma returns a Python float)
    return (np.float32(ax) + np.float32(ah)) + (bias[wb] + bias[rb])


@dual
def _dotf(a, a0, b, b0, n):
    acc = np.float32(0)
    for k in range(n):
        acc = fma(a[a0 + k], b[b0 + k], acc)
    return np.float32(acc)


# Common parameters of the step kernels: s (step), rev0 (direction 0 runs reversed), lens (per
# batch row, int64), T, B, I, H, strides of X (time, batch) and Y (time, direction, batch),
# has_y, activations (codes, alphas, betas: 3 per direction), clip (value, flag).
_COMMON = "s, rev0, lens, nB, nI, nH, xst, xsb, yst, ysd, ysb, has_y, acts, alph, bet, clipv, has_clip"

_HEAD = """
j = i % nH
q = i // nH
b = q % nB
d = q // nB
rev = rev0 if d == 0 else 1
L = lens[b]
hb = q * nH
active = s < L
t = (L - 1 - s if rev == 1 else s) if active else s
yo = t * yst + d * ysd + b * ysb + j
x0 = t * xst + b * xsb
"""

_RNN_STEP = kernel_pair(
    "rnn_step", "x, w, r, bias, hp, hn, y, n, " + _COMMON,
    _HEAD + """
if active:
    pre = _pre(x, x0, w, (d * nH + j) * nI, nI, hp, hb, r, (d * nH + j) * nH, nH, bias,
               d * 2 * nH + j, d * 2 * nH + nH + j)
    hv = np.float32(_act(acts[d * 3], _clip(pre, clipv, has_clip), alph[d * 3], bet[d * 3]))
    hn[i] = hv
    if has_y == 1:
        y[yo] = hv
else:
    hn[i] = hp[i]
    if has_y == 1:
        y[yo] = np.float32(0)
""", count="n", module=__name__)

_GRU_ZR = kernel_pair(
    "gru_zr", "x, w, r, bias, hp, zb, rb, rh, n, " + _COMMON,
    _HEAD + """
if active:
    G = 3 * nH
    wz = (d * G + j)
    wr = (d * G + nH + j)
    bb = d * 2 * G
    pz = _pre(x, x0, w, wz * nI, nI, hp, hb, r, wz * nH, nH, bias, bb + j, bb + G + j)
    pr = _pre(x, x0, w, wr * nI, nI, hp, hb, r, wr * nH, nH, bias, bb + nH + j, bb + G + nH + j)
    zv = np.float32(_act(acts[d * 3], _clip(pz, clipv, has_clip), alph[d * 3], bet[d * 3]))
    rv = np.float32(_act(acts[d * 3], _clip(pr, clipv, has_clip), alph[d * 3], bet[d * 3]))
    zb[i] = zv
    rb[i] = rv
    rh[i] = rv * hp[i]
""", count="n", module=__name__)

_GRU_H = kernel_pair(
    "gru_h", "x, w, r, bias, hp, hn, y, zb, rb, rh, lbr, n, " + _COMMON,
    _HEAD + """
if active:
    G = 3 * nH
    wh = (d * G + 2 * nH + j)
    bb = d * 2 * G
    ax = _dotf(x, x0, w, wh * nI, nI)
    if lbr == 0:
        ah = _dotf(rh, hb, r, wh * nH, nH)
        pre = (ax + ah) + (bias[bb + 2 * nH + j] + bias[bb + G + 2 * nH + j])
    else:
        ah = _dotf(hp, hb, r, wh * nH, nH)
        pre = (ax + bias[bb + 2 * nH + j]) + rb[i] * (ah + bias[bb + G + 2 * nH + j])
    hh = np.float32(_act(acts[d * 3 + 1], _clip(pre, clipv, has_clip), alph[d * 3 + 1], bet[d * 3 + 1]))
    zv = zb[i]
    hv = (np.float32(1) - zv) * hh + zv * hp[i]
    hn[i] = hv
    if has_y == 1:
        y[yo] = hv
else:
    hn[i] = hp[i]
    if has_y == 1:
        y[yo] = np.float32(0)
""", count="n", module=__name__)

_LSTM_STEP = kernel_pair(
    "lstm_step", "x, w, r, bias, p, has_p, ifg, hp, hn, c, y, n, " + _COMMON,
    _HEAD + """
if active:
    G = 4 * nH
    bb = d * 2 * G
    wi = d * G + j
    wo = d * G + nH + j
    wf = d * G + 2 * nH + j
    wc = d * G + 3 * nH + j
    pi = _pre(x, x0, w, wi * nI, nI, hp, hb, r, wi * nH, nH, bias, bb + j, bb + G + j)
    po = _pre(x, x0, w, wo * nI, nI, hp, hb, r, wo * nH, nH, bias, bb + nH + j, bb + G + nH + j)
    pf = _pre(x, x0, w, wf * nI, nI, hp, hb, r, wf * nH, nH, bias, bb + 2 * nH + j, bb + G + 2 * nH + j)
    pc = _pre(x, x0, w, wc * nI, nI, hp, hb, r, wc * nH, nH, bias, bb + 3 * nH + j, bb + G + 3 * nH + j)
    cp = c[i]
    if has_p == 1:
        pi = pi + p[d * 3 * nH + j] * cp
        pf = pf + p[d * 3 * nH + 2 * nH + j] * cp
    a0 = acts[d * 3]
    iv = np.float32(_act(a0, _clip(pi, clipv, has_clip), alph[d * 3], bet[d * 3]))
    if ifg == 1:
        fv = np.float32(1) - iv
    else:
        fv = np.float32(_act(a0, _clip(pf, clipv, has_clip), alph[d * 3], bet[d * 3]))
    cv = np.float32(_act(acts[d * 3 + 1], _clip(pc, clipv, has_clip), alph[d * 3 + 1], bet[d * 3 + 1]))
    cn = fv * cp + iv * cv
    if has_p == 1:
        po = po + p[d * 3 * nH + nH + j] * cn
    ov = np.float32(_act(a0, _clip(po, clipv, has_clip), alph[d * 3], bet[d * 3]))
    hv = ov * np.float32(_act(acts[d * 3 + 2], cn, alph[d * 3 + 2], bet[d * 3 + 2]))
    c[i] = cn
    hn[i] = hv
    if has_y == 1:
        y[yo] = hv
else:
    hn[i] = hp[i]
    if has_y == 1:
        y[yo] = np.float32(0)
""", count="n", module=__name__)

# state (D, B, H) <-> a layout-strided (D, B, H) tensor: dst[d*dd + b*db + j] = src[d*sd + b*sb + j]
_REMAP = kernel_pair(
    "rnn_remap", "src, dst, n, nB, nH, sd, sb, dd, db",
    """
j = i % nH
q = i // nH
b = q % nB
d = q // nB
dst[d * dd + b * db + j] = src[d * sd + b * sb + j]
""", count="n", module=__name__)

_NGATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_DEFAULT_ACTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
_NACTS = {"RNN": 1, "GRU": 2, "LSTM": 3}


def _s(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def _attrs(ctx):
    """Validated attributes: (direction count, rev0, activations (codes, alphas, betas), clip,
    layout). Raises KernelError naming the node on bad ones."""
    op = ctx.node.op_type
    at = ctx.attrs
    direction = _s(at.get("direction", "forward"))
    if direction not in ("forward", "reverse", "bidirectional"):
        raise node_error(ctx, f"direction={direction!r}: expected forward, reverse or bidirectional")
    D = 2 if direction == "bidirectional" else 1
    rev0 = 1 if direction == "reverse" else 0
    names = [_s(a) for a in at.get("activations", [])] or _DEFAULT_ACTS[op] * D
    k = _NACTS[op]
    if len(names) == k and D == 2:
        names = names * 2   # onnxruntime accepts one set for both directions
    if len(names) != k * D:
        raise node_error(ctx, f"activations={names}: {op} with direction={direction} needs {k * D}")
    alphas = list(at.get("activation_alpha", []))
    betas = list(at.get("activation_beta", []))
    codes, al, be = np.zeros(6, np.int64), np.zeros(6, np.float32), np.zeros(6, np.float32)
    for n, name in enumerate(names):
        key = name.lower()
        if key not in _ACTS:
            raise node_error(ctx, f"activation {name!r} is not supported "
                                  f"(supported: {', '.join(sorted(_ACTS))}, case-insensitive)")
        code, ta, tb, da, db = _ACTS[key]
        a = alphas.pop(0) if ta and alphas else da
        b = betas.pop(0) if tb and betas else db
        d, g = divmod(n, k)
        codes[d * 3 + g], al[d * 3 + g], be[d * 3 + g] = code, a, b
    clip = at.get("clip", None)
    if clip is not None and not float(clip) >= 0:
        raise node_error(ctx, f"clip={clip}: must be >= 0")
    layout = int(at.get("layout", 0))
    if layout not in (0, 1):
        raise node_error(ctx, f"layout={layout}: expected 0 or 1")
    if op == "LSTM" and int(at.get("input_forget", 0)) not in (0, 1):
        raise node_error(ctx, "input_forget must be 0 or 1")
    if op == "GRU" and int(at.get("linear_before_reset", 0)) not in (0, 1):
        raise node_error(ctx, "linear_before_reset must be 0 or 1")
    return D, rev0, (codes, al, be), clip, layout


def _dims(ctx):
    """(T, B, I, H, D) from the shapes, checked against each other."""
    op = ctx.node.op_type
    G = _NGATES[op]
    xs, ws, rs = ctx.in_shapes[0], ctx.in_shapes[1], ctx.in_shapes[2]
    if xs is None or ws is None or rs is None or len(xs) != 3 or len(ws) != 3 or len(rs) != 3:
        raise node_error(ctx, f"X, W, R must be 3-D with known shapes (got {xs}, {ws}, {rs})")
    D, _, _, _, layout = _attrs(ctx)
    T, B, I = (xs[1], xs[0], xs[2]) if layout == 1 else tuple(xs)
    H = int(ctx.attrs.get("hidden_size", rs[-1]))
    want = {1: (D, G * H, I), 2: (D, G * H, H)}
    for k, s in ((1, ws), (2, rs)):
        if tuple(s) != want[k]:
            raise node_error(ctx, f"input {k} has shape {tuple(s)}; expected {want[k]} "
                                  f"(directions, {G}*hidden_size, ...)")
    opt = {3: ("B", (D, 2 * G * H)), 4: ("sequence_lens", (B,)),
           5: ("initial_h", (B, D, H) if layout == 1 else (D, B, H))}
    if op == "LSTM":
        opt[6] = ("initial_c", opt[5][1])
        opt[7] = ("P", (D, 3 * H))
    for k, (name, shp) in opt.items():
        if ctx.has_input(k) and k < len(ctx.in_shapes) and ctx.in_shapes[k] is not None \
                and tuple(ctx.in_shapes[k]) != shp:
            raise node_error(ctx, f"{name} has shape {tuple(ctx.in_shapes[k])}; expected {shp}")
    return T, B, I, H, D


def _check(ctx, target):
    from ..ir.errors import KernelError
    try:
        _attrs(ctx)
        _dims(ctx)
    except KernelError as e:
        return str(e)
    for k in (1, 2, 3, 5, 6, 7):
        if ctx.has_input(k) and k < len(ctx.in_dtypes) and ctx.in_dtypes[k] is not None \
                and np.dtype(ctx.in_dtypes[k]).name != "float32":
            return f"{ctx.node.op_type}: input {k} must be float32 like X"
    if ctx.has_input(4) and len(ctx.in_dtypes) > 4 and ctx.in_dtypes[4] is not None \
            and np.dtype(ctx.in_dtypes[4]).name != "int32":
        return f"{ctx.node.op_type}: sequence_lens must be int32"
    return None


def _build(ctx, target):
    op = ctx.node.op_type
    D, rev0, (codes, al, be), clip, layout = _attrs(ctx)
    T, B, I, H, D = _dims(ctx)
    G = _NGATES[op]
    n = D * B * H
    if layout == 0:
        xst, xsb = B * I, I
        yst, ysd, ysb = D * B * H, B * H, H
        ssd, ssb = B * H, H            # initial_h / Y_h strides (direction, batch)
    else:
        xst, xsb = I, T * I
        yst, ysd, ysb = D * H, H, T * D * H
        ssd, ssb = H, D * H
    has_clip = 0 if clip is None else 1
    clipv = F(0.0 if clip is None else clip)
    lbr = int(ctx.attrs.get("linear_before_reset", 0))
    ifg = int(ctx.attrs.get("input_forget", 0))
    acts, alph, bet = target.to_device(codes, al, be)
    zeros_b = target.to_device(np.zeros(D * 2 * G * H, np.float32))
    dummy = target.to_device(np.zeros(1, np.float32))
    full_lens = target.to_device(np.full(B, T, np.int64))
    outs_present = [bool(o) for o in ctx.node.outputs] + [False] * 3

    def checked_lens(inputs):
        host = np.asarray(target.to_host(inputs[4])).reshape(-1).astype(np.int64)
        bad = np.nonzero((host < 0) | (host > T))[0]
        if bad.size:
            raise ExecutionError(
                f"node {ctx.node.name!r} ({op}): sequence_lens[{int(bad[0])}] = {int(host[bad[0]])} "
                f"is out of range for a sequence of length {T} (valid: 0..{T})")
        return host

    if op == "LSTM":
        # the CPU fast path (cpu_fast.rnn: the gate products vectorised over transposed weights,
        # the whole node one call), bitwise this generic run
        fast = target.prepared(_LSTM_STEP, dict(
            D=D, B=B, I=I, H=H, T=T, rev0=rev0, xst=xst, xsb=xsb, yst=yst, ysd=ysd, ysb=ysb, ssd=ssd, ssb=ssb,
            acts=codes, alph=al, bet=be, clipv=clipv, has_clip=has_clip, ifg=ifg, outputs=outs_present[:3],
            w=ctx.const(1), r=ctx.const(2), lens=checked_lens, has_lens=ctx.has_input(4)))
        if fast is not None:
            return fast

    def run(inputs, outputs):
        inputs = list(inputs) + [None] * (8 - len(inputs))
        outputs = list(outputs) + [None] * (3 - len(outputs))
        x, w, r = flat(inputs[0]), flat(inputs[1]), flat(inputs[2])
        bias = zeros_b if inputs[3] is None else flat(inputs[3])
        if inputs[4] is None:
            lens = full_lens
        else:
            lens = target.to_device(checked_lens(inputs))
        y = outputs[0] if outs_present[0] and outputs[0] is not None else None
        yf = dummy if y is None else flat(y)
        has_y = 0 if y is None else 1
        state = target.to_device(np.zeros(2 * n, np.float32))
        halves = (state[:n], state[n:])
        if inputs[5] is not None:
            target.launch(_REMAP, n, flat(inputs[5]), halves[0], n, B, H, ssd, ssb, B * H, H)
        if op == "LSTM":
            cst = target.to_device(np.zeros(n, np.float32))
            if inputs[6] is not None:
                target.launch(_REMAP, n, flat(inputs[6]), cst, n, B, H, ssd, ssb, B * H, H)
            p = dummy if inputs[7] is None else flat(inputs[7])
            has_p = 0 if inputs[7] is None else 1
        elif op == "GRU":
            zb, rb, rh = (target.to_device(np.zeros(n, np.float32)) for _ in range(3))
        common = (rev0, lens, B, I, H, xst, xsb, yst, ysd, ysb, has_y, acts, alph, bet, clipv, has_clip)
        for s in range(T):
            hp, hn = halves[s % 2], halves[(s + 1) % 2]
            if op == "RNN":
                target.launch(_RNN_STEP, n, x, w, r, bias, hp, hn, yf, n, s, *common)
            elif op == "GRU":
                target.launch(_GRU_ZR, n, x, w, r, bias, hp, zb, rb, rh, n, s, *common)
                target.launch(_GRU_H, n, x, w, r, bias, hp, hn, yf, zb, rb, rh, lbr, n, s, *common)
            else:
                target.launch(_LSTM_STEP, n, x, w, r, bias, p, has_p, ifg, hp, hn, cst, yf, n, s, *common)
        final = halves[T % 2]
        if outs_present[1] and outputs[1] is not None:
            target.launch(_REMAP, n, final, flat(outputs[1]), n, B, H, B * H, H, ssd, ssb)
        if op == "LSTM" and outs_present[2] and outputs[2] is not None:
            target.launch(_REMAP, n, cst, flat(outputs[2]), n, B, H, B * H, H, ssd, ssb)

    return run


_NOTE = ("float32; sequential time loop (one launch per step), gates as fixed-order dot products "
         "(x.W then h.R, k ascending, acc = fma(a, b, acc)), portable activations; all attributes; "
         "sequence_lens checked (0..T)")
for _op in ("RNN", "GRU", "LSTM"):
    OPS.add(_op, _build, since=7, until=22, check=_check, note=_NOTE,
            kernels=(_RNN_STEP, _GRU_ZR, _GRU_H, _LSTM_STEP, _REMAP))
