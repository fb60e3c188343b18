"""The NeMo ASR encoders of the installed NeMo (3.0) beyond the Conformers, QuartzNet and
Citrinet the other tests cover: Jasper (``ConvASREncoder`` with dense residual
connections between its blocks and plain, not separable, convolutions) exports and
transcribes as NeMo does; the recurrent ``RNNEncoder`` and the ``ParallelConvASREncoder``
are refused by name, before anything is written. (Squeezeformer's encoder is not in
NeMo 3.0.)"""

from __future__ import annotations

import copy

import pytest
from nemo_asr_cases import config, synthetic_audio
from speech.nemo_models import D_MODEL, FEATURES, jasper_block, liven, nemo_greedy, nemo_text

import t2n.nemo
from t2n.errors import NemoExportError

pytestmark = pytest.mark.slow
"""Each case builds a tiny NeMo model (the Jasper one is exported too: a few seconds)."""


def jasper_config():
    """Jasper (DR): a strided first block, then blocks each fed the sum of every earlier
    block's output (``residual_dense``), plain convolutions throughout."""
    cfg = copy.deepcopy(config("quartznet_ctc"))
    dense = {"residual_dense": True, "separable": False}
    cfg["encoder"]["jasper"] = [
        jasper_block(32, 1, 11, 2, residual=False, separable=False), jasper_block(32, 2, 11, **dense),
        jasper_block(48, 2, 13, **dense), jasper_block(48, 2, 15, **dense),
        jasper_block(48, 1, 29, residual=False, separable=False, dilation=[2]),
        jasper_block(D_MODEL, 1, 1, residual=False, separable=False)]
    return cfg


def test_jasper_transcribes_as_nemo(tmp_path):
    """Ids equal to NeMo's greedy decoding for three lengths, text equal to
    ``transcribe()``'s for those of a second or more."""
    model = liven(t2n.nemo.load_model(jasper_config()))
    assert model.encoder.dense_residual
    done = t2n.nemo.export_asr(model, tmp_path / "out")
    assert done.manifest.data["audio"]["subsampling_factor"] == 2
    asr = t2n.nemo.load(done.path)
    labels = set()
    for samples, seed in [(16000, 0), (20500, 1), (9000, 2)]:
        audio = synthetic_audio(samples, seed)
        ids = asr.transcribe(audio.numpy())
        assert ids == nemo_greedy(model, audio), f"utterance of {samples} samples"
        if samples >= 16000:
            assert asr.text(ids) == nemo_text(model, audio)
        labels |= set(ids)
    assert len(labels) >= 5, "the test model must emit varied labels"


def rnn_config():
    cfg = copy.deepcopy(config("quartznet_ctc"))
    cfg["encoder"] = {"_target_": "nemo.collections.asr.modules.RNNEncoder", "feat_in": FEATURES, "n_layers": 1,
                      "d_model": 48, "proj_size": D_MODEL, "rnn_type": "lstm", "bidirectional": False,
                      "subsampling": "stacking", "subsampling_factor": 4, "dropout": 0.0}
    return cfg


def parallel_config():
    cfg = copy.deepcopy(config("quartznet_ctc"))
    cfg["encoder"]["_target_"] = "nemo.collections.asr.modules.ParallelConvASREncoder"
    cfg["encoder"]["jasper"][1]["kernel"] = [7, 13]
    return cfg


@pytest.mark.parametrize("make, name, what", [
    (rnn_config, "RNNEncoder", "NeMo's recurrent encoder"),
    (parallel_config, "ParallelConvASREncoder", "NeMo's convolution encoder with parallel blocks"),
])
def test_encoders_not_exported_are_refused_by_name(tmp_path, make, name, what):
    model = t2n.nemo.load_model(make())
    assert type(model.encoder).__name__ == name
    with pytest.raises(NemoExportError, match=rf"NeMo encoder: {name} \({what}.*\) is not exported: it has no export "
                                              r"interface .*use a model with one of those") as e:
        t2n.nemo.export_asr(model, tmp_path / "out")
    assert e.value.part == "encoder" and list(tmp_path.iterdir()) == []
