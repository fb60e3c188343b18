"""``export_multimodal``: a vision-language (or audio-language) model of ``transformers``
to a set of tract artifacts tied by a manifest:

- ``OUT/<modality>/model.nnef.tgz``: the encoder (raw input → one embedding row per
  placeholder token), checked in tract against the model's own features;
- ``OUT/decoder/``: the LLM layout (``model/model.nnef.tgz``, ``modes.json``) of a graph
  that takes ``in_<modality>_embeddings`` beside ``input_ids`` and the KV cache and writes
  them at the placeholder tokens;
- ``OUT/multimodal.json``: the decoder's path, and per encoder its modality, path,
  placeholder token id and outputs (name, the decoder input each feeds, symbolic shape,
  dtype)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import torch

from t2n.errors import InvalidArgumentError
from t2n.llm.common.checkpoint import config_of
from t2n.llm.multimodal.families import family_of
from t2n.llm.multimodal.family import Family
from t2n.llm.multimodal.verify import verify_multimodal
from t2n.llm.multimodal.wrappers import EmbeddingsDecoder, EncoderWrapper

if TYPE_CHECKING:
    from t2n.artifact import Artifact
    from t2n.ir import TensorData, Value
    from t2n.llm.common.layout import CacheLayout
    from t2n.llm.common.options import LLMExportOptions
    from t2n.llm.common.streaming import StreamedCheckpoint

LOG = logging.getLogger(__name__)

MANIFEST = "multimodal.json"
SYMBOLS = {"image": "IMG", "audio": "AUD"}
"""The symbol of the number of embedding rows, per modality."""


@attrs.frozen
class Written:
    """One artifact written: its path, the compiled artifact, the example it was traced
    on, and how the traced module wraps a model (to check a streamed artifact against the
    loaded model)."""

    path: Path
    artifact: Artifact
    example: tuple[torch.Tensor, ...]
    wrap: Callable[[torch.nn.Module], torch.nn.Module]
    input_names: list[str]
    output_names: list[str]
    start: tuple[torch.Tensor, ...] = ()
    """The decoder's state inputs of a new sequence (empty cache, zero rotary shift)."""
    graph_inputs: list[str] | None = None
    """The inputs of a stateful decoder's graph (None: ``input_names``, the traced module's)."""


def _streamed_weights(wrapper: torch.nn.Module, model: torch.nn.Module,
                      shards: StreamedCheckpoint | None) -> dict[str, TensorData] | None:
    """The weights of ``model`` inside ``wrapper`` read from the shards (None: the model's own)."""
    return None if shards is None else shards.weights_inside(wrapper, model)


def embeddings_names(modality: str) -> tuple[str, str]:
    """(encoder output, decoder input) names of a modality's embeddings."""
    return f"out_{modality}_embeddings", f"in_{modality}_embeddings"


def positions_names(family: Family) -> list[tuple[str, str]]:
    """(encoder output, decoder input) of each row's place in its image's grid, for a
    decoder with 3-D rotary positions (see :mod:`t2n.llm.multimodal.mrope`); else none."""
    if family.grid is None:
        return []
    return [(f"out_{family.modality}_positions", f"in_{family.modality}_positions")]


def encoder_folder(family: Family, size: tuple[int, int] | None) -> str:
    """Where an encoder is written: ``<modality>`` (the default size), ``<modality>/<h>x<w>``."""
    return family.modality if size is None else f"{family.modality}/{size[0]}x{size[1]}"


def checked_sizes(model: torch.nn.Module, family: Family, sizes: Sequence[tuple[int, int]] | None
                  ) -> list[tuple[int, int] | None]:
    """The image sizes to write an encoder for (``[None]``: the family's default), each
    checked (``InvalidArgumentError`` naming the size and why, before anything is written)."""
    if sizes is None:
        return [None]
    name = type(model).__name__
    if family.default_size is None or family.check_size is None:
        raise InvalidArgumentError(
            f"{name}'s encoder is not fixed to one image size (or takes no images), so it takes no image_sizes; "
            "export without them")
    chosen: list[tuple[int, int] | None] = []
    for size in sizes:
        if not (isinstance(size, (tuple, list)) and len(size) == 2 and all(isinstance(s, int) for s in size)):
            raise InvalidArgumentError(f"image_sizes takes (height, width) pairs of pixels, not {size!r}")
        pair = (int(size[0]), int(size[1]))
        why = family.check_size(model, pair)
        if why:
            raise InvalidArgumentError(f"{name} cannot take images of {pair[0]} x {pair[1]} pixels: {why}; "
                                       "pass sizes the model's processor produces")
        if pair not in chosen:
            chosen.append(pair)
    if not chosen:
        raise InvalidArgumentError("image_sizes is empty: give at least one (height, width), or None")
    return chosen


