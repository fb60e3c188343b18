"""SIGTERM during a save is handled like Ctrl-C: the temporary files go, then the
process ends as SIGTERM ends it.

By default SIGTERM kills a Python process at once, which would leave a hidden
temporary file as large as the model. While a writer is open in the main thread and
SIGTERM has its default action, t2n installs a handler that raises
:class:`SaveTerminated` (a ``BaseException``, like ``KeyboardInterrupt``, so
``except Exception`` clauses do not swallow it) in the main thread. The writer's
abort removes its temporary files; when the last open writer is closed the default
action is restored and the signal sent again, so the process then dies of SIGTERM as
it would have (exit status -15, ``143`` in a shell; ``finally`` blocks and ``atexit``
handlers above the save do not run, as with the default action).

A handler the program installed itself (or ``SIG_IGN``) is left alone: the program
decides, and an exception its handler raises aborts the save cleanly like any other.
Writers opened in other threads install nothing (Python runs handlers in the main
thread only); if such a process is killed, the next save to the same destination
removes what it left (see :mod:`t2n.serialize.staging`).

While a complete artifact is moved into place, and while an aborted save is cleaned
up, SIGTERM and Ctrl-C are held back (:func:`held`) and acted on right after, so the
destination is never left half-replaced and cleanup is never cut short.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any


class SaveTerminated(BaseException):
    """SIGTERM arrived while t2n was writing an artifact (raised in the main thread)."""


class _State:
    writers = 0
    installed = False
    terminated = False
    holding = 0
    held: list[int] = []


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _terminate_now() -> None:
    """Restore the default action of SIGTERM and send it to this process."""
    _State.installed = False
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    if _State.holding:
        _State.held.append(signum)
        return
    if _State.writers == 0:  # no save left to clean up
        _terminate_now()
        return
    _State.terminated = True
    raise SaveTerminated("SIGTERM while writing an artifact: its temporary files are removed, then "
                         "the process ends as SIGTERM ends it")


def writer_opened() -> bool:
    """Called when a writer opens; True when it was counted (main thread only), and
    then :func:`writer_closed` must follow."""
    if not _in_main_thread():
        return False
    if _State.writers == 0 and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)
        _State.installed = True
    _State.writers += 1
    return True


def writer_closed() -> None:
    """Called when a counted writer is committed or aborted (its files cleaned up).

    When it was the last one, the default action of SIGTERM comes back; if SIGTERM
    arrived meanwhile, the process then ends as SIGTERM ends it.
    """
    _State.writers = max(0, _State.writers - 1)
    if _State.writers or not _in_main_thread():
        return
    if _State.terminated:
        _State.terminated = False
        _terminate_now()
    elif _State.installed and signal.getsignal(signal.SIGTERM) is _on_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _State.installed = False


def _hold(signum: int, frame: FrameType | None) -> None:
    _State.held.append(signum)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """SIGINT and SIGTERM are recorded, not acted on, inside this block (main thread,
    and only where their handler is Python's default or t2n's), then delivered."""
    if not _in_main_thread():
        yield
        return
    saved: dict[signal.Signals, Any] = {}
    for sig, usual in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, _on_sigterm)):
        current = signal.getsignal(sig)
        if current is usual or current is signal.SIG_DFL:
            saved[sig] = signal.signal(sig, _hold)
    _State.holding += 1
    try:
        yield
    finally:
        _State.holding -= 1
        for held_sig, handler in saved.items():
            signal.signal(held_sig, handler)
        if not _State.holding:
            pending, _State.held = _State.held, []
            for signum in dict.fromkeys(pending):
                signal.raise_signal(signum)


__all__ = ["SaveTerminated", "held", "writer_opened", "writer_closed"]
