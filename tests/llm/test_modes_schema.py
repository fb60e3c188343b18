"""docs/modes.schema.json describes every ``modes.json`` the exports write: a text decoder
in both cache forms, a hybrid (recurrent states) and multimodal decoders with a rotary
shift (Qwen2.5-VL) and a prefix (PaliGemma), each validated with ``jsonschema``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from t2n.llm import export_llm

from .tiny_hybrid import tiny_hybrid
from .tiny_models import tiny_model
from .tiny_multimodal import CASES

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _validate(modes_path: Path) -> dict[str, Any]:
    schema = json.loads((DOCS / "modes.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    modes: dict[str, Any] = json.loads(modes_path.read_text())
    jsonschema.validate(modes, schema, cls=jsonschema.Draft202012Validator)
    return modes


def test_the_schema_refuses_a_broken_modes_json() -> None:
    schema = json.loads((DOCS / "modes.schema.json").read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"format": "t2n-llm/1"}, schema)


@pytest.mark.slow
@pytest.mark.parametrize("kv_cache", ["explicit", "stateful"])
def test_text_modes_json_is_valid(kv_cache: str, tmp_path: Path) -> None:
    export_llm(tiny_model("llama"), tmp_path, kv_cache=kv_cache, verify=False)
    assert _validate(tmp_path / "modes.json")["cache"]["form"] == kv_cache


@pytest.mark.slow
def test_hybrid_modes_json_is_valid(tmp_path: Path) -> None:
    export_llm(tiny_hybrid("mamba"), tmp_path, verify=False)
    assert "recurrent_states" in _validate(tmp_path / "modes.json")["cache"]


@pytest.mark.slow
@pytest.mark.parametrize(("family", "kv_cache", "key"), [("qwen2_5_vl", "explicit", "rope_delta"),
                                                         ("paligemma", "stateful", "prefix")])
def test_multimodal_modes_json_is_valid(family: str, kv_cache: str, key: str, tmp_path: Path) -> None:
    export_llm(CASES[family]().model, tmp_path, kv_cache=kv_cache, verify=False)
    manifest = json.loads((tmp_path / "multimodal.json").read_text())
    assert key in _validate(tmp_path / manifest["decoder"]["modes"])
