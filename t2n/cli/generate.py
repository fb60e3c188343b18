"""``t2n generate``: a quick look at what a folder ``t2n llm`` wrote generates in tract,
from text (and an image or an audio clip), with the tokenizer or processor saved in the
folder (``--dump-with-tokenizer-and-conf``): the inputs are built by ``transformers``'
``AutoTokenizer`` / ``AutoProcessor`` (local files only), the tokens come from
:func:`t2n.llm.generate` (greedy), and the new tokens are printed as text."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
import numpy as np

from t2n.cli.main import debug_option, fail, guarded

SIDE_FOLDERS = ("processor", "tokenizer")
"""Where an export keeps what turns text (and media) into its inputs: ``processor/``
(multimodal and audio models, ``AutoProcessor``), else ``tokenizer/`` (``AutoTokenizer``)."""


@click.command("generate")
@click.argument("export_dir", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--prompt", default=None,
              help="The text: a causal LM's prompt, an encoder-decoder's source (not taken by Whisper, "
                   "whose decoder starts from its language and task tokens), a multimodal model's message.")
@click.option("--image", type=click.Path(path_type=Path, exists=True, dir_okay=False), default=None,
              help="An image file for a vision-language export (read with PIL).")
@click.option("--audio", type=click.Path(path_type=Path, exists=True, dir_okay=False), default=None,
              help="An audio file for Whisper or an audio-language export (read and resampled to the "
                   "processor's rate by transformers' load_audio: librosa or soundfile).")
@click.option("--max-new-tokens", type=click.IntRange(min=1), default=32, show_default=True,
              help="Generate at most this many tokens (an encoder-decoder stops at its end token).")
@click.option("--json", "as_json", is_flag=True,
              help="Print {\"ids\": [...], \"text\": ...} as one JSON line instead of the text.")
@debug_option
@guarded
def generate_command(export_dir: Path, prompt: str | None, image: Path | None, audio: Path | None,
                     max_new_tokens: int, as_json: bool) -> None:
    """Generate greedily in tract with the export in EXPORT_DIR (a folder `t2n llm` wrote
    with --dump-with-tokenizer-and-conf) and print the new tokens as text.

    \b
    t2n generate out --prompt "Once upon a time" --max-new-tokens 32
    t2n generate whisper_out --audio clip.wav
    t2n generate vlm_out --prompt "What is in this picture?" --image cat.png
    """
    from t2n.llm.generation import generate

    kind = _kind(export_dir)
    side = load_side(export_dir)
    if kind == "audio seq2seq":
        inputs = _whisper_inputs(side, prompt, image, audio)
    elif kind == "multimodal":
        inputs = _multimodal_inputs(side, _required(prompt, kind), image, audio)
    else:
        if image is not None or audio is not None:
            fail(f"{export_dir} is a {kind} export: it takes text only, not --image nor --audio")
        inputs = _text_inputs(side, _required(prompt, kind))
    ids = generate(export_dir, inputs, max_new_tokens)
    text = str(getattr(side, "tokenizer", side).decode(ids, skip_special_tokens=True))
    click.echo(json.dumps({"ids": ids, "text": text}) if as_json else text)


def _kind(folder: Path) -> str:
    """What the folder holds, by its manifest."""
    seq2seq = folder / "seq2seq.json"
    if seq2seq.is_file():
        encoder_inputs = json.loads(seq2seq.read_text())["encoder"]["inputs"]
        return "audio seq2seq" if encoder_inputs[0]["name"] == "input_features" else "encoder-decoder"
    if (folder / "multimodal.json").is_file():
        return "multimodal"
    if (folder / "modes.json").is_file():
        return "text"
    fail(f"{folder} holds no seq2seq.json, multimodal.json or modes.json: give the folder t2n llm wrote")


def load_side(folder: Path) -> Any:
    """The processor (``OUT/processor/``) or tokenizer (``OUT/tokenizer/``) the export
    holds, loaded by ``transformers`` from local files only (``OUT/config.json`` says
    which tokenizer class when the files do not)."""
    import transformers

    found = next((folder / name for name in SIDE_FOLDERS if (folder / name).is_dir()), None)
    if found is None:
        fail(f"{folder} holds no tokenizer/ nor processor/: export it with --dump-with-tokenizer-and-conf (t2n llm, "
             "from a checkpoint folder that holds its tokenizer files)")
    if found.name == "processor":
        processor: Any = transformers.AutoProcessor  # untyped in transformers
        return processor.from_pretrained(found, local_files_only=True)
    config: dict[str, Any] = {}
    if (folder / "config.json").is_file():
        config["config"] = transformers.AutoConfig.from_pretrained(folder, local_files_only=True)
    return transformers.AutoTokenizer.from_pretrained(found, local_files_only=True, **config)


def _required(prompt: str | None, kind: str) -> str:
    if prompt is None:
        fail(f"a {kind} export generates from text: give --prompt TEXT")
    return prompt


def _arrays(encoded: Mapping[str, Any], keep: tuple[str, ...] | None = None) -> dict[str, np.ndarray]:
    """A tokenizer's or processor's output as numpy arrays (only ``keep``'s names when given)."""
    return {name: np.asarray(value) for name, value in encoded.items() if keep is None or name in keep}


def _text_inputs(tokenizer: Any, prompt: str) -> dict[str, np.ndarray]:
    return _arrays(tokenizer(prompt, return_tensors="np"), ("input_ids", "attention_mask"))


def _read_audio(path: Path, processor: Any) -> tuple[np.ndarray, int]:
    """The clip as mono samples at the processor's sampling rate."""
    from transformers.audio_utils import load_audio

    extractor = getattr(processor, "feature_extractor", processor)
    rate = int(getattr(extractor, "sampling_rate", 16000))
    return np.asarray(load_audio(str(path), sampling_rate=rate), dtype=np.float32), rate


def _whisper_inputs(processor: Any, prompt: str | None, image: Path | None,
                    audio: Path | None) -> dict[str, np.ndarray]:
    if audio is None or image is not None or prompt is not None:
        fail("Whisper's export transcribes an audio clip: give --audio FILE alone (its decoder starts from "
             "the language and task tokens of seq2seq.json; no --prompt, no --image)")
    samples, rate = _read_audio(audio, processor)
    extractor = getattr(processor, "feature_extractor", processor)
    return _arrays(extractor(samples, sampling_rate=rate, return_tensors="np"), ("input_features",))


def _multimodal_inputs(processor: Any, prompt: str, image: Path | None, audio: Path | None) -> dict[str, np.ndarray]:
    """The processor's inputs for one user message: the image or clip, then the text, through
    the processor's chat template when it has one (which places the media tokens)."""
    media: dict[str, Any] = {}
    content: list[dict[str, str]] = []
    if image is not None:
        from PIL import Image

        media["images"] = [Image.open(image).convert("RGB")]
        content.append({"type": "image"})
    if audio is not None:
        samples, rate = _read_audio(audio, processor)
        media.update(audio=[samples], sampling_rate=rate)
        content.append({"type": "audio"})
    text = prompt
    if getattr(processor, "chat_template", None):
        messages = [{"role": "user", "content": [*content, {"type": "text", "text": prompt}]}]
        text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return _arrays(processor(text=text, return_tensors="np", **media))
