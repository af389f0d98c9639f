"""Units, formatted in one place: bytes, seconds, counts — for the CLI, the app and the report.

``human_bytes(4096)`` is ``4.0 KiB``; ``human_seconds(6.1522e-05)`` is ``61.5 µs``;
:func:`format_frame` applies them to a table's byte and second columns (by column name), so
no table shows ``6.1522e-05`` or ``16.0`` / ``NaN`` for a byte count. (A dependency such as
``humanize`` would do the same in more words; these two functions are all the tool needs.)
"""

from __future__ import annotations

import math

#: column names (or suffixes) holding byte counts / durations in seconds
BYTE_COLUMNS = ("bytes", "bytes_in", "bytes_out", "nbytes", "peak_bytes", "transfer_bytes")
SECOND_COLUMNS = ("seconds", "compile_seconds", "plan_seconds")


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def human_bytes(n) -> str:
    """``4096`` → ``4.0 KiB``; None / NaN → ``? B`` (unknown: a dynamic shape)."""
    if _missing(n):
        return "? B"
    n = int(n)
    if abs(n) < 1024:
        return f"{n} B"
    x = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        x /= 1024.0
        if abs(x) < 1024 or unit == "TiB":
            return f"{x:.1f} {unit}"
    return f"{n} B"  # pragma: no cover


def human_seconds(s) -> str:
    """``6.1522e-05`` → ``61.5 µs``; ``1.5`` → ``1.50 s``; None / NaN → ``?``."""
    if _missing(s):
        return "?"
    s = float(s)
    a = abs(s)
    if a >= 60:
        m, sec = divmod(s, 60)
        return f"{int(m)} min {sec:.0f} s"
    if a >= 1:
        return f"{s:.2f} s"
    if a >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    if a >= 1e-6 or a == 0:
        return f"{s * 1e6:.1f} µs"
    return f"{s * 1e9:.0f} ns"


def is_byte_column(col: str) -> bool:
    """Whether a column named ``col`` holds byte counts."""
    return col in BYTE_COLUMNS or col.endswith("_bytes") or col.startswith("bytes")


def is_second_column(col: str) -> bool:
    """Whether a column named ``col`` holds durations in seconds."""
    return col in SECOND_COLUMNS or col.endswith("_seconds") or col.endswith("_s")


def format_frame(df):
    """A copy of ``df`` for display: byte columns as ``human_bytes``, second columns as
    ``human_seconds`` (by column name); other columns unchanged."""
    cols = [c for c in df.columns if isinstance(c, str) and (is_byte_column(c) or is_second_column(c))]
    if not cols:
        return df
    df = df.copy()
    for c in cols:
        fmt = human_bytes if is_byte_column(c) else human_seconds
        df[c] = [v if isinstance(v, str) else fmt(v) for v in df[c]]
    return df
