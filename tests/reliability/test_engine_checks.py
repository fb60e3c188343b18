"""Engine checks: a failed check always gives its typed error, a debug bundle (or a note
saying why there is none), and, when the engine dies, what it was doing.

Bad inputs tried here (14): a wrong `expected=`; a mismatch with the default bundle
folder; debug_dir that is an existing file; debug_dir under a file; a read-only
debug_dir (a ro mount, where permitted); debug_dir whose parents do not exist; a
debug_dir where a write fails half-way (a folder in the way of report.txt); a tract
abort while running (out-of-range gather index) through `Artifact.check`; the same
with an unwritable debug_dir; a tract abort while loading; a refusal while loading;
a worker killed by SIGKILL while optimising; a worker that stops answering; phase
markers and the reply arriving in one write.
"""

import os
import shutil
import sys
import textwrap

import numpy as np
import pytest
import torch
from conftest import tmpfs

import t2n
from t2n.check import EngineWorker, run_tract
from t2n.errors import CheckMismatchError, EngineCrashedError, EngineError
from t2n.serialize.dat import write_dat

BUNDLE_FILES = {"model", "inputs.npz", "expected.npz", "got.npz", "ir.txt", "report.txt", "versions.json",
                "replay.json", "replay.py"}


@pytest.fixture(scope="module")
def linear_artifact():
    torch.manual_seed(0)
    return t2n.compile(torch.nn.Linear(4, 3), (torch.rand(2, 4),))


class Gather(torch.nn.Module):
    def forward(self, x, idx):
        return x[idx] * 2.0


@pytest.fixture(scope="module")
def gather_artifact():
    return t2n.compile(Gather(), (torch.rand(5, 3), torch.tensor([0, 2])))


def _wrong(art):
    return [art.reference_outputs[0] + 1.0]


def _mismatch(art, **kw):
    with pytest.raises(CheckMismatchError) as info:
        art.check(inputs=art.example_inputs, expected=_wrong(art), **kw)
    return info.value


def test_mismatch_writes_a_bundle_that_round_trips(linear_artifact, tmp_path):
    art = linear_artifact
    dbg = tmp_path / "dbg"
    err = _mismatch(art, debug_dir=dbg)
    assert err.bundle == str(dbg)
    assert not err.report.ok and err.report.outputs[0].mismatched == 6
    assert f"Debug bundle written to {dbg}" in str(err) and "MISMATCH" in str(err)
    assert set(os.listdir(dbg)) == BUNDLE_FILES
    assert (dbg / "model" / "graph.nnef").read_text() == art.graph_nnef
    with np.load(dbg / "inputs.npz") as ins:
        assert list(ins.keys()) == art.input_names
        np.testing.assert_array_equal(ins[art.input_names[0]], art.example_inputs[0])
    with np.load(dbg / "expected.npz") as exp:
        np.testing.assert_array_equal(exp[art.output_names[0]], _wrong(art)[0])
    with np.load(dbg / "got.npz") as got:
        np.testing.assert_allclose(got["output_0"], art.reference_outputs[0], atol=1e-5)
    assert "linear" in (dbg / "ir.txt").read_text()
    assert "FAIL" in (dbg / "report.txt").read_text()


def test_default_bundle_is_a_temporary_folder_and_the_message_says_so(linear_artifact):
    err = _mismatch(linear_artifact)
    try:
        assert err.bundle and os.path.isdir(err.bundle)
        assert f"Debug bundle written to {err.bundle} (a temporary folder; pass debug_dir=" in str(err)
        assert set(os.listdir(err.bundle)) == BUNDLE_FILES
    finally:
        shutil.rmtree(err.bundle or "", ignore_errors=True)


@pytest.mark.parametrize("where", ["is_a_file", "under_a_file"])
def test_unwritable_debug_dir_still_gives_the_mismatch(linear_artifact, tmp_path, where):
    blocker = tmp_path / "notes.txt"
    blocker.write_text("the user's notes")
    dbg = blocker if where == "is_a_file" else blocker / "sub"
    err = _mismatch(linear_artifact, debug_dir=dbg)
    try:
        msg = str(err)
        assert "MISMATCH" in msg and err.report is not None
        assert f"the debug bundle could not be written to {dbg}" in msg
        assert "a file is in the way" in msg and "pass debug_dir=" in msg
        assert err.bundle and err.bundle != str(dbg) and f"it was written to {err.bundle} instead" in msg
        assert set(os.listdir(err.bundle)) == BUNDLE_FILES
        assert blocker.read_text() == "the user's notes"
        assert os.listdir(tmp_path) == ["notes.txt"]
    finally:
        shutil.rmtree(err.bundle or "", ignore_errors=True)


