"""The lowering driver: TorchScript nodes → IR ops, one registered rule per op kind.

Before lowering anything, every node kind without a rule is collected, so that an
unsupported model is reported in full at once. Rules that reject an option of an
op they know are collected the same way while lowering continues.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from t2n.errors import LoweringError, OpProblem
from t2n.frontend import torch_private
from t2n.frontend.complex_tensors import COMPLEX_OUTPUT, Complex, holds_complex
from t2n.frontend.context import (
    LoweringContext,
    ModuleRef,
    Poison,
    UnsupportedHere,
    module_path,
    source_of,
)
from t2n.frontend.dtypes import float8_problem, to_ir
from t2n.frontend.extractors import ExtractedCall, lower_extracted
from t2n.frontend.jit.scalars import SCALAR_FOLD_ERRORS, SCALAR_OPS, is_list_op, is_python_value
from t2n.frontend.lowering.complex import complex_problem, complex_rule
from t2n.frontend.registry import LoweringRegistry, RuleInfo
from t2n.frontend.sampling import ops_error
from t2n.frontend.trace import TracedModel
from t2n.frontend.views import (
    MAYBE_COPY_KINDS,
    MULTI_VIEW_KINDS,
    SELF_WHEN_SAME_KINDS,
    VIEW_KINDS,
    ViewTracker,
    aliases_input,
)
from t2n.ir import DType, Graph, OpSet, SourceLoc, TensorType, Value
from t2n.quant.model import q4_0_scales, with_q4_0

log = logging.getLogger("t2n.frontend")

STRUCTURAL = {"prim::Return", "prim::Param"}
PYTHON_OP = "prim::PythonOp"


def opaque_function(node: torch._C.Node) -> str:
    """Why a ``prim::PythonOp`` (a custom ``autograd.Function`` whose forward the tracer
    did not record) cannot be lowered."""
    return (f"custom autograd.Function {torch_private.python_op_name(node)} was traced as one opaque call (its forward "
            "was not recorded: is torch.onnx's autograd_inlining turned off?); call its forward's "
            "ops directly, or export the module that calls it with a t2n.ModuleExtractor")


def _nodes(block: torch._C.Block) -> list[torch._C.Node]:
    return list(block.nodes())


def no_rule(kind: str) -> str:
    """Why ``kind`` is refused when no rule lowers it."""
    if kind == "prim::CallFunction":
        return ("a TorchScript function called inside the trace (a @torch.jit.script_if_tracing "
                "helper, VitDet's relative positions): the jit frontend does not lower scripted "
                "calls; frontend=\"export\" runs such a helper as Python")
    return "no lowering rule"


class Lowering:
    """State of one lowering: the IR graph being built and torch value → lowered value."""

    def __init__(
        self,
        traced: TracedModel,
        registry: LoweringRegistry,
        input_names: Sequence[str],
        output_names: Sequence[str],
        graph_name: str = "main",
        static_sizes: bool = False,
        op_set: OpSet | None = None,
        native_ops: frozenset[str] = frozenset(),
        sampling: str = "refuse",
    ) -> None:
        self.traced = traced
        self.registry = registry
        self.scope_prefix = traced.scope_prefix
        self.graph = Graph(graph_name, op_set)
        self.env: dict[int, Any] = {}
        self.params: dict[int, Value] = {}
        self.complex_params: dict[int, Complex] = {}
        self.problems: list[OpProblem] = []
        self.input_names = list(input_names)
        self.output_names = list(output_names)
        self._keepalive: list[torch.Tensor] = []
        self.module_writes: dict[tuple[int, str], Any] = {}
        self.noise_inputs: dict[Any, Value] | None = {} if sampling == "inputs" else None
        self.views = ViewTracker(self.env)
        self.pending_params: dict[int, tuple[str, torch.Tensor]] = {}
        self.q4_0_scales = q4_0_scales(traced.root)
        self.static_sizes = static_sizes
        """No axis will become symbolic: sizes read in ``forward`` are Python ints, and the
        arithmetic on them runs in Python instead of becoming IR ops folded later."""
        self.native_ops = native_ops
        """IR ops the target runs as one native operation (e.g. ``cumsum`` in tract
        0.23.9+), which rules write instead of their decompositions."""

    def problem(self, node: torch._C.Node, reason: str) -> None:
        self.problems.append(
            OpProblem(node.kind(), module_path(node.scopeName(), self.scope_prefix),
                      source_of(node), reason)
        )

    def precheck(self, block: torch._C.Block) -> None:
        for node in _nodes(block):
            kind = node.kind()
            if kind == PYTHON_OP:
                if self.extracted_call(node) is None:
                    self.problem(node, opaque_function(node))
            elif kind not in self.registry and kind not in STRUCTURAL and kind not in SCALAR_OPS \
                    and complex_rule(kind) is None:
                self.problem(node, no_rule(kind))
            elif (why := float8_problem(node)) is not None:
                self.problem(node, why)
            for sub in node.blocks():
                self.precheck(sub)

    def run(self) -> Graph:
        g = self.traced.graph
        self.precheck(g.block())
        if self.problems:
            raise ops_error(self.problems)
        self.bind_inputs(list(g.inputs()))
        self.lower_block(g.block())
        if self.problems:
            raise ops_error(self.problems)
        outs = self.returned_tensors(list(g.outputs()))
        if self.problems:
            raise ops_error(self.problems)
        self.graph.set_outputs(self.name_outputs(outs))
        self.graph.info.tracer_warnings = list(self.traced.tracer_warnings)
        return self.graph

    def bind_inputs(self, inputs: list[torch._C.Value]) -> None:
        """The graph's inputs bound in order: the module itself (a scripted forward's
        ``self``), the example tensors as IR inputs, and the parameters lifted to inputs,
        read only when first used."""
        first = 0
        if inputs and not isinstance(inputs[0].type(), torch._C.TensorType):
            self.env[inputs[0].unique()] = ModuleRef("", self.traced.root)
            first = 1
        n_params = len(self.traced.parameter_inputs)
        tensor_inputs = inputs[first: len(inputs) - n_params]
        for tv, (pname, tensor) in zip(inputs[len(inputs) - n_params:], self.traced.parameter_inputs):
            self.pending_params[tv.unique()] = (pname, tensor)
        noise = self.traced.noise
        examples = self.traced.example_inputs[: len(self.traced.example_inputs) - len(noise)]
        if len(tensor_inputs) != len(examples):
            raise LoweringError(
                f"the graph has {len(tensor_inputs)} inputs but {len(examples)} example tensors were given"
            )
        for tv, example, name in zip(tensor_inputs, examples, self.input_names):
            t = TensorType(to_ir(example.dtype), list(example.shape))
            self.env[tv.unique()] = self.graph.add_input(t, name)
        for draw in noise:  # compile(sampling="inputs"): the draws' stand-ins, after the model's inputs
            assert self.noise_inputs is not None
            t = TensorType(to_ir(draw.values.dtype), list(draw.values.shape))
            self.noise_inputs[draw.key] = self.graph.add_input(t, draw.name)

    def returned_tensors(self, returned_values: list[torch._C.Value]) -> list[Any]:
        """The IR values the model returns, flattened by its output structure; an output
        that is poisoned or complex is recorded as a problem."""
        for v in returned_values:
            self.views.refresh(v.unique())
        returned = [self.env[v.unique()] for v in returned_values]
        spec = self.traced.output_spec if not self.traced.outputs_are_flat else None
        if spec is not None and len(returned) == 1:
            outs = self.select_tensors(spec, returned[0])
        else:
            outs = self.flatten_outputs(returned)
        for o in outs:
            if isinstance(o, Poison) and o.reason:
                self.problems.append(OpProblem("output", "", "", o.reason))
            if isinstance(o, Complex):
                self.problems.append(OpProblem("output", "", "", COMPLEX_OUTPUT))
        return outs

    def parameter(self, t: torch.Tensor, path: str) -> Value:
        """One variable per parameter or buffer, however many times the model reads it."""
        key = id(t)
        if key not in self.params:
            from t2n.frontend.context import array_data
            from t2n.ir import Builder

            name = self.traced.name_of(t, path.removeprefix(self.scope_prefix))
            data = self.traced.weights.get(name)
            if data is None:
                start = self.traced.start_values.get(name)  # written by the traced call
                data = array_data(t if start is None else start, name)
                if start is None:
                    self.traced.state_read[name] = t
            data = with_q4_0(self.q4_0_scales, t, data, name)  # weights t2n.quantize made Q4_0
            self.params[key] = Builder(self.graph).variable(data, name)
            self._keepalive.append(t)
        return self.params[key]

    def state(self, t: torch.Tensor, path: str) -> Value | Complex:
        """A parameter or buffer as the rules see it: a complex one (a rotary table of
        ``torch.polar``) as its (real, imaginary) pair, a variable of its own."""
        if not t.is_complex():
            return self.parameter(t, path)
        key = id(t)
        if key not in self.complex_params:
            name = self.traced.name_of(t, path.removeprefix(self.scope_prefix))
            pair = torch.view_as_real(t.detach().resolve_conj())
            self.complex_params[key] = Complex(self.parameter(pair, name))
            self._keepalive.append(t)
        return self.complex_params[key]

    def lower_block(self, block: torch._C.Block) -> None:
        for node in _nodes(block):
            self.lower_node(node)

    def node_args(self, node: torch._C.Node) -> list[Any]:
        """The node's inputs as lowered values (parameters are materialized on first use)."""
        for v in node.inputs():
            u = v.unique()
            if u in self.pending_params:
                name, t = self.pending_params.pop(u)
                self.env[u] = self.state(t, name)
            self.views.refresh(u)
        args = [self.env.get(v.unique(), _MISSING) for v in node.inputs()]
        if any(a is _MISSING for a in args):
            raise LoweringError(f"{node.kind()}: an input was never lowered (graph order?)")
        return args

    def poison_outputs(self, outs: Sequence[torch._C.Value]) -> None:
        """Mark outputs as not lowered, so their users are skipped (one report per cause)."""
        for o in outs:
            self.env[o.unique()] = Poison()

    def store_result(self, node: torch._C.Node, outs: Sequence[torch._C.Value], result: Any) -> None:
        if len(outs) == 1:
            self.env[outs[0].unique()] = result
            self.note_traced_name(outs[0], result)
        elif outs:
            if not isinstance(result, (tuple, list)) or len(result) != len(outs):
                raise LoweringError(f"rule for {node.kind()} returned {result!r} for {len(outs)} outputs")
            for o, r in zip(outs, result):
                self.env[o.unique()] = r
                self.note_traced_name(o, r)

    def note_traced_name(self, out: torch._C.Value, result: Any) -> None:
        """Remember the trace's name of the value that first gave ``result`` (the
        ``raw`` naming scheme writes it)."""
        if isinstance(result, Value):
            self.graph.info.traced_names.setdefault(result, out.debugName())

    def lower_node(self, node: torch._C.Node) -> None:
        outs = list(node.outputs())
        args = self.node_args(node)
        if self.poisoned_by_args(node, args, outs):
            return
        call = self.extracted_call(node)
        if call is not None:
            self.lower_extracted(node, call, outs)
            return
        on_complex = not node.kind().startswith("prim::") and holds_complex(args)
        info = complex_rule(node.kind()) if on_complex else self.registry.get(node.kind())
        if on_complex and info is None:
            self.problem(node, complex_problem(node.kind()))
            self.poison_outputs(outs)
            return
        if self.folded_in_python(node, args, outs):
            return
        if info is None:
            self.problem(node, no_rule(node.kind()))
            self.poison_outputs(outs)
            return
        applied = self.apply_rule(node, info, outs)
        if applied is None:
            return
        ctx, result = applied
        self.store_result(node, outs, result)
        self.track_aliases(node, ctx, info.fn, args, result)

    def poisoned_by_args(self, node: torch._C.Node, args: list[Any], outs: list[torch._C.Value]) -> bool:
        """Whether an argument comes from a value that could not be lowered: then this node
        is skipped and its outputs poisoned too, rather than failing on a placeholder (a
        poison that carries a reason reports it at this node)."""
        if not any(isinstance(a, Poison) for a in args):
            return False
        for a in args:
            if isinstance(a, Poison) and a.reason:
                self.problem(node, a.reason)
        self.poison_outputs(outs)
        return True

    def folded_in_python(self, node: torch._C.Node, args: list[Any], outs: list[torch._C.Value]) -> bool:
        """Whether a scalar op on Python values was computed here, so sizes and constants stay
        plain numbers in the IR; one Python cannot compute is left to the tensor rule."""
        if node.kind() in SCALAR_OPS and len(outs) == 1 and \
                (all(is_python_value(a) for a in args) or is_list_op(node.kind(), args)):
            try:
                self.env[outs[0].unique()] = SCALAR_OPS[node.kind()](*args)
                return True
            except SCALAR_FOLD_ERRORS:
                pass  # not foldable in Python: the tensor rule below handles it
        return False

    def apply_rule(self, node: torch._C.Node, info: RuleInfo,
                   outs: list[torch._C.Value]) -> tuple[LoweringContext, Any] | None:
        """The rule's context and result, counted in the graph's aten-op tally; None when
        the rule declined (a problem reported, the outputs poisoned); any other failure is a
        :class:`LoweringError` naming the op and where the model uses it."""
        ctx = LoweringContext(self, node)
        ops = self.graph.info.aten_ops
        ops[node.kind()] = ops.get(node.kind(), 0) + 1
        try:
            return ctx, info.fn(ctx)
        except UnsupportedHere as exc:
            self.problem(node, str(exc))
            self.poison_outputs(outs)
            return None
        except Exception as exc:
            raise LoweringError(
                f"lowering {node.kind()} {ctx.loc} failed: {type(exc).__name__}: {exc}"
            ) from exc

    def extracted_call(self, node: torch._C.Node) -> ExtractedCall | None:
        extracted = self.traced.extracted
        return extracted.call_of(node) if extracted is not None and node.kind() == PYTHON_OP else None

    def lower_extracted(self, node: torch._C.Node, call: ExtractedCall, outs: list[torch._C.Value]) -> None:
        """An extracted module's call, lowered by its extractor (one output: a tensor, or
        the tuple of its tensors)."""
        try:
            result = lower_extracted(self, node, call)
        except UnsupportedHere as exc:
            self.problem(node, str(exc))
            result = Poison()
        for o in outs:
            self.env[o.unique()] = result

    def track_aliases(self, node: torch._C.Node, ctx: LoweringContext, fn: Any, args: list[Any],
                      result: Any) -> None:
        """Record views, and make an in-place op's result visible through its input, the
        input's bases and their other views (see ``t2n.frontend.views``)."""
        outs = list(node.outputs())
        kind = node.kind()
        if kind == "prim::ListUnpack" and node.inputs().__next__().node().kind() in MULTI_VIEW_KINDS:
            self.record_pieces(node)
            return
        tensors = (Value, Complex)  # a complex tensor's views and writes act on its (re, im) pair
        if len(outs) != 1 or not args or not isinstance(args[0], tensors) or not isinstance(result, tensors):
            return
        first = next(iter(node.inputs())).unique()
        if kind in SELF_WHEN_SAME_KINDS and result is args[0]:
            self.views.record(outs[0].unique(), first, lambda: self.env[first])
        elif kind in VIEW_KINDS and (kind not in MAYBE_COPY_KINDS or aliases_input(node)):
            self.views.record(outs[0].unique(), first, lambda: fn(LoweringContext(self, node)))
        elif kind.endswith("_") and not kind.endswith("__"):
            # In-place op: later readers of the mutated input see the result; its output
            # is the input itself.
            try:
                self.views.written(ctx.b, first, args[0], result)
            except UnsupportedHere as exc:
                self.problem(node, str(exc))
            self.views.record(outs[0].unique(), first, lambda: self.env[first])
            self.env[outs[0].unique()] = self.env[first]

    def record_pieces(self, unpack: torch._C.Node) -> None:
        """The outputs of ``chunk``/``split``/``unbind`` are views of its input."""
        producer = next(iter(unpack.inputs())).node()
        base = next(iter(producer.inputs())).unique()
        on_complex = isinstance(self.env.get(base), Complex)
        info = complex_rule(producer.kind()) if on_complex else self.registry.get(producer.kind())
        if info is None or not isinstance(self.env.get(base), (Value, Complex)):
            return

        def piece(i: int) -> Any:
            return lambda: info.fn(LoweringContext(self, producer))[i]

        for i, o in enumerate(unpack.outputs()):
            self.views.record(o.unique(), base, piece(i))

    def select_tensors(self, spec: Any, lowered: Any) -> list[Any]:
        """The lowered values at the tensor positions of PyTorch's output structure
        (non-tensor outputs such as Python ints are not model outputs)."""
        if spec.kind == "leaf":
            return [lowered]
        if spec.kind == "const":
            return []
        items = list(lowered.values()) if isinstance(lowered, dict) else list(lowered)
        out: list[Any] = []
        for child, item in zip(spec.children, items):
            out += self.select_tensors(child, item)
        return out

    def flatten_outputs(self, items: Sequence[Any]) -> list[Any]:
        out: list[Any] = []
        for it in items:
            if isinstance(it, (tuple, list)):
                out.extend(self.flatten_outputs(it))
            else:
                out.append(it)
        return out

    def name_outputs(self, outs: Sequence[Any]) -> list[Value]:
        return name_outputs(self.graph, outs, self.output_names)


