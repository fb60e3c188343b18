"""Every error a user can cause is a t2n error naming the file and the field.

Cases tried (13): a checkpoint ``config.json`` with a field of the wrong type
(``hidden_size`` a string, ``vocab_size`` a float, ``rope_scaling`` a string,
``architectures`` a string instead of a list), sizes that disagree (heads that do not
divide the hidden size), an unknown ``torch_dtype`` (exported as f32 without a word
before), through ``t2n.llm.export_llm`` and the ``t2n llm`` command (no
``huggingface_hub`` validation error escapes); a TorchScript model given example
inputs of the wrong shape or number, through ``t2n.compile`` (``TraceError``) and
``t2n export FILE.pt --input-shape`` (exit 1 naming the file and ``--input-shape``,
not a plain ``RuntimeError``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

import t2n
from t2n.errors import CheckpointFolderError, TraceError
from t2n.llm import export_llm


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm.folders import save_checkpoint
    from llm.tiny_models import tiny_model

    return save_checkpoint(tiny_model("llama"), tmp_path_factory.mktemp("ck") / "ck", tokenizer=False)


def _with_config(checkpoint: Path, tmp_path: Path, **fields: object) -> Path:
    folder = Path(shutil.copytree(checkpoint, tmp_path / "ck"))
    config = json.loads((folder / "config.json").read_text())
    config.update(fields)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


CONFIGS = {
    "hidden_size_a_string": ({"hidden_size": "64"}, "hidden_size"),
    "vocab_size_a_float": ({"vocab_size": 96.5}, "vocab_size"),
    "rope_scaling_a_string": ({"rope_scaling": "yes"}, "rope"),
    "heads_do_not_divide": ({"num_attention_heads": 5}, "attention heads"),
    "architectures_a_string": ({"architectures": "LlamaForCausalLM"}, "architectures"),
    "unknown_dtype": ({"dtype": "float77"}, "float77"),
}


@pytest.mark.parametrize("case", list(CONFIGS))
def test_a_bad_config_is_a_checkpoint_error_naming_the_field(checkpoint, tmp_path, case):
    fields, named = CONFIGS[case]
    folder = _with_config(checkpoint, tmp_path, **fields)
    with pytest.raises(CheckpointFolderError) as info:
        export_llm(folder, tmp_path / "out", verify=False)
    assert str(folder / "config.json") in str(info.value) and named in str(info.value)
    assert not (tmp_path / "out").exists()


def test_the_llm_command_reports_a_bad_config_as_a_t2n_error(checkpoint, tmp_path):
    from cli.cli_support import make_runner

    folder = _with_config(checkpoint, tmp_path, hidden_size="64")
    done = make_runner()("llm", "--local-dir", folder, "-e", tmp_path / "out", "--no-verify")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "CheckpointFolderError" in done.stderr and "hidden_size" in done.stderr
    assert "huggingface_hub" not in done.stderr and "--debug" not in done.stderr


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ts") / "lin.pt"
    torch.jit.save(torch.jit.script(torch.nn.Sequential(torch.nn.Linear(8, 4))), str(path))
    return path


@pytest.mark.parametrize("args", [(torch.rand(1, 5),), (torch.rand(1, 8), torch.rand(1, 8))],
                         ids=["wrong_shape", "one_input_too_many"])
def test_a_scripted_model_on_wrong_inputs_is_a_trace_error(scripted, args):
    with pytest.raises(TraceError) as info:
        t2n.compile(torch.jit.load(str(scripted)), args)
    assert "example inputs" in str(info.value) and f"{len(args)} given" in str(info.value)
    assert "[1, 5]" in str(info.value) or len(args) == 2


@pytest.mark.parametrize("shapes", [["1,5"], ["1,8", "1,8"]], ids=["wrong_shape", "one_input_too_many"])
def test_the_export_command_names_the_file_and_the_shapes(scripted, tmp_path, shapes):
    from cli.cli_support import make_runner

    flags = [x for s in shapes for x in ("--input-shape", s)]
    done = make_runner()("export", scripted, *flags, "-o", tmp_path / "m.tgz")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "TraceError" in done.stderr and str(scripted) in done.stderr and "--input-shape" in done.stderr
    assert "RuntimeError: The following operation failed" not in done.stderr.splitlines()[0]
    assert not (tmp_path / "m.tgz").exists()

