"""How long a run may go on: a budget of loop iterations and of seconds, and a cancel callback,
checked by control-flow kernels at every iteration (a Loop whose trip count is 10^18 stops with
a typed error naming it instead of running until it is killed).

A run is given its :class:`RunLimits` (``execute(..., limits=...)``, the CLI's
``--max-loop-iterations`` / ``--max-seconds``, the app's Cancel); the executor makes them the
run's for its thread (:func:`running`), and a kernel asks :func:`current` -- control flow nested
in control flow runs in the same thread and under the same limits."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

from .errors import ArgumentTypeError, ArgumentValueError, RunBudgetExceeded, RunCancelled

#: the default budget of iterations of one Loop node in one run: far beyond what a model's loops
#: do (decoding steps, recurrences), reached in seconds to minutes by a runaway trip count
DEFAULT_MAX_LOOP_ITERATIONS = 1_000_000


@dataclass(frozen=True)
class RunLimits:
    """What one run may do before it is stopped (each check raises a typed error)."""

    max_loop_iterations: int | None = DEFAULT_MAX_LOOP_ITERATIONS
    """The most iterations one Loop node may run in one run (None: no bound)."""
    max_seconds: float | None = None
    """The most wall seconds a run may take, checked at every loop iteration (None: no bound)."""
    cancel: Callable[[], bool] | None = None
    """Asked at every loop iteration (e.g. a ``threading.Event``'s ``is_set``): True stops the run
    with :class:`~hetero_explore.ir.errors.RunCancelled`."""

    def __post_init__(self):
        n = self.max_loop_iterations
        if n is not None and (isinstance(n, bool) or not isinstance(n, int)):
            raise ArgumentTypeError(f"max_loop_iterations must be an int or None, got {n!r}")
        if n is not None and n < 1:
            raise ArgumentValueError(f"max_loop_iterations must be at least 1 (or None for no bound), got {n}")
        s = self.max_seconds
        if s is not None and (isinstance(s, bool) or not isinstance(s, (int, float))):
            raise ArgumentTypeError(f"max_seconds must be a number or None, got {s!r}")
        if s is not None and not s > 0:
            raise ArgumentValueError(f"max_seconds must be positive (or None for no bound), got {s}")
        if self.cancel is not None and not callable(self.cancel):
            raise ArgumentTypeError(f"cancel must be a callable returning True to stop, got {self.cancel!r}")


class Guard:
    """The limits of the run in progress on this thread, with its start time."""

    __slots__ = ("limits", "deadline", "t0")

    def __init__(self, limits: RunLimits):
        self.limits = limits
        self.t0 = time.monotonic()
        self.deadline = None if limits.max_seconds is None else self.t0 + limits.max_seconds

    def iteration(self, where: str, it: int, trip=None) -> None:
        """Called before iteration ``it`` (0-based) of a loop (``where`` names its node)."""
        lim = self.limits
        if lim.max_loop_iterations is not None and it >= lim.max_loop_iterations:
            of = "" if trip is None else f" of its trip count {trip}"
            raise RunBudgetExceeded(
                f"{where} stopped after {it} iterations{of}, its condition still true: the run's budget is "
                f"{lim.max_loop_iterations} iterations per loop; raise it (execute(..., limits=RunLimits("
                "max_loop_iterations=N)), the CLI's --max-loop-iterations N) if the model means it, or fix its "
                "trip count / condition")
        self.check(where, it)

    def check(self, where: str, it: int) -> None:
        """The seconds budget and the cancel callback only (a Scan's steps are bounded by its input)."""
        lim = self.limits
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise RunBudgetExceeded(
                f"{where} stopped at iteration {it}: the run took more than its budget of {lim.max_seconds:g} s; "
                "raise it (execute(..., limits=RunLimits(max_seconds=S)), the CLI's --max-seconds S) or fix the "
                "model's trip count / condition")
        if lim.cancel is not None and lim.cancel():
            raise RunCancelled(f"the run was cancelled in {where} at iteration {it}; nothing ran after that "
                               "point and every buffer it held was freed")


_local = threading.local()
_DEFAULT = RunLimits()


def current() -> Guard:
    """The guard of the run in progress on this thread (the default limits outside any run)."""
    g = getattr(_local, "guard", None)
    return g if g is not None else Guard(_DEFAULT)


@contextmanager
def running(limits: RunLimits | None):
    """Make ``limits`` the run's on this thread for the duration (None: keep those of an
    enclosing run, else the defaults)."""
    if limits is not None and not isinstance(limits, RunLimits):
        raise ArgumentTypeError(f"limits must be a RunLimits, got {type(limits).__name__}")
    outer = getattr(_local, "guard", None)
    if limits is None and outer is not None:
        yield outer
        return
    _local.guard = g = Guard(limits or _DEFAULT)
    try:
        yield g
    finally:
        _local.guard = outer
