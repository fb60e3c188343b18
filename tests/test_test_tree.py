"""The test tree's own invariants, which pytest does not check for us."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).parent


def test_only_the_root_conftest_lives_outside_a_package():
    """pytest imports a conftest.py of a directory without ``__init__.py`` as the top-level
    module ``conftest``: a second one replaces the root's in ``sys.modules`` and every
    ``from conftest import ...`` then depends on collection order (CI failed so)."""
    loose = sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob("conftest.py")
                   if p.parent != TESTS and not (p.parent / "__init__.py").exists())
    assert loose == []
