"""Tiny random models of any transformers configuration, and inputs their forward takes
(what ``tools.zoo_sweep`` builds; nothing here knows a model type by name).

A configuration's defaults are a released model. ``tiny_config(cls, "tiny")`` shrinks its
widths, depths, head counts, vocabulary and image size, and per-stage lists (a vision
backbone's ``depths``, ``hidden_sizes``); ``"scalar"`` shrinks only the scalar fields (for
configurations whose lists must agree with each other); ``"defaults"`` keeps them all.
Sub-configurations (``text_config``, ``vision_config``, ``backbone_config``...) are shrunk
the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

VOCAB = 99

SCALARS: dict[str, int] = {
    "vocab_size": VOCAB, "hidden_size": 32, "d_model": 32, "n_embd": 32, "dim": 32, "embed_dim": 32,
    "intermediate_size": 64, "ffn_dim": 64, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "d_ff": 64,
    "n_inner": 64, "ffn_hidden_size": 64, "mlp_dim": 64,
    "num_hidden_layers": 2, "num_layers": 2, "n_layer": 2, "n_layers": 2, "encoder_layers": 1,
    "decoder_layers": 1, "num_encoder_layers": 1, "num_decoder_layers": 1,
    "num_attention_heads": 4, "n_head": 4, "n_heads": 4, "num_heads": 4, "encoder_attention_heads": 4,
    "decoder_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "d_kv": 8,
    "max_position_embeddings": 64, "n_positions": 64, "max_source_positions": 16, "max_target_positions": 64,
    "num_local_experts": 4, "num_experts": 4, "n_routed_experts": 4, "num_experts_per_tok": 2,
    "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32,
}
"""Scalar fields and the size a tiny model gives them (where its configuration has them)."""

IMAGE = {"image_size": 64, "patch_size": 8, "window_size": 2}
LAYER_LISTS = ("depths", "num_layers_per_stage", "stage_depths", "layers")
WIDTH_LISTS = ("hidden_sizes", "embed_dims", "dims", "widths", "channels", "hidden_dims", "embedding_dims")
HEAD_LISTS = ("num_heads", "num_attention_heads", "attention_heads", "heads")


def layer_count(defaults: dict[str, Any]) -> int | None:
    """The configuration's number of layers, under whichever name it has."""
    return next((defaults[k] for k in ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
                 if isinstance(defaults.get(k), int)), None)


def token_ids_within(defaults: dict[str, Any], vocab: int) -> dict[str, int]:
    """Special token ids moved inside a vocabulary of ``vocab`` (eos/bos 1, the others 0)."""
    return {key: 1 if key.startswith(("eos", "bos")) else 0 for key, value in defaults.items()
            if key.endswith("_token_id") and isinstance(value, int) and value >= vocab}


def per_layer_lists(defaults: dict[str, Any], layers: int | None, keep: int, taken: dict[str, Any]) -> dict[str, Any]:
    """Lists with one entry per layer (layer types, window sizes...) cut to ``keep`` layers."""
    return {key: value[:keep] for key, value in defaults.items()
            if isinstance(value, list) and layers and len(value) == layers and key not in taken
            and len(value) > keep}


