"""``export_seq2seq``: an encoder-decoder model of ``transformers`` (object or local
folder) to two tract artifacts and a manifest:

- ``OUT/encoder/model.nnef.tgz``: the source (``input_ids`` ``[1, T]``, or Whisper's
  ``input_features``) → the encoder states and, per decoder layer, the cross-attention
  keys and values already projected (computed once per source, never per step);
- ``OUT/decoder/model.nnef.tgz``: ``input_ids`` ``[1, S]``, the self-attention cache
  ``in_cache_{key,value}_{i}`` ``[1, H, P, D]`` (or tract's stateful cache) and the
  cross keys/values ``in_cross_{key,value}_{i}`` → the last position's logits and the
  grown cache;
- ``OUT/seq2seq.json`` (:mod:`t2n.llm.seq2seq.manifest`).

A checkpoint folder is streamed, as a causal LM's is: the model is built on the meta
device and every weight is read from the shards as the artifacts are written (Q4_0
blocks computed as they stream), the folder's model loaded whole only to verify them when
it fits in memory. Everything given is checked before ``export_dirpath`` is touched;
after writing, the artifacts generate in tract against the model's own ``generate`` and
forward (:mod:`t2n.llm.seq2seq.verify`); on any failure what this call wrote is removed."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import torch

from t2n.errors import CheckpointFolderError, InvalidArgumentError
from t2n.llm.common.options import LLMExportOptions
from t2n.llm.common.streaming import StreamedCheckpoint, quantized
from t2n.llm.seq2seq.families import Family, family_of
from t2n.llm.seq2seq.layout import Seq2SeqLayout
from t2n.llm.seq2seq.manifest import DECODER_PATH, ENCODER_PATH, MANIFEST, MODES, write_manifest
from t2n.llm.seq2seq.rules import rules_of
from t2n.llm.seq2seq.wrappers import DecoderWrapper, EncoderWrapper, read_layout

if TYPE_CHECKING:
    import transformers

    from t2n.artifact import Artifact
    from t2n.passes.base import Pass

LOG = logging.getLogger(__name__)

DECODER_EXAMPLE = {"S": 3, "P": 2, "T": 5}
"""The sizes the decoder is traced at (distinct, so that each axis keeps its symbol)."""


def export_seq2seq(model_or_dir: transformers.PreTrainedModel | str | os.PathLike[str],
                   export_dirpath: str | os.PathLike[str], options: LLMExportOptions | None = None) -> Path:
    """Export an encoder-decoder model (a proven family of
    :mod:`t2n.llm.seq2seq.families`, or a local folder saved with ``save_pretrained``) into
    ``export_dirpath``; returns the path of ``seq2seq.json``. ``options``: the LLM export
    options (``kv_cache="stateful"`` keeps the decoder's self-attention cache in tract's
    state; the cross keys and values stay inputs); those an encoder-decoder export does
    not take yet are refused by name."""
    from t2n.reference.releases import check_transformers

    opts = LLMExportOptions() if options is None else options
    check_transformers()
    out = Path(export_dirpath)
    opts.check(out)
    refuse_options(opts)
    source = _source(model_or_dir, opts)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        return _export(source, out, opts)
    except BaseException:
        _remove(out, created)
        raise


UNSUPPORTED = {
    "merge_peft": None, "force_inputs_dtype": None, "sample_generation_total_size": None,
    "image_sizes": None, "window_kv_cache": False,
}
"""Options an encoder-decoder export does not take yet, with their only accepted value."""


def refuse_options(opts: LLMExportOptions) -> None:
    """``InvalidArgumentError`` for each option an encoder-decoder export does not take yet."""
    given = [name for name, accepted in UNSUPPORTED.items() if getattr(opts, name) != accepted]
    if opts.kv_cache not in ("explicit", "stateful"):
        given.append(f"kv_cache={opts.kv_cache!r}")
    if opts.num_logits_to_keep != 1:
        given.append(f"num_logits_to_keep={opts.num_logits_to_keep!r} (the decoder returns the last position's)")
    if given:
        raise InvalidArgumentError(f"an encoder-decoder export does not take {', '.join(given)} yet: export "
                                   "without (kv_cache 'explicit' or 'stateful')")


@attrs.frozen
class Source:
    """What is exported: the model (on the meta device for a streamed folder), its family,
    its folder, and the shards it streams from."""

    model: transformers.PreTrainedModel
    family: Family
    folder: Path | None = None
    shards: StreamedCheckpoint | None = None

    def reference(self, opts: LLMExportOptions) -> transformers.PreTrainedModel | None:
        """The model the artifacts are checked against: the one given, or the folder's
        loaded whole (cast and quantized as the export was) when it fits in memory (else
        None, with a warning saying the artifacts are not checked)."""
        from t2n.llm.common.streaming import REFERENCE_MEMORY_FRACTION, fits_in_memory

        if self.shards is None or self.folder is None:
            return self.model
        if not fits_in_memory(self.shards):
            LOG.warning("the weights of %s take %.1f GB, more than %d%% of the memory available: the model is not "
                        "loaded in PyTorch, so the artifacts are not verified against it (run them with "
                        "t2n.llm.generate on a machine with more memory to check them)", self.folder,
                        self.shards.nbytes / 1e9, round(100 * REFERENCE_MEMORY_FRACTION))
            return None
        loaded, _ = _load_folder(self.folder, opts.trust_remote_code, opts.torch_dtype())
        return quantized(_as_exported(loaded, opts.torch_dtype()), opts.compression, None)


def _source(model_or_dir: transformers.PreTrainedModel | str | os.PathLike[str], opts: LLMExportOptions) -> Source:
    """The model as it is traced: a folder's built on the meta device with its shards, an
    object as given; cast (:func:`_as_exported`) and quantized as ``opts`` ask."""
    if isinstance(model_or_dir, (str, os.PathLike)):
        folder = Path(model_or_dir)
        model, family, shards = _meta_folder(folder, opts.trust_remote_code, opts.torch_dtype())
        model = _as_exported(model, opts.torch_dtype())
        if family.f16_overflow_guard and next(model.parameters()).dtype == torch.float16:
            LOG.info("%s computes in f16 with an overflow guard that reads activations: loaded whole, not "
                     "streamed", family.model_class)
            loaded, _ = _load_folder(folder, opts.trust_remote_code, opts.torch_dtype())
            return Source(quantized(_as_exported(loaded, opts.torch_dtype()), opts.compression, None), family, folder)
        return Source(quantized(model, opts.compression, shards), family, folder, shards)
    config = getattr(model_or_dir, "config", None)
    if not isinstance(model_or_dir, torch.nn.Module) or config is None:
        raise InvalidArgumentError("model_or_dir must be a transformers encoder-decoder model (a PreTrainedModel) "
                                   f"or the path of a local checkpoint folder, got {type(model_or_dir).__name__}")
    family = family_of(getattr(config, "model_type", None), type(model_or_dir).__name__)
    given: Any = model_or_dir
    return Source(quantized(_as_exported(given.eval(), opts.torch_dtype()), opts.compression, None), family)


def _as_exported(model: transformers.PreTrainedModel, dtype: torch.dtype | None) -> transformers.PreTrainedModel:
    """The model as it is traced and checked: cast to ``dtype`` when one is asked (a model
    object in place), bf16 as f16 (what tract computes, so that the check's reference is
    the artifact's), f32 or f16 kept."""
    found = next(model.parameters()).dtype
    asked = found if dtype is None else dtype
    wanted = torch.float16 if asked == torch.bfloat16 else asked
    if wanted not in (torch.float32, torch.float16):
        raise InvalidArgumentError(f"{type(model).__name__} holds {str(found).removeprefix('torch.')} weights: an "
                                   "encoder-decoder export computes in f32 or f16; pass dtype='f32' or 'f16'")
    if wanted == torch.float16 and found == torch.bfloat16:
        LOG.info("bf16 weights are exported as f16")
    if wanted == found:
        return model
    loose: Any = model
    cast: transformers.PreTrainedModel = loose.to(wanted)
    return cast


def _folder_family(folder: Path, trust_remote_code: bool) -> Family:
    """The family of a checkpoint folder's ``config.json`` (refused when not proven)."""
    import transformers

    if not (folder / "config.json").is_file():
        raise CheckpointFolderError(f"{folder} is not a checkpoint folder: it holds no config.json")
    try:
        config = transformers.AutoConfig.from_pretrained(folder, local_files_only=True,
                                                         trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        raise CheckpointFolderError(f"{folder}/config.json cannot be read: {exc}") from exc
    architectures = getattr(config, "architectures", None) or []
    return family_of(config.model_type, architectures[0] if architectures else None)


def _meta_folder(folder: Path, trust_remote_code: bool, dtype: torch.dtype | None
                 ) -> tuple[transformers.PreTrainedModel, Family, StreamedCheckpoint]:
    """A checkpoint folder's model on the meta device in its family's class, with the
    folder's generation config (its forced and start tokens), and its shards, checked
    against each other (:func:`t2n.llm.common.streaming.meta_model_of`)."""
    import transformers

    from t2n.llm.common.checkpoint import check_weights
    from t2n.llm.common.streaming import meta_model_of

    family = _folder_family(folder, trust_remote_code)
    check_weights(folder)
    cls = getattr(transformers, family.model_class)

    def build(config: transformers.PretrainedConfig, chosen: torch.dtype) -> transformers.PreTrainedModel:
        model: transformers.PreTrainedModel = cls._from_config(config, dtype=chosen)
        return model

    model: Any
    model, shards = meta_model_of(folder, build, dtype=dtype, trust_remote_code=trust_remote_code)
    if (folder / "generation_config.json").is_file():
        model.generation_config = transformers.GenerationConfig.from_pretrained(folder, local_files_only=True)
    return model, family, shards


def _load_folder(folder: Path, trust_remote_code: bool, dtype: torch.dtype | None
                 ) -> tuple[transformers.PreTrainedModel, Family]:
    """A checkpoint folder's model, loaded whole in its family's class (in ``dtype``, else
    the checkpoint's)."""
    import transformers

    family = _folder_family(folder, trust_remote_code)
    cls = getattr(transformers, family.model_class)
    LOG.info("loading %s from %s", family.model_class, folder)
    try:
        model = cls.from_pretrained(folder, local_files_only=True, trust_remote_code=trust_remote_code,
                                    dtype="auto" if dtype is None else dtype)
    except OSError as exc:
        raise CheckpointFolderError(f"{folder} cannot be loaded as {family.model_class}: {exc}") from exc
    return model.eval(), family


def _remove(out: Path, created: bool) -> None:
    """Remove what a failed export wrote: the folder it created, or its own files."""
    if created:
        shutil.rmtree(out, ignore_errors=True)
        return
    for part in ("encoder", "decoder"):
        shutil.rmtree(out / part, ignore_errors=True)
    (out / MANIFEST).unlink(missing_ok=True)


def _export(source: Source, out: Path, opts: LLMExportOptions) -> Path:
    from t2n.frontend.meta_trace import stand_ins
    from t2n.llm.seq2seq.verify import verify_seq2seq

    model, family, folder = source.model, source.family, source.folder
    example = family.example(model)
    with stand_ins(model):  # one step on zeros for a model on the meta device (no memory)
        layout = read_layout(model, family.input_name, example)
    if opts.forms().stateful:
        layout = attrs.evolve(layout, stateful=True)
    encoder = _write_encoder(model, family, layout, example, out, opts, source.shards)
    decoder = _write_decoder(model, family, layout, out, opts, source.shards)
    rules = rules_of(model, family.audio)
    for setting in rules.not_applied:
        LOG.warning("%s's generation config sets %s: t2n's greedy loop does not apply it", type(model).__name__,
                    setting)
    manifest = write_manifest(out, family.model_type, type(model).__name__, layout, encoder, decoder, rules,
                              family.decoder_limit(model.config), _whisper_tokens(model, family))
    reference = source.reference(opts) if opts.verify else None
    if reference is not None:
        verify_seq2seq(out, reference, family, opts.tolerance())
    if opts.dump_with_tokenizer_and_conf:
        copy_side_files(folder, model, family, out)
    return manifest


SIDE_FILES = ("source.spm", "target.spm", "target_vocab.json", "spiece.model", "sentencepiece.bpe.model",
              "normalizer.json")
"""The tokenizer files of the encoder-decoder families beyond those of a causal LM's and a
processor's (Marian's two SentencePiece models, T5's and Pegasus's, M2M100's and mBART's,
Whisper's text normalizer)."""


def copy_side_files(folder: Path | None, model: transformers.PreTrainedModel, family: Family, out: Path) -> None:
    """``OUT/config.json`` (and ``generation_config.json``) and the checkpoint folder's
    tokenizer files in ``OUT/tokenizer/``, or for an audio model its processor's (feature
    extractor and tokenizer) in ``OUT/processor/``: one folder ``AutoTokenizer`` /
    ``AutoProcessor`` loads. A model object has no folder: only its config is written."""
    from t2n.llm.common.checkpoint import PROCESSOR_FILES
    from t2n.llm.common.checkpoint import copy_side_files as copy

    files = (*PROCESSOR_FILES, *SIDE_FILES)
    what = "processor" if family.audio else "tokenizer"
    if folder is None:
        LOG.warning("dump_with_tokenizer_and_conf: %s was given as a model object, which has no checkpoint folder: "
                    "config.json is written without %s files (export the checkpoint folder to have them)",
                    type(model).__name__, what)
    elif not any((folder / name).is_file() for name in files):
        LOG.warning("dump_with_tokenizer_and_conf: %s holds no %s files: config.json is written without them",
                    folder, what)
    copy(folder, model, out, files=files, into=what)


def _whisper_tokens(model: transformers.PreTrainedModel, family: Family) -> dict[str, object]:
    """Whisper's language and task tokens (a runtime puts its own in the prompt)."""
    if not family.audio:
        return {}
    config = model.generation_config
    return {name: dict(getattr(config, attr)) for name, attr in
            (("language_token_ids", "lang_to_id"), ("task_token_ids", "task_to_id")) if getattr(config, attr, None)}


def _write(wrapper: torch.nn.Module, example: tuple[torch.Tensor, ...], path: Path, opts: LLMExportOptions, *,
           inputs: list[str], outputs: list[str], axes: dict[str, dict[int, str]], lines: list[str],
           passes: list[Pass], shards: StreamedCheckpoint | None) -> Artifact:
    """Trace ``wrapper`` on ``example`` and write ``path`` (checked afterwards, with the other
    artifact, against the model's own generation); the weights from ``shards`` when streamed."""
    from t2n.driver.export import export_model
    from t2n.options import compile_options, write_options

    path.parent.mkdir(parents=True, exist_ok=True)
    model: torch.nn.Module = wrapper.model  # type: ignore[assignment]
    options = compile_options(opts.target(), input_names=inputs, output_names=outputs, dynamic_axes=axes,
                              custom_extensions=lines, nnef_variable_naming_scheme=opts.naming_scheme,
                              passes=passes, weights_from=None if shards is None else shards.weights_inside(wrapper, model))
    with torch.no_grad():
        return export_model(wrapper.eval(), example, write_options(path), options)


def _write_encoder(model: transformers.PreTrainedModel, family: Family, layout: Seq2SeqLayout,
                   example: torch.Tensor, out: Path, opts: LLMExportOptions, shards: StreamedCheckpoint | None
                   ) -> Artifact:
    limit = family.encoder_limit(model.config)
    lines = [] if family.audio else ["tract_assert T >= 1", *([f"tract_assert T <= {limit}"] if limit else [])]
    LOG.info("exporting the encoder of %s to %s", type(model).__name__, out / ENCODER_PATH)
    return _write(EncoderWrapper(model, family.input_name), (example,), out / ENCODER_PATH, opts,
                  inputs=[family.input_name], outputs=layout.encoder_outputs(), axes=layout.encoder_axes(),
                  lines=lines, passes=[], shards=shards)


def _write_decoder(model: transformers.PreTrainedModel, family: Family, layout: Seq2SeqLayout, out: Path,
                   opts: LLMExportOptions, shards: StreamedCheckpoint | None) -> Artifact:
    """The decoder step; with tract's stateful cache, its self-attention cache inputs and
    outputs made tract's state by the interface pass run last in the pipeline."""
    from t2n.llm.common.stateful import StatefulKVCache

    limit = family.decoder_limit(model.config)
    lines = ["tract_assert P >= 0", "tract_assert S >= 1", "tract_assert T >= 1",
             *([f"tract_assert S + P <= {limit}"] if limit else []),
             *(f"tract_assert {name}: {mode['assert']}" for name, mode in MODES.items())]
    ids = torch.randint(0, int(model.config.vocab_size), (1, DECODER_EXAMPLE["S"]),
                        generator=torch.Generator().manual_seed(1))
    example = (ids, *layout.empty_cache(DECODER_EXAMPLE["P"], random=True), *layout.example_cross(DECODER_EXAMPLE["T"]))
    passes: list[Pass] = [*opts.forms().passes(), *([StatefulKVCache(layout.cache_pairs())] if layout.stateful else [])]
    LOG.info("exporting the decoder of %s (%d layers) to %s", type(model).__name__, layout.layers, out / DECODER_PATH)
    return _write(DecoderWrapper(model, layout.layers), example, out / DECODER_PATH, opts,
                  inputs=layout.traced_decoder_inputs(), outputs=layout.traced_decoder_outputs(),
                  axes=layout.decoder_axes(), lines=lines, passes=passes, shards=shards)
