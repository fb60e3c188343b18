"""What differs between multimodal families: how the encoder is called on its raw input
(pixel values, audio features), which config field names the placeholder token, what
the decoder needs beside the embeddings (Gemma 3's bidirectional image spans), and the
sizes of the example input the encoder is traced on.

A family is found by the model's class name; its encoder is the model's own
``get_image_features`` (vision tower and projector), so the encoder artifact computes
exactly what the model feeds its decoder (Qwen2-Audio, which has no such function: the
audio path of its forward, each clip's rows cut to its real frames)."""

from __future__ import annotations

from typing import Any, cast

import attrs
import torch

from t2n.llm.common.checkpoint import config_of
from t2n.llm.multimodal.family import Family, placeholders, pooled
from t2n.llm.multimodal.qwen_families import QWEN2_5_VL, QWEN2_VL, QWEN3_VL


def _gemma3_inputs(model: Any, example: tuple[torch.Tensor, ...], ids: torch.Tensor,
                   size: tuple[int, int] | None = None) -> dict[str, torch.Tensor]:
    return {"pixel_values": example[0], "token_type_ids": placeholders(model, ids)}


def _idefics3_inputs(model: Any, example: tuple[torch.Tensor, ...], ids: torch.Tensor,
                     size: tuple[int, int] | None = None) -> dict[str, torch.Tensor]:
    return {"pixel_values": example[0][None]}  # the processor's [1, IMAGES, 3, H, W]


def _mistral3_inputs(model: Any, example: tuple[torch.Tensor, ...], ids: torch.Tensor,
                     size: tuple[int, int] | None = None) -> dict[str, torch.Tensor]:
    pixels = example[0]
    return {"pixel_values": pixels, "image_sizes": torch.tensor([[pixels.shape[2], pixels.shape[3]]])}


def _voxtral_inputs(model: Any, example: tuple[torch.Tensor, ...], ids: torch.Tensor,
                    size: tuple[int, int] | None = None) -> dict[str, torch.Tensor]:
    return {"input_features": example[0]}


def _image_size(model: torch.nn.Module) -> int:
    vision = config_of(model).vision_config
    return int(vision.image_size)


def _gemma3_example(model: torch.nn.Module) -> tuple[torch.Tensor, ...]:
    size = _image_size(model)
    return (torch.randn((1, 3, size, size), generator=torch.Generator().manual_seed(0)),)


def _gemma3_encode(model: Any, pixel_values: torch.Tensor) -> torch.Tensor:
    return pooled(model.get_image_features(pixel_values, return_dict=True))


GEMMA3 = Family("gemma3", "image", "image_token_id", ("pixel_values",), _gemma3_example, _gemma3_encode,
                dynamic_axes={"pixel_values": {0: "IMAGES"}}, token_types=True,
                forward_inputs=_gemma3_inputs)

def _llava_encode(model: Any, pixel_values: torch.Tensor) -> torch.Tensor:
    """The vision tower's hidden states of the configured layer(s) (the class token dropped
    by the ``default`` strategy) through the projector, as the model's ``get_image_features``
    computes them, for any number of images at once (that function splits its result per
    image in Python)."""
    inner, config = model.model, model.config
    layers = config.vision_feature_layer
    states = inner.vision_tower(pixel_values, output_hidden_states=True, return_dict=True).hidden_states
    chosen = [states[i] for i in ([layers] if isinstance(layers, int) else layers)]
    if config.vision_feature_select_strategy == "default":  # the class token is not an image row
        chosen = [h[:, 1:] for h in chosen]
    projected: torch.Tensor = inner.multi_modal_projector(torch.cat(chosen, dim=-1))
    return projected


def _llava_inputs(model: Any, example: tuple[torch.Tensor, ...], ids: torch.Tensor,
                  size: tuple[int, int] | None = None) -> dict[str, torch.Tensor]:
    return {"pixel_values": example[0]}


