"""Execute a plan, run its graph on a reference provider, compare: the one function the
Explorer, the CLI and the sweep call, so they agree on what a checked run is."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..execution.executor import HeterogeneousExecutor, RunResult
from .compare import compare

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
    warm_seconds: list = field(default_factory=list)
    """Wall seconds of the warm runs after the first (empty when none were asked for)."""

    @property
    def byte_identical(self) -> bool:
        return bool(self.diff["byte_identical"].all())


def run_and_compare(plan, inputs, *, reference=DEFAULT_REFERENCE, blame: bool = True, warm_runs: int = 0,
                    executor: HeterogeneousExecutor | None = None,
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
        warm_runs: after the first run, this many more on the same executor (its constants and
            programs held), timed one by one into ``warm_seconds``.
        executor: the executor to run with (default: a new one for ``plan``, closed afterwards).
        reference_run: the reference run when the caller has it already (a cache), or a function
            of the validated inputs that returns it.
        progress / reference_progress: the executors' compile-progress callbacks.
        on_stage: ``on_stage(stage, run)`` with ``"reference"`` before the reference runs and
            ``"compare"`` before the comparison (a progress bar's next stages).
        limits: the runs' :class:`~hetero_explore.ir.limits.RunLimits` (loop iterations, seconds,
            cancel), each run's own.
    """
    own = executor is None
    ex = executor if executor is not None else HeterogeneousExecutor(plan, keep_constants=warm_runs > 0)
    try:
        run = ex.run(inputs, progress=progress, limits=limits)
        warm = []
        for _ in range(warm_runs):
            t0 = time.perf_counter()
            ex.run(run.inputs, limits=limits)
            warm.append(time.perf_counter() - t0)
    finally:
        if own:
            ex.close()
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
    return CheckedRun(run, ref, compare(run, ref, blame=blame), warm)
