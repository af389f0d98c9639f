"""Data movement on the CPU: Resize and Pad row by row, strided copies (Transpose, Slice,
Split, Expand, DepthToSpace, Concat, Tile) coalesced into contiguous rows or tiled transposes,
and Gather with its indices checked first. The same bits are copied (Resize: the same
per-element interpolation) as the generated kernels.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir as llvm_ir
from numba import njit

from .. import data, movement, resize
from ..common import cpu_kernel
from ..data import gather_row_checked
from ..movement import _PAD, _pad_map
from ..resize import _RESIZE, _lerp, _resize_item
from ..overrides import override
from .base import JIT
from .llvm import micro_kernel


@cpu_kernel
def _resize_cpu(x, out, oshape, istr, tab_off, idx0, idx1, w0, w1, nlin, ax_a, ax_b):
    """_resize_item for every element, a row (the last axis) at a time when the last axis is
    the inner interpolated one (or none is); other layouts per element. Rows are walked plane
    by plane (the dims before the last two by an odometer: no division per row). A row whose
    input offset and row-axis table entry equal the previous row's (upsampling along the row
    axis) is a copy of that row: the same operations on the same values, so the same bits.
    Nearest x2 along the last axis (columns 2q and 2q + 1 both read element q) writes each
    input element twice. The loops are inline: a helper call per row with a dozen array
    arguments cost ~90 ns (reference counts), more than a 32-element row."""
    nd = oshape.shape[0]
    last = nd - 1
    OW = oshape[last]
    if OW == 0 or out.shape[0] == 0 or not (nlin == 0 or ax_b == last):
        for i in range(out.shape[0]):
            out[i] = _resize_item(i, x, oshape, istr, tab_off, idx0, idx1, w0, w1, nlin, ax_a, ax_b)
        return
    lo = tab_off[last]
    sl = istr[last]
    c0 = idx0[lo:lo + OW] * sl
    c1 = idx1[lo:lo + OW] * sl
    a0 = w0[lo:lo + OW]
    a1 = w1[lo:lo + OW]
    rep2 = nlin == 0 and sl == 1 and OW % 2 == 0
    for j in range(OW):
        if c0[j] != c0[0] + j // 2:
            rep2 = False
    sa = istr[ax_a] if ax_a >= 0 else 0
    rd = last - 1                       # the row axis (-1 for 1-D)
    R = oshape[rd] if rd >= 0 else 1
    planes = out.shape[0] // (OW * R)
    cnt = np.zeros(nd, np.int64)        # the plane's output coordinates (dims before rd)
    o = 0
    for _ in range(planes):
        pbase = 0
        ppa = 0
        for d in range(rd):
            k = tab_off[d] + cnt[d]
            if d == ax_a:
                ppa = k
            else:
                pbase += idx0[k] * istr[d]
        prev = -1
        prev_pa = -1
        for oh in range(R):
            base = pbase
            pa = ppa
            if rd >= 0:
                k = tab_off[rd] + oh
                if rd == ax_a:
                    pa = k
                else:
                    base += idx0[k] * istr[rd]
            if base == prev and pa == prev_pa:
                for j in range(OW):
                    out[np.uint64(o + j)] = out[np.uint64(o - OW + j)]
            elif nlin == 0:
                if rep2:
                    s0 = base + c0[0]
                    for q in range(OW // 2):
                        v = x[np.uint64(s0 + q)]
                        out[np.uint64(o + 2 * q)] = v
                        out[np.uint64(o + 2 * q + 1)] = v
                else:
                    for j in range(OW):
                        out[np.uint64(o + j)] = x[np.uint64(base + c0[j])]
            elif nlin == 1:
                for j in range(OW):
                    out[np.uint64(o + j)] = _lerp(x[np.uint64(base + c0[j])], x[np.uint64(base + c1[j])], a0[j], a1[j])
            else:
                r0 = base + idx0[pa] * sa
                r1 = base + idx1[pa] * sa
                b0 = w0[pa]
                b1 = w1[pa]
                for j in range(OW):
                    top = _lerp(x[np.uint64(r0 + c0[j])], x[np.uint64(r0 + c1[j])], a0[j], a1[j])
                    bot = _lerp(x[np.uint64(r1 + c0[j])], x[np.uint64(r1 + c1[j])], a0[j], a1[j])
                    out[np.uint64(o + j)] = _lerp(top, bot, b0, b1)
            prev = base
            prev_pa = pa
            o += OW
        d = rd - 1
        while d >= 0:
            cnt[d] += 1
            if cnt[d] < oshape[d]:
                break
            cnt[d] = 0
            d -= 1


@cpu_kernel
def _pad_cpu(x, out, cval, oshape, ishape, istr, pbeg, mode):
    nd = oshape.shape[0]
    last = nd - 1
    OW = oshape[last]
    if OW == 0:
        return
    n = ishape[last]
    colmap = np.empty(OW, dtype=np.int64)
    for ow in range(OW):
        colmap[ow] = _pad_map(ow - pbeg[last], n, mode)
    cv = cval[0]
    rows = out.shape[0] // OW
    for r in range(rows):
        off = 0
        t = r
        const = False
        for d in range(nd - 2, -1, -1):
            n_o = oshape[d]
            o = t % n_o
            t = t // n_o
            j = _pad_map(o - pbeg[d], ishape[d], mode)
            if j < 0:
                const = True
                break
            off += j * istr[d]
        dst = out[r * OW:(r + 1) * OW]
        if const:
            dst[:] = cv
        else:
            for ow in range(OW):
                c = colmap[ow]
                dst[ow] = cv if c < 0 else x[off + c]


# --- strided copies: Transpose, Slice, Split, Expand, DepthToSpace (gather); Concat (scatter) --------
#: a transposition's tile: _MV_TP elements along the source's contiguous axis (read in a row) by
#: _MV_TL along the destination's (measured on the bench machine: 64 x 32 beat 8-32 x 8-16)
_MV_TP = 64
_MV_TL = 32


@njit(**JIT)
def _mv_coalesce(shape, strides):
    """The walk of a strided copy (``shape`` on the contiguous side, ``strides`` on the other)
    with size-1 dims dropped and each dim merged into the one outside it where the strided
    side is contiguous across both (stride[d-1] == stride[d] * shape[d]): (sizes, strides), at
    least one dim. Visits the same (contiguous index, strided offset) pairs in the same order."""
    nd = shape.shape[0]
    cn = np.empty(nd, np.int64)
    cs = np.empty(nd, np.int64)
    k = 0
    for d in range(nd):
        n = shape[d]
        if n == 1:
            continue
        s = strides[d]
        if k > 0 and cs[k - 1] == s * n:
            cn[k - 1] *= n
            cs[k - 1] = s
        else:
            cn[k] = n
            cs[k] = s
            k += 1
    if k == 0:
        cn[0] = 1
        cs[0] = 0
        k = 1
    return cn[:k], cs[:k]


def _emit_tr8(ir, x, xo, sL, out, oo, OSp):
    """CPU only: out[oo + ip*OSp + il] = x[xo + ip + il*sL] for ip, il < 8: eight rows of x
    (eight il) loaded as vectors of its element type (any width: the copies' arrays are bit
    views), transposed in registers, stored as eight rows of out (eight ip): data movement only."""
    vt = llvm_ir.VectorType(x.type.pointee, 8)
    rows = [ir.load_vec(x, ir.add(xo, ir.mul(sL, ir.c64(r))), vt) for r in range(8)]
    cols = ir.transpose8(rows)
    for j in range(8):
        ir.store_vec(cols[j], out, ir.add(oo, ir.mul(OSp, ir.c64(j))))


_tr8 = micro_kernel("_tr8", "x, xo, sL, out, oo, OSp", _emit_tr8)


@njit(**JIT)
def _mv_transpose(x, src, out, o, P, L, sL, OSp):
    """out[o + ip*OSp + il] = x[src + ip + il*sL] for ip < P, il < L, in tiles: each tile
    reads rows of _MV_TP contiguous elements of x and writes _MV_TL at a time, instead of
    reading one element per cache line along the strided axis; inside a tile, 8 x 8 blocks
    are transposed in registers (_tr8), the edges element by element."""
    P8 = P - P % 8
    L8 = L - L % 8
    for p0 in range(0, P, _MV_TP):
        p1 = min(P, p0 + _MV_TP)
        q1 = min(p1, P8)
        for l0 in range(0, L, _MV_TL):
            l1 = min(L, l0 + _MV_TL)
            m1 = min(l1, L8)
            for il in range(l0, m1, 8):
                for ip in range(p0, q1, 8):
                    _tr8(x, src + ip + il * sL, sL, out, o + ip * OSp + il, OSp)
            for il in range(l0, l1):
                sb = src + il * sL
                ob = o + il
                ip0 = q1 if il < m1 else p0      # the rows' tail; a row past L8 whole
                for ip in range(ip0, p1):
                    out[np.uint64(ob + ip * OSp)] = x[np.uint64(sb + ip)]


@njit(**JIT)
def _mv_rows(x, out, base, cn, cs, gather):
    """The coalesced walk row by row (the innermost dim), the strided offset carried by an
    odometer (no division per row): gather, out[i] = x[base + off(i)]; else scatter,
    out[base + off(i)] = x[i]. Contiguous rows are plain copy loops."""
    k = cn.shape[0]
    L = cn[k - 1]
    sL = cs[k - 1]
    rows = 1
    for d in range(k - 1):
        rows *= cn[d]
    cnt = np.zeros(k, np.int64)
    off = base
    for r in range(rows):
        o = r * L
        if sL == 1:
            if gather:
                for j in range(L):
                    out[np.uint64(o + j)] = x[np.uint64(off + j)]
            else:
                for j in range(L):
                    out[np.uint64(off + j)] = x[np.uint64(o + j)]
        elif gather:
            if sL == 0:
                v = x[np.uint64(off)]
                for j in range(L):
                    out[np.uint64(o + j)] = v
            else:
                for j in range(L):
                    out[np.uint64(o + j)] = x[np.uint64(off + j * sL)]
        else:
            for j in range(L):
                out[np.uint64(off + j * sL)] = x[np.uint64(o + j)]
        d = k - 2                       # the odometer (inline: a call per row costs more than a short row)
        while d >= 0:
            cnt[d] += 1
            off += cs[d]
            if cnt[d] < cn[d]:
                break
            off -= cs[d] * cn[d]
            cnt[d] = 0
            d -= 1


@cpu_kernel
def _gather_strided_cpu(x, out, base, shape, strides):
    """strided_gather_item for every element: out[i] = x[base + sum_d coord_d(i) * strides[d]].
    Pure data movement (bits, no arithmetic on values), so any order of the copies gives the
    same result (see _mv_gather)."""
    _mv_gather(x, out, base, shape, strides)


@cpu_kernel
def _tile_cpu(x, out, oshape, ishape, istrides):
    """tile_offset for every element: output dim d of size r * n (n = ishape[d]) is the pair of
    dims (r, n) with strides (0, istrides[d]), a strided gather (_mv_gather): each input row
    copied whole, repeated rows by the zero stride. The same bits as the generated kernel."""
    nd = oshape.shape[0]
    shape = np.empty(2 * nd, np.int64)
    strides = np.empty(2 * nd, np.int64)
    for d in range(nd):
        n = ishape[d]
        shape[2 * d] = oshape[d] // n if n else 0
        strides[2 * d] = 0
        shape[2 * d + 1] = n
        strides[2 * d + 1] = istrides[d]
    _mv_gather(x, out, 0, shape, strides)


@njit(**JIT)
def _mv_gather(x, out, base, shape, strides):
    """out[i] = x[base + sum_d coord_d(i) * strides[d]]. The walk is coalesced (_mv_coalesce);
    when the innermost remaining dim is not contiguous in x but another is (a transposition),
    it is copied in 2-D tiles (_mv_transpose) over the other dims; otherwise row by row
    (_mv_rows)."""
    if out.shape[0] == 0:
        return
    cn, cs = _mv_coalesce(shape, strides)
    k = cn.shape[0]
    p = -1
    if cs[k - 1] != 1:
        for d in range(k - 1):
            if cs[d] == 1:
                p = d
    if p < 0:
        _mv_rows(x, out, base, cn, cs, True)
        return
    ostr = np.empty(k, np.int64)   # out's (contiguous) strides of the coalesced dims
    acc = 1
    for d in range(k - 1, -1, -1):
        ostr[d] = acc
        acc *= cn[d]
    P, L = cn[p], cn[k - 1]
    cnt = np.zeros(k, np.int64)
    src = base
    o = 0
    for t in range(acc // (P * L)):
        _mv_transpose(x, src, out, o, P, L, cs[k - 1], ostr[p])
        d = k - 2                       # the odometer over the other dims
        while d >= 0:
            if d == p:
                d -= 1
                continue
            cnt[d] += 1
            src += cs[d]
            o += ostr[d]
            if cnt[d] < cn[d]:
                break
            src -= cs[d] * cn[d]
            o -= ostr[d] * cn[d]
            cnt[d] = 0
            d -= 1


@cpu_kernel
def _scatter_strided_cpu(x, out, base, shape, strides):
    """strided_scatter_item for every element: out[base + sum_d coord_d(i) * strides[d]] = x[i]
    (Concat's parts). Pure data movement; the coalesced walk (_mv_coalesce) turns a Concat
    along an axis into one contiguous copy per outer index (_mv_rows)."""
    if x.shape[0] == 0:
        return
    cn, cs = _mv_coalesce(shape, strides)
    _mv_rows(x, out, base, cn, cs, False)


@cpu_kernel
def _gather_cpu(data, idx, out, axis_dim, n_idx, inner, bad):
    # check every index first (sets the flag and writes nothing on a bad one), then copy rows
    # without per-row checks: a check inside the row loop cost ~30% here
    for j in range(idx.shape[0]):
        k = idx[j]
        if k < -axis_dim or k >= axis_dim:
            bad[0] = 1
            return
    if inner > 0:
        for t in range(out.shape[0] // inner):
            gather_row_checked(t, data, idx, out, axis_dim, n_idx, inner)


def register() -> None:
    override(_RESIZE, target="cpu", run=_resize_cpu)
    override(_PAD, target="cpu", run=_pad_cpu)
    override(data._GATHER_STRIDED, target="cpu", run=_gather_strided_cpu)
    override(data._SCATTER_STRIDED, target="cpu", run=_scatter_strided_cpu)
    override(data._GATHER, target="cpu", run=_gather_cpu)
    override(movement._TILE, target="cpu", run=_tile_cpu)
