"""NeMo's convolution-only recognizers (``ConvASREncoder`` with a ``ConvASRDecoder`` CTC
head: QuartzNet, Jasper, Citrinet) exported and transcribed in tract: the label ids and
the text are those of NeMo's own greedy decoding and ``transcribe()``, utterance by
utterance, on tiny models built from config dicts; what their artifacts could not compute
as NeMo does is refused by name, before anything is written."""

from __future__ import annotations

import copy

import pytest
import torch
from nemo_asr_cases import bpe_model, build, config, synthetic_audio, tokenizer_dir
from speech.nemo_models import liven, nemo_greedy, nemo_text

import t2n.nemo
from t2n.errors import NemoExportError

pytestmark = pytest.mark.slow
"""Each case builds and exports tiny NeMo models (5-20 s each, after NeMo's import)."""

UTTERANCES = [(16000, 0), (20500, 1), (9000, 2), (80000, 3)]
"""About 1 s, 1.3 s, 0.56 s, and 5 s: longer than any utterance NeMo's model had seen
when exported (its tables are grown as it sees audio; the export grows them to its span)."""



def assert_transcribes_as_nemo(model, asr):
    """Ids of every utterance equal NeMo's greedy decoding; the text of those of a second
    or more (which ``transcribe()`` does not pad) equals ``transcribe()``'s."""
    labels, tokens = set(), 0
    for samples, seed in UTTERANCES:
        audio = synthetic_audio(samples, seed)
        ours = asr.transcribe(audio.numpy())
        assert ours == nemo_greedy(model, audio), f"utterance of {samples} samples"
        if samples >= 16000:
            assert asr.text(ours) == nemo_text(model, audio), f"utterance of {samples} samples"
        labels |= set(ours)
        tokens += len(ours)
    assert len(labels) >= 3 and tokens >= 10, "the test model must emit varied labels"


@pytest.mark.parametrize("name", ["quartznet_ctc", "citrinet_ctc"])
def test_conv_encoders_transcribe_as_nemo(tmp_path, name):
    """QuartzNet with a character vocabulary (``EncDecCTCModel``), Citrinet with a
    SentencePiece one (``EncDecCTCModelBPE``): preprocessor, encoder and CTC head,
    checked in tract against NeMo's own modules at export, then transcribed."""
    model = build(name) if name.startswith("quartznet") else \
        bpe_model(name, tokenizer_dir(tmp_path / "tokenizers", "nemo_default"))
    done = t2n.nemo.export_asr(model, tmp_path / "out")
    data = done.manifest.data
    assert (data["model"]["class"], data["model"]["kind"]) == \
        ("EncDecCTCModel" if name.startswith("quartznet") else "EncDecCTCModelBPE", "ctc")
    assert set(data["artifacts"]) == {"preprocessor", "encoder", "ctc_decoder"}
    assert data["audio"]["subsampling_factor"] == (2 if name.startswith("quartznet") else 4)
    assert "frames <= 40000" in data["artifacts"]["encoder"]["assertions"]  # 400 s, the default
    assert [c["utterance_samples"] for c in data["checked_against_nemo"]] == [16077, 8013]
    assert_transcribes_as_nemo(model, t2n.nemo.load(done.path))


def test_limited_context_squeeze_excitation_is_refused(tmp_path):
    """Squeeze-excitation over a limited context (``se_context_size`` 16) runs through a
    TorchScript function: refused, naming the module and NeMo's call that switches it to
    the whole utterance, which gives NeMo's same ids in inference; so switched, the
    model exports and transcribes as NeMo does."""
    cfg = copy.deepcopy(config("citrinet_ctc"))
    for block in cfg["encoder"]["jasper"]:
        block["se_context_size"] = 16
    model = liven(t2n.nemo.load_model(cfg))
    with pytest.raises(NemoExportError, match=r"NeMo encoder: encoder\.encoder\.0\.mconv\.3 \(SqueezeExcite\) pools "
                                              r"over a limited context \(se_context_size=16\).*"
                                              r"model\.change_conv_asr_se_context_window\(context_window=-1\)") as e:
        t2n.nemo.export_asr(model, tmp_path / "out")
    assert e.value.part == "encoder" and list(tmp_path.iterdir()) == []
    audio = synthetic_audio(20500, 1)
    before = nemo_greedy(model, audio)
    model.change_conv_asr_se_context_window(context_window=-1)
    assert nemo_greedy(model, audio) == before
    done = t2n.nemo.export_asr(model, tmp_path / "out")
    assert t2n.nemo.load(done.path).transcribe(audio.numpy()) == before


def test_group_normalization_is_refused(tmp_path):
    """GroupNorm (``normalization_mode`` group, layer, instance) normalizes over the
    frames NeMo pads an utterance with, so NeMo's own output depends on that padding:
    refused, naming the first such module."""
    cfg = copy.deepcopy(config("quartznet_ctc"))
    cfg["encoder"].update(normalization_mode="group", norm_groups=4)
    model = t2n.nemo.load_model(cfg)
    audio = synthetic_audio(16077, 1)
    with torch.no_grad():  # NeMo's output for one utterance, padded to 16 frames and not
        feats, flen = model.preprocessor(input_signal=audio[None], length=torch.tensor([audio.shape[0]]))
        padded, _ = model.encoder(audio_signal=feats, length=flen)
        exact, _ = model.encoder(audio_signal=feats[:, :, :int(flen[0])].contiguous(), length=flen)
    assert not torch.allclose(padded[..., :exact.shape[-1]], exact, atol=1e-3)
    with pytest.raises(NemoExportError, match=r"encoder\.encoder\.0\.mconv\.2 \(GroupNorm: .*\) normalizes over "
                                              r"time including the frames NeMo pads an utterance with"):
        t2n.nemo.export_asr(model, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []
