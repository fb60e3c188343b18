"""Typed errors at every edge of t2n.nemo: a ``.nemo`` file that is truncated, a tar that
is no NeMo model, a NeMo model that is no recognizer, audio that is empty, too short,
longer than the encoder's positional table, or a file that is not mono PCM at the
model's rate. Each is a :class:`~t2n.errors.T2NError` naming the file and what to do,
raised before tract runs; the command prints it on one line and exits 1."""

from __future__ import annotations

import io
import tarfile
import wave

import numpy as np
import pytest
from nemo_asr_cases import build, config, synthetic_audio

import t2n.nemo
from t2n.cli.main import main
from t2n.errors import (
    AudioLengthError,
    EngineError,
    NemoArchiveError,
    NemoAudioError,
    NemoExportError,
    T2NError,
)

pytestmark = pytest.mark.slow
"""Each case builds or exports tiny NeMo models (a few seconds each, after NeMo's import)."""



@pytest.fixture(scope="module")
def ctc_export(tmp_path_factory):
    """A character CTC model (FastConformer, 8x subsampling, positional table of 5000
    encoded frames), its export (not checked: the checks are the other tests') and a
    ``.nemo`` file of it."""
    root = tmp_path_factory.mktemp("ctc")
    model = build("fastconformer_ctc")
    model.save_to(str(root / "tiny.nemo"))
    done = t2n.nemo.export_asr(model, root / "out", check=False)
    return model, done, root


def run_cli(capsys, *args):
    """``t2n ARGS`` as the console script runs it: its exit status and what it printed."""
    status = main([str(a) for a in args])
    out = capsys.readouterr()
    return status, out.out, out.err


def assert_one_line_error(status, err, kind, *words):
    assert status == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {kind}: "), err
    assert "Traceback" not in err and "backtrace" not in err.lower()
    for w in words:
        assert w in err, (w, err)


def write_wav(path, samples, *, rate=16000, channels=1):
    pcm = np.clip(np.round(np.repeat(samples[:, None], channels, 1) * 32767), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())
    return path


# -- .nemo files and models ---------------------------------------------------------------


def test_a_truncated_nemo_file_is_refused(ctc_export, tmp_path, capsys):
    """Half a ``.nemo`` (tar) file: NeMo says ``ReadError: unexpected end of data``; t2n
    names the file, says it is truncated and what to do, writes nothing; the command
    prints that on one line."""
    _, _, root = ctc_export
    data = (root / "tiny.nemo").read_bytes()
    cut = tmp_path / "cut.nemo"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(NemoArchiveError, match=r"cut\.nemo is truncated or corrupt .*copy or download it again") as e:
        t2n.nemo.export_asr(cut, tmp_path / "out")
    assert e.value.path == str(cut) and e.value.part == "model"
    status, _, err = run_cli(capsys, "nemo-asr", cut, "-o", tmp_path / "out")
    assert_one_line_error(status, err, "NemoArchiveError", str(cut), "truncated")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.nemo"]


def test_files_that_are_no_nemo_archive_are_refused(tmp_path, capsys):
    """A tar without ``model_config.yaml`` (NeMo: ``FileNotFoundError: .../model_config.yaml``),
    a file that is no tar at all, an empty one."""
    other = tmp_path / "other.nemo"
    with tarfile.open(other, "w") as tar:
        info = tarfile.TarInfo("notes.txt")
        info.size = 5
        tar.addfile(info, io.BytesIO(b"hello"))
    with pytest.raises(NemoArchiveError, match=r"other\.nemo is a tar archive but not a NeMo model: it has no "
                                               r"model_config\.yaml \(it holds notes\.txt\)"):
        t2n.nemo.load_model(other)
    status, _, err = run_cli(capsys, "nemo-asr", other, "-o", tmp_path / "out")
    assert_one_line_error(status, err, "NemoArchiveError", "no model_config.yaml")
    noise = tmp_path / "noise.nemo"
    noise.write_bytes(np.random.default_rng(0).integers(0, 256, 4000, dtype=np.uint8).tobytes())
    empty = tmp_path / "empty.nemo"
    empty.write_bytes(b"")
    for path in (noise, empty):
        with pytest.raises(NemoArchiveError, match=rf"{path.name} is not a \.nemo archive \(a tar file\).*give a "
                                                   r"\.nemo file saved by NeMo"):
            t2n.nemo.load_model(path)
    assert not (tmp_path / "out").exists()