def size_assertions(model: torch.nn.Module, family: Family) -> list[str]:
    """``tract_assert`` lines bounding an encoder's symbolic image height and width."""
    if family.size_symbols is None:
        return []
    return [f"tract_assert {symbol} {op} {bounds[key]}" for symbol, bounds in family.size_symbols(model).items()
            for op, key in ((">=", "min"), ("<=", "max"))]


def encoder_sizes(family: Family, sizes: list[tuple[int, int] | None]) -> list[tuple[int, int] | None]:
    """The sizes to write an encoder for: one (``None``) when its image size is symbolic."""
    return [None] if family.size_symbols is not None else sizes


def deepstack_names(model: torch.nn.Module, family: Family) -> list[tuple[str, str]]:
    """(encoder output, decoder input) names of the DeepStack streams, in layer order."""
    count = family.deepstack(model) if family.deepstack is not None else 0
    return [(f"out_{family.modality}_deepstack_{i}", f"in_{family.modality}_deepstack_{i}") for i in range(count)]


def placeholder_of(model: torch.nn.Module, family: Family) -> int:
    value = getattr(config_of(model), family.placeholder_attr, None)
    if not isinstance(value, int):
        raise InvalidArgumentError(
            f"{type(model).__name__}'s config has no integer {family.placeholder_attr!r}: the decoder "
            "cannot place the encoder's embeddings without the placeholder token id; set it in config.json")
    return value


def export_encoder(model: torch.nn.Module, family: Family, out: Path, opts: LLMExportOptions, *,
                   shards: StreamedCheckpoint | None = None,
                   size: tuple[int, int] | None = None) -> Written:
    """``OUT/<modality>/model.nnef.tgz`` (``OUT/<modality>/<h>x<w>/`` for an image ``size``
    of a family fixed to one size); checked afterwards with the decoder against the model's
    own forward (:mod:`t2n.llm.multimodal.verify`)."""
    from t2n.driver.export import export_model
    from t2n.options import compile_options, write_options

    wrapper = EncoderWrapper(model, family, size).eval()
    example = family.example(model, size) if family.default_size is not None else family.example(model)
    path = out / encoder_folder(family, size) / "model.nnef.tgz"
    path.parent.mkdir(parents=True, exist_ok=True)
    LOG.info("exporting the %s encoder of %s to %s", family.modality, type(model).__name__, path)
    options = compile_options(opts.target(), input_names=list(family.input_names),
                              output_names=[embeddings_names(family.modality)[0],
                                            *(o for o, _ in deepstack_names(model, family)),
                                            *(o for o, _ in positions_names(family))],
                              dynamic_axes=family.dynamic_axes, nnef_variable_naming_scheme=opts.naming_scheme,
                              custom_extensions=size_assertions(model, family),
                              weights_from=_streamed_weights(wrapper, model, shards))
    with torch.no_grad():
        artifact = export_model(wrapper, example, write_options(path), options)
    return Written(path, artifact, example, lambda m: EncoderWrapper(m, family, size).eval(),
                   list(options.input_names or ()), list(options.output_names or ()))


@attrs.frozen
class _DecoderInputs:
    """The decoder's inputs beyond the text layout's, by name: the rotary shift of the
    Qwens (fed back like the cache), the encoder's rows, DeepStack features and the rows'
    places in their image."""

    delta_in: list[str]
    delta_out: list[str]
    rows: str
    deep: list[str]
    grid: list[str]

    @property
    def inputs(self) -> list[str]:
        return [*self.delta_in, self.rows, *self.deep, *self.grid]


