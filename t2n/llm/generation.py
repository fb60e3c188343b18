"""``t2n.llm.generate``: the greedy new tokens of any folder ``t2n llm`` writes, from the
inputs a ``transformers`` tokenizer or processor returns.

The folder says what it holds: ``seq2seq.json`` (an encoder-decoder: the encoder runs
once, the decoder steps), ``multimodal.json`` (encoders, then a decoder whose prompt holds
one placeholder token per encoder row), else ``modes.json`` (a text decoder). The cache
form (explicit tensors fed back, or tract's state) is read from the folder too."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import numpy.typing as npt

from t2n.errors import InvalidArgumentError
from t2n.llm.common.generate import as_numpy

ENCODER_INPUTS = ("pixel_values", "input_features")
"""The processor outputs that are an encoder's raw input, one image or clip per row."""


def generate(export_dir: str | Path, inputs: Mapping[str, npt.ArrayLike], max_new_tokens: int) -> list[int]:
    """The token ids tract's greedy choice gives after the prompt, at most ``max_new_tokens``
    (an end token included when it comes, for an encoder-decoder; a decoder-only model
    gives exactly ``max_new_tokens``). ``inputs``: the dict of a tokenizer or processor
    (numpy or torch; batch 1): ``input_ids`` (``attention_mask`` all ones), and for a
    multimodal export ``pixel_values`` or ``input_features`` (one image or clip per row,
    their placeholders in ``input_ids`` in the same order; the manifest's ``preprocess``
    rules and LLaVA-OneVision's ``several_images`` rule applied), for an encoder-decoder its
    source (``input_ids`` or Whisper's ``input_features``, ``decoder_input_ids`` for
    start tokens of one's own)."""
    folder = Path(export_dir)
    if (folder / "seq2seq.json").is_file():
        from t2n.llm.seq2seq import generate as seq2seq_generate

        return seq2seq_generate(folder, inputs, max_new_tokens)
    ids = _prompt(inputs)
    if (folder / "multimodal.json").is_file():
        return _multimodal(folder, ids, inputs, max_new_tokens)
    if (folder / "modes.json").is_file():
        from t2n.llm.common.generate import tract_greedy_generate

        extra = sorted(set(inputs) - {"input_ids", "attention_mask"})
        if extra:
            raise InvalidArgumentError(f"{folder} is a text model's export: it takes input_ids only, not "
                                       f"{', '.join(extra)}")
        return tract_greedy_generate(folder, ids, max_new_tokens)
    raise InvalidArgumentError(f"{folder} holds no seq2seq.json, multimodal.json or modes.json: give the folder "
                               "t2n llm (export_llm) wrote")


def _prompt(inputs: Mapping[str, npt.ArrayLike]) -> np.ndarray:
    """``input_ids`` as ``[1, S]`` int64; a padded or batched prompt is refused."""
    if "input_ids" not in inputs:
        raise InvalidArgumentError(f"inputs has no input_ids (it has {', '.join(sorted(inputs)) or 'nothing'}): "
                                   "give what the model's tokenizer or processor returns")
    ids = np.asarray(as_numpy(inputs["input_ids"]), dtype=np.int64)
    if ids.ndim != 2 or ids.shape[0] != 1:
        raise InvalidArgumentError(f"input_ids must be one prompt, [1, S], got shape {list(ids.shape)}")
    mask = inputs.get("attention_mask")
    if mask is not None and not np.all(np.asarray(as_numpy(mask)) == 1):
        raise InvalidArgumentError("attention_mask holds zeros: a padded prompt is not generated; give the "
                                   "prompt without padding")
    return ids


