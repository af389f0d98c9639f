"""The kernel registry: a flat list of op kernels, each written once.

An :class:`OpKernel` says which op (domain, op_type, opset range, dtypes) it
implements, on which targets (``"cpu"``, ``"cuda"``), and how to build a run
function for a node: ``build(ctx, target) -> fn(inputs, outputs)`` where
``inputs``/``outputs`` are the provider's arrays (numpy on the CPU, numba
device arrays on CUDA). Providers derive their op tables from this list, so
"what does this provider run?" is one grep and one DataFrame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

MIN_OPSET = 13
MAX_OPSET = 21

FLOAT = ("float32",)
INDEX = ("int64", "int32")
NUMERIC = ("float32", "int64", "int32")
ALL = ("float32", "int64", "int32", "bool")


@dataclass(frozen=True)
class OpKernel:
    op_type: str
    """ONNX op type."""
    build: Callable
    """``build(ctx, target) -> fn(inputs, outputs)``; raises KernelError on bad attributes."""
    domain: str = ""
    """Operator domain ("" is the default ONNX domain)."""
    since: int = MIN_OPSET
    """First opset version claimed (inclusive)."""
    until: int = MAX_OPSET
    """Last opset version claimed (inclusive)."""
    dtypes: tuple = FLOAT
    """Accepted dtypes of the input at ``dtype_input``."""
    dtype_input: int = 0
    """Which input's dtype is checked against ``dtypes``."""
    targets: tuple = ("cpu", "cuda")
    """Targets this kernel is compiled for."""
    check: Callable | None = None
    """``check(ctx, target) -> None | reason``: extra support conditions (attributes, constants)."""
    may_alias_input: bool = False
    """The kernel may return a view of an input."""
    data_dependent_output: bool = False
    """Output size depends on input data."""
    bitwise_portable: bool = True
    """Honours the kernel contract (bitwise equal across targets)."""
    note: str = ""
    """Free text for the provider's op table."""


REGISTRY: list[OpKernel] = []


def register(op_type: str | tuple, **kw):
    """Decorator: register ``build`` for one or more op types."""
    ops = (op_type,) if isinstance(op_type, str) else tuple(op_type)

    def deco(build):
        for op in ops:
            REGISTRY.append(OpKernel(op, build, **kw))
        return build

    return deco


def find(domain: str, op_type: str, target: str) -> list[OpKernel]:
    return [k for k in REGISTRY if k.op_type == op_type and k.domain == domain and target in k.targets]


def dtype_name(dt) -> str | None:
    return None if dt is None else np.dtype(dt).name