def _shrink(defaults: dict[str, Any], how: str, sections_read: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The keyword arguments that shrink one configuration (not its sub-configurations);
    ``sections_read``: the rotary keys its model reads beyond the validated ones."""
    out: dict[str, Any] = {}
    if how == "defaults":
        return out
    layers = layer_count(defaults)
    for key, size in SCALARS.items():
        value = defaults.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > size:
            out[key] = size
    if "kv_lora_rank" in defaults or "q_lora_rank" in defaults:  # latent attention keeps its head sizes
        out.pop("head_dim", None)
    for key, size in IMAGE.items():
        value = defaults.get(key)
        if isinstance(value, int) and value > size:
            out[key] = size
    out.update(token_ids_within(defaults, VOCAB))
    out.update(per_layer_lists(defaults, layers, out.get("num_hidden_layers", layers or 2), out))
    if how == "tiny":
        out.update(_shrink_stages(defaults))
        for key, value in defaults.items():  # other widths the table does not name
            if key not in out and _is_width(key) and isinstance(value, int) and not isinstance(value, bool) \
                    and value > 128:
                out[key] = 64 if any(w in key for w in ("intermediate", "ffn", "inner", "mlp")) else 32
        head = out.get("head_dim", defaults.get("head_dim")) or _head_width(defaults, out)
        rope = defaults.get("rope_parameters")
        if isinstance(head, int):  # the rotated part of a head: all of it, or a fraction
            fraction = (rope or {}).get("partial_rotary_factor", defaults.get("partial_rotary_factor"))
            head = int(head * fraction) if isinstance(fraction, float) else head
        for key, value in defaults.items():  # rotary sections (text, height, width) within the head
            if isinstance(value, dict) and isinstance(value.get("mrope_section"), list) and isinstance(head, int):
                out[key] = {**value, "mrope_section": _sections(value["mrope_section"], head // 2)}
        if "mrope_section" in sections_read and isinstance(rope, dict) and "mrope_section" not in rope \
                and isinstance(head, int):  # the model's own default sections fit its released head
            out["rope_parameters"] = {**rope, "mrope_section": _sections([2, 3, 3], head // 2)}
    return out


def _head_width(defaults: dict[str, Any], out: dict[str, Any]) -> int | None:
    """The width of one attention head when the configuration derives it (hidden size over
    heads) instead of setting ``head_dim``."""
    width = out.get("hidden_size", defaults.get("hidden_size"))
    heads = out.get("num_attention_heads", defaults.get("num_attention_heads"))
    return width // heads if isinstance(width, int) and isinstance(heads, int) and heads else None


_WIDTH_WORDS = ("dim", "hidden", "channels", "intermediate", "ffn", "embed", "width", "inner")
_NOT_WIDTHS = ("image", "patch", "position", "max_", "window", "sample", "rate", "length", "token", "ratio",
               "mel", "feature_size", "num_", "bins", "codebook", "kernel", "stride", "groups")


def _is_width(key: str) -> bool:
    return any(w in key for w in _WIDTH_WORDS) and not any(w in key for w in _NOT_WIDTHS)


def _sections(sections: list[int], total: int) -> list[int]:
    """``sections`` scaled to sum to ``total`` (each at least 1 while it can be)."""
    whole = sum(sections) or 1
    out = [max(1, s * total // whole) for s in sections]
    out[0] += total - sum(out)
    return out


def _shrink_stages(defaults: dict[str, Any]) -> dict[str, Any]:
    """Per-stage lists of a backbone: one block per stage, widths divided alike (at least 8
    and a multiple of the stage's heads), heads at most 2."""
    out: dict[str, Any] = {}
    ints = {k: v for k, v in defaults.items()
            if isinstance(v, (list, tuple)) and v and all(isinstance(i, int) and not isinstance(i, bool) for i in v)}
    for key in LAYER_LISTS:
        if key in ints:
            out[key] = [min(1, i) if i else 0 for i in ints[key]]
    heads = next((ints[k] for k in HEAD_LISTS if k in ints), None)
    if heads is not None:
        key = next(k for k in HEAD_LISTS if k in ints)
        heads = [min(i, 2) for i in heads]
        out[key] = heads
    for key in WIDTH_LISTS:
        if key in ints:
            top = max(ints[key]) or 1
            factor = max(1, top // 64)
            out[key] = [max(8, (i // factor) // 8 * 8) for i in ints[key]]
    return out


def tiny_config(config_cls: Any, how: str) -> Any:
    """A configuration of ``config_cls`` shrunk as ``how`` says (see the module's doc)."""
    from transformers import PretrainedConfig

    base = config_cls()
    kwargs = _shrink(base.to_dict(), how, _rope_keys_read(base))
    for key, value in vars(base).items():  # sub-configurations, shrunk alike
        if isinstance(value, PretrainedConfig):
            sub = value.to_dict()
            kwargs[key] = type(value)(**{**sub, **_shrink(sub, how, _rope_keys_read(value))})
    return config_cls(**kwargs)


def _rope_keys_read(config: Any) -> frozenset[str]:
    """Rotary keys the configuration declares its model reads (``mrope_section``...)."""
    return frozenset(getattr(config, "ignore_keys_at_rope_validation", None) or ())


def _size(value: Any, fallback: int) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], int):
        return int(value[0])
    return fallback


def _find(config: Any, *names: str, default: Any = None) -> Any:
    """The first of ``names`` the configuration (or one of its sub-configurations) sets."""
    for name in names:
        value = getattr(config, name, None)
        if value is not None:
            return value
    for sub in vars(config).values():
        if hasattr(sub, "to_dict") and sub is not config:
            found = _find(sub, *names)
            if found is not None:
                return found
    return default


def _image_size(config: Any) -> int:
    vision = getattr(config, "vision_config", None) or config
    return _size(_find(vision, "image_size", "img_size", "input_size", default=64), 64)


def _pool(model: Any, config: Any) -> dict[str, Any]:
    """One example tensor for each input name the sweep knows, sized from the configuration."""
    g = torch.Generator().manual_seed(1)
    vocab = _find(config, "vocab_size", default=VOCAB)
    ids = torch.randint(3, min(int(vocab), VOCAB), (2, 7), generator=g)
    mask = torch.ones(2, 7, dtype=torch.long)
    mask[1, 5:] = 0
    channels = _size(_find(config, "num_channels", "in_channels", default=3), 3)
    size = _image_size(config)
    bins = _size(_find(config, "num_mel_bins", "feature_size", "input_feat_per_channel",
                       "feature_projection_input_dim", default=80), 80)
    frames = 2 * _size(_find(config, "max_source_positions", default=16), 16)
    corners = torch.sort(torch.randint(0, 1000, (2, 7, 2, 2), generator=g), dim=2).values
    return {
        "input_ids": ids, "attention_mask": mask, "decoder_input_ids": ids[:, :4],
        "pixel_values": torch.randn(1, channels, size, size, generator=g),
        "pixel_values_videos": torch.randn(1, 2, channels, size, size, generator=g),
        "input_values": torch.randn(1, 1600, generator=g),
        "input_features": torch.randn(1, bins, frames, generator=g),
        "bbox": corners.transpose(2, 3).reshape(2, 7, 4),
    }


def inputs_for(model: Any, config: Any) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Candidate example inputs for ``model``, the likeliest first: its main input with the
    inputs its forward requires, then with the optional ones the sweep knows (a
    dual-encoder's images beside its text), then the main input in other layouts."""
    import inspect

    pool = _pool(model, config)
    main = getattr(model, "main_input_name", "input_ids")
    params = inspect.signature(model.forward).parameters
    required = [n for n, p in params.items() if p.default is inspect.Parameter.empty
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if main not in params:  # a class that keeps its base's main input name: its forward's first input
        main = next(iter(params), main)
    if main not in pool:
        return
    batch = pool[main].shape[0]

    def fit(name: str) -> Any:  # the text's batch when the main input is an image, and back
        t = pool[name]
        return t[:batch] if t.shape[0] > batch else t.expand(batch, *t.shape[1:]) if t.shape[0] < batch else t

    known = [n for n in required if n in pool and n != main]
    optional = [n for n in ("attention_mask", "pixel_values", "decoder_input_ids", "input_ids", "bbox",
                            "input_features", "input_values")
                if n in params and n not in known and n != main]
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in optional:
        known.append("decoder_input_ids")
    base = {n: fit(n) for n in known}
    yield (pool[main],), base
    for n in optional:
        base = {**base, n: fit(n)}
        yield (pool[main],), base
    if "use_cache" in params:  # hybrid decoders whose tiny layer list holds no attention layer
        yield (pool[main],), {n: fit(n) for n in known} | {"use_cache": False}
    if main == "pixel_values":
        for size in (64, 224):
            yield (torch.randn(1, pool[main].shape[1], size, size),), {}
    elif main == "input_values":
        for shape in ((1, 1, 1600), (1, 2, 1600)):
            yield (torch.randn(*shape),), {}
    elif main == "input_features":
        bins, frames = pool[main].shape[1:]
        for shape in ((1, 20, bins), (1, frames, bins)):
            yield (torch.randn(*shape),), {k: v for k, v in base.items() if k == "decoder_input_ids"}