def classifier_config():
    """A NeMo speech classifier: preprocessor, encoder and decoder like a recognizer's,
    but a decoder that gives one label per utterance."""
    cfg = config("fastconformer_ctc")
    return {"target": "nemo.collections.asr.models.EncDecClassificationModel", "sample_rate": 16000,
            "labels": ["yes", "no"], "preprocessor": cfg["preprocessor"],
            "encoder": {"_target_": "nemo.collections.asr.modules.ConvASREncoder", "feat_in": 16,
                        "activation": "relu", "conv_mask": True,
                        "jasper": [{"filters": 32, "repeat": 1, "kernel": [3], "stride": [1], "dilation": [1],
                                    "dropout": 0.0, "residual": False, "separable": True}]},
            "decoder": {"_target_": "nemo.collections.asr.modules.ConvASRDecoderClassification", "feat_in": 32,
                        "num_classes": 2, "return_logits": True, "pooling_type": "avg"}}


def test_a_model_that_is_no_recognizer_is_refused(tmp_path, capsys):
    """A classifier (today's failure: ``AttributeError: 'ConvASRDecoderClassification'
    object has no attribute 'num_classes_with_blank'``), as a config and as a ``.nemo``."""
    model = t2n.nemo.load_model(classifier_config())
    with pytest.raises(NemoExportError, match="EncDecClassificationModel is not a speech recognizer .*"
                                              "ConvASRDecoderClassification.*t2n.nemo exports NeMo's CTC"):
        t2n.nemo.export_asr(model, tmp_path / "out")
    model.save_to(str(tmp_path / "classifier.nemo"))
    status, _, err = run_cli(capsys, "nemo-asr", tmp_path / "classifier.nemo", "-o", tmp_path / "out")
    assert_one_line_error(status, err, "NemoExportError", "not a speech recognizer")
    assert not (tmp_path / "out").exists()


# -- audio lengths --------------------------------------------------------------------------


def test_empty_and_too_short_audio_is_refused(ctc_export, tmp_path, capsys):
    """Under one feature frame (160 samples at 16 kHz) tract failed on a slice; t2n says
    how long the audio is and the least it accepts. 160 samples transcribe."""
    _, done, _ = ctc_export
    asr = t2n.nemo.load(done.path)
    assert (asr.limits.min_samples, asr.limits.min_frames) == (160, 1)
    for n in (0, 1, 159):
        with pytest.raises(AudioLengthError, match=r"shorter than this export accepts: at least 0\.01 s "
                                                   r"\(160 samples, 1 feature frame") as e:
            asr.transcribe(np.zeros(n, np.float32))
        assert e.value.seconds == n / 16000 and e.value.min_seconds == 0.01 and e.value.max_seconds == 400.0
    np.save(tmp_path / "short.npy", np.zeros(100, np.float32))
    with pytest.raises(AudioLengthError, match=r"short\.npy: 0\.00 s of audio \(100 samples at 16000 Hz\)"):
        asr.transcribe_file(tmp_path / "short.npy")
    with pytest.raises(AudioLengthError, match=r"0 feature frames .* takes at least 1"):
        asr.transcribe(features=np.zeros((16, 0), np.float32))
    assert isinstance(asr.transcribe(synthetic_audio(160, 3).numpy()), list)
    status, _, err = run_cli(capsys, "nemo-transcribe", done.path, tmp_path / "short.npy")
    assert_one_line_error(status, err, "AudioLengthError", "shorter than this export accepts")


def test_audio_longer_than_the_positional_table_is_refused(ctc_export, tmp_path):
    """The manifest bounds the encoder's frames (``frames <= 40000``: 5000 positions after
    8x subsampling); longer audio is refused before tract runs, naming the file, its
    length and the longest the export accepts (6400159 samples, 400.00 s)."""
    _, done, _ = ctc_export
    assert "frames <= 40000" in done.manifest.data["artifacts"]["encoder"]["assertions"]
    asr = t2n.nemo.load(done.path)
    assert (asr.limits.max_frames, asr.limits.max_samples) == (40000, 40001 * 160 - 1)
    asr.limits.check_samples(40001 * 160 - 1)
    path = tmp_path / "long.npy"
    np.save(path, np.zeros(40001 * 160, np.float32))
    with pytest.raises(AudioLengthError, match=r"long\.npy: 400\.01 s of audio \(6400160 samples at 16000 Hz\), "
                                               r"longer than this export accepts: at most 400\.00 s") as e:
        asr.transcribe_file(path)
    assert (e.value.seconds, e.value.max_seconds) == (400.01, 400.0) and not asr._runnables
    with pytest.raises(AudioLengthError, match="40001 feature frames .* at most 40000"):
        asr.transcribe(features=np.zeros((16, 40001), np.float32))
    for n in (160, 161, 319, 320, 999, 16077):  # the frames the bound counts are the preprocessor's
        assert asr.features(synthetic_audio(n, 1).numpy()).shape[-1] == asr.limits.frames_of(n)


