"""Saving never deletes or overwrites what t2n did not write, and concurrent saves to
one path end with one complete artifact and no stray temporary names.

Bad destinations tried (each with ``Artifact.save``, ``t2n.export`` and the writer):
a user's folder, a folder named ``x.tar`` / ``x.tgz``, a file that is not an archive
where a ``.tar`` / ``.tgz`` goes, a file where a folder artifact goes, an empty file,
a tar whose first member is a user file, a folder of foreign ``.dat`` files, a folder
with a nested user file, a folder holding a link, a link at the destination; tensor
exports onto a folder, a link or a foreign file of the same name; files another writer
adds to a folder while a tensor export fails.
"""

import gzip
import io
import os
import subprocess
import sys
import tarfile
import textwrap
import threading

import numpy as np
import pytest
import torch

import t2n
from t2n.errors import InvalidArgumentError, OverwriteRefusedError, SerializationError
from t2n.serialize.archive import IntoDirWriter, open_writer, read_artifact
from t2n.serialize.dat import dat_bytes
from t2n.serialize.destination import why_not_artifact

X = torch.randn(2, 6)
DAT = dat_bytes(np.ones(3, np.float32))


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(6, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))


@pytest.fixture(scope="module")
def artifact():
    return t2n.compile(Small().eval(), (X,))


