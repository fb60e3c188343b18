"""NeMo speech recognizers exported as artifacts and transcribed greedily in tract:
the label ids must be those of NeMo's own greedy decoding, utterance by utterance."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import t2n.nemo
from t2n.errors import NemoExportError, NemoManifestError, OverwriteRefusedError

from .nemo_models import (
    D_MODEL,
    FEATURES,
    LABELS,
    build,
    config,
    nemo_features,
    nemo_greedy,
    nemo_text,
    synthetic_audio,
)

pytestmark = pytest.mark.slow
"""Each case exports and runs tiny NeMo models (5-25 s), after NeMo's import (15-30 s):
CI's second step runs them (``-m slow``)."""

UTTERANCES = [(16000, 0), (20500, 1), (9000, 2)]


def transcribe_both(model, asr, audio, *, ctc=False):
    ours = asr.transcribe(audio.numpy(), decoder="ctc" if ctc else None)
    return ours, nemo_greedy(model, audio, ctc=ctc)


def compare_utterances(model, asr, *, ctc=False):
    labels, tokens = set(), 0
    for samples, seed in UTTERANCES:
        audio = synthetic_audio(samples, seed)
        ours, theirs = transcribe_both(model, asr, audio, ctc=ctc)
        assert ours == theirs, f"utterance of {samples} samples"
        labels |= set(ours)
        tokens += len(ours)
    assert len(labels) >= 3 and tokens >= 10, "the test model must emit varied labels"
    return tokens


@pytest.mark.parametrize("name", ["fastconformer_ctc", "conformer_ctc", "fastconformer_rnnt", "fastconformer_tdt"])
def test_transcribes_as_nemo(tmp_path, name):
    model = build(name)
    done = t2n.nemo.export_asr(model, tmp_path / "out")
    asr = t2n.nemo.load(done.path)
    compare_utterances(model, asr)
    if name.endswith("ctc"):  # char CTC text: NeMo's transcribe (with its batching) gives the same text
        audio = synthetic_audio(*UTTERANCES[0])
        assert asr.text(transcribe_both(model, asr, audio)[0]) == nemo_text(model, audio)
    manifest = json.loads((done.path / "manifest.json").read_text())
    want = {"ctc": {"encoder", "ctc_decoder"}, "rnnt": {"encoder", "decoder", "joint"},
            "tdt": {"encoder", "decoder", "joint"}}[name.split("_")[1]] | {"preprocessor"}
    assert set(manifest["artifacts"]) == want
    assert sorted(p.name for p in done.path.iterdir()) == sorted(["manifest.json", *(f"{n}.nnef.tgz" for n in want)])


def test_hybrid_model_decodes_with_either_head(tmp_path):
    model = build("fastconformer_hybrid")
    done = t2n.nemo.export_asr(model, tmp_path / "out")
    assert done.manifest.kind == "hybrid_rnnt_ctc"
    asr = t2n.nemo.load(done.path)
    compare_utterances(model, asr)
    compare_utterances(model, asr, ctc=True)


