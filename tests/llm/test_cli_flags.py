"""The flags of ``t2n llm`` beyond the first ones: ``--force-inputs-dtype``,
``--sample-generation-total-size``, ``--merge-peft``, progress on a terminal, ``--help``
for every flag; and generation in f16 (Llama, Qwen2) with the cache in f16 or f32."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import click
import numpy as np
import pytest
import torch
from cli.cli_support import make_runner

from t2n.check.io_npz import read_io_npz
from t2n.cli.check import replay_io_npz
from t2n.cli.llm import show_progress
from t2n.errors import InvalidArgumentError
from t2n.llm import export_llm, tract_greedy_generate

from .folders import save_checkpoint
from .tiny_models import reference_tokens, tiny_model

PROMPT = torch.tensor([[3, 14, 15, 92, 65]])

FLAGS = ("--local-dir", "--export-dirpath", "--force-module-dtype", "--force-inputs-dtype",
         "--compression-method", "--force-f32-attention", "--force-f32-linear-accumulator",
         "--force-f32-normalization", "--reify-sdpa-operator", "--num-logits-to-keep",
         "--tract-check-io-tolerance", "--no-verify", "--dump-with-tokenizer-and-conf",
         "--sample-generation-total-size", "--naming-scheme", "--merge-peft", "--tract-version",
         "--trust-remote-code", "--progress", "--image-size")
"""Every flag of the widely used exporter's LLM command that t2n has, and t2n's own."""


def test_help_documents_every_flag() -> None:
    from click.testing import CliRunner

    from t2n.cli.llm import llm_command

    text = CliRunner().invoke(llm_command, ["--help"], terminal_width=200).output
    helps = {opt: param.help for param in llm_command.params if isinstance(param, click.Option)
             for opt in (*param.opts, *param.secondary_opts)}
    for flag in FLAGS:
        assert flag in text, flag
        assert len((helps.get(flag) or "").split()) >= 4, f"{flag} has no help text"
    assert "t2n check model.nnef.tgz --io tests/io.npz" in " ".join(text.split())


def test_qwen2_f16_generates_identically(tmp_path: Path) -> None:
    """(Llama in f16: tests/llm/test_generate.py.)"""
    model = tiny_model("qwen2").to(torch.float16)
    export_llm(model, tmp_path / "out", tract_check_io_tolerance="very")
    assert json.loads((tmp_path / "out" / "modes.json").read_text())["cache"]["dtype"] == "float16"
    assert tract_greedy_generate(tmp_path / "out", PROMPT, 16) == reference_tokens(model, PROMPT, 16)


def test_force_inputs_dtype_f32_on_an_f16_model(tmp_path: Path) -> None:
    """The cache and logits cross the graph's edge in f32; the model computes in f16 and
    generates what transformers generates in f16."""
    model = tiny_model("llama").to(torch.float16)
    export_llm(model, tmp_path / "out", force_inputs_dtype="f32", tract_check_io_tolerance="very")
    assert json.loads((tmp_path / "out" / "modes.json").read_text())["cache"]["dtype"] == "float32"
    prefill = read_io_npz(tmp_path / "out" / "tests" / "io.npz")[0]
    assert prefill.inputs["in_cache_key_0"].dtype == np.float32 and prefill.outputs["outputs"].dtype == np.float32
    assert tract_greedy_generate(tmp_path / "out", PROMPT, 16) == reference_tokens(model, PROMPT, 16)


def test_sample_generation_total_size(tmp_path: Path) -> None:
    model = tiny_model("qwen2")
    export_llm(model, tmp_path / "out", sample_generation_total_size=12)
    steps = read_io_npz(tmp_path / "out" / "tests" / "io.npz")
    assert [s.name for s in steps] == ["prefill", "decode", *(f"decode_{i}" for i in range(2, 8))]
    assert steps[-1].outputs["out_cache_key_0"].shape[2] == 11
    with np.load(tmp_path / "out" / "tests" / "io.npz") as data:
        tokens = data["tokens"][0].tolist()
    assert len(tokens) == 12
    assert tokens[4:] == reference_tokens(model, torch.tensor([tokens[:4]]), 8)
    assert len(replay_io_npz(tmp_path / "out" / "model" / "model.nnef.tgz", tmp_path / "out" / "tests" / "io.npz")) == 8


@pytest.mark.parametrize(("option", "value", "named"), [
    ("sample_generation_total_size", 5, "sample_generation_total_size must be an int >= 6"),
    ("sample_generation_total_size", "12", "sample_generation_total_size"),
    ("sample_generation_total_size", True, "sample_generation_total_size"),
    ("force_inputs_dtype", "bf16", "force_inputs_dtype must be one of f32, f16"),
])
def test_bad_flag_values(option: str, value: object, named: str, tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match=named):
        export_llm(tiny_model("llama"), tmp_path / "out", **{option: value})  # type: ignore[arg-type]
    assert not (tmp_path / "out").exists()


def test_cli_bad_total_size_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from t2n.cli.main import main

    (tmp_path / "ck").mkdir()
    assert main(["llm", "--local-dir", str(tmp_path / "ck"), "--export-dirpath", str(tmp_path / "out"),
                 "--sample-generation-total-size", "3"]) == 2
    assert "--sample-generation-total-size" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal() -> None:
    logger = logging.getLogger("t2n")
    handlers = list(logger.handlers)
    level = logging.getLogger("t2n.llm").level
    try:
        assert show_progress(io.StringIO(), None) is False
        assert logger.handlers == handlers
        terminal = _Terminal()
        assert show_progress(terminal, None) is True
        logging.getLogger("t2n.llm.text.export").info("exporting X")
        assert "t2n llm: exporting X" in terminal.getvalue()
        assert show_progress(io.StringIO(), True) is True  # --progress
        assert len(logger.handlers) == len(handlers) + 1  # replaced, not added again
    finally:
        logger.handlers[:] = handlers
        logging.getLogger("t2n.llm").setLevel(level)


@pytest.mark.slow
def test_cli_new_flags(tmp_path: Path) -> None:
    """The console script with --merge-peft, --force-inputs-dtype,
    --sample-generation-total-size and --progress (stderr is not a terminal here)."""
    from peft import LoraConfig, get_peft_model

    checkpoint = save_checkpoint(tiny_model("llama"), tmp_path / "ck", tokenizer=False)
    torch.manual_seed(1)
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    peft_model = get_peft_model(tiny_model("llama"), config)
    peft_model.save_pretrained(str(tmp_path / "adapter"))
    merged = peft_model.merge_and_unload()
    out = tmp_path / "out"
    done = make_runner()("llm", "--local-dir", checkpoint, "--export-dirpath", out, "-mp", tmp_path / "adapter",
                         "--force-module-dtype", "f16", "--force-inputs-dtype", "f32",
                         "--tract-check-io-tolerance", "very", "--sample-generation-total-size", "8", "--progress")
    assert done.returncode == 0, done.stderr
    assert "t2n llm: merging the LoRA adapter" in done.stderr and "t2n llm: generating 8 sample tokens" in done.stderr
    assert [s.name for s in read_io_npz(out / "tests" / "io.npz")] == ["prefill", "decode", "decode_2", "decode_3"]
    assert json.loads((out / "modes.json").read_text())["cache"]["dtype"] == "float32"
    assert tract_greedy_generate(out, PROMPT, 16) == reference_tokens(merged.to(torch.float16), PROMPT, 16)
