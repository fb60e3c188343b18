"""NeMo's classifiers a device runs beside a recognizer, exported and run in tract: a
speech-commands classifier (``EncDecClassificationModel``, MatchboxNet-like) gives NeMo's
label and probabilities for wav files of several lengths; a frame VAD
(``EncDecFrameClassificationModel``, frame MarbleNet-like) gives NeMo's probabilities of
every frame. The reference is always the model's own public API (``forward``,
``transcribe``), never t2n's wrappers. What is given to the wrong entry, and empty audio,
is refused with a typed error naming what to do."""

from __future__ import annotations

import json
import wave

import numpy as np
import pytest
from nemo_asr_cases import synthetic_audio
from nemo_classifier_cases import (
    COMMANDS,
    build,
    frame_marblenet,
    matchboxnet,
    nemo_probabilities,
    write_wav,
)

import t2n.nemo
from t2n.cli.main import main
from t2n.errors import AudioLengthError, NemoExportError, NemoManifestError

pytestmark = pytest.mark.slow
"""Each module fixture builds and exports a tiny NeMo classifier (a few seconds, after NeMo's import)."""

LENGTHS = [(4000, 1), (16000, 2), (21913, 3), (40000, 4)]
"""0.25 s, 1 s, 1.37 s (not a whole number of hops) and 2.5 s of audio, with their seeds."""

TOLERANCE = 1e-4
"""On probabilities: tract against NeMo's forward (about 1e-6 apart here)."""


def run_cli(capsys, *args):
    status = main([str(a) for a in args])
    out = capsys.readouterr()
    return status, out.out, out.err


def read_wav(path):
    with wave.open(str(path), "rb") as w:
        return np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768


@pytest.fixture(scope="module")
def commands(tmp_path_factory):
    """The speech-commands classifier, exported by the Python entry (checked against NeMo
    at export), and wav files of each length in :data:`LENGTHS`."""
    root = tmp_path_factory.mktemp("commands")
    model = build(matchboxnet())
    done = t2n.nemo.export_classifier(model, root / "out")
    wavs = [write_wav(root / f"{n}.wav", synthetic_audio(n, seed).numpy()) for n, seed in LENGTHS]
    return model, done, wavs


@pytest.fixture(scope="module")
def vad(tmp_path_factory):
    """The frame VAD saved as a ``.nemo`` file and exported from it by ``t2n nemo-classifier``."""
    root = tmp_path_factory.mktemp("vad")
    model = build(frame_marblenet())
    model.save_to(str(root / "vad.nemo"))
    assert main(["nemo-classifier", str(root / "vad.nemo"), "-o", str(root / "out")]) == 0
    return model, root / "out", root


def test_speech_commands_give_nemos_labels_and_probabilities(commands, capsys):
    """For each wav file: the probabilities are the softmax of NeMo's ``forward`` on its
    samples, the label is the argmax, and NeMo's ``transcribe`` of the file gives the
    same label index; ``t2n nemo-classify --json`` prints the same."""
    model, done, wavs = commands
    data = done.manifest.data
    assert data["format"] == "t2n-nemo-classifier" and data["model"]["kind"] == "utterance"
    assert data["classes"]["labels"] == COMMANDS and set(data["artifacts"]) == {"preprocessor", "encoder", "decoder"}
    assert [c["utterance_samples"] for c in data["checked_against_nemo"]] == [16077, 8013]
    classifier = t2n.nemo.load_classifier(done.path)
    results = [classifier.classify_file(w) for w in wavs]
    for wav, result in zip(wavs, results):
        assert isinstance(result, t2n.nemo.Classification)
        expected = nemo_probabilities(model, read_wav(wav))
        np.testing.assert_allclose(result.probabilities, expected, atol=TOLERANCE, err_msg=str(wav))
        assert result.index == int(np.argmax(expected)) and result.label == COMMANDS[result.index]
    nemo_labels = model.transcribe([str(w) for w in wavs], batch_size=1)
    assert [int(i) for i in nemo_labels] == [r.index for r in results]
    assert len({r.label for r in results}) >= 2, "the test model must give varied labels"
    status, out, _ = run_cli(capsys, "nemo-classify", done.path, *wavs, "--json")
    printed = [json.loads(line) for line in out.splitlines()]
    assert status == 0 and [p["label"] for p in printed] == [r.label for r in results]
    np.testing.assert_allclose(list(printed[0]["probabilities"].values()), results[0].probabilities, atol=1e-6)


