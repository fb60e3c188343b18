"""debug_bundle_path: one bundle (a .tgz, a .tar or a folder) on a failed check, with
the artifact, inputs, both outputs, the IR after each pass, the versions and a replay
script that reproduces the failure; nothing when the check passes.

Bad inputs tried here (10): a deliberately wrong emitter (relu written as neg) checked
at compile (.tgz bundle), at export (.tar bundle) and later with artifact.check()
(folder bundle); a tract abort (out-of-range gather index) whose bundle replays the
crash; an emitter writing an op tract does not know (refused while loading, replayed); a bundle path whose parent is a file (the mismatch is still raised, the note
says where the bundle went); debug_bundle_path of the wrong type (3) and empty ("")
refused before the trace; a wrong emitter on Khronos NNEF (replayed in the nnef-tools
interpreter); replay.py run where t2n cannot be imported (says what to install).
"""

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch

import t2n
from t2n.errors import CheckMismatchError, EngineCrashedError, EngineError, InvalidArgumentError

REPO = Path(t2n.__file__).resolve().parents[1]
X = torch.randn(3, 4)


class Small(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 5)
        self.bn = torch.nn.BatchNorm1d(5)  # folded into fc by a pass: the IR changes
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return torch.relu(self.bn(self.fc(x)))


class Gather(torch.nn.Module):
    def forward(self, x, idx):
        return x[idx] * 2.0


def _relu_as_neg(ctx, op):
    ctx.emit(op.output, "neg", op.inputs[0])


def _wrong(target):
    return target.with_emitters({"relu": _relu_as_neg}, override=True)


def _replay(folder: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, str(folder / "replay.py")], capture_output=True, text=True,
                          env=env, timeout=120, check=False)


def _extract(archive: Path, dest: Path) -> Path:
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        tar.extractall(dest, filter="data")
    top = {n.split("/")[0] for n in names}
    assert len(top) == 1, top
    return dest / top.pop()


def _assert_complete(folder: Path, art, *, got: bool = True, reference: bool = True) -> None:
    """Every part of a bundle is there (``art``: an artifact of the same model)."""
    files = set(os.listdir(folder))
    expected = {"model", "inputs.npz", "expected.npz", "ir.txt", "ir", "report.txt", "versions.json",
                "replay.json", "replay.py"} | ({"got.npz"} if got else set())
    assert files == expected
    assert (folder / "model" / "graph.nnef").read_text() == art.graph_nnef
    stages = sorted(os.listdir(folder / "ir"))
    assert stages[0] == "000-lowered.ir"
    assert not reference or any("fold-batch-norm" in s for s in stages), stages
    versions = json.loads((folder / "versions.json").read_text())
    assert {"t2n", "torch", "tract", "nnef", "nnef_tools", "numpy", "python", "platform"} <= set(versions)
    assert versions["t2n"] == t2n.__version__ and versions["torch"].startswith(torch.__version__.split("+")[0])
    with np.load(folder / "inputs.npz") as ins:
        assert list(ins.keys()) == art.input_names
    with np.load(folder / "expected.npz") as exp:
        assert list(exp.keys()) == art.output_names
        if reference:
            np.testing.assert_array_equal(exp[art.output_names[0]], art.reference_outputs[0])
    if got:
        with np.load(folder / "got.npz") as out:
            assert list(out.keys()) == art.output_names


def test_mismatch_at_compile_writes_one_tgz_that_replays_the_mismatch(tmp_path):
    path = tmp_path / "bundle.tgz"
    with pytest.raises(CheckMismatchError) as info:
        t2n.compile(Small(), (X,), _wrong(t2n.TractNNEF()), check_io=True, debug_bundle_path=path)
    err = info.value
    assert err.bundle == str(path) and f"Debug bundle written to {path}" in str(err)
    assert os.listdir(tmp_path) == ["bundle.tgz"]
    folder = _extract(path, tmp_path / "x")
    _assert_complete(folder, t2n.compile(Small(), (X,), _wrong(t2n.TractNNEF())), reference=False)
    assert any("fold-batch-norm" in s for s in os.listdir(folder / "ir"))
    assert "neg(" in (folder / "model" / "graph.nnef").read_text()
    done = _replay(folder)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "MISMATCH" in done.stdout and "FAIL output_0" in done.stdout


def test_mismatch_at_export_writes_a_tar_bundle(tmp_path):
    path = tmp_path / "dbg" / "b.tar"
    with pytest.raises(CheckMismatchError):
        t2n.export(Small(), (X,), tmp_path / "m.nnef.tgz", _wrong(t2n.TractNNEF()), check_io=True,
                   debug_bundle_path=path)
    with tarfile.open(path) as tar:  # plain tar: no gzip header
        assert all(m.name == "b" or m.name.startswith("b/") for m in tar.getmembers())
    folder = _extract(path, tmp_path / "x")
    assert (folder / "m.nnef.tgz").is_file() and "model" not in os.listdir(folder)
    assert json.loads((folder / "replay.json").read_text())["model"] == "m.nnef.tgz"
    assert _replay(folder).returncode == 1


