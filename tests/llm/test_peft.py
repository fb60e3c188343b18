"""LoRA and DoRA adapters: only an adapter's tensors exported (and read back by tract),
an adapter merged before export generating what transformers generates with the merged
model, and every bad adapter refused by name with nothing written or changed."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
from cli.cli_support import make_runner

from t2n.errors import (
    AdapterError,
    CorruptTensorFileError,
    InvalidArgumentError,
    OverwriteRefusedError,
)
from t2n.llm import export_llm, export_peft, tract_greedy_generate
from t2n.serialize.dat import read_dat

from .folders import save_checkpoint
from .tiny_models import reference_tokens, tiny_model

PROMPT = torch.tensor([[5, 6, 7, 8, 9]])


def _adapter(folder: Path, *, dora: bool, model: torch.nn.Module | None = None,
             targets: tuple[str, ...] = ("q_proj", "v_proj"), conv1d: bool = False) -> Path:
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(1)  # init_lora_weights=False: random factors, so the merge changes the model
    config = LoraConfig(r=4, lora_alpha=8, target_modules=list(targets), use_dora=dora, init_lora_weights=False,
                        fan_in_fan_out=conv1d)
    get_peft_model(model if model is not None else tiny_model("llama"), config).save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("peft")
    return {"base": save_checkpoint(tiny_model("llama"), root / "base", tokenizer=False),
            "lora": _adapter(root / "lora", dora=False), "dora": _adapter(root / "dora", dora=True)}


def _adapter_tensors(folder: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(folder / "adapter_model.safetensors"))


def _tract_reads(archive: Path, names: list[str], tmp: Path) -> list[np.ndarray]:
    """tract runs a graph whose outputs are the archive's tensors, as variables."""
    import tract

    from t2n.backends.tract.child import numpy_of

    folder = tmp / "graph"
    with tarfile.open(archive) as tar:
        tar.extractall(folder, filter="data")
    outs = [f"t{i}" for i in range(len(names))]
    body = "".join(f"    t{i} = variable<scalar>(label = '{name}', shape = "
                   f"[{', '.join(map(str, read_dat(folder / (name + '.dat')).shape))}]);\n"
                   for i, name in enumerate(names))
    (folder / "graph.nnef").write_text(f"version 1.0;\n\ngraph adapter( ) -> ( {', '.join(outs)} )\n{{\n{body}}}\n")
    runnable = tract.nnef().load(str(folder)).into_runnable()
    return [numpy_of(tract, np, o) for o in runnable.run([])]


@pytest.mark.parametrize("kind", ["lora", "dora"])
def test_export_peft_writes_only_the_adapter(kind: str, folders: dict[str, Path], tmp_path: Path) -> None:
    archive = tmp_path / "adapter.nnef.tgz"
    written = export_peft(folders[kind], archive)
    tensors = _adapter_tensors(folders[kind])
    assert set(written) == set(tensors)  # every LoRA factor (and DoRA magnitude), nothing else
    assert any("lora_magnitude_vector" in n for n in written) == (kind == "dora")
    with tarfile.open(archive) as tar:
        members = set(tar.getnames())
    assert members == {f"{n}.dat" for n in tensors} | {"adapter_config.json"}
    names = sorted(written)
    for name, got in zip(names, _tract_reads(archive, names, tmp_path)):
        np.testing.assert_array_equal(got, tensors[name])


def test_patterns_select_tensors(folders: dict[str, Path], tmp_path: Path) -> None:
    written = export_peft(folders["dora"] / "adapter_model.safetensors", tmp_path / "a.nnef.tgz",
                          patterns=[r"layers\.0\..*lora_A", r"magnitude"])
    assert sorted(written) == sorted(n for n in _adapter_tensors(folders["dora"])
                                     if ("layers.0." in n and "lora_A" in n) or "magnitude" in n)


def test_cli_peft(folders: dict[str, Path], tmp_path: Path) -> None:
    done = make_runner()("peft", folders["lora"], tmp_path / "a.nnef.tgz", "-p", r"\.lora_B\.")
    assert done.returncode == 0, done.stderr
    assert "wrote 4 adapter tensors" in done.stdout


