"""Checking the emitters and NNEF fragments a user adds to a target
(``Target.with_emitters``), so that a mistake is named when the target is made,
not as a failure in the middle of rendering a model."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from t2n.errors import InvalidArgumentError
from t2n.ir.identifiers import STANDARD_IDENTIFIERS

if TYPE_CHECKING:
    from t2n.backends.nnef.context import Emitter


def emitter_map(value: object) -> dict[str, Emitter]:
    """``emitters=``: a mapping of IR op kinds (strings) to callables ``fn(ctx, op)``."""
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(
            f"emitters must be a dict of IR op kind → emitter function fn(ctx, op), got {type(value).__name__}"
        )
    for kind, fn in value.items():
        if not isinstance(kind, str) or not kind:
            raise InvalidArgumentError(f"emitters: the key {kind!r} is not an IR op kind (a non-empty string)")
        if not callable(fn):
            raise InvalidArgumentError(
                f"emitters[{kind!r}] is a {type(fn).__name__}, not a function fn(ctx, op) that writes the op"
            )
    return dict(value)


def fragment_map(value: object) -> dict[str, str]:
    """``fragments=``: fragment name → its NNEF text (a ``.nnef`` file's path is read)."""
    if not isinstance(value, Mapping):
        raise InvalidArgumentError(
            f"fragments must be a dict of fragment name → NNEF text (or a .nnef file's path), got {type(value).__name__}"
        )
    return {name: _fragment_text(name, source) for name, source in value.items()}


def _fragment_text(name: object, source: object) -> str:
    where = f"fragments[{name!r}]"
    problem = STANDARD_IDENTIFIERS.problem(name)
    if problem:
        raise InvalidArgumentError(f"{where}: the fragment name {name!r} {problem}")
    assert isinstance(name, str)
    if isinstance(source, os.PathLike):
        try:
            text = Path(source).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidArgumentError(f"{where}: cannot read the fragment file {os.fspath(source)!r}: {exc}") from exc
    elif isinstance(source, str):
        text = source
    else:
        raise InvalidArgumentError(
            f"{where} is a {type(source).__name__}; give the fragment's NNEF text (a str) or a .nnef file's path"
        )
    if not re.search(rf"^\s*fragment\s+{re.escape(name)}\s*[(<]", text, flags=re.M):
        raise InvalidArgumentError(
            f"{where}: the text does not define 'fragment {name}(...)'; it should read "
            f"'fragment {name}( x: tensor<scalar> ) -> ( y: tensor<scalar> ) {{ ... }}'"
        )
    return text.strip()


def checked_emitters(table: Mapping[str, Emitter], emitters: object, override: bool,
                     owner: str) -> dict[str, Emitter]:
    """``emitters`` added to a target (``owner``) whose emitters are ``table``: replacing
    one it has takes ``override``."""
    new = emitter_map(emitters)
    if not override:
        taken = sorted(k for k in new if k in table)
        if taken:
            fn = table[taken[0]]
            raise InvalidArgumentError(
                f"{owner} already has an emitter for IR op {taken[0]!r} "
                f"({getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}); "
                "pass override=True to replace it"
            )
    return new


def checked_fragments(has: Callable[[str], bool], fragments: object, override: bool,
                      owner: str) -> dict[str, str]:
    """``fragments`` added to a target (``owner``; ``has(name)``: it knows that fragment):
    replacing one it has takes ``override``."""
    new = fragment_map(fragments)
    if not override:
        for name in sorted(new):
            if has(name):
                raise InvalidArgumentError(
                    f"{owner} already has an NNEF fragment {name!r}; choose another name, or "
                    "pass override=True to replace it"
                )
    return new
