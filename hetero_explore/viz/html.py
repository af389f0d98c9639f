"""The one HTML escaper and the one table renderer of the views (the app's tabs, the report,
the sweep page, the timeline, the graph's HTML-like labels).

:func:`esc` escapes every model or provider string; :func:`table_html` turns a DataFrame into
an escaped table whose cells are formatted in one place (:func:`cell_text`: bytes and seconds
through :mod:`hetero_explore.ir.units`, missing values as ``—``, booleans as ``✓ True``).
The app filters, sorts and pages on the kernel side (:func:`table_page`, its HTML widgets run
no script); the report's inline script does the same in the page on the same markup
(``table.data``, ``data-sort`` keys).
"""

from __future__ import annotations

import html
import math
import numbers
import re

import numpy as np

from ..session.explorer import TableOptions
from ..ir.units import human_bytes, human_seconds, is_byte_column, is_second_column

#: control characters, DEL, C1 and lone surrogates: shown as U+FFFD in every view
CTRL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
#: rows shown per table by default (the data stays in the plan's DataFrames)
MAX_ROWS = 20000


def esc(s) -> str:
    """``s`` escaped for HTML text or a quoted attribute (control characters become U+FFFD;
    None becomes '')."""
    return html.escape(CTRL.sub("\ufffd", "" if s is None else str(s)), quote=True)


def is_na(v) -> bool:
    """None, NaN, pandas' NA and NaT (never raises on lists or arrays)."""
    if v is None:
        return True
    if isinstance(v, float):
        return math.isnan(v)
    if isinstance(v, (str, bytes, list, tuple, dict, set, frozenset)) or hasattr(v, "__len__"):
        return False
    import pandas as pd

    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def cell(col: str, v) -> tuple[str, str | None, tuple[str, ...]]:
    """``(text shown, sort key or None, css classes)`` of one cell of column ``col``."""
    if type(v) is str:  # most cells: the fast way out
        return v, None, ()
    if isinstance(v, np.generic):
        v = v.item()
    if is_na(v):
        return "—", None, ("na",)
    if isinstance(v, bool):
        return ("✓ True" if v else "✗ False"), ("1" if v else "0"), ()
    if isinstance(v, numbers.Real) and is_byte_column(col):
        return human_bytes(v), str(int(v)), ("num",)
    if isinstance(v, numbers.Real) and is_second_column(col):
        return human_seconds(v), repr(float(v)), ("num",)
    if isinstance(v, numbers.Integral):
        return str(int(v)), None, ("num",)
    if isinstance(v, numbers.Real):
        return f"{float(v):.6g}", repr(float(v)), ("num",)
    if isinstance(v, dict):
        return "; ".join(f"{k}: {x}" for k, x in v.items()), None, ()
    if isinstance(v, tuple) and col == "shape":
        return fmt_shape(v), None, ()
    if isinstance(v, (list, tuple, set, frozenset)):
        return ", ".join(str(x) for x in v), None, ()
    return str(v), None, ()


def cell_text(col: str, v) -> str:
    """The text a table shows for ``v`` in column ``col``."""
    return cell(col, v)[0]


def _match_text(col: str, v) -> str:
    """What filtering and text sorting compare: the shown text, '' for a missing value."""
    return "" if is_na(v) else cell(col, v)[0].lower()


def td(col: str, v, cell_class=None) -> str:
    """One escaped ``<td>`` (``cell_class(col, v)`` may add a css class, e.g. a provider's colour)."""
    text, sort, classes = cell(col, v)
    extra = cell_class(col, v) if cell_class else None
    if extra:
        classes = (extra, *classes)
    attrs = f' class="{" ".join(classes)}"' if classes else ""
    if sort is not None:
        attrs += f' data-sort="{esc(sort)}"'
    return f"<td{attrs}>{esc(text)}</td>"