def _snapshot(root):
    """Every entry under ``root`` with its bytes (files) or link target: what must not change."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                out[rel] = ("link", os.readlink(p))
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    out[rel] = ("file", f.read())
            else:
                out[rel] = ("dir",)
    return out


def _user_folder(p):
    p.mkdir()
    (p / "notes.txt").write_text("my notes")
    (p / "graph.nnef").write_text("version 1.0;")
    return p


def _tar_with_first(p, name):
    with tarfile.open(p, "w") as tar:
        info = tarfile.TarInfo(name)
        info.size = 4
        tar.addfile(info, io.BytesIO(b"mine"))
    return p


def _nested_user_file(p):
    (p / "layer").mkdir(parents=True)
    (p / "layer" / "w.dat").write_bytes(DAT)
    (p / "layer" / "readme.md").write_text("mine")
    return p


def _folder_with_link(p):
    p.mkdir()
    (p / "w.dat").symlink_to("/etc/hostname")
    return p


def _link_to_artifact(p):
    target = p.parent / "real"
    with open_writer(target) as w:
        w.add_bytes("graph.nnef", b"version 1.0;")
    p.symlink_to(target)
    return p


def _file(data):
    def make(p):
        p.write_bytes(data)
        return p

    return make


def _foreign_dat_files(p):
    p.mkdir()
    (p / "train.dat").write_bytes(b"rows of my data")
    return p


BAD_DESTINATIONS = {
    "user folder": ("model", _user_folder),
    "folder named x.tar": ("x.tar", _user_folder),
    "folder named x.tgz": ("x.tgz", _user_folder),
    "text file as .tar": ("x.tar", _file(b"not an archive")),
    "gzip text as .tgz": ("x.tgz", _file(gzip.compress(b"text" * 300))),
    "file where a folder goes": ("model", _file(b"my file")),
    "empty file as .tar": ("x.tar", _file(b"")),
    "tar of a user file": ("x.tar", lambda p: _tar_with_first(p, "notes.txt")),
    "foreign .dat files": ("data", _foreign_dat_files),
    "nested user file": ("model", _nested_user_file),
    "folder holding a link": ("model", _folder_with_link),
    "link to an artifact": ("model", _link_to_artifact),
}


def _make_bad(tmp_path, case):
    name, make = BAD_DESTINATIONS[case]
    return make(tmp_path / name)


def _assert_refusal(exc_info, path):
    msg = str(exc_info.value)
    assert str(path) in msg
    assert "overwrite=True" in msg and "another path" in msg
    assert isinstance(exc_info.value, (SerializationError, InvalidArgumentError))


# -- refusals ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(BAD_DESTINATIONS))
def test_save_refuses_what_t2n_did_not_write(tmp_path, artifact, case):
    path = _make_bad(tmp_path, case)
    before = _snapshot(tmp_path)
    with pytest.raises(OverwriteRefusedError) as exc_info:
        artifact.save(path)
    _assert_refusal(exc_info, path)
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("case", ["user folder", "folder named x.tar", "text file as .tar",
                                  "file where a folder goes"])
def test_export_refuses_before_compiling(tmp_path, monkeypatch, case):
    import t2n.driver.export

    path = _make_bad(tmp_path, case)
    before = _snapshot(tmp_path)

    def never(*args, **kwargs):
        raise AssertionError("compiled although the destination is refused")

    monkeypatch.setattr(t2n.driver.export, "compile_model", never)
    with pytest.raises(OverwriteRefusedError) as exc_info:
        t2n.export(Small().eval(), (X,), path)
    _assert_refusal(exc_info, path)
    assert _snapshot(tmp_path) == before


def test_refusal_names_the_offending_entry(tmp_path):
    path = _nested_user_file(tmp_path / "m")
    assert why_not_artifact(path) == "it is a folder and layer/readme.md is not an NNEF graph or tensor file"
    with pytest.raises(OverwriteRefusedError, match="layer/readme.md"):
        open_writer(path)


# -- what t2n wrote is replaced -------------------------------------------------------


@pytest.mark.parametrize("name,first,second", [("m", None, None), ("m.tar", None, None), ("m.tgz", None, None),
                                               ("m", 0, None), ("m", None, 0)])
def test_an_artifact_t2n_wrote_is_replaced(tmp_path, artifact, name, first, second):
    """A t2n artifact at the path is replaced, whatever its form (``compression_level=0``
    writes a tar at ``m``; without it ``m`` is a folder)."""
    artifact.save(tmp_path / name, compression_level=first)
    artifact.save(tmp_path / name, compression_level=second)
    assert os.listdir(tmp_path) == [name]
    assert (tmp_path / name).is_dir() == (name == "m" and second is None)
    artifact.check()


def test_an_artifact_folder_with_leftovers_of_a_crashed_tensor_export_is_replaced(tmp_path, artifact):
    artifact.save(tmp_path / "m")
    (tmp_path / "m" / ".fc.weight.dat.t2n-tmp-999999999-0badcafe").write_bytes(b"partial")
    artifact.save(tmp_path / "m")
    assert sorted(os.listdir(tmp_path / "m")) == sorted(["graph.nnef", *artifact.tensor_files])


def test_an_empty_folder_is_used(tmp_path, artifact):
    (tmp_path / "out").mkdir()
    artifact.save(tmp_path / "out")
    assert sorted(os.listdir(tmp_path / "out")) == sorted(["graph.nnef", *artifact.tensor_files])


@pytest.mark.parametrize("case", ["user folder", "folder named x.tar", "text file as .tar",
                                  "file where a folder goes", "link to an artifact"])
def test_overwrite_true_replaces_it(tmp_path, artifact, case):
    path = _make_bad(tmp_path, case)
    artifact.save(path, overwrite=True)
    assert not path.is_symlink()
    assert "graph.nnef" in read_artifact(path)
    if case == "link to an artifact":  # the link is replaced, not what it pointed to
        assert read_artifact(tmp_path / "real") == {"graph.nnef": b"version 1.0;"}
    assert sorted(os.listdir(tmp_path)) == sorted([path.name] + (["real"] if "link" in case else []))
    artifact.check()


def test_export_overwrite_true(tmp_path):
    path = _user_folder(tmp_path / "model")
    art = t2n.export(Small().eval(), (X,), path, overwrite=True)
    assert "notes.txt" not in os.listdir(path)
    art.check()


# -- tensor exports into a folder -----------------------------------------------------


def test_tensor_export_replaces_its_dat_files_and_keeps_the_rest(tmp_path):
    folder = tmp_path / "w"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    (folder / "a.dat").write_bytes(b"old")
    written = t2n.export_tensors_to_nnef({"a": torch.ones(3), "b": torch.zeros(2)}, folder)
    assert sorted(os.listdir(folder)) == ["a.dat", "b.dat", "notes.txt"]
    np.testing.assert_array_equal(written["a"].read(), np.ones(3, np.float32))
    assert (folder / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("kind", ["folder", "link", "fifo"])
def test_tensor_export_refuses_an_entry_that_is_not_a_dat_file(tmp_path, kind):
    folder = tmp_path / "w"
    folder.mkdir()
    (folder / "keep.dat").write_bytes(DAT)
    entry = folder / "a.dat"
    if kind == "folder":
        entry.mkdir()
        (entry / "x").write_text("mine")
    elif kind == "link":
        entry.symlink_to(tmp_path / "elsewhere.bin")
        (tmp_path / "elsewhere.bin").write_bytes(b"mine")
    else:
        os.mkfifo(entry)
    before = _snapshot(tmp_path)
    with pytest.raises(OverwriteRefusedError, match=f"{entry}.*left it untouched") as exc_info:
        t2n.export_tensors_to_nnef({"b": torch.ones(2), "a": torch.ones(3)}, folder)
    assert "another folder" in str(exc_info.value)
    assert _snapshot(tmp_path) == before  # b.dat was not committed either


def test_into_dir_writer_refuses_to_replace_a_file_of_another_kind(tmp_path):
    folder = tmp_path / "w"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(OverwriteRefusedError, match="notes.txt"), IntoDirWriter(folder) as w:
        w.add_bytes("notes.txt", b"t2n")
    assert (folder / "notes.txt").read_text() == "mine"
    assert os.listdir(folder) == ["notes.txt"]


def test_tensor_export_to_a_file_is_refused(tmp_path):
    (tmp_path / "w").write_text("mine")
    with pytest.raises(InvalidArgumentError, match=f"{tmp_path / 'w'} exists and is not a folder"):
        t2n.export_tensors_to_nnef({"a": torch.ones(3)}, tmp_path / "w")
    with pytest.raises(OverwriteRefusedError, match="not a folder"):
        IntoDirWriter(tmp_path / "w" / "sub")
    assert (tmp_path / "w").read_text() == "mine"


def _chunks_then_other_writer(folder, files):
    yield DAT[:10]
    for name in files:  # another program writes into the folders meanwhile
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("someone else's")
    raise RuntimeError("interrupted")


@pytest.mark.parametrize("theirs", [["x.txt"], ["sub/x.txt"], ["sub/deeper/x.txt"]])
def test_abort_keeps_files_another_writer_put_in_folders_it_created(tmp_path, theirs):
    folder = tmp_path / "new" / "w"
    with pytest.raises(RuntimeError), IntoDirWriter(folder) as w:
        w.add_bytes("sub/a.dat", DAT)
        w.add_stream("sub/deeper/b.dat", len(DAT), _chunks_then_other_writer(folder, theirs))
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert left == [f"new/w/{t}" for t in theirs]  # only their file; none of ours, no temp file


def test_abort_removes_folders_it_created_when_empty(tmp_path):
    with pytest.raises(RuntimeError), IntoDirWriter(tmp_path / "new" / "w") as w:
        w.add_bytes("sub/a.dat", DAT)
        raise RuntimeError
    assert os.listdir(tmp_path) == []


# -- concurrent saves -------------------------------------------------------------------


def _stray(folder):
    return [n for n in os.listdir(folder) if ".t2n-" in n]


@pytest.mark.parametrize("name", ["m", "m.tar", "m.tgz"])
def test_concurrent_saves_from_threads_leave_one_complete_artifact(tmp_path, name):
    errors = []
    versions = [{"w.dat": DAT + bytes([i]) * 2000, "graph.nnef": b"version %d;" % i} for i in range(6)]

    def save(i):
        try:
            for _ in range(8):
                with open_writer(tmp_path / name) as w:
                    for member, data in versions[i].items():
                        w.add_bytes(member, data)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=save, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert os.listdir(tmp_path) == [name]
    assert read_artifact(tmp_path / name) in versions


def test_concurrent_artifact_saves_from_threads_run_in_tract(tmp_path, artifact):
    errors = []

    def save():
        try:
            for _ in range(4):
                artifact.save(tmp_path / "m.tar")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=save) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and os.listdir(tmp_path) == ["m.tar"]
    artifact.check()


@pytest.mark.parametrize("name", ["m", "m.tgz"])
def test_concurrent_saves_from_processes(tmp_path, name):
    script = textwrap.dedent(f"""
        import sys
        from t2n.serialize.archive import open_writer
        i = int(sys.argv[1])
        for _ in range(15):
            with open_writer({str(tmp_path / name)!r}) as w:
                w.add_bytes("w.dat", {DAT!r} + bytes([i]) * 50000)
                w.add_bytes("graph.nnef", b"version %d;" % i)
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(i)], stderr=subprocess.PIPE, text=True)
             for i in range(3)]
    results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    for p in procs:
        p.stderr.close()
    assert all(rc == 0 for rc, _ in results), results
    assert os.listdir(tmp_path) == [name]
    got = read_artifact(tmp_path / name)
    assert got["graph.nnef"] in {b"version %d;" % i for i in range(3)}
    assert _stray(tmp_path) == []


