"""The names given for inputs and outputs, held against the tensors the trace kept.

Only tensors become inputs and outputs of graph.nnef. A name given for an argument or
a returned value that is not a tensor (``None``, an int, a flag) has nothing to name:
with ``check_io_names_qte_match=True`` (the default) that is an
:class:`~t2n.errors.IONamesMismatchError` naming each such name and what the model
had in its place; with ``False`` those names are dropped (logged as a warning) and the
others name the tensors they stand beside. t2n never drops a *tensor* input, even one
the model does not use or only reads the size of: it stays an input of graph.nnef, so
given names keep matching.

``allow_same_io_names=True`` lets an output carry the name of an input when it returns
that input unchanged (a pass-through, as some toolkits expect): graph.nnef then lists
the same tensor as input and output, which tract runs. The Khronos parser refuses a
graph whose result is also a parameter, so on Khronos NNEF it is a
:class:`~t2n.errors.SameIONameError`, as is a same-named output the model computes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from t2n.backends.target import Target
from t2n.errors import IONamesMismatchError, SameIONameError
from t2n.frontend.io import Spec, io_names
from t2n.frontend.prefix_names import PrefixNames, describe, expand
from t2n.ir import Graph, Value

log = logging.getLogger("t2n")


@attrs.frozen
class Position:
    """One place of the model's inputs or outputs: a tensor, or something else."""

    where: str
    tensor: bool
    held: str = ""


def positions(spec: Spec, what: str) -> list[Position]:
    """Every leaf of ``spec`` (tensors and the rest) depth-first, described for a user."""
    found: list[Position] = []

    def walk(node: Spec, path: tuple[object, ...]) -> None:
        if node.kind == "leaf":
            found.append(Position(_where(path, what), True))
        elif node.kind == "const":
            found.append(Position(_where(path, what), False, _held(node.value)))
        else:
            keys = node.keys if node.kind in ("dict", "mapping") else range(len(node.children))
            for key, child in zip(keys, node.children):
                walk(child, (*path, key))

    walk(spec, ())
    return found


def _where(path: tuple[object, ...], what: str) -> str:
    if what == "input":
        if not path:
            return "the arguments"
        head, rest = path[0], path[1:]
        if head == 0 and rest:
            base, rest = f"argument {rest[0]}", rest[1:]
        elif head == 1 and rest:
            base, rest = f"keyword argument {rest[0]!r}", rest[1:]
        else:
            base = "argument"
    else:
        base = "the output" if not path else f"output {path[0]!r}" if isinstance(path[0], str) else f"output {path[0]}"
        rest = path[1:]
    return base + "".join(f"[{k!r}]" for k in rest)


