"""Debug bundles: what a failed check leaves behind so that it can be reproduced.

A bundle holds the artifact the engine ran (``model/`` or the archive), the inputs
(``inputs.npz``), PyTorch's outputs (``expected.npz``), the engine's outputs when it
gave any (``got.npz``), the IR with source locations (``ir.txt``) and what happened
(``report.txt``). Writing it must never hide the error it documents: a folder that
cannot be written gives a note in the error message, not an ``OSError``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np


@attrs.frozen
class BundleContent:
    """What goes into a bundle (arrays by name; ``got`` is None when the engine gave nothing)."""

    model: Path
    inputs: Mapping[str, np.ndarray]
    expected: Mapping[str, np.ndarray]
    got: Mapping[str, np.ndarray] | None
    ir_text: str
    report_text: str


@attrs.frozen
class BundleResult:
    """Where the bundle went (None: nowhere) and the sentence for the error message."""

    path: str | None
    note: str


def write_bundle(content: BundleContent, debug_dir: str | os.PathLike[str] | None) -> BundleResult:
    """Write the bundle to ``debug_dir`` (or a new temporary folder); never raises OSError.

    When ``debug_dir`` cannot be written, the bundle goes to a temporary folder instead
    and the note says why.
    """
    if debug_dir is not None:
        wanted = Path(debug_dir)
        try:
            _write_into(wanted, content)
            return BundleResult(str(wanted), f"Debug bundle written to {wanted}")
        except OSError as exc:
            failure = f"the debug bundle could not be written to {wanted} ({_reason(exc)})"
    else:
        failure = ""
    try:
        tmp = Path(tempfile.mkdtemp(prefix="t2n-debug-"))
        _write_into(tmp, content)
    except OSError as exc:
        why = f"the debug bundle could not be written to a temporary folder either ({_reason(exc)})"
        return BundleResult(None, f"Note: {failure}; {why}." if failure else f"Note: {why}.")
    if failure:
        return BundleResult(str(tmp), f"Note: {failure}; it was written to {tmp} instead.")
    return BundleResult(
        str(tmp), f"Debug bundle written to {tmp} (a temporary folder; pass debug_dir= to choose where)"
    )


def _reason(exc: OSError) -> str:
    if isinstance(exc, (NotADirectoryError, FileExistsError)):
        return f"a file is in the way: {exc}; pass debug_dir= a folder, or a path that does not exist yet"
    return f"{exc}; pass debug_dir= a folder you can write to"


def _write_into(root: Path, content: BundleContent) -> None:
    """Write every file under ``root`` (making missing parent folders); on failure
    remove what this call created."""
    top = _topmost_missing(root)
    before = set(os.listdir(root)) if top is None and root.is_dir() else set()
    try:
        root.mkdir(parents=True, exist_ok=True)
        if content.model.is_dir():
            shutil.copytree(content.model, root / "model", dirs_exist_ok=True)
        else:
            shutil.copy2(content.model, root / content.model.name)
        _save_npz(root / "inputs.npz", content.inputs)
        _save_npz(root / "expected.npz", content.expected)
        if content.got is not None:
            _save_npz(root / "got.npz", content.got)
        (root / "ir.txt").write_text(content.ir_text)
        (root / "report.txt").write_text(content.report_text.rstrip("\n") + "\n")
    except OSError:
        _remove_new_entries(root, top, before)
        raise


def _topmost_missing(root: Path) -> Path | None:
    """The outermost folder of ``root``'s path that does not exist yet (None: root exists)."""
    if root.exists() or root.is_symlink():
        return None
    top = root
    while top.parent != top and not top.parent.exists():
        top = top.parent
    return top


def _remove_new_entries(root: Path, top: Path | None, before: set[str]) -> None:
    if top is not None:
        shutil.rmtree(top, ignore_errors=True)
        return
    try:
        names = set(os.listdir(root)) - before
    except OSError:
        return
    for name in names:
        entry = root / name
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def _save_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    savez: Any = np.savez
    savez(path, **dict(arrays))
