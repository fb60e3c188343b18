"""The releases of the libraries whose models t2n exports and checks against
(``transformers``, NeMo) that its tests run on, as ``pyproject.toml`` declares them; an
export with another release warns, naming the range (its public API may have moved, and
the export's check against that library's own model is then the only guard)."""

from __future__ import annotations

import re
import warnings

TESTED = {
    "transformers": ((5, 23), (5, 25)),
    "nemo_toolkit": ((3, 0), (3, 0)),
}
"""Oldest and newest (major, minor) release tested, per distribution (``pyproject.toml``'s
extras ``llm`` and ``nemo`` declare the same ranges)."""


class UntestedReleaseWarning(UserWarning):
    """The installed release of ``transformers`` (or NeMo) is outside the range t2n's tests
    run on."""


def release(text: str) -> tuple[int, int] | None:
    """``"5.25.0"`` → ``(5, 25)``; None when the text holds no version."""
    match = re.match(r"(\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def tested_range(library: str) -> str:
    (a, b), (c, d) = TESTED[library]
    return f"{a}.{b}.x" if (a, b) == (c, d) else f"{a}.{b} to {c}.{d}.x"


def check_release(library: str, version: str) -> bool:
    """Warn (:class:`UntestedReleaseWarning`) when ``version`` of ``library`` is outside
    :data:`TESTED`; returns whether it is inside."""
    low, high = TESTED[library]
    found = release(version)
    if found is not None and low <= found <= high:
        return True
    warnings.warn(f"{library} {version} is outside the releases t2n is tested with ({tested_range(library)}): "
                  "exports are still checked against the model in that release, but a change of its API may "
                  f"refuse them; install {library} {tested_range(library)} if an export fails",
                  UntestedReleaseWarning, stacklevel=3)
    return False


def check_transformers() -> bool:
    """:func:`check_release` for the installed ``transformers``."""
    import transformers

    return check_release("transformers", transformers.__version__)
