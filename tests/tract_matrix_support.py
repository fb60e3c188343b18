"""The tract version matrix: environments per tract release, made once per session.

Making an environment needs the package registry. Under CI (``CI=true``) a failure to
make one fails the tests; elsewhere they are skipped with the reason.
"""

from __future__ import annotations

import os

import pytest

from t2n.backends.tract.environments import tract_python
from t2n.errors import TractEnvironmentError

VERSIONS = ["0.21.19", "0.22.4", "0.23.9"]
"""The latest patch of each tract release line t2n targets."""

_MADE: dict[str, str | TractEnvironmentError] = {}


def environment_or_skip(version: str) -> str:
    """The interpreter holding tract ``version`` (made on first use, once per session)."""
    if version not in _MADE:
        try:
            _MADE[version] = str(tract_python(version))
        except TractEnvironmentError as exc:
            _MADE[version] = exc
    made = _MADE[version]
    if isinstance(made, TractEnvironmentError):
        why = f"no environment with tract {version}: {made}"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    return made
