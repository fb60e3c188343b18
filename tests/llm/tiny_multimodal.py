"""Tiny random-init vision-language models (1-2 layers, hidden 32-64, images of 28 px),
with the prompts and pixel values the tests feed them, and transformers' greedy tokens."""

from __future__ import annotations

from typing import Any

import attrs
import torch

TEXT = dict(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, max_position_embeddings=128, initializer_range=0.2)


@attrs.frozen
class Case:
    """A tiny model, its image prompt (placeholders for one image), its text prompt, the
    pixel values of one image, and the extra keywords its ``generate`` takes."""

    model: Any
    image_prompt: torch.Tensor
    text_prompt: torch.Tensor
    pixels: tuple[torch.Tensor, ...]
    generate_kwargs: dict[str, Any]
    model_pixels: Any = None
    """The model's ``pixel_values`` from the encoder's (None: the same)."""
    feature_kwargs: dict[str, Any] = attrs.field(factory=dict)
    modality: str = "image"
    text_kwargs: dict[str, Any] = attrs.field(factory=dict)
    """The keywords of a text-only ``generate`` (functions of the prompt, like ``generate_kwargs``)."""

    def features(self, pixels: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """The model's own ``get_image_features`` for the encoder's inputs, one row per token."""
        given = pixels[0] if self.model_pixels is None else self.model_pixels(pixels[0])
        with torch.no_grad():
            features = getattr(self.model, f"get_{self.modality}_features")
            out = _pooled(features(given, return_dict=True, **self.feature_kwargs))
        return out.reshape(-1, out.shape[-1])

    def reference_tokens(self, prompt: torch.Tensor, count: int, with_image: bool) -> list[int]:
        extra = self.generate_kwargs_for(prompt) if with_image else self.kwargs_for(self.text_kwargs, prompt)
        from transformers import GenerationConfig

        # no end-of-sequence token: greedy choices all along, as tract's generation makes them
        self.model.generation_config.eos_token_id = None
        config = GenerationConfig(max_new_tokens=count, do_sample=False, pad_token_id=0)
        with torch.no_grad():
            out = self.model.generate(prompt, generation_config=config, attention_mask=torch.ones_like(prompt),
                                      **extra)
        assert out.shape[1] == prompt.shape[1] + count
        return [int(t) for t in out[0, prompt.shape[1]:]]

    def generate_kwargs_for(self, prompt: torch.Tensor) -> dict[str, Any]:
        return self.kwargs_for(self.generate_kwargs, prompt)

    @staticmethod
    def kwargs_for(kwargs: dict[str, Any], prompt: torch.Tensor) -> dict[str, Any]:
        return {k: (v(prompt) if callable(v) else v) for k, v in kwargs.items()}

    def reference_logits(self, prompt: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self.model(input_ids=prompt, **self.generate_kwargs_for(prompt)).logits


def _pooled(features: Any) -> torch.Tensor:
    out = features.pooler_output
    return torch.cat(list(out)) if isinstance(out, (list, tuple)) else out


def _pixels(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def gemma3(seed: int = 3, image_seed: int = 5) -> Case:
    """Gemma 3: a SigLIP tower (28 px, 7 px patches: 16 patches) pooled to 4 image tokens,
    a sliding and a full attention layer; the image token (95) inside the vocabulary."""
    import transformers as tf

    torch.manual_seed(seed)
    config = tf.Gemma3Config(
        # a smaller initialisation than the others: Gemma's scaled embeddings saturate at 0.2
        text_config={**TEXT, "initializer_range": 0.05, "sliding_window": 4,
                     "layer_types": ["sliding_attention", "full_attention"]},
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                           image_size=28, patch_size=7),
        mm_tokens_per_image=4, image_token_id=90, boi_token_id=91, eoi_token_id=92)
    model = tf.Gemma3ForConditionalGeneration(config).eval()
    with torch.no_grad():  # initialised to zeros: random, so that the image matters
        model.model.multi_modal_projector.mm_input_projection_weight.normal_(0, 0.2)
    image_prompt = torch.tensor([[2, 5, 91, 90, 90, 90, 90, 92, 7, 8]])
    return Case(model, image_prompt, torch.tensor([[2, 5, 7, 8, 11]]), (_pixels((1, 3, 28, 28), image_seed),),
                {"pixel_values": (_pixels((1, 3, 28, 28), image_seed)),
                 "token_type_ids": lambda p: (p == 90).long()})


def _vision(**extra: Any) -> dict[str, Any]:
    return dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=28,
                patch_size=7, **extra)


def idefics3(seed: int = 0, image_seed: int = 5, smolvlm: bool = False) -> Case:
    """Idefics3 (SmolVLM): a 28 px image, 16 patches shuffled by 2 into 4 image tokens, a
    Llama decoder. Its pixel values are ``[1, images, 3, H, W]``; the encoder takes
    ``[images, 3, H, W]``."""
    import transformers as tf

    torch.manual_seed(seed)
    text = {k: v for k, v in TEXT.items() if k != "head_dim"}
    config_cls, model_cls = ((tf.SmolVLMConfig, tf.SmolVLMForConditionalGeneration) if smolvlm
                             else (tf.Idefics3Config, tf.Idefics3ForConditionalGeneration))
    config = config_cls(text_config={**text, "model_type": "llama"}, vision_config=_vision(), scale_factor=2,
                        image_token_id=90)
    model = model_cls(config).eval()
    pixels = _pixels((1, 3, 28, 28), image_seed)
    return Case(model, torch.tensor([[2, 5, 90, 90, 90, 90, 7, 8]]), torch.tensor([[2, 5, 7, 8, 11]]), (pixels,),
                {"pixel_values": pixels[None]}, model_pixels=lambda p: p[None])


def mistral3(seed: int = 0, image_seed: int = 5, image_size: int = 28) -> Case:
    """Mistral 3: a Pixtral tower (28 px, 16 patches, 2-D rotary) merged by 2 into 4 image
    tokens, a Mistral decoder (``image_size``: the longest side it takes)."""
    import transformers as tf

    torch.manual_seed(seed)
    config = tf.Mistral3Config(text_config={**TEXT, "model_type": "mistral"},
                               vision_config={**_vision(model_type="pixtral", head_dim=16), "image_size": image_size},
                               spatial_merge_size=2, image_token_id=90)
    model = tf.Mistral3ForConditionalGeneration(config).eval()
    pixels = _pixels((1, 3, 28, 28), image_seed)
    sizes = torch.tensor([[28, 28]])
    return Case(model, torch.tensor([[2, 5, 90, 90, 90, 90, 7, 8]]), torch.tensor([[2, 5, 7, 8, 11]]), (pixels,),
                {"pixel_values": pixels, "image_sizes": sizes},
                feature_kwargs={"image_sizes": sizes})


def qwen2_5_vl(seed: int = 0, image_seed: int = 5) -> Case:
    """Qwen2.5-VL: an image of 8 x 8 patches of 7 px (two 28 px attention windows a side,
    a windowed and a full attention block), merged by 2 into 16 image tokens; 3-D rotary
    positions in the decoder."""
    import transformers as tf

    torch.manual_seed(seed)
    text = {k: v for k, v in TEXT.items() if k != "head_dim"}
    config = tf.Qwen2_5_VLConfig(
        text_config={**text, "rope_parameters": {"rope_type": "default", "mrope_section": [2, 3, 3],
                                                 "rope_theta": 10000.0}},
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
                           patch_size=7, spatial_merge_size=2, temporal_patch_size=2, window_size=28,
                           fullatt_block_indexes=[1]),
        image_token_id=90, vision_start_token_id=91, vision_end_token_id=92)
    model = tf.Qwen2_5_VLForConditionalGeneration(config).eval()
    pixels = _pixels((64, 3 * 2 * 7 * 7), image_seed)
    grid = torch.tensor([[1, 8, 8]])
    return Case(model, torch.tensor([[2, 5, 91, *[90] * 16, 92, 7, 8]]), torch.tensor([[2, 5, 7, 8, 11]]), (pixels,),
                {"pixel_values": pixels, "image_grid_thw": grid, "mm_token_type_ids": lambda p: (p == 90).int()},
                feature_kwargs={"image_grid_thw": grid})


