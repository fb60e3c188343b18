"""The library releases t2n declares are the ones its tests run on: pyproject's ranges
for torch, transformers and NeMo agree with what t2n checks at run time, and an export
with a release outside them warns, naming the range."""

from __future__ import annotations

import re
import tomllib
import warnings
from pathlib import Path

import pytest

from t2n.reference.releases import TESTED, UntestedReleaseWarning, check_release

ROOT = Path(__file__).resolve().parents[1]


def _declared(requirement: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """``"x>=5.23,<5.26"`` → ((5, 23), (5, 25)): the floor and the newest minor allowed."""
    low = re.search(r">=(\d+)\.(\d+)", requirement)
    high = re.search(r"<(\d+)\.(\d+)", requirement)
    assert low and high, requirement
    return (int(low[1]), int(low[2])), (int(high[1]), int(high[2]) - 1)


def _requirements() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = [r for group in project["optional-dependencies"].values() for r in group]
    return [*project["dependencies"], *extras]


def test_pyproject_declares_the_tested_ranges() -> None:
    from t2n.frontend.torch_private import SUPPORTED_RANGE

    requirements = _requirements()
    torch_req = next(r for r in requirements if r.startswith("torch>"))
    assert _declared(torch_req) == SUPPORTED_RANGE
    for name, dist in (("transformers", "transformers"), ("nemo_toolkit", "nemo-toolkit")):
        found = [r for r in requirements if re.match(rf"{dist}(\[.*\])?[<>=]", r)]
        assert found and all(_declared(r) == TESTED[name] for r in found), (name, found)


def test_constraints_pin_a_tested_release() -> None:
    pins = dict(line.split("==") for line in (ROOT / "constraints.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    for name, dist in (("transformers", "transformers"), ("nemo_toolkit", "nemo-toolkit")):
        assert check_release(name, pins[dist])


@pytest.mark.parametrize("version", ["5.22.2", "5.26.0", "4.57.1", "6.0.0"])
def test_untested_transformers_warns_with_the_range(version: str) -> None:
    with pytest.warns(UntestedReleaseWarning, match=rf"transformers {version} .*5\.23 to 5\.25\.x"):
        assert not check_release("transformers", version)


def test_tested_transformers_is_quiet() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for version in ("5.23.0", "5.24.1", "5.25.0"):
            assert check_release("transformers", version)