def _held(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def matched_names(given: Sequence[str] | None, tensors: int, spec: Spec | None, what: str, *,
                  check: bool) -> list[str] | None:
    """``given`` with one name per traced tensor (names of non-tensor places dropped when
    ``check`` is False), or an :class:`IONamesMismatchError` saying which names do not
    match and why."""
    if given is None or len(given) == tensors:
        return None if given is None else list(given)
    places = positions(spec, what) if spec is not None else []
    dropin = describe(given, spec, what)
    if len(places) == len(given) and sum(p.tensor for p in places) == tensors:
        dropped = [(n, p) for n, p in zip(given, places) if not p.tensor]
        listed = "; ".join(f"{n!r} names {p.where}, which is {p.held}, not a tensor" for n, p in dropped)
        if check:
            raise IONamesMismatchError(
                f"{len(given)} {what} names given but the model has {tensors} {what} tensors: "
                f"{listed}{dropin}. Only tensors are {what}s of graph.nnef. What to do: remove "
                f"{'these names' if len(dropped) > 1 else 'this name'} from {what}_names, or pass "
                f"check_io_names_qte_match=False to drop {'them' if len(dropped) > 1 else 'it'}"
            )
        log.warning("check_io_names_qte_match=False: %s name(s) dropped: %s", what, listed)
        return [n for n, p in zip(given, places) if p.tensor]
    traced = ", ".join(p.where for p in places if p.tensor) or "none"
    others = "; ".join(f"{p.where} is {p.held}" for p in places if not p.tensor)
    why = f" (not tensors, so not {what}s: {others})" if others else ""
    if check or len(given) < tensors:
        raise IONamesMismatchError(
            f"{len(given)} {what} names given but the model has {tensors} {what} tensors "
            f"(in order: {traced}){why}{dropin}; give exactly one name per {what} tensor"
            + ("" if len(given) < tensors else ", or pass check_io_names_qte_match=False to keep "
               "the first ones")
        )
    log.warning("check_io_names_qte_match=False: %s names %s dropped (the model has %d %s tensors%s)",
                what, list(given[tensors:]), tensors, what, why)
    return list(given[:tensors])


def same_names(inputs: Sequence[str], output_names: Sequence[str] | None, *, allow: bool,
               target: Target) -> tuple[str, ...]:
    """The given output names that are also input names, if that is allowed here (by the
    call's ``allow_same_io_names`` and by ``target``)."""
    same = tuple(n for n in output_names or () if n in inputs)
    if not same:
        return ()
    if not allow:
        raise SameIONameError(
            f"output name {same[0]!r} is also an input name: graph.nnef needs distinct names "
            "for inputs and outputs (an output that returns an input unchanged is written as "
            "a copy, under its own name); choose another output name, or pass "
            "allow_same_io_names=True if that output returns the input unchanged"
        )
    if not target.allows_same_io_names:
        raise SameIONameError(
            f"output name {same[0]!r} is also an input name, which {target} cannot express "
            "(its graph.nnef cannot list a tensor as both input and output); choose another "
            "output name (the output is then a copy of the input), or export to TractNNEF"
        )
    return same


def pass_through(graph: Graph, names: Sequence[str], input_names: Sequence[str],
                 output_names: Sequence[str]) -> None:
    """Make each output named like an input *be* that input (the graph's outputs are
    set to the input values), or raise :class:`SameIONameError` if the model computes it."""
    if not names:
        return
    outputs = list(graph.outputs)
    for i, name in enumerate(output_names):
        if name not in names:
            continue
        source = graph.inputs[list(input_names).index(name)]
        value = _through_identities(outputs[i])
        if value is not source:
            op = value.producer
            how = f"computed by '{op.kind}' ({op.loc})" if op is not None else f"the input {value.name!r}"
            raise SameIONameError(
                f"output {name!r} has the name of input {name!r} but is not that input unchanged: "
                f"it is {how}. allow_same_io_names is only for outputs that return the input "
                "as it came; give this output another name"
            )
        outputs[i] = source
    graph.set_outputs(outputs)
    graph.info.same_io_names = tuple(names)


def _through_identities(v: Value) -> Value:
    while v.producer is not None and v.producer.kind == "identity":
        v = v.producer.inputs[0]
    return v


def checked_io_names(input_names: Sequence[str] | None, output_names: Sequence[str] | None, traced: Any,
                     args: tuple[Any, ...], kwargs: Mapping[str, Any] | None, target: Target, *,
                     check: bool, allow_same: bool) -> tuple[list[str], list[str], tuple[str, ...]]:
    """The names of the graph's inputs and outputs (see :func:`t2n.frontend.io.io_names`),
    after holding the given ones against the traced tensors, and the output names that
    are also input names (allowed pass-throughs)."""
    from t2n.frontend.io import flatten

    input_spec = flatten((args, dict(kwargs or {})))[2] if traced.input_paths else None
    if isinstance(input_names, PrefixNames):
        input_names = (expand(input_names, input_spec, "input") if input_spec is not None
                       else list(input_names) or None)
    if isinstance(output_names, PrefixNames):  # names per top-level output (the drop-in's)
        output_names = (expand(output_names, traced.output_spec, "output") if traced.output_spec is not None
                        else list(output_names) or None)
    given_ins = matched_names(input_names, len(traced.input_paths), input_spec, "input", check=check)
    given_outs = matched_names(output_names, len(traced.output_paths), traced.output_spec, "output", check=check)
    ins, _ = io_names(given_ins, None, traced.input_paths, [], rules=target.identifier_rules)
    same = same_names(ins, given_outs, allow=allow_same, target=target)
    stand_ins = _stand_ins(given_outs, same, ins) if given_outs is not None else None
    ins, outs = io_names(given_ins, stand_ins, traced.input_paths, traced.output_paths,
                         rules=target.identifier_rules)
    if given_outs is not None and same:
        outs = list(given_outs)
    return ins, outs, same


def _stand_ins(outputs: Sequence[str], same: Sequence[str], inputs: Sequence[str]) -> list[str]:
    """``outputs`` with each name in ``same`` replaced by a free one, so that the usual
    distinct-names rule checks everything else."""
    taken = {*outputs, *inputs}
    out: list[str] = []
    for name in outputs:
        if name in same:
            stand, i = f"{name}_out", 1
            while stand in taken:
                stand, i = f"{name}_out{i}", i + 1
            taken.add(stand)
            name = stand
        out.append(name)
    return out
