"""Every model class of diffusers, through both frontends into tract.

``python -m tools.diffusers_sweep sweep [CLASS ...] [--timeout S] [--resume]``: for every
model class diffusers exports (a ``ModelMixin`` that is not a wrapper of other models)
that the hand-written zoo (``tests/zoo/diffusers_models.py``) does not build, or those
named, make a tiny random model from its ``__init__``'s defaults (shrunk by name-based
rules, nothing chosen per class), example inputs from its ``forward``'s parameter names,
and compile it with ``t2n.compile`` for tract with each frontend, checked in tract against
the model's own forward (``artifact.check()``). Child processes take the classes in turn;
the outcomes go to ``tools/diffusers_sweep.json``.

``python -m tools.diffusers_sweep doc [--check]``: write the sweep's table into
docs/diffusers_sweep.md (between its ``sweep-table`` markers); ``--check`` exits 1 when
the page differs.

The statuses are those of ``tools.zoo_sweep``: ``exact``, ``refused``, ``FAILED`` and
``not built`` (no model and inputs PyTorch runs: that says nothing about t2n).
"""

from __future__ import annotations

import inspect
import itertools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tools.sweeps import (
    MAX_PARAMETERS,
    NotBuilt,
    compile_with_each_frontend,
    first_that_runs,
    load,
    not_built,
    perturb,
    recorder,
    settled,
    short,
)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "tools" / "diffusers_sweep.json"
DOC = ROOT / "docs" / "diffusers_sweep.md"
BEGIN, END = "<!-- sweep-table: begin -->", "<!-- sweep-table: end -->"
WRAPPERS = ("ModelMixin", "AutoModel")
"""Exported ``ModelMixin`` classes that are no model of their own."""

HOW = ("tiny", "tinier", "small", "defaults")
"""How far a config is shrunk, the most first (``tinier`` only when the ``tiny`` model is
too big, its widths widened by a multiplier list as a VAE's base width, or does not
construct, a head size larger than its narrowest width)."""
TOPS = {"tiny": (64, 8, 16), "tinier": (16, 8, 8), "small": (256, 32, 32)}
"""Per shrinking: the largest width, the multiple widths are kept to, the largest head size."""
TEXT = 8
"""Tokens of the text embeddings given to a model."""


def model_classes() -> list[str]:
    """Every model class diffusers exports, but for wrappers that only hold other models."""
    import diffusers

    names = []
    for name in sorted(dir(diffusers)):
        cls = getattr(diffusers, name, None)
        if inspect.isclass(cls) and issubclass(cls, diffusers.ModelMixin) and not _wrapper(name, cls):
            names.append(name)
    return names


def _wrapper(name: str, cls: Any) -> bool:
    """Base classes, and multi-model wrappers (their ``__init__`` takes a list of models)."""
    params = inspect.signature(cls.__init__).parameters
    return name in WRAPPERS or any(p in params for p in ("controlnets", "adapters"))


def hand_zoo_classes() -> set[str]:
    from tests.zoo.diffusers_models import DIFFUSERS

    return {entry.model for entry in DIFFUSERS}


# --- tiny configurations, from __init__'s defaults ------------------------------------------

_WIDTH_WORDS = ("channels", "dim", "hidden_size", "width", "features", "intermediate", "d_model", "d_ff",
                "n_embd", "n_inner", "ch", "embed")
_INPUT_OUTPUT = ("in_channels", "out_channels", "input_channels", "output_channels", "io_channels",
                 "conditioning_channels", "audio_channels", "audio_in_channels", "audio_out_channels", "in_dim",
                 "out_dim", "input_dim", "output_dim", "input_dims")
"""Widths of a model's inputs and outputs: kept (the latents a VAE makes, an image's channels)."""
_NOT_WIDTHS = ("latent", "z_dim", "z_channels", "head", "axes", "rope", "patch", "sample", "kernel", "num_", "ratio",
               "mult", "scale", "max_", "len", "pos", "vocab", "codebook", "fsq", "n_fft", "mel",
               "hop", "rate", "stride", "frames", "seq", "theta", "eps", "groups", "cath", "channel_order",
               "acoustic", "chunk", "causal", "dims_", "channels_")