def test_cli_peft_matching_nothing(folders: dict[str, Path], tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    from t2n.cli.main import main

    assert main(["peft", str(folders["lora"]), str(tmp_path / "b.nnef.tgz"), "-p", "nothing_like_this"]) == 1
    err = capsys.readouterr().err
    assert "InvalidArgumentError" in err and "nothing_like_this" in err
    assert not (tmp_path / "b.nnef.tgz").exists()


@pytest.mark.parametrize("kind", ["lora", "dora"])
def test_merge_peft_generates_like_the_merged_model(kind: str, folders: dict[str, Path], tmp_path: Path) -> None:
    from peft import PeftModel

    export_llm(folders["base"], tmp_path / "out", merge_peft=folders[kind])
    merged = PeftModel.from_pretrained(tiny_model("llama"), str(folders[kind])).merge_and_unload()
    expected = reference_tokens(merged, PROMPT, 16)
    assert expected != reference_tokens(tiny_model("llama"), PROMPT, 16)  # the adapter matters
    assert tract_greedy_generate(tmp_path / "out", PROMPT, 16) == expected


# -- bad inputs -------------------------------------------------------------------------


def _without(src: Path, dst: Path, name: str) -> Path:
    shutil.copytree(src, dst)
    (dst / name).unlink()
    return dst


def test_export_peft_folder_without_config(folders: dict[str, Path], tmp_path: Path) -> None:
    src = _without(folders["lora"], tmp_path / "ad", "adapter_config.json")
    with pytest.raises(AdapterError, match=r"has no adapter_config\.json.*save_pretrained") as info:
        export_peft(src, tmp_path / "a.nnef.tgz")
    assert str(src) in str(info.value)
    assert not (tmp_path / "a.nnef.tgz").exists()


def test_export_peft_missing_source(tmp_path: Path) -> None:
    with pytest.raises(AdapterError, match="does not exist"):
        export_peft(tmp_path / "nowhere", tmp_path / "a.nnef.tgz")
    assert not (tmp_path / "a.nnef.tgz").exists()


def test_export_peft_patterns_matching_nothing(folders: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match=r"\['zz_none'\] match none of the 8 tensors.*nothing was written"):
        export_peft(folders["lora"], tmp_path / "a.nnef.tgz", patterns=["zz_none"])
    assert not (tmp_path / "a.nnef.tgz").exists()


@pytest.mark.parametrize("patterns", [["(unclosed"], [], [3]])
def test_export_peft_bad_patterns(patterns: list[object], folders: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="pattern"):
        export_peft(folders["lora"], tmp_path / "a.nnef.tgz", patterns=patterns)  # type: ignore[arg-type]
    assert not (tmp_path / "a.nnef.tgz").exists()


def test_export_peft_truncated_adapter(folders: dict[str, Path], tmp_path: Path) -> None:
    src = tmp_path / "ad"
    shutil.copytree(folders["lora"], src)
    data = (src / "adapter_model.safetensors").read_bytes()
    (src / "adapter_model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptTensorFileError, match=r"adapter_model\.safetensors.*lora_B"):
        export_peft(src, tmp_path / "a.nnef.tgz")
    assert not (tmp_path / "a.nnef.tgz").exists()


def test_export_peft_keeps_a_users_file(folders: dict[str, Path], tmp_path: Path) -> None:
    dest = tmp_path / "notes.tgz"
    dest.write_bytes(b"mine")
    with pytest.raises(OverwriteRefusedError):
        export_peft(folders["lora"], dest)
    assert dest.read_bytes() == b"mine"


def test_merge_folder_without_config(folders: dict[str, Path], tmp_path: Path) -> None:
    adapter = _without(folders["lora"], tmp_path / "ad", "adapter_config.json")
    with pytest.raises(AdapterError, match=r"adapter_config\.json") as info:
        export_llm(folders["base"], tmp_path / "out", merge_peft=adapter)
    assert str(adapter) in str(info.value)
    assert not (tmp_path / "out").exists()


def test_merge_folder_without_weights(folders: dict[str, Path], tmp_path: Path) -> None:
    adapter = _without(folders["lora"], tmp_path / "ad", "adapter_model.safetensors")
    with pytest.raises(AdapterError, match=r"no adapter_model\.safetensors"):
        export_llm(folders["base"], tmp_path / "out", merge_peft=adapter)
    assert not (tmp_path / "out").exists()


def test_merge_adapter_of_another_base(tmp_path: Path) -> None:
    """An adapter trained on a wider model is refused by tensor, and a model object
    given is left as it was (no adapter layers injected, same weights)."""
    import transformers as tf

    wide = tf.LlamaForCausalLM(tf.LlamaConfig(hidden_size=96, intermediate_size=128, num_attention_heads=4,
                                              num_key_value_heads=2, vocab_size=96, num_hidden_layers=2))
    adapter = _adapter(tmp_path / "wide", dora=False, model=wide)
    model = tiny_model("llama")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(AdapterError, match=r"q_proj\.lora_A\.weight is \[4, 96\] but .*needs \[4, 64\]"):
        export_llm(model, tmp_path / "out", merge_peft=adapter)
    assert not (tmp_path / "out").exists()
    assert model.state_dict().keys() == before.keys()
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_merge_adapter_for_missing_modules(folders: dict[str, Path], tmp_path: Path) -> None:
    adapter = _adapter(tmp_path / "gpt2", dora=False, model=tiny_model("gpt2"), targets=("c_attn",),
                       conv1d=True)
    with pytest.raises(AdapterError, match=r"c_attn.*does not have"):
        export_llm(folders["base"], tmp_path / "out", merge_peft=adapter)
    assert not (tmp_path / "out").exists()


def test_merge_other_adapter_kind(folders: dict[str, Path], tmp_path: Path) -> None:
    adapter = tmp_path / "ia3"
    shutil.copytree(folders["lora"], adapter)
    config = json.loads((adapter / "adapter_config.json").read_text())
    (adapter / "adapter_config.json").write_text(json.dumps({**config, "peft_type": "IA3"}))
    with pytest.raises(AdapterError, match="IA3 adapter; merge_peft merges LoRA and DoRA"):
        export_llm(folders["base"], tmp_path / "out", merge_peft=adapter)
    assert not (tmp_path / "out").exists()
