"""Export from a local checkpoint folder, and every bad folder or argument refused with
a typed error before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from t2n.errors import (
    CheckpointFolderError,
    InvalidArgumentError,
    OverwriteRefusedError,
    UnsupportedArchitectureError,
)
from t2n.llm import export_llm, tract_greedy_generate

from .folders import save_checkpoint
from .tiny_models import reference_tokens, tiny_model


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_checkpoint(tiny_model("qwen2"), tmp_path_factory.mktemp("qwen2"))


def test_folder_exports_with_tokenizer_and_config(checkpoint: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    export_llm(checkpoint, out, dump_with_tokenizer_and_conf=True)
    assert (out / "tokenizer" / "tokenizer.json").is_file()
    assert json.loads((out / "config.json").read_text())["model_type"] == "qwen2"
    prompt = torch.randint(1, 96, (1, 5), generator=torch.Generator().manual_seed(3))
    assert tract_greedy_generate(out, prompt, 16) == reference_tokens(tiny_model("qwen2"), prompt, 16)


def test_folder_in_f16(checkpoint: Path, tmp_path: Path) -> None:
    export_llm(checkpoint, tmp_path / "out", dtype="f16", tract_check_io_tolerance="very")
    assert json.loads((tmp_path / "out" / "modes.json").read_text())["cache"]["dtype"] == "float16"


def _copy(src: Path, dst: Path, skip: str) -> Path:
    dst.mkdir()
    for path in src.iterdir():
        if path.name != skip:
            (dst / path.name).write_bytes(path.read_bytes())
    return dst


def _assert_nothing_written(out: Path) -> None:
    assert not out.exists()


def test_folder_without_config(checkpoint: Path, tmp_path: Path) -> None:
    folder = _copy(checkpoint, tmp_path / "ck", "config.json")
    with pytest.raises(CheckpointFolderError, match=r"has no config\.json.*save_pretrained") as info:
        export_llm(folder, tmp_path / "out")
    assert str(folder) in str(info.value)
    _assert_nothing_written(tmp_path / "out")


def test_folder_without_weights(checkpoint: Path, tmp_path: Path) -> None:
    folder = _copy(checkpoint, tmp_path / "ck", "model.safetensors")
    with pytest.raises(CheckpointFolderError, match=r"no \*\.safetensors weights.*save_pretrained"):
        export_llm(folder, tmp_path / "out")
    _assert_nothing_written(tmp_path / "out")


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(CheckpointFolderError, match="is not a folder"):
        export_llm(tmp_path / "nowhere", tmp_path / "out")
    _assert_nothing_written(tmp_path / "out")


def test_config_not_json(checkpoint: Path, tmp_path: Path) -> None:
    folder = _copy(checkpoint, tmp_path / "ck", "")
    (folder / "config.json").write_text("{not json")
    with pytest.raises(CheckpointFolderError, match=r"config\.json cannot be read as JSON"):
        export_llm(folder, tmp_path / "out")
    _assert_nothing_written(tmp_path / "out")


def test_unknown_architecture_named(checkpoint: Path, tmp_path: Path) -> None:
    folder = _copy(checkpoint, tmp_path / "ck", "")
    config = json.loads((folder / "config.json").read_text())
    config["architectures"] = ["FancyNetForCausalLM"]
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedArchitectureError, match=r"'FancyNetForCausalLM'.*t2n\.export") as info:
        export_llm(folder, tmp_path / "out")
    assert info.value.architecture == "FancyNetForCausalLM"
    _assert_nothing_written(tmp_path / "out")


def test_model_that_is_not_a_causal_lm(tmp_path: Path) -> None:
    import transformers as tf

    model = tf.BertModel(tf.BertConfig(vocab_size=32, hidden_size=32, num_hidden_layers=1,
                                       num_attention_heads=2, intermediate_size=32))
    with pytest.raises(UnsupportedArchitectureError, match="'BertModel'"):
        export_llm(model, tmp_path / "out")
    _assert_nothing_written(tmp_path / "out")


def test_truncated_shard(checkpoint: Path, tmp_path: Path) -> None:
    folder = _copy(checkpoint, tmp_path / "ck", "")
    shard = folder / "model.safetensors"
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    with pytest.raises(CheckpointFolderError, match=r"model\.safetensors.*lies outside.*save it again"):
        export_llm(folder, tmp_path / "out")
    _assert_nothing_written(tmp_path / "out")


@pytest.mark.parametrize(("option", "value", "named"), [
    ("dtype", "f8", "dtype"), ("compression", "q2", "compression"),
    ("num_logits_to_keep", -1, "num_logits_to_keep"), ("num_logits_to_keep", True, "num_logits_to_keep"),
    ("naming_scheme", "short", "nnef_variable_naming_scheme"),
])
def test_bad_options(option: str, value: object, named: str, checkpoint: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match=named):
        export_llm(checkpoint, tmp_path / "out", **{option: value})  # type: ignore[arg-type]
    _assert_nothing_written(tmp_path / "out")


def test_not_a_model(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="model_or_dir must be a transformers causal LM"):
        export_llm(42, tmp_path / "out")
    _assert_nothing_written(tmp_path / "out")


def test_existing_folder_kept(checkpoint: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    with pytest.raises(OverwriteRefusedError, match="overwrite=True"):
        export_llm(checkpoint, out)
    assert [p.name for p in out.iterdir()] == ["mine.txt"]


def _rewrite_shard(folder: Path, change: object) -> None:
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(folder / "model.safetensors"))
    change(tensors)  # type: ignore[operator]
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})


@pytest.mark.parametrize(("change", "said"), [
    (lambda t: t.pop("model.norm.weight"), r"missing from the shards: model\.norm\.weight"),
    (lambda t: t.update(extra_tensor=torch.zeros(3)), r"not in the model.*extra_tensor"),
    (lambda t: t.update({"model.norm.weight": torch.zeros(7)}), r"another shape.*model\.norm\.weight"),
], ids=["missing", "extra", "mis-shaped"])
def test_shards_disagreeing_with_config(change: object, said: str, checkpoint: Path, tmp_path: Path) -> None:
    folder = _copy(checkpoint, tmp_path / "ck", "")
    _rewrite_shard(folder, change)
    with pytest.raises(CheckpointFolderError, match=said):
        export_llm(folder, tmp_path / "out")
    _assert_nothing_written(tmp_path / "out")


def test_loading_keeps_device_blocks_working(checkpoint: Path, tmp_path: Path) -> None:
    """Loading a folder leaves ``with torch.device("meta")`` redirecting torch.linspace
    (meta models exported later in the same process depend on it)."""
    import subprocess
    import sys

    code = ("import sys, torch\nfrom t2n.llm import export_llm\n"
            "export_llm(sys.argv[1], sys.argv[2], verify=False)\n"
            "with torch.device('meta'):\n    print(torch.linspace(0, 1, 3).device)\n")
    done = subprocess.run([sys.executable, "-c", code, str(checkpoint), str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "meta"


def test_bf16_checkpoint_generates_as_f16(tmp_path: Path) -> None:
    """A bf16 checkpoint is exported in f16 (tract's form of bf16) and generates what
    the same weights in f16 generate in transformers."""
    folder = save_checkpoint(tiny_model("llama").to(torch.bfloat16), tmp_path / "ck", tokenizer=False)
    export_llm(folder, tmp_path / "out", tract_check_io_tolerance="very")
    assert json.loads((tmp_path / "out" / "modes.json").read_text())["cache"]["dtype"] == "float16"
    reference = tiny_model("llama").to(torch.bfloat16).to(torch.float16)
    prompt = torch.randint(1, 96, (1, 5), generator=torch.Generator().manual_seed(3))
    assert tract_greedy_generate(tmp_path / "out", prompt, 16) == reference_tokens(reference, prompt, 16)
