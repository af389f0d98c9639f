"""The executor's subgraph service: how a control-flow kernel
(:class:`hetero_explore.kernels.host.control.ControlKernel`) runs its subgraphs.

Each executor gives the control kernels of its plan a :class:`Subgraphs` over its own
providers and policy (``ControlKernel.bind_service``). The kernel asks it for a child graph
specialised to the input types it has (the loader's :func:`~hetero_explore.load.subgraphs.child_graph`),
for an executor of that graph -- planned over the same providers and policy, and built as a
top-level plan's executor, in nested mode (:meth:`HeterogeneousExecutor.run_nested`) -- and for
a ledger over the memory its subgraphs may use. A body therefore runs through the same
executor, memory plan and replay as a top-level plan, and moves values exactly as its plan
says."""

from __future__ import annotations

from ..load.subgraphs import child_graph
from ..planner import plan as make_plan
from ..runner.core import Ledger, RecyclingLedger, held, memory_owners


class Subgraphs:
    """The subgraph service of one executor (see the module docs). ``make_executor`` is the
    executor class, given by the executor that builds this service; ``hold``: the subgraphs'
    executors hold their constants and memory plans across runs, as that executor does (a
    one-shot run leaves nothing allocated behind)."""

    def __init__(self, providers, policy: str, make_executor, hold: bool = True):
        self.providers = tuple(providers)
        self.policy = policy
        self.hold = hold
        self._make_executor = make_executor

    def child_graph(self, parent, sub, types, where: str):
        return child_graph(parent, sub, types, where=where)

    def executor(self, graph, where: str):
        plan = make_plan(graph, self.providers, self.policy)
        with held(memory_owners(self.providers)):   # its constants and arenas outlive the run asking
            return self._make_executor(plan, kind="subgraph", nested=True, where=where, keep_constants=self.hold)

    def ledger(self, home, pool=None):
        owners = memory_owners(list(self.providers) + [home])
        return Ledger(owners) if pool is None else RecyclingLedger(owners, pool)

    def __repr__(self) -> str:
        return f"Subgraphs({[p.name for p in self.providers]}, {self.policy!r})"
