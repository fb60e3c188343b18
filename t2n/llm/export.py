"""``export_llm``: a ``transformers`` causal LM (object or local folder) to a tract
artifact with an explicit KV cache, plus ``modes.json`` and sample inputs/outputs.

Everything the call is given is checked before ``export_dirpath`` is created; if the
export then fails, what this call created is removed again."""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import torch

from t2n.errors import InvalidArgumentError
from t2n.llm.checkpoint import check_architecture, copy_side_files, load_folder
from t2n.llm.io_dtype import with_inputs_dtype
from t2n.llm.kv_cache_forms import check_windows
from t2n.llm.moe import MoeExport
from t2n.llm.options import LLMExportOptions
from t2n.llm.recurrent_state import check_hybrid_forms, describe_states
from t2n.llm.samples import write_samples
from t2n.llm.stateful import stateful_passes
from t2n.llm.streaming import (
    StreamedCheckpoint,
    kept_buffers,
    meta_model,
    quantize_streamed,
    reference_wrapper,
)
from t2n.llm.verify import verify_against_transformers
from t2n.llm.wrapper import CacheLayout, KVCacheWrapper, cache_layout
from t2n.serialize.finite import report_nonfinite

LOG = logging.getLogger(__name__)

MODES = {
    "pp": {"assert": "P == 0", "description": "prompt processing: the whole prompt, empty cache"},
    "tg": {"assert": "S == 1", "description": "token generation: one new token after P cached ones"},
}
"""The named modes written as ``tract_assert NAME: ...`` lines and in ``modes.json``."""


def _resolve_model(model_or_dir: Any, opts: LLMExportOptions, *, stream: bool = True
                   ) -> tuple[torch.nn.Module, Path | None, StreamedCheckpoint | None]:
    """The model to trace, its folder, and for a folder its shards: a folder's model is
    built on the meta device and its weights stream from the shards (see streaming);
    with ``stream=False`` (an adapter to merge into the weights) it is loaded whole."""
    dtype = opts.torch_dtype()
    if isinstance(model_or_dir, (str, os.PathLike)):
        folder = Path(model_or_dir)
        model, shards = meta_model(folder, dtype=dtype, trust_remote_code=opts.trust_remote_code)
        if not stream:
            return load_folder(folder, dtype=dtype, trust_remote_code=opts.trust_remote_code), folder, None
        return model, folder, shards
    if not isinstance(model_or_dir, torch.nn.Module) or not hasattr(model_or_dir, "config"):
        raise InvalidArgumentError(
            "model_or_dir must be a transformers causal LM (a PreTrainedModel) or the path of a "
            f"local checkpoint folder, got {type(model_or_dir).__name__}")
    config = model_or_dir.config
    check_architecture([type(model_or_dir).__name__], getattr(config, "model_type", None),
                       f"the model given ({type(model_or_dir).__name__})")
    model = model_or_dir.eval()
    if dtype is not None:
        model = model.to(dtype)
    return model, None, None


def max_positions(config: Any) -> int | None:
    """How many positions the model embeds (``S + P`` must stay below it)."""
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


MODES_WITHOUT_PAST = {
    "pp": {"assert": "S >= 2", "description": "prompt processing: several tokens at once (a prompt starts "
                                              "from zero states)"},
    "tg": MODES["tg"],
}
"""The modes of a model without attention layers (no ``P``: a prompt is a call with zero
states, not a shape). tract needs both: with ``tg`` alone it specialises every call to
``S == 1``."""


def modes(has_past: bool = True) -> dict[str, dict[str, str]]:
    """The named modes a graph asserts."""
    return MODES if has_past else MODES_WITHOUT_PAST


def extension_lines(config: Any, has_past: bool = True) -> list[str]:
    """The ``tract_assert`` lines: bounds of ``S`` and ``P`` and the named modes."""
    lines = (["tract_assert P >= 0"] if has_past else []) + ["tract_assert S >= 1"]
    limit = max_positions(config)
    if limit is not None and has_past:
        lines.append(f"tract_assert S + P < {limit}")
    lines += [f"tract_assert {name}: {mode['assert']}" for name, mode in modes(has_past).items()]
    return lines


def _written_dtype(dtype: torch.dtype) -> str:
    return "float16" if dtype == torch.bfloat16 else str(dtype).removeprefix("torch.")


def write_modes(layout: CacheLayout, config: Any, out: Path, *, samples: bool = True) -> None:
    """``modes.json``: the symbols, the named modes and the cache layout a runtime needs."""
    description = {
        "format": "t2n-llm/1",
        "model": "model/model.nnef.tgz",
        "symbols": {"S": "tokens given in this call", "P": "tokens already in the cache"},
        "max_positions": max_positions(config),
        "modes": modes(layout.has_past()),
        "inputs": layout.graph_input_names(),
        "outputs": layout.graph_output_names(),
        "cache": {"form": "stateful" if layout.stateful else "explicit",
                  "num_layers": layout.num_layers, "kv_heads": layout.kv_heads,
                  "head_dim": layout.head_dim, "dtype": _written_dtype(layout.dtype),
                  **({"value_head_dim": layout.value_dim} if layout.value_head_dim is not None else {}),
                  "shape": "[B, kv_heads, P, head_dim] in, [B, kv_heads, P + S, head_dim] out",
                  **({"states": layout.state_names()} if layout.stateful else {}),
                  **({"quantized_bits": layout.kv_bits} if layout.kv_bits else {}),
                  **({"windows": {str(i): w for i, w in layout.windows}, "tokens_per_call": 1}
                     if layout.windows else {}),
                  **describe_states(layout)},
        "tests": [] if not samples else
                 ["tests/prefill.npz", "tests/decode.npz", *([] if layout.stateful else ["tests/io.npz"])],
    }
    (out / "modes.json").write_text(json.dumps(description, indent=2) + "\n")


