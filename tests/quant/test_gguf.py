"""GGUF Q4_0 tensors written to tract's Q4_0 .dat byte for byte (no re-quantizing): a
small GGUF made with gguf's own writer, exported, compared block by block, and run in
tract under a linear layer's matmul. ``gguf`` is a dev dependency (``t2n[gguf]``):
without it these tests fail rather than skip."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import t2n
from t2n.errors import InvalidArgumentError
from t2n.quant import q4_0


def _gguf():  # type: ignore[no-untyped-def]
    import gguf  # a dev dependency: missing, the test fails (pip install 't2n[gguf]')

    return gguf


def _write(gguf, path: Path, tensors: dict[str, tuple[np.ndarray, object]]) -> None:  # type: ignore[no-untyped-def]
    w = gguf.GGUFWriter(str(path), "llama")
    for name, (values, kind) in tensors.items():
        if kind not in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
            w.add_tensor(name, gguf.quants.quantize(values, kind), raw_dtype=kind)
        else:
            w.add_tensor(name, values)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_gguf_q4_0_is_written_byte_for_byte_and_runs_in_tract(tmp_path: Path) -> None:
    gguf = _gguf()
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((8, 64)).astype(np.float32)
    norm = rng.standard_normal(64).astype(np.float32)
    _write(gguf, tmp_path / "m.gguf", {"blk.0.ffn_up.weight": (weight, gguf.GGMLQuantizationType.Q4_0),
                                        "blk.0.attn_norm.weight": (norm, gguf.GGMLQuantizationType.F32)})
    tensors = t2n.gguf_tensors(tmp_path / "m.gguf")
    assert tensors["blk.0.ffn_up.weight"].shape == (8, 64)
    written = t2n.export_tensors_to_nnef(tensors, tmp_path / "out")
    blocks, shape = q4_0.read_blocks(written["blk.0.ffn_up.weight"].path)
    source = gguf.quants.quantize(weight, gguf.GGMLQuantizationType.Q4_0)
    assert shape == (8, 64) and blocks.tobytes() == source.tobytes()  # the same bytes
    assert np.array_equal(written["blk.0.attn_norm.weight"].read(), norm)
    deq = gguf.quants.dequantize(source, gguf.GGMLQuantizationType.Q4_0)
    assert np.array_equal(written["blk.0.ffn_up.weight"].read(), deq)

    # the written block file is what tract reads under a linear layer's matmul
    from t2n.check.engines import run_tract

    art = tmp_path / "graph"
    art.mkdir()
    os.replace(written["blk.0.ffn_up.weight"].path, art / "w.dat")
    (art / "graph.nnef").write_text(
        "version 1.0;\ngraph g(x) -> (y) {\n  x = external<scalar>(shape = [3, 64]);\n"
        "  w = variable<scalar>(shape = [8, 64], label = \"w\");\n"
        "  y = matmul(x, w, transposeA = false, transposeB = true);\n}\n")
    x = rng.standard_normal((3, 64)).astype(np.float32)
    y = run_tract(str(art), [x]).outputs[0]
    np.testing.assert_allclose(y, x @ deq.T, atol=1e-5)


def test_gguf_types_tract_cannot_hold_are_refused_by_name(tmp_path: Path) -> None:
    gguf = _gguf()
    values = np.random.default_rng(1).standard_normal((4, 64)).astype(np.float32)
    _write(gguf, tmp_path / "m.gguf", {"blk.0.ffn_down.weight": (values, gguf.GGMLQuantizationType.Q8_0)})
    with pytest.raises(InvalidArgumentError, match=r"'blk\.0\.ffn_down\.weight' is Q8_0"):
        t2n.gguf_tensors(tmp_path / "m.gguf")
