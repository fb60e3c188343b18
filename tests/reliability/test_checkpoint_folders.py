"""A checkpoint folder stays inside itself: an ``index.json`` (or a shard) that leads
out of the folder is refused with ``CorruptCheckpointError`` before anything is read
from there or written.

Cases tried (10): an index naming ``../outside.safetensors``, an absolute path, a name
that climbs out through a subfolder (``sub/../../x``), a shard that is a symbolic link
leaving the folder (with and without an index), a weight_map value that is not a
string; each through ``t2n.llm.export_llm`` and the ``t2n llm`` command, and a
folder given as ``weights_from=`` to ``t2n.export`` (a ``CorruptTensorFileError``);
controls: a Hugging Face cache snapshot (shards linked into the repository's
``blobs/``) and a shard link inside the folder are read as before.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch

import t2n
from t2n.errors import CorruptCheckpointError, CorruptTensorFileError
from t2n.llm import export_llm

INDEX = "model.safetensors.index.json"


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm.tiny_models import tiny_model

    folder = tmp_path_factory.mktemp("sharded") / "ck"
    tiny_model("llama").save_pretrained(str(folder), max_shard_size="20KB")
    assert len(list(folder.glob("*.safetensors"))) > 2
    return folder


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from llm.tiny_models import tiny_model

    folder = tmp_path_factory.mktemp("single") / "ck"
    tiny_model("llama").save_pretrained(str(folder))
    return folder


def _copy(src: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(src, tmp_path / "ck"))


def _move_out(folder: Path, how: str) -> str:
    """Move one shard out of the folder and point the index at it ``how``."""
    index = json.loads((folder / INDEX).read_text())
    shard = sorted(set(index["weight_map"].values()))[1]
    outside = folder.parent / "outside.safetensors"
    shutil.move(folder / shard, outside)
    name = {"parent": "../outside.safetensors", "absolute": str(outside),
            "climb": "sub/../../outside.safetensors"}[how]
    (folder / "sub").mkdir(exist_ok=True)
    index["weight_map"] = {k: (name if v == shard else v) for k, v in index["weight_map"].items()}
    (folder / INDEX).write_text(json.dumps(index))
    return name


def _refused(folder: Path, out: Path, *words: str) -> None:
    with pytest.raises(CorruptCheckpointError) as info:
        export_llm(folder, out)
    for w in words:
        assert w in str(info.value), (w, str(info.value))
    assert not out.exists()


@pytest.mark.parametrize("how", ["parent", "absolute", "climb"])
def test_an_index_naming_a_shard_outside_the_folder_is_refused(sharded, tmp_path, how):
    folder = _copy(sharded, tmp_path)
    name = _move_out(folder, how)
    _refused(folder, tmp_path / "out", INDEX, repr(name), "outside")


@pytest.mark.parametrize("indexed", [True, False])
def test_a_shard_linking_out_of_the_folder_is_refused(sharded, single, tmp_path, indexed):
    folder = _copy(sharded if indexed else single, tmp_path)
    shard = sorted(folder.glob("*.safetensors"))[0]
    outside = tmp_path / "elsewhere.safetensors"
    shutil.move(shard, outside)
    shard.symlink_to(outside)
    _refused(folder, tmp_path / "out", shard.name, "link", "outside")


def test_a_weight_map_value_that_is_not_a_name_is_refused(sharded, tmp_path):
    folder = _copy(sharded, tmp_path)
    index = json.loads((folder / INDEX).read_text())
    index["weight_map"][next(iter(index["weight_map"]))] = 3
    (folder / INDEX).write_text(json.dumps(index))
    _refused(folder, tmp_path / "out", INDEX, "3")


def test_the_llm_command_refuses_it(sharded, tmp_path):
    from cli.cli_support import make_runner

    folder = _copy(sharded, tmp_path)
    _move_out(folder, "parent")
    done = make_runner()("llm", "--local-dir", folder, "-e", tmp_path / "out")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "CorruptCheckpointError" in done.stderr and "outside" in done.stderr
    assert not (tmp_path / "out").exists()


def test_weights_from_a_folder_leading_outside_is_refused(sharded, tmp_path):
    from llm.tiny_models import tiny_model

    folder = _copy(sharded, tmp_path)
    _move_out(folder, "parent")
    model = tiny_model("llama")
    with pytest.raises(CorruptTensorFileError, match="outside"):
        t2n.export(model, (torch.tensor([[1, 2, 3]]),), tmp_path / "m.tar", weights_from=folder)
    assert not (tmp_path / "m.tar").exists()


def test_a_hugging_face_cache_snapshot_is_read(single, tmp_path):
    """``snapshots/<rev>/model.safetensors`` links to ``../../blobs/<hash>``: the cache's
    own layout, accepted."""
    repo = tmp_path / "models--tiny"
    snapshot = repo / "snapshots" / "0123abc"
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for f in single.iterdir():
        blob = repo / "blobs" / f"{f.name}.blob"
        shutil.copy(f, blob)
        (snapshot / f.name).symlink_to(os.path.relpath(blob, snapshot))
    path = export_llm(snapshot, tmp_path / "out", verify=False)
    assert path.is_file()


def test_a_link_inside_the_folder_is_read(single, tmp_path):
    folder = _copy(single, tmp_path)
    (folder / "store").mkdir()
    shutil.move(folder / "model.safetensors", folder / "store" / "weights.safetensors")
    (folder / "model.safetensors").symlink_to("store/weights.safetensors")
    assert export_llm(folder, tmp_path / "out", verify=False).is_file()
