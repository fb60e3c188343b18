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
A bundle never replaces what t2n did not write: only an empty folder or a previous
bundle (replaced whole, built under a temporary name beside it); the temporary folder
keeps the newest :data:`TEMPORARY_BUNDLES_KEPT` bundles written there.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tarfile
import tempfile
import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from t2n.errors import OverwriteRefusedError


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


TEMPORARY_BUNDLES_KEPT = 10
"""Bundles written to the temporary folder (no ``debug_dir``) that are kept: writing one
more removes the oldest of this user's beyond that number."""

TEMPORARY_PREFIX = "t2n-debug-"

BUNDLE_ENTRIES = frozenset({"model", "inputs.npz", "expected.npz", "got.npz", "ir.txt", "ir", "report.txt",
                            "versions.json", "replay.json", "replay.py"})
"""The names a bundle folder holds (besides the artifact as an archive, ``*.tar``/``*.tgz``)."""


def write_bundle(content: BundleContent, debug_dir: str | os.PathLike[str] | None) -> BundleResult:
    """Write the bundle to ``debug_dir`` (or a new temporary folder); never raises OSError.

    A bundle replaces only an empty folder or a bundle t2n wrote (whole: no part of the
    previous one is left). When ``debug_dir`` holds something else, or cannot be
    written, the bundle goes to a temporary folder instead and the note says why.
    """
    if debug_dir is not None:
        wanted = Path(debug_dir)
        try:
            refusal = why_not_bundle(wanted)
            if refusal is None:
                _write_in_place(wanted, content)
                return BundleResult(str(wanted), f"Debug bundle written to {wanted}")
            failure = (f"the debug bundle could not be written to {wanted} ({wanted} holds something "
                       f"t2n did not write: {refusal}; it was left untouched)")
        except OverwriteRefusedError as exc:  # something of the user's appeared there meanwhile
            failure = f"the debug bundle could not be written to {wanted} ({exc}; it was left untouched)"
        except OSError as exc:
            failure = f"the debug bundle could not be written to {wanted} ({_reason(exc)})"
    else:
        failure = ""
    try:
        tmp = _temporary_folder()
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


