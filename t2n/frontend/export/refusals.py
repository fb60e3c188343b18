"""What the torch.export frontend refuses, said once, with the other frontend suggested.

torch.export traces ``forward`` with fake tensors and symbolic sizes. It stops at
Python that depends on tensor data (``if x.sum() > 0:``, ``.item()``, ``int(t)``), it
cannot take a scripted module, and the graphs it gives may hold constructs t2n has no IR
for: higher-order ops (``torch.cond``, ``while_loop``, ``map``, ``scan``) and sizes made
from tensor data other than those tract counts while running (``DATA_SIZED_OPS``:
computed repeats, ``nonzero``, boolean masks). Each becomes one
:class:`~t2n.errors.ExportFrontendError` naming the construct and the user's source line,
suggesting ``frontend="jit"`` (which traces the example's path, or runs a scripted
module's control flow). A dynamic size that the model fixes (torch's constraint
violation) is an :class:`~t2n.errors.ExportSpecializationError` naming the input and
axis, with torch's reason and how to relax it. torch's exception stays the ``__cause__``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sysconfig
import traceback
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.fx.experimental.symbolic_shapes import (
    ConstraintViolationError,
    GuardOnDataDependentSymNode,
    free_unbacked_symbols,
)

from t2n.errors import (
    ExportFrontendError,
    ExportSpecializationError,
    ScriptedModelExportError,
    T2NError,
)
from t2n.frontend.export.requests import DynamicRequest, with_ranges

log = logging.getLogger("t2n.frontend")

USE_JIT = 'export with frontend="jit" instead (the default)'
"""The advice every refusal ends with."""

_DATA_DEPENDENT_OPS = frozenset({"item", "_local_scalar_dense", "unique",
                                 "_unique2", "unique_consecutive", "unique_dim"})

DATA_SIZED_OPS = frozenset({"aten::repeat_interleave", "aten::nonzero", "aten::masked_select", "aten::index"})
"""Ops whose output length torch.export makes from tensor data (an unbacked size) and
whose rules give a length tract computes at run time (``aten::index``: by a boolean
mask): the export frontend maps that size to the lowered output's own axis
(:mod:`t2n.frontend.export.lower`)."""


def refuse_scripted(model: Any) -> None:
    """A ``torch.jit.ScriptModule`` (scripted or loaded) has no Python ``forward`` that
    torch.export could trace."""
    if isinstance(model, (torch.jit.ScriptModule, torch.jit.ScriptFunction)) or type(model).__name__ == "HardenedGraph":
        raise ScriptedModelExportError(
            f"a scripted module ({type(model).__name__}, a TorchScript model) cannot go through "
            f"torch.export, which traces Python code; {USE_JIT}: it takes scripted modules and "
            "their control flow", construct="scripted module")


@contextlib.contextmanager
def export_errors(axes: Mapping[str, Mapping[int, str]] | None = None) -> Iterator[None]:
    """Turn what ``torch.export.export`` raises inside this block into t2n's typed errors.
    ``axes`` (``{input: {axis: symbol}}``) lets a constraint violation name inputs and axes."""
    try:
        yield
    except T2NError:
        raise
    except (ConstraintViolationError, torch._dynamo.exc.UserError) as exc:
        if _is_constraint_violation(exc):
            raise specialization_error(exc, axes or {}) from exc
        raise _refusal(exc, "a construct torch.export does not take") from exc
    except GuardOnDataDependentSymNode as exc:
        raise _refusal(exc, "data-dependent Python (a value or branch taken from tensor data: "
                            "if tensor:, .item(), int(t), a loop over a tensor's value)") from exc
    except torch._dynamo.exc.Unsupported as exc:
        raise _refusal(exc, "a graph break (Python torch.export cannot trace)") from exc
    except Exception as exc:  # anything else torch.export (or forward under it) raised: typed, with its cause
        raise _refusal(exc, "Python that torch.export could not run with symbolic tensors") from exc


def export_with_request(model: torch.nn.Module, args: tuple[Any, ...], kwargs: Mapping[str, Any],
                        request: DynamicRequest) -> ExportedProgram:
    """``torch.export.export`` (non-strict) with the request's ``dynamic_shapes``, errors
    typed by :func:`export_errors`. When torch refuses a symbol made from ``dynamic_axes``
    only for want of a range it names (``S <= 64``), the export is made again with that
    range, which then becomes a ``tract_assert`` line, and a log line says so."""
    try:
        with export_errors(request.axes):
            return torch.export.export(model, args, dict(kwargs), dynamic_shapes=request.dynamic_shapes, strict=False)
    except ExportSpecializationError as exc:
        retry = with_ranges(request, _suggested_fixes(str(exc.__cause__)))
        if retry is None:
            raise
        log.info("torch.export needs %s for the dynamic axes; exporting with that range",
                 "; ".join(_suggested_fixes(str(exc.__cause__))))
        with export_errors(retry.axes):
            return torch.export.export(model, args, dict(kwargs), dynamic_shapes=retry.dynamic_shapes, strict=False)


def _is_constraint_violation(exc: BaseException) -> bool:
    kind = getattr(getattr(exc, "error_type", None), "name", "")
    return isinstance(exc, ConstraintViolationError) or kind == "CONSTRAINT_VIOLATION" \
        or str(exc).startswith("Constraints violated")


def _refusal(exc: BaseException, construct: str) -> ExportFrontendError:
    source = user_source_line(exc)
    head = _first_line(exc)
    at = f" at {source}" if source else ""
    return ExportFrontendError(
        f"torch.export cannot export this model: {construct}{at}.\n  torch says: {head}\n{USE_JIT}; "
        "it records the path the example inputs take", construct=construct, source=source)


def _first_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


def specialization_error(exc: BaseException, axes: Mapping[str, Mapping[int, str]]) -> ExportSpecializationError:
    """torch.export's constraint violation as an error naming each input and axis whose
    symbol it is about, torch's reasons and its suggested fixes."""
    text = str(exc)
    named = re.match(r"Constraints violated \(([^)]*)\)", text)
    symbols = [s.strip() for s in named.group(1).split(",")] if named else []
    reasons = [ln.strip()[2:].split(" If you're using")[0] for ln in text.splitlines() if ln.strip().startswith("- ")]
    said = " ".join(reasons)
    places = [(inp, axis, sym) for inp, per in axes.items() for axis, sym in sorted(per.items())
              if sym in symbols or re.search(rf"\b{re.escape(sym)}\b", said)]
    fixes = _suggested_fixes(text)
    where = "; ".join(f"input {inp!r} axis {axis} (symbol {sym})" for inp, axis, sym in places) \
        or (f"symbol {', '.join(symbols)}" if symbols else "a dynamic size")
    fixed = re.search(r"specialized it to be a constant \((\d+)\)", text)
    outside = re.search(r"(\d+) not in range \[(\d+), (\w+)\]", text)
    relax = (f"the example's size {outside.group(1)} is outside the range the Dim allows: give an "
             "example inside it, or widen the Dim's min/max") if outside else \
        _relax_advice(fixed.group(1) if fixed else None, fixes)
    message = (f"torch.export cannot keep {where} dynamic: "
               + ("; ".join(reasons[:3]) or _first_line(exc))
               + (f" (torch suggests: {'; '.join(fixes)})" if fixes else "") + f".\n{relax}")
    first = places[0] if places else ("", None, "")
    return ExportSpecializationError(message, input=first[0], axis=first[1], reason="; ".join(reasons) or text)


