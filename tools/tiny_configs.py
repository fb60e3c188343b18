"""Tiny random models of any transformers configuration, and inputs their forward takes
(what ``tools.zoo_sweep`` builds; nothing here knows a model type by name).

A configuration's defaults are a released model. ``tiny_config(cls, "tiny")`` shrinks its
widths, depths, head counts, vocabulary and image size, and per-stage lists (a vision
backbone's ``depths``, ``hidden_sizes``); ``"scalar"`` shrinks only the scalar fields (for
configurations whose lists must agree with each other); ``"defaults"`` keeps them all.
Sub-configurations (``text_config``, ``vision_config``, ``backbone_config``...) are shrunk
the same way. ``"fitted"``, the fallback when those three fail, shrinks as ``"tiny"`` at
every depth of sub-configurations, then restores what the configuration's fields must
keep agreeing on (:func:`_fit`).
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
    if how == "fitted":
        return _fitted(base, top=True)
    kwargs = _shrink(base.to_dict(), how, _rope_keys_read(base))
    for key, value in vars(base).items():  # sub-configurations, shrunk alike
        if isinstance(value, PretrainedConfig):
            sub = value.to_dict()
            kwargs[key] = type(value)(**{**sub, **_shrink(sub, how, _rope_keys_read(value))})
    return config_cls(**kwargs)


def _fitted(config: Any, top: bool) -> Any:
    """``config`` shrunk as ``"tiny"`` and fitted, its sub-configurations at every depth
    alike (a sub-configuration's own ``text_config`` keeps a released size otherwise)."""
    from transformers import PretrainedConfig

    defaults = config.to_dict()
    kwargs = _fit(defaults, _shrink(defaults, "tiny", _rope_keys_read(config)))
    for key, value in vars(config).items():
        if isinstance(value, PretrainedConfig):
            kwargs[key] = _fitted(value, top=False)
    return type(config)(**(kwargs if top else {**defaults, **kwargs}))


def _fit(defaults: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """``out`` (tiny's shrinking of ``defaults``) with the agreements between fields that
    shrinking each field alone breaks, and that configurations' validators or models
    require, restored rule by rule."""
    rules = (_vocabularies, _ranks, _widths_of_lists_kept, _pixel_windows_kept, _experts_chosen,  # sizes
             _full_heads, _head_width_set, _sums_kept, _expanded_heads, _rotated_width, _groups_follow_width,  # heads
             _no_shared_layers, _per_layer_overrides_dropped, _context_within_positions,  # layers...
             _feature_layers_from_end, _layers_for_outputs, _layer_kinds_kept, _layers_for_stages)  # ...and their count
    for rule in rules:
        out.update(rule(defaults, out))
    return out


def _get(defaults: dict[str, Any], out: dict[str, Any], key: str) -> Any:
    return out.get(key, defaults.get(key))


def _vocabularies(defaults: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """Every vocabulary (per-layer embeddings, hashed n-gram tables) as small as the main one."""
    return {k: VOCAB for k, v in defaults.items() if (k.startswith("vocab_size") or k.endswith("_vocab"))
            and isinstance(v, int) and not isinstance(v, bool) and v > VOCAB}


def _experts_chosen(defaults: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """Two experts per token where the configuration leaves it None or tiny's table misses
    its name (``num_experts_per_token``), and expert groups (chosen before experts) in one
    group."""
    fixed: dict[str, Any] = {}
    for key in (k for k in defaults if "experts_per_tok" in k and k not in out):  # under any spelling
        value = defaults[key]
        if value is None or (isinstance(value, int) and value > 2):
            fixed[key] = 2
    for key in ("n_group", "topk_group"):
        if isinstance(defaults.get(key), int) and defaults[key] > 1:
            fixed[key] = 1
    return fixed


def _full_heads(defaults: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """As many key/value heads as query heads: latent attention (whose keys have every
    head) and several validators refuse grouped queries."""
    heads = _get(defaults, out, "num_attention_heads")
    shrunk_or_unset = "num_key_value_heads" in out or ("num_key_value_heads" in defaults and defaults["num_key_value_heads"] is None)
    return {"num_key_value_heads": heads} if shrunk_or_unset and isinstance(heads, int) else {}


def _widths_of_lists_kept(defaults: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """A width that equals the last of a list of widths tiny keeps (a backbone's output
    channels) keeps its released value: validators require them equal."""
    lasts = {v[-1] for k, v in defaults.items() if k not in out and isinstance(v, list) and v
             and all(isinstance(i, int) and not isinstance(i, bool) for i in v)}
    return {k: defaults[k] for k in out if _is_width(k) and isinstance(defaults.get(k), int) and defaults[k] in lasts}


def _pixel_windows_kept(defaults: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """An attention window counted in pixels (a multiple of the patch size) keeps its
    released size: shrunk below a patch it holds no patch."""
    window, patch = defaults.get("window_size"), defaults.get("patch_size")
    if "window_size" in out and isinstance(window, int) and isinstance(patch, int) and patch > 1 \
            and window % patch == 0:
        return {"window_size": window}
    return {}


def _ranks(defaults: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """Low ranks (``q_lora_rank``...) as small as the widths: tiny's width rule misses them."""
    return {k: 32 for k, v in defaults.items() if k.endswith("_rank") and isinstance(v, int) and not isinstance(v, bool)
            and v > 128}


def _head_width_set(defaults: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """``head_dim`` from the width and heads where the configuration leaves it None but its
    attention reads it."""
    width = _head_width(defaults, out)
    return {"head_dim": width} if "head_dim" in defaults and defaults["head_dim"] is None and width else {}


def _sums_kept(defaults: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """A width the sum of two others (a query head: its rotated part and the rest) stays
    their sum."""
    dims = {k: v for k, v in defaults.items() if "dim" in k and isinstance(v, int) and not isinstance(v, bool) and v}
    fixed = {}
    for key in out.keys() & dims.keys():
        parts = [(a, b) for a in dims for b in dims if a < b and key not in (a, b) and dims[a] + dims[b] == dims[key]]
        if parts:
            a, b = parts[0]
            fixed[key] = _get(defaults, out, a) + _get(defaults, out, b)
    return fixed


EXPANDED_HEADS = (("mamba_n_heads", "mamba_d_head", "mamba_expand", "mamba_n_groups"),
                  ("num_heads", "head_dim", "expand", "n_groups"))
"""State-space heads, their width, the expansion (heads times width is the hidden size
times the expansion) and the groups of heads."""


def _expanded_heads(defaults: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """State-space heads that still cover the expanded hidden size (width kept, fewer heads)."""
    for heads, width, expand, groups in EXPANDED_HEADS:
        values = [defaults.get(k) for k in (heads, width, expand, "hidden_size")]
        if all(isinstance(v, int) for v in values) and values[0] * values[1] == values[2] * values[3]:
            inner = values[2] * _get(defaults, out, "hidden_size")
            count = max(1, inner // values[1])
            return {heads: count, width: inner // count, **({groups: 1} if groups in defaults else {})}
    return {}


def _groups_follow_width(defaults: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """Groups of a convolution that equal the hidden size (one channel per group) keep
    equal to it."""
    width = defaults.get("hidden_size")
    return {k: _get(defaults, out, "hidden_size") for k, v in defaults.items()
            if k.endswith("groups") and isinstance(v, int) and not isinstance(v, bool) and v == width and v > 1}


def _rotated_width(defaults: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """Heads wide enough that a partial rotation still turns a multiple of 4 dimensions
    (rotary sections need pairs on each axis)."""
    head = out.get("head_dim")
    rope = defaults.get("rope_parameters") or {}
    fractions = [r.get("partial_rotary_factor") for r in (rope, *rope.values()) if isinstance(r, dict)]
    fractions = [f for f in [*fractions, defaults.get("partial_rotary_factor")] if isinstance(f, float) and f]
    if not isinstance(head, int) or not fractions or all((head * f) % 4 == 0 for f in fractions):
        return {}
    return {"head_dim": int(round(4 / min(fractions)))}


def _feature_layers_from_end(defaults: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """Layers whose features a model reads (``vision_feature_layer``) counted from the end:
    the released indices name layers the tiny tower does not have."""
    fixed: dict[str, Any] = {}
    for key, value in defaults.items():
        if "feature_layer" in key and isinstance(value, list) and value and all(isinstance(i, int) for i in value) \
                and min(value) >= 0:
            order = sorted(value, reverse=True)
            fixed[key] = [-1 - order.index(i) for i in value]
    return fixed


def _no_shared_layers(defaults: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """No layer reuses another's cache: the released count of sharing layers is most of
    the tiny model, left without the layers it would share from."""
    return {k: 0 for k, v in defaults.items() if k.endswith("shared_layers") and isinstance(v, int) and v > 0}


def _per_layer_overrides_dropped(defaults: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """No per-layer overrides: they name released layer indices and released sizes."""
    return {"per_layer_config": {}} if defaults.get("per_layer_config") else {}


def _context_within_positions(defaults: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """Enough positions for the attention context a configuration declares."""
    contexts = [v for k, v in defaults.items() if k.endswith("context_size") and isinstance(v, int)]
    positions = out.get("max_position_embeddings")
    return {"max_position_embeddings": max(contexts)} if contexts and positions and max(contexts) > positions else {}


def _layers_for_outputs(defaults: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """As many layers as a backbone's outputs name (``out_indices``, ``stageN``)."""
    named = [int(f[5:]) for f in defaults.get("out_features") or () if isinstance(f, str) and f[5:].isdigit()]
    named += [i for i in defaults.get("out_indices") or () if isinstance(i, int)]
    return _relayered(defaults, out, max(named, default=0))


def _layer_kinds_kept(defaults: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """As many layers as it takes for each kind of layer (attention beside linear
    attention...) to stay."""
    layers = layer_count(defaults)
    kinds = {k: v for k, v in defaults.items() if isinstance(v, list) and v and all(isinstance(i, str) for i in v)
             and (len(v) == layers or (not layers and k.endswith(("layer_types", "block_type"))))}
    keep = {k: 1 + max(v.index(i) for i in set(v)) for k, v in kinds.items()}
    if not layers:  # the list alone counts the layers: cut it there
        return {k: kinds[k][:n] for k, n in keep.items() if n < len(kinds[k])}
    return _relayered(defaults, out, max(keep.values(), default=0))


def _layers_for_stages(defaults: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """As many layers as a per-stage list (``depths``, ``hidden_sizes``) has entries, where
    the configuration counts one stage per layer."""
    layers = layer_count(defaults)
    stages = [k for k in (*LAYER_LISTS, *WIDTH_LISTS) if isinstance(defaults.get(k), list) and len(defaults[k]) == layers]
    return _relayered(defaults, out, layers or 0) if stages else {}


def _relayered(defaults: dict[str, Any], out: dict[str, Any], keep: int) -> dict[str, Any]:
    """Layer counts set to ``keep`` and per-layer lists cut there, when tiny kept fewer."""
    layers = layer_count(defaults)
    if not layers or keep <= (layer_count(out) or layers):
        return {}
    counts = {k: keep for k in ("num_hidden_layers", "n_layer", "num_layers", "n_layers") if k in out}
    return {**counts, **{k: v[:keep] for k, v in defaults.items()  # the lists tiny cut, not those it shrank
                         if isinstance(v, list) and len(v) == layers and len(out.get(k, v)) < layers}}


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
    dual-encoder's images beside its text), then the main input in other layouts, then
    an image cut into patches with its grid (:func:`_patch_candidates`)."""
    import inspect

    params = inspect.signature(model.forward).parameters
    yield from _pool_candidates(model, config, params)
    yield from _patch_candidates(config, params)
    yield from _feature_candidates(model, config, params)
    if getattr(model, "main_input_name", "") == "pixel_values" and next(iter(params), "") == "pixel_values":
        for size in dict.fromkeys((_image_size(config), 64)):  # a pair of images, for matchers
            yield (torch.randn(1, 2, 3, size, size, generator=torch.Generator().manual_seed(1)),), {}


def _pool_candidates(model: Any, config: Any, params: Any) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    """The candidates of :func:`inputs_for` made from the pool of known inputs."""
    import inspect

    pool = _pool(model, config)
    main = getattr(model, "main_input_name", "input_ids")
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


GRID = 6
"""Patches along each side of the image :func:`_patch_candidates` makes (2 and 3 divide it:
the merges and poolings of patches)."""


def _patch_grid(name: str) -> Any:
    """The tensor a vision tower's forward takes as ``name`` beside a 1 x GRID x GRID image
    of patches (None for a name it does not know)."""
    rows, cols = torch.meshgrid(torch.arange(GRID), torch.arange(GRID), indexing="ij")
    if name.endswith("grid_thw"):
        return torch.tensor([[1, GRID, GRID]])
    if name == "spatial_shapes":
        return torch.tensor([[GRID, GRID]])
    if name == "merge_sizes":
        return torch.tensor([2])
    if name == "pixel_attention_mask":
        return torch.ones(1, GRID * GRID, dtype=torch.long)
    if name == "pixel_position_ids":
        return torch.stack([cols, rows], -1).reshape(1, GRID * GRID, 2)
    return None


def _patch_candidates(config: Any, params: Any) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    """An image already cut into flattened patches, with its grid, for the vision towers
    whose forward requires one (``grid_thw``, ``spatial_shapes``, ``pixel_position_ids``):
    a patch's width is channels x frames x patch size squared, frames 1 or the
    configuration's ``temporal_patch_size``; the patches flat, in a batch of one (first when
    no ``grid_thw`` says the tower takes them flat), as small images or as pixels
    (channels last)."""
    import inspect

    names = [n for n, p in params.items() if p.default is inspect.Parameter.empty and p.kind not in
             (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    grids = {n: _patch_grid(n) for n in names[1:]}
    if not names or not grids or any(v is None for v in grids.values()):
        return
    patch = _size(_find(config, "patch_size", default=14), 14)
    channels = _size(_find(config, "num_channels", "in_channels", default=3), 3)
    g = torch.Generator().manual_seed(1)
    for frames in dict.fromkeys((1, _size(_find(config, "temporal_patch_size", default=1), 1), 2)):
        flat = torch.randn(GRID * GRID, channels * frames * patch * patch, generator=g)
        layouts = [flat, flat[None]] if any(n.endswith("grid_thw") for n in grids) else [flat[None], flat]
        images = (flat.reshape(GRID * GRID, channels * frames, patch, patch), flat.reshape(-1, channels))
        for patches in (*layouts, *images):
            yield (patches,), grids


MEL_BINS = 128
"""The mel bins of the audio encoders whose configuration does not say (they hard-code them)."""


def _feature_candidates(model: Any, config: Any, params: Any) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Audio features as (batch, frames, bins) with ``MEL_BINS`` bins, the pool's features
    both ways, then (batch, bins, frames), with the masks the forward requires
    (``input_features_mask``: every frame valid), for encoders the earlier candidates
    miss; frames fill whole attention windows where the configuration has ``n_window``."""
    import inspect

    main = next(iter(params), "")
    if main != "input_features" or getattr(model, "main_input_name", main) != main:
        return
    masks = [n for n, p in params.items() if p.default is inspect.Parameter.empty and n.endswith("mask")]
    pool = _pool(model, config)["input_features"]
    g = torch.Generator().manual_seed(1)
    frames = 2 * _size(_find(config, "n_window", default=16), 16)  # whole attention windows
    for features in (torch.randn(1, frames, MEL_BINS, generator=g), pool, pool.transpose(1, 2),
                     torch.randn(1, MEL_BINS, frames, generator=g)):
        for length in dict.fromkeys((features.shape[1], features.shape[2])):  # the mask along either axis
            yield (features,), {n: torch.ones(1, length, dtype=torch.long) for n in masks}
