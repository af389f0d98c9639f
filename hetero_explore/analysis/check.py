"""Execute a plan, run its graph on a reference provider, compare: the one function the
Explorer, the CLI and the sweep call, so they agree on what a checked run is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..execution.executor import HeterogeneousExecutor, RunResult
from .compare import compare
from .timing import BUDGET_SECONDS, Timings, summarize, warm_samples

#: the provider a heterogeneous run is compared with, unless the caller names another
DEFAULT_REFERENCE = "cpu"


@dataclass
class CheckedRun:
    """What :func:`run_and_compare` did."""

    run: RunResult
    """The first run of the plan (compile time included in its ``compile_seconds``)."""
    reference: RunResult
    """The whole graph on the reference provider, on the same inputs."""
    diff: Any
    """:func:`~.compare.compare`'s table, one row per output (blame columns included)."""
    timings: Timings | None = None
    """Warm median and p90 over the warm runs, the first run apart (None when none were asked for)."""

    @property
    def warm_seconds(self) -> list:
        """Wall seconds of the warm runs, in run order (empty when none were asked for)."""
        return list(self.timings.samples) if self.timings is not None else []

    @property
    def byte_identical(self) -> bool:
        return bool(self.diff["byte_identical"].all())


def run_and_compare(plan, inputs, *, reference=DEFAULT_REFERENCE, blame: bool = True, warm_runs: int = 0,
                    warm_budget_seconds: float = BUDGET_SECONDS, executor: HeterogeneousExecutor | None = None,
                    reference_run: RunResult | Callable[[dict], RunResult] | None = None,
                    progress=None, reference_progress=None, on_stage: Callable[[str, RunResult], None] | None = None,
                    limits=None) -> CheckedRun:
    """Execute ``plan`` on ``inputs``, run its graph on ``reference`` and compare the outputs.

    Args:
        plan: the plan to execute (its execution blockers fail closed).
        inputs: graph input name → array (validated by the executor).
        reference: the provider (or its name) of the reference run.
        blame: trace every differing output to the first step that made it differ
            (:func:`~.compare.first_divergence`; it re-runs both only when something differs).
        warm_runs: after the comparison, up to this many more runs on the same executor (its
            constants and programs held), timed one by one (:func:`.timing.warm_samples`: at least
            three, then until ``warm_budget_seconds`` have passed) into ``timings``.
        executor: the executor to run with (default: a new one for ``plan``, closed afterwards).
        reference_run: the reference run when the caller has it already (a cache), or a function
            of the validated inputs that returns it.
        progress / reference_progress: the executors' compile-progress callbacks.
        on_stage: ``on_stage(stage, run)`` with ``"reference"`` before the reference runs,
            ``"compare"`` before the comparison and ``"timing"`` before the warm runs (a progress
            bar's next stages).
        limits: the runs' :class:`~hetero_explore.ir.limits.RunLimits` (loop iterations, seconds,
            cancel), each run's own.
    """
    own = executor is None
    ex = executor if executor is not None else HeterogeneousExecutor(plan, keep_constants=warm_runs > 0)
    try:
        run = ex.run(inputs, progress=progress, limits=limits)
        if on_stage is not None:
            on_stage("reference", run)
        if isinstance(reference_run, RunResult):
            ref = reference_run
        elif reference_run is not None:
            from ..ir.limits import running
            with running(limits):
                ref = reference_run(run.inputs)
        else:
            from ..execution.executor import execute_reference
            ref = execute_reference(plan.graph, reference, run.inputs, progress=reference_progress, limits=limits)
        if on_stage is not None:
            on_stage("compare", run)
        diff = compare(run, ref, blame=blame)
        timings = None
        if warm_runs:
            if on_stage is not None:
                on_stage("timing", run)
            timings = summarize(warm_samples(ex, run.inputs, n=warm_runs, budget_seconds=warm_budget_seconds,
                                             limits=limits),
                                first_seconds=run.wall_seconds, compile_seconds=run.compile_seconds)
    finally:
        if own:
            ex.close()
    return CheckedRun(run, ref, diff, timings)
