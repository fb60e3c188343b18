"""Debug bundles: what a failed check leaves behind so that it can be reproduced.

A bundle holds the artifact the engine ran (``model/`` or the archive), the inputs
(``inputs.npz``), PyTorch's outputs (``expected.npz``), the engine's outputs when it
gave any (``got.npz``), the IR with source locations (``ir.txt``), the IR after each
pass that changed it when the compile recorded them (``ir/NNN-pass.ir``), what
happened (``report.txt``), the versions of everything involved (``versions.json``:
t2n, torch, tract, nnef, nnef-tools, numpy, Python, platform) and a replay script
(``replay.py``, reading ``replay.json``) that runs the engine again on the bundle and
prints the comparison. The bundle is a folder, or one archive when its path ends in
``.tgz``, ``.tar.gz`` or ``.tar``. Writing it must never hide the error it documents:
a path that cannot be written gives a note in the error message, not an ``OSError``.
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Mapping, Sequence
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
    ir_stages: Sequence[tuple[str, str]] = ()
    """(label, IR text) after each pass that changed the graph, in order."""
    replay: Mapping[str, Any] = attrs.field(factory=dict)
    """What ``replay.py`` needs to run the engine as the check did (see
    :mod:`t2n.check.replay`); no replay script when empty."""


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
            if archive_suffix(wanted):
                _write_archive(wanted, content)
            else:
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
        _write_extras(root, content)
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


ARCHIVE_SUFFIXES = (".tgz", ".tar.gz", ".tar")


def archive_suffix(path: Path) -> str:
    """The archive suffix of ``path`` (``""``: the bundle is a folder)."""
    return next((s for s in ARCHIVE_SUFFIXES if path.name.endswith(s) and path.name != s), "")


def _write_archive(path: Path, content: BundleContent) -> None:
    """The bundle as one archive at ``path``: built in a temporary folder, packed beside
    ``path`` and renamed into place, so a failure leaves no partial archive."""
    with tempfile.TemporaryDirectory(prefix="t2n-bundle-") as tmp:
        root = Path(tmp) / path.name.removesuffix(archive_suffix(path))
        _write_into(root, content)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
        os.close(fd)
        try:
            with tarfile.open(partial, "w") if archive_suffix(path) == ".tar" else tarfile.open(partial, "w:gz") as tar:
                tar.add(root, arcname=root.name)
            os.replace(partial, path)
        except BaseException:
            Path(partial).unlink(missing_ok=True)
            raise


def _write_extras(root: Path, content: BundleContent) -> None:
    """The IR after each pass, the versions and the replay script."""
    if content.ir_stages:
        (root / "ir").mkdir(exist_ok=True)
        for i, (label, text) in enumerate(content.ir_stages):
            (root / "ir" / f"{i:03d}-{_file_label(label)}.ir").write_text(text)
    (root / "versions.json").write_text(json.dumps(versions(), indent=2, sort_keys=True) + "\n")
    if content.replay:
        (root / "replay.json").write_text(json.dumps(dict(content.replay), indent=2, sort_keys=True) + "\n")
        (root / "replay.py").write_text(REPLAY_SCRIPT)


def _file_label(label: str) -> str:
    """A file name for a dump label (without the pass manager's own count: nested
    managers restart it, so the bundle numbers the stages itself)."""
    label = label.split("-", 1)[1] if label[:3].isdigit() and "-" in label else label
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in label)[:80]


VERSIONED = {"t2n": "t2n", "torch": "torch", "tract": "tract", "nnef": "nnef", "nnef_tools": "nnef-tools",
             "numpy": "numpy"}
"""Key in versions.json → distribution name."""


def versions() -> dict[str, str]:
    """The versions a bug report needs: packages (``"not installed"`` when absent),
    Python and the platform."""
    import platform
    from importlib import metadata

    found: dict[str, str] = {}
    for key, dist in VERSIONED.items():
        try:
            found[key] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[key] = "not installed"
    found["python"] = platform.python_version()
    found["platform"] = platform.platform()
    return found


REPLAY_SCRIPT = '''"""Run the engine again on this debug bundle and print the comparison with the
expected outputs: exit status 0 when they match, 1 when they differ, 2 when the engine
fails or crashes. Needs t2n and the engine (tract, or nnef + nnef-tools) installed.

    python replay.py [--tolerance exact|approximate|loose|very_loose]
"""

import sys
from pathlib import Path

try:
    from t2n.check.replay import main
except ImportError as exc:
    print(f"replay.py needs t2n and its engines: pip install 't2n[check]' ({exc})", file=sys.stderr)
    sys.exit(2)

if __name__ == "__main__":
    sys.exit(main([str(Path(__file__).resolve().parent), *sys.argv[1:]]))
'''
"""The ``replay.py`` written into bundles (the work is in :mod:`t2n.check.replay`)."""


class IRRecorder:
    """Keeps the IR text after each pass (the PassManager's ``dump`` hook) for a bundle."""

    def __init__(self) -> None:
        self.stages: list[tuple[str, str]] = []

    def __call__(self, label: str, graph: Any) -> None:
        from t2n.ir import print_graph

        self.stages.append((label, print_graph(graph, with_locs=True)))


def got_names(output_names: Sequence[str], count: int) -> list[str]:
    """Keys of ``got.npz``: the output names, or ``output_N`` when the engine gave another
    number of outputs."""
    return list(output_names) if count == len(output_names) else [f"output_{i}" for i in range(count)]


def replay_spec(artifact: Any, model: Path, tolerance: Any, symbols: Mapping[str, int] | None) -> dict[str, Any]:
    """``replay.json`` for a check of ``artifact`` that ran ``model`` at ``tolerance``."""
    target = artifact.target
    return {
        "engine": target.name or type(target).__name__,
        "engine_label": target.engine,
        "target": str(target),
        "model": "model" if model.is_dir() else model.name,
        "registries": list(artifact.rendered.registries),
        "symbols": dict(symbols or {}),
        "tolerance": getattr(tolerance, "value", str(tolerance)),
        "input_names": list(artifact.input_names),
        "output_names": list(artifact.output_names),
    }


def recording(dump: Callable[[str, Any], None] | None,
              recorder: IRRecorder | None) -> Callable[[str, Any], None] | None:
    """The PassManager's ``dump`` hook that also feeds ``recorder`` (either may be None)."""
    if recorder is None or dump is None:
        return dump if recorder is None else recorder

    def both(label: str, graph: Any) -> None:
        dump(label, graph)
        recorder(label, graph)

    return both
