"""The transformers zoo as a test: every architecture of ``models.ZOO`` through both frontends
into tract, checked against PyTorch. A FAILED case (wrong numbers, an untyped exception) not
in ``known.KNOWN_FAILURES`` fails, so a regression to silently wrong artifacts fails CI; a
typed refusal is allowed, but docs/zoo.md must say so (see ``report``)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from .entry import installed
from .known import KNOWN_FAILURES
from .models import BY_NAME, ZOO
from .report import FRONTENDS, read_table
from .run import run

REGENERATE = "regenerate docs/zoo.md (the commands are at its top)"


@pytest.fixture(scope="module")
def table():
    return read_table()


@pytest.mark.slow
@pytest.mark.parametrize("frontend", FRONTENDS)
@pytest.mark.parametrize("name", [e.name for e in ZOO])
def test_zoo(name, frontend, table):
    entry = BY_NAME[name]
    if entry.needs and not installed(entry.needs):
        pytest.fail(f"{entry.needs} is not installed: run the line of .ci/run that installs it "
                    f"(into .cache/{entry.needs})")
    start = time.monotonic()
    outcome = run(entry, frontend)
    results = os.environ.get("T2N_ZOO_RESULTS")
    if results:
        Path(results).mkdir(parents=True, exist_ok=True)
        rec = dict(name=name, frontend=frontend, status=outcome.status, error=outcome.error,
                   detail=outcome.detail, seconds=round(time.monotonic() - start, 1))
        (Path(results) / f"{name}-{frontend}.json").write_text(json.dumps(rec))
    known = KNOWN_FAILURES[frontend].get(name)
    if outcome.status == "FAILED" and known is None:
        pytest.fail(f"{name} ({frontend}) FAILED: {outcome.error}: {outcome.detail}")
    if known is not None and outcome.status != "FAILED":
        pytest.fail(f"{name} ({frontend}) is {outcome.cell()} now: remove it from tests/zoo/known.py "
                    f"and {REGENERATE}")
    if not results:
        shown = table.get((name, frontend), "missing")
        assert shown == outcome.cell(), f"docs/zoo.md shows {name} ({frontend}) as {shown!r}, " \
                                        f"it is {outcome.cell()!r}: {REGENERATE}"
