"""Length-prefixed pickle messages between t2n and its engine child process.

The parent reads with ``select`` between messages, so its pipe ends must be
unbuffered: a buffered reader would read a later message ahead into its buffer,
where ``select`` cannot see it.
"""

from __future__ import annotations

import pickle
from typing import Any


def _read_exact(f: Any, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = f.read(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def recv(f: Any) -> Any:
    head = _read_exact(f, 8)
    if head is None:
        raise EOFError
    body = _read_exact(f, int.from_bytes(head, "little"))
    if body is None:
        raise EOFError
    return pickle.loads(body)


def _write_all(f: Any, data: bytes) -> None:
    """Write every byte: an unbuffered file may take only part of a large write."""
    view = memoryview(data)
    while view:
        written = f.write(view)
        view = view[written if written is not None else 0:]


def send(f: Any, obj: Any) -> None:
    body = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    _write_all(f, len(body).to_bytes(8, "little") + body)
    f.flush()
