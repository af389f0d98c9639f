"""Tables for the terminal: fitted to its width by rich, long cells wrapped (never cut).

Every cell is made terminal-safe first (:func:`hetero_explore.cli.main.terminal_text`: a
model string cannot drive the terminal or break a line) and handed to rich as a
:class:`rich.text.Text`, so a ``[bold]`` in a node name is text, never markup. The table is
rendered to plain text (no colour codes) and printed by the caller.
"""

from __future__ import annotations

import io
import os
import sys
import textwrap

#: width used when neither stdout nor stderr is a terminal and $COLUMNS is unset (logs, CI)
DEFAULT_WIDTH = 120
#: narrowest table drawn (a narrower terminal gets this and wraps)
MIN_WIDTH = 40


def terminal_width(stream=None) -> int:
    """Columns to fit: ``$COLUMNS`` when set, else the size of the terminal that ``stream``
    (default stdout) or stderr is (so ``plan … | head`` in a terminal still fits it), else
    :data:`DEFAULT_WIDTH`."""
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return max(MIN_WIDTH, int(env))
    for s in (stream or sys.stdout, sys.stderr):
        try:
            if s is not None and s.isatty():
                return max(MIN_WIDTH, os.get_terminal_size(s.fileno()).columns)
        except (AttributeError, OSError, ValueError):
            continue
    return DEFAULT_WIDTH


def _ascii_only(stream) -> bool:
    enc = (getattr(stream or sys.stdout, "encoding", None) or "").lower().replace("-", "")
    return enc not in ("utf8", "utf16", "utf32")


#: columns never wrapped (numbers, short codes): the long text columns take the wrapping
_NUMERIC_KINDS = "iufb"
#: an identifier column (names, op types: no spaces) is given up to this many columns before
#: the prose columns (reasons, lists) wrap
IDENT_WIDTH = 28
#: a prose column (reasons) narrower than this is printed under the table instead
MIN_PROSE = 36
#: narrowest a name column is squeezed to (it folds) before the table may be cut
MIN_IDENT = 8
#: columns between two columns (rich's padding either side and the box's separator)
_GAP = 3


def render_table(df, *, width: int | None = None, stream=None, escape=None, numeric=()) -> str:
    """``df`` as a text table ``width`` columns wide (default :func:`terminal_width`): numeric
    columns (and those named in ``numeric``: numbers already formatted with units) kept on
    one line and right-aligned, identifier columns (no spaces: names, op types) whole up to
    :data:`IDENT_WIDTH`, prose columns (reasons) wrapped at word boundaries. A prose column
    that would be left fewer than :data:`MIN_PROSE` columns is taken out of the table and
    printed under it, one wrapped paragraph per row, keyed by the row's first cell, so a
    reason is never cut and never a ribbon one word wide."""
    width = width or terminal_width(stream)
    esc = escape or (lambda v: v)
    cols = list(df.columns)
    cells = {c: [_cell(v, esc) for v in df[c]] for c in cols}
    heads = {c: esc(str(c)) for c in cols}
    kinds = {c: getattr(df[c].dtype, "kind", "O") for c in cols}
    num = {c: (kinds[c] in _NUMERIC_KINDS and kinds[c] != "b") or c in set(numeric) for c in cols}
    prose = {c: not num[c] and any(" " in x for x in cells[c]) for c in cols}

    def want(c, whole: bool) -> int:  # what a column asks for before prose wraps
        word = (len(heads[c]) if whole else
                max(len(w) for w in heads[c].replace("_", "_ ").split()) if heads[c].strip() else 1)
        longest = max([len(x) for x in cells[c]] + [word])
        return longest if num[c] else min(longest, IDENT_WIDTH) if not prose[c] else min(word, IDENT_WIDTH)

    def fixed(kept, whole) -> int:
        return sum(want(c, whole) for c in kept if not prose[c]) + _GAP * max(0, len(kept) - 1)

    kept = list(cols)
    moved = []
    # headers whole when everything fits so, else broken after underscores
    whole = fixed(kept, True) + MIN_PROSE * sum(prose[c] for c in kept) <= width
    while True:  # move prose columns out (the last first) while the ones left would be ribbons
        pc = [c for c in kept if prose[c]]
        if not pc or len(kept) == 1 or (width - fixed(kept, whole)) // len(pc) >= MIN_PROSE:
            break
        kept.remove(pc[-1])
        moved.insert(0, pc[-1])

    def squeezed(kept) -> int:  # the width once name columns are squeezed to MIN_IDENT
        return sum(want(c, whole) if num[c] else min(want(c, whole), MIN_IDENT) for c in kept if not prose[c]) \
            + _GAP * max(0, len(kept) - 1)

    while len(kept) > 1 and squeezed(kept) > width:  # still too wide: the last columns go below too
        moved.insert(0, kept.pop())
    text = _draw(kept, cells, heads, num, {c: want(c, whole) for c in kept}, width, stream)
    if moved:
        key = kept[0]
        out = [text]
        for c in moved:
            out.append(f"\n{heads[c]} (by {heads[key]}):")
            for k, v in zip(cells[key], cells[c]):
                if v:
                    out.append(textwrap.fill(f"{k}: {v}", width=width, subsequent_indent="    ",
                                             break_long_words=True, break_on_hyphens=False))
        text = "\n".join(out)
    return text


