"""Render an IR graph as an NNEF document plus the tensors it refers to.

One base renderer walks the graph; each target's renderer (``t2n.backends.tract``,
``t2n.backends.khronos``) overrides a few hooks (inputs, header, properties) and gives
its emission context's literal rules. They differ by their emitter tables (the
target's :meth:`~t2n.backends.target.Target.emitter_table`: the ``COMMON`` tables of
``t2n.backends.nnef.emit``, then the target's own ``TRACT``/``KHRONOS`` tables of
``t2n.backends.<target>.emit``, then the user's).
Everything is rendered in memory first: an export that cannot be expressed fails
before a byte is written.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import attrs

from t2n.backends.nnef.context import (
    EmitContext,
    Emitter,
    EmitterSet,
    Raw,
    RenderTarget,
    TensorFile,
    literal,
    nnef_type,
)
from t2n.backends.nnef.emit.quant import graph_quant_text
from t2n.errors import EmissionError, NotExpressibleError, OpProblem
from t2n.ir import DType, Graph, Op, Value
from t2n.ir.dims import is_data_symbol


@attrs.frozen
class RenderedModel:
    """graph.nnef text, optional graph.quant text, and the tensors to write."""

    graph_nnef: str
    graph_quant: str | None
    tensors: tuple[TensorFile, ...]
    registries: tuple[str, ...]
    input_ids: tuple[str, ...]
    output_ids: tuple[str, ...]


class NNEFRenderer:
    """Base renderer. Subclasses override the hooks below and supply a table."""

    flavour = ""
    context_type: type[EmitContext] = EmitContext
    """The emission context, whose literal rules follow the target's engine."""

    def __init__(self, target: RenderTarget, emitters: Mapping[str, Emitter],
                 refusals: Mapping[str, str] | None = None) -> None:
        self.target = target
        self.emitters = dict(emitters)
        self.refusals = dict(refusals or {})
        """IR op → why the target has no form for it (said when a graph holds one)."""

    def supports(self, kind: str) -> bool:
        return kind == "const" or kind in self.emitters

    # -- hooks ---------------------------------------------------------------------
    def check_graph(self, graph: Graph) -> list[OpProblem]:
        return []

    def external(self, ctx: EmitContext, v: Value) -> str:
        shape = literal(list(v.type.shape))
        return f"external<{nnef_type(v.type.dtype)}>(shape = {shape})"

    def header_extensions(self, ctx: EmitContext, graph: Graph) -> list[str]:
        return list(ctx.extensions)

    def preamble_fragments(self, ctx: EmitContext, graph: Graph) -> list[str]:
        return list(ctx.fragments.values())

    def symbols(self, graph: Graph) -> list[str]:
        """Every symbol in the graph's shapes and known values (but the lengths computed
        from tensor data, which the engine names itself: :func:`t2n.ir.dims.data_dim`)."""
        found = frozenset().union(*(v.symbols() for v in graph.values()))
        return sorted(s for s in found if not is_data_symbol(s))

    def written_dtype(self, dtype: DType) -> DType:
        return self.target.bf16_as if dtype is DType.BF16 else dtype

    # -- rendering -----------------------------------------------------------------
    def _emit(self, ctx: EmitContext, op: Op) -> None:
        """Run the emitter of ``op``; whatever it raises becomes an :class:`EmissionError`
        naming the op and its place in the model, with the original as the cause."""
        emitter = self.emitters[op.kind]
        try:
            emitter(ctx, op)
        except EmissionError:
            raise
        except Exception as exc:  # any emitter bug, ours or a user's: typed, with its cause
            name = f"{getattr(emitter, '__module__', '?')}.{getattr(emitter, '__qualname__', '?')}"
            raise EmissionError(
                f"the {self.flavour} emitter {name} failed on IR op '{op.kind}' "
                f"({op.loc}): {type(exc).__name__}: {exc}\n"
                "What to do: if this emitter is your own, fix it (its exception is chained "
                "below); otherwise report it as a t2n bug with this message.",
                op=op.kind, module=op.loc.module, source=op.loc.source,
            ) from exc

    def render(self, graph: Graph) -> RenderedModel:
        self._refuse_inexpressible(graph)
        ctx = self.context_type(self.target, graph)
        ctx.reserve_names(self.symbols(graph))
        input_ids, out_names = self._declare_io(ctx, graph)
        for op in graph.ops():
            if op.kind == "const":
                continue
            ctx.op = op
            self._emit(ctx, op)
        ctx.op = None
        output_ids = self._write_outputs(ctx, graph, out_names, input_ids)
        if ctx.problems:
            raise NotExpressibleError(ctx.problems, str(self.target))
        tensors = tuple(
            attrs.evolve(t, dtype=self.written_dtype(t.dtype)) for t in ctx.tensors
        )
        return RenderedModel(
            self._document(ctx, graph, input_ids, output_ids), graph_quant_text(ctx, graph), tensors,
            tuple(ctx.registries), tuple(input_ids), tuple(output_ids),
        )

    def _refuse_inexpressible(self, graph: Graph) -> None:
        """Every op the target has no form for, listed at once before anything is emitted."""
        problems = [
            OpProblem(op.loc.aten or op.kind, op.loc.module, op.loc.source,
                      f"IR op '{op.kind}' has no {self.flavour} form"
                      + (f": {self.refusals[op.kind]}" if op.kind in self.refusals else ""))
            for op in graph.ops()
            if not self.supports(op.kind)
        ]
        problems += self.check_graph(graph)
        if problems:
            raise NotExpressibleError(problems, str(self.target))

    def _declare_io(self, ctx: EmitContext, graph: Graph) -> tuple[list[str], list[str]]:
        """Reserve the inputs' and outputs' names (those the artifact reports, which
        compile checked; else the values' own) and declare the inputs."""
        in_names = graph.info.input_names or [v.name for v in graph.inputs]
        out_names = list(graph.info.output_names or [v.name for v in graph.outputs])
        input_ids = [ctx.reserve(v, n) for v, n in zip(graph.inputs, in_names)]
        produced_outputs = {
            v for v in graph.outputs if v.producer is not None and v.producer.kind not in ("const",)
        }
        for v, n in zip(graph.outputs, out_names):
            if v in produced_outputs and v not in ctx._ids:
                ctx.reserve(v, n)
        ctx.reserve_names([n for n in out_names if n not in ctx._ids.values()])
        for v in graph.inputs:
            ctx.assign(ctx.id(v), self.external(ctx, v))
        return input_ids, out_names

    def _write_outputs(self, ctx: EmitContext, graph: Graph, out_names: list[str],
                       input_ids: list[str]) -> list[str]:
        """Each output under its reported name (a copy where the value has another name,
        is an input, or is a constant)."""
        output_ids: list[str] = []
        for v, wanted in zip(graph.outputs, out_names):
            data = ctx.const_data(v)
            # A scalar literal has no dtype (tract reads `copy(3)` as a TDim it cannot
            # hand back): constant outputs are written as typed tensors.
            name = ctx.materialize(v, data) if data is not None else ctx.arg(v)
            if name != wanted and wanted not in ctx._ids.values():
                ctx.assign(wanted, ctx.call("copy", Raw(name)))
                name = wanted
            elif name in output_ids or (name in input_ids and name not in graph.info.same_io_names) \
                    or not name.isidentifier():
                name = ctx.emit(v.name, "copy", Raw(name))
            output_ids.append(name)
        return output_ids

    def _document(self, ctx: EmitContext, graph: Graph, input_ids: list[str], output_ids: list[str]) -> str:
        """graph.nnef: version, extensions, fragments, then the graph body."""
        lines = ["version 1.0;"]
        exts = self.header_extensions(ctx, graph)
        if exts:
            lines.append("")
            lines += [f"extension {e};" for e in exts]
        frags = self.preamble_fragments(ctx, graph)
        if frags:
            lines.append("")
            lines += [f + "\n" for f in frags]
        else:
            lines.append("")
        lines.append(f"graph {graph.name}({', '.join(input_ids)}) -> ({', '.join(output_ids)})")
        lines.append("{")
        lines += ctx.lines
        lines.append("}")
        return "\n".join(lines) + "\n"


def common_emitters() -> dict[str, Emitter]:
    """The emitters every NNEF target shares: the ``COMMON`` table of every module of
    ``t2n.backends.nnef.emit``. A target's own tables add to (and replace) them."""
    return dict(_common())


@functools.cache
def _common() -> dict[str, Emitter]:
    return EmitterSet.collected("t2n.backends.nnef.emit", "COMMON")