@pytest.mark.parametrize("name", ["m", "m.tar"])
def test_a_user_folder_that_appears_during_the_save_is_kept(tmp_path, name):
    """What is at the path is looked at again just before the move into place."""
    with pytest.raises(OverwriteRefusedError, match="left it untouched"), open_writer(tmp_path / name) as w:
        w.add_bytes("w.dat", DAT)
        _user_folder(tmp_path / name)
    assert sorted(os.listdir(tmp_path / name)) == ["graph.nnef", "notes.txt"]
    assert _stray(tmp_path) == []


@pytest.fixture
def without_renameat2(monkeypatch):
    """Systems without renameat2 (not Linux, old C libraries): the old artifact is
    renamed aside, then the new one moved in."""
    import t2n.serialize.staging as staging

    monkeypatch.setattr(staging, "_renameat2", None)


@pytest.mark.parametrize("name", ["m", "m.tar"])
def test_without_renameat2_concurrent_saves_and_overwrite(tmp_path, without_renameat2, name):
    test_concurrent_saves_from_threads_leave_one_complete_artifact(tmp_path, name)
    other = tmp_path / f"user-{name}"
    _user_folder(other)
    with pytest.raises(OverwriteRefusedError):
        open_writer(other)
    with open_writer(other, overwrite=True) as w:
        w.add_bytes("graph.nnef", b"version 1.0;")
    assert read_artifact(other) == {"graph.nnef": b"version 1.0;"}
    assert _stray(tmp_path) == []
