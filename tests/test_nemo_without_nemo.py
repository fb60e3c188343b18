"""t2n.nemo where NeMo is not installed: the command and the package load, exporting
says how to install NeMo, and export folders are read (or refused) without it."""

from __future__ import annotations

import json
import sys

import pytest

from t2n.errors import NemoManifestError, NemoUnavailableError


def test_exporting_needs_nemo(monkeypatch, tmp_path):
    import t2n.nemo

    monkeypatch.setitem(sys.modules, "nemo", None)  # as if not installed
    monkeypatch.setitem(sys.modules, "nemo.collections", None)
    monkeypatch.setitem(sys.modules, "nemo.collections.asr", None)
    (tmp_path / "model.yaml").write_text("model: {}\n")
    with pytest.raises(NemoUnavailableError, match=r"pip install 't2n\[nemo\]'"):
        t2n.nemo.load_model(tmp_path / "model.yaml")
    with pytest.raises(NemoUnavailableError):
        t2n.nemo.export_asr(tmp_path / "model.yaml", tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.yaml"]


def test_the_commands_have_help_without_nemo():
    from click.testing import CliRunner

    from t2n.cli.main import cli

    for name in ("nemo-asr", "nemo-transcribe"):
        res = CliRunner().invoke(cli, [name, "--help"])
        assert res.exit_code == 0 and f"Usage: cli {name}" in res.output, res.output
        assert ("--max-audio-seconds" in res.output) == (name == "nemo-asr")


def test_a_folder_that_is_not_an_export_is_refused(tmp_path):
    import t2n.nemo

    with pytest.raises(NemoManifestError, match="no manifest.json"):
        t2n.nemo.load(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(NemoManifestError, match="not a t2n-nemo-asr manifest"):
        t2n.nemo.load(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "t2n-nemo-asr", "version": 9}))
    with pytest.raises(NemoManifestError, match="version 9"):
        t2n.nemo.load(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps(
        {"format": "t2n-nemo-asr", "version": 1, "artifacts": {"encoder": {"path": "encoder.nnef.tgz"}}}))
    with pytest.raises(NemoManifestError, match="lists encoder at encoder.nnef.tgz, which is missing"):
        t2n.nemo.load(tmp_path)