def table_page(df, opts: TableOptions, page_rows: int = 300):
    """``(rows shown, rows matching, page, pages)`` of ``df`` under ``opts``: rows whose shown
    text contains ``opts.query`` (case-insensitive), sorted by ``opts.sort`` (numbers by value,
    other columns by their shown text, missing values first as ''), one page of ``page_rows``."""
    import pandas as pd
    if opts.query and len(df):
        q = opts.query.lower()
        hit = pd.Series(False, index=df.index)
        for c in df.columns:
            hit |= df[c].map(lambda v, c=str(c): q in _match_text(c, v))
        df = df[hit.to_numpy()]
    if opts.sort and opts.sort in df.columns and len(df):
        col = df[opts.sort]
        if pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col):
            key = None
        else:  # mixed objects (lists, None, numbers): by the text shown
            def key(c):
                return c.map(lambda v: _match_text(opts.sort, v))
        df = df.sort_values(opts.sort, ascending=not opts.descending, kind="stable", key=key,
                            na_position="last")
    m = len(df)
    pages = max(1, -(-m // page_rows))
    page = min(max(int(opts.page), 0), pages - 1)
    return df.iloc[page * page_rows:(page + 1) * page_rows], m, page, pages


def table_html(df, table_id: str | None = None, *, what: str = "rows", max_rows: int = MAX_ROWS,
               opts: TableOptions | None = None, cell_class=None, filter: bool = False,
               index: bool = False) -> str:
    """A DataFrame as an escaped HTML table (a plain loop: several times faster than
    ``DataFrame.to_html`` on the tables the app redraws live).

    Args:
        table_id: the table's ``id`` (the report's filter boxes and tests find it by it).
        what: what a row is, for the notes ("nodes", "partitions").
        max_rows: most rows shown; with ``opts``, the page size.
        opts: filter, sort and show one page here (the app); a note says which rows are shown.
        cell_class: ``(column, value) -> css class or None`` (a provider's colour).
        filter: a filter box over the table, for the report's script.
        index: show the index as the first column(s).
    """
    if df is None or len(df.columns) == 0:
        return "<p class='note hx-note'>(nothing)</p>"
    if index:
        df = df.reset_index()
    n = total = len(df)
    note = ""
    if opts is not None:
        df, n, page, pages = table_page(df, opts, max_rows)
        first = page * max_rows
        where = f" matching <code>{esc(opts.query)}</code>" if opts.query else ""
        order = (f", sorted by <code>{esc(opts.sort)}</code> {'descending' if opts.descending else 'ascending'}"
                 if opts.sort and opts.sort in df.columns else "")
        note = (f"<div class='hx-note hx-table-page'>{esc(what)} {first + 1 if n else 0:,d}\u2013"
                f"{min(first + max_rows, n):,d} of {n:,d}{where}"
                + (f" (of {total:,d})" if n != total else "") + order
                + f"; page {page + 1} of {pages}</div>")
        if n == 0:
            return note + f"<p class='note hx-note'>(no {esc(what)}{where})</p>"
    cols = [str(c) for c in df.columns]
    tid = f' id="{esc(table_id)}"' if table_id else ""
    out = [note]
    if filter and n > 1 and table_id:
        out.append(f'<input class="filter" type="search" placeholder="filter rows…" '
                   f'data-table="{esc(table_id)}" aria-label="filter {esc(table_id)}">')
    out.append(f'<div class="tablewrap hx-table-wrap"><table class="data hx-table"{tid}><thead><tr>')
    out.extend(f"<th>{header_html(c)}</th>" for c in cols)
    out.append("</tr></thead><tbody>")
    for row in df.head(max_rows).itertuples(index=False, name=None):
        out.append("<tr>" + "".join(td(c, v, cell_class) for c, v in zip(cols, row)) + "</tr>")
    out.append("</tbody></table></div>")
    if n == 0:
        out.append(f"<p class='note hx-note'>(no {esc(what)})</p>")
    elif opts is None and n > max_rows:
        out.append(f"<p class='note hx-note'>showing the first {max_rows:,} of {n:,} {esc(what)}</p>")
    return "".join(out)


def repr_html(kind: str, text: str, df) -> str:
    """A notebook's display of a Plan, a RunResult or an Explorer: its one-line summary and table."""
    return f"<div><b>{esc(kind)}</b>: {esc(text)}</div>" + table_html(df, max_rows=1000)


def header_html(name) -> str:
    """A column header: escaped, breakable only after an underscore (``bytes_<wbr>in``), never
    inside a word (the page's CSS keeps each part whole)."""
    return "_<wbr>".join(esc(part) for part in str(name).split("_"))


def kv_table(rows, css: str = "") -> str:
    """A key/value table; values are escaped (pass ``(key, html, True)`` for prebuilt HTML);
    ``css``: more classes of the table."""
    out = [f'<table class="kv{" " + esc(css) if css else ""}"><tbody>']
    for r in rows:
        k, v = r[0], r[1]
        raw = len(r) > 2 and r[2]
        out.append(f"<tr><th>{esc(k)}</th><td>{v if raw else esc(v)}</td></tr>")
    out.append("</tbody></table>")
    return "".join(out)


def fmt_shape(shape) -> str:
    """``[1,3,?]``: a shape as the views print it."""
    if shape is None:
        return "[?]"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"