_SIZES = ("sample_size", "sample_height", "sample_width", "image_size", "resolution", "max_size",
          "base_height", "base_width", "input_size", "max_resolution")


def init_defaults(cls: Any) -> dict[str, Any]:
    """The keyword defaults of ``cls.__init__`` (what ``cls()`` builds)."""
    return {name: p.default for name, p in inspect.signature(cls.__init__).parameters.items()
            if p.default is not inspect.Parameter.empty and p.kind is p.POSITIONAL_OR_KEYWORD}


def required_sizes(cls: Any) -> dict[str, int]:
    """Sizes for ``__init__``'s arguments without defaults, when their names say what they
    are (a width 64, a count of layers 1, heads 2); the others stay missing."""
    out = {}
    for name, p in inspect.signature(cls.__init__).parameters.items():
        if p.default is not inspect.Parameter.empty or name == "self" or p.kind is not p.POSITIONAL_OR_KEYWORD:
            continue
        size = 1 if _is_count(name) else 2 if _is_heads(name) else 64 if _is_width(name) else None
        if size is not None:
            out[name] = size
    return out


UNSET = {"in_channels": 4, "patch_size": 2, "sample_size": 16, "num_kv_heads": 2}
"""Sizes ``None`` leaves to the caller (a transformer that takes latents when given their
channels), and what the sweep gives them when the class does not construct without."""


