"""What a run returns: :class:`RunResult` (outputs, timeline, peak bytes, transfers, the
intermediates when kept) and the records of its timeline (:class:`Event`) and of its buffer
releases (:class:`Release`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..ir import display
from ..ir.graph import Graph
from ..planner.plan import Plan


@dataclass(slots=True)
class Event:
    """One timed step of a run."""

    kind: str
    """``partition``, ``transfer`` or ``readback`` (a graph output copied to the host)."""
    provider: str
    """Provider that ran the step (a transfer's destination)."""
    device: str
    """Device of the track the step is drawn on."""
    start: float
    """Seconds since the start of the run."""
    seconds: float
    """Duration."""
    partition: int | None = None
    """Partition run (``partition``), triggering (``transfer``) or producing (``readback``)."""
    nodes: int | None = None
    """Nodes in the partition."""
    value: str | None = None
    """Value moved (``transfer``, ``readback``)."""
    transfer_kind: str | None = None
    """``H2D``, ``D2H``, ``D2D``, ``H2H`` or ``same-device``."""
    bytes: int | None = None
    """Bytes moved."""
    src_provider: str | None = None
    """A transfer's source provider."""
    compile_s: float = 0.0
    """Seconds of kernel compilation during the step (excluded from ``seconds``)."""


@dataclass(frozen=True)
class Release:
    """A boundary value's buffer freed after a partition."""

    value: str
    provider: str
    after_partition: int
    role: str
    """``authoritative`` (the producer's allocation) or ``transfer`` (a destination's copy)."""


@dataclass(eq=False)
class RunResult:
    """The outcome of :func:`execute` or :func:`execute_reference`."""

    outputs: dict
    """Graph output name → numpy array, in the graph's output order."""
    kind: str
    """``heterogeneous`` or ``reference``."""
    plan: Plan
    """The executed plan (a one-partition plan for a reference run)."""
    events: list
    """Timed :class:`Event` s in execution order."""
    peak_bytes: dict
    """Device → peak bytes this run held live on it (over its providers): its memory-plan arenas
    (``arena_bytes``, held throughout the run) plus the peak of what it allocated itself; the
    constants an executor holds across runs are not counted (see ``constant_bytes``)."""
    transfers_performed: int
    """Copies made between providers (equals ``len(plan.transfers)``)."""
    releases: list
    """:class:`Release` s of boundary values, in order."""
    allocations: int
    """Buffers allocated by the run (all of them were freed), the memory plan's arenas not
    counted (see ``arena_allocations``)."""
    wall_seconds: float
    """Wall time of the run, input validation excluded."""
    inputs: dict = field(repr=False, default_factory=dict)
    """Private read-only copies of the validated inputs (kept to re-run for blame)."""
    constant_bytes: dict = field(default_factory=dict)
    """Device → bytes of initializers the executor held on it across runs (staged once at
    build time; empty when the run staged them itself, as :func:`execute` does)."""
    intermediates: dict | None = field(repr=False, default=None)
    """With ``keep_intermediates``: every node output name → host copy."""
    transfer_values: dict | None = field(repr=False, default=None)
    """With ``keep_intermediates``: transfer index → host copy of the destination's realisation."""
    staged_values: dict | None = field(repr=False, default=None)
    """With ``keep_intermediates``: (value, partition) → host copy of a staged input or initializer."""
    value_shapes: dict = field(default_factory=dict)
    """Value name → (shape, dtype) computed at run time, for every output of a node whose shapes
    the plan could not promise (symbolic dims, run-time shape inputs, data-dependent ops)."""
    compile_seconds: float = 0.0
    """Seconds this run spent compiling kernels (numba), excluded from ``wall_seconds`` and from
    every event's ``seconds`` (see ``Event.compile_s``)."""
    arena_allocations: int = 0
    """Arenas the run allocated itself (and freed), not counted in ``allocations``: 0 when it used a
    set the executor holds; one per provider with an arena in a one-shot :func:`execute`, or when
    other threads' runs held every set."""
    arena_bytes: dict = field(default_factory=dict)
    """Device → bytes of the arena(s) the memory plan laid out for this run (part of ``peak_bytes``;
    empty when the run did not use the plan, as with ``keep_intermediates``)."""
    _executor: Any = field(repr=False, default=None)

    @property
    def graph(self) -> Graph:
        return self.plan.graph

    @property
    def providers(self) -> list[str]:
        return [self.plan.providers[i].name for i in dict.fromkeys(p.provider_index for p in self.plan.partitions)]

    def __getitem__(self, name: str) -> np.ndarray:
        return self.outputs[name]

    def rerun(self, keep_intermediates: bool = True) -> "RunResult":
        """Run the same plan on the same inputs again (by default keeping every intermediate)."""
        return self._executor.run(self.inputs, keep_intermediates=keep_intermediates)

    def timings_df(self):
        """One row per partition, transfer and output read-back: provider, device, seconds,
        nodes (partitions), value, kind, source provider and bytes (transfers; ``provider`` is
        the destination). ``partition`` of a transfer is the partition it was made for.
        ``compile_s``: kernel compilation during the step (not in ``seconds``)."""
        import pandas as pd
        cols = ["event", "partition", "provider", "device", "nodes", "value", "kind", "src_provider", "bytes",
                "start_s", "seconds", "compile_s"]
        rows = [{"event": e.kind, "partition": e.partition, "provider": e.provider, "device": e.device,
                 "nodes": e.nodes, "value": e.value, "kind": e.transfer_kind, "src_provider": e.src_provider,
                 "bytes": e.bytes, "start_s": e.start, "seconds": e.seconds, "compile_s": e.compile_s}
                for e in self.events]
        df = pd.DataFrame(rows, columns=cols)
        return df.astype({"partition": "Int64", "nodes": "Int64", "bytes": "Int64"})

    def value_shapes_df(self):
        """One row per value whose shape the plan could not promise (symbolic dims, run-time shape
        inputs, data-dependent ops): the planned shape, the shape this run computed, dtype, bytes."""
        import pandas as pd
        vals = self.graph.values
        rows = [{"value": n, "planned_shape": vals[n].shape if n in vals else None, "shape": tuple(s),
                 "dtype": np.dtype(d).name, "bytes": int(np.prod(s, dtype=np.int64)) * np.dtype(d).itemsize}
                for n, (s, d) in self.value_shapes.items()]
        return pd.DataFrame(rows, columns=["value", "planned_shape", "shape", "dtype", "bytes"])

    def releases_df(self):
        import pandas as pd
        return pd.DataFrame([r.__dict__ for r in self.releases],
                            columns=["value", "provider", "after_partition", "role"])

    @property
    def transfer_seconds(self) -> float:
        return float(sum(e.seconds for e in self.events if e.kind == "transfer"))

    @property
    def partition_seconds(self) -> float:
        return float(sum(e.seconds for e in self.events if e.kind == "partition"))

    def to_chrome_trace(self, path=None) -> dict:
        """The run as a Trace Event Format timeline (one track per device: partitions,
        transfers and read-backs), loadable in Perfetto or chrome://tracing.
        Written as JSON to ``path`` when given; the trace dict is returned."""
        tracks: dict[str, int] = {}
        for e in self.events:
            tracks.setdefault(e.device, len(tracks) + 1)
        pid = 1
        trace: list[dict] = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                              "args": {"name": f"hetero_explore {self.kind} run: {self.graph.name}"}}]
        for dev, tid in tracks.items():
            trace.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": dev}})
            trace.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                          "args": {"sort_index": tid}})
        for e in self.events:
            if e.kind == "partition":
                name = f"partition {e.partition} ({e.provider}, {e.nodes} node{'s' if e.nodes != 1 else ''})"
                args = {"provider": e.provider, "nodes": e.nodes}
            elif e.kind == "transfer":
                name = f"{e.transfer_kind} {e.value}"
                args = {"value": e.value, "bytes": e.bytes, "from": e.src_provider, "to": e.provider,
                        "before_partition": e.partition}
            else:
                name = f"read back {e.value}"
                args = {"value": e.value, "bytes": e.bytes, "provider": e.provider}
            trace.append({"name": name, "cat": e.kind, "ph": "X", "pid": pid, "tid": tracks[e.device],
                          "ts": round(e.start * 1e6, 3), "dur": round(max(e.seconds, 0.0) * 1e6, 3),
                          "args": args})
        doc = {"traceEvents": trace, "displayTimeUnit": "ms",
               "otherData": {"summary": self.summary(), "peak_bytes": self.peak_bytes}}
        if path is not None:
            Path(path).write_text(json.dumps(doc, default=str))
        return doc

    def summary(self) -> str:
        n_parts = len(self.plan.partitions)
        peaks = ", ".join(f"{d}: {b} B" for d, b in self.peak_bytes.items())
        return (f"{self.kind} run of {self.graph.name!r}: {n_parts} partition(s) on "
                f"{', '.join(self.providers) or 'no provider'}; {self.transfers_performed} transfer(s) "
                f"({self.transfer_seconds * 1e3:.3f} ms); wall {self.wall_seconds * 1e3:.3f} ms"
                + (f" (+ {self.compile_seconds:.3f} s compiling kernels)" if self.compile_seconds else "")
                + f"; peak {peaks or 'none'}")

    def __repr__(self) -> str:
        return f"RunResult({self.summary()})"

    def _repr_html_(self) -> str:
        return display.render("html", self)


# -- a plan -------------------------------------------------------------------------
