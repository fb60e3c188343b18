"""The export frontend's driver: the FX graph of a core-ATen ExportedProgram → IR.

Placeholders follow the program's ``graph_signature``: parameters, buffers and lifted
tensor constants become IR variables under their state-dict names (the names the jit
frontend gives the same tensors), user inputs become graph inputs. Each
``call_function`` node is lowered by the registry's rule for ``aten::<name>`` through
:class:`~t2n.frontend.export.context.FxLoweringContext`; ``operator.getitem`` picks an
output of a multi-output op; size arithmetic (``aten.sym_size``, ``operator.*``) runs
in Python on ints, or through the rules on run-time sizes. Every op without a rule is
reported at once, before anything is lowered, in the jit frontend's
``UnsupportedOpsError``.

Buffers and inputs the program writes (``BUFFER_MUTATION``, ``USER_INPUT_MUTATION``
outputs) are not outputs of the artifact: it computes the call as PyTorch ran it, from
the values before the call, and the user outputs read the written values where the
model read them (as the jit frontend does).
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

import torch
import torch.fx
from torch.export.graph_signature import InputKind, OutputKind, TensorArgument

from t2n.errors import ExportFrontendError, LoweringError, OpProblem
from t2n.frontend.complex_tensors import COMPLEX_OUTPUT, Complex, holds_complex
from t2n.frontend.context import Poison, UnsupportedHere, array_data
from t2n.frontend.dtypes import to_ir
from t2n.frontend.export.context import FxLoweringContext, fx_module_path, fx_source
from t2n.frontend.export.kept_ops import kind_of
from t2n.frontend.export.program import ExportedModel
from t2n.frontend.export.symbolic import (
    PYTHON_OP_RULES,
    PYTHON_OPS,
    RUNTIME_CHECKS,
    SIZE_ALIASES,
    SymbolNames,
    dim_of,
    program_symbols,
)
from t2n.frontend.lower import name_outputs
from t2n.frontend.lowering.complex import complex_problem, complex_rule
from t2n.frontend.registry import LoweringRegistry
from t2n.frontend.sampling import ops_error
from t2n.ir import Builder, DType, Graph, OpSet, Sym, TensorType, Value

log = logging.getLogger("t2n.frontend")

_STATE_KINDS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)


class ProgramLowering:
    """State of one lowering: the IR graph being built and FX node → lowered value."""

    def __init__(self, exported: ExportedModel, registry: LoweringRegistry, input_names: Sequence[str],
                 output_names: Sequence[str], *, op_set: OpSet | None = None,
                 symbols: SymbolNames | None = None, assertions: Sequence[str] = (),
                 native_ops: frozenset[str] = frozenset(), sampling: str = "refuse") -> None:
        self.exported = exported
        self.native_ops = native_ops
        """IR ops the target runs natively (rules read it as with jit)."""
        self.program = exported.program
        self.registry = registry
        self.graph = Graph("main", op_set)
        self.env: dict[torch.fx.Node, Any] = {}
        self.pending: dict[torch.fx.Node, tuple[str, torch.Tensor]] = {}
        self.problems: list[OpProblem] = []
        self.input_names = list(input_names)
        self.output_names = list(output_names)
        self.symbols: SymbolNames = dict(symbols or {})
        self.assertions = list(assertions)
        self.static_sizes = not self.symbols
        """Without symbols every size is an int: size arithmetic runs in Python."""
        self.module_writes: dict[tuple[int, str], Any] = {}
        self.noise_inputs: dict[Any, Value] | None = {} if sampling == "inputs" else None

    # -- checks before lowering ----------------------------------------------------------
    def problem(self, node: torch.fx.Node, kind: str, reason: str) -> None:
        self.problems.append(OpProblem(kind, fx_module_path(node), fx_source(node), reason))

    def precheck(self) -> None:
        for node in self.program.graph.nodes:
            if node.op != "call_function" or node.target in PYTHON_OPS or node.target is operator.getitem:
                continue
            kind = kind_of(node.target)
            if kind in RUNTIME_CHECKS:
                continue
            if not isinstance(node.target, torch._ops.OpOverload):
                self.problem(node, kind, _not_an_aten_op(node))
            elif SIZE_ALIASES.get(kind, kind) not in self.registry:
                self.problem(node, kind, "no lowering rule")

    # -- the run -------------------------------------------------------------------------
    def run(self) -> Graph:
        self.precheck()
        if self.problems:
            raise ops_error(self.problems)
        self.bind_placeholders()
        for node in self.program.graph.nodes:
            if node.op == "call_function":
                self.lower_node(node)
            elif node.op == "output":
                outs = self.user_outputs(node)
        if self.problems:
            raise ops_error(self.problems)
        self.graph.set_outputs(name_outputs(self.graph, outs, self.output_names))
        if self.assertions:
            self.graph.info.custom_extensions += [*self.assertions]
        return self.graph

    def bind_placeholders(self) -> None:
        placeholders = [n for n in self.program.graph.nodes if n.op == "placeholder"]
        specs = self.program.graph_signature.input_specs
        if len(placeholders) != len(specs):
            raise LoweringError(f"the program has {len(placeholders)} placeholders for {len(specs)} input specs")
        users = iter(zip(self.exported.example_inputs, self.input_names))
        for node, spec in zip(placeholders, specs):
            if spec.kind in _STATE_KINDS:
                assert spec.target is not None
                self.pending[node] = (spec.target, self.state_tensor(spec.target))
            elif spec.kind == InputKind.USER_INPUT and isinstance(spec.arg, TensorArgument):
                example, name = next(users)
                shape = [dim_of(d, self.symbols) for d in node.meta["val"].shape]
                self.env[node] = self.graph.add_input(TensorType(to_ir(example.dtype), shape), name)
            elif spec.kind == InputKind.USER_INPUT:
                self.env[node] = getattr(spec.arg, "value", None)
            else:
                self.problems.append(OpProblem(f"input {spec.arg.name}", "", "",
                                               f"program inputs of kind {spec.kind.name} are not supported"))
        self.bind_noise(users)

    def bind_noise(self, left: Iterator[tuple[torch.Tensor, str]]) -> None:
        """``compile(sampling="inputs")``: a graph input for each random draw, after the
        model's inputs, sized as torch.export sized the draw (so it follows dynamic sizes)."""
        nodes = {n.name: n for n in self.program.graph.nodes}
        for draw, (_, name) in zip(self.exported.noise, left):
            assert self.noise_inputs is not None
            val = nodes[draw.key].meta["val"]
            try:
                shape = [dim_of(d, self.symbols) for d in val.shape]
            except ExportFrontendError:
                continue  # sized from tensor data: the draw's rule refuses it
            self.noise_inputs[draw.key] = self.graph.add_input(TensorType(to_ir(val.dtype), shape), name)

    def state_tensor(self, target: str) -> torch.Tensor:
        t = self.program.state_dict.get(target)
        if t is None:
            t = self.program.constants.get(target)
        if not isinstance(t, torch.Tensor):
            raise LoweringError(f"the program has no tensor for its state {target!r}")
        return t

    def variable(self, node: torch.fx.Node) -> Value | Complex:
        """The IR variable of a parameter or buffer (made on first use). A lifted tensor
        constant is a constant of the graph, as the jit frontend makes it (folded with
        what it meets), unless it is one of the model's own tensors."""
        target, t = self.pending.pop(node)
        name = self.exported.tensor_names.get(id(t))
        complex_ = t.is_complex()  # a rotary table of torch.polar: its (real, imaginary) pair
        pair = torch.view_as_real(t.detach().resolve_conj()) if complex_ else t
        if name is None and target in self.program.constants:
            const = Builder(self.graph).op("const", name="c", data=array_data(pair.detach().clone()))
            self.env[node] = Complex(const) if complex_ else const
            return self.env[node]
        name = name or target
        data = self.exported.weights.get(name)
        if data is None:
            start = self.exported.start_values.get(target)
            data = array_data(pair if start is None or complex_ else start, name)
            if start is None:
                self.exported.state_read[name] = t
        value = Builder(self.graph).variable(data, name)
        self.env[node] = Complex(value) if complex_ else value
        return self.env[node]

    # -- arguments -----------------------------------------------------------------------
    def value_of(self, x: Any) -> Any:
        """An FX argument as lowered: nodes → their values, lists element-wise."""
        if isinstance(x, torch.fx.Node):
            if x in self.pending:
                return self.variable(x)
            return self.env[x]
        if isinstance(x, (list, tuple)):
            return type(x)(self.value_of(v) for v in x)
        if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return self.size_value(dim_of(x, self.symbols))
        return x

    def size_value(self, size: Any) -> Any:
        """A dynamic size as the rules see one: a 0-d i64 value that knows its expression
        (as the jit frontend's size arithmetic folds to); static sizes stay Python ints."""
        return Builder(self.graph).const(size, DType.I64) if isinstance(size, Sym) else size

    def schema_args(self, node: torch.fx.Node, schema: torch.FunctionSchema | None) -> list[Any]:
        """Every argument of ``schema`` in order: positional, by keyword, or its default."""
        if schema is None:
            return [self.value_of(a) for a in node.args]
        out: list[Any] = []
        for i, arg in enumerate(schema.arguments):
            if i < len(node.args) and not arg.kwarg_only:
                out.append(self.value_of(node.args[i]))
            elif arg.name in node.kwargs:
                out.append(self.value_of(node.kwargs[arg.name]))
            elif arg.has_default_value():
                out.append(arg.default_value)
            else:
                raise LoweringError(f"{schema.name}: argument {arg.name!r} is missing")
        return out

    # -- nodes ---------------------------------------------------------------------------
    def lower_node(self, node: torch.fx.Node) -> None:
        target = node.target
        if target is operator.getitem:
            base = self.value_of(node.args[0])
            self.env[node] = base if isinstance(base, Poison) else base[node.args[1]]
            return
        if target in PYTHON_OPS and self.fold_python(node):
            return
        kind = PYTHON_OP_RULES.get(target) or kind_of(target)
        if kind in RUNTIME_CHECKS:
            self.env[node] = None
            return
        info = self.registry.get(SIZE_ALIASES.get(kind, kind))
        if info is None:
            self.problem(node, kind, "no lowering rule")
            self.env[node] = Poison()
            return
        ctx = self._context(node, kind)
        if ctx is None or self._poisoned(node, kind, ctx):
            return
        if holds_complex(ctx._inputs):  # complex tensors (Fourier transforms): their own rules
            info = self._complex_rule(node, kind)
            if info is None:
                return
        ops = self.graph.info.aten_ops
        ops[kind] = ops.get(kind, 0) + 1
        try:
            self.env[node] = result = info.fn(ctx)
            if isinstance(result, Value):  # the ``raw`` naming scheme writes the program's names
                self.graph.info.traced_names.setdefault(result, node.name)
        except UnsupportedHere as exc:
            self.problem(node, kind, str(exc))
            self.env[node] = Poison()
        except Exception as exc:
            raise LoweringError(f"lowering {kind} {ctx.loc} failed: {type(exc).__name__}: {exc}") from exc

    def _context(self, node: torch.fx.Node, kind: str) -> FxLoweringContext | None:
        """The node's lowering context, its inputs lowered; None (the node poisoned, the
        problem noted) when an input has no form here (a complex constant's dtype)."""
        try:
            return FxLoweringContext(self, node, kind, getattr(node.target, "_schema", None))
        except KeyError as exc:  # an input whose producer failed was not recorded
            raise LoweringError(f"{kind}: an input was never lowered ({exc})") from exc
        except UnsupportedHere as exc:
            self.problem(node, kind, str(exc))
            self.env[node] = Poison()
            return None

    def _poisoned(self, node: torch.fx.Node, kind: str, ctx: FxLoweringContext) -> bool:
        """Whether an input's producer failed: the node is poisoned too, the reasons noted."""
        failed = [a for a in _flat(ctx._inputs) if isinstance(a, Poison)]
        if not failed:
            return False
        for a in failed:
            if a.reason:
                self.problem(node, kind, a.reason)
        self.env[node] = Poison()
        return True

    def _complex_rule(self, node: torch.fx.Node, kind: str) -> Any:
        """The rule of ``kind`` on complex tensors, or None (the node poisoned, the problem
        noted) where there is none."""
        found = complex_rule(kind)
        if found is None:
            self.problem(node, kind, complex_problem(kind))
            self.env[node] = Poison()
        return found

    def fold_python(self, node: torch.fx.Node) -> bool:
        """Size arithmetic on Python numbers, computed here (False: some input is a
        run-time value, lowered by the rules)."""
        val = node.meta.get("val")
        if isinstance(val, torch.SymInt) and self.symbols:  # a dynamic size: torch's own expression
            self.env[node] = self.size_value(dim_of(val, self.symbols))
            return True
        args = [self.value_of(a) for a in node.args]
        if not all(isinstance(a, (int, float, bool)) for a in args):
            return False
        self.env[node] = PYTHON_OPS[node.target](*args)
        return True

    def user_outputs(self, node: torch.fx.Node) -> list[Any]:
        returned = list(cast(Sequence[Any], node.args[0]))
        specs = self.program.graph_signature.output_specs
        outs: list[Any] = []
        for value, spec in zip(returned, specs):
            if spec.kind == OutputKind.USER_OUTPUT:
                if isinstance(spec.arg, TensorArgument):
                    outs.append(self.value_of(value))
            elif spec.kind not in (OutputKind.BUFFER_MUTATION, OutputKind.USER_INPUT_MUTATION):
                self.problems.append(OpProblem(f"output {spec.arg}", "", "",
                                               f"program outputs of kind {spec.kind.name} are not supported"))
        for o in outs:
            if isinstance(o, Poison) and o.reason:
                self.problems.append(OpProblem("output", "", "", o.reason))
            if isinstance(o, Complex):
                self.problems.append(OpProblem("output", "", "", COMPLEX_OUTPUT))
        return outs


