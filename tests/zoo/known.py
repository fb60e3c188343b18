"""Zoo cases that are known to FAIL (a wrong artifact or an untyped exception), per frontend,
each with the reason. These are the next work of issue #39; an entry that passes again
must be removed (the test says so), and a failure not listed here fails the test."""

from __future__ import annotations

KNOWN_FAILURES: dict[str, dict[str, str]] = {
    "jit": {},
    "export": {},
}
