"""The memory budget: the most bytes that generated data (random inputs) and run-time
allocations may take, one number for the whole process."""

from __future__ import annotations

import math
import os

from .errors import ArgumentValueError

#: environment variable that sets :func:`memory_budget` (bytes; suffixes K, M, G, T allowed)
BUDGET_ENV = "HETERO_EXPLORE_MEMORY_BUDGET"


def _parse_bytes(text: str) -> int:
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(t[-1:], 1)
    num = t[:-1] if mult != 1 else t
    try:
        v = float(num)
    except ValueError:
        raise ArgumentValueError(f"{BUDGET_ENV}={text!r} is not a size; write bytes, e.g. 4G or 500M") from None
    if not math.isfinite(v) or v <= 0:
        raise ArgumentValueError(f"{BUDGET_ENV}={text!r} must be a positive size, e.g. 4G")
    return int(v * mult)


def memory_budget() -> int:
    """Bytes that generated data (random inputs) may take at most: ``$HETERO_EXPLORE_MEMORY_BUDGET``
    when set, else half the machine's physical memory (4 GiB when that cannot be read)."""
    env = os.environ.get(BUDGET_ENV)
    if env:
        return _parse_bytes(env)
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 4 << 30