def test_default_plans_give_one_utterance_interfaces(tmp_path):
    """Batch axes collapsed, lengths bound to the sizes they measure, lengths outputs
    dropped; NeMo's interface and what each remodel pass did are in the manifest."""
    model = build("fastconformer_rnnt")
    done = t2n.nemo.export_asr(model, tmp_path / "out")
    arts = done.manifest.data["artifacts"]

    def io(name, side):
        return {i["name"]: i["shape"] for i in arts[name][side]}

    assert io("encoder", "inputs") == {"audio_signal": [FEATURES, "frames"]}
    assert io("encoder", "outputs") == {"outputs": [D_MODEL, "(((frames - 1) / 2) / 2) / 2 + 1"]}
    assert "frames <= 40000" in arts["encoder"]["assertions"]
    assert io("decoder", "inputs") == {"targets": ["U"], "input_states_1": [1, D_MODEL], "input_states_2": [1, D_MODEL]}
    assert io("decoder", "outputs") == {"outputs": [D_MODEL, "U"], "output_states_1": [1, D_MODEL],
                                        "output_states_2": [1, D_MODEL]}
    assert io("joint", "inputs") == {"encoder_outputs": [D_MODEL, "T"], "decoder_outputs": [D_MODEL, "U"]}
    assert io("joint", "outputs") == {"outputs": ["T", "U", len(LABELS) + 1]}
    enc = arts["encoder"]
    assert [i["name"] for i in enc["nemo_interface"]["inputs"]] == ["audio_signal", "length"]
    assert enc["nemo_interface"]["inputs"][0]["shape"] == ["B", FEATURES, "frames"]
    assert enc["remodel"]["bind-scalar-to-dim-size.bound"] == 1
    assert enc["remodel"]["collapse-input-dims.symbols_fixed"] == 1
    assert enc["remodel"]["outputs-keep.outputs_dropped"] == 1
    assert arts["decoder"]["remodel"]["collapse-input-dims.collapsed_axes"] == 4
    for entry in arts.values():  # checked in tract at two sizes
        assert len(entry["checks"]) == 2 and entry["checks"][0]["input_shapes"] != entry["checks"][1]["input_shapes"]
    assert io("preprocessor", "inputs") == {"input_signal": ["samples"]}
    dec = done.manifest.decoding
    assert dec["greedy"] == "rnnt" and dec["blank_id"] == len(LABELS) and dec["max_symbols_per_step"] == 5
    assert dec["vocabulary"] == LABELS and dec["decoder_state"]["shape"] == [1, D_MODEL]


def test_batched_interface_transcribes_alike(tmp_path):
    """remodel=False keeps NeMo's batched interfaces (lengths as inputs); the greedy loop
    runs them with a batch of one and gives the same labels."""
    model = build("fastconformer_tdt")
    done = t2n.nemo.export_asr(model, tmp_path / "batched", remodel=False)
    arts = done.manifest.data["artifacts"]
    assert [i["name"] for i in arts["encoder"]["inputs"]] == ["audio_signal", "length"]
    assert arts["decoder"]["inputs"][0]["shape"] == ["B", "U"] and arts["encoder"]["plan"] is None
    compare_utterances(model, t2n.nemo.load(done.path))


def test_user_plan_replaces_a_default_plan(tmp_path):
    """A plan keyed by sub-network replaces that one's default (here: the encoder's
    frames renamed and bounded); the others keep theirs."""
    model = build("fastconformer_ctc")
    plan = {"encoder": {"inputs": {"audio_signal": {"collapse_dims": [0]},
                                   "length": {"collapse_dims": [0], "bind_scalar_to_dim_size": "audio_signal.2"}},
                        "outputs": {"outputs": {"collapse_dims": [0]}}, "outputs_keep": ["outputs"],
                        "renamed_symbols": {"features_time": ["frames"]},
                        "extensions": ["tract_assert features_time <= 3000"]}}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    done = t2n.nemo.export_asr(model, tmp_path / "out", preprocessor=False, plan=path)
    enc = done.manifest.data["artifacts"]["encoder"]
    assert enc["inputs"] == [{"name": "audio_signal", "dtype": "f32", "shape": [FEATURES, "features_time"]}]
    assert "features_time <= 3000" in enc["assertions"] and enc["plan"]["renamed_symbols"] == {
        "features_time": ["frames"]}
    assert done.manifest.data["artifacts"]["ctc_decoder"]["inputs"][0]["shape"] == [D_MODEL, "T"]
    audio = synthetic_audio(*UTTERANCES[0])
    asr = t2n.nemo.load(done.path)
    assert asr.transcribe(features=nemo_features(model, audio).numpy()) == nemo_greedy(model, audio)