def _suggested_fixes(text: str) -> list[str]:
    _, found, rest = text.partition("Suggested fixes:")
    if not found:
        return []
    out = []
    for line in rest.splitlines()[1:]:
        if not line.startswith("  ") or not line.strip():
            break
        out.append(line.strip())
    return out


def _relax_advice(constant: str | None, fixes: list[str]) -> str:
    if constant in ("0", "1"):
        return (f"torch.export fixes sizes 0 and 1: trace with an example of size 2 or more on that "
                f"axis, or make it static (drop it from dynamic_axes), or {USE_JIT}")
    if any("must always be equal" in f or re.match(r"\w+ = [A-Za-z_]\w*$", f) for f in fixes):
        return ("the model makes these sizes equal: give those axes the same symbol name in "
                f"dynamic_axes (the same Dim in dynamic_shapes), or {USE_JIT}")
    if constant is not None:
        return ("the model fixes that size (a reshape or branch on it, a size check...): make the axis "
                f"static (drop it from dynamic_axes), change the code that fixes it, or {USE_JIT} "
                "(it reports sizes baked in as BakedSizeWarning)")
    return ("give that axis a range or relation torch accepts (dynamic_shapes with torch.export.Dim, "
            f"e.g. Dim('S', max=...) or a derived 2 * Dim), make it static, or {USE_JIT}")


# -- source lines ---------------------------------------------------------------------

_SKIP_DIRS = tuple(os.path.dirname(m.__file__) + os.sep for m in (torch,) if m.__file__) + (
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep,
    sysconfig.get_paths()["stdlib"] + os.sep,
)


def _is_user_file(path: str) -> bool:
    return not path.startswith("<") and not os.path.abspath(path).startswith(_SKIP_DIRS)


def user_source_line(exc: BaseException) -> str:
    """``file:line`` (and the code) of the user's frame that raised ``exc``: the call torch
    names in its message, else the deepest traceback frame outside torch, t2n and the
    standard library."""
    match = re.search(r'File "([^"]+)", line (\d+), in \w+\n\s+(.+)', str(exc))
    if match and _is_user_file(match.group(1)):
        return f"{match.group(1)}:{match.group(2)}: {match.group(3).strip()}"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _is_user_file(f.filename)]
    if frames:
        f = frames[-1]
        return f"{f.filename}:{f.lineno}: {(f.line or '').strip()}".rstrip(": ")
    return ""