def export_decoder(model: torch.nn.Module, family: Family, out: Path, opts: LLMExportOptions, *,
                   shards: StreamedCheckpoint | None = None) -> Written:
    """``OUT/decoder/``: the LLM layout with the embeddings as the last input; the logits
    of the last ``num_logits_to_keep`` positions (None: every position's). ``kv_bits``:
    tract's stateful cache of that many bits per value (0: the model's dtype; None: the
    explicit cache); checked afterwards with the encoders against the model's own forward."""
    from t2n.driver.export import export_model
    from t2n.frontend.meta_trace import stand_ins
    from t2n.llm.common.stateful import KV_CACHES, stateful_passes
    from t2n.llm.decoder.modes import extension_lines, write_modes
    from t2n.llm.decoder.wrapper import cache_layout
    from t2n.options import compile_options, write_options

    kv_bits, num_logits_to_keep = KV_CACHES[opts.kv_cache], opts.kept_logits
    placeholder = placeholder_of(model, family)
    with stand_ins(model):  # one step on zeros for a model on the meta device (no memory)
        layout = cache_layout(model)
    text_config = config_of(model).get_text_config()
    wrapper = EmbeddingsDecoder(model, family, placeholder, num_logits_to_keep).eval()
    example, names = _decoder_example(model, family, layout, placeholder)
    rows_symbol = SYMBOLS[family.modality]
    axes = {**layout.dynamic_axes(), **{n: {0: rows_symbol} for n in (names.rows, *names.deep, *names.grid)}}
    decoder = out / "decoder"
    (decoder / "model").mkdir(parents=True, exist_ok=True)
    path = decoder / "model" / "model.nnef.tgz"
    LOG.info("exporting the decoder of %s (%d layers) to %s", type(model).__name__, layout.num_layers, path)
    options = compile_options(
        opts.target(), input_names=[*layout.input_names(), *names.inputs],
        output_names=[*layout.output_names(), *names.delta_out],
        dynamic_axes=axes, custom_extensions=[*extension_lines(text_config, layout.has_past()),
                                             # a call without placeholders gives no rows
                                             f"tract_assert {rows_symbol} >= 0"],
        nnef_variable_naming_scheme=opts.naming_scheme, weights_from=_streamed_weights(wrapper, model, shards),
        passes=[*opts.forms().passes(), *(stateful_passes(layout.kv_pairs(), kv_bits) if kv_bits is not None else ())])
    with torch.no_grad():  # a stateful graph: the explicit one, its cache made tract's state
        artifact = export_model(wrapper, example, write_options(path), options)
    if kv_bits is not None:
        layout = attrs.evolve(layout, stateful=True, kv_bits=kv_bits)
    write_modes(layout, text_config, decoder, samples=False)
    modes = _decoder_modes(decoder, family, names, placeholder, int(text_config.hidden_size), num_logits_to_keep)
    return Written(path, artifact, example,
                   lambda m: EmbeddingsDecoder(m, family, placeholder, num_logits_to_keep).eval(),
                   [*layout.input_names(), *names.inputs], [*layout.output_names(), *names.delta_out],
                   (*layout.empty_cache(0), *(torch.zeros(1, dtype=torch.int64) for _ in names.delta_in)),
                   modes["inputs"] if kv_bits is not None else None)


def _decoder_example(model: torch.nn.Module, family: Family, layout: CacheLayout,
                     placeholder: int) -> tuple[tuple[torch.Tensor, ...], _DecoderInputs]:
    """The decoder's example call (a prompt with placeholder tokens, random cache and rows:
    two rows, or one image's grid for the Qwens) and the names of its extra inputs."""
    hidden = int(config_of(model).get_text_config().hidden_size)
    vocab = int(model.get_input_embeddings().weight.shape[0])  # type: ignore[operator]
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, min(vocab, placeholder), (1, 5), generator=generator)
    ids[0, 1:3] = placeholder  # two placeholder tokens among text
    rows = torch.randn((2, hidden), generator=generator, dtype=layout.dtype)
    names = _DecoderInputs([], [], embeddings_names(family.modality)[1],
                           [i for _, i in deepstack_names(model, family)], [i for _, i in positions_names(family)])
    delta: tuple[torch.Tensor, ...] = ()
    if family.grid is not None:
        from t2n.llm.multimodal.mrope import DELTA_IN, DELTA_OUT

        rows_per_image = family.grid(model)[0] * family.grid(model)[1]
        ids = torch.cat([ids[:, :1], torch.full((1, rows_per_image), placeholder), ids[:, 3:]], dim=1)
        rows = torch.randn((rows_per_image, hidden), generator=generator, dtype=layout.dtype)
        names = attrs.evolve(names, delta_in=[DELTA_IN], delta_out=[DELTA_OUT])
        delta = (torch.tensor([-3]),)
    deep = tuple(torch.randn(rows.shape, generator=generator, dtype=layout.dtype) for _ in names.deep)
    grid: tuple[torch.Tensor, ...] = ()
    if names.grid:
        from t2n.llm.multimodal.qwen_families import qwen_grid_positions

        grid = (qwen_grid_positions(model, None),)
    return (ids, *layout.empty_cache(2, random=True), *delta, rows, *deep, *grid), names