def test_cli_exports_a_nemo_file_and_transcribes_a_wav(tmp_path):
    import wave

    from click.testing import CliRunner

    from t2n.cli.main import cli

    def t2n_cli(*args):
        res = CliRunner().invoke(cli, [str(a) for a in args])
        assert res.exit_code == 0, res.output
        return res.output

    model = build("fastconformer_rnnt")
    model.save_to(str(tmp_path / "tiny.nemo"))
    out = tmp_path / "out"
    text = t2n_cli("nemo-asr", tmp_path / "tiny.nemo", "-o", out)
    assert "encoder.nnef.tgz: (audio_signal: f32[16, frames]) -> (outputs:" in text
    assert "remodel: " in text and "checked in tract" in text
    audio = synthetic_audio(*UTTERANCES[1])
    pcm = np.clip(np.round(audio.numpy() * 32768), -32768, 32767).astype("<i2")
    with wave.open(str(tmp_path / "a.wav"), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(pcm.tobytes())
    line = json.loads(t2n_cli("nemo-transcribe", out, tmp_path / "a.wav", "--json").strip())
    assert line["ids"] == nemo_greedy(model, torch.from_numpy(pcm.astype(np.float32) / 32768.0))


def test_yaml_config_builds_the_model_with_random_weights(tmp_path):
    import yaml

    path = tmp_path / "model.yaml"
    path.write_text(yaml.safe_dump({"model": config("fastconformer_tdt")}))
    model = t2n.nemo.load_model(path, seed=3)
    facts = t2n.nemo.model_facts(model)
    assert (type(model).__name__, facts.kind, facts.durations, facts.subsampling_factor) == \
        ("EncDecRNNTModel", "tdt", (0, 1, 2, 3, 4), 8)
    weights = [dict(t2n.nemo.load_model(path, seed=s).named_parameters())["joint.enc.weight"] for s in (3, 4)]
    assert torch.equal(dict(model.named_parameters())["joint.enc.weight"], weights[0])
    assert not torch.equal(weights[0], weights[1])


def test_refusals_leave_nothing_behind(tmp_path):
    model = build("fastconformer_ctc")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(OverwriteRefusedError, match="not a NeMo export t2n wrote"):
        t2n.nemo.export_asr(model, foreign, preprocessor=False, check=False)
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]
    with pytest.raises(NemoExportError, match="the plan names joint"):
        t2n.nemo.export_asr(model, tmp_path / "a", preprocessor=False, plan={"joint": {"outputs_keep": ["outputs"]}})
    model.preprocessor.featurizer.normalize = "all_features"
    with pytest.raises(NemoExportError, match="all_features"):
        t2n.nemo.export_asr(model, tmp_path / "b")
    with pytest.raises(NemoManifestError, match="no manifest.json"):
        t2n.nemo.load(foreign)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["foreign"]



def test_an_existing_export_is_replaced(tmp_path):
    model = build("fastconformer_ctc")
    out = tmp_path / "out"
    t2n.nemo.export_asr(model, out, preprocessor=False, check=False)
    done = t2n.nemo.export_asr(model, out, preprocessor=False, check=False, remodel=False)
    assert done.manifest.data["artifacts"]["encoder"]["plan"] is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.parametrize("name", ["fastconformer_ctc", "fastconformer_rnnt"])
def test_a_wrong_encoder_wrapper_is_refused(tmp_path, monkeypatch, name):
    """The encoder's wrapper scales NeMo's output by 1.01: the artifact agrees with the
    wrapper (the per-artifact check passes) but not with the model's own forward, which the
    export is checked against; nothing is written."""
    from t2n.errors import CheckMismatchError
    from t2n.nemo import subnets

    model = build(name)
    real = subnets.Encoder.forward

    def scaled(self, audio_signal, length):
        outputs, lengths = real(self, audio_signal, length)
        return outputs * 1.01, lengths

    monkeypatch.setattr(subnets.Encoder, "forward", scaled)
    with pytest.raises(CheckMismatchError, match="(?s)FAIL encoded.*differs from what .* own modules compute"):
        t2n.nemo.export_asr(model, tmp_path / "out")
    assert not (tmp_path / "out").exists() and list(tmp_path.iterdir()) == []


def test_manifest_records_the_check_against_nemo(tmp_path):
    done = t2n.nemo.export_asr(build("fastconformer_hybrid"), tmp_path / "out")
    checks = done.manifest.data["checked_against_nemo"]
    assert [c["utterance_samples"] for c in checks] == [16077, 8013]
    assert all(c["max_abs"] < 1e-3 for c in checks)
