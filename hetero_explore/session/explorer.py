"""The Explorer: the what-if state that the app and the report drive (the CLI and the sweep plan and
check runs with the same functions it calls).

An :class:`Explorer` holds a loaded graph, its providers (in priority order,
each enabled or not, each with a set of denied op types), the plan for the
current configuration, the last run and its diff against a single-provider
reference, and the history of every configuration planned so far::

    ex = explore(model)                  # default providers for this machine
    ex.order(["cpu", "gpu"])             # what if the CPU came first?
    ex.deny("gpu", ["Softmax"])          # what if the GPU had no Softmax?
    ex.plan.summary()                    # re-planned lazily on first use
    ex.execute()                         # seeded random inputs; run + reference + diff
    ex.diff                              # byte identity per output
    ex.compare_plans(-2, -1)             # what moved between the last two plans
    ex.export_html("report.html")
    ex.show()                            # the same state as an ipywidgets app

Configuration methods return the explorer, so they chain; planning happens on
:meth:`Explorer.replan`, or lazily when :attr:`Explorer.plan` is read.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
import weakref
from collections import OrderedDict, deque
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable

import numpy as np

from ..ir import display
from ..ir.errors import ArgumentTypeError, ArgumentValueError, PlanningError, RunCancelled
from ..ir.graph import Graph
from ..planner.plandiff import PlanComparison, compare_plans  # noqa: F401  (re-exported: the Changes view's diff)
from ..providers import ExecutionProvider, MaskedProvider, resolve

#: plans kept per configuration (toggling back and forth re-plans instantly)
PLAN_CACHE_SIZE = 64
#: reference runs kept per distinct inputs
REFERENCE_CACHE_SIZE = 4


# -- default providers ---------------------------------------------------------------
def default_providers() -> list[ExecutionProvider]:
    """The providers :func:`explore` uses when none are given.

    * a CUDA GPU: ``[cuda, cpu]``;
    * ``NUMBA_ENABLE_CUDASIM`` set: ``[cuda (simulated), cpu]``;
    * otherwise a virtual ``gpu`` (the CUDA provider's op table, executing CPU
      kernels on allocations of its own) and ``cpu``, so that a heterogeneous
      plan means something on any laptop.
    """
    from ..providers import cpu, cuda, virtual_gpu
    from ..providers.cuda import cuda_status

    simulated = os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")
    if simulated or cuda_status()[0]:
        return [cuda(), cpu()]
    return [virtual_gpu(), cpu()]


def _inputs_key(inputs: dict) -> str:
    h = hashlib.blake2b(digest_size=16)
    for k in sorted(inputs):
        a = np.ascontiguousarray(inputs[k])
        h.update(k.encode())
        h.update(str(a.dtype).encode())
        h.update(repr(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


class _Memo(MaskedProvider):
    """A provider whose capability answers are remembered per node.

    What-if planning asks every provider about every node again and again while
    only the masks change; the answers of the provider itself do not. Everything
    else (name, device, memory, kernels) is the wrapped provider's."""

    def __init__(self, inner: ExecutionProvider):
        super().__init__(inner)
        self._answers: dict[int, tuple] = {}
        self._token = object()

    def capability_key(self):
        """Its answers are fixed while it lives: the planner keeps them on the graph
        across re-plans (masks on top are applied by op type, without asking)."""
        return ("explorer-memo", self._token)

    def supports(self, ctx):
        node, opset = ctx.node, ctx.opset
        hit = self._answers.get(id(node))
        if hit is not None and hit[0] is node and hit[1] == opset:
            return hit[2]
        m = self.inner.supports(ctx)
        self._answers[id(node)] = (node, opset, m)  # holding the node keeps its id unique
        return m

    def __repr__(self) -> str:
        return repr(self.inner)


# -- history and comparisons ---------------------------------------------------------
@dataclass
class Step:
    """One configuration that was planned, with what came of it."""

    index: int
    """Position in :attr:`Explorer.history`."""
    order: tuple[str, ...]
    """Enabled providers, in priority order."""
    denied: dict
    """Provider name → sorted tuple of denied op types (only non-empty entries)."""
    plan: Any = None
    """The :class:`~hetero_explore.planner.Plan`, or None when planning failed."""
    error: str | None = None
    """Why planning failed (``Type: message``)."""
    run: Any = None
    """The last run of this plan, if executed."""
    diff: Any = None
    """Its comparison with the reference run."""
    error_type: str | None = None
    """Class name of the planning error."""
    seconds: float = 0.0
    """Wall time of planning (0 when the plan came from the cache)."""
    when: float = field(default_factory=time.time)
    """Unix time the step was recorded."""
    exception: Any = field(default=None, repr=False)
    """The planning exception itself (re-raised when the plan is asked for)."""
    policy: str = "priority"
    """Placement policy (see :data:`hetero_explore.planner.POLICIES`)."""
    moved: tuple = ()
    """(provider, node names) moved off a provider whose EP failed to compile them (:meth:`Explorer.move_failed`)."""

    @property
    def label(self) -> str:
        deny = "; ".join(f"{p} denies {', '.join(ops)}" for p, ops in self.denied.items())
        pol = "" if self.policy == "priority" else f" policy {self.policy}"
        return f"#{self.index}: [{', '.join(self.order)}]" + (f" ({deny})" if deny else "") + pol


