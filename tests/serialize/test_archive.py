import io
import os
import subprocess
import sys
import tarfile
import textwrap
import zlib

import pytest

from t2n.errors import CorruptArchiveError, InvalidArgumentError
from t2n.serialize.archive import (
    IntoDirWriter,
    artifact_form,
    gzip_compressor,
    gzip_threads,
    isal_level,
    open_writer,
    read_artifact,
)


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


# -- interrupted and failing writes ---------------------------------------------------


def _chunks_then(exc, n=3):
    for _ in range(n):
        yield b"x" * 1000
    raise exc


@pytest.mark.parametrize("name", ["out", "out.tar", "out.tgz"])
def test_interrupt_midway_leaves_nothing(tmp_path, name):
    with pytest.raises(KeyboardInterrupt), open_writer(tmp_path / name) as w:
        w.add_bytes("graph.nnef", b"version 1.0;")
        w.add_stream("w.dat", 10_000, _chunks_then(KeyboardInterrupt()))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name", ["out", "out.tar", "out.tgz"])
def test_write_failing_in_the_kernel_leaves_nothing(tmp_path, name):
    """A real write error (the file-size limit makes write() fail with EFBIG, as a full
    disk fails with ENOSPC) aborts the save and removes every temporary file."""
    script = textwrap.dedent(f"""
        import os, resource, signal, sys
        from t2n.serialize.archive import open_writer
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
        try:
            with open_writer({str(tmp_path / name)!r}) as w:
                w.add_bytes("graph.nnef", b"version 1.0;")
                w.add_stream("w.dat", 4 << 20, (os.urandom(1 << 20) for _ in range(4)))
        except OSError as exc:
            print("failed:", exc.errno)
            sys.exit(0)
        sys.exit("the write did not fail")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "failed: 27" in done.stdout  # EFBIG
    assert os.listdir(tmp_path) == []


def test_into_dir_writer_commits_all_or_nothing(tmp_path):
    folder = tmp_path / "weights"
    folder.mkdir()
    (folder / "keep.dat").write_bytes(b"old")
    (folder / "a.dat").write_bytes(b"old a")
    with pytest.raises(RuntimeError), IntoDirWriter(folder) as w:
        w.add_bytes("a.dat", b"new a")
        w.add_bytes("sub/b.dat", b"b")
        raise RuntimeError("interrupted")
    assert sorted(os.listdir(folder)) == ["a.dat", "keep.dat"]
    assert (folder / "a.dat").read_bytes() == b"old a"
    with IntoDirWriter(folder) as w:
        w.add_bytes("a.dat", b"new a")
        w.add_bytes("sub/b.dat", b"b")
    assert (folder / "a.dat").read_bytes() == b"new a"
    assert (folder / "sub" / "b.dat").read_bytes() == b"b"
    assert (folder / "keep.dat").read_bytes() == b"old"
    assert sorted(p.name for p in folder.rglob("*")) == ["a.dat", "b.dat", "keep.dat", "sub"]


def test_into_dir_writer_removes_a_folder_it_created(tmp_path):
    with pytest.raises(RuntimeError), IntoDirWriter(tmp_path / "new") as w:
        w.add_bytes("a.dat", b"a")
        raise RuntimeError
    assert os.listdir(tmp_path) == []


# -- compression and determinism ------------------------------------------------------


def test_isal_levels():
    assert [isal_level(lv) for lv in range(1, 10)] == [1, 1, 1, 1, 1, 1, 2, 2, 3]


@pytest.mark.parametrize("prefer", ["auto", "zlib"])
def test_tgz_is_standard_gzip_and_reports_its_compressor(tmp_path, prefer):
    payload = bytes(range(256)) * 400
    with open_writer(tmp_path / "m.tgz", sync=True, compressor=prefer) as w:
        w.add_bytes("graph.nnef", b"version 1.0;")
        w.add_stream("w.dat", len(payload), [payload[:1000], payload[1000:]])
    n = gzip_threads()
    assert w.compressor_name == (f"isal level 1, {n} thread{'s' if n > 1 else ''}" if prefer == "auto"
                                 else "zlib level 6")
    blob = (tmp_path / "m.tgz").read_bytes()
    d = zlib.decompressobj(31)
    raw = d.decompress(blob)
    assert d.eof and d.unused_data == b""  # one gzip member: what single-member readers need
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        assert tar.extractfile("w.dat").read() == payload
    assert read_artifact(tmp_path / "m.tgz") == {"graph.nnef": b"version 1.0;", "w.dat": payload}


@pytest.mark.parametrize("name", ["m.tar", "m.tgz"])
def test_same_members_give_the_same_bytes(tmp_path, name):
    blobs = []
    for i in range(2):
        (tmp_path / str(i)).mkdir()
        with open_writer(tmp_path / str(i) / name) as w:
            w.add_bytes("graph.nnef", b"version 1.0;")
            w.add_bytes("layer.0/w.dat", b"\x01" * 3000)
        blobs.append((tmp_path / str(i) / name).read_bytes())
    assert blobs[0] == blobs[1]


def _tar_with_member(tmp_path, info, data=b""):
    p = tmp_path / "odd.tar"
    with tarfile.open(p, "w") as tar:
        tar.addfile(info, io.BytesIO(data) if data else None)
    return p


def test_links_and_special_members_are_rejected(tmp_path):
    link = tarfile.TarInfo("w.dat")
    link.type = tarfile.SYMTYPE
    link.linkname = "/etc/passwd"
    with pytest.raises(CorruptArchiveError, match="is a link"):
        read_artifact(_tar_with_member(tmp_path, link))
    fifo = tarfile.TarInfo("w.dat")
    fifo.type = tarfile.FIFOTYPE
    with pytest.raises(CorruptArchiveError, match="not a regular file"):
        read_artifact(_tar_with_member(tmp_path, fifo))


def test_truncated_tar_member_is_rejected(tmp_path):
    with open_writer(tmp_path / "m.tar") as w:
        w.add_bytes("w.dat", b"y" * 5000)
    data = (tmp_path / "m.tar").read_bytes()
    (tmp_path / "cut.tar").write_bytes(data[:512 + 2000])
    with pytest.raises(CorruptArchiveError):
        read_artifact(tmp_path / "cut.tar")


def test_corrupt_tensor_inside_an_archive_is_rejected(tmp_path):
    import numpy as np

    from t2n.errors import CorruptTensorFileError
    from t2n.serialize.dat import dat_bytes, read_dat

    good = dat_bytes(np.ones(4, np.float32))
    with open_writer(tmp_path / "m.tar") as w:
        w.add_bytes("w.dat", good[:-3])
    with pytest.raises(CorruptTensorFileError, match="truncated"):
        read_dat(read_artifact(tmp_path / "m.tar")["w.dat"])


def test_links_in_a_folder_artifact_are_rejected(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "graph.nnef").write_bytes(b"version 1.0;")
    (tmp_path / "m" / "w.dat").symlink_to("/etc/hostname")
    with pytest.raises(CorruptArchiveError, match="is a link"):
        read_artifact(tmp_path / "m")


def test_single_stream_compressors():
    for prefer, name in (("auto", "isal level 1"), ("zlib", "zlib level 6")):
        z, got = gzip_compressor(6, prefer)
        assert got == name
        assert zlib.decompress(z.compress(b"abc" * 100) + z.flush(), 31) == b"abc" * 100
    with pytest.raises(InvalidArgumentError):
        gzip_compressor(6, "lz4")
    with pytest.raises(InvalidArgumentError):
        open_writer("x.tgz", compressor="lz4")


@pytest.mark.parametrize("form", ["dir", "into"])
def test_synced_folders_fsync_every_file_before_it_is_renamed_into_place(tmp_path, monkeypatch, form):
    """sync=True: each file's writeback starts when it closes, and every file is fsynced
    at commit, before any rename (none is fsynced while the next one is written)."""
    import os

    from t2n.serialize.archive import DirWriter, IntoDirWriter

    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", str(dst)))
        real_replace(src, dst)

    import re

    import t2n.serialize.archive as archive

    real_install = archive.install

    def install(tmp, path, check):  # a folder artifact is moved into place in one step
        events.append(("replace", str(path)))
        real_install(tmp, path, check)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(archive, "install", install)
    w = DirWriter(tmp_path / "out", sync=True) if form == "dir" else IntoDirWriter(tmp_path / "out", sync=True)
    w.add_bytes("a.dat", b"a" * 100)
    w.add_bytes("sub/b.dat", b"b" * 100)
    assert not any(e[0] == "fsync" for e in events)  # nothing waited for while writing
    w.commit()
    temp_of_dat = re.compile(rf"\.dat(\.t2n-tmp-{os.getpid()}-[0-9a-f]+)?$")
    synced = [p for kind, p in events if kind == "fsync" and temp_of_dat.search(p)]
    first_replace = next(i for i, e in enumerate(events) if e[0] == "replace")
    assert len(synced) == 2
    assert all(i < first_replace for i, e in enumerate(events) if e[0] == "fsync" and e[1] in synced)
    assert (tmp_path / "out" / "a.dat").read_bytes() == b"a" * 100
    assert (tmp_path / "out" / "sub" / "b.dat").read_bytes() == b"b" * 100
