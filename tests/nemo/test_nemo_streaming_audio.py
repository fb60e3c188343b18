"""Features computed chunk by chunk as the audio arrives (``StreamingTranscriber.feed``):
for pieces of several sizes, every chunk's window equals (within 1e-5) the one NeMo's
``CacheAwareStreamingAudioBuffer`` cuts from its whole-utterance features, and the ids
and text are those of NeMo's ``conformer_stream_step`` loop; a model whose features are
normalized over the whole utterance is refused, naming the setting."""

from __future__ import annotations

import copy
import json
import shutil

import numpy as np
import pytest
from nemo_asr_cases import synthetic_audio
from speech.nemo_models import liven
from test_nemo_streaming import streaming_config

import t2n.nemo
from t2n.errors import NemoExportError
from t2n.nemo.streaming import StreamingTranscriber, ctc_merge, windows
from t2n.nemo.streaming_export import streaming_setup
from t2n.nemo.streaming_reference import nemo_stream

pytestmark = pytest.mark.slow

PIECES = {"160": [160], "1000": [1000], "4000": [4000], "uneven": [1, 333, 2048, 7, 4999, 90, 161]}
"""Sizes of the pieces the audio arrives in (cycled)."""


def pieces(audio: np.ndarray, sizes: list[int]):
    at, k = 0, 0
    while at < audio.shape[0]:
        yield audio[at:at + sizes[k % len(sizes)]]
        at += sizes[k % len(sizes)]
        k += 1


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    cfg = copy.deepcopy(streaming_config("fastconformer_ctc"))
    cfg["preprocessor"]["normalize"] = "NA"  # as NeMo's cache-aware models
    model = liven(t2n.nemo.load_model(cfg))
    out = tmp_path_factory.mktemp("stream") / "out"
    return model, t2n.nemo.export_streaming_asr(model, out, att_context_size=[16, 1], check=False)


@pytest.mark.parametrize("samples", [16077, 7013])
def test_fed_audio_equals_nemo_loop(export, samples):
    model, exp = export
    asr = t2n.nemo.load(exp.path)
    audio = synthetic_audio(samples, 3).numpy()
    with streaming_setup(model.encoder, [16, 1]):
        ref = nemo_stream(model, audio, pad_and_drop_preencoded=True)
    streamer = StreamingTranscriber(asr)
    streamer.keep_windows = True
    expected = list(windows(ref.features, streamer.first, streamer.later))
    for name, sizes in PIECES.items():
        streamer.reset()
        ids = [k for piece in pieces(audio, sizes) for k in streamer.feed(piece)]
        assert len(streamer.fed) >= len(expected) - 1, f"{name}: the chunks run as the audio arrives"
        ids += streamer.finish()
        assert len(streamer.fed) == len(expected) > 1, name
        for got, want in zip(streamer.fed, expected):
            assert (got.start, got.length) == (want.start, want.length), name
            np.testing.assert_allclose(got.features, want.features, atol=1e-5, rtol=0, err_msg=name)
        assert ids == streamer.ids == ctc_merge(ref.predictions, asr.manifest.decoding["blank_id"]), name
        assert streamer.text == ref.text, name
    assert streamer.ids, "the livened model emits labels"


def test_fed_audio_equals_nemo_loop_with_both_heads(tmp_path):
    """A hybrid model's transducer (its greedy loop continued from chunk to chunk) and
    CTC head, on audio arriving in uneven pieces."""
    cfg = copy.deepcopy(streaming_config("fastconformer_hybrid"))
    cfg["preprocessor"]["normalize"] = "NA"
    model = liven(t2n.nemo.load_model(cfg))
    exp = t2n.nemo.export_streaming_asr(model, tmp_path / "out", att_context_size=[16, 3], check=False)
    audio = synthetic_audio(16077, 4).numpy()
    for decoder in ("rnnt", "ctc"):
        with streaming_setup(model.encoder, [16, 3]):
            ref = nemo_stream(model, audio, pad_and_drop_preencoded=True, decoder=decoder)
        streamer = StreamingTranscriber(t2n.nemo.load(exp.path), decoder)
        ids = [k for piece in pieces(audio, PIECES["uneven"]) for k in streamer.feed(piece)] + streamer.finish()
        want = ref.predictions if decoder == "rnnt" else ctc_merge(ref.predictions, exp.manifest.decoding["blank_id"])
        assert ids == want and ids, decoder
        assert streamer.text == ref.text, decoder
        for got, chunk in zip(streamer.encoded, ref.encoded, strict=True):
            np.testing.assert_allclose(got, chunk, atol=1e-4, rtol=1e-3)


def test_whole_utterance_normalization_refused(export, tmp_path):
    """A featurizer normalizing over the whole utterance (the manifest says
    ``normalize: per_feature``) cannot give a frame before the audio ends."""
    folder = tmp_path / "per_feature"
    shutil.copytree(export[1].path, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["streaming"]["features"]["whole_utterance"] is None
    manifest["streaming"]["features"]["normalize"] = "per_feature"
    (folder / "manifest.json").write_text(json.dumps(manifest))
    streamer = StreamingTranscriber(t2n.nemo.load(folder))
    with pytest.raises(NemoExportError, match="normalize 'per_feature'"):
        streamer.feed(np.zeros(1600, np.float32))
