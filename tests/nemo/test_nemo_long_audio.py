"""Audio longer than a Conformer's positional table: exported for a declared maximum
(``max_audio_seconds``), the table is grown to it as NeMo grows it for long audio, and
audio longer than the table transcribes in tract as NeMo's ``transcribe()`` and forward
do (label ids and text); audio past the maximum is refused before tract runs."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import yaml
from nemo_asr_cases import config, synthetic_audio
from speech.nemo_models import liven, nemo_greedy, nemo_text

import t2n.nemo
from t2n.cli.main import main
from t2n.errors import AudioLengthError, NemoExportError

pytestmark = pytest.mark.slow
"""Each case builds and exports tiny NeMo models (10-30 s each, after NeMo's import)."""

POSITIONS = 160
"""The positional table of the test models: 160 encoded frames (NeMo grows a shorter
one on the first utterance the test model sees: 160 feature frames, padded to 16)."""



def short_table_model(arch: str):
    """A tiny CTC model of ``arch`` whose positional table covers ``POSITIONS`` encoded
    frames: 6.4 s of audio at 4x subsampling (Conformer), 12.8 s at 8x (FastConformer)."""
    cfg = copy.deepcopy(config(f"{arch}_ctc"))
    cfg["encoder"]["pos_emb_max_len"] = POSITIONS
    model = liven(t2n.nemo.load_model(cfg))
    assert model.encoder.max_audio_length == POSITIONS
    return model


@pytest.mark.parametrize(("arch", "max_seconds", "long_seconds"), [("conformer", 15, 10), ("fastconformer", 20, 15)])
def test_audio_longer_than_the_table_transcribes_as_nemo(tmp_path, arch, max_seconds, long_seconds):
    """By default the export takes what the table covers and refuses longer audio; with
    ``max_audio_seconds`` the table is grown, audio longer than the original table and
    the longest audio allowed give NeMo's ids (and ``transcribe()``'s text), and one
    sample more is refused before tract runs, naming the maximum."""
    model = short_table_model(arch)
    sub = model.encoder.subsampling_factor
    table_seconds = POSITIONS * sub / 100
    long_audio = synthetic_audio(long_seconds * 16000, 5)

    default = t2n.nemo.export_asr(model, tmp_path / "default", check=False)
    assert f"frames <= {POSITIONS * sub}" in default.manifest.data["artifacts"]["encoder"]["assertions"]
    with pytest.raises(AudioLengthError, match=rf"{long_seconds}\.00 s of audio .* at most {table_seconds:.2f} s") as e:
        t2n.nemo.load(default.path).transcribe(long_audio.numpy())
    assert e.value.max_seconds == table_seconds

    done = t2n.nemo.export_asr(model, tmp_path / "long", max_audio_seconds=max_seconds)
    assert model.encoder.max_audio_length > POSITIONS  # grown as NeMo grows it (same values, longer)
    assert f"frames <= {max_seconds * 100}" in done.manifest.data["artifacts"]["encoder"]["assertions"]
    asr = t2n.nemo.load(done.path)
    assert asr.limits.max_samples == (max_seconds * 100 + 1) * 160 - 1
    ours = asr.transcribe(long_audio.numpy())
    assert ours == nemo_greedy(model, long_audio) and len(set(ours)) >= 3
    assert asr.text(ours) == nemo_text(model, long_audio)
    longest = synthetic_audio(asr.limits.max_samples, 6)
    assert asr.transcribe(longest.numpy()) == nemo_greedy(model, longest)

    fresh = t2n.nemo.load(done.path)
    with pytest.raises(AudioLengthError, match=rf"{max_seconds}\.01 s of audio \({asr.limits.max_samples + 1} samples "
                                               rf"at 16000 Hz\), longer than this export accepts: at most "
                                               rf"{max_seconds}\.00 s .*max_audio_seconds") as e:
        fresh.transcribe(np.zeros(asr.limits.max_samples + 1, np.float32))
    assert e.value.max_seconds == max_seconds and not fresh._runnables


def test_a_maximum_the_export_cannot_take_is_refused(tmp_path, capsys):
    """Not a positive number of seconds, or shorter than the utterance the export is
    checked with; and a plan that lets the encoder take more frames than its table was
    grown to (tract would read past it): each refused, nothing written."""
    model = short_table_model("conformer")
    for bad, message in ((0, r"max_audio_seconds=0: give the length of the longest audio"),
                         (float("nan"), r"max_audio_seconds=nan"),
                         (0.5, r"max_audio_seconds=0\.5 is shorter than the utterances the export is traced and "
                               r"checked with \(100 feature frames\): declare at least 1\.00 s")):
        with pytest.raises(NemoExportError, match=message):
            t2n.nemo.export_asr(model, tmp_path / "out", max_audio_seconds=bad)
    plan = {"encoder": {"inputs": {"audio_signal": {"collapse_dims": [0]},
                                   "length": {"collapse_dims": [0], "bind_scalar_to_dim_size": "audio_signal.2"}},
                        "outputs": {"outputs": {"collapse_dims": [0]}}, "outputs_keep": ["outputs"],
                        "extensions": ["tract_assert frames <= 5000"]}}
    with pytest.raises(NemoExportError, match=r"the plan lets the encoder take up to 5000 feature frames, but its "
                                              r"length tables cover 1000 \(10\.00 s of audio\)"):
        t2n.nemo.export_asr(model, tmp_path / "out", plan=plan, preprocessor=False, check=False,
                            max_audio_seconds=10)
    assert list(tmp_path.iterdir()) == []
    yaml_path = tmp_path / "model.yaml"
    yaml_path.write_text(yaml.safe_dump({"model": config("conformer_ctc")}))
    status = main(["nemo-asr", str(yaml_path), "-o", str(tmp_path / "out"), "--max-audio-seconds", "0.5"])
    err = capsys.readouterr().err.strip()
    assert status == 1 and err.startswith("error: NemoExportError: ") and "declare at least 1.00 s" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.yaml"]
