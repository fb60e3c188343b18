"""``SemanticVersion``: the parsed version object scripts written for the widely used
exporter pin tract with (``SemanticVersion.from_str("0.23.0")``). A target accepts it,
like any object with ``major``, ``minor`` and ``patch`` numbers, and keeps the version
as text (:func:`t2n.backends.target.version_text`).
"""

from __future__ import annotations

import functools
import re
from typing import Any

import attrs

from t2n.errors import InvalidArgumentError

_TEXT = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?\Z")


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
