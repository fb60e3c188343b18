"""Faults while writing leave nothing behind and never hide the first error.

Faults tried: a full disk (a real 256 KiB tmpfs) for the writer in each form,
``Artifact.save``, ``t2n.export`` and a tensor export, and over a previous artifact; a
read-only file system (a tmpfs mounted read-only: ``chmod`` does not stop root) for
each form and a tensor export; a destination name too long (300 bytes) for each form
and for ``t2n.export``; a member name too long; a file-size limit (EFBIG); a cleanup
that fails too (folder and archive); a source that fails while being read; SIGTERM
during a write in each form, during ``Artifact.save`` and during ``t2n.export``, with
the program's own SIGTERM handler; SIGKILL during a write (folder and archive).
"""

import errno
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from conftest import tmpfs

import t2n
from t2n.errors import ArtifactWriteError, SerializationError
from t2n.serialize import signals
from t2n.serialize.archive import open_writer, read_artifact
from t2n.serialize.dat import dat_bytes

ROOT = pathlib.Path(t2n.__file__).resolve().parent.parent
X = torch.randn(2, 64)
DAT = dat_bytes(np.ones(3, np.float32))
FORMS = ["m", "m.tar", "m.tgz"]


class Wide(torch.nn.Module):
    """About 1 MiB of weights: more than the small disk holds."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(64, 4096)

    def forward(self, x):
        return self.fc(x)


@pytest.fixture
def small_disk(tmp_path):
    with tmpfs(tmp_path / "disk", "size=256k") as disk:
        yield disk


@pytest.fixture
def read_only_disk(tmp_path):
    with tmpfs(tmp_path / "ro", "size=64k,ro") as disk:
        yield disk


def _big_member(w):
    w.add_bytes("graph.nnef", b"version 1.0;")
    w.add_stream("w.dat", 4 << 20, (os.urandom(1 << 20) for _ in range(4)))


def _assert_write_error(exc_info, path, code, words):
    exc = exc_info.value
    assert isinstance(exc, SerializationError) and isinstance(exc, OSError)
    assert exc.errno == code
    assert isinstance(exc.__cause__, OSError) and exc.__cause__.errno == code
    assert str(path) in str(exc) and words in str(exc)


def _run(script, **kwargs):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


# -- disk full --------------------------------------------------------------------------


@pytest.mark.parametrize("name", FORMS)
def test_disk_full_gives_a_typed_error_and_leaves_nothing(small_disk, name):
    with pytest.raises(ArtifactWriteError) as exc_info, open_writer(small_disk / name) as w:
        _big_member(w)
    _assert_write_error(exc_info, small_disk / name, errno.ENOSPC, "the disk is full")
    assert os.listdir(small_disk) == []


def test_disk_full_keeps_the_previous_artifact(small_disk):
    with open_writer(small_disk / "m.tar") as w:
        w.add_bytes("graph.nnef", b"version 1.0;")
    with pytest.raises(ArtifactWriteError), open_writer(small_disk / "m.tar") as w:
        _big_member(w)
    assert read_artifact(small_disk / "m.tar") == {"graph.nnef": b"version 1.0;"}
    assert os.listdir(small_disk) == ["m.tar"]


@pytest.mark.parametrize("how", ["save", "export", "export_tensors"])
def test_disk_full_in_the_public_api(small_disk, how):
    model = Wide().eval()
    with pytest.raises(ArtifactWriteError) as exc_info:
        if how == "save":
            t2n.compile(model, (X,)).save(small_disk / "m.tar")
        elif how == "export":  # the weights are written on a thread while the model compiles
            t2n.export(model, (X,), small_disk / "m.tar")
        else:
            t2n.export_tensors_to_nnef(dict(model.state_dict()), small_disk / "weights")
    target = small_disk / ("weights" if how == "export_tensors" else "m.tar")
    _assert_write_error(exc_info, target, errno.ENOSPC, "No space left on device")
    assert os.listdir(small_disk) == []


# -- read-only destinations -----------------------------------------------------------


@pytest.mark.parametrize("name", FORMS)
def test_read_only_file_system(read_only_disk, name):
    with pytest.raises(ArtifactWriteError) as exc_info, open_writer(read_only_disk / name) as w:
        w.add_bytes("graph.nnef", b"version 1.0;")
    _assert_write_error(exc_info, read_only_disk / name, errno.EROFS, "read-only")
    assert os.listdir(read_only_disk) == []


def test_tensor_export_into_a_read_only_folder(read_only_disk):
    with pytest.raises(ArtifactWriteError) as exc_info:
        t2n.export_tensors_to_nnef({"a": torch.ones(3)}, read_only_disk)
    _assert_write_error(exc_info, read_only_disk, errno.EROFS, "save elsewhere")


# -- names too long -------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["", ".tar", ".tgz"])
def test_a_name_too_long_is_refused_before_writing(tmp_path, suffix):
    path = tmp_path / ("m" * 300 + suffix)
    with pytest.raises(ArtifactWriteError) as exc_info:
        open_writer(path)
    _assert_write_error(exc_info, path, errno.ENAMETOOLONG, "choose a shorter name")
    assert os.listdir(tmp_path) == []


def test_export_with_a_name_too_long_fails_before_compiling(tmp_path, monkeypatch):
    import t2n.driver.export

    monkeypatch.setattr(t2n.driver.export, "compile_model", lambda *a, **k: pytest.fail("compiled"))
    with pytest.raises(ArtifactWriteError, match="too long"):
        t2n.export(Wide().eval(), (X,), tmp_path / ("m" * 300 + ".tar"))
    assert os.listdir(tmp_path) == []


def test_a_member_name_too_long(tmp_path):
    with pytest.raises(ArtifactWriteError) as exc_info, open_writer(tmp_path / "m") as w:
        w.add_bytes("w" * 300 + ".dat", DAT)
    _assert_write_error(exc_info, tmp_path / "m", errno.ENAMETOOLONG, "w" * 300)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("suffix", ["", ".tar"])
def test_a_long_name_that_fits_is_written(tmp_path, suffix):
    """The temporary name beside a 250-byte name would not fit: it is shortened."""
    path = tmp_path / ("m" * (250 - len(suffix)) + suffix)
    with open_writer(path) as w:
        w.add_bytes("graph.nnef", b"version 1.0;")
    assert os.listdir(tmp_path) == [path.name]


def test_file_size_limit(tmp_path):
    done = _run(f"""
        import resource, signal
        from t2n.errors import ArtifactWriteError
        from t2n.serialize.archive import open_writer
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
        try:
            with open_writer({str(tmp_path / "m.tar")!r}) as w:
                w.add_stream("w.dat", 4 << 20, (bytes(1 << 20) for _ in range(4)))
        except ArtifactWriteError as exc:
            print(exc.errno, exc.__cause__.errno, exc)
    """)
    out, err = done.communicate(timeout=60)
    assert out.startswith("27 27 ") and "file-size limit" in out, err
    assert os.listdir(tmp_path) == []


# -- the first error stays the one raised ---------------------------------------------


def test_a_failing_cleanup_does_not_hide_the_first_error(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied (cleanup)")

    monkeypatch.setattr(shutil, "rmtree", refuse)
    with pytest.raises(RuntimeError, match="the first error") as exc_info, open_writer(tmp_path / "m") as w:
        w.add_bytes("graph.nnef", b"version 1.0;")
        raise RuntimeError("the first error")
    assert any("could not clean up" in n and "Permission denied" in n for n in exc_info.value.__notes__)


def test_a_failing_cleanup_after_a_full_disk(small_disk, monkeypatch):
    real_unlink = pathlib.Path.unlink

    def refuse(self, missing_ok=False):
        if ".t2n-tmp-" in self.name:
            raise PermissionError(errno.EACCES, "Permission denied (cleanup)")
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(pathlib.Path, "unlink", refuse)
    with pytest.raises(ArtifactWriteError) as exc_info, open_writer(small_disk / "m.tar") as w:
        _big_member(w)
    assert exc_info.value.errno == errno.ENOSPC
    assert any("could not clean up" in n for n in exc_info.value.__notes__)
    monkeypatch.undo()
    for leftover in small_disk.iterdir():
        leftover.unlink()


def test_a_source_that_fails_is_not_a_write_fault(tmp_path):
    """The reader's OSError passes through unchanged (it is not about the destination)."""
    failure = OSError(errno.EIO, "Input/output error", "/data/weights.bin")

    def chunks():
        yield DAT
        raise failure

    for name in FORMS:
        with pytest.raises(OSError) as exc_info, open_writer(tmp_path / name) as w:
            w.add_stream("w.dat", 10 * len(DAT), chunks())
        assert exc_info.value is failure
    assert os.listdir(tmp_path) == []