def voxtral(seed: int = 0, clip_seed: int = 5) -> Case:
    """Voxtral: a Whisper-like audio encoder (16 mel bins, 32 frames, strided to 16) whose
    frames are stacked by 4 into 4 audio tokens, a Llama decoder."""
    import transformers as tf

    torch.manual_seed(seed)
    audio = dict(hidden_size=32, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2, num_mel_bins=16,
                 max_source_positions=16)
    config = tf.VoxtralConfig(text_config={**TEXT, "model_type": "llama"}, audio_config=audio, audio_token_id=90)
    model = tf.VoxtralForConditionalGeneration(config).eval()
    clip = _pixels((1, 16, 32), clip_seed)
    return Case(model, torch.tensor([[2, 5, 90, 90, 90, 90, 7, 8]]), torch.tensor([[2, 5, 7, 8, 11]]), (clip,),
                {"input_features": clip}, modality="audio")


def qwen3_vl(seed: int = 0, image_seed: int = 5) -> Case:
    """Qwen3-VL: an image of 8 x 8 patches of 7 px (the grid of its 64 learned position
    embeddings), merged by 2 into 16 image tokens, two DeepStack streams added after the
    two decoder layers; interleaved 3-D rotary positions in the decoder."""
    import transformers as tf

    torch.manual_seed(seed)
    config = tf.Qwen3VLConfig(
        text_config={**TEXT, "rope_parameters": {"rope_type": "default", "mrope_section": [2, 3, 3],
                                                 "mrope_interleaved": True, "rope_theta": 10000.0}},
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
                           patch_size=7, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=64,
                           deepstack_visual_indexes=[0, 1]),
        image_token_id=90, vision_start_token_id=91, vision_end_token_id=92)
    model = tf.Qwen3VLForConditionalGeneration(config).eval()
    pixels = _pixels((64, 3 * 2 * 7 * 7), image_seed)
    grid = torch.tensor([[1, 8, 8]])
    return Case(model, torch.tensor([[2, 5, 91, *[90] * 16, 92, 7, 8]]), torch.tensor([[2, 5, 7, 8, 11]]), (pixels,),
                {"pixel_values": pixels, "image_grid_thw": grid, "mm_token_type_ids": lambda p: (p == 90).int()},
                feature_kwargs={"image_grid_thw": grid})


