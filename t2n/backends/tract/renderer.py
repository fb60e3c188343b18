"""The tract renderer: tract's inputs, header (registries, symbols, assertions, extension
lines) and properties, and its emission context, which writes literals as tract reads them."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from t2n.backends.nnef.context import EmitContext, Raw, RenderTarget, literal
from t2n.backends.nnef.renderer import NNEFRenderer, RenderedModel
from t2n.backends.tract.data_sizes import data_size_problems
from t2n.backends.tract.versions import TRACT_ASSERT, symbol_use_problems, target_has, tract_has
from t2n.errors import NotExpressibleError
from t2n.ir import DType, Graph, Value


class TractRenderTarget(RenderTarget, Protocol):
    """What the tract renderer reads of a :class:`~t2n.backends.tract.target.TractNNEF`."""

    @property
    def custom_extensions(self) -> Sequence[str]: ...

    def extra_properties(self) -> Mapping[str, str]: ...


class TractEmitContext(EmitContext):
    """tract parses float literals as f32, reads integer literals as symbolic dims
    (TDim), and does read ``inf``. Before 0.23 it has no ``copy``."""

    def call(self, op: str, *args: Any, **attrs: Any) -> str:
        """``copy(x)`` is written ``x`` (an assignment of the identifier) where the
        target's tract has no ``copy``; a literal is wrapped in an ``add`` of zero so
        that the line still computes a tensor."""
        if op == "copy" and len(args) == 1 and not attrs and not tract_has(self, "copy"):
            text = super().call("copy", *args)[len("copy("):-1]
            if text.isidentifier() or text.endswith(")"):
                return text
            return f"add({text}, 0)" if text.lstrip("-").isdigit() else f"add({text}, 0.0)"
        return super().call(op, *args, **attrs)

    def scalar_operand(self, v: Value, data: np.ndarray) -> str:
        if v.type.dtype.is_float and math.isnan(float(data.item())):
            return self.materialize(v, data)  # NaN has no literal
        if v.type.dtype is DType.F64 and float(np.float32(np.clip(data, -3e38, 3e38))) != float(data.item()):
            # an f32 literal would lose the f64 digits of 0.1
            return self.materialize(v, data)
        if v.type.dtype.is_int:
            # i64 op TDim gives a TDim that cannot be returned: say which integer type it is.
            return self.call("tract_core_cast", Raw(literal(data.item())), to=v.type.dtype.value)
        return literal(data.item())

    def typed_float(self, value: float, dtype: DType) -> Raw | float:
        """Unlike binary ops, ``select`` does not convert an f32 literal to the other
        branch's type: a literal for another float type is cast."""
        to = self.target.bf16_as if dtype is DType.BF16 else dtype
        if to is DType.F32:
            return value
        return Raw(self.call("tract_core_cast", value, to=to.value))


class TractRenderer(NNEFRenderer):
    flavour = "tract"
    context_type = TractEmitContext
    target: TractRenderTarget

    _STD_EXTERNAL = {DType.F32: "scalar", DType.I64: "integer", DType.BOOL: "logical"}

    def render(self, graph: Graph) -> RenderedModel:
        rendered = super().render(graph)
        problems = symbol_use_problems(self.target, rendered.graph_nnef, self.symbols(graph))
        problems += data_size_problems(graph, rendered.graph_nnef)
        if problems:
            raise NotExpressibleError(problems, str(self.target))
        return rendered

    def external(self, ctx: EmitContext, v: Value) -> str:
        shape = literal(list(v.type.shape))
        kind = self._STD_EXTERNAL.get(v.type.dtype)
        if kind is not None:
            return f"external<{kind}>(shape = {shape})"
        dt = self.written_dtype(v.type.dtype)
        return f'tract_core_external(shape = {shape}, datum_type = "{dt.value}")'

    def header_extensions(self, ctx: EmitContext, graph: Graph) -> list[str]:
        ctx.use_registry("tract_core")
        regs = [e for e in ctx.extensions if e.startswith("tract_registry")]
        symbols = self.symbols(graph)
        syms = [f"tract_symbol {s}" for s in symbols]
        custom = [e.strip().rstrip(";") for e in
                  [*self.target.custom_extensions, *graph.info.custom_extensions]]
        # Dynamic axes are never empty unless a custom line bounds the symbol itself
        # (a KV-cache length may be 0): saying so lets tract simplify shape expressions.
        bounded = {s for s in symbols if any(c.replace(" ", "").startswith(f"tract_assert{s}>=")
                                             for c in custom)}
        asserts = ([f"tract_assert {s} >= 1" for s in symbols if s not in bounded]
                   if target_has(self.target, TRACT_ASSERT) else [])
        rest = [e for e in ctx.extensions if not e.startswith("tract_registry")]
        return regs + syms + asserts + rest + custom

    def preamble_fragments(self, ctx: EmitContext, graph: Graph) -> list[str]:
        props = {**self.target.extra_properties(), **graph.info.properties}
        items = ",\n".join(f"        ({literal(k)}, {literal(props[k])})" for k in sorted(props))
        fragment = (
            "fragment tract_core_properties(\n) -> (properties: (string, tensor<scalar>)[])\n{\n"
            f"    properties = [\n{items}\n    ];\n}}"
        )
        return [fragment, *ctx.fragments.values()]