# -- SIGTERM ----------------------------------------------------------------------------

SLOW_WRITE = """
    import sys, time
    from t2n.serialize.archive import open_writer

    def slow():
        for i in range(10000):
            if i == 3:
                print("writing", flush=True)
            yield bytes(1 << 16)
            time.sleep(0.005)

    with open_writer({path!r}) as w:
        w.add_bytes("graph.nnef", b"version 1.0;")
        w.add_stream("w.dat", 10000 << 16, slow())
    print("not interrupted")
"""


def _terminate_when_ready(proc, folder, sig=signal.SIGTERM):
    assert proc.stdout.readline().strip() == "writing", proc.stderr.read()
    assert any(".t2n-tmp-" in n for n in os.listdir(folder))  # the signal comes mid-write
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


@pytest.mark.parametrize("name", FORMS)
def test_sigterm_during_a_write_removes_the_temporary_file(tmp_path, name):
    rc, out, err = _terminate_when_ready(_run(SLOW_WRITE.format(path=str(tmp_path / name))), tmp_path)
    assert rc == -signal.SIGTERM, err  # then the process ends as SIGTERM ends it
    assert os.listdir(tmp_path) == []


def test_sigterm_with_the_programs_own_handler(tmp_path):
    script = "import signal, sys\nsignal.signal(signal.SIGTERM, lambda *a: sys.exit(3))\n"
    proc = _run(script + textwrap.dedent(SLOW_WRITE.format(path=str(tmp_path / "m.tar"))))
    rc, out, err = _terminate_when_ready(proc, tmp_path)
    assert rc == 3, err  # the program's handler decided; the save was aborted cleanly
    assert os.listdir(tmp_path) == []