def llava(seed: int = 0, image_seed: int = 5) -> Case:
    """LLaVA: a CLIP tower (28 px, 7 px patches: 16 patches and a class token), the
    second-to-last layer's patch states (the class token dropped) through the projector
    into 16 image tokens, a Llama decoder."""
    import transformers as tf

    torch.manual_seed(seed)
    text = {k: v for k, v in TEXT.items() if k != "head_dim"}
    config = tf.LlavaConfig(text_config={**text, "model_type": "llama"},
                            vision_config={**_vision(), "model_type": "clip_vision_model", "projection_dim": 32},
                            image_token_id=90, vision_feature_layer=-2, vision_feature_select_strategy="default")
    model = tf.LlavaForConditionalGeneration(config).eval()
    pixels = _pixels((1, 3, 28, 28), image_seed)
    return Case(model, torch.tensor([[2, 5, *[90] * 16, 7, 8]]), torch.tensor([[2, 5, 7, 8, 11]]), (pixels,),
                {"pixel_values": pixels}, feature_kwargs={"vision_feature_layer": -2,
                                                          "vision_feature_select_strategy": "default"})


def paligemma(seed: int = 0, image_seed: int = 5, version: int = 1) -> Case:
    """PaliGemma: a SigLIP tower (28 px, 7 px patches) whose 16 patches are projected into
    16 image tokens, a Gemma decoder (``version`` 2: Gemma 2, a sliding layer of window 4
    and a full one, soft-capped logits). Its prompt (image tokens first, as the processor
    writes it) attends both ways on the prefill (``token_type_ids`` 0), later tokens
    causally; positions count from 1. Untied embeddings: Gemma's tied, scaled ones echo
    the last token on a tiny random model."""
    import transformers as tf

    torch.manual_seed(seed)
    text: dict[str, Any] = {**TEXT, "model_type": "gemma" if version == 1 else "gemma2"}
    if version == 2:
        text.update(sliding_window=4, layer_types=["sliding_attention", "full_attention"])
    config = tf.PaliGemmaConfig(text_config=text, vision_config=_vision(), image_token_index=90, projection_dim=64,
                                hidden_size=64, tie_word_embeddings=False)
    model = tf.PaliGemmaForConditionalGeneration(config).eval()
    pixels = _pixels((1, 3, 28, 28), image_seed)
    zeros = torch.zeros_like  # the processor's token_type_ids: the whole prompt is the prefix
    return Case(model, torch.tensor([[*[90] * 16, 2, 5, 7, 8, 1]]), torch.tensor([[2, 5, 7, 8, 11, 1]]), (pixels,),
                {"pixel_values": pixels, "token_type_ids": zeros}, text_kwargs={"token_type_ids": zeros})


