"""A runtime written from the published manifests alone (docs/multimodal.schema.json,
``modes.json``): this driver imports json, numpy and tract — nothing of t2n — and reads
every name, order, start value and feedback from ``multimodal.json`` and the decoder's
``modes.json``. It generates, image in the prompt, the tokens ``transformers`` does, for
families with each kind of extra decoder input (token types, 3-D rotary shift and
positions, DeepStack streams), a prefix attending both ways on the first call (PaliGemma 2)
and an encoder of tiles fixed to one image size (LLaVA-NeXT), in both cache forms."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from t2n.llm import export_llm

from .tiny_multimodal import CASES

pytestmark = pytest.mark.slow  # tiny models exported and run in tract: CI's second step

NEW_TOKENS = 6


def _runnable(path: Path):
    import tract

    return tract.nnef().with_tract_transformers().with_tract_extra().load(str(path)).into_runnable()


def _array(spec: dict) -> np.ndarray:
    return np.full(spec["shape"], spec["fill"], dtype=spec["dtype"])


def drive(folder: Path, prompt: np.ndarray, pixels: list[np.ndarray], count: int) -> list[int]:
    """Greedy generation from the manifests: the encoder's outputs go to the decoder inputs
    they feed (first call only); state inputs start as stated and take the output that
    feeds them; a stateful decoder runs in one tract state."""
    manifest = json.loads((folder / "multimodal.json").read_text())
    modes = json.loads((folder / manifest["decoder"]["modes"]).read_text())
    (encoder,) = manifest["encoders"]
    outputs = _runnable(folder / encoder["path"]).run(pixels)
    rows = {o["feeds"]: np.asarray(v.to_numpy()) for o, v in zip(encoder["graph"]["outputs"], outputs)}
    without = {c["input"]: _array(c["without"]) for c in modes["call_inputs"]}
    state = {s["input"]: _array(s["start"]) for s in modes["state_inputs"]}
    decoder = _runnable(folder / manifest["decoder"]["path"])
    run = decoder.spawn_state().run if modes["cache"]["form"] == "stateful" else decoder.run
    ids, tokens = prompt, []
    for _ in range(count):
        given = {"input_ids": ids, **state, **without, **rows}
        values = dict(zip(modes["outputs"], run([given[name] for name in modes["inputs"]])))
        tokens.append(int(np.asarray(values[modes["outputs"][0]].to_numpy())[0, -1].argmax()))
        state = {s["input"]: np.asarray(values[s["fed_by"]].to_numpy()) for s in modes["state_inputs"]}
        ids, rows = np.array([[tokens[-1]]], dtype=np.int64), {}
    return tokens


@pytest.mark.parametrize("kv_cache", ["explicit", "stateful"])
@pytest.mark.parametrize("family", ["gemma3", "qwen2_5_vl", "qwen3_vl", "llava", "paligemma2", "llava_next"])
def test_a_driver_written_from_the_manifests_generates_transformers_tokens(family: str, kv_cache: str,
                                                                           tmp_path: Path) -> None:
    case = CASES[family]()
    export_llm(case.model, tmp_path / "out", kv_cache=kv_cache)
    got = drive(tmp_path / "out", case.image_prompt.numpy(), [p.numpy() for p in case.pixels], NEW_TOKENS)
    assert got == case.reference_tokens(case.image_prompt, NEW_TOKENS, with_image=True)
