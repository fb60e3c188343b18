"""Length-prefixed pickle messages between t2n and its engine child process."""

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


def send(f: Any, obj: Any) -> None:
    body = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(len(body).to_bytes(8, "little"))
    f.write(body)
    f.flush()
