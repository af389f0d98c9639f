"""The kernel registry: every op definition, built explicitly.

:func:`build_registry` returns the op definitions of every kernel module, in a
fixed order; providers derive their op tables from it, so "what does this
provider run?" is one grep over the modules' ``OPS`` lists and one DataFrame.
Nothing is registered as a side effect of an import.
"""

from __future__ import annotations

import functools

from .opdef import ALL, FLOAT, INDEX, MAX_VERSION, NUMERIC, OpDef, dtype_name, schema_version  # noqa: F401

# the kernel modules, in registry order (for an op defined twice, the first definition whose
# check accepts a node runs it: TopK with a constant k in select, with a computed k in dynamic);
# a dotted name is an absolute module outside this package (host-value ops with no numba
# kernels: sequences, optionals, maps, control flow), kept out of the kernel directory so that
# their edits do not change the kernel-source hash (see target.py)
MODULES = ("elementwise", "reduce", "nn", "norm", "data", "movement", "ml", "legacy", "strings",
           "rnn", "quant", "signal", "random", "select", "einsum", "dynamic", "image", "training",
           "attention", "hetero_explore.kernels.host.sequences", "hetero_explore.kernels.host.control", "hetero_explore.kernels.host.image_decoder",
           "hetero_explore.kernels.host.string_moves",
           # onnxruntime's contrib ops (com.microsoft), one module per family
           "hetero_explore.kernels.contrib.norms", "hetero_explore.kernels.contrib.activations",
           "hetero_explore.kernels.contrib.matmul", "hetero_explore.kernels.contrib.attention",
           "hetero_explore.kernels.contrib.qlinear", "hetero_explore.kernels.contrib.rnn",
           "hetero_explore.kernels.contrib.text",
           )


def build_registry() -> tuple[OpDef, ...]:
    """All op definitions of all kernel modules."""
    import importlib
    out = []
    for m in MODULES:
        out.extend(importlib.import_module(m if "." in m else f"{__package__}.{m}").OPS)
    from . import fastpaths
    fastpaths.install()    # the CPU overrides (bitwise the generated kernels' results)
    return tuple(out)


@functools.lru_cache(maxsize=1)
def registry() -> tuple[OpDef, ...]:
    """The registry (built once)."""
    return build_registry()


@functools.lru_cache(maxsize=None)
def _by_op(domain: str, op_type: str) -> tuple[OpDef, ...]:
    return tuple(d for d in registry() if d.op_type == op_type and d.domain == domain)


def find(domain: str, op_type: str, target: str) -> list[OpDef]:
    """The definitions of ``domain::op_type`` with kernels for ``target``."""
    return [d for d in _by_op(domain, op_type) if target in d.targets]