@pytest.fixture
def read_only_dir(tmp_path):
    """A read-only tmpfs mount (root can write through chmod, not through a ro mount)."""
    with tmpfs(tmp_path / "ro", "ro,size=64k") as ro:
        yield ro


def test_read_only_debug_dir_still_gives_the_mismatch(linear_artifact, read_only_dir):
    err = _mismatch(linear_artifact, debug_dir=read_only_dir / "dbg")
    try:
        assert "MISMATCH" in str(err) and "Read-only file system" in str(err)
        assert f"the debug bundle could not be written to {read_only_dir / 'dbg'}" in str(err)
        assert err.bundle and set(os.listdir(err.bundle)) == BUNDLE_FILES
    finally:
        shutil.rmtree(err.bundle or "", ignore_errors=True)


def test_missing_parent_folders_are_made(linear_artifact, tmp_path):
    dbg = tmp_path / "a" / "b" / "dbg"
    err = _mismatch(linear_artifact, debug_dir=dbg)
    assert err.bundle == str(dbg) and set(os.listdir(dbg)) == BUNDLE_FILES


def test_a_folder_of_the_users_is_never_written_into(linear_artifact, tmp_path):
    dbg = tmp_path / "mine"
    dbg.mkdir()
    (dbg / "keep.txt").write_text("user data")
    (dbg / "report.txt").mkdir()  # a folder where the bundle writes a file
    err = _mismatch(linear_artifact, debug_dir=dbg)
    try:
        assert f"the debug bundle could not be written to {dbg}" in str(err)
        assert "holds something t2n did not write" in str(err) and "'keep.txt'" in str(err)
        assert sorted(os.listdir(dbg)) == ["keep.txt", "report.txt"]
        assert (dbg / "keep.txt").read_text() == "user data"
        assert err.bundle and set(os.listdir(err.bundle)) == BUNDLE_FILES
    finally:
        shutil.rmtree(err.bundle or "", ignore_errors=True)


def test_a_bundle_failing_half_way_leaves_nothing_there(linear_artifact, tmp_path, monkeypatch):
    from t2n.check import bundle

    dbg = tmp_path / "a" / "dbg"
    write_extras = bundle._write_extras

    def full_disk(root, content):
        if not root.name.startswith("t2n-debug-"):
            raise OSError(28, "No space left on device")
        write_extras(root, content)

    monkeypatch.setattr(bundle, "_write_extras", full_disk)
    err = _mismatch(linear_artifact, debug_dir=dbg)
    try:
        assert f"the debug bundle could not be written to {dbg}" in str(err) and "No space left" in str(err)
        assert os.listdir(tmp_path) == []  # neither the bundle's temporary folder nor the parents it made
        assert err.bundle and set(os.listdir(err.bundle)) == BUNDLE_FILES
    finally:
        shutil.rmtree(err.bundle or "", ignore_errors=True)


def test_tract_abort_while_running_gets_a_bundle_and_names_the_phase(gather_artifact, tmp_path):
    art = gather_artifact
    x = art.example_inputs[0]
    bad_idx = np.array([0, 99], dtype=art.example_inputs[1].dtype)
    dbg = tmp_path / "crash"
    with pytest.raises(EngineCrashedError) as info:
        art.check(inputs=[x, bad_idx], expected=[np.zeros((2, 3), np.float32)], debug_dir=dbg)
    err = info.value
    msg = str(err)
    assert err.phase == "running" and "while running the model on the inputs" in msg
    assert "The crash is in the engine" in msg and "not necessarily wrong" in msg
    assert "signal SIGABRT" in msg
    assert err.bundle == str(dbg) and f"Debug bundle written to {dbg}" in msg
    assert set(os.listdir(dbg)) == BUNDLE_FILES - {"got.npz"}
    with np.load(dbg / "inputs.npz") as ins:
        np.testing.assert_array_equal(ins[art.input_names[1]], bad_idx)
    assert "while running" in (dbg / "report.txt").read_text()
    assert (dbg / "model" / "graph.nnef").exists()
    # the next check starts a fresh engine process
    assert art.check().ok