def test_frame_vad_gives_nemos_probabilities_per_frame(vad, capsys):
    """For each length: as many frames as NeMo's ``forward`` gives (20 ms each, NeMo's
    padded frames included), each with the softmax of NeMo's logits and its argmax label
    (as NeMo's frame VAD, ``generate_vad_frame_pred``, computes them)."""
    model, out, root = vad
    classifier = t2n.nemo.load_classifier(out)
    assert classifier.kind == "frame" and classifier.labels == ("0", "1")
    labels = set()
    for samples, seed in LENGTHS:
        audio = synthetic_audio(samples, seed).numpy()
        result = classifier.classify(audio)
        assert isinstance(result, t2n.nemo.FrameClassification) and result.frame_seconds == pytest.approx(0.02)
        expected = nemo_probabilities(model, audio)
        assert result.probabilities.shape == expected.shape == ((samples // 160 + 2) // 2, 2)
        np.testing.assert_allclose(result.probabilities, expected, atol=TOLERANCE, err_msg=f"{samples} samples")
        assert result.indices == np.argmax(expected, axis=-1).tolist()
        labels |= set(result.frame_labels)
    assert labels == {"0", "1"}, "the test model must label frames both ways"
    wav = write_wav(root / "one.wav", synthetic_audio(16000, 2).numpy())
    status, printed, _ = run_cli(capsys, "nemo-classify", out, wav)
    assert status == 0 and printed.startswith(f"{wav}: 51 frames of 0.02 s: 0.00-")


def test_the_wrong_entry_and_empty_audio_are_refused(commands, tmp_path, capsys):
    """A classifier given to the recognizers' export, a recognizer to the classifiers'; a
    classifier's folder to the transcriber, a recognizer's to the classifier; an empty
    wav: each a typed error naming what to do, and one line from the commands."""
    model, done, _ = commands
    with pytest.raises(NemoExportError, match=r"EncDecClassificationModel is not a speech recognizer .*it is a NeMo "
                                              r"classifier: export it with t2n\.nemo\.export_classifier"):
        t2n.nemo.export_asr(model, tmp_path / "asr")
    recognizer = t2n.nemo.load_model(_tiny_recognizer())
    with pytest.raises(NemoExportError, match=r"EncDecCTCModel is a speech recognizer, not a classifier: export it "
                                              r"with t2n\.nemo\.export_asr"):
        t2n.nemo.export_classifier(recognizer, tmp_path / "cls")
    with pytest.raises(NemoManifestError, match=r"is the export of a NeMo classifier \(t2n-nemo-classifier\), not of "
                                                r"a NeMo speech recognizer: load it with t2n\.nemo\.load_classifier"):
        t2n.nemo.load(done.path)
    asr_folder = tmp_path / "asr_export"
    asr_folder.mkdir()
    (asr_folder / "manifest.json").write_text(json.dumps({"format": "t2n-nemo-asr", "version": 1, "artifacts": {}}))
    with pytest.raises(NemoManifestError, match=r"is the export of a NeMo speech recognizer \(t2n-nemo-asr\), not of "
                                                r"a NeMo classifier: load it with t2n\.nemo\.load\(folder\)"):
        t2n.nemo.load_classifier(asr_folder)
    empty = write_wav(tmp_path / "empty.wav", np.zeros(0, np.float32))
    with pytest.raises(AudioLengthError, match=r"empty\.wav: 0\.00 s of audio \(no samples: it is empty\), shorter "
                                               r"than this export accepts: at least 0\.01 s .*; give longer audio$"):
        t2n.nemo.load_classifier(done.path).classify_file(empty)
    for args, kind in [(("nemo-classify", asr_folder, empty), "NemoManifestError"),
                       (("nemo-transcribe", done.path, empty), "NemoManifestError"),
                       (("nemo-classify", done.path, empty), "AudioLengthError")]:
        status, _, err = run_cli(capsys, *args)
        lines = err.strip().splitlines()
        assert status == 1 and len(lines) == 1 and lines[0].startswith(f"error: {kind}: "), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["asr_export", "empty.wav"]


def test_parts_a_classifier_export_would_not_compute_as_nemo_are_refused(tmp_path):
    """A frame classifier with ``crop_or_pad_augment`` (a random crop, in inference too),
    a preprocessor that is not NeMo's mel one, an encoder that is not a convolution one,
    a regression model: refused by name before anything is compiled."""
    import torch

    model = build(frame_marblenet())
    model.crop_or_pad = torch.nn.Identity()
    with pytest.raises(NemoExportError, match=r"NeMo model: crop_or_pad_augment crops audio .*at a random offset.*"
                                              r"model\.crop_or_pad = None"):
        t2n.nemo.export_classifier(model, tmp_path / "out")
    model.crop_or_pad = None
    preprocessor, model.preprocessor = model.preprocessor, torch.nn.Identity()
    with pytest.raises(NemoExportError, match=r"NeMo preprocessor: Identity is not NeMo's mel-spectrogram "
                                              r"preprocessor"):
        t2n.nemo.export_classifier(model, tmp_path / "out")
    model.preprocessor, model.encoder = preprocessor, torch.nn.Identity()
    with pytest.raises(NemoExportError, match=r"NeMo encoder: Identity: t2n\.nemo exports classifiers with NeMo's "
                                              r"convolution encoder \(ConvASREncoder"):
        t2n.nemo.export_classifier(model, tmp_path / "out")
    regression = build(matchboxnet())
    regression.is_regression_task = True
    with pytest.raises(NemoExportError, match=r"set up for regression"):
        t2n.nemo.export_classifier(regression, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def _tiny_recognizer():
    from nemo_asr_cases import config

    return config("quartznet_ctc")