def _not_an_aten_op(node: torch.fx.Node) -> str:
    return (f"{kind_of(node.target)} is not an ATen operator (a higher-order op or a Python "
            "function in the exported graph); export with frontend=\"jit\", or rewrite it with ATen ops")


def _flat(xs: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for x in xs:
        out.extend(_flat(x) if isinstance(x, (list, tuple)) else [x])
    return out


def lower_program(
    exported: object,
    registry: LoweringRegistry,
    input_names: Sequence[str],
    output_names: Sequence[str],
    *,
    op_set: OpSet | None = None,
    symbols: Mapping[Any, str] | None = None,
    assertions: Sequence[str] = (),
    native_ops: frozenset[str] = frozenset(),
    sampling: str = "refuse",
) -> Graph:
    """Lower an exported program into an IR graph (raises UnsupportedOpsError listing all
    problems). ``symbols``: each symbol of the program (its name ``s27``, or the sympy
    symbol) → the IR symbol name of that dynamic size (none: every size is static); ``assertions``: ``tract_assert`` lines
    the graph carries. Without ``symbols``, a program exported with dynamic shapes keeps
    torch.export's own symbol names (``s0``)."""
    if not isinstance(exported, ExportedModel):
        raise LoweringError(f"lower_program lowers an ExportedModel, not a {type(exported).__name__}")
    return ProgramLowering(exported, registry, input_names, output_names, op_set=op_set,
                           symbols=program_symbols(exported.program) if symbols is None
                           else {str(k): v for k, v in symbols.items()},
                           assertions=assertions, native_ops=native_ops, sampling=sampling).run()
