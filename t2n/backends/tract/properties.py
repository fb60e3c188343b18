"""tract properties that a target adds to ``graph.nnef`` (read back with tract's
``model.property_keys()`` / ``model.property(key)``).

Identity properties (host, user, OS, Python, date, command line) are written only when
asked: they make two exports of the same model differ byte for byte.
"""

from __future__ import annotations

import datetime
import getpass
import platform
import socket
import sys
from collections.abc import Mapping
from types import MappingProxyType

from t2n.errors import InvalidArgumentError

RESERVED = frozenset({"t2n_version", "torch_version"})
"""Keys t2n writes itself; a target's own properties may not replace them."""


def checked_properties(value: object) -> Mapping[str, str]:
    """``specific_properties``: ``None`` or a mapping text key → text value."""
    if value is None:
        return MappingProxyType({})
    where = "TractNNEF(specific_properties=...)"
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(f"{where} must be a dict of str keys and str values, got {type(value).__name__}")
    out: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key or not isinstance(item, str):
            raise InvalidArgumentError(
                f"{where}: property {key!r} = {item!r}; keys and values must be non-empty-key strings "
                "(write numbers as text, e.g. {'max_tokens': '4096'})"
            )
        if key in RESERVED:
            raise InvalidArgumentError(
                f"{where}: property {key!r} is written by t2n itself; give your property another name"
            )
        if any(ord(c) < 32 for c in key + item):
            raise InvalidArgumentError(f"{where}: property {key!r} holds a control character (a line break?)")
        out[key] = item
    return MappingProxyType(out)


def identity_properties() -> dict[str, str]:
    """Who exported, where and when: for finding the origin of an artifact, at the cost
    of reproducible bytes."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):  # no login name (containers without a passwd entry)
        user = "unknown"
    found = {
        "hostname": socket.gethostname(),
        "user": user,
        "os": platform.platform(),
        "py_version": platform.python_version(),
        "export_date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "export_cmd": " ".join(sys.argv),
    }
    # one line each in graph.nnef (a command line may hold line breaks)
    return {key: "".join(c if ord(c) >= 32 else " " for c in value) for key, value in found.items()}
