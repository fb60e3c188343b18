"""Checkpoint folders that cannot be exported as they are: each is refused with a typed
error naming the file or tensor and saying what to do, before anything is written
(``export_dirpath`` stays absent, or as it was)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from t2n.errors import (
    CheckpointFolderError,
    CorruptCheckpointError,
    CorruptTensorFileError,
    UnsupportedArchitectureError,
)
from t2n.llm import export_llm

from .folders import save_checkpoint
from .tiny_models import tiny_model

SHARD = "model.safetensors"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_checkpoint(tiny_model("llama"), tmp_path_factory.mktemp("llama"), tokenizer=False)


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sharded")
    tiny_model("llama").save_pretrained(str(folder), max_shard_size="20KB")
    assert len(list(folder.glob("*.safetensors"))) > 2
    return folder


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _edit_tensors(folder: Path, edit: Callable[[dict[str, torch.Tensor]], None]) -> None:
    tensors = load_file(str(folder / SHARD))
    edit(tensors)
    save_file(tensors, str(folder / SHARD), metadata={"format": "pt"})


def _refused(folder: Path, out: Path, error: type[Exception], *named: str) -> str:
    with pytest.raises(error) as info:
        export_llm(folder, out, overwrite=True)
    message = str(info.value)
    for text in named:
        assert text in message, (text, message)
    return message


@pytest.fixture(params=["absent", "empty", "kept"])
def out(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """``export_dirpath`` absent, an empty folder, or a folder of the user's (overwrite=True
    would replace it, but not when the checkpoint is refused)."""
    path = tmp_path / "out"
    if request.param != "absent":
        path.mkdir()
    if request.param == "kept":
        (path / "mine.txt").write_text("keep me")
    return path


def _as_it_was(out: Path) -> None:
    if out.exists():
        assert sorted(p.name for p in out.iterdir()) in ([], ["mine.txt"])
        if (out / "mine.txt").exists():
            assert (out / "mine.txt").read_text() == "keep me"


def test_no_config(checkpoint: Path, tmp_path: Path, out: Path) -> None:
    folder = _copy(checkpoint, tmp_path / "ck")
    (folder / "config.json").unlink()
    _refused(folder, out, CheckpointFolderError, str(folder), "config.json", "save_pretrained")
    _as_it_was(out)


def test_no_weights(checkpoint: Path, tmp_path: Path, out: Path) -> None:
    folder = _copy(checkpoint, tmp_path / "ck")
    (folder / SHARD).unlink()
    _refused(folder, out, CheckpointFolderError, str(folder), "no *.safetensors", "save_pretrained")
    _as_it_was(out)


def test_architecture_not_exportable(checkpoint: Path, tmp_path: Path, out: Path) -> None:
    folder = _copy(checkpoint, tmp_path / "ck")
    config = json.loads((folder / "config.json").read_text())
    config["architectures"] = ["LlamaForTokenClassification"]
    (folder / "config.json").write_text(json.dumps(config))
    message = _refused(folder, out, UnsupportedArchitectureError, "'LlamaForTokenClassification'",
                       "Llama, Qwen2, Qwen3, Mistral, Phi3", "t2n.export")
    assert "GPT-NeoX" in message
    _as_it_was(out)


def test_missing_tensor(checkpoint: Path, tmp_path: Path, out: Path) -> None:
    folder = _copy(checkpoint, tmp_path / "ck")
    _edit_tensors(folder, lambda t: t.pop("model.layers.1.mlp.up_proj.weight"))
    _refused(folder, out, CheckpointFolderError, str(folder), "1 tensor(s) missing from the shards: "
             "model.layers.1.mlp.up_proj.weight", "save_pretrained")
    _as_it_was(out)


def test_extra_tensor(checkpoint: Path, tmp_path: Path, out: Path) -> None:
    folder = _copy(checkpoint, tmp_path / "ck")
    _edit_tensors(folder, lambda t: t.update({"model.layers.0.mlp.extra.weight": torch.zeros(4)}))
    _refused(folder, out, CheckpointFolderError, "1 tensor(s) in the shards but not in the model",
             "model.layers.0.mlp.extra.weight")
    _as_it_was(out)


def test_misshaped_tensor(checkpoint: Path, tmp_path: Path, out: Path) -> None:
    folder = _copy(checkpoint, tmp_path / "ck")
    _edit_tensors(folder, lambda t: t.update({"model.layers.0.mlp.down_proj.weight": torch.zeros(64, 100)}))
    _refused(folder, out, CheckpointFolderError, "model.layers.0.mlp.down_proj.weight: expected shape "
             "[64, 128] (from config.json), found [64, 100]")
    _as_it_was(out)


def test_config_with_more_layers_than_the_shards(checkpoint: Path, tmp_path: Path, out: Path) -> None:
    folder = _copy(checkpoint, tmp_path / "ck")
    config = json.loads((folder / "config.json").read_text())
    config["num_hidden_layers"] = 3
    (folder / "config.json").write_text(json.dumps(config))
    _refused(folder, out, CheckpointFolderError, "9 tensor(s) missing", "model.layers.2.", "and 4 more")
    _as_it_was(out)


def test_truncated_shard(checkpoint: Path, tmp_path: Path, out: Path) -> None:
    folder = _copy(checkpoint, tmp_path / "ck")
    shard = folder / SHARD
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size - 1000])
    message = _refused(folder, out, CorruptCheckpointError, str(shard), "lies outside", "save it again")
    assert "'model." in message  # the tensor cut off
    _as_it_was(out)


def test_corrupt_header(checkpoint: Path, tmp_path: Path, out: Path) -> None:
    folder = _copy(checkpoint, tmp_path / "ck")
    shard = folder / SHARD
    data = bytearray(shard.read_bytes())
    data[8:20] = b"#" * 12
    shard.write_bytes(bytes(data))
    with pytest.raises(CorruptTensorFileError, match="header is not JSON") as info:
        export_llm(folder, out, overwrite=True)
    assert isinstance(info.value, CheckpointFolderError) and str(shard) in str(info.value)
    _as_it_was(out)


def test_header_longer_than_the_file(checkpoint: Path, tmp_path: Path, out: Path) -> None:
    folder = _copy(checkpoint, tmp_path / "ck")
    (folder / SHARD).write_bytes((10**9).to_bytes(8, "little") + b"{}")
    _refused(folder, out, CorruptCheckpointError, str(folder / SHARD), "does not fit")
    _as_it_was(out)


def test_index_naming_a_missing_shard(sharded: Path, tmp_path: Path, out: Path) -> None:
    folder = _copy(sharded, tmp_path / "ck")
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    lost = sorted(set(index["weight_map"].values()))[1]
    (folder / lost).unlink()
    _refused(folder, out, CorruptCheckpointError, "model.safetensors.index.json", lost, "save it again")
    _as_it_was(out)


def test_sharded_checkpoint_exports(sharded: Path, tmp_path: Path) -> None:
    export_llm(sharded, tmp_path / "out")  # verified against the loaded model
    assert (tmp_path / "out" / "tests" / "decode.npz").is_file()