def llava_next(seed: int = 0, image_seed: int = 5, image_size: tuple[int, int] = (28, 56)) -> Case:
    """LLaVA-NeXT: a CLIP tower (28 px tiles, 7 px patches), pinpoints 28 x 56, 56 x 28 and
    56 x 56 px; an image of ``image_size`` (original pixels) is cut into the base tile and
    the grid of its pinpoint, each tile's 16 patch states (second-to-last layer, class
    token dropped) through the projector, the grid's unpadded to the image's aspect ratio
    with an ``image_newline`` row after each row; a Llama decoder. 28 x 56: 3 tiles, 16 +
    4 x (8 + 1) = 52 image tokens."""
    import transformers as tf

    torch.manual_seed(seed)
    text = {k: v for k, v in TEXT.items() if k != "head_dim"}
    config = tf.LlavaNextConfig(text_config={**text, "model_type": "llama"},
                                vision_config={**_vision(), "model_type": "clip_vision_model", "projection_dim": 32},
                                image_token_id=90, image_grid_pinpoints=[[28, 56], [56, 28], [56, 56]])
    model = tf.LlavaNextForConditionalGeneration(config).eval()
    return _anyres_case(model, config.image_grid_pinpoints, image_size, image_seed)


def _anyres_case(model: Any, pinpoints: list[list[int]], image_size: tuple[int, int], image_seed: int) -> Case:
    """The case of an any-resolution model (28 px tiles): one image of ``image_size`` as its
    processor tiles it, as many placeholders as the model's own features have rows."""
    from transformers.models.llava_next.modeling_llava_next import image_size_to_num_patches

    tiles = image_size_to_num_patches(list(image_size), pinpoints, 28)
    pixels = _pixels((1, tiles, 3, 28, 28), image_seed)
    sizes = torch.tensor([list(image_size)])
    with torch.no_grad():
        rows = sum(f.shape[0] for f in model.get_image_features(pixels, image_sizes=sizes).pooler_output)
    return Case(model, torch.tensor([[2, 5, *[90] * rows, 7, 8]]), torch.tensor([[2, 5, 7, 8, 11]]), (pixels,),
                {"pixel_values": pixels, "image_sizes": sizes}, feature_kwargs={"image_sizes": sizes})