def _multimodal(folder: Path, ids: np.ndarray, inputs: Mapping[str, npt.ArrayLike], max_new_tokens: int
                ) -> list[int]:
    """The encoders' rows for each image or clip of ``inputs`` (one encoder call each, their
    rows in order; with the processor's ``image_sizes``, each image by the encoder of its
    size), then the decoder's greedy loop."""
    from t2n.llm.multimodal.generate import tract_encode_images, tract_multimodal_generate

    manifest = json.loads((folder / "multimodal.json").read_text())
    modes = json.loads((folder / manifest["decoder"]["modes"]).read_text())
    _check_token_types(inputs, modes)
    _refuse_videos(inputs)
    given = [name for name in ENCODER_INPUTS if name in inputs]
    if not given:
        return tract_multimodal_generate(folder, ids, max_new_tokens)
    name = given[0]
    modality = "image" if name == "pixel_values" else "audio"
    entries = [e for e in manifest["encoders"] if e["modality"] == modality]
    if not entries:
        raise InvalidArgumentError(f"{folder} has no {modality} encoder: export a model that takes {name}")
    inputs = apply_preprocess(inputs, entries[0].get("preprocess"))
    order = [str(n) for n in entries[0]["inputs"]]  # the encoder's inputs (Qwen2-Audio: features and mask)
    wanted = set(order)
    sized = "image_sizes" in inputs and _tiled(entries)
    others = sorted(set(inputs) - wanted - {"input_ids", "attention_mask", "token_type_ids"}
                    - ({"image_sizes", "batch_num_images"} if sized else set()))
    missing = sorted(wanted - set(inputs))
    if name not in wanted or others or missing:
        what = f"the inputs also hold {', '.join(others)}" if others else f"the inputs lack {', '.join(missing)}"
        raise InvalidArgumentError(
            f"the {modality} encoder of {folder} takes {', '.join(order)}; {what}: give the processor's outputs "
            "as it returns them, or encode with t2n.llm.multimodal.generate.tract_encode_images and pass the "
            "rows to tract_multimodal_generate (see docs/multimodal.md)")
    arrays = [as_numpy(inputs[n]) for n in order]
    if sized and _several(inputs):
        rows = _several_images_rows(folder, arrays[0], inputs, entries)
        return tract_multimodal_generate(folder, ids, max_new_tokens, modality=modality, rows=rows)
    images: list[tuple[np.ndarray | tuple[np.ndarray, ...], tuple[int, int] | None]]
    if sized:
        images = list(_tiled_images(arrays[0], inputs, entries))
    else:  # one encoder call per image or clip, each with its row of every input
        images = [(tuple(a[i:i + 1] for a in arrays) if len(arrays) > 1 else arrays[0][i:i + 1], None)
                  for i in range(arrays[0].shape[0])]
    rows = tract_encode_images(folder, images, modality=modality)
    return tract_multimodal_generate(folder, ids, max_new_tokens, modality=modality, rows=rows)


def _refuse_videos(inputs: Mapping[str, npt.ArrayLike]) -> None:
    """Videos (LLaVA-OneVision's ``pixel_values_videos``) take another path of the model, its
    frames pooled and written at its video tokens, which no export has: refused by name."""
    videos = sorted(n for n in inputs if "video" in n)
    if videos:
        raise InvalidArgumentError(f"the inputs hold {', '.join(videos)}: videos are not exported (the model pools "
                                   "their frames and writes them at its video tokens); give images only")


def _check_token_types(inputs: Mapping[str, npt.ArrayLike], modes: Mapping[str, object]) -> None:
    """The processor's ``token_type_ids`` are taken by a prefix-LM decoder (PaliGemma) when
    they mark the whole prompt as its prefix (all 0, what its processor gives without a
    ``suffix``); other token types are refused."""
    if "token_type_ids" not in inputs:
        return
    if "prefix" not in modes:
        raise InvalidArgumentError("the inputs hold token_type_ids, which this export's decoder does not take "
                                   "(its graph finds the image tokens from the placeholders): drop them")
    if np.any(as_numpy(inputs["token_type_ids"]) != 0):
        raise InvalidArgumentError("token_type_ids mark a causal suffix in the prompt (1s): the export's first call "
                                   "attends both ways over its whole prompt; give the prompt without a suffix")


def _tiled(entries: list[dict[str, object]]) -> bool:
    """Whether the encoders take one image of a fixed size each as its tiles ``[1, N, 3, S, S]``
    (LLaVA-NeXT, LLaVA-OneVision), picked by the processor's ``image_sizes``."""
    return all(isinstance(e.get("image_size"), list) and len(_graph_input_shape(e)) == 5 for e in entries)


def _graph_input_shape(entry: Mapping[str, object]) -> list[object]:
    graph = entry.get("graph")
    inputs = graph.get("inputs") if isinstance(graph, dict) else None
    first = inputs[0] if isinstance(inputs, list) and inputs else None
    shape = first.get("shape") if isinstance(first, dict) else None
    return list(shape) if isinstance(shape, list) else []