def _decoder_modes(decoder: Path, family: Family, names: _DecoderInputs, placeholder: int, hidden: int,
                   num_logits_to_keep: int | None) -> dict[str, Any]:
    """``decoder/modes.json`` of the text layout extended with the extra inputs and outputs,
    what the embeddings input takes and which positions' logits come out; returned."""
    rows_symbol = SYMBOLS[family.modality]
    modes: dict[str, Any] = json.loads((decoder / "modes.json").read_text())
    modes["inputs"] += names.inputs
    modes["outputs"] += names.delta_out
    if names.delta_in:
        modes["state_inputs"].append({"input": names.delta_in[0], "fed_by": names.delta_out[0],
                                      "start": {"shape": [1], "dtype": "int64", "fill": 0}})
        modes["rope_delta"] = {"input": names.delta_in[0], "output": names.delta_out[0], "shape": [1],
                               "dtype": "int64",
                               "description": "the shift of the 3-D rotary positions by the images so far: "
                                              "[0] for a new sequence, then fed back like the cache"}
    modes["call_inputs"] = [  # what a call without encoder rows takes in their place
        {"input": name, "fed_by_encoder": True, "without": {"shape": [0, *dims], "dtype": dtype, "fill": 0}}
        for name, dims, dtype in [(names.rows, [hidden], modes["cache"]["dtype"]),
                                  *((d, [hidden], modes["cache"]["dtype"]) for d in names.deep),
                                  *((g, [4], "int64") for g in names.grid)]]
    modes["embeddings"] = {"input": names.rows, "placeholder_token_id": placeholder,
                           "shape": [rows_symbol, hidden],
                           **({"deepstack": {name: layer for layer, name in enumerate(names.deep)}}
                              if names.deep else {}),
                           **({"positions": {"input": names.grid[0], "shape": [rows_symbol, 4],
                                             "dtype": "int64",
                                             "description": "each row's (row, column, rows, columns) in its "
                                                            "image's merged patch grid: the encoder's "
                                                            "out_image_positions"}} if names.grid else {})}
    if family.prefix_lm:
        modes["prefix"] = {"first_call": "both ways", "later_calls": "causal",
                           "description": "the first call of a sequence (no past) is the prefix: its tokens attend "
                                          "each other both ways, so give the whole prompt (image tokens and text, "
                                          "the processor's token_type_ids 0) in that one call; each later call "
                                          "attends causally"}
    modes["logits"] = {"positions": "last" if num_logits_to_keep == 1 else
                       "all" if num_logits_to_keep is None else f"last {num_logits_to_keep}"}
    (decoder / "modes.json").write_text(json.dumps(modes, indent=2) + "\n")
    return modes