def llava_onevision(seed: int = 0, image_seed: int = 5, image_size: tuple[int, int] = (28, 28)) -> Case:
    """LLaVA-OneVision: LLaVA-NeXT's tiling on a SigLIP tower (28 px tiles, 7 px patches,
    every patch state of the last layer), pinpoints of 1 to 4 tiles a side (a grid beyond
    ``anyres_max_9``'s budget is downsampled: such a size is refused), a Qwen2 decoder.
    28 x 28 (the first pinpoint, the export's default): 2 tiles, 16 + 4 x (4 + 1) = 36
    image tokens."""
    import transformers as tf

    torch.manual_seed(seed)
    text = {k: v for k, v in TEXT.items() if k != "head_dim"}
    pinpoints = [[28 * a, 28 * b] for a in range(1, 5) for b in range(1, 5)]
    config = tf.LlavaOnevisionConfig(text_config={**text, "model_type": "qwen2"},
                                     vision_config={**_vision(), "model_type": "siglip_vision_model"},
                                     image_token_id=90, image_grid_pinpoints=pinpoints)
    model = tf.LlavaOnevisionForConditionalGeneration(config).eval()
    return _anyres_case(model, pinpoints, image_size, image_seed)


def internvl(seed: int = 0, image_seed: int = 5) -> Case:
    """InternVL: an InternViT tower (28 px tiles, 7 px patches: 16 patches and a class token),
    the patch states pixel-shuffled by 0.5 into 4 rows of 4x the width, an MLP projector,
    a Qwen2 decoder; ``image_seq_length`` 4 placeholders per tile, between ``<img>`` (91)
    and ``</img>`` (92) as the processor writes them."""
    import transformers as tf

    torch.manual_seed(seed)
    text = {k: v for k, v in TEXT.items() if k != "head_dim"}
    config = tf.InternVLConfig(text_config={**text, "model_type": "qwen2"}, vision_config=_vision(),
                               image_token_id=90, image_seq_length=4, downsample_ratio=0.5)
    model = tf.InternVLForConditionalGeneration(config).eval()
    pixels = _pixels((1, 3, 28, 28), image_seed)
    return Case(model, torch.tensor([[2, 5, 91, *[90] * 4, 92, 7, 8]]), torch.tensor([[2, 5, 7, 8, 11]]), (pixels,),
                {"pixel_values": pixels})


def aya_vision(seed: int = 0, image_seed: int = 5) -> Case:
    """Aya Vision: a SigLIP tower (28 px tiles, 7 px patches: 16 patches, every patch state
    of the last layer), pixel-shuffled by 2 into 4 rows of 4x the width, a SwiGLU projector,
    a Cohere 2 decoder (a sliding layer of window 4 and a full one); 4 placeholders a tile."""
    import transformers as tf

    torch.manual_seed(seed)
    text = {k: v for k, v in TEXT.items() if k != "head_dim"}
    config = tf.AyaVisionConfig(text_config={**text, "model_type": "cohere2", "sliding_window": 4,
                                             "layer_types": ["sliding_attention", "full_attention"]},
                                vision_config={**_vision(), "model_type": "siglip_vision_model"},
                                image_token_id=90, downsample_factor=2)
    model = tf.AyaVisionForConditionalGeneration(config).eval()
    pixels = _pixels((1, 3, 28, 28), image_seed)
    return Case(model, torch.tensor([[2, 5, *[90] * 4, 7, 8]]), torch.tensor([[2, 5, 7, 8, 11]]), (pixels,),
                {"pixel_values": pixels})


def qwen2_vl(seed: int = 0, image_seed: int = 5) -> Case:
    """Qwen2-VL: an image of 4 x 4 patches of 56 px (the export's default grid, 224 px a
    side: no attention windows, every patch attends every other), merged by 2 into 4 image
    tokens; 3-D rotary positions in the decoder."""
    import transformers as tf

    torch.manual_seed(seed)
    text = {k: v for k, v in TEXT.items() if k != "head_dim"}
    config = tf.Qwen2VLConfig(
        text_config={**text, "rope_parameters": {"rope_type": "default", "mrope_section": [2, 3, 3],
                                                 "rope_theta": 10000.0}},
        vision_config=dict(depth=2, embed_dim=32, hidden_size=64, mlp_ratio=2, num_heads=2, patch_size=56,
                           spatial_merge_size=2, temporal_patch_size=2),
        image_token_id=90, vision_start_token_id=91, vision_end_token_id=92, video_token_id=93)
    model = tf.Qwen2VLForConditionalGeneration(config).eval()
    pixels = _pixels((16, 3 * 2 * 56 * 56), image_seed)
    grid = torch.tensor([[1, 4, 4]])
    return Case(model, torch.tensor([[2, 5, 91, *[90] * 4, 92, 7, 8]]), torch.tensor([[2, 5, 7, 8, 11]]), (pixels,),
                {"pixel_values": pixels, "image_grid_thw": grid, "mm_token_type_ids": lambda p: (p == 90).int()},
                feature_kwargs={"image_grid_thw": grid})