def _tiled_images(raw: np.ndarray, inputs: Mapping[str, npt.ArrayLike], entries: list[dict[str, object]]
                  ) -> list[tuple[np.ndarray, tuple[int, int] | None]]:
    """Each image of the processor's ``[IMAGES, N, 3, S, S]`` (tiles padded to the longest
    image's) with its size: its own tiles, as many as its size's encoder takes."""
    sizes = np.asarray(as_numpy(inputs["image_sizes"])).reshape(-1, 2)
    if len(sizes) != raw.shape[0]:
        raise InvalidArgumentError(f"image_sizes holds {len(sizes)} sizes for {raw.shape[0]} images")
    images: list[tuple[np.ndarray, tuple[int, int] | None]] = []
    for i, (height, width) in enumerate(sizes.tolist()):
        entry = next((e for e in entries if e["image_size"] == [height, width]), None)
        if entry is None:
            raise InvalidArgumentError(f"no encoder of this export takes images of {height} x {width} pixels "
                                       f"(its sizes: {[e['image_size'] for e in entries]}); export that size "
                                       "(image_sizes) or resize the image to one of them before the processor")
        tiles = _graph_input_shape(entry)[1]
        images.append((raw[i:i + 1, :tiles] if isinstance(tiles, int) else raw[i:i + 1], (height, width)))
    return images


def _several(inputs: Mapping[str, npt.ArrayLike]) -> bool:
    """Whether the processor marks the prompt as one of several images (``batch_num_images``
    ``[n]``, n > 1): LLaVA-OneVision then takes each image otherwise than alone."""
    counts = np.asarray(as_numpy(inputs.get("batch_num_images", np.ones(1)))).reshape(-1)
    if len(counts) != 1:
        raise InvalidArgumentError(f"batch_num_images holds {len(counts)} prompts: give one prompt (batch 1)")
    return int(counts[0]) > 1


def _tile_count(entry: Mapping[str, object]) -> int:
    """The tiles ``N`` of an encoder taking ``[1, N, 3, S, S]``."""
    return int(str(_graph_input_shape(entry)[1]))


def _several_images_rows(folder: Path, raw: np.ndarray, inputs: Mapping[str, npt.ArrayLike],
                         entries: list[dict[str, object]]) -> list[np.ndarray]:
    """The rows of a prompt of several images by the manifest's ``several_images`` rule (the
    same for every encoder): each image's first ``tiles`` tiles, zero tiles after them up to
    what the encoder with the fewest tiles takes, its output's ``first_rows`` then its
    ``last_rows``; the images' rows in order."""
    from t2n.llm.multimodal.generate import tract_encode_all

    rule = entries[0].get("several_images")
    if not isinstance(rule, dict):
        raise InvalidArgumentError("batch_num_images holds a prompt of several images, which this export's "
                                   "model encodes as one image each: give one image a prompt")
    count = int(np.asarray(as_numpy(inputs["batch_num_images"])).reshape(-1)[0])
    if count != raw.shape[0]:
        raise InvalidArgumentError(f"batch_num_images says {count} images, pixel_values holds {raw.shape[0]}")
    entry = min(entries, key=_tile_count)
    tiles = _tile_count(entry)
    size_of = entry.get("image_size")
    size = (int(str(size_of[0])), int(str(size_of[1]))) if isinstance(size_of, list) else None
    first, last, kept = int(rule["first_rows"]), int(rule["last_rows"]), int(rule["tiles"])
    parts = []
    for image in raw:
        padded = np.zeros((1, tiles, *image.shape[1:]), dtype=image.dtype)
        padded[0, :kept] = image[:kept]
        out = tract_encode_all(folder, padded, image_size=size)
        parts.append([np.concatenate([o[:first], o[o.shape[0] - last:]]) for o in out])
    return [np.concatenate(rows, axis=0) for rows in zip(*parts)]


def apply_preprocess(inputs: Mapping[str, npt.ArrayLike], rules: object) -> dict[str, npt.ArrayLike]:
    """``inputs`` after the manifest's ``preprocess`` rules (in order; each names its
    ``input``): ``ignore`` drops it, ``merge_axes`` joins its ``axes`` ``[a, a + 1]``,
    ``drop_all_equal`` drops the slices along ``axis`` whose every value is ``value``
    (Idefics3's padding images). An unknown rule is refused: the export is newer."""
    out = dict(inputs)
    for rule in rules if isinstance(rules, list) else []:
        name, kind = str(rule["input"]), str(rule["rule"])
        if name not in out:
            continue
        if kind == "ignore":
            del out[name]
            continue
        array = np.asarray(as_numpy(out[name]))
        if kind == "merge_axes":
            first = int(rule["axes"][0])
            out[name] = array.reshape(*array.shape[:first], -1, *array.shape[first + 2:])
        elif kind == "drop_all_equal":
            axis = int(rule["axis"])
            other = tuple(a for a in range(array.ndim) if a != axis)
            out[name] = np.compress(~np.all(array == rule["value"], axis=other), array, axis=axis)
        else:
            raise InvalidArgumentError(f"the manifest's preprocess rule {kind!r} is unknown to this t2n: "
                                       "update t2n to generate from this export")
    return out
