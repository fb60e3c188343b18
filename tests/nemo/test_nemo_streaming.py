"""Cache-aware streaming of random FastConformers in tract: the encoder's step artifact
fed chunk by chunk with the caches it returns (``t2n.nemo.streaming``) gives, for several
utterance lengths and chunk settings, every chunk's encoded frames within 1e-4 of NeMo's
own ``conformer_stream_step`` loop over ``CacheAwareStreamingAudioBuffer``, and the same
per-frame labels, ids and text (CTC; RNN-T and both heads of a hybrid model)."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from nemo_asr_cases import config, synthetic_audio
from speech.nemo_models import liven

import t2n.nemo
from t2n.cli.main import main
from t2n.errors import NemoExportError, NemoManifestError
from t2n.nemo.streaming import StreamingTranscriber, ctc_merge, transcribe_stream
from t2n.nemo.streaming_export import streaming_setup
from t2n.nemo.streaming_reference import nemo_stream

pytestmark = pytest.mark.slow
"""Each case exports a tiny cache-aware model (a few seconds after NeMo's import)."""

CONTEXTS = [[16, 3], [16, 1], [16, 0]]
"""The look-aheads the tiny model is set up for (chunks of 4, 2 and 1 encoded frames:
320, 160 and 80 ms at 8x subsampling), as NeMo's multi-lookahead FastConformers are."""

LENGTHS = ((7013, 3), (16077, 4), (29011, 5))
"""(samples, seed): every last chunk shorter than the others."""


def streaming_config(name: str) -> dict:
    """``config(name)`` with a cache-aware encoder: chunked-limited attention, causal
    convolutions and causal subsampling."""
    cfg = copy.deepcopy(config(name))
    cfg["encoder"].update(att_context_style="chunked_limited", att_context_size=CONTEXTS,
                          conv_context_size="causal", causal_downsampling=True)
    return cfg


@pytest.fixture(scope="module")
def ctc_model():
    return liven(t2n.nemo.load_model(streaming_config("fastconformer_ctc")))


def assert_streams_alike(model, folder, context, pad, decoder=None):
    """Every utterance of LENGTHS streamed in tract (from audio, through the preprocessor
    artifact) and by NeMo's loop: the chunks' encoded frames, the labels and the text."""
    asr = t2n.nemo.load(folder)
    with streaming_setup(model.encoder, context):
        for samples, seed in LENGTHS:
            audio = synthetic_audio(samples, seed).numpy()
            ref = nemo_stream(model, audio, pad_and_drop_preencoded=pad, decoder=decoder)
            got = transcribe_stream(asr, audio, decoder=decoder)
            assert len(got.encoded) == len(ref.encoded) > 1
            for i, (g, r) in enumerate(zip(got.encoded, ref.encoded)):
                assert g.shape == r.shape, (samples, i)
                np.testing.assert_allclose(g, r, atol=1e-4, rtol=1e-3, err_msg=f"{samples} samples, chunk {i}")
            if decoder == "rnnt" or (decoder is None and getattr(model, "joint", None) is not None):
                assert got.ids == ref.predictions
            else:
                assert got.predictions == ref.predictions
                assert got.ids == ctc_merge(ref.predictions, asr.manifest.decoding["blank_id"])
            assert got.text == ref.text
            assert got.ids, "the livened model emits labels"


@pytest.mark.parametrize(("context", "pad"), [([16, 3], True), ([16, 0], False)])
def test_streamed_ctc_equals_nemo_loop(tmp_path, capsys, ctc_model, context, pad):
    export = t2n.nemo.export_streaming_asr(ctc_model, tmp_path / "out", att_context_size=context,
                                           pad_and_drop_preencoded=pad, check=pad)
    facts = export.manifest.data["streaming"]
    steps = {s["artifact"] for s in facts["steps"].values()}
    assert steps == ({"encoder_step"} if pad else {"encoder_step", "encoder_step_first"})
    assert facts["att_context_size"] == context and ctc_model.encoder.att_context_size == CONTEXTS[0]
    assert facts["valid_out_len"] == context[1] + 1
    step = export.manifest.artifacts["encoder_step"].data
    assert [i["name"] for i in step["inputs"]] == ["audio_signal", "length", "cache_last_channel",
                                                    "cache_last_time", "cache_last_channel_len"]
    assert [i["shape"] for i in step["inputs"]][2:] == [[1, 2, 16, 32], [1, 2, 32, 8], [1]]
    assert step["outputs"][0]["shape"] == [1, 32, context[1] + 1]
    if pad:  # the export's own check against NeMo's loop, recorded
        checked = facts["checked_against_nemo"]
        assert checked and all(c["ids_equal"] and c["text_equal"] and c["max_abs"] < 1e-4 for c in checked)
    assert_streams_alike(ctc_model, export.path, context, pad)
    if pad:  # the command line streams too: `t2n nemo-transcribe --stream`
        audio = synthetic_audio(16077, 1).numpy()
        np.save(tmp_path / "clip.npy", audio)
        assert main(["nemo-transcribe", "--stream", "--json", str(export.path), str(tmp_path / "clip.npy")]) == 0
        printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert printed["ids"] == transcribe_stream(export.path, audio).ids


def test_streamed_hybrid_equals_nemo_loop_with_both_heads(tmp_path):
    model = liven(t2n.nemo.load_model(streaming_config("fastconformer_hybrid")))
    export = t2n.nemo.export_streaming_asr(model, tmp_path / "out", att_context_size=[16, 1], check=False)
    for decoder in ("rnnt", "ctc"):
        assert_streams_alike(model, export.path, [16, 1], True, decoder)
    with pytest.raises(NemoManifestError, match="TDT"):
        StreamingTranscriber(t2n.nemo.load(export.path), "tdt")


def test_refusals(tmp_path, ctc_model):
    """A whole-utterance encoder (regular attention) is not streamed; a context the model
    was not set up for is refused; the whole-utterance export of a model set up for
    cache-aware export points to the streaming export."""
    regular = t2n.nemo.load_model(config("fastconformer_ctc"))
    with pytest.raises(NemoExportError, match="chunked_limited"):
        t2n.nemo.export_streaming_asr(regular, tmp_path / "a", check=False)
    with pytest.raises(NemoExportError, match="trained with"):
        t2n.nemo.export_streaming_asr(ctc_model, tmp_path / "b", att_context_size=[16, 7], check=False)
    ctc_model.encoder.export_cache_support = True
    try:
        with pytest.raises(NemoExportError, match="export_streaming_asr"):
            t2n.nemo.export_asr(ctc_model, tmp_path / "c", check=False)
    finally:
        ctc_model.encoder.export_cache_support = False
    assert not any(tmp_path.iterdir())
