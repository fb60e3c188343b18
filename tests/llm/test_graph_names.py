"""Every LLM artifact's graph declares the inputs and outputs its modes.json lists, in that
order: a runtime that binds tensors by name (not by position) feeds the right ones, for
text and multimodal decoders, explicit and stateful caches."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

import pytest

from t2n.llm import export_llm

from .tiny_hybrid import tiny_hybrid
from .tiny_models import tiny_model
from .tiny_multimodal import CASES

pytestmark = pytest.mark.slow  # 35 exports of 1-3 s each: CI's second step and the newest-release step


def _declared(path: Path) -> tuple[list[str], list[str]]:
    with tarfile.open(path) as tar:
        graph = tar.extractfile("graph.nnef").read().decode()  # type: ignore[union-attr]
    found = re.search(r"^graph \w+\s*\(([^)]*)\)\s*->\s*\(([^)]*)\)", graph, re.MULTILINE)
    assert found, "no graph line"
    return [n.strip() for n in found[1].split(",")], [n.strip() for n in found[2].split(",")]


def _agrees(folder: Path) -> None:
    modes = json.loads((folder / "modes.json").read_text())
    assert _declared(folder / "model" / "model.nnef.tgz") == (modes["inputs"], modes["outputs"])


@pytest.mark.parametrize("kv_cache", ["explicit", "stateful"])
@pytest.mark.parametrize("family", ["gemma3", "idefics3", "smolvlm", "mistral3", "qwen2_5_vl", "qwen3_vl", "voxtral", "llava",
                                    "paligemma", "paligemma2", "llava_next", "llava_onevision",
                                    "aya_vision", "qwen2_vl"])
def test_multimodal_decoder_declares_its_modes(family: str, kv_cache: str, tmp_path: Path) -> None:
    export_llm(CASES[family]().model, tmp_path / "out", kv_cache=kv_cache, verify=False)
    _agrees(tmp_path / "out" / "decoder")
    manifest = json.loads((tmp_path / "out" / "multimodal.json").read_text())
    modes = json.loads((tmp_path / "out" / "decoder" / "modes.json").read_text())
    for encoder in manifest["encoders"]:  # the encoder's interface in its graph's order, each output's use
        graph = encoder["graph"]
        assert _declared(tmp_path / "out" / encoder["path"]) == ([i["name"] for i in graph["inputs"]],
                                                                 [o["name"] for o in graph["outputs"]])
        assert all(o["feeds"] in modes["inputs"] for o in graph["outputs"])
        assert all(i["dtype"] and i["shape"] for i in graph["inputs"])


@pytest.mark.parametrize("kv_cache", ["explicit", "stateful", "stateful_int8"])
def test_text_decoder_declares_its_modes(kv_cache: str, tmp_path: Path) -> None:
    export_llm(tiny_model("qwen2"), tmp_path / "out", kv_cache=kv_cache, verify=False)
    _agrees(tmp_path / "out")


def test_windowed_and_hybrid_decoders_declare_their_modes(tmp_path: Path) -> None:
    export_llm(tiny_model("gemma2"), tmp_path / "window", kv_cache="stateful", window_kv_cache=True, verify=False)
    _agrees(tmp_path / "window")
    export_llm(tiny_hybrid("jamba"), tmp_path / "hybrid", verify=False)
    _agrees(tmp_path / "hybrid")


@pytest.mark.parametrize("family", ["gemma3", "qwen3_vl", "mistral3", "voxtral", "paligemma", "llava_next"])
def test_manifest_follows_its_published_schema(family: str, tmp_path: Path) -> None:
    """docs/multimodal.schema.json describes what the export writes."""
    import jsonschema

    schema = json.loads((Path(__file__).resolve().parents[2] / "docs" / "multimodal.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    export_llm(CASES[family]().model, tmp_path / "out", verify=False)
    jsonschema.validate(json.loads((tmp_path / "out" / "multimodal.json").read_text()), schema)
