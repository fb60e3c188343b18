"""Encoder-decoder checkpoint folders streamed as causal LMs' are: the model is built on
the meta device and every weight goes from the shards into the encoder and the decoder
(never loaded whole, even to check, when it does not fit in memory); and Q4_0 weights,
from a model object or computed from the shards as they stream. What tract generates
from those artifacts is what transformers' own ``generate`` gives."""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import t2n.llm.common.streaming as streaming
from t2n.llm.common.options import LLMExportOptions
from t2n.llm.seq2seq import export_seq2seq, generate
from t2n.quant.q4_0 import is_q4_0_header
from t2n.serialize.dat import read_dat

from .tiny_seq2seq import WHISPER_TOKENS, source, tiny_seq2seq

pytestmark = pytest.mark.slow

NEW_TOKENS = 10


def never_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checkpoint counts as bigger than memory, and loading any model fails the test."""
    import transformers

    def refuse(cls: Any, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"{cls.__name__}.from_pretrained loaded the checkpoint whole")

    monkeypatch.setattr(streaming, "REFERENCE_MEMORY_FRACTION", 0.0)
    monkeypatch.setattr(transformers.PreTrainedModel, "from_pretrained", classmethod(refuse))


def tokens_of(model: Any, family: str, inputs: dict[str, torch.Tensor]) -> list[int]:
    """``model.generate``'s ids after the start token (Whisper: its forced tokens too)."""
    settings = {"language": "fr", "task": "transcribe"} if family == "whisper" else {}
    with torch.no_grad():
        out = model.generate(**inputs, **settings, do_sample=False, max_new_tokens=NEW_TOKENS)
    ids = [int(t) for t in out[0]]
    return ids if family == "whisper" else ids[1:]


def tract_tokens(out: Path, family: str, inputs: dict[str, torch.Tensor]) -> list[int]:
    if family != "whisper":
        return generate(out, {k: v.numpy() for k, v in inputs.items()}, NEW_TOKENS)
    t = WHISPER_TOKENS
    start = [t["start"], t["languages"]["<|fr|>"], t["tasks"]["transcribe"], t["no_timestamps"]]
    got = generate(out, {**inputs, "decoder_input_ids": torch.tensor([start])}, NEW_TOKENS)
    return got[:-1] if got and got[-1] == t["eos"] else got


def dat_tensors(archive: Path) -> dict[str, np.ndarray]:
    with tarfile.open(archive) as tgz:
        return {m.name.removesuffix(".dat"): read_dat(tgz.extractfile(m).read())  # type: ignore[union-attr]
                for m in tgz.getmembers() if m.name.endswith(".dat")}


@pytest.mark.parametrize("family", ["whisper", "marian", "t5"])
def test_a_folder_streams_into_both_artifacts(family: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not loaded (too big to check: a warning), the folder's artifacts hold its tensors'
    bytes and generate transformers' tokens, Whisper's forced tokens read from the
    folder's generation config."""
    import transformers as tf

    original = tiny_seq2seq(family)
    original.save_pretrained(tmp_path / "ckpt")
    with monkeypatch.context() as patched:
        never_loaded(patched)
        export_seq2seq(str(tmp_path / "ckpt"), tmp_path / "out")
    loaded = tf.AutoConfig.from_pretrained(tmp_path / "ckpt")
    model = getattr(tf, loaded.architectures[0]).from_pretrained(tmp_path / "ckpt").eval()
    model.generation_config = original.generation_config  # Whisper's language table is not saved
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    for part in ("encoder", "decoder"):
        written = {k.removeprefix("model."): v for k, v in dat_tensors(tmp_path / "out" / part / "model.nnef.tgz").items()}
        same = [k for k in written if k in state]
        assert len(same) >= 5, sorted(written)
        for name in same:
            assert written[name].tobytes() == state[name].tobytes(), name
    inputs = source(family)
    assert tract_tokens(tmp_path / "out", family, inputs) == tokens_of(model, family, inputs)


@pytest.mark.parametrize("family", ["bart", "whisper"])
def test_q4_0_generates_the_tokens_of_the_quantized_model(family: str, tmp_path: Path) -> None:
    """``compression="min_max_q4_0"``: the linear weights written as Q4_0 blocks; the
    artifacts generate what transformers generates with the same weights after
    ``t2n.quantize`` (checked by the export too); a streamed folder writes the same bytes."""
    import copy

    import t2n

    model = tiny_seq2seq(family, scale=0.3)
    model.save_pretrained(tmp_path / "ckpt")
    export_seq2seq(copy.deepcopy(model), tmp_path / "out", LLMExportOptions(compression="min_max_q4_0"))
    export_seq2seq(str(tmp_path / "ckpt"), tmp_path / "streamed", LLMExportOptions(compression="min_max_q4_0"))
    quantized = t2n.quantize(copy.deepcopy(model), "min_max_q4_0")
    inputs = source(family)
    expected = tokens_of(quantized, family, inputs)
    assert tract_tokens(tmp_path / "out", family, inputs) == expected
    assert tract_tokens(tmp_path / "streamed", family, inputs) == expected
    for part in ("encoder", "decoder"):
        archive = tmp_path / "out" / part / "model.nnef.tgz"
        q4_0 = {n for n, b in dat_bytes(archive).items() if is_q4_0_header(b[:128])}
        assert any("fc1" in n or "DenseReluDense" in n or "mlp" in n for n in q4_0), (part, sorted(q4_0))
        # streamed from the shards: the same Q4_0 blocks (and float tensors) as quantized in memory
        assert dat_bytes(tmp_path / "streamed" / part / "model.nnef.tgz") == dat_bytes(archive)


def dat_bytes(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tgz:
        return {m.name: tgz.extractfile(m).read()  # type: ignore[union-attr]
                for m in tgz.getmembers() if m.name.endswith(".dat")}