def audio_rows(frames: int) -> int:
    """The placeholders Qwen2-Audio's processor writes for a clip of ``frames`` real frames."""
    return (((frames - 1) // 2 + 1) - 2) // 2 + 1


def clips(frames: list[int], seed: int = 5, mel: int = 16, length: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    """Clips as Qwen2-Audio's processor pads them: ``input_features`` ``[CLIPS, mel, length]``
    and ``feature_attention_mask`` ``[CLIPS, length]`` (int32), 1 over each clip's real frames."""
    features = _pixels((len(frames), mel, length), seed)
    mask = (torch.arange(length)[None, :] < torch.tensor(frames)[:, None]).to(torch.int32)
    return features, mask


def qwen2_audio(seed: int = 0, clip_seed: int = 5) -> Case:
    """Qwen2-Audio: a Whisper-like tower (16 mel bins, 32 frames: the tiny model's 30 s,
    strided to 16 positions, their attention masked beyond the clip's real frames, pooled
    by 2) and a linear projector, a Qwen2 decoder; a clip of 20 real frames gives 5 audio
    tokens (between ``<|audio_bos|>`` 91 and ``<|audio_eos|>`` 92)."""
    import transformers as tf

    torch.manual_seed(seed)
    text = {k: v for k, v in TEXT.items() if k != "head_dim"}
    audio = dict(d_model=32, encoder_ffn_dim=64, encoder_layers=1, encoder_attention_heads=2, num_mel_bins=16,
                 max_source_positions=16)
    config = tf.Qwen2AudioConfig(text_config={**text, "model_type": "qwen2"}, audio_config=audio,
                                 audio_token_index=90)
    model = tf.Qwen2AudioForConditionalGeneration(config).eval()
    features, mask = clips([20], clip_seed)
    prompt = torch.tensor([[2, 5, 91, *[90] * audio_rows(20), 92, 7, 8]])
    return Case(model, prompt, torch.tensor([[2, 5, 7, 8, 11]]), (features, mask),
                {"input_features": features, "feature_attention_mask": mask}, modality="audio")


def decoder_rows(model: Any, inputs: dict[str, torch.Tensor], placeholder: int) -> torch.Tensor:
    """``[N, hidden]``: the rows the model's own forward writes at the ``placeholder`` tokens
    of ``inputs`` (its public forward, the embeddings read as its text model receives them):
    what an encoder artifact must give, for a model without ``get_<modality>_features``."""
    seen: list[torch.Tensor] = []

    def keep(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        seen.append(kwargs["inputs_embeds"])

    handle = model.model.language_model.register_forward_pre_hook(keep, with_kwargs=True)
    try:
        with torch.no_grad():
            model(**inputs, use_cache=False)
    finally:
        handle.remove()
    return seen[0][inputs["input_ids"] == placeholder]


CASES = {"qwen3_vl": qwen3_vl, "voxtral": voxtral, "qwen2_5_vl": qwen2_5_vl, "mistral3": mistral3, "gemma3": gemma3, "idefics3": idefics3, "smolvlm": lambda: idefics3(smolvlm=True), "llava": llava,
         "paligemma": paligemma, "paligemma2": lambda: paligemma(version=2),
         "llava_next": llava_next, "llava_onevision": llava_onevision, "internvl": internvl,
         "qwen2_audio": qwen2_audio, "aya_vision": aya_vision, "qwen2_vl": qwen2_vl}
