"""Names per top-level argument or output, as the widely used exporter takes them.

``export_model_to_nnef(..., input_names=["a", "tup"])`` names the *arguments* of the
forward, not its tensors: a tensor argument is named as given, a container argument
(tuple, list, dict, dataclass) names each tensor inside it by the given name followed by
its position or key (``tup_0``, ``tup_1``, ``d_p_q`` for ``d["p"]["q"]``; positions count
the non-tensor elements too), a name given for a non-tensor argument (an int, a bool,
``None``) is dropped, arguments past the given names are named ``input_<i>`` (outputs
``output_<i>``) the same way, and names past the arguments are ignored. For outputs a
tuple or list return holds one output per element; any other return (a tensor, a dict,
a dataclass, a ``ModelOutput``) is the one output ``0``.

``t2n.compile`` takes one name per tensor instead; its refusal of such names says how
the drop-in entry point would have named them (:func:`t2n.frontend.io_match.matched_names`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from t2n.frontend.io import Spec

log = logging.getLogger("t2n")


class PrefixNames(tuple[str, ...]):
    """Names given per top-level argument or output (the drop-in's ``input_names`` /
    ``output_names``), expanded against the traced structure by :func:`expand`."""


def kept_kind(given: object, names: Sequence[str]) -> tuple[str, ...]:
    """``names`` (checked) as a tuple, still :class:`PrefixNames` if ``given`` was."""
    return PrefixNames(names) if isinstance(given, PrefixNames) else tuple(names)


def top_level(spec: Spec, what: str) -> list[Spec]:
    """The argument or output positions of ``spec`` (``what`` is "input" or "output")."""
    if what == "input":  # spec of (args, kwargs)
        args, kwargs = spec.children
        return [*args.children, *kwargs.children]
    return list(spec.children) if spec.kind in ("tuple", "list") else [spec]


def expand(given: Sequence[str] | None, spec: Spec, what: str) -> list[str]:
    """One name per tensor of ``spec``, in flattening order (see the module doc); names
    that name nothing are logged."""
    names, extra, dropped = _expanded(given, spec, what)
    if extra:
        log.warning("%s_names %s name nothing (the model has %d %s positions); they are ignored",
                    what, extra, len(top_level(spec, what)), what)
    if dropped:
        log.info("%s_names %s name no tensor (non-tensor values are not %ss of graph.nnef): dropped",
                 what, dropped, what)
    return names


def _expanded(given: Sequence[str] | None, spec: Spec, what: str) -> tuple[list[str], list[str], list[str]]:
    """(names, given names past the positions, given names of non-tensor positions)."""
    places = top_level(spec, what)
    given = list(given or ())
    out: list[str] = []
    dropped: list[str] = []
    for i, place in enumerate(places):
        name = given[i] if i < len(given) else f"{what}_{i}"
        found = _names(place, name)
        if not found and i < len(given):
            dropped.append(name)
        out += found
    return out, given[len(places):], dropped


def _names(node: Spec, prefix: str) -> list[str]:
    if node.kind == "leaf":
        return [prefix]
    if node.kind == "const":
        return []
    keys = node.keys if node.kind in ("dict", "mapping") else range(len(node.children))
    out: list[str] = []
    for key, child in zip(keys, node.children):
        out += _names(child, f"{prefix}_{_part(key)}")
    return out


def _part(key: object) -> str:
    """A position or key as a piece of an identifier."""
    return re.sub(r"\W", "_", str(key))


def describe(given: Sequence[str], spec: Spec | None, what: str) -> str:
    """How ``export_model_to_nnef`` would name the tensors with ``given``, for an error
    message (empty when the structure is flat: the names would be the same)."""
    if spec is None:
        return ""
    if all(p.kind == "leaf" for p in top_level(spec, what)):
        return ""
    names = _expanded(given, spec, what)[0]
    return (f" (given per {'argument' if what == 'input' else 'output'}, as "
            f"t2n.export_model_to_nnef takes them, they would name the tensors {names})")
