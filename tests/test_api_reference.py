"""Every keyword of the entry points is documented once, in an ``Args:`` section, and
docs/api.md is what that gives."""

import pytest

from tools.api_reference import PAGE_PATH, documented_args, entry_points, generate, parameters


@pytest.mark.parametrize("name,fn", entry_points(), ids=[n for n, _ in entry_points()])
def test_every_parameter_has_an_args_entry(name, fn):
    documented = documented_args(fn)
    missing = [p for p in parameters(fn) if p not in documented]
    unknown = [p for p in documented if p not in parameters(fn)]
    assert not missing and not unknown, f"{name}: undocumented {missing}, documented but absent {unknown}"


def test_api_page_is_current():
    assert PAGE_PATH.read_text() == generate(), "docs/api.md is stale: run `python -m tools.api_reference`"