def unset_sizes(cls: Any, given: dict[str, Any]) -> dict[str, int]:
    """Sizes for the ``None`` defaults of UNSET, when ``cls`` does not construct with its
    defaults (``None`` may mean "none": a VAE without patches)."""
    defaults = init_defaults(cls)
    try:
        parameter_count(cls, given)
        return {}
    except Exception:
        return {name: size for name, size in UNSET.items() if name in defaults and defaults[name] is None}


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ints(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(_int(i) for i in value)


def _is_width(key: str) -> bool:
    return key not in _INPUT_OUTPUT and any(w in key for w in _WIDTH_WORDS) \
        and not any(w in key for w in _NOT_WIDTHS)


def _is_count(key: str) -> bool:
    """Numbers of layers or blocks (``num_layers``, ``layers_per_block``, ``depths``...)."""
    return any(w in key for w in ("layers", "depth", "blocks", "n_layer", "nlayers")) \
        and not any(w in key for w in ("types", "dim", "channels", "scale", "kernel", "mult"))


def _is_heads(key: str) -> bool:
    return "heads" in key and "dim" not in key or key in ("n_head", "num_kv_heads")


def _is_head_dim(key: str) -> bool:
    return key in ("head_dim", "d_kv", "dim_head") or key.endswith(("head_dim", "_dim_head", "dim_heads"))


def _power_of_two_below(value: int, cap: int) -> int:
    out = 1
    while out * 2 <= min(value, cap):
        out *= 2
    return out


def shrink(defaults: dict[str, Any], how: str) -> dict[str, Any]:
    """The keyword arguments that make a ``how`` model from ``__init__``'s ``defaults``:
    ``tiny`` (widths divided to at most 64, multiples of 8, norm groups at most 4, head
    sizes at most 16, sample sizes over 32 made 16), ``tinier`` (widths at most 16, head
    sizes at most 8), ``small`` (widths at most 256, multiples of 32, norm groups kept,
    sample sizes over 128 made 32), all with one layer per stack, at most 2 heads, 9
    frames and 8 text tokens; ``defaults`` keeps them."""
    if how == "defaults":
        return {}
    top, step, head_cap = TOPS[how]
    out: dict[str, Any] = {}
    out.update(_counts(defaults))
    out.update(_heads(defaults, head_cap))
    out.update(_widths(defaults, out, top, step))
    out.update(_rope_axes(defaults, out))
    for key, value in defaults.items():
        if _int(value) and key in _SIZES and value > top // 2:
            out[key] = 16 if how != "small" else 32
        elif _int(value) and "frames" in key and value > 9:
            out[key] = 9
        elif _int(value) and "len" in key and any(w in key for w in ("text", "txt", "caption")) and value > TEXT:
            out[key] = TEXT
        elif _int(value) and any(w in key for w in ("vocab_size", "codebook_size")) and value > 64:
            out[key] = 64
        elif _int(value) and "groups" in key and how != "small" and value > 4:
            out[key] = 4
    return out


def _counts(defaults: dict[str, Any]) -> dict[str, Any]:
    """One layer per stack; lists of layer indices (which layers get a control block) keep
    the first."""
    out: dict[str, Any] = {}
    for key, value in defaults.items():
        if not _is_count(key):
            continue
        if _int(value) and value > 1:
            out[key] = 1
        elif _ints(value):
            indices = len(value) > 1 and value[0] == 0 and list(value) == sorted(set(value))
            out[key] = type(value)([0] if indices else [min(i, 1) for i in value])
    return out


def _heads(defaults: dict[str, Any], head_cap: int) -> dict[str, Any]:
    """At most 2 heads; head sizes a power of two up to ``head_cap`` (so that they still
    divide widths that are multiples of 8)."""
    out: dict[str, Any] = {}
    for key, value in defaults.items():
        if _is_heads(key) and _int(value) and value > 2:
            out[key] = 2
        elif _is_heads(key) and _ints(value):
            out[key] = type(value)(min(i, 2) for i in value)
        elif _is_head_dim(key) and _int(value) and value > head_cap:
            out[key] = _power_of_two_below(value, head_cap)
        elif _is_head_dim(key) and _ints(value):
            out[key] = type(value)(_power_of_two_below(i, 8) for i in value)
    return out


def _inner(config: dict[str, Any]) -> int | None:
    """Heads times head size: the attention width, under its names in ``config``."""
    heads = next((config[k] for k in config if _is_heads(k) and _int(config[k])), None)
    size = next((config[k] for k in ("attention_head_dim", "head_dim") if _int(config.get(k))), None)
    return heads * size if heads and size else None


def _widths(defaults: dict[str, Any], taken: dict[str, Any], top: int, step: int) -> dict[str, Any]:
    """Every width divided by one factor (the largest becomes ``top``), in multiples of
    ``step``; a width equal to the attention width (heads times head size) becomes the new
    attention width, so that the layers still agree."""
    widths = {k: v for k, v in defaults.items()
              if k not in taken and _is_width(k) and (_int(v) and v > 0 or _ints(v) and min(v) > 0)}
    largest = max((max(v) if isinstance(v, (list, tuple)) else v for v in widths.values()), default=0)
    factor = max(1.0, largest / top)
    inner, new_inner = _inner(defaults), _inner({**defaults, **taken})

    def scaled(width: int) -> int:
        if inner and width == inner and new_inner:
            return new_inner
        return width if factor == 1 else max(step, round(width / factor / step) * step)

    return {k: type(v)(scaled(i) for i in v) if isinstance(v, (list, tuple)) else scaled(v)
            for k, v in widths.items()}


def _head_size(config: dict[str, Any]) -> int | None:
    """The size of one attention head: named, or the model's width over its heads."""
    named = next((config[k] for k in ("attention_head_dim", "head_dim") if _int(config.get(k))), None)
    if named:
        return named
    heads = next((config[k] for k in config if _is_heads(k) and _int(config[k])), None)
    width = next((config[k] for k in ("hidden_size", "dim", "model_dim", "d_model") if _int(config.get(k))), None)
    return width // heads if heads and width and width % heads == 0 else None


def _rope_axes(defaults: dict[str, Any], taken: dict[str, Any]) -> dict[str, Any]:
    """Rotary sections (one per axis) that fill the head: split the new head size alike,
    each even."""
    head, new_head = _head_size(defaults), _head_size({**defaults, **taken})
    out: dict[str, Any] = {}
    if not head or not new_head or head == new_head:
        return out
    for key, value in defaults.items():
        if _ints(value) and ("axes" in key or "rope" in key) and sum(value) == head:
            parts = [max(2, i * new_head // head // 2 * 2) for i in value]
            parts[-1] += new_head - sum(parts)
            if parts[-1] >= 2:
                out[key] = type(value)(parts)
    return out


# --- inputs, from forward's parameter names ---------------------------------------------------

TIMESTEPS = ("timestep", "timesteps", "t", "timestep_r", "r_timestep", "clean_timestep", "target_timestep",
             "audio_timestep", "sigma", "audio_sigma", "timestep_ratio", "decoder_noise_time", "timestep_img",
             "timestep_text")
TEXT_WIDTHS = ("caption_channels", "joint_attention_dim", "encoder_hid_dim", "text_embed_dim", "text_dim",
               "context_in_dim", "cap_feat_dim", "text_hidden_dim", "encoder_hidden_size", "cross_attention_input_dim", "text_in_dim", "in_text_dim", "txt_in_features", "cond_token_dim",
               "text_encoder_dim", "encoder_hidden_states_channels", "condition_dim", "clip_text_in_channels",
               "cross_attention_dim", "d_model", "hidden_size")
"""Where a config says how wide the text embeddings it takes are, the likeliest first (a
projection's input before the cross-attention width it projects to)."""
CHANNELS = ("in_channels", "latent_channels", "in_dim", "io_channels", "audio_channels", "input_channels",
            "num_channels", "channels", "z_dim", "latent_dim", "in_visual_dim", "input_dims")
MASKS = ("attention_mask", "encoder_attention_mask", "encoder_hidden_states_mask", "text_embedding_mask",
         "text_attention_mask", "encoder_mask")
VIDEO_WORDS = ("3D", "Video", "Temporal", "Motion")
"""Words of a class name that say it takes videos."""


def _first(config: dict[str, Any], names: tuple[str, ...], default: int) -> int:
    for name in names:
        value = config.get(name)
        if _int(value) and value > 0:
            return value
        if _ints(value):
            return value[0]
    return default


def main_inputs(cls_name: str, config: dict[str, Any]) -> Iterator[Any]:
    """Candidates for forward's first input, the likeliest layout first: latents of an
    image (or frames of a video, for a class named so), tokens, a waveform."""
    import torch

    g = torch.Generator().manual_seed(1)
    c = _first(config, CHANNELS, 4)
    images = [(1, c, s, s) for s in (16, 32, 64)]
    videos = [(1, c, f, s, s) for f in (2, 3, 1, 5, 9) for s in (16, 32)] + [(1, 2, c, 16, 16)]
    tokens = [(1, 16, c)]
    waves = [(1, c, n) for n in (32, 1024, 4096)]
    video_first = any(w in cls_name for w in VIDEO_WORDS) or "patch_size_t" in config \
        or any("temporal" in key or "frames" in key for key in config)
    for shape in (videos + images if video_first else images + videos) + tokens + waves:
        yield torch.randn(*shape, generator=g)


def _ids(main: Any, axes: int) -> Any:
    """Position ids of a 4 x 4 grid of image tokens (Flux-style: one row per token)."""
    import torch

    n = main.shape[1]
    side = int(n ** 0.5)
    grid = torch.stack(torch.meshgrid(torch.arange(float(side)), torch.arange(float(side)), indexing="ij"), -1)
    ids = torch.zeros(n, axes)
    ids[:, -2:] = grid.reshape(n, 2)
    return ids


def _grid(main: Any) -> tuple[int, int, int]:
    """Frames, height and width of the main input: a video's, an image's (one frame), or
    a square grid of tokens'."""
    if main.dim() == 5:
        return main.shape[2], main.shape[3], main.shape[4]
    if main.dim() == 4:
        return 1, main.shape[2], main.shape[3]
    side = int(main.shape[1] ** 0.5)
    return 1, side, side


def _is_text(name: str) -> bool:
    """Text embeddings, by their name (``encoder_hidden_states``, ``lyric_hidden_states``...)."""
    return name in ("encoder_hidden_states", "prompt_embeds", "text_hidden_states", "cap_feats", "context",
                    "clip_text") \
        or name.endswith("hidden_states") and any(w in name for w in ("text", "encoder", "lyric", "prompt", "caption"))


def _text_widths(config: dict[str, Any]) -> list[int]:
    """Each width the config gives text embeddings, the likeliest first (32 if none)."""
    widths = [v[0] if _ints(v) else v for k in TEXT_WIDTHS if (_int(v := config.get(k)) and v > 0 or _ints(v))]
    return list(dict.fromkeys(widths)) or [32]


def named_inputs(name: str, main: Any, config: dict[str, Any]) -> list[Any]:
    """Candidate values for one of forward's inputs, by its name (empty: unknown)."""
    import torch

    g = torch.Generator().manual_seed(2)
    text = _first(config, TEXT_WIDTHS, 32)
    if name in TIMESTEPS or name.endswith("_time") and "embed" not in name:
        return [torch.tensor([0.5])]
    if name == "encoder_hidden_states_t5":
        return [torch.randn(1, TEXT, _first(config, ("cross_attention_dim_t5",), text), generator=g)]
    if _is_text(name):
        return [torch.randn(1, TEXT, width, generator=g) for width in _text_widths(config)]
    if name in ("pooled_projections", "pooled_embeds", "clip_text_pooled"):
        return [torch.randn(1, _first(config, ("pooled_projection_dim", "clip_text_pooled_in_channels"), text),
                            generator=g)]
    if name.endswith("latents") or name in ("control_hidden_states", "condition_latents"):
        return [torch.randn(main.shape, generator=g)]
    if name in MASKS or name.endswith("_mask") and _is_text(name.removesuffix("_mask")):
        mask = torch.ones(1, TEXT, dtype=torch.long)
        mask[0, -2:] = 0
        return [mask, mask.bool()]
    if name in ("img_ids", "txt_ids") and main.dim() == 3:
        axes = len(next((v for k, v in config.items() if _ints(v) and ("axes" in k or "rope" in k)), (0, 0, 0)))
        return [_ids(main, axes) if name == "img_ids" else torch.zeros(TEXT, axes)]
    if name == "img_shapes" and main.dim() == 3:
        side = int(main.shape[1] ** 0.5)
        return [[(1, side, side)], [[(1, side, side)]]]
    if name == "guidance":
        return [torch.tensor([3.5])]
    if name in ("original_size", "target_size"):
        return [torch.tensor([[8.0 * main.shape[-1]] * 2])]
    if name == "crop_coords":
        return [torch.tensor([[0.0, 0.0]])]
    if name == "fps":
        return [torch.tensor([8])]
    if name in ("num_frames", "height", "width"):
        return [_grid(main)[("num_frames", "height", "width").index(name)]]
    if name == "class_labels":
        return [torch.tensor([1])]
    if name == "controlnet_cond":
        s = main.shape[-1]
        return [torch.randn(main.shape, generator=g), torch.randn(1, 3, 8 * s, 8 * s, generator=g)]
    if name in ("return_dict", "sample_posterior"):  # tuples out; a VAE's mode, not a random draw
        return [False]
    return []


def inputs_for(cls_name: str, forward: Any, config: dict[str, Any]) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Candidate example inputs: each main input with the inputs forward requires and every
    optional one the sweep knows (many classes take their timestep or text as optional but
    need it), each combination of their candidates; then without each optional one in turn,
    then with the required ones only. ``return_dict=False`` makes outputs tuples."""
    params = {n: p for n, p in inspect.signature(forward).parameters.items()
              if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    if not params:
        return
    main_name, *others = params
    required = [n for n in others if params[n].default is inspect.Parameter.empty]
    optional = [n for n in others if n not in required and n != "return_dict"]
    tail = {"return_dict": False} if "return_dict" in params else {}
    unknown: set[str] = set()
    tried = False
    for main in main_inputs(cls_name, config):
        choices = {n: named_inputs(n, main, config) for n in required}
        missing = [n for n, c in choices.items() if not c]
        if missing:  # some are made for a layout only (Flux-style ids for tokens)
            unknown.update(missing)
            continue
        tried = True
        choices.update({n: values for n in optional if (values := named_inputs(n, main, config))})
        combos = [dict(zip(choices, values)) for values in itertools.islice(itertools.product(*choices.values()), 6)]
        for combo in combos:
            yield (main,), {**combo, **tail}
        full = combos[0]
        for left_out in reversed([n for n in full if n in optional]):
            yield (main,), {**{n: v for n, v in full.items() if n != left_out}, **tail}
        if len(required) < len(full):
            yield (main,), {**{n: full[n] for n in required}, **tail}
    if not tried:
        raise NotBuilt(f"no input the sweep makes for {', '.join(sorted(unknown))}")


# --- building, compiling ------------------------------------------------------------------------


def parameter_count(cls: Any, kwargs: dict[str, Any]) -> int:
    """Counted on the meta device: a released model's defaults would fill memory."""
    import torch

    with torch.device("meta"):
        return sum(p.numel() for p in cls(**kwargs).parameters())


def build(cls_name: str) -> tuple[Any, tuple[Any, ...], dict[str, Any], str]:
    """A tiny model of ``cls_name`` in eval mode, example args and kwargs PyTorch's forward
    takes, and which shrinking of HOW made it."""
    import warnings

    import diffusers
    import torch

    cls = getattr(diffusers, cls_name)
    given = required_sizes(cls)
    given.update(unset_sizes(cls, given))
    defaults = {**init_defaults(cls), **given}
    problems: list[str] = []
    unmade = False  # whether the tiny config is too big or does not construct
    for how in HOW:
        if how == "tinier" and not unmade:
            continue
        kwargs = {**given, **shrink(defaults, how)}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                size = parameter_count(cls, kwargs)
                unmade = size > MAX_PARAMETERS
                if unmade:
                    problems.append(f"{how} config: {size / 1e6:.0f} M parameters")
                    continue
                torch.manual_seed(0)
                model = cls(**kwargs).eval()
                perturb(model)
            except Exception as exc:
                unmade = True
                problems.append(f"{how} config: {type(exc).__name__}: {short(exc)}")
                continue
            found = _first_that_runs(model, cls_name, {**defaults, **kwargs}, how, problems)
            if found is not None:
                return model, *found, how
    raise NotBuilt("; ".join(dict.fromkeys([*problems[:1], *problems[-1:]])) or "no input the sweep makes")


def _first_that_runs(model: Any, cls_name: str, config: dict[str, Any], how: str,
                     problems: list[str]) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """The first candidate inputs PyTorch's forward runs on with finite outputs (the
    candidates stop with NotBuilt where an input cannot be made)."""
    try:
        candidates = itertools.islice(inputs_for(cls_name, model.forward, config), 200)
        return first_that_runs(model, candidates, how, problems)
    except NotBuilt as exc:
        problems.append(f"{how} config: {exc}")
    return None


def try_one(cls_name: str) -> dict[str, Any]:
    """Build, compile with each frontend, check in tract; the outcome as a JSON-able dict."""
    record: dict[str, Any] = {"class": cls_name, "built": ""}
    try:
        model, args, kwargs, how = build(cls_name)
    except Exception as exc:
        return not_built(record, exc)
    record["built"] = how
    return compile_with_each_frontend(record, cls_name, model, args, kwargs)


def sweep(classes: list[str], timeout: float, resume: bool) -> None:
    from tools.children import run_in_children

    results = load(RESULTS)
    skip = hand_zoo_classes()
    pending = [c for c in classes or model_classes()
               if (classes or c not in skip) and not (resume and settled(results.get(c)))]
    run_in_children("tools.diffusers_sweep", pending, "class", 2 * timeout, recorder(RESULTS, "class"))


KNOWN_FAILURES: dict[str, str] = {
    "LTX2VideoDiffusionDecoderModel": "not judged: the sweep's child process dies on it (twice) before any "
                                      "outcome; its tiny configs do not construct (head size over the narrowest "
                                      "width, channel reductions), and the small one decodes 16 x 16 latents 32 "
                                      "times up with FlexAttention neighbourhood attention on the CPU",
}
"""Why a class the sweep found FAILED fails (each one is looked at; the test of the
table fails on a FAILED class missing here)."""


def table() -> str:
    """The counts and one row per class, from the recorded outcomes."""
    from tools.sweeps import table as sweep_table

    return sweep_table(load(RESULTS), KNOWN_FAILURES, "classes", ["class", "built"],
                       lambda name, r: [f"`{name}`", r["built"]])


def doc(check: bool) -> int:
    from tools.generated import write_between

    return write_between(DOC, BEGIN, END, table(), check,
                         f"{DOC}'s sweep table is not {RESULTS.name}'s: run python -m tools.diffusers_sweep doc")


def main(argv: list[str] | None = None) -> int:
    from tools.sweeps import main as sweep_main

    return sweep_main(argv, (__doc__ or "").splitlines()[0], "class", "classes", sweep, try_one, doc)


if __name__ == "__main__":
    sys.exit(main())
