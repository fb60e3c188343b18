"""examples/multimodal_llm.py runs: a tiny Gemma 3 exported from its checkpoint folder
generates in tract, from an image and a prompt, transformers' tokens."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "multimodal_llm.py"


@pytest.mark.slow
def test_example_runs(tmp_path: Path) -> None:
    main = runpy.run_path(str(EXAMPLE))["main"]
    tokens = main(str(tmp_path / "out"))
    assert len(tokens) == 8
    manifest = json.loads((tmp_path / "out" / "multimodal.json").read_text())
    assert [e["modality"] for e in manifest["encoders"]] == ["image"]
    assert (tmp_path / "out" / "image" / "model.nnef.tgz").is_file()
    assert (tmp_path / "out" / "decoder" / "modes.json").is_file()