def write_manifest(model: torch.nn.Module, families: list[Family], out: Path, samples: bool = False,
                   sizes: list[tuple[int, int] | None] | None = None, artifacts: Sequence[Artifact] = ()) -> Path:
    """``OUT/multimodal.json`` (see the module); ``samples``: the encoders' ``tests/io.npz``
    were written; ``sizes``: the image sizes of the encoders written per family (None:
    the default); ``artifacts``: the encoders compiled, in that order (their graphs'
    interface is written as ``graph``)."""
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")  # bf16 is exported as f16
    encoders = []
    pairs = [(f, s) for f in families for s in (sizes or [None])]
    for (family, size), artifact in zip(pairs, [*artifacts, *[None] * (len(pairs) - len(artifacts))]):
        folder = encoder_folder(family, size)
        entry = _encoder_outputs(model, family, dtype)
        if artifact is not None:
            entry["graph"] = graph_interface(artifact, entry)
        sized = _image_size_entries(model, family, size)
        if "rows" in sized:  # the number of rows (IMG) of one image, on the embeddings output
            entry["outputs"][0]["rows"] = sized.pop("rows")
        entry.update(sized)
        if family.fixed:
            entry["fixed_at_export"] = family.fixed
        if family.preprocess:
            entry["preprocess"] = [dict(rule) for rule in family.preprocess]
        entry["tests"] = [f"{folder}/tests/io.npz"] if samples else []
        encoders.append({"modality": entry.pop("modality"), "path": f"{folder}/model.nnef.tgz", **entry})
    manifest = {"format": "t2n-multimodal/1",
                "decoder": {"path": "decoder/model/model.nnef.tgz", "modes": "decoder/modes.json"},
                "encoders": encoders}
    path = out / MANIFEST
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    return path


def graph_interface(artifact: Artifact, entry: Mapping[str, object]) -> dict[str, object]:
    """An encoder graph's inputs and outputs in the graph's own order (the order a runtime
    feeds and reads them by position), each with its shape (ints and size symbols), dtype
    and, for an output, the decoder input it feeds (by the ``outputs`` and ``deepstack``
    of the manifest's ``entry``)."""
    from t2n.ir.dims import is_data_symbol

    listed = [o for key in ("outputs", "deepstack") for o in _json_list(entry.get(key))]
    feeds = {o["name"]: o["feeds"] for o in listed if isinstance(o, Mapping)}
    declared = {o["name"]: o["shape"] for o in listed if isinstance(o, Mapping)}

    def spec(value: Value, name: str) -> dict[str, object]:
        """A length tract computes from the data (no symbol of the graph) is written as the
        manifest's own symbol of that axis (``AUD``: the rows the decoder takes)."""
        given = _json_list(declared.get(name))
        shape = [d if isinstance(d, int) else given[i] if is_data_symbol(str(d)) and i < len(given) else str(d)
                 for i, d in enumerate(value.type.shape)]
        return {"name": name, "shape": shape, "dtype": str(value.type.dtype.numpy)}

    graph = artifact.ir
    inputs = [spec(v, n) for n, v in zip(artifact.input_names, graph.inputs)]
    outputs = [{**spec(v, n), "feeds": feeds.get(n)} for n, v in zip(artifact.output_names, graph.outputs)]
    return {"inputs": inputs, "outputs": outputs}


def _json_list(value: object) -> list[object]:
    """A JSON array's items (none for anything else)."""
    return list(value) if isinstance(value, list) else []


def _encoder_outputs(model: torch.nn.Module, family: Family, dtype: str) -> dict[str, Any]:
    """An encoder's entry without its paths and sizes: its modality, placeholder token, inputs,
    and every output with the decoder input it feeds (embeddings, DeepStack features, the
    rows' places in their image)."""
    hidden = int(config_of(model).get_text_config().hidden_size)
    rows = SYMBOLS[family.modality]
    name_out, name_in = embeddings_names(family.modality)
    entry: dict[str, Any] = {
        "modality": family.modality,
        "placeholder_token_id": placeholder_of(model, family),
        "inputs": list(family.input_names),
        "outputs": [{"name": name_out, "feeds": name_in, "shape": [rows, hidden], "dtype": dtype,
                     **({"rows": family.rows} if family.rows else {})}]}
    deep = deepstack_names(model, family)
    if deep:  # added at the placeholder tokens to the output of decoder layer i
        entry["deepstack"] = [{"layer": i, "name": o, "feeds": n, "shape": [rows, hidden], "dtype": dtype}
                              for i, (o, n) in enumerate(deep)]
    for o, n in positions_names(family):  # each row's place in its image (3-D rotary positions)
        entry["outputs"].append({"name": o, "feeds": n, "shape": [rows, 4], "dtype": "int64"})
    return entry


