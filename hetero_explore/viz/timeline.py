"""A run's timeline: one lane per device, partitions and transfers as bars (a Gantt chart),
as inline SVG — no script, so it works in the CSP-locked report, in the app and offline.

Bars are coloured by provider (partitions) or by transfer kind (transfers); each bar's
tooltip (``<title>``) names the step, its provider, bytes and duration. Where a run holds
several timed runs (``RunResult``s of the same plan), :func:`timing_stats` gives p50/p90 per
step; the chart draws one run.
"""

from __future__ import annotations

from ..ir.units import human_bytes, human_seconds
from .colors import TRANSFER_COLORS, provider_colors
from .html import esc  # the one HTML escaper of the views

LANE_H = 22
LABEL_W = 90
WIDTH = 900


def timeline_svg(run, width: int = WIDTH) -> str:
    """The Gantt chart of ``run``'s events (a :class:`~hetero_explore.execution.executor.RunResult`)."""
    events = list(getattr(run, "events", ()) or ())
    if not events:
        return '<p class="note">no timed steps in this run</p>'
    lanes = list(dict.fromkeys(e.device for e in events))
    end = max(e.start + max(e.seconds, 0.0) for e in events) or 1e-9
    colors = provider_colors(dict.fromkeys(e.provider for e in events))
    plot_w = width - LABEL_W - 10
    h = LANE_H * len(lanes) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="he-timeline" role="img" width="{width}" height="{h}" '
           f'aria-label="timeline of the run: {len(events)} steps on {len(lanes)} device(s)">']
    for i, dev in enumerate(lanes):
        y = 4 + i * LANE_H
        out.append(f'<text x="{LABEL_W - 6}" y="{y + 15}" font-size="11" text-anchor="end">{esc(dev)}</text>'
                   f'<line x1="{LABEL_W}" x2="{width - 10}" y1="{y + LANE_H - 1}" y2="{y + LANE_H - 1}" '
                   'stroke="#eee"/>')
    for e in events:
        y = 4 + lanes.index(e.device) * LANE_H
        x = LABEL_W + plot_w * e.start / end
        w = max(1.0, plot_w * max(e.seconds, 0.0) / end)
        if e.kind == "partition":
            fill = colors.get(e.provider, "#ccc")
            label = f"partition {e.partition} · {e.provider} · {e.nodes} node(s)"
        elif e.kind == "transfer":
            fill = TRANSFER_COLORS.get(e.transfer_kind, "#999")
            label = f"{e.transfer_kind} {e.value} · {human_bytes(e.bytes)} · {e.src_provider} → {e.provider}"
        else:
            fill = "#bbb"
            label = f"read back {e.value} · {human_bytes(e.bytes)}"
        tip = f"{label} · start {human_seconds(e.start)} · {human_seconds(e.seconds)}"
        out.append(f'<rect class="he-step he-{esc(e.kind)}" x="{x:.2f}" y="{y + 3}" width="{w:.2f}" '
                   f'height="{LANE_H - 8}" fill="{esc(fill)}" stroke="#555" stroke-width="0.5">'
                   f'<title>{esc(tip)}</title></rect>')
    y = 4 + len(lanes) * LANE_H + 14
    out.append(f'<text x="{LABEL_W}" y="{y}" font-size="10">0</text>'
               f'<text x="{width - 10}" y="{y}" font-size="10" text-anchor="end">{esc(human_seconds(end))}</text>')
    out.append("</svg>")
    return "".join(out)


def timing_stats(runs) -> "object":
    """p50 / p90 seconds per step over several runs of one plan (a DataFrame: kind, step,
    device, runs, p50_seconds, p90_seconds)."""
    import numpy as np
    import pandas as pd
    acc: dict[tuple, list[float]] = {}
    for r in runs:
        for e in r.events:
            step = f"partition {e.partition}" if e.kind == "partition" else f"{e.transfer_kind or e.kind} {e.value}"
            acc.setdefault((e.kind, step, e.device), []).append(e.seconds)
        acc.setdefault(("run", "wall", ""), []).append(getattr(r, "wall_seconds", float("nan")))
    rows = [{"kind": k, "step": s, "device": d, "runs": len(v), "p50_seconds": float(np.percentile(v, 50)),
             "p90_seconds": float(np.percentile(v, 90))} for (k, s, d), v in acc.items()]
    return pd.DataFrame(rows, columns=["kind", "step", "device", "runs", "p50_seconds", "p90_seconds"])