def export_llm(model_or_dir: Any, export_dirpath: str | os.PathLike[str], *, dtype: str | None = None,
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
               image_sizes: Sequence[tuple[int, int]] | None = None) -> Path:
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
    """
    from t2n.reference.releases import check_transformers

    check_transformers()  # a warning naming the tested releases, outside them
    opts = LLMExportOptions(
        dtype=dtype, compression=compression, force_f32_attention=force_f32_attention,
        force_f32_linear_accumulator=force_f32_linear_accumulator, force_f32_normalization=force_f32_normalization,
        num_logits_to_keep=num_logits_to_keep, tract_version=tract_version, verify=verify,
        tract_check_io_tolerance=tract_check_io_tolerance, dump_with_tokenizer_and_conf=dump_with_tokenizer_and_conf,
        trust_remote_code=trust_remote_code, naming_scheme=naming_scheme, reify_sdpa_operator=reify_sdpa_operator,
        kv_cache=kv_cache, reify_rope=reify_rope, reify_rms_norm=reify_rms_norm, overwrite=overwrite,
        merge_peft=merge_peft, force_inputs_dtype=force_inputs_dtype,
        sample_generation_total_size=sample_generation_total_size, window_kv_cache=window_kv_cache,
        image_sizes=image_sizes)
    return export_with_options(model_or_dir, export_dirpath, opts)


def export_with_options(model_or_dir: Any, export_dirpath: str | os.PathLike[str], opts: LLMExportOptions) -> Path:
    """:func:`export_llm` with its options made: checked here once, then carried whole."""
    from t2n.llm.multimodal.entry import export_multimodal_llm, is_multimodal
    from t2n.llm.multimodal.export import TextLayout

    out = Path(export_dirpath)
    opts.check(out)
    if is_multimodal(model_or_dir):  # encoders, decoder and multimodal.json
        return export_multimodal_llm(model_or_dir, out, opts,
                                     text=TextLayout(write_modes, extension_lines, opts.forms().passes()))
    if opts.image_sizes is not None:
        raise InvalidArgumentError("image_sizes is for a vision-language model's encoder; a text model takes "
                                   "no images: export without it")
    return _export_text(model_or_dir, out, opts)


def _export_text(model_or_dir: Any, out: Path, opts: LLMExportOptions) -> Path:
    """A text LLM: the model loaded (or, without an adapter to merge, built on the meta
    device and streamed from its folder), exported into ``out`` by :func:`_export`; an
    ``out`` this call created is removed again when it fails."""
    model, folder, shards = _resolve_model(model_or_dir, opts, stream=opts.merge_peft is None)
    if opts.merge_peft is not None:
        from t2n.llm.peft import merge_adapter

        model = merge_adapter(model, opts.merge_peft)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        reference = None if shards is None else {
            "checkpoint": shards, "dtype": opts.torch_dtype(), "trust_remote_code": opts.trust_remote_code}
        return _export(model, folder, out, reference, opts)
    except BaseException:
        if created:
            shutil.rmtree(out, ignore_errors=True)
        raise


def _export(model: torch.nn.Module, folder: Path | None, out: Path, reference: dict[str, Any] | None,
            opts: LLMExportOptions) -> Path:
    forms = opts.forms()
    model, moe = _weights_as_exported(model, opts.compression, reference)
    with moe.tracing(), kept_buffers(model):  # one real step, on the meta device for a folder
        layout = cache_layout(model)
    check_hybrid_forms(layout, forms)
    windows = check_windows(model.config) if forms.window else {}
    wrapper, layout = with_inputs_dtype(KVCacheWrapper(model, opts.kept_logits, layout).eval(), layout,
                                        opts.force_inputs_dtype)
    layout = attrs.evolve(layout, stateful=forms.stateful, kv_bits=forms.kv_bits, windows=tuple(sorted(windows.items())))
    embeddings: Any = model.get_input_embeddings()  # type: ignore[operator]
    vocab = int(embeddings.weight.shape[0])
    example_ids = torch.randint(0, vocab, (1, 3), generator=torch.Generator().manual_seed(1))
    path = out / "model" / "model.nnef.tgz"
    example = (example_ids, *layout.empty_cache(2, random=True))
    artifact = _write_artifact(wrapper, model, example, layout, path, opts, weights_from=reference, moe=moe,
                               windows=windows)
    loaded = None if reference is None or not opts.verify else _streamed_reference(
        reference, artifact, compression=opts.compression, num_logits_to_keep=opts.kept_logits,
        q4_0_extra=moe.q4_0_weights())
    sampler = wrapper if reference is None else None if loaded is None else \
        with_inputs_dtype(loaded, cache_layout(loaded.model), opts.force_inputs_dtype)[0]
    if opts.verify and (reference is None or loaded is not None):
        verify_against_transformers(path, model if loaded is None else loaded.model, layout, vocab, opts.tolerance(),
                                    keep=opts.kept_logits, one_token=forms.window,
                                    note=artifact.nonfinite_weights_note())
    write_modes(layout, model.config, out, samples=sampler is not None)
    if sampler is not None:
        write_samples(sampler, layout, vocab, out, opts.sample_generation_total_size)
    if opts.dump_with_tokenizer_and_conf:
        copy_side_files(folder, model, out)
    return path


def _weights_as_exported(model: torch.nn.Module, compression: str | None,
                         reference: dict[str, Any] | None) -> tuple[torch.nn.Module, MoeExport]:
    """The model as it is traced: bf16 as f16 (what tract computes, so that PyTorch's reference
    outputs and samples are the artifact's), quantized when asked (from the shards when
    streamed, the experts' Q4_0 tensors too); with its experts' export plan."""
    from t2n.quant.model import quantize

    if next(model.parameters()).dtype == torch.bfloat16:
        LOG.info("bf16 weights are exported as f16")
        model = model.to(torch.float16)
    moe = MoeExport.of(model)
    if compression is not None:
        LOG.info("quantizing the weights with %s", compression)
        if reference is not None:
            quantize_streamed(model, reference["checkpoint"], compression, moe.q4_0_weights())
        else:
            quantize(model, compression)
            if moe.q4_0_weights():
                quantize(model, compression, tensors=moe.q4_0_weights())
    return model, moe


def _write_artifact(wrapper: torch.nn.Module, model: torch.nn.Module, example: tuple[torch.Tensor, ...],
                    layout: Any, path: Path, opts: LLMExportOptions, *, weights_from: dict[str, Any] | None,
                    moe: MoeExport, windows: dict[Any, Any]) -> Any:
    """Trace ``wrapper`` on ``example`` and write ``path``: the explicit-cache graph, or with
    tract's stateful cache (interface passes run last in the pipeline); weights from the
    shards when streamed (``weights_from``, the checkpoint reference). Not checked here
    against the wrapper it traces: the caller checks the written artifact against
    transformers' own model."""
    from t2n.driver.export import export_model
    from t2n.options import compile_options, write_options

    forms = opts.forms()
    path.parent.mkdir(exist_ok=True)
    LOG.info("exporting %s (%d layers) to %s", type(model).__name__, layout.num_layers, path)
    weights = None
    if weights_from is not None:  # streamed: the weights come from the shards
        prefix = next(n for n, m in wrapper.named_modules() if m is model) + "."
        weights = weights_from["checkpoint"].weights_for(model, prefix)
    options = compile_options(
        opts.target(), input_names=layout.input_names(), output_names=layout.output_names(),
        dynamic_axes=layout.dynamic_axes(), custom_extensions=extension_lines(model.config, layout.has_past()),
        nnef_variable_naming_scheme=opts.naming_scheme, extractors=moe.extractors, weights_from=weights,
        passes=[*forms.passes(), *(stateful_passes(layout, forms.kv_bits, windows) if forms.stateful else ())])
    with torch.no_grad(), moe.tracing():  # a stateful graph: the explicit one, its cache made tract's state
        return export_model(wrapper, example, write_options(path), options)


def nonfinite_parameters(model: torch.nn.Module) -> list[Any]:
    """The parameters and buffers of a loaded model that hold NaN (parameters: or infinite)
    values."""
    from t2n.serialize.finite import nonfinite_tensors
    from t2n.torch_data import tensor_data

    named = {id(t): (n, t) for n, t in [*model.named_buffers(), *model.named_parameters()]
             if t.is_floating_point() and t.device.type == "cpu"}
    params = {n for n, t in named.values() if isinstance(t, torch.nn.Parameter)}
    return nonfinite_tensors(((n, tensor_data(t), tensor_data(t).dtype) for n, t in named.values()),
                             infinities=params.__contains__)


def _streamed_reference(reference: dict[str, Any], artifact: Any, *, compression: str | None,
                        num_logits_to_keep: int | None, q4_0_extra: list[str] | None = None) -> Any:
    """For a streamed checkpoint being verified: the model loaded in PyTorch (if it fits
    the memory budget), wrapped as the traced module for the samples; ``None`` when it is
    not loaded (no check and no samples then). Non-finite weights are reported."""
    loaded = reference_wrapper(**reference, compression=compression, num_logits_to_keep=num_logits_to_keep,
                               q4_0_extra=q4_0_extra or ())
    if loaded is None:
        return None
    found = nonfinite_parameters(loaded.model)
    if found:  # the streamed weights were not read at compile: named from the loaded model
        artifact.stats["nonfinite_weights"] = [str(f) for f in found]
        report_nonfinite(found, strict=False)
    return loaded
