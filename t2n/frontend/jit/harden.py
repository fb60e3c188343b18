"""``harden_jit_for_export``: specialize a ScriptModule's graph for example inputs.

TorchScript keeps Python control flow, optional arguments, tuples and assertions
that the exporter cannot express. Hardening freezes the module (parameters become
constants that keep their storage, so their names are recovered), binds the example
arguments, folds what they decide, and inlines every ``if`` the way the example
inputs go. The returned module is for export only.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping, Sequence
from typing import Any

import attrs
import torch

from t2n.errors import AttributeStateError, TraceError
from t2n.frontend import torch_private
from t2n.frontend.jit.attribute_state import (
    StateAttribute,
    make_state_explicit,
    restore,
    settle_scalars,
    snapshot,
    state_attributes,
    written_attributes,
)
from t2n.frontend.jit.graph_edit import all_nodes, drop_unused, replace_with_constant
from t2n.frontend.jit.loops import refuse_data_dependent_loops
from t2n.frontend.jit.passes import PROBING_STEPS, STEPS, HardenState
from t2n.frontend.jit.self_check import check_against_original

log = logging.getLogger("t2n.frontend")

MAX_ROUNDS = 64


def _freeze(module: torch.jit.ScriptModule, diag: MutableMapping[str, Any]) -> torch.jit.ScriptModule:
    try:
        frozen = torch.jit.freeze(module, optimize_numerics=False)
        diag["froze"] = True
        return frozen
    except RuntimeError as exc:
        log.info("torch.jit.freeze failed (%s); inlining submodule calls instead", exc)
        diag["froze"] = False
        diag["freeze_error"] = str(exc).splitlines()[0]
        return module


def _with_defaults(module: torch.jit.ScriptModule, args: Sequence[Any]) -> list[Any]:
    """``args`` completed with forward's default values for the arguments not given."""
    forward: Any = module.forward
    params = list(forward.schema.arguments)[1:]
    out = list(args)
    for p in params[len(args):]:
        if not p.has_default_value():
            raise TraceError(f"forward needs argument {p.name!r}, which the example arguments do not give")
        out.append(p.default_value)
    return out


def _specialize_inputs(graph: torch._C.Graph, args: Sequence[Any]) -> tuple[int, list[Any]]:
    """Bind non-tensor arguments (None, numbers, strings) as constants and expand tuple/list
    arguments into one graph input per tensor; the remaining inputs are the tensors, in
    the depth-first order t2n flattens arguments."""
    params = list(graph.inputs())[1:]
    if len(args) > len(params):
        raise TraceError(f"{len(args)} arguments given, but forward takes {len(params)}")
    changes = 0
    direct: list[tuple[tuple[int, int], Any]] = []
    expanded: list[tuple[tuple[int, int], Any]] = []
    for i, inp in enumerate(params):
        arg = args[i] if i < len(args) else None
        if isinstance(arg, torch.Tensor):
            if inp.type().kind() == "OptionalType":
                inp.setType(torch._C.TensorType.get())
                changes += 1
            direct.append(((i, 0), arg))
        elif isinstance(arg, (tuple, list)) and arg and all(isinstance(a, torch.Tensor) for a in arg):
            new_inputs = []
            for j, a in enumerate(arg):
                v = graph.addInput()
                v.setType(torch._C.TensorType.get())
                new_inputs.append(v)
                expanded.append(((i, j), a))
            kind = "prim::TupleConstruct" if isinstance(arg, tuple) else "prim::ListConstruct"
            node = graph.create(kind, new_inputs, 1)
            node.insertBefore(next(iter(graph.nodes())))
            node.output().setType(inp.type())
            inp.replaceAllUsesWith(node.output())
            changes += 1
        else:
            replace_with_constant(graph, inp, arg)
            changes += 1
    for i in reversed(range(len(params))):
        if not isinstance(args[i] if i < len(args) else None, torch.Tensor):
            graph.eraseInput(i + 1)
    current = direct + expanded  # the graph's input order now
    order = sorted(range(len(current)), key=lambda k: current[k][0])
    if order != list(range(len(current))):
        g: Any = graph  # permuteInputs is not in torch's stubs
        g.permuteInputs([0] + [k + 1 for k in order])
    return changes, [current[k][1] for k in order]


