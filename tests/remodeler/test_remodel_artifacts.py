"""Remodelling artifacts t2n wrote earlier, read back from disk: a Llama with Q4_0 weights
(the blocks copied as they are) and an LLM with an explicit KV cache, each run in tract
beside the original on the same data."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from reader.corpus import CASES

import t2n
from t2n.remodel.check import compare_runs


def _q4_0_count(folder: Path) -> int:
    return sum(struct.unpack_from("<II", p.read_bytes()[:128], 44) == (0xFFFFFFFF, 0x54523040)
               for p in folder.rglob("*.dat"))


def test_a_q4_0_llama_remodelled(tmp_path: Path) -> None:
    CASES["llama_q4_0"]().save(tmp_path / "a")
    model = t2n.read(tmp_path / "a").remodel({
        "inputs": {"input_0": {"original_shape": [1, "S"], "collapse_dims": [0]}},
        "outputs": {"output_0": {"collapse_dims": [0]}},
        "renamed_symbols": {"tokens": ["S"]}}, verify=True)
    assert [str(i) for i in model.interface().inputs] == ["input_0: i64[tokens]"]
    assert [str(o) for o in model.interface().outputs] == ["output_0: f32[tokens, 96]"]
    model.save(tmp_path / "b")
    assert _q4_0_count(tmp_path / "b") == _q4_0_count(tmp_path / "a") > 0
    original = t2n.read(tmp_path / "a")
    for tokens in (1, 4):
        report = compare_runs(model.history[-1].io_map(), original.run, t2n.read(tmp_path / "b").run,
                              {"tokens": tokens})
        assert report.ok, str(report)


@pytest.mark.slow
def test_an_llm_with_an_explicit_cache_keeps_its_cache_symbol(tmp_path: Path) -> None:
    from llm.tiny_models import tiny_model

    from t2n.llm.entry import export_llm

    path = export_llm(tiny_model("llama"), tmp_path / "out", kv_cache="explicit", verify=False,
                      num_logits_to_keep=0)  # every position: the logits follow the token symbol
    original = t2n.read(path)
    model = t2n.read(path).remodel({"renamed_symbols": {"tokens": ["S"], "past": ["P"]},
                                    "outputs_keep": ["outputs"]}, verify=True)
    iface = model.interface()
    assert [str(o) for o in iface.outputs] == ["outputs: f32[1, tokens, 96]"]
    assert "past >= 0" in iface.assertions and "tg: tokens == 1" in iface.assertions
    for sizes in ({"tokens": 3, "past": 0}, {"tokens": 1, "past": 2}):
        report = compare_runs(model.history[-1].io_map(), original.run, model.run, sizes)
        assert report.ok, str(report)
