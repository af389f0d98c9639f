"""LSTM on the CPU: the gate matrix-vector products vectorised across the gate rows.

The generated kernel (``rnn._LSTM_STEP``) runs one item per (direction, batch row, hidden
unit); each item computes its four gates' dot products ``acc = fma(x[k], W[row, k], acc)``
for ``k`` ascending, one serial chain at a time (a latency-bound chain of 2 x 128 fmas per
gate for a 128-unit cell: ~170 us per step). Here the weights are held transposed
(``W^T``: ``k`` major, the ``4H`` gate rows contiguous), so that for one ``k`` the update
``acc[g] = fma(x[k], W^T[k, g], acc[g])`` runs over every gate row ``g`` at once (a
vectorised loop of independent chains). Each row's accumulator still sees exactly the
generated kernel's sequence -- ``0.0f``, then one fma per ``k`` ascending, the input and
the recurrent products in two separate accumulators, then ``(ax + ah) + (Wb + Rb)`` -- and
the cell's float32 steps after the dot products are the generated kernel's own lines. So
the results are bit for bit the generated kernel's (``tests/test_fastpaths.py``).

The whole node is one call (the initial-state remaps, every time step, the final states):
with a constant ``W``/``R`` (an initializer, as a torch export's LSTM cell inside a Loop body
has once its Slice/Concat of the weights are folded) the transposed copies are made once at
build time; otherwise the call transposes them into scratch at every run. Without a
``sequence_lens`` input the run is replayable (its only effect is the one call).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..common import flat, replayable
from ..fmadd import fma
from ..overrides import override
from ..pmath import sigmoid_f32, tanh_f32
from ..rnn import _LSTM_STEP, _act, _clip
from .base import JIT
from .llvm import V8, micro_kernel


@njit(**JIT)
def _transpose_gates(w, nD, G, K):
    """(D, G, K) row-major weights -> (D, K, G) (each k's G gate rows contiguous)."""
    out = np.empty(nD * G * K, dtype=np.float32)
    for d in range(nD):
        for g in range(G):
            src = w[(d * G + g) * K:(d * G + g + 1) * K]
            for k in range(K):
                out[(d * K + k) * G + g] = src[k]
    return out


#: gate rows per register block of the micro-kernel: 8 vectors of 8 (8 independent fma chains
#: hide the fma latency)
_GR = 8


def _emit_gemv(ir, v, v0, wt, w0, K, G, out, o0, R):
    """out[o0 + g] = the fma chain of gate row g over k (0.0f, then fma(v[v0 + k],
    wt[w0 + k*G + g], acc) for k ascending), for the 8R rows of one block at w0 (R accumulator
    vectors held in registers for the whole k loop)."""
    accs = ir.accumulators(V8, R)
    with ir.for_range(K) as k:
        a = ir.splat(ir.load(v, ir.add(v0, k)), 8)
        base = ir.add(w0, ir.mul(k, G))
        for r in range(R):
            ir.mac(accs[r], a, ir.load_vec(wt, ir.add(base, ir.c64(8 * r))))
    for r in range(R):
        ir.store_vec(ir.b.load(accs[r]), out, ir.add(o0, ir.c64(8 * r)))


_GEMV_PARAMS = "v, v0, wt, w0, K, G, out, o0"
_mk_gemv = micro_kernel(f"_mk_lstm_gemv_r{_GR}", _GEMV_PARAMS, _emit_gemv, R=_GR)
_mk_gemv1 = micro_kernel("_mk_lstm_gemv_r1", _GEMV_PARAMS, _emit_gemv, R=1)


@njit(**JIT)
def _gate_dots(vec, v0, wt, w0, K, G, acc):
    """acc[g] = 0.0f, then acc[g] = fma(vec[v0 + k], wt[w0 + k*G + g], acc[g]) for k ascending:
    the generated kernel's dot product of every gate row g at once (blocks of 8 * _GR rows and of
    8 rows in registers, the last < 8 rows one scalar chain each)."""
    g = 0
    while g + 8 * _GR <= G:
        _mk_gemv(vec, v0, wt, w0 + g, K, G, acc, g)
        g += 8 * _GR
    while g + 8 <= G:
        _mk_gemv1(vec, v0, wt, w0 + g, K, G, acc, g)
        g += 8
    for gg in range(g, G):
        a = np.float32(0)
        for k in range(K):
            a = fma(vec[v0 + k], wt[w0 + k * G + gg], a)
        acc[gg] = a


@njit(**JIT)
def _act_all(code, src, dst, n, alpha, beta, clipv, has_clip):
    """dst[j] = float32(_act(code, _clip(src[j], clipv, has_clip), alpha, beta)) for j < n: the
    generated kernel's per-item expression, one loop per activation (sigmoid and tanh
    unclipped, the common case, as loops that vectorise)."""
    if has_clip == 0 and code == 2:
        for j in range(n):
            dst[j] = sigmoid_f32(src[j])
    elif has_clip == 0 and code == 1:
        for j in range(n):
            dst[j] = tanh_f32(src[j])
    else:
        for j in range(n):
            dst[j] = np.float32(_act(code, _clip(src[j], clipv, has_clip), alpha, beta))


@njit(**JIT)
def lstm_cpu(x, w, w_is_t, r, r_is_t, bias, p, has_p, ifg, h0, has_h0, c0, has_c0, lens, y, has_y,
             yh, has_yh, yc, has_yc, T, nD, nB, nI, nH, rev0, xst, xsb, yst, ysd, ysb, ssd, ssb,
             acts, alph, bet, clipv, has_clip):
    """The whole LSTM node (see the module docs): ``w``/``r`` flat, transposed already when
    ``w_is_t``/``r_is_t`` (else transposed here), ``bias`` flat (zeros when absent); the
    state remaps, the ``T`` steps and the final states as ``rnn._build``'s run launches them."""
    G = 4 * nH
    n = nD * nB * nH
    wt = w if w_is_t == 1 else _transpose_gates(w, nD, G, nI)
    rt = r if r_is_t == 1 else _transpose_gates(r, nD, G, nH)
    state = np.zeros(2 * n, dtype=np.float32)
    cst = np.zeros(n, dtype=np.float32)
    ax = np.empty(G, dtype=np.float32)
    ah = np.empty(G, dtype=np.float32)
    gi = np.empty(nH, dtype=np.float32)
    gf = np.empty(nH, dtype=np.float32)
    go = np.empty(nH, dtype=np.float32)
    gc = np.empty(nH, dtype=np.float32)
    # activations into arrays of their own (an in-place loop would not vectorise: its
    # source and destination alias)
    vi = np.empty(nH, dtype=np.float32)
    vf = np.empty(nH, dtype=np.float32)
    vc = np.empty(nH, dtype=np.float32)
    vo = np.empty(nH, dtype=np.float32)
    for q in range(nD * nB):   # _REMAP of initial_h / initial_c: (direction, batch) strides ssd, ssb
        d = q // nB
        b = q % nB
        for j in range(nH):
            if has_h0 == 1:
                state[q * nH + j] = h0[d * ssd + b * ssb + j]
            if has_c0 == 1:
                cst[q * nH + j] = c0[d * ssd + b * ssb + j]
    for s in range(T):
        hp = state[(s % 2) * n:(s % 2) * n + n]
        hn = state[((s + 1) % 2) * n:((s + 1) % 2) * n + n]
        for q in range(nD * nB):
            b = q % nB
            d = q // nB
            rev = rev0 if d == 0 else 1
            L = lens[b]
            hb = q * nH
            if not s < L:
                for j in range(nH):
                    hn[hb + j] = hp[hb + j]
                    if has_y == 1:
                        y[s * yst + d * ysd + b * ysb + j] = np.float32(0)
                continue
            t = L - 1 - s if rev == 1 else s
            _gate_dots(x, t * xst + b * xsb, wt, d * nI * G, nI, G, ax)
            _gate_dots(hp, hb, rt, d * nH * G, nH, G, ah)
            bb = d * 2 * G
            ca = cst[hb:hb + nH]
            # _pre per gate (i, o, f, c): (dot(x, W row) + dot(h, R row)) + (Wb + Rb), then the
            # generated kernel's float32 steps (rnn._LSTM_STEP), each a pass over the hidden units
            for j in range(nH):
                cp = ca[j]
                pi = (ax[j] + ah[j]) + (bias[bb + j] + bias[bb + G + j])
                pf = (ax[2 * nH + j] + ah[2 * nH + j]) + (bias[bb + 2 * nH + j] + bias[bb + G + 2 * nH + j])
                if has_p == 1:
                    pi = pi + p[d * 3 * nH + j] * cp
                    pf = pf + p[d * 3 * nH + 2 * nH + j] * cp
                gi[j] = pi
                gf[j] = pf
                go[j] = (ax[nH + j] + ah[nH + j]) + (bias[bb + nH + j] + bias[bb + G + nH + j])
                gc[j] = (ax[3 * nH + j] + ah[3 * nH + j]) + (bias[bb + 3 * nH + j] + bias[bb + G + 3 * nH + j])
            a0 = acts[d * 3]
            _act_all(a0, gi, vi, nH, alph[d * 3], bet[d * 3], clipv, has_clip)          # i
            if ifg == 1:
                for j in range(nH):
                    vf[j] = np.float32(1) - vi[j]                                          # f = 1 - i
            else:
                _act_all(a0, gf, vf, nH, alph[d * 3], bet[d * 3], clipv, has_clip)      # f
            _act_all(acts[d * 3 + 1], gc, vc, nH, alph[d * 3 + 1], bet[d * 3 + 1], clipv, has_clip)   # c
            for j in range(nH):
                cn = vf[j] * ca[j] + vi[j] * vc[j]                                         # C
                ca[j] = cn
                if has_p == 1:
                    go[j] = go[j] + p[d * 3 * nH + nH + j] * cn
            _act_all(a0, go, vo, nH, alph[d * 3], bet[d * 3], clipv, has_clip)          # o
            _act_all(acts[d * 3 + 2], ca, vc, nH, alph[d * 3 + 2], bet[d * 3 + 2], clipv, 0)   # h(C), unclipped
            for j in range(nH):
                hv = vo[j] * vc[j]
                hn[hb + j] = hv
                if has_y == 1:
                    y[t * yst + d * ysd + b * ysb + j] = hv
    final = state[(T % 2) * n:(T % 2) * n + n]
    for q in range(nD * nB):
        d = q // nB
        b = q % nB
        for j in range(nH):
            if has_yh == 1:
                yh[d * ssd + b * ssb + j] = final[q * nH + j]
            if has_yc == 1:
                yc[d * ssd + b * ssb + j] = cst[q * nH + j]


def lstm_prepare(target, spec):
    """The "lstm_step" prepare rule: the run function of a whole LSTM node (:func:`lstm_cpu`),
    from ``spec`` (``rnn._build``'s dims, strides, activations, and the constant ``W``/``R``
    or None). A constant weight is transposed once here (a copy: the same values)."""
    D, I, H, G = spec["D"], spec["I"], spec["H"], 4 * spec["H"]
    wc, rc = spec["w"], spec["r"]
    wt = None if wc is None else _transpose_gates(np.ascontiguousarray(wc, np.float32).reshape(-1), D, G, I)
    rt = None if rc is None else _transpose_gates(np.ascontiguousarray(rc, np.float32).reshape(-1), D, G, H)
    dummy = np.zeros(1, dtype=np.float32)
    zeros_b = np.zeros(D * 2 * G, dtype=np.float32)
    full_lens = np.full(spec["B"], spec["T"], np.int64)
    present = spec["outputs"]
    dims = (spec["T"], D, spec["B"], I, H, spec["rev0"], spec["xst"], spec["xsb"], spec["yst"], spec["ysd"],
            spec["ysb"], spec["ssd"], spec["ssb"], spec["acts"], spec["alph"], spec["bet"], spec["clipv"],
            spec["has_clip"])
    ifg = spec["ifg"]
    lens_of = spec["lens"]   # inputs -> the checked int64 lengths (reads sequence_lens on the host)

    def run(inputs, outputs):
        inputs = list(inputs) + [None] * (8 - len(inputs))
        outputs = list(outputs) + [None] * (3 - len(outputs))
        outs = [flat(o) if present[k] and o is not None else None for k, o in enumerate(outputs[:3])]
        w = wt if wt is not None else flat(inputs[1])
        r = rt if rt is not None else flat(inputs[2])
        target.call(lstm_cpu, flat(inputs[0]), w, 1 if wt is not None else 0, r, 1 if rt is not None else 0,
                    zeros_b if inputs[3] is None else flat(inputs[3]),
                    dummy if inputs[7] is None else flat(inputs[7]), 0 if inputs[7] is None else 1, ifg,
                    dummy if inputs[5] is None else flat(inputs[5]), 0 if inputs[5] is None else 1,
                    dummy if inputs[6] is None else flat(inputs[6]), 0 if inputs[6] is None else 1,
                    full_lens if inputs[4] is None else lens_of(inputs),
                    dummy if outs[0] is None else outs[0], 0 if outs[0] is None else 1,
                    dummy if outs[1] is None else outs[1], 0 if outs[1] is None else 1,
                    dummy if outs[2] is None else outs[2], 0 if outs[2] is None else 1, *dims)

    # sequence_lens is read (and checked) on the host at every run: not replayable then
    return run if spec["has_lens"] else replayable(run)


def register() -> None:
    override(_LSTM_STEP, target="cpu", prepare=lstm_prepare)
