"""Stable provider colours.

A provider's colour is a function of its *name*: a fixed colour for the known
names (``cpu``, ``cuda``, ``gpu``) and, for any other name, a pick from a fixed
palette by a stable hash of the name (``zlib.crc32``, never Python's salted
``hash()``), so pictures do not reshuffle between runs, plans or machines.

When two providers of one plan would share a colour, :func:`provider_colors`
moves the later one (in name order, not priority order) to the next free
palette entry, so a reordering of the same providers keeps every colour.
"""

from __future__ import annotations

import zlib
from typing import Iterable

#: Fixed colours of the known provider names (light enough for black text).
KNOWN: dict[str, str] = {
    "cpu": "#9ecae1",   # blue
    "cuda": "#a1d99b",  # green
    "gpu": "#fdae6b",   # orange
    "unplaced": "#ef3b2c",  # red: the nodes no provider supports
}

#: Palette for every other name (pastels, distinct from the known colours).
PALETTE: tuple[str, ...] = (
    "#bcbddc", "#fbb4ae", "#ffffb3", "#ccebc5", "#fddaec", "#e5d8bd", "#d9d9d9",
    "#80cdc1", "#f4a582", "#c2a5cf", "#dfc27d", "#b8e186", "#f1b6da", "#92c5de",
    "#fee08b", "#b3de69",
)

#: Transfer edge colours by kind.
TRANSFER_COLORS: dict[str, str] = {
    "H2D": "#d62728",
    "D2H": "#9467bd",
    "D2D": "#e6550d",
    "H2H": "#636363",
    "same-device": "#8c564b",
}
#: Colour of an edge that moves nothing between providers.
EDGE_COLOR = "#555555"
#: Fill of graph inputs and outputs, and of initializers.
IO_FILL = "#ffffff"
INIT_FILL = "#f0f0f0"


def _key(name: str) -> str:
    return str(name).strip().lower()


def _slot(name: str) -> int:
    return zlib.crc32(_key(name).encode("utf-8")) % len(PALETTE)


def provider_color(name: str) -> str:
    """The colour of one provider name, independent of any other provider."""
    k = _key(name)
    if k in KNOWN:
        return KNOWN[k]
    return PALETTE[_slot(k)]


def provider_colors(names: Iterable[str]) -> dict[str, str]:
    """Colours of several providers (name → ``#rrggbb``), distinct where the palette allows.

    Known names keep their fixed colours; other names take their hashed colour
    unless a provider earlier in *name* order already holds it, in which case
    they take the next free palette entry."""
    names = list(dict.fromkeys(str(n) for n in names))
    out: dict[str, str] = {}
    taken: set[str] = set()
    for n in names:
        if _key(n) in KNOWN:
            out[n] = KNOWN[_key(n)]
            taken.add(out[n])
    for n in sorted((n for n in names if _key(n) not in KNOWN), key=_key):
        start = _slot(n)
        color = PALETTE[start]
        for step in range(len(PALETTE)):
            c = PALETTE[(start + step) % len(PALETTE)]
            if c not in taken:
                color = c
                break
        out[n] = color
        taken.add(color)
    return {n: out[n] for n in names}


def darker(color: str, factor: float = 0.6) -> str:
    """``color`` darkened (for borders and cluster outlines)."""
    r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return "#{:02x}{:02x}{:02x}".format(*(int(c * factor) for c in (r, g, b)))


def lighter(color: str, factor: float = 0.75) -> str:
    """``color`` mixed with white (for cluster backgrounds)."""
    r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return "#{:02x}{:02x}{:02x}".format(*(int(c + (255 - c) * factor) for c in (r, g, b)))