def name_outputs(graph: Graph, outs: Sequence[Any], output_names: Sequence[str]) -> list[Value]:
    """The lowered outputs under their names: a copy where an output is an input, a
    constant or variable, or an output already named (shared by both frontends)."""
    if len(outs) != len(output_names):
        raise LoweringError(f"{len(outs)} outputs lowered, {len(output_names)} names")
    named: list[Value] = []
    seen: set[int] = set()
    inputs = {id(v) for v in graph.inputs}
    for x, name in zip(outs, output_names):
        if not isinstance(x, Value):
            x = _const_value(graph, x)
        if id(x) in seen or id(x) in inputs or x.producer is None or x.producer.kind in ("const", "variable"):
            x = graph.create_op("identity", [x], names=[name], loc=SourceLoc()).output
        else:
            graph.rename(x, name)
        seen.add(id(x))
        named.append(x)
    return named


_MISSING = object()


def _const_value(graph: Graph, x: Any) -> Value:
    from t2n.ir import ArrayData, Builder

    arr = np.asarray(x)
    dt = DType.F32 if arr.dtype.kind == "f" else DType.from_numpy(arr.dtype)
    return Builder(graph).op("const", data=ArrayData(arr.astype(dt.numpy), dt))


def lower(
    traced: TracedModel,
    registry: LoweringRegistry,
    input_names: Sequence[str],
    output_names: Sequence[str],
    *,
    static_sizes: bool = False,
    op_set: OpSet | None = None,
    native_ops: frozenset[str] = frozenset(),
    sampling: str = "refuse",
) -> Graph:
    """Lower a traced model into an IR graph (raises UnsupportedOpsError listing all problems).

    ``static_sizes``: no dynamic axis will be inserted, so sizes may be used as numbers
    (the same graph once constants are folded, found with far fewer ops). Without it,
    sizes stay graph computations that the dynamic-axes pass can make symbolic.
    ``op_set``: the IR ops the rules may create (default: the built-in ones).
    ``native_ops``: IR ops the target runs natively (``Target.native_ops()``).
    ``sampling``: ``"inputs"`` lowers the random draws of ``traced.noise`` to graph inputs
    (``compile(sampling=...)``); other draws are refused."""
    return Lowering(traced, registry, input_names, output_names, static_sizes=static_sizes,
                    op_set=op_set, native_ops=native_ops, sampling=sampling).run()
