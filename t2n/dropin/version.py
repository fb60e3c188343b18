"""Target versions given as text, as a tuple of ints, or as a parsed version object.

Scripts written for other exporters pin tract with a parsed version object
(``SemanticVersion.from_str("0.23.0")``, ``packaging.version.Version("0.23.0")``);
targets keep the version as the text ``"0.23.0"`` so that it prints, compares and
hashes the same whichever way it was given.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import attrs

from t2n.errors import InvalidArgumentError

_TEXT = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?\Z")


def version_text(value: object, what: str = "version") -> str:
    """``"0.23.0"`` from ``"0.23.0"``, ``(0, 23, 0)``, or an object with integer
    ``major``, ``minor`` and ``patch`` (or ``micro``) attributes. Text is returned as
    given (the target checks its form); anything else is an ``InvalidArgumentError``
    naming ``what``."""
    if isinstance(value, str):
        return value
    if isinstance(value, tuple) and 2 <= len(value) <= 3 and all(_natural(p) for p in value):
        return ".".join(str(p) for p in (*value, 0)[:3])
    parts = [getattr(value, "major", None), getattr(value, "minor", None),
             getattr(value, "patch", getattr(value, "micro", None))]
    if all(_natural(p) for p in parts) and not isinstance(value, (int, float)):
        return ".".join(str(p) for p in parts)
    if isinstance(value, (int, float)):
        from t2n.backends.target import parse_version

        parse_version(value, what)  # raises, with the float hint
    raise InvalidArgumentError(
        f"{what} must be a string such as '0.23.9', a tuple such as (0, 23, 9) or a version "
        f"object with major, minor and patch (or micro) numbers; got {type(value).__name__} {value!r}"
    )


def _natural(part: object) -> bool:
    return isinstance(part, int) and not isinstance(part, bool) and part >= 0


@functools.total_ordering
@attrs.frozen
class SemanticVersion:
    """A ``MAJOR.MINOR.PATCH`` version, comparable with others and with text
    (``SemanticVersion.from_str("0.23.0") < "0.23.9"``); accepted wherever a target
    takes a version."""

    major: int
    minor: int
    patch: int = 0

    @classmethod
    def from_str(cls, text: str) -> SemanticVersion:
        m = _TEXT.match(text.strip()) if isinstance(text, str) else None
        if m is None:
            raise InvalidArgumentError(
                f"cannot read version {text!r}: write it as MAJOR.MINOR or MAJOR.MINOR.PATCH, like '0.23.9'"
            )
        major, minor, patch = (int(g) for g in m.groups(default="0"))
        return cls(major, minor, patch)

    def to_str(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    def __str__(self) -> str:
        return self.to_str()

    def _key(self, other: Any) -> tuple[int, int, int] | None:
        if isinstance(other, str):
            other = SemanticVersion.from_str(other)
        if isinstance(other, SemanticVersion):
            return (other.major, other.minor, other.patch)
        return None

    def __eq__(self, other: object) -> bool:
        key = self._key(other)
        return key is not None and key == (self.major, self.minor, self.patch)

    def __lt__(self, other: object) -> bool:
        key = self._key(other)
        if key is None:
            return NotImplemented
        return (self.major, self.minor, self.patch) < key

    def __hash__(self) -> int:
        return hash((self.major, self.minor, self.patch))
