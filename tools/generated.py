"""Tables the tools write into documentation pages, between two marker lines."""

from __future__ import annotations

import sys
from pathlib import Path


def write_between(page: Path, begin: str, end: str, body: str, check: bool, stale: str) -> int:
    """Put ``body`` between the ``begin`` and ``end`` lines of ``page``; with ``check``,
    write nothing and return 1 (printing ``stale``) when the page differs. 0 when done."""
    text = page.read_text()
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < 0:
        print(f"{page} has no {begin} ... {end} markers", file=sys.stderr)
        return 1
    new = text[:start + len(begin)] + "\n" + body + "\n" + text[stop:]
    if check:
        if new != text:
            print(stale, file=sys.stderr)
            return 1
        return 0
    page.write_text(new)
    return 0
