"""Messages that say the right thing.

Cases tried (13): ``t2n.quantize`` of a weight holding NaN, an infinity or a finite
value beyond Q4_0's range (each used to turn its whole block into NaN without a
word; now left in float with a warning naming it, and refused by name for
``tensors=``, and by ``quantize_tensor``); a weight given NaN after ``t2n.quantize``,
whose export named it "changed after t2n.quantize" (now: NaN, named as such); a
quantized bf16 model through ``t2n.export`` to a ``.tar`` and a folder (refused with
advice to use an option that is already the default; now written as
``compile().save()`` writes it); ``t2n export`` over a user's folder (advice said
``overwrite=True``; now ``--overwrite``); ``t2n llm`` into a non-empty folder (had no
``--overwrite``; now it has, and the message names it); ``t2n peft`` likewise; an
integer-typed norm weight in a checkpoint folder (reported as a ``weights_from``
problem; now a dtype problem naming the tensor), and through ``weights_from=``.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
import torch

import t2n
from t2n.errors import CheckpointFolderError, InvalidArgumentError

X = torch.rand(1, 64)


def _linear(value: float | None = None, dtype=torch.float32) -> torch.nn.Module:
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 64)).to(dtype).eval()
    if value is not None:
        with torch.no_grad():
            m[0].weight[3, 5] = value
    return m


@pytest.mark.parametrize("value, words", [(float("nan"), "NaN or infinite"), (float("inf"), "NaN or infinite"),
                                          (1e6, "beyond Q4_0's range")])
def test_quantize_leaves_a_weight_it_cannot_hold_in_float_and_says_why(caplog, value, words):
    m = _linear(value)
    before = m[0].weight.detach().clone()
    with caplog.at_level(logging.WARNING, logger="t2n.quant"):
        t2n.quantize(m)
    assert torch.equal(m[0].weight.detach().nan_to_num(), before.nan_to_num())  # untouched, no NaN block
    assert "0.weight" in caplog.text and words in caplog.text


@pytest.mark.parametrize("value, words", [(float("nan"), "NaN or infinite"), (1e6, "beyond Q4_0's range")])
def test_quantize_refuses_a_named_weight_it_cannot_hold(value, words):
    m = _linear(value)
    before = m[0].weight.detach().clone()
    with pytest.raises(InvalidArgumentError, match=words):
        t2n.quantize(m, tensors=["0.weight"])
    assert torch.equal(m[0].weight.detach().nan_to_num(), before.nan_to_num())
    with pytest.raises(InvalidArgumentError, match=words):
        t2n.quantize_tensor(before, name="w")


def test_a_nan_written_after_quantize_is_named_as_nan(tmp_path):
    m = _linear()
    t2n.quantize(m)
    with torch.no_grad():
        m[0].weight[3, 5] = float("nan")
    with pytest.raises(InvalidArgumentError) as info:
        t2n.compile(m, (X,)).save(tmp_path / "m.tgz")
    assert "NaN or infinite" in str(info.value) and "'0.weight'" in str(info.value)
    assert "changed after t2n.quantize" not in str(info.value)


@pytest.mark.parametrize("form", ["m.tar", "m"])
def test_a_quantized_bf16_model_exports_as_compile_then_save(tmp_path, form):
    m = _linear(dtype=torch.bfloat16)
    t2n.quantize(m)
    x = X.to(torch.bfloat16)
    t2n.export(m, (x,), tmp_path / f"e-{form}")
    t2n.compile(m, (x,)).save(tmp_path / f"s-{form}")
    e, s = tmp_path / f"e-{form}", tmp_path / f"s-{form}"
    if e.is_dir():
        assert sorted(p.name for p in e.iterdir()) == sorted(p.name for p in s.iterdir())
        for p in e.iterdir():
            assert p.read_bytes() == (s / p.name).read_bytes()
    else:
        assert e.read_bytes() == s.read_bytes()


@pytest.fixture
def runner():
    from cli.cli_support import make_runner

    return make_runner()


def test_the_export_command_advises_its_own_flag(runner, tmp_path):
    (tmp_path / "models.py").write_text("import torch\n\ndef build():\n"
                                        "    return torch.nn.Linear(4, 2).eval(), (torch.rand(1, 4),)\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    done = runner("export", "models:build", "-o", tmp_path / "out", cwd=tmp_path)
    assert done.returncode == 1 and "OverwriteRefusedError" in done.stderr
    assert "--overwrite" in done.stderr and "overwrite=True" not in done.stderr


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm.folders import save_checkpoint
    from llm.tiny_models import tiny_model

    return save_checkpoint(tiny_model("llama"), tmp_path_factory.mktemp("ck") / "ck", tokenizer=False)


def test_the_llm_command_has_overwrite(runner, checkpoint, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    refused = runner("llm", "--local-dir", checkpoint, "-e", out, "--no-verify")
    assert refused.returncode == 1 and "--overwrite" in refused.stderr and "overwrite=True" not in refused.stderr
    assert (out / "notes.txt").read_text() == "mine"
    done = runner("llm", "--local-dir", checkpoint, "-e", out, "--no-verify", "--overwrite")
    assert done.returncode == 0, done.stderr
    assert (out / "model" / "model.nnef.tgz").is_file()


def test_the_peft_command_advises_its_own_flag(runner, tmp_path):
    from safetensors.torch import save_file

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text('{"peft_type": "LORA", "r": 2}')
    save_file({"base_model.model.x.lora_A.weight": torch.zeros(2, 4)}, str(adapter / "adapter_model.safetensors"))
    dest = tmp_path / "dest.tgz"
    dest.write_text("mine")
    done = runner("peft", adapter, dest)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "--overwrite" in done.stderr and "overwrite=True" not in done.stderr


def test_an_integer_norm_weight_in_a_checkpoint_is_a_dtype_problem(checkpoint, tmp_path):
    from safetensors.torch import load_file, save_file

    from t2n.llm import export_llm

    folder = Path(shutil.copytree(checkpoint, tmp_path / "ck"))
    tensors = load_file(str(folder / "model.safetensors"))
    tensors["model.norm.weight"] = tensors["model.norm.weight"].to(torch.int64)
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointFolderError) as info:
        export_llm(folder, tmp_path / "out", verify=False)
    message = str(info.value)
    assert "model.norm.weight" in message and "int64" in message and "dtype" in message
    assert "weights_from" not in message and "meta" not in message


def test_an_integer_weight_through_weights_from_is_a_dtype_problem(tmp_path):
    from safetensors.torch import save_file

    save_file({"weight": torch.ones(8, dtype=torch.int64), "bias": torch.zeros(8)}, str(tmp_path / "w.safetensors"))
    with pytest.raises(InvalidArgumentError) as info:
        t2n.compile(torch.nn.LayerNorm(8), (torch.rand(2, 8),), weights_from=tmp_path / "w.safetensors")
    message = str(info.value)
    assert "weight: i64 in the weights" in message and "dtype" in message and "meta-device" not in message
