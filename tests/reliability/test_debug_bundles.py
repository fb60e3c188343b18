"""Debug bundles never replace what t2n did not write, and never leave a stale part.

Cases tried (12): ``compile``/``t2n.export``/the drop-in ``export_model_to_nnef`` with
``debug_bundle_path=`` an existing file of the user's (``bug.tgz``), a folder holding
the user's files, a symbolic link (refused before the trace, nothing written); a
later ``check(debug_dir=)`` naming the user's ``bug.tgz`` or a folder holding a file
named like a bundle part (``report.txt``): the mismatch is raised, the user's files
are left as they were and the note says where the bundle went; a previous bundle at
the path (folder or ``.tgz``) is replaced whole, so a crash after a mismatch leaves
no ``got.npz`` of the mismatch; an empty folder takes a bundle; bundles in the
temporary folder (no ``debug_dir``) are bounded instead of one more per failed check.
"""

from __future__ import annotations

import os
import tarfile
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch

import t2n
from t2n.check import bundle
from t2n.errors import CheckMismatchError, EngineCrashedError, OverwriteRefusedError

X = torch.rand(2, 4)


class Counted(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(4, 3)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.fc(x)


class Gather(torch.nn.Module):
    def forward(self, x, idx):
        return x[idx] * 2.0


@pytest.fixture(scope="module")
def art():
    return t2n.compile(Counted(), (X,))


@pytest.fixture(scope="module")
def gather():
    return t2n.compile(Gather(), (torch.rand(5, 3), torch.tensor([0, 2])))


def _mismatch(artifact, **kw) -> CheckMismatchError:
    with pytest.raises(CheckMismatchError) as info:
        artifact.check(inputs=artifact.example_inputs, expected=[artifact.reference_outputs[0] + 1.0], **kw)
    return info.value


def _user_archive(path: Path) -> bytes:
    """A tgz of the user's own (not a t2n bundle): a report they wrote."""
    src = path.parent / "report.md"
    src.write_text("my bug report")
    with tarfile.open(path, "w:gz") as tar:
        tar.add(src, arcname="report.md")
    src.unlink()
    return path.read_bytes()


def _user_folder(path: Path) -> None:
    path.mkdir()
    (path / "notes.txt").write_text("the user's notes")
    (path / "report.txt").write_text("the user's report")


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("kind", ["archive", "folder", "link"])
def test_compile_refuses_a_bundle_path_holding_the_users_things_before_the_trace(tmp_path, kind):
    if kind == "archive":
        path = tmp_path / "bug.tgz"
        _user_archive(path)
    elif kind == "folder":
        path = tmp_path / "dbg"
        _user_folder(path)
    else:
        (tmp_path / "real").mkdir()
        path = tmp_path / "dbg"
        path.symlink_to(tmp_path / "real")
    before = _snapshot(tmp_path)
    model = Counted()
    with pytest.raises(OverwriteRefusedError) as info:
        t2n.compile(model, (X,), debug_bundle_path=path)
    assert str(path) in str(info.value) and "debug_bundle_path" in str(info.value)
    assert model.calls == 0 and _snapshot(tmp_path) == before


@pytest.mark.parametrize("entry", ["export", "dropin"])
def test_export_refuses_a_users_file_as_bundle_path_and_writes_nothing(tmp_path, entry):
    path = tmp_path / "bug.tgz"
    original = _user_archive(path)
    model = Counted()
    with pytest.raises(OverwriteRefusedError):
        if entry == "export":
            t2n.export(model, (X,), tmp_path / "m.tgz", debug_bundle_path=path)
        else:
            from t2n import export_model_to_nnef

            export_model_to_nnef(model, (X,), tmp_path / "m.nnef.tgz", t2n.TractNNEF(), debug_bundle_path=path)
    assert path.read_bytes() == original and sorted(os.listdir(tmp_path)) == ["bug.tgz"]


def test_check_never_replaces_the_users_archive(art, tmp_path):
    path = tmp_path / "bug.tgz"
    original = _user_archive(path)
    err = _mismatch(art, debug_dir=path)
    assert path.read_bytes() == original
    assert "MISMATCH" in str(err) and err.bundle and err.bundle != str(path)
    assert f"{path} holds something t2n did not write" in str(err) and err.bundle in str(err)
    assert (Path(err.bundle) / "report.txt").is_file()


def test_check_never_writes_into_the_users_folder(art, tmp_path):
    path = tmp_path / "dbg"
    _user_folder(path)
    before = _snapshot(path)
    err = _mismatch(art, debug_dir=path)
    assert _snapshot(path) == before and sorted(os.listdir(path)) == ["notes.txt", "report.txt"]
    assert err.bundle and err.bundle != str(path) and err.bundle in str(err)
    assert "holds something t2n did not write" in str(err)


def test_an_empty_folder_takes_the_bundle(art, tmp_path):
    path = tmp_path / "dbg"
    path.mkdir()
    err = _mismatch(art, debug_dir=path)
    assert err.bundle == str(path) and (path / "got.npz").is_file()


def test_a_previous_bundle_folder_is_replaced_whole(art, gather, tmp_path):
    path = tmp_path / "dbg"
    _mismatch(art, debug_dir=path)
    assert (path / "got.npz").is_file()
    t2n.compile(Counted(), (X,), debug_bundle_path=path)  # a bundle t2n wrote: accepted
    bad = np.array([0, 99], dtype=gather.example_inputs[1].dtype)
    with pytest.raises(EngineCrashedError) as info:
        gather.check(inputs=[gather.example_inputs[0], bad], expected=[np.zeros((2, 3), np.float32)],
                     debug_dir=path)
    assert info.value.bundle == str(path)
    assert not (path / "got.npz").exists(), "the mismatch's got.npz was left in the crash's bundle"
    with np.load(path / "inputs.npz") as ins:
        np.testing.assert_array_equal(ins[gather.input_names[1]], bad)
    assert sorted(p for p in os.listdir(tmp_path)) == ["dbg"]


def test_a_previous_bundle_archive_is_replaced(art, tmp_path):
    path = tmp_path / "bug.tgz"
    _mismatch(art, debug_dir=path)
    first = path.read_bytes()
    t2n.compile(Counted(), (X,), debug_bundle_path=path)  # accepted: t2n wrote it
    err = _mismatch(art, debug_dir=path)
    assert err.bundle == str(path) and path.read_bytes() != first
    assert sorted(os.listdir(tmp_path)) == ["bug.tgz"]


def test_temporary_bundles_are_bounded(art, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    bundles = []
    for _ in range(bundle.TEMPORARY_BUNDLES_KEPT + 3):
        bundles.append(_mismatch(art).bundle)
    left = sorted(p for p in os.listdir(tmp_path) if p.startswith("t2n-debug-"))
    assert len(left) == bundle.TEMPORARY_BUNDLES_KEPT
    assert Path(bundles[-1]).name in left and Path(bundles[0]).name not in left
