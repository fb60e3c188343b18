"""Run one zoo entry through one frontend and classify what happened.

``exact``: compiled and ``artifact.check()`` in tract matched PyTorch. ``refused``: t2n raised
one of its typed errors before writing an artifact (an honest "no"). ``FAILED``: anything
else, among them every ``CheckError`` (a mismatch, or tract refusing or crashing on what
t2n wrote: the artifact is wrong; its detail says whether ``compile`` warned that the trace
left something out) and every untyped exception (a t2n bug, not a refusal).
"""

from __future__ import annotations

import re
import signal
import warnings

import attrs

import t2n
from t2n.errors import CheckError, T2NError

from .models import Entry, build

TIMEOUT_S = 120  # one case; a hang is a failure, not a stuck CI job


@attrs.frozen
class Outcome:
    status: str  # exact | refused | FAILED
    error: str = ""  # the exception's class name
    detail: str = ""  # the first line of its message (the ops for unsupported-op errors)

    def cell(self) -> str:
        """The status as docs/zoo.md shows it, and as the test compares it."""
        return self.status if not self.error else f"{self.status}: {self.error}"


def _first_line(exc: BaseException) -> str:
    ops = getattr(exc, "ops", None)
    if isinstance(ops, list) and ops:
        return "ops: " + ", ".join(ops)
    lines = [line.strip(" -") for line in str(exc).strip().splitlines()]
    head = " ".join(lines[:2]) if len(lines) > 1 and lines[0].endswith(":") else (lines[0] if lines else "")
    return re.sub(r"/\S*/(site-packages|\.cache/[^/]+)/", "", head)[:160]  # no machine paths in docs/zoo.md


def _timeout(signum, frame):
    raise TimeoutError(f"over {TIMEOUT_S} s")


def run(entry: Entry, frontend: str) -> Outcome:
    """Build, compile with ``frontend`` for tract, check in tract; never raises."""
    old = signal.signal(signal.SIGALRM, _timeout)
    signal.alarm(TIMEOUT_S)
    untraced: list[warnings.WarningMessage] = []
    try:
        model, args, kwargs = build(entry)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("ignore")
            warnings.simplefilter("always", t2n.UntracedEffectWarning)
            try:
                artifact = t2n.compile(model, args, kwargs=kwargs, frontend=frontend)
            finally:
                untraced = list(seen)
            artifact.check()
        if untraced:  # the artifact matched: a false alarm of the replay, itself a finding
            return Outcome("FAILED", "UntracedEffectWarning", _first_line(untraced[0].message))
        return Outcome("exact")
    except CheckError as exc:
        warned = "warned (UntracedEffectWarning): " if untraced else ""
        return Outcome("FAILED", type(exc).__name__, warned + _first_line(exc))
    except T2NError as exc:
        return Outcome("refused", type(exc).__name__, _first_line(exc))
    except Exception as exc:  # every other outcome is what the zoo exists to find
        return Outcome("FAILED", type(exc).__name__, _first_line(exc))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
