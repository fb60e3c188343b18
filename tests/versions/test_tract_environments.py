"""The runner of artifacts in a given tract release: bad versions and cache folders are
typed errors naming what to fix, an engine refusal or abort is reported for its own
artifact while the others still run, and TractNNEF.run reaches another version's
environment only when T2N_TRACT_ENVIRONMENTS is set."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn
from tract_matrix_support import environment_or_skip

import t2n
from t2n.backends.tract import environments as tract_versions
from t2n.backends.tract.environments import TractJob, run_in_tract_version, run_jobs, tract_python
from t2n.errors import EngineCrashedError, EngineError, InvalidArgumentError, TractEnvironmentError

INSTALLED = tract_versions.installed_tract_version() or "0.23.9"

ADD_ONE = """version 1.0;
graph g(x) -> (y)
{
  x = external<scalar>(shape = [2]);
  y = add(x, 1.0);
}
"""

ABORTS = """version 1.0;
graph g(x) -> (y)
{
  x = external<scalar>(shape = [1, 1, 4, 4]);
  w = [[[[1.0, 1.0], [1.0, 1.0]]]];
  y = conv(x, w, border = 'reflect', padding = [(1, 1), (1, 1)]);
}
"""


def _model(tmp_path: Path, name: str, text: str) -> str:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "graph.nnef").write_text(text)
    return str(folder)


@pytest.mark.parametrize("version", ["0.21.x", "latest", "", "0.21.19-rc1"])
def test_unreadable_version_is_refused_before_anything_is_made(version, tmp_path):
    with pytest.raises(InvalidArgumentError, match="MAJOR.MINOR") as err:
        tract_python(version, cache=tmp_path)
    assert repr(version) in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_float_version_is_refused_with_the_string_to_write(tmp_path):
    with pytest.raises(InvalidArgumentError, match="'0.2'"):
        tract_python(0.20, cache=tmp_path)  # type: ignore[arg-type]


def test_missing_environment_without_create_names_version_folder_and_what_to_do(tmp_path):
    with pytest.raises(TractEnvironmentError) as err:
        tract_python("0.21.7", cache=tmp_path, create=False)
    message = str(err.value)
    assert "0.21.7" in message and str(tmp_path / "tract-0.21.7") in message
    assert "tract_python('0.21.7')" in message
    assert list(tmp_path.iterdir()) == []


def test_cache_that_is_a_file_is_a_typed_error_with_the_os_error_as_cause(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("keep me")
    with pytest.raises(TractEnvironmentError) as err:
        tract_python("0.21.7", cache=blocker)
    assert str(blocker / "tract-0.21.7") in str(err.value)
    assert "T2N_TRACT_CACHE" in str(err.value)
    assert isinstance(err.value.__cause__, OSError)
    assert isinstance(err.value, EngineError)  # existing `except EngineError` still catch it
    assert blocker.read_text() == "keep me"


def test_failed_install_gives_pips_words_and_the_environment_is_not_marked_ready(tmp_path, monkeypatch):
    # a requirement pip refuses at once stands for any failed install (no registry needed)
    monkeypatch.setattr(tract_versions, "numpy_requirement", lambda version: "numpy is not a requirement")
    with pytest.raises(TractEnvironmentError) as err:
        tract_python("0.21.7", cache=tmp_path)
    message = str(err.value)
    assert "tract==0.21.7" in message and "numpy is not a requirement" in message and "What to do" in message
    assert not (tmp_path / "tract-0.21.7" / tract_versions.READY_MARK).exists()
    with pytest.raises(TractEnvironmentError):  # and is not taken as ready next time either
        tract_python("0.21.7", cache=tmp_path, create=False)


def test_installed_version_runs_here_without_an_environment(tmp_path):
    assert tract_python(INSTALLED, cache=tmp_path) == Path(tract_versions.sys.executable)
    assert list(tmp_path.iterdir()) == []


def test_refusal_and_abort_are_reported_per_artifact_and_later_ones_still_run(tmp_path):
    good = _model(tmp_path, "good", ADD_ONE)
    aborts = _model(tmp_path, "aborts", ABORTS)
    missing = str(tmp_path / "missing")
    x = np.array([1.0, 2.0], np.float32)
    results = run_jobs(INSTALLED, [
        TractJob(missing, [x]), TractJob(good, [x]),
        TractJob(aborts, [np.ones((1, 1, 4, 4), np.float32)]), TractJob(good, [x * 2]),
    ])
    refused, first, crashed, after = results
    assert isinstance(refused, EngineError) and not isinstance(refused, EngineCrashedError)
    assert missing in str(refused) and refused.phase == "loading"
    assert isinstance(crashed, EngineCrashedError)
    assert aborts in str(crashed) and "panicked" in str(crashed) and crashed.phase == "loading"
    np.testing.assert_array_equal(first[0], [2.0, 3.0])  # type: ignore[index]
    np.testing.assert_array_equal(after[0], [3.0, 5.0])  # type: ignore[index]


def test_wrong_input_count_is_refused_not_crashed(tmp_path):
    good = _model(tmp_path, "good", ADD_ONE)
    with pytest.raises(EngineError, match="1 inputs but 2 were given") as err:
        run_in_tract_version(INSTALLED, good, [np.zeros(2, np.float32)] * 2)
    assert not isinstance(err.value, EngineCrashedError)


def test_target_run_uses_the_installed_tract_unless_asked(monkeypatch):
    monkeypatch.delenv(tract_versions.SWITCH_VARIABLE, raising=False)
    assert not tract_versions.uses_environment("0.21.19")
    monkeypatch.setenv(tract_versions.SWITCH_VARIABLE, "1")
    assert tract_versions.uses_environment("0.21.19")
    assert not tract_versions.uses_environment(INSTALLED)


@pytest.mark.parametrize("version", ["0.21.19", "0.22.4"])
def test_check_runs_in_the_targets_own_tract_when_asked(version, monkeypatch):
    environment_or_skip(version)
    monkeypatch.setenv(tract_versions.SWITCH_VARIABLE, "1")
    model = nn.Sequential(nn.Linear(4, 8), nn.SiLU(), nn.Linear(8, 2)).eval()
    art = t2n.compile(model, (torch.randn(3, 4),), t2n.TractNNEF(version))
    report = art.check()
    assert report.ok and version in str(report)


def test_runner_is_public_and_runs_a_saved_artifact_in_the_installed_tract(tmp_path):
    model = nn.Sequential(nn.Linear(4, 2)).eval()
    x = torch.randn(3, 4)
    art = t2n.compile(model, (x,), t2n.TractNNEF(INSTALLED))
    with pytest.raises(InvalidArgumentError, match="saved_path"):
        t2n.run_in_tract_version(INSTALLED, art, [x.numpy()])  # type: ignore[arg-type]
    path = art.save(tmp_path / "m.nnef.tgz")
    [out] = t2n.run_in_tract_version(INSTALLED, path, [x.numpy()])
    np.testing.assert_allclose(out, model(x).detach().numpy(), rtol=1e-5, atol=1e-6)


SCALAR_INPUT = """version 1.0;
graph g(x, s) -> (y)
{
  x = external<scalar>(shape = [2]);
  s = external<scalar>(shape = []);
  y = mul(x, s);
}
"""


@pytest.mark.parametrize("version", ["0.21.19", INSTALLED])
def test_scalar_inputs_and_typed_outputs_survive_every_binding(version, tmp_path):
    """tract-python before 0.23 turns a 0-d input into 1-d and reads every output as
    f32; the runner passes and reads them with their real rank and type."""
    environment_or_skip(version)
    model = _model(tmp_path, "scalar", SCALAR_INPUT)
    [out] = run_in_tract_version(version, model, [np.array([1.0, 2.0], np.float32), np.array(3.0, np.float32)])
    np.testing.assert_array_equal(out, [3.0, 6.0])
    assert out.dtype == np.float32