def test_the_bound_is_the_manifests(tmp_path):
    """A plan that bounds the frames more tightly (300 frames, about 3 s): the longest
    audio it allows transcribes in tract, one sample more is refused."""
    model = build("fastconformer_ctc")
    plan = {"encoder": {"inputs": {"audio_signal": {"collapse_dims": [0]},
                                   "length": {"collapse_dims": [0], "bind_scalar_to_dim_size": "audio_signal.2"}},
                        "outputs": {"outputs": {"collapse_dims": [0]}}, "outputs_keep": ["outputs"],
                        "extensions": ["tract_assert frames <= 300"]}}
    done = t2n.nemo.export_asr(model, tmp_path / "out", plan=plan, check=False)
    asr = t2n.nemo.load(done.path)
    assert asr.limits.max_samples == 301 * 160 - 1
    longest = synthetic_audio(301 * 160 - 1, 4).numpy()
    assert len(asr.transcribe(longest)) > 0
    with pytest.raises(AudioLengthError, match=r"3\.01 s of audio .* at most 3\.00 s"):
        asr.transcribe(synthetic_audio(301 * 160, 4).numpy())


# -- audio files and arrays -----------------------------------------------------------------


def test_audio_files_the_model_cannot_take_are_refused(ctc_export, tmp_path):
    """Stereo, another sample rate, a file that is no wav, a truncated wav, a .npy that is
    no array, two channels, integer samples: each a NemoAudioError naming the file and
    what to do. A mono 16 kHz wav transcribes as its samples do."""
    _, done, _ = ctc_export
    asr = t2n.nemo.load(done.path)
    audio = synthetic_audio(20500, 1).numpy()
    good = write_wav(tmp_path / "good.wav", audio)
    assert asr.transcribe_file(good) == asr.transcribe(t2n.nemo.read_audio(good, 16000))
    np.testing.assert_allclose(t2n.nemo.read_audio(good, 16000), audio, atol=1 / 16000)
    cases = {
        write_wav(tmp_path / "stereo.wav", audio, channels=2): r"stereo\.wav: 2 channels; .*mix it down to mono",
        write_wav(tmp_path / "8k.wav", audio, rate=8000): r"8k\.wav: sampled at 8000 Hz; the model takes 16000 "
                                                          r"Hz: resample it",
        tmp_path / "text.wav": r"text\.wav: not a PCM \.wav file .*give a \.wav",
        tmp_path / "cut.wav": r"cut\.wav: truncated: its header says 20500 samples",
        tmp_path / "bad.npy": r"bad\.npy: cannot read it as a \.npy array",
        tmp_path / "two.npy": r"two\.npy: samples of shape \[2, 20500\]; .*mix the channels down to mono",
        tmp_path / "pcm.npy": r"pcm\.npy: int16 samples; give float samples in \[-1, 1\]",
    }
    (tmp_path / "text.wav").write_text("not audio")
    (tmp_path / "cut.wav").write_bytes(good.read_bytes()[:-1000])
    (tmp_path / "bad.npy").write_bytes(b"\x93NUMPY garbage")
    np.save(tmp_path / "two.npy", np.stack([audio, audio]))
    np.save(tmp_path / "pcm.npy", (audio * 32767).astype(np.int16))
    for path, message in cases.items():
        with pytest.raises(NemoAudioError, match=message) as e:
            asr.transcribe_file(path)
        assert e.value.source == str(path) and isinstance(e.value, T2NError)


def test_engine_failures_carry_no_backtrace(ctc_export):
    """What still fails inside tract (here: features with 17 rows given to the encoder
    artifact directly) is an EngineError with tract's message on one line; through
    ``transcribe`` the shape is refused before tract runs."""
    _, done, _ = ctc_export
    asr = t2n.nemo.load(done.path)
    with pytest.raises(EngineError, match=r"tract could not run the encoder artifact on audio_signal \[17, 10\]: ") as e:
        asr.run("encoder", {"audio_signal": np.zeros((17, 10), np.float32)})
    assert "backtrace" not in str(e.value).lower() and "\n" not in str(e.value)
    with pytest.raises(NemoAudioError, match=r"features of shape \[17, 10\]; the encoder takes \[16, frames\]"):
        asr.transcribe(features=np.zeros((17, 10), np.float32))