# -- how the views show it (part of the state: every view and every app on this explorer agree) ----
#: graph levels a view can draw (``interactive``: the in-browser layered view of
#: :mod:`hetero_explore.viz.graphview`, which ``auto`` picks for big models)
LEVELS = ("auto", "node", "partition", "scope", "interactive")


@dataclass(frozen=True)
class TableOptions:
    """How a view's main table is shown: filtered, sorted, one page of it."""

    query: str = ""
    """Rows whose shown text contains this (case-insensitive); '' keeps every row."""
    sort: str = ""
    """Column sorted by ('' keeps the plan's order)."""
    descending: bool = False
    """Sort descending."""
    page: int = 0
    """0-based page (clamped to the pages there are)."""


@dataclass(frozen=True)
class ViewOptions:
    """What the views show of the state: the graph's level, open scopes, search and zoom, and
    each main table's options. Held by the :class:`Explorer` (so a second ``show()``, the
    report and a script see the same), changed with :meth:`Explorer.set_view`."""

    level: str = "auto"
    """Graph level: auto, node, partition, scope or interactive."""
    expand: tuple[str, ...] = ()
    """Scope level: the name scopes drawn open (the others are one box each)."""
    find: str = ""
    """Graph view: the box to find and show."""
    zoom: str = "100%"
    """Graph view: ``fit`` (to the width) or a percentage of the drawn size."""
    draw_big: bool = False
    """Draw the graph even when it has more boxes than the live limit."""
    tables: tuple = ()
    """``(view, TableOptions)`` pairs of the views' main tables."""

    def table(self, view: str) -> TableOptions:
        return dict(self.tables).get(view, TableOptions())


