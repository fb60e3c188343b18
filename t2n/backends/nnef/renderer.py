"""Render an IR graph as an NNEF document plus the tensors it refers to.

One base renderer walks the graph; tract and Khronos differ by their emitter
tables (the target's :meth:`~t2n.backends.target.Target.emitter_table`: the
``COMMON``/``TRACT``/``KHRONOS`` tables of every module in ``t2n.backends.nnef.emit``,
then the user's), by the emission context's literal rules and by a few hooks
(inputs, header, properties).
Everything is rendered in memory first: an export that cannot be expressed fails
before a byte is written.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Collection, Mapping

import attrs

from t2n.backends.nnef.context import (
    DuplicateEmitterError,
    EmitContext,
    Emitter,
    EmitterTable,
    Raw,
    TensorFile,
    literal,
    nnef_type,
)
from t2n.backends.nnef.emit.quant import graph_quant_text
from t2n.backends.nnef.tract import TractEmitContext
from t2n.backends.nnef.versions import TRACT_ASSERT, symbol_use_problems, target_has
from t2n.backends.target import KhronosNNEF, Target, TractNNEF
from t2n.errors import EmissionError, NotExpressibleError, OpProblem
from t2n.ir import DType, Graph, Op, Value


@attrs.frozen
class RenderedModel:
    """graph.nnef text, optional graph.quant text, and the tensors to write."""

    graph_nnef: str
    graph_quant: str | None
    tensors: tuple[TensorFile, ...]
    registries: tuple[str, ...]
    input_ids: tuple[str, ...]
    output_ids: tuple[str, ...]


def _tables(flavour: str) -> dict[str, Emitter]:
    import t2n.backends.nnef.emit as pkg

    common: dict[str, Emitter] = {}
    special: dict[str, Emitter] = {}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        mod = importlib.import_module(f"{pkg.__name__}.{info.name}")
        for attr, dest in (("COMMON", common), (flavour.upper(), special)):
            table = getattr(mod, attr, None)
            if isinstance(table, EmitterTable):
                for k, fn in table.emitters.items():
                    if k in dest:
                        raise DuplicateEmitterError(f"two {attr} emitters for {k!r} (second in {info.name})")
                    dest[k] = fn
    return {**common, **special}


class NNEFRenderer:
    """Base renderer. Subclasses override the hooks below and supply a table."""

    flavour = ""
    context_type: type[EmitContext] = EmitContext
    """The emission context, whose literal rules follow the target's engine."""

    def __init__(self, target: Target, emitters: Mapping[str, Emitter]) -> None:
        self.target = target
        self.emitters = dict(emitters)

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
        """Every symbol in the graph's shapes and known values."""
        return sorted(frozenset().union(*(v.symbols() for v in graph.values())))

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
                      f"IR op '{op.kind}' has no {self.flavour} form")
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


class TractRenderer(NNEFRenderer):
    flavour = "tract"
    context_type = TractEmitContext
    target: TractNNEF

    _STD_EXTERNAL = {DType.F32: "scalar", DType.I64: "integer", DType.BOOL: "logical"}

    def render(self, graph: Graph) -> RenderedModel:
        rendered = super().render(graph)
        problems = symbol_use_problems(self.target, rendered.graph_nnef, self.symbols(graph))
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


KHRONOS_ANY_TYPE = frozenset(
    ["variable", "const", "identity", "reshape", "transpose", "concat", "slice", "squeeze", "unsqueeze", "tile", "expand", "gather", "cast", "select", "reverse",
     "nnef", "nnef_stateful", "nnef_variable"]
)
"""IR ops whose standard NNEF form is generic over scalar/integer/logical tensors (and the
statements of a document read back, written as they were read)."""

KHRONOS_LOGICAL = frozenset(["and", "or", "not", "xor", "any_reduce", "all_reduce"])
"""IR ops that standard NNEF defines on logical tensors."""


def khronos_type_problems(graph: Graph, emittable: Collection[str] | None = None) -> list[OpProblem]:
    """Standard NNEF computes only on ``scalar`` (real) tensors: integer arithmetic,
    comparisons of integers and the like have no standard form. Ops outside
    ``emittable`` (no Khronos form at all) are left out: they are reported once, as such."""
    problems = []
    for op in graph.ops():
        if op.kind in KHRONOS_ANY_TYPE or (emittable is not None and op.kind not in emittable):
            continue
        operands = op.inputs[1:] if op.kind == "gather" else op.inputs
        if op.kind in KHRONOS_LOGICAL:
            bad = [v for v in operands if v.type.dtype is not DType.BOOL]
        else:
            bad = [v for v in operands if not v.type.dtype.is_float]
        if bad:
            problems.append(OpProblem(
                op.loc.aten or op.kind, op.loc.module, op.loc.source,
                f"'{op.kind}' on {bad[0].type.dtype} tensors: standard NNEF defines it only on "
                f"{'logical' if op.kind in KHRONOS_LOGICAL else 'scalar (real)'} tensors",
            ))
    return problems


class KhronosRenderer(NNEFRenderer):
    flavour = "Khronos NNEF"

    def check_graph(self, graph: Graph) -> list[OpProblem]:
        problems = khronos_type_problems(graph, self.target.emitter_table())
        for v in graph.inputs:
            if not v.type.shape.is_static:
                problems.append(OpProblem(
                    "input", "", "",
                    f"input '{v.name}' has symbolic shape {v.type.shape}; Khronos NNEF has no "
                    "dynamic dimensions (export to TractNNEF, or drop dynamic_axes)",
                ))
        return problems

    def header_extensions(self, ctx: EmitContext, graph: Graph) -> list[str]:
        if ctx.fragments:
            return ["KHR_enable_fragment_definitions", "KHR_enable_operator_expressions"]
        return []


_TABLE_CACHE: dict[str, dict[str, Emitter]] = {}


def emitter_table(flavour: str) -> dict[str, Emitter]:
    if flavour not in _TABLE_CACHE:
        _TABLE_CACHE[flavour] = _tables(flavour)
    return _TABLE_CACHE[flavour]


def tract_renderer(target: TractNNEF) -> TractRenderer:
    return TractRenderer(target, target.emitter_table())


def khronos_renderer(target: KhronosNNEF) -> KhronosRenderer:
    return KhronosRenderer(target, target.emitter_table())