def why_not_bundle(path: Path) -> str | None:
    """Why a bundle may not be written at ``path`` (None: nothing is there, an empty
    folder, or a bundle t2n wrote, in the form ``path`` asks for)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None  # a file in the way of a parent: the write says so
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link"
    if stat.S_ISDIR(st.st_mode):
        names = os.listdir(path)
        if not names:
            return None
        foreign = sorted(n for n in names if n not in BUNDLE_ENTRIES and not archive_suffix(Path(n)))
        if foreign or "versions.json" not in names:
            shown = foreign[0] if foreign else names[0]
            return f"a folder holding {shown!r}, which is not part of a debug bundle"
        return None
    if stat.S_ISREG(st.st_mode) and archive_suffix(path) and _is_bundle_archive(path):
        return None
    return ("a file is in the way, not a debug bundle t2n wrote; pass debug_dir= a folder, or a path "
            "that does not exist yet")


def _is_bundle_archive(path: Path) -> bool:
    """A tar (or tgz) whose first member is a folder and whose second is a bundle part
    in it: what :func:`_write_archive` writes. Only two headers are read."""
    try:
        with tarfile.open(path, "r|*") as tar:
            top, part = tar.next(), tar.next()
    except (tarfile.TarError, EOFError, OSError, zlib.error):
        return False
    if top is None or part is None or not top.isdir() or "/" in top.name.strip("/"):
        return False
    folder, _, name = part.name.partition("/")
    return folder == top.name.strip("/") and name in BUNDLE_ENTRIES


def check_bundle_destination(path: Path, what: str = "debug_bundle_path") -> None:
    """Refuse, before anything is compiled, a bundle path holding something t2n did not
    write (a bundle there is replaced only by a bundle)."""
    try:
        why = why_not_bundle(path)
    except OSError:
        return  # unreadable: the bundle goes elsewhere, with a note, if a check fails
    if why is not None:
        raise OverwriteRefusedError(
            f"{what}={str(path)!r}: {path} holds something t2n did not write ({why}); a debug "
            "bundle replaces only an empty folder or a previous bundle, so it was left untouched: "
            "choose a path that does not exist yet")


def _write_in_place(wanted: Path, content: BundleContent) -> None:
    """The bundle (a folder or an archive) built under a temporary name beside ``wanted``
    and moved onto it, replacing a previous bundle whole; on failure nothing this call
    made is left (missing parent folders included)."""
    from t2n.serialize.staging import install, new_temp_dir, remove_path, remove_stale_temps

    top = _topmost_missing(wanted.parent)
    tmp: Path | None = None
    try:
        wanted.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(wanted.parent, wanted.name)  # what a bundle killed half-way left
        if archive_suffix(wanted):
            tmp = _write_archive(wanted, content)
        else:
            tmp = new_temp_dir(wanted.parent, wanted.name)
            _write_into(tmp, content)

        def check() -> bool:
            why = why_not_bundle(wanted)
            if why is not None:
                raise OverwriteRefusedError(f"{wanted} holds something t2n did not write ({why})")
            return os.path.lexists(wanted)

        install(tmp, wanted, check)
    except BaseException:
        if tmp is not None and os.path.lexists(tmp):
            remove_path(tmp)
        if top is not None:
            shutil.rmtree(top, ignore_errors=True)
        raise


def _temporary_folder() -> Path:
    """A new ``t2n-debug-*`` folder in the temporary folder, after removing this user's
    oldest ones beyond :data:`TEMPORARY_BUNDLES_KEPT` (so failed checks do not pile up)."""
    root = Path(tempfile.gettempdir())
    try:
        found = []
        for entry in os.scandir(root):
            if entry.name.startswith(TEMPORARY_PREFIX) and entry.is_dir(follow_symlinks=False):
                st = entry.stat(follow_symlinks=False)
                if st.st_uid == os.getuid():
                    found.append((st.st_mtime, entry.name))
        found.sort()
        for _, name in found[:max(0, len(found) - TEMPORARY_BUNDLES_KEPT + 1)]:
            if why_not_bundle(root / name) is None:
                shutil.rmtree(root / name, ignore_errors=True)
    except OSError:
        pass  # never fails a bundle: the old ones stay
    return Path(tempfile.mkdtemp(prefix=TEMPORARY_PREFIX))


def _write_into(root: Path, content: BundleContent) -> None:
    """Write every file under ``root`` (an existing folder); on failure remove what this
    call created in it."""
    before = set(os.listdir(root))
    try:
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
        _remove_new_entries(root, before)
        raise


def _topmost_missing(root: Path) -> Path | None:
    """The outermost folder of ``root``'s path that does not exist yet (None: root exists)."""
    if root.exists() or root.is_symlink():
        return None
    top = root
    while top.parent != top and not top.parent.exists():
        top = top.parent
    return top


def _remove_new_entries(root: Path, before: set[str]) -> None:
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


def _write_archive(path: Path, content: BundleContent) -> Path:
    """The bundle as one archive under a temporary name beside ``path`` (returned): built
    in a temporary folder and packed, the folder first, so that the archive is known
    as a bundle by its first two members."""
    from t2n.serialize.staging import new_temp_file

    with tempfile.TemporaryDirectory(prefix="t2n-bundle-") as tmp:
        root = Path(tmp) / path.name.removesuffix(archive_suffix(path))
        root.mkdir()
        _write_into(root, content)
        partial, f = new_temp_file(path.parent, path.name)
        try:
            with f, tarfile.open(fileobj=f, mode="w" if archive_suffix(path) == ".tar" else "w:gz") as tar:
                tar.add(root, arcname=root.name, recursive=False)
                for name in ["report.txt", *sorted(n for n in os.listdir(root) if n != "report.txt")]:
                    tar.add(root / name, arcname=f"{root.name}/{name}")
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        return partial


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
