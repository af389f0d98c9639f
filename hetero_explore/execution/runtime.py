"""The single-provider run of a whole graph, as plain arrays.

:func:`run_graph` is :func:`~hetero_explore.execution.executor.execute_reference` (a
one-provider plan through the executor: every kernel built before anything runs, the memory
plan, the inputs and used initializers staged, every buffer freed on success and on failure
alike, leaks checked) returning its outputs, and with ``keep_intermediates`` every node
output, as one dict of numpy arrays. It is what the conformance runner and the kernel tests
call, so what they check is the path users run.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ..ir.errors import KernelError, ProviderUnavailableError, UnsupportedNodeError
from ..ir.graph import Graph
from ..providers import resolve
from .executor import execute_reference
from .inputs import validate_inputs

__all__ = ["run_graph", "validate_inputs"]


def run_graph(graph: Graph, provider, inputs: Mapping[str, np.ndarray], *,
              keep_intermediates: bool = False) -> dict[str, np.ndarray]:
    """Run every node of ``graph`` on ``provider``.

    Args:
        graph: a loaded graph (:func:`hetero_explore.load.loader.load_model`) whose
            shapes are static (bind symbolic dims with ``input_shapes=``).
        provider: an executing provider (``provider.can_execute``) or its name.
        inputs: graph input name → numpy array (exact dtype and shape).
        keep_intermediates: also return every node output (in execution order).

    Returns:
        graph output name → numpy array, in ``graph.outputs`` order, followed by
        the intermediates when asked for.

    Raises:
        InputValidationError: inputs do not match the graph.
        KernelError: the provider cannot run some node (raised before anything runs).
        ProviderUnavailableError: the provider cannot execute on this machine.
        NodeExecutionError: a kernel failed (names the node); ShapeMismatchError
            (a NodeExecutionError) when a buffer differs from the planned shape.
        AllocationLeak: a kernel or the provider kept an allocation.
    """
    provider = resolve(provider)
    ok, why = provider.available()
    if not provider.can_execute or not ok:
        raise ProviderUnavailableError(f"provider {provider.name!r} cannot execute: "
                                       f"{why or 'it only plans'}")
    try:
        run = execute_reference(graph, provider, inputs, keep_intermediates=keep_intermediates)
    except UnsupportedNodeError as e:   # the provider's capability, before anything ran
        raise KernelError(str(e)) from e
    results = dict(run.outputs)
    for name, arr in (run.intermediates or {}).items():
        results.setdefault(name, arr)
    return results
