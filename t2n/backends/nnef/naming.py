"""Naming schemes: how the identifiers of graph.nnef are made.

Inputs and outputs always keep the names the artifact reports (``input_names`` /
``output_names``), ``.dat`` labels always keep the parameters' dotted names, and every
identifier is unique and valid for the target (:mod:`t2n.ir.identifiers`). The scheme
decides only how the other tensors are named:

* ``natural_verbose`` (default): parameters by their path (``encoder_0_fc1_weight``),
  computed tensors by the module that computes them and the IR op
  (``encoder_0_fc1_matmul``, then ``encoder_0_fc1_matmul_1`` in the same module);
  tensors of the top-level module by the op alone.
* ``natural_verbose_camel``: the same words in camelCase (``encoder0Fc1Matmul``).
* ``raw``: the names the TorchScript trace gave the values (their debug names, such
  as ``input_1`` or ``v17``); tensors the trace had no name for keep their IR name.
* ``numeric``: as short as possible: ``v0``, ``v1``… in the order graph.nnef defines
  them.

Names depend only on the graph, so the same model gives the same graph.nnef, byte for
byte, at every export.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping

from t2n.errors import InvalidArgumentError
from t2n.ir import Value
from t2n.ir.graph import sanitize_name

NAMING_SCHEMES = ("raw", "natural_verbose", "natural_verbose_camel", "numeric")
"""The accepted values of ``nnef_variable_naming_scheme``."""

DEFAULT_NAMING_SCHEME = "natural_verbose"


class VariableNamingScheme(enum.StrEnum):
    """The schemes as an enum, for scripts that name them so; the strings work too."""

    RAW = "raw"
    NATURAL_VERBOSE = "natural_verbose"
    NATURAL_VERBOSE_CAMEL = "natural_verbose_camel"
    NUMERIC = "numeric"

_COUNTED = re.compile(r"_\d+\Z")

_UNPREFIXED_KINDS = frozenset(["variable", "const"])
"""Op kinds whose values are already named for what they hold (a parameter's path)."""


def check_naming_scheme(value: object) -> str:
    """The scheme named by ``value`` (a string, or a ``str`` enum member), or an
    :class:`InvalidArgumentError` listing the schemes."""
    name = getattr(value, "value", value)
    if isinstance(name, str) and name in NAMING_SCHEMES:
        return name
    raise InvalidArgumentError(
        f"nnef_variable_naming_scheme must be one of {', '.join(map(repr, NAMING_SCHEMES))}; "
        f"got {value!r}"
    )


def camel(text: str) -> str:
    """``encoder_0_fc1_matmul`` → ``encoder0Fc1Matmul`` (the first word as it is)."""
    words = [w for w in text.split("_") if w]
    if not words:
        return text
    return words[0] + "".join(w[:1].upper() + w[1:] for w in words[1:])


class Namer:
    """The base names of one render under one scheme (uniqueness and the target's
    identifier rules are applied after, by the emission context)."""

    def __init__(self, scheme: str = DEFAULT_NAMING_SCHEME,
                 traced_names: Mapping[Value, str] | None = None) -> None:
        self.scheme = check_naming_scheme(scheme)
        self.traced_names = traced_names or {}
        self._count = 0

    def value_hint(self, v: Value) -> str:
        """What ``v`` is called before :meth:`form`: its trace name (``raw``), its
        module path and IR name (natural schemes), or its IR name."""
        if self.scheme == "raw":
            return self.traced_names.get(v, v.name)
        op = v.producer
        module = sanitize_name(op.loc.module) if op is not None and op.loc.module else ""
        if not module or op is None or op.kind in _UNPREFIXED_KINDS or v.name.startswith(module + "_"):
            return v.name
        # the IR's `_N` counts over the whole graph; within a module the count restarts
        return f"{module}_{_COUNTED.sub('', v.name)}"

    def form(self, hint: str) -> str:
        """The base identifier for ``hint`` under the scheme."""
        if self.scheme == "numeric":
            name = f"v{self._count}"
            self._count += 1
            return name
        base = sanitize_name(hint)
        return camel(base) if self.scheme == "natural_verbose_camel" else base