LLAVA = Family("llava", "image", "image_token_id", ("pixel_values",), _gemma3_example, _llava_encode,
               dynamic_axes={"pixel_values": {0: "IMAGES"}},
               fixed="pixel_values [IMAGES, 3, S, S] at the vision tower's image_size (the processor's resize)",
               forward_inputs=_llava_inputs)


PALIGEMMA = Family("paligemma", "image", "image_token_id", ("pixel_values",), _gemma3_example, _gemma3_encode,
                   dynamic_axes={"pixel_values": {0: "IMAGES"}},
                   fixed="pixel_values [IMAGES, 3, S, S] at the vision tower's image_size (the processor's "
                         "resize); the decoder's first call (the prefill) is the prefix: the whole prompt, image "
                         "tokens first, in one call, as the processor's token_type_ids 0 mark it",
                   forward_inputs=_llava_inputs, prefix_lm=True, first_position=1)
"""PaliGemma and PaliGemma 2 (SigLIP, a linear projector; a Gemma or Gemma 2 decoder whose
prompt attends both ways on the first call: see :mod:`t2n.llm.multimodal.prefix`)."""


def _anyres_size(model: torch.nn.Module) -> tuple[int, int]:
    """The default image size of an any-resolution family: the first of its
    ``image_grid_pinpoints`` (a size the processor tiles without padding)."""
    height, width = config_of(model).image_grid_pinpoints[0]
    return int(height), int(width)


def anyres_tiles(model: torch.nn.Module, size: tuple[int, int] | None) -> int:
    """The tiles (patches of the vision tower's ``image_size``) the processor cuts an image
    of ``size`` (height, width; None: the default) into: the base image and the grid of
    the pinpoint transformers selects for that size."""
    from transformers.models.llava_next.modeling_llava_next import image_size_to_num_patches

    config = config_of(model)
    height, width = size or _anyres_size(model)
    return int(image_size_to_num_patches([height, width], config.image_grid_pinpoints, _image_size(model)))


def _anyres_example(model: torch.nn.Module, size: tuple[int, int] | None = None) -> tuple[torch.Tensor, ...]:
    side = _image_size(model)
    shape = (1, anyres_tiles(model, size), 3, side, side)
    return (torch.randn(shape, generator=torch.Generator().manual_seed(0)),)


def _anyres_image_sizes(model: torch.nn.Module, size: tuple[int, int] | None) -> torch.Tensor:
    return torch.tensor([list(size or _anyres_size(model))])


def _pack(model: torch.nn.Module, size: tuple[int, int] | None, columns: torch.Tensor) -> torch.Tensor:
    """``[R, C]``: the model's own ``pack_image_features`` for an image of ``size`` on
    stand-in features: ``columns`` ``[tiles * per_tile + 1, C]``, the rows of the tiles one
    after the other, then the ``image_newline``."""
    import inspect

    inner: Any = model.model
    config = config_of(model)
    accepts = inspect.signature(inner.pack_image_features).parameters
    extra: dict[str, Any] = {}
    if "vision_feature_select_strategy" in accepts:
        extra["vision_feature_select_strategy"] = config.vision_feature_select_strategy
    if "vision_aspect_ratio" in accepts:
        extra["vision_aspect_ratio"] = config.vision_aspect_ratio
    tiles = anyres_tiles(model, size)
    features = columns[:-1].reshape(tiles, -1, columns.shape[1])
    with torch.no_grad():
        packed, _ = inner.pack_image_features([features], _anyres_image_sizes(model, size),
                                              image_newline=columns[-1], **extra)
    out: torch.Tensor = packed[0]
    return out


PROBE_COLUMNS = 512
"""Sources probed at once when an image's rows blend several (one-hot columns)."""