def test_sigterm_during_artifact_save(tmp_path):
    proc = _run(f"""
        import time, torch, t2n, t2n.artifact
        iter_dat = t2n.artifact.iter_dat

        def slow(*args, **kwargs):
            for i, chunk in enumerate(iter_dat(*args, **kwargs)):
                print("writing", flush=True)
                time.sleep(30)
                yield chunk

        art = t2n.compile(torch.nn.Linear(64, 512), (torch.randn(1, 64),))
        t2n.artifact.iter_dat = slow
        art.save({str(tmp_path / "m")!r})
    """)
    rc, out, err = _terminate_when_ready(proc, tmp_path)
    assert rc == -signal.SIGTERM, err
    assert os.listdir(tmp_path) == []


def test_sigterm_during_export_while_weights_are_written(tmp_path):
    proc = _run(f"""
        import time, torch, t2n, t2n.driver.export

        def slow_compile(*args, **kwargs):
            print("writing", flush=True)  # the early writer thread is writing the weights
            time.sleep(60)

        t2n.driver.export.compile_model = slow_compile
        t2n.export(torch.nn.Linear(64, 4096), (torch.randn(1, 64),), {str(tmp_path / "m.tar")!r})
    """)
    rc, out, err = _terminate_when_ready(proc, tmp_path)
    assert rc == -signal.SIGTERM, err
    assert os.listdir(tmp_path) == []


@pytest.fixture
def default_sigterm():
    """SIGTERM with its default action, whatever the test runner installed."""
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    signal.signal(signal.SIGTERM, previous)


def test_sigterm_handler_only_during_a_main_thread_write(tmp_path, default_sigterm):
    import threading

    seen = []
    with open_writer(tmp_path / "m") as w:
        seen.append(signal.getsignal(signal.SIGTERM))
        w.add_bytes("graph.nnef", b"version 1.0;")
    with pytest.raises(RuntimeError), open_writer(tmp_path / "n") as w:
        raise RuntimeError
    t = threading.Thread(target=lambda: seen.append(open_writer(tmp_path / "t") and signal.getsignal(signal.SIGTERM)))
    t.start()
    t.join()
    assert seen[0] is not signal.SIG_DFL and seen[1] is signal.SIG_DFL
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_ctrl_c_is_held_while_an_artifact_moves_into_place():
    reached = []
    with pytest.raises(KeyboardInterrupt), signals.held():
        signal.raise_signal(signal.SIGINT)
        reached.append("after the signal, still inside")
    assert reached == ["after the signal, still inside"]


# -- SIGKILL: the next save cleans up ---------------------------------------------------


@pytest.mark.parametrize("name", ["m", "m.tar"])
def test_next_save_removes_what_a_killed_save_left(tmp_path, name):
    rc, _, err = _terminate_when_ready(_run(SLOW_WRITE.format(path=str(tmp_path / name))), tmp_path,
                                       signal.SIGKILL)
    assert rc == -signal.SIGKILL
    left = [n for n in os.listdir(tmp_path) if ".t2n-tmp-" in n]
    assert len(left) == 1  # what SIGKILL leaves: nothing can run
    dead_pid = int(left[0].split("-")[-2])
    others = {
        f".other.tar.t2n-tmp-{dead_pid}-0badcafe": "another destination's leftover",
        f".{name}.t2n-tmp-{os.getpid()}-0badcafe": "a save that is still running",
        f".{name}.t2n-tmp-notes": "a user's file",
    }
    for n, text in others.items():
        (tmp_path / n).write_text(text)
    with open_writer(tmp_path / name) as w:
        w.add_bytes("graph.nnef", b"version 1.0;")
    assert sorted(os.listdir(tmp_path)) == sorted([name, *others])
    assert read_artifact(tmp_path / name) == {"graph.nnef": b"version 1.0;"}
