"""A provider whose capability and kernels come from the kernel registry."""

from __future__ import annotations

from ..ir.errors import KernelError
from ..ir.graph import shape_is_static
from .base import ExecutionProvider, Identity, Kernel, KernelMatch, own_supports
from ..ir.context import KernelContext
from ..kernels import registry as reg
from ..kernels.target import CPU, Target


def _present_out_shapes(ctx: KernelContext) -> list:
    """Shapes of the outputs the node produces (absent optional outputs have no shape)."""
    return [s for s, name in zip(ctx.out_shapes, ctx.node.outputs) if name]


def _ranges(ns) -> str:
    """``(7, 8, 9, 13)`` -> ``"7-9, 13"``."""
    out, start, prev = [], None, None
    for n in ns:
        if start is None:
            start = prev = n
        elif n == prev + 1:
            prev = n
        else:
            out.append(f"{start}-{prev}" if prev != start else f"{start}")
            start = prev = n
    if start is not None:
        out.append(f"{start}-{prev}" if prev != start else f"{start}")
    return ", ".join(out)


class RegistryProvider(ExecutionProvider):
    """Shared capability logic for the Numba providers: ``target`` (a
    :class:`~hetero_explore.kernels.target.Target`) picks the kernels compiled for it out of
    :func:`registry.registry`."""

    target: Target = CPU

    def _kernels_for(self, node, opset):
        cands = reg.find(node.domain, node.op_type, self.target.name)
        if not cands:
            return None, f"no {node.domain + '::' if node.domain else ''}{node.op_type} kernel"
        in_range = [k for k in cands if k.claims(opset)]
        if not in_range:
            v = reg.schema_version(node.domain, node.op_type, opset)
            ranges = ", ".join(_ranges(k.opsets()) for k in cands)
            at = f" (schema version {v})" if v is not None else ""
            return None, (f"{node.op_type} opset {opset}{at} not supported "
                          f"(kernel covers opsets {ranges})")
        return in_range, ""

    def signature_cacheable(self, node) -> bool:
        # the signature holds the opset: only the definitions claiming it matter (an old-opset
        # definition with a check, e.g. Add-1's broadcast attribute, leaves Add-7+ cacheable)
        return all(k.check is None for k in reg.find(node.domain, node.op_type, self.target.name)
                   if k.claims(node.opset))

    def context_cacheable(self, node) -> bool:
        # kernel checks read only the context: op, attributes, shapes, dtypes, constants
        return True

    def capability_key(self):
        """Answers depend only on the class, the target and the kernel registry."""
        if not own_supports(self, RegistryProvider):
            return None
        return ("registry", Identity(type(self)), Identity(self.target), Identity(reg.registry()))

    def supports(self, ctx: KernelContext) -> KernelMatch:
        node, opset, shapes, dtypes = ctx.node, ctx.opset, ctx.in_shapes, ctx.in_dtypes
        kernels, why = self._kernels_for(node, opset)
        if kernels is None:
            return KernelMatch.no(why)
        reasons = []
        for k in kernels:
            dt = dtypes[k.dtype_input] if k.dtype_input < len(dtypes) else None
            name = reg.dtype_name(dt)
            if k.dtype_input < len(dtypes) and name not in k.dtypes:
                if name == "object":   # a string tensor (or a sequence/map): host values
                    reasons.append(f"input {k.dtype_input} is a string tensor (or another host value): only the "
                                   f"CPU provider holds those (this {self.target.name} kernel takes "
                                   f"{', '.join(k.dtypes[:4])}{', ...' if len(k.dtypes) > 4 else ''})")
                    continue
                reasons.append(f"dtype {name} not supported (kernel takes {', '.join(k.dtypes)})")
                continue
            bad = [i for i, s in enumerate(shapes) if s is not None and not shape_is_static(s)]
            if bad or any(not shape_is_static(s) for s in _present_out_shapes(ctx)):
                # Capability is about op, opset and dtypes; symbolic shapes are an
                # execution blocker that the plan reports, not a reason to decline.
                # A check that reads no shapes (``check.shape_free``: the control ops',
                # on their subgraphs) runs now, so the plan and the kernel agree.
                if k.check is not None and getattr(k.check, "shape_free", False):
                    r = k.check(ctx, self.target)
                    if r:
                        reasons.append(r)
                        continue
                return KernelMatch.yes("shapes symbolic: attributes checked when shapes are bound")
            if k.check is not None:
                r = k.check(ctx, self.target)
                if r:
                    reasons.append(r)
                    continue
            return KernelMatch.yes()
        return KernelMatch.no("; ".join(dict.fromkeys(reasons)))

    def get_kernel(self, ctx: KernelContext) -> Kernel:
        node, opset, dtypes = ctx.node, ctx.opset, ctx.in_dtypes
        m = self.supports(ctx)
        if not m.supported:
            raise KernelError(f"{self.name}: cannot build a kernel for node {node.name!r} "
                              f"({node.op_type}, opset {opset}): {m.reason}")
        if any(not shape_is_static(s) for s in _present_out_shapes(ctx) + [x for x in ctx.in_shapes if x is not None]):
            raise KernelError(f"{self.name}: node {node.name!r} ({node.op_type}) has symbolic or unknown "
                              "shapes; bind them with load_model(..., input_shapes=...) to execute")
        kernels, _ = self._kernels_for(node, opset)
        for k in kernels:
            dt = dtypes[k.dtype_input] if k.dtype_input < len(dtypes) else None
            if k.dtype_input < len(dtypes) and reg.dtype_name(dt) not in k.dtypes:
                continue
            if k.check is not None and k.check(ctx, self.target):
                continue
            try:
                fn = k.build(ctx, self.target)
            except KernelError:
                raise
            except Exception as e:  # a builder's own validation failed
                raise KernelError(f"{self.name}: node {node.name!r} ({node.op_type}): {e}") from e
            if getattr(fn, "runs_on_buffers", False):  # a kernel on buffers (control flow): it runs here
                fn.provider = self
                return fn
            return Kernel(ctx, fn, may_alias_input=k.may_alias_input,
                          data_dependent_output=k.data_dependent_output,
                          bitwise_portable=k.bitwise_portable,
                          replayable=self.target.host and getattr(fn, "replayable", False))
        raise KernelError(f"{self.name}: no kernel for {node.op_type}")

    def support_df(self):
        import pandas as pd
        rows = [
            {"domain": k.domain or "ai.onnx", "op_type": k.op_type, "since_opset": k.since,
             "until_opset": k.until, "opsets": _ranges(k.opsets()), "dtypes": ", ".join(k.dtypes),
             "bitwise_portable": k.bitwise_portable, "note": k.note}
            for k in reg.registry() if self.target.name in k.targets
        ]
        df = pd.DataFrame(rows, columns=["domain", "op_type", "since_opset", "until_opset", "opsets",
                                         "dtypes", "bitwise_portable", "note"])
        return df.sort_values(["domain", "op_type", "since_opset"]).reset_index(drop=True)

    def supported_op_types(self) -> set[str]:
        return {k.op_type for k in reg.registry() if self.target.name in k.targets and k.domain == ""}

    def supported_domain_ops(self) -> set[tuple[str, str]]:
        """(domain, op_type) of every op with a kernel for this target, any domain."""
        return {(k.domain, k.op_type) for k in reg.registry() if self.target.name in k.targets}
