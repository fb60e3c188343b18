"""``t2n nemo-asr MODEL -o OUT``: a NeMo speech recognizer as artifacts and a manifest;
``t2n nemo-transcribe OUT AUDIO``: greedy transcription over them in tract;
``t2n nemo-classifier MODEL -o OUT`` and ``t2n nemo-classify OUT AUDIO``: the same for
NeMo's classifiers (speech commands, voice activity)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click

from t2n.cli.main import debug_option, guarded
from t2n.cli.params import tolerance_option, version_callback


def _export_options(subnetworks: str, audio: str,
                    default_span: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The options ``nemo-asr`` and ``nemo-classifier`` share (``subnetworks``: what a plan
    may name; ``audio``: what the longest audio is for, ``default_span`` how long it is
    by default)."""
    options = [
        click.argument("model", type=click.Path(exists=True, path_type=Path)),
        click.option("-o", "--output", required=True, type=click.Path(path_type=Path),
                     help="The folder to write: one .nnef.tgz per sub-network and manifest.json."),
        click.option("--plan", "plan_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                     default=None, help=f"A remodel plan (.yaml/.yml/.json) keyed by sub-network ({subnetworks}); "
                                        "replaces the default plan of those it names."),
        click.option("--no-remodel", is_flag=True, help="Keep NeMo's batched interfaces (no default plans)."),
        click.option("--no-preprocessor", is_flag=True,
                     help="Leave out the preprocessor (the application computes the log-mel features)."),
        click.option("--max-audio-seconds", type=float, default=None,
                     help=f"The longest audio to {audio}: the encoder's length tables are grown to it and longer "
                          f"audio is refused (default: {default_span})."),
        click.option("--tract-version", default=None, callback=version_callback,
                     help="The tract release to emit for (default: the newest t2n knows)."),
        click.option("--no-check", is_flag=True, help="Do not run the artifacts in tract against NeMo."),
        tolerance_option(),
        click.option("--seed", type=int, default=0, show_default=True,
                     help="Seed of the random weights of a model built from a config."),
        click.option("--overwrite", is_flag=True, help="Replace OUTPUT even if it is not a NeMo export t2n wrote."),
        click.option("--json", "as_json", is_flag=True, help="Print the manifest as JSON."),
        debug_option,
        guarded,
    ]

    def apply(f: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            f = option(f)
        return f

    return apply


@click.command("nemo-asr")
@_export_options("preprocessor, encoder, ctc_decoder, decoder, joint", "transcribe",
                 "what the model's positional table covers, 400 s for a FastConformer and for convolution encoders")
def nemo_asr_command(model: Path, output: Path, plan_path: Path | None, no_remodel: bool, no_preprocessor: bool,
                     max_audio_seconds: float | None, tract_version: str | None, no_check: bool, tolerance: str,
                     seed: int, overwrite: bool, as_json: bool) -> None:
    """Export the NeMo ASR MODEL (a .nemo file, or a YAML config built with random weights)
    to OUTPUT: the preprocessor, the encoder, the CTC head or the transducer's prediction
    and joint networks, each remodelled for one utterance at a time and checked in tract
    against NeMo; manifest.json says how to drive them (see docs/speech.md)."""
    from t2n.backends.tract.target import TractNNEF
    from t2n.nemo.export import export_asr

    target = TractNNEF(tract_version) if tract_version else TractNNEF()
    done = export_asr(model, output, preprocessor=not no_preprocessor, plan=plan_path, remodel=not no_remodel,
                      target=target, check=not no_check, tolerance=tolerance, overwrite=overwrite, seed=seed,
                      max_audio_seconds=max_audio_seconds)
    _summary(model, output, done.manifest.data, as_json)


@click.command("nemo-classifier")
@_export_options("preprocessor, encoder, decoder", "classify", "400 s")
def nemo_classifier_command(model: Path, output: Path, plan_path: Path | None, no_remodel: bool,
                            no_preprocessor: bool, max_audio_seconds: float | None, tract_version: str | None,
                            no_check: bool, tolerance: str, seed: int, overwrite: bool, as_json: bool) -> None:
    """Export the NeMo classifier MODEL (EncDecClassificationModel: MatchboxNet speech
    commands; EncDecFrameClassificationModel: frame MarbleNet VAD; a .nemo file, or a YAML
    config built with random weights) to OUTPUT: the preprocessor, the encoder and the
    decoder, each remodelled for one utterance at a time and checked in tract against
    NeMo; manifest.json holds the model's labels (see docs/speech.md)."""
    from t2n.backends.tract.target import TractNNEF
    from t2n.nemo.classifier_export import export_classifier

    target = TractNNEF(tract_version) if tract_version else TractNNEF()
    done = export_classifier(model, output, preprocessor=not no_preprocessor, plan=plan_path,
                             remodel=not no_remodel, target=target, check=not no_check, tolerance=tolerance,
                             overwrite=overwrite, seed=seed, max_audio_seconds=max_audio_seconds)
    _summary(model, output, done.manifest.data, as_json)


def _summary(model: Path, output: Path, data: Mapping[str, Any], as_json: bool) -> None:
    """What an export wrote: its artifacts' interfaces, remodelling and checks (or the manifest)."""
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    lines = [f"{model.name}: {data['model']['class']} ({data['model']['kind']})"]
    for entry in data["artifacts"].values():
        ins = ", ".join(_io(i) for i in entry["inputs"])
        outs = ", ".join(_io(o) for o in entry["outputs"])
        lines.append(f"  {entry['path']}: ({ins}) -> ({outs})")
        done_passes = {k: v for k, v in entry["remodel"].items() if k != "sweeps" and v}
        if done_passes:
            lines.append("    remodel: " + ", ".join(f"{k} {v}" for k, v in done_passes.items()))
        for c in entry["checks"]:
            worst = max((o["max_abs"] for o in c["outputs"]), default=0.0)
            lines.append(f"    checked in {c['engine']} at {c['input_shapes']}: max abs diff {worst:.3g}")
    lines.append(f"wrote {output}")
    click.echo("\n".join(lines))


def _io(info: dict[str, Any]) -> str:
    return f"{info['name']}: {info['dtype']}[{', '.join(str(d) for d in info['shape'])}]"


@click.command("nemo-transcribe")
@click.argument("export", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("audio", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--ctc", is_flag=True, help="Decode a hybrid model with its CTC head.")
@click.option("--json", "as_json", is_flag=True, help="Print the label ids and text as JSON lines.")
@click.option("--stream", is_flag=True,
              help="Feed the audio chunk by chunk through the cache-aware encoder step of an export made by "
                   "t2n.nemo.export_streaming_asr (the text NeMo's conformer_stream_step gives).")
@debug_option
@guarded
def nemo_transcribe_command(export: Path, audio: tuple[Path, ...], ctc: bool, as_json: bool,
                            stream: bool = False) -> None:
    """Greedy transcription of each AUDIO file (16-bit PCM mono .wav at the model's sample
    rate, or a .npy array of float samples) with the artifacts of a nemo-asr EXPORT
    folder, run in tract (with --stream: chunk by chunk, with the encoder's caches)."""
    from t2n.nemo.audio import read_audio
    from t2n.nemo.streaming import transcribe_stream
    from t2n.nemo.transcribe import load

    asr = load(export)
    rate = int(asr.manifest.data["audio"]["sample_rate"])
    for path in audio:
        if stream:
            result = transcribe_stream(asr, read_audio(path, rate), decoder="ctc" if ctc else None, source=str(path))
            ids, text = result.ids, result.text
        else:
            ids = asr.transcribe_file(path, decoder="ctc" if ctc else None)
            text = asr.text(ids)
        click.echo(json.dumps({"audio": str(path), "ids": ids, "text": text}) if as_json else f"{path}: {text}")


@click.command("nemo-classify")
@click.argument("export", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("audio", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True,
              help="Print each file's label and probabilities (per frame for a frame classifier) as JSON lines.")
@debug_option
@guarded
def nemo_classify_command(export: Path, audio: tuple[Path, ...], as_json: bool) -> None:
    """The label of each AUDIO file (16-bit PCM mono .wav at the model's sample rate, or a
    .npy array of float samples) given by the artifacts of a nemo-classifier EXPORT folder,
    run in tract: NeMo's label and its probability, or the labels of a frame classifier's
    frames as segments."""
    from t2n.nemo.classify import Classification, load_classifier

    classifier = load_classifier(export)
    for path in audio:
        result = classifier.classify_file(path)
        if as_json:
            click.echo(json.dumps({"audio": str(path), **result.as_dict()}))
        elif isinstance(result, Classification):
            click.echo(f"{path}: {result.label} ({float(result.probabilities[result.index]):.3f})")
        else:
            spans = "; ".join(f"{a:.2f}-{b:.2f} s {label}" for a, b, label in result.segments())
            click.echo(f"{path}: {len(result.indices)} frames of {result.frame_seconds:g} s: {spans}")