def _settle(state: HardenState, diag: MutableMapping[str, Any]) -> int:
    """Run the graph-only steps until none changes anything."""
    total = 0
    for _ in range(MAX_ROUNDS):
        round_changes = 0
        for name, step in STEPS:
            n = step(state)
            diag[name] += n
            round_changes += n
            drop_unused(state.graph)
        total += round_changes
        if not round_changes:
            break
    return total


@attrs.define(eq=False)
class HardenedGraph:
    """A ScriptModule's forward graph specialized for example inputs.

    ``graph`` is a private copy (the module's own graph is never changed); its first
    input stands for ``module`` and the rest for ``example_inputs``, the argument
    tensors flattened depth-first. Calling it runs the specialized graph.
    """

    graph: torch._C.Graph
    module: torch.jit.ScriptModule
    example_inputs: list[torch.Tensor]
    diagnostics: MutableMapping[str, Any]
    state: list[StateAttribute] = attrs.field(factory=list)
    """Tensor attributes the forward reassigns, made explicit: the last ``len(state)``
    example inputs hold their values before the call, and the graph returns
    ``(result, their values after the call...)``."""
    reference: Any = None
    """What the scripted model returned on the example inputs (then, when ``state`` is
    not empty, the attributes' values after that call), from the starting state."""

    def __call__(self, *tensors: torch.Tensor) -> Any:
        fn = torch_private.function_from_graph("t2n_hardened", self.graph)
        with torch.no_grad():
            return fn(self.module._c, *tensors)


def harden_jit_for_export(
    script_module: torch.jit.ScriptModule,
    args: Any,
    *,
    freeze: bool = True,
    diagnostics: MutableMapping[str, Any] | None = None,
) -> HardenedGraph:
    """Specialize ``script_module.forward`` for ``args`` so that ``t2n.compile`` can lower it.

    Steps (each reports its change count in ``diagnostics``): freeze (``froze`` says
    whether ``torch.jit.freeze`` worked; on a RuntimeError submodule calls are inlined
    instead), input specialization (non-tensor arguments and forward's defaults become
    constants, tuple/list arguments one input per tensor), replace_size_calls_with_constants
    (only sizes that decide control flow), fold_constant_scalar_arithmetic,
    fold_constant_ifs, fold_tuple_index_through_tuple_construct,
    fold_tuple_unpack_through_tuple_construct, strip_prim_data, strip_assertion_ifs,
    unroll_constant_loops (loops whose trip count and condition are constants once sizes
    are: the body copied once per iteration), resolve_list_appends (lists grown by
    ``append`` become plain lists at each reader), and fold_data_dependent_ifs (each
    remaining ``if`` takes the branch the example inputs take). A loop whose trip count
    the data decides raises :class:`t2n.errors.DataDependentLoopError` naming its line.

    Module attributes the forward reassigns are made explicit first
    (:mod:`t2n.frontend.jit.attribute_state`): tensor ones become state inputs and
    outputs, scalar ones are fixed (when the call keeps them) or refused with
    :class:`t2n.errors.AttributeStateError`. Last, the hardened graph is run against the
    scripted model on the example inputs, from the same starting state; any difference
    raises :class:`t2n.errors.HardeningMismatchError`.

    The result holds a specialized copy of the graph; ``script_module`` is unchanged
    (its attributes are put back as they were after the reference call). ``t2n.compile``
    accepts it (and hardens ScriptModules itself by default).
    """
    diag: MutableMapping[str, Any] = diagnostics if diagnostics is not None else {}
    if not isinstance(script_module, torch.jit.ScriptModule):
        raise TraceError("harden_jit_for_export expects a torch.jit.ScriptModule")
    args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
    module = script_module.eval()
    if freeze:
        module = _freeze(module, diag)
    else:
        diag["froze"] = False
    graph = _inlined_forward(module, diag)
    full_args = _with_defaults(script_module, args)
    attributes = state_attributes(script_module, written_attributes(graph))
    reference, after = _reference_call(script_module, full_args, attributes)
    changed, tensors = _specialize_inputs(graph, full_args)
    diag["specialize_inputs"] = changed
    explicit = make_state_explicit(graph, attributes)
    diag["state_attributes"] = [a.path for a in explicit.tensors]
    tensors = [*tensors, *(a.initial.clone() for a in explicit.tensors)]
    _run_steps(HardenState(graph, module._c, tensors), diag)
    settle_scalars(graph, explicit, after)
    drop_unused(graph)
    refuse_data_dependent_loops(graph)
    torch_private.lint(graph)
    hardened = HardenedGraph(graph, module, list(tensors), diag, explicit.tensors, reference)
    check_against_original(hardened, hardened.example_inputs, reference, [a.path for a in explicit.tensors])
    return hardened