def test_later_check_uses_the_compile_path_and_a_folder_bundle(tmp_path):
    path = tmp_path / "bundle_dir"
    art = t2n.compile(Small(), (X,), _wrong(t2n.TractNNEF()), debug_bundle_path=path)
    assert not path.exists()  # nothing until a check fails
    with pytest.raises(CheckMismatchError) as info:
        art.check()
    assert info.value.bundle == str(path)
    _assert_complete(path, art)
    done = _replay(path)
    assert done.returncode == 1 and "MISMATCH" in done.stdout
    loose = subprocess.run([sys.executable, str(path / "replay.py"), "--tolerance", "exact"],
                           capture_output=True, text=True, timeout=120, check=False,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
    assert loose.returncode == 1 and "'exact'" in loose.stdout


def test_nothing_is_written_when_all_is_well(tmp_path):
    path = tmp_path / "never.tgz"
    art = t2n.compile(Small(), (X,), check_io=True, debug_bundle_path=path)
    assert art.check().ok
    t2n.export(Small(), (X,), tmp_path / "m.nnef", check_io=True, debug_bundle_path=path)
    assert sorted(os.listdir(tmp_path)) == ["m.nnef"]


def test_engine_crash_writes_a_bundle_whose_replay_crashes_too(tmp_path):
    path = tmp_path / "crash.tgz"
    art = t2n.compile(Gather(), (torch.rand(5, 3), torch.tensor([0, 2])), debug_bundle_path=path)
    bad = np.array([0, 99], dtype=np.int64)
    with pytest.raises(EngineCrashedError) as info:
        art.check(inputs=[art.example_inputs[0], bad], expected=[np.zeros((2, 3), np.float32)])
    assert info.value.bundle == str(path)
    folder = _extract(path, tmp_path / "x")
    _assert_complete(folder, art, got=False, reference=False)
    assert "got.npz" not in os.listdir(folder) and "while running" in (folder / "report.txt").read_text()
    done = _replay(folder)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "EngineCrashedError" in done.stdout and "while running the model" in done.stdout


def test_a_bundle_path_that_cannot_be_written_still_gives_the_mismatch(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("user data")
    with pytest.raises(CheckMismatchError) as info:
        t2n.compile(Small(), (X,), _wrong(t2n.TractNNEF()), check_io=True,
                    debug_bundle_path=blocker / "b.tgz")
    err = info.value
    assert "MISMATCH" in str(err) and f"could not be written to {blocker / 'b.tgz'}" in str(err)
    assert err.bundle and Path(err.bundle).is_dir() and (Path(err.bundle) / "replay.py").is_file()
    assert blocker.read_text() == "user data" and sorted(os.listdir(tmp_path)) == ["file"]


@pytest.mark.parametrize("bad", [3, ""])
def test_bad_bundle_paths_are_refused_before_the_trace(bad):
    model = Small()
    with pytest.raises(InvalidArgumentError, match="debug_bundle_path must be None or a path"):
        t2n.compile(model, (X,), debug_bundle_path=bad)
    assert model.calls == 0


@pytest.mark.slow
def test_khronos_mismatch_replays_in_the_khronos_interpreter(tmp_path):
    path = tmp_path / "k"
    with pytest.raises(CheckMismatchError):
        t2n.compile(Small(), (X,), _wrong(t2n.KhronosNNEF()), check_io=True, debug_bundle_path=path)
    assert json.loads((path / "replay.json").read_text())["engine"] == "khronos"
    done = _replay(path)
    assert done.returncode == 1 and "Khronos NNEF interpreter" in done.stdout


def _unknown_op(ctx, op):
    ctx.emit(op.output, "no_such_op", op.inputs[0])


def test_engine_refusal_writes_a_bundle_whose_replay_is_refused_too(tmp_path):
    path = tmp_path / "refused"
    target = t2n.TractNNEF().with_emitters({"relu": _unknown_op}, override=True)
    with pytest.raises(EngineError) as info:
        t2n.compile(Small(), (X,), target, check_io=True, debug_bundle_path=path)
    err = info.value
    assert err.phase == "loading" and "no_such_op" in str(err) and err.bundle == str(path)
    assert f"Debug bundle written to {path}" in str(err)
    assert "got.npz" not in os.listdir(path) and (path / "replay.py").is_file()
    done = _replay(path)
    assert done.returncode == 2 and "refused" in done.stdout and "no_such_op" in done.stdout


def test_replay_without_t2n_says_what_to_install(tmp_path):
    path = tmp_path / "b"
    with pytest.raises(CheckMismatchError):
        t2n.compile(Small(), (X,), _wrong(t2n.TractNNEF()), check_io=True, debug_bundle_path=path)
    fake = tmp_path / "fake" / "t2n"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no t2n here')\n")
    done = subprocess.run([sys.executable, str(path / "replay.py")], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(fake.parent)}, check=False)
    assert done.returncode == 2 and "pip install 't2n[check]'" in done.stderr
