import io
import os
import tarfile

import pytest

from t2n.errors import CorruptArchiveError, InvalidArgumentError
from t2n.serialize.archive import artifact_form, open_writer, read_artifact


def test_forms_by_suffix_and_level():
    assert artifact_form("m") == ("dir", 0)
    assert artifact_form("m.tar") == ("tar", 0)
    assert artifact_form("m.nnef.tgz") == ("tgz", 6)
    assert artifact_form("m.tar.gz") == ("tgz", 6)
    assert artifact_form("m", 0) == ("tar", 0)
    assert artifact_form("m", 9) == ("tgz", 9)
    with pytest.raises(InvalidArgumentError):
        artifact_form("m", 12)


@pytest.mark.parametrize("name", ["out", "out.tar", "out.tgz"])
def test_failure_leaves_nothing(tmp_path, name):
    with pytest.raises(RuntimeError), open_writer(tmp_path / name) as w:
        w.add_bytes("graph.nnef", b"version 1.0;")
        raise RuntimeError("disk full")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name", ["out", "out.tar", "out.tgz"])
def test_replaces_an_existing_artifact_only_when_complete(tmp_path, name):
    with open_writer(tmp_path / name) as w:
        w.add_bytes("graph.nnef", b"one")
    with pytest.raises(RuntimeError), open_writer(tmp_path / name) as w:
        w.add_bytes("graph.nnef", b"two")
        raise RuntimeError
    assert read_artifact(tmp_path / name) == {"graph.nnef": b"one"}
    with open_writer(tmp_path / name) as w:
        w.add_bytes("graph.nnef", b"three")
    assert read_artifact(tmp_path / name) == {"graph.nnef": b"three"}
    assert sorted(os.listdir(tmp_path)) == [name]


def test_size_mismatch_is_an_error(tmp_path):
    with pytest.raises(Exception, match="expected 5"), open_writer(tmp_path / "x.tar") as w:
        w.add_stream("a.dat", 5, [b"abc"])
    assert os.listdir(tmp_path) == []


def _tar_with(tmp_path, member_name):
    p = tmp_path / "evil.tar"
    with tarfile.open(p, "w") as tar:
        info = tarfile.TarInfo(member_name)
        info.size = 3
        tar.addfile(info, io.BytesIO(b"abc"))
    return p


@pytest.mark.parametrize("member", ["../escape.dat", "/abs.dat", "a/../../b.dat"])
def test_member_escaping_the_folder_is_rejected(tmp_path, member):
    with pytest.raises(CorruptArchiveError, match="escapes"):
        read_artifact(_tar_with(tmp_path, member))


def test_truncated_archive_is_rejected(tmp_path):
    with open_writer(tmp_path / "m.tgz") as w:
        w.add_bytes("graph.nnef", b"x" * 5000)
    data = (tmp_path / "m.tgz").read_bytes()
    (tmp_path / "cut.tgz").write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptArchiveError):
        read_artifact(tmp_path / "cut.tgz")