def test_tract_abort_with_an_unwritable_debug_dir(gather_artifact, tmp_path):
    art = gather_artifact
    blocker = tmp_path / "f"
    blocker.write_bytes(b"x")
    bad_idx = np.array([7, 0], dtype=art.example_inputs[1].dtype)
    with pytest.raises(EngineCrashedError) as info:
        art.check(inputs=[art.example_inputs[0], bad_idx], expected=[np.zeros((2, 3), np.float32)],
                  debug_dir=blocker)
    err = info.value
    try:
        assert f"the debug bundle could not be written to {blocker}" in str(err)
        assert err.bundle and os.path.isdir(err.bundle) and err.phase == "running"
        assert blocker.read_bytes() == b"x"
    finally:
        shutil.rmtree(err.bundle or "", ignore_errors=True)


ABORTS_WHILE_LOADING = """version 1.0;
graph main(x) -> (y)
{
    x = external<scalar>(shape = [1, 1, 4]);
    w = variable<scalar>(shape = [1, 1, 3], label = "w");
    y = conv(x, w, 0.0, border = "reflect", padding = [(1, 1)], stride = [1], dilation = [1], groups = 1);
}
"""


def test_tract_abort_while_loading_names_the_phase(tmp_path):
    (tmp_path / "graph.nnef").write_text(ABORTS_WHILE_LOADING)
    write_dat(tmp_path / "w.dat", np.ones((1, 1, 3), np.float32))
    with pytest.raises(EngineCrashedError) as info:
        run_tract(str(tmp_path), [np.ones((1, 1, 4), np.float32)])
    assert info.value.phase == "loading"
    assert "while loading the model" in str(info.value) and str(tmp_path) in str(info.value)


def test_refusal_names_the_phase(tmp_path):
    (tmp_path / "graph.nnef").write_text(
        "version 1.0;\ngraph main(x) -> (y)\n{\n  x = external<scalar>(shape = [2]);\n  y = nope(x);\n}\n"
    )
    with pytest.raises(EngineError) as info:
        run_tract(str(tmp_path), [np.zeros(2, np.float32)])
    assert type(info.value) is EngineError and info.value.phase == "loading"
    assert "refused" in str(info.value) and "while loading the model" in str(info.value)
    assert "nope" in str(info.value)


def _fake_worker(body):
    """A worker command that reads one request, then runs ``body``."""
    script = textwrap.dedent("""
        import os, signal, sys, time
        from t2n.check.protocol import recv, send
        out = sys.stdout.buffer
        recv(sys.stdin.buffer)
    """) + textwrap.dedent(body)
    return [sys.executable, "-c", script]


def test_worker_killed_mid_phase_is_a_crash_naming_that_phase():
    worker = EngineWorker(_fake_worker("""
        send(out, ("phase", "loading"))
        send(out, ("phase", "optimizing"))
        os.kill(os.getpid(), signal.SIGKILL)
    """))
    try:
        with pytest.raises(EngineCrashedError) as info:
            run_tract("m.nnef.tgz", [], worker=worker)
        assert info.value.phase == "optimizing" and "signal SIGKILL" in str(info.value)
        assert "while preparing the loaded model to run" in str(info.value)
        assert worker.pid is None
    finally:
        worker.close()


def test_worker_that_stops_answering_is_stopped_with_the_phase():
    worker = EngineWorker(_fake_worker("""
        send(out, ("phase", "running"))
        time.sleep(60)
    """))
    try:
        with pytest.raises(EngineError) as info:
            # the budget covers the worker's start-up too: 5 s keeps a loaded machine from
            # timing out before the fake worker reports its phase
            worker.call("tract", {"path": "m"}, timeout=5.0)
        assert "did not answer within 5 s while running the model" in str(info.value)
        assert info.value.phase == "running" and worker.pid is None
    finally:
        worker.close()


def test_phase_markers_and_the_reply_arriving_together_are_all_read():
    """Markers and reply in one write: a buffered pipe would hide the reply from select()."""
    worker = EngineWorker(_fake_worker("""
        import pickle
        reply = {"outputs": [], "input_facts": [], "output_facts": []}
        msgs = [("phase", "loading"), ("phase", "optimizing"), ("phase", "running"), ("ok", reply)]
        blob = b"".join(len(b).to_bytes(8, "little") + b for b in (pickle.dumps(m) for m in msgs))
        out.write(blob)
        out.flush()
        recv(sys.stdin.buffer)
    """))
    try:
        result = worker.call("tract", {"path": "m"}, timeout=10.0)
        assert result.outputs == [] and result.input_facts == []
    finally:
        worker.close()