def _image_size_entries(model: torch.nn.Module, family: Family, size: tuple[int, int] | None) -> dict[str, Any]:
    """What image size an encoder takes: symbols with their bounds for a dynamic one, the
    fixed size (and the Qwens' patch grid) otherwise, nothing for a family without sizes."""
    if family.size_symbols is not None:  # any image size within bounds: symbols
        symbols = family.size_symbols(model)
        step = " * ".join(f"({s} / {b['multiple_of']})" for s, b in symbols.items())
        return {"image_size": list(symbols), "image_size_bounds": symbols,
                "input_shapes": {family.input_names[0]: [1, 3, *symbols]}, "rows": step}
    if family.default_size is None:
        return {}
    height, width = size or family.default_size(model)
    entry: dict[str, Any] = {"image_size": [height, width]}
    if family.several_images is not None:
        entry["several_images"] = family.several_images(model)
    if family.grid is not None:
        patch = int(config_of(model).vision_config.patch_size)
        entry["image_grid_thw"] = [1, height // patch, width // patch]
    return entry


def export_multimodal(model: torch.nn.Module, out: Path, opts: LLMExportOptions, *,
                      shards: StreamedCheckpoint | None = None,
                      reference: Callable[[], torch.nn.Module | None] | None = None) -> Path:
    """Export ``model`` (a multimodal family of :mod:`t2n.llm.multimodal.families`) into
    ``out``; returns the manifest's path. A model on the meta device takes its weights
    from ``shards`` (streamed into each artifact); with ``verify`` the artifacts are then run
    in tract together and checked against the model's own forward (``reference()``, the
    loaded model, for a streamed one; None: too big to load).
    ``opts.image_sizes``: the (height, width) pixel sizes to write an encoder for, one
    artifact each, for a family whose encoder is fixed to one size (None: its default size);
    ``opts.kv_cache``: the decoder's cache form (see :func:`export_decoder`)."""
    from t2n.llm.common.stateful import KV_CACHES

    verify, keep = opts.verify, opts.kept_logits
    family = family_of(model)
    if family is None:
        raise InvalidArgumentError(f"{type(model).__name__} is not a multimodal family t2n exports")
    model = model.eval()
    checked = checked_sizes(model, family, opts.image_sizes)
    sizes = encoder_sizes(family, checked)
    encoders = [export_encoder(model, family, out, opts, shards=shards, size=size) for size in sizes]
    written = [*encoders, export_decoder(model, family, out, opts, shards=shards)]
    loaded = model if shards is None else reference() if verify and reference is not None else None
    if verify and loaded is not None:  # every artifact against the model's own forward, at each size
        checks = [(encoders[0], s) for s in checked] if family.size_symbols is not None else list(zip(encoders, sizes))
        verify_multimodal(loaded, family, checks, written[-1], "very" if KV_CACHES[opts.kv_cache] else
                          opts.target().check_io_tolerance, placeholder=placeholder_of(loaded, family), keep=keep)
    if loaded is not None:
        _write_samples(loaded, family, out, written, sizes)
    return write_manifest(model, [family], out, samples=loaded is not None, sizes=sizes,
                          artifacts=[e.artifact for e in encoders])


def _write_samples(loaded: torch.nn.Module, family: Family, out: Path, written: list[Written],
                   sizes: list[tuple[int, int] | None]) -> None:
    """Each encoder's and the decoder's ``tests/*.npz`` (see :mod:`t2n.llm.multimodal.samples`),
    computed by ``loaded`` (the model exported, or the streamed folder's loaded whole); the
    decoder's prefill takes the rows of the first encoder's sample."""
    from t2n.llm.multimodal.samples import write_decoder_samples, write_encoder_samples

    *encoders, decoder = written
    samples = [write_encoder_samples(encoder.wrap(loaded), encoder.example, encoder.input_names,
                                     encoder.output_names, out / encoder_folder(family, size))
               for encoder, size in zip(encoders, sizes)]
    vocab = int(loaded.get_input_embeddings().weight.shape[0])  # type: ignore[operator]
    files, _ = write_decoder_samples(decoder.wrap(loaded), placeholder_of(loaded, family), vocab,
                                     list(decoder.start), samples[0], decoder.input_names, decoder.output_names,
                                     out / "decoder", kept=None if decoder.graph_inputs is None else
                                     [*decoder.artifact.input_names, *decoder.artifact.output_names])
    modes = json.loads((out / "decoder" / "modes.json").read_text())
    modes["tests"] = files
    (out / "decoder" / "modes.json").write_text(json.dumps(modes, indent=2) + "\n")
