"""``export_llm``: what a ``transformers`` checkpoint becomes, by its kind: a causal LM
(:mod:`t2n.llm.text`), a vision- or audio-language model (:mod:`t2n.llm.multimodal`) or an
encoder-decoder (:mod:`t2n.llm.seq2seq`). The options are made and checked once here
(:class:`~t2n.llm.common.options.LLMExportOptions`) and carried whole to the family code.

Everything the call is given is checked before ``export_dirpath`` is created; if the
export then fails, what this call created is removed again."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from t2n.errors import InvalidArgumentError
from t2n.llm.common.options import LLMExportOptions

if TYPE_CHECKING:
    import transformers


def export_llm(model_or_dir: transformers.PreTrainedModel | str | os.PathLike[str],
               export_dirpath: str | os.PathLike[str], *, dtype: str | None = None,
               compression: str | None = None, force_f32_attention: bool = False,
               force_f32_linear_accumulator: bool = False, force_f32_normalization: bool = False,
               num_logits_to_keep: int | None = 1, tract_version: str | None = None,
               verify: bool = True, tract_check_io_tolerance: str | None = None,
               dump_with_tokenizer_and_conf: bool = False, trust_remote_code: bool = False,
               naming_scheme: str = "natural_verbose", reify_sdpa_operator: bool = False,
               kv_cache: str = "explicit", reify_rope: bool = False, reify_rms_norm: bool = False,
               overwrite: bool = False, merge_peft: str | os.PathLike[str] | None = None,
               force_inputs_dtype: str | None = None,
               sample_generation_total_size: int | None = None, window_kv_cache: bool = False,
               image_sizes: Sequence[tuple[int, int]] | None = None, copy_tied_weights: bool = True) -> Path:
    """Export a causal LM to ``export_dirpath``; returns the path of the ``.nnef.tgz``
    (of ``multimodal.json`` for a vision- or audio-language model: see
    :mod:`t2n.llm.multimodal`).

    ``model_or_dir``: a ``transformers`` ``*ForCausalLM`` model or a local checkpoint
    folder (``config.json`` + ``*.safetensors``; read with local files only, remote code
    only with ``trust_remote_code=True``). ``dtype``: ``"f32"``, ``"f16"`` or ``"bf16"``
    (written as f16), ``None`` keeps the checkpoint's. ``compression``: a Q4_0 recipe of
    :func:`t2n.quantize` (applied to the loaded model; a model object given is changed).
    ``force_f32_*``: compute attention, linear accumulation or normalization in f32.
    ``num_logits_to_keep``: logits of only the last N positions (default 1: what
    generating the next token needs); ``0`` or ``None``: every position's. ``verify``: run the
    artifact in tract at the traced sizes and compare with PyTorch (``CheckMismatchError``).
    ``dump_with_tokenizer_and_conf``: ``config.json`` and ``tokenizer/`` beside the graph.
    ``naming_scheme``: how graph.nnef names tensors (``nnef_variable_naming_scheme``).
    ``reify_sdpa_operator``: attention as tract's ``tract_transformers_sdpa`` (0.22+).
    ``merge_peft``: a LoRA/DoRA adapter folder merged into the weights before export.
    ``force_inputs_dtype``: ``"f32"`` or ``"f16"``, the dtype of the cache inputs and of
    the outputs (cast inside the graph). ``sample_generation_total_size``: tokens (prompt
    included) of the greedy generation written as ``tests/io.npz``.
    ``kv_cache``: ``"explicit"`` (cache inputs and outputs) or ``"stateful"`` (tract's
    ``tract_transformers_dyn_kv_cache``, 0.23+: only ``input_ids`` in, ``outputs`` out;
    ``tests/io.npz`` is then not written, its steps need the explicit cache);
    ``"stateful_int8"`` / ``"stateful_int4"``: kept quantized
    (``tract_transformers_quantized_dyn_kv_cache``, 0.23.5+).
    ``window_kv_cache``: with a stateful cache, the sliding-window layers keep only their
    window (``tract_transformers_window_kv_sdpa``); each call then takes one token.
    ``reify_rope`` / ``reify_rms_norm``: rotary embeddings as ``tract_transformers_apply_rope``
    (0.22+), RMS normalizations as ``tract_core_rms_norm`` (0.23+); found by pattern,
    older targets keep the decomposed form.
    ``image_sizes``: for a vision-language model whose encoder is fixed to one image size
    (Qwen2.5-VL, Qwen3-VL), the (height, width) pixel sizes to write an encoder artifact
    for, one each; Mistral 3's one encoder takes every size, and is checked at these
    (see ``docs/multimodal.md``).
    ``copy_tied_weights``: the output projection of a model whose embedding it shares reads
    a transposed copy of the matrix (one more copy on disk), which tract packs once at load;
    False writes the matrix once and tract packs it at every call (6-14x slower per token
    in benchmarks/RESULTS_SEQ2SEQ.md).
    """
    opts = LLMExportOptions(
        dtype=dtype, compression=compression, force_f32_attention=force_f32_attention,
        force_f32_linear_accumulator=force_f32_linear_accumulator, force_f32_normalization=force_f32_normalization,
        num_logits_to_keep=num_logits_to_keep, tract_version=tract_version, verify=verify,
        tract_check_io_tolerance=tract_check_io_tolerance, dump_with_tokenizer_and_conf=dump_with_tokenizer_and_conf,
        trust_remote_code=trust_remote_code, naming_scheme=naming_scheme, reify_sdpa_operator=reify_sdpa_operator,
        kv_cache=kv_cache, reify_rope=reify_rope, reify_rms_norm=reify_rms_norm, overwrite=overwrite,
        merge_peft=merge_peft, force_inputs_dtype=force_inputs_dtype,
        sample_generation_total_size=sample_generation_total_size, window_kv_cache=window_kv_cache,
        image_sizes=image_sizes, copy_tied_weights=copy_tied_weights)
    return export_with_options(model_or_dir, export_dirpath, opts)


def export_with_options(model_or_dir: transformers.PreTrainedModel | str | os.PathLike[str],
                        export_dirpath: str | os.PathLike[str], opts: LLMExportOptions) -> Path:
    """:func:`export_llm` with its options made (what ``t2n llm`` calls): checked here once,
    then carried whole."""
    from t2n.llm.multimodal.entry import export_multimodal_llm, is_multimodal
    from t2n.llm.seq2seq import export_seq2seq, is_seq2seq
    from t2n.llm.text.export import export_text
    from t2n.reference.releases import check_transformers

    check_transformers()  # a warning naming the tested releases, outside them
    out = Path(export_dirpath)
    opts.check(out)
    if is_seq2seq(model_or_dir):  # an encoder, a decoder with self- and cross-attention caches, seq2seq.json
        return export_seq2seq(model_or_dir, out, opts)
    if is_multimodal(model_or_dir):  # encoders, decoder and multimodal.json
        return export_multimodal_llm(model_or_dir, out, opts)
    if opts.image_sizes is not None:
        raise InvalidArgumentError("image_sizes is for a vision-language model's encoder; a text model takes "
                                   "no images: export without it")
    return export_text(model_or_dir, out, opts)
