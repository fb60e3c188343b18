"""t2n's own artifacts read back into the IR render to the same bytes: ``graph.nnef``,
``graph.quant`` and every tensor file, for convnets, recurrent scans, transformers,
quantized weights (``graph.quant``, Q4_0), dynamic axes with assertions and Khronos
exports; the read graph has the compiled graph's output types and runs in the engine
with PyTorch's outputs."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

import t2n
from t2n.ir import verify

from .corpus import CASES

SLOW = {"llama_dynamic"}


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW else c for c in CASES])
def test_read_then_save_gives_the_same_bytes(case: str, tmp_path: Path) -> None:
    art = CASES[case]()
    art.save(tmp_path / "a")
    model = t2n.read(tmp_path / "a", target=art.target)
    verify(model.graph)
    assert [str(v.type) for v in model.graph.outputs] == [str(v.type) for v in art.ir.outputs]
    assert model.input_names == art.input_names and model.output_names == art.output_names
    model.save(tmp_path / "b")
    before, after = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert after["graph.nnef"] == before["graph.nnef"]
    assert sorted(after) == sorted(before)
    assert [n for n in before if before[n] != after[n]] == []
    model.artifact(art.target).check(inputs=art.example_inputs, expected=art.reference_outputs)


def test_the_corpus_holds_what_it_is_meant_to(tmp_path: Path) -> None:
    """graph.quant, Q4_0 blocks, scans, assertions: the round trip above covers them, and
    the reader keeps them for what they are (quantization entries on their variables,
    Q4_0 tensors as blocks, scan bodies as fragments)."""
    from t2n.quant.q4_0 import Q40Blocks

    CASES["quantized_graph_quant"]().save(tmp_path / "q")
    assert "zero_point_linear_quantize" in (tmp_path / "q" / "graph.quant").read_text()
    quantized = [op for op in t2n.read(tmp_path / "q").graph.ops() if op.attrs.get("quant")]
    assert quantized and all(op.kind == "nnef_variable" for op in quantized)
    CASES["llama_q4_0"]().save(tmp_path / "l")
    items = [struct.unpack_from("<II", p.read_bytes()[:128], 44) for p in (tmp_path / "l").rglob("*.dat")]
    assert (0xFFFFFFFF, 0x54523040) in items
    assert any(isinstance(op.attrs.get("data"), Q40Blocks) for op in t2n.read(tmp_path / "l").graph.ops())
    lstm = CASES["lstm_scan"]()
    lstm.save(tmp_path / "s")
    assert "tract_core_scan" in lstm.graph_nnef
    scans = [op for op in t2n.read(tmp_path / "s").graph.ops() if "tract_core_scan" in op.attrs.get("expr", "")]
    assert len(scans) == 4  # two layers, two directions
    assert len(scans[0].outputs) == 3 and scans[0].attrs["fragments"][0].startswith("fragment t2n_lstm_body_0(")
    assert "tract_core_gru_seq" in CASES["gru_seq"]().graph_nnef
    assert "tract_assert S <= 512" in CASES["encoder_assertions"]().graph_nnef
    assert "tract_transformers_sdpa" in CASES["llama_sdpa"]().graph_nnef


@pytest.mark.parametrize("suffix", [".tar", ".tgz"])
def test_archives_read_and_save_the_same(suffix: str, tmp_path: Path) -> None:
    art = CASES["lstm_scan"]()
    art.save(tmp_path / "a")
    art.save(tmp_path / f"a{suffix}")
    model = t2n.read(tmp_path / f"a{suffix}")
    model.save(tmp_path / "b")
    assert _files(tmp_path / "b") == _files(tmp_path / "a")
    model.artifact().check(inputs=art.example_inputs, expected=art.reference_outputs)


def test_tensors_stay_on_disk_until_read(tmp_path: Path) -> None:
    art = CASES["convnet"]()
    art.save(tmp_path / "a.tar")
    model = t2n.read(tmp_path / "a.tar")
    data = next(op.attrs["data"] for op in model.graph.ops() if op.kind == "nnef_variable")
    assert data.region is not None and data.region.path == str(tmp_path / "a.tar")
    values = data.values()
    assert values.base is not None  # a view of the mapped archive, not a copy


def test_llm_with_a_stateful_kv_cache_reads_back_from_its_tgz(tmp_path: Path) -> None:
    """The LLM exporter's .tgz (tract_transformers_dyn_kv_cache, scenario assertions, a
    cache symbol that may be 0): same graph.nnef; the stateful statements stay."""
    import tarfile

    from llm.tiny_models import tiny_model

    from t2n.llm.entry import export_llm

    path = export_llm(tiny_model("llama"), tmp_path / "out", kv_cache="stateful", verify=False)
    model = t2n.read(path)
    assert any(op.kind == "nnef_stateful" for op in model.graph.ops())
    assert "pp: P == 0" in model.interface().assertions and "P >= 0" in model.interface().assertions
    with tarfile.open(path) as tar:
        member = tar.extractfile("graph.nnef")
        assert member is not None
        assert model.render().graph_nnef == member.read().decode()
