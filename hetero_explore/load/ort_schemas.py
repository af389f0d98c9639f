"""Schemas of the ops onnxruntime registers in the *default* ONNX domain that onnx itself does
not define, so that models onnxruntime's own tools write load here as they load there.

onnxruntime's transformer optimiser and onnxruntime-genai's model builder write
``SimplifiedLayerNormalization`` (an RMS norm) in the default domain: onnxruntime registers it
there (``onnxruntime/core/graph/contrib_ops/contrib_defs.cc``, since version 1), onnx's checker,
schema lookup and shape inference do not know it. :func:`register` adds onnxruntime's schema of
it -- inputs, outputs, type constraints, attributes and the shape rule (Y is X's shape, of
scale's type; inv_std_var is X's shape with the normalised axes set to 1) -- to onnx's schema
registry of this process, once, before a model is read. An op onnx already defines is never
replaced. (The ``com.microsoft`` ops need no such step: onnx's checker and inference pass over
domains it does not know, and the kernel definitions give their output shapes.)
"""

from __future__ import annotations

import threading

import onnx
import onnx.defs
from onnx import helper

_LOCK = threading.Lock()
_DONE = False

_FLOATS = ["tensor(float)", "tensor(float16)", "tensor(double)", "tensor(bfloat16)"]


def _simplified_layer_norm() -> onnx.defs.OpSchema:
    S = onnx.defs.OpSchema
    opt = S.FormalParameterOption.Optional
    schema = S(
        "SimplifiedLayerNormalization", "", 1,
        doc="onnxruntime's RMS normalisation: Y = X / sqrt(mean(X^2 over the axes from `axis`) + epsilon) "
            "* scale (onnxruntime contrib_defs.cc)",
        inputs=[S.FormalParameter("X", "T"), S.FormalParameter("scale", "V")],
        outputs=[S.FormalParameter("Y", "V"), S.FormalParameter("inv_std_var", "U", param_option=opt)],
        type_constraints=[("T", _FLOATS, "input type"), ("U", ["tensor(float)", "tensor(double)"], "stash type"),
                          ("V", _FLOATS, "output type")],
        attributes=[S.Attribute("axis", helper.make_attribute("axis", -1), "first normalised axis"),
                    S.Attribute("epsilon", helper.make_attribute("epsilon", 1e-5), "added to the mean square"),
                    S.Attribute("stash_type", helper.make_attribute("stash_type", 1), "type of the statistics")])

    def infer(ctx):
        x = ctx.get_input_type(0)
        sc = ctx.get_input_type(1)
        if x is None or not x.HasField("tensor_type"):
            return
        y = onnx.TypeProto()
        y.CopyFrom(x)
        if sc is not None and sc.HasField("tensor_type") and sc.tensor_type.elem_type:
            y.tensor_type.elem_type = sc.tensor_type.elem_type
        ctx.set_output_type(0, y)
        if ctx.get_num_outputs() > 1 and ctx.has_output(1) and x.tensor_type.HasField("shape"):
            inv = onnx.TypeProto()
            inv.CopyFrom(x)
            inv.tensor_type.elem_type = onnx.TensorProto.FLOAT
            dims = inv.tensor_type.shape.dim
            axis = -1
            rank = len(dims)
            attr = ctx.get_attribute("axis")
            if attr is not None:
                axis = attr.i
            axis = axis + rank if axis < 0 else axis
            for d in range(max(axis, 0), rank):
                dims[d].Clear()
                dims[d].dim_value = 1
            ctx.set_output_type(1, inv)

    schema.set_type_and_shape_inference_function(infer)
    return schema


#: the default-domain op types onnxruntime registers and onnx does not define
ORT_DEFAULT_DOMAIN_OPS = ("SimplifiedLayerNormalization",)


def register() -> None:
    """Add onnxruntime's default-domain schemas that onnx lacks (once per process)."""
    global _DONE
    if _DONE:
        return
    with _LOCK:
        if _DONE:
            return
        for make in (_simplified_layer_norm,):
            s = make()
            try:
                onnx.defs.get_schema(s.name, onnx.defs.onnx_opset_version(), s.domain)
                continue   # onnx defines it (a later onnx): keep onnx's
            except onnx.defs.SchemaError:
                pass
            onnx.defs.register_schema(s)
        _DONE = True