def anyres_rows(model: torch.nn.Module, size: tuple[int, int] | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Which rows of ``[the tiles' features, one after the other; image_newline]`` make each
    of the ``R`` image rows the model feeds its decoder for an image of ``size``, found by
    the model's own ``pack_image_features`` run on stand-in features (the packing computes
    its geometry from sizes in Python, so it is run here before the trace, as Qwen2.5-VL's
    windows are): ``(index [R], None)`` where every row is one source (the grid unpadded,
    an ``image_newline`` after each of its rows: features holding their own index ``i``
    and ``i * i`` come out whole), else ``(index [R, K], weights [R, K])``, the ``K``
    sources each row blends (LLaVA-OneVision's bilinear downsampling of a grid beyond its
    ``anyres_max`` budget), from one-hot features probed ``PROBE_COLUMNS`` at a time."""
    vision = config_of(model).vision_config
    side = int(vision.image_size) // int(vision.patch_size)
    sources = anyres_tiles(model, size) * side * side + 1  # transformers views each tile as side x side rows
    index = torch.arange(sources, dtype=torch.float64)
    rows = _pack(model, size, torch.stack([index, index * index], dim=-1))
    if torch.equal(rows[:, 0], rows[:, 0].round()) and torch.equal(rows[:, 1], rows[:, 0] ** 2):
        return rows[:, 0].round().to(torch.int64), None
    found: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
    for first in range(0, sources, PROBE_COLUMNS):
        count = min(PROBE_COLUMNS, sources - first)
        columns = torch.zeros((sources, count), dtype=torch.float64)
        columns[first:first + count] = torch.eye(count, dtype=torch.float64)
        weights = _pack(model, size, columns)
        row, column = torch.nonzero(weights, as_tuple=True)
        found.append((row, column + first, weights[row, column]))
    row, source, weight = (torch.cat(parts) for parts in zip(*found))
    total = int(rows.shape[0])
    order = torch.argsort(row, stable=True)
    row, source, weight = row[order], source[order], weight[order]
    counts = torch.bincount(row, minlength=total)
    slot = torch.arange(len(row)) - (torch.cumsum(counts, 0) - counts)[row]  # each source's place in its row
    width = int(counts.max())
    index = torch.zeros((total, width), dtype=torch.int64)
    blend = torch.zeros((total, width), dtype=torch.float64)
    index[row, slot], blend[row, slot] = source, weight
    return index, blend


def _anyres_fixed(model: torch.nn.Module, size: tuple[int, int] | None) -> dict[str, torch.Tensor]:
    index, weights = anyres_rows(model, size)
    return {"order": index} if weights is None else {"order": index, "weights": weights.float()}


def _anyres_check(model: torch.nn.Module, size: tuple[int, int]) -> str:
    return "a side is not a positive number of pixels" if any(s <= 0 for s in size) else ""


def _anyres_encode(model: Any, pixel_values: torch.Tensor, size: tuple[int, int] | None = None, *,
                   order: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """The features the model feeds its decoder for one image of the size fixed at export
    (``pixel_values`` ``[1, N, 3, S, S]``, its ``N`` tiles): each tile through the vision
    tower's configured layer and the projector (as LLaVA's), then the rows the model's
    ``pack_image_features`` makes of them (the base tile's, the grid's unpadded to the
    image's aspect ratio, downsampled by OneVision beyond its budget, an ``image_newline``
    row after each of its rows): selected by ``order`` (blended by ``weights``), computed
    for that size before the trace (:func:`anyres_rows`)."""
    tiles = _llava_encode(model, pixel_values[0])
    table = torch.cat([tiles.reshape(-1, tiles.shape[-1]), model.model.image_newline[None].to(tiles.dtype)])
    if weights is None:
        return torch.index_select(table, 0, order)
    picked = torch.index_select(table, 0, order.reshape(-1)).reshape(*order.shape, table.shape[-1])
    return (picked * weights.to(table.dtype).unsqueeze(-1)).sum(dim=1)


def _anyres_inputs(model: Any, example: tuple[torch.Tensor, ...], ids: torch.Tensor,
                   size: tuple[int, int] | None = None) -> dict[str, torch.Tensor]:
    return {"pixel_values": example[0], "image_sizes": _anyres_image_sizes(model, size)}


LLAVA_NEXT = Family("llava_next", "image", "image_token_id", ("pixel_values",), _anyres_example, _anyres_encode,
                    fixed="one image a call of the artifact's image_size (the original size, the processor's "
                          "image_sizes): pixel_values [1, N, 3, S, S], its N tiles at the vision tower's "
                          "image_size S (the base image, then the grid of the image_grid_pinpoints entry that "
                          "size selects); the grid, the unpadding to the image's aspect ratio and the "
                          "image_newline rows are computed for that size, one artifact per size",
                    default_size=_anyres_size, check_size=_anyres_check, fixed_inputs=_anyres_fixed,
                    forward_inputs=_anyres_inputs)
"""LLaVA-NeXT's any-resolution tiling, exact at the image size fixed at export (one encoder
per size of ``image_sizes``; default the first of ``image_grid_pinpoints``)."""

def _onevision_several(model: torch.nn.Module) -> dict[str, int]:
    """An image of a prompt of several (the processor's ``batch_num_images`` > 1): the model's
    ``get_image_features`` takes its first (base) tile only, the tile's rows then one
    ``image_newline`` row. Any of the encoders computes them: given the base tile then zero
    tiles (as many as it takes), its first ``first_rows`` rows are the base tile's and its
    last row is the ``image_newline`` (every packing ends with one), whatever its size."""
    vision = config_of(model).vision_config
    side = int(vision.image_size) // int(vision.patch_size)
    return {"tiles": 1, "first_rows": side * side, "last_rows": 1}


LLAVA_ONEVISION = attrs.evolve(
    LLAVA_NEXT, name="llava_onevision",
    fixed=LLAVA_NEXT.fixed + " (the bilinear downsampling of a grid beyond vision_aspect_ratio's budget too); "
                             "an image of a prompt of several: see several_images; images only (no video)",
    several_images=_onevision_several)
"""LLaVA-OneVision: LLaVA-NeXT's tiling (the model's own packing, which also downsamples a
grid beyond its ``anyres_max`` budget bilinearly: a blend of fixed rows)."""


PREPROCESS_RULES = {
    "ignore": "the input is not fed to the encoder (what it says is taken from the data)",
    "merge_axes": "axes [a, a + 1] of the input become one (row-major), e.g. [1, IMAGES, ...] -> [IMAGES, ...]",
    "drop_all_equal": "the slices along axis whose every value equals value are dropped",
}
"""The preprocessing rules a manifest states, by ``rule`` name (``input`` names the
processor output each applies to); ``docs/multimodal.schema.json`` lists them too."""

IDEFICS3_PREPROCESS: tuple[dict[str, str | float | list[int]], ...] = (
    {"rule": "ignore", "input": "pixel_attention_mask"},
    {"rule": "merge_axes", "input": "pixel_values", "axes": [0, 1]},
    {"rule": "drop_all_equal", "input": "pixel_values", "axis": 0, "value": 0.0},
)
"""Idefics3's ``get_image_features``: the processor's ``[1, IMAGES, 3, H, W]`` flattened, its
all-zero padding images dropped, the pixel mask unused (every pixel taken as real)."""


def _idefics3_example(model: torch.nn.Module) -> tuple[torch.Tensor, ...]:
    size = _image_size(model)
    return (torch.randn((1, 3, size, size), generator=torch.Generator().manual_seed(0)),)


def _idefics3_encode(model: Any, pixel_values: torch.Tensor) -> torch.Tensor:
    """The vision model and connector on real (not padding) images of full size: the
    model's own ``get_image_features`` drops all-zero padding images and builds the patch
    mask from ``pixel_attention_mask`` in Python, which a graph cannot do."""
    inner = model.model
    hidden = inner.vision_model(pixel_values=pixel_values.to(inner.dtype), return_dict=True).last_hidden_state
    return pooled(inner.connector(hidden))


IDEFICS3 = Family("idefics3", "image", "image_token_id", ("pixel_values",), _idefics3_example, _idefics3_encode,
                  dynamic_axes={"pixel_values": {0: "IMAGES"}},
                  fixed="pixel_values are the real images (tiles) of full size, [IMAGES, 3, H, W]: drop the "
                        "all-zero padding images of the processor's [1, IMAGES, 3, H, W] and its "
                        "pixel_attention_mask (every pixel is taken as real); the manifest's preprocess "
                        "rules say so as data",
                  forward_inputs=_idefics3_inputs, preprocess=IDEFICS3_PREPROCESS)

def _mistral3_encode(model: Any, pixel_values: torch.Tensor, size: tuple[int, int] | None = None) -> torch.Tensor:
    """Pixtral's tower (2-D rotary over the patch grid) and the patch merger, for one image
    of any size: the grid is computed in the graph from the pixel values' height and width
    (see :mod:`t2n.llm.multimodal.pixtral`)."""
    from t2n.llm.multimodal.pixtral import pixtral_image_features

    return pixtral_image_features(model, pixel_values)


def _mistral3_example(model: torch.nn.Module, size: tuple[int, int] | None = None) -> tuple[torch.Tensor, ...]:
    height, width = size or _square(model)
    return (torch.randn((1, 3, height, width), generator=torch.Generator().manual_seed(0)),)


def _square(model: torch.nn.Module) -> tuple[int, int]:
    return _image_size(model), _image_size(model)


def _mistral3_check(model: torch.nn.Module, size: tuple[int, int]) -> str:
    vision = config_of(model).vision_config
    config = config_of(model)
    step = int(vision.patch_size) * int(config.spatial_merge_size)
    if any(s <= 0 or s % step for s in size):
        return f"a side is not a multiple of patch_size * spatial_merge_size = {step} pixels"
    if max(size) > _image_size(model):
        return f"a side is longer than the vision tower's image_size {_image_size(model)} (its rotary table)"
    return ""


def _mistral3_symbols(model: torch.nn.Module) -> dict[str, dict[str, int]]:
    vision = config_of(model).vision_config
    config = config_of(model)
    step = int(vision.patch_size) * int(config.spatial_merge_size)
    bounds = {"min": step, "max": _image_size(model), "multiple_of": step}
    return {"H": dict(bounds), "W": dict(bounds)}


MISTRAL3 = Family("mistral3", "image", "image_token_id", ("pixel_values",), _mistral3_example, _mistral3_encode,
                  dynamic_axes={"pixel_values": {2: "H", 3: "W"}},
                  fixed="one image a call, pixel_values [1, 3, H, W] of its own size (the processor's image_sizes; "
                        "not the padded batch): H and W multiples of patch_size * spatial_merge_size, at most "
                        "the vision tower's image_size (image_size_bounds)",
                  default_size=_square, check_size=_mistral3_check, size_symbols=_mistral3_symbols,
                  forward_inputs=_mistral3_inputs)

def _voxtral_example(model: torch.nn.Module) -> tuple[torch.Tensor, ...]:
    audio = config_of(model).audio_config
    shape = (1, int(audio.num_mel_bins), 2 * int(audio.max_source_positions))
    return (torch.randn(shape, generator=torch.Generator().manual_seed(0)),)


def _voxtral_encode(model: Any, input_features: torch.Tensor) -> torch.Tensor:
    return pooled(model.get_audio_features(input_features, return_dict=True))


VOXTRAL = Family("voxtral", "audio", "audio_token_id", ("input_features",), _voxtral_example, _voxtral_encode,
                 dynamic_axes={"input_features": {0: "CLIPS"}},
                 fixed="clips of the Whisper encoder's fixed length: input_features [CLIPS, mel bins, "
                       "2 * max_source_positions] (30 s each, as the processor pads them)",
                 forward_inputs=_voxtral_inputs)

def _pair(value: object) -> tuple[int, int]:
    """A config size given as one int or a (height, width) pair (InternVL's ``image_size``)."""
    if isinstance(value, (list, tuple)):
        return int(value[0]), int(value[1])
    assert isinstance(value, int)
    return value, value


def _internvl_example(model: torch.nn.Module) -> tuple[torch.Tensor, ...]:
    height, width = _pair(config_of(model).vision_config.image_size)
    return (torch.randn((1, 3, height, width), generator=torch.Generator().manual_seed(0)),)


def _internvl_encode(model: Any, pixel_values: torch.Tensor) -> torch.Tensor:
    """The model's own ``get_image_features`` (the vision tower's configured layer, the class
    token dropped, the pixel shuffle and the projector), which takes every tile at once and
    returns ``[TILES, rows, hidden]`` without splitting it per image."""
    return pooled(model.get_image_features(pixel_values, return_dict=True))


INTERNVL = Family("internvl", "image", "image_token_id", ("pixel_values",), _internvl_example, _internvl_encode,
                  dynamic_axes={"pixel_values": {0: "IMAGES"}},
                  fixed="pixel_values [IMAGES, 3, S, S] at the vision tower's image_size: the processor's tiles "
                        "(each image's crops, then its thumbnail), image_seq_length rows each",
                  forward_inputs=_llava_inputs)
"""InternVL (InternViT, a pixel shuffle and an MLP projector, a Qwen2 decoder): each tile is
one image of the tower, its rows at its ``image_seq_length`` placeholders."""


AYA_VISION = Family("aya_vision", "image", "image_token_id", ("pixel_values",), _gemma3_example, _internvl_encode,
                    dynamic_axes={"pixel_values": {0: "IMAGES"}},
                    fixed="pixel_values [IMAGES, 3, S, S] at the vision tower's image_size: the processor's tiles "
                          "(each image's crops, then its global tile), (S / patch_size / downsample_factor)^2 "
                          "rows each",
                    forward_inputs=_llava_inputs)
"""Aya Vision (a SigLIP tower, a pixel shuffle by ``downsample_factor`` and a SwiGLU
projector, a Cohere 2 decoder): each tile is one image of the tower, its rows at its
placeholders; the model's own ``get_image_features`` takes every tile at once."""


def _qwen2_audio_example(model: torch.nn.Module) -> tuple[torch.Tensor, ...]:
    """A clip as the processor pads it to the tower's 30 s (``2 * max_source_positions``
    frames) with its ``feature_attention_mask`` (int32, as the feature extractor gives it):
    three quarters real frames, so the trace takes the masked path."""
    audio = config_of(model).audio_config
    frames = 2 * int(audio.max_source_positions)
    features = torch.randn((1, int(audio.num_mel_bins), frames), generator=torch.Generator().manual_seed(0))
    mask = (torch.arange(frames) < frames - frames // 4).to(torch.int32)[None]
    return features, mask


def _qwen2_audio_inputs(model: Any, example: tuple[torch.Tensor, ...], ids: torch.Tensor,
                        size: tuple[int, int] | None = None) -> dict[str, torch.Tensor]:
    return {"input_features": example[0], "feature_attention_mask": example[1]}


def _kept_rows(features: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """``[sum(counts), C]``: the first ``counts[i]`` rows of each ``features[i]`` (``[N, T, C]``),
    one clip after the other, as boolean-mask indexing keeps them, written as a gather over
    a range whose length comes from the data (t2n has no IR for a boolean mask's selection)."""
    ends = torch.cumsum(counts.to(torch.int64), dim=0)
    row = torch.arange(cast(int, ends[-1]))  # a 0-d tensor: traced as the range's end (an int would be fixed)
    clip = (row[:, None] >= ends[None, :]).to(torch.int64).sum(dim=1)
    first = torch.index_select(ends - counts.to(torch.int64), 0, clip)
    flat = features.reshape(-1, features.shape[-1])
    return torch.index_select(flat, 0, clip * features.shape[1] + row - first)


def _qwen2_audio_encode(model: Any, input_features: torch.Tensor, feature_attention_mask: torch.Tensor
                        ) -> torch.Tensor:
    """The rows ``Qwen2AudioModel.forward`` writes at the audio tokens (it has no
    ``get_audio_features``): the tower on the padded clips, its attention masked beyond each
    clip's length (from ``feature_attention_mask``) by the model's own mask builder, the
    projector, then each clip's first ``(((L - 1) // 2 + 1) - 2) // 2 + 1`` rows (``L`` its
    real frames: the number of placeholders the processor writes for it)."""
    from transformers.masking_utils import create_bidirectional_mask

    inner = model.model
    tower = inner.audio_tower
    frames, positions = tower._get_feat_extract_output_lengths(feature_attention_mask.sum(-1))
    steps = (input_features.shape[-1] - 2) // 2 + 1  # the tower's positions after its strided convolution
    valid = (torch.arange(steps)[None, :] < frames[:, None]).to(torch.int64)
    shape = torch.zeros((input_features.shape[0], steps, 1), dtype=inner.dtype)
    mask = create_bidirectional_mask(config=tower.config, inputs_embeds=shape, attention_mask=valid)
    hidden = tower(input_features, attention_mask=mask).last_hidden_state
    return _kept_rows(inner.multi_modal_projector(hidden), positions)


QWEN2_AUDIO = Family("qwen2_audio", "audio", "audio_token_id", ("input_features", "feature_attention_mask"),
                     _qwen2_audio_example, _qwen2_audio_encode,
                     dynamic_axes={"input_features": {0: "CLIPS"}, "feature_attention_mask": {0: "CLIPS"}},
                     fixed="clips as the processor pads them to the Whisper encoder's fixed length: "
                           "input_features [CLIPS, mel bins, 2 * max_source_positions] (30 s) and its "
                           "feature_attention_mask [CLIPS, frames] (int32); each clip gives the rows of its "
                           "real frames, as many as the processor's placeholders for it",
                     forward_inputs=_qwen2_audio_inputs,
                     rows="the sum over the clips of (((L - 1) // 2 + 1) - 2) // 2 + 1, L = the clip's "
                          "feature_attention_mask.sum() (its real frames)")
"""Qwen2-Audio (a Whisper-like tower with average pooling, a linear projector, a Qwen2
decoder): the number of rows of a clip comes from its mask, so the encoder's output
length is computed in tract from the data."""


FAMILIES: dict[str, Family] = {
    "Qwen2AudioForConditionalGeneration": QWEN2_AUDIO,
    "InternVLForConditionalGeneration": INTERNVL,
    "AyaVisionForConditionalGeneration": AYA_VISION,
    "Qwen3VLForConditionalGeneration": QWEN3_VL,
    "VoxtralForConditionalGeneration": VOXTRAL,
    "Qwen2_5_VLForConditionalGeneration": QWEN2_5_VL,
    "Qwen2VLForConditionalGeneration": QWEN2_VL,
    "Mistral3ForConditionalGeneration": MISTRAL3,
    "Gemma3ForConditionalGeneration": GEMMA3,
    "Idefics3ForConditionalGeneration": IDEFICS3,
    "LlavaForConditionalGeneration": LLAVA,
    "PaliGemmaForConditionalGeneration": PALIGEMMA,
    "LlavaNextForConditionalGeneration": LLAVA_NEXT,
    "LlavaOnevisionForConditionalGeneration": LLAVA_ONEVISION,
    "SmolVLMForConditionalGeneration": IDEFICS3,
}
"""The proven families, by the model class of ``transformers``."""


def family_of(model: torch.nn.Module) -> Family | None:
    return FAMILIES.get(type(model).__name__)


def is_multimodal_class(name: str) -> bool:
    return name in FAMILIES
