"""``OUT/tests/io.npz``: the prefill and decode steps PyTorch ran, replayed in tract by
``t2n check --io``, ``t2n.cli.check.replay_io_npz`` and ``Artifact.check``; a tampered
file fails the check. And the tokenizer and config written beside the graph."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from t2n.check.io_npz import IOStep, read_io_npz, write_io_npz
from t2n.cli.check import replay_io_npz
from t2n.errors import CheckMismatchError, InvalidArgumentError
from t2n.llm import export_llm

from .folders import save_checkpoint
from .tiny_models import reference_tokens, tiny_model


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("io")
    folder = save_checkpoint(tiny_model("llama"), root / "ck")
    export_llm(folder, root / "out", dump_with_tokenizer_and_conf=True)
    return root / "out"


def test_io_npz_holds_prefill_and_decode(out: Path) -> None:
    steps = read_io_npz(out / "tests" / "io.npz")
    assert [s.name for s in steps] == ["prefill", "decode"]
    prefill, decode = steps
    assert prefill.inputs["input_ids"].shape == (1, 4) and prefill.inputs["in_cache_key_0"].shape[2] == 0
    assert decode.inputs["input_ids"].shape == (1, 1) and decode.inputs["in_cache_key_0"].shape[2] == 4
    np.testing.assert_array_equal(decode.inputs["in_cache_value_1"], prefill.outputs["out_cache_value_1"])
    with np.load(out / "tests" / "prefill.npz") as single:  # the single-step files agree
        np.testing.assert_array_equal(single["outputs"], prefill.outputs["outputs"])
    with np.load(out / "tests" / "io.npz") as data:
        tokens = data["tokens"][0].tolist()
    prompt = torch.tensor([tokens[:4]])
    assert tokens[4:] == reference_tokens(tiny_model("llama"), prompt, 2)


def test_replay_passes(out: Path) -> None:
    reports = replay_io_npz(out / "model" / "model.nnef.tgz", out / "tests" / "io.npz")
    assert [name for name, _ in reports] == ["prefill", "decode"] and all(r.ok for _, r in reports)


def test_cli_check_io(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from t2n.cli.main import main

    assert main(["check", str(out / "model" / "model.nnef.tgz"), "--io", str(out / "tests" / "io.npz")]) == 0
    printed = capsys.readouterr().out
    assert "step prefill:" in printed and "step decode:" in printed and "all outputs match" in printed
    assert main(["check", str(out / "model" / "model.nnef.tgz"), "--io", str(out / "tests" / "io.npz"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and [s["step"] for s in report["steps"]] == ["prefill", "decode"]


def _tampered(out: Path, tmp_path: Path) -> Path:
    steps = read_io_npz(out / "tests" / "io.npz")
    steps[1].outputs["outputs"] = steps[1].outputs["outputs"] + 1.0
    write_io_npz(tmp_path / "io.npz", steps)
    return tmp_path / "io.npz"


def test_tampered_io_npz_fails(out: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from t2n.cli.main import main

    tampered = _tampered(out, tmp_path)
    with pytest.raises(CheckMismatchError, match=r"(?s)step 'decode' of .*io\.npz.*FAIL outputs.*export again") as info:
        replay_io_npz(out / "model" / "model.nnef.tgz", tampered)
    assert info.value.report is not None and not info.value.report.ok  # type: ignore[attr-defined]
    assert main(["check", str(out / "model" / "model.nnef.tgz"), "--io", str(tampered)]) == 1
    assert "CheckMismatchError" in capsys.readouterr().err


def test_io_npz_without_steps(out: Path, tmp_path: Path) -> None:
    np.savez(tmp_path / "flat.npz", input_ids=np.zeros((1, 1), np.int64))
    with pytest.raises(InvalidArgumentError, match=r"flat\.npz holds no steps.*STEP/inputs/NAME"):
        replay_io_npz(out / "model" / "model.nnef.tgz", tmp_path / "flat.npz")


def test_io_npz_step_missing_an_input(out: Path, tmp_path: Path) -> None:
    steps = read_io_npz(out / "tests" / "io.npz")
    del steps[0].inputs["in_cache_key_1"]
    write_io_npz(tmp_path / "io.npz", steps)
    with pytest.raises(InvalidArgumentError, match=r"step 'prefill' has no inputs in_cache_key_1"):
        replay_io_npz(out / "model" / "model.nnef.tgz", tmp_path / "io.npz")


def test_not_an_npz(out: Path, tmp_path: Path) -> None:
    (tmp_path / "io.npz").write_bytes(b"not a zip")
    with pytest.raises(InvalidArgumentError, match=r"cannot read it as a \.npz"):
        replay_io_npz(out / "model" / "model.nnef.tgz", tmp_path / "io.npz")


def test_cli_io_with_inputs_is_a_usage_error(out: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from t2n.cli.main import main

    io = str(out / "tests" / "io.npz")
    assert main(["check", str(out / "model" / "model.nnef.tgz"), "--io", io, "--inputs", io]) == 2
    assert "--io replays in tract on its own" in capsys.readouterr().err


def test_artifact_check_replays_steps(tmp_path: Path) -> None:
    """Steps of different sizes of a model with a dynamic axis, through Artifact.check."""
    import t2n

    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.Tanh()).eval()
    artifact = t2n.compile(model, (torch.randn(1, 3, 8),), t2n.TractNNEF(), input_names=["x"],
                           output_names=["y"], dynamic_axes={"x": {1: "S"}})
    steps = []
    for name, size in (("prefill", 5), ("decode", 1)):
        x = torch.randn(1, size, 8)
        steps.append(IOStep(name, {"x": x.numpy()}, {"y": model(x).detach().numpy()}))
    write_io_npz(tmp_path / "io.npz", steps)
    for step in read_io_npz(tmp_path / "io.npz"):
        inputs, expected = step.arrays(artifact.input_names, artifact.output_names)
        assert artifact.check(inputs=inputs, expected=expected).ok
    inputs, expected = steps[1].arrays(["x"], ["y"])
    with pytest.raises(CheckMismatchError):
        artifact.check(inputs=inputs, expected=[expected[0] + 1], debug_dir=tmp_path / "bundle")


def test_tokenizer_and_config_beside_the_graph(out: Path) -> None:
    from tokenizers import Tokenizer

    assert (out / "model" / "model.nnef.tgz").is_file()
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "llama" and config["num_hidden_layers"] == 2
    tokenizer = Tokenizer.from_file(str(out / "tokenizer" / "tokenizer.json"))
    assert tokenizer.encode("w3 w7 w95").ids == [3, 7, 95]
