"""The bottom layer: the graph IR (:mod:`.graph`), errors, units, versions.

``from hetero_explore.ir import Graph, Node, Value`` names the IR's classes; everything above
imports from the submodules."""

from .graph import (HOST_DTYPE, Graph, Node, Value, build_graph, nbytes_of, np_to_onnx_dtype,  # noqa: F401
                    onnx_to_np_dtype, shape_is_static, type_str)
