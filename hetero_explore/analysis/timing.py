"""Run timings that mean something: a warm median and p90 over N runs (N stated), with the
first run and the kernel-compile time listed apart.

A plan's first run on a new executor pays for what later runs reuse (numba compiling or
loading kernels from its cache, the memory plan's arenas, recorded calls for replay), so
it can be 50x a warm run. :func:`measure` times warm runs on an executor that holds the
plan's constants (as a deployed session would) and keeps the first run's figures
separate; the app, the report, the CLI and the sweep all show its :class:`Timings`.

    t = measure(plan, feeds, first_run=run)      # run: the run shown (its compile time counts)
    t.text()   # 'warm 2.41 ms median, p90 2.60 ms over 20 runs; first run 121 ms (+ 3.2 s compiling kernels)'
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Callable

from ..ir.units import human_seconds

#: warm runs timed at most (fewer when :data:`BUDGET_SECONDS` runs out first)
WARM_RUNS = 20
#: fewest warm runs timed whatever the budget says (a median of fewer says little)
MIN_WARM_RUNS = 3
#: wall-clock budget for the warm runs (the app waits for them after Execute)
BUDGET_SECONDS = 2.0


@dataclass(frozen=True)
class Timings:
    """How long a plan takes to run: warm statistics over ``n`` runs, first run apart."""

    n: int
    """Warm runs timed (after one untimed warm-up run on the timing executor)."""
    warm_median_seconds: float | None
    """Median wall time of the warm runs (None: none was timed)."""
    warm_p90_seconds: float | None
    """90th percentile (nearest rank) of the warm runs."""
    warm_min_seconds: float | None
    """Fastest warm run."""
    first_seconds: float | None
    """Wall time of the first run (compile time excluded; see ``compile_seconds``)."""
    compile_seconds: float
    """Seconds the first run spent compiling kernels (0 when the cache had them all)."""
    samples: tuple = ()
    """Every warm run's wall time, in run order."""

    def text(self) -> str:
        """One line: ``warm 2.41 ms median, p90 2.60 ms over 20 runs; first run 121 ms (+ 3.2 s
        compiling kernels)``."""
        if not self.n:
            warm = "no warm run timed"
        else:
            warm = (f"warm {human_seconds(self.warm_median_seconds)} median, p90 "
                    f"{human_seconds(self.warm_p90_seconds)} over {self.n} run{'s' if self.n != 1 else ''}")
        first = "" if self.first_seconds is None else f"; first run {human_seconds(self.first_seconds)}"
        comp = f" (+ {human_seconds(self.compile_seconds)} compiling kernels)" if self.compile_seconds >= 0.0005 else ""
        return warm + first + (comp if first else "")

    def as_dict(self) -> dict:
        d = asdict(self)
        d["samples"] = list(self.samples)
        return d

    def rows(self) -> list[tuple[str, str]]:
        """``(what, value)`` pairs for a key-value table (the app's and the report's Run view)."""
        out = [("warm runs timed", f"{self.n}")]
        if self.n:
            out += [("warm median", human_seconds(self.warm_median_seconds)),
                    ("warm p90", human_seconds(self.warm_p90_seconds)),
                    ("warm fastest", human_seconds(self.warm_min_seconds))]
        if self.first_seconds is not None:
            out.append(("first run (a new executor; not warm)", human_seconds(self.first_seconds)))
        out.append(("compiling kernels (first run, apart)", human_seconds(self.compile_seconds)))
        return out


def percentile(values, q: float) -> float | None:
    """The ``q`` (0-100) percentile of ``values`` by nearest rank (an observed value, never an
    interpolation); None for no values."""
    xs = sorted(values)
    if not xs:
        return None
    k = max(1, math.ceil(q / 100.0 * len(xs)))
    return xs[min(k, len(xs)) - 1]


def summarize(samples, *, first_seconds: float | None = None, compile_seconds: float = 0.0) -> Timings:
    """:class:`Timings` of warm ``samples`` (seconds) and a first run's figures."""
    xs = [float(x) for x in samples]
    return Timings(n=len(xs), warm_median_seconds=percentile(xs, 50), warm_p90_seconds=percentile(xs, 90),
                   warm_min_seconds=min(xs) if xs else None, first_seconds=first_seconds,
                   compile_seconds=float(compile_seconds), samples=tuple(xs))


def warm_samples(executor, feeds, *, n: int = WARM_RUNS, budget_seconds: float = BUDGET_SECONDS,
                 min_runs: int = MIN_WARM_RUNS, cancel: Callable[[], bool] | None = None,
                 limits=None) -> list[float]:
    """Wall times of up to ``n`` runs of ``executor`` (one that ran once already) on ``feeds``,
    stopping early once ``budget_seconds`` have passed and at least ``min_runs`` ran, or when
    ``cancel()`` answers True. Each run's ``wall_seconds`` is a sample (input validation and
    compile time excluded); ``limits`` are each run's
    :class:`~hetero_explore.ir.limits.RunLimits`."""
    samples: list[float] = []
    t_end = time.perf_counter() + max(0.0, float(budget_seconds))
    for _ in range(max(0, int(n))):
        if cancel is not None and cancel():
            break
        if len(samples) >= min_runs and time.perf_counter() > t_end:
            break
        samples.append(executor.run(feeds, limits=limits).wall_seconds)
    return samples


def measure(plan, feeds, *, first_run=None, n: int = WARM_RUNS, budget_seconds: float = BUDGET_SECONDS,
            min_runs: int = MIN_WARM_RUNS, cancel: Callable[[], bool] | None = None, limits=None) -> Timings:
    """Time warm runs of ``plan`` on ``feeds``.

    An executor holding the plan's constants runs once untimed (it compiles or loads what the
    kernel cache lacks, lays out its arenas, records replayable calls), then as
    :func:`warm_samples` says.

    ``first_run``: the run the caller already made (a :class:`~hetero_explore.execution.executor.RunResult`);
    its wall time and compile time are reported as the first run. Without it, the timing
    executor's own first run is. ``cancel()`` is asked before each run: True stops timing
    (the runs so far are summarised); ``limits``: each run's
    :class:`~hetero_explore.ir.limits.RunLimits`."""
    from ..execution.executor import HeterogeneousExecutor

    with HeterogeneousExecutor(plan) as ex:
        warm_up = ex.run(feeds, limits=limits)
        samples = warm_samples(ex, feeds, n=n, budget_seconds=budget_seconds, min_runs=min_runs, cancel=cancel,
                               limits=limits)
    src = first_run if first_run is not None else warm_up
    return summarize(samples, first_seconds=getattr(src, "wall_seconds", None),
                     compile_seconds=float(getattr(src, "compile_seconds", 0.0) or 0.0))