def _draw(cols, cells, heads, num, mins, width, stream) -> str:
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.ASCII2 if _ascii_only(stream) else box.SIMPLE_HEAD, show_edge=False,
                  pad_edge=False, header_style="bold", highlight=False, expand=False)
    m = [mins[c] for c in cols]
    gaps = _GAP * max(0, len(m) - 1)
    while sum(m) + gaps > width:  # shrink the widest name column first (it folds), never a number
        names = [i for i, c in enumerate(cols) if not num[c] and m[i] > MIN_IDENT]
        if not names:
            break
        i = max(names, key=lambda k: m[k])
        m[i] -= 1
    for c, mn in zip(cols, m):
        table.add_column(Text(_wrap_head(heads[c], mn)), justify="right" if num[c] else "left", no_wrap=num[c],
                         overflow="fold", min_width=mn)
    for row in zip(*(cells[c] for c in cols)) if cols else ():
        table.add_row(*(Text(x) for x in row))
    out = io.StringIO()
    Console(file=out, width=width, color_system=None, force_terminal=False, highlight=False,
            markup=False, emoji=False, legacy_windows=False).print(table)
    return "\n".join(line.rstrip() for line in out.getvalue().rstrip("\n").split("\n"))


def _wrap_head(head: str, width: int) -> str:
    """A header on as many lines as it takes to fit ``width``, broken after underscores
    (``from_provider`` → ``from_`` / ``provider``)."""
    if len(head) <= width or "_" not in head:
        return head
    lines, cur = [], ""
    for part in head.replace("_", "_\0").split("\0"):
        if cur and len(cur) + len(part) > width:
            lines.append(cur)
            cur = part
        else:
            cur += part
    lines.append(cur)
    return "\n".join(lines)


def _cell(v, esc) -> str:
    if v is None:
        return ""
    try:
        import pandas as pd
        if not isinstance(v, (list, tuple, dict, set)) and pd.isna(v):
            return ""
    except (TypeError, ValueError):
        pass
    if isinstance(v, (list, tuple)):  # a shape stays one word (1,3,224,224); a list of names is prose
        plain = all(x is None or isinstance(x, (int, float)) for x in v)
        v = ("(" + ",".join("?" if x is None else str(x) for x in v) + ")") if plain else ", ".join(map(str, v))
    elif isinstance(v, dict):
        v = ", ".join(f"{k}: {x}" for k, x in v.items())
    return esc(str(v))