def node_source_line(node: torch.fx.Node) -> str:
    """``file:line: code`` of the user's frame in an FX node's recorded stack trace."""
    trace = node.meta.get("stack_trace") or ""
    found = re.findall(r'File "([^"]+)", line (\d+), in \w+\n\s+(.+)', trace)
    users = [f for f in found if _is_user_file(f[0])] or found
    if not users:
        return ""
    path, line, code = users[-1]
    return f"{path}:{line}: {code.strip()}"


def _module_path(node: torch.fx.Node) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path = list(stack.values())[-1][0]
    return str(path).replace("L['self'].", "").replace("L['self']", "")


# -- the program ----------------------------------------------------------------------


def drop_value_checks(program: ExportedProgram) -> int:
    """Erase the tensor values read only to be checked (``assert lengths.max().item() <=
    n``: an ``item`` whose number feeds nothing but run-time assertions), as a TorchScript
    trace drops such Python checks; what the model computes is unchanged. Returns how many
    values were dropped (logged)."""
    graph = program.graph
    dropped = 0
    for node in list(graph.nodes):
        if node.op == "call_function" and _short_name(node) in ("item", "_local_scalar_dense"):
            chain = _checks_only(node)
            if chain is not None:
                for n in reversed(chain):
                    graph.erase_node(n)
                dropped += 1
                log.info("a value read only by a check is dropped: %s", node_source_line(node) or node.name)
    if dropped:
        graph.lint()
    return dropped


def _op_name(node: torch.fx.Node) -> str:
    """``aten::item`` for an aten op; a Python function's name otherwise."""
    target = node.target
    return str(getattr(getattr(target, "_schema", None), "name", "") or getattr(target, "__name__", target))


def _short_name(node: torch.fx.Node) -> str:
    return _op_name(node).split("::")[-1]


def _checks_only(start: torch.fx.Node) -> list[torch.fx.Node] | None:
    """``start`` and the Python number ops and checks it feeds (in graph order), when all
    its readers end in run-time checks; None when one computes something else."""
    from t2n.frontend.export.symbolic import RUNTIME_CHECKS

    found: list[torch.fx.Node] = []
    todo = [start]
    while todo:
        node = todo.pop()
        if node in found:
            continue
        found.append(node)
        for user in node.users:
            is_check = f"aten::{_short_name(user)}" in RUNTIME_CHECKS
            is_number_op = user.op == "call_function" and not isinstance(user.meta.get("val"), torch.Tensor) \
                and getattr(user.target, "__module__", "") in ("_operator", "operator", "torch")
            if not (is_check or is_number_op):
                return None
            todo.append(user)
    order = {n: i for i, n in enumerate(start.graph.nodes)}
    return sorted(found, key=order.__getitem__)


def refuse_program(program: ExportedProgram) -> None:
    """Every construct of ``program`` t2n has no IR for (higher-order ops, data-dependent
    sizes), listed in one :class:`ExportFrontendError`."""
    drop_value_checks(program)
    problems: list[tuple[str, str]] = []
    seen: set[Any] = set()  # data-dependent sizes already reported where they are made
    for node in program.graph.nodes:
        construct = _construct_of(node, seen)
        if construct:
            where = _module_path(node)
            source = node_source_line(node)
            at = "".join([f" in module '{where}'" if where else "", f" at {source}" if source else ""])
            problems.append((f"{construct}{at}", source))
    if not problems:
        return
    lines = "\n".join(f"  - {p}" for p, _ in problems)
    first = problems[0][0].split(" in module")[0].split(" at ")[0]
    raise ExportFrontendError(
        f"the exported program holds constructs t2n cannot export:\n{lines}\n{USE_JIT}: it records the "
        "branch and the sizes the example inputs take (reported as SpecializedTraceWarning), or runs a "
        "scripted module's loops", construct=first, source=problems[0][1])


def _construct_of(node: torch.fx.Node, seen: set[Any]) -> str:
    """What ``node`` is that t2n cannot export, or ``""``. A size made from tensor data
    is named once, at the node that makes it (``seen`` holds those already named)."""
    if node.op != "call_function":
        return ""
    target = node.target
    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"control flow torch.ops.higher_order.{target.name()}"
    name = _op_name(node)
    fresh = _unbacked(node.meta.get("val")) - seen
    seen |= fresh
    if _short_name(node) in _DATA_DEPENDENT_OPS:
        return f"a data-dependent value or size ({name})"
    if fresh and name not in DATA_SIZED_OPS:
        return f"a size made from tensor data ({name})"
    return ""


def _unbacked(val: Any) -> set[Any]:
    """The data-dependent (unbacked) size symbols in a node's example value."""
    if isinstance(val, (list, tuple)):
        return set().union(*(_unbacked(v) for v in val)) if val else set()
    if isinstance(val, (torch.Tensor, torch.SymInt)):
        return set(free_unbacked_symbols(val))
    return set()
