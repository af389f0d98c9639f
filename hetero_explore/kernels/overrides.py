"""Target-specific rules, registered by (key, target): the CPU fast paths and their build-time
packing steps.

Every op's kernels are generated from one per-item statement (:func:`.target.kernel_pair`).
Where a target can compute the same values faster, a rule registered here replaces or
prepares what the op runs, keyed by the kernel pair's name (or another key an op module
asks for) and the target's name, as JAX registers lowering rules per primitive and
platform (``register_lowering(prim, rule, platform=...)``: the platform's rule takes
precedence over the common one; here the common rule is the generated kernel):

* ``run``: a kernel compiled for the target that takes the generated kernel's arguments
  (``@cpu_kernel`` for the CPU) and gives bit for bit its results. The target launches it in
  the generated kernel's place (:meth:`.target.Target.launch`).
* ``prepare``: a build-time step, ``prepare(target, *args, **kw) -> run function or None``,
  that an op's build asks for with :meth:`.target.Target.prepared` (e.g. a constant weight
  packed once into a fast path's layout, with the run function that multiplies by it); None
  means "no rule for these arguments": the op builds its generic run.

A target consults the rules only while its ``fast_paths`` is on
(``CPUTarget(generated_only=True)`` runs the generated kernels). The op modules never import
the modules that hold the rules; those import the op modules and register their rules when
:func:`.registry.build_registry` calls them (``cpu_fast.register()``): nothing is registered
as a side effect of an import. ``tests/test_fastpaths.py`` holds every rule registered here
against the generated kernel on random shapes.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Override:
    """One target-specific rule."""

    key: str
    """The kernel pair's name (or the key an op's build asks :meth:`.target.Target.prepared` for)."""
    target: str
    """The target's name."""
    run: object = None
    """A kernel compiled for the target with the generated kernel's arguments, or None."""
    prepare: Callable | None = None
    """``prepare(target, *args, **kw) -> run function or None``: a build-time step, or None."""


#: target name -> key -> rule
_RULES: dict[str, dict[str, Override]] = {}
#: target name -> key -> run kernel: the lookup a launch makes (kept in step with _RULES)
_RUNS: dict[str, dict] = {}


def _key(key) -> str:
    return key if isinstance(key, str) else key.name   # a KernelPair


def override(key, *, target: str, run=None, prepare: Callable | None = None) -> Override:
    """Register the rule for ``(key, target)`` (a :class:`~.target.KernelPair` or its name),
    replacing any earlier one; returns it. ``run`` must be a kernel of ``target``
    (``LazyKernel`` of that target: ``@cpu_kernel`` for the CPU)."""
    if run is None and prepare is None:
        raise ValueError(f"override {_key(key)!r} on {target!r}: give run=, prepare= or both")
    if run is not None and getattr(run, "target", None) != target:
        raise TypeError(f"override {_key(key)!r} on {target!r}: run must be a kernel compiled for {target!r} "
                        f"(for the CPU: decorate it with @cpu_kernel), not {run!r}")
    rule = Override(_key(key), target, run, prepare)
    _RULES.setdefault(target, {})[rule.key] = rule
    runs = _RUNS.setdefault(target, {})
    if run is not None:
        runs[rule.key] = run
    else:
        runs.pop(rule.key, None)
    return rule


def remove(key, target: str) -> None:
    """Drop the rule for ``(key, target)`` (no error when there is none)."""
    k = _key(key)
    _RULES.get(target, {}).pop(k, None)
    _RUNS.get(target, {}).pop(k, None)


def rule(key, target: str) -> Override | None:
    """The rule registered for ``(key, target)``, or None."""
    return _RULES.get(target, {}).get(_key(key))


def rules(target: str) -> dict[str, Override]:
    """Every rule registered for ``target``, by key (a copy)."""
    return dict(_RULES.get(target, {}))


def runs(target: str) -> dict:
    """The live key -> run kernel table of ``target`` (what its launches look up)."""
    return _RUNS.setdefault(target, {})


@contextlib.contextmanager
def overriding(key, *, target: str, run=None, prepare: Callable | None = None):
    """Replace the rule for ``(key, target)`` inside the block, then restore the previous one
    (tests: a deliberately broken rule must be caught)."""
    previous = rule(key, target)
    override(key, target=target, run=run, prepare=prepare)
    try:
        yield
    finally:
        if previous is None:
            remove(key, target)
        else:
            override(previous.key, target=target, run=previous.run, prepare=previous.prepare)