def _inlined_forward(module: torch.jit.ScriptModule, diag: MutableMapping[str, Any]) -> torch._C.Graph:
    """A copy of ``module.forward``'s graph with every method and function call inlined
    (their count in ``diag["inline_submodule_calls"]``)."""
    forward: Any = module.forward
    graph = forward.graph.copy()
    calls = sum(1 for n in all_nodes(graph.block()) if n.kind() in ("prim::CallMethod", "prim::CallFunction"))
    torch_private.inline_calls(graph)
    diag["inline_submodule_calls"] = calls
    return graph


def _run_steps(state: HardenState, diag: MutableMapping[str, Any]) -> None:
    """The folding steps, then each probing step, in rounds until a round changes
    nothing (at most ``MAX_ROUNDS``); each step's change count adds up in ``diag``."""
    for name, _ in [*STEPS, *PROBING_STEPS]:
        diag.setdefault(name, 0)
    for _ in range(MAX_ROUNDS):
        changed_now = _settle(state, diag)
        for name, step in PROBING_STEPS:
            n = step(state)
            diag[name] += n
            drop_unused(state.graph)
            if n:
                changed_now += n
                _settle(state, diag)
        if not changed_now:
            break


def scripted_call_failed(exc: BaseException, args: Sequence[Any]) -> TraceError:
    """The error for a ScriptModule failing on the example inputs (their wrong shape,
    number or dtype, most often), naming the inputs given and the model's own message."""
    given = ", ".join(f"{list(a.shape)} {str(a.dtype).removeprefix('torch.')}" if isinstance(a, torch.Tensor)
                      else type(a).__name__ for a in args)
    first = next((line.strip() for line in reversed(str(exc).splitlines()) if line.strip()), "")
    return TraceError(
        f"the TorchScript model fails on the example inputs ({len(args)} given: {given}): "
        f"{type(exc).__name__}: {first}. What to do: give inputs of the shapes, number and dtypes "
        "its forward takes")


def _reference_call(module: torch.jit.ScriptModule, args: Sequence[Any],
                    attributes: Sequence[StateAttribute]) -> tuple[Any, dict[str, Any]]:
    """What the scripted model returns on ``args`` (followed by its written tensor
    attributes' values after the call), and every written attribute's value after the
    call; the attributes are then put back as they were."""
    paths = [a.path for a in attributes]
    before = snapshot(module, paths)
    try:
        with torch.no_grad():
            out = module(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
        after = snapshot(module, paths)
    except Exception as exc:
        raise scripted_call_failed(exc, args) from exc
    finally:
        restore(module, before)
    tensors = [a.path for a in attributes if a.tensor]
    lost = [p for p in tensors if not isinstance(after[p], torch.Tensor)]
    if lost:
        raise AttributeStateError(
            f"forward replaces tensor attribute(s) {', '.join(lost)} with something else than a "
            "tensor, which no exported state output can hold. What to do: keep them tensors "
            "(an empty one rather than None)", lost)
    return ((out, *[after[p] for p in tensors]) if tensors else out), after
