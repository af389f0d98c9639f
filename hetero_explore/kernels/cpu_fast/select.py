"""Selection on the CPU: TopK in one pass over each row.

The generated TopK kernel finds the k results one at a time, each by a pass over the whole
row (k passes). Here each row is read once into a buffer of the k best (value, index)
pairs kept in TopK's order (``select._after``: NaN ranks highest, ties go to the lower
index), each new pair inserted where it belongs when it beats the worst one kept. The order
is total, so the k pairs and their order are the generated kernel's; values are copied, not
computed, so the bits are too.
"""

from __future__ import annotations

import numpy as np

from ..common import cpu_kernel
from ..overrides import override
from ..select import _TOPK, _after


@cpu_kernel
def _topk_cpu(x, vals, idxs, n, k, inner, largest, rows):
    """The generated kernel's results for every row r < rows (see the module docs)."""
    bv = np.empty(k, dtype=x.dtype)
    bi = np.empty(k, dtype=np.int64)
    for r in range(rows):
        o = r // inner
        q = r - o * inner
        base = o * n * inner + q
        obase = o * k * inner + q
        c = 0
        for t in range(n):
            v = x[base + t * inner]
            if c == k and not _after(bv[k - 1], bi[k - 1], v, t, largest):
                continue
            j = c if c < k else k - 1     # the slot it may take: the next free one, or the worst
            while j > 0 and _after(bv[j - 1], bi[j - 1], v, t, largest):
                bv[j] = bv[j - 1]
                bi[j] = bi[j - 1]
                j -= 1
            bv[j] = v
            bi[j] = t
            if c < k:
                c += 1
        for j in range(k):
            vals[obase + j * inner] = bv[j]
            idxs[obase + j * inner] = bi[j]


def register() -> None:
    override(_TOPK, target="cpu", run=_topk_cpu)