# -- the explorer ----------------------------------------------------------------------
class Explorer:
    """What-if state over one model: providers, their order, enable flags and op
    denials; the current plan, run and diff; and the history of plans.

    Create it with :func:`explore`."""

    def __init__(self, graph: Graph, providers: Iterable, reference=None, seed: int = 0):
        self.graph = graph
        self.seed = seed
        self._base: dict[str, ExecutionProvider] = {}
        self._memo: dict[str, _Memo] = {}
        for p in providers:
            self._add(p)
        if not self._base:
            raise ArgumentValueError("give at least one provider, e.g. ['gpu', 'cpu']")
        self._order: list[str] = list(self._base)
        self._enabled: dict[str, bool] = {n: True for n in self._base}
        self._denied: dict[str, frozenset] = {n: frozenset() for n in self._base}
        self._policy = "priority"
        self._view = ViewOptions()
        self.reference_provider = self._resolve_reference(reference)
        self.history: list[Step] = []
        self._plan_cache: OrderedDict = OrderedDict()
        self._ref_cache: OrderedDict = OrderedDict()
        self._svg_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._current: Step | None = None
        self._inputs: dict | None = None
        self._listeners: list[Callable[[str], None]] = []
        #: guards the state a run in another thread reads at its start and writes at its end
        #: (held only for those moments: re-planning stays possible while a run executes)
        self._lock = threading.RLock()
        #: provider name → {node name: reason}: nodes moved off a provider (see :meth:`move_failed`)
        self._moved: dict[str, dict] = {}
        self.policy_note: str | None = None
        #: ONNX Runtime's device selection policy that chose the provider list (set_policy), or None
        self._device_policy: str | None = None
        """With ``explore(..., policy="PREFER_NPU")`` (an ONNX Runtime device policy): the devices ORT
        saw and what it chose; else None."""
        self.compile_seconds = 0.0
        """Seconds the last :meth:`execute` spent compiling kernels (numba's compile events; 0 when
        every kernel came from the cache). They are inside the run's timings."""
        self.run = None
        """The last :class:`~hetero_explore.execution.executor.RunResult` of the current plan (None until executed)."""
        self.reference_run = None
        """The reference run the last :attr:`diff` compared against."""
        self.diff = None
        """The last comparison DataFrame (one row per output), or None."""
        self.timings = None
        """:class:`~hetero_explore.analysis.timing.Timings` of the last run of the current plan: warm
        median and p90 over N runs, the first run and compile time apart (None until executed)."""
        #: per op type and ONNX Runtime provider, the largest ULP of a node run alone on the same
        #: inputs as on the reference (after a run whose plan has ORT partitions; None otherwise)
        self.op_ulp = None
        #: warm runs :meth:`execute` times after the first (None: analysis.timing.WARM_RUNS; 0: no timing)
        self.warm_runs = None
        #: weak references to the apps showing this explorer (see :meth:`show`)
        self._apps: list = []
        self._apps_finalizer = None
        from ..ir.limits import RunLimits
        self.limits = RunLimits()
        """What :meth:`execute` may do before it is stopped (a :class:`~hetero_explore.ir.limits.RunLimits`:
        loop iterations, seconds); the app's Cancel is added to it per run."""

    # -- providers -------------------------------------------------------------------
    def _add(self, p) -> str:
        prov = resolve(p)
        if prov.name in self._base:
            raise ArgumentValueError(f"two providers are named {prov.name!r}; provider names must be unique")
        self._base[prov.name] = prov
        self._memo[prov.name] = _Memo(prov)
        return prov.name

    def _resolve_reference(self, reference) -> ExecutionProvider:
        if reference is None:
            reference = "cpu"
        if isinstance(reference, str) and reference in self._base:
            from ..providers import unmask
            return unmask(self._base[reference])
        return resolve(reference)

    def _check_name(self, name: str) -> str:
        if isinstance(name, ExecutionProvider):
            name = name.name
        if name not in self._base:
            raise KeyError(f"no provider named {name!r}; providers are: {', '.join(self._order)}")
        return name

    @property
    def provider_names(self) -> list[str]:
        """All providers in priority order, enabled or not."""
        return list(self._order)

    @property
    def providers(self) -> dict[str, ExecutionProvider]:
        """Provider name → provider object (without masks), in priority order."""
        return {n: self._base[n] for n in self._order}

    @property
    def op_types(self) -> list[str]:
        """Op types present in the model, sorted."""
        return sorted(set(self.graph.op_types()))

    def is_enabled(self, name: str) -> bool:
        return self._enabled[self._check_name(name)]

    def denied(self, name: str) -> tuple[str, ...]:
        """Op types denied on provider ``name``, sorted."""
        return tuple(sorted(self._denied[self._check_name(name)]))

    def providers_df(self):
        """One row per provider: priority, device, enabled, denied ops, nodes placed (current plan)."""
        import pandas as pd

        counts = {}
        if self._current is not None and self._current.plan is not None:
            counts = self._current.plan.placement_counts()
        rows = []
        for i, n in enumerate(self._order):
            p = self._base[n]
            ok, why = p.available()
            rows.append({"priority": i, "provider": n, "device": str(p.device), "enabled": self._enabled[n],
                         "denied_ops": ", ".join(sorted(self._denied[n])), "can_execute": bool(ok),
                         "why_not": why, "nodes_placed": counts.get(n, 0)})
        return pd.DataFrame(rows, columns=["priority", "provider", "device", "enabled", "denied_ops",
                                           "can_execute", "why_not", "nodes_placed"])

    def config(self) -> dict:
        """The configuration as plain data: order, enabled flags, denials, reference."""
        return {"order": list(self._order), "enabled": dict(self._enabled),
                "denied": {n: sorted(d) for n, d in self._denied.items() if d},
                "reference": self.reference_provider.name}

    # -- what-if configuration (each returns self) -------------------------------------
    def order(self, names: Iterable[str]) -> "Explorer":
        """Set the priority order. ``names`` may be a prefix: the providers it names go
        first, in that order; the rest keep their relative order after them."""
        if isinstance(names, str):
            names = [names]
        names = [self._check_name(n) for n in names]
        if len(set(names)) != len(names):
            raise ArgumentValueError(f"provider order {names} names a provider twice")
        new = names + [n for n in self._order if n not in names]
        self._order = new
        return self

    def enable(self, name: str) -> "Explorer":
        """Let provider ``name`` take part in planning again."""
        self._enabled[self._check_name(name)] = True
        return self

    def disable(self, name: str) -> "Explorer":
        """Leave provider ``name`` out of planning (what if this machine had no GPU?)."""
        self._enabled[self._check_name(name)] = False
        return self

    def deny(self, provider: str, op_types) -> "Explorer":
        """Pretend ``provider`` does not support ``op_types`` (a name or a list)."""
        name = self._check_name(provider)
        self._denied[name] = self._denied[name] | frozenset(_op_list(op_types))
        return self

    def allow(self, provider: str, op_types=None) -> "Explorer":
        """Undo :meth:`deny` for ``op_types`` (all of them when None)."""
        name = self._check_name(provider)
        if op_types is None:
            self._denied[name] = frozenset()
        else:
            self._denied[name] = self._denied[name] - frozenset(_op_list(op_types))
        return self

    def set_denied(self, provider: str, op_types) -> "Explorer":
        """Replace the denied op types of ``provider``."""
        name = self._check_name(provider)
        self._denied[name] = frozenset(_op_list(op_types))
        return self

    def add_provider(self, provider, position: int | None = None) -> "Explorer":
        """Add a provider (a name or an object, e.g. a ``VirtualProvider``) at ``position``
        in the priority order (default: just before the last one)."""
        name = self._add(provider)
        pos = max(len(self._order) - 1, 0) if position is None else position
        self._order.insert(pos, name)
        self._enabled[name] = True
        self._denied[name] = frozenset()
        return self

    def set_providers(self, providers) -> "Explorer":
        """Switch to another provider list (``"nnapi,cpu"``, ``["ort:openvino", "cpu"]``, or provider
        objects), in that priority order: providers already here keep their enable flag and
        denials, new ones are resolved from the registry (see
        :func:`hetero_explore.session.catalog.provider_entries`), the others are removed. Nothing
        changes when a name does not resolve."""
        if isinstance(providers, str):
            providers = [x.strip() for x in providers.split(",") if x.strip()]
        items = list(providers)
        if not items:
            raise ArgumentValueError("give at least one provider, e.g. 'nnapi,cpu'")
        names, new = [], {}
        for p in items:  # resolve every new one before changing anything
            if isinstance(p, str) and p.strip() in self._base:
                names.append(p.strip())
                continue
            prov = resolve(p)
            names.append(prov.name)
            if prov.name not in self._base:
                new[prov.name] = prov
        if len(set(names)) != len(names):
            raise ArgumentValueError(f"provider list {names} names a provider twice")
        for n in [n for n in self._order if n not in names]:
            self.remove_provider(n)
        for n, prov in new.items():
            self._base[n] = prov
            self._memo[n] = _Memo(prov)
            self._enabled[n] = True
            self._denied[n] = frozenset()
        self._order = list(names)
        self._device_policy = None   # a list of the caller's own, not a device policy's choice
        return self

    def remove_provider(self, name: str) -> "Explorer":
        name = self._check_name(name)
        del self._base[name]
        del self._memo[name]
        self._order.remove(name)
        del self._enabled[name]
        del self._denied[name]
        self._plan_cache.clear()
        return self

    def set_policy(self, name: str) -> "Explorer":
        """What if placement used policy ``name`` (``"priority"``, the default, or
        ``"min-transfer"``)? :meth:`compare_plans` then shows what it moved and saved.

        ``name`` may also be one of ONNX Runtime's device selection policies (``"PREFER_NPU"``,
        ``"PREFER_GPU"`` ...): the EP devices that policy picks for this model here become the
        provider list (as :meth:`set_providers`), placement stays first-fit by priority, and
        :attr:`policy_note` says which devices ORT saw and what it chose."""
        from ..planner.policies import get_policy
        from ..providers.ort import is_device_policy
        if is_device_policy(name):
            from ..providers.ort import graph_digest, policy_choice
            choice = policy_choice(graph_digest(self.graph)[1], name)
            self.set_providers(list(choice.providers))
            self._policy, self._device_policy, self.policy_note = "priority", name, choice.note
            return self
        get_policy(name)
        self._policy, self._device_policy = name, None
        return self

    @property
    def policy(self) -> str:
        """The policy of the current configuration: ONNX Runtime's device policy when one chose the
        providers (:meth:`set_policy`), else the placement policy."""
        return self._device_policy or self._policy

    # -- planning ----------------------------------------------------------------------
    def _key(self) -> tuple:
        key = (tuple((n, tuple(sorted(self._denied[n]))) for n in self._order if self._enabled[n]),
               self._policy)
        moved = tuple(sorted((n, tuple(sorted(d))) for n, d in self._moved.items() if d))
        return key + (moved,) if moved else key

    def _provider_list(self) -> list[ExecutionProvider]:
        out = []
        for n in self._order:
            if not self._enabled[n]:
                continue
            p = self._memo[n]
            p = MaskedProvider(p, deny=self._denied[n]) if self._denied[n] else p
            if self._moved.get(n):
                from ..providers.base import KernelMatch
                moved = dict(self._moved[n])

                def check(ctx, moved=moved):
                    why = moved.get(ctx.node.name) if ctx.graph is self.graph else None
                    return KernelMatch.no(why) if why else KernelMatch.yes()
                p = MaskedProvider(p, check=check)
            out.append(p)
        return out

    def move_failed(self) -> "Explorer":
        """Move every partition of the current plan that its EP failed to compile (its
        ``ep-compile`` blockers, see :func:`hetero_explore.planner.move_failed`) to the next
        provider: the EP declines those nodes with its message from now on, so the rest runs.
        Repeated while re-planning finds new failures (at most 8 times)."""
        for _ in range(8):
            plan = self.plan
            failed = [b for b in plan.execution_blockers if b.kind == "ep-compile"]
            if not failed:
                break
            first = {plan.graph.nodes[part.node_ids[0]].name: part for part in plan.partitions}
            for b in failed:
                part = first.get(b.where)
                if part is not None:
                    d = self._moved.setdefault(part.provider, {})
                    for i in part.node_ids:
                        d[plan.graph.nodes[i].name] = f"moved off: {b.detail}"
        return self

    @property
    def dirty(self) -> bool:
        """True when the configuration changed since the last plan."""
        return self._current is None or self._key() != self._step_key(self._current)

    @staticmethod
    def _step_key(step: Step) -> tuple:
        key = (tuple((n, tuple(step.denied.get(n, ()))) for n in step.order), step.policy)
        return key + (step.moved,) if step.moved else key

    def replan(self):
        """Plan the current configuration (from the cache when it was planned before),
        record it in :attr:`history` and return the plan. Raises the planner's error
        (e.g. :class:`~hetero_explore.ir.errors.UnsupportedNodeError`) when it cannot be
        planned; the failed step is recorded too."""
        with self._lock:
            return self._replan()

    def _replan(self):
        key = self._key()
        if self._current is not None and self._step_key(self._current) == key:
            if self._current.plan is None:
                raise _replay(self._current)
            return self._current.plan
        order = tuple(n for n, _ in key[0])
        denied = {n: d for n, d in key[0] if d}
        step = Step(index=len(self.history), order=order, denied=denied, policy=key[1],
                    moved=key[2] if len(key) > 2 else ())
        t0 = time.perf_counter()
        try:
            if not order:
                raise PlanningError("every provider is disabled; enable at least one provider")
            plan = self._plan_cache.get(key)
            if plan is None:
                from ..planner import plan as make_plan
                plan = make_plan(self.graph, self._provider_list(), policy=key[1])
                self._plan_cache[key] = plan
                while len(self._plan_cache) > PLAN_CACHE_SIZE:
                    self._plan_cache.popitem(last=False)
            else:
                self._plan_cache.move_to_end(key)
            step.plan = plan
        except Exception as e:
            step.error = f"{type(e).__name__}: {e}"
            step.error_type = type(e).__name__
            step.exception = e
        step.seconds = time.perf_counter() - t0
        self.history.append(step)
        self._current = step
        self.run = self.reference_run = self.diff = self.timings = self.op_ulp = None
        self._notify("plan")
        if step.plan is None:
            raise step.exception
        return step.plan

    @property
    def plan(self):
        """The plan of the current configuration (re-planned first when the
        configuration changed). Raises when it cannot be planned."""
        if self.dirty:
            return self.replan()
        if self._current.plan is None:
            raise _replay(self._current)
        return self._current.plan

    @property
    def error(self) -> str | None:
        """Why the current configuration could not be planned (None when it could)."""
        if self.dirty:
            try:
                self.replan()
            except Exception:
                pass
        return self._current.error if self._current is not None else None

    @property
    def current(self) -> Step | None:
        """The history step of the current configuration."""
        return self._current

    def last_good_plan(self):
        """The most recent plan that succeeded (None when none did)."""
        for s in reversed(self.history):
            if s.plan is not None:
                return s.plan
        return None

    def history_df(self):
        """One row per planned configuration."""
        import pandas as pd
        rows = []
        for s in self.history:
            p = s.plan
            byte_ok = None
            if s.diff is not None and "byte_identical" in s.diff:
                byte_ok = bool(s.diff["byte_identical"].all())
            rows.append({"step": s.index, "order": ", ".join(s.order),
                         "denied": "; ".join(f"{k}: {', '.join(v)}" for k, v in s.denied.items()),
                         "partitions": None if p is None else len(p.partitions),
                         "transfers": None if p is None else len(p.transfers),
                         "transfer_bytes": None if p is None else p.transfer_bytes,
                         "executed": s.run is not None, "byte_identical": byte_ok,
                         "result": s.error if p is None else p.summary()})
        return pd.DataFrame(rows, columns=["step", "order", "denied", "partitions", "transfers",
                                           "transfer_bytes", "executed", "byte_identical", "result"])

    def _plan_of(self, x):
        from ..planner import Plan
        if isinstance(x, Plan):
            return x
        if isinstance(x, Step):
            step = x
        elif isinstance(x, (int, np.integer)):
            try:
                step = self.history[int(x)]
            except IndexError:
                raise IndexError(f"history has {len(self.history)} step(s); no step {x}") from None
        else:
            raise ArgumentTypeError(f"expected a Plan, a history Step or a history index, got {type(x).__name__}")
        if step.plan is None:
            raise ArgumentValueError(f"history step {step.index} has no plan ({step.error})")
        return step.plan

    def previous_plan(self):
        """The last successful plan before the current step (None when there is none)."""
        cur = self._current.index if self._current is not None else len(self.history)
        for s in reversed(self.history[:cur]):
            if s.plan is not None and s.plan is not (self._current.plan if self._current else None):
                return s.plan
        return None

    def compare_plans(self, a=None, b=None) -> PlanComparison:
        """What changed from plan ``a`` to ``b`` (Plans, history Steps or history
        indices; negative indices count from the end). Defaults: the previous plan
        and the current one."""
        pb = self.plan if b is None else self._plan_of(b)
        if a is None:
            pa = self.previous_plan()
            if pa is None:
                pa = pb
        else:
            pa = self._plan_of(a)
        return compare_plans(pa, pb)

    # -- execution ---------------------------------------------------------------------
    @property
    def inputs(self) -> dict[str, np.ndarray]:
        """The default inputs: seeded random values of the right dtypes and shapes."""
        if self._inputs is None:
            from ..execution.inputs import random_inputs
            self._inputs = random_inputs(self.graph, self.seed)
        return self._inputs

    def execute(self, inputs: dict | None = None, progress: Callable[[int, int, str], None] | None = None,
                cancel: Callable[[], bool] | None = None, limits=None):
        """Execute the current plan, run the same graph on the reference provider,
        and compare them byte for byte. Returns the run; sets :attr:`run`,
        :attr:`reference_run` and :attr:`diff`.

        ``inputs`` defaults to :attr:`inputs` (seeded random). ``progress(step,
        total, label)`` is called before each stage: planning, each partition
        (``"partition k/n on PROVIDER"``; ``"... compiling kernels"`` while numba
        compiles for it), the reference run, the comparison; ``total`` is the
        number of partitions + 3. ``cancel()`` (e.g. a ``threading.Event``'s
        ``is_set``) is asked before each partition and stage: when it answers
        True the run stops there, frees every buffer and raises
        :class:`~hetero_explore.ir.errors.RunCancelled`; it is also asked at every
        iteration of a Loop or Scan, so that Cancel stops a long loop.
        ``limits``: a :class:`~hetero_explore.ir.limits.RunLimits` (default
        :attr:`limits`): a Loop over its budget of iterations or a run over its seconds
        stops with :class:`~hetero_explore.ir.errors.RunBudgetExceeded` naming the node.

        The run keeps the plan it started with: it may run in another thread while
        the configuration changes and is re-planned; its result is then recorded on
        its own :attr:`history` step and :attr:`run`/:attr:`diff` stay those of
        the current plan (None). Fails closed (``HeterogeneousExecutionUnsupported``)
        when the plan has execution blockers."""
        from ..analysis.check import run_and_compare
        from ..execution.executor import HeterogeneousExecutor
        from ..planner import guard_heterogeneous_fallback

        with self._lock:  # the snapshot this run keeps, whatever is re-planned meanwhile
            plan = self.plan
            step = self._current
            feeds = self.inputs if inputs is None else dict(inputs)
        n = len(plan.partitions)
        total = n + 3
        watch = _RunWatch(progress, cancel, total)
        limits = self.limits if limits is None else limits
        if cancel is not None:   # loops ask it at every iteration too
            import dataclasses
            limits = dataclasses.replace(limits, cancel=cancel)
        watch.tick(0, "planning")
        guard_heterogeneous_fallback(plan)
        source = (f"seeded random inputs (hetero_explore.random_inputs, seed {self.seed})"
                  if inputs is None else "given by the caller (Explorer.execute(inputs=...))")
        with watch.compiles():
            runner = HeterogeneousExecutor(plan, keep_constants=False)  # builds every kernel first
            runner.parts = [_WatchedPart(r, k, n, plan.partitions[k].provider, watch)
                            for k, r in enumerate(runner.parts)]
            stages = {"reference": (n + 1, f"running the reference ({self.reference_provider.name})"),
                      "compare": (n + 2, "comparing, then timing warm runs")}
            try:
                checked = run_and_compare(plan, feeds, executor=runner, reference_run=self._reference_run,
                                          on_stage=lambda s, _run: watch.tick(*stages[s]) if s in stages else None,
                                          limits=limits)
            finally:  # the run result keeps its executor (for rerun): without our hooks
                runner.parts = [getattr(r, "inner", r) for r in runner.parts]
        run, ref, diff = checked.run, checked.reference, checked.diff
        from ..analysis.timing import WARM_RUNS, measure
        timings = None if self.warm_runs == 0 else measure(
            plan, feeds, first_run=run, cancel=cancel, n=WARM_RUNS if self.warm_runs is None else self.warm_runs,
            limits=limits)
        op_ulp = _op_ulp(plan, run, ref)
        with self._lock:
            step.run, step.diff = run, diff
            self.compile_seconds = watch.compile_seconds
            if self._current is step:  # not re-planned meanwhile
                self.run, self.reference_run, self.diff = run, ref, diff
                self.timings = timings
                self.op_ulp = op_ulp
                self._inputs_source = source
        watch.tick(total, "done", check=False)
        self._notify("run")
        return run

    def _reference_run(self, feeds: dict):
        """The reference run on ``feeds``: from the cache of the last few, else run now."""
        from ..execution.executor import HeterogeneousExecutor
        from ..planner import plan as make_plan
        key = _inputs_key(feeds)
        with self._lock:
            ref = self._ref_cache.get(key)
            if ref is None:  # planned under the lock: the planner keeps answers on the graph
                rplan = make_plan(self.graph, [self.reference_provider], strict=True)
        if ref is None:
            ref = HeterogeneousExecutor(rplan, kind="reference", keep_constants=False).run(feeds)
            with self._lock:
                self._ref_cache[key] = ref
                while len(self._ref_cache) > REFERENCE_CACHE_SIZE:
                    self._ref_cache.popitem(last=False)
        return ref

    @property
    def byte_identical(self) -> bool | None:
        """Whether every output of the last run equals the reference byte for byte."""
        if self.diff is None:
            return None
        return bool(self.diff["byte_identical"].all())

    # -- views -------------------------------------------------------------------------
    def svg(self, plan=None, level: str = "auto", expand=()) -> str:
        """The plan's Graphviz picture as SVG text (cached per plan, level and, at the scope
        level, the scopes drawn open)."""
        plan = self.plan if plan is None else plan
        per = self._svg_cache.get(plan)
        if per is None:
            per = {}
            self._svg_cache[plan] = per
        if level == "scope":
            key = ("scope", tuple(sorted(expand)))
            if key not in per:
                per[key] = plan.to_graphviz(level="scope", expand=expand).svg()
            return per[key]
        if level not in per:
            g = plan.to_graphviz(level=level)
            per[level] = g.svg()  # dot within its time budget, else the linear layout
            drawn = getattr(g, "level", None)  # "auto" resolved: the same picture
            if isinstance(drawn, str) and drawn != level:
                per.setdefault(drawn, per[level])
        return per[level]

    def svg_cached(self, plan, level: str = "auto", expand=()) -> str | None:
        """The SVG of ``plan`` at ``level`` when it was drawn before, else None."""
        key = ("scope", tuple(sorted(expand))) if level == "scope" else level
        return self._svg_cache.get(plan, {}).get(key)

    def export_html(self, path) -> str:
        """Write the self-contained HTML report of the current plan (with the last run
        and diff when the plan was executed). Returns the path written."""
        plan = self.plan
        prov = {"command": "hetero_explore: explore(...).export_html(...) from Python",
                "reference": self.reference_provider.name,
                "inputs": getattr(self, "_inputs_source", None)}
        v = self._view  # the views' options are the explorer's: the report draws what the app shows
        plan.to_html(path, run=self.run, diff=self.diff, provenance=prov, level=v.level, expand=v.expand,
                     previous=self.previous_plan(), timings=self.timings, op_ulp=self.op_ulp)
        return os.fspath(path)

    def show(self, keep_previous: bool = False):
        """The ipywidgets app over this explorer.

        A new ``show()`` closes the apps shown before (ipywidgets holds every widget, with its
        layout and style, until it is closed: re-running a cell that shows the app would keep
        them all); ``keep_previous=True`` keeps them live, side by side, all following this
        explorer. An app holds its explorer weakly: once nothing else refers to the explorer,
        it is garbage-collected and its apps are closed (the last :data:`KEEP_SHOWN` explorers
        shown are kept alive meanwhile, so that ``explore(model).show()`` works)."""
        if not keep_previous:
            for ref in list(self._apps):
                app = ref()
                if app is not None:
                    app.close()
            self._apps.clear()
        app = display.render("app", self)
        self._apps.append(weakref.ref(app))
        if self._apps_finalizer is None:
            self._apps_finalizer = weakref.finalize(self, _close_apps, self._apps)
        if self in _SHOWN:
            _SHOWN.remove(self)
        _SHOWN.append(self)
        return app

    # -- view options (what the views show; not part of a plan) -------------------------
    @property
    def view_options(self) -> ViewOptions:
        """The views' options: graph level, open scopes, find, zoom, table options."""
        return self._view

    def set_view(self, **changes) -> "Explorer":
        """Change the views' options (``level=``, ``expand=``, ``find=``, ``zoom=``,
        ``draw_big=``; see :class:`ViewOptions`); observers hear ``"view"`` when anything changed."""
        unknown = set(changes) - {"level", "expand", "find", "zoom", "draw_big"}
        if unknown:
            raise ArgumentValueError(f"no view option {sorted(unknown)}; options are level, expand, find, "
                                     "zoom, draw_big (tables: set_table)")
        if "level" in changes and changes["level"] not in LEVELS:
            raise ArgumentValueError(f"level {changes['level']!r}: levels are {', '.join(LEVELS)}")
        if "zoom" in changes:
            z = str(changes["zoom"])
            try:
                ok = z == "fit" or (z.endswith("%") and float(z[:-1]) > 0)
            except ValueError:
                ok = False
            if not ok:
                raise ArgumentValueError(f"zoom {z!r}: 'fit' or a percentage such as '50%'")
            changes["zoom"] = z
        if "expand" in changes:
            changes["expand"] = tuple(str(x) for x in changes["expand"])
        if "find" in changes:
            changes["find"] = str(changes["find"])
        if "draw_big" in changes:
            changes["draw_big"] = bool(changes["draw_big"])
        return self._set_view(replace(self._view, **changes))

    def set_table(self, view: str, **changes) -> "Explorer":
        """Change the options of ``view``'s main table (``query=``, ``sort=``, ``descending=``,
        ``page=``; see :class:`TableOptions`)."""
        o = replace(self._view.table(view), **changes)
        tables = dict(self._view.tables)
        tables[view] = o
        return self._set_view(replace(self._view, tables=tuple(tables.items())))

    def _set_view(self, new: ViewOptions) -> "Explorer":
        if new != self._view:
            self._view = new
            self._notify("view")
        return self

    # -- listeners (the widget follows scripted changes) ------------------------------
    def observe(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(event)`` after every re-plan (``"plan"``), run (``"run"``) and change of
        the view options (``"view"``). A plain list of callbacks rather than traitlets on the
        explorer: the explorer stays free of the widget stack (the CLI and scripts import it
        without ipywidgets), and its configuration methods (``order()``, ``denied()``) would
        clash with trait names."""
        self._listeners.append(callback)

    def unobserve(self, callback) -> None:
        if callback in self._listeners:
            self._listeners.remove(callback)

    def _notify(self, event: str) -> None:
        for cb in list(self._listeners):
            try:
                cb(event)
            except Exception:  # a view must never break the model
                pass

    def __repr__(self) -> str:
        state = "not planned" if self._current is None else (self._current.error or
                                                            self._current.plan.summary())
        return f"Explorer({self.graph.name!r}, providers={self._order}, {state})"

    def _repr_html_(self) -> str:
        return display.render("html", self)


#: how many of the explorers shown last are kept alive while only their apps refer to them (an
#: app holds its explorer weakly, so that an explorer the notebook dropped frees its widgets)
KEEP_SHOWN = 4
_SHOWN: deque = deque(maxlen=KEEP_SHOWN)


def _close_apps(refs: list) -> None:
    """Close the apps still open of an explorer being garbage-collected."""
    for ref in list(refs):
        app = ref()
        if app is not None:
            try:
                app.close()
            except Exception:  # pragma: no cover - a finalizer must not raise
                pass
    refs.clear()


class _RunWatch:
    """Progress, cancellation and compile accounting of one :meth:`Explorer.execute`."""

    def __init__(self, progress, cancel, total: int):
        self.progress, self.cancel, self.total = progress, cancel, total
        self.step, self.label = 0, ""
        self.compile_seconds = 0.0
        self.compiling = 0
        self.thread = threading.get_ident()

    def tick(self, step: int, label: str, check: bool = True) -> None:
        if check and self.cancel is not None and self.cancel():
            where = f" after {self.label}," if self.label else ""
            raise RunCancelled(f"the run was cancelled{where} before {label}; nothing ran after that "
                               "point and every buffer it held was freed")
        self.step, self.label = step, label
        if self.progress is not None:
            self.progress(step, self.total, label)

    def compiles(self):
        """A context in which numba's compile events of this thread are counted and shown."""
        import contextlib
        import sys
        if "numba" not in sys.modules:
            return contextlib.nullcontext()
        from numba.core import event as nev
        watch = self

        class _Listener(nev.Listener):
            def on_start(self, event):
                if threading.get_ident() != watch.thread:
                    return
                watch.compiling += 1
                if watch.compiling == 1:  # outermost compile: nested ones are inside its time
                    watch._t0 = time.perf_counter()
                    if watch.progress is not None and "compiling" not in watch.label:
                        watch.label = f"{watch.label}: compiling kernels"
                        watch.progress(watch.step, watch.total, watch.label)

            def on_end(self, event):
                if threading.get_ident() != watch.thread:
                    return
                watch.compiling -= 1
                if watch.compiling == 0:
                    watch.compile_seconds += time.perf_counter() - watch._t0

        return nev.install_listener("numba:compile", _Listener())


class _WatchedPart:
    """A partition's runner that reports progress and honours cancellation before it runs."""

    def __init__(self, inner, k: int, n: int, provider: str, watch: _RunWatch):
        self.inner, self.k, self.n, self.pname, self.watch = inner, k, n, provider, watch

    def run(self, *args, **kwargs):
        self.watch.tick(self.k + 1, f"partition {self.k + 1}/{self.n} on {self.pname}")
        return self.inner.run(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


#: runs with more nodes on ONNX Runtime providers than this get no per-op ULP table (each node is
#: run alone, on its provider and on the reference)
OP_ULP_MAX_NODES = 2000


def _op_ulp(plan, run, ref):
    """The per-op ULP table of a run whose plan has ONNX Runtime partitions (see
    :func:`hetero_explore.analysis.divergence.op_ulp_table`), else None."""
    from ..analysis.divergence import is_measured, op_ulp_df, op_ulp_table
    measured = sum(1 for i in plan.assignment if is_measured(plan.providers[int(i)]))
    if not measured or measured > OP_ULP_MAX_NODES:
        return None
    return op_ulp_table(op_ulp_df(run, ref))


def _replay(step: Step) -> Exception:
    return step.exception or PlanningError(step.error or "planning failed")


def _op_list(op_types) -> list[str]:
    if isinstance(op_types, str):
        return [op_types]
    out = list(op_types)
    for o in out:
        if not isinstance(o, str):
            raise ArgumentTypeError(f"op types are strings such as 'Softmax', got {o!r}")
    return out


def explore(model, providers=None, input_shapes=None, reference=None, *, dim_values=None,
            seed: int = 0, optimize: bool = True, fold_constants: bool = True,
            policy: str | None = None) -> Explorer:
    """An :class:`Explorer` over ``model`` (a path, ModelProto, bytes or loaded Graph).

    Args:
        providers: priority-ordered providers or names; default
            :func:`default_providers` (a GPU, the CUDA simulator, or a virtual
            ``gpu``, then ``cpu``).
        input_shapes: graph input name → shape, to bind symbolic dims.
        reference: the single provider outputs are compared against (default ``cpu``).
        dim_values: symbolic dim name → value.
        seed: seed of the default random inputs.
        optimize: apply the load-time graph rewrites (:mod:`hetero_explore.load.optimize`); the
            reference and the heterogeneous runs both execute the optimised graph.
        fold_constants: fold the nodes whose inputs are all constant while loading
            (``False``: keep them, as ``--no-fold`` does; see :func:`hetero_explore.load_model`).
        policy: a placement policy (``"priority"``, ``"min-transfer"``: see
            :meth:`Explorer.set_policy`), or one of ONNX Runtime's device selection policies
            (``"PREFER_NPU"``, ``"PREFER_GPU"``, ``"PREFER_CPU"``, ``"MAX_PERFORMANCE"``, ...; upper
            case, as ORT names them, optionally ``"ort:PREFER_NPU"``): the EP devices ORT's policy
            picks for this model here become the provider list, in ORT's order, and
            :attr:`Explorer.policy_note` says which devices it saw and what it chose. The two
            kinds of names never overlap; an ORT policy cannot be combined with ``providers``.
    """
    if isinstance(model, Graph):
        if optimize is not True or fold_constants is not True:
            raise ArgumentValueError("optimize and fold_constants are loading options; pass the model, not an "
                                     "already loaded Graph (or load it with load_model(..., optimize=False, "
                                     "fold_constants=False))")
        if input_shapes or dim_values:
            raise ArgumentValueError("input_shapes/dim_values bind a model while loading it; pass the model, "
                             "not an already loaded Graph")
        graph = model
    else:
        from ..load.loader import load_model
        graph = load_model(model, input_shapes=input_shapes, dim_values=dim_values, optimize=optimize,
                           fold_constants=fold_constants)
    note = None
    from ..providers.ort import is_device_policy
    if policy is not None and is_device_policy(policy):
        if providers is not None:
            raise ArgumentValueError(f"policy={policy!r} is ONNX Runtime's device selection policy: it chooses the "
                                     "providers itself; give either providers or an ORT policy, not both")
        from ..providers.ort import graph_digest, policy_choice
        choice = policy_choice(graph_digest(graph)[1], policy)
        providers, note = list(choice.providers), choice.note
    provs = default_providers() if providers is None else providers
    if isinstance(provs, (str, ExecutionProvider)):
        provs = [provs]
    ex = Explorer(graph, provs, reference=reference, seed=seed)
    ex.policy_note = note
    if policy is not None and note is None:
        ex.set_policy(policy)
    elif note is not None:
        ex._device_policy = policy
    return ex
